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
 * Copyright (c) 2026, the convctx authors
 *
 * src/spi_util.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "nodes/parsenodes.h"

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

/*
 * Execute a kept plan and insist on the expected SPI result code; an
 * unexpected code is an internal error, not something a user can cause.
 */
int
SpiRunPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
		   bool read_only, long count, int expected_rc)
{
	int			rc = SPI_execute_plan(plan, values, nulls, read_only, count);

	if (rc != expected_rc)
		elog(ERROR, "SPI_execute_plan returned %s, expected %s",
			 SPI_result_code_string(rc), SPI_result_code_string(expected_rc));
	return rc;
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
