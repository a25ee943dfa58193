#!/usr/bin/env bash
# A throwaway Slurm cluster on localhost for agent_slurm_test: munged, slurmctld and
# slurmd (Debian's slurm-wlm 22.05 packages) with private sockets, state and logs under
# WORK, one node with two GPUs whose gres "device files" are plain files in WORK/dev.
#   slurm_harness.sh start WORK CTLD_PORT SLURMD_PORT   -> prints SLURM_CONF=<path>
#   slurm_harness.sh stop WORK
# Needs root (slurmd runs jobs as their users; munged's key must be root's).
set -euo pipefail
cmd=$1
work=$2

stop() {
  for p in slurmd slurmctld munged; do
    if [ -f "$work/$p.pid" ]; then
      pid=$(cat "$work/$p.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$work/$p.pid"
    fi
  done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi

ctld_port=$3
slurmd_port=$4
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
AccountingStorageType=accounting_storage/none
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
