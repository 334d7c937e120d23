#!/usr/bin/env bash
# Benchmark convctx.context_merge (C) against the same merge in plain SQL:
# install what is missing, build and install convctx, run
# test/bench/context_merge.sql in a throwaway cluster and print the table.
# Timings are information only: exits non-zero only when the C and SQL
# results differ (or the run itself fails).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
cd "$STAGE"
# The script goes in on stdin so that notices are not prefixed with its path.
if as_test_user pg_virtualenv -v 15 psql -X -q -v ON_ERROR_STOP=1 <test/bench/context_merge.sql; then
    cd / && rm -rf "$STAGE"
else
    echo "== benchmark failed; the build is kept in $STAGE"
    exit 1
fi
