-- Grow convctx.turn to :big turns (10^6) with bulk-loaded sessions g1, g2,
-- ... of 10 to 100 turns each (numbered 1..n like real ones); m1..m20 are
-- untouched. Half of them are signed in: the even ones, g2 linked to
-- identity md5('ug2') and so on (session row, link and turns carry it, as
-- start_turn with identity_id leaves them).

\set ON_ERROR_STOP 1
\set VERBOSITY terse
SET client_min_messages = warning;
SET maintenance_work_mem = '256MB';

CREATE TEMP TABLE grow AS
WITH sizes AS (
    SELECT g AS i, 10 + (g * 7919) % 91 AS n FROM generate_series(1, 100000) g),
cum AS (
    SELECT i, n, sum(n) OVER (ORDER BY i) AS upto FROM sizes)
SELECT 'g' || i AS session_id,
       CASE WHEN i % 2 = 0 THEN md5('ug' || i) END AS identity_id,
       (n - greatest(upto - (:big - (SELECT count(*) FROM convctx.turn)), 0))::int AS n
FROM cum
WHERE upto - n < :big - (SELECT count(*) FROM convctx.turn);

-- Counters as start_turn and finalize_turn would have left them.
INSERT INTO convctx.session (tenant_id, session_id, identity_id, last_turn_no, live_turns, live_answers)
SELECT '', session_id, identity_id, n, n, n FROM grow;
INSERT INTO convctx.session_link (tenant_id, session_id, identity_id)
SELECT '', session_id, identity_id FROM grow WHERE identity_id IS NOT NULL;

INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, identity_id,
                          question_neutral, answer_neutral, finalized_at)
SELECT '', g.session_id, gen_random_uuid(), t, 'p' || t, g.identity_id, bench.question(),
       bench.answer(), statement_timestamp()
FROM grow g, generate_series(1, g.n) t;

VACUUM ANALYZE convctx.turn, convctx.session;
