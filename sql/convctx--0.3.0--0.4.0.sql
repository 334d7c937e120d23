/* convctx--0.3.0--0.4.0.sql: operations (lock order, isolation levels, replicas, retention cost) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx UPDATE TO '0.4.0'" to load this file. \quit

------------------------------------------------------------------------------
-- (locks) one lock order for every row convctx locks
------------------------------------------------------------------------------

------------------------------------------------------------------------------
-- (retention) purge at any isolation level, at a cost that follows what expired
------------------------------------------------------------------------------

-- Each retention pass finds what expired through an index, in the order it
-- expired, so that a pass reads about as many rows as it deletes however
-- many rows the tables hold; one index per pass serves every tenant, a
-- second one (led by tenant_id) a role bound to one tenant.
--
-- convctx.session is updated by every start_turn and its row is kept at
-- fillfactor 30 so that those updates are HOT (no new index entries). An
-- index on last_activity_at would end that: its value changes with every
-- turn. The index is on a coarse copy of it instead, the 10-minute bin it
-- falls in: a generated column that every writer of last_activity_at keeps
-- right without naming it, and whose value changes at most once per bin,
-- so that almost every update still changes no indexed value. A pass takes
-- the bins before the cutoff from the index and rechecks the exact
-- last_activity_at, so a session expires exactly convctx.session_ttl after
-- its last activity, as before. The update rewrites convctx.session and
-- convctx.conversation_context (to fill the new columns) and builds the
-- new indexes, under a lock that stops writers: on large tables, run it in
-- a quiet hour.
ALTER TABLE convctx.session ADD COLUMN activity_bin timestamptz
    GENERATED ALWAYS AS (pg_catalog.date_bin('00:10:00'::pg_catalog.interval, last_activity_at,
                                             '2000-01-01 00:00:00+00'::pg_catalog.timestamptz)) STORED;
COMMENT ON COLUMN convctx.session.activity_bin IS
    'last_activity_at rounded down to 10 minutes: what the expiry indexes hold, so that most updates of last_activity_at stay HOT';
CREATE INDEX session_expiry ON convctx.session (activity_bin)
    WHERE identity_id IS NULL;
CREATE INDEX session_expiry_tenant ON convctx.session (tenant_id, activity_bin)
    WHERE identity_id IS NULL;

-- The same for contexts (updated_at changes with every context_add).
ALTER TABLE convctx.conversation_context ADD COLUMN updated_bin timestamptz
    GENERATED ALWAYS AS (pg_catalog.date_bin('00:10:00'::pg_catalog.interval, updated_at,
                                             '2000-01-01 00:00:00+00'::pg_catalog.timestamptz)) STORED;
COMMENT ON COLUMN convctx.conversation_context.updated_bin IS
    'updated_at rounded down to 10 minutes: what the expiry indexes hold, so that most updates of updated_at stay HOT';
CREATE INDEX conversation_context_expiry ON convctx.conversation_context (updated_bin);
CREATE INDEX conversation_context_expiry_tenant ON convctx.conversation_context (tenant_id, updated_bin);

-- Turns: created_at never changes; turn_created serves every tenant.
CREATE INDEX turn_created_tenant ON convctx.turn (tenant_id, created_at);

-- The audit log's own retention (convctx.audit_retention).
CREATE INDEX audit_log_logged ON convctx.audit_log (logged_at);
CREATE INDEX audit_log_logged_tenant ON convctx.audit_log (tenant_id, logged_at);

-- retention_settings() shows convctx.audit_retention too.
DROP FUNCTION convctx.retention_settings();
CREATE FUNCTION convctx.retention_settings(
    OUT session_ttl interval, OUT turn_retention interval, OUT context_ttl interval,
    OUT audit_retention interval)
AS 'MODULE_PATHNAME', 'convctx_retention_settings'
LANGUAGE C STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION convctx.retention_settings() IS
    'the retention settings in force as intervals (NULL = kept forever): convctx.session_ttl, convctx.turn_retention, convctx.context_ttl, convctx.audit_retention';
REVOKE ALL ON FUNCTION convctx.retention_settings() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.retention_settings() TO convctx_admin;

COMMENT ON FUNCTION convctx.purge(integer) IS
    'one retention pass, at most batch_size rows of each kind, over every tenant (over its own tenant for a bound role); returns the counts per kind and logs them when it deleted something';

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
