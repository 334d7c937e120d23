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
 * session exists already is skipped whole (or, with on_conflict 'error',
 * refused), so that running an import again writes nothing twice. A
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
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"

#include "convctx.h"

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
	"last_turn_no", "live_turns", "live_answers", "summary_through_turn_no", "redactions", NULL
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
} ImportOptions;

/*
 * The session group being written: set by its session record, checked
 * and completed when the next group starts or the batch ends.
 */
typedef struct SessionGroup
{
	MemoryContext cxt;			/* where the group's values live */
	bool		open;
	bool		skipped;		/* the session exists: the group is skipped */
	text	   *session_id;
	char	   *session_name;	/* for messages */
	bool		anonymous;
	TimestampTz last_activity_at;
	bool		has_summary;
	int64		summary_through;
	int64		summary_covered;
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

typedef struct ImportCounts
{
	int64		imported[REC_TYPES];
	int64		skipped[REC_TYPES];
	int64		metadata_keys_dropped;
} ImportCounts;

static SPIPlanPtr session_insert_plan = NULL;
static SPIPlanPtr session_existing_plan = NULL;
static SPIPlanPtr link_insert_plan = NULL;
static SPIPlanPtr turn_insert_plan = NULL;
static SPIPlanPtr retrieval_insert_plan = NULL;
static SPIPlanPtr clarification_insert_plan = NULL;
static SPIPlanPtr summary_insert_plan = NULL;
static SPIPlanPtr context_insert_plan = NULL;
static SPIPlanPtr group_counts_plan = NULL;
static SPIPlanPtr session_finish_plan = NULL;

/* $1 tenant, $2 session, $3 identity, $4 created_at, $5 last_activity_at */
#define SESSION_INSERT_SQL \
	"INSERT INTO convctx.session (tenant_id, session_id, identity_id, created_at, last_activity_at)" \
	" VALUES ($1, $2, $3, $4, $5)" \
	" ON CONFLICT (tenant_id, session_id) DO NOTHING" \
	" RETURNING 1"

/* The identity of an existing session, locked as every writer locks it. */
#define SESSION_EXISTING_SQL \
	"SELECT identity_id FROM convctx.session WHERE " SESSION_KEY " FOR UPDATE"

#define LINK_INSERT_SQL \
	"INSERT INTO convctx.session_link (tenant_id, session_id, identity_id, linked_at)" \
	" VALUES ($1, $2, $3, $4)"

#define TURN_INSERT_SQL \
	"INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id," \
	" record_version, replaced_by_turn_id, identity_id, created_at, finalized_at, deleted_at," \
	" redaction, translate_chat, question_neutral, answer_neutral, question_translated," \
	" answer_translated, answer_translated_is_fallback, metadata, pipeline_name, consultant," \
	" repository)" \
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17," \
	"         $18, $19, $20, $21, $22)"

#define RETRIEVAL_INSERT_SQL \
	"INSERT INTO convctx.turn_retrieval (tenant_id, session_id, turn_no, chunks, citations, recorded_at)" \
	" VALUES ($1, $2, $3, $4, $5, $6)"

#define CLARIFICATION_INSERT_SQL \
	"INSERT INTO convctx.clarification (tenant_id, session_id, turn_no, questions, inferred_context," \
	" recorded_at) VALUES ($1, $2, $3, $4, $5, $6)"

#define SUMMARY_INSERT_SQL \
	"INSERT INTO convctx.session_summary (tenant_id, session_id, summary, through_turn_no," \
	" covered_messages, updated_at) VALUES ($1, $2, $3, $4, 0, $5)"

/* A context that exists already is left alone: NULL row. */
#define CONTEXT_INSERT_SQL \
	"INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json, user_id," \
	" created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)" \
	" ON CONFLICT (tenant_id, conversation_id) DO NOTHING" \
	" RETURNING 1"

/*
 * What convctx derives from a session's turns: live (current, not
 * redacted) turns, their answers, the newest turn_no, the newest
 * redaction generation, and the messages of live turns up to $3 (a
 * summary's through_turn_no).
 */
#define GROUP_COUNTS_SQL \
	"SELECT pg_catalog.count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL)," \
	"       pg_catalog.count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL" \
	"                                     AND finalized_at IS NOT NULL)," \
	"       COALESCE(pg_catalog.max(turn_no), 0), COALESCE(pg_catalog.max(redaction), 0)," \
	"       pg_catalog.count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL" \
	"                                     AND turn_no OPERATOR(pg_catalog.<=) $3)" \
	"       OPERATOR(pg_catalog.+)" \
	"       pg_catalog.count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL" \
	"                                     AND finalized_at IS NOT NULL" \
	"                                     AND turn_no OPERATOR(pg_catalog.<=) $3)" \
	"  FROM convctx.turn WHERE " SESSION_KEY

/* $3 last_turn_no, $4 live_turns, $5 live_answers, $6 summary_through_turn_no, $7 redactions, $8 covered */
#define SESSION_FINISH_SQL \
	"WITH s AS (UPDATE convctx.session SET last_turn_no = $3, live_turns = $4, live_answers = $5," \
	"                  summary_through_turn_no = $6, redactions = $7" \
	"            WHERE " SESSION_KEY ")" \
	" UPDATE convctx.session_summary SET covered_messages = $8 WHERE " SESSION_KEY

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
	if (rec->type_known && rec->group_id != NULL)
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

/* An integer; *isnull when absent or null. */
static int64
RecordInt8(ImportRecord *rec, const char *key, bool required, bool *isnull)
{
	JsonbValue	buf;
	JsonbValue *v = RecordField(rec, key, required, &buf);
	Datum		n;
	int64		i;

	*isnull = (v == NULL);
	if (v == NULL)
		return 0;
	if (v->type != jbvNumeric)
		ReportWrongType(rec, key, "an integer", v);
	n = NumericGetDatum(v->val.numeric);
	i = DatumGetInt64(DirectFunctionCall1(numeric_int8, n));
	/* numeric_int8 rounds: a fraction is not an integer */
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, n,
										  DirectFunctionCall1(int8_numeric, Int64GetDatum(i)))) != 0)
		ReportWrongType(rec, key, "an integer", v);
	return i;
}

/* A timestamp in any form timestamptz input takes; 0 with *isnull. */
static TimestampTz
RecordTimestamp(ImportRecord *rec, const char *key, bool required, bool *isnull)
{
	JsonbValue	buf;
	JsonbValue *v = RecordField(rec, key, required, &buf);

	*isnull = (v == NULL);
	if (v == NULL)
		return 0;
	if (v->type != jbvString)
		ReportWrongType(rec, key, "a timestamp string", v);
	return DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
												   CStringGetDatum(pnstrdup(v->val.string.val,
																			v->val.string.len)),
												   ObjectIdGetDatum(InvalidOid),
												   Int32GetDatum(-1)));
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
 * Check the session group that ends here against what its turns make,
 * and write the derived values into its session row and summary.
 */
static void
FinishGroup(ImportOptions *opts, SessionGroup *g)
{
	Oid			argtypes[8] = {TEXTOID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID};
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int64		live_turns,
				live_answers,
				max_turn_no,
				max_redaction,
				covered;
	bool		isnull;

	if (!g->open || g->skipped)
	{
		g->open = false;
		return;
	}
	g->open = false;

	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	values[2] = Int64GetDatum(g->has_summary ? g->summary_through : 0);
	SpiRunPlan(SpiKeptPlan(&group_counts_plan, GROUP_COUNTS_SQL, 3, argtypes), values, NULL,
			   false, 1, SPI_OK_SELECT);
	live_turns = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	live_answers = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	max_turn_no = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	max_redaction = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	covered = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull));

#define CHECK_STATED(has, stated, actual, name) \
	if ((has) && (stated) != (actual)) \
		ereport(ERROR, \
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT), \
				errmsg("session \"%s\" states %s " INT64_FORMAT ", but its records make " INT64_FORMAT, \
					   g->session_name, name, (int64) (stated), (int64) (actual)), \
				errdetail("convctx derives this count from the session's turns; the file was changed or is incomplete."))

	CHECK_STATED(g->has_live_turns, g->live_turns, live_turns, "live_turns");
	CHECK_STATED(g->has_live_answers, g->live_answers, live_answers, "live_answers");
	CHECK_STATED(g->has_summary && g->summary_covered >= 0, g->summary_covered, covered,
				 "covered_messages");
	if (g->has_summary_through &&
		(g->summary_through_null ? g->has_summary
		 : (!g->has_summary || g->summary_through_stated != g->summary_through)))
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("summary_through_turn_no of session \"%s\" does not match its summary record",
					   g->session_name));
	if (g->has_last_turn_no && g->last_turn_no < max_turn_no)
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("session \"%s\" states last_turn_no " INT64_FORMAT ", but it has turn " INT64_FORMAT,
					   g->session_name, g->last_turn_no, max_turn_no));
	if (g->has_redactions && g->redactions < max_redaction)
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("session \"%s\" states redactions " INT64_FORMAT ", but a tombstone of redaction " INT64_FORMAT,
					   g->session_name, g->redactions, max_redaction));

	/*
	 * An anonymous session that the next purge would delete, or that is
	 * over the cap, would not survive: refuse it unless asked.
	 */
	if (g->anonymous && !opts->allow_anonymous)
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

	values[2] = Int64GetDatum(g->has_last_turn_no ? g->last_turn_no : max_turn_no);
	values[3] = Int64GetDatum(live_turns);
	values[4] = Int64GetDatum(live_answers);
	values[5] = Int64GetDatum(g->summary_through);
	nulls[5] = g->has_summary ? ' ' : 'n';
	values[6] = Int64GetDatum(g->has_redactions ? g->redactions : max_redaction);
	values[7] = Int64GetDatum(covered);
	SpiRunPlan(SpiKeptPlan(&session_finish_plan, SESSION_FINISH_SQL, 8, argtypes), values, nulls,
			   false, 0, SPI_OK_UPDATE);
}

/*
 * A session record: start its group. The session row is created at once
 * (its children refer to it); when it exists the group is skipped, or
 * refused when it belongs to another identity or on_conflict is 'error'.
 */
static void
ImportSession(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	Oid			argtypes[5] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	text	   *identity;
	TimestampTz linked_at;
	bool		linked_null;
	bool		isnull;
	bool		link_now = false;

	MemoryContext cxt = g->cxt;

	memset(g, 0, sizeof(*g));
	g->cxt = cxt;
	g->session_id = RecordId(rec, "session_id", true);
	g->session_name = MemoryContextStrdup(cxt, text_to_cstring(g->session_id));
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		g->session_id = DatumGetTextPCopy(PointerGetDatum(g->session_id));
		MemoryContextSwitchTo(old);
	}
	rec->group_id = g->session_name;
	identity = RecordId(rec, "identity_id", false);
	linked_at = RecordTimestamp(rec, "linked_at", false, &linked_null);
	values[3] = TimestampTzGetDatum(RecordTimestamp(rec, "created_at", true, &isnull));
	g->last_activity_at = RecordTimestamp(rec, "last_activity_at", true, &isnull);
	values[4] = TimestampTzGetDatum(g->last_activity_at);
	g->last_turn_no = RecordInt8(rec, "last_turn_no", false, &isnull);
	g->has_last_turn_no = !isnull;
	g->live_turns = RecordInt8(rec, "live_turns", false, &isnull);
	g->has_live_turns = !isnull;
	g->live_answers = RecordInt8(rec, "live_answers", false, &isnull);
	g->has_live_answers = !isnull;
	g->has_summary_through = RecordValue(rec, "summary_through_turn_no", &(JsonbValue) {0}) != NULL;
	g->summary_through_stated = RecordInt8(rec, "summary_through_turn_no", false, &g->summary_through_null);
	g->redactions = RecordInt8(rec, "redactions", false, &isnull);
	g->has_redactions = !isnull;
	if (identity != NULL && linked_null)
		ReportBadRecord(rec, "key \"%s\" of a %s record must be set when identity_id is", "linked_at", NULL);
	if (identity == NULL && !linked_null)
		ReportBadRecord(rec, "key \"%s\" of a %s record must be null when identity_id is", "linked_at", NULL);

	identity = MappedIdentity(opts, identity);
	if (identity == NULL && opts->as_identity != NULL)
	{
		identity = opts->as_identity;
		link_now = true;
	}
	g->anonymous = (identity == NULL);
	g->open = true;

	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	values[2] = TextOrNull(identity, &nulls[2]);
	SpiRunPlan(SpiKeptPlan(&session_insert_plan, SESSION_INSERT_SQL, 5, argtypes), values, nulls,
			   false, 0, SPI_OK_INSERT_RETURNING);
	if (SPI_processed == 0)
	{
		text	   *existing;
		Datum		d;

		SpiRunSessionPlan(&session_existing_plan, SESSION_EXISTING_SQL, opts->tenant,
						  g->session_id, false, 0, SPI_OK_SELECT);
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		existing = isnull ? NULL : DatumGetTextPP(d);
		/* the refusal of link_session, audited the same way */
		if (existing != NULL && identity != NULL)
			SessionLinkLocked(opts->tenant, g->session_id, existing, identity, false);
		if (opts->error_on_conflict)
			ereport(ERROR,
					errcode(ERRCODE_UNIQUE_VIOLATION),
					errmsg("session \"%s\" exists already", g->session_name),
					errhint("convctx import --on-conflict=skip leaves existing sessions alone and counts them."));
		g->skipped = true;
		counts->skipped[REC_SESSION]++;
		return;
	}
	if (identity != NULL)
	{
		Oid			link_types[4] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};

		values[3] = link_now ? TimestampTzGetDatum(GetCurrentStatementStartTimestamp())
			: TimestampTzGetDatum(linked_at);
		SpiRunPlan(SpiKeptPlan(&link_insert_plan, LINK_INSERT_SQL, 4, link_types), values, NULL,
				   false, 0, SPI_OK_INSERT);
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

static void
ImportTurn(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	Oid			argtypes[22] = {TEXTOID, TEXTOID, UUIDOID, INT8OID, TEXTOID, INT4OID, UUIDOID,
		TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, BOOLOID, TEXTOID,
		TEXTOID, TEXTOID, TEXTOID, BOOLOID, JSONBOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[22];
	char		nulls[22];
	bool		isnull;
	int64		turn_no;
	int64		version;
	pg_uuid_t  *replaced_by;
	text	   *identity;
	text	   *texts[4];
	Jsonb	   *meta;
	bool		tombstone;
	bool		b;
	int			i;

	CheckInGroup(rec, g, RecordId(rec, "session_id", true));
	if (g->skipped)
	{
		counts->skipped[REC_TURN]++;
		return;
	}
	memset(nulls, ' ', sizeof(nulls));
	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	values[2] = UUIDPGetDatum(RecordUuid(rec, "turn_id", true));
	turn_no = RecordInt8(rec, "turn_no", true, &isnull);
	if (turn_no < 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("turn_no must be at least 1"));
	values[3] = Int64GetDatum(turn_no);
	values[4] = PointerGetDatum(RecordId(rec, "request_id", true));
	version = RecordInt8(rec, "record_version", false, &isnull);
	if (isnull)
		version = 1;
	if (version < 1 || version > PG_INT32_MAX)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("record_version must be between 1 and %d", PG_INT32_MAX));
	values[5] = Int32GetDatum((int32) version);
	replaced_by = RecordUuid(rec, "replaced_by_turn_id", false);
	values[6] = UUIDPGetDatum(replaced_by);
	nulls[6] = replaced_by ? ' ' : 'n';
	identity = MappedIdentity(opts, RecordId(rec, "identity_id", false));
	if (identity == NULL && !g->anonymous && opts->as_identity != NULL)
		identity = opts->as_identity;	/* as link_session's backfill */
	values[7] = TextOrNull(identity, &nulls[7]);
	values[8] = TimestampTzGetDatum(RecordTimestamp(rec, "created_at", true, &isnull));
	values[9] = TimestampTzGetDatum(RecordTimestamp(rec, "finalized_at", false, &isnull));
	nulls[9] = isnull ? 'n' : ' ';
	values[10] = TimestampTzGetDatum(RecordTimestamp(rec, "deleted_at", false, &isnull));
	nulls[10] = isnull ? 'n' : ' ';
	tombstone = !isnull;
	values[11] = Int64GetDatum(RecordInt8(rec, "redaction", false, &isnull));
	nulls[11] = isnull ? 'n' : ' ';
	b = RecordBool(rec, "translate_chat", &isnull);
	values[12] = BoolGetDatum(isnull ? false : b);
	texts[0] = RecordLongText(rec, "question_neutral");
	texts[1] = RecordLongText(rec, "answer_neutral");
	texts[2] = RecordLongText(rec, "question_translated");
	texts[3] = RecordLongText(rec, "answer_translated");
	for (i = 0; i < 4; i++)
		values[13 + i] = TextOrNull(texts[i], &nulls[13 + i]);
	values[17] = BoolGetDatum(RecordBool(rec, "answer_translated_is_fallback", &isnull));
	nulls[17] = isnull ? 'n' : ' ';
	meta = RecordJsonb(rec, "metadata", false, false);
	if (tombstone)
	{
		if (texts[0] || texts[1] || texts[2] || texts[3] || meta)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("a tombstone keeps no text"),
					errdetail("The turn has deleted_at set, so its texts and metadata must be null."));
	}
	else
	{
		if (texts[0] == NULL)
			ReportBadRecord(rec, "key \"%s\" of a %s record must be set unless the turn is a tombstone",
							"question_neutral", NULL);
		if (nulls[9] == ' ' && texts[1] == NULL)
			ReportBadRecord(rec, "key \"%s\" of a %s record must be set when finalized_at is",
							"answer_neutral", NULL);
	}
	if (meta != NULL)
	{
		Jsonb	   *kept = MetadataFilterStored(meta);

		counts->metadata_keys_dropped += JB_ROOT_COUNT(meta) - (kept ? JB_ROOT_COUNT(kept) : 0);
		meta = kept;
	}
	values[18] = PointerGetDatum(meta);
	nulls[18] = meta ? ' ' : 'n';
	for (i = 0; i < 3; i++)
	{
		static const char *const labels[3] = {"pipeline_name", "consultant", "repository"};
		text	   *label = RecordText(rec, labels[i], false);

		if (label != NULL)
			CheckIdLength(VARSIZE_ANY_EXHDR(label), labels[i]);
		values[19 + i] = TextOrNull(label, &nulls[19 + i]);
	}
	SpiRunPlan(SpiKeptPlan(&turn_insert_plan, TURN_INSERT_SQL, 22, argtypes), values, nulls,
			   false, 0, SPI_OK_INSERT);
	counts->imported[REC_TURN]++;
}

/* A retrieval or clarification record: (session_id, turn_no, two jsonb, recorded_at). */
static void
ImportTurnRecord(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	Oid			argtypes[6] = {TEXTOID, TEXTOID, INT8OID, JSONBOID, JSONBOID, TIMESTAMPTZOID};
	Datum		values[6];
	bool		isnull;
	bool		retrieval = (rec->type == REC_RETRIEVAL);

	CheckInGroup(rec, g, RecordId(rec, "session_id", true));
	if (g->skipped)
	{
		counts->skipped[rec->type]++;
		return;
	}
	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	values[2] = Int64GetDatum(RecordInt8(rec, "turn_no", true, &isnull));
	values[3] = PointerGetDatum(RecordJsonb(rec, retrieval ? "chunks" : "questions", true, true));
	values[4] = PointerGetDatum(retrieval ? RecordJsonb(rec, "citations", true, true)
								: RecordJsonb(rec, "inferred_context", true, false));
	values[5] = TimestampTzGetDatum(RecordTimestamp(rec, "recorded_at", true, &isnull));
	if (retrieval)
		SpiRunPlan(SpiKeptPlan(&retrieval_insert_plan, RETRIEVAL_INSERT_SQL, 6, argtypes),
				   values, NULL, false, 0, SPI_OK_INSERT);
	else
		SpiRunPlan(SpiKeptPlan(&clarification_insert_plan, CLARIFICATION_INSERT_SQL, 6, argtypes),
				   values, NULL, false, 0, SPI_OK_INSERT);
	counts->imported[rec->type]++;
}

static void
ImportSummary(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	Oid			argtypes[5] = {TEXTOID, TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID};
	Datum		values[5];
	bool		isnull;

	CheckInGroup(rec, g, RecordId(rec, "session_id", true));
	if (g->skipped)
	{
		counts->skipped[REC_SUMMARY]++;
		return;
	}
	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	values[2] = PointerGetDatum(RecordLongText(rec, "summary"));
	if (DatumGetPointer(values[2]) == NULL)
		(void) RecordText(rec, "summary", true);
	g->summary_through = RecordInt8(rec, "through_turn_no", true, &isnull);
	values[3] = Int64GetDatum(g->summary_through);
	g->summary_covered = RecordInt8(rec, "covered_messages", false, &isnull);
	if (isnull)
		g->summary_covered = -1;
	values[4] = TimestampTzGetDatum(RecordTimestamp(rec, "updated_at", true, &isnull));
	SpiRunPlan(SpiKeptPlan(&summary_insert_plan, SUMMARY_INSERT_SQL, 5, argtypes),
			   values, NULL, false, 0, SPI_OK_INSERT);
	g->has_summary = true;
	counts->imported[REC_SUMMARY]++;
}

/*
 * A context record: in its session's group, or standing alone (a
 * conversation without a session row, or one an identity export took
 * for its user_id). One that exists already is skipped, or refused.
 */
static void
ImportContext(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	Oid			argtypes[6] = {TEXTOID, TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	text	   *conversation_id = RecordId(rec, "conversation_id", true);
	Jsonb	   *ctx;
	bool		isnull;

	rec->group_id = text_to_cstring(conversation_id);
	if (g->open && strcmp(g->session_name, rec->group_id) == 0)
	{
		if (g->skipped)
		{
			counts->skipped[REC_CONTEXT]++;
			return;
		}
	}
	else
		FinishGroup(opts, g);

	ctx = RecordJsonb(rec, "context", true, false);
	ContextCheckShape(ctx);
	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(conversation_id);
	values[2] = PointerGetDatum(ctx);
	values[3] = TextOrNull(MappedIdentity(opts, RecordId(rec, "user_id", false)), &nulls[3]);
	values[4] = TimestampTzGetDatum(RecordTimestamp(rec, "created_at", true, &isnull));
	values[5] = TimestampTzGetDatum(RecordTimestamp(rec, "updated_at", true, &isnull));
	SpiRunPlan(SpiKeptPlan(&context_insert_plan, CONTEXT_INSERT_SQL, 6, argtypes),
			   values, nulls, false, 0, SPI_OK_INSERT_RETURNING);
	if (SPI_processed == 0)
	{
		if (opts->error_on_conflict)
			ereport(ERROR,
					errcode(ERRCODE_UNIQUE_VIOLATION),
					errmsg("the context of conversation \"%s\" exists already", rec->group_id),
					errhint("convctx import --on-conflict=skip leaves existing rows alone and counts them."));
		counts->skipped[REC_CONTEXT]++;
		return;
	}
	counts->imported[REC_CONTEXT]++;
}

/* Parse one line of the batch and write it. */
static void
ImportOne(ImportOptions *opts, ImportRecord *rec, text *line, SessionGroup *g, ImportCounts *counts)
{
	Jsonb	   *jb;
	JsonbValue	tv;
	int			t;

	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text_to_cstring(line))));
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
			FinishGroup(opts, g);
			ImportSession(opts, rec, g, counts);
			break;
		case REC_TURN:
			ImportTurn(opts, rec, g, counts);
			break;
		case REC_RETRIEVAL:
		case REC_CLARIFICATION:
			ImportTurnRecord(opts, rec, g, counts);
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

/* Write the records of lines (a one-dimensional text array) in order. */
static void
ImportBatch(ImportOptions *opts, ArrayType *lines, ImportCounts *counts)
{
	ArrayIterator it;
	Datum		d;
	bool		isnull;
	ImportRecord rec;
	SessionGroup g;
	ErrorContextCallback errcb;
	MemoryContext per_record;
	MemoryContext old;

	memset(&rec, 0, sizeof(rec));
	memset(&g, 0, sizeof(g));
	if (ARR_NDIM(lines) > 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("records must be a one-dimensional array"));

	/* a group's values live in the call's context, a record's in its own */
	g.cxt = CurrentMemoryContext;
	per_record = AllocSetContextCreate(CurrentMemoryContext, "convctx import record",
									   ALLOCSET_DEFAULT_SIZES);
	errcb.callback = ImportErrorContext;
	errcb.arg = &rec;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	SPI_connect();
	it = array_create_iterator(lines, 0, NULL);
	while (array_iterate(it, &d, &isnull))
	{
		rec.recno++;
		rec.type_known = false;
		rec.group_id = NULL;
		if (isnull)
			ereport(ERROR,
					errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					errmsg("an import record must not be null"));
		old = MemoryContextSwitchTo(per_record);
		ImportOne(opts, &rec, DatumGetTextPP(d), &g, counts);
		MemoryContextSwitchTo(old);
		MemoryContextReset(per_record);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	rec.recno = 0;
	FinishGroup(opts, &g);
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
 * identity_map) -> setof (record_type, imported, skipped)
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
		Datum		row[3];
		bool		row_nulls[3] = {false, false, false};

		row[0] = CStringGetTextDatum(record_type_names[t]);
		row[1] = Int64GetDatum(counts.imported[t]);
		row[2] = Int64GetDatum(counts.skipped[t]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, row_nulls);
	}
	if (counts.metadata_keys_dropped > 0)
	{
		Datum		row[3];
		bool		row_nulls[3] = {false, false, false};

		row[0] = CStringGetTextDatum("metadata key");
		row[1] = Int64GetDatum(0);
		row[2] = Int64GetDatum(counts.metadata_keys_dropped);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, row_nulls);
	}
	return (Datum) 0;
}
