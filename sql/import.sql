-- import_records (0.5.0): convctx.jsonl records written back with their ids
-- and times, under the rules of the API; administrators only.
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification,
         convctx.role_tenant;
SET client_min_messages = warning;
DROP ROLE IF EXISTS import_admin, import_app, import_copy;
RESET client_min_messages;
CREATE ROLE import_admin IN ROLE convctx_admin;
CREATE ROLE import_copy IN ROLE convctx_admin;
CREATE ROLE import_app IN ROLE convctx_app;
SELECT convctx.bind_role_tenant('import_admin', 'acme'), convctx.bind_role_tenant('import_app', 'acme'),
       convctx.bind_role_tenant('import_copy', 'copy');
SET TimeZone = 'UTC';

-- acme: s1 linked to u1 with a corrected answer, a redacted turn, exact
-- numbers, a retrieval, a clarification, a summary and a context; s2
-- anonymous; c3 a context without a session row
SET convctx.tenant = 'acme';
SET convctx.metadata_allowlist = 'channel,locale';
SELECT convctx.start_turn('s1', 'r1', 'Q1 with every plane: é 😀 𠀀 e' || chr(769) || ' שלום ' || chr(1114109),
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
SET ROLE import_admin;
SELECT convctx.redact_turn('s1', :'t2');
RESET ROLE;
SET convctx.tenant = 'acme';
SELECT convctx.set_summary('s1', 'They asked three things.', :'t3',
                           (SELECT redactions FROM convctx.session WHERE session_id = 's1'));
SELECT convctx.context_add('s1', ARRAY['n1', 'n2'], 'u1') IS NOT NULL AS context;
SELECT convctx.start_turn('s2', 'r1', 'anonymous question') IS NOT NULL AS started;
SELECT convctx.context_save('c3', '{"activeNodeIds": ["n9"]}', 'u1');
DELETE FROM convctx.session WHERE session_id = 'c3';
RESET convctx.tenant;

CREATE TABLE pg_temp.src AS
    SELECT * FROM convctx.export_records() WITH ORDINALITY AS x(record_type, line, n) WHERE false;
GRANT SELECT, INSERT ON pg_temp.src TO PUBLIC;
SET ROLE import_admin;
INSERT INTO pg_temp.src SELECT * FROM convctx.export_records() WITH ORDINALITY;
RESET ROLE;
-- the stored rows of a tenant, to compare
CREATE FUNCTION pg_temp.rows(tenant text) RETURNS TABLE (kind text, n bigint, digest text)
LANGUAGE sql AS $$
    SELECT 'session', count(*), md5(string_agg(row(session_id, identity_id, created_at, last_activity_at, last_turn_no,
              live_turns, live_answers, summary_through_turn_no, redactions)::text, ',' ORDER BY session_id))
      FROM convctx.session WHERE tenant_id = tenant
    UNION ALL
    SELECT 'link', count(*), md5(string_agg(row(session_id, identity_id, linked_at)::text, ',' ORDER BY session_id))
      FROM convctx.session_link WHERE tenant_id = tenant
    UNION ALL
    SELECT 'turn', count(*), md5(string_agg((t.*)::text, ',' ORDER BY turn_id))
      FROM (SELECT session_id, turn_id, turn_no, request_id, identity_id, created_at, finalized_at, pipeline_name,
                   consultant, repository, translate_chat, question_neutral, answer_neutral, question_translated,
                   answer_translated, answer_translated_is_fallback, metadata, record_version, replaced_by_turn_id,
                   deleted_at, redaction
              FROM convctx.turn WHERE tenant_id = tenant) t
    UNION ALL
    SELECT 'retrieval', count(*), md5(string_agg(row(session_id, turn_no, chunks::text, citations::text, recorded_at)::text, ','))
      FROM convctx.turn_retrieval WHERE tenant_id = tenant
    UNION ALL
    SELECT 'clarification', count(*), md5(string_agg(row(session_id, turn_no, questions, inferred_context, recorded_at)::text, ','))
      FROM convctx.clarification WHERE tenant_id = tenant
    UNION ALL
    SELECT 'summary', count(*), md5(string_agg(row(session_id, summary, through_turn_no, covered_messages, updated_at)::text, ','))
      FROM convctx.session_summary WHERE tenant_id = tenant
    UNION ALL
    SELECT 'context', count(*), md5(string_agg(row(conversation_id, context_json, user_id, created_at, updated_at)::text, ',' ORDER BY conversation_id))
      FROM convctx.conversation_context WHERE tenant_id = tenant
$$;
CREATE FUNCTION pg_temp.batch(VARIADIC lines text[]) RETURNS text[] LANGUAGE sql AS 'SELECT lines';
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pg_temp TO PUBLIC;

-- Round trip: acme's records imported into tenant copy hold the same rows,
-- every digit and character, and export the same lines.
SET ROLE import_copy;
SELECT * FROM convctx.import_records((SELECT array_agg(line ORDER BY n) FROM pg_temp.src));
RESET ROLE;
SELECT a.kind, a.n, a.digest = c.digest AS same FROM pg_temp.rows('acme') a JOIN pg_temp.rows('copy') c USING (kind);
SET ROLE import_copy;
SELECT count(*) AS lines, count(*) FILTER (WHERE s.line = c.line) AS identical
FROM pg_temp.src s JOIN convctx.export_records() WITH ORDINALITY AS c(record_type, line, n) USING (n);
-- again: every key exists, so everything is skipped and nothing changes
SELECT * FROM convctx.import_records((SELECT array_agg(line ORDER BY n) FROM pg_temp.src));
-- on_conflict 'error' refuses the first record that exists, and writes nothing
SELECT * FROM convctx.import_records((SELECT array_agg(line ORDER BY n) FROM pg_temp.src), 'error');
SELECT * FROM convctx.import_records((SELECT array_agg(line ORDER BY n) FROM pg_temp.src), 'sometimes');
RESET ROLE;
SELECT action, details FROM convctx.audit_log WHERE tenant_id = 'copy' ORDER BY logged_at;

-- Bad records: each refused with its SQLSTATE and the record it is, and
-- nothing of the batch is written.
\set VERBOSITY default
SET ROLE import_copy;
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z"}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "question_neutral": "q"}',
    '{"type": "ticket", "session_id": "b1"}'));
SELECT count(*) AS b1_written FROM convctx.sessions WHERE session_id = 'b1';
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "colour": "red"}'));
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "last_activity_at": "2026-01-01T00:00:00Z"}'));
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": 7, "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z"}'));
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "created_at": "yesterday-ish", "last_activity_at": "2026-01-01T00:00:00Z"}'));
SELECT * FROM convctx.import_records(pg_temp.batch('[1, 2]'));
SELECT * FROM convctx.import_records(pg_temp.batch('{"type": "session", "session_id": "b1"'));
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1\u0000", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z"}'));
\set VERBOSITY terse
-- a turn outside its session's group; a turn_no that is not an integer
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "question_neutral": "q"}'));
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z"}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1.5, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "question_neutral": "q"}'));
-- a tombstone with text; a live turn without a question; a finalized turn without an answer
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z"}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "deleted_at": "2026-01-02T00:00:00Z", "question_neutral": "kept?"}'));
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z"}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z"}'));
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z"}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "finalized_at": "2026-01-01T00:00:01Z", "question_neutral": "q"}'));
-- duplicate keys in the batch: the same turn twice, the same request current twice
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z"}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "question_neutral": "q"}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 2, "request_id": "r2", "created_at": "2026-01-01T00:00:00Z", "question_neutral": "q"}'));
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z"}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "question_neutral": "q"}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000002", "turn_no": 2, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "question_neutral": "q"}'));
-- derived counts that do not match the turns
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z", "live_turns": 2}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "question_neutral": "q"}'));
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z", "last_turn_no": 0}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "question_neutral": "q"}'));
-- What the API would never have made is refused too, with the record it is:
-- numbers out of range (a negative redaction, a turn number past 2^31)
RESET ROLE;
CREATE FUNCTION pg_temp.s(extra text DEFAULT '') RETURNS text LANGUAGE sql AS $$
    SELECT '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z"' || extra || '}'
$$;
CREATE FUNCTION pg_temp.t(id int, turn_no int, request text, extra text DEFAULT '') RETURNS text LANGUAGE sql AS $$
    SELECT '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-00000000000' || id || '", "turn_no": ' || turn_no
        || ', "request_id": "' || request || '", "created_at": "2026-01-01T00:00:00Z"' || extra || '}'
$$;
GRANT EXECUTE ON FUNCTION pg_temp.s(text), pg_temp.t(int, int, text, text) TO PUBLIC;
SET ROLE import_copy;
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(', "redactions": -5')]);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(', "last_turn_no": 9223372036854775000')]);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "deleted_at": "2026-01-02T00:00:00Z", "redaction": -5')]);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1e30, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "question_neutral": "q"}']);
-- a redaction number on a live turn; an empty question
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q", "redaction": 1')]);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": ""')]);
-- versions that are no chain: an old version under another turn number, a
-- successor that does not exist, a request without a current version, two
-- requests under one turn number, a tombstone of one version only
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(),
    pg_temp.t(1, 7, 'r1', ', "question_neutral": "OLD secret", "replaced_by_turn_id": "00000000-0000-0000-0000-000000000002"'),
    pg_temp.t(2, 1, 'r1', ', "question_neutral": "new", "record_version": 2')]);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(),
    pg_temp.t(1, 1, 'r1', ', "question_neutral": "q", "replaced_by_turn_id": "00000000-0000-0000-0000-000000000009"'),
    pg_temp.t(2, 1, 'r1', ', "question_neutral": "q2", "record_version": 2')]);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(),
    pg_temp.t(1, 1, 'r1', ', "question_neutral": "q", "replaced_by_turn_id": "00000000-0000-0000-0000-000000000001"')]);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(),
    pg_temp.t(1, 1, 'r1', ', "question_neutral": "q"'), pg_temp.t(2, 1, 'r2', ', "question_neutral": "q"')]);
-- a redacted turn whose old version kept its text
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(),
    pg_temp.t(1, 1, 'r1', ', "question_neutral": "OLD secret", "replaced_by_turn_id": "00000000-0000-0000-0000-000000000002"'),
    pg_temp.t(2, 1, 'r1', ', "record_version": 2, "deleted_at": "2026-01-02T00:00:00Z", "redaction": 1')]);
-- retrievals and clarifications of a tombstone or of no turn; a summary past
-- the newest turn, or written before a turn it covers was redacted
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(),
    pg_temp.t(1, 1, 'r1', ', "deleted_at": "2026-01-02T00:00:00Z", "redaction": 1'),
    '{"type": "retrieval", "session_id": "b1", "turn_no": 1, "chunks": [{"id": "c", "text": "REDACTED SECRET"}], "citations": [], "recorded_at": "2026-01-01T00:00:00Z"}']);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q"'),
    '{"type": "clarification", "session_id": "b1", "turn_no": 5, "questions": [{"question": "q?"}], "inferred_context": {}, "recorded_at": "2026-01-01T00:00:00Z"}']);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q"'),
    '{"type": "summary", "session_id": "b1", "summary": "s", "through_turn_no": 3, "updated_at": "2026-01-01T00:00:00Z"}']);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "deleted_at": "2026-01-02T00:00:00Z", "redaction": 1'),
    '{"type": "summary", "session_id": "b1", "summary": "user said REDACTED SECRET", "through_turn_no": 1, "updated_at": "2026-01-01T12:00:00Z"}']);
-- shapes record_retrieval and record_clarification refuse
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q"'),
    '{"type": "retrieval", "session_id": "b1", "turn_no": 1, "chunks": [1, "x"], "citations": [], "recorded_at": "2026-01-01T00:00:00Z"}']);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q"'),
    '{"type": "retrieval", "session_id": "b1", "turn_no": 1, "chunks": [], "citations": [{"id": "ghost"}], "recorded_at": "2026-01-01T00:00:00Z"}']);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q"'),
    '{"type": "clarification", "session_id": "b1", "turn_no": 1, "questions": [1, 2], "inferred_context": {}, "recorded_at": "2026-01-01T00:00:00Z"}']);
-- states the API cannot make: a title of white space, live text under the
-- stand-in erase_identity leaves, last activity before a turn, times that
-- are words (epoch, yesterday, now)
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(', "title": " \t "')]);
SELECT * FROM convctx.import_records(ARRAY[
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "erased", "linked_at": "2026-01-01T00:00:00Z"}',
    pg_temp.t(1, 1, 'r1', ', "question_neutral": "kept after the erasure?"')]);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q", "created_at": "2026-01-02T00:00:00Z"')]);
SELECT * FROM convctx.import_records(ARRAY[
    '{"type": "session", "session_id": "b1", "created_at": "epoch", "last_activity_at": "2026-01-01T00:00:00Z"}']);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q", "created_at": "yesterday 10:00"')]);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q", "answer_neutral": "a", "finalized_at": "now"')]);
-- a turn of another identity than its session's
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q", "identity_id": "bob"')]);
-- times no retention could reach: infinite, in the future, or out of order
SELECT * FROM convctx.import_records(ARRAY[
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "infinity"}']);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q", "created_at": "9999-01-01T00:00:00Z"')]);
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q", "answer_neutral": "a", "finalized_at": "2000-01-01T00:00:00Z"')]);
-- the same session twice in a batch; an anonymous session whose numbering
-- runs past its turns (its first new turn would drop them all)
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(), pg_temp.s()]);
SELECT * FROM convctx.import_records(ARRAY[
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "last_turn_no": 1000}',
    pg_temp.t(1, 1, 'r1', ', "question_neutral": "q"')], allow_anonymous => true);
-- a problem of the group as a whole names its session record
\set VERBOSITY default
SELECT * FROM convctx.import_records(ARRAY[pg_temp.s(', "live_turns": 3'), pg_temp.t(1, 1, 'r1', ', "question_neutral": "q"'),
    '{"type": "session", "session_id": "b2", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z"}']);
\set VERBOSITY terse
RESET ROLE;
SELECT count(*) AS nothing_written FROM convctx.session WHERE tenant_id = 'copy' AND session_id IN ('b1', 'b2');

-- too long: a text over convctx.max_text_bytes, an id over 1024 bytes
RESET ROLE;
SET convctx.max_text_bytes = 100;
SET ROLE import_copy;
SELECT * FROM convctx.import_records(ARRAY[
    '{"type": "session", "session_id": "b1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "u9", "linked_at": "2026-01-01T00:00:00Z"}',
    '{"type": "turn", "session_id": "b1", "turn_id": "00000000-0000-0000-0000-000000000001", "turn_no": 1, "request_id": "r1", "created_at": "2026-01-01T00:00:00Z", "question_neutral": "' || repeat('x', 101) || '"}']);
SELECT * FROM convctx.import_records(ARRAY[
    '{"type": "session", "session_id": "' || repeat('x', 1025) || '", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z"}']);
RESET ROLE;
RESET convctx.max_text_bytes;
SELECT count(*) AS nothing_written FROM convctx.session WHERE tenant_id = 'copy' AND session_id = 'b1';

-- Identities: a session of another identity is refused as link_session
-- refuses it (CV001), and the refusal is audited.
SET ROLE import_copy;
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "s1", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z", "identity_id": "mallory", "linked_at": "2026-01-01T00:00:00Z"}'));
RESET ROLE;
SELECT action, session_id, identity_id FROM convctx.audit_log WHERE tenant_id = 'copy' AND action = 'link_refused';

-- Anonymous sessions the next purge would delete are refused unless
-- allowed, or given an identity; identity_map renames identities.
SET ROLE import_copy;
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "old", "created_at": "2020-01-01T00:00:00Z", "last_activity_at": "2020-01-01T00:00:00Z"}',
    '{"type": "turn", "session_id": "old", "turn_id": "00000000-0000-0000-0000-000000000009", "turn_no": 1, "request_id": "r1", "created_at": "2020-01-01T00:00:00Z", "question_neutral": "old q"}'));
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "old", "created_at": "2020-01-01T00:00:00Z", "last_activity_at": "2020-01-01T00:00:00Z"}',
    '{"type": "turn", "session_id": "old", "turn_id": "00000000-0000-0000-0000-000000000009", "turn_no": 1, "request_id": "r1", "created_at": "2020-01-01T00:00:00Z", "question_neutral": "old q"}'),
    as_identity => 'alice') WHERE imported > 0;
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "old2", "created_at": "2020-01-01T00:00:00Z", "last_activity_at": "2020-01-01T00:00:00Z"}'),
    allow_anonymous => true) WHERE imported > 0;
SELECT * FROM convctx.import_records(pg_temp.batch(
    '{"type": "session", "session_id": "mapped", "created_at": "2020-01-01T00:00:00Z", "last_activity_at": "2020-01-01T00:00:00Z", "identity_id": "old-user", "linked_at": "2020-01-01T00:00:00Z"}',
    '{"type": "turn", "session_id": "mapped", "turn_id": "00000000-0000-0000-0000-00000000000a", "turn_no": 1, "request_id": "r1", "identity_id": "old-user", "created_at": "2020-01-01T00:00:00Z", "question_neutral": "q", "metadata": {"channel": "web", "secret": "x"}}'),
    identity_map => '{"old-user": "new-user"}');
SELECT * FROM convctx.import_records(pg_temp.batch('{}'), identity_map => '{"a": 1}');
RESET ROLE;
SELECT s.session_id, s.identity_id, l.identity_id AS linked, s.live_turns,
       (SELECT array_agg(DISTINCT t.identity_id) FROM convctx.turn t WHERE t.tenant_id = s.tenant_id AND t.session_id = s.session_id) AS turn_identities,
       (SELECT array_agg(t.metadata) FROM convctx.turn t WHERE t.tenant_id = s.tenant_id AND t.session_id = s.session_id) AS metadata
FROM convctx.session s LEFT JOIN convctx.session_link l USING (tenant_id, session_id)
WHERE s.tenant_id = 'copy' AND s.session_id IN ('old', 'old2', 'mapped') ORDER BY 1;

-- A conversation that grew since it was imported: a re-import adds what
-- the file has and the database lacks (new turns, an answer given since, a
-- retrieval), skips what both have, and says why; copy's s1 then exports
-- as acme's does. The same file again adds nothing.
SET convctx.tenant = 'acme';
SELECT convctx.start_turn('s1', 'r4', 'Q4') AS t4 \gset
SELECT convctx.finalize_turn('s1', :'t4', 'A4');
SELECT convctx.record_retrieval('s1', :'t4', '[{"id": "c4", "text": "chunk 4"}]', '[]');
SELECT convctx.start_turn('s1', 'r5', 'Q5, open when exported') AS t5 \gset
RESET convctx.tenant;
CREATE TABLE pg_temp.grown (LIKE pg_temp.src);
GRANT SELECT, INSERT, DELETE ON pg_temp.grown TO PUBLIC;
CREATE FUNCTION pg_temp.export_s1() RETURNS void LANGUAGE sql AS $$
    DELETE FROM pg_temp.grown;
    INSERT INTO pg_temp.grown SELECT * FROM convctx.export_records('s1') WITH ORDINALITY;
$$;
CREATE FUNCTION pg_temp.same_as_acme() RETURNS TABLE (lines bigint, identical bigint) LANGUAGE sql AS $$
    SELECT count(*), count(*) FILTER (WHERE g.line = c.line)
    FROM pg_temp.grown g FULL JOIN convctx.export_records('s1') WITH ORDINALITY AS c(record_type, line, n) USING (n)
$$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pg_temp TO PUBLIC;
SET ROLE import_admin;
SELECT pg_temp.export_s1();
SET ROLE import_copy;
SELECT * FROM convctx.import_records((SELECT array_agg(line ORDER BY n) FROM pg_temp.grown));
SELECT * FROM pg_temp.same_as_acme();
SELECT * FROM convctx.import_records((SELECT array_agg(line ORDER BY n) FROM pg_temp.grown)) WHERE imported > 0;
SELECT * FROM pg_temp.same_as_acme();
RESET ROLE;
-- the open turn was answered since: the answer comes in, nothing else
SET convctx.tenant = 'acme';
SELECT convctx.finalize_turn('s1', :'t5', 'A5');
RESET convctx.tenant;
SET ROLE import_admin;
SELECT pg_temp.export_s1();
SET ROLE import_copy;
SELECT record_type, imported, skipped_why FROM convctx.import_records((SELECT array_agg(line ORDER BY n) FROM pg_temp.grown))
WHERE record_type = 'turn';
SELECT * FROM pg_temp.same_as_acme();
RESET ROLE;
-- redacted here since: the redaction holds, the turn and its retrieval are
-- skipped as redacted here
SET ROLE import_copy;
SELECT convctx.redact_turn('s1', :'t4');
SELECT record_type, imported, skipped, skipped_why
FROM convctx.import_records((SELECT array_agg(line ORDER BY n) FROM pg_temp.grown)) WHERE skipped > 0;
RESET ROLE;
SELECT count(*) AS live_t4 FROM convctx.turn WHERE tenant_id = 'copy' AND turn_id = :'t4' AND deleted_at IS NULL;
-- both went on, differently: turn 6 is another request here than in the
-- file, refused (23505) with the record it is, and nothing written
SET convctx.tenant = 'copy';
SELECT convctx.start_turn('s1', 'r6-copy', 'asked in copy') IS NOT NULL AS started;
SET convctx.tenant = 'acme';
SELECT convctx.start_turn('s1', 'r6-acme', 'asked in acme') IS NOT NULL AS started;
RESET convctx.tenant;
SET ROLE import_admin;
SELECT pg_temp.export_s1();
SET ROLE import_copy;
\set VERBOSITY default
SELECT * FROM convctx.import_records((SELECT array_agg(line ORDER BY n) FROM pg_temp.grown));
\set VERBOSITY terse
RESET ROLE;
SELECT last_turn_no, live_turns FROM convctx.session WHERE tenant_id = 'copy' AND session_id = 's1';

-- A title and a link made after the export: a merge of the newer export
-- takes both, the link with the file's linked_at (linked_later as in acme),
-- and counts the session record as imported, not as already there; copy's
-- ti then exports as acme's does. The same file again: already there.
SET convctx.tenant = 'acme';
SELECT convctx.start_turn('ti', 'r1', 'Q1 of ti') AS ti1 \gset
SELECT convctx.finalize_turn('ti', :'ti1', 'A1 of ti');
RESET convctx.tenant;
CREATE TABLE pg_temp.one (LIKE pg_temp.src);
GRANT SELECT, INSERT, DELETE ON pg_temp.one TO PUBLIC;
CREATE FUNCTION pg_temp.export_one(sid text) RETURNS void LANGUAGE sql AS $$
    DELETE FROM pg_temp.one;
    INSERT INTO pg_temp.one SELECT * FROM convctx.export_records(sid) WITH ORDINALITY;
$$;
CREATE FUNCTION pg_temp.import_one() RETURNS TABLE (record_type text, imported bigint, skipped bigint, skipped_why jsonb)
LANGUAGE sql AS $$
    SELECT * FROM convctx.import_records((SELECT array_agg(line ORDER BY n) FROM pg_temp.one))
     WHERE record_type IN ('session', 'turn')
$$;
CREATE FUNCTION pg_temp.same_as_file(sid text) RETURNS TABLE (lines bigint, identical bigint) LANGUAGE sql AS $$
    SELECT count(*), count(*) FILTER (WHERE g.line = c.line)
    FROM pg_temp.one g FULL JOIN convctx.export_records(sid) WITH ORDINALITY AS c(record_type, line, n) USING (n)
$$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pg_temp TO PUBLIC;
SET ROLE import_admin;
SELECT pg_temp.export_one('ti');
SET ROLE import_copy;
SELECT * FROM pg_temp.import_one();
RESET ROLE;
SET convctx.tenant = 'acme';
SELECT convctx.set_session_title('ti', 'Title set after the export');
SELECT convctx.link_session('u9', 'ti');
SELECT convctx.start_turn('ti', 'r2', 'Q2 of ti') AS ti2 \gset
SELECT convctx.finalize_turn('ti', :'ti2', 'A2 of ti');
RESET convctx.tenant;
SET ROLE import_admin;
SELECT pg_temp.export_one('ti');
SET ROLE import_copy;
SELECT * FROM pg_temp.import_one();
SELECT * FROM pg_temp.same_as_file('ti');
SELECT * FROM pg_temp.import_one();
RESET ROLE;
SELECT s.tenant_id, s.title, s.identity_id, s.linked_later, l.linked_at = a.linked_at AS linked_at_as_acme
FROM convctx.session s JOIN convctx.session_link l USING (tenant_id, session_id),
     (SELECT linked_at FROM convctx.session_link WHERE tenant_id = 'acme' AND session_id = 'ti') a
WHERE s.session_id = 'ti' ORDER BY 1;
-- a title of copy's own is kept, whatever the file says: another title here
SET ROLE import_copy;
SELECT convctx.set_session_title('ti', 'Title set in copy');
SELECT * FROM pg_temp.import_one();
RESET ROLE;
SELECT title FROM convctx.session WHERE tenant_id = 'copy' AND session_id = 'ti';
-- a file whose session has no title gives none: the record is already there
UPDATE pg_temp.one SET line = jsonb_set(line::jsonb, '{title}', 'null')::text
 WHERE line::jsonb ->> 'type' = 'session';
SET ROLE import_copy;
SELECT * FROM pg_temp.import_one() WHERE record_type = 'session';
RESET ROLE;
SELECT title FROM convctx.session WHERE tenant_id = 'copy' AND session_id = 'ti';

-- A title removed here by a redaction does not come back from a file: tr
-- has a title in acme when exported; copy redacts a turn, which removes the
-- title; the same file again, and a newer one, leave it removed, and the
-- session record says why (redacted here) when nothing else of it is taken.
SET convctx.tenant = 'acme';
SELECT convctx.start_turn('tr', 'r1', 'Q1 of tr', identity_id => 'u8') AS tr1 \gset
SELECT convctx.finalize_turn('tr', :'tr1', 'A1 of tr');
SELECT convctx.start_turn('tr', 'r2', 'Q2 of tr') AS tr2 \gset
SELECT convctx.set_session_title('tr', 'About Q1 of tr');
RESET convctx.tenant;
SET ROLE import_admin;
SELECT pg_temp.export_one('tr');
SET ROLE import_copy;
SELECT * FROM pg_temp.import_one();
SELECT convctx.redact_turn('tr', :'tr1');
SELECT * FROM pg_temp.import_one();
RESET ROLE;
SET convctx.tenant = 'acme';
SELECT convctx.finalize_turn('tr', :'tr2', 'A2 of tr');
SELECT convctx.start_turn('tr', 'r3', 'Q3 of tr') IS NOT NULL AS started;
RESET convctx.tenant;
SET ROLE import_admin;
SELECT pg_temp.export_one('tr');
SET ROLE import_copy;
SELECT * FROM pg_temp.import_one();
RESET ROLE;
SELECT tenant_id, title, redactions, live_turns FROM convctx.session WHERE session_id = 'tr' ORDER BY 1;

-- An erasure holds against re-import: after erase_identity('u1') in acme, its export from
-- before the erasure brings back nothing the erasure took, and writes no audit row naming u1.
-- With convctx.identity_hash_key a session or context of the erased identity is refused
-- (55000), also renamed with identity_map; a context of an erased session is refused with or
-- without a key.
\set VERBOSITY default
SET convctx.identity_hash_key = 'import key';
SET ROLE import_admin;
SELECT convctx.erase_identity('u1') > 0 AS erased;
-- the whole export, then c3 alone (a context without a session, saved with user_id u1)
SELECT * FROM convctx.import_records((SELECT array_agg(line ORDER BY n) FROM pg_temp.src));
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM convctx.import_records(ARRAY(SELECT line FROM pg_temp.src WHERE line::jsonb ->> 'conversation_id' = 'c3'));
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM convctx.import_records(ARRAY(SELECT line FROM pg_temp.src WHERE line::jsonb ->> 'conversation_id' = 'c3'),
                                     identity_map => '{"u1": "u1-again"}');
\echo :LAST_ERROR_SQLSTATE
-- the session group of s1 alone, as exported and with its identity renamed
SELECT * FROM convctx.import_records(ARRAY(SELECT line FROM pg_temp.src WHERE line::jsonb ->> 'session_id' = 's1' ORDER BY n));
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM convctx.import_records(ARRAY(SELECT line FROM pg_temp.src WHERE line::jsonb ->> 'session_id' = 's1' ORDER BY n),
                                     identity_map => '{"u1": "u1-again"}');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
RESET convctx.identity_hash_key;
-- without a key the identity is not recognised, but the context of the erased session s1 is
-- still refused, and so is its session group: the session is linked to the stand-in, and the
-- refusal of a link would audit u1 in clear
SET ROLE import_admin;
SELECT * FROM convctx.import_records(ARRAY(SELECT line FROM pg_temp.src WHERE line::jsonb ->> 'session_id' = 's1' ORDER BY n));
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM convctx.import_records(ARRAY(SELECT line FROM pg_temp.src WHERE line::jsonb ->> 'conversation_id' = 's1'
                                                                        AND record_type = 'context'));
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
\set VERBOSITY terse
SELECT count(*) AS contexts FROM convctx.conversation_context WHERE tenant_id = 'acme';
SELECT count(*) FILTER (WHERE strpos(row_to_json(a)::text, 'u1') > 0) AS audit_rows_naming_u1
FROM convctx.audit_log a WHERE tenant_id = 'acme';
SELECT count(*) AS rows_naming_u1 FROM convctx.session WHERE tenant_id = 'acme' AND identity_id = 'u1';

-- Only administrators; an app role cannot import.
SET ROLE import_app;
SELECT * FROM convctx.import_records(pg_temp.batch('{}'));
RESET ROLE;
-- read-only transactions refuse it before reading anything
BEGIN READ ONLY;
SELECT * FROM convctx.import_records(NULL);
ROLLBACK;

SELECT convctx.unbind_role_tenant('import_admin'), convctx.unbind_role_tenant('import_app'),
       convctx.unbind_role_tenant('import_copy');
DROP ROLE import_admin, import_app, import_copy;
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
RESET convctx.metadata_allowlist;
RESET TimeZone;
