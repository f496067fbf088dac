#!/usr/bin/env bash
# Stop the dlbench one-node SLURM cluster started by slurm-up.sh: cancel the
# jobs, then stop slurmd, slurmctld, slurmdbd, mariadbd and munged (the ones
# whose pid files are in the state directory). Idempotent; the state directory
# (logs, database, spool) is kept, so slurm-up.sh starts the same cluster again.
#
# Environment: DLBENCH_SLURM_DIR (default /tmp/dlbench-slurm), as for slurm-up.sh.
set -uo pipefail

STATE=${DLBENCH_SLURM_DIR:-/tmp/dlbench-slurm}
RUN="$STATE/run"
LOG="$STATE/log"
T0=$(date +%s.%N)

say() { echo "slurm-down: $*"; }
die() { echo "slurm-down: ERROR: $*" >&2; exit 1; }

if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo -E "$0" "$@"
    fi
    die "must run as root (and sudo is not available)"
fi

# pid_of PIDFILE NAME: print the pid in PIDFILE if it is a running NAME
pid_of() {
    local pidfile=$1 name=$2 pid
    [ -s "$pidfile" ] || return 1
    pid=$(tr -dc 0-9 <"$pidfile")
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 1
    echo "$pid"
}

failed=
# stop NAME PIDFILE [LOG]: SIGTERM, wait up to 30 s, then SIGKILL
stop() {
    local name=$1 pidfile=$2 log=${3:-} pid i
    pid=$(pid_of "$pidfile" "$name") || { rm -f "$pidfile"; return 0; }
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 1 300); do
        [ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || break
        # a zombie has stopped; its parent just has not reaped it yet
        [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = Z ] && break
        sleep 0.1
    done
    if [ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] \
       && [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]; then
        say "$name ($pid) did not stop within 30 s; killing it${log:+ (log: $log)}"
        kill -KILL "$pid" 2>/dev/null
        sleep 0.5
        [ -d "/proc/$pid" ] && [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ] \
            && failed="$failed $name"
    fi
    rm -f "$pidfile"
    say "stopped $name ($pid)"
}

# Cancel the jobs while slurmctld still runs, so that no job step outlives slurmd.
if pid_of "$RUN/slurmctld.pid" slurmctld >/dev/null; then
    jobs=$(timeout 10 squeue -h -o '%i' 2>/dev/null | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
        say "cancelling jobs: $jobs"
        timeout 10 scancel $jobs 2>/dev/null
        for i in $(seq 1 40); do
            [ -z "$(timeout 5 squeue -h -t running,completing -o '%i' 2>/dev/null)" ] && break
            sleep 0.5
        done
    fi
fi

stop slurmd    "$RUN/slurmd.pid"    "$LOG/slurmd.log"
stop slurmctld "$RUN/slurmctld.pid" "$LOG/slurmctld.log"
stop slurmdbd  "$RUN/slurmdbd.pid"  "$LOG/slurmdbd.log"
stop mariadbd  "$STATE/mariadb/mariadbd.pid" "$LOG/mariadbd.log"
stop munged    "$STATE/munge/munged.pid"     "$LOG/munged.log"

# Job step daemons (and their jobs) left over by this cluster's slurmd: only those with a step socket in its
# spool folder (another SLURM's on this machine are not ours to kill).
for pid in $(bash "$(dirname "$0")/stepds.sh" "$STATE"); do
    say "killing leftover slurmstepd $pid and its processes"
    pkids=$(ps -eo pid=,ppid= | awk -v p="$pid" '$2 == p { print $1 }')
    kill -KILL "$pid" $pkids 2>/dev/null
done

left=$(ps -eo pid=,stat=,comm= | awk '$2 !~ /^Z/ && $3 ~ /^(slurmd|slurmctld|slurmscriptd|slurmdbd|slurmstepd|mariadbd|munged)$/ { print $3 "(" $1 ")" }' | tr '\n' ' ')
if [ -n "$failed" ]; then
    die "could not stop:$failed"
fi
if [ -n "$left" ]; then
    say "WARNING: still running, not started from $STATE (left alone): $left"
fi
say "cluster down in $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s (state kept in $STATE)"
