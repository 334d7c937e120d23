#!/usr/bin/env bash
# Command 2: install what is missing, build and install convctx, and run the
# whole test suite (regression, isolation, TAP) against a throwaway cluster,
# then the regression and isolation suites again with convctx built with
# AddressSanitizer and UndefinedBehaviorSanitizer (scripts/asan.sh), then
# convctx's regression and isolation tests on a 3-node Citus cluster
# (scripts/citus.sh: Citus installed, or built from CONVCTX_CITUS_SOURCE;
# without either it says SKIP and why). The recall suite needs pgvector,
# built here from ../shared/pgvector or CONVCTX_PGVECTOR_SOURCE when the
# server has none (without either it says SKIP).
# Exits non-zero on any failure and prints the diffs and logs that say why;
# the last line is the total, "convctx: N passed, N failed".
source "$(dirname "$0")/lib.sh"

ensure_packages test
build_and_install
# the earlier forms of released scripts that the upgrade tests update from
as_root make -C "$STAGE" -s install-upgrade-fixtures with_llvm=no PG_CONFIG="$PG_CONFIG" >/dev/null
# pgvector for the recall suite: built from the tarball beside the tree
# (../shared/pgvector) or named by CONVCTX_PGVECTOR_SOURCE, when the server
# has none. With a source, a build that fails stops the run: recall is
# never skipped silently.
if [ -z "${CONVCTX_PGVECTOR_SOURCE:-}" ] && [ -d "$TOP/../shared/pgvector" ]; then
    CONVCTX_PGVECTOR_SOURCE=$(cd "$TOP/../shared/pgvector" && pwd)
fi
rc=0
ensure_pgvector || rc=$?
if [ "$rc" -ne 0 ] && [ -n "${CONVCTX_PGVECTOR_SOURCE:-}" ]; then
    echo "== pgvector could not be built from $CONVCTX_PGVECTOR_SOURCE"
    echo "convctx: 0 passed, 1 failed"
    exit 1
fi
# From here on a failing part must not stop the next one.
set +e

# Tallies of a part from its own last line "<part>: N passed, N failed".
tally() {
    sed -n 's/^[a-z]*: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$1" | tail -n 1
}

log=$(mktemp /tmp/convctx-test.XXXXXX)
status=0
( in_throwaway_cluster "the test suite" bash scripts/run-suites.sh ) 2>&1 | tee "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
read -r suites_passed suites_failed < <(tally "$log" || true)

bash "$TOP/scripts/asan.sh" 2>&1 | tee "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
read -r asan_passed asan_failed < <(tally "$log" || true)

bash "$TOP/scripts/citus.sh" 2>&1 | tee "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
read -r citus_passed citus_failed < <(tally "$log" || true)
rm -f "$log"

passed=$(( ${suites_passed:-0} + ${asan_passed:-0} + ${citus_passed:-0} ))
failed=$(( ${suites_failed:-0} + ${asan_failed:-0} + ${citus_failed:-0} ))
# A part that died before its summary still fails the run.
[ "$status" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
echo "convctx: $passed passed, $failed failed"
exit $status
