#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set), or against any
# cluster with convctx installed: for each size, loads that many turns
# (200-byte questions, 1,000-byte answers, sessions of 100 turns linked to
# an identity) into database "bench_export", then times in interleaved
# rounds the baseline COPY and `convctx export` of the tenant, both written
# to /dev/null, and reports the median seconds, rows per second, the ratio
# (median, min-max) and the tool's peak resident memory.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${CONVCTX_BENCH_ROUNDS:-5}
SIZES=${CONVCTX_BENCH_SIZES:-100000 1000000}
DB=bench_export
BINDIR=$(pg_config --bindir 2>/dev/null || dirname "$(command -v psql)")
TOOL=${CONVCTX_TOOL:-$BINDIR/convctx}
psql_run() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
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
printf '%-9s %-22s %-22s %-22s %s\n' turns "copy s [min-max]" "export s [min-max]" "ratio [min-max]" "tool peak RSS kB"
for size in $SIZES; do
    psql_run -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
    psql_run -d "$DB" -v turns="$size" -f "$HERE/load.sql" >/dev/null
    copy=(); export=(); rss=0
    for round in $(seq 1 "$ROUNDS"); do
        read -r c _ < <(measure psql -X -q -d "$DB" -c "COPY (SELECT pg_catalog.row_to_json(t) FROM convctx.turn t WHERE t.tenant_id = 'bench' ORDER BY t.session_id, t.turn_no) TO STDOUT")
        read -r e r < <(measure "$TOOL" export -q -d "$DB" --tenant bench)
        copy+=("$c"); export+=("$e"); [ "$r" -gt "$rss" ] && rss=$r
    done
    /usr/bin/python3 - "$size" "$rss" "${copy[*]}" "${export[*]}" <<'PY'
import statistics, sys
size, rss = int(sys.argv[1]), int(sys.argv[2])
c = [float(x) for x in sys.argv[3].split()]
e = [float(x) for x in sys.argv[4].split()]
ratios = [ci / ei for ci, ei in zip(c, e)]   # throughput of export over that of COPY
fmt = lambda v: "%.2f [%.2f-%.2f]" % (statistics.median(v), min(v), max(v))
print("%-9d %-22s %-22s %-22s %d" % (size, fmt(c), fmt(e), fmt(ratios), rss))
PY
done
echo "ratio: the export's throughput over COPY's, per round (COPY seconds / export seconds)."
echo "($(( $(date +%s) - started )) s)"
psql_run -d postgres -c "DROP DATABASE $DB"
