#!/usr/bin/env bash
# The dependencies among the C files of src/ (the extension) and of
# client/ (the command-line tool). Run from a built tree (PGXS leaves
# src/*/*.o, the Makefile client/*.o); each of src/ and client/ is a graph
# of its own:
#   - calls: file A depends on file B when an object of A uses a symbol B
#     defines (nm), function pointers included;
#   - includes: header or file A includes header B of the same tree.
# Checks (8):
#   - no cycle among the files (each graph goes through tsort, which names
#     the files of a cycle), calls and includes, in src/ and in client/;
#   - the layers of src/: each folder of src/ has a level in LEVELS below,
#     and every call or include from a file of one folder to a file of
#     another points to a lower level (or sideways where SIDEWAYS says);
#     an include of a header of src/ names its folder ("core/args.h");
#   - only the Citus module (src/citus/) asks whether the tables are
#     distributed (the rest asks Variant(), src/core/variant.h);
#   - recall is named only in src/recall/ and by the entry point, which
#     registers it as the companion (src/core/companion.h);
#   - the drawing of the levels in CONTRIBUTING.md ("## How the C files
#     depend on each other", its ```text blocks) is the one this script
#     prints with --levels.
# Prints "deps: N passed, N failed" last.
#
#   scripts/check-deps.sh            the checks
#   scripts/check-deps.sh --levels   the drawing, as CONTRIBUTING.md has it
set -uo pipefail
cd "$(dirname "$0")/.."

# The folders of src/, one level a line from the bottom; the folders of a
# level are separated by spaces and use none of each other, but for the
# pairs in SIDEWAYS ("a>b": folder a of a level may use folder b of the
# same). "." is src/ itself: the entry point.
LEVELS=(
    "core"
    "context"
    "turns"
    "prompt"
    "lifecycle"
    "browser"
    "transfer"
    "citus recall"
    "."
)
SIDEWAYS=()

DRAWING_OF="CONTRIBUTING.md"
DRAWING_SECTION="## How the C files depend on each other"

ok=0; bad=0
pass() { echo "ok: $1"; ok=$((ok + 1)); }
fail() { echo "FAILED: $1"; bad=$((bad + 1)); }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The edges of tree dir (src or client) into $work/dir.calls ("a b
# symbol", a and b the paths below dir without .o) and $work/dir.includes
# ("a b", paths below dir); the files that build into $work/dir.files.
# Returns 1 when nothing is built.
edges() {
    local dir=$1 o s a b f objs srcs
    objs=$(ls "$dir"/*.o "$dir"/*/*.o 2>/dev/null)
    srcs=$(ls "$dir"/*.[ch] "$dir"/*/*.[ch] 2>/dev/null)
    [ -n "$objs" ] || return 1
    declare -A def=()
    for o in $objs; do a=${o#"$dir"/}; echo "${a%.o}"; done | sort > "$work/$dir.files"
    for o in $objs; do
        for s in $(nm --defined-only -g "$o" | awk '{print $3}'); do a=${o#"$dir"/}; def[$s]=${a%.o}; done
    done
    for o in $objs; do
        a=${o#"$dir"/}; a=${a%.o}
        for s in $(nm -u "$o" | awk '{print $2}'); do
            b=${def[$s]:-}
            [ -n "$b" ] && [ "$b" != "$a" ] && echo "$a $b $s"
        done
    done | sort -u > "$work/$dir.calls"
    # An include is found below dir, else beside the file that has it
    # (then marked "here", which src/ refuses in another folder).
    for f in $srcs; do
        a=${f#"$dir"/}
        sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | while read -r b; do
            if [ -f "$dir/$b" ]; then
                [ "$b" != "$a" ] && echo "$a $b"
            elif [ -f "$(dirname "$f")/$b" ]; then
                echo "$a $(dirname "$a")/$b here"
            fi
        done
    done | sort -u > "$work/$dir.includes"
    return 0
}

# No call cycle, no include cycle among the files of dir (2 checks).
check_cycles() {
    local dir=$1 out
    if out=$(cut -d' ' -f1,2 "$work/$dir.calls" | sort -u | tsort 2>&1 >/dev/null) && [ -z "$out" ]; then
        pass "no call cycle among the files of $dir/ ($(cut -d' ' -f1,2 "$work/$dir.calls" | sort -u | grep -c .) edges)"
    else
        fail "call cycle among the files of $dir/:"; echo "$out"
    fi
    if out=$(cut -d' ' -f1,2 "$work/$dir.includes" | tsort 2>&1 >/dev/null) && [ -z "$out" ]; then
        pass "no include cycle among the files of $dir/"
    else
        fail "include cycle among the files of $dir/:"; echo "$out"
    fi
}

# The folder of a path below src/ ("." for src/ itself), and its level.
folder() { case $1 in */*) echo "${1%%/*}" ;; *) echo . ;; esac; }
level() {
    local i f
    for i in "${!LEVELS[@]}"; do
        for f in ${LEVELS[$i]}; do [ "$f" = "$1" ] && { echo "$i"; return; }; done
    done
    echo -1
}

# What folder $1 of src/ uses of the others: "b symbol-or-#include" lines.
folder_uses() {
    { cat "$work/src.calls"; awk '{print $1, $2, "#include"}' "$work/src.includes"; } |
        while read -r a b what; do
            fa=$(folder "$a"); fb=$(folder "$b")
            [ "$fa" = "$1" ] && [ "$fb" != "$fa" ] && echo "$fb"
        done | sort -u
}

# Each dependency between folders of src/ points down (1 check).
check_layers() {
    local problems=() a b what fa fb la lb f n=0 pairs
    for f in $(cut -d/ -s -f1 "$work/src.files" | sort -u); do
        [ "$(level "$f")" -ge 0 ] || problems+=("src/$f/ has no level in LEVELS (scripts/check-deps.sh)")
    done
    while read -r a b what; do
        fa=$(folder "$a"); fb=$(folder "$b")
        if [ "$what" = here ]; then
            [ "$fa" != . ] && problems+=("src/$a includes \"${b##*/}\": name its folder, \"$b\"")
            what="#include"
        fi
        [ "$fa" = "$fb" ] && continue
        n=$((n + 1))
        la=$(level "$fa"); lb=$(level "$fb")
        [ "$la" -ge 0 ] && [ "$lb" -ge 0 ] || continue
        if [ "$la" -lt "$lb" ]; then
            problems+=("src/$a -> src/$b ($what): $fa (level $la) uses $fb (level $lb), above it")
        elif [ "$la" -eq "$lb" ] && [[ " ${SIDEWAYS[*]} " != *" $fa>$fb "* ]]; then
            problems+=("src/$a -> src/$b ($what): $fa uses $fb sideways (level $la), not declared in SIDEWAYS")
        fi
    done < <(cat "$work/src.calls"; awk '{print $1, $2, ($3 == "here" ? "here" : "#include")}' "$work/src.includes")
    pairs=$(for f in $(cut -d/ -s -f1 "$work/src.files" | sort -u) .; do folder_uses "$f" | sed "s|^|$f |"; done | grep -c .)
    if [ ${#problems[@]} -eq 0 ]; then
        pass "the layers of src/: ${#LEVELS[@]} levels, $n calls and includes between folders ($pairs pairs of folders), each pointing down"
    else
        fail "the layers of src/ (bottom to top: $(printf '%s; ' "${LEVELS[@]}" | sed 's/; $//')):"
        printf '  %s\n' "${problems[@]}"
    fi
}

# The drawing of the levels of src/: each folder, top first, and those it
# uses.
draw_src() {
    local i f uses
    for ((i = ${#LEVELS[@]} - 1; i >= 0; i--)); do
        for f in ${LEVELS[$i]}; do
            uses=$(folder_uses "$f" | paste -sd, - | sed 's/,/, /g')
            if [ "$f" = . ]; then
                printf '%-3s%-12s%s\n' "$i" "$(grep -v / "$work/src.files" | sed 's/$/.c/' | paste -sd' ' -)" "${uses:+uses $uses}"
            else
                printf '%-3s%-12s%s\n' "$i" "$f/" "${uses:+uses $uses}"
            fi
        done
    done | sed 's/ *$//'
}

# The drawing of the files of client/: each level, top first, and its
# files; a file's level is one more than the highest of the files it calls.
draw_client() {
    awk 'NR == FNR { level[$1] = 0; next }
         { from[++n] = $1; to[n] = $2 }
         END {
             do {
                 changed = 0
                 for (i = 1; i <= n; i++)
                     if (level[from[i]] < level[to[i]] + 1) { level[from[i]] = level[to[i]] + 1; changed = 1 }
             } while (changed)
             for (f in level) print level[f], f
         }' "$work/client.files" "$work/client.calls" |
        sort -k1,1nr -k2,2 |
        awk '$1 != l { if (NR > 1) print line; l = $1; line = sprintf("%-3s%s", $1, $2); next }
             { line = line ", " $2 } END { print line }'
}

drawing() {
    draw_src
    echo
    draw_client
}

# The ```text blocks of the section, separated by an empty line.
documented() {
    awk -v section="$DRAWING_SECTION" '
        /^## / { in_section = ($0 == section); next }
        !in_section { next }
        /^```/ { if (in_block) { in_block = 0; blocks++ } else { in_block = 1; if (blocks) print "" } next }
        in_block { print }' "$DRAWING_OF"
}

built=1
edges src || { built=0; fail "no src/*/*.o: build first"; }
edges client || { built=0; fail "no client/*.o: build first"; }

if [ "${1:-}" = --levels ]; then
    [ "$built" -eq 1 ] || exit 1
    drawing
    exit 0
fi

if [ "$built" -eq 1 ]; then
    check_cycles src
    check_layers
    check_cycles client
fi

# ConvctxDistributed() only in the Citus module (src/citus/)
others=$(grep -l 'ConvctxDistributed *(' src/*.c src/*/*.[ch] | grep -v -E '^src/citus/' || true)
if [ -z "$others" ]; then
    pass "ConvctxDistributed() only in the Citus module"
else
    fail "ConvctxDistributed() outside the Citus module: $others"
fi

# Recall plugs in by registration (src/core/companion.h): outside
# src/recall/, only the entry point names it, to register it.
others=$(grep -l -E 'Recall[A-Z]|"recall/' src/*/*.[ch] | grep -v -E '^src/recall/' || true)
if [ -z "$others" ]; then
    pass "recall named outside src/recall/ only by the entry point, which registers it"
else
    fail "recall named outside src/recall/ and the entry point: $others"
fi

if [ "$built" -eq 1 ]; then
    if out=$(diff <(documented) <(drawing)); then
        pass "the drawing of the levels in $DRAWING_OF is the one of scripts/check-deps.sh --levels"
    else
        fail "the drawing of the levels in $DRAWING_OF (\"$DRAWING_SECTION\", < ) differs from scripts/check-deps.sh --levels (> ):"
        echo "$out"
    fi
fi

echo "deps: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
