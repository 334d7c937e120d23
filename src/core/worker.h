/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  Statements run by a background worker in a transaction of its own (worker.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/worker.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_WORKER_H
#define CONVCTX_WORKER_H

#include "postgres.h"

/* Statements run by a background worker in a transaction of its own (worker.c) */
#define WORKER_AUTONOMOUS		0x01	/* survive the caller's cancel (audit rows) */
#define WORKER_CHECK_PG_CRON	0x02	/* check the cron objects belong to pg_cron */
#define WORKER_AS_OWNER			0x04	/* with AUTONOMOUS: the extension's owner may act (Citus) */
extern bool WorkerRunSql(Oid database, Oid role, int flags, const char *sql, int nargs,
						 const char **args, char **result, char **error, int *sqlstate);
extern void CronCheckMembers(void);

#endif							/* CONVCTX_WORKER_H */
