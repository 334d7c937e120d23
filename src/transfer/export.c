/*-------------------------------------------------------------------------
 *
 * export.c
 *	  export_records: every row convctx stores for the current tenant's
 *	  conversations, as the records of the convctx.jsonl format (one JSON
 *	  object a line), which the command-line tool `convctx export` writes
 *	  between its header and trailer (docs/import-export.md);
 *	  export_messages: the same conversations as portable chat messages,
 *	  one line per conversation (`convctx export --format=messages`).
 *
 * The lines are built here, from the stored values, so that nothing is
 * re-serialized on the way out: jsonb columns are embedded as stored, and
 * numbers and text keep every digit and character. Records come grouped by
 * conversation (in session_id order): its session record, every turn
 * version and tombstone (turn_no, record_version), its retrievals and
 * clarifications (turn_no), its summary, the embeddings of its turns
 * (where their companion is installed), its context. A context whose
 * conversation has no session row (purge leaves it to convctx.context_ttl)
 * is a group of its own.
 *
 * The records stream: the conversations are walked in session_id order
 * (only their keys and their session and context lines are sorted), and
 * each one's rows are read by index for it and ordered within it, so
 * nothing sorts the whole export. The functions return a row per call,
 * reading the statement as the extension's owner through a cursor a batch
 * at a time; called in a select list (as the tool does) nothing holds more
 * than a batch, so the backend's memory does not grow with the export,
 * and only the sort of the session and context lines may spill to a
 * temporary file.
 *
 * Administrators only, for the tenant they act for. Timestamps are printed
 * in the caller's TimeZone (the tool sets UTC).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/transfer/export.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/portalcmds.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/typcache.h"

#include "core/args.h"
#include "core/companion.h"
#include "core/owner.h"
#include "core/spi_plans.h"
#include "core/tenancy.h"
#include "core/variant.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr export_plan, export_embeddings_plan, messages_plan;

/* Rows fetched from the cursor at a time. */
#define EXPORT_BATCH 1000

/*
 * $1 tenant, $2 session id, $3 identity id, $4 since, $5 until (NULL: no
 * filter). Sessions: the one named, those linked to the identity, those
 * active since $4 and created before $5. Contexts: those of the chosen
 * sessions; those saved with the identity as user_id; and, with no
 * session named, those whose conversation has no session row and that
 * pass the same filters.
 *
 * g holds a row per group (a chosen session, a chosen context), sorted by
 * key; for each, the lateral subquery reads the session's rows by index
 * and orders them. Columns: record_type, line, and for a turn record the
 * turn row instead of the line (TurnLine writes it).
 */
#define EXPORT_SQL(embeddings) \
	"WITH s AS (" \
	"  SELECT * FROM convctx.session" \
	"   WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"     AND ($2::pg_catalog.text IS NULL OR session_id OPERATOR(pg_catalog.=) $2)" \
	"     AND ($3::pg_catalog.text IS NULL OR identity_id OPERATOR(pg_catalog.=) $3)" \
	"     AND ($4::pg_catalog.timestamptz IS NULL OR last_activity_at OPERATOR(pg_catalog.>=) $4)" \
	"     AND ($5::pg_catalog.timestamptz IS NULL OR created_at OPERATOR(pg_catalog.<) $5))," \
	" c AS (" \
	"  SELECT cc.* FROM convctx.conversation_context cc" \
	"   WHERE cc.tenant_id OPERATOR(pg_catalog.=) $1" \
	"     AND (EXISTS (SELECT 1 FROM s WHERE s.session_id OPERATOR(pg_catalog.=) cc.conversation_id)" \
	"          OR ($3::pg_catalog.text IS NOT NULL AND cc.user_id OPERATOR(pg_catalog.=) $3)" \
	"          OR ($2::pg_catalog.text IS NULL" \
	"              AND ($3::pg_catalog.text IS NULL OR cc.user_id OPERATOR(pg_catalog.=) $3)" \
	"              AND ($4::pg_catalog.timestamptz IS NULL OR cc.updated_at OPERATOR(pg_catalog.>=) $4)" \
	"              AND ($5::pg_catalog.timestamptz IS NULL OR cc.created_at OPERATOR(pg_catalog.<) $5)" \
	"              AND NOT EXISTS (SELECT 1 FROM convctx.session x" \
	"                               WHERE x.tenant_id OPERATOR(pg_catalog.=) $1" \
	"                                 AND x.session_id OPERATOR(pg_catalog.=) cc.conversation_id))))," \
	" g AS (" \
	"  SELECT s.session_id AS k, 0 AS part, 'session' AS record_type," \
	"         pg_catalog.jsonb_build_object('type', 'session', 'session_id', s.session_id," \
	"           'identity_id', s.identity_id, 'linked_at', l.linked_at, 'created_at', s.created_at," \
	"           'last_activity_at', s.last_activity_at, 'last_turn_no', s.last_turn_no," \
	"           'live_turns', s.live_turns, 'live_answers', s.live_answers," \
	"           'summary_through_turn_no', s.summary_through_turn_no, 'redactions', s.redactions," \
	"           'title', s.title) AS line" \
	"    FROM s LEFT JOIN convctx.session_link l" \
	"      ON l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.session_id OPERATOR(pg_catalog.=) s.session_id" \
	"  UNION ALL" \
	"  SELECT c.conversation_id, 5, 'context'," \
	"         pg_catalog.jsonb_build_object('type', 'context', 'conversation_id', c.conversation_id," \
	"           'context', c.context_json, 'user_id', c.user_id, 'created_at', c.created_at," \
	"           'updated_at', c.updated_at)" \
	"    FROM c)" \
	" SELECT r.record_type, r.line::pg_catalog.text, r.turn" \
	"  FROM (SELECT * FROM g ORDER BY g.k, g.part) g CROSS JOIN LATERAL (" \
	"  SELECT g.record_type, g.line, 0 AS part, 0::pg_catalog.int8 AS n1, 0 AS n2," \
	"         NULL::convctx.turn AS turn" \
	"  UNION ALL" \
	"  SELECT 'turn', NULL, 1, t.turn_no, t.record_version, t" \
	"    FROM convctx.turn t" \
	"   WHERE g.part OPERATOR(pg_catalog.=) 0 AND t.tenant_id OPERATOR(pg_catalog.=) $1" \
	"     AND t.session_id OPERATOR(pg_catalog.=) g.k" \
	"  UNION ALL" \
	"  SELECT 'retrieval', pg_catalog.jsonb_build_object('type', 'retrieval', 'session_id', r.session_id," \
	"           'turn_no', r.turn_no, 'chunks', r.chunks, 'citations', r.citations," \
	"           'recorded_at', r.recorded_at), 2, r.turn_no, 0, NULL" \
	"    FROM convctx.turn_retrieval r" \
	"   WHERE g.part OPERATOR(pg_catalog.=) 0 AND r.tenant_id OPERATOR(pg_catalog.=) $1" \
	"     AND r.session_id OPERATOR(pg_catalog.=) g.k" \
	"  UNION ALL" \
	"  SELECT 'clarification', pg_catalog.jsonb_build_object('type', 'clarification', 'session_id', q.session_id," \
	"           'turn_no', q.turn_no, 'questions', q.questions, 'inferred_context', q.inferred_context," \
	"           'recorded_at', q.recorded_at), 3, q.turn_no, 0, NULL" \
	"    FROM convctx.clarification q" \
	"   WHERE g.part OPERATOR(pg_catalog.=) 0 AND q.tenant_id OPERATOR(pg_catalog.=) $1" \
	"     AND q.session_id OPERATOR(pg_catalog.=) g.k" \
	"  UNION ALL" \
	"  SELECT 'summary', pg_catalog.jsonb_build_object('type', 'summary', 'session_id', m.session_id," \
	"           'summary', m.summary, 'through_turn_no', m.through_turn_no," \
	"           'covered_messages', m.covered_messages, 'updated_at', m.updated_at), 4, 0, 0, NULL" \
	"    FROM convctx.session_summary m" \
	"   WHERE g.part OPERATOR(pg_catalog.=) 0 AND m.tenant_id OPERATOR(pg_catalog.=) $1" \
	"     AND m.session_id OPERATOR(pg_catalog.=) g.k" \
	embeddings \
	"  ORDER BY 3, 4, 5, 2) r"

/*
 * The same sessions as EXPORT_SQL ($1 to $5), a line each: the current,
 * live versions of its turns as {"role", "content", "created_at", "id"}
 * messages (the question as "user", the answer, once given, as
 * "assistant"; "id" the request id), oldest first. Tombstones, old
 * versions and everything but the texts are left out.
 */
#define MESSAGES_SQL \
	"SELECT 'messages', pg_catalog.jsonb_build_object('session_id', s.session_id," \
	"         'identity_id', s.identity_id, 'created_at', s.created_at," \
	"         'messages', COALESCE((" \
	"           SELECT pg_catalog.jsonb_agg(m.message ORDER BY m.turn_no, m.part) FROM (" \
	"             SELECT t.turn_no, 0 AS part, pg_catalog.jsonb_build_object('role', 'user'," \
	"                    'content', t.question_neutral, 'created_at', t.created_at, 'id', t.request_id) AS message" \
	"               FROM convctx.turn t" \
	"              WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.session_id OPERATOR(pg_catalog.=) s.session_id" \
	"                AND t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL" \
	"             UNION ALL" \
	"             SELECT t.turn_no, 1, pg_catalog.jsonb_build_object('role', 'assistant'," \
	"                    'content', t.answer_neutral, 'created_at', t.finalized_at, 'id', t.request_id)" \
	"               FROM convctx.turn t" \
	"              WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.session_id OPERATOR(pg_catalog.=) s.session_id" \
	"                AND t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL" \
	"                AND t.finalized_at IS NOT NULL) m)," \
	"           '[]'::pg_catalog.jsonb))::pg_catalog.text" \
	"  FROM convctx.session s" \
	" WHERE s.tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND ($2::pg_catalog.text IS NULL OR s.session_id OPERATOR(pg_catalog.=) $2)" \
	"   AND ($3::pg_catalog.text IS NULL OR s.identity_id OPERATOR(pg_catalog.=) $3)" \
	"   AND ($4::pg_catalog.timestamptz IS NULL OR s.last_activity_at OPERATOR(pg_catalog.>=) $4)" \
	"   AND ($5::pg_catalog.timestamptz IS NULL OR s.created_at OPERATOR(pg_catalog.<) $5)" \
	" ORDER BY s.session_id"

/* The filters of an export; NULL fields filter nothing. */
typedef struct ExportFilter
{
	text	   *session_id;
	text	   *identity_id;
	Datum		since;			/* timestamptz, or 0 with since_null */
	bool		since_null;
	Datum		until;
	bool		until_null;
} ExportFilter;

static ExportFilter ArgExportFilter(FunctionCallInfo fcinfo);

/*
 * The keys of a turn record: "type", then the columns of convctx.turn
 * of the same names. Turn records, most of an export, are written here
 * rather than by jsonb_build_object(...)::text, which copies every text
 * three times; the line is the same, byte for byte: the keys in jsonb's
 * order (shorter first, then bytewise), ": " and ", " between them,
 * strings escaped as by escape_json(), times by JsonEncodeDateTime(), numbers
 * and booleans as their text, jsonb values as stored (JsonbToCString()).
 * The regression test "export" checks every line against its jsonb form.
 */
static const char *const turn_keys[] = {
	"type", "session_id", "turn_id", "turn_no", "request_id", "record_version",
	"replaced_by_turn_id", "identity_id", "created_at", "finalized_at", "deleted_at",
	"redaction", "translate_chat", "question_neutral", "answer_neutral",
	"question_translated", "answer_translated", "answer_translated_is_fallback",
	"metadata", "pipeline_name", "consultant", "repository"
};

/* turn_keys' indexes in jsonb's order of keys; [0] < 0 until sorted */
static int	turn_order[lengthof(turn_keys)] = {-1};

static int
jsonb_key_cmp(const void *a, const void *b)
{
	const char *ka = turn_keys[*(const int *) a];
	const char *kb = turn_keys[*(const int *) b];
	size_t		la = strlen(ka);
	size_t		lb = strlen(kb);

	if (la != lb)
		return la < lb ? -1 : 1;
	return memcmp(ka, kb, la);
}

/*
 * An export in progress, kept across the calls of the function: the
 * cursor the rows are read from, and the batch read last.
 */
typedef struct ExportState
{
	uint64		cursor;			/* ExportPortals' key of the cursor; 0 once closed */
	MemoryContext batch_cxt;	/* holds the batch; reset for the next */
	MemoryContext row_cxt;		/* TurnLine's work space */
	Datum	   *values;			/* 2 per row: record_type, line */
	bool	   *nulls;
	uint64		rows;			/* rows in the batch */
	uint64		next;			/* the next row to return */
	MemoryContext cxt;			/* lives as long as the export */
	TupleDesc	turn_desc;		/* of the turn rows, once one is read */
	int			turn_attnums[lengthof(turn_keys)];	/* in turn_order */
} ExportState;

/*
 * The cursors of the exports in progress in this backend, each with a key
 * of its own. Owner mode never looks a cursor up by name (the caller could
 * close convctx's and declare one of its own under the same name, whose
 * functions would then run as the owner): an export keeps its key, and the
 * Portal is found here. The portal is hidden from pg_cursors, and its
 * cleanup hook (ExportPortalCleanup), which runs whenever the portal is
 * dropped (CLOSE under a guessed name, the end of the (sub)transaction),
 * takes it out of this list first, so a closed cursor is never fetched,
 * nor whatever portal later gets its name or its address.
 */
typedef struct ExportPortal
{
	uint64		key;
	Portal		portal;
} ExportPortal;

static ExportPortal *export_portals = NULL;
static int	n_export_portals = 0;
static int	max_export_portals = 0;
static uint64 last_export_key = 0;

static void
ExportPortalCleanup(Portal portal)
{
	int			i;

	for (i = 0; i < n_export_portals; i++)
	{
		if (export_portals[i].portal == portal)
		{
			export_portals[i] = export_portals[--n_export_portals];
			break;
		}
	}
	PortalCleanup(portal);
}

/*
 * At the end of a transaction no cursor of an export is left (they are not
 * holdable, and each was dropped through ExportPortalCleanup): forget any
 * all the same.
 */
static void
ExportPortalsForget(XactEvent event, void *arg)
{
	n_export_portals = 0;
}

/* Keep portal, a convctx cursor just opened; returns its key. */
static uint64
ExportPortalKeep(Portal portal)
{
	if (portal->cleanup != PortalCleanup)
		elog(ERROR, "export cursor has an unexpected cleanup hook");
	if (max_export_portals == 0)
		RegisterXactCallback(ExportPortalsForget, NULL);
	if (n_export_portals == max_export_portals)
	{
		max_export_portals = Max(4, 2 * max_export_portals);
		export_portals = export_portals == NULL ?
			MemoryContextAlloc(TopMemoryContext, sizeof(ExportPortal) * max_export_portals) :
			repalloc(export_portals, sizeof(ExportPortal) * max_export_portals);
	}
	portal->visible = false;
	portal->cleanup = ExportPortalCleanup;
	export_portals[n_export_portals].key = ++last_export_key;
	export_portals[n_export_portals].portal = portal;
	n_export_portals++;
	return last_export_key;
}

/* The portal kept under key, or NULL once it was dropped. */
static Portal
ExportPortalFind(uint64 key)
{
	int			i;

	for (i = 0; i < n_export_portals; i++)
		if (export_portals[i].key == key)
			return export_portals[i].portal;
	return NULL;
}

/*
 * Open a cursor, as the owner, over the statement sql for the tenant's
 * conversations that f selects; returns its key (ExportPortalKeep).
 */
static uint64
OpenExportCursor(SPIPlanPtr *cache, const char *sql, text *tenant, ExportFilter *f)
{
	Oid			argtypes[5] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		values[5] = {PointerGetDatum(tenant), PointerGetDatum(f->session_id),
		PointerGetDatum(f->identity_id), f->since, f->until};
	char		nulls[5] = {' ', f->session_id ? ' ' : 'n', f->identity_id ? ' ' : 'n',
		f->since_null ? 'n' : ' ', f->until_null ? 'n' : ' '};
	SPIPlanPtr	plan;
	volatile Portal portal = NULL;
	OwnerSwitch sw;
	int			nestlevel;
	uint64		key;

	SPI_connect();
	plan = SpiKeptPlan(cache, sql, 5, argtypes);

	/*
	 * Planned (on the first open) and started without JIT: compiling the
	 * expressions costs most of a second, more than it saves here.
	 */
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	ActAsOwner(&sw);
	PG_TRY();
	{
		portal = SPI_cursor_open(NULL, plan, values, nulls, true);
	}
	PG_FINALLY();
	{
		ActAsCaller(&sw);
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nestlevel);
	key = ExportPortalKeep(portal);
	SPI_finish();
	return key;
}

/*
 * Find the columns of the turn record in desc, the row type of
 * convctx.turn; the first time, sort the keys.
 */
static void
SetTurnColumns(ExportState *st, TupleDesc desc)
{
	MemoryContext old;
	int			k;

	if (turn_order[0] < 0)
	{
		for (k = 0; k < (int) lengthof(turn_keys); k++)
			turn_order[k] = k;
		qsort(turn_order, lengthof(turn_keys), sizeof(int), jsonb_key_cmp);
	}
	for (k = 0; k < (int) lengthof(turn_keys); k++)
	{
		const char *key = turn_keys[turn_order[k]];
		int			a;

		st->turn_attnums[k] = 0;	/* "type" */
		if (strcmp(key, "type") == 0)
			continue;
		for (a = 0; a < desc->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, a);

			if (!att->attisdropped && strcmp(NameStr(att->attname), key) == 0)
				break;
		}
		if (a == desc->natts)
			elog(ERROR, "convctx.turn has no column \"%s\"", key);
		st->turn_attnums[k] = a + 1;
	}
	old = MemoryContextSwitchTo(st->cxt);
	st->turn_desc = CreateTupleDescCopy(desc);
	MemoryContextSwitchTo(old);
}

/*
 * Append the len bytes at str as a JSON string, exactly as escape_json()
 * does, but copying the runs of characters that need no escape at once
 * (most of a text) rather than a character at a time.
 */
static void
AppendJsonString(StringInfo buf, const char *str, int len)
{
	const char *end = str + len;
	const char *run = str;
	const char *p;

	appendStringInfoCharMacro(buf, '"');
	for (p = str; p < end; p++)
	{
		unsigned char c = (unsigned char) *p;

		if (c >= ' ' && c != '"' && c != '\\')
			continue;
		appendBinaryStringInfo(buf, run, p - run);
		run = p + 1;
		switch (c)
		{
			case '\b':
				appendBinaryStringInfo(buf, "\\b", 2);
				break;
			case '\f':
				appendBinaryStringInfo(buf, "\\f", 2);
				break;
			case '\n':
				appendBinaryStringInfo(buf, "\\n", 2);
				break;
			case '\r':
				appendBinaryStringInfo(buf, "\\r", 2);
				break;
			case '\t':
				appendBinaryStringInfo(buf, "\\t", 2);
				break;
			case '"':
				appendBinaryStringInfo(buf, "\\\"", 2);
				break;
			case '\\':
				appendBinaryStringInfo(buf, "\\\\", 2);
				break;
			default:
				appendStringInfo(buf, "\\u%04x", (int) c);
				break;
		}
	}
	appendBinaryStringInfo(buf, run, end - run);
	appendStringInfoCharMacro(buf, '"');
}

/* Append value v of type typid as jsonb_build_object would print it. */
static void
AppendJsonValue(StringInfo buf, Datum v, bool isnull, Oid typid)
{
	char		ts[MAXDATELEN + 1];

	if (isnull)
	{
		appendStringInfoString(buf, "null");
		return;
	}
	switch (typid)
	{
		case TEXTOID:
			{
				text	   *t = DatumGetTextPP(v);

				AppendJsonString(buf, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
			}
			break;
		case UUIDOID:
			escape_json(buf, DatumGetCString(DirectFunctionCall1(uuid_out, v)));
			break;
		case INT8OID:
			appendStringInfoString(buf, DatumGetCString(DirectFunctionCall1(int8out, v)));
			break;
		case INT4OID:
			appendStringInfo(buf, "%d", DatumGetInt32(v));
			break;
		case BOOLOID:
			appendStringInfoString(buf, DatumGetBool(v) ? "true" : "false");
			break;
		case TIMESTAMPTZOID:
			escape_json(buf, JsonEncodeDateTime(ts, v, TIMESTAMPTZOID, NULL));
			break;
		case JSONBOID:
			{
				Jsonb	   *jb = DatumGetJsonbP(v);

				JsonbToCString(buf, &jb->root, VARSIZE(jb));
			}
			break;
		default:
			elog(ERROR, "a turn column of unexpected type %u", typid);
	}
}

/*
 * The line of the turn record of row (a convctx.turn), as text, in the
 * current memory context.
 */
static text *
TurnLine(ExportState *st, HeapTupleHeader row)
{
	HeapTupleData tuple;
	Datum	   *values;
	bool	   *nulls;
	StringInfoData buf;
	MemoryContext old;
	int			k;

	tuple.t_len = HeapTupleHeaderGetDatumLength(row);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = row;

	/* the line: about the row's size, plus the keys */
	buf.maxlen = tuple.t_len + 1024;
	buf.data = palloc(buf.maxlen);
	buf.len = 0;
	buf.cursor = 0;
	appendBinaryStringInfo(&buf, "    ", VARHDRSZ);	/* the length, below */

	/* the rest, in a context emptied once the line is written */
	old = MemoryContextSwitchTo(st->row_cxt);
	values = palloc(sizeof(Datum) * st->turn_desc->natts);
	nulls = palloc(sizeof(bool) * st->turn_desc->natts);
	heap_deform_tuple(&tuple, st->turn_desc, values, nulls);

	appendStringInfoChar(&buf, '{');
	for (k = 0; k < (int) lengthof(turn_keys); k++)
	{
		int			a = st->turn_attnums[k];

		if (k > 0)
			appendBinaryStringInfo(&buf, ", ", 2);
		/* the keys need no escape */
		appendStringInfoChar(&buf, '"');
		appendStringInfoString(&buf, turn_keys[turn_order[k]]);
		appendBinaryStringInfo(&buf, "\": ", 3);
		if (a == 0)
			escape_json(&buf, "turn");
		else
			AppendJsonValue(&buf, values[a - 1], nulls[a - 1],
							TupleDescAttr(st->turn_desc, a - 1)->atttypid);
	}
	appendStringInfoChar(&buf, '}');
	SET_VARSIZE(buf.data, buf.len);
	MemoryContextSwitchTo(old);
	MemoryContextReset(st->row_cxt);
	return (text *) buf.data;
}

/*
 * Read the next batch of the cursor into st, as the owner; closes the
 * cursor when it has no more rows.
 */
static void
FetchExportBatch(ExportState *st)
{
	OwnerSwitch sw;
	Portal		portal = ExportPortalFind(st->cursor);

	MemoryContextReset(st->batch_cxt);
	st->rows = st->next = 0;
	if (portal == NULL)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_CURSOR_STATE),
				errmsg("the cursor of this export was closed before its last row"),
				errdetail("Another statement of the transaction closed the export's cursor."),
				errhint("Run the export again, without closing cursors you did not declare."));
	SPI_connect();
	ActAsOwner(&sw);
	PG_TRY();
	{
		SPI_cursor_fetch(portal, true, EXPORT_BATCH);
		if (SPI_processed == 0)
		{
			SPI_cursor_close(portal);
			st->cursor = 0;
		}
		else
		{
			MemoryContext old = MemoryContextSwitchTo(st->batch_cxt);
			uint64		i;

			st->values = palloc(sizeof(Datum) * 2 * SPI_processed);
			st->nulls = palloc(sizeof(bool) * 2 * SPI_processed);
			for (i = 0; i < SPI_processed; i++)
			{
				HeapTuple	tuple = SPI_tuptable->vals[i];
				TupleDesc	desc = SPI_tuptable->tupdesc;
				bool		isnull;
				Datum		turn = desc->natts < 3 ? (Datum) 0 : SPI_getbinval(tuple, desc, 3, &isnull);
				int			a;

				for (a = 0; a < 2; a++)
				{
					Datum		v = SPI_getbinval(tuple, desc, a + 1, &st->nulls[2 * i + a]);

					st->values[2 * i + a] = st->nulls[2 * i + a] ? (Datum) 0 : datumCopy(v, false, -1);
				}
				if (desc->natts >= 3 && !isnull)
				{
					HeapTupleHeader row = DatumGetHeapTupleHeader(turn);

					if (st->turn_desc == NULL)
					{
						TupleDesc	rowdesc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(row),
																	 HeapTupleHeaderGetTypMod(row));

						SetTurnColumns(st, rowdesc);
						ReleaseTupleDesc(rowdesc);
					}
					st->values[2 * i + 1] = PointerGetDatum(TurnLine(st, row));
					st->nulls[2 * i + 1] = false;
				}
			}
			st->rows = SPI_processed;
			MemoryContextSwitchTo(old);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	PG_FINALLY();
	{
		ActAsCaller(&sw);
	}
	PG_END_TRY();
	SPI_finish();
}

/* When the query stops before the last row: close the cursor. */
static void
CloseExportCursor(Datum arg)
{
	ExportState *st = (ExportState *) DatumGetPointer(arg);

	if (st->cursor != 0)
	{
		Portal		portal = ExportPortalFind(st->cursor);

		st->cursor = 0;
		if (portal != NULL)
			SPI_cursor_close(portal);
	}
}

/*
 * The rows (record_type text, line text) of the statement sql, a value per
 * call: the first call opens a cursor, as the owner, and each batch of
 * EXPORT_BATCH rows is read from it as the rows are asked for, so that a
 * caller that reads the function in its select list (as the tool does)
 * gets the first rows at once and neither side holds the whole export.
 * (In FROM, the executor still gathers the rows in its tuplestore.)
 */
static Datum
ExportRows(FunctionCallInfo fcinfo, SPIPlanPtr *cache, const char *sql)
{
	FuncCallContext *funcctx;
	ExportState *st;

	if (SRF_IS_FIRSTCALL())
	{
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		ExportFilter f = ArgExportFilter(fcinfo);
		text	   *tenant = CurrentTenant();
		TupleDesc	desc;
		MemoryContext old;

		funcctx = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type must be a row type");
		funcctx->tuple_desc = BlessTupleDesc(desc);
		st = palloc0(sizeof(ExportState));
		st->cxt = funcctx->multi_call_memory_ctx;
		/* a first block a batch of usual lines fits in, kept across resets */
		st->batch_cxt = AllocSetContextCreate(funcctx->multi_call_memory_ctx,
											  "convctx export batch", 4 * 1024 * 1024,
											  4 * 1024 * 1024, ALLOCSET_DEFAULT_MAXSIZE);
		st->row_cxt = AllocSetContextCreate(funcctx->multi_call_memory_ctx,
											"convctx export row", ALLOCSET_DEFAULT_SIZES);
		MemoryContextSwitchTo(old);
		st->cursor = OpenExportCursor(cache, sql, tenant, &f);
		funcctx->user_fctx = st;
		RegisterExprContextCallback(rsinfo->econtext, CloseExportCursor, PointerGetDatum(st));
	}
	funcctx = SRF_PERCALL_SETUP();
	st = (ExportState *) funcctx->user_fctx;
	if (st->next >= st->rows && st->cursor != 0)
	{
		CHECK_FOR_INTERRUPTS();
		FetchExportBatch(st);
	}
	if (st->next < st->rows)
	{
		HeapTuple	tuple = heap_form_tuple(funcctx->tuple_desc, &st->values[2 * st->next],
										   &st->nulls[2 * st->next]);

		st->next++;
		SRF_RETURN_NEXT(funcctx, HeapTupleGetDatum(tuple));
	}
	UnregisterExprContextCallback(((ReturnSetInfo *) fcinfo->resultinfo)->econtext,
								  CloseExportCursor, PointerGetDatum(st));
	SRF_RETURN_DONE(funcctx);
}

/* The filter of arguments 0 to 3: session_id, identity_id, since, until. */
static ExportFilter
ArgExportFilter(FunctionCallInfo fcinfo)
{
	ExportFilter f;

	f.session_id = ArgOptionalId(fcinfo, 0, "session_id");
	f.identity_id = ArgOptionalId(fcinfo, 1, "identity_id");
	f.since_null = PG_ARGISNULL(2);
	f.since = f.since_null ? (Datum) 0 : PG_GETARG_DATUM(2);
	f.until_null = PG_ARGISNULL(3);
	f.until = f.until_null ? (Datum) 0 : PG_GETARG_DATUM(3);
	return f;
}

PG_FUNCTION_INFO_V1(convctx_export_records);

/*
 * export_records(session_id, identity_id, since, until) -> setof
 * (record_type, line)
 */
Datum
convctx_export_records(PG_FUNCTION_ARGS)
{
	const char *extra;

	VariantRefuse("convctx.export_records()",
				  "convctx.export_messages() runs there; for the full record format, export from a copy of the database restored on a single server.");
	/* the statement is chosen when the cursor opens, on the first call */
	if (SRF_IS_FIRSTCALL() && (extra = CompanionExportSql()) != NULL)
		return ExportRows(fcinfo, &export_embeddings_plan, psprintf(EXPORT_SQL("%s"), extra));
	return ExportRows(fcinfo, &export_plan, EXPORT_SQL(""));
}

PG_FUNCTION_INFO_V1(convctx_export_messages);

/*
 * export_messages(session_id, identity_id, since, until) -> setof
 * (record_type, line), record_type always 'messages'
 */
Datum
convctx_export_messages(PG_FUNCTION_ARGS)
{
	return ExportRows(fcinfo, &messages_plan, MESSAGES_SQL);
}
