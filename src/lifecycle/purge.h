/*-------------------------------------------------------------------------
 *
 * purge.h
 *	  The purge (purge.c), and what its Citus variant (citus_purge.c)
 *	  shares of it: the expiry conditions of their statements, the counts of what a pass
 *	  deleted, and the helpers both use.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/lifecycle/purge.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_PURGE_H
#define CONVCTX_PURGE_H

#include "postgres.h"

#include "executor/spi.h"
#include "utils/hsearch.h"

#include "core/common.h"

/*
 * The passes of the purge (purge.c; on Citus, the statements of
 * citus_purge.c that read the candidates) take $1 an age in seconds, $2
 * the batch and $3 the one tenant to purge. Each comes in two kept plans,
 * for every tenant (ALL_TENANTS, $3 unused) and for one (ONE_TENANT), each
 * walking an index of its own in the order rows expired, so that a pass
 * reads about as many rows as it deletes however large the tables are: a
 * single plan with "$3 IS NULL OR tenant_id = $3" can use neither index.
 *
 * Sessions and contexts are found by activity_bin and updated_bin, their
 * last activity rounded down to 10 minutes (generated columns, indexed
 * instead of the exact times so that the updates of every turn stay HOT):
 * a bin before the cutoff holds every row that expired and, in the last
 * bin, some that did not yet, which the exact time rechecked rules out.
 * Only the last pass of a run reaches that bin.
 */
#define CUTOFF \
	" (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => $1))"

/*
 * The expiry condition on column col (indexed alone and after tenant_id).
 * For one tenant it is a row comparison, which only the index led by
 * tenant_id can take as a bound: written as "tenant_id = $3 AND col <
 * cutoff", a generic plan is as likely to walk the index of every tenant,
 * reading every other tenant's expired rows to find this one's.
 */
#define ALL_TENANTS(col) " AND " col " OPERATOR(pg_catalog.<)" CUTOFF
#define ONE_TENANT(col) \
	" AND tenant_id OPERATOR(pg_catalog.=) $3" \
	" AND (tenant_id, " col ") OPERATOR(pg_catalog.<)" \
	"     ($3::pg_catalog.text COLLATE pg_catalog.\"C\"," CUTOFF ")"

/* What one pass deleted, of one tenant or of all. */
typedef struct PurgeCounts
{
	int64		anonymous_sessions;
	int64		anonymous_turns;
	int64		expired_turns;
	int64		contexts;
	int64		audit_rows;
} PurgeCounts;

/* What one purge deleted of one tenant; entries of a hash keyed by tenant. */
typedef struct PurgeTenant
{
	char		tenant[CONVCTX_MAX_ID_BYTES + 1];
	PurgeCounts c;
} PurgeTenant;

/* tenant's entry in tenants (PurgeTenantsCreate), zeroed when new. */
extern PurgeTenant *PurgeTenantEntry(HTAB *tenants, const char *tenant);

/*
 * Run the statement of a pass: plans[0] (sql_all, every tenant) or
 * plans[1] (sql_one, tenant) with $1 age, the setting's age in seconds,
 * and $2 limit.
 */
extern void PurgeRunScoped(SPIPlanPtr *plans, const char *sql_all, const char *sql_one,
						   int age, int32 limit, text *tenant, bool read_only);

#endif							/* CONVCTX_PURGE_H */
