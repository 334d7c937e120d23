-- Retention cost: each pass walks an expiry index (for every tenant, or for
-- one), the updates of every turn and context stay HOT, and the audit log
-- has a retention of its own. Counts only: no timings.
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;

-- the activity and update counts of the tables, from the statistics system
-- once this backend has flushed what it counted
CREATE TEMP VIEW counts AS
SELECT relname, n_tup_upd AS upd, n_tup_hot_upd AS hot_upd, coalesce(seq_scan, 0) AS seq_scan
FROM pg_stat_user_tables WHERE schemaname = 'convctx';
CREATE TEMP VIEW index_counts AS
SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE schemaname = 'convctx';

------------------------------------------------------------------------------
-- HOT updates: the bins change at most once per 10 minutes, so turns and
-- context updates add no index entries. Each call is a statement of its own,
-- as an app makes them, so that last_activity_at and updated_at change with
-- every one (an index on them would make half of these updates non-HOT).
------------------------------------------------------------------------------
SET convctx.tenant = 'hot';
SELECT pg_stat_force_next_flush();
CREATE TEMP TABLE counts0 AS SELECT * FROM counts;
\set ECHO none
\o /dev/null
SELECT format('SELECT convctx.finalize_turn(''hot-1'', convctx.start_turn(''hot-1'', %L, ''q''), ''a'')', 'r' || i),
       'SELECT convctx.context_add(''hot-1'', ARRAY[''n1''])'
FROM generate_series(1, 300) i
\gexec
\o
\set ECHO all
SELECT pg_stat_force_next_flush();
SELECT c.relname, c.upd - c0.upd >= 299 AS updated,
       (c.hot_upd - c0.hot_upd)::float8 / (c.upd - c0.upd) > 0.9 AS mostly_hot
FROM counts c JOIN counts0 c0 USING (relname)
WHERE c.relname IN ('session', 'conversation_context') ORDER BY 1;
-- the bins follow the exact times
SELECT activity_bin = date_bin('10 minutes', last_activity_at, '2000-01-01 00:00:00+00') AS session_bin,
       activity_bin <= last_activity_at AND last_activity_at < activity_bin + interval '10 minutes' AS in_bin
FROM convctx.session WHERE session_id = 'hot-1';
SELECT updated_bin = date_bin('10 minutes', updated_at, '2000-01-01 00:00:00+00') AS context_bin
FROM convctx.conversation_context WHERE conversation_id = 'hot-1';
UPDATE convctx.session SET last_activity_at = '2026-01-01 12:34:56+00' WHERE session_id = 'hot-1'
RETURNING activity_bin = '2026-01-01 12:30:00+00' AS bin_follows_update;
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
RESET convctx.tenant;

------------------------------------------------------------------------------
-- The passes walk the expiry indexes: 20 big tenants with expired and live
-- sessions, turns and contexts, and a tiny tenant with 3 expired sessions;
-- a purge by the tiny tenant's administrator and one of every tenant
------------------------------------------------------------------------------
INSERT INTO convctx.session (tenant_id, session_id, last_activity_at, last_turn_no, live_turns)
SELECT 'big-' || (s % 20), 's' || s,
       CASE WHEN s % 2 = 0 THEN now() - interval '2 days' ELSE now() END, 1, 1
FROM generate_series(1, 20000) s;
INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, question_neutral)
SELECT tenant_id, session_id, gen_random_uuid(), 1, 'r1', 'q' FROM convctx.session;
INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json, updated_at)
SELECT tenant_id, 'c-' || session_id, '{}', last_activity_at - interval '30 days' FROM convctx.session;
INSERT INTO convctx.session (tenant_id, session_id, last_activity_at)
SELECT 'tiny', 'tiny-' || s, now() - interval '2 days' FROM generate_series(1, 3) s;
INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json)
VALUES ('tiny', 'tiny-1', '{}');
INSERT INTO convctx.audit_log (tenant_id, action, logged_at)
SELECT 'big-' || (s % 20), 'old', now() - interval '9 days' FROM generate_series(1, 2000) s;
INSERT INTO convctx.audit_log (tenant_id, action, logged_at)
SELECT 'tiny', 'old', now() - interval '9 days' FROM generate_series(1, 2) s;
ANALYZE convctx.session, convctx.turn, convctx.conversation_context, convctx.audit_log;

CREATE ROLE retention_tiny_admin NOLOGIN IN ROLE convctx_admin;
SELECT convctx.bind_role_tenant('retention_tiny_admin', 'tiny');
SET convctx.turn_retention = '30d';
SET convctx.audit_retention = 60;
SET convctx.audit_retention = '7d';
SHOW convctx.audit_retention;
SELECT * FROM convctx.retention_settings();

-- with the plans a backend keeps after a few runs (generic: they do not
-- know the tenant or the age), the tiny tenant's purge walks the indexes led
-- by tenant_id, and a purge of every tenant the others; no table is read whole
-- (the session pass reads its index twice: how many sessions its turns can
-- empty, then those it locks)
SET plan_cache_mode = force_generic_plan;
SELECT pg_stat_force_next_flush();
CREATE TEMP TABLE index_counts0 AS SELECT * FROM index_counts;
DROP TABLE counts0;
CREATE TEMP TABLE counts0 AS SELECT * FROM counts;
SET ROLE retention_tiny_admin;
SELECT convctx.purge(100);
RESET ROLE;
SELECT pg_stat_force_next_flush();
CREATE TEMP TABLE index_counts1 AS SELECT * FROM index_counts;
SELECT convctx.purge(100);
SELECT pg_stat_force_next_flush();
SELECT i.indexrelname, i1.idx_scan - i0.idx_scan AS tiny_tenant_scans, i.idx_scan - i1.idx_scan AS all_tenants_scans
FROM index_counts i JOIN index_counts0 i0 USING (indexrelname) JOIN index_counts1 i1 USING (indexrelname)
WHERE i.indexrelname IN ('session_expiry', 'session_expiry_tenant', 'turn_created', 'turn_created_tenant',
                         'conversation_context_expiry', 'conversation_context_expiry_tenant',
                         'audit_log_logged', 'audit_log_logged_tenant')
ORDER BY 1;
SELECT c.relname, c.seq_scan - c0.seq_scan AS seq_scans
FROM counts c JOIN counts0 c0 USING (relname)
WHERE c.relname IN ('session', 'turn', 'conversation_context', 'audit_log')
ORDER BY 1;
RESET plan_cache_mode;
SELECT tenant_id, count(*) AS sessions_left FROM convctx.session
WHERE tenant_id = 'tiny' OR last_activity_at < now() - interval '1 day' GROUP BY 1 ORDER BY 1 LIMIT 3;

------------------------------------------------------------------------------
-- Audit retention and the purge audit rows
------------------------------------------------------------------------------
-- the tiny tenant's purge deleted its two old rows and logged one of its own
SELECT tenant_id, action, details FROM convctx.audit_log WHERE tenant_id = 'tiny' ORDER BY logged_at;
-- every tenant's purge deleted 100 of the others' old rows, logged per tenant
SELECT count(*) AS old_rows_left FROM convctx.audit_log WHERE action = 'old';
SELECT count(*) AS purge_rows, sum((details->>'audit_rows')::int) AS audit_rows
FROM convctx.audit_log WHERE action = 'purge' AND tenant_id <> 'tiny';
-- a pass that deletes nothing writes nothing, for a bound role or not
SET ROLE retention_tiny_admin;
SELECT convctx.purge(100);
RESET ROLE;
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
CREATE TEMP TABLE audit0 AS SELECT count(*) AS n FROM convctx.audit_log;
UPDATE convctx.audit_log SET logged_at = now() - interval '9 days';
-- some 300 passes: without convctx.purge_pause's 500 ms after each
SET convctx.purge_pause = 0;
CALL convctx.purge_all(7);
-- purge_all went through the whole backlog (2 000 rows), 7 at a time, and
-- logged each pass that deleted something; its own rows are new
-- (how many passes a tenant's rows took depends on the order of rows
-- logged at the same time, so the count is compared, not shown)
SELECT count(*) FILTER (WHERE logged_at < now() - interval '7 days') AS old_left,
       count(*) FILTER (WHERE action = 'purge') >= (SELECT n FROM audit0) / 7 AS enough_purge_rows,
       count(*) = count(*) FILTER (WHERE action = 'purge') AS only_purge_rows,
       bool_and((details->>'audit_rows')::int BETWEEN 1 AND 7) AS each_within_batch,
       sum((details->>'audit_rows')::int) >= (SELECT n FROM audit0) AS all_counted
FROM convctx.audit_log;
CREATE TEMP TABLE audit1 AS SELECT count(*) AS n FROM convctx.audit_log;
CALL convctx.purge_all(7);
SELECT convctx.purge();
SELECT count(*) = (SELECT n FROM audit1) AS no_rows_from_empty_runs FROM convctx.audit_log;
-- without convctx.audit_retention, purge counts and logs what it did before
RESET convctx.audit_retention;
UPDATE convctx.audit_log SET logged_at = now() - interval '9 days';
SELECT convctx.purge();
SELECT count(*) = (SELECT n FROM audit1) AS kept_forever FROM convctx.audit_log WHERE logged_at < now() - interval '7d';
-- only a superuser sets it
SET ROLE retention_tiny_admin;
SET convctx.audit_retention = '7d';
RESET ROLE;

-- an erased identity's audit rows are rewritten whatever their age, and the
-- stand-in is what retention later deletes
SET convctx.tenant = 'tiny';
SET convctx.audit_retention = '7d';
INSERT INTO convctx.audit_log (tenant_id, action, identity_id, details, logged_at)
VALUES ('tiny', 'old', 'alice', '{"linked_identity_id": "alice"}', now() - interval '9 days'),
       ('tiny', 'new', 'alice', '{}', now());
SELECT convctx.erase_identity('alice');
SELECT count(*) AS naming_alice FROM convctx.audit_log
WHERE identity_id = 'alice' OR details::text LIKE '%alice%';
SET ROLE retention_tiny_admin;
SELECT convctx.purge();
RESET ROLE;
SELECT action, identity_id FROM convctx.audit_log WHERE tenant_id = 'tiny' AND action IN ('old', 'new');

-- what belongs to a session goes with it, whoever deletes it: a purge, or
-- a superuser's DELETE of two sessions in one statement (trigger
-- session_deleted); another session's rows stay
SELECT count(convctx.finalize_turn(s, convctx.start_turn(s, 'r' || i, 'question ' || i), 'answer ' || i))
  FROM unnest(ARRAY['gone-1', 'gone-2', 'kept']) s, generate_series(1, 2) i;
SELECT count(convctx.record_retrieval(t.session_id, t.turn_id, '[{"id": "c1", "text": "chunk"}]', '[]')),
       count(convctx.record_clarification(t.session_id, t.turn_id, '[{"question": "which?"}]', '{}'))
  FROM convctx.turn t WHERE t.tenant_id = 'tiny';
SELECT count(convctx.set_summary(s, 'summary', (SELECT turn_id FROM convctx.turn
                                                 WHERE tenant_id = 'tiny' AND session_id = s AND request_id = 'r1'), 0))
  FROM unnest(ARRAY['gone-1', 'gone-2', 'kept']) s;
DELETE FROM convctx.session WHERE tenant_id = 'tiny' AND session_id LIKE 'gone-%';
DELETE FROM convctx.session WHERE false;
SELECT 'summaries' AS kind, session_id, count(*) FROM convctx.session_summary WHERE tenant_id = 'tiny' GROUP BY 2
UNION ALL SELECT 'retrievals', session_id, count(*) FROM convctx.turn_retrieval WHERE tenant_id = 'tiny' GROUP BY 2
UNION ALL SELECT 'clarifications', session_id, count(*) FROM convctx.clarification WHERE tenant_id = 'tiny' GROUP BY 2
ORDER BY 1, 2;
-- with its session gone, its turns cannot record anything (P0002), even
-- if they are still there
\set VERBOSITY terse
SELECT convctx.record_retrieval('gone-1', (SELECT turn_id FROM convctx.turn WHERE tenant_id = 'tiny'
                                            AND session_id = 'gone-1' AND request_id = 'r1'),
                                '[{"id": "c1", "text": "chunk"}]', '[]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.record_clarification('gone-1', (SELECT turn_id FROM convctx.turn WHERE tenant_id = 'tiny'
                                                AND session_id = 'gone-1' AND request_id = 'r1'),
                                    '[{"question": "which?"}]', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.replace_turn('gone-1', (SELECT turn_id FROM convctx.turn WHERE tenant_id = 'tiny'
                                        AND session_id = 'gone-1' AND request_id = 'r1'), 'other answer');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
DELETE FROM convctx.turn WHERE tenant_id = 'tiny';
DELETE FROM convctx.session WHERE tenant_id = 'tiny';
SELECT (SELECT count(*) FROM convctx.session_summary) + (SELECT count(*) FROM convctx.turn_retrieval)
       + (SELECT count(*) FROM convctx.clarification) AS left_over;
-- 300 sessions in one DELETE, then one: each is planned for its own
-- number of sessions
SELECT count(convctx.record_retrieval(s, convctx.start_turn(s, 'r', 'question'), '[{"id": "c1", "text": "chunk"}]', '[]'))
  FROM (SELECT 'many-' || i AS s FROM generate_series(1, 300) i) g;
DELETE FROM convctx.session WHERE tenant_id = 'tiny' AND session_id <> 'many-1';
SELECT count(*) AS retrievals_left FROM convctx.turn_retrieval WHERE tenant_id = 'tiny';
DELETE FROM convctx.session WHERE tenant_id = 'tiny';
SELECT count(*) AS retrievals_left FROM convctx.turn_retrieval WHERE tenant_id = 'tiny';
DELETE FROM convctx.turn WHERE tenant_id = 'tiny';
-- TRUNCATE of the sessions takes their rows along (a later session with
-- the same id starts clean), also when the tables are named with it
SELECT convctx.record_retrieval('again', convctx.start_turn('again', 'r1', 'question'), '[{"id": "c1", "text": "old chunk"}]', '[]');
TRUNCATE convctx.session, convctx.turn;
SELECT count(*) AS retrievals_left FROM convctx.turn_retrieval;
SELECT convctx.record_retrieval('again', convctx.start_turn('again', 'r1', 'question'), '[{"id": "c1", "text": "old chunk"}]', '[]');
TRUNCATE convctx.turn, convctx.session, convctx.turn_retrieval;
SELECT count(*) AS retrievals_left FROM convctx.turn_retrieval;
-- the trigger function runs only as the triggers convctx.session has
CREATE TABLE session_like (tenant_id text, session_id text);
CREATE TRIGGER t AFTER DELETE ON session_like REFERENCING OLD TABLE AS deleted_sessions
    FOR EACH STATEMENT EXECUTE FUNCTION convctx.session_deleted();
INSERT INTO session_like VALUES ('tiny', 'x');
DELETE FROM session_like;
\echo :LAST_ERROR_SQLSTATE
DROP TABLE session_like;

-- turn retention takes a corrected turn whole: a pass that reaches one of
-- its versions takes the others, so that no version is left without the
-- one before it (an export import would refuse)
SELECT convctx.start_turn('corrected', 'r1', 'question') AS ct \gset
SELECT convctx.finalize_turn('corrected', :'ct', 'answer');
SELECT convctx.replace_turn('corrected', :'ct', 'corrected answer') IS NOT NULL AS replaced;
UPDATE convctx.turn SET created_at = now() - interval '40 days' WHERE tenant_id = 'tiny' AND session_id = 'corrected';
SELECT convctx.purge(1) IS NOT NULL AS purged;
SELECT count(*) AS versions_left, (SELECT live_turns FROM convctx.session WHERE tenant_id = 'tiny' AND session_id = 'corrected')
FROM convctx.turn WHERE tenant_id = 'tiny' AND session_id = 'corrected';

RESET convctx.audit_retention;
RESET convctx.turn_retention;
RESET convctx.tenant;
SELECT convctx.unbind_role_tenant('retention_tiny_admin');
DROP ROLE retention_tiny_admin;
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
