#!/usr/bin/env bash
# The dependencies among the C files of src/ (the extension) and of
# client/ (the command-line tool) have no cycle, and only the Citus module
# asks whether the tables are distributed (the rest asks Variant(),
# src/core/variant.h). Run from a built tree (PGXS leaves src/*/*.o, the Makefile
# client/*.o); each folder is a graph of its own:
#   - calls: file A depends on file B when an object of A uses a symbol B
#     defines (nm), function pointers included;
#   - includes: header or file A includes header B of the same folder.
# Each graph goes through tsort, which names the files of a cycle.
# Prints "deps: N passed, N failed" last (5 checks).
set -uo pipefail
cd "$(dirname "$0")/.."
ok=0; bad=0
pass() { echo "ok: $1"; ok=$((ok + 1)); }
fail() { echo "FAILED: $1"; bad=$((bad + 1)); }

# No call cycle among the objects dir/*.o, no include cycle among the
# files of dir/ (2 checks).
check_dir() {
    local dir=$1 o s a b out calls includes f objs srcs
    objs=$(ls "$dir"/*.o "$dir"/*/*.o 2>/dev/null)
    srcs=$(ls "$dir"/*.[ch] "$dir"/*/*.[ch] 2>/dev/null)
    if [ -z "$objs" ]; then
        fail "no $dir/*.o: build first"
        return
    fi
    declare -A def=()
    for o in $objs; do
        for s in $(nm --defined-only -g "$o" | awk '{print $3}'); do a=${o#"$dir"/}; def[$s]=${a%.o}; done
    done
    calls=$(for o in $objs; do
        a=${o#"$dir"/}; a=${a%.o}
        for s in $(nm -u "$o" | awk '{print $2}'); do
            b=${def[$s]:-}
            [ -n "$b" ] && [ "$b" != "$a" ] && echo "$a $b"
        done
    done | sort -u)
    if out=$(echo "$calls" | tsort 2>&1 >/dev/null) && [ -z "$out" ]; then
        pass "no call cycle among $dir/*.c ($(echo "$calls" | grep -c .) edges)"
    else
        fail "call cycle among $dir/*.c:"; echo "$out"
    fi

    includes=$(for f in $srcs; do
        a=${f#"$dir"/}
        sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | while read -r b; do
            [ -f "$dir/$b" ] && [ "$b" != "$a" ] && echo "$a $b"
        done
    done | sort -u)
    if out=$(echo "$includes" | tsort 2>&1 >/dev/null) && [ -z "$out" ]; then
        pass "no include cycle among $dir/"
    else
        fail "include cycle among $dir/:"; echo "$out"
    fi
}

check_dir src
check_dir client

# ConvctxDistributed() only in the Citus module (citus*.c, citus.h)
others=$(grep -l 'ConvctxDistributed *(' src/*.c src/*/*.[ch] | grep -v -E '^src/citus/' || true)
if [ -z "$others" ]; then
    pass "ConvctxDistributed() only in the Citus module"
else
    fail "ConvctxDistributed() outside the Citus module: $others"
fi

echo "deps: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
