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
 * The calling role is the "outer" user: inside the SECURITY DEFINER
 * functions of this extension the current user is their owner, while the
 * outer user stays the session's role (or the one chosen by SET ROLE).
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

#define BIND_SQL \
	"INSERT INTO convctx.role_tenant AS b (role_id, tenant_id) VALUES ($1, $2)" \
	" ON CONFLICT (role_id) DO UPDATE SET tenant_id = EXCLUDED.tenant_id," \
	"     bound_at = pg_catalog.statement_timestamp()" \
	"  WHERE b.tenant_id OPERATOR(pg_catalog.<>) EXCLUDED.tenant_id"

#define UNBIND_SQL \
	"DELETE FROM convctx.role_tenant WHERE role_id OPERATOR(pg_catalog.=) $1 RETURNING tenant_id"

static SPIPlanPtr bind_plan = NULL;
static SPIPlanPtr unbind_plan = NULL;

/* The cached binding of binding_user; valid until an invalidation. */
static bool binding_valid = false;
static Oid	binding_user = InvalidOid;
static Oid	binding_relid = InvalidOid;
static char *binding_tenant = NULL;		/* NULL: unbound */
static char *binding_conflict = NULL;	/* set: bound to two tenants */

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
 * Read the binding of role user from role_tenant: a row for the role
 * itself wins; else the rows of the roles it is a member of, which must
 * all name the same tenant. Superuser status does not count as
 * membership.
 */
static void
BindingLoad(Oid user)
{
	Oid			relid = RoleTenantRelid();
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *direct = NULL;
	char	   *inherited = NULL;
	char	   *conflict = NULL;

	BindingReset();
	binding_user = user;
	binding_relid = relid;
	if (!OidIsValid(relid))
		return;					/* not cached: the table may appear */

	rel = table_open(relid, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		isnull;
		Oid			role = DatumGetObjectId(heap_getattr(tup, Anum_role_tenant_role_id,
														 RelationGetDescr(rel), &isnull));
		Datum		tenant = heap_getattr(tup, Anum_role_tenant_tenant_id,
										  RelationGetDescr(rel), &isnull);

		if (isnull)
			continue;
		if (role == user)
			direct = TextDatumGetCString(tenant);
		else if (is_member_of_role_nosuper(user, role))
		{
			char	   *t = TextDatumGetCString(tenant);

			if (inherited == NULL)
				inherited = t;
			else if (strcmp(inherited, t) != 0)
				conflict = t;
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (direct)
		binding_tenant = MemoryContextStrdup(TopMemoryContext, direct);
	else if (conflict)
		binding_conflict = MemoryContextStrdup(TopMemoryContext,
											   psprintf("\"%s\" and \"%s\"", inherited, conflict));
	else if (inherited)
		binding_tenant = MemoryContextStrdup(TopMemoryContext, inherited);
	binding_valid = true;
}

/*
 * The tenant the calling role is bound to, or NULL when it is unbound.
 * ERROR 42501 when it is bound to two tenants through its memberships.
 */
const char *
BoundTenant(void)
{
	Oid			user = GetOuterUserId();

	if (!binding_valid || binding_user != user)
		BindingLoad(user);
	if (binding_conflict)
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("role \"%s\" is bound to more than one tenant",
					   GetUserNameFromId(user, false)),
				errdetail("Its memberships bind it to tenants %s.", binding_conflict),
				errhint("Bind the role itself with convctx.bind_role_tenant, or unbind one of its roles."));
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

	if (bound == NULL)
		return cstring_to_text(setting);
	if (setting[0] != '\0' && strcmp(setting, bound) != 0)
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("permission denied for tenant \"%s\"", setting),
				errdetail("Role \"%s\" is bound to tenant \"%s\".",
						  GetUserNameFromId(GetOuterUserId(), false), bound),
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
				errdetail("Role \"%s\" is bound to tenant \"%s\"; only unbound roles manage bindings.",
						  CallerRoleName(), bound));
}

static Oid
ArgRole(FunctionCallInfo fcinfo, int argno)
{
	Oid			role;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("role must not be null"));
	role = PG_GETARG_OID(argno);
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
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
		char	   *name = GetUserNameFromId(role, false);

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
	Oid			role = ArgRole(fcinfo, 0);
	text	   *tenant_id = ArgRequiredId(fcinfo, 1, "tenant");
	Oid			argtypes[2] = {REGROLEOID, TEXTOID};
	Datum		values[2] = {ObjectIdGetDatum(role), PointerGetDatum(tenant_id)};

	CheckMayBind("bind roles to tenants");
	SPI_connect();
	SpiRunPlan(SpiKeptPlan(&bind_plan, BIND_SQL, 2, argtypes), values, NULL, false, 0,
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
	Oid			role = ArgRole(fcinfo, 0);
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
