/*-------------------------------------------------------------------------
 *
 * spi_util.c
 *	  SPI plans prepared once per backend and reused.
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
 * src/core/spi_util.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_statistic.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "optimizer/planner.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/selfuncs.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "core/common.h"
#include "core/spi_util.h"
#include "core/variant.h"

static bool catalog_checked = false;
static Oid	convctx_namespace = InvalidOid;
static void CatalogCheck(void);

/*
 * The extension's owner, as whom every statement on the tables runs
 * (CatalogCheck); while one runs, owner_depth > 0 and owner_invoker is the
 * role that called into convctx.
 */
static Oid	convctx_owner = InvalidOid;
static int	owner_depth = 0;
static Oid	owner_invoker = InvalidOid;

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
	if (!catalog_checked)
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
	if (!catalog_checked)
		CatalogCheck();
	if (*cache == NULL)
		*cache = SpiKeep(sql, nargs, argtypes, CURSOR_OPT_CUSTOM_PLAN);
	return *cache;
}

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
		!catalog_checked)
		return false;
	nsp = get_rel_namespace(rte->relid);
	if (nsp != convctx_namespace)
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
 * Whether the catalog this library runs on was checked (CatalogCheck):
 * forgotten when any schema changes, checked again before the next
 * statement.
 */
static void
NamespaceInvalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	catalog_checked = false;
	convctx_namespace = InvalidOid;
}

/*
 * Whether extension name is installed in this database; if so, its schema,
 * owner and version (palloc'd).
 */
bool
ExtensionLookup(const char *name, Oid *nsp, Oid *owner, char **version)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum(name));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	found = HeapTupleIsValid(tup);
	if (found)
	{
		bool		isnull;
		Datum		v = heap_getattr(tup, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		*nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
		*owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
		*version = isnull ? pstrdup("") : TextDatumGetCString(v);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * Check that the objects the statements name are the extension's own, in
 * the version this library was built for:
 *	- extension convctx is installed in this database;
 *	- its version is the library's (a library of another version would
 *	  read and write tables of another shape); during CREATE or ALTER
 *	  EXTENSION the scripts in between may run;
 *	- the schema named convctx, which every statement names, is the
 *	  extension's schema, not one created under that name after the
 *	  extension's schema was renamed.
 * ERROR 55000 otherwise. The result is kept until a schema changes.
 */
static void
CatalogCheck(void)
{
	Oid			ext_namespace = InvalidOid;
	char	   *ext_version = NULL;

	if (!ExtensionLookup("convctx", &ext_namespace, &convctx_owner, &ext_version))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("extension \"convctx\" is not installed in this database"),
				errhint("Run CREATE EXTENSION convctx."));
	if (!creating_extension && strcmp(ext_version, CONVCTX_VERSION) != 0)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("convctx library version %s does not match the installed extension version %s",
					   CONVCTX_VERSION, ext_version),
				errhint("Run ALTER EXTENSION convctx UPDATE."));
	if (get_namespace_oid("convctx", true) != ext_namespace)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("schema \"convctx\" is not the schema of extension \"convctx\""),
				errdetail("The extension's schema is \"%s\".",
						  get_namespace_name(ext_namespace)),
				errhint("Rename the schemas back; convctx's statements name schema convctx."));
	convctx_namespace = ext_namespace;
	catalog_checked = true;
}

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
	if (!catalog_checked)
		CatalogCheck();
	GetUserIdAndSecContext(&sw->user, &sw->sec_context);
	sw->depth = owner_depth;
	if (owner_depth == 0)
		owner_invoker = sw->user;
	owner_depth++;
	SetUserIdAndSecContext(convctx_owner, sw->sec_context | SECURITY_LOCAL_USERID_CHANGE |
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

/* The extension's owner (CatalogCheck). */
Oid
ConvctxOwner(void)
{
	if (!catalog_checked)
		CatalogCheck();
	return convctx_owner;
}

/*
 * The OID of schema convctx, checked to be the extension's (CatalogCheck),
 * for the code that opens relations by name.
 */
Oid
ConvctxNamespace(void)
{
	if (!catalog_checked)
		CatalogCheck();
	return convctx_namespace;
}

/* From _PG_init. */
void
SpiInit(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = KeyedPlanner;
	prev_relation_stats_hook = get_relation_stats_hook;
	get_relation_stats_hook = KeyStatsHook;
	CacheRegisterSyscacheCallback(NAMESPACEOID, NamespaceInvalidate, (Datum) 0);
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
	const char *outer = keyed_query;
	volatile int rc = 0;
	OwnerSwitch sw;

	ActAsOwner(&sw);
	keyed_query = keyed ? PlanQueryString(plan) : NULL;
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
		keyed_query = outer;
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
 * Refuse a function that writes when this transaction cannot: on a hot
 * standby (during recovery) and in a read-only transaction, both 25006,
 * with PostgreSQL's own wording for a command, naming the function
 * rather than the statement convctx would run inside it. Called first
 * thing, so nothing is read, locked or checked before. RecoveryInProgress
 * is a local flag once recovery has ended.
 */
bool
CheckWritable(const char *function)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				errmsg("cannot execute %s during recovery", function),
				errdetail("This server is a standby: convctx's read functions work here, its writers only on the primary."));
	PreventCommandIfReadOnly(function);
	return true;
}

/*
 * Run a kept plan that returns a session's newest turns, newest first: its
 * $3 is how many (want) and its $4 a lower bound on their turn_no. A btree
 * scan reads every matching entry of a leaf page and a generic plan may
 * sort a range, so no range is left unbounded while a narrower one may
 * do: the newest span turn numbers below last (the session's newest turn)
 * are read first, then spans four times wider, until want rows are found
 * or turn 1 is reached. Returns the rows of the last run (NULL and 0 rows
 * when want is 0). SPI must be connected.
 */
SPITupleTable *
SpiReadNewestTurns(SPIPlanPtr plan, Datum *values, int64 want, int64 last,
				   int64 span, uint64 *nrows)
{
	SPITupleTable *rows = NULL;
	int64		lower;

	*nrows = 0;
	values[2] = Int64GetDatum(want);
	while (want > 0)
	{
		lower = (last - span > 0) ? last - span : 0;
		values[3] = Int64GetDatum(lower);
		SpiRunPlan(plan, values, NULL, true, 0, SPI_OK_SELECT);
		if (rows != NULL)
			SPI_freetuptable(rows);
		rows = SPI_tuptable;
		*nrows = SPI_processed;
		if (*nrows >= (uint64) want || lower == 0)
			break;
		span = (span > PG_INT64_MAX / 4) ? PG_INT64_MAX : span * 4;
	}
	return rows;
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
