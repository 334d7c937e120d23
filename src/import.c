/*-------------------------------------------------------------------------
 *
 * import.c
 *	  import_records: write a batch of convctx.jsonl records (the lines
 *	  `convctx export` writes between its header and trailer, or what
 *	  `convctx import` made of another store's history) into the current
 *	  tenant, with their original ids and timestamps
 *	  (docs/import-export.md).
 *
 * COPY FROM is refused on tables with row-level security, no role but the
 * owner may insert into convctx's tables, and start_turn stamps the time
 * of the call, so an import needs its own writer. It takes the records as
 * text and parses each with jsonb's own parser, so that no number or
 * character changes on the way; it applies the rules of the API (the
 * tenant of the caller, one identity per session with refusals audited,
 * the metadata allowlist, the size limits, tombstones without text) and
 * recomputes what convctx derives (a session's live counts, its newest
 * turn, the messages a summary covers), checking them against the record
 * when it states them.
 *
 * Records come grouped by conversation: a session record, then its
 * turns, retrievals, clarifications, summary and context. A group whose
 * session exists already is merged (MergeGroup: what the file has and the
 * database lacks is added, what both have skipped with its reason, a
 * conflict refused), or with on_conflict 'error' refused, so that running
 * an import again writes nothing twice. A
 * context record of another conversation stands alone. Any error rolls
 * back the whole batch; its context names the record ("import record 7
 * (turn of session "s1")") so that the tool can tell which group failed.
 *
 * Administrators only; the rows are written as the extension's owner.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/import.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"

#include "convctx.h"
#include "args.h"
#include "audit.h"
#include "browser.h"
#include "context.h"
#include "jsonb_util.h"
#include "metadata.h"
#include "prompt_citations.h"
#include "prompt_clarification.h"
#include "session_link.h"
#include "settings.h"
#include "spi_util.h"
#include "tenancy.h"
#include "turns.h"
#include "variant.h"

/* The record types of the format, in the order of their counts. */
typedef enum RecordType
{
	REC_SESSION,
	REC_TURN,
	REC_RETRIEVAL,
	REC_CLARIFICATION,
	REC_SUMMARY,
	REC_CONTEXT,
	REC_TYPES
} RecordType;

static const char *const record_type_names[REC_TYPES] = {
	"session", "turn", "retrieval", "clarification", "summary", "context"
};
static const char *const record_type_plurals[REC_TYPES] = {
	"sessions", "turns", "retrievals", "clarifications", "summaries", "contexts"
};

/* The keys each record type may have, "type" included. */
static const char *const session_keys[] = {
	"type", "session_id", "identity_id", "linked_at", "created_at", "last_activity_at",
	"last_turn_no", "live_turns", "live_answers", "summary_through_turn_no", "redactions", "title", NULL
};
static const char *const turn_keys[] = {
	"type", "session_id", "turn_id", "turn_no", "request_id", "record_version",
	"replaced_by_turn_id", "identity_id", "created_at", "finalized_at", "deleted_at",
	"redaction", "translate_chat", "question_neutral", "answer_neutral",
	"question_translated", "answer_translated", "answer_translated_is_fallback",
	"metadata", "pipeline_name", "consultant", "repository", NULL
};
static const char *const retrieval_keys[] = {
	"type", "session_id", "turn_no", "chunks", "citations", "recorded_at", NULL
};
static const char *const clarification_keys[] = {
	"type", "session_id", "turn_no", "questions", "inferred_context", "recorded_at", NULL
};
static const char *const summary_keys[] = {
	"type", "session_id", "summary", "through_turn_no", "covered_messages", "updated_at", NULL
};
static const char *const context_keys[] = {
	"type", "conversation_id", "context", "user_id", "created_at", "updated_at", NULL
};
static const char *const *const record_keys[REC_TYPES] = {
	session_keys, turn_keys, retrieval_keys, clarification_keys, summary_keys, context_keys
};

/* What the caller asked for, the same for the whole batch. */
typedef struct ImportOptions
{
	text	   *tenant;
	bool		error_on_conflict;	/* on_conflict 'error' rather than 'skip' */
	bool		allow_anonymous;	/* keep anonymous sessions the purge would take */
	text	   *as_identity;	/* identity for anonymous sessions, or NULL */
	Jsonb	   *identity_map;	/* {"old": "new", ...}, or NULL */
	TimestampTz latest;			/* no time may be later (a day after the call) */
	HTAB	   *seen;			/* session and conversation ids of this batch */
} ImportOptions;

/* A turn record of the group being read, checked, not written yet. */
typedef struct TurnRow
{
	int			recno;
	pg_uuid_t  *turn_id;
	int64		turn_no;
	text	   *request_id;
	int32		version;
	pg_uuid_t  *replaced_by;	/* NULL for the current version */
	text	   *identity;
	TimestampTz created_at;
	TimestampTz finalized_at;	/* with finalized */
	TimestampTz deleted_at;		/* with tombstone */
	bool		finalized;
	bool		tombstone;
	int64		redaction;		/* with has_redaction */
	bool		has_redaction;
	bool		translate_chat;
	text	   *texts[4];		/* question, answer, neutral then translated */
	bool		fallback;		/* answer_translated_is_fallback, with has_fallback */
	bool		has_fallback;
	Jsonb	   *metadata;
	text	   *labels[3];		/* pipeline_name, consultant, repository */
} TurnRow;

/* A retrieval or clarification record of the group: (turn_no, two jsonb, time). */
typedef struct TurnDataRow
{
	int			recno;
	RecordType	type;
	int64		turn_no;
	Jsonb	   *first;			/* chunks, questions */
	Jsonb	   *second;			/* citations, inferred_context */
	TimestampTz recorded_at;
} TurnDataRow;

/*
 * The session group being read: its session record's values, then its
 * records, all kept (in the group's memory context) until the group ends,
 * when it is checked whole and written.
 */
typedef struct SessionGroup
{
	MemoryContext cxt;			/* the group's values; reset when it ends */
	bool		open;
	bool		existing;		/* the session exists: the group is merged */
	text	   *stored_identity;	/* an existing session's identity (after a link) */
	int64		stored_last_turn_no;	/* an existing session's newest turn number */
	int			recno;			/* its session record */
	text	   *session_id;
	char	   *session_name;	/* for messages */
	text	   *identity;		/* after identity_map and as_identity */
	bool		link_now;		/* linked by as_identity: linked_at is now */
	TimestampTz linked_at;
	TimestampTz created_at;
	TimestampTz last_activity_at;
	/* what the session record states (has_* false: not stated) */
	bool		has_last_turn_no,
				has_live_turns,
				has_live_answers,
				has_summary_through,
				has_redactions;
	int64		last_turn_no,
				live_turns,
				live_answers,
				summary_through_stated,
				redactions;
	bool		summary_through_null;
	/* its records */
	TurnRow    *turns;
	int			nturns;
	int			maxturns;
	TurnDataRow *data;
	int			ndata;
	int			maxdata;
	int			summary_recno;	/* 0: none */
	text	   *summary;
	int64		summary_through;
	int64		summary_covered;	/* -1: not stated */
	TimestampTz summary_updated_at;
	int			context_recno;	/* 0: none */
	Jsonb	   *context;
	text	   *context_user;
	TimestampTz context_created_at;
	TimestampTz context_updated_at;
} SessionGroup;

/* The record being read, for the error context and the messages. */
typedef struct ImportRecord
{
	int			recno;			/* 1-based, in the batch */
	RecordType	type;
	bool		type_known;
	JsonbContainer *obj;
	const char *group_id;		/* its session or conversation id, once read */
} ImportRecord;

/*
 * Why a record was skipped: the database has it as the file has it, has a
 * later state of it (finalized, corrected or written again here since the
 * export), redacted its turn, or removed its turn (retention, the
 * anonymous cap) after numbering it.
 */
typedef enum SkipReason
{
	SKIP_THERE,
	SKIP_CHANGED,
	SKIP_REDACTED,
	SKIP_REMOVED,
	SKIP_REASONS
} SkipReason;

static const char *const skip_reason_names[SKIP_REASONS] = {
	"already there", "changed here", "redacted here", "removed here"
};

typedef struct ImportCounts
{
	int64		imported[REC_TYPES];
	int64		skipped[REC_TYPES];
	int64		skipped_why[REC_TYPES][SKIP_REASONS];
	int64		metadata_keys_dropped;
} ImportCounts;

static void
CountSkipped(ImportCounts *counts, RecordType type, SkipReason why)
{
	counts->skipped[type]++;
	counts->skipped_why[type][why]++;
}

/* Largest turn number, version, redaction generation or count taken. */
#define IMPORT_MAX_NUMBER PG_INT32_MAX

/* Latest time taken: the call's plus a day (clocks of other servers). */
#define IMPORT_CLOCK_SKEW (USECS_PER_DAY)

static SPIPlanPtr session_insert_plan = NULL;
static SPIPlanPtr session_existing_plan = NULL;
static SPIPlanPtr link_insert_plan = NULL;
static SPIPlanPtr turns_insert_plan = NULL;
static SPIPlanPtr retrieval_insert_plan = NULL;
static SPIPlanPtr clarification_insert_plan = NULL;
static SPIPlanPtr summary_insert_plan = NULL;
static SPIPlanPtr context_insert_plan = NULL;
static SPIPlanPtr session_finish_plan = NULL;
static SPIPlanPtr session_identity_plan = NULL;
static SPIPlanPtr identity_erased_plan = NULL;
static SPIPlanPtr stored_turns_plan = NULL;
static SPIPlanPtr turn_update_plan = NULL;
static SPIPlanPtr stored_retrieval_plan = NULL;
static SPIPlanPtr stored_clarification_plan = NULL;
static SPIPlanPtr stored_summary_plan = NULL;
static SPIPlanPtr context_same_plan = NULL;
static SPIPlanPtr session_merge_plan = NULL;
static SPIPlanPtr summary_covered_plan = NULL;

/* $1 tenant, $2 session, $3 identity, $4 created_at, $5 last_activity_at, $6 title */
#define SESSION_INSERT_SQL \
	"INSERT INTO convctx.session (tenant_id, session_id, identity_id, created_at, last_activity_at, title)" \
	" VALUES ($1, $2, $3, $4, $5, $6)" \
	" ON CONFLICT (tenant_id, session_id) DO NOTHING" \
	" RETURNING 1"

/*
 * The identity and newest turn number of an existing session, locked as
 * every writer locks it: no turn is started, finalized, replaced or
 * redacted in it until the import commits.
 */
#define SESSION_EXISTING_SQL \
	"SELECT identity_id, last_turn_no FROM convctx.session WHERE " SESSION_KEY " FOR UPDATE"

/* The stored turns of an existing session, to merge the file's with. */
#define STORED_TURNS_SQL \
	"SELECT turn_id, turn_no, request_id, record_version, replaced_by_turn_id, created_at," \
	"       finalized_at, deleted_at, translate_chat, question_neutral, answer_neutral," \
	"       question_translated, answer_translated, answer_translated_is_fallback, metadata," \
	"       pipeline_name, consultant, repository" \
	"  FROM convctx.turn WHERE " SESSION_KEY \
	" ORDER BY turn_no, record_version"

/* A stored turn that the file has finalized or corrected since: $3 its id. */
#define TURN_UPDATE_SQL \
	"UPDATE convctx.turn SET finalized_at = $4, answer_neutral = $5, answer_translated = $6," \
	"       answer_translated_is_fallback = $7, metadata = $8, replaced_by_turn_id = $9" \
	" WHERE " SESSION_KEY " AND turn_id OPERATOR(pg_catalog.=) $3"

/* The stored retrieval, clarification or summary of an existing session. */
#define STORED_RETRIEVAL_SQL \
	"SELECT chunks, citations, recorded_at FROM convctx.turn_retrieval" \
	" WHERE " SESSION_KEY " AND turn_no OPERATOR(pg_catalog.=) $3"
#define STORED_CLARIFICATION_SQL \
	"SELECT questions, inferred_context, recorded_at FROM convctx.clarification" \
	" WHERE " SESSION_KEY " AND turn_no OPERATOR(pg_catalog.=) $3"
#define STORED_SUMMARY_SQL \
	"SELECT summary, through_turn_no, updated_at FROM convctx.session_summary WHERE " SESSION_KEY

/* Is the stored context the file's ($3 context, $4 updated_at)? */
#define CONTEXT_SAME_SQL \
	"SELECT context_json OPERATOR(pg_catalog.=) $3 AND updated_at OPERATOR(pg_catalog.=) $4" \
	"  FROM convctx.conversation_context" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND conversation_id OPERATOR(pg_catalog.=) $2"

/*
 * The derived values of a merged session, counted again from its rows as
 * the API keeps them: $3 the file's newest turn number, $4 its last
 * activity, $5 its redactions. Returns the live turns.
 */
/*
 * What the conversation browser reads from the session row (s), from the
 * turns and link as they are now: the start of the first live question,
 * and whether the session was linked after it was created.
 */
#define SESSION_BROWSER_SET \
	"  first_question = " FIRST_LIVE_QUESTION("$1", "$2", "") "," \
	"  linked_later = COALESCE((SELECT l.linked_at OPERATOR(pg_catalog.>) s.created_at" \
	"                             FROM convctx.session_link l WHERE " SESSION_KEY_AT("l") "), false)"

#define LIVE_TURN_OF(alias) \
	" FROM convctx.turn t WHERE " SESSION_KEY_AT("t") \
	"   AND t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL"
#define SESSION_MERGE_SQL \
	"UPDATE convctx.session s SET" \
	"  last_turn_no = GREATEST(s.last_turn_no, $3)," \
	"  last_activity_at = GREATEST(s.last_activity_at, $4)," \
	"  redactions = GREATEST(s.redactions, $5)," \
	"  live_turns = (SELECT pg_catalog.count(*)" LIVE_TURN_OF("t") ")," \
	"  live_answers = (SELECT pg_catalog.count(t.finalized_at)" LIVE_TURN_OF("t") ")," \
	"  summary_through_turn_no = (SELECT m.through_turn_no FROM convctx.session_summary m" \
	"                              WHERE " SESSION_KEY_AT("m") ")," \
	SESSION_BROWSER_SET \
	" WHERE " SESSION_KEY_AT("s") \
	" RETURNING s.live_turns"
#define SUMMARY_COVERED_SQL \
	"UPDATE convctx.session_summary m SET covered_messages =" \
	"  (SELECT pg_catalog.count(*) OPERATOR(pg_catalog.+) pg_catalog.count(t.finalized_at)" LIVE_TURN_OF("t") \
	"      AND t.turn_no OPERATOR(pg_catalog.<=) m.through_turn_no)" \
	" WHERE " SESSION_KEY_AT("m")

#define LINK_INSERT_SQL \
	"INSERT INTO convctx.session_link (tenant_id, session_id, identity_id, linked_at)" \
	" VALUES ($1, $2, $3, $4)"

/* The turns of a group, one array per column, in one statement. */
#define TURNS_INSERT_SQL \
	"INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id," \
	" record_version, replaced_by_turn_id, identity_id, created_at, finalized_at, deleted_at," \
	" redaction, translate_chat, question_neutral, answer_neutral, question_translated," \
	" answer_translated, answer_translated_is_fallback, metadata, pipeline_name, consultant," \
	" repository)" \
	" SELECT $1, $2, u.* FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4)," \
	"   pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), pg_catalog.unnest($8)," \
	"   pg_catalog.unnest($9), pg_catalog.unnest($10), pg_catalog.unnest($11), pg_catalog.unnest($12)," \
	"   pg_catalog.unnest($13), pg_catalog.unnest($14), pg_catalog.unnest($15), pg_catalog.unnest($16)," \
	"   pg_catalog.unnest($17), pg_catalog.unnest($18), pg_catalog.unnest($19), pg_catalog.unnest($20)," \
	"   pg_catalog.unnest($21), pg_catalog.unnest($22)) AS u"

/* Written again (a newer one from the file) as record_retrieval writes it. */
#define RETRIEVAL_INSERT_SQL \
	"INSERT INTO convctx.turn_retrieval (tenant_id, session_id, turn_no, chunks, citations, recorded_at)" \
	" VALUES ($1, $2, $3, $4, $5, $6)" \
	" ON CONFLICT (tenant_id, session_id, turn_no) DO UPDATE" \
	" SET chunks = EXCLUDED.chunks, citations = EXCLUDED.citations, recorded_at = EXCLUDED.recorded_at"

#define CLARIFICATION_INSERT_SQL \
	"INSERT INTO convctx.clarification (tenant_id, session_id, turn_no, questions, inferred_context," \
	" recorded_at) VALUES ($1, $2, $3, $4, $5, $6)" \
	" ON CONFLICT (tenant_id, session_id, turn_no) DO UPDATE" \
	" SET questions = EXCLUDED.questions, inferred_context = EXCLUDED.inferred_context," \
	"     recorded_at = EXCLUDED.recorded_at"

/* Written again (a newer one from the file) as set_summary writes it. */
#define SUMMARY_INSERT_SQL \
	"INSERT INTO convctx.session_summary (tenant_id, session_id, summary, through_turn_no," \
	" covered_messages, updated_at) VALUES ($1, $2, $3, $4, $5, $6)" \
	" ON CONFLICT (tenant_id, session_id) DO UPDATE" \
	" SET summary = EXCLUDED.summary, through_turn_no = EXCLUDED.through_turn_no," \
	"     covered_messages = EXCLUDED.covered_messages, updated_at = EXCLUDED.updated_at"

/* A context that exists already is left alone: NULL row. */
#define CONTEXT_INSERT_SQL \
	"INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json, user_id," \
	" created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)" \
	" ON CONFLICT (tenant_id, conversation_id) DO NOTHING" \
	" RETURNING 1"

/* The identity of a session, if it exists (a context's conversation). */
#define SESSION_IDENTITY_SQL \
	"SELECT identity_id FROM convctx.session WHERE " SESSION_KEY

/*
 * Whether an identity was erased in tenant $1, by its keyed stand-ins $2:
 * sessions erase_identity left linked to the stand-in, or the audit row of
 * the erasure (index audit_log_erasures).
 */
#define IDENTITY_ERASED_SQL \
	"SELECT EXISTS (SELECT 1 FROM convctx.session_link" \
	"                WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"                  AND identity_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]))" \
	"    OR EXISTS (SELECT 1 FROM convctx.audit_log" \
	"                WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"                  AND action OPERATOR(pg_catalog.=) 'erase_identity'" \
	"                  AND identity_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]))"

/* $3 last_turn_no, $4 live_turns, $5 live_answers, $6 summary_through_turn_no, $7 redactions */
#define SESSION_FINISH_SQL \
	"UPDATE convctx.session s SET last_turn_no = $3, live_turns = $4, live_answers = $5," \
	"       summary_through_turn_no = $6, redactions = $7," SESSION_BROWSER_SET \
	" WHERE " SESSION_KEY_AT("s")

/*
 * Error context: which record of the batch failed. The tool reads the
 * number back ("import record N") to tell the group that failed.
 */
static void
ImportErrorContext(void *arg)
{
	ImportRecord *rec = (ImportRecord *) arg;

	if (rec->recno == 0)
		return;
	if (rec->type_known && rec->group_id != NULL && rec->type == REC_SESSION)
		errcontext("import record %d (session \"%s\")", rec->recno, rec->group_id);
	else if (rec->type_known && rec->group_id != NULL)
		errcontext("import record %d (%s of %s \"%s\")", rec->recno,
				   record_type_names[rec->type],
				   rec->type == REC_CONTEXT ? "conversation" : "session", rec->group_id);
	else if (rec->type_known)
		errcontext("import record %d (%s)", rec->recno, record_type_names[rec->type]);
	else
		errcontext("import record %d", rec->recno);
}

/* 22P04: a record that does not have the shape of the format. */
static void
ReportBadRecord(ImportRecord *rec, const char *msg, const char *key, const char *detail)
	pg_attribute_noreturn();

static void
ReportBadRecord(ImportRecord *rec, const char *msg, const char *key, const char *detail)
{
	ereport(ERROR,
			errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
			key ? errmsg(msg, key, record_type_names[rec->type]) : errmsg("%s", msg),
			detail ? errdetail("%s", detail) : 0,
			errhint("The records of a convctx.jsonl file are described in docs/import-export.md."));
}

/* The value of key, or NULL when the record does not have it. */
static JsonbValue *
RecordValue(ImportRecord *rec, const char *key, JsonbValue *out)
{
	return getKeyJsonValueFromContainer(rec->obj, key, strlen(key), out);
}

/*
 * The value of key when it is present and not null; NULL otherwise, or
 * 22P04 when the key is required.
 */
static JsonbValue *
RecordField(ImportRecord *rec, const char *key, bool required, JsonbValue *out)
{
	JsonbValue *v = RecordValue(rec, key, out);

	if (v == NULL || v->type == jbvNull)
	{
		if (required)
			ReportBadRecord(rec, v == NULL ? "key \"%s\" is missing from a %s record"
							: "key \"%s\" of a %s record must not be null", key, NULL);
		return NULL;
	}
	return v;
}

static void
ReportWrongType(ImportRecord *rec, const char *key, const char *expected, JsonbValue *v)
	pg_attribute_noreturn();

static void
ReportWrongType(ImportRecord *rec, const char *key, const char *expected, JsonbValue *v)
{
	ereport(ERROR,
			errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
			errmsg("key \"%s\" of a %s record must be %s, not %s",
				   key, record_type_names[rec->type], expected, JsonbValueTypeName(v)),
			errhint("The records of a convctx.jsonl file are described in docs/import-export.md."));
}

/* A string value as text (NULL when absent or null). */
static text *
RecordText(ImportRecord *rec, const char *key, bool required)
{
	JsonbValue	buf;
	JsonbValue *v = RecordField(rec, key, required, &buf);

	if (v == NULL)
		return NULL;
	if (v->type != jbvString)
		ReportWrongType(rec, key, "a string", v);
	return cstring_to_text_with_len(v->val.string.val, v->val.string.len);
}

/* An id: a non-empty string of at most CONVCTX_MAX_ID_BYTES. */
static text *
RecordId(ImportRecord *rec, const char *key, bool required)
{
	text	   *id = RecordText(rec, key, required);

	if (id != NULL)
	{
		if (VARSIZE_ANY_EXHDR(id) == 0)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("%s must not be empty", key));
		CheckIdLength(VARSIZE_ANY_EXHDR(id), key);
	}
	return id;
}

/* A text of at most convctx.max_text_bytes. */
static text *
RecordLongText(ImportRecord *rec, const char *key)
{
	text	   *t = RecordText(rec, key, false);

	if (t != NULL)
		CheckTextSize(t, key);
	return t;
}

/*
 * An integer from 0 (or 1, min) to IMPORT_MAX_NUMBER; *isnull when absent
 * or null. Turn numbers, versions and counts beyond are no real history,
 * and would overflow where the API adds to them.
 */
static int64
RecordNumber(ImportRecord *rec, const char *key, bool required, int64 min, bool *isnull)
{
	JsonbValue	buf;
	JsonbValue *v = RecordField(rec, key, required, &buf);
	Datum		n;

	*isnull = (v == NULL);
	if (v == NULL)
		return 0;
	if (v->type != jbvNumeric)
		ReportWrongType(rec, key, "an integer", v);
	n = NumericGetDatum(v->val.numeric);
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, n, DirectFunctionCall1(numeric_floor, n))) != 0 ||
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, n,
										  DirectFunctionCall1(int8_numeric, Int64GetDatum(min)))) < 0 ||
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, n,
										  DirectFunctionCall1(int8_numeric, Int64GetDatum(IMPORT_MAX_NUMBER)))) > 0)
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("key \"%s\" of a %s record must be an integer from " INT64_FORMAT " to %d",
					   key, record_type_names[rec->type], min, IMPORT_MAX_NUMBER));
	return DatumGetInt64(DirectFunctionCall1(numeric_int8, n));
}

/* The latest time a record may hold, for this call (RecordTimestamp). */
static TimestampTz import_latest;

/*
 * 22007 for a time written with a word that timestamptz input reads as the
 * time of the reading ("now", "today", "yesterday", "tomorrow") or as
 * "epoch": the record would mean another time on every import.
 */
static void
CheckNoTimeWord(ImportRecord *rec, const char *key, const char *str)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			i;
	const char *p;

	/* RFC 3339, as convctx export writes times, has no word: no need to look */
	for (p = str; *p && (!isalpha((unsigned char) *p) || strchr("TtZz", *p)); p++)
		;
	if (*p == '\0')
		return;
	if (strlen(str) > MAXDATELEN ||
		ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype, MAXDATEFIELDS, &nf) != 0)
		return;					/* timestamptz input says what is wrong */
	for (i = 0; i < nf; i++)
	{
		int			val;

		if (ftype[i] == DTK_STRING && DecodeSpecial(i, field[i], &val) == RESERV &&
			val >= DTK_EPOCH && val <= DTK_TOMORROW)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_DATETIME_FORMAT),
					errmsg("%s of a %s record is \"%s\", not a time", key, record_type_names[rec->type], str),
					errdetail("Words such as now, today, yesterday and epoch are read as another time on every import."),
					errhint("Write the time itself, as convctx export does (RFC 3339)."));
	}
}

/* A timestamp in any form timestamptz input takes; 0 with *isnull. */
static TimestampTz
RecordTimestamp(ImportRecord *rec, const char *key, bool required, bool *isnull)
{
	JsonbValue	buf;
	JsonbValue *v = RecordField(rec, key, required, &buf);
	TimestampTz ts;
	char	   *str;

	*isnull = (v == NULL);
	if (v == NULL)
		return 0;
	if (v->type != jbvString)
		ReportWrongType(rec, key, "a timestamp string", v);
	str = pnstrdup(v->val.string.val, v->val.string.len);
	CheckNoTimeWord(rec, key, str);
	ts = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in, CStringGetDatum(str),
												 ObjectIdGetDatum(InvalidOid),
												 Int32GetDatum(-1)));
	/* a time no retention rule could ever reach is no history */
	if (TIMESTAMP_NOT_FINITE(ts) || ts > import_latest)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s of a %s record is %s", key, record_type_names[rec->type],
					   TIMESTAMP_NOT_FINITE(ts) ? "not a finite time" : "in the future"),
				errdetail("Imported times must be real times of the past (at most a day ahead of this server's clock)."));
	return ts;
}

static pg_uuid_t *
RecordUuid(ImportRecord *rec, const char *key, bool required)
{
	JsonbValue	buf;
	JsonbValue *v = RecordField(rec, key, required, &buf);

	if (v == NULL)
		return NULL;
	if (v->type != jbvString)
		ReportWrongType(rec, key, "a uuid string", v);
	return DatumGetUUIDP(DirectFunctionCall1(uuid_in,
											 CStringGetDatum(pnstrdup(v->val.string.val,
																	  v->val.string.len))));
}

static bool
RecordBool(ImportRecord *rec, const char *key, bool *isnull)
{
	JsonbValue	buf;
	JsonbValue *v = RecordField(rec, key, false, &buf);

	*isnull = (v == NULL);
	if (v == NULL)
		return false;
	if (v->type != jbvBool)
		ReportWrongType(rec, key, "a boolean", v);
	return v->val.boolean;
}

/* An object or array value as jsonb (NULL when absent or null). */
static Jsonb *
RecordJsonb(ImportRecord *rec, const char *key, bool required, bool array)
{
	JsonbValue	buf;
	JsonbValue *v = RecordField(rec, key, required, &buf);
	Jsonb	   *jb;

	if (v == NULL)
		return NULL;
	if (v->type != jbvBinary || JsonContainerIsArray(v->val.binary.data) != array)
		ReportWrongType(rec, key, array ? "an array" : "an object", v);
	jb = JsonbValueToJsonb(v);
	CheckMaxTextBytes(VARSIZE(jb) - VARHDRSZ, psprintf("%s is too large", key), "It has");
	return jb;
}

/* 22P04 for a key the record type does not have. */
static void
CheckRecordKeys(ImportRecord *rec)
{
	JsonbIterator *it = JsonbIteratorInit(rec->obj);
	JsonbValue	v;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		const char *const *k;
		bool		known = false;

		if (tok != WJB_KEY)
			continue;
		for (k = record_keys[rec->type]; *k != NULL; k++)
			if ((int) strlen(*k) == v.val.string.len &&
				memcmp(*k, v.val.string.val, v.val.string.len) == 0)
			{
				known = true;
				break;
			}
		if (!known)
			ReportBadRecord(rec, "unknown key \"%s\" in a %s record",
							pnstrdup(v.val.string.val, v.val.string.len), NULL);
	}
}

/* The identity an imported identity becomes under identity_map (or itself). */
static text *
MappedIdentity(ImportOptions *opts, text *identity)
{
	JsonbValue	v;

	if (identity == NULL || opts->identity_map == NULL)
		return identity;
	if (getKeyJsonValueFromContainer(&opts->identity_map->root, VARDATA_ANY(identity),
									 VARSIZE_ANY_EXHDR(identity), &v) == NULL)
		return identity;
	/* the map's values were checked to be non-empty strings */
	return cstring_to_text_with_len(v.val.string.val, v.val.string.len);
}

static Datum
TextOrNull(text *t, char *null)
{
	*null = t ? ' ' : 'n';
	return PointerGetDatum(t);
}

/*
 * 22P04 about a record of the group, named in the error context: the
 * record that is wrong, or the group's session record for the group.
 */
static void
ReportGroup(ImportRecord *rec, int recno, RecordType type, const char *msg, const char *detail)
	pg_attribute_noreturn();

static void
ReportGroup(ImportRecord *rec, int recno, RecordType type, const char *msg, const char *detail)
{
	rec->recno = recno;
	rec->type = type;
	rec->type_known = true;
	ereport(ERROR,
			errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
			errmsg_internal("%s", msg),
			detail ? errdetail_internal("%s", detail) : 0);
}

/* Turn rows in (request_id, record_version) order. */
static int
TurnRowByRequest(const void *a, const void *b)
{
	const TurnRow *x = *(const TurnRow *const *) a;
	const TurnRow *y = *(const TurnRow *const *) b;
	int			lx = VARSIZE_ANY_EXHDR(x->request_id);
	int			ly = VARSIZE_ANY_EXHDR(y->request_id);
	int			c = memcmp(VARDATA_ANY(x->request_id), VARDATA_ANY(y->request_id), Min(lx, ly));

	if (c != 0)
		return c;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return x->version < y->version ? -1 : x->version > y->version;
}

/* Turn rows in turn_id order. */
static int
TurnRowById(const void *a, const void *b)
{
	const TurnRow *x = *(const TurnRow *const *) a;
	const TurnRow *y = *(const TurnRow *const *) b;

	return memcmp(x->turn_id->data, y->turn_id->data, UUID_LEN);
}

/* Turn rows (not pointers) in turn_no order. */
static int
TurnRowByNumber(const void *a, const void *b)
{
	const TurnRow *x = (const TurnRow *) a;
	const TurnRow *y = (const TurnRow *) b;

	return x->turn_no < y->turn_no ? -1 : x->turn_no > y->turn_no;
}

/* The current version of the group's turn turn_no, or NULL. */
static TurnRow *
CurrentTurn(SessionGroup *g, int64 turn_no)
{
	int			i;

	for (i = 0; i < g->nturns; i++)
		if (g->turns[i].turn_no == turn_no && g->turns[i].replaced_by == NULL)
			return &g->turns[i];
	return NULL;
}

/*
 * Check the turns of a group as the API would have made them: unique ids;
 * every request a chain of versions 1, 2, ... under one turn number, each
 * old version naming the next, the last current; one request per turn
 * number.
 */
static void
CheckTurnChains(ImportRecord *rec, SessionGroup *g)
{
	TurnRow   **rows = palloc(sizeof(TurnRow *) * Max(g->nturns, 1));
	int			i;

	for (i = 0; i < g->nturns; i++)
		rows[i] = &g->turns[i];

	qsort(rows, g->nturns, sizeof(TurnRow *), TurnRowById);
	for (i = 1; i < g->nturns; i++)
		if (memcmp(rows[i - 1]->turn_id->data, rows[i]->turn_id->data, UUID_LEN) == 0)
		{
			rec->recno = Max(rows[i - 1]->recno, rows[i]->recno);
			rec->type = REC_TURN;
			ereport(ERROR,
					errcode(ERRCODE_UNIQUE_VIOLATION),
					errmsg("turn %s appears twice in session \"%s\"", UuidString(rows[i]->turn_id),
						   g->session_name));
		}

	qsort(rows, g->nturns, sizeof(TurnRow *), TurnRowByRequest);
	for (i = 0; i < g->nturns; i++)
	{
		TurnRow    *t = rows[i];
		TurnRow    *next = (i + 1 < g->nturns && TextEqual(rows[i + 1]->request_id, t->request_id))
			? rows[i + 1] : NULL;
		bool		first = (i == 0 || !TextEqual(rows[i - 1]->request_id, t->request_id));
		char	   *request = text_to_cstring(t->request_id);

		if (first && t->version != 1)
			ReportGroup(rec, t->recno, REC_TURN,
						psprintf("request \"%s\" of session \"%s\" has no version 1", request, g->session_name),
						"The versions of a turn are numbered 1, 2, ... (record_version).");
		if (next != NULL)
		{
			if (next->version != t->version + 1)
				ReportGroup(rec, next->recno, REC_TURN,
							psprintf("request \"%s\" of session \"%s\" has version %d after version %d",
									 request, g->session_name, next->version, t->version),
							next->version == t->version ? "Two turns have the same request and version." :
							"The versions of a turn are numbered 1, 2, ... (record_version).");
			if (t->replaced_by == NULL || memcmp(t->replaced_by->data, next->turn_id->data, UUID_LEN) != 0)
				ReportGroup(rec, t->recno, REC_TURN,
							psprintf("version %d of request \"%s\" of session \"%s\" is not replaced by version %d",
									 t->version, request, g->session_name, next->version),
							"An old version names its successor in replaced_by_turn_id; only the newest version has none.");
			if (next->turn_no != t->turn_no)
				ReportGroup(rec, next->recno, REC_TURN,
							psprintf("the versions of request \"%s\" of session \"%s\" have different turn numbers",
									 request, g->session_name), NULL);
		}
		else if (t->replaced_by != NULL)
			ReportGroup(rec, t->recno, REC_TURN,
						psprintf("the newest version of request \"%s\" of session \"%s\" names a successor",
								 request, g->session_name),
						"replaced_by_turn_id must be null on the current version of a turn.");
	}

	/* one request per turn number: compare the current versions */
	for (i = 0; i < g->nturns; i++)
	{
		TurnRow    *other;

		if (g->turns[i].replaced_by != NULL)
			continue;
		other = CurrentTurn(g, g->turns[i].turn_no);
		if (other != &g->turns[i])
			ReportGroup(rec, Max(other->recno, g->turns[i].recno), REC_TURN,
						psprintf("turn number " INT64_FORMAT " of session \"%s\" belongs to two requests",
								 g->turns[i].turn_no, g->session_name), NULL);
	}
	pfree(rows);
}

/* One array argument of TURNS_INSERT_SQL from turns rows[0..n). */
static Datum
TurnColumn(TurnRow *rows, int n, Oid type, Datum (*get) (TurnRow *t, bool *isnull))
{
	Datum	   *values = palloc(sizeof(Datum) * Max(n, 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(n, 1));
	int			dims[1] = {n};
	int			lbs[1] = {1};
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			i;

	for (i = 0; i < n; i++)
		values[i] = get(&rows[i], &nulls[i]);
	get_typlenbyvalalign(type, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_md_array(values, nulls, 1, dims, lbs, type, typlen, typbyval, typalign));
}

#define TURN_GETTER(name, expr, null_if) \
	static Datum name(TurnRow *t, bool *isnull) { *isnull = (null_if); return (*isnull) ? (Datum) 0 : (expr); }
TURN_GETTER(GetTurnId, UUIDPGetDatum(t->turn_id), false)
TURN_GETTER(GetTurnNo, Int64GetDatum(t->turn_no), false)
TURN_GETTER(GetRequestId, PointerGetDatum(t->request_id), false)
TURN_GETTER(GetVersion, Int32GetDatum(t->version), false)
TURN_GETTER(GetReplacedBy, UUIDPGetDatum(t->replaced_by), t->replaced_by == NULL)
TURN_GETTER(GetIdentity, PointerGetDatum(t->identity), t->identity == NULL)
TURN_GETTER(GetCreatedAt, TimestampTzGetDatum(t->created_at), false)
TURN_GETTER(GetFinalizedAt, TimestampTzGetDatum(t->finalized_at), !t->finalized)
TURN_GETTER(GetDeletedAt, TimestampTzGetDatum(t->deleted_at), !t->tombstone)
TURN_GETTER(GetRedaction, Int64GetDatum(t->redaction), !t->has_redaction)
TURN_GETTER(GetTranslateChat, BoolGetDatum(t->translate_chat), false)
TURN_GETTER(GetQuestion, PointerGetDatum(t->texts[0]), t->texts[0] == NULL)
TURN_GETTER(GetAnswer, PointerGetDatum(t->texts[1]), t->texts[1] == NULL)
TURN_GETTER(GetQuestionTranslated, PointerGetDatum(t->texts[2]), t->texts[2] == NULL)
TURN_GETTER(GetAnswerTranslated, PointerGetDatum(t->texts[3]), t->texts[3] == NULL)
TURN_GETTER(GetFallback, BoolGetDatum(t->fallback), !t->has_fallback)
TURN_GETTER(GetMetadata, PointerGetDatum(t->metadata), t->metadata == NULL)
TURN_GETTER(GetPipeline, PointerGetDatum(t->labels[0]), t->labels[0] == NULL)
TURN_GETTER(GetConsultant, PointerGetDatum(t->labels[1]), t->labels[1] == NULL)
TURN_GETTER(GetRepository, PointerGetDatum(t->labels[2]), t->labels[2] == NULL)

/* Write turns rows[0..n) of the group in one statement. */
static void
WriteTurns(ImportOptions *opts, SessionGroup *g, TurnRow *rows, int n)
{
	Oid			argtypes[22] = {TEXTOID, TEXTOID, UUIDARRAYOID, INT8ARRAYOID, TEXTARRAYOID,
		INT4ARRAYOID, UUIDARRAYOID, TEXTARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID,
		TIMESTAMPTZARRAYOID, INT8ARRAYOID, BOOLARRAYOID, TEXTARRAYOID, TEXTARRAYOID,
		TEXTARRAYOID, TEXTARRAYOID, BOOLARRAYOID, JSONBARRAYOID, TEXTARRAYOID, TEXTARRAYOID,
	TEXTARRAYOID};
	Datum		values[22];

	if (n == 0)
		return;
	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	values[2] = TurnColumn(rows, n, UUIDOID, GetTurnId);
	values[3] = TurnColumn(rows, n, INT8OID, GetTurnNo);
	values[4] = TurnColumn(rows, n, TEXTOID, GetRequestId);
	values[5] = TurnColumn(rows, n, INT4OID, GetVersion);
	values[6] = TurnColumn(rows, n, UUIDOID, GetReplacedBy);
	values[7] = TurnColumn(rows, n, TEXTOID, GetIdentity);
	values[8] = TurnColumn(rows, n, TIMESTAMPTZOID, GetCreatedAt);
	values[9] = TurnColumn(rows, n, TIMESTAMPTZOID, GetFinalizedAt);
	values[10] = TurnColumn(rows, n, TIMESTAMPTZOID, GetDeletedAt);
	values[11] = TurnColumn(rows, n, INT8OID, GetRedaction);
	values[12] = TurnColumn(rows, n, BOOLOID, GetTranslateChat);
	values[13] = TurnColumn(rows, n, TEXTOID, GetQuestion);
	values[14] = TurnColumn(rows, n, TEXTOID, GetAnswer);
	values[15] = TurnColumn(rows, n, TEXTOID, GetQuestionTranslated);
	values[16] = TurnColumn(rows, n, TEXTOID, GetAnswerTranslated);
	values[17] = TurnColumn(rows, n, BOOLOID, GetFallback);
	values[18] = TurnColumn(rows, n, JSONBOID, GetMetadata);
	values[19] = TurnColumn(rows, n, TEXTOID, GetPipeline);
	values[20] = TurnColumn(rows, n, TEXTOID, GetConsultant);
	values[21] = TurnColumn(rows, n, TEXTOID, GetRepository);
	SpiRunPlan(SpiKeptPlan(&turns_insert_plan, TURNS_INSERT_SQL, 22, argtypes), values, NULL,
			   false, 0, SPI_OK_INSERT);
}

/*
 * Write a context unless its conversation has one; one that exists is
 * left alone and counted (refused with on_conflict 'error').
 */
static void
WriteContext(ImportOptions *opts, text *conversation_id, const char *name, Jsonb *ctx,
			 text *user, TimestampTz created_at, TimestampTz updated_at, ImportCounts *counts)
{
	Oid			argtypes[6] = {TEXTOID, TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	Datum		values[6] = {PointerGetDatum(opts->tenant), PointerGetDatum(conversation_id),
		PointerGetDatum(ctx), TextOrNull(user, &nulls[3]), TimestampTzGetDatum(created_at),
	TimestampTzGetDatum(updated_at)};
	Oid			same_types[4] = {TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID};
	Datum		same_values[4] = {values[0], values[1], values[2], values[5]};
	bool		isnull;

	SpiRunPlan(SpiKeptPlan(&context_insert_plan, CONTEXT_INSERT_SQL, 6, argtypes),
			   values, nulls, false, 0, SPI_OK_INSERT_RETURNING);
	if (SPI_processed > 0)
	{
		counts->imported[REC_CONTEXT]++;
		return;
	}
	if (opts->error_on_conflict)
		ereport(ERROR,
				errcode(ERRCODE_UNIQUE_VIOLATION),
				errmsg("the context of conversation \"%s\" exists already", name),
				errhint("convctx import --on-conflict=skip leaves existing rows alone and counts them."));
	SpiRunPlan(SpiKeptPlan(&context_same_plan, CONTEXT_SAME_SQL, 4, same_types), same_values, NULL,
			   false, 1, SPI_OK_SELECT);
	CountSkipped(counts, REC_CONTEXT,
				 SPI_processed > 0 && DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
																 SPI_tuptable->tupdesc, 1, &isnull))
				 ? SKIP_THERE : SKIP_CHANGED);
}

/* The context record of the group, if any. */
static void
WriteGroupContext(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	if (g->context_recno == 0)
		return;
	rec->recno = g->context_recno;
	rec->type = REC_CONTEXT;
	WriteContext(opts, g->session_id, g->session_name, g->context, g->context_user,
				 g->context_created_at, g->context_updated_at, counts);
}

static bool
UuidEqual(pg_uuid_t *a, pg_uuid_t *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return memcmp(a->data, b->data, UUID_LEN) == 0;
}

static bool
JsonbEqual(Jsonb *a, Jsonb *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return DatumGetBool(DirectFunctionCall2(jsonb_eq, JsonbPGetDatum(a), JsonbPGetDatum(b)));
}

/* The stored turns of an existing session, as TurnRows (recno 0), in turn_no order. */
static TurnRow *
StoredTurns(ImportOptions *opts, SessionGroup *g, int *n)
{
	TurnRow    *rows;
	uint64		i;

	SpiRunSessionPlan(&stored_turns_plan, STORED_TURNS_SQL, opts->tenant, g->session_id,
					  false, 0, SPI_OK_SELECT);
	rows = palloc0(sizeof(TurnRow) * Max(SPI_processed, 1));
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		TurnRow    *t = &rows[i];
		bool		isnull;
		Datum		d;
		int			k;

#define STORED(col) (d = SPI_getbinval(tup, desc, (col), &isnull), isnull)
#define STORED_UUID(col) (STORED(col) ? NULL : (pg_uuid_t *) memcpy(palloc(UUID_LEN), DatumGetUUIDP(d), UUID_LEN))
#define STORED_TEXT(col) (STORED(col) ? NULL : DatumGetTextPCopy(d))
		t->turn_id = STORED_UUID(1);
		t->turn_no = STORED(2) ? 0 : DatumGetInt64(d);
		t->request_id = STORED_TEXT(3);
		t->version = STORED(4) ? 1 : DatumGetInt32(d);
		t->replaced_by = STORED_UUID(5);
		t->created_at = STORED(6) ? 0 : DatumGetTimestampTz(d);
		t->finalized = !STORED(7);
		t->finalized_at = t->finalized ? DatumGetTimestampTz(d) : 0;
		t->tombstone = !STORED(8);
		t->deleted_at = t->tombstone ? DatumGetTimestampTz(d) : 0;
		t->translate_chat = STORED(9) ? false : DatumGetBool(d);
		for (k = 0; k < 4; k++)
			t->texts[k] = STORED_TEXT(10 + k);
		t->has_fallback = !STORED(14);
		t->fallback = t->has_fallback && DatumGetBool(d);
		t->metadata = STORED(15) ? NULL : DatumGetJsonbPCopy(d);
		for (k = 0; k < 3; k++)
			t->labels[k] = STORED_TEXT(16 + k);
#undef STORED_TEXT
#undef STORED_UUID
#undef STORED
	}
	*n = (int) SPI_processed;
	return rows;
}

/* What a merge does with a turn record. */
#define TURN_INSERT (-1)
#define TURN_UPDATE (-2)

/* 23505 (55000 with redacted): the file's turn f and this database's disagree. */
static void
ReportTurnConflict(ImportRecord *rec, SessionGroup *g, TurnRow *f, bool redacted, const char *detail)
	pg_attribute_noreturn();

static void
ReportTurnConflict(ImportRecord *rec, SessionGroup *g, TurnRow *f, bool redacted, const char *detail)
{
	rec->recno = f->recno;
	rec->type = REC_TURN;
	rec->group_id = g->session_name;
	if (redacted)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("turn " INT64_FORMAT " of session \"%s\" is redacted in the file but not here",
					   f->turn_no, g->session_name),
				errhint("An import does not redact: redact it here with convctx.redact_turn(), then import again."));
	ereport(ERROR,
			errcode(ERRCODE_UNIQUE_VIOLATION),
			errmsg("turn " INT64_FORMAT " of session \"%s\" differs from the one stored here",
				   f->turn_no, g->session_name),
			errdetail_internal("%s", detail),
			errhint("The conversation went on differently here and where the file was exported: import it under another session id, or delete it here first."));
}

/* The first of turns rows[0..n), in turn_no order, numbered turn_no or after. */
static int
FirstTurnFrom(TurnRow *rows, int n, int64 turn_no)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (rows[mid].turn_no < turn_no)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * What a merge does with the file's turn f, given the stored turns of its
 * session (db[0..ndb) in turn_no order, by_id the same in turn_id order):
 * insert it (a turn or version this database lacks), update the stored
 * row (finalized or corrected in the file since), or skip it (a
 * SkipReason). A turn that differs otherwise is a conflict.
 */
static int
MergeTurnAction(ImportRecord *rec, SessionGroup *g, TurnRow *f, TurnRow *db, int ndb,
				TurnRow **by_id)
{
	TurnRow   **found = bsearch(&f, by_id, ndb, sizeof(TurnRow *), TurnRowById);
	TurnRow    *d = found ? *found : NULL;
	TurnRow    *same_no = NULL;
	int32		maxv = 0,
				minv = PG_INT32_MAX;
	bool		answer_same;
	bool		file_ahead;
	bool		here_ahead;
	int			i;

	for (i = FirstTurnFrom(db, ndb, f->turn_no); i < ndb && db[i].turn_no == f->turn_no; i++)
	{
		/* a turn redacted here stays redacted: all its versions are */
		if (db[i].tombstone)
			return f->tombstone && d != NULL ? SKIP_THERE : SKIP_REDACTED;
		same_no = &db[i];
		maxv = Max(maxv, db[i].version);
		minv = Min(minv, db[i].version);
	}
	if (d == NULL)
	{
		if (same_no == NULL)
			return f->turn_no > g->stored_last_turn_no ? TURN_INSERT : SKIP_REMOVED;
		if (!TextEqual(same_no->request_id, f->request_id))
			ReportTurnConflict(rec, g, f, false,
							   psprintf("Here it is request \"%s\", in the file request \"%s\".",
										text_to_cstring(same_no->request_id), text_to_cstring(f->request_id)));
		if (f->version > maxv)
			return TURN_INSERT;	/* corrected in the file since */
		if (f->version < minv)
			return SKIP_REMOVED;
		ReportTurnConflict(rec, g, f, false,
						   psprintf("Version %d of request \"%s\" is another turn here.",
									f->version, text_to_cstring(f->request_id)));
	}
	if (d->turn_no != f->turn_no || !TextEqual(d->request_id, f->request_id) ||
		d->version != f->version || d->created_at != f->created_at)
		ReportTurnConflict(rec, g, f, false,
						   psprintf("Turn %s has another turn number, request, version or time here.",
									UuidString(f->turn_id)));
	if (f->tombstone)
		ReportTurnConflict(rec, g, f, true, NULL);
	if (d->translate_chat != f->translate_chat || !TextEqual(d->texts[0], f->texts[0]) ||
		!TextEqual(d->texts[2], f->texts[2]) || !TextEqual(d->labels[0], f->labels[0]) ||
		!TextEqual(d->labels[1], f->labels[1]) || !TextEqual(d->labels[2], f->labels[2]))
		ReportTurnConflict(rec, g, f, false, "Its question differs.");
	answer_same = d->finalized == f->finalized && (!f->finalized || d->finalized_at == f->finalized_at) &&
		TextEqual(d->texts[1], f->texts[1]) && TextEqual(d->texts[3], f->texts[3]) &&
		d->has_fallback == f->has_fallback && d->fallback == f->fallback &&
		JsonbEqual(d->metadata, f->metadata);
	if (answer_same && UuidEqual(d->replaced_by, f->replaced_by))
		return SKIP_THERE;
	/* finalize_turn and replace_turn only ever add: an answer, a successor */
	file_ahead = (answer_same || !d->finalized) &&
		(UuidEqual(d->replaced_by, f->replaced_by) || d->replaced_by == NULL);
	here_ahead = (answer_same || !f->finalized) &&
		(UuidEqual(d->replaced_by, f->replaced_by) || f->replaced_by == NULL);
	if (file_ahead)
		return TURN_UPDATE;
	if (here_ahead)
		return SKIP_CHANGED;
	ReportTurnConflict(rec, g, f, false,
					   UuidEqual(d->replaced_by, f->replaced_by) ? "Its answer differs."
					   : "It was corrected differently here.");
}

/* Update the stored turn f->turn_id to the file's answer and successor. */
static void
UpdateTurn(ImportOptions *opts, SessionGroup *g, TurnRow *f)
{
	Oid			argtypes[9] = {TEXTOID, TEXTOID, UUIDOID, TIMESTAMPTZOID, TEXTOID, TEXTOID,
	BOOLOID, JSONBOID, UUIDOID};
	Datum		values[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;

	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	values[2] = GetTurnId(f, &isnull);
	values[3] = GetFinalizedAt(f, &isnull);
	nulls[3] = isnull ? 'n' : ' ';
	values[4] = TextOrNull(f->texts[1], &nulls[4]);
	values[5] = TextOrNull(f->texts[3], &nulls[5]);
	values[6] = GetFallback(f, &isnull);
	nulls[6] = isnull ? 'n' : ' ';
	values[7] = GetMetadata(f, &isnull);
	nulls[7] = isnull ? 'n' : ' ';
	values[8] = GetReplacedBy(f, &isnull);
	nulls[8] = isnull ? 'n' : ' ';
	SpiRunPlan(SpiKeptPlan(&turn_update_plan, TURN_UPDATE_SQL, 9, argtypes), values, nulls,
			   false, 0, SPI_OK_UPDATE);
}

/* Insert the retrieval or clarification d of the session key[0..1]. */
static void
InsertTurnData(Datum *key, TurnDataRow *d)
{
	Oid			types[6] = {TEXTOID, TEXTOID, INT8OID, JSONBOID, JSONBOID, TIMESTAMPTZOID};
	Datum		values[6] = {key[0], key[1], Int64GetDatum(d->turn_no),
		PointerGetDatum(d->first), PointerGetDatum(d->second), TimestampTzGetDatum(d->recorded_at)};

	if (d->type == REC_RETRIEVAL)
		SpiRunPlan(SpiKeptPlan(&retrieval_insert_plan, RETRIEVAL_INSERT_SQL, 6, types),
				   values, NULL, false, 0, SPI_OK_INSERT);
	else
		SpiRunPlan(SpiKeptPlan(&clarification_insert_plan, CLARIFICATION_INSERT_SQL, 6, types),
				   values, NULL, false, 0, SPI_OK_INSERT);
}

/*
 * A group whose session exists: add what the file has and this database
 * lacks (turns after its newest, versions, answers, retrievals,
 * clarifications, a newer summary, a context), leave alone what both have
 * or what changed here since (counted as skipped, with the reason), and
 * refuse a conflict: the same turn with other content, or a turn here
 * that the file does not have between turns it has. The session row was
 * locked when its record was read, as every writer locks it; its derived
 * values are counted again from its rows when anything was written.
 */
static void
MergeGroup(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts,
		   int64 max_turn_no, int64 max_redaction)
{
	int			ndb;
	TurnRow    *db = StoredTurns(opts, g, &ndb);
	TurnRow   **by_id = palloc(sizeof(TurnRow *) * Max(ndb, 1));
	TurnRow    *in_file = palloc(sizeof(TurnRow) * Max(g->nturns, 1));
	int		   *action = palloc(sizeof(int) * Max(g->nturns, 1));
	TurnRow    *ins = palloc(sizeof(TurnRow) * Max(g->nturns, 1));
	int			nins = 0;
	bool		wrote = false;
	int64		min_turn_no = PG_INT64_MAX;
	Datum		key[3] = {PointerGetDatum(opts->tenant), PointerGetDatum(g->session_id), 0};
	int			i,
				j;

	for (j = 0; j < ndb; j++)
		by_id[j] = &db[j];
	qsort(by_id, ndb, sizeof(TurnRow *), TurnRowById);
	for (i = 0; i < g->nturns; i++)
	{
		action[i] = MergeTurnAction(rec, g, &g->turns[i], db, ndb, by_id);
		wrote |= action[i] < 0;
		min_turn_no = Min(min_turn_no, g->turns[i].turn_no);
	}

	/* a turn here between turns of the file that the file lacks: diverged */
	memcpy(in_file, g->turns, sizeof(TurnRow) * g->nturns);
	qsort(in_file, g->nturns, sizeof(TurnRow), TurnRowByNumber);
	for (j = 0; wrote && j < ndb; j++)
	{
		int			k;

		if (db[j].turn_no <= min_turn_no || db[j].turn_no >= max_turn_no)
			continue;
		k = FirstTurnFrom(in_file, g->nturns, db[j].turn_no);
		if (k == g->nturns || in_file[k].turn_no != db[j].turn_no)
		{
			rec->recno = g->recno;
			rec->type = REC_SESSION;
			ereport(ERROR,
					errcode(ERRCODE_UNIQUE_VIOLATION),
					errmsg("session \"%s\" has turn " INT64_FORMAT " here, which the file does not have",
						   g->session_name, db[j].turn_no),
					errhint("The conversation went on differently here and where the file was exported: import it under another session id, or delete it here first."));
		}
	}

	/* turns: the stored rows first (a successor named), then the new ones */
	for (i = 0; i < g->nturns; i++)
	{
		TurnRow    *f = &g->turns[i];

		rec->recno = f->recno;
		rec->type = REC_TURN;
		if (action[i] == TURN_UPDATE)
			UpdateTurn(opts, g, f);
		else if (action[i] == TURN_INSERT)
		{
			ins[nins] = *f;
			/* a turn of a linked session is its identity's, as start_turn writes it */
			ins[nins++].identity = g->stored_identity;
		}
		if (action[i] < 0)
			counts->imported[REC_TURN]++;
		else
			CountSkipped(counts, REC_TURN, (SkipReason) action[i]);
	}
	rec->recno = g->recno;
	WriteTurns(opts, g, ins, nins);

	/* retrievals and clarifications: of a turn kept here, newer than the stored one */
	for (i = 0; i < g->ndata; i++)
	{
		TurnDataRow *d = &g->data[i];
		TurnRow    *t = CurrentTurn(g, d->turn_no);
		int			why = action[t - g->turns];
		bool		retrieval = (d->type == REC_RETRIEVAL);

		rec->recno = d->recno;
		rec->type = d->type;
		if (why != SKIP_REDACTED && why != SKIP_REMOVED)
		{
			Oid			stored_types[3] = {TEXTOID, TEXTOID, INT8OID};
			bool		isnull;

			key[2] = Int64GetDatum(d->turn_no);
			SpiRunPlan(retrieval ? SpiKeptPlan(&stored_retrieval_plan, STORED_RETRIEVAL_SQL, 3, stored_types)
					   : SpiKeptPlan(&stored_clarification_plan, STORED_CLARIFICATION_SQL, 3, stored_types),
					   key, NULL, false, 1, SPI_OK_SELECT);
			if (SPI_processed == 0)
				why = TURN_INSERT;
			else
			{
				HeapTuple	tup = SPI_tuptable->vals[0];
				TupleDesc	desc = SPI_tuptable->tupdesc;
				TimestampTz stored_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &isnull));

				if (JsonbEqual(DatumGetJsonbP(SPI_getbinval(tup, desc, 1, &isnull)), d->first) &&
					JsonbEqual(DatumGetJsonbP(SPI_getbinval(tup, desc, 2, &isnull)), d->second) &&
					stored_at == d->recorded_at)
					why = SKIP_THERE;
				else
					why = stored_at < d->recorded_at ? TURN_INSERT : SKIP_CHANGED;
			}
		}
		if (why >= 0)
		{
			CountSkipped(counts, d->type, (SkipReason) why);
			continue;
		}
		InsertTurnData(key, d);
		counts->imported[d->type]++;
		wrote = true;
	}

	/* the summary: the file's when newer, unless it covers a turn redacted here since */
	if (g->summary_recno)
	{
		int			why = TURN_INSERT;

		rec->recno = g->summary_recno;
		rec->type = REC_SUMMARY;
		for (j = 0; j < ndb; j++)
			if (db[j].tombstone && db[j].turn_no <= g->summary_through &&
				db[j].deleted_at > g->summary_updated_at)
				why = SKIP_REDACTED;
		if (why == TURN_INSERT)
		{
			SpiRunSessionPlan(&stored_summary_plan, STORED_SUMMARY_SQL, opts->tenant, g->session_id,
							  false, 1, SPI_OK_SELECT);
			if (SPI_processed > 0)
			{
				HeapTuple	tup = SPI_tuptable->vals[0];
				TupleDesc	desc = SPI_tuptable->tupdesc;
				bool		isnull;
				TimestampTz stored_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &isnull));

				if (stored_at == g->summary_updated_at &&
					DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull)) == g->summary_through &&
					TextEqual(DatumGetTextPP(SPI_getbinval(tup, desc, 1, &isnull)), g->summary))
					why = SKIP_THERE;
				else if (stored_at >= g->summary_updated_at)
					why = SKIP_CHANGED;
			}
		}
		if (why >= 0)
			CountSkipped(counts, REC_SUMMARY, (SkipReason) why);
		else
		{
			Oid			sum_types[6] = {TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID};
			Datum		sum_values[6] = {key[0], key[1], PointerGetDatum(g->summary),
				Int64GetDatum(g->summary_through), Int64GetDatum(0),
			TimestampTzGetDatum(g->summary_updated_at)};

			SpiRunPlan(SpiKeptPlan(&summary_insert_plan, SUMMARY_INSERT_SQL, 6, sum_types),
					   sum_values, NULL, false, 0, SPI_OK_INSERT);
			counts->imported[REC_SUMMARY]++;
			wrote = true;
		}
	}
	WriteGroupContext(opts, rec, g, counts);

	if (wrote)
	{
		Oid			merge_types[5] = {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, INT8OID};
		Datum		merge_values[5] = {key[0], key[1],
			Int64GetDatum(g->has_last_turn_no ? g->last_turn_no : max_turn_no),
			TimestampTzGetDatum(g->last_activity_at),
		Int64GetDatum(g->has_redactions ? g->redactions : max_redaction)};

		rec->recno = g->recno;
		rec->type = REC_SESSION;
		SpiRunPlan(SpiKeptPlan(&session_merge_plan, SESSION_MERGE_SQL, 5, merge_types),
				   merge_values, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
		if (g->stored_identity == NULL && !opts->allow_anonymous &&
			SpiFirstInt8() > convctx_max_session_turns)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("anonymous session \"%s\" would have more turns than convctx.max_session_turns",
						   g->session_name),
					errhint("Give it an identity (convctx import --as-identity or --identity-map), or import it as it is with --allow-anonymous."));
		SpiRunSessionPlan(&summary_covered_plan, SUMMARY_COVERED_SQL, opts->tenant, g->session_id,
						  false, 0, SPI_OK_UPDATE);
	}
}

/*
 * The group that ends here: check it whole against the rules of the API
 * and what its session record states, then write it, children after the
 * session row in the lock order (turns, link, retrievals, clarifications,
 * summary, context), and the derived values into the session row.
 */
static void
FinishGroup(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	Oid			argtypes[7] = {TEXTOID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID};
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int64		live_turns = 0,
				live_answers = 0,
				max_turn_no = 0,
				max_redaction = 0,
				covered = 0;
	TimestampTz newest_turn = DT_NOBEGIN;
	int			i;

	if (!g->open)
		return;
	g->open = false;

	rec->group_id = g->session_name;
	CheckTurnChains(rec, g);
	for (i = 0; i < g->nturns; i++)
	{
		TurnRow    *t = &g->turns[i];
		bool		live = !t->tombstone && t->replaced_by == NULL;

		max_turn_no = Max(max_turn_no, t->turn_no);
		newest_turn = Max(newest_turn, t->created_at);
		if (t->has_redaction)
			max_redaction = Max(max_redaction, t->redaction);
		live_turns += live;
		live_answers += live && t->finalized;
		if (g->summary_recno && live && t->turn_no <= g->summary_through)
			covered += 1 + t->finalized;
		/*
		 * Redacting a turn drops the summary that covers it: a summary
		 * covering a tombstone was written after the redaction.
		 */
		if (g->summary_recno && t->tombstone && t->turn_no <= g->summary_through &&
			g->summary_updated_at < t->deleted_at)
			ReportGroup(rec, g->summary_recno, REC_SUMMARY,
						psprintf("the summary of session \"%s\" was written before turn " INT64_FORMAT " it covers was redacted",
								 g->session_name, t->turn_no),
						"Redacting a turn drops the summary that covers it.");
	}

	/* what the session record states */
#define CHECK_STATED(has, stated, actual, name) \
	if ((has) && (stated) != (actual)) \
		ReportGroup(rec, g->recno, REC_SESSION, \
					psprintf("session \"%s\" states %s " INT64_FORMAT ", but its records make " INT64_FORMAT, \
							 g->session_name, name, (int64) (stated), (int64) (actual)), \
					"convctx derives this count from the session's turns; the file was changed or is incomplete.")

	/* starting a turn is activity: it is never older than a turn */
	if (g->last_activity_at < newest_turn)
	{
		char	   *stated = pstrdup(timestamptz_to_str(g->last_activity_at));

		rec->recno = g->recno;
		rec->type = REC_SESSION;
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("last_activity_at of session \"%s\" is before its newest turn was created",
					   g->session_name),
				errdetail("last_activity_at is %s; a turn was created at %s.",
						  stated, timestamptz_to_str(newest_turn)),
				errhint("Starting a turn is activity of its session: last_activity_at is at least the created_at of every turn."));
	}
	CHECK_STATED(g->has_live_turns, g->live_turns, live_turns, "live_turns");
	CHECK_STATED(g->has_live_answers, g->live_answers, live_answers, "live_answers");
	if (g->summary_recno && g->summary_covered >= 0 && g->summary_covered != covered)
		ReportGroup(rec, g->summary_recno, REC_SUMMARY,
					psprintf("the summary of session \"%s\" states covered_messages " INT64_FORMAT
							 ", but its turns make " INT64_FORMAT,
							 g->session_name, g->summary_covered, covered), NULL);
	if (g->has_summary_through &&
		(g->summary_through_null ? g->summary_recno != 0
		 : (g->summary_recno == 0 || g->summary_through_stated != g->summary_through)))
		ReportGroup(rec, g->recno, REC_SESSION,
					psprintf("summary_through_turn_no of session \"%s\" does not match its summary record",
							 g->session_name), NULL);
	if (g->has_last_turn_no && g->last_turn_no < max_turn_no)
		ReportGroup(rec, g->recno, REC_SESSION,
					psprintf("session \"%s\" states last_turn_no " INT64_FORMAT ", but it has turn " INT64_FORMAT,
							 g->session_name, g->last_turn_no, max_turn_no), NULL);
	/* an anonymous session's cap counts back from last_turn_no */
	if (g->identity == NULL && g->has_last_turn_no && g->nturns > 0 && g->last_turn_no != max_turn_no)
		ReportGroup(rec, g->recno, REC_SESSION,
					psprintf("anonymous session \"%s\" states last_turn_no " INT64_FORMAT ", but its newest turn is " INT64_FORMAT,
							 g->session_name, g->last_turn_no, max_turn_no),
					"The anonymous cap keeps the turns of the newest numbers: a gap would drop them all.");
	if (g->has_redactions && g->redactions < max_redaction)
		ReportGroup(rec, g->recno, REC_SESSION,
					psprintf("session \"%s\" states redactions " INT64_FORMAT ", but a tombstone of redaction " INT64_FORMAT,
							 g->session_name, g->redactions, max_redaction), NULL);
	if (g->summary_recno && g->summary_through > (g->has_last_turn_no ? g->last_turn_no : max_turn_no))
		ReportGroup(rec, g->summary_recno, REC_SUMMARY,
					psprintf("the summary of session \"%s\" covers turns up to " INT64_FORMAT ", past its newest turn",
							 g->session_name, g->summary_through), NULL);
	for (i = 0; i < g->ndata; i++)
	{
		TurnRow    *t = CurrentTurn(g, g->data[i].turn_no);

		if (t == NULL || t->tombstone)
			ReportGroup(rec, g->data[i].recno, g->data[i].type,
						psprintf("the %s of turn " INT64_FORMAT " of session \"%s\" belongs to %s",
								 record_type_names[g->data[i].type], g->data[i].turn_no, g->session_name,
								 t == NULL ? "no turn of the session" : "a redacted turn"),
						t == NULL ? NULL : "Redacting a turn drops its retrievals and clarifications.");
	}

	if (g->existing)
	{
		MergeGroup(opts, rec, g, counts, max_turn_no, max_redaction);
		return;
	}

	/*
	 * An anonymous session that the next purge would delete, or that is
	 * over the cap, would not survive: refuse it unless asked.
	 */
	rec->recno = g->recno;
	rec->type = REC_SESSION;
	rec->group_id = g->session_name;
	if (g->identity == NULL && !opts->allow_anonymous)
	{
		if (convctx_session_ttl > 0 &&
			g->last_activity_at < GetCurrentTimestamp() - (int64) convctx_session_ttl * USECS_PER_SEC)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("anonymous session \"%s\" would be deleted by the next purge", g->session_name),
					errdetail("Its last activity, %s, is older than convctx.session_ttl (%d s); anonymous sessions expire.",
							  timestamptz_to_str(g->last_activity_at), convctx_session_ttl),
					errhint("Give it an identity (convctx import --as-identity or --identity-map), or import it as it is with --allow-anonymous."));
		if (live_turns > convctx_max_session_turns)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("anonymous session \"%s\" has more turns than convctx.max_session_turns", g->session_name),
					errdetail("It has " INT64_FORMAT " live turns; an anonymous session keeps at most %d, and its next turn would drop the oldest.",
							  live_turns, convctx_max_session_turns),
					errhint("Give it an identity (convctx import --as-identity or --identity-map), or import it as it is with --allow-anonymous."));
	}

	/* write: turns, link, retrievals and clarifications, summary, context */
	WriteTurns(opts, g, g->turns, g->nturns);
	counts->imported[REC_TURN] += g->nturns;
	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	if (g->identity != NULL)
	{
		Oid			link_types[4] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
		Datum		link_values[4] = {values[0], values[1], PointerGetDatum(g->identity),
			TimestampTzGetDatum(g->link_now ? GetCurrentStatementStartTimestamp() : g->linked_at)};

		SpiRunPlan(SpiKeptPlan(&link_insert_plan, LINK_INSERT_SQL, 4, link_types), link_values, NULL,
				   false, 0, SPI_OK_INSERT);
	}
	for (i = 0; i < g->ndata; i++)
	{
		TurnDataRow *d = &g->data[i];

		rec->recno = d->recno;
		rec->type = d->type;
		InsertTurnData(values, d);
		counts->imported[d->type]++;
	}
	if (g->summary_recno)
	{
		Oid			sum_types[6] = {TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID};
		Datum		sum_values[6] = {values[0], values[1], PointerGetDatum(g->summary),
			Int64GetDatum(g->summary_through), Int64GetDatum(covered),
		TimestampTzGetDatum(g->summary_updated_at)};

		rec->recno = g->summary_recno;
		rec->type = REC_SUMMARY;
		SpiRunPlan(SpiKeptPlan(&summary_insert_plan, SUMMARY_INSERT_SQL, 6, sum_types),
				   sum_values, NULL, false, 0, SPI_OK_INSERT);
		counts->imported[REC_SUMMARY]++;
	}
	WriteGroupContext(opts, rec, g, counts);

	rec->recno = g->recno;
	rec->type = REC_SESSION;
	values[2] = Int64GetDatum(g->has_last_turn_no ? g->last_turn_no : max_turn_no);
	values[3] = Int64GetDatum(live_turns);
	values[4] = Int64GetDatum(live_answers);
	values[5] = Int64GetDatum(g->summary_through);
	nulls[5] = g->summary_recno ? ' ' : 'n';
	values[6] = Int64GetDatum(g->has_redactions ? g->redactions : max_redaction);
	SpiRunPlan(SpiKeptPlan(&session_finish_plan, SESSION_FINISH_SQL, 7, argtypes), values, nulls,
			   false, 0, SPI_OK_UPDATE);
}

/* 22P04 when a session or conversation comes twice in the batch. */
static void
CheckFirstInBatch(ImportOptions *opts, ImportRecord *rec, const char *kind, text *id)
{
	char		key[CONVCTX_MAX_ID_BYTES + 3];
	bool		found;
	int			len = VARSIZE_ANY_EXHDR(id);

	memset(key, 0, sizeof(key));
	key[0] = kind[0];
	memcpy(key + 1, VARDATA_ANY(id), len);
	hash_search(opts->seen, key, HASH_ENTER, &found);
	if (found)
		ReportBadRecord(rec, psprintf("%s \"%s\" comes twice in the batch", kind, text_to_cstring(id)),
						NULL, "The records of a conversation come together, once.");
}

/*
 * Was identity erased in the tenant? Only a keyed stand-in tells (the
 * one of 0.5.0 and the one of erasures before it); without
 * convctx.identity_hash_key every erased identity is "erased", and no
 * identity can be recognised as erased.
 */
static bool
IdentityErased(text *tenant, text *identity)
{
	Oid			argtypes[2] = {TEXTOID, TEXTARRAYOID};
	Datum		values[2];
	Datum		stand_ins[2];
	bool		isnull;

	stand_ins[1] = PointerGetDatum(LegacyErasedIdentity(identity));
	if (stand_ins[1] == PointerGetDatum(NULL))
		return false;
	stand_ins[0] = PointerGetDatum(ErasedIdentity(tenant, identity));
	values[0] = PointerGetDatum(tenant);
	values[1] = PointerGetDatum(construct_array(stand_ins, 2, TEXTOID, -1, false, TYPALIGN_INT));
	SpiRunPlan(SpiKeptPlan(&identity_erased_plan, IDENTITY_ERASED_SQL, 2, argtypes), values, NULL,
			   false, 1, SPI_OK_SELECT);
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Was the identity of a record erased, as the record names it (raw) or as
 * it would be written (mapped by identity_map, or as_identity)? Either
 * way the import would bring back what the erasure took.
 */
static bool
RecordIdentityErased(ImportOptions *opts, text *raw, text *mapped)
{
	return (raw != NULL && IdentityErased(opts->tenant, raw)) ||
		(mapped != NULL && mapped != raw && IdentityErased(opts->tenant, mapped));
}

/*
 * An erasure holds against the import of an export made before it: a
 * context whose user_id is an identity erased in the tenant (recognised
 * with a key only), or whose conversation is a session erase_identity
 * erased, is refused with 55000, as its session is refused. Neither
 * message names the identity: it would reach the server log.
 */
static void
CheckContextNotErased(ImportOptions *opts, text *conversation_id, const char *name,
					  text *raw_user, text *user)
{
	bool		isnull;
	Datum		d;

	if (RecordIdentityErased(opts, raw_user, user))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("the context of conversation \"%s\" was erased", name),
				errdetail("Its user_id is an identity that erase_identity erased in this tenant; an import does not bring it back."));
	SpiRunSessionPlan(&session_identity_plan, SESSION_IDENTITY_SQL, opts->tenant, conversation_id,
					  false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull && IsErasedIdentity(DatumGetTextPP(d)))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("the context of conversation \"%s\" was erased", name),
				errdetail("erase_identity erased the session of this conversation and deleted its context; an import does not bring it back."));
}

/*
 * A session record: start its group. The session row is created at once,
 * locked for the rest of the transaction; when it exists the group is
 * skipped, or refused when it belongs to another identity or on_conflict
 * is 'error'.
 */
static void
ImportSession(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	Oid			argtypes[6] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID};
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	text	   *identity;
	text	   *raw_identity;
	text	   *title;
	bool		linked_null;
	bool		isnull;
	MemoryContext cxt = g->cxt;

	memset(g, 0, sizeof(*g));
	g->cxt = cxt;
	g->recno = rec->recno;
	g->session_id = RecordId(rec, "session_id", true);
	g->session_name = text_to_cstring(g->session_id);
	rec->group_id = g->session_name;
	CheckFirstInBatch(opts, rec, "session", g->session_id);
	identity = RecordId(rec, "identity_id", false);
	g->linked_at = RecordTimestamp(rec, "linked_at", false, &linked_null);
	g->created_at = RecordTimestamp(rec, "created_at", true, &isnull);
	g->last_activity_at = RecordTimestamp(rec, "last_activity_at", true, &isnull);
	if (g->last_activity_at < g->created_at)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("last_activity_at of session \"%s\" is before its created_at", g->session_name));
	g->last_turn_no = RecordNumber(rec, "last_turn_no", false, 0, &isnull);
	g->has_last_turn_no = !isnull;
	g->live_turns = RecordNumber(rec, "live_turns", false, 0, &isnull);
	g->has_live_turns = !isnull;
	g->live_answers = RecordNumber(rec, "live_answers", false, 0, &isnull);
	g->has_live_answers = !isnull;
	g->has_summary_through = RecordValue(rec, "summary_through_turn_no", &(JsonbValue) {0}) != NULL;
	g->summary_through_stated = RecordNumber(rec, "summary_through_turn_no", false, 1, &g->summary_through_null);
	g->redactions = RecordNumber(rec, "redactions", false, 0, &isnull);
	g->has_redactions = !isnull;
	title = RecordText(rec, "title", false);
	if (title != NULL)
		CheckSessionTitle(title);
	if (identity != NULL && linked_null)
		ReportBadRecord(rec, "key \"%s\" of a %s record must be set when identity_id is", "linked_at", NULL);
	if (identity == NULL && !linked_null)
		ReportBadRecord(rec, "key \"%s\" of a %s record must be null when identity_id is", "linked_at", NULL);

	raw_identity = identity;
	identity = MappedIdentity(opts, identity);
	if (identity == NULL && opts->as_identity != NULL)
	{
		identity = opts->as_identity;
		g->link_now = true;
	}
	g->identity = identity;
	g->open = true;

	/*
	 * A session of an erased identity is refused before its row is looked
	 * at: the refusal of a link (below) would audit the identity in clear.
	 */
	if (RecordIdentityErased(opts, raw_identity, identity))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("session \"%s\" belongs to an erased identity", g->session_name),
				errdetail("Its identity is one that erase_identity erased in this tenant; an import does not bring it back."));

	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	values[2] = TextOrNull(identity, &nulls[2]);
	values[3] = TimestampTzGetDatum(g->created_at);
	values[4] = TimestampTzGetDatum(g->last_activity_at);
	values[5] = TextOrNull(title, &nulls[5]);
	SpiRunPlan(SpiKeptPlan(&session_insert_plan, SESSION_INSERT_SQL, 6, argtypes), values, nulls,
			   false, 0, SPI_OK_INSERT_RETURNING);
	if (SPI_processed == 0)
	{
		text	   *existing;
		Datum		d;

		SpiRunSessionPlan(&session_existing_plan, SESSION_EXISTING_SQL, opts->tenant,
						  g->session_id, false, 0, SPI_OK_SELECT);
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		existing = isnull ? NULL : DatumGetTextPCopy(d);
		g->stored_last_turn_no = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 2, &isnull));

		/*
		 * A session erase_identity erased here takes nothing of a file
		 * that names another identity (the one erased, in clear without a
		 * key): refused before the link below would audit that identity.
		 */
		if (existing != NULL && IsErasedIdentity(existing) && !TextEqual(existing, identity))
			ereport(ERROR,
					errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					errmsg("session \"%s\" was erased", g->session_name),
					errdetail("erase_identity took the identity of this session here; an import does not bring it back."));
		/* the refusal of link_session, audited the same way */
		if (existing != NULL && identity != NULL)
			SessionLinkLocked(opts->tenant, g->session_id, existing, identity, false);
		if (opts->error_on_conflict)
			ereport(ERROR,
					errcode(ERRCODE_UNIQUE_VIOLATION),
					errmsg("session \"%s\" exists already", g->session_name),
					errhint("convctx import --on-conflict=skip leaves existing sessions alone and counts them."));
		/* linked where the file comes from: linked here too, as link_session links */
		if (existing == NULL && identity != NULL)
			SessionLinkLocked(opts->tenant, g->session_id, NULL, identity, true);
		g->stored_identity = existing ? existing : identity;
		g->existing = true;
		CountSkipped(counts, REC_SESSION, SKIP_THERE);
		return;
	}
	counts->imported[REC_SESSION]++;
}

/* 22P04 unless the record belongs to the session group that is open. */
static void
CheckInGroup(ImportRecord *rec, SessionGroup *g, text *session_id)
{
	rec->group_id = text_to_cstring(session_id);
	if (!g->open || strcmp(g->session_name, rec->group_id) != 0)
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("%s record of session \"%s\" is not in that session's group",
					   record_type_names[rec->type], rec->group_id),
				errdetail("The records of a session follow its session record."));
}

/* Room for one more element in a growing array of the group. */
static void *
GroupGrow(SessionGroup *g, void *array, int n, int *max, Size size)
{
	if (n < *max)
		return array;
	*max = Max(*max * 2, 16);
	return array ? repalloc(array, *max * size) : MemoryContextAlloc(g->cxt, *max * size);
}

/* A turn record: checked on its own now, with its group at the end. */
static void
ImportTurn(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	TurnRow    *t;
	bool		isnull;
	int			i;

	CheckInGroup(rec, g, RecordId(rec, "session_id", true));
	g->turns = GroupGrow(g, g->turns, g->nturns, &g->maxturns, sizeof(TurnRow));
	t = &g->turns[g->nturns];
	memset(t, 0, sizeof(*t));
	t->recno = rec->recno;
	t->turn_id = RecordUuid(rec, "turn_id", true);
	t->turn_no = RecordNumber(rec, "turn_no", true, 1, &isnull);
	t->request_id = RecordId(rec, "request_id", true);
	t->version = (int32) RecordNumber(rec, "record_version", false, 1, &isnull);
	if (isnull)
		t->version = 1;
	t->replaced_by = RecordUuid(rec, "replaced_by_turn_id", false);
	t->identity = MappedIdentity(opts, RecordId(rec, "identity_id", false));
	/* a turn is of its session's identity, or of none yet when linked later */
	if (t->identity != NULL && !TextEqual(t->identity, g->identity))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("turn of identity \"%s\" in session \"%s\" of %s", text_to_cstring(t->identity),
					   g->session_name, g->identity ? psprintf("identity \"%s\"", text_to_cstring(g->identity))
					   : "no identity"),
				errdetail("A turn's identity_id is null or the identity of its session."));
	if (t->identity == NULL && g->link_now)
		t->identity = g->identity;	/* as link_session's backfill */
	t->created_at = RecordTimestamp(rec, "created_at", true, &isnull);
	t->finalized_at = RecordTimestamp(rec, "finalized_at", false, &isnull);
	t->finalized = !isnull;
	t->deleted_at = RecordTimestamp(rec, "deleted_at", false, &isnull);
	t->tombstone = !isnull;
	if ((t->finalized && t->finalized_at < t->created_at) || (t->tombstone && t->deleted_at < t->created_at))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("a turn is %s before it was created", t->tombstone && t->deleted_at < t->created_at
					   ? "redacted" : "finalized"));
	t->redaction = RecordNumber(rec, "redaction", false, 1, &isnull);
	t->has_redaction = !isnull;
	if (t->has_redaction && !t->tombstone)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("a turn that is not redacted has a redaction"),
				errdetail("redaction is the redaction generation that made a tombstone; it is null on live turns."));
	t->translate_chat = RecordBool(rec, "translate_chat", &isnull);
	t->texts[0] = RecordLongText(rec, "question_neutral");
	t->texts[1] = RecordLongText(rec, "answer_neutral");
	t->texts[2] = RecordLongText(rec, "question_translated");
	t->texts[3] = RecordLongText(rec, "answer_translated");
	t->fallback = RecordBool(rec, "answer_translated_is_fallback", &isnull);
	t->has_fallback = !isnull;
	t->metadata = RecordJsonb(rec, "metadata", false, false);
	/* erase_identity leaves only tombstones under its stand-in */
	if (!t->tombstone && g->identity != NULL && IsErasedIdentity(g->identity))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("a live turn of session \"%s\" under the erased identity \"%s\"",
					   g->session_name, text_to_cstring(g->identity)),
				errdetail("erase_identity leaves only tombstones under the identity it puts in place of the erased one."));
	if (t->tombstone)
	{
		if (t->texts[0] || t->texts[1] || t->texts[2] || t->texts[3] || t->metadata)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("a tombstone keeps no text"),
					errdetail("The turn has deleted_at set, so its texts and metadata must be null."));
	}
	else
	{
		if (t->texts[0] == NULL)
			ReportBadRecord(rec, "key \"%s\" of a %s record must be set unless the turn is a tombstone",
							"question_neutral", NULL);
		if (VARSIZE_ANY_EXHDR(t->texts[0]) == 0)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("question_neutral must not be empty"));
		if (t->finalized && t->texts[1] == NULL)
			ReportBadRecord(rec, "key \"%s\" of a %s record must be set when finalized_at is",
							"answer_neutral", NULL);
	}
	if (t->metadata != NULL)
	{
		Jsonb	   *kept = MetadataFilterStored(t->metadata);

		counts->metadata_keys_dropped += JB_ROOT_COUNT(t->metadata) - (kept ? JB_ROOT_COUNT(kept) : 0);
		t->metadata = kept;
	}
	for (i = 0; i < 3; i++)
	{
		static const char *const labels[3] = {"pipeline_name", "consultant", "repository"};

		t->labels[i] = RecordText(rec, labels[i], false);
		if (t->labels[i] != NULL)
			CheckIdLength(VARSIZE_ANY_EXHDR(t->labels[i]), labels[i]);
	}
	g->nturns++;
}

/* A retrieval or clarification record: (session_id, turn_no, two jsonb, recorded_at). */
static void
ImportTurnData(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	TurnDataRow *d;
	bool		isnull;
	bool		retrieval = (rec->type == REC_RETRIEVAL);
	int			i;

	CheckInGroup(rec, g, RecordId(rec, "session_id", true));
	g->data = GroupGrow(g, g->data, g->ndata, &g->maxdata, sizeof(TurnDataRow));
	d = &g->data[g->ndata];
	d->recno = rec->recno;
	d->type = rec->type;
	d->turn_no = RecordNumber(rec, "turn_no", true, 1, &isnull);
	for (i = 0; i < g->ndata; i++)
		if (g->data[i].type == d->type && g->data[i].turn_no == d->turn_no)
			ReportBadRecord(rec, psprintf("turn " INT64_FORMAT " of session \"%s\" has two %s records",
										  d->turn_no, g->session_name, record_type_names[d->type]),
							NULL, NULL);
	if (retrieval)
	{
		d->first = RecordJsonb(rec, "chunks", true, true);
		d->second = RecordJsonb(rec, "citations", true, true);
		/* what record_retrieval stores: chunk objects, citations resolved to chunks */
		CheckChunkArray(d->first, "chunks");
		CheckChunkArray(d->second, "citations");
	}
	else
	{
		d->first = RecordJsonb(rec, "questions", true, true);
		d->second = RecordJsonb(rec, "inferred_context", true, false);
		CheckQuestions(&d->first->root, "questions");
	}
	d->recorded_at = RecordTimestamp(rec, "recorded_at", true, &isnull);
	g->ndata++;
}

static void
ImportSummary(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	bool		isnull;

	CheckInGroup(rec, g, RecordId(rec, "session_id", true));
	if (g->summary_recno)
		ReportBadRecord(rec, psprintf("session \"%s\" has two summaries", g->session_name), NULL, NULL);
	g->summary = RecordLongText(rec, "summary");
	if (g->summary == NULL)
		(void) RecordText(rec, "summary", true);
	g->summary_through = RecordNumber(rec, "through_turn_no", true, 1, &isnull);
	g->summary_covered = RecordNumber(rec, "covered_messages", false, 0, &isnull);
	if (isnull)
		g->summary_covered = -1;
	g->summary_updated_at = RecordTimestamp(rec, "updated_at", true, &isnull);
	g->summary_recno = rec->recno;
}

/*
 * A context record: in its session's group, or standing alone (a
 * conversation without a session row, or one an identity export took
 * for its user_id). One that exists already is skipped, or refused; so is
 * one that an erasure deleted (CheckContextNotErased).
 */
static void
ImportContext(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	text	   *conversation_id = RecordId(rec, "conversation_id", true);
	Jsonb	   *ctx;
	text	   *raw_user;
	text	   *user;
	TimestampTz created_at;
	TimestampTz updated_at;
	bool		isnull;
	bool		in_group;

	rec->group_id = text_to_cstring(conversation_id);
	in_group = g->open && strcmp(g->session_name, rec->group_id) == 0;
	ctx = RecordJsonb(rec, "context", true, false);
	ContextCheckShape(ctx);
	raw_user = RecordId(rec, "user_id", false);
	user = MappedIdentity(opts, raw_user);
	created_at = RecordTimestamp(rec, "created_at", true, &isnull);
	updated_at = RecordTimestamp(rec, "updated_at", true, &isnull);
	if (updated_at < created_at)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("updated_at of the context of conversation \"%s\" is before its created_at", rec->group_id));
	CheckContextNotErased(opts, conversation_id, rec->group_id, raw_user, user);
	if (in_group)
	{
		if (g->context_recno)
			ReportBadRecord(rec, psprintf("conversation \"%s\" has two contexts", g->session_name), NULL, NULL);
		g->context_recno = rec->recno;
		g->context = ctx;
		g->context_user = user;
		g->context_created_at = created_at;
		g->context_updated_at = updated_at;
		return;
	}

	/* standing alone: written now */
	CheckFirstInBatch(opts, rec, "conversation", conversation_id);
	WriteContext(opts, conversation_id, rec->group_id, ctx, user, created_at, updated_at, counts);
}

/*
 * Take one record, parsed. What a group keeps of it is copied into the
 * current memory context (the group's): texts, ids and jsonb values.
 */
static void
ImportOne(ImportOptions *opts, ImportRecord *rec, Jsonb *jb, SessionGroup *g, ImportCounts *counts)
{
	JsonbValue	tv;
	int			t;

	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("an import record must be a JSON object, not %s", JsonbRootTypeName(jb)));
	rec->obj = &jb->root;
	if (JSONB_KEY(rec->obj, "type", &tv) == NULL || tv.type != jbvString)
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("an import record must have a string \"type\""));
	for (t = 0; t < REC_TYPES; t++)
		if (JsonbStringIs(&tv, record_type_names[t]))
			break;
	if (t == REC_TYPES)
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("unknown record type \"%s\"", pnstrdup(tv.val.string.val, tv.val.string.len)),
				errdetail("Import takes records of type session, turn, retrieval, clarification, summary and context; the tool reads the header and trailer."));
	rec->type = (RecordType) t;
	rec->type_known = true;
	CheckRecordKeys(rec);

	switch (rec->type)
	{
		case REC_SESSION:
			ImportSession(opts, rec, g, counts);
			break;
		case REC_TURN:
			ImportTurn(opts, rec, g, counts);
			break;
		case REC_RETRIEVAL:
		case REC_CLARIFICATION:
			ImportTurnData(opts, rec, g, counts);
			break;
		case REC_SUMMARY:
			ImportSummary(opts, rec, g, counts);
			break;
		case REC_CONTEXT:
			ImportContext(opts, rec, g, counts);
			break;
		case REC_TYPES:
			break;
	}
}

/*
 * Does the record of line start a new group (a session record, or a
 * context of a conversation other than the open group's)? Read cheaply,
 * before the record is parsed into the group's memory.
 */
static bool
StartsGroup(Jsonb *jb, SessionGroup *g)
{
	JsonbValue	v;

	if (JSONB_KEY(&jb->root, "type", &v) == NULL || v.type != jbvString)
		return false;
	if (JsonbStringIs(&v, "session"))
		return true;
	if (!JsonbStringIs(&v, "context") || !g->open)
		return false;
	if (JSONB_KEY(&jb->root, "conversation_id", &v) == NULL || v.type != jbvString)
		return false;
	return (int) strlen(g->session_name) != v.val.string.len ||
		memcmp(g->session_name, v.val.string.val, v.val.string.len) != 0;
}

/* Take the records of lines (a one-dimensional text array) in order. */
static void
ImportBatch(ImportOptions *opts, ArrayType *lines, ImportCounts *counts)
{
	ArrayIterator it;
	Datum		d;
	bool		isnull;
	ImportRecord rec;
	SessionGroup g;
	ErrorContextCallback errcb;
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext per_record;
	HASHCTL		hctl;

	memset(&rec, 0, sizeof(rec));
	memset(&g, 0, sizeof(g));
	if (ARR_NDIM(lines) > 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("records must be a one-dimensional array"));

	import_latest = GetCurrentTransactionStartTimestamp() + IMPORT_CLOCK_SKEW;
	hctl.keysize = CONVCTX_MAX_ID_BYTES + 3;
	hctl.entrysize = hctl.keysize;
	hctl.hcxt = caller;
	opts->seen = hash_create("convctx import ids", 256, &hctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	/* a group's records live in its context until it is written */
	g.cxt = AllocSetContextCreate(caller, "convctx import group", ALLOCSET_DEFAULT_SIZES);
	per_record = AllocSetContextCreate(caller, "convctx import record", ALLOCSET_DEFAULT_SIZES);
	errcb.callback = ImportErrorContext;
	errcb.arg = &rec;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	SPI_connect();
	it = array_create_iterator(lines, 0, NULL);
	while (array_iterate(it, &d, &isnull))
	{
		Jsonb	   *jb;

		rec.recno++;
		rec.type_known = false;
		rec.group_id = NULL;
		if (isnull)
			ereport(ERROR,
					errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					errmsg("an import record must not be null"));
		MemoryContextSwitchTo(per_record);
		jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text_to_cstring(DatumGetTextPP(d)))));
		/* a record that starts a group ends the one before */
		if (StartsGroup(jb, &g))
		{
			int			recno = rec.recno;

			MemoryContextSwitchTo(g.cxt);
			FinishGroup(opts, &rec, &g, counts);
			MemoryContextReset(g.cxt);
			rec.recno = recno;
			rec.type_known = false;
			rec.group_id = NULL;
		}
		MemoryContextSwitchTo(g.cxt);
		ImportOne(opts, &rec, jb, &g, counts);
		MemoryContextSwitchTo(caller);
		MemoryContextReset(per_record);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextSwitchTo(g.cxt);
	FinishGroup(opts, &rec, &g, counts);
	MemoryContextSwitchTo(caller);
	rec.recno = 0;
	array_free_iterator(it);
	SPI_finish();
	error_context_stack = errcb.previous;
}

/* The identity map argument: an object of non-empty string ids, or NULL. */
static Jsonb *
ArgIdentityMap(FunctionCallInfo fcinfo, int argno)
{
	Jsonb	   *map = ArgOptionalObject(fcinfo, argno, "identity_map");
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (map == NULL)
		return NULL;
	it = JsonbIteratorInit(&map->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_KEY && tok != WJB_VALUE)
			continue;
		if (v.type != jbvString || v.val.string.len == 0)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("identity_map must map identity ids to identity ids"),
					errdetail("Its keys and values must be non-empty strings."));
		CheckIdLength(v.val.string.len, "an identity id of identity_map");
	}
	return map;
}

/* The audit row of an import: what it wrote and skipped, never content. */
static void
AuditImport(text *tenant, ImportCounts *counts)
{
	JsonbParseState *details = NULL;
	int			t;

	pushJsonbValue(&details, WJB_BEGIN_OBJECT, NULL);
	for (t = 0; t < REC_TYPES; t++)
	{
		JsonbPushKey(&details, record_type_plurals[t]);
		JsonbPushInt(&details, WJB_VALUE, counts->imported[t]);
	}
	JsonbPushKey(&details, "skipped");
	JsonbPushInt(&details, WJB_VALUE, counts->skipped[REC_SESSION] + counts->skipped[REC_CONTEXT]);
	SPI_connect();
	AuditWrite(tenant, "import", NULL, NULL, JsonbEndObjectText(&details));
	SPI_finish();
}

PG_FUNCTION_INFO_V1(convctx_import_records);

/*
 * import_records(records, on_conflict, allow_anonymous, as_identity,
 * identity_map) -> setof (record_type, imported, skipped, skipped_why)
 */
Datum
convctx_import_records(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(import_records);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ImportOptions opts;
	ImportCounts counts;
	ArrayType  *lines;
	text	   *on_conflict;
	int			t;

	VariantRefuse("convctx.import_records()",
				  "Import into a single server first, then distribute with convctx.distribute().");
	ArgNotNull(fcinfo, 0, "records");
	lines = PG_GETARG_ARRAYTYPE_P(0);
	on_conflict = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	memset(&opts, 0, sizeof(opts));
	memset(&counts, 0, sizeof(counts));
	if (on_conflict == NULL || strcmp(text_to_cstring(on_conflict), "skip") == 0)
		opts.error_on_conflict = false;
	else if (strcmp(text_to_cstring(on_conflict), "error") == 0)
		opts.error_on_conflict = true;
	else
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("on_conflict must be \"skip\" or \"error\""));
	opts.allow_anonymous = PG_ARGISNULL(2) ? false : PG_GETARG_BOOL(2);
	opts.as_identity = ArgOptionalId(fcinfo, 3, "as_identity");
	opts.identity_map = ArgIdentityMap(fcinfo, 4);
	opts.tenant = CurrentTenant();

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	ImportBatch(&opts, lines, &counts);
	AuditImport(opts.tenant, &counts);

	for (t = 0; t < REC_TYPES; t++)
	{
		Datum		row[4];
		bool		row_nulls[4] = {false, false, false, false};
		JsonbParseState *why = NULL;
		int			r;

		pushJsonbValue(&why, WJB_BEGIN_OBJECT, NULL);
		for (r = 0; r < SKIP_REASONS; r++)
			if (counts.skipped_why[t][r] > 0)
			{
				JsonbPushKey(&why, skip_reason_names[r]);
				JsonbPushInt(&why, WJB_VALUE, counts.skipped_why[t][r]);
			}
		row[0] = CStringGetTextDatum(record_type_names[t]);
		row[1] = Int64GetDatum(counts.imported[t]);
		row[2] = Int64GetDatum(counts.skipped[t]);
		row[3] = JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&why, WJB_END_OBJECT, NULL)));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, row_nulls);
	}
	if (counts.metadata_keys_dropped > 0)
	{
		Datum		row[4];
		bool		row_nulls[4] = {false, false, false, false};
		JsonbParseState *why = NULL;

		pushJsonbValue(&why, WJB_BEGIN_OBJECT, NULL);
		JsonbPushKey(&why, "not in convctx.metadata_allowlist");
		JsonbPushInt(&why, WJB_VALUE, counts.metadata_keys_dropped);
		row[0] = CStringGetTextDatum("metadata key");
		row[1] = Int64GetDatum(0);
		row[2] = Int64GetDatum(counts.metadata_keys_dropped);
		row[3] = JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&why, WJB_END_OBJECT, NULL)));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, row_nulls);
	}
	return (Datum) 0;
}
