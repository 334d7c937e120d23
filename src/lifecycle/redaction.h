/*-------------------------------------------------------------------------
 *
 * redaction.h
 *	  Redaction (redaction.c): what a tombstone keeps, shared with the
 *	  erasure (erasure.c), which makes tombstones too.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/lifecycle/redaction.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_REDACTION_H
#define CONVCTX_REDACTION_H

/*
 * What a tombstone keeps: ids, request_id, timestamps, versions, and the
 * redaction generation that made it (gen: the parameter holding it), by
 * which set_summary recognises a summary made before it.
 */
#define TOMBSTONE_SET(gen) \
	" SET question_neutral = NULL, answer_neutral = NULL," \
	"     question_translated = NULL, answer_translated = NULL, metadata = NULL," \
	"     deleted_at = pg_catalog.statement_timestamp(), redaction = " gen

#endif							/* CONVCTX_REDACTION_H */
