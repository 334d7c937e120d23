/*-------------------------------------------------------------------------
 *
 * tenancy.h
 *	  The tenant a call acts for (tenancy.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/tenancy.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_TENANCY_H
#define CONVCTX_TENANCY_H

#include "postgres.h"

/* Tenancy (tenancy.c) */
extern void TenancyInit(void);
extern text *CurrentTenant(void);
extern const char *BoundTenant(void);
extern bool TenantTravelsWithCall(void);
extern int	TenantForCallBegin(text *tenant);
extern void TenantForCallEnd(int nestlevel);

#endif							/* CONVCTX_TENANCY_H */
