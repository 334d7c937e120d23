/* convctx--0.1.0--0.2.0.sql: roles, tenant binding, row-level security, turn storage */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx UPDATE TO '0.2.0'" to load this file. \quit

------------------------------------------------------------------------------
-- Roles
--
-- Roles belong to the cluster, not to a database or to the extension: they
-- are created when missing and left in place by DROP EXTENSION.
------------------------------------------------------------------------------

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'convctx_app') THEN
        CREATE ROLE convctx_app NOLOGIN;
        COMMENT ON ROLE convctx_app IS
            'convctx: may call the app-facing functions (context store, turns, prompt assembly)';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'convctx_admin') THEN
        CREATE ROLE convctx_admin NOLOGIN;
        COMMENT ON ROLE convctx_admin IS
            'convctx: convctx_app plus redaction, erasure, retention, scheduling, tenant bindings, the views and the audit log';
    END IF;
    IF NOT pg_catalog.pg_has_role('convctx_admin', 'convctx_app', 'MEMBER') THEN
        GRANT convctx_app TO convctx_admin;
    END IF;
END
$roles$;

------------------------------------------------------------------------------
-- Tenant binding
------------------------------------------------------------------------------

CREATE TABLE convctx.role_tenant (
    role_id    regrole     NOT NULL,
    tenant_id  text COLLATE "C" NOT NULL,
    role_name  text        NOT NULL,
    bound_at   timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT role_tenant_pkey PRIMARY KEY (role_id)
);

COMMENT ON TABLE convctx.role_tenant IS
    'roles bound to a tenant: such a role, and every role that is a member of it, always acts for that tenant';
COMMENT ON COLUMN convctx.role_tenant.role_id IS
    'the bound role (dumped by name: the role must exist where the dump is restored)';
COMMENT ON COLUMN convctx.role_tenant.role_name IS
    'the name of the role when it was bound: once the role is renamed or dropped the binding binds nobody and calls through it fail until it is renewed';

SELECT pg_catalog.pg_extension_config_dump('convctx.role_tenant', '');

CREATE FUNCTION convctx.bind_role_tenant(role regrole, tenant text)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_bind_role_tenant'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;

COMMENT ON FUNCTION convctx.bind_role_tenant(regrole, text) IS
    'bind a role (and its members) to a tenant, replacing an earlier binding; only an unbound role may call it';

CREATE FUNCTION convctx.unbind_role_tenant(role regrole)
RETURNS boolean
AS 'MODULE_PATHNAME', 'convctx_unbind_role_tenant'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;

COMMENT ON FUNCTION convctx.unbind_role_tenant(regrole) IS
    'remove the binding of a role; false when it had none; only an unbound role may call it';

COMMENT ON FUNCTION convctx.current_tenant() IS
    'tenant the calling role acts for: its binding (convctx.tenant naming another tenant is an error), else the setting convctx.tenant, else '''' (single-tenant default)';

------------------------------------------------------------------------------
-- Functions that read or write the tables run as the extension's owner,
-- with a fixed search_path; they take the tenant from current_tenant().
------------------------------------------------------------------------------

ALTER FUNCTION convctx.context_load(text)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.context_save(text, jsonb, text)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.context_add(text, text[], text)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
-- The four functions a chat request calls every time pin the same
-- search_path in C, for the whole call (spi_util.c, PinSearchPath): SET in
-- the definition costs each call a save, parse, assign and restore of the
-- setting and two recomputations of the path: in PostgreSQL 15 about 4% of
-- the instructions of a turn and 5% of the turn lifecycle's throughput.
ALTER FUNCTION convctx.start_turn(text, text, text, text, text, boolean, jsonb, text, text, text)
    SECURITY DEFINER;
ALTER FUNCTION convctx.finalize_turn(text, uuid, text, text, boolean, jsonb)
    SECURITY DEFINER;
ALTER FUNCTION convctx.recent_turns(text, integer)
    SECURITY DEFINER;
ALTER FUNCTION convctx.recent_turns_json(text, integer)
    SECURITY DEFINER;
ALTER FUNCTION convctx.link_session(text, text, boolean)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.replace_turn(text, uuid, text, text, jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.redact_turn(text, uuid)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.redact_session(text)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.erase_identity(text)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.purge(integer)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.conversation_state(text, integer)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.set_summary(text, text, uuid)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.turns_to_summarize(text, integer)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.record_retrieval(text, uuid, jsonb, jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.context_history(text, integer, jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.is_followup(text, text)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.record_clarification(text, uuid, jsonb, jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;
ALTER FUNCTION convctx.clarification_context(text, uuid, jsonb)
    SECURITY DEFINER SET search_path = pg_catalog, convctx, pg_temp;

COMMENT ON FUNCTION convctx.start_turn(text, text, text, text, text, boolean, jsonb, text, text, text) IS
    'start the turn of a chat request; idempotent on (session_id, request_id): a repeat returns the same turn_id and changes nothing (search_path pinned in C to pg_catalog, convctx, pg_temp)';
COMMENT ON FUNCTION convctx.finalize_turn(text, uuid, text, text, boolean, jsonb) IS
    'store the answer of a started turn; repeating it with the same answer changes nothing, a different answer is refused (use replace_turn) (search_path pinned in C to pg_catalog, convctx, pg_temp)';
COMMENT ON FUNCTION convctx.recent_turns(text, integer) IS
    'the last turn_limit finalized, non-redacted, current-version turns of a session, oldest first (search_path pinned in C to pg_catalog, convctx, pg_temp)';
COMMENT ON FUNCTION convctx.recent_turns_json(text, integer) IS
    'recent_turns as a JSON array of {"question_neutral", "answer_neutral"} objects, oldest first, for prompt history (search_path pinned in C to pg_catalog, convctx, pg_temp)';

COMMENT ON FUNCTION convctx.purge(integer) IS
    'one retention pass, at most batch_size rows of each kind, over every tenant (over its own tenant for a bound role); returns the counts per kind and logs them';
COMMENT ON PROCEDURE convctx.purge_all(integer) IS
    'repeat purge with a COMMIT after each pass until nothing is left (inside a transaction block: one transaction)';

------------------------------------------------------------------------------
-- Row-level security: whoever is granted a table sees and changes only the
-- rows of the tenant it acts for. The owner (the SECURITY DEFINER functions
-- above) is not subject to it; those functions filter by tenant themselves.
------------------------------------------------------------------------------

ALTER TABLE convctx.conversation_context ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.session ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.session_link ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.turn ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.audit_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.session_summary ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.turn_retrieval ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.clarification ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.followup_phrase ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.role_tenant ENABLE ROW LEVEL SECURITY;

CREATE POLICY tenant_isolation ON convctx.conversation_context
    USING (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant())
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant());
CREATE POLICY tenant_isolation ON convctx.session
    USING (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant())
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant());
CREATE POLICY tenant_isolation ON convctx.session_link
    USING (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant())
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant());
CREATE POLICY tenant_isolation ON convctx.turn
    USING (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant())
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant());
CREATE POLICY tenant_isolation ON convctx.audit_log
    USING (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant())
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant());
CREATE POLICY tenant_isolation ON convctx.session_summary
    USING (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant())
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant());
CREATE POLICY tenant_isolation ON convctx.turn_retrieval
    USING (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant())
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant());
CREATE POLICY tenant_isolation ON convctx.clarification
    USING (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant())
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant());
CREATE POLICY tenant_isolation ON convctx.role_tenant
    USING (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant())
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant());
CREATE POLICY tenant_isolation ON convctx.followup_phrase
    USING (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant())
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) convctx.current_tenant());
-- The phrases of tenant '' apply to every tenant: readable, not writable.
CREATE POLICY shared_phrases ON convctx.followup_phrase FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) '');

COMMENT ON POLICY tenant_isolation ON convctx.conversation_context IS 'rows of the tenant the role acts for';
COMMENT ON POLICY tenant_isolation ON convctx.session IS 'rows of the tenant the role acts for';
COMMENT ON POLICY tenant_isolation ON convctx.session_link IS 'rows of the tenant the role acts for';
COMMENT ON POLICY tenant_isolation ON convctx.turn IS 'rows of the tenant the role acts for';
COMMENT ON POLICY tenant_isolation ON convctx.audit_log IS 'rows of the tenant the role acts for';
COMMENT ON POLICY tenant_isolation ON convctx.session_summary IS 'rows of the tenant the role acts for';
COMMENT ON POLICY tenant_isolation ON convctx.turn_retrieval IS 'rows of the tenant the role acts for';
COMMENT ON POLICY tenant_isolation ON convctx.clarification IS 'rows of the tenant the role acts for';
COMMENT ON POLICY tenant_isolation ON convctx.role_tenant IS 'rows of the tenant the role acts for';
COMMENT ON POLICY tenant_isolation ON convctx.followup_phrase IS 'rows of the tenant the role acts for';
COMMENT ON POLICY shared_phrases ON convctx.followup_phrase IS 'the built-in and shared phrases (tenant '''') are readable by every tenant';

-- The views show what the querying role may see: every tenant for the
-- owner and superusers, the tenant it acts for for everyone else.
ALTER VIEW convctx.sessions SET (security_invoker = true);
ALTER VIEW convctx.stats SET (security_invoker = true);

COMMENT ON VIEW convctx.sessions IS
    'sessions the querying role may see (every tenant for a superuser, else the tenant it acts for): identity, turns (current versions), finalized and redacted ones, first and last activity, expiry of anonymous sessions';
COMMENT ON VIEW convctx.stats IS
    'per tenant the querying role may see: sessions (anonymous, linked), turns, old versions, tombstones, contexts; table_bytes and index_bytes are for all convctx tables together';

------------------------------------------------------------------------------
-- Privileges: nothing for PUBLIC; convctx_app the app-facing functions;
-- convctx_admin (a member of convctx_app) administration, the views and
-- read access to the tables. No role may write the tables directly.
------------------------------------------------------------------------------

REVOKE ALL ON ALL ROUTINES IN SCHEMA convctx FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA convctx FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA convctx FROM PUBLIC;
REVOKE ALL ON SCHEMA convctx FROM PUBLIC;

GRANT USAGE ON SCHEMA convctx TO convctx_app, convctx_admin;

GRANT EXECUTE ON FUNCTION
    convctx.current_tenant(),
    convctx.context_merge(jsonb, text[], integer),
    convctx.context_load(text),
    convctx.context_save(text, jsonb, text),
    convctx.context_add(text, text[], text),
    convctx.context_aspect(jsonb, jsonb),
    convctx.start_turn(text, text, text, text, text, boolean, jsonb, text, text, text),
    convctx.finalize_turn(text, uuid, text, text, boolean, jsonb),
    convctx.recent_turns(text, integer),
    convctx.recent_turns_json(text, integer),
    convctx.link_session(text, text, boolean),
    convctx.replace_turn(text, uuid, text, text, jsonb),
    convctx.conversation_state(text, integer),
    convctx.set_summary(text, text, uuid),
    convctx.turns_to_summarize(text, integer),
    convctx.render_conversation_state(jsonb),
    convctx.record_retrieval(text, uuid, jsonb, jsonb),
    convctx.context_history(text, integer, jsonb),
    convctx.render_context_history(jsonb, jsonb),
    convctx.is_followup(text, text),
    convctx.record_clarification(text, uuid, jsonb, jsonb),
    convctx.clarification_context(text, uuid, jsonb),
    convctx.render_clarification(jsonb, text)
TO convctx_app;

GRANT EXECUTE ON FUNCTION
    convctx.redact_turn(text, uuid),
    convctx.redact_session(text),
    convctx.erase_identity(text),
    convctx.retention_settings(),
    convctx.purge(integer),
    convctx.schedule_retention(text),
    convctx.unschedule_retention(),
    convctx.bind_role_tenant(regrole, text),
    convctx.unbind_role_tenant(regrole)
TO convctx_admin;
GRANT EXECUTE ON PROCEDURE convctx.purge_all(integer) TO convctx_admin;

GRANT SELECT ON ALL TABLES IN SCHEMA convctx TO convctx_admin;

-- audit_id comes from one sequence for every tenant: the gaps between one
-- tenant's ids would count the other tenants' events. Administrators read
-- every other column and order by logged_at.
REVOKE SELECT ON convctx.audit_log FROM convctx_admin;
GRANT SELECT (tenant_id, logged_at, role_name, action, session_id, identity_id, details)
    ON convctx.audit_log TO convctx_admin;
COMMENT ON COLUMN convctx.audit_log.audit_id IS
    'key from one sequence shared by every tenant; not readable by convctx_admin, whose rows are ordered by logged_at';

------------------------------------------------------------------------------
-- Turn storage
--
-- A turn is written twice: its question at start_turn, then its answer,
-- usually larger, at finalize_turn. New turns fill a page only to 70%, so
-- that the answer usually fits on the page of its question: the update is
-- then HOT and adds no entry to the turn's four indexes. Applies to pages
-- filled from now on.
------------------------------------------------------------------------------

ALTER TABLE convctx.turn SET (fillfactor = 70);

-- A session row is updated at every start_turn and finalize_turn, and the
-- next read of its page prunes the old version, walking every row of the
-- page. Session pages are filled to 30%, so that walk is a few dozen rows,
-- not a hundred: the table takes about three times the space, which is
-- small beside the turns.
ALTER TABLE convctx.session SET (fillfactor = 30);

-- finalize_turn counts an answer in the session row and, when the
-- session's summary covers the turn, in the summary too. It learns whether
-- it does from this column, under the lock it already takes, instead of
-- a second statement whose snapshot follows that lock.
ALTER TABLE convctx.session ADD COLUMN summary_through_turn_no bigint;
COMMENT ON COLUMN convctx.session.summary_through_turn_no IS
    'through_turn_no of the session''s summary (convctx.session_summary), NULL when it has none; written with the summary under this row''s lock';
UPDATE convctx.session s SET summary_through_turn_no = sm.through_turn_no
  FROM convctx.session_summary sm
 WHERE sm.tenant_id = s.tenant_id AND sm.session_id = s.session_id;
