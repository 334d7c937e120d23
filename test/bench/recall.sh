#!/usr/bin/env bash
# Benchmark semantic recall (convctx_recall) against a bare pgvector table:
# install what is missing, build and install convctx (and pgvector from
# ../shared/pgvector or CONVCTX_PGVECTOR_SOURCE when the server has none),
# run test/bench/recall/run.sh in a throwaway cluster (fsync and
# synchronous_commit on) and print the targets with PASS or MISS:
# recall@10 against exact search >= 0.95 for large and small tenants, p50
# latency within 1.5x of the same HNSW query on the bare table (tenant
# column, same index settings, hnsw.iterative_scan = strict_order), storing
# an embedding within 1.2x of an insert into the bare table, no turn of
# an erased identity returned by any recall after erase_identity, and the
# exact path (a session, an identity, tenants of 2,000 to 10,000 embeddings
# without an index of their own) within 1.2x of a plain exact scan of the
# same embeddings with the same results; it also prints the same tenants
# through an index of their own (the size from which one pays) and the
# first recall of a new connection. Synthetic clustered vectors, no model
# (no GloVe-like vectors come with a package the project can install). Timings are information only: exits non-zero
# only when the run fails.
# CONVCTX_BENCH_TURNS (default 1000000), CONVCTX_BENCH_DIMS (384),
# CONVCTX_BENCH_ROUNDS (3), CONVCTX_BENCH_SECONDS (10, per pgbench run),
# CONVCTX_BENCH_MIN_EMBEDDINGS (10000: index_tenants' threshold),
# CONVCTX_BENCH_EF_SEARCH (100: hnsw.ef_search of both queries),
# CONVCTX_BENCH_EXACT_SIZES (250,500,1000,2000,5000,8000,10000: the tenants
# of the exact path).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
if [ -z "${CONVCTX_PGVECTOR_SOURCE:-}" ] && [ -d "$TOP/../shared/pgvector" ]; then
    CONVCTX_PGVECTOR_SOURCE=$(cd "$TOP/../shared/pgvector" && pwd)
fi
ensure_pgvector || { echo "== pgvector is not installed and could not be built"; exit 1; }
CONVCTX_DURABLE=1 in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_TURNS="${CONVCTX_BENCH_TURNS:-1000000}" CONVCTX_BENCH_DIMS="${CONVCTX_BENCH_DIMS:-384}" \
        CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-3}" CONVCTX_BENCH_SECONDS="${CONVCTX_BENCH_SECONDS:-10}" \
        CONVCTX_BENCH_MIN_EMBEDDINGS="${CONVCTX_BENCH_MIN_EMBEDDINGS:-10000}" \
        CONVCTX_BENCH_EF_SEARCH="${CONVCTX_BENCH_EF_SEARCH:-100}" \
        CONVCTX_BENCH_EXACT_SIZES="${CONVCTX_BENCH_EXACT_SIZES:-250,500,1000,2000,5000,8000,10000}" \
        bash test/bench/recall/run.sh
