-- Storage benchmark state: convctx, and floor.turn, a bare copy of
-- convctx.turn's columns and indexes (as in test/bench/turns), fill
-- factor 100. Both empty; the load writes them.

\set ON_ERROR_STOP 1
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE EXTENSION convctx;
CREATE SCHEMA bench;
CREATE SCHEMA floor;

CREATE TABLE floor.turn (LIKE convctx.turn INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES);
CREATE SEQUENCE floor.turn_no_seq OWNED BY floor.turn.turn_no;
ALTER TABLE floor.turn
    ALTER turn_no SET DEFAULT nextval('floor.turn_no_seq'),
    ALTER turn_id SET DEFAULT gen_random_uuid();

-- A 200-byte question and a 1,000-byte answer.
CREATE FUNCTION bench.question() RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT left(repeat('How does the retention rule apply to this contract? ', 4), 200) $$;
CREATE FUNCTION bench.answer() RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT left(repeat('The rule applies from the date of signature, subject to the exceptions listed. ', 13), 1000) $$;
