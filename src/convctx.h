/*-------------------------------------------------------------------------
 *
 * convctx.h
 *	  Declarations shared by the convctx C files: settings, tenancy,
 *	  argument checks and SPI helpers.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/convctx.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_H
#define CONVCTX_H

#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "utils/jsonb.h"
#include "utils/uuid.h"

/* Longest id (conversation, session, request, identity, user) accepted. */
#define CONVCTX_MAX_ID_BYTES 1024

/* The key of a context object that holds the referenced node ids. */
#define CONVCTX_ACTIVE_NODE_IDS "activeNodeIds"

/* Settings (settings.c) */
extern void SettingsDefine(void);
extern char *convctx_tenant;
extern int	convctx_tenant_scope;
extern int	convctx_max_active_nodes;
extern int	convctx_max_session_turns;
extern int	convctx_max_text_bytes;
extern char *convctx_metadata_allowlist;
extern char *convctx_ip_hash_key;
extern char *convctx_ip_hash_salt;
extern char *convctx_identity_hash_key;
extern int	convctx_session_ttl;
extern int	convctx_turn_retention;
extern int	convctx_context_ttl;
extern int	convctx_audit_retention;
extern int	convctx_purge_pause;

/* purge_all's pause after a pass, in ms (docs/retention.md, test/bench/lifecycle.sh) */
#define CONVCTX_PURGE_PAUSE_DEFAULT 500
extern int	convctx_summary_threshold;

/* Values of convctx.tenant_scope: how long a convctx.tenant value counts. */
typedef enum TenantScope
{
	TENANT_SCOPE_SESSION,		/* until changed: the PostgreSQL default */
	TENANT_SCOPE_TRANSACTION	/* only in the transaction that set it */
} TenantScope;

/* SQLSTATE of a refused link of a session to a second identity. */
#define ERRCODE_CONVCTX_SESSION_LINKED MAKE_SQLSTATE('C','V','0','0','1')

/* Tenancy (tenancy.c) */
extern void TenancyInit(void);
extern text *CurrentTenant(void);
extern const char *BoundTenant(void);
extern bool TenantTravelsWithCall(void);
extern int	TenantForCallBegin(text *tenant);
extern void TenantForCallEnd(int nestlevel);

/* Citus (citus.c) */
extern void CitusInit(void);
extern bool ConvctxDistributed(void);
extern bool CitusInternalBackend(void);
extern Oid	CitusReferenceShard(Oid relid);
extern void CitusRefuse(const char *function, const char *hint);
extern bool CitusKeepCallHere(Query *parse);

/* Argument checks (args.c) */
extern void ArgNotNull(FunctionCallInfo fcinfo, int argno, const char *what);
extern text *ArgRequiredId(FunctionCallInfo fcinfo, int argno, const char *what);
extern text *ArgOptionalId(FunctionCallInfo fcinfo, int argno, const char *what);

extern text *ArgOptionalText(FunctionCallInfo fcinfo, int argno, const char *what);
extern text *ArgOptionalLabel(FunctionCallInfo fcinfo, int argno, const char *what);
extern Jsonb *ArgOptionalObject(FunctionCallInfo fcinfo, int argno, const char *what);
extern int32 ArgLimit(FunctionCallInfo fcinfo, int argno, const char *what);
extern void CheckMaxTextBytes(Size len, const char *msg, const char *subject_has);
extern void CheckTextSize(text *t, const char *what);
extern void CheckIdLength(int len, const char *what);

/* jsonb helpers (jsonb_util.c) */

/* Look a key up by a string literal, its length counted by the compiler. */
#define JSONB_KEY(container, key, out) \
	getKeyJsonValueFromContainer((container), "" key "", sizeof(key) - 1, (out))
extern void JsonbWrongType(const char *got, const char *fmt,...)
			pg_attribute_printf(2, 3) pg_attribute_noreturn();
extern const char *JsonbValueTypeName(JsonbValue *v);
extern const char *JsonbRootTypeName(Jsonb *jb);
extern bool JsonbIsArray(Jsonb *jb);
extern bool JsonbStringIs(JsonbValue *v, const char *str);
extern JsonbValue *JsonbObjectString(JsonbContainer *obj, const char *key,
									 const char *what, JsonbValue *out);
extern void JsonbPushKey(JsonbParseState **state, const char *key);
extern void JsonbPushString(JsonbParseState **state, JsonbIteratorToken tok,
							const char *str, int len);
extern void JsonbPushText(JsonbParseState **state, JsonbIteratorToken tok, text *t);
extern void JsonbPushNull(JsonbParseState **state, JsonbIteratorToken tok);
extern void JsonbPushBool(JsonbParseState **state, JsonbIteratorToken tok, bool b);
extern void JsonbPushInt(JsonbParseState **state, JsonbIteratorToken tok, int64 i);
extern char *JsonbEndObjectText(JsonbParseState **state);
extern void JsonbPushJsonb(JsonbParseState **state, JsonbIteratorToken tok, Jsonb *jb);

/* Context objects (context.c) */
extern void ContextCheckShape(Jsonb *ctx);
extern Jsonb *ContextMerge(Jsonb *ctx, ArrayType *node_ids, int max_nodes);

/* Request metadata (metadata.c) */
extern Jsonb *MetadataFilter(Jsonb *meta, bool question_neutral_is_fallback);
extern Jsonb *MetadataFilterStored(Jsonb *meta);
extern void CheckMetadataSize(Datum merged);
extern char *KeyedHashHex(const char *key, const char *data, int len);

/* What an erased identity becomes (lifecycle.c) */
extern text *ErasedIdentity(text *tenant, text *identity_id);
extern text *LegacyErasedIdentity(text *identity_id);
extern bool IsErasedIdentity(text *identity);

/* Session titles (browser.c) */
extern void CheckSessionTitle(text *title);

/* Session links (session_link.c) */
extern void SessionLinkLocked(text *tenant, text *session_id, text *current_identity,
							  text *identity_id, bool backfill);

/*
 * SQL fragments used by statements in several files (a fragment used by
 * one file is defined there).
 *
 * The key of a conversation's rows, tenant $1 and session
 * $2, as every per-session statement states it (bare, or for a table
 * alias). Shared so that the key reads the same in every file.
 */
#define SESSION_KEY \
	"tenant_id OPERATOR(pg_catalog.=) $1 AND session_id OPERATOR(pg_catalog.=) $2"
#define SESSION_KEY_AT(alias) \
	alias ".tenant_id OPERATOR(pg_catalog.=) $1 AND " \
	alias ".session_id OPERATOR(pg_catalog.=) $2"

/*
 * SQL fragment: the SET item of every statement that counts as activity of a
 * conversation on its convctx.session row (a turn started, a link, a context
 * written). Anonymous sessions expire convctx.session_ttl after it. The
 * expiry index holds activity_bin, a generated column (last_activity_at
 * rounded down to 10 minutes) that follows without being named here; it
 * changes at most once per bin, so almost every update stays HOT.
 * It never moves backwards: a statement that waited for the row's lock
 * took its timestamp before it waited, and may find a later one there,
 * written by a statement of the transaction it waited for (and moving back
 * would show the conversation twice to list_conversations' paging).
 */
#define SESSION_ACTIVITY_SET \
	" last_activity_at = GREATEST(last_activity_at, pg_catalog.statement_timestamp())"

/*
 * The same in the DO UPDATE of an INSERT ... ON CONFLICT AS s that inserts
 * the session row: the time the inserted row got by default. Citus refuses
 * a function that is not immutable there (and a generic plan of one
 * crashes Citus 13.2), and so every timestamp of such a statement is taken
 * once.
 */
#define SESSION_ACTIVITY_UPSERT \
	" last_activity_at = GREATEST(s.last_activity_at, EXCLUDED.last_activity_at)"

/*
 * SQL fragment: what convctx.session.first_question stores of question q,
 * the start of the default title of the conversation browser: its first
 * 4 x 80 characters after its leading white space (browser.c folds its
 * white space and cuts it to 80 when it shows it). No backslash: a
 * statement's text must not depend on standard_conforming_strings.
 */
#define FIRST_QUESTION_OF(q) \
	"pg_catalog.\"left\"(pg_catalog.ltrim(" q ", ' ' OPERATOR(pg_catalog.||)" \
	" pg_catalog.chr(9) OPERATOR(pg_catalog.||) pg_catalog.chr(10) OPERATOR(pg_catalog.||)" \
	" pg_catalog.chr(11) OPERATOR(pg_catalog.||) pg_catalog.chr(12) OPERATOR(pg_catalog.||)" \
	" pg_catalog.chr(13)), 320)"

/*
 * SQL fragment: first_question as it is now for the session (tenant,
 * session), from its first live current-version turn, NULL when it has
 * none; cond leaves out (" AND ...", on turn alias q) the turns that the
 * statement itself deletes or redacts, which its snapshot still shows.
 * Every writer that deletes or redacts turns sets it so, under the
 * session row's lock, so that the browser never shows a question that is
 * gone.
 */
#define FIRST_LIVE_QUESTION(tenant, session, cond) \
	"(SELECT " FIRST_QUESTION_OF("q.question_neutral") " FROM convctx.turn q" \
	"   WHERE q.tenant_id OPERATOR(pg_catalog.=) " tenant \
	"     AND q.session_id OPERATOR(pg_catalog.=) " session \
	"     AND q.deleted_at IS NULL AND q.replaced_by_turn_id IS NULL" cond \
	"   ORDER BY q.turn_no LIMIT 1)"

/*
 * cond of FIRST_LIVE_QUESTION: not a live current version that a CTE "d"
 * (returning tenant_id, session_id, turn_no, deleted_at and
 * replaced_by_turn_id, as they were before) deleted or redacted.
 */
#define NOT_REMOVED_BY_D \
	" AND (q.tenant_id, q.session_id, q.turn_no) NOT IN (SELECT d.tenant_id, d.session_id, d.turn_no" \
	"        FROM d WHERE d.deleted_at IS NULL AND d.replaced_by_turn_id IS NULL)"

/*
 * SQL fragment: the matching adjustment of the messages that summaries
 * cover, for a CTE "d" that also returned turn_no.
 */
#define SUMMARY_COVERED_ADJUST_D \
	" sadj AS (UPDATE convctx.session_summary ss" \
	"   SET covered_messages = ss.covered_messages OPERATOR(pg_catalog.-) a.msgs" \
	"   FROM (SELECT d.tenant_id, d.session_id," \
	"                pg_catalog.count(*) OPERATOR(pg_catalog.+) pg_catalog.count(d.finalized_at) AS msgs" \
	"           FROM d JOIN convctx.session_summary s2" \
	"             ON s2.tenant_id OPERATOR(pg_catalog.=) d.tenant_id" \
	"            AND s2.session_id OPERATOR(pg_catalog.=) d.session_id" \
	"            AND d.turn_no OPERATOR(pg_catalog.<=) s2.through_turn_no" \
	"          WHERE d.deleted_at IS NULL AND d.replaced_by_turn_id IS NULL" \
	"          GROUP BY d.tenant_id, d.session_id) a" \
	"  WHERE ss.tenant_id OPERATOR(pg_catalog.=) a.tenant_id" \
	"    AND ss.session_id OPERATOR(pg_catalog.=) a.session_id)"

/*
 * The same for the one session $1, $2 of the statement, keyed by it in
 * every part, so that Citus sends it to that session's shard only.
 */
#define SUMMARY_COVERED_ADJUST_D_ONE \
	" sadj AS (UPDATE convctx.session_summary ss" \
	"   SET covered_messages = ss.covered_messages OPERATOR(pg_catalog.-) a.msgs" \
	"   FROM (SELECT pg_catalog.count(*) OPERATOR(pg_catalog.+) pg_catalog.count(d.finalized_at) AS msgs" \
	"           FROM d JOIN convctx.session_summary s2" \
	"             ON " SESSION_KEY_AT("s2") \
	"            AND d.turn_no OPERATOR(pg_catalog.<=) s2.through_turn_no" \
	"          WHERE d.deleted_at IS NULL AND d.replaced_by_turn_id IS NULL) a" \
	"  WHERE " SESSION_KEY_AT("ss") " AND a.msgs OPERATOR(pg_catalog.>) 0)"

/* Turn helpers shared with the lifecycle (turns.c) */
extern pg_uuid_t *ArgTurnId(FunctionCallInfo fcinfo, int argno);
extern char *UuidString(pg_uuid_t *id);
extern void ReportTurnNotFound(pg_uuid_t *turn_id, text *session_id) pg_attribute_noreturn();
extern bool SessionLock(text *tenant, text *session_id);
extern int64 LiveTurnNo(text *tenant, text *session_id, pg_uuid_t *turn_id);

/* A page of conversation_turns read directly, when it may be (recent_turns.c) */
extern bool TurnPageRead(text *tenant, text *session_id, bool forward, int64 bound, int32 limit,
						 struct Tuplestorestate *result, TupleDesc desc);

/* A row of list_conversations as the session row holds it (recent_turns.c) */
typedef struct ListPageRow
{
	text	   *session_id;
	text	   *title;			/* NULL: none set */
	text	   *first_question; /* NULL: no live question */
	TimestampTz created_at;
	TimestampTz last_activity_at;
	int64		live_turns;
	bool		linked_later;
} ListPageRow;

/* A page of list_conversations read directly, when it may be (recent_turns.c) */
extern bool ListPageRead(text *tenant, text *identity, TimestampTz after_activity,
						 text *after_session, int32 page_size, ListPageRow **rows, int *count);

/* Shapes of retrievals and clarifications (prompt_citations.c, prompt_clarification.c) */
extern void CheckChunkArray(Jsonb *arr, const char *what);
extern void CheckQuestions(JsonbContainer *arr, const char *what);

/* Prompt data that redaction forgets (prompt_state.c) */
extern void PromptForget(text *tenant, text *session_id, int64 turn_no);
extern void PromptForgetSessions(text *tenant, Datum sessions);

/* The audit log (audit.c) */
extern void AuditWrite(text *tenant, const char *action, text *session_id,
					   text *identity_id, const char *details_json);
extern bool AuditWriteAutonomous(text *tenant, const char *action, text *session_id,
								 text *identity_id, const char *details_json);

/* Statements run by a background worker in a transaction of its own (worker.c) */
#define WORKER_AUTONOMOUS		0x01	/* survive the caller's cancel (audit rows) */
#define WORKER_CHECK_PG_CRON	0x02	/* check the cron objects belong to pg_cron */
#define WORKER_AS_OWNER			0x04	/* with AUTONOMOUS: the extension's owner may act (Citus) */
extern bool WorkerRunSql(Oid database, Oid role, int flags, const char *sql, int nargs,
						 const char **args, char **result, char **error, int *sqlstate);
extern void CronCheckMembers(void);

/* SPI plans kept for the life of the backend (spi_util.c) */
extern void SpiInit(void);
extern SPIPlanPtr SpiKeptPlan(SPIPlanPtr *cache, const char *sql,
							  int nargs, Oid *argtypes);
extern int	SpiRunPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
					   bool read_only, long count, int expected_rc);
extern int	SpiRunBulkPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
						   bool read_only, long count, int expected_rc);
extern int	SpiRunBulkPlanLatest(SPIPlanPtr plan, Datum *values, const char *nulls,
								 int expected_rc);
extern bool SpiBulkReadLatest(bool on);
extern int	SpiRunSessionPlan(SPIPlanPtr *cache, const char *sql, text *tenant,
							  text *session_id, bool read_only, long count, int expected_rc);
extern int64 SpiFirstInt8(void);
extern Datum SpiFirstDatumCopy(int col, bool *isnull);
extern SPITupleTable *SpiReadNewestTurns(SPIPlanPtr plan, Datum *values, int64 want,
										 int64 last, int64 span, uint64 *nrows);
extern Oid	ConvctxNamespace(void);

/*
 * First line of every SQL-callable function that writes, as its first
 * declaration (CONVCTX_WRITER(start_turn);): on a standby and in a
 * read-only transaction it fails with 25006 naming the function
 * ("convctx.start_turn()"), before any other initializer reads an argument
 * or any statement runs (spi_util.c).
 */
extern bool CheckWritable(const char *function);
#define CONVCTX_WRITER(name) \
	bool		convctx_writable pg_attribute_unused() = CheckWritable("convctx." #name "()")

/* Acting as the extension's owner for the tables (spi_util.c) */
typedef struct OwnerSwitch
{
	Oid			user;
	int			sec_context;
	int			depth;
	int			nestlevel;		/* of the settings changed as the owner */
} OwnerSwitch;
extern void ActAsOwner(OwnerSwitch *sw);
extern void ActAsCaller(OwnerSwitch *sw);
extern Oid	ConvctxInvoker(void);
extern Oid	ConvctxOwner(void);

#endif							/* CONVCTX_H */
