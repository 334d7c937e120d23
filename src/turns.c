/*-------------------------------------------------------------------------
 *
 * turns.c
 *	  Turn history writes: start_turn, finalize_turn and replace_turn
 *	  (the reads are in recent_turns.c).
 *
 * Concurrency rules (the lock order itself is in docs/locking.md):
 *	- Every function here locks the session row first, then turn rows, as
 *	  docs/locking.md orders; the row also carries the session's live turn
 *	  and answer counts, which they keep exact (conversation_state reads
 *	  them instead of counting).
 *	- A new turn is numbered under the lock of its session row: start_turn
 *	  increments last_turn_no in its convctx.session row (creating the row
 *	  for a new session), which locks the row until commit, so appends to one session are serialized and turn_no
 *	  is exact chronology with no gaps.
 *	- Idempotency rests on the session row lock and the unique index
 *	  turn_request_current. The common case, a turn of an existing session
 *	  without an identity argument, is one statement: it locks the session
 *	  row and inserts with ON CONFLICT DO NOTHING, which sees the turn of a
 *	  racer it waited for. Every other path (new session, identity given)
 *	  locks the session row first and then inserts in a statement of its
 *	  own, whose fresh snapshot sees every turn committed before the lock.
 *	  Either way a duplicate inserts nothing, gives back the number it took
 *	  and returns the existing turn's id; no duplicate ever raises.
 *	- The anonymous cap deletes turn_no <= new turn_no - cap: a range on the
 *	  chronology index, one turn per append, never a count or walk of the
 *	  session.
 *	- finalize_turn counts the answer in the session row (locking it) and
 *	  updates the turn with a guard on its state (not finalized / not
 *	  replaced / not redacted), in one statement; replace_turn is one
 *	  statement guarded the same way. A racing repeat waits for the row
 *	  lock, re-checks against the committed row, and then either does
 *	  nothing (same answer, count given back) or is refused.
 *	- set_summary writes the turn_no its summary covers to in the session
 *	  row, under its lock, so that finalize_turn learns from its own lock
 *	  whether the answer it stores is covered (and counts it there).
 *	- replace_turn also takes the session row's lock first, as redaction
 *	  does: a redaction then never misses a version a concurrent replace is
 *	  still inserting.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "storage/itemptr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "convctx.h"
#include "args.h"
#include "metadata.h"
#include "session_link.h"
#include "settings.h"
#include "spi_util.h"
#include "tenancy.h"
#include "turns.h"
#include "variant.h"

static SPIPlanPtr find_request_plan = NULL;
static SPIPlanPtr session_next_turn_plan = NULL;
static SPIPlanPtr session_create_plan = NULL;
static SPIPlanPtr session_untouch_plan = NULL;
static SPIPlanPtr insert_turn_plan = NULL;
static SPIPlanPtr insert_turn_values_plan = NULL;
static SPIPlanPtr append_plan = NULL;
static SPIPlanPtr append_at_plan = NULL;
static SPIPlanPtr session_next_turn_at_plan = NULL;
static SPIPlanPtr finalize_at_plan = NULL;
static SPIPlanPtr session_untouch_at_plan = NULL;
static SPIPlanPtr count_answer_at_plan = NULL;
static SPIPlanPtr cap_plan = NULL;
static SPIPlanPtr first_question_plan = NULL;
static SPIPlanPtr finalize_plan = NULL;
static SPIPlanPtr summary_count_answer_plan = NULL;
static SPIPlanPtr turn_state_plan = NULL;
static SPIPlanPtr replace_plan = NULL;
static SPIPlanPtr session_lock_plan = NULL;
static SPIPlanPtr count_answer_plan = NULL;
static SPIPlanPtr live_turn_no_plan = NULL;

/*
 * SQL fragment: subtract from a session's counts the live current-version
 * turns (and their answers) among the rows a CTE "d" deleted or redacted,
 * d returning deleted_at (before the change), replaced_by_turn_id and
 * finalized_at.
 */
#define SESSION_COUNTS_MINUS_D \
	" live_turns = live_turns OPERATOR(pg_catalog.-) (SELECT pg_catalog.count(*) FROM d" \
	"     WHERE d.deleted_at IS NULL AND d.replaced_by_turn_id IS NULL)," \
	" live_answers = live_answers OPERATOR(pg_catalog.-) (SELECT pg_catalog.count(*) FROM d" \
	"     WHERE d.deleted_at IS NULL AND d.replaced_by_turn_id IS NULL" \
	"       AND d.finalized_at IS NOT NULL)"

#define SESSION_LOCK_SQL \
	"SELECT 1 FROM convctx.session" \
	" WHERE " SESSION_KEY \
	" FOR UPDATE"

#define LIVE_TURN_NO_SQL \
	"SELECT turn_no, deleted_at IS NOT NULL FROM convctx.turn" \
	" WHERE " SESSION_KEY \
	"   AND turn_id OPERATOR(pg_catalog.=) $3"

/* The current version of a request's turn: its id, number and stored answer. */
#define FIND_REQUEST_SQL \
	"SELECT turn_id, turn_no, finalized_at IS NOT NULL AND deleted_at IS NULL," \
	"       answer_neutral, answer_translated FROM convctx.turn" \
	" WHERE " SESSION_KEY \
	"   AND request_id OPERATOR(pg_catalog.=) $3 AND replaced_by_turn_id IS NULL"

/*
 * The session row at the place p where this transaction last put it
 * (session_place below), if it is still there and has the key. The key is
 * wrapped in IS TRUE so that no plan can read it from session_pkey: the
 * statement reads the one tuple p names (a TID scan), whatever the
 * table's statistics say.
 */
#define SESSION_ROW_AT(p) "ctid OPERATOR(pg_catalog.=) " p " AND (" SESSION_KEY ") IS TRUE"

/* Number the next turn of an existing session, locking its row. */
#define SESSION_NEXT_TURN_WHERE(w) \
	"UPDATE convctx.session SET last_turn_no = last_turn_no OPERATOR(pg_catalog.+) 1," \
	"       live_turns = live_turns OPERATOR(pg_catalog.+) 1," SESSION_ACTIVITY_SET \
	" WHERE " w \
	" RETURNING last_turn_no, identity_id, live_turns, ctid, live_answers"
#define SESSION_NEXT_TURN_SQL SESSION_NEXT_TURN_WHERE(SESSION_KEY)
#define SESSION_NEXT_TURN_AT_SQL SESSION_NEXT_TURN_WHERE(SESSION_ROW_AT("$3"))

/* The same for a session that may not exist yet (two may race to create it). */
#define SESSION_CREATE_SQL \
	"INSERT INTO convctx.session AS s (tenant_id, session_id, last_turn_no, live_turns)" \
	" VALUES ($1, $2, 1, 1)" \
	" ON CONFLICT (tenant_id, session_id) DO UPDATE" \
	" SET last_turn_no = s.last_turn_no OPERATOR(pg_catalog.+) 1," \
	"     live_turns = s.live_turns OPERATOR(pg_catalog.+) 1," SESSION_ACTIVITY_UPSERT \
	" RETURNING last_turn_no, identity_id, live_turns, ctid, live_answers"

#define SESSION_UNTOUCH_WHERE(w) \
	"UPDATE convctx.session SET last_turn_no = last_turn_no OPERATOR(pg_catalog.-) 1," \
	"       live_turns = live_turns OPERATOR(pg_catalog.-) 1" \
	" WHERE " w \
	" RETURNING ctid"
#define SESSION_UNTOUCH_SQL SESSION_UNTOUCH_WHERE(SESSION_KEY)
#define SESSION_UNTOUCH_AT_SQL SESSION_UNTOUCH_WHERE(SESSION_ROW_AT("$3"))

/* $3: the change of the answer count (-1 gives back one counted in vain). */
#define COUNT_ANSWER_WHERE(w) \
	"UPDATE convctx.session SET live_answers = live_answers OPERATOR(pg_catalog.+) $3" \
	" WHERE " w \
	" RETURNING ctid"
#define COUNT_ANSWER_SQL COUNT_ANSWER_WHERE(SESSION_KEY)
#define COUNT_ANSWER_AT_SQL COUNT_ANSWER_WHERE(SESSION_ROW_AT("$4"))

/*
 * Insert a new turn unless its request has one. Run with the session row
 * locked, in a statement of its own: its snapshot is taken after the lock,
 * so it sees every turn of the session committed before, and no other can
 * be added meanwhile. $1..$12 are the turn's columns, $13 its number, $14
 * its identity.
 */
#define INSERT_TURN_SQL \
	"INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id," \
	"       identity_id, translate_chat, question_neutral, question_translated," \
	"       metadata, pipeline_name, consultant, repository, created_at)" \
	" SELECT $1, $2, $3, $13, $4, $14, $5, $6, $7, $8, $9, $10, $11, $12" \
	"  WHERE NOT EXISTS (SELECT 1 FROM convctx.turn" \
	"          WHERE " SESSION_KEY \
	"            AND request_id OPERATOR(pg_catalog.=) $4 AND replaced_by_turn_id IS NULL)"

/*
 * The same on Citus, which sends an INSERT ... SELECT (and APPEND_SQL) to
 * every node as intermediate results with a two-phase commit, but a plain
 * INSERT to the session's shard: ON CONFLICT on the unique index of the
 * current versions' request ids catches the repeat instead.
 */
#define INSERT_TURN_VALUES_SQL \
	"INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id," \
	"       identity_id, translate_chat, question_neutral, question_translated," \
	"       metadata, pipeline_name, consultant, repository, created_at)" \
	" VALUES ($1, $2, $3, $13, $4, $14, $5, $6, $7, $8, $9, $10, $11, $12)" \
	" ON CONFLICT (tenant_id, session_id, request_id) WHERE replaced_by_turn_id IS NULL DO NOTHING"

/*
 * A new turn of an existing session without an identity argument, in one
 * statement: s numbers it and locks the session row; t inserts it unless
 * its request has a turn. t's snapshot may predate the lock, so ON
 * CONFLICT, which sees the turns of transactions it waited for, is what
 * catches a duplicate. No row when the session does not exist; else the
 * number taken, the session's identity and whether the turn was inserted.
 */
#define APPEND_WHERE(w) \
	"WITH s AS (" SESSION_NEXT_TURN_WHERE(w) ")," \
	" t AS (INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id," \
	"       identity_id, translate_chat, question_neutral, question_translated," \
	"       metadata, pipeline_name, consultant, repository, created_at)" \
	"   SELECT $1, $2, $3, s.last_turn_no, $4, s.identity_id, $5, $6, $7, $8, $9, $10, $11, $12" \
	"     FROM s" \
	"   ON CONFLICT (tenant_id, session_id, request_id) WHERE replaced_by_turn_id IS NULL" \
	"   DO NOTHING RETURNING 1)" \
	" SELECT s.last_turn_no, s.identity_id, EXISTS (SELECT 1 FROM t), s.live_turns, s.ctid," \
	"        s.live_answers FROM s"
#define APPEND_SQL APPEND_WHERE(SESSION_KEY)
#define APPEND_AT_SQL APPEND_WHERE(SESSION_ROW_AT("$13"))

#define CAP_SQL \
	"WITH r AS (DELETE FROM convctx.turn_retrieval" \
	"   WHERE " SESSION_KEY \
	"     AND turn_no OPERATOR(pg_catalog.<=) $3)," \
	" c AS (DELETE FROM convctx.clarification" \
	"   WHERE " SESSION_KEY \
	"     AND turn_no OPERATOR(pg_catalog.<=) $3)" \
	" , d AS (DELETE FROM convctx.turn" \
	"   WHERE " SESSION_KEY \
	"     AND turn_no OPERATOR(pg_catalog.<=) $3" \
	"   RETURNING tenant_id, session_id, turn_no, deleted_at, replaced_by_turn_id, finalized_at)," \
	SUMMARY_COVERED_ADJUST_D_ONE \
	" UPDATE convctx.session SET" SESSION_COUNTS_MINUS_D "," \
	"  first_question = " FIRST_LIVE_QUESTION("$1", "$2", " AND q.turn_no OPERATOR(pg_catalog.>) $3") \
	" WHERE " SESSION_KEY

/*
 * The start of the first question of a session that had no live turn
 * before this one ($3), for the conversation browser: a new turn is the
 * session's first live one exactly when it makes live_turns 1.
 */
#define FIRST_QUESTION_SET_SQL \
	"UPDATE convctx.session SET first_question = " FIRST_QUESTION_OF("$3") \
	" WHERE " SESSION_KEY

/*
 * Store the answer of an open turn and count it in the session row, in one
 * statement. s locks the session row first, as every writer does; its
 * RETURNING shows the row as it is after the lock, so a summary that a
 * concurrent set_summary committed meanwhile is seen there. The turn's
 * snapshot may predate the lock, but a turn finalized, redacted or
 * replaced meanwhile is re-checked against its newest version before it is
 * updated (READ COMMITTED), and then no row is returned. s counts the
 * answer even then: the caller gives it back. Returns the turn's number and
 * the turn_no the session's summary covers to.
 */
#define FINALIZE_SESSION_WHERE(w) \
	"WITH s AS (UPDATE convctx.session" \
	"   SET live_answers = live_answers OPERATOR(pg_catalog.+) 1" \
	" WHERE " w \
	" RETURNING summary_through_turn_no, ctid)"
#define FINALIZE_TURN_SET \
	" UPDATE convctx.turn t SET" \
	"  answer_neutral = $4," \
	"  answer_translated = CASE WHEN $5::pg_catalog.text IS NULL AND t.translate_chat" \
	"                           THEN $4 ELSE $5 END," \
	"  answer_translated_is_fallback = CASE WHEN $5::pg_catalog.text IS NULL AND t.translate_chat" \
	"                                       THEN true ELSE $6 END," \
	"  metadata = CASE WHEN $7::pg_catalog.jsonb IS NULL THEN t.metadata" \
	"                  ELSE COALESCE(t.metadata, '{}') OPERATOR(pg_catalog.||) $7 END," \
	"  finalized_at = $8" \
	" FROM s" \
	" WHERE " SESSION_KEY_AT("t") \
	"   AND t.turn_id OPERATOR(pg_catalog.=) $3" \
	"   AND t.finalized_at IS NULL AND t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL"
#define FINALIZE_SQL \
	FINALIZE_SESSION_WHERE(SESSION_KEY) FINALIZE_TURN_SET \
	" RETURNING t.turn_no, s.summary_through_turn_no, t.metadata, s.ctid"

/*
 * The same at the place of the session row ($9): a row whenever the
 * session row was there, with the turn's columns NULL when it was not
 * finalized, so that a place that is out of date (no row) is told from a
 * turn in the wrong state (the answer counted in vain).
 */
#define FINALIZE_AT_SQL \
	FINALIZE_SESSION_WHERE(SESSION_ROW_AT("$9")) "," \
	" u AS (" FINALIZE_TURN_SET \
	"       RETURNING t.turn_no, t.metadata)" \
	" SELECT u.turn_no, s.summary_through_turn_no, u.metadata, s.ctid FROM s LEFT JOIN u ON true"

/* A summary that covers a turn finalized after it was written covers its answer too. */
#define SUMMARY_COUNT_ANSWER_SQL \
	"UPDATE convctx.session_summary SET covered_messages = covered_messages OPERATOR(pg_catalog.+) 1" \
	" WHERE " SESSION_KEY

#define TURN_STATE_SQL \
	"SELECT finalized_at IS NOT NULL, deleted_at IS NOT NULL, replaced_by_turn_id," \
	"       answer_neutral, answer_translated" \
	"  FROM convctx.turn" \
	" WHERE " SESSION_KEY \
	"   AND turn_id OPERATOR(pg_catalog.=) $3"

#define REPLACE_SQL \
	"WITH old AS (" \
	"  UPDATE convctx.turn SET replaced_by_turn_id = $7" \
	"   WHERE " SESSION_KEY \
	"     AND turn_id OPERATOR(pg_catalog.=) $3 AND finalized_at IS NOT NULL" \
	"     AND deleted_at IS NULL AND replaced_by_turn_id IS NULL" \
	"  RETURNING *)" \
	" INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id," \
	"        identity_id, created_at, finalized_at, pipeline_name, consultant, repository," \
	"        translate_chat, question_neutral, answer_neutral, question_translated," \
	"        answer_translated, answer_translated_is_fallback, metadata, record_version)" \
	" SELECT tenant_id, session_id, $7, turn_no, request_id," \
	"        identity_id, created_at, $8, pipeline_name," \
	"        consultant, repository, translate_chat, question_neutral, $4, question_translated," \
	"        CASE WHEN $5::pg_catalog.text IS NULL AND translate_chat THEN $4 ELSE $5 END," \
	"        CASE WHEN $5::pg_catalog.text IS NOT NULL THEN false" \
	"             WHEN translate_chat THEN true END," \
	"        CASE WHEN $6::pg_catalog.jsonb IS NULL THEN metadata" \
	"             ELSE COALESCE(metadata, '{}') OPERATOR(pg_catalog.||) $6 END," \
	"        record_version OPERATOR(pg_catalog.+) 1" \
	"   FROM old" \
	" RETURNING metadata"

/*
 * A fresh version 4 UUID. The random bytes come from pg_strong_random in
 * batches: one call per id cost as much as the rest of building a turn's
 * row. The batch lives in this backend only and each byte is used once.
 */
#define TURN_ID_BATCH 64

static pg_uuid_t *
NewTurnId(void)
{
	static uint8 batch[TURN_ID_BATCH * UUID_LEN];
	static int	batch_used = TURN_ID_BATCH;
	pg_uuid_t  *id = palloc(sizeof(pg_uuid_t));

	if (batch_used == TURN_ID_BATCH)
	{
		if (!pg_strong_random(batch, sizeof(batch)))
			ereport(ERROR,
					errcode(ERRCODE_INTERNAL_ERROR),
					errmsg("could not generate a random turn id"));
		batch_used = 0;
	}
	memcpy(id->data, batch + batch_used * UUID_LEN, UUID_LEN);
	memset(batch + batch_used * UUID_LEN, 0, UUID_LEN);
	batch_used++;
	id->data[6] = (id->data[6] & 0x0f) | 0x40;
	id->data[8] = (id->data[8] & 0x3f) | 0x80;
	return id;
}

pg_uuid_t *
ArgTurnId(FunctionCallInfo fcinfo, int argno)
{
	ArgNotNull(fcinfo, argno, "turn_id");
	return PG_GETARG_UUID_P(argno);
}

static text *
ArgRequiredText(FunctionCallInfo fcinfo, int argno, const char *what)
{
	ArgNotNull(fcinfo, argno, what);
	return ArgOptionalText(fcinfo, argno, what);
}

/*
 * The error of every function that looks a turn up by id in a session: a
 * turn of another session or tenant is reported the same way as none.
 */
void
ReportTurnNotFound(pg_uuid_t *turn_id, text *session_id)
{
	ereport(ERROR,
			errcode(ERRCODE_NO_DATA_FOUND),
			errmsg("turn does not exist"),
			errdetail("No turn %s belongs to session \"%s\".",
					  UuidString(turn_id), text_to_cstring(session_id)));
}

char *
UuidString(pg_uuid_t *id)
{
	return DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(id)));
}

/* Datum for a possibly NULL pointer argument of a plan, with its null flag. */
static inline Datum
PlanArg(void *p, char *null_flag)
{
	*null_flag = (p == NULL) ? 'n' : ' ';
	return PointerGetDatum(p);
}

/*
 * Where this transaction last put a session's row: its tuple id. A
 * transaction that writes many turns of one session (a batch, a migration
 * replaying a history through the API, a test) finds the row there, by a
 * TID scan. Through session_pkey each statement would walk every version
 * of the row the transaction wrote, none of which can be pruned before it
 * ends, and every turn would cost more than the one before. A place that
 * is out of date (a later statement moved the row, the subtransaction
 * that put it there rolled back) finds no row, and the statement runs
 * again by the key. Not on Citus, whose shards hold the rows.
 */
static struct
{
	TransactionId xid;
	char	   *key;			/* tenant, '\0', session; in TopMemoryContext */
	Size		keylen;
	ItemPointerData tid;
}			session_place;

static bool
SessionPlaceGet(text *tenant, text *session_id, Datum *tid)
{
	TransactionId xid = GetTopTransactionIdIfAny();
	Size		tl = VARSIZE_ANY_EXHDR(tenant);
	Size		sl = VARSIZE_ANY_EXHDR(session_id);

	if (!TransactionIdIsValid(xid) || xid != session_place.xid ||
		session_place.keylen != tl + 1 + sl ||
		memcmp(session_place.key, VARDATA_ANY(tenant), tl) != 0 ||
		memcmp(session_place.key + tl + 1, VARDATA_ANY(session_id), sl) != 0 ||
		!Variant()->rows_here)
		return false;
	*tid = PointerGetDatum(&session_place.tid);
	return true;
}

/* The row is at tid now (column col of the last result's first row). */
static void
SessionPlaceSet(text *tenant, text *session_id, int col)
{
	Size		tl = VARSIZE_ANY_EXHDR(tenant);
	Size		sl = VARSIZE_ANY_EXHDR(session_id);
	bool		isnull;
	Datum		tid = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);

	if (isnull)
		return;
	if (session_place.keylen != tl + 1 + sl ||
		memcmp(session_place.key, VARDATA_ANY(tenant), tl) != 0 ||
		memcmp(session_place.key + tl + 1, VARDATA_ANY(session_id), sl) != 0)
	{
		if (session_place.key)
			pfree(session_place.key);
		session_place.key = MemoryContextAlloc(TopMemoryContext, tl + 1 + sl);
		memcpy(session_place.key, VARDATA_ANY(tenant), tl);
		session_place.key[tl] = '\0';
		memcpy(session_place.key + tl + 1, VARDATA_ANY(session_id), sl);
		session_place.keylen = tl + 1 + sl;
	}
	session_place.xid = GetTopTransactionIdIfAny();
	ItemPointerCopy((ItemPointer) DatumGetPointer(tid), &session_place.tid);
}

/*
 * Lock a session's row until the end of the transaction, as start_turn
 * does, so that no turn of the session is added or replaced meanwhile.
 * Returns false when the session does not exist. SPI must be connected.
 */
bool
SessionLock(text *tenant, text *session_id)
{
	SpiRunSessionPlan(&session_lock_plan, SESSION_LOCK_SQL, tenant, session_id,
					  false, 0, SPI_OK_SELECT);
	return SPI_processed > 0;
}

/*
 * The turn_no of a live turn of the session; P0002 when it does not exist,
 * 55000 when it is a tombstone. SPI must be connected.
 */
int64
LiveTurnNo(text *tenant, text *session_id, pg_uuid_t *turn_id)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, UUIDOID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	UUIDPGetDatum(turn_id)};
	bool		isnull;

	SpiRunPlan(SpiKeptPlan(&live_turn_no_plan, LIVE_TURN_NO_SQL, 3, argtypes),
			   values, NULL, false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ReportTurnNotFound(turn_id, session_id);
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("turn has been redacted"),
				errdetail("Turn %s keeps no text and takes none.", UuidString(turn_id)));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Add delta to the session's answer count, locking its row; false when the
 * session does not exist. SPI must be connected.
 */
static bool
CountAnswer(text *tenant, text *session_id, int64 delta)
{
	Oid			argtypes[4] = {TEXTOID, TEXTOID, INT8OID, TIDOID};
	Datum		values[4] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	Int64GetDatum(delta), (Datum) 0};

	SPI_processed = 0;
	if (SessionPlaceGet(tenant, session_id, &values[3]))
		SpiRunPlan(SpiKeptPlan(&count_answer_at_plan, COUNT_ANSWER_AT_SQL, 4, argtypes),
				   values, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 0)
		SpiRunPlan(SpiKeptPlan(&count_answer_plan, COUNT_ANSWER_SQL, 3, argtypes),
				   values, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 0)
		return false;
	SessionPlaceSet(tenant, session_id, 1);
	return true;
}

/*
 * Find the current version of (session, request)'s turn: false when there
 * is none; else its id, number and, when it is finalized and live, its
 * answers, copied out of SPI, in *out (marked repeated).
 */
static bool
FindRequest(Datum tenant, Datum session_id, Datum request_id, StartedTurn *out)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3] = {tenant, session_id, request_id};
	SPIPlanPtr	plan = SpiKeptPlan(&find_request_plan, FIND_REQUEST_SQL, 3, argtypes);
	bool		isnull;
	Datum		d;

	SpiRunPlan(plan, values, NULL, false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	out->turn_id = DatumGetUUIDP(SpiFirstDatumCopy(1, &isnull));
	out->turn_no = DatumGetInt64(SpiFirstDatumCopy(2, &isnull));
	out->repeated = true;
	out->live_answers = -1;
	out->answer_neutral = out->answer_translated = NULL;
	if (DatumGetBool(SpiFirstDatumCopy(3, &isnull)))
	{
		d = SpiFirstDatumCopy(4, &isnull);
		out->answer_neutral = isnull ? NULL : DatumGetTextPP(d);
		d = SpiFirstDatumCopy(5, &isnull);
		out->answer_translated = isnull ? NULL : DatumGetTextPP(d);
	}
	return true;
}

/*
 * Number the next turn of a session, creating the session when it is new;
 * the session row stays locked until the end of the transaction. Returns
 * the number and sets *identity to the session's identity (or NULL).
 */
/* The session's counts as a new turn left them. */
typedef struct SessionCounts
{
	int64		live_turns;		/* the new turn included */
	int64		live_answers;
} SessionCounts;

static int64
SessionNextTurn(text *tenant, text *session_id, text **identity, SessionCounts *counts)
{
	bool		isnull;
	Datum		d;
	Datum		tid;

	SPI_processed = 0;
	if (SessionPlaceGet(tenant, session_id, &tid))
	{
		Oid			argtypes[3] = {TEXTOID, TEXTOID, TIDOID};
		Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id), tid};

		SpiRunPlan(SpiKeptPlan(&session_next_turn_at_plan, SESSION_NEXT_TURN_AT_SQL, 3, argtypes),
				   values, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
	}
	if (SPI_processed == 0)
		SpiRunSessionPlan(&session_next_turn_plan, SESSION_NEXT_TURN_SQL, tenant, session_id,
						  false, 0, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 0)
		SpiRunSessionPlan(&session_create_plan, SESSION_CREATE_SQL, tenant, session_id,
						  false, 0, SPI_OK_INSERT_RETURNING);
	SessionPlaceSet(tenant, session_id, 4);

	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	*identity = isnull ? NULL : DatumGetTextPP(d);
	counts->live_turns = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	counts->live_answers = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* The parameter types of APPEND_SQL ($1..$12) and INSERT_TURN_SQL ($1..$14). */
static Oid	new_turn_argtypes[14] = {
	TEXTOID, TEXTOID, UUIDOID, TEXTOID, BOOLOID, TEXTOID, TEXTOID, JSONBOID,
	TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, INT8OID, TEXTOID
};

/* Those of APPEND_AT_SQL: APPEND_SQL's and the place of the session row. */
static Oid	append_at_argtypes[13] = {
	TEXTOID, TEXTOID, UUIDOID, TEXTOID, BOOLOID, TEXTOID, TEXTOID, JSONBOID,
	TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIDOID
};

/*
 * The turn's columns, $1..$12; INSERT_TURN_SQL adds its number and
 * identity. Its time is the call's statement time, passed rather than
 * taken in the statement: on Citus a statement may run on another node,
 * whose statement began later.
 */
static void
NewTurnColumns(text *tenant, NewTurn *t, pg_uuid_t *turn_id, Datum *values, char *nulls)
{
	memset(nulls, ' ', 14);
	values[0] = PointerGetDatum(tenant);
	values[1] = PointerGetDatum(t->session_id);
	values[2] = UUIDPGetDatum(turn_id);
	values[3] = PointerGetDatum(t->request_id);
	values[4] = BoolGetDatum(t->translate_chat);
	values[5] = PointerGetDatum(t->question_neutral);
	values[6] = PlanArg(t->question_translated, &nulls[6]);
	values[7] = PlanArg(t->metadata, &nulls[7]);
	values[8] = PlanArg(t->pipeline_name, &nulls[8]);
	values[9] = PlanArg(t->consultant, &nulls[9]);
	values[10] = PlanArg(t->repository, &nulls[10]);
	values[11] = TimestampTzGetDatum(GetCurrentStatementStartTimestamp());
}

/*
 * The common case, a turn of an existing session, in one statement.
 * Returns false when the session does not exist; else sets the turn's
 * number, the session's identity and whether the turn was inserted.
 */
static bool
AppendTurn(Datum *values, char *nulls, int64 *turn_no, text **session_identity,
		   bool *inserted, SessionCounts *counts)
{
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	text	   *tenant = DatumGetTextPP(values[0]);
	text	   *session_id = DatumGetTextPP(values[1]);

	SPI_processed = 0;
	if (SessionPlaceGet(tenant, session_id, &values[12]))
	{
		nulls[12] = ' ';
		SpiRunPlan(SpiKeptPlan(&append_at_plan, APPEND_AT_SQL, 13, append_at_argtypes), values,
				   nulls, false, 0, SPI_OK_SELECT);
	}
	if (SPI_processed == 0)
		SpiRunPlan(SpiKeptPlan(&append_plan, APPEND_SQL, 12, new_turn_argtypes), values, nulls,
				   false, 0, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	SessionPlaceSet(tenant, session_id, 5);
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	*turn_no = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
	d = SPI_getbinval(row, desc, 2, &isnull);
	*session_identity = isnull ? NULL : DatumGetTextPP(d);
	*inserted = DatumGetBool(SPI_getbinval(row, desc, 3, &isnull));
	counts->live_turns = DatumGetInt64(SPI_getbinval(row, desc, 4, &isnull));
	counts->live_answers = DatumGetInt64(SPI_getbinval(row, desc, 6, &isnull));
	return true;
}

/*
 * Number the turn (creating the session when it is new), link the
 * identity it names, and insert it. Returns whether it was inserted (not
 * when its request has a turn already).
 */
static bool
InsertTurn(text *tenant, NewTurn *t, Datum *values, char *nulls, int64 *turn_no,
		   text **session_identity, SessionCounts *counts)
{
	*turn_no = SessionNextTurn(tenant, t->session_id, session_identity, counts);

	/* Linking comes before the insert: the link rule may refuse the call. */
	if (t->identity_id != NULL)
	{
		SessionLinkLocked(tenant, t->session_id, *session_identity, t->identity_id, true);
		*session_identity = t->identity_id;
	}
	values[12] = Int64GetDatum(*turn_no);
	values[13] = PlanArg(*session_identity, &nulls[13]);
	if (Variant()->one_shard_statements)
		SpiRunPlan(SpiKeptPlan(&insert_turn_values_plan, INSERT_TURN_VALUES_SQL, 14,
							   new_turn_argtypes),
				   values, nulls, false, 0, SPI_OK_INSERT);
	else
		SpiRunPlan(SpiKeptPlan(&insert_turn_plan, INSERT_TURN_SQL, 14, new_turn_argtypes),
				   values, nulls, false, 0, SPI_OK_INSERT);
	return SPI_processed > 0;
}

/* The request has its turn already: give the number back, find the turn. */
static void
RepeatedTurn(text *tenant, NewTurn *t, StartedTurn *out)
{
	Datum		tid;

	SPI_processed = 0;
	if (SessionPlaceGet(tenant, t->session_id, &tid))
	{
		Oid			argtypes[3] = {TEXTOID, TEXTOID, TIDOID};
		Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(t->session_id), tid};

		SpiRunPlan(SpiKeptPlan(&session_untouch_at_plan, SESSION_UNTOUCH_AT_SQL, 3, argtypes),
				   values, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
	}
	if (SPI_processed == 0)
		SpiRunSessionPlan(&session_untouch_plan, SESSION_UNTOUCH_SQL, tenant, t->session_id,
						  false, 0, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed > 0)
		SessionPlaceSet(tenant, t->session_id, 1);
	if (!FindRequest(PointerGetDatum(tenant), PointerGetDatum(t->session_id),
					 PointerGetDatum(t->request_id), out))
		elog(ERROR, "turn of a repeated start_turn not found");
}

/* An anonymous session keeps its newest convctx.max_session_turns turns. */
static void
CapSession(text *tenant, text *session_id, int64 turn_no)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, INT8OID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	Int64GetDatum(turn_no - convctx_max_session_turns)};

	SpiRunPlan(SpiKeptPlan(&cap_plan, CAP_SQL, 3, argtypes),
			   values, NULL, false, 0, SPI_OK_UPDATE);
}

/*
 * Store a new turn, or find the one its request has: in *out. The session
 * row stays locked until the end of the transaction.
 */
void
StartTurn(text *tenant, NewTurn *t, StartedTurn *out)
{
	/* Allocated before SPI_connect: it is returned after SPI_finish. */
	pg_uuid_t  *turn_id = NewTurnId();
	Datum		values[14];
	char		nulls[14];
	int64		turn_no;
	text	   *session_identity;
	bool		inserted;
	SessionCounts counts;

	SPI_connect();
	NewTurnColumns(tenant, t, turn_id, values, nulls);
	/*
	 * A repeat must return its turn even when the identity it names would
	 * be refused now, so it is looked for first.
	 */
	if (t->identity_id != NULL &&
		FindRequest(PointerGetDatum(tenant), PointerGetDatum(t->session_id),
					PointerGetDatum(t->request_id), out))
	{
		SPI_finish();
		return;
	}
	/* (on Citus in statements that each reach one shard: INSERT_TURN_VALUES_SQL) */
	if (t->identity_id != NULL || Variant()->one_shard_statements ||
		!AppendTurn(values, nulls, &turn_no, &session_identity, &inserted, &counts))
		inserted = InsertTurn(tenant, t, values, nulls, &turn_no, &session_identity, &counts);

	if (!inserted)
		RepeatedTurn(tenant, t, out);
	else
	{
		out->turn_id = turn_id;
		out->turn_no = turn_no;
		out->repeated = false;
		out->answer_neutral = out->answer_translated = NULL;
		out->live_answers = counts.live_answers;
		/* the session's first live turn: its question makes the default title */
		if (counts.live_turns == 1)
		{
			Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
			Datum		fq_values[3] = {PointerGetDatum(tenant), PointerGetDatum(t->session_id),
				PointerGetDatum(t->question_neutral)};
			char		fq_nulls[3] = {' ', ' ', t->question_neutral ? ' ' : 'n'};

			SpiRunPlan(SpiKeptPlan(&first_question_plan, FIRST_QUESTION_SET_SQL, 3, argtypes),
					   fq_values, fq_nulls, false, 0, SPI_OK_UPDATE);
		}
		if (session_identity == NULL && turn_no > convctx_max_session_turns)
			CapSession(tenant, t->session_id, turn_no);
	}
	SPI_finish();
}

/*
 * The turn's arguments, checked; argno gives the position of each (-1:
 * not taken): session_id, request_id, question_neutral, identity_id,
 * question_translated, translate_chat, meta, pipeline_name, consultant,
 * repository. NewTurnCheck checks the rest, before anything is written.
 */
void
ArgNewTurn(FunctionCallInfo fcinfo, const int argno[NEW_TURN_ARGS], NewTurn *t)
{
	t->session_id = ArgRequiredId(fcinfo, argno[0], "session_id");
	t->request_id = ArgRequiredId(fcinfo, argno[1], "request_id");
	t->question_neutral = ArgOptionalText(fcinfo, argno[2], "question_neutral");
	t->identity_id = ArgOptionalId(fcinfo, argno[3], "identity_id");
	t->question_translated = ArgOptionalText(fcinfo, argno[4], "question_translated");
	t->translate_chat = PG_ARGISNULL(argno[5]) ? false : PG_GETARG_BOOL(argno[5]);
	t->metadata = ArgOptionalObject(fcinfo, argno[6], "meta");
	t->pipeline_name = ArgOptionalLabel(fcinfo, argno[7], "pipeline_name");
	t->consultant = ArgOptionalLabel(fcinfo, argno[8], "consultant");
	t->repository = ArgOptionalLabel(fcinfo, argno[9], "repository");
}

/*
 * The checks of a new turn that come after the caller's tenant is known:
 * it has a question, and its metadata is filtered (NewTurn.metadata).
 */
void
NewTurnCheck(NewTurn *t)
{
	bool		fallback = false;

	if (t->question_neutral == NULL || VARSIZE_ANY_EXHDR(t->question_neutral) == 0)
	{
		if (t->question_translated == NULL || VARSIZE_ANY_EXHDR(t->question_translated) == 0)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("a turn needs a question"),
					errdetail("question_neutral and question_translated are both missing or empty."));
		t->question_neutral = t->question_translated;
		fallback = true;
	}
	t->metadata = MetadataFilter(t->metadata, fallback);
}

PG_FUNCTION_INFO_V1(convctx_start_turn);

/*
 * start_turn(session_id, request_id, question_neutral, identity_id,
 *			  question_translated, translate_chat, meta, pipeline_name,
 *			  consultant, repository) -> uuid
 *
 * Every argument is checked before anything is written.
 */
Datum
convctx_start_turn(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(start_turn);
	static const int argno[NEW_TURN_ARGS] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
	NewTurn		t;
	StartedTurn started;
	text	   *tenant;

	ArgNewTurn(fcinfo, argno, &t);
	tenant = CurrentTenant();
	NewTurnCheck(&t);
	StartTurn(tenant, &t, &started);
	PG_RETURN_UUID_P(started.turn_id);
}

/*
 * Explain why a turn could not be finalized or replaced: it does not exist
 * in the session (P0002) or is in the wrong state (55000). Returns only
 * for a finalized turn whose stored answer equals answer_neutral and, when
 * given, answer_translated: a repeat that changes nothing.
 */
static void
TurnStateCheck(text *tenant, text *session_id, pg_uuid_t *turn_id,
			   text *answer_neutral, text *answer_translated, bool replacing)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, UUIDOID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	UUIDPGetDatum(turn_id)};
	SPIPlanPtr	plan = SpiKeptPlan(&turn_state_plan, TURN_STATE_SQL, 3, argtypes);
	HeapTuple	row;
	TupleDesc	desc;
	bool		finalized;
	bool		redacted;
	bool		isnull;
	Datum		replaced_by;
	Datum		stored;

	SpiRunPlan(plan, values, NULL, false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ReportTurnNotFound(turn_id, session_id);

	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	finalized = DatumGetBool(SPI_getbinval(row, desc, 1, &isnull));
	redacted = DatumGetBool(SPI_getbinval(row, desc, 2, &isnull));
	replaced_by = SPI_getbinval(row, desc, 3, &isnull);

	if (redacted)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("turn has been redacted"),
				errdetail("Turn %s keeps no text; the answer was not stored.",
						  UuidString(turn_id)));
	if (!isnull)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("turn has been replaced"),
				errdetail("Turn %s has a newer version.", UuidString(turn_id)),
				errhint("Its current version is %s.",
						UuidString(DatumGetUUIDP(replaced_by))));
	if (replacing || !finalized)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("turn is not finalized"),
				errdetail("Turn %s has no answer yet.", UuidString(turn_id)),
				errhint("Use convctx.finalize_turn() to store its first answer."));

	stored = SPI_getbinval(row, desc, 4, &isnull);
	if (!isnull && TextEqual(DatumGetTextPP(stored), answer_neutral))
	{
		stored = SPI_getbinval(row, desc, 5, &isnull);
		if (answer_translated == NULL || (!isnull && TextEqual(DatumGetTextPP(stored), answer_translated)))
			return;
	}
	ereport(ERROR,
			errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			errmsg("turn is already finalized with a different answer"),
			errdetail("Turn %s of session \"%s\" keeps its first answer.",
					  UuidString(turn_id), text_to_cstring(session_id)),
			errhint("Use convctx.replace_turn() to correct an answer."));
}

/*
 * Run the finalizing statement. Returns whether the turn was finalized;
 * its row is then in SPI_tuptable.
 */
static bool
RunFinalize(Datum *values, char *nulls)
{
	Oid			argtypes[9] = {TEXTOID, TEXTOID, UUIDOID, TEXTOID, TEXTOID, BOOLOID, JSONBOID,
	TIMESTAMPTZOID, TIDOID};
	text	   *tenant = DatumGetTextPP(values[0]);
	text	   *session_id = DatumGetTextPP(values[1]);

	if (SessionPlaceGet(tenant, session_id, &values[8]))
	{
		nulls[8] = ' ';
		SpiRunPlan(SpiKeptPlan(&finalize_at_plan, FINALIZE_AT_SQL, 9, argtypes),
				   values, nulls, false, 0, SPI_OK_SELECT);
		if (SPI_processed > 0)
		{
			bool		not_finalized;

			SessionPlaceSet(tenant, session_id, 4);
			(void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &not_finalized);
			return !not_finalized;
		}
	}
	SpiRunPlan(SpiKeptPlan(&finalize_plan, FINALIZE_SQL, 8, argtypes),
			   values, nulls, false, 0, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 0)
		return false;
	SessionPlaceSet(tenant, session_id, 4);
	return true;
}

/*
 * After a turn was finalized (its row in SPI_tuptable): check the merged
 * metadata's size, and count the answer in the summary that covers it.
 */
static void
CountFinalized(Datum *values, char *nulls)
{
	HeapTuple	row = SPI_tuptable->vals[0];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	bool		isnull;
	int64		turn_no = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
	Datum		through = SPI_getbinval(row, desc, 2, &isnull);
	bool		unmerged;
	Datum		merged = SPI_getbinval(row, desc, 3, &unmerged);

	/* The merge, if any ($7), happened in the statement: its error rolls it back. */
	if (nulls[6] != 'n' && !unmerged)
		CheckMetadataSize(merged);
	if (!isnull && turn_no <= DatumGetInt64(through))
	{
		Oid			summary_types[2] = {TEXTOID, TEXTOID};

		SpiRunPlan(SpiKeptPlan(&summary_count_answer_plan, SUMMARY_COUNT_ANSWER_SQL, 2,
							   summary_types),
				   values, NULL, false, 0, SPI_OK_UPDATE);
	}
}

/* An answer, as finalize_turn and replace_turn take it. */
typedef struct TurnAnswer
{
	text	   *session_id;
	pg_uuid_t  *turn_id;
	text	   *answer_neutral;
	text	   *answer_translated;	/* NULL when not given */
	Jsonb	   *metadata;		/* the allowlisted meta, NULL when none */
} TurnAnswer;

/*
 * The arguments finalize_turn and replace_turn share: session_id, turn_id,
 * answer_neutral, answer_translated (0 to 3) and meta (meta_argno).
 */
static TurnAnswer
ArgTurnAnswer(FunctionCallInfo fcinfo, int meta_argno)
{
	TurnAnswer	a;
	Jsonb	   *meta;

	a.session_id = ArgRequiredId(fcinfo, 0, "session_id");
	a.turn_id = ArgTurnId(fcinfo, 1);
	a.answer_neutral = ArgRequiredText(fcinfo, 2, "answer_neutral");
	a.answer_translated = ArgOptionalText(fcinfo, 3, "answer_translated");
	meta = ArgOptionalObject(fcinfo, meta_argno, "meta");
	a.metadata = meta ? MetadataFilter(meta, false) : NULL;
	return a;
}

/*
 * $1 to $5 of FINALIZE_SQL and REPLACE_SQL: the tenant, session, turn and
 * answers; the caller fills $6 and $7.
 */
static void
TurnAnswerParams(text *tenant, TurnAnswer *a, Datum *values, char *nulls)
{
	memset(nulls, ' ', 5);
	values[0] = PointerGetDatum(tenant);
	values[1] = PointerGetDatum(a->session_id);
	values[2] = UUIDPGetDatum(a->turn_id);
	values[3] = PointerGetDatum(a->answer_neutral);
	values[4] = PlanArg(a->answer_translated, &nulls[4]);
}

/*
 * Store the answer of an open turn; a repeat that changes nothing is
 * accepted, anything else explained (TurnStateCheck). fallback is NULL
 * when not given.
 */
static void
FinalizeTurn(text *tenant, TurnAnswer *a, bool *fallback)
{
	Datum		values[9];
	char		nulls[9];

	TurnAnswerParams(tenant, a, values, nulls);
	values[5] = fallback ? BoolGetDatum(*fallback) : (Datum) 0;
	nulls[5] = fallback ? ' ' : 'n';
	values[6] = PlanArg(a->metadata, &nulls[6]);
	values[7] = TimestampTzGetDatum(GetCurrentStatementStartTimestamp());
	nulls[7] = ' ';

	SPI_connect();
	if (RunFinalize(values, nulls))
		CountFinalized(values, nulls);
	else
	{
		/* Give back the answer counted in vain (nothing when no session). */
		(void) CountAnswer(tenant, a->session_id, -1);
		/* Not open, not in the session, or a repeat: explain, or accept the repeat. */
		TurnStateCheck(tenant, a->session_id, a->turn_id, a->answer_neutral,
					   a->answer_translated, false);
	}
	SPI_finish();
}

/*
 * Store a new current version of a finalized turn with the corrected
 * answer and return its id; anything but a finalized current version is
 * explained (TurnStateCheck).
 */
static pg_uuid_t *
ReplaceTurn(text *tenant, TurnAnswer *a)
{
	pg_uuid_t  *new_id = NewTurnId();
	Oid			argtypes[8] = {TEXTOID, TEXTOID, UUIDOID, TEXTOID, TEXTOID, JSONBOID, UUIDOID,
	TIMESTAMPTZOID};
	Datum		values[8];
	char		nulls[8];

	TurnAnswerParams(tenant, a, values, nulls);
	values[5] = PlanArg(a->metadata, &nulls[5]);
	values[6] = UUIDPGetDatum(new_id);
	nulls[6] = ' ';
	values[7] = TimestampTzGetDatum(GetCurrentStatementStartTimestamp());
	nulls[7] = ' ';

	SPI_connect();
	/* Serialized with redaction, which must see every version it clears. */
	if (!SessionLock(tenant, a->session_id))
		ReportTurnNotFound(a->turn_id, a->session_id);
	SpiRunPlan(SpiKeptPlan(&replace_plan, REPLACE_SQL, 8, argtypes),
			   values, nulls, false, 0, SPI_OK_INSERT_RETURNING);
	if (SPI_processed == 0)
		TurnStateCheck(tenant, a->session_id, a->turn_id, a->answer_neutral,
					   a->answer_translated, true);
	else
	{
		bool		unmerged;
		Datum		merged = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &unmerged);

		/*
		 * The merge happened in the statement: its error rolls it back.
		 * (Only the C side knows whether there was one: Citus cannot run
		 * a RETURNING that names a parameter.)
		 */
		if (a->metadata && !unmerged)
			CheckMetadataSize(merged);
	}
	SPI_finish();
	return new_id;
}

PG_FUNCTION_INFO_V1(convctx_finalize_turn);

/*
 * finalize_turn(session_id, turn_id, answer_neutral, answer_translated,
 *				 answer_translated_is_fallback, meta, tenant) -> void
 *
 * tenant, when given, is the tenant of this call only (TenantForCallBegin).
 */
Datum
convctx_finalize_turn(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(finalize_turn);
	TurnAnswer	answer = ArgTurnAnswer(fcinfo, 5);
	bool		fallback = PG_ARGISNULL(4) ? false : PG_GETARG_BOOL(4);
	int			nestlevel = -1;

	if (PG_NARGS() > 6 && !PG_ARGISNULL(6))
		nestlevel = TenantForCallBegin(PG_GETARG_TEXT_PP(6));
	FinalizeTurn(CurrentTenant(), &answer, PG_ARGISNULL(4) ? NULL : &fallback);
	if (nestlevel >= 0)
		TenantForCallEnd(nestlevel);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(convctx_replace_turn);

/*
 * replace_turn(session_id, turn_id, answer_neutral, answer_translated,
 *				meta) -> uuid of the new current version
 */
Datum
convctx_replace_turn(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(replace_turn);
	TurnAnswer	answer = ArgTurnAnswer(fcinfo, 4);

	PG_RETURN_UUID_P(ReplaceTurn(CurrentTenant(), &answer));
}
