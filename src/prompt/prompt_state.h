/*-------------------------------------------------------------------------
 *
 * prompt_state.h
 *	  Conversation state and summaries (prompt_state.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/prompt/prompt_state.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_PROMPT_STATE_H
#define CONVCTX_PROMPT_STATE_H

#include "postgres.h"

/* Prompt data that redaction forgets (prompt_state.c) */
extern void PromptForget(text *tenant, text *session_id, int64 turn_no);
extern void PromptForgetSessions(text *tenant, Datum sessions);

#endif							/* CONVCTX_PROMPT_STATE_H */
