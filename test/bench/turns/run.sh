#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set), from the build
# directory: the turn lifecycle against its plain-SQL floor, then
# recent_turns latency at 10^3 and 10^6 turns, each in interleaved rounds.
# Every cell is measured on anonymous sessions and on signed-in ones
# (linked to an identity, their turns started with start_turn's
# identity_id argument; the floor's rows then carry the identity too).
# Prints every figure as the median of the rounds with its spread, and
# each target with PASS or MISS. Fails only when the run itself fails
# (SQL error, pgbench failure).
# For a quick check of the script only: CONVCTX_BENCH_LONG_TURNS, the turns
# of the long sessions (default 1000, at least 10), and
# CONVCTX_BENCH_BIG_TURNS, the turns of the large latency database
# (default 1000000).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SECONDS_PER_RUN=${CONVCTX_BENCH_SECONDS:-6}
LATENCY_SECONDS=${CONVCTX_BENCH_LATENCY_SECONDS:-5}
ROUNDS=${CONVCTX_BENCH_ROUNDS:-3}
FLOOR_FILLFACTOR=${CONVCTX_BENCH_FLOOR_FILLFACTOR:-100}
LONG=${CONVCTX_BENCH_LONG_TURNS:-1000}
BIG=${CONVCTX_BENCH_BIG_TURNS:-1000000}
OUT=$(mktemp -d /tmp/convctx-bench-turns.XXXXXX)
started=$(date +%s)

psql_run() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
elapsed() { echo "$(( $(date +%s) - started ))s"; }

source "$HERE/../lib/pgbench.sh"

reset_lifecycle() {
    psql_run -d bench -c 'CALL bench.reset()' \
        -c 'VACUUM ANALYZE convctx.turn, convctx.session, floor.turn' -c 'CHECKPOINT'
}

# show_read DB SESSION LABEL: one line on what a recent_turns call reads.
show_read() {
    local read
    read=$(psql_run -d "$1" -At -v session="$2" <"$HERE/read.sql" | grep 'index scan')
    echo "   recent_turns read $3: $read"
    if [[ "$read" != "1 index scan(s)"* ]]; then
        echo "   NOTE: recent_turns did not read turn_chronology once"
    fi
}

disturbed=""
RESULTS="$OUT/results"
# latency_loop DB FIRST: one in-backend loop of 10000 calls in DB on
# sessions mFIRST..mFIRST+9, its mean in LATENCY_MS.
latency_loop() { LATENCY_MS=$(psql_run -d "$1" -At -c "SELECT bench.recent_ms(10000, $2)"); }
# measure_latency STATE DB ROUND: one round at that size, in the server and
# through pgbench, on the anonymous sessions m1..m10, then on the signed-in
# m11..m20.
measure_latency() {
    local state=$1 db=$2 round=$3 log load kind first
    for kind in anonymous signed; do
        first=1; [ "$kind" = signed ] && first=11
        other_load latency_loop "$db" "$first"
        load=$OTHER_LOAD
        log="$OUT/recent-$state-$kind-$round.log"
        other_load pgbench_run "$log" "$db" 1 -T "$LATENCY_SECONDS" -D first="$first" -f "$HERE/recent.pgbench"
        echo "latency|$state|$kind|$round|$LATENCY_MS|$(latency_of "$log")" >>"$RESULTS"
        printf '   %s turns, %-9s round %d: %.4f ms in the server (10000 calls), %.3f ms through pgbench   (%% of a core: others %d, then %d)\n' \
            "$state" "$kind" "$round" "$LATENCY_MS" "$(latency_of "$log")" "$load" "$OTHER_LOAD"
        [ "$load" -gt 10 ] && disturbed+="${disturbed:+, }recent_turns at $state $kind round $round"
    done
    return 0
}

echo "== lifecycle state: 200 sessions x 10 turns + 100 sessions x $LONG turns, anonymous, and as many signed in ($(elapsed))"
createdb bench
psql_run -d bench -c 'ALTER DATABASE bench SET convctx.max_session_turns = 1000000'
psql_run -d bench -v floor_fillfactor="$FLOOR_FILLFACTOR" -v long_turns="$LONG" -f "$HERE/setup.sql"

# cell name, clients, first session, session count, scripts (anonymous
# sessions: convctx.pgbench and floor.pgbench; signed in: *-signed.pgbench);
# each signed-in cell right after its anonymous twin.
CELLS=("1 client, 10 turns|1|1|200|"
       "1 client, 10 turns, signed in|1|2001|200|-signed"
       "8 clients, 10 turns|8|1|200|"
       "8 clients, 10 turns, signed in|8|2001|200|-signed"
       "1 client, $LONG turns|1|1001|100|"
       "1 client, $LONG turns, signed in|1|3001|100|-signed"
       "8 clients, $LONG turns|8|1001|100|"
       "8 clients, $LONG turns, signed in|8|3001|100|-signed")
declare -A best best_lat

echo "== lifecycle runs, ${SECONDS_PER_RUN}s each ($(elapsed))"
for cell in "${CELLS[@]}"; do
    IFS='|' read -r name clients first sessions script <<<"$cell"
    for round in $(seq 1 "$ROUNDS"); do
        # Alternate which side goes first so neither always runs warmer.
        order="convctx floor"
        [ $((round % 2)) -eq 0 ] && order="floor convctx"
        for side in $order; do
            reset_lifecycle
            log="$OUT/${side}-c${clients}-s${first}-r${round}.log"
            other_load pgbench_run "$log" bench "$clients" -T "$SECONDS_PER_RUN" \
                -D first="$first" -D sessions="$sessions" -f "$HERE/$side$script.pgbench"
            tps=$(tps_of "$log")
            echo "lifecycle|$name|$side|$round|$tps" >>"$RESULTS"
            printf '   %-31s %-8s round %d: %9.1f tps   (%% of a core: others %d, steal %d)\n' \
                "$name" "$side" "$round" "$tps" "$OTHER_LOAD" "$STEAL"
            [ "$OTHER_LOAD" -gt 10 ] && disturbed+="${disturbed:+, }$name $side round $round"
            if [ -z "${best[$name/$side]:-}" ] ||
                    awk -v a="$tps" -v b="${best[$name/$side]}" 'BEGIN { exit !(a > b) }'; then
                best[$name/$side]=$tps
                best_lat[$name/$side]=$(statement_latencies "$log")
            fi
        done
    done
done
# How often an answer fitted on its question's page (a HOT update, no new
# index entries), over every run, with each table's fill factor.
hot_updates=$(psql_run -d bench -At -F ' ' -c "
    SELECT string_agg(format('%s %s%% (fillfactor %s)', relid::regclass,
                             round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0)),
                             coalesce(substring(array_to_string(c.reloptions, ',') FROM 'fillfactor=([0-9]+)'), '100')),
                      ', ' ORDER BY relid::regclass::text)
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE relid IN ('convctx.turn'::regclass, 'floor.turn'::regclass)")
reset_lifecycle
show_read bench s1 "in a 10-turn session"
show_read bench s1001 "in a $LONG-turn session"
show_read bench s2001 "in a signed-in 10-turn session"
show_read bench s3001 "in a signed-in $LONG-turn session"

echo "== recent_turns latency: 20 measured sessions x 50 turns, 10 anonymous, 10 signed in ($(elapsed))"
createdb lat
psql_run -d lat -c 'ALTER DATABASE lat SET convctx.max_session_turns = 1000000'
psql_run -d lat <"$HERE/latency_setup.sql"
echo "   lat holds $(psql_run -d lat -At -c 'SELECT count(*) FROM convctx.turn') turns"
createdb -T lat lat_big
psql_run -d lat_big -c 'ALTER DATABASE lat_big SET convctx.max_session_turns = 1000000'
echo "== growing lat_big to $BIG turns, half of its sessions signed in ($(elapsed))"
psql_run -d lat_big -v big="$BIG" <"$HERE/latency_grow.sql"
echo "   lat_big holds $(psql_run -d lat_big -At -c "SELECT count(*) || ' turns in ' || count(DISTINCT session_id)
    || ' sessions, ' || pg_size_pretty(pg_total_relation_size('convctx.turn')) FROM convctx.turn")"
psql_run -d lat -c 'CHECKPOINT'
show_read lat m1 "at 10^3 turns"
show_read lat_big m1 "at $BIG turns"
show_read lat m11 "signed in, at 10^3 turns"
show_read lat_big m11 "signed in, at $BIG turns"
LATENCY_ROUNDS=$(( ROUNDS < 5 ? 5 : ROUNDS ))
for round in $(seq 1 "$LATENCY_ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then
        measure_latency 1e3 lat "$round"; measure_latency 1e6 lat_big "$round"
    else
        measure_latency 1e6 lat_big "$round"; measure_latency 1e3 lat "$round"
    fi
done

echo
echo "== results ($(psql -X -At -c "SELECT 'fsync ' || current_setting('fsync') || ', synchronous_commit ' || current_setting('synchronous_commit')"));"
echo "   medians of $ROUNDS interleaved rounds of ${SECONDS_PER_RUN}s per cell [min-max]; signed-in cells:"
echo "   sessions linked to an identity, turns started with identity_id (the floor's rows carry it);"
echo "   1-client runs on one CPU, 8-client runs on all $CPUS"
/usr/bin/python3 - "$RESULTS" <<'PY'
import statistics, sys
life, lat = {}, {}
for line in open(sys.argv[1]):
    kind, *f = line.strip().split("|")
    if kind == "lifecycle":
        cell, side, rnd, tps = f
        life.setdefault(cell, {}).setdefault(int(rnd), {})[side] = float(tps)
    else:
        state, kind, rnd, server, client = f
        lat.setdefault(kind, {}).setdefault(int(rnd), {})[state] = (float(server), float(client))
def spread(v):
    return "%s [%s-%s]" % (fmt(statistics.median(v)), fmt(min(v)), fmt(max(v)))
def fmt(x):
    return ("%.1f" % x) if x >= 10 else ("%.2f" % x)
print("%-31s | %-24s | %-24s | %-18s | %s" % ("cell", "convctx tps", "floor tps", "ratio", "target"))
for cell, rounds in life.items():
    c = [r["convctx"] for r in rounds.values()]
    f = [r["floor"] for r in rounds.values()]
    ratios = [r["convctx"] / r["floor"] for r in rounds.values()]
    med = statistics.median(ratios)
    print("%-31s | %-24s | %-24s | %-18s | >= 0.90 %s" % (cell, spread(c), spread(f),
          "%.2f [%.2f-%.2f]" % (med, min(ratios), max(ratios)), "PASS" if med >= 0.9 else "MISS"))
print()
print("ratio: the median of the rounds' ratios, each round's two sides run one after the other")
for kind, label in (("anonymous", ""), ("signed", ", signed in")):
    rounds = lat[kind]
    server = [r["1e6"][0] / r["1e3"][0] for r in rounds.values()]
    client = [r["1e6"][1] / r["1e3"][1] for r in rounds.values()]
    s3 = [r["1e3"][0] for r in rounds.values()]
    s6 = [r["1e6"][0] for r in rounds.values()]
    print()
    print("recent_turns(10)%s, in the server, ms: 1e3 = %s, 1e6 = %s" % (label,
          "%.4f [%.4f-%.4f]" % (statistics.median(s3), min(s3), max(s3)),
          "%.4f [%.4f-%.4f]" % (statistics.median(s6), min(s6), max(s6))))
    print("recent_turns 1e6 / 1e3%s, %d interleaved rounds: %.2f [%.2f-%.2f] (target <= 1.3) %s" % (
          label, len(server), statistics.median(server), min(server), max(server),
          "PASS" if statistics.median(server) <= 1.3 else "MISS"))
    print("  through pgbench -c 1 on one CPU: %.2f [%.2f-%.2f]" % (
          statistics.median(client), min(client), max(client)))
PY
echo
echo "answers stored as HOT updates: $hot_updates"
echo
echo "client-side latency per statement in the best run of each side, ms (start / finalize / recent):"
for cell in "${CELLS[@]}"; do
    IFS='|' read -r name _ <<<"$cell"
    printf '  %-31s convctx %-23s floor %s\n' "$name" "${best_lat[$name/convctx]}" "${best_lat[$name/floor]}"
done
if [ -n "$disturbed" ]; then
    echo
    echo "disturbed (other processes used > 10% of a core): $disturbed"
fi
echo "total $(elapsed) in the cluster"
rm -rf "$OUT"
