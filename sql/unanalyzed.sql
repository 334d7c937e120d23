-- Tables never analyzed: what a redaction, an erasure and a turn read
-- does not grow with the tables. Run in a database of its own, whose
-- tables autovacuum leaves alone, so that they stay never analyzed: the
-- planner knows their sizes but nothing of their columns.
\set regress_db :DBNAME
SET client_min_messages = warning;
DROP DATABASE IF EXISTS convctx_unanalyzed;
CREATE DATABASE convctx_unanalyzed;
\c convctx_unanalyzed
SET client_min_messages = warning;
CREATE EXTENSION convctx;
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid FROM pg_class c
              WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'r'
    LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off)', t);
    END LOOP;
END $$;

-- Index entries and rows read in schema convctx since the last call
-- (the backend's counts, flushed first).
CREATE TABLE reads_seen (n bigint);
INSERT INTO reads_seen VALUES (0);
CREATE FUNCTION reads_total() RETURNS bigint LANGUAGE sql AS $$
    SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE schemaname = 'convctx')
         + (SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables WHERE schemaname = 'convctx')
$$;
CREATE FUNCTION reads_since() RETURNS bigint LANGUAGE sql AS $$
    UPDATE reads_seen SET n = reads_total() RETURNING n - (SELECT n FROM reads_seen)
$$;

-- A session of 1 000 turns (as an import leaves one), 1 000 sessions of
-- other identities, and an identity with three sessions.
SELECT count(convctx.finalize_turn('big', convctx.start_turn('big', 'r' || i, 'question ' || i, 'owner'),
                                   'answer ' || i))
  FROM generate_series(1, 1000) i;
SELECT count(convctx.finalize_turn('other-' || i, convctx.start_turn('other-' || i, 'r1', 'q', 'other-' || i), 'a'))
  FROM generate_series(1, 1000) i;
SELECT count(convctx.finalize_turn('small-' || i, convctx.start_turn('small-' || i, 'r1', 'q', 'small'), 'a'))
  FROM generate_series(1, 3) i;
SELECT count(*) FROM pg_stats WHERE schemaname = 'convctx';
SELECT convctx.start_turn('big', 'r-new', 'one more') AS new_turn \gset
SELECT turn_id AS turn_500 FROM convctx.turn WHERE session_id = 'big' AND turn_no = 500 \gset
SELECT pg_stat_force_next_flush();
SELECT reads_since() >= 0 AS started;

-- Each call reads a few index entries and rows (the session row's
-- versions among them): a turn probed by its turn_id, not found
-- by walking the session's 1 000 turns; an identity's sessions probed
-- one by one, not found among the tenant's.
SELECT convctx.finalize_turn('big', :'new_turn', 'the answer');
SELECT pg_stat_force_next_flush();
SELECT reads_since() AS finalize_turn_reads \gset
SELECT :finalize_turn_reads < 200 AS finalize_turn_bounded;

SELECT convctx.redact_turn('big', :'turn_500');
SELECT pg_stat_force_next_flush();
SELECT reads_since() AS redact_turn_reads \gset
SELECT :redact_turn_reads < 200 AS redact_turn_bounded;

SELECT convctx.erase_identity('small');
SELECT pg_stat_force_next_flush();
SELECT reads_since() AS erase_identity_reads \gset
SELECT :erase_identity_reads < 200 AS erase_identity_bounded;

-- still never analyzed
SELECT count(*) FROM pg_stats WHERE schemaname = 'convctx';

\c :regress_db
SET client_min_messages = warning;
DROP DATABASE convctx_unanalyzed;
