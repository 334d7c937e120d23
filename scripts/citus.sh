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
# CONVCTX_CITUS_TESTS: the regression tests (sql/*.sql), default below, run in
# database contrib_regression.
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

# The tests that run on Citus; docs/citus.md says why the others do not.
CITUS_TESTS=${CONVCTX_CITUS_TESTS-turns context_store lifecycle prompt security distributed
    erasure tenant_scope limits prompt_injection context_merge dump}
CITUS_ISOLATION=${CONVCTX_CITUS_ISOLATION-audit_retention_erase context_add_race context_erase_race
    context_purge_race context_request_race erase_erase_race erase_link_race finalize_turn_race
    link_session_race list_link_race purge_start_race redact_finalize_race retrieval_redact_race
    session_cap_race start_turn_race summary_finalize_race summary_redact_race tombstone_read_race}
CITUS_CACHE_DIR=${CONVCTX_CITUS_CACHE:-/var/cache/convctx-citus}
# Goes into the cache key: change it when the build recipe below changes.
CITUS_RECIPE="configure --without-libcurl; make with_llvm=no; make install-extension"
# The databases make installcheck uses: the isolation specs expect an empty
# store, not what the regression tests leave behind.
DB=contrib_regression
ISO_DB=isolation_regression

passed=0
failed=0
status=0
done_=0
WORK=
PGBIN=
PORTS=()
BUILD_LOG=
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
# that a skip costs nothing.
CITUS_TARBALL=
CITUS_PATCHES=()
if [ -x "$PG_CONFIG" ] &&
   [ -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ] &&
   [ -f "$("$PG_CONFIG" --sharedir)/extension/citus.control" ]; then
    CITUS_FROM=system
else
    src=${CONVCTX_CITUS_SOURCE:-}
    [ -n "$src" ] || skip "the system PostgreSQL has no Citus and CONVCTX_CITUS_SOURCE is not set"
    [ -r "$src" ] || skip "CONVCTX_CITUS_SOURCE=$src is not readable"
    if [ -d "$src" ]; then
        tarballs=()
        for f in "$src"/citus-*.tar.gz; do [ -f "$f" ] && tarballs+=("$f"); done
        [ ${#tarballs[@]} -eq 1 ] ||
            skip "CONVCTX_CITUS_SOURCE=$src holds ${#tarballs[@]} citus-*.tar.gz, not one"
        CITUS_TARBALL=${tarballs[0]}
        for f in "$src"/*.patch; do [ -f "$f" ] && CITUS_PATCHES+=("$f"); done
    elif [[ $(basename "$src") == citus-*.tar.gz ]]; then
        CITUS_TARBALL=$src
    else
        skip "CONVCTX_CITUS_SOURCE=$src is neither a citus-*.tar.gz nor a directory holding one"
    fi
    for f in "$CITUS_TARBALL" "${CITUS_PATCHES[@]}"; do
        [ -r "$f" ] || skip "$f is not readable"
    done
    CITUS_FROM=source
fi

ensure_packages

# Private copy of PostgreSQL 15, laid out like /usr so that the relative
# paths compiled into the binaries lead into the copy.
SYS_PGROOT=$(dirname "$("$PG_CONFIG" --bindir)")      # /usr/lib/postgresql/15
SYS_SHARE=$("$PG_CONFIG" --sharedir)                   # /usr/share/postgresql/15
PG_VERSION=$("$PG_CONFIG" --version)                   # PostgreSQL 15.20 (Debian ...)
WORK=$(mktemp -d /tmp/convctx-citus.XXXXXX)
PGROOT=$WORK/lib/postgresql/15
PGBIN=$PGROOT/bin
SHARE=$WORK/share/postgresql/15
SRC=$WORK/build
SOCK=$WORK/sock
REL_LIB=${PGROOT#"$WORK"/}/lib                         # the copy's parts, relative to $WORK
REL_SHARE=${SHARE#"$WORK"/}

echo "== private PostgreSQL copy in $WORK"
mkdir -p "$WORK/lib/postgresql" "$WORK/share/postgresql" "$SRC" "$SOCK"
cp -a "$SYS_PGROOT" "$WORK/lib/postgresql/"
cp -a "$SYS_SHARE" "$WORK/share/postgresql/"
# Whatever convctx another run installed into the system goes; ours replaces it.
rm -rf "$PGROOT/lib/convctx.so" "$PGROOT/lib/bitcode/convctx" "$PGROOT/lib/bitcode/convctx.index.bc" \
       "$SHARE/extension/"convctx*
tar -C "$TOP" --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
    --exclude=results --exclude=output_iso --exclude=tmp_check -cf - . | tar -C "$SRC" -xf -
chmod 755 "$WORK"
[ "$(id -u)" -eq 0 ] && chown -hR "$TEST_USER" "$WORK"
# Server headers. A symlink into the system's include tree: nothing may be
# installed through it (see Citus's install below).
mkdir -p "$WORK/include" && ln -s /usr/include/postgresql "$WORK/include/postgresql"

if [ "$("$PGBIN/pg_config" --pkglibdir)" != "$PGROOT/lib" ] ||
   [ "$("$PGBIN/pg_config" --sharedir)" != "$SHARE" ]; then
    echo "== the copy's pg_config does not point into $WORK; not installing anything"
    exit 1
fi

# --- Citus -------------------------------------------------------------------
T_BUILD=$SECONDS
if [ "$CITUS_FROM" = system ]; then
    CITUS_HOW="the system's, copied along with PostgreSQL"
else
    # The key: the inputs' checksums, the PostgreSQL it is built against, the
    # machine and the recipe. The tarball's name and the version keep it readable.
    key_hash=$({
        echo "recipe: $CITUS_RECIPE"
        echo "machine: $(uname -m)"
        echo "postgresql: $PG_VERSION"
        echo "$(basename "$CITUS_TARBALL") $(sha256sum < "$CITUS_TARBALL" | cut -d' ' -f1)"
        for p in "${CITUS_PATCHES[@]}"; do
            echo "$(basename "$p") $(sha256sum < "$p" | cut -d' ' -f1)"
        done
    } | sha256sum | cut -c1-16)
    pg_short=$(awk '{ print $2 }' <<<"$PG_VERSION")
    CACHE_FILE=$CITUS_CACHE_DIR/$(basename "$CITUS_TARBALL" .tar.gz)-pg$pg_short-$key_hash.tar

    # A cached build must hold only the copy's library and share directories,
    # relative to $WORK, so that it unpacks into any private copy.
    from_cache=0
    if [ -f "$CACHE_FILE" ]; then
        echo "== Citus from the cache: $CACHE_FILE"
        if members=$(tar -tf "$CACHE_FILE") &&
           ! grep -qvE "^($REL_LIB|$REL_SHARE)(/|$)" <<<"$members" &&
           as_test_user tar -C "$WORK" -xf - < "$CACHE_FILE" &&
           [ -f "$PGROOT/lib/citus.so" ] && [ -f "$SHARE/extension/citus.control" ]; then
            from_cache=1
            CITUS_HOW="unpacked from the cache"
        else
            echo "== the cached build is unusable; building Citus again"
        fi
    fi

    if [ "$from_cache" = 0 ]; then
        echo "== building Citus from $CITUS_TARBALL (log: $WORK/citus-build.log)"
        PACKAGES+=(liblz4-dev libzstd-dev libkrb5-dev libssl-dev patch)
        ensure_packages
        CITUS_SRC=$WORK/citus-src
        STAGE=$WORK/citus-stage
        BUILD_LOG=$WORK/citus-build.log   # on_exit prints its end when a step fails
        as_test_user mkdir "$CITUS_SRC" "$STAGE"
        # Read by us, unpacked by the test user: the source need not be readable by it.
        as_test_user tar -C "$CITUS_SRC" --strip-components=1 -xzf - < "$CITUS_TARBALL"
        for p in "${CITUS_PATCHES[@]}"; do
            echo "== applying $(basename "$p")"
            (cd "$CITUS_SRC" && as_test_user patch -p1 --batch --forward) < "$p" >>"$BUILD_LOG" 2>&1
        done
        {
            (cd "$CITUS_SRC" && as_test_user ./configure PG_CONFIG="$PGBIN/pg_config" --without-libcurl)
            # with_llvm=no: no bitcode, which only JIT would use (off in the
            # nodes), and which would lengthen the build.
            as_test_user make -C "$CITUS_SRC" -j2 with_llvm=no
            # Staged with DESTDIR, so the paths are $STAGE$WORK/...; install-extension,
            # not install: "install" also puts Citus's headers into includedir-server,
            # which in the copy is the symlink into the system's /usr/include.
            as_test_user make -C "$CITUS_SRC" install-extension with_llvm=no DESTDIR="$STAGE"
        } >>"$BUILD_LOG" 2>&1
        stray=$(find "$STAGE" -mindepth 1 \( -type f -o -type l \) \
                ! -path "$STAGE$PGROOT/lib/*" ! -path "$STAGE$SHARE/*")
        if [ -n "$stray" ] || [ ! -f "$STAGE$PGROOT/lib/citus.so" ] ||
           [ ! -f "$STAGE$SHARE/extension/citus.control" ]; then
            echo "== Citus did not install (only) into the copy's library and share directories:"
            echo "${stray:-no citus.so or citus.control}" | head -n 20
            exit 1
        fi
        as_test_user cp -a "$STAGE$PGROOT/lib/." "$PGROOT/lib/"
        as_test_user cp -a "$STAGE$SHARE/." "$SHARE/"
        BUILD_LOG=

        # Written to a temporary name and renamed, so that a concurrent run
        # never unpacks half a file. Not being able to cache is no failure.
        tmp=
        if ! { mkdir -p "$CITUS_CACHE_DIR" 2>/dev/null && [ -w "$CITUS_CACHE_DIR" ]; }; then
            echo "== cannot write to $CITUS_CACHE_DIR; the Citus build is not cached"
        elif tmp=$(mktemp "$CITUS_CACHE_DIR/.citus.XXXXXX") &&
             as_test_user tar -C "$STAGE$WORK" -cf - "$REL_LIB" "$REL_SHARE" > "$tmp" &&
             chmod 644 "$tmp" && mv -f "$tmp" "$CACHE_FILE"; then
            echo "== cached the Citus build in $CACHE_FILE"
        else
            [ -n "$tmp" ] && rm -f "$tmp"
            echo "== could not write $CACHE_FILE; the Citus build is not cached"
        fi
        rm -rf "$CITUS_SRC" "$STAGE"
        CITUS_HOW="built"
    fi
fi
if [ ! -f "$PGROOT/lib/citus.so" ] || [ ! -f "$SHARE/extension/citus.control" ]; then
    echo "== no citus.so or citus.control in the copy"
    exit 1
fi
echo "== Citus ready in $((SECONDS - T_BUILD)) s ($CITUS_HOW)"

# --- convctx -----------------------------------------------------------------
T_CONVCTX=$SECONDS
echo "== building convctx"
as_test_user make -C "$SRC" -s -j2 with_llvm=no PG_CONFIG="$PGBIN/pg_config"
as_test_user make -C "$SRC" -s install with_llvm=no PG_CONFIG="$PGBIN/pg_config" >/dev/null
[ -f "$PGROOT/lib/convctx.so" ] || { echo "== convctx.so is not in the copy"; exit 1; }
echo "== convctx built in $((SECONDS - T_CONVCTX)) s"

# --- the cluster -------------------------------------------------------------
# Three free loopback ports from 56000-56999, starting at one derived from our
# PID so that concurrent runs rarely try the same ones. A port is taken when
# something accepts a connection on it.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
p=$((56000 + ($$ % 300) * 3))
for ((tries = 0; tries < 1000 && ${#PORTS[@]} < 3; tries++)); do
    port_taken "$p" || PORTS+=("$p")
    p=$((p == 56999 ? 56000 : p + 1))
done
[ ${#PORTS[@]} -eq 3 ] || { echo "== fewer than three free ports in 56000-56999"; exit 1; }

# psql on node N's database, over TCP as the Citus nodes talk to each other.
node_sql() {
    local n=$1; shift
    as_test_user env PGHOST=127.0.0.1 PGPORT="${PORTS[$n]}" PGUSER="$TEST_USER" \
        "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 "$@"
}

echo "== starting the coordinator (port ${PORTS[0]}) and two workers (${PORTS[1]}, ${PORTS[2]})"
for n in 0 1 2; do
    as_test_user "$PGBIN/initdb" -D "$WORK/n$n" -U "$TEST_USER" --encoding=UTF8 --locale=C.UTF-8 \
        -A trust --no-sync >/dev/null
    # synchronous_commit stays on: with it off, a coordinator crash has lost
    # a committed ALTER TABLE that the workers had kept. convctx is preloaded
    # after citus, as convctx.distribute() requires (src/citus.c).
    cat >> "$WORK/n$n/postgresql.conf" <<EOF
port = ${PORTS[$n]}
listen_addresses = '127.0.0.1'
unix_socket_directories = '$SOCK'
shared_preload_libraries = 'citus,convctx'
max_worker_processes = 32
max_prepared_transactions = 200
wal_level = logical
synchronous_commit = on
fsync = off
jit = off
logging_collector = off
log_destination = 'stderr'
EOF
done
for n in 0 1 2; do
    as_test_user "$PGBIN/pg_ctl" -D "$WORK/n$n" -l "$WORK/n$n.log" -w -t 60 start >/dev/null
done

# setup_db NAME: the database on every node, with Citus; Citus's node list
# is per database, so the coordinator then learns itself and the workers in
# it. convctx is created on the coordinator only: Citus propagates the
# extension (and roles) to the workers.
setup_db() {
    local db=$1 n out
    echo "== database $db"
    for n in 0 1 2; do
        node_sql "$n" -d postgres -c "CREATE DATABASE $db"
        node_sql "$n" -d "$db" -c "CREATE EXTENSION citus"
    done
    node_sql 0 -d "$db" -c "SELECT citus_set_coordinator_host('127.0.0.1', ${PORTS[0]})" >/dev/null
    node_sql 0 -d "$db" -c "SELECT citus_add_node('127.0.0.1', ${PORTS[1]})" >/dev/null
    node_sql 0 -d "$db" -c "SELECT citus_add_node('127.0.0.1', ${PORTS[2]})" >/dev/null
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
# the sql/ of the tree, and expected/ with test/citus/expected/ laid over it.
# A test with Citus output loses the alternative outputs (<test>_N.out) of
# expected/ too.
INPUT=$WORK/regress-input
as_test_user mkdir -p "$INPUT/expected" "$WORK/regress" "$WORK/isolation"
as_test_user ln -s "$SRC/sql" "$INPUT/sql"
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
CRASH_RE='terminated by signal|was terminated|PANIC|terminating any other active server processes|server process \(PID [0-9]+\) exited with exit code'
crashes=0
for n in 0 1 2; do
    c=$(grep -cE "$CRASH_RE" "$WORK/n$n.log" || true)
    crashes=$((crashes + c))
done
echo "== crash lines in the nodes' logs: $crashes"
if [ "$crashes" -gt 0 ]; then
    failed=$((failed + 1))
    status=1
    for n in 0 1 2; do
        if grep -qE "$CRASH_RE" "$WORK/n$n.log"; then
            echo "== crashes in node $n's log (port ${PORTS[$n]})"
            grep -nE -B 5 -A 10 "$CRASH_RE" "$WORK/n$n.log" | head -n 200 || true
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
