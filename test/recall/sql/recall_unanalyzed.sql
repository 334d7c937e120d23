-- Tables never analyzed: what redact_turn and erase_identity read of the
-- embeddings does not grow with them. Run in a database of its own, whose
-- tables autovacuum leaves alone, so that they stay never analyzed.
\set regress_db :DBNAME
SET client_min_messages = warning;
DROP DATABASE IF EXISTS convctx_recall_unanalyzed;
CREATE DATABASE convctx_recall_unanalyzed;
\c convctx_recall_unanalyzed
SET client_min_messages = warning;
CREATE EXTENSION convctx;
CREATE EXTENSION vector;
CREATE EXTENSION convctx_recall;
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid FROM pg_class c
              WHERE c.relnamespace IN ('convctx'::regnamespace, 'convctx_recall'::regnamespace)
                AND c.relkind = 'r'
    LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off)', t);
    END LOOP;
END $$;
SELECT convctx_recall.add_model('m3', 3);

-- Index entries and rows read in convctx and convctx_recall since the
-- last call (the backend's counts, flushed first).
CREATE TABLE reads_seen (n bigint);
INSERT INTO reads_seen VALUES (0);
CREATE FUNCTION reads_total() RETURNS bigint LANGUAGE sql AS $$
    SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes
             WHERE schemaname IN ('convctx', 'convctx_recall'))
         + (SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables
             WHERE schemaname IN ('convctx', 'convctx_recall'))
$$;
CREATE FUNCTION reads_since() RETURNS bigint LANGUAGE sql AS $$
    UPDATE reads_seen SET n = reads_total() RETURNING n - (SELECT n FROM reads_seen)
$$;

-- A session of 1 000 turns, each with its embedding (as an import leaves
-- them), 1 000 sessions of other identities with theirs, and an identity
-- with three sessions.
SELECT count(convctx.finalize_turn('big', convctx.start_turn('big', 'r' || i, 'question ' || i, 'owner'),
                                   'answer ' || i))
  FROM generate_series(1, 1000) i;
SELECT count(convctx.finalize_turn('other-' || i, convctx.start_turn('other-' || i, 'r1', 'q', 'other-' || i), 'a'))
  FROM generate_series(1, 1000) i;
SELECT count(convctx.finalize_turn('small-' || i, convctx.start_turn('small-' || i, 'r1', 'q', 'small'), 'a'))
  FROM generate_series(1, 3) i;
INSERT INTO convctx_recall.turn_embedding (tenant_id, session_id, turn_id, model_no, embedding)
SELECT t.tenant_id, t.session_id, t.turn_id, m.model_no, '[1,0,0]'
  FROM convctx.turn t, convctx_recall.model m;
SELECT count(*) FROM pg_stats WHERE schemaname IN ('convctx', 'convctx_recall');
SELECT turn_id AS turn_500 FROM convctx.turn WHERE session_id = 'big' AND turn_no = 500 \gset
SELECT pg_stat_force_next_flush();
SELECT reads_since() >= 0 AS started;

-- Each call reads a few index entries and rows: the embeddings of the
-- turn redacted probed by their keys, not the session's 1 000 read for
-- each; those of the identity's sessions probed, not the tenant's read.
SELECT convctx.redact_turn('big', :'turn_500');
SELECT pg_stat_force_next_flush();
SELECT reads_since() AS redact_turn_reads \gset
SELECT :redact_turn_reads < 200 AS redact_turn_bounded;

SELECT convctx.erase_identity('small');
SELECT pg_stat_force_next_flush();
SELECT reads_since() AS erase_identity_reads \gset
SELECT :erase_identity_reads < 200 AS erase_identity_bounded;

-- Exact recall (no tenant has an index of its own) takes the nearest
-- embeddings first and then reads their turns: a few turn rows for k = 5,
-- not one for every embedding of the session, or of the tenant, as a join
-- of every candidate to its turn reads.
CREATE TABLE turn_reads_seen (n bigint);
INSERT INTO turn_reads_seen VALUES (0);
CREATE FUNCTION turn_reads_since() RETURNS bigint LANGUAGE sql AS $$
    UPDATE turn_reads_seen SET n = (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes
                                     WHERE schemaname = 'convctx' AND relname = 'turn')
                                 + (SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables
                                     WHERE schemaname = 'convctx' AND relname = 'turn')
    RETURNING n - (SELECT n FROM turn_reads_seen)
$$;
SELECT pg_stat_force_next_flush();
SELECT turn_reads_since() >= 0 AS started;
SELECT count(*) FROM convctx_recall.recall('[1,0,0]', 'm3', 5, session_id => 'big');
SELECT pg_stat_force_next_flush();
SELECT turn_reads_since() < 100 AS session_recall_reads_few_turns;
SELECT count(*) FROM convctx_recall.recall('[1,0,0]', 'm3', 5);
SELECT pg_stat_force_next_flush();
SELECT turn_reads_since() < 100 AS tenant_recall_reads_few_turns;

-- what they deleted
SELECT count(*) FROM convctx_recall.turn_embedding WHERE session_id = 'big';
SELECT count(*) FROM convctx_recall.turn_embedding WHERE session_id LIKE 'small-%';

-- still never analyzed
SELECT count(*) FROM pg_stats WHERE schemaname IN ('convctx', 'convctx_recall');

\c :regress_db
SET client_min_messages = warning;
DROP DATABASE convctx_recall_unanalyzed;
