#!/usr/bin/env bash
# A throwaway single-node Slurm cluster for tests and benchmarks, on loopback under DIR.
#   scripts/slurm.sh start DIR   -> starts munged, slurmctld and slurmd; prints SLURM_CONF
#   scripts/slurm.sh stop DIR    -> cancels jobs, stops exactly what start started
# The node declares CPUs=64 RealMemory=65536 and 8 GPUs (character devices standing in for
# them), so GPU requests (--gres=gpu:2) get CUDA_VISIBLE_DEVICES as on a real node.
# Needs Debian's slurm-wlm and munge (scripts/setup.sh --slurm installs them) and root.
set -euo pipefail
cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: slurm.sh start|stop DIR" >&2; exit 2; }

free_port() {
  local port
  for port in $(seq "$1" "$(($1 + 200))"); do
    if ! (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then echo "$port"; return; fi
  done
  echo "slurm.sh: no free port near $1" >&2
  exit 1
}

start() {
  [[ $(id -u) -eq 0 ]] || { echo "slurm.sh: Slurm's daemons need root here" >&2; exit 1; }
  for bin in munged slurmctld slurmd sbatch; do
    command -v "$bin" >/dev/null || { echo "slurm.sh: $bin is not installed (apt-get install slurm-wlm munge)" >&2; exit 1; }
  done
  mkdir -p "$dir"/{state,spool,log,dev,munge}
  # Jobs run as the accounts centers map projects to: slurmstepd runs their scripts from
  # the spool as them, so the cluster's directory must be traversable (mktemp makes it 0700).
  chmod 755 "$dir" "$dir/spool"
  dir=$(cd "$dir" && pwd)
  # Reachable by every account, as a real cluster's munge socket is (users submit with sbatch);
  # the key stays root's alone (0400).
  chmod 755 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1 count=1024 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/munge.sock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed"
  for i in 0 1 2 3 4 5 6 7; do
    [[ -e "$dir/dev/gpu$i" ]] || mknod "$dir/dev/gpu$i" c 1 3
  done
  local ctld_port slurmd_port
  ctld_port=$(free_port 16817)
  slurmd_port=$(free_port $((ctld_port + 1)))
  cat >"$dir/slurm.conf" <<CONF
ClusterName=jctest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SlurmdParameters=config_overrides
SchedulerParameters=batch_sched_delay=0,bf_interval=1
# Without a default, a job would hold the node's whole memory and jobs would run one by one.
DefMemPerCPU=100
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=64 RealMemory=65536 Gres=gpu:8 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE DefaultTime=01:00:00 State=UP
CONF
  {
    echo "AutoDetect=off"
    echo "NodeName=localhost Name=gpu File=$dir/dev/gpu[0-7]"
  } >"$dir/gres.conf"
  export SLURM_CONF="$dir/slurm.conf"
  setsid slurmctld -D -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$dir/slurmctld.started"
  setsid slurmd -D -N localhost -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
  echo $! >"$dir/slurmd.started"
  for _ in $(seq 1 300); do
    if [[ "$(sinfo -h -o %T 2>/dev/null)" == "idle" ]]; then
      echo "$SLURM_CONF"
      return
    fi
    sleep 0.1
  done
  echo "slurm.sh: the node did not become idle; logs in $dir/log" >&2
  tail -n 20 "$dir"/log/*.log >&2 || true
  exit 1
}

stop() {
  [[ -d "$dir" ]] || return 0
  dir=$(cd "$dir" && pwd)
  export SLURM_CONF="$dir/slurm.conf"
  if [[ -f "$SLURM_CONF" ]]; then scancel --quiet --user=root 2>/dev/null || true; fi
  for f in slurmd.started slurmctld.started; do
    if [[ -f "$dir/$f" ]]; then
      kill "$(cat "$dir/$f")" 2>/dev/null || true
    fi
  done
  # slurmstepd re-parents to init in its own session: find those of this cluster by the
  # SLURM_CONF in their environment.
  for pid in $(pgrep -x slurmstepd || true); do
    if { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$SLURM_CONF"; then
      kill -9 -- "-$(ps -o sid= -p "$pid" | tr -d ' ')" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
    fi
  done
  if [[ -f "$dir/munge/munged.pid" ]]; then
    munged --stop --socket="$dir/munge/munge.sock" >/dev/null 2>&1 || kill "$(cat "$dir/munge/munged.pid")" 2>/dev/null || true
  fi
  for f in slurmd.started slurmctld.started; do
    if [[ -f "$dir/$f" ]]; then
      for _ in $(seq 1 50); do kill -0 "$(cat "$dir/$f")" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$(cat "$dir/$f")" 2>/dev/null || true
    fi
  done
  rm -rf "$dir"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: slurm.sh start|stop DIR" >&2; exit 2 ;;
esac
