-- A chat request in two calls: begin_turn (start the turn, read what the
-- prompt needs), then finalize_turn; the tenant of either call may be an
-- argument. And the read of a signed-in session stays flat as it grows.
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification,
         convctx.role_tenant;
SET client_min_messages = warning;
DROP ROLE IF EXISTS req_service, req_acme;
RESET client_min_messages;
CREATE ROLE req_service IN ROLE convctx_app;
CREATE ROLE req_acme IN ROLE convctx_app;
SELECT convctx.bind_role_all_tenants('req_service'), convctx.bind_role_tenant('req_acme', 'acme');

\i test/helpers.sql
GRANT EXECUTE ON FUNCTION pg_temp.try(text) TO PUBLIC;

------------------------------------------------------------------------------
-- The two calls
------------------------------------------------------------------------------
-- a new session: no history, no context
SELECT turn_id AS t1, repeated, answer_neutral IS NULL AS no_answer, history, context IS NULL AS no_context
FROM convctx.begin_turn('s1', 'r1', 'What is VAT?') \gset
SELECT :'repeated' AS repeated, :'no_answer' AS no_answer, :'history' AS history, :'no_context' AS no_context;
SELECT convctx.finalize_turn('s1', :'t1', 'A tax on consumption.');
SELECT convctx.context_add('s1', ARRAY['vat', 'eu']) IS NOT NULL AS context_added;
-- the next request gets the pair before it and the conversation's context
SELECT turn_id AS t2, repeated, history, context
FROM convctx.begin_turn('s1', 'r2', 'And in Poland?', identity_id => 'u1') \gset
SELECT :'repeated' AS repeated, :'history' AS history, :'context' AS context;
-- the turn is the one start_turn would have made: numbered, linked, open
SELECT turn_no, request_id, identity_id, question_neutral, finalized_at IS NULL AS open
FROM convctx.turn WHERE session_id = 's1' ORDER BY turn_no;

-- A retry of a request whose answer is stored returns that answer, the
-- same turn, and the history before it (not the turns after it).
SELECT convctx.finalize_turn('s1', :'t2', '23%.');
SELECT convctx.finalize_turn('s1', turn_id, 'Reduced rates exist.')
FROM convctx.begin_turn('s1', 'r3', 'Any reduced rates?');
SELECT turn_id = :'t2' AS same_turn, repeated, answer_neutral, answer_translated, history
FROM convctx.begin_turn('s1', 'r2', 'And in Poland?');
SELECT turn_id = :'t1' AS same_turn, repeated, answer_neutral, history
FROM convctx.begin_turn('s1', 'r1', 'What is VAT?', turn_limit => 1);
-- a retry before the answer was stored: no answer, the same turn to finalize
SELECT turn_id AS t4 FROM convctx.begin_turn('s1', 'r4', 'Since when?') \gset
SELECT turn_id = :'t4' AS same_turn, repeated, answer_neutral IS NULL AS no_answer,
       jsonb_array_length(history) AS pairs
FROM convctx.begin_turn('s1', 'r4', 'Since when?', turn_limit => 2);
-- exactly one turn per request, however often it was begun
SELECT request_id, count(*) FROM convctx.turn WHERE session_id = 's1' GROUP BY 1 ORDER BY 1;
-- A retry reads the history again: an earlier turn answered after the
-- first call is in it, the turn itself and later turns never are.
SELECT turn_id AS late1 FROM convctx.begin_turn('s-late', 'ra', 'First?') \gset
SELECT history AS first_call FROM convctx.begin_turn('s-late', 'rb', 'Second?');
SELECT convctx.finalize_turn('s-late', :'late1', 'First answer.');
SELECT convctx.finalize_turn('s-late', turn_id, 'Third answer.')
FROM convctx.begin_turn('s-late', 'rc', 'Third?');
SELECT repeated, history AS retry FROM convctx.begin_turn('s-late', 'rb', 'Second?');
-- the translated answer of a translated turn comes back too
SELECT convctx.finalize_turn('s1', turn_id, 'Since 1993.', 'Od 1993.')
FROM convctx.begin_turn('s1', 'r4', 'Since when?');
SELECT answer_neutral, answer_translated FROM convctx.begin_turn('s1', 'r4', 'Since when?');
-- a redacted request keeps no answer to give back
SELECT convctx.redact_turn('s1', :'t4');
SELECT repeated, answer_neutral IS NULL AS no_answer, jsonb_array_length(history) AS pairs
FROM convctx.begin_turn('s1', 'r4', 'Since when?');
SELECT pg_temp.try(format($$SELECT convctx.finalize_turn('s1', %L, 'again')$$, :'t4')) AS finalize_redacted;

-- begin_turn and recent_turns_json give the same history
SELECT history = convctx.recent_turns_json('s1', 10) AS same_history
FROM convctx.begin_turn('s1', 'r5', 'Thanks!');

-- The turn of an anonymous session is capped as start_turn's is.
SET convctx.max_session_turns = 2;
SELECT count(*) FROM (SELECT convctx.finalize_turn('cap', turn_id, 'a' || i)
                      FROM generate_series(1, 4) i,
                           LATERAL convctx.begin_turn('cap', 'r' || i, 'q' || i)) f;
SELECT history FROM convctx.begin_turn('cap', 'r5', 'q5');
SELECT count(*) AS kept FROM convctx.turn WHERE session_id = 'cap';
RESET convctx.max_session_turns;

------------------------------------------------------------------------------
-- Bad input: a clear error, nothing written
------------------------------------------------------------------------------
SELECT pg_temp.try($$SELECT * FROM convctx.begin_turn(NULL, 'r', 'q')$$) AS null_session;
SELECT pg_temp.try($$SELECT * FROM convctx.begin_turn('bad', '', 'q')$$) AS empty_request;
SELECT pg_temp.try($$SELECT * FROM convctx.begin_turn('bad', 'r', NULL)$$) AS no_question;
SELECT pg_temp.try($$SELECT * FROM convctx.begin_turn('bad', 'r', 'q', 0)$$) AS no_history;
SELECT pg_temp.try($$SELECT * FROM convctx.begin_turn('bad', 'r', 'q', NULL)$$) AS null_limit;
SELECT pg_temp.try($$SELECT * FROM convctx.begin_turn('bad', 'r', 'q', meta => '[1]')$$) AS meta_array;
SELECT pg_temp.try($$SELECT * FROM convctx.begin_turn('bad', 'r', 'q', tenant => repeat('t', 1025))$$) AS long_tenant;
SELECT pg_temp.try($$SELECT convctx.finalize_turn('bad', gen_random_uuid(), 'a', tenant => repeat('t', 1025))$$) AS long_tenant;
SELECT count(*) AS written FROM convctx.session WHERE session_id = 'bad';
BEGIN READ ONLY;
SELECT pg_temp.try($$SELECT * FROM convctx.begin_turn('bad', 'r', 'q')$$) AS read_only;
ROLLBACK;

------------------------------------------------------------------------------
-- The tenant argument: the tenant of the call only, checked as convctx.tenant
------------------------------------------------------------------------------
SET convctx.tenant_scope = transaction;
SET ROLE req_service;
-- without it (and without use_tenant) the guard of the pooled connection refuses
SELECT pg_temp.try($$SELECT * FROM convctx.begin_turn('p1', 'r1', 'Q')$$) AS no_tenant;
-- with it: one call each, no transaction block, no use_tenant
SELECT turn_id AS p1 FROM convctx.begin_turn('p1', 'r1', 'Q', tenant => 'acme') \gset
SELECT convctx.finalize_turn('p1', :'p1', 'A', tenant => 'acme');
-- and nothing stays behind for the next call
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$) AS after_the_call;
SHOW convctx.tenant;
-- the call acts for the tenant it names: another tenant has no such turn
SELECT pg_temp.try(format($$SELECT convctx.finalize_turn('p1', %L, 'A', tenant => 'other')$$, :'p1'))
       AS other_tenant;
SELECT history FROM convctx.begin_turn('p1', 'r2', 'Q2', tenant => 'acme');
SELECT history FROM convctx.begin_turn('p1', 'r2', 'Q2', tenant => 'other');
-- the empty tenant is a tenant too (a single-tenant database's)
SELECT repeated FROM convctx.begin_turn('p1', 'r1', 'Q', tenant => '');
-- an error inside the call undoes the tenant with everything else
SELECT pg_temp.try($$SELECT * FROM convctx.begin_turn('p1', 'r9', NULL, tenant => 'acme')$$) AS failed;
SELECT pg_temp.try($$SELECT convctx.current_tenant()$$) AS after_the_error;
-- the argument wins over use_tenant for its call, and use_tenant's value stays
BEGIN;
SELECT convctx.use_tenant('other');
SELECT repeated FROM convctx.begin_turn('p1', 'r1', 'Q', tenant => 'acme');
SELECT convctx.current_tenant() AS still;
COMMIT;
RESET ROLE;
SELECT tenant_id, session_id, request_id, answer_neutral FROM convctx.turn
WHERE session_id = 'p1' ORDER BY 1, 3;

-- A role bound to one tenant cannot name another one, and names its own.
SET ROLE req_acme;
SELECT pg_temp.try($$SELECT * FROM convctx.begin_turn('p2', 'r1', 'Q', tenant => 'other')$$) AS other_tenant;
SELECT pg_temp.try($$SELECT convctx.finalize_turn('p1', gen_random_uuid(), 'A', tenant => 'other')$$) AS other_tenant;
SELECT repeated, history FROM convctx.begin_turn('p1', 'r2', 'Q2', tenant => 'acme');
RESET ROLE;
RESET convctx.tenant_scope;
SELECT count(*) AS written FROM convctx.session WHERE session_id = 'p2';

------------------------------------------------------------------------------
-- A signed-in session's read stays flat as it grows: one recent_turns(10)
-- call reads as many shared buffers at 3,000 turns as at 12, give or take
-- the one heap page boundary its ten turns may straddle; with every turn
-- committed on its own, as requests commit, and with all of them written
-- in one transaction.
------------------------------------------------------------------------------
SET convctx.max_session_turns = 100000;
CREATE PROCEDURE pg_temp.turns(session text, n integer) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..n LOOP
        PERFORM convctx.finalize_turn(session, turn_id, 'answer ' || i)
        FROM convctx.begin_turn(session, 'r' || i, 'question ' || i, identity_id => 'u-' || session);
        COMMIT;
    END LOOP;
END $$;
CALL pg_temp.turns('short', 12);
CALL pg_temp.turns('long', 3000);
SELECT count(convctx.finalize_turn('batch', turn_id, 'answer ' || i))
FROM generate_series(1, 3000) i,
     LATERAL convctx.begin_turn('batch', 'r' || i, 'question ' || i, identity_id => 'u-batch');
-- shared buffers of one call (the first call of a backend reads the catalog,
-- and the first read after a large write may prune: measured after those)
CREATE FUNCTION pg_temp.read_buffers(session text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    plan jsonb;
BEGIN
    PERFORM count(*) FROM convctx.recent_turns(session, 10);
    EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM convctx.recent_turns(%L, 10)', session)
        INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::bigint
           + (plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::bigint;
END $$;
SELECT s AS session, (SELECT count(*) FROM convctx.turn t WHERE t.session_id = s) AS turns,
       (SELECT identity_id FROM convctx.session t WHERE t.session_id = s) AS identity_id,
       abs(pg_temp.read_buffers(s) - pg_temp.read_buffers('short')) <= 1 AS flat
FROM (VALUES ('short'), ('long'), ('batch')) v(s);

-- Turns written to one session inside one transaction (a batch, a history
-- replayed through the API) cost the same at the 3,001st as at the 14th:
-- each statement finds the session row where the transaction last put it,
-- not through every version of it the transaction wrote.
CREATE FUNCTION pg_temp.request_buffers(session text, request text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    plan jsonb;
BEGIN
    EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT convctx.finalize_turn(%L, turn_id, ''a'') '
                   'FROM convctx.begin_turn(%L, %L, ''q'', identity_id => ''u-grow'')', session, session, request)
        INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::bigint
           + (plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::bigint;
END $$;
-- (statistics of the tables as they are now, not as TRUNCATE left them,
-- so that the plans are the ones a live database gets)
ANALYZE convctx.turn, convctx.session;
BEGIN;
SELECT count(convctx.finalize_turn('grow', turn_id, 'answer ' || i))
FROM generate_series(1, 12) i, LATERAL convctx.begin_turn('grow', 'r' || i, 'question ' || i, identity_id => 'u-grow');
-- (the first call plans its statements: measured from the second)
SELECT pg_temp.request_buffers('grow', 'r13') > 0 AS planned;
SELECT pg_temp.request_buffers('grow', 'r14') AS at_14 \gset
SELECT count(convctx.finalize_turn('grow', turn_id, 'answer ' || i))
FROM generate_series(15, 3000) i, LATERAL convctx.begin_turn('grow', 'r' || i, 'question ' || i, identity_id => 'u-grow');
SELECT pg_temp.request_buffers('grow', 'r3001') AS at_3001 \gset
COMMIT;
SELECT :at_3001 < 2 * :at_14 AS flat_in_one_transaction;
SELECT last_turn_no, live_turns, live_answers FROM convctx.session WHERE session_id = 'grow';
RESET convctx.max_session_turns;

SELECT convctx.unbind_role_tenant('req_service'), convctx.unbind_role_tenant('req_acme');
DROP ROLE req_service, req_acme;
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
