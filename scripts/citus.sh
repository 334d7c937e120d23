#!/usr/bin/env bash
# Regression (and optionally isolation) tests of convctx on a real Citus
# cluster: a coordinator and two workers on loopback, convctx's tables
# distributed by convctx.distribute().
#
# As in scripts/asan.sh, nothing goes into the system PostgreSQL, which other
# runs use at the same time: /usr/lib/postgresql/15 and /usr/share/postgresql/15
# are copied to a private directory (PostgreSQL finds its share and library
# directories relative to its binaries), Citus and convctx are installed into
# the copy, and three clusters run from it as the test user (TCP on 127.0.0.1,
# Unix sockets in the private directory).
#
# Citus is not in Debian's archive. When the system PostgreSQL has it, the
# copy has it too. Otherwise it is built from the source tarball named by
# CONVCTX_CITUS_SOURCE: a citus-*.tar.gz, or a directory with one
# citus-*.tar.gz and optionally *.patch files (applied with patch -p1 in name
# order). The build takes over a minute on two cores, so what it installs
# is kept as a tarball in CONVCTX_CITUS_CACHE (default /var/cache/convctx-citus),
# named after the tarball's and patches' sha256 and the PostgreSQL version,
# and unpacked by later runs instead of building again. Without Citus and
# without a source the script says "citus: SKIP (why)" and exits 0: a run
# that tested nothing must not read as a pass.
#
# CONVCTX_CITUS_TESTS: the regression tests (sql/*.sql, and those of Citus
# only, test/citus/sql/*.sql), default below, run in database
# contrib_regression. By default citus_recall (semantic recall refuses a
# distributed convctx) runs too where pgvector is installed.
# CONVCTX_CITUS_ISOLATION: the isolation specs (test/specs/*.spec), default
# below, run in a database of their own, isolation_regression, set up the same way.
# Expected output comes from test/citus/expected/<test>.out where there is one,
# else from expected/.
# CONVCTX_CITUS_NO_DISTRIBUTE=1 skips convctx.distribute() (to debug the
# harness; the tests then run against tables local to the coordinator).
# CONVCTX_CITUS_KEEP=1 keeps the private directory and leaves the nodes running,
# and prints how to connect to them and how to stop them.
#
# Fails when a test fails, when a node's log shows a crashed server process,
# or when a step stops the script early; then prints the diffs and the end of
# each node's log. Ends with a line "citus: N passed, N failed" (the crash
# check and an early stop each count as one more failure).
source "$(dirname "$0")/lib.sh"
source "$TOP/scripts/citus-lib.sh"

# The tests that run on Citus; docs/citus.md says why the others do not.
CITUS_TESTS=${CONVCTX_CITUS_TESTS-turns context_store lifecycle prompt security distributed
    erasure tenant_scope limits prompt_injection context_merge dump}
CITUS_ISOLATION=${CONVCTX_CITUS_ISOLATION-audit_retention_erase context_add_delegated_race context_add_race context_erase_race
    context_purge_race context_request_race erase_erase_race erase_link_race finalize_turn_race
    link_session_race list_link_race purge_start_race redact_finalize_race retrieval_redact_race
    session_cap_race start_turn_race begin_turn_race summary_finalize_race summary_redact_race tombstone_read_race}
# The databases make installcheck uses: the isolation specs expect an empty
# store, not what the regression tests leave behind.
DB=contrib_regression
ISO_DB=isolation_regression

passed=0
failed=0
status=0
done_=0
T_START=$SECONDS

# Stop the nodes and remove the private directory, or with
# CONVCTX_CITUS_KEEP=1 leave both and say how to use them. Also runs when the
# script stops early (a build error, a node that does not start, ^C); it then
# ends with the summary line.
finish() {
    local i running=()
    if [ -z "$WORK" ] || [ ! -d "$WORK" ]; then WORK=; return 0; fi
    for i in 0 1 2; do
        if [ -f "$WORK/n$i/postmaster.pid" ]; then running+=("$i"); fi
    done
    cd /
    if [ "${CONVCTX_CITUS_KEEP:-0}" = 1 ]; then
        echo "== kept $WORK"
        local run=
        if [ "$(id -un)" != "$TEST_USER" ]; then run="runuser -u $TEST_USER -- "; fi
        if [ ${#running[@]} -gt 0 ]; then
            for i in "${running[@]}"; do
                echo "== node $i running: port ${PORTS[$i]}, data $WORK/n$i, log $WORK/n$i.log"
            done
            echo "== connect: $PGBIN/psql -h 127.0.0.1 -p ${PORTS[0]} -U $TEST_USER $DB (or $ISO_DB)"
            echo "== stop and remove: for n in 0 1 2; do ${run}$PGBIN/pg_ctl -D $WORK/n\$n -m immediate stop; done; rm -rf $WORK"
        fi
    else
        for i in "${running[@]}"; do
            as_test_user "$PGBIN/pg_ctl" -D "$WORK/n$i" -m immediate -w stop >/dev/null 2>&1 || true
        done
        rm -rf "$WORK"
    fi
    WORK=
}
on_exit() {
    local rc=$? i
    [ "$done_" = 1 ] && exit "$rc"
    echo "== citus.sh stopped early (exit status $rc)${failed_command:+ at: $failed_command}"
    if [ -n "$BUILD_LOG" ] && [ -s "$BUILD_LOG" ]; then
        echo "== ${BUILD_LOG#"$WORK/"} (last 60 lines)"
        tail -n 60 "$BUILD_LOG"
    fi
    for i in 0 1 2; do
        if [ -n "$WORK" ] && [ -s "$WORK/n$i.log" ]; then
            echo "== node $i log (last 40 lines)"
            tail -n 40 "$WORK/n$i.log"
        fi
    done
    finish
    echo "== elapsed: $((SECONDS - T_START)) s"
    echo "citus: $passed passed, $((failed + 1)) failed"
    [ "$rc" -ne 0 ] && exit "$rc"
    exit 1
}
skip() {
    done_=1
    echo "citus: SKIP ($1)"
    exit 0
}
# The failed command, and with errtrace (set -E) also one inside a function:
# then with the calls that led to it (most of them go through as_test_user).
on_err() {
    local i
    failed_command="line ${BASH_LINENO[0]}: $1"
    for ((i = 1; i < ${#FUNCNAME[@]} - 1; i++)); do
        failed_command+=" (in ${FUNCNAME[i]}, called from line ${BASH_LINENO[i]})"
    done
}
failed_command=
set -E
trap 'on_err "$BASH_COMMAND"' ERR
trap on_exit EXIT
trap 'failed_command="a signal"; exit 130' INT TERM

# Where Citus comes from, decided before anything is installed or copied, so
# that a skip costs nothing; then the private copy, Citus and convctx in it
# (scripts/citus-lib.sh).
citus_find_source || skip "$CITUS_SKIP"
ensure_packages
citus_private_copy /tmp/convctx-citus
citus_install
citus_build_convctx
if [ -z "${CONVCTX_CITUS_TESTS+set}" ]; then
    if [ -f "$SHARE/extension/vector.control" ]; then
        CITUS_TESTS+=" citus_recall"
    else
        echo "== pgvector is not installed: citus_recall does not run"
    fi
fi

# --- the cluster -------------------------------------------------------------
citus_pick_ports 3
echo "== starting the coordinator (port ${PORTS[0]}) and two workers (${PORTS[1]}, ${PORTS[2]})"
citus_start_nodes ""

# setup_db NAME: the database on every node, with Citus; Citus's node list
# is per database, so the coordinator then learns itself and the workers in
# it. convctx is created on the coordinator only: Citus propagates the
# extension (and roles) to the workers.
setup_db() {
    local db=$1 n out
    echo "== database $db"
    for n in 0 1 2; do citus_node_db "$n" "$db"; done
    citus_add_nodes "$db" 1 2
    echo "== nodes: $(node_sql 0 -d "$db" -c "SELECT string_agg(nodename || ':' || nodeport || ' ' || noderole ||
        CASE WHEN groupid = 0 THEN ' (coordinator)' ELSE '' END, ', ' ORDER BY nodeport) FROM pg_dist_node")"
    node_sql 0 -d "$db" -c "CREATE EXTENSION convctx"
    if [ "${CONVCTX_CITUS_NO_DISTRIBUTE:-0}" = 1 ]; then
        echo "== CONVCTX_CITUS_NO_DISTRIBUTE=1: convctx.distribute() not called; convctx's tables stay on the coordinator"
    elif ! out=$(node_sql 0 -d "$db" -c "SELECT convctx.distribute()" 2>&1); then
        echo "== SELECT convctx.distribute() failed in $db:"
        echo "$out"
        exit 1
    else
        echo "== convctx.distribute(): $out"
    fi
    # isolationtester asks pg_isolation_test_session_is_blocked() whether a
    # session waits for another; on Citus a session may wait on a lock held
    # on a worker, which only Citus's own version of the function sees.
    if [ "$db" = "$ISO_DB" ]; then
        # (Citus's own isolation tests swap the two the same way.)
        node_sql 0 -d "$db" \
            -c "ALTER FUNCTION pg_catalog.pg_isolation_test_session_is_blocked(integer, integer[])
                    RENAME TO old_pg_isolation_test_session_is_blocked" \
            -c "ALTER FUNCTION pg_catalog.citus_isolation_test_session_is_blocked(integer, integer[])
                    RENAME TO pg_isolation_test_session_is_blocked"
    fi
}
read -ra tests <<<"${CITUS_TESTS//$'\n'/ }"
read -ra specs <<<"${CITUS_ISOLATION//$'\n'/ }"
if [ ${#tests[@]} -gt 0 ]; then setup_db "$DB"; fi
if [ ${#specs[@]} -gt 0 ]; then setup_db "$ISO_DB"; fi

# --- the tests ---------------------------------------------------------------
# pg_regress of PostgreSQL 15 has no --expecteddir: it reads
# <inputdir>/sql and <inputdir>/expected, so the input directory is made up:
# the sql/ of the tree and test/citus/sql/, and expected/ with
# test/citus/expected/ laid over it.
# A test with Citus output loses the alternative outputs (<test>_N.out) of
# expected/ too.
INPUT=$WORK/regress-input
as_test_user mkdir -p "$INPUT/expected" "$WORK/regress" "$WORK/isolation"
as_test_user mkdir -p "$INPUT/sql"
for f in "$SRC"/sql/*.sql "$SRC"/test/citus/sql/*.sql; do
    if [ -f "$f" ]; then as_test_user ln -s "$f" "$INPUT/sql/"; fi
done
as_test_user cp "$SRC"/expected/*.out "$INPUT/expected/"
if [ -d "$SRC/test/citus/expected" ]; then
    for f in "$SRC"/test/citus/expected/*.out; do
        [ -f "$f" ] || continue
        t=$(basename "$f" .out); t=${t%_[0-9]}
        rm -f "$INPUT/expected/$t.out" "$INPUT/expected/$t"_[0-9].out
    done
    for f in "$SRC"/test/citus/expected/*.out; do
        if [ -f "$f" ]; then as_test_user cp "$f" "$INPUT/expected/"; fi
    done
fi

# Counted as scripts/run-suites.sh does: one per "... ok" or "... FAILED", and
# a run that fails without a failed test (a missing file) as one failure.
run_suite() {
    local name=$1; shift
    local log=$WORK/$name.log rc=0 ok bad
    echo "== $name"
    as_test_user timeout 1200 "$@" 2>&1 | tee "$log" || rc=$?
    ok=$(grep -cE '\.\.\. ok' "$log" || true)
    bad=$(grep -cE '\.\.\. FAILED' "$log" || true)
    if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
    passed=$((passed + ok))
    failed=$((failed + bad))
    [ "$rc" -ne 0 ] && status=1
    return 0
}
# From the top of the tree, as make installcheck runs them: tests include
# files by paths relative to it (\i test/helpers.sql).
cd "$SRC"
CONN_OPTS=(--use-existing --host=127.0.0.1 --port="${PORTS[0]}" --user="$TEST_USER" --bindir="$PGBIN")
T_TESTS=$SECONDS
if [ ${#tests[@]} -gt 0 ]; then
    run_suite regression "$PGROOT/lib/pgxs/src/test/regress/pg_regress" "${CONN_OPTS[@]}" \
        --launcher="$SRC/test/citus/psql-filter.sh" \
        --dbname="$DB" --inputdir="$INPUT" --outputdir="$WORK/regress" "${tests[@]}"
fi
if [ ${#specs[@]} -gt 0 ]; then
    # A step that waits for a lock nobody will release is a failure after 60 s,
    # not a run that hangs for isolationtester's default of 300 s per step.
    run_suite isolation env PGISOLATIONTIMEOUT=60 \
        "$PGROOT/lib/pgxs/src/test/isolation/pg_isolation_regress" "${CONN_OPTS[@]}" \
        --dbname="$ISO_DB" --inputdir="$SRC/test" --outputdir="$WORK/isolation" "${specs[@]}"
fi
echo "== tests took $((SECONDS - T_TESTS)) s"

# Crashes, from the nodes' logs (a worker's backend may crash on a statement
# the coordinator sent it; the test then only sees a connection error).
crashes=$(citus_crash_lines)
echo "== crash lines in the nodes' logs: $crashes"
if [ "$crashes" -gt 0 ]; then
    failed=$((failed + 1))
    status=1
    for n in 0 1 2; do
        if grep -qE "$CITUS_CRASH_RE" "$WORK/n$n.log"; then
            echo "== crashes in node $n's log (port ${PORTS[$n]})"
            grep -nE -B 5 -A 10 "$CITUS_CRASH_RE" "$WORK/n$n.log" | head -n 200 || true
        fi
    done
fi

if [ "$status" -ne 0 ]; then
    for f in "$WORK/regress/regression.diffs" "$WORK/isolation/regression.diffs"; do
        if [ -s "$f" ]; then echo "== ${f#"$WORK/"}"; cat "$f"; fi
    done
    for n in 0 1 2; do
        echo "== node $n log, port ${PORTS[$n]} (last 100 lines)"
        tail -n 100 "$WORK/n$n.log"
    done
fi

finish
done_=1
echo "== elapsed: $((SECONDS - T_START)) s"
echo "citus: $passed passed, $failed failed"
exit $status
