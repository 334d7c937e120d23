-- Upgrade: a database that ran an older version and updated with ALTER
-- EXTENSION UPDATE must end up with the data it had, a working API and
-- exactly the catalog of a fresh install. The two installs are made by
-- different paths: CREATE EXTENSION convctx runs the full install script of
-- the current version (sql/convctx--0.6.0.sql), an update runs the script
-- of the old version and the update scripts after it.

-- The catalog of a fresh install: this database's, made by pg_regress with
-- CREATE EXTENSION convctx (test/catalog_state.sql says what it covers).
\i test/catalog_state.sql
CREATE TEMP TABLE fresh_catalog AS SELECT * FROM catalog_state;
SELECT count(*) AS catalog_entries, count(DISTINCT kind) AS kinds FROM fresh_catalog;
-- made by the full script: an update leaves the dropped regrole column of
-- 0.2.0 behind in role_tenant, a fresh install has none
SELECT count(*) AS dropped_columns FROM pg_attribute
WHERE attrelid = 'convctx.role_tenant'::regclass AND attisdropped;

-- every version this build can install, oldest first (not the earlier
-- forms of released scripts that the test command installs, test/upgrade/)
SELECT version FROM pg_available_extension_versions WHERE name = 'convctx' AND version !~ '-' ORDER BY version;

-- DROP EXTENSION leaves schema convctx, with its grants and comment, and
-- the roles, which belong to the cluster. The schema goes too, so that the
-- old install creates it again; the roles stay, as they would for a
-- database reinstalling next to others that use them (test/t/014 compares
-- installs that create the roles, in a cluster of their own).
DROP EXTENSION convctx;
SELECT nspname FROM pg_namespace WHERE nspname = 'convctx';
DROP SCHEMA convctx;
CREATE EXTENSION convctx VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'convctx';

-- This library runs only on the catalog of its own version: on the tables
-- of 0.1.0 it refuses, and says what to do, rather than read or write rows
-- of another shape.
SET convctx.tenant = 'acme';
SELECT convctx.start_turn('s1', 'r1', 'Q1');

-- data of two tenants as the 0.1.0 API stored it: three turns of a
-- session, the second corrected, the third redacted; the session linked,
-- with a context, a summary of its first turn and a retrieval record; a
-- second session whose summary covers a turn finalized after it; another
-- tenant using the same ids
CREATE TEMP TABLE ids (name text PRIMARY KEY, id uuid);
INSERT INTO ids VALUES ('t1', '00000000-0000-4000-8000-000000000001'),
                       ('t2', '00000000-0000-4000-8000-000000000002'),
                       ('t3', '00000000-0000-4000-8000-000000000003'),
                       ('t2v2', '00000000-0000-4000-8000-000000000004'),
                       ('late', '00000000-0000-4000-8000-000000000005'),
                       ('g1', '00000000-0000-4000-8000-000000000006');
INSERT INTO convctx.session (tenant_id, session_id, identity_id, last_turn_no, live_turns, live_answers)
VALUES ('acme', 's1', 'user-1', 3, 2, 2), ('acme', 's2', NULL, 1, 1, 1), ('globex', 's1', NULL, 1, 1, 1);
INSERT INTO convctx.session_link (tenant_id, session_id, identity_id) VALUES ('acme', 's1', 'user-1');
INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, identity_id, finalized_at,
                          question_neutral, answer_neutral, metadata, record_version, replaced_by_turn_id, deleted_at)
SELECT 'acme', 's1', (SELECT id FROM ids WHERE name = 't1'), 1, 'r1', 'user-1', now(), 'Q1', 'A1', '{"channel": "web"}'::jsonb, 1, NULL::uuid, NULL::timestamptz
UNION ALL SELECT 'acme', 's1', (SELECT id FROM ids WHERE name = 't2'), 2, 'r2', 'user-1', now(), 'Q2', 'A2', NULL, 1,
                 (SELECT id FROM ids WHERE name = 't2v2'), NULL
UNION ALL SELECT 'acme', 's1', (SELECT id FROM ids WHERE name = 't2v2'), 2, 'r2', 'user-1', now(), 'Q2', 'A2 corrected', NULL, 2, NULL, NULL
UNION ALL SELECT 'acme', 's1', (SELECT id FROM ids WHERE name = 't3'), 3, 'r3', 'user-1', now(), NULL, NULL, NULL, 1, NULL, now()
UNION ALL SELECT 'acme', 's2', (SELECT id FROM ids WHERE name = 'late'), 1, 'r1', NULL, now(), 'Q late', 'A late', NULL, 1, NULL, NULL
UNION ALL SELECT 'globex', 's1', (SELECT id FROM ids WHERE name = 'g1'), 1, 'r1', NULL, now(), 'globex Q1', 'globex A1', NULL, 1, NULL, NULL;
INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json)
VALUES ('acme', 's1', '{"activeNodeIds": ["n1", "n2"]}');
INSERT INTO convctx.session_summary (tenant_id, session_id, summary, through_turn_no, covered_messages)
VALUES ('acme', 's1', 'they talked', 1, 2), ('acme', 's2', 'a question so far', 1, 2);
INSERT INTO convctx.turn_retrieval (tenant_id, session_id, turn_no, chunks, citations)
VALUES ('acme', 's1', 1, '[{"id": "c1", "text": "chunk one"}]', '[{"id": "c1", "text": "chunk one"}]');
INSERT INTO convctx.clarification (tenant_id, session_id, turn_no, questions, inferred_context)
VALUES ('acme', 's1', 2, '[{"id": "year", "question": "Which year?", "type": "text"}]', '{"scope": "vat"}');
INSERT INTO convctx.audit_log (tenant_id, action, session_id, details)
VALUES ('acme', 'redact_turn', 's1', '{"turns": 1}');
INSERT INTO convctx.followup_phrase (tenant_id, kind, phrase) VALUES ('acme', 'clarification', 'dime más');
-- and in tenant initech an erasure as 0.1.0's erase_identity left it: the
-- turn of the session linked to user-2 a tombstone, its context and prompt
-- data gone, the identity in clear in the session, its link, its turns and
-- the audit log (the erasure's row, and a refused link before it); then
-- what 0.1.0 still took in that session (a turn, a context and a summary),
-- and a session linked to user-2 after the erasure (the user came back)
INSERT INTO convctx.session (tenant_id, session_id, identity_id, last_turn_no, live_turns, live_answers)
VALUES ('initech', 'e1', 'user-2', 2, 1, 0), ('initech', 'e2', 'user-2', 1, 1, 1);
INSERT INTO convctx.session_link (tenant_id, session_id, identity_id, linked_at)
VALUES ('initech', 'e1', 'user-2', now() - interval '2 hours'), ('initech', 'e2', 'user-2', now());
INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, identity_id, finalized_at,
                          question_neutral, answer_neutral, deleted_at)
VALUES ('initech', 'e1', '00000000-0000-4000-8000-000000000007', 1, 'r1', 'user-2', now() - interval '2 hours',
        NULL, NULL, now() - interval '1 hour'),
       ('initech', 'e1', '00000000-0000-4000-8000-000000000008', 2, 'r2', 'user-2', NULL,
        'asked after the erasure', NULL, NULL),
       ('initech', 'e2', '00000000-0000-4000-8000-000000000009', 1, 'r1', 'user-2', now(),
        'back again', 'welcome back', NULL);
INSERT INTO convctx.conversation_context (tenant_id, conversation_id, context_json)
VALUES ('initech', 'e1', '{"activeNodeIds": ["n9"]}'), ('initech', 'e2', '{"activeNodeIds": ["n8"]}');
INSERT INTO convctx.session_summary (tenant_id, session_id, summary, through_turn_no, covered_messages)
VALUES ('initech', 'e1', 'asked after the erasure', 2, 1);
INSERT INTO convctx.audit_log (tenant_id, action, session_id, identity_id, details, logged_at)
VALUES ('initech', 'link_refused', 'e1', 'user-3',
        '{"linked_identity_id": "user-2", "requested_identity_id": "user-3"}', now() - interval '90 minutes'),
       ('initech', 'erase_identity', NULL, 'user-2', '{"sessions": 1, "turns": 1, "contexts": 1}',
        now() - interval '1 hour');
RESET convctx.tenant;

-- 0.2.0: the summary mark in the session row, and roles bound to tenants
-- (by OID there) and granted what an installation grants
ALTER EXTENSION convctx UPDATE TO '0.2.0';
SELECT extversion FROM pg_extension WHERE extname = 'convctx';
CREATE ROLE upgrade_app_acme IN ROLE convctx_app;
CREATE ROLE upgrade_admin_acme IN ROLE convctx_admin;
CREATE ROLE upgrade_reporting;
GRANT EXECUTE ON FUNCTION convctx.recent_turns(text, integer) TO upgrade_reporting;
INSERT INTO convctx.role_tenant (role_id, tenant_id, role_name)
VALUES ('upgrade_app_acme', 'acme', 'upgrade_app_acme'), ('upgrade_admin_acme', 'acme', 'upgrade_admin_acme');

-- every stored row, as one fingerprint per table over the columns the
-- table has now (columns added by the update do not count); the built-in
-- phrases the install script inserted are not data (0.4.0 moves them to a
-- view), audit_id changes type in 0.4.0 (checked below), the update
-- finishes the erasure in tenant initech and moves a last activity before
-- a turn up to that turn (both checked below)
CREATE FUNCTION pg_temp.fingerprint(t regclass, keys text[], OUT n bigint, OUT h text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SELECT count(*), md5(string_agg(j::text, ''|'' ORDER BY j::text))
                    FROM (SELECT (SELECT jsonb_object_agg(k, v) FROM jsonb_each(to_jsonb(x)) e(k, v)
                                   WHERE k = ANY ($1)) AS j FROM %s x
                           WHERE (to_jsonb(x)->>''builtin'') IS DISTINCT FROM ''true''
                             AND (to_jsonb(x)->>''tenant_id'') IS DISTINCT FROM ''initech'') s', t)
       INTO n, h USING keys;
END $$;
CREATE TEMP TABLE before_update AS
SELECT c.relname AS t, f.n, f.h, k.keys
FROM pg_class c
CROSS JOIN LATERAL (SELECT array_agg(attname::text) AS keys FROM pg_attribute
                    WHERE attrelid = c.oid AND attnum > 0 AND NOT attisdropped
                      AND attname NOT IN ('builtin', 'audit_id', 'last_activity_at', 'activity_bin')) k
CROSS JOIN LATERAL pg_temp.fingerprint(c.oid, k.keys) f
WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'r' AND c.relname <> 'role_tenant';

SELECT audit_id AS audit_id_before FROM convctx.audit_log WHERE tenant_id = 'acme';

-- the stand-in of an erased identity is keyed when the updating session
-- has a key, as erase_identity's
SET convctx.identity_hash_key = 'upgrade key';
ALTER EXTENSION convctx UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'convctx';
-- the audit row keeps its number, now as a UUID no random one can equal;
-- the built-in phrases left the table for a view, the tenant's stayed
SELECT audit_id AS audit_id_after FROM convctx.audit_log WHERE tenant_id = 'acme';
SELECT tenant_id, kind, phrase FROM convctx.followup_phrase ORDER BY 1, 2, 3;
SELECT count(*) AS builtin_phrases FROM convctx.builtin_followup_phrase;

-- no session's last activity is before one of its turns, as import_records
-- requires (0.1.0 to 0.4.0 could set it back; the rows of tenant initech
-- above were written a statement apart)
SELECT count(*) AS active_before_their_turns
FROM convctx.session s
WHERE s.last_activity_at < (SELECT max(t.created_at) FROM convctx.turn t
                            WHERE t.tenant_id = s.tenant_id AND t.session_id = s.session_id);
-- the data came through unchanged
SELECT b.t, b.n, a.n AS n_after, a.h = b.h AS same_rows
FROM before_update b CROSS JOIN LATERAL pg_temp.fingerprint(('convctx.' || b.t)::regclass, b.keys) a
ORDER BY b.t;
-- what the conversation browser reads from the session row (0.5.0) is
-- computed from the turns and links: the start of the first live question
-- (none in a session whose turns are all tombstones), and whether the
-- session was linked after it was created
SELECT tenant_id, session_id, first_question, linked_later,
       (SELECT l.linked_at FROM convctx.session_link l
         WHERE l.tenant_id = s.tenant_id AND l.session_id = s.session_id) > s.created_at AS link_after_creation
FROM convctx.session s ORDER BY 1, 2;

-- the erasure made under 0.1.0 is finished as erase_identity leaves one:
-- user-2 stays in clear only in what it did after it (session e2); the
-- erased session, its link, its turns and the audit rows up to the erasure
-- name the stand-in; every turn of the session is a tombstone of a new
-- redaction generation; its context, summary and counts are gone
CREATE FUNCTION pg_temp.rows_holding(needle text) RETURNS TABLE (tbl text, id text) LANGUAGE plpgsql AS $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class c
              WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'r' ORDER BY c.relname
    LOOP
        RETURN QUERY EXECUTE format('SELECT %L, coalesce(to_jsonb(x)->>''session_id'', to_jsonb(x)->>''conversation_id'')
                                     FROM %s x WHERE strpos(to_jsonb(x)::text, $1) > 0 ORDER BY 2', t, t)
            USING needle;
    END LOOP;
END $$;
SELECT * FROM pg_temp.rows_holding('user-2');
SELECT s.session_id, s.identity_id LIKE 'erased:%' AS stand_in, l.identity_id = s.identity_id AS link_too,
       s.redactions, s.live_turns, s.live_answers, s.summary_through_turn_no
FROM convctx.session s JOIN convctx.session_link l USING (tenant_id, session_id)
WHERE s.tenant_id = 'initech' ORDER BY 1;
SELECT session_id, turn_no, deleted_at IS NOT NULL AS tombstone, question_neutral, redaction,
       identity_id LIKE 'erased:%' AS stand_in
FROM convctx.turn WHERE tenant_id = 'initech' ORDER BY 1, 2;
SELECT 'context' AS what, conversation_id FROM convctx.conversation_context WHERE tenant_id = 'initech'
UNION ALL SELECT 'summary', session_id FROM convctx.session_summary WHERE tenant_id = 'initech' ORDER BY 1, 2;
SELECT action, identity_id LIKE 'erased:%' AS stand_in, details->>'linked_identity_id' LIKE 'erased:%' AS linked_stand_in,
       details->>'requested_identity_id' AS requested, details->'sessions' AS sessions
FROM convctx.audit_log WHERE tenant_id = 'initech' ORDER BY logged_at;
SET convctx.tenant = 'initech';
SELECT session_id FROM convctx.list_conversations('user-2');
-- erase_identity finds the erased session under the same stand-in and
-- erases the one linked since; one stand-in in all of them
SELECT convctx.erase_identity('user-2') AS tombstones_made;
SELECT * FROM pg_temp.rows_holding('user-2');
SELECT count(DISTINCT identity_id) AS stand_ins, min(details->>'sessions') AS sessions_found
FROM (SELECT identity_id, NULL::jsonb AS details FROM convctx.session WHERE tenant_id = 'initech'
      UNION ALL SELECT identity_id, details FROM convctx.audit_log
       WHERE tenant_id = 'initech' AND action = 'erase_identity' AND details ? 'audit_rows') x;
RESET convctx.tenant;
-- the update's function is gone, and its C function answers no one else
SELECT count(*) AS left_behind FROM pg_proc WHERE proname = 'erased_identity_0_5';
CREATE FUNCTION pg_temp.stand_in(text, text) RETURNS text
AS '$libdir/convctx', 'convctx_erased_identity_for_update' LANGUAGE C STRICT;
SELECT pg_temp.stand_in('initech', 'user-2');
RESET convctx.identity_hash_key;

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
SELECT convctx.set_summary('s3', 'a question so far', (SELECT id FROM ids WHERE name = 'late2'), 0);
SELECT convctx.finalize_turn('s3', (SELECT id FROM ids WHERE name = 'late2'), 'A late');
SELECT s.session_id, ss.covered_messages, ss.through_turn_no, s.summary_through_turn_no
FROM convctx.session s JOIN convctx.session_summary ss USING (tenant_id, session_id)
WHERE s.tenant_id = 'acme' ORDER BY 1;
SET convctx.tenant = 'globex';
SELECT question_neutral, answer_neutral FROM convctx.recent_turns('s1');
RESET convctx.tenant;

-- the bindings and grants came through: the bound roles act for their
-- tenant, the extra grant is still there
SET ROLE upgrade_app_acme;
SELECT convctx.current_tenant();
SELECT count(*) AS acme_turns_seen_by_bound_role FROM convctx.recent_turns('s1', 100);
RESET ROLE;
SET ROLE upgrade_admin_acme;
SELECT convctx.current_tenant();
SELECT convctx.redact_session('s3') AS redacted_by_bound_admin;
RESET ROLE;
SELECT has_function_privilege('upgrade_reporting', 'convctx.recent_turns(text, integer)', 'EXECUTE') AS reporting_keeps_its_grant,
       pg_has_role('upgrade_app_acme', 'convctx_app', 'MEMBER') AS app_keeps_its_role;
SELECT convctx.unbind_role_tenant('upgrade_app_acme'), convctx.unbind_role_tenant('upgrade_admin_acme');
REVOKE ALL ON FUNCTION convctx.recent_turns(text, integer) FROM upgrade_reporting;
DROP ROLE upgrade_app_acme, upgrade_admin_acme, upgrade_reporting;

-- and the catalog is exactly that of the fresh install: no difference
CREATE TEMP TABLE upgraded_catalog AS SELECT * FROM catalog_state;
SELECT count(*) AS dropped_columns FROM pg_attribute
WHERE attrelid = 'convctx.role_tenant'::regclass AND attisdropped;
SELECT coalesce(f.kind, u.kind) AS kind, coalesce(f.name, u.name) AS name,
       f.props AS fresh, u.props AS upgraded
FROM fresh_catalog f FULL JOIN upgraded_catalog u USING (kind, name)
WHERE f.props IS DISTINCT FROM u.props
ORDER BY 1, 2;

-- The same from each later release, straight to the current version.
CREATE FUNCTION pg_temp.update_from(old text) RETURNS TABLE (kind text, name text, fresh text, upgraded text)
LANGUAGE plpgsql AS $$
BEGIN
    DROP EXTENSION convctx;
    DROP SCHEMA convctx;
    EXECUTE format('CREATE EXTENSION convctx VERSION %L', old);
    ALTER EXTENSION convctx UPDATE;
    RETURN QUERY
        SELECT coalesce(f.kind, u.kind), coalesce(f.name, u.name), f.props, u.props
        FROM fresh_catalog f FULL JOIN catalog_state u USING (kind, name)
        WHERE f.props IS DISTINCT FROM u.props
        ORDER BY 1, 2;
END $$;
SELECT * FROM pg_temp.update_from('0.2.0');
SELECT * FROM pg_temp.update_from('0.3.0');
SELECT * FROM pg_temp.update_from('0.4.0');

-- Leave a fresh install behind, as pg_regress made it.
DROP EXTENSION convctx;
DROP SCHEMA convctx;
CREATE EXTENSION convctx;
SELECT count(*) AS differences
FROM fresh_catalog f FULL JOIN catalog_state u USING (kind, name)
WHERE f.props IS DISTINCT FROM u.props;
