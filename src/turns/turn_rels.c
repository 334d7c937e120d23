/*-------------------------------------------------------------------------
 *
 * turn_rels.c
 *	  convctx.turn, convctx.session and their indexes as the direct reads
 *	  (recent_turns.c, browser_pages.c) find, check and open them.
 *
 * The direct reads walk an index and read the heap without SPI. They may
 * only when the relations are what this version of convctx created: the
 * columns of the expected types, the indexes btrees on the expected
 * columns with the default operators and collations (IndexTrusted), and
 * nothing but the owner's rights applying (TurnRelsDirect). What was
 * found is kept until a relcache invalidation of any of them.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns/turn_rels.c
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

#include "core/catalog.h"
#include "turns/turn_rels.h"
#include "core/variant.h"

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

TurnRelsCache turn_rels;

static bool turn_rels_callback_registered = false;

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
void
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

/*
 * Equality keys on the first two columns of index, (tenant_id, session_id),
 * in keys[0] and keys[1].
 */
void
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
int64
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


/* Open the tables by the cached OIDs; a lock may bring an invalidation: redo. */
void
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

void
TurnRelsClose(TurnRels *r)
{
	index_close(r->sindex, NoLock);
	index_close(r->index, NoLock);
	table_close(r->srel, NoLock);
	table_close(r->rel, NoLock);
}

/*
 * Whether the open tables may be read directly: nothing but the owner's
 * rights apply (see the head of recent_turns.c), the indexes are trusted, and
 * the tables hold their rows (on Citus they are empty shells: citus.c).
 */
bool
TurnRelsDirect(void)
{
	return turn_rels.trusted && Variant()->rows_here &&
		pg_class_aclcheck(turn_rels.relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK &&
		pg_class_aclcheck(turn_rels.session_relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK &&
		check_enable_rls(turn_rels.relid, InvalidOid, true) != RLS_ENABLED &&
		check_enable_rls(turn_rels.session_relid, InvalidOid, true) != RLS_ENABLED;
}
