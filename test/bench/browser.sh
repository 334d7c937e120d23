#!/usr/bin/env bash
# Benchmark the conversation browser: list_conversations (first and 500th
# page) and conversation_turns (first page and the page at the 10,000th
# turn) against the same pages at the smallest size and against
# hand-written keyset queries on bare tables with the best index for them:
# install what is missing, build and install convctx, run
# test/bench/browser/run.sh in a throwaway cluster (fsync and
# synchronous_commit on) and print each target with PASS or MISS.
# About 9 minutes at the default size, 6 of them loading 10^7 turns.
# Information only: exits non-zero only when the run fails (or when the
# bare list does not return the rows list_conversations does).
# CONVCTX_BENCH_ROUNDS: interleaved rounds (default 3);
# CONVCTX_BENCH_TURNS: turns of the large tenant (default 10000000);
# CONVCTX_BENCH_SECONDS: seconds of each measurement (default 5).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
CONVCTX_DURABLE=1 in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-3}" \
        CONVCTX_BENCH_TURNS="${CONVCTX_BENCH_TURNS:-10000000}" \
        CONVCTX_BENCH_SECONDS="${CONVCTX_BENCH_SECONDS:-5}" \
        bash test/bench/browser/run.sh
