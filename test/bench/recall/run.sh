#!/usr/bin/env bash
# The recall benchmark, inside the throwaway cluster (test/bench/recall.sh;
# PGHOST/PGPORT/PGUSER/PGPASSWORD set).
# Loads the data (setup.sql), then measures in interleaved rounds and
# prints each figure against its target with PASS or MISS.
set -euo pipefail
source test/bench/lib/pgbench.sh
TURNS=${CONVCTX_BENCH_TURNS:-1000000}
DIMS=${CONVCTX_BENCH_DIMS:-384}
ROUNDS=${CONVCTX_BENCH_ROUNDS:-3}
SECONDS_=${CONVCTX_BENCH_SECONDS:-10}
MIN=${CONVCTX_BENCH_MIN_EMBEDDINGS:-10000}
EF=${CONVCTX_BENCH_EF_SEARCH:-100}
DB=recall_bench
work=$(mktemp -d /tmp/convctx-recall-bench.XXXXXX)
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

psql -X -q -c "CREATE DATABASE $DB" >/dev/null
echo "== loading $TURNS turns of $DIMS dimensions over 100 tenants (min_embeddings $MIN)"
t0=$SECONDS
psql -X -q -v ON_ERROR_STOP=1 -v turns="$TURNS" -v dims="$DIMS" -v min_embeddings="$MIN" \
    -v password="$PGPASSWORD" \
    -d "$DB" -f test/bench/recall/setup.sql
echo "== loaded in $((SECONDS - t0)) s; tenants with an index of their own: $(q -c 'SELECT count(*) FROM convctx_recall.tenant_index')"
q -c "SELECT 'tenant sizes: t1 ' || max(turns) || ', t3 ' || sum(turns) FILTER (WHERE k = 3) || ', t98 ' || sum(turns) FILTER (WHERE k = 98) || ', t100 ' || min(turns) FROM bench.tenant"

# Reads: rounds of bench.round, as the app's role.
for r in $(seq 1 "$ROUNDS"); do
    q -c "SET ROLE bench_app" -c "SET bench.ef_search = $EF" -c "CALL bench.round($r)"
done

# Storing an embedding, durable commits, one client: store_embedding
# against an insert into the bare table, rounds interleaved.
cat >"$work/store.sql" <<'SQL'
\set n random(1, 20000)
SELECT convctx_recall.store_embedding(session_id, turn_id, 'bench', v) FROM bench.pending WHERE n = :n;
SQL
cat >"$work/bare.sql" <<'SQL'
\set n random(1, 20000)
INSERT INTO bench.bare (tenant_id, embedding) SELECT 't1', v FROM bench.pending WHERE n = :n;
SQL
q -c "CREATE TABLE bench.store_tps (round int, who text, tps float8)"
for r in $(seq 1 "$ROUNDS"); do
    for who in store bare; do
        PGUSER=bench_app PGOPTIONS="-c convctx.tenant=t1" \
            pgbench_run "$work/$who.log" "$DB" 1 -T "$SECONDS_" -f "$work/$who.sql"
        q -c "INSERT INTO bench.store_tps VALUES ($r, '$who', $(tps_of "$work/$who.log"))"
    done
done

# Deletion: the queries are the erased identity's own embeddings; what
# recall returns of its turns before and after erase_identity.
q <<'SQL'
CREATE TABLE bench.victim AS
SELECT e.turn_id, e.embedding FROM convctx_recall.turn_embedding e
  JOIN convctx.session_link l ON l.tenant_id = e.tenant_id AND l.session_id = e.session_id
 WHERE e.tenant_id = 't1' AND l.identity_id = 'victim';
CREATE TABLE bench.victim_found (phase text, found bigint, queries bigint);
CREATE PROCEDURE bench.victim_probe(phase text) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('convctx.tenant', 't1', false);
    INSERT INTO bench.victim_found
    SELECT phase, count(*) FILTER (WHERE r.turn_id IN (SELECT turn_id FROM bench.victim)),
           count(DISTINCT v.turn_id)
      FROM (SELECT * FROM bench.victim ORDER BY turn_id LIMIT 200) v
      CROSS JOIN LATERAL (SELECT turn_id FROM convctx_recall.recall(v.embedding, 'bench', 10)
                          UNION ALL
                          SELECT turn_id FROM convctx_recall.answered_before(v.embedding, 'bench', 0.0)) r;
END $$;
CALL bench.victim_probe('before');
SET convctx.tenant = 't1';
SELECT convctx.erase_identity('victim') AS erased_turns \gset
CALL bench.victim_probe('after');
SQL

# The exact path (a session, an identity, tenants without an index of
# their own) against a plain exact scan of the same embeddings; the first
# call of a new connection; then the same tenants with an index of their
# own against the plain exact scan, for the size from which an index pays.
XSIZES=${CONVCTX_BENCH_EXACT_SIZES:-250,500,1000,2000,5000,8000,10000}
t0=$SECONDS
psql -X -q -v ON_ERROR_STOP=1 -v sizes="$XSIZES" -d "$DB" -f test/bench/recall/exact.sql
echo "== loaded tenants of $XSIZES embeddings without an index of their own in $((SECONDS - t0)) s"
for r in $(seq 1 "$ROUNDS"); do
    q -c "SET bench.ef_search = $EF" -c "CALL bench.xround($r, 'exact')"
done
# cold: the first recall of a new connection (a session's 50 turns), then a second one
cold=""
warm=""
for i in $(seq 1 $((ROUNDS * 4))); do
    times=$(psql -X -q -d "$DB" -c "SET convctx.tenant = 'x${XSIZES##*,}'" -c '\timing on' \
        -c "SELECT count(*) FROM convctx_recall.recall('$(q -c "SELECT v FROM bench.xquery WHERE class = 'session' AND q = 1")', 'bench', 10, 'x${XSIZES##*,}-s30')" \
        -c "SELECT count(*) FROM convctx_recall.recall('$(q -c "SELECT v FROM bench.xquery WHERE class = 'session' AND q = 2")', 'bench', 10, 'x${XSIZES##*,}-s30')" \
        | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -n 2)
    cold="$cold $(echo "$times" | sed -n 1p)"
    warm="$warm $(echo "$times" | sed -n 2p)"
done
q -c "SELECT convctx_recall.index_tenants('bench', ${XSIZES%%,*}) > 0" >/dev/null
for r in $(seq 1 "$ROUNDS"); do
    q -c "SET bench.ef_search = $EF" -c "CALL bench.xround($r, 'hnsw')"
done

# The table: medians of each round, and the median and spread of the
# per-round ratios.
q <<'SQL'
CREATE VIEW bench.per_round AS
SELECT class, who, round, percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50, avg(recall) AS recall
  FROM bench.timing GROUP BY 1, 2, 3;
CREATE VIEW bench.read_ratio AS
SELECT c.class, percentile_cont(0.5) WITHIN GROUP (ORDER BY c.p50 / b.p50) AS med,
       min(c.p50 / b.p50) AS lo, max(c.p50 / b.p50) AS hi
  FROM bench.per_round c JOIN bench.per_round b USING (class, round)
 WHERE c.who = 'convctx' AND b.who = 'bare' GROUP BY 1;
CREATE VIEW bench.store_ratio AS
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY b.tps / s.tps) AS med,
       min(b.tps / s.tps) AS lo, max(b.tps / s.tps) AS hi
  FROM bench.store_tps s JOIN bench.store_tps b USING (round) WHERE s.who = 'store' AND b.who = 'bare';
SQL
echo
echo "recall@10 against exact search, p50 of one recall (ms, on the server) per round, $ROUNDS rounds,"
echo "hnsw.ef_search = $EF for both:"
q -c "SELECT format('  %s tenants, %s: recall@10 %s, p50 ms %s', class, who, round(avg(recall)::numeric, 3),
                    string_agg(round(p50::numeric, 2)::text, ' ' ORDER BY round))
        FROM bench.per_round GROUP BY class, who ORDER BY class, who DESC"
echo
echo "targets:"
q -c "SELECT format('  recall@10 of %s tenants >= 0.95: %s %s', class, round(avg(recall)::numeric, 3),
                    CASE WHEN avg(recall) >= 0.95 THEN 'PASS' ELSE 'MISS' END)
        FROM bench.per_round WHERE who = 'convctx' GROUP BY class ORDER BY class"
q -c "SELECT format('  p50 latency of %s tenants, convctx / bare HNSW query <= 1.5: %s (spread %s-%s) %s', class,
                    round(med::numeric, 2), round(lo::numeric, 2), round(hi::numeric, 2),
                    CASE WHEN med <= 1.5 THEN 'PASS' ELSE 'MISS' END)
        FROM bench.read_ratio ORDER BY class"
q -c "SELECT format('  storing an embedding (durable commits, 1 client), store_embedding / bare insert <= 1.2: %s (spread %s-%s) %s',
                    round(med::numeric, 2), round(lo::numeric, 2), round(hi::numeric, 2),
                    CASE WHEN med <= 1.2 THEN 'PASS' ELSE 'MISS' END) FROM bench.store_ratio"
q -c "SELECT '    tps per round: ' || string_agg(format('%s %s %s', round, who, round(tps::numeric)), '; ' ORDER BY round, who DESC)
        FROM bench.store_tps"
q -c "SELECT format('  erased identity (%s embedded turns): its turns returned by %s recalls after erase_identity = 0: %s (before: %s) %s',
                    (SELECT count(*) FROM bench.victim), a.queries, a.found, b.found,
                    CASE WHEN a.found = 0 THEN 'PASS' ELSE 'MISS' END)
        FROM bench.victim_found a, bench.victim_found b WHERE a.phase = 'after' AND b.phase = 'before'"
echo
echo "exact path (no index of its own) against a plain exact scan of the same embeddings"
echo "(ORDER BY embedding <=> q LIMIT 10 over the scope's rows), p50 ms per round of recall / plain:"
q -c "SELECT format('  %s: %s / %s, same results: %s', class,
                    string_agg(round(c.p50::numeric, 2)::text, ' ' ORDER BY round),
                    string_agg(round(b.p50::numeric, 2)::text, ' ' ORDER BY round), bool_and(c.same))
        FROM bench.xper_round c JOIN bench.xper_round b USING (phase, class, round)
       WHERE phase = 'exact' AND c.who = 'recall' AND b.who = 'plain'
       GROUP BY class ORDER BY min(c.p50)"
echo "targets:"
q -c "SELECT format('  exact recall of %s, recall / plain exact scan <= 1.2 with the same results: %s (spread %s-%s)%s %s',
                    class, round(med::numeric, 2), round(lo::numeric, 2), round(hi::numeric, 2),
                    CASE WHEN same THEN '' ELSE ', NOT the same results' END,
                    CASE WHEN med <= 1.2 AND same THEN 'PASS' ELSE 'MISS' END)
        FROM bench.xratio
       WHERE phase = 'exact' AND (class IN ('session', 'identity') OR split_part(class, ' ', 2)::int >= 2000)
       ORDER BY recall_ms"
echo
echo "a tenant's own HNSW index (hnsw.ef_search = $EF) against exact search, by tenant size:"
q -c "SELECT format('  %s embeddings: exact recall %s ms, plain exact scan %s ms, through its index %s ms (recall@10 %s)',
                    split_part(e.class, ' ', 2), round(e.recall_ms::numeric, 2), round(e.plain_ms::numeric, 2),
                    round(h.recall_ms::numeric, 2), round(h.recall::numeric, 3))
        FROM bench.xratio e JOIN bench.xratio h USING (class)
       WHERE e.phase = 'exact' AND h.phase = 'hnsw' ORDER BY split_part(e.class, ' ', 2)::int"
q -c "SELECT '  an index pays (p50 through it below exact recall) from: ' ||
             coalesce((SELECT min(split_part(e.class, ' ', 2)::int)::text
                         FROM bench.xratio e JOIN bench.xratio h USING (class)
                        WHERE e.phase = 'exact' AND h.phase = 'hnsw' AND h.recall_ms < e.recall_ms),
                      'none of these sizes') || ' embeddings'"
echo
echo "first recall of a new connection (a session's 50 turns, client-side, ms): p50 $(printf '%s\n' $cold | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" \
     "(all: $cold); the second call of the connection: p50 $(printf '%s\n' $warm | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
rm -rf "$work"
