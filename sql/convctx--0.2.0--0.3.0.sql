/* convctx--0.2.0--0.3.0.sql: security hardening */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx UPDATE TO '0.3.0'" to load this file. \quit

------------------------------------------------------------------------------
-- Schema guard
------------------------------------------------------------------------------

-- The control file names schema convctx, and CREATE EXTENSION reuses a
-- schema of that name that already exists. Whoever owns that schema, or
-- may create objects in it, could drop or shadow the objects of the
-- extension (an aggregate convctx.count(bigint), say, that a SECURITY
-- DEFINER function would then call as the extension's owner). So the
-- schema must belong to the extension's owner, nobody else may create in
-- it, and it must hold nothing but the extension's objects. CREATE
-- EXTENSION runs the scripts of 0.1.0 and 0.2.0 before this one, in the
-- same transaction: they create objects but call nothing found in the
-- schema, and a refusal here undoes all of it. ALTER EXTENSION UPDATE
-- makes the same check before it changes anything.
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



------------------------------------------------------------------------------
-- The roles convctx_app and convctx_admin
--
-- A role of one of these names that existed before convctx was installed
-- is reused (roles belong to the cluster): it must be a plain group role,
-- or the extension would hand its privileges to a role that can log in, do
-- more than the extension expects, or read what a role it belongs to may
-- read (pg_read_all_data would give administrators the tables). Checked on
-- every install and update; members found at install are named.
------------------------------------------------------------------------------

DO $roles$
DECLARE
    r record;
    creating boolean;
BEGIN
    -- CREATE EXTENSION, not an update: a function of 0.1.0 that no script
    -- changes was made by this transaction
    SELECT p.xmin OPERATOR(pg_catalog.=) pg_catalog.xid(pg_catalog.pg_current_xact_id())
      INTO creating FROM pg_catalog.pg_proc p
     WHERE p.oid OPERATOR(pg_catalog.=) 'convctx.context_merge(pg_catalog.jsonb, pg_catalog.text[], pg_catalog.int4)'::pg_catalog.regprocedure;
    FOR r IN SELECT a.rolname,
                    a.xmin OPERATOR(pg_catalog.=) pg_catalog.xid(pg_catalog.pg_current_xact_id()) AS made_now,
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
        IF creating AND NOT r.made_now AND r.members IS NOT NULL THEN
            RAISE WARNING 'role % exists already and has members: %', r.rolname, r.members
                USING DETAIL = 'They receive every privilege convctx grants to the role.';
        END IF;
    END LOOP;
END
$roles$;



------------------------------------------------------------------------------
-- Audit trail: who acted, scheduling and refusals without a superuser
------------------------------------------------------------------------------

-- The session user stays in role_name; the role it acted as (SET ROLE),
-- when that is another one, in acting_role.
ALTER TABLE convctx.audit_log ADD COLUMN acting_role text;
COMMENT ON COLUMN convctx.audit_log.role_name IS
    'the session user (login role) that caused the event';
COMMENT ON COLUMN convctx.audit_log.acting_role IS
    'the role the session acted as (SET ROLE) when it was not the session user; NULL otherwise';

-- (cron and audit)

-- Refused operations are logged in a transaction of their own by a
-- background worker. It acts as convctx_audit, never as a superuser: a
-- role that nobody can log in as or be a member of, that may insert audit
-- rows and nothing else, and that bypasses row-level security only so
-- that the tenant policies (which ask convctx.current_tenant()) do not
-- apply to that insert. Roles belong to the cluster: created when
-- missing, left in place by DROP EXTENSION. One that exists already is
-- taken only if it is such a role.
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

GRANT USAGE ON SCHEMA convctx TO convctx_audit;
GRANT INSERT ON convctx.audit_log TO convctx_audit;
GRANT USAGE ON SEQUENCE convctx.audit_log_audit_id_seq TO convctx_audit;

-- Administrators read acting_role like the other audit columns, through
-- convctx.audit (below).



------------------------------------------------------------------------------
-- Tenant binding that fails closed; administrators read through functions
------------------------------------------------------------------------------

-- (tenancy)

-- Bindings name roles by name: a dump, a restore and logical replication
-- carry names, a row whose role does not exist binds nobody and breaks
-- nothing else, and a stale binding can never land on whatever role holds
-- an OID later. tenant_id NULL binds a role to every tenant.
--
-- Migration of the rows of 0.2.0 (role_id regrole, role_name = the name
-- it was bound under): a row whose role still has that name keeps it. A
-- stale row (its role renamed or dropped; in 0.2.0 it bound nobody) keeps
-- the name too, unless another role now holds that name or another row
-- claims it: then it would bind a role that was never bound, so it is
-- dropped with a warning.
DROP POLICY tenant_isolation ON convctx.role_tenant;
ALTER TABLE convctx.role_tenant DROP CONSTRAINT role_tenant_pkey;
DO $migrate$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT b.ctid AS row_ctid, b.role_name, b.tenant_id
        FROM convctx.role_tenant b
        WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles o
                          WHERE o.oid OPERATOR(pg_catalog.=) b.role_id::pg_catalog.oid
                            AND o.rolname OPERATOR(pg_catalog.=) b.role_name)
          AND (EXISTS (SELECT FROM pg_catalog.pg_roles n
                       WHERE n.rolname OPERATOR(pg_catalog.=) b.role_name)
               OR EXISTS (SELECT FROM convctx.role_tenant b2
                          WHERE b2.role_name OPERATOR(pg_catalog.=) b.role_name
                            AND b2.ctid OPERATOR(pg_catalog.<>) b.ctid
                            AND (b2.bound_at OPERATOR(pg_catalog.>) b.bound_at
                                 OR (b2.bound_at OPERATOR(pg_catalog.=) b.bound_at
                                     AND b2.ctid OPERATOR(pg_catalog.>) b.ctid))))
    LOOP
        RAISE WARNING 'stale binding of role "%" to tenant "%" removed', r.role_name, r.tenant_id
            USING DETAIL = 'The role it was made for was renamed or dropped, and the name now belongs to another role or binding.';
        DELETE FROM convctx.role_tenant WHERE ctid OPERATOR(pg_catalog.=) r.row_ctid;
    END LOOP;
END
$migrate$;
ALTER TABLE convctx.role_tenant DROP COLUMN role_id;
ALTER TABLE convctx.role_tenant ALTER COLUMN tenant_id DROP NOT NULL;
ALTER TABLE convctx.role_tenant ALTER COLUMN role_name TYPE text COLLATE "C";
ALTER TABLE convctx.role_tenant ADD CONSTRAINT role_tenant_pkey PRIMARY KEY (role_name);
ALTER TABLE convctx.role_tenant ADD CONSTRAINT role_tenant_role_name_not_empty
    CHECK (role_name OPERATOR(pg_catalog.<>) '');

COMMENT ON TABLE convctx.role_tenant IS
    'roles bound to a tenant (or to every tenant): such a role, and every role that is a member of it, acts for that tenant; other non-superuser roles act for none';
COMMENT ON COLUMN convctx.role_tenant.role_name IS
    'the bound role, by name: a row whose role does not exist (dropped, renamed, missing where the dump was restored) binds nobody; see convctx.unresolved_bindings()';
COMMENT ON COLUMN convctx.role_tenant.tenant_id IS
    'the tenant the role acts for; NULL: every tenant, named per request by convctx.tenant';
-- (row-level security stays enabled, with no policy: whoever is granted the
-- table anyway sees no row of it)

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
-- name a role that no longer exists, and an unbinding must reach it).
DROP FUNCTION convctx.bind_role_tenant(regrole, text);
DROP FUNCTION convctx.unbind_role_tenant(regrole);

CREATE FUNCTION convctx.bind_role_tenant(role text, tenant text)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_bind_role_tenant_0_3'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.bind_role_tenant(text, text) IS
    'bind a role (by name; and its members) to a tenant, replacing an earlier binding; '''' is the tenant of a single-tenant database; only superusers and roles bound to every tenant may call it; audited';

CREATE FUNCTION convctx.bind_role_all_tenants(role text)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_bind_role_all_tenants'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.bind_role_all_tenants(text) IS
    'bind a role (by name; and its members) to every tenant: it acts for the tenant convctx.tenant names (a service role behind a pooler, a platform administrator); only superusers and roles bound to every tenant may call it; audited';

CREATE FUNCTION convctx.unbind_role_tenant(role text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'convctx_unbind_role_tenant_0_3'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx.unbind_role_tenant(text) IS
    'remove the binding (to a tenant or to every tenant) of a role, by name, also of a role that no longer exists; false when it had none; only superusers and roles bound to every tenant may call it; audited';

COMMENT ON FUNCTION convctx.current_tenant() IS
    'tenant the calling role acts for: its binding (convctx.tenant naming another tenant is an error); for superusers and roles bound to every tenant the setting convctx.tenant, else ''''; any other role: error 42501';

------------------------------------------------------------------------------
-- What administrators read. No role is granted the shared tables any more:
-- with SELECT, row-level security hides other tenants' rows but not their
-- planner estimates, ctids or sequence values. Administrators read through
-- these functions (src/admin.c), which decide the tenant from the role that
-- called them, read as the extension's owner and return the rows of
-- the tenant the caller acts for (every tenant for superusers and roles bound
-- to every tenant). The views over them plan as a Function Scan with a fixed
-- row estimate, whatever the tables hold.
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
    'the audit log of the tenant the caller acts for (every tenant for superusers and roles bound to every tenant), oldest first; without audit_id, whose sequence counts every tenant''s events';

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

-- The views keep their names and columns; they read through the functions.
DROP VIEW convctx.sessions;
DROP VIEW convctx.stats;

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

REVOKE SELECT ON ALL TABLES IN SCHEMA convctx FROM convctx_admin;
REVOKE SELECT (tenant_id, logged_at, role_name, action, session_id, identity_id, details)
    ON convctx.audit_log FROM convctx_admin;
COMMENT ON COLUMN convctx.audit_log.audit_id IS
    'key from one sequence shared by every tenant; administrators read the log through convctx.audit, without it';

REVOKE ALL ON FUNCTION
    convctx.role_tenant_changed(),
    convctx.bind_role_tenant(text, text),
    convctx.bind_role_all_tenants(text),
    convctx.unbind_role_tenant(text),
    convctx.admin_sessions(text),
    convctx.admin_stats(),
    convctx.admin_audit(),
    convctx.admin_session_turns(text),
    convctx.bindings(),
    convctx.unresolved_bindings()
FROM PUBLIC;
REVOKE ALL ON convctx.sessions, convctx.stats, convctx.audit FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
    convctx.bind_role_tenant(text, text),
    convctx.bind_role_all_tenants(text),
    convctx.unbind_role_tenant(text),
    convctx.admin_sessions(text),
    convctx.admin_stats(),
    convctx.admin_audit(),
    convctx.admin_session_turns(text),
    convctx.bindings(),
    convctx.unresolved_bindings()
TO convctx_admin;
GRANT SELECT ON convctx.sessions, convctx.stats, convctx.audit TO convctx_admin;



------------------------------------------------------------------------------
-- Redacted and personal data stay gone
------------------------------------------------------------------------------

-- (data)

-- A summary made before a redaction of a turn it covers is refused: every
-- redaction and erasure bumps the session's generation under its row lock
-- and stamps its tombstones with it; turns_to_summarize hands the
-- generation out, set_summary takes it back.
ALTER TABLE convctx.session ADD COLUMN redactions bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN convctx.session.redactions IS
    'redaction generation: bumped by every redaction or erasure of the session, under this row''s lock; set_summary refuses a summary of turns read before a redaction of one it covers';
ALTER TABLE convctx.turn ADD COLUMN redaction bigint;
COMMENT ON COLUMN convctx.turn.redaction IS
    'for a tombstone, the redaction generation of its session that made it (NULL for tombstones made before 0.3.0 and for live turns)';

DROP FUNCTION convctx.set_summary(text, text, uuid);
CREATE FUNCTION convctx.set_summary(session_id text, summary text, through_turn uuid, redactions bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_set_summary_0_3'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION convctx.set_summary(text, text, uuid, bigint) IS
    'store the app''s summary of every turn of a session up to and including through_turn, replacing an older one; redactions is the value turns_to_summarize returned with the turns summarized: a summary whose input predates a redaction of a turn it covers, or through a redacted turn, is refused (55000)';
REVOKE ALL ON FUNCTION convctx.set_summary(text, text, uuid, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.set_summary(text, text, uuid, bigint) TO convctx_app;

DROP FUNCTION convctx.turns_to_summarize(text, integer);
CREATE FUNCTION convctx.turns_to_summarize(session_id text, message_window integer DEFAULT 10,
                                           max_turns integer DEFAULT 100)
RETURNS TABLE (turn_id uuid, created_at timestamptz, question_neutral text, answer_neutral text,
               redactions bigint, previous_summary text)
AS 'MODULE_PATHNAME', 'convctx_turns_to_summarize_0_3'
LANGUAGE C STABLE PARALLEL RESTRICTED
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION convctx.turns_to_summarize(text, integer, integer) IS
    'the first max_turns live turns older than the message window and not covered by the stored summary, oldest first: what to feed the summarizer, with the summary they continue (previous_summary) and the redaction generation to pass to set_summary';
REVOKE ALL ON FUNCTION convctx.turns_to_summarize(text, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.turns_to_summarize(text, integer, integer) TO convctx_app;

COMMENT ON FUNCTION convctx.erase_identity(text) IS
    'right to erasure: redact every turn of every session linked to the identity, delete their prompt data and contexts (and contexts saved with it as user_id), and replace the identity wherever it is stored (sessions, links, tombstones, audit log) by ''erased:'' and its HMAC-SHA256 under convctx.identity_hash_key (no key: ''erased''); returns how many turns';




------------------------------------------------------------------------------
-- Prompt rendering
------------------------------------------------------------------------------

-- (prompt)

-- Stored text is shown so that it cannot pose as prompt structure: line
-- breaks of one-line fields collapse to a space, continuation lines of
-- blocks are indented, other control characters become a space.
COMMENT ON FUNCTION convctx.context_aspect(jsonb, jsonb) IS
    'system-prompt paragraph listing the active concepts of a context, described by node objects {id, prefLabel, name, jurisdiction, shortDescription}, one line each (line breaks in ids and fields collapse to a space); NULL when none are active';
COMMENT ON FUNCTION convctx.render_conversation_state(jsonb) IS
    'planner context text of a conversation state: summary, the last 5 messages (roles user and assistant only) cut at 200 characters, first message note, up to 10 entities; line breaks in stored text collapse to a space';
COMMENT ON FUNCTION convctx.render_context_history(jsonb, jsonb) IS
    'text form of context_history: section headers (overridable through labels {"immediate", "history", "current"}) and [k] source - title, Title:, Text: per chunk; line breaks in labels, sources, titles and ids collapse to a space, continuation lines of a text are indented by two spaces';
COMMENT ON FUNCTION convctx.render_clarification(jsonb, text) IS
    'full-context prompt of a clarification turn: original issue (indented by two spaces), questions asked, the user''s clarifications, previous analysis, then the instruction; line breaks in questions, answers and the analysis collapse to a space';



------------------------------------------------------------------------------
-- search_path and identity of the functions
------------------------------------------------------------------------------

-- Every function that was SECURITY DEFINER, which is every function that
-- touches a table, runs with search_path = pg_catalog, pg_temp, set in its
-- definition (visible in \df+). Schema convctx is not
-- on it: the statements name it, and nothing created in it by name can be
-- picked up. start_turn, finalize_turn, recent_turns and recent_turns_json
-- used to pin the path in C with an override that later PostgreSQL
-- versions no longer have; they now use SET like the others. Functions
-- created above by this script are covered too.
--
-- No function is SECURITY DEFINER any more: such a function cannot tell
-- who called it (inside a role's own SECURITY DEFINER function, or an
-- index expression that a superuser's ANALYZE runs as the table's owner,
-- the caller would look like the superuser and act for every tenant).
-- Each decides the tenant from the role that really called it and
-- switches to the extension's owner in C for the statements it runs
-- (src/spi_util.c, ActAsOwner), as SECURITY DEFINER did.
DO $pin$
DECLARE
    f pg_catalog.regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) 'convctx'::pg_catalog.regnamespace
                AND p.prosecdef ORDER BY 1
    LOOP
        EXECUTE pg_catalog.format(
            'ALTER FUNCTION %s SECURITY INVOKER SET search_path = pg_catalog, pg_temp', f);
    END LOOP;
END
$pin$;

COMMENT ON FUNCTION convctx.start_turn(text, text, text, text, text, boolean, jsonb, text, text, text) IS
    'start the turn of a chat request; idempotent on (session_id, request_id): a repeat returns the same turn_id and changes nothing';
COMMENT ON FUNCTION convctx.finalize_turn(text, uuid, text, text, boolean, jsonb) IS
    'store the answer of a started turn; repeating it with the same answer changes nothing, a different answer is refused (use replace_turn)';
COMMENT ON FUNCTION convctx.recent_turns(text, integer) IS
    'the last turn_limit finalized, non-redacted, current-version turns of a session, oldest first';
COMMENT ON FUNCTION convctx.recent_turns_json(text, integer) IS
    'recent_turns as a JSON array of {"question_neutral", "answer_neutral"} objects, oldest first, for prompt history';
