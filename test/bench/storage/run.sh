#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set), from the build
# directory: loads CONVCTX_BENCH_TURNS turns through convctx and into the
# floor's bare table with pgbench, vacuums, and prints the bytes per stored
# turn of each table and index of both sides and the target with PASS or
# MISS. Half the sessions (the even ones) are signed in, their turns
# started with start_turn's identity_id and carrying it on both sides;
# the turns and mean row size of each kind are printed apart. Fails only
# when the run itself fails.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
TURNS=${CONVCTX_BENCH_TURNS:-1000000}
SESSIONS=${CONVCTX_BENCH_SESSIONS:-1000}
CLIENTS=${CONVCTX_BENCH_CLIENTS:-4}
TURN_FILLFACTOR=${CONVCTX_BENCH_TURN_FILLFACTOR:-}
PGBENCH="$("$PG_CONFIG" --bindir)/pgbench"
OUT=$(mktemp -d /tmp/convctx-bench-storage.XXXXXX)
started=$(date +%s)

DB=bench_storage
psql_run() { psql -X -q -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
elapsed() { echo "$(( $(date +%s) - started ))s"; }

# load N: N more turns on each side, spread over the clients.
load() {
    local per_client=$(( ($1 + CLIENTS - 1) / CLIENTS ))
    if ! "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -t "$per_client" \
            -D sessions="$SESSIONS" -f "$HERE/load.pgbench" "$DB" >"$OUT/load.log" 2>&1 \
        || ! grep -qE '^number of failed transactions: 0 ' "$OUT/load.log"; then
        echo "== pgbench failed ($OUT/load.log):"; cat "$OUT/load.log"; exit 1
    fi
}

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
# No cap may drop turns of the anonymous sessions that the floor keeps.
psql_run -c "ALTER DATABASE $DB SET convctx.max_session_turns = 1000000000"
psql_run -f "$HERE/setup.sql"
fillfactor=$(psql_run -At -c "SELECT coalesce((SELECT option_value FROM pg_options_to_table(reloptions)
                                                  WHERE option_name = 'fillfactor'), '100')
                                FROM pg_class WHERE oid = 'convctx.turn'::regclass")
if [ -n "$TURN_FILLFACTOR" ]; then
    psql_run -c "ALTER TABLE convctx.turn SET (fillfactor = $TURN_FILLFACTOR)"
    fillfactor="$TURN_FILLFACTOR (set by CONVCTX_BENCH_TURN_FILLFACTOR; the extension's: $fillfactor)"
fi
echo "== $TURNS turns per side on $SESSIONS sessions (half anonymous, half signed in), $CLIENTS clients; convctx.turn fill factor $fillfactor, floor 100"

# Statistics early, as autovacuum would give them, then the rest.
warm=$(( TURNS < 20000 ? TURNS / 2 : 10000 ))
load "$warm"
psql_run -c 'ANALYZE'
load $(( TURNS - warm ))
echo "== loaded ($(elapsed)): $(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$OUT/load.log") turns/s per side"
psql_run -c 'VACUUM (ANALYZE)' -c 'CHECKPOINT'

psql_run <<'SQL'
\pset footer off
CREATE TEMP TABLE turns AS
SELECT 'convctx' AS side, count(*) AS n FROM convctx.turn
UNION ALL SELECT 'floor', count(*) FROM floor.turn;

-- Every table, index and TOAST table of each side, all forks (the free
-- space and visibility maps too); convctx's other tables and their
-- indexes, small here, are added up on one line.
CREATE TEMP TABLE sizes AS
WITH rel AS (
    SELECT n.nspname AS side, c.oid, c.relname, c.relkind, c.reltoastrelid,
           coalesce(i.indrelid, c.oid) AS owner
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_index i ON i.indexrelid = c.oid
     WHERE n.nspname IN ('convctx', 'floor') AND c.relkind IN ('r', 'i')
)
SELECT side,
       CASE WHEN owner IN ('convctx.turn'::regclass, 'convctx.session'::regclass, 'floor.turn'::regclass)
            THEN relname ELSE 'other tables and indexes' END AS relation,
       CASE WHEN owner NOT IN ('convctx.turn'::regclass, 'convctx.session'::regclass, 'floor.turn'::regclass)
            THEN 'rest' WHEN relkind = 'r' THEN 'table' ELSE 'index' END AS kind,
       pg_table_size(oid) - CASE WHEN reltoastrelid <> 0 THEN pg_total_relation_size(reltoastrelid) ELSE 0 END AS bytes
  FROM rel
UNION ALL
SELECT side, relname || ' (TOAST)', 'toast', pg_total_relation_size(reltoastrelid)
  FROM rel
 WHERE reltoastrelid <> 0 AND owner IN ('convctx.turn'::regclass, 'convctx.session'::regclass, 'floor.turn'::regclass);

\echo
\echo == turns stored and updates that were HOT (no new index entries)
SELECT t.side, t.n AS turns, s.n_tup_upd AS turn_updates,
       round(100.0 * s.n_tup_hot_upd / nullif(s.n_tup_upd, 0), 1) AS "hot %"
  FROM turns t
  JOIN pg_stat_user_tables s ON s.relid = CASE t.side WHEN 'convctx' THEN 'convctx.turn'::regclass
                                                      ELSE 'floor.turn'::regclass END
 ORDER BY 1;

\echo == turns of anonymous and signed-in sessions, and their mean row size (pg_column_size)
SELECT side, kind, count(*) AS turns, round(avg(bytes), 1) AS row_bytes
  FROM (SELECT 'convctx' AS side, CASE WHEN identity_id IS NULL THEN 'anonymous' ELSE 'signed in' END AS kind,
               pg_column_size(t.*) AS bytes
          FROM convctx.turn t
        UNION ALL
        SELECT 'floor', CASE WHEN identity_id IS NULL THEN 'anonymous' ELSE 'signed in' END,
               pg_column_size(t.*)
          FROM floor.turn t) x
 GROUP BY side, kind ORDER BY side, kind;

\echo == bytes per stored turn, after VACUUM
SELECT z.side, z.relation, z.kind, sum(z.bytes) AS bytes,
       round(sum(z.bytes)::numeric / t.n, 1) AS per_turn
  FROM sizes z JOIN turns t USING (side)
 GROUP BY z.side, z.relation, z.kind, t.n
HAVING sum(z.bytes) > 0
 ORDER BY z.side, z.kind = 'rest', z.kind <> 'table', z.kind = 'toast', z.relation;

SELECT z.side, sum(z.bytes) AS bytes, round(sum(z.bytes)::numeric / t.n, 1) AS per_turn,
       round(sum(z.bytes) FILTER (WHERE z.kind IN ('table', 'toast'))::numeric / t.n, 1) AS tables,
       round(sum(z.bytes) FILTER (WHERE z.kind = 'index')::numeric / t.n, 1) AS indexes
  FROM sizes z JOIN turns t USING (side)
 GROUP BY z.side, t.n ORDER BY 1;

\echo == target
\pset tuples_only on
SELECT format('storage per turn, convctx / floor: %s / %s bytes = %s (target <= 1.15) %s',
              round(c, 1), round(f, 1), round(c / f, 3), CASE WHEN c / f <= 1.15 THEN 'PASS' ELSE 'MISS' END)
         AS result
  FROM (SELECT sum(bytes)::numeric / (SELECT n FROM turns WHERE side = 'convctx') AS c FROM sizes WHERE side = 'convctx') a,
       (SELECT sum(bytes)::numeric / (SELECT n FROM turns WHERE side = 'floor') AS f FROM sizes WHERE side = 'floor') b;
SQL
psql -X -q -d postgres -c "DROP DATABASE $DB"
echo "== done in $(elapsed)"
rm -rf "$OUT"
