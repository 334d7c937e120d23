/* convctx--0.2.0--0.3.0.sql: security hardening */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx UPDATE TO '0.3.0'" to load this file. \quit

------------------------------------------------------------------------------
-- Schema guard
------------------------------------------------------------------------------

-- The same check as CREATE EXTENSION makes (convctx--0.1.0.sql), before
-- an update runs anything as the owner. The control file names schema convctx, and CREATE EXTENSION
-- reuses a schema of that name that already exists. Whoever owns that
-- schema, or may create objects in it, could drop or shadow the objects
-- this script creates (an aggregate convctx.count(bigint), say, that a
-- SECURITY DEFINER function would then call as the extension's owner).
-- So the schema must belong to the role installing the extension, nobody
-- else may create in it, and it must hold nothing but the extension.
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

-- Every SECURITY DEFINER function runs with search_path = pg_catalog,
-- pg_temp, set in its definition (visible in \df+). Schema convctx is not
-- on it: the statements name it, and nothing created in it by name can be
-- picked up. start_turn, finalize_turn, recent_turns and recent_turns_json
-- used to pin the path in C with an override that later PostgreSQL
-- versions no longer have; they now use SET like the others. Functions
-- created above by this script are covered too.
DO $pin$
DECLARE
    f pg_catalog.regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) 'convctx'::pg_catalog.regnamespace
                AND p.prosecdef ORDER BY 1
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', f);
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
