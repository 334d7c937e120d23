/*-------------------------------------------------------------------------
 *
 * spi_util.c
 *	  SPI plans prepared once per backend and reused.
 *
 * A kept plan is a cached plan source: PostgreSQL re-analyzes it when the
 * objects it uses change (for instance after DROP and CREATE EXTENSION in
 * the same backend), so the cache never needs explicit invalidation.
 * Every statement is written with schema-qualified names and operators,
 * so that what it means never depends on a search_path (the functions pin
 * theirs as well).
 *
 * A generic plan is made once and kept until an invalidation (an ANALYZE,
 * say), so a plan chosen from the statistics of a small table stays for
 * the life of the backend. On a table of a few pages a sequential scan
 * costs less than a primary-key probe, and a kept plan that reads all of
 * convctx.session on every start_turn would stay after the table grows.
 * So statements are planned with sequential scans disabled (the planner
 * still takes one where no index applies); only the retention passes,
 * which read large parts of tables, are planned freely.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/spi_util.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "utils/guc.h"

#include "convctx.h"

/*
 * Return the plan cached in *cache, preparing and keeping it on first use.
 * Must be called between SPI_connect and SPI_finish.
 */
SPIPlanPtr
SpiKeptPlan(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes)
{
	if (*cache == NULL)
	{
		/*
		 * Generic plans only: every statement here is a keyed lookup or a
		 * short index range whose best plan does not depend on the values,
		 * and a custom plan would be planned again on every call (LIMIT $n
		 * makes the planner doubt the generic one).
		 */
		SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, argtypes,
											  CURSOR_OPT_GENERIC_PLAN);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		*cache = plan;
	}
	return *cache;
}

static int
SpiRun(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only,
	   long count, int expected_rc, bool keyed)
{
	int			nestlevel = -1;
	int			rc;

	/*
	 * The setting only matters when the plan is (re)made, which happens
	 * inside SPI_execute_plan whenever an invalidation arrives, so it is
	 * in force for every execution. An error unwinds it with the
	 * transaction.
	 */
	if (keyed)
	{
		nestlevel = NewGUCNestLevel();
		(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	}
	rc = SPI_execute_plan(plan, values, nulls, read_only, count);
	if (keyed)
		AtEOXact_GUC(false, nestlevel);

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
	return SpiRun(plan, values, nulls, read_only, count, expected_rc, true);
}

/* The same for a statement that may read much of a table: planned freely. */
int
SpiRunBulkPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
			   bool read_only, long count, int expected_rc)
{
	return SpiRun(plan, values, nulls, read_only, count, expected_rc, false);
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
 * Pin the search path to pg_catalog, convctx, then the session's temporary
 * schema (when it has one) for the rest of the call, as SET search_path =
 * pg_catalog, convctx, pg_temp in a function's definition does. The
 * per-request SECURITY DEFINER functions (start_turn, finalize_turn,
 * recent_turns, recent_turns_json) pin it this way instead: with SET, each
 * call saves, parses, assigns and restores the setting and recomputes the
 * search path as the owner and again as the caller, in PostgreSQL 15 about
 * 4% of the instructions of a turn and 5% of its throughput. The path is
 * the same as SET's, so a plan kept under one matches under the other (no
 * re-planning when functions of both kinds share a statement). An error
 * pops it with the (sub)transaction; otherwise UnpinSearchPath pops it.
 */
void
PinSearchPath(void)
{
	OverrideSearchPath path;
	Oid			temp_namespace;
	Oid			temp_toast_namespace;

	path.schemas = list_make2_oid(PG_CATALOG_NAMESPACE, get_namespace_oid("convctx", false));
	GetTempNamespaceState(&temp_namespace, &temp_toast_namespace);
	if (OidIsValid(temp_namespace))
		path.schemas = lappend_oid(path.schemas, temp_namespace);
	path.addCatalog = false;	/* it is first already */
	path.addTemp = false;		/* it is last, if anywhere */
	path.generation = 0;
	PushOverrideSearchPath(&path);
	list_free(path.schemas);
}

void
UnpinSearchPath(void)
{
	PopOverrideSearchPath();
}
