#!/usr/bin/env bash
# The index upkeep benchmark, inside the throwaway cluster
# (test/bench/recall_upkeep.sh; PGHOST/PGPORT/PGUSER set), or against any
# cluster the PG* variables name. One tenant holds CONVCTX_BENCH_BIG
# embeddings and an HNSW index of its own; eight others store, redact and
# recall through pgbench at a fixed rate, once with nothing else running
# and once while rebuild_index rebuilds the big tenant's index. Prints the
# p99 of each kind of call during the rebuild against twice its p99
# without, and the longest call during the rebuild against 1 s, with PASS
# or MISS (four lines).
set -euo pipefail
source test/bench/lib/pgbench.sh
BIG=${CONVCTX_BENCH_BIG:-100000}
DIMS=${CONVCTX_BENCH_DIMS:-64}
SECONDS_=${CONVCTX_BENCH_SECONDS:-20}
RATE=${CONVCTX_BENCH_RATE:-60}
DB=recall_upkeep_bench
work=$(mktemp -d /tmp/convctx-recall-upkeep.XXXXXX)
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
wait_built() {
    local i
    for i in $(seq 1 3600); do
        [ "$(q -c 'SELECT NOT EXISTS (SELECT FROM convctx_recall.tenant_index WHERE pending AND last_error IS NULL)')" = t ] && return
        sleep 0.2
    done
    echo "== the index worker did not finish"; exit 1
}

psql -X -q -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
psql -X -q -c "CREATE DATABASE $DB" >/dev/null
# The index worker builds with the database's settings: room for the HNSW
# graph in memory, and no parallel workers, so that a build takes one core
# of the machine's, not all of them.
psql -X -q -c "ALTER DATABASE $DB SET maintenance_work_mem = '${CONVCTX_BENCH_BUILD_MEMORY:-512MB}'" \
    -c "ALTER DATABASE $DB SET max_parallel_maintenance_workers = 0" >/dev/null
echo "== loading: tenant big with $BIG embeddings of $DIMS dimensions, 8 others with 700 each"
t0=$SECONDS
q -v big="$BIG" -v dims="$DIMS" <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION convctx;
CREATE EXTENSION convctx_recall CASCADE;
CREATE SCHEMA bench;
SELECT convctx_recall.add_model('bench', :dims) IS NOT NULL AS added \gset
SELECT set_config('bench.dims', :'dims', false) IS NOT NULL AS set \gset
CREATE FUNCTION bench.rvec(seed bigint) RETURNS vector LANGUAGE sql VOLATILE AS $$
    SELECT array_agg(random() - 0.5)::vector
      FROM generate_series(1, current_setting('bench.dims')::int) WHERE seed IS NOT NULL $$;
-- the big tenant, written directly: 100 turns to a session
INSERT INTO convctx.session (tenant_id, session_id, last_turn_no, live_turns, live_answers, created_at)
SELECT 'big', 'b' || s, 100, 100, 100, now() FROM generate_series(0, (:big - 1) / 100) s;
INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, finalized_at,
                          question_neutral, answer_neutral)
SELECT 'big', 'b' || (i / 100), gen_random_uuid(), i % 100 + 1, 'r' || i, now(), 'q' || i, 'a' || i
  FROM generate_series(0, :big - 1) i;
INSERT INTO convctx_recall.turn_embedding (tenant_id, session_id, turn_id, model_no, embedding)
SELECT t.tenant_id, t.session_id, t.turn_id, 1, bench.rvec(t.turn_no) FROM convctx.turn t WHERE t.tenant_id = 'big';
-- the others, through the API: 200 turns to store again, 500 to redact
CREATE TABLE bench.work (t int, n int, session_id text, turn_id uuid, v vector, PRIMARY KEY (t, n));
CREATE TABLE bench.victim (t int, n int, session_id text, turn_id uuid, PRIMARY KEY (t, n));
CREATE TABLE bench.query (n int PRIMARY KEY, v vector);
DO $$
BEGIN
    FOR k IN 1 .. 8 LOOP
        PERFORM set_config('convctx.tenant', 'o' || k, false);
        INSERT INTO bench.work
        SELECT k, i, 'w' || (i / 50), (convctx.begin_turn('w' || (i / 50), 'r' || i, 'question ' || i, 1)).turn_id,
               bench.rvec(i)
          FROM generate_series(1, 200) i;
        PERFORM convctx_recall.store_embedding(w.session_id, w.turn_id, 'bench', w.v) FROM bench.work w WHERE w.t = k;
        INSERT INTO bench.victim
        SELECT k, i, 'v' || (i / 50), (convctx.begin_turn('v' || (i / 50), 'r' || i, 'question ' || i, 1)).turn_id
          FROM generate_series(1, 500) i;
        PERFORM convctx_recall.store_embedding(v.session_id, v.turn_id, 'bench', bench.rvec(v.n))
           FROM bench.victim v WHERE v.t = k;
    END LOOP;
END
$$;
INSERT INTO bench.query SELECT n, bench.rvec(n) FROM generate_series(1, 100) n;
VACUUM ANALYZE convctx_recall.turn_embedding;
SQL
echo "== loaded in $((SECONDS - t0)) s"
t0=$SECONDS
q -c "SELECT convctx_recall.index_tenants('bench', $BIG)" >/dev/null
wait_built
echo "== the big tenant's index built in $((SECONDS - t0)) s: $(q -c "SELECT pg_size_pretty(pg_relation_size(c.oid)) FROM pg_class c, convctx_recall.tenant_index i WHERE c.relname = format('turn_embedding_%s_%s', i.model_no, i.index_no)")"

cat >"$work/store.sql" <<'SQL'
\set t random(1, 8)
\set n random(1, 200)
SELECT set_config('convctx.tenant', 'o' || :t, false);
SELECT convctx_recall.store_embedding(session_id, turn_id, 'bench', v) FROM bench.work WHERE t = :t AND n = :n;
SQL
cat >"$work/redact.sql" <<'SQL'
\set t random(1, 8)
\set n random(1, 500)
SELECT set_config('convctx.tenant', 'o' || :t, false);
SELECT convctx.redact_turn(session_id, turn_id) FROM bench.victim WHERE t = :t AND n = :n;
SQL
cat >"$work/recall.sql" <<'SQL'
\set t random(1, 8)
\set n random(1, 100)
SELECT set_config('convctx.tenant', 'o' || :t, false);
SELECT count(*) FROM bench.query q, convctx_recall.recall(q.v, 'bench', 10) r WHERE q.n = :n;
SQL
# The same load in both phases: the three kinds at random, RATE calls a
# second over 4 clients, each call logged (script 0 store, 1 redact, 2 recall).
run_load() {
    pgbench_run "$work/$1.out" "$DB" 4 -R "$RATE" -T "$SECONDS_" -l --log-prefix="$work/$1" \
        -f "$work/store.sql" -f "$work/redact.sql" -f "$work/recall.sql"
}
q -c "CREATE TABLE bench.tx (phase text, client int, no int, us bigint, script int, epoch bigint, epoch_us bigint, lag bigint)"
# load_log NAME PHASE: the calls pgbench logged under NAME, as PHASE's
load_log() {
    cat "$work/$1".[0-9]* | awk -v p="$2" '{ print p, $1, $2, $3, $4, $5, $6, ($7 == "" ? 0 : $7) }' >"$work/$1.tx"
    q -c "\\copy bench.tx FROM '$work/$1.tx' WITH (DELIMITER ' ')"
}

echo "== baseline: $SECONDS_ s of load, nothing else"
run_load base
load_log base base
echo "== the same load, in runs of $SECONDS_ s, until rebuild_index has rebuilt the big tenant's index"
t0=$(q -c "SELECT extract(epoch FROM clock_timestamp())")
q -c "SELECT convctx_recall.rebuild_index('bench')" >/dev/null
i=0
while :; do
    i=$((i + 1))
    run_load "rebuild$i"
    load_log "rebuild$i" rebuild
    [ "$(q -c 'SELECT pending FROM convctx_recall.tenant_index')" = t ] || break
done
wait_built
t1=$(q -c "SELECT extract(epoch FROM built_at) FROM convctx_recall.tenant_index")
q -c "DELETE FROM bench.tx WHERE phase = 'rebuild' AND epoch + epoch_us / 1e6 > $t1"
echo "== the rebuild took $(q -c "SELECT round($t1 - $t0, 1)") s; calls during it: $(q -c "SELECT count(*) FROM bench.tx WHERE phase = 'rebuild'"), without it: $(q -c "SELECT count(*) FROM bench.tx WHERE phase = 'base'")"
[ "$(q -c "SELECT ready AND NOT pending AND last_error IS NULL FROM convctx_recall.tenant_index")" = t ] ||
    { echo "== the rebuild failed"; exit 1; }

echo
echo "targets (latency of one call, ms, as pgbench saw it, without the rate's schedule lag):"
q <<'SQL'
CREATE VIEW bench.p99 AS
SELECT script, phase, percentile_cont(0.99) WITHIN GROUP (ORDER BY (us - lag) / 1000.0) AS p99,
       max((us - lag) / 1000.0) AS longest, count(*) AS calls
  FROM bench.tx GROUP BY 1, 2;
SELECT format('  %s of the other tenants, p99 during the rebuild <= 2x without (%s ms): %s ms (%s calls) %s',
              k.what, round(b.p99::numeric, 2), coalesce(round(r.p99::numeric, 2)::text, '-'), coalesce(r.calls, 0),
              CASE WHEN r.p99 <= 2 * b.p99 THEN 'PASS' ELSE 'MISS' END)
  FROM (VALUES (0, 'store_embedding'), (1, 'redact_turn'), (2, 'recall')) k(script, what)
  JOIN bench.p99 b ON b.script = k.script AND b.phase = 'base'
  LEFT JOIN bench.p99 r ON r.script = k.script AND r.phase = 'rebuild'
 ORDER BY k.script;
SELECT format('  longest call of another tenant during the rebuild <= 1000 ms: %s ms %s',
              coalesce(round(max(longest)::numeric, 1)::text, '-'),
              CASE WHEN max(longest) <= 1000 THEN 'PASS' ELSE 'MISS' END)
  FROM bench.p99 WHERE phase = 'rebuild';
SQL
rm -rf "$work"
