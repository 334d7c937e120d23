/*-------------------------------------------------------------------------
 *
 * audit.c
 *	  Rows of convctx.audit_log: ids and counts of security and
 *	  administration events, never content.
 *
 * An event that succeeds is logged in the caller's transaction, so it
 * commits or rolls back with what it records. A refusal is logged in a
 * transaction of its own (worker.c), so it outlives the ERROR that rolls
 * back the caller, and a cancel or terminate of the caller.
 *
 * role_name is the session user, acting_role the role it acted as when
 * that differs (SET ROLE), so SET ROLE cannot hide who acted.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/audit.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "core/catalog.h"
#include "core/audit.h"
#include "core/owner.h"
#include "core/spi_plans.h"
#include "core/variant.h"
#include "core/worker.h"

#define AUDIT_INSERT_SQL \
	"INSERT INTO convctx.audit_log" \
	"       (tenant_id, role_name, acting_role, action, session_id, identity_id, details)" \
	" VALUES ($1, $2, $3, $4, $5, $6, $7::pg_catalog.jsonb)"

/* The role refusal rows are written as (created by the install and update scripts). */
#define AUDIT_ROLE "convctx_audit"

static SPIPlanPtr audit_plan = NULL;

/*
 * Who caused the event: the session user (the login role, which SET ROLE
 * does not change), and the role that called convctx when that is another
 * one (SET ROLE, or the owner of a SECURITY DEFINER function or of a table
 * whose maintenance ran the call).
 */
static void
AuditWho(char **role_name, char **acting_role)
{
	Oid			session = GetSessionUserId();
	Oid			outer = ConvctxInvoker();

	*role_name = GetUserNameFromId(session, false);
	*acting_role = outer == session ? NULL : GetUserNameFromId(outer, false);
}

/*
 * Log an event in the caller's transaction; SPI must be connected.
 */
void
AuditWrite(text *tenant, const char *action, text *session_id, text *identity_id,
		   const char *details_json)
{
	Oid			argtypes[7] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	char	   *role_name;
	char	   *acting_role;

	AuditWho(&role_name, &acting_role);
	values[0] = PointerGetDatum(tenant);
	values[1] = CStringGetTextDatum(role_name);
	values[2] = acting_role ? CStringGetTextDatum(acting_role) : (Datum) 0;
	nulls[2] = acting_role ? ' ' : 'n';
	values[3] = CStringGetTextDatum(action);
	values[4] = PointerGetDatum(session_id);
	nulls[4] = session_id ? ' ' : 'n';
	values[5] = PointerGetDatum(identity_id);
	nulls[5] = identity_id ? ' ' : 'n';
	values[6] = CStringGetTextDatum(details_json);
	SpiRunPlan(SpiKeptPlan(&audit_plan, AUDIT_INSERT_SQL, 7, argtypes),
			   values, nulls, false, 0, SPI_OK_INSERT);
}

/*
 * Log an event in a transaction of its own, written by a worker acting as
 * role convctx_audit (which may insert audit rows and nothing else).
 * Returns whether the row was committed; if not, a WARNING says why.
 *
 * The caller writes its server-log line about the event first. Interrupts
 * are held from here until the worker is done, so a cancel or terminate
 * of the caller (statement_timeout, pg_cancel_backend,
 * pg_terminate_backend) takes effect after the row is committed, not
 * instead of it. The wait is bounded (worker.c).
 */
bool
AuditWriteAutonomous(text *tenant, const char *action, text *session_id,
					 text *identity_id, const char *details_json)
{
	const char *args[7];
	char	   *role_name;
	char	   *acting_role;
	char	   *result;
	char	   *error;
	int			sqlstate;
	Oid			audit_role;
	bool		written;

	HOLD_INTERRUPTS();
	AuditWho(&role_name, &acting_role);
	args[0] = text_to_cstring(tenant);
	args[1] = role_name;
	args[2] = acting_role;
	args[3] = action;
	args[4] = session_id ? text_to_cstring(session_id) : NULL;
	args[5] = identity_id ? text_to_cstring(identity_id) : NULL;
	args[6] = details_json;

	/*
	 * On Citus the row goes to the node of the tenant's shard, over a
	 * connection Citus opens as the current user, and convctx_audit cannot
	 * log in: there the worker writes it as the extension's owner, with the
	 * same fixed statement.
	 */
	if (Variant()->audit_by_owner)
		written = WorkerRunSql(MyDatabaseId, ConvctxOwner(), WORKER_AUTONOMOUS | WORKER_AS_OWNER,
							   AUDIT_INSERT_SQL, 7, args, &result, &error, &sqlstate);
	else if (!OidIsValid(audit_role = get_role_oid(AUDIT_ROLE, true)))
	{
		written = false;
		error = psprintf("role \"%s\" does not exist", AUDIT_ROLE);
	}
	else
		written = WorkerRunSql(MyDatabaseId, audit_role, WORKER_AUTONOMOUS, AUDIT_INSERT_SQL,
							   7, args, &result, &error, &sqlstate);
	RESUME_INTERRUPTS();

	if (!written)
		ereport(WARNING,
				errmsg("could not write the audit row for \"%s\"", action),
				errdetail("%s", error),
				errhint("The server log has the event."));
	return written;
}
