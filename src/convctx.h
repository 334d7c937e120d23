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
#include "utils/jsonb.h"
#include "utils/uuid.h"

/* Longest id (conversation, session, request, identity, user) accepted. */
#define CONVCTX_MAX_ID_BYTES 1024

/* The key of a context object that holds the referenced node ids. */
#define CONVCTX_ACTIVE_NODE_IDS "activeNodeIds"

/* Settings (convctx.c) */
extern char *convctx_tenant;
extern int	convctx_max_active_nodes;
extern int	convctx_max_session_turns;
extern int	convctx_max_text_bytes;
extern char *convctx_metadata_allowlist;
extern char *convctx_ip_hash_salt;
extern int	convctx_session_ttl;
extern int	convctx_turn_retention;
extern int	convctx_context_ttl;
extern int	convctx_summary_threshold;

/* SQLSTATE of a refused link of a session to a second identity. */
#define ERRCODE_CONVCTX_SESSION_LINKED MAKE_SQLSTATE('C','V','0','0','1')

/* Tenancy (convctx.c) */
extern text *CurrentTenant(void);

/* Argument checks (convctx.c) */
extern text *ArgRequiredId(FunctionCallInfo fcinfo, int argno, const char *what);
extern text *ArgOptionalId(FunctionCallInfo fcinfo, int argno, const char *what);

extern text *ArgOptionalText(FunctionCallInfo fcinfo, int argno, const char *what);
extern Jsonb *ArgOptionalObject(FunctionCallInfo fcinfo, int argno, const char *what);
extern int32 ArgLimit(FunctionCallInfo fcinfo, int argno, const char *what);
extern void CheckTextSize(text *t, const char *what);

/* jsonb helpers (jsonb_util.c) */
extern const char *JsonbValueTypeName(JsonbValue *v);
extern const char *JsonbRootTypeName(Jsonb *jb);
extern bool JsonbIsArray(Jsonb *jb);
extern JsonbValue *JsonbObjectString(JsonbContainer *obj, const char *key,
									 const char *what, JsonbValue *out);
extern void JsonbPushKey(JsonbParseState **state, const char *key);
extern void JsonbPushString(JsonbParseState **state, JsonbIteratorToken tok,
							const char *str, int len);
extern void JsonbPushNull(JsonbParseState **state, JsonbIteratorToken tok);
extern void JsonbPushBool(JsonbParseState **state, JsonbIteratorToken tok, bool b);
extern void JsonbPushInt(JsonbParseState **state, JsonbIteratorToken tok, int64 i);
extern void JsonbPushJsonb(JsonbParseState **state, JsonbIteratorToken tok, Jsonb *jb);

/* Context objects (context.c) */
extern void ContextCheckShape(Jsonb *ctx);
extern Jsonb *ContextMerge(Jsonb *ctx, ArrayType *node_ids, int max_nodes);

/* Request metadata (metadata.c) */
extern Jsonb *MetadataFilter(Jsonb *meta, bool question_neutral_is_fallback);

/* Session links (session_link.c) */
extern void SessionLinkLocked(text *tenant, text *session_id, text *current_identity,
							  text *identity_id, bool backfill);

/* Turn helpers shared with the lifecycle (turns.c) */
extern pg_uuid_t *ArgTurnId(FunctionCallInfo fcinfo, int argno);
extern char *UuidString(pg_uuid_t *id);
extern bool SessionLock(text *tenant, text *session_id);

/* Prompt data that redaction forgets (prompt_state.c) */
extern void PromptForget(text *tenant, text *session_id, int64 turn_no);
extern int64 PromptTurnNo(text *tenant, text *session_id, pg_uuid_t *turn_id);

/* The audit log (audit.c) */
extern void AuditWrite(text *tenant, const char *action, text *session_id,
					   text *identity_id, const char *details_json);
extern bool AuditWriteAutonomous(text *tenant, const char *action, text *session_id,
								 text *identity_id, const char *details_json);

/* Statements run by a background worker in a transaction of its own (worker.c) */
extern bool WorkerRunSql(const char *dbname, const char *sql, int nargs,
						 const char **args, char **result, char **error);

/* SPI plans kept for the life of the backend (spi_util.c) */
extern SPIPlanPtr SpiKeptPlan(SPIPlanPtr *cache, const char *sql,
							  int nargs, Oid *argtypes);
extern int	SpiRunPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
					   bool read_only, long count, int expected_rc);

#endif							/* CONVCTX_H */
