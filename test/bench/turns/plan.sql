-- The plan recent_turns really runs, with its buffer counts: its SPI
-- statement as logged by auto_explain once the plan cache has settled.
-- Takes the database's session prefix as :prefix and a session as :session.
\set ON_ERROR_STOP 1
\set VERBOSITY terse
LOAD 'auto_explain';
SELECT (SELECT count(*) FROM convctx.recent_turns(:'prefix' || g, 10)) FROM generate_series(1, 6) g \g /dev/null
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_analyze = on;
SET auto_explain.log_buffers = on;
SET auto_explain.log_timing = off;
SET auto_explain.log_level = notice;
SET client_min_messages = notice;
SELECT count(*) FROM convctx.recent_turns(:'session', 10) \g /dev/null
