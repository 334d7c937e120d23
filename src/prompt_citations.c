/*-------------------------------------------------------------------------
 *
 * prompt_citations.c
 *	  Unified citation context: record_retrieval, context_history,
 *	  render_context_history, and the context decision is_followup.
 *
 * A chunk is a JSON object with at least a string "id" and a string
 * "text"; other keys (title, source, path, number, ...) are kept. Cited
 * chunks are stored in full, also when the answer only named them by id,
 * so a citation never goes stale when its turn is left behind.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/prompt_citations.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/formatting.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "convctx.h"
#include "idmap.h"
#include "prompt_text.h"

static SPIPlanPtr turn_no_plan = NULL;
static SPIPlanPtr earlier_plan = NULL;
static SPIPlanPtr store_retrieval_plan = NULL;
static SPIPlanPtr history_plan = NULL;
static SPIPlanPtr history_session_plan = NULL;
static SPIPlanPtr finalized_exists_plan = NULL;
static SPIPlanPtr phrases_plan = NULL;

#define TURN_NO_SQL \
	"SELECT turn_no, deleted_at IS NOT NULL FROM convctx.turn" \
	" WHERE " SESSION_KEY \
	"   AND turn_id OPERATOR(pg_catalog.=) $3"

#define EARLIER_SQL \
	"SELECT citations, chunks FROM convctx.turn_retrieval" \
	" WHERE " SESSION_KEY \
	"   AND turn_no OPERATOR(pg_catalog.<) $3" \
	" ORDER BY turn_no DESC"

#define STORE_RETRIEVAL_SQL \
	"INSERT INTO convctx.turn_retrieval (tenant_id, session_id, turn_no, chunks, citations)" \
	" VALUES ($1, $2, $3, $4, $5)" \
	" ON CONFLICT (tenant_id, session_id, turn_no) DO UPDATE" \
	" SET chunks = EXCLUDED.chunks, citations = EXCLUDED.citations," \
	"     recorded_at = pg_catalog.statement_timestamp()"

/* The session's newest turn number and its live answers, from its row. */
#define HISTORY_SESSION_SQL \
	"SELECT last_turn_no, live_answers FROM convctx.session" \
	" WHERE " SESSION_KEY

/*
 * The newest $3 finalized, live, current turns above turn number $4 (a
 * span of the newest turn numbers: a btree scan reads every matching entry
 * of a leaf page, and a generic plan may sort the range), with what was
 * retrieved for them.
 */
#define HISTORY_SQL \
	"SELECT t.turn_no, r.chunks, r.citations" \
	"  FROM (SELECT turn_no FROM convctx.turn" \
	"         WHERE " SESSION_KEY \
	"           AND finalized_at IS NOT NULL AND deleted_at IS NULL AND replaced_by_turn_id IS NULL" \
	"           AND turn_no OPERATOR(pg_catalog.>) $4" \
	"         ORDER BY turn_no DESC LIMIT $3) t" \
	"  LEFT JOIN convctx.turn_retrieval r" \
	"         ON " SESSION_KEY_AT("r") \
	"        AND r.turn_no OPERATOR(pg_catalog.=) t.turn_no" \
	" ORDER BY t.turn_no DESC"

/*
 * Whether the session has a finalized, live, current-version turn: its
 * row counts them (live_answers), so a session whose oldest turns are
 * tombstones is not walked through.
 */
#define FINALIZED_EXISTS_SQL \
	"SELECT 1 FROM convctx.session" \
	" WHERE " SESSION_KEY \
	"   AND live_answers OPERATOR(pg_catalog.>) 0"

/* The tenant's and the shared phrases, then the built-in ones (a view). */
#define PHRASES_SQL \
	"SELECT kind, phrase FROM convctx.followup_phrase" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) ANY (ARRAY['', $1])" \
	" UNION ALL SELECT kind, phrase FROM convctx.builtin_followup_phrase"

/*
 * Check that a JSON value is a chunk object and return its container;
 * what names it in errors ("chunk 3", "current chunk 1", ...).
 */
static JsonbContainer *
CheckChunk(JsonbValue *v, const char *what)
{
	JsonbValue	id;
	JsonbValue	text;

	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must be a JSON object", what),
				errdetail("Got a JSON %s.", JsonbValueTypeName(v)));
	if (JsonbObjectString(v->val.binary.data, "id", what, &id) == NULL || id.val.string.len == 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must have a non-empty string \"id\"", what));
	if (JsonbObjectString(v->val.binary.data, "text", what, &text) == NULL)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must have a string \"text\"", what));
	return v->val.binary.data;
}

static void
ChunkId(JsonbContainer *chunk, JsonbValue *id)
{
	if (getKeyJsonValueFromContainer(chunk, "id", 2, id) == NULL || id->type != jbvString)
		elog(ERROR, "chunk without an id");
}

/* Check that an argument is an array of chunk objects. */
static void
CheckChunkArray(Jsonb *arr, const char *what)
{
	int			n;
	int			i;

	if (!JsonbIsArray(arr))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must be a JSON array of chunk objects", what),
				errdetail("Got a JSON %s.", JsonbRootTypeName(arr)));
	n = JB_ROOT_COUNT(arr);
	for (i = 0; i < n; i++)
		(void) CheckChunk(getIthJsonbValueFromContainer(&arr->root, i),
						  psprintf("element %d of %s", i + 1, what));
}

/* Add the chunks of a stored array to map, the first holder of an id winning. */
static void
MapChunks(idmap_hash *map, JsonbContainer *arr)
{
	int			n = JsonContainerSize(arr);
	int			i;

	for (i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(arr, i);
		JsonbValue	id;
		IdEntry    *e;
		bool		found;

		if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
			continue;
		if (getKeyJsonValueFromContainer(v->val.binary.data, "id", 2, &id) == NULL ||
			id.type != jbvString)
			continue;
		e = IdMapInsert(map, id.val.string.val, id.val.string.len, &found);
		if (!found)
			e->value = v;
	}
}

/*
 * The turn_no of a live turn of the session; P0002 when it does not exist,
 * 55000 when it is a tombstone. SPI must be connected.
 */
int64
PromptTurnNo(text *tenant, text *session_id, pg_uuid_t *turn_id)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, UUIDOID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	UUIDPGetDatum(turn_id)};
	bool		isnull;

	SpiRunPlan(SpiKeptPlan(&turn_no_plan, TURN_NO_SQL, 3, argtypes),
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

PG_FUNCTION_INFO_V1(convctx_record_retrieval);

/*
 * record_retrieval(session_id, turn_id, chunks, citations) -> void
 */
Datum
convctx_record_retrieval(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(record_retrieval);
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	pg_uuid_t  *turn_id = ArgTurnId(fcinfo, 1);
	Jsonb	   *chunks;
	Jsonb	   *citations = NULL;
	text	   *tenant = CurrentTenant();
	idmap_hash *map;
	int			ncit = 0;
	int			i;
	bool		unresolved = false;
	int64		turn_no;
	JsonbParseState *state = NULL;
	Jsonb	   *resolved;
	MemoryContext caller = CurrentMemoryContext;

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("chunks must not be null"),
				errhint("Pass '[]' when nothing was retrieved."));
	chunks = PG_GETARG_JSONB_P(2);
	CheckChunkArray(chunks, "chunks");
	if (VARSIZE(chunks) - VARHDRSZ > (Size) convctx_max_text_bytes)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("chunks are too large"),
				errdetail("They have %zu bytes; convctx.max_text_bytes allows %d.",
						  (Size) (VARSIZE(chunks) - VARHDRSZ), convctx_max_text_bytes));

	if (!PG_ARGISNULL(3))
	{
		citations = PG_GETARG_JSONB_P(3);
		if (!JsonbIsArray(citations))
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("citations must be a JSON array"),
					errdetail("Got a JSON %s.", JsonbRootTypeName(citations)));
		ncit = JB_ROOT_COUNT(citations);
		for (i = 0; i < ncit; i++)
		{
			JsonbValue *v = getIthJsonbValueFromContainer(&citations->root, i);
			char	   *what = psprintf("citation %d", i + 1);
			JsonbValue	text;

			if (v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data) &&
				getKeyJsonValueFromContainer(v->val.binary.data, "text", 4, &text) == NULL)
			{
				JsonbValue	id;

				/* a reference: {"id": ...} and nothing else */
				if (JsonbObjectString(v->val.binary.data, "id", what, &id) == NULL ||
					id.val.string.len == 0 || JsonContainerSize(v->val.binary.data) != 1)
					ereport(ERROR,
							errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("%s must be a chunk object or {\"id\": ...}", what));
				unresolved = true;
			}
			else
				(void) CheckChunk(v, what);
		}
	}

	/* Ids of this turn's chunks, then (when needed) of earlier turns. */
	map = idmap_create(CurrentMemoryContext, Max(JB_ROOT_COUNT(chunks) + ncit, 8), NULL);
	MapChunks(map, &chunks->root);

	SPI_connect();
	/* Serialized with redaction, which deletes what a turn recorded. */
	(void) SessionLock(tenant, session_id);
	turn_no = PromptTurnNo(tenant, session_id, turn_id);
	if (unresolved)
	{
		Oid			argtypes[3] = {TEXTOID, TEXTOID, INT8OID};
		Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
		Int64GetDatum(turn_no)};
		uint64		r;

		SpiRunPlan(SpiKeptPlan(&earlier_plan, EARLIER_SQL, 3, argtypes),
				   values, NULL, false, 0, SPI_OK_SELECT);
		for (r = 0; r < SPI_processed; r++)
		{
			bool		isnull;
			Jsonb	   *cit = DatumGetJsonbP(SPI_getbinval(SPI_tuptable->vals[r],
														   SPI_tuptable->tupdesc, 1, &isnull));
			Jsonb	   *chk = DatumGetJsonbP(SPI_getbinval(SPI_tuptable->vals[r],
														   SPI_tuptable->tupdesc, 2, &isnull));

			MapChunks(map, &cit->root);
			MapChunks(map, &chk->root);
		}
	}

	/* The stored citations: every element a full chunk. */
	MemoryContextSwitchTo(caller);
	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (i = 0; i < ncit; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(&citations->root, i);
		JsonbValue	text;

		if (getKeyJsonValueFromContainer(v->val.binary.data, "text", 4, &text) == NULL)
		{
			JsonbValue	id;
			IdEntry    *e;

			ChunkId(v->val.binary.data, &id);
			e = IdMapLookup(map, id.val.string.val, id.val.string.len);
			if (e == NULL)
				ereport(ERROR,
						errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("citation %d names a chunk no turn of this session retrieved", i + 1),
						errdetail("Chunk id \"%s\".", pnstrdup(id.val.string.val, id.val.string.len)));
			v = (JsonbValue *) e->value;
		}
		pushJsonbValue(&state, WJB_ELEM, v);
	}
	resolved = JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_ARRAY, NULL));
	/* Resolved: a few references to large earlier chunks can make it grow. */
	if (VARSIZE(resolved) - VARHDRSZ > (Size) convctx_max_text_bytes)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("citations are too large"),
				errdetail("With every reference resolved to its chunk they have %zu bytes; convctx.max_text_bytes allows %d.",
						  (Size) (VARSIZE(resolved) - VARHDRSZ), convctx_max_text_bytes));

	{
		Oid			argtypes[5] = {TEXTOID, TEXTOID, INT8OID, JSONBOID, JSONBOID};
		Datum		values[5] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
			Int64GetDatum(turn_no), JsonbPGetDatum(chunks), JsonbPGetDatum(resolved)};

		SpiRunPlan(SpiKeptPlan(&store_retrieval_plan, STORE_RETRIEVAL_SQL, 5, argtypes),
				   values, NULL, false, 0, SPI_OK_INSERT);
	}
	SPI_finish();

	PG_RETURN_VOID();
}

/* One entry of the unified context, before it is numbered. */
typedef struct HistoryEntry
{
	int			section;		/* 0 immediate, 1 history, 2 current */
	int64		turns_ago;		/* 0 for current */
	JsonbValue *chunk;
	bool		keep;
} HistoryEntry;

static const char *const section_names[3] = {"immediate", "history", "current"};

PG_FUNCTION_INFO_V1(convctx_context_history);

/*
 * context_history(session_id, turns, current_chunks) -> jsonb
 */
Datum
convctx_context_history(PG_FUNCTION_ARGS)
{
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	int32		turns = ArgLimit(fcinfo, 1, "turns");
	Jsonb	   *current = NULL;
	text	   *tenant = CurrentTenant();
	MemoryContext caller = CurrentMemoryContext;
	HistoryEntry *entries;
	int			nentries = 0;
	int64		cap;
	idmap_hash *seen;
	int			priority;
	int			i;
	int			k;
	JsonbParseState *state = NULL;
	Jsonb	   *out;
	uint64		nrows;
	SPITupleTable *rows;

	if (!PG_ARGISNULL(2))
	{
		current = PG_GETARG_JSONB_P(2);
		CheckChunkArray(current, "current_chunks");
	}

	SPI_connect();
	{
		/*
		 * No more turns are asked for than the session has live answers
		 * (its row, read in the same snapshot, counts them), so the read
		 * ends at the oldest of them and never walks the tombstones below
		 * (a session that goes on after redact_session or erase_identity).
		 * The newest that many turn numbers + 4 (the current turn is open)
		 * hold them unless more open or redacted turns sit among them; then
		 * spans four times wider.
		 */
		Oid			argtypes[4] = {TEXTOID, TEXTOID, INT8OID, INT8OID};
		Datum		values[4] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
		(Datum) 0, (Datum) 0};
		int64		want = turns;
		int64		last = 0;	/* without a row, the whole session */
		int64		span;
		int64		lower;
		SPIPlanPtr	plan;

		SpiRunPlan(SpiKeptPlan(&history_session_plan, HISTORY_SESSION_SQL, 2, argtypes),
				   values, NULL, true, 0, SPI_OK_SELECT);
		if (SPI_processed > 0)
		{
			bool		isnull;
			Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

			last = isnull ? 0 : DatumGetInt64(d);
			d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
			if (!isnull)
				want = Min(want, DatumGetInt64(d));
		}

		rows = NULL;
		nrows = 0;
		plan = SpiKeptPlan(&history_plan, HISTORY_SQL, 4, argtypes);
		values[2] = Int64GetDatum(want);
		span = want + 4;
		while (want > 0)
		{
			lower = (last - span > 0) ? last - span : 0;
			values[3] = Int64GetDatum(lower);
			SpiRunPlan(plan, values, NULL, true, 0, SPI_OK_SELECT);
			if (rows != NULL)
				SPI_freetuptable(rows);
			rows = SPI_tuptable;
			nrows = SPI_processed;
			if (nrows >= (uint64) want || lower == 0)
				break;
			span = (span > PG_INT64_MAX / 4) ? PG_INT64_MAX : span * 4;
		}
	}
	MemoryContextSwitchTo(caller);

	/*
	 * Collect the candidates in display order. Each stored array holds up
	 * to JB_CMASK elements and turns is not bounded, so the count is summed
	 * in 64 bits and refused when the entries could not be allocated
	 * (which also keeps it within int).
	 */
	cap = current ? JB_ROOT_COUNT(current) : 0;
	for (i = 0; i < (int) nrows; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(rows->vals[i], rows->tupdesc, i == 0 ? 2 : 3, &isnull);

		if (!isnull)
			cap += JB_ROOT_COUNT(DatumGetJsonbP(d));
		if (cap > (int64) (MaxAllocSize / sizeof(HistoryEntry)))
			ereport(ERROR,
					errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					errmsg("context history has too many chunks"),
					errdetail("The %d turns asked for hold more than %d chunks.",
							  turns, (int) (MaxAllocSize / sizeof(HistoryEntry))),
					errhint("Ask for fewer turns."));
	}
	entries = palloc(sizeof(HistoryEntry) * Max(cap, 1));
	for (i = 0; i < (int) nrows; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(rows->vals[i], rows->tupdesc, i == 0 ? 2 : 3, &isnull);
		Jsonb	   *arr;
		int			n;

		if (isnull)
			continue;
		arr = DatumGetJsonbP(d);
		n = JB_ROOT_COUNT(arr);
		for (k = 0; k < n; k++)
		{
			entries[nentries].section = i == 0 ? 0 : 1;
			entries[nentries].turns_ago = i + 1;
			entries[nentries].chunk = getIthJsonbValueFromContainer(&arr->root, k);
			entries[nentries].keep = false;
			nentries++;
		}
	}
	if (current)
		for (k = 0; k < (int) JB_ROOT_COUNT(current); k++)
		{
			entries[nentries].section = 2;
			entries[nentries].turns_ago = 0;
			entries[nentries].chunk = getIthJsonbValueFromContainer(&current->root, k);
			entries[nentries].keep = false;
			nentries++;
		}

	/*
	 * Each id is kept once, in its most recent section: current, then
	 * immediate, then history from the newest turn back.
	 */
	seen = idmap_create(CurrentMemoryContext, Max(nentries, 8), NULL);
	for (priority = 0; priority < 3; priority++)
	{
		int			section = priority == 0 ? 2 : priority == 1 ? 0 : 1;

		for (i = 0; i < nentries; i++)
		{
			JsonbValue	id;
			bool		found;

			if (entries[i].section != section)
				continue;
			if (entries[i].chunk->type != jbvBinary ||
				getKeyJsonValueFromContainer(entries[i].chunk->val.binary.data, "id", 2, &id) == NULL ||
				id.type != jbvString)
				continue;		/* not a chunk: stored data was changed by hand */
			(void) IdMapInsert(seen, id.val.string.val, id.val.string.len, &found);
			entries[i].keep = !found;
		}
	}

	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	k = 0;
	for (i = 0; i < nentries; i++)
	{
		if (!entries[i].keep)
			continue;
		pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
		JsonbPushKey(&state, "index");
		JsonbPushInt(&state, WJB_VALUE, ++k);
		JsonbPushKey(&state, "section");
		JsonbPushString(&state, WJB_VALUE, section_names[entries[i].section],
						strlen(section_names[entries[i].section]));
		JsonbPushKey(&state, "turns_ago");
		if (entries[i].section == 2)
			JsonbPushNull(&state, WJB_VALUE);
		else
			JsonbPushInt(&state, WJB_VALUE, entries[i].turns_ago);
		JsonbPushKey(&state, "chunk");
		pushJsonbValue(&state, WJB_VALUE, entries[i].chunk);
		pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	}
	out = JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_ARRAY, NULL));

	SPI_finish();
	PG_RETURN_JSONB_P(out);
}

/* A header label with {n} replaced by turns_ago, on one line. */
static void
AppendLabel(StringInfo buf, const char *label, int len, const char *turns_ago)
{
	StringInfoData raw;
	int			i;

	initStringInfo(&raw);
	for (i = 0; i < len; i++)
	{
		if (i + 2 < len && label[i] == '{' && label[i + 1] == 'n' && label[i + 2] == '}')
		{
			appendStringInfoString(&raw, turns_ago);
			i += 2;
		}
		else
			appendStringInfoChar(&raw, label[i]);
	}
	AppendPromptLine(buf, raw.data, raw.len);
}

static char *
NumberText(JsonbValue *v)
{
	return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
}

PG_FUNCTION_INFO_V1(convctx_render_context_history);

/*
 * render_context_history(history, labels) -> text
 *
 * Per section a header line (a new one whenever the section or, in
 * history, the turn changes; blank line between sections), then per chunk
 * "[k] source - title" (the id when it has neither), "Title: title" and
 * "Text: text". Chunks come from retrieved documents, so a source, title,
 * id or label is shown on one line, and the text is a block whose
 * continuation lines are indented (prompt_text.c): no chunk can start a
 * header, a "[k]" line or a field line of its own.
 */
Datum
convctx_render_context_history(PG_FUNCTION_ARGS)
{
	static const char *const defaults[3] = {
		"=== IMMEDIATE PREVIOUS CONTEXT (from the last answer) ===",
		"=== HISTORICAL CONTEXT ({n} turns ago, cited only) ===",
		"=== CURRENT CONTEXT (new for this query) ==="
	};
	Jsonb	   *history;
	JsonbValue	labels[3];
	StringInfoData buf;
	char	   *last_header = NULL;
	int			n;
	int			i;
	int			s;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	history = PG_GETARG_JSONB_P(0);
	if (!JsonbIsArray(history))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("history must be a JSON array"),
				errdetail("Got a JSON %s.", JsonbRootTypeName(history)));

	for (s = 0; s < 3; s++)
	{
		labels[s].type = jbvString;
		labels[s].val.string.val = (char *) defaults[s];
		labels[s].val.string.len = strlen(defaults[s]);
	}
	if (!PG_ARGISNULL(1))
	{
		Jsonb	   *l = PG_GETARG_JSONB_P(1);
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;

		if (!JB_ROOT_IS_OBJECT(l))
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("labels must be a JSON object"),
					errdetail("Got a JSON %s.", JsonbRootTypeName(l)));
		it = JsonbIteratorInit(&l->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			bool		known = false;

			if (tok != WJB_KEY)
				continue;
			for (s = 0; s < 3; s++)
				if (v.val.string.len == (int) strlen(section_names[s]) &&
					memcmp(v.val.string.val, section_names[s], v.val.string.len) == 0)
					known = true;
			if (!known)
				ereport(ERROR,
						errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("unknown label \"%s\"", pnstrdup(v.val.string.val, v.val.string.len)),
						errhint("Labels are \"immediate\", \"history\" and \"current\"."));
		}
		for (s = 0; s < 3; s++)
		{
			JsonbValue	v2;

			if (JsonbObjectString(&l->root, section_names[s], "labels", &v2) != NULL)
				labels[s] = v2;
		}
	}

	initStringInfo(&buf);
	n = JB_ROOT_COUNT(history);
	for (i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(&history->root, i);
		char	   *what = psprintf("entry %d of the history", i + 1);
		JsonbValue	v;
		JsonbValue	title;
		JsonbValue	source;
		JsonbValue	text;
		JsonbValue	id;
		JsonbContainer *chunk;
		int			section = -1;
		char	   *index;
		char	   *turns_ago = pstrdup("");
		StringInfoData header;

		if (e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("%s must be a JSON object", what),
					errdetail("Got a JSON %s.", JsonbValueTypeName(e)));
		if (JsonbObjectString(e->val.binary.data, "section", what, &v) != NULL)
			for (s = 0; s < 3; s++)
				if (v.val.string.len == (int) strlen(section_names[s]) &&
					memcmp(v.val.string.val, section_names[s], v.val.string.len) == 0)
					section = s;
		if (section < 0)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("%s must have a \"section\" of \"immediate\", \"history\" or \"current\"", what));

		if (getKeyJsonValueFromContainer(e->val.binary.data, "index", 5, &v) != NULL &&
			v.type != jbvNull)
		{
			if (v.type != jbvNumeric)
				ereport(ERROR,
						errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("key \"index\" of %s must be a number", what),
						errdetail("Got a JSON %s.", JsonbValueTypeName(&v)));
			index = NumberText(&v);
		}
		else
			index = psprintf("%d", i + 1);
		if (getKeyJsonValueFromContainer(e->val.binary.data, "turns_ago", 9, &v) != NULL &&
			v.type != jbvNull)
		{
			if (v.type != jbvNumeric)
				ereport(ERROR,
						errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("key \"turns_ago\" of %s must be a number", what),
						errdetail("Got a JSON %s.", JsonbValueTypeName(&v)));
			turns_ago = NumberText(&v);
		}
		if (getKeyJsonValueFromContainer(e->val.binary.data, "chunk", 5, &v) == NULL)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("%s must have a \"chunk\"", what));
		chunk = CheckChunk(&v, psprintf("the chunk of %s", what));

		/* A new header whenever the section (or the turn of history) changes. */
		initStringInfo(&header);
		AppendLabel(&header, labels[section].val.string.val, labels[section].val.string.len, turns_ago);
		if (last_header == NULL || strcmp(last_header, header.data) != 0)
		{
			if (last_header != NULL)
				appendStringInfoString(&buf, "\n\n");
			appendStringInfoString(&buf, header.data);
			last_header = header.data;
		}

		(void) JsonbObjectString(chunk, "text", "a chunk", &text);
		ChunkId(chunk, &id);
		appendStringInfo(&buf, "\n[%s] ", index);
		if (JsonbObjectString(chunk, "source", "a chunk", &source) == NULL)
			source.type = jbvNull;
		if (JsonbObjectString(chunk, "title", "a chunk", &title) == NULL)
			title.type = jbvNull;
		if (source.type == jbvString)
			AppendPromptLine(&buf, source.val.string.val, source.val.string.len);
		if (source.type == jbvString && title.type == jbvString)
			appendStringInfoString(&buf, " - ");
		if (title.type == jbvString)
			AppendPromptLine(&buf, title.val.string.val, title.val.string.len);
		if (source.type != jbvString && title.type != jbvString)
			AppendPromptLine(&buf, id.val.string.val, id.val.string.len);
		if (title.type == jbvString)
		{
			appendStringInfoString(&buf, "\nTitle: ");
			AppendPromptLine(&buf, title.val.string.val, title.val.string.len);
		}
		appendStringInfoString(&buf, "\nText: ");
		AppendPromptBlock(&buf, text.val.string.val, text.val.string.len, PROMPT_BLOCK_INDENT);
	}

	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}

/* Latin-1 Supplement and Latin Extended-A letters without their marks. */
static const char latin_fold[192 + 1] =
	"aaaaaaaceeeeiiiidnooooo ouuuuytsaaaaaaaceeeeiiiidnooooo ouuuuyty"	/* U+00C0 */
	"aaaaaaccccccccddddeeeeeeeeeegggggggghhhhiiiiiiiiiiiijjkkklllllll"	/* U+0100 */
	"lllnnnnnnnnnoooooooorrrrrrssssssssttttttuuuuuuuuuuuuwwyyyzzzzzzs";	/* U+0140 */	/* U+0140 */

/*
 * Fold text for matching: lower case, accents removed from Latin letters,
 * every run of other punctuation and spaces one space, and a space at each
 * end, so that " phrase " matches whole words only.
 */
static char *
FoldForMatch(const char *s, int len)
{
	char	   *lower = str_tolower(s, len, DEFAULT_COLLATION_OID);
	int			n = strlen(lower);
	StringInfoData buf;
	bool		utf8 = GetDatabaseEncoding() == PG_UTF8;
	int			i = 0;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, ' ');
	while (i < n)
	{
		unsigned char c = (unsigned char) lower[i];
		char		out = 0;
		int			clen = 1;

		if (c < 0x80)
			out = (isalnum(c) ? (char) pg_ascii_tolower(c) : ' ');
		else if (utf8)
		{
			pg_wchar	cp;

			clen = pg_utf_mblen((const unsigned char *) lower + i);
			if (i + clen > n)
				clen = n - i;
			cp = utf8_to_unicode((const unsigned char *) lower + i);
			if (cp < 0xC0)
				out = ' ';
			else if (cp < 0x180)
				out = latin_fold[cp - 0xC0];
		}
		if (out == 0)
			appendBinaryStringInfo(&buf, lower + i, clen);
		else if (out != ' ' || buf.data[buf.len - 1] != ' ')
			appendStringInfoChar(&buf, out);
		i += clen;
	}
	if (buf.data[buf.len - 1] != ' ')
		appendStringInfoChar(&buf, ' ');
	return buf.data;
}

PG_FUNCTION_INFO_V1(convctx_is_followup);

/*
 * is_followup(query, session_id) -> boolean
 */
Datum
convctx_is_followup(PG_FUNCTION_ARGS)
{
	text	   *query;
	text	   *session_id = ArgOptionalId(fcinfo, 1, "session_id");
	text	   *tenant = CurrentTenant();
	char	   *folded;
	int			words = 0;
	bool		fresh = false;
	bool		clarification = false;
	char	   *p;
	uint64		r;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("query must not be null"));
	query = PG_GETARG_TEXT_PP(0);
	CheckTextSize(query, "query");
	folded = FoldForMatch(VARDATA_ANY(query), VARSIZE_ANY_EXHDR(query));
	for (p = folded; *p; p++)
		if (*p != ' ' && p[-1] == ' ')
			words++;

	SPI_connect();
	if (session_id != NULL)
	{
		Oid			argtypes[2] = {TEXTOID, TEXTOID};
		Datum		values[2] = {PointerGetDatum(tenant), PointerGetDatum(session_id)};

		SpiRunPlan(SpiKeptPlan(&finalized_exists_plan, FINALIZED_EXISTS_SQL, 2, argtypes),
				   values, NULL, true, 1, SPI_OK_SELECT);
		if (SPI_processed == 0)
		{
			SPI_finish();
			PG_RETURN_BOOL(false);	/* nothing to follow up on */
		}
	}
	{
		Oid			argtypes[1] = {TEXTOID};
		Datum		values[1] = {PointerGetDatum(tenant)};

		SpiRunPlan(SpiKeptPlan(&phrases_plan, PHRASES_SQL, 1, argtypes),
				   values, NULL, true, 0, SPI_OK_SELECT);
	}
	for (r = 0; r < SPI_processed && !fresh; r++)
	{
		char	   *kind = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);
		char	   *phrase = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2);
		char	   *fp = FoldForMatch(phrase, strlen(phrase));

		if (strcmp(fp, " ") == 0 || strstr(folded, fp) == NULL)
			continue;
		if (strcmp(kind, "fresh_keyword") == 0)
			fresh = true;
		else
			clarification = true;
	}
	SPI_finish();

	PG_RETURN_BOOL(!fresh && (words < 6 || clarification));
}
