/* convctx--0.2.0--0.3.0.sql: security hardening */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx UPDATE TO '0.3.0'" to load this file. \quit

------------------------------------------------------------------------------
-- Schema guard
------------------------------------------------------------------------------

-- (schema guard: owner, foreign objects, CREATE grants)



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

-- Administrators read acting_role like the other audit columns.
GRANT SELECT (acting_role) ON convctx.audit_log TO convctx_admin;



------------------------------------------------------------------------------
-- Tenant binding that fails closed; administrators read through functions
------------------------------------------------------------------------------

-- (tenancy)



------------------------------------------------------------------------------
-- Redacted and personal data stay gone
------------------------------------------------------------------------------

-- (data)



------------------------------------------------------------------------------
-- Prompt rendering
------------------------------------------------------------------------------

-- (prompt)



------------------------------------------------------------------------------
-- search_path of the SECURITY DEFINER functions
------------------------------------------------------------------------------

-- (search path)
