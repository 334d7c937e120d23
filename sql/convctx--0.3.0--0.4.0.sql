/* convctx--0.3.0--0.4.0.sql: operations (lock order, isolation levels, replicas, retention cost) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx UPDATE TO '0.4.0'" to load this file. \quit

------------------------------------------------------------------------------
-- (locks) one lock order for every row convctx locks
------------------------------------------------------------------------------

------------------------------------------------------------------------------
-- (retention) purge at any isolation level, at a cost that follows what expired
------------------------------------------------------------------------------

------------------------------------------------------------------------------
-- (replication) hot standbys, logical replication and failover
------------------------------------------------------------------------------

------------------------------------------------------------------------------
-- (tombstones) reads that do not grow with tombstones
------------------------------------------------------------------------------
-- No catalog change: the prompt reads stop once they have read as many live turns as
-- the session row counts (live_turns, live_answers), see docs/tombstones.md.

------------------------------------------------------------------------------
-- (final) every function runs as its caller, with a pinned search path
------------------------------------------------------------------------------
DO $invoker$
DECLARE
    f pg_catalog.regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) 'convctx'::pg_catalog.regnamespace
                AND p.prosecdef
    LOOP
        RAISE EXCEPTION 'function % is SECURITY DEFINER', f
            USING ERRCODE = 'internal_error';
    END LOOP;
END
$invoker$;
