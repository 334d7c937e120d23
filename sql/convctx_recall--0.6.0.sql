/* convctx_recall--0.6.0.sql: semantic recall over convctx turns with pgvector */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION convctx_recall" to load this file. \quit

-- The embeddings of turns, brought by the app, one per turn and model,
-- beside the turns and deleted with them: a foreign key deletes them with
-- their turn (retention purges, the anonymous cap), and redaction and
-- erasure, which keep the turn as a tombstone, delete them in the same
-- transaction (src/recall/recall.c). The functions that read and write them are
-- in convctx's library and act as convctx does: they decide the tenant
-- from the calling role and switch to the extension's owner in C, with
-- search_path = pg_catalog, pg_temp, naming every schema.
--
-- Sections: schema guard; models; embeddings; functions; privileges.

------------------------------------------------------------------------------
-- Schema guard
------------------------------------------------------------------------------

-- As for convctx (convctx--0.5.0.sql): the schema must belong to the
-- extension's owner, who must be convctx's owner (the functions run as that
-- owner), and nobody else may create in it. The schema of extension vector
-- is named by the statements too; src/recall/recall.c checks it before every use.
DO $guard$
DECLARE
    creators pg_catalog.text;
    distributed boolean := false;
BEGIN
    -- Semantic recall runs on a single server: not beside tables that
    -- convctx.distribute() gave to Citus.
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
                '                WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''convctx.turn''::pg_catalog.regclass)'
           INTO distributed;
    END IF;
    IF distributed THEN
        RAISE EXCEPTION 'convctx_recall does not run on a Citus cluster'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'convctx.distribute() distributed convctx''s tables; embeddings are kept beside the turns on a single server.';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace n, pg_catalog.pg_extension e
                    WHERE n.nspname OPERATOR(pg_catalog.=) 'convctx_recall'
                      AND e.extname OPERATOR(pg_catalog.=) 'convctx'
                      AND n.nspowner OPERATOR(pg_catalog.=) e.extowner
                      AND e.extowner OPERATOR(pg_catalog.=) (SELECT r.oid FROM pg_catalog.pg_roles r
                                                           WHERE r.rolname OPERATOR(pg_catalog.=) current_user)) THEN
        RAISE EXCEPTION 'schema convctx_recall must belong to the owner of extension convctx, who must install convctx_recall'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Run CREATE EXTENSION convctx_recall as the role that created convctx, without a schema convctx_recall that another role created.';
    END IF;
    SELECT pg_catalog.string_agg(DISTINCT a.grantee::pg_catalog.regrole::pg_catalog.text, ', ') INTO creators
      FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
     WHERE n.nspname OPERATOR(pg_catalog.=) 'convctx_recall'
       AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
       AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner;
    IF creators IS NOT NULL THEN
        RAISE EXCEPTION 'roles other than its owner may create objects in schema convctx_recall: %', creators
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'REVOKE CREATE ON SCHEMA convctx_recall FROM those roles, and try again.';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_class c, pg_catalog.pg_namespace n
                WHERE c.relnamespace OPERATOR(pg_catalog.=) n.oid
                  AND n.nspname OPERATOR(pg_catalog.=) 'convctx_recall')
       OR EXISTS (SELECT FROM pg_catalog.pg_proc p, pg_catalog.pg_namespace n
                   WHERE p.pronamespace OPERATOR(pg_catalog.=) n.oid
                     AND n.nspname OPERATOR(pg_catalog.=) 'convctx_recall')
       OR EXISTS (SELECT FROM pg_catalog.pg_type t, pg_catalog.pg_namespace n
                   WHERE t.typnamespace OPERATOR(pg_catalog.=) n.oid
                     AND n.nspname OPERATOR(pg_catalog.=) 'convctx_recall')
       OR EXISTS (SELECT FROM pg_catalog.pg_operator o, pg_catalog.pg_namespace n
                   WHERE o.oprnamespace OPERATOR(pg_catalog.=) n.oid
                     AND n.nspname OPERATOR(pg_catalog.=) 'convctx_recall') THEN
        RAISE EXCEPTION 'schema convctx_recall holds objects that are not the extension''s'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Drop schema convctx_recall, or move what it holds elsewhere, and try again.';
    END IF;
END
$guard$;

------------------------------------------------------------------------------
-- Models
------------------------------------------------------------------------------

CREATE TABLE convctx_recall.model (
    model       text COLLATE "C" NOT NULL,
    model_no    integer GENERATED ALWAYS AS IDENTITY,
    dimensions  integer NOT NULL CHECK (dimensions BETWEEN 1 AND 2000),
    m           integer NOT NULL DEFAULT 16,
    ef_construction integer NOT NULL DEFAULT 64,
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT model_pkey PRIMARY KEY (model),
    CONSTRAINT model_no_key UNIQUE (model_no)
);

COMMENT ON TABLE convctx_recall.model IS
    'embedding models the app stores embeddings of (add_model): each with its dimensions and the HNSW settings of its tenants'' indexes';

SELECT pg_catalog.pg_extension_config_dump('convctx_recall.model', '');
SELECT pg_catalog.pg_extension_config_dump('convctx_recall.model_model_no_seq', '');

------------------------------------------------------------------------------
-- Embeddings
------------------------------------------------------------------------------

-- The column has no dimensions, so that models of different dimensions
-- share the table. A tenant with many embeddings of a model has its own
-- HNSW index (index_tenants), partial on index_no, the number the tenant's
-- index has in tenant_index (random, so that the catalog, which every role
-- reads, names no tenant and says nothing of their order), and built on the embedding cast to the model's
-- dimensions, as pgvector's README shows for vectors of several sizes in
-- one column: a search through it reads nothing of another tenant's, so
-- that neither its results nor its time depend on another tenant's
-- embeddings. The others are compared one by one.
CREATE TABLE convctx_recall.turn_embedding (
    tenant_id   text COLLATE "C" NOT NULL,
    session_id  text COLLATE "C" NOT NULL,
    turn_id     uuid NOT NULL,
    model_no    integer NOT NULL,
    index_no    integer,
    embedding   vector NOT NULL,
    stored_at   timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    CONSTRAINT turn_embedding_pkey PRIMARY KEY (tenant_id, session_id, turn_id, model_no),
    CONSTRAINT turn_embedding_turn_fkey FOREIGN KEY (tenant_id, session_id, turn_id)
        REFERENCES convctx.turn (tenant_id, session_id, turn_id) ON DELETE CASCADE,
    CONSTRAINT turn_embedding_model_fkey FOREIGN KEY (model_no)
        REFERENCES convctx_recall.model (model_no) ON DELETE CASCADE
);

-- A tenant's embeddings of a model: its exact search, and the counts of
-- index_tenants.
CREATE INDEX turn_embedding_tenant ON convctx_recall.turn_embedding (tenant_id, model_no);

COMMENT ON TABLE convctx_recall.turn_embedding IS
    'one embedding per turn and model, brought by the app (store_embedding); deleted with its turn, and by redaction and erasure of it';

SELECT pg_catalog.pg_extension_config_dump('convctx_recall.turn_embedding', '');

-- The tenants that have their own index of a model: index
-- turn_embedding_<model_no>_<index_no>, over the rows of that index_no, a
-- random number. The index worker (src/recall/recall_index.c) builds those that
-- are pending; recall uses a tenant's index once it is ready (every row of
-- the tenant marked with the number), else compares its rows one by one.
CREATE TABLE convctx_recall.tenant_index (
    model_no    integer NOT NULL REFERENCES convctx_recall.model (model_no) ON DELETE CASCADE,
    tenant_id   text COLLATE "C" NOT NULL,
    index_no    integer NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp(),
    ready       boolean NOT NULL DEFAULT false,
    pending     boolean NOT NULL DEFAULT true,
    requested_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    built_at    timestamptz,
    last_error  text,
    CONSTRAINT tenant_index_pkey PRIMARY KEY (model_no, tenant_id),
    CONSTRAINT tenant_index_no_key UNIQUE (index_no),
    CONSTRAINT tenant_index_no_check CHECK (index_no > 0)
);

COMMENT ON TABLE convctx_recall.tenant_index IS
    'the tenants with an HNSW index of their own for a model (index_tenants): turn_embedding_<model_no>_<index_no>, index_no random; built by the index worker while pending, used by recall once ready; the others are searched exactly';

SELECT pg_catalog.pg_extension_config_dump('convctx_recall.tenant_index', '');

------------------------------------------------------------------------------
-- Functions
------------------------------------------------------------------------------

CREATE FUNCTION convctx_recall.store_embedding(session_id text, turn_id uuid, model text, embedding vector)
RETURNS boolean
AS 'MODULE_PATHNAME', 'convctx_recall_store_embedding'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx_recall.store_embedding(text, uuid, text, vector) IS
    'store (or replace) the embedding of a live, current turn under a registered model; false when the turn is a tombstone or an old version';

CREATE FUNCTION convctx_recall.unembedded_turns(model text, max_turns integer DEFAULT 100,
                                                after_session_id text DEFAULT NULL,
                                                after_turn_id uuid DEFAULT NULL)
RETURNS TABLE (session_id text, turn_id uuid, turn_no bigint, question_neutral text,
               answer_neutral text, finalized boolean)
AS 'MODULE_PATHNAME', 'convctx_recall_unembedded_turns'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 100
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx_recall.unembedded_turns(text, integer, text, uuid) IS
    'the work list of an embedder: the tenant''s live, current turns without an embedding of the model, in (session_id, turn_id) order after the pair given';

CREATE FUNCTION convctx_recall.recall(embedding vector, model text, k integer DEFAULT 10,
                                      session_id text DEFAULT NULL, identity_id text DEFAULT NULL)
RETURNS TABLE (distance double precision, session_id text, turn_id uuid, turn_no bigint,
               created_at timestamptz, question_neutral text, answer_neutral text)
AS 'MODULE_PATHNAME', 'convctx_recall_recall'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 10
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx_recall.recall(vector, text, integer, text, text) IS
    'the k live, current turns nearest to an embedding (cosine distance), nearest first: of a session, of an identity''s conversations, or of the whole tenant';

CREATE FUNCTION convctx_recall.answered_before(embedding vector, model text,
                                               min_similarity double precision DEFAULT 0.9,
                                               identity_id text DEFAULT NULL)
RETURNS TABLE (similarity double precision, session_id text, turn_id uuid,
               question_neutral text, answer_neutral text)
AS 'MODULE_PATHNAME', 'convctx_recall_answered_before'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 1
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION convctx_recall.answered_before(vector, text, double precision, text) IS
    'the nearest answered live turn of the tenant (or of an identity) when its cosine similarity to the embedding is at least min_similarity: a semantic answer cache';

-- Administration: run by a superuser (nobody else may execute them), as
-- the caller; they create, drop and rebuild the tenants' indexes.
CREATE FUNCTION convctx_recall.add_model(model text, dimensions integer,
                                         m integer DEFAULT 16, ef_construction integer DEFAULT 64)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    no integer;
BEGIN
    IF add_model.dimensions IS NULL OR add_model.dimensions NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'dimensions must be between 1 and 2000'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('Got %s; pgvector''s HNSW index takes at most 2000.', add_model.dimensions);
    END IF;
    IF EXISTS (SELECT FROM convctx_recall.model x WHERE x.model OPERATOR(pg_catalog.=) add_model.model) THEN
        RAISE EXCEPTION 'embedding model "%" is registered already', add_model.model
            USING ERRCODE = 'duplicate_object',
                  HINT = 'Register a model of other dimensions under another name, or drop this one first (drop_model).';
    END IF;
    INSERT INTO convctx_recall.model (model, dimensions, m, ef_construction)
    VALUES (add_model.model, add_model.dimensions, add_model.m, add_model.ef_construction)
    RETURNING model_no INTO no;
    RETURN no;
END
$$;

COMMENT ON FUNCTION convctx_recall.add_model(text, integer, integer, integer) IS
    'register an embedding model with its dimensions and the HNSW settings (m, ef_construction, as pgvector takes them) of its tenants'' indexes; returns its number';

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

CREATE FUNCTION convctx_recall.index_tenants(model text DEFAULT NULL, min_embeddings bigint DEFAULT 1000)
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

CREATE FUNCTION convctx_recall.rebuild_index(model text, m integer DEFAULT NULL,
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

CREATE FUNCTION convctx_recall.drop_model(model text)
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

COMMENT ON FUNCTION convctx_recall.drop_model(text) IS
    'delete a model, its embeddings and its tenants'' indexes; returns how many embeddings were deleted';

------------------------------------------------------------------------------
-- Privileges
------------------------------------------------------------------------------

REVOKE ALL ON ALL ROUTINES IN SCHEMA convctx_recall FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA convctx_recall FROM PUBLIC;
REVOKE ALL ON SCHEMA convctx_recall FROM PUBLIC;

GRANT USAGE ON SCHEMA convctx_recall TO convctx_app, convctx_admin;

GRANT EXECUTE ON FUNCTION
    convctx_recall.store_embedding(text, uuid, text, vector),
    convctx_recall.unembedded_turns(text, integer, text, uuid),
    convctx_recall.recall(vector, text, integer, text, text),
    convctx_recall.answered_before(vector, text, double precision, text)
TO convctx_app;
