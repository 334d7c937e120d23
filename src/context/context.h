/*-------------------------------------------------------------------------
 *
 * context.h
 *	  Context objects (pure jsonb) (context.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/context/context.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_CONTEXT_H
#define CONVCTX_CONTEXT_H

#include "postgres.h"
#include "utils/array.h"
#include "utils/jsonb.h"

/* Context objects (context.c) */
extern void ContextCheckShape(Jsonb *ctx);
extern Jsonb *ContextMerge(Jsonb *ctx, ArrayType *node_ids, int max_nodes);

#endif							/* CONVCTX_CONTEXT_H */
