#!/usr/bin/env bash
# Benchmark retention: purge_all over 10^6 expired anonymous turns in 10^5
# sessions (rows per second), and the turn lifecycle's throughput with 8
# clients while purge_all runs against the same without it, side by side in
# one throwaway cluster. Timings are information only.
# CONVCTX_BENCH_SECONDS sets the length of each lifecycle run (default 20).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_SECONDS="${CONVCTX_BENCH_SECONDS:-20}" bash test/bench/lifecycle/run.sh
