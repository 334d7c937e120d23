-- Semantic recall with pgvector (extension convctx_recall): storing,
-- recalling and forgetting embeddings, per tenant, and what hostile roles get.
\i test/helpers.sql
SET convctx.tenant = 'acme';
CREATE TEMP TABLE ids (name text PRIMARY KEY, id uuid);
-- The index worker builds once the call that listed the builds commits; wait for it,
-- committing between looks (CREATE INDEX CONCURRENTLY waits for older transactions).
CREATE PROCEDURE pg_temp.wait_indexes() LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. 1200 LOOP
        COMMIT;
        EXIT WHEN NOT EXISTS (SELECT FROM convctx_recall.tenant_index t
                               WHERE t.pending AND t.last_error IS NULL);
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$$;

------------------------------------------------------------------------------
-- Installing: pgvector is required, and its schema must be a superuser's
------------------------------------------------------------------------------
SELECT pg_temp.try($$CREATE EXTENSION convctx_recall$$);
-- pgvector in a schema that another role owns: installs, but nothing runs
CREATE ROLE recall_schema_owner;
CREATE SCHEMA hostile_vec AUTHORIZATION recall_schema_owner;
CREATE EXTENSION vector SCHEMA hostile_vec;
CREATE EXTENSION convctx_recall;
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', 'm3')$$);
-- nor an import of an embedding; redaction, erasure and export, which name nothing of
-- pgvector's, go on
SET convctx.tenant = 'vtest';
SELECT pg_temp.try($$SELECT * FROM convctx.import_records(ARRAY[
  '{"type": "session", "session_id": "s-v", "identity_id": null, "linked_at": null,'
  ' "created_at": "2026-01-01T00:00:00+00:00", "last_activity_at": "2026-01-01T00:00:00+00:00"}',
  '{"type": "turn", "session_id": "s-v", "turn_id": "00000000-0000-0000-0000-000000000001",'
  ' "turn_no": 1, "request_id": "r1", "created_at": "2026-01-01T00:00:00+00:00", "question_neutral": "q"}',
  '{"type": "embedding", "session_id": "s-v", "turn_id": "00000000-0000-0000-0000-000000000001",'
  ' "model": "m3", "embedding": [1, 0, 0], "stored_at": "2026-01-01T00:00:00+00:00"}'],
  allow_anonymous => true)$$);
SELECT (convctx.begin_turn('s-v', 'r1', 'question v1', 1)).repeated;
SELECT convctx.link_session('victor', 's-v');
SELECT record_type, count(*) FROM convctx.export_records() GROUP BY 1 ORDER BY 1;
SELECT convctx.redact_session('s-v');
SELECT convctx.erase_identity('victor');
SET convctx.tenant = 'acme';
-- another role that may create in the schema is refused the same way
ALTER SCHEMA hostile_vec OWNER TO postgres;
GRANT CREATE ON SCHEMA hostile_vec TO recall_schema_owner;
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', 'm3')$$);
DROP EXTENSION convctx_recall;
DROP EXTENSION vector;
DROP SCHEMA hostile_vec;
CREATE EXTENSION convctx_recall CASCADE;
SELECT convctx_recall.add_model('m3', 3);
SELECT convctx_recall.add_model('other', 2);
SELECT pg_temp.try($$SELECT convctx_recall.add_model('m3', 4)$$);
SELECT pg_temp.try($$SELECT convctx_recall.add_model('huge', 2001)$$);
SELECT pg_temp.try($$SELECT convctx_recall.add_model('none', NULL)$$);
SELECT indexrelid::regclass, pg_get_indexdef(indexrelid) FROM pg_index
 WHERE indrelid = 'convctx_recall.turn_embedding'::regclass ORDER BY 1;

------------------------------------------------------------------------------
-- The work list, storing, recall in the three scopes, answered_before
------------------------------------------------------------------------------
INSERT INTO ids SELECT 'a' || i, (convctx.begin_turn('s-a', 'r' || i, 'question a' || i, 1)).turn_id
  FROM generate_series(1, 3) i;
INSERT INTO ids SELECT 'b' || i, (convctx.begin_turn('s-b', 'r' || i, 'question b' || i, 1)).turn_id
  FROM generate_series(1, 2) i;
SELECT convctx.link_session('alice', 's-a');
SELECT session_id, turn_no, question_neutral, finalized FROM convctx_recall.unembedded_turns('m3')
 ORDER BY session_id, turn_no;
-- in steps: two, then the rest after the last pair
SELECT count(*) FROM convctx_recall.unembedded_turns('m3', 2);
SELECT count(*) FROM convctx_recall.unembedded_turns('m3', 10,
    (SELECT session_id FROM convctx_recall.unembedded_turns('m3', 2) OFFSET 1),
    (SELECT turn_id FROM convctx_recall.unembedded_turns('m3', 2) OFFSET 1));
-- a1 along x, a2 along y, a3 along z; b1 near x, b2 along -x
SELECT convctx_recall.store_embedding(session_id, turn_id, 'm3',
       (CASE question_neutral WHEN 'question a1' THEN '[1,0,0]' WHEN 'question a2' THEN '[0,1,0]'
                              WHEN 'question a3' THEN '[0,0,1]' WHEN 'question b1' THEN '[0.9,0.1,0]'
                              ELSE '[-1,0,0]' END)::vector)
  FROM convctx_recall.unembedded_turns('m3') ORDER BY session_id, turn_no;
SELECT count(*) FROM convctx_recall.unembedded_turns('m3');
SELECT count(*) FROM convctx_recall.unembedded_turns('other');
-- storing again replaces
SELECT convctx_recall.store_embedding('s-a', (SELECT id FROM ids WHERE name = 'a3'), 'm3', '[0.1,0,1]');
SELECT count(*) FROM convctx_recall.turn_embedding;
-- exact while the tenant has no index of its own, then through it: the same rows
CREATE TEMP TABLE exact AS SELECT * FROM convctx_recall.recall('[1,0.05,0]', 'm3', 3);
-- listed, not built (the worker waits for this transaction): recall stays exact until the
-- worker marked every row
BEGIN;
SELECT convctx_recall.index_tenants('m3', min_embeddings => 3);
SELECT convctx_recall.index_tenants('m3', min_embeddings => 3);
SELECT tenant_id, ready, pending FROM convctx_recall.tenant_index;
SELECT count(*) AS same_rows_while_listed FROM exact x JOIN convctx_recall.recall('[1,0.05,0]', 'm3', 3) r
    ON r.turn_id = x.turn_id AND r.distance = x.distance;
COMMIT;
CALL pg_temp.wait_indexes();
SELECT tenant_id, ready, pending, built_at IS NOT NULL AS built, last_error FROM convctx_recall.tenant_index;
SELECT format('turn_embedding_%s_%s', model_no, index_no) AS acme_index, index_no AS acme_no
  FROM convctx_recall.tenant_index WHERE tenant_id = 'acme' \gset
SELECT i.tenant_id, replace(pg_get_indexdef(format('convctx_recall.turn_embedding_%s_%s', i.model_no, i.index_no)::regclass),
                            i.index_no::text, 'N')
  FROM convctx_recall.tenant_index i;
SELECT count(*) AS rows_marked FROM convctx_recall.turn_embedding WHERE index_no = :acme_no;
-- the catalog, which every role reads, names no tenant
SELECT count(*) AS naming_a_tenant FROM pg_indexes WHERE indexdef LIKE '%acme%';
SELECT pg_temp.try($$SELECT convctx_recall.index_tenants('nope')$$);
SET stats_fetch_consistency = none;
SELECT pg_stat_force_next_flush();
CREATE TEMP TABLE scans AS SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = :'acme_index';
SELECT round(distance::numeric, 4) AS distance, session_id, turn_no, question_neutral
  FROM convctx_recall.recall('[1,0.05,0]', 'm3', 3);
SELECT pg_stat_force_next_flush();
SELECT s.idx_scan > (SELECT idx_scan FROM scans) AS through_the_tenants_index
  FROM pg_stat_user_indexes s WHERE indexrelname = :'acme_index';
SELECT count(*) AS same_rows FROM exact x JOIN convctx_recall.recall('[1,0.05,0]', 'm3', 3) r
    ON r.turn_id = x.turn_id AND r.distance = x.distance;
SELECT round(distance::numeric, 4) AS distance, session_id, turn_no, question_neutral
  FROM convctx_recall.recall('[1,0.05,0]', 'm3', 10, session_id => 's-b');
SELECT round(distance::numeric, 4) AS distance, session_id, turn_no, question_neutral
  FROM convctx_recall.recall('[1,0.05,0]', 'm3', 10, identity_id => 'alice');
SELECT count(*) FROM convctx_recall.recall('[1,0.05,0]', 'm3', 10, identity_id => 'nobody');
-- the answer cache: only answered turns, only above the threshold
SELECT count(*) FROM convctx_recall.answered_before('[1,0,0]', 'm3', 0.5);
SELECT convctx.finalize_turn('s-b', (SELECT id FROM ids WHERE name = 'b1'), 'answer b1');
SELECT round(similarity::numeric, 4) AS similarity, session_id, question_neutral, answer_neutral
  FROM convctx_recall.answered_before('[1,0,0]', 'm3', 0.9);
SELECT count(*) FROM convctx_recall.answered_before('[1,0,0]', 'm3', 0.999);
SELECT count(*) FROM convctx_recall.answered_before('[1,0,0]', 'm3', 0.9, identity_id => 'alice');
-- an old version is not recalled; its correction waits for an embedding
SELECT convctx.replace_turn('s-b', (SELECT id FROM ids WHERE name = 'b1'), 'corrected b1') IS NOT NULL AS replaced;
-- the old version's embedding went with it
SELECT count(*) AS old_version_embeddings FROM convctx_recall.turn_embedding
 WHERE turn_id = (SELECT id FROM ids WHERE name = 'b1');
SELECT count(*) FROM convctx_recall.answered_before('[1,0,0]', 'm3', 0.9);
SELECT session_id, turn_no, question_neutral, answer_neutral FROM convctx_recall.unembedded_turns('m3');

------------------------------------------------------------------------------
-- Bad input: a clear error, nothing written
------------------------------------------------------------------------------
SELECT pg_temp.try($$SELECT convctx_recall.store_embedding('s-a', (SELECT id FROM ids WHERE name = 'a1'), 'm3', '[1,0]')$$);
SELECT pg_temp.try($$SELECT convctx_recall.store_embedding('s-a', (SELECT id FROM ids WHERE name = 'a1'), 'nope', '[1,0,0]')$$);
SELECT pg_temp.try($$SELECT convctx_recall.store_embedding('s-a', gen_random_uuid(), 'm3', '[1,0,0]')$$);
SELECT pg_temp.try($$SELECT convctx_recall.store_embedding('s-a', (SELECT id FROM ids WHERE name = 'a1'), 'm3', NULL)$$);
SELECT pg_temp.try($$SELECT convctx_recall.store_embedding(NULL, (SELECT id FROM ids WHERE name = 'a1'), 'm3', '[1,0,0]')$$);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', 'm3', 0)$$);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', 'm3', 1001)$$);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', 'm3', 5, 's-a', 'alice')$$);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0]', 'm3')$$);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.answered_before('[1,0,0]', 'm3', 1.5)$$);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.answered_before('[1,0,0]', 'm3', 'NaN')$$);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.unembedded_turns('m3', 10, 's-a')$$);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.unembedded_turns('m3', 10001)$$);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', repeat('m', 2000))$$);
-- no cosine distance: zeros, elements whose squares underflow a float4, or overflow it;
-- refused storing (the stored one stays), recalling and in the answer cache
SELECT pg_temp.try(format($$SELECT convctx_recall.store_embedding('s-a', %L, 'm3', %L)$$,
                          (SELECT id FROM ids WHERE name = 'a1'), v))
  FROM (VALUES ('[0,0,0]'), ('[-0,0,0]'), ('[1e-30,0,-1e-23]'), ('[3e38,3e38,0]')) x(v);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[0,0,0]', 'm3')$$);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[0,0,0]', 'm3', 5, session_id => 's-a')$$);
SELECT pg_temp.try($$SELECT * FROM convctx_recall.answered_before('[0,0,0]', 'm3', 0.5)$$);
-- the smallest that has one is taken
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1e-22,0,0]', 'm3')$$);
-- pgvector holds no NaN nor infinite element
SELECT pg_temp.try($$SELECT '[NaN,0,1]'::vector$$);
SELECT pg_temp.try($$SELECT '[Infinity,0,1]'::vector$$);
SELECT pg_temp.try($$SELECT '[3e38,0,1]'::vector + '[3e38,0,1]'$$);
SELECT e.embedding FROM convctx_recall.turn_embedding e WHERE e.turn_id = (SELECT id FROM ids WHERE name = 'a1');
SELECT count(*) FROM convctx_recall.turn_embedding;

------------------------------------------------------------------------------
-- Tenants: another tenant's embeddings are never read nor written
------------------------------------------------------------------------------
SET convctx.tenant = 'globex';
SELECT count(*) FROM convctx_recall.recall('[1,0,0]', 'm3', 10);
SELECT count(*) FROM convctx_recall.unembedded_turns('m3');
SELECT pg_temp.try($$SELECT convctx_recall.store_embedding('s-a', (SELECT id FROM ids WHERE name = 'a1'), 'm3', '[1,0,0]')$$);
INSERT INTO ids VALUES ('g1', (convctx.begin_turn('s-a', 'r1', 'globex question', 1)).turn_id);
SELECT convctx_recall.store_embedding('s-a', (SELECT id FROM ids WHERE name = 'g1'), 'm3', '[1,0,0]');
SELECT session_id, question_neutral FROM convctx_recall.recall('[1,0,0]', 'm3', 10);
SET convctx.tenant = 'acme';
SELECT session_id, question_neutral FROM convctx_recall.recall('[1,0,0]', 'm3', 10, session_id => 's-a');

------------------------------------------------------------------------------
-- Roles: the app role recalls for its tenant; nobody else gets anything
------------------------------------------------------------------------------
CREATE ROLE recall_app IN ROLE convctx_app;
CREATE ROLE recall_admin IN ROLE convctx_admin;
CREATE ROLE recall_nobody;
SELECT convctx.bind_role_tenant('recall_app', 'acme');
SELECT convctx.bind_role_tenant('recall_admin', 'acme');
-- a hostile app role plants look-alikes of what the statements call
CREATE SCHEMA recall_app_schema AUTHORIZATION recall_app;
GRANT SELECT ON ids TO recall_app;
SET ROLE recall_app;
CREATE TABLE recall_app_schema.calls (what text);
CREATE FUNCTION recall_app_schema.dist(vector, vector) RETURNS float8 LANGUAGE sql
    AS $$ INSERT INTO recall_app_schema.calls VALUES ('operator') RETURNING 0::float8 $$;
CREATE OPERATOR recall_app_schema.<=> (LEFTARG = vector, RIGHTARG = vector, FUNCTION = recall_app_schema.dist);
CREATE FUNCTION recall_app_schema.count(bigint) RETURNS bigint LANGUAGE sql
    AS $$ INSERT INTO recall_app_schema.calls VALUES ('count') RETURNING 0::bigint $$;
SET search_path = recall_app_schema, public;
RESET convctx.tenant;
SELECT session_id, turn_no FROM convctx_recall.recall('[1,0,0]', 'm3', 2);
SELECT count(*) FROM convctx_recall.answered_before('[1,0,0]', 'm3', 0.5);
SELECT convctx_recall.store_embedding('s-a', (SELECT id FROM ids WHERE name = 'a2'), 'm3', '[0,1,0]');
SELECT count(*) FROM convctx_recall.unembedded_turns('m3');
SELECT count(*) AS planted_calls FROM recall_app_schema.calls;
-- no table, no administration
SELECT pg_temp.try($$SELECT count(*) FROM convctx_recall.turn_embedding$$);
SELECT pg_temp.try($$SELECT convctx_recall.add_model('mine', 3)$$);
SELECT pg_temp.try($$SELECT convctx_recall.drop_model('m3')$$);
SELECT pg_temp.try($$SELECT convctx_recall.rebuild_index('m3')$$);
SELECT pg_temp.try($$SELECT convctx_recall.index_tenants()$$);
SELECT pg_temp.try($$SELECT convctx_recall.start_index_worker()$$);
-- its tenant only: naming another is refused
SET convctx.tenant = 'globex';
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', 'm3')$$);
RESET convctx.tenant;
RESET search_path;
RESET ROLE;
-- the tenant's administrator gets no more: no table, no administration, no other tenant
SET ROLE recall_admin;
SELECT session_id, turn_no FROM convctx_recall.recall('[1,0,0]', 'm3', 2);
SELECT pg_temp.try($$SELECT count(*) FROM convctx_recall.tenant_index$$);
SELECT pg_temp.try($$SELECT convctx_recall.index_tenants('m3', 1)$$);
SELECT pg_temp.try($$SELECT convctx_recall.start_index_worker()$$);
SELECT pg_temp.try($$SELECT convctx_recall.drop_model('m3')$$);
SET convctx.tenant = 'globex';
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', 'm3', 10, session_id => 's-a')$$);
RESET convctx.tenant;
RESET ROLE;
SET ROLE recall_nobody;
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', 'm3')$$);
RESET ROLE;
-- pooled, as for turns: with convctx.tenant_scope = transaction a service role acting for
-- every tenant names the tenant in each transaction (use_tenant); one left by an earlier
-- transaction is refused, storing and recalling alike
CREATE ROLE recall_service IN ROLE convctx_app;
SELECT convctx.bind_role_all_tenants('recall_service');
SET convctx.tenant_scope = transaction;
SET ROLE recall_service;
SET convctx.tenant = 'acme';
SELECT pg_temp.try($$SELECT count(*) FROM convctx_recall.recall('[1,0,0]', 'm3', 10)$$);
SELECT pg_temp.try($$SELECT convctx_recall.store_embedding('s-a', gen_random_uuid(), 'm3', '[1,0,0]')$$);
BEGIN;
SELECT convctx.use_tenant('globex');
SELECT session_id, question_neutral FROM convctx_recall.recall('[1,0,0]', 'm3', 10);
COMMIT;
RESET ROLE;
RESET convctx.tenant_scope;
SET convctx.tenant = 'acme';
-- a role of convctx_app that is not bound acts for no tenant
CREATE ROLE recall_unbound IN ROLE convctx_app;
SET ROLE recall_unbound;
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', 'm3')$$);
SELECT pg_temp.try($$SELECT convctx_recall.store_embedding('s-a', gen_random_uuid(), 'm3', '[1,0,0]')$$);
RESET ROLE;
SET convctx.tenant = 'acme';

------------------------------------------------------------------------------
-- Export and import carry the embeddings: an identity's export (for access,
-- or before its erasure) has them; an import stores them where the model is
-- registered, and says why not where it is not
------------------------------------------------------------------------------
SELECT record_type, count(*) FROM convctx.export_records(identity_id => 'alice') GROUP BY 1 ORDER BY 1;
SELECT i.name, l ->> 'model' AS model, l -> 'embedding' AS embedding, l ? 'stored_at' AS stored_at
  FROM convctx.export_records(identity_id => 'alice') x, jsonb(x.line) l, ids i
 WHERE x.record_type = 'embedding' AND i.id = (l ->> 'turn_id')::uuid ORDER BY 1;
CREATE TEMP TABLE exported AS
SELECT n, record_type, line FROM convctx.export_records() WITH ORDINALITY x(record_type, line, n);
SELECT record_type, count(*) FROM exported GROUP BY 1 ORDER BY 1;
-- into another tenant: stored, recalled there; again: already there
SET convctx.tenant = 'initech';
SELECT * FROM convctx.import_records(ARRAY(SELECT line FROM exported ORDER BY n));
-- the same vectors, the same times
SELECT count(*) AS same FROM convctx_recall.turn_embedding a JOIN convctx_recall.turn_embedding b
 USING (session_id, turn_id, model_no)
 WHERE a.tenant_id = 'acme' AND b.tenant_id = 'initech'
   AND a.embedding::text = b.embedding::text AND a.stored_at = b.stored_at;
SELECT round(distance::numeric, 4) AS distance, session_id, turn_no, question_neutral
  FROM convctx_recall.recall('[1,0.05,0]', 'm3', 3);
SELECT count(*) FROM convctx_recall.unembedded_turns('m3');
SELECT record_type, skipped, skipped_why FROM convctx.import_records(ARRAY(SELECT line FROM exported ORDER BY n))
 WHERE record_type = 'embedding';
-- an embedding of an old version (a file of before 0.6.0): not stored, changed here
SET convctx.tenant = 'wayne';
SELECT record_type, imported, skipped, skipped_why FROM convctx.import_records(ARRAY(
    SELECT line FROM (SELECT n::numeric, line FROM exported
                      UNION ALL
                      SELECT (SELECT max(n) FROM exported WHERE line::jsonb ->> 'session_id' = 's-b') + 0.5,
                             jsonb_build_object('type', 'embedding', 'session_id', 's-b',
                                                'turn_id', (SELECT id FROM ids WHERE name = 'b1'), 'model', 'm3',
                                                'embedding', '[1, 0, 0]'::jsonb,
                                                'stored_at', '2026-01-01T00:00:00+00:00')::text) x
     ORDER BY n))
 WHERE record_type = 'embedding';
SET convctx.tenant = 'initech';
-- another embedding here, a redacted turn here
SELECT convctx_recall.store_embedding('s-a', (SELECT id FROM ids WHERE name = 'a2'), 'm3', '[0,1,1]');
SELECT convctx.redact_turn('s-a', (SELECT id FROM ids WHERE name = 'a3'));
SELECT record_type, skipped, skipped_why FROM convctx.import_records(ARRAY(SELECT line FROM exported ORDER BY n))
 WHERE record_type = 'embedding';
-- a model this database does not have: skipped; one of other dimensions: refused, nothing written
SET convctx.tenant = 'umbrella';
SELECT record_type, imported, skipped, skipped_why FROM convctx.import_records(ARRAY(
    SELECT CASE record_type WHEN 'embedding' THEN jsonb_set(line::jsonb, '{model}', '"elsewhere"')::text ELSE line END
      FROM exported ORDER BY n))
 WHERE record_type IN ('turn', 'embedding');
SET convctx.tenant = 'hooli';
SELECT pg_temp.try($$SELECT * FROM convctx.import_records(ARRAY(
    SELECT CASE record_type WHEN 'embedding' THEN jsonb_set(line::jsonb, '{model}', '"other"')::text ELSE line END
      FROM exported ORDER BY n))$$);
-- bad records: a clear error naming the record, nothing written
CREATE TEMP TABLE bad_embedding AS
SELECT n, record_type, line::jsonb AS line FROM exported WHERE line::jsonb ->> 'session_id' = 's-a';
SELECT pg_temp.try(format($$SELECT * FROM convctx.import_records(ARRAY(
    SELECT CASE WHEN n = (SELECT min(n) FROM bad_embedding WHERE record_type = 'embedding')
                THEN jsonb_set(line, %L, %L)::text ELSE line::text END
      FROM bad_embedding ORDER BY n))$$, k, v))
  FROM (VALUES ('{embedding}', '[]'), ('{embedding}', '["1"]'), ('{embedding}', '[1e40, 0, 0]'),
               ('{embedding}', '[0, 0, 0]'), ('{embedding}', '[1e-30, 0, 0]'),
               ('{embedding}', '[-1e-1000, 1e1000, 0]'),
               ('{embedding}', (SELECT jsonb_agg(0) FROM generate_series(1, 2001))),
               ('{embedding}', '{"x": 1}'), ('{turn_id}', to_jsonb(gen_random_uuid()::text)),
               ('{model}', '""'), ('{stored_at}', '"soon"'), ('{extra}', '1')) b(k, v);
-- two embeddings of a turn under one model
SELECT pg_temp.try($$SELECT * FROM convctx.import_records(ARRAY(
    SELECT line::text FROM (SELECT n, line FROM bad_embedding
                            UNION ALL SELECT n, line FROM bad_embedding WHERE record_type = 'embedding') x
     ORDER BY n))$$);
SELECT count(*) FROM convctx.session WHERE tenant_id = 'hooli';
-- numbers a float4 cannot hold: too small is 0, as pgvector reads it
SELECT * FROM convctx.import_records(ARRAY(
    SELECT CASE WHEN record_type = 'embedding' AND line ->> 'turn_id' = (SELECT id FROM ids WHERE name = 'a1')::text
                THEN jsonb_set(line, '{embedding}', '[-1e-1000, 1e-50, 1]')::text ELSE line::text END
      FROM bad_embedding ORDER BY n)) WHERE record_type = 'embedding';
SELECT e.embedding FROM convctx_recall.turn_embedding e JOIN ids ON ids.id = e.turn_id
 WHERE e.tenant_id = 'hooli' AND ids.name = 'a1';
-- JSON has no negative zero: exported as 0, which is the same vector
SET convctx.tenant = 'initech';
SELECT convctx_recall.store_embedding('s-a', (SELECT id FROM ids WHERE name = 'a1'), 'm3', '[-0,1e-50,1]');
SELECT e.embedding FROM convctx_recall.turn_embedding e JOIN ids ON ids.id = e.turn_id
 WHERE e.tenant_id = 'initech' AND ids.name = 'a1';
SELECT line::jsonb -> 'embedding' FROM convctx.export_records() WHERE record_type = 'embedding'
   AND line::jsonb ->> 'turn_id' = (SELECT id FROM ids WHERE name = 'a1')::text;
SELECT record_type, skipped_why FROM convctx.import_records(ARRAY(
    SELECT line FROM convctx.export_records() WITH ORDINALITY x(record_type, line, n) ORDER BY n))
 WHERE record_type = 'embedding';
SET convctx.tenant = 'acme';

------------------------------------------------------------------------------
-- Forgetting: redaction, erasure, the anonymous cap and purges delete the
-- embeddings of what they remove, in the same transaction
------------------------------------------------------------------------------
SELECT tenant_id, session_id, count(*) FROM convctx_recall.turn_embedding GROUP BY 1, 2 ORDER BY 1, 2;
BEGIN;
SELECT convctx.redact_turn('s-a', (SELECT id FROM ids WHERE name = 'a1'));
SELECT question_neutral FROM convctx_recall.recall('[1,0,0]', 'm3', 10, session_id => 's-a');
ROLLBACK;
SELECT count(*) FROM convctx_recall.recall('[1,0,0]', 'm3', 10, session_id => 's-a');
SELECT convctx.redact_turn('s-a', (SELECT id FROM ids WHERE name = 'a1'));
SELECT count(*) FROM convctx_recall.turn_embedding WHERE session_id = 's-a' AND tenant_id = 'acme';
-- a tombstone takes no embedding
SELECT convctx_recall.store_embedding('s-a', (SELECT id FROM ids WHERE name = 'a1'), 'm3', '[1,0,0]');
SELECT convctx.redact_session('s-b');
SELECT count(*) FROM convctx_recall.turn_embedding WHERE session_id = 's-b' AND tenant_id = 'acme';
SELECT convctx.erase_identity('alice');
SELECT count(*) FROM convctx_recall.turn_embedding WHERE tenant_id = 'acme';
SELECT count(*) FROM convctx.export_records() WHERE record_type = 'embedding';
-- the cap: an anonymous session keeps its last convctx.max_session_turns turns
SET convctx.max_session_turns = 2;
INSERT INTO ids SELECT 'c' || i, (convctx.begin_turn('s-c', 'r' || i, 'question c' || i, 1)).turn_id
  FROM generate_series(1, 2) i;
SELECT count(convctx_recall.store_embedding('s-c', turn_id, 'm3', '[1,1,1]'))
  FROM convctx_recall.unembedded_turns('m3');
SELECT (convctx.begin_turn('s-c', 'r3', 'question c3', 1)).repeated;
SELECT t.question_neutral FROM convctx_recall.turn_embedding e JOIN convctx.turn t USING (tenant_id, session_id, turn_id)
 WHERE e.session_id = 's-c' ORDER BY 1;
RESET convctx.max_session_turns;
-- the retention purge of expired anonymous sessions
UPDATE convctx.session SET last_activity_at = now() - interval '400 days' WHERE session_id = 's-c';
SELECT convctx.purge(1000) IS NOT NULL AS purged;
SELECT count(*) FROM convctx_recall.turn_embedding WHERE session_id = 's-c';
SELECT tenant_id, session_id, count(*) FROM convctx_recall.turn_embedding GROUP BY 1, 2 ORDER BY 1, 2;

------------------------------------------------------------------------------
-- Administration: the index is rebuilt from the stored embeddings; the
-- statements follow a renamed schema of pgvector; a model is dropped whole
------------------------------------------------------------------------------
SET convctx.tenant = 'globex';
SELECT convctx_recall.rebuild_index('m3', 8, 32);
CALL pg_temp.wait_indexes();
SELECT replace(pg_get_indexdef(('convctx_recall.' || :'acme_index')::regclass), :'acme_no', 'N');
SELECT ready, pending, last_error FROM convctx_recall.tenant_index;
SELECT session_id, question_neutral FROM convctx_recall.recall('[1,0,0]', 'm3', 10);
CREATE SCHEMA vectors;
ALTER EXTENSION vector SET SCHEMA vectors;
SELECT session_id, question_neutral FROM convctx_recall.recall('[1,0,0]', 'm3', 10);
SELECT convctx_recall.rebuild_index('m3');
CALL pg_temp.wait_indexes();
SELECT replace(pg_get_indexdef(('convctx_recall.' || :'acme_index')::regclass), :'acme_no', 'N');
-- the worker acts as the owner with search_path pinned: a database's search_path and what
-- is planted there are not used; pgvector's schema must still be a superuser's
ALTER DATABASE :"DBNAME" SET search_path = recall_app_schema, public;
SET ROLE recall_app;
CREATE FUNCTION recall_app_schema.random() RETURNS float8 LANGUAGE sql
    AS $$ INSERT INTO recall_app_schema.calls VALUES ('random') RETURNING 0.5::float8 $$;
CREATE FUNCTION recall_app_schema.format(text, integer, integer) RETURNS text LANGUAGE sql
    AS $$ INSERT INTO recall_app_schema.calls VALUES ('format') RETURNING 'x' $$;
CREATE FUNCTION recall_app_schema.int4eq(integer, integer) RETURNS boolean LANGUAGE sql
    AS $$ INSERT INTO recall_app_schema.calls VALUES ('=') RETURNING true $$;
CREATE OPERATOR recall_app_schema.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = recall_app_schema.int4eq);
RESET ROLE;
TRUNCATE recall_app_schema.calls;
SELECT convctx_recall.rebuild_index('m3');
CALL pg_temp.wait_indexes();
SELECT ready, pending, last_error FROM convctx_recall.tenant_index;
SELECT count(*) AS planted_calls FROM recall_app_schema.calls;
GRANT CREATE ON SCHEMA vectors TO recall_app;
SELECT convctx_recall.rebuild_index('m3');
CALL pg_temp.wait_indexes();
SELECT ready, pending, last_error FROM convctx_recall.tenant_index;
REVOKE CREATE ON SCHEMA vectors FROM recall_app;
-- a later run builds what failed
SELECT convctx_recall.index_tenants('m3');
CALL pg_temp.wait_indexes();
SELECT ready, pending, last_error FROM convctx_recall.tenant_index;
ALTER DATABASE :"DBNAME" RESET search_path;
SELECT pg_temp.try($$SELECT convctx_recall.rebuild_index('nope')$$);
SELECT convctx_recall.drop_model('m3');
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', 'm3')$$);
SELECT count(*) FROM convctx_recall.turn_embedding;
SELECT count(*) FROM convctx_recall.tenant_index;
SELECT indexrelid::regclass FROM pg_index WHERE indrelid = 'convctx_recall.turn_embedding'::regclass ORDER BY 1;

------------------------------------------------------------------------------
-- Memory: a backend's kept plans of recall do not grow with the number of
-- models (one plan of each exact kind serves every model, at most 64 go
-- through tenants' indexes), and those through a dropped index are freed
-- before the next recall
------------------------------------------------------------------------------
SET convctx.tenant = 'memtest';
INSERT INTO ids SELECT 'm' || i, (convctx.begin_turn('s-m', 'r' || i, 'question m' || i, 1)).turn_id
  FROM generate_series(1, 2) i;
SELECT convctx.link_session('mona', 's-m');
CREATE TEMP VIEW recall_plans AS
SELECT count(*) FILTER (WHERE ident NOT LIKE '%index_no OPERATOR%') AS exact,
       count(*) FILTER (WHERE ident LIKE '%index_no OPERATOR%') AS through_indexes
  FROM pg_backend_memory_contexts WHERE name = 'CachedPlanSource' AND ident LIKE '%<=>%';
SELECT count(convctx_recall.add_model('mem' || i, 3)) FROM generate_series(1, 70) i;
SELECT count(convctx_recall.store_embedding('s-m', ids.id, 'mem' || i, '[1,2,3]'))
  FROM generate_series(1, 70) i, ids WHERE ids.name IN ('m1', 'm2');
SELECT count(*) FROM generate_series(1, 70) i,
       LATERAL (SELECT turn_id FROM convctx_recall.recall('[1,2,3]', 'mem' || i, 5)
                UNION ALL SELECT turn_id FROM convctx_recall.recall('[1,2,3]', 'mem' || i, 5, session_id => 's-m')
                UNION ALL SELECT turn_id FROM convctx_recall.recall('[1,2,3]', 'mem' || i, 5, identity_id => 'mona')
                UNION ALL SELECT turn_id FROM convctx_recall.answered_before('[1,2,3]', 'mem' || i, 0)) r;
SELECT * FROM recall_plans;
SELECT convctx_recall.index_tenants(min_embeddings => 2);
CALL pg_temp.wait_indexes();
SELECT count(*) FROM generate_series(1, 70) i, convctx_recall.recall('[1,2,3]', 'mem' || i, 5) r;
SELECT * FROM recall_plans;
SELECT sum(convctx_recall.drop_model('mem' || i)) FROM generate_series(1, 70) i;
SELECT count(*) FROM convctx_recall.recall('[1,2]', 'other', 5);
SELECT * FROM recall_plans;
SET convctx.tenant = 'globex';
-- What a login role with no convctx membership reads of the tenants' indexes: their
-- names, sizes and counters, but nothing that says which tenant: the numbers are random,
-- the indexes of a run are built in a random order (their OIDs), tenant_index is closed
DO $$
BEGIN
    FOR i IN 1 .. 30 LOOP
        PERFORM set_config('convctx.tenant', 'order_' || lpad(i::text, 2, '0'), true);
        PERFORM convctx_recall.store_embedding('s', (convctx.begin_turn('s', 'r' || j, 'q', 1)).turn_id,
                                               'other', ('[1,' || j || ']')::vectors.vector)
           FROM generate_series(1, 2) j;
    END LOOP;
END
$$;
SELECT convctx_recall.index_tenants('other', 2);
CALL pg_temp.wait_indexes();
SELECT count(*) FILTER (WHERE ready) AS ready, count(*) AS listed FROM convctx_recall.tenant_index
 WHERE tenant_id LIKE 'order\_%';
SELECT array_agg(i.index_no ORDER BY i.tenant_id) = array_agg(i.index_no ORDER BY i.index_no) AS numbers_in_tenant_order,
       array_agg(c.oid ORDER BY i.tenant_id) = array_agg(c.oid ORDER BY c.oid) AS built_in_tenant_order
  FROM convctx_recall.tenant_index i
  JOIN pg_class c ON c.relname = format('turn_embedding_%s_%s', i.model_no, i.index_no)
 WHERE i.tenant_id LIKE 'order\_%';
CREATE ROLE recall_outsider LOGIN;
SET ROLE recall_outsider;
SELECT count(*) >= 30 AS indexes_seen, bool_and(pg_relation_size(c.oid) > 0) AS sizes_seen
  FROM pg_class c WHERE c.relname ~ '^turn_embedding_[0-9]+_[0-9]+$';
SELECT count(*) >= 30 AS counters_seen FROM pg_stat_all_indexes WHERE indexrelname ~ '^turn_embedding_[0-9]+_[0-9]+$';
SELECT count(*) AS naming_a_tenant FROM pg_indexes WHERE schemaname = 'convctx_recall' AND indexdef LIKE '%order\_%';
SELECT pg_temp.try($$SELECT count(*) FROM convctx_recall.tenant_index$$);
SELECT pg_temp.try($$SELECT count(*) FROM convctx_recall.turn_embedding$$);
SELECT pg_temp.try($$SELECT convctx_recall.start_index_worker()$$);
RESET ROLE;
DROP ROLE recall_outsider;
-- \df+ says what each function does
SELECT p.proname, obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p WHERE p.pronamespace = 'convctx_recall'::regnamespace ORDER BY 1;
-- recall runs on a single server: convctx.distribute() refuses while it is installed
SELECT pg_temp.try($$SELECT convctx.distribute()$$);
-- without the extension, redaction goes on as before
DROP EXTENSION convctx_recall;
SELECT convctx.redact_session('s-a');
-- and an import counts the embeddings it cannot store
SET convctx.tenant = 'stark';
SELECT record_type, imported, skipped, skipped_why FROM convctx.import_records(ARRAY(SELECT line FROM exported ORDER BY n))
 WHERE record_type IN ('session', 'embedding');
SELECT count(*) FROM convctx.export_records() WHERE record_type = 'embedding';
SET convctx.tenant = 'globex';
SELECT pg_temp.try($$SELECT * FROM convctx_recall.recall('[1,0,0]', 'm3')$$);
DROP SCHEMA recall_app_schema CASCADE;
SELECT count(convctx.unbind_role_tenant(r)) FROM unnest(ARRAY['recall_app', 'recall_admin', 'recall_service']) r;
DROP VIEW recall_plans;
DROP TABLE ids, exact, scans, exported, bad_embedding;
DROP ROLE recall_app, recall_admin, recall_nobody, recall_unbound, recall_service, recall_schema_owner;

------------------------------------------------------------------------------
-- Recall is registered when the library loads: a backend whose first call
-- is a redaction or an erasure deletes the embeddings in its transaction
------------------------------------------------------------------------------
CREATE EXTENSION convctx_recall;
SET convctx.tenant = 'fresh';
SELECT convctx_recall.add_model('m3', 3);
SELECT (convctx.begin_turn('s-f', 'r1', 'question f1', 1)).turn_id AS f1 \gset
SELECT convctx_recall.store_embedding('s-f', :'f1', 'm3', '[1,0,0]');
\c
SELECT count(*) AS convctx_loaded FROM pg_settings WHERE name = 'convctx.max_session_turns';
SET convctx.tenant = 'fresh';
BEGIN;
SELECT convctx.redact_turn('s-f', :'f1');
SELECT count(*) FROM convctx_recall.turn_embedding WHERE tenant_id = 'fresh';
ROLLBACK;
SELECT convctx.link_session('frank', 's-f');
\c
SET convctx.tenant = 'fresh';
BEGIN;
SELECT convctx.erase_identity('frank') IS NOT NULL AS erased;
SELECT count(*) FROM convctx_recall.turn_embedding WHERE tenant_id = 'fresh';
ROLLBACK;
DROP EXTENSION convctx_recall;
