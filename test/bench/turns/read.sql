-- What one recent_turns(:session, 10) call reads, from the statistics this
-- transaction gathers: index scans of turn_chronology, rows fetched through
-- it, and buffers of the table and the index (hits and reads).
\set ON_ERROR_STOP 1
\set VERBOSITY terse
BEGIN;
SELECT pg_stat_get_xact_numscans('convctx.turn_chronology'::regclass) AS scans,
       pg_stat_get_xact_tuples_fetched('convctx.turn_chronology'::regclass) AS fetched,
       pg_stat_get_xact_blocks_fetched('convctx.turn'::regclass)
       + pg_stat_get_xact_blocks_fetched('convctx.turn_chronology'::regclass) AS buffers \gset
SELECT count(*) FROM convctx.recent_turns(:'session', 10) \g /dev/null
SELECT pg_stat_get_xact_numscans('convctx.turn_chronology'::regclass) - :scans || ' index scan(s) of turn_chronology, '
       || pg_stat_get_xact_tuples_fetched('convctx.turn_chronology'::regclass) - :fetched || ' rows fetched, '
       || pg_stat_get_xact_blocks_fetched('convctx.turn'::regclass)
          + pg_stat_get_xact_blocks_fetched('convctx.turn_chronology'::regclass) - :buffers || ' buffers';
COMMIT;
