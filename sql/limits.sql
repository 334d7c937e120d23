-- Size limits: nothing larger than convctx.max_text_bytes is stored through any route,
-- ids and labels are names, and the node cap is the superuser's.
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
CREATE TEMP TABLE ids (name text PRIMARY KEY, id uuid);
SET convctx.max_text_bytes = 2048;

------------------------------------------------------------------------------
-- context_save and context_add
------------------------------------------------------------------------------
SELECT convctx.context_save('ctx', jsonb_build_object('activeNodeIds', '[]'::jsonb, 'note', repeat('x', 3000)));
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_save('ctx', jsonb_build_object('activeNodeIds', jsonb_build_array(repeat('n', 1025))));
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_add('ctx', ARRAY['ok', repeat('n', 1025)]);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS contexts FROM convctx.conversation_context;
-- ids of the longest allowed size still fit one by one, until the context outgrows the limit
SELECT convctx.context_save('ctx', jsonb_build_object('activeNodeIds', jsonb_build_array(repeat('a', 1024))));
SELECT convctx.context_add('ctx', ARRAY[repeat('b', 1024)]);
\echo :LAST_ERROR_SQLSTATE
SELECT jsonb_array_length(context_json -> 'activeNodeIds') AS ids, pg_column_size(context_json) < 2048 AS small
FROM convctx.conversation_context WHERE conversation_id = 'ctx';
-- a new context is checked after the merge too
SELECT convctx.context_add('new-ctx', ARRAY[repeat('c', 1000), repeat('d', 1000), repeat('e', 1000)]);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS contexts FROM convctx.conversation_context WHERE conversation_id = 'new-ctx';
-- max_active_nodes bounds what context_add keeps: only a superuser may raise it
CREATE ROLE regress_limits_app;
SET ROLE regress_limits_app;
SET convctx.max_active_nodes = 1000000;
\echo :LAST_ERROR_SQLSTATE
SHOW convctx.max_active_nodes;
RESET ROLE;
DROP ROLE regress_limits_app;
SELECT context, boot_val FROM pg_settings WHERE name = 'convctx.max_active_nodes';

------------------------------------------------------------------------------
-- routing labels: names, at most 1024 bytes like ids (and max_text_bytes)
------------------------------------------------------------------------------
RESET convctx.max_text_bytes;
SELECT convctx.start_turn('lab', 'r1', 'q', pipeline_name => repeat('p', 1025));
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('lab', 'r1', 'q', consultant => repeat('c', 1025));
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('lab', 'r1', 'q', repository => repeat('r', 5 * 1024 * 1024));
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('lab', 'r1', 'q', pipeline_name => repeat('p', 1024), consultant => '', repository => 'ie') IS NOT NULL AS started;
SELECT length(pipeline_name), consultant, repository FROM convctx.turn WHERE session_id = 'lab';
SET convctx.max_text_bytes = 10;
SELECT convctx.start_turn('lab', 'r2', 'q', pipeline_name => 'eleven-byte');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS turns FROM convctx.turn WHERE session_id = 'lab';

------------------------------------------------------------------------------
-- metadata is checked after finalize_turn and replace_turn merge it
------------------------------------------------------------------------------
SET convctx.max_text_bytes = 2048;
INSERT INTO ids SELECT 'm1', convctx.start_turn('meta', 'r1', 'q', meta => jsonb_build_object('channel', repeat('c', 1500)));
SELECT convctx.finalize_turn('meta', (SELECT id FROM ids WHERE name = 'm1'), 'a', meta => jsonb_build_object('locale', repeat('l', 1500)));
\echo :LAST_ERROR_SQLSTATE
SELECT finalized_at IS NULL AS still_open, metadata ? 'locale' AS merged FROM convctx.turn WHERE session_id = 'meta';
SELECT live_turns, live_answers FROM convctx.session WHERE session_id = 'meta';
-- a merge that fits is stored
SELECT convctx.finalize_turn('meta', (SELECT id FROM ids WHERE name = 'm1'), 'a', meta => '{"locale": "en"}');
SELECT finalized_at IS NOT NULL AS finalized, metadata ->> 'locale' AS locale FROM convctx.turn WHERE session_id = 'meta';
SELECT convctx.replace_turn('meta', (SELECT id FROM ids WHERE name = 'm1'), 'b', meta => jsonb_build_object('device_type', repeat('d', 1500)));
\echo :LAST_ERROR_SQLSTATE
SELECT record_version, answer_neutral FROM convctx.turn WHERE session_id = 'meta' ORDER BY record_version;
SELECT convctx.replace_turn('meta', (SELECT id FROM ids WHERE name = 'm1'), 'b', meta => '{"device_type": "mobile"}') IS NOT NULL AS replaced;
SELECT record_version, answer_neutral, metadata ? 'device_type' AS merged FROM convctx.turn WHERE session_id = 'meta' ORDER BY record_version;

------------------------------------------------------------------------------
-- record_retrieval: chunks, and citations once their references are resolved
------------------------------------------------------------------------------
INSERT INTO ids SELECT 'k1', convctx.start_turn('ret', 'r1', 'q');
INSERT INTO ids SELECT 'k2', convctx.start_turn('ret', 'r2', 'q');
SELECT convctx.record_retrieval('ret', (SELECT id FROM ids WHERE name = 'k1'),
    jsonb_build_array(jsonb_build_object('id', 'big', 'text', repeat('t', 3000))));
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.record_retrieval('ret', (SELECT id FROM ids WHERE name = 'k1'),
    jsonb_build_array(jsonb_build_object('id', 'big', 'text', repeat('t', 1500))));
-- three references to the 1.5 kB chunk of turn 1 would store 4.5 kB
SELECT convctx.record_retrieval('ret', (SELECT id FROM ids WHERE name = 'k2'), '[]', '[{"id": "big"}, {"id": "big"}, {"id": "big"}]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.record_retrieval('ret', (SELECT id FROM ids WHERE name = 'k2'), '[]',
    jsonb_build_array(jsonb_build_object('id', 'own', 'text', repeat('o', 3000))));
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.record_retrieval('ret', (SELECT id FROM ids WHERE name = 'k2'), '[]', '[{"id": "big"}]');
SELECT turn_no, jsonb_array_length(citations) AS citations FROM convctx.turn_retrieval ORDER BY turn_no;
RESET convctx.max_text_bytes;
