/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  Run one SQL statement in a transaction of its own, in any database of
 *	  the cluster, from a short-lived dynamic background worker.
 *
 * Two things need this. A refused operation ends in an ERROR that rolls
 * back the caller, yet its audit row must stay; and pg_cron may live in
 * another database (cron.database_name) than convctx, where no statement
 * of ours can reach it. The caller waits for the worker to finish and gets
 * back the first column of the first row, or the worker's error message.
 *
 * The worker connects as the bootstrap superuser and runs only statements
 * written in this library, with every value passed as a parameter. It
 * needs no shared_preload_libraries entry, only a free
 * max_worker_processes slot.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "convctx.h"

#define WORKER_MAX_ARGS 8
#define WORKER_RESULT_LEN 64
#define WORKER_ERROR_LEN 512

/* The statement, its arguments and its outcome, in dynamic shared memory. */
typedef struct WorkerPayload
{
	bool		committed;		/* set by the worker after its commit */
	bool		result_null;
	char		result[WORKER_RESULT_LEN];
	char		error[WORKER_ERROR_LEN];
	int			nargs;
	int			length[WORKER_MAX_ARGS + 2];	/* dbname, sql, args; -1 is NULL */
	char		data[FLEXIBLE_ARRAY_MEMBER];	/* NUL-terminated strings */
} WorkerPayload;

PGDLLEXPORT void convctx_sql_worker_main(Datum main_arg);

static char *
PayloadString(WorkerPayload *payload, int field)
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
 * Run sql with nargs text arguments (NULL pointers are SQL NULLs) in
 * database dbname and commit. Returns true when it committed; then
 * *result is the first column of the first row (NULL when there is none).
 * Otherwise *error says why.
 */
bool
WorkerRunSql(const char *dbname, const char *sql, int nargs, const char **args,
			 char **result, char **error)
{
	const char *fields[WORKER_MAX_ARGS + 2];
	int			nfields = nargs + 2;
	Size		size = offsetof(WorkerPayload, data);
	dsm_segment *seg;
	WorkerPayload *payload;
	char	   *p;
	int			i;
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	BgwHandleStatus status;
	pid_t		pid;
	bool		committed;

	Assert(nargs <= WORKER_MAX_ARGS);
	*result = NULL;
	*error = NULL;

	fields[0] = dbname;
	fields[1] = sql;
	for (i = 0; i < nargs; i++)
		fields[i + 2] = args[i];
	for (i = 0; i < nfields; i++)
		if (fields[i] != NULL)
			size = add_size(size, strlen(fields[i]) + 1);

	seg = dsm_create(size, 0);
	payload = dsm_segment_address(seg);
	payload->committed = false;
	payload->result_null = true;
	payload->result[0] = '\0';
	payload->error[0] = '\0';
	payload->nargs = nargs;
	p = payload->data;
	for (i = 0; i < nfields; i++)
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
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "convctx_sql_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "convctx worker for PID %d", MyProcPid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "convctx worker");
	worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		dsm_detach(seg);
		*error = pstrdup("no background worker slot is free (max_worker_processes)");
		return false;
	}
	status = WaitForBackgroundWorkerStartup(handle, &pid);
	if (status == BGWH_STARTED)
		(void) WaitForBackgroundWorkerShutdown(handle);

	committed = payload->committed;
	if (committed)
		*result = payload->result_null ? NULL : pstrdup(payload->result);
	else
		*error = pstrdup(payload->error[0] ? payload->error : "the worker stopped before it committed");
	dsm_detach(seg);
	return committed;
}

/*
 * Worker entry point: map the payload, connect, run the statement, commit,
 * and report the outcome through the payload.
 */
void
convctx_sql_worker_main(Datum main_arg)
{
	dsm_segment *seg;
	WorkerPayload *payload;
	Oid			argtypes[WORKER_MAX_ARGS];
	Datum		values[WORKER_MAX_ARGS];
	char		nulls[WORKER_MAX_ARGS];
	int			i;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "convctx worker");
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("could not map the convctx worker's shared memory"));
	payload = dsm_segment_address(seg);

	PG_TRY();
	{
		BackgroundWorkerInitializeConnection(PayloadString(payload, 0), NULL, 0);

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, PayloadString(payload, 1));

		for (i = 0; i < payload->nargs; i++)
		{
			char	   *arg = PayloadString(payload, i + 2);

			argtypes[i] = TEXTOID;
			values[i] = arg ? CStringGetTextDatum(arg) : (Datum) 0;
			nulls[i] = arg ? ' ' : 'n';
		}
		if (SPI_execute_with_args(PayloadString(payload, 1), payload->nargs, argtypes,
								  values, nulls, false, 0) < 0)
			elog(ERROR, "convctx worker statement failed");
		if (SPI_tuptable != NULL && SPI_processed > 0)
		{
			char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

			if (v != NULL)
			{
				strlcpy(payload->result, v, WORKER_RESULT_LEN);
				payload->result_null = false;
			}
		}

		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_activity(STATE_IDLE, NULL);
		payload->committed = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(TopMemoryContext);
		edata = CopyErrorData();
		strlcpy(payload->error, edata->message ? edata->message : "unknown error",
				WORKER_ERROR_LEN);
		FreeErrorData(edata);
		PG_RE_THROW();
	}
	PG_END_TRY();

	dsm_detach(seg);
	proc_exit(0);
}
