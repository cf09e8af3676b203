#!/usr/bin/env bash
# A real one-node SLURM (Debian 12: Slurm 22.05, munge, MariaDB + slurmdbd) on loopback, for
# rooflow's cluster tests (tests/workflow/test_slurm.py) and for trying profiles/slurm/ by hand.
#
#   tests/slurm/start-cluster.sh install        apt packages (once per machine; needs root)
#   tests/slurm/start-cluster.sh up [--fresh]   start munged, mariadbd, slurmdbd, slurmctld, slurmd
#   tests/slurm/start-cluster.sh down           stop what `up` started, by PID file
#   tests/slurm/start-cluster.sh status         exit 0 when every daemon is running, 1 otherwise
#
# Environment:
#   ROOFLOW_SLURM_BASE=/tmp/rooflow-slurm  all state, configs, logs, sockets, PID files
#   ROOFLOW_SLURM_ACCOUNTING=1             1: MariaDB + slurmdbd, `sacct` works (see below)
#                                          0: no database; snakemake then needs
#                                             --slurm-status-command squeue
#   ROOFLOW_SLURM_ACCOUNT=rooflow-ci       account created for the current user (accounting only)
#   ROOFLOW_SLURM_CPUS=16                  CPUs the node advertises
#   ROOFLOW_SLURM_MEM_MB=262144            RealMemory the node advertises
#   ROOFLOW_SLURM_DB_PORT=3306             MariaDB's TCP port on 127.0.0.1
#
# The cluster: node `$(hostname -s)` at 127.0.0.1 in two partitions, `cpu` (default) and `gpu`, with
# four fake GPUs typed like the catalogue's gres strings (gpu:a100 x2, gpu:v100 x2) and features
# `a100,v100,fakegpu` for `constraint:` entries.
#
# Why accounting (MariaDB + slurmdbd) by default: snakemake-executor-plugin-slurm 2.8.0 asks `sacct`
# for job status whenever `sacct` is on PATH -- which it always is once slurm-client is installed, and
# always is on a real cluster. Without slurmdbd every status query fails and Snakemake waits forever
# after its jobs ended. `--slurm-status-command squeue` avoids that, but then the tests would exercise
# a code path users do not run, could not check `-A <account>` (only slurmdbd rejects unknown
# accounts), and would lose `sacct` history to check against. The price is ~25 s more apt install and
# ~5 s more start-up. ROOFLOW_SLURM_ACCOUNTING=0 remains for a quick look without a database.
#
# Why the node advertises more than the machine has: a device's `slurm:` block asks for what a real
# GPU node offers (a100: 8 CPUs, 32 GB; retries scale memory by attempt). sbatch rejects requests no
# node can satisfy, so the node claims ROOFLOW_SLURM_CPUS/ROOFLOW_SLURM_MEM_MB, and
# `SlurmdParameters=config_overrides` keeps slurmd from draining it for "low" hardware. Nothing is
# enforced here (no cgroups), so jobs just share the real cores; Snakemake's `jobs:` bounds them.
#
# Needs root (daemons run as root, munge and mysql). Everything lives under $ROOFLOW_SLURM_BASE except
# symlinks /etc/slurm/{slurm,gres,slurmdbd}.conf -> $ROOFLOW_SLURM_BASE/etc/: the plugin's jobstep
# strips SLURM_* (SLURM_CONF included) from the environment of the `srun` inside each job, so the
# config must be at the compiled-in default path. `down` removes those symlinks again.
# Daemons are stopped by the PIDs in their PID files, never by name: other clusters or databases on
# the same machine are left alone.
set -euo pipefail

BASE=${ROOFLOW_SLURM_BASE:-/tmp/rooflow-slurm}
ACCOUNTING=${ROOFLOW_SLURM_ACCOUNTING:-1}
ACCOUNT=${ROOFLOW_SLURM_ACCOUNT:-rooflow-ci}
CPUS=${ROOFLOW_SLURM_CPUS:-16}
MEM_MB=${ROOFLOW_SLURM_MEM_MB:-262144}
DB_PORT=${ROOFLOW_SLURM_DB_PORT:-3306}
CLUSTER=rooflow
HOST=$(hostname -s)
MUNGE_SOCK=$BASE/munge-run/munge.socket
SLURM_PORTS=(6817 6818 6819)
PIDFILES=(run/slurmd.pid run/slurmctld.pid run/slurmdbd.pid mysql-run/mysqld.pid munge-run/munged.pid)

log() { printf '[start-cluster %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

wait_for() {  # wait_for <seconds> <what> <cmd...>: poll every 0.2 s
    local t=$1 what=$2; shift 2
    local end=$((SECONDS + t))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < end)) || die "timed out after ${t}s waiting for $what (logs: $BASE/log/)"
        sleep 0.2
    done
}

pid_alive() {  # pid_alive <pidfile relative to BASE>
    [[ -s $BASE/$1 ]] && kill -0 "$(cat "$BASE/$1")" 2>/dev/null
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

packages() {
    local p=(munge slurmctld slurmd slurm-client)
    [[ $ACCOUNTING == 1 ]] && p+=(slurmdbd mariadb-server)
    echo "${p[@]}"
}

cmd_install() {
    [[ $(id -u) == 0 ]] || die "install needs root (apt-get)"
    local missing=()
    for p in $(packages); do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]} == 0)); then log "packages already installed"; return 0; fi
    local t0=$SECONDS
    export DEBIAN_FRONTEND=noninteractive
    # A fresh machine (CI) has no package lists yet; update once when the install cannot proceed.
    apt-get install -y --no-install-recommends "${missing[@]}" ||
        { apt-get update -q && apt-get install -y --no-install-recommends "${missing[@]}"; }
    log "installed ${missing[*]} in $((SECONDS - t0))s"
}

write_configs() {
    mkdir -p "$BASE"/{etc,log,run,state/ctld,state/d,fakedev}
    # gres/gpu drops GPUs without File=, and File= must stat() as a device: symlinks to harmless
    # character devices pass. Types match the catalogue's gres strings (gpu:a100:1, gpu:v100:1).
    local i=0
    for dev in null zero full urandom; do ln -sfn "/dev/$dev" "$BASE/fakedev/nvidia$i"; i=$((i + 1)); done
    cat >"$BASE/etc/gres.conf" <<EOF
NodeName=$HOST Name=gpu Type=a100 File=$BASE/fakedev/nvidia[0-1]
NodeName=$HOST Name=gpu Type=v100 File=$BASE/fakedev/nvidia[2-3]
EOF
    local acct
    if [[ $ACCOUNTING == 1 ]]; then
        acct="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
# with a non-default munge socket, the connection to slurmdbd takes it from here:
AccountingStoragePass=$MUNGE_SOCK
AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:v100
AccountingStorageEnforce=associations
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30"
    else
        acct="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
    fi
    cat >"$BASE/etc/slurm.conf" <<EOF
# Written by rooflow's tests/slurm/start-cluster.sh; regenerated on every \`up\`.
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK
SlurmctldPort=${SLURM_PORTS[0]}
SlurmdPort=${SLURM_PORTS[1]}
StateSaveLocation=$BASE/state/ctld
SlurmdSpoolDir=$BASE/state/d
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmdPidFile=$BASE/run/slurmd.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups in containers/VMs like CI's: track processes by /proc, bind nothing. There must be no
# cgroup.conf either (22.05 has no CgroupPlugin=disabled; a bad value kills slurmd).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
# schedule quickly: the tests wait for every job
SchedulerParameters=sched_interval=2
# no mail on this test cluster (silences "Configured MailProg is invalid")
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without it a job with no --mem takes the whole node's memory
DefMemPerCPU=500
# trust this file, not the hardware probe: the node may claim more than the machine has (see script)
SlurmdParameters=config_overrides
# ended jobs stay visible to \`squeue --states=all\` this long; the plugin's squeue mode needs
# >= 3 x slurm-init-seconds-before-status-checks
MinJobAge=600
# a file record of every ended job, readable without slurmdbd
JobCompType=jobcomp/filetxt
JobCompLoc=$BASE/log/jobcomp.log
KillWait=5
$acct
GresTypes=gpu
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM_MB Gres=gpu:a100:2,gpu:v100:2 Feature=a100,v100,fakegpu State=UNKNOWN
PartitionName=cpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$HOST Default=NO MaxTime=INFINITE State=UP
EOF
    if [[ $ACCOUNTING == 1 ]]; then
        cat >"$BASE/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=${SLURM_PORTS[2]}
SlurmUser=root
DebugLevel=info
LogFile=$BASE/log/slurmdbd.log
PidFile=$BASE/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=rooflow-ci
StorageLoc=slurm_acct_db
EOF
        chmod 600 "$BASE/etc/slurmdbd.conf"   # slurmdbd refuses a world-readable config
        cat >"$BASE/etc/my.cnf" <<EOF
[mysqld]
user=mysql
datadir=$BASE/mysql
socket=$BASE/mysql-run/mysqld.sock
pid-file=$BASE/mysql-run/mysqld.pid
log-error=$BASE/log/mariadb.err
bind-address=127.0.0.1
port=$DB_PORT
# sizes slurmdbd's documentation asks for
innodb_buffer_pool_size=128M
innodb_log_file_size=64M
innodb_lock_wait_timeout=900
[client]
socket=$BASE/mysql-run/mysqld.sock
EOF
    else
        rm -f "$BASE/etc/slurmdbd.conf"
    fi
    mkdir -p /etc/slurm
    [[ ! -e /etc/slurm/cgroup.conf ]] || log "WARNING: /etc/slurm/cgroup.conf exists; slurmd may refuse it"
    for f in slurm.conf gres.conf slurmdbd.conf; do
        if [[ -e $BASE/etc/$f ]]; then
            ln -sfn "$BASE/etc/$f" "/etc/slurm/$f"
        elif [[ -L /etc/slurm/$f && $(readlink "/etc/slurm/$f") == "$BASE/etc/$f" ]]; then
            rm -f "/etc/slurm/$f"
        fi
    done
}

start_munge() {
    mkdir -p "$BASE/munge" "$BASE/munge-run"
    chown munge:munge "$BASE/munge" "$BASE/munge-run"
    chmod 700 "$BASE/munge"
    chmod 755 "$BASE/munge-run"   # clients need o+x on the socket's directory
    [[ -s $BASE/munge/munge.key ]] ||
        runuser -u munge -- mungekey --create --keyfile="$BASE/munge/munge.key"
    runuser -u munge -- munged --key-file="$BASE/munge/munge.key" --socket="$MUNGE_SOCK" \
        --log-file="$BASE/munge/munged.log" --pid-file="$BASE/munge-run/munged.pid" \
        --seed-file="$BASE/munge/munged.seed"
    wait_for 10 "munged" sh -c "munge -S '$MUNGE_SOCK' -n | unmunge -S '$MUNGE_SOCK'"
}

start_db() {
    mkdir -p "$BASE/mysql" "$BASE/mysql-run"
    touch "$BASE/log/mariadb.err"
    chown mysql:mysql "$BASE/mysql" "$BASE/mysql-run" "$BASE/log/mariadb.err"
    local first=0
    if [[ ! -d $BASE/mysql/mysql ]]; then
        first=1
        mariadb-install-db --defaults-file="$BASE/etc/my.cnf" --skip-test-db \
            --auth-root-authentication-method=socket >"$BASE/log/mariadb-install.log" 2>&1 ||
            die "mariadb-install-db failed, see $BASE/log/mariadb-install.log"
    fi
    # mariadbd does not daemonize: detach it; its PID file is what `down` uses.
    setsid mariadbd --defaults-file="$BASE/etc/my.cnf" </dev/null >/dev/null 2>&1 &
    wait_for 30 "mariadbd" mariadb-admin --defaults-file="$BASE/etc/my.cnf" ping
    wait_for 10 "mariadbd's PID file" test -s "$BASE/mysql-run/mysqld.pid"
    if ((first)); then
        mariadb --defaults-file="$BASE/etc/my.cnf" -e "
          CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'rooflow-ci';
          CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'rooflow-ci';
          CREATE DATABASE IF NOT EXISTS slurm_acct_db;
          GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
          GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
          FLUSH PRIVILEGES;"
    fi
    slurmdbd
    wait_for 30 "slurmdbd on port ${SLURM_PORTS[2]}" bash -c "exec 3<>/dev/tcp/127.0.0.1/${SLURM_PORTS[2]}"
}

add_account() {
    local user; user=$(id -un)
    # slurmctld registers the cluster with slurmdbd on start; the account needs the cluster.
    wait_for 30 "cluster registration in slurmdbd" \
        sh -c "sacctmgr -n list cluster format=cluster%30 | grep -qw $CLUSTER"
    sacctmgr -n list account format=account%64 | grep -qw -- "$ACCOUNT" ||
        sacctmgr -i add account "$ACCOUNT" description="rooflow tests" organization=rooflow >/dev/null
    sacctmgr -n list assoc user="$user" format=account%64 | grep -qw -- "$ACCOUNT" ||
        sacctmgr -i add user "$user" account="$ACCOUNT" defaultaccount="$ACCOUNT" >/dev/null
    wait_for 30 "sacct" sacct -n -X
}

cmd_up() {
    [[ $(id -u) == 0 ]] || die "up needs root (daemons run as root, munge and mysql)"
    command -v slurmctld >/dev/null || die "slurm is not installed: run '$0 install' first"
    local t0=$SECONDS
    if [[ ${1:-} == --fresh ]]; then
        cmd_down
        rm -rf "${BASE:?}"/{etc,state,log,run,mysql,mysql-run,munge,munge-run,fakedev}
    fi
    if cmd_status >/dev/null; then log "already up (ROOFLOW_SLURM_BASE=$BASE)"; return 0; fi
    # Half-started leftovers: stop them, then check nobody else holds our ports.
    cmd_down
    local ports=("${SLURM_PORTS[@]}")
    [[ $ACCOUNTING == 1 ]] && ports+=("$DB_PORT")
    for p in "${ports[@]}"; do
        port_free "$p" || die "port $p on 127.0.0.1 is taken by another process; is another SLURM running?"
    done
    write_configs
    log "munged"; start_munge
    if [[ $ACCOUNTING == 1 ]]; then log "mariadbd + slurmdbd"; start_db; fi
    log "slurmctld"; slurmctld
    log "slurmd"; slurmd
    wait_for 60 "node $HOST idle" sh -c "sinfo -h -n $HOST -o %T | grep -qx idle"
    if [[ $ACCOUNTING == 1 ]]; then add_account; fi
    log "cluster up in $((SECONDS - t0))s (ROOFLOW_SLURM_BASE=$BASE)"
    sinfo >&2
}

stop_pidfiles() {  # stop_pidfiles <pidfile relative to BASE>...: SIGTERM all, wait up to 15 s, SIGKILL
    local f pid pids=() names=()
    for f in "$@"; do
        [[ -s $BASE/$f ]] || continue
        pid=$(cat "$BASE/$f")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" && pids+=("$pid") && names+=("$(basename "$f" .pid)($pid)")
        fi
    done
    for _ in $(seq 1 150); do
        local alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then log "$pid still alive after 15 s: SIGKILL"; kill -KILL "$pid"; fi
    done
    ((${#pids[@]} == 0)) || log "stopped ${names[*]}"
    for f in "$@"; do rm -f "${BASE:?}/$f"; done
}

cmd_down() {
    # compute daemons first (slurmctld flushes job records to slurmdbd), then slurmdbd, then the
    # database and munge; each group in parallel
    stop_pidfiles run/slurmd.pid run/slurmctld.pid
    stop_pidfiles run/slurmdbd.pid
    stop_pidfiles mysql-run/mysqld.pid munge-run/munged.pid
    local f
    for f in slurm.conf gres.conf slurmdbd.conf; do
        if [[ -L /etc/slurm/$f && $(readlink "/etc/slurm/$f") == "$BASE/etc/$f" ]]; then rm -f "/etc/slurm/$f"; fi
    done
}

cmd_status() {
    local f rc=0 want=("${PIDFILES[@]}")
    [[ $ACCOUNTING == 1 ]] || want=(run/slurmd.pid run/slurmctld.pid munge-run/munged.pid)
    for f in "${want[@]}"; do
        if pid_alive "$f"; then echo "running  $f ($(cat "$BASE/$f"))"; else echo "stopped  $f"; rc=1; fi
    done
    return $rc
}

case ${1:-} in
    install) cmd_install ;;
    up) shift; cmd_up "$@" ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *) echo "usage: $0 install | up [--fresh] | down | status" >&2; exit 2 ;;
esac
