/*-------------------------------------------------------------------------
 *
 * turns.c
 *	  Starting a turn: start_turn, and StartTurn for begin_turn (the
 *	  answers are stored by finalize.c, the reads are in recent_turns.c).
 *
 * Concurrency rules (the lock order itself is in docs/locking.md):
 *	- Every writer of turns locks the session row first, then turn rows, as
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
 *	- finalize_turn and replace_turn (finalize.c) lock the session row
 *	  first as well; the row's lock, count and place are in session_row.c.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns/turns.c
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

#include "core/common.h"
#include "core/args.h"
#include "core/metadata.h"
#include "core/spi_plans.h"
#include "core/writable.h"
#include "turns/session_link.h"
#include "turns/session_row.h"
#include "core/settings.h"
#include "core/tenancy.h"
#include "turns/turns.h"
#include "core/variant.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr live_turn_no_plan, find_request_plan, session_next_turn_plan,
			session_create_plan, session_untouch_plan, insert_turn_plan,
			insert_turn_values_plan, append_plan, append_at_plan,
			session_next_turn_at_plan, session_untouch_at_plan, cap_plan,
			first_question_plan;


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
 * A fresh version 4 UUID. The random bytes come from pg_strong_random in
 * batches: one call per id cost as much as the rest of building a turn's
 * row. The batch lives in this backend only and each byte is used once.
 */
#define TURN_ID_BATCH 64

pg_uuid_t *
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

