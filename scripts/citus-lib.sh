# Shared by the scripts that run convctx on a real Citus cluster
# (scripts/citus.sh, test/bench/citus/run.sh; sourced after scripts/lib.sh): a private copy of
# PostgreSQL 15 with Citus and convctx installed into it, and clusters run
# from it on loopback, so that nothing goes into the system PostgreSQL, which
# other runs use at the same time.
#
# The copy: /usr/lib/postgresql/15 and /usr/share/postgresql/15 copied to a
# private directory (PostgreSQL finds its share and library directories
# relative to its binaries); the nodes run from it as the test user (TCP on
# 127.0.0.1, Unix sockets in the private directory).
#
# Citus is not in Debian's archive. When the system PostgreSQL has it, the
# copy has it too. Otherwise it is built from the source tarball named by
# CONVCTX_CITUS_SOURCE: a citus-*.tar.gz, or a directory with one
# citus-*.tar.gz and optionally *.patch files (applied with patch -p1 in name
# order). The build takes over a minute on two cores, so what it installs is
# kept as a tarball in CONVCTX_CITUS_CACHE (default /var/cache/convctx-citus),
# named after the tarball's and patches' sha256 and the PostgreSQL version,
# and unpacked by later runs instead of building again.
#
# The functions set these globals: WORK (the private directory), PGROOT,
# PGBIN, SHARE, SRC (convctx's source copy), SOCK, PORTS (one per node,
# node 0 the coordinator), BUILD_LOG (while Citus builds: its log, for a
# caller's error report), CITUS_HOW.

CITUS_CACHE_DIR=${CONVCTX_CITUS_CACHE:-/var/cache/convctx-citus}
# Goes into the cache key: change it when the build recipe below changes.
CITUS_RECIPE="configure --without-libcurl; make with_llvm=no; make install-extension"
# A crashed server process in a node's log (a worker's backend may crash on
# a statement the coordinator sent it; the client then only sees a
# connection error).
CITUS_CRASH_RE='terminated by signal|was terminated|PANIC|terminating any other active server processes|server process \(PID [0-9]+\) exited with exit code'

WORK=
PGBIN=
PORTS=()
BUILD_LOG=

# citus_find_source: where Citus comes from (CITUS_FROM system or source,
# CITUS_TARBALL, CITUS_PATCHES), decided before anything is installed or
# copied, so that a skip costs nothing. Without Citus returns 1 with the
# reason in CITUS_SKIP.
citus_find_source() {
    local src f tarballs=()
    CITUS_TARBALL=
    CITUS_PATCHES=()
    CITUS_SKIP=
    if [ -x "$PG_CONFIG" ] &&
       [ -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ] &&
       [ -f "$("$PG_CONFIG" --sharedir)/extension/citus.control" ]; then
        CITUS_FROM=system
        return 0
    fi
    src=${CONVCTX_CITUS_SOURCE:-}
    if [ -z "$src" ]; then
        CITUS_SKIP="the system PostgreSQL has no Citus and CONVCTX_CITUS_SOURCE is not set"
    elif [ ! -r "$src" ]; then
        CITUS_SKIP="CONVCTX_CITUS_SOURCE=$src is not readable"
    elif [ -d "$src" ]; then
        for f in "$src"/citus-*.tar.gz; do [ -f "$f" ] && tarballs+=("$f"); done
        if [ ${#tarballs[@]} -eq 1 ]; then
            CITUS_TARBALL=${tarballs[0]}
            for f in "$src"/*.patch; do [ -f "$f" ] && CITUS_PATCHES+=("$f"); done
        else
            CITUS_SKIP="CONVCTX_CITUS_SOURCE=$src holds ${#tarballs[@]} citus-*.tar.gz, not one"
        fi
    elif [[ $(basename "$src") == citus-*.tar.gz ]]; then
        CITUS_TARBALL=$src
    else
        CITUS_SKIP="CONVCTX_CITUS_SOURCE=$src is neither a citus-*.tar.gz nor a directory holding one"
    fi
    [ -z "$CITUS_SKIP" ] || return 1
    for f in "$CITUS_TARBALL" "${CITUS_PATCHES[@]}"; do
        if [ ! -r "$f" ]; then CITUS_SKIP="$f is not readable"; return 1; fi
    done
    CITUS_FROM=source
}

# citus_private_copy PREFIX: the private directory (mktemp PREFIX.XXXXXX) with
# a copy of PostgreSQL 15, laid out like /usr so that the relative paths
# compiled into the binaries lead into the copy, and a copy of convctx's tree.
citus_private_copy() {
    SYS_PGROOT=$(dirname "$("$PG_CONFIG" --bindir)")      # /usr/lib/postgresql/15
    SYS_SHARE=$("$PG_CONFIG" --sharedir)                   # /usr/share/postgresql/15
    PG_VERSION=$("$PG_CONFIG" --version)                   # PostgreSQL 15.20 (Debian ...)
    WORK=$(mktemp -d "$1.XXXXXX")
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
}

# citus_install: Citus into the copy, from the system, the cache or a build
# (which then goes into the cache). Prints how, and sets CITUS_HOW.
citus_install() {
    local t_build=$SECONDS key_hash pg_short cache_file members from_cache p stray tmp
    local citus_src stage
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
        cache_file=$CITUS_CACHE_DIR/$(basename "$CITUS_TARBALL" .tar.gz)-pg$pg_short-$key_hash.tar

        # A cached build must hold only the copy's library and share directories,
        # relative to $WORK, so that it unpacks into any private copy.
        from_cache=0
        if [ -f "$cache_file" ]; then
            echo "== Citus from the cache: $cache_file"
            if members=$(tar -tf "$cache_file") &&
               ! grep -qvE "^($REL_LIB|$REL_SHARE)(/|$)" <<<"$members" &&
               as_test_user tar -C "$WORK" -xf - < "$cache_file" &&
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
            citus_src=$WORK/citus-src
            stage=$WORK/citus-stage
            BUILD_LOG=$WORK/citus-build.log   # a caller's error report prints its end
            as_test_user mkdir "$citus_src" "$stage"
            # Read by us, unpacked by the test user: the source need not be readable by it.
            as_test_user tar -C "$citus_src" --strip-components=1 -xzf - < "$CITUS_TARBALL"
            for p in "${CITUS_PATCHES[@]}"; do
                echo "== applying $(basename "$p")"
                (cd "$citus_src" && as_test_user patch -p1 --batch --forward) < "$p" >>"$BUILD_LOG" 2>&1
            done
            {
                (cd "$citus_src" && as_test_user ./configure PG_CONFIG="$PGBIN/pg_config" --without-libcurl)
                # with_llvm=no: no bitcode, which only JIT would use (off in the
                # nodes), and which would lengthen the build.
                as_test_user make -C "$citus_src" -j2 with_llvm=no
                # Staged with DESTDIR, so the paths are $stage$WORK/...; install-extension,
                # not install: "install" also puts Citus's headers into includedir-server,
                # which in the copy is the symlink into the system's /usr/include.
                as_test_user make -C "$citus_src" install-extension with_llvm=no DESTDIR="$stage"
            } >>"$BUILD_LOG" 2>&1
            stray=$(find "$stage" -mindepth 1 \( -type f -o -type l \) \
                    ! -path "$stage$PGROOT/lib/*" ! -path "$stage$SHARE/*")
            if [ -n "$stray" ] || [ ! -f "$stage$PGROOT/lib/citus.so" ] ||
               [ ! -f "$stage$SHARE/extension/citus.control" ]; then
                echo "== Citus did not install (only) into the copy's library and share directories:"
                echo "${stray:-no citus.so or citus.control}" | head -n 20
                exit 1
            fi
            as_test_user cp -a "$stage$PGROOT/lib/." "$PGROOT/lib/"
            as_test_user cp -a "$stage$SHARE/." "$SHARE/"
            BUILD_LOG=

            # Written to a temporary name and renamed, so that a concurrent run
            # never unpacks half a file. Not being able to cache is no failure.
            tmp=
            if ! { mkdir -p "$CITUS_CACHE_DIR" 2>/dev/null && [ -w "$CITUS_CACHE_DIR" ]; }; then
                echo "== cannot write to $CITUS_CACHE_DIR; the Citus build is not cached"
            elif tmp=$(mktemp "$CITUS_CACHE_DIR/.citus.XXXXXX") &&
                 as_test_user tar -C "$stage$WORK" -cf - "$REL_LIB" "$REL_SHARE" > "$tmp" &&
                 chmod 644 "$tmp" && mv -f "$tmp" "$cache_file"; then
                echo "== cached the Citus build in $cache_file"
            else
                [ -n "$tmp" ] && rm -f "$tmp"
                echo "== could not write $cache_file; the Citus build is not cached"
            fi
            rm -rf "$citus_src" "$stage"
            CITUS_HOW="built"
        fi
    fi
    if [ ! -f "$PGROOT/lib/citus.so" ] || [ ! -f "$SHARE/extension/citus.control" ]; then
        echo "== no citus.so or citus.control in the copy"
        exit 1
    fi
    echo "== Citus ready in $((SECONDS - t_build)) s ($CITUS_HOW)"
}

# citus_build_convctx: convctx, from the tree's copy, into the copy.
citus_build_convctx() {
    local t_convctx=$SECONDS
    echo "== building convctx"
    as_test_user make -C "$SRC" -s -j2 with_llvm=no PG_CONFIG="$PGBIN/pg_config"
    as_test_user make -C "$SRC" -s install with_llvm=no PG_CONFIG="$PGBIN/pg_config" >/dev/null
    [ -f "$PGROOT/lib/convctx.so" ] || { echo "== convctx.so is not in the copy"; exit 1; }
    echo "== convctx built in $((SECONDS - t_convctx)) s"
}

# citus_pick_ports N: N free loopback ports from 56000-56999 into PORTS,
# starting at one derived from our PID so that concurrent runs rarely try the
# same ones. A port is taken when something accepts a connection on it.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
citus_pick_ports() {
    local want=$1 p tries
    PORTS=()
    p=$((56000 + ($$ % 300) * 3))
    for ((tries = 0; tries < 1000 && ${#PORTS[@]} < want; tries++)); do
        port_taken "$p" || PORTS+=("$p")
        p=$((p == 56999 ? 56000 : p + 1))
    done
    [ ${#PORTS[@]} -eq "$want" ] || { echo "== fewer than $want free ports in 56000-56999"; exit 1; }
}

# node_sql N ARGS...: psql on node N, over TCP as the Citus nodes talk to
# each other, as the test user (-d picks the database, -U another role).
node_sql() {
    local n=$1; shift
    as_test_user env PGHOST=127.0.0.1 PGPORT="${PORTS[$n]}" PGUSER="$TEST_USER" \
        "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 "$@"
}

# citus_start_nodes SETTINGS: one node per port of PORTS, data in $WORK/nN,
# log in $WORK/nN.log; SETTINGS (postgresql.conf lines) go after the common
# ones and so win over them.
citus_start_nodes() {
    local settings=$1 n
    for n in "${!PORTS[@]}"; do
        as_test_user "$PGBIN/initdb" -D "$WORK/n$n" -U "$TEST_USER" --encoding=UTF8 --locale=C.UTF-8 \
            -A trust --no-sync >/dev/null
        # synchronous_commit stays on: with it off, a coordinator crash has lost
        # a committed ALTER TABLE that the workers had kept. convctx is preloaded
        # after citus, as convctx.distribute() requires (src/citus/citus.c).
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
$settings
EOF
    done
    for n in "${!PORTS[@]}"; do
        as_test_user "$PGBIN/pg_ctl" -D "$WORK/n$n" -l "$WORK/n$n.log" -w -t 60 start >/dev/null
    done
}

# citus_running_nodes: the numbers of the nodes that run (have a postmaster.pid).
citus_running_nodes() {
    local n
    for n in "${!PORTS[@]}"; do
        if [ -f "$WORK/n$n/postmaster.pid" ]; then echo "$n"; fi
    done
}

# citus_stop_nodes: stop every running node, at once (-m immediate).
citus_stop_nodes() {
    local n
    for n in $(citus_running_nodes); do
        as_test_user "$PGBIN/pg_ctl" -D "$WORK/n$n" -m immediate -w stop >/dev/null 2>&1 || true
    done
}

# citus_node_db N DB: DB on node N, with Citus.
citus_node_db() {
    node_sql "$1" -d postgres -c "CREATE DATABASE $2"
    node_sql "$1" -d "$2" -c "CREATE EXTENSION citus"
}

# citus_add_nodes DB N...: in DB (on every listed node already), the
# coordinator learns itself (citus_set_coordinator_host, which gives it no
# shards) and the workers N...; Citus's node list is per database.
citus_add_nodes() {
    local db=$1 n; shift
    node_sql 0 -d "$db" -c "SELECT citus_set_coordinator_host('127.0.0.1', ${PORTS[0]})" >/dev/null
    for n in "$@"; do
        node_sql 0 -d "$db" -c "SELECT citus_add_node('127.0.0.1', ${PORTS[$n]})" >/dev/null
    done
}

# citus_crash_lines: how many lines of the nodes' logs tell of a crash.
citus_crash_lines() {
    local n c total=0
    for n in "${!PORTS[@]}"; do
        c=$(grep -cE "$CITUS_CRASH_RE" "$WORK/n$n.log" 2>/dev/null || true)
        total=$((total + ${c:-0}))
    done
    echo "$total"
}
