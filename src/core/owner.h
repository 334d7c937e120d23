/*-------------------------------------------------------------------------
 *
 * owner.h
 *	  Acting as the extension's owner for the tables (owner.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/owner.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_OWNER_H
#define CONVCTX_OWNER_H

#include "postgres.h"

typedef struct OwnerSwitch
{
	Oid			user;
	int			sec_context;
	int			depth;
	int			nestlevel;		/* of the settings changed as the owner */
} OwnerSwitch;
extern void ActAsOwner(OwnerSwitch *sw);
extern void ActAsCaller(OwnerSwitch *sw);
extern Oid	ConvctxInvoker(void);

#endif							/* CONVCTX_OWNER_H */
