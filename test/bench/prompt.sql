-- Prompt assembly benchmark: a 10-turn against a 500-turn session, each turn
-- with 5 retrieved chunks and 2 citations. Run by prompt.sh.
\set ON_ERROR_STOP 1
\set VERBOSITY terse
SET jit = off;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS convctx;
SET client_min_messages = notice;
SET convctx.max_session_turns = 100000;

CREATE FUNCTION pg_temp.fill(s text, turns integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t uuid;
BEGIN
    FOR i IN 1 .. turns LOOP
        t := convctx.start_turn(s, 'r' || i, 'Question number ' || i || ' about the regulations that apply here?');
        PERFORM convctx.record_retrieval(s, t,
            (SELECT jsonb_agg(jsonb_build_object('id', s || '-' || i || '-' || c, 'source', 'Code',
                                                 'title', 'Article ' || c, 'text', repeat('text of the article ', 10)))
             FROM generate_series(1, 5) c),
            jsonb_build_array(jsonb_build_object('id', s || '-' || i || '-1'),
                              jsonb_build_object('id', s || '-' || i || '-2')));
        PERFORM convctx.finalize_turn(s, t, 'Answer number ' || i || ', citing [1] and [2].');
        -- the same 10 referenced nodes in both sessions: only the history differs
        PERFORM convctx.context_add(s, ARRAY[s || '-node-' || (i % 10)]);
    END LOOP;
END $$;

SELECT pg_temp.fill('short', 10);
SELECT pg_temp.fill('long', 500);
-- the steady state autovacuum keeps: the session and context rows of the
-- long session were updated hundreds of times
VACUUM ANALYZE convctx.turn;
VACUUM ANALYZE convctx.turn_retrieval;
VACUUM ANALYZE convctx.session;
VACUUM ANALYZE convctx.conversation_context;

-- Microseconds per call of n calls of fn on session s.
CREATE FUNCTION pg_temp.per_call(fn text, s text, n integer) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
    cur jsonb := '[{"id": "cur-1", "text": "current chunk"}, {"id": "cur-2", "text": "another one"}]';
BEGIN
    t0 := clock_timestamp();
    IF fn = 'conversation_state' THEN
        FOR i IN 1 .. n LOOP
            PERFORM convctx.conversation_state(s, 10);
        END LOOP;
    ELSE
        FOR i IN 1 .. n LOOP
            PERFORM convctx.context_history(s, 5, cur);
        END LOOP;
    END IF;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;

-- Interleaved rounds: in each, both sessions in turn (the one that goes
-- first alternates), after a warm-up round that is not kept.
CREATE TEMP TABLE timing (fn text, round integer, short numeric, long numeric);
DO $$
DECLARE
    fn text;
    a numeric;
    b numeric;
BEGIN
    FOR r IN 0 .. 5 LOOP
        FOREACH fn IN ARRAY ARRAY['conversation_state', 'context_history'] LOOP
            IF r % 2 = 0 THEN
                a := pg_temp.per_call(fn, 'short', 2000);
                b := pg_temp.per_call(fn, 'long', 2000);
            ELSE
                b := pg_temp.per_call(fn, 'long', 2000);
                a := pg_temp.per_call(fn, 'short', 2000);
            END IF;
            IF r > 0 THEN
                INSERT INTO timing VALUES (fn, r, a, b);
            END IF;
        END LOOP;
    END LOOP;
END $$;

\pset footer off
\echo
\echo 'prompt assembly: microseconds per call, median [min-max] of 5 interleaved rounds of 2000 calls, 10-turn vs 500-turn session'
SELECT fn AS function,
       format('%s [%s-%s]', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY short)::numeric, 1),
              round(min(short), 1), round(max(short), 1)) AS "10 turns us",
       format('%s [%s-%s]', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY long)::numeric, 1),
              round(min(long), 1), round(max(long), 1)) AS "500 turns us",
       format('%s [%s-%s]', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY long / short)::numeric, 2),
              round(min(long / short), 2), round(max(long / short), 2)) AS ratio,
       'at most 1.5' AS target,
       CASE WHEN percentile_cont(0.5) WITHIN GROUP (ORDER BY long / short) <= 1.5 THEN 'PASS' ELSE 'MISS' END AS result
FROM timing
GROUP BY fn
ORDER BY fn DESC;
