/*-------------------------------------------------------------------------
 *
 * finalize.c
 *	  A turn's answer: finalize_turn stores it, replace_turn stores a new
 *	  version of the turn with another.
 *
 * finalize_turn counts the answer in the session row (locking it) and
 * updates the turn with a guard on its state (not finalized / not
 * replaced / not redacted), in one statement; replace_turn is one
 * statement guarded the same way, after the session row's lock, as
 * redaction takes it: a redaction then never misses a version a
 * concurrent replace is still inserting. A racing repeat waits for the
 * row lock, re-checks against the committed row, and then either does
 * nothing (same answer, count given back) or is refused. set_summary
 * writes the turn_no its summary covers to in the session row, under its
 * lock, so that finalize_turn learns from its own lock whether the answer
 * it stores is covered (and counts it there).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns/finalize.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "core/common.h"
#include "core/args.h"
#include "core/companion.h"
#include "core/metadata.h"
#include "core/spi_plans.h"
#include "core/writable.h"
#include "turns/session_row.h"
#include "core/tenancy.h"
#include "turns/turns.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr finalize_at_plan, finalize_plan, summary_count_answer_plan,
			turn_state_plan, replace_plan;

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
		/* the old version's embeddings go with it (convctx_recall) */
		CompanionForgetVersion(tenant, a->session_id, a->turn_id);
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
