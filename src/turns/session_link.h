/*-------------------------------------------------------------------------
 *
 * session_link.h
 *	  Links of sessions to identities (session_link.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns/session_link.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_SESSION_LINK_H
#define CONVCTX_SESSION_LINK_H

#include "postgres.h"

#include "datatype/timestamp.h"

/* Session links (session_link.c) */
extern void SessionLinkLocked(text *tenant, text *session_id, text *current_identity,
							  text *identity_id, bool backfill);
extern void SessionLinkAt(text *tenant, text *session_id, text *identity_id,
						  TimestampTz linked_at);

#endif							/* CONVCTX_SESSION_LINK_H */
