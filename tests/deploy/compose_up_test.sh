#!/usr/bin/env bash
# [C3] deploy/docker-compose.yml brings the stack up and runs a job: the images built here
# (deploy/image/build.sh: mmdebstrap roots, podman build), docker-compose driving podman
# through its Docker-compatible API, every Jointcloud service in its own container over
# mutual TLS, PostgreSQL, the demo center (nexec + native adapter), and the one-shot demo
# that registers the center and runs a job with jcctl to completion. Prometheus and
# Grafana are left out: their images come from registries this machine cannot reach.
#   compose_up_test.sh ROOT BUILD_DIR
set -euo pipefail
root=$1
build=$2
work=$(mktemp -d /tmp/jc-compose.XXXXXX)
project="jccompose$$"
image="localhost/jointcloud-compose-test:$$"
service_pid=""
checker_pid=""
compose() { DOCKER_HOST="unix://$work/podman.sock" JC_IMAGE="$image" JC_REST_PORT="$port" \
              docker-compose --ansi never -p "$project" -f "$work/deploy/docker-compose.yml" "$@"; }
cleanup() {
  set +e
  [[ -n "$checker_pid" ]] && kill "$checker_pid" 2>/dev/null
  if [[ -n "$service_pid" ]]; then
    compose logs --no-color >"$work/stack.log" 2>&1
    if [[ "${failed:-0}" == 1 ]]; then
      # What explains a failure first: containers that exited or restarted, and every
      # warning or error the services logged (the whole log is kept for reading).
      podman ps -a --format '{{.Names}} {{.Status}} restarts={{.Restarts}}' 2>/dev/null | grep "$project" || true
      grep -E '^[a-z0-9_-]+ +\| .* [WEF] \[' "$work/stack.log" | tail -n 60
      kept="/tmp/jc-compose-failed.$$.log"
      cp "$work/stack.log" "$kept" && echo "the stack's whole log: $kept"
    fi
    compose down -v >/dev/null 2>&1
    podman network rm -f "${project}_default" >/dev/null 2>&1
    kill "$service_pid" 2>/dev/null
    wait "$service_pid" 2>/dev/null
  fi
  podman rmi -f "$image" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
fail() { failed=1; echo "FAIL: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || fail "running containers with podman needs root here"
for tool in podman docker-compose runc; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/setup.sh --test)"
done
# Services find each other by container name, which takes podman's netavark backend with
# aardvark-dns: under CNI (podman's choice when netavark is missing, and kept afterwards in
# its storage) names do not resolve and every service retries for minutes. Named above in
# containers.conf so a machine that first ran podman with CNI still gets netavark.
for helper in netavark aardvark-dns; do
  [[ -x /usr/lib/podman/$helper ]] ||
    fail "/usr/lib/podman/$helper is missing: containers could not resolve each other's names (apt-get install netavark aardvark-dns, or scripts/setup.sh --test)"
done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

"$root/deploy/image/build.sh" "$build" "$image" --postgres

# The deploy directory as a user would prepare it (docker-compose.yml's header).
cp -r "$root/deploy" "$work/deploy"
openssl rand -base64 48 >"$work/deploy/service.token"
"$root/scripts/dev-ca.sh" "$work/deploy/tls" registry catalog datamon scheduler gateway local-1
chmod a+r "$work/deploy/tls"/*.key

# podman's Docker API. This sandbox refuses raising resource limits (podman's defaults
# do) and crun refuses its hybrid cgroups, so: runc, and limits no higher than this shell's.
nofile=$(ulimit -Sn)
nproc=$(ulimit -Su)
[[ "$nproc" == unlimited || "$nproc" -gt 16384 ]] && nproc=16384
cat >"$work/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
[network]
network_backend = "netavark"
CONF
CONTAINERS_CONF="$work/containers.conf" podman system service --time=0 "unix://$work/podman.sock" \
  >"$work/podman-service.log" 2>&1 &
service_pid=$!
for _ in $(seq 1 100); do [[ -S "$work/podman.sock" ]] && break; sleep 0.1; done
[[ -S "$work/podman.sock" ]] || fail "podman's API did not start: $(cat "$work/podman-service.log")"

# podman runs healthchecks from systemd timers, and there is no systemd here: run them.
(while sleep 1; do
   for c in $(podman ps -q --filter health=starting 2>/dev/null); do podman healthcheck run "$c" >/dev/null 2>&1 || true; done
 done) &
checker_pid=$!
compose up -d postgres >"$work/up.log" 2>&1 || { cat "$work/up.log"; fail "docker-compose up postgres failed"; }
# Fail fast, and say why, when a container cannot resolve another's name (otherwise every
# service logs "could not translate host name" until the readiness wait below runs out).
resolved=""
for _ in $(seq 1 15); do
  if compose run --rm -T --no-deps --entrypoint getent demo hosts postgres >"$work/dns.log" 2>&1; then
    resolved=1; break
  fi
  sleep 1
done
if [[ -z "$resolved" ]]; then
  cat "$work/dns.log"
  fail "a container on the stack's network cannot resolve the name 'postgres' (podman's network backend: $(CONTAINERS_CONF="$work/containers.conf" podman info --format '{{.Host.NetworkBackend}}' 2>/dev/null); container-name DNS needs netavark and aardvark-dns, which scripts/setup.sh --test installs)"
fi
echo "ok: containers resolve each other's names ($(tr -s ' ' <"$work/dns.log" | head -n 1))"
compose up -d registry catalog datamon scheduler gateway demo-center >>"$work/up.log" 2>&1 ||
  { cat "$work/up.log"; fail "docker-compose up failed"; }
ready=""
for _ in $(seq 1 600); do
  if curl -sf --cacert "$work/deploy/tls/ca.crt" "https://localhost:$port/readyz" >/dev/null; then ready=1; break; fi
  sleep 0.2
done
[[ -n "$ready" ]] || fail "the gateway at https://localhost:$port never became ready"
echo "ok: the stack is up; the gateway answers https://localhost:$port/readyz"

if ! compose run --rm -T demo >"$work/demo.log" 2>&1; then
  cat "$work/demo.log"
  fail "the demo job did not complete"
fi
grep -q "ended  completed" "$work/demo.log" || { cat "$work/demo.log"; fail "the demo's watch did not see the job complete"; }
grep -q "hello from replica 1 of 2" "$work/demo.log" || { cat "$work/demo.log"; fail "the demo's log is not the job's"; }
grep -q "local-1" "$work/demo.log" || { cat "$work/demo.log"; fail "the demo center is not listed"; }
echo "ok: the compose stack ran the demo job on its demo center to completion:"
grep -E "submitted|ended|hello" "$work/demo.log" | sed 's/^/  /'
