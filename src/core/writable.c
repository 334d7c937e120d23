/*-------------------------------------------------------------------------
 *
 * writable.c
 *	  The refusal of a function that writes on a standby or in a read-only
 *	  transaction.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/writable.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"

#include "core/writable.h"

/*
 * Refuse a function that writes when this transaction cannot: on a hot
 * standby (during recovery) and in a read-only transaction, both 25006,
 * with PostgreSQL's own wording for a command, naming the function
 * rather than the statement convctx would run inside it. Called first
 * thing, so nothing is read, locked or checked before. RecoveryInProgress
 * is a local flag once recovery has ended.
 */
bool
CheckWritable(const char *function)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				errmsg("cannot execute %s during recovery", function),
				errdetail("This server is a standby: convctx's read functions work here, its writers only on the primary."));
	PreventCommandIfReadOnly(function);
	return true;
}
