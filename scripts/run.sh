#!/usr/bin/env bash
# Installs what is missing, builds, and starts Jointcloud with the embedded store in
# ./data (REST on 127.0.0.1:8080, gRPC on 127.0.0.1:50051, services' endpoints on
# 127.0.0.1:8081) together with a local demo
# center: the bundled executor (a master and two agents with declared resources, running
# jobs as real processes) behind the native adapter, registered as center "local-1" with
# specs cpu-1 and gpu-1 and image pytorch-demo. Ctrl-C stops everything.
#   scripts/run.sh [--no-demo-center] [--prometheus] [jointcloud flags...]
# With --prometheus (installing Debian's prometheus where missing), the demo center serves
# its metrics on fixed ports (its adapter 127.0.0.1:9092, nexec master :9093, agents :9094
# and :9095) and Prometheus runs on 127.0.0.1:9091 with deploy/prometheus/local.yml aimed at
# them and at the control plane (scripts/prometheus-local.sh; its configuration and data in
# data/prometheus/), which the console's charts then read (--prometheus_url); the Grafana
# dashboards of deploy/grafana/dashboards/ read it too (docs/operations.md).
# (see `build/services/server/jointcloud --help` for the flags). The first start writes the
# federation admin's API token to data/admin.token (docs/security.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${JC_BUILD_DIR:-$root/build}"
demo=1
prom=0
prom_listen=127.0.0.1:9091   # deploy/prometheus/local.yml's neighbours: 9092-9095 the demo's
args=()
for a in "$@"; do
  case "$a" in
    --no-demo-center) demo=0 ;;
    --prometheus) prom=1 ;;
    *) args+=("$a") ;;
  esac
done
if [[ $prom -eq 1 && $demo -eq 0 ]]; then
  echo "run: --prometheus scrapes the demo center too: leave out --no-demo-center, or run Prometheus"
  echo "     with your own copy of deploy/prometheus/local.yml (docs/operations.md)"
  exit 2
fi
setup_more=()
[[ $prom -eq 1 ]] && setup_more+=(--prometheus)
if [[ ! -x "$build/services/server/jointcloud" ]]; then
  # Measured from a bare Debian 12 root on 2 cores: 6.3 minutes to a served API, apt
  # included (docs/benchmarks.md, "First start").
  echo "run: first start: installs the Debian packages that are missing, then builds the server, nexec,"
  echo "     the adapters and jcctl (244 steps): about 6 minutes on 2 cores, less on more. Later starts"
  echo "     rebuild only what changed; the tests, benchmarks and fuzzers are scripts/test.sh's to build."
fi
# The demo center runs its jobs in its image (pytorch-demo, by digest from a registry of
# its own): that needs root (the registry, runc) and five more packages.
if [[ $demo -eq 1 && $(id -u) -eq 0 ]]; then
  echo "run: the demo center runs its jobs in the pytorch-demo image: installing, where missing, an image"
  echo "     registry, skopeo, umoci, runc and busybox (scripts/setup.sh --demo)"
  "$root/scripts/setup.sh" --demo ${setup_more[@]+"${setup_more[@]}"}
else
  [[ $demo -eq 1 ]] && echo "run: not root: the demo center's jobs run on the host, not in the pytorch-demo image (run as root for it)"
  "$root/scripts/setup.sh" ${setup_more[@]+"${setup_more[@]}"}
fi
"$root/scripts/build.sh" --run
mkdir -p "$root/data"

if [[ $demo -eq 0 ]]; then
  exec "$build/services/server/jointcloud" --data_dir="$root/data" "${args[@]}"
fi

demo_dir="$root/data/demo-center"
server_pid=""
cleanup() {
  set +e  # stop everything even when a step fails
  [[ $prom -eq 1 ]] && "$root/scripts/prometheus-local.sh" stop "$root/data/prometheus"
  if [[ -n "$server_pid" ]]; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  "$root/scripts/demo-center.sh" stop "$demo_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
demo_env=()
# With --prometheus: its metrics on the ports deploy/prometheus/local.yml names.
[[ $prom -eq 1 ]] && demo_env=(JC_DEMO_METRICS_PORT=9092)
adapter=$(env ${demo_env[@]+"${demo_env[@]}"} "$root/scripts/demo-center.sh" start "$demo_dir")
echo "run: demo center local-1 (nexec master, 2 agents) behind its adapter at $adapter"

# Services' and notebooks' endpoints on 127.0.0.1:8081 (docs/security.md "Endpoints"),
# unless the flags say otherwise.
[[ " ${args[*]:-} " == *" --endpoint_address="* ]] || args+=(--endpoint_address=127.0.0.1:8081)
# The demo's image registry (when the demo center could start one): jointcloud resolves
# the demo image's reference there at registration.
[[ -s "$demo_dir/registry-ca/ca.crt" ]] && args+=(--registry_ca_file="$demo_dir/registry-ca/ca.crt")
# The console's charts from the Prometheus started below, unless the flags name another.
[[ $prom -eq 0 || " ${args[*]:-} " == *" --prometheus_url="* ]] || args+=(--prometheus_url="http://$prom_listen")
log="$root/data/jointcloud.log"
: >"$log"
"$build/services/server/jointcloud" --data_dir="$root/data" "${args[@]}" > >(tee -a "$log") 2>&1 &
server_pid=$!
url=""
for _ in $(seq 1 300); do
  url=$(grep -oE 'rest listening on http://[0-9.]+:[0-9]+' "$log" | head -n 1 | sed 's/rest listening on //' || true)
  [[ -n "$url" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { echo "run: jointcloud exited"; exit 1; }
  sleep 0.1
done
[[ -n "$url" ]] || { echo "run: jointcloud did not start"; exit 1; }
# The first start on an empty store wrote the federation admin's API token.
token_file="$root/data/admin.token"
no_auth=0
for a in "${args[@]}"; do
  [[ "$a" == --admin_token_file=* ]] && token_file=${a#--admin_token_file=}
  [[ "$a" == --insecure_no_auth* ]] && no_auth=1
done
if [[ $no_auth -eq 0 && ! -s "$token_file" ]]; then
  echo "run: no admin token in $token_file (the store already had users); register the demo center with"
  echo "     JC_TOKEN=<an admin token> scripts/demo-center.sh register $url $adapter $demo_dir"
  [[ $prom -eq 1 ]] && echo "run: Prometheus not started: it scrapes with the admin token (scripts/prometheus-local.sh)"
  wait "$server_pid"
  exit $?
fi
export JC_TOKEN
JC_TOKEN=$(cat "$token_file" 2>/dev/null || true)
"$root/scripts/demo-center.sh" register "$url" "$adapter" "$demo_dir"
echo "run: center local-1 registered at $url; the admin token is in $token_file:"
echo "     export JC_TOKEN=\$(cat $token_file)   # then try the README's examples. Ctrl-C stops everything."
echo "     The demo center's executor: . $demo_dir/nexec.env; $build/executor/nexec hosts"
if [[ $prom -eq 1 ]]; then
  prom_token=$token_file
  [[ $no_auth -eq 1 ]] && prom_token=""
  "$root/scripts/prometheus-local.sh" config "$root/data/prometheus/prometheus.yml" "$url" "$prom_token" "$demo_dir"
  prom_url=$("$root/scripts/prometheus-local.sh" start "$root/data/prometheus" "$prom_listen")
  echo "run: Prometheus at $prom_url scrapes the control plane and the demo center (its configuration:"
  echo "     data/prometheus/prometheus.yml, from deploy/prometheus/local.yml). Grafana: a Prometheus data"
  echo "     source at $prom_url and the dashboards of deploy/grafana/dashboards/ (docs/operations.md)"
fi
wait "$server_pid"
