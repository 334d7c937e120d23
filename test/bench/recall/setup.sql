-- The recall benchmark's database: convctx and convctx_recall, :turns
-- embedded turns of :dims dimensions over 100 tenants of skewed sizes
-- (tenant k holds a share proportional to 1/k), the same vectors in a
-- bare pgvector table with a tenant column, the indexes, and the
-- functions that time one query. Run by run.sh.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SET maintenance_work_mem = '4GB';
SET max_parallel_maintenance_workers = 1;
CREATE EXTENSION IF NOT EXISTS convctx;
CREATE EXTENSION IF NOT EXISTS convctx_recall CASCADE;
CREATE SCHEMA bench;
SELECT convctx_recall.add_model('bench', :dims) AS model_no;

-- The app's role, bound to every tenant: the timed reads and writes run as
-- it (pgbench logs in with the cluster's password).
SELECT format('CREATE ROLE bench_app LOGIN PASSWORD %L IN ROLE convctx_app', :'password') \gexec
SELECT convctx.bind_role_all_tenants('bench_app');
GRANT USAGE ON SCHEMA bench TO bench_app;

-- Clustered vectors: 200 centers, and two small offsets added to each
-- (from 1,000 each: 200 million distinct vectors, so that exact search has
-- no ties); the stored turns' offsets and the queries' come from
-- different sets.
CREATE TABLE bench.center AS
SELECT c, (SELECT array_agg(random() - 0.5) FROM generate_series(1, :dims) WHERE c > 0)::vector AS v
  FROM generate_series(1, 200) c;
CREATE TABLE bench.noise AS
SELECT n, k, (SELECT array_agg(x) FROM (SELECT (random() - 0.5) * CASE WHEN k % 2 = 0 THEN 0.4 ELSE 0.2 END AS x
                                          FROM generate_series(1, :dims) WHERE n > 0) g)::vector AS v
  FROM generate_series(1, 1000) n, generate_series(0, 3) k;
CREATE UNIQUE INDEX ON bench.center (c);
CREATE UNIQUE INDEX ON bench.noise (k, n);
CREATE FUNCTION bench.vec(seed text, no bigint, k int DEFAULT 0) RETURNS vector LANGUAGE sql STABLE AS $$
    SELECT c.v + a.v + b.v FROM bench.center c, bench.noise a, bench.noise b
     WHERE c.c = 1 + abs(hashtext(seed)) % 200
       AND a.k = 2 * vec.k AND a.n = 1 + (no * 7919 + abs(hashtext(seed || 'x'))) % 1000
       AND b.k = 2 * vec.k + 1 AND b.n = 1 + (no * 104729 + abs(hashtext(seed || 'y'))) % 1000 $$;

-- The tenants: t1 .. t100, t1 the largest.
CREATE TABLE bench.tenant AS
SELECT k, 't' || k AS tenant_id,
       greatest(100, round(:turns / (k * (SELECT sum(1.0 / j) FROM generate_series(1, 100) j))))::int AS turns
  FROM generate_series(1, 100) k;

-- Turns through the API, 50 to a session; in t1, 10 000 of them (200
-- sessions) belong to the identity that the deletion measure erases.
CREATE PROCEDURE bench.load() LANGUAGE plpgsql AS $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM bench.tenant ORDER BY k LOOP
        PERFORM set_config('convctx.tenant', t.tenant_id, false);
        PERFORM count(convctx.begin_turn(t.tenant_id || '-s' || (i / 50), 'r' || i, 'question ' || i, 1,
                                         CASE WHEN t.k = 1 AND i < 10000 THEN 'victim' END))
           FROM generate_series(0, t.turns - 1) i;
        COMMIT;
        PERFORM count(convctx_recall.store_embedding(x.session_id, x.turn_id, 'bench',
                                                     bench.vec(x.session_id, x.turn_no)))
           FROM convctx.turn x WHERE x.tenant_id = t.tenant_id;
        COMMIT;
    END LOOP;
    PERFORM set_config('convctx.tenant', '', false);
END $$;
CALL bench.load();

-- The bare table: the same vectors, a tenant column, and an HNSW index
-- with the same settings: the HNSW query that convctx's is compared with.
CREATE TABLE bench.bare (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), tenant_id text NOT NULL,
                         embedding vector(:dims) NOT NULL);
INSERT INTO bench.bare (id, tenant_id, embedding) SELECT turn_id, tenant_id, embedding FROM convctx_recall.turn_embedding;
\timing on
CREATE INDEX bare_hnsw ON bench.bare USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
SELECT convctx_recall.index_tenants('bench', :min_embeddings) AS tenant_indexes;
-- the index worker builds them once that call committed: wait, committing between looks
CREATE PROCEDURE bench.wait_indexes() LANGUAGE plpgsql AS $$
BEGIN
    LOOP
        COMMIT;
        EXIT WHEN NOT EXISTS (SELECT FROM convctx_recall.tenant_index WHERE pending AND last_error IS NULL);
        PERFORM pg_sleep(0.2);
    END LOOP;
    IF EXISTS (SELECT FROM convctx_recall.tenant_index WHERE NOT ready) THEN
        RAISE EXCEPTION 'the index worker did not build every tenant index';
    END IF;
END $$;
CALL bench.wait_indexes();
\timing off
GRANT SELECT, INSERT ON bench.bare TO bench_app;
VACUUM ANALYZE bench.bare;
VACUUM ANALYZE convctx_recall.turn_embedding;
VACUUM ANALYZE convctx.turn;

-- 20 000 more turns of t1 without embeddings, with the vectors to store.
SET convctx.tenant = 't1';
CREATE TABLE bench.pending AS
SELECT row_number() OVER () AS n, b.turn_id, b.session_id, bench.vec(b.session_id, b.i, 1) AS v
  FROM (SELECT (convctx.begin_turn('t1-p' || (i / 50), 'r' || i, 'pending ' || i, 1)).turn_id,
               't1-p' || (i / 50) AS session_id, i
          FROM generate_series(0, 19999) i) b;
CREATE UNIQUE INDEX ON bench.pending (n);
GRANT SELECT ON bench.pending TO bench_app;
RESET convctx.tenant;

-- The queries: 20 per tenant, near the tenant's own sessions.
CREATE TABLE bench.query AS
SELECT t.tenant_id, q, bench.vec(t.tenant_id || '-s' || ((q * 37) % greatest(1, t.turns / 50)), q, 1) AS v
  FROM bench.tenant t, generate_series(1, 20) q;
GRANT SELECT ON bench.query TO bench_app;

-- One query of each, timed on the server: milliseconds and the ids found.
CREATE FUNCTION bench.time_convctx(tenant text, v vector, OUT ms float8, OUT ids text[]) LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
BEGIN
    PERFORM set_config('convctx.tenant', tenant, true);
    PERFORM set_config('hnsw.ef_search', current_setting('bench.ef_search'), true);
    t0 := clock_timestamp();
    SELECT array_agg(turn_id::text) INTO ids FROM convctx_recall.recall(v, 'bench', 10);
    ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
CREATE FUNCTION bench.time_bare(tenant text, v vector, OUT ms float8, OUT ids text[]) LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
BEGIN
    PERFORM set_config('hnsw.iterative_scan', 'strict_order', true);
    PERFORM set_config('hnsw.ef_search', current_setting('bench.ef_search'), true);
    t0 := clock_timestamp();
    SELECT array_agg(x.id::text) INTO ids
      FROM (SELECT b.id FROM bench.bare b WHERE b.tenant_id = tenant
             ORDER BY b.embedding <=> v LIMIT 10) x;
    ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA bench TO bench_app;

-- The exact answers, by comparing every one of a tenant's vectors (the
-- tenant's rows through the btree on the tenant, then a sort: no HNSW
-- index orders by this expression). The bare table holds the same rows
-- under the same ids.
CREATE TABLE bench.truth AS
SELECT q.tenant_id, q.q,
       (SELECT array_agg(x.turn_id::text) FROM (SELECT e.turn_id FROM convctx_recall.turn_embedding e
                                                 WHERE e.tenant_id = q.tenant_id AND e.model_no = 1
                                                 ORDER BY e.embedding <=> q.v LIMIT 10) x) AS ids
  FROM bench.query q;
GRANT SELECT ON bench.truth TO bench_app;
CREATE TABLE bench.timing (round int, class text, who text, tenant_id text, q int, ms float8, recall float8);
GRANT INSERT, SELECT ON bench.timing TO bench_app;
GRANT SELECT ON bench.tenant TO bench_app;

-- One round: for the three largest and the three smallest tenants, each
-- of their queries through convctx and through the bare table, which one
-- first alternating from query to query and round to round.
CREATE PROCEDURE bench.round(r int) LANGUAGE plpgsql AS $$
DECLARE
    x record;
    c record;
    b record;
BEGIN
    FOR x IN SELECT q.tenant_id, q.q, q.v, tr.ids,
                    CASE WHEN t.k <= 3 THEN 'large' ELSE 'small' END AS class
               FROM bench.query q JOIN bench.tenant t USING (tenant_id) JOIN bench.truth tr USING (tenant_id, q)
              WHERE t.k <= 3 OR t.k >= 98 ORDER BY t.k, q.q
    LOOP
        IF (x.q + r) % 2 = 0 THEN
            c := bench.time_convctx(x.tenant_id, x.v);
            b := bench.time_bare(x.tenant_id, x.v);
        ELSE
            b := bench.time_bare(x.tenant_id, x.v);
            c := bench.time_convctx(x.tenant_id, x.v);
        END IF;
        INSERT INTO bench.timing VALUES
            (r, x.class, 'convctx', x.tenant_id, x.q, c.ms,
             (SELECT count(*) FROM unnest(c.ids) i WHERE i = ANY (x.ids)) / 10.0),
            (r, x.class, 'bare', x.tenant_id, x.q, b.ms,
             (SELECT count(*) FROM unnest(b.ids) i WHERE i = ANY (x.ids)) / 10.0);
    END LOOP;
END $$;
GRANT EXECUTE ON PROCEDURE bench.round(int) TO bench_app;
