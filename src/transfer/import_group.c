/*-------------------------------------------------------------------------
 *
 * import_group.c
 *	  The end of a group of records (FinishGroup): its turns checked, then
 *	  written as a new session (import_write.c) or merged into the one that
 *	  exists (import_merge.c), and its embeddings stored (by the companion).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/transfer/import_group.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"

#include "core/common.h"
#include "core/spi_plans.h"
#include "transfer/import.h"
#include "core/companion.h"
#include "core/settings.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr link_insert_plan, session_finish_plan;

#define LINK_INSERT_SQL \
	"INSERT INTO convctx.session_link (tenant_id, session_id, identity_id, linked_at)" \
	" VALUES ($1, $2, $3, $4)"

/* $3 last_turn_no, $4 live_turns, $5 live_answers, $6 summary_through_turn_no, $7 redactions */
#define SESSION_FINISH_SQL \
	"UPDATE convctx.session s SET last_turn_no = $3, live_turns = $4, live_answers = $5," \
	"       summary_through_turn_no = $6, redactions = $7," SESSION_BROWSER_SET \
	" WHERE " SESSION_KEY_AT("s")

/* What a group's turns make: its counts and newest turn (GroupTotals). */
typedef struct GroupTotals
{
	int64		live_turns;
	int64		live_answers;
	int64		max_turn_no;
	int64		max_redaction;
	int64		covered;		/* messages its summary covers */
	TimestampTz newest_turn;
} GroupTotals;

/* Count the group's turns; a summary written before a redaction it covers is 22P04. */
static void
GroupCount(ImportRecord *rec, SessionGroup *g, GroupTotals *tot)
{
	int			i;

	memset(tot, 0, sizeof(*tot));
	tot->newest_turn = DT_NOBEGIN;
	for (i = 0; i < g->nturns; i++)
	{
		TurnRow    *t = &g->turns[i];
		bool		live = !t->tombstone && t->replaced_by == NULL;

		tot->max_turn_no = Max(tot->max_turn_no, t->turn_no);
		tot->newest_turn = Max(tot->newest_turn, t->created_at);
		if (t->has_redaction)
			tot->max_redaction = Max(tot->max_redaction, t->redaction);
		tot->live_turns += live;
		tot->live_answers += live && t->finalized;
		if (g->summary_recno && live && t->turn_no <= g->summary_through)
			tot->covered += 1 + t->finalized;
		/*
		 * Redacting a turn drops the summary that covers it: a summary
		 * covering a tombstone was written after the redaction.
		 */
		if (g->summary_recno && t->tombstone && t->turn_no <= g->summary_through &&
			g->summary_updated_at < t->deleted_at)
			ReportGroup(rec, g->summary_recno, REC_SUMMARY,
						psprintf("the summary of session \"%s\" was written before turn " INT64_FORMAT " it covers was redacted",
								 g->session_name, t->turn_no),
						"Redacting a turn drops the summary that covers it.");
	}
}

/*
 * What the session record states against what its records make, and every
 * retrieval and clarification belonging to a live turn of the group.
 */
static void
GroupCheckStated(ImportRecord *rec, SessionGroup *g, GroupTotals *tot)
{
	int			i;

#define CHECK_STATED(has, stated, actual, name) \
	if ((has) && (stated) != (actual)) \
		ReportGroup(rec, g->recno, REC_SESSION, \
					psprintf("session \"%s\" states %s " INT64_FORMAT ", but its records make " INT64_FORMAT, \
							 g->session_name, name, (int64) (stated), (int64) (actual)), \
					"convctx derives this count from the session's turns; the file was changed or is incomplete.")

	/* starting a turn is activity: it is never older than a turn */
	if (g->last_activity_at < tot->newest_turn)
	{
		char	   *stated = pstrdup(timestamptz_to_str(g->last_activity_at));

		rec->recno = g->recno;
		rec->type = REC_SESSION;
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("last_activity_at of session \"%s\" is before its newest turn was created",
					   g->session_name),
				errdetail("last_activity_at is %s; a turn was created at %s.",
						  stated, timestamptz_to_str(tot->newest_turn)),
				errhint("Starting a turn is activity of its session: last_activity_at is at least the created_at of every turn."));
	}
	CHECK_STATED(g->has_live_turns, g->live_turns, tot->live_turns, "live_turns");
	CHECK_STATED(g->has_live_answers, g->live_answers, tot->live_answers, "live_answers");
	if (g->summary_recno && g->summary_covered >= 0 && g->summary_covered != tot->covered)
		ReportGroup(rec, g->summary_recno, REC_SUMMARY,
					psprintf("the summary of session \"%s\" states covered_messages " INT64_FORMAT
							 ", but its turns make " INT64_FORMAT,
							 g->session_name, g->summary_covered, tot->covered), NULL);
	if (g->has_summary_through &&
		(g->summary_through_null ? g->summary_recno != 0
		 : (g->summary_recno == 0 || g->summary_through_stated != g->summary_through)))
		ReportGroup(rec, g->recno, REC_SESSION,
					psprintf("summary_through_turn_no of session \"%s\" does not match its summary record",
							 g->session_name), NULL);
	if (g->has_last_turn_no && g->last_turn_no < tot->max_turn_no)
		ReportGroup(rec, g->recno, REC_SESSION,
					psprintf("session \"%s\" states last_turn_no " INT64_FORMAT ", but it has turn " INT64_FORMAT,
							 g->session_name, g->last_turn_no, tot->max_turn_no), NULL);
	/* an anonymous session's cap counts back from last_turn_no */
	if (g->identity == NULL && g->has_last_turn_no && g->nturns > 0 && g->last_turn_no != tot->max_turn_no)
		ReportGroup(rec, g->recno, REC_SESSION,
					psprintf("anonymous session \"%s\" states last_turn_no " INT64_FORMAT ", but its newest turn is " INT64_FORMAT,
							 g->session_name, g->last_turn_no, tot->max_turn_no),
					"The anonymous cap keeps the turns of the newest numbers: a gap would drop them all.");
	if (g->has_redactions && g->redactions < tot->max_redaction)
		ReportGroup(rec, g->recno, REC_SESSION,
					psprintf("session \"%s\" states redactions " INT64_FORMAT ", but a tombstone of redaction " INT64_FORMAT,
							 g->session_name, g->redactions, tot->max_redaction), NULL);
	if (g->summary_recno && g->summary_through > (g->has_last_turn_no ? g->last_turn_no : tot->max_turn_no))
		ReportGroup(rec, g->summary_recno, REC_SUMMARY,
					psprintf("the summary of session \"%s\" covers turns up to " INT64_FORMAT ", past its newest turn",
							 g->session_name, g->summary_through), NULL);
	for (i = 0; i < g->ndata; i++)
	{
		TurnRow    *t = CurrentTurn(g, g->data[i].turn_no);

		if (t == NULL || t->tombstone)
			ReportGroup(rec, g->data[i].recno, g->data[i].type,
						psprintf("the %s of turn " INT64_FORMAT " of session \"%s\" belongs to %s",
								 record_type_names[g->data[i].type], g->data[i].turn_no, g->session_name,
								 t == NULL ? "no turn of the session" : "a redacted turn"),
						t == NULL ? NULL : "Redacting a turn drops its retrievals and clarifications.");
	}
}

/*
 * An anonymous session that the next purge would delete, or that is over
 * the cap, would not survive: refused unless asked.
 */
static void
GroupCheckSurvives(ImportOptions *opts, SessionGroup *g, GroupTotals *tot)
{
	if (g->identity == NULL && !opts->allow_anonymous)
	{
		if (convctx_session_ttl > 0 &&
			g->last_activity_at < GetCurrentTimestamp() - (int64) convctx_session_ttl * USECS_PER_SEC)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("anonymous session \"%s\" would be deleted by the next purge", g->session_name),
					errdetail("Its last activity, %s, is older than convctx.session_ttl (%d s); anonymous sessions expire.",
							  timestamptz_to_str(g->last_activity_at), convctx_session_ttl),
					errhint("Give it an identity (convctx import --as-identity or --identity-map), or import it as it is with --allow-anonymous."));
		if (tot->live_turns > convctx_max_session_turns)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("anonymous session \"%s\" has more turns than convctx.max_session_turns", g->session_name),
					errdetail("It has " INT64_FORMAT " live turns; an anonymous session keeps at most %d, and its next turn would drop the oldest.",
							  tot->live_turns, convctx_max_session_turns),
					errhint("Give it an identity (convctx import --as-identity or --identity-map), or import it as it is with --allow-anonymous."));
	}
}

/*
 * Write a new session's group: children after the session row in the lock
 * order (turns, link, retrievals, clarifications, summary, context), then
 * the derived values into the session row.
 */
static void
GroupWriteNew(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts,
			  GroupTotals *tot)
{
	Oid			argtypes[7] = {TEXTOID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID};
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int			i;

	/* write: turns, link, retrievals and clarifications, summary, context */
	WriteTurns(opts, g, g->turns, g->nturns);
	counts->imported[REC_TURN] += g->nturns;
	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	if (g->identity != NULL)
	{
		Oid			link_types[4] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
		Datum		link_values[4] = {values[0], values[1], PointerGetDatum(g->identity),
			TimestampTzGetDatum(g->link_now ? GetCurrentStatementStartTimestamp() : g->linked_at)};

		SpiRunPlan(SpiKeptPlan(&link_insert_plan, LINK_INSERT_SQL, 4, link_types), link_values, NULL,
				   false, 0, SPI_OK_INSERT);
	}
	for (i = 0; i < g->ndata; i++)
	{
		TurnDataRow *d = &g->data[i];

		rec->recno = d->recno;
		rec->type = d->type;
		InsertTurnData(values, d);
		counts->imported[d->type]++;
	}
	if (g->summary_recno)
	{
		Oid			sum_types[6] = {TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID};
		Datum		sum_values[6] = {values[0], values[1], PointerGetDatum(g->summary),
			Int64GetDatum(g->summary_through), Int64GetDatum(tot->covered),
		TimestampTzGetDatum(g->summary_updated_at)};

		rec->recno = g->summary_recno;
		rec->type = REC_SUMMARY;
		SpiRunPlan(SpiKeptPlan(&summary_insert_plan, SUMMARY_INSERT_SQL, 6, sum_types),
				   sum_values, NULL, false, 0, SPI_OK_INSERT);
		counts->imported[REC_SUMMARY]++;
	}
	WriteGroupContext(opts, rec, g, counts);

	rec->recno = g->recno;
	rec->type = REC_SESSION;
	values[2] = Int64GetDatum(g->has_last_turn_no ? g->last_turn_no : tot->max_turn_no);
	values[3] = Int64GetDatum(tot->live_turns);
	values[4] = Int64GetDatum(tot->live_answers);
	values[5] = Int64GetDatum(g->summary_through);
	nulls[5] = g->summary_recno ? ' ' : 'n';
	values[6] = Int64GetDatum(g->has_redactions ? g->redactions : tot->max_redaction);
	SpiRunPlan(SpiKeptPlan(&session_finish_plan, SESSION_FINISH_SQL, 7, argtypes), values, nulls,
			   false, 0, SPI_OK_UPDATE);
}

/*
 * The group that ends here: check it whole against the rules of the API
 * and what its session record states, then write it as a new session or
 * merge it into the one that exists.
 */
void
FinishGroup(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	GroupTotals tot;

	if (!g->open)
		return;
	g->open = false;

	rec->group_id = g->session_name;
	CheckTurnChains(rec, g);
	GroupCount(rec, g, &tot);
	GroupCheckStated(rec, g, &tot);
	if (g->existing)
		MergeGroup(opts, rec, g, counts, tot.max_turn_no, tot.max_redaction);
	else
	{
		rec->recno = g->recno;
		rec->type = REC_SESSION;
		rec->group_id = g->session_name;
		GroupCheckSurvives(opts, g, &tot);
		GroupWriteNew(opts, rec, g, counts, &tot);
	}
	WriteGroupEmbeddings(opts, rec, g, counts);
}

/*
 * The group's embeddings, once its turns are written: each of a turn of
 * the file that is not a tombstone (22P04 otherwise), stored where this
 * database has their companion and the model (CompanionImportEmbedding), or
 * skipped with the reason.
 */
void
WriteGroupEmbeddings(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	static const SkipReason why[] = {
		[COMPANION_NOT_INSTALLED] = SKIP_NO_COMPANION,
		[COMPANION_NO_MODEL] = SKIP_NO_MODEL,
		[COMPANION_THERE] = SKIP_THERE,
		[COMPANION_CHANGED] = SKIP_CHANGED,
		[COMPANION_REDACTED] = SKIP_REDACTED,
		[COMPANION_REMOVED] = SKIP_REMOVED,
	};
	MemoryContext each;
	MemoryContext old;
	TurnRow   **by_id;
	int			i;

	if (g->nembeddings == 0)
		return;
	by_id = palloc(sizeof(TurnRow *) * Max(g->nturns, 1));
	for (i = 0; i < g->nturns; i++)
		by_id[i] = &g->turns[i];
	qsort(by_id, g->nturns, sizeof(TurnRow *), TurnRowById);
	each = AllocSetContextCreate(CurrentMemoryContext, "convctx import embedding", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(each);
	for (i = 0; i < g->nembeddings; i++)
	{
		EmbeddingRow *e = &g->embeddings[i];
		TurnRow		key = {.turn_id = e->turn_id};
		TurnRow    *keyp = &key;
		TurnRow   **found = bsearch(&keyp, by_id, g->nturns, sizeof(TurnRow *), TurnRowById);
		TurnRow    *t = found ? *found : NULL;
		CompanionImported done;

		MemoryContextReset(each);
		if (t == NULL || t->tombstone)
			ReportGroup(rec, e->recno, REC_EMBEDDING,
						psprintf("an embedding of session \"%s\" belongs to %s", g->session_name,
								 t == NULL ? "no turn of the session" : "a redacted turn"),
						t == NULL ? NULL : "Redacting a turn deletes its embeddings.");
		rec->recno = e->recno;
		rec->type = REC_EMBEDDING;
		done = CompanionImportEmbedding(opts->tenant, g->session_id, e->turn_id, t->turn_no, e->model,
									 e->embedding, e->stored_at);
		if (done == COMPANION_IMPORTED)
			counts->imported[REC_EMBEDDING]++;
		else
			CountSkipped(counts, REC_EMBEDDING, why[done]);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(each);
}
