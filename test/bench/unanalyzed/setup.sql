-- The database of the never-analyzed benchmark: convctx (and, with
-- pgvector, convctx_recall with a model), its tables left alone by
-- autovacuum, and the functions that load them and time one call. Run by
-- run.sh with psql variables dims (the model's dimensions, 0 without
-- pgvector).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS convctx;
SELECT :dims > 0 AS recall \gset
\if :recall
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS convctx_recall;
SELECT convctx_recall.add_model('bench', :dims);
\endif
CREATE SCHEMA bench;

-- Never analyzed, as after an import into a fresh database: autovacuum
-- would analyze the tables a minute later.
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname IN ('convctx', 'convctx_recall') AND c.relkind = 'r'
    LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off)', t);
    END LOOP;
END $$;

-- One session of n turns, each answered, with the identity 'importer':
-- what an import of a long conversation leaves.
CREATE PROCEDURE bench.long_session(n int) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.count(convctx.finalize_turn('long', convctx.start_turn('long', 'r' || i,
                                                   'question ' || i, 'importer'), 'answer ' || i))
       FROM generate_series(1, n) i;
END $$;

-- The embeddings of the long session, of all turns but every 21st (as an
-- app that embedded most of them), written as an import writes them.
CREATE PROCEDURE bench.embeddings(dims int) LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE $q$
        INSERT INTO convctx_recall.turn_embedding (tenant_id, session_id, turn_id, model_no, embedding)
        SELECT t.tenant_id, t.session_id, t.turn_id, m.model_no,
               (SELECT pg_catalog.array_agg(pg_catalog.random()::real) FROM generate_series(1, $1)
                 WHERE t.turn_no > 0)::vector
          FROM convctx.turn t, convctx_recall.model m
         WHERE t.session_id = 'long' AND t.turn_no % 21 <> 0$q$ USING dims;
END $$;

-- For each size, an identity with that many sessions, a turn answered in each.
CREATE PROCEDURE bench.identities(sizes int[]) LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    FOREACH n IN ARRAY sizes LOOP
        PERFORM pg_catalog.count(convctx.finalize_turn(s, convctx.start_turn(s, 'r1', 'a question', ident),
                                                       'an answer'))
           FROM (SELECT 'user' || n AS ident, 'user' || n || '-' || i AS s FROM generate_series(1, n) i) x;
        COMMIT;
    END LOOP;
END $$;

-- The turn redacted: the middle one of the long session.
CREATE TABLE bench.target AS SELECT NULL::uuid AS turn_id;
CREATE PROCEDURE bench.choose_target() LANGUAGE sql AS $$
    UPDATE bench.target SET turn_id = (SELECT turn_id FROM convctx.turn
                                        WHERE session_id = 'long'
                                          AND turn_no = (SELECT max(turn_no) / 2 FROM convctx.turn
                                                          WHERE session_id = 'long'));
$$;

-- The warm-up of a backend before a call: the same function on other rows
-- (rolled back), so that the call timed runs the kept plans the first one
-- made on the tables as they are, without the cost of loading the library.
CREATE FUNCTION bench.warm_redact() RETURNS void LANGUAGE sql AS $$
    SELECT convctx.redact_turn('long', (SELECT turn_id FROM convctx.turn WHERE session_id = 'long' AND turn_no = 1));
    SELECT
$$;
CREATE FUNCTION bench.warm_erase() RETURNS void LANGUAGE sql AS $$
    SELECT convctx.erase_identity('warmup');
    SELECT
$$;
CREATE PROCEDURE bench.warmup_identity() LANGUAGE sql AS $$
    SELECT pg_catalog.count(convctx.finalize_turn(s, convctx.start_turn(s, 'r1', 'a question', 'warmup'), 'an answer'))
      FROM (SELECT 'warmup-' || i AS s FROM generate_series(1, 2) i) x;
$$;

-- One call, timed inside the caller's transaction (rolled back by run.sh,
-- so that every round does the same work): milliseconds, and what it did.
CREATE FUNCTION bench.redact(OUT ms float8, OUT done bigint) LANGUAGE plpgsql AS $$
DECLARE
    id uuid := (SELECT turn_id FROM bench.target);
    t0 timestamptz := clock_timestamp();
BEGIN
    done := convctx.redact_turn('long', id)::int;
    ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
CREATE FUNCTION bench.erase(ident text, OUT ms float8, OUT done bigint) LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
BEGIN
    done := convctx.erase_identity(ident);
    ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
