#!/usr/bin/env bash
# Benchmark the cost of one retention pass (convctx.purge) at 10^4, 10^5 and
# 10^6 sessions with the same expired backlog, for every tenant and for a
# tiny tenant's bound administrator, against the 0.3.0 statements that chose
# expired sessions and contexts: install what is missing, build and install
# convctx, run test/bench/purge_cost/run.sh in a throwaway cluster (fsync and
# synchronous_commit on) and print the table. Information only: exits
# non-zero only when the run fails.
# Then turn throughput and the share of HOT updates with the activity bins,
# without them (0.3.0) and with an index on the exact times.
# CONVCTX_BENCH_ROUNDS: interleaved rounds per size (default 7);
# CONVCTX_BENCH_SIZES: the session counts (default "10000 100000 1000000");
# CONVCTX_BENCH_HOT_ROUNDS, CONVCTX_BENCH_HOT_SECONDS: the turn runs (5, 8).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
CONVCTX_DURABLE=1 in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-7}" \
        CONVCTX_BENCH_SIZES="${CONVCTX_BENCH_SIZES:-10000 100000 1000000}" \
        CONVCTX_BENCH_HOT_ROUNDS="${CONVCTX_BENCH_HOT_ROUNDS:-5}" \
        CONVCTX_BENCH_HOT_SECONDS="${CONVCTX_BENCH_HOT_SECONDS:-8}" \
        bash test/bench/purge_cost/run.sh
