#!/usr/bin/env bash
# The Citus benchmark's driver (started by test/bench/citus.sh, which
# describes it): a private PostgreSQL copy with Citus and convctx
# (scripts/citus-lib.sh), three nodes on loopback, three databases on them,
# interleaved pgbench rounds of the turn lifecycle, and the table.
# Fails only when the run itself fails (a step that errors, a pgbench
# failure, a crash in a node's log); the figures are information only.
source "$(dirname "$0")/../../../scripts/lib.sh"
source "$TOP/scripts/citus-lib.sh"

T=${CONVCTX_BENCH_SECONDS:-20}
ROUNDS=${CONVCTX_BENCH_ROUNDS:-3}
DURABLE=${CONVCTX_BENCH_DURABLE:-1}
CLIENTS=8
SESSIONS=1000
SEED_TURNS=10
CPUS=$(nproc)
# The databases: convctx on the coordinator alone (convctx.distribute() not
# called: its tables are local), and distributed over one and two workers.
# Citus's node list is per database, so both distributed ones live on the
# same three nodes; the coordinator holds no shards in either.
DB_SINGLE=bench_single
DB_1W=bench_1w
DB_2W=bench_2w

T_START=$SECONDS
done_=0
failed_command=

# Stop the nodes and remove the private directory, or with
# CONVCTX_CITUS_KEEP=1 leave both and say how to use them.
finish() {
    local n
    if [ -z "$WORK" ] || [ ! -d "$WORK" ]; then WORK=; return 0; fi
    cd /
    if [ "${CONVCTX_CITUS_KEEP:-0}" = 1 ]; then
        echo "== kept $WORK"
        local run=
        if [ "$(id -un)" != "$TEST_USER" ]; then run="runuser -u $TEST_USER -- "; fi
        for n in $(citus_running_nodes); do
            echo "== node $n running: port ${PORTS[$n]}, data $WORK/n$n, log $WORK/n$n.log"
        done
        echo "== connect: $PGBIN/psql -h 127.0.0.1 -p ${PORTS[0]} -U bench $DB_2W"
        echo "== stop and remove: for n in 0 1 2; do ${run}$PGBIN/pg_ctl -D $WORK/n\$n -m immediate stop; done; rm -rf $WORK"
    else
        citus_stop_nodes
        rm -rf "$WORK"
    fi
    WORK=
}
on_exit() {
    local rc=$? n
    [ "$done_" = 1 ] && exit "$rc"
    echo "== the Citus benchmark stopped early (exit status $rc)${failed_command:+ at: $failed_command}"
    if [ -n "$BUILD_LOG" ] && [ -s "$BUILD_LOG" ]; then
        echo "== ${BUILD_LOG#"$WORK/"} (last 60 lines)"
        tail -n 60 "$BUILD_LOG"
    fi
    for n in "${!PORTS[@]}"; do
        if [ -n "$WORK" ] && [ -s "$WORK/n$n.log" ]; then
            echo "== node $n log (last 40 lines)"
            tail -n 40 "$WORK/n$n.log"
        fi
    done
    finish
    echo "== elapsed: $((SECONDS - T_START)) s"
    [ "$rc" -ne 0 ] && exit "$rc"
    exit 1
}
on_err() {
    local i
    failed_command="line ${BASH_LINENO[0]}: $1"
    for ((i = 1; i < ${#FUNCNAME[@]} - 1; i++)); do
        failed_command+=" (in ${FUNCNAME[i]}, called from line ${BASH_LINENO[i]})"
    done
}
set -E
trap 'on_err "$BASH_COMMAND"' ERR
trap on_exit EXIT
trap 'failed_command="a signal"; exit 130' INT TERM

if ! citus_find_source; then
    done_=1
    echo "citus bench: SKIP ($CITUS_SKIP)"
    exit 0
fi
ensure_packages
citus_private_copy /tmp/convctx-bench-citus
citus_install
citus_build_convctx

# --- the nodes -----------------------------------------------------------------
# Durable unless CONVCTX_BENCH_DURABLE=0, which turns fsync off (the other
# benchmarks do the same; synchronous_commit stays on). Citus opens
# connections of its own between the nodes: room for them.
if [ "$DURABLE" = 1 ]; then FSYNC=on; else FSYNC=off; fi
citus_pick_ports 3
echo "== starting the coordinator (port ${PORTS[0]}) and two workers (${PORTS[1]}, ${PORTS[2]}), fsync $FSYNC"
citus_start_nodes "fsync = $FSYNC
max_connections = 300"
POSTMASTERS=()
for n in 0 1 2; do POSTMASTERS+=("$(head -1 "$WORK/n$n/postmaster.pid")"); done

# --- the databases -------------------------------------------------------------
T_SETUP=$SECONDS
# create_convctx DB [distribute]: convctx in DB on the coordinator (Citus
# propagates it to DB's workers), distributed or not.
create_convctx() {
    local out
    node_sql 0 -d "$1" -c "CREATE EXTENSION convctx"
    if [ "${2:-}" = distribute ]; then
        if ! out=$(node_sql 0 -d "$1" -c "SELECT convctx.distribute()" 2>&1); then
            echo "== SELECT convctx.distribute() failed in $1:"; echo "$out"; exit 1
        fi
    fi
}
echo "== databases: $DB_SINGLE (coordinator only), $DB_1W (coordinator + worker 1), $DB_2W (coordinator + workers 1 and 2)"
citus_node_db 0 "$DB_SINGLE"
create_convctx "$DB_SINGLE"
for n in 0 1; do citus_node_db "$n" "$DB_1W"; done
citus_add_nodes "$DB_1W" 1
create_convctx "$DB_1W" distribute
for n in 0 1 2; do citus_node_db "$n" "$DB_2W"; done
citus_add_nodes "$DB_2W" 1 2
create_convctx "$DB_2W" distribute
# The clients' role, bound to one tenant: with such a role Citus may run
# each per-session call on the worker holding the session (src/citus/citus.c).
# Roles are the whole node's; created where both workers are known, Citus
# creates it on them too. Made after every CREATE EXTENSION, so that none
# meets a convctx_app with members already.
node_sql 0 -d "$DB_2W" -c "CREATE ROLE bench LOGIN" -c "GRANT convctx_app TO bench"
for db in "$DB_SINGLE" "$DB_1W" "$DB_2W"; do
    node_sql 0 -d "$db" -c "SELECT convctx.bind_role_tenant('bench', 't1')" >/dev/null
    node_sql 0 -d "$db" -v sessions="$SESSIONS" -v turns="$SEED_TURNS" \
        -f "$SRC/test/bench/citus/setup.sql" >/dev/null
done
for db in "$DB_1W" "$DB_2W"; do
    echo "   $db: $(node_sql 0 -d "$db" -c "
        SELECT string_agg(format('%s %s (%s, shouldhaveshards %s, %s shards of convctx.session)',
                                 CASE WHEN n.groupid = 0 THEN 'coordinator' ELSE 'worker' END,
                                 n.nodeport, n.noderole,
                                 CASE WHEN n.shouldhaveshards THEN 'true' ELSE 'false' END,
                                 (SELECT count(*) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
                                   WHERE s.logicalrelid = 'convctx.session'::regclass
                                     AND p.groupid = n.groupid)),
                          ', ' ORDER BY n.nodeport)
        FROM pg_dist_node n")"
done
CITUS_VERSION=$(node_sql 0 -d "$DB_2W" -c "SELECT split_part(citus_version(), ' ', 2)")
echo "   each: $SESSIONS sessions of tenant t1 with $SEED_TURNS turns; role bench bound to t1 (setup $((SECONDS - T_SETUP)) s)"

# --- measuring -----------------------------------------------------------------
OUT=$WORK/out
RESULTS=$OUT/results
mkdir -p "$OUT"
PGBENCH_SCRIPT=$SRC/test/bench/citus/lifecycle.pgbench

# bench_pgbench DB CLIENTS ARGS...: pgbench of the lifecycle as role bench
# on the coordinator, with PGOPTIONS from BENCH_PGOPTIONS.
bench_pgbench() {
    local db=$1 clients=$2; shift 2
    as_test_user env PGHOST=127.0.0.1 PGPORT="${PORTS[0]}" PGUSER=bench PGOPTIONS="${BENCH_PGOPTIONS:-}" \
        "$PGBIN/pgbench" -n -M prepared -c "$clients" -j $((clients < CPUS ? clients : CPUS)) \
        -D sessions="$SESSIONS" "$@" -f "$PGBENCH_SCRIPT" "$db"
}
# pgbench_run LOG DB CLIENTS: a timed run with per-statement latencies;
# refuse failed or aborted clients, keep the log.
pgbench_run() {
    local log=$1 db=$2 clients=$3
    if ! bench_pgbench "$db" "$clients" -r -T "$T" >"$log" 2>&1; then
        echo "== pgbench failed ($log):"; cat "$log"; exit 1
    fi
    if grep -qiE 'aborted|error' "$log" || ! grep -qE '^number of failed transactions: 0 ' "$log"; then
        echo "== pgbench reported failures ($log):"; cat "$log"; exit 1
    fi
}
tps_of() { sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$1"; }
latency_of() { sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$1"; }
# The latencies (ms) of the three SQL statements of a pgbench -r report, space separated.
statement_latencies() {
    awk '/^statement latencies/ { on = 1; next }
         on && $1 ~ /^[0-9.]+$/ && $3 !~ /^\\/ { printf "%s%s", sep, $1; sep = " " }
         END { print "" }' "$1"
}

# CPU ticks (user + system) of the whole machine, and of the three nodes
# plus our own children (pgbench, psql): the difference over a run is
# someone else's load. Steal (the hypervisor's) is reported apart.
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4, $9 }' /proc/stat; }
our_ticks() {
    local stats=() p
    for p in "${POSTMASTERS[@]}"; do stats+=("/proc/$p/stat"); done
    # Processes may exit between the glob and the read.
    { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v pms="${POSTMASTERS[*]}" '
        BEGIN { n = split(pms, p, " "); for (i = 1; i <= n; i++) pm[p[i]] = 1 }
        # comm may hold spaces: count fields from the closing parenthesis
        { sub(/^.*\) /, ""); if ($2 in pm) t += $12 + $13 }
        END { print t + 0 }' | { read -r live
        awk -v live="$live" '{ sub(/^.*\) /, ""); t += $12 + $13 + $14 + $15 } END { print t + live }' \
            "${stats[@]}" "/proc/$$/stat"; }
}
# other_load COMMAND...: run it; sets OTHER_LOAD and STEAL to the % of one
# core that other processes and the hypervisor took meanwhile.
other_load() {
    local m0 s0 o0 t0 m1 s1 o1 t1
    read -r m0 s0 < <(machine_ticks); o0=$(our_ticks); t0=$(date +%s%N)
    "$@"
    read -r m1 s1 < <(machine_ticks); o1=$(our_ticks); t1=$(date +%s%N)
    read -r OTHER_LOAD STEAL < <(awk -v m="$((m1 - m0))" -v o="$((o1 - o0))" -v s="$((s1 - s0))" \
        -v ticks="$(awk -v ns="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" 'BEGIN { print ns / 1e9 * hz }')" \
        'BEGIN { l = (m - o) * 100 / ticks; printf "%d %d\n", (l < 0 ? 0 : l), s * 100 / ticks }')
}

# Whether Citus runs the calls on the workers: 10 transactions (30 calls)
# with client_min_messages = debug1, counting "pushing down the function
# call", under -M prepared as the measured runs (generic plans included).
pushed_down() {
    { BENCH_PGOPTIONS="-c client_min_messages=debug1" bench_pgbench "$1" 1 -t 10 2>&1 || true; } |
        grep -c 'pushing down the function call' || true
}
DELEGATION=
for db in "$DB_SINGLE" "$DB_1W" "$DB_2W"; do
    DELEGATION+="${DELEGATION:+, }$db $(pushed_down "$db")"
done
echo "== calls Citus pushed down to a worker, of 30 (pgbench -M prepared, 10 transactions, debug1): $DELEGATION"

# Before every run: a checkpoint on every node, so that none falls due
# within the run, which is shorter than checkpoint_timeout.
checkpoint_all() {
    local n
    for n in 0 1 2; do node_sql "$n" -d postgres -c CHECKPOINT; done
}
disturbed=
# measure NAME DB CLIENTS ROUND: one run, its figures into RESULTS.
measure() {
    local name=$1 db=$2 clients=$3 round=$4 log tps lat
    log=$OUT/$name-c$clients-r$round.log
    checkpoint_all
    other_load pgbench_run "$log" "$db" "$clients"
    tps=$(tps_of "$log")
    lat=$(latency_of "$log")
    echo "run|$name|$clients|$round|$tps|$lat|$(statement_latencies "$log")" >>"$RESULTS"
    printf '   round %d  %-9s %d client%s %8.1f tps %8.2f ms   (%% of a core: others %d, steal %d)\n' \
        "$round" "$name" "$clients" "$([ "$clients" = 1 ] && echo " " || echo s)" "$tps" "$lat" \
        "$OTHER_LOAD" "$STEAL"
    [ "$OTHER_LOAD" -gt 10 ] && disturbed+="${disturbed:+, }$name ${clients}c round $round"
    return 0
}

echo "== $ROUNDS rounds of ${T} s runs, interleaved ($((SECONDS - T_START)) s so far)"
T_RUNS=$SECONDS
for round in $(seq 1 "$ROUNDS"); do
    # Rotate the order so that no configuration always runs first or last.
    order=(single 1w 2w)
    order=("${order[@]:$(( (round - 1) % 3 ))}" "${order[@]:0:$(( (round - 1) % 3 ))}")
    for name in "${order[@]}"; do
        case $name in
            single) measure single "$DB_SINGLE" "$CLIENTS" "$round" ;;
            1w) measure 1worker "$DB_1W" "$CLIENTS" "$round" ;;
            2w) measure 2workers "$DB_2W" "$CLIENTS" "$round" ;;
        esac
    done
    if [ $((round % 2)) -eq 1 ]; then
        measure single "$DB_SINGLE" 1 "$round"; measure 2workers "$DB_2W" 1 "$round"
    else
        measure 2workers "$DB_2W" 1 "$round"; measure single "$DB_SINGLE" 1 "$round"
    fi
done
echo "== runs took $((SECONDS - T_RUNS)) s"

# --- the nodes' logs -----------------------------------------------------------
crashes=$(citus_crash_lines)
errors=
for n in 0 1 2; do
    c=$(grep -cE '(ERROR|FATAL|PANIC):' "$WORK/n$n.log" || true)
    errors+="${errors:+, }node $n: $c"
done

# --- the table -----------------------------------------------------------------
echo
echo "== Citus benchmark of convctx: test/bench/citus.sh"
echo "   convctx $(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$SRC/convctx.control") from the work tree at" \
     "$(git -C "$TOP" describe --always --dirty 2>/dev/null || echo "an unknown commit")"
echo "   Citus $CITUS_VERSION; coordinator + 2 workers, all three on this machine's $CPUS cores: the nodes"
echo "   compete for the same cores, so these figures show the overhead of distribution, not scale"
echo "   $(node_sql 0 -d postgres -c "SELECT CASE WHEN current_setting('fsync') = 'on' THEN 'durable' ELSE 'not durable' END
        || ' (fsync ' || current_setting('fsync') || ', synchronous_commit ' || current_setting('synchronous_commit') || ')'");" \
     "runs of ${T} s; medians of $ROUNDS interleaved rounds [min-max]"
echo "   a transaction: start_turn (\\gset), finalize_turn, count(*) FROM recent_turns(10), each its own"
echo "   autocommit statement, pgbench -M prepared, as role bench (bound to tenant t1), sessions drawn"
echo "   from $SESSIONS ($SEED_TURNS turns each at the start)"
echo "   single node: $DB_SINGLE, convctx on the coordinator alone (Citus created there, no worker),"
echo "   convctx.distribute() not called;"
echo "   distributed: convctx.distribute() over workers that hold all shards, the coordinator none"
echo "   (separate databases on the same three nodes: $DB_1W knows worker 1, $DB_2W both)"
echo
/usr/bin/python3 - "$RESULTS" "$CLIENTS" <<'PY'
import statistics, sys
clients = sys.argv[2]
runs = {}
for line in open(sys.argv[1]):
    _, name, c, rnd, tps, lat, stmts = line.rstrip("\n").split("|")
    runs.setdefault((name, c), {})[int(rnd)] = (float(tps), float(lat), [float(x) for x in stmts.split()])
def fmt(x):
    return ("%.0f" % x) if abs(x) >= 100 else ("%.1f" % x) if abs(x) >= 10 else ("%.2f" % x)
def spread(v, sign=""):
    f = lambda x: (("+" if sign and x >= 0 else "") + fmt(x))
    return "%s [%s-%s]" % (f(statistics.median(v)), f(min(v)), f(max(v)))
def ratio(v):
    f = "%.3f" if statistics.median(v) < 0.1 else "%.2f"
    return (f + " [" + f + "-" + f + "]") % (statistics.median(v), min(v), max(v))
def column(name, c, pick):
    return {r: pick(f) for r, f in runs[(name, c)].items()}
def paired(a, b, op):
    return [op(a[r], b[r]) for r in sorted(a) if r in b]

row = "%-34s %-7s %-24s %-24s %s"
print(row % ("figure", "clients", "single node", "distributed, 2 workers", "distributed vs single"))
s, d = column("single", clients, lambda f: f[0]), column("2workers", clients, lambda f: f[0])
print(row % ("throughput, tps", clients, spread(list(s.values())), spread(list(d.values())),
             ratio(paired(d, s, lambda x, y: x / y)) + " (ratio)"))
s, d = column("single", "1", lambda f: f[1]), column("2workers", "1", lambda f: f[1])
print(row % ("latency per transaction, ms", "1", spread(list(s.values())), spread(list(d.values())),
             spread(paired(d, s, lambda x, y: x - y), "+") + " ms"))
for i, stmt in enumerate(("start_turn", "finalize_turn", "recent_turns")):
    s, d = column("single", "1", lambda f: f[2][i]), column("2workers", "1", lambda f: f[2][i])
    print(row % ("  " + stmt + ", ms", "1", spread(list(s.values())), spread(list(d.values())),
                 spread(paired(d, s, lambda x, y: x - y), "+") + " ms"))
print()
print(row % ("coordinator routing only", "clients", "1 worker", "2 workers", "2 workers / 1 worker"))
one, two = column("1worker", clients, lambda f: f[0]), column("2workers", clients, lambda f: f[0])
print(row % ("throughput, tps", clients, spread(list(one.values())), spread(list(two.values())),
             ratio(paired(two, one, lambda x, y: x / y)) + " (ratio)"))
print()
print("ratios and differences: the median of the per-round values (a round's runs follow one another);")
print("latencies: pgbench's average per transaction and per statement (-r), client side; 1-client")
print("runs are not pinned to a core, so each hop between processes may wake the other core")
PY
echo
echo "calls pushed down to a worker, of 30 (debug1 check): $DELEGATION"
echo "node logs: $crashes crash lines; ERROR/FATAL/PANIC lines: $errors"
if [ -n "$disturbed" ]; then
    echo "disturbed (other processes used > 10% of a core): $disturbed"
fi
for n in 0 1 2; do
    if grep -qE '(ERROR|FATAL|PANIC):' "$WORK/n$n.log"; then
        echo "  node $n, the most frequent:"
        grep -hE '(ERROR|FATAL|PANIC):' "$WORK/n$n.log" | sed 's/^.*UTC \[[0-9]*\] //' | cut -c1-160 |
            sort | uniq -c | sort -rn | head -n 5
    fi
done
status=0
if [ "$crashes" -gt 0 ]; then
    status=1
    for n in 0 1 2; do
        if grep -qE "$CITUS_CRASH_RE" "$WORK/n$n.log"; then
            echo "== crashes in node $n's log (port ${PORTS[$n]})"
            grep -nE -B 5 -A 10 "$CITUS_CRASH_RE" "$WORK/n$n.log" | head -n 100 || true
        fi
    done
fi
finish
done_=1
echo "total $((SECONDS - T_START)) s"
exit $status
