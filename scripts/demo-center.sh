#!/usr/bin/env bash
# A local computing center for trying Jointcloud on one machine: the bundled executor
# (nexec-master and two agents with declared demo resources, running jobs as real
# processes) behind the native adapter.
#   scripts/demo-center.sh start DIR          -> starts it (and a munged of its own, socket
#                                                DIR/munge.sock: NEXEC_MUNGE_SOCKET for the
#                                                nexec CLI); prints the adapter's host:port
#                                                As root, with docker-registry, skopeo, umoci,
#                                                runc and busybox installed, it also starts an
#                                                image registry on loopback (TLS; its CA in
#                                                DIR/registry-ca/ca.crt: give it to jointcloud's
#                                                --registry_ca_file) holding the demo's image,
#                                                which its jobs then run in
#   scripts/demo-center.sh register URL ADDR [DIR] -> registers center "local-1" at ADDR with
#                                                Jointcloud's REST API at URL, with specs
#                                                cpu-1 and gpu-1 and image pytorch-demo (by
#                                                reference to DIR's registry when it has one),
#                                                as the admin whose API token is in $JC_TOKEN
#   scripts/demo-center.sh push DIR SOURCE NAME:TAG -> copies SOURCE (a skopeo transport:
#                                                containers-storage:..., oci:...) into DIR's
#                                                registry as NAME:TAG and prints its digest.
#                                                The registry is read-only otherwise: no local
#                                                account pushes to it (as root, reopened for
#                                                this copy only, and the tag checked after)
#   scripts/demo-center.sh stop DIR           -> stops what start started
# With JC_DEMO_METRICS=1, the master, the agents and the adapter serve /metrics on ports of
# their own, each logged as "... metrics on http://127.0.0.1:PORT/metrics" in DIR/*.log.
# With JC_DEMO_METRICS_PORT=P instead, on fixed ports (scripts/run.sh --prometheus: 9092):
# the adapter on P, the master on P+1, the agents node1 and node2 on P+2 and P+3, as
# deploy/prometheus/local.yml scrapes them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${JC_BUILD_DIR:-$root/build}"
cmd=${1:-}

wait_for_port() {  # LOG PATTERN: prints the port the process logged
  local port=""
  for _ in $(seq 1 300); do
    port=$(grep -oE "$2 [0-9]+" "$1" 2>/dev/null | grep -oE '[0-9]+$' | head -n 1 || true)
    [[ -n "$port" ]] && { echo "$port"; return; }
    sleep 0.1
  done
  echo "demo-center: $(basename "$1" .log) did not start; its log:" >&2
  cat "$1" >&2
  return 1
}

start_munged() {  # DIR: nexec proves who calls with munge; the demo has its own munged and key
  local dir=$1
  command -v munged >/dev/null || { echo "demo-center: munged is not installed (scripts/setup.sh installs munge)" >&2; return 1; }
  mkdir -p "$dir/munge"
  chmod 755 "$dir"
  chmod 700 "$dir/munge"
  [[ -f "$dir/munge/munge.key" ]] || { dd if=/dev/urandom of="$dir/munge/munge.key" bs=1 count=1024 status=none; chmod 400 "$dir/munge/munge.key"; }
  if [[ -f "$dir/munge/munged.pid" ]] && kill -0 "$(cat "$dir/munge/munged.pid")" 2>/dev/null; then return 0; fi
  munged --force --socket="$dir/munge.sock" --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"
}

# The demo's image in a registry of its own: busybox and a file naming it, built from this
# host's packages (tests/testing/make-oci-image.sh), so the README's jobs run in an image
# rather than on the host. Skipped, saying why, where running images is not possible.
# Serves DIR's registry at ADDR (port 0: any), read-only when READONLY is true; writes
# DIR/registry.port and DIR/registry.pid.
run_registry() {  # DIR ADDR READONLY
  local dir=$1 addr=$2 readonly=$3 port=""
  cat >"$dir/registry/config.yml" <<YAML
version: 0.1
log: {level: info}
storage:
  filesystem: {rootdirectory: $dir/registry/data}
  maintenance: {readonly: {enabled: $readonly}}
http:
  addr: $addr
  tls: {certificate: $dir/registry/certs/registry.crt, key: $dir/registry/certs/registry.key}
YAML
  : >"$dir/registry.log"
  setsid docker-registry serve "$dir/registry/config.yml" >"$dir/registry.log" 2>&1 &
  echo $! >"$dir/registry.pid"
  for _ in $(seq 1 300); do
    port=$(grep -oE 'listening on 127\.0\.0\.1:[0-9]+' "$dir/registry.log" 2>/dev/null | grep -oE '[0-9]+$' | head -n 1 || true)
    [[ -n "$port" ]] && break
    sleep 0.1
  done
  [[ -n "$port" ]] || { echo "demo-center: the image registry did not start; its log:" >&2; cat "$dir/registry.log" >&2; return 1; }
  echo "$port" >"$dir/registry.port"
}

verify_pushed() {  # DIR REF DIGEST
  local got
  got=$(skopeo inspect --cert-dir "$1/registry-ca" --format '{{.Digest}}' "docker://$2") || return 1
  [[ "$got" == "$3" ]] && return 0
  echo "demo-center: $2 is $got, not $3 as pushed: another account pushed to the registry while it was writable" >&2
  return 1
}

stop_registry() {  # DIR: waits until its port is free again
  local dir=$1 pid
  [[ -f "$dir/registry.pid" ]] || return 0
  pid=$(cat "$dir/registry.pid")
  kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  rm -f "$dir/registry.pid"
}

start_registry() {  # DIR
  local dir=$1 tool
  if [[ $(id -u) -ne 0 ]]; then
    echo "demo-center: not root: image pytorch-demo has no content, and its jobs run on the host" >&2
    return 0
  fi
  for tool in docker-registry skopeo umoci runc busybox; do
    command -v "$tool" >/dev/null || {
      echo "demo-center: $tool is not installed: image pytorch-demo has no content, and its jobs run on the host" >&2
      return 0
    }
  done
  "$root/scripts/dev-ca.sh" "$dir/registry/certs" registry >/dev/null
  mkdir -p "$dir/registry-ca"
  cp "$dir/registry/certs/ca.crt" "$dir/registry-ca/ca.crt"
  # The port of the first start is kept: the image is registered by a reference naming it.
  local addr="127.0.0.1:0" port
  [[ -s "$dir/registry.port" ]] && addr="127.0.0.1:$(cat "$dir/registry.port")"
  # Writable only while this script pushes the demo's image, then started again read-only:
  # a registry on loopback without accounts would otherwise take pushes from every local
  # account, which could replace the demo's image under its tag (issue 44).
  run_registry "$dir" "$addr" false || return 1
  port=$(cat "$dir/registry.port")
  rm -rf "$dir/registry/layout"
  JC_IMAGE_PAD_MB=0 "$root/tests/testing/make-oci-image.sh" "$dir/registry/layout" demo \
    "the pytorch-demo image (busybox; a real center would hold PyTorch)" >/dev/null
  skopeo copy --quiet --dest-cert-dir "$dir/registry-ca" --digestfile "$dir/registry/demo.digest" \
    oci:"$dir/registry/layout":demo "docker://127.0.0.1:$port/demo/pytorch:demo"
  stop_registry "$dir"
  run_registry "$dir" "127.0.0.1:$port" true || return 1
  # Another account may have pushed to the tag while it was writable: read-only now, the tag
  # must name what this script pushed.
  verify_pushed "$dir" "127.0.0.1:$port/demo/pytorch:demo" "$(cat "$dir/registry/demo.digest")" || return 1
  echo "127.0.0.1:$port/demo/pytorch:demo" >"$dir/image.ref"
}

start() {
  local dir=$1
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  start_munged "$dir"
  export NEXEC_MUNGE_SOCKET="$dir/munge.sock"
  rm -f "$dir/image.ref"
  start_registry "$dir"
  local image_flags=() metrics=--metrics_address=
  [[ "${JC_DEMO_METRICS:-}" == 1 ]] && metrics=--metrics_address=127.0.0.1:0
  # Fixed ports: each process's own (metrics_at NAME: its --metrics_address flag).
  local base=${JC_DEMO_METRICS_PORT:-}
  if [[ -n "$base" ]] && ! [[ "$base" =~ ^[0-9]+$ && "$base" -ge 1 && "$base" -le 65532 ]]; then
    echo "demo-center: JC_DEMO_METRICS_PORT=$base is not a port (1-65532)" >&2
    return 1
  fi
  metrics_at() {  # adapter | master | node1 | node2
    [[ -n "$base" ]] || { echo "$metrics"; return; }
    local offset
    case "$1" in adapter) offset=0 ;; master) offset=1 ;; node1) offset=2 ;; node2) offset=3 ;; esac
    echo "--metrics_address=127.0.0.1:$((base + offset))"
  }
  [[ -s "$dir/image.ref" ]] && image_flags=(--registry_cert_dir="$dir/registry-ca")
  setsid "$build/executor/nexec-master" --listen=127.0.0.1:0 "$(metrics_at master)" --data_dir="$dir/nexec" \
    >"$dir/master.log" 2>&1 &
  echo $! >"$dir/master.pid"
  local master_port
  master_port=$(wait_for_port "$dir/master.log" "nexec master listening on port")
  # What the nexec CLI needs to reach this executor: `. DIR/nexec.env; nexec hosts`.
  printf 'export NEXEC_MASTER=127.0.0.1:%s NEXEC_MUNGE_SOCKET=%s\n' "$master_port" "$dir/munge.sock" >"$dir/nexec.env"
  for host in node1 node2; do
    setsid "$build/executor/nexec-agent" --master="127.0.0.1:$master_port" --host="$host" \
      --resources=cpus=16,gpus=2,mem=64G --state_dir="$dir/agent-$host" "$(metrics_at "$host")" ${image_flags[@]+"${image_flags[@]}"} \
      >"$dir/agent-$host.log" 2>&1 &
    echo $! >"$dir/agent-$host.pid"
  done
  # Ready once both agents have joined: before that the center reports no capacity, and a
  # job submitted at once would wait for the next usage report instead of being placed.
  local joined=0
  for _ in $(seq 1 300); do
    joined=$(NEXEC_MASTER="127.0.0.1:$master_port" "$build/executor/nexec" hosts 2>/dev/null | grep -cE '^node[12] +ok ' || true)
    [[ "$joined" -eq 2 ]] && break
    sleep 0.1
  done
  [[ "$joined" -eq 2 ]] || { echo "demo-center: the nexec agents did not join:" >&2; cat "$dir"/agent-*.log >&2; return 1; }
  cat >"$dir/center.yaml" <<YAML
center_id: local-1
security_grade: 3
static_power_watts: 2000
performance_factor: 1
network: {bandwidth_mbps: 10000, latency_ms: 1}
# Named ports for services and notebooks (SPEC A17): below the kernel's ephemeral ports.
ports: {first: 29600, last: 29699}
specs:
  - {id: cpu-1, cpu: 1, memory: 2Gi, execution_power_watts: 150}
  - {id: gpu-1, cpu: 4, memory: 16Gi, gpu: 1, execution_power_watts: 450}
images:
  - {id: pytorch-demo, name: PyTorch (demo)}
# Replicas never run as root: every project's run as the unprivileged account nobody here
# (a real center maps each project to an account of its own).
run_as: {default: nobody}
YAML
  # On a unix socket: the adapter admits only the accounts allowed to call it (root and its
  # own; the control plane runs as root here), which TCP on loopback could not tell apart.
  setsid "$build/adapters/jc-adapter-native" --listen="unix:$dir/adapter.sock" "$(metrics_at adapter)" \
    --nexec_master="127.0.0.1:$master_port" --center_config="$dir/center.yaml" --state_dir="$dir/adapter" \
    --poll_interval=200ms >"$dir/adapter.log" 2>&1 &
  echo $! >"$dir/adapter.pid"
  for _ in $(seq 1 300); do
    grep -q "listening on unix:" "$dir/adapter.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "listening on unix:" "$dir/adapter.log" || { echo "demo-center: the adapter did not start:" >&2; cat "$dir/adapter.log" >&2; return 1; }
  echo "unix:$dir/adapter.sock"
}

register() {
  local url=$1 address=$2 dir=${3:-}
  post() {  # PATH BODY: a 409 (already there) is fine on a second start
    local out
    out=$(curl -s -H "Authorization: Bearer ${JC_TOKEN:-}" -X "${3:-POST}" "$url$1" -d "$2")
    if ! grep -q '"code":"OK"\|"code":"ALREADY_EXISTS"' <<<"$out"; then
      echo "demo-center: $1 failed: $out" >&2
      return 1
    fi
  }
  post /openapi/v1/centers '{"ai_center_id": "local-1", "name": "Local demo center", "region": "local",
    "network_topology": "local/demo/local-1", "security_grade": 3, "adapter_address": "'"$address"'",
    "capacity": {"cpu": 32, "gpu": 4, "memory": 131072}}'
  # A restarted demo center listens on a new port.
  post /openapi/v1/centers/local-1 '{"adapter_address": "'"$address"'"}' PATCH
  post /openapi/v1/resourcespecs '{"resource_spec_id": "cpu-1", "resource_spec_name": "1 CPU, 2 GiB",
    "resource_quantity": {"cpu": "1", "memory": "2Gi"}, "service_type": "batch,interactive,streaming", "price": 1,
    "computing_center_list": "local-1"}'
  post /openapi/v1/resourcespecs '{"resource_spec_id": "gpu-1", "resource_spec_name": "1 GPU, 4 CPU, 16 GiB",
    "resource_quantity": {"cpu": "4", "memory": "16Gi", "gpu": "1"}, "service_type": "batch", "price": 10,
    "computing_center_list": "local-1"}'
  # With the demo's registry: by reference (jointcloud resolves it to a digest, which its
  # jobs run in; it needs --registry_ca_file=DIR/registry-ca/ca.crt).
  local reference=""
  [[ -n "$dir" && -s "$dir/image.ref" ]] && reference=', "reference": "'"$(cat "$dir/image.ref")"'"'
  post /openapi/v1/images '{"image_id": "pytorch-demo", "name": "PyTorch (demo)", "ai_center_id": "local-1",
    "framework": "PyTorch", "resource_spec": "cpu-1,gpu-1"'"$reference"'}'
  # Ready when the monitor has reached the adapter (the center is available) and the
  # scheduler sees it.
  for _ in $(seq 1 300); do
    if curl -s -H "Authorization: Bearer ${JC_TOKEN:-}" "$url/scheduler/algorithm/least_load/score/local-1?resourceSpecId=cpu-1" | grep -q '"code":"OK"'; then
      return 0
    fi
    sleep 0.1
  done
  echo "demo-center: local-1 did not become available; is its adapter up?" >&2
  return 1
}

push() {  # DIR SOURCE NAME:TAG
  local dir=$1 source=$2 name=$3 port
  [[ $(id -u) -eq 0 ]] || { echo "demo-center: push as root (the demo registry's owner)" >&2; return 1; }
  [[ -s "$dir/registry.port" && -f "$dir/registry.pid" ]] || { echo "demo-center: $dir runs no registry" >&2; return 1; }
  port=$(cat "$dir/registry.port")
  stop_registry "$dir"
  local pushed=0
  run_registry "$dir" "127.0.0.1:$port" false || return 1
  skopeo copy --quiet --dest-cert-dir "$dir/registry-ca" --digestfile "$dir/registry/push.digest" "$source" \
    "docker://127.0.0.1:$port/$name" || pushed=$?
  stop_registry "$dir"
  run_registry "$dir" "127.0.0.1:$port" true || return 1
  [[ "$pushed" -eq 0 ]] || return "$pushed"
  verify_pushed "$dir" "127.0.0.1:$port/$name" "$(cat "$dir/registry/push.digest")" || return 1
  cat "$dir/registry/push.digest"; echo
}

stop() {
  local dir=$1
  [[ -d "$dir" ]] || return 0
  for f in adapter agent-node1 agent-node2 master registry; do
    if [[ -f "$dir/$f.pid" ]]; then
      kill -- "-$(cat "$dir/$f.pid")" 2>/dev/null || kill "$(cat "$dir/$f.pid")" 2>/dev/null || true
      rm -f "$dir/$f.pid"
    fi
  done
  if [[ -f "$dir/munge/munged.pid" ]]; then
    kill "$(cat "$dir/munge/munged.pid")" 2>/dev/null || true
    rm -f "$dir/munge/munged.pid"
  fi
}

case "$cmd" in
  start) start "${2:?usage: demo-center.sh start DIR}" ;;
  register) register "${2:?usage: demo-center.sh register URL ADDR [DIR]}" "${3:?usage: demo-center.sh register URL ADDR [DIR]}" "${4:-}" ;;
  push) push "${2:?usage: demo-center.sh push DIR SOURCE NAME:TAG}" "${3:?usage: demo-center.sh push DIR SOURCE NAME:TAG}" "${4:?usage: demo-center.sh push DIR SOURCE NAME:TAG}" ;;
  stop) stop "${2:?usage: demo-center.sh stop DIR}" ;;
  *) echo "usage: demo-center.sh start DIR | register URL ADDR [DIR] | stop DIR" >&2; exit 2 ;;
esac
