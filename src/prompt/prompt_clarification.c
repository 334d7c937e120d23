/*-------------------------------------------------------------------------
 *
 * prompt_clarification.c
 *	  Clarification reconstruction: record_clarification,
 *	  clarification_context and render_clarification.
 *
 * When the model asks clarification questions, the app records them with
 * the model's inferred context against the turn that asked. The answer
 * turn then rebuilds the full context (the original question, the
 * questions, the inferences and the user's answers) server-side from the
 * turn id, or renders a context the client sent (the stateless form).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/prompt/prompt_clarification.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "core/common.h"
#include "core/args.h"
#include "core/idmap.h"
#include "core/jsonb_util.h"
#include "core/spi_plans.h"
#include "core/writable.h"
#include "prompt/prompt_clarification.h"
#include "core/prompt_text.h"
#include "turns/session_row.h"
#include "core/tenancy.h"
#include "turns/turns.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr store_clarification_plan, load_plan;

#define STORE_CLARIFICATION_SQL \
	"INSERT INTO convctx.clarification (tenant_id, session_id, turn_no, questions, inferred_context)" \
	" VALUES ($1, $2, $3, $4, $5)" \
	" ON CONFLICT (tenant_id, session_id, turn_no) DO UPDATE" \
	" SET questions = EXCLUDED.questions, inferred_context = EXCLUDED.inferred_context," \
	"     recorded_at = EXCLUDED.recorded_at"

#define LOAD_SQL \
	"SELECT t.question_neutral, t.deleted_at IS NOT NULL, c.questions, c.inferred_context" \
	"  FROM convctx.turn t" \
	"  LEFT JOIN convctx.clarification c" \
	"         ON c.tenant_id OPERATOR(pg_catalog.=) t.tenant_id" \
	"        AND c.session_id OPERATOR(pg_catalog.=) t.session_id" \
	"        AND c.turn_no OPERATOR(pg_catalog.=) t.turn_no" \
	" WHERE " SESSION_KEY_AT("t") \
	"   AND t.turn_id OPERATOR(pg_catalog.=) $3"

/* Check an array of question objects {question, id?, type?, ...}. */
void
CheckQuestions(JsonbContainer *arr, const char *what)
{
	int			n = JsonContainerSize(arr);
	int			i;

	for (i = 0; i < n; i++)
	{
		JsonbValue *q = getIthJsonbValueFromContainer(arr, i);
		char	   *qwhat = psprintf("question %d of %s", i + 1, what);
		JsonbValue	v;

		if (q->type != jbvBinary || !JsonContainerIsObject(q->val.binary.data))
			JsonbWrongType(JsonbValueTypeName(q), "%s must be a JSON object", qwhat);
		if (JsonbObjectString(q->val.binary.data, "question", qwhat, &v) == NULL)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("%s must have a string \"question\"", qwhat));
		(void) JsonbObjectString(q->val.binary.data, "id", qwhat, &v);
		(void) JsonbObjectString(q->val.binary.data, "type", qwhat, &v);
	}
}

static Jsonb *
ArgObject(FunctionCallInfo fcinfo, int argno, const char *what, bool required)
{
	if (PG_ARGISNULL(argno))
	{
		if (required)
			ereport(ERROR,
					errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					errmsg("%s must not be null", what));
		return NULL;
	}
	return ArgOptionalObject(fcinfo, argno, what);
}

/*
 * Store the clarification of a live turn of the session (checked), under
 * the session's lock.
 */
static void
StoreClarification(text *tenant, text *session_id, pg_uuid_t *turn_id,
				   Jsonb *questions, Jsonb *inferred)
{
	Oid			argtypes[5] = {TEXTOID, TEXTOID, INT8OID, JSONBOID, JSONBOID};
	Datum		values[5];

	SPI_connect();
	/* Serialized with redaction, which deletes what a turn recorded. */
	if (!SessionLock(tenant, session_id))
		ReportTurnNotFound(turn_id, session_id);
	values[0] = PointerGetDatum(tenant);
	values[1] = PointerGetDatum(session_id);
	values[2] = Int64GetDatum(LiveTurnNo(tenant, session_id, turn_id));
	values[3] = JsonbPGetDatum(questions);
	values[4] = JsonbPGetDatum(inferred);
	SpiRunPlan(SpiKeptPlan(&store_clarification_plan, STORE_CLARIFICATION_SQL, 5, argtypes),
			   values, NULL, false, 0, SPI_OK_INSERT);
	SPI_finish();
}

PG_FUNCTION_INFO_V1(convctx_record_clarification);

/*
 * record_clarification(session_id, turn_id, questions, inferred_context)
 */
Datum
convctx_record_clarification(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(record_clarification);
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	pg_uuid_t  *turn_id = ArgTurnId(fcinfo, 1);
	Jsonb	   *questions;
	Jsonb	   *inferred = ArgObject(fcinfo, 3, "inferred_context", true);
	text	   *tenant = CurrentTenant();

	ArgNotNull(fcinfo, 2, "questions");
	questions = PG_GETARG_JSONB_P(2);
	if (!JsonbIsArray(questions))
		JsonbWrongType(JsonbRootTypeName(questions), "questions must be a JSON array");
	CheckQuestions(&questions->root, "questions");
	CheckMaxTextBytes(VARSIZE(questions) + VARSIZE(inferred) - 2 * VARHDRSZ,
					  "clarification is too long", "Its questions and inferred context have");

	StoreClarification(tenant, session_id, turn_id, questions, inferred);
	PG_RETURN_VOID();
}

/*
 * The recorded clarification of a live turn with the original question
 * and the user's answers (NULL for none), as clarification_context
 * returns it.
 */
static Jsonb *
ClarificationContext(text *tenant, text *session_id, pg_uuid_t *turn_id, Jsonb *answers)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, UUIDOID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	UUIDPGetDatum(turn_id)};
	MemoryContext caller = CurrentMemoryContext;
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	JsonbParseState *state = NULL;
	Jsonb	   *out;
	text	   *question;

	SPI_connect();
	SpiRunPlan(SpiKeptPlan(&load_plan, LOAD_SQL, 3, argtypes), values, NULL,
			   true, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ReportTurnNotFound(turn_id, session_id);
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	if (DatumGetBool(SPI_getbinval(row, desc, 2, &isnull)))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("turn has been redacted"),
				errdetail("Turn %s keeps no text and no clarification.", UuidString(turn_id)));
	(void) SPI_getbinval(row, desc, 3, &isnull);
	if (isnull)
		ereport(ERROR,
				errcode(ERRCODE_NO_DATA_FOUND),
				errmsg("no clarification was recorded for the turn"),
				errdetail("Turn %s of session \"%s\" has none.",
						  UuidString(turn_id), text_to_cstring(session_id)),
				errhint("Record one with convctx.record_clarification()."));

	MemoryContextSwitchTo(caller);
	question = DatumGetTextPP(SPI_getbinval(row, desc, 1, &isnull));
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(&state, "originalDescription");
	JsonbPushText(&state, WJB_VALUE, question);
	JsonbPushKey(&state, "questionsAsked");
	JsonbPushJsonb(&state, WJB_VALUE, DatumGetJsonbP(SPI_getbinval(row, desc, 3, &isnull)));
	JsonbPushKey(&state, "inferredContext");
	JsonbPushJsonb(&state, WJB_VALUE, DatumGetJsonbP(SPI_getbinval(row, desc, 4, &isnull)));
	JsonbPushKey(&state, "answers");
	if (answers != NULL)
		JsonbPushJsonb(&state, WJB_VALUE, answers);
	else
	{
		pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
		pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	}
	out = JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
	SPI_finish();

	return out;
}


PG_FUNCTION_INFO_V1(convctx_clarification_context);

/*
 * clarification_context(session_id, turn_id, answers) -> jsonb
 */
Datum
convctx_clarification_context(PG_FUNCTION_ARGS)
{
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	pg_uuid_t  *turn_id = ArgTurnId(fcinfo, 1);
	Jsonb	   *answers = ArgObject(fcinfo, 2, "answers", false);
	text	   *tenant = CurrentTenant();

	PG_RETURN_JSONB_P(ClarificationContext(tenant, session_id, turn_id, answers));
}

/* True when a string has something besides white space. */
static bool
NotBlank(JsonbValue *v)
{
	int			i;

	for (i = 0; i < v->val.string.len; i++)
		if (!isspace((unsigned char) v->val.string.val[i]))
			return true;
	return false;
}

static void
AppendAnswer(StringInfo buf, JsonbValue *key, JsonbValue *answer, bool *any)
{
	if (answer->type != jbvString || !NotBlank(answer))
		return;
	appendStringInfoString(buf, "\n- ");
	AppendPromptLine(buf, key->val.string.val, key->val.string.len);
	appendStringInfoString(buf, ": ");
	AppendPromptLine(buf, answer->val.string.val, answer->val.string.len);
	*any = true;
}

static void
AppendOrDefault(StringInfo buf, const char *prefix, JsonbContainer *obj, const char *key,
				const char *fallback)
{
	JsonbValue	v;

	appendStringInfoString(buf, prefix);
	if (obj != NULL && JsonbObjectString(obj, key, "inferredContext", &v) != NULL && NotBlank(&v))
		AppendPromptLine(buf, v.val.string.val, v.val.string.len);
	else
		appendStringInfoString(buf, fallback);
}

/*
 * A key of the clarification context that must be a JSON array (or, with
 * array false, an object); NULL when it is absent or null.
 */
static JsonbContainer *
ClarificationKey(Jsonb *ctx, const char *key, bool array)
{
	JsonbValue	v;

	if (getKeyJsonValueFromContainer(&ctx->root, key, strlen(key), &v) == NULL ||
		v.type == jbvNull)
		return NULL;
	if (v.type != jbvBinary ||
		!(array ? JsonContainerIsArray(v.val.binary.data) : JsonContainerIsObject(v.val.binary.data)))
		JsonbWrongType(JsonbValueTypeName(&v),
					   "key \"%s\" must be a JSON %s", key, array ? "array" : "object");
	return v.val.binary.data;
}

/* Check that every answer is a string (or null). */
static void
CheckAnswers(JsonbContainer *answers)
{
	JsonbIterator *it = JsonbIteratorInit(answers);
	JsonbValue	a;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &a, true)) != WJB_DONE)
		if (tok == WJB_VALUE && a.type != jbvString && a.type != jbvNull)
			JsonbWrongType(JsonbValueTypeName(&a), "every answer must be a string");
}

/* "## Questions I Asked" with a "- question (type)" line per question. */
static void
AppendQuestions(StringInfo buf, JsonbContainer *questions)
{
	int			n = questions ? JsonContainerSize(questions) : 0;
	int			i;

	appendStringInfoString(buf, "\n\n## Questions I Asked");
	for (i = 0; i < n; i++)
	{
		JsonbContainer *q = getIthJsonbValueFromContainer(questions, i)->val.binary.data;
		JsonbValue	text;
		JsonbValue	type;

		(void) JsonbObjectString(q, "question", "a question", &text);
		appendStringInfoString(buf, "\n- ");
		AppendPromptLine(buf, text.val.string.val, text.val.string.len);
		if (JsonbObjectString(q, "type", "a question", &type) != NULL)
		{
			appendStringInfoString(buf, " (");
			AppendPromptLine(buf, type.val.string.val, type.val.string.len);
			appendStringInfoChar(buf, ')');
		}
	}
}

/*
 * "## User's Clarifications": answers in the order the questions were
 * asked, then any others; "(User skipped clarification)" when none has
 * text.
 */
static void
AppendAnswers(StringInfo buf, JsonbContainer *questions, JsonbContainer *answers)
{
	int			n = questions ? JsonContainerSize(questions) : 0;
	idmap_hash *shown = idmap_create(CurrentMemoryContext, 16, NULL);
	bool		any = false;
	JsonbIterator *it;
	JsonbValue	k;
	JsonbValue	a;
	JsonbIteratorToken tok;
	int			i;

	appendStringInfoString(buf, "\n\n## User's Clarifications");
	if (answers != NULL)
	{
		for (i = 0; i < n; i++)
		{
			JsonbContainer *q = getIthJsonbValueFromContainer(questions, i)->val.binary.data;
			JsonbValue	id;
			bool		found;

			if (JsonbObjectString(q, "id", "a question", &id) == NULL)
				continue;
			(void) IdMapInsert(shown, id.val.string.val, id.val.string.len, &found);
			if (!found && getKeyJsonValueFromContainer(answers, id.val.string.val,
													   id.val.string.len, &a) != NULL)
				AppendAnswer(buf, &id, &a, &any);
		}
		it = JsonbIteratorInit(answers);
		while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
		{
			if (tok != WJB_KEY)
				continue;
			tok = JsonbIteratorNext(&it, &a, true);
			if (IdMapLookup(shown, k.val.string.val, k.val.string.len) == NULL)
				AppendAnswer(buf, &k, &a, &any);
		}
	}
	if (!any)
		appendStringInfoString(buf, "\n(User skipped clarification)");
}

/* The prompt of a clarification context (render_clarification). */
static text *
RenderClarification(Jsonb *ctx, text *instruction)
{
	StringInfoData buf;
	JsonbValue	v;
	JsonbContainer *questions;
	JsonbContainer *answers;
	JsonbContainer *inferred;

	if (!JB_ROOT_IS_OBJECT(ctx))
		JsonbWrongType(JsonbRootTypeName(ctx), "clarification context must be a JSON object");
	if ((questions = ClarificationKey(ctx, "questionsAsked", true)) != NULL)
		CheckQuestions(questions, "questionsAsked");
	if ((answers = ClarificationKey(ctx, "answers", false)) != NULL)
		CheckAnswers(answers);
	inferred = ClarificationKey(ctx, "inferredContext", false);

	initStringInfo(&buf);
	appendStringInfoString(&buf, "## Original Issue\n");
	if (JsonbObjectString(&ctx->root, "originalDescription", "the clarification context", &v) != NULL)
	{
		appendStringInfoString(&buf, PROMPT_BLOCK_INDENT);
		AppendPromptBlock(&buf, v.val.string.val, v.val.string.len, PROMPT_BLOCK_INDENT);
	}
	AppendQuestions(&buf, questions);
	AppendAnswers(&buf, questions, answers);
	appendStringInfoString(&buf, "\n\n## My Previous Analysis");
	AppendOrDefault(&buf, "\n- Detected location: ", inferred, "detected_location", "unknown");
	AppendOrDefault(&buf, "\n- Detected scope: ", inferred, "detected_scope", "unknown");
	AppendOrDefault(&buf, "\n- Reasoning: ", inferred, "reasoning", "none");
	if (instruction != NULL)
	{
		appendStringInfoString(&buf, "\n\n");
		appendBinaryStringInfo(&buf, VARDATA_ANY(instruction), VARSIZE_ANY_EXHDR(instruction));
	}
	return cstring_to_text_with_len(buf.data, buf.len);
}

PG_FUNCTION_INFO_V1(convctx_render_clarification);

/*
 * render_clarification(ctx, instruction) -> text
 *
 * "## Original Issue" with the original description as a block indented
 * by two spaces on every line, "## Questions I Asked" ("- question
 * (type)"), "## User's Clarifications" ("- id: answer", or "(User skipped
 * clarification)"), "## My Previous Analysis", then the instruction. The
 * context may come from the client (the stateless form), so every field
 * is distrusted: the description, written by the user, has a line of its
 * own and is therefore indented even on one line; questions, types, ids,
 * answers and the analysis are shown on one line (prompt_text.c). None
 * can start a "## " section or a "- " item of its own. The instruction is
 * the app's own text, appended as given.
 */
Datum
convctx_render_clarification(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(RenderClarification(PG_GETARG_JSONB_P(0),
										 PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1)));
}
