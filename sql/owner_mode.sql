-- Owner mode (0.5.0): nothing the caller can name, create, replace or run
-- is reached while convctx acts as the extension's owner, including
-- between the calls of a set-returning function. Each set-returning
-- function is read through a cursor while a hostile tenant administrator
-- closes, replaces or shadows what it could keep between calls: other
-- cursors (closed under guessed names and declared again over a function
-- of its own), prepared plans, settings, temporary objects.
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification,
         convctx.role_tenant;
SET client_min_messages = warning;
DROP ROLE IF EXISTS om_admin;
RESET client_min_messages;
-- the attacker: a tenant administrator with nothing but the default TEMPORARY
CREATE ROLE om_admin LOGIN IN ROLE convctx_admin, convctx_app;
SELECT convctx.bind_role_tenant('om_admin', 'acme');

SET ROLE om_admin;
SELECT convctx.start_turn('a1', 'r1', 'hello', identity_id => 'u1') AS t1 \gset
SELECT convctx.finalize_turn('a1', :'t1', 'hi');
SELECT convctx.start_turn('a1', 'r2', 'again') IS NOT NULL AS started;
SELECT convctx.context_add('a1', ARRAY['n1'], 'u1') IS NOT NULL AS context;

-- What the attacker runs wherever it can: makes itself a superuser when it
-- runs as one, and says as whom it ran.
CREATE FUNCTION pg_temp.evil() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE om_admin SUPERUSER';
        RETURN 'ran as a superuser';
    END IF;
    RETURN 'ran as ' || current_user;
END $$;
-- Closes every unnamed cursor it can guess the name of, and declares one
-- of its own under each name, over evil(). Returns how many it replaced.
CREATE FUNCTION pg_temp.plant() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    cur refcursor;
    planted integer := 0;
BEGIN
    FOR n IN 1..3000 LOOP
        cur := '<unnamed portal ' || n || '>';
        BEGIN
            CLOSE cur;
            OPEN cur FOR SELECT 'planted'::text, pg_temp.evil();
            planted := planted + 1;
        EXCEPTION WHEN invalid_cursor_name THEN
            NULL;
        END;
    END LOOP;
    RETURN planted;
END $$;

-- 1. export_records and export_messages keep a cursor between calls. The
--    attack of the report: the first row, then the export's cursor closed
--    and one of the attacker's declared under its name, then the rest.
--    The export's cursor is not listed in pg_cursors, a cursor closed
--    under it ends the export with 24000, and the planted one is never
--    fetched.
BEGIN;
DECLARE c CURSOR FOR SELECT convctx.export_records() IS NOT NULL AS got;
FETCH 1 FROM c;
SELECT count(*) AS other_cursors FROM pg_cursors WHERE name <> 'c';
SELECT pg_temp.plant() > 0 AS replaced;
FETCH ALL FROM c;
COMMIT;
SELECT rolsuper AS om_admin_is_superuser FROM pg_roles WHERE rolname = 'om_admin';

BEGIN;
DECLARE c CURSOR FOR SELECT convctx.export_messages() IS NOT NULL AS got;
FETCH 1 FROM c;
SELECT count(*) AS other_cursors FROM pg_cursors WHERE name <> 'c';
SELECT pg_temp.plant() > 0 AS replaced;
FETCH ALL FROM c;
COMMIT;
SELECT rolsuper AS om_admin_is_superuser FROM pg_roles WHERE rolname = 'om_admin';

-- The same in a subtransaction that is rolled back: the cursor it closed
-- stays closed.
BEGIN;
DECLARE c CURSOR FOR SELECT convctx.export_records() IS NOT NULL AS got;
FETCH 1 FROM c;
SAVEPOINT s;
SELECT pg_temp.plant() > 0 AS replaced;
ROLLBACK TO SAVEPOINT s;
FETCH ALL FROM c;
COMMIT;
SELECT rolsuper AS om_admin_is_superuser FROM pg_roles WHERE rolname = 'om_admin';

-- Left alone, an export survives what the caller may change between its
-- calls: plans discarded, another search_path, another TimeZone; every
-- line comes, once.
SELECT count(*) AS lines FROM (SELECT convctx.export_records()) e;
BEGIN;
DECLARE c CURSOR FOR SELECT convctx.export_records() IS NOT NULL AS got;
FETCH 1 FROM c;
DISCARD PLANS;
CREATE TEMP TABLE turn (tenant_id text, session_id text);
SET LOCAL TimeZone = 'Asia/Tokyo';
SET LOCAL search_path = pg_temp, public;
FETCH ALL FROM c;
COMMIT;
RESET search_path;
DROP TABLE pg_temp.turn;

-- 2. Every other set-returning function builds its whole result in its
--    first call and keeps nothing between calls: read through a cursor
--    while every other cursor is closed and replaced, it returns its own
--    rows, all of them.
CREATE FUNCTION pg_temp.read_through(call text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    c refcursor := 'om_read';
    alone bigint;
    attacked bigint := 0;
    r record;
BEGIN
    EXECUTE 'SELECT count(*) FROM (SELECT ' || call || ') f' INTO alone;
    OPEN c FOR EXECUTE 'SELECT ' || call || '::text AS row';
    LOOP
        FETCH c INTO r;
        EXIT WHEN NOT FOUND;
        IF attacked = 0 THEN
            PERFORM pg_temp.plant();
        END IF;
        IF r.row LIKE '%planted%' THEN
            RETURN 'read a planted cursor';
        END IF;
        attacked := attacked + 1;
    END LOOP;
    CLOSE c;
    RETURN CASE WHEN attacked = alone AND alone > 0 THEN 'all ' || alone || ' rows'
                ELSE attacked || ' rows of ' || alone END;
END $$;
SELECT fn, pg_temp.read_through(call) FROM (VALUES
    ('recent_turns', 'convctx.recent_turns(''a1'')'),
    ('turns_to_summarize', 'convctx.turns_to_summarize(''a1'', 1)'),
    ('list_conversations', 'convctx.list_conversations(''u1'')'),
    ('conversation_turns', 'convctx.conversation_turns(''a1'')'),
    ('admin_sessions', 'convctx.admin_sessions()'),
    ('admin_stats', 'convctx.admin_stats()'),
    ('admin_audit', 'convctx.admin_audit()'),
    ('admin_session_turns', 'convctx.admin_session_turns(''a1'')'),
    ('bindings', 'convctx.bindings()'),
    ('unresolved_bindings', 'convctx.unresolved_bindings()'),
    ('import_records', 'convctx.import_records(ARRAY[''{"type": "context", "conversation_id": "c9", "context": {}, "user_id": null, "created_at": "2026-01-01T00:00:00+00:00", "updated_at": "2026-01-01T00:00:00+00:00"}''])')
) AS calls(fn, call);
SELECT rolsuper AS om_admin_is_superuser FROM pg_roles WHERE rolname = 'om_admin';

-- 3. Statements convctx prepares in a backend whose caller shadowed what
--    they use (temporary tables named like convctx's, an operator and
--    functions of its own in pg_temp, first on search_path, prepared
--    statements and cursors under convctx-like names) run nothing of the
--    caller's: evil() logs every run in a temporary table, which stays
--    empty.
\c -
SET ROLE om_admin;
CREATE TEMP TABLE ran (as_whom text);
CREATE FUNCTION pg_temp.evil_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pg_temp.ran VALUES (current_user);
    RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR pg_temp.= (LEFTARG = text, RIGHTARG = text, FUNCTION = pg_temp.evil_eq);
CREATE FUNCTION pg_temp.jsonb_build_object(VARIADIC text[]) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pg_temp.ran VALUES (current_user);
    RETURN '{}';
END $$;
CREATE FUNCTION pg_temp.evil() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pg_temp.ran VALUES (current_user);
    RETURN current_user;
END $$;
CREATE TEMP TABLE session (tenant_id text, session_id text);
CREATE TEMP TABLE turn (tenant_id text, session_id text);
SET search_path = pg_temp, public;
PREPARE p1 AS SELECT 1;
BEGIN;
DECLARE "<unnamed portal 1>" CURSOR FOR SELECT pg_temp.evil();
SELECT convctx.start_turn('a2', 'r1', 'shadowed?', identity_id => 'u1') AS t2 \gset
SELECT convctx.finalize_turn('a2', :'t2', 'no');
SELECT repeated, history FROM convctx.begin_turn('a2', 'r2', 'shadowed too?');
SELECT count(*) AS turns FROM convctx.recent_turns('a2');
SELECT count(*) AS lines FROM (SELECT convctx.export_records()) e;
SELECT count(*) AS lines FROM (SELECT convctx.export_messages()) e;
-- an import of what is there already: the merge reads and compares, as the owner
SELECT sum(imported) AS imported, sum(skipped) AS skipped
FROM convctx.import_records(ARRAY(SELECT line FROM convctx.export_records('a2')));
SELECT count(*) AS conversations FROM convctx.list_conversations('u1');
SELECT count(*) AS turns FROM convctx.conversation_turns('a2');
SELECT convctx.recent_turns_json('a2') IS NOT NULL AS json;
SELECT convctx.context_save('a2', '{"activeNodeIds": ["n1"]}', 'u1') IS NOT NULL AS saved;
SELECT convctx.context_add('a2', ARRAY['n2']) IS NOT NULL AS added;
SELECT convctx.context_load('a2') IS NOT NULL AS loaded;
SELECT convctx.record_retrieval('a2', :'t2', '[{"id": "c1", "text": "x"}]');
SELECT convctx.context_history('a2') IS NOT NULL AS history;
SELECT convctx.record_clarification('a2', :'t2', '[{"question": "which?"}]', '{}');
SELECT convctx.clarification_context('a2', :'t2') IS NOT NULL AS clarified;
SELECT convctx.conversation_state('a2') IS NOT NULL AS state;
SELECT convctx.is_followup('and that?', 'a2') IS NOT NULL AS followup;
SELECT convctx.set_session_title('a2', 'title');
SELECT convctx.replay_conversation('a2') IS NOT NULL AS replayed;
SELECT convctx.start_turn('a4', 'r1', 'anonymous') IS NOT NULL AS started;
SELECT convctx.link_session('u2', 'a4');
SELECT count(*) AS rows FROM convctx.admin_sessions();
SELECT count(*) AS rows FROM convctx.admin_session_turns('a2');
SELECT count(*) AS rows FROM convctx.admin_audit();
SELECT convctx.redact_turn('a2', :'t2') IS NOT NULL AS redacted,
       convctx.redact_session('a1') IS NOT NULL AS redacted_session,
       convctx.erase_identity('u2') IS NOT NULL AS erased,
       convctx.purge() IS NOT NULL AS purged;
COMMIT;
-- purge_all commits between passes, so it has no pinned search_path of its
-- own: what it runs as the owner is qualified throughout
CALL convctx.purge_all();
SELECT count(*) AS runs_of_the_callers_code FROM pg_temp.ran;
RESET search_path;
RESET ROLE;
SELECT rolsuper AS om_admin_is_superuser FROM pg_roles WHERE rolname = 'om_admin';

-- 4. A stretch of owner mode is a security-restricted operation whose
--    setting changes are undone when it ends: even code that should never
--    run as the owner (here a trigger a superuser put on convctx.turn,
--    standing in for a future mistake) cannot create temporary objects or
--    SET ROLE there, and what it sets does not outlive the call.
CREATE FUNCTION public.om_probe() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        CREATE TEMP TABLE om_probe_temp (i integer);
        RAISE NOTICE 'created a temporary table';
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'temporary table: %', SQLERRM;
    END;
    BEGIN
        SET ROLE om_admin;
        RAISE NOTICE 'SET ROLE ran';
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'SET ROLE: %', SQLERRM;
    END;
    PERFORM set_config('work_mem', '7MB', false);
    RETURN NEW;
END $$;
CREATE TRIGGER om_probe BEFORE INSERT ON convctx.turn FOR EACH ROW EXECUTE FUNCTION public.om_probe();
SET ROLE om_admin;
SELECT convctx.start_turn('a3', 'r1', 'probed') IS NOT NULL AS started;
SHOW work_mem;
RESET ROLE;
DROP TRIGGER om_probe ON convctx.turn;
DROP FUNCTION public.om_probe();

SELECT convctx.unbind_role_tenant('om_admin');
DISCARD TEMP;
DROP ROLE om_admin;
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
