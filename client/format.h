/*-------------------------------------------------------------------------
 *
 * format.h
 *	  The names of convctx.jsonl, the format the tool writes and reads
 *	  (format.c): the format, its version, its record types.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/format.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_FORMAT_H
#define CONVCTX_FORMAT_H

/* The format of the files the tool writes and reads. */
#define JSONL_FORMAT		"convctx.jsonl"
#define JSONL_FORMAT_VERSION 1

/* Its record types, in the order its trailer counts them. */
#define RECORD_TYPES		7
extern const char *const record_types[RECORD_TYPES + 1];	/* NULL-terminated */
extern int	record_type(const char *name);

#endif
