/*-------------------------------------------------------------------------
 *
 * prompt_clarification.h
 *	  Clarifications (prompt_clarification.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/prompt/prompt_clarification.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_PROMPT_CLARIFICATION_H
#define CONVCTX_PROMPT_CLARIFICATION_H

#include "postgres.h"
#include "utils/jsonb.h"

/* Shapes of clarifications (prompt_clarification.c) */
extern void CheckQuestions(JsonbContainer *arr, const char *what);

#endif							/* CONVCTX_PROMPT_CLARIFICATION_H */
