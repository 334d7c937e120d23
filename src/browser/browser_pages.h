/*-------------------------------------------------------------------------
 *
 * browser_pages.h
 *	  The browser's pages read from the indexes directly (browser_pages.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/browser/browser_pages.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_BROWSER_PAGES_H
#define CONVCTX_BROWSER_PAGES_H

#include "postgres.h"

#include "funcapi.h"
#include "utils/timestamp.h"

/* A page of conversation_turns read directly, when it may be */
extern bool TurnPageRead(text *tenant, text *session_id, bool forward, int64 bound, int32 limit,
						 struct Tuplestorestate *result, TupleDesc desc);

/* A row of list_conversations as the session row holds it */
typedef struct ListPageRow
{
	text	   *session_id;
	text	   *title;			/* NULL: none set */
	text	   *first_question; /* NULL: no live question */
	TimestampTz created_at;
	TimestampTz last_activity_at;
	int64		live_turns;
	bool		linked_later;
} ListPageRow;

/* A page of list_conversations read directly, when it may be */
extern bool ListPageRead(text *tenant, text *identity, TimestampTz after_activity,
						 text *after_session, int32 page_size, ListPageRow **rows, int *count);

#endif							/* CONVCTX_BROWSER_PAGES_H */
