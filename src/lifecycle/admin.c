/*-------------------------------------------------------------------------
 *
 * admin.c
 *	  What administrators read: admin_sessions, admin_stats, admin_audit,
 *	  admin_session_turns, bindings and unresolved_bindings, behind the
 *	  views sessions, stats and audit.
 *
 * Administrators have no privilege on any table, so that no plan,
 * estimate, ctid or sequence of another tenant reaches them. Each
 * function decides the tenant whose rows it returns from the role that
 * called it (BoundTenant: every tenant for superusers and roles bound to
 * every tenant), then runs one fixed statement as the extension's owner
 * with that tenant as $1 (NULL for every tenant) and returns its rows.
 * They are C functions rather than SQL ones with SECURITY DEFINER because
 * such a function cannot tell who called it (ConvctxInvoker, owner.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/lifecycle/admin.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "core/common.h"
#include "core/args.h"
#include "core/spi_plans.h"
#include "core/tenancy.h"

/* $1 the tenant, NULL for every tenant; $2 a session id or NULL */
#define SESSIONS_SQL \
	"SELECT s.tenant_id::pg_catalog.text, s.session_id::pg_catalog.text," \
	"       s.identity_id::pg_catalog.text," \
	"       COALESCE(t.turns, 0), COALESCE(t.finalized, 0), COALESCE(t.redacted, 0)," \
	"       t.first_at, s.last_activity_at," \
	"       CASE WHEN s.identity_id IS NULL" \
	"            THEN s.last_activity_at OPERATOR(pg_catalog.+) r.session_ttl END" \
	"  FROM convctx.session s" \
	"  LEFT JOIN LATERAL (" \
	"    SELECT pg_catalog.count(*) FILTER (WHERE u.replaced_by_turn_id IS NULL) AS turns," \
	"           pg_catalog.count(*) FILTER (WHERE u.replaced_by_turn_id IS NULL" \
	"                                         AND u.finalized_at IS NOT NULL" \
	"                                         AND u.deleted_at IS NULL) AS finalized," \
	"           pg_catalog.count(*) FILTER (WHERE u.replaced_by_turn_id IS NULL" \
	"                                         AND u.deleted_at IS NOT NULL) AS redacted," \
	"           pg_catalog.min(u.created_at) AS first_at" \
	"      FROM convctx.turn u" \
	"     WHERE u.tenant_id OPERATOR(pg_catalog.=) s.tenant_id" \
	"       AND u.session_id OPERATOR(pg_catalog.=) s.session_id) t ON true" \
	"  CROSS JOIN convctx.retention_settings() r" \
	" WHERE ($1::pg_catalog.text IS NULL OR s.tenant_id OPERATOR(pg_catalog.=) $1)" \
	"   AND ($2::pg_catalog.text IS NULL OR s.session_id OPERATOR(pg_catalog.=) $2)"

#define TENANT_OF(alias) \
	" ($1::pg_catalog.text IS NULL OR " alias ".tenant_id OPERATOR(pg_catalog.=) $1)"

#define STATS_SQL \
	"WITH tenants AS (" \
	"    SELECT s.tenant_id FROM convctx.session s WHERE" TENANT_OF("s") \
	"    UNION SELECT c.tenant_id FROM convctx.conversation_context c WHERE" TENANT_OF("c") ")," \
	" sessions AS (" \
	"    SELECT s.tenant_id, pg_catalog.count(*) AS sessions," \
	"           pg_catalog.count(*) FILTER (WHERE s.identity_id IS NULL) AS anonymous_sessions," \
	"           pg_catalog.count(*) FILTER (WHERE s.identity_id IS NOT NULL) AS linked_sessions" \
	"      FROM convctx.session s WHERE" TENANT_OF("s") " GROUP BY s.tenant_id)," \
	" turns AS (" \
	"    SELECT u.tenant_id," \
	"           pg_catalog.count(*) FILTER (WHERE u.replaced_by_turn_id IS NULL) AS turns," \
	"           pg_catalog.count(*) FILTER (WHERE u.replaced_by_turn_id IS NOT NULL) AS old_versions," \
	"           pg_catalog.count(*) FILTER (WHERE u.deleted_at IS NOT NULL" \
	"                                         AND u.replaced_by_turn_id IS NULL) AS tombstones" \
	"      FROM convctx.turn u WHERE" TENANT_OF("u") " GROUP BY u.tenant_id)," \
	" contexts AS (" \
	"    SELECT c.tenant_id, pg_catalog.count(*) AS contexts" \
	"      FROM convctx.conversation_context c WHERE" TENANT_OF("c") " GROUP BY c.tenant_id)," \
	/* the sizes are of every tenant's rows together: only for callers that see every tenant */ \
	" sizes AS (" \
	"    SELECT pg_catalog.sum(pg_catalog.pg_table_size(c.oid)) AS table_bytes," \
	"           pg_catalog.sum(pg_catalog.pg_indexes_size(c.oid)) AS index_bytes" \
	"      FROM pg_catalog.pg_class c" \
	"     WHERE $1::pg_catalog.text IS NULL" \
	"       AND c.relnamespace OPERATOR(pg_catalog.=) 'convctx'::pg_catalog.regnamespace" \
	"       AND c.relkind OPERATOR(pg_catalog.=) 'r')" \
	"SELECT t.tenant_id::pg_catalog.text, COALESCE(s.sessions, 0)," \
	"       COALESCE(s.anonymous_sessions, 0), COALESCE(s.linked_sessions, 0)," \
	"       COALESCE(u.turns, 0), COALESCE(u.old_versions, 0), COALESCE(u.tombstones, 0)," \
	"       COALESCE(c.contexts, 0), z.table_bytes, z.index_bytes" \
	"  FROM tenants t" \
	"  LEFT JOIN sessions s ON s.tenant_id OPERATOR(pg_catalog.=) t.tenant_id" \
	"  LEFT JOIN turns u ON u.tenant_id OPERATOR(pg_catalog.=) t.tenant_id" \
	"  LEFT JOIN contexts c ON c.tenant_id OPERATOR(pg_catalog.=) t.tenant_id" \
	" CROSS JOIN sizes z"

#define AUDIT_SQL \
	"SELECT a.tenant_id::pg_catalog.text, a.logged_at, a.role_name, a.acting_role, a.action," \
	"       a.session_id, a.identity_id::pg_catalog.text, a.details" \
	"  FROM convctx.audit_log a WHERE" TENANT_OF("a") \
	" ORDER BY a.logged_at, a.audit_id"

/* $1 the tenant (never NULL), $2 the session */
#define SESSION_TURNS_SQL \
	"SELECT t.turn_no, t.record_version, t.turn_id, t.request_id::pg_catalog.text," \
	"       t.identity_id::pg_catalog.text, t.created_at, t.finalized_at, t.deleted_at," \
	"       t.replaced_by_turn_id, t.pipeline_name, t.consultant, t.repository, t.translate_chat," \
	"       t.question_neutral, t.answer_neutral, t.question_translated, t.answer_translated," \
	"       t.answer_translated_is_fallback, t.metadata" \
	"  FROM convctx.turn t" \
	" WHERE " SESSION_KEY_AT("t") \
	" ORDER BY t.turn_no, t.record_version"

#define ROLE_EXISTS(alias) \
	" EXISTS (SELECT FROM pg_catalog.pg_roles x" \
	"          WHERE x.rolname OPERATOR(pg_catalog.=) " alias ".role_name)"

#define BINDINGS_SQL \
	"SELECT b.role_name::pg_catalog.text, b.tenant_id::pg_catalog.text, b.tenant_id IS NULL," \
	ROLE_EXISTS("b") ", b.bound_at" \
	"  FROM convctx.role_tenant b WHERE" TENANT_OF("b") \
	" ORDER BY b.role_name"

#define UNRESOLVED_BINDINGS_SQL \
	"SELECT b.role_name::pg_catalog.text, b.tenant_id::pg_catalog.text, b.bound_at" \
	"  FROM convctx.role_tenant b WHERE" TENANT_OF("b") " AND NOT" ROLE_EXISTS("b") \
	" ORDER BY b.role_name"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr sessions_plan, stats_plan, audit_plan, session_turns_plan,
			bindings_plan, unresolved_bindings_plan;

/* The caller's tenant for these reads: NULL for every tenant. */
static text *
AdminScope(void)
{
	return BoundTenant() == NULL ? NULL : CurrentTenant();
}

/*
 * Run a read-only statement with $1 = scope (NULL: every tenant) and $2 =
 * arg, and return its rows as the function's result set; the statement's
 * columns are the function's, in order and type (checked).
 */
static void
AdminRows(FunctionCallInfo fcinfo, SPIPlanPtr *cache, const char *sql, Oid argtype,
		  text *scope, Datum arg, bool arg_null)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			argtypes[2] = {TEXTOID, argtype};
	Datum		values[2] = {PointerGetDatum(scope), arg};
	char		nulls[2] = {scope ? ' ' : 'n', arg_null ? 'n' : ' '};

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	SPI_connect();
	/*
	 * Planned freely: these read much of a table, and a plan forced off
	 * sequential scans would cost enough to be compiled by JIT every call.
	 */
	SpiRunBulkPlan(SpiKeptPlan(cache, sql, 2, argtypes), values, nulls, true, 0, SPI_OK_SELECT);
	SpiRowsToResult(rsinfo);
	SPI_finish();
}

PG_FUNCTION_INFO_V1(convctx_admin_sessions);

/*
 * admin_sessions(only_session) -> setof (tenant, session_id, identity_id,
 * turns, finalized, redacted, first_at, last_at, expires_at)
 */
Datum
convctx_admin_sessions(PG_FUNCTION_ARGS)
{
	text	   *only_session = ArgOptionalId(fcinfo, 0, "session_id");

	AdminRows(fcinfo, &sessions_plan, SESSIONS_SQL, TEXTOID, AdminScope(),
			  PointerGetDatum(only_session), only_session == NULL);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(convctx_admin_stats);

/*
 * admin_stats() -> setof (tenant, sessions, anonymous_sessions,
 * linked_sessions, turns, old_versions, tombstones, contexts, table_bytes,
 * index_bytes)
 */
Datum
convctx_admin_stats(PG_FUNCTION_ARGS)
{
	AdminRows(fcinfo, &stats_plan, STATS_SQL, TEXTOID, AdminScope(), (Datum) 0, true);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(convctx_admin_audit);

/*
 * admin_audit() -> setof (tenant_id, logged_at, role_name, acting_role,
 * action, session_id, identity_id, details)
 */
Datum
convctx_admin_audit(PG_FUNCTION_ARGS)
{
	AdminRows(fcinfo, &audit_plan, AUDIT_SQL, TEXTOID, AdminScope(), (Datum) 0, true);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(convctx_admin_session_turns);

/*
 * admin_session_turns(session_id) -> setof every version of every turn of
 * the session, tombstones included, of the tenant the caller acts for
 */
Datum
convctx_admin_session_turns(PG_FUNCTION_ARGS)
{
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");

	AdminRows(fcinfo, &session_turns_plan, SESSION_TURNS_SQL, TEXTOID, CurrentTenant(),
			  PointerGetDatum(session_id), false);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(convctx_bindings);

/*
 * bindings() -> setof (role_name, tenant_id, all_tenants, role_exists,
 * bound_at)
 */
Datum
convctx_bindings(PG_FUNCTION_ARGS)
{
	AdminRows(fcinfo, &bindings_plan, BINDINGS_SQL, TEXTOID, AdminScope(), (Datum) 0, true);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(convctx_unresolved_bindings);

/*
 * unresolved_bindings() -> setof (role_name, tenant_id, bound_at): the
 * bindings whose role does not exist
 */
Datum
convctx_unresolved_bindings(PG_FUNCTION_ARGS)
{
	AdminRows(fcinfo, &unresolved_bindings_plan, UNRESOLVED_BINDINGS_SQL, TEXTOID, AdminScope(),
			  (Datum) 0, true);
	return (Datum) 0;
}
