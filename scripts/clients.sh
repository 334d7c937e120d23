#!/usr/bin/env bash
# The client suites: convctx through node-postgres (test/clients/node, node's
# test runner) and psycopg 3 (test/clients/python, unittest), each running the
# request handler of examples/. Runs against the cluster in PGHOST/PGPORT as
# PGUSER, a superuser with convctx installed (scripts/run-suites.sh calls it
# inside the throwaway cluster). Installs the npm packages of
# test/clients/node/package-lock.json when they are missing. Last line:
# "clients: N passed, N failed".
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=/usr/bin/python3     # Debian's, which has python3-psycopg
passed=0
failed=0
status=0
log=$(mktemp /tmp/convctx-clients.XXXXXX)

count() {   # count PASS_REGEX FAIL_REGEX RC: add the cases of $log to the totals
    local ok bad
    ok=$(grep -cE "$1" "$log" || true)
    bad=$(grep -cE "$2" "$log" || true)
    # a runner that fails without a failed case (a crash, a syntax error) fails too
    if [ "$3" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
    [ "$3" -ne 0 ] && status=1
    passed=$((passed + ok))
    failed=$((failed + bad))
}

echo "== node-postgres ($(node --version 2>/dev/null || echo 'node missing'))"
rc=0
if [ ! -d "$TOP/test/clients/node/node_modules/pg" ]; then
    (cd "$TOP/test/clients/node" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] && cat "$log"
fi
if [ "$rc" -eq 0 ]; then
    (cd "$TOP/test/clients/node" && node --test) 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
fi
count '^ok [0-9]+ ' '^not ok [0-9]+ ' "$rc"

echo "== psycopg ($("$PYTHON" -c 'import psycopg; print(psycopg.__version__)' 2>&1))"
(cd "$TOP" && "$PYTHON" -m unittest discover -s test/clients/python -v) 2>&1 | tee "$log"
count '\.\.\. ok$' '\.\.\. (FAIL|ERROR)$' "${PIPESTATUS[0]}"

rm -f "$log"
echo "clients: $passed passed, $failed failed"
exit $status
