/*-------------------------------------------------------------------------
 *
 * audit.c
 *	  Rows of convctx.audit_log: ids and counts of security and
 *	  administration events, never content.
 *
 * An event that succeeds is logged in the caller's transaction, so it
 * commits or rolls back with what it records. A refusal is logged in a
 * transaction of its own (worker.c), so it outlives the ERROR that rolls
 * back the caller.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/audit.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "commands/dbcommands.h"
#include "utils/builtins.h"

#include "convctx.h"

#define AUDIT_INSERT_SQL \
	"INSERT INTO convctx.audit_log" \
	"       (tenant_id, role_name, action, session_id, identity_id, details)" \
	" VALUES ($1, $2, $3, $4, $5, $6::pg_catalog.jsonb)"

static SPIPlanPtr audit_plan = NULL;

/*
 * Log an event in the caller's transaction; SPI must be connected.
 */
void
AuditWrite(text *tenant, const char *action, text *session_id, text *identity_id,
		   const char *details_json)
{
	Oid			argtypes[6] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	values[0] = PointerGetDatum(tenant);
	values[1] = CStringGetTextDatum(CallerRoleName());
	values[2] = CStringGetTextDatum(action);
	values[3] = PointerGetDatum(session_id);
	nulls[3] = session_id ? ' ' : 'n';
	values[4] = PointerGetDatum(identity_id);
	nulls[4] = identity_id ? ' ' : 'n';
	values[5] = CStringGetTextDatum(details_json);
	SpiRunPlan(SpiKeptPlan(&audit_plan, AUDIT_INSERT_SQL, 6, argtypes),
			   values, nulls, false, 0, SPI_OK_INSERT);
}

/*
 * Log an event in a transaction of its own. Returns whether the row was
 * committed; if not, a WARNING says why.
 */
bool
AuditWriteAutonomous(text *tenant, const char *action, text *session_id,
					 text *identity_id, const char *details_json)
{
	const char *args[6];
	char	   *result;
	char	   *error;

	args[0] = text_to_cstring(tenant);
	args[1] = CallerRoleName();
	args[2] = action;
	args[3] = session_id ? text_to_cstring(session_id) : NULL;
	args[4] = identity_id ? text_to_cstring(identity_id) : NULL;
	args[5] = details_json;

	if (WorkerRunSql(get_database_name(MyDatabaseId), AUDIT_INSERT_SQL, 6, args,
					 &result, &error))
		return true;

	ereport(WARNING,
			errmsg("could not write the audit row for \"%s\"", action),
			errdetail("%s", error));
	return false;
}
