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

------------------------------------------------------------------------------
-- Session titles (the conversation browser below)
------------------------------------------------------------------------------

ALTER TABLE convctx.session ADD COLUMN title text;
COMMENT ON COLUMN convctx.session.title IS
    'the title the app set (set_session_title); NULL: the first live question is shown';

------------------------------------------------------------------------------
-- Conversation browser: an identity's conversations, titles, paging, replay
------------------------------------------------------------------------------

-- The list of an identity's conversations, newest activity first, walks
-- this index; activity_bin moves at most once in ten minutes, so the
-- updates that count activity stay HOT.
CREATE INDEX session_identity_activity ON convctx.session (tenant_id, identity_id, activity_bin DESC)
    WHERE identity_id IS NOT NULL;

CREATE FUNCTION convctx.list_conversations(identity_id text, cursor text DEFAULT NULL,
                                           page_size integer DEFAULT 20)
RETURNS TABLE (session_id text, title text, title_is_default boolean, created_at timestamptz,
               last_activity_at timestamptz, live_turns bigint, linked_later boolean, cursor text)
AS 'MODULE_PATHNAME', 'convctx_list_conversations'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 20
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.list_conversations(text, text, integer) IS
    'the conversations of the current tenant linked to identity_id, newest activity first, page_size (at most 1000) at a time: session_id, title (set_session_title''s, else the first live question, title_is_default), created_at, last_activity_at, live_turns, linked_later (anonymous first, linked afterwards), and the cursor to pass for the next page; keyset paging on index session_identity_activity';

CREATE FUNCTION convctx.set_session_title(session_id text, title text)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_set_session_title'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.set_session_title(text, text) IS
    'set the title list_conversations shows for a session (at most 1024 bytes); NULL gives it back its default, the first live question; P0002 when the session does not exist; redact_session and erase_identity remove it';

CREATE FUNCTION convctx.conversation_turns(session_id text, after_turn_no bigint DEFAULT NULL,
                                           before_turn_no bigint DEFAULT NULL, page_size integer DEFAULT 20,
                                           include_versions boolean DEFAULT false)
RETURNS TABLE (turn_no bigint, turn_id uuid, request_id text, record_version integer, is_current boolean,
               question text, answer text, created_at timestamptz, finalized_at timestamptz,
               redacted boolean, redacted_at timestamptz)
AS 'MODULE_PATHNAME', 'convctx_conversation_turns'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 20
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.conversation_turns(text, bigint, bigint, integer, boolean) IS
    'a page of a session''s turns, oldest first: page_size turns after after_turn_no, or before before_turn_no, or (neither) the newest; current versions, with include_versions every version of a corrected answer too; redacted turns as tombstones without text; keyset paging on index turn_chronology, the same cost at any depth';

CREATE FUNCTION convctx.replay_conversation(session_id text, max_bytes integer DEFAULT 16777216)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_replay_conversation'
LANGUAGE C STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.replay_conversation(text, integer) IS
    'a whole conversation as the JSON a chat app renders: session_id, identity_id, title, times, and its turns in order with question, answer, times, redacted tombstones, corrections (earlier answers) and citations; NULL when the session does not exist; 54000 when it would be larger than max_bytes (16 MB by default)';

REVOKE ALL ON FUNCTION convctx.list_conversations(text, text, integer),
    convctx.set_session_title(text, text),
    convctx.conversation_turns(text, bigint, bigint, integer, boolean),
    convctx.replay_conversation(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.list_conversations(text, text, integer),
    convctx.set_session_title(text, text),
    convctx.conversation_turns(text, bigint, bigint, integer, boolean),
    convctx.replay_conversation(text, integer) TO convctx_app;

COMMENT ON PROCEDURE convctx.purge_all(integer) IS
    'repeat purge with a COMMIT after each pass until nothing is left, pausing convctx.purge_pause between passes (inside a transaction block: one transaction, no pause)';

-- An emptied session's summary, retrievals and clarifications are deleted
-- by a statement trigger, one statement for every session a DELETE
-- removed: the cascading foreign keys ran three queries per session, more
-- than a third of a purge pass. Every writer of those rows locks the
-- session row and checks its turn, so none is written without a session.
ALTER TABLE convctx.session_summary DROP CONSTRAINT session_summary_session;
ALTER TABLE convctx.turn_retrieval DROP CONSTRAINT turn_retrieval_session;
ALTER TABLE convctx.clarification DROP CONSTRAINT clarification_session;

-- What belongs to a session goes with it, by whatever route it is deleted
-- (a purge pass, a superuser's DELETE): one statement for all the rows a
-- DELETE removed; after TRUNCATE of convctx.session, every row of those
-- tables (name them in the TRUNCATE to truncate them instead), so that no
-- row is left for a later session with the same id. A logical
-- replication subscriber does not fire them; it receives the publisher's
-- deletes of those rows.
CREATE FUNCTION convctx.session_deleted()
RETURNS trigger
AS 'MODULE_PATHNAME', 'convctx_session_deleted'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.session_deleted() IS
    'trigger on convctx.session: deletes the summaries, retrievals and clarifications of the sessions a DELETE removed, all of them after TRUNCATE';

CREATE TRIGGER session_deleted
    AFTER DELETE ON convctx.session
    REFERENCING OLD TABLE AS deleted_sessions
    FOR EACH STATEMENT EXECUTE FUNCTION convctx.session_deleted();
CREATE TRIGGER session_truncated
    AFTER TRUNCATE ON convctx.session
    FOR EACH STATEMENT EXECUTE FUNCTION convctx.session_deleted();
REVOKE ALL ON FUNCTION convctx.session_deleted() FROM PUBLIC;
