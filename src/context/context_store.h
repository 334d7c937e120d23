/*-------------------------------------------------------------------------
 *
 * context_store.h
 *	  Reading a conversation's stored context (context_store.c), shared
 *	  with begin_turn (request.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/context/context_store.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_CONTEXT_STORE_H
#define CONVCTX_CONTEXT_STORE_H

#include "utils/jsonb.h"

extern Jsonb *ContextLoad(text *tenant, text *conversation_id, bool after_lock);

#endif							/* CONVCTX_CONTEXT_STORE_H */
