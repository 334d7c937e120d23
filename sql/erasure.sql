-- Redacted and personal data stay gone: summaries made before a redaction,
-- erasure that leaves no identity in clear.
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
CREATE TEMP TABLE ids (name text PRIMARY KEY, id uuid);
\i test/helpers.sql
-- every row of every convctx table (as superuser) that holds a string, as JSON
CREATE FUNCTION pg_temp.rows_holding(needle text) RETURNS TABLE (tbl text, hits bigint) LANGUAGE plpgsql AS $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class c
              WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'r' ORDER BY c.relname
    LOOP
        tbl := t::text;
        EXECUTE format('SELECT count(*) FROM %s x WHERE strpos(row_to_json(x)::text, $1) > 0', t)
            INTO hits USING needle;
        RETURN NEXT;
    END LOOP;
END $$;

------------------------------------------------------------------------------
-- set_summary: never through a tombstone, never from input older than a redaction
------------------------------------------------------------------------------
-- twelve finalized turns; the window of 4 messages leaves turns 1..10 to summarize
INSERT INTO ids SELECT 'q' || i, convctx.start_turn('sum', 'r' || i, 'question ' || i) FROM generate_series(1, 12) i;
SELECT count(convctx.finalize_turn('sum', id, 'answer ' || substr(name, 2))) FROM ids;
SELECT question_neutral, redactions, previous_summary FROM convctx.turns_to_summarize('sum', 4) ORDER BY created_at, question_neutral;
-- max_turns bounds what one call returns: the oldest first, in steps
SELECT question_neutral, redactions FROM convctx.turns_to_summarize('sum', 4, max_turns => 3);
SELECT convctx.set_summary('sum', 'Summary of 1-3.', (SELECT id FROM ids WHERE name = 'q3'), 0);
SELECT question_neutral, redactions, previous_summary FROM convctx.turns_to_summarize('sum', 4, 3);
SELECT pg_temp.try($$SELECT convctx.turns_to_summarize('sum', 4, 0)$$);
SELECT pg_temp.try($$SELECT convctx.turns_to_summarize('sum', 4, NULL)$$);

-- the reproduced race: the app reads the turns (generation 0) and summarizes them ...
CREATE TEMP TABLE read_before AS SELECT * FROM convctx.turns_to_summarize('sum', 4, 100);
SELECT count(*) AS turns_read, min(redactions) AS generation FROM read_before;
-- ... an administrator redacts turn 5 meanwhile (the stored summary, through turn 3, stays)
SELECT convctx.redact_turn('sum', (SELECT id FROM ids WHERE name = 'q5'));
SELECT redactions FROM convctx.session WHERE session_id = 'sum';
-- ... and the summary of what was read, redacted text included, comes back: refused
SELECT pg_temp.try(format($$SELECT convctx.set_summary('sum', %L, %L, %s)$$,
    (SELECT string_agg(question_neutral, '; ' ORDER BY created_at, question_neutral) FROM read_before),
    (SELECT turn_id FROM read_before WHERE question_neutral = 'question 10'),
    (SELECT min(redactions) FROM read_before)));
SELECT summary, through_turn_no FROM convctx.session_summary WHERE session_id = 'sum';
SELECT strpos(convctx.conversation_state('sum', 4)::text, 'question 5') = 0 AS no_redacted_text;
-- a summary that stops before the redacted turn lost nothing: accepted with the old generation
SELECT convctx.set_summary('sum', 'Summary of 1-4.', (SELECT id FROM ids WHERE name = 'q4'), 0);
SELECT summary, through_turn_no FROM convctx.session_summary WHERE session_id = 'sum';
-- the turns read again come with the new generation, without the tombstone: accepted
SELECT string_agg(question_neutral, '; ' ORDER BY created_at, question_neutral) AS fresh, min(redactions) AS generation,
       min(previous_summary) AS previous_summary
FROM convctx.turns_to_summarize('sum', 4);
SELECT convctx.set_summary('sum', 'Summary of 1-10 without 5.', (SELECT id FROM ids WHERE name = 'q10'), 1);
SELECT s ->> 'summary' AS summary, s -> 'needs_summary' AS needs_summary FROM convctx.conversation_state('sum', 4) s;
-- a redaction after the summary drops it (as before), and a stale summary stays refused
SELECT convctx.redact_turn('sum', (SELECT id FROM ids WHERE name = 'q2'));
SELECT count(*) AS summaries FROM convctx.session_summary WHERE session_id = 'sum';
SELECT pg_temp.try($$SELECT convctx.set_summary('sum', 'stale', (SELECT id FROM ids WHERE name = 'q10'), 1)$$);
-- a redaction of a turn after through_turn does not make a summary stale
SELECT convctx.redact_turn('sum', (SELECT id FROM ids WHERE name = 'q11'));
SELECT convctx.set_summary('sum', 'Summary of 1-10 without 2 and 5.', (SELECT id FROM ids WHERE name = 'q10'), 2);
SELECT summary, through_turn_no FROM convctx.session_summary WHERE session_id = 'sum';
-- a tombstone is never through_turn (55000, like the other record functions)
SELECT pg_temp.try($$SELECT convctx.set_summary('sum', 'through a tombstone', (SELECT id FROM ids WHERE name = 'q5'), 3)$$);
-- redact_session and the generation given back wrong
SELECT convctx.redact_session('sum');
SELECT pg_temp.try($$SELECT convctx.set_summary('sum', 'x', (SELECT id FROM ids WHERE name = 'q12'), 4)$$);
SELECT pg_temp.try($$SELECT convctx.set_summary('sum', 'x', (SELECT id FROM ids WHERE name = 'q12'), NULL)$$);
SELECT pg_temp.try($$SELECT convctx.set_summary('sum', 'x', (SELECT id FROM ids WHERE name = 'q12'), -1)$$);
SELECT pg_temp.try($$SELECT convctx.set_summary('sum', 'x', (SELECT id FROM ids WHERE name = 'q12'), 99)$$);
SELECT pg_temp.try($$SELECT convctx.set_summary('no-such', 'x', (SELECT id FROM ids WHERE name = 'q12'), 0)$$);
SELECT count(*) AS summaries FROM convctx.session_summary WHERE session_id = 'sum';
-- every tombstone carries the generation that made it
SELECT request_id, redaction FROM convctx.turn WHERE session_id = 'sum' AND deleted_at IS NOT NULL
ORDER BY turn_no, record_version;
-- the form of 0.2.0, without the generation, is gone
SELECT pg_temp.try($$SELECT convctx.set_summary('sum', 'x', (SELECT id FROM ids WHERE name = 'q12'))$$);

------------------------------------------------------------------------------
-- erase_identity: no row keeps the identity in clear
------------------------------------------------------------------------------
-- alice: two linked sessions, a redacted turn, retrieval, clarification, summary,
-- contexts (one of a session of hers, one saved elsewhere with her as user_id)
INSERT INTO ids SELECT 'a1', convctx.start_turn('alice-s1', 'r1', 'alice secret 1', identity_id => 'alice@example.com',
    meta => '{"channel": "web"}', pipeline_name => 'rag');
INSERT INTO ids SELECT 'a2', convctx.start_turn('alice-s1', 'r2', 'alice secret 2');
INSERT INTO ids SELECT 'a3', convctx.start_turn('alice-s2', 'r1', 'alice secret 3');
SELECT convctx.link_session('alice@example.com', 'alice-s2');
SELECT count(convctx.finalize_turn(s, id, 'answer for alice')) FROM (VALUES ('alice-s1', 'a1'), ('alice-s1', 'a2'), ('alice-s2', 'a3')) v(s, n) JOIN ids ON name = n;
SELECT convctx.redact_turn('alice-s1', (SELECT id FROM ids WHERE name = 'a1'));
SELECT convctx.record_retrieval('alice-s1', (SELECT id FROM ids WHERE name = 'a2'), '[{"id": "c1", "text": "alice chunk"}]');
SELECT convctx.record_clarification('alice-s1', (SELECT id FROM ids WHERE name = 'a2'), '[{"id": "city", "question": "Which city?", "type": "text"}]', '{"reasoning": "x"}');
SELECT convctx.set_summary('alice-s1', 'alice summary', (SELECT id FROM ids WHERE name = 'a2'),
                           (SELECT redactions FROM convctx.session WHERE session_id = 'alice-s1'));
SELECT convctx.context_add('alice-s1', ARRAY['n1'], 'alice@example.com') IS NOT NULL AS added;
SELECT convctx.context_add('shared-conv', ARRAY['n2'], 'alice@example.com') IS NOT NULL AS added;
-- a refused link names both identities in the audit log, which erase_identity rewrites, and
-- neither in the server log, which no erasure reaches
SET client_min_messages = log;
SELECT pg_temp.try($$SELECT convctx.link_session('mallory', 'alice-s2')$$);
RESET client_min_messages;
SELECT convctx.start_turn('bob-s1', 'r1', 'bob question', identity_id => 'bob') IS NOT NULL AS started;
SELECT pg_temp.try($$SELECT convctx.link_session('alice@example.com', 'bob-s1')$$);
SELECT action, identity_id, details FROM convctx.audit_log WHERE action = 'link_refused' ORDER BY logged_at, details::text;
SELECT * FROM pg_temp.rows_holding('alice@example.com') WHERE hits > 0;

-- without convctx.identity_hash_key the identity becomes the marker 'erased'
SELECT convctx.erase_identity('alice@example.com');
SELECT * FROM pg_temp.rows_holding('alice@example.com');
SELECT session_id, identity_id, redactions FROM convctx.session ORDER BY session_id;
SELECT session_id, identity_id FROM convctx.session_link ORDER BY session_id;
SELECT session_id, request_id, identity_id, deleted_at IS NOT NULL AS redacted, question_neutral, pipeline_name
FROM convctx.turn WHERE session_id LIKE 'alice%' ORDER BY session_id, turn_no, record_version;
SELECT conversation_id, user_id FROM convctx.conversation_context ORDER BY conversation_id;
SELECT (SELECT count(*) FROM convctx.turn_retrieval) AS retrievals, (SELECT count(*) FROM convctx.clarification) AS clarifications,
       (SELECT count(*) FROM convctx.session_summary WHERE session_id LIKE 'alice%') AS summaries;
SELECT action, identity_id, details FROM convctx.audit_log
WHERE action IN ('link_refused', 'erase_identity') ORDER BY logged_at, details::text;
-- the sessions stay linked: not capped, not expiring, and linking them to anyone is refused
SELECT session_id, identity_id IS NOT NULL AS linked FROM convctx.sessions WHERE session_id LIKE 'alice%' ORDER BY 1;
SELECT pg_temp.try($$SELECT convctx.link_session('mallory', 'alice-s1')$$);
SELECT pg_temp.try($$SELECT convctx.start_turn('alice-s2', 'r9', 'q', identity_id => 'mallory')$$);
SELECT identity_id FROM convctx.session WHERE session_id = 'alice-s1';

-- with a key, the identity becomes 'erased:' and the HMAC-SHA256 under the key of the tenant,
-- a zero byte and the identity: the audit trail can tell erased identities apart, and a
-- second erasure finds what came after
CREATE EXTENSION pgcrypto;
CREATE FUNCTION pg_temp.stand_in(tenant text, identity text) RETURNS text LANGUAGE sql AS $$
    SELECT 'erased:' || encode(hmac(convert_to(tenant, 'UTF8') || '\x00'::bytea || convert_to(identity, 'UTF8'),
                                    convert_to('identity key', 'UTF8'), 'sha256'), 'hex') $$;
SET convctx.identity_hash_key = 'identity key';
-- (computed here: on Citus a query of the tables cannot call a temporary function)
SELECT pg_temp.stand_in('', 'carol') AS carol, pg_temp.stand_in('tenant-c', 'carol') AS carol_c \gset
SELECT convctx.start_turn('cs1', 'r1', 'carol secret r1', identity_id => 'carol') IS NOT NULL AS started;
SELECT convctx.erase_identity('carol');
SELECT identity_id = :'carol' AS keyed_marker
FROM convctx.session WHERE session_id = 'cs1';
SELECT identity_id = :'carol' AS keyed_marker
FROM convctx.audit_log WHERE action = 'erase_identity' ORDER BY logged_at DESC LIMIT 1;
-- the session goes on (linked, never capped); a turn added after the erasure is found by the next one
SELECT convctx.start_turn('cs1', 'r2', 'carol secret r2') IS NOT NULL AS started;
SELECT convctx.erase_identity('carol');
SELECT request_id, deleted_at IS NOT NULL AS redacted, question_neutral,
       identity_id = :'carol' AS keyed_marker
FROM convctx.turn WHERE session_id = 'cs1' ORDER BY turn_no;
SELECT * FROM pg_temp.rows_holding('carol') WHERE hits > 0;
-- the same identity erased in another tenant gets another stand-in: erasing a guess in one
-- tenant confirms nothing about another tenant's identities
SET convctx.tenant = 'tenant-c';
SELECT convctx.start_turn('cs1', 'r1', 'carol of tenant c', identity_id => 'carol') IS NOT NULL AS started;
SELECT convctx.erase_identity('carol');
RESET convctx.tenant;
SELECT tenant_id, (tenant_id, identity_id) IN (('', :'carol'), ('tenant-c', :'carol_c')) AS keyed_marker
FROM convctx.session WHERE session_id = 'cs1' ORDER BY tenant_id;
SELECT count(DISTINCT identity_id) AS stand_ins FROM convctx.session WHERE session_id = 'cs1';
-- the tenant and the identity cannot trade bytes: ('t', 'ab') and ('ta', 'b') differ
SELECT pg_temp.stand_in('t', 'ab') <> pg_temp.stand_in('ta', 'b') AS unambiguous;
-- a stand-in written before 0.5.0 (the HMAC of the identity alone) is found by a later erasure
SELECT convctx.start_turn('cs-old', 'r1', 'old carol', identity_id => 'carol') IS NOT NULL AS started;
UPDATE convctx.session SET identity_id = 'erased:' || encode(hmac('carol', 'identity key', 'sha256'), 'hex')
WHERE session_id = 'cs-old';
UPDATE convctx.session_link SET identity_id = 'erased:' || encode(hmac('carol', 'identity key', 'sha256'), 'hex')
WHERE session_id = 'cs-old';
SELECT convctx.erase_identity('carol');
SELECT question_neutral, identity_id = :'carol' AS keyed_marker
FROM convctx.turn WHERE session_id = 'cs-old';
SELECT identity_id = :'carol' AS keyed_marker FROM convctx.session WHERE session_id = 'cs-old';
RESET convctx.identity_hash_key;
DROP EXTENSION pgcrypto;
-- only values that name an identity change: erasing an "identity" equal to a turn id or to a
-- role name leaves the audit rows of redact_turn and of the bindings as they were
CREATE ROLE erasure_probe_role NOLOGIN;
SELECT convctx.bind_role_tenant('erasure_probe_role', '');
SELECT convctx.unbind_role_tenant('erasure_probe_role') AS was_bound;
DROP ROLE erasure_probe_role;
CREATE TEMP TABLE audit_before AS SELECT audit_id, identity_id, details FROM convctx.audit_log;
SELECT convctx.erase_identity('erasure_probe_role');
SELECT convctx.erase_identity((SELECT id::text FROM ids WHERE name = 'q5'));
SELECT a.action, a.details = b.details AS details_kept, a.identity_id IS NOT DISTINCT FROM b.identity_id AS identity_kept
FROM convctx.audit_log a JOIN audit_before b USING (audit_id)
WHERE a.action IN ('redact_turn', 'bind_role_tenant', 'unbind_role_tenant')
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT action, details FROM convctx.audit_log WHERE action IN ('bind_role_tenant', 'unbind_role_tenant') ORDER BY logged_at;
SELECT count(*) AS redactions_naming_turn FROM convctx.audit_log
WHERE action = 'redact_turn' AND details ->> 'turn_id' = (SELECT id::text FROM ids WHERE name = 'q5');
DROP TABLE audit_before;
-- other identities and tenants are untouched
SET convctx.tenant = 'tenant-b';
SELECT convctx.start_turn('b-s1', 'r1', 'tenant b question', identity_id => 'alice@example.com') IS NOT NULL AS started;
RESET convctx.tenant;
SELECT convctx.erase_identity('alice@example.com');
SELECT tenant_id, session_id, identity_id FROM convctx.session WHERE session_id IN ('bob-s1', 'b-s1') ORDER BY 1, 2;
SELECT tenant_id, question_neutral FROM convctx.turn WHERE session_id = 'b-s1';
SELECT pg_temp.try($$SELECT convctx.erase_identity(NULL)$$);
SELECT pg_temp.try($$SELECT convctx.erase_identity('')$$);
