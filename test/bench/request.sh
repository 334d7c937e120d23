#!/usr/bin/env bash
# Benchmark the chat request path: one request, from the question to the
# stored answer, three ways, and the WAL each way writes per turn.
#   two-call   convctx.begin_turn (starts the turn, returns the history),
#              then convctx.finalize_turn, each its own transaction, both
#              naming the tenant;
#   floor      the best hand-written equivalent on a bare table with the
#              columns and indexes of convctx.turn: one statement inserts
#              the question and returns the last 10 finalized Q/A pairs,
#              one UPDATE stores the answer;
#   three-call the README's protocol of "Using convctx from an app":
#              BEGIN; use_tenant; start_turn; recent_turns; COMMIT, then
#              BEGIN; use_tenant; finalize_turn; COMMIT.
# Install what is missing, build and install convctx, run
# test/bench/request/run.sh in a throwaway cluster and print the tables.
# Timings are information only: exits non-zero only when the run fails.
# Commits are durable (fsync and synchronous_commit on), as users run it;
# CONVCTX_BENCH_DURABLE=0 turns fsync off for a CPU-bound view.
# CONVCTX_BENCH_SECONDS: length of each throughput run (default 15);
# CONVCTX_BENCH_ROUNDS: interleaved rounds per cell and WAL state, the
# median reported (default 3);
# CONVCTX_BENCH_WAL_SECONDS: length of each WAL run (default 8);
# CONVCTX_BENCH_WAL_CLIENTS: pgbench clients of the WAL runs (default 4);
# CONVCTX_BENCH_SIDES: the sides to run (default "two_call floor three_call");
# CONVCTX_BENCH_FLOOR_FILLFACTOR: fillfactor of the floor's table (default 100,
# a bare table; 70 gives it convctx.turn's).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
CONVCTX_DURABLE=${CONVCTX_BENCH_DURABLE:-1} in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_SECONDS="${CONVCTX_BENCH_SECONDS:-15}" \
        CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-3}" \
        CONVCTX_BENCH_WAL_SECONDS="${CONVCTX_BENCH_WAL_SECONDS:-8}" \
        CONVCTX_BENCH_WAL_CLIENTS="${CONVCTX_BENCH_WAL_CLIENTS:-4}" \
        CONVCTX_BENCH_SIDES="${CONVCTX_BENCH_SIDES:-two_call floor three_call}" \
        CONVCTX_BENCH_FLOOR_FILLFACTOR="${CONVCTX_BENCH_FLOOR_FILLFACTOR:-100}" \
        bash test/bench/request/run.sh
