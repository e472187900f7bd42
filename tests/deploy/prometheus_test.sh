#!/usr/bin/env bash
# [C8][C3] A real Prometheus (Debian's `prometheus`) over what Jointcloud exports: the rules in
# deploy/prometheus/ pass `promtool check rules` and `promtool test rules`; then Prometheus
# scrapes the control plane's /metrics over HTTPS with an admin token (as the compose stack
# does), the demo center's adapter, nexec master and an agent, evaluates the rules, and once a
# job ran the job-rate queries return data and every target is up.
#   prometheus_test.sh ROOT BUILD_DIR
set -euo pipefail
root=$1
build=$2
for tool in prometheus promtool openssl curl; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed (scripts/setup.sh --test installs it)"; exit 1; }
done
work=$(mktemp -d /tmp/jc-prom.XXXXXX)
server_pid="" prom_pid="" failed=1
cleanup() {
  set +e
  [[ -n "$prom_pid" ]] && kill "$prom_pid" 2>/dev/null
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null
  wait 2>/dev/null
  "$root/scripts/demo-center.sh" stop "$work/center" >/dev/null 2>&1
  if [[ $failed == 1 ]]; then
    echo "--- jointcloud.log"; tail -n 30 "$work/jointcloud.log"
    echo "--- prometheus.log"; tail -n 30 "$work/prometheus.log"
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "--- the rules"
promtool check rules "$root/deploy/prometheus/rules.yml"
promtool test rules "$root/deploy/prometheus/rules_test.yml"

wait_for_log() {  # FILE PATTERN: the first number after PATTERN
  local found=""
  for _ in $(seq 1 300); do
    found=$(grep -oE "$2[0-9]+" "$1" 2>/dev/null | grep -oE '[0-9]+$' | head -n 1 || true)
    [[ -n "$found" ]] && { echo "$found"; return 0; }
    sleep 0.1
  done
  echo "FAIL: no \"$2\" in $1" >&2
  return 1
}

echo "--- the control plane (HTTPS), the demo center (metrics on)"
adapter=$(JC_DEMO_METRICS=1 "$root/scripts/demo-center.sh" start "$work/center")
registry_ca=()
[[ -s "$work/center/registry-ca/ca.crt" ]] && registry_ca=(--registry_ca_file="$work/center/registry-ca/ca.crt")
bash "$root/scripts/dev-ca.sh" "$work/tls" jointcloud >/dev/null
prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_server() {  # LOG: the control plane over HTTPS, its console's charts from Prometheus
  "$build/services/server/jointcloud" --rest_address=127.0.0.1:0 --grpc_address=127.0.0.1:0 --admin_address=127.0.0.1:0 \
    --data_dir="$work/data" --admin_token_file="$work/admin.token" --monitor_interval=200ms --scheduler_refresh=100ms \
    --tls_cert="$work/tls/jointcloud.crt" --tls_key="$work/tls/jointcloud.key" --tls_ca="$work/tls/ca.crt" \
    --prometheus_url="http://127.0.0.1:$prom_port" ${registry_ca[@]+"${registry_ca[@]}"} >"$work/$1" 2>&1 &
  server_pid=$!
  rest=$(wait_for_log "$work/$1" "rest listening on https://127.0.0.1:")
  for _ in $(seq 1 300); do grep -q "jointcloud ready" "$work/$1" && break; sleep 0.1; done
}
start_server jointcloud.log
export CURL_CA_BUNDLE="$work/tls/ca.crt" JC_TOKEN
JC_TOKEN=$(cat "$work/admin.token")
"$root/scripts/demo-center.sh" register "https://127.0.0.1:$rest" "$adapter" "$work/center" >/dev/null
adapter_port=$(wait_for_log "$work/center/adapter.log" "metrics on http://127.0.0.1:")
master_port=$(wait_for_log "$work/center/master.log" "metrics on http://127.0.0.1:")
agent_port=$(wait_for_log "$work/center/agent-node1.log" "metrics on http://127.0.0.1:")

echo "--- Prometheus, with deploy/prometheus.yml's jobs and rules aimed at them"
cat >"$work/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [$root/deploy/prometheus/rules.yml]
scrape_configs:
  - job_name: jointcloud-rest
    scheme: https
    tls_config: {ca_file: $work/tls/ca.crt}
    authorization: {credentials_file: $work/admin.token}
    static_configs: [{targets: ["127.0.0.1:$rest"]}]
  - job_name: adapter
    static_configs: [{targets: ["127.0.0.1:$adapter_port"]}]
  - job_name: nexec
    static_configs: [{targets: ["127.0.0.1:$master_port", "127.0.0.1:$agent_port"]}]
YAML
promtool check config "$work/prometheus.yml" >/dev/null
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom_pid=$!

query() {  # PROMQL: the number of series in the answer
  curl -s --get "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["data"]["result"]) if d.get("status")=="success" else -1)'
}
wait_query() {  # PROMQL WHAT: until the query returns at least one series
  for _ in $(seq 1 120); do
    [[ "$(query "$1" 2>/dev/null || echo -1)" -ge 1 ]] && { echo "ok: $2"; return 0; }
    sleep 0.5
  done
  echo "FAIL: $2: Prometheus answered nothing for $1"
  curl -s "http://127.0.0.1:$prom_port/api/v1/targets" | head -c 2000; echo
  return 1
}

run_job() {  # NAME: submitted through the control plane, run at the demo center, completed
  local job status=""
  job=$(curl -s -H "Authorization: Bearer $JC_TOKEN" "https://127.0.0.1:$rest/openapi/v1/trainjob" \
    -d '{"name": "'"$1"'", "tasks": [{"name": "t", "command": "echo hi", "resourceSpecId": "cpu-1", "replicaNumber": 1}]}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["jobId"])')
  for _ in $(seq 1 300); do
    status=$(curl -s -H "Authorization: Bearer $JC_TOKEN" "https://127.0.0.1:$rest/openapi/v1/trainjob/$job" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["status"])')
    [[ "$status" == completed || "$status" == failed ]] && break
    sleep 0.1
  done
  [[ "$status" == completed ]] || { echo "FAIL: job $job ($1) ended $status"; return 1; }
}

echo "--- jobs through the control plane to the demo center; a project with a quota"
run_job first
api() { curl -s -H "Authorization: Bearer $JC_TOKEN" -X "$1" "https://127.0.0.1:$rest$2" -d "$3" | grep -q '"code":"OK"'; }
api POST /openapi/v1/projects '{"name": "scraped"}' || { echo "FAIL: project not created"; exit 1; }
api PUT /openapi/v1/projects/scraped/quota '{"max_running_gpus": 2}' || { echo "FAIL: quota not set"; exit 1; }
echo "--- what Prometheus has"
wait_query 'up{job="jointcloud-rest"} == 1' "the control plane scraped over HTTPS with the admin token"
wait_query 'up{job="adapter"} == 1' "the adapter scraped"
wait_query 'count(up{job="nexec"} == 1) == 2' "the nexec master and agent scraped"
wait_query 'jc_jobs_ended_total{status="completed"} >= 1' "the control plane's ended jobs"
# A rate needs the counter to grow between two scrapes: a second job, once the first is in.
run_job second
wait_query 'jc:jobs_ended:rate5m{status="completed"} > 0' "the job rate (recording rule)"
wait_query 'jc:jobs_scheduled:rate5m > 0' "the scheduling rate (recording rule)"
wait_query 'nexec_jobs' "the nexec master's jobs"
wait_query 'nexec_agent_heartbeats_total' "the agent's heartbeats"
wait_query 'jc_adapter_submits_total' "the adapter's submits"
# Project-labelled series are served only to a federation admin's token: Prometheus has it.
wait_query 'jc_project_quota{project="scraped", limit="max_running_gpus"} == 2' "the REST port's project series, for the admin token"
[[ "$(query 'ALERTS{alertname="JointcloudTargetDown"}')" == 0 ]] || { echo "FAIL: a target-down alert is pending or firing"; exit 1; }
echo "ok: no target-down alert"

echo "--- the console's charts from Prometheus, across a restart of the control plane"
history() {  # SERIES: the largest value of the series in the last 5 minutes, from the gateway
  curl -s -H "Authorization: Bearer $JC_TOKEN" "https://127.0.0.1:$rest/openapi/v1/metrics/history?minutes=5" |
    python3 -c 'import json,sys; d=json.load(sys.stdin)["data"]; print(max([p[1] for s in d["series"] if s["name"]==sys.argv[1] for p in s["points"]] or [0]))' "$1"
}
for _ in $(seq 1 60); do python3 -c "import sys; sys.exit(0 if float('$(history jobs_ended)') > 0 else 1)" && break; sleep 0.5; done
python3 -c "import sys; sys.exit(0 if float('$(history jobs_ended)') > 0 else 1)" ||
  { echo "FAIL: /openapi/v1/metrics/history has no ended jobs"; exit 1; }
echo "ok: the gateway answers the job rate from Prometheus"
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true
start_server jointcloud-restarted.log
python3 -c "import sys; sys.exit(0 if float('$(history jobs_ended)') > 0 else 1)" ||
  { echo "FAIL: after a restart the history is gone"; exit 1; }
echo "ok: the charts' history survives a restart of the control plane"
if command -v chromium >/dev/null; then
  # Signed in through the console's form, as a person would (tests/browser/drive.mjs).
  "$root/tests/browser/install.sh" "$root" "$build/browser-tools"
  python3 - "$work" "$rest" <<'PLAN'
import json, os, sys
work, rest = sys.argv[1], sys.argv[2]
plan = {"base": f"https://127.0.0.1:{rest}/ui/", "token": os.environ["JC_TOKEN"], "profile": f"{work}/chromium",
        "insecure": True, "steps": [{"hash": "#/charts", "until": ['id="chart-source"', "Jobs ended per second"]}]}
json.dump(plan, open(f"{work}/browse.json", "w"))
PLAN
  browsed=$(timeout 120 node "$build/browser-tools/drive.mjs" "$work/browse.json") || { echo "FAIL: the browser driver failed"; exit 1; }
  python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["signed_in"] and d["steps"][0]["reached"] else 1)' <<<"$browsed" ||
    { echo "FAIL: the console's charts are not from Prometheus, or show no job-rate chart"; exit 1; }
  echo "ok: the console's charts read Prometheus"
fi
bad=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $JC_TOKEN" \
  "https://127.0.0.1:$rest/openapi/v1/metrics/history?minutes=0")
[[ "$bad" == 400 ]] || { echo "FAIL: minutes=0 answered $bad, not 400"; exit 1; }
failed=0
echo "prometheus: all checks passed"
