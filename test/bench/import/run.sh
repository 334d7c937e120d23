#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set), or against any
# cluster with convctx installed: for each size, loads that many turns into
# a source database (test/bench/export/load.sql: 200-byte questions,
# 1,000-byte answers, sessions of 100 turns linked to an identity) and
# exports the tenant once with `convctx export`. Then, in interleaved
# rounds, times
#   copy:   COPY of the same session, link and turn rows (text files made
#           by COPY TO) into bare tables made LIKE convctx's, INCLUDING ALL
#           (the same columns, constraints and indexes), emptied first;
#   import: `convctx import` of the file into a database where convctx was
#           just created;
# and reports the median seconds, turns per second, the ratio (median,
# min-max) and the tool's peak resident memory.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${CONVCTX_BENCH_ROUNDS:-3}
SIZES=${CONVCTX_BENCH_SIZES:-100000 1000000}
SRC=bench_import_src
DST=bench_import_dst
BARE=bench_import_bare
BINDIR=$(pg_config --bindir 2>/dev/null || dirname "$(command -v psql)")
TOOL=${CONVCTX_TOOL:-$BINDIR/convctx}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/convctx-bench-import.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
psql_run() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$@"; }
started=$(date +%s)

# seconds and peak RSS (kB) of a command, its output to /dev/null
measure() {
    /usr/bin/python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print("%.3f %d" % (time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
PY
}

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo "settings: $(psql -X -At -d postgres -c "SELECT current_setting('fsync') || ' fsync, ' || current_setting('synchronous_commit') || ' synchronous_commit, ' || split_part(version(), ' on ', 1)")"
printf '%-9s %-22s %-22s %-22s %-12s %s\n' turns "copy s [min-max]" "import s [min-max]" "ratio [min-max]" "turns/s" "tool peak RSS kB"
for size in $SIZES; do
    psql_run -d postgres -c "DROP DATABASE IF EXISTS $SRC" -c "CREATE DATABASE $SRC"
    psql_run -d "$SRC" -v turns="$size" -f "$HERE/../export/load.sql" >/dev/null
    "$TOOL" export -q -d "$SRC" --tenant bench -f "$WORK/tenant.jsonl"
    for t in session session_link turn; do
        psql_run -d "$SRC" -c "COPY convctx.$t TO STDOUT" > "$WORK/$t.copy"
    done
    # the bare tables: convctx's columns, constraints and indexes, no extension
    psql_run -d postgres -c "DROP DATABASE IF EXISTS $BARE" -c "CREATE DATABASE $BARE"
    psql_run -d "$BARE" -c "CREATE EXTENSION convctx" -c "CREATE SCHEMA bare" \
        -c "CREATE TABLE bare.session (LIKE convctx.session INCLUDING ALL)" \
        -c "CREATE TABLE bare.session_link (LIKE convctx.session_link INCLUDING ALL)" \
        -c "CREATE TABLE bare.turn (LIKE convctx.turn INCLUDING ALL)" \
        -c "DROP EXTENSION convctx"
    copy=(); import=(); rss=0
    for round in $(seq 1 "$ROUNDS"); do
        psql_run -d "$BARE" -c "TRUNCATE bare.session, bare.session_link, bare.turn" -c CHECKPOINT
        cat > "$WORK/copy.sql" <<SQL
\\copy bare.session (tenant_id, session_id, identity_id, created_at, last_activity_at, last_turn_no, live_turns, live_answers, summary_through_turn_no, redactions) FROM '$WORK/session.copy'
\\copy bare.session_link FROM '$WORK/session_link.copy'
\\copy bare.turn FROM '$WORK/turn.copy'
SQL
        # the session file holds the generated column too: read it into the others
        psql_run -d "$SRC" -c "COPY (SELECT tenant_id, session_id, identity_id, created_at, last_activity_at, last_turn_no, live_turns, live_answers, summary_through_turn_no, redactions FROM convctx.session) TO STDOUT" > "$WORK/session.copy"
        read -r c _ < <(measure psql -X -q -v ON_ERROR_STOP=1 -d "$BARE" -f "$WORK/copy.sql")
        psql_run -d postgres -c "DROP DATABASE IF EXISTS $DST" -c "CREATE DATABASE $DST"
        psql_run -d "$DST" -c "CREATE EXTENSION convctx" -c CHECKPOINT 2>/dev/null
        read -r i r < <(measure "$TOOL" import -q -d "$DST" --tenant bench -f "$WORK/tenant.jsonl")
        copy+=("$c"); import+=("$i"); [ "$r" -gt "$rss" ] && rss=$r
    done
    test "$(psql -X -At -d "$DST" -c "SELECT count(*) FROM convctx.turn")" = "$size"
    /usr/bin/python3 - "$size" "$rss" "${copy[*]}" "${import[*]}" <<'PY'
import statistics, sys
size, rss = int(sys.argv[1]), int(sys.argv[2])
c = [float(x) for x in sys.argv[3].split()]
i = [float(x) for x in sys.argv[4].split()]
ratios = [ci / ii for ci, ii in zip(c, i)]   # throughput of import over that of COPY
fmt = lambda v: "%.2f [%.2f-%.2f]" % (statistics.median(v), min(v), max(v))
print("%-9d %-22s %-22s %-22s %-12.0f %d" % (size, fmt(c), fmt(i), fmt(ratios), size / statistics.median(i), rss))
PY
done
echo "ratio: the import's throughput over COPY's, per round (COPY seconds / import seconds)."
echo "($(( $(date +%s) - started )) s)"
psql_run -d postgres -c "DROP DATABASE $SRC" -c "DROP DATABASE $DST" -c "DROP DATABASE $BARE"
