#!/usr/bin/env bash
# Runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set), or against any
# cluster with convctx installed: loads test/bench/browser/load.sql, then
# times each page with pgbench (one client, prepared statements, the tenant
# set per connection), a few seconds each, in interleaved rounds, and
# prints the median latency, its spread, and each target with PASS or MISS.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${CONVCTX_BENCH_ROUNDS:-3}
TURNS=${CONVCTX_BENCH_TURNS:-10000000}
SECONDS_EACH=${CONVCTX_BENCH_SECONDS:-5}
DB=bench_browser
WORK=$(mktemp -d "${TMPDIR:-/tmp}/convctx-bench-browser.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
psql_run() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$@"; }
started=$(date +%s)

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo "settings: $(psql -X -At -d postgres -c "SELECT current_setting('fsync') || ' fsync, ' || current_setting('synchronous_commit') || ' synchronous_commit, ' || split_part(version(), ' on ', 1)")"
psql_run -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
t0=$(date +%s)
psql_run -d "$DB" -v turns="$TURNS" -f "$HERE/load.sql" >/dev/null
echo "loaded: $(psql -X -At -d "$DB" -c "SELECT string_agg(tenant_id || ' ' || n || ' turns', ', ' ORDER BY tenant_id) FROM (SELECT tenant_id, count(*) AS n FROM convctx.turn GROUP BY 1) t") in $(( $(date +%s) - t0 )) s"

# the cursors and turn numbers of the deep pages, read once
cursor500=$(PGOPTIONS="-c convctx.tenant=big" psql -X -At -d "$DB" -c "SELECT cursor FROM convctx.list_conversations('many', NULL, 1000) OFFSET 999" )
for i in 2 3 4 5 6 7 8 9 10; do
    cursor500=$(PGOPTIONS="-c convctx.tenant=big" psql -X -At -d "$DB" -c "SELECT cursor FROM convctx.list_conversations('many', '$cursor500', 1000) OFFSET 999")
done
# after 10,000 sessions: page 501 of 20; the bare table's key of the same row
bare500=$(psql -X -At -d "$DB" -c "SELECT last_activity_at || '|' || session_id FROM bare_session WHERE identity_id = 'many' ORDER BY last_activity_at DESC, session_id DESC OFFSET 9999 LIMIT 1")
bare_time=${bare500%%|*}
bare_id=${bare500#*|}

# name | tenant | SQL (pgbench binds :c500, :bt and :bid as parameters)
vars=(-D "c500=$cursor500" -D "bt=$bare_time" -D "bid=$bare_id")
cat > "$WORK/queries" <<'SQL'
list_small_p1|small|SELECT * FROM convctx.list_conversations('few', NULL, 20);
list_big_p1|big|SELECT * FROM convctx.list_conversations('many', NULL, 20);
list_big_p500|big|SELECT * FROM convctx.list_conversations('many', :c500, 20);
bare_list_p1||SELECT session_id, title, created_at, last_activity_at, live_turns, linked_later FROM bare_session WHERE identity_id = 'many' ORDER BY last_activity_at DESC, session_id DESC LIMIT 20;
bare_list_p500||SELECT session_id, title, created_at, last_activity_at, live_turns, linked_later FROM bare_session WHERE identity_id = 'many' AND (last_activity_at, session_id) < (:bt::timestamptz, :bid) ORDER BY last_activity_at DESC, session_id DESC LIMIT 20;
turns_small_start|small|SELECT * FROM convctx.conversation_turns('short1', 0, NULL, 20);
turns_big_start|big|SELECT * FROM convctx.conversation_turns('long1', 0, NULL, 20);
turns_big_10000|big|SELECT * FROM convctx.conversation_turns('long1', 9980, NULL, 20);
bare_turns_start||SELECT turn_no, turn_id, request_id, record_version, question_neutral, answer_neutral, created_at, finalized_at, deleted_at FROM bare_turn WHERE session_id = 'long1' AND turn_no > 0 ORDER BY turn_no LIMIT 20;
bare_turns_10000||SELECT turn_no, turn_id, request_id, record_version, question_neutral, answer_neutral, created_at, finalized_at, deleted_at FROM bare_turn WHERE session_id = 'long1' AND turn_no > 9980 ORDER BY turn_no LIMIT 20;
SQL
# the bare list returns what list_conversations does: the same rows and
# columns (but the cursor), first and 500th page
for pair in "NULL|" "'$cursor500'|AND (last_activity_at, session_id) < ('$bare_time'::timestamptz, '$bare_id')"; do
    differ=$(PGOPTIONS="-c convctx.tenant=big" psql -X -At -d "$DB" -c "
        WITH l AS (SELECT session_id, title, created_at, last_activity_at, live_turns, linked_later
                     FROM convctx.list_conversations('many', ${pair%%|*}, 20)),
             b AS (SELECT session_id, title, created_at, last_activity_at, live_turns, linked_later
                     FROM bare_session WHERE identity_id = 'many' ${pair#*|}
                    ORDER BY last_activity_at DESC, session_id DESC LIMIT 20)
        SELECT (SELECT count(*) FROM (SELECT * FROM l EXCEPT ALL SELECT * FROM b) x)
             + (SELECT count(*) FROM (SELECT * FROM b EXCEPT ALL SELECT * FROM l) y)")
    [ "$differ" -eq 0 ] || { echo "the bare list and list_conversations differ in $differ rows" >&2; exit 1; }
done
# every query returns its page: check once
while IFS='|' read -r name tenant sql; do
    n=$(PGOPTIONS="-c convctx.tenant=$tenant" psql -X -At -d "$DB" -v c500="$cursor500" -v bt="$bare_time" \
        -v bid="$bare_id" <<< "SELECT count(*) FROM ($(sed "s/:c500/:'c500'/; s/:bt::/:'bt'::/; s/:bid)/:'bid')/; s/;\$//" <<< "$sql")) p")
    [ "$n" -eq 20 ] || { echo "$name returned $n rows, not a page of 20" >&2; exit 1; }
done < "$WORK/queries"

for round in $(seq 1 "$ROUNDS"); do
    while IFS='|' read -r name tenant sql; do
        echo "$sql" > "$WORK/$name.sql"
        tps=$(PGOPTIONS="-c convctx.tenant=$tenant" pgbench -n -M prepared -c 1 -T "$SECONDS_EACH" \
              "${vars[@]}" -f "$WORK/$name.sql" "$DB" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
        echo "$name $tps" >> "$WORK/results"
    done < "$WORK/queries"
done

/usr/bin/python3 - "$WORK/results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, tps = line.split()
    runs.setdefault(name, []).append(1e6 / float(tps))   # microseconds a call
med = {k: statistics.median(v) for k, v in runs.items()}
print("%-20s %s" % ("page", "latency µs, median [min-max]"))
for k, v in runs.items():
    print("%-20s %.0f [%.0f-%.0f]" % (k, med[k], min(v), max(v)))
targets = [
    ("list, first page: 100,000 sessions / 20 sessions", "list_big_p1", "list_small_p1", 1.3),
    ("list, 500th page: 100,000 sessions / first page of 20", "list_big_p500", "list_small_p1", 1.3),
    ("turns, first page: 10,000-turn session / 20-turn session", "turns_big_start", "turns_small_start", 1.3),
    ("turns, at the 10,000th turn / first page of 20 turns", "turns_big_10000", "turns_small_start", 1.3),
    ("list, first page / bare keyset query", "list_big_p1", "bare_list_p1", 1.5),
    ("list, 500th page / bare keyset query", "list_big_p500", "bare_list_p500", 1.5),
    ("turns, first page / bare keyset query", "turns_big_start", "bare_turns_start", 1.5),
    ("turns, at the 10,000th / bare keyset query", "turns_big_10000", "bare_turns_10000", 1.5),
]
print()
print("%-58s %-8s %-7s %s" % ("target (latency ratio)", "measured", "at most", "result"))
for label, a, b, limit in targets:
    r = med[a] / med[b]
    print("%-58s %-8.2f %-7.1f %s" % (label, r, limit, "PASS" if r <= limit else "MISS"))
PY
echo "($(( $(date +%s) - started )) s)"
psql_run -d postgres -c "DROP DATABASE $DB"
