/*-------------------------------------------------------------------------
 *
 * erasure.c
 *	  Erasure: erase_identity, and the stand-in an erased identity becomes
 *	  wherever it was stored (ErasedIdentity).
 *
 * Concurrency rules (the lock order itself is in docs/locking.md):
 *	- erase_identity locks the sessions linked to the identity and the
 *	  sessions of the contexts saved with it, strictly in session_id order
 *	  (EraseLockSessions looks them up again after each lock and, when a new
 *	  one sorts before one it holds, gives its locks back and starts over;
 *	  after three times it leaves such a newcomer alone, never locking out
 *	  of order),
 *	  and then erases exactly the set it locked, never looking the links up
 *	  again: a turn of any of them either committed before the lock (and is
 *	  erased) or waits for the erasure to commit. A session linked after the
 *	  last lookup is linked after the erasure.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/lifecycle/erasure.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "core/common.h"
#include "core/args.h"
#include "core/audit.h"
#include "core/spi_plans.h"
#include "core/writable.h"
#include "lifecycle/erasure.h"
#include "core/idmap.h"
#include "core/jsonb_util.h"
#include "core/metadata.h"
#include "prompt/prompt_state.h"
#include "core/companion.h"
#include "lifecycle/redaction.h"
#include "core/settings.h"
#include "core/tenancy.h"
#include "core/variant.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr erase_find_plan, erase_lock_plan, erase_lock_one_plan, erase_sessions_plan,
			erase_links_plan, erase_turns_plan, erase_tombstones_plan, erase_contexts_plan,
			erase_audit_plan;

/*
 * erase_identity. $1 is the tenant, $2 the identities to look for (the
 * identity, and the keyed stand-ins of an earlier erasure of it), $3 the
 * identity: the sessions linked to them and the sessions whose context
 * was saved with the identity as user_id (the contexts are deleted below,
 * and a context row is locked only under its session's lock), in
 * session_id order, each with whether it is linked. Locks nothing.
 * Whether a row is linked is an IN (subquery), looked up in a hash table:
 * "= ANY (array)" outside an index condition compares with every element,
 * which made an erasure quadratic in the identity's sessions.
 */
#define ERASE_FIND_SQL \
	"WITH l AS (SELECT session_id FROM convctx.session_link" \
	"            WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"              AND identity_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]))," \
	" c AS (SELECT conversation_id FROM convctx.conversation_context" \
	"        WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND user_id OPERATOR(pg_catalog.=) $3)" \
	"SELECT s.session_id, s.session_id IN (SELECT session_id FROM l)" \
	"  FROM convctx.session s" \
	" WHERE s.tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND (s.session_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT session_id FROM l))" \
	"        OR s.session_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT conversation_id FROM c)))" \
	" ORDER BY s.session_id"

/* Lock the sessions $2 of tenant $1 in session_id order. */
#define ERASE_LOCK_SQL \
	"SELECT session_id FROM convctx.session" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])" \
	" ORDER BY session_id FOR UPDATE"

/* The same for one session, $2 (on Citus). */
#define ERASE_LOCK_ONE_SQL \
	"SELECT session_id FROM convctx.session WHERE " SESSION_KEY " FOR UPDATE"

/*
 * The statements below act on $2, the sessions locked, and never look the
 * links up again; $3 is what the identity becomes. Each statement handles
 * the whole set at once, one index probe per session, planned for the
 * array it is given (SpiKeptCustomPlan). The sessions stay
 * linked (to the stand-in: not capped, not expired, and linking them to
 * any identity is refused), with a new redaction generation, no live turn
 * left (ERASE_TURNS_SQL makes every one a tombstone) and no summary
 * (PromptForgetSessions).
 */
#define ERASE_SESSIONS_SQL \
	"UPDATE convctx.session SET redactions = redactions OPERATOR(pg_catalog.+) 1, identity_id = $3," \
	"       title = NULL, first_question = NULL, live_turns = 0, live_answers = 0," \
	"       summary_through_turn_no = NULL" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])"

#define ERASE_LINKS_SQL \
	"UPDATE convctx.session_link SET identity_id = $3" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])"

/* Every live turn becomes a tombstone; returns how many turns (not versions). */
#define ERASE_TURNS_SQL \
	"WITH r AS (UPDATE convctx.turn t" TOMBSTONE_SET("s.redactions") "," \
	"         identity_id = CASE WHEN t.identity_id IS NULL THEN NULL ELSE $3 END" \
	"  FROM convctx.session s" \
	"  WHERE s.tenant_id OPERATOR(pg_catalog.=) $1" \
	"    AND s.session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])" \
	"    AND t.tenant_id OPERATOR(pg_catalog.=) s.tenant_id" \
	"    AND t.session_id OPERATOR(pg_catalog.=) s.session_id" \
	"    AND t.deleted_at IS NULL" \
	"  RETURNING t.session_id, t.turn_no)" \
	" SELECT pg_catalog.count(*) FROM (SELECT DISTINCT session_id, turn_no FROM r) x"

/* Tombstones made before (by a redaction) name the identity too. */
#define ERASE_TOMBSTONES_SQL \
	"UPDATE convctx.turn SET identity_id = $3" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND session_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])" \
	"   AND identity_id OPERATOR(pg_catalog.<>) $3"

/*
 * The contexts of the sessions locked, and the contexts saved with the
 * identity as user_id that have no session row (stored before 0.4.0, when
 * a context did not create one); $3 is the identity (IN, not "= ANY", for
 * the reason given at ERASE_FIND_SQL). A context saved with
 * the identity in a session that was not locked was saved after the
 * erasure's last pass, like a session linked after it.
 */
#define ERASE_CONTEXTS_SQL \
	"DELETE FROM convctx.conversation_context c" \
	" WHERE c.tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND (c.conversation_id IN (SELECT pg_catalog.unnest($2::pg_catalog.text[]))" \
	"        OR (c.user_id OPERATOR(pg_catalog.=) $3" \
	"            AND NOT EXISTS (SELECT 1 FROM convctx.session s" \
	"                 WHERE s.tenant_id OPERATOR(pg_catalog.=) c.tenant_id" \
	"                   AND s.session_id OPERATOR(pg_catalog.=) c.conversation_id)))"

/*
 * The audit rows that name the identity ($2), in identity_id or as one of
 * the identities of a refused link in details (AUDIT_IDENTITY_KEYS), name
 * the stand-in ($3) instead. Other values of details (a turn id, a role
 * name) are left alone, whatever they equal.
 */
#define AUDIT_IDENTITY_KEYS \
	" '{linked_identity_id,requested_identity_id}'::pg_catalog.text[]"
#define AUDIT_NAMES_IDENTITY(e) \
	" (" e ".key OPERATOR(pg_catalog.=) ANY (" AUDIT_IDENTITY_KEYS ")" \
	"  AND " e ".value OPERATOR(pg_catalog.=) pg_catalog.to_jsonb($2::pg_catalog.text))"
#define ERASE_AUDIT_SQL \
	"UPDATE convctx.audit_log a" \
	"   SET identity_id = CASE WHEN a.identity_id OPERATOR(pg_catalog.=) $2 THEN $3" \
	"                          ELSE a.identity_id END," \
	"       details = CASE WHEN pg_catalog.jsonb_typeof(a.details) OPERATOR(pg_catalog.=) 'object'" \
	"         THEN COALESCE((SELECT pg_catalog.jsonb_object_agg(e.key," \
	"                 CASE WHEN" AUDIT_NAMES_IDENTITY("e") \
	"                      THEN pg_catalog.to_jsonb($3::pg_catalog.text) ELSE e.value END)" \
	"               FROM pg_catalog.jsonb_each(a.details) e), '{}'::pg_catalog.jsonb)" \
	"         ELSE a.details END" \
	" WHERE a.tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND (a.identity_id OPERATOR(pg_catalog.=) $2" \
	"        OR (pg_catalog.jsonb_typeof(a.details) OPERATOR(pg_catalog.=) 'object'" \
	"            AND EXISTS (SELECT 1 FROM pg_catalog.jsonb_each(a.details) e" \
	"                         WHERE" AUDIT_NAMES_IDENTITY("e") ")))"

/*
 * What an erased identity becomes wherever it was stored: "erased:" and
 * the hex HMAC-SHA256 under convctx.identity_hash_key of the tenant id, a
 * zero byte and the identity (a text holds no zero byte, so no two pairs
 * give the same input), so that the audit trail can still tell one erased
 * identity from another (and a later erasure of the same identity finds
 * it); without a key, the same marker "erased" for every identity. The
 * tenant is part of it so that an administrator of one tenant cannot
 * confirm a guess about another tenant's identities by erasing the guess
 * in their own tenant and comparing stand-ins.
 */
text *
ErasedIdentity(text *tenant, text *identity_id)
{
	StringInfoData data;

	if (convctx_identity_hash_key == NULL || convctx_identity_hash_key[0] == '\0')
		return cstring_to_text("erased");
	initStringInfo(&data);
	appendBinaryStringInfo(&data, VARDATA_ANY(tenant), VARSIZE_ANY_EXHDR(tenant));
	appendStringInfoChar(&data, '\0');
	appendBinaryStringInfo(&data, VARDATA_ANY(identity_id), VARSIZE_ANY_EXHDR(identity_id));
	return cstring_to_text(psprintf("erased:%s",
									KeyedHashHex(convctx_identity_hash_key, data.data, data.len)));
}

/*
 * The stand-in erasures wrote before 0.5.0, the same in every tenant: the
 * HMAC of the identity alone. Only looked for, never written. NULL without
 * a key.
 */
text *
LegacyErasedIdentity(text *identity_id)
{
	if (convctx_identity_hash_key == NULL || convctx_identity_hash_key[0] == '\0')
		return NULL;
	return cstring_to_text(psprintf("erased:%s",
									KeyedHashHex(convctx_identity_hash_key,
												 VARDATA_ANY(identity_id),
												 VARSIZE_ANY_EXHDR(identity_id))));
}

PG_FUNCTION_INFO_V1(convctx_erased_identity_for_update);

/*
 * erased_identity_0_5(tenant, identity_id) -> text: ErasedIdentity, for
 * the update to 0.5.0 alone, which creates the function, finishes with it
 * the erasures made before 0.3.0 and drops it again. Callable only from an
 * extension script: whoever could call it could confirm a guess of an
 * erased identity by comparing stand-ins.
 */
Datum
convctx_erased_identity_for_update(PG_FUNCTION_ARGS)
{
	if (!creating_extension)
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("only ALTER EXTENSION convctx UPDATE may compute an erased identity's stand-in"));
	PG_RETURN_TEXT_P(ErasedIdentity(PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1)));
}

/* Is identity the stand-in erase_identity leaves ("erased", "erased:<hex>")? */
bool
IsErasedIdentity(text *identity)
{
	int			len = VARSIZE_ANY_EXHDR(identity);
	const char *s = VARDATA_ANY(identity);

	return (len == 6 && memcmp(s, "erased", 6) == 0) || (len > 7 && memcmp(s, "erased:", 7) == 0);
}

/* A session id of the SPI tuple table, copied into cxt. */
static text *
SessionIdCopy(int row, MemoryContext cxt)
{
	bool		isnull;
	text	   *id = DatumGetTextPP(SPI_getbinval(SPI_tuptable->vals[row],
												  SPI_tuptable->tupdesc, 1, &isnull));
	text	   *copy = (text *) MemoryContextAlloc(cxt, VARSIZE_ANY(id));

	memcpy(copy, id, VARSIZE_ANY(id));
	return copy;
}

/* Add the session id, locked, to the map held and raise *max_held. */
static void
EraseHeld(text *id, idmap_hash *held, text **max_held)
{
	bool		found;

	(void) IdMapInsert(held, VARDATA_ANY(id), VARSIZE_ANY_EXHDR(id), &found);
	if (*max_held == NULL || TextCmpC(id, *max_held) > 0)
		*max_held = id;
}

/*
 * Lock the sessions ids[0..n-1] (sorted), adding those locked to the map
 * held and raising *max_held. SPI must be connected.
 */
static void
EraseLockSome(text *tenant, text **ids, int n, idmap_hash *held, text **max_held,
			  MemoryContext cxt)
{
	Oid			argtypes[2] = {TEXTOID, TEXTARRAYOID};
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	Datum		values[2];
	uint64		i;
	int			j;

	/*
	 * Citus cannot lock rows of several shards in one statement: one
	 * session at a time, in the same order.
	 */
	if (Variant()->one_shard_statements)
	{
		for (j = 0; j < n; j++)
		{
			SpiRunSessionPlan(&erase_lock_one_plan, ERASE_LOCK_ONE_SQL, tenant, ids[j],
							  false, 0, SPI_OK_SELECT);
			if (SPI_processed > 0)
				EraseHeld(SessionIdCopy(0, cxt), held, max_held);
		}
		return;
	}
	for (j = 0; j < n; j++)
		elems[j] = PointerGetDatum(ids[j]);
	values[0] = PointerGetDatum(tenant);
	values[1] = PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
	SpiRunPlan(SpiKeptCustomPlan(&erase_lock_plan, ERASE_LOCK_SQL, 2, argtypes),
			   values, NULL, false, 0, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
		EraseHeld(SessionIdCopy(i, cxt), held, max_held);
}

/* How often erase_identity starts its locking over in session_id order. */
#define ERASE_MAX_RESTARTS 3

/* The sessions of a lookup (ERASE_FIND_SQL), in session_id order. */
typedef struct EraseFound
{
	int			n;
	text	  **ids;
	bool	   *is_linked;		/* linked to the identity (else only its context names it) */
} EraseFound;

/* Look the sessions up (ERASE_FIND_SQL), copied into cxt. */
static void
EraseFind(SPIPlanPtr plan, Datum *values, MemoryContext cxt, EraseFound *found)
{
	int			i;

	SpiRunPlan(plan, values, NULL, false, 0, SPI_OK_SELECT);
	found->n = (int) SPI_processed;
	found->ids = palloc(sizeof(text *) * Max(found->n, 1));
	found->is_linked = palloc(sizeof(bool) * Max(found->n, 1));
	for (i = 0; i < found->n; i++)
	{
		bool		isnull;

		found->ids[i] = SessionIdCopy(i, cxt);
		found->is_linked[i] = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i],
														 SPI_tuptable->tupdesc, 2, &isnull));
	}
}

/*
 * What to lock after a lookup: the index of the first session found to
 * lock, -1 when there is none left to lock (the locking is done); with
 * *in_order false when that session sorts before one held, and every lock
 * must be taken again in order.
 */
static int
EraseNextToLock(EraseFound *found, idmap_hash *held, text *max_held, int restarts,
				bool *in_order)
{
	int			first_new = -1;
	int			i;

	*in_order = true;
	/* Sorted: the first session not held is the smallest new one. */
	for (i = 0; i < found->n && first_new < 0; i++)
		if (IdMapLookup(held, VARDATA_ANY(found->ids[i]), VARSIZE_ANY_EXHDR(found->ids[i])) == NULL)
			first_new = i;
	if (first_new < 0)
		return -1;
	/*
	 * A session sorting before one held means starting over in order; a
	 * few times at most, so that sessions created while it waits cannot
	 * keep the erasure from finishing. Past that, such a session is left
	 * alone, as one linked after the erasure (it was linked or given a
	 * context while the erasure ran): a lock taken out of order could close
	 * a cycle with any transaction that locks sessions in order, another
	 * erasure first. The newcomers that sort after every session held are
	 * still locked.
	 */
	if (max_held != NULL && TextCmpC(found->ids[first_new], max_held) < 0)
	{
		if (restarts < ERASE_MAX_RESTARTS)
			*in_order = false;
		else
		{
			while (first_new < found->n && TextCmpC(found->ids[first_new], max_held) <= 0)
				first_new++;
			if (first_new == found->n)
				return -1;
		}
	}
	return first_new;
}

/*
 * The sessions found that are held (those left alone are not), as a
 * text[] Datum; *linked the same of those linked to the identity, and
 * *nlinked_out their number.
 */
static Datum
EraseHeldSessions(EraseFound *found, idmap_hash *held, Datum *linked, uint64 *nlinked_out)
{
	Datum	   *all = palloc(sizeof(Datum) * Max(found->n, 1));
	Datum	   *linked_ids = palloc(sizeof(Datum) * Max(found->n, 1));
	int			nall = 0;
	int			nlinked = 0;
	int			i;

	for (i = 0; i < found->n; i++)
	{
		text	   *id = found->ids[i];

		if (IdMapLookup(held, VARDATA_ANY(id), VARSIZE_ANY_EXHDR(id)) == NULL)
			continue;
		all[nall++] = PointerGetDatum(id);
		if (found->is_linked[i])
			linked_ids[nlinked++] = PointerGetDatum(id);
	}
	*linked = PointerGetDatum(construct_array(linked_ids, nlinked, TEXTOID, -1, false, TYPALIGN_INT));
	*nlinked_out = nlinked;
	return PointerGetDatum(construct_array(all, nall, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * Lock the sessions of an identity in the tenant (ERASE_FIND_SQL), always
 * in session_id order, so that two erasures, or an erasure and any
 * transaction that follows the lock order, never deadlock. A link or
 * context committed while the erasure waited for a lock is invisible to
 * the statement that waited, so the sessions are looked up again after
 * every lock, until a lookup finds none that it may still lock; the
 * sessions of that last lookup that are held are the set erased (a
 * context may change hands meanwhile, so the set can also shrink).
 * New sessions that sort after every session held are simply locked next;
 * when one sorts before, locking it now would break the order, so every
 * lock is given back (the locks live in a subtransaction, rolled back)
 * and the whole set is locked again in order, at most ERASE_MAX_RESTARTS
 * times; after that such a session is left alone, as linked after the
 * erasure. No lock is ever taken out of order. Returns the session ids as
 * a text[] Datum in the caller's context, sets *linked to those linked to
 * the identity (whose turns are erased; the others only lose their
 * context) and *nlinked_out to their number. SPI must be connected.
 */
static Datum
EraseLockSessions(text *tenant, Datum identities, text *identity_id,
				  Datum *linked, uint64 *nlinked_out)
{
	Oid			argtypes[3] = {TEXTOID, TEXTARRAYOID, TEXTOID};
	Datum		values[3] = {PointerGetDatum(tenant), identities, PointerGetDatum(identity_id)};
	SPIPlanPtr	plan = SpiKeptPlan(&erase_find_plan, ERASE_FIND_SQL, 3, argtypes);
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	idmap_hash *held = idmap_create(cxt, 16, NULL);
	text	   *max_held = NULL;
	EraseFound	found = {0, NULL, NULL};
	int			restarts = 0;
	volatile bool in_subxact;

	BeginInternalSubTransaction(NULL);
	in_subxact = true;
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		for (;;)
		{
			bool		in_order;
			int			first_new;

			EraseFind(plan, values, cxt, &found);
			first_new = EraseNextToLock(&found, held, max_held, restarts, &in_order);
			if (first_new < 0)
				break;
			if (in_order)
				EraseLockSome(tenant, found.ids + first_new, found.n - first_new, held,
							  &max_held, cxt);
			else
			{
				/* Give every lock back, then take them all in order. */
				restarts++;
				in_subxact = false;
				RollbackAndReleaseCurrentSubTransaction();
				MemoryContextSwitchTo(cxt);
				CurrentResourceOwner = owner;
				BeginInternalSubTransaction(NULL);
				in_subxact = true;
				MemoryContextSwitchTo(cxt);
				idmap_reset(held);
				max_held = NULL;
				EraseLockSome(tenant, found.ids, found.n, held, &max_held, cxt);
			}
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		/* Leave no subtransaction behind for the caller's handler to meet. */
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		if (in_subxact)
			RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ReThrowError(edata);
	}
	PG_END_TRY();
	/* The locks now belong to the caller's transaction. */
	ReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;

	/* The sessions of the last lookup that are held: the ones left alone are not. */
	return EraseHeldSessions(&found, held, linked, nlinked_out);
}

/*
 * Erase the locked sessions linked to the identity (a text[] of at least
 * one): the sessions and links name the erased stand-in, the turns become
 * tombstones, the prompt data goes. Returns how many turns became
 * tombstones. SPI must be connected.
 */
static int64
EraseLinkedSessions(text *tenant, Datum sessions, text *erased)
{
	Oid			argtypes[3] = {TEXTOID, TEXTARRAYOID, TEXTOID};
	Datum		values[3] = {PointerGetDatum(tenant), sessions, PointerGetDatum(erased)};
	int64		turns;

	SpiRunPlan(SpiKeptCustomPlan(&erase_sessions_plan, ERASE_SESSIONS_SQL, 3, argtypes),
			   values, NULL, false, 0, SPI_OK_UPDATE);
	SpiRunPlan(SpiKeptCustomPlan(&erase_turns_plan, ERASE_TURNS_SQL, 3, argtypes),
			   values, NULL, false, 0, SPI_OK_SELECT);
	turns = SpiFirstInt8();
	SpiRunPlan(SpiKeptCustomPlan(&erase_tombstones_plan, ERASE_TOMBSTONES_SQL, 3,
								 argtypes),
			   values, NULL, false, 0, SPI_OK_UPDATE);
	SpiRunPlan(SpiKeptCustomPlan(&erase_links_plan, ERASE_LINKS_SQL, 3, argtypes),
			   values, NULL, false, 0, SPI_OK_UPDATE);
	PromptForgetSessions(tenant, sessions);
	CompanionForgetSessions(tenant, sessions);
	return turns;
}

/*
 * Erase an identity (erase_identity): lock its sessions, erase them, drop
 * the contexts of every session locked, take the identity out of the
 * audit log and write the audit row. Returns the tombstones made.
 */
static int64
EraseIdentity(text *tenant, text *identity_id)
{
	text	   *erased = ErasedIdentity(tenant, identity_id);
	text	   *erased_before = LegacyErasedIdentity(identity_id);
	Datum		idents[3] = {PointerGetDatum(identity_id), PointerGetDatum(erased),
	PointerGetDatum(erased_before)};
	Oid			argtypes[3] = {TEXTOID, TEXTARRAYOID, TEXTOID};
	Datum		values[3];
	Oid			audit_types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		audit_values[3] = {PointerGetDatum(tenant), PointerGetDatum(identity_id),
	PointerGetDatum(erased)};
	Datum		sessions;
	uint64		nsessions;
	int64		turns = 0;
	JsonbParseState *details = NULL;

	SPI_connect();

	/*
	 * The keyed stand-ins of an earlier erasure (and of one before 0.5.0)
	 * are looked for too: turns added to those sessions since are the
	 * identity's as well. The unkeyed marker is every erased identity's, so
	 * it is not.
	 */
	values[1] = EraseLockSessions(tenant,
								  PointerGetDatum(construct_array(idents, erased_before ? 3 : 1, TEXTOID,
																  -1, false, TYPALIGN_INT)),
								  identity_id, &sessions, &nsessions);
	if (nsessions > 0)
		turns = EraseLinkedSessions(tenant, sessions, erased);
	/* The contexts of every session locked, linked or not. */
	values[0] = PointerGetDatum(tenant);
	values[2] = PointerGetDatum(identity_id);
	SpiRunPlan(SpiKeptCustomPlan(&erase_contexts_plan, ERASE_CONTEXTS_SQL, 3, argtypes),
			   values, NULL, false, 0, SPI_OK_DELETE);
	pushJsonbValue(&details, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(&details, "sessions");
	JsonbPushInt(&details, WJB_VALUE, nsessions);
	JsonbPushKey(&details, "turns");
	JsonbPushInt(&details, WJB_VALUE, turns);
	JsonbPushKey(&details, "contexts");
	JsonbPushInt(&details, WJB_VALUE, SPI_processed);
	SpiRunPlan(SpiKeptPlan(&erase_audit_plan, ERASE_AUDIT_SQL, 3, audit_types),
			   audit_values, NULL, false, 0, SPI_OK_UPDATE);
	JsonbPushKey(&details, "audit_rows");
	JsonbPushInt(&details, WJB_VALUE, SPI_processed);
	AuditWrite(tenant, "erase_identity", NULL, erased, JsonbEndObjectText(&details));
	SPI_finish();
	return turns;
}

PG_FUNCTION_INFO_V1(convctx_erase_identity);

/*
 * erase_identity(identity_id) -> bigint
 *
 * Locks the identity's sessions first (EraseLockSessions), then erases
 * exactly that set: their turns become tombstones, their prompt data and
 * contexts go, and no row keeps the identity in clear. Returns how many
 * turns became tombstones.
 */
Datum
convctx_erase_identity(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(erase_identity);
	text	   *identity_id = ArgRequiredId(fcinfo, 0, "identity_id");
	text	   *tenant = CurrentTenant();

	PG_RETURN_INT64(EraseIdentity(tenant, identity_id));
}
