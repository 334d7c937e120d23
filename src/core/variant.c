/*-------------------------------------------------------------------------
 *
 * variant.c
 *	  The single server's variant, and the one place where the variant of
 *	  this database is chosen (variant.h).
 *
 * Nothing here depends on another convctx file: citus.c registers its
 * chooser at load (VariantRegister), and until it does, or when it finds
 * convctx's tables are not distributed, every call gets the single
 * server's table.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/variant.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/parsenodes.h"

#include "core/variant.h"

PlanCallHook plan_call_hook = NULL;

/* On one server a reference table holds its own rows. */
static Oid
OwnRows(Oid relid)
{
	return relid;
}

static const ConvctxVariant single_server = {
	.name = "single server",
	.plan_options = CURSOR_OPT_GENERIC_PLAN,
	.rows_here = true,
	.bindings_announced = true,
	.reference_rows = OwnRows,
	/* the rest false or NULL: see variant.h */
};

static const ConvctxVariant *(*chooser) (void) = NULL;

/* The variant of this database, as the registered chooser decides. */
const ConvctxVariant *
Variant(void)
{
	const ConvctxVariant *v = chooser ? chooser() : NULL;

	return v ? v : &single_server;
}

/* From the module that knows the other variant, at load. */
void
VariantRegister(const ConvctxVariant *(*choose) (void))
{
	chooser = choose;
}

/*
 * For a function that does not run in every variant: the variant's ERROR,
 * or nothing.
 */
void
VariantRefuse(const char *function, const char *hint)
{
	const ConvctxVariant *v = Variant();

	if (v->refuse)
		v->refuse(function, hint);
}

/* Whether this backend serves a call that another node forwarded. */
bool
CallForwarded(void)
{
	const ConvctxVariant *v = Variant();

	return v->forwarded_call != NULL && v->forwarded_call();
}
