/*-------------------------------------------------------------------------
 *
 * turn_rels.h
 *	  convctx.turn, convctx.session and their indexes as the direct reads
 *	  find and open them (turn_rels.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns/turn_rels.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_TURN_RELS_H
#define CONVCTX_TURN_RELS_H

#include "postgres.h"

#include "access/skey.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

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

/*
 * convctx.turn and its chronology index as this backend last found them;
 * a relcache invalidation of either (ALTER, DROP, a new extension) makes
 * the next call look them up and check them again.
 */
typedef struct TurnRelsCache
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
} TurnRelsCache;

extern TurnRelsCache turn_rels;

/* The turn and session tables and their indexes, open for a read. */
typedef struct TurnRels
{
	Relation	rel;
	Relation	index;
	Relation	srel;
	Relation	sindex;
} TurnRels;

extern void TurnRelsLookup(void);
extern void TurnRelsOpen(TurnRels *r);
extern void TurnRelsClose(TurnRels *r);
extern bool TurnRelsDirect(void);
extern void SessionScanKeys(ScanKeyData *keys, Relation index, text *tenant, text *session_id);
extern int64 SessionLastTurnNo(Relation srel, Relation sindex, Snapshot snapshot, text *tenant, text *session_id, int64 *live);

#endif							/* CONVCTX_TURN_RELS_H */
