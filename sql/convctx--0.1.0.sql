/* convctx--0.1.0.sql: conversation memory for LLM chat backends */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION convctx" to load this file. \quit

COMMENT ON SCHEMA convctx IS
    'convctx: conversation memory for LLM chat backends (turns, contexts, redaction, retention)';

------------------------------------------------------------------------------
-- Tenancy
------------------------------------------------------------------------------

CREATE FUNCTION convctx.current_tenant()
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_current_tenant'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.current_tenant() IS
    'tenant the calling session acts for: the setting convctx.tenant, or '''' (single-tenant default)';

------------------------------------------------------------------------------
-- Conversation context store
------------------------------------------------------------------------------

CREATE TABLE convctx.conversation_context (
    tenant_id        text COLLATE "C" NOT NULL,
    conversation_id  text COLLATE "C" NOT NULL,
    context_json     jsonb       NOT NULL,
    user_id          text,
    created_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT conversation_context_pkey PRIMARY KEY (tenant_id, conversation_id),
    CONSTRAINT conversation_context_is_object
        CHECK (pg_catalog.jsonb_typeof(context_json) OPERATOR(pg_catalog.=) 'object')
);

COMMENT ON TABLE convctx.conversation_context IS
    'per-conversation context: the knowledge-graph node ids a conversation has referenced (never chat text)';
COMMENT ON COLUMN convctx.conversation_context.tenant_id IS
    'tenant that owns the conversation (convctx.current_tenant() of the writer)';
COMMENT ON COLUMN convctx.conversation_context.conversation_id IS
    'conversation id; the same value as session_id in the turn store';
COMMENT ON COLUMN convctx.conversation_context.context_json IS
    'context object {"activeNodeIds": [...], ...}; activeNodeIds runs from least to most recently referenced';
COMMENT ON COLUMN convctx.conversation_context.user_id IS
    'last user known to have written the context (auditing only, not part of the key)';

SELECT pg_catalog.pg_extension_config_dump('convctx.conversation_context', '');

CREATE FUNCTION convctx.context_merge(ctx jsonb, node_ids text[], max_nodes integer DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_context_merge'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.context_merge(jsonb, text[], integer) IS
    'merge node ids into a context, most recently referenced last, keeping at most max_nodes (default convctx.max_active_nodes); other keys unchanged';

CREATE FUNCTION convctx.context_load(conversation_id text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_context_load'
LANGUAGE C STABLE PARALLEL RESTRICTED;

COMMENT ON FUNCTION convctx.context_load(text) IS
    'stored context of a conversation of the current tenant, or NULL when there is none';

CREATE FUNCTION convctx.context_save(conversation_id text, ctx jsonb, user_id text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_context_save'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.context_save(text, jsonb, text) IS
    'validate a context and store it as the full snapshot of a conversation of the current tenant';

CREATE FUNCTION convctx.context_add(conversation_id text, node_ids text[], user_id text DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_context_add'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.context_add(text, text[], text) IS
    'merge node ids into a conversation''s stored context in one statement (safe under concurrency) and return it';

CREATE FUNCTION convctx.context_aspect(ctx jsonb, nodes jsonb DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_context_aspect'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.context_aspect(jsonb, jsonb) IS
    'system-prompt paragraph listing the active concepts of a context, described by node objects {id, prefLabel, name, jurisdiction, shortDescription}; NULL when none are active';

------------------------------------------------------------------------------
-- Turn history
------------------------------------------------------------------------------

CREATE TABLE convctx.session (
    tenant_id         text COLLATE "C" NOT NULL,
    session_id        text COLLATE "C" NOT NULL,
    identity_id       text COLLATE "C",
    created_at        timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    last_activity_at  timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    last_turn_no      bigint      NOT NULL DEFAULT 0,
    live_turns        bigint      NOT NULL DEFAULT 0,
    live_answers      bigint      NOT NULL DEFAULT 0,
    CONSTRAINT session_pkey PRIMARY KEY (tenant_id, session_id)
);

COMMENT ON TABLE convctx.session IS
    'one row per conversation session: its identity once linked, its last activity and the number of its newest turn';
COMMENT ON COLUMN convctx.session.identity_id IS
    'identity the session is linked to (mirrors convctx.session_link); NULL for an anonymous session, which is capped and expires';
COMMENT ON COLUMN convctx.session.last_activity_at IS
    'when the session last started a turn or was linked; anonymous sessions expire convctx.session_ttl after it';
COMMENT ON COLUMN convctx.session.last_turn_no IS
    'turn_no of the session''s newest turn; new turns take the next number under this row''s lock';

COMMENT ON COLUMN convctx.session.live_turns IS
    'number of live (not redacted) current-version turns, kept up to date by every function that adds, redacts or deletes one';
COMMENT ON COLUMN convctx.session.live_answers IS
    'number of those turns that are finalized; live_turns + live_answers is the message count of the conversation';

SELECT pg_catalog.pg_extension_config_dump('convctx.session', '');

CREATE TABLE convctx.session_link (
    tenant_id    text COLLATE "C" NOT NULL,
    session_id   text COLLATE "C" NOT NULL,
    identity_id  text COLLATE "C" NOT NULL,
    linked_at    timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT session_link_pkey PRIMARY KEY (tenant_id, session_id)
);

CREATE INDEX session_link_identity ON convctx.session_link (tenant_id, identity_id);

COMMENT ON TABLE convctx.session_link IS
    'session to identity links: one identity per session, never changed once made';

SELECT pg_catalog.pg_extension_config_dump('convctx.session_link', '');

CREATE TABLE convctx.turn (
    tenant_id                      text COLLATE "C" NOT NULL,
    session_id                     text COLLATE "C" NOT NULL,
    turn_id                        uuid        NOT NULL,
    turn_no                        bigint      NOT NULL,
    request_id                     text COLLATE "C" NOT NULL,
    identity_id                    text COLLATE "C",
    created_at                     timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    finalized_at                   timestamptz,
    pipeline_name                  text,
    consultant                     text,
    repository                     text,
    translate_chat                 boolean     NOT NULL DEFAULT false,
    question_neutral               text,
    answer_neutral                 text,
    question_translated            text,
    answer_translated              text,
    answer_translated_is_fallback  boolean,
    metadata                       jsonb,
    record_version                 integer     NOT NULL DEFAULT 1,
    replaced_by_turn_id            uuid,
    deleted_at                     timestamptz,
    CONSTRAINT turn_pkey PRIMARY KEY (tenant_id, session_id, turn_id),
    CONSTRAINT turn_live_has_question
        CHECK (deleted_at IS NOT NULL OR question_neutral IS NOT NULL),
    CONSTRAINT turn_finalized_has_answer
        CHECK (deleted_at IS NOT NULL OR finalized_at IS NULL OR answer_neutral IS NOT NULL)
);

-- Idempotency: one current version per (session, request).
CREATE UNIQUE INDEX turn_request_current ON convctx.turn (tenant_id, session_id, request_id)
    WHERE replaced_by_turn_id IS NULL;
-- Chronology: recent reads walk it backwards, the anonymous cap deletes a prefix of it.
CREATE INDEX turn_chronology ON convctx.turn (tenant_id, session_id, turn_no);

COMMENT ON TABLE convctx.turn IS
    'one row per chat request (and per correction of its answer): question at start, answer at finalize';
COMMENT ON COLUMN convctx.turn.turn_no IS
    'position of the turn in its session (1, 2, ...): exact chronology; all versions of a turn share it';
COMMENT ON COLUMN convctx.turn.request_id IS
    'idempotency key of the chat request: unique per session among current versions';
COMMENT ON COLUMN convctx.turn.metadata IS
    'allowlisted request metadata (convctx.metadata_allowlist); a raw ip is stored only as ip_hash';
COMMENT ON COLUMN convctx.turn.record_version IS
    'version of the turn: 1 at start, +1 for each replace_turn correction';
COMMENT ON COLUMN convctx.turn.replaced_by_turn_id IS
    'for an old version, the turn_id of the version that replaced it; NULL for the current version';
COMMENT ON COLUMN convctx.turn.deleted_at IS
    'set when the turn was redacted: a tombstone keeps ids and timestamps, no text';

SELECT pg_catalog.pg_extension_config_dump('convctx.turn', '');

CREATE SEQUENCE convctx.audit_log_audit_id_seq;

CREATE TABLE convctx.audit_log (
    tenant_id    text COLLATE "C" NOT NULL,
    audit_id     bigint      NOT NULL DEFAULT pg_catalog.nextval('convctx.audit_log_audit_id_seq'),
    logged_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    role_name    text        NOT NULL DEFAULT CURRENT_USER,
    action       text        NOT NULL,
    session_id   text,
    identity_id  text COLLATE "C",
    details      jsonb       NOT NULL DEFAULT '{}',
    CONSTRAINT audit_log_pkey PRIMARY KEY (tenant_id, audit_id)
);

ALTER SEQUENCE convctx.audit_log_audit_id_seq OWNED BY convctx.audit_log.audit_id;

COMMENT ON TABLE convctx.audit_log IS
    'security and administration events (refused links, redactions, erasures, purges): ids and counts, never content';

SELECT pg_catalog.pg_extension_config_dump('convctx.audit_log', '');
SELECT pg_catalog.pg_extension_config_dump('convctx.audit_log_audit_id_seq', '');

CREATE FUNCTION convctx.start_turn(
    session_id text,
    request_id text,
    question_neutral text,
    identity_id text DEFAULT NULL,
    question_translated text DEFAULT NULL,
    translate_chat boolean DEFAULT false,
    meta jsonb DEFAULT NULL,
    pipeline_name text DEFAULT NULL,
    consultant text DEFAULT NULL,
    repository text DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME', 'convctx_start_turn'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.start_turn(text, text, text, text, text, boolean, jsonb, text, text, text) IS
    'start the turn of a chat request; idempotent on (session_id, request_id): a repeat returns the same turn_id and changes nothing';

CREATE FUNCTION convctx.finalize_turn(
    session_id text,
    turn_id uuid,
    answer_neutral text,
    answer_translated text DEFAULT NULL,
    answer_translated_is_fallback boolean DEFAULT NULL,
    meta jsonb DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_finalize_turn'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.finalize_turn(text, uuid, text, text, boolean, jsonb) IS
    'store the answer of a started turn; repeating it with the same answer changes nothing, a different answer is refused (use replace_turn)';

CREATE FUNCTION convctx.recent_turns(session_id text, turn_limit integer DEFAULT 10)
RETURNS TABLE (turn_id uuid, request_id text, created_at timestamptz, finalized_at timestamptz,
               question_neutral text, answer_neutral text, question_translated text,
               answer_translated text, metadata jsonb)
AS 'MODULE_PATHNAME', 'convctx_recent_turns'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 10;

COMMENT ON FUNCTION convctx.recent_turns(text, integer) IS
    'the last turn_limit finalized, non-redacted, current-version turns of a session, oldest first';

CREATE FUNCTION convctx.recent_turns_json(session_id text, turn_limit integer DEFAULT 10)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_recent_turns_json'
LANGUAGE C STABLE PARALLEL RESTRICTED;

COMMENT ON FUNCTION convctx.recent_turns_json(text, integer) IS
    'recent_turns as a JSON array of {"question_neutral", "answer_neutral"} objects, oldest first, for prompt history';

CREATE FUNCTION convctx.link_session(identity_id text, session_id text, backfill boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_link_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.link_session(text, text, boolean) IS
    'link a session to an identity (idempotent); linking to a different identity is refused (SQLSTATE CV001) and audited; backfill gives the session''s turns the identity';

CREATE FUNCTION convctx.replace_turn(
    session_id text,
    turn_id uuid,
    answer_neutral text,
    answer_translated text DEFAULT NULL,
    meta jsonb DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME', 'convctx_replace_turn'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.replace_turn(text, uuid, text, text, jsonb) IS
    'correct the answer of a finalized turn: a new current version (record_version + 1) whose turn_id is returned; the old version is kept';

------------------------------------------------------------------------------
-- Lifecycle: redaction, erasure, retention
------------------------------------------------------------------------------

-- Retention of old turns walks this index from its oldest end.
CREATE INDEX turn_created ON convctx.turn (created_at);

CREATE FUNCTION convctx.redact_turn(session_id text, turn_id uuid)
RETURNS boolean
AS 'MODULE_PATHNAME', 'convctx_redact_turn'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.redact_turn(text, uuid) IS
    'turn a turn and all its versions into tombstones (ids and timestamps kept, text and metadata cleared); false when already redacted';

CREATE FUNCTION convctx.redact_session(session_id text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'convctx_redact_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.redact_session(text) IS
    'redact every live turn of a session; returns how many turns were redacted';

CREATE FUNCTION convctx.erase_identity(identity_id text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'convctx_erase_identity'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.erase_identity(text) IS
    'right to erasure: redact every turn of every session linked to the identity and delete their contexts; returns how many turns';

CREATE FUNCTION convctx.retention_settings(
    OUT session_ttl interval, OUT turn_retention interval, OUT context_ttl interval)
AS 'MODULE_PATHNAME', 'convctx_retention_settings'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.retention_settings() IS
    'the retention settings in force as intervals (NULL = kept forever): convctx.session_ttl, convctx.turn_retention, convctx.context_ttl';

CREATE FUNCTION convctx.purge(batch_size integer DEFAULT 10000)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_purge'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.purge(integer) IS
    'one retention pass over every tenant, at most batch_size rows of each kind; returns the counts per kind and logs them';

CREATE PROCEDURE convctx.purge_all(batch_size integer DEFAULT 10000)
AS 'MODULE_PATHNAME', 'convctx_purge_all'
LANGUAGE C;

COMMENT ON PROCEDURE convctx.purge_all(integer) IS
    'repeat purge with a COMMIT after each batch until nothing is left (inside a transaction block: one transaction)';

CREATE FUNCTION convctx.schedule_retention(schedule text DEFAULT '*/10 * * * *')
RETURNS bigint
AS 'MODULE_PATHNAME', 'convctx_schedule_retention'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.schedule_retention(text) IS
    'schedule CALL convctx.purge_all() with pg_cron as job convctx-retention (replacing an earlier schedule); returns the job id';

CREATE FUNCTION convctx.unschedule_retention()
RETURNS boolean
AS 'MODULE_PATHNAME', 'convctx_unschedule_retention'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.unschedule_retention() IS
    'remove the convctx-retention pg_cron job of this database and role; false when there was none';

------------------------------------------------------------------------------
-- Administration views (every tenant)
------------------------------------------------------------------------------

CREATE VIEW convctx.sessions AS
SELECT s.tenant_id AS tenant,
       s.session_id,
       s.identity_id,
       COALESCE(t.turns, 0) AS turns,
       COALESCE(t.finalized, 0) AS finalized,
       COALESCE(t.redacted, 0) AS redacted,
       t.first_at,
       s.last_activity_at AS last_at,
       CASE WHEN s.identity_id IS NULL
            THEN s.last_activity_at OPERATOR(pg_catalog.+) r.session_ttl END AS expires_at
FROM convctx.session s
LEFT JOIN (SELECT tenant_id, session_id,
                  count(*) FILTER (WHERE replaced_by_turn_id IS NULL) AS turns,
                  count(*) FILTER (WHERE replaced_by_turn_id IS NULL AND finalized_at IS NOT NULL
                                     AND deleted_at IS NULL) AS finalized,
                  count(*) FILTER (WHERE replaced_by_turn_id IS NULL AND deleted_at IS NOT NULL) AS redacted,
                  min(created_at) AS first_at
           FROM convctx.turn
           GROUP BY tenant_id, session_id) t
       ON t.tenant_id OPERATOR(pg_catalog.=) s.tenant_id
      AND t.session_id OPERATOR(pg_catalog.=) s.session_id
CROSS JOIN convctx.retention_settings() r;

COMMENT ON VIEW convctx.sessions IS
    'every session of every tenant: identity, turns (current versions), finalized and redacted ones, first and last activity, expiry of anonymous sessions';

CREATE VIEW convctx.stats AS
WITH tenants AS (
    SELECT tenant_id FROM convctx.session
    UNION SELECT tenant_id FROM convctx.conversation_context),
sessions AS (
    SELECT tenant_id, count(*) AS sessions,
           count(*) FILTER (WHERE identity_id IS NULL) AS anonymous_sessions,
           count(*) FILTER (WHERE identity_id IS NOT NULL) AS linked_sessions
    FROM convctx.session GROUP BY tenant_id),
turns AS (
    SELECT tenant_id, count(*) FILTER (WHERE replaced_by_turn_id IS NULL) AS turns,
           count(*) FILTER (WHERE replaced_by_turn_id IS NOT NULL) AS old_versions,
           count(*) FILTER (WHERE deleted_at IS NOT NULL AND replaced_by_turn_id IS NULL) AS tombstones
    FROM convctx.turn GROUP BY tenant_id),
contexts AS (
    SELECT tenant_id, count(*) AS contexts FROM convctx.conversation_context GROUP BY tenant_id),
sizes AS (
    SELECT sum(pg_catalog.pg_table_size(c.oid)) AS table_bytes,
           sum(pg_catalog.pg_indexes_size(c.oid)) AS index_bytes
    FROM pg_catalog.pg_class c
    WHERE c.relnamespace OPERATOR(pg_catalog.=) 'convctx'::pg_catalog.regnamespace
      AND c.relkind OPERATOR(pg_catalog.=) 'r')
SELECT t.tenant_id AS tenant,
       COALESCE(s.sessions, 0) AS sessions,
       COALESCE(s.anonymous_sessions, 0) AS anonymous_sessions,
       COALESCE(s.linked_sessions, 0) AS linked_sessions,
       COALESCE(u.turns, 0) AS turns,
       COALESCE(u.old_versions, 0) AS old_versions,
       COALESCE(u.tombstones, 0) AS tombstones,
       COALESCE(c.contexts, 0) AS contexts,
       z.table_bytes,
       z.index_bytes
FROM tenants t
LEFT JOIN sessions s USING (tenant_id)
LEFT JOIN turns u USING (tenant_id)
LEFT JOIN contexts c USING (tenant_id)
CROSS JOIN sizes z;

COMMENT ON VIEW convctx.stats IS
    'per tenant: sessions (anonymous, linked), turns, old versions, tombstones, contexts; table_bytes and index_bytes are for all convctx tables together';

------------------------------------------------------------------------------
-- Prompt assembly
------------------------------------------------------------------------------

CREATE TABLE convctx.session_summary (
    tenant_id        text COLLATE "C" NOT NULL,
    session_id       text COLLATE "C" NOT NULL,
    summary          text        NOT NULL,
    through_turn_no  bigint      NOT NULL,
    covered_messages bigint      NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT session_summary_pkey PRIMARY KEY (tenant_id, session_id),
    CONSTRAINT session_summary_session FOREIGN KEY (tenant_id, session_id)
        REFERENCES convctx.session ON DELETE CASCADE
);

COMMENT ON TABLE convctx.session_summary IS
    'the app''s LLM-written summary of a session''s turns up to through_turn_no; dropped when a turn it covers is redacted';

COMMENT ON COLUMN convctx.session_summary.covered_messages IS
    'messages of live turns up to through_turn_no, kept up to date so that needs_summary never counts turns';

SELECT pg_catalog.pg_extension_config_dump('convctx.session_summary', '');

CREATE TABLE convctx.turn_retrieval (
    tenant_id    text COLLATE "C" NOT NULL,
    session_id   text COLLATE "C" NOT NULL,
    turn_no      bigint      NOT NULL,
    chunks       jsonb       NOT NULL,
    citations    jsonb       NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT turn_retrieval_pkey PRIMARY KEY (tenant_id, session_id, turn_no),
    CONSTRAINT turn_retrieval_session FOREIGN KEY (tenant_id, session_id)
        REFERENCES convctx.session ON DELETE CASCADE
);

COMMENT ON TABLE convctx.turn_retrieval IS
    'chunks retrieved for a turn and the citations its answer used, each stored in full so history never goes stale';

SELECT pg_catalog.pg_extension_config_dump('convctx.turn_retrieval', '');

CREATE TABLE convctx.clarification (
    tenant_id         text COLLATE "C" NOT NULL,
    session_id        text COLLATE "C" NOT NULL,
    turn_no           bigint      NOT NULL,
    questions         jsonb       NOT NULL,
    inferred_context  jsonb       NOT NULL,
    recorded_at       timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT clarification_pkey PRIMARY KEY (tenant_id, session_id, turn_no),
    CONSTRAINT clarification_session FOREIGN KEY (tenant_id, session_id)
        REFERENCES convctx.session ON DELETE CASCADE
);

COMMENT ON TABLE convctx.clarification IS
    'clarification questions asked at a turn and the model''s inferred context, to rebuild the full context of the answer turn';

SELECT pg_catalog.pg_extension_config_dump('convctx.clarification', '');

CREATE TABLE convctx.followup_phrase (
    tenant_id  text COLLATE "C" NOT NULL,
    kind       text    NOT NULL,
    phrase     text    NOT NULL,
    builtin    boolean NOT NULL DEFAULT false,
    CONSTRAINT followup_phrase_pkey PRIMARY KEY (tenant_id, kind, phrase),
    CONSTRAINT followup_phrase_kind CHECK (kind IN ('clarification', 'fresh_keyword'))
);

COMMENT ON TABLE convctx.followup_phrase IS
    'phrases of is_followup: clarification phrases (reuse the previous context) and fresh_keyword (always retrieve); tenant '''' applies to every tenant';

INSERT INTO convctx.followup_phrase (tenant_id, kind, phrase, builtin) VALUES
    ('', 'clarification', '¿seguro?', true),
    ('', 'clarification', '¿estás seguro?', true),
    ('', 'clarification', '¿está seguro?', true),
    ('', 'clarification', 'explícame más', true),
    ('', 'clarification', 'explícalo', true),
    ('', 'clarification', '¿qué quieres decir?', true),
    ('', 'clarification', 'are you sure', true),
    ('', 'clarification', 'explain more', true),
    ('', 'clarification', 'tell me more', true),
    ('', 'clarification', 'what do you mean', true),
    ('', 'clarification', 'can you elaborate', true),
    ('', 'clarification', 'can you clarify', true),
    ('', 'fresh_keyword', 'artículo', true),
    ('', 'fresh_keyword', 'ley', true),
    ('', 'fresh_keyword', 'código', true),
    ('', 'fresh_keyword', 'article', true),
    ('', 'fresh_keyword', 'law', true),
    ('', 'fresh_keyword', 'code', true),
    ('', 'fresh_keyword', 'section', true),
    ('', 'fresh_keyword', 'statute', true);

-- pg_dump keeps the rows tenants added, not the ones this script installs.
SELECT pg_catalog.pg_extension_config_dump('convctx.followup_phrase', 'WHERE NOT builtin');

CREATE FUNCTION convctx.conversation_state(session_id text, message_window integer DEFAULT 10)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_conversation_state'
LANGUAGE C STABLE PARALLEL RESTRICTED;

COMMENT ON FUNCTION convctx.conversation_state(text, integer) IS
    'the conversation state for a planner prompt: message count, first message flag, recent messages, referenced entities, summary and whether a new one is needed';

CREATE FUNCTION convctx.set_summary(session_id text, summary text, through_turn uuid)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_set_summary'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.set_summary(text, text, uuid) IS
    'store the app''s summary of every turn of a session up to and including through_turn, replacing an older one';

CREATE FUNCTION convctx.turns_to_summarize(session_id text, message_window integer DEFAULT 10)
RETURNS TABLE (turn_id uuid, created_at timestamptz, question_neutral text, answer_neutral text)
AS 'MODULE_PATHNAME', 'convctx_turns_to_summarize'
LANGUAGE C STABLE PARALLEL RESTRICTED;

COMMENT ON FUNCTION convctx.turns_to_summarize(text, integer) IS
    'the live turns older than the message window and not covered by the stored summary, oldest first: what to feed the summarizer';

CREATE FUNCTION convctx.render_conversation_state(state jsonb)
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_render_conversation_state'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.render_conversation_state(jsonb) IS
    'planner context text of a conversation state: summary, the last 5 messages cut at 200 characters, first message note, up to 10 entities';

CREATE FUNCTION convctx.record_retrieval(session_id text, turn_id uuid, chunks jsonb, citations jsonb DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_record_retrieval'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.record_retrieval(text, uuid, jsonb, jsonb) IS
    'store the chunks retrieved for a turn and the citations its answer used ({"id"} references resolved to full chunks); replaces an earlier record';

CREATE FUNCTION convctx.context_history(session_id text, turns integer DEFAULT 5, current_chunks jsonb DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_context_history'
LANGUAGE C STABLE PARALLEL RESTRICTED;

COMMENT ON FUNCTION convctx.context_history(text, integer, jsonb) IS
    'unified citation context: all chunks of the previous turn, cited chunks of older ones, then current chunks, indexed 1..n, each chunk id once';

CREATE FUNCTION convctx.render_context_history(history jsonb, labels jsonb DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_render_context_history'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.render_context_history(jsonb, jsonb) IS
    'text form of context_history: section headers (overridable through labels {"immediate", "history", "current"}) and [k] source - title, Title:, Text: per chunk';

CREATE FUNCTION convctx.is_followup(query text, session_id text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'convctx_is_followup'
LANGUAGE C STABLE PARALLEL RESTRICTED;

COMMENT ON FUNCTION convctx.is_followup(text, text) IS
    'context decision: true means reuse the previous context and skip retrieval (short query or clarification phrase, no fresh-retrieval keyword)';

CREATE FUNCTION convctx.record_clarification(session_id text, turn_id uuid, questions jsonb, inferred_context jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_record_clarification'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.record_clarification(text, uuid, jsonb, jsonb) IS
    'store the clarification questions asked at a turn and the model''s inferred context; replaces an earlier record';

CREATE FUNCTION convctx.clarification_context(session_id text, turn_id uuid, answers jsonb DEFAULT '{}')
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_clarification_context'
LANGUAGE C STABLE PARALLEL RESTRICTED;

COMMENT ON FUNCTION convctx.clarification_context(text, uuid, jsonb) IS
    'rebuild {"originalDescription", "questionsAsked", "inferredContext", "answers"} from a stored turn and its clarification';

CREATE FUNCTION convctx.render_clarification(ctx jsonb, instruction text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_render_clarification'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.render_clarification(jsonb, text) IS
    'full-context prompt of a clarification turn: original issue, questions asked, the user''s clarifications, previous analysis, then the instruction';
