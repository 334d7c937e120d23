#!/usr/bin/env bash
# Benchmark the prompt reads (recent_turns, conversation_state,
# context_history, is_followup) of a session that goes on after
# redact_session, with 0, 10^3, 10^4 and 10^5 tombstones below its live
# turns, against the same reads of a fresh session measured in the same
# rounds, for signed-in sessions (linked to an identity) and for anonymous
# ones (uncapped here), each against the fresh session of its kind; the
# second kind adds only seconds (the build of its sessions; the reads are
# short): install what is missing, build and install convctx, run
# test/bench/tombstones/run.sh in a throwaway cluster (fsync and
# synchronous_commit on) and print the table.
# Timings are information only: exits non-zero only when the run fails.
# CONVCTX_BENCH_ROUNDS: interleaved rounds, the median kept (default 7);
# CONVCTX_BENCH_CALLS: calls of each read per session and round (default 50);
# CONVCTX_BENCH_LIVE: live turns after the tombstones (default 3, fewer than
# the windows read, the case that walked every tombstone).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
CONVCTX_DURABLE=1 in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-7}" \
        CONVCTX_BENCH_CALLS="${CONVCTX_BENCH_CALLS:-50}" \
        CONVCTX_BENCH_LIVE="${CONVCTX_BENCH_LIVE:-3}" \
        bash test/bench/tombstones/run.sh
