/*-------------------------------------------------------------------------
 *
 * recall_index.c
 *	  The background worker that builds the tenants' own HNSW indexes of
 *	  extension convctx_recall without making any other tenant wait.
 *
 * index_tenants and rebuild_index (sql/convctx_recall--0.6.0.sql) only
 * list the builds that are due in convctx_recall.tenant_index (pending)
 * and call start_index_worker, which registers this worker and returns at
 * once: the worker first waits for the caller's transaction to end, so it
 * sees what the caller listed, and the caller never waits for the worker
 * (CREATE INDEX CONCURRENTLY waits for every older transaction, the
 * caller's too).
 *
 * For each pending build, in a random order, the worker, as the
 * extension's owner:
 *	1. marks the tenant's rows with the index's number (index_no; the
 *	   tenant's rows only, so no other tenant's row is locked);
 *	2. drops turn_embedding_<model_no>_<index_no>_new, what a build that
 *	   failed or was killed left, with DROP INDEX CONCURRENTLY;
 *	3. builds turn_embedding_<model_no>_<index_no>_new with CREATE INDEX
 *	   CONCURRENTLY, partial on the number;
 *	4. marks the tenant's rows again: a store that began before the build
 *	   was listed may have written its row unmarked; CREATE INDEX
 *	   CONCURRENTLY waited for every such transaction to end;
 *	5. drops the tenant's old index, if any, with DROP INDEX CONCURRENTLY;
 *	6. renames the new one to turn_embedding_<model_no>_<index_no> and
 *	   marks the tenant's entry ready and no longer pending, in one
 *	   transaction.
 * Steps 2, 3 and 5 run as top-level statements, as a client's would (they
 * cannot run inside a transaction block); they take SHARE UPDATE
 * EXCLUSIVE on the table, which no store, redaction, erasure, purge or
 * recall takes or waits for, and ACCESS EXCLUSIVE only on the index being
 * dropped, once no transaction can use it any more.
 *
 * The worker runs at a lower CPU priority than the backends (nice 10): a
 * build takes a core for minutes, and the tenants' calls go first.
 *
 * Recall goes through a tenant's index only once its entry is ready (the
 * rows all marked); until then it compares the tenant's embeddings one by
 * one, which is exact. A failed build leaves the entry pending with its
 * error in last_error and goes on with the next; a killed worker leaves
 * it pending too. Whatever was left (a _new index, valid or not, an index
 * of an entry that is gone) is dropped by the next worker, which the next
 * index_tenants or rebuild_index starts. One worker per database builds
 * at a time (a session lock of its own); a second one ends at once and
 * the first looks again for what was listed meanwhile before it ends.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/recall/recall_index.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifndef WIN32
#include <sys/resource.h>
#endif

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "core/catalog.h"
#include "recall/recall.h"

/* The session lock that lets one index worker per database run. */
#define INDEX_WORKER_KEY 0x636f6e76 /* "conv" */
#define INDEX_WORKER_FIELD4 0x6369	/* neither worker.c's nor pg_advisory_lock's */

/* The worker's CPU priority (nice), below the backends'. */
#define INDEX_WORKER_NICE 10

/* What the caller passes in bgw_extra. */
typedef struct IndexWorkerArgs
{
	Oid			database;
	TransactionId caller_xid;
} IndexWorkerArgs;

/* A pending build. */
typedef struct PendingBuild
{
	int32		model_no;
	int32		index_no;
	char	   *tenant;
	Datum		requested_at;	/* when it was asked for, as read */
} PendingBuild;

PGDLLEXPORT void convctx_recall_index_worker_main(Datum main_arg);

static MemoryContext build_context = NULL;

PG_FUNCTION_INFO_V1(convctx_recall_start_index_worker);

/*
 * start_index_worker() -> boolean: start the worker that builds the
 * pending indexes, once this transaction ends; false, with a WARNING,
 * when no background worker slot is free (the builds stay pending).
 */
Datum
convctx_recall_start_index_worker(PG_FUNCTION_ARGS)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	IndexWorkerArgs args;

	if (!superuser())
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("permission denied to start the index worker"),
				errdetail("Only superusers build the tenants' indexes."));
	PreventCommandDuringRecovery("convctx_recall.start_index_worker()");

	memset(&args, 0, sizeof(args));
	args.database = MyDatabaseId;
	args.caller_xid = GetTopTransactionId();

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "convctx");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "convctx_recall_index_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "convctx_recall index worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "convctx_recall index worker");
	memcpy(worker.bgw_extra, &args, sizeof(args));
	worker.bgw_notify_pid = 0;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(WARNING,
				errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				errmsg("no background worker slot is free to build the tenants' indexes"),
				errdetail("The builds stay pending in convctx_recall.tenant_index."),
				errhint("Raise max_worker_processes, or run convctx_recall.index_tenants() again later."));
		PG_RETURN_BOOL(false);
	}
	PG_RETURN_BOOL(true);
}

/* The worker's session lock. */
static bool
WorkerLock(bool take)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, INDEX_WORKER_KEY, 0, INDEX_WORKER_FIELD4);
	if (!take)
	{
		LockRelease(&tag, ExclusiveLock, true);
		return true;
	}
	return LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_OK;
}

/*
 * Run a statement with SPI in the open transaction; SPI stays connected
 * for the caller to read the result, and to finish.
 */
static void
RunSql(const char *sql, int nargs, Oid *argtypes, Datum *values, int expect)
{
	int			rc;

	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	rc = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, false, 0);
	if (rc != expect)
		elog(ERROR, "convctx_recall index worker: statement returned %d: %s", rc, sql);
	PopActiveSnapshot();
}

/*
 * Run one utility statement as a client's top-level statement (so that
 * CREATE and DROP INDEX CONCURRENTLY may run), in transactions of its own:
 * parsed, analyzed and run through a portal, as exec_simple_query does.
 */
static void
RunTopLevel(const char *sql)
{
	List	   *raw;
	RawStmt    *parsetree;
	List	   *querytrees,
			   *plans;
	Portal		portal;
	DestReceiver *dest;
	QueryCompletion qc;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	pgstat_report_activity(STATE_RUNNING, sql);
	/* what the statement keeps must outlive the transactions it commits */
	MemoryContextSwitchTo(build_context);
	raw = pg_parse_query(sql);
	if (list_length(raw) != 1)
		elog(ERROR, "convctx_recall index worker: one statement expected");
	parsetree = linitial_node(RawStmt, raw);
	querytrees = pg_analyze_and_rewrite_fixedparams(parsetree, sql, NULL, 0, NULL);
	plans = pg_plan_queries(querytrees, sql, CURSOR_OPT_PARALLEL_OK, NULL);
	portal = CreatePortal("", true, true);
	portal->visible = false;
	PortalDefineQuery(portal, NULL, sql, CreateCommandTag(parsetree->stmt), plans, NULL);
	PortalStart(portal, NULL, 0, InvalidSnapshot);
	dest = CreateDestReceiver(DestNone);
	(void) PortalRun(portal, FETCH_ALL, true, true, dest, dest, &qc);
	PortalDrop(portal, false);
	/* not old: a CONCURRENTLY statement committed that transaction */
	MemoryContextSwitchTo(TopTransactionContext);
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* The statement that marks a tenant's rows with its index's number. */
#define MARK_ROWS \
	"UPDATE convctx_recall.turn_embedding e SET index_no = $3" \
	" WHERE e.tenant_id OPERATOR(pg_catalog.=) $2 AND e.model_no OPERATOR(pg_catalog.=) $1" \
	"   AND NOT (e.index_no IS NOT NULL AND e.index_no OPERATOR(pg_catalog.=) $3)"

/*
 * The statement that builds the index: the model's dimensions and HNSW
 * settings, pgvector's schema checked to be one only a superuser can
 * change (RecallSchemaTrusted, as recall checks it); NULL when the entry
 * is gone or built meanwhile. Marks the rows (step 1). In a transaction.
 */
static char *
BuildStart(PendingBuild *b)
{
	Oid			argtypes[3] = {INT4OID, TEXTOID, INT4OID};
	Datum		values[3] = {Int32GetDatum(b->model_no), CStringGetTextDatum(b->tenant),
	Int32GetDatum(b->index_no)};
	char	   *sql = NULL;
	bool		isnull;

	RunSql("SELECT pg_catalog.format("
		   "  'CREATE INDEX CONCURRENTLY %I ON convctx_recall.turn_embedding"
		   " USING hnsw ((embedding::%s.vector(%s)) %s.vector_cosine_ops)"
		   " WITH (m = %s, ef_construction = %s) WHERE index_no OPERATOR(pg_catalog.=) %s',"
		   "  pg_catalog.format('turn_embedding_%s_%s_new', x.model_no, i.index_no),"
		   "  pg_catalog.quote_ident(n.nspname), x.dimensions, pg_catalog.quote_ident(n.nspname),"
		   "  x.m, x.ef_construction, i.index_no),"
		   "  n.oid"
		   "  FROM convctx_recall.model x, convctx_recall.tenant_index i,"
		   "       pg_catalog.pg_extension e, pg_catalog.pg_namespace n"
		   " WHERE x.model_no OPERATOR(pg_catalog.=) $1 AND i.model_no OPERATOR(pg_catalog.=) $1"
		   "   AND i.tenant_id OPERATOR(pg_catalog.=) $2 AND i.index_no OPERATOR(pg_catalog.=) $3"
		   "   AND i.pending"
		   "   AND e.extname OPERATOR(pg_catalog.=) 'vector' AND n.oid OPERATOR(pg_catalog.=) e.extnamespace",
		   3, argtypes, values, SPI_OK_SELECT);
	if (SPI_processed > 0)
	{
		Oid			vector_nsp = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
																SPI_tuptable->tupdesc, 2, &isnull));

		if (!RecallSchemaTrusted(vector_nsp))
			ereport(ERROR,
					errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					errmsg("the schema of extension \"vector\" can be changed by roles that are not superusers"),
					errhint("Move pgvector to a schema that only a superuser owns and creates in: CREATE SCHEMA vectors; ALTER EXTENSION vector SET SCHEMA vectors;"));
		sql = MemoryContextStrdup(build_context,
								  SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
		SPI_finish();
		RunSql(MARK_ROWS, 3, argtypes, values, SPI_OK_UPDATE);
	}
	SPI_finish();
	return sql;
}

/*
 * Steps 4 and 6: mark again, rename, and make the entry ready; still
 * pending if it was asked for again since it was read.
 */
static void
BuildFinish(PendingBuild *b)
{
	Oid			argtypes[4] = {INT4OID, TEXTOID, INT4OID, TIMESTAMPTZOID};
	Datum		values[4] = {Int32GetDatum(b->model_no), CStringGetTextDatum(b->tenant),
	Int32GetDatum(b->index_no), b->requested_at};
	char	   *rename;

	RunSql(MARK_ROWS, 3, argtypes, values, SPI_OK_UPDATE);
	SPI_finish();
	rename = psprintf("ALTER INDEX convctx_recall.turn_embedding_%d_%d_new RENAME TO turn_embedding_%d_%d",
					  b->model_no, b->index_no, b->model_no, b->index_no);
	RunSql(rename, 0, NULL, NULL, SPI_OK_UTILITY);
	SPI_finish();
	RunSql("UPDATE convctx_recall.tenant_index i"
		   "   SET ready = true, pending = i.requested_at OPERATOR(pg_catalog.>) $4, last_error = NULL,"
		   "       built_at = pg_catalog.statement_timestamp()"
		   " WHERE i.model_no OPERATOR(pg_catalog.=) $1 AND i.tenant_id OPERATOR(pg_catalog.=) $2"
		   "   AND i.index_no OPERATOR(pg_catalog.=) $3",
		   4, argtypes, values, SPI_OK_UPDATE);
	SPI_finish();
}

/* Build one pending index (the file header's steps). */
static void
BuildOne(PendingBuild *b)
{
	char	   *create;
	char	   *drop_new,
			   *drop_old;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	create = BuildStart(b);
	CommitTransactionCommand();
	if (create == NULL)
		return;
	/* freed with build_context after the build */
	MemoryContextSwitchTo(build_context);
	drop_new = psprintf("DROP INDEX CONCURRENTLY IF EXISTS convctx_recall.turn_embedding_%d_%d_new",
						b->model_no, b->index_no);
	drop_old = psprintf("DROP INDEX CONCURRENTLY IF EXISTS convctx_recall.turn_embedding_%d_%d",
						b->model_no, b->index_no);
	RunTopLevel(drop_new);
	RunTopLevel(create);
	RunTopLevel(drop_old);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	BuildFinish(b);
	CommitTransactionCommand();
}

/* Keep a failed build's error with its entry, which stays pending. */
static void
BuildFailed(PendingBuild *b, const char *message)
{
	Oid			argtypes[4] = {INT4OID, TEXTOID, INT4OID, TEXTOID};
	Datum		values[4] = {Int32GetDatum(b->model_no), CStringGetTextDatum(b->tenant),
		Int32GetDatum(b->index_no), CStringGetTextDatum(message)};

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	RunSql("UPDATE convctx_recall.tenant_index i SET last_error = $4"
		   " WHERE i.model_no OPERATOR(pg_catalog.=) $1 AND i.tenant_id OPERATOR(pg_catalog.=) $2"
		   "   AND i.index_no OPERATOR(pg_catalog.=) $3",
		   4, argtypes, values, SPI_OK_UPDATE);
	SPI_finish();
	CommitTransactionCommand();
}

/*
 * Drop what earlier builds left: an index of the table named as a
 * tenant's whose entry is gone, or a _new one whose entry is not pending.
 * The names are read from the catalog and taken only when they are that
 * pattern of digits.
 */
static void
DropLeftovers(void)
{
	List	   *names = NIL;
	ListCell   *lc;
	uint64		i;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	RunSql("SELECT c.relname::pg_catalog.text"
		   "  FROM pg_catalog.pg_index x, pg_catalog.pg_class c"
		   " WHERE x.indrelid OPERATOR(pg_catalog.=) 'convctx_recall.turn_embedding'::pg_catalog.regclass"
		   "   AND c.oid OPERATOR(pg_catalog.=) x.indexrelid"
		   "   AND c.relname OPERATOR(pg_catalog.~) '^turn_embedding_[0-9]+_[0-9]+(_new)?$'"
		   "   AND NOT EXISTS (SELECT FROM convctx_recall.tenant_index i"
		   "                    WHERE pg_catalog.format('turn_embedding_%s_%s', i.model_no, i.index_no)"
		   "                          OPERATOR(pg_catalog.=) c.relname::pg_catalog.text"
		   "                       OR (i.pending AND pg_catalog.format('turn_embedding_%s_%s_new', i.model_no, i.index_no)"
		   "                                         OPERATOR(pg_catalog.=) c.relname::pg_catalog.text))",
		   0, NULL, NULL, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
	{
		MemoryContext old = MemoryContextSwitchTo(build_context);

		names = lappend(names, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	CommitTransactionCommand();
	foreach(lc, names)
		RunTopLevel(psprintf("DROP INDEX CONCURRENTLY IF EXISTS convctx_recall.%s",
							 quote_identifier(lfirst(lc))));
}

/*
 * The next pending build, at random, but those that failed in this run
 * (their index numbers); false when there is none.
 */
static bool
NextPending(List *failed, PendingBuild *b)
{
	Oid			argtypes[1] = {INT4ARRAYOID};
	Datum	   *elems;
	Datum		values[1];
	ListCell   *lc;
	int			n = 0;
	bool		found;
	bool		isnull;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	elems = palloc(sizeof(Datum) * (list_length(failed) + 1));
	foreach(lc, failed)
		elems[n++] = Int32GetDatum(lfirst_int(lc));
	values[0] = PointerGetDatum(construct_array(elems, n, INT4OID, 4, true, TYPALIGN_INT));
	RunSql("SELECT i.model_no, i.index_no, i.tenant_id::pg_catalog.text, i.requested_at"
		   "  FROM convctx_recall.tenant_index i"
		   " WHERE i.pending AND i.index_no OPERATOR(pg_catalog.<>) ALL ($1)"
		   " ORDER BY pg_catalog.random() LIMIT 1",
		   1, argtypes, values, SPI_OK_SELECT);
	found = SPI_processed > 0;
	if (found)
	{
		MemoryContext old = MemoryContextSwitchTo(build_context);

		b->model_no = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		b->index_no = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		b->tenant = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
		b->requested_at = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	CommitTransactionCommand();
	return found;
}

/*
 * Wait for the caller to end, then check that convctx_recall is installed
 * here in this library's version; returns its owner, or InvalidOid.
 */
static Oid
WorkerStart(IndexWorkerArgs *args)
{
	Oid			nsp,
				owner = InvalidOid;
	char	   *version;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	(void) set_config_option("statement_timeout", "0", PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	(void) set_config_option("lock_timeout", "0", PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	/* beside the table, wherever the database's settings would put it */
	(void) set_config_option("default_tablespace", "", PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	if (TransactionIdIsValid(args->caller_xid))
		XactLockTableWait(args->caller_xid, NULL, NULL, XLTW_None);
	if (!ExtensionLookup("convctx_recall", &nsp, &owner, &version) ||
		strcmp(version, CONVCTX_VERSION) != 0 || owner != ConvctxOwner() ||
		get_namespace_oid("convctx_recall", true) != nsp)
		owner = InvalidOid;
	CommitTransactionCommand();
	return owner;
}

/*
 * Worker entry point: wait for the caller, become the extension's owner
 * for good, take the database's index worker lock (or end: another worker
 * builds), drop leftovers, build what is pending, and look again after
 * letting the lock go.
 */
void
convctx_recall_index_worker_main(Datum main_arg)
{
	IndexWorkerArgs args;
	Oid			owner;
	List	   *volatile failed = NIL;

	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(args.database, InvalidOid, 0);
#ifndef WIN32
	/* upkeep: on a busy machine, the tenants' own calls go first */
	(void) setpriority(PRIO_PROCESS, 0, INDEX_WORKER_NICE);
#endif
	build_context = AllocSetContextCreate(TopMemoryContext, "convctx_recall index worker",
										  ALLOCSET_DEFAULT_SIZES);

	owner = WorkerStart(&args);
	if (!OidIsValid(owner))
		proc_exit(0);
	/* outside any transaction, so that an abort keeps it */
	SetUserIdAndSecContext(owner, SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);

	while (WorkerLock(true))
	{
		PendingBuild b;

		DropLeftovers();
		while (NextPending(failed, &b))
		{
			PG_TRY();
			{
				BuildOne(&b);
			}
			PG_CATCH();
			{
				ErrorData  *edata;

				MemoryContextSwitchTo(TopMemoryContext);
				edata = CopyErrorData();
				FlushErrorState();
				AbortOutOfAnyTransaction();
				SetUserIdAndSecContext(owner, SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
				ereport(LOG,
						errmsg("convctx_recall could not build the index turn_embedding_%d_%d: %s",
							   b.model_no, b.index_no, edata->message),
						errdetail("The build stays pending; the next index_tenants() or rebuild_index() tries it again."));
				BuildFailed(&b, edata->message);
				FreeErrorData(edata);
				failed = lappend_int(failed, b.index_no);
			}
			PG_END_TRY();
			MemoryContextReset(build_context);
		}
		WorkerLock(false);
		/* listed while the lock was held: built here unless another worker took it */
		if (!NextPending(failed, &b))
			break;
	}
	proc_exit(0);
}
