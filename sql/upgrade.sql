-- Upgrade: install the oldest released version, store data in it, update
-- to the current version, and check that the data, the API and the
-- catalog are what a fresh install gives.

-- What an install of the current version looks like (functions, privileges,
-- settings, relations, columns, policies, comments, dump registrations),
-- taken now from the fresh install and again after the upgrade.
CREATE TEMP VIEW catalog_state AS
SELECT 'function' AS kind,
       p.oid::regprocedure::text AS name,
       p.prosecdef::text || ' ' || coalesce(array_to_string(p.proconfig, ','), '-') || ' '
           || p.provolatile::text || p.proparallel::text || ' ' || coalesce(p.proacl::text, 'default') || ' '
           || coalesce(obj_description(p.oid, 'pg_proc'), 'no comment') AS props
FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = 'convctx')
UNION ALL
SELECT 'relation', c.relname,
       c.relkind::text || ' ' || c.relrowsecurity::text || ' ' || coalesce(c.relacl::text, 'default') || ' '
           || coalesce(array_to_string(c.reloptions, ','), '-') || ' '
           || coalesce(obj_description(c.oid, 'pg_class'), 'no comment')
FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = 'convctx')
UNION ALL
SELECT 'policy', pol.polrelid::regclass::text || '.' || pol.polname,
       pol.polcmd::text || ' ' || pg_get_expr(pol.polqual, pol.polrelid) || ' '
           || coalesce(pg_get_expr(pol.polwithcheck, pol.polrelid), '-')
FROM pg_policy pol JOIN pg_class c ON c.oid = pol.polrelid
WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = 'convctx')
UNION ALL
SELECT 'column', c.relname || '.' || a.attname,
       format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text || ' '
           || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = 'convctx') AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'config_dump', c.relname, coalesce(x.cond, '')
FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS x(oid, cond)
JOIN pg_class c ON c.oid = x.oid
WHERE e.extname = 'convctx';
CREATE TEMP TABLE fresh_catalog AS SELECT * FROM catalog_state;

-- every version this build can install, oldest first
SELECT version FROM pg_available_extension_versions WHERE name = 'convctx' ORDER BY version;

DROP EXTENSION convctx;
CREATE EXTENSION convctx VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'convctx';

-- data of two tenants, through the 0.1.0 API
SET convctx.tenant = 'acme';
CREATE TEMP TABLE ids (name text PRIMARY KEY, id uuid);
INSERT INTO ids SELECT 't1', convctx.start_turn('s1', 'r1', 'Q1', meta => '{"channel": "web"}');
INSERT INTO ids SELECT 't2', convctx.start_turn('s1', 'r2', 'Q2');
INSERT INTO ids SELECT 't3', convctx.start_turn('s1', 'r3', 'Q3 secret');
SELECT convctx.finalize_turn('s1', id, 'A' || substr(name, 2)) FROM ids ORDER BY name;
INSERT INTO ids SELECT 't2v2', convctx.replace_turn('s1', (SELECT id FROM ids WHERE name = 't2'), 'A2 corrected');
SELECT convctx.redact_turn('s1', (SELECT id FROM ids WHERE name = 't3'));
SELECT convctx.link_session('user-1', 's1');
SELECT convctx.context_add('s1', ARRAY['n1', 'n2']) IS NOT NULL AS context_added;
SELECT convctx.set_summary('s1', 'they talked', (SELECT id FROM ids WHERE name = 't1'));
SELECT convctx.record_retrieval('s1', (SELECT id FROM ids WHERE name = 't1'),
                                '[{"id": "c1", "text": "chunk one"}]', '[{"id": "c1"}]');
-- a turn the summary covers, finalized after it: its answer is counted
INSERT INTO ids SELECT 'late', convctx.start_turn('s2', 'r1', 'Q late');
SELECT convctx.set_summary('s2', 'a question so far', (SELECT id FROM ids WHERE name = 'late'));
SELECT convctx.finalize_turn('s2', (SELECT id FROM ids WHERE name = 'late'), 'A late');
SELECT covered_messages FROM convctx.session_summary WHERE session_id = 's2';
SET convctx.tenant = 'globex';
INSERT INTO ids SELECT 'g1', convctx.start_turn('s1', 'r1', 'globex Q1');
SELECT convctx.finalize_turn('s1', (SELECT id FROM ids WHERE name = 'g1'), 'globex A1');
RESET convctx.tenant;

-- every stored row, as one fingerprint per table
CREATE TEMP TABLE before_update AS
SELECT 'turn' AS t, count(*) AS n, md5(string_agg(x::text, '|' ORDER BY x::text)) AS h FROM convctx.turn x
UNION ALL SELECT 'session', count(*), md5(string_agg((to_jsonb(x) - 'summary_through_turn_no')::text, '|' ORDER BY x::text)) FROM convctx.session x
UNION ALL SELECT 'session_link', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM convctx.session_link x
UNION ALL SELECT 'conversation_context', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM convctx.conversation_context x
UNION ALL SELECT 'session_summary', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM convctx.session_summary x
UNION ALL SELECT 'turn_retrieval', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM convctx.turn_retrieval x
UNION ALL SELECT 'audit_log', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM convctx.audit_log x;

ALTER EXTENSION convctx UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'convctx';

-- the data came through unchanged
SELECT b.t, b.n, a.n AS n_after, a.h = b.h AS same_rows
FROM before_update b
JOIN (SELECT 'turn' AS t, count(*) AS n, md5(string_agg(x::text, '|' ORDER BY x::text)) AS h FROM convctx.turn x
      UNION ALL SELECT 'session', count(*), md5(string_agg((to_jsonb(x) - 'summary_through_turn_no')::text, '|' ORDER BY x::text)) FROM convctx.session x
      UNION ALL SELECT 'session_link', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM convctx.session_link x
      UNION ALL SELECT 'conversation_context', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM convctx.conversation_context x
      UNION ALL SELECT 'session_summary', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM convctx.session_summary x
      UNION ALL SELECT 'turn_retrieval', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM convctx.turn_retrieval x
      UNION ALL SELECT 'audit_log', count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM convctx.audit_log x) a
  USING (t)
ORDER BY b.t;
-- 0.2.0 keeps the summary's reach in the session row too
SELECT tenant_id, session_id, summary_through_turn_no FROM convctx.session ORDER BY 1, 2;

-- the API works on the upgraded data: a retry finds its turn, reads see
-- the correction and not the tombstone, the tenants stay apart
SET convctx.tenant = 'acme';
SELECT convctx.start_turn('s1', 'r2', 'Q2 again') = (SELECT id FROM ids WHERE name = 't2v2') AS retry_finds_current_version;
SELECT question_neutral, answer_neutral FROM convctx.recent_turns('s1');
SELECT convctx.recent_turns_json('s1', 1);
SELECT convctx.context_load('s1');
SELECT state->'summary' AS summary, jsonb_path_query_array(state->'recent_messages', '$[*].text') AS messages
FROM convctx.conversation_state('s1', 2) AS state;
SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r4', 'Q4'), 'A4');
SELECT count(*) AS acme_turns FROM convctx.recent_turns('s1', 100);
INSERT INTO ids SELECT 'late2', convctx.start_turn('s3', 'r1', 'Q late');
SELECT convctx.set_summary('s3', 'a question so far', (SELECT id FROM ids WHERE name = 'late2'));
SELECT convctx.finalize_turn('s3', (SELECT id FROM ids WHERE name = 'late2'), 'A late');
SELECT s.session_id, ss.covered_messages, ss.through_turn_no, s.summary_through_turn_no
FROM convctx.session s JOIN convctx.session_summary ss USING (tenant_id, session_id)
WHERE s.tenant_id = 'acme' ORDER BY 1;
SET convctx.tenant = 'globex';
SELECT question_neutral, answer_neutral FROM convctx.recent_turns('s1');
RESET convctx.tenant;

-- what 0.2.0 added works on the upgraded install
CREATE ROLE upgrade_app_acme IN ROLE convctx_app;
SELECT convctx.bind_role_tenant('upgrade_app_acme', 'acme');
SET ROLE upgrade_app_acme;
SELECT convctx.current_tenant();
SELECT count(*) AS acme_turns_seen_by_bound_role FROM convctx.recent_turns('s1', 100);
RESET ROLE;
SELECT convctx.unbind_role_tenant('upgrade_app_acme');
DROP ROLE upgrade_app_acme;

-- and the catalog is exactly that of a fresh install
CREATE TEMP TABLE upgraded_catalog AS SELECT * FROM catalog_state;

SELECT count(*) AS catalog_entries FROM fresh_catalog;
SELECT coalesce(f.kind, u.kind) AS kind, coalesce(f.name, u.name) AS name,
       f.props AS fresh, u.props AS upgraded
FROM fresh_catalog f FULL JOIN upgraded_catalog u USING (kind, name)
WHERE f.props IS DISTINCT FROM u.props
ORDER BY 1, 2;
