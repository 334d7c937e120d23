/*-------------------------------------------------------------------------
 *
 * jsonl_scan.h
 *	  A line of convctx.jsonl checked in one pass (jsonl_scan.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/jsonl_scan.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_JSONL_SCAN_H
#define CONVCTX_JSONL_SCAN_H

#include <stdbool.h>
#include <stddef.h>

/* A line's strings that grouping needs, NULL when it has none. */
typedef struct ScannedLine
{
	char	   *type;
	char	   *session_id;
	char	   *conversation_id;
} ScannedLine;

extern bool scan_jsonl_line(const char *line, size_t len, ScannedLine *out, int *column,
							const char **message);
extern void scanned_line_free(ScannedLine *l);

#endif
