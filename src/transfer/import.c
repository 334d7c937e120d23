/*-------------------------------------------------------------------------
 *
 * import.c
 *	  import_records: write a batch of convctx.jsonl records (the lines
 *	  `convctx export` writes between its header and trailer, or what
 *	  `convctx import` made of another store's history) into the current
 *	  tenant, with their original ids and timestamps
 *	  (docs/import-export.md).
 *
 * COPY FROM is refused on tables with row-level security, no role but the
 * owner may insert into convctx's tables, and start_turn stamps the time
 * of the call, so an import needs its own writer. It takes the records as
 * text and parses each with jsonb's own parser, so that no number or
 * character changes on the way; it applies the rules of the API (the
 * tenant of the caller, one identity per session with refusals audited,
 * the metadata allowlist, the size limits, tombstones without text) and
 * recomputes what convctx derives (a session's live counts, its newest
 * turn, the messages a summary covers), checking them against the record
 * when it states them.
 *
 * Records come grouped by conversation: a session record, then its
 * turns, retrievals, clarifications, summary and context. A group whose
 * session exists already is merged (MergeGroup: what the file has and the
 * database lacks is added, what both have skipped with its reason, a
 * conflict refused), or with on_conflict 'error' refused, so that running
 * an import again writes nothing twice. A
 * context record of another conversation stands alone. Any error rolls
 * back the whole batch; its context names the record ("import record 7
 * (turn of session "s1")") so that the tool can tell which group failed.
 *
 * Administrators only; the rows are written as the extension's owner.
 *
 * This file reads the batch and assembles its groups; a record's fields
 * are read in import_record.c, a finished group goes to import_group.c,
 * which writes a new session (import_write.c) or merges into the one
 * that exists (import_merge.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/transfer/import.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
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
#include "core/args.h"
#include "core/audit.h"
#include "browser/browser.h"
#include "context/context.h"
#include "core/spi_plans.h"
#include "core/writable.h"
#include "lifecycle/erasure.h"
#include "transfer/import.h"
#include "core/jsonb_util.h"
#include "core/metadata.h"
#include "prompt/prompt_citations.h"
#include "prompt/prompt_clarification.h"
#include "turns/session_link.h"
#include "core/tenancy.h"
#include "turns/turns.h"
#include "core/variant.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr session_insert_plan, session_existing_plan,
			session_identity_plan, identity_erased_plan;

static const char *const record_type_plurals[REC_TYPES] = {
	"sessions", "turns", "retrievals", "clarifications", "summaries", "contexts", "embeddings"
};

static const char *const skip_reason_names[SKIP_REASONS] = {
	"already there", "changed here", "redacted here", "removed here",
	"no convctx_recall here", "model not registered here", "another title here"
};

/* $1 tenant, $2 session, $3 identity, $4 created_at, $5 last_activity_at, $6 title */
#define SESSION_INSERT_SQL \
	"INSERT INTO convctx.session (tenant_id, session_id, identity_id, created_at, last_activity_at, title)" \
	" VALUES ($1, $2, $3, $4, $5, $6)" \
	" ON CONFLICT (tenant_id, session_id) DO NOTHING" \
	" RETURNING 1"

/*
 * The identity and newest turn number of an existing session, locked as
 * every writer locks it: no turn is started, finalized, replaced or
 * redacted in it until the import commits.
 */
#define SESSION_EXISTING_SQL \
	"SELECT identity_id, last_turn_no, title, redactions, last_activity_at" \
	"  FROM convctx.session WHERE " SESSION_KEY " FOR UPDATE"

/* The identity of a session, if it exists (a context's conversation). */
#define SESSION_IDENTITY_SQL \
	"SELECT identity_id FROM convctx.session WHERE " SESSION_KEY

/*
 * Whether an identity was erased in tenant $1, by its keyed stand-ins $2:
 * sessions erase_identity left linked to the stand-in, or the audit row of
 * the erasure (index audit_log_erasures).
 */
#define IDENTITY_ERASED_SQL \
	"SELECT EXISTS (SELECT 1 FROM convctx.session_link" \
	"                WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"                  AND identity_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]))" \
	"    OR EXISTS (SELECT 1 FROM convctx.audit_log" \
	"                WHERE tenant_id OPERATOR(pg_catalog.=) $1" \
	"                  AND action OPERATOR(pg_catalog.=) 'erase_identity'" \
	"                  AND identity_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]))"

/* 22P04 when a session or conversation comes twice in the batch. */
static void
CheckFirstInBatch(ImportOptions *opts, ImportRecord *rec, const char *kind, text *id)
{
	char		key[CONVCTX_MAX_ID_BYTES + 3];
	bool		found;
	int			len = VARSIZE_ANY_EXHDR(id);

	memset(key, 0, sizeof(key));
	key[0] = kind[0];
	memcpy(key + 1, VARDATA_ANY(id), len);
	hash_search(opts->seen, key, HASH_ENTER, &found);
	if (found)
		ReportBadRecord(rec, psprintf("%s \"%s\" comes twice in the batch", kind, text_to_cstring(id)),
						NULL, "The records of a conversation come together, once.");
}

/*
 * Was identity erased in the tenant? Only a keyed stand-in tells (the
 * one of 0.5.0 and the one of erasures before it); without
 * convctx.identity_hash_key every erased identity is "erased", and no
 * identity can be recognised as erased.
 */
static bool
IdentityErased(text *tenant, text *identity)
{
	Oid			argtypes[2] = {TEXTOID, TEXTARRAYOID};
	Datum		values[2];
	Datum		stand_ins[2];
	bool		isnull;

	stand_ins[1] = PointerGetDatum(LegacyErasedIdentity(identity));
	if (stand_ins[1] == PointerGetDatum(NULL))
		return false;
	stand_ins[0] = PointerGetDatum(ErasedIdentity(tenant, identity));
	values[0] = PointerGetDatum(tenant);
	values[1] = PointerGetDatum(construct_array(stand_ins, 2, TEXTOID, -1, false, TYPALIGN_INT));
	SpiRunPlan(SpiKeptPlan(&identity_erased_plan, IDENTITY_ERASED_SQL, 2, argtypes), values, NULL,
			   false, 1, SPI_OK_SELECT);
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Was the identity of a record erased, as the record names it (raw) or as
 * it would be written (mapped by identity_map, or as_identity)? Either
 * way the import would bring back what the erasure took.
 */
static bool
RecordIdentityErased(ImportOptions *opts, text *raw, text *mapped)
{
	return (raw != NULL && IdentityErased(opts->tenant, raw)) ||
		(mapped != NULL && mapped != raw && IdentityErased(opts->tenant, mapped));
}

/*
 * An erasure holds against the import of an export made before it: a
 * context whose user_id is an identity erased in the tenant (recognised
 * with a key only), or whose conversation is a session erase_identity
 * erased, is refused with 55000, as its session is refused. Neither
 * message names the identity: it would reach the server log.
 */
static void
CheckContextNotErased(ImportOptions *opts, text *conversation_id, const char *name,
					  text *raw_user, text *user)
{
	bool		isnull;
	Datum		d;

	if (RecordIdentityErased(opts, raw_user, user))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("the context of conversation \"%s\" was erased", name),
				errdetail("Its user_id is an identity that erase_identity erased in this tenant; an import does not bring it back."));
	SpiRunSessionPlan(&session_identity_plan, SESSION_IDENTITY_SQL, opts->tenant, conversation_id,
					  false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull && IsErasedIdentity(DatumGetTextPP(d)))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("the context of conversation \"%s\" was erased", name),
				errdetail("erase_identity erased the session of this conversation and deleted its context; an import does not bring it back."));
}

/*
 * The fields of a session record that need no lookup, into g; its
 * identity (before the identity map) and title in *identity and *title.
 */
static void
SessionRecordFields(ImportRecord *rec, SessionGroup *g, text **identity, text **title)
{
	bool		linked_null;
	bool		isnull;

	*identity = RecordId(rec, "identity_id", false);
	g->linked_at = RecordTimestamp(rec, "linked_at", false, &linked_null);
	g->created_at = RecordTimestamp(rec, "created_at", true, &isnull);
	g->last_activity_at = RecordTimestamp(rec, "last_activity_at", true, &isnull);
	if (g->last_activity_at < g->created_at)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("last_activity_at of session \"%s\" is before its created_at", g->session_name));
	g->last_turn_no = RecordNumber(rec, "last_turn_no", false, 0, &isnull);
	g->has_last_turn_no = !isnull;
	g->live_turns = RecordNumber(rec, "live_turns", false, 0, &isnull);
	g->has_live_turns = !isnull;
	g->live_answers = RecordNumber(rec, "live_answers", false, 0, &isnull);
	g->has_live_answers = !isnull;
	g->has_summary_through = RecordValue(rec, "summary_through_turn_no", &(JsonbValue) {0}) != NULL;
	g->summary_through_stated = RecordNumber(rec, "summary_through_turn_no", false, 1, &g->summary_through_null);
	g->redactions = RecordNumber(rec, "redactions", false, 0, &isnull);
	g->has_redactions = !isnull;
	*title = RecordText(rec, "title", false);
	if (*title != NULL)
		CheckSessionTitle(*title);
	if (*identity != NULL && linked_null)
		ReportBadRecord(rec, "key \"%s\" of %s record must be set when identity_id is", "linked_at", NULL);
	if (*identity == NULL && !linked_null)
		ReportBadRecord(rec, "key \"%s\" of %s record must be null when identity_id is", "linked_at", NULL);
}

/*
 * The session of the group exists already (its insert did nothing): the
 * refusals an existing session gives, then the group is merged
 * (FinishGroup) with what is stored.
 */
static void
SessionExisting(ImportOptions *opts, SessionGroup *g, text *identity)
{
	bool		isnull;
	text	   *existing;
	Datum		d;

	SpiRunSessionPlan(&session_existing_plan, SESSION_EXISTING_SQL, opts->tenant,
					  g->session_id, false, 0, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	existing = isnull ? NULL : DatumGetTextPCopy(d);
	g->stored_last_turn_no = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
														 SPI_tuptable->tupdesc, 2, &isnull));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
	g->stored_title = isnull ? NULL : DatumGetTextPCopy(d);
	g->stored_redactions = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 4, &isnull));
	g->stored_last_activity_at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
																   SPI_tuptable->tupdesc, 5, &isnull));

	/*
	 * A session erase_identity erased here takes nothing of a file
	 * that names another identity (the one erased, in clear without a
	 * key): refused before the link below would audit that identity.
	 */
	if (existing != NULL && IsErasedIdentity(existing) && !TextEqual(existing, identity))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("session \"%s\" was erased", g->session_name),
				errdetail("erase_identity took the identity of this session here; an import does not bring it back."));
	/* the refusal of link_session, audited the same way */
	if (existing != NULL && identity != NULL)
		SessionLinkLocked(opts->tenant, g->session_id, existing, identity, false);
	if (opts->error_on_conflict)
		ereport(ERROR,
				errcode(ERRCODE_UNIQUE_VIOLATION),
				errmsg("session \"%s\" exists already", g->session_name),
				errhint("convctx import --on-conflict=skip leaves existing sessions alone and counts them."));
	/*
	 * Linked where the file comes from: linked here too, as link_session
	 * links, at the time the file states (now for as_identity), so that the
	 * session exports as it was exported. The session record is counted
	 * when the group is merged (MergeGroup).
	 */
	if (existing == NULL && identity != NULL)
	{
		SessionLinkAt(opts->tenant, g->session_id, identity,
					  g->link_now ? GetCurrentStatementStartTimestamp() : g->linked_at);
		g->link_added = true;
	}
	g->stored_identity = existing ? existing : identity;
	g->existing = true;
}

/*
 * A session record: start its group. The session row is created at once,
 * locked for the rest of the transaction; when it exists the group is
 * skipped, or refused when it belongs to another identity or on_conflict
 * is 'error'.
 */
static void
ImportSession(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	Oid			argtypes[6] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID};
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	text	   *identity;
	text	   *raw_identity;
	text	   *title;
	MemoryContext cxt = g->cxt;

	memset(g, 0, sizeof(*g));
	g->cxt = cxt;
	g->recno = rec->recno;
	g->session_id = RecordId(rec, "session_id", true);
	g->session_name = text_to_cstring(g->session_id);
	rec->group_id = g->session_name;
	CheckFirstInBatch(opts, rec, "session", g->session_id);
	SessionRecordFields(rec, g, &identity, &title);
	g->title = title;

	raw_identity = identity;
	identity = MappedIdentity(opts, identity);
	if (identity == NULL && opts->as_identity != NULL)
	{
		identity = opts->as_identity;
		g->link_now = true;
	}
	g->identity = identity;
	g->open = true;

	/*
	 * A session of an erased identity is refused before its row is looked
	 * at: the refusal of a link (below) would audit the identity in clear.
	 */
	if (RecordIdentityErased(opts, raw_identity, identity))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("session \"%s\" belongs to an erased identity", g->session_name),
				errdetail("Its identity is one that erase_identity erased in this tenant; an import does not bring it back."));

	values[0] = PointerGetDatum(opts->tenant);
	values[1] = PointerGetDatum(g->session_id);
	values[2] = TextOrNull(identity, &nulls[2]);
	values[3] = TimestampTzGetDatum(g->created_at);
	values[4] = TimestampTzGetDatum(g->last_activity_at);
	values[5] = TextOrNull(title, &nulls[5]);
	SpiRunPlan(SpiKeptPlan(&session_insert_plan, SESSION_INSERT_SQL, 6, argtypes), values, nulls,
			   false, 0, SPI_OK_INSERT_RETURNING);
	if (SPI_processed == 0)
	{
		SessionExisting(opts, g, identity);
		return;
	}
	counts->imported[REC_SESSION]++;
}

/* 22P04 unless the record belongs to the session group that is open. */
static void
CheckInGroup(ImportRecord *rec, SessionGroup *g, text *session_id)
{
	rec->group_id = text_to_cstring(session_id);
	if (!g->open || strcmp(g->session_name, rec->group_id) != 0)
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("%s record of session \"%s\" is not in that session's group",
					   record_type_names[rec->type], rec->group_id),
				errdetail("The records of a session follow its session record."));
}

/* Room for one more element in a growing array of the group. */
static void *
GroupGrow(SessionGroup *g, void *array, int n, int *max, Size size)
{
	if (n < *max)
		return array;
	*max = Max(*max * 2, 16);
	return array ? repalloc(array, *max * size) : MemoryContextAlloc(g->cxt, *max * size);
}

/* A turn record: checked on its own now, with its group at the end. */
static void
ImportTurn(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	TurnRow    *t;
	bool		isnull;
	int			i;

	CheckInGroup(rec, g, RecordId(rec, "session_id", true));
	g->turns = GroupGrow(g, g->turns, g->nturns, &g->maxturns, sizeof(TurnRow));
	t = &g->turns[g->nturns];
	memset(t, 0, sizeof(*t));
	t->recno = rec->recno;
	t->turn_id = RecordUuid(rec, "turn_id", true);
	t->turn_no = RecordNumber(rec, "turn_no", true, 1, &isnull);
	t->request_id = RecordId(rec, "request_id", true);
	t->version = (int32) RecordNumber(rec, "record_version", false, 1, &isnull);
	if (isnull)
		t->version = 1;
	t->replaced_by = RecordUuid(rec, "replaced_by_turn_id", false);
	t->identity = MappedIdentity(opts, RecordId(rec, "identity_id", false));
	/* a turn is of its session's identity, or of none yet when linked later */
	if (t->identity != NULL && !TextEqual(t->identity, g->identity))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("turn of identity \"%s\" in session \"%s\" of %s", text_to_cstring(t->identity),
					   g->session_name, g->identity ? psprintf("identity \"%s\"", text_to_cstring(g->identity))
					   : "no identity"),
				errdetail("A turn's identity_id is null or the identity of its session."));
	if (t->identity == NULL && g->link_now)
		t->identity = g->identity;	/* as link_session's backfill */
	t->created_at = RecordTimestamp(rec, "created_at", true, &isnull);
	t->finalized_at = RecordTimestamp(rec, "finalized_at", false, &isnull);
	t->finalized = !isnull;
	t->deleted_at = RecordTimestamp(rec, "deleted_at", false, &isnull);
	t->tombstone = !isnull;
	if ((t->finalized && t->finalized_at < t->created_at) || (t->tombstone && t->deleted_at < t->created_at))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("a turn is %s before it was created", t->tombstone && t->deleted_at < t->created_at
					   ? "redacted" : "finalized"));
	t->redaction = RecordNumber(rec, "redaction", false, 1, &isnull);
	t->has_redaction = !isnull;
	if (t->has_redaction && !t->tombstone)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("a turn that is not redacted has a redaction"),
				errdetail("redaction is the redaction generation that made a tombstone; it is null on live turns."));
	t->translate_chat = RecordBool(rec, "translate_chat", &isnull);
	t->texts[0] = RecordLongText(rec, "question_neutral");
	t->texts[1] = RecordLongText(rec, "answer_neutral");
	t->texts[2] = RecordLongText(rec, "question_translated");
	t->texts[3] = RecordLongText(rec, "answer_translated");
	t->fallback = RecordBool(rec, "answer_translated_is_fallback", &isnull);
	t->has_fallback = !isnull;
	t->metadata = RecordJsonb(rec, "metadata", false, false);
	/* erase_identity leaves only tombstones under its stand-in */
	if (!t->tombstone && g->identity != NULL && IsErasedIdentity(g->identity))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("a live turn of session \"%s\" under the erased identity \"%s\"",
					   g->session_name, text_to_cstring(g->identity)),
				errdetail("erase_identity leaves only tombstones under the identity it puts in place of the erased one."));
	if (t->tombstone)
	{
		if (t->texts[0] || t->texts[1] || t->texts[2] || t->texts[3] || t->metadata)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("a tombstone keeps no text"),
					errdetail("The turn has deleted_at set, so its texts and metadata must be null."));
	}
	else
	{
		if (t->texts[0] == NULL)
			ReportBadRecord(rec, "key \"%s\" of %s record must be set unless the turn is a tombstone",
							"question_neutral", NULL);
		if (VARSIZE_ANY_EXHDR(t->texts[0]) == 0)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("question_neutral must not be empty"));
		if (t->finalized && t->texts[1] == NULL)
			ReportBadRecord(rec, "key \"%s\" of %s record must be set when finalized_at is",
							"answer_neutral", NULL);
	}
	if (t->metadata != NULL)
	{
		Jsonb	   *kept = MetadataFilterStored(t->metadata);

		counts->metadata_keys_dropped += JB_ROOT_COUNT(t->metadata) - (kept ? JB_ROOT_COUNT(kept) : 0);
		t->metadata = kept;
	}
	for (i = 0; i < 3; i++)
	{
		static const char *const labels[3] = {"pipeline_name", "consultant", "repository"};

		t->labels[i] = RecordText(rec, labels[i], false);
		if (t->labels[i] != NULL)
			CheckIdLength(VARSIZE_ANY_EXHDR(t->labels[i]), labels[i]);
	}
	g->nturns++;
}

/* A retrieval or clarification record: (session_id, turn_no, two jsonb, recorded_at). */
static void
ImportTurnData(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	TurnDataRow *d;
	bool		isnull;
	bool		retrieval = (rec->type == REC_RETRIEVAL);
	int			i;

	CheckInGroup(rec, g, RecordId(rec, "session_id", true));
	g->data = GroupGrow(g, g->data, g->ndata, &g->maxdata, sizeof(TurnDataRow));
	d = &g->data[g->ndata];
	d->recno = rec->recno;
	d->type = rec->type;
	d->turn_no = RecordNumber(rec, "turn_no", true, 1, &isnull);
	for (i = 0; i < g->ndata; i++)
		if (g->data[i].type == d->type && g->data[i].turn_no == d->turn_no)
			ReportBadRecord(rec, psprintf("turn " INT64_FORMAT " of session \"%s\" has two %s records",
										  d->turn_no, g->session_name, record_type_names[d->type]),
							NULL, NULL);
	if (retrieval)
	{
		d->first = RecordJsonb(rec, "chunks", true, true);
		d->second = RecordJsonb(rec, "citations", true, true);
		/* what record_retrieval stores: chunk objects, citations resolved to chunks */
		CheckChunkArray(d->first, "chunks");
		CheckChunkArray(d->second, "citations");
	}
	else
	{
		d->first = RecordJsonb(rec, "questions", true, true);
		d->second = RecordJsonb(rec, "inferred_context", true, false);
		CheckQuestions(&d->first->root, "questions");
	}
	d->recorded_at = RecordTimestamp(rec, "recorded_at", true, &isnull);
	g->ndata++;
}

static void
ImportSummary(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	bool		isnull;

	CheckInGroup(rec, g, RecordId(rec, "session_id", true));
	if (g->summary_recno)
		ReportBadRecord(rec, psprintf("session \"%s\" has two summaries", g->session_name), NULL, NULL);
	g->summary = RecordLongText(rec, "summary");
	if (g->summary == NULL)
		(void) RecordText(rec, "summary", true);
	g->summary_through = RecordNumber(rec, "through_turn_no", true, 1, &isnull);
	g->summary_covered = RecordNumber(rec, "covered_messages", false, 0, &isnull);
	if (isnull)
		g->summary_covered = -1;
	g->summary_updated_at = RecordTimestamp(rec, "updated_at", true, &isnull);
	g->summary_recno = rec->recno;
}

/*
 * A context record: in its session's group, or standing alone (a
 * conversation without a session row, or one an identity export took
 * for its user_id). One that exists already is skipped, or refused; so is
 * one that an erasure deleted (CheckContextNotErased).
 */
static void
ImportContext(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts)
{
	text	   *conversation_id = RecordId(rec, "conversation_id", true);
	Jsonb	   *ctx;
	text	   *raw_user;
	text	   *user;
	TimestampTz created_at;
	TimestampTz updated_at;
	bool		isnull;
	bool		in_group;

	rec->group_id = text_to_cstring(conversation_id);
	in_group = g->open && strcmp(g->session_name, rec->group_id) == 0;
	ctx = RecordJsonb(rec, "context", true, false);
	ContextCheckShape(ctx);
	raw_user = RecordId(rec, "user_id", false);
	user = MappedIdentity(opts, raw_user);
	created_at = RecordTimestamp(rec, "created_at", true, &isnull);
	updated_at = RecordTimestamp(rec, "updated_at", true, &isnull);
	if (updated_at < created_at)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("updated_at of the context of conversation \"%s\" is before its created_at", rec->group_id));
	CheckContextNotErased(opts, conversation_id, rec->group_id, raw_user, user);
	if (in_group)
	{
		if (g->context_recno)
			ReportBadRecord(rec, psprintf("conversation \"%s\" has two contexts", g->session_name), NULL, NULL);
		g->context_recno = rec->recno;
		g->context = ctx;
		g->context_user = user;
		g->context_created_at = created_at;
		g->context_updated_at = updated_at;
		return;
	}

	/* standing alone: written now */
	CheckFirstInBatch(opts, rec, "conversation", conversation_id);
	WriteContext(opts, conversation_id, rec->group_id, ctx, user, created_at, updated_at, counts);
}

/*
 * The most dimensions an embedding may have: what its companion's models
 * take (pgvector's HNSW index takes no more).
 */
#define IMPORT_MAX_DIMENSIONS 2000

static int
NumericCmp(Numeric a, Numeric b)
{
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(a), NumericGetDatum(b)));
}

/*
 * The elements of an embedding, JSON numbers, as pgvector's text of a
 * vector of float4: each number rounded to the nearest float4 and written
 * as the shortest text that reads back as it, so that the text is never
 * much longer than the record (a number such as 1e-1000 is tested against
 * float4's range before it is ever written out in digits). Numbers too
 * small for a float4 are 0, as pgvector's input makes them; too large is
 * 22003.
 */
static char *
EmbeddingText(ImportRecord *rec, Jsonb *embedding)
{
	Numeric		max = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum("3.4028235e38"),
														  ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
	Numeric		min = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum("1e-46"),
														  ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
	JsonbIterator *it = JsonbIteratorInit(&embedding->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	StringInfoData out;
	int			n = 0;

	initStringInfo(&out);
	appendStringInfoChar(&out, '[');
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char		buf[FLOAT_SHORTEST_DECIMAL_LEN];
		float		f = 0.0f;
		Numeric		x;
		Numeric		abs;

		if (tok != WJB_ELEM)
			continue;
		if (v.type != jbvNumeric)
			ReportBadRecord(rec, "key \"%s\" of %s record must be an array of numbers", "embedding", NULL);
		x = v.val.numeric;
		abs = DatumGetNumeric(DirectFunctionCall1(numeric_abs, NumericGetDatum(x)));
		if (NumericCmp(abs, max) > 0)
			ereport(ERROR,
					errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					errmsg("element %d of the embedding is out of range for a vector", n + 1),
					errdetail("pgvector stores single precision floats, at most 3.4028235e38 in magnitude."));
		if (NumericCmp(abs, min) >= 0)
		{
			char	   *digits = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(x)));

			f = strtof(digits, NULL);
			pfree(digits);
		}
		pfree(abs);
		float_to_shortest_decimal_buf(f, buf);
		if (n++ > 0)
			appendStringInfoChar(&out, ',');
		appendStringInfoString(&out, buf);
	}
	appendStringInfoChar(&out, ']');
	return out.data;
}

/*
 * An embedding record: (session_id, turn_id, model, embedding,
 * stored_at), the embedding a non-empty array of numbers; stored when
 * the group is written (WriteGroupEmbeddings). A turn has one embedding
 * of a model.
 */
static void
ImportEmbedding(ImportRecord *rec, SessionGroup *g)
{
	EmbeddingRow *e;
	Jsonb	   *embedding;
	bool		isnull;
	int			i;

	CheckInGroup(rec, g, RecordId(rec, "session_id", true));
	g->embeddings = GroupGrow(g, g->embeddings, g->nembeddings, &g->maxembeddings,
							  sizeof(EmbeddingRow));
	e = &g->embeddings[g->nembeddings];
	e->recno = rec->recno;
	e->turn_id = RecordUuid(rec, "turn_id", true);
	e->model = RecordId(rec, "model", true);
	for (i = 0; i < g->nembeddings; i++)
		if (memcmp(g->embeddings[i].turn_id->data, e->turn_id->data, UUID_LEN) == 0 &&
			TextEqual(g->embeddings[i].model, e->model))
			ReportBadRecord(rec, psprintf("turn %s of session \"%s\" has two embeddings of model \"%s\"",
										  UuidString(e->turn_id), g->session_name, text_to_cstring(e->model)),
							NULL, NULL);
	embedding = RecordJsonb(rec, "embedding", true, true);
	if (JB_ROOT_COUNT(embedding) == 0 || JB_ROOT_COUNT(embedding) > IMPORT_MAX_DIMENSIONS)
		ReportBadRecord(rec, psprintf("key \"%%s\" of %%s record must have 1 to %d elements",
									  IMPORT_MAX_DIMENSIONS), "embedding", NULL);
	e->embedding = EmbeddingText(rec, embedding);
	e->stored_at = RecordTimestamp(rec, "stored_at", true, &isnull);
	g->nembeddings++;
}

/*
 * Take one record, parsed. What a group keeps of it is copied into the
 * current memory context (the group's): texts, ids and jsonb values.
 */
static void
ImportOne(ImportOptions *opts, ImportRecord *rec, Jsonb *jb, SessionGroup *g, ImportCounts *counts)
{
	JsonbValue	tv;
	int			t;

	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("an import record must be a JSON object, not %s", JsonbRootTypeName(jb)));
	rec->obj = &jb->root;
	if (JSONB_KEY(rec->obj, "type", &tv) == NULL || tv.type != jbvString)
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("an import record must have a string \"type\""));
	for (t = 0; t < REC_TYPES; t++)
		if (JsonbStringIs(&tv, record_type_names[t]))
			break;
	if (t == REC_TYPES)
		ereport(ERROR,
				errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				errmsg("unknown record type \"%s\"", pnstrdup(tv.val.string.val, tv.val.string.len)),
				errdetail("Import takes records of type session, turn, retrieval, clarification, summary, context and embedding; the tool reads the header and trailer."));
	rec->type = (RecordType) t;
	rec->type_known = true;
	CheckRecordKeys(rec);

	switch (rec->type)
	{
		case REC_SESSION:
			ImportSession(opts, rec, g, counts);
			break;
		case REC_TURN:
			ImportTurn(opts, rec, g, counts);
			break;
		case REC_RETRIEVAL:
		case REC_CLARIFICATION:
			ImportTurnData(opts, rec, g, counts);
			break;
		case REC_SUMMARY:
			ImportSummary(opts, rec, g, counts);
			break;
		case REC_CONTEXT:
			ImportContext(opts, rec, g, counts);
			break;
		case REC_EMBEDDING:
			ImportEmbedding(rec, g);
			break;
		case REC_TYPES:
			break;
	}
}

/*
 * Does the record of line start a new group (a session record, or a
 * context of a conversation other than the open group's)? Read cheaply,
 * before the record is parsed into the group's memory.
 */
static bool
StartsGroup(Jsonb *jb, SessionGroup *g)
{
	JsonbValue	v;

	if (JSONB_KEY(&jb->root, "type", &v) == NULL || v.type != jbvString)
		return false;
	if (JsonbStringIs(&v, "session"))
		return true;
	if (!JsonbStringIs(&v, "context") || !g->open)
		return false;
	if (JSONB_KEY(&jb->root, "conversation_id", &v) == NULL || v.type != jbvString)
		return false;
	return (int) strlen(g->session_name) != v.val.string.len ||
		memcmp(g->session_name, v.val.string.val, v.val.string.len) != 0;
}

/* Take the records of lines (a one-dimensional text array) in order. */
static void
ImportBatch(ImportOptions *opts, ArrayType *lines, ImportCounts *counts)
{
	ArrayIterator it;
	Datum		d;
	bool		isnull;
	ImportRecord rec;
	SessionGroup g;
	ErrorContextCallback errcb;
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext per_record;
	HASHCTL		hctl;

	memset(&rec, 0, sizeof(rec));
	memset(&g, 0, sizeof(g));
	if (ARR_NDIM(lines) > 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("records must be a one-dimensional array"));

	import_latest = GetCurrentTransactionStartTimestamp() + IMPORT_CLOCK_SKEW;
	hctl.keysize = CONVCTX_MAX_ID_BYTES + 3;
	hctl.entrysize = hctl.keysize;
	hctl.hcxt = caller;
	opts->seen = hash_create("convctx import ids", 256, &hctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	/* a group's records live in its context until it is written */
	g.cxt = AllocSetContextCreate(caller, "convctx import group", ALLOCSET_DEFAULT_SIZES);
	per_record = AllocSetContextCreate(caller, "convctx import record", ALLOCSET_DEFAULT_SIZES);
	errcb.callback = ImportErrorContext;
	errcb.arg = &rec;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	SPI_connect();
	it = array_create_iterator(lines, 0, NULL);
	while (array_iterate(it, &d, &isnull))
	{
		Jsonb	   *jb;

		rec.recno++;
		rec.type_known = false;
		rec.group_id = NULL;
		if (isnull)
			ereport(ERROR,
					errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					errmsg("an import record must not be null"));
		MemoryContextSwitchTo(per_record);
		jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text_to_cstring(DatumGetTextPP(d)))));
		/* a record that starts a group ends the one before */
		if (StartsGroup(jb, &g))
		{
			int			recno = rec.recno;

			MemoryContextSwitchTo(g.cxt);
			FinishGroup(opts, &rec, &g, counts);
			MemoryContextReset(g.cxt);
			rec.recno = recno;
			rec.type_known = false;
			rec.group_id = NULL;
		}
		MemoryContextSwitchTo(g.cxt);
		ImportOne(opts, &rec, jb, &g, counts);
		MemoryContextSwitchTo(caller);
		MemoryContextReset(per_record);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextSwitchTo(g.cxt);
	FinishGroup(opts, &rec, &g, counts);
	MemoryContextSwitchTo(caller);
	rec.recno = 0;
	array_free_iterator(it);
	SPI_finish();
	error_context_stack = errcb.previous;
}

/* The identity map argument: an object of non-empty string ids, or NULL. */
static Jsonb *
ArgIdentityMap(FunctionCallInfo fcinfo, int argno)
{
	Jsonb	   *map = ArgOptionalObject(fcinfo, argno, "identity_map");
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (map == NULL)
		return NULL;
	it = JsonbIteratorInit(&map->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_KEY && tok != WJB_VALUE)
			continue;
		if (v.type != jbvString || v.val.string.len == 0)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("identity_map must map identity ids to identity ids"),
					errdetail("Its keys and values must be non-empty strings."));
		CheckIdLength(v.val.string.len, "an identity id of identity_map");
	}
	return map;
}

/* The audit row of an import: what it wrote and skipped, never content. */
static void
AuditImport(text *tenant, ImportCounts *counts)
{
	JsonbParseState *details = NULL;
	int			t;

	pushJsonbValue(&details, WJB_BEGIN_OBJECT, NULL);
	for (t = 0; t < REC_TYPES; t++)
	{
		JsonbPushKey(&details, record_type_plurals[t]);
		JsonbPushInt(&details, WJB_VALUE, counts->imported[t]);
	}
	JsonbPushKey(&details, "skipped");
	JsonbPushInt(&details, WJB_VALUE, counts->skipped[REC_SESSION] + counts->skipped[REC_CONTEXT]);
	SPI_connect();
	AuditWrite(tenant, "import", NULL, NULL, JsonbEndObjectText(&details));
	SPI_finish();
}

PG_FUNCTION_INFO_V1(convctx_import_records);

/*
 * import_records(records, on_conflict, allow_anonymous, as_identity,
 * identity_map) -> setof (record_type, imported, skipped, skipped_why)
 */
Datum
convctx_import_records(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(import_records);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ImportOptions opts;
	ImportCounts counts;
	ArrayType  *lines;
	text	   *on_conflict;
	int			t;

	VariantRefuse("convctx.import_records()",
				  "Import into a single server first, then distribute with convctx.distribute().");
	ArgNotNull(fcinfo, 0, "records");
	lines = PG_GETARG_ARRAYTYPE_P(0);
	on_conflict = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	memset(&opts, 0, sizeof(opts));
	memset(&counts, 0, sizeof(counts));
	if (on_conflict == NULL || strcmp(text_to_cstring(on_conflict), "skip") == 0)
		opts.error_on_conflict = false;
	else if (strcmp(text_to_cstring(on_conflict), "error") == 0)
		opts.error_on_conflict = true;
	else
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("on_conflict must be \"skip\" or \"error\""));
	opts.allow_anonymous = PG_ARGISNULL(2) ? false : PG_GETARG_BOOL(2);
	opts.as_identity = ArgOptionalId(fcinfo, 3, "as_identity");
	opts.identity_map = ArgIdentityMap(fcinfo, 4);
	opts.tenant = CurrentTenant();

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	ImportBatch(&opts, lines, &counts);
	AuditImport(opts.tenant, &counts);

	for (t = 0; t < REC_TYPES; t++)
	{
		Datum		row[4];
		bool		row_nulls[4] = {false, false, false, false};
		JsonbParseState *why = NULL;
		int			r;

		pushJsonbValue(&why, WJB_BEGIN_OBJECT, NULL);
		for (r = 0; r < SKIP_REASONS; r++)
			if (counts.skipped_why[t][r] > 0)
			{
				JsonbPushKey(&why, skip_reason_names[r]);
				JsonbPushInt(&why, WJB_VALUE, counts.skipped_why[t][r]);
			}
		row[0] = CStringGetTextDatum(record_type_names[t]);
		row[1] = Int64GetDatum(counts.imported[t]);
		row[2] = Int64GetDatum(counts.skipped[t]);
		row[3] = JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&why, WJB_END_OBJECT, NULL)));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, row_nulls);
	}
	if (counts.metadata_keys_dropped > 0)
	{
		Datum		row[4];
		bool		row_nulls[4] = {false, false, false, false};
		JsonbParseState *why = NULL;

		pushJsonbValue(&why, WJB_BEGIN_OBJECT, NULL);
		JsonbPushKey(&why, "not in convctx.metadata_allowlist");
		JsonbPushInt(&why, WJB_VALUE, counts.metadata_keys_dropped);
		row[0] = CStringGetTextDatum("metadata key");
		row[1] = Int64GetDatum(0);
		row[2] = Int64GetDatum(counts.metadata_keys_dropped);
		row[3] = JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&why, WJB_END_OBJECT, NULL)));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, row_nulls);
	}
	return (Datum) 0;
}
