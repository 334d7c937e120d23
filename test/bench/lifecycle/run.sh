#!/usr/bin/env bash
# Runs inside pg_virtualenv, from the build directory. Prints the results.
# Each round loads a backlog of 10^6 expired anonymous turns in 10^5
# sessions and, with the backlog in place, runs the turn lifecycle (8
# clients) alone; then again while purge_all, at the default
# convctx.purge_pause, works through that backlog; then loads another
# backlog and runs the lifecycle while purge_all works through it with no
# pause. Apart, purge_all alone over a backlog with no pause (turns/s).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
T=${CONVCTX_BENCH_SECONDS:-20}
ROUNDS=${CONVCTX_BENCH_ROUNDS:-3}
PGBENCH="$("$PG_CONFIG" --bindir)/pgbench"
OUT=$(mktemp -d /tmp/convctx-bench-lifecycle.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
psql_run() { psql -X -q -v ON_ERROR_STOP=1 -d bench "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

echo "settings: $(psql -X -At -d postgres -c "SELECT 'fsync ' || current_setting('fsync') || ', synchronous_commit ' || current_setting('synchronous_commit')"), $(nproc) cores"
createdb bench
psql_run -f "$HERE/setup.sql" >/dev/null
default_pause=$(psql_run -At -c "LOAD 'convctx'" -c "SELECT current_setting('convctx.purge_pause')")

load_backlog() {
    psql_run -c 'CALL bench.load_backlog(100000, 10)' -c 'VACUUM ANALYZE convctx.session, convctx.turn' \
        -c 'CHECKPOINT'
}
expired_left() { psql_run -At -c "SELECT count(*) FROM convctx.turn WHERE session_id LIKE 'old-%'"; }

# pgbench_run LOG: 8 clients of the lifecycle for T seconds; refuse any failure.
pgbench_run() {
    if ! "$PGBENCH" -n -M prepared -c 8 -j 2 -T "$T" -f "$HERE/lifecycle.pgbench" bench >"$1" 2>&1 ||
       grep -qiE 'aborted|error' "$1" || ! grep -qE '^number of failed transactions: 0 ' "$1"; then
        echo "== pgbench failed:"; cat "$1"; exit 1
    fi
    sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$1"
}

# purge_in_background PAUSE FILE: CALL purge_all with that pause; its
# seconds go to FILE when it ends.
purge_in_background() {
    ( start=$(now); PGOPTIONS="-c convctx.purge_pause=$1" psql_run -c 'CALL convctx.purge_all()';
      since "$start" >"$2" ) &
    PURGER=$!
}

# 1. purge_all alone, no pause, over the whole backlog, each round
for round in $(seq 1 "$ROUNDS"); do
    load_backlog
    start=$(now)
    PGOPTIONS="-c convctx.purge_pause=0" psql_run -c 'CALL convctx.purge_all()'
    s=$(since "$start")
    [ "$(expired_left)" = 0 ] || { echo "purge_all left expired turns"; exit 1; }
    echo "purge_alone|$round|$s" >>"$OUT/results"
    echo "   round $round: purge_all alone, no pause: $s s"
done

# 2. the lifecycle with a backlog in place: alone, while purge_all runs
#    with the default pause, and (another backlog) with no pause
for round in $(seq 1 "$ROUNDS"); do
    load_backlog
    alone=$(pgbench_run "$OUT/alone.log")
    purge_in_background "$default_pause" "$OUT/purge_paused"
    paused=$(pgbench_run "$OUT/paused.log")
    wait "$PURGER"
    [ "$(expired_left)" = 0 ] || { echo "purge_all left expired turns"; exit 1; }
    load_backlog
    purge_in_background 0 "$OUT/purge_unpaused"
    unpaused=$(pgbench_run "$OUT/unpaused.log")
    wait "$PURGER"
    [ "$(expired_left)" = 0 ] || { echo "purge_all left expired turns"; exit 1; }
    echo "lifecycle|$round|$alone|$paused|$(cat "$OUT/purge_paused")|$unpaused|$(cat "$OUT/purge_unpaused")" >>"$OUT/results"
    printf '   round %d: lifecycle tps alone %s, with purge_all (pause %s) %s (purge %s s), with purge_all (no pause) %s (purge %s s)\n' \
        "$round" "$alone" "$default_pause" "$paused" "$(cat "$OUT/purge_paused")" "$unpaused" "$(cat "$OUT/purge_unpaused")"
done

echo
echo "retention benchmark: medians of $ROUNDS rounds [min-max]; the lifecycle runs ${T} s with 8 clients"
echo "and a backlog of 10^6 expired turns in 10^5 sessions in place; 2 cores shared by all"
/usr/bin/python3 - "$OUT/results" "$T" "$default_pause" <<'PY'
import statistics, sys
T = float(sys.argv[2]); pause = sys.argv[3]
purge, life = [], []
for line in open(sys.argv[1]):
    f = line.strip().split("|")
    if f[0] == "purge_alone":
        purge.append(1e6 / float(f[2]))
    else:
        life.append([float(x) for x in f[2:]])
def ms(v, fmt="%.0f"):
    return (fmt + " [" + fmt + "-" + fmt + "]") % (statistics.median(v), min(v), max(v))
alone = [r[0] for r in life]
r_paused = [r[1] / r[0] for r in life]
r_unpaused = [r[3] / r[0] for r in life]
rate_paused = [1e6 / r[2] for r in life]
rate_unpaused = [1e6 / r[4] for r in life]
rows = [
    ("purge_all alone, no pause: turns/s", ms(purge), ">= 100000",
     statistics.median(purge) >= 100000),
    ("lifecycle alone, backlog in place: tps", ms(alone), "", None),
    ("lifecycle while purge_all runs (pause %s) / alone" % pause, ms(r_paused, "%.2f"), ">= 0.85",
     statistics.median(r_paused) >= 0.85),
    ("  purge_all meanwhile: turns/s", ms(rate_paused), "", None),
    ("lifecycle while purge_all runs (no pause) / alone", ms(r_unpaused, "%.2f"), "", None),
    ("  purge_all meanwhile: turns/s", ms(rate_unpaused), "", None),
]
for label, value, target, ok in rows:
    print("%-52s %-24s %-10s %s" % (label, value, target,
          "" if ok is None else ("PASS" if ok else "MISS")))
longest = max(max(r[2], r[4]) for r in life)
if min(min(r[2], r[4]) for r in life) < T:
    print("note: a purge_all ended before the lifecycle's %.0f s; the rest of that run had no purge" % T)
PY
