/* convctx--0.4.0--0.5.0.sql: apps behind connection poolers, export */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx UPDATE TO '0.5.0'" to load this file. \quit

------------------------------------------------------------------------------
-- The tenant per transaction: convctx.use_tenant, and the setting
-- convctx.tenant_scope (defined by the library) that refuses a value of
-- convctx.tenant left by an earlier transaction on a pooled connection.
------------------------------------------------------------------------------

-- With convctx.tenant_scope = transaction the answer depends on what the
-- leader's transaction set, which a parallel worker cannot see.
ALTER FUNCTION convctx.current_tenant() PARALLEL RESTRICTED;

CREATE FUNCTION convctx.use_tenant(tenant text)
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_use_tenant'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.use_tenant(text) IS
    'act for tenant until the end of the current transaction (as SET LOCAL convctx.tenant) and return convctx.current_tenant(); only inside a transaction block (25P01), 42501 when the role may not act for it: the way to choose the tenant per request behind a pooler in transaction mode';

REVOKE ALL ON FUNCTION convctx.use_tenant(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.use_tenant(text) TO convctx_app;

------------------------------------------------------------------------------
-- Export: the records of the convctx.jsonl format, built on the server
------------------------------------------------------------------------------

CREATE FUNCTION convctx.export_records(session_id text DEFAULT NULL, identity_id text DEFAULT NULL,
                                       since timestamptz DEFAULT NULL, until timestamptz DEFAULT NULL)
RETURNS TABLE (record_type text, line text)
AS 'MODULE_PATHNAME', 'convctx_export_records'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 1000
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.export_records(text, text, timestamptz, timestamptz) IS
    'every stored row of the conversations of the tenant the caller acts for, as convctx.jsonl records (one JSON object per line, grouped by conversation): all of them, one session, those linked to an identity (with the contexts saved under it), or those active since / created before a time; what the convctx export tool writes';

CREATE FUNCTION convctx.export_messages(session_id text DEFAULT NULL, identity_id text DEFAULT NULL,
                                        since timestamptz DEFAULT NULL, until timestamptz DEFAULT NULL)
RETURNS TABLE (record_type text, line text)
AS 'MODULE_PATHNAME', 'convctx_export_messages'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 100
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.export_messages(text, text, timestamptz, timestamptz) IS
    'the conversations export_records would choose, one JSON line each: session_id, identity_id, created_at and the current live turns as user and assistant messages (role, content, created_at, id); what convctx export --format=messages writes';

REVOKE ALL ON FUNCTION convctx.export_records(text, text, timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION convctx.export_messages(text, text, timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.export_records(text, text, timestamptz, timestamptz),
    convctx.export_messages(text, text, timestamptz, timestamptz) TO convctx_admin;

------------------------------------------------------------------------------
-- Import: convctx.jsonl records written with their own ids and timestamps
------------------------------------------------------------------------------

CREATE FUNCTION convctx.import_records(records text[], on_conflict text DEFAULT 'skip',
                                       allow_anonymous boolean DEFAULT false,
                                       as_identity text DEFAULT NULL, identity_map jsonb DEFAULT NULL)
RETURNS TABLE (record_type text, imported bigint, skipped bigint)
AS 'MODULE_PATHNAME', 'convctx_import_records'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 6
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.import_records(text[], text, boolean, text, jsonb) IS
    'write convctx.jsonl records (session groups: a session record, then its turns, retrievals, clarifications, summary and context; or a context alone) into the tenant the caller acts for, with their ids and timestamps, under the rules of the API; derived counts are recomputed and checked; an existing session is skipped whole (on_conflict ''skip'') or refused (''error''), one of another identity refused with CV001 and audited; anonymous sessions the next purge would delete are refused unless allow_anonymous, or given as_identity; identity_map renames identities; returns the records imported and skipped per type; what convctx import sends';

REVOKE ALL ON FUNCTION convctx.import_records(text[], text, boolean, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.import_records(text[], text, boolean, text, jsonb) TO convctx_admin;
