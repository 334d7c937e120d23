#!/usr/bin/env bash
# Hash flooding: context_merge of 16,000 node ids that all share one value
# of PostgreSQL's unkeyed hash_bytes() (made by test/bench/hash_flood/idmap_collide.c)
# against 16,000 ordinary ids, in a throwaway cluster. With the per-backend
# keyed SipHash of src/core/idmap.c both cost about the same; with an unkeyed
# hash the colliding ids make the merge quadratic. Prints the median of 5
# interleaved rounds of each, with the spread, and their ratio.
# Timings are information only: exits non-zero only when the run fails.
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
as_test_user gcc -O2 -o "$STAGE/idmap_collide" "$STAGE/test/bench/hash_flood/idmap_collide.c"
as_test_user sh -c "'$STAGE/idmap_collide' 16000 > '$STAGE/colliding_ids.txt'"
in_throwaway_cluster "the benchmark" \
    psql -X -q -v ON_ERROR_STOP=1 -v ids="$STAGE/colliding_ids.txt" <<'SQL'
CREATE EXTENSION convctx;
CREATE TEMP TABLE colliding (id text);
\set copy '\\copy colliding FROM ' :'ids'
:copy
SELECT count(DISTINCT hashtext(id)) = 1 AS all_ids_share_one_hash, count(*) AS ids FROM colliding;
CREATE TEMP TABLE ordinary AS SELECT md5(i::text) AS id FROM generate_series(1, 16000) i;
CREATE TEMP TABLE rounds (kind text, ms float8);
DO $$
DECLARE
    a_colliding text[] := ARRAY(SELECT id FROM colliding);
    a_ordinary text[] := ARRAY(SELECT id FROM ordinary);
    t timestamptz;
    r jsonb;
BEGIN
    PERFORM convctx.context_merge('{}', a_ordinary, 16000);          -- warm-up
    FOR i IN 1..5 LOOP
        t := clock_timestamp();
        r := convctx.context_merge('{}', a_colliding, 16000);
        INSERT INTO rounds VALUES ('colliding', extract(epoch FROM clock_timestamp() - t) * 1000);
        IF jsonb_array_length(r -> 'activeNodeIds') <> 16000 THEN RAISE 'lost ids'; END IF;
        t := clock_timestamp();
        r := convctx.context_merge('{}', a_ordinary, 16000);
        INSERT INTO rounds VALUES ('ordinary', extract(epoch FROM clock_timestamp() - t) * 1000);
    END LOOP;
END $$;
SELECT kind, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) AS median_ms,
       round(min(ms)::numeric, 2) || ' .. ' || round(max(ms)::numeric, 2) AS spread_ms
FROM rounds GROUP BY kind ORDER BY kind;
SELECT round((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) FROM rounds WHERE kind = 'colliding')::numeric
           / (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) FROM rounds WHERE kind = 'ordinary')::numeric, 2)
       AS colliding_over_ordinary;
SQL
