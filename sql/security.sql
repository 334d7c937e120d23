-- Security (0.3.0): privileges of PUBLIC, convctx_app and convctx_admin; tenant binding;
-- row-level security; SECURITY DEFINER functions with a pinned search_path.
-- Two tenants, A and B, with bound roles and the same session, request and identity ids:
-- function by function and table by table, A can neither read, change, link, redact,
-- purge nor infer anything of B.
-- start from an empty store, whatever ran before
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification, convctx.role_tenant;
DELETE FROM convctx.followup_phrase WHERE NOT builtin;
-- erased identities become a keyed stand-in, so that a second erasure finds them
SET convctx.identity_hash_key = 'security test key';
-- roles are cluster-wide: drop what an interrupted earlier run may have left behind
SET client_min_messages = warning;
DROP ROLE IF EXISTS tenant_a_app, tenant_b_app, tenant_a_admin, tenant_b_admin, tenant_a_dml,
    tenant_a_member, tenant_ab_member, tenant_free_app, tenant_a_hostile, convctx_no_grants,
    tenant_platform_admin, tenant_unbound_admin, tenant_a_login, tenant_a_renamed, tenant_a_renamed2,
    tenant_a_group, tenant_a_grouped;
RESET client_min_messages;

CREATE TEMP TABLE ids (name text PRIMARY KEY, id uuid);
GRANT SELECT, INSERT ON ids TO PUBLIC;
\i test/helpers.sql
-- Every row of every table that belongs to a tenant, as JSON (called as the superuser,
-- who is not subject to row-level security): the ground truth the checks compare with.
-- (PL/pgSQL, not SQL: Citus cannot plan a SQL function's parameters.)
CREATE FUNCTION pg_temp.tenant_rows(t text) RETURNS TABLE (tbl text, r jsonb) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT 'audit_log', to_jsonb(x) FROM convctx.audit_log x WHERE tenant_id = t
    UNION ALL SELECT 'clarification', to_jsonb(x) FROM convctx.clarification x WHERE tenant_id = t
    UNION ALL SELECT 'conversation_context', to_jsonb(x) FROM convctx.conversation_context x WHERE tenant_id = t
    UNION ALL SELECT 'followup_phrase', to_jsonb(x) FROM convctx.followup_phrase x WHERE tenant_id = t
    UNION ALL SELECT 'role_tenant', to_jsonb(x) FROM convctx.role_tenant x WHERE tenant_id = t
    UNION ALL SELECT 'session', to_jsonb(x) FROM convctx.session x WHERE tenant_id = t
    UNION ALL SELECT 'session_link', to_jsonb(x) FROM convctx.session_link x WHERE tenant_id = t
    UNION ALL SELECT 'session_summary', to_jsonb(x) FROM convctx.session_summary x WHERE tenant_id = t
    UNION ALL SELECT 'turn', to_jsonb(x) FROM convctx.turn x WHERE tenant_id = t
    UNION ALL SELECT 'turn_retrieval', to_jsonb(x) FROM convctx.turn_retrieval x WHERE tenant_id = t;
END $$;
-- A snapshot of tenant B's rows, and how many rows differ from it now.
CREATE TEMP TABLE b_snapshot (tbl text, r jsonb);
CREATE FUNCTION pg_temp.b_changed_rows() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ((SELECT * FROM pg_temp.tenant_rows('B') EXCEPT ALL SELECT * FROM b_snapshot)
                          UNION ALL (SELECT * FROM b_snapshot EXCEPT ALL SELECT * FROM pg_temp.tenant_rows('B'))) d
$$;

------------------------------------------------------------------------------
-- 1. The catalog: nothing for PUBLIC, no direct writes, pinned search_path, RLS everywhere
------------------------------------------------------------------------------
-- no routine of the schema is executable by PUBLIC (a NULL proacl would mean it is)
SELECT p.oid::regprocedure AS routine_executable_by_public
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'convctx'::regnamespace
  AND (p.proacl IS NULL OR EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0))
ORDER BY 1;
-- who may execute what, and which routines run as the extension's owner
SELECT p.oid::regprocedure AS routine, p.prokind AS kind, p.prosecdef AS security_definer,
       (SELECT string_agg(a.grantee::regrole::text, ', ' ORDER BY a.grantee::regrole::text)
        FROM aclexplode(p.proacl) a WHERE a.grantee <> p.proowner) AS executable_by
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'convctx'::regnamespace
ORDER BY executable_by, security_definer, p.oid::regprocedure::text;
-- no routine is SECURITY DEFINER (the C functions decide the tenant from the role that
-- called them, then act as the owner in C); every routine with a setting pins exactly
-- search_path = pg_catalog, pg_temp, without schema convctx, so nothing created there is
-- found by name; those without are listed: they read no table themselves
SELECT p.oid::regprocedure AS security_definer_routine
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'convctx'::regnamespace AND p.prosecdef
ORDER BY 1;
SELECT p.oid::regprocedure AS routine_with_another_setting, p.proconfig
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'convctx'::regnamespace AND p.proconfig IS NOT NULL
  AND p.proconfig IS DISTINCT FROM ARRAY['search_path=pg_catalog, pg_temp']
ORDER BY 1;
SELECT p.oid::regprocedure AS routine_without_pinned_search_path
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'convctx'::regnamespace AND p.proconfig IS NULL
ORDER BY p.oid::regprocedure::text;
-- the schema: USAGE for the two roles and the audit writer only
SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee, a.privilege_type
FROM pg_catalog.pg_namespace n, aclexplode(n.nspacl) a
WHERE n.nspname = 'convctx' AND a.grantee <> n.nspowner
ORDER BY 1, 2;
-- tables, views and the sequence: SELECT on the views for convctx_admin, nothing else
-- for anybody: no role reads the shared tables (their planner estimates, ctids and
-- sequence would tell of other tenants); administrators read through functions
SELECT c.relname, c.relkind,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee, a.privilege_type
FROM pg_catalog.pg_class c
LEFT JOIN LATERAL aclexplode(c.relacl) a ON a.grantee <> c.relowner
WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind IN ('r', 'v', 'S', 'm', 'f', 'p')
ORDER BY 1, 3, 4;
-- the audit log: no column is granted to anybody (administrators read convctx.audit)
SELECT a.attname, x.grantee::regrole AS grantee, x.privilege_type
FROM pg_attribute a, aclexplode(a.attacl) x
WHERE a.attrelid = 'convctx.audit_log'::regclass AND a.attnum > 0
ORDER BY a.attnum, 2, 3;
SELECT attname FROM pg_attribute
WHERE attrelid = 'convctx.audit_log'::regclass AND attnum > 0 AND attacl IS NULL;
-- and through role membership, too: neither role may write anything directly
SELECT r.rolname, c.relname, p.priv
FROM pg_catalog.pg_roles r, pg_catalog.pg_class c,
     unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) p(priv)
WHERE r.rolname IN ('convctx_app', 'convctx_admin')
  AND c.relnamespace = 'convctx'::regnamespace AND c.relkind IN ('r', 'v')
  AND has_table_privilege(r.oid, c.oid, p.priv)
ORDER BY 1, 2, 3;
SELECT r.rolname, c.relname
FROM pg_catalog.pg_roles r, pg_catalog.pg_class c
WHERE r.rolname IN ('convctx_app', 'convctx_admin')
  AND c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'S'
  AND has_sequence_privilege(r.oid, c.oid, 'USAGE, SELECT, UPDATE')
ORDER BY 1, 2;
-- every table has row-level security and a policy on tenant_id = convctx.current_tenant(),
-- but role_tenant, which nobody is granted and which has no policy: whoever is granted it
-- anyway sees no row
SELECT c.relname, c.relrowsecurity,
       (SELECT string_agg(pol.polname || ' ' || pol.polcmd::text || ': '
                          || pg_get_expr(pol.polqual, pol.polrelid), '; ' ORDER BY pol.polname)
        FROM pg_catalog.pg_policy pol WHERE pol.polrelid = c.oid) AS policies
FROM pg_catalog.pg_class c
WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'r'
ORDER BY 1;
-- the views run with the querying role's privileges, so row-level security applies to them
SELECT c.relname, c.reloptions FROM pg_catalog.pg_class c
WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'v' ORDER BY 1;
-- the trigger functions run only as triggers: called directly, 39P01 and a clear message
SELECT pg_temp.try($$SELECT convctx.role_tenant_changed()$$);
SELECT pg_temp.try($$SELECT convctx.session_deleted()$$);
-- a role that is granted nothing can execute nothing and read nothing
CREATE ROLE convctx_no_grants LOGIN;
SELECT count(*) FILTER (WHERE has_function_privilege('convctx_no_grants', p.oid, 'EXECUTE')) AS executable,
       count(*) AS routines
FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'convctx'::regnamespace;
SELECT count(*) FILTER (WHERE has_table_privilege('convctx_no_grants', c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')) AS accessible,
       count(*) AS relations
FROM pg_catalog.pg_class c WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind IN ('r', 'v');
SELECT has_schema_privilege('convctx_no_grants', 'convctx', 'USAGE') AS schema_usage;
SET ROLE convctx_no_grants;
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$);
SELECT pg_temp.try($$SELECT convctx.context_merge(NULL, ARRAY['x'])$$);
SELECT pg_temp.try($$SELECT * FROM convctx.recent_turns('s1')$$);
SELECT pg_temp.try($$SELECT * FROM convctx.turn$$);
SELECT pg_temp.try($$SELECT * FROM convctx.sessions$$);
RESET ROLE;
-- even with USAGE on the schema, every function and table is refused
GRANT USAGE ON SCHEMA convctx TO convctx_no_grants;
SET ROLE convctx_no_grants;
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$);
SELECT pg_temp.try($$SELECT convctx.start_turn('s1', 'r1', 'q')$$);
SELECT pg_temp.try($$SELECT * FROM convctx.recent_turns('s1')$$);
SELECT pg_temp.try($$SELECT convctx.purge()$$);
SELECT pg_temp.try($$CALL convctx.purge_all()$$);
SELECT pg_temp.try($$SELECT * FROM convctx.turn$$);
SELECT pg_temp.try($$INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, question_neutral)
                     VALUES ('', 's1', gen_random_uuid(), 1, 'r1', 'q')$$);
SELECT pg_temp.try($$SELECT nextval('convctx.audit_log_audit_id_seq')$$);
RESET ROLE;
REVOKE USAGE ON SCHEMA convctx FROM convctx_no_grants;
DROP ROLE convctx_no_grants;

------------------------------------------------------------------------------
-- 2. Two tenants with bound roles, and the same ids in both
------------------------------------------------------------------------------
-- (Roles that may log in, as an app's do: on Citus a role's own reads of the tables reach
-- the other nodes as that role.)
CREATE ROLE tenant_a_app LOGIN IN ROLE convctx_app;
CREATE ROLE tenant_b_app LOGIN IN ROLE convctx_app;
CREATE ROLE tenant_a_admin LOGIN IN ROLE convctx_admin;
CREATE ROLE tenant_b_admin LOGIN IN ROLE convctx_admin;
SELECT convctx.bind_role_tenant('tenant_a_app', 'A'), convctx.bind_role_tenant('tenant_b_app', 'B'),
       convctx.bind_role_tenant('tenant_a_admin', 'A'), convctx.bind_role_tenant('tenant_b_admin', 'B');
SELECT role_name, tenant_id FROM convctx.role_tenant ORDER BY role_name;
-- a tenant's own phrases for is_followup (tenants cannot write the table; the operator can)
INSERT INTO convctx.followup_phrase (tenant_id, kind, phrase) VALUES
    ('B', 'fresh_keyword', 'invoice'), ('B', 'clarification', 'zebra crossing');

-- tenant B: session s1 (linked to u1) with three turns, a retrieval, a clarification,
-- a summary and a context; s2 anonymous; s3 linked to u9; sx only in B
SET ROLE tenant_b_app;
SELECT convctx.current_tenant();
INSERT INTO ids SELECT 'b1', convctx.start_turn('s1', 'r1', 'B: what is the secret formula?', identity_id => 'u1');
INSERT INTO ids SELECT 'b2', convctx.start_turn('s1', 'r2', 'B: who knows it?');
INSERT INTO ids SELECT 'b3', convctx.start_turn('s1', 'r3', 'B: since when?');
SELECT convctx.finalize_turn('s1', id, 'B: answer ' || name) FROM ids WHERE name IN ('b1', 'b2', 'b3') ORDER BY name;
SELECT convctx.record_retrieval('s1', (SELECT id FROM ids WHERE name = 'b1'),
    '[{"id": "doc-1", "title": "B title", "text": "B chunk text"}, {"id": "b-only-doc", "text": "B private chunk"}]',
    '[{"id": "doc-1"}, {"id": "b-only-doc"}]');
SELECT convctx.record_clarification('s1', (SELECT id FROM ids WHERE name = 'b2'),
    '[{"id": "q1", "question": "B: which vault?", "type": "text"}]', '{"reasoning": "B reasoning"}');
SELECT convctx.set_summary('s1', 'B summary', (SELECT id FROM ids WHERE name = 'b1'), 0);
SELECT convctx.context_add('s1', ARRAY['b-node-1', 'b-node-2'], 'b-user');
INSERT INTO ids SELECT 'b-s2', convctx.start_turn('s2', 'r1', 'B: anonymous question');
SELECT convctx.finalize_turn('s2', (SELECT id FROM ids WHERE name = 'b-s2'), 'B: anonymous answer');
SELECT convctx.context_add('s2', ARRAY['b-node-s2']);
INSERT INTO ids SELECT 'b-s3', convctx.start_turn('s3', 'r1', 'B: s3 question');
SELECT convctx.finalize_turn('s3', (SELECT id FROM ids WHERE name = 'b-s3'), 'B: s3 answer');
SELECT convctx.link_session('u9', 's3');
INSERT INTO ids SELECT 'b-sx', convctx.start_turn('sx', 'r1', 'B: sx question');
SELECT convctx.finalize_turn('sx', (SELECT id FROM ids WHERE name = 'b-sx'), 'B: sx answer');
SELECT convctx.context_save('sx', '{"activeNodeIds": ["b-sx-node"]}');
RESET ROLE;

-- tenant A: the same session, request and identity ids, other texts. Unique keys lead
-- with tenant_id, so nothing collides and nothing tells A that B exists.
SET ROLE tenant_a_app;
SELECT convctx.current_tenant();
INSERT INTO ids SELECT 'a1', convctx.start_turn('s1', 'r1', 'A: what is VAT?', identity_id => 'u1');
INSERT INTO ids SELECT 'a2', convctx.start_turn('s1', 'r2', 'A: and VRT?');
INSERT INTO ids SELECT 'a3', convctx.start_turn('s1', 'r3', 'A: since when?');
SELECT convctx.finalize_turn('s1', id, 'A: answer ' || name) FROM ids WHERE name IN ('a1', 'a2', 'a3') ORDER BY name;
SELECT convctx.record_retrieval('s1', (SELECT id FROM ids WHERE name = 'a1'),
    '[{"id": "doc-1", "title": "A title", "text": "A chunk text"}]', '[{"id": "doc-1"}]');
SELECT convctx.record_clarification('s1', (SELECT id FROM ids WHERE name = 'a2'),
    '[{"id": "q1", "question": "A: which vehicle?", "type": "text"}]', '{"reasoning": "A reasoning"}');
SELECT convctx.set_summary('s1', 'A summary', (SELECT id FROM ids WHERE name = 'a1'), 0);
SELECT convctx.context_add('s1', ARRAY['a-node-1'], 'a-user');
INSERT INTO ids SELECT 'a-s2', convctx.start_turn('s2', 'r1', 'A: anonymous question');
SELECT convctx.finalize_turn('s2', (SELECT id FROM ids WHERE name = 'a-s2'), 'A: anonymous answer');
SELECT convctx.context_add('s2', ARRAY['a-node-s2']);
RESET ROLE;

-- what is stored, per tenant (the superuser sees every tenant)
SELECT tenant_id, session_id, turn_no, request_id, identity_id, question_neutral, answer_neutral
FROM convctx.turn ORDER BY tenant_id, session_id, turn_no;
SELECT tenant_id, session_id, identity_id FROM convctx.session_link ORDER BY 1, 2;
SELECT tenant_id, conversation_id, context_json, user_id FROM convctx.conversation_context ORDER BY 1, 2;
-- B's rows from now on: every later check compares with this snapshot
INSERT INTO b_snapshot SELECT * FROM pg_temp.tenant_rows('B');
SELECT tbl, count(*) AS b_rows FROM b_snapshot GROUP BY tbl ORDER BY tbl;

------------------------------------------------------------------------------
-- 3a. Reads: every function returns A's data only, for A's app and admin roles
------------------------------------------------------------------------------
SET ROLE tenant_a_app;
SELECT request_id, question_neutral, answer_neutral FROM convctx.recent_turns('s1');
SELECT convctx.recent_turns_json('s1', 1);
SELECT convctx.context_load('s1');
-- sx exists only in B: for A it is an unknown conversation
SELECT convctx.context_load('sx') IS NULL AS unknown_context;
SELECT count(*) AS sx_turns FROM convctx.recent_turns('sx');
SELECT convctx.recent_turns_json('sx');
SELECT state - 'recent_messages' AS state,
       jsonb_path_query_array(state, '$.recent_messages[*].text') AS message_texts
FROM convctx.conversation_state('s1', 4) state;
SELECT convctx.conversation_state('sx') - 'recent_messages' AS unknown_state,
       convctx.conversation_state('sx') -> 'recent_messages' AS messages;
SELECT question_neutral, answer_neutral FROM convctx.turns_to_summarize('s1', 2);
SELECT count(*) AS to_summarize FROM convctx.turns_to_summarize('sx', 1);
SELECT e ->> 'section' AS section, e -> 'chunk' AS chunk
FROM jsonb_array_elements(convctx.context_history('s1', 5)) e;
SELECT convctx.context_history('sx');
SELECT convctx.clarification_context('s1', (SELECT id FROM ids WHERE name = 'a2'), '{"q1": "the red one"}');
SELECT convctx.render_clarification(convctx.clarification_context('s1', (SELECT id FROM ids WHERE name = 'a2')));
-- is_followup uses A's phrases and A's turns only: B's keyword "invoice" does not make a
-- short query fresh, B's phrase "zebra crossing" does not make a long one a follow-up,
-- and B's finalized session sx is nothing to follow up on
SELECT convctx.is_followup('and the invoice?', 's1') AS short_query_with_b_keyword,
       convctx.is_followup('one two three four five six zebra crossing', 's1') AS long_query_with_b_phrase,
       convctx.is_followup('and then?', 'sx') AS b_only_session;
RESET ROLE;
-- (the same calls as tenant B, for contrast)
SET ROLE tenant_b_app;
SELECT convctx.is_followup('and the invoice?', 's1') AS short_query_with_b_keyword,
       convctx.is_followup('one two three four five six zebra crossing', 's1') AS long_query_with_b_phrase,
       convctx.is_followup('and then?', 'sx') AS b_only_session;
SELECT request_id, question_neutral, answer_neutral FROM convctx.recent_turns('s1');
RESET ROLE;
-- the admin role of A reads the same, and nothing of B
SET ROLE tenant_a_admin;
SELECT convctx.current_tenant();
SELECT request_id, question_neutral, answer_neutral FROM convctx.recent_turns('s1');
SELECT convctx.context_load('s1'), convctx.context_load('sx');
SELECT e ->> 'section' AS section, e -> 'chunk' ->> 'text' AS chunk_text
FROM jsonb_array_elements(convctx.context_history('s1', 5)) e;
RESET ROLE;
-- No function of convctx is SECURITY DEFINER: each decides the tenant from the role that
-- called it and switches to the extension's owner in C for the tables. So another
-- declaration of the same C function (only a superuser can make one) gives exactly
-- what convctx.recent_turns gives: the caller's own tenant, nothing more.
CREATE FUNCTION pg_temp.recent_turns_as_caller(session_id text, turn_limit integer)
RETURNS TABLE (turn_id uuid, request_id text, created_at timestamptz, finalized_at timestamptz,
               question_neutral text, answer_neutral text, question_translated text,
               answer_translated text, metadata jsonb)
LANGUAGE c AS '$libdir/convctx', 'convctx_recent_turns';
SET ROLE tenant_a_app;
SELECT pg_temp.try($$SELECT * FROM pg_temp.recent_turns_as_caller('s1', 10)$$);
SELECT (SELECT jsonb_agg(r) FROM pg_temp.recent_turns_as_caller('s1', 10) r)
     = (SELECT jsonb_agg(r) FROM convctx.recent_turns('s1', 10) r) AS same_as_recent_turns,
       (SELECT count(*) FROM pg_temp.recent_turns_as_caller('s1', 10) r
         WHERE r.question_neutral NOT LIKE 'A:%') AS rows_of_another_tenant;
RESET ROLE;
SET ROLE tenant_a_admin;
SELECT pg_temp.try($$SELECT * FROM pg_temp.recent_turns_as_caller('s1', 10)$$);
RESET ROLE;

------------------------------------------------------------------------------
-- 3b. Writes with B's ids: refused exactly as for an id that exists nowhere, B unchanged
------------------------------------------------------------------------------
SET ROLE tenant_a_app;
-- start_turn on (s1, r1) returns A's turn, never B's, and never an error
SELECT convctx.start_turn('s1', 'r1', 'A: what is VAT?') = (SELECT id FROM ids WHERE name = 'a1') AS a_turn,
       convctx.start_turn('s1', 'r1', 'A: what is VAT?') = (SELECT id FROM ids WHERE name = 'b1') AS b_turn;
-- B's turn ids, in the session where B has them: P0002, word for word the same as for
-- a turn id that exists in no tenant
SELECT name, pg_temp.try(format('SELECT convctx.finalize_turn(%L, %L, %L)', 's1', id, 'A: hijacked')) AS finalize_turn,
       pg_temp.try(format('SELECT convctx.replace_turn(%L, %L, %L)', 's1', id, 'A: hijacked')) AS replace_turn
FROM (SELECT name, id FROM ids WHERE name IN ('b1', 'b-sx')
      UNION ALL SELECT 'nowhere', '00000000-0000-4000-8000-000000000000') x ORDER BY name;
SELECT name, pg_temp.try(format('SELECT convctx.record_retrieval(%L, %L, %L)', 's1', id, '[{"id": "x", "text": "A: hijacked"}]')) AS record_retrieval,
       pg_temp.try(format('SELECT convctx.record_clarification(%L, %L, %L, %L)', 's1', id, '[]', '{}')) AS record_clarification
FROM (SELECT name, id FROM ids WHERE name IN ('b1', 'b-sx')
      UNION ALL SELECT 'nowhere', '00000000-0000-4000-8000-000000000000') x ORDER BY name;
SELECT name, pg_temp.try(format('SELECT convctx.set_summary(%L, %L, %L, 0)', 's1', 'A: hijacked', id)) AS set_summary,
       pg_temp.try(format('SELECT convctx.clarification_context(%L, %L)', 's1', id)) AS clarification_context
FROM (SELECT name, id FROM ids WHERE name IN ('b1', 'b2')
      UNION ALL SELECT 'nowhere', '00000000-0000-4000-8000-000000000000') x ORDER BY name;
-- the same with B's own session ids
SELECT pg_temp.try(format('SELECT convctx.finalize_turn(%L, %L, %L)', 'sx', (SELECT id FROM ids WHERE name = 'b-sx'), 'A: hijacked'));
SELECT pg_temp.try(format('SELECT convctx.clarification_context(%L, %L)', 'sx', (SELECT id FROM ids WHERE name = 'b-sx')));
-- a citation by id resolves within A only: B's chunk "b-only-doc" is unknown, like any
-- id that was never retrieved; "doc-1" is A's chunk, not B's
SELECT pg_temp.try(format('SELECT convctx.record_retrieval(%L, %L, %L, %L)', 's1', (SELECT id FROM ids WHERE name = 'a2'), '[]', '[{"id": "b-only-doc"}]'));
SELECT pg_temp.try(format('SELECT convctx.record_retrieval(%L, %L, %L, %L)', 's1', (SELECT id FROM ids WHERE name = 'a2'), '[]', '[{"id": "never-retrieved"}]'));
SELECT convctx.record_retrieval('s1', (SELECT id FROM ids WHERE name = 'a2'), '[]', '[{"id": "doc-1"}]');
-- context writes with B's conversation ids write A's rows
SELECT convctx.context_add('sx', ARRAY['a-sx-node']);
SELECT convctx.context_save('s2', '{"activeNodeIds": ["a-node-s2"], "note": "A"}');
RESET ROLE;
SELECT pg_temp.b_changed_rows();
SELECT tenant_id, conversation_id, context_json FROM convctx.conversation_context WHERE conversation_id IN ('s2', 'sx') ORDER BY 1, 2;
SELECT tenant_id, session_id, turn_no, citations FROM convctx.turn_retrieval ORDER BY 1, 2, 3;
-- the admin role of A cannot redact B's turn either
SET ROLE tenant_a_admin;
SELECT name, pg_temp.try(format('SELECT convctx.redact_turn(%L, %L)', 's1', id)) AS redact_turn
FROM (SELECT name, id FROM ids WHERE name IN ('b1', 'b-sx')
      UNION ALL SELECT 'nowhere', '00000000-0000-4000-8000-000000000000') x ORDER BY name;
SELECT pg_temp.try(format('SELECT convctx.redact_turn(%L, %L)', 'sx', (SELECT id FROM ids WHERE name = 'b-sx')));
-- redact_session of a session that exists only in B: nothing to redact
SELECT convctx.redact_session('sx');
RESET ROLE;
SELECT pg_temp.b_changed_rows();

------------------------------------------------------------------------------
-- 3c. Linking: A's links and refusals never meet B's
------------------------------------------------------------------------------
SET ROLE tenant_a_app;
-- B linked s3 to u9; in A, s3 can go to u7
SELECT convctx.link_session('u7', 's3');
-- the same link as B's (s1 to u1) is just A's own idempotent link
SELECT convctx.link_session('u1', 's1');
-- A's own conflict is refused, and audited in A
SELECT pg_temp.try($$SELECT convctx.link_session('u9', 's3')$$);
RESET ROLE;
SELECT tenant_id, session_id, identity_id FROM convctx.session_link ORDER BY 1, 2;
SELECT tenant_id, action, CASE WHEN role_name = session_user THEN '(superuser)' ELSE role_name END AS role_name,
       acting_role, session_id, identity_id, details FROM convctx.audit_log
WHERE action = 'link_refused' ORDER BY logged_at, audit_id;
SELECT pg_temp.b_changed_rows();

------------------------------------------------------------------------------
-- 3d. Views and the audit log show A's rows only
------------------------------------------------------------------------------
SET ROLE tenant_a_admin;
SELECT tenant, session_id, identity_id, turns, finalized, redacted, expires_at IS NOT NULL AS expires
FROM convctx.sessions ORDER BY tenant, session_id;
SELECT tenant, sessions, anonymous_sessions, linked_sessions, turns, old_versions, tombstones, contexts
FROM convctx.stats ORDER BY tenant;
SELECT tenant_id, CASE WHEN role_name = session_user THEN '(superuser)' ELSE role_name END AS role_name,
       acting_role, action, session_id, identity_id, details
FROM convctx.audit ORDER BY logged_at;
-- the table itself, with audit_id, which counts every tenant's events, is not readable
SELECT pg_temp.try($$SELECT audit_id FROM convctx.audit_log$$);
SELECT pg_temp.try($$SELECT * FROM convctx.audit_log$$);
-- filtering for B finds nothing
SELECT count(*) AS b_sessions FROM convctx.sessions WHERE tenant = 'B';
SELECT count(*) AS b_audit_rows FROM convctx.audit WHERE tenant_id = 'B';
SELECT count(*) AS b_sessions FROM convctx.admin_sessions('sx');
-- the support read of a session: A's turns with tombstones and old versions, none of B's
SELECT turn_no, record_version, request_id, question_neutral, answer_neutral, deleted_at IS NOT NULL AS redacted
FROM convctx.admin_session_turns('s1');
SELECT count(*) AS b_turns FROM convctx.admin_session_turns('sx');
RESET ROLE;
SET ROLE tenant_a_app;
-- the app role has neither the views nor the audit log
SELECT pg_temp.try($$SELECT * FROM convctx.sessions$$);
SELECT pg_temp.try($$SELECT * FROM convctx.audit$$);
SELECT pg_temp.try($$SELECT * FROM convctx.admin_session_turns('s1')$$);
SELECT pg_temp.try($$SELECT * FROM convctx.audit_log$$);
RESET ROLE;

------------------------------------------------------------------------------
-- 3e. Redaction and erasure with shared ids act on A only
------------------------------------------------------------------------------
SET ROLE tenant_a_admin;
SELECT convctx.redact_turn('s1', (SELECT id FROM ids WHERE name = 'a3'));
-- u1 is linked to s1 in both tenants; B's u9 is nobody in A
SELECT convctx.erase_identity('u1');
SELECT convctx.erase_identity('u9');
SELECT convctx.redact_session('s2');
RESET ROLE;
SELECT tenant_id, session_id, turn_no, question_neutral, answer_neutral, deleted_at IS NOT NULL AS redacted
FROM convctx.turn WHERE session_id IN ('s1', 's2') ORDER BY tenant_id, session_id, turn_no;
SELECT tenant_id, conversation_id FROM convctx.conversation_context ORDER BY 1, 2;
SELECT pg_temp.b_changed_rows();

------------------------------------------------------------------------------
-- 3f. Retention: a bound admin purges its own tenant only
------------------------------------------------------------------------------
-- everything of both tenants is expired: idle anonymous sessions, old turns, old contexts
SET convctx.session_ttl = '1h';
SET convctx.turn_retention = '1h';
SET convctx.context_ttl = '1h';
UPDATE convctx.session SET last_activity_at = now() - interval '2 hours';
UPDATE convctx.turn SET created_at = now() - interval '2 hours';
UPDATE convctx.conversation_context SET updated_at = now() - interval '2 hours';
DELETE FROM b_snapshot;
INSERT INTO b_snapshot SELECT * FROM pg_temp.tenant_rows('B');
SET ROLE tenant_a_admin;
SELECT * FROM convctx.retention_settings();
SELECT convctx.purge();
CALL convctx.purge_all();
SELECT convctx.purge();
SELECT tenant, sessions, turns, contexts FROM convctx.stats ORDER BY tenant;
RESET ROLE;
SELECT tenant_id, count(*) AS turns FROM convctx.turn GROUP BY 1 ORDER BY 1;
SELECT pg_temp.b_changed_rows();
-- (an unbound role purges every tenant; that is shown at the end, in the cleanup)

------------------------------------------------------------------------------
-- 4. Table by table: row-level security for whoever is granted a table
------------------------------------------------------------------------------
-- fresh rows for A again, with the same keys as B's
SET ROLE tenant_a_app;
-- (s1 stays linked to u1's erased stand-in: a turn names no identity, a link to u1 is refused)
INSERT INTO ids SELECT 'a1-new', convctx.start_turn('s1', 'r1', 'A: again');
SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 'a1-new'), 'A: again answered');
SELECT convctx.record_retrieval('s1', (SELECT id FROM ids WHERE name = 'a1-new'),
    '[{"id": "doc-1", "text": "A chunk again"}]', '[{"id": "doc-1"}]');
SELECT convctx.record_clarification('s1', (SELECT id FROM ids WHERE name = 'a1-new'),
    '[{"id": "q", "question": "which?"}]', '{}');
SELECT convctx.set_summary('s1', 'A summary again', (SELECT id FROM ids WHERE name = 'a1-new'), 0);
SELECT convctx.context_add('s1', ARRAY['a-node-again']);
RESET ROLE;
-- the admin role of A can neither read nor write any table, nor EXPLAIN a query of one
-- (the estimates would count B's rows); it reads through the functions
SET ROLE tenant_a_admin;
SELECT c.relname, pg_temp.try(format('SELECT 1 FROM %s', c.oid::regclass)) AS direct_select,
       pg_temp.try(format('EXPLAIN SELECT 1 FROM %s WHERE tenant_id = %L', c.oid::regclass, 'B')) AS explain
FROM pg_catalog.pg_class c
WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'r'
ORDER BY 1;
SELECT pg_temp.try($$SELECT turn_id, ctid FROM convctx.turn$$);
SELECT pg_temp.try($$SELECT * FROM convctx.audit_log_audit_id_seq$$);
-- nor the planner's statistics of them
SELECT count(*) AS visible_statistics FROM pg_catalog.pg_stats WHERE schemaname = 'convctx';
SELECT pg_temp.try($$UPDATE convctx.turn SET answer_neutral = 'x'$$);
SELECT pg_temp.try($$DELETE FROM convctx.session_link$$);
SELECT pg_temp.try($$TRUNCATE convctx.audit_log$$);
SELECT pg_temp.try($$INSERT INTO convctx.role_tenant (role_name, tenant_id) VALUES ('tenant_a_admin', 'B')$$);
SELECT role_name, tenant_id, all_tenants, role_exists FROM convctx.bindings();
RESET ROLE;
-- the app role can neither read nor write a table
SET ROLE tenant_a_app;
SELECT pg_temp.try($$SELECT * FROM convctx.turn$$);
SELECT pg_temp.try($$UPDATE convctx.turn SET answer_neutral = 'x'$$);
SELECT pg_temp.try($$INSERT INTO convctx.followup_phrase (tenant_id, kind, phrase) VALUES ('A', 'clarification', 'x')$$);
RESET ROLE;
-- a role explicitly granted DML on two tables still reaches A's rows only
CREATE ROLE tenant_a_dml LOGIN;
SELECT convctx.bind_role_tenant('tenant_a_dml', 'A');
GRANT USAGE ON SCHEMA convctx TO tenant_a_dml;
GRANT SELECT, INSERT, UPDATE, DELETE ON convctx.turn, convctx.conversation_context TO tenant_a_dml;
-- (the policies call convctx.current_tenant(): without convctx_app the role gets nothing)
SET ROLE tenant_a_dml;
SELECT pg_temp.try($$SELECT count(*) FROM convctx.turn$$);
SELECT pg_temp.try($$DELETE FROM convctx.turn WHERE tenant_id = 'B'$$);
RESET ROLE;
GRANT convctx_app TO tenant_a_dml;
-- a function in the query that is not leakproof runs after the policy: it never sees B's rows
-- (not a temporary function: on Citus the query runs on the nodes of the shards, which do
-- not have the session's temporary objects)
CREATE FUNCTION public.peek(t text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
    RAISE NOTICE 'peek saw: %', t;
    RETURN true;
END $$;
SET ROLE tenant_a_dml;
SELECT count(*) FROM convctx.turn WHERE public.peek(tenant_id || ': ' || coalesce(question_neutral, '-'));
RESET ROLE;
DROP FUNCTION public.peek(text);
SET ROLE tenant_a_dml;
-- UPDATE and DELETE of B's rows: 0 rows
WITH u AS (UPDATE convctx.turn SET answer_neutral = 'hijacked' WHERE tenant_id = 'B' RETURNING 1)
SELECT count(*) AS b_turns_updated FROM u;
WITH d AS (DELETE FROM convctx.turn WHERE tenant_id = 'B' RETURNING 1)
SELECT count(*) AS b_turns_deleted FROM d;
WITH u AS (UPDATE convctx.conversation_context SET context_json = '{}' WHERE tenant_id = 'B' RETURNING 1)
SELECT count(*) AS b_contexts_updated FROM u;
WITH d AS (DELETE FROM convctx.conversation_context WHERE tenant_id = 'B' RETURNING 1)
SELECT count(*) AS b_contexts_deleted FROM d;
-- without a WHERE clause they reach A's rows only (rolled back)
BEGIN;
WITH u AS (UPDATE convctx.turn SET answer_neutral = 'A: changed' RETURNING tenant_id)
SELECT tenant_id, count(*) FROM u GROUP BY 1;
WITH d AS (DELETE FROM convctx.conversation_context RETURNING tenant_id)
SELECT tenant_id, count(*) FROM d GROUP BY 1;
ROLLBACK;
-- a row for B, or a row moved to B: refused by the policy
SELECT pg_temp.try($$INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, question_neutral)
                     VALUES ('B', 's1', gen_random_uuid(), 99, 'r99', 'planted')$$);
SELECT pg_temp.try($$INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json)
                     VALUES ('B', 's9', '{}')$$);
SELECT pg_temp.try($$UPDATE convctx.conversation_context SET tenant_id = 'B'$$);
-- A's row with B's keys: no unique-key error reveals that B holds them (rolled back)
BEGIN;
SELECT pg_temp.try($$INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json)
                     VALUES ('A', 'sx', '{}') ON CONFLICT (tenant_id, conversation_id) DO NOTHING$$);
SELECT pg_temp.try(format($$INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, question_neutral)
                     VALUES ('A', 'sx', %L, 1, 'r1', 'A: same keys as B')$$, (SELECT id FROM ids WHERE name = 'b-sx')));
SELECT tenant_id, session_id, request_id, question_neutral FROM convctx.turn WHERE session_id = 'sx';
ROLLBACK;
RESET ROLE;
REVOKE ALL ON convctx.turn, convctx.conversation_context FROM tenant_a_dml;
REVOKE USAGE ON SCHEMA convctx FROM tenant_a_dml;
SELECT pg_temp.b_changed_rows();

------------------------------------------------------------------------------
-- 5. Binding rules
------------------------------------------------------------------------------
-- a bound role that sets convctx.tenant to another tenant gets 42501 on its next call,
-- and nothing of that tenant
SET ROLE tenant_a_app;
SET convctx.tenant = 'B';
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$);
SELECT pg_temp.try($$SELECT convctx.recent_turns_json('s1')$$);
SELECT pg_temp.try($$SELECT convctx.start_turn('sx', 'r1', 'A: hijack')$$);
SELECT pg_temp.try($$SELECT convctx.context_load('sx')$$);
SELECT pg_temp.try($$SELECT convctx.is_followup('and then?', 'sx')$$);
-- naming its own tenant is fine
SET convctx.tenant = 'A';
SELECT convctx.current_tenant(), convctx.recent_turns_json('s1');
RESET convctx.tenant;
RESET ROLE;
-- the same through the tables
SET ROLE tenant_a_admin;
SET convctx.tenant = 'B';
SELECT pg_temp.try($$SELECT count(*) FROM convctx.sessions$$);
SELECT pg_temp.try($$SELECT count(*) FROM convctx.audit$$);
SELECT pg_temp.try($$SELECT count(*) FROM convctx.admin_session_turns('sx')$$);
SELECT pg_temp.try($$SELECT convctx.purge()$$);
RESET convctx.tenant;
RESET ROLE;
-- a role that is a member of a bound role (and unbound itself) acts for that tenant
CREATE ROLE tenant_a_member LOGIN IN ROLE tenant_a_app;
SET ROLE tenant_a_member;
SELECT convctx.current_tenant(), convctx.recent_turns_json('s1');
SET convctx.tenant = 'B';
SELECT pg_temp.try($$SELECT convctx.recent_turns_json('s1')$$);
RESET convctx.tenant;
RESET ROLE;
-- membership is looked up afresh: with tenant_a_app revoked, the member is bound to
-- nothing, so it acts for no tenant
REVOKE tenant_a_app FROM tenant_a_member;
GRANT convctx_app TO tenant_a_member;
SET ROLE tenant_a_member;
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$);
RESET ROLE;
-- a member of roles bound to different tenants acts for neither
CREATE ROLE tenant_ab_member LOGIN IN ROLE tenant_a_app, tenant_b_app;
SET ROLE tenant_ab_member;
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$);
SELECT pg_temp.try($$SELECT convctx.recent_turns_json('s1')$$);
SET convctx.tenant = 'A';
SELECT pg_temp.try($$SELECT convctx.recent_turns_json('s1')$$);
RESET convctx.tenant;
RESET ROLE;
-- binding the role itself decides
SELECT convctx.bind_role_tenant('tenant_ab_member', 'B');
SET ROLE tenant_ab_member;
SELECT convctx.current_tenant();
RESET ROLE;
-- rebinding takes effect at once
SELECT convctx.bind_role_tenant('tenant_ab_member', 'A');
SET ROLE tenant_ab_member;
SELECT convctx.current_tenant();
RESET ROLE;
-- binding the same tenant again changes nothing (and is not audited again)
SELECT convctx.bind_role_tenant('tenant_ab_member', 'A');
-- a bound admin cannot bind or unbind anybody, itself included
SET ROLE tenant_a_admin;
SELECT pg_temp.try($$SELECT convctx.bind_role_tenant('tenant_a_admin', 'B')$$);
SELECT pg_temp.try($$SELECT convctx.unbind_role_tenant('tenant_a_admin')$$);
SELECT pg_temp.try($$SELECT convctx.bind_role_tenant('tenant_a_member', 'A')$$);
SELECT pg_temp.try($$SELECT convctx.unbind_role_tenant('tenant_b_app')$$);
SELECT pg_temp.try($$SELECT convctx.bind_role_all_tenants('tenant_a_admin')$$);
RESET ROLE;
-- and the app roles cannot call them at all
SET ROLE tenant_a_app;
SELECT pg_temp.try($$SELECT convctx.unbind_role_tenant('tenant_a_app')$$);
RESET ROLE;
-- unbind_role_tenant says whether there was a binding
SELECT convctx.unbind_role_tenant('tenant_ab_member') AS was_bound;
SELECT convctx.unbind_role_tenant('tenant_ab_member') AS was_bound;
SET ROLE tenant_ab_member;
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$);
RESET ROLE;
-- bad arguments: roles are named exactly as in pg_roles, and must exist to be bound
SELECT pg_temp.try($$SELECT convctx.bind_role_tenant(NULL, 'A')$$);
SELECT pg_temp.try($$SELECT convctx.bind_role_tenant('tenant_ab_member', NULL)$$);
SELECT pg_temp.try($$SELECT convctx.bind_role_tenant('', 'A')$$);
SELECT pg_temp.try(format('SELECT convctx.bind_role_tenant(%L, %L)', 'tenant_ab_member', repeat('x', 1025)));
SELECT pg_temp.try(format('SELECT convctx.bind_role_tenant(%L, %L)', repeat('r', 64), 'A'));
SELECT pg_temp.try($$SELECT convctx.bind_role_tenant('no_such_role', 'A')$$);
SELECT pg_temp.try($$SELECT convctx.bind_role_tenant('TENANT_AB_MEMBER', 'A')$$);
SELECT pg_temp.try($$SELECT convctx.bind_role_all_tenants(NULL)$$);
SELECT pg_temp.try($$SELECT convctx.bind_role_all_tenants('no_such_role')$$);
SELECT pg_temp.try($$SELECT convctx.unbind_role_tenant(NULL)$$);
SELECT pg_temp.try($$SELECT convctx.unbind_role_tenant('')$$);
SELECT convctx.unbind_role_tenant('no_such_role') AS was_bound;
SELECT role_name, tenant_id FROM convctx.role_tenant ORDER BY role_name;
-- bindings are audited in the tenant they concern
SELECT tenant_id, action, details FROM convctx.audit_log
WHERE action IN ('bind_role_tenant', 'bind_role_all_tenants', 'unbind_role_tenant') ORDER BY logged_at, audit_id;
-- fail closed: a role that is bound to nothing acts for no tenant, whatever
-- convctx.tenant says; every tenant-scoped function refuses it, with a hint
CREATE ROLE tenant_free_app LOGIN IN ROLE convctx_app;
SET ROLE tenant_free_app;
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$);
SET convctx.tenant = 'B';
SELECT pg_temp.try($$SELECT convctx.recent_turns_json('sx')$$);
SELECT pg_temp.try($$SELECT convctx.start_turn('sx', 'r9', 'free: hijack')$$);
SELECT pg_temp.try($$SELECT convctx.context_load('sx')$$);
SELECT pg_temp.try($$SELECT convctx.link_session('u1', 'sx')$$);
SELECT pg_temp.try($$SELECT convctx.conversation_state('sx')$$);
RESET convctx.tenant;
RESET ROLE;
-- (pure functions that touch no tenant's data still work for it)
SET ROLE tenant_free_app;
SELECT convctx.context_merge('{"activeNodeIds": ["a"]}', ARRAY['b']);
RESET ROLE;
-- bound to every tenant, it acts for the tenant convctx.tenant names, request by request
SELECT convctx.bind_role_all_tenants('tenant_free_app');
SET ROLE tenant_free_app;
SELECT convctx.current_tenant() = '' AS default_tenant;
SET convctx.tenant = 'B';
SELECT convctx.current_tenant(), convctx.recent_turns_json('sx');
SET convctx.tenant = 'A';
SELECT convctx.current_tenant(), convctx.recent_turns_json('sx');
RESET convctx.tenant;
RESET ROLE;
-- the single-tenant set-up: one line binds the role to the default tenant ''
SELECT convctx.bind_role_tenant('tenant_free_app', '');
SET ROLE tenant_free_app;
SELECT convctx.current_tenant() = '' AS default_tenant;
SET convctx.tenant = 'B';
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$);
RESET convctx.tenant;
RESET ROLE;
-- an administrator bound to every tenant manages bindings (a platform administrator);
-- one bound to a tenant never does (above)
CREATE ROLE tenant_platform_admin LOGIN IN ROLE convctx_admin;
SELECT convctx.bind_role_all_tenants('tenant_platform_admin');
SET ROLE tenant_platform_admin;
SELECT convctx.bind_role_tenant('tenant_free_app', 'B');
SELECT role_name, tenant_id, all_tenants, role_exists FROM convctx.bindings() ORDER BY role_name;
SELECT tenant, sessions FROM convctx.stats ORDER BY tenant;
SELECT convctx.unbind_role_tenant('tenant_free_app');
RESET ROLE;
-- an unbound administrator can neither bind nor unbind, nor read anything
CREATE ROLE tenant_unbound_admin LOGIN IN ROLE convctx_admin;
SET ROLE tenant_unbound_admin;
SELECT pg_temp.try($$SELECT convctx.bind_role_tenant('tenant_unbound_admin', 'A')$$);
SELECT pg_temp.try($$SELECT convctx.bind_role_all_tenants('tenant_unbound_admin')$$);
SELECT pg_temp.try($$SELECT convctx.unbind_role_tenant('tenant_a_app')$$);
SELECT pg_temp.try($$SELECT * FROM convctx.sessions$$);
SELECT pg_temp.try($$SELECT * FROM convctx.stats$$);
SELECT pg_temp.try($$SELECT * FROM convctx.audit$$);
SELECT pg_temp.try($$SELECT * FROM convctx.unresolved_bindings()$$);
SELECT pg_temp.try($$SELECT convctx.purge()$$);
RESET ROLE;
-- the superuser acts for the tenant convctx.tenant names ('' when empty)
SELECT convctx.current_tenant() = '' AS default_tenant;
-- SET ROLE cannot leave a binding behind: a bound session that switches to an
-- unbound role it is a member of (convctx_app, convctx_admin) stays bound
SET SESSION AUTHORIZATION tenant_a_app;
SET ROLE convctx_app;
SELECT convctx.current_tenant();
SET convctx.tenant = 'B';
SELECT pg_temp.try($$SELECT convctx.recent_turns_json('s1')$$);
SELECT pg_temp.try($$SELECT convctx.start_turn('s1', 'r1', 'A: hijack')$$);
RESET convctx.tenant;
RESET ROLE;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION tenant_a_admin;
SET ROLE convctx_admin;
SELECT pg_temp.try($$SELECT convctx.unbind_role_tenant('tenant_a_admin')$$);
SET convctx.tenant = 'B';
SELECT pg_temp.try($$SELECT count(*) FROM convctx.sessions$$);
RESET convctx.tenant;
SELECT count(*) FILTER (WHERE tenant <> 'A') AS sessions_of_other_tenants FROM convctx.sessions;
RESET ROLE;
RESET SESSION AUTHORIZATION;
-- a session bound to A acting as a role bound to B acts for neither; nor does one
-- bound to A acting as a role bound to every tenant
CREATE ROLE tenant_a_login LOGIN IN ROLE tenant_b_app, tenant_platform_admin;
SELECT convctx.bind_role_tenant('tenant_a_login', 'A');
SET SESSION AUTHORIZATION tenant_a_login;
SELECT convctx.current_tenant();
SET ROLE tenant_b_app;
SELECT pg_temp.try($$SELECT convctx.recent_turns_json('s1')$$);
SET ROLE tenant_platform_admin;
SELECT pg_temp.try($$SELECT convctx.recent_turns_json('s1')$$);
RESET ROLE;
RESET SESSION AUTHORIZATION;
SELECT convctx.unbind_role_tenant('tenant_a_login');
DROP ROLE tenant_a_login;
-- a binding names the role: renamed, the role is bound to nothing (its calls fail,
-- they do not fall back to the setting) until it is bound again under its new name
CREATE ROLE tenant_a_renamed LOGIN IN ROLE convctx_app;
SELECT convctx.bind_role_tenant('tenant_a_renamed', 'A');
ALTER ROLE tenant_a_renamed RENAME TO tenant_a_renamed2;
SET ROLE tenant_a_renamed2;
SET convctx.tenant = 'B';
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$);
SELECT pg_temp.try($$SELECT convctx.recent_turns_json('s1')$$);
RESET convctx.tenant;
RESET ROLE;
-- the old name's binding binds nobody now, and is listed as unresolved
SELECT role_name, tenant_id FROM convctx.unresolved_bindings();
SELECT convctx.unbind_role_tenant('tenant_a_renamed') AS was_bound;
SELECT convctx.bind_role_tenant('tenant_a_renamed2', 'A');
SET ROLE tenant_a_renamed2;
SELECT convctx.current_tenant();
RESET ROLE;
-- a dropped role's binding stays, by name, binding nobody, until it is removed by name
DROP ROLE tenant_a_renamed2;
SELECT role_name, tenant_id FROM convctx.unresolved_bindings();
-- a bound admin sees the unresolved bindings of its own tenant only
SET ROLE tenant_b_admin;
SELECT role_name, tenant_id FROM convctx.unresolved_bindings();
RESET ROLE;
-- a group role bound to A is dropped: its members are bound to nothing, they do not
-- fall back to convctx.tenant
CREATE ROLE tenant_a_group LOGIN;
CREATE ROLE tenant_a_grouped LOGIN IN ROLE tenant_a_group, convctx_app;
SELECT convctx.bind_role_tenant('tenant_a_group', 'A');
SET ROLE tenant_a_grouped;
SELECT convctx.current_tenant();
RESET ROLE;
DROP ROLE tenant_a_group;
SET ROLE tenant_a_grouped;
SET convctx.tenant = 'A';
SELECT pg_temp.try($$SELECT convctx.recent_turns_json('s1')$$);
RESET convctx.tenant;
RESET ROLE;
SELECT convctx.unbind_role_tenant(r) AS was_bound
FROM unnest(ARRAY['tenant_a_renamed2', 'tenant_a_group']) r;
SELECT count(*) AS unresolved FROM convctx.unresolved_bindings();
DROP ROLE tenant_a_grouped;
-- plain DML on the table (a manual fix, a restore) is seen at once, like the functions
INSERT INTO convctx.role_tenant (role_name, tenant_id) VALUES ('tenant_free_app', 'B');
SET ROLE tenant_free_app;
SELECT convctx.current_tenant();
RESET ROLE;
UPDATE convctx.role_tenant SET tenant_id = 'A' WHERE role_name = 'tenant_free_app';
SET ROLE tenant_free_app;
SELECT convctx.current_tenant();
RESET ROLE;
DELETE FROM convctx.role_tenant WHERE role_name = 'tenant_free_app';
SET ROLE tenant_free_app;
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$);
RESET ROLE;
-- B changed in audit rows only since the snapshot: the operator bound tenant_ab_member
-- to B for a while, the platform administrator tenant_free_app; both audited in B (the
-- plain DML on role_tenant is not audited: it is the superuser's own doing)
SELECT tbl, r ->> 'action' AS action, r -> 'details' AS details
FROM ((SELECT * FROM pg_temp.tenant_rows('B') EXCEPT ALL SELECT * FROM b_snapshot)
      UNION ALL (SELECT * FROM b_snapshot EXCEPT ALL SELECT * FROM pg_temp.tenant_rows('B'))) d
ORDER BY 1, 2, 3;
DELETE FROM b_snapshot;
INSERT INTO b_snapshot SELECT * FROM pg_temp.tenant_rows('B');

------------------------------------------------------------------------------
-- 6. A hostile role plants look-alikes of builtins in public and pg_temp: the
-- SECURITY DEFINER functions, whose search_path is pinned, never call them
------------------------------------------------------------------------------
CREATE ROLE tenant_a_hostile LOGIN IN ROLE convctx_app;
SELECT convctx.bind_role_tenant('tenant_a_hostile', 'A');
GRANT CREATE ON SCHEMA public TO tenant_a_hostile;
-- the calls to make, with their arguments fixed now
CREATE TEMP TABLE probe (name text PRIMARY KEY, stmt text);
CREATE TEMP TABLE probe_result (name text, path text, result text);
GRANT SELECT ON probe TO PUBLIC;
GRANT INSERT ON probe_result TO PUBLIC;
INSERT INTO probe SELECT name, format(stmt, (SELECT id FROM ids WHERE ids.name = 'a1-new')) FROM (VALUES
    ('current_tenant', 'SELECT convctx.current_tenant()'),
    ('context_load', $$SELECT convctx.context_load('s1')$$),
    ('context_save', $$SELECT convctx.context_save('s7', '{"activeNodeIds": ["n1", "n2"], "k": "v"}', 'user-7')$$),
    ('context_add', $$SELECT convctx.context_add('s7', ARRAY['n1', 'n2'])$$),
    ('context_merge', $$SELECT convctx.context_merge('{"activeNodeIds": ["a", "b"]}', ARRAY['a', 'c'], 2)$$),
    ('context_aspect', $$SELECT convctx.context_aspect('{"activeNodeIds": ["a"]}', '[{"id": "a", "prefLabel": "Alpha"}]')$$),
    ('start_turn', $$SELECT convctx.start_turn('s1', 'r1', 'ignored', meta => '{"channel": "web", "ip": "192.0.2.1"}')$$),
    ('finalize_turn', $$SELECT convctx.finalize_turn('s1', %1$L, 'A: again answered')$$),
    ('recent_turns', $$SELECT jsonb_agg(r) FROM convctx.recent_turns('s1') r$$),
    ('recent_turns_json', $$SELECT convctx.recent_turns_json('s1')$$),
    ('link_session', $$SELECT convctx.link_session('u1', 's-probe')$$),
    ('conversation_state', $$SELECT convctx.conversation_state('s1')$$),
    ('set_summary', $$SELECT convctx.set_summary('s1', 'A summary again', %1$L, 0)$$),
    ('turns_to_summarize', $$SELECT jsonb_agg(t) FROM convctx.turns_to_summarize('s4', 1) t$$),
    ('render_conversation_state', $$SELECT convctx.render_conversation_state(convctx.conversation_state('s1'))$$),
    ('record_retrieval', $$SELECT convctx.record_retrieval('s1', %1$L, '[{"id": "doc-1", "text": "A chunk again"}]', '[{"id": "doc-1"}]')$$),
    ('context_history', $$SELECT convctx.context_history('s1', 5, '[{"id": "cur", "text": "current"}]')$$),
    ('render_context_history', $$SELECT convctx.render_context_history(convctx.context_history('s1'))$$),
    ('is_followup', $$SELECT convctx.is_followup('Tell me MORE about it, can you elaborate?', 's1')$$),
    ('record_clarification', $$SELECT convctx.record_clarification('s1', %1$L, '[{"id": "q", "question": "which?"}]', '{}')$$),
    ('clarification_context', $$SELECT convctx.clarification_context('s1', %1$L, '{"q": "that one"}')$$),
    ('render_clarification', $$SELECT convctx.render_clarification(convctx.clarification_context('s1', %1$L))$$)
) v(name, stmt);
CREATE FUNCTION pg_temp.run_probes(path text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    p record;
    r text;
BEGIN
    FOR p IN SELECT name, stmt FROM probe ORDER BY name LOOP
        EXECUTE p.stmt INTO r;
        INSERT INTO probe_result VALUES (p.name, path, r);
    END LOOP;
END $$;
-- every call once with the ordinary search_path
SET ROLE tenant_a_hostile;
SELECT convctx.context_save('s7', '{"activeNodeIds": ["n1", "n2"], "k": "v"}', 'user-7');
SELECT convctx.finalize_turn('s4', convctx.start_turn('s4', 'r' || i, 'A: s4 question ' || i), 'A: s4 answer ' || i)
FROM generate_series(1, 2) i;
SELECT pg_temp.run_probes('ordinary');
RESET ROLE;
-- the look-alikes: functions, an aggregate and operators that announce themselves
SET ROLE tenant_a_hostile;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.now() called'; RETURN '2000-01-01'; END $$;
CREATE FUNCTION public.statement_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.statement_timestamp() called'; RETURN '2000-01-01'; END $$;
CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.clock_timestamp() called'; RETURN '2000-01-01'; END $$;
CREATE FUNCTION public.gen_random_uuid() RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.gen_random_uuid() called'; RETURN '00000000-0000-4000-8000-00000000dead'; END $$;
CREATE FUNCTION public.lower(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.lower() called'; RETURN 'planted'; END $$;
CREATE FUNCTION public.jsonb_typeof(jsonb) RETURNS text LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.jsonb_typeof() called'; RETURN 'object'; END $$;
CREATE FUNCTION public.make_interval(secs double precision) RETURNS interval LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.make_interval() called'; RETURN '0'; END $$;
CREATE FUNCTION public.count_step(bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.count(*) called'; RETURN 1000; END $$;
CREATE AGGREGATE public.count(*) (sfunc = public.count_step, stype = bigint, initcond = '0');
CREATE FUNCTION public.text_eq_planted(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.= (text, text) called'; RETURN true; END $$;
CREATE OPERATOR public.= (leftarg = text, rightarg = text, function = public.text_eq_planted);
CREATE FUNCTION public.uuid_eq_planted(uuid, uuid) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.= (uuid, uuid) called'; RETURN true; END $$;
CREATE OPERATOR public.= (leftarg = uuid, rightarg = uuid, function = public.uuid_eq_planted);
CREATE FUNCTION public.bigint_lt_planted(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.< (bigint, bigint) called'; RETURN true; END $$;
CREATE OPERATOR public.< (leftarg = bigint, rightarg = bigint, function = public.bigint_lt_planted);
CREATE FUNCTION public.jsonb_concat_planted(jsonb, jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted public.|| (jsonb, jsonb) called'; RETURN '{"planted": true}'; END $$;
CREATE OPERATOR public.|| (leftarg = jsonb, rightarg = jsonb, function = public.jsonb_concat_planted);
-- in pg_temp: functions named like builtins, and tables named like convctx's
CREATE FUNCTION pg_temp.lower(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted pg_temp.lower() called'; RETURN 'planted'; END $$;
CREATE FUNCTION pg_temp.jsonb_typeof(jsonb) RETURNS text LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted pg_temp.jsonb_typeof() called'; RETURN 'object'; END $$;
CREATE FUNCTION pg_temp.gen_random_uuid() RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'planted pg_temp.gen_random_uuid() called'; RETURN '00000000-0000-4000-8000-00000000dead'; END $$;
CREATE TABLE pg_temp.turn (tenant_id text, session_id text, turn_id uuid, turn_no bigint, request_id text,
    question_neutral text, answer_neutral text, finalized_at timestamptz, deleted_at timestamptz,
    replaced_by_turn_id uuid);
CREATE TABLE pg_temp.session (tenant_id text, session_id text, identity_id text, last_turn_no bigint);
CREATE TABLE pg_temp.followup_phrase (tenant_id text, kind text, phrase text, builtin boolean);
CREATE TABLE public.turn (tenant_id text, session_id text, turn_id uuid, turn_no bigint, request_id text,
    question_neutral text, answer_neutral text);
CREATE TABLE public.conversation_context (tenant_id text, conversation_id text, context_json jsonb);
INSERT INTO pg_temp.turn (tenant_id, session_id, turn_id, turn_no, request_id, question_neutral, answer_neutral, finalized_at)
VALUES ('A', 's1', '00000000-0000-4000-8000-00000000dead', 9, 'r9', 'planted question', 'planted answer', '2000-01-01');
INSERT INTO pg_temp.followup_phrase VALUES ('A', 'fresh_keyword', 'more', false);
INSERT INTO public.conversation_context (tenant_id, conversation_id, context_json) VALUES ('A', 's1', '{"activeNodeIds": ["planted"]}');
-- and a search_path that would find them first
SET search_path = pg_temp, public, pg_catalog, convctx;
-- (the look-alikes work: an unqualified call of the hostile role's own finds them)
SELECT now() = '2000-01-01' AS planted_now;
-- every call again
SELECT pg_temp.run_probes('hostile');
RESET search_path;
RESET ROLE;
-- the same results (shown with times and turn ids masked), and no planted object
-- announced itself above
SELECT o.name, o.result IS NOT DISTINCT FROM h.result AS same_result,
       regexp_replace(regexp_replace(o.result,
           '\d{4}-\d\d-\d\dT[0-9:.]+[+-]\d\d(:\d\d)?', '<time>', 'g'),
           '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<turn>', 'g') AS result
FROM probe_result o JOIN probe_result h ON h.name = o.name AND h.path = 'hostile'
WHERE o.path = 'ordinary' ORDER BY o.name;
-- writes that cannot be repeated: a new turn and a correction, made under the hostile path
SET ROLE tenant_a_hostile;
SET search_path = pg_temp, public, pg_catalog, convctx;
INSERT INTO ids SELECT 'h1', convctx.start_turn('s1', 'h1', 'hostile question', meta => '{"ip": "192.0.2.1"}');
SELECT convctx.finalize_turn('s1', id, 'hostile answer') FROM ids WHERE name OPERATOR(pg_catalog.=) 'h1';
INSERT INTO ids SELECT 'h1v2', convctx.replace_turn('s1', id, 'hostile answer, corrected') FROM ids WHERE name OPERATOR(pg_catalog.=) 'h1';
RESET search_path;
RESET ROLE;
SELECT tenant_id, turn_no, request_id, record_version, question_neutral, answer_neutral,
       turn_id <> '00000000-0000-4000-8000-00000000dead' AS real_turn_id,
       created_at > '2001-01-01' AND finalized_at > '2001-01-01' AS real_timestamps,
       metadata IS NULL OR NOT (metadata ? 'ip' OR metadata ? 'ip_hash') AS no_ip_trace_without_key,
       replaced_by_turn_id IS NOT NULL AS replaced
FROM convctx.turn WHERE request_id = 'h1' ORDER BY record_version;
SELECT tenant_id, conversation_id, context_json, user_id, updated_at > '2001-01-01' AS real_timestamp
FROM convctx.conversation_context WHERE conversation_id = 's7';
-- the admin functions, under the same search_path, with the look-alikes still in place
-- (the retention settings still expire everything older than an hour: A's rows are new)
SET ROLE tenant_a_admin;
SET search_path = pg_temp, public, pg_catalog, convctx;
SELECT convctx.redact_turn('s1', id) FROM ids WHERE name OPERATOR(pg_catalog.=) 'h1v2';
SELECT convctx.redact_session('s4');
SELECT convctx.erase_identity('u1');
SELECT * FROM convctx.retention_settings();
SELECT convctx.purge();
CALL convctx.purge_all();
RESET search_path;
RESET ROLE;
SELECT tenant_id, session_id, turn_no, request_id, record_version, question_neutral, answer_neutral,
       deleted_at IS NOT NULL AS redacted
FROM convctx.turn WHERE tenant_id = 'A' ORDER BY session_id, turn_no, record_version;
SELECT tenant_id, action, details - 'turn_id' AS details FROM convctx.audit_log
WHERE coalesce(acting_role, role_name) = 'tenant_a_admin' AND action IN ('redact_turn', 'redact_session', 'erase_identity', 'purge')
ORDER BY logged_at DESC, audit_id DESC LIMIT 5;
SELECT pg_temp.b_changed_rows();
REVOKE CREATE ON SCHEMA public FROM tenant_a_hostile;
DROP OWNED BY tenant_a_hostile;

------------------------------------------------------------------------------
-- 7. Cleanup: the roles are cluster-wide; leave the cluster as we found it
------------------------------------------------------------------------------
-- an unbound role purges every tenant: now B's expired rows go too
SELECT convctx.purge();
SELECT tenant_id, count(*) AS turns FROM convctx.turn GROUP BY 1 ORDER BY 1;
RESET convctx.session_ttl;
RESET convctx.turn_retention;
RESET convctx.context_ttl;
SELECT convctx.unbind_role_tenant(r) AS unbound
FROM unnest(ARRAY['tenant_a_app', 'tenant_b_app', 'tenant_a_admin', 'tenant_b_admin', 'tenant_a_dml',
                  'tenant_a_hostile', 'tenant_platform_admin']) r;
SELECT count(*) AS bindings_left FROM convctx.role_tenant;
DELETE FROM convctx.followup_phrase WHERE NOT builtin;
DROP TABLE ids, b_snapshot, probe, probe_result;
DROP OWNED BY tenant_a_app, tenant_b_app, tenant_a_admin, tenant_b_admin, tenant_a_dml,
    tenant_a_member, tenant_ab_member, tenant_free_app, tenant_a_hostile, tenant_platform_admin,
    tenant_unbound_admin;
DROP ROLE tenant_a_app, tenant_b_app, tenant_a_admin, tenant_b_admin, tenant_a_dml,
    tenant_a_member, tenant_ab_member, tenant_free_app, tenant_a_hostile, tenant_platform_admin,
    tenant_unbound_admin;
SELECT count(*) AS test_roles_left FROM pg_catalog.pg_roles
WHERE rolname IN ('tenant_a_app', 'tenant_b_app', 'tenant_a_admin', 'tenant_b_admin', 'tenant_a_dml',
                  'tenant_a_member', 'tenant_ab_member', 'tenant_free_app', 'tenant_a_hostile',
                  'tenant_platform_admin', 'tenant_unbound_admin', 'tenant_a_login', 'tenant_a_renamed',
                  'tenant_a_renamed2', 'tenant_a_group', 'tenant_a_grouped',
                  'convctx_no_grants');
