#!/usr/bin/env bash
# Runs inside pg_virtualenv, from the build directory. Prints the results.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
T=${CONVCTX_BENCH_SECONDS:-20}
PGBENCH="$("$PG_CONFIG" --bindir)/pgbench"
OUT=$(mktemp -d /tmp/convctx-bench-lifecycle.XXXXXX)
psql_run() { psql -X -q -v ON_ERROR_STOP=1 -d bench "$@"; }

createdb bench
psql_run -f "$HERE/setup.sql" >/dev/null

# 1. purge_all over the whole backlog
psql_run -c 'CALL bench.load_backlog(100000, 10)' -c 'VACUUM ANALYZE convctx.session, convctx.turn' -c 'CHECKPOINT'
start=$(date +%s.%N)
psql_run -c 'CALL convctx.purge_all()'
end=$(date +%s.%N)
left=$(psql_run -At -c "SELECT count(*) FROM convctx.turn WHERE session_id LIKE 'old-%'")
purge_s=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
purge_rate=$(awk -v s="$purge_s" 'BEGIN { printf "%d", 1000000 / s }')
[ "$left" = 0 ] || { echo "purge_all left $left expired turns"; exit 1; }

# pgbench_run LOG: 8 clients of the lifecycle for T seconds; refuse any failure.
pgbench_run() {
    if ! "$PGBENCH" -n -M prepared -c 8 -j 2 -T "$T" -f "$HERE/lifecycle.pgbench" bench >"$1" 2>&1 ||
       grep -qiE 'aborted|error' "$1" || ! grep -qE '^number of failed transactions: 0 ' "$1"; then
        echo "== pgbench failed:"; cat "$1"; exit 1
    fi
    sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$1"
}

# 2. lifecycle throughput alone, then while purge_all works through a new backlog
psql_run -c 'VACUUM ANALYZE convctx.session, convctx.turn' -c 'CHECKPOINT'
alone=$(pgbench_run "$OUT/alone.log")
psql_run -c 'CALL bench.load_backlog(100000, 10)' -c 'VACUUM ANALYZE convctx.session, convctx.turn' -c 'CHECKPOINT'
( start=$(date +%s.%N); psql_run -c 'CALL convctx.purge_all()';
  awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }' >"$OUT/purge_during" ) &
purger=$!
during=$(pgbench_run "$OUT/during.log")
wait "$purger"
purge_during=$(cat "$OUT/purge_during")
ratio=$(awk -v a="$alone" -v d="$during" 'BEGIN { printf "%.2f", d / a }')

echo
echo "retention benchmark (2 cores shared by server, clients and purge)"
printf '%-52s %s\n' "purge_all, 10^6 expired turns in 10^5 sessions:" "${purge_s} s, ${purge_rate} turns/s"
printf '%-52s %s\n' "lifecycle tps, 8 clients, alone:" "$alone"
printf '%-52s %s\n' "lifecycle tps, 8 clients, while purge_all runs:" "$during (purge_all ran ${purge_during} s of the ${T} s)"
printf '%-52s %s\n' "ratio (target at least 0.7):" "$ratio"
