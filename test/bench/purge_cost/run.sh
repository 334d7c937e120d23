#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set), from the build
# directory: the retention pass cost at each size, then the results table.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${CONVCTX_BENCH_ROUNDS:-7}
SIZES=${CONVCTX_BENCH_SIZES:-10000 100000 1000000}
BATCH=1000
OUT=$(mktemp -d /tmp/convctx-bench-purge.XXXXXX)
DB=bench_purge
started=$(date +%s)
psql_run() { psql -X -q -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

createdb "$DB"
psql_run -f "$HERE/setup.sql" >/dev/null
psql_run -c 'CALL bench.load_backlog()'
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "settings: $(psql_run -At -c "SELECT current_setting('fsync') || ' fsync, ' || current_setting('synchronous_commit') || ' synchronous_commit'")"

# The measures of one round, in a rotating order (interleaved): each line
# "variant ms buffers". The 0.4.0 passes are convctx.purge(BATCH) itself,
# with the plans a backend makes first (custom) and keeps later (generic);
# the baselines are the 0.3.0 statements that chose expired sessions and
# contexts, the part of a pass that read whole tables.
VARIANTS=(pass_all pass_tiny pass_all_generic pass_tiny_generic
          sessions030_all sessions030_tiny sessions030_tiny_generic sessions040_all sessions040_tiny
          contexts030_all contexts030_tiny)
measure() {
    local v=$1 sql
    case $v in
        pass_all) sql="SELECT 'pass_all', * FROM bench.cost('SELECT convctx.purge($BATCH)')" ;;
        pass_tiny) sql="SET ROLE bench_tiny_admin; SELECT 'pass_tiny', * FROM bench.cost('SELECT convctx.purge($BATCH)'); RESET ROLE" ;;
        pass_all_generic) sql="SET plan_cache_mode = force_generic_plan; SELECT 'pass_all_generic', * FROM bench.cost('SELECT convctx.purge($BATCH)'); RESET plan_cache_mode" ;;
        pass_tiny_generic) sql="SET plan_cache_mode = force_generic_plan; SET ROLE bench_tiny_admin; SELECT 'pass_tiny_generic', * FROM bench.cost('SELECT convctx.purge($BATCH)'); RESET ROLE; RESET plan_cache_mode" ;;
        sessions030_all) sql="SELECT 'sessions030_all', * FROM bench.cost('EXECUTE sessions_030(86400, $BATCH, NULL)')" ;;
        sessions030_tiny) sql="SELECT 'sessions030_tiny', * FROM bench.cost('EXECUTE sessions_030(86400, $BATCH, ''tiny'')')" ;;
        sessions030_tiny_generic) sql="SET plan_cache_mode = force_generic_plan; SELECT 'sessions030_tiny_generic', * FROM bench.cost('EXECUTE sessions_030(86400, $BATCH, ''tiny'')'); RESET plan_cache_mode" ;;
        sessions040_all) sql="SELECT 'sessions040_all', * FROM bench.cost('EXECUTE sessions_040_all(86400, $BATCH, NULL)')" ;;
        sessions040_tiny) sql="SELECT 'sessions040_tiny', * FROM bench.cost('EXECUTE sessions_040_one(86400, $BATCH, ''tiny'')')" ;;
        contexts030_all) sql="SELECT 'contexts030_all', * FROM bench.cost('EXECUTE contexts_030(2592000, $BATCH, NULL)')" ;;
        contexts030_tiny) sql="SELECT 'contexts030_tiny', * FROM bench.cost('EXECUTE contexts_030(2592000, $BATCH, ''tiny'')')" ;;
    esac
    echo "$sql;"
}

for size in $SIZES; do
    psql_run -c "CALL bench.grow_to($size)" -c 'VACUUM ANALYZE' -c 'CHECKPOINT'
    # one warm-up round, not counted
    for round in $(seq 0 "$ROUNDS"); do
        {
            echo "SELECT bench.prepare_statements();"
            n=${#VARIANTS[@]}
            for i in $(seq 0 $((n - 1))); do measure "${VARIANTS[$(( (i + round) % n ))]}"; done
        } | psql_run -At -F ' ' -f - | grep -v '^$' | sed "s/^/$size $round /" >>"$OUT/raw"
    done
    echo "== $size sessions measured ($(( $(date +%s) - started )) s)"
done

# Turn throughput and HOT updates of convctx.session: 4 clients of
# turns.pgbench for HOT_SECONDS, interleaved rounds, on three copies of the
# schema: as installed (activity_bin and updated_bin indexed), as 0.3.0 had
# it (no bins, no expiry indexes), and with the naive index on the exact
# times (last_activity_at, updated_at) that the bins avoid.
HOT_SECONDS=${CONVCTX_BENCH_HOT_SECONDS:-8}
HOT_ROUNDS=${CONVCTX_BENCH_HOT_ROUNDS:-5}
PGBENCH="$("$PG_CONFIG" --bindir)/pgbench"
SIDES=(bins none exact)
for side in "${SIDES[@]}"; do
    createdb "hot_$side"
    psql -X -q -v ON_ERROR_STOP=1 -d "hot_$side" <<SQL >/dev/null
SET client_min_messages = error;
CREATE EXTENSION convctx;
$( [ "$side" != bins ] && echo "ALTER TABLE convctx.session DROP COLUMN activity_bin;
ALTER TABLE convctx.conversation_context DROP COLUMN updated_bin;" )
$( [ "$side" = exact ] && echo "CREATE INDEX ON convctx.session (last_activity_at) WHERE identity_id IS NULL;
CREATE INDEX ON convctx.conversation_context (updated_at);" )
SELECT count(convctx.finalize_turn('s' || s, convctx.start_turn('s' || s, 'r' || t, 'q'), 'a'))
FROM generate_series(1, 200) s, generate_series(1, 5) t;
VACUUM ANALYZE;
SQL
done
for round in $(seq 1 "$HOT_ROUNDS"); do
    for i in 0 1 2; do
        side=${SIDES[$(( (i + round) % 3 ))]}
        stats="SELECT string_agg(n_tup_upd || ' ' || n_tup_hot_upd, ' ' ORDER BY relname DESC) FROM pg_stat_user_tables
               WHERE relid = ANY ('{convctx.session,convctx.conversation_context}'::regclass[])"
        read -r u0 h0 cu0 ch0 < <(psql -X -At -d "hot_$side" -c "SELECT pg_stat_force_next_flush()" -c "$stats" | tail -1)
        log="$OUT/hot_${side}_$round.log"
        if ! "$PGBENCH" -n -M prepared -c 4 -j 2 -T "$HOT_SECONDS" -f "$HERE/turns.pgbench" "hot_$side" >"$log" 2>&1 ||
           ! grep -qE '^number of failed transactions: 0 ' "$log"; then
            echo "== pgbench failed:"; cat "$log"; exit 1
        fi
        sleep 1
        read -r u1 h1 cu1 ch1 < <(psql -X -At -d "hot_$side" -c "$stats")
        echo "$side $(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$log") $(( u1 - u0 )) $(( h1 - h0 )) $(( cu1 - cu0 )) $(( ch1 - ch0 ))" >>"$OUT/hot"
    done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# median and spread (min-max) of the counted rounds, per size and variant
echo
echo "retention pass cost, batch $BATCH, median of $ROUNDS interleaved rounds [min-max]"
echo "machine: $(nproc) cores, load average $load_before at the start, $load_after at the end"
printf '%-20s %-9s %-26s %s\n' "variant" "sessions" "ms" "buffers"
awk '$2 > 0 { k = $3 " " $1; ms[k] = ms[k] " " $4; buf[k] = buf[k] " " $5 }
     function stat(list, fmt,   a, n, i, j, t) {
         n = split(list, a, " ")
         for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
         return sprintf(fmt " [" fmt "-" fmt "]", (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2), a[1], a[n])
     }
     END { for (k in ms) { split(k, p, " "); print p[1], p[2], stat(ms[k], "%.2f"), stat(buf[k], "%d") } }' "$OUT/raw" |
    sort -k1,1 -k2,2n | awk '{ printf "%-20s %-9s %-26s %s %s\n", $1, $2, $3 " " $4, $5, $6 }'
echo
echo "turn throughput, 4 clients, start_turn + finalize_turn + context_add, median of $HOT_ROUNDS interleaved ${HOT_SECONDS} s runs [min-max]"
printf '%-38s %-20s %-28s %s\n' "schema" "tps" "session: HOT / updates" "context: HOT / updates"
for side in "${SIDES[@]}"; do
    case $side in
        bins) what="activity_bin indexed (0.4.0)" ;;
        none) what="no expiry index (0.3.0)" ;;
        exact) what="last_activity_at indexed (avoided)" ;;
    esac
    awk -v s="$side" -v what="$what" '$1 == s { n++; t[n] = $2; u += $3; h += $4; cu += $5; ch += $6 }
        END { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (t[j] + 0 < t[i] + 0) { x = t[i]; t[i] = t[j]; t[j] = x }
              printf "%-38s %-20s %-28s %s\n", what, sprintf("%.0f [%.0f-%.0f]", t[int((n + 1) / 2)], t[1], t[n]),
                     sprintf("%d / %d (%.1f%%)", h, u, 100 * h / u), sprintf("%d / %d (%.1f%%)", ch, cu, 100 * ch / cu) }' "$OUT/hot"
done
echo
echo "raw measures: $OUT/raw, $OUT/hot; total $(( $(date +%s) - started )) s"
