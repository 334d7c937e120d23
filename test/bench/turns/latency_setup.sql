-- recent_turns latency state at 10^3 turns: 20 measured sessions m1..m20
-- of 50 turns each, written through the API: m1..m10 anonymous, m11..m20
-- signed in (m11 linked to identity md5('u11'), ...: their turns started with
-- start_turn's identity_id argument).

\set ON_ERROR_STOP 1
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE EXTENSION convctx;
CREATE SCHEMA bench;

CREATE FUNCTION bench.question() RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT repeat('How does the retention rule apply to this contract? ', 3) $$;
CREATE FUNCTION bench.answer() RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT repeat('The rule applies from the date of signature, subject to the exceptions listed. ', 8) $$;

DO $$
BEGIN
    FOR i IN 1..50 LOOP
        FOR s IN 1..20 LOOP
            PERFORM convctx.finalize_turn('m' || s,
                                          convctx.start_turn('m' || s, 'p' || i, bench.question(),
                                                             identity_id => CASE WHEN s > 10 THEN md5('u' || s) END),
                                          bench.answer());
        END LOOP;
        COMMIT;
    END LOOP;
END
$$;

-- Mean server-side time of one recent_turns(session, 10) call on a random
-- measured session of m<first>..m<first + 9>, in ms; no client round trip
-- to blur the index cost.
CREATE FUNCTION bench.recent_ms(calls integer, first integer) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1..calls LOOP
        PERFORM count(*) FROM convctx.recent_turns('m' || (first + floor(random() * 10))::int, 10);
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1000 / calls;
END
$$;

VACUUM ANALYZE convctx.turn, convctx.session;
