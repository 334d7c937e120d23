/*-------------------------------------------------------------------------
 *
 * spi_plans.c
 *	  SPI plans prepared once per backend and reused, run as the owner, and
 *	  their results.
 *
 * A kept plan is a cached plan source: PostgreSQL re-analyzes it when the
 * objects it uses change (for instance after DROP and CREATE EXTENSION in
 * the same backend), so the cache never needs explicit invalidation.
 * Every statement is written with schema-qualified names, functions,
 * aggregates and operators, so that what it means never depends on a
 * search_path; the functions pin theirs to pg_catalog, pg_temp as well
 * (SET in their definitions), which does not contain schema convctx, so
 * nothing planted there can be picked up by name.
 *
 * The planner hook (planner.c) plans the keyed statements without
 * sequential scans.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/spi_plans.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "funcapi.h"
#include "nodes/pg_list.h"
#include "utils/plancache.h"
#include "utils/snapmgr.h"

#include "core/catalog.h"
#include "core/owner.h"
#include "core/planner.h"
#include "core/spi_plans.h"
#include "core/variant.h"

/* Prepare a statement with the cursor options given and keep it. */
static SPIPlanPtr
SpiKeep(const char *sql, int nargs, Oid *argtypes, int options)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, argtypes, options);

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	return plan;
}

/*
 * Return the plan cached in *cache, preparing and keeping it on first use.
 * Must be called between SPI_connect and SPI_finish.
 */
SPIPlanPtr
SpiKeptPlan(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes)
{
	if (!CatalogChecked())
		CatalogCheck();
	if (*cache == NULL)
	{
		/*
		 * Generic plans only: every statement here is a keyed lookup or a
		 * short index range whose best plan does not depend on the values,
		 * and a custom plan would be planned again on every call (LIMIT $n
		 * makes the planner doubt the generic one). On Citus, custom plans
		 * only (variant.h): Citus cannot plan most of these statements with
		 * their parameters unbound, and routes each to its shard by the value.
		 */
		*cache = SpiKeep(sql, nargs, argtypes, Variant()->plan_options);
	}
	else
	{
		/* kept before the variant changed (convctx.distribute() elsewhere) */
		CachedPlanSource *source = linitial(SPI_plan_get_plan_sources(*cache));
		int			options = Variant()->plan_options;
		int			kinds = CURSOR_OPT_GENERIC_PLAN | CURSOR_OPT_CUSTOM_PLAN;

		if (unlikely((source->cursor_options & kinds) != options))
			source->cursor_options = (source->cursor_options & ~kinds) | options;
	}
	return *cache;
}

/*
 * The same for a statement that acts on the keys of an array parameter
 * (the sessions of an erasure), planned again for each array: a generic
 * plan takes any array to hold ten elements, so that reading a whole
 * tenant and comparing each row with every element of the array (no hash
 * for a parameter) can look cheaper than probing the keys. Planned for
 * the array it is given, the statement probes the keys when they are few
 * and hashes them when they are many. Erasure runs it once per call, so
 * planning costs little beside what it writes.
 */
SPIPlanPtr
SpiKeptCustomPlan(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes)
{
	if (!CatalogChecked())
		CatalogCheck();
	if (*cache == NULL)
		*cache = SpiKeep(sql, nargs, argtypes, CURSOR_OPT_CUSTOM_PLAN);
	return *cache;
}
/* The source text the plan cache hands the planner for a kept plan. */
static const char *
PlanQueryString(SPIPlanPtr plan)
{
	List	   *sources = SPI_plan_get_plan_sources(plan);

	return sources != NIL ? ((CachedPlanSource *) linitial(sources))->query_string : NULL;
}

/*
 * While set, statements run through SpiRunBulkPlan read the newest
 * committed data instead of the transaction's snapshot, which a repeatable
 * read or serializable transaction keeps from its first statement. purge
 * sets it around its passes at those levels (PurgeAtSnapshotLevel in
 * purge.c), so that what a pass locks and deletes is the newest version
 * of each row, as under read committed: a row changed since the snapshot
 * is then judged by its new version instead of failing the pass with
 * 40001. The command counter advances before each statement, so the
 * transaction's own earlier changes are seen too. Returns the old value,
 * for the caller to restore (also on error).
 */
static bool bulk_latest = false;

bool
SpiBulkReadLatest(bool on)
{
	bool		old = bulk_latest;

	bulk_latest = on;
	return old;
}

static int
SpiRun(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only,
	   long count, int expected_rc, bool keyed, Snapshot snapshot)
{
	const char *outer;
	volatile int rc = 0;
	OwnerSwitch sw;

	ActAsOwner(&sw);
	outer = PlannerKeyedQuery(keyed ? PlanQueryString(plan) : NULL);
	PG_TRY();
	{
		if (snapshot != InvalidSnapshot)
			rc = SPI_execute_snapshot(plan, values, nulls, snapshot, InvalidSnapshot,
									  read_only, true, count);
		else
			rc = SPI_execute_plan(plan, values, nulls, read_only, count);
	}
	PG_FINALLY();
	{
		(void) PlannerKeyedQuery(outer);
		ActAsCaller(&sw);
	}
	PG_END_TRY();

	if (rc != expected_rc)
		elog(ERROR, "SPI_execute_plan returned %s, expected %s",
			 SPI_result_code_string(rc), SPI_result_code_string(expected_rc));
	return rc;
}

/*
 * Execute a kept plan of a statement that finds its rows by key or key
 * range, planned without sequential scans, and insist on the expected SPI
 * result code; an unexpected code is an internal error, not something a
 * user can cause.
 */
int
SpiRunPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
		   bool read_only, long count, int expected_rc)
{
	return SpiRun(plan, values, nulls, read_only, count, expected_rc, true, InvalidSnapshot);
}

/* The same for a statement that may read much of a table: planned freely. */
int
SpiRunBulkPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
			   bool read_only, long count, int expected_rc)
{
	return SpiRun(plan, values, nulls, read_only, count, expected_rc, false,
				  bulk_latest && !read_only ? GetLatestSnapshot() : InvalidSnapshot);
}

/*
 * A statement planned freely and run on the newest committed rows,
 * whatever the isolation level: for the rows that must go with a deleted
 * session (convctx_session_deleted), including any committed after a
 * repeatable read transaction's snapshot.
 */
int
SpiRunBulkPlanLatest(SPIPlanPtr plan, Datum *values, const char *nulls, int expected_rc)
{
	return SpiRun(plan, values, nulls, false, 0, expected_rc, false, GetLatestSnapshot());
}

/* The same for a statement that finds its rows by key: planned as SpiRunPlan's. */
int
SpiRunPlanLatest(SPIPlanPtr plan, Datum *values, const char *nulls, int expected_rc)
{
	return SpiRun(plan, values, nulls, false, 0, expected_rc, true, GetLatestSnapshot());
}

/*
 * Copy the rows of the last statement into a materialized result set; the
 * statement's columns are the function's, in order and type (checked).
 */
void
SpiRowsToResult(ReturnSetInfo *rsinfo)
{
	TupleDesc	desc = rsinfo->setDesc;
	uint64		i;
	int			c;

	if (SPI_tuptable->tupdesc->natts != desc->natts)
		elog(ERROR, "statement returns %d columns, the function %d",
			 SPI_tuptable->tupdesc->natts, desc->natts);
	if (desc->natts > 32)
		elog(ERROR, "function returns %d columns, at most 32 are supported", desc->natts);
	for (c = 0; c < desc->natts; c++)
		if (SPI_gettypeid(SPI_tuptable->tupdesc, c + 1) != TupleDescAttr(desc, c)->atttypid)
			elog(ERROR, "column %d of the statement is not of the function's type", c + 1);
	for (i = 0; i < SPI_processed; i++)
	{
		Datum		row[32];
		bool		row_nulls[32];

		for (c = 0; c < desc->natts; c++)
			row[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1,
								   &row_nulls[c]);
		/* the tuplestore copies the row into its own memory */
		tuplestore_putvalues(rsinfo->setResult, desc, row, row_nulls);
	}
}

/* The first column of the first row of the last result as int8; 0 for NULL. */
int64
SpiFirstInt8(void)
{
	bool		isnull;
	Datum		d;

	if (SPI_tuptable == NULL || SPI_processed == 0)
		return 0;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetInt64(d);
}
/*
 * Column col of row 0 of the last result, copied out of SPI's memory into
 * the context that was current at SPI_connect, so that it outlives
 * SPI_finish: the one way a single value leaves SPI. (Whole results are
 * built in the caller's context instead: see the prompt files.)
 */
Datum
SpiFirstDatumCopy(int col, bool *isnull)
{
	TupleDesc	desc = SPI_tuptable->tupdesc;
	Form_pg_attribute att = TupleDescAttr(desc, col - 1);
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], desc, col, isnull);

	return *isnull ? (Datum) 0 : SPI_datumTransfer(d, att->attbyval, att->attlen);
}

/*
 * Run the kept plan of a statement whose only parameters are the session
 * key (SESSION_KEY: $1 tenant, $2 session_id); returns the SPI code.
 */
int
SpiRunSessionPlan(SPIPlanPtr *cache, const char *sql, text *tenant, text *session_id,
				  bool read_only, long count, int expected_rc)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {PointerGetDatum(tenant), PointerGetDatum(session_id)};

	return SpiRunPlan(SpiKeptPlan(cache, sql, 2, argtypes), values, NULL,
					  read_only, count, expected_rc);
}
