-- Lifecycle: redaction tombstones, erasure, retention purges, scheduling, views.
-- start from an empty store, whatever ran before
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;

CREATE TEMP TABLE ids (name text PRIMARY KEY, id uuid);
-- Every column of the stored turns, with ids and clock values turned into facts.
CREATE TEMP VIEW turns AS
SELECT tenant_id, session_id, turn_no, request_id, identity_id, record_version,
       turn_id IS NOT NULL AS has_id, created_at IS NOT NULL AS has_created_at,
       finalized_at IS NOT NULL AS finalized, deleted_at IS NOT NULL AS redacted,
       replaced_by_turn_id IS NOT NULL AS replaced,
       pipeline_name, consultant, repository, translate_chat,
       question_neutral, answer_neutral, question_translated, answer_translated,
       answer_translated_is_fallback, metadata
FROM convctx.turn;
\i test/helpers.sql

-- a session with three finalized turns, the second one corrected twice
INSERT INTO ids SELECT 'a1', convctx.start_turn('sa', 'r1', 'Q1 private', question_translated => 'P1 prywatne',
    translate_chat => true, meta => '{"channel": "web", "ip": "192.0.2.1"}', pipeline_name => 'rag', consultant => 'tax', repository => 'ie');
INSERT INTO ids SELECT 'a2', convctx.start_turn('sa', 'r2', 'Q2 private');
INSERT INTO ids SELECT 'a3', convctx.start_turn('sa', 'r3', 'Q3 private');
SELECT convctx.finalize_turn('sa', id, 'A for ' || name, meta => '{"locale": "en"}') FROM ids ORDER BY name;
INSERT INTO ids SELECT 'a2v2', convctx.replace_turn('sa', (SELECT id FROM ids WHERE name = 'a2'), 'A2 corrected');
INSERT INTO ids SELECT 'a2v3', convctx.replace_turn('sa', (SELECT id FROM ids WHERE name = 'a2v2'), 'A2 corrected again');
SELECT question_neutral, answer_neutral FROM convctx.recent_turns('sa');

------------------------------------------------------------------------------
-- redact_turn: the turn and every version become tombstones
------------------------------------------------------------------------------
-- redacting through an old version's id redacts the whole chain
SELECT convctx.redact_turn('sa', (SELECT id FROM ids WHERE name = 'a2'));
SELECT * FROM turns WHERE session_id = 'sa' ORDER BY turn_no, record_version;
-- idempotent: already redacted
SELECT convctx.redact_turn('sa', (SELECT id FROM ids WHERE name = 'a2v3'));
-- tombstones never reach a prompt
SELECT question_neutral, answer_neutral FROM convctx.recent_turns('sa');
SELECT convctx.recent_turns_json('sa');
-- no later call brings text back
SELECT pg_temp.try($$SELECT convctx.finalize_turn('sa', (SELECT id FROM ids WHERE name = 'a2v3'), 'A2 corrected again')$$);
SELECT pg_temp.try($$SELECT convctx.replace_turn('sa', (SELECT id FROM ids WHERE name = 'a2v3'), 'new text')$$);
SELECT convctx.start_turn('sa', 'r2', 'Q2 private again') = (SELECT id FROM ids WHERE name = 'a2v3') AS same_tombstone;
SELECT count(*) AS text_in_tombstones FROM convctx.turn
WHERE deleted_at IS NOT NULL
  AND (question_neutral IS NOT NULL OR answer_neutral IS NOT NULL OR question_translated IS NOT NULL
       OR answer_translated IS NOT NULL OR metadata IS NOT NULL);
-- a redacted, never finalized turn stays unfinalizable
INSERT INTO ids SELECT 'a4', convctx.start_turn('sa', 'r4', 'Q4 private');
SELECT convctx.redact_turn('sa', (SELECT id FROM ids WHERE name = 'a4'));
SELECT pg_temp.try($$SELECT convctx.finalize_turn('sa', (SELECT id FROM ids WHERE name = 'a4'), 'late answer')$$);
SELECT request_id, finalized, redacted, question_neutral, answer_neutral FROM turns WHERE request_id = 'r4';
-- errors: nothing changed
CREATE TEMP TABLE snapshot AS SELECT * FROM convctx.turn;
SELECT convctx.redact_turn('sa', '00000000-0000-4000-8000-000000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT pg_temp.try($$SELECT convctx.redact_turn('other', (SELECT id FROM ids WHERE name = 'a1'))$$);
SELECT convctx.redact_turn(NULL, '00000000-0000-4000-8000-000000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.redact_turn('sa', NULL);
\echo :LAST_ERROR_SQLSTATE
SET convctx.tenant = 'tenant-b';
SELECT pg_temp.try($$SELECT convctx.redact_turn('sa', (SELECT id FROM ids WHERE name = 'a1'))$$);
RESET convctx.tenant;
SELECT count(*) AS changed_turns FROM (
    (SELECT * FROM convctx.turn EXCEPT SELECT * FROM snapshot)
    UNION ALL (SELECT * FROM snapshot EXCEPT SELECT * FROM convctx.turn)) d;

------------------------------------------------------------------------------
-- redact_session
------------------------------------------------------------------------------
SELECT convctx.redact_session('sa');
SELECT convctx.redact_session('sa');
SELECT convctx.redact_session('no-such-session');
SELECT request_id, record_version, redacted, question_neutral, answer_neutral, metadata
FROM turns WHERE session_id = 'sa' ORDER BY turn_no, record_version;
SELECT convctx.recent_turns_json('sa');
SELECT convctx.redact_session(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.redact_session('');
\echo :LAST_ERROR_SQLSTATE
-- the session goes on: a new turn after the redaction is stored normally
SELECT convctx.finalize_turn('sa', convctx.start_turn('sa', 'r5', 'Q5'), 'A5') IS NOT NULL AS finalized;
SELECT question_neutral, answer_neutral FROM convctx.recent_turns('sa');

------------------------------------------------------------------------------
-- erase_identity: every session of the identity, and their contexts
------------------------------------------------------------------------------
SELECT convctx.finalize_turn('u1-a', convctx.start_turn('u1-a', 'r1', 'secret 1', identity_id => 'user-1'), 'answer 1') IS NOT NULL AS finalized;
SELECT convctx.finalize_turn('u1-a', convctx.start_turn('u1-a', 'r2', 'secret 2'), 'answer 2') IS NOT NULL AS finalized;
SELECT convctx.finalize_turn('u1-b', convctx.start_turn('u1-b', 'r1', 'secret 3', identity_id => 'user-1'), 'answer 3') IS NOT NULL AS finalized;
SELECT convctx.finalize_turn('u2', convctx.start_turn('u2', 'r1', 'kept', identity_id => 'user-2'), 'kept answer') IS NOT NULL AS finalized;
SELECT convctx.context_add(s, ARRAY['node-' || s]) IS NOT NULL FROM unnest(ARRAY['u1-a', 'u1-b', 'u2']) s;
-- the same identity in another tenant is another person
SET convctx.tenant = 'tenant-b';
SELECT convctx.finalize_turn('u1-a', convctx.start_turn('u1-a', 'r1', 'tenant b secret', identity_id => 'user-1'), 'b answer') IS NOT NULL AS finalized;
RESET convctx.tenant;
SELECT convctx.erase_identity('user-1');
SELECT tenant_id, session_id, request_id, identity_id, redacted, question_neutral, answer_neutral
FROM turns WHERE session_id LIKE 'u%' ORDER BY tenant_id, session_id, turn_no;
SELECT tenant_id, conversation_id FROM convctx.conversation_context ORDER BY 1, 2;
SELECT convctx.erase_identity('user-1');
SELECT convctx.erase_identity('nobody');
SELECT convctx.erase_identity(NULL);
\echo :LAST_ERROR_SQLSTATE

-- every redaction and erasure is in the audit log: ids and counts, never content
SELECT tenant_id, role_name = current_user AS by_caller, action, session_id, identity_id,
       regexp_replace(details::text, '[0-9a-f]{8}-[0-9a-f-]{27}', '<turn>') AS details
FROM convctx.audit_log ORDER BY logged_at, audit_id;
SELECT count(*) AS content_in_audit FROM convctx.audit_log
WHERE details::text ~ '(private|secret|answer|A for)';

-- the session counts match the turns
SELECT * FROM miscounted_sessions;

------------------------------------------------------------------------------
-- retention
------------------------------------------------------------------------------
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
SELECT * FROM convctx.retention_settings();
SHOW convctx.session_ttl;
SHOW convctx.context_ttl;
SHOW convctx.turn_retention;
-- three anonymous sessions (two idle for two days), one linked idle session, contexts;
-- a context alone makes an anonymous session without turns (ctx-only-*): its row expires
-- with convctx.session_ttl like any other, but its context is left to convctx.context_ttl
-- (ctx-only-old's context is 40 days old and goes; ctx-only-new's stays)
SELECT count(convctx.start_turn(s, 'r' || i, 'q')) FROM unnest(ARRAY['anon-old-1', 'anon-old-2', 'anon-new']) s, generate_series(1, 3) i;
SELECT convctx.start_turn('linked-old', 'r1', 'q', identity_id => 'user-9') IS NOT NULL;
SELECT count(convctx.context_add(s, ARRAY['n'])) FROM unnest(ARRAY['anon-old-1', 'anon-new', 'linked-old', 'ctx-only-old', 'ctx-only-new']) s;
UPDATE convctx.session SET last_activity_at = now() - interval '2 days' WHERE session_id LIKE '%-old%';
UPDATE convctx.conversation_context SET updated_at = now() - interval '40 days' WHERE conversation_id = 'ctx-only-old';
SELECT tenant, session_id, identity_id, turns, finalized, redacted,
       last_at < now() - interval '1 day' AS idle, expires_at IS NOT NULL AS expires
FROM convctx.sessions ORDER BY session_id;
-- batches: at most batch_size rows of each kind per pass, and no more
-- sessions locked than batch_size turns can empty (each session counts
-- its last_turn_no, at least 1; the one that crosses the batch included)
SELECT convctx.purge(2);
SELECT convctx.purge(2);
SELECT convctx.purge(2);
SELECT convctx.purge(2);
SELECT convctx.purge(2);
SELECT session_id, count(*) FROM convctx.turn GROUP BY 1 ORDER BY 1;
SELECT conversation_id FROM convctx.conversation_context ORDER BY 1;
SELECT session_id FROM convctx.session ORDER BY 1;
-- turn retention deletes any old turn, tombstones and linked sessions included
SET convctx.turn_retention = '1h';
UPDATE convctx.turn SET created_at = now() - interval '2 hours' WHERE session_id = 'linked-old';
-- (the ids first: on Citus, a call inside a query of convctx's tables runs on their shard's node)
INSERT INTO ids SELECT 'linked-old-' || turn_no, turn_id FROM convctx.turn WHERE session_id = 'linked-old';
SELECT convctx.redact_turn('linked-old', id) FROM ids WHERE name LIKE 'linked-old-%';
SELECT convctx.purge();
SELECT session_id, count(*) FROM convctx.turn GROUP BY 1 ORDER BY 1;
RESET convctx.turn_retention;
-- 0 keeps forever
SET convctx.session_ttl = 0;
SET convctx.context_ttl = 0;
UPDATE convctx.session SET last_activity_at = now() - interval '1000 days';
UPDATE convctx.conversation_context SET updated_at = now() - interval '1000 days';
SELECT convctx.purge();
SELECT * FROM convctx.retention_settings();
RESET convctx.session_ttl;
RESET convctx.context_ttl;
-- purge_all repeats until nothing is left
SELECT count(convctx.start_turn('bulk-' || s, 'r' || i, 'q')) FROM generate_series(1, 20) s, generate_series(1, 5) i;
UPDATE convctx.session SET last_activity_at = now() - interval '2 days' WHERE session_id LIKE 'bulk-%';
SELECT count(*) AS purges_before FROM convctx.audit_log WHERE action LIKE 'purge%' \gset
-- a dozen passes: a short pause after each (test/t/018_purge_pause.pl looks at the pause)
SET convctx.purge_pause = '1ms';
CALL convctx.purge_all(7);
RESET convctx.purge_pause;
SELECT count(*) AS bulk_turns_left FROM convctx.turn WHERE session_id LIKE 'bulk-%';
-- a purge by a role serving every tenant writes one audit row per tenant it deleted
-- something of, and none when it deleted nothing: the purges above that did, then
-- purge_all's passes; which turns a pass takes follows the table's physical order, so its
-- passes are checked together: each within the batch, together everything, none empty
SELECT action, details FROM convctx.audit_log WHERE action LIKE 'purge%' ORDER BY logged_at, audit_id
LIMIT :purges_before;
SELECT bool_and((details->>'anonymous_turns')::int <= 7 AND (details->>'anonymous_sessions')::int <= 7) AS within_batch,
       sum((details->>'anonymous_turns')::int) AS turns,
       sum((details->>'anonymous_sessions')::int) AS sessions,
       sum((details->>'contexts')::int) AS contexts,
       sum((details->>'expired_turns')::int) AS expired_turns
FROM (SELECT details FROM convctx.audit_log WHERE action LIKE 'purge%' ORDER BY logged_at, audit_id
      OFFSET :purges_before) p;
SELECT count(*) AS empty_purge_rows FROM convctx.audit_log
WHERE action = 'purge' AND details = '{"contexts": 0, "expired_turns": 0, "anonymous_turns": 0, "anonymous_sessions": 0}';
-- two tenants: each tenant's row has that tenant's counts only, tenant C (untouched) none
TRUNCATE convctx.audit_log;
SET convctx.tenant = 'A';
SELECT count(convctx.start_turn('pt-a-' || s, 'r' || i, 'q')) FROM generate_series(1, 2) s, generate_series(1, 3) i;
SET convctx.tenant = 'B';
SELECT count(convctx.start_turn('pt-b-1', 'r' || i, 'q')) FROM generate_series(1, 4) i;
SET convctx.tenant = 'C';
SELECT count(convctx.start_turn('pt-c-1', 'r1', 'q'));
RESET convctx.tenant;
UPDATE convctx.session SET last_activity_at = now() - interval '2 days' WHERE session_id LIKE 'pt-a-%' OR session_id = 'pt-b-1';
SELECT convctx.purge();
SELECT tenant_id, action, details FROM convctx.audit_log ORDER BY tenant_id;
DELETE FROM convctx.turn WHERE session_id = 'pt-c-1';
DELETE FROM convctx.session WHERE session_id = 'pt-c-1';
-- errors
SELECT convctx.purge(0);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.purge(NULL);
\echo :LAST_ERROR_SQLSTATE
CALL convctx.purge_all(-1);
\echo :LAST_ERROR_SQLSTATE
SET convctx.session_ttl = -1;
SET convctx.session_ttl = '1 fortnight';

------------------------------------------------------------------------------
-- scheduling needs pg_cron
------------------------------------------------------------------------------
SELECT convctx.schedule_retention();
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.unschedule_retention();
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.schedule_retention(NULL);
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------------
-- administration views
------------------------------------------------------------------------------
SELECT convctx.finalize_turn('view-s', convctx.start_turn('view-s', 'r1', 'q'), 'a') IS NOT NULL AS finalized;
SELECT convctx.start_turn('view-s', 'r2', 'q') IS NOT NULL;
INSERT INTO ids SELECT 'view-s-r2', turn_id FROM convctx.turn WHERE session_id = 'view-s' AND request_id = 'r2';
SELECT convctx.redact_turn('view-s', id) FROM ids WHERE name = 'view-s-r2';
SET convctx.tenant = 'tenant-b';
SELECT convctx.start_turn('view-s', 'r1', 'q', identity_id => 'user-b') IS NOT NULL;
RESET convctx.tenant;
SELECT tenant, session_id, identity_id, turns, finalized, redacted, first_at <= last_at AS ordered,
       expires_at = last_at + interval '24 hours' AS expires_in_a_day
FROM convctx.sessions WHERE session_id = 'view-s' ORDER BY tenant;
SELECT tenant, sessions, anonymous_sessions, linked_sessions, turns, old_versions, tombstones, contexts,
       table_bytes > 0 AS has_tables, index_bytes > 0 AS has_indexes
FROM convctx.stats ORDER BY tenant;
-- the sessions view reads through convctx.admin_sessions(): its plan shows no table (and
-- no estimate of other tenants' rows); admin_sessions(session_id) reads one session id only
EXPLAIN (COSTS OFF) SELECT * FROM convctx.sessions WHERE tenant = '' AND session_id = 'view-s';
SELECT (SELECT array_agg(s::text ORDER BY s::text) FROM convctx.sessions s WHERE session_id = 'view-s')
     = (SELECT array_agg(s::text ORDER BY s::text) FROM convctx.admin_sessions('view-s') s) AS same_row;

-- the session counts match the turns
SELECT * FROM miscounted_sessions;

-- reads bounded to the newest turn numbers look further back when the tail is redacted
SELECT count(convctx.finalize_turn('tail', convctx.start_turn('tail', 'r' || i, 'q' || i), 'a' || i)) FROM generate_series(1, 20) i;
INSERT INTO ids SELECT 'tail-' || turn_no, turn_id FROM convctx.turn WHERE session_id = 'tail' AND turn_no > 12;
SELECT count(convctx.redact_turn('tail', id)) FROM ids WHERE name LIKE 'tail-%';
SELECT string_agg(question_neutral, ' ') FROM convctx.recent_turns('tail', 5);
SELECT jsonb_path_query_array(convctx.conversation_state('tail', 4), '$.recent_messages[*].text') AS window;
CREATE TEMP TABLE tail_turns AS SELECT turn_no, turn_id FROM convctx.turn WHERE session_id = 'tail' AND turn_no <= 12;
SELECT convctx.record_retrieval('tail', turn_id, jsonb_build_array(jsonb_build_object('id', 'c' || turn_no, 'text', 'x')))
FROM tail_turns ORDER BY turn_no;
SELECT jsonb_path_query_array(convctx.context_history('tail', 3), '$[*].chunk.id') AS history;
