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

-- Writers refuse on a standby and in a read-only transaction with 25006
-- naming the function (src/spi_util.c, CheckWritable): no catalog change.

-- Built-in follow-up phrases are no longer rows. Every CREATE EXTENSION
-- inserted them, so a subscriber already held them and the initial copy
-- of convctx.followup_phrase from a publisher failed with 23505 forever.
-- They are now a view, which no publication carries and pg_dump leaves to
-- CREATE EXTENSION; is_followup reads the view and the table together.
-- The table holds only the phrases tenants add, and is dumped and
-- replicated in full. A built-in phrase deleted from the table by hand
-- before 0.4.0 is in force again (list your own instead). Column builtin
-- stays, always false: a subscriber applies a publisher's rows only when
-- every column the publisher sends exists on it, so dropping the column
-- would stop the replication of a pair whose two sides are updated one
-- after the other (and a dump of 0.3.0 names it too).
CREATE VIEW convctx.builtin_followup_phrase (kind, phrase) WITH (security_invoker = true) AS
VALUES
    ('clarification'::pg_catalog.text, '¿seguro?'::pg_catalog.text),
    ('clarification', '¿estás seguro?'),
    ('clarification', '¿está seguro?'),
    ('clarification', 'explícame más'),
    ('clarification', 'explícalo'),
    ('clarification', '¿qué quieres decir?'),
    ('clarification', 'are you sure'),
    ('clarification', 'explain more'),
    ('clarification', 'tell me more'),
    ('clarification', 'what do you mean'),
    ('clarification', 'can you elaborate'),
    ('clarification', 'can you clarify'),
    ('fresh_keyword', 'artículo'),
    ('fresh_keyword', 'ley'),
    ('fresh_keyword', 'código'),
    ('fresh_keyword', 'article'),
    ('fresh_keyword', 'law'),
    ('fresh_keyword', 'code'),
    ('fresh_keyword', 'section'),
    ('fresh_keyword', 'statute');

COMMENT ON VIEW convctx.builtin_followup_phrase IS
    'the built-in phrases of is_followup, for every tenant: part of the extension, not of its data (never dumped or replicated); tenants add theirs to convctx.followup_phrase';
REVOKE ALL ON convctx.builtin_followup_phrase FROM PUBLIC;

DELETE FROM convctx.followup_phrase WHERE builtin;
COMMENT ON COLUMN convctx.followup_phrase.builtin IS
    'no longer used, always false (the built-in phrases are the view convctx.builtin_followup_phrase); kept so that rows from a 0.3.0 server or dump still fit';

COMMENT ON TABLE convctx.followup_phrase IS
    'phrases tenants add to is_followup (beside convctx.builtin_followup_phrase): clarification phrases (reuse the previous context) and fresh_keyword (always retrieve); tenant '''' applies to every tenant';
COMMENT ON POLICY shared_phrases ON convctx.followup_phrase IS
    'the shared phrases (tenant '''') are readable by every tenant';

-- audit_id was taken from a sequence, which logical replication does not
-- carry: after a failover to a subscriber the sequence there started
-- again at 1 and every audited function failed with 23505 until someone
-- ran setval. A random UUID cannot collide on any server, and nothing
-- needs to be advanced after a failover. Rows written before keep their
-- number, as a UUID of version 0 (0000...000n) that no random (version 4)
-- UUID can equal, the same value on every server that converts them.
-- Readers order by logged_at, then audit_id.
ALTER TABLE convctx.audit_log ALTER COLUMN audit_id DROP DEFAULT;
ALTER TABLE convctx.audit_log ALTER COLUMN audit_id TYPE pg_catalog.uuid
    USING pg_catalog.lpad(pg_catalog.to_hex(audit_id), 32, '0')::pg_catalog.uuid;
ALTER TABLE convctx.audit_log ALTER COLUMN audit_id SET DEFAULT pg_catalog.gen_random_uuid();
ALTER EXTENSION convctx DROP SEQUENCE convctx.audit_log_audit_id_seq;
DROP SEQUENCE convctx.audit_log_audit_id_seq;

COMMENT ON COLUMN convctx.audit_log.audit_id IS
    'random key (gen_random_uuid()), unique on every server, also after a failover to a logical replica; rows from before 0.4.0 keep their old number as 0000...n; administrators read the log through convctx.audit, without it';
COMMENT ON FUNCTION convctx.admin_audit() IS
    'the audit log of the tenant the caller acts for (every tenant for superusers and roles bound to every tenant), oldest first (by logged_at), without audit_id';

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
