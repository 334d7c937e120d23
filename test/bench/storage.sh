#!/usr/bin/env bash
# Benchmark storage per turn: 10^6 turns (200-byte questions, 1,000-byte
# answers) arriving as live traffic on 1,000 sessions, written through
# convctx and, beside it, into a bare table with the same columns and
# indexes (the floor of test/bench/turns.sh); half the sessions are signed
# in (turns started with start_turn's identity_id, which the floor's rows
# carry too), half anonymous; after VACUUM, bytes per stored turn of every
# table and index of each side, and the ratio against its target, with the
# turns and mean row size of each kind of session. Install what is
# missing, build and install convctx, run test/bench/storage/run.sh in a
# throwaway cluster. Sizes do not depend on fsync, so the load runs with it
# off. Exits non-zero only when the run fails.
# CONVCTX_BENCH_TURNS: turns per side (default 1000000);
# CONVCTX_BENCH_SESSIONS: sessions they are spread over (default 1000);
# CONVCTX_BENCH_CLIENTS: pgbench clients writing them (default 4);
# CONVCTX_BENCH_TURN_FILLFACTOR: a fill factor to give convctx.turn before
# the load, to compare (default: the one the extension sets).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
CONVCTX_DURABLE=0 in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_TURNS="${CONVCTX_BENCH_TURNS:-1000000}" \
        CONVCTX_BENCH_SESSIONS="${CONVCTX_BENCH_SESSIONS:-1000}" \
        CONVCTX_BENCH_CLIENTS="${CONVCTX_BENCH_CLIENTS:-4}" \
        CONVCTX_BENCH_TURN_FILLFACTOR="${CONVCTX_BENCH_TURN_FILLFACTOR:-}" \
        bash test/bench/storage/run.sh
