#!/usr/bin/env bash
# Benchmark convctx on a real Citus cluster: a coordinator and two workers
# on loopback, run from a private PostgreSQL copy with Citus and convctx
# (scripts/citus-lib.sh; nothing goes into the system PostgreSQL). As role
# bench, bound to one tenant, so that Citus runs each per-session call on
# the worker holding the session, pgbench runs the turn lifecycle
# (start_turn, finalize_turn, recent_turns, each an autocommit statement)
# over 1000 sessions, in interleaved rounds, against three databases on the
# same nodes: convctx on the coordinator alone (convctx.distribute() not
# called), and distributed over one worker and over two (the coordinator
# holding no shards). Prints, as medians of the rounds with their spread:
#   - 8 clients: tps distributed (2 workers) against single node, and the ratio;
#   - 1 client: latency per transaction and per statement, and the difference
#     (what delegating each call to a worker adds);
#   - 8 clients: tps with 1 worker and with 2, and the ratio.
# All nodes share this machine's cores, so the figures show overhead, not
# scale. Information only: exits non-zero only when the run fails (an
# error, a pgbench failure, a crash in a node's log).
#
# Citus comes from the system or from CONVCTX_CITUS_SOURCE, cached in
# CONVCTX_CITUS_CACHE (see scripts/citus-lib.sh); without either the script
# prints "citus bench: SKIP (why)" and exits 0.
# Commits are durable (fsync and synchronous_commit on), as users run it;
# CONVCTX_BENCH_DURABLE=0 turns fsync off for a CPU-bound view.
# CONVCTX_BENCH_SECONDS: length of each run (default 20);
# CONVCTX_BENCH_ROUNDS: interleaved rounds, the median reported (default 3).
# Each round makes five runs: ROUNDS * 5 * (SECONDS + 1) s, plus half a
# minute to set up (6 minutes at the defaults, Citus from the cache).
# CONVCTX_CITUS_KEEP=1 leaves the nodes running and says how to reach them.
exec env CONVCTX_BENCH_SECONDS="${CONVCTX_BENCH_SECONDS:-20}" \
    CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-3}" \
    CONVCTX_BENCH_DURABLE="${CONVCTX_BENCH_DURABLE:-1}" \
    bash "$(dirname "$0")/citus/run.sh"
