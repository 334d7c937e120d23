-- context_load / context_save / context_add: the per-conversation store.
-- start from an empty store, whatever ran before
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;

SELECT convctx.current_tenant() = '' AS single_tenant_default;

-- nothing stored yet
SELECT convctx.context_load('conv-1') IS NULL AS none;

-- add creates the context, and merges on later calls
SELECT convctx.context_add('conv-1', ARRAY['vat', 'vrt']);
SELECT convctx.context_add('conv-1', ARRAY['cgt', 'vat'], 'user-1');
SELECT convctx.context_load('conv-1');
SELECT tenant_id, conversation_id, context_json, user_id, updated_at >= created_at AS ordered
FROM convctx.conversation_context ORDER BY conversation_id;
-- a NULL user_id keeps the stored one
SELECT convctx.context_add('conv-1', ARRAY['paye']);
SELECT user_id FROM convctx.conversation_context WHERE conversation_id = 'conv-1';
-- NULL or empty node ids leave the ids unchanged but still create the row
SELECT convctx.context_add('conv-2', NULL);
SELECT convctx.context_add('conv-2', ARRAY[NULL, '']::text[]);
-- add respects convctx.max_active_nodes
SET convctx.max_active_nodes = 3;
SELECT convctx.context_add('conv-1', ARRAY['new']);
RESET convctx.max_active_nodes;

-- save replaces the whole snapshot, other keys kept as given
SELECT convctx.context_save('conv-1', '{"activeNodeIds": ["x"], "flags": {"crossBorder": true}}');
SELECT convctx.context_load('conv-1');
SELECT convctx.context_add('conv-1', ARRAY['y']);
SELECT convctx.context_save('conv-3', '{"activeNodeIds": []}', 'user-3');
SELECT convctx.context_save('conv-4', '{}');
SELECT conversation_id, context_json, user_id FROM convctx.conversation_context ORDER BY conversation_id;

-- tenants are separate: same conversation id, different tenant
SET convctx.tenant = 'tenant-b';
SELECT convctx.current_tenant();
SELECT convctx.context_load('conv-1') IS NULL AS not_visible;
SELECT convctx.context_add('conv-1', ARRAY['b-only']);
RESET convctx.tenant;
SELECT convctx.context_load('conv-1');
SELECT tenant_id, conversation_id, context_json FROM convctx.conversation_context
WHERE conversation_id = 'conv-1' ORDER BY tenant_id;

-- errors change nothing
CREATE TEMP TABLE before AS SELECT * FROM convctx.conversation_context;
SELECT convctx.context_load(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_load('');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_load(repeat('x', 1025));
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_save(NULL, '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_save('', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_save('conv-1', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_save('conv-1', '[]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_save('conv-1', '{"activeNodeIds": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_save('conv-1', '{"activeNodeIds": ["x", 2]}');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_save('conv-1', '{"activeNodeIds": []}', '');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_add(NULL, ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_add('', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_add('conv-1', ARRAY['a'], '');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_add('conv-1', ARRAY[['a', 'b'], ['c', 'd']]);
\echo :LAST_ERROR_SQLSTATE
-- a context made invalid behind the API's back is reported, not merged
UPDATE convctx.conversation_context SET context_json = '{"activeNodeIds": 5}' WHERE conversation_id = 'conv-4';
SELECT convctx.context_add('conv-4', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
UPDATE convctx.conversation_context SET context_json = '{}' WHERE conversation_id = 'conv-4';
-- the table refuses a non-object context
\set VERBOSITY terse
INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json) VALUES ('', 'bad', '[]');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT count(*) AS changed_rows FROM (
    (SELECT * FROM convctx.conversation_context EXCEPT SELECT * FROM before)
    UNION ALL
    (SELECT * FROM before EXCEPT SELECT * FROM convctx.conversation_context)) d;

-- settings are reserved: a misspelt convctx setting is an error
SET convctx.tenantt = 'x';
\echo :LAST_ERROR_SQLSTATE
