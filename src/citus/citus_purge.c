/*-------------------------------------------------------------------------
 *
 * citus_purge.c
 *	  The purge on Citus (the Citus variant's purge_once, variant.h): the retention passes of
 *	  purge.c, a session at a time.
 *
 * On Citus the passes of purge.c cannot run: a statement that locks rows
 * of several shards, or takes ctids from a subquery, is refused. There each pass first reads its candidates without locks (a
 * statement over every shard, oldest first, at most the batch), then
 * handles them one session (one tenant, for the audit log) at a time with
 * statements that Citus routes to the one shard that holds it, under the
 * same row locks as the single-server passes, taken with SKIP LOCKED and
 * rechecked under the lock. A session emptied of its turns goes with every
 * row that belongs to it: on Citus no trigger does that (session_deleted
 * in purge.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/citus/citus_purge.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/uuid.h"

#include "citus/citus.h"
#include "core/spi_plans.h"
#include "lifecycle/purge.h"
#include "core/settings.h"

/*
 * The oldest expired anonymous sessions, $2 of them: the pass takes as
 * many as it can lock of them (see CITUS_SESSIONS_SLACK).
 */
#define CITUS_EXPIRED_SESSIONS_SQL(scope) \
	"SELECT tenant_id, session_id, last_turn_no FROM convctx.session" \
	" WHERE identity_id IS NULL" scope("activity_bin") \
	"   AND last_activity_at OPERATOR(pg_catalog.<)" CUTOFF \
	" ORDER BY activity_bin, tenant_id, session_id LIMIT $2"

/*
 * Candidates read beyond the batch, so that a pass that finds the first
 * ones locked (by another purge, say) goes on to the next, as SKIP LOCKED
 * does on a single server.
 */
#define CITUS_SESSIONS_SLACK 64

/* $1 tenant, $2 session, $3 session_ttl */
#define CITUS_SESSION_LOCK_SQL \
	"SELECT 1 FROM convctx.session WHERE " SESSION_KEY \
	"   AND identity_id IS NULL" \
	"   AND last_activity_at OPERATOR(pg_catalog.<)" \
	"       (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => $3))" \
	" FOR UPDATE SKIP LOCKED"

/*
 * SESSION_COUNTS_ADJUST_D (purge.c) and SUMMARY_COVERED_ADJUST_D
 * (SUMMARY_COVERED_ADJUST_D_ONE) for the one session $1, $2 of the
 * statement: keyed by it, so that Citus sends the updates to that
 * session's shard, not to every shard (which would also serialize
 * concurrent passes on Citus's shard locks).
 */
#define CITUS_COUNTS_ADJUST_D \
	" adj AS (UPDATE convctx.session s" \
	"   SET live_turns = s.live_turns OPERATOR(pg_catalog.-) a.turns," \
	"       live_answers = s.live_answers OPERATOR(pg_catalog.-) a.answers," \
	"       first_question = " FIRST_LIVE_QUESTION("$1", "$2", NOT_REMOVED_BY_D) \
	"   FROM (SELECT pg_catalog.count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL) AS turns," \
	"                pg_catalog.count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL" \
	"                                   AND finalized_at IS NOT NULL) AS answers" \
	"           FROM d) a" \
	"  WHERE " SESSION_KEY_AT("s") " AND a.turns OPERATOR(pg_catalog.>) 0)," \
	SUMMARY_COVERED_ADJUST_D_ONE

/*
 * $1 tenant, $2 session, $3 at most that many of its turns, with the
 * session's counts adjusted as EXPIRED_SESSION_TURNS_SQL does.
 */
#define CITUS_SESSION_TURNS_DELETE_SQL \
	"WITH d AS (DELETE FROM convctx.turn WHERE " SESSION_KEY \
	"   AND turn_id OPERATOR(pg_catalog.=) ANY (ARRAY(" \
	"     SELECT turn_id FROM convctx.turn WHERE " SESSION_KEY " LIMIT $3))" \
	"  RETURNING tenant_id, session_id, turn_no, deleted_at, replaced_by_turn_id, finalized_at)," \
	CITUS_COUNTS_ADJUST_D \
	" SELECT pg_catalog.count(*) FROM d"
#define CITUS_SESSION_SUMMARY_DELETE_SQL "DELETE FROM convctx.session_summary WHERE " SESSION_KEY
#define CITUS_SESSION_RETRIEVALS_DELETE_SQL "DELETE FROM convctx.turn_retrieval WHERE " SESSION_KEY
#define CITUS_SESSION_CLARIFICATIONS_DELETE_SQL "DELETE FROM convctx.clarification WHERE " SESSION_KEY
/* The session, if it has no turn left. */
#define CITUS_SESSION_DELETE_SQL \
	"DELETE FROM convctx.session s WHERE " SESSION_KEY_AT("s") \
	"   AND NOT EXISTS (SELECT 1 FROM convctx.turn t WHERE " SESSION_KEY_AT("t") ")" \
	" RETURNING s.last_turn_no"
/* its context, unless another purge holds it (as EMPTIED_SESSIONS_SQL) */
#define CITUS_SESSION_CONTEXT_DELETE_SQL \
	"WITH l AS (SELECT 1 FROM convctx.conversation_context" \
	"   WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND conversation_id OPERATOR(pg_catalog.=) $2" \
	"   FOR UPDATE SKIP LOCKED)" \
	" DELETE FROM convctx.conversation_context" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND conversation_id OPERATOR(pg_catalog.=) $2" \
	"   AND EXISTS (SELECT 1 FROM l)"

#define CITUS_EXPIRED_TURNS_SQL(scope) \
	"SELECT tenant_id, session_id, turn_id FROM convctx.turn" \
	" WHERE true" scope("created_at") \
	" ORDER BY created_at, tenant_id, session_id LIMIT $2"

/* $1 tenant, $2 session: lock it if no other transaction holds it. */
#define CITUS_SESSION_TRY_LOCK_SQL \
	"SELECT 1 FROM convctx.session WHERE " SESSION_KEY " FOR UPDATE SKIP LOCKED"

/* $1 tenant, $2 session, $3 the turns (their ids) to delete whole, as EXPIRED_TURNS_SQL does */
#define CITUS_SESSION_OLD_TURNS_SQL \
	"WITH d AS (DELETE FROM convctx.turn WHERE " SESSION_KEY \
	"   AND turn_no OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT x.turn_no FROM convctx.turn x" \
	"         WHERE " SESSION_KEY_AT("x") " AND x.turn_id OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.uuid[])))" \
	"  RETURNING tenant_id, session_id, turn_no, deleted_at, replaced_by_turn_id, finalized_at)," \
	CITUS_COUNTS_ADJUST_D "," \
	" r AS (DELETE FROM convctx.turn_retrieval x WHERE " SESSION_KEY_AT("x") \
	"     AND x.turn_no OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT turn_no FROM d)))," \
	" c AS (DELETE FROM convctx.clarification x WHERE " SESSION_KEY_AT("x") \
	"     AND x.turn_no OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT turn_no FROM d)))" \
	" SELECT pg_catalog.count(*) FROM d"

#define CITUS_EXPIRED_CONTEXTS_SQL(scope) \
	"SELECT tenant_id, conversation_id FROM convctx.conversation_context" \
	" WHERE updated_at OPERATOR(pg_catalog.<)" CUTOFF scope("updated_bin") \
	" ORDER BY updated_bin, tenant_id, conversation_id LIMIT $2"

/* $1 tenant, $2 conversation, $3 context_ttl */
#define CITUS_CONTEXT_EXPIRED_DELETE_SQL \
	"WITH l AS (SELECT 1 FROM convctx.conversation_context" \
	"   WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND conversation_id OPERATOR(pg_catalog.=) $2" \
	"     AND updated_at OPERATOR(pg_catalog.<)" \
	"         (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => $3))" \
	"   FOR UPDATE SKIP LOCKED)" \
	" DELETE FROM convctx.conversation_context" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND conversation_id OPERATOR(pg_catalog.=) $2" \
	"   AND EXISTS (SELECT 1 FROM l)"

#define CITUS_EXPIRED_AUDIT_SQL(scope) \
	"SELECT tenant_id, audit_id FROM convctx.audit_log" \
	" WHERE true" scope("logged_at") \
	" ORDER BY logged_at, tenant_id, audit_id LIMIT $2"

/* $1 tenant, $2 its audit rows to delete, those no other transaction holds */
#define CITUS_AUDIT_DELETE_SQL \
	"WITH l AS (SELECT audit_id FROM convctx.audit_log" \
	"   WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"     AND audit_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.uuid[])" \
	"   FOR UPDATE SKIP LOCKED)" \
	" DELETE FROM convctx.audit_log" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND audit_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT audit_id FROM l))"

static SPIPlanPtr citus_expired_sessions_plan[2] = {NULL, NULL};
static SPIPlanPtr citus_session_lock_plan = NULL;
static SPIPlanPtr citus_session_turns_delete_plan = NULL;
static SPIPlanPtr citus_session_summary_delete_plan = NULL;
static SPIPlanPtr citus_session_retrievals_delete_plan = NULL;
static SPIPlanPtr citus_session_clarifications_delete_plan = NULL;
static SPIPlanPtr citus_session_delete_plan = NULL;
static SPIPlanPtr citus_session_context_delete_plan = NULL;
static SPIPlanPtr citus_expired_turns_plan[2] = {NULL, NULL};
static SPIPlanPtr citus_session_try_lock_plan = NULL;
static SPIPlanPtr citus_session_old_turns_plan = NULL;
static SPIPlanPtr citus_expired_contexts_plan[2] = {NULL, NULL};
static SPIPlanPtr citus_context_expired_delete_plan = NULL;
static SPIPlanPtr citus_expired_audit_plan[2] = {NULL, NULL};
static SPIPlanPtr citus_audit_delete_plan = NULL;

/* Add n to the count at offset of tenant's entry in tenants. */
static void
PurgeTenantCount(HTAB *tenants, text *tenant, size_t offset, int64 n)
{
	char		key[CONVCTX_MAX_ID_BYTES + 1];
	PurgeTenant *e;

	if (n == 0)
		return;
	text_to_cstring_buffer(tenant, key, sizeof(key));
	e = PurgeTenantEntry(tenants, key);
	*(int64 *) ((char *) &e->c + offset) += n;
}

/*
 * The candidates of a pass on Citus: the rows of the statement, copied
 * out of SPI's memory into the current context, with their count.
 */
typedef struct PurgeCandidates
{
	int			n;
	int			ncols;
	Datum	   *values;			/* n x ncols */
} PurgeCandidates;

#define CANDIDATE(c, row, col) ((c)->values[(row) * (c)->ncols + (col)])

/*
 * Read the candidates of a pass (PurgeRunScoped, reading only) into c:
 * plans[0] (sql_all, every tenant) or plans[1] (sql_one, tenant) with $1
 * the setting's age in seconds, $2 limit.
 */
static void
PurgeCandidatesOf(SPIPlanPtr *plans, const char *sql_all, const char *sql_one, int age,
				  int32 limit, text *tenant, PurgeCandidates *c)
{
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext spi;
	int			i;
	int			j;

	PurgeRunScoped(plans, sql_all, sql_one, age, limit, tenant, true);
	spi = MemoryContextSwitchTo(cxt);
	c->n = (int) SPI_processed;
	c->ncols = SPI_tuptable->tupdesc->natts;
	c->values = palloc(sizeof(Datum) * Max(c->n * c->ncols, 1));
	for (i = 0; i < c->n; i++)
		for (j = 0; j < c->ncols; j++)
		{
			bool		isnull;
			Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, j);
			Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, j + 1, &isnull);

			CANDIDATE(c, i, j) = isnull ? (Datum) 0 : datumCopy(d, att->attbyval, att->attlen);
		}
	MemoryContextSwitchTo(spi);
}

/*
 * The candidates from row *i on whose first nkeys columns equal row *i's
 * (byte for byte: the key columns are COLLATE "C"), wherever they are in
 * the order: their column idcol, a uuid, as a uuid[] in the current
 * context; *i moves to the next row of another group. The rows taken are
 * marked done (first column zeroed).
 */
static Datum
PurgeCandidatesGroup(PurgeCandidates *c, int *i, int nkeys, int idcol)
{
	int			first = *i;
	int			nids = 0;
	Datum	   *ids = palloc(sizeof(Datum) * (c->n - first));
	Datum		result;

	for (int j = first; j < c->n; j++)
	{
		bool		same = CANDIDATE(c, j, 0) != (Datum) 0;

		for (int k = 0; same && k < nkeys; k++)
			same = datum_image_eq(CANDIDATE(c, first, k), CANDIDATE(c, j, k), false, -1);
		if (!same)
			continue;
		ids[nids++] = CANDIDATE(c, j, idcol);
		if (j > first)
			CANDIDATE(c, j, 0) = (Datum) 0;
	}
	do
		(*i)++;
	while (*i < c->n && CANDIDATE(c, *i, 0) == (Datum) 0);
	result = PointerGetDatum(construct_array(ids, nids, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR));
	pfree(ids);
	return result;
}

/*
 * Run a per-session statement $1 tenant, $2 session; the rows it processed,
 * and in *first (unless NULL) the first column of its first row, an int8.
 * Its result is freed: a pass runs many.
 */
static uint64
PurgeSessionRun(SPIPlanPtr *cache, const char *sql, text *tenant, text *session_id, int rc,
				int64 *first)
{
	uint64		n;

	SpiRunSessionPlan(cache, sql, tenant, session_id, false, 0, rc);
	n = SPI_processed;
	if (first != NULL && n > 0)
		*first = SpiFirstInt8();
	SPI_freetuptable(SPI_tuptable);
	return n;
}

/*
 * The anonymous-session pass on Citus: expired sessions one at a time, at
 * most batch turns in all; a session left without turns goes.
 */
static void
PurgeExpiredSessionsDistributed(int32 batch, text *tenant, HTAB *tenants)
{
	PurgeCandidates c;
	int64		turns = 0;
	int64		budget = batch;
	int			i;

	PurgeCandidatesOf(citus_expired_sessions_plan, CITUS_EXPIRED_SESSIONS_SQL(ALL_TENANTS),
					  CITUS_EXPIRED_SESSIONS_SQL(ONE_TENANT), convctx_session_ttl,
					  batch > INT32_MAX - CITUS_SESSIONS_SLACK ? INT32_MAX : batch + CITUS_SESSIONS_SLACK,
					  tenant, &c);
	/* as many as the batch of turns can empty, the one that crosses it included */
	for (i = 0; i < c.n && turns < batch; i++)
	{
		text	   *t = DatumGetTextPP(CANDIDATE(&c, i, 0));
		text	   *s = DatumGetTextPP(CANDIDATE(&c, i, 1));
		Oid			locktypes[3] = {TEXTOID, TEXTOID, INT4OID};
		Datum		lockvalues[3] = {PointerGetDatum(t), PointerGetDatum(s),
		Int32GetDatum(convctx_session_ttl)};
		Oid			deltypes[3] = {TEXTOID, TEXTOID, INT8OID};
		Datum		delvalues[3] = {PointerGetDatum(t), PointerGetDatum(s), Int64GetDatum(budget)};
		int64		deleted;
		int64		last_turn_no = 0;

		SpiRunPlan(SpiKeptPlan(&citus_session_lock_plan, CITUS_SESSION_LOCK_SQL, 3, locktypes),
				   lockvalues, NULL, false, 0, SPI_OK_SELECT);
		SPI_freetuptable(SPI_tuptable);
		if (SPI_processed == 0)
			continue;			/* busy, or no longer expired or anonymous */
		turns += Max(DatumGetInt64(CANDIDATE(&c, i, 2)), 1);
		SpiRunPlan(SpiKeptPlan(&citus_session_turns_delete_plan, CITUS_SESSION_TURNS_DELETE_SQL,
							   3, deltypes),
				   delvalues, NULL, false, 0, SPI_OK_SELECT);
		deleted = SpiFirstInt8();
		SPI_freetuptable(SPI_tuptable);
		budget -= deleted;
		PurgeTenantCount(tenants, t, offsetof(PurgeCounts, anonymous_turns), deleted);
		if (PurgeSessionRun(&citus_session_delete_plan, CITUS_SESSION_DELETE_SQL, t, s,
							SPI_OK_DELETE_RETURNING, &last_turn_no) == 0)
			continue;			/* turns left for the next pass */
		PurgeTenantCount(tenants, t, offsetof(PurgeCounts, anonymous_sessions), 1);
		PurgeSessionRun(&citus_session_summary_delete_plan, CITUS_SESSION_SUMMARY_DELETE_SQL,
						t, s, SPI_OK_DELETE, NULL);
		PurgeSessionRun(&citus_session_retrievals_delete_plan, CITUS_SESSION_RETRIEVALS_DELETE_SQL,
						t, s, SPI_OK_DELETE, NULL);
		PurgeSessionRun(&citus_session_clarifications_delete_plan,
						CITUS_SESSION_CLARIFICATIONS_DELETE_SQL, t, s, SPI_OK_DELETE, NULL);
		/* as EMPTIED_SESSIONS_SQL: the context of a session that never had a turn stays */
		if (last_turn_no > 0)
			PurgeTenantCount(tenants, t, offsetof(PurgeCounts, contexts),
							 (int64) PurgeSessionRun(&citus_session_context_delete_plan,
													 CITUS_SESSION_CONTEXT_DELETE_SQL, t, s,
													 SPI_OK_DELETE, NULL));
	}
}

/* The turn-retention pass on Citus: the oldest turns, a session at a time. */
static void
PurgeExpiredTurnsDistributed(int32 batch, text *tenant, HTAB *tenants)
{
	PurgeCandidates c;
	int			i = 0;

	PurgeCandidatesOf(citus_expired_turns_plan, CITUS_EXPIRED_TURNS_SQL(ALL_TENANTS),
					  CITUS_EXPIRED_TURNS_SQL(ONE_TENANT), convctx_turn_retention, batch,
					  tenant, &c);
	while (i < c.n)
	{
		text	   *t = DatumGetTextPP(CANDIDATE(&c, i, 0));
		text	   *s = DatumGetTextPP(CANDIDATE(&c, i, 1));
		Oid			deltypes[3] = {TEXTOID, TEXTOID, UUIDARRAYOID};
		Datum		delvalues[3] = {PointerGetDatum(t), PointerGetDatum(s),
		PurgeCandidatesGroup(&c, &i, 2, 2)};

		/* a session another transaction holds is left for the next pass */
		if (PurgeSessionRun(&citus_session_try_lock_plan, CITUS_SESSION_TRY_LOCK_SQL,
							t, s, SPI_OK_SELECT, NULL) > 0)
		{
			SpiRunPlan(SpiKeptPlan(&citus_session_old_turns_plan, CITUS_SESSION_OLD_TURNS_SQL, 3,
								   deltypes),
					   delvalues, NULL, false, 0, SPI_OK_SELECT);
			PurgeTenantCount(tenants, t, offsetof(PurgeCounts, expired_turns), SpiFirstInt8());
			SPI_freetuptable(SPI_tuptable);
		}
		pfree(DatumGetPointer(delvalues[2]));
	}
}

/* The context pass on Citus: expired contexts, one at a time. */
static void
PurgeExpiredContextsDistributed(int32 batch, text *tenant, HTAB *tenants)
{
	PurgeCandidates c;
	int			i;

	PurgeCandidatesOf(citus_expired_contexts_plan, CITUS_EXPIRED_CONTEXTS_SQL(ALL_TENANTS),
					  CITUS_EXPIRED_CONTEXTS_SQL(ONE_TENANT), convctx_context_ttl, batch,
					  tenant, &c);
	for (i = 0; i < c.n; i++)
	{
		Oid			deltypes[3] = {TEXTOID, TEXTOID, INT4OID};
		Datum		delvalues[3] = {CANDIDATE(&c, i, 0), CANDIDATE(&c, i, 1),
		Int32GetDatum(convctx_context_ttl)};

		SpiRunPlan(SpiKeptPlan(&citus_context_expired_delete_plan,
							   CITUS_CONTEXT_EXPIRED_DELETE_SQL, 3, deltypes),
				   delvalues, NULL, false, 0, SPI_OK_DELETE);
		PurgeTenantCount(tenants, DatumGetTextPP(CANDIDATE(&c, i, 0)),
						 offsetof(PurgeCounts, contexts), (int64) SPI_processed);
		SPI_freetuptable(SPI_tuptable);
	}
}

/* The audit pass on Citus: the oldest rows, a tenant at a time. */
static void
PurgeExpiredAuditDistributed(int32 batch, text *tenant, HTAB *tenants)
{
	PurgeCandidates c;
	int			i = 0;

	PurgeCandidatesOf(citus_expired_audit_plan, CITUS_EXPIRED_AUDIT_SQL(ALL_TENANTS),
					  CITUS_EXPIRED_AUDIT_SQL(ONE_TENANT), convctx_audit_retention, batch,
					  tenant, &c);
	while (i < c.n)
	{
		text	   *t = DatumGetTextPP(CANDIDATE(&c, i, 0));
		Oid			deltypes[2] = {TEXTOID, UUIDARRAYOID};
		Datum		delvalues[2] = {PointerGetDatum(t), PurgeCandidatesGroup(&c, &i, 1, 1)};

		SpiRunPlan(SpiKeptPlan(&citus_audit_delete_plan, CITUS_AUDIT_DELETE_SQL, 2, deltypes),
				   delvalues, NULL, false, 0, SPI_OK_DELETE);
		PurgeTenantCount(tenants, t, offsetof(PurgeCounts, audit_rows), (int64) SPI_processed);
	}
}

/*
 * The most of each kind one pass takes on Citus. A pass there handles a
 * session at a time, a round trip or more each, and holds the lock of every
 * session it took until its transaction ends: purge_all, which commits
 * every pass, keeps those locks short, and a pass's memory stays small.
 */
#define CITUS_PURGE_BATCH_MAX 500

/* PurgeOnce (purge.c) on Citus. */
void
PurgeOnceDistributed(int32 batch, text *tenant, HTAB *tenants)
{
	batch = Min(batch, CITUS_PURGE_BATCH_MAX);
	if (convctx_session_ttl > 0)
		PurgeExpiredSessionsDistributed(batch, tenant, tenants);
	if (convctx_turn_retention > 0)
		PurgeExpiredTurnsDistributed(batch, tenant, tenants);
	if (convctx_context_ttl > 0)
		PurgeExpiredContextsDistributed(batch, tenant, tenants);
	if (convctx_audit_retention > 0)
		PurgeExpiredAuditDistributed(batch, tenant, tenants);
}
