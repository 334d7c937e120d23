#!/usr/bin/env bash
# Benchmark erase_identity at 5 000, 20 000 and 40 000 sessions of one
# identity (a turn answered and a context in each, an audit row naming it
# for each of a tenth of them), beside 100 000 sessions of other identities:
# install what is missing, build and install convctx, run
# test/bench/erase/run.sh in a throwaway cluster (fsync and
# synchronous_commit on) and print the table: the median of interleaved
# rounds and its spread, the ratio of 40 000 to 5 000 against linear (8x)
# and the 2 s target at 40 000, each with PASS or MISS. Timings are
# information only: exits non-zero only when the run fails.
# CONVCTX_BENCH_ROUNDS: interleaved rounds per size (default 5);
# CONVCTX_BENCH_SIZES: the session counts (default "5000 20000 40000").
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
CONVCTX_DURABLE=1 in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-5}" \
        CONVCTX_BENCH_SIZES="${CONVCTX_BENCH_SIZES:-5000 20000 40000}" \
        bash test/bench/erase/run.sh
