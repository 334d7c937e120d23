-- convctx.distribute() and what holds once the tables are distributed by Citus.
-- On a single server only the refusal is checked; scripts/citus.sh runs the rest on a
-- 3-node cluster (expected output in test/citus/expected/distributed.out).
SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') AS on_citus \gset
\if :on_citus
-- a second call does what is left to do: nothing
SELECT convctx.distribute();
SELECT logicalrelid::regclass AS tbl, partmethod, column_to_column_name(logicalrelid, partkey) AS by
FROM pg_dist_partition WHERE logicalrelid::regclass::text LIKE 'convctx.%' ORDER BY 1::text;
-- the per-session functions are registered for delegation on their session argument
SELECT count(*) AS delegated_functions FROM pg_dist_object
WHERE classid = 'pg_proc'::regclass AND distribution_argument_index IS NOT NULL
  AND objid::regproc::text LIKE 'convctx.%';
-- what the coordinator's own copies of the tables hold: nothing
SELECT count(*) AS local_turn_pages FROM pg_class WHERE oid = 'convctx.turn'::regclass AND relpages > 0;
\else
-- without Citus: refused, nothing changed
SELECT convctx.distribute();
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS triggers_kept FROM pg_trigger
WHERE tgrelid IN ('convctx.session'::regclass, 'convctx.role_tenant'::regclass) AND NOT tgisinternal;
\endif
-- not for PUBLIC
SELECT has_function_privilege('convctx_admin', 'convctx.distribute()', 'EXECUTE') AS admin_may_distribute;

\if :on_citus
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification, convctx.role_tenant;
SET client_min_messages = warning;
DROP ROLE IF EXISTS dist_a, dist_b, dist_member, dist_all;
RESET client_min_messages;
CREATE ROLE dist_a LOGIN IN ROLE convctx_app;
CREATE ROLE dist_b LOGIN IN ROLE convctx_app;
-- bound to A, and a member of dist_b (bound to B): on a single server it acts for neither
CREATE ROLE dist_member LOGIN IN ROLE dist_b;
CREATE ROLE dist_all LOGIN IN ROLE convctx_app;
SELECT convctx.bind_role_tenant('dist_a', 'A'), convctx.bind_role_tenant('dist_b', 'B'),
       convctx.bind_role_tenant('dist_member', 'A'), convctx.bind_role_all_tenants('dist_all');
SET SESSION AUTHORIZATION dist_b;
SELECT convctx.context_save('sB1', '{"secret": "B"}');
SELECT convctx.start_turn('sB1', 'r1', 'B question', identity_id => 'user-b') IS NOT NULL AS started;
RESET SESSION AUTHORIZATION;

-- calls in a subquery or a CTE run (Citus 13.2 crashes delegating them), for A's rows only
SET SESSION AUTHORIZATION dist_a;
SELECT * FROM (SELECT convctx.context_load('sB1')) s;
WITH x AS (SELECT convctx.context_load('sB1')) SELECT * FROM x;
SELECT count(*) FROM (SELECT * FROM convctx.recent_turns('sB1', 5)) s;
-- a setting naming another tenant is refused, as on a single server
SET convctx.tenant = 'B';
SELECT convctx.context_load('sB1');
\echo :LAST_ERROR_SQLSTATE
RESET convctx.tenant;
RESET SESSION AUTHORIZATION;

-- a member bound elsewhere gets nothing by SET ROLE: not by a plan made before it,
SET SESSION AUTHORIZATION dist_member;
PREPARE p AS SELECT convctx.context_load('sB1');
EXECUTE p;
SET ROLE dist_b;
EXECUTE p;
\echo :LAST_ERROR_SQLSTATE
-- nor by a call inlined from a SQL function,
CREATE FUNCTION pg_temp.load(s text) RETURNS jsonb LANGUAGE sql STABLE AS 'SELECT convctx.context_load(s)';
SELECT pg_temp.load('sB1');
\echo :LAST_ERROR_SQLSTATE
DEALLOCATE p;
RESET ROLE;
RESET SESSION AUTHORIZATION;
DROP FUNCTION pg_temp.load(text);
-- nor by a call that Citus sends into the shards of another table
CREATE TABLE public.dist_ids (id text COLLATE "C");
SELECT create_distributed_table('public.dist_ids', 'id');
INSERT INTO public.dist_ids VALUES ('sB1');
GRANT SELECT ON public.dist_ids TO dist_b, dist_all;
SET SESSION AUTHORIZATION dist_member;
SET ROLE dist_b;
BEGIN;
SET LOCAL citus.propagate_set_commands = 'local';
SET LOCAL citus.allow_nested_distributed_execution = on;
SELECT convctx.context_load(id) FROM public.dist_ids;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
RESET ROLE;
RESET SESSION AUTHORIZATION;
-- dist_b itself still works, on the node it is connected to
SET SESSION AUTHORIZATION dist_b;
SELECT convctx.context_load('sB1');
RESET SESSION AUTHORIZATION;

-- a role bound to every tenant: a call inside a query of a distributed table runs on the
-- shard's node, where the session's convctx.tenant is unknown: refused, never tenant ''
SET SESSION AUTHORIZATION dist_all;
SET convctx.tenant = 'B';
SELECT convctx.context_load('sB1');
SELECT convctx.context_load(id) FROM public.dist_ids;
\echo :LAST_ERROR_SQLSTATE
RESET convctx.tenant;
RESET SESSION AUTHORIZATION;
DROP TABLE public.dist_ids;

-- a refusal's audit row is written on Citus too (by the extension's owner)
SET SESSION AUTHORIZATION dist_b;
SELECT convctx.link_session('intruder', 'sB1');
\echo :LAST_ERROR_SQLSTATE
RESET SESSION AUTHORIZATION;
SELECT tenant_id, action, identity_id FROM convctx.audit_log WHERE action = 'link_refused';

-- what reads many sessions in ways Citus cannot plan refuses clearly
SELECT count(*) FROM convctx.export_records();
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM convctx.import_records(ARRAY['{}']);
\echo :LAST_ERROR_SQLSTATE
-- and the browser and the message export run
SET SESSION AUTHORIZATION dist_b;
SELECT session_id, title, title_is_default, live_turns, linked_later FROM convctx.list_conversations('user-b');
SELECT turn_no, request_id, question, is_current, redacted FROM convctx.conversation_turns('sB1');
SELECT convctx.set_session_title('sB1', 'Renamed');
SELECT convctx.replay_conversation('sB1') ->> 'title' AS title,
       jsonb_array_length(convctx.replay_conversation('sB1') -> 'turns') AS turns;
RESET SESSION AUTHORIZATION;
SET convctx.tenant = 'B';
SELECT line::jsonb -> 'messages' -> 0 ->> 'content' AS first_message FROM convctx.export_messages();
RESET convctx.tenant;

-- a request in two calls: delegated for a bound role, and for a role bound
-- to every tenant that names the tenant in the call
SET SESSION AUTHORIZATION dist_b;
SELECT convctx.finalize_turn('sB1', turn_id, 'B answer') FROM convctx.begin_turn('sB1', 'r1', 'B question');
SELECT turn_id IS NOT NULL AS started, repeated, history FROM convctx.begin_turn('sB1', 'r2', 'B second');
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION dist_all;
SELECT repeated, history FROM convctx.begin_turn('sB1', 'r3', 'B third', tenant => 'B');
SELECT convctx.finalize_turn('sB1', turn_id, 'B third answer', tenant => 'B')
FROM convctx.begin_turn('sB1', 'r3', 'B third', tenant => 'B');
SELECT repeated, answer_neutral, history FROM convctx.begin_turn('sB1', 'r1', 'B question', tenant => 'A');
RESET SESSION AUTHORIZATION;
-- a member bound elsewhere gets nothing of B's by SET ROLE
SET SESSION AUTHORIZATION dist_member;
SET ROLE dist_b;
SELECT history FROM convctx.begin_turn('sB1', 'r4', 'B fourth');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
RESET SESSION AUTHORIZATION;
SELECT tenant_id, request_id, turn_no, answer_neutral FROM convctx.turn WHERE session_id = 'sB1'
ORDER BY 1, 3;

TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.role_tenant;
DROP ROLE dist_a, dist_b, dist_member, dist_all;
\endif
