/*-------------------------------------------------------------------------
 *
 * citus.h
 *	  Running on a Citus cluster: the Citus module (citus.c, citus_purge.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/citus/citus.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_CITUS_H
#define CONVCTX_CITUS_H

#include "postgres.h"
#include "nodes/parsenodes.h"
#include "utils/hsearch.h"

/* Citus (citus.c) */
extern void CitusInit(void);
extern bool ConvctxDistributed(void);
extern bool CitusInternalBackend(void);
extern Oid	CitusReferenceShard(Oid relid);
extern void CitusRefuse(const char *function, const char *hint);
extern bool CitusKeepCallHere(Query *parse);

/* The passes of PurgeOnce on Citus (citus_purge.c): the variant's purge_once. */
extern void PurgeOnceDistributed(int32 batch, text *tenant, HTAB *tenants);

#endif							/* CONVCTX_CITUS_H */
