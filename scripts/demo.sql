-- A short scripted conversation through convctx's SQL API.
\pset footer off
\set ECHO queries
CREATE EXTENSION convctx;

\echo
\echo '== 1. The first answer referenced two knowledge-graph nodes: remember them'
SELECT convctx.context_add('conv-42', ARRAY['ie:vat', 'ie:vrt'], 'user-7');

\echo
\echo '== 2. A later answer touched VRT again and a new node: VRT moves to the end (most recent)'
SELECT convctx.context_add('conv-42', ARRAY['ie:vrt', 'ie:cgt']);

\echo
\echo '== 3. The context store keeps at most convctx.max_active_nodes ids, dropping the least recent'
SELECT convctx.context_merge(convctx.context_load('conv-42'), ARRAY['ie:paye'], 3);

\echo
\echo '== 4. The next prompt gets a paragraph describing the concepts already in scope'
SELECT convctx.context_aspect(convctx.context_load('conv-42'),
    '[{"id": "ie:vat", "prefLabel": "Value-Added Tax (VAT)", "jurisdiction": "IE",
       "shortDescription": "general indirect tax on goods and services in Ireland."},
      {"id": "ie:vrt", "prefLabel": "Vehicle Registration Tax (VRT)", "jurisdiction": "IE",
       "shortDescription": "tax levied on registration of vehicles in Ireland."}]') AS system_prompt_paragraph;

\echo
\echo '== 5. Tenants are separate: the same conversation id in another tenant starts empty'
SET convctx.tenant = 'acme';
SELECT convctx.context_load('conv-42') AS acme_context;
RESET convctx.tenant;

\echo
\echo '== 6. Every chat request becomes one turn: started with the question, finalized with the answer'
SELECT convctx.start_turn('conv-42', 'req-1', 'Do I pay VAT on a used car from Northern Ireland?') AS turn_1 \gset
SELECT convctx.finalize_turn('conv-42', :'turn_1', 'Usually no VAT, but VRT is due when you register it.');
SELECT convctx.start_turn('conv-42', 'req-2', 'How is VRT calculated?',
                          meta => '{"channel": "web", "ip": "203.0.113.9", "tracking": "dropped"}') AS turn_2 \gset

\echo
\echo '== 7. The app retries the same request: same turn id, nothing written twice'
SELECT convctx.start_turn('conv-42', 'req-2', 'How is VRT calculated?') = :'turn_2' AS same_turn;
SELECT convctx.finalize_turn('conv-42', :'turn_2', 'VRT is a percentage of the open market selling price.');
SELECT convctx.finalize_turn('conv-42', :'turn_2', 'VRT is a percentage of the open market selling price.');
SELECT request_id, turn_no, metadata FROM convctx.turn WHERE session_id = 'conv-42' ORDER BY turn_no;

\echo
\echo '== 8. The next prompt reads the last Q/A pairs back, oldest first'
SELECT jsonb_pretty(convctx.recent_turns_json('conv-42', 10)) AS prompt_history;

\echo
\echo '== 9. The user logs in: the session is linked, its turns become durable; a second identity is refused'
SELECT convctx.link_session('user-7', 'conv-42');
\set ON_ERROR_STOP 0
SELECT convctx.link_session('someone-else', 'conv-42');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set ON_ERROR_STOP 1
SELECT action, session_id, identity_id, details FROM convctx.audit_log;

\echo
\echo '== 10. A correction: a new version of the answer, the old one kept for audit'
SELECT convctx.replace_turn('conv-42', :'turn_2', 'VRT is charged on the open market selling price, by CO2 band.') IS NOT NULL AS replaced;
SELECT request_id, record_version, replaced_by_turn_id IS NOT NULL AS replaced, answer_neutral
FROM convctx.turn WHERE session_id = 'conv-42' ORDER BY turn_no, record_version;
SELECT question_neutral, answer_neutral FROM convctx.recent_turns('conv-42');

\echo
\echo '== 11. The user asks to redact the first turn: a tombstone stays, no text reaches a prompt again'
SELECT convctx.redact_turn('conv-42', :'turn_1');
SELECT request_id, deleted_at IS NOT NULL AS redacted, question_neutral, answer_neutral
FROM convctx.turn WHERE session_id = 'conv-42' AND record_version = 1 ORDER BY turn_no;
SELECT convctx.recent_turns_json('conv-42') AS prompt_history;

\echo
\echo '== 12. Operators see every session, and retention purges expired anonymous sessions in batches'
SELECT convctx.start_turn('idle-visitor', 'req-1', 'Hello?') IS NOT NULL AS started;
UPDATE convctx.session SET last_activity_at = now() - interval '2 days' WHERE session_id = 'idle-visitor';
SELECT session_id, identity_id, turns, finalized, redacted FROM convctx.sessions ORDER BY session_id;
SELECT convctx.purge();
SELECT action, session_id, identity_id, details FROM convctx.audit_log ORDER BY audit_id;

\echo
\echo '== 13. Bad input is refused with a SQLSTATE, and nothing is stored'
\set ON_ERROR_STOP 0
SELECT convctx.context_save('conv-42', '{"activeNodeIds": "ie:vat"}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set ON_ERROR_STOP 1
\set ON_ERROR_STOP 0
SELECT convctx.start_turn('conv-42', 'req-3', NULL);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set ON_ERROR_STOP 1
SELECT conversation_id, context_json FROM convctx.conversation_context ORDER BY conversation_id;
SELECT count(*) AS turns FROM convctx.turn WHERE session_id = 'conv-42';

\echo
\echo '== 14. A shared database: an app role bound to its tenant stays in it, whatever it tries'
CREATE ROLE web_acme NOLOGIN IN ROLE convctx_app;
SELECT convctx.bind_role_tenant('web_acme', 'acme');
SET ROLE web_acme;
SELECT convctx.current_tenant();
SELECT convctx.finalize_turn('conv-42', convctx.start_turn('conv-42', 'req-1', 'Acme asks about VAT'), 'Acme''s answer');
SELECT question_neutral, answer_neutral FROM convctx.recent_turns('conv-42');
SET convctx.tenant = 'globex';
\set ON_ERROR_STOP 0
SELECT convctx.recent_turns_json('conv-42');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET convctx.tenant;
SELECT count(*) FROM convctx.turn;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set ON_ERROR_STOP 1
RESET ROLE;

\echo
\echo '== 15. A role nobody bound acts for no tenant at all: refused, with the line that binds it'
CREATE ROLE web_unbound NOLOGIN IN ROLE convctx_app;
SET ROLE web_unbound;
SET convctx.tenant = 'acme';
\set ON_ERROR_STOP 0
SELECT convctx.recent_turns_json('conv-42');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set ON_ERROR_STOP 1
RESET convctx.tenant;
RESET ROLE;
