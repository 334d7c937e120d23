#!/usr/bin/env bash
# Benchmark prompt assembly: conversation_state(session, 10) and
# context_history(session, 5) on a 10-turn and a 500-turn session, side by
# side in one throwaway cluster. Their cost should follow the window, not
# the history. Timings are information only.
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
cd "$STAGE"
if as_test_user pg_virtualenv -v 15 psql -X -q -v ON_ERROR_STOP=1 <test/bench/prompt.sql; then
    cd / && rm -rf "$STAGE"
else
    echo "== benchmark failed; the build is kept in $STAGE"
    exit 1
fi
