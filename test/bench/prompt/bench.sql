-- Prompt assembly benchmark: a 10-turn against a 500-turn session, each turn
-- with 5 retrieved chunks and 2 citations, for anonymous sessions and for
-- signed-in ones (linked to an identity, their turns started with
-- start_turn's identity_id argument), each pair reported apart. Run by
-- prompt.sh.
\set ON_ERROR_STOP 1
\set VERBOSITY terse
SET jit = off;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS convctx;
SET client_min_messages = notice;
SET convctx.max_session_turns = 100000;

-- identity NULL: an anonymous session.
CREATE FUNCTION pg_temp.fill(s text, turns integer, identity text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t uuid;
BEGIN
    FOR i IN 1 .. turns LOOP
        t := convctx.start_turn(s, 'r' || i, 'Question number ' || i || ' about the regulations that apply here?',
                                identity_id => identity);
        PERFORM convctx.record_retrieval(s, t,
            (SELECT jsonb_agg(jsonb_build_object('id', s || '-' || i || '-' || c, 'source', 'Code',
                                                 'title', 'Article ' || c, 'text', repeat('text of the article ', 10)))
             FROM generate_series(1, 5) c),
            jsonb_build_array(jsonb_build_object('id', s || '-' || i || '-1'),
                              jsonb_build_object('id', s || '-' || i || '-2')));
        PERFORM convctx.finalize_turn(s, t, 'Answer number ' || i || ', citing [1] and [2].');
        -- the same 10 referenced nodes in every session: only the history differs
        PERFORM convctx.context_add(s, ARRAY[s || '-node-' || (i % 10)]);
    END LOOP;
END $$;

SELECT pg_temp.fill('short', 10, NULL);
SELECT pg_temp.fill('long', 500, NULL);
SELECT pg_temp.fill('short-signed', 10, md5('user-short'));
SELECT pg_temp.fill('long-signed', 500, md5('user-long'));
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

-- Interleaved rounds: in each, for anonymous then signed-in sessions (which
-- kind goes first alternates too), both sessions in turn (the one that
-- goes first alternates), after a warm-up round that is not kept.
CREATE TEMP TABLE timing (fn text, kind text, round integer, short numeric, long numeric);
DO $$
DECLARE
    fn text;
    kind text;
    suffix text;
    a numeric;
    b numeric;
BEGIN
    FOR r IN 0 .. 5 LOOP
        FOREACH fn IN ARRAY ARRAY['conversation_state', 'context_history'] LOOP
            FOREACH kind IN ARRAY CASE WHEN r % 2 = 0 THEN ARRAY['anonymous', 'signed in']
                                       ELSE ARRAY['signed in', 'anonymous'] END LOOP
                suffix := CASE kind WHEN 'signed in' THEN '-signed' ELSE '' END;
                IF r % 2 = 0 THEN
                    a := pg_temp.per_call(fn, 'short' || suffix, 2000);
                    b := pg_temp.per_call(fn, 'long' || suffix, 2000);
                ELSE
                    b := pg_temp.per_call(fn, 'long' || suffix, 2000);
                    a := pg_temp.per_call(fn, 'short' || suffix, 2000);
                END IF;
                IF r > 0 THEN
                    INSERT INTO timing VALUES (fn, kind, r, a, b);
                END IF;
            END LOOP;
        END LOOP;
    END LOOP;
END $$;

\pset footer off
\echo
\echo 'prompt assembly: microseconds per call, median [min-max] of 5 interleaved rounds of 2000 calls, 10-turn vs 500-turn session,'
\echo 'anonymous sessions and signed-in ones (linked to an identity, turns started with identity_id)'
SELECT fn AS function, kind AS sessions,
       format('%s [%s-%s]', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY short)::numeric, 1),
              round(min(short), 1), round(max(short), 1)) AS "10 turns us",
       format('%s [%s-%s]', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY long)::numeric, 1),
              round(min(long), 1), round(max(long), 1)) AS "500 turns us",
       format('%s [%s-%s]', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY long / short)::numeric, 2),
              round(min(long / short), 2), round(max(long / short), 2)) AS ratio,
       'at most 1.5' AS target,
       CASE WHEN percentile_cont(0.5) WITHIN GROUP (ORDER BY long / short) <= 1.5 THEN 'PASS' ELSE 'MISS' END AS result
FROM timing
GROUP BY fn, kind
ORDER BY fn DESC, kind;
