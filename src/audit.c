/*-------------------------------------------------------------------------
 *
 * audit.c
 *	  Audit rows that must outlive the caller's transaction.
 *
 * A refused operation ends in an ERROR that rolls back everything the
 * caller wrote, yet the refusal itself must stay on record. The row is
 * therefore written by a short-lived dynamic background worker, in its own
 * transaction, while the caller waits for it to finish. The worker needs
 * no shared_preload_libraries entry, only a free max_worker_processes slot;
 * when none is free the caller reports that the row is missing and the
 * server log still has the event.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/audit.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_authid_d.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

#include "convctx.h"

#define AUDIT_FIELDS 5			/* tenant, role, action, session, identity + details */

/* What the worker writes, laid out in a dynamic shared memory segment. */
typedef struct AuditPayload
{
	bool		written;		/* set by the worker after its commit */
	int			length[AUDIT_FIELDS + 1];	/* -1 for NULL */
	char		data[FLEXIBLE_ARRAY_MEMBER];	/* NUL-terminated strings */
} AuditPayload;

PGDLLEXPORT void convctx_audit_worker_main(Datum main_arg);

#define AUDIT_INSERT_SQL \
	"INSERT INTO convctx.audit_log" \
	"       (tenant_id, role_name, action, session_id, identity_id, details)" \
	" VALUES ($1, $2, $3, $4, $5, $6::pg_catalog.jsonb)"

/*
 * Write one audit_log row in a transaction of its own. Returns whether the
 * row was committed.
 */
bool
AuditWriteAutonomous(text *tenant, const char *action, text *session_id,
					 text *identity_id, const char *details_json)
{
	const char *fields[AUDIT_FIELDS + 1];
	Size		size = offsetof(AuditPayload, data);
	dsm_segment *seg;
	AuditPayload *payload;
	char	   *p;
	int			i;
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	BgwHandleStatus status;
	pid_t		pid;
	bool		written;

	fields[0] = text_to_cstring(tenant);
	fields[1] = GetUserNameFromId(GetUserId(), false);
	fields[2] = action;
	fields[3] = session_id ? text_to_cstring(session_id) : NULL;
	fields[4] = identity_id ? text_to_cstring(identity_id) : NULL;
	fields[5] = details_json;
	for (i = 0; i <= AUDIT_FIELDS; i++)
		if (fields[i] != NULL)
			size = add_size(size, strlen(fields[i]) + 1);

	seg = dsm_create(size, 0);
	payload = dsm_segment_address(seg);
	payload->written = false;
	p = payload->data;
	for (i = 0; i <= AUDIT_FIELDS; i++)
	{
		if (fields[i] == NULL)
		{
			payload->length[i] = -1;
			continue;
		}
		payload->length[i] = strlen(fields[i]);
		memcpy(p, fields[i], payload->length[i] + 1);
		p += payload->length[i] + 1;
	}

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "convctx");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "convctx_audit_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "convctx audit writer");
	snprintf(worker.bgw_type, BGW_MAXLEN, "convctx audit writer");
	worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
	worker.bgw_notify_pid = MyProcPid;
	memcpy(worker.bgw_extra, &MyDatabaseId, sizeof(Oid));

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(WARNING,
				errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				errmsg("could not start a worker to write the audit row"),
				errhint("Raise max_worker_processes."));
		dsm_detach(seg);
		return false;
	}
	status = WaitForBackgroundWorkerStartup(handle, &pid);
	if (status == BGWH_STARTED)
		status = WaitForBackgroundWorkerShutdown(handle);

	written = payload->written;
	dsm_detach(seg);
	if (!written)
		ereport(WARNING,
				errmsg("the audit row for \"%s\" could not be written", action));
	return written;
}

static char *
PayloadField(AuditPayload *payload, int field)
{
	char	   *p = payload->data;
	int			i;

	if (payload->length[field] < 0)
		return NULL;
	for (i = 0; i < field; i++)
		if (payload->length[i] >= 0)
			p += payload->length[i] + 1;
	return p;
}

/*
 * Worker entry point: connect to the caller's database as the bootstrap
 * superuser, insert the row, commit, and mark the payload written.
 */
void
convctx_audit_worker_main(Datum main_arg)
{
	Oid			database;
	dsm_segment *seg;
	AuditPayload *payload;
	Oid			argtypes[6] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[6];
	char		nulls[6];
	int			i;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	memcpy(&database, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	BackgroundWorkerInitializeConnectionByOid(database, BOOTSTRAP_SUPERUSERID, 0);

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "convctx audit writer");
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("could not map the audit payload"));
	payload = dsm_segment_address(seg);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "convctx: writing an audit row");

	for (i = 0; i <= AUDIT_FIELDS; i++)
	{
		char	   *f = PayloadField(payload, i);

		values[i] = f ? CStringGetTextDatum(f) : (Datum) 0;
		nulls[i] = f ? ' ' : 'n';
	}
	if (SPI_execute_with_args(AUDIT_INSERT_SQL, 6, argtypes, values, nulls,
							  false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not insert the audit row");

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);

	payload->written = true;
	dsm_detach(seg);
	proc_exit(0);
}
