-- The retention benchmark's database: convctx, 200 live sessions for the
-- clients (live-1..100 anonymous, live-101..200 signed in), 10^5 idle
-- signed-in sessions, and a procedure that loads the expired backlog.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS convctx;
SET client_min_messages = notice;
CREATE SCHEMA IF NOT EXISTS bench;

-- 10^5 anonymous sessions idle for two days, 10 finalized turns each, written
-- in bulk with the counts the API would have kept.
CREATE OR REPLACE PROCEDURE bench.load_backlog(sessions integer, turns integer)
LANGUAGE sql AS $$
    INSERT INTO convctx.session (tenant_id, session_id, created_at, last_activity_at,
                                 last_turn_no, live_turns, live_answers)
    SELECT '', 'old-' || s, now() - interval '3 days', now() - interval '2 days', turns, turns, turns
    FROM generate_series(1, sessions) s;
    INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, created_at,
                              finalized_at, question_neutral, answer_neutral)
    SELECT '', 'old-' || s, gen_random_uuid(), t, 'r' || t, now() - interval '3 days',
           now() - interval '3 days', 'an old question ' || t, 'an old answer ' || t
    FROM generate_series(1, sessions) s, generate_series(1, turns) t;
$$;

-- As many signed-in sessions idle for as long (linked to an identity, as
-- start_turn with identity_id leaves them: session row, link and turns
-- carry it), loaded once: they never expire, and every purge must leave
-- them as they are.
CREATE OR REPLACE PROCEDURE bench.load_idle_signed(sessions integer, turns integer)
LANGUAGE sql AS $$
    INSERT INTO convctx.session (tenant_id, session_id, identity_id, created_at, last_activity_at,
                                 last_turn_no, live_turns, live_answers)
    SELECT '', 'idle-' || s, md5('idle-user-' || s), now() - interval '3 days', now() - interval '2 days',
           turns, turns, turns
    FROM generate_series(1, sessions) s;
    INSERT INTO convctx.session_link (tenant_id, session_id, identity_id, linked_at)
    SELECT '', 'idle-' || s, md5('idle-user-' || s), now() - interval '3 days'
    FROM generate_series(1, sessions) s;
    INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, identity_id, created_at,
                              finalized_at, question_neutral, answer_neutral)
    SELECT '', 'idle-' || s, gen_random_uuid(), t, 'r' || t, md5('idle-user-' || s), now() - interval '3 days',
           now() - interval '3 days', 'an old question ' || t, 'an old answer ' || t
    FROM generate_series(1, sessions) s, generate_series(1, turns) t;
$$;

-- The clients' sessions: 10 turns each through the API; live-101..200 are
-- signed in, their turns started with start_turn's identity_id argument.
SELECT count(convctx.finalize_turn('live-' || s,
                                   convctx.start_turn('live-' || s, 'r' || t, 'q',
                                                      identity_id => CASE WHEN s > 100 THEN md5('live-user-' || s) END),
                                   'a'))
FROM generate_series(1, 200) s, generate_series(1, 10) t;
