-- export_records (0.5.0): every stored row of a tenant's conversations as
-- convctx.jsonl records, built on the server; filters; administrators only.
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification,
         convctx.role_tenant;
SET client_min_messages = warning;
DROP ROLE IF EXISTS export_admin, export_app;
RESET client_min_messages;
CREATE ROLE export_admin IN ROLE convctx_admin;
CREATE ROLE export_app IN ROLE convctx_app;
SELECT convctx.bind_role_tenant('export_admin', 'acme'), convctx.bind_role_tenant('export_app', 'acme');
SET TimeZone = 'UTC';

-- acme: s1 linked to u1 with a corrected answer, a redacted turn, a
-- retrieval with exact numbers, a clarification, a summary and a context;
-- s2 anonymous; c3 a context whose session row purge deleted.
-- globex: an s1 of its own.
SET convctx.tenant = 'acme';
SELECT convctx.start_turn('s1', 'r1', 'Q1 with every plane: é 😀 𠀀 e' || chr(769) || ' שלום',
                          identity_id => 'u1', meta => '{"channel": "web", "locale": "fr"}') AS t1 \gset
SELECT convctx.finalize_turn('s1', :'t1', 'A1');
SELECT convctx.replace_turn('s1', :'t1', 'A1, corrected') AS t1v2 \gset
SELECT convctx.start_turn('s1', 'r2', 'Q2, to be redacted') AS t2 \gset
SELECT convctx.finalize_turn('s1', :'t2', 'A2');
SELECT convctx.start_turn('s1', 'r3', 'Q3 "quoted" \ backslash') AS t3 \gset
SELECT convctx.finalize_turn('s1', :'t3', 'A3');
SELECT convctx.record_retrieval('s1', :'t3',
    '[{"id": "c1", "text": "chunk", "score": 1.000000000000000005, "big": 12345678901234567890, "e": 1E6}]',
    '[{"id": "c1"}]');
SELECT convctx.record_clarification('s1', :'t3', '[{"question": "Which year?"}]', '{"year": "2024"}');
SET ROLE export_admin;
SELECT convctx.redact_turn('s1', :'t2');
RESET ROLE;
SET convctx.tenant = 'acme';
SELECT convctx.set_summary('s1', 'They asked three things.', :'t3',
                           (SELECT redactions FROM convctx.session WHERE session_id = 's1'));
SELECT convctx.context_add('s1', ARRAY['n1', 'n2'], 'u1') IS NOT NULL AS context;
SELECT convctx.start_turn('s2', 'r1', 'anonymous question') IS NOT NULL AS started;
SELECT convctx.context_save('c3', '{"activeNodeIds": ["n9"]}', 'u1');
DELETE FROM convctx.session WHERE session_id = 'c3';
SET convctx.tenant = 'globex';
SELECT convctx.start_turn('s1', 'r1', 'globex question', identity_id => 'u1') IS NOT NULL AS started;
RESET convctx.tenant;

-- What the lines look like, ids and times masked.
CREATE FUNCTION pg_temp.masked(line text) RETURNS text LANGUAGE sql AS $$
    SELECT regexp_replace(regexp_replace(line,
        '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g'),
        '"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+\+00:00"', '<time>', 'g')
$$;
GRANT EXECUTE ON FUNCTION pg_temp.masked(text) TO PUBLIC;

SET ROLE export_admin;
-- everything of acme, grouped by conversation
SELECT record_type, pg_temp.masked(line) FROM convctx.export_records();
-- each line is one JSON object whose "type" is the record type, exactly the stored values
SELECT count(*) AS lines,
       count(*) FILTER (WHERE (line::jsonb ->> 'type') = record_type) AS typed,
       count(*) FILTER (WHERE line LIKE '{"type": %') AS type_first
FROM convctx.export_records();
SELECT line::jsonb -> 'chunks' -> 0 -> 'score' AS score, line::jsonb -> 'chunks' -> 0 -> 'big' AS big,
       line::jsonb -> 'chunks' -> 0 -> 'e' AS e
FROM convctx.export_records() WHERE record_type = 'retrieval';
SELECT (line::jsonb ->> 'question_neutral') = 'Q1 with every plane: é 😀 𠀀 e' || chr(769) || ' שלום' AS unicode_exact
FROM convctx.export_records('s1') WHERE record_type = 'turn' AND line::jsonb ->> 'request_id' = 'r1'
  AND (line::jsonb ->> 'record_version') = '1';
-- the turn rows as stored, one line each
SELECT (SELECT count(*) FROM convctx.export_records() WHERE record_type = 'turn') AS exported_turns;
RESET ROLE;
SELECT count(*) AS stored_turns FROM convctx.turn WHERE tenant_id = 'acme';
SET ROLE export_admin;

-- filters: one session; a data subject (its sessions and the contexts saved
-- under it); activity since; created before
SELECT record_type, count(*) FROM convctx.export_records('s2') GROUP BY 1 ORDER BY 1;
SELECT record_type, line::jsonb ->> 'session_id' AS session_id, line::jsonb ->> 'conversation_id' AS conversation_id
FROM convctx.export_records(identity_id => 'u1') WHERE record_type IN ('session', 'context');
SELECT count(*) AS none_since FROM convctx.export_records(since => now() + interval '1 hour');
SELECT count(*) AS none_before FROM convctx.export_records(until => '2000-01-01');
SELECT count(*) AS unknown_session FROM convctx.export_records('nope');
-- the portable messages of the same conversations: current live turns only
SELECT line::jsonb ->> 'session_id' AS session_id,
       jsonb_path_query_array(line::jsonb, '$.messages[*].role') AS roles,
       jsonb_path_query_array(line::jsonb, '$.messages[*].content') AS contents,
       jsonb_path_query_array(line::jsonb, '$.messages[*].id') AS ids
FROM convctx.export_messages();
SELECT count(*) AS u1_lines FROM convctx.export_messages(identity_id => 'u1');
SELECT convctx.export_messages(repeat('x', 1025));
-- bad arguments
SELECT convctx.export_records('');
SELECT convctx.export_records(repeat('x', 1025));
RESET ROLE;

-- only administrators; an app role gets nothing
SET ROLE export_app;
SELECT count(*) FROM convctx.export_records();
RESET ROLE;

-- another tenant's administrator sees its own tenant only
SELECT convctx.bind_role_tenant('export_admin', 'globex');
SET ROLE export_admin;
SELECT record_type, line::jsonb ->> 'question_neutral' AS question
FROM convctx.export_records() WHERE record_type = 'turn';
RESET ROLE;

SELECT convctx.unbind_role_tenant('export_admin'), convctx.unbind_role_tenant('export_app');
DROP ROLE export_admin, export_app;
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
RESET TimeZone;
