/* convctx--0.6.0.sql: conversation memory for LLM chat backends */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION convctx" to load this file. \quit

-- The install script of 0.6.0, written as the catalog it leaves. A database
-- that runs an earlier version reaches the same catalog through the update
-- scripts (convctx--0.1.0--0.2.0.sql and the ones after it); the test
-- upgrade compares the two.
--
-- Sections: schema guard; roles; tenancy; context store; turn history;
-- lifecycle (redaction, erasure, retention); administration; prompt
-- assembly; row-level security; privileges. Every table that holds user
-- data is registered with pg_extension_config_dump where it is created.
--
-- Every function that touches a table runs with
-- search_path = pg_catalog, pg_temp, set in its definition: schema convctx
-- is not on it, the statements name it, so nothing created in it by name can
-- be picked up. No function is SECURITY DEFINER: such a function cannot tell
-- who called it (inside a role's own SECURITY DEFINER function, or an index
-- expression that a superuser's ANALYZE runs as the table's owner, the
-- caller would look like the superuser and act for every tenant). Each
-- decides the tenant from the role that really called it and switches to
-- the extension's owner in C for the statements it runs (src/core/owner.c,
-- ActAsOwner).

------------------------------------------------------------------------------
-- Schema guard
------------------------------------------------------------------------------

-- The control file names schema convctx, and CREATE EXTENSION reuses a
-- schema of that name that already exists. Whoever owns that schema, or
-- may create objects in it, could drop or shadow the objects of the
-- extension (an aggregate convctx.count(bigint), say, that a function would
-- then call as the extension's owner). So the schema must belong to the
-- extension's owner, nobody else may create in it, and it must hold nothing
-- but the extension's objects. This runs before anything is created.
DO $guard$
DECLARE
    nsp pg_catalog.oid;
    owner_name pg_catalog.text;
    ext pg_catalog.oid;
    foreign_objects pg_catalog.text;
    creators pg_catalog.text;
BEGIN
    SELECT n.oid, n.nspowner::pg_catalog.regrole::pg_catalog.text INTO nsp, owner_name
      FROM pg_catalog.pg_namespace n WHERE n.nspname OPERATOR(pg_catalog.=) 'convctx';
    SELECT e.oid INTO ext FROM pg_catalog.pg_extension e
     WHERE e.extname OPERATOR(pg_catalog.=) 'convctx';

    IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace n, pg_catalog.pg_extension e
                    WHERE n.oid OPERATOR(pg_catalog.=) nsp AND e.oid OPERATOR(pg_catalog.=) ext
                      AND n.nspowner OPERATOR(pg_catalog.=) e.extowner) THEN
        RAISE EXCEPTION 'schema convctx is owned by role %, not by the owner of extension convctx', owner_name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'The owner of the schema could drop or replace the objects of the extension.',
                  HINT = 'Check what schema convctx holds, drop it or make the installing role its owner, and try again.';
    END IF;

    SELECT pg_catalog.string_agg(DISTINCT a.grantee::pg_catalog.regrole::pg_catalog.text, ', ') INTO creators
      FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
     WHERE n.oid OPERATOR(pg_catalog.=) nsp AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
       AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner;
    IF creators IS NOT NULL THEN
        RAISE EXCEPTION 'roles other than its owner may create objects in schema convctx: %', creators
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'REVOKE CREATE ON SCHEMA convctx FROM those roles, and try again.';
    END IF;

    -- Every object in the schema must be a member of the extension, or
    -- belong to one (an index, a row type, a sequence owned by a column).
    SELECT pg_catalog.string_agg(o.descr, ', ' ORDER BY o.descr) INTO foreign_objects
      FROM (SELECT 'pg_catalog.pg_class'::pg_catalog.regclass AS cls, c.oid, 'relation convctx.' OPERATOR(pg_catalog.||) c.relname AS descr
              FROM pg_catalog.pg_class c WHERE c.relnamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, p.oid, pg_catalog.format('function convctx.%s(%s)', p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid))
              FROM pg_catalog.pg_proc p WHERE p.pronamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid, 'type convctx.' OPERATOR(pg_catalog.||) t.typname
              FROM pg_catalog.pg_type t WHERE t.typnamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_operator'::pg_catalog.regclass, o.oid, 'operator convctx.' OPERATOR(pg_catalog.||) o.oprname
              FROM pg_catalog.pg_operator o WHERE o.oprnamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_collation'::pg_catalog.regclass, x.oid, 'collation ' OPERATOR(pg_catalog.||) x.collname
              FROM pg_catalog.pg_collation x WHERE x.collnamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_conversion'::pg_catalog.regclass, x.oid, 'conversion ' OPERATOR(pg_catalog.||) x.conname
              FROM pg_catalog.pg_conversion x WHERE x.connamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_opclass'::pg_catalog.regclass, x.oid, 'operator class ' OPERATOR(pg_catalog.||) x.opcname
              FROM pg_catalog.pg_opclass x WHERE x.opcnamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_opfamily'::pg_catalog.regclass, x.oid, 'operator family ' OPERATOR(pg_catalog.||) x.opfname
              FROM pg_catalog.pg_opfamily x WHERE x.opfnamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_ts_config'::pg_catalog.regclass, x.oid, 'text search configuration ' OPERATOR(pg_catalog.||) x.cfgname
              FROM pg_catalog.pg_ts_config x WHERE x.cfgnamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_ts_dict'::pg_catalog.regclass, x.oid, 'text search dictionary ' OPERATOR(pg_catalog.||) x.dictname
              FROM pg_catalog.pg_ts_dict x WHERE x.dictnamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_ts_parser'::pg_catalog.regclass, x.oid, 'text search parser ' OPERATOR(pg_catalog.||) x.prsname
              FROM pg_catalog.pg_ts_parser x WHERE x.prsnamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_ts_template'::pg_catalog.regclass, x.oid, 'text search template ' OPERATOR(pg_catalog.||) x.tmplname
              FROM pg_catalog.pg_ts_template x WHERE x.tmplnamespace OPERATOR(pg_catalog.=) nsp
            UNION ALL
            SELECT 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass, x.oid, 'statistics object ' OPERATOR(pg_catalog.||) x.stxname
              FROM pg_catalog.pg_statistic_ext x WHERE x.stxnamespace OPERATOR(pg_catalog.=) nsp) o
     WHERE NOT EXISTS (
           SELECT FROM pg_catalog.pg_depend d
            WHERE d.classid OPERATOR(pg_catalog.=) o.cls AND d.objid OPERATOR(pg_catalog.=) o.oid
              AND ((d.deptype OPERATOR(pg_catalog.=) 'e' AND d.refobjid OPERATOR(pg_catalog.=) ext)
                   OR d.deptype OPERATOR(pg_catalog.=) ANY ('{i,a}'::pg_catalog."char"[])));
    IF foreign_objects IS NOT NULL THEN
        RAISE EXCEPTION 'schema convctx holds objects that do not belong to extension convctx'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('Found: %s.', foreign_objects),
                  HINT = 'Check where they come from and drop them (or the schema), then try again.';
    END IF;
END
$guard$;

COMMENT ON SCHEMA convctx IS
    'convctx: conversation memory for LLM chat backends (turns, contexts, redaction, retention)';

------------------------------------------------------------------------------
-- Roles
--
-- Roles belong to the cluster, not to a database or to the extension: they
-- are created when missing and left in place by DROP EXTENSION. A role of
-- one of these names that exists already (another database's install, an
-- earlier install here) is reused only if it is a plain group role, or the
-- extension would hand its privileges to a role that can log in, do more
-- than the extension expects, or read what a role it belongs to may read
-- (pg_read_all_data would give administrators the tables); its members are
-- named.
------------------------------------------------------------------------------

DO $roles$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT a.rolname,
                    pg_catalog.array_to_string(pg_catalog.array_remove(ARRAY[
                        CASE WHEN a.rolsuper THEN 'SUPERUSER' END,
                        CASE WHEN a.rolcanlogin THEN 'LOGIN' END,
                        CASE WHEN a.rolcreaterole THEN 'CREATEROLE' END,
                        CASE WHEN a.rolcreatedb THEN 'CREATEDB' END,
                        CASE WHEN a.rolreplication THEN 'REPLICATION' END,
                        CASE WHEN a.rolbypassrls THEN 'BYPASSRLS' END], NULL), ' ') AS attrs,
                    (SELECT pg_catalog.string_agg(m.roleid::pg_catalog.regrole::pg_catalog.text, ', ')
                       FROM pg_catalog.pg_auth_members m
                      WHERE m.member OPERATOR(pg_catalog.=) a.oid
                        AND m.roleid::pg_catalog.regrole::pg_catalog.text OPERATOR(pg_catalog.<>) 'convctx_app') AS member_of,
                    (SELECT pg_catalog.string_agg(m.member::pg_catalog.regrole::pg_catalog.text, ', ')
                       FROM pg_catalog.pg_auth_members m
                      WHERE m.roleid OPERATOR(pg_catalog.=) a.oid
                        AND m.member::pg_catalog.regrole::pg_catalog.text OPERATOR(pg_catalog.<>) 'convctx_admin') AS members
               FROM pg_catalog.pg_authid a
              WHERE a.rolname OPERATOR(pg_catalog.=) ANY ('{convctx_app,convctx_admin}'::pg_catalog.text[])
    LOOP
        IF r.attrs OPERATOR(pg_catalog.<>) '' THEN
            RAISE EXCEPTION 'role % exists already and has attributes %', r.rolname, r.attrs
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'convctx reuses an existing role of that name; it must be a NOLOGIN group role without special attributes.',
                      HINT = pg_catalog.format('ALTER ROLE %I NOSUPERUSER NOLOGIN NOCREATEROLE NOCREATEDB NOREPLICATION NOBYPASSRLS, or drop it, and try again.', r.rolname);
        END IF;
        IF r.member_of IS NOT NULL THEN
            RAISE EXCEPTION 'role % is a member of %', r.rolname, r.member_of
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'Every role granted convctx''s roles would receive the privileges of those roles too.',
                      HINT = pg_catalog.format('REVOKE those roles FROM %I, and try again.', r.rolname);
        END IF;
        IF r.members IS NOT NULL THEN
            RAISE WARNING 'role % exists already and has members: %', r.rolname, r.members
                USING DETAIL = 'They receive every privilege convctx grants to the role.';
        END IF;
    END LOOP;

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

-- Refused operations are logged in a transaction of their own by a
-- background worker. It acts as convctx_audit, never as a superuser: a
-- role that nobody can log in as or be a member of, that may insert audit
-- rows and nothing else, and that bypasses row-level security only so
-- that the tenant policies (which ask convctx.current_tenant()) do not
-- apply to that insert. One that exists already is taken only if it is
-- such a role.
DO $audit_role$
DECLARE
    r pg_catalog.pg_roles%ROWTYPE;
BEGIN
    SELECT * INTO r FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'convctx_audit';
    IF NOT FOUND THEN
        CREATE ROLE convctx_audit NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION BYPASSRLS;
        COMMENT ON ROLE convctx_audit IS
            'convctx: writes the audit rows of refused operations from a background worker; no login, no members, INSERT on convctx.audit_log only';
    ELSE
        IF r.rolcanlogin OR r.rolsuper OR r.rolcreatedb OR r.rolcreaterole OR r.rolreplication THEN
            RAISE EXCEPTION 'role convctx_audit exists and has privileges convctx does not expect'
                USING ERRCODE = '42501',
                      DETAIL = 'convctx writes audit rows as convctx_audit; it must be NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION.',
                      HINT = 'Drop the role or ALTER ROLE convctx_audit NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION, then try again.';
        END IF;
        IF EXISTS (SELECT FROM pg_catalog.pg_auth_members m
                    WHERE m.roleid OPERATOR(pg_catalog.=) r.oid OR m.member OPERATOR(pg_catalog.=) r.oid) THEN
            RAISE EXCEPTION 'role convctx_audit exists and has members or is a member of another role'
                USING ERRCODE = '42501',
                      DETAIL = 'Any member of convctx_audit could act with its row-level security bypass.',
                      HINT = 'Revoke every membership of convctx_audit, then try again.';
        END IF;
        IF EXISTS (SELECT FROM pg_catalog.pg_shdepend d
                    WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_authid'::pg_catalog.regclass
                      AND d.refobjid OPERATOR(pg_catalog.=) r.oid
                      AND d.deptype OPERATOR(pg_catalog.=) 'o') THEN
            RAISE EXCEPTION 'role convctx_audit exists and owns objects'
                USING ERRCODE = '42501',
                      DETAIL = 'A SECURITY DEFINER function owned by convctx_audit would run with its row-level security bypass.',
                      HINT = 'REASSIGN OWNED BY convctx_audit TO another role in every database, then try again.';
        END IF;
        IF NOT r.rolbypassrls THEN
            ALTER ROLE convctx_audit BYPASSRLS;
        END IF;
    END IF;
END
$audit_role$;

------------------------------------------------------------------------------
-- Tenancy
--
-- Every function acts for the tenant convctx.current_tenant() names.
-- Bindings name roles by name: a dump, a restore and logical replication
-- carry names, a row whose role does not exist binds nobody and breaks
-- nothing else, and a stale binding can never land on whatever role holds
-- an OID later. tenant_id NULL binds a role to every tenant.
------------------------------------------------------------------------------

-- PARALLEL RESTRICTED: with convctx.tenant_scope = transaction the answer
-- depends on what the leader's transaction set, which a worker cannot see.
CREATE FUNCTION convctx.current_tenant()
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_current_tenant'
LANGUAGE C STABLE PARALLEL RESTRICTED;

COMMENT ON FUNCTION convctx.current_tenant() IS
    'tenant the calling role acts for: its binding (convctx.tenant naming another tenant is an error); for superusers and roles bound to every tenant the setting convctx.tenant, else ''''; any other role: error 42501';

CREATE FUNCTION convctx.use_tenant(tenant text)
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_use_tenant'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.use_tenant(text) IS
    'act for tenant until the end of the current transaction (as SET LOCAL convctx.tenant) and return convctx.current_tenant(); only inside a transaction block (25P01), 42501 when the role may not act for it: the way to choose the tenant per request behind a pooler in transaction mode';

-- The column order is the one the update scripts leave (role_id of 0.2.0
-- dropped): the same table whichever way it was installed.
CREATE TABLE convctx.role_tenant (
    tenant_id  text COLLATE "C",
    role_name  text COLLATE "C" NOT NULL,
    bound_at   timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT role_tenant_pkey PRIMARY KEY (role_name),
    CONSTRAINT role_tenant_role_name_not_empty CHECK (role_name OPERATOR(pg_catalog.<>) '')
);

COMMENT ON TABLE convctx.role_tenant IS
    'roles bound to a tenant (or to every tenant): such a role, and every role that is a member of it, acts for that tenant; other non-superuser roles act for none';
COMMENT ON COLUMN convctx.role_tenant.role_name IS
    'the bound role, by name: a row whose role does not exist (dropped, renamed, missing where the dump was restored) binds nobody; see convctx.unresolved_bindings()';
COMMENT ON COLUMN convctx.role_tenant.tenant_id IS
    'the tenant the role acts for; NULL: every tenant, named per request by convctx.tenant';

SELECT pg_catalog.pg_extension_config_dump('convctx.role_tenant', '');

-- Every change, by whatever route, reaches the sessions that cached a
-- binding: the functions below, plain DML, COPY, TRUNCATE, and logical
-- replication (its apply worker fires row triggers only, and only ENABLE
-- ALWAYS or REPLICA ones).
CREATE FUNCTION convctx.role_tenant_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'convctx_role_tenant_changed'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.role_tenant_changed() IS
    'trigger on convctx.role_tenant: makes every session read the bindings again at its next transaction';

CREATE TRIGGER role_tenant_changed
    AFTER INSERT OR UPDATE OR DELETE ON convctx.role_tenant
    FOR EACH ROW EXECUTE FUNCTION convctx.role_tenant_changed();
CREATE TRIGGER role_tenant_truncated
    AFTER TRUNCATE ON convctx.role_tenant
    FOR EACH STATEMENT EXECUTE FUNCTION convctx.role_tenant_changed();
ALTER TABLE convctx.role_tenant ENABLE ALWAYS TRIGGER role_tenant_changed;
ALTER TABLE convctx.role_tenant ENABLE ALWAYS TRIGGER role_tenant_truncated;

-- The binding functions take the role's name (a regrole argument cannot
-- name a role that no longer exists, and an unbinding must reach it). The
-- C symbols keep the suffix of 0.3.0, which replaced the regrole forms.
CREATE FUNCTION convctx.bind_role_tenant(role text, tenant text)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_bind_role_tenant_0_3'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.bind_role_tenant(text, text) IS
    'bind a role (by name; and its members) to a tenant, replacing an earlier binding; '''' is the tenant of a single-tenant database; only superusers and roles bound to every tenant may call it; audited';

CREATE FUNCTION convctx.bind_role_all_tenants(role text)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_bind_role_all_tenants'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.bind_role_all_tenants(text) IS
    'bind a role (by name; and its members) to every tenant: it acts for the tenant convctx.tenant names (a service role behind a pooler, a platform administrator); only superusers and roles bound to every tenant may call it; audited';

CREATE FUNCTION convctx.unbind_role_tenant(role text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'convctx_unbind_role_tenant_0_3'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.unbind_role_tenant(text) IS
    'remove the binding (to a tenant or to every tenant) of a role, by name, also of a role that no longer exists; false when it had none; only superusers and roles bound to every tenant may call it; audited';

CREATE FUNCTION convctx.bindings()
RETURNS TABLE (role_name text, tenant_id text, all_tenants boolean, role_exists boolean,
               bound_at timestamptz)
AS 'MODULE_PATHNAME', 'convctx_bindings'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 10
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.bindings() IS
    'the role bindings (of the caller''s tenant; every binding for superusers and roles bound to every tenant), whether their role exists';

CREATE FUNCTION convctx.unresolved_bindings()
RETURNS TABLE (role_name text, tenant_id text, bound_at timestamptz)
AS 'MODULE_PATHNAME', 'convctx_unresolved_bindings'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 10
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.unresolved_bindings() IS
    'bindings whose role does not exist in this cluster (dropped, renamed, or missing where a dump was restored or a binding replicated): they bind nobody until the role exists under that name or the binding is removed';

------------------------------------------------------------------------------
-- Conversation context store
------------------------------------------------------------------------------

-- updated_bin: see convctx.session.activity_bin (updated_at changes with
-- every context_add; the expiry indexes hold its 10-minute bin).
CREATE TABLE convctx.conversation_context (
    tenant_id        text COLLATE "C" NOT NULL,
    conversation_id  text COLLATE "C" NOT NULL,
    context_json     jsonb       NOT NULL,
    user_id          text,
    created_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_bin      timestamptz
        GENERATED ALWAYS AS (pg_catalog.date_bin('00:10:00'::pg_catalog.interval, updated_at,
                                                 '2000-01-01 00:00:00+00'::pg_catalog.timestamptz)) STORED,
    CONSTRAINT conversation_context_pkey PRIMARY KEY (tenant_id, conversation_id),
    CONSTRAINT conversation_context_is_object
        CHECK (pg_catalog.jsonb_typeof(context_json) OPERATOR(pg_catalog.=) 'object')
);

CREATE INDEX conversation_context_expiry ON convctx.conversation_context (updated_bin);
CREATE INDEX conversation_context_expiry_tenant ON convctx.conversation_context (tenant_id, updated_bin);

COMMENT ON TABLE convctx.conversation_context IS
    'per-conversation context: the knowledge-graph node ids a conversation has referenced (never chat text)';
COMMENT ON COLUMN convctx.conversation_context.tenant_id IS
    'tenant that owns the conversation (convctx.current_tenant() of the writer)';
COMMENT ON COLUMN convctx.conversation_context.conversation_id IS
    'conversation id; the same value as session_id in the turn store';
COMMENT ON COLUMN convctx.conversation_context.context_json IS
    'context object {"activeNodeIds": [...], ...}; activeNodeIds runs from least to most recently referenced';
COMMENT ON COLUMN convctx.conversation_context.user_id IS
    'last user known to have written the context (auditing only, not part of the key)';
COMMENT ON COLUMN convctx.conversation_context.updated_bin IS
    'updated_at rounded down to 10 minutes: what the expiry indexes hold, so that most updates of updated_at stay HOT';

SELECT pg_catalog.pg_extension_config_dump('convctx.conversation_context', '');

CREATE FUNCTION convctx.context_merge(ctx jsonb, node_ids text[], max_nodes integer DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_context_merge'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.context_merge(jsonb, text[], integer) IS
    'merge node ids into a context, most recently referenced last, keeping at most max_nodes (default convctx.max_active_nodes); other keys unchanged';

CREATE FUNCTION convctx.context_load(conversation_id text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_context_load'
LANGUAGE C STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.context_load(text) IS
    'stored context of a conversation of the current tenant, or NULL when there is none';

CREATE FUNCTION convctx.context_save(conversation_id text, ctx jsonb, user_id text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_context_save'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.context_save(text, jsonb, text) IS
    'validate a context and store it as the full snapshot of a conversation of the current tenant';

CREATE FUNCTION convctx.context_add(conversation_id text, node_ids text[], user_id text DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_context_add'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.context_add(text, text[], text) IS
    'merge node ids into a conversation''s stored context in one statement (safe under concurrency) and return it';

-- Stored text is shown so that it cannot pose as prompt structure: line
-- breaks of one-line fields collapse to a space, continuation lines of
-- blocks are indented, other control characters become a space (here and
-- in the render functions below).
CREATE FUNCTION convctx.context_aspect(ctx jsonb, nodes jsonb DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_context_aspect'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.context_aspect(jsonb, jsonb) IS
    'system-prompt paragraph listing the active concepts of a context, described by node objects {id, prefLabel, name, jurisdiction, shortDescription}, one line each (line breaks in ids and fields collapse to a space); NULL when none are active';

------------------------------------------------------------------------------
-- Turn history
------------------------------------------------------------------------------

-- One row per session, updated by every start_turn and finalize_turn. The
-- next read of its page prunes the old version, walking every row of the
-- page: session pages are filled to 30%, so that walk is a few dozen rows,
-- not a hundred (about three times the space, small beside the turns).
--
-- Retention finds expired anonymous sessions through an index in the order
-- they expired. An index on last_activity_at would make every update
-- non-HOT (its value changes with every turn); the index is on a coarse
-- copy of it instead, the 10-minute bin it falls in: a generated column
-- that every writer of last_activity_at keeps right without naming it, and
-- whose value changes at most once per bin. A pass takes the bins before
-- the cutoff from the index and rechecks the exact last_activity_at.
--
-- finalize_turn counts an answer in the session row and, when the
-- session's summary covers the turn, in the summary too; it learns whether
-- it does from summary_through_turn_no, under the lock it already takes.
CREATE TABLE convctx.session (
    tenant_id                text COLLATE "C" NOT NULL,
    session_id               text COLLATE "C" NOT NULL,
    identity_id              text COLLATE "C",
    created_at               timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    last_activity_at         timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    last_turn_no             bigint      NOT NULL DEFAULT 0,
    live_turns               bigint      NOT NULL DEFAULT 0,
    live_answers             bigint      NOT NULL DEFAULT 0,
    summary_through_turn_no  bigint,
    redactions               bigint      NOT NULL DEFAULT 0,
    activity_bin             timestamptz
        GENERATED ALWAYS AS (pg_catalog.date_bin('00:10:00'::pg_catalog.interval, last_activity_at,
                                                 '2000-01-01 00:00:00+00'::pg_catalog.timestamptz)) STORED,
    title                    text,
    first_question           text,
    linked_later             boolean     NOT NULL DEFAULT false,
    CONSTRAINT session_pkey PRIMARY KEY (tenant_id, session_id)
) WITH (fillfactor = 30);

CREATE INDEX session_expiry ON convctx.session (activity_bin)
    WHERE identity_id IS NULL;
CREATE INDEX session_expiry_tenant ON convctx.session (tenant_id, activity_bin)
    WHERE identity_id IS NULL;

COMMENT ON TABLE convctx.session IS
    'one row per conversation session: its identity once linked, its last activity and the number of its newest turn';
COMMENT ON COLUMN convctx.session.identity_id IS
    'identity the session is linked to (mirrors convctx.session_link); NULL for an anonymous session, which is capped and expires';
COMMENT ON COLUMN convctx.session.last_activity_at IS
    'when the session last started a turn, was linked or had its context written; anonymous sessions expire convctx.session_ttl after it';
COMMENT ON COLUMN convctx.session.last_turn_no IS
    'turn_no of the session''s newest turn; new turns take the next number under this row''s lock';
COMMENT ON COLUMN convctx.session.live_turns IS
    'number of live (not redacted) current-version turns, kept up to date by every function that adds, redacts or deletes one';
COMMENT ON COLUMN convctx.session.live_answers IS
    'number of those turns that are finalized; live_turns + live_answers is the message count of the conversation';
COMMENT ON COLUMN convctx.session.summary_through_turn_no IS
    'through_turn_no of the session''s summary (convctx.session_summary), NULL when it has none; written with the summary under this row''s lock';
COMMENT ON COLUMN convctx.session.redactions IS
    'redaction generation: bumped by every redaction or erasure of the session, under this row''s lock; set_summary refuses a summary of turns read before a redaction of one it covers';
COMMENT ON COLUMN convctx.session.title IS
    'the title the app set (set_session_title); NULL: the first live question is shown';
COMMENT ON COLUMN convctx.session.first_question IS
    'the first 320 characters (after leading white space) of the question of the first live current-version turn, NULL when none: the default title, kept right by every function that adds, redacts or deletes a turn';
COMMENT ON COLUMN convctx.session.linked_later IS
    'whether the session was linked to its identity after it was created (convctx.session_link.linked_at after created_at)';
COMMENT ON COLUMN convctx.session.activity_bin IS
    'last_activity_at rounded down to 10 minutes: what the expiry indexes hold, so that most updates of last_activity_at stay HOT';

SELECT pg_catalog.pg_extension_config_dump('convctx.session', '');

CREATE TABLE convctx.session_link (
    tenant_id    text COLLATE "C" NOT NULL,
    session_id   text COLLATE "C" NOT NULL,
    identity_id  text COLLATE "C" NOT NULL,
    linked_at    timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT session_link_pkey PRIMARY KEY (tenant_id, session_id)
);

CREATE INDEX session_link_identity ON convctx.session_link (tenant_id, identity_id);

COMMENT ON TABLE convctx.session_link IS
    'session to identity links: one identity per session, never changed once made';

SELECT pg_catalog.pg_extension_config_dump('convctx.session_link', '');

-- A turn is written twice: its question at start_turn, then its answer,
-- usually larger, at finalize_turn. Turn pages are filled only to 70%, so
-- that the answer usually fits on the page of its question: the update is
-- then HOT and adds no entry to the turn's indexes.
CREATE TABLE convctx.turn (
    tenant_id                      text COLLATE "C" NOT NULL,
    session_id                     text COLLATE "C" NOT NULL,
    turn_id                        uuid        NOT NULL,
    turn_no                        bigint      NOT NULL,
    request_id                     text COLLATE "C" NOT NULL,
    identity_id                    text COLLATE "C",
    created_at                     timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    finalized_at                   timestamptz,
    pipeline_name                  text,
    consultant                     text,
    repository                     text,
    translate_chat                 boolean     NOT NULL DEFAULT false,
    question_neutral               text,
    answer_neutral                 text,
    question_translated            text,
    answer_translated              text,
    answer_translated_is_fallback  boolean,
    metadata                       jsonb,
    record_version                 integer     NOT NULL DEFAULT 1,
    replaced_by_turn_id            uuid,
    deleted_at                     timestamptz,
    redaction                      bigint,
    CONSTRAINT turn_pkey PRIMARY KEY (tenant_id, session_id, turn_id),
    CONSTRAINT turn_live_has_question
        CHECK (deleted_at IS NOT NULL OR question_neutral IS NOT NULL),
    CONSTRAINT turn_finalized_has_answer
        CHECK (deleted_at IS NOT NULL OR finalized_at IS NULL OR answer_neutral IS NOT NULL)
) WITH (fillfactor = 70);

-- Idempotency: one current version per (session, request).
CREATE UNIQUE INDEX turn_request_current ON convctx.turn (tenant_id, session_id, request_id)
    WHERE replaced_by_turn_id IS NULL;
-- Chronology: recent reads walk it backwards, the anonymous cap deletes a prefix of it.
CREATE INDEX turn_chronology ON convctx.turn (tenant_id, session_id, turn_no);

COMMENT ON TABLE convctx.turn IS
    'one row per chat request (and per correction of its answer): question at start, answer at finalize';
COMMENT ON COLUMN convctx.turn.turn_no IS
    'position of the turn in its session (1, 2, ...): exact chronology; all versions of a turn share it';
COMMENT ON COLUMN convctx.turn.request_id IS
    'idempotency key of the chat request: unique per session among current versions';
COMMENT ON COLUMN convctx.turn.metadata IS
    'allowlisted request metadata (convctx.metadata_allowlist); a raw ip is stored only as ip_hash';
COMMENT ON COLUMN convctx.turn.record_version IS
    'version of the turn: 1 at start, +1 for each replace_turn correction';
COMMENT ON COLUMN convctx.turn.replaced_by_turn_id IS
    'for an old version, the turn_id of the version that replaced it; NULL for the current version';
COMMENT ON COLUMN convctx.turn.deleted_at IS
    'set when the turn was redacted: a tombstone keeps ids and timestamps, no text';
COMMENT ON COLUMN convctx.turn.redaction IS
    'for a tombstone, the redaction generation of its session that made it (NULL for tombstones made before 0.3.0 and for live turns)';

SELECT pg_catalog.pg_extension_config_dump('convctx.turn', '');

-- audit_id is a random UUID: unique on every server, also after a failover
-- to a logical replica (which carries no sequence). Readers order by
-- logged_at, then audit_id. The session user stays in role_name; the role
-- it acted as (SET ROLE), when that is another one, in acting_role.
CREATE TABLE convctx.audit_log (
    tenant_id    text COLLATE "C" NOT NULL,
    audit_id     uuid        NOT NULL DEFAULT pg_catalog.gen_random_uuid(),
    logged_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    role_name    text        NOT NULL DEFAULT CURRENT_USER,
    action       text        NOT NULL,
    session_id   text,
    identity_id  text COLLATE "C",
    details      jsonb       NOT NULL DEFAULT '{}',
    acting_role  text,
    CONSTRAINT audit_log_pkey PRIMARY KEY (tenant_id, audit_id)
);

-- The audit log's own retention (convctx.audit_retention).
CREATE INDEX audit_log_logged ON convctx.audit_log (logged_at);
CREATE INDEX audit_log_logged_tenant ON convctx.audit_log (tenant_id, logged_at);
-- The erasures, by stand-in: import_records refuses what an erasure deleted.
CREATE INDEX audit_log_erasures ON convctx.audit_log (tenant_id, identity_id)
    WHERE action = 'erase_identity';

COMMENT ON TABLE convctx.audit_log IS
    'security and administration events (refused links, redactions, erasures, purges): ids and counts, never content';
COMMENT ON COLUMN convctx.audit_log.audit_id IS
    'random key (gen_random_uuid()), unique on every server, also after a failover to a logical replica; rows from before 0.4.0 keep their old number as 0000...n; administrators read the log through convctx.audit, without it';
COMMENT ON COLUMN convctx.audit_log.role_name IS
    'the session user (login role) that caused the event';
COMMENT ON COLUMN convctx.audit_log.acting_role IS
    'the role the session acted as (SET ROLE) when it was not the session user; NULL otherwise';

SELECT pg_catalog.pg_extension_config_dump('convctx.audit_log', '');

CREATE FUNCTION convctx.start_turn(
    session_id text,
    request_id text,
    question_neutral text,
    identity_id text DEFAULT NULL,
    question_translated text DEFAULT NULL,
    translate_chat boolean DEFAULT false,
    meta jsonb DEFAULT NULL,
    pipeline_name text DEFAULT NULL,
    consultant text DEFAULT NULL,
    repository text DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME', 'convctx_start_turn'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.start_turn(text, text, text, text, text, boolean, jsonb, text, text, text) IS
    'start the turn of a chat request; idempotent on (session_id, request_id): a repeat returns the same turn_id and changes nothing';

CREATE FUNCTION convctx.finalize_turn(
    session_id text,
    turn_id uuid,
    answer_neutral text,
    answer_translated text DEFAULT NULL,
    answer_translated_is_fallback boolean DEFAULT NULL,
    meta jsonb DEFAULT NULL,
    tenant text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_finalize_turn'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.finalize_turn(text, uuid, text, text, boolean, jsonb, text) IS
    'store the answer of a started turn; repeating it with the same answer changes nothing, a different answer is refused (use replace_turn); tenant, when given, is the tenant of this call only, as convctx.tenant set for the call';

CREATE FUNCTION convctx.recent_turns(session_id text, turn_limit integer DEFAULT 10)
RETURNS TABLE (turn_id uuid, request_id text, created_at timestamptz, finalized_at timestamptz,
               question_neutral text, answer_neutral text, question_translated text,
               answer_translated text, metadata jsonb)
AS 'MODULE_PATHNAME', 'convctx_recent_turns'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 10
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.recent_turns(text, integer) IS
    'the last turn_limit finalized, non-redacted, current-version turns of a session, oldest first';

CREATE FUNCTION convctx.recent_turns_json(session_id text, turn_limit integer DEFAULT 10)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_recent_turns_json'
LANGUAGE C STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.recent_turns_json(text, integer) IS
    'recent_turns as a JSON array of {"question_neutral", "answer_neutral"} objects, oldest first, for prompt history';

CREATE FUNCTION convctx.begin_turn(
    session_id text,
    request_id text,
    question_neutral text,
    turn_limit integer DEFAULT 10,
    identity_id text DEFAULT NULL,
    tenant text DEFAULT NULL,
    meta jsonb DEFAULT NULL,
    question_translated text DEFAULT NULL,
    translate_chat boolean DEFAULT false,
    pipeline_name text DEFAULT NULL,
    consultant text DEFAULT NULL,
    repository text DEFAULT NULL,
    OUT turn_id uuid,
    OUT repeated boolean,
    OUT answer_neutral text,
    OUT answer_translated text,
    OUT history jsonb,
    OUT context jsonb)
RETURNS record
AS 'MODULE_PATHNAME', 'convctx_begin_turn'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.begin_turn(text, text, text, integer, text, text, jsonb, text, boolean, text, text, text) IS
    'begin a chat request in one call: start its turn as start_turn does (idempotent on (session_id, request_id)) and return turn_id, repeated (the request had its turn already), the stored answer of a repeated request once finalized, history (the last turn_limit finalized, non-redacted pairs before this turn, oldest first, as recent_turns_json) and context (context_load); tenant, when given, is the tenant of this call only, as convctx.tenant set for the call';

CREATE FUNCTION convctx.link_session(identity_id text, session_id text, backfill boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_link_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.link_session(text, text, boolean) IS
    'link a session to an identity (idempotent); linking to a different identity is refused (SQLSTATE CV001) and audited; backfill gives the session''s turns the identity';

CREATE FUNCTION convctx.replace_turn(
    session_id text,
    turn_id uuid,
    answer_neutral text,
    answer_translated text DEFAULT NULL,
    meta jsonb DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME', 'convctx_replace_turn'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.replace_turn(text, uuid, text, text, jsonb) IS
    'correct the answer of a finalized turn: a new current version (record_version + 1) whose turn_id is returned; the old version is kept';

------------------------------------------------------------------------------
-- Lifecycle: redaction, erasure, retention
------------------------------------------------------------------------------

-- Retention of old turns walks these indexes from their oldest end: one for
-- a pass over every tenant, one (led by tenant_id) for a role bound to one
-- tenant. created_at never changes.
CREATE INDEX turn_created ON convctx.turn (created_at);
CREATE INDEX turn_created_tenant ON convctx.turn (tenant_id, created_at);

CREATE FUNCTION convctx.redact_turn(session_id text, turn_id uuid)
RETURNS boolean
AS 'MODULE_PATHNAME', 'convctx_redact_turn'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.redact_turn(text, uuid) IS
    'turn a turn and all its versions into tombstones (ids and timestamps kept, text and metadata cleared) and remove the session''s title (set_session_title), which may quote it; false when already redacted';

CREATE FUNCTION convctx.redact_session(session_id text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'convctx_redact_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.redact_session(text) IS
    'redact every live turn of a session; returns how many turns were redacted';

CREATE FUNCTION convctx.erase_identity(identity_id text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'convctx_erase_identity'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.erase_identity(text) IS
    'right to erasure: redact every turn of every session linked to the identity, delete their prompt data and contexts (and contexts saved with it as user_id), and replace the identity wherever it is stored (sessions, links, tombstones, audit log) by ''erased:'' and the HMAC-SHA256 under convctx.identity_hash_key of the tenant, a zero byte and the identity (no key: ''erased''); returns how many turns';

CREATE FUNCTION convctx.retention_settings(
    OUT session_ttl interval, OUT turn_retention interval, OUT context_ttl interval,
    OUT audit_retention interval)
AS 'MODULE_PATHNAME', 'convctx_retention_settings'
LANGUAGE C STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.retention_settings() IS
    'the retention settings in force as intervals (NULL = kept forever): convctx.session_ttl, convctx.turn_retention, convctx.context_ttl, convctx.audit_retention';

CREATE FUNCTION convctx.purge(batch_size integer DEFAULT 10000)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_purge'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.purge(integer) IS
    'one retention pass, at most batch_size rows of each kind, over every tenant (over its own tenant for a bound role); returns the counts per kind and logs them when it deleted something';

CREATE PROCEDURE convctx.purge_all(batch_size integer DEFAULT 10000)
AS 'MODULE_PATHNAME', 'convctx_purge_all'
LANGUAGE C;

COMMENT ON PROCEDURE convctx.purge_all(integer) IS
    'repeat purge with a COMMIT after each pass until nothing is left, pausing convctx.purge_pause between passes (inside a transaction block: one transaction, no pause)';

CREATE FUNCTION convctx.schedule_retention(schedule text DEFAULT '*/10 * * * *')
RETURNS bigint
AS 'MODULE_PATHNAME', 'convctx_schedule_retention'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.schedule_retention(text) IS
    'schedule CALL convctx.purge_all() with pg_cron as job convctx-retention (replacing an earlier schedule); returns the job id';

CREATE FUNCTION convctx.unschedule_retention()
RETURNS boolean
AS 'MODULE_PATHNAME', 'convctx_unschedule_retention'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION convctx.unschedule_retention() IS
    'remove the convctx-retention pg_cron job of this database and role; false when there was none';

------------------------------------------------------------------------------
-- Administration
--
-- No role is granted the shared tables: with SELECT, row-level security
-- hides other tenants' rows but not their planner estimates, ctids or
-- sequence values. Administrators read through these functions
-- (src/lifecycle/admin.c), which decide the tenant from the role that called them,
-- read as the extension's owner and return the rows of the tenant the
-- caller acts for (every tenant for superusers and roles bound to every
-- tenant). The views over them plan as a Function Scan with a fixed row
-- estimate, whatever the tables hold.
------------------------------------------------------------------------------

CREATE FUNCTION convctx.admin_sessions(only_session text DEFAULT NULL)
RETURNS TABLE (tenant text, session_id text, identity_id text, turns bigint, finalized bigint,
               redacted bigint, first_at timestamptz, last_at timestamptz, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'convctx_admin_sessions'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 100
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.admin_sessions(text) IS
    'sessions of the tenant the caller acts for (every tenant for superusers and roles bound to every tenant), or only the one named: identity, turns (current versions), finalized and redacted ones, first and last activity, expiry of anonymous sessions';

CREATE FUNCTION convctx.admin_stats()
RETURNS TABLE (tenant text, sessions bigint, anonymous_sessions bigint, linked_sessions bigint,
               turns bigint, old_versions bigint, tombstones bigint, contexts bigint,
               table_bytes numeric, index_bytes numeric)
AS 'MODULE_PATHNAME', 'convctx_admin_stats'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 10
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.admin_stats() IS
    'per tenant the caller acts for (every tenant for superusers and roles bound to every tenant): sessions (anonymous, linked), turns, old versions, tombstones, contexts; table_bytes and index_bytes (all convctx tables together) only for callers that see every tenant, else NULL';

CREATE FUNCTION convctx.admin_audit()
RETURNS TABLE (tenant_id text, logged_at timestamptz, role_name text, acting_role text,
               action text, session_id text, identity_id text, details jsonb)
AS 'MODULE_PATHNAME', 'convctx_admin_audit'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 100
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.admin_audit() IS
    'the audit log of the tenant the caller acts for (every tenant for superusers and roles bound to every tenant), oldest first (by logged_at), without audit_id';

CREATE FUNCTION convctx.admin_session_turns(session_id text)
RETURNS TABLE (turn_no bigint, record_version integer, turn_id uuid, request_id text,
               identity_id text, created_at timestamptz, finalized_at timestamptz,
               deleted_at timestamptz, replaced_by_turn_id uuid, pipeline_name text,
               consultant text, repository text, translate_chat boolean,
               question_neutral text, answer_neutral text, question_translated text,
               answer_translated text, answer_translated_is_fallback boolean, metadata jsonb)
AS 'MODULE_PATHNAME', 'convctx_admin_session_turns'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 20
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.admin_session_turns(text) IS
    'support read of a session of the tenant the caller acts for (convctx.current_tenant()): every turn with its old versions and tombstones, in order';

CREATE FUNCTION convctx.export_records(session_id text DEFAULT NULL, identity_id text DEFAULT NULL,
                                       since timestamptz DEFAULT NULL, until timestamptz DEFAULT NULL)
RETURNS TABLE (record_type text, line text)
AS 'MODULE_PATHNAME', 'convctx_export_records'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 1000
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.export_records(text, text, timestamptz, timestamptz) IS
    'every stored row of the conversations of the tenant the caller acts for, as convctx.jsonl records (one JSON object per line, grouped by conversation): all of them, one session, those linked to an identity (with the contexts saved under it), or those active since / created before a time; what the convctx export tool writes';

CREATE FUNCTION convctx.export_messages(session_id text DEFAULT NULL, identity_id text DEFAULT NULL,
                                        since timestamptz DEFAULT NULL, until timestamptz DEFAULT NULL)
RETURNS TABLE (record_type text, line text)
AS 'MODULE_PATHNAME', 'convctx_export_messages'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 100
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.export_messages(text, text, timestamptz, timestamptz) IS
    'the conversations export_records would choose, one JSON line each: session_id, identity_id, created_at and the current live turns as user and assistant messages (role, content, created_at, id); what convctx export --format=messages writes';

CREATE VIEW convctx.sessions WITH (security_invoker = true) AS
SELECT * FROM convctx.admin_sessions();
CREATE VIEW convctx.stats WITH (security_invoker = true) AS
SELECT * FROM convctx.admin_stats();
CREATE VIEW convctx.audit WITH (security_invoker = true) AS
SELECT * FROM convctx.admin_audit();

COMMENT ON VIEW convctx.sessions IS
    'convctx.admin_sessions(): sessions of the tenant the querying role acts for (every tenant for superusers and roles bound to every tenant)';
COMMENT ON VIEW convctx.stats IS
    'convctx.admin_stats(): per tenant the querying role acts for, sessions, turns, old versions, tombstones, contexts; sizes for callers that see every tenant';
COMMENT ON VIEW convctx.audit IS
    'convctx.admin_audit(): the audit log of the tenant the querying role acts for, oldest first, without audit_id';

------------------------------------------------------------------------------
-- Prompt assembly
------------------------------------------------------------------------------

-- Summaries, retrievals and clarifications belong to a session without a
-- foreign key: a cascade ran three queries per session a purge deleted.
-- Their writers lock the session row and check the turn they name; the
-- trigger session_deleted below deletes them with their session.
CREATE TABLE convctx.session_summary (
    tenant_id        text COLLATE "C" NOT NULL,
    session_id       text COLLATE "C" NOT NULL,
    summary          text        NOT NULL,
    through_turn_no  bigint      NOT NULL,
    covered_messages bigint      NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT session_summary_pkey PRIMARY KEY (tenant_id, session_id)
);

COMMENT ON TABLE convctx.session_summary IS
    'the app''s LLM-written summary of a session''s turns up to through_turn_no; dropped when a turn it covers is redacted';
COMMENT ON COLUMN convctx.session_summary.covered_messages IS
    'messages of live turns up to through_turn_no, kept up to date so that needs_summary never counts turns';

SELECT pg_catalog.pg_extension_config_dump('convctx.session_summary', '');

CREATE TABLE convctx.turn_retrieval (
    tenant_id    text COLLATE "C" NOT NULL,
    session_id   text COLLATE "C" NOT NULL,
    turn_no      bigint      NOT NULL,
    chunks       jsonb       NOT NULL,
    citations    jsonb       NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT turn_retrieval_pkey PRIMARY KEY (tenant_id, session_id, turn_no)
);

COMMENT ON TABLE convctx.turn_retrieval IS
    'chunks retrieved for a turn and the citations its answer used, each stored in full so history never goes stale';

SELECT pg_catalog.pg_extension_config_dump('convctx.turn_retrieval', '');

CREATE TABLE convctx.clarification (
    tenant_id         text COLLATE "C" NOT NULL,
    session_id        text COLLATE "C" NOT NULL,
    turn_no           bigint      NOT NULL,
    questions         jsonb       NOT NULL,
    inferred_context  jsonb       NOT NULL,
    recorded_at       timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT clarification_pkey PRIMARY KEY (tenant_id, session_id, turn_no)
);

COMMENT ON TABLE convctx.clarification IS
    'clarification questions asked at a turn and the model''s inferred context, to rebuild the full context of the answer turn';

SELECT pg_catalog.pg_extension_config_dump('convctx.clarification', '');

-- What belongs to a session goes with it, by whatever route it is deleted
-- (a purge pass, a superuser's DELETE): one statement for all the rows a
-- DELETE removed; after TRUNCATE of convctx.session, every row of those
-- tables (name them in the TRUNCATE to truncate them instead), so that no
-- row is left for a later session with the same id. A logical
-- replication subscriber does not fire them; it receives the publisher's
-- deletes of those rows.
CREATE FUNCTION convctx.session_deleted()
RETURNS trigger
AS 'MODULE_PATHNAME', 'convctx_session_deleted'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.session_deleted() IS
    'trigger on convctx.session: deletes the summaries, retrievals and clarifications of the sessions a DELETE removed, all of them after TRUNCATE';

CREATE TRIGGER session_deleted
    AFTER DELETE ON convctx.session
    REFERENCING OLD TABLE AS deleted_sessions
    FOR EACH STATEMENT EXECUTE FUNCTION convctx.session_deleted();
CREATE TRIGGER session_truncated
    AFTER TRUNCATE ON convctx.session
    FOR EACH STATEMENT EXECUTE FUNCTION convctx.session_deleted();

-- The phrases tenants add to is_followup. The built-in phrases are not
-- rows: they are the view below, which no publication carries and pg_dump
-- leaves to CREATE EXTENSION, so a subscriber's initial copy and a restore
-- never meet rows the install made. Column builtin is always false: a
-- subscriber applies a publisher's rows only when every column the
-- publisher sends exists on it, and a server or dump of 0.3.0 sends it.
CREATE TABLE convctx.followup_phrase (
    tenant_id  text COLLATE "C" NOT NULL,
    kind       text    NOT NULL,
    phrase     text    NOT NULL,
    builtin    boolean NOT NULL DEFAULT false,
    CONSTRAINT followup_phrase_pkey PRIMARY KEY (tenant_id, kind, phrase),
    CONSTRAINT followup_phrase_kind
        CHECK (kind OPERATOR(pg_catalog.=) ANY (ARRAY['clarification'::pg_catalog.text, 'fresh_keyword'::pg_catalog.text]))
);

COMMENT ON TABLE convctx.followup_phrase IS
    'phrases tenants add to is_followup (beside convctx.builtin_followup_phrase): clarification phrases (reuse the previous context) and fresh_keyword (always retrieve); tenant '''' applies to every tenant';
COMMENT ON COLUMN convctx.followup_phrase.builtin IS
    'no longer used, always false (the built-in phrases are the view convctx.builtin_followup_phrase); kept so that rows from a 0.3.0 server or dump still fit';

-- The filter is the one of earlier versions, whose install inserted the
-- built-in phrases as rows; no row matches it now.
SELECT pg_catalog.pg_extension_config_dump('convctx.followup_phrase', 'WHERE NOT builtin');

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

CREATE FUNCTION convctx.conversation_state(session_id text, message_window integer DEFAULT 10)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_conversation_state'
LANGUAGE C STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.conversation_state(text, integer) IS
    'the conversation state for a planner prompt: message count, first message flag, recent messages, referenced entities, summary and whether a new one is needed';

-- A summary made before a redaction of a turn it covers is refused: every
-- redaction and erasure bumps the session's generation (session.redactions)
-- under its row lock and stamps its tombstones with it; turns_to_summarize
-- hands the generation out, set_summary takes it back. The C symbols keep
-- the suffix of 0.3.0, which introduced these forms.
CREATE FUNCTION convctx.set_summary(session_id text, summary text, through_turn uuid, redactions bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_set_summary_0_3'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.set_summary(text, text, uuid, bigint) IS
    'store the app''s summary of every turn of a session up to and including through_turn, replacing an older one; redactions is the value turns_to_summarize returned with the turns summarized: a summary whose input predates a redaction of a turn it covers, or through a redacted turn, is refused (55000)';

CREATE FUNCTION convctx.turns_to_summarize(session_id text, message_window integer DEFAULT 10,
                                           max_turns integer DEFAULT 100)
RETURNS TABLE (turn_id uuid, created_at timestamptz, question_neutral text, answer_neutral text,
               redactions bigint, previous_summary text)
AS 'MODULE_PATHNAME', 'convctx_turns_to_summarize_0_3'
LANGUAGE C STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.turns_to_summarize(text, integer, integer) IS
    'the first max_turns live turns older than the message window and not covered by the stored summary, oldest first: what to feed the summarizer, with the summary they continue (previous_summary) and the redaction generation to pass to set_summary';

CREATE FUNCTION convctx.render_conversation_state(state jsonb)
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_render_conversation_state'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.render_conversation_state(jsonb) IS
    'planner context text of a conversation state: summary, the last 5 messages (roles user and assistant only) cut at 200 characters, first message note, up to 10 entities; line breaks in stored text collapse to a space';

CREATE FUNCTION convctx.record_retrieval(session_id text, turn_id uuid, chunks jsonb, citations jsonb DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_record_retrieval'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.record_retrieval(text, uuid, jsonb, jsonb) IS
    'store the chunks retrieved for a turn and the citations its answer used ({"id"} references resolved to full chunks); replaces an earlier record';

CREATE FUNCTION convctx.context_history(session_id text, turns integer DEFAULT 5, current_chunks jsonb DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_context_history'
LANGUAGE C STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.context_history(text, integer, jsonb) IS
    'unified citation context: all chunks of the previous turn, cited chunks of older ones, then current chunks, indexed 1..n, each chunk id once';

CREATE FUNCTION convctx.render_context_history(history jsonb, labels jsonb DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_render_context_history'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.render_context_history(jsonb, jsonb) IS
    'text form of context_history: section headers (overridable through labels {"immediate", "history", "current"}) and [k] source - title, Title:, Text: per chunk; line breaks in labels, sources, titles and ids collapse to a space, continuation lines of a text are indented by two spaces';

CREATE FUNCTION convctx.is_followup(query text, session_id text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'convctx_is_followup'
LANGUAGE C STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.is_followup(text, text) IS
    'context decision: true means reuse the previous context and skip retrieval (short query or clarification phrase, no fresh-retrieval keyword)';

CREATE FUNCTION convctx.record_clarification(session_id text, turn_id uuid, questions jsonb, inferred_context jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_record_clarification'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.record_clarification(text, uuid, jsonb, jsonb) IS
    'store the clarification questions asked at a turn and the model''s inferred context; replaces an earlier record';

CREATE FUNCTION convctx.clarification_context(session_id text, turn_id uuid, answers jsonb DEFAULT '{}')
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_clarification_context'
LANGUAGE C STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.clarification_context(text, uuid, jsonb) IS
    'rebuild {"originalDescription", "questionsAsked", "inferredContext", "answers"} from a stored turn and its clarification';

CREATE FUNCTION convctx.render_clarification(ctx jsonb, instruction text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'convctx_render_clarification'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION convctx.render_clarification(jsonb, text) IS
    'full-context prompt of a clarification turn: original issue (indented by two spaces), questions asked, the user''s clarifications, previous analysis, then the instruction; line breaks in questions, answers and the analysis collapse to a space';

------------------------------------------------------------------------------
-- Row-level security: whoever is granted a table sees and changes only the
-- rows of the tenant it acts for. The functions act as the extension's
-- owner, which is not subject to it; they filter by tenant themselves.
-- convctx.role_tenant has no policy: whoever is granted it anyway sees no
-- row of it.
------------------------------------------------------------------------------

ALTER TABLE convctx.role_tenant ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.conversation_context ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.session ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.session_link ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.turn ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.audit_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.session_summary ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.turn_retrieval ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.clarification ENABLE ROW LEVEL SECURITY;
ALTER TABLE convctx.followup_phrase ENABLE ROW LEVEL SECURITY;

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
COMMENT ON POLICY tenant_isolation ON convctx.followup_phrase IS 'rows of the tenant the role acts for';
COMMENT ON POLICY shared_phrases ON convctx.followup_phrase IS
    'the shared phrases (tenant '''') are readable by every tenant';

------------------------------------------------------------------------------
-- Privileges: nothing for PUBLIC; convctx_app the app-facing functions;
-- convctx_admin (a member of convctx_app) administration and the views over
-- it; convctx_audit inserts audit rows. No role reads or writes the tables
-- directly.
------------------------------------------------------------------------------

REVOKE ALL ON ALL ROUTINES IN SCHEMA convctx FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA convctx FROM PUBLIC;
REVOKE ALL ON SCHEMA convctx FROM PUBLIC;

GRANT USAGE ON SCHEMA convctx TO convctx_app, convctx_admin, convctx_audit;

GRANT EXECUTE ON FUNCTION
    convctx.current_tenant(),
    convctx.use_tenant(text),
    convctx.context_merge(jsonb, text[], integer),
    convctx.context_load(text),
    convctx.context_save(text, jsonb, text),
    convctx.context_add(text, text[], text),
    convctx.context_aspect(jsonb, jsonb),
    convctx.start_turn(text, text, text, text, text, boolean, jsonb, text, text, text),
    convctx.finalize_turn(text, uuid, text, text, boolean, jsonb, text),
    convctx.begin_turn(text, text, text, integer, text, text, jsonb, text, boolean, text, text, text),
    convctx.recent_turns(text, integer),
    convctx.recent_turns_json(text, integer),
    convctx.link_session(text, text, boolean),
    convctx.replace_turn(text, uuid, text, text, jsonb),
    convctx.conversation_state(text, integer),
    convctx.set_summary(text, text, uuid, bigint),
    convctx.turns_to_summarize(text, integer, integer),
    convctx.render_conversation_state(jsonb),
    convctx.record_retrieval(text, uuid, jsonb, jsonb),
    convctx.context_history(text, integer, jsonb),
    convctx.render_context_history(jsonb, jsonb),
    convctx.is_followup(text, text),
    convctx.record_clarification(text, uuid, jsonb, jsonb),
    convctx.clarification_context(text, uuid, jsonb),
    convctx.render_clarification(jsonb, text)
TO convctx_app;

-- role_tenant_changed is a trigger function: nobody calls it.
GRANT EXECUTE ON FUNCTION
    convctx.redact_turn(text, uuid),
    convctx.redact_session(text),
    convctx.erase_identity(text),
    convctx.retention_settings(),
    convctx.purge(integer),
    convctx.schedule_retention(text),
    convctx.unschedule_retention(),
    convctx.bind_role_tenant(text, text),
    convctx.bind_role_all_tenants(text),
    convctx.unbind_role_tenant(text),
    convctx.admin_sessions(text),
    convctx.admin_stats(),
    convctx.admin_audit(),
    convctx.admin_session_turns(text),
    convctx.export_records(text, text, timestamptz, timestamptz),
    convctx.export_messages(text, text, timestamptz, timestamptz),
    convctx.bindings(),
    convctx.unresolved_bindings()
TO convctx_admin;
GRANT EXECUTE ON PROCEDURE convctx.purge_all(integer) TO convctx_admin;

GRANT SELECT ON convctx.sessions, convctx.stats, convctx.audit TO convctx_admin;

GRANT INSERT ON convctx.audit_log TO convctx_audit;

------------------------------------------------------------------------------
-- Import: convctx.jsonl records written with their own ids and timestamps
------------------------------------------------------------------------------

CREATE FUNCTION convctx.import_records(records text[], on_conflict text DEFAULT 'skip',
                                       allow_anonymous boolean DEFAULT false,
                                       as_identity text DEFAULT NULL, identity_map jsonb DEFAULT NULL)
RETURNS TABLE (record_type text, imported bigint, skipped bigint, skipped_why jsonb)
AS 'MODULE_PATHNAME', 'convctx_import_records'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 6
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.import_records(text[], text, boolean, text, jsonb) IS
    'write convctx.jsonl records (session groups: a session record, then its turns, retrievals, clarifications, summary and context; or a context alone) into the tenant the caller acts for, with their ids and timestamps, under the rules of the API; derived counts are recomputed and checked; an existing session is merged (on_conflict ''skip''): what the file has and the database lacks is added, what both have is skipped, a conflict refused with 23505; its title is taken only where the session has none here and no redaction here could have removed it (a title of its own here is kept), a link it lacks with the file''s linked_at, and its session record counts as imported when any of it is taken (title, link, later last activity); or refused whole (''error''); one of another identity refused with CV001 and audited, one erased here with 55000; a context that erase_identity deleted (of an erased session, or with a key of an erased user_id) refused with 55000; anonymous sessions the next purge would delete are refused unless allow_anonymous, or given as_identity; identity_map renames identities; returns the records imported and skipped per type, with why each was skipped; what convctx import sends';

REVOKE ALL ON FUNCTION convctx.import_records(text[], text, boolean, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.import_records(text[], text, boolean, text, jsonb) TO convctx_admin;

------------------------------------------------------------------------------
-- Conversation browser: an identity's conversations, titles, paging, replay
------------------------------------------------------------------------------

-- The list of an identity's conversations, newest activity first, walks
-- this index; activity_bin moves at most once in ten minutes, so the
-- updates that count activity stay HOT.
CREATE INDEX session_identity_activity ON convctx.session (tenant_id, identity_id, activity_bin DESC)
    WHERE identity_id IS NOT NULL;

CREATE FUNCTION convctx.list_conversations(identity_id text, cursor text DEFAULT NULL,
                                           page_size integer DEFAULT 20)
RETURNS TABLE (session_id text, title text, title_is_default boolean, created_at timestamptz,
               last_activity_at timestamptz, live_turns bigint, linked_later boolean, cursor text)
AS 'MODULE_PATHNAME', 'convctx_list_conversations'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 20
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.list_conversations(text, text, integer) IS
    'the conversations of the current tenant linked to identity_id, newest activity first, page_size (at most 1000) at a time: session_id, title (set_session_title''s, else the first live question, title_is_default), created_at, last_activity_at, live_turns, linked_later (anonymous first, linked afterwards), and the cursor to pass for the next page; keyset paging on index session_identity_activity';

CREATE FUNCTION convctx.set_session_title(session_id text, title text)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_set_session_title'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.set_session_title(text, text) IS
    'set the title list_conversations shows for a session (at most 1024 bytes); NULL gives it back its default, the first live question; P0002 when the session does not exist; redact_turn, redact_session and erase_identity remove it, as it may quote a redacted turn';

CREATE FUNCTION convctx.conversation_turns(session_id text, after_turn_no bigint DEFAULT NULL,
                                           before_turn_no bigint DEFAULT NULL, page_size integer DEFAULT 20,
                                           include_versions boolean DEFAULT false)
RETURNS TABLE (turn_no bigint, turn_id uuid, request_id text, record_version integer, is_current boolean,
               question text, answer text, created_at timestamptz, finalized_at timestamptz,
               redacted boolean, redacted_at timestamptz)
AS 'MODULE_PATHNAME', 'convctx_conversation_turns'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 20
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.conversation_turns(text, bigint, bigint, integer, boolean) IS
    'a page of a session''s turns, oldest first: page_size turns after after_turn_no, or before before_turn_no, or (neither) the newest; current versions, with include_versions every version of a corrected answer too; redacted turns as tombstones without text; keyset paging on index turn_chronology, the same cost at any depth';

CREATE FUNCTION convctx.replay_conversation(session_id text, max_bytes integer DEFAULT 16777216)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'convctx_replay_conversation'
LANGUAGE C STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.replay_conversation(text, integer) IS
    'a whole conversation as the JSON a chat app renders: session_id, identity_id, title, times, and its turns in order with question, answer, times, redacted tombstones, corrections (earlier answers) and citations; NULL when the session does not exist; 54000 when it would be larger than max_bytes (16 MB by default)';

REVOKE ALL ON FUNCTION convctx.list_conversations(text, text, integer),
    convctx.set_session_title(text, text),
    convctx.conversation_turns(text, bigint, bigint, integer, boolean),
    convctx.replay_conversation(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.list_conversations(text, text, integer),
    convctx.set_session_title(text, text),
    convctx.conversation_turns(text, bigint, bigint, integer, boolean),
    convctx.replay_conversation(text, integer) TO convctx_app;

-- Scaling out with Citus (docs/citus.md). distribute() spreads the tables
-- over the Citus cluster of this database: everything of a conversation by
-- its session id, in one colocation group, so that a session's rows live
-- on one node; the audit log by tenant; the bindings and the follow-up
-- phrases, read by every call, as reference tables on every node. It
-- registers the per-session functions with Citus on their session
-- argument, so that Citus may run a call on the node that holds the
-- session. Citus refuses tables with triggers: the triggers that delete a
-- deleted session's rows and announce binding changes go, and on Citus
-- purge deletes those rows itself and bindings are read once per
-- transaction. Safe to run again (after adding nodes, say): it does what
-- is left to do.
CREATE FUNCTION convctx.distribute()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $distribute$
DECLARE
    t record;
    f record;
    trig record;
    preload text;
BEGIN
    -- as convctx's writers in C refuse (CheckWritable)
    IF pg_catalog.pg_is_in_recovery() THEN
        RAISE EXCEPTION 'cannot execute convctx.distribute() during recovery'
            USING ERRCODE = 'read_only_sql_transaction',
                  DETAIL = 'This server is a standby: convctx''s read functions work here, its writers only on the primary.';
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
        RAISE EXCEPTION 'cannot execute convctx.distribute() in a read-only transaction'
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    -- Semantic recall runs on a single server: the table of its embeddings
    -- refers to convctx.turn, which would move to the workers.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'convctx_recall') THEN
        RAISE EXCEPTION 'convctx.distribute() cannot run while extension "convctx_recall" is installed'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Semantic recall runs on a single server.',
                  HINT = 'Drop extension convctx_recall first: its embeddings are derived from the turns, which keep their text.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'extension "citus" is not installed in this database'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'convctx.distribute() spreads convctx''s tables over a Citus cluster.',
                  HINT = 'Install Citus on every node, CREATE EXTENSION citus, add the workers with citus_add_node(), and call convctx.distribute() again.';
    END IF;
    -- Without convctx preloaded, the first call of a backend is planned
    -- before convctx's planner hook exists, and Citus could send it to a
    -- worker without its tenant (src/citus/citus.c): such calls would fail there.
    FOR preload IN
        SELECT pg_catalog.current_setting('shared_preload_libraries')
        UNION ALL
        SELECT result FROM pg_catalog.run_command_on_workers(
            'SELECT pg_catalog.current_setting(''shared_preload_libraries'')')
    LOOP
        IF NOT 'convctx' = ANY (pg_catalog.string_to_array(
                pg_catalog.replace(preload, ' ', ''), ',')) THEN
            RAISE EXCEPTION 'convctx is not in shared_preload_libraries on every node of the cluster'
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = pg_catalog.format('A node has shared_preload_libraries = %L.', preload),
                      HINT = 'Set shared_preload_libraries = ''citus,convctx'' on every node and restart them.';
        END IF;
    END LOOP;

    -- (Citus refuses DROP TRIGGER IF EXISTS on a table it has distributed.)
    FOR trig IN
        SELECT tg.tgname, tg.tgrelid::pg_catalog.regclass AS rel FROM pg_catalog.pg_trigger tg
         WHERE tg.tgrelid IN ('convctx.session'::pg_catalog.regclass, 'convctx.role_tenant'::pg_catalog.regclass)
           AND tg.tgname IN ('session_deleted', 'session_truncated', 'role_tenant_changed', 'role_tenant_truncated')
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trig.tgname, trig.rel);
    END LOOP;

    FOR t IN
        SELECT * FROM (VALUES
            (1, 'convctx.session'::pg_catalog.regclass, 'session_id', 'default'),
            (2, 'convctx.turn', 'session_id', 'convctx.session'),
            (3, 'convctx.session_link', 'session_id', 'convctx.session'),
            (4, 'convctx.session_summary', 'session_id', 'convctx.session'),
            (5, 'convctx.turn_retrieval', 'session_id', 'convctx.session'),
            (6, 'convctx.clarification', 'session_id', 'convctx.session'),
            (7, 'convctx.conversation_context', 'conversation_id', 'convctx.session'),
            (8, 'convctx.audit_log', 'tenant_id', 'none'),
            (9, 'convctx.role_tenant', NULL, NULL),
            (10, 'convctx.followup_phrase', NULL, NULL)) AS v(n, rel, col, colocate)
        WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = v.rel)
        ORDER BY n
    LOOP
        IF t.col IS NULL THEN
            PERFORM pg_catalog.create_reference_table(t.rel);
        ELSE
            PERFORM pg_catalog.create_distributed_table(t.rel, t.col, colocate_with => t.colocate);
        END IF;
        -- The rows are copied to the shards; the table's own copy would stay
        -- on disk where redaction, erasure and purge never reach it.
        PERFORM pg_catalog.truncate_local_data_after_distributing_table(t.rel);
    END LOOP;

    FOR f IN
        SELECT p.oid::pg_catalog.regprocedure AS fn,
               CASE WHEN 'conversation_id' = ANY (p.proargnames) THEN 'conversation_id'
                    ELSE 'session_id' END AS arg
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'convctx'::pg_catalog.regnamespace
           AND p.proname IN ('start_turn', 'begin_turn', 'finalize_turn', 'recent_turns', 'recent_turns_json',
                             'link_session', 'replace_turn', 'conversation_state', 'set_summary',
                             'turns_to_summarize', 'record_retrieval', 'context_history',
                             'record_clarification', 'clarification_context', 'redact_turn',
                             'redact_session', 'context_load', 'context_save', 'context_add',
                             'set_session_title', 'conversation_turns', 'replay_conversation',
                             'admin_session_turns')
    LOOP
        PERFORM pg_catalog.create_distributed_function(f.fn, f.arg,
                                                       colocate_with => 'convctx.session');
    END LOOP;
END
$distribute$;

COMMENT ON FUNCTION convctx.distribute() IS
    'on a Citus cluster: distributes convctx''s tables by session (audit log by tenant, bindings and follow-up phrases to every node) and lets Citus run each per-session call on the node that holds the session; run once after adding the workers, again after adding more; 55000 without Citus';

REVOKE ALL ON FUNCTION convctx.distribute() FROM PUBLIC;
