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
\echo '== 6. Bad input is refused with a SQLSTATE, and nothing is stored'
\set ON_ERROR_STOP 0
SELECT convctx.context_save('conv-42', '{"activeNodeIds": "ie:vat"}');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
\set ON_ERROR_STOP 1
SELECT conversation_id, context_json FROM convctx.conversation_context ORDER BY conversation_id;
