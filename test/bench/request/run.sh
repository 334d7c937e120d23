#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER/PGPASSWORD set), from the
# build directory: one chat request, start to answer, three ways (convctx's
# two calls begin_turn + finalize_turn; the floor's two hand-written
# statements on a bare table; convctx's three-call protocol of the README),
# as throughput in 8 cells of interleaved rounds, then the WAL each way
# writes per turn in three states. Prints every figure as the median of the
# rounds with its spread, and each target with PASS or MISS. Fails only
# when the run itself fails (SQL error, pgbench failure).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/pgbench.sh"
SECONDS_PER_RUN=${CONVCTX_BENCH_SECONDS:-15}
WAL_SECONDS=${CONVCTX_BENCH_WAL_SECONDS:-8}
WAL_CLIENTS=${CONVCTX_BENCH_WAL_CLIENTS:-4}
ROUNDS=${CONVCTX_BENCH_ROUNDS:-3}
FLOOR_FILLFACTOR=${CONVCTX_BENCH_FLOOR_FILLFACTOR:-100}
SIDES=${CONVCTX_BENCH_SIDES:-two_call floor three_call}
PG_WALDUMP="$("$PG_CONFIG" --bindir)/pg_waldump"
OUT=$(mktemp -d /tmp/convctx-bench-request.XXXXXX)
RESULTS="$OUT/results"
started=$(date +%s)

psql_run() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
elapsed() { echo "$(( $(date +%s) - started ))s"; }
has_side() { [[ " $SIDES " == *" $1 "* ]]; }
# A session number no session reaches: nobody is signed in.
NOBODY=1000000000

reset_state() {
    psql_run -d bench -c 'CALL bench.reset()' \
        -c 'VACUUM ANALYZE convctx.turn, convctx.session, floor.turn' -c 'CHECKPOINT'
}

echo "== state: 10,700 sessions, 324,000 turns a side, tenant t1 ($(elapsed))"
createdb bench
psql_run -d bench -c 'ALTER DATABASE bench SET convctx.max_session_turns = 1000000' \
    -c 'CREATE EXTENSION convctx'
if has_side two_call; then
    missing=$(psql_run -d bench -At -c "
        SELECT string_agg(f, ', ') FROM unnest(ARRAY[
            'convctx.begin_turn(text,text,text,integer,text,text,jsonb,text,boolean,text,text,text)',
            'convctx.finalize_turn(text,uuid,text,text,boolean,jsonb,text)']) f
         WHERE to_regprocedure(f) IS NULL")
    if [ -n "$missing" ]; then
        echo "== the installed convctx lacks $missing (CONVCTX_BENCH_SIDES can leave two_call out)"
        exit 1
    fi
fi
psql_run -d bench -v password="$PGPASSWORD" -v floor_fillfactor="$FLOOR_FILLFACTOR" -f "$HERE/setup.sql"
echo "   filled in $(elapsed)"

# The requests run as "service" (bound to every tenant), as a pooled app.
AS_SERVICE=(-U service)

# cell name, clients, first session, session count, first signed-in session
CELLS=("1 client, 10 turns, anonymous|1|1|200|$NOBODY"
       "1 client, 10 turns, signed in|1|2001|200|2001"
       "1 client, 1000 turns, anonymous|1|1001|100|$NOBODY"
       "1 client, 1000 turns, signed in|1|3001|100|3001"
       "8 clients, 10 turns, anonymous|8|1|200|$NOBODY"
       "8 clients, 10 turns, signed in|8|2001|200|2001"
       "8 clients, 1000 turns, anonymous|8|1001|100|$NOBODY"
       "8 clients, 1000 turns, signed in|8|3001|100|3001")
read -ra sides <<<"$SIDES"
declare -A best best_lat
disturbed=""

echo "== throughput, ${SECONDS_PER_RUN}s a run, sides: $SIDES ($(elapsed))"
for cell in "${CELLS[@]}"; do
    IFS='|' read -r name clients first sessions signed_from <<<"$cell"
    for round in $(seq 1 "$ROUNDS"); do
        # Rotate which side goes first so that none always runs warmer.
        order=()
        for i in "${!sides[@]}"; do
            order+=("${sides[$(( (i + round - 1) % ${#sides[@]} ))]}")
        done
        for side in "${order[@]}"; do
            reset_state
            log="$OUT/${side}-c${clients}-s${first}-r${round}.log"
            other_load pgbench_run "$log" bench "$clients" "${AS_SERVICE[@]}" -T "$SECONDS_PER_RUN" \
                -D first="$first" -D sessions="$sessions" -D signed_from="$signed_from" \
                -f "$HERE/$side.pgbench"
            tps=$(tps_of "$log")
            echo "tput|$name|$side|$round|$tps" >>"$RESULTS"
            printf '   %-33s %-10s round %d: %9.1f tps   (%% of a core: others %d, steal %d)\n' \
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

# WAL per turn: what a request writes, full-page images included as they
# come after a checkpoint; autovacuum off so that only the requests write.
DATADIR=$(psql -X -At -c 'SHOW data_directory')
psql_run -c 'ALTER SYSTEM SET autovacuum = off' -c 'SELECT pg_reload_conf()' >/dev/null
# state name, first session, session count, first signed-in session
WAL_STATES=("100 sessions x 200 turns|4001|100|$NOBODY"
            "10^4 sessions x 10 turns, half signed in|10001|10000|15001"
            "100 sessions x 1000 turns|1001|100|$NOBODY")
wal_sides=()
for side in two_call floor; do has_side "$side" && wal_sides+=("$side"); done
# Turns a run added: rows past the initial state.
added_turns() {
    if [ "$1" = floor ]; then
        psql_run -d bench -At -c 'SELECT count(*) FROM floor.turn WHERE turn_no > (SELECT last_turn_no FROM bench.floor_mark)'
    else
        psql_run -d bench -At -c "SELECT count(*) FROM convctx.turn t JOIN bench.initial i USING (session_id)
                                   WHERE t.tenant_id = 't1' AND t.turn_no > i.turns"
    fi
}
echo "== WAL per turn, ${WAL_SECONDS}s runs of $WAL_CLIENTS client(s) right after a CHECKPOINT ($(elapsed))"
last_state=${WAL_STATES[${#WAL_STATES[@]}-1]}
for state in "${WAL_STATES[@]}"; do
    IFS='|' read -r name first sessions signed_from <<<"$state"
    for round in $(seq 1 "$ROUNDS"); do
        order=("${wal_sides[@]}")
        [ $((round % 2)) -eq 0 ] && [ ${#order[@]} -eq 2 ] && order=("${order[1]}" "${order[0]}")
        for side in "${order[@]}"; do
            reset_state
            lsn0=$(psql -X -At -c 'SELECT pg_current_wal_lsn()')
            log="$OUT/wal-${side}-s${first}-r${round}.log"
            pgbench_run "$log" bench "$WAL_CLIENTS" "${AS_SERVICE[@]}" -T "$WAL_SECONDS" \
                -D first="$first" -D sessions="$sessions" -D signed_from="$signed_from" \
                -f "$HERE/$side.pgbench"
            lsn1=$(psql -X -At -c 'SELECT pg_current_wal_lsn()')
            bytes=$(psql -X -At -c "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')")
            turns=$(added_turns "$side")
            # The records without their full-page images, from pg_waldump.
            dump="$OUT/waldump-$side-s${first}.txt"
            "$PG_WALDUMP" --stats=record -p "$DATADIR/pg_wal" -s "$lsn0" -e "$lsn1" \
                >"$dump" 2>&1 || { cat "$dump"; exit 1; }
            records=$(awk '$1 == "Total" { gsub(/\[[^]]*\]/, ""); print $3 }' "$dump")
            echo "wal|$name|$side|$round|$bytes|$turns|$records" >>"$RESULTS"
            printf '   %-42s %-8s round %d: %7d turns, %8.1f bytes/turn, %7.1f without full-page images\n' \
                "$name" "$side" "$round" "$turns" "$(awk -v b="$bytes" -v t="$turns" 'BEGIN { print b / t }')" \
                "$(awk -v b="$records" -v t="$turns" 'BEGIN { print b / t }')"
            [ "$state" = "$last_state" ] && echo "$turns" >"$dump.turns"
        done
    done
done
psql_run -c 'ALTER SYSTEM RESET autovacuum' -c 'SELECT pg_reload_conf()' >/dev/null
# How often an answer fitted on its question's page (a HOT update, no new
# index entries), over every run, with each table's fill factor.
hot_updates=$(psql_run -d bench -At -F ' ' -c "
    SELECT string_agg(format('%s %s%% (fillfactor %s)', relid::regclass,
                             round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0)),
                             coalesce(substring(array_to_string(c.reloptions, ',') FROM 'fillfactor=([0-9]+)'), '100')),
                      ', ' ORDER BY relid::regclass::text)
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE relid IN ('convctx.turn'::regclass, 'floor.turn'::regclass)")

echo
echo "== results ($(psql -X -At -c "SELECT 'fsync ' || current_setting('fsync') || ', synchronous_commit ' || current_setting('synchronous_commit')"));"
echo "   medians of $ROUNDS interleaved rounds [min-max]; 1-client runs on one CPU, 8-client runs on all $CPUS"
/usr/bin/python3 - "$RESULTS" "$OUT" "$(cut -d'|' -f2 <<<"$last_state")" <<'PY'
import os, re, statistics, sys
tput, wal = {}, {}
for line in open(sys.argv[1]):
    kind, *f = line.strip().split("|")
    if kind == "tput":
        cell, side, rnd, tps = f
        tput.setdefault(cell, {}).setdefault(int(rnd), {})[side] = float(tps)
    else:
        state, side, rnd, nbytes, turns, records = f
        wal.setdefault(state, {}).setdefault(int(rnd), {})[side] = (int(nbytes), int(turns), int(records))
def fmt(x):
    return ("{:,.0f}".format(x)) if x >= 100 else ("%.1f" % x) if x >= 10 else ("%.2f" % x)
def spread(v):
    return "%s [%s-%s]" % (fmt(statistics.median(v)), fmt(min(v)), fmt(max(v))) if v else "n/a"
def ratio(v):
    return "%.2f [%.2f-%.2f]" % (statistics.median(v), min(v), max(v)) if v else "n/a"
def verdict(v, ok):
    return ("PASS" if ok(statistics.median(v)) else "MISS") if v else "n/a"

def side_table(title, other, target, ok, label):
    print(title)
    print("%-33s | %-24s | %-24s | %-18s | %s" % ("cell", "two-call tps", other + " tps", "ratio", "target"))
    for cell, rounds in tput.items():
        a = [r["two_call"] for r in rounds.values() if "two_call" in r]
        b = [r[other] for r in rounds.values() if other in r]
        q = [r["two_call"] / r[other] for r in rounds.values() if "two_call" in r and other in r]
        print("%-33s | %-24s | %-24s | %-18s | %s %s" % (cell, spread(a), spread(b), ratio(q), label, verdict(q, ok)))
    print()
side_table("two-call against the floor (hand-written, bare table):", "floor", 0.95,
           lambda m: m >= 0.95, ">= 0.95")
side_table("two-call against the three-call protocol of today:", "three_call", 1.3,
           lambda m: m >= 1.3, ">= 1.30")
print("ratio: the median of the rounds' ratios, each round's sides run one after the other")
print()

print("WAL per turn, bytes (full-page images included):")
print("%-42s | %-24s | %-24s | %-18s | %s" % ("state", "two-call", "floor", "ratio", "target"))
for state, rounds in wal.items():
    per = lambda side: [r[side][0] / r[side][1] for r in rounds.values() if side in r]
    a, b = per("two_call"), per("floor")
    q = [r["two_call"][0] / r["two_call"][1] / (r["floor"][0] / r["floor"][1])
         for r in rounds.values() if "two_call" in r and "floor" in r]
    turns = ", ".join("%s %s" % (s, fmt(statistics.median([r[s][1] for r in rounds.values() if s in r])))
                      for s in ("two_call", "floor") if any(s in r for r in rounds.values()))
    print("%-42s | %-24s | %-24s | %-18s | <= 1.25 %s" % (state, spread(a), spread(b), ratio(q),
          verdict(q, lambda m: m <= 1.25)))
    per = lambda side: [r[side][2] / r[side][1] for r in rounds.values() if side in r]
    a, b = per("two_call"), per("floor")
    q = [r["two_call"][2] / r["two_call"][1] / (r["floor"][2] / r["floor"][1])
         for r in rounds.values() if "two_call" in r and "floor" in r]
    print("%-42s | %-24s | %-24s | %-18s | (information)" % ("  without full-page images", spread(a), spread(b), ratio(q)))
    print("%-42s   (turns a run: %s)" % ("", turns))
print()

# pg_waldump --stats=record of the last round of the last state, per turn.
line = re.compile(r"^(\S+)\s+(\d+)\s+[(\[]\s*[\d.]+%?[)\]]\s+(\d+)\s+[(\[]\s*[\d.]+%?[)\]]\s+(\d+)\s+[(\[]\s*[\d.]+%?[)\]]\s+(\d+)")
dumps = {}
for side in ("two_call", "floor"):
    path = os.path.join(sys.argv[2], "waldump-%s-s%s.txt" % (side, sys.argv[3]))
    if not os.path.exists(path):
        continue
    turns = int(open(path + ".turns").read())
    kinds = {}
    for l in open(path):
        m = line.match(l)
        if m and m.group(1) != "Total":
            kinds[m.group(1)] = tuple(int(m.group(i)) / turns for i in (2, 3, 4, 5))
    dumps[side] = kinds
if dumps:
    last = list(wal)[-1]
    print("where the bytes go: pg_waldump --stats=record of the last round of \"%s\", per turn" % last)
    print("(records, record bytes, full-page image bytes):")
    names = sorted({k for d in dumps.values() for k in d},
                   key=lambda k: -max(d.get(k, (0, 0, 0, 0))[3] for d in dumps.values()))
    print("%-28s | %-28s | %-28s" % ("record type", "two-call", "floor"))
    def cell(d, k):
        n, rec, fpi, _ = d.get(k, (0, 0, 0, 0))
        return "%5.2f %8.1f %8.1f" % (n, rec, fpi) if k in d else "-"
    totals = {s: [sum(v[i] for v in d.values()) for i in range(4)] for s, d in dumps.items()}
    for k in names:
        if max(d.get(k, (0, 0, 0, 0))[3] / max(totals[s][3], 1) for s, d in dumps.items()) < 0.005:
            continue
        print("%-28s | %-28s | %-28s" % (k, cell(dumps.get("two_call", {}), k), cell(dumps.get("floor", {}), k)))
    def tot(s):
        return "%5.2f %8.1f %8.1f" % tuple(totals[s][:3]) if s in totals else "-"
    print("%-28s | %-28s | %-28s" % ("total", tot("two_call"), tot("floor")))
    print("(types under 0.5% of both totals left out)")
PY
echo
echo "updates that were HOT, over every run (the fill included): $hot_updates"
echo
echo "client-side latency per statement in the best run of each side, ms:"
for cell in "${CELLS[@]}"; do
    IFS='|' read -r name _ <<<"$cell"
    for side in "${sides[@]}"; do
        printf '  %-33s %-10s %s\n' "$name" "$side" "${best_lat[$name/$side]}"
    done
done
if [ -n "$disturbed" ]; then
    echo
    echo "disturbed (other processes used > 10% of a core): $disturbed"
fi
echo "total $(elapsed) in the cluster"
rm -rf "$OUT"
