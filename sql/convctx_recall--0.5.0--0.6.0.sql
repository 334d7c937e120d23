/* convctx_recall--0.5.0--0.6.0.sql: recall after review */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx_recall UPDATE TO '0.6.0'" to load this file. \quit

------------------------------------------------------------------------------
-- Development forms of 0.5.0
------------------------------------------------------------------------------

-- Forms of 0.5.0 from before the tenants' indexes were numbered
-- (turn_embedding.index_no) were development states that main never held
-- at a landing: refused before anything changes.
DO $development_forms$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid OPERATOR(pg_catalog.=) 'convctx_recall.turn_embedding'::pg_catalog.regclass
                      AND a.attname OPERATOR(pg_catalog.=) 'index_no' AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'convctx_recall 0.5.0 in this database is a development form that cannot be updated in place'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Its table turn_embedding has no column index_no: the form of 0.5.0 it was installed from came before the first one that was released.',
                  HINT = 'DROP EXTENSION convctx_recall, then CREATE EXTENSION convctx_recall and add_model again: embeddings are derived from the turns, and unembedded_turns lists them for the embedder to store again.';
    END IF;
END
$development_forms$;

------------------------------------------------------------------------------
-- Embeddings without a cosine distance
------------------------------------------------------------------------------

-- store_embedding and the import refuse an embedding whose cosine distance
-- is not a number (norm zero, or too large for a float4): one stored
-- before is never found by a tenant's index and sorts last in an exact
-- search. It is deleted, so that its turn is on the embedder's work list
-- again (unembedded_turns).
DELETE FROM convctx_recall.turn_embedding e
 WHERE cosine_distance(e.embedding, e.embedding) OPERATOR(pg_catalog.=) 'NaN'::pg_catalog.float8;

------------------------------------------------------------------------------
-- Old versions keep no embedding
------------------------------------------------------------------------------

-- replace_turn now deletes the embeddings of the version it replaces (and
-- an import stores none for an old version): those stored before are
-- deleted here, as they are never recalled.
DELETE FROM convctx_recall.turn_embedding e
 USING convctx.turn t
 WHERE t.tenant_id OPERATOR(pg_catalog.=) e.tenant_id
   AND t.session_id OPERATOR(pg_catalog.=) e.session_id
   AND t.turn_id OPERATOR(pg_catalog.=) e.turn_id
   AND t.replaced_by_turn_id IS NOT NULL;
-- Tenant indexes: built without blocking, random numbers
------------------------------------------------------------------------------

-- The indexes are built by a background worker with CREATE INDEX
-- CONCURRENTLY (start_index_worker), so that no other tenant waits; their
-- numbers are random, so that they say nothing of tenant or order. The
-- indexes of 0.5.0, numbered in tenant order, are dropped and listed again
-- under new numbers, to be built by the worker started here once the
-- update commits; until each is ready, its tenant's recall compares the
-- rows one by one.
DROP FUNCTION convctx_recall.create_tenant_index(integer, text);

DO $renumber$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT i.model_no, i.index_no FROM convctx_recall.tenant_index i LOOP
        IF pg_catalog.to_regclass(pg_catalog.format('convctx_recall.turn_embedding_%s_%s', r.model_no, r.index_no)) IS NOT NULL THEN
            EXECUTE pg_catalog.format('DROP INDEX convctx_recall.turn_embedding_%s_%s', r.model_no, r.index_no);
        END IF;
    END LOOP;
END
$renumber$;

ALTER EXTENSION convctx_recall DROP SEQUENCE convctx_recall.tenant_index_index_no_seq;
ALTER TABLE convctx_recall.tenant_index ALTER COLUMN index_no DROP IDENTITY;
ALTER TABLE convctx_recall.tenant_index
    ADD COLUMN ready boolean NOT NULL DEFAULT false,
    ADD COLUMN pending boolean NOT NULL DEFAULT true,
    ADD COLUMN requested_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    ADD COLUMN built_at timestamptz,
    ADD COLUMN last_error text;
UPDATE convctx_recall.turn_embedding e SET index_no = NULL WHERE e.index_no IS NOT NULL;

DO $renumber$
DECLARE
    r record;
    no integer;
BEGIN
    -- out of the way of the new numbers first
    UPDATE convctx_recall.tenant_index i SET index_no = -i.index_no;
    FOR r IN SELECT i.model_no, i.tenant_id FROM convctx_recall.tenant_index i ORDER BY pg_catalog.random() LOOP
        LOOP
            no := ('x' OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.gen_random_uuid()::pg_catalog.text, 1, 8))::bit(32)::integer
                  OPERATOR(pg_catalog.&) 2147483647;
            EXIT WHEN no OPERATOR(pg_catalog.>) 0
                  AND NOT EXISTS (SELECT FROM convctx_recall.tenant_index t WHERE t.index_no OPERATOR(pg_catalog.=) no);
        END LOOP;
        UPDATE convctx_recall.tenant_index i SET index_no = no, ready = false, pending = true
         WHERE i.model_no OPERATOR(pg_catalog.=) r.model_no AND i.tenant_id OPERATOR(pg_catalog.=) r.tenant_id;
    END LOOP;
END
$renumber$;

ALTER TABLE convctx_recall.tenant_index ADD CONSTRAINT tenant_index_no_check CHECK (index_no > 0);

COMMENT ON TABLE convctx_recall.tenant_index IS
    'the tenants with an HNSW index of their own for a model (index_tenants): turn_embedding_<model_no>_<index_no>, index_no random; built by the index worker while pending, used by recall once ready; the others are searched exactly';

-- The tenants' indexes are built by a background worker of convctx's
-- library (src/recall/recall_index.c) that start_index_worker starts and that
-- waits for the caller's transaction to end: as the extension's owner, it
-- marks a pending tenant's rows with its number, builds the index with
-- CREATE INDEX CONCURRENTLY beside the old one, drops the old one with
-- DROP INDEX CONCURRENTLY and marks the entry ready. No store, redaction,
-- erasure, purge or recall of another tenant waits for it; the tenant's
-- own recall compares its rows one by one until the entry is ready.
CREATE FUNCTION convctx_recall.start_index_worker()
RETURNS boolean
AS 'MODULE_PATHNAME', 'convctx_recall_start_index_worker'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx_recall.start_index_worker() IS
    'start the background worker that builds the pending tenant indexes once this transaction ends; false, with a warning, when no worker slot is free';

CREATE OR REPLACE FUNCTION convctx_recall.index_tenants(model text DEFAULT NULL, min_embeddings bigint DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    no integer;
    made integer := 0;
BEGIN
    IF index_tenants.model IS NOT NULL
       AND NOT EXISTS (SELECT FROM convctx_recall.model x WHERE x.model OPERATOR(pg_catalog.=) index_tenants.model) THEN
        RAISE EXCEPTION 'embedding model "%" is not registered', index_tenants.model
            USING ERRCODE = 'undefined_object',
                  HINT = 'Register it with convctx_recall.add_model(model, dimensions).';
    END IF;
    FOR r IN SELECT e.model_no, e.tenant_id
               FROM convctx_recall.turn_embedding e, convctx_recall.model x
              WHERE x.model_no OPERATOR(pg_catalog.=) e.model_no
                AND (index_tenants.model IS NULL OR x.model OPERATOR(pg_catalog.=) index_tenants.model)
                AND NOT EXISTS (SELECT FROM convctx_recall.tenant_index t
                                 WHERE t.model_no OPERATOR(pg_catalog.=) e.model_no
                                   AND t.tenant_id OPERATOR(pg_catalog.=) e.tenant_id)
              GROUP BY e.model_no, e.tenant_id
             HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>=) index_tenants.min_embeddings
              ORDER BY pg_catalog.random()
    LOOP
        -- 31 random bits of a strong random UUID: a number that says nothing of the tenant
        LOOP
            no := ('x' OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.gen_random_uuid()::pg_catalog.text, 1, 8))::bit(32)::integer
                  OPERATOR(pg_catalog.&) 2147483647;
            EXIT WHEN no OPERATOR(pg_catalog.>) 0
                  AND NOT EXISTS (SELECT FROM convctx_recall.tenant_index t WHERE t.index_no OPERATOR(pg_catalog.=) no);
        END LOOP;
        INSERT INTO convctx_recall.tenant_index (model_no, tenant_id, index_no) VALUES (r.model_no, r.tenant_id, no);
        made := made OPERATOR(pg_catalog.+) 1;
    END LOOP;
    -- listed again: what failed is tried again, its error forgotten
    UPDATE convctx_recall.tenant_index t SET last_error = NULL WHERE t.pending AND t.last_error IS NOT NULL;
    IF FOUND OR EXISTS (SELECT FROM convctx_recall.tenant_index t WHERE t.pending) THEN
        PERFORM convctx_recall.start_index_worker();
    END IF;
    RETURN made;
END
$$;

COMMENT ON FUNCTION convctx_recall.index_tenants(text, bigint) IS
    'list every tenant with at least min_embeddings embeddings of the model (every model: NULL) for an HNSW index of its own, and start the worker that builds what is pending once this transaction ends; returns how many it listed; run it after a backfill, or from pg_cron';

CREATE OR REPLACE FUNCTION convctx_recall.rebuild_index(model text, m integer DEFAULT NULL,
                                             ef_construction integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    no integer;
    made integer;
BEGIN
    UPDATE convctx_recall.model x
       SET m = coalesce(rebuild_index.m, x.m),
           ef_construction = coalesce(rebuild_index.ef_construction, x.ef_construction)
     WHERE x.model OPERATOR(pg_catalog.=) rebuild_index.model
    RETURNING x.model_no INTO no;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'embedding model "%" is not registered', rebuild_index.model
            USING ERRCODE = 'undefined_object',
                  HINT = 'Register it with convctx_recall.add_model(model, dimensions).';
    END IF;
    UPDATE convctx_recall.tenant_index i SET pending = true, requested_at = pg_catalog.clock_timestamp()
     WHERE i.model_no OPERATOR(pg_catalog.=) no;
    GET DIAGNOSTICS made = ROW_COUNT;
    -- listed again: what failed is tried again, its error forgotten
    UPDATE convctx_recall.tenant_index t SET last_error = NULL WHERE t.pending AND t.last_error IS NOT NULL;
    IF FOUND OR EXISTS (SELECT FROM convctx_recall.tenant_index t WHERE t.pending) THEN
        PERFORM convctx_recall.start_index_worker();
    END IF;
    RETURN made;
END
$$;

COMMENT ON FUNCTION convctx_recall.rebuild_index(text, integer, integer) IS
    'mark the tenants'' HNSW indexes of a model to be built again from the stored embeddings, with new settings when given, and start the worker that builds them once this transaction ends; returns how many';

CREATE OR REPLACE FUNCTION convctx_recall.drop_model(model text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    no integer;
    r record;
    n bigint;
    name text;
BEGIN
    SELECT x.model_no INTO no FROM convctx_recall.model x
     WHERE x.model OPERATOR(pg_catalog.=) drop_model.model;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    FOR r IN SELECT i.index_no FROM convctx_recall.tenant_index i WHERE i.model_no OPERATOR(pg_catalog.=) no
    LOOP
        FOREACH name IN ARRAY ARRAY[pg_catalog.format('turn_embedding_%s_%s', no, r.index_no),
                                    pg_catalog.format('turn_embedding_%s_%s_new', no, r.index_no)] LOOP
            IF pg_catalog.to_regclass('convctx_recall.' OPERATOR(pg_catalog.||) name) IS NOT NULL THEN
                EXECUTE pg_catalog.format('DROP INDEX convctx_recall.%I', name);
            END IF;
        END LOOP;
    END LOOP;
    DELETE FROM convctx_recall.turn_embedding e WHERE e.model_no OPERATOR(pg_catalog.=) no;
    GET DIAGNOSTICS n = ROW_COUNT;
    DELETE FROM convctx_recall.model x WHERE x.model_no OPERATOR(pg_catalog.=) no;
    RETURN n;
END
$$;

REVOKE ALL ON FUNCTION convctx_recall.start_index_worker() FROM PUBLIC;

SELECT convctx_recall.start_index_worker()
 WHERE EXISTS (SELECT FROM convctx_recall.tenant_index i WHERE i.pending);
