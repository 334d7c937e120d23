#!/usr/bin/env bash
# Benchmark the turn lifecycle (start_turn, finalize_turn, recent_turns)
# against the same statements in plain SQL, and recent_turns latency at
# 10^3 and 10^6 turns, each on anonymous and on signed-in sessions (linked
# to an identity, turns started with start_turn's identity_id argument; the
# floor's rows carry the identity too): install what is missing, build and
# install convctx, run test/bench/turns/run.sh in a throwaway cluster and
# print the table.
# Timings are information only: exits non-zero only when the run fails.
# Commits are durable (fsync and synchronous_commit on), as users run it;
# CONVCTX_BENCH_DURABLE=0 turns fsync off for a CPU-bound view.
# The signed-in cells double the lifecycle cells (8, not 4), the latency
# runs and the state written beforehand; to keep the run at about 9
# minutes each run is shorter than when only anonymous sessions were
# measured: lifecycle runs of 6 s instead of 15 (3 rounds per cell still),
# and pgbench latency runs of 5 s per kind of session instead of 10.
# CONVCTX_BENCH_SECONDS: length of each lifecycle run (default 6);
# CONVCTX_BENCH_ROUNDS: interleaved rounds per cell, the median reported
# (default 3; recent_turns latency takes at least 5);
# CONVCTX_BENCH_LATENCY_SECONDS: each pgbench recent_turns run, one on the
# anonymous and one on the signed-in sessions per round (default 5);
# CONVCTX_BENCH_FLOOR_FILLFACTOR: fillfactor of the floor's table (default 100,
# a bare table; 70 gives it convctx.turn's).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
CONVCTX_DURABLE=${CONVCTX_BENCH_DURABLE:-1} in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_SECONDS="${CONVCTX_BENCH_SECONDS:-6}" \
        CONVCTX_BENCH_LATENCY_SECONDS="${CONVCTX_BENCH_LATENCY_SECONDS:-5}" \
        CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-3}" \
        CONVCTX_BENCH_FLOOR_FILLFACTOR="${CONVCTX_BENCH_FLOOR_FILLFACTOR:-100}" \
        bash test/bench/turns/run.sh
