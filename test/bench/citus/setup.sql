-- The benchmark's sessions, in each database (run by a superuser, after
-- convctx.distribute() where it is called): :sessions sessions of tenant t1,
-- '1'..':sessions', the ids test/bench/citus/lifecycle.pgbench draws, with
-- :turns finalized turns each. Written in bulk with the counts the API would
-- have kept (as test/bench/lifecycle/setup.sql's backlog): through the API,
-- on the distributed database, it would take minutes. So every call of a
-- run finds its session and recent_turns(10) returns 10 turns from the start.
\set ON_ERROR_STOP 1
\set VERBOSITY terse
INSERT INTO convctx.session (tenant_id, session_id, created_at, last_activity_at,
                             last_turn_no, live_turns, live_answers)
SELECT 't1', s::text, now(), now(), :turns, :turns, :turns
FROM generate_series(1, :sessions) s;
INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, created_at,
                          finalized_at, question_neutral, answer_neutral)
SELECT 't1', s::text, gen_random_uuid(), t, 'seed-' || t, now(), now(), 'q', 'a'
FROM generate_series(1, :sessions) s, generate_series(1, :turns) t;
VACUUM ANALYZE convctx.session, convctx.turn;
