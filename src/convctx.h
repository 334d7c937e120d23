/*-------------------------------------------------------------------------
 *
 * convctx.h
 *	  Declarations shared by the convctx C files: settings, tenancy,
 *	  argument checks and SPI helpers.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/convctx.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_H
#define CONVCTX_H

#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/jsonb.h"

/* Longest id (conversation, session, request, identity, user) accepted. */
#define CONVCTX_MAX_ID_BYTES 1024

/* The key of a context object that holds the referenced node ids. */
#define CONVCTX_ACTIVE_NODE_IDS "activeNodeIds"

/* Settings (convctx.c) */
extern char *convctx_tenant;
extern int	convctx_max_active_nodes;

/* Tenancy (convctx.c) */
extern text *CurrentTenant(void);

/* Argument checks (convctx.c) */
extern text *ArgRequiredId(FunctionCallInfo fcinfo, int argno, const char *what);
extern text *ArgOptionalId(FunctionCallInfo fcinfo, int argno, const char *what);

/* Context objects (context.c) */
extern void ContextCheckShape(Jsonb *ctx);
extern Jsonb *ContextMerge(Jsonb *ctx, ArrayType *node_ids, int max_nodes);

/* SPI plans kept for the life of the backend (spi_util.c) */
extern SPIPlanPtr SpiKeptPlan(SPIPlanPtr *cache, const char *sql,
							  int nargs, Oid *argtypes);
extern int	SpiRunPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
					   bool read_only, long count, int expected_rc);

#endif							/* CONVCTX_H */
