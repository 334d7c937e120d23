/*-------------------------------------------------------------------------
 *
 * prompt_citations.h
 *	  Retrievals and their citations (prompt_citations.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/prompt/prompt_citations.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_PROMPT_CITATIONS_H
#define CONVCTX_PROMPT_CITATIONS_H

#include "postgres.h"
#include "utils/jsonb.h"

/* Shapes of retrievals (prompt_citations.c) */
extern void CheckChunkArray(Jsonb *arr, const char *what);

#endif							/* CONVCTX_PROMPT_CITATIONS_H */
