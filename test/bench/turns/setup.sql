-- Lifecycle benchmark state: convctx.turn filled through the API, and
-- floor.turn, a bare copy of its columns and indexes filled with plain
-- INSERTs. Anonymous sessions s1..s200 hold 10 turns, s1001..s1100 hold
-- :long_turns (1,000); signed-in sessions s2001..s2200 hold 10 turns,
-- s3001..s3100 :long_turns, each linked to its own identity (s2001 to
-- md5('u2001'), 32 characters as an opaque user id is, ...), its turns
-- started with start_turn's identity_id argument as an app does for a
-- signed-in user; the floor's rows carry the identity too.

\set ON_ERROR_STOP 1
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE EXTENSION convctx;
CREATE SCHEMA bench;
\ir ../lib/floor_turn.sql
-- Bare by default (fillfactor 100); :floor_fillfactor 70 gives it convctx.turn's.
ALTER TABLE floor.turn SET (fillfactor = :floor_fillfactor);

CREATE TABLE bench.initial (session_id text PRIMARY KEY, turns integer NOT NULL, identity_id text);
INSERT INTO bench.initial
SELECT 's' || g, 10, NULL FROM generate_series(1, 200) g
UNION ALL
SELECT 's' || g, :long_turns, NULL FROM generate_series(1001, 1100) g
UNION ALL
SELECT 's' || g, 10, md5('u' || g) FROM generate_series(2001, 2200) g
UNION ALL
SELECT 's' || g, :long_turns, md5('u' || g) FROM generate_series(3001, 3100) g;

-- Texts of a typical size, shared with the pgbench scripts.
CREATE FUNCTION bench.question() RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT repeat('How does the retention rule apply to this contract? ', 3) $$;
CREATE FUNCTION bench.answer() RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT repeat('The rule applies from the date of signature, subject to the exceptions listed. ', 8) $$;

-- Turns arrive interleaved across sessions, as in real traffic, and each
-- is written the way its side writes it: convctx through the API, floor.turn
-- with the floor's own INSERT and UPDATE, turn by turn, so that both tables
-- end up with the same physical layout (a bulk load would pack the floor's
-- pages and spare it the free-space hunting a live table does). One commit
-- per round keeps session rows from piling up versions in one transaction.
CREATE PROCEDURE bench.fill(from_round integer, to_round integer) LANGUAGE plpgsql AS $$
DECLARE
    s record;
    floor_turn uuid;
BEGIN
    FOR i IN from_round..to_round LOOP
        FOR s IN SELECT session_id, identity_id FROM bench.initial WHERE turns >= i ORDER BY session_id LOOP
            PERFORM convctx.finalize_turn(s.session_id,
                                          convctx.start_turn(s.session_id, 'p' || i, bench.question(),
                                                             identity_id => s.identity_id),
                                          bench.answer());
            INSERT INTO floor.turn (tenant_id, session_id, request_id, identity_id, question_neutral)
            VALUES ('', s.session_id, 'p' || i, s.identity_id, bench.question()) RETURNING turn_id INTO floor_turn;
            UPDATE floor.turn SET answer_neutral = bench.answer(), finalized_at = statement_timestamp()
             WHERE tenant_id = '' AND session_id = s.session_id AND turn_id = floor_turn;
        END LOOP;
        COMMIT;
    END LOOP;
END
$$;

-- Statistics early, as autovacuum would give them: on a never-analyzed
-- table the request and turn lookups walk the whole session.
CALL bench.fill(1, 10);
ANALYZE convctx.turn, convctx.session, floor.turn;
CALL bench.fill(11, :long_turns);

\set tenant ''
\ir ../lib/reset.sql

\pset footer off
SELECT t.name AS "table", t.turns,
       (SELECT string_agg(regexp_replace(pg_get_indexdef(indexrelid),
                                         '^CREATE (UNIQUE )?INDEX \S+ ON \S+ USING btree ', '\1'),
                          '; ' ORDER BY indexrelid)
          FROM pg_index WHERE indrelid = t.name::regclass) AS indexes
FROM (VALUES ('convctx.turn', (SELECT count(*) FROM convctx.turn)),
             ('floor.turn', (SELECT count(*) FROM floor.turn))) AS t(name, turns);
