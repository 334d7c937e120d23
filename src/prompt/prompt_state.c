/*-------------------------------------------------------------------------
 *
 * prompt_state.c
 *	  Conversation state for planner prompts: conversation_state,
 *	  set_summary, turns_to_summarize, render_conversation_state; and what
 *	  redaction must forget of prompt data (PromptForget).
 *
 * A summary never outlives the text it was made from: redaction drops
 * the summaries that cover a redacted turn, and a summary made before a
 * redaction is refused after it. Every redaction bumps the session's
 * generation (convctx.session.redactions) under the session row's lock and
 * stamps the tombstones it makes with it (convctx.turn.redaction);
 * turns_to_summarize hands the generation out with the turns, set_summary
 * takes it back and, under the same lock, refuses the summary when a turn
 * it covers became a tombstone since.
 *
 * Messages are the questions and answers of live (not redacted) current
 * versions of turns, in turn_no order. Reads walk the chronology index
 * backwards for the window, so their cost follows the window; the counts
 * are kept in the session and summary rows by every function that changes
 * them, so nothing here grows with the history. The window asks for no
 * more turns than the session's live_turns, read in the same snapshot, so
 * its scan ends at the oldest live turn and never walks the tombstones
 * below (a session that goes on after redact_session or erase_identity).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/prompt/prompt_state.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "core/common.h"
#include "core/args.h"
#include "core/jsonb_util.h"
#include "core/spi_plans.h"
#include "core/turn_reader.h"
#include "core/writable.h"
#include "prompt/prompt_state.h"
#include "core/prompt_text.h"
#include "core/settings.h"
#include "core/tenancy.h"
#include "turns/turns.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr window_plan, counts_plan, set_summary_plan, clear_summary_mark_plan,
			summary_lock_plan, summary_stale_plan, to_summarize_plan, forget_turn_plan,
			forget_session_plan, forget_sessions_plan;

#define LIVE_TURN \
	" " SESSION_KEY \
	" AND deleted_at IS NULL AND replaced_by_turn_id IS NULL"

/*
 * $4 is a lower bound on turn_no: a btree scan reads every matching entry
 * of a leaf page, so without it a long session's page is read whole.
 */
#define WINDOW_SQL \
	"SELECT turn_no, created_at, finalized_at, question_neutral, answer_neutral" \
	"  FROM convctx.turn WHERE" LIVE_TURN \
	"   AND turn_no OPERATOR(pg_catalog.>) $4" \
	" ORDER BY turn_no DESC LIMIT $3"

/* The counts come from the session row: nothing here grows with history. */
#define COUNTS_SQL \
	"SELECT s.live_turns OPERATOR(pg_catalog.+) s.live_answers, s.live_answers," \
	"       sm.summary, sm.covered_messages, cc.context_json, s.last_turn_no" \
	"  FROM (SELECT 1) one" \
	"  LEFT JOIN convctx.session s" \
	"         ON " SESSION_KEY_AT("s") \
	"  LEFT JOIN convctx.session_summary sm" \
	"         ON " SESSION_KEY_AT("sm") \
	"  LEFT JOIN convctx.conversation_context cc" \
	"         ON cc.tenant_id OPERATOR(pg_catalog.=) $1 AND cc.conversation_id OPERATOR(pg_catalog.=) $2"

/*
 * Insert or replace the summary, counting the messages it covers; $5 is
 * the statement's time (on Citus the statement may run on another node).
 */
#define SUMMARY_UPSERT_SQL \
	"INSERT INTO convctx.session_summary AS s" \
	"       (tenant_id, session_id, summary, through_turn_no, covered_messages, updated_at)" \
	" SELECT $1, $2, $3, t.turn_no," \
	"        (SELECT pg_catalog.count(*) OPERATOR(pg_catalog.+) pg_catalog.count(x.finalized_at)" \
	"           FROM convctx.turn x" \
	"          WHERE " SESSION_KEY_AT("x") \
	"            AND x.deleted_at IS NULL AND x.replaced_by_turn_id IS NULL" \
	"            AND x.turn_no OPERATOR(pg_catalog.<=) t.turn_no), $5" \
	"   FROM convctx.turn t" \
	"  WHERE " SESSION_KEY_AT("t") \
	"    AND t.turn_id OPERATOR(pg_catalog.=) $4" \
	" ON CONFLICT (tenant_id, session_id) DO UPDATE" \
	" SET summary = EXCLUDED.summary, through_turn_no = EXCLUDED.through_turn_no," \
	"     covered_messages = EXCLUDED.covered_messages," \
	"     updated_at = EXCLUDED.updated_at"

/*
 * The summary, and the turn_no it covers to in the session row, where
 * finalize_turn reads it under the same row lock.
 */
#define SET_SUMMARY_SQL \
	"WITH sm AS (" SUMMARY_UPSERT_SQL " RETURNING through_turn_no)" \
	" UPDATE convctx.session SET summary_through_turn_no = sm.through_turn_no FROM sm" \
	"  WHERE " SESSION_KEY

/* The session's redaction generation, locking its row as redaction does. */
#define SUMMARY_LOCK_SQL \
	"SELECT redactions FROM convctx.session" \
	" WHERE " SESSION_KEY \
	" FOR UPDATE"

/*
 * A turn up to $3 that a redaction after generation $4 made a tombstone:
 * a summary of what turns_to_summarize returned at $4 may hold its text.
 */
#define SUMMARY_STALE_SQL \
	"SELECT 1 FROM convctx.turn" \
	" WHERE " SESSION_KEY \
	"   AND turn_no OPERATOR(pg_catalog.<=) $3 AND redaction OPERATOR(pg_catalog.>) $4" \
	" LIMIT 1"

/* After PromptForget dropped the summary. */
#define CLEAR_SUMMARY_MARK_SQL \
	"UPDATE convctx.session SET summary_through_turn_no = NULL" \
	" WHERE " SESSION_KEY \
	"   AND summary_through_turn_no IS NOT NULL"

/*
 * The first $4 turns wholly older than the last $3 messages and after the
 * summary, with the session's redaction generation and the summary they
 * continue, all read in one snapshot.
 */
#define TO_SUMMARIZE_SQL \
	"WITH win AS (SELECT turn_no, CASE WHEN finalized_at IS NULL THEN 1 ELSE 2 END AS msgs" \
	"               FROM convctx.turn WHERE" LIVE_TURN \
	"              ORDER BY turn_no DESC LIMIT $3)," \
	" boundary AS (SELECT pg_catalog.min(turn_no) AS turn_no FROM (" \
	"               SELECT turn_no, pg_catalog.sum(msgs) OVER (ORDER BY turn_no DESC)" \
	"                      OPERATOR(pg_catalog.-) msgs AS newer" \
	"                 FROM win) w WHERE newer OPERATOR(pg_catalog.<) $3)," \
	" sm AS (SELECT summary, through_turn_no FROM convctx.session_summary s" \
	"        WHERE " SESSION_KEY_AT("s") ")" \
	"SELECT t.turn_id, t.created_at, t.question_neutral, t.answer_neutral," \
	"       (SELECT redactions FROM convctx.session s" \
	"         WHERE " SESSION_KEY_AT("s") ")," \
	"       (SELECT summary FROM sm)" \
	"  FROM convctx.turn t, boundary b" \
	" WHERE " SESSION_KEY_AT("t") \
	"   AND t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL" \
	"   AND t.turn_no OPERATOR(pg_catalog.<) b.turn_no" \
	"   AND t.turn_no OPERATOR(pg_catalog.>) COALESCE((SELECT through_turn_no FROM sm), 0)" \
	" ORDER BY t.turn_no LIMIT $4"

#define FORGET_TURN_SQL \
	"WITH r AS (DELETE FROM convctx.turn_retrieval" \
	"   WHERE " SESSION_KEY \
	"     AND turn_no OPERATOR(pg_catalog.=) $3 RETURNING 1)," \
	" c AS (DELETE FROM convctx.clarification" \
	"   WHERE " SESSION_KEY \
	"     AND turn_no OPERATOR(pg_catalog.=) $3 RETURNING 1)" \
	" DELETE FROM convctx.session_summary" \
	"  WHERE " SESSION_KEY \
	"    AND through_turn_no OPERATOR(pg_catalog.>=) $3"

#define FORGET_SESSION_SQL \
	"WITH r AS (DELETE FROM convctx.turn_retrieval" \
	"   WHERE " SESSION_KEY " RETURNING 1)," \
	" c AS (DELETE FROM convctx.clarification" \
	"   WHERE " SESSION_KEY " RETURNING 1)" \
	" DELETE FROM convctx.session_summary" \
	"  WHERE " SESSION_KEY

/* The same for the sessions $2 (a text[]) at once, whose summary marks the caller clears. */
#define FORGET_SESSIONS_SQL \
	"WITH r AS (DELETE FROM convctx.turn_retrieval" \
	"   WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"     AND session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]) RETURNING 1)," \
	" c AS (DELETE FROM convctx.clarification" \
	"   WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"     AND session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]) RETURNING 1)" \
	" DELETE FROM convctx.session_summary" \
	"  WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"    AND session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])"

/*
 * Forget the prompt data of a redacted turn (turn_no >= 1) or of a whole
 * session (turn_no 0): its retrieved chunks, citations and clarification,
 * and every summary that covers it. SPI must be connected.
 */
void
PromptForget(text *tenant, text *session_id, int64 turn_no)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, INT8OID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	Int64GetDatum(turn_no)};

	if (turn_no > 0)
		SpiRunPlan(SpiKeptPlan(&forget_turn_plan, FORGET_TURN_SQL, 3, argtypes),
				   values, NULL, false, 0, SPI_OK_DELETE);
	else
		SpiRunPlan(SpiKeptPlan(&forget_session_plan, FORGET_SESSION_SQL, 2, argtypes),
				   values, NULL, false, 0, SPI_OK_DELETE);
	if (SPI_processed > 0)
		SpiRunPlan(SpiKeptPlan(&clear_summary_mark_plan, CLEAR_SUMMARY_MARK_SQL, 2, argtypes),
				   values, NULL, false, 0, SPI_OK_UPDATE);
}

/*
 * Forget the prompt data of the sessions sessions (a text[] datum) in one
 * statement, as an erasure of thousands of them needs; the caller clears
 * their sessions' summary_through_turn_no. SPI must be connected.
 */
void
PromptForgetSessions(text *tenant, Datum sessions)
{
	Oid			argtypes[2] = {TEXTOID, TEXTARRAYOID};
	Datum		values[2] = {PointerGetDatum(tenant), sessions};

	SpiRunPlan(SpiKeptPlan(&forget_sessions_plan, FORGET_SESSIONS_SQL, 2, argtypes),
			   values, NULL, false, 0, SPI_OK_DELETE);
}

/* The parse state keeps pointers, so the text must outlive this call. */
static void
PushTimestamp(JsonbParseState **state, Datum ts)
{
	char	   *s = JsonEncodeDateTime(NULL, ts, TIMESTAMPTZOID, NULL);

	JsonbPushString(state, WJB_VALUE, s, strlen(s));
}

static void
PushMessage(JsonbParseState **state, const char *role, Datum text_datum, Datum ts)
{
	text	   *t = DatumGetTextPP(text_datum);

	pushJsonbValue(state, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(state, "role");
	JsonbPushString(state, WJB_VALUE, role, strlen(role));
	JsonbPushKey(state, "text");
	JsonbPushText(state, WJB_VALUE, t);
	JsonbPushKey(state, "timestamp");
	PushTimestamp(state, ts);
	pushJsonbValue(state, WJB_END_OBJECT, NULL);
}

/* What conversation_state reads from the session's rows. */
typedef struct SessionCounts
{
	bool		counted;		/* the session has a row */
	int64		messages;		/* live questions and answers */
	int64		finalized;		/* live answers */
	int64		covered;		/* messages the summary covers */
	int64		last_turn_no;
	bool		summary_null;
	Datum		summary;
	Jsonb	   *context;		/* the conversation's context, or NULL */
} SessionCounts;

/* Read the session's counts, summary and context. SPI must be connected. */
static void
ReadSessionCounts(text *tenant, text *session_id, SessionCounts *c)
{
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;

	memset(c, 0, sizeof(*c));
	c->summary_null = true;
	SpiRunSessionPlan(&counts_plan, COUNTS_SQL, tenant, session_id, true, 0, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return;
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	d = SPI_getbinval(row, desc, 1, &isnull);
	c->messages = isnull ? 0 : DatumGetInt64(d);
	c->counted = !isnull;
	d = SPI_getbinval(row, desc, 2, &isnull);
	c->finalized = isnull ? 0 : DatumGetInt64(d);
	c->summary = SPI_getbinval(row, desc, 3, &c->summary_null);
	d = SPI_getbinval(row, desc, 4, &isnull);
	c->covered = isnull ? 0 : DatumGetInt64(d);
	d = SPI_getbinval(row, desc, 5, &isnull);
	if (!isnull)
		c->context = DatumGetJsonbP(d);
	d = SPI_getbinval(row, desc, 6, &isnull);
	c->last_turn_no = isnull ? 0 : DatumGetInt64(d);
}

/*
 * The turns of the message window, newest first. The window needs at most
 * window live turns, and no more than the session's live turns (messages -
 * finalized), so the read ends at the oldest of them and never walks the
 * tombstones below. Without a session row nothing is known: the window is
 * read. SPI must be connected.
 */
static SPITupleTable *
ReadWindow(text *tenant, text *session_id, int32 window, SessionCounts *c, uint64 *nwin)
{
	int64		want = c->counted ? Min((int64) window, c->messages - c->finalized) : window;
	Oid			argtypes[4] = {TEXTOID, TEXTOID, INT8OID, INT8OID};
	Datum		values[4] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	(Datum) 0, (Datum) 0};

	return SpiReadNewestTurns(SpiKeptPlan(&window_plan, WINDOW_SQL, 4, argtypes),
							  values, want, c->last_turn_no, want, nwin);
}

/*
 * The last window messages of the turns (newest first), oldest first: a
 * question, then its answer when the turn is finalized.
 */
static void
PushRecentMessages(JsonbParseState **state, SPITupleTable *win, uint64 nwin, int32 window)
{
	int64		in_window = 0;
	int64		skip;
	int64		i;

	for (i = 0; i < (int64) nwin; i++)
	{
		bool		isnull;

		(void) SPI_getbinval(win->vals[i], win->tupdesc, 3, &isnull);
		in_window += isnull ? 1 : 2;
	}
	skip = in_window > window ? in_window - window : 0;
	pushJsonbValue(state, WJB_BEGIN_ARRAY, NULL);
	for (i = (int64) nwin - 1; i >= 0; i--)
	{
		HeapTuple	row = win->vals[i];
		bool		unfinalized;
		bool		isnull;
		Datum		finalized_at = SPI_getbinval(row, win->tupdesc, 3, &unfinalized);
		Datum		question = SPI_getbinval(row, win->tupdesc, 4, &isnull);
		Datum		created_at = SPI_getbinval(row, win->tupdesc, 2, &isnull);

		if (skip > 0)
			skip--;
		else
			PushMessage(state, "user", question, created_at);
		if (!unfinalized)
		{
			Datum		answer = SPI_getbinval(row, win->tupdesc, 5, &isnull);

			/* a live finalized turn has an answer (table constraint) */
			if (skip > 0)
				skip--;
			else if (!isnull)
				PushMessage(state, "assistant", answer, finalized_at);
		}
	}
	pushJsonbValue(state, WJB_END_ARRAY, NULL);
}

/* activeNodeIds runs least to most recent; entities go most recent first. */
static void
PushReferencedEntities(JsonbParseState **state, Jsonb *context)
{
	JsonbValue	ids;

	pushJsonbValue(state, WJB_BEGIN_ARRAY, NULL);
	if (context != NULL && JB_ROOT_IS_OBJECT(context) &&
		JSONB_KEY(&context->root, CONVCTX_ACTIVE_NODE_IDS, &ids) != NULL &&
		ids.type == jbvBinary && JsonContainerIsArray(ids.val.binary.data))
	{
		int			k;

		for (k = JsonContainerSize(ids.val.binary.data) - 1; k >= 0; k--)
		{
			JsonbValue *v = getIthJsonbValueFromContainer(ids.val.binary.data, k);

			if (v != NULL && v->type == jbvString && v->val.string.len > 0)
				pushJsonbValue(state, WJB_ELEM, v);
		}
	}
	pushJsonbValue(state, WJB_END_ARRAY, NULL);
}

/* The conversation_state object of a session. */
static Jsonb *
ConversationState(text *tenant, text *session_id, int32 window)
{
	MemoryContext caller = CurrentMemoryContext;
	JsonbParseState *state = NULL;
	SessionCounts c;
	SPITupleTable *win;
	uint64		nwin;
	Jsonb	   *out;

	SPI_connect();
	ReadSessionCounts(tenant, session_id, &c);
	win = ReadWindow(tenant, session_id, window, &c, &nwin);

	/* Build the result in the caller's context: SPI's goes at SPI_finish. */
	MemoryContextSwitchTo(caller);
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(&state, "conversation_id");
	JsonbPushText(&state, WJB_VALUE, session_id);
	JsonbPushKey(&state, "message_count");
	JsonbPushInt(&state, WJB_VALUE, c.messages);
	JsonbPushKey(&state, "is_first_message");
	JsonbPushBool(&state, WJB_VALUE, c.finalized == 0);
	JsonbPushKey(&state, "recent_messages");
	PushRecentMessages(&state, win, nwin, window);
	JsonbPushKey(&state, "referenced_entities");
	PushReferencedEntities(&state, c.context);
	JsonbPushKey(&state, "summary");
	if (c.summary_null)
		JsonbPushNull(&state, WJB_VALUE);
	else
		JsonbPushText(&state, WJB_VALUE, DatumGetTextPP(c.summary));
	JsonbPushKey(&state, "needs_summary");
	JsonbPushBool(&state, WJB_VALUE,
				  c.messages - c.covered - Min(c.messages, (int64) window) > convctx_summary_threshold);
	out = JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
	SPI_finish();
	return out;
}

PG_FUNCTION_INFO_V1(convctx_conversation_state);

/*
 * conversation_state(session_id, message_window) -> jsonb
 */
Datum
convctx_conversation_state(PG_FUNCTION_ARGS)
{
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	int32		window = ArgLimit(fcinfo, 1, "message_window");
	text	   *tenant = CurrentTenant();

	PG_RETURN_JSONB_P(ConversationState(tenant, session_id, window));
}

/*
 * Lock the session row as redaction does and check that a summary made
 * at redaction generation seen of the turns up to through may still be
 * stored: through is a live turn of the session (P0002, 55000), seen is
 * the session's (22023 when newer), and no redaction since made a
 * tombstone of a turn up to through (55000). SPI must be connected.
 */
static void
CheckSummaryGeneration(text *tenant, text *session_id, pg_uuid_t *through, int64 seen)
{
	Oid			argtypes[4] = {TEXTOID, TEXTOID, INT8OID, INT8OID};
	Datum		values[4] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	(Datum) 0, Int64GetDatum(seen)};
	int64		current;
	bool		isnull;

	/* Serialized with redaction, which drops the summaries that cover a turn. */
	SpiRunPlan(SpiKeptPlan(&summary_lock_plan, SUMMARY_LOCK_SQL, 2, argtypes),
			   values, NULL, false, 0, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ReportTurnNotFound(through, session_id);
	current = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (seen > current)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("redactions does not belong to this session"),
				errdetail("Got " INT64_FORMAT "; session \"%s\" is at " INT64_FORMAT ".",
						  seen, text_to_cstring(session_id), current),
				errhint("Pass the redactions value that convctx.turns_to_summarize() returned with the turns."));

	/* P0002 when not in the session, 55000 for a tombstone */
	values[2] = Int64GetDatum(LiveTurnNo(tenant, session_id, through));
	if (seen == current)
		return;
	SpiRunPlan(SpiKeptPlan(&summary_stale_plan, SUMMARY_STALE_SQL, 4, argtypes),
			   values, NULL, false, 1, SPI_OK_SELECT);
	if (SPI_processed > 0)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("summary predates a redaction of a turn it covers"),
				errdetail("A turn up to %s of session \"%s\" was redacted after the turns to summarize were read (redactions " INT64_FORMAT ", now " INT64_FORMAT ").",
						  UuidString(through), text_to_cstring(session_id), seen, current),
				errhint("Call convctx.turns_to_summarize() again and summarize what it returns."));
}

/* Store a summary of the turns up to through (set_summary). */
static void
SetSummary(text *tenant, text *session_id, text *summary, pg_uuid_t *through, int64 seen)
{
	Oid			argtypes[5] = {TEXTOID, TEXTOID, TEXTOID, UUIDOID, TIMESTAMPTZOID};
	Datum		values[5] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
		PointerGetDatum(summary), UUIDPGetDatum(through),
	TimestampTzGetDatum(GetCurrentStatementStartTimestamp())};

	SPI_connect();
	CheckSummaryGeneration(tenant, session_id, through, seen);
	SpiRunPlan(SpiKeptPlan(&set_summary_plan, SET_SUMMARY_SQL, 5, argtypes),
			   values, NULL, false, 0, SPI_OK_UPDATE);
	if (SPI_processed == 0)
		ReportTurnNotFound(through, session_id);
	SPI_finish();
}

PG_FUNCTION_INFO_V1(convctx_set_summary_0_3);

/*
 * set_summary(session_id, summary, through_turn, redactions) -> void
 *
 * redactions is the generation turns_to_summarize handed out with the
 * turns the summary was made from. Under the session row's lock, which
 * every redaction takes to bump the generation, a summary is refused
 * (55000) when through_turn is a tombstone, or when a redaction after that
 * generation made a tombstone of a turn up to through_turn: its input may
 * hold text that is gone.
 */
Datum
convctx_set_summary_0_3(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(set_summary);
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	text	   *summary;
	pg_uuid_t  *through = ArgTurnId(fcinfo, 2);
	int64		seen;
	text	   *tenant = CurrentTenant();

	ArgNotNull(fcinfo, 1, "summary");
	summary = ArgOptionalText(fcinfo, 1, "summary");
	if (PG_ARGISNULL(3))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("redactions must not be null"),
				errhint("Pass the redactions value that convctx.turns_to_summarize() returned with the turns."));
	seen = PG_GETARG_INT64(3);
	if (seen < 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("redactions must not be negative"),
				errdetail("Got " INT64_FORMAT ".", seen));
	SetSummary(tenant, session_id, summary, through, seen);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(convctx_turns_to_summarize_0_3);

/*
 * turns_to_summarize(session_id, message_window, max_turns) -> setof
 * (turn_id, created_at, question_neutral, answer_neutral, redactions,
 * previous_summary): at most max_turns turns, oldest first, so that a long
 * unsummarized history is summarized in steps of bounded memory.
 */
Datum
convctx_turns_to_summarize_0_3(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	int32		window = ArgLimit(fcinfo, 1, "message_window");
	int32		max_turns = ArgLimit(fcinfo, 2, "max_turns");
	Oid			argtypes[4] = {TEXTOID, TEXTOID, INT8OID, INT8OID};
	Datum		values[4];
	uint64		i;

	InitMaterializedSRF(fcinfo, 0);
	values[0] = PointerGetDatum(CurrentTenant());
	values[1] = PointerGetDatum(session_id);
	values[2] = Int64GetDatum(window);
	values[3] = Int64GetDatum(max_turns);

	SPI_connect();
	SpiRunPlan(SpiKeptPlan(&to_summarize_plan, TO_SUMMARIZE_SQL, 4, argtypes),
			   values, NULL, true, 0, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
	{
		Datum		row[6];
		bool		nulls[6];

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, row, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
	}
	SPI_finish();

	return (Datum) 0;
}

/*
 * The entry points of set_summary and turns_to_summarize before 0.3.0,
 * which the install script of 0.1.0 names (an install of 0.1.0 updated to
 * this version runs it): a summary without a redaction generation could
 * carry redacted text, so they refuse until the extension is updated.
 */
static void
ReportOldSummaryApi(const char *name)
{
	ereport(ERROR,
			errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			errmsg("convctx.%s of version 0.2.0 is no longer supported", name),
			errhint("Run ALTER EXTENSION convctx UPDATE."));
}

PG_FUNCTION_INFO_V1(convctx_set_summary);

Datum
convctx_set_summary(PG_FUNCTION_ARGS)
{
	ReportOldSummaryApi("set_summary");
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(convctx_turns_to_summarize);

Datum
convctx_turns_to_summarize(PG_FUNCTION_ARGS)
{
	ReportOldSummaryApi("turns_to_summarize");
	PG_RETURN_VOID();
}

/* True when a message's role is one the planner context shows. */
static bool
IsPromptRole(JsonbValue *role)
{
	return JsonbStringIs(role, "user") || JsonbStringIs(role, "assistant");
}

/*
 * An array key of the state, or NULL when it is absent or null; 22023
 * when it is something else.
 */
static JsonbContainer *
StateArray(Jsonb *st, const char *key)
{
	JsonbValue	v;

	if (getKeyJsonValueFromContainer(&st->root, key, strlen(key), &v) == NULL ||
		v.type == jbvNull)
		return NULL;
	if (v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
		JsonbWrongType(JsonbValueTypeName(&v), "key \"%s\" of state must be an array", key);
	return v.val.binary.data;
}

/* Start a part of the planner context on a line of its own. */
static void
StartPart(StringInfo buf, bool *any, const char *heading)
{
	if (*any)
		appendStringInfoChar(buf, '\n');
	appendStringInfoString(buf, heading);
	*any = true;
}

/*
 * "Recent conversation:" with the last five messages as "  role: text";
 * every message is checked, whether shown or not.
 */
static void
AppendRecentMessages(StringInfo buf, bool *any, JsonbContainer *arr)
{
	int			n = JsonContainerSize(arr);
	int			k;

	for (k = 0; k < n; k++)
	{
		JsonbValue *m = getIthJsonbValueFromContainer(arr, k);
		JsonbValue	role;
		JsonbValue	text;
		bool		has_text;

		if (m->type != jbvBinary || !JsonContainerIsObject(m->val.binary.data))
			JsonbWrongType(JsonbValueTypeName(m),
						   "message %d of the state must be a JSON object", k + 1);
		if (JsonbObjectString(m->val.binary.data, "role", "a message", &role) == NULL ||
			!IsPromptRole(&role))
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("message %d of the state must have the role \"user\" or \"assistant\"",
						   k + 1),
					errdetail("No other role is shown to the model."));
		has_text = JsonbObjectString(m->val.binary.data, "text", "a message", &text) != NULL;
		if (k < n - 5)
			continue;
		if (k == Max(n - 5, 0))
			StartPart(buf, any, "Recent conversation:");
		appendStringInfoString(buf, "\n  ");
		appendBinaryStringInfo(buf, role.val.string.val, role.val.string.len);
		appendStringInfoString(buf, ": ");
		if (has_text)
			AppendPromptLineClipped(buf, text.val.string.val, text.val.string.len, 200);
	}
}

/* "Previously mentioned entities: " with at most ten; every one is checked. */
static void
AppendEntities(StringInfo buf, bool *any, JsonbContainer *arr)
{
	int			n = JsonContainerSize(arr);
	int			k;
	int			shown = 0;

	for (k = 0; k < n; k++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(arr, k);

		if (e->type != jbvString)
			JsonbWrongType(JsonbValueTypeName(e), "entity %d of the state must be a string", k + 1);
		if (shown == 10)
			continue;
		if (shown == 0)
			StartPart(buf, any, "Previously mentioned entities: ");
		else
			appendStringInfoString(buf, ", ");
		AppendPromptLine(buf, e->val.string.val, e->val.string.len);
		shown++;
	}
}

/* The planner context of a conversation state (render_conversation_state). */
static text *
RenderConversationState(Jsonb *st)
{
	StringInfoData buf;
	JsonbValue	v;
	JsonbContainer *arr;
	bool		any = false;

	if (!JB_ROOT_IS_OBJECT(st))
		JsonbWrongType(JsonbRootTypeName(st), "state must be a JSON object");
	initStringInfo(&buf);
	if (JsonbObjectString(&st->root, "summary", "state", &v) != NULL && v.val.string.len > 0)
	{
		StartPart(&buf, &any, "Conversation summary: ");
		AppendPromptLine(&buf, v.val.string.val, v.val.string.len);
	}
	if ((arr = StateArray(st, "recent_messages")) != NULL)
		AppendRecentMessages(&buf, &any, arr);
	if (JSONB_KEY(&st->root, "is_first_message", &v) != NULL && v.type != jbvNull)
	{
		if (v.type != jbvBool)
			JsonbWrongType(JsonbValueTypeName(&v),
						   "key \"is_first_message\" of state must be a boolean");
		if (v.val.boolean)
			StartPart(&buf, &any, "This is the user's first message in this conversation.");
	}
	if ((arr = StateArray(st, "referenced_entities")) != NULL)
		AppendEntities(&buf, &any, arr);
	return cstring_to_text_with_len(buf.data, buf.len);
}

PG_FUNCTION_INFO_V1(convctx_render_conversation_state);

/*
 * render_conversation_state(state) -> text
 *
 * The planner context: "Conversation summary: ...", "Recent conversation:"
 * with the last five messages as "  role: text" (text cut at 200
 * characters), the first-message note, "Previously mentioned entities: "
 * with at most ten. The state may come from the app rather than from
 * conversation_state, so every field is distrusted: a role is "user" or
 * "assistant" (anything else is 22023, never a line of its own), and the
 * summary, texts and entities are shown on one line (prompt_text.c), so
 * that none of them can start a line that poses as a message or a part.
 */
Datum
convctx_render_conversation_state(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(RenderConversationState(PG_GETARG_JSONB_P(0)));
}
