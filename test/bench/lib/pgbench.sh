# Helpers of the pgbench benchmarks, sourced by their run.sh inside the
# throwaway cluster (PGHOST/PGPORT/PGUSER set, PG_CONFIG exported): pgbench
# runs that refuse failures, their figures, the share of the machine that
# other processes took meanwhile, and one-client runs pinned to one CPU.
# Sourced by test/bench/request/run.sh, turns/run.sh and peers/run.sh.

PGBENCH="$("$PG_CONFIG" --bindir)/pgbench"
CPUS=$(nproc)

# pgbench LOG DB CLIENTS ARGS...: run it with -c CLIENTS (-M prepared, -r),
# refuse failed or aborted clients, keep the log.
pgbench_run() {
    local log=$1 db=$2 clients=$3; shift 3
    set -- -c "$clients" -j $(( clients < CPUS ? clients : CPUS )) "$@"
    if ! pinned "$clients" "$PGBENCH" -n -M prepared -r "$@" "$db" >"$log" 2>&1; then
        echo "== pgbench failed ($log):"; cat "$log"; exit 1
    fi
    if grep -qiE 'aborted|error' "$log" || ! grep -qE '^number of failed transactions: 0 ' "$log"; then
        echo "== pgbench reported failures ($log):"; cat "$log"; exit 1
    fi
}

tps_of() { sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$1"; }
latency_of() { sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$1"; }
transactions_of() { sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$1"; }

# Latencies (ms) of the SQL statements of a pgbench -r report, " / "
# separated, leaving out those that never ran (the other branch of an \if).
statement_latencies() {
    awk '/^statement latencies/ { on = 1; next }
         on && $1 ~ /^[0-9.]+$/ && $1 + 0 > 0 && $3 !~ /^\\/ { printf "%s%s", sep, $1; sep = " / " }
         END { print "" }' "$1"
}

# CPU ticks (user + system) of the whole machine, and of this cluster plus
# our own children (pgbench, psql): the difference over a run is someone
# else's load. Steal (the hypervisor's) is reported apart.
POSTMASTER=$(head -1 "$(psql -X -At -c 'SHOW data_directory')/postmaster.pid")
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4, $9 }' /proc/stat; }
our_ticks() {
    # Processes may exit between the glob and the read.
    { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v pm="$POSTMASTER" '
        # comm may hold spaces: count fields from the closing parenthesis
        { sub(/^.*\) /, ""); ppid = $2 }
        ppid == pm { t += $12 + $13 }
        END { print t + 0 }' | { read -r live
        awk -v live="$live" '{ sub(/^.*\) /, ""); t += $12 + $13 + $14 + $15 } END { print t + live }' \
            "/proc/$POSTMASTER/stat" "/proc/$$/stat"; }
}
# other_load COMMAND...: run it; sets OTHER_LOAD and STEAL to the % of one
# core that other processes and the hypervisor took meanwhile.
other_load() {
    local m0 s0 o0 t0 m1 s1 o1 t1
    read -r m0 s0 < <(machine_ticks); o0=$(our_ticks); t0=$(date +%s%N)
    "$@"
    read -r m1 s1 < <(machine_ticks); o1=$(our_ticks); t1=$(date +%s%N)
    read -r OTHER_LOAD STEAL < <(awk -v m="$((m1 - m0))" -v o="$((o1 - o0))" -v s="$((s1 - s0))" \
        -v ticks="$(awk -v ns="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" 'BEGIN { print ns / 1e9 * hz }')" \
        'BEGIN { l = (m - o) * 100 / ticks; printf "%d %d\n", (l < 0 ? 0 : l), s * 100 / ticks }')
}

# On a VM, a single client ping-ponging between two CPUs mostly measures how
# fast an idle vCPU wakes up: pin one-client runs, the cluster included
# (new backends inherit), to one CPU so they measure the work done.
ALL_CPUS=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status)
ONE_CPU=${ALL_CPUS%%[-,]*}
pin_cluster() {
    local pid
    for pid in "$POSTMASTER" $(awk -v pm="$POSTMASTER" '{ sub(/^.*\) /, "") } $2 == pm { split(FILENAME, f, "/"); print f[3] }' \
                                 /proc/[0-9]*/stat 2>/dev/null || true); do
        taskset -a -p -c "$1" "$pid" >/dev/null 2>&1 || true
    done
}
# pinned CLIENTS COMMAND...: run it on one CPU when CLIENTS is 1, else on all.
pinned() {
    local clients=$1 rc=0; shift
    [ "$clients" -eq 1 ] || { "$@"; return; }
    pin_cluster "$ONE_CPU"
    taskset -c "$ONE_CPU" "$@" || rc=$?
    pin_cluster "$ALL_CPUS"
    return $rc
}
