/*-------------------------------------------------------------------------
 *
 * recent_turns.c
 *	  The prompt-history read: recent_turns and recent_turns_json.
 *
 * This is the read a chat backend makes on every request, so it does not
 * go through SPI and the executor: it walks the chronology index
 * (tenant_id, session_id, turn_no) backwards from the newest turn, keeps
 * the finalized, live, current versions until it has turn_limit of them,
 * and returns them oldest first. Its cost follows turn_limit plus the
 * turns it skips at the end of the session (open, redacted or replaced
 * ones), never the session's or the table's size.
 *
 * Nor the number of tombstones below the turns it returns: the session row
 * counts the finalized, live, current versions (live_answers, kept exact
 * under the row's lock by every writer), read in the same snapshot, so the
 * scan stops once it has all of them. A session that goes on after
 * redact_session or erase_identity has its tombstones below its live
 * turns, and they are never read; a session with no live answer is not
 * read at all. Only tombstones newer than the oldest turn returned (single
 * redact_turn calls among the live turns) are still stepped over.
 *
 * A btree scan reads every entry of a leaf page that matches its keys at
 * once, and a long session fills whole leaf pages: bounded only by the
 * session, the scan would read some two hundred entries to return ten. So
 * the session row's last_turn_no is read first, and the index is read in
 * spans of turn numbers below it, the first just wide enough for
 * turn_limit turns, each further one (when open, redacted or replaced
 * turns took places) four times wider.
 *
 * The read runs as the tables' owner (ActAsOwner), once the caller's
 * tenant is decided. The direct read is what the SQL query would return
 * only when neither privileges nor row-level security change anything for
 * the owner, which holds unless someone forced row-level security on the
 * tables; otherwise the same query runs through SPI, so permissions and
 * policies apply exactly as in SQL.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/recent_turns.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/primnodes.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "convctx.h"
#include "args.h"
#include "jsonb_util.h"
#include "recent_turns.h"
#include "spi_util.h"
#include "tenancy.h"
#include "variant.h"

/*
 * The columns read, in the order recent_turns returns them; the last
 * three only decide whether a turn is returned.
 */
typedef enum RecentColumn
{
	RC_TURN_ID,
	RC_REQUEST_ID,
	RC_CREATED_AT,
	RC_FINALIZED_AT,
	RC_QUESTION_NEUTRAL,
	RC_ANSWER_NEUTRAL,
	RC_QUESTION_TRANSLATED,
	RC_ANSWER_TRANSLATED,
	RC_METADATA,
	RC_DELETED_AT,
	RC_REPLACED_BY,
	RC_TENANT_ID,
	RC_SESSION_ID,
	RC_TURN_NO,
	RC_RECORD_VERSION,
	RC_COUNT
} RecentColumn;

#define RC_OUTPUT_COLUMNS (RC_METADATA + 1)

static const struct
{
	const char *name;
	Oid			type;
}			recent_columns[RC_COUNT] =
{
	[RC_TURN_ID] = {"turn_id", UUIDOID},
	[RC_REQUEST_ID] = {"request_id", TEXTOID},
	[RC_CREATED_AT] = {"created_at", TIMESTAMPTZOID},
	[RC_FINALIZED_AT] = {"finalized_at", TIMESTAMPTZOID},
	[RC_QUESTION_NEUTRAL] = {"question_neutral", TEXTOID},
	[RC_ANSWER_NEUTRAL] = {"answer_neutral", TEXTOID},
	[RC_QUESTION_TRANSLATED] = {"question_translated", TEXTOID},
	[RC_ANSWER_TRANSLATED] = {"answer_translated", TEXTOID},
	[RC_METADATA] = {"metadata", JSONBOID},
	[RC_DELETED_AT] = {"deleted_at", TIMESTAMPTZOID},
	[RC_REPLACED_BY] = {"replaced_by_turn_id", UUIDOID},
	[RC_TENANT_ID] = {"tenant_id", TEXTOID},
	[RC_SESSION_ID] = {"session_id", TEXTOID},
	[RC_TURN_NO] = {"turn_no", INT8OID},
	[RC_RECORD_VERSION] = {"record_version", INT4OID},
};

/* The columns of convctx.session that list_conversations reads. */
typedef enum ListColumn
{
	LC_SESSION_ID,
	LC_IDENTITY_ID,
	LC_ACTIVITY_BIN,
	LC_LAST_ACTIVITY_AT,
	LC_CREATED_AT,
	LC_LIVE_TURNS,
	LC_TITLE,
	LC_FIRST_QUESTION,
	LC_LINKED_LATER,
	LC_COUNT
} ListColumn;

static const struct
{
	const char *name;
	Oid			type;
}			list_columns[LC_COUNT] =
{
	[LC_SESSION_ID] = {"session_id", TEXTOID},
	[LC_IDENTITY_ID] = {"identity_id", TEXTOID},
	[LC_ACTIVITY_BIN] = {"activity_bin", TIMESTAMPTZOID},
	[LC_LAST_ACTIVITY_AT] = {"last_activity_at", TIMESTAMPTZOID},
	[LC_CREATED_AT] = {"created_at", TIMESTAMPTZOID},
	[LC_LIVE_TURNS] = {"live_turns", INT8OID},
	[LC_TITLE] = {"title", TEXTOID},
	[LC_FIRST_QUESTION] = {"first_question", TEXTOID},
	[LC_LINKED_LATER] = {"linked_later", BOOLOID},
};

/*
 * convctx.turn and its chronology index as this backend last found them;
 * a relcache invalidation of either (ALTER, DROP, a new extension) makes
 * the next call look them up and check them again.
 */
static struct
{
	bool		valid;
	bool		trusted;		/* both indexes may be read directly */
	Oid			relid;
	Oid			indexid;
	AttrNumber	attnum[RC_COUNT];
	Oid			session_relid;
	Oid			session_indexid;
	AttrNumber	session_tenant_attnum;
	AttrNumber	session_session_attnum;
	AttrNumber	session_last_turn_attnum;
	AttrNumber	session_live_answers_attnum;
	/* list_conversations: convctx.session and session_identity_activity */
	Oid			list_indexid;
	bool		list_trusted;	/* that index may be read directly */
	AttrNumber	list_attnum[LC_COUNT];
}			turn_rels;

static bool turn_rels_callback_registered = false;

static SPIPlanPtr recent_plan = NULL;

#define RECENT_SQL \
	"SELECT turn_id, request_id, created_at, finalized_at, question_neutral, answer_neutral," \
	"       question_translated, answer_translated, metadata" \
	"  FROM (SELECT * FROM convctx.turn" \
	"         WHERE " SESSION_KEY \
	"           AND finalized_at IS NOT NULL AND deleted_at IS NULL" \
	"           AND replaced_by_turn_id IS NULL AND turn_no OPERATOR(pg_catalog.<) $4" \
	"         ORDER BY turn_no DESC" \
	"         LIMIT LEAST($3, COALESCE((SELECT s.live_answers FROM convctx.session s" \
	"                WHERE s.tenant_id OPERATOR(pg_catalog.=) $1" \
	"                  AND s.session_id OPERATOR(pg_catalog.=) $2), $3))) recent" \
	" ORDER BY turn_no"

/* The recent turns of a session, newest first. */
typedef struct RecentTurns
{
	int			count;
	Datum	   *values;			/* count x RC_OUTPUT_COLUMNS */
	bool	   *nulls;
} RecentTurns;

static void
TurnRelsInvalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == turn_rels.relid || relid == turn_rels.indexid ||
		relid == turn_rels.session_relid || relid == turn_rels.session_indexid ||
		relid == turn_rels.list_indexid)
		turn_rels.valid = false;
}

static void
ReportWrongShape(const char *table)
{
	ereport(ERROR,
			errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			errmsg("table %s does not have the columns and index this version of convctx expects", table),
			errhint("Update the extension with ALTER EXTENSION convctx UPDATE."));
}

/* The number of a live column of rel with that name and type, or an error. */
static AttrNumber
ColumnOfType(Relation rel, const char *table, const char *name, Oid type)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
		{
			if (att->atttypid != type)
				break;
			return att->attnum;
		}
	}
	ReportWrongShape(table);
	return InvalidAttrNumber;	/* keep the compiler quiet */
}

/*
 * Whether index is a plain (not partial, no expressions) btree of relid on
 * exactly the nkeys (at most 3) columns given, in that order.
 */
static bool
IsBtreeOn(Relation index, Oid relid, int nkeys, AttrNumber key1, AttrNumber key2,
		  AttrNumber key3)
{
	AttrNumber	keys[3] = {key1, key2, key3};
	int			k;

	if (index->rd_index->indrelid != relid ||
		index->rd_rel->relam != BTREE_AM_OID ||
		IndexRelationGetNumberOfKeyAttributes(index) != nkeys ||
		!heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL) ||
		!heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, NULL))
		return false;
	for (k = 0; k < nkeys; k++)
		if (index->rd_index->indkey.values[k] != keys[k])
			return false;
	return true;
}

/*
 * Whether the direct read may trust index: it is valid, ready and live
 * (an index left by a failed CREATE INDEX CONCURRENTLY is none of these
 * and may miss rows), and each key column uses its type's default btree
 * operator class and the column's own collation, so that the index order
 * is the one the scan keys and the SQL query assume. When not, the read
 * goes through SQL, where the planner makes the same decisions.
 */
static bool
IndexTrusted(Relation index, Relation rel)
{
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	int			k;

	if (!index->rd_index->indisvalid || !index->rd_index->indisready ||
		!index->rd_index->indislive)
		return false;
	for (k = 0; k < nkeys; k++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel),
											  index->rd_index->indkey.values[k] - 1);

		if (index->rd_opcintype[k] != att->atttypid ||
			index->rd_indcollation[k] != att->attcollation ||
			index->rd_opfamily[k] !=
			get_opclass_family(GetDefaultOpClass(att->atttypid, BTREE_AM_OID)))
			return false;
	}
	return true;
}

/*
 * Whether index is session_identity_activity as the list's direct read
 * assumes: a btree of relid on (tenant_id, identity_id, activity_bin
 * DESC), no expressions, for the rows WHERE identity_id IS NOT NULL (the
 * only rows the list asks for).
 */
static bool
IsListIndex(Relation index, Oid relid)
{
	List	   *pred;
	NullTest   *nt;

	if (index->rd_index->indrelid != relid ||
		index->rd_rel->relam != BTREE_AM_OID ||
		IndexRelationGetNumberOfKeyAttributes(index) != 3 ||
		index->rd_index->indkey.values[0] != turn_rels.session_tenant_attnum ||
		index->rd_index->indkey.values[1] != turn_rels.list_attnum[LC_IDENTITY_ID] ||
		index->rd_index->indkey.values[2] != turn_rels.list_attnum[LC_ACTIVITY_BIN] ||
		(index->rd_indoption[0] & INDOPTION_DESC) != 0 ||
		(index->rd_indoption[1] & INDOPTION_DESC) != 0 ||
		(index->rd_indoption[2] & INDOPTION_DESC) == 0 ||
		!heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, NULL))
		return false;
	pred = RelationGetIndexPredicate(index);
	if (list_length(pred) != 1 || !IsA(linitial(pred), NullTest))
		return false;
	nt = (NullTest *) linitial(pred);
	return nt->nulltesttype == IS_NOT_NULL && IsA(nt->arg, Var) &&
		((Var *) nt->arg)->varattno == turn_rels.list_attnum[LC_IDENTITY_ID];
}

/*
 * Find convctx.relname and its index indexname (what names both in the
 * error) and open them: a missing one is the catalog of another version.
 */
static void
OpenWithIndex(Oid nsp, const char *relname, const char *indexname, const char *what,
			  Oid *relid, Oid *indexid, Relation *rel, Relation *index)
{
	*relid = get_relname_relid(relname, nsp);
	*indexid = get_relname_relid(indexname, nsp);
	if (!OidIsValid(*relid) || !OidIsValid(*indexid))
		ReportWrongShape(what);
	*rel = table_open(*relid, AccessShareLock);
	*index = index_open(*indexid, AccessShareLock);
}

/*
 * Find convctx.turn and turn_chronology, and check that they are what the
 * scan below assumes: a catalog left by another version must give an
 * error, not a misread row.
 */
static void
TurnRelsLookup(void)
{
	Oid			nsp = ConvctxNamespace();
	Relation	rel;
	Relation	index;
	int			c;

	if (!turn_rels_callback_registered)
	{
		CacheRegisterRelcacheCallback(TurnRelsInvalidate, (Datum) 0);
		turn_rels_callback_registered = true;
	}

	turn_rels.valid = false;
	OpenWithIndex(nsp, "turn", "turn_chronology", "convctx.turn",
				  &turn_rels.relid, &turn_rels.indexid, &rel, &index);

	for (c = 0; c < RC_COUNT; c++)
		turn_rels.attnum[c] = ColumnOfType(rel, "convctx.turn", recent_columns[c].name,
										   recent_columns[c].type);

	if (!IsBtreeOn(index, turn_rels.relid, 3, turn_rels.attnum[RC_TENANT_ID],
				   turn_rels.attnum[RC_SESSION_ID], turn_rels.attnum[RC_TURN_NO]))
		ReportWrongShape("convctx.turn");
	turn_rels.trusted = IndexTrusted(index, rel);

	index_close(index, NoLock);
	table_close(rel, NoLock);

	/* convctx.session and its primary key on (tenant_id, session_id). */
	OpenWithIndex(nsp, "session", "session_pkey", "convctx.session",
				  &turn_rels.session_relid, &turn_rels.session_indexid, &rel, &index);
	turn_rels.session_tenant_attnum = ColumnOfType(rel, "convctx.session", "tenant_id", TEXTOID);
	turn_rels.session_session_attnum = ColumnOfType(rel, "convctx.session", "session_id", TEXTOID);
	turn_rels.session_last_turn_attnum = ColumnOfType(rel, "convctx.session", "last_turn_no", INT8OID);
	turn_rels.session_live_answers_attnum = ColumnOfType(rel, "convctx.session", "live_answers", INT8OID);
	if (!IsBtreeOn(index, turn_rels.session_relid, 2, turn_rels.session_tenant_attnum,
				   turn_rels.session_session_attnum, InvalidAttrNumber))
		ReportWrongShape("convctx.session");
	turn_rels.trusted = turn_rels.trusted && IndexTrusted(index, rel);
	index_close(index, NoLock);

	/* and the list's index, session_identity_activity */
	for (c = 0; c < LC_COUNT; c++)
		turn_rels.list_attnum[c] = ColumnOfType(rel, "convctx.session", list_columns[c].name,
												list_columns[c].type);
	turn_rels.list_indexid = get_relname_relid("session_identity_activity", nsp);
	if (!OidIsValid(turn_rels.list_indexid))
		ReportWrongShape("convctx.session");
	index = index_open(turn_rels.list_indexid, AccessShareLock);
	turn_rels.list_trusted = IsListIndex(index, turn_rels.session_relid) && IndexTrusted(index, rel);
	index_close(index, NoLock);
	table_close(rel, NoLock);

	turn_rels.valid = true;
}

/* Slot for row i of rt (newest first). */
static inline Datum *
RowValues(RecentTurns *rt, int i)
{
	return rt->values + i * RC_OUTPUT_COLUMNS;
}

static inline bool *
RowNulls(RecentTurns *rt, int i)
{
	return rt->nulls + i * RC_OUTPUT_COLUMNS;
}

static void
RecentTurnsGrow(RecentTurns *rt, int *capacity, int32 limit)
{
	if (rt->count < *capacity)
		return;
	*capacity = (*capacity == 0) ? Min(limit, 16) : Min((int64) limit, (int64) *capacity * 2);
	if (rt->values == NULL)
	{
		rt->values = palloc(sizeof(Datum) * RC_OUTPUT_COLUMNS * *capacity);
		rt->nulls = palloc(sizeof(bool) * RC_OUTPUT_COLUMNS * *capacity);
	}
	else
	{
		rt->values = repalloc(rt->values, sizeof(Datum) * RC_OUTPUT_COLUMNS * *capacity);
		rt->nulls = repalloc(rt->nulls, sizeof(bool) * RC_OUTPUT_COLUMNS * *capacity);
	}
}

/*
 * Equality keys on the first two columns of index, (tenant_id, session_id),
 * in keys[0] and keys[1].
 */
static void
SessionScanKeys(ScanKeyData *keys, Relation index, text *tenant, text *session_id)
{
	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[0], F_TEXTEQ, PointerGetDatum(tenant));
	ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[1], F_TEXTEQ, PointerGetDatum(session_id));
}

/*
 * The session's newest turn number under the snapshot, read from its row,
 * -1 when the session has no row; and in *live its live answers (the
 * turns recent_turns can return), or -1 when unknown.
 */
static int64
SessionLastTurnNo(Relation srel, Relation sindex, Snapshot snapshot,
				  text *tenant, text *session_id, int64 *live)
{
	ScanKeyData keys[2];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	int64		last = -1;

	*live = -1;

	SessionScanKeys(keys, sindex, tenant, session_id);
	scan = index_beginscan(srel, sindex, snapshot, 2, 0);
	index_rescan(scan, keys, 2, NULL, 0);
	slot = table_slot_create(srel, NULL);
	if (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		d = slot_getattr(slot, turn_rels.session_last_turn_attnum, &isnull);

		if (!isnull)
			last = DatumGetInt64(d);
		d = slot_getattr(slot, turn_rels.session_live_answers_attnum, &isnull);
		if (!isnull)
			*live = DatumGetInt64(d);
	}
	ExecDropSingleTupleTableSlot(slot);
	index_endscan(scan);
	return last;
}

/*
 * Read the chronology index backwards, span by span of turn numbers (see
 * the head of this file). The rows are copied into the caller's memory
 * context, so they outlive the scan.
 */
static void
RecentTurnsByIndex(Relation rel, Relation index, Relation srel, Relation sindex,
				   text *tenant, text *session_id, int32 limit, int64 before, int64 live_hint,
				   RecentTurns *rt)
{
	Snapshot	snapshot = ActiveSnapshotSet() ? GetActiveSnapshot() : GetTransactionSnapshot();
	ScanKeyData keys[4];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	TupleDesc	desc = RelationGetDescr(rel);
	int			capacity = 0;
	int64		live;
	int64		last;
	int64		span;
	int64		upper = (before == PG_INT64_MAX) ? PG_INT64_MAX : before - 1;
	int64		lower;

	/*
	 * The caller that just numbered turn `before` under the session row's
	 * lock knows what the row says (begin_turn); else it is read.
	 */
	if (before != PG_INT64_MAX && live_hint >= 0)
	{
		last = before - 1;
		live = live_hint;
	}
	else
		last = SessionLastTurnNo(srel, sindex, snapshot, tenant, session_id, &live);

	/*
	 * No more turns than the session has: the scan stops at its oldest live
	 * answer instead of walking the tombstones below it (see the head of
	 * this file).
	 */
	if (live >= 0 && live < limit)
		limit = (int32) live;
	if (limit == 0 || upper < 1)
		return;
	/* Spans below the bound, when it is below the session's newest turn. */
	if (last > upper)
		last = upper;
	span = (int64) limit + 8;

	scan = index_beginscan(rel, index, snapshot, 4, 0);
	slot = table_slot_create(rel, NULL);
	/* index_rescan copies the keys: only the turn_no bounds change per span. */
	SessionScanKeys(keys, index, tenant, session_id);

	do
	{
		/*
		 * turn_no in (lower, upper]. Without a session row (never the case
		 * for a session with turns) the whole session is one span. The first
		 * span has no upper bound, so no turn is missed even if the row
		 * were behind.
		 */
		lower = (last < 0 || last - span <= 0) ? 0 : last - span;
		span = (span > PG_INT64_MAX / 4) ? PG_INT64_MAX : span * 4;

		ScanKeyEntryInitialize(&keys[2], 0, 3, BTGreaterStrategyNumber, InvalidOid,
							   InvalidOid, F_INT8GT, Int64GetDatum(lower));
		ScanKeyEntryInitialize(&keys[3], 0, 3, BTLessEqualStrategyNumber, InvalidOid,
							   InvalidOid, F_INT8LE, Int64GetDatum(upper));
		index_rescan(scan, keys, 4, NULL, 0);

		while (rt->count < limit && index_getnext_slot(scan, BackwardScanDirection, slot))
		{
			int			c;

			CHECK_FOR_INTERRUPTS();
			slot_getallattrs(slot);
			if (slot->tts_isnull[turn_rels.attnum[RC_FINALIZED_AT] - 1] ||
				!slot->tts_isnull[turn_rels.attnum[RC_DELETED_AT] - 1] ||
				!slot->tts_isnull[turn_rels.attnum[RC_REPLACED_BY] - 1])
				continue;

			/* Copies: the slot's values are only valid until it moves on. */
			RecentTurnsGrow(rt, &capacity, limit);
			for (c = 0; c < RC_OUTPUT_COLUMNS; c++)
			{
				int			a = turn_rels.attnum[c] - 1;
				Form_pg_attribute att = TupleDescAttr(desc, a);

				RowNulls(rt, rt->count)[c] = slot->tts_isnull[a];
				RowValues(rt, rt->count)[c] = slot->tts_isnull[a] ? (Datum) 0 :
					datumCopy(slot->tts_values[a], att->attbyval, att->attlen);
			}
			rt->count++;
		}
		upper = lower;
	} while (rt->count < limit && lower > 0);

	ExecDropSingleTupleTableSlot(slot);
	index_endscan(scan);
}

/* The same rows through the SQL query, under the caller's privileges. */
static void
RecentTurnsBySql(text *tenant, text *session_id, int32 limit, int64 before, RecentTurns *rt)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid			argtypes[4] = {TEXTOID, TEXTOID, INT8OID, INT8OID};
	Datum		values[4] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	Int64GetDatum(limit), Int64GetDatum(before)};
	int			capacity = 0;
	uint64		i;

	SPI_connect();
	SpiRunPlan(SpiKeptPlan(&recent_plan, RECENT_SQL, 4, argtypes), values, NULL,
			   true, 0, SPI_OK_SELECT);
	for (i = SPI_processed; i > 0; i--)
	{
		MemoryContext spi = MemoryContextSwitchTo(caller);
		HeapTuple	tuple = heap_copytuple(SPI_tuptable->vals[i - 1]);

		RecentTurnsGrow(rt, &capacity, limit);
		heap_deform_tuple(tuple, SPI_tuptable->tupdesc,
						  RowValues(rt, rt->count), RowNulls(rt, rt->count));
		rt->count++;
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
}

/* The turn and session tables and their indexes, open for a read. */
typedef struct TurnRels
{
	Relation	rel;
	Relation	index;
	Relation	srel;
	Relation	sindex;
} TurnRels;

/* Open the tables by the cached OIDs; a lock may bring an invalidation: redo. */
static void
TurnRelsOpen(TurnRels *r)
{
	for (;;)
	{
		if (!turn_rels.valid)
			TurnRelsLookup();
		r->rel = try_table_open(turn_rels.relid, AccessShareLock);
		r->srel = r->rel ? try_table_open(turn_rels.session_relid, AccessShareLock) : NULL;
		if (r->srel == NULL)
		{
			if (r->rel)
				table_close(r->rel, NoLock);
			turn_rels.valid = false;
			continue;
		}
		r->index = index_open(turn_rels.indexid, AccessShareLock);
		r->sindex = index_open(turn_rels.session_indexid, AccessShareLock);
		if (turn_rels.valid)
			return;
		index_close(r->sindex, NoLock);
		index_close(r->index, NoLock);
		table_close(r->srel, NoLock);
		table_close(r->rel, NoLock);
	}
}

static void
TurnRelsClose(TurnRels *r)
{
	index_close(r->sindex, NoLock);
	index_close(r->index, NoLock);
	table_close(r->srel, NoLock);
	table_close(r->rel, NoLock);
}

/*
 * Whether the open tables may be read directly: nothing but the owner's
 * rights apply (see the head of this file), the indexes are trusted, and
 * the tables hold their rows (on Citus they are empty shells: citus.c).
 */
static bool
TurnRelsDirect(void)
{
	return turn_rels.trusted && Variant()->rows_here &&
		pg_class_aclcheck(turn_rels.relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK &&
		pg_class_aclcheck(turn_rels.session_relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK &&
		check_enable_rls(turn_rels.relid, InvalidOid, true) != RLS_ENABLED &&
		check_enable_rls(turn_rels.session_relid, InvalidOid, true) != RLS_ENABLED;
}

/*
 * RecentTurnsRead's work, as the extension's owner: the direct read when
 * nothing but the owner's rights apply, else the SQL query.
 */
static void
RecentTurnsReadTables(text *tenant, text *session_id, int32 limit, int64 before,
					  int64 live_hint, RecentTurns *rt)
{
	TurnRels	r;

	TurnRelsOpen(&r);
	if (TurnRelsDirect())
		RecentTurnsByIndex(r.rel, r.index, r.srel, r.sindex, tenant, session_id, limit,
						   before, live_hint, rt);
	else
		RecentTurnsBySql(tenant, session_id, limit, before, rt);
	TurnRelsClose(&r);
}

/*
 * The last `limit` finalized, live, current-version turns of a session of
 * tenant numbered below before (PG_INT64_MAX: all), newest first.
 */
static void
RecentTurnsRead(text *tenant, text *session_id, int32 limit, int64 before, int64 live_hint,
				RecentTurns *rt)
{
	OwnerSwitch sw;

	rt->count = 0;
	rt->values = NULL;
	rt->nulls = NULL;

	ActAsOwner(&sw);
	PG_TRY();
	{
		RecentTurnsReadTables(tenant, session_id, limit, before, live_hint, rt);
	}
	PG_FINALLY();
	{
		ActAsCaller(&sw);
	}
	PG_END_TRY();
}

/*
 * A page of conversation_turns (browser.c) read the same way: the current
 * versions of the session's turns numbered after bound (forward) or
 * before it, limit of them, tombstones and open turns included. The index
 * is read in spans of turn numbers, as above, from bound towards the
 * session's newest turn (forward) or its first. Rows go into result
 * oldest first, as (turn_no, turn_id, request_id, record_version, true,
 * question, answer, created_at, finalized_at, redacted, redacted_at).
 */
static void
TurnPageByIndex(TurnRels *r, text *tenant, text *session_id, bool forward, int64 bound,
				int32 limit, Tuplestorestate *result, TupleDesc result_desc)
{
	Snapshot	snapshot = ActiveSnapshotSet() ? GetActiveSnapshot() : GetTransactionSnapshot();
	ScanKeyData keys[4];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	HeapTuple  *rows = palloc(sizeof(HeapTuple) * limit);
	int			count = 0;
	int64		live;			/* not needed here: tombstones are returned */
	int64		last = SessionLastTurnNo(r->srel, r->sindex, snapshot, tenant, session_id, &live);
	int64		span = (int64) limit + 8;
	int64		lower = 0;		/* the span: turn_no in [lower, upper] */
	int64		upper = 0;
	bool		done = false;
	TupleDesc	desc = RelationGetDescr(r->rel);
	Datum	   *values;
	bool	   *isnull;
	int			i;

	/*
	 * The session row only sizes the spans: without one (last < 0), or
	 * with the bound past its newest turn, the first span is open-ended,
	 * so the read returns what the SQL query would.
	 */
	if (forward)
	{
		if (bound == PG_INT64_MAX)
			return;
		lower = bound + 1;
	}
	else
	{
		if (bound == PG_INT64_MIN)
			return;
		upper = bound - 1;
	}

	scan = index_beginscan(r->rel, r->index, snapshot, 4, 0);
	slot = table_slot_create(r->rel, NULL);
	SessionScanKeys(keys, r->index, tenant, session_id);
	while (!done)
	{
		/*
		 * The next span. The one that reaches the session's newest turn
		 * (forward) or turn number 1 (backward) has no bound on that side,
		 * so that no turn is missed whatever the session row says.
		 */
		if (forward)
		{
			done = lower > last - span;
			upper = done ? PG_INT64_MAX : lower + span - 1;
		}
		else
		{
			int64		top = Min(upper, last);

			done = top <= span;
			lower = done ? PG_INT64_MIN : top - span + 1;
		}
		span = (span > PG_INT64_MAX / 4) ? PG_INT64_MAX / 4 : span * 4;

		ScanKeyEntryInitialize(&keys[2], 0, 3, BTGreaterEqualStrategyNumber, InvalidOid,
							   InvalidOid, F_INT8GE, Int64GetDatum(lower));
		ScanKeyEntryInitialize(&keys[3], 0, 3, BTLessEqualStrategyNumber, InvalidOid,
							   InvalidOid, F_INT8LE, Int64GetDatum(upper));
		index_rescan(scan, keys, 4, NULL, 0);
		while (count < limit &&
			   index_getnext_slot(scan, forward ? ForwardScanDirection : BackwardScanDirection, slot))
		{
			bool		current;

			CHECK_FOR_INTERRUPTS();
			(void) slot_getattr(slot, turn_rels.attnum[RC_REPLACED_BY], &current);
			if (!current)
				continue;		/* an earlier version of a corrected answer */
			rows[count++] = ExecCopySlotHeapTuple(slot);
		}
		if (count == limit)
			break;
		if (forward)
			lower = upper + 1;
		else
			upper = lower - 1;
	}
	ExecDropSingleTupleTableSlot(slot);
	index_endscan(scan);

	values = palloc(sizeof(Datum) * desc->natts);
	isnull = palloc(sizeof(bool) * desc->natts);
	for (i = 0; i < count; i++)
	{
		static const int columns[11] = {
			RC_TURN_NO, RC_TURN_ID, RC_REQUEST_ID, RC_RECORD_VERSION, -1, RC_QUESTION_NEUTRAL,
			RC_ANSWER_NEUTRAL, RC_CREATED_AT, RC_FINALIZED_AT, -1, RC_DELETED_AT
		};
		Datum		out[11];
		bool		nulls[11];
		int			c;

		/* one pass over the row: its text columns make each attribute's offset vary */
		heap_deform_tuple(rows[forward ? i : count - 1 - i], desc, values, isnull);
		for (c = 0; c < 11; c++)
			if (columns[c] >= 0)
			{
				out[c] = values[turn_rels.attnum[columns[c]] - 1];
				nulls[c] = isnull[turn_rels.attnum[columns[c]] - 1];
			}
		out[4] = BoolGetDatum(true);	/* current: the others were skipped */
		nulls[4] = false;
		out[9] = BoolGetDatum(!nulls[10]);	/* redacted: a tombstone has deleted_at */
		nulls[9] = false;
		tuplestore_putvalues(result, result_desc, out, nulls);
	}
}

/* TurnPageRead's work, as the extension's owner. */
static bool
TurnPageReadTables(text *tenant, text *session_id, bool forward, int64 bound, int32 limit,
				   Tuplestorestate *result, TupleDesc desc)
{
	TurnRels	r;
	bool		direct;

	TurnRelsOpen(&r);
	direct = TurnRelsDirect();
	if (direct)
		TurnPageByIndex(&r, tenant, session_id, forward, bound, limit, result, desc);
	TurnRelsClose(&r);
	return direct;
}

/*
 * conversation_turns' page of current versions of a session of tenant
 * (decided by the caller), read directly when nothing but the owner's
 * rights apply; false, with nothing read, when the caller must run its
 * SQL instead.
 */
bool
TurnPageRead(text *tenant, text *session_id, bool forward, int64 bound, int32 limit,
			 Tuplestorestate *result, TupleDesc desc)
{
	OwnerSwitch sw;
	volatile bool direct = false;

	ActAsOwner(&sw);
	PG_TRY();
	{
		direct = TurnPageReadTables(tenant, session_id, forward, bound, limit, result, desc);
	}
	PG_FINALLY();
	{
		ActAsCaller(&sw);
	}
	PG_END_TRY();
	return direct;
}

/* Collation "C" order of two texts: bytes, then length. */
static int
TextCmpC(text *a, text *b)
{
	int			la = VARSIZE_ANY_EXHDR(a);
	int			lb = VARSIZE_ANY_EXHDR(b);
	int			c = memcmp(VARDATA_ANY(a), VARDATA_ANY(b), Min(la, lb));

	return c != 0 ? c : (la > lb) - (la < lb);
}

/* The list's order: newest activity first, then session id (bins follow the activity). */
static int
ListRowCmp(const void *a, const void *b)
{
	const ListPageRow *x = (const ListPageRow *) a;
	const ListPageRow *y = (const ListPageRow *) b;

	if (x->last_activity_at != y->last_activity_at)
		return x->last_activity_at > y->last_activity_at ? -1 : 1;
	return TextCmpC(x->session_id, y->session_id);
}

/*
 * A page of list_conversations (browser.c) read from index
 * session_identity_activity directly: the identity's sessions whose
 * activity comes before the cursor (after_activity, after_session; the
 * first page has infinity and ""), page_size of them, in the list's order.
 * The index holds activity_bin, the last activity rounded down to ten
 * minutes, in descending order: the scan reads whole bins, from the
 * cursor's down, until it holds a page, and sorts what it read by the
 * exact time. Every session of a bin newer than the last one read was
 * read, so the first page_size rows are exactly the page. A session row
 * holds all a page shows (the title's start, first_question, and
 * linked_later), so nothing else is read.
 */
static void
ListPageByIndex(Relation srel, Relation lindex, text *tenant, text *identity,
				TimestampTz after_activity, text *after_session, int32 page_size,
				ListPageRow **rows_out, int *count_out)
{
	Snapshot	snapshot = ActiveSnapshotSet() ? GetActiveSnapshot() : GetTransactionSnapshot();
	ScanKeyData keys[3];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	TupleDesc	desc = RelationGetDescr(srel);
	int			size = page_size + 16;
	ListPageRow *rows = palloc(sizeof(ListPageRow) * size);
	int			count = 0;
	bool		full = false;
	TimestampTz full_bin = 0;
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	bool	   *isnull = palloc(sizeof(bool) * desc->natts);

	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   lindex->rd_indcollation[0], F_TEXTEQ, PointerGetDatum(tenant));
	ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   lindex->rd_indcollation[1], F_TEXTEQ, PointerGetDatum(identity));
	/* a bin is never after the activity it holds: no bin after the cursor's */
	ScanKeyEntryInitialize(&keys[2], 0, 3, BTLessEqualStrategyNumber, InvalidOid,
						   InvalidOid, F_TIMESTAMPTZ_LE, TimestampTzGetDatum(after_activity));
	scan = index_beginscan(srel, lindex, snapshot, 3, 0);
	index_rescan(scan, keys, 3, NULL, 0);
	slot = table_slot_create(srel, NULL);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		ListPageRow *r;
		TimestampTz bin;
		TimestampTz activity;
		text	   *session_id;

		CHECK_FOR_INTERRUPTS();
		slot_getallattrs(slot);
		if (slot->tts_isnull[turn_rels.list_attnum[LC_ACTIVITY_BIN] - 1] ||
			slot->tts_isnull[turn_rels.list_attnum[LC_LAST_ACTIVITY_AT] - 1] ||
			slot->tts_isnull[turn_rels.list_attnum[LC_SESSION_ID] - 1])
			continue;			/* not a row the API writes; the SQL query skips it too */
		bin = DatumGetTimestampTz(slot->tts_values[turn_rels.list_attnum[LC_ACTIVITY_BIN] - 1]);
		/* a page in hand, and its last bin read to the end */
		if (full && bin < full_bin)
			break;
		activity = DatumGetTimestampTz(slot->tts_values[turn_rels.list_attnum[LC_LAST_ACTIVITY_AT] - 1]);
		session_id = DatumGetTextPP(slot->tts_values[turn_rels.list_attnum[LC_SESSION_ID] - 1]);
		/* listed already: at or after the cursor */
		if (!(activity < after_activity ||
			  (activity == after_activity && TextCmpC(session_id, after_session) > 0)))
			continue;
		if (count == size)
		{
			size *= 2;
			rows = repalloc(rows, sizeof(ListPageRow) * size);
		}
		/* one pass over the row, copied into this memory */
		heap_deform_tuple(ExecCopySlotHeapTuple(slot), desc, values, isnull);
		r = &rows[count++];
		r->session_id = DatumGetTextPP(values[turn_rels.list_attnum[LC_SESSION_ID] - 1]);
		r->title = isnull[turn_rels.list_attnum[LC_TITLE] - 1] ? NULL :
			DatumGetTextPP(values[turn_rels.list_attnum[LC_TITLE] - 1]);
		r->first_question = isnull[turn_rels.list_attnum[LC_FIRST_QUESTION] - 1] ? NULL :
			DatumGetTextPP(values[turn_rels.list_attnum[LC_FIRST_QUESTION] - 1]);
		r->created_at = DatumGetTimestampTz(values[turn_rels.list_attnum[LC_CREATED_AT] - 1]);
		r->last_activity_at = activity;
		r->live_turns = DatumGetInt64(values[turn_rels.list_attnum[LC_LIVE_TURNS] - 1]);
		r->linked_later = !isnull[turn_rels.list_attnum[LC_LINKED_LATER] - 1] &&
			DatumGetBool(values[turn_rels.list_attnum[LC_LINKED_LATER] - 1]);
		if (count == page_size)
		{
			full = true;
			full_bin = bin;
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	index_endscan(scan);

	qsort(rows, count, sizeof(ListPageRow), ListRowCmp);
	*rows_out = rows;
	*count_out = Min(count, page_size);
}

/* ListPageRead's work, as the extension's owner. */
static bool
ListPageReadTables(text *tenant, text *identity, TimestampTz after_activity, text *after_session,
				   int32 page_size, ListPageRow **rows, int *count)
{
	Relation	srel;
	Relation	lindex;

	for (;;)
	{
		if (!turn_rels.valid)
			TurnRelsLookup();
		srel = try_table_open(turn_rels.session_relid, AccessShareLock);
		if (srel == NULL)
		{
			turn_rels.valid = false;
			continue;
		}
		lindex = index_open(turn_rels.list_indexid, AccessShareLock);
		if (turn_rels.valid)
			break;
		index_close(lindex, NoLock);
		table_close(srel, NoLock);
	}
	if (!(turn_rels.list_trusted && Variant()->rows_here &&
		  pg_class_aclcheck(turn_rels.session_relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK &&
		  check_enable_rls(turn_rels.session_relid, InvalidOid, true) != RLS_ENABLED))
	{
		index_close(lindex, NoLock);
		table_close(srel, NoLock);
		return false;
	}
	ListPageByIndex(srel, lindex, tenant, identity, after_activity, after_session, page_size,
					rows, count);
	index_close(lindex, NoLock);
	table_close(srel, NoLock);
	return true;
}

/*
 * list_conversations' page of the sessions of tenant (decided by the
 * caller) linked to identity, read directly when nothing but the owner's
 * rights apply; false, with nothing read, when the caller must run its
 * SQL instead (on Citus, with row-level security forced, or with an index
 * that is not the one this version made).
 */
bool
ListPageRead(text *tenant, text *identity, TimestampTz after_activity, text *after_session,
			 int32 page_size, ListPageRow **rows, int *count)
{
	OwnerSwitch sw;
	volatile bool direct = false;

	*rows = NULL;
	*count = 0;
	ActAsOwner(&sw);
	PG_TRY();
	{
		direct = ListPageReadTables(tenant, identity, after_activity, after_session, page_size,
									rows, count);
	}
	PG_FINALLY();
	{
		ActAsCaller(&sw);
	}
	PG_END_TRY();
	return direct;
}

PG_FUNCTION_INFO_V1(convctx_recent_turns);

/*
 * recent_turns(session_id, turn_limit) -> setof (turn_id, request_id, ...)
 */
Datum
convctx_recent_turns(PG_FUNCTION_ARGS)
{
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	int32		limit = ArgLimit(fcinfo, 1, "turn_limit");
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RecentTurns rt;
	int			i;

	/* The row type the caller expects, when it says so: no catalog lookup. */
	InitMaterializedSRF(fcinfo, (rsinfo && IsA(rsinfo, ReturnSetInfo) && rsinfo->expectedDesc)
						? MAT_SRF_USE_EXPECTED_DESC : 0);
	if (rsinfo->setDesc->natts != RC_OUTPUT_COLUMNS)
		elog(ERROR, "recent_turns is declared with %d result columns, expected %d",
			 rsinfo->setDesc->natts, RC_OUTPUT_COLUMNS);

	RecentTurnsRead(CurrentTenant(), session_id, limit, PG_INT64_MAX, -1, &rt);
	for (i = rt.count - 1; i >= 0; i--)
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, RowValues(&rt, i), RowNulls(&rt, i));

	return (Datum) 0;
}

/*
 * The prompt history: the last `limit` finalized, live, current-version
 * turns of a session of tenant numbered below before (PG_INT64_MAX: all),
 * as a jsonb array of {"question_neutral", "answer_neutral"}, oldest first.
 * live_answers: the session row's count when the caller holds the row's
 * lock since it numbered turn `before`, else -1.
 */
Jsonb *
RecentHistory(text *tenant, text *session_id, int32 limit, int64 before, int64 live_answers)
{
	JsonbParseState *state = NULL;
	RecentTurns rt;
	int			i;

	RecentTurnsRead(tenant, session_id, limit, before, live_answers, &rt);

	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (i = rt.count - 1; i >= 0; i--)
	{
		static const char *const keys[2] = {"question_neutral", "answer_neutral"};
		static const RecentColumn columns[2] = {RC_QUESTION_NEUTRAL, RC_ANSWER_NEUTRAL};
		int			k;

		pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
		for (k = 0; k < 2; k++)
		{
			JsonbPushKey(&state, keys[k]);
			if (RowNulls(&rt, i)[columns[k]])
				JsonbPushNull(&state, WJB_VALUE);
			else
				JsonbPushText(&state, WJB_VALUE, DatumGetTextPP(RowValues(&rt, i)[columns[k]]));
		}
		pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	}
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_ARRAY, NULL));
}

PG_FUNCTION_INFO_V1(convctx_recent_turns_json);

/*
 * recent_turns_json(session_id, turn_limit) -> jsonb array of
 * {"question_neutral", "answer_neutral"}, oldest first.
 */
Datum
convctx_recent_turns_json(PG_FUNCTION_ARGS)
{
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	int32		limit = ArgLimit(fcinfo, 1, "turn_limit");

	PG_RETURN_JSONB_P(RecentHistory(CurrentTenant(), session_id, limit, PG_INT64_MAX, -1));
}
