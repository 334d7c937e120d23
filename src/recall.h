/*-------------------------------------------------------------------------
 *
 * recall.h
 *	  Semantic recall over turns with pgvector (recall.c): the embeddings of
 *	  extension convctx_recall, and what redaction and erasure must forget
 *	  of them.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/recall.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_RECALL_H
#define CONVCTX_RECALL_H

#include "postgres.h"

extern void RecallInit(void);
extern void RecallForget(text *tenant, text *session_id, int64 turn_no);
extern void RecallForgetSessions(text *tenant, Datum sessions);

#endif							/* CONVCTX_RECALL_H */
