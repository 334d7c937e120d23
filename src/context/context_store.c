/*-------------------------------------------------------------------------
 *
 * context_store.c
 *	  The per-conversation context store: load, save and add.
 *
 * Concurrency (docs/locking.md has the lock order of every function):
 * a conversation's context belongs to the session of the same id, so
 * context_save and context_add lock that session's row first, creating it
 * when it does not exist, exactly as start_turn does, and stamp its last
 * activity; only then do they write the context row. Both are one
 * statement: a CTE upserts the session row, the INSERT ... ON CONFLICT DO
 * UPDATE of the context reads from it. A request that calls them before
 * or after start_turn, finalize_turn or record_retrieval therefore takes
 * its rows in the same order as every other function, and cannot deadlock
 * with them, with erase_identity or with purge. context_add's update
 * merges into the row version it has locked, so concurrent adds to one
 * conversation serialize and none of their ids is lost. context_save
 * replaces the whole snapshot: the last writer wins, as the caller asked.
 *
 * A conversation that only ever stores a context therefore has a session
 * row without turns: purge deletes that row convctx.session_ttl after its
 * last activity but leaves the context to convctx.context_ttl
 * (EMPTIED_SESSIONS_SQL in purge.c); the next write creates the row
 * again.
 *
 * Limits (54000, nothing written): a node id has at most
 * CONVCTX_MAX_ID_BYTES, a stored context at most convctx.max_text_bytes;
 * context_add keeps at most convctx.max_active_nodes ids, a setting only
 * superusers change.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/context/context_store.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "core/common.h"
#include "core/args.h"
#include "context/context.h"
#include "context/context_store.h"
#include "core/settings.h"
#include "core/spi_plans.h"
#include "core/tenancy.h"
#include "core/variant.h"
#include "core/writable.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr context_load_plan, context_load_locked_plan, context_save_plan,
			context_add_plan, context_lock_plan, context_upsert_plan;

#define CONTEXT_LOAD_SQL \
	"SELECT context_json FROM convctx.conversation_context" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND conversation_id OPERATOR(pg_catalog.=) $2"

/*
 * The same for context_add on Citus, after the session row's lock: a
 * statement of its own (so its snapshot follows the lock) that locks the
 * context row too, as the single server's upsert does, so that purge's
 * context pass (SKIP LOCKED) cannot delete it between the read and the
 * write.
 */
#define CONTEXT_LOAD_LOCKED_SQL CONTEXT_LOAD_SQL " FOR UPDATE"

/*
 * The anchor of the conversation: lock its session row, creating it when
 * it does not exist (as start_turn does), and stamp its activity. The
 * statements below read from this CTE, so it runs before they touch the
 * context row.
 */
#define CONTEXT_SESSION_CTE \
	"WITH s AS (INSERT INTO convctx.session AS s (tenant_id, session_id) VALUES ($1, $2)" \
	" ON CONFLICT (tenant_id, session_id) DO UPDATE SET" SESSION_ACTIVITY_UPSERT \
	" RETURNING 1)"

/* CONTEXT_SESSION_CTE alone (on Citus: ContextAddDistributed). */
#define CONTEXT_LOCK_SQL \
	"INSERT INTO convctx.session AS s (tenant_id, session_id) VALUES ($1, $2)" \
	" ON CONFLICT (tenant_id, session_id) DO UPDATE SET" SESSION_ACTIVITY_UPSERT

/*
 * The context's times are the transaction's start (as now() gives), $5 of
 * CONTEXT_SAVE_SQL and $6 of CONTEXT_ADD_SQL: passed, because on Citus
 * the insert may run on another node, in a transaction of its own.
 */
/*
 * CONTEXT_SAVE_SQL's insert alone, after CONTEXT_LOCK_SQL (on Citus, which
 * sends an INSERT ... SELECT to every node but this to one shard).
 */
#define CONTEXT_UPSERT_SQL \
	"INSERT INTO convctx.conversation_context AS c" \
	"       (tenant_id, conversation_id, context_json, user_id, created_at, updated_at)" \
	" VALUES ($1, $2, $3, $4, $5, $5)" \
	" ON CONFLICT (tenant_id, conversation_id) DO UPDATE" \
	" SET context_json = EXCLUDED.context_json," \
	"     user_id = COALESCE(EXCLUDED.user_id, c.user_id)," \
	"     updated_at = EXCLUDED.updated_at"

#define CONTEXT_SAVE_SQL \
	CONTEXT_SESSION_CTE \
	" INSERT INTO convctx.conversation_context AS c" \
	"       (tenant_id, conversation_id, context_json, user_id, created_at, updated_at)" \
	" SELECT $1, $2, $3, $4, $5, $5 FROM s" \
	" ON CONFLICT (tenant_id, conversation_id) DO UPDATE" \
	" SET context_json = EXCLUDED.context_json," \
	"     user_id = COALESCE(EXCLUDED.user_id, c.user_id)," \
	"     updated_at = EXCLUDED.updated_at"

#define CONTEXT_ADD_SQL \
	CONTEXT_SESSION_CTE \
	" INSERT INTO convctx.conversation_context AS c" \
	"       (tenant_id, conversation_id, context_json, user_id, created_at, updated_at)" \
	" SELECT $1, $2, convctx.context_merge(NULL::pg_catalog.jsonb, $3, $5), $4, $6, $6 FROM s" \
	" ON CONFLICT (tenant_id, conversation_id) DO UPDATE" \
	" SET context_json = convctx.context_merge(c.context_json, $3, $5)," \
	"     user_id = COALESCE(EXCLUDED.user_id, c.user_id)," \
	"     updated_at = EXCLUDED.updated_at" \
	" RETURNING context_json"

/* 54000 when a context to store is larger than convctx.max_text_bytes. */
static void
CheckContextSize(Datum ctx)
{
	CheckMaxTextBytes(toast_raw_datum_size(ctx) - VARHDRSZ, "context is too large", "It has");
}

/* 54000 when a node id of a context object (shape already checked) is too long. */
static void
CheckContextNodeIds(Jsonb *ctx)
{
	JsonbValue	ids;
	int			n;
	int			i;

	if (getKeyJsonValueFromContainer(&ctx->root, CONVCTX_ACTIVE_NODE_IDS,
									 strlen(CONVCTX_ACTIVE_NODE_IDS), &ids) == NULL ||
		ids.type != jbvBinary || !JsonContainerIsArray(ids.val.binary.data))
		return;
	n = JsonContainerSize(ids.val.binary.data);
	for (i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(ids.val.binary.data, i);

		if (v != NULL && v->type == jbvString)
			CheckIdLength(v->val.string.len, "node id");
	}
}

/* 54000 when an element of a text array of node ids is too long. */
static void
CheckNodeIdArray(ArrayType *ids)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;

	deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (i = 0; i < n; i++)
	{
		int			len;

		if (nulls[i])
			continue;
		len = VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i]));
		CheckIdLength(len, "node id");
	}
}

/*
 * The stored context of the tenant's conversation, copied out of SPI, or
 * NULL when there is none.
 */
Jsonb *
ContextLoad(text *tenant, text *conversation_id, bool after_lock)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {PointerGetDatum(tenant), PointerGetDatum(conversation_id)};
	Datum		result = (Datum) 0;
	bool		isnull = true;

	SPI_connect();
	if (after_lock)
		SpiRunPlan(SpiKeptPlan(&context_load_locked_plan, CONTEXT_LOAD_LOCKED_SQL, 2, argtypes),
				   values, NULL, false, 1, SPI_OK_SELECT);
	else
		SpiRunPlan(SpiKeptPlan(&context_load_plan, CONTEXT_LOAD_SQL, 2, argtypes),
				   values, NULL, true, 1, SPI_OK_SELECT);
	if (SPI_processed > 0)
		result = SpiFirstDatumCopy(1, &isnull);
	SPI_finish();
	return isnull ? NULL : DatumGetJsonbP(result);
}

/*
 * Store ctx (already checked) as the conversation's full snapshot, after
 * locking (or creating) its session row (on Citus unless !lock: the caller
 * holds it).
 */
static void
ContextSave(text *tenant, text *conversation_id, Jsonb *ctx, text *user_id, bool lock)
{
	Oid			argtypes[5] = {TEXTOID, TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[5] = {PointerGetDatum(tenant), PointerGetDatum(conversation_id),
		PointerGetDatum(ctx), PointerGetDatum(user_id),
	TimestampTzGetDatum(GetCurrentTransactionStartTimestamp())};
	char		nulls[5] = {' ', ' ', ' ', user_id ? ' ' : 'n', ' '};

	SPI_connect();
	if (Variant()->one_shard_statements)
	{
		if (lock)
			SpiRunPlan(SpiKeptPlan(&context_lock_plan, CONTEXT_LOCK_SQL, 2, argtypes),
					   values, NULL, false, 0, SPI_OK_INSERT);
		SpiRunPlan(SpiKeptPlan(&context_upsert_plan, CONTEXT_UPSERT_SQL, 5, argtypes),
				   values, nulls, false, 0, SPI_OK_INSERT);
	}
	else
		SpiRunPlan(SpiKeptPlan(&context_save_plan, CONTEXT_SAVE_SQL, 5, argtypes),
				   values, nulls, false, 0, SPI_OK_INSERT);
	SPI_finish();
}

/*
 * Merge ids (checked; NULL merges nothing) into the conversation's stored
 * context, or a new one, in one statement after locking (or creating) its
 * session row, and return the merged context.
 */
static Datum
ContextAddLocal(text *tenant, text *conversation_id, ArrayType *ids, text *user_id)
{
	Oid			argtypes[6] = {TEXTOID, TEXTOID, TEXTARRAYOID, TEXTOID, INT4OID, TIMESTAMPTZOID};
	Datum		values[6] = {PointerGetDatum(tenant), PointerGetDatum(conversation_id),
		PointerGetDatum(ids), PointerGetDatum(user_id), Int32GetDatum(convctx_max_active_nodes),
	TimestampTzGetDatum(GetCurrentTransactionStartTimestamp())};
	char		nulls[6] = {' ', ' ', ids ? ' ' : 'n', user_id ? ' ' : 'n', ' ', ' '};
	Datum		result;
	bool		isnull;

	SPI_connect();
	SpiRunPlan(SpiKeptPlan(&context_add_plan, CONTEXT_ADD_SQL, 6, argtypes),
			   values, nulls, false, 0, SPI_OK_INSERT_RETURNING);
	if (SPI_processed != 1)
		elog(ERROR, "context_add affected " UINT64_FORMAT " rows", SPI_processed);
	result = SpiFirstDatumCopy(1, &isnull);
	/* After the merge, which only the statement sees: the error rolls it back. */
	CheckContextSize(result);
	SPI_finish();
	return result;
}

/*
 * The same on Citus, which cannot run a function that is not immutable in
 * the DO UPDATE of an upsert: lock (or create) the session row, read the
 * context, which every writer changes only under that lock, merge it here
 * and store the result.
 */
static Datum
ContextAddDistributed(text *tenant, text *conversation_id, ArrayType *ids, text *user_id)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {PointerGetDatum(tenant), PointerGetDatum(conversation_id)};
	Jsonb	   *merged;

	SPI_connect();
	SpiRunPlan(SpiKeptPlan(&context_lock_plan, CONTEXT_LOCK_SQL, 2, argtypes),
			   values, NULL, false, 0, SPI_OK_INSERT);
	SPI_finish();
	merged = ContextMerge(ContextLoad(tenant, conversation_id, true), ids, convctx_max_active_nodes);
	CheckContextSize(JsonbPGetDatum(merged));
	ContextSave(tenant, conversation_id, merged, user_id, false);
	return JsonbPGetDatum(merged);
}

static Datum
ContextAdd(text *tenant, text *conversation_id, ArrayType *ids, text *user_id)
{
	if (Variant()->one_shard_statements)
		return ContextAddDistributed(tenant, conversation_id, ids, user_id);
	return ContextAddLocal(tenant, conversation_id, ids, user_id);
}

PG_FUNCTION_INFO_V1(convctx_context_load);

/*
 * context_load(conversation_id text) -> jsonb: the stored context of the
 * current tenant's conversation, or NULL when there is none.
 */
Datum
convctx_context_load(PG_FUNCTION_ARGS)
{
	text	   *conversation_id = ArgRequiredId(fcinfo, 0, "conversation_id");
	Jsonb	   *ctx = ContextLoad(CurrentTenant(), conversation_id, false);

	if (ctx == NULL)
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(ctx);
}

PG_FUNCTION_INFO_V1(convctx_context_save);

/*
 * context_save(conversation_id text, ctx jsonb, user_id text) -> void:
 * validate ctx and store it as the conversation's full snapshot.
 */
Datum
convctx_context_save(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(context_save);
	text	   *conversation_id = ArgRequiredId(fcinfo, 0, "conversation_id");
	text	   *user_id = ArgOptionalId(fcinfo, 2, "user_id");
	Jsonb	   *ctx;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("context must not be null"),
				errhint("Save '{\"activeNodeIds\": []}' for an empty context."));
	CheckContextSize(PG_GETARG_DATUM(1));
	ctx = PG_GETARG_JSONB_P(1);
	ContextCheckShape(ctx);
	CheckContextNodeIds(ctx);

	ContextSave(CurrentTenant(), conversation_id, ctx, user_id, true);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(convctx_context_add);

/*
 * context_add(conversation_id text, node_ids text[], user_id text) -> jsonb:
 * merge node_ids into the stored context (or a new one) in one statement
 * and return the result.
 */
Datum
convctx_context_add(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(context_add);
	text	   *conversation_id = ArgRequiredId(fcinfo, 0, "conversation_id");
	text	   *user_id = ArgOptionalId(fcinfo, 2, "user_id");
	ArrayType  *ids = PG_ARGISNULL(1) ? NULL : PG_GETARG_ARRAYTYPE_P(1);

	/* Checked here so the error does not come from inside the statement. */
	if (ids != NULL)
	{
		if (ARR_NDIM(ids) > 1)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("node ids must be a one-dimensional array"));
		CheckNodeIdArray(ids);
	}
	PG_RETURN_DATUM(ContextAdd(CurrentTenant(), conversation_id, ids, user_id));
}
