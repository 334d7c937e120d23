#!/usr/bin/env bash
# Runs every SQL example of the documentation (README.md, CONTRIBUTING.md,
# docs/*.md, or the files given) against the cluster in PGHOST/PGPORT as
# PGUSER, a superuser: per file, in a new database, in order, in one psql
# session with ON_ERROR_STOP, and compares the output wherever the file shows
# it. Prints "test FILE ... ok" or "... FAILED" per file, then
# "docs: N passed, N failed". Conventions: CONTRIBUTING.md.
set -uo pipefail
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PSQL="$("$PG_CONFIG" --bindir)/psql"
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
[ $# -gt 0 ] || set -- README.md CONTRIBUTING.md docs/*.md

# Examples marked "-- needs pgvector" run only where pgvector is installed.
if [ ! -f "$("$PG_CONFIG" --sharedir)/extension/vector.control" ]; then
    export CONVCTX_DOCS_NO_PGVECTOR=1
    echo "== docs: pgvector is not installed; the examples that need it are left out"
fi
work=$(mktemp -d /tmp/convctx-docs.XXXXXX)
passed=0
failed=0

admin() { PGOPTIONS="-c client_min_messages=warning" "$PSQL" -X -q -At -v ON_ERROR_STOP=1 -d postgres "$@"; }

for file in "$@"; do
    [ -f "$file" ] || continue
    base=$(basename "$file" .md | tr A-Z a-z | tr -c "a-z0-9\n" _)
    db="convctx_doc_$base"
    admin -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
    # Roles are cluster-wide: those an example creates are dropped afterwards
    # (the extension's own roles stay, other databases use them).
    admin -c "SELECT rolname FROM pg_roles ORDER BY 1" >"$work/roles.before"
    ok=1
    if ! perl scripts/doc-examples.pl script "$file" >"$work/script.sql"; then
        ok=0
    else
        "$PSQL" -X -q -v ON_ERROR_STOP=1 -P pager=off -d "$db" \
            -f "$work/script.sql" >"$work/out" 2>&1
        rc=$?
        if [ "$rc" -ne 0 ]; then
            ok=0
            echo "$file: psql stopped (exit $rc); its output:"
            sed 's/^/    /' "$work/out" | tail -n 40
        fi
        perl scripts/doc-examples.pl check "$file" "$work/out" || ok=0
    fi
    admin -c "DROP DATABASE IF EXISTS $db" >/dev/null
    admin -c "SELECT rolname FROM pg_roles ORDER BY 1" >"$work/roles.after"
    comm -13 "$work/roles.before" "$work/roles.after" | grep -v '^convctx_' |
        while read -r role; do
            admin -c "DROP ROLE \"$role\"" >/dev/null || true
        done
    if [ "$ok" -eq 1 ]; then
        echo "test $file ... ok"
        passed=$((passed + 1))
    else
        echo "test $file ... FAILED"
        failed=$((failed + 1))
    fi
done
rm -rf "$work"
echo "docs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
