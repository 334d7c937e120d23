-- Request benchmark state, all in tenant t1: convctx.turn filled through
-- the API, and floor.turn, a bare copy of its columns and indexes filled
-- with plain statements. Session sN; signed-in sessions belong to the
-- identity iN (one session each):
--   s1..s200        10 turns, anonymous      (throughput, 10 turns)
--   s1001..s1100    1,000 turns, anonymous   (throughput, 1,000 turns; WAL, third state)
--   s2001..s2200    10 turns, signed in      (throughput, 10 turns)
--   s3001..s3100    1,000 turns, signed in   (throughput, 1,000 turns)
--   s4001..s4100    200 turns, anonymous     (WAL, first state)
--   s10001..s20000  10 turns, s15001 on signed in (WAL, second state)
-- The pgbench scripts get the same rule: session :s is signed in when
-- :s >= :signed_from (a bound that the run passes per cell).
-- A role "service", bound to every tenant and scoped per transaction (the
-- README's pooled setup), runs the requests.

\set ON_ERROR_STOP 1
\set VERBOSITY terse
SET client_min_messages = warning;
-- The run created the extension, to check its functions first.
CREATE SCHEMA bench;
\ir ../lib/floor_turn.sql
-- Bare by default (fillfactor 100); :floor_fillfactor 70 gives it convctx.turn's.
ALTER TABLE floor.turn SET (fillfactor = :floor_fillfactor);

SELECT format('CREATE ROLE service LOGIN PASSWORD %L IN ROLE convctx_app', :'password') \gexec
SELECT convctx.bind_role_all_tenants('service') \gset
ALTER ROLE service SET convctx.tenant_scope = 'transaction';
GRANT USAGE ON SCHEMA bench, floor TO service;
GRANT SELECT, INSERT, UPDATE ON floor.turn TO service;
GRANT USAGE ON SEQUENCE floor.turn_no_seq TO service;

SET convctx.tenant = 't1';

CREATE TABLE bench.initial (session_id text PRIMARY KEY, turns integer NOT NULL, identity_id text);
INSERT INTO bench.initial
SELECT 's' || g, n, CASE WHEN signed THEN 'i' || g END
FROM (VALUES (1, 200, 10, false), (1001, 1100, 1000, false),
             (2001, 2200, 10, true), (3001, 3100, 1000, true),
             (4001, 4100, 200, false),
             (10001, 15000, 10, false), (15001, 20000, 10, true)) AS r(lo, hi, n, signed),
     generate_series(lo, hi) g;
CREATE INDEX ON bench.initial (turns);

-- Texts of the issue's sizes (200 and 1,000 bytes), shared with the pgbench
-- scripts (immutable: a constant in every prepared statement).
CREATE FUNCTION bench.question() RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT left(repeat('How does the retention rule apply to this contract? ', 4), 200) $$;
CREATE FUNCTION bench.answer() RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT left(repeat('The rule applies from the date of signature, subject to the exceptions listed. ', 13), 1000) $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA bench TO service;

-- Turns arrive interleaved across sessions, as in real traffic, and each
-- is written the way its side writes it: convctx through the API, floor.turn
-- with plain INSERT and UPDATE, turn by turn, so that both tables end up
-- with the same physical layout. One commit per round. Statistics come
-- early, as autovacuum would give them: plans made on the empty tables
-- would read them whole for every turn.
CREATE PROCEDURE bench.fill() LANGUAGE plpgsql AS $$
DECLARE
    s record;
    n integer;
    floor_turn uuid;
BEGIN
    FOR i IN 1..1000 LOOP
        n := 0;
        FOR s IN SELECT session_id, identity_id FROM bench.initial WHERE turns >= i ORDER BY session_id LOOP
            PERFORM convctx.finalize_turn(s.session_id,
                                          convctx.start_turn(s.session_id, 'p' || i, bench.question(),
                                                             s.identity_id),
                                          bench.answer());
            INSERT INTO floor.turn (tenant_id, session_id, request_id, identity_id, question_neutral)
            VALUES ('t1', s.session_id, 'p' || i, s.identity_id, bench.question())
            RETURNING turn_id INTO floor_turn;
            UPDATE floor.turn SET answer_neutral = bench.answer(), finalized_at = statement_timestamp()
             WHERE tenant_id = 't1' AND session_id = s.session_id AND turn_id = floor_turn;
            n := n + 1;
            IF i = 1 AND n IN (100, 2000) THEN
                ANALYZE convctx.turn, convctx.session, convctx.session_link, floor.turn;
            END IF;
        END LOOP;
        COMMIT;
        IF i IN (1, 2, 10, 11, 100) THEN
            ANALYZE convctx.turn, convctx.session, convctx.session_link, floor.turn;
        END IF;
    END LOOP;
END
$$;
CALL bench.fill();

\set tenant t1
\ir ../lib/reset.sql

\pset footer off
SELECT t.name AS "table", t.turns, pg_size_pretty(pg_total_relation_size(t.name::regclass)) AS size
FROM (VALUES ('convctx.turn', (SELECT count(*) FROM convctx.turn)),
             ('floor.turn', (SELECT count(*) FROM floor.turn))) AS t(name, turns);
