/*-------------------------------------------------------------------------
 *
 * context_store.c
 *	  The per-conversation context store: load, save and add.
 *
 * Concurrency: context_add is one INSERT ... ON CONFLICT DO UPDATE whose
 * update merges into the row version it has locked, so concurrent adds to
 * one conversation serialize on that row and none of their ids is lost.
 * context_save replaces the whole snapshot: the last writer wins, as the
 * caller asked.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/context_store.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/jsonb.h"

#include "convctx.h"

static SPIPlanPtr context_load_plan = NULL;
static SPIPlanPtr context_save_plan = NULL;
static SPIPlanPtr context_add_plan = NULL;

#define CONTEXT_LOAD_SQL \
	"SELECT context_json FROM convctx.conversation_context" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"   AND conversation_id OPERATOR(pg_catalog.=) $2"

#define CONTEXT_SAVE_SQL \
	"INSERT INTO convctx.conversation_context AS c" \
	"       (tenant_id, conversation_id, context_json, user_id)" \
	" VALUES ($1, $2, $3, $4)" \
	" ON CONFLICT (tenant_id, conversation_id) DO UPDATE" \
	" SET context_json = EXCLUDED.context_json," \
	"     user_id = COALESCE(EXCLUDED.user_id, c.user_id)," \
	"     updated_at = pg_catalog.now()"

#define CONTEXT_ADD_SQL \
	"INSERT INTO convctx.conversation_context AS c" \
	"       (tenant_id, conversation_id, context_json, user_id)" \
	" VALUES ($1, $2, convctx.context_merge(NULL::pg_catalog.jsonb, $3, $5), $4)" \
	" ON CONFLICT (tenant_id, conversation_id) DO UPDATE" \
	" SET context_json = convctx.context_merge(c.context_json, $3, $5)," \
	"     user_id = COALESCE(EXCLUDED.user_id, c.user_id)," \
	"     updated_at = pg_catalog.now()" \
	" RETURNING context_json"

PG_FUNCTION_INFO_V1(convctx_context_load);

/*
 * context_load(conversation_id text) -> jsonb: the stored context of the
 * current tenant's conversation, or NULL when there is none.
 */
Datum
convctx_context_load(PG_FUNCTION_ARGS)
{
	text	   *conversation_id = ArgRequiredId(fcinfo, 0, "conversation_id");
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2];
	SPIPlanPtr	plan;
	Datum		result = (Datum) 0;
	bool		isnull = true;

	values[0] = PointerGetDatum(CurrentTenant());
	values[1] = PointerGetDatum(conversation_id);

	SPI_connect();
	plan = SpiKeptPlan(&context_load_plan, CONTEXT_LOAD_SQL, 2, argtypes);
	SpiRunPlan(plan, values, NULL, true, 1, SPI_OK_SELECT);
	if (SPI_processed > 0)
	{
		result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			result = SPI_datumTransfer(result, false, -1);
	}
	SPI_finish();

	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}

PG_FUNCTION_INFO_V1(convctx_context_save);

/*
 * context_save(conversation_id text, ctx jsonb, user_id text) -> void:
 * validate ctx and store it as the conversation's full snapshot.
 */
Datum
convctx_context_save(PG_FUNCTION_ARGS)
{
	text	   *conversation_id = ArgRequiredId(fcinfo, 0, "conversation_id");
	text	   *user_id = ArgOptionalId(fcinfo, 2, "user_id");
	Jsonb	   *ctx;
	Oid			argtypes[4] = {TEXTOID, TEXTOID, JSONBOID, TEXTOID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	SPIPlanPtr	plan;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("context must not be null"),
				errhint("Save '{\"activeNodeIds\": []}' for an empty context."));
	ctx = PG_GETARG_JSONB_P(1);
	ContextCheckShape(ctx);

	values[0] = PointerGetDatum(CurrentTenant());
	values[1] = PointerGetDatum(conversation_id);
	values[2] = PointerGetDatum(ctx);
	values[3] = PointerGetDatum(user_id);
	if (user_id == NULL)
		nulls[3] = 'n';

	SPI_connect();
	plan = SpiKeptPlan(&context_save_plan, CONTEXT_SAVE_SQL, 4, argtypes);
	SpiRunPlan(plan, values, nulls, false, 0, SPI_OK_INSERT);
	SPI_finish();

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
	text	   *conversation_id = ArgRequiredId(fcinfo, 0, "conversation_id");
	text	   *user_id = ArgOptionalId(fcinfo, 2, "user_id");
	Oid			argtypes[5] = {TEXTOID, TEXTOID, TEXTARRAYOID, TEXTOID, INT4OID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	SPIPlanPtr	plan;
	Datum		result;
	bool		isnull;

	values[0] = PointerGetDatum(CurrentTenant());
	values[1] = PointerGetDatum(conversation_id);
	if (PG_ARGISNULL(1))
	{
		values[2] = (Datum) 0;
		nulls[2] = 'n';
	}
	else
	{
		ArrayType  *ids = PG_GETARG_ARRAYTYPE_P(1);

		/* Checked here so the error does not come from inside the statement. */
		if (ARR_NDIM(ids) > 1)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("node ids must be a one-dimensional array"));
		values[2] = PointerGetDatum(ids);
	}
	values[3] = PointerGetDatum(user_id);
	if (user_id == NULL)
		nulls[3] = 'n';
	values[4] = Int32GetDatum(convctx_max_active_nodes);

	SPI_connect();
	plan = SpiKeptPlan(&context_add_plan, CONTEXT_ADD_SQL, 5, argtypes);
	SpiRunPlan(plan, values, nulls, false, 0, SPI_OK_INSERT_RETURNING);
	if (SPI_processed != 1)
		elog(ERROR, "context_add affected " UINT64_FORMAT " rows", SPI_processed);
	result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	result = SPI_datumTransfer(result, false, -1);
	SPI_finish();

	PG_RETURN_DATUM(result);
}
