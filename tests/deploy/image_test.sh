#!/usr/bin/env bash
# [C3] The image builds here with podman from an mmdebstrap root filesystem (no registry,
# no RUN steps: deploy/image/build.sh), every binary in it answers --version inside its
# root filesystem (podman image mount + chroot), and the image runs: a container of it
# serves REST (/readyz, the console at /ui/) and stops cleanly. Then (issue 30) it is
# pushed to a registry on loopback (the demo center's, TLS) and a nexec job runs in it by
# digest: a job in an image the project built from an mmdebstrap root.
#   image_test.sh ROOT BUILD_DIR VERSION
set -euo pipefail
root=$1
build=$2
version=$3
tag="localhost/jointcloud-test:$$"
container=""
mounted=""
demo=""
cleanup() {
  set +e
  [[ -n "$demo" ]] && JC_BUILD_DIR="$build" "$root/scripts/demo-center.sh" stop "$demo" && rm -rf "$demo"
  [[ -n "$container" ]] && podman rm -f "$container" >/dev/null 2>&1
  [[ -n "$mounted" ]] && podman image unmount "$tag" >/dev/null 2>&1
  podman rmi -f "$tag" >/dev/null 2>&1
}
trap cleanup EXIT
[[ $(id -u) -eq 0 ]] || { echo "FAIL: building and mounting images needs root"; exit 1; }

"$root/deploy/image/build.sh" "$build" "$tag"

mounted=$(podman image mount "$tag")
for b in jointcloud jcctl nexec-master nexec-agent nexec nexec-run jc-adapter-native jc-adapter-local jc-adapter-slurm; do
  out=$(chroot "$mounted" "/usr/local/bin/$b" --version)
  [[ "$out" =~ ^$b\ $version\ \(commit\ ([0-9a-f]+|unknown)\)$ ]] || { echo "FAIL: $b --version in the image printed \"$out\""; exit 1; }
  echo "ok (chroot): $out"
done
chroot "$mounted" id -u jointcloud >/dev/null || { echo "FAIL: the image has no jointcloud user"; exit 1; }
podman image unmount "$tag" >/dev/null
mounted=""

# A container of the image. The sandboxes these tests run in refuse to raise resource
# limits (no CAP_SYS_RESOURCE), which podman's defaults do, so the container gets limits
# no higher than this shell's (and processes under 16384, the most seen allowed); runc,
# as crun refuses the hybrid cgroup layout.
nofile=$(ulimit -Sn)
nproc=$(ulimit -Su)
[[ "$nproc" == unlimited || "$nproc" -gt 16384 ]] && nproc=16384
run=(podman --runtime runc run --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
out=$("${run[@]}" --rm "$tag" --version)
[[ "$out" =~ ^jointcloud\ $version ]] || { echo "FAIL: the container's jointcloud --version printed \"$out\""; exit 1; }
echo "ok (container): $out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
container=$("${run[@]}" -d --network=host "$tag" --rest_address=127.0.0.1:"$port" --grpc_address=127.0.0.1:0 \
  --admin_address=127.0.0.1:0 --data_dir=/var/lib/jointcloud)
for _ in $(seq 1 300); do
  curl -sf "127.0.0.1:$port/readyz" >/dev/null && break
  sleep 0.1
done
curl -sf "127.0.0.1:$port/readyz" >/dev/null || { podman logs "$container"; echo "FAIL: the container's server is not ready"; exit 1; }
# Read whole before matching: under pipefail, grep -q leaving early fails the writer.
grep -q '<title>Jointcloud console</title>' <<<"$(curl -sf "127.0.0.1:$port/ui/")" || { echo "FAIL: no console in the container"; exit 1; }
grep -q "first start: created the federation admin" <<<"$(podman logs "$container" 2>&1)" || { podman logs "$container"; echo "FAIL: no admin created"; exit 1; }
podman stop -t 10 "$container" >/dev/null
code=$(podman inspect "$container" --format '{{.State.ExitCode}}')
[[ "$code" == 0 ]] || { podman logs "$container"; echo "FAIL: the container's server exited $code on SIGTERM"; exit 1; }
echo "ok: a container of the image served REST and the console, and stopped cleanly"

# A nexec job in the image, pulled by digest from the demo center's registry.
demo=$(mktemp -d /tmp/jc-image-job.XXXXXX)
JC_BUILD_DIR="$build" "$root/scripts/demo-center.sh" start "$demo" >/dev/null || { echo "FAIL: the demo center did not start"; exit 1; }
[[ -s "$demo/image.ref" ]] || { echo "FAIL: the demo center started no registry"; exit 1; }
registry=$(cut -d/ -f1 "$demo/image.ref")
digest=$(JC_BUILD_DIR="$build" "$root/scripts/demo-center.sh" push "$demo" "containers-storage:$tag" jointcloud:test)
ref="$registry/jointcloud@$digest"
# shellcheck disable=SC1091
. "$demo/nexec.env"
mkdir -p "$demo/work" && chmod 1777 "$demo/work"
out=$(cd "$demo/work" && "$build/executor/nexec" submit --json --user nobody --image "$ref" -o "$demo/work/job.out" -- \
  'cat /etc/debian_version; /usr/local/bin/jcctl --version')
job=$(grep -oE '"job_id": *"[0-9]+"' <<<"$out" | grep -oE '[0-9]+')
[[ -n "$job" ]] || { echo "$out"; echo "FAIL: the job in the image was not submitted"; exit 1; }
state=""
for _ in $(seq 1 1200); do
  state=$("$build/executor/nexec" job "$job" --json | grep -oE '"state": *"[A-Z]+"' | head -n 1 | grep -oE '[A-Z]+')
  [[ "$state" == DONE || "$state" == EXIT ]] && break
  sleep 0.1
done
grep -q "^jcctl $version" "$demo/work/job.out" 2>/dev/null || {
  cat "$demo/work/job.out" 2>/dev/null; "$build/executor/nexec" job "$job"; echo "FAIL: the job did not run in the image ($state)"; exit 1; }
[[ -x /usr/local/bin/jcctl ]] && { echo "FAIL: this host has /usr/local/bin/jcctl: the check proves nothing"; exit 1; }
echo "ok: a nexec job ran in the image (Debian $(head -n 1 "$demo/work/job.out")), pulled by digest from a registry"
