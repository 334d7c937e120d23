-- Nothing about another tenant can be inferred (0.3.0): tenant B holds 300 copies of one
-- question; a bound administrator of tenant A runs every view and function it may run,
-- with WHERE clauses on session ids and question text, and EXPLAIN of each in every
-- format. Then B's rows are deleted and everything runs again: every output must be the
-- same, byte for byte. Only the verdict is printed, so this file stays stable.
-- start from an empty store, whatever ran before
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification, convctx.role_tenant;
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_inference_a_admin;
RESET client_min_messages;
CREATE ROLE regress_inference_a_admin NOLOGIN IN ROLE convctx_admin;
SELECT convctx.bind_role_tenant('regress_inference_a_admin', 'A');

-- tenant A: two sessions, a correction, a redaction, a link, a context
SET convctx.tenant = 'A';
SELECT count(convctx.finalize_turn('a-s1', convctx.start_turn('a-s1', 'r' || i, 'A question ' || i), 'A answer ' || i))
FROM generate_series(1, 3) i;
SELECT convctx.replace_turn('a-s1', turn_id, 'A answer 2, corrected') IS NOT NULL AS replaced
FROM convctx.turn WHERE tenant_id = 'A' AND request_id = 'r2';
SELECT convctx.redact_turn('a-s1', turn_id) FROM convctx.turn WHERE tenant_id = 'A' AND request_id = 'r3';
SELECT convctx.link_session('a-user', 'a-s1');
SELECT convctx.start_turn('a-s2', 'r1', 'what is the secret merger price?') IS NOT NULL AS started;
SELECT convctx.context_add('a-s1', ARRAY['a-node']);
-- tenant B: 300 sessions asking the same question, 20 of them redacted (audit rows),
-- 50 linked, contexts
SET convctx.tenant = 'B';
SELECT count(convctx.start_turn('b-s' || i, 'r1', 'what is the secret merger price?')) FROM generate_series(1, 300) i;
SELECT count(convctx.redact_session('b-s' || i)) FROM generate_series(1, 20) i;
SELECT count(convctx.link_session('b-user-' || i, 'b-s' || i)) FROM generate_series(21, 70) i;
SELECT count(convctx.context_add('b-s' || i, ARRAY['b-node'])) FROM generate_series(1, 100) i;
RESET convctx.tenant;
ANALYZE convctx.turn, convctx.session, convctx.session_link, convctx.audit_log, convctx.conversation_context;
SELECT tenant_id, count(*) AS turns FROM convctx.turn GROUP BY 1 ORDER BY 1;

-- what the administrator runs: each statement as it is, and EXPLAIN of it in every format
CREATE TEMP TABLE probe (name text PRIMARY KEY, stmt text NOT NULL);
INSERT INTO probe VALUES
    ('sessions', $$SELECT * FROM convctx.sessions$$),
    ('sessions_b_session', $$SELECT * FROM convctx.sessions WHERE session_id = 'b-s1'$$),
    ('sessions_a_session', $$SELECT * FROM convctx.sessions WHERE session_id = 'a-s1'$$),
    ('sessions_b_tenant', $$SELECT * FROM convctx.sessions WHERE tenant = 'B'$$),
    ('sessions_b_identity', $$SELECT * FROM convctx.sessions WHERE identity_id = 'b-user-21'$$),
    ('stats', $$SELECT * FROM convctx.stats$$),
    ('stats_b', $$SELECT * FROM convctx.stats WHERE tenant = 'B'$$),
    ('audit', $$SELECT * FROM convctx.audit$$),
    ('audit_b_session', $$SELECT * FROM convctx.audit WHERE session_id = 'b-s1'$$),
    ('audit_b_tenant', $$SELECT * FROM convctx.audit WHERE tenant_id = 'B'$$),
    ('admin_sessions_b', $$SELECT * FROM convctx.admin_sessions('b-s1')$$),
    ('admin_sessions_a', $$SELECT * FROM convctx.admin_sessions('a-s1')$$),
    ('admin_stats', $$SELECT * FROM convctx.admin_stats()$$),
    ('admin_audit', $$SELECT * FROM convctx.admin_audit()$$),
    ('session_turns_b', $$SELECT * FROM convctx.admin_session_turns('b-s1')$$),
    ('session_turns_b_question', $$SELECT * FROM convctx.admin_session_turns('b-s1') WHERE question_neutral = 'what is the secret merger price?'$$),
    ('session_turns_a', $$SELECT * FROM convctx.admin_session_turns('a-s1')$$),
    ('session_turns_a_question', $$SELECT * FROM convctx.admin_session_turns('a-s2') WHERE question_neutral = 'what is the secret merger price?'$$),
    ('bindings', $$SELECT * FROM convctx.bindings()$$),
    ('unresolved_bindings', $$SELECT * FROM convctx.unresolved_bindings()$$),
    ('current_tenant', $$SELECT convctx.current_tenant()$$),
    ('recent_turns_b', $$SELECT * FROM convctx.recent_turns('b-s1')$$),
    ('recent_turns_b_question', $$SELECT * FROM convctx.recent_turns('b-s1') WHERE question_neutral = 'what is the secret merger price?'$$),
    ('recent_turns_json_b', $$SELECT convctx.recent_turns_json('b-s1')$$),
    ('conversation_state_b', $$SELECT convctx.conversation_state('b-s1')$$),
    ('turns_to_summarize_b', $$SELECT * FROM convctx.turns_to_summarize('b-s1', 10)$$),
    ('context_load_b', $$SELECT convctx.context_load('b-s1')$$),
    ('context_history_b', $$SELECT convctx.context_history('b-s1')$$),
    ('is_followup_b', $$SELECT convctx.is_followup('and the price?', 'b-s1')$$),
    ('retention_settings', $$SELECT * FROM convctx.retention_settings()$$),
    ('table_turn', $$SELECT 1 FROM convctx.turn WHERE tenant_id = 'B' AND question_neutral = 'what is the secret merger price?'$$),
    ('table_session', $$SELECT ctid FROM convctx.session WHERE tenant_id = 'B'$$),
    ('table_audit_log', $$SELECT audit_id FROM convctx.audit_log$$),
    ('sequence', $$SELECT last_value FROM convctx.audit_log_audit_id_seq$$),
    ('pg_stats', $$SELECT tablename, attname, most_common_vals::text FROM pg_catalog.pg_stats WHERE schemaname = 'convctx'$$);
-- (EXPLAIN of pg_stats itself estimates the size of the catalog pg_statistic, which holds
-- every table's statistics: shared, like pg_class.reltuples; its rows are what counts)
CREATE TEMP TABLE probe_rows_only (name text PRIMARY KEY);
INSERT INTO probe_rows_only VALUES ('pg_stats');
CREATE TEMP TABLE capture (run text, name text, variant text, output text);
GRANT SELECT ON probe, probe_rows_only TO PUBLIC;
GRANT INSERT ON capture TO PUBLIC;
-- Runs every probe in every variant as the calling role; an error is captured as its
-- SQLSTATE and message. Rows are sorted, so the order of equal timestamps cannot differ.
CREATE FUNCTION pg_temp.capture(run text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    p record;
    v text;
    line text;
    result text;
BEGIN
    FOR p IN SELECT * FROM probe ORDER BY name LOOP
        FOREACH v IN ARRAY ARRAY['rows', 'EXPLAIN', 'EXPLAIN (VERBOSE)', 'EXPLAIN (FORMAT JSON)',
                                 'EXPLAIN (FORMAT YAML, VERBOSE)', 'EXPLAIN (ANALYZE, TIMING OFF, SUMMARY OFF)'] LOOP
            CONTINUE WHEN v <> 'rows' AND EXISTS (SELECT FROM probe_rows_only o WHERE o.name = p.name);
            result := '';
            BEGIN
                IF v = 'rows' THEN
                    EXECUTE format('SELECT coalesce(string_agg(x::text, E''\n'' ORDER BY x::text), '''') FROM (%s) x', p.stmt)
                    INTO result;
                ELSE
                    FOR line IN EXECUTE v || ' ' || p.stmt LOOP
                        result := result || line || E'\n';
                    END LOOP;
                END IF;
            EXCEPTION WHEN OTHERS THEN
                result := SQLSTATE || ': ' || SQLERRM;
            END;
            INSERT INTO capture VALUES (run, p.name, v, result);
        END LOOP;
    END LOOP;
END $$;
-- (what the administrator's EXPLAIN of a view looks like: a Function Scan with a fixed estimate)
SET ROLE regress_inference_a_admin;
EXPLAIN (COSTS OFF) SELECT * FROM convctx.sessions WHERE session_id = 'b-s1';
EXPLAIN SELECT * FROM convctx.admin_session_turns('b-s1') WHERE question_neutral = 'what is the secret merger price?';
SELECT pg_temp.capture('B full');
RESET ROLE;
-- a control the method must catch: the superuser's EXPLAIN of the table itself
SELECT pg_temp.capture('control, B full');

-- B is emptied: every row of tenant B goes, and the statistics are taken again
DELETE FROM convctx.conversation_context WHERE tenant_id = 'B';
DELETE FROM convctx.turn WHERE tenant_id = 'B';
DELETE FROM convctx.session_link WHERE tenant_id = 'B';
DELETE FROM convctx.session WHERE tenant_id = 'B';
DELETE FROM convctx.audit_log WHERE tenant_id = 'B';
ANALYZE convctx.turn, convctx.session, convctx.session_link, convctx.audit_log, convctx.conversation_context;
SELECT tenant_id, count(*) AS turns FROM convctx.turn GROUP BY 1 ORDER BY 1;
SET ROLE regress_inference_a_admin;
SELECT pg_temp.capture('B empty');
RESET ROLE;
SELECT pg_temp.capture('control, B empty');

-- the verdict: every probe in every variant identical for the administrator of A
SELECT count(*) AS outputs,
       count(*) FILTER (WHERE f.output = e.output) AS identical,
       md5(string_agg(f.output, '|' ORDER BY f.name, f.variant))
           = md5(string_agg(e.output, '|' ORDER BY e.name, e.variant)) AS same_md5
FROM capture f JOIN capture e USING (name, variant)
WHERE f.run = 'B full' AND e.run = 'B empty';
-- (none differs)
SELECT f.name, f.variant FROM capture f JOIN capture e USING (name, variant)
WHERE f.run = 'B full' AND e.run = 'B empty' AND f.output IS DISTINCT FROM e.output
ORDER BY 1, 2;
-- the administrator did see its own tenant's rows (the probes are not all empty or errors):
-- rows per probe
SELECT name, CASE WHEN output = '' THEN 0 ELSE array_length(string_to_array(output, E'\n'), 1) END AS rows,
       CASE WHEN output ~ '^[0-9A-Z]{5}: ' THEN output END AS error
FROM capture WHERE run = 'B empty' AND variant = 'rows'
ORDER BY name;
SELECT output AS stats FROM capture WHERE run = 'B empty' AND variant = 'rows' AND name = 'stats';
-- and the direct reads were refused, every time
SELECT name, variant, output FROM capture
WHERE run = 'B full' AND name IN ('table_turn', 'table_session', 'table_audit_log', 'sequence', 'pg_stats')
  AND variant IN ('rows', 'EXPLAIN')
ORDER BY name, variant;
-- the control: the same probes run by the superuser do tell B's rows apart (the table
-- estimates, the sizes in stats, B's own sessions and audit rows)
SELECT count(*) > 0 AS control_differs
FROM capture f JOIN capture e USING (name, variant)
WHERE f.run = 'control, B full' AND e.run = 'control, B empty' AND f.output IS DISTINCT FROM e.output;
SELECT f.name, f.variant FROM capture f JOIN capture e USING (name, variant)
WHERE f.run = 'control, B full' AND e.run = 'control, B empty' AND f.output IS DISTINCT FROM e.output
  AND f.name = 'table_turn' AND f.variant = 'EXPLAIN (VERBOSE)';

-- cleanup
DROP TABLE probe, probe_rows_only, capture;
SELECT convctx.unbind_role_tenant('regress_inference_a_admin');
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
DROP ROLE regress_inference_a_admin;
