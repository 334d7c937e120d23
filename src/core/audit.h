/*-------------------------------------------------------------------------
 *
 * audit.h
 *	  The audit log (audit.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/audit.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_AUDIT_H
#define CONVCTX_AUDIT_H

#include "postgres.h"

/* The audit log (audit.c) */
extern void AuditWrite(text *tenant, const char *action, text *session_id,
					   text *identity_id, const char *details_json);
extern bool AuditWriteAutonomous(text *tenant, const char *action, text *session_id,
								 text *identity_id, const char *details_json);

#endif							/* CONVCTX_AUDIT_H */
