#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set), or against any
# cluster with convctx installed, from anywhere: loads a long session (with
# its embeddings when pgvector is installed) into a database whose tables
# are never analyzed, and each identity into one of its own, copies each
# database into one that is analyzed, times redact_turn and erase_identity
# in both, in interleaved rounds (each call rolled back, then the tables
# vacuumed, never analyzed), and prints the table with PASS or MISS lines.
# Fails only when the run itself fails.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${CONVCTX_BENCH_ROUNDS:-5}
TURNS=${CONVCTX_BENCH_TURNS:-5000}
read -r -a SIZES <<<"${CONVCTX_BENCH_SIZES:-2000 8000}"
DIMS=${CONVCTX_BENCH_DIMS:-32}
DB=bench_unanalyzed
REDACT_FACTOR=5
ERASE_FACTOR=6
ERASE_ANALYZED_FACTOR=2
OUT=$(mktemp -d /tmp/convctx-bench-unanalyzed.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
psql_run() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
started=$(date +%s)
PG_CONFIG=${PG_CONFIG:-pg_config}
[ -f "$("$PG_CONFIG" --sharedir)/extension/vector.control" ] || DIMS=0

# ${DB}_0: the long session; ${DB}_e<size>: an identity of that many
# sessions alone (so that its erasure's cost is the identity's, not the
# tenant's); ${DB}_1 and ${DB}_a<size>: the same, analyzed.
drop_all() {
    local s
    psql_run -d postgres -c "DROP DATABASE IF EXISTS ${DB}_0" -c "DROP DATABASE IF EXISTS ${DB}_1"
    for s in "${SIZES[@]}"; do
        psql_run -d postgres -c "DROP DATABASE IF EXISTS ${DB}_e$s" -c "DROP DATABASE IF EXISTS ${DB}_a$s"
    done
}
drop_all 2>/dev/null
psql_run -d postgres -c "CREATE DATABASE ${DB}_0"
psql_run -d "${DB}_0" -v dims="$DIMS" -f "$HERE/setup.sql" >/dev/null
for s in "${SIZES[@]}"; do
    psql_run -d postgres -c "CREATE DATABASE ${DB}_e$s TEMPLATE ${DB}_0"
done
psql_run -d "${DB}_0" -c "CALL bench.long_session($TURNS)" -c 'CALL bench.choose_target()'
[ "$DIMS" -gt 0 ] && psql_run -d "${DB}_0" -c "CALL bench.embeddings($DIMS)"
psql_run -d "${DB}_0" -c 'VACUUM' -c 'CHECKPOINT'
psql_run -d postgres -c "CREATE DATABASE ${DB}_1 TEMPLATE ${DB}_0"
psql_run -d "${DB}_1" -c 'ANALYZE'
for s in "${SIZES[@]}"; do
    psql_run -d "${DB}_e$s" -c "CALL bench.identities('{$s}')" -c 'CALL bench.warmup_identity()' \
        -c 'VACUUM' -c 'CHECKPOINT'
    psql_run -d postgres -c "CREATE DATABASE ${DB}_a$s TEMPLATE ${DB}_e$s"
    psql_run -d "${DB}_a$s" -c 'ANALYZE'
done
embeddings=0
[ "$DIMS" -gt 0 ] && embeddings=$(psql -X -At -d "${DB}_0" -c 'SELECT count(*) FROM convctx_recall.turn_embedding')
for d in "${DB}_0" $(for s in "${SIZES[@]}"; do echo "${DB}_e$s"; done); do
    stats=$(psql -X -At -d "$d" -c "SELECT count(*) FROM pg_stats WHERE schemaname IN ('convctx', 'convctx_recall')")
    [ "$stats" -eq 0 ] || { echo "$d has statistics ($stats columns)"; exit 1; }
done
echo "== loaded: $TURNS turns in one session, $embeddings embeddings, identities of ${SIZES[*]} sessions ($(( $(date +%s) - started )) s)"
load_before=$(cut -d' ' -f1 /proc/loadavg)

# One measure, in a fresh backend whose kept plans a first call on other
# rows made on the tables as they are: "name ms what-it-did". Both rolled
# back, then the tables vacuumed (never analyzed).
measure() {
    local name=$1 db=$2 warm=$3 call=$4 r
    r=$(psql_run -d "$db" -At -F ' ' -c 'BEGIN' -c "SELECT $warm" -c 'ROLLBACK' \
                 -c 'BEGIN' -c "SELECT * FROM $call" -c 'ROLLBACK' | tail -n 1)
    echo "$name $round $r" >>"$OUT/raw"
    psql_run -d "$db" -c 'VACUUM convctx.session, convctx.session_link, convctx.turn, convctx.audit_log'
    [ "$DIMS" -gt 0 ] && psql_run -d "$db" -c 'VACUUM convctx_recall.turn_embedding'
    return 0
}
VARIANTS=(redact_unanalyzed redact_analyzed)
for s in "${SIZES[@]}"; do VARIANTS+=("erase_unanalyzed_$s" "erase_analyzed_$s"); done
# Round 0 is a warm-up, not counted; the measures come in a rotating order.
n=${#VARIANTS[@]}
for round in $(seq 0 "$ROUNDS"); do
    for i in $(seq 0 $((n - 1))); do
        v=${VARIANTS[$(( (i + round) % n ))]}
        case $v in
            redact_unanalyzed) measure "$v" "${DB}_0" 'bench.warm_redact()' 'bench.redact()' ;;
            redact_analyzed) measure "$v" "${DB}_1" 'bench.warm_redact()' 'bench.redact()' ;;
            erase_unanalyzed_*) measure "$v" "${DB}_e${v##*_}" 'bench.warm_erase()' "bench.erase('user${v##*_}')" ;;
            erase_analyzed_*) measure "$v" "${DB}_a${v##*_}" 'bench.warm_erase()' "bench.erase('user${v##*_}')" ;;
        esac
    done
    echo "   round $round: $(awk -v r="$round" '$2 == r { printf "%s %.1f ms  ", $1, $3 }' "$OUT/raw")"
done
load_after=$(cut -d' ' -f1 /proc/loadavg)
for s in "${SIZES[@]}"; do
    done_=$(awk -v v="erase_unanalyzed_$s" '$1 == v { print $4; exit }' "$OUT/raw")
    [ "$done_" = "$s" ] || { echo "erase_identity of user$s made $done_ tombstones, not $s"; exit 1; }
done

echo
echo "redact_turn of one turn of a session of $TURNS turns ($embeddings embeddings), and"
echo "erase_identity of an identity alone in its database, on tables never analyzed and"
echo "analyzed (each the second call of a backend); milliseconds, median of $ROUNDS"
echo "interleaved rounds [min-max];"
echo "$(nproc) cores, load average $load_before -> $load_after,"
echo "$(psql -X -At -d "${DB}_0" -c "SELECT 'fsync ' || current_setting('fsync') || ', synchronous_commit ' || current_setting('synchronous_commit') || ', ' || split_part(version(), ' on ', 1)")"
awk -v first="${SIZES[0]}" -v last="${SIZES[${#SIZES[@]}-1]}" -v rf="$REDACT_FACTOR" -v ef="$ERASE_FACTOR" \
    -v af="$ERASE_ANALYZED_FACTOR" '
    $2 > 0 { ms[$1] = ms[$1] " " $3; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
    function sorted(list, a,   m, i, j, t) {
        m = split(list, a, " ")
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return m
    }
    function median(a, m) { return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
    END {
        printf "%-24s %s\n", "call", "ms"
        for (i = 1; i <= k; i++) {
            v = order[i]; m = sorted(ms[v], a); med[v] = median(a, m)
            printf "%-24s %s\n", v, sprintf("%.1f [%.1f-%.1f]", med[v], a[1], a[m])
        }
        r = med["redact_unanalyzed"] / med["redact_analyzed"]
        printf "\nredact_turn never analyzed / analyzed = %.1fx, at most %dx: %s\n", r, rf, r <= rf ? "PASS" : "MISS"
        r = med["erase_unanalyzed_" last] / med["erase_unanalyzed_" first]
        printf "erase_identity never analyzed, %d / %d sessions = %.1fx, at most %dx: %s\n", last, first, r, ef,
               r <= ef ? "PASS" : "MISS"
        r = med["erase_unanalyzed_" last] / med["erase_analyzed_" last]
        printf "erase_identity of %d sessions never analyzed / analyzed = %.1fx, at most %dx: %s\n", last, r, af,
               r <= af ? "PASS" : "MISS"
    }' <(sort -k1,1 "$OUT/raw")
echo "($(( $(date +%s) - started )) s)"
drop_all
