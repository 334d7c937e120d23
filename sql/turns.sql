-- Turn history: start_turn, finalize_turn, recent_turns(_json), link_session, replace_turn.
-- start from an empty store, whatever ran before
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;

-- A view of the stored turns without random ids or clock values.
CREATE TEMP VIEW turns AS
SELECT tenant_id, session_id, turn_no, request_id, identity_id, record_version,
       question_neutral, question_translated, answer_neutral, answer_translated,
       answer_translated_is_fallback, translate_chat, metadata,
       finalized_at IS NOT NULL AS finalized, replaced_by_turn_id IS NOT NULL AS replaced,
       deleted_at IS NOT NULL AS redacted, pipeline_name, consultant, repository
FROM convctx.turn;
CREATE TEMP TABLE ids (name text PRIMARY KEY, id uuid);
\i test/helpers.sql

------------------------------------------------------------------------------
-- start_turn is idempotent on (session_id, request_id)
------------------------------------------------------------------------------
INSERT INTO ids SELECT 't1', convctx.start_turn('s1', 'req-1', 'What is VAT?');
SELECT convctx.start_turn('s1', 'req-1', 'What is VAT?') = (SELECT id FROM ids WHERE name = 't1') AS same_id;
-- a repeat with other arguments returns the same id and changes nothing
SELECT convctx.start_turn('s1', 'req-1', 'Something else', question_translated => 'Coś innego',
                          meta => '{"channel": "web"}') = (SELECT id FROM ids WHERE name = 't1') AS same_id;
SELECT * FROM turns ORDER BY session_id, turn_no;
-- the same request id in another session is another turn
INSERT INTO ids SELECT 'other-session', convctx.start_turn('s2', 'req-1', 'Hello');
SELECT (SELECT id FROM ids WHERE name = 'other-session') <> (SELECT id FROM ids WHERE name = 't1') AS distinct_turns;
SELECT session_id, turn_no, request_id FROM turns ORDER BY session_id, turn_no;

-- every optional field is stored
INSERT INTO ids SELECT 't2', convctx.start_turn('s1', 'req-2', 'How is VRT charged?',
    question_translated => 'Jak naliczany jest VRT?', translate_chat => true,
    meta => '{"channel": "web", "locale": "pl-PL", "secret": "dropped", "ip": "203.0.113.7"}',
    pipeline_name => 'rag-v2', consultant => 'tax', repository => 'ie-rules');
SELECT * FROM turns WHERE request_id = 'req-2';

------------------------------------------------------------------------------
-- question fallback and metadata rules
------------------------------------------------------------------------------
-- no neutral question: the translated one is stored in its place, and said so
SELECT convctx.start_turn('s3', 'fb-1', NULL, question_translated => 'Czy muszę płacić VAT?') IS NOT NULL AS started;
SELECT convctx.start_turn('s3', 'fb-2', '', question_translated => 'A VRT?') IS NOT NULL AS started;
SELECT request_id, question_neutral, question_translated, metadata FROM turns WHERE session_id = 's3' ORDER BY turn_no;
-- without convctx.ip_hash_key the ip is dropped: no address, no hash (a plain SHA-256 of an
-- IPv4 address is reversed by trying all of them), and no client-sent hash beside it
SELECT convctx.start_turn('s3', 'ip-0', 'q', meta => '{"ip": "203.0.113.9", "ip_hash": "client-sent", "device_type": "mobile"}') IS NOT NULL AS started;
SELECT metadata FROM convctx.turn WHERE request_id = 'ip-0';
-- with a key, ip_hash is the hex HMAC-SHA256 of the ip under it (pgcrypto's hmac computes the same)
CREATE EXTENSION pgcrypto;
SET convctx.ip_hash_key = 'a secret key';
SELECT convctx.start_turn('s3', 'ip-1', 'q', meta => '{"ip": "203.0.113.9", "ip_hash": "client-sent", "device_type": "mobile"}') IS NOT NULL AS started;
SELECT metadata ->> 'ip_hash' = encode(hmac('203.0.113.9', 'a secret key', 'sha256'), 'hex') AS keyed_hash,
       metadata ->> 'ip_hash' <> encode(sha256('203.0.113.9'::bytea), 'hex') AS not_plain_sha256,
       metadata ? 'ip' AS raw_ip_stored, metadata - 'ip_hash' AS other_keys
FROM convctx.turn WHERE request_id = 'ip-1';
RESET convctx.ip_hash_key;
-- the deprecated convctx.ip_hash_salt is taken as the key when no key is set
SET convctx.ip_hash_salt = 'pepper';
SELECT convctx.start_turn('s3', 'ip-2', 'q', meta => '{"ip": "198.51.100.1"}') IS NOT NULL AS started;
SELECT metadata ->> 'ip_hash' = encode(hmac('198.51.100.1', 'pepper', 'sha256'), 'hex') AS keyed_with_salt,
       metadata ->> 'ip_hash' <> encode(sha256('pepper198.51.100.1'::bytea), 'hex') AS not_salted_sha256
FROM convctx.turn WHERE request_id = 'ip-2';
RESET convctx.ip_hash_salt;
DROP EXTENSION pgcrypto;
-- the keys are secrets: hidden from SHOW ALL and from roles that are not superusers
SELECT count(*) AS listed FROM pg_settings WHERE name IN ('convctx.ip_hash_key', 'convctx.identity_hash_key', 'convctx.ip_hash_salt');
CREATE ROLE regress_key_reader;
SET ROLE regress_key_reader;
SHOW convctx.ip_hash_key;
\echo :LAST_ERROR_SQLSTATE
SET convctx.ip_hash_key = 'mine';
\echo :LAST_ERROR_SQLSTATE
SET convctx.identity_hash_key = 'mine';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE regress_key_reader;
-- the allowlist is a setting; without ip_hash in it no ip trace is kept at all
SET convctx.metadata_allowlist = 'channel, "odd key"';
SELECT convctx.start_turn('s3', 'allow-1', 'q', meta => '{"ip": "198.51.100.1", "channel": "sms", "odd key": [1, {"x": null}], "locale": "en"}') IS NOT NULL AS started;
SELECT metadata FROM convctx.turn WHERE request_id = 'allow-1';
SET convctx.metadata_allowlist = '';
SELECT convctx.start_turn('s3', 'allow-2', 'q', meta => '{"channel": "sms"}') IS NOT NULL AS started;
SELECT metadata FROM convctx.turn WHERE request_id = 'allow-2';
RESET convctx.metadata_allowlist;
SET convctx.metadata_allowlist = '"unterminated';
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------------
-- start_turn errors: nothing written
------------------------------------------------------------------------------
CREATE TEMP TABLE snapshot AS SELECT * FROM convctx.turn;
CREATE TEMP TABLE snapshot_session AS SELECT * FROM convctx.session;
SELECT convctx.start_turn(NULL, 'r', 'q');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('', 'r', 'q');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', NULL, 'q');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', '', 'q');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', repeat('r', 1025), 'q');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', 'r', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', 'r', '', question_translated => '');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', 'r', 'q', identity_id => '');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', 'r', 'q', meta => '[]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', 'r', 'q', meta => '"web"');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', 'r', 'q', meta => '{"ip": 7}');
\echo :LAST_ERROR_SQLSTATE
SET convctx.max_text_bytes = 10;
SELECT convctx.start_turn('e1', 'r', 'a question longer than ten bytes');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', 'r', 'q', question_translated => 'ąęółżźćń');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', 'r', 'q', pipeline_name => 'pipeline-name');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('e1', 'r', 'q', meta => '{"channel": "a-long-channel"}');
\echo :LAST_ERROR_SQLSTATE
RESET convctx.max_text_bytes;
SELECT convctx.start_turn('e1', 'r', repeat('x', 1024 * 1024 + 1));
\echo :LAST_ERROR_SQLSTATE
SELECT (SELECT count(*) FROM (SELECT * FROM convctx.turn EXCEPT SELECT * FROM snapshot) d) AS new_turns,
       (SELECT count(*) FROM (SELECT * FROM convctx.session EXCEPT SELECT * FROM snapshot_session) d) AS changed_sessions;

------------------------------------------------------------------------------
-- finalize_turn
------------------------------------------------------------------------------
SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't1'), 'VAT is a tax on consumption.',
                             meta => '{"client_version": "1.2", "secret": "dropped"}');
SELECT request_id, answer_neutral, answer_translated, answer_translated_is_fallback, metadata, finalized
FROM turns WHERE request_id = 'req-1' AND session_id = 's1';
-- a repeat with the same answer changes nothing, finalized_at included
CREATE TEMP TABLE finalized_before AS SELECT finalized_at, metadata FROM convctx.turn WHERE turn_id = (SELECT id FROM ids WHERE name = 't1');
SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't1'), 'VAT is a tax on consumption.',
                             meta => '{"client_version": "9.9"}');
SELECT t.finalized_at = b.finalized_at AS finalized_at_kept, t.metadata = b.metadata AS metadata_kept
FROM convctx.turn t, finalized_before b WHERE t.turn_id = (SELECT id FROM ids WHERE name = 't1');
-- translate_chat without a translated answer: the neutral one is copied, flagged as fallback
SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't2'), 'VRT is charged on registration.');
SELECT answer_neutral, answer_translated, answer_translated_is_fallback FROM turns WHERE request_id = 'req-2';
SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't2'), 'VRT is charged on registration.');
-- translated answer given, with the caller's fallback flag
INSERT INTO ids SELECT 't3', convctx.start_turn('s1', 'req-3', 'And CGT?', translate_chat => true);
SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't3'), 'CGT applies to gains.', 'CGT dotyczy zysków.', false);
SELECT answer_neutral, answer_translated, answer_translated_is_fallback FROM turns WHERE request_id = 'req-3';
SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't3'), 'CGT applies to gains.', 'CGT dotyczy zysków.');
SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't3'), 'CGT applies to gains.');

-- finalize errors: nothing changed
DROP TABLE snapshot;
CREATE TEMP TABLE snapshot AS SELECT * FROM convctx.turn;
SELECT convctx.finalize_turn('s1', '00000000-0000-4000-8000-000000000000', 'answer');
\echo :LAST_ERROR_SQLSTATE
-- a turn of another session is not found from this one
SELECT pg_temp.try($$SELECT convctx.finalize_turn('s2', (SELECT id FROM ids WHERE name = 't1'), 'VAT is a tax on consumption.')$$);
SELECT pg_temp.try($$SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't1'), 'A different answer.')$$);
SELECT pg_temp.try($$SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't3'), 'CGT applies to gains.', 'Inne tłumaczenie.')$$);
SELECT pg_temp.try($$SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't1'), NULL)$$);
SELECT convctx.finalize_turn('s1', NULL, 'answer');
\echo :LAST_ERROR_SQLSTATE
SELECT pg_temp.try($$SELECT convctx.finalize_turn(NULL, (SELECT id FROM ids WHERE name = 't1'), 'answer')$$);
SELECT pg_temp.try($$SELECT convctx.finalize_turn('s2', (SELECT id FROM ids WHERE name = 'other-session'), 'answer', meta => '[1]')$$);
SELECT pg_temp.try($$SELECT convctx.finalize_turn('s2', (SELECT id FROM ids WHERE name = 'other-session'), repeat('x', 1024 * 1024 + 1))$$);
SELECT count(*) AS changed_turns FROM (
    (SELECT * FROM convctx.turn EXCEPT SELECT * FROM snapshot)
    UNION ALL (SELECT * FROM snapshot EXCEPT SELECT * FROM convctx.turn)) d;

------------------------------------------------------------------------------
-- recent_turns and recent_turns_json
------------------------------------------------------------------------------
SELECT request_id, question_neutral, answer_neutral, question_translated, answer_translated, metadata
FROM convctx.recent_turns('s1');
SELECT request_id FROM convctx.recent_turns('s1', 2);
SELECT request_id FROM convctx.recent_turns('s1', 1);
SELECT convctx.recent_turns_json('s1', 2);
-- unfinalized turns are not read back; unknown sessions give nothing
SELECT count(*) FROM convctx.recent_turns('s2');
SELECT convctx.recent_turns_json('s2');
SELECT convctx.recent_turns_json('no-such-session');
SELECT convctx.recent_turns('s1', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.recent_turns_json('s1', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.recent_turns('s1', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.recent_turns_json(NULL);
\echo :LAST_ERROR_SQLSTATE
-- chronology is exact even when every turn has the same timestamp
BEGIN;
SELECT count(convctx.finalize_turn('same-ts', convctx.start_turn('same-ts', 'r' || i, 'q' || i), 'a' || i))
FROM generate_series(1, 12) i;
SELECT string_agg(question_neutral, ' ') FROM convctx.recent_turns('same-ts', 5);
SELECT count(DISTINCT created_at) AS distinct_timestamps FROM convctx.turn WHERE session_id = 'same-ts';
COMMIT;
-- the read walks the chronology index back from the newest turn: one index scan that
-- fetches the 5 rows it returns, not the 12 of the session
BEGIN;
SELECT pg_stat_get_xact_numscans('convctx.turn_chronology'::regclass) AS scans,
       pg_stat_get_xact_tuples_fetched('convctx.turn_chronology'::regclass) AS fetched \gset
SELECT count(*) FROM convctx.recent_turns('same-ts', 5);
SELECT pg_stat_get_xact_numscans('convctx.turn_chronology'::regclass) - :scans AS index_scans,
       pg_stat_get_xact_tuples_fetched('convctx.turn_chronology'::regclass) - :fetched AS rows_fetched;
COMMIT;
-- it reads a span of turn numbers below the session's newest, wider spans after it when
-- open turns took the places: 30 turns, only the first 5 finalized, two scans
BEGIN;
SELECT count(convctx.start_turn('spans', 'r' || i, 'q' || i)) FROM generate_series(1, 30) i;
INSERT INTO ids SELECT 'spans-' || turn_no, turn_id FROM convctx.turn
 WHERE session_id = 'spans' AND turn_no <= 5;
SELECT count(convctx.finalize_turn('spans', id, 'a')) FROM ids WHERE name LIKE 'spans-%';
SELECT pg_stat_get_xact_numscans('convctx.turn_chronology'::regclass) AS scans \gset
SELECT string_agg(request_id, ' ') FROM convctx.recent_turns('spans', 2);
SELECT pg_stat_get_xact_numscans('convctx.turn_chronology'::regclass) - :scans AS index_scans;
SELECT string_agg(request_id, ' ') FROM convctx.recent_turns('spans', 10);
ROLLBACK;
-- it checks the tables it reads: a catalog of another shape is an error, not a misread
BEGIN;
ALTER TABLE convctx.turn RENAME COLUMN metadata TO metadata_before;
SELECT pg_temp.try($$SELECT * FROM convctx.recent_turns('s1')$$);
ROLLBACK;
BEGIN;
ALTER TABLE convctx.session RENAME COLUMN last_turn_no TO last_turn_no_before;
SELECT pg_temp.try($$SELECT * FROM convctx.recent_turns('s1')$$);
ROLLBACK;
BEGIN;
ALTER INDEX convctx.turn_chronology RENAME TO turn_chronology_before;
SELECT pg_temp.try($$SELECT convctx.recent_turns_json('s1')$$);
ROLLBACK;
-- and reads it again once it is back
SELECT count(*) FROM convctx.recent_turns('s1');

------------------------------------------------------------------------------
-- the anonymous cap
------------------------------------------------------------------------------
SET convctx.max_session_turns = 3;
SELECT count(convctx.start_turn('capped', 'r' || i, 'q' || i)) FROM generate_series(1, 5) i;
SELECT turn_no, request_id FROM turns WHERE session_id = 'capped' ORDER BY turn_no;
-- a dropped request is a new request when it comes again
SELECT convctx.start_turn('capped', 'r1', 'q1 again') IS NOT NULL AS started;
SELECT turn_no, request_id FROM turns WHERE session_id = 'capped' ORDER BY turn_no;
-- lowering the cap trims the session on its next append
SET convctx.max_session_turns = 1;
SELECT convctx.start_turn('capped', 'r7', 'q7') IS NOT NULL AS started;
SELECT turn_no, request_id FROM turns WHERE session_id = 'capped' ORDER BY turn_no;
RESET convctx.max_session_turns;

------------------------------------------------------------------------------
-- link_session
------------------------------------------------------------------------------
SELECT convctx.link_session('user-42', 's1');
SELECT convctx.link_session('user-42', 's1');
SELECT tenant_id, session_id, identity_id FROM convctx.session_link ORDER BY session_id;
SELECT request_id, identity_id FROM turns WHERE session_id = 's1' ORDER BY turn_no;
-- new turns of a linked session carry the identity
SELECT convctx.start_turn('s1', 'req-4', 'Anything else?') IS NOT NULL AS started;
SELECT identity_id FROM turns WHERE request_id = 'req-4';
-- linking to another identity is refused with CV001, audited, and changes nothing
SELECT convctx.link_session('intruder', 's1');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.start_turn('s1', 'req-5', 'q', identity_id => 'intruder');
\echo :LAST_ERROR_SQLSTATE
SELECT session_id, identity_id FROM convctx.session_link WHERE session_id = 's1';
SELECT count(*) AS turns_for_req5 FROM convctx.turn WHERE request_id = 'req-5';
SELECT tenant_id, role_name = current_user AS by_caller, action, session_id, identity_id, details
FROM convctx.audit_log ORDER BY logged_at, audit_id;
-- the audit row survives the caller's rollback
BEGIN;
SELECT convctx.link_session('intruder-2', 's1');
ROLLBACK;
SELECT count(*) AS refusals FROM convctx.audit_log WHERE action = 'link_refused';
-- linking without backfill leaves earlier turns without an identity
SELECT convctx.start_turn('s4', 'r1', 'q') IS NOT NULL AS started;
SELECT convctx.link_session('user-4', 's4', backfill => false);
SELECT convctx.start_turn('s4', 'r2', 'q') IS NOT NULL AS started;
SELECT request_id, identity_id FROM turns WHERE session_id = 's4' ORDER BY turn_no;
-- start_turn with an identity links the session and backfills it
SELECT convctx.start_turn('s5', 'r1', 'q') IS NOT NULL AS started;
SELECT convctx.start_turn('s5', 'r2', 'q', identity_id => 'user-5') IS NOT NULL AS started;
SELECT request_id, identity_id FROM turns WHERE session_id = 's5' ORDER BY turn_no;
-- a session can be linked before its first turn
SELECT convctx.link_session('user-6', 's6');
SELECT convctx.start_turn('s6', 'r1', 'q') IS NOT NULL AS started;
SELECT request_id, identity_id FROM turns WHERE session_id = 's6';
-- linked sessions are not capped
SET convctx.max_session_turns = 2;
SELECT count(convctx.start_turn('s6', 'more-' || i, 'q')) FROM generate_series(1, 4) i;
SELECT count(*) AS kept FROM convctx.turn WHERE session_id = 's6';
RESET convctx.max_session_turns;
-- errors
SELECT convctx.link_session(NULL, 's1');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.link_session('', 's1');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.link_session('user-1', NULL);
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------------
-- replace_turn
------------------------------------------------------------------------------
INSERT INTO ids SELECT 't1v2', convctx.replace_turn('s1', (SELECT id FROM ids WHERE name = 't1'),
    'VAT is a consumption tax charged at each stage.', meta => '{"channel": "api"}');
SELECT request_id, record_version, replaced, finalized, question_neutral, answer_neutral, metadata
FROM turns WHERE session_id = 's1' AND request_id = 'req-1' ORDER BY record_version;
SELECT replaced_by_turn_id = (SELECT id FROM ids WHERE name = 't1v2') AS points_to_new
FROM convctx.turn WHERE turn_id = (SELECT id FROM ids WHERE name = 't1');
-- reads see only the current version, in the original position
SELECT request_id, answer_neutral FROM convctx.recent_turns('s1');
-- start_turn with the original request id returns the current version
SELECT convctx.start_turn('s1', 'req-1', 'What is VAT?') = (SELECT id FROM ids WHERE name = 't1v2') AS current_version;
-- translate_chat turns get a fallback translation on replace too
INSERT INTO ids SELECT 't2v2', convctx.replace_turn('s1', (SELECT id FROM ids WHERE name = 't2'), 'VRT is due at registration.');
SELECT record_version, answer_neutral, answer_translated, answer_translated_is_fallback
FROM turns WHERE request_id = 'req-2' ORDER BY record_version;
-- chains: the new version can be replaced again
SELECT convctx.replace_turn('s1', (SELECT id FROM ids WHERE name = 't1v2'), 'Third version.') IS NOT NULL AS replaced;
SELECT record_version, replaced, answer_neutral FROM turns WHERE session_id = 's1' AND request_id = 'req-1' ORDER BY record_version;
-- errors: nothing changed
DROP TABLE snapshot;
CREATE TEMP TABLE snapshot AS SELECT * FROM convctx.turn;
SELECT pg_temp.try($$SELECT convctx.replace_turn('s1', (SELECT id FROM ids WHERE name = 't1'), 'again')$$);
SELECT pg_temp.try($$SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't1'), 'VAT is a tax on consumption.')$$);
SELECT pg_temp.try($$SELECT convctx.replace_turn('s2', (SELECT id FROM ids WHERE name = 'other-session'), 'not finalized yet')$$);
SELECT pg_temp.try($$SELECT convctx.replace_turn('s2', (SELECT id FROM ids WHERE name = 't1v2'), 'wrong session')$$);
SELECT convctx.replace_turn('s1', '00000000-0000-4000-8000-000000000000', 'unknown');
\echo :LAST_ERROR_SQLSTATE
SELECT pg_temp.try($$SELECT convctx.replace_turn('s1', (SELECT id FROM ids WHERE name = 't2v2'), NULL)$$);
SELECT pg_temp.try($$SELECT convctx.replace_turn('s1', (SELECT id FROM ids WHERE name = 't2v2'), 'x', meta => '1')$$);
SELECT count(*) AS changed_turns FROM (
    (SELECT * FROM convctx.turn EXCEPT SELECT * FROM snapshot)
    UNION ALL (SELECT * FROM snapshot EXCEPT SELECT * FROM convctx.turn)) d;

------------------------------------------------------------------------------
-- tenants: the same session and request ids are separate turns
------------------------------------------------------------------------------
SET convctx.tenant = 'acme';
SELECT convctx.start_turn('s1', 'req-1', 'Acme question') <> (SELECT id FROM ids WHERE name = 't1v2') AS separate;
SELECT count(*) FROM convctx.recent_turns('s1');
SELECT pg_temp.try($$SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 't3'), 'CGT applies to gains.')$$);
SELECT convctx.link_session('someone-else', 's1');
SELECT identity_id FROM convctx.session_link WHERE tenant_id = 'acme';
RESET convctx.tenant;
SELECT identity_id FROM convctx.session_link WHERE tenant_id = '' AND session_id = 's1';

-- every stored row is consistent: one current version per (session, request), no gaps in turn_no
SELECT tenant_id, session_id, request_id, count(*)
FROM convctx.turn WHERE replaced_by_turn_id IS NULL
GROUP BY 1, 2, 3 HAVING count(*) > 1;
SELECT s.tenant_id, s.session_id, s.last_turn_no, max(t.turn_no)
FROM convctx.session s JOIN convctx.turn t USING (tenant_id, session_id)
GROUP BY 1, 2, 3 HAVING s.last_turn_no <> max(t.turn_no);

-- the session counts match the turns
SELECT * FROM miscounted_sessions;

------------------------------------------------------------------------------
-- plans: keyed statements use the indexes even where the planner would scan
------------------------------------------------------------------------------
-- On a one-page, freshly analyzed session table a generic plan of a plain
-- UPDATE by key scans it sequentially; ANALYZE also makes convctx re-plan.
ANALYZE convctx.session;
SET plan_cache_mode = force_generic_plan;
PREPARE bump(text, text) AS
  UPDATE convctx.session SET last_turn_no = last_turn_no + 1 WHERE tenant_id = $1 AND session_id = $2;
EXPLAIN (COSTS OFF) EXECUTE bump('', 's1');
DEALLOCATE bump;
RESET plan_cache_mode;
BEGIN;
SELECT pg_stat_get_xact_numscans('convctx.session'::regclass) AS seqscans \gset
SELECT count(convctx.finalize_turn('s-plan', convctx.start_turn('s-plan', 'r' || g, 'q'), 'a'))
FROM generate_series(1, 3) g;
SELECT pg_stat_get_xact_numscans('convctx.session'::regclass) - :seqscans AS session_seq_scans;
COMMIT;
-- the caller's setting is untouched
SHOW enable_seqscan;

-- the secret keys come only from postgresql.conf, ALTER SYSTEM or a superuser's SET:
-- a key stored for a role, a database or a function is readable by every role
CREATE ROLE regress_key_holder;
ALTER ROLE regress_key_holder SET convctx.ip_hash_key = 'leaked';
ALTER ROLE regress_key_holder SET convctx.identity_hash_key = 'leaked';
CREATE FUNCTION pg_temp.keyed() RETURNS int LANGUAGE sql SET convctx.ip_hash_salt = 'leaked' AS 'SELECT 1';
SELECT count(*) AS stored_keys FROM pg_db_role_setting WHERE array_to_string(setconfig, ',') LIKE '%leaked%';
DROP ROLE regress_key_holder;
