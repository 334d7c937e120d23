/*-------------------------------------------------------------------------
 *
 * planner.c
 *	  The planner hook that plans convctx's keyed statements without
 *	  sequential scans, and the statistics hook for their never analyzed keys.
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
 * src/core/planner.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_statistic.h"
#include "commands/extension.h"
#include "optimizer/planner.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/selfuncs.h"
#include "utils/syscache.h"

#include "core/catalog.h"
#include "core/planner.h"
#include "core/variant.h"

/*
 * The source text of the keyed statement being executed, or NULL. Set
 * around SPI_execute_plan, which (re)plans inside when the kept plan was
 * invalidated; the hook compares it with the text it is asked to plan (the
 * plan source's own copy, so a pointer comparison), so only that statement
 * is planned without sequential scans.
 */
static const char *keyed_query = NULL;
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

	/*
	 * Only the statement itself: a foreign-key check or anything else that
	 * is planned while it runs has another source text and is planned as
	 * the session would plan it.
	 */
	if (keyed_query == NULL || query_string != keyed_query)
	{
		bool		by_caller = plan_call_hook && plan_call_hook(parse);

		result = NextPlanner(parse, query_string, cursor_options, bound_params);
		/* planned for this role: a cached plan is planned again for another (SET ROLE) */
		if (by_caller)
			result->dependsOnRole = true;
		return result;
	}

	/* An error unwinds the nest level with the (sub)transaction. */
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	result = NextPlanner(parse, query_string, cursor_options, bound_params);
	AtEOXact_GUC(true, nestlevel);
	return result;
}

/*
 * Statistics of the keys of a table never analyzed.
 *
 * Until a table is first analyzed, the planner takes every column to
 * have 200 distinct values. Its estimates of a key then tie: on
 * convctx.turn, "tenant_id = $1 AND session_id = $2" makes 1 row of a few
 * thousand, so a probe by turn_id may walk turn_chronology (or
 * turn_request_current) through the whole session, with turn_id as a
 * filter; "tenant_id = $1" alone makes 0.5% of the table, so an index on
 * (tenant_id, x) looks cheaper than ten probes of "session_id = ANY ($2)",
 * which is then compared with every element of the array for each row of
 * the tenant. A kept plan made so stays until the table is analyzed (a
 * redaction after a large import held its session's lock for seconds).
 *
 * So while convctx plans a statement that finds its rows by key (those
 * run by SpiRunPlan, keyed_query set, and what they plan while they run:
 * the foreign-key checks and cascades), a column of one of its tables
 * that has no statistics gets the distinct count its keys imply, and no
 * other statistic: tenant_id one value (a scan of a tenant is a scan of
 * the table), turn_id and the session key of the tables that hold a row
 * per session one per row, the session key and turn_no of the others
 * about ten rows per value; replaced_by_turn_id and deleted_at of a turn
 * are null on most rows. A probe by a whole key then costs less than a
 * walk of its prefix, whatever the sizes, and the table's own statistics
 * replace these as soon as it is analyzed. Only the tables of convctx
 * and convctx_recall get them.
 */
static get_relation_stats_hook_type prev_relation_stats_hook = NULL;

/*
 * The statistics a never analyzed column of a convctx table gets: false
 * for a column left to the planner's defaults.
 */
static bool
KeyStats(const char *relname, const char *attname, float4 *distinct, float4 *nullfrac)
{
	*nullfrac = 0;
	if (strcmp(attname, "tenant_id") == 0)
		*distinct = 1.0;
	else if (strcmp(attname, "turn_id") == 0)
		*distinct = -1.0;
	else if (strcmp(attname, "session_id") == 0 || strcmp(attname, "conversation_id") == 0)
		*distinct = (strcmp(relname, "session") == 0 || strcmp(relname, "session_link") == 0 ||
					 strcmp(relname, "session_summary") == 0 ||
					 strcmp(relname, "conversation_context") == 0) ? -1.0 : -0.1;
	else if (strcmp(attname, "turn_no") == 0)
		*distinct = -0.1;
	else if (strcmp(relname, "turn") == 0 &&
			 (strcmp(attname, "replaced_by_turn_id") == 0 || strcmp(attname, "deleted_at") == 0))
	{
		/* null on most turns: turn_request_current holds most of them */
		*distinct = -0.1;
		*nullfrac = 0.9;
	}
	else
		return false;
	return true;
}

static bool
KeyStatsHook(PlannerInfo *root, RangeTblEntry *rte, AttrNumber attnum,
			 VariableStatData *vardata)
{
	Oid			nsp;
	char	   *nspname;
	char	   *attname;
	float4		distinct;
	float4		nullfrac;

	if (prev_relation_stats_hook &&
		prev_relation_stats_hook(root, rte, attnum, vardata))
		return true;
	if (keyed_query == NULL || rte->rtekind != RTE_RELATION || attnum <= 0 ||
		!CatalogChecked())
		return false;
	nsp = get_rel_namespace(rte->relid);
	if (nsp != ConvctxNamespace())
	{
		/* the schema of extension convctx_recall, which it must own */
		nspname = get_namespace_name(nsp);
		if (nspname == NULL || strcmp(nspname, "convctx_recall") != 0 ||
			!OidIsValid(get_extension_oid("convctx_recall", true)))
			return false;
	}
	/* analyzed: its own statistics */
	if (SearchSysCacheExists3(STATRELATTINH, ObjectIdGetDatum(rte->relid),
							  Int16GetDatum(attnum), BoolGetDatum(rte->inh)))
		return false;
	attname = get_attname(rte->relid, attnum, true);
	if (attname == NULL)
		return false;
	if (!KeyStats(get_rel_name(rte->relid), attname, &distinct, &nullfrac))
		return false;
	{
		Relation	statrel = table_open(StatisticRelationId, AccessShareLock);
		Datum		values[Natts_pg_statistic];
		bool		nulls[Natts_pg_statistic];
		int			i;

		memset(values, 0, sizeof(values));
		memset(nulls, false, sizeof(nulls));
		values[Anum_pg_statistic_starelid - 1] = ObjectIdGetDatum(rte->relid);
		values[Anum_pg_statistic_staattnum - 1] = Int16GetDatum(attnum);
		values[Anum_pg_statistic_stainherit - 1] = BoolGetDatum(rte->inh);
		values[Anum_pg_statistic_stanullfrac - 1] = Float4GetDatum(nullfrac);
		values[Anum_pg_statistic_stawidth - 1] = Int32GetDatum(16);
		values[Anum_pg_statistic_stadistinct - 1] = Float4GetDatum(distinct);
		/* no slots: stakindN, staopN and stacollN 0, the arrays null */
		for (i = 0; i < STATISTIC_NUM_SLOTS; i++)
		{
			values[Anum_pg_statistic_stakind1 - 1 + i] = Int16GetDatum(0);
			values[Anum_pg_statistic_staop1 - 1 + i] = ObjectIdGetDatum(InvalidOid);
			values[Anum_pg_statistic_stacoll1 - 1 + i] = ObjectIdGetDatum(InvalidOid);
			nulls[Anum_pg_statistic_stanumbers1 - 1 + i] = true;
			nulls[Anum_pg_statistic_stavalues1 - 1 + i] = true;
		}
		vardata->statsTuple = heap_form_tuple(RelationGetDescr(statrel), values, nulls);
		vardata->freefunc = heap_freetuple;
		table_close(statrel, AccessShareLock);
	}
	/* as for real statistics of a table the role may read (examine_variable) */
	vardata->acl_ok = true;
	return true;
}

/*
 * Set the source text of the keyed statement being executed (NULL for
 * none); returns the one set before, for the caller to restore (also on
 * error).
 */
const char *
PlannerKeyedQuery(const char *query)
{
	const char *old = keyed_query;

	keyed_query = query;
	return old;
}

/* From _PG_init. */
void
PlannerInit(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = KeyedPlanner;
	prev_relation_stats_hook = get_relation_stats_hook;
	get_relation_stats_hook = KeyStatsHook;
}
