/*-------------------------------------------------------------------------
 *
 * import_write.c
 *	  Writing a group of records whose session is new: its turns' chains
 *	  checked, then its session, turns, links and context written
 *	  (FinishGroup).
 *
 * A group's turns are written with one statement per group (arrays of
 * their columns, TurnColumn), after their versions are checked to form
 * chains (CheckTurnChains): one current version per turn number, each
 * replaced version pointing to the next.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/transfer/import_write.c
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

#include "core/common.h"
#include "core/spi_plans.h"
#include "transfer/import.h"
#include "turns/turns.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr retrieval_insert_plan, clarification_insert_plan, turns_insert_plan,
			context_insert_plan, context_same_plan;

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


/* Is the stored context the file's ($3 context, $4 updated_at)? */
#define CONTEXT_SAME_SQL \
	"SELECT context_json OPERATOR(pg_catalog.=) $3 AND updated_at OPERATOR(pg_catalog.=) $4" \
	"  FROM convctx.conversation_context" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND conversation_id OPERATOR(pg_catalog.=) $2"


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

/* A context that exists already is left alone: NULL row. */
#define CONTEXT_INSERT_SQL \
	"INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json, user_id," \
	" created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)" \
	" ON CONFLICT (tenant_id, conversation_id) DO NOTHING" \
	" RETURNING 1"


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
int
TurnRowById(const void *a, const void *b)
{
	const TurnRow *x = *(const TurnRow *const *) a;
	const TurnRow *y = *(const TurnRow *const *) b;

	return memcmp(x->turn_id->data, y->turn_id->data, UUID_LEN);
}

/* Turn rows (not pointers) in turn_no order. */
int
TurnRowByNumber(const void *a, const void *b)
{
	const TurnRow *x = (const TurnRow *) a;
	const TurnRow *y = (const TurnRow *) b;

	return x->turn_no < y->turn_no ? -1 : x->turn_no > y->turn_no;
}

/* The current version of the group's turn turn_no, or NULL. */
TurnRow *
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
void
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
			/* redact_turn makes a tombstone of every version */
			if (next->tombstone != t->tombstone)
				ReportGroup(rec, t->tombstone ? next->recno : t->recno, REC_TURN,
							psprintf("request \"%s\" of session \"%s\" is redacted in one version and not in another",
									 request, g->session_name),
							"Redacting a turn makes a tombstone of every version of it.");
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
	Datum name(TurnRow *t, bool *isnull) { *isnull = (null_if); return (*isnull) ? (Datum) 0 : (expr); }
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
void
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
void
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
void
WriteGroupContext(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	if (g->context_recno == 0)
		return;
	rec->recno = g->context_recno;
	rec->type = REC_CONTEXT;
	WriteContext(opts, g->session_id, g->session_name, g->context, g->context_user,
				 g->context_created_at, g->context_updated_at, counts);
}

/* Insert the retrieval or clarification d of the session key[0..1]. */
void
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
