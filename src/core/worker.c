/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  Run one SQL statement in a transaction of its own, in any database of
 *	  the cluster, as a given role, from a short-lived dynamic background
 *	  worker.
 *
 * Two things need this. A refused operation ends in an ERROR that rolls
 * back the caller, yet its audit row must stay; and pg_cron may live in
 * another database (cron.database_name) than convctx, where no statement
 * of ours can reach it. The caller waits for the worker to finish and gets
 * back the first column of the first row, or the worker's error.
 *
 * Identity. The worker connects without a role (a bgworker may not log in
 * as a NOLOGIN role, and the acting role need not be able to log in), then
 * before it runs anything switches to the acting role with
 * SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION: SET ROLE
 * and SET SESSION AUTHORIZATION are refused under either flag (GUC_NOT_
 * WHILE_SEC_REST), so nothing run there can get back to the bootstrap
 * superuser the connection started as. search_path is pinned to
 * pg_catalog, pg_temp (the database's ALTER DATABASE ... SET search_path
 * does not apply), the statement and its lock waits are time-bounded,
 * and the statements are fully qualified. With WORKER_CHECK_PG_CRON the
 * worker first checks that the cron objects the statements name belong to
 * extension pg_cron.
 *
 * Bounds. At most WORKER_SLOTS workers of ours run for one database at a
 * time: a caller holds one of WORKER_SLOTS session-level lock slots keyed
 * by the target database from before it registers its worker until that
 * worker is gone. The slots use an advisory lock tag with a field4 that
 * the SQL advisory lock functions never use (they use 1 and 2), so no
 * role can hold our slots from SQL. Every wait is bounded.
 *
 * Two ways to wait:
 *	- WORKER_AUTONOMOUS (audit rows): the caller holds interrupts from the
 *	  slot to the worker's end, so a cancel or terminate takes effect only
 *	  after the row is committed. The segment is pinned so it outlives a
 *	  caller that gives up after the bound; the worker unpins it once it
 *	  has it mapped.
 *	- otherwise (scheduling): interruptible; any error or cancel while
 *	  waiting terminates the worker, so no registration is left behind.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "core/worker.h"

#define WORKER_MAX_ARGS 8
#define WORKER_RESULT_LEN 64
#define WORKER_ERROR_LEN 512

/* Lock slots per target database, and their lock tag. */
#define WORKER_SLOTS 2
#define WORKER_SLOT_KEY 0x636f6e76	/* "conv" */
#define WORKER_SLOT_FIELD4 0x6378	/* never used by pg_advisory_lock */

/* Bounds, in milliseconds. */
#define WORKER_SLOT_WAIT_MS 5000
#define WORKER_STATEMENT_TIMEOUT_MS 5000
#define WORKER_AUTONOMOUS_WAIT_MS 15000
#define WORKER_WAIT_MS 30000

/* The statement, its arguments and its outcome, in dynamic shared memory. */
typedef struct WorkerPayload
{
	pg_atomic_uint32 unpin_claimed; /* who unpins the segment: first to set it */
	bool		pinned;
	Oid			database;
	Oid			role;
	int			flags;
	bool		committed;		/* set by the worker after its commit */
	bool		result_null;
	int			sqlstate;
	char		result[WORKER_RESULT_LEN];
	char		error[WORKER_ERROR_LEN];
	int			nargs;
	int			length[WORKER_MAX_ARGS + 1];	/* sql, args; -1 is NULL */
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

/* Unpin the segment unless the other side already did (or will). */
static void
PayloadUnpin(dsm_segment *seg, WorkerPayload *payload)
{
	uint32		expected = 0;

	if (payload->pinned &&
		pg_atomic_compare_exchange_u32(&payload->unpin_claimed, &expected, 1))
		dsm_unpin_segment(dsm_segment_handle(seg));
}

static void
SlotTag(LOCKTAG *tag, Oid database, int slot)
{
	SET_LOCKTAG_ADVISORY(*tag, database, WORKER_SLOT_KEY, (uint32) slot, WORKER_SLOT_FIELD4);
}

/* Milliseconds left until deadline, at least 0. */
static long
MsLeft(TimestampTz deadline)
{
	long		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

	return ms > 0 ? ms : 0;
}

/*
 * Sleep until the latch is set, poll_ms pass or deadline comes, whichever
 * is first; then take a pending interrupt when interruptible.
 */
static void
WaitTick(TimestampTz deadline, long poll_ms, bool interruptible)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 Min(poll_ms, MsLeft(deadline)), PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	if (interruptible)
		CHECK_FOR_INTERRUPTS();
}

/*
 * Take one of the worker slots of database within WORKER_SLOT_WAIT_MS;
 * returns the slot number or -1. Only conditional lock attempts: a slot
 * is never waited for in the lock manager.
 */
static int
SlotAcquire(Oid database, bool interruptible)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   WORKER_SLOT_WAIT_MS);

	for (;;)
	{
		int			slot;

		for (slot = 0; slot < WORKER_SLOTS; slot++)
		{
			LOCKTAG		tag;
			LockAcquireResult r;

			SlotTag(&tag, database, slot);
			r = LockAcquire(&tag, ExclusiveLock, true, true);
			if (r == LOCKACQUIRE_OK)
				return slot;
			if (r == LOCKACQUIRE_ALREADY_HELD || r == LOCKACQUIRE_ALREADY_CLEAR)
				LockRelease(&tag, ExclusiveLock, true);
		}
		if (MsLeft(deadline) == 0)
			return -1;
		/*
		 * Poll often: a caller that just released a slot tries again at
		 * once, so a slow poller would starve.
		 */
		WaitTick(deadline, 2, interruptible);
	}
}

static void
SlotRelease(Oid database, int slot)
{
	LOCKTAG		tag;

	SlotTag(&tag, database, slot);
	LockRelease(&tag, ExclusiveLock, true);
}

/*
 * Wait until the worker is gone or deadline passes; returns whether it is
 * gone. The postmaster signals us (bgw_notify_pid) when it starts and
 * stops, which sets our latch.
 */
static bool
WaitWorkerGone(BackgroundWorkerHandle *handle, TimestampTz deadline, bool interruptible)
{
	for (;;)
	{
		pid_t		pid;
		BgwHandleStatus status = GetBackgroundWorkerPid(handle, &pid);

		if (status == BGWH_STOPPED)
			return true;
		if (status == BGWH_POSTMASTER_DIED || MsLeft(deadline) == 0)
			return false;
		WaitTick(deadline, 100, interruptible);
	}
}

/*
 * Register the worker, retrying within the slot bound when every
 * max_worker_processes slot is taken.
 */
static bool
RegisterWorker(BackgroundWorker *worker, BackgroundWorkerHandle **handle, bool interruptible)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   WORKER_SLOT_WAIT_MS);

	while (!RegisterDynamicBackgroundWorker(worker, handle))
	{
		if (MsLeft(deadline) == 0)
			return false;
		WaitTick(deadline, 50, interruptible);
	}
	return true;
}

/*
 * The payload of a call: the statement and its nargs arguments (fields[0]
 * and fields[1 ..], NULL for an SQL NULL) after the header, and the result
 * fields cleared. The segment is sized by the caller for the strings.
 */
static void
PayloadFill(WorkerPayload *payload, Oid database, Oid role, int flags,
			const char **fields, int nargs)
{
	char	   *p = payload->data;
	int			i;

	pg_atomic_init_u32(&payload->unpin_claimed, 0);
	payload->pinned = false;
	payload->database = database;
	payload->role = role;
	payload->flags = flags;
	payload->committed = false;
	payload->result_null = true;
	payload->sqlstate = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
	payload->result[0] = '\0';
	payload->error[0] = '\0';
	payload->nargs = nargs;
	for (i = 0; i < nargs + 1; i++)
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
}

/* The worker that runs the payload in seg, reporting to this backend. */
static void
WorkerDescribe(BackgroundWorker *worker, dsm_segment *seg)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "convctx");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "convctx_sql_worker_main");
	snprintf(worker->bgw_name, BGW_MAXLEN, "convctx worker for PID %d", MyProcPid);
	snprintf(worker->bgw_type, BGW_MAXLEN, "convctx worker");
	worker->bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
	worker->bgw_notify_pid = MyProcPid;
}

/*
 * What the worker left in the payload: whether it committed, and then the
 * result, else the error and its SQLSTATE (gone: the worker is known to
 * have stopped).
 */
static bool
PayloadOutcome(WorkerPayload *payload, bool gone, char **result, char **error, int *sqlstate)
{
	if (payload->committed)
	{
		*result = payload->result_null ? NULL : pstrdup(payload->result);
		return true;
	}
	*error = pstrdup(payload->error[0] ? payload->error :
					 gone ? "the worker stopped before it committed" :
					 "the worker did not finish in time");
	*sqlstate = payload->sqlstate;
	return false;
}

/*
 * Run sql with nargs text arguments (NULL pointers are SQL NULLs) in
 * database as role, in a worker, and commit. Returns true when it
 * committed; then *result is the first column of the first row (NULL when
 * there is none). Otherwise *error says why and *sqlstate is the error's
 * SQLSTATE. See the file header for flags.
 *
 * (Long on purpose: one PG_TRY holds the slot, the segment and the
 * registration, so that an error or cancel at any point releases all
 * three; its steps are PayloadFill, WorkerDescribe, RegisterWorker,
 * WaitWorkerGone and PayloadOutcome.)
 */
bool
WorkerRunSql(Oid database, Oid role, int flags, const char *sql, int nargs,
			 const char **args, char **result, char **error, int *sqlstate)
{
	bool		autonomous = (flags & WORKER_AUTONOMOUS) != 0;
	const char *fields[WORKER_MAX_ARGS + 1];
	int			nfields = nargs + 1;
	Size		size = offsetof(WorkerPayload, data);
	dsm_segment *volatile seg = NULL;
	WorkerPayload *payload;
	int			i;
	BackgroundWorker worker;
	BackgroundWorkerHandle *volatile handle = NULL;
	volatile int slot;
	volatile bool gone = false;
	bool		committed;

	Assert(nargs <= WORKER_MAX_ARGS);
	*result = NULL;
	*error = NULL;
	*sqlstate = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;

	fields[0] = sql;
	for (i = 0; i < nargs; i++)
		fields[i + 1] = args[i];
	for (i = 0; i < nfields; i++)
		if (fields[i] != NULL)
			size = add_size(size, strlen(fields[i]) + 1);

	slot = SlotAcquire(database, !autonomous);
	if (slot < 0)
	{
		*error = psprintf("more than %d convctx workers were busy in this database for %d ms",
						  WORKER_SLOTS, WORKER_SLOT_WAIT_MS);
		*sqlstate = ERRCODE_CONFIGURATION_LIMIT_EXCEEDED;
		return false;
	}

	PG_TRY();
	{
		seg = dsm_create(size, 0);
		payload = dsm_segment_address(seg);
		PayloadFill(payload, database, role, flags, fields, nargs);
		if (autonomous)
		{
			dsm_pin_segment(seg);
			payload->pinned = true;
		}
		WorkerDescribe(&worker, seg);
		{
			BackgroundWorkerHandle *h;

			if (RegisterWorker(&worker, &h, !autonomous))
				handle = h;
		}
		if (handle == NULL)
		{
			PayloadUnpin(seg, payload);
			*error = pstrdup("no background worker slot is free (max_worker_processes)");
			*sqlstate = ERRCODE_CONFIGURATION_LIMIT_EXCEEDED;
		}
		else
		{
			gone = WaitWorkerGone(handle,
								  TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															  autonomous ? WORKER_AUTONOMOUS_WAIT_MS : WORKER_WAIT_MS),
								  !autonomous);
			if (!gone)
			{
				/* Withdraw it, and give it a moment to go. */
				TerminateBackgroundWorker(handle);
				gone = WaitWorkerGone(handle,
									  TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000),
									  false);
			}
		}
	}
	PG_CATCH();
	{
		/* Withdraw the registration; the segment goes with the abort. */
		if (handle != NULL && !gone)
			TerminateBackgroundWorker(handle);
		if (seg != NULL)
			PayloadUnpin(seg, dsm_segment_address(seg));
		SlotRelease(database, slot);
		PG_RE_THROW();
	}
	PG_END_TRY();

	payload = dsm_segment_address(seg);

	if (handle == NULL)
	{
		SlotRelease(database, slot);
		dsm_detach(seg);
		return false;
	}

	/*
	 * A worker that never started (or was stopped before it mapped the
	 * segment) leaves the pin to us.
	 */
	if (gone)
		PayloadUnpin(seg, payload);
	/*
	 * Released even when the worker is not confirmed gone: it has been told
	 * to terminate, and a slot held until this session ends would block
	 * every later caller.
	 */
	SlotRelease(database, slot);

	committed = PayloadOutcome(payload, gone, result, error, sqlstate);
	dsm_detach(seg);
	return committed;
}

/*
 * The OID of the object named by name in schema cron, checked to belong to
 * extension pg_cron; ERROR 55000 otherwise. proc_args NULL means a table.
 * Only the catalogs are read: nothing named here runs.
 */
static void
CheckCronMember(Oid cron_ext, Oid cron_ns, const char *name, int nargs, const Oid *argtypes)
{
	Oid			classid;
	Oid			objid;
	char	   *what;

	if (argtypes == NULL)
	{
		classid = RelationRelationId;
		objid = get_relname_relid(name, cron_ns);
		what = psprintf("table cron.%s", name);
	}
	else
	{
		oidvector  *sig = buildoidvector(argtypes, nargs);

		classid = ProcedureRelationId;
		objid = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
								CStringGetDatum(name), PointerGetDatum(sig),
								ObjectIdGetDatum(cron_ns));
		what = psprintf("function cron.%s", name);
	}
	if (!OidIsValid(objid) || getExtensionOfObject(classid, objid) != cron_ext)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("%s in database \"%s\" does not belong to extension pg_cron",
					   what, get_database_name(MyDatabaseId)),
				errdetail(OidIsValid(objid) ?
						  "An object of that name exists, but pg_cron did not create it; it is not called." :
						  "There is no such object."),
				errhint("Run CREATE EXTENSION pg_cron in that database, as a superuser, and drop whatever else is named cron there."));
}

/*
 * Check that extension pg_cron is installed in this database and that
 * schema cron and every object of it that convctx calls belong to it, so
 * that a schema cron planted by someone else is never called into.
 */
void
CronCheckMembers(void)
{
	Oid			cron_ext = get_extension_oid("pg_cron", true);
	Oid			cron_ns = get_namespace_oid("cron", true);
	Oid			text3[3] = {TEXTOID, TEXTOID, TEXTOID};
	Oid			in_db[6] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, BOOLOID};
	Oid			unschedule[1] = {INT8OID};

	if (!OidIsValid(cron_ext))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("extension pg_cron is not installed in database \"%s\"",
					   get_database_name(MyDatabaseId)),
				errhint("Run CREATE EXTENSION pg_cron in the database named by cron.database_name."));
	if (!OidIsValid(cron_ns) || getExtensionOfObject(NamespaceRelationId, cron_ns) != cron_ext)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("schema cron in database \"%s\" does not belong to extension pg_cron",
					   get_database_name(MyDatabaseId)),
				errhint("Drop the schema cron that pg_cron did not create, and run CREATE EXTENSION pg_cron as a superuser."));
	CheckCronMember(cron_ext, cron_ns, "job", 0, NULL);
	CheckCronMember(cron_ext, cron_ns, "schedule", 3, text3);
	CheckCronMember(cron_ext, cron_ns, "schedule_in_database", 6, in_db);
	CheckCronMember(cron_ext, cron_ns, "unschedule", 1, unschedule);
}

/*
 * The worker's settings first, while nothing of anyone else's can run: the
 * database's own search_path and timeouts do not apply to it.
 */
static void
WorkerSettings(void)
{
	char		timeout[32];

	snprintf(timeout, sizeof(timeout), "%d", WORKER_STATEMENT_TIMEOUT_MS);
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	(void) set_config_option("statement_timeout", timeout, PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	(void) set_config_option("lock_timeout", timeout, PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	enable_timeout_after(STATEMENT_TIMEOUT, WORKER_STATEMENT_TIMEOUT_MS);
}

/*
 * Become the payload's role, for good (no way back to the superuser),
 * after the checks that role must pass.
 */
static void
WorkerBecome(WorkerPayload *payload)
{
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(payload->role)))
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("role with OID %u does not exist", payload->role));
	if ((payload->flags & WORKER_AUTONOMOUS) && !(payload->flags & WORKER_AS_OWNER) &&
		superuser_arg(payload->role))
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("role \"%s\" is a superuser", GetUserNameFromId(payload->role, false)),
				errdetail("convctx writes audit rows as a role that is not a superuser."),
				errhint("ALTER ROLE %s NOSUPERUSER.", GetUserNameFromId(payload->role, false)));

	SetUserIdAndSecContext(payload->role,
						   SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);

	/*
	 * A role acting for a caller needs CONNECT here, as if it had
	 * logged in; the audit role only writes rows of this database.
	 */
	if (!(payload->flags & WORKER_AUTONOMOUS) &&
		!DatumGetBool(DirectFunctionCall3(has_database_privilege_id_id,
										  ObjectIdGetDatum(payload->role),
										  ObjectIdGetDatum(MyDatabaseId),
										  CStringGetTextDatum("CONNECT"))))
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("permission denied for database %s", get_database_name(MyDatabaseId)),
				errdetail("Role \"%s\" does not have CONNECT privilege there.",
						  GetUserNameFromId(payload->role, false)));
	if (payload->flags & WORKER_CHECK_PG_CRON)
		CronCheckMembers();
}

/* Run the payload's statement with its arguments and keep its first value. */
static void
WorkerExecute(WorkerPayload *payload)
{
	Oid			argtypes[WORKER_MAX_ARGS];
	Datum		values[WORKER_MAX_ARGS];
	char		nulls[WORKER_MAX_ARGS];
	int			i;

	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, PayloadString(payload, 0));

	for (i = 0; i < payload->nargs; i++)
	{
		char	   *arg = PayloadString(payload, i + 1);

		argtypes[i] = TEXTOID;
		values[i] = arg ? CStringGetTextDatum(arg) : (Datum) 0;
		nulls[i] = arg ? ' ' : 'n';
	}
	if (SPI_execute_with_args(PayloadString(payload, 0), payload->nargs, argtypes,
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
}

/*
 * Worker entry point: map the payload, connect, become the acting role,
 * run the statement, commit, and report the outcome through the payload.
 */
void
convctx_sql_worker_main(Datum main_arg)
{
	dsm_segment *seg;
	WorkerPayload *payload;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "convctx worker");
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		proc_exit(0);			/* the caller withdrew */
	payload = dsm_segment_address(seg);
	/* Mapped: the segment now lives as long as we need it. */
	PayloadUnpin(seg, payload);

	PG_TRY();
	{
		BackgroundWorkerInitializeConnectionByOid(payload->database, InvalidOid, 0);

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		WorkerSettings();
		WorkerBecome(payload);
		WorkerExecute(payload);
		disable_timeout(STATEMENT_TIMEOUT, false);
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
		payload->sqlstate = edata->sqlerrcode;
		FreeErrorData(edata);
		PG_RE_THROW();
	}
	PG_END_TRY();

	dsm_detach(seg);
	proc_exit(0);
}
