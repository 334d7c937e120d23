/*-------------------------------------------------------------------------
 *
 * prompt_citations.c
 *	  Unified citation context: record_retrieval, context_history and
 *	  render_context_history.
 *
 * A chunk is a JSON object with at least a string "id" and a string
 * "text"; other keys (title, source, path, number, ...) are kept. Cited
 * chunks are stored in full, also when the answer only named them by id,
 * so a citation never goes stale when its turn is left behind.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/prompt/prompt_citations.c
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

#include "core/common.h"
#include "core/args.h"
#include "core/idmap.h"
#include "core/jsonb_util.h"
#include "core/spi_plans.h"
#include "core/turn_reader.h"
#include "core/writable.h"
#include "prompt/prompt_citations.h"
#include "core/prompt_text.h"
#include "turns/session_row.h"
#include "core/tenancy.h"
#include "turns/turns.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr earlier_plan, store_retrieval_plan, history_plan,
			history_session_plan;

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
	"     recorded_at = EXCLUDED.recorded_at"

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
 * Check that a JSON value is a chunk object and return its container;
 * what names it in errors ("chunk 3", "current chunk 1", ...).
 */
static JsonbContainer *
CheckChunk(JsonbValue *v, const char *what)
{
	JsonbValue	id;
	JsonbValue	text;

	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		JsonbWrongType(JsonbValueTypeName(v), "%s must be a JSON object", what);
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
	if (JSONB_KEY(chunk, "id", id) == NULL || id->type != jbvString)
		elog(ERROR, "chunk without an id");
}

/* Check that an argument is an array of chunk objects (also import.c). */
void
CheckChunkArray(Jsonb *arr, const char *what)
{
	int			n;
	int			i;

	if (!JsonbIsArray(arr))
		JsonbWrongType(JsonbRootTypeName(arr), "%s must be a JSON array of chunk objects", what);
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
		if (JSONB_KEY(v->val.binary.data, "id", &id) == NULL ||
			id.type != jbvString)
			continue;
		e = IdMapInsert(map, id.val.string.val, id.val.string.len, &found);
		if (!found)
			e->value = v;
	}
}

/*
 * Check what record_retrieval was given as citations (NULL for none):
 * each element a chunk or a reference {"id": ...}. Returns whether any
 * element is a reference, to be resolved against earlier turns.
 */
static bool
CheckCitations(Jsonb *citations)
{
	bool		unresolved = false;
	int			n;
	int			i;

	if (citations == NULL)
		return false;
	if (!JsonbIsArray(citations))
		JsonbWrongType(JsonbRootTypeName(citations), "citations must be a JSON array");
	n = JB_ROOT_COUNT(citations);
	for (i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(&citations->root, i);
		char	   *what = psprintf("citation %d", i + 1);
		JsonbValue	text;

		if (v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data) &&
			JSONB_KEY(v->val.binary.data, "text", &text) == NULL)
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
	return unresolved;
}

/*
 * Add to map the chunks and citations that the session's turns before
 * turn_no recorded, the newest turn first. SPI must be connected.
 */
static void
MapEarlierChunks(idmap_hash *map, text *tenant, text *session_id, int64 turn_no)
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

/*
 * The citations as stored: every reference replaced by the chunk map
 * holds for its id (22023 when none does); [] for NULL.
 */
static Jsonb *
ResolveCitations(idmap_hash *map, Jsonb *citations)
{
	JsonbParseState *state = NULL;
	int			n = citations ? JB_ROOT_COUNT(citations) : 0;
	int			i;
	Jsonb	   *resolved;

	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(&citations->root, i);
		JsonbValue	text;

		if (JSONB_KEY(v->val.binary.data, "text", &text) == NULL)
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
	CheckMaxTextBytes(VARSIZE(resolved) - VARHDRSZ, "citations are too large",
					  "With every reference resolved to its chunk they have");
	return resolved;
}

/*
 * Store what a turn retrieved and cited, citations resolved to chunks,
 * under the session row's lock (redaction deletes what a turn recorded).
 */
static void
RecordRetrieval(text *tenant, text *session_id, pg_uuid_t *turn_id,
				Jsonb *chunks, Jsonb *citations)
{
	MemoryContext caller = CurrentMemoryContext;
	int			ncit = citations ? JB_ROOT_COUNT(citations) : 0;
	idmap_hash *map;
	bool		unresolved;
	int64		turn_no;
	Jsonb	   *resolved;

	CheckChunkArray(chunks, "chunks");
	CheckMaxTextBytes(VARSIZE(chunks) - VARHDRSZ, "chunks are too large", "They have");
	unresolved = CheckCitations(citations);

	/* Ids of this turn's chunks, then (when needed) of earlier turns. */
	map = idmap_create(CurrentMemoryContext, Max(JB_ROOT_COUNT(chunks) + ncit, 8), NULL);
	MapChunks(map, &chunks->root);

	SPI_connect();
	if (!SessionLock(tenant, session_id))
		ReportTurnNotFound(turn_id, session_id);
	turn_no = LiveTurnNo(tenant, session_id, turn_id);
	if (unresolved)
		MapEarlierChunks(map, tenant, session_id, turn_no);
	MemoryContextSwitchTo(caller);
	resolved = ResolveCitations(map, citations);
	{
		Oid			argtypes[5] = {TEXTOID, TEXTOID, INT8OID, JSONBOID, JSONBOID};
		Datum		values[5] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
			Int64GetDatum(turn_no), JsonbPGetDatum(chunks), JsonbPGetDatum(resolved)};

		SpiRunPlan(SpiKeptPlan(&store_retrieval_plan, STORE_RETRIEVAL_SQL, 5, argtypes),
				   values, NULL, false, 0, SPI_OK_INSERT);
	}
	SPI_finish();
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
	text	   *tenant = CurrentTenant();

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("chunks must not be null"),
				errhint("Pass '[]' when nothing was retrieved."));
	RecordRetrieval(tenant, session_id, turn_id, PG_GETARG_JSONB_P(2),
					PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3));
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

/*
 * The session's newest finalized, live, current turns (at most turns of
 * them) with what was retrieved for them, newest first. No more turns are
 * asked for than the session has live answers (its row, read in the same
 * snapshot, counts them), so the read ends at the oldest of them and never
 * walks the tombstones below (a session that goes on after redact_session
 * or erase_identity). The newest that many turn numbers + 4 (the current
 * turn is open) hold them unless more open or redacted turns sit among
 * them. SPI must be connected.
 */
static SPITupleTable *
ReadHistory(text *tenant, text *session_id, int32 turns, uint64 *nrows)
{
	Oid			argtypes[4] = {TEXTOID, TEXTOID, INT8OID, INT8OID};
	Datum		values[4] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	(Datum) 0, (Datum) 0};
	int64		want = turns;
	int64		last = 0;		/* without a row, the whole session */

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
	return SpiReadNewestTurns(SpiKeptPlan(&history_plan, HISTORY_SQL, 4, argtypes),
							  values, want, last, want + 4, nrows);
}

/* What row i of the history holds: chunks for the newest, else citations. */
static Jsonb *
HistoryRowArray(SPITupleTable *rows, uint64 i)
{
	bool		isnull;
	Datum		d = SPI_getbinval(rows->vals[i], rows->tupdesc, i == 0 ? 2 : 3, &isnull);

	return isnull ? NULL : DatumGetJsonbP(d);
}

static void
AddEntry(HistoryEntry *entries, int *nentries, int section, int64 turns_ago,
		 JsonbValue *chunk)
{
	entries[*nentries].section = section;
	entries[*nentries].turns_ago = turns_ago;
	entries[*nentries].chunk = chunk;
	entries[*nentries].keep = false;
	(*nentries)++;
}

/*
 * The candidates in display order: the newest turn's chunks (immediate),
 * older turns' citations (history), then the current chunks. Each stored
 * array holds up to JB_CMASK elements and turns is not bounded, so the
 * count is summed in 64 bits and refused when the entries could not be
 * allocated (which also keeps it within int).
 */
static HistoryEntry *
CollectHistory(SPITupleTable *rows, uint64 nrows, Jsonb *current, int32 turns,
			   int *nentries)
{
	int64		cap = current ? JB_ROOT_COUNT(current) : 0;
	HistoryEntry *entries;
	int			i;
	int			k;

	for (i = 0; i < (int) nrows; i++)
	{
		Jsonb	   *arr = HistoryRowArray(rows, i);

		if (arr != NULL)
			cap += JB_ROOT_COUNT(arr);
		if (cap > (int64) (MaxAllocSize / sizeof(HistoryEntry)))
			ereport(ERROR,
					errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					errmsg("context history has too many chunks"),
					errdetail("The %d turns asked for hold more than %d chunks.",
							  turns, (int) (MaxAllocSize / sizeof(HistoryEntry))),
					errhint("Ask for fewer turns."));
	}
	entries = palloc(sizeof(HistoryEntry) * Max(cap, 1));
	*nentries = 0;
	for (i = 0; i < (int) nrows; i++)
	{
		Jsonb	   *arr = HistoryRowArray(rows, i);

		if (arr == NULL)
			continue;
		for (k = 0; k < (int) JB_ROOT_COUNT(arr); k++)
			AddEntry(entries, nentries, i == 0 ? 0 : 1, i + 1,
					 getIthJsonbValueFromContainer(&arr->root, k));
	}
	if (current)
		for (k = 0; k < (int) JB_ROOT_COUNT(current); k++)
			AddEntry(entries, nentries, 2, 0,
					 getIthJsonbValueFromContainer(&current->root, k));
	return entries;
}

/*
 * Keep each id once, in its most recent section: current, then immediate,
 * then history from the newest turn back.
 */
static void
KeepNewestOfEachId(HistoryEntry *entries, int nentries)
{
	static const int by_priority[3] = {2, 0, 1};
	idmap_hash *seen = idmap_create(CurrentMemoryContext, Max(nentries, 8), NULL);
	int			priority;
	int			i;

	for (priority = 0; priority < 3; priority++)
	{
		for (i = 0; i < nentries; i++)
		{
			JsonbValue	id;
			bool		found;

			if (entries[i].section != by_priority[priority])
				continue;
			if (entries[i].chunk->type != jbvBinary ||
				JSONB_KEY(entries[i].chunk->val.binary.data, "id", &id) == NULL ||
				id.type != jbvString)
				continue;		/* not a chunk: stored data was changed by hand */
			(void) IdMapInsert(seen, id.val.string.val, id.val.string.len, &found);
			entries[i].keep = !found;
		}
	}
}

/* The kept entries, numbered from 1, as the context_history array. */
static Jsonb *
HistoryToJsonb(HistoryEntry *entries, int nentries)
{
	JsonbParseState *state = NULL;
	int			i;
	int			k = 0;

	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
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
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_ARRAY, NULL));
}

/* The unified citation context of a session (context_history). */
static Jsonb *
ContextHistory(text *tenant, text *session_id, int32 turns, Jsonb *current)
{
	MemoryContext caller = CurrentMemoryContext;
	SPITupleTable *rows;
	uint64		nrows;
	HistoryEntry *entries;
	int			nentries;
	Jsonb	   *out;

	SPI_connect();
	rows = ReadHistory(tenant, session_id, turns, &nrows);
	MemoryContextSwitchTo(caller);
	entries = CollectHistory(rows, nrows, current, turns, &nentries);
	KeepNewestOfEachId(entries, nentries);
	out = HistoryToJsonb(entries, nentries);
	SPI_finish();
	return out;
}

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

	if (!PG_ARGISNULL(2))
	{
		current = PG_GETARG_JSONB_P(2);
		CheckChunkArray(current, "current_chunks");
	}
	PG_RETURN_JSONB_P(ContextHistory(tenant, session_id, turns, current));
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

/* The section a JSON string names (0 immediate, 1 history, 2 current), or -1. */
static int
SectionOf(JsonbValue *v)
{
	int			s;

	for (s = 0; s < 3; s++)
		if (JsonbStringIs(v, section_names[s]))
			return s;
	return -1;
}

/*
 * The header label of each section: the default, or what the labels
 * object (NULL for none) gives; any other key is 22023.
 */
static void
ReadLabels(Jsonb *l, JsonbValue *labels)
{
	static const char *const defaults[3] = {
		"=== IMMEDIATE PREVIOUS CONTEXT (from the last answer) ===",
		"=== HISTORICAL CONTEXT ({n} turns ago, cited only) ===",
		"=== CURRENT CONTEXT (new for this query) ==="
	};
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			s;

	for (s = 0; s < 3; s++)
	{
		labels[s].type = jbvString;
		labels[s].val.string.val = (char *) defaults[s];
		labels[s].val.string.len = strlen(defaults[s]);
	}
	if (l == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(l))
		JsonbWrongType(JsonbRootTypeName(l), "labels must be a JSON object");
	it = JsonbIteratorInit(&l->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		if (tok == WJB_KEY && SectionOf(&v) < 0)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("unknown label \"%s\"", pnstrdup(v.val.string.val, v.val.string.len)),
					errhint("Labels are \"immediate\", \"history\" and \"current\"."));
	for (s = 0; s < 3; s++)
		if (JsonbObjectString(&l->root, section_names[s], "labels", &v) != NULL)
			labels[s] = v;
}

/*
 * A number key of a history entry as text, or NULL when it is absent or
 * null; what names the entry in errors.
 */
static char *
EntryNumber(JsonbContainer *entry, const char *key, const char *what)
{
	JsonbValue	v;

	if (getKeyJsonValueFromContainer(entry, key, strlen(key), &v) == NULL || v.type == jbvNull)
		return NULL;
	if (v.type != jbvNumeric)
		JsonbWrongType(JsonbValueTypeName(&v), "key \"%s\" of %s must be a number", key, what);
	return NumberText(&v);
}

/*
 * Check entry i of a history and return its chunk, with its section, its
 * index ("i + 1" unless it has one) and turns_ago ("" unless it has one).
 */
static JsonbContainer *
ReadHistoryEntry(JsonbValue *e, int i, int *section, char **index, char **turns_ago)
{
	char	   *what = psprintf("entry %d of the history", i + 1);
	JsonbValue	v;

	if (e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
		JsonbWrongType(JsonbValueTypeName(e), "%s must be a JSON object", what);
	*section = -1;
	if (JsonbObjectString(e->val.binary.data, "section", what, &v) != NULL)
		*section = SectionOf(&v);
	if (*section < 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must have a \"section\" of \"immediate\", \"history\" or \"current\"", what));
	*index = EntryNumber(e->val.binary.data, "index", what);
	if (*index == NULL)
		*index = psprintf("%d", i + 1);
	*turns_ago = EntryNumber(e->val.binary.data, "turns_ago", what);
	if (*turns_ago == NULL)
		*turns_ago = pstrdup("");
	if (JSONB_KEY(e->val.binary.data, "chunk", &v) == NULL)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must have a \"chunk\"", what));
	return CheckChunk(&v, psprintf("the chunk of %s", what));
}

/*
 * A chunk as "[index] source - title" (the id when it has neither),
 * "Title: title" and "Text: text", each on lines of its own.
 */
static void
AppendChunk(StringInfo buf, JsonbContainer *chunk, const char *index)
{
	JsonbValue	title;
	JsonbValue	source;
	JsonbValue	text;
	JsonbValue	id;

	(void) JsonbObjectString(chunk, "text", "a chunk", &text);
	ChunkId(chunk, &id);
	appendStringInfo(buf, "\n[%s] ", index);
	if (JsonbObjectString(chunk, "source", "a chunk", &source) == NULL)
		source.type = jbvNull;
	if (JsonbObjectString(chunk, "title", "a chunk", &title) == NULL)
		title.type = jbvNull;
	if (source.type == jbvString)
		AppendPromptLine(buf, source.val.string.val, source.val.string.len);
	if (source.type == jbvString && title.type == jbvString)
		appendStringInfoString(buf, " - ");
	if (title.type == jbvString)
		AppendPromptLine(buf, title.val.string.val, title.val.string.len);
	if (source.type != jbvString && title.type != jbvString)
		AppendPromptLine(buf, id.val.string.val, id.val.string.len);
	if (title.type == jbvString)
	{
		appendStringInfoString(buf, "\nTitle: ");
		AppendPromptLine(buf, title.val.string.val, title.val.string.len);
	}
	appendStringInfoString(buf, "\nText: ");
	AppendPromptBlock(buf, text.val.string.val, text.val.string.len, PROMPT_BLOCK_INDENT);
}

/* The text form of a context_history array (render_context_history). */
static text *
RenderContextHistory(Jsonb *history, Jsonb *labels_arg)
{
	JsonbValue	labels[3];
	StringInfoData buf;
	char	   *last_header = NULL;
	int			n;
	int			i;

	if (!JsonbIsArray(history))
		JsonbWrongType(JsonbRootTypeName(history), "history must be a JSON array");
	ReadLabels(labels_arg, labels);

	initStringInfo(&buf);
	n = JB_ROOT_COUNT(history);
	for (i = 0; i < n; i++)
	{
		int			section;
		char	   *index;
		char	   *turns_ago;
		JsonbContainer *chunk;
		StringInfoData header;

		chunk = ReadHistoryEntry(getIthJsonbValueFromContainer(&history->root, i),
								 i, &section, &index, &turns_ago);

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
		AppendChunk(&buf, chunk, index);
	}
	return cstring_to_text_with_len(buf.data, buf.len);
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
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(RenderContextHistory(PG_GETARG_JSONB_P(0),
										  PG_ARGISNULL(1) ? NULL : PG_GETARG_JSONB_P(1)));
}
