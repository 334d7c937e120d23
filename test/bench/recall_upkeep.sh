#!/usr/bin/env bash
# Benchmark the upkeep of recall's tenant indexes (convctx_recall): install
# what is missing, build and install convctx (and pgvector from
# ../shared/pgvector or CONVCTX_PGVECTOR_SOURCE when the server has none),
# run test/bench/recall_upkeep/run.sh in a throwaway cluster (fsync and
# synchronous_commit on) and print the targets with PASS or MISS: while
# rebuild_index rebuilds the index of a tenant of 100,000 embeddings, the
# p99 of other tenants' store_embedding, redact_turn and recall within 2x
# of their p99 without the rebuild, and no call of theirs over 1 s.
# Synthetic random vectors, no model. Timings are information only: exits
# non-zero only when the run fails.
# CONVCTX_BENCH_BIG (default 100000: the big tenant's embeddings),
# CONVCTX_BENCH_DIMS (64), CONVCTX_BENCH_SECONDS (20, per phase),
# CONVCTX_BENCH_RATE (60 calls a second over 4 clients).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
if [ -z "${CONVCTX_PGVECTOR_SOURCE:-}" ] && [ -d "$TOP/../shared/pgvector" ]; then
    CONVCTX_PGVECTOR_SOURCE=$(cd "$TOP/../shared/pgvector" && pwd)
fi
ensure_pgvector || { echo "== pgvector is not installed and could not be built"; exit 1; }
CONVCTX_DURABLE=1 in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_BIG="${CONVCTX_BENCH_BIG:-100000}" CONVCTX_BENCH_DIMS="${CONVCTX_BENCH_DIMS:-64}" \
        CONVCTX_BENCH_SECONDS="${CONVCTX_BENCH_SECONDS:-20}" CONVCTX_BENCH_RATE="${CONVCTX_BENCH_RATE:-60}" \
        bash test/bench/recall_upkeep/run.sh
