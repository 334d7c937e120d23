#!/usr/bin/env bash
# Each C file of src/ includes what it uses and nothing else:
#   - every .c of src/ compiles as it is (else the checks below would
#     prove nothing), and every header of src/ compiles alone (a file of two lines, "postgres.h"
#     then the header), so it includes what it uses itself;
#   - for every project include of a .c or .h of src/ (#include
#     "folder/x.h"), the file no longer compiles with that line removed
#     (a header alone as above); one that still compiles is unused.
# Compiled with the flags of the build (make print-cflags), the warnings
# of a strict build as errors (an undeclared function is then an error
# too), and -fsyntax-only: nothing is written. A header needed only by
# what a macro expands to still breaks the compile of the file that uses
# the macro, so it counts as used. Two compiles at a time
# (CONVCTX_INCLUDES_JOBS). Prints each failure, then
# "includes: N passed, N failed" last.
#
#   scripts/check-includes.sh
set -uo pipefail
cd "$(dirname "$0")/.."

PROJECT_INCLUDE='^#include "(core|context|turns|prompt|lifecycle|browser|transfer|citus|recall)/[^"]*\.h"'
export WARNINGS="-Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers"
export CFLAGS_BUILD
CFLAGS_BUILD=$(make -s --no-print-directory print-cflags with_llvm=no) || {
    echo "FAILED: make print-cflags"; echo "includes: 0 passed, 1 failed"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One check: file f without line n (0: the whole file), compiled; a
# header with "postgres.h" before it. Prints "ok" or "FAILED: ..." on one
# line.
check_one() {
    local f=$1 n=$2 what rc
    # shellcheck disable=SC2086
    {
        case "$f" in *.h) echo '#include "postgres.h"' ;; esac
        if [ "$n" -eq 0 ]; then cat "$f"; else sed "${n}d" "$f"; fi
    } | $CFLAGS_BUILD $WARNINGS -fsyntax-only -iquote "$(dirname "$f")" -x c - >/dev/null 2>&1
    rc=$?
    if [ "$n" -eq 0 ]; then
        if [ "$rc" -eq 0 ]; then echo "ok"; else echo "FAILED: $f does not compile alone"; fi
    else
        what=$(sed -n "${n}p" "$f")
        if [ "$rc" -ne 0 ]; then echo "ok"; else echo "FAILED: $f:$n: unused: $what"; fi
    fi
}
export -f check_one

# The checks, "file line" a line: each file as it is (a header alone),
# then without each of its project includes in turn.
for f in src/*.[ch] src/*/*.[ch]; do
    echo "$f 0"
    grep -nE "$PROJECT_INCLUDE" "$f" | while IFS=: read -r n _; do echo "$f $n"; done
done > "$work/checks"

xargs -P "${CONVCTX_INCLUDES_JOBS:-2}" -n 2 bash -c 'check_one "$@"' _ < "$work/checks" > "$work/results"

grep '^FAILED' "$work/results" | sort
ok=$(grep -c '^ok$' "$work/results")
bad=$(grep -c '^FAILED' "$work/results")
echo "includes: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
