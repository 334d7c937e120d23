/*-------------------------------------------------------------------------
 *
 * purge.c
 *	  Retention: retention_settings, purge and purge_all; the trigger that
 *	  deletes what belongs to a deleted session.
 *
 * Concurrency rules (the lock order itself is in docs/locking.md):
 *	- purge takes row locks only, with SKIP LOCKED, and never waits: a
 *	  session that is busy is left for the next pass. It locks sessions
 *	  before their turns and contexts, as every writer does. An expired
 *	  session is chosen with FOR UPDATE, which re-checks its last activity
 *	  on the newest row version, so a session that just received a turn or
 *	  a context is not purged; and while purge holds the lock, start_turn
 *	  or context_add on that session waits, then starts afresh.
 *	- At any isolation level (docs/isolation-levels.md). Under read
 *	  committed the passes run as written, and the FOR UPDATE re-check above
 *	  happens inside the statement. Under repeatable read and serializable
 *	  a row changed after the transaction's snapshot cannot be locked or
 *	  deleted (40001), so there each pass reads the newest committed rows
 *	  (SpiBulkReadLatest) and runs in a subtransaction: a row committed
 *	  between that read and its lock still fails the statement with 40001,
 *	  and then the pass is rolled back and run again on newer data, a few
 *	  times at most, after which it is left for the next pass. purge_all
 *	  called outside a transaction block (pg_cron's CALL) runs every pass
 *	  in a transaction of its own at read committed, whatever the default.
 *
 * On Citus the passes are those of citus_purge.c, which PurgeOnce calls
 * instead.
 *
 * The trigger session_deleted is here because the purge is what deletes
 * sessions: the anonymous-session pass (EMPTIED_SESSIONS_SQL) deletes a
 * session's row and leaves its summary, retrievals and clarifications to
 * the trigger (on Citus, where no trigger fires, citus_purge.c deletes
 * them itself).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/lifecycle/purge.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "core/catalog.h"
#include "core/args.h"
#include "core/audit.h"
#include "core/jsonb_util.h"
#include "core/spi_plans.h"
#include "core/writable.h"
#include "lifecycle/purge.h"
#include "core/settings.h"
#include "core/tenancy.h"
#include "core/variant.h"

static SPIPlanPtr expired_session_turns_plan = NULL;
static SPIPlanPtr emptied_sessions_plan = NULL;

/* The passes of one kind: [0] for every tenant, [1] for one. */
static SPIPlanPtr expired_sessions_plan[2] = {NULL, NULL};
static SPIPlanPtr expired_turns_plan[2] = {NULL, NULL};
static SPIPlanPtr expired_contexts_plan[2] = {NULL, NULL};
static SPIPlanPtr expired_audit_plan[2] = {NULL, NULL};

/*
 * SQL fragment: per-session adjustment of the counts for a CTE "d" of
 * deleted rows that returned tenant_id, session_id, deleted_at,
 * replaced_by_turn_id and finalized_at.
 */
#define SESSION_COUNTS_ADJUST_D \
	" adj AS (UPDATE convctx.session s" \
	"   SET live_turns = s.live_turns OPERATOR(pg_catalog.-) a.turns," \
	"       live_answers = s.live_answers OPERATOR(pg_catalog.-) a.answers," \
	"       first_question = " FIRST_LIVE_QUESTION("s.tenant_id", "s.session_id", NOT_REMOVED_BY_D) \
	"   FROM (SELECT tenant_id, session_id," \
	"                pg_catalog.count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL) AS turns," \
	"                pg_catalog.count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL" \
	"                                   AND finalized_at IS NOT NULL) AS answers" \
	"           FROM d GROUP BY tenant_id, session_id) a" \
	"  WHERE s.tenant_id OPERATOR(pg_catalog.=) a.tenant_id" \
	"    AND s.session_id OPERATOR(pg_catalog.=) a.session_id" \
	"    AND a.turns OPERATOR(pg_catalog.>) 0)"

/*
 * The expired anonymous sessions of a pass, locked: the oldest, as many as
 * the pass's $2 turns can empty (their last_turn_no added up, the session
 * that crosses $2 included), at most $2. Locking $2 sessions for $2 turns
 * would lock each session of ten turns ten times before it is gone, and a
 * row lock writes its row and WAL. The count comes from the oldest expired
 * sessions, read without locks; the lock then takes that many with SKIP
 * LOCKED, so that sessions another transaction holds (a request, another
 * purge) are stepped over to the next ones, as before. Each is rechecked
 * under its lock on its newest version (still anonymous, still expired).
 */
#define EXPIRED_SESSIONS_SQL(scope) \
	"SELECT tenant_id, session_id FROM convctx.session" \
	" WHERE identity_id IS NULL" scope("activity_bin") \
	"   AND last_activity_at OPERATOR(pg_catalog.<)" CUTOFF \
	" ORDER BY activity_bin" \
	" LIMIT (SELECT pg_catalog.count(*) FROM (" \
	"          SELECT last_turn_no," \
	"                 pg_catalog.sum(GREATEST(last_turn_no, 1))" \
	"                   OVER (ORDER BY activity_bin ROWS UNBOUNDED PRECEDING) AS upto" \
	"            FROM convctx.session" \
	"           WHERE identity_id IS NULL" scope("activity_bin") \
	"             AND last_activity_at OPERATOR(pg_catalog.<)" CUTOFF \
	"           ORDER BY activity_bin LIMIT $2) c" \
	"         WHERE c.upto OPERATOR(pg_catalog.-) GREATEST(c.last_turn_no, 1)" \
	"               OPERATOR(pg_catalog.<) $2)" \
	" FOR UPDATE SKIP LOCKED"

/* $1 tenants, $2 sessions, $3 batch */
#define EXPIRED_SESSION_TURNS_SQL \
	"WITH d AS (DELETE FROM convctx.turn WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(" \
	"  SELECT t.ctid FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) AS e(tenant_id, session_id)" \
	"  CROSS JOIN LATERAL (SELECT ctid FROM convctx.turn t" \
	"      WHERE t.tenant_id OPERATOR(pg_catalog.=) e.tenant_id" \
	"        AND t.session_id OPERATOR(pg_catalog.=) e.session_id) t" \
	"  LIMIT $3))" \
	"  RETURNING tenant_id, session_id, turn_no, deleted_at, replaced_by_turn_id, finalized_at)," \
	SESSION_COUNTS_ADJUST_D "," SUMMARY_COVERED_ADJUST_D \
	" SELECT tenant_id, pg_catalog.count(*) FROM d GROUP BY tenant_id"

/*
 * $1 tenants, $2 sessions: delete the sessions left without turns, and
 * the contexts of those that had turns; per tenant, how many of each. A
 * session that never had a turn (last_turn_no 0) is the row context_add
 * or context_save created to lock on (docs/locking.md): its context is
 * left to convctx.context_ttl, as a context without turns always was. A
 * context another purge has locked (its context pass takes contexts
 * without their sessions) is skipped too, and left to context_ttl: purge
 * never waits, so two purges in long transactions cannot deadlock.
 */
#define EMPTIED_SESSIONS_SQL \
	"WITH gone AS (DELETE FROM convctx.session s" \
	"   USING ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) AS e(tenant_id, session_id)" \
	"   WHERE s.tenant_id OPERATOR(pg_catalog.=) e.tenant_id" \
	"     AND s.session_id OPERATOR(pg_catalog.=) e.session_id" \
	"     AND NOT EXISTS (SELECT 1 FROM convctx.turn t" \
	"                      WHERE t.tenant_id OPERATOR(pg_catalog.=) s.tenant_id" \
	"                        AND t.session_id OPERATOR(pg_catalog.=) s.session_id)" \
	"   RETURNING s.tenant_id, s.session_id, s.last_turn_no)," \
	" contexts AS (DELETE FROM convctx.conversation_context WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(" \
	"   SELECT c.ctid FROM convctx.conversation_context c JOIN gone g" \
	"       ON c.tenant_id OPERATOR(pg_catalog.=) g.tenant_id" \
	"      AND c.conversation_id OPERATOR(pg_catalog.=) g.session_id" \
	"    WHERE g.last_turn_no OPERATOR(pg_catalog.>) 0" \
	"    FOR UPDATE OF c SKIP LOCKED)) RETURNING tenant_id)" \
	" SELECT u.tenant_id, pg_catalog.count(*) FILTER (WHERE u.is_session)," \
	"        pg_catalog.count(*) FILTER (WHERE NOT u.is_session)" \
	"   FROM (SELECT tenant_id, true AS is_session FROM gone" \
	"         UNION ALL SELECT tenant_id, false FROM contexts) u" \
	"  GROUP BY u.tenant_id"

/*
 * The oldest turns, by turn_created (every tenant) or turn_created_tenant
 * (one). The sessions of the old turns are locked first (skipping busy
 * ones), as every writer of turns does; what was recorded for the turns
 * goes with them. A turn goes whole, every version of its number (by
 * turn_chronology), so that the batch limit never leaves a version
 * without the one before it or an old version without its successor.
 */
#define EXPIRED_TURNS_SQL(scope) \
	"WITH cand AS (SELECT tenant_id, session_id, turn_no FROM convctx.turn" \
	"   WHERE true" scope("created_at") \
	"   ORDER BY created_at LIMIT $2)," \
	" locked AS (SELECT s.tenant_id, s.session_id FROM convctx.session s" \
	"   WHERE (s.tenant_id, s.session_id) OPERATOR(pg_catalog.=) ANY (SELECT tenant_id, session_id FROM cand)" \
	"   FOR UPDATE SKIP LOCKED)," \
	" d AS (DELETE FROM convctx.turn WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(" \
	"   SELECT v.tid FROM cand c JOIN locked l" \
	"       ON l.tenant_id OPERATOR(pg_catalog.=) c.tenant_id" \
	"      AND l.session_id OPERATOR(pg_catalog.=) c.session_id" \
	"   CROSS JOIN LATERAL (SELECT x.ctid AS tid FROM convctx.turn x" \
	"      WHERE x.tenant_id OPERATOR(pg_catalog.=) c.tenant_id" \
	"        AND x.session_id OPERATOR(pg_catalog.=) c.session_id" \
	"        AND x.turn_no OPERATOR(pg_catalog.=) c.turn_no OFFSET 0) v))" \
	"  RETURNING tenant_id, session_id, turn_no, deleted_at, replaced_by_turn_id, finalized_at)," \
	SESSION_COUNTS_ADJUST_D "," SUMMARY_COVERED_ADJUST_D "," \
	" r AS (DELETE FROM convctx.turn_retrieval x USING d" \
	"   WHERE x.tenant_id OPERATOR(pg_catalog.=) d.tenant_id" \
	"     AND x.session_id OPERATOR(pg_catalog.=) d.session_id" \
	"     AND x.turn_no OPERATOR(pg_catalog.=) d.turn_no)," \
	" c AS (DELETE FROM convctx.clarification x USING d" \
	"   WHERE x.tenant_id OPERATOR(pg_catalog.=) d.tenant_id" \
	"     AND x.session_id OPERATOR(pg_catalog.=) d.session_id" \
	"     AND x.turn_no OPERATOR(pg_catalog.=) d.turn_no)" \
	" SELECT tenant_id, pg_catalog.count(*) FROM d GROUP BY tenant_id"

#define EXPIRED_CONTEXTS_SQL(scope) \
	"WITH d AS (DELETE FROM convctx.conversation_context WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(" \
	"  SELECT ctid FROM convctx.conversation_context" \
	"   WHERE updated_at OPERATOR(pg_catalog.<)" CUTOFF scope("updated_bin") \
	"   ORDER BY updated_bin LIMIT $2 FOR UPDATE SKIP LOCKED)) RETURNING tenant_id)" \
	" SELECT tenant_id, pg_catalog.count(*) FROM d GROUP BY tenant_id"

/*
 * The audit log's retention (convctx.audit_retention), by audit_log_logged
 * or audit_log_logged_tenant. Rows another transaction holds are skipped:
 * erase_identity, which rewrites the rows naming an identity, waits for
 * this pass instead (it does not skip), so a row this pass locked and then
 * kept (its transaction rolled back) is still rewritten.
 */
#define EXPIRED_AUDIT_SQL(scope) \
	"WITH d AS (DELETE FROM convctx.audit_log WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(" \
	"  SELECT ctid FROM convctx.audit_log" \
	"   WHERE true" scope("logged_at") \
	"   ORDER BY logged_at LIMIT $2 FOR UPDATE SKIP LOCKED)) RETURNING tenant_id)" \
	" SELECT tenant_id, pg_catalog.count(*) FROM d GROUP BY tenant_id"

static Datum
SecondsInterval(int seconds, bool *isnull)
{
	Interval   *iv;

	*isnull = (seconds <= 0);
	if (*isnull)
		return (Datum) 0;
	iv = palloc0(sizeof(Interval));
	iv->time = (int64) seconds * USECS_PER_SEC;
	return IntervalPGetDatum(iv);
}

PG_FUNCTION_INFO_V1(convctx_retention_settings);

/*
 * retention_settings() -> (session_ttl, turn_retention, context_ttl,
 *						   audit_retention)
 */
Datum
convctx_retention_settings(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[4];
	bool		nulls[4];

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = SecondsInterval(convctx_session_ttl, &nulls[0]);
	values[1] = SecondsInterval(convctx_turn_retention, &nulls[1]);
	values[2] = SecondsInterval(convctx_context_ttl, &nulls[2]);
	values[3] = SecondsInterval(convctx_audit_retention, &nulls[3]);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/*
 * The counts as JSON; "audit_rows" only when convctx.audit_retention is
 * set, so that what purge returned and logged before it existed keeps its
 * shape.
 */
static char *
PurgeCountsJson(PurgeCounts *c)
{
	JsonbParseState *state = NULL;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(&state, "anonymous_sessions");
	JsonbPushInt(&state, WJB_VALUE, c->anonymous_sessions);
	JsonbPushKey(&state, "anonymous_turns");
	JsonbPushInt(&state, WJB_VALUE, c->anonymous_turns);
	JsonbPushKey(&state, "expired_turns");
	JsonbPushInt(&state, WJB_VALUE, c->expired_turns);
	JsonbPushKey(&state, "contexts");
	JsonbPushInt(&state, WJB_VALUE, c->contexts);
	if (convctx_audit_retention > 0)
	{
		JsonbPushKey(&state, "audit_rows");
		JsonbPushInt(&state, WJB_VALUE, c->audit_rows);
	}
	return JsonbEndObjectText(&state);
}

static int64
PurgeCountsTotal(PurgeCounts *c)
{
	return c->anonymous_sessions + c->anonymous_turns + c->expired_turns + c->contexts +
		c->audit_rows;
}

/* Per-tenant counts, in the current memory context (so it outlives SPI). */
static HTAB *
PurgeTenantsCreate(void)
{
	HASHCTL		ctl;

	ctl.keysize = CONVCTX_MAX_ID_BYTES + 1;
	ctl.entrysize = sizeof(PurgeTenant);
	ctl.hcxt = CurrentMemoryContext;
	return hash_create("convctx purge tenants", 16, &ctl,
					   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

/* tenant's entry in tenants, zeroed when new. */
PurgeTenant *
PurgeTenantEntry(HTAB *tenants, const char *tenant)
{
	char		key[CONVCTX_MAX_ID_BYTES + 1];
	PurgeTenant *e;
	bool		found;

	memset(key, 0, sizeof(key));
	strlcpy(key, tenant, sizeof(key));
	e = hash_search(tenants, key, HASH_ENTER, &found);
	if (!found)
		memset(&e->c, 0, sizeof(e->c));
	return e;
}

/* Add the counts in from to those in into. */
static void
PurgeCountsAdd(PurgeCounts *into, const PurgeCounts *from)
{
	into->anonymous_sessions += from->anonymous_sessions;
	into->anonymous_turns += from->anonymous_turns;
	into->expired_turns += from->expired_turns;
	into->contexts += from->contexts;
	into->audit_rows += from->audit_rows;
}

/*
 * Add the rows of SPI_tuptable, (tenant_id, n1[, n2]), to the counts
 * of each tenant: n1 to the field at offset1, n2 to the one at offset2.
 */
static void
PurgeTenantsAdd(HTAB *tenants, size_t offset1, size_t offset2)
{
	SPITupleTable *tt = SPI_tuptable;
	uint64		i;

	for (i = 0; i < SPI_processed; i++)
	{
		char	   *tenant = SPI_getvalue(tt->vals[i], tt->tupdesc, 1);
		PurgeTenant *e = PurgeTenantEntry(tenants, tenant ? tenant : "");
		bool		isnull;

		*(int64 *) ((char *) &e->c + offset1) +=
			DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 2, &isnull));
		if (offset2 != (size_t) -1)
			*(int64 *) ((char *) &e->c + offset2) +=
				DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 3, &isnull));
	}
}

/* The statement of a pass, for every tenant or for one (purge.h). */
void
PurgeRunScoped(SPIPlanPtr *plans, const char *sql_all, const char *sql_one, int age,
			   int32 limit, text *tenant, bool read_only)
{
	Oid			argtypes[3] = {INT4OID, INT4OID, TEXTOID};
	Datum		values[3] = {Int32GetDatum(age), Int32GetDatum(limit), PointerGetDatum(tenant)};
	char		nulls[3] = {' ', ' ', tenant ? ' ' : 'n'};
	int			one = tenant ? 1 : 0;

	SpiRunBulkPlan(SpiKeptPlan(&plans[one], one ? sql_one : sql_all, 3, argtypes),
				   values, nulls, read_only, 0, SPI_OK_SELECT);
}

/*
 * The anonymous-session pass: the expired anonymous sessions, locked
 * (EXPIRED_SESSIONS_SQL), lose at most batch turns in all, and those left
 * without turns go (EMPTIED_SESSIONS_SQL).
 */
static void
PurgeExpiredSessions(int32 batch, text *tenant, HTAB *tenants)
{
	uint64		n;
	uint64		i;
	Datum	   *tenant_ids;
	Datum	   *sessions;
	Oid			arrtypes[3] = {TEXTARRAYOID, TEXTARRAYOID, INT4OID};
	Datum		arrvalues[3];
	SPITupleTable *tt;

	PurgeRunScoped(expired_sessions_plan, EXPIRED_SESSIONS_SQL(ALL_TENANTS),
				   EXPIRED_SESSIONS_SQL(ONE_TENANT), convctx_session_ttl, batch, tenant, false);
	n = SPI_processed;
	if (n == 0)
		return;
	tt = SPI_tuptable;
	tenant_ids = palloc(sizeof(Datum) * n);
	sessions = palloc(sizeof(Datum) * n);
	for (i = 0; i < n; i++)
	{
		bool		isnull;

		tenant_ids[i] = SPI_getbinval(tt->vals[i], tt->tupdesc, 1, &isnull);
		sessions[i] = SPI_getbinval(tt->vals[i], tt->tupdesc, 2, &isnull);
	}
	arrvalues[0] = PointerGetDatum(construct_array(tenant_ids, n, TEXTOID, -1, false, TYPALIGN_INT));
	arrvalues[1] = PointerGetDatum(construct_array(sessions, n, TEXTOID, -1, false, TYPALIGN_INT));
	arrvalues[2] = Int32GetDatum(batch);

	SpiRunBulkPlan(SpiKeptPlan(&expired_session_turns_plan, EXPIRED_SESSION_TURNS_SQL, 3, arrtypes),
				   arrvalues, NULL, false, 0, SPI_OK_SELECT);
	PurgeTenantsAdd(tenants, offsetof(PurgeCounts, anonymous_turns), (size_t) -1);

	SpiRunBulkPlan(SpiKeptPlan(&emptied_sessions_plan, EMPTIED_SESSIONS_SQL, 2, arrtypes),
				   arrvalues, NULL, false, 0, SPI_OK_SELECT);
	PurgeTenantsAdd(tenants, offsetof(PurgeCounts, anonymous_sessions),
					offsetof(PurgeCounts, contexts));
}

/*
 * The passes that are one statement each, in the order they run, after
 * the anonymous-session pass: the setting that enables a pass (an age in
 * seconds, 0 for off), its plans and statements (PurgeRunScoped), and the
 * count its rows (tenant_id, n) add to.
 */
typedef struct PurgeSimplePass
{
	int		   *age;
	SPIPlanPtr *plans;
	const char *sql_all;
	const char *sql_one;
	size_t		count;
} PurgeSimplePass;

static const PurgeSimplePass purge_simple_passes[] = {
	{&convctx_turn_retention, expired_turns_plan,
		EXPIRED_TURNS_SQL(ALL_TENANTS), EXPIRED_TURNS_SQL(ONE_TENANT),
	offsetof(PurgeCounts, expired_turns)},
	{&convctx_context_ttl, expired_contexts_plan,
		EXPIRED_CONTEXTS_SQL(ALL_TENANTS), EXPIRED_CONTEXTS_SQL(ONE_TENANT),
	offsetof(PurgeCounts, contexts)},
	/* Last: the purge's own audit rows come after, in the same transaction. */
	{&convctx_audit_retention, expired_audit_plan,
		EXPIRED_AUDIT_SQL(ALL_TENANTS), EXPIRED_AUDIT_SQL(ONE_TENANT),
	offsetof(PurgeCounts, audit_rows)},
};

/*
 * One retention pass over tenant (NULL: every tenant), at most batch rows
 * of each kind, adding what it deleted to the counts of each tenant in
 * tenants. SPI must be connected.
 */
static void
PurgeOnce(int32 batch, text *tenant, HTAB *tenants)
{
	const ConvctxVariant *variant = Variant();
	size_t		i;

	if (variant->purge_once)
	{
		variant->purge_once(batch, tenant, tenants);
		return;
	}

	if (convctx_session_ttl > 0)
		PurgeExpiredSessions(batch, tenant, tenants);
	for (i = 0; i < lengthof(purge_simple_passes); i++)
	{
		const PurgeSimplePass *p = &purge_simple_passes[i];

		if (*p->age <= 0)
			continue;
		PurgeRunScoped(p->plans, p->sql_all, p->sql_one, *p->age, batch, tenant, false);
		PurgeTenantsAdd(tenants, p->count, (size_t) -1);
	}
}

/* Add the counts of every tenant in from to those in into. */
static void
PurgeTenantsMerge(HTAB *into, HTAB *from)
{
	HASH_SEQ_STATUS seq;
	PurgeTenant *e;

	hash_seq_init(&seq, from);
	while ((e = hash_seq_search(&seq)) != NULL)
		PurgeCountsAdd(&PurgeTenantEntry(into, e->tenant)->c, &e->c);
}

/*
 * How many times a pass is tried under repeatable read or serializable
 * before it is left for the next pass. Each try reads newer data than the
 * one before, so a second one almost always succeeds.
 */
#define PURGE_PASS_TRIES 3

/*
 * One retention pass in a transaction that keeps one snapshot (repeatable
 * read, serializable): PurgeOnce reading the newest committed rows, in a
 * subtransaction. A serialization failure (40001: a row committed between
 * the read and its lock, or under serializable a read/write conflict
 * found while writing) rolls the pass back and tries again; after
 * PURGE_PASS_TRIES the pass deletes nothing and its rows wait for the next
 * one. Any other error is raised. Each try that writes takes one subxid;
 * see docs/isolation-levels.md for what more than 64 of them in one
 * transaction costs. SPI must be connected.
 */
static void
PurgeAtSnapshotLevel(int32 batch, text *tenant, HTAB *tenants)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile int try;

	for (try = 1; try <= PURGE_PASS_TRIES; try++)
	{
		HTAB	   *attempt = PurgeTenantsCreate();
		volatile bool done = false;
		bool		was_latest = SpiBulkReadLatest(false);

		/* only read here: set inside the subtransaction, restored on error */
		SpiBulkReadLatest(was_latest);

		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(oldcontext);
		PG_TRY();
		{
			SpiBulkReadLatest(true);
			PurgeOnce(batch, tenant, attempt);
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(oldcontext);
			CurrentResourceOwner = oldowner;
			done = true;
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(oldcontext);
			edata = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(oldcontext);
			CurrentResourceOwner = oldowner;
			SpiBulkReadLatest(was_latest);
			if (edata->sqlerrcode != ERRCODE_T_R_SERIALIZATION_FAILURE)
				ReThrowError(edata);
			ereport(DEBUG1,
					errmsg_internal("purge: pass %d of %d rolled back: %s",
									try, PURGE_PASS_TRIES, edata->message));
			FreeErrorData(edata);
		}
		PG_END_TRY();
		SpiBulkReadLatest(was_latest);
		if (done)
		{
			PurgeTenantsMerge(tenants, attempt);
			return;
		}
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * One retention pass (PurgeOnce) at the transaction's isolation level:
 * as written under read committed, through PurgeAtSnapshotLevel otherwise.
 */
static void
PurgePass(int32 batch, text *tenant, HTAB *tenants)
{
	if (IsolationUsesXactSnapshot())
		PurgeAtSnapshotLevel(batch, tenant, tenants);
	else
		PurgeOnce(batch, tenant, tenants);
}

static int
PurgeTenantCmp(const void *a, const void *b)
{
	return strcmp((*(PurgeTenant *const *) a)->tenant, (*(PurgeTenant *const *) b)->tenant);
}

/*
 * One retention pass for tenant (NULL: every tenant) with its audit rows,
 * and the counts of all it deleted, as JSON text allocated in the caller's
 * memory context. A role bound to a tenant purges that tenant only, and its
 * purge is one audit row of that tenant when it deleted something. A role
 * that serves every tenant purges them all, and each tenant touched gets an
 * audit row of its own with its own counts (untouched tenants none), so no
 * tenant's log shows another tenant's numbers. A pass that deleted nothing
 * writes no row: purge_all ends with such a pass, and the pg_cron job runs
 * every few minutes.
 */
static char *
PurgeAndAudit(int32 batch, text *tenant)
{
	HTAB	   *tenants = PurgeTenantsCreate();
	PurgeCounts counts = {0, 0, 0, 0, 0};
	PurgeTenant **touched;
	PurgeTenant *e;
	HASH_SEQ_STATUS seq;
	long		n = 0;
	long		i;

	SPI_connect();
	PurgePass(batch, tenant, tenants);

	touched = palloc(sizeof(PurgeTenant *) * (hash_get_num_entries(tenants) + 1));
	hash_seq_init(&seq, tenants);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		PurgeCountsAdd(&counts, &e->c);
		if (PurgeCountsTotal(&e->c) > 0)
			touched[n++] = e;
	}
	/* Only a pass that deleted something is logged (docs/retention.md). */
	if (tenant != NULL)
	{
		if (PurgeCountsTotal(&counts) > 0)
			AuditWrite(tenant, "purge", NULL, NULL, PurgeCountsJson(&counts));
	}
	else
	{
		qsort(touched, n, sizeof(PurgeTenant *), PurgeTenantCmp);
		for (i = 0; i < n; i++)
			AuditWrite(cstring_to_text(touched[i]->tenant), "purge", NULL, NULL,
					   PurgeCountsJson(&touched[i]->c));
	}
	SPI_finish();

	/* Made again: what was allocated under SPI went with SPI_finish. */
	return PurgeCountsJson(&counts);
}

PG_FUNCTION_INFO_V1(convctx_purge);

/*
 * purge(batch_size) -> jsonb counts of what one retention pass deleted
 * (PurgeAndAudit).
 */
Datum
convctx_purge(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(purge);
	int32		batch = ArgLimit(fcinfo, 0, "batch_size");
	const char *bound = BoundTenant();
	text	   *tenant = bound ? CurrentTenant() : NULL;	/* checks convctx.tenant too */
	char	   *json = PurgeAndAudit(batch, tenant);

	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));
}

/*
 * One pass, through convctx.purge, which decides the tenant (from the role
 * that called purge_all) and writes the audit rows of the pass.
 */
#define PURGE_PASS_SQL \
	"SELECT (r OPERATOR(pg_catalog.->>) 'anonymous_sessions')::pg_catalog.int8," \
	"       (r OPERATOR(pg_catalog.->>) 'anonymous_turns')::pg_catalog.int8," \
	"       (r OPERATOR(pg_catalog.->>) 'expired_turns')::pg_catalog.int8," \
	"       (r OPERATOR(pg_catalog.->>) 'contexts')::pg_catalog.int8," \
	"       COALESCE((r OPERATOR(pg_catalog.->>) 'audit_rows')::pg_catalog.int8, 0)" \
	"  FROM convctx.purge($1) AS r"

static SPIPlanPtr purge_pass_plan = NULL;

/*
 * Make the transaction just started by SPI_commit read committed, as SET
 * TRANSACTION ISOLATION LEVEL does, before anything takes a snapshot: a
 * pass then locks the newest version of each row and never fails because
 * a row changed after its snapshot (nor, at serializable, at commit).
 * Should a snapshot exist already (nothing here takes one), the level
 * cannot change and PurgePass handles the pass at the default level.
 */
static void
PurgeReadCommitted(void)
{
	if (FirstSnapshotSet || XactIsoLevel == XACT_READ_COMMITTED)
		return;
	(void) set_config_option("transaction_isolation", "read committed",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
}

/*
 * Wait ms milliseconds, as pg_sleep does: a set latch (a signal, say) ends
 * a wait early, so wait again for what is left; a cancel ends it at once.
 */
static void
PurgePause(int ms)
{
	TimestampTz end = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);

	for (;;)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), end);

		CHECK_FOR_INTERRUPTS();
		if (left <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * Run purge passes (PURGE_PASS_SQL) until one deletes nothing; returns
 * how many ran. nonatomic (a CALL outside a transaction block): commit
 * after each pass, and run every pass in a transaction of its own at read
 * committed (PurgeReadCommitted), the first one too: the CALL's
 * transaction, begun at the default level, ends here.
 */
static int64
PurgeUntilDone(int32 batch, bool nonatomic)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(batch)};
	int64		passes = 0;
	int64		deleted;

	SPI_connect_ext(nonatomic ? SPI_OPT_NONATOMIC : 0);
	if (nonatomic)
	{
		SPI_commit();
		PurgeReadCommitted();
	}
	do
	{
		int			i;

		SpiRunBulkPlan(SpiKeptPlan(&purge_pass_plan, PURGE_PASS_SQL, 1, argtypes),
				       values, NULL, false, 0, SPI_OK_SELECT);
		deleted = 0;
		for (i = 1; i <= 5; i++)
		{
			bool		isnull;

			deleted += DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												   SPI_tuptable->tupdesc, i, &isnull));
		}
		passes++;
		if (nonatomic)
		{
			SPI_commit();
			PurgeReadCommitted();
			/*
			 * The throttle: between two transactions, holding no lock, and
			 * only when another pass follows. Inside a transaction block a
			 * pause would only hold the rows deleted so far locked longer.
			 */
			if (deleted > 0 && convctx_purge_pause > 0)
				PurgePause(convctx_purge_pause);
		}
		CHECK_FOR_INTERRUPTS();
	} while (deleted > 0);
	SPI_finish();
	return passes;
}

PG_FUNCTION_INFO_V1(convctx_purge_all);

/*
 * CALL purge_all(batch_size): purge until nothing is left, committing
 * after each pass when called outside a transaction block; each pass then
 * runs at read committed whatever the default isolation level.
 */
Datum
convctx_purge_all(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(purge_all);
	int32		batch = ArgLimit(fcinfo, 0, "batch_size");
	bool		nonatomic = fcinfo->context != NULL && IsA(fcinfo->context, CallContext) &&
		!castNode(CallContext, fcinfo->context)->atomic;
	int64		passes = PurgeUntilDone(batch, nonatomic);

	ereport(DEBUG1, errmsg_internal("purge_all: %lld passes", (long long) passes));
	PG_RETURN_VOID();
}

/*
 * What belongs to a session besides its turns and links: its summary and
 * what its turns retrieved and clarified. deleted_sessions is the
 * trigger's transition table. Planned for each call, with the number of
 * deleted sessions known: a kept plan would keep the estimate of the first
 * call in the backend (probes for one session, or whole scans of every
 * tenant's rows after one large purge), and probing three primary keys per
 * session costs a purge pass more than joining the tables when they hold
 * little.
 */
#define SESSION_CHILDREN_DELETE_SQL \
	"WITH summaries AS (DELETE FROM convctx.session_summary x USING deleted_sessions g" \
	"   WHERE x.tenant_id OPERATOR(pg_catalog.=) g.tenant_id" \
	"     AND x.session_id OPERATOR(pg_catalog.=) g.session_id)," \
	" retrievals AS (DELETE FROM convctx.turn_retrieval x USING deleted_sessions g" \
	"   WHERE x.tenant_id OPERATOR(pg_catalog.=) g.tenant_id" \
	"     AND x.session_id OPERATOR(pg_catalog.=) g.session_id)" \
	" DELETE FROM convctx.clarification x USING deleted_sessions g" \
	"  WHERE x.tenant_id OPERATOR(pg_catalog.=) g.tenant_id" \
	"    AND x.session_id OPERATOR(pg_catalog.=) g.session_id"

/*
 * After TRUNCATE convctx.session, every row of those tables. Not TRUNCATE:
 * a TRUNCATE that names them too still has them open while its triggers
 * run, and they are empty then anyway.
 */
#define SESSION_CHILDREN_ALL_SQL \
	"WITH summaries AS (DELETE FROM convctx.session_summary)," \
	" retrievals AS (DELETE FROM convctx.turn_retrieval)" \
	" DELETE FROM convctx.clarification"

static SPIPlanPtr session_children_all_plan = NULL;

/*
 * Refuse to run as anything but the triggers the install script creates;
 * their TriggerData.
 */
static TriggerData *
SessionDeletedTrigger(FunctionCallInfo fcinfo)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Oid			session_rel;
	bool		by_delete;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				errmsg("trigger function convctx.session_deleted() was not called by trigger manager"),
				errhint("Only the triggers session_deleted and session_truncated on convctx.session fire it."));
	session_rel = get_relname_relid("session", ConvctxNamespace());
	by_delete = TRIGGER_FIRED_BY_DELETE(trigdata->tg_event);
	if (RelationGetRelid(trigdata->tg_relation) != session_rel ||
		!TRIGGER_FIRED_AFTER(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event) ||
		!(by_delete || TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event)) ||
		(by_delete && (trigdata->tg_oldtable == NULL ||
					   trigdata->tg_trigger->tgoldtable == NULL ||
					   strcmp(trigdata->tg_trigger->tgoldtable, "deleted_sessions") != 0)))
		ereport(ERROR,
				errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				errmsg("convctx.session_deleted() must be fired after DELETE or TRUNCATE on convctx.session, for each statement"),
				errdetail("After DELETE it needs the transition table deleted_sessions (REFERENCING OLD TABLE AS deleted_sessions)."));
	return trigdata;
}

PG_FUNCTION_INFO_V1(convctx_session_deleted);

/*
 * Trigger on convctx.session, for each statement: after DELETE, delete
 * the summaries, retrievals and clarifications of the deleted sessions in
 * one statement; after TRUNCATE, delete all their rows. (Foreign keys with
 * ON DELETE CASCADE did the first with three queries per session, more
 * than a third of a purge pass, and refused the second.) The deletes read
 * the newest committed rows, so that under repeatable read a row committed
 * after the snapshot goes too. Both run as the extension's owner, as the
 * cascade did. A logical replication subscriber does not fire it: it
 * receives these deletes from the publisher.
 */
Datum
convctx_session_deleted(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = SessionDeletedTrigger(fcinfo);

	SPI_connect();
	if (TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
		SpiRunBulkPlanLatest(SpiKeptPlan(&session_children_all_plan, SESSION_CHILDREN_ALL_SQL, 0, NULL),
							 NULL, NULL, SPI_OK_DELETE);
	else if (tuplestore_tuple_count(trigdata->tg_oldtable) > 0)
	{
		SPIPlanPtr	plan;

		if (SPI_register_trigger_data(trigdata) != SPI_OK_TD_REGISTER)
			elog(ERROR, "SPI_register_trigger_data failed");
		plan = SPI_prepare(SESSION_CHILDREN_DELETE_SQL, 0, NULL);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SpiRunBulkPlanLatest(plan, NULL, NULL, SPI_OK_DELETE);
		SPI_freeplan(plan);
	}
	SPI_finish();
	return PointerGetDatum(NULL);
}

