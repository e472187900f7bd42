#!/usr/bin/env bash
# Prometheus beside a local run (scripts/run.sh --prometheus; docs/operations.md,
# "Prometheus and Grafana for a local run"): deploy/prometheus/local.yml aimed at where the
# control plane and the demo center listen, with deploy/prometheus/rules.yml.
#   scripts/prometheus-local.sh config OUT REST_URL TOKEN_FILE DEMO_DIR [CA_FILE]
#       writes OUT: local.yml with the control plane at REST_URL (https: CA_FILE verifies
#       it), scraped with the admin token in TOKEN_FILE ("": none, --insecure_no_auth), and
#       the demo center's adapter, nexec master and agents where DIR/*.log say they serve
#       their metrics (scripts/demo-center.sh with JC_DEMO_METRICS_PORT or JC_DEMO_METRICS=1);
#       every path absolute. JC_PROMETHEUS_SCRAPE_INTERVAL replaces the 5s scrape and 15s
#       evaluation intervals (the test command's 1s)
#   scripts/prometheus-local.sh start DIR LISTEN
#       runs Prometheus on LISTEN (host:port) with DIR/prometheus.yml, its data in DIR/tsdb
#       (kept across starts), its log in DIR/prometheus.log; returns once it is ready
#   scripts/prometheus-local.sh stop DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
template="$root/deploy/prometheus/local.yml"

metrics_port() {  # LOG: the port a demo daemon logged it serves /metrics on
  local port=""
  for _ in $(seq 1 100); do
    port=$(grep -oE 'metrics on http://127\.0\.0\.1:[0-9]+' "$1" 2>/dev/null | grep -oE '[0-9]+$' | head -n 1 || true)
    [[ -n "$port" ]] && { echo "$port"; return 0; }
    sleep 0.1
  done
  echo "prometheus-local: $1 names no metrics port (start the demo center with JC_DEMO_METRICS_PORT=PORT)" >&2
  return 1
}

config() {  # OUT REST_URL TOKEN_FILE DEMO_DIR [CA_FILE]
  local out=$1 url=$2 token=$3 demo=$4 ca=${5:-} rest scheme adapter master node1 node2 interval
  [[ "$url" =~ ^(https?)://([^/]+)/?$ ]] || { echo "prometheus-local: $url is not http(s)://host:port" >&2; return 1; }
  scheme=${BASH_REMATCH[1]} rest=${BASH_REMATCH[2]}
  adapter=$(metrics_port "$demo/adapter.log")
  master=$(metrics_port "$demo/master.log")
  node1=$(metrics_port "$demo/agent-node1.log")
  node2=$(metrics_port "$demo/agent-node2.log")
  [[ -z "$token" ]] || token=$(cd "$(dirname "$token")" && pwd)/$(basename "$token")
  [[ -z "$ca" ]] || ca=$(cd "$(dirname "$ca")" && pwd)/$(basename "$ca")
  interval=${JC_PROMETHEUS_SCRAPE_INTERVAL:-}
  mkdir -p "$(dirname "$out")"
  local tls="" auth_drop=""
  [[ "$scheme" == https && -n "$ca" ]] && tls="\n    tls_config:\n      ca_file: $ca"
  [[ -z "$token" ]] && auth_drop='/^    authorization:$/,/credentials_file:/d'
  sed -e "s|^  - rules.yml$|  - $root/deploy/prometheus/rules.yml|" \
      -e "s|^    scheme: http$|    scheme: $scheme$tls|" \
      -e "s|credentials_file: \.\./\.\./data/admin\.token$|credentials_file: $token|" \
      -e "$auth_drop" \
      -e "s|\"127\.0\.0\.1:8080\"|\"$rest\"|" \
      -e "s|\"127\.0\.0\.1:9092\"|\"127.0.0.1:$adapter\"|" \
      -e "s|\"127\.0\.0\.1:9093\", \"127\.0\.0\.1:9094\", \"127\.0\.0\.1:9095\"|\"127.0.0.1:$master\", \"127.0.0.1:$node1\", \"127.0.0.1:$node2\"|" \
      ${interval:+-e "s|^  scrape_interval: .*|  scrape_interval: $interval|" -e "s|^  evaluation_interval: .*|  evaluation_interval: $interval|"} \
      "$template" >"$out.tmp"
  # Each process where it listens: a template whose targets changed without this script is
  # caught here rather than scraping the wrong ports.
  local target
  for target in "$rest" "127.0.0.1:$adapter" "127.0.0.1:$master" "127.0.0.1:$node1" "127.0.0.1:$node2"; do
    grep -qF "\"$target\"" "$out.tmp" || { echo "prometheus-local: $template has no target to aim at $target" >&2; return 1; }
  done
  if command -v promtool >/dev/null; then
    promtool check config "$out.tmp" >/dev/null || { echo "prometheus-local: promtool refuses $out.tmp" >&2; return 1; }
  fi
  mv "$out.tmp" "$out"
}

start() {  # DIR LISTEN
  local dir=$1 listen=$2 pid
  command -v prometheus >/dev/null || {
    echo "prometheus-local: prometheus is not installed (scripts/setup.sh --prometheus installs Debian's)" >&2
    return 1
  }
  [[ -s "$dir/prometheus.yml" ]] || { echo "prometheus-local: no $dir/prometheus.yml (run config first)" >&2; return 1; }
  stop "$dir"
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
    --web.listen-address="$listen" >"$dir/prometheus.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/prometheus.pid"
  for _ in $(seq 1 300); do
    if curl -sf "http://$listen/-/ready" >/dev/null 2>&1; then
      echo "http://$listen"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "prometheus-local: Prometheus did not start on $listen; its log:" >&2
  tail -n 20 "$dir/prometheus.log" >&2
  stop "$dir"
  return 1
}

stop() {  # DIR: waits until it has exited (its data is then closed)
  local dir=$1 pid
  [[ -f "$dir/prometheus.pid" ]] || return 0
  pid=$(cat "$dir/prometheus.pid")
  rm -f "$dir/prometheus.pid"
  # Left by a start that was killed: the number may be another process's by now.
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == prometheus ]] || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
}

cmd=${1:-}
case "$cmd" in
  config) config "${2:?usage: prometheus-local.sh config OUT REST_URL TOKEN_FILE DEMO_DIR [CA_FILE]}" \
                 "${3:?usage: prometheus-local.sh config OUT REST_URL TOKEN_FILE DEMO_DIR [CA_FILE]}" \
                 "${4-}" "${5:?usage: prometheus-local.sh config OUT REST_URL TOKEN_FILE DEMO_DIR [CA_FILE]}" "${6:-}" ;;
  start) start "${2:?usage: prometheus-local.sh start DIR LISTEN}" "${3:?usage: prometheus-local.sh start DIR LISTEN}" ;;
  stop) stop "${2:?usage: prometheus-local.sh stop DIR}" ;;
  *) echo "usage: prometheus-local.sh config OUT REST_URL TOKEN_FILE DEMO_DIR [CA_FILE] | start DIR LISTEN | stop DIR" >&2; exit 2 ;;
esac
