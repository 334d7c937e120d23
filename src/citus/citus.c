/*-------------------------------------------------------------------------
 *
 * citus.c
 *	  Running on a Citus cluster: whether convctx's tables are distributed
 *	  here, and which calls may be delegated to the node that holds their
 *	  session.
 *
 * convctx.distribute() (SQL, in the install script) distributes the tables
 * by session and registers the per-session functions with Citus's
 * create_distributed_function, so that Citus may run a call such as
 * SELECT convctx.start_turn('s1', ...) on the worker that holds session
 * 's1' instead of on the coordinator ("delegation"). What changes in the
 * C code once the tables are distributed (ConvctxDistributed):
 *	- kept plans are custom plans: Citus cannot plan most of convctx's
 *	  statements with their parameters unbound (spi_plans.c);
 *	- nothing reads a table's heap or index directly: on a Citus node the
 *	  table is an empty shell and its rows live in shards (recent_turns.c,
 *	  tenancy.c).
 *
 * The tenant of a delegated call. Citus sends the call itself to the
 * worker, on a connection of its own made as the current user, but not the
 * caller's settings: a convctx.tenant set by SET on the coordinator is
 * unknown on the worker. A role bound to one tenant needs no setting: the
 * worker finds the same binding in convctx.role_tenant (a reference table,
 * on every node). For every other caller the tenant would be lost, so:
 *	- on the node that plans the call, convctx's planner hook keeps such a
 *	  call on that node (CitusKeepCallHere), where it runs as on a single
 *	  server and its statements are routed to the shards by session; this
 *	  needs convctx in shared_preload_libraries, so that the hook is there
 *	  before the first call of a backend is planned (distribute() checks);
 *	- on the node a call arrives at, a call of a role that may act for any
 *	  tenant, in a backend Citus opened, is refused unless its transaction
 *	  set convctx.tenant (tenancy.c): Citus carries SET LOCAL along when
 *	  citus.propagate_set_commands = 'local'. Never the default tenant.
 * Calls after SET ROLE stay on the planning node as well: the worker would
 * see only the acting role, not the session user whose binding counts too;
 * and so do the calls of a role that a member bound to another tenant could
 * SET ROLE to, which the other node refuses when they come from elsewhere
 * (a call pushed into a query of a distributed table). A role bound to one
 * tenant whose convctx.tenant names another stays too, to get its error.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/citus/citus.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "nodes/primnodes.h"
#include "parser/parsetree.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "citus/citus.h"
#include "core/tenancy.h"
#include "core/variant.h"

/* Whether convctx.turn is a Citus table in this database: -1 not known. */
static int	distributed = -1;
static Oid	distributed_turn_relid = InvalidOid;

/*
 * create_distributed_table and undistribute_table invalidate the table's
 * relcache entry; so do DROP and CREATE EXTENSION. Look again after one.
 */
static void
DistributedInvalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == distributed_turn_relid)
		distributed = -1;
}

/*
 * The Citus variant (variant.h): kept plans are custom plans, nothing
 * reads a table's heap or index directly, statements reach one shard each,
 * the bindings are read from role_tenant's shard once per transaction,
 * audit rows are written by the owner, and export_records and
 * import_records refuse.
 */
static const ConvctxVariant citus_variant = {
	.name = "Citus",
	.plan_options = CURSOR_OPT_CUSTOM_PLAN,
	.one_shard_statements = true,
	.audit_by_owner = true,
	.reference_rows = CitusReferenceShard,
	.forwarded_call = CitusInternalBackend,
	.refuse = CitusRefuse,
	.purge_once = PurgeOnceDistributed,
};

/* The chooser (VariantRegister): Citus's table once distribute() ran. */
static const ConvctxVariant *
CitusChoose(void)
{
	return ConvctxDistributed() ? &citus_variant : NULL;
}

void
CitusInit(void)
{
	CacheRegisterRelcacheCallback(DistributedInvalidate, (Datum) 0);
	VariantRegister(CitusChoose);
	plan_call_hook = CitusKeepCallHere;
}

/* Whether pg_dist_partition has a row for relid (read directly: no SPI). */
static bool
InDistPartition(Oid relid)
{
	Oid			dist_partition = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	bool		found;

	if (!OidIsValid(dist_partition))
		return false;
	rel = table_open(dist_partition, AccessShareLock);
	/* the first column, logicalrelid, is a regclass */
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * The local shard of relid, a Citus reference table: the relation on this
 * node that holds its rows (named after the table and its one shard id).
 * ERROR 55000 when this node has none, so that no caller is taken for
 * unbound by mistake.
 */
Oid
CitusReferenceShard(Oid relid)
{
	Oid			dist_shard = get_relname_relid("pg_dist_shard", PG_CATALOG_NAMESPACE);
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	int64		shardid = 0;
	Oid			shard = InvalidOid;

	if (OidIsValid(dist_shard))
	{
		rel = table_open(dist_shard, AccessShareLock);
		/* logicalrelid (regclass) and shardid (bigint) are its first columns */
		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
		scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
		if (HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			bool		isnull;
			Datum		id = heap_getattr(tup, 2, RelationGetDescr(rel), &isnull);

			if (!isnull)
				shardid = DatumGetInt64(id);
		}
		systable_endscan(scan);
		table_close(rel, AccessShareLock);
	}
	if (shardid > 0)
		shard = get_relname_relid(psprintf("%s_" INT64_FORMAT, get_rel_name(relid), shardid),
								  get_rel_namespace(relid));
	if (!OidIsValid(shard))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("table %s has no shard on this node", get_rel_name(relid)),
				errdetail("convctx.distribute() makes it a reference table, which Citus copies to every node."),
				errhint("On the coordinator, run SELECT citus_set_coordinator_host(...) and SELECT replicate_reference_tables()."));
	return shard;
}

/*
 * Whether convctx's tables are distributed by Citus in this database
 * (convctx.distribute() was run), on the coordinator and on every worker
 * (Citus copies its metadata to them). Cached until an invalidation.
 */
bool
ConvctxDistributed(void)
{
	if (distributed < 0)
	{
		Oid			nsp = get_namespace_oid("convctx", true);
		Oid			turn = OidIsValid(nsp) ? get_relname_relid("turn", nsp) : InvalidOid;

		distributed_turn_relid = turn;
		distributed = OidIsValid(turn) && OidIsValid(get_extension_oid("citus", true)) &&
			InDistPartition(turn);
	}
	return distributed > 0;
}

/*
 * Whether this backend was opened by another Citus node: Citus names its
 * own connections so (application_name "citus_internal gpid=<n>" in the
 * startup packet). The setting's reset value is read, not the setting:
 * SET and RESET cannot change it, only the startup packet or a role's or
 * database's default, which a client may set for itself as well. A
 * client that calls itself so only makes its calls stricter (tenancy.c).
 * (libpq/libpq-be.h, which has the startup packet itself, needs the
 * GSSAPI headers to compile.)
 */
bool
CitusInternalBackend(void)
{
	const char *name = GetConfigOptionResetString("application_name");

	return name != NULL && strncmp(name, "citus_internal gpid=", 20) == 0;
}

/*
 * ERROR 0A000 for a function that does not run on a distributed cluster:
 * its statements read many sessions at once in ways Citus cannot plan.
 */
void
CitusRefuse(const char *function, const char *hint)
{
	ereport(ERROR,
			errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			errmsg("%s does not run on a distributed cluster", function),
			errdetail("convctx's tables are distributed by Citus in this database (convctx.distribute())."),
			errhint("%s", hint));
}

/* The function of a query "SELECT f(...)" or "SELECT ... FROM f(...)", else NULL. */
static FuncExpr *
CalledFunction(Query *parse)
{
	FromExpr   *jt = parse->jointree;

	if (parse->commandType != CMD_SELECT || jt == NULL || jt->quals != NULL ||
		parse->cteList != NIL || parse->hasSubLinks)
		return NULL;
	if (jt->fromlist == NIL && list_length(parse->targetList) == 1)
	{
		TargetEntry *te = linitial_node(TargetEntry, parse->targetList);

		return IsA(te->expr, FuncExpr) ? (FuncExpr *) te->expr : NULL;
	}
	if (list_length(jt->fromlist) == 1 && IsA(linitial(jt->fromlist), RangeTblRef))
	{
		RangeTblEntry *rte = rt_fetch(linitial_node(RangeTblRef, jt->fromlist)->rtindex,
									  parse->rtable);

		if (rte->rtekind == RTE_FUNCTION && list_length(rte->functions) == 1)
		{
			Node	   *expr = linitial_node(RangeTblFunction, rte->functions)->funcexpr;

			return IsA(expr, FuncExpr) ? (FuncExpr *) expr : NULL;
		}
	}
	return NULL;
}

/* Whether node calls a function of schema convctx (nspoid), in any subquery too. */
static bool
CallsConvctx(Node *node, Oid *nspoid)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr) &&
		get_func_namespace(((FuncExpr *) node)->funcid) == *nspoid)
		return true;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, CallsConvctx, nspoid, 0);
	return expression_tree_walker(node, CallsConvctx, nspoid);
}

/*
 * From the planner hook, before Citus plans a statement. Citus delegates
 * a statement of the form SELECT f(...) or SELECT ... FROM f(...) as it
 * looks after standard_planner: a lone subquery or CTE pulled up, an SQL
 * function inlined. So:
 *	- a lone subquery or CTE that calls convctx is kept here for everyone
 *	  (Citus 13.2 crashes deparsing such a delegated call);
 *	- for a caller whose tenant would not reach the worker, every call
 *	  without a WHERE clause is kept here, whatever function it names (an
 *	  SQL function may inline into a convctx call).
 * Returns whether the plan depends on the caller (for dependsOnRole).
 */
bool
CitusKeepCallHere(Query *parse)
{
	FuncExpr   *call;
	NullTest   *always;
	Oid			nsp;
	FromExpr   *jt = parse->jointree;

	/* a call that reached this node from another is not sent on by Citus */
	if (CitusInternalBackend())
		return false;
	if (parse->commandType != CMD_SELECT || jt == NULL || jt->quals != NULL ||
		!ConvctxDistributed())
		return false;
	nsp = get_namespace_oid("convctx", true);
	call = CalledFunction(parse);
	if (call == NULL)
	{
		RangeTblEntry *rte;

		if (list_length(jt->fromlist) != 1 || !IsA(linitial(jt->fromlist), RangeTblRef))
			return false;
		rte = rt_fetch(linitial_node(RangeTblRef, jt->fromlist)->rtindex, parse->rtable);
		if (rte->rtekind != RTE_SUBQUERY && rte->rtekind != RTE_CTE)
			return false;
		if (!CallsConvctx((Node *) parse, &nsp))
			return false;
	}
	else if (TenantTravelsWithCall())
		return true;

	always = makeNode(NullTest);
	always->arg = (Expr *) makeFuncExpr(F_PG_BACKEND_PID, INT4OID, NIL, InvalidOid,
										InvalidOid, COERCE_EXPLICIT_CALL);
	always->nulltesttype = IS_NOT_NULL;
	always->argisrow = false;
	always->location = -1;
	jt->quals = (Node *) always;
	return true;
}
