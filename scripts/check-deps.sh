#!/usr/bin/env bash
# The dependencies among the C files of src/ have no cycle, and only the
# Citus module asks whether the tables are distributed (the rest asks
# Variant(), src/variant.h). Run from a built tree (PGXS leaves src/*.o):
#   - calls: file A depends on file B when an object of A uses a symbol B
#     defines (nm), function pointers included;
#   - includes: header or file A includes header B of src/.
# Each graph goes through tsort, which names the files of a cycle.
# Prints "deps: N passed, N failed" (3 checks).
set -uo pipefail
cd "$(dirname "$0")/.."
ok=0; bad=0
pass() { echo "ok: $1"; ok=$((ok + 1)); }
fail() { echo "FAILED: $1"; bad=$((bad + 1)); }

ls src/*.o >/dev/null 2>&1 || { echo "FAILED: no src/*.o: build first"; echo "deps: 0 passed, 1 failed"; exit 1; }
declare -A def
for o in src/*.o; do
    for s in $(nm --defined-only -g "$o" | awk '{print $3}'); do def[$s]=$(basename "$o" .o); done
done
calls=$(for o in src/*.o; do
    a=$(basename "$o" .o)
    for s in $(nm -u "$o" | awk '{print $2}'); do
        b=${def[$s]:-}
        [ -n "$b" ] && [ "$b" != "$a" ] && echo "$a $b"
    done
done | sort -u)
if out=$(echo "$calls" | tsort 2>&1 >/dev/null) && [ -z "$out" ]; then
    pass "no call cycle among src/*.c ($(echo "$calls" | grep -c .) edges)"
else
    fail "call cycle among src/*.c:"; echo "$out"
fi

includes=$(for f in src/*.c src/*.h; do
    a=$(basename "$f")
    sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | while read -r b; do
        [ -f "src/$b" ] && [ "$b" != "$a" ] && echo "$a $b"
    done
done | sort -u)
if out=$(echo "$includes" | tsort 2>&1 >/dev/null) && [ -z "$out" ]; then
    pass "no include cycle among src/"
else
    fail "include cycle among src/:"; echo "$out"
fi

# ConvctxDistributed() only in the Citus module (citus*.c, citus.h)
others=$(grep -l 'ConvctxDistributed *(' src/*.c src/*.h | grep -v -E '^src/citus[a-z_]*\.[ch]$' || true)
if [ -z "$others" ]; then
    pass "ConvctxDistributed() only in the Citus module"
else
    fail "ConvctxDistributed() outside the Citus module: $others"
fi

echo "deps: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
