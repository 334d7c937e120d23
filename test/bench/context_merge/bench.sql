-- context_merge benchmark: convctx.context_merge (C) against the same merge
-- written in plain SQL, at 16, 256 and 4096 ids. Run by context_merge.sh
-- inside a throwaway cluster; fails only when the two disagree.

\set ON_ERROR_STOP 1
\set VERBOSITY terse
-- JIT compilation would be timed with the calls.
SET jit = off;

SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS convctx;
DROP SCHEMA IF EXISTS convctx_bench CASCADE;
CREATE SCHEMA convctx_bench;
SET client_min_messages = notice;

-- Every id gets one sort key: ids in node_ids sort after all stored ones
-- (2^40 is above any array position), by their first position there; the
-- others by their last position in the stored list. Keeping the last
-- max_nodes of the sorted ids is the pruning. Of the SQL forms tried this
-- was the fastest (one hash aggregate, one sort, no LIMIT node).
CREATE FUNCTION convctx_bench.context_merge_sql(ctx jsonb, node_ids text[], max_nodes integer DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT coalesce(ctx, '{}') || jsonb_build_object('activeNodeIds', coalesce(to_jsonb(
           ids[greatest(n - coalesce(max_nodes,
                                     current_setting('convctx.max_active_nodes', true)::integer,
                                     256), 0) + 1:]),
           '[]'))
FROM (SELECT array_agg(id ORDER BY k) AS ids, count(*) AS n
      FROM (SELECT id, coalesce(min(ord) FILTER (WHERE referenced) + 1099511627776, max(ord)) AS k
            FROM (SELECT id, ord, false AS referenced
                  FROM jsonb_array_elements_text(ctx -> 'activeNodeIds') WITH ORDINALITY AS e(id, ord)
                  UNION ALL
                  SELECT id, ord, true
                  FROM unnest(node_ids) WITH ORDINALITY AS b(id, ord)) AS occurrences
            WHERE id <> ''
            GROUP BY id) AS keyed) AS merged
$$;

-- A context of n ids plus keys that must be carried through.
CREATE FUNCTION convctx_bench.make_ctx(n integer)
RETURNS jsonb
LANGUAGE sql IMMUTABLE
AS $$
SELECT jsonb_build_object('activeNodeIds', jsonb_agg('kg:node:' || i ORDER BY i),
                          'lang', 'en', 'flags', '{"x": [1, {"y": null}]}'::jsonb)
FROM generate_series(1, n) AS i
$$;

-- n/2 ids alternating between one already in make_ctx(n) and a new one, so
-- half move to the end, half are appended, and n/4 are pruned at max n.
CREATE FUNCTION convctx_bench.make_ids(n integer)
RETURNS text[]
LANGUAGE sql IMMUTABLE
AS $$
SELECT array_agg(CASE WHEN j % 2 = 1 THEN 'kg:node:' || (2 * j) ELSE 'kg:new:' || (j / 2) END ORDER BY j)
FROM generate_series(1, n / 2) AS j
$$;

\echo == correctness: C and SQL results must be identical

DO $$
DECLARE
    c     record;
    c_res jsonb;
    s_res jsonb;
    bad   integer := 0;
    total integer := 0;
BEGIN
    FOR c IN
        SELECT * FROM (VALUES
            ('null ctx', NULL::jsonb, ARRAY['a', 'b']::text[], NULL::integer),
            ('null both', NULL, NULL, NULL),
            ('no key', '{}', ARRAY['a'], NULL),
            ('empty list', '{"activeNodeIds": []}', '{}', NULL),
            ('move and append', '{"activeNodeIds": ["a", "b", "c"]}', ARRAY['b', 'd'], NULL),
            ('all again', '{"activeNodeIds": ["a", "b", "c"]}', ARRAY['c', 'b', 'a'], NULL),
            ('batch duplicates, NULL, empty', NULL, ARRAY['x', 'y', 'x', NULL, '', 'y', 'z'], NULL),
            ('only NULL and empty', '{"activeNodeIds": ["a"]}', ARRAY[NULL, ''], NULL),
            ('stored duplicates', '{"activeNodeIds": ["a", "b", "a", "c", ""]}', ARRAY['d'], NULL),
            ('other keys', '{"activeNodeIds": ["a"], "flags": {"x": [1, {"y": null}]}, "v": 2}', ARRAY['b'], NULL),
            ('other keys, no list', '{"flags": {"x": true}}', ARRAY['b'], NULL),
            ('bytewise ids', '{"activeNodeIds": ["IE:VAT", "ie:vat"]}', ARRAY['IE:VAT ', 'Überweisung', 'IE:VAT'], NULL),
            ('prune new', '{"activeNodeIds": ["a", "b", "c"]}', ARRAY['d', 'e'], 3),
            ('prune moved', '{"activeNodeIds": ["a", "b", "c"]}', ARRAY['a'], 2),
            ('prune batch', NULL, ARRAY['a', 'b', 'c', 'd'], 2),
            ('prune without batch', '{"activeNodeIds": ["a", "b", "c"]}', NULL, 1),
            ('default max', NULL, (SELECT array_agg('n' || i) FROM generate_series(1, 300) i), NULL),
            ('bench 16', convctx_bench.make_ctx(16), convctx_bench.make_ids(16), 16),
            ('bench 256', convctx_bench.make_ctx(256), convctx_bench.make_ids(256), 256),
            ('bench 4096', convctx_bench.make_ctx(4096), convctx_bench.make_ids(4096), 4096)
        ) AS t(name, ctx, ids, max_nodes)
    LOOP
        total := total + 1;
        c_res := convctx.context_merge(c.ctx, c.ids, c.max_nodes);
        s_res := convctx_bench.context_merge_sql(c.ctx, c.ids, c.max_nodes);
        IF c_res IS DISTINCT FROM s_res THEN
            RAISE NOTICE 'MISMATCH %: C % / SQL %', c.name, left(c_res::text, 300), left(s_res::text, 300);
            bad := bad + 1;
        END IF;
    END LOOP;
    IF bad > 0 THEN
        RAISE EXCEPTION '% correctness case(s) differ between C and SQL', bad;
    END IF;
    RAISE NOTICE 'all % cases identical', total;
END
$$;

-- The timed statement: an aggregate over the result forces one call per
-- row (no InitPlan, no constant folding of a STABLE function). The check
-- below counts the calls with track_functions.
CREATE FUNCTION convctx_bench.timed_query(fn text)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$ SELECT format('SELECT count(%s($1, $2, $3)) FROM generate_series(1, $4) AS g', fn) $$;

\echo == call counts: each function runs once per row of the timed statement

DO $$
DECLARE
    fn     text;
    n      integer;
    before bigint;
    calls  bigint;
    nrows  bigint;
BEGIN
    PERFORM set_config('track_functions', 'all', true);
    FOREACH n IN ARRAY ARRAY[16, 256, 4096] LOOP
        FOREACH fn IN ARRAY ARRAY['convctx.context_merge', 'convctx_bench.context_merge_sql'] LOOP
            before := coalesce(pg_stat_get_xact_function_calls(
                to_regprocedure(fn || '(jsonb, text[], integer)')), 0);
            EXECUTE convctx_bench.timed_query(fn) INTO nrows
                USING convctx_bench.make_ctx(n), convctx_bench.make_ids(n), n, 50;
            calls := pg_stat_get_xact_function_calls(to_regprocedure(fn || '(jsonb, text[], integer)')) - before;
            IF nrows <> 50 OR calls <> 50 THEN
                RAISE EXCEPTION '% at % ids: % calls for % rows, expected 50', fn, n, calls, nrows;
            END IF;
        END LOOP;
    END LOOP;
    RAISE NOTICE '50 rows -> 50 calls for both functions at every size';
END
$$;

\echo == timing (about 1.5 minutes on 2 cores)

-- A fresh backend's malloc maps each allocation over 128 kB and unmaps it
-- when freed, so calls at 4096 ids would pay page faults that a long-lived
-- backend (whose malloc raised that threshold after its first large free)
-- does not, and the C time at 4096 would depend on what ran before in the
-- session. One large allocation puts the allocator in that steady state.
DO $$ BEGIN PERFORM length(repeat('x', 16 * 1024 * 1024)); END $$;

CREATE TEMP TABLE bench_result (
    size      integer,
    fn        text,
    round     integer,
    calls     integer,     -- calls per timed run
    ms        float8
);

-- Per size: one warm-up run of calls/10 of each function, then 3 timed
-- rounds of both, interleaved (the one that goes first alternates) so that
-- drift hits both alike. The SQL merge at 4096 ids runs 1,000 calls
-- instead of 10,000 (about 8 ms a call) and is scaled in the report.
DO $$
DECLARE
    fns   text[] := ARRAY['convctx.context_merge', 'convctx_bench.context_merge_sql'];
    n     integer;
    i     integer;
    rep   integer;
    ctx   jsonb;
    ids   text[];
    calls integer[];
    nrows bigint;
    t0    timestamptz;
    ms    float8;
BEGIN
    FOREACH n IN ARRAY ARRAY[16, 256, 4096] LOOP
        -- Built once, in memory: no detoasting inside the timed calls.
        ctx := convctx_bench.make_ctx(n);
        ids := convctx_bench.make_ids(n);
        calls := ARRAY[10000, CASE WHEN n = 4096 THEN 1000 ELSE 10000 END];
        FOR i IN 1..2 LOOP
            EXECUTE convctx_bench.timed_query(fns[i]) INTO nrows USING ctx, ids, n, calls[i] / 10;
        END LOOP;
        FOR rep IN 1..3 LOOP
            FOREACH i IN ARRAY CASE WHEN rep % 2 = 1 THEN ARRAY[1, 2] ELSE ARRAY[2, 1] END LOOP
                t0 := clock_timestamp();
                EXECUTE convctx_bench.timed_query(fns[i]) INTO nrows USING ctx, ids, n, calls[i];
                ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
                IF nrows <> calls[i] THEN
                    RAISE EXCEPTION '% at % ids: % rows, expected %', fns[i], n, nrows, calls[i];
                END IF;
                INSERT INTO bench_result VALUES (n, CASE i WHEN 1 THEN 'c' ELSE 'sql' END, rep, calls[i], ms);
            END LOOP;
        END LOOP;
    END LOOP;
END
$$;

-- Everything per 10,000 calls, per round.
CREATE TEMP VIEW bench_round AS
SELECT c.size, c.round,
       c.ms * 10000 / c.calls AS c_ms,
       s.ms * 10000 / s.calls AS sql_ms,
       s.calls AS sql_calls,
       (s.ms / s.calls) / (c.ms / c.calls) AS speedup,
       c.ms * 1000 / c.calls / c.size AS c_us_per_id
FROM bench_result c JOIN bench_result s ON s.size = c.size AND s.round = c.round AND s.fn = 'sql'
WHERE c.fn = 'c';

-- Medians over the rounds, with the spread.
CREATE TEMP VIEW bench_report AS
SELECT size, min(sql_calls) AS sql_calls,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY c_ms) AS c_ms, min(c_ms) AS c_min, max(c_ms) AS c_max,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY sql_ms) AS sql_ms, min(sql_ms) AS sql_min, max(sql_ms) AS sql_max,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY speedup) AS speedup, min(speedup) AS speedup_min,
       max(speedup) AS speedup_max,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY c_us_per_id) AS c_us_per_id
FROM bench_round
GROUP BY size;

\echo
\echo == results: ms per 10,000 calls, median [min-max] of 3 interleaved rounds after a warm-up run
\echo == (ctx holds size ids; node_ids holds size/2, half of them new; max_nodes = size;
\echo ==  backend allocator pre-warmed to the steady state of a long-lived session)
\pset footer off
SELECT size,
       format('%s [%s-%s]', to_char(c_ms, 'FM999990.0'), to_char(c_min, 'FM999990.0'),
              to_char(c_max, 'FM999990.0')) AS c_ms,
       format('%s [%s-%s]', to_char(sql_ms, 'FM9999990.0'), to_char(sql_min, 'FM9999990.0'),
              to_char(sql_max, 'FM9999990.0')) || CASE WHEN sql_calls < 10000 THEN ' *' ELSE '' END AS sql_ms,
       format('%sx [%s-%s]', to_char(speedup, 'FM99990.0'), to_char(speedup_min, 'FM99990.0'),
              to_char(speedup_max, 'FM99990.0')) AS speedup,
       to_char(c_us_per_id, 'FM990.0000') AS c_us_per_id
FROM bench_report
ORDER BY size;

\pset tuples_only on
\pset format unaligned
SELECT '* SQL at ' || size || ' ids: timed over ' || sql_calls || ' calls, scaled to 10,000'
FROM bench_report WHERE sql_calls < 10000 ORDER BY size;
\echo
WITH r AS (
    SELECT (SELECT speedup FROM bench_report WHERE size = 256) AS speedup_256,
           (SELECT c_ms FROM bench_report WHERE size = 4096) /
           (SELECT c_ms FROM bench_report WHERE size = 256) AS growth
)
SELECT format('context_merge at 256 ids vs the SQL merge: %sx (target >= 30x) %s',
              round(speedup_256::numeric, 1), CASE WHEN speedup_256 >= 30 THEN 'PASS' ELSE 'MISS' END)
       || E'\n' ||
       format('C time 4096 ids / 256 ids: %s (target 8 to 32, 16 if exactly linear) %s',
              round(growth::numeric, 1), CASE WHEN growth BETWEEN 8 AND 32 THEN 'PASS' ELSE 'MISS' END)
FROM r;

SET client_min_messages = warning;
DROP SCHEMA convctx_bench CASCADE;
