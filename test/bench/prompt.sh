#!/usr/bin/env bash
# Benchmark prompt assembly: conversation_state(session, 10) and
# context_history(session, 5) on a 10-turn and a 500-turn session, side by
# side in one throwaway cluster, for anonymous sessions and for signed-in
# ones (linked to an identity), each pair reported apart. Their cost should
# follow the window, not the history. Timings are information only.
# The signed-in pair doubles the measured calls: a few seconds more.
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
in_throwaway_cluster "the benchmark" \
    psql -X -q -v ON_ERROR_STOP=1 <"$STAGE/test/bench/prompt/bench.sql"
