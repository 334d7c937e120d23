/*-------------------------------------------------------------------------
 *
 * recall.h
 *	  Semantic recall over turns with pgvector (recall.c): the embeddings of
 *	  extension convctx_recall, what redaction and erasure must forget of
 *	  them, and what export and import carry of them.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/recall/recall.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_RECALL_H
#define CONVCTX_RECALL_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/uuid.h"

/* What became of an embedding an import brought (RecallImportEmbedding). */
typedef enum RecallImported
{
	RECALL_IMPORTED,
	RECALL_NOT_INSTALLED,		/* convctx_recall is not installed here */
	RECALL_NO_MODEL,			/* the model is not registered here */
	RECALL_THERE,				/* the same embedding is stored here */
	RECALL_CHANGED,				/* another one is stored here */
	RECALL_REDACTED,			/* the turn is a tombstone here */
	RECALL_REMOVED				/* the turn is not here */
} RecallImported;

extern void RecallInit(void);
extern void RecallForget(text *tenant, text *session_id, int64 turn_no);
extern void RecallForgetSessions(text *tenant, Datum sessions);
extern void RecallForgetVersion(text *tenant, text *session_id, pg_uuid_t *turn_id);
extern bool RecallInstalled(void);
extern RecallImported RecallImportEmbedding(text *tenant, text *session_id, pg_uuid_t *turn_id,
											int64 turn_no, text *model, char *embedding,
											TimestampTz stored_at);

#endif							/* CONVCTX_RECALL_H */
