/*-------------------------------------------------------------------------
 *
 * planner.h
 *	  The planner and statistics hooks for convctx's keyed statements
 *	  (planner.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/planner.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_PLANNER_H
#define CONVCTX_PLANNER_H

#include "postgres.h"

extern void PlannerInit(void);
extern const char *PlannerKeyedQuery(const char *query);

#endif							/* CONVCTX_PLANNER_H */
