/*-------------------------------------------------------------------------
 *
 * tenancy.c
 *	  Which tenant a call acts for: current_tenant, and the role bindings
 *	  that fix it (bind_role_tenant, unbind_role_tenant).
 *
 * An unbound role acts for the tenant named by the setting convctx.tenant.
 * A role bound in convctx.role_tenant, directly or through a role it is a
 * member of, always acts for its binding; a different convctx.tenant is an
 * error on the next call, never another tenant's data. The row-level
 * security policies call current_tenant() too, so the same rule holds for
 * direct access to the tables.
 *
 * The calling roles are the session user and the "outer" user: inside the
 * SECURITY DEFINER functions of this extension the current user is their
 * owner, while the outer user stays the session's role or the one chosen
 * by SET ROLE. Both count, so SET ROLE cannot leave a binding behind.
 *
 * The binding of the calling role is cached per backend; changes of
 * role_tenant (bind_role_tenant and unbind_role_tenant send a relcache
 * invalidation of the table), of role memberships and of roles reset it.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/tenancy.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "convctx.h"

#define ROLE_TENANT_TABLE "role_tenant"
#define Anum_role_tenant_role_id 1
#define Anum_role_tenant_tenant_id 2
#define Anum_role_tenant_role_name 3

#define BIND_SQL \
	"INSERT INTO convctx.role_tenant AS b (role_id, tenant_id, role_name)" \
	" VALUES ($1, $2, $3)" \
	" ON CONFLICT (role_id) DO UPDATE SET tenant_id = EXCLUDED.tenant_id," \
	"     role_name = EXCLUDED.role_name, bound_at = pg_catalog.statement_timestamp()" \
	"  WHERE b.tenant_id OPERATOR(pg_catalog.<>) EXCLUDED.tenant_id" \
	"     OR b.role_name OPERATOR(pg_catalog.<>) EXCLUDED.role_name"

#define UNBIND_SQL \
	"DELETE FROM convctx.role_tenant WHERE role_id OPERATOR(pg_catalog.=) $1 RETURNING tenant_id"

static SPIPlanPtr bind_plan = NULL;
static SPIPlanPtr unbind_plan = NULL;

/*
 * The cached binding of the session (binding_session_user acting as
 * binding_user); valid until an invalidation.
 */
static bool binding_valid = false;
static Oid	binding_session_user = InvalidOid;
static Oid	binding_user = InvalidOid;
static Oid	binding_relid = InvalidOid;
static char *binding_tenant = NULL;		/* NULL: unbound */
static char *binding_conflict = NULL;	/* set: contradictory or stale */

static void
BindingReset(void)
{
	binding_valid = false;
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

void
TenancyInit(void)
{
	CacheRegisterRelcacheCallback(BindingRelcacheCallback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMMEMROLE, BindingSyscacheCallback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, BindingSyscacheCallback, (Datum) 0);
}

/* convctx.role_tenant, or InvalidOid before version 0.2.0 created it. */
static Oid
RoleTenantRelid(void)
{
	Oid			nsp = get_namespace_oid("convctx", true);

	return OidIsValid(nsp) ? get_relname_relid(ROLE_TENANT_TABLE, nsp) : InvalidOid;
}

/*
 * The table is read by column number: make sure it has the columns this
 * library expects (a catalog of another version would not), rather than
 * reading a datum as the wrong type.
 */
static void
RoleTenantCheckShape(TupleDesc desc)
{
	static const Oid expected[] = {REGROLEOID, TEXTOID, TEXTOID};
	int			i;

	for (i = 0; i < (int) lengthof(expected); i++)
		if (desc->natts <= i || TupleDescAttr(desc, i)->attisdropped ||
			TupleDescAttr(desc, i)->atttypid != expected[i])
			ereport(ERROR,
					errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					errmsg("table convctx.role_tenant does not have the columns this version of convctx expects"),
					errhint("Update the extension with ALTER EXTENSION convctx UPDATE."));
}

typedef struct BindingRow
{
	Oid			role;
	char	   *role_name;		/* the name it was bound under */
	char	   *tenant;
} BindingRow;

/*
 * The binding of one role among rows: a row for the role itself wins;
 * else the rows of the roles it is a member of, which must all name the
 * same tenant. Superuser status does not count as membership. A row whose
 * role no longer has the name it was bound under (renamed, or dropped and
 * its OID reused) binds nobody until it is renewed: it is reported as a
 * problem, never ignored. Returns the tenant or NULL; sets *problem.
 */
static bool
BindingRowStale(BindingRow *r, char **problem)
{
	char	   *current_name = GetUserNameFromId(r->role, true);

	if (current_name != NULL && strcmp(current_name, r->role_name) == 0)
		return false;
	*problem = psprintf("The binding of role \"%s\" to tenant \"%s\" names a role that has been renamed or dropped",
						r->role_name, r->tenant);
	return true;
}

static char *
RoleBinding(Oid user, BindingRow *rows, int nrows, char **problem)
{
	char	   *inherited = NULL;
	int			i;

	for (i = 0; i < nrows; i++)
		if (rows[i].role == user)
			return BindingRowStale(&rows[i], problem) ? NULL : rows[i].tenant;

	for (i = 0; i < nrows; i++)
	{
		BindingRow *r = &rows[i];

		if (!is_member_of_role_nosuper(user, r->role))
			continue;
		if (BindingRowStale(r, problem))
			return NULL;
		if (inherited == NULL)
			inherited = r->tenant;
		else if (strcmp(inherited, r->tenant) != 0)
		{
			*problem = psprintf("Role \"%s\" is a member of roles bound to tenants \"%s\" and \"%s\"",
								GetUserNameFromId(user, false), inherited, r->tenant);
			return NULL;
		}
	}
	return inherited;
}

/*
 * Read role_tenant and work out the tenant of a session whose session user
 * is session_user and whose current role (SET ROLE) is outer_user. Both
 * count: a bound login role that switches to an unbound role (convctx_app
 * itself, say) stays bound.
 */
static void
BindingLoad(Oid session_user, Oid outer_user)
{
	Oid			relid = RoleTenantRelid();
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	BindingRow *rows = NULL;
	int			nrows = 0;
	int			maxrows = 0;
	char	   *problem = NULL;
	char	   *of_session;
	char	   *of_outer = NULL;

	BindingReset();
	binding_session_user = session_user;
	binding_user = outer_user;
	binding_relid = relid;
	if (!OidIsValid(relid))
		return;					/* not cached: the table may appear */

	rel = table_open(relid, AccessShareLock);
	RoleTenantCheckShape(RelationGetDescr(rel));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		null1,
					null2,
					null3;
		Datum		role = heap_getattr(tup, Anum_role_tenant_role_id, desc, &null1);
		Datum		tenant = heap_getattr(tup, Anum_role_tenant_tenant_id, desc, &null2);
		Datum		name = heap_getattr(tup, Anum_role_tenant_role_name, desc, &null3);

		if (null1 || null2 || null3)
			continue;
		if (nrows == maxrows)
		{
			maxrows = maxrows ? maxrows * 2 : 16;
			rows = rows ? repalloc(rows, sizeof(BindingRow) * maxrows)
				: palloc(sizeof(BindingRow) * maxrows);
		}
		rows[nrows].role = DatumGetObjectId(role);
		rows[nrows].tenant = TextDatumGetCString(tenant);
		rows[nrows].role_name = TextDatumGetCString(name);
		nrows++;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	of_session = RoleBinding(session_user, rows, nrows, &problem);
	if (problem == NULL && outer_user != session_user)
		of_outer = RoleBinding(outer_user, rows, nrows, &problem);
	if (problem == NULL && of_session && of_outer && strcmp(of_session, of_outer) != 0)
		problem = psprintf("Role \"%s\" is bound to tenant \"%s\" but acts as role \"%s\", bound to tenant \"%s\"",
						   GetUserNameFromId(session_user, false), of_session,
						   GetUserNameFromId(outer_user, false), of_outer);

	if (problem)
		binding_conflict = MemoryContextStrdup(TopMemoryContext, problem);
	else if (of_outer || of_session)
		binding_tenant = MemoryContextStrdup(TopMemoryContext, of_outer ? of_outer : of_session);
	binding_valid = true;
}

/*
 * The tenant the calling session is bound to, or NULL when it is unbound.
 * ERROR 42501 when its bindings contradict each other or are stale.
 */
const char *
BoundTenant(void)
{
	Oid			session_user = GetSessionUserId();
	Oid			outer_user = GetOuterUserId();

	if (!binding_valid || binding_session_user != session_user || binding_user != outer_user)
		BindingLoad(session_user, outer_user);
	if (binding_conflict)
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("the tenant of this session cannot be determined"),
				errdetail("%s.", binding_conflict),
				errhint("Fix the bindings with convctx.bind_role_tenant or convctx.unbind_role_tenant."));
	return binding_tenant;
}

/*
 * The tenant of the calling session, as a text datum. For a bound role its
 * binding, and ERROR 42501 if convctx.tenant names another tenant; for an
 * unbound role convctx.tenant, else the empty string.
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

	if (bound == NULL)
		return cstring_to_text(setting);
	if (setting[0] != '\0' && strcmp(setting, bound) != 0)
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("permission denied for tenant \"%s\"", setting),
				errdetail("This session is bound to tenant \"%s\".", bound),
				errhint("Reset convctx.tenant, or set it to \"%s\".", bound));
	return cstring_to_text(bound);
}

/* The calling role's name, for the audit log. */
char *
CallerRoleName(void)
{
	return GetUserNameFromId(GetOuterUserId(), false);
}

PG_FUNCTION_INFO_V1(convctx_current_tenant);

Datum
convctx_current_tenant(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(CurrentTenant());
}

/*
 * Only an unbound role may change bindings: a role bound to a tenant must
 * not be able to move itself, or anyone, to another one.
 */
static void
CheckMayBind(const char *what)
{
	const char *bound = BoundTenant();

	if (bound != NULL)
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("permission denied to %s", what),
				errdetail("This session is bound to tenant \"%s\"; only unbound roles manage bindings.",
						  bound));
}

/*
 * The role argument; must_exist is false for unbinding, which also clears
 * the binding left behind by a dropped role.
 */
static Oid
ArgRole(FunctionCallInfo fcinfo, int argno, bool must_exist)
{
	Oid			role;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("role must not be null"));
	role = PG_GETARG_OID(argno);
	if (must_exist && !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("role with OID %u does not exist", role));
	return role;
}

/* Audited as an event of the tenant bound or unbound. */
static void
AuditBinding(const char *action, Oid role, text *tenant_id)
{
	JsonbParseState *state = NULL;
	JsonbValue *res;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(&state, "role");
	{
		char	   *name = GetUserNameFromId(role, true);

		if (name == NULL)
			name = psprintf("%u", role);

		JsonbPushString(&state, WJB_VALUE, name, strlen(name));
	}
	res = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	AuditWrite(tenant_id, action, NULL, NULL,
			   JsonbToCString(NULL, &JsonbValueToJsonb(res)->root, 64));
}

PG_FUNCTION_INFO_V1(convctx_bind_role_tenant);

/*
 * bind_role_tenant(role, tenant) -> void
 */
Datum
convctx_bind_role_tenant(PG_FUNCTION_ARGS)
{
	Oid			role = ArgRole(fcinfo, 0, true);
	text	   *tenant_id = ArgRequiredId(fcinfo, 1, "tenant");
	Oid			argtypes[3] = {REGROLEOID, TEXTOID, TEXTOID};
	Datum		values[3] = {ObjectIdGetDatum(role), PointerGetDatum(tenant_id),
	CStringGetTextDatum(GetUserNameFromId(role, false))};

	CheckMayBind("bind roles to tenants");
	SPI_connect();
	SpiRunPlan(SpiKeptPlan(&bind_plan, BIND_SQL, 3, argtypes), values, NULL, false, 0,
			   SPI_OK_INSERT);
	if (SPI_processed > 0)
		AuditBinding("bind_role_tenant", role, tenant_id);
	SPI_finish();
	CacheInvalidateRelcacheByRelid(RoleTenantRelid());
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(convctx_unbind_role_tenant);

/*
 * unbind_role_tenant(role) -> boolean: whether there was a binding
 */
Datum
convctx_unbind_role_tenant(PG_FUNCTION_ARGS)
{
	Oid			role = ArgRole(fcinfo, 0, false);
	Oid			argtypes[1] = {REGROLEOID};
	Datum		values[1] = {ObjectIdGetDatum(role)};
	bool		removed;

	CheckMayBind("unbind roles from tenants");
	SPI_connect();
	SpiRunPlan(SpiKeptPlan(&unbind_plan, UNBIND_SQL, 1, argtypes), values, NULL, false, 0,
			   SPI_OK_DELETE_RETURNING);
	removed = SPI_processed > 0;
	if (removed)
	{
		bool		isnull;

		AuditBinding("unbind_role_tenant", role,
					 DatumGetTextPP(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1, &isnull)));
	}
	SPI_finish();
	CacheInvalidateRelcacheByRelid(RoleTenantRelid());
	PG_RETURN_BOOL(removed);
}
