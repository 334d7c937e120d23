#!/usr/bin/env bash
# Benchmark convctx.context_merge (C) against the same merge in plain SQL:
# install what is missing, build and install convctx, run
# test/bench/context_merge/bench.sql in a throwaway cluster and print the table.
# Timings are information only: exits non-zero only when the C and SQL
# results differ (or the run itself fails).
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages
build_and_install
# The script goes in on stdin so that notices are not prefixed with its path.
in_throwaway_cluster "the benchmark" \
    psql -X -q -v ON_ERROR_STOP=1 <"$STAGE/test/bench/context_merge/bench.sql"
