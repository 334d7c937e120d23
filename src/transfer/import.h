/*-------------------------------------------------------------------------
 *
 * import.h
 *	  What the files of import_records share (import.c, import_record.c,
 *	  import_write.c, import_merge.c, import_group.c): the records, groups
 *	  and counts.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/transfer/import.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_IMPORT_H
#define CONVCTX_IMPORT_H

#include "postgres.h"

#include "executor/spi.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

/* The record types of the format, in the order of their counts. */
typedef enum RecordType
{
	REC_SESSION,
	REC_TURN,
	REC_RETRIEVAL,
	REC_CLARIFICATION,
	REC_SUMMARY,
	REC_CONTEXT,
	REC_EMBEDDING,
	REC_TYPES
} RecordType;

/* What the caller asked for, the same for the whole batch. */
typedef struct ImportOptions
{
	text	   *tenant;
	bool		error_on_conflict;	/* on_conflict 'error' rather than 'skip' */
	bool		allow_anonymous;	/* keep anonymous sessions the purge would take */
	text	   *as_identity;	/* identity for anonymous sessions, or NULL */
	Jsonb	   *identity_map;	/* {"old": "new", ...}, or NULL */
	TimestampTz latest;			/* no time may be later (a day after the call) */
	HTAB	   *seen;			/* session and conversation ids of this batch */
} ImportOptions;

/* A turn record of the group being read, checked, not written yet. */
typedef struct TurnRow
{
	int			recno;
	pg_uuid_t  *turn_id;
	int64		turn_no;
	text	   *request_id;
	int32		version;
	pg_uuid_t  *replaced_by;	/* NULL for the current version */
	text	   *identity;
	TimestampTz created_at;
	TimestampTz finalized_at;	/* with finalized */
	TimestampTz deleted_at;		/* with tombstone */
	bool		finalized;
	bool		tombstone;
	int64		redaction;		/* with has_redaction */
	bool		has_redaction;
	bool		translate_chat;
	text	   *texts[4];		/* question, answer, neutral then translated */
	bool		fallback;		/* answer_translated_is_fallback, with has_fallback */
	bool		has_fallback;
	Jsonb	   *metadata;
	text	   *labels[3];		/* pipeline_name, consultant, repository */
} TurnRow;

/* A retrieval or clarification record of the group: (turn_no, two jsonb, time). */
typedef struct TurnDataRow
{
	int			recno;
	RecordType	type;
	int64		turn_no;
	Jsonb	   *first;			/* chunks, questions */
	Jsonb	   *second;			/* citations, inferred_context */
	TimestampTz recorded_at;
} TurnDataRow;

/* An embedding record of the group (its companion's, core/companion.h). */
typedef struct EmbeddingRow
{
	int			recno;
	pg_uuid_t  *turn_id;
	text	   *model;
	char	   *embedding;		/* the JSON array, pgvector's text of a vector */
	TimestampTz stored_at;
} EmbeddingRow;

/*
 * The session group being read: its session record's values, then its
 * records, all kept (in the group's memory context) until the group ends,
 * when it is checked whole and written.
 */
typedef struct SessionGroup
{
	MemoryContext cxt;			/* the group's values; reset when it ends */
	bool		open;
	bool		existing;		/* the session exists: the group is merged */
	text	   *stored_identity;	/* an existing session's identity (after a link) */
	int64		stored_last_turn_no;	/* an existing session's newest turn number */
	text	   *stored_title;	/* an existing session's title, NULL: none */
	int64		stored_redactions;	/* an existing session's redaction generation */
	TimestampTz stored_last_activity_at;
	bool		link_added;		/* an existing anonymous session linked by the file */
	text	   *title;			/* the file's title, NULL: none */
	int			recno;			/* its session record */
	text	   *session_id;
	char	   *session_name;	/* for messages */
	text	   *identity;		/* after identity_map and as_identity */
	bool		link_now;		/* linked by as_identity: linked_at is now */
	TimestampTz linked_at;
	TimestampTz created_at;
	TimestampTz last_activity_at;
	/* what the session record states (has_* false: not stated) */
	bool		has_last_turn_no,
				has_live_turns,
				has_live_answers,
				has_summary_through,
				has_redactions;
	int64		last_turn_no,
				live_turns,
				live_answers,
				summary_through_stated,
				redactions;
	bool		summary_through_null;
	/* its records */
	TurnRow    *turns;
	int			nturns;
	int			maxturns;
	TurnDataRow *data;
	int			ndata;
	int			maxdata;
	int			summary_recno;	/* 0: none */
	text	   *summary;
	int64		summary_through;
	int64		summary_covered;	/* -1: not stated */
	TimestampTz summary_updated_at;
	int			context_recno;	/* 0: none */
	Jsonb	   *context;
	text	   *context_user;
	TimestampTz context_created_at;
	TimestampTz context_updated_at;
	EmbeddingRow *embeddings;
	int			nembeddings;
	int			maxembeddings;
} SessionGroup;

/* The record being read, for the error context and the messages. */
typedef struct ImportRecord
{
	int			recno;			/* 1-based, in the batch */
	RecordType	type;
	bool		type_known;
	JsonbContainer *obj;
	const char *group_id;		/* its session or conversation id, once read */
} ImportRecord;

/*
 * Why a record was skipped: the database has it as the file has it, has a
 * later state of it (finalized, corrected or written again here since the
 * export), redacted its turn, or removed its turn (retention, the
 * anonymous cap) after numbering it; for an embedding also: this database
 * has not their companion, or not the model; for the session record of a
 * merge also: the session has another title here, which is kept.
 */
typedef enum SkipReason
{
	SKIP_THERE,
	SKIP_CHANGED,
	SKIP_REDACTED,
	SKIP_REMOVED,
	SKIP_NO_COMPANION,
	SKIP_NO_MODEL,
	SKIP_OTHER_TITLE,
	SKIP_REASONS
} SkipReason;

typedef struct ImportCounts
{
	int64		imported[REC_TYPES];
	int64		skipped[REC_TYPES];
	int64		skipped_why[REC_TYPES][SKIP_REASONS];
	int64		metadata_keys_dropped;
} ImportCounts;

/* Largest turn number, version, redaction generation or count taken. */
#define IMPORT_MAX_NUMBER PG_INT32_MAX

/* Latest time taken: the call's plus a day (clocks of other servers). */
#define IMPORT_CLOCK_SKEW (USECS_PER_DAY)

/* Written again (a newer one from the file) as set_summary writes it. */
#define SUMMARY_INSERT_SQL \
	"INSERT INTO convctx.session_summary (tenant_id, session_id, summary, through_turn_no," \
	" covered_messages, updated_at) VALUES ($1, $2, $3, $4, $5, $6)" \
	" ON CONFLICT (tenant_id, session_id) DO UPDATE" \
	" SET summary = EXCLUDED.summary, through_turn_no = EXCLUDED.through_turn_no," \
	"     covered_messages = EXCLUDED.covered_messages, updated_at = EXCLUDED.updated_at"

/*
 * What the conversation browser reads from the session row (s), from the
 * turns and link as they are now: the start of the first live question,
 * and whether the session was linked after it was created.
 */
#define SESSION_BROWSER_SET \
	"  first_question = " FIRST_LIVE_QUESTION("$1", "$2", "") "," \
	"  linked_later = COALESCE((SELECT l.linked_at OPERATOR(pg_catalog.>) s.created_at" \
	"                             FROM convctx.session_link l WHERE " SESSION_KEY_AT("l") "), false)"

#define LIVE_TURN_OF(alias) \
	" FROM convctx.turn t WHERE " SESSION_KEY_AT("t") \
	"   AND t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL"
/*
 * The derived values of a merged session, counted again from its rows as
 * the API keeps them: $3 the file's newest turn number, $4 its last
 * activity, $5 its redactions, $6 its title when the merge takes it (NULL:
 * the session's is kept). Returns the live turns.
 */

#define SESSION_MERGE_SQL \
	"UPDATE convctx.session s SET" \
	"  last_turn_no = GREATEST(s.last_turn_no, $3)," \
	"  last_activity_at = GREATEST(s.last_activity_at, $4)," \
	"  redactions = GREATEST(s.redactions, $5)," \
	"  title = COALESCE($6, s.title)," \
	"  live_turns = (SELECT pg_catalog.count(*)" LIVE_TURN_OF("t") ")," \
	"  live_answers = (SELECT pg_catalog.count(t.finalized_at)" LIVE_TURN_OF("t") ")," \
	"  summary_through_turn_no = (SELECT m.through_turn_no FROM convctx.session_summary m" \
	"                              WHERE " SESSION_KEY_AT("m") ")," \
	SESSION_BROWSER_SET \
	" WHERE " SESSION_KEY_AT("s") \
	" RETURNING s.live_turns"
#define SUMMARY_COVERED_SQL \
	"UPDATE convctx.session_summary m SET covered_messages =" \
	"  (SELECT pg_catalog.count(*) OPERATOR(pg_catalog.+) pg_catalog.count(t.finalized_at)" LIVE_TURN_OF("t") \
	"      AND t.turn_no OPERATOR(pg_catalog.<=) m.through_turn_no)" \
	" WHERE " SESSION_KEY_AT("m")

extern SPIPlanPtr summary_insert_plan;

extern TimestampTz import_latest;
extern const char *const record_type_names[REC_TYPES];
extern void CountSkipped(ImportCounts *counts, RecordType type, SkipReason why);
extern void ImportErrorContext(void *arg);
extern void ReportBadRecord(ImportRecord *rec, const char *msg, const char *key, const char *detail)
			pg_attribute_noreturn();
extern JsonbValue *RecordValue(ImportRecord *rec, const char *key, JsonbValue *out);
extern text *RecordText(ImportRecord *rec, const char *key, bool required);
extern text *RecordId(ImportRecord *rec, const char *key, bool required);
extern text *RecordLongText(ImportRecord *rec, const char *key);
extern int64 RecordNumber(ImportRecord *rec, const char *key, bool required, int64 min, bool *isnull);
extern TimestampTz RecordTimestamp(ImportRecord *rec, const char *key, bool required, bool *isnull);
extern pg_uuid_t *RecordUuid(ImportRecord *rec, const char *key, bool required);
extern bool RecordBool(ImportRecord *rec, const char *key, bool *isnull);
extern Jsonb *RecordJsonb(ImportRecord *rec, const char *key, bool required, bool array);
extern void CheckRecordKeys(ImportRecord *rec);
extern text *MappedIdentity(ImportOptions *opts, text *identity);
extern Datum TextOrNull(text *t, char *null);
extern void ReportGroup(ImportRecord *rec, int recno, RecordType type, const char *msg, const char *detail)
			pg_attribute_noreturn();
extern int TurnRowById(const void *a, const void *b);
extern int TurnRowByNumber(const void *a, const void *b);
extern TurnRow *CurrentTurn(SessionGroup *g, int64 turn_no);
extern void CheckTurnChains(ImportRecord *rec, SessionGroup *g);
extern void WriteTurns(ImportOptions *opts, SessionGroup *g, TurnRow *rows, int n);
extern void WriteContext(ImportOptions *opts, text *conversation_id, const char *name, Jsonb *ctx, text *user, TimestampTz created_at, TimestampTz updated_at, ImportCounts *counts);
extern void WriteGroupContext(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts);
extern void InsertTurnData(Datum *key, TurnDataRow *d);
extern void MergeGroup(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts, int64 max_turn_no, int64 max_redaction);
extern void FinishGroup(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts);
extern void WriteGroupEmbeddings(ImportOptions *opts, ImportRecord *rec, SessionGroup *g, ImportCounts *counts);

extern Datum GetTurnId(TurnRow *t, bool *isnull);
extern Datum GetTurnNo(TurnRow *t, bool *isnull);
extern Datum GetRequestId(TurnRow *t, bool *isnull);
extern Datum GetVersion(TurnRow *t, bool *isnull);
extern Datum GetReplacedBy(TurnRow *t, bool *isnull);
extern Datum GetIdentity(TurnRow *t, bool *isnull);
extern Datum GetCreatedAt(TurnRow *t, bool *isnull);
extern Datum GetFinalizedAt(TurnRow *t, bool *isnull);
extern Datum GetDeletedAt(TurnRow *t, bool *isnull);
extern Datum GetRedaction(TurnRow *t, bool *isnull);
extern Datum GetTranslateChat(TurnRow *t, bool *isnull);
extern Datum GetQuestion(TurnRow *t, bool *isnull);
extern Datum GetAnswer(TurnRow *t, bool *isnull);
extern Datum GetQuestionTranslated(TurnRow *t, bool *isnull);
extern Datum GetAnswerTranslated(TurnRow *t, bool *isnull);
extern Datum GetFallback(TurnRow *t, bool *isnull);
extern Datum GetMetadata(TurnRow *t, bool *isnull);
extern Datum GetPipeline(TurnRow *t, bool *isnull);
extern Datum GetConsultant(TurnRow *t, bool *isnull);
extern Datum GetRepository(TurnRow *t, bool *isnull);

#endif							/* CONVCTX_IMPORT_H */
