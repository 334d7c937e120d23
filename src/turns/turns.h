/*-------------------------------------------------------------------------
 *
 * turns.h
 *	  Starting a turn (turns.c), shared by start_turn and begin_turn
 *	  (request.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns/turns.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_TURNS_H
#define CONVCTX_TURNS_H

#include "fmgr.h"
#include "utils/jsonb.h"
#include "utils/uuid.h"

/* What a new turn was asked to store (ArgNewTurn, then NewTurnCheck). */
typedef struct NewTurn
{
	text	   *session_id;
	text	   *request_id;
	text	   *question_neutral;	/* the translated question when missing */
	text	   *identity_id;
	text	   *question_translated;
	bool		translate_chat;
	Jsonb	   *metadata;		/* as given, then filtered */
	text	   *pipeline_name;
	text	   *consultant;
	text	   *repository;
} NewTurn;

/* The number of NewTurn's arguments, in the order ArgNewTurn takes them. */
#define NEW_TURN_ARGS 10

/* The turn a request has after StartTurn. */
typedef struct StartedTurn
{
	pg_uuid_t  *turn_id;
	int64		turn_no;
	bool		repeated;		/* the request had its turn already */
	int64		live_answers;	/* the session's, as the new turn found them; -1: unknown */
	text	   *answer_neutral; /* a repeat's stored answer, when finalized and live */
	text	   *answer_translated;
} StartedTurn;

extern void ArgNewTurn(FunctionCallInfo fcinfo, const int argno[NEW_TURN_ARGS], NewTurn *t);
extern void NewTurnCheck(NewTurn *t);
extern void StartTurn(text *tenant, NewTurn *t, StartedTurn *out);

/* Turn helpers shared with the lifecycle */
extern pg_uuid_t *ArgTurnId(FunctionCallInfo fcinfo, int argno);
extern char *UuidString(pg_uuid_t *id);
extern void ReportTurnNotFound(pg_uuid_t *turn_id, text *session_id) pg_attribute_noreturn();
extern int64 LiveTurnNo(text *tenant, text *session_id, pg_uuid_t *turn_id);

/* Datum for a possibly NULL pointer argument of a plan, with its null flag. */
static inline Datum
PlanArg(void *p, char *null_flag)
{
	*null_flag = (p == NULL) ? 'n' : ' ';
	return PointerGetDatum(p);
}

extern pg_uuid_t *NewTurnId(void);

#endif							/* CONVCTX_TURNS_H */
