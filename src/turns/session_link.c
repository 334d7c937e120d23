/*-------------------------------------------------------------------------
 *
 * session_link.c
 *	  Linking a session to an identity: link_session, and the link that
 *	  start_turn makes when it is given an identity.
 *
 * Concurrency (the lock order is in docs/locking.md): a link is decided
 * under the lock of the session's row in convctx.session (taken by an
 * upsert, which creates the row when needed), so of two identities racing
 * for one session exactly one wins; the other sees the winner's committed
 * identity and is refused. The backfill of the session's turns comes
 * before the link row, in the lock order. A refusal is written to convctx.audit_log by a
 * background worker in its own transaction, so it survives the ERROR that
 * rolls back the caller.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns/session_link.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "core/common.h"
#include "core/args.h"
#include "core/audit.h"
#include "core/jsonb_util.h"
#include "core/spi_plans.h"
#include "core/writable.h"
#include "turns/session_link.h"
#include "core/tenancy.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr session_touch_plan, link_plan, link_at_plan, backfill_plan;

/*
 * Create the session row or count a link as activity on it, locking the
 * row either way; returns the identity it is linked to.
 */
#define SESSION_TOUCH_SQL \
	"INSERT INTO convctx.session AS s (tenant_id, session_id) VALUES ($1, $2)" \
	" ON CONFLICT (tenant_id, session_id) DO UPDATE" \
	" SET" SESSION_ACTIVITY_UPSERT \
	" RETURNING identity_id"

#define LINK_SQL \
	"WITH link AS (INSERT INTO convctx.session_link (tenant_id, session_id, identity_id)" \
	"              VALUES ($1, $2, $3))" \
	" UPDATE convctx.session SET identity_id = $3," \
	"        linked_later = pg_catalog.statement_timestamp() OPERATOR(pg_catalog.>) created_at" \
	"  WHERE " SESSION_KEY

/* LINK_SQL with the time of the link given: $4 */
#define LINK_AT_SQL \
	"WITH link AS (INSERT INTO convctx.session_link (tenant_id, session_id, identity_id, linked_at)" \
	"              VALUES ($1, $2, $3, $4))" \
	" UPDATE convctx.session SET identity_id = $3," \
	"        linked_later = $4 OPERATOR(pg_catalog.>) created_at" \
	"  WHERE " SESSION_KEY

#define BACKFILL_SQL \
	"UPDATE convctx.turn SET identity_id = $3" \
	" WHERE " SESSION_KEY \
	"   AND identity_id IS NULL"

/*
 * Link session_id to identity_id. The caller holds the session row's lock
 * and passes the identity that row holds (NULL when anonymous). Linking to
 * the same identity again does nothing; linking to another one is audited
 * and refused with SQLSTATE CV001. With backfill, the session's turns that
 * have no identity take this one.
 */
void
SessionLinkLocked(text *tenant, text *session_id, text *current_identity,
				  text *identity_id, bool backfill)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	PointerGetDatum(identity_id)};

	if (current_identity != NULL)
	{
		char	   *session = text_to_cstring(session_id);
		bool		audited;
		JsonbParseState *details = NULL;
		char	   *linked = text_to_cstring(current_identity);
		char	   *requested = text_to_cstring(identity_id);

		if (TextEqual(current_identity, identity_id))
			return;

		pushJsonbValue(&details, WJB_BEGIN_OBJECT, NULL);
		JsonbPushKey(&details, "linked_identity_id");
		JsonbPushString(&details, WJB_VALUE, linked, strlen(linked));
		JsonbPushKey(&details, "requested_identity_id");
		JsonbPushString(&details, WJB_VALUE, requested, strlen(requested));
		/*
		 * The server-log line first, with interrupts held so that no cancel
		 * can come between it and the audit row (errfinish checks for
		 * interrupts even after a LOG); a pending cancel or terminate takes
		 * effect once the row is committed. It names no identity: the audit
		 * row does, where erase_identity can reach it, and no erasure can
		 * reach a server log.
		 */
		HOLD_INTERRUPTS();
		ereport(LOG,
				errmsg("convctx: refused to link session \"%s\" of tenant \"%s\" to another identity",
					   session, text_to_cstring(tenant)),
				errdetail("The audit row of action link_refused names both identities."));
		audited = AuditWriteAutonomous(tenant, "link_refused", session_id, identity_id,
									   JsonbEndObjectText(&details));
		RESUME_INTERRUPTS();
		ereport(ERROR,
				errcode(ERRCODE_CONVCTX_SESSION_LINKED),
				errmsg("session \"%s\" is already linked to another identity", session),
				errdetail("A session belongs to one identity for good; the link was left unchanged."),
				audited ? 0 : errhint("The refusal could not be written to convctx.audit_log; see the server log."));
	}

	/* The session's turns before its link row, in the lock order. */
	if (backfill)
		SpiRunPlan(SpiKeptPlan(&backfill_plan, BACKFILL_SQL, 3, argtypes), values, NULL,
				   false, 0, SPI_OK_UPDATE);
	SpiRunPlan(SpiKeptPlan(&link_plan, LINK_SQL, 3, argtypes), values, NULL,
			   false, 0, SPI_OK_UPDATE);
}

/*
 * Link the anonymous session session_id, whose row the caller holds locked,
 * to identity_id as of linked_at (an import keeps the time its file
 * states), backfilling its turns as link_session does.
 */
void
SessionLinkAt(text *tenant, text *session_id, text *identity_id, TimestampTz linked_at)
{
	Oid			argtypes[4] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[4] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	PointerGetDatum(identity_id), TimestampTzGetDatum(linked_at)};

	SpiRunPlan(SpiKeptPlan(&backfill_plan, BACKFILL_SQL, 3, argtypes), values, NULL,
			   false, 0, SPI_OK_UPDATE);
	SpiRunPlan(SpiKeptPlan(&link_at_plan, LINK_AT_SQL, 4, argtypes), values, NULL,
			   false, 0, SPI_OK_UPDATE);
}

/*
 * Link session_id to identity_id as link_session does: create or lock the
 * session row (counting the call as activity), then SessionLinkLocked.
 */
static void
LinkSession(text *tenant, text *session_id, text *identity_id, bool backfill)
{
	text	   *current_identity;
	bool		isnull;
	Datum		d;

	SPI_connect();
	SpiRunSessionPlan(&session_touch_plan, SESSION_TOUCH_SQL, tenant, session_id,
					  false, 0, SPI_OK_INSERT_RETURNING);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	current_identity = isnull ? NULL : DatumGetTextPP(d);
	SessionLinkLocked(tenant, session_id, current_identity, identity_id, backfill);
	SPI_finish();
}

PG_FUNCTION_INFO_V1(convctx_link_session);

/*
 * link_session(identity_id, session_id, backfill) -> void
 */
Datum
convctx_link_session(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(link_session);
	text	   *identity_id = ArgRequiredId(fcinfo, 0, "identity_id");
	text	   *session_id = ArgRequiredId(fcinfo, 1, "session_id");
	bool		backfill = PG_ARGISNULL(2) ? true : PG_GETARG_BOOL(2);

	LinkSession(CurrentTenant(), session_id, identity_id, backfill);
	PG_RETURN_VOID();
}
