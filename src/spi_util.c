/*-------------------------------------------------------------------------
 *
 * spi_util.c
 *	  SPI plans prepared once per backend and reused.
 *
 * A kept plan is a cached plan source: PostgreSQL re-analyzes it when the
 * objects it uses change (for instance after DROP and CREATE EXTENSION in
 * the same backend), so the cache never needs explicit invalidation.
 * Every statement is written with schema-qualified names and operators,
 * because it is parsed under the caller's search_path.
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

#include "executor/spi.h"
#include "nodes/parsenodes.h"
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
