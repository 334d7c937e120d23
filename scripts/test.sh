#!/usr/bin/env bash
# Command 2: install what is missing, build and install convctx, and run the
# whole test suite (regression, isolation, TAP) against a throwaway cluster.
# Exits non-zero on any failure and prints the diffs and logs that say why.
source "$(dirname "$0")/lib.sh"

ensure_packages
build_and_install
in_throwaway_cluster "the test suite" bash scripts/run-suites.sh
