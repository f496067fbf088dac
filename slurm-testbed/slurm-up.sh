#!/usr/bin/env bash
# Start (or confirm) the dlbench one-node SLURM cluster with accounting:
# munged, mariadbd, slurmdbd, slurmctld, slurmd. Idempotent.
#
#   slurm-testbed/slurm-up.sh            # install what is missing, start, wait for an idle node
#
# Environment:
#   DLBENCH_SLURM_DIR      state directory (logs, spool, pid files, database);
#                          default /tmp/dlbench-slurm
#   DLBENCH_SLURM_DB_PORT  MariaDB port on 127.0.0.1 (default 6820)
#   DLBENCH_SLURM_USERS    extra users to register in account dlbench
#                          (root and $SUDO_USER always are)
#   DLBENCH_SLURM_TIMEOUT  seconds to wait for each daemon (default 60)
# Stop everything with slurm-testbed/slurm-down.sh.
set -euo pipefail

T0=$(date +%s.%N)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEMPLATES="$HERE/templates"

STATE=${DLBENCH_SLURM_DIR:-/tmp/dlbench-slurm}
CLUSTER=dlbench
ACCOUNT=dlbench
PARTITION=debug
DB_PORT=${DLBENCH_SLURM_DB_PORT:-6820}
DB_NAME=slurm_acct_db
DB_USER=slurm
DB_PASS=${DLBENCH_SLURM_DB_PASS:-dlbench-slurm}
CTLD_PORT=6817
SLURMD_PORT=6818
DBD_PORT=6819
ACCT_FREQ=1   # seconds between MaxRSS samples; 5 s left short jobs without MaxRSS
TIMEOUT=${DLBENCH_SLURM_TIMEOUT:-60}
ETC=/etc/slurm
PACKAGES=(munge mariadb-server slurmdbd slurmctld slurmd slurm-client)

LOG="$STATE/log"
RUN="$STATE/run"
MUNGE_DIR="$STATE/munge"
DB_DIR="$STATE/mariadb"
DB_SOCK="$DB_DIR/mysqld.sock"
DB_PID="$DB_DIR/mariadbd.pid"

say() { echo "slurm-up: $*"; }

# One clear line on stderr, then the tail of the relevant log, then exit 1.
die() {
    local msg=$1 log=${2:-}
    if [ -n "$log" ]; then
        echo "slurm-up: ERROR: $msg (log: $log)" >&2
        if [ -s "$log" ]; then
            echo "---- last lines of $log ----" >&2
            tail -n 25 "$log" >&2
        fi
    else
        echo "slurm-up: ERROR: $msg" >&2
    fi
    exit 1
}

case "$STATE" in /*) ;; *) die "DLBENCH_SLURM_DIR must be an absolute path, got '$STATE'";; esac

if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo -E "$0" "$@"
    fi
    die "must run as root (and sudo is not available)"
fi

elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# pid_alive PIDFILE NAME: the pid in PIDFILE is a running process called NAME
pid_alive() {
    local pidfile=$1 name=$2 pid
    [ -s "$pidfile" ] || return 1
    pid=$(tr -dc 0-9 <"$pidfile")
    [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]
}

# wait_for SECONDS PIDFILE NAME CMD...: retry CMD every 0.5 s until it succeeds.
# Returns 1 after SECONDS, or 2 as soon as daemon NAME (pid in PIDFILE) has been
# gone for 5 s (it died during start-up: no point in waiting any longer).
wait_for() {
    local limit=$1 pidfile=$2 name=$3; shift 3
    local end=$(( $(date +%s) + limit )) gone=0
    while ! "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || return 1
        if pid_alive "$pidfile" "$name"; then gone=0; else
            gone=$(( gone + 1 )); [ "$gone" -lt 10 ] || return 2
        fi
        sleep 0.5
    done
}

# wait_daemon NAME PIDFILE LOG WHAT CMD...: wait_for, or die with a clear line.
wait_daemon() {
    local name=$1 pidfile=$2 log=$3 what=$4 rc=0; shift 4
    wait_for "$TIMEOUT" "$pidfile" "$name" "$@" || rc=$?
    case $rc in
        0) ;;
        2) die "$name exited during start-up" "$log";;
        *) die "$name does not answer ($what) after ${TIMEOUT}s" "$log";;
    esac
}

# ---------------------------------------------------------------- packages
missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    # Keep the packages' maintainer scripts from starting system-wide daemons:
    # this script starts its own, with their state under $STATE.
    made_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    aptlog=$(mktemp /tmp/dlbench-slurm-apt.XXXXXX)
    if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
            --no-install-recommends "${missing[@]}"; } >"$aptlog" 2>&1; then
        [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
        die "apt-get install ${missing[*]} failed" "$aptlog"
    fi
    [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
    rm -f "$aptlog"
    say "packages installed after $(elapsed) s"
fi

# ---------------------------------------------------------------- layout
NODE=$(hostname -s)
ADDR=127.0.0.1
CPUS=$(nproc)
MEM_MB=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
# Leave a margin for the OS and the daemons: 5% but at least 512 MB.
MARGIN=$(( MEM_MB / 20 )); [ "$MARGIN" -ge 512 ] || MARGIN=512
REALMEM=$(( MEM_MB - MARGIN ))
[ "$REALMEM" -gt 0 ] || die "cannot work out the memory from /proc/meminfo ($MEM_MB MB)"
DEF_MEM_PER_CPU=$(( REALMEM / CPUS ))

# /etc/slurm is shared: refuse to repoint it while a cluster with another state dir runs.
if [ -f "$ETC/slurm.conf" ]; then
    other=$(sed -n 's|^StateSaveLocation=\(.*\)/slurmctld$|\1|p' "$ETC/slurm.conf")
    if [ -n "$other" ] && [ "$other" != "$STATE" ] && pid_alive "$other/run/slurmctld.pid" slurmctld; then
        die "another dlbench cluster is up with state dir $other; stop it first (DLBENCH_SLURM_DIR=$other slurm-testbed/slurm-down.sh)"
    fi
fi

# The state dir's default lies in /tmp, where any user may have made it first: chown as root in a folder
# someone else controls (a link planted for munge/ or a log file) would hand that user whatever it names.
# So it must be a real folder of root's, writable by root alone (links inside it are refused too).
if [ -e "$STATE" ] || [ -L "$STATE" ]; then
    [ ! -L "$STATE" ] && [ -d "$STATE" ] || die "$STATE is not a plain folder (a link?); remove it or set DLBENCH_SLURM_DIR"
    [ "$(stat -c %u "$STATE")" = 0 ] || die "$STATE belongs to user $(stat -c %U "$STATE"), not root; remove it or set DLBENCH_SLURM_DIR"
    [ $(( 0$(stat -c %a "$STATE") & 022 )) = 0 ] || die "$STATE is writable by others than root; remove it or set DLBENCH_SLURM_DIR"
else
    mkdir -m 755 "$STATE"
fi
for d in "$LOG" "$RUN" "$STATE/etc" "$STATE/slurmctld" "$STATE/slurmd" "$MUNGE_DIR" "$DB_DIR"; do
    [ ! -L "$d" ] || die "$d is a link; remove it"
    mkdir -p "$d"
done
mkdir -p "$ETC"
chmod 755 "$STATE" "$LOG" "$RUN"
chown -h munge:munge "$MUNGE_DIR"; chmod 700 "$MUNGE_DIR"
chown -h mysql:mysql "$DB_DIR"; chmod 750 "$DB_DIR"
# Daemons that do not run as root write their log files as their own user (-h: a link is not followed).
for f in munged:munge mariadbd:mysql; do
    [ ! -L "$LOG/${f%%:*}.log" ] || die "$LOG/${f%%:*}.log is a link; remove it"
    touch "$LOG/${f%%:*}.log"; chown -h "${f#*:}:${f#*:}" "$LOG/${f%%:*}.log"
done

render() {   # render TEMPLATE > output
    sed -e "s|@CLUSTER@|$CLUSTER|g" -e "s|@NODE@|$NODE|g" -e "s|@ADDR@|$ADDR|g" \
        -e "s|@CPUS@|$CPUS|g" -e "s|@REALMEM@|$REALMEM|g" \
        -e "s|@DEF_MEM_PER_CPU@|$DEF_MEM_PER_CPU|g" -e "s|@STATE@|$STATE|g" \
        -e "s|@CTLD_PORT@|$CTLD_PORT|g" -e "s|@SLURMD_PORT@|$SLURMD_PORT|g" \
        -e "s|@DBD_PORT@|$DBD_PORT|g" -e "s|@ACCT_FREQ@|$ACCT_FREQ|g" \
        -e "s|@DB_PORT@|$DB_PORT|g" -e "s|@DB_USER@|$DB_USER|g" \
        -e "s|@DB_PASS@|$DB_PASS|g" -e "s|@DB_NAME@|$DB_NAME|g" "$1"
}

config_changed=
install_conf() {   # install_conf NAME MODE: render template, copy to /etc/slurm if different
    local name=$1 mode=$2
    render "$TEMPLATES/$name.in" >"$STATE/etc/$name"
    chmod "$mode" "$STATE/etc/$name"
    if ! cmp -s "$STATE/etc/$name" "$ETC/$name"; then
        if [ -e "$ETC/$name" ] && ! grep -qE 'Generated by (slurm-testbed|cluster)/slurm-up.sh' "$ETC/$name"; then
            cp -p "$ETC/$name" "$ETC/$name.before-dlbench"
            say "kept the previous $ETC/$name as $ETC/$name.before-dlbench"
        fi
        install -m "$mode" -o root -g root "$STATE/etc/$name" "$ETC/$name"
        config_changed="$config_changed $name"
    fi
}
install_conf slurm.conf 644
install_conf slurmdbd.conf 600

# ---------------------------------------------------------------- already up?
node_state() { sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n 1; }
node_usable() { case "$(node_state)" in idle|mixed|allocated|completing) return 0;; *) return 1;; esac; }

if pid_alive "$RUN/slurmdbd.pid" slurmdbd && pid_alive "$RUN/slurmctld.pid" slurmctld \
   && pid_alive "$RUN/slurmd.pid" slurmd && pid_alive "$DB_PID" mariadbd \
   && timeout 10 munge -n 2>/dev/null | timeout 10 unmunge >/dev/null 2>&1 \
   && node_usable; then
    [ -z "$config_changed" ] || say "WARNING: generated${config_changed} changed while the cluster was up; run slurm-down.sh and slurm-up.sh to apply it"
    say "cluster $CLUSTER already up: node $NODE $(node_state), partition $PARTITION (state in $STATE); checked in $(elapsed) s"
    exit 0
fi

# ---------------------------------------------------------------- munge
munge_ok() { timeout 10 munge -n 2>/dev/null | timeout 10 unmunge >/dev/null 2>&1; }
if ! munge_ok; then
    if [ ! -s /etc/munge/munge.key ]; then
        say "creating /etc/munge/munge.key"
        mungekey --create --keyfile=/etc/munge/munge.key >/dev/null 2>&1 \
            || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge; chown munge:munge /run/munge; chmod 755 /run/munge
    if ! pid_alive "$MUNGE_DIR/munged.pid" munged; then
        rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
        runuser -u munge -- /usr/sbin/munged --log-file="$LOG/munged.log" \
            --pid-file="$MUNGE_DIR/munged.pid" --seed-file="$MUNGE_DIR/munged.seed" \
            >>"$LOG/munged.log" 2>&1 || die "munged did not start" "$LOG/munged.log"
    fi
    wait_daemon munged "$MUNGE_DIR/munged.pid" "$LOG/munged.log" "munge -n | unmunge" munge_ok
fi

# ---------------------------------------------------------------- mariadb
DB_CLIENT=(mariadb --no-defaults --socket="$DB_SOCK" -u root)
db_ok() { mariadb-admin --no-defaults --socket="$DB_SOCK" -u root ping; }
if ! pid_alive "$DB_PID" mariadbd; then
    if [ ! -d "$DB_DIR/data/mysql" ]; then
        say "initialising MariaDB data in $DB_DIR/data"
        mariadb-install-db --no-defaults --user=mysql --datadir="$DB_DIR/data" \
            --auth-root-authentication-method=socket --skip-test-db \
            >>"$LOG/mariadbd.log" 2>&1 || die "mariadb-install-db failed" "$LOG/mariadbd.log"
    fi
    rm -f "$DB_SOCK"
    setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DB_DIR/data" \
        --socket="$DB_SOCK" --pid-file="$DB_PID" --log-error="$LOG/mariadbd.log" \
        --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
        --innodb-lock-wait-timeout=900 </dev/null >>"$LOG/mariadbd.log" 2>&1 &
    echo $! >"$DB_PID"; chown -h mysql:mysql "$DB_PID"   # mariadbd rewrites it with the same pid
fi
wait_daemon mariadbd "$DB_PID" "$LOG/mariadbd.log" "mariadb-admin ping on $DB_SOCK" db_ok
"${DB_CLIENT[@]}" -e "
    CREATE DATABASE IF NOT EXISTS $DB_NAME;
    CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
    CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
    GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'127.0.0.1';
    GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';
    FLUSH PRIVILEGES;" >>"$LOG/mariadbd.log" 2>&1 \
    || die "could not create database $DB_NAME / user $DB_USER" "$LOG/mariadbd.log"

# ---------------------------------------------------------------- slurmdbd
dbd_ok() { timeout 10 sacctmgr -n -P list cluster format=cluster; }
if ! pid_alive "$RUN/slurmdbd.pid" slurmdbd; then
    /usr/sbin/slurmdbd >>"$LOG/slurmdbd.log" 2>&1 || die "slurmdbd did not start" "$LOG/slurmdbd.log"
fi
wait_daemon slurmdbd "$RUN/slurmdbd.pid" "$LOG/slurmdbd.log" "sacctmgr list cluster" dbd_ok

# Register cluster, account and users before slurmctld connects (all idempotent).
sacct_add() {
    local out
    out=$(timeout 20 sacctmgr -i "$@" 2>&1) || case "$out" in
        *"Nothing new added"*|*"already exists"*) ;;
        *) die "sacctmgr -i $* failed: $(echo "$out" | tr '\n' ' ')" "$LOG/slurmdbd.log";;
    esac
}
if ! sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"; then
    sacct_add add cluster "$CLUSTER"
fi
if ! sacctmgr -n -P list account "$ACCOUNT" format=account 2>/dev/null | grep -qx "$ACCOUNT"; then
    sacct_add add account "$ACCOUNT" Cluster="$CLUSTER" Description="dlbench benchmarks" Organization=dlbench
fi
for u in root ${SUDO_USER:-} ${DLBENCH_SLURM_USERS:-}; do
    if ! sacctmgr -n -P list assoc cluster="$CLUSTER" account="$ACCOUNT" user="$u" format=user 2>/dev/null | grep -qx "$u"; then
        sacct_add add user "$u" Account="$ACCOUNT" Cluster="$CLUSTER" DefaultAccount="$ACCOUNT"
    fi
done

# ---------------------------------------------------------------- slurmctld, slurmd
ctld_ok() { timeout 10 scontrol ping | grep -q 'is UP'; }
if ! pid_alive "$RUN/slurmctld.pid" slurmctld; then
    /usr/sbin/slurmctld >>"$LOG/slurmctld.log" 2>&1 || die "slurmctld did not start" "$LOG/slurmctld.log"
fi
wait_daemon slurmctld "$RUN/slurmctld.pid" "$LOG/slurmctld.log" "scontrol ping" ctld_ok

if ! pid_alive "$RUN/slurmd.pid" slurmd; then
    /usr/sbin/slurmd >>"$LOG/slurmd.log" 2>&1 || die "slurmd did not start" "$LOG/slurmd.log"
fi

# ---------------------------------------------------------------- node idle
end=$(( $(date +%s) + TIMEOUT ))
resumed=
while :; do
    st=$(node_state)
    case "$st" in
        idle|mixed|allocated|completing) break;;
        down*|drain*|fail*)
            if [ -z "$resumed" ]; then
                say "node $NODE is $st; resuming it"
                scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true
                resumed=1
            fi;;
    esac
    if [ "$(date +%s)" -ge "$end" ]; then
        reason=$(sinfo -h -N -n "$NODE" -o '%E' 2>/dev/null | head -n 1)
        die "node $NODE is '${st:-not listed}' after ${TIMEOUT}s, not idle (reason: ${reason:-none})" "$LOG/slurmd.log"
    fi
    pid_alive "$RUN/slurmd.pid" slurmd || [ "$(date +%s)" -lt $(( end - TIMEOUT + 5 )) ] \
        || die "slurmd exited" "$LOG/slurmd.log"
    sleep 0.5
done

say "cluster $CLUSTER up in $(elapsed) s: node $NODE ($CPUS CPUs, RealMemory=${REALMEM} MB) $(node_state) in partition $PARTITION; state and logs in $STATE"
