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
