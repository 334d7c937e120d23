/*-------------------------------------------------------------------------
 *
 * format.c
 *	  The record types of convctx.jsonl, by name and by number.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/format.c
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "format.h"

/* The record types of convctx.jsonl, in the order its trailer counts them. */
const char *const record_types[RECORD_TYPES + 1] = {
	"session", "turn", "retrieval", "clarification", "summary", "context", "embedding", NULL
};

/* The index in record_types of the type name, RECORD_TYPES when it is none. */
int
record_type(const char *name)
{
	int			t;

	for (t = 0; t < RECORD_TYPES && strcmp(record_types[t], name) != 0; t++)
		;
	return t;
}
