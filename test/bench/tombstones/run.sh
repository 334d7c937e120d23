#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set), or against any
# cluster with convctx installed, from anywhere: builds the sessions in a
# database "bench_tombstones", measures, prints the table. Fails only when
# the run itself fails.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${CONVCTX_BENCH_ROUNDS:-7}
CALLS=${CONVCTX_BENCH_CALLS:-50}
LIVE=${CONVCTX_BENCH_LIVE:-3}
DB=bench_tombstones
psql_run() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
started=$(date +%s)

psql_run -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
# Anonymous sessions keep as many tombstones as signed-in ones: no cap.
psql_run -d "$DB" -c "ALTER DATABASE $DB SET convctx.max_session_turns = 1000000"
psql_run -d "$DB" -f "$HERE/setup.sql" >/dev/null
psql_run -d "$DB" -c "CALL bench.build($LIVE)"
# the steady state autovacuum keeps after the redactions
psql_run -d "$DB" -c 'VACUUM ANALYZE convctx.turn' -c 'VACUUM ANALYZE convctx.session' \
                  -c 'VACUUM ANALYZE convctx.turn_retrieval' -c 'CHECKPOINT'
load_before=$(cut -d' ' -f1 /proc/loadavg)
psql_run -d "$DB" -c "CALL bench.measure($ROUNDS, $CALLS)"
load_after=$(cut -d' ' -f1 /proc/loadavg)

echo
echo "prompt reads with tombstones below $LIVE live turns, in signed-in and anonymous sessions:"
echo "microseconds per call, median of $ROUNDS interleaved rounds of $CALLS calls, and its ratio to"
echo "the fresh session's of the same kind in the same round (median, with min-max over the"
echo "rounds); $(nproc) cores, load average $load_before -> $load_after,"
echo "$(psql -X -At -d "$DB" -c "SELECT 'fsync ' || current_setting('fsync') || ', synchronous_commit ' || current_setting('synchronous_commit') || ', ' || split_part(version(), ' on ', 1)")"
psql_run -d "$DB" -P footer=off -c 'SELECT * FROM bench.report()'
# the index entries of convctx.turn one call goes through (deterministic)
psql_run -d "$DB" -P footer=off -c 'SELECT * FROM bench.entries()'
echo "($(( $(date +%s) - started )) s)"
psql_run -d postgres -c "DROP DATABASE $DB"
