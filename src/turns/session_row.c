/*-------------------------------------------------------------------------
 *
 * session_row.c
 *	  The convctx.session row of a conversation as the turn writers use it:
 *	  its lock, its answer count, and where this transaction last put it.
 *
 * Every writer of a session's turns locks this row first (docs/locking.md)
 * and keeps the live turn and answer counts it carries exact. A
 * transaction that writes many turns of one session finds the row at the
 * place it last put it (session_place), by its tuple id, instead of
 * walking every version of it through session_pkey.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns/session_row.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "storage/itemptr.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/uuid.h"

#include "core/common.h"
#include "core/spi_plans.h"
#include "turns/session_row.h"
#include "core/variant.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr session_lock_plan, count_answer_plan,
			count_answer_at_plan;

#define SESSION_LOCK_SQL \
	"SELECT 1 FROM convctx.session" \
	" WHERE " SESSION_KEY \
	" FOR UPDATE"

/* $3: the change of the answer count (-1 gives back one counted in vain). */
#define COUNT_ANSWER_WHERE(w) \
	"UPDATE convctx.session SET live_answers = live_answers OPERATOR(pg_catalog.+) $3" \
	" WHERE " w \
	" RETURNING ctid"
#define COUNT_ANSWER_SQL COUNT_ANSWER_WHERE(SESSION_KEY)
#define COUNT_ANSWER_AT_SQL COUNT_ANSWER_WHERE(SESSION_ROW_AT("$4"))

/*
 * Where this transaction last put a session's row: its tuple id. A
 * transaction that writes many turns of one session (a batch, a migration
 * replaying a history through the API, a test) finds the row there, by a
 * TID scan. Through session_pkey each statement would walk every version
 * of the row the transaction wrote, none of which can be pruned before it
 * ends, and every turn would cost more than the one before. A place that
 * is out of date (a later statement moved the row, the subtransaction
 * that put it there rolled back) finds no row, and the statement runs
 * again by the key. Not on Citus, whose shards hold the rows.
 */
static struct
{
	TransactionId xid;
	char	   *key;			/* tenant, '\0', session; in TopMemoryContext */
	Size		keylen;
	ItemPointerData tid;
}			session_place;

bool
SessionPlaceGet(text *tenant, text *session_id, Datum *tid)
{
	TransactionId xid = GetTopTransactionIdIfAny();
	Size		tl = VARSIZE_ANY_EXHDR(tenant);
	Size		sl = VARSIZE_ANY_EXHDR(session_id);

	if (!TransactionIdIsValid(xid) || xid != session_place.xid ||
		session_place.keylen != tl + 1 + sl ||
		memcmp(session_place.key, VARDATA_ANY(tenant), tl) != 0 ||
		memcmp(session_place.key + tl + 1, VARDATA_ANY(session_id), sl) != 0 ||
		!Variant()->rows_here)
		return false;
	*tid = PointerGetDatum(&session_place.tid);
	return true;
}

/* The row is at tid now (column col of the last result's first row). */
void
SessionPlaceSet(text *tenant, text *session_id, int col)
{
	Size		tl = VARSIZE_ANY_EXHDR(tenant);
	Size		sl = VARSIZE_ANY_EXHDR(session_id);
	bool		isnull;
	Datum		tid = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);

	if (isnull)
		return;
	if (session_place.keylen != tl + 1 + sl ||
		memcmp(session_place.key, VARDATA_ANY(tenant), tl) != 0 ||
		memcmp(session_place.key + tl + 1, VARDATA_ANY(session_id), sl) != 0)
	{
		if (session_place.key)
			pfree(session_place.key);
		session_place.key = MemoryContextAlloc(TopMemoryContext, tl + 1 + sl);
		memcpy(session_place.key, VARDATA_ANY(tenant), tl);
		session_place.key[tl] = '\0';
		memcpy(session_place.key + tl + 1, VARDATA_ANY(session_id), sl);
		session_place.keylen = tl + 1 + sl;
	}
	session_place.xid = GetTopTransactionIdIfAny();
	ItemPointerCopy((ItemPointer) DatumGetPointer(tid), &session_place.tid);
}

/*
 * Lock a session's row until the end of the transaction, as start_turn
 * does, so that no turn of the session is added or replaced meanwhile.
 * Returns false when the session does not exist. SPI must be connected.
 */
bool
SessionLock(text *tenant, text *session_id)
{
	SpiRunSessionPlan(&session_lock_plan, SESSION_LOCK_SQL, tenant, session_id,
					  false, 0, SPI_OK_SELECT);
	return SPI_processed > 0;
}

/*
 * Add delta to the session's answer count, locking its row; false when the
 * session does not exist. SPI must be connected.
 */
bool
CountAnswer(text *tenant, text *session_id, int64 delta)
{
	Oid			argtypes[4] = {TEXTOID, TEXTOID, INT8OID, TIDOID};
	Datum		values[4] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	Int64GetDatum(delta), (Datum) 0};

	SPI_processed = 0;
	if (SessionPlaceGet(tenant, session_id, &values[3]))
		SpiRunPlan(SpiKeptPlan(&count_answer_at_plan, COUNT_ANSWER_AT_SQL, 4, argtypes),
				   values, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 0)
		SpiRunPlan(SpiKeptPlan(&count_answer_plan, COUNT_ANSWER_SQL, 3, argtypes),
				   values, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 0)
		return false;
	SessionPlaceSet(tenant, session_id, 1);
	return true;
}
