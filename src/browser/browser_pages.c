/*-------------------------------------------------------------------------
 *
 * browser_pages.c
 *	  The pages of the conversation browser (browser.c) read from the
 *	  indexes directly: conversation_turns' and list_conversations'.
 *
 * They read as recent_turns.c does, when the same conditions hold
 * (turn_rels.c), and return false otherwise, so that browser.c runs its
 * SQL instead.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/browser/browser_pages.c
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
#include "browser/browser_pages.h"
#include "core/owner.h"
#include "turns/turn_rels.h"
#include "core/variant.h"

/*
 * The rows of a page (read newest first when !forward) into result, oldest
 * first, in conversation_turns' columns.
 */
static void
TurnPagePut(HeapTuple *rows, int count, bool forward, TupleDesc desc,
			Tuplestorestate *result, TupleDesc result_desc)
{
	static const int columns[11] = {
		RC_TURN_NO, RC_TURN_ID, RC_REQUEST_ID, RC_RECORD_VERSION, -1, RC_QUESTION_NEUTRAL,
		RC_ANSWER_NEUTRAL, RC_CREATED_AT, RC_FINALIZED_AT, -1, RC_DELETED_AT
	};
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	bool	   *isnull = palloc(sizeof(bool) * desc->natts);
	int			i;

	for (i = 0; i < count; i++)
	{
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

/*
 * A page of conversation_turns (browser.c) read the same way: the current
 * versions of the session's turns numbered after bound (forward) or
 * before it, limit of them, tombstones and open turns included. The index
 * is read in spans of turn numbers, as recent_turns.c reads it, from bound
 * towards the session's newest turn (forward) or its first. Rows go into result
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
	TurnPagePut(rows, count, forward, RelationGetDescr(r->rel), result, result_desc);
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
