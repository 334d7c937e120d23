-- The exact path of recall against a plain exact scan of the same
-- embeddings, and exact search against a tenant's own HNSW index, by
-- tenant size. Run by run.sh after setup.sql, as the superuser, with
-- :sizes (a comma-separated list of tenant sizes, the largest holding a
-- session and an identity measured too).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

-- Tenants x<size> with no index of their own: sessions of 50 turns through
-- the API; in the largest, the first 25 sessions (1,250 turns) belong to
-- identity 'ident'.
CREATE TABLE bench.xtenant AS
SELECT s::int AS size, 'x' || s AS tenant_id, s::int = (SELECT max(z::int) FROM unnest(string_to_array(:'sizes', ',')) z) AS largest
  FROM unnest(string_to_array(:'sizes', ',')) s;
CREATE PROCEDURE bench.load_x() LANGUAGE plpgsql AS $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM bench.xtenant ORDER BY size LOOP
        PERFORM set_config('convctx.tenant', t.tenant_id, false);
        PERFORM count(convctx.begin_turn(t.tenant_id || '-s' || (i / 50), 'r' || i, 'question ' || i, 1,
                                         CASE WHEN t.largest AND i < 1250 THEN 'ident' END))
           FROM generate_series(0, t.size - 1) i;
        COMMIT;
        PERFORM count(convctx_recall.store_embedding(x.session_id, x.turn_id, 'bench',
                                                     bench.vec(x.session_id, x.turn_no)))
           FROM convctx.turn x WHERE x.tenant_id = t.tenant_id;
        COMMIT;
    END LOOP;
    PERFORM set_config('convctx.tenant', '', false);
END $$;
CALL bench.load_x();

-- The measured scopes: each tenant whole, and in the largest a session of
-- 50 turns and the identity; 20 queries each, near the tenant's sessions.
CREATE TABLE bench.xscope AS
SELECT 'tenant ' || size AS class, tenant_id, size, NULL::text AS session_id, NULL::text AS identity_id
  FROM bench.xtenant
UNION ALL
SELECT 'session', tenant_id, 50, tenant_id || '-s30', NULL FROM bench.xtenant WHERE largest
UNION ALL
SELECT 'identity', tenant_id, 1250, NULL, 'ident' FROM bench.xtenant WHERE largest;
CREATE TABLE bench.xquery AS
SELECT s.class, s.tenant_id, s.session_id, s.identity_id, q,
       bench.vec(s.tenant_id || '-s' || (CASE WHEN s.session_id IS NOT NULL THEN 30
                                              WHEN s.identity_id IS NOT NULL THEN (q * 37) % 25
                                              ELSE (q * 37) % greatest(1, s.size / 50) END), q, 1) AS v
  FROM bench.xscope s, generate_series(1, 20) q;

-- One recall through convctx, and the plain exact scan of the same
-- embeddings, timed on the server.
CREATE FUNCTION bench.time_recall(tenant text, v vector, s text, i text, OUT ms float8, OUT ids text[])
LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
BEGIN
    PERFORM set_config('convctx.tenant', tenant, true);
    PERFORM set_config('hnsw.ef_search', current_setting('bench.ef_search'), true);
    t0 := clock_timestamp();
    SELECT array_agg(turn_id::text) INTO ids FROM convctx_recall.recall(v, 'bench', 10, s, i);
    ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
CREATE FUNCTION bench.time_plain(tenant text, v vector, s text, i text, OUT ms float8, OUT ids text[])
LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
BEGIN
    t0 := clock_timestamp();
    IF s IS NOT NULL THEN
        SELECT array_agg(x.turn_id::text) INTO ids
          FROM (SELECT e.turn_id FROM convctx_recall.turn_embedding e
                 WHERE e.tenant_id = tenant AND e.model_no = 1 AND e.session_id = s
                 ORDER BY e.embedding <=> v LIMIT 10) x;
    ELSIF i IS NOT NULL THEN
        SELECT array_agg(x.turn_id::text) INTO ids
          FROM (SELECT e.turn_id FROM convctx_recall.turn_embedding e
                 WHERE e.tenant_id = tenant AND e.model_no = 1
                   AND e.session_id = ANY (ARRAY(SELECT l.session_id FROM convctx.session_link l
                                                  WHERE l.tenant_id = tenant AND l.identity_id = i))
                 ORDER BY e.embedding <=> v LIMIT 10) x;
    ELSE
        SELECT array_agg(x.turn_id::text) INTO ids
          FROM (SELECT e.turn_id FROM convctx_recall.turn_embedding e
                 WHERE e.tenant_id = tenant AND e.model_no = 1
                 ORDER BY e.embedding <=> v LIMIT 10) x;
    END IF;
    ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
CREATE TABLE bench.xtiming (round int, phase text, class text, who text, q int, ms float8, same boolean,
                            hits int);

-- One round: each query through recall and through the plain scan, which
-- one first alternating from query to query and round to round; phase
-- 'exact' while no x tenant has an index, 'hnsw' once they have.
CREATE PROCEDURE bench.xround(r int, phase text) LANGUAGE plpgsql AS $$
DECLARE
    x record;
    c record;
    b record;
BEGIN
    FOR x IN SELECT * FROM bench.xquery
              WHERE phase = 'exact' OR (class LIKE 'tenant %') ORDER BY class, q
    LOOP
        IF (x.q + r) % 2 = 0 THEN
            c := bench.time_recall(x.tenant_id, x.v, x.session_id, x.identity_id);
            b := bench.time_plain(x.tenant_id, x.v, x.session_id, x.identity_id);
        ELSE
            b := bench.time_plain(x.tenant_id, x.v, x.session_id, x.identity_id);
            c := bench.time_recall(x.tenant_id, x.v, x.session_id, x.identity_id);
        END IF;
        INSERT INTO bench.xtiming VALUES
            (r, phase, x.class, 'recall', x.q, c.ms, c.ids IS NOT DISTINCT FROM b.ids,
             (SELECT count(*) FROM unnest(c.ids) i WHERE i = ANY (b.ids))),
            (r, phase, x.class, 'plain', x.q, b.ms, NULL, NULL);
    END LOOP;
END $$;
CREATE VIEW bench.xper_round AS
SELECT phase, class, who, round, percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
       bool_and(same) AS same, avg(hits) / 10 AS recall
  FROM bench.xtiming GROUP BY 1, 2, 3, 4;
CREATE VIEW bench.xratio AS
SELECT c.phase, c.class, percentile_cont(0.5) WITHIN GROUP (ORDER BY c.p50 / b.p50) AS med,
       min(c.p50 / b.p50) AS lo, max(c.p50 / b.p50) AS hi,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY c.p50) AS recall_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY b.p50) AS plain_ms,
       bool_and(c.same) AS same, avg(c.recall) AS recall
  FROM bench.xper_round c JOIN bench.xper_round b USING (phase, class, round)
 WHERE c.who = 'recall' AND b.who = 'plain' GROUP BY 1, 2;
