-- Storage benchmark state: convctx, and floor.turn (test/bench/lib/floor_turn.sql).
-- Both empty; the load writes them.

\set ON_ERROR_STOP 1
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE EXTENSION convctx;
CREATE SCHEMA bench;
\ir ../lib/floor_turn.sql

-- A 200-byte question and a 1,000-byte answer.
CREATE FUNCTION bench.question() RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT left(repeat('How does the retention rule apply to this contract? ', 4), 200) $$;
CREATE FUNCTION bench.answer() RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT left(repeat('The rule applies from the date of signature, subject to the exceptions listed. ', 13), 1000) $$;
