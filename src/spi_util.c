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
 * which read large parts of tables, are planned freely. The setting is
 * made in a planner hook, only when a plan is actually (re)made: a GUC
 * nest level around every execution cost about 2% of a turn.
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
#include "optimizer/planner.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/syscache.h"

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
 * Whether plans made now are for a keyed statement of ours. Set around
 * SPI_execute_plan, which (re)plans inside when the kept plan was
 * invalidated; it stays set for code the statement runs, which the GUC
 * nest level it replaces covered as well.
 */
static bool planning_keyed = false;
static planner_hook_type prev_planner_hook = NULL;

static PlannedStmt *
NextPlanner(Query *parse, const char *query_string, int cursor_options,
			ParamListInfo bound_params)
{
	if (prev_planner_hook)
		return prev_planner_hook(parse, query_string, cursor_options, bound_params);
	return standard_planner(parse, query_string, cursor_options, bound_params);
}

static PlannedStmt *
KeyedPlanner(Query *parse, const char *query_string, int cursor_options,
			 ParamListInfo bound_params)
{
	PlannedStmt *result;
	int			nestlevel;

	if (!planning_keyed)
		return NextPlanner(parse, query_string, cursor_options, bound_params);

	/* An error unwinds the nest level with the (sub)transaction. */
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	result = NextPlanner(parse, query_string, cursor_options, bound_params);
	AtEOXact_GUC(true, nestlevel);
	return result;
}

/* Oid of schema convctx, looked up once and forgotten when any schema changes. */
static Oid	convctx_namespace = InvalidOid;

static void
NamespaceInvalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	convctx_namespace = InvalidOid;
}

/* From _PG_init. */
void
SpiInit(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = KeyedPlanner;
	CacheRegisterSyscacheCallback(NAMESPACEOID, NamespaceInvalidate, (Datum) 0);
}

static int
SpiRun(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only,
	   long count, int expected_rc, bool keyed)
{
	bool		outer = planning_keyed;
	int			rc;

	planning_keyed = keyed;
	PG_TRY();
	{
		rc = SPI_execute_plan(plan, values, nulls, read_only, count);
	}
	PG_FINALLY();
	{
		planning_keyed = outer;
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

	if (!OidIsValid(convctx_namespace))
		convctx_namespace = get_namespace_oid("convctx", false);
	path.schemas = list_make2_oid(PG_CATALOG_NAMESPACE, convctx_namespace);
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
