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
 * src/turns/recent_turns.c
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

#include "core/common.h"
#include "core/args.h"
#include "core/jsonb_util.h"
#include "core/owner.h"
#include "core/spi_plans.h"
#include "turns/recent_turns.h"
#include "core/tenancy.h"
#include "turns/turn_rels.h"

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
