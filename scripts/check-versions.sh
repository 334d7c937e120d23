#!/usr/bin/env bash
# Released scripts never change. Every install or update script of an
# extension (sql/<ext>--*.sql) that leads to a version below the
# default_version of its control file, and every form of a released script
# kept for the upgrade tests (test/upgrade/), must have the SHA-256 that
# test/released-scripts.sha256 records for it: the form it had when that
# version was superseded. A script of the current version may still change;
# when a new version becomes the default, the scripts of the one before are
# recorded (sha256sum FILE >> test/released-scripts.sha256).
# The last line is "versions: N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
recorded=test/released-scripts.sha256
ok=0 bad=0
pass() { ok=$((ok + 1)); }
fail() { bad=$((bad + 1)); echo "versions: $*"; }

# version_lt A B: A sorts before B as versions do
version_lt() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]; }

for control in *.control; do
    ext=${control%.control}
    current=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$control")
    for f in sql/"$ext"--*.sql; do
        name=$(basename "$f" .sql)
        target=${name##*--}
        version_lt "$target" "$current" || continue
        want=$(awk -v f="$f" '$2 == f { print $1 }' "$recorded")
        if [ -z "$want" ]; then
            fail "$f leads to $target, below $ext's default_version $current, and $recorded has no checksum of it"
        elif [ "$(sha256sum "$f" | cut -d' ' -f1)" != "$want" ]; then
            fail "$f changed after $target was released: a released script never changes; put the change in a new version's scripts"
        else
            pass
        fi
    done
done
# every recorded script is still there, unchanged
while read -r sum f; do
    if [ ! -f "$f" ]; then
        fail "$f, a released script, is gone"
    elif [ "$(sha256sum "$f" | cut -d' ' -f1)" != "$sum" ]; then
        case "$f" in sql/*) ;; *) fail "$f changed: it is the form a released script had" ;; esac
    else
        case "$f" in sql/*) ;; *) pass ;; esac
    fi
done < "$recorded"

echo "versions: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
