/*-------------------------------------------------------------------------
 *
 * browser.c
 *	  The conversation browser of a chat app: an identity's conversations,
 *	  newest activity first, a page at a time (list_conversations), their
 *	  titles (set_session_title, or the first live question), a
 *	  conversation's turns a page at a time in either direction
 *	  (conversation_turns), and a whole conversation as JSON
 *	  (replay_conversation).
 *
 * Every page is found by key, never by OFFSET, so that a page costs the
 * same at any depth. The list walks index session_identity_activity
 * (tenant_id, identity_id, activity_bin DESC): activity_bin is
 * last_activity_at rounded down to 10 minutes, so a session's entry moves
 * at most once in ten minutes and the updates that count activity stay
 * HOT; the list reads a page's worth of entries in the index's order,
 * to the end of the bin the page ends in, and sorts those few rows by
 * the exact time: directly from the index (ListPageRead, recent_turns.c)
 * when nothing but the owner's rights apply, else with LIST_SQL. All it
 * shows is in the session row (the default title's start in
 * first_question, which every writer that removes a turn keeps right).
 * Turns are paged by turn number on index turn_chronology.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/browser/browser.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "core/common.h"
#include "core/args.h"
#include "browser/browser.h"
#include "browser/browser_pages.h"
#include "core/spi_plans.h"
#include "core/writable.h"
#include "lifecycle/erasure.h"
#include "core/tenancy.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr list_plan, title_plan, title_exists_plan, turn_range_plan,
			turns_plan, page_forward_plan, page_backward_plan, replay_size_plan, replay_plan;

/* Longest page of list_conversations and conversation_turns. */
#define BROWSER_MAX_PAGE 1000

/* Characters of the first question that make a default title. */
#define DEFAULT_TITLE_CHARS 80

/*
 * A page of the sessions of tenant $1 linked to identity $2 whose activity
 * comes before the cursor ($3 last_activity_at, $4 session_id; infinity
 * for the first page), newest first, $5 of them.
 *
 * w reads the first $6 entries (all when NULL) of index
 * session_identity_activity from the cursor's bin down to bin $7, in the
 * index's own order (activity_bin DESC, nothing to sort), whatever the
 * planner thinks of the identity's row count: ordered
 * by the whole key, a generic plan that expects few rows sorts every
 * session of the identity instead (half a second a page at 10^7 turns).
 * p orders those rows exactly. Everything a row shows is in the session
 * row: the start of the default title (first_question, which every writer
 * that deletes or redacts a turn keeps right) and whether the session was
 * linked later, so that a page reads no other table. The last two columns, the rows w read and the bin
 * of its last row, tell ListConversations whether the page is certain:
 * every row of a bin newer than the last one read was read. They come on
 * every row, and on a row of NULLs when the page is empty.
 */
#define LIST_SQL \
	"WITH w AS (SELECT s.session_id, s.activity_bin, s.last_activity_at, s.created_at," \
	"                  s.live_turns, s.title, s.first_question, s.linked_later" \
	"             FROM convctx.session s" \
	"            WHERE s.tenant_id OPERATOR(pg_catalog.=) $1 AND s.identity_id OPERATOR(pg_catalog.=) $2" \
	"              AND s.activity_bin OPERATOR(pg_catalog.<=)" \
	"                  (CASE WHEN pg_catalog.isfinite($3)" \
	"                        THEN pg_catalog.date_bin('00:10:00'::pg_catalog.interval, $3," \
	"                               '2000-01-01 00:00:00+00'::pg_catalog.timestamptz) ELSE $3 END)" \
	"              AND s.activity_bin OPERATOR(pg_catalog.>=) $7" \
	"            ORDER BY s.activity_bin DESC LIMIT $6)," \
	" p AS (SELECT * FROM w" \
	"        WHERE w.last_activity_at OPERATOR(pg_catalog.<) $3" \
	"           OR (w.last_activity_at OPERATOR(pg_catalog.=) $3 AND w.session_id OPERATOR(pg_catalog.>) $4)" \
	"        ORDER BY w.activity_bin DESC, w.last_activity_at DESC, w.session_id LIMIT $5)" \
	"SELECT p.session_id, p.title," \
	"       CASE WHEN p.title IS NULL THEN p.first_question END," \
	"       p.created_at, p.last_activity_at, p.live_turns, p.linked_later," \
	"       p.activity_bin, c.n, c.last_bin" \
	"  FROM (SELECT pg_catalog.count(*) AS n, pg_catalog.min(w.activity_bin) AS last_bin FROM w) c" \
	"  LEFT JOIN p ON true" \
	" ORDER BY p.activity_bin DESC, p.last_activity_at DESC, p.session_id"

/* The session's title, unless erasure took its identity: NULL row then. */
#define TITLE_SQL \
	"UPDATE convctx.session SET title = $3 WHERE " SESSION_KEY \
	"   AND NOT COALESCE(identity_id OPERATOR(pg_catalog.=) 'erased'" \
	"                    OR identity_id OPERATOR(pg_catalog.^@) 'erased:', false)" \
	" RETURNING 1"
#define TITLE_EXISTS_SQL \
	"SELECT 1 FROM convctx.session WHERE " SESSION_KEY

/*
 * The turn numbers of a page: the current versions after $3 (forward,
 * $5 true) or before $4, $6 of them; returns the lowest and highest.
 */
#define TURN_RANGE_SQL \
	"SELECT pg_catalog.min(p.turn_no), pg_catalog.max(p.turn_no) FROM (" \
	"  SELECT t.turn_no FROM convctx.turn t" \
	"   WHERE " SESSION_KEY_AT("t") \
	"     AND t.replaced_by_turn_id IS NULL AND $5" \
	"     AND t.turn_no OPERATOR(pg_catalog.>) $3" \
	"   ORDER BY t.turn_no LIMIT $6) p" \
	" UNION ALL " \
	"SELECT pg_catalog.min(p.turn_no), pg_catalog.max(p.turn_no) FROM (" \
	"  SELECT t.turn_no FROM convctx.turn t" \
	"   WHERE " SESSION_KEY_AT("t") \
	"     AND t.replaced_by_turn_id IS NULL AND NOT $5" \
	"     AND t.turn_no OPERATOR(pg_catalog.<) $4" \
	"   ORDER BY t.turn_no DESC LIMIT $6) p"

/* The current versions of a page in one statement: after $3, or before $3 (newest first). */
#define PAGE_COLUMNS \
	"SELECT t.turn_no, t.turn_id, t.request_id, t.record_version, true," \
	"       t.question_neutral, t.answer_neutral, t.created_at, t.finalized_at," \
	"       t.deleted_at IS NOT NULL, t.deleted_at" \
	"  FROM convctx.turn t" \
	" WHERE " SESSION_KEY_AT("t") " AND t.replaced_by_turn_id IS NULL"
#define PAGE_FORWARD_SQL \
	PAGE_COLUMNS " AND t.turn_no OPERATOR(pg_catalog.>) $3 ORDER BY t.turn_no LIMIT $4"
#define PAGE_BACKWARD_SQL \
	PAGE_COLUMNS " AND t.turn_no OPERATOR(pg_catalog.<) $3 ORDER BY t.turn_no DESC LIMIT $4"

/* The turns numbered $3 to $4, every version when $5, oldest first. */
#define TURNS_SQL \
	"SELECT t.turn_no, t.turn_id, t.request_id, t.record_version, t.replaced_by_turn_id IS NULL," \
	"       t.question_neutral, t.answer_neutral, t.created_at, t.finalized_at," \
	"       t.deleted_at IS NOT NULL, t.deleted_at" \
	"  FROM convctx.turn t" \
	" WHERE " SESSION_KEY_AT("t") \
	"   AND t.turn_no OPERATOR(pg_catalog.>=) $3 AND t.turn_no OPERATOR(pg_catalog.<=) $4" \
	"   AND ($5 OR t.replaced_by_turn_id IS NULL)" \
	" ORDER BY t.turn_no, t.record_version"

/* What a replay of session $2 would hold, in bytes, roughly (texts, citations, 200 a turn). */
#define REPLAY_SIZE_SQL \
	"SELECT (SELECT COALESCE(pg_catalog.sum(COALESCE(pg_catalog.octet_length(t.question_neutral), 0)" \
	"            OPERATOR(pg_catalog.+) COALESCE(pg_catalog.octet_length(t.answer_neutral), 0)" \
	"            OPERATOR(pg_catalog.+) 200), 0)" \
	"          FROM convctx.turn t WHERE " SESSION_KEY_AT("t") ")" \
	"     OPERATOR(pg_catalog.+)" \
	"       (SELECT COALESCE(pg_catalog.sum(pg_catalog.octet_length(r.citations::pg_catalog.text)), 0)" \
	"          FROM convctx.turn_retrieval r WHERE " SESSION_KEY_AT("r") ")" \
	"  FROM convctx.session s WHERE " SESSION_KEY_AT("s")

/* Session $2 as the JSON a chat app renders. */
#define REPLAY_SQL \
	"SELECT pg_catalog.jsonb_build_object('session_id', s.session_id, 'identity_id', s.identity_id," \
	"         'title', s.title, 'created_at', s.created_at," \
	"         'last_activity_at', s.last_activity_at," \
	"         'turns', COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(" \
	"             'turn_no', c.turn_no, 'request_id', c.request_id," \
	"             'question', c.question_neutral, 'answer', c.answer_neutral," \
	"             'created_at', c.created_at, 'finalized_at', c.finalized_at," \
	"             'redacted', c.deleted_at IS NOT NULL, 'redacted_at', c.deleted_at," \
	"             'corrections', COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(" \
	"                   'record_version', o.record_version, 'answer', o.answer_neutral," \
	"                   'finalized_at', o.finalized_at) ORDER BY o.record_version)" \
	"                 FROM convctx.turn o" \
	"                WHERE o.tenant_id OPERATOR(pg_catalog.=) $1 AND o.session_id OPERATOR(pg_catalog.=) $2" \
	"                  AND o.turn_no OPERATOR(pg_catalog.=) c.turn_no AND o.replaced_by_turn_id IS NOT NULL)," \
	"               '[]'::pg_catalog.jsonb)," \
	"             'citations', (SELECT r.citations FROM convctx.turn_retrieval r" \
	"                WHERE r.tenant_id OPERATOR(pg_catalog.=) $1 AND r.session_id OPERATOR(pg_catalog.=) $2" \
	"                  AND r.turn_no OPERATOR(pg_catalog.=) c.turn_no)) ORDER BY c.turn_no)" \
	"           FROM convctx.turn c" \
	"          WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.session_id OPERATOR(pg_catalog.=) $2" \
	"            AND c.replaced_by_turn_id IS NULL), '[]'::pg_catalog.jsonb))," \
	"       CASE WHEN s.title IS NULL THEN s.first_question END" \
	"  FROM convctx.session s WHERE " SESSION_KEY_AT("s")

/*
 * A default title from the start of a question: runs of white space made
 * one space, none at either end, at most DEFAULT_TITLE_CHARS characters;
 * NULL when nothing is left. Cheaper here than a regular expression in
 * the statement, for every row, and the same for the list and a replay.
 */
static text *
DefaultTitle(text *question)
{
	const char *p = VARDATA_ANY(question);
	const char *end = p + VARSIZE_ANY_EXHDR(question);
	StringInfoData buf;
	int			chars = 0;
	bool		space = false;

	initStringInfo(&buf);
	while (p < end && chars < DEFAULT_TITLE_CHARS)
	{
		int			len = pg_mblen(p);

		if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v')
		{
			space = true;
			p++;
			continue;
		}
		if (space && buf.len > 0)
		{
			/* a space only between two characters, within the limit */
			if (chars + 1 >= DEFAULT_TITLE_CHARS)
				break;
			appendStringInfoChar(&buf, ' ');
			chars++;
		}
		space = false;
		appendBinaryStringInfo(&buf, p, Min(len, end - p));
		p += len;
		chars++;
	}
	return buf.len > 0 ? cstring_to_text_with_len(buf.data, buf.len) : NULL;
}

/* A page size argument: 1 to BROWSER_MAX_PAGE. */
static int32
ArgPageSize(FunctionCallInfo fcinfo, int argno)
{
	return ArgLimitAtMost(fcinfo, argno, "page_size", BROWSER_MAX_PAGE, NULL);
}

/*
 * The cursor of a listed conversation: its last activity (microseconds
 * since 2000) and its session id, "<microseconds>:<session id>".
 */
static text *
ListCursor(TimestampTz activity, text *session_id)
{
	return cstring_to_text(psprintf(INT64_FORMAT ":%s", (int64) activity, text_to_cstring(session_id)));
}

/* Read a cursor of ListCursor; 22023 when it is not one. */
static void
ReadListCursor(text *cursor, TimestampTz *activity, text **session_id)
{
	char	   *s = text_to_cstring(cursor);
	char	   *colon = strchr(s, ':');
	char	   *end;
	int64		us;

	errno = 0;
	us = colon && (isdigit((unsigned char) s[0]) || s[0] == '-') ? strtoi64(s, &end, 10) : 0;
	if (colon == NULL || !(isdigit((unsigned char) s[0]) || s[0] == '-') || end != colon ||
		errno != 0 || colon == s || colon[1] == '\0' ||
		!(IS_VALID_TIMESTAMP(us) || TIMESTAMP_NOT_FINITE(us)))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("invalid conversation cursor"),
				errdetail("A cursor is the \"cursor\" column of a row list_conversations returned."));
	CheckIdLength(strlen(colon + 1), "the session id of the cursor");
	*activity = (TimestampTz) us;
	*session_id = cstring_to_text(colon + 1);
}

/*
 * Put the page of identity's conversations after cursor into result:
 * read from the index directly when it may be (ListPageRead), else
 * LIST_SQL reads a few more index entries than the page holds. When the
 * page may reach into the bin of the last entry read (a bin can hold more
 * than was read), it runs again reading every entry down to the end of
 * that bin; when the page is still short then (the cursor's own bin held
 * many sessions already listed), it goes on with four times as many
 * entries. A bin holds the sessions active in ten minutes, so one run is
 * the rule.
 */
/* The page read from the index directly, when it may be (recent_turns.c). */
static bool
ListFromIndex(text *tenant, text *identity, TimestampTz activity, text *after_session,
			  int32 page_size, Tuplestorestate *result, TupleDesc desc)
{
	ListPageRow *rows;
	int			count;
	int			i;

	if (!ListPageRead(tenant, identity, activity, after_session, page_size, &rows, &count))
		return false;
	for (i = 0; i < count; i++)
	{
		ListPageRow *r = &rows[i];
		Datum		out[8];
		bool		nulls[8] = {false, false, false, false, false, false, false, false};
		text	   *title = r->title ? r->title :
			(r->first_question ? DefaultTitle(r->first_question) : NULL);

		out[0] = PointerGetDatum(r->session_id);
		out[1] = PointerGetDatum(title);
		nulls[1] = title == NULL;
		out[2] = BoolGetDatum(r->title == NULL);
		out[3] = TimestampTzGetDatum(r->created_at);
		out[4] = TimestampTzGetDatum(r->last_activity_at);
		out[5] = Int64GetDatum(r->live_turns);
		out[6] = BoolGetDatum(r->linked_later);
		out[7] = PointerGetDatum(ListCursor(r->last_activity_at, r->session_id));
		tuplestore_putvalues(result, desc, out, nulls);
	}
	return true;
}

/*
 * The page by LIST_SQL, in SPI_tuptable (SPI connected): entries of the
 * activity index first, then whole bins when a bin was cut (see above).
 */
static void
ListPageBySql(Datum *values, TimestampTz down_to, int32 page_size)
{
	Oid			argtypes[7] = {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, INT4OID, INT8OID,
	TIMESTAMPTZOID};
	char		nulls[7] = "       ";
	int64		entries = (int64) page_size + 16;

	for (;;)
	{
		bool		whole_bins = !TIMESTAMP_IS_NOBEGIN(down_to);
		bool		isnull;
		int64		read;
		TimestampTz last_bin_read;
		uint64		rows;

		/* $6 entries, or (whole_bins) every entry down to bin $7 */
		values[5] = Int64GetDatum(entries);
		nulls[5] = whole_bins ? 'n' : ' ';
		values[6] = TimestampTzGetDatum(down_to);
		SpiRunPlan(SpiKeptPlan(&list_plan, LIST_SQL, 7, argtypes), values, nulls, true, 0,
				   SPI_OK_SELECT);
		read = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 9, &isnull));
		(void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		rows = isnull ? 0 : SPI_processed;
		/* fewer entries than asked for: the identity's last session was read */
		if (!whole_bins && read < entries)
			break;
		/* a full page out of whole bins: every row sorting before its last was read */
		if (whole_bins && rows == (uint64) page_size)
			break;
		if (!whole_bins && rows == (uint64) page_size)
		{
			last_bin_read = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
															  SPI_tuptable->tupdesc, 10, &isnull));
			/* the whole page in bins newer than the last one read */
			if (DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[rows - 1],
												  SPI_tuptable->tupdesc, 8, &isnull)) > last_bin_read)
				break;
			/* read that bin to its end */
			down_to = last_bin_read;
		}
		else
		{
			/* a short page: more entries, from the cursor's bin on */
			entries = Max(entries, read) * 4;
			TIMESTAMP_NOBEGIN(down_to);
		}
		CHECK_FOR_INTERRUPTS();
	}
}

/* The rows of LIST_SQL's page into result. */
static void
ListPutRows(SPITupleTable *page, uint64 page_rows, Tuplestorestate *result, TupleDesc desc)
{
	uint64		i;

	for (i = 0; i < page_rows; i++)
	{
		HeapTuple	row = page->vals[i];
		TupleDesc	rd = page->tupdesc;
		Datum		out[8];
		bool		nulls[8];
		bool		title_null;
		bool		default_null;
		Datum		title = SPI_getbinval(row, rd, 2, &title_null);
		Datum		default_title = SPI_getbinval(row, rd, 3, &default_null);
		Datum		linked;
		bool		linked_null;

		out[0] = SPI_getbinval(row, rd, 1, &nulls[0]);
		if (nulls[0])
			break;				/* the row of an empty page */
		linked = SPI_getbinval(row, rd, 7, &linked_null);
		/* the app's title, else the first live question */
		out[1] = title_null ? (default_null ? (Datum) 0
							   : PointerGetDatum(DefaultTitle(DatumGetTextPP(default_title)))) : title;
		nulls[1] = DatumGetPointer(out[1]) == NULL;
		out[2] = BoolGetDatum(title_null);
		nulls[2] = false;
		out[3] = SPI_getbinval(row, rd, 4, &nulls[3]);
		out[4] = SPI_getbinval(row, rd, 5, &nulls[4]);
		out[5] = SPI_getbinval(row, rd, 6, &nulls[5]);
		out[6] = linked;
		nulls[6] = linked_null;
		if (nulls[6])
			out[6] = BoolGetDatum(false), nulls[6] = false;
		out[7] = PointerGetDatum(ListCursor(DatumGetTimestampTz(out[4]), DatumGetTextPP(out[0])));
		nulls[7] = false;
		tuplestore_putvalues(result, desc, out, nulls);
	}
}

static void
ListConversations(text *tenant, text *identity, text *cursor, int32 page_size,
				  Tuplestorestate *result, TupleDesc desc)
{
	Datum		values[7];
	TimestampTz activity;
	text	   *after_session;
	TimestampTz down_to;

	if (cursor != NULL)
		ReadListCursor(cursor, &activity, &after_session);
	else
	{
		TIMESTAMP_NOEND(activity);
		after_session = cstring_to_text("");
	}
	if (ListFromIndex(tenant, identity, activity, after_session, page_size, result, desc))
		return;

	values[0] = PointerGetDatum(tenant);
	values[1] = PointerGetDatum(identity);
	values[2] = TimestampTzGetDatum(activity);
	values[3] = PointerGetDatum(after_session);
	values[4] = Int32GetDatum(page_size);
	TIMESTAMP_NOBEGIN(down_to);
	SPI_connect();
	ListPageBySql(values, down_to, page_size);
	ListPutRows(SPI_tuptable, SPI_processed, result, desc);
	SPI_finish();
}

PG_FUNCTION_INFO_V1(convctx_list_conversations);

/*
 * list_conversations(identity_id, cursor, page_size) -> setof (session_id,
 * title, title_is_default, created_at, last_activity_at, live_turns,
 * linked_later, cursor)
 */
Datum
convctx_list_conversations(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *identity = ArgRequiredId(fcinfo, 0, "identity_id");
	text	   *cursor = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	int32		page_size = ArgPageSize(fcinfo, 2);

	/* what erasure leaves behind is nobody's sidebar */
	if (IsErasedIdentity(identity))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("identity \"%s\" is what erase_identity leaves in place of an identity",
					   text_to_cstring(identity)),
				errdetail("The sessions of erased identities are listed for nobody."));

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	ListConversations(CurrentTenant(), identity, cursor, page_size, rsinfo->setResult, rsinfo->setDesc);
	return (Datum) 0;
}

/* Set (or with NULL reset to the default) a session's title; P0002 when there is no session. */
static void
SetSessionTitle(text *tenant, text *session_id, text *title)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id), PointerGetDatum(title)};
	char		nulls[3] = {' ', ' ', title ? ' ' : 'n'};

	SPI_connect();
	SpiRunPlan(SpiKeptPlan(&title_plan, TITLE_SQL, 3, argtypes), values, nulls, false, 0,
			   SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 0)
	{
		SpiRunSessionPlan(&title_exists_plan, TITLE_EXISTS_SQL, tenant, session_id, true, 0, SPI_OK_SELECT);
		if (SPI_processed > 0)
			ereport(ERROR,
					errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					errmsg("session \"%s\" was erased", text_to_cstring(session_id)),
					errdetail("erase_identity took the identity of this session; it takes no title."));
		ereport(ERROR,
				errcode(ERRCODE_NO_DATA_FOUND),
				errmsg("session \"%s\" does not exist", text_to_cstring(session_id)));
	}
	SPI_finish();
}

/* 22023 for a title that is empty or only white space, 54000 for a long one. */
void
CheckSessionTitle(text *title)
{
	const char *p = VARDATA_ANY(title);
	const char *end = p + VARSIZE_ANY_EXHDR(title);

	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v'))
		p++;
	if (p == end)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("title must not be empty or only white space"),
				errhint("NULL gives the session back its default title, its first question."));
	CheckIdLength(VARSIZE_ANY_EXHDR(title), "title");
}

PG_FUNCTION_INFO_V1(convctx_set_session_title);

/*
 * set_session_title(session_id, title) -> void
 */
Datum
convctx_set_session_title(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(set_session_title);
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	text	   *title = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);

	if (title != NULL)
		CheckSessionTitle(title);
	SetSessionTitle(CurrentTenant(), session_id, title);
	PG_RETURN_VOID();
}

/*
 * Put a page of a session's turns into result: page_size turns after
 * after_turn_no (forward) or before before_turn_no, oldest first, every
 * version with versions.
 */
static void
ConversationTurns(text *tenant, text *session_id, bool forward, int64 after, int64 before,
				  int32 page_size, bool versions, Tuplestorestate *result, TupleDesc desc)
{
	Oid			range_types[6] = {TEXTOID, TEXTOID, INT8OID, INT8OID, BOOLOID, INT4OID};
	Datum		range_values[6] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
		Int64GetDatum(after), Int64GetDatum(before), BoolGetDatum(forward), Int32GetDatum(page_size)};
	Oid			turns_types[5] = {TEXTOID, TEXTOID, INT8OID, INT8OID, BOOLOID};
	Datum		turns_values[5];
	bool		isnull;
	uint64		i;
	int			row;

	if (!versions)
	{
		/* current versions only: read from the index, as recent_turns */
		if (TurnPageRead(tenant, session_id, forward, forward ? after : before, page_size,
						 result, desc))
			return;
	}
	SPI_connect();
	if (!versions)
	{
		/* or in one statement, the page read backwards put in order */
		Oid			page_types[4] = {TEXTOID, TEXTOID, INT8OID, INT4OID};
		Datum		page_values[4] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
			Int64GetDatum(forward ? after : before), Int32GetDatum(page_size)};

		SpiRunPlan(forward ? SpiKeptPlan(&page_forward_plan, PAGE_FORWARD_SQL, 4, page_types)
				   : SpiKeptPlan(&page_backward_plan, PAGE_BACKWARD_SQL, 4, page_types),
				   page_values, NULL, true, 0, SPI_OK_SELECT);
		for (i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[forward ? i : SPI_processed - 1 - i];
			Datum		out[11];
			bool		nulls[11];
			int			c;

			for (c = 0; c < 11; c++)
				out[c] = SPI_getbinval(tuple, SPI_tuptable->tupdesc, c + 1, &nulls[c]);
			tuplestore_putvalues(result, desc, out, nulls);
		}
		SPI_finish();
		return;
	}
	SpiRunPlan(SpiKeptPlan(&turn_range_plan, TURN_RANGE_SQL, 6, range_types), range_values, NULL,
			   true, 0, SPI_OK_SELECT);
	/* one row of the two has the range: the other direction's is NULL */
	row = forward ? 0 : 1;
	turns_values[2] = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
	{
		SPI_finish();
		return;
	}
	turns_values[3] = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 2, &isnull);
	turns_values[0] = PointerGetDatum(tenant);
	turns_values[1] = PointerGetDatum(session_id);
	turns_values[4] = BoolGetDatum(versions);
	SpiRunPlan(SpiKeptPlan(&turns_plan, TURNS_SQL, 5, turns_types), turns_values, NULL,
			   true, 0, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
	{
		Datum		out[11];
		bool		nulls[11];
		int			c;

		for (c = 0; c < 11; c++)
			out[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1, &nulls[c]);
		tuplestore_putvalues(result, desc, out, nulls);
	}
	SPI_finish();
}

PG_FUNCTION_INFO_V1(convctx_conversation_turns);

/*
 * conversation_turns(session_id, after_turn_no, before_turn_no, page_size,
 * include_versions) -> setof (turn_no, turn_id, request_id,
 * record_version, is_current, question, answer, created_at, finalized_at,
 * redacted, redacted_at)
 */
Datum
convctx_conversation_turns(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	bool		forward = !PG_ARGISNULL(1);
	int64		after = forward ? PG_GETARG_INT64(1) : 0;
	int64		before = PG_ARGISNULL(2) ? PG_INT64_MAX : PG_GETARG_INT64(2);
	int32		page_size = ArgPageSize(fcinfo, 3);
	bool		versions = PG_ARGISNULL(4) ? false : PG_GETARG_BOOL(4);

	if (forward && !PG_ARGISNULL(2))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("give after_turn_no or before_turn_no, not both"),
				errhint("after_turn_no pages forward, before_turn_no back; neither gives the newest turns."));
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	ConversationTurns(CurrentTenant(), session_id, forward, after, before, page_size, versions,
					  rsinfo->setResult, rsinfo->setDesc);
	return (Datum) 0;
}

/*
 * A session as JSON, or NULL when there is none; 54000 when it would be
 * larger than max_bytes.
 */
static Datum
ReplayConversation(text *tenant, text *session_id, int32 max_bytes, bool *isnull)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {PointerGetDatum(tenant), PointerGetDatum(session_id)};
	Datum		result;
	Datum		start;
	bool		no_default;
	text	   *title;
	int64		estimate;

	SPI_connect();
	/* refuse before building what would be too large */
	SpiRunPlan(SpiKeptPlan(&replay_size_plan, REPLAY_SIZE_SQL, 2, argtypes), values, NULL,
			   true, 0, SPI_OK_SELECT);
	if (SPI_processed == 0)
	{
		SPI_finish();
		*isnull = true;
		return (Datum) 0;
	}
	estimate = SpiFirstInt8();
	if (estimate > max_bytes)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("conversation \"%s\" is too large to replay in one value", text_to_cstring(session_id)),
				errdetail("It holds about " INT64_FORMAT " bytes; max_bytes is %d.", estimate, max_bytes),
				errhint("Page through it with conversation_turns(), or give a larger max_bytes."));
	SpiRunPlan(SpiKeptPlan(&replay_plan, REPLAY_SQL, 2, argtypes), values, NULL, true, 0, SPI_OK_SELECT);
	result = SpiFirstDatumCopy(1, isnull);
	start = SpiFirstDatumCopy(2, &no_default);
	SPI_finish();

	/*
	 * The default title, folded as the list folds it; after SPI_finish, so
	 * that it is made in the caller's memory, with the copies above.
	 */
	if (!*isnull && !no_default && (title = DefaultTitle(DatumGetTextPP(start))) != NULL)
	{
		Datum		key = CStringGetTextDatum("title");
		Datum		path = PointerGetDatum(construct_array(&key, 1, TEXTOID, -1, false, TYPALIGN_INT));
		JsonbValue	v;

		v.type = jbvString;
		v.val.string.val = VARDATA_ANY(title);
		v.val.string.len = VARSIZE_ANY_EXHDR(title);
		result = DirectFunctionCall4(jsonb_set, result, path, PointerGetDatum(JsonbValueToJsonb(&v)),
									 BoolGetDatum(true));
	}
	if (!*isnull && VARSIZE_ANY_EXHDR(DatumGetPointer(result)) > (Size) max_bytes)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("conversation \"%s\" is too large to replay in one value", text_to_cstring(session_id)),
				errdetail("It has %zu bytes; max_bytes is %d.", VARSIZE_ANY_EXHDR(DatumGetPointer(result)), max_bytes),
				errhint("Page through it with conversation_turns(), or give a larger max_bytes."));
	return result;
}

PG_FUNCTION_INFO_V1(convctx_replay_conversation);

/*
 * replay_conversation(session_id, max_bytes) -> jsonb
 */
Datum
convctx_replay_conversation(PG_FUNCTION_ARGS)
{
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	int32		max_bytes = ArgLimit(fcinfo, 1, "max_bytes");
	bool		isnull;
	Datum		result = ReplayConversation(CurrentTenant(), session_id, max_bytes, &isnull);

	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}
