#!/usr/bin/env bash
# Command 1: install what is missing, build and install convctx, start a
# throwaway PostgreSQL 15 cluster and walk through a short conversation.
source "$(dirname "$0")/lib.sh"

ensure_packages
build_and_install
in_throwaway_cluster "the demo" \
    psql -X -q -v ON_ERROR_STOP=1 -P pager=off -d postgres -f scripts/demo.sql
