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

#include "core/companion.h"

/* From _PG_init: registers recall as the companion (core/companion.h). */
extern void RecallInit(void);

/* Its hooks, and whether convctx_recall is installed here. */
extern void RecallForget(text *tenant, text *session_id, int64 turn_no);
extern void RecallForgetSessions(text *tenant, Datum sessions);
extern void RecallForgetVersion(text *tenant, text *session_id, pg_uuid_t *turn_id);
extern bool RecallInstalled(void);

/*
 * Whether only a superuser (or convctx's owner) can change schema nsp,
 * pgvector's, whose type and operators the statements name as the owner.
 */
extern bool RecallSchemaTrusted(Oid nsp);
extern const char *RecallExportSql(void);
extern CompanionImported RecallImportEmbedding(text *tenant, text *session_id, pg_uuid_t *turn_id,
											   int64 turn_no, text *model, char *embedding,
											   TimestampTz stored_at);

#endif							/* CONVCTX_RECALL_H */
