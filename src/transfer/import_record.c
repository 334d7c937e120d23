/*-------------------------------------------------------------------------
 *
 * import_record.c
 *	  One record of an import (import.c): its fields read and checked, and
 *	  the errors that name the record.
 *
 * Every field is read by its key from the record's jsonb, its type and
 * range checked (22P04 naming the record and the key otherwise): ids and
 * labels as the API takes them, numbers within IMPORT_MAX_NUMBER, times
 * no later than the call plus IMPORT_CLOCK_SKEW, unknown keys refused.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/transfer/import_record.c
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
#include "utils/datetime.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"

#include "core/args.h"
#include "transfer/import.h"
#include "core/jsonb_util.h"

/* kept plans shared by the import files (import.h) */
SPIPlanPtr	summary_insert_plan;

const char *const record_type_names[REC_TYPES] = {
	"session", "turn", "retrieval", "clarification", "summary", "context", "embedding"
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
static const char *const embedding_keys[] = {
	"type", "session_id", "turn_id", "model", "embedding", "stored_at", NULL
};
static const char *const *const record_keys[REC_TYPES] = {
	session_keys, turn_keys, retrieval_keys, clarification_keys, summary_keys, context_keys,
	embedding_keys
};


/*
 * Error context: which record of the batch failed. The tool reads the
 * number back ("import record N") to tell the group that failed.
 */
void
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

/* The record type with its article, for messages: "a turn", "an embedding". */
static const char *
RecordTypeArticled(RecordType type)
{
	return psprintf("%s %s", type == REC_EMBEDDING ? "an" : "a", record_type_names[type]);
}

/* 22P04: a record that does not have the shape of the format. */
void
ReportBadRecord(ImportRecord *rec, const char *msg, const char *key, const char *detail)
	pg_attribute_noreturn();

void
ReportBadRecord(ImportRecord *rec, const char *msg, const char *key, const char *detail)
{
	ereport(ERROR,
			errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
			key ? errmsg(msg, key, RecordTypeArticled(rec->type)) : errmsg("%s", msg),
			detail ? errdetail("%s", detail) : 0,
			errhint("The records of a convctx.jsonl file are described in docs/import-export.md."));
}

/* The value of key, or NULL when the record does not have it. */
JsonbValue *
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
			ReportBadRecord(rec, v == NULL ? "key \"%s\" is missing from %s record"
							: "key \"%s\" of %s record must not be null", key, NULL);
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
			errmsg("key \"%s\" of %s record must be %s, not %s",
				   key, RecordTypeArticled(rec->type), expected, JsonbValueTypeName(v)),
			errhint("The records of a convctx.jsonl file are described in docs/import-export.md."));
}

/*
 * The value of key when it is of JSON type type (NULL when absent or
 * null); 22P04 naming expected when it is of another.
 */
static JsonbValue *
RecordTyped(ImportRecord *rec, const char *key, bool required, enum jbvType type,
			const char *expected, JsonbValue *buf)
{
	JsonbValue *v = RecordField(rec, key, required, buf);

	if (v != NULL && v->type != type)
		ReportWrongType(rec, key, expected, v);
	return v;
}

/* A string value as text (NULL when absent or null). */
text *
RecordText(ImportRecord *rec, const char *key, bool required)
{
	JsonbValue	buf;
	JsonbValue *v = RecordTyped(rec, key, required, jbvString, "a string", &buf);

	if (v == NULL)
		return NULL;
	return cstring_to_text_with_len(v->val.string.val, v->val.string.len);
}

/* An id: a non-empty string of at most CONVCTX_MAX_ID_BYTES. */
text *
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
text *
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
int64
RecordNumber(ImportRecord *rec, const char *key, bool required, int64 min, bool *isnull)
{
	JsonbValue	buf;
	JsonbValue *v = RecordTyped(rec, key, required, jbvNumeric, "an integer", &buf);
	Datum		n;

	*isnull = (v == NULL);
	if (v == NULL)
		return 0;
	n = NumericGetDatum(v->val.numeric);
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, n, DirectFunctionCall1(numeric_floor, n))) != 0 ||
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, n,
										  DirectFunctionCall1(int8_numeric, Int64GetDatum(min)))) < 0 ||
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, n,
										  DirectFunctionCall1(int8_numeric, Int64GetDatum(IMPORT_MAX_NUMBER)))) > 0)
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("key \"%s\" of %s record must be an integer from " INT64_FORMAT " to %d",
					   key, RecordTypeArticled(rec->type), min, IMPORT_MAX_NUMBER));
	return DatumGetInt64(DirectFunctionCall1(numeric_int8, n));
}

/* The latest time a record may hold, for this call (RecordTimestamp). */
TimestampTz import_latest;

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
					errmsg("%s of %s record is \"%s\", not a time", key, RecordTypeArticled(rec->type), str),
					errdetail("Words such as now, today, yesterday and epoch are read as another time on every import."),
					errhint("Write the time itself, as convctx export does (RFC 3339)."));
	}
}

/* A timestamp in any form timestamptz input takes; 0 with *isnull. */
TimestampTz
RecordTimestamp(ImportRecord *rec, const char *key, bool required, bool *isnull)
{
	JsonbValue	buf;
	JsonbValue *v = RecordTyped(rec, key, required, jbvString, "a timestamp string", &buf);
	TimestampTz ts;
	char	   *str;

	*isnull = (v == NULL);
	if (v == NULL)
		return 0;
	str = pnstrdup(v->val.string.val, v->val.string.len);
	CheckNoTimeWord(rec, key, str);
	ts = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in, CStringGetDatum(str),
												 ObjectIdGetDatum(InvalidOid),
												 Int32GetDatum(-1)));
	/* a time no retention rule could ever reach is no history */
	if (TIMESTAMP_NOT_FINITE(ts) || ts > import_latest)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s of %s record is %s", key, RecordTypeArticled(rec->type),
					   TIMESTAMP_NOT_FINITE(ts) ? "not a finite time" : "in the future"),
				errdetail("Imported times must be real times of the past (at most a day ahead of this server's clock)."));
	return ts;
}

pg_uuid_t *
RecordUuid(ImportRecord *rec, const char *key, bool required)
{
	JsonbValue	buf;
	JsonbValue *v = RecordTyped(rec, key, required, jbvString, "a uuid string", &buf);

	if (v == NULL)
		return NULL;
	return DatumGetUUIDP(DirectFunctionCall1(uuid_in,
											 CStringGetDatum(pnstrdup(v->val.string.val,
																	  v->val.string.len))));
}

bool
RecordBool(ImportRecord *rec, const char *key, bool *isnull)
{
	JsonbValue	buf;
	JsonbValue *v = RecordTyped(rec, key, false, jbvBool, "a boolean", &buf);

	*isnull = (v == NULL);
	if (v == NULL)
		return false;
	return v->val.boolean;
}

/* An object or array value as jsonb (NULL when absent or null). */
Jsonb *
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
void
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
			ReportBadRecord(rec, "unknown key \"%s\" in %s record",
							pnstrdup(v.val.string.val, v.val.string.len), NULL);
	}
}

/* The identity an imported identity becomes under identity_map (or itself). */
text *
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

Datum
TextOrNull(text *t, char *null)
{
	*null = t ? ' ' : 'n';
	return PointerGetDatum(t);
}

/*
 * 22P04 about a record of the group, named in the error context: the
 * record that is wrong, or the group's session record for the group.
 */
void
ReportGroup(ImportRecord *rec, int recno, RecordType type, const char *msg, const char *detail)
	pg_attribute_noreturn();

void
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

void
CountSkipped(ImportCounts *counts, RecordType type, SkipReason why)
{
	counts->skipped[type]++;
	counts->skipped_why[type][why]++;
}
