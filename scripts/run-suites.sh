#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set): each suite as its own
# `make installcheck`, so a failing suite does not hide the next one, then the
# SQL examples of the documentation (scripts/doc-examples.sh) and the client
# suites (scripts/clients.sh: node-postgres, psycopg) and short runs of the
# browser, storage and (with pgvector) recall benchmarks (test/bench/*/run.sh), and the check that
# CONTRIBUTING.md's map of the tree names every file and suite
# (scripts/check-layout.sh), that the folders of src/ are layers and no C file of src/ or client/ depends on
# itself through others (scripts/check-deps.sh, on the built objects) and that no
# released install or update script changed (scripts/check-versions.sh)
# and that each C file of src/ includes what it uses and nothing else
# (scripts/check-includes.sh);
# then the diffs and logs of failures, and a final
# "N passed, N failed" line.
set -uo pipefail
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

passed=0
failed=0
status=0
# Whether pgvector is installed: the recall suite and benchmark need it.
RECALL=
[ -f "$("$PG_CONFIG" --sharedir)/extension/vector.control" ] && RECALL=1

run_suite() {
    local name=$1; shift
    local log="/tmp/convctx-suite-$name.$$.log" rc ok bad
    echo "== $name"
    if [ "$name" = docs ]; then
        bash scripts/doc-examples.sh 2>&1 | tee "$log"
    elif [ "$name" = clients ]; then
        bash scripts/clients.sh 2>&1 | tee "$log"
    elif [ "$name" = layout ]; then
        bash scripts/check-layout.sh 2>&1 | tee "$log"
    elif [ "$name" = deps ]; then
        bash scripts/check-deps.sh 2>&1 | tee "$log"
    elif [ "$name" = versions ]; then
        bash scripts/check-versions.sh 2>&1 | tee "$log"
    elif [ "$name" = includes ]; then
        bash scripts/check-includes.sh 2>&1 | tee "$log"
    elif [ "$name" = benchmarks ]; then
        # Small sizes, one short round: that each benchmark runs and reports
        # every target, never how fast (no timing is asserted).
        { CONVCTX_BENCH_TURNS=200000 CONVCTX_BENCH_ROUNDS=1 CONVCTX_BENCH_SECONDS=1 \
              bash test/bench/browser/run.sh &&
          CONVCTX_BENCH_TURNS=20000 CONVCTX_BENCH_SESSIONS=100 CONVCTX_BENCH_CLIENTS=2 \
              bash test/bench/storage/run.sh &&
          CONVCTX_BENCH_TURNS=500 CONVCTX_BENCH_SIZES="200 800" CONVCTX_BENCH_ROUNDS=1 \
              bash test/bench/unanalyzed/run.sh &&
          if [ -n "$RECALL" ]; then
              CONVCTX_BENCH_TURNS=20000 CONVCTX_BENCH_DIMS=32 CONVCTX_BENCH_MIN_EMBEDDINGS=1000 \
              CONVCTX_BENCH_ROUNDS=1 CONVCTX_BENCH_SECONDS=1 bash test/bench/recall/run.sh &&
              CONVCTX_BENCH_BIG=5000 CONVCTX_BENCH_DIMS=16 CONVCTX_BENCH_SECONDS=2 \
              bash test/bench/recall_upkeep/run.sh
          fi; } 2>&1 | tee "$log"
    else
        make -s installcheck with_llvm=no "$@" 2>&1 | tee "$log"
    fi
    rc=${PIPESTATUS[0]}
    if [ "$name" = clients ]; then
        ok=$(sed -n 's/^clients: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$log" | tail -n 1)
        bad=$(sed -n 's/^clients: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$log" | tail -n 1)
        ok=${ok:-0}; bad=${bad:-0}
    elif [ "$name" = layout ]; then
        # one check: passes or fails as a whole
        if [ "$rc" -eq 0 ]; then ok=1; bad=0; else ok=0; bad=1; fi
    elif [ "$name" = deps ] || [ "$name" = versions ] || [ "$name" = includes ]; then
        ok=$(sed -n "s/^$name: \([0-9]*\) passed, \([0-9]*\) failed\$/\1/p" "$log" | tail -n 1)
        bad=$(sed -n "s/^$name: \([0-9]*\) passed, \([0-9]*\) failed\$/\2/p" "$log" | tail -n 1)
        ok=${ok:-0}; bad=${bad:-0}
    elif [ "$name" = benchmarks ]; then
        # browser: eight targets, storage: one, unanalyzed: three, recall (with
        # pgvector): twelve, recall_upkeep: four, each PASS or MISS
        want=12; [ -n "$RECALL" ] && want=28
        if [ "$(grep -cE ' (PASS|MISS)$' "$log")" -eq "$want" ]; then ok=1; bad=0; else ok=0; bad=1; fi
    elif [ "$name" = tap ]; then
        ok=$(grep -cE '^[[:space:]]*ok [0-9]+' "$log" || true)
        bad=$(grep -cE '^[[:space:]]*not ok [0-9]+' "$log" || true)
    else
        ok=$(grep -cE '\.\.\. ok' "$log" || true)
        bad=$(grep -cE '\.\.\. FAILED' "$log" || true)
    fi
    # A suite that fails without a failed test (a crash, a missing file)
    # still counts as a failure.
    if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
    passed=$((passed + ok))
    failed=$((failed + bad))
    [ "$rc" -ne 0 ] && status=1
    rm -f "$log"
}

run_suite regression ISOLATION= TAP_TESTS=
run_suite isolation REGRESS= TAP_TESTS=
if ls test/t/*.pl >/dev/null 2>&1; then
    run_suite tap REGRESS= ISOLATION= PROVE_FLAGS=--verbose
fi
# Semantic recall (extension convctx_recall) needs pgvector: scripts/test.sh
# builds it when it has the source, and fails when it does not manage to.
if [ -n "$RECALL" ]; then
    run_suite recall TAP_TESTS= \
        REGRESS="$(cd test/recall/sql && ls *.sql | sed 's/\.sql$//' | tr '\n' ' ')" \
        REGRESS_OPTS="--inputdir=test/recall --load-extension=convctx" \
        ISOLATION="$(cd test/recall/specs && ls *.spec | sed 's/\.spec$//' | tr '\n' ' ')" \
        ISOLATION_OPTS="--inputdir=test/recall --load-extension=convctx"
else
    echo "== recall: SKIP (pgvector is not installed; scripts/test.sh builds it from CONVCTX_PGVECTOR_SOURCE)"
fi
run_suite docs
run_suite clients
run_suite benchmarks
run_suite layout
run_suite deps
run_suite versions
run_suite includes

for f in regression.diffs output_iso/regression.diffs; do
    if [ -s "$f" ]; then echo "== $f"; cat "$f"; fi
done
if [ "$status" -ne 0 ] && [ -d tmp_check/log ]; then
    for f in tmp_check/log/*; do echo "== $f"; tail -n 200 "$f"; done
fi

echo "suites: $passed passed, $failed failed"
exit $status
