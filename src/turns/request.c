/*-------------------------------------------------------------------------
 *
 * request.c
 *	  A chat request in two calls: begin_turn, which starts the turn and
 *	  returns what the prompt needs, then finalize_turn (turns.c).
 *
 * begin_turn is start_turn, recent_turns_json and context_load in one
 * call: the turn is started first (its session row locked until the end of
 * the transaction, as start_turn leaves it), then the history and the
 * context are read under a snapshot taken after that lock, so that they
 * hold every turn committed before this one was numbered, as a separate
 * recent_turns statement would. The history is the turns before this one:
 * for a repeated request, the same pairs its first call returned unless
 * some were redacted or corrected meanwhile, never a later turn.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns/request.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/snapmgr.h"

#include "core/args.h"
#include "context/context_store.h"
#include "core/writable.h"
#include "turns/recent_turns.h"
#include "core/tenancy.h"
#include "turns/turns.h"

/* The columns begin_turn returns, in order. */
enum
{
	BT_TURN_ID,
	BT_REPEATED,
	BT_ANSWER_NEUTRAL,
	BT_ANSWER_TRANSLATED,
	BT_HISTORY,
	BT_CONTEXT,
	BT_COLUMNS
};

/* What begin_turn returns besides the turn. */
typedef struct RequestStart
{
	StartedTurn turn;
	Jsonb	   *history;
	Jsonb	   *context;		/* NULL when the conversation has none */
} RequestStart;

/*
 * Start the turn of t's request and read what its prompt needs: the last
 * turn_limit pairs before it and the conversation's context.
 */
static void
BeginTurn(text *tenant, NewTurn *t, int32 turn_limit, RequestStart *out)
{
	StartTurn(tenant, t, &out->turn);

	/* What the start wrote is visible to the snapshot taken after it. */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	out->history = RecentHistory(tenant, t->session_id, turn_limit, out->turn.turn_no,
								 out->turn.live_answers);
	out->context = ContextLoad(tenant, t->session_id, false);
	PopActiveSnapshot();
}

static Datum
RequestStartDatum(FunctionCallInfo fcinfo, RequestStart *r)
{
	TupleDesc	desc;
	Datum		values[BT_COLUMNS];
	bool		nulls[BT_COLUMNS] = {0};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE ||
		desc->natts != BT_COLUMNS)
		elog(ERROR, "begin_turn is declared with another result type");
	values[BT_TURN_ID] = UUIDPGetDatum(r->turn.turn_id);
	values[BT_REPEATED] = BoolGetDatum(r->turn.repeated);
	values[BT_ANSWER_NEUTRAL] = PointerGetDatum(r->turn.answer_neutral);
	nulls[BT_ANSWER_NEUTRAL] = r->turn.answer_neutral == NULL;
	values[BT_ANSWER_TRANSLATED] = PointerGetDatum(r->turn.answer_translated);
	nulls[BT_ANSWER_TRANSLATED] = r->turn.answer_translated == NULL;
	values[BT_HISTORY] = JsonbPGetDatum(r->history);
	values[BT_CONTEXT] = PointerGetDatum(r->context);
	nulls[BT_CONTEXT] = r->context == NULL;
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls));
}

PG_FUNCTION_INFO_V1(convctx_begin_turn);

/*
 * begin_turn(session_id, request_id, question_neutral, turn_limit,
 *			  identity_id, tenant, meta, question_translated, translate_chat,
 *			  pipeline_name, consultant, repository)
 *	-> (turn_id, repeated, answer_neutral, answer_translated, history, context)
 *
 * tenant, when given, is the tenant of this call only (TenantForCallBegin).
 */
Datum
convctx_begin_turn(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(begin_turn);
	static const int argno[NEW_TURN_ARGS] = {0, 1, 2, 4, 7, 8, 6, 9, 10, 11};
	NewTurn		t;
	int32		turn_limit;
	text	   *tenant_arg;
	int			nestlevel = -1;
	text	   *tenant;
	RequestStart r;
	Datum		result;

	ArgNewTurn(fcinfo, argno, &t);
	turn_limit = ArgLimit(fcinfo, 3, "turn_limit");
	tenant_arg = PG_ARGISNULL(5) ? NULL : PG_GETARG_TEXT_PP(5);
	if (tenant_arg != NULL)
		nestlevel = TenantForCallBegin(tenant_arg);
	tenant = CurrentTenant();
	NewTurnCheck(&t);
	BeginTurn(tenant, &t, turn_limit, &r);
	result = RequestStartDatum(fcinfo, &r);
	if (nestlevel >= 0)
		TenantForCallEnd(nestlevel);
	PG_RETURN_DATUM(result);
}
