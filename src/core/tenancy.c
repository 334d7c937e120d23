/*-------------------------------------------------------------------------
 *
 * tenancy.c
 *	  Which tenant a call acts for: current_tenant, and the role bindings
 *	  that fix it (bind_role_tenant, bind_role_all_tenants,
 *	  unbind_role_tenant, and the trigger that announces changes of
 *	  convctx.role_tenant made by any route).
 *
 * Fail closed. A session acts for a tenant only when
 *	- its acting role (the "outer" user, after SET ROLE) is a superuser:
 *	  the setting convctx.tenant names the tenant ('' when empty);
 *	- or it is bound to one tenant in convctx.role_tenant, directly or
 *	  through a role it is a member of: it acts for that tenant, and a
 *	  convctx.tenant naming another one is an error, never its data;
 *	- or it is bound to every tenant (tenant_id NULL): convctx.tenant names
 *	  the tenant per request (a service role behind a connection pooler).
 * With convctx.tenant_scope = transaction, a role that acts for any tenant
 * must also have set convctx.tenant in the current transaction: a value
 * left on a pooled server connection by an earlier client is refused
 * (42501), never used. convctx.use_tenant sets it for one transaction.
 * Anyone else gets 42501 from every tenant-scoped function. The session
 * user's binding counts too, so SET ROLE cannot leave a binding behind, and
 * two bindings that disagree are 42501.
 *
 * Bindings name roles by name, never by OID: a row whose role does not exist
 * (dropped, renamed, or missing in the cluster a dump was restored into, or
 * on a logical replication subscriber) binds nobody and breaks nothing else.
 * A renamed role is therefore unbound until it is bound again. Bindings live
 * in each database: a role bound in one database is unbound in another.
 *
 * On a Citus cluster role_tenant is a reference table: its rows are read
 * from this node's shard of it, once per transaction (citus.c).
 *
 * The outcome for the calling roles is cached per backend. It is dropped by
 * a relcache invalidation of role_tenant, which the statement and row
 * triggers on the table send for every change by any route (the functions
 * below, plain DML, COPY of a restore, TRUNCATE, and logical replication:
 * the triggers are ENABLE ALWAYS), and by changes of roles and memberships.
 * Invalidations are read at the first call of each transaction, so a
 * running session sees a change at its next transaction.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/tenancy.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "core/catalog.h"
#include "core/common.h"
#include "core/args.h"
#include "core/audit.h"
#include "core/jsonb_util.h"
#include "core/owner.h"
#include "core/settings.h"
#include "core/spi_plans.h"
#include "core/tenancy.h"
#include "core/variant.h"
#include "core/writable.h"

#define ROLE_TENANT_TABLE "role_tenant"

#define BIND_SQL \
	"INSERT INTO convctx.role_tenant AS b (role_name, tenant_id)" \
	" VALUES ($1, $2)" \
	" ON CONFLICT (role_name) DO UPDATE SET tenant_id = EXCLUDED.tenant_id," \
	"     bound_at = EXCLUDED.bound_at" \
	"  WHERE (b.tenant_id IS NULL) OPERATOR(pg_catalog.<>) (EXCLUDED.tenant_id IS NULL)" \
	"     OR b.tenant_id OPERATOR(pg_catalog.<>) EXCLUDED.tenant_id"

#define UNBIND_SQL \
	"DELETE FROM convctx.role_tenant WHERE role_name OPERATOR(pg_catalog.=) $1 RETURNING tenant_id"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr bind_plan, unbind_plan;

/* What a role, or a session, may act for. */
typedef enum BindingKind
{
	BINDING_NONE,				/* unbound: may act for no tenant */
	BINDING_TENANT,				/* bound to one tenant */
	BINDING_ALL					/* superuser, or bound to every tenant */
} BindingKind;

/*
 * The cached outcome for the session (binding_session_user acting as
 * binding_user); valid until an invalidation.
 */
static bool binding_valid = false;
static bool binding_seen_in_xact = false;
static Oid	binding_session_user = InvalidOid;
static Oid	binding_user = InvalidOid;
static Oid	binding_relid = InvalidOid;
static BindingKind binding_kind = BINDING_NONE;
static char *binding_tenant = NULL; /* BINDING_TENANT: the tenant */
static char *binding_conflict = NULL;	/* set: contradictory bindings */

/*
 * On Citus: a role that a member bound elsewhere can SET ROLE to. Another
 * node sees only the acting role, not that member's binding, which on a
 * single server makes the session act for no tenant.
 */
static bool binding_taken_on = false;

static void
BindingReset(void)
{
	binding_valid = false;
	binding_kind = BINDING_NONE;
	binding_taken_on = false;
	if (binding_tenant)
		pfree(binding_tenant);
	if (binding_conflict)
		pfree(binding_conflict);
	binding_tenant = NULL;
	binding_conflict = NULL;
}

static void
BindingRelcacheCallback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == binding_relid)
		binding_valid = false;
}

static void
BindingSyscacheCallback(Datum arg, int cacheid, uint32 hashvalue)
{
	binding_valid = false;
}

/* At the end of every transaction: BoundTenant reads invalidations anew. */
static void
BindingXactCallback(XactEvent event, void *arg)
{
	binding_seen_in_xact = false;
}

void
TenancyInit(void)
{
	CacheRegisterRelcacheCallback(BindingRelcacheCallback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMMEMROLE, BindingSyscacheCallback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, BindingSyscacheCallback, (Datum) 0);
	RegisterXactCallback(BindingXactCallback, NULL);
}

/*
 * convctx.role_tenant, or InvalidOid when there is no such table; ERROR
 * when the extension's catalog is not the one this library was built for
 * (ConvctxNamespace), so that nobody is taken for unbound by mistake.
 */
static Oid
RoleTenantRelid(void)
{
	return get_relname_relid(ROLE_TENANT_TABLE, ConvctxNamespace());
}

/*
 * The number of the text column named name. A table updated from 0.2.0
 * keeps its dropped role_id column, so positions differ from a fresh
 * install's: look them up rather than trust positions, and refuse a table
 * of another shape.
 */
static AttrNumber
RoleTenantColumn(TupleDesc desc, const char *name)
{
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0 &&
			att->atttypid == TEXTOID)
			return att->attnum;
	}
	ereport(ERROR,
			errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			errmsg("table convctx.role_tenant does not have the columns this version of convctx expects"),
			errhint("Update the extension with ALTER EXTENSION convctx UPDATE."));
	return InvalidAttrNumber;	/* keep the compiler quiet */
}

typedef struct BindingRow
{
	Oid			role;			/* InvalidOid: no role has the name */
	char	   *tenant;			/* NULL: every tenant */
} BindingRow;

/* The tenant of a binding, for messages. */
static const char *
BindingName(BindingKind kind, const char *tenant)
{
	return kind == BINDING_ALL ? "every tenant" : psprintf("tenant \"%s\"", tenant);
}

/*
 * The binding of one role among rows: a row for the role itself wins;
 * else the rows of the roles it is a member of, which must all agree.
 * Superuser status does not count as membership. Rows of roles that do not
 * exist bind nobody. Sets *kind and *tenant, or *problem on disagreement.
 */
static void
RoleBinding(Oid user, BindingRow *rows, int nrows,
			BindingKind *kind, char **tenant, char **problem)
{
	int			i;

	*kind = BINDING_NONE;
	*tenant = NULL;
	for (i = 0; i < nrows; i++)
		if (rows[i].role == user)
		{
			*kind = rows[i].tenant ? BINDING_TENANT : BINDING_ALL;
			*tenant = rows[i].tenant;
			return;
		}

	for (i = 0; i < nrows; i++)
	{
		BindingRow *r = &rows[i];
		BindingKind k = r->tenant ? BINDING_TENANT : BINDING_ALL;

		if (!OidIsValid(r->role) || !is_member_of_role_nosuper(user, r->role))
			continue;
		if (*kind == BINDING_NONE)
		{
			*kind = k;
			*tenant = r->tenant;
		}
		else if (*kind != k || (k == BINDING_TENANT && strcmp(*tenant, r->tenant) != 0))
		{
			*problem = psprintf("Role \"%s\" is a member of roles bound to %s and to %s",
								GetUserNameFromId(user, false),
								BindingName(*kind, *tenant), BindingName(k, r->tenant));
			return;
		}
	}
}

/* Add a row to rows (of *maxrows), resolving its role name now. */
static BindingRow *
BindingRowAdd(BindingRow *rows, int *nrows, int *maxrows, const char *name,
			  char *tenant)
{
	Oid			role = get_role_oid(name, true);

	if (!OidIsValid(role))
		return rows;			/* binds nobody: unresolved_bindings lists it */
	if (*nrows == *maxrows)
	{
		*maxrows = *maxrows ? *maxrows * 2 : 16;
		rows = rows ? repalloc(rows, sizeof(BindingRow) * *maxrows)
			: palloc(sizeof(BindingRow) * *maxrows);
	}
	rows[*nrows].role = role;
	rows[*nrows].tenant = tenant;
	(*nrows)++;
	return rows;
}

/* The rows of convctx.role_tenant, their role names resolved now. */
static BindingRow *
BindingRows(Oid relid, int *nrows_out)
{
	Relation	rel;
	TupleDesc	desc;
	AttrNumber	name_att;
	AttrNumber	tenant_att;
	SysScanDesc scan;
	HeapTuple	tup;
	BindingRow *rows = NULL;
	int			nrows = 0;
	int			maxrows = 0;

	rel = table_open(relid, AccessShareLock);
	desc = RelationGetDescr(rel);
	name_att = RoleTenantColumn(desc, "role_name");
	tenant_att = RoleTenantColumn(desc, "tenant_id");
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		name_null,
					tenant_null;
		Datum		name = heap_getattr(tup, name_att, desc, &name_null);
		Datum		tenant = heap_getattr(tup, tenant_att, desc, &tenant_null);

		if (name_null)
			continue;
		rows = BindingRowAdd(rows, &nrows, &maxrows, TextDatumGetCString(name),
							 tenant_null ? NULL : TextDatumGetCString(tenant));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	*nrows_out = nrows;
	return rows;
}

/*
 * Whether a role other than role that is a member of it (and so may SET
 * ROLE to it) is bound otherwise than kind/tenant, among rows. Walks every
 * role: only on Citus, once per transaction (BindingRefresh).
 */
static bool
BindingTakenOn(Oid role, BindingKind kind, const char *tenant, BindingRow *rows, int nrows)
{
	Relation	rel = table_open(AuthIdRelationId, AccessShareLock);
	SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	HeapTuple	tup;
	bool		taken_on = false;

	while (!taken_on && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Oid			member = ((Form_pg_authid) GETSTRUCT(tup))->oid;
		BindingKind k;
		char	   *t;
		char	   *problem = NULL;

		if (member == role || !is_member_of_role_nosuper(member, role))
			continue;
		RoleBinding(member, rows, nrows, &k, &t, &problem);
		taken_on = problem != NULL ||
			(k != BINDING_NONE &&
			 (k != kind || (k == BINDING_TENANT && strcmp(t, tenant) != 0)));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return taken_on;
}

/*
 * Work out what a session whose session user is session_user and whose
 * acting role (SET ROLE) is outer_user may act for, and cache it.
 */
static void
BindingLoad(Oid session_user, Oid outer_user)
{
	Oid			relid = RoleTenantRelid();
	BindingRow *rows = NULL;
	int			nrows = 0;
	char	   *problem = NULL;
	BindingKind of_session,
				of_outer = BINDING_NONE;
	char	   *t_session,
			   *t_outer = NULL;
	BindingKind kind;
	char	   *tenant;

	BindingReset();
	binding_session_user = session_user;
	binding_user = outer_user;
	binding_relid = relid;

	if (superuser_arg(outer_user))
	{
		binding_kind = BINDING_ALL;
		binding_valid = true;
		return;
	}

	if (OidIsValid(relid))
		rows = BindingRows(Variant()->reference_rows(relid), &nrows);

	RoleBinding(session_user, rows, nrows, &of_session, &t_session, &problem);
	if (problem == NULL && outer_user != session_user)
		RoleBinding(outer_user, rows, nrows, &of_outer, &t_outer, &problem);
	if (problem == NULL && of_session != BINDING_NONE && of_outer != BINDING_NONE &&
		(of_session != of_outer ||
		 (of_session == BINDING_TENANT && strcmp(t_session, t_outer) != 0)))
		problem = psprintf("Role \"%s\" is bound to %s but acts as role \"%s\", bound to %s",
						   GetUserNameFromId(session_user, false),
						   BindingName(of_session, t_session),
						   GetUserNameFromId(outer_user, false),
						   BindingName(of_outer, t_outer));

	kind = of_outer != BINDING_NONE ? of_outer : of_session;
	tenant = of_outer != BINDING_NONE ? t_outer : t_session;
	if (problem)
		binding_conflict = MemoryContextStrdup(TopMemoryContext, problem);
	else
	{
		binding_kind = kind;
		if (kind == BINDING_TENANT)
			binding_tenant = MemoryContextStrdup(TopMemoryContext, tenant);
		if (kind != BINDING_NONE && Variant()->forwarded_call != NULL)
			binding_taken_on = BindingTakenOn(outer_user, kind, tenant, rows, nrows);
	}
	/* without the table nothing is cached: it may be created later */
	binding_valid = OidIsValid(relid);
}

/* Bring the cached binding of the calling session up to date. */
static void
BindingRefresh(void)
{
	Oid			session_user = GetSessionUserId();
	Oid			outer_user = ConvctxInvoker();

	/*
	 * A statement that opens no relation (SELECT convctx.current_tenant(), a
	 * call of a function that reads through SPI only after it asked for the
	 * tenant) would not read pending invalidations before the tenant is
	 * decided; they are read here once per transaction instead.
	 */
	if (!binding_seen_in_xact && IsTransactionState())
	{
		AcceptInvalidationMessages();
		binding_seen_in_xact = true;

		/*
		 * On Citus a change of the bindings reaches this node's shard of
		 * role_tenant, which has no trigger to announce it: read them
		 * once per transaction instead.
		 */
		if (!Variant()->bindings_announced)
			binding_valid = false;
	}
	if (!binding_valid || binding_session_user != session_user || binding_user != outer_user)
		BindingLoad(session_user, outer_user);
}

/*
 * The tenant the calling session is bound to, or NULL when it may act for
 * any tenant (a superuser, or a role bound to every tenant). ERROR 42501
 * for a session that may act for no tenant: unbound, or bound twice in
 * contradiction.
 */
const char *
BoundTenant(void)
{
	BindingRefresh();
	if (binding_conflict)
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("the tenant of this session cannot be determined"),
				errdetail("%s.", binding_conflict),
				errhint("Bind the role itself with convctx.bind_role_tenant, or remove a binding with convctx.unbind_role_tenant."));
	if (binding_kind == BINDING_NONE)
	{
		char	   *role = GetUserNameFromId(ConvctxInvoker(), false);
		char	   *db = get_database_name(MyDatabaseId);

		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("role \"%s\" is not bound to a tenant", role),
				errdetail("In database \"%s\" only superusers and roles bound to a tenant, or to every tenant, act for a tenant.",
						  db ? db : "?"),
				errhint("Bind it as a superuser: SELECT convctx.bind_role_tenant(%s, 'tenant'); '' is the tenant of a single-tenant database.",
						quote_literal_cstr(role)));
	}
	return binding_tenant;
}

/*
 * Whether the current transaction set convctx.tenant. PostgreSQL keeps a
 * stack entry on a setting from the moment a transaction (or one of its
 * subtransactions) changes it, by SET, SET LOCAL, set_config() or a
 * function's SET clause, until that transaction ends; a subtransaction
 * rolled back takes its entry with it. No entry: the value was committed
 * by an earlier transaction, on a pooled connection perhaps by another
 * client. The entry also survives the library being loaded after the SET,
 * which re-applies the placeholder's stacked values.
 */
static bool
TenantSetInThisTransaction(void)
{
	static struct config_generic *tenant_guc = NULL;

	if (tenant_guc == NULL)
	{
		struct config_generic **vars;
		int			n;
		int			i;

		/* The records themselves never move once defined. */
#if PG_VERSION_NUM >= 160000
		vars = get_guc_variables(&n);
#else
		vars = get_guc_variables();
		n = GetNumConfigOptions();
#endif
		for (i = 0; i < n && tenant_guc == NULL; i++)
			if (strcmp(vars[i]->name, "convctx.tenant") == 0)
				tenant_guc = vars[i];
		if (tenant_guc == NULL)
			elog(ERROR, "setting convctx.tenant is not defined");
	}
	return tenant_guc->stack != NULL;
}

/*
 * The tenant of the calling session, as a text datum. For a bound role its
 * binding, and ERROR 42501 if convctx.tenant names another tenant; for a
 * role that may act for any tenant convctx.tenant, else the empty string,
 * and with convctx.tenant_scope = transaction ERROR 42501 unless this
 * transaction set it.
 */
text *
CurrentTenant(void)
{
	const char *bound = BoundTenant();
	const char *setting = convctx_tenant ? convctx_tenant : "";

	if (strlen(setting) > CONVCTX_MAX_ID_BYTES)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("convctx.tenant is too long"),
				errdetail("A tenant id has at most %d bytes.", CONVCTX_MAX_ID_BYTES));

	if (binding_taken_on && CallForwarded())
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("role \"%s\" acts for no tenant in a call forwarded by another Citus node",
					   GetUserNameFromId(ConvctxInvoker(), false)),
				errdetail("A member of the role bound to another tenant may act as it, and this node cannot tell whether the call comes from such a member."),
				errhint("Call convctx on the node the session is connected to; calls of this role stay there."));
	if (bound == NULL)
	{
		if (CallForwarded() && !TenantSetInThisTransaction())
			ereport(ERROR,
					errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					errmsg("the tenant of a call forwarded by another Citus node is not known on this node"),
					errdetail("A role that acts for any tenant names it in convctx.tenant, which Citus carries to other nodes only as SET LOCAL, with citus.propagate_set_commands = 'local'."),
					errhint("Call convctx on its own (SELECT convctx.f(...)), not inside a query of distributed tables, or name the tenant with SET LOCAL."));
		if (convctx_tenant_scope == TENANT_SCOPE_TRANSACTION && !TenantSetInThisTransaction())
			ereport(ERROR,
					errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					errmsg("convctx.tenant was not set in this transaction"),
					errdetail("With convctx.tenant_scope = transaction, a role that acts for any tenant names the tenant in every transaction; a value left by an earlier transaction is not used."),
					errhint("Begin each transaction with SELECT convctx.use_tenant('tenant'), or SET LOCAL convctx.tenant."));
		return cstring_to_text(setting);
	}
	if (setting[0] != '\0' && strcmp(setting, bound) != 0)
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("permission denied for tenant \"%s\"", setting),
				errdetail("This session is bound to tenant \"%s\".", bound),
				errhint("Reset convctx.tenant, or set it to \"%s\".", bound));
	return cstring_to_text(bound);
}

/*
 * Whether a call may be delegated to another Citus node with its tenant
 * intact (citus.c): the session acts for the one tenant its role is bound
 * to, and acts as its session user (the other node sees only the acting
 * role). Never raises an error for the caller's bindings.
 */
bool
TenantTravelsWithCall(void)
{
	Oid			session_user = GetSessionUserId();
	Oid			outer_user = ConvctxInvoker();

	if (outer_user != session_user)
		return false;
	BindingRefresh();
	if (binding_conflict != NULL || binding_kind != BINDING_TENANT || binding_taken_on)
		return false;
	/* a setting naming another tenant is an error, raised here, not there */
	return convctx_tenant == NULL || convctx_tenant[0] == '\0' ||
		strcmp(convctx_tenant, binding_tenant) == 0;
}

PG_FUNCTION_INFO_V1(convctx_current_tenant);

Datum
convctx_current_tenant(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(CurrentTenant());
}

/*
 * Set convctx.tenant to tenant until the end of the transaction, as SET
 * LOCAL does, and return the tenant the caller now acts for: 42501 (and
 * the transaction is aborted, which undoes the setting) when it may not
 * act for that tenant. Outside a transaction block the setting would end
 * with the statement, so that is an error (25P01) rather than a no-op.
 */
static text *
UseTenant(text *tenant)
{
	CheckIdLength(VARSIZE_ANY_EXHDR(tenant), "tenant id");
	if (!IsTransactionBlock())
		ereport(ERROR,
				errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
				errmsg("convctx.use_tenant() can only be used in transaction blocks"),
				errdetail("The tenant it sets holds until the end of the transaction."),
				errhint("Call it right after BEGIN, in the transaction of the request."));
	(void) set_config_option("convctx.tenant", text_to_cstring(tenant), PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
	return CurrentTenant();
}

/*
 * Act for tenant until TenantForCallEnd(returned level), the end of the
 * call that named it in an argument: as a function's SET clause sets
 * convctx.tenant for the call only, and undone the same way, also by an
 * error. CurrentTenant then checks it as it checks any value of the
 * setting, and takes it as set in this transaction.
 */
int
TenantForCallBegin(text *tenant)
{
	int			nestlevel;

	CheckIdLength(VARSIZE_ANY_EXHDR(tenant), "tenant id");
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("convctx.tenant", text_to_cstring(tenant), PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

void
TenantForCallEnd(int nestlevel)
{
	AtEOXact_GUC(true, nestlevel);
}

PG_FUNCTION_INFO_V1(convctx_use_tenant);

/* use_tenant(tenant text) -> text */
Datum
convctx_use_tenant(PG_FUNCTION_ARGS)
{
	ArgNotNull(fcinfo, 0, "tenant");
	PG_RETURN_TEXT_P(UseTenant(PG_GETARG_TEXT_PP(0)));
}

PG_FUNCTION_INFO_V1(convctx_role_tenant_changed);

/*
 * Trigger on convctx.role_tenant, for each row (INSERT, UPDATE, DELETE,
 * also as applied by logical replication and COPY) and each TRUNCATE:
 * announce the change to every session, whichever route made it.
 * Duplicate invalidations within a command are merged by PostgreSQL.
 */
Datum
convctx_role_tenant_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				errmsg("trigger function convctx.role_tenant_changed() was not called by trigger manager"),
				errhint("Only the triggers role_tenant_changed and role_tenant_truncated on convctx.role_tenant fire it."));
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	binding_valid = false;
	return PointerGetDatum(NULL);
}

/*
 * Only a superuser or a role bound to every tenant may change bindings: a
 * role bound to one tenant must not be able to move itself, or anyone, to
 * another one; an unbound role gets 42501 from BoundTenant already.
 */
static void
CheckMayBind(const char *what)
{
	const char *bound = BoundTenant();

	if (bound != NULL)
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("permission denied to %s", what),
				errdetail("This session is bound to tenant \"%s\"; only superusers and roles bound to every tenant manage bindings.",
						  bound));
}

/*
 * The role name argument, exactly as in pg_roles. must_exist is false for
 * unbinding, which also removes the binding of a role that does not exist
 * (dropped, renamed, or never created in this cluster).
 */
static char *
ArgRoleName(FunctionCallInfo fcinfo, int argno, bool must_exist)
{
	char	   *name;

	ArgNotNull(fcinfo, argno, "role");
	name = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (name[0] == '\0')
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("role must not be empty"));
	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				errcode(ERRCODE_NAME_TOO_LONG),
				errmsg("role name is too long"),
				errdetail("A role name has at most %d bytes.", NAMEDATALEN - 1));
	if (must_exist && !OidIsValid(get_role_oid(name, true)))
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("role \"%s\" does not exist", name),
				errhint("Give the role's name exactly as pg_roles.rolname spells it."));
	return name;
}

/*
 * The tenant argument of bind_role_tenant: any id, the empty one included
 * (the tenant of a single-tenant database).
 */
static text *
ArgTenant(FunctionCallInfo fcinfo, int argno)
{
	text	   *tenant;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("tenant must not be null"),
				errhint("Bind a role that serves every tenant with convctx.bind_role_all_tenants."));
	tenant = PG_GETARG_TEXT_PP(argno);
	CheckIdLength(VARSIZE_ANY_EXHDR(tenant), "tenant");
	return tenant;
}

/*
 * Audited as an event of the tenant bound or unbound; a binding to every
 * tenant as one of tenant '' with "all_tenants": true.
 */
static void
AuditBinding(const char *action, const char *role, text *tenant_id)
{
	JsonbParseState *state = NULL;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(&state, "role");
	JsonbPushString(&state, WJB_VALUE, role, strlen(role));
	if (tenant_id == NULL)
	{
		JsonbPushKey(&state, "all_tenants");
		JsonbPushBool(&state, WJB_VALUE, true);
	}
	AuditWrite(tenant_id ? tenant_id : cstring_to_text(""), action, NULL, NULL,
			   JsonbEndObjectText(&state));
}

/* Bind role to tenant_id (NULL: every tenant); audited when it changed. */
static void
BindRole(const char *role, text *tenant_id)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {CStringGetTextDatum(role), PointerGetDatum(tenant_id)};
	char		nulls[2] = {' ', tenant_id ? ' ' : 'n'};

	CheckMayBind("bind roles to tenants");
	SPI_connect();
	SpiRunPlan(SpiKeptPlan(&bind_plan, BIND_SQL, 2, argtypes), values, nulls, false, 0,
			   SPI_OK_INSERT);
	if (SPI_processed > 0)
		AuditBinding(tenant_id ? "bind_role_tenant" : "bind_role_all_tenants", role, tenant_id);
	SPI_finish();
	binding_valid = false;		/* on Citus no trigger says so (BindingRefresh) */
}

PG_FUNCTION_INFO_V1(convctx_bind_role_tenant_0_3);

/*
 * bind_role_tenant(role text, tenant text) -> void
 */
Datum
convctx_bind_role_tenant_0_3(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(bind_role_tenant);
	char	   *role = ArgRoleName(fcinfo, 0, true);
	text	   *tenant_id = ArgTenant(fcinfo, 1);

	BindRole(role, tenant_id);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(convctx_bind_role_all_tenants);

/*
 * bind_role_all_tenants(role text) -> void
 */
Datum
convctx_bind_role_all_tenants(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(bind_role_all_tenants);
	BindRole(ArgRoleName(fcinfo, 0, true), NULL);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(convctx_unbind_role_tenant_0_3);

/*
 * unbind_role_tenant(role text) -> boolean: whether there was a binding
 */
Datum
convctx_unbind_role_tenant_0_3(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(unbind_role_tenant);
	char	   *role = ArgRoleName(fcinfo, 0, false);
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(role)};
	bool		removed;

	CheckMayBind("unbind roles from tenants");
	SPI_connect();
	SpiRunPlan(SpiKeptPlan(&unbind_plan, UNBIND_SQL, 1, argtypes), values, NULL, false, 0,
			   SPI_OK_DELETE_RETURNING);
	removed = SPI_processed > 0;
	if (removed)
	{
		bool		isnull;
		Datum		tenant = SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 1, &isnull);

		AuditBinding("unbind_role_tenant", role, isnull ? NULL : DatumGetTextPP(tenant));
	}
	SPI_finish();
	binding_valid = false;		/* on Citus no trigger says so (BindingRefresh) */
	PG_RETURN_BOOL(removed);
}

/*
 * The functions of version 0.2.0, which took a regrole, are gone from the
 * catalog of 0.3.0. Their symbols stay, as errors, because the update
 * script from 0.1.0 to 0.2.0 creates them (an install of 0.1.0 updated to
 * this version runs it), and so that a catalog not yet updated gets a
 * clear error instead of a missing symbol.
 */
static void
ReplacedFunction(const char *name)
{
	ereport(ERROR,
			errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			errmsg("%s(regrole) was replaced in convctx 0.3.0", name),
			errhint("Update the extension with ALTER EXTENSION convctx UPDATE."));
}

PG_FUNCTION_INFO_V1(convctx_bind_role_tenant);

Datum
convctx_bind_role_tenant(PG_FUNCTION_ARGS)
{
	ReplacedFunction("bind_role_tenant");
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(convctx_unbind_role_tenant);

Datum
convctx_unbind_role_tenant(PG_FUNCTION_ARGS)
{
	ReplacedFunction("unbind_role_tenant");
	PG_RETURN_VOID();
}
