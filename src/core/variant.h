/*-------------------------------------------------------------------------
 *
 * variant.h
 *	  What differs between convctx on a single server and on a Citus
 *	  cluster, in one table chosen in one place.
 *
 * The core files (turns, reads, tenancy, purge, ...) are written for one
 * server. Where a Citus cluster needs something else, they ask Variant()
 * instead of testing for Citus themselves: a field says how a statement
 * is shaped or planned, or names the code that runs instead (PostgreSQL's
 * hook idiom: NULL means the single server's own code). The single
 * server's table is in variant.c; citus.c fills the other and chooses
 * between them (VariantRegister, at load), so that nothing below knows
 * about Citus.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/variant.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_VARIANT_H
#define CONVCTX_VARIANT_H

#include "postgres.h"

#include "nodes/parsenodes.h"
#include "utils/hsearch.h"

typedef struct ConvctxVariant
{
	const char *name;

	/*
	 * Cursor options of kept plans: generic plans on a single server; on
	 * Citus custom plans, which it routes to a shard by their values.
	 */
	int			plan_options;

	/*
	 * This node's tables hold their rows, so that a heap or an index may be
	 * read directly and a row updated by its TID (on Citus the tables are
	 * empty shells and their rows live in shards).
	 */
	bool		rows_here;

	/*
	 * Each statement must reach one shard: no statement locks or reads
	 * several sessions' rows at once, and an upsert's DO UPDATE calls no
	 * function that is not immutable.
	 */
	bool		one_shard_statements;

	/*
	 * Changes of convctx.role_tenant reach this node's cache through the
	 * table's trigger; else the bindings are read again once per
	 * transaction.
	 */
	bool		bindings_announced;

	/*
	 * The audit row is written by the extension's owner, since the node
	 * that writes it cannot log in as convctx_audit.
	 */
	bool		audit_by_owner;

	/* The relation on this node that holds the rows of reference table relid. */
	Oid			(*reference_rows) (Oid relid);

	/*
	 * Whether this backend serves a call that another node forwarded (NULL:
	 * calls are never forwarded).
	 */
	bool		(*forwarded_call) (void);

	/*
	 * ERROR for a function this variant does not run (NULL: every function
	 * runs).
	 */
	void		(*refuse) (const char *function, const char *hint);

	/* One pass of the retention purge (NULL: the single server's, purge). */
	void		(*purge_once) (int32 batch, text *tenant, HTAB *tenants);
} ConvctxVariant;

extern const ConvctxVariant *Variant(void);
extern void VariantRegister(const ConvctxVariant *(*choose) (void));
extern bool CallForwarded(void);
extern void VariantRefuse(const char *function, const char *hint);

/*
 * Called for every statement planned that is not one of convctx's kept
 * plans, before it is planned; returns whether the plan depends on the
 * calling role. NULL on a single server.
 */
typedef bool (*PlanCallHook) (Query *parse);
extern PlanCallHook plan_call_hook;

#endif							/* CONVCTX_VARIANT_H */
