-- The purge pass-cost benchmark's database: convctx, a role bound to a tiny
-- tenant, a fixed expired backlog, and procedures that grow the live data
-- and measure one pass.
\set ON_ERROR_STOP 1
SET client_min_messages = error;
CREATE EXTENSION IF NOT EXISTS convctx;
SET client_min_messages = notice;
CREATE SCHEMA bench;
GRANT USAGE ON SCHEMA bench TO PUBLIC;

DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_tiny_admin') THEN
        CREATE ROLE bench_tiny_admin NOLOGIN IN ROLE convctx_admin;
    END IF;
END $$;
SELECT convctx.bind_role_tenant('bench_tiny_admin', 'tiny');

-- The retention the passes apply (set for the database, so every session
-- of the benchmark has them).
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I SET convctx.session_ttl = %L', current_database(), '1d');
    EXECUTE format('ALTER DATABASE %I SET convctx.turn_retention = %L', current_database(), '30d');
    EXECUTE format('ALTER DATABASE %I SET convctx.context_ttl = %L', current_database(), '30d');
    EXECUTE format('ALTER DATABASE %I SET convctx.audit_retention = %L', current_database(), '90d');
END $$;

-- The fixed backlog, the same at every size: in 50 tenants, 5 000 expired
-- anonymous sessions (2 turns and a context each), 5 000 turns older than
-- turn_retention in 500 linked sessions, 5 000 expired contexts of their
-- own and 5 000 audit rows older than audit_retention; in the tiny
-- tenant, 10 of each.
CREATE PROCEDURE bench.load_backlog()
LANGUAGE sql AS $$
    INSERT INTO convctx.session (tenant_id, session_id, identity_id, created_at, last_activity_at,
                                 last_turn_no, live_turns, live_answers)
    SELECT 't' || (s % 50), 'expired-' || s, NULL, now() - interval '3 days', now() - interval '2 days', 2, 2, 0
    FROM generate_series(1, 5000) s
    UNION ALL
    SELECT 'tiny', 'expired-' || s, NULL, now() - interval '3 days', now() - interval '2 days', 2, 2, 0
    FROM generate_series(1, 10) s
    UNION ALL
    SELECT 't' || (s % 50), 'linked-' || s, 'user-' || s, now() - interval '60 days', now(), 10, 10, 0
    FROM generate_series(1, 500) s
    UNION ALL
    SELECT 'tiny', 'linked-1', 'user-1', now() - interval '60 days', now(), 10, 10, 0;
    INSERT INTO convctx.session_link (tenant_id, session_id, identity_id)
    SELECT tenant_id, session_id, identity_id FROM convctx.session WHERE identity_id IS NOT NULL;
    INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, identity_id,
                              created_at, question_neutral)
    SELECT s.tenant_id, s.session_id, gen_random_uuid(), t, 'r' || t, s.identity_id,
           CASE WHEN s.identity_id IS NULL THEN now() - interval '2 days' ELSE now() - interval '40 days' END,
           'an old question'
    FROM convctx.session s,
         generate_series(1, CASE WHEN s.identity_id IS NULL THEN 2 ELSE 10 END) t;
    INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json, updated_at)
    SELECT tenant_id, session_id, '{"activeNodeIds": ["n1"]}'::jsonb, now() - interval '2 days'
    FROM convctx.session WHERE identity_id IS NULL
    UNION ALL
    SELECT 't' || (s % 50), 'context-only-' || s, '{"activeNodeIds": ["n1"]}', now() - interval '40 days'
    FROM generate_series(1, 5000) s
    UNION ALL
    SELECT 'tiny', 'context-only-' || s, '{"activeNodeIds": ["n1"]}', now() - interval '40 days'
    FROM generate_series(1, 10) s;
    INSERT INTO convctx.audit_log (tenant_id, action, logged_at)
    SELECT 't' || (s % 50), 'bench', now() - interval '100 days' FROM generate_series(1, 5000) s
    UNION ALL
    SELECT 'tiny', 'bench', now() - interval '100 days' FROM generate_series(1, 10) s;
$$;

-- Live data, none of it expired, up to total sessions in 50 tenants: a
-- session of the last 12 hours with one turn and a context each, and an
-- audit row for every 10 sessions.
CREATE PROCEDURE bench.grow_to(total integer)
LANGUAGE plpgsql AS $$
DECLARE
    have integer := (SELECT count(*) FROM convctx.session WHERE session_id LIKE 'live-%');
BEGIN
    INSERT INTO convctx.session (tenant_id, session_id, created_at, last_activity_at,
                                 last_turn_no, live_turns, live_answers)
    SELECT 't' || (s % 50), 'live-' || s, now() - interval '13 hours',
           now() - (s % 720) * interval '1 minute', 1, 1, 0
    FROM generate_series(have + 1, total) s;
    INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, created_at, question_neutral)
    SELECT 't' || (s % 50), 'live-' || s, gen_random_uuid(), 1, 'r1',
           now() - (s % 720) * interval '1 minute', 'a question'
    FROM generate_series(have + 1, total) s;
    INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json, updated_at)
    SELECT 't' || (s % 50), 'live-' || s, '{"activeNodeIds": ["n1"]}', now() - (s % 720) * interval '1 minute'
    FROM generate_series(have + 1, total) s;
    INSERT INTO convctx.audit_log (tenant_id, action, logged_at)
    SELECT 't' || (s % 50), 'bench', now() - (s % 720) * interval '1 minute'
    FROM generate_series(have + 1, total, 10) s;
END
$$;

-- EXPLAIN (ANALYZE, BUFFERS) of stmt, rolled back: what it deleted is there
-- again for the next round. Returns the execution time and the buffers it
-- touched (shared hit + read), statements run inside functions included.
CREATE FUNCTION bench.cost(stmt text, OUT ms float8, OUT buffers bigint)
LANGUAGE plpgsql AS $$
DECLARE
    plan json;
BEGIN
    BEGIN
        EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' || stmt INTO plan;
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = plan::text;
    EXCEPTION WHEN raise_exception THEN
        plan := SQLERRM::json;
    END;
    ms := (plan -> 0 ->> 'Execution Time')::float8;
    buffers := (plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::bigint
             + (plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::bigint;
END
$$;
GRANT EXECUTE ON FUNCTION bench.cost(text) TO PUBLIC;

-- The 0.3.0 statements that chose expired sessions and contexts (one plan
-- for every tenant and for one: "$3 IS NULL OR tenant_id = $3"), run as
-- prepared statements with the same parameters, as the baseline; and the
-- 0.4.0 statements that choose sessions (src/lifecycle.c of 0.4.0, now src/lifecycle/purge.c), to compare the
-- same step.
CREATE FUNCTION bench.prepare_statements() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE $q$PREPARE sessions_040_all(integer, integer, text) AS
        SELECT tenant_id, session_id FROM convctx.session
         WHERE identity_id IS NULL
           AND activity_bin < (statement_timestamp() - make_interval(secs => $1))
           AND last_activity_at < (statement_timestamp() - make_interval(secs => $1))
         ORDER BY activity_bin LIMIT $2 FOR UPDATE SKIP LOCKED$q$;
    EXECUTE $q$PREPARE sessions_040_one(integer, integer, text) AS
        SELECT tenant_id, session_id FROM convctx.session
         WHERE identity_id IS NULL AND tenant_id = $3
           AND (tenant_id, activity_bin) < ($3::text COLLATE "C", (statement_timestamp() - make_interval(secs => $1)))
           AND last_activity_at < (statement_timestamp() - make_interval(secs => $1))
         ORDER BY activity_bin LIMIT $2 FOR UPDATE SKIP LOCKED$q$;
    EXECUTE $q$PREPARE sessions_030(integer, integer, text) AS
        SELECT tenant_id, session_id FROM convctx.session
         WHERE identity_id IS NULL AND ($3::text IS NULL OR tenant_id = $3)
           AND last_activity_at < (statement_timestamp() - make_interval(secs => $1))
         ORDER BY last_activity_at LIMIT $2 FOR UPDATE SKIP LOCKED$q$;
    EXECUTE $q$PREPARE contexts_030(integer, integer, text) AS
        SELECT ctid FROM convctx.conversation_context
         WHERE updated_at < (statement_timestamp() - make_interval(secs => $1))
           AND ($3::text IS NULL OR tenant_id = $3)
         LIMIT $2 FOR UPDATE SKIP LOCKED$q$;
END
$$;
