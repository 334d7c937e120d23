/*-------------------------------------------------------------------------
 *
 * import_merge.c
 *	  Merging a group of records into a session that exists already
 *	  (MergeGroup): what the file has and the database lacks is added,
 *	  what both have is skipped with its reason, a conflict refused.
 *
 * The stored turns are read once per group (StoredTurns) and each of the
 * file's turns is compared with the stored one of its number
 * (MergeTurnAction), so that running an import again writes nothing
 * twice.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/transfer/import_merge.c
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
#include "lifecycle/erasure.h"
#include "transfer/import.h"
#include "core/settings.h"
#include "turns/turns.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr stored_turns_plan, turn_update_plan, stored_retrieval_plan,
			stored_clarification_plan, stored_summary_plan, session_merge_plan,
			summary_covered_plan;

/* The stored turns of an existing session, to merge the file's with. */
#define STORED_TURNS_SQL \
	"SELECT turn_id, turn_no, request_id, record_version, replaced_by_turn_id, created_at," \
	"       finalized_at, deleted_at, translate_chat, question_neutral, answer_neutral," \
	"       question_translated, answer_translated, answer_translated_is_fallback, metadata," \
	"       pipeline_name, consultant, repository" \
	"  FROM convctx.turn WHERE " SESSION_KEY \
	" ORDER BY turn_no, record_version"

/* A stored turn that the file has finalized or corrected since: $3 its id. */
#define TURN_UPDATE_SQL \
	"UPDATE convctx.turn SET finalized_at = $4, answer_neutral = $5, answer_translated = $6," \
	"       answer_translated_is_fallback = $7, metadata = $8, replaced_by_turn_id = $9" \
	" WHERE " SESSION_KEY " AND turn_id OPERATOR(pg_catalog.=) $3"

/* The stored retrieval, clarification or summary of an existing session. */
#define STORED_RETRIEVAL_SQL \
	"SELECT chunks, citations, recorded_at FROM convctx.turn_retrieval" \
	" WHERE " SESSION_KEY " AND turn_no OPERATOR(pg_catalog.=) $3"
#define STORED_CLARIFICATION_SQL \
	"SELECT questions, inferred_context, recorded_at FROM convctx.clarification" \
	" WHERE " SESSION_KEY " AND turn_no OPERATOR(pg_catalog.=) $3"
#define STORED_SUMMARY_SQL \
	"SELECT summary, through_turn_no, updated_at FROM convctx.session_summary WHERE " SESSION_KEY



static bool
UuidEqual(pg_uuid_t *a, pg_uuid_t *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return memcmp(a->data, b->data, UUID_LEN) == 0;
}

static bool
JsonbEqual(Jsonb *a, Jsonb *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return DatumGetBool(DirectFunctionCall2(jsonb_eq, JsonbPGetDatum(a), JsonbPGetDatum(b)));
}

/* The stored turns of an existing session, as TurnRows (recno 0), in turn_no order. */
static TurnRow *
StoredTurns(ImportOptions *opts, SessionGroup *g, int *n)
{
	TurnRow    *rows;
	uint64		i;

	SpiRunSessionPlan(&stored_turns_plan, STORED_TURNS_SQL, opts->tenant, g->session_id,
					  false, 0, SPI_OK_SELECT);
	rows = palloc0(sizeof(TurnRow) * Max(SPI_processed, 1));
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		TurnRow    *t = &rows[i];
		bool		isnull;
		Datum		d;
		int			k;

#define STORED(col) (d = SPI_getbinval(tup, desc, (col), &isnull), isnull)
#define STORED_UUID(col) (STORED(col) ? NULL : (pg_uuid_t *) memcpy(palloc(UUID_LEN), DatumGetUUIDP(d), UUID_LEN))
#define STORED_TEXT(col) (STORED(col) ? NULL : DatumGetTextPCopy(d))
		t->turn_id = STORED_UUID(1);
		t->turn_no = STORED(2) ? 0 : DatumGetInt64(d);
		t->request_id = STORED_TEXT(3);
		t->version = STORED(4) ? 1 : DatumGetInt32(d);
		t->replaced_by = STORED_UUID(5);
		t->created_at = STORED(6) ? 0 : DatumGetTimestampTz(d);
		t->finalized = !STORED(7);
		t->finalized_at = t->finalized ? DatumGetTimestampTz(d) : 0;
		t->tombstone = !STORED(8);
		t->deleted_at = t->tombstone ? DatumGetTimestampTz(d) : 0;
		t->translate_chat = STORED(9) ? false : DatumGetBool(d);
		for (k = 0; k < 4; k++)
			t->texts[k] = STORED_TEXT(10 + k);
		t->has_fallback = !STORED(14);
		t->fallback = t->has_fallback && DatumGetBool(d);
		t->metadata = STORED(15) ? NULL : DatumGetJsonbPCopy(d);
		for (k = 0; k < 3; k++)
			t->labels[k] = STORED_TEXT(16 + k);
#undef STORED_TEXT
#undef STORED_UUID
#undef STORED
	}
	*n = (int) SPI_processed;
	return rows;
}

/* What a merge does with a turn record (and with the session's title). */
#define TURN_INSERT (-1)
#define TURN_UPDATE (-2)
#define TITLE_SAME (-3)

/* 23505 (55000 with redacted): the file's turn f and this database's disagree. */
static void
ReportTurnConflict(ImportRecord *rec, SessionGroup *g, TurnRow *f, bool redacted, const char *detail)
	pg_attribute_noreturn();

static void
ReportTurnConflict(ImportRecord *rec, SessionGroup *g, TurnRow *f, bool redacted, const char *detail)
{
	rec->recno = f->recno;
	rec->type = REC_TURN;
	rec->group_id = g->session_name;
	if (redacted)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("turn " INT64_FORMAT " of session \"%s\" is redacted in the file but not here",
					   f->turn_no, g->session_name),
				errhint("An import does not redact: redact it here with convctx.redact_turn(), then import again."));
	ereport(ERROR,
			errcode(ERRCODE_UNIQUE_VIOLATION),
			errmsg("turn " INT64_FORMAT " of session \"%s\" differs from the one stored here",
				   f->turn_no, g->session_name),
			errdetail_internal("%s", detail),
			errhint("The conversation went on differently here and where the file was exported: import it under another session id, or delete it here first."));
}

/* The first of turns rows[0..n), in turn_no order, numbered turn_no or after. */
static int
FirstTurnFrom(TurnRow *rows, int n, int64 turn_no)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (rows[mid].turn_no < turn_no)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * What a merge does with the file's turn f, given the stored turns of its
 * session (db[0..ndb) in turn_no order, by_id the same in turn_id order):
 * insert it (a turn or version this database lacks), update the stored
 * row (finalized or corrected in the file since), or skip it (a
 * SkipReason). A turn that differs otherwise is a conflict.
 */
static int
MergeTurnAction(ImportRecord *rec, SessionGroup *g, TurnRow *f, TurnRow *db, int ndb,
				TurnRow **by_id)
{
	TurnRow   **found = bsearch(&f, by_id, ndb, sizeof(TurnRow *), TurnRowById);
	TurnRow    *d = found ? *found : NULL;
	TurnRow    *same_no = NULL;
	int32		maxv = 0,
				minv = PG_INT32_MAX;
	bool		answer_same;
	bool		file_ahead;
	bool		here_ahead;
	int			i;

	for (i = FirstTurnFrom(db, ndb, f->turn_no); i < ndb && db[i].turn_no == f->turn_no; i++)
	{
		/* a turn redacted here stays redacted: all its versions are */
		if (db[i].tombstone)
			return f->tombstone && d != NULL ? SKIP_THERE : SKIP_REDACTED;
		same_no = &db[i];
		maxv = Max(maxv, db[i].version);
		minv = Min(minv, db[i].version);
	}
	if (d == NULL)
	{
		if (same_no == NULL)
			return f->turn_no > g->stored_last_turn_no ? TURN_INSERT : SKIP_REMOVED;
		if (!TextEqual(same_no->request_id, f->request_id))
			ReportTurnConflict(rec, g, f, false,
							   psprintf("Here it is request \"%s\", in the file request \"%s\".",
										text_to_cstring(same_no->request_id), text_to_cstring(f->request_id)));
		if (f->version > maxv)
			return TURN_INSERT;	/* corrected in the file since */
		if (f->version < minv)
			return SKIP_REMOVED;
		ReportTurnConflict(rec, g, f, false,
						   psprintf("Version %d of request \"%s\" is another turn here.",
									f->version, text_to_cstring(f->request_id)));
	}
	if (d->turn_no != f->turn_no || !TextEqual(d->request_id, f->request_id) ||
		d->version != f->version || d->created_at != f->created_at)
		ReportTurnConflict(rec, g, f, false,
						   psprintf("Turn %s has another turn number, request, version or time here.",
									UuidString(f->turn_id)));
	if (f->tombstone)
		ReportTurnConflict(rec, g, f, true, NULL);
	if (d->translate_chat != f->translate_chat || !TextEqual(d->texts[0], f->texts[0]) ||
		!TextEqual(d->texts[2], f->texts[2]) || !TextEqual(d->labels[0], f->labels[0]) ||
		!TextEqual(d->labels[1], f->labels[1]) || !TextEqual(d->labels[2], f->labels[2]))
		ReportTurnConflict(rec, g, f, false, "Its question differs.");
	answer_same = d->finalized == f->finalized && (!f->finalized || d->finalized_at == f->finalized_at) &&
		TextEqual(d->texts[1], f->texts[1]) && TextEqual(d->texts[3], f->texts[3]) &&
		d->has_fallback == f->has_fallback && d->fallback == f->fallback &&
		JsonbEqual(d->metadata, f->metadata);
	if (answer_same && UuidEqual(d->replaced_by, f->replaced_by))
		return SKIP_THERE;
	/* finalize_turn and replace_turn only ever add: an answer, a successor */
	file_ahead = (answer_same || !d->finalized) &&
		(UuidEqual(d->replaced_by, f->replaced_by) || d->replaced_by == NULL);
	here_ahead = (answer_same || !f->finalized) &&
		(UuidEqual(d->replaced_by, f->replaced_by) || f->replaced_by == NULL);
	if (file_ahead)
		return TURN_UPDATE;
	if (here_ahead)
		return SKIP_CHANGED;
	ReportTurnConflict(rec, g, f, false,
					   UuidEqual(d->replaced_by, f->replaced_by) ? "Its answer differs."
					   : "It was corrected differently here.");
}

/* Update the stored turn f->turn_id to the file's answer and successor. */
static void
UpdateTurn(ImportOptions *opts, SessionGroup *g, TurnRow *f)
{
	Oid			argtypes[9] = {TEXTOID, TEXTOID, UUIDOID, TIMESTAMPTZOID, TEXTOID, TEXTOID,
	BOOLOID, JSONBOID, UUIDOID};
	Datum		values[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;

	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	values[2] = GetTurnId(f, &isnull);
	values[3] = GetFinalizedAt(f, &isnull);
	nulls[3] = isnull ? 'n' : ' ';
	values[4] = TextOrNull(f->texts[1], &nulls[4]);
	values[5] = TextOrNull(f->texts[3], &nulls[5]);
	values[6] = GetFallback(f, &isnull);
	nulls[6] = isnull ? 'n' : ' ';
	values[7] = GetMetadata(f, &isnull);
	nulls[7] = isnull ? 'n' : ' ';
	values[8] = GetReplacedBy(f, &isnull);
	nulls[8] = isnull ? 'n' : ' ';
	SpiRunPlan(SpiKeptPlan(&turn_update_plan, TURN_UPDATE_SQL, 9, argtypes), values, nulls,
			   false, 0, SPI_OK_UPDATE);
}

/*
 * A turn stored here between turns of the file that the file lacks: the
 * conversation diverged (23505).
 */
static void
MergeCheckDiverged(ImportRecord *rec, SessionGroup *g, TurnRow *db, int ndb,
				   int64 min_turn_no, int64 max_turn_no)
{
	TurnRow    *in_file = palloc(sizeof(TurnRow) * Max(g->nturns, 1));
	int			j;

	memcpy(in_file, g->turns, sizeof(TurnRow) * g->nturns);
	qsort(in_file, g->nturns, sizeof(TurnRow), TurnRowByNumber);
	for (j = 0; j < ndb; j++)
	{
		int			k;

		if (db[j].turn_no <= min_turn_no || db[j].turn_no >= max_turn_no)
			continue;
		k = FirstTurnFrom(in_file, g->nturns, db[j].turn_no);
		if (k == g->nturns || in_file[k].turn_no != db[j].turn_no)
		{
			rec->recno = g->recno;
			rec->type = REC_SESSION;
			ereport(ERROR,
					errcode(ERRCODE_UNIQUE_VIOLATION),
					errmsg("session \"%s\" has turn " INT64_FORMAT " here, which the file does not have",
						   g->session_name, db[j].turn_no),
					errhint("The conversation went on differently here and where the file was exported: import it under another session id, or delete it here first."));
		}
	}
}

/* The turns: the stored rows first (a successor named), then the new ones. */
static void
MergeTurns(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts,
		   const int *action)
{
	TurnRow    *ins = palloc(sizeof(TurnRow) * Max(g->nturns, 1));
	int			nins = 0;
	int			i;

	for (i = 0; i < g->nturns; i++)
	{
		TurnRow    *f = &g->turns[i];

		rec->recno = f->recno;
		rec->type = REC_TURN;
		if (action[i] == TURN_UPDATE)
			UpdateTurn(opts, g, f);
		else if (action[i] == TURN_INSERT)
		{
			ins[nins] = *f;
			/* a turn of a linked session is its identity's, as start_turn writes it */
			ins[nins++].identity = g->stored_identity;
		}
		if (action[i] < 0)
			counts->imported[REC_TURN]++;
		else
			CountSkipped(counts, REC_TURN, (SkipReason) action[i]);
	}
	rec->recno = g->recno;
	WriteTurns(opts, g, ins, nins);
}

/*
 * Retrievals and clarifications: of a turn kept here, newer than the
 * stored one. Returns whether any was written.
 */
static bool
MergeTurnData(ImportRecord *rec, SessionGroup *g, ImportCounts *counts, const int *action,
			  Datum *key)
{
	bool		wrote = false;
	int			i;

	for (i = 0; i < g->ndata; i++)
	{
		TurnDataRow *d = &g->data[i];
		TurnRow    *t = CurrentTurn(g, d->turn_no);
		int			why = action[t - g->turns];
		bool		retrieval = (d->type == REC_RETRIEVAL);

		rec->recno = d->recno;
		rec->type = d->type;
		if (why != SKIP_REDACTED && why != SKIP_REMOVED)
		{
			Oid			stored_types[3] = {TEXTOID, TEXTOID, INT8OID};
			bool		isnull;

			key[2] = Int64GetDatum(d->turn_no);
			SpiRunPlan(retrieval ? SpiKeptPlan(&stored_retrieval_plan, STORED_RETRIEVAL_SQL, 3, stored_types)
					   : SpiKeptPlan(&stored_clarification_plan, STORED_CLARIFICATION_SQL, 3, stored_types),
					   key, NULL, false, 1, SPI_OK_SELECT);
			if (SPI_processed == 0)
				why = TURN_INSERT;
			else
			{
				HeapTuple	tup = SPI_tuptable->vals[0];
				TupleDesc	desc = SPI_tuptable->tupdesc;
				TimestampTz stored_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &isnull));

				if (JsonbEqual(DatumGetJsonbP(SPI_getbinval(tup, desc, 1, &isnull)), d->first) &&
					JsonbEqual(DatumGetJsonbP(SPI_getbinval(tup, desc, 2, &isnull)), d->second) &&
					stored_at == d->recorded_at)
					why = SKIP_THERE;
				else
					why = stored_at < d->recorded_at ? TURN_INSERT : SKIP_CHANGED;
			}
		}
		if (why >= 0)
		{
			CountSkipped(counts, d->type, (SkipReason) why);
			continue;
		}
		InsertTurnData(key, d);
		counts->imported[d->type]++;
		wrote = true;
	}
	return wrote;
}

/*
 * The summary: the file's when newer, unless it covers a turn redacted here
 * since. Returns whether it was written.
 */
static bool
MergeSummary(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts,
			 TurnRow *db, int ndb, Datum *key)
{
	int			why = TURN_INSERT;
	int			j;

	if (!g->summary_recno)
		return false;
	rec->recno = g->summary_recno;
	rec->type = REC_SUMMARY;
	for (j = 0; j < ndb; j++)
		if (db[j].tombstone && db[j].turn_no <= g->summary_through &&
			db[j].deleted_at > g->summary_updated_at)
			why = SKIP_REDACTED;
	if (why == TURN_INSERT)
	{
		SpiRunSessionPlan(&stored_summary_plan, STORED_SUMMARY_SQL, opts->tenant, g->session_id,
						  false, 1, SPI_OK_SELECT);
		if (SPI_processed > 0)
		{
			HeapTuple	tup = SPI_tuptable->vals[0];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			TimestampTz stored_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &isnull));

			if (stored_at == g->summary_updated_at &&
				DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull)) == g->summary_through &&
				TextEqual(DatumGetTextPP(SPI_getbinval(tup, desc, 1, &isnull)), g->summary))
				why = SKIP_THERE;
			else if (stored_at >= g->summary_updated_at)
				why = SKIP_CHANGED;
		}
	}
	if (why >= 0)
		CountSkipped(counts, REC_SUMMARY, (SkipReason) why);
	else
	{
		Oid			sum_types[6] = {TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID};
		Datum		sum_values[6] = {key[0], key[1], PointerGetDatum(g->summary),
			Int64GetDatum(g->summary_through), Int64GetDatum(0),
		TimestampTzGetDatum(g->summary_updated_at)};

		SpiRunPlan(SpiKeptPlan(&summary_insert_plan, SUMMARY_INSERT_SQL, 6, sum_types),
				   sum_values, NULL, false, 0, SPI_OK_INSERT);
		counts->imported[REC_SUMMARY]++;
	}
	return why < 0;
}

/*
 * Could a redaction here have removed a title that the file has?
 * redact_turn, redact_session and erase_identity remove the session's
 * title (it may quote what they redact) and bump its redaction generation
 * (session.redactions), which an import carries over from the file. Yes
 * when this database's generation is ahead of the file's (a redaction
 * here that the file does not have), when a turn redacted here is not a
 * tombstone in the file, or when the session was erased here. A title in
 * the file was set after every redaction of the file (each removed the
 * title of its time), so it is safe only when those are all the
 * redactions here.
 */
static bool
RedactedSinceFile(SessionGroup *g, TurnRow *db, int ndb, int64 file_redactions)
{
	TurnRow    *in_file;
	int			j;

	if (g->stored_redactions > file_redactions ||
		(g->stored_identity != NULL && IsErasedIdentity(g->stored_identity)))
		return true;
	in_file = palloc(sizeof(TurnRow) * Max(g->nturns, 1));
	memcpy(in_file, g->turns, sizeof(TurnRow) * g->nturns);
	qsort(in_file, g->nturns, sizeof(TurnRow), TurnRowByNumber);
	for (j = 0; j < ndb; j++)
	{
		bool		redacted_in_file = false;
		int			k;

		if (!db[j].tombstone)
			continue;
		for (k = FirstTurnFrom(in_file, g->nturns, db[j].turn_no);
			 k < g->nturns && in_file[k].turn_no == db[j].turn_no; k++)
			redacted_in_file |= in_file[k].tombstone;
		if (!redacted_in_file)
			return true;
	}
	return false;
}

/*
 * What a merge does with the file's title: TITLE_SAME (the session has
 * it, or the file has none), TURN_INSERT (takes it: the session has none here, and no redaction
 * here could have removed it), or why not: SKIP_OTHER_TITLE (the session
 * has a title of its own here, kept: an import never replaces or removes
 * one), SKIP_REDACTED (a redaction here since may have removed it).
 */
static int
MergeTitleAction(SessionGroup *g, TurnRow *db, int ndb, int64 file_redactions)
{
	/* a file without a title has none to give: nothing to take or keep */
	if (g->title == NULL || TextEqual(g->stored_title, g->title))
		return TITLE_SAME;
	if (g->stored_title != NULL)
		return SKIP_OTHER_TITLE;
	if (RedactedSinceFile(g, db, ndb, file_redactions))
		return SKIP_REDACTED;
	return TURN_INSERT;
}

/*
 * The derived values of the session row counted again from its rows, and
 * the file's later last activity and title (NULL: none taken).
 */
static void
MergeSessionRow(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, Datum *key,
				int64 max_turn_no, int64 max_redaction, text *title)
{
	Oid			merge_types[6] = {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, INT8OID, TEXTOID};
	Datum		merge_values[6] = {key[0], key[1],
		Int64GetDatum(g->has_last_turn_no ? g->last_turn_no : max_turn_no),
		TimestampTzGetDatum(g->last_activity_at),
		Int64GetDatum(g->has_redactions ? g->redactions : max_redaction),
	PointerGetDatum(title)};
	char		merge_nulls[6] = {' ', ' ', ' ', ' ', ' ', title ? ' ' : 'n'};

	rec->recno = g->recno;
	rec->type = REC_SESSION;
	SpiRunPlan(SpiKeptPlan(&session_merge_plan, SESSION_MERGE_SQL, 6, merge_types),
			   merge_values, merge_nulls, false, 0, SPI_OK_UPDATE_RETURNING);
	if (g->stored_identity == NULL && !opts->allow_anonymous &&
		SpiFirstInt8() > convctx_max_session_turns)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("anonymous session \"%s\" would have more turns than convctx.max_session_turns",
					   g->session_name),
				errhint("Give it an identity (convctx import --as-identity or --identity-map), or import it as it is with --allow-anonymous."));
	SpiRunSessionPlan(&summary_covered_plan, SUMMARY_COVERED_SQL, opts->tenant, g->session_id,
					  false, 0, SPI_OK_UPDATE);
}

/*
 * A group whose session exists: add what the file has and this database
 * lacks (turns after its newest, versions, answers, retrievals,
 * clarifications, a newer summary, a context), leave alone what both have
 * or what changed here since (counted as skipped, with the reason), and
 * refuse a conflict: the same turn with other content, or a turn here
 * that the file does not have between turns it has. The session row was
 * locked when its record was read, as every writer locks it (and linked
 * then, when the file links it); its derived values are counted again
 * from its rows when anything was written. The session record is imported
 * when any of it is taken: its link, its later last activity, its title
 * (MergeTitleAction); else skipped, with the reason its title was not
 * taken, or as changed here (later activity here) or already there.
 */
void
MergeGroup(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts,
		   int64 max_turn_no, int64 max_redaction)
{
	int			ndb;
	TurnRow    *db = StoredTurns(opts, g, &ndb);
	TurnRow   **by_id = palloc(sizeof(TurnRow *) * Max(ndb, 1));
	int		   *action = palloc(sizeof(int) * Max(g->nturns, 1));
	bool		wrote = false;
	bool		activity_later = g->last_activity_at > g->stored_last_activity_at;
	int			title_action;
	int64		min_turn_no = PG_INT64_MAX;
	Datum		key[3] = {PointerGetDatum(opts->tenant), PointerGetDatum(g->session_id), 0};
	int			i,
				j;

	for (j = 0; j < ndb; j++)
		by_id[j] = &db[j];
	qsort(by_id, ndb, sizeof(TurnRow *), TurnRowById);
	for (i = 0; i < g->nturns; i++)
	{
		action[i] = MergeTurnAction(rec, g, &g->turns[i], db, ndb, by_id);
		wrote |= action[i] < 0;
		min_turn_no = Min(min_turn_no, g->turns[i].turn_no);
	}
	if (wrote)
		MergeCheckDiverged(rec, g, db, ndb, min_turn_no, max_turn_no);
	title_action = MergeTitleAction(g, db, ndb, g->has_redactions ? g->redactions : max_redaction);
	MergeTurns(opts, rec, g, counts, action);
	wrote |= MergeTurnData(rec, g, counts, action, key);
	wrote |= MergeSummary(opts, rec, g, counts, db, ndb, key);
	WriteGroupContext(opts, rec, g, counts);
	if (wrote || activity_later || g->link_added || title_action == TURN_INSERT)
		MergeSessionRow(opts, rec, g, key, max_turn_no, max_redaction,
						title_action == TURN_INSERT ? g->title : NULL);

	/* the session record: what of it was taken, or why not */
	rec->recno = g->recno;
	rec->type = REC_SESSION;
	if (activity_later || g->link_added || title_action == TURN_INSERT)
		counts->imported[REC_SESSION]++;
	else if (title_action != TITLE_SAME)
		CountSkipped(counts, REC_SESSION, (SkipReason) title_action);
	else
		CountSkipped(counts, REC_SESSION,
					 g->stored_last_activity_at > g->last_activity_at ? SKIP_CHANGED : SKIP_THERE);
}
