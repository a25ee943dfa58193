#!/usr/bin/env bash
# A throwaway Slurm cluster on localhost for the tests: munged, slurmctld and slurmd
# (Debian's slurm-wlm 22.05 packages) with private sockets, state and logs under WORK,
# one node with two GPUs whose gres "device files" are plain files in WORK/dev.
#   slurm_harness.sh start WORK CTLD_PORT SLURMD_PORT   -> prints SLURM_CONF=<path>
#   slurm_harness.sh start WORK CTLD_PORT SLURMD_PORT DBD_PORT DB_PORT
#       the same with accounting and limits: a MariaDB of its own (a fresh datadir in
#       WORK/mysql, on 127.0.0.1:DB_PORT), slurmdbd on DBD_PORT storing into it, and
#       slurmctld enforcing association limits on gres/gpu (AccountingStorageEnforce=
#       limits,safe); the cluster "gltest" and the account "nlp" with user root exist.
#   slurm_harness.sh stop WORK
# Needs root (slurmd runs jobs as their users; munged's key must be root's; mariadbd and
# slurmdbd are told to run as root).
set -euo pipefail
cmd=$1
work=$2

# Stops the daemons of the pid files WORK/NAME.pid named, all at once: SIGTERM, then
# SIGKILL for any still there after 5 s.
stop_together() {
  local pids=()
  for p in "$@"; do
    if [ -f "$work/$p.pid" ]; then
      pids+=("$(cat "$work/$p.pid")")
      kill "${pids[-1]}" 2>/dev/null || true
      rm -f "$work/$p.pid"
    fi
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}

# The Slurm daemons first, then what they talk to.
stop() {
  stop_together slurmd slurmctld
  stop_together slurmdbd mariadbd munged
}

# MariaDB on a fresh datadir (its socket in WORK, TCP on 127.0.0.1:DB_PORT only), a
# database and a user for slurmdbd, slurmdbd, then the cluster, an account and its user.
accounting_failed() {
  echo "$1 did not start" >&2
  tail -n 20 "$work/log/$1.log" >&2 || true
  stop
  exit 1
}
start_accounting() {
  mkdir -p "$work/mysql"
  mariadb-install-db --no-defaults --user=root --datadir="$work/mysql/data" \
    --auth-root-authentication-method=normal --skip-test-db > "$work/log/mariadb-install.log" 2>&1
  mariadbd --no-defaults --user=root --datadir="$work/mysql/data" --socket="$work/mysql/mysqld.sock" \
    --bind-address=127.0.0.1 --port="$db_port" --pid-file="$work/mariadbd.pid" \
    --log-error="$work/log/mariadbd.log" --innodb-buffer-pool-size=64M \
    --innodb-lock-wait-timeout=900 > /dev/null 2>&1 < /dev/null &
  sql() { mariadb --no-defaults --socket="$work/mysql/mysqld.sock" -uroot "$@"; }
  for _ in $(seq 150); do sql -e 'SELECT 1' > /dev/null 2>&1 && break; sleep 0.2; done
  sql -e 'SELECT 1' > /dev/null || accounting_failed mariadbd
  pass=$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
  sql -e "CREATE DATABASE slurm_acct_db;
          CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
          GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"

  # slurmdbd reads slurmdbd.conf beside SLURM_CONF; it holds a password: root's, 0600.
  (umask 077 && cat > "$work/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.sock
DbdAddr=127.0.0.1
DbdHost=$host
DbdPort=$dbd_port
SlurmUser=root
PidFile=$work/slurmdbd.pid
LogFile=$work/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
CONF
  )
  chmod 600 "$work/slurmdbd.conf"
  slurmdbd
  for _ in $(seq 100); do timeout 5 sacctmgr -n show cluster > /dev/null 2>&1 && break; sleep 0.2; done
  timeout 5 sacctmgr -n show cluster > /dev/null || accounting_failed slurmdbd
  sacctmgr -i add cluster gltest > /dev/null
  sacctmgr -i add account nlp Cluster=gltest > /dev/null
  sacctmgr -i add user root Account=nlp Cluster=gltest > /dev/null
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi

ctld_port=$3
slurmd_port=$4
dbd_port=${5:-}
db_port=${6:-}
host=$(hostname -s)
node=glnode
mkdir -p "$work"/{state,spool,dev,log,munge}
chmod 700 "$work/munge"
: > "$work/dev/nvidia0"
: > "$work/dev/nvidia1"

# munge: a key of our own, a socket of our own.
dd if=/dev/urandom of="$work/munge/munge.key" bs=1 count=1024 status=none
chmod 400 "$work/munge/munge.key"
munged --force --key-file="$work/munge/munge.key" --socket="$work/munge/munge.sock" \
  --pid-file="$work/munged.pid" --log-file="$work/log/munged.log" \
  --seed-file="$work/munge/munged.seed"

accounting="AccountingStorageType=accounting_storage/none"
if [ -n "$dbd_port" ]; then
  # Limits on GPU-minutes: gres/gpu tracked, limits enforced (safe: a job starts only if
  # its time limit fits in what is left, so no running job is killed for the limit), the
  # multifactor priority plugin keeping the usage, undecayed, as a quota needs.
  accounting="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
AccountingStoragePass=$work/munge/munge.sock
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=limits,safe
PriorityType=priority/multifactor
PriorityDecayHalfLife=0
PriorityUsageResetPeriod=MONTHLY"
fi

cat > "$work/slurm.conf" <<CONF
ClusterName=gltest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
$accounting
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
GresTypes=gpu
NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 CPUs=2 Gres=gpu:2 State=UNKNOWN
PartitionName=gpu-a Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
cat > "$work/gres.conf" <<CONF
NodeName=$node Name=gpu File=$work/dev/nvidia[0-1]
CONF

export SLURM_CONF="$work/slurm.conf"
if [ -n "$dbd_port" ]; then
  start_accounting
fi
slurmctld -f "$SLURM_CONF" -i
slurmd -f "$SLURM_CONF" -N "$node"

# Wait until the node is idle (at most 30 s).
for _ in $(seq 150); do
  state=$(sinfo -h -N -n "$node" -o %t 2>/dev/null || true)
  case "$state" in
    idle*) echo "SLURM_CONF=$SLURM_CONF"; exit 0 ;;
  esac
  sleep 0.2
done
echo "slurm node never became idle (state: ${state:-none})" >&2
tail -n 20 "$work/log/slurmctld.log" "$work/log/slurmd.log" >&2 || true
stop
exit 1
