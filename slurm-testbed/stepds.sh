#!/usr/bin/env bash
# Print the pids of the slurmstepd processes of the cluster whose state directory is STATE: those holding a
# step socket in its spool folder (SlurmdSpoolDir=STATE/slurmd, slurm-testbed/templates/slurm.conf.in). Another
# SLURM on the machine keeps its sockets elsewhere, so its step daemons are never listed.
#   slurm-testbed/stepds.sh STATE
set -uo pipefail
spool="${1:?usage: stepds.sh STATE}/slurmd/"
# /proc/net/unix: Num RefCount Protocol Flags Type St Inode Path
inodes=" $(awk -v d="$spool" 'NR > 1 && index($8, d) == 1 { print $7 }' /proc/net/unix | tr '\n' ' ') "
[ "$inodes" = "  " ] && exit 0
for pid in $(ps -eo pid=,comm= | awk '$2 == "slurmstepd" { print $1 }'); do
    for fd in /proc/"$pid"/fd/*; do
        link=$(readlink "$fd" 2>/dev/null) || continue
        if [[ $link =~ ^socket:\[([0-9]+)\]$ ]] && [[ $inodes == *" ${BASH_REMATCH[1]} "* ]]; then
            echo "$pid"
            break
        fi
    done
done
