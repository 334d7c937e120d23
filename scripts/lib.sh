# Shared by scripts/demo.sh and scripts/test.sh: install what is missing,
# build and install convctx, and run commands as an unprivileged user
# (PostgreSQL refuses to run as root).

set -euo pipefail

export LANG=C.UTF-8 LC_ALL=C.UTF-8
export PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

PACKAGES=(make gcc libc6-dev postgresql-15 postgresql-client-15 postgresql-server-dev-15
          postgresql-15-cron libipc-run-perl libjansson-dev)
# and for the test suites: the pooler and the Python driver of the client tests
TEST_PACKAGES=(pgbouncer python3-psycopg)

# Run a command as root: directly when we are root, else through sudo.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ensure_packages [test]: PACKAGES, and with "test" TEST_PACKAGES and Node.js
# with npm (Debian's, unless a node is installed already).
ensure_packages() {
    local missing=() p wanted=("${PACKAGES[@]}")
    [ "${1:-}" = test ] && wanted+=("${TEST_PACKAGES[@]}")
    for p in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ "${1:-}" = test ]; then
        command -v node >/dev/null || missing+=(nodejs)
        command -v npm >/dev/null || missing+=(npm)
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        echo "== installing: ${missing[*]}"
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null
    fi
}

# The user that builds and runs PostgreSQL: ourselves, or "postgres" when
# we are root.
TEST_USER=$(id -un)
[ "$(id -u)" -eq 0 ] && TEST_USER=postgres

as_test_user() {
    if [ "$(id -un)" = "$TEST_USER" ]; then
        "$@"
    else
        runuser -u "$TEST_USER" -- env LANG="$LANG" LC_ALL="$LC_ALL" PG_CONFIG="$PG_CONFIG" "$@"
    fi
}

# Copy the work tree to a fresh directory owned by the test user, build it
# there warning-free, and install it into PostgreSQL 15. Sets STAGE.
build_and_install() {
    STAGE=$(mktemp -d /tmp/convctx-build.XXXXXX)
    tar -C "$TOP" --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
        --exclude=results --exclude=output_iso --exclude=tmp_check -cf - . | tar -C "$STAGE" -xf -
    chmod 755 "$STAGE"
    [ "$(id -u)" -eq 0 ] && chown -R "$TEST_USER" "$STAGE"
    echo "== building convctx in $STAGE"
    as_test_user make -C "$STAGE" -s with_llvm=no \
        PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers ${CONVCTX_EXTRA_CFLAGS:-}"
    as_root make -C "$STAGE" -s install with_llvm=no PG_CONFIG="$PG_CONFIG" >/dev/null
}

# ensure_pgvector: pgvector in PostgreSQL 15 for the recall suite. Debian 12's
# archive has no postgresql-15-pgvector, so when the server lacks it, it is
# built from the tarball that CONVCTX_PGVECTOR_SOURCE names (a
# pgvector-*.tar.gz, or a directory holding one), with OPTFLAGS="" so that
# the library runs on any x86-64 machine. Without either it returns 1 and
# the recall suite says SKIP.
ensure_pgvector() {
    local share src tarball dir
    share=$("$PG_CONFIG" --sharedir)
    [ -f "$share/extension/vector.control" ] && return 0
    src=${CONVCTX_PGVECTOR_SOURCE:-}
    [ -n "$src" ] || return 1
    tarball=$src
    [ -d "$src" ] && tarball=$(ls "$src"/pgvector-*.tar.gz 2>/dev/null | head -n 1)
    [ -f "$tarball" ] || { echo "== CONVCTX_PGVECTOR_SOURCE=$src holds no pgvector-*.tar.gz"; return 2; }
    dir=$(mktemp -d /tmp/convctx-pgvector.XXXXXX)
    chmod 755 "$dir"
    tar -C "$dir" -xzf "$tarball"
    [ "$(id -u)" -eq 0 ] && chown -R "$TEST_USER" "$dir"
    echo "== building pgvector from $(basename "$tarball")"
    as_test_user make -C "$dir"/pgvector-* -s OPTFLAGS="" with_llvm=no PG_CONFIG="$PG_CONFIG" >/dev/null
    as_root make -C "$dir"/pgvector-* -s install OPTFLAGS="" with_llvm=no PG_CONFIG="$PG_CONFIG" >/dev/null
    rm -rf "$dir"
}

# in_throwaway_cluster WHAT COMMAND...: run COMMAND as the test user, from
# the build directory, inside a throwaway cluster made by pg_virtualenv
# (which turns fsync off; CONVCTX_DURABLE=1 turns it on again, for
# benchmarks that report durable commits).
# The build is removed when COMMAND succeeds; when it fails it is kept for
# its logs and diffs, and the script exits non-zero.
in_throwaway_cluster() {
    local what=$1; shift
    cd "$STAGE"
    local opts=()
    [ "${CONVCTX_DURABLE:-0}" = 1 ] && opts=(-o fsync=on -o synchronous_commit=on)
    if as_test_user pg_virtualenv -v 15 "${opts[@]}" "$@"; then
        cd / && rm -rf "$STAGE"
    else
        echo "== $what failed; the build and its output are kept in $STAGE"
        exit 1
    fi
}
