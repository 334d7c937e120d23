#!/usr/bin/env bash
# Benchmark the calls that must not wait for ANALYZE: redact_turn of one
# turn of a session of 5 000 turns (with 4 761 embeddings when pgvector is
# installed) on tables never analyzed against the same tables analyzed
# (within 5x), and erase_identity of identities of 2 000 and 8 000
# sessions on tables never analyzed (linear: at most 6x). Install what is
# missing, build and install convctx, run test/bench/unanalyzed/run.sh in a
# throwaway cluster (fsync and synchronous_commit on) and print the table:
# medians of interleaved rounds and their spread, each target with PASS or
# MISS. Timings are information only: exits non-zero only when the run fails.
# CONVCTX_BENCH_ROUNDS: interleaved rounds (default 5);
# CONVCTX_BENCH_TURNS: turns of the long session (default 5000);
# CONVCTX_BENCH_SIZES: the identities' session counts (default "2000 8000");
# CONVCTX_BENCH_DIMS: the embeddings' dimensions (default 32).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
CONVCTX_DURABLE=1 in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-5}" \
        CONVCTX_BENCH_TURNS="${CONVCTX_BENCH_TURNS:-5000}" \
        CONVCTX_BENCH_SIZES="${CONVCTX_BENCH_SIZES:-2000 8000}" \
        CONVCTX_BENCH_DIMS="${CONVCTX_BENCH_DIMS:-32}" \
        bash test/bench/unanalyzed/run.sh
