#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set), or against any
# cluster with convctx installed, from anywhere: loads the identities into a
# database "bench_erase", times erase_identity in interleaved rounds (each
# erasure rolled back, then the tables vacuumed), prints the table. Fails
# only when the run itself fails.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${CONVCTX_BENCH_ROUNDS:-5}
read -r -a SIZES <<<"${CONVCTX_BENCH_SIZES:-5000 20000 40000}"
DB=bench_erase
TARGET_MS=2000
# keyed stand-ins, the case where an erasure also looks for earlier ones
# (set in the session: a key cannot be set for a database)
KEY=bench-erase-identity-hash-key-0123456789
OUT=$(mktemp -d /tmp/convctx-bench-erase.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
psql_run() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
started=$(date +%s)

psql_run -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
psql_run -d "$DB" -f "$HERE/setup.sql" >/dev/null
psql_run -d "$DB" -c 'CALL bench.background()'
psql_run -d "$DB" -c "CALL bench.load('{$(IFS=,; echo "${SIZES[*]}")}')"
psql_run -d "$DB" -c 'VACUUM ANALYZE' -c 'CHECKPOINT'
echo "== loaded ($(( $(date +%s) - started )) s)"
load_before=$(cut -d' ' -f1 /proc/loadavg)

# Round 0 is a warm-up, not counted; the sizes come in a rotating order.
n=${#SIZES[@]}
for round in $(seq 0 "$ROUNDS"); do
    for i in $(seq 0 $((n - 1))); do
        size=${SIZES[$(( (i + round) % n ))]}
        r=$(psql_run -d "$DB" -At -F ' ' -c "SET convctx.identity_hash_key = '$KEY'" -c 'BEGIN' -c "SELECT * FROM bench.erase('user$size')" -c 'ROLLBACK')
        [ "${r#* }" = "$size" ] || { echo "erase_identity of user$size made ${r#* } tombstones, not $size"; exit 1; }
        echo "$size $round ${r% *}" >>"$OUT/raw"
        psql_run -d "$DB" -c 'VACUUM convctx.session, convctx.session_link, convctx.turn,
                                     convctx.conversation_context, convctx.audit_log'
    done
    echo "   round $round: $(awk -v r="$round" '$2 == r { printf "%s %.0f ms  ", $1, $3 }' "$OUT/raw")"
done
load_after=$(cut -d' ' -f1 /proc/loadavg)

echo
echo "erase_identity of one identity (a turn and a context per session, a refused link per ten),"
echo "beside 50 000 other sessions: milliseconds, median of $ROUNDS interleaved rounds [min-max];"
echo "$(nproc) cores, load average $load_before -> $load_after,"
echo "$(psql -X -At -d "$DB" -c "SELECT 'fsync ' || current_setting('fsync') || ', synchronous_commit ' || current_setting('synchronous_commit') || ', ' || split_part(version(), ' on ', 1)")"
awk -v first="${SIZES[0]}" -v last="${SIZES[$((n - 1))]}" -v target="$TARGET_MS" '
    $2 > 0 { ms[$1] = ms[$1] " " $3; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
    function sorted(list, a,   m, i, j, t) {
        m = split(list, a, " ")
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return m
    }
    function median(a, m) { return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
    END {
        printf "%-10s %-24s %s\n", "sessions", "ms", "ms per 1000 sessions"
        for (i = 1; i <= k; i++) {
            s = order[i]; m = sorted(ms[s], a); med[s] = median(a, m)
            printf "%-10s %-24s %.1f\n", s, sprintf("%.0f [%.0f-%.0f]", med[s], a[1], a[m]), 1000 * med[s] / s
        }
        ratio = med[last] / med[first]; linear = last / first
        printf "\ntime(%d) / time(%d) = %.1fx, linear %.0fx: %s\n", last, first, ratio, linear,
               ratio <= 1.25 * linear ? "PASS" : "MISS"
        printf "%d sessions in at most %d ms: %.0f ms, %s\n", last, target, med[last],
               med[last] <= target ? "PASS" : "MISS"
    }' <(sort -n -k1,1 "$OUT/raw")
echo "($(( $(date +%s) - started )) s)"
psql_run -d postgres -c "DROP DATABASE $DB"
