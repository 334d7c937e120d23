#!/usr/bin/env bash
# Benchmark retention: purge_all alone over 10^6 expired anonymous turns in
# 10^5 sessions (turns per second, no pause), and the turn lifecycle's
# throughput with 8 clients, with such a backlog in place, alone and while
# purge_all works through it at the default convctx.purge_pause and with
# none, in interleaved rounds in one throwaway cluster. As many idle
# signed-in sessions lie beside the backlog (they never expire, and the
# purge must leave them), and the lifecycle's clients run anonymous and
# signed-in sessions half and half, each kind's throughput reported apart
# (the same runs: the run time is unchanged but for loading the idle
# sessions once). Commits are durable
# (fsync and synchronous_commit on); CONVCTX_BENCH_DURABLE=0 turns fsync
# off. Prints each target with PASS or MISS; timings are information only.
# CONVCTX_BENCH_SECONDS: length of each lifecycle run (default 20);
# CONVCTX_BENCH_ROUNDS: rounds (default 3).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
CONVCTX_DURABLE=${CONVCTX_BENCH_DURABLE:-1} in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_SECONDS="${CONVCTX_BENCH_SECONDS:-20}" \
        CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-3}" \
        bash test/bench/lifecycle/run.sh
