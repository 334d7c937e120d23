#!/usr/bin/env bash
# The regression and isolation suites (and the recall suite, where pgvector
# is installed) with convctx's C code compiled with
# AddressSanitizer and UndefinedBehaviorSanitizer.
#
# The sanitizer build never goes into the system PostgreSQL, which other
# runs use at the same time: /usr/lib/postgresql/15 and /usr/share/postgresql/15
# are copied to a private directory (PostgreSQL finds its share and library
# directories relative to its binaries), convctx is built with the copy's
# pg_config and installed into the copy, and a private cluster runs from it
# (Unix socket in the private directory, no TCP), as the test user.
#
# PostgreSQL itself is not instrumented, so libasan is preloaded into the
# postmaster. Preloaded alone it deadlocks postgres at start (in
# bindtextdomain); preloading libgpg-error and libp11-kit before it avoids
# that. Writes past the end of a palloc'd chunk go unnoticed: palloc carves
# chunks out of larger malloc'd blocks. ASan sees convctx's stack, globals and
# malloc'd memory, and every memcpy/strlen-style call; UBSan checks convctx's
# own code.
#
# Every report goes to the server's stderr, which is the server log. libubsan
# starts up at its first report, in a backend, where PostgreSQL has already
# zeroed the environment for the process title: it never sees UBSAN_OPTIONS,
# and its start-up resets ASan's log_path as well. So no log_path is used, and
# the UBSan options come from a __ubsan_default_options() linked into the
# test build (libubsan is loaded along with convctx.so and finds it there).
#
# Fails when a suite fails, when a sanitizer reported anything, or when the
# server log shows a crashed server process; then prints the diffs, the
# sanitizer reports and the end of the server log. Ends with a line
# "asan: N passed, N failed" (the sanitizer check, when it fails, counts as one
# more failure). The private directory is removed at the end;
# CONVCTX_ASAN_KEEP=1 keeps it.
source "$(dirname "$0")/lib.sh"

PACKAGES+=(libasan8 libubsan1 libgpg-error0 libp11-kit0)
SAN_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -g -O1"
UBSAN_DEFAULTS="print_stacktrace=1"

passed=0
failed=0
status=0
done_=0
WORK=
PGBIN=

# Stop the cluster and remove the private directory. Also runs when the
# script stops early (a build error, ^C); it then ends with the summary line.
finish() {
    if [ -n "$WORK" ] && [ -f "$WORK/data/postmaster.pid" ]; then
        as_test_user "$PGBIN/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    cd /
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        if [ "${CONVCTX_ASAN_KEEP:-0}" = 1 ]; then echo "== kept $WORK"; else rm -rf "$WORK"; fi
    fi
    WORK=
}
on_exit() {
    local rc=$?
    [ "$done_" = 1 ] && exit "$rc"
    echo "== asan.sh stopped early (exit status $rc)${failed_command:+ at: $failed_command}"
    finish
    echo "asan: $passed passed, $((failed + 1)) failed"
    [ "$rc" -ne 0 ] && exit "$rc"
    exit 1
}
failed_command=
trap 'failed_command="line $LINENO: $BASH_COMMAND"' ERR
trap on_exit EXIT
trap 'failed_command="a signal"; exit 130' INT TERM

ensure_packages

# Private copy of PostgreSQL 15, laid out like /usr so that the relative
# paths compiled into the binaries lead into the copy.
SYS_PGROOT=$(dirname "$("$PG_CONFIG" --bindir)")      # /usr/lib/postgresql/15
SYS_SHARE=$("$PG_CONFIG" --sharedir)                   # /usr/share/postgresql/15
WORK=$(mktemp -d /tmp/convctx-asan.XXXXXX)
PGROOT=$WORK/lib/postgresql/15
PGBIN=$PGROOT/bin
SHARE=$WORK/share/postgresql/15
SRC=$WORK/build
DATA=$WORK/data
SOCK=$WORK/sock
SERVER_LOG=$WORK/server.log
PORT=$((55000 + $$ % 1000))   # names the socket in $SOCK only; no TCP

echo "== private PostgreSQL copy in $WORK"
mkdir -p "$WORK/lib/postgresql" "$WORK/share/postgresql" "$SRC" "$SOCK"
cp -a "$SYS_PGROOT" "$WORK/lib/postgresql/"
cp -a "$SYS_SHARE" "$WORK/share/postgresql/"
# Whatever convctx another run installed into the system goes; ours replaces it.
rm -rf "$PGROOT/lib/convctx.so" "$PGROOT/lib/bitcode/convctx" "$PGROOT/lib/bitcode/convctx.index.bc" \
       "$SHARE/extension/"convctx*
tar -C "$TOP" --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
    --exclude=results --exclude=output_iso --exclude=tmp_check -cf - . | tar -C "$SRC" -xf -
printf 'const char *__ubsan_default_options(void);\nconst char *__ubsan_default_options(void) { return "%s"; }\n' \
    "$UBSAN_DEFAULTS" > "$WORK/ubsan_defaults.c"
chmod 755 "$WORK"
[ "$(id -u)" -eq 0 ] && chown -hR "$TEST_USER" "$WORK"
mkdir -p "$WORK/include" && ln -s /usr/include/postgresql "$WORK/include/postgresql"   # server headers

if [ "$("$PGBIN/pg_config" --pkglibdir)" != "$PGROOT/lib" ] ||
   [ "$("$PGBIN/pg_config" --sharedir)" != "$SHARE" ]; then
    echo "== the copy's pg_config does not point into $WORK; not installing anything"
    exit 1
fi

echo "== building convctx with $SAN_CFLAGS"
as_test_user gcc -c -fPIC -O1 "$WORK/ubsan_defaults.c" -o "$WORK/ubsan_defaults.o"
as_test_user make -C "$SRC" -s -j2 with_llvm=no PG_CONFIG="$PGBIN/pg_config" PG_CFLAGS="$SAN_CFLAGS" \
    PG_LDFLAGS="$WORK/ubsan_defaults.o"
as_test_user make -C "$SRC" -s install with_llvm=no PG_CONFIG="$PGBIN/pg_config" >/dev/null
deps=$(ldd "$PGROOT/lib/convctx.so")
syms=$(nm -D --defined-only "$PGROOT/lib/convctx.so")
if ! grep -q libasan <<<"$deps" || ! grep -q libubsan <<<"$deps" ||
   ! grep -q ' __ubsan_default_options$' <<<"$syms"; then
    echo "== $PGROOT/lib/convctx.so is not built for ASan and UBSan"
    exit 1
fi

# The compiler's own runtime libraries. libubsan is not preloaded: it comes
# with convctx.so, and must, to find __ubsan_default_options there.
# awk reads to the end: leaving early would kill ldconfig with SIGPIPE, which
# pipefail turns into a failure of the whole script, now and then.
libpath() { /sbin/ldconfig -p | awk -v n="$1" '$1 == n && !found { print $NF; found = 1 }'; }
ASAN_LIB=$(readlink -f "$(gcc -print-file-name=libasan.so)")
UBSAN_LIB=$(readlink -f "$(gcc -print-file-name=libubsan.so)")
SAN_ENV=(
    LD_PRELOAD="$(libpath libgpg-error.so.0) $(libpath libp11-kit.so.0) $ASAN_LIB"
    ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0"
)
PG_ENV=(PGHOST="$SOCK" PGPORT="$PORT" PGUSER="$TEST_USER")

echo "== starting a private cluster (socket $SOCK, port $PORT)"
as_test_user "$PGBIN/initdb" -D "$DATA" -U "$TEST_USER" --encoding=UTF8 --locale=C.UTF-8 \
    -A trust --no-sync >/dev/null
cat >> "$DATA/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$SOCK'
port = $PORT
logging_collector = off
log_destination = 'stderr'
jit = off
fsync = off
EOF
# pg_ctl -l: the postmaster's stderr, and so every backend's, is the server log.
as_test_user env "${SAN_ENV[@]}" "$PGBIN/pg_ctl" -D "$DATA" -l "$SERVER_LOG" -w -t 60 start >/dev/null

# The sanitizers must be live in the backends: a backend that loaded convctx
# maps libasan, libubsan and the private convctx.so.
maps=$(as_test_user env "${PG_ENV[@]}" "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d postgres \
    -c "LOAD 'convctx'" -c "SELECT pg_read_file('/proc/self/maps')")
for lib in "$ASAN_LIB" "$UBSAN_LIB" "$PGROOT/lib/convctx.so"; do
    if ! grep -qF "$lib" <<<"$maps"; then
        echo "== a backend that loaded convctx does not map $lib"
        exit 1
    fi
done
echo "== backends map $(basename "$ASAN_LIB"), $(basename "$UBSAN_LIB") and $PGROOT/lib/convctx.so"

# Each suite as its own make installcheck, counted as scripts/run-suites.sh does.
run_suite() {
    local name=$1; shift
    local log=$WORK/$name.log rc=0 ok bad
    echo "== $name"
    as_test_user env "${PG_ENV[@]}" timeout 1800 make -C "$SRC" -s installcheck with_llvm=no \
        TAP_TESTS= PG_CONFIG="$PGBIN/pg_config" "$@" 2>&1 | tee "$log" || rc=$?
    ok=$(grep -cE '\.\.\. ok' "$log" || true)
    bad=$(grep -cE '\.\.\. FAILED' "$log" || true)
    if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
    passed=$((passed + ok))
    failed=$((failed + bad))
    [ "$rc" -ne 0 ] && status=1
    return 0
}
run_suite regression ISOLATION=
run_suite isolation REGRESS=
# The recall suite where the copy has pgvector (scripts/run-suites.sh runs it the same way).
if [ -f "$SHARE/extension/vector.control" ]; then
    run_suite recall \
        REGRESS="$(cd "$SRC/test/recall/sql" && ls *.sql | sed 's/\.sql$//' | tr '\n' ' ')" \
        REGRESS_OPTS="--inputdir=test/recall --load-extension=convctx" \
        ISOLATION="$(cd "$SRC/test/recall/specs" && ls *.spec | sed 's/\.spec$//' | tr '\n' ' ')" \
        ISOLATION_OPTS="--inputdir=test/recall --load-extension=convctx"
fi

as_test_user "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null ||
    as_test_user "$PGBIN/pg_ctl" -D "$DATA" -m immediate -w stop >/dev/null || true

# Sanitizer reports and crashes, from the server log.
REPORT_RE='ERROR: AddressSanitizer|AddressSanitizer CHECK failed|Sanitizer:DEADLYSIGNAL|runtime error:'
CRASH_RE='terminated by signal|terminating any other active server processes|server process \(PID [0-9]+\) exited with exit code'
reports=$(grep -cE "$REPORT_RE" "$SERVER_LOG" || true)
crashes=$(grep -cE "$CRASH_RE" "$SERVER_LOG" || true)
echo "== sanitizer reports: $reports, crash lines in the server log: $crashes"
sanitizer_failed=0
if [ "$reports" -gt 0 ] || [ "$crashes" -gt 0 ]; then
    sanitizer_failed=1
    failed=$((failed + 1))
    status=1
fi

if [ "$status" -ne 0 ]; then
    for f in "$SRC/regression.diffs" "$SRC/output_iso/regression.diffs"; do
        if [ -s "$f" ]; then echo "== ${f#"$SRC/"}"; cat "$f"; fi
    done
fi
if [ "$sanitizer_failed" -eq 1 ]; then
    # Each ASan report up to its SUMMARY line (not the shadow bytes), each
    # UBSan report with its stack, then one line per distinct report.
    echo "== sanitizer reports"
    awk -v re="$REPORT_RE" '
        $0 ~ re && $0 !~ /runtime error:/ { asan = 1 }
        asan { print; if ($0 ~ /^SUMMARY: /) { asan = 0; print "" }; next }
        /runtime error:/ { ub = 1; print; next }
        ub && /^    #/ { print; next }
        ub { ub = 0; print "" }' "$SERVER_LOG" | head -n 600 || true
    echo "== distinct reports"
    grep -oE 'SUMMARY: AddressSanitizer: .*|[^ ]+:[0-9]+:[0-9]+: runtime error: .*' "$SERVER_LOG" |
        sort | uniq -c || true
    echo "== crashes"
    grep -E "$CRASH_RE" "$SERVER_LOG" || true
fi
if [ "$status" -ne 0 ]; then
    echo "== server log (last 200 lines)"
    tail -n 200 "$SERVER_LOG"
fi

finish
done_=1
echo "asan: $passed passed, $failed failed"
exit $status
