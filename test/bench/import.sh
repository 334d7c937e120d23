#!/usr/bin/env bash
# Benchmark `convctx import` of an exported tenant into an empty database
# against COPY of the same rows into bare tables with the same indexes,
# measured in the same rounds: install what is missing, build and install
# convctx, run test/bench/import/run.sh in a throwaway cluster (fsync and
# synchronous_commit on) and print the table.
# Information only: exits non-zero only when the run fails.
# CONVCTX_BENCH_ROUNDS: interleaved rounds per size (default 3);
# CONVCTX_BENCH_SIZES: turns (default "100000 1000000"), in sessions of 100.
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
CONVCTX_DURABLE=1 in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-3}" \
        CONVCTX_BENCH_SIZES="${CONVCTX_BENCH_SIZES:-100000 1000000}" \
        bash test/bench/import/run.sh
