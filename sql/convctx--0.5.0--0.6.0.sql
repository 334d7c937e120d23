/* convctx--0.5.0--0.6.0.sql: one 0.5.0 catalog; recall, merge and analysis review */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx UPDATE TO '0.6.0'" to load this file. \quit

------------------------------------------------------------------------------
-- Every form of 0.5.0 to one catalog
------------------------------------------------------------------------------

-- The install and update scripts of 0.5.0 changed after they were first
-- released, so a database may run an earlier form of 0.5.0: the first
-- (without session.first_question and session.linked_later, the index
-- audit_log_erasures, begin_turn, the tenant argument of finalize_turn,
-- the skipped_why column of import_records, distribute()'s refusal beside
-- convctx_recall), or one between it and the last. Each step below finds
-- what its database lacks and adds it, so that every form ends with the
-- same catalog; on the last form of 0.5.0 it changes nothing but comments
-- that are the same already.

-- Forms of 0.5.0 from before the statement trigger that deletes a deleted
-- session's rows (session_deleted, and session_truncated for TRUNCATE)
-- were development states: main never held them at a landing. They lack
-- more than this script adds (that trigger, the browser's functions, the
-- import), so it refuses them before it changes anything, rather than
-- leave a catalog that differs from a fresh install.
DO $development_forms$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                    WHERE t.tgrelid OPERATOR(pg_catalog.=) 'convctx.session'::pg_catalog.regclass
                      AND t.tgname OPERATOR(pg_catalog.=) 'session_truncated') THEN
        RAISE EXCEPTION 'convctx 0.5.0 in this database is a development form that cannot be updated in place'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Its session table has no trigger session_truncated: the form of 0.5.0 it was installed from came before the first one that was released.',
                  HINT = 'Export its conversations with "convctx export", then DROP EXTENSION convctx, CREATE EXTENSION convctx and "convctx import" them.';
    END IF;
END
$development_forms$;

-- The columns the conversation browser reads from the session row, and
-- what the last update script to 0.5.0 did that earlier forms of it did
-- not: finish the erasures made before 0.3.0, and never let a session's
-- last activity be before one of its turns. The columns are computed from
-- the turns and links as they are once the erasures are finished.
CREATE FUNCTION convctx.erased_identity_0_6(tenant text, identity_id text)
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_erased_identity_for_update'
LANGUAGE C STRICT;

DO $first_form$
DECLARE
    e record;
    erased text[];
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_attribute a
                WHERE a.attrelid OPERATOR(pg_catalog.=) 'convctx.session'::pg_catalog.regclass
                  AND a.attname OPERATOR(pg_catalog.=) 'first_question' AND NOT a.attisdropped) THEN
        RETURN;
    END IF;
    ALTER TABLE convctx.session ADD COLUMN first_question text,
                                ADD COLUMN linked_later boolean NOT NULL DEFAULT false;
    FOR e IN
        SELECT a.tenant_id, a.identity_id, pg_catalog.max(a.logged_at) AS erased_at,
               convctx.erased_identity_0_6(a.tenant_id, a.identity_id) AS standin
          FROM convctx.audit_log a
         WHERE a.action OPERATOR(pg_catalog.=) 'erase_identity'
           AND a.identity_id OPERATOR(pg_catalog.<>) 'erased'
           AND a.identity_id OPERATOR(pg_catalog.!~~) 'erased:%'
         GROUP BY a.tenant_id, a.identity_id
    LOOP
        erased := ARRAY(SELECT l.session_id FROM convctx.session_link l
                         WHERE l.tenant_id OPERATOR(pg_catalog.=) e.tenant_id
                           AND l.identity_id OPERATOR(pg_catalog.=) e.identity_id
                           AND l.linked_at OPERATOR(pg_catalog.<=) e.erased_at);
        UPDATE convctx.session s
           SET redactions = s.redactions OPERATOR(pg_catalog.+) 1, identity_id = e.standin, title = NULL,
               first_question = NULL, live_turns = 0, live_answers = 0, summary_through_turn_no = NULL
         WHERE s.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND s.session_id OPERATOR(pg_catalog.=) ANY (erased);
        UPDATE convctx.turn t
           SET question_neutral = NULL, answer_neutral = NULL, question_translated = NULL,
               answer_translated = NULL, metadata = NULL,
               deleted_at = COALESCE(t.deleted_at, pg_catalog.statement_timestamp()),
               redaction = CASE WHEN t.deleted_at IS NULL THEN s.redactions ELSE t.redaction END,
               identity_id = CASE WHEN t.identity_id IS NULL THEN NULL ELSE e.standin END
          FROM convctx.session s
         WHERE s.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND s.session_id OPERATOR(pg_catalog.=) ANY (erased)
           AND t.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND t.session_id OPERATOR(pg_catalog.=) s.session_id;
        UPDATE convctx.session_link l SET identity_id = e.standin
         WHERE l.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND l.session_id OPERATOR(pg_catalog.=) ANY (erased);
        DELETE FROM convctx.turn_retrieval r
         WHERE r.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND r.session_id OPERATOR(pg_catalog.=) ANY (erased);
        DELETE FROM convctx.clarification c
         WHERE c.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND c.session_id OPERATOR(pg_catalog.=) ANY (erased);
        DELETE FROM convctx.session_summary m
         WHERE m.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND m.session_id OPERATOR(pg_catalog.=) ANY (erased);
        DELETE FROM convctx.conversation_context c
         WHERE c.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND c.conversation_id OPERATOR(pg_catalog.=) ANY (erased);
        -- as ERASE_AUDIT_SQL (src/lifecycle/erasure.c), for the rows up to the erasure
        UPDATE convctx.audit_log a
           SET identity_id = CASE WHEN a.identity_id OPERATOR(pg_catalog.=) e.identity_id THEN e.standin
                                  ELSE a.identity_id END,
               details = CASE WHEN pg_catalog.jsonb_typeof(a.details) OPERATOR(pg_catalog.=) 'object'
                 THEN COALESCE((SELECT pg_catalog.jsonb_object_agg(d.key,
                         CASE WHEN d.key OPERATOR(pg_catalog.=) ANY ('{linked_identity_id,requested_identity_id}')
                               AND d.value OPERATOR(pg_catalog.=) pg_catalog.to_jsonb(e.identity_id)
                              THEN pg_catalog.to_jsonb(e.standin) ELSE d.value END)
                       FROM pg_catalog.jsonb_each(a.details) d), '{}')
                 ELSE a.details END
         WHERE a.tenant_id OPERATOR(pg_catalog.=) e.tenant_id
           AND a.logged_at OPERATOR(pg_catalog.<=) e.erased_at
           AND (a.identity_id OPERATOR(pg_catalog.=) e.identity_id
                OR (pg_catalog.jsonb_typeof(a.details) OPERATOR(pg_catalog.=) 'object'
                    AND EXISTS (SELECT 1 FROM pg_catalog.jsonb_each(a.details) d
                                 WHERE d.key OPERATOR(pg_catalog.=) ANY ('{linked_identity_id,requested_identity_id}')
                                   AND d.value OPERATOR(pg_catalog.=) pg_catalog.to_jsonb(e.identity_id))));
    END LOOP;
    UPDATE convctx.session s SET last_activity_at = t.newest
      FROM (SELECT tenant_id, session_id, pg_catalog.max(created_at) AS newest
              FROM convctx.turn GROUP BY tenant_id, session_id) t
     WHERE s.tenant_id OPERATOR(pg_catalog.=) t.tenant_id
       AND s.session_id OPERATOR(pg_catalog.=) t.session_id
       AND s.last_activity_at OPERATOR(pg_catalog.<) t.newest;
    UPDATE convctx.session s
       SET first_question = (SELECT pg_catalog."left"(pg_catalog.ltrim(q.question_neutral,
                                        ' ' OPERATOR(pg_catalog.||) pg_catalog.chr(9) OPERATOR(pg_catalog.||)
                                        pg_catalog.chr(10) OPERATOR(pg_catalog.||) pg_catalog.chr(11)
                                        OPERATOR(pg_catalog.||) pg_catalog.chr(12) OPERATOR(pg_catalog.||)
                                        pg_catalog.chr(13)), 320)
                               FROM convctx.turn q
                              WHERE q.tenant_id OPERATOR(pg_catalog.=) s.tenant_id
                                AND q.session_id OPERATOR(pg_catalog.=) s.session_id
                                AND q.deleted_at IS NULL AND q.replaced_by_turn_id IS NULL
                              ORDER BY q.turn_no LIMIT 1),
           linked_later = COALESCE((SELECT l.linked_at OPERATOR(pg_catalog.>) s.created_at
                                      FROM convctx.session_link l
                                     WHERE l.tenant_id OPERATOR(pg_catalog.=) s.tenant_id
                                       AND l.session_id OPERATOR(pg_catalog.=) s.session_id), false);
END
$first_form$;

DROP FUNCTION convctx.erased_identity_0_6(text, text);

COMMENT ON COLUMN convctx.session.first_question IS
    'the first 320 characters (after leading white space) of the question of the first live current-version turn, NULL when none: the default title, kept right by every function that adds, redacts or deletes a turn';
COMMENT ON COLUMN convctx.session.linked_later IS
    'whether the session was linked to its identity after it was created (convctx.session_link.linked_at after created_at)';

-- The erasures, by stand-in: import_records refuses what an erasure deleted.
CREATE INDEX IF NOT EXISTS audit_log_erasures ON convctx.audit_log (tenant_id, identity_id)
    WHERE action OPERATOR(pg_catalog.=) 'erase_identity';

-- A chat request in two calls: begin_turn, then finalize_turn, each of
-- which may name the tenant of the call.
DROP FUNCTION IF EXISTS convctx.finalize_turn(text, uuid, text, text, boolean, jsonb);
CREATE OR REPLACE FUNCTION convctx.finalize_turn(
    session_id text,
    turn_id uuid,
    answer_neutral text,
    answer_translated text DEFAULT NULL,
    answer_translated_is_fallback boolean DEFAULT NULL,
    meta jsonb DEFAULT NULL,
    tenant text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_finalize_turn'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.finalize_turn(text, uuid, text, text, boolean, jsonb, text) IS
    'store the answer of a started turn; repeating it with the same answer changes nothing, a different answer is refused (use replace_turn); tenant, when given, is the tenant of this call only, as convctx.tenant set for the call';

CREATE OR REPLACE FUNCTION convctx.begin_turn(
    session_id text,
    request_id text,
    question_neutral text,
    turn_limit integer DEFAULT 10,
    identity_id text DEFAULT NULL,
    tenant text DEFAULT NULL,
    meta jsonb DEFAULT NULL,
    question_translated text DEFAULT NULL,
    translate_chat boolean DEFAULT false,
    pipeline_name text DEFAULT NULL,
    consultant text DEFAULT NULL,
    repository text DEFAULT NULL,
    OUT turn_id uuid,
    OUT repeated boolean,
    OUT answer_neutral text,
    OUT answer_translated text,
    OUT history jsonb,
    OUT context jsonb)
RETURNS record
AS 'MODULE_PATHNAME', 'convctx_begin_turn'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.begin_turn(text, text, text, integer, text, text, jsonb, text, boolean, text, text, text) IS
    'begin a chat request in one call: start its turn as start_turn does (idempotent on (session_id, request_id)) and return turn_id, repeated (the request had its turn already), the stored answer of a repeated request once finalized, history (the last turn_limit finalized, non-redacted pairs before this turn, oldest first, as recent_turns_json) and context (context_load); tenant, when given, is the tenant of this call only, as convctx.tenant set for the call';

REVOKE ALL ON FUNCTION
    convctx.finalize_turn(text, uuid, text, text, boolean, jsonb, text),
    convctx.begin_turn(text, text, text, integer, text, text, jsonb, text, boolean, text, text, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    convctx.finalize_turn(text, uuid, text, text, boolean, jsonb, text),
    convctx.begin_turn(text, text, text, integer, text, text, jsonb, text, boolean, text, text, text)
    TO convctx_app;


-- import_records says why it skipped a record (column skipped_why): a
-- function's result columns change only by dropping it.
DO $import_records$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_proc p
                    WHERE p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure('convctx.import_records(text[], text, boolean, text, jsonb)')
                      AND 'skipped_why' OPERATOR(pg_catalog.=) ANY (p.proargnames)) THEN
        DROP FUNCTION convctx.import_records(text[], text, boolean, text, jsonb);
    END IF;
END
$import_records$;

CREATE OR REPLACE FUNCTION convctx.import_records(records text[], on_conflict text DEFAULT 'skip',
                                       allow_anonymous boolean DEFAULT false,
                                       as_identity text DEFAULT NULL, identity_map jsonb DEFAULT NULL)
RETURNS TABLE (record_type text, imported bigint, skipped bigint, skipped_why jsonb)
AS 'MODULE_PATHNAME', 'convctx_import_records'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 6
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.import_records(text[], text, boolean, text, jsonb) IS
    'write convctx.jsonl records (session groups: a session record, then its turns, retrievals, clarifications, summary and context; or a context alone) into the tenant the caller acts for, with their ids and timestamps, under the rules of the API; derived counts are recomputed and checked; an existing session is merged (on_conflict ''skip''): what the file has and the database lacks is added, what both have is skipped, a conflict refused with 23505; or refused whole (''error''); one of another identity refused with CV001 and audited, one erased here with 55000; a context that erase_identity deleted (of an erased session, or with a key of an erased user_id) refused with 55000; anonymous sessions the next purge would delete are refused unless allow_anonymous, or given as_identity; identity_map renames identities; returns the records imported and skipped per type, with why each was skipped; what convctx import sends';

REVOKE ALL ON FUNCTION convctx.import_records(text[], text, boolean, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.import_records(text[], text, boolean, text, jsonb) TO convctx_admin;

-- What redaction and erasure do to titles and stand-ins, as the last form
-- of 0.5.0 says it.
COMMENT ON FUNCTION convctx.redact_turn(text, uuid) IS
    'turn a turn and all its versions into tombstones (ids and timestamps kept, text and metadata cleared) and remove the session''s title (set_session_title), which may quote it; false when already redacted';
COMMENT ON FUNCTION convctx.erase_identity(text) IS
    'right to erasure: redact every turn of every session linked to the identity, delete their prompt data and contexts (and contexts saved with it as user_id), and replace the identity wherever it is stored (sessions, links, tombstones, audit log) by ''erased:'' and the HMAC-SHA256 under convctx.identity_hash_key of the tenant, a zero byte and the identity (no key: ''erased''); returns how many turns';
COMMENT ON FUNCTION convctx.set_session_title(text, text) IS
    'set the title list_conversations shows for a session (at most 1024 bytes); NULL gives it back its default, the first live question; P0002 when the session does not exist; redact_turn, redact_session and erase_identity remove it, as it may quote a redacted turn';

-- distribute() refuses while convctx_recall is installed, and delegates
-- begin_turn.
CREATE OR REPLACE FUNCTION convctx.distribute()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $distribute$
DECLARE
    t record;
    f record;
    trig record;
    preload text;
BEGIN
    -- as convctx's writers in C refuse (CheckWritable)
    IF pg_catalog.pg_is_in_recovery() THEN
        RAISE EXCEPTION 'cannot execute convctx.distribute() during recovery'
            USING ERRCODE = 'read_only_sql_transaction',
                  DETAIL = 'This server is a standby: convctx''s read functions work here, its writers only on the primary.';
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
        RAISE EXCEPTION 'cannot execute convctx.distribute() in a read-only transaction'
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    -- Semantic recall runs on a single server: the table of its embeddings
    -- refers to convctx.turn, which would move to the workers.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'convctx_recall') THEN
        RAISE EXCEPTION 'convctx.distribute() cannot run while extension "convctx_recall" is installed'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Semantic recall runs on a single server.',
                  HINT = 'Drop extension convctx_recall first: its embeddings are derived from the turns, which keep their text.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'extension "citus" is not installed in this database'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'convctx.distribute() spreads convctx''s tables over a Citus cluster.',
                  HINT = 'Install Citus on every node, CREATE EXTENSION citus, add the workers with citus_add_node(), and call convctx.distribute() again.';
    END IF;
    -- Without convctx preloaded, the first call of a backend is planned
    -- before convctx's planner hook exists, and Citus could send it to a
    -- worker without its tenant (src/citus/citus.c): such calls would fail there.
    FOR preload IN
        SELECT pg_catalog.current_setting('shared_preload_libraries')
        UNION ALL
        SELECT result FROM pg_catalog.run_command_on_workers(
            'SELECT pg_catalog.current_setting(''shared_preload_libraries'')')
    LOOP
        IF NOT 'convctx' = ANY (pg_catalog.string_to_array(
                pg_catalog.replace(preload, ' ', ''), ',')) THEN
            RAISE EXCEPTION 'convctx is not in shared_preload_libraries on every node of the cluster'
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = pg_catalog.format('A node has shared_preload_libraries = %L.', preload),
                      HINT = 'Set shared_preload_libraries = ''citus,convctx'' on every node and restart them.';
        END IF;
    END LOOP;

    -- (Citus refuses DROP TRIGGER IF EXISTS on a table it has distributed.)
    FOR trig IN
        SELECT tg.tgname, tg.tgrelid::pg_catalog.regclass AS rel FROM pg_catalog.pg_trigger tg
         WHERE tg.tgrelid IN ('convctx.session'::pg_catalog.regclass, 'convctx.role_tenant'::pg_catalog.regclass)
           AND tg.tgname IN ('session_deleted', 'session_truncated', 'role_tenant_changed', 'role_tenant_truncated')
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trig.tgname, trig.rel);
    END LOOP;

    FOR t IN
        SELECT * FROM (VALUES
            (1, 'convctx.session'::pg_catalog.regclass, 'session_id', 'default'),
            (2, 'convctx.turn', 'session_id', 'convctx.session'),
            (3, 'convctx.session_link', 'session_id', 'convctx.session'),
            (4, 'convctx.session_summary', 'session_id', 'convctx.session'),
            (5, 'convctx.turn_retrieval', 'session_id', 'convctx.session'),
            (6, 'convctx.clarification', 'session_id', 'convctx.session'),
            (7, 'convctx.conversation_context', 'conversation_id', 'convctx.session'),
            (8, 'convctx.audit_log', 'tenant_id', 'none'),
            (9, 'convctx.role_tenant', NULL, NULL),
            (10, 'convctx.followup_phrase', NULL, NULL)) AS v(n, rel, col, colocate)
        WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = v.rel)
        ORDER BY n
    LOOP
        IF t.col IS NULL THEN
            PERFORM pg_catalog.create_reference_table(t.rel);
        ELSE
            PERFORM pg_catalog.create_distributed_table(t.rel, t.col, colocate_with => t.colocate);
        END IF;
        -- The rows are copied to the shards; the table's own copy would stay
        -- on disk where redaction, erasure and purge never reach it.
        PERFORM pg_catalog.truncate_local_data_after_distributing_table(t.rel);
    END LOOP;

    FOR f IN
        SELECT p.oid::pg_catalog.regprocedure AS fn,
               CASE WHEN 'conversation_id' = ANY (p.proargnames) THEN 'conversation_id'
                    ELSE 'session_id' END AS arg
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'convctx'::pg_catalog.regnamespace
           AND p.proname IN ('start_turn', 'begin_turn', 'finalize_turn', 'recent_turns', 'recent_turns_json',
                             'link_session', 'replace_turn', 'conversation_state', 'set_summary',
                             'turns_to_summarize', 'record_retrieval', 'context_history',
                             'record_clarification', 'clarification_context', 'redact_turn',
                             'redact_session', 'context_load', 'context_save', 'context_add',
                             'set_session_title', 'conversation_turns', 'replay_conversation',
                             'admin_session_turns')
    LOOP
        PERFORM pg_catalog.create_distributed_function(f.fn, f.arg,
                                                       colocate_with => 'convctx.session');
    END LOOP;
END
$distribute$;

COMMENT ON FUNCTION convctx.distribute() IS
    'on a Citus cluster: distributes convctx''s tables by session (audit log by tenant, bindings and follow-up phrases to every node) and lets Citus run each per-session call on the node that holds the session; run once after adding the workers, again after adding more; 55000 without Citus';

REVOKE ALL ON FUNCTION convctx.distribute() FROM PUBLIC;

------------------------------------------------------------------------------
-- Import: merges keep titles and link times
------------------------------------------------------------------------------

COMMENT ON FUNCTION convctx.import_records(text[], text, boolean, text, jsonb) IS
    'write convctx.jsonl records (session groups: a session record, then its turns, retrievals, clarifications, summary and context; or a context alone) into the tenant the caller acts for, with their ids and timestamps, under the rules of the API; derived counts are recomputed and checked; an existing session is merged (on_conflict ''skip''): what the file has and the database lacks is added, what both have is skipped, a conflict refused with 23505; its title is taken only where the session has none here and no redaction here could have removed it (a title of its own here is kept), a link it lacks with the file''s linked_at, and its session record counts as imported when any of it is taken (title, link, later last activity); or refused whole (''error''); one of another identity refused with CV001 and audited, one erased here with 55000; a context that erase_identity deleted (of an erased session, or with a key of an erased user_id) refused with 55000; anonymous sessions the next purge would delete are refused unless allow_anonymous, or given as_identity; identity_map renames identities; returns the records imported and skipped per type, with why each was skipped; what convctx import sends';

------------------------------------------------------------------------------
-- Redaction, erasure and purge at a cost that needs no ANALYZE
------------------------------------------------------------------------------
-- Nothing in the catalog: the library plans these statements on the
-- statistics their keys imply while a table has none of its own (planner.c).
