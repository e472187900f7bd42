#!/usr/bin/env bash
# The executor on a real GPU (issue 29 item 8, issue 30 item 3): run on the GPU machine the
# `device` tool lends, as root, from the repository root, with the bundle that
# tests/gpu/make-bundle.sh made here (carried as .gpu):
#   bash tests/gpu/gpu-check.sh .gpu
# It starts munged, a nexec master and one agent (GPUs found by nvidia-smi), then checks as
# a user would: the host shows its GPU; a job holding it uses it through CUDA (the probe and
# a few PyTorch training steps); a job not holding it cannot open it; a job in its image
# holding the GPU uses it through the host's driver (CDI spec or /usr/local/nvidia) and
# nvidia-smi lists exactly it; a job in its image not holding it sees no GPU. Prints PASS
# or FAIL per check and exits non-zero on any FAIL. The image store is filled beforehand
# (the machine reaches no registry): pulls are checked by the e2e tests, not here.
set -u
bundle=$(cd "${1:-.gpu}" && pwd)
w=/tmp/gpucheck
rm -rf "$w"
mkdir -p "$w/work" "$w/out" "$w/munge"
chmod 755 "$w"
chmod 1777 "$w/work" "$w/out"
pass=0
fail=0
check() {  # NAME COMMAND...
  local name=$1
  shift
  if "$@"; then echo "PASS $name"; pass=$((pass + 1)); else echo "FAIL $name"; fail=$((fail + 1)); fi
}
nx() { LD_LIBRARY_PATH=$bundle/bin/lib "$bundle/bin/nexec" --master=127.0.0.1:6800 "$@"; }
field() { python3 -c 'import json,sys; t=sys.stdin.read(); print(json.loads(t[t.find("{"):]).get(sys.argv[1], ""))' "$1"; }
submit() { (cd "$w/work" && nx submit --json --user nobody "$@") | field job_id; }
wait_end() {  # ID -> DONE, EXIT or TIMEOUT
  local s i
  for i in $(seq 1 80); do
    s=$(nx job "$1" --json | field state)
    case $s in DONE | EXIT) echo "$s"; return ;; esac
    sleep 0.5
  done
  echo TIMEOUT
}
show() { echo "--- $1"; cat "$1" 2>/dev/null | head -40; }

echo "=== the machine"
uname -r
nvidia-smi -L
ls -la /dev/nvidia* 2>&1
echo "cgroup: $(stat -fc %T /sys/fs/cgroup) controllers: $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null)"
ls /usr/local/nvidia /usr/local/nvidia/lib64 2>&1 | head -20
ls /etc/cdi /var/run/cdi 2>&1
id nobody

echo "=== setup"
[[ -e /usr/lib/x86_64-linux-gnu/libseccomp.so.2 ]] || cp "$bundle/sys/libseccomp.so.2" /usr/lib/x86_64-linux-gnu/
ldconfig
install -m 755 "$bundle/sys/runc" /usr/bin/runc
for tool in skopeo umoci; do
  if [[ ! -x /usr/bin/$tool ]]; then
    printf '#!/bin/sh\necho "%s is not on this machine (gpu-check.sh fills the image store)" >&2\nexit 1\n' "$tool" >/usr/bin/$tool
    chmod 755 /usr/bin/$tool
  fi
done
runc --version | head -1
cp "$bundle/cuda_probe" "$w/cuda_probe"
chmod 755 "$w/cuda_probe"
chmod 700 "$w/munge"
head -c 1024 /dev/urandom >"$w/munge/munge.key"
chmod 400 "$w/munge/munge.key"
LD_LIBRARY_PATH=$bundle/bin/lib "$bundle/bin/munged" --force --socket="$w/munge/sock" --key-file="$w/munge/munge.key" \
  --pid-file="$w/munge/pid" --log-file="$w/munge/log" --seed-file="$w/munge/seed" || echo "munged did not start"
export NEXEC_MUNGE_SOCKET=$w/munge/sock
# The image, as a pull would leave it in the agent's store.
hex=$(sha256sum "$bundle/image.tar.gz" | cut -c1-64)
store=$w/agent/images
mkdir -p "$store/$hex"
chmod 700 "$store"
tar -xzf "$bundle/image.tar.gz" -C "$store/$hex"
du -sb "$store/$hex/rootfs" | cut -f1 >"$store/$hex/size"
touch "$store/$hex/ready"
ref=gpu.invalid/check/probe@sha256:$hex
LD_LIBRARY_PATH=$bundle/bin/lib "$bundle/bin/nexec-master" --listen=127.0.0.1:6800 --data_dir="$w/master" \
  --metrics_address=127.0.0.1:0 >"$w/master.log" 2>&1 &
# The agent in a cgroup of its own, as systemd starts it (Delegate=yes): under cgroup v2 a
# cgroup that holds other processes (this script's) passes no controllers to the tasks.
# One per run: a cgroup whose subtree_control an earlier agent filled takes no processes.
agent_cgroup=/sys/fs/cgroup/jc-gpu-check-$$
[[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]] && mkdir -p "$agent_cgroup"
(
  [[ -d $agent_cgroup ]] && echo "$BASHPID" >"$agent_cgroup/cgroup.procs"
  LD_LIBRARY_PATH=$bundle/bin/lib exec "$bundle/bin/nexec-agent" --master=127.0.0.1:6800 --host=gpu1 \
    --heartbeat=500ms --state_dir="$w/agent" --cgroups=on >"$w/agent.log" 2>&1
) &
for i in $(seq 1 60); do
  nx hosts --json 2>/dev/null | grep -q '"ok"' && break
  sleep 0.5
done
nx hosts
nx hosts --json >"$w/hosts.json"

echo "=== checks"
check "the agent contains tasks with every controller (no 'tasks get no ... controller')" \
  bash -c "grep -q 'tasks are contained' $w/agent.log && ! grep -q 'tasks get no' $w/agent.log"
check "the agent finds the GPU (nvidia-smi): the host offers gpu and model H100/H200" \
  grep -q -E '"H(100|200)"' "$w/hosts.json"

lib=/usr/local/nvidia/lib64
id1=$(submit -R "rusage[gpu=1]" -o "$w/out/bare-gpu.out" -- \
  "echo CVD=\$CUDA_VISIBLE_DEVICES; LD_LIBRARY_PATH=$lib:\$LD_LIBRARY_PATH $w/cuda_probe")
s1=$(wait_end "$id1")
show "$w/out/bare-gpu.out"
check "a bare job holding the GPU uses it through CUDA ($s1)" \
  grep -q "context and 64 MB allocation ok" "$w/out/bare-gpu.out"

cat >"$w/train.py" <<'PY'
import torch
torch.manual_seed(0)
x = torch.randn(4096, 64, device="cuda")
y = x @ torch.randn(64, 1, device="cuda")
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(200):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print("trained on", torch.cuda.get_device_name(0), "loss", round(loss.item(), 4), "ok" if loss.item() < 1.0 else "high")
PY
chmod 644 "$w/train.py"
id2=$(submit -R "rusage[gpu=1]" -o "$w/out/train.out" -- "env -u LD_LIBRARY_PATH HOME=/tmp $(command -v python3) $w/train.py")
s2=$(wait_end "$id2")
show "$w/out/train.out"
check "a bare job holding the GPU trains a model on it with PyTorch ($s2)" grep -q "ok$" "$w/out/train.out"

id3=$(submit -o "$w/out/bare-none.out" -- \
  "CUDA_VISIBLE_DEVICES=0 LD_LIBRARY_PATH=$lib $w/cuda_probe; if (exec 3</dev/nvidia0); then echo OPENED; else echo DENIED; fi")
s3=$(wait_end "$id3")
show "$w/out/bare-none.out"
check "a bare job not holding the GPU cannot open it, whatever CUDA_VISIBLE_DEVICES says ($s3)" \
  grep -q "^DENIED" "$w/out/bare-none.out"
check "... for want of permission (its cgroup), not of the node" grep -q "ermission\|not permitted" "$w/out/bare-none.out"

id4=$(submit --image "$ref" -R "rusage[gpu=1]" -o "$w/out/image-gpu.out" -- \
  "cat /etc/jc-image; echo CVD=\$CUDA_VISIBLE_DEVICES; ls /dev | grep nvidia; cuda_probe && nvidia-smi -L")
s4=$(wait_end "$id4")
show "$w/out/image-gpu.out"
nx job "$id4" --json | field reason
check "a job in its image holding the GPU uses it through the host's driver ($s4)" \
  grep -q "context and 64 MB allocation ok" "$w/out/image-gpu.out"
check "... and nvidia-smi in its image lists exactly one GPU" \
  test "$(grep -c '^GPU [0-9]' "$w/out/image-gpu.out")" = 1
check "... and CUDA_VISIBLE_DEVICES names it by UUID" grep -q "^CVD=GPU-" "$w/out/image-gpu.out"
check "... and it ran in the image" grep -q "the GPU check's image" "$w/out/image-gpu.out"

id5=$(submit --image "$ref" -o "$w/out/image-none.out" -- \
  "echo nodes=\$(ls /dev | grep -c nvidia); cuda_probe || echo NO-GPU")
s5=$(wait_end "$id5")
show "$w/out/image-none.out"
check "a job in its image not holding the GPU sees none ($s5)" \
  grep -q "^NO-GPU" "$w/out/image-none.out"

echo "=== rootless, as a Slurm job's batch script runs it for an ordinary account"
if id jcgpu >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin jcgpu; then
  uid=$(id -u jcgpu)
  gid=$(id -g jcgpu)
  rl=$w/rootless
  mkdir -p "$rl/work" "$rl/store-$uid/$hex"
  chmod 755 "$rl"
  tar -xzf "$bundle/image.tar.gz" -C "$rl/store-$uid/$hex"
  du -sb "$rl/store-$uid/$hex/rootfs" | cut -f1 >"$rl/store-$uid/$hex/size"
  touch "$rl/store-$uid/$hex/ready"
  chown -R "$uid:$gid" "$rl/store-$uid" "$rl/work"
  chmod 700 "$rl/store-$uid"
  install -m 755 "$bundle/bin/nexec-image-run" "$bundle/bin/nexec-userns-exec" "$rl/"
  LD_LIBRARY_PATH=$bundle/bin/lib "$bundle/bin/slurm_image_script" "$rl/nexec-image-run" "$rl/nexec-userns-exec" \
    "$rl/store-%u" "$ref" "$uid" "$gid" 1 "$rl/work" \
    'echo CVD=$CUDA_VISIBLE_DEVICES; id -u; cat /etc/jc-image; cuda_probe && nvidia-smi -L' >"$rl/job.sh"
  chmod 755 "$rl/job.sh"
  su jcgpu -s /bin/sh -c "cd $rl/work && SLURM_JOB_ID=7 CUDA_VISIBLE_DEVICES=0 sh $rl/job.sh" >"$w/out/rootless.out" 2>&1
  show "$w/out/rootless.out"
  check "a rootless job in its image (the Slurm adapter's way) uses the GPU through the node's driver" \
    grep -q "context and 64 MB allocation ok" "$w/out/rootless.out"
  check "... as the account's own uid inside" grep -qx "$uid" "$w/out/rootless.out"
else
  echo "FAIL could not make an account for the rootless check"
  fail=$((fail + 1))
fi

echo "=== logs"
tail -n 60 "$w/agent.log"
tail -n 20 "$w/master.log"
if [[ -n ${OUT:-} ]]; then cp "$w/agent.log" "$w/master.log" "$OUT/" 2>/dev/null; tar -C "$w" -czf "$OUT/out.tar.gz" out; fi
echo "=== $pass passed, $fail failed"
[[ $fail == 0 ]]
