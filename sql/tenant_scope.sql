-- The tenant per transaction (0.5.0): convctx.use_tenant, and the setting
-- convctx.tenant_scope that refuses a convctx.tenant left by an earlier
-- transaction, as a pooler in transaction mode leaves it to the next client
-- of a server connection (test/t/015_pgbouncer.pl runs the same through
-- pgbouncer).
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification,
         convctx.role_tenant;
SET client_min_messages = warning;
DROP ROLE IF EXISTS scope_service, scope_acme;
RESET client_min_messages;
CREATE ROLE scope_service IN ROLE convctx_app;
CREATE ROLE scope_acme IN ROLE convctx_app;
SELECT convctx.bind_role_all_tenants('scope_service'), convctx.bind_role_tenant('scope_acme', 'acme');

\i test/helpers.sql
GRANT EXECUTE ON FUNCTION pg_temp.try(text) TO PUBLIC;

-- Only superusers change the scope, so an app cannot switch the guard off.
SHOW convctx.tenant_scope;
SET ROLE scope_service;
SELECT pg_temp.try($$SET convctx.tenant_scope = session$$);
RESET ROLE;

-- The PostgreSQL default, scope "session": a committed SET serves every
-- later transaction of the connection (the leak of a pooled connection).
SET ROLE scope_service;
SET convctx.tenant = 'acme';
SELECT convctx.current_tenant() AS later_transaction;
RESET convctx.tenant;
RESET ROLE;

-- Scope "transaction" for the service role (as ALTER ROLE scope_service SET
-- convctx.tenant_scope = transaction would give it at login).
SET convctx.tenant_scope = transaction;
SET ROLE scope_service;
-- a value committed by an earlier transaction is refused, even '' (the default)
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$) AS default_value;
SET convctx.tenant = 'acme';
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$) AS committed_by_earlier_set;
-- and a write refused that way writes nothing
SELECT pg_temp.try($$SELECT convctx.start_turn('s1', 'r1', 'Q')$$) AS start_turn;

-- use_tenant: for this transaction only
BEGIN;
SELECT convctx.use_tenant('acme');
SELECT convctx.current_tenant(), convctx.finalize_turn('s1', convctx.start_turn('s1', 'r1', 'Q'), 'A');
SHOW convctx.tenant;
COMMIT;
SHOW convctx.tenant;
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$) AS after_commit;
-- the same request again, in a transaction of its own: the same turn, one row
BEGIN;
SELECT convctx.use_tenant('globex');
SELECT count(*) AS globex_turns FROM convctx.recent_turns('s1', 10);
SELECT convctx.use_tenant('acme');
SELECT count(*) AS acme_turns FROM convctx.recent_turns('s1', 10);
COMMIT;
-- outside a transaction block it would end with its own statement: refused
SELECT convctx.use_tenant('acme');
\echo :LAST_ERROR_SQLSTATE
SELECT pg_temp.try($$SELECT convctx.use_tenant(NULL)$$) AS null_tenant;
BEGIN;
SELECT pg_temp.try(format('SELECT convctx.use_tenant(%L)', repeat('t', 1025))) AS too_long;
ROLLBACK;

-- SET LOCAL and set_config(..., true) are the same thing
BEGIN;
SET LOCAL convctx.tenant = 'acme';
SELECT convctx.current_tenant() AS set_local;
COMMIT;
BEGIN;
SELECT set_config('convctx.tenant', 'acme', true);
SELECT convctx.current_tenant() AS set_config_local;
COMMIT;
-- a plain SET counts in the transaction that ran it, not in the next one
BEGIN;
SET convctx.tenant = 'globex';
SELECT convctx.current_tenant() AS plain_set_same_transaction;
COMMIT;
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$) AS plain_set_next_transaction;
-- a savepoint rolled back takes its setting with it; the outer one stays
BEGIN;
SELECT convctx.use_tenant('acme');
SAVEPOINT sp;
SELECT convctx.use_tenant('globex');
ROLLBACK TO SAVEPOINT sp;
SELECT convctx.current_tenant() AS outer_setting_kept;
COMMIT;
BEGIN;
SAVEPOINT sp;
SET LOCAL convctx.tenant = 'acme';
ROLLBACK TO SAVEPOINT sp;
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$) AS inner_setting_gone;
ROLLBACK;
RESET convctx.tenant;
RESET ROLE;

-- A role bound to one tenant needs no setting in any scope; use_tenant
-- cannot move it.
SET ROLE scope_acme;
SELECT convctx.current_tenant() AS bound_role;
BEGIN;
SELECT pg_temp.try($$SELECT convctx.use_tenant('globex')$$) AS bound_role_elsewhere;
ROLLBACK;
BEGIN;
SELECT convctx.use_tenant('acme') AS bound_role_own_tenant;
COMMIT;
RESET ROLE;

-- What was written: the one turn of acme's s1.
SELECT tenant_id, session_id, request_id, turn_no FROM convctx.turn ORDER BY 1, 2, 3;
RESET convctx.tenant_scope;

-- A new backend that loads the library after the SET: the library sees the
-- values the transaction stacked (and not a committed one) all the same.
\c
SET convctx.tenant_scope = transaction;
SET convctx.tenant = 'acme';
DO $$
BEGIN
    PERFORM convctx.current_tenant();
    RAISE NOTICE 'committed before load: ok';
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'committed before load: %: %', SQLSTATE, SQLERRM;
END $$;
\c
SET convctx.tenant_scope = transaction;
BEGIN;
SET LOCAL convctx.tenant = 'acme';
SELECT convctx.current_tenant() AS set_local_before_load;
COMMIT;

SELECT convctx.unbind_role_tenant('scope_service'), convctx.unbind_role_tenant('scope_acme');
DROP ROLE scope_service, scope_acme;
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
