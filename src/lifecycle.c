/*-------------------------------------------------------------------------
 *
 * lifecycle.c
 *	  Redaction, erasure and retention: redact_turn, redact_session,
 *	  erase_identity, retention_settings, purge and purge_all; the trigger
 *	  that deletes what belongs to a deleted session.
 *
 * Concurrency rules (the lock order itself is in docs/locking.md):
 *	- Redaction takes the session row's lock first, like start_turn and
 *	  replace_turn, then clears text with a statement that starts after the
 *	  lock is granted: it sees every turn and version committed before it,
 *	  and none can be added to the session until it commits. A finalize that
 *	  races it waits on the turn's row lock and then finds a tombstone, so no
 *	  text ever comes back.
 *	- erase_identity locks the sessions linked to the identity and the
 *	  sessions of the contexts saved with it, strictly in session_id order
 *	  (EraseLockSessions looks them up again after each lock and, when a new
 *	  one sorts before one it holds, gives its locks back and starts over;
 *	  after three times it leaves such a newcomer alone, never locking out
 *	  of order),
 *	  and then erases exactly the set it locked, never looking the links up
 *	  again: a turn of any of them either committed before the lock (and is
 *	  erased) or waits for the erasure to commit. A session linked after the
 *	  last lookup is linked after the erasure.
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
 * Copyright (c) 2026, the convctx authors
 *
 * src/lifecycle.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "convctx.h"
#include "args.h"
#include "audit.h"
#include "citus.h"
#include "idmap.h"
#include "jsonb_util.h"
#include "metadata.h"
#include "prompt_state.h"
#include "settings.h"
#include "spi_util.h"
#include "tenancy.h"
#include "turns.h"

static SPIPlanPtr title_clear_plan = NULL;
static SPIPlanPtr redact_turn_plan = NULL;
static SPIPlanPtr turn_exists_plan = NULL;
static SPIPlanPtr redact_session_plan = NULL;
static SPIPlanPtr redaction_lock_plan = NULL;
static SPIPlanPtr erase_find_plan = NULL;
static SPIPlanPtr erase_lock_plan = NULL;
static SPIPlanPtr erase_lock_one_plan = NULL;
static SPIPlanPtr erase_sessions_plan = NULL;
static SPIPlanPtr erase_links_plan = NULL;
static SPIPlanPtr erase_turns_plan = NULL;
static SPIPlanPtr erase_tombstones_plan = NULL;
static SPIPlanPtr erase_contexts_plan = NULL;
static SPIPlanPtr erase_audit_plan = NULL;
static SPIPlanPtr expired_session_turns_plan = NULL;
static SPIPlanPtr emptied_sessions_plan = NULL;

/* The passes of one kind: [0] for every tenant, [1] for one. */
static SPIPlanPtr expired_sessions_plan[2] = {NULL, NULL};
static SPIPlanPtr expired_turns_plan[2] = {NULL, NULL};
static SPIPlanPtr expired_contexts_plan[2] = {NULL, NULL};
static SPIPlanPtr expired_audit_plan[2] = {NULL, NULL};

/*
 * SQL fragment: subtract from a session's counts the live current-version
 * turns (and their answers) among a CTE "d" of redacted rows (all of them
 * live before), d returning replaced_by_turn_id and finalized_at.
 */
#define SESSION_COUNTS_MINUS_REDACTED \
	" live_turns = live_turns OPERATOR(pg_catalog.-) (SELECT pg_catalog.count(*) FROM d" \
	"     WHERE d.replaced_by_turn_id IS NULL)," \
	" live_answers = live_answers OPERATOR(pg_catalog.-) (SELECT pg_catalog.count(*) FROM d" \
	"     WHERE d.replaced_by_turn_id IS NULL AND d.finalized_at IS NOT NULL)"

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
 * What a tombstone keeps: ids, request_id, timestamps, versions, and the
 * redaction generation that made it (gen: the parameter holding it), by
 * which set_summary recognises a summary made before it.
 */
#define TOMBSTONE_SET(gen) \
	" SET question_neutral = NULL, answer_neutral = NULL," \
	"     question_translated = NULL, answer_translated = NULL, metadata = NULL," \
	"     deleted_at = pg_catalog.statement_timestamp(), redaction = " gen

/*
 * Lock a session's row, as every writer of its turns does, and bump its
 * redaction generation; returns the new one.
 */
#define REDACTION_LOCK_SQL \
	"UPDATE convctx.session SET redactions = redactions OPERATOR(pg_catalog.+) 1" \
	" WHERE " SESSION_KEY \
	" RETURNING redactions"

#define REDACT_TURN_SQL \
	"WITH d AS (UPDATE convctx.turn" TOMBSTONE_SET("$4") \
	"  WHERE " SESSION_KEY \
	"    AND deleted_at IS NULL" \
	"    AND turn_no OPERATOR(pg_catalog.=) (SELECT turn_no FROM convctx.turn" \
	"         WHERE " SESSION_KEY \
	"           AND turn_id OPERATOR(pg_catalog.=) $3)" \
	"  RETURNING turn_no, replaced_by_turn_id, finalized_at)," \
	" s AS (UPDATE convctx.session SET" SESSION_COUNTS_MINUS_REDACTED "," \
	"       first_question = " FIRST_LIVE_QUESTION("$1", "$2", \
	"     AND q.turn_no OPERATOR(pg_catalog.<>) ALL (ARRAY(SELECT d.turn_no FROM d))") \
	"  WHERE " SESSION_KEY \
	"    AND EXISTS (SELECT 1 FROM d))" \
	" SELECT pg_catalog.count(*), pg_catalog.max(turn_no) FROM d"

#define TURN_EXISTS_SQL \
	"SELECT 1 FROM convctx.turn" \
	" WHERE " SESSION_KEY \
	"   AND turn_id OPERATOR(pg_catalog.=) $3"

#define TITLE_CLEAR_SQL \
	"UPDATE convctx.session SET title = NULL WHERE " SESSION_KEY " AND title IS NOT NULL"

#define REDACT_SESSION_SQL \
	"WITH d AS (UPDATE convctx.turn" TOMBSTONE_SET("$3") \
	"  WHERE " SESSION_KEY \
	"    AND deleted_at IS NULL RETURNING turn_no, replaced_by_turn_id, finalized_at)," \
	" s AS (UPDATE convctx.session SET" SESSION_COUNTS_MINUS_REDACTED ", first_question = NULL" \
	"  WHERE " SESSION_KEY \
	"    AND EXISTS (SELECT 1 FROM d))" \
	" SELECT pg_catalog.count(DISTINCT turn_no) FROM d"

/*
 * erase_identity. $1 is the tenant, $2 the identities to look for (the
 * identity, and the keyed stand-ins of an earlier erasure of it), $3 the
 * identity: the sessions linked to them and the sessions whose context
 * was saved with the identity as user_id (the contexts are deleted below,
 * and a context row is locked only under its session's lock), in
 * session_id order, each with whether it is linked. Locks nothing.
 * Whether a row is linked is an IN (subquery), looked up in a hash table:
 * "= ANY (array)" outside an index condition compares with every element,
 * which made an erasure quadratic in the identity's sessions.
 */
#define ERASE_FIND_SQL \
	"WITH l AS (SELECT session_id FROM convctx.session_link" \
	"            WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"              AND identity_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]))," \
	" c AS (SELECT conversation_id FROM convctx.conversation_context" \
	"        WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND user_id OPERATOR(pg_catalog.=) $3)" \
	"SELECT s.session_id, s.session_id IN (SELECT session_id FROM l)" \
	"  FROM convctx.session s" \
	" WHERE s.tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND (s.session_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT session_id FROM l))" \
	"        OR s.session_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT conversation_id FROM c)))" \
	" ORDER BY s.session_id"

/* Lock the sessions $2 of tenant $1 in session_id order. */
#define ERASE_LOCK_SQL \
	"SELECT session_id FROM convctx.session" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])" \
	" ORDER BY session_id FOR UPDATE"

/* The same for one session, $2 (on Citus). */
#define ERASE_LOCK_ONE_SQL \
	"SELECT session_id FROM convctx.session WHERE " SESSION_KEY " FOR UPDATE"

/*
 * The statements below act on $2, the sessions locked, and never look the
 * links up again; $3 is what the identity becomes. Each statement handles
 * the whole set at once, one index probe per session. The sessions stay
 * linked (to the stand-in: not capped, not expired, and linking them to
 * any identity is refused), with a new redaction generation, no live turn
 * left (ERASE_TURNS_SQL makes every one a tombstone) and no summary
 * (PromptForgetSessions).
 */
#define ERASE_SESSIONS_SQL \
	"UPDATE convctx.session SET redactions = redactions OPERATOR(pg_catalog.+) 1, identity_id = $3," \
	"       title = NULL, first_question = NULL, live_turns = 0, live_answers = 0," \
	"       summary_through_turn_no = NULL" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])"

#define ERASE_LINKS_SQL \
	"UPDATE convctx.session_link SET identity_id = $3" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])"

/* Every live turn becomes a tombstone; returns how many turns (not versions). */
#define ERASE_TURNS_SQL \
	"WITH r AS (UPDATE convctx.turn t" TOMBSTONE_SET("s.redactions") "," \
	"         identity_id = CASE WHEN t.identity_id IS NULL THEN NULL ELSE $3 END" \
	"  FROM convctx.session s" \
	"  WHERE s.tenant_id OPERATOR(pg_catalog.=) $1" \
	"    AND s.session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])" \
	"    AND t.tenant_id OPERATOR(pg_catalog.=) s.tenant_id" \
	"    AND t.session_id OPERATOR(pg_catalog.=) s.session_id" \
	"    AND t.deleted_at IS NULL" \
	"  RETURNING t.session_id, t.turn_no)" \
	" SELECT pg_catalog.count(*) FROM (SELECT DISTINCT session_id, turn_no FROM r) x"

/* Tombstones made before (by a redaction) name the identity too. */
#define ERASE_TOMBSTONES_SQL \
	"UPDATE convctx.turn SET identity_id = $3" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])" \
	"   AND identity_id OPERATOR(pg_catalog.<>) $3"

/*
 * The contexts of the sessions locked, and the contexts saved with the
 * identity as user_id that have no session row (stored before 0.4.0, when
 * a context did not create one); $3 is the identity (IN, not "= ANY", for
 * the reason given at ERASE_FIND_SQL). A context saved with
 * the identity in a session that was not locked was saved after the
 * erasure's last pass, like a session linked after it.
 */
#define ERASE_CONTEXTS_SQL \
	"DELETE FROM convctx.conversation_context c" \
	" WHERE c.tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND (c.conversation_id IN (SELECT pg_catalog.unnest($2::pg_catalog.text[]))" \
	"        OR (c.user_id OPERATOR(pg_catalog.=) $3" \
	"            AND NOT EXISTS (SELECT 1 FROM convctx.session s" \
	"                 WHERE s.tenant_id OPERATOR(pg_catalog.=) c.tenant_id" \
	"                   AND s.session_id OPERATOR(pg_catalog.=) c.conversation_id)))"

/*
 * The audit rows that name the identity ($2), in identity_id or as one of
 * the identities of a refused link in details (AUDIT_IDENTITY_KEYS), name
 * the stand-in ($3) instead. Other values of details (a turn id, a role
 * name) are left alone, whatever they equal.
 */
#define AUDIT_IDENTITY_KEYS \
	" '{linked_identity_id,requested_identity_id}'::pg_catalog.text[]"
#define AUDIT_NAMES_IDENTITY(e) \
	" (" e ".key OPERATOR(pg_catalog.=) ANY (" AUDIT_IDENTITY_KEYS ")" \
	"  AND " e ".value OPERATOR(pg_catalog.=) pg_catalog.to_jsonb($2::pg_catalog.text))"
#define ERASE_AUDIT_SQL \
	"UPDATE convctx.audit_log a" \
	"   SET identity_id = CASE WHEN a.identity_id OPERATOR(pg_catalog.=) $2 THEN $3" \
	"                          ELSE a.identity_id END," \
	"       details = CASE WHEN pg_catalog.jsonb_typeof(a.details) OPERATOR(pg_catalog.=) 'object'" \
	"         THEN COALESCE((SELECT pg_catalog.jsonb_object_agg(e.key," \
	"                 CASE WHEN" AUDIT_NAMES_IDENTITY("e") \
	"                      THEN pg_catalog.to_jsonb($3::pg_catalog.text) ELSE e.value END)" \
	"               FROM pg_catalog.jsonb_each(a.details) e), '{}'::pg_catalog.jsonb)" \
	"         ELSE a.details END" \
	" WHERE a.tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND (a.identity_id OPERATOR(pg_catalog.=) $2" \
	"        OR (pg_catalog.jsonb_typeof(a.details) OPERATOR(pg_catalog.=) 'object'" \
	"            AND EXISTS (SELECT 1 FROM pg_catalog.jsonb_each(a.details) e" \
	"                         WHERE" AUDIT_NAMES_IDENTITY("e") ")))"

/*
 * The passes below take $1 an age in seconds, $2 the batch and $3 the one
 * tenant to purge. Each comes in two kept plans, for every tenant
 * (ALL_TENANTS, $3 unused) and for one (ONE_TENANT), each walking an index
 * of its own in the order rows expired, so that a pass reads about as many
 * rows as it deletes however large the tables are: a single plan with
 * "$3 IS NULL OR tenant_id = $3" can use neither index.
 *
 * Sessions and contexts are found by activity_bin and updated_bin, their
 * last activity rounded down to 10 minutes (generated columns, indexed
 * instead of the exact times so that the updates of every turn stay HOT):
 * a bin before the cutoff holds every row that expired and, in the last
 * bin, some that did not yet, which the exact time rechecked rules out.
 * Only the last pass of a run reaches that bin.
 */
#define CUTOFF \
	" (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => $1))"

/*
 * The expiry condition on column col (indexed alone and after tenant_id).
 * For one tenant it is a row comparison, which only the index led by
 * tenant_id can take as a bound: written as "tenant_id = $3 AND col <
 * cutoff", a generic plan is as likely to walk the index of every tenant,
 * reading every other tenant's expired rows to find this one's.
 */
#define ALL_TENANTS(col) " AND " col " OPERATOR(pg_catalog.<)" CUTOFF
#define ONE_TENANT(col) \
	" AND tenant_id OPERATOR(pg_catalog.=) $3" \
	" AND (tenant_id, " col ") OPERATOR(pg_catalog.<)" \
	"     ($3::pg_catalog.text COLLATE pg_catalog.\"C\"," CUTOFF ")"

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

/*
 * Lock the session's row and bump its redaction generation; false when
 * the session does not exist, else true with the new generation in
 * *generation. SPI must be connected.
 */
static bool
RedactionLock(text *tenant, text *session_id, int64 *generation)
{
	SpiRunSessionPlan(&redaction_lock_plan, REDACTION_LOCK_SQL, tenant, session_id,
					  false, 0, SPI_OK_UPDATE_RETURNING);
	*generation = SPI_processed > 0 ? SpiFirstInt8() : 0;
	return SPI_processed > 0;
}

/*
 * What an erased identity becomes wherever it was stored: "erased:" and
 * the hex HMAC-SHA256 under convctx.identity_hash_key of the tenant id, a
 * zero byte and the identity (a text holds no zero byte, so no two pairs
 * give the same input), so that the audit trail can still tell one erased
 * identity from another (and a later erasure of the same identity finds
 * it); without a key, the same marker "erased" for every identity. The
 * tenant is part of it so that an administrator of one tenant cannot
 * confirm a guess about another tenant's identities by erasing the guess
 * in their own tenant and comparing stand-ins.
 */
text *
ErasedIdentity(text *tenant, text *identity_id)
{
	StringInfoData data;

	if (convctx_identity_hash_key == NULL || convctx_identity_hash_key[0] == '\0')
		return cstring_to_text("erased");
	initStringInfo(&data);
	appendBinaryStringInfo(&data, VARDATA_ANY(tenant), VARSIZE_ANY_EXHDR(tenant));
	appendStringInfoChar(&data, '\0');
	appendBinaryStringInfo(&data, VARDATA_ANY(identity_id), VARSIZE_ANY_EXHDR(identity_id));
	return cstring_to_text(psprintf("erased:%s",
									KeyedHashHex(convctx_identity_hash_key, data.data, data.len)));
}

/*
 * The stand-in erasures wrote before 0.5.0, the same in every tenant: the
 * HMAC of the identity alone. Only looked for, never written. NULL without
 * a key.
 */
text *
LegacyErasedIdentity(text *identity_id)
{
	if (convctx_identity_hash_key == NULL || convctx_identity_hash_key[0] == '\0')
		return NULL;
	return cstring_to_text(psprintf("erased:%s",
									KeyedHashHex(convctx_identity_hash_key,
												 VARDATA_ANY(identity_id),
												 VARSIZE_ANY_EXHDR(identity_id))));
}

PG_FUNCTION_INFO_V1(convctx_erased_identity_for_update);

/*
 * erased_identity_0_5(tenant, identity_id) -> text: ErasedIdentity, for
 * the update to 0.5.0 alone, which creates the function, finishes with it
 * the erasures made before 0.3.0 and drops it again. Callable only from an
 * extension script: whoever could call it could confirm a guess of an
 * erased identity by comparing stand-ins.
 */
Datum
convctx_erased_identity_for_update(PG_FUNCTION_ARGS)
{
	if (!creating_extension)
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("only ALTER EXTENSION convctx UPDATE may compute an erased identity's stand-in"));
	PG_RETURN_TEXT_P(ErasedIdentity(PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1)));
}

/* Is identity the stand-in erase_identity leaves ("erased", "erased:<hex>")? */
bool
IsErasedIdentity(text *identity)
{
	int			len = VARSIZE_ANY_EXHDR(identity);
	const char *s = VARDATA_ANY(identity);

	return (len == 6 && memcmp(s, "erased", 6) == 0) || (len > 7 && memcmp(s, "erased:", 7) == 0);
}

/*
 * Tombstone every version of a turn of the session under the redaction
 * lock, clear the session's title, forget what the prompt functions
 * recorded for the turn, and audit the call (with whether a title was
 * cleared); false when it was redacted already. P0002 when the session has
 * no such turn.
 */
static bool
RedactTurn(text *tenant, text *session_id, pg_uuid_t *turn_id)
{
	Oid			argtypes[4] = {TEXTOID, TEXTOID, UUIDOID, INT8OID};
	Datum		values[4] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	UUIDPGetDatum(turn_id), (Datum) 0};
	int64		versions;
	int64		generation;
	bool		title_cleared;
	JsonbParseState *details = NULL;
	char	   *id = UuidString(turn_id);

	SPI_connect();
	(void) RedactionLock(tenant, session_id, &generation);

	/*
	 * The app's title too: it may quote the turn (an app often titles a
	 * conversation with its first question), and nothing tells whether it
	 * does. The list shows the default, the first live question, instead.
	 */
	SpiRunSessionPlan(&title_clear_plan, TITLE_CLEAR_SQL, tenant, session_id,
					  false, 0, SPI_OK_UPDATE);
	title_cleared = SPI_processed > 0;
	values[3] = Int64GetDatum(generation);
	SpiRunPlan(SpiKeptPlan(&redact_turn_plan, REDACT_TURN_SQL, 4, argtypes),
			   values, NULL, false, 0, SPI_OK_SELECT);
	versions = SpiFirstInt8();
	if (versions > 0)
	{
		bool		isnull;
		int64		turn_no = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
														  SPI_tuptable->tupdesc, 2, &isnull));

		PromptForget(tenant, session_id, turn_no);
	}
	else
	{
		SpiRunPlan(SpiKeptPlan(&turn_exists_plan, TURN_EXISTS_SQL, 3, argtypes),
				   values, NULL, false, 1, SPI_OK_SELECT);
		if (SPI_processed == 0)
			ReportTurnNotFound(turn_id, session_id);
	}
	pushJsonbValue(&details, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(&details, "turn_id");
	JsonbPushString(&details, WJB_VALUE, id, strlen(id));
	JsonbPushKey(&details, "versions");
	JsonbPushInt(&details, WJB_VALUE, versions);
	JsonbPushKey(&details, "title_cleared");
	JsonbPushBool(&details, WJB_VALUE, title_cleared);
	AuditWrite(tenant, "redact_turn", session_id, NULL, JsonbEndObjectText(&details));
	SPI_finish();
	return versions > 0;
}

/*
 * Tombstone every turn of the session under the redaction lock, forget
 * what the prompt functions recorded, audit the call, and return how many
 * turns were redacted (0 for a session that does not exist).
 */
static int64
RedactSession(text *tenant, text *session_id)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, INT8OID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id), (Datum) 0};
	int64		turns = 0;
	int64		generation;
	bool		title_cleared = false;
	JsonbParseState *details = NULL;

	SPI_connect();
	if (RedactionLock(tenant, session_id, &generation))
	{
		/* the app's title too, also when no turn was left to redact */
		SpiRunSessionPlan(&title_clear_plan, TITLE_CLEAR_SQL, tenant, session_id,
						  false, 0, SPI_OK_UPDATE);
		title_cleared = SPI_processed > 0;
		values[2] = Int64GetDatum(generation);
		SpiRunPlan(SpiKeptPlan(&redact_session_plan, REDACT_SESSION_SQL, 3, argtypes),
				   values, NULL, false, 0, SPI_OK_SELECT);
		turns = SpiFirstInt8();
		PromptForget(tenant, session_id, 0);
	}
	pushJsonbValue(&details, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(&details, "turns");
	JsonbPushInt(&details, WJB_VALUE, turns);
	JsonbPushKey(&details, "title_cleared");
	JsonbPushBool(&details, WJB_VALUE, title_cleared);
	AuditWrite(tenant, "redact_session", session_id, NULL, JsonbEndObjectText(&details));
	SPI_finish();
	return turns;
}

PG_FUNCTION_INFO_V1(convctx_redact_turn);

/*
 * redact_turn(session_id, turn_id) -> boolean
 */
Datum
convctx_redact_turn(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(redact_turn);
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	pg_uuid_t  *turn_id = ArgTurnId(fcinfo, 1);

	PG_RETURN_BOOL(RedactTurn(CurrentTenant(), session_id, turn_id));
}

PG_FUNCTION_INFO_V1(convctx_redact_session);

/*
 * redact_session(session_id) -> bigint
 */
Datum
convctx_redact_session(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(redact_session);
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");

	PG_RETURN_INT64(RedactSession(CurrentTenant(), session_id));
}

/* Order of session ids (COLLATE "C": bytes, then length). */
static int
SessionIdCmp(text *a, text *b)
{
	int			la = VARSIZE_ANY_EXHDR(a);
	int			lb = VARSIZE_ANY_EXHDR(b);
	int			c = memcmp(VARDATA_ANY(a), VARDATA_ANY(b), Min(la, lb));

	return c != 0 ? c : (la > lb) - (la < lb);
}

/* A session id of the SPI tuple table, copied into cxt. */
static text *
SessionIdCopy(int row, MemoryContext cxt)
{
	bool		isnull;
	text	   *id = DatumGetTextPP(SPI_getbinval(SPI_tuptable->vals[row],
												  SPI_tuptable->tupdesc, 1, &isnull));
	text	   *copy = (text *) MemoryContextAlloc(cxt, VARSIZE_ANY(id));

	memcpy(copy, id, VARSIZE_ANY(id));
	return copy;
}

/* Add the session id, locked, to the map held and raise *max_held. */
static void
EraseHeld(text *id, idmap_hash *held, text **max_held)
{
	bool		found;

	(void) IdMapInsert(held, VARDATA_ANY(id), VARSIZE_ANY_EXHDR(id), &found);
	if (*max_held == NULL || SessionIdCmp(id, *max_held) > 0)
		*max_held = id;
}

/*
 * Lock the sessions ids[0..n-1] (sorted), adding those locked to the map
 * held and raising *max_held. SPI must be connected.
 */
static void
EraseLockSome(text *tenant, text **ids, int n, idmap_hash *held, text **max_held,
			  MemoryContext cxt)
{
	Oid			argtypes[2] = {TEXTOID, TEXTARRAYOID};
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	Datum		values[2];
	uint64		i;
	int			j;

	/*
	 * Citus cannot lock rows of several shards in one statement: one
	 * session at a time, in the same order.
	 */
	if (ConvctxDistributed())
	{
		for (j = 0; j < n; j++)
		{
			SpiRunSessionPlan(&erase_lock_one_plan, ERASE_LOCK_ONE_SQL, tenant, ids[j],
							  false, 0, SPI_OK_SELECT);
			if (SPI_processed > 0)
				EraseHeld(SessionIdCopy(0, cxt), held, max_held);
		}
		return;
	}
	for (j = 0; j < n; j++)
		elems[j] = PointerGetDatum(ids[j]);
	values[0] = PointerGetDatum(tenant);
	values[1] = PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
	SpiRunPlan(SpiKeptPlan(&erase_lock_plan, ERASE_LOCK_SQL, 2, argtypes),
			   values, NULL, false, 0, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
		EraseHeld(SessionIdCopy(i, cxt), held, max_held);
}

/* How often erase_identity starts its locking over in session_id order. */
#define ERASE_MAX_RESTARTS 3

/*
 * Lock the sessions of an identity in the tenant (ERASE_FIND_SQL), always
 * in session_id order, so that two erasures, or an erasure and any
 * transaction that follows the lock order, never deadlock. A link or
 * context committed while the erasure waited for a lock is invisible to
 * the statement that waited, so the sessions are looked up again after
 * every lock, until a lookup finds none that it may still lock; the
 * sessions of that last lookup that are held are the set erased (a
 * context may change hands meanwhile, so the set can also shrink).
 * New sessions that sort after every session held are simply locked next;
 * when one sorts before, locking it now would break the order, so every
 * lock is given back (the locks live in a subtransaction, rolled back)
 * and the whole set is locked again in order, at most ERASE_MAX_RESTARTS
 * times; after that such a session is left alone, as linked after the
 * erasure. No lock is ever taken out of order. Returns the session ids as
 * a text[] Datum in the caller's context, sets *linked to those linked to
 * the identity (whose turns are erased; the others only lose their
 * context) and *nlinked_out to their number. SPI must be connected.
 */
static Datum
EraseLockSessions(text *tenant, Datum identities, text *identity_id,
				  Datum *linked, uint64 *nlinked_out)
{
	Oid			argtypes[3] = {TEXTOID, TEXTARRAYOID, TEXTOID};
	Datum		values[3] = {PointerGetDatum(tenant), identities, PointerGetDatum(identity_id)};
	SPIPlanPtr	plan = SpiKeptPlan(&erase_find_plan, ERASE_FIND_SQL, 3, argtypes);
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	idmap_hash *held = idmap_create(cxt, 16, NULL);
	text	   *max_held = NULL;
	text	  **ids = NULL;
	bool	   *is_linked = NULL;
	int			n = 0;
	Datum	   *all;
	Datum	   *linked_ids;
	int			nlinked = 0;
	int			nall = 0;
	int			i;
	int			restarts = 0;
	volatile bool in_subxact;

	BeginInternalSubTransaction(NULL);
	in_subxact = true;
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		for (;;)
		{
			int			first_new = -1;
			bool		in_order = true;

			SpiRunPlan(plan, values, NULL, false, 0, SPI_OK_SELECT);
			n = (int) SPI_processed;
			ids = palloc(sizeof(text *) * Max(n, 1));
			is_linked = palloc(sizeof(bool) * Max(n, 1));
			for (i = 0; i < n; i++)
			{
				bool		isnull;

				ids[i] = SessionIdCopy(i, cxt);
				is_linked[i] = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i],
														  SPI_tuptable->tupdesc, 2, &isnull));
			}
			/* Sorted: the first session not held is the smallest new one. */
			for (i = 0; i < n && first_new < 0; i++)
				if (IdMapLookup(held, VARDATA_ANY(ids[i]), VARSIZE_ANY_EXHDR(ids[i])) == NULL)
					first_new = i;
			if (first_new < 0)
				break;
			/*
			 * A session sorting before one held means starting over in
			 * order; a few times at most, so that sessions created while it
			 * waits cannot keep the erasure from finishing. Past that, such
			 * a session is left alone, as one linked after the erasure
			 * (it was linked or given a context while the erasure ran): a
			 * lock taken out of order could close a cycle with any
			 * transaction that locks sessions in order, another erasure
			 * first. The newcomers that sort after every session held are
			 * still locked.
			 */
			if (max_held != NULL && SessionIdCmp(ids[first_new], max_held) < 0)
			{
				if (restarts < ERASE_MAX_RESTARTS)
					in_order = false;
				else
				{
					while (first_new < n && SessionIdCmp(ids[first_new], max_held) <= 0)
						first_new++;
					if (first_new == n)
						break;
				}
			}

			if (in_order)
				EraseLockSome(tenant, ids + first_new, n - first_new, held, &max_held, cxt);
			else
			{
				/* Give every lock back, then take them all in order. */
				restarts++;
				in_subxact = false;
				RollbackAndReleaseCurrentSubTransaction();
				MemoryContextSwitchTo(cxt);
				CurrentResourceOwner = owner;
				BeginInternalSubTransaction(NULL);
				in_subxact = true;
				MemoryContextSwitchTo(cxt);
				idmap_reset(held);
				max_held = NULL;
				EraseLockSome(tenant, ids, n, held, &max_held, cxt);
			}
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		/* Leave no subtransaction behind for the caller's handler to meet. */
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		if (in_subxact)
			RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ReThrowError(edata);
	}
	PG_END_TRY();
	/* The locks now belong to the caller's transaction. */
	ReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;

	/* The sessions of the last lookup that are held: the ones left alone are not. */
	all = palloc(sizeof(Datum) * Max(n, 1));
	linked_ids = palloc(sizeof(Datum) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		if (IdMapLookup(held, VARDATA_ANY(ids[i]), VARSIZE_ANY_EXHDR(ids[i])) == NULL)
			continue;
		all[nall++] = PointerGetDatum(ids[i]);
		if (is_linked[i])
			linked_ids[nlinked++] = PointerGetDatum(ids[i]);
	}
	*linked = PointerGetDatum(construct_array(linked_ids, nlinked, TEXTOID, -1, false, TYPALIGN_INT));
	*nlinked_out = nlinked;
	return PointerGetDatum(construct_array(all, nall, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * Erase the locked sessions linked to the identity (a text[] of at least
 * one): the sessions and links name the erased stand-in, the turns become
 * tombstones, the prompt data goes. Returns how many turns became
 * tombstones. SPI must be connected.
 */
static int64
EraseLinkedSessions(text *tenant, Datum sessions, text *erased)
{
	Oid			argtypes[3] = {TEXTOID, TEXTARRAYOID, TEXTOID};
	Datum		values[3] = {PointerGetDatum(tenant), sessions, PointerGetDatum(erased)};
	int64		turns;

	SpiRunPlan(SpiKeptPlan(&erase_sessions_plan, ERASE_SESSIONS_SQL, 3, argtypes),
			   values, NULL, false, 0, SPI_OK_UPDATE);
	SpiRunPlan(SpiKeptPlan(&erase_turns_plan, ERASE_TURNS_SQL, 3, argtypes),
			   values, NULL, false, 0, SPI_OK_SELECT);
	turns = SpiFirstInt8();
	SpiRunPlan(SpiKeptPlan(&erase_tombstones_plan, ERASE_TOMBSTONES_SQL, 3, argtypes),
			   values, NULL, false, 0, SPI_OK_UPDATE);
	SpiRunPlan(SpiKeptPlan(&erase_links_plan, ERASE_LINKS_SQL, 3, argtypes),
			   values, NULL, false, 0, SPI_OK_UPDATE);
	PromptForgetSessions(tenant, sessions);
	return turns;
}

/*
 * Erase an identity (erase_identity): lock its sessions, erase them, drop
 * the contexts of every session locked, take the identity out of the
 * audit log and write the audit row. Returns the tombstones made.
 */
static int64
EraseIdentity(text *tenant, text *identity_id)
{
	text	   *erased = ErasedIdentity(tenant, identity_id);
	text	   *erased_before = LegacyErasedIdentity(identity_id);
	Datum		idents[3] = {PointerGetDatum(identity_id), PointerGetDatum(erased),
	PointerGetDatum(erased_before)};
	Oid			argtypes[3] = {TEXTOID, TEXTARRAYOID, TEXTOID};
	Datum		values[3];
	Oid			audit_types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		audit_values[3] = {PointerGetDatum(tenant), PointerGetDatum(identity_id),
	PointerGetDatum(erased)};
	Datum		sessions;
	uint64		nsessions;
	int64		turns = 0;
	JsonbParseState *details = NULL;

	SPI_connect();

	/*
	 * The keyed stand-ins of an earlier erasure (and of one before 0.5.0)
	 * are looked for too: turns added to those sessions since are the
	 * identity's as well. The unkeyed marker is every erased identity's, so
	 * it is not.
	 */
	values[1] = EraseLockSessions(tenant,
								  PointerGetDatum(construct_array(idents, erased_before ? 3 : 1, TEXTOID,
																  -1, false, TYPALIGN_INT)),
								  identity_id, &sessions, &nsessions);
	if (nsessions > 0)
		turns = EraseLinkedSessions(tenant, sessions, erased);
	/* The contexts of every session locked, linked or not. */
	values[0] = PointerGetDatum(tenant);
	values[2] = PointerGetDatum(identity_id);
	SpiRunPlan(SpiKeptPlan(&erase_contexts_plan, ERASE_CONTEXTS_SQL, 3, argtypes),
			   values, NULL, false, 0, SPI_OK_DELETE);
	pushJsonbValue(&details, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(&details, "sessions");
	JsonbPushInt(&details, WJB_VALUE, nsessions);
	JsonbPushKey(&details, "turns");
	JsonbPushInt(&details, WJB_VALUE, turns);
	JsonbPushKey(&details, "contexts");
	JsonbPushInt(&details, WJB_VALUE, SPI_processed);
	SpiRunPlan(SpiKeptPlan(&erase_audit_plan, ERASE_AUDIT_SQL, 3, audit_types),
			   audit_values, NULL, false, 0, SPI_OK_UPDATE);
	JsonbPushKey(&details, "audit_rows");
	JsonbPushInt(&details, WJB_VALUE, SPI_processed);
	AuditWrite(tenant, "erase_identity", NULL, erased, JsonbEndObjectText(&details));
	SPI_finish();
	return turns;
}

PG_FUNCTION_INFO_V1(convctx_erase_identity);

/*
 * erase_identity(identity_id) -> bigint
 *
 * Locks the identity's sessions first (EraseLockSessions), then erases
 * exactly that set: their turns become tombstones, their prompt data and
 * contexts go, and no row keeps the identity in clear. Returns how many
 * turns became tombstones.
 */
Datum
convctx_erase_identity(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(erase_identity);
	text	   *identity_id = ArgRequiredId(fcinfo, 0, "identity_id");
	text	   *tenant = CurrentTenant();

	PG_RETURN_INT64(EraseIdentity(tenant, identity_id));
}

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

typedef struct PurgeCounts
{
	int64		anonymous_sessions;
	int64		anonymous_turns;
	int64		expired_turns;
	int64		contexts;
	int64		audit_rows;
} PurgeCounts;

/* What one purge deleted of one tenant; entries of a hash keyed by tenant. */
typedef struct PurgeTenant
{
	char		tenant[CONVCTX_MAX_ID_BYTES + 1];
	PurgeCounts c;
} PurgeTenant;

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
		char		key[CONVCTX_MAX_ID_BYTES + 1];
		char	   *tenant = SPI_getvalue(tt->vals[i], tt->tupdesc, 1);
		PurgeTenant *e;
		bool		found;
		bool		isnull;

		memset(key, 0, sizeof(key));
		strlcpy(key, tenant ? tenant : "", sizeof(key));
		e = hash_search(tenants, key, HASH_ENTER, &found);
		if (!found)
			memset(&e->c, 0, sizeof(e->c));
		*(int64 *) ((char *) &e->c + offset1) +=
			DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 2, &isnull));
		if (offset2 != (size_t) -1)
			*(int64 *) ((char *) &e->c + offset2) +=
				DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 3, &isnull));
	}
}

/*
 * On Citus (ConvctxDistributed) the passes above cannot run: a statement
 * that locks rows of several shards, or takes ctids from a subquery, is
 * refused. There each pass first reads its candidates without locks (a
 * statement over every shard, oldest first, at most the batch), then
 * handles them one session (one tenant, for the audit log) at a time with
 * statements that Citus routes to the one shard that holds it, under the
 * same row locks as the single-server passes, taken with SKIP LOCKED and
 * rechecked under the lock. A session emptied of its turns goes with every
 * row that belongs to it: on Citus no trigger does that (session_deleted
 * below).
 */
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
 * SESSION_COUNTS_ADJUST_D and SUMMARY_COVERED_ADJUST_D (SUMMARY_COVERED_ADJUST_D_ONE)
 * for the one session $1, $2 of the statement: keyed by it, so that Citus sends the updates to
 * that session's shard, not to every shard (which would also serialize
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
	bool		found;

	if (n == 0)
		return;
	memset(key, 0, sizeof(key));
	text_to_cstring_buffer(tenant, key, sizeof(key));
	e = hash_search(tenants, key, HASH_ENTER, &found);
	if (!found)
		memset(&e->c, 0, sizeof(e->c));
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

static void
PurgeCandidatesRead(SPIPlanPtr plan, Datum *values, const char *nulls, PurgeCandidates *out)
{
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext spi;
	int			i;
	int			j;

	SpiRunBulkPlan(plan, values, nulls, true, 0, SPI_OK_SELECT);
	spi = MemoryContextSwitchTo(cxt);
	out->n = (int) SPI_processed;
	out->ncols = SPI_tuptable->tupdesc->natts;
	out->values = palloc(sizeof(Datum) * Max(out->n * out->ncols, 1));
	for (i = 0; i < out->n; i++)
		for (j = 0; j < out->ncols; j++)
		{
			bool		isnull;
			Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, j);
			Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, j + 1, &isnull);

			out->values[i * out->ncols + j] = isnull ? (Datum) 0 :
				datumCopy(d, att->attbyval, att->attlen);
		}
	MemoryContextSwitchTo(spi);
}

#define CANDIDATE(c, row, col) ((c)->values[(row) * (c)->ncols + (col)])

/*
 * The candidates of a pass: plans[0] (sql_all, every tenant) or plans[1]
 * (sql_one, tenant) with $1 the setting's age in seconds, $2 limit.
 */
static void
PurgeCandidatesOf(SPIPlanPtr *plans, const char *sql_all, const char *sql_one, int age,
				  int32 limit, text *tenant, PurgeCandidates *c)
{
	Oid			argtypes[3] = {INT4OID, INT4OID, TEXTOID};
	Datum		values[3] = {Int32GetDatum(age), Int32GetDatum(limit), PointerGetDatum(tenant)};
	char		nulls[3] = {' ', ' ', tenant ? ' ' : 'n'};
	int			one = tenant ? 1 : 0;

	PurgeCandidatesRead(SpiKeptPlan(&plans[one], one ? sql_one : sql_all, 3, argtypes),
						values, nulls, c);
}

/*
 * The candidates from row *i on whose first nkeys columns equal row *i's,
 * wherever they are in the order: their column idcol into ids (room for
 * every candidate), their count returned; *i moves to the next row of
 * another group. The rows taken are marked done (first column zeroed).
 */
static int
PurgeCandidatesGroup(PurgeCandidates *c, int *i, int nkeys, int idcol, Datum *ids)
{
	int			first = *i;
	int			nids = 0;

	for (int j = first; j < c->n; j++)
	{
		bool		same = CANDIDATE(c, j, 0) != (Datum) 0;

		for (int k = 0; same && k < nkeys; k++)
			same = TextEqual(DatumGetTextPP(CANDIDATE(c, first, k)),
							 DatumGetTextPP(CANDIDATE(c, j, k)));
		if (!same)
			continue;
		ids[nids++] = CANDIDATE(c, j, idcol);
		if (j > first)
			CANDIDATE(c, j, 0) = (Datum) 0;
	}
	do
		(*i)++;
	while (*i < c->n && CANDIDATE(c, *i, 0) == (Datum) 0);
	return nids;
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
	Datum	   *ids;

	PurgeCandidatesOf(citus_expired_turns_plan, CITUS_EXPIRED_TURNS_SQL(ALL_TENANTS),
					  CITUS_EXPIRED_TURNS_SQL(ONE_TENANT), convctx_turn_retention, batch,
					  tenant, &c);
	ids = palloc(sizeof(Datum) * Max(c.n, 1));
	while (i < c.n)
	{
		text	   *t = DatumGetTextPP(CANDIDATE(&c, i, 0));
		text	   *s = DatumGetTextPP(CANDIDATE(&c, i, 1));
		int			nids = PurgeCandidatesGroup(&c, &i, 2, 2, ids);
		Oid			deltypes[3] = {TEXTOID, TEXTOID, UUIDARRAYOID};
		Datum		delvalues[3];

		if (PurgeSessionRun(&citus_session_try_lock_plan, CITUS_SESSION_TRY_LOCK_SQL,
							t, s, SPI_OK_SELECT, NULL) == 0)
			continue;			/* busy: left for the next pass */
		delvalues[0] = PointerGetDatum(t);
		delvalues[1] = PointerGetDatum(s);
		delvalues[2] = PointerGetDatum(construct_array(ids, nids, UUIDOID, UUID_LEN, false,
													   TYPALIGN_CHAR));
		SpiRunPlan(SpiKeptPlan(&citus_session_old_turns_plan, CITUS_SESSION_OLD_TURNS_SQL, 3,
							   deltypes),
				   delvalues, NULL, false, 0, SPI_OK_SELECT);
		PurgeTenantCount(tenants, t, offsetof(PurgeCounts, expired_turns), SpiFirstInt8());
		SPI_freetuptable(SPI_tuptable);
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
	Datum	   *ids;

	PurgeCandidatesOf(citus_expired_audit_plan, CITUS_EXPIRED_AUDIT_SQL(ALL_TENANTS),
					  CITUS_EXPIRED_AUDIT_SQL(ONE_TENANT), convctx_audit_retention, batch,
					  tenant, &c);
	ids = palloc(sizeof(Datum) * Max(c.n, 1));
	while (i < c.n)
	{
		text	   *t = DatumGetTextPP(CANDIDATE(&c, i, 0));
		int			nids = PurgeCandidatesGroup(&c, &i, 1, 1, ids);
		Oid			deltypes[2] = {TEXTOID, UUIDARRAYOID};
		Datum		delvalues[2];

		delvalues[0] = PointerGetDatum(t);
		delvalues[1] = PointerGetDatum(construct_array(ids, nids, UUIDOID, UUID_LEN, false,
													   TYPALIGN_CHAR));
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

/* PurgeOnce on Citus. */
static void
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

/*
 * One retention pass over tenant (NULL: every tenant), at most batch rows
 * of each kind, adding what it deleted to the counts of each tenant in
 * tenants. SPI must be connected.
 */
static void
PurgeOnce(int32 batch, text *tenant, HTAB *tenants)
{
	Oid			argtypes[3] = {INT4OID, INT4OID, TEXTOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', tenant ? ' ' : 'n'};
	int			one = tenant ? 1 : 0;

	if (ConvctxDistributed())
	{
		PurgeOnceDistributed(batch, tenant, tenants);
		return;
	}

	values[1] = Int32GetDatum(batch);
	values[2] = PointerGetDatum(tenant);

	if (convctx_session_ttl > 0)
	{
		uint64		n;
		uint64		i;
		Datum	   *tenant_ids;
		Datum	   *sessions;
		Oid			arrtypes[3] = {TEXTARRAYOID, TEXTARRAYOID, INT4OID};
		Datum		arrvalues[3];

		values[0] = Int32GetDatum(convctx_session_ttl);
		SpiRunBulkPlan(SpiKeptPlan(&expired_sessions_plan[one],
								   one ? EXPIRED_SESSIONS_SQL(ONE_TENANT) : EXPIRED_SESSIONS_SQL(ALL_TENANTS),
								   3, argtypes),
				       values, nulls, false, 0, SPI_OK_SELECT);
		n = SPI_processed;
		if (n > 0)
		{
			SPITupleTable *tt = SPI_tuptable;

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
	}

	if (convctx_turn_retention > 0)
	{
		values[0] = Int32GetDatum(convctx_turn_retention);
		SpiRunBulkPlan(SpiKeptPlan(&expired_turns_plan[one],
								   one ? EXPIRED_TURNS_SQL(ONE_TENANT) : EXPIRED_TURNS_SQL(ALL_TENANTS),
								   3, argtypes),
				       values, nulls, false, 0, SPI_OK_SELECT);
		PurgeTenantsAdd(tenants, offsetof(PurgeCounts, expired_turns), (size_t) -1);
	}

	if (convctx_context_ttl > 0)
	{
		values[0] = Int32GetDatum(convctx_context_ttl);
		SpiRunBulkPlan(SpiKeptPlan(&expired_contexts_plan[one],
								   one ? EXPIRED_CONTEXTS_SQL(ONE_TENANT) : EXPIRED_CONTEXTS_SQL(ALL_TENANTS),
								   3, argtypes),
				       values, nulls, false, 0, SPI_OK_SELECT);
		PurgeTenantsAdd(tenants, offsetof(PurgeCounts, contexts), (size_t) -1);
	}

	/* Last: the purge's own audit rows come after, in the same transaction. */
	if (convctx_audit_retention > 0)
	{
		values[0] = Int32GetDatum(convctx_audit_retention);
		SpiRunBulkPlan(SpiKeptPlan(&expired_audit_plan[one],
								   one ? EXPIRED_AUDIT_SQL(ONE_TENANT) : EXPIRED_AUDIT_SQL(ALL_TENANTS),
								   3, argtypes),
				       values, nulls, false, 0, SPI_OK_SELECT);
		PurgeTenantsAdd(tenants, offsetof(PurgeCounts, audit_rows), (size_t) -1);
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
	{
		bool		found;
		PurgeTenant *t = hash_search(into, e->tenant, HASH_ENTER, &found);

		if (!found)
			memset(&t->c, 0, sizeof(t->c));
		t->c.anonymous_sessions += e->c.anonymous_sessions;
		t->c.anonymous_turns += e->c.anonymous_turns;
		t->c.expired_turns += e->c.expired_turns;
		t->c.contexts += e->c.contexts;
		t->c.audit_rows += e->c.audit_rows;
	}
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
		counts.anonymous_sessions += e->c.anonymous_sessions;
		counts.anonymous_turns += e->c.anonymous_turns;
		counts.expired_turns += e->c.expired_turns;
		counts.contexts += e->c.contexts;
		counts.audit_rows += e->c.audit_rows;
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

/* Refuse to run as anything but the triggers the install script creates. */
static void
CheckSessionDeletedTrigger(TriggerData *trigdata)
{
	Oid			session_rel = get_relname_relid("session", ConvctxNamespace());
	bool		by_delete = TRIGGER_FIRED_BY_DELETE(trigdata->tg_event);

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
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				errmsg("trigger function convctx.session_deleted() was not called by trigger manager"),
				errhint("Only the triggers session_deleted and session_truncated on convctx.session fire it."));
	CheckSessionDeletedTrigger(trigdata);

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
