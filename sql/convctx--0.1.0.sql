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
    tenant_id        text        NOT NULL,
    conversation_id  text        NOT NULL,
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
