/*-------------------------------------------------------------------------
 *
 * owner.c
 *	  Acting as the extension's owner for the tables, and back as the caller.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/owner.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"

#include "core/catalog.h"
#include "core/owner.h"

/*
 * While a statement runs as the extension's owner (ConvctxOwner),
 * owner_depth > 0 and owner_invoker is the role that called into convctx.
 */
static int	owner_depth = 0;
static Oid	owner_invoker = InvalidOid;

/*
 * Act as the extension's owner, for statements on the tables and direct
 * reads of them. The functions of convctx are not SECURITY DEFINER: a
 * SECURITY DEFINER function cannot tell who called it (a role's own
 * SECURITY DEFINER function, or an index expression run as the table's
 * owner by a superuser's ANALYZE, would look like the superuser), so each
 * function decides the tenant from the role that really called it
 * (ConvctxInvoker) and then switches to the owner here, the way
 * SECURITY DEFINER would. ActAsCaller switches back; an error in between
 * must reach it through PG_FINALLY (an aborted transaction restores the
 * user as well).
 *
 * The rule of owner mode (docs/security.md, "Owner mode"): nothing the
 * caller can name, create, replace or run is reached while acting as the
 * owner. Only statements convctx prepared itself run here, and owner mode
 * never spans a return to the caller with anything looked up by name
 * afterwards (a portal, a prepared statement): what is kept between calls
 * is kept as the object itself and checked to be still convctx's
 * (export.c). As PostgreSQL's own maintenance commands do, the stretch is
 * a security-restricted operation (no SET ROLE, no temporary objects, no
 * CLOSE, DISCARD or LISTEN), and the settings it changes are undone when
 * it ends, so that even a mistake cannot leave the owner's rights behind.
 */
void
ActAsOwner(OwnerSwitch *sw)
{
	if (!CatalogChecked())
		CatalogCheck();
	GetUserIdAndSecContext(&sw->user, &sw->sec_context);
	sw->depth = owner_depth;
	if (owner_depth == 0)
		owner_invoker = sw->user;
	owner_depth++;
	SetUserIdAndSecContext(ConvctxOwner(), sw->sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	sw->nestlevel = NewGUCNestLevel();
}

void
ActAsCaller(OwnerSwitch *sw)
{
	AtEOXact_GUC(false, sw->nestlevel);
	SetUserIdAndSecContext(sw->user, sw->sec_context);
	owner_depth = sw->depth;
}

/*
 * The role that called into convctx: the current user, or while a
 * statement runs as the owner, the user it was run for.
 */
Oid
ConvctxInvoker(void)
{
	return owner_depth > 0 ? owner_invoker : GetUserId();
}
