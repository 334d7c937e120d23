/*-------------------------------------------------------------------------
 *
 * redaction.c
 *	  Redaction: redact_turn and redact_session make tombstones of a turn
 *	  (every version of it) or of every turn of a session, clear the
 *	  session's title and forget what the prompt functions recorded.
 *
 * Concurrency rules (the lock order itself is in docs/locking.md):
 *	- Redaction takes the session row's lock first, like start_turn and
 *	  replace_turn, then clears text with a statement that starts after the
 *	  lock is granted: it sees every turn and version committed before it,
 *	  and none can be added to the session until it commits. A finalize that
 *	  races it waits on the turn's row lock and then finds a tombstone, so no
 *	  text ever comes back.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/lifecycle/redaction.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/jsonb.h"
#include "utils/uuid.h"

#include "core/common.h"
#include "core/args.h"
#include "core/audit.h"
#include "core/jsonb_util.h"
#include "core/spi_plans.h"
#include "core/writable.h"
#include "prompt/prompt_state.h"
#include "core/companion.h"
#include "lifecycle/redaction.h"
#include "core/tenancy.h"
#include "turns/turns.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr title_clear_plan, redact_turn_plan, turn_exists_plan, redact_session_plan,
			redaction_lock_plan;

/*
 * SQL fragment: subtract from a session's counts the live current-version
 * turns (and their answers) among a CTE "d" of redacted rows (all of them
 * live before), d returning replaced_by_turn_id and finalized_at.
 */
#define SESSION_COUNTS_MINUS_REDACTED \
	" live_turns = live_turns OPERATOR(pg_catalog.-) (SELECT pg_catalog.count(*) FROM d" \
	"     WHERE d.replaced_by_turn_id IS NULL)," \
	" live_answers = live_answers OPERATOR(pg_catalog.-) (SELECT pg_catalog.count(*) FROM d" \
	"     WHERE d.replaced_by_turn_id IS NULL AND d.finalized_at IS NOT NULL)"

/*
 * Lock a session's row, as every writer of its turns does, and bump its
 * redaction generation; returns the new one.
 */
#define REDACTION_LOCK_SQL \
	"UPDATE convctx.session SET redactions = redactions OPERATOR(pg_catalog.+) 1" \
	" WHERE " SESSION_KEY \
	" RETURNING redactions"

#define REDACT_TURN_SQL \
	"WITH d AS (UPDATE convctx.turn" TOMBSTONE_SET("$4") \
	"  WHERE " SESSION_KEY \
	"    AND deleted_at IS NULL" \
	"    AND turn_no OPERATOR(pg_catalog.=) (SELECT turn_no FROM convctx.turn" \
	"         WHERE " SESSION_KEY \
	"           AND turn_id OPERATOR(pg_catalog.=) $3)" \
	"  RETURNING turn_no, replaced_by_turn_id, finalized_at)," \
	" s AS (UPDATE convctx.session SET" SESSION_COUNTS_MINUS_REDACTED "," \
	"       first_question = " FIRST_LIVE_QUESTION("$1", "$2", \
	"     AND q.turn_no OPERATOR(pg_catalog.<>) ALL (ARRAY(SELECT d.turn_no FROM d))") \
	"  WHERE " SESSION_KEY \
	"    AND EXISTS (SELECT 1 FROM d))" \
	" SELECT pg_catalog.count(*), pg_catalog.max(turn_no) FROM d"

#define TURN_EXISTS_SQL \
	"SELECT 1 FROM convctx.turn" \
	" WHERE " SESSION_KEY \
	"   AND turn_id OPERATOR(pg_catalog.=) $3"

#define TITLE_CLEAR_SQL \
	"UPDATE convctx.session SET title = NULL WHERE " SESSION_KEY " AND title IS NOT NULL"

#define REDACT_SESSION_SQL \
	"WITH d AS (UPDATE convctx.turn" TOMBSTONE_SET("$3") \
	"  WHERE " SESSION_KEY \
	"    AND deleted_at IS NULL RETURNING turn_no, replaced_by_turn_id, finalized_at)," \
	" s AS (UPDATE convctx.session SET" SESSION_COUNTS_MINUS_REDACTED ", first_question = NULL" \
	"  WHERE " SESSION_KEY \
	"    AND EXISTS (SELECT 1 FROM d))" \
	" SELECT pg_catalog.count(DISTINCT turn_no) FROM d"

/*
 * Lock the session's row and bump its redaction generation; false when
 * the session does not exist, else true with the new generation in
 * *generation. SPI must be connected.
 */
static bool
RedactionLock(text *tenant, text *session_id, int64 *generation)
{
	SpiRunSessionPlan(&redaction_lock_plan, REDACTION_LOCK_SQL, tenant, session_id,
					  false, 0, SPI_OK_UPDATE_RETURNING);
	*generation = SPI_processed > 0 ? SpiFirstInt8() : 0;
	return SPI_processed > 0;
}

/* Clear the session's title; whether it had one. SPI must be connected. */
static bool
RedactTitle(text *tenant, text *session_id)
{
	SpiRunSessionPlan(&title_clear_plan, TITLE_CLEAR_SQL, tenant, session_id,
					  false, 0, SPI_OK_UPDATE);
	return SPI_processed > 0;
}

/*
 * Write the audit row of a redaction: details, an object that holds what
 * the call redacted, and whether it cleared the title.
 */
static void
RedactionAudit(text *tenant, const char *action, text *session_id, JsonbParseState **details,
			   bool title_cleared)
{
	JsonbPushKey(details, "title_cleared");
	JsonbPushBool(details, WJB_VALUE, title_cleared);
	AuditWrite(tenant, action, session_id, NULL, JsonbEndObjectText(details));
}

/*
 * Tombstone every version of a turn of the session under the redaction
 * lock, clear the session's title, forget what the prompt functions
 * recorded for the turn, and audit the call (with whether a title was
 * cleared); false when it was redacted already. P0002 when the session has
 * no such turn.
 */
static bool
RedactTurn(text *tenant, text *session_id, pg_uuid_t *turn_id)
{
	Oid			argtypes[4] = {TEXTOID, TEXTOID, UUIDOID, INT8OID};
	Datum		values[4] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	UUIDPGetDatum(turn_id), (Datum) 0};
	int64		versions;
	int64		generation;
	bool		title_cleared;
	JsonbParseState *details = NULL;
	char	   *id = UuidString(turn_id);

	SPI_connect();
	(void) RedactionLock(tenant, session_id, &generation);

	/*
	 * The app's title too: it may quote the turn (an app often titles a
	 * conversation with its first question), and nothing tells whether it
	 * does. The list shows the default, the first live question, instead.
	 */
	title_cleared = RedactTitle(tenant, session_id);
	values[3] = Int64GetDatum(generation);
	SpiRunPlan(SpiKeptPlan(&redact_turn_plan, REDACT_TURN_SQL, 4, argtypes),
			   values, NULL, false, 0, SPI_OK_SELECT);
	versions = SpiFirstInt8();
	if (versions > 0)
	{
		bool		isnull;
		int64		turn_no = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
														  SPI_tuptable->tupdesc, 2, &isnull));

		PromptForget(tenant, session_id, turn_no);
		CompanionForgetTurns(tenant, session_id, turn_no);
	}
	else
	{
		SpiRunPlan(SpiKeptPlan(&turn_exists_plan, TURN_EXISTS_SQL, 3, argtypes),
				   values, NULL, false, 1, SPI_OK_SELECT);
		if (SPI_processed == 0)
			ReportTurnNotFound(turn_id, session_id);
	}
	pushJsonbValue(&details, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(&details, "turn_id");
	JsonbPushString(&details, WJB_VALUE, id, strlen(id));
	JsonbPushKey(&details, "versions");
	JsonbPushInt(&details, WJB_VALUE, versions);
	RedactionAudit(tenant, "redact_turn", session_id, &details, title_cleared);
	SPI_finish();
	return versions > 0;
}

/*
 * Tombstone every turn of the session under the redaction lock, forget
 * what the prompt functions recorded, audit the call, and return how many
 * turns were redacted (0 for a session that does not exist).
 */
static int64
RedactSession(text *tenant, text *session_id)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, INT8OID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id), (Datum) 0};
	int64		turns = 0;
	int64		generation;
	bool		title_cleared = false;
	JsonbParseState *details = NULL;

	SPI_connect();
	if (RedactionLock(tenant, session_id, &generation))
	{
		/* the app's title too, also when no turn was left to redact */
		title_cleared = RedactTitle(tenant, session_id);
		values[2] = Int64GetDatum(generation);
		SpiRunPlan(SpiKeptPlan(&redact_session_plan, REDACT_SESSION_SQL, 3, argtypes),
				   values, NULL, false, 0, SPI_OK_SELECT);
		turns = SpiFirstInt8();
		PromptForget(tenant, session_id, 0);
		CompanionForgetTurns(tenant, session_id, 0);
	}
	pushJsonbValue(&details, WJB_BEGIN_OBJECT, NULL);
	JsonbPushKey(&details, "turns");
	JsonbPushInt(&details, WJB_VALUE, turns);
	RedactionAudit(tenant, "redact_session", session_id, &details, title_cleared);
	SPI_finish();
	return turns;
}

PG_FUNCTION_INFO_V1(convctx_redact_turn);

/*
 * redact_turn(session_id, turn_id) -> boolean
 */
Datum
convctx_redact_turn(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(redact_turn);
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");
	pg_uuid_t  *turn_id = ArgTurnId(fcinfo, 1);

	PG_RETURN_BOOL(RedactTurn(CurrentTenant(), session_id, turn_id));
}

PG_FUNCTION_INFO_V1(convctx_redact_session);

/*
 * redact_session(session_id) -> bigint
 */
Datum
convctx_redact_session(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(redact_session);
	text	   *session_id = ArgRequiredId(fcinfo, 0, "session_id");

	PG_RETURN_INT64(RedactSession(CurrentTenant(), session_id));
}
