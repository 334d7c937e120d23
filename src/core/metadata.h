/*-------------------------------------------------------------------------
 *
 * metadata.h
 *	  Request metadata: the allowlist and keyed hashes (metadata.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/metadata.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_METADATA_H
#define CONVCTX_METADATA_H

#include "postgres.h"
#include "utils/jsonb.h"

/* Request metadata (metadata.c) */
extern Jsonb *MetadataFilter(Jsonb *meta, bool question_neutral_is_fallback);
extern Jsonb *MetadataFilterStored(Jsonb *meta);
extern void CheckMetadataSize(Datum merged);
extern char *KeyedHashHex(const char *key, const char *data, int len);

#endif							/* CONVCTX_METADATA_H */
