/*-------------------------------------------------------------------------
 *
 * recent_turns.h
 *	  The prompt-history read (recent_turns.c), shared with begin_turn
 *	  (request.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns/recent_turns.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_RECENT_TURNS_H
#define CONVCTX_RECENT_TURNS_H

#include "utils/jsonb.h"

extern Jsonb *RecentHistory(text *tenant, text *session_id, int32 limit, int64 before,
							 int64 live_answers);

#endif							/* CONVCTX_RECENT_TURNS_H */
