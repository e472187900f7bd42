#!/usr/bin/env bash
# [C8][C3] A real Prometheus (Debian's `prometheus`) over what Jointcloud exports: the rules in
# deploy/prometheus/ pass `promtool check rules` and `promtool test rules`; then Prometheus,
# configured and started by the local recipe (scripts/prometheus-local.sh, as
# `scripts/run.sh --prometheus` does, from deploy/prometheus/local.yml), scrapes the control
# plane's /metrics over HTTPS with an admin token (as the compose stack does), the demo
# center's adapter, nexec master and both agents, evaluates the rules, and once jobs ran (in
# a project with a budget, at a center price) the job-rate queries return data and every
# target is up. Then every panel of every Grafana dashboard in deploy/grafana/dashboards/ is
# evaluated in it (tests/deploy/dashboard_queries.py: no query may be an error; all but the
# panels it lists, with why, return data), and a planted broken query must fail that check.
#   prometheus_test.sh ROOT BUILD_DIR
set -euo pipefail
root=$1
build=$2
for tool in prometheus promtool openssl curl python3; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed (scripts/setup.sh --test installs it)"; exit 1; }
done
work=$(mktemp -d /tmp/jc-prom.XXXXXX)
server_pid="" failed=1
cleanup() {
  set +e
  "$root/scripts/prometheus-local.sh" stop "$work/prometheus"
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null
  wait 2>/dev/null
  "$root/scripts/demo-center.sh" stop "$work/center" >/dev/null 2>&1
  if [[ $failed == 1 ]]; then
    echo "--- jointcloud.log"; tail -n 30 "$work/jointcloud.log"
    echo "--- prometheus.log"; tail -n 30 "$work/prometheus/prometheus.log"
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "--- the rules"
promtool check rules "$root/deploy/prometheus/rules.yml"
promtool test rules "$root/deploy/prometheus/rules_test.yml"

echo "--- the local recipe's configuration (deploy/prometheus/local.yml)"
# Its jobs are the compose stack's: the rules and the dashboards select on them.
jobs_of() { grep -oE '^  - job_name: [a-z-]+' "$1" | sed 's/.*: //' | sort -u; }
[[ "$(jobs_of "$root/deploy/prometheus/local.yml")" == "$(jobs_of "$root/deploy/prometheus.yml" | grep -vx jointcloud)" ]] ||
  { echo "FAIL: local.yml's jobs ($(jobs_of "$root/deploy/prometheus/local.yml" | xargs)) are not prometheus.yml's"; exit 1; }
# scripts/run.sh --prometheus: the demo center's metrics from port 9092 (adapter, master,
# node1, node2) and the control plane on 8080 give exactly the targets local.yml names.
grep -q 'JC_DEMO_METRICS_PORT=9092' "$root/scripts/run.sh" || { echo "FAIL: run.sh --prometheus does not fix the demo's metrics ports at 9092"; exit 1; }
mkdir -p "$work/fixed"
for f in adapter:9092 master:9093 agent-node1:9094 agent-node2:9095; do
  echo "x metrics on http://127.0.0.1:${f#*:}/metrics" >"$work/fixed/${f%%:*}.log"
done
echo token >"$work/fixed/token"
"$root/scripts/prometheus-local.sh" config "$work/fixed/prometheus.yml" http://127.0.0.1:8080 "$work/fixed/token" "$work/fixed"
targets_of() { grep -oE '"127\.0\.0\.1:[0-9]+"' "$1" | sort; }
[[ "$(targets_of "$work/fixed/prometheus.yml")" == "$(targets_of "$root/deploy/prometheus/local.yml")" &&
   "$(targets_of "$work/fixed/prometheus.yml" | wc -l)" -eq 5 ]] ||
  { echo "FAIL: the recipe's fixed ports are not the targets deploy/prometheus/local.yml names"; exit 1; }
grep -q "credentials_file: $work/fixed/token" "$work/fixed/prometheus.yml" || { echo "FAIL: the recipe does not scrape with the admin token"; exit 1; }
echo "ok: run.sh --prometheus's ports are the ones deploy/prometheus/local.yml scrapes, with the admin token"
# As the docs say it serves by hand, from a checkout's root: its paths relative to itself.
mkdir -p "$work/checkout/deploy/prometheus" "$work/checkout/data"
cp "$root/deploy/prometheus/local.yml" "$root/deploy/prometheus/rules.yml" "$work/checkout/deploy/prometheus/"
echo token >"$work/checkout/data/admin.token"
(cd "$work/checkout" && promtool check config deploy/prometheus/local.yml >/dev/null) ||
  { echo "FAIL: deploy/prometheus/local.yml does not serve as it is from a checkout's root"; exit 1; }
echo "ok: deploy/prometheus/local.yml serves as it is from a checkout's root"

source "$root/tests/deploy/wait_for_log.sh"

echo "--- the control plane (HTTPS), the demo center (metrics on, every port free ones)"
adapter=$(JC_DEMO_METRICS=1 "$root/scripts/demo-center.sh" start "$work/center")
registry_ca=()
[[ -s "$work/center/registry-ca/ca.crt" ]] && registry_ca=(--registry_ca_file="$work/center/registry-ca/ca.crt")
bash "$root/scripts/dev-ca.sh" "$work/tls" jointcloud >/dev/null
prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_server() {  # LOG: the control plane over HTTPS, its console's charts from Prometheus
  "$build/services/server/jointcloud" --rest_address=127.0.0.1:0 --grpc_address=127.0.0.1:0 --admin_address=127.0.0.1:0 \
    --endpoint_address=127.0.0.1:0 \
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
endpoint_port=$(wait_for_log "$work/jointcloud.log" "endpoints on port ")

echo "--- Prometheus by the local recipe (scripts/prometheus-local.sh), aimed at them, scraping every second"
JC_PROMETHEUS_SCRAPE_INTERVAL=1s "$root/scripts/prometheus-local.sh" config "$work/prometheus/prometheus.yml" \
  "https://127.0.0.1:$rest" "$work/admin.token" "$work/center" "$work/tls/ca.crt"
grep -q "ca_file: $work/tls/ca.crt" "$work/prometheus/prometheus.yml" || { echo "FAIL: the recipe's config does not verify the HTTPS control plane"; exit 1; }
"$root/scripts/prometheus-local.sh" start "$work/prometheus" "127.0.0.1:$prom_port" >/dev/null

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

submit() {  # NAME SPEC COMMAND: a job of project scraped; prints its id
  curl -s -H "Authorization: Bearer $JC_TOKEN" "https://127.0.0.1:$rest/openapi/v1/trainjob" \
    -d '{"name": "'"$1"'", "project": "scraped", "tasks": [{"name": "t", "command": "'"$3"'", "resourceSpecId": "'"$2"'", "replicaNumber": 1}]}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["jobId"])'
}
job_status() {
  curl -s -H "Authorization: Bearer $JC_TOKEN" "https://127.0.0.1:$rest/openapi/v1/trainjob/$1" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["status"])'
}
run_job() {  # NAME [SPEC]: submitted through the control plane, run at the demo center, completed
  local job status=""
  job=$(submit "$1" "${2:-cpu-1}" "sleep 1; echo hi")
  for _ in $(seq 1 300); do
    status=$(job_status "$job")
    [[ "$status" == completed || "$status" == failed ]] && break
    sleep 0.1
  done
  [[ "$status" == completed ]] || { echo "FAIL: job $job ($1) ended $status"; return 1; }
}

echo "--- a project with a quota, a budget and a center's price; its jobs through the control plane to the demo center"
api() { curl -s -H "Authorization: Bearer $JC_TOKEN" -X "$1" "https://127.0.0.1:$rest$2" -d "$3" | grep -q '"code":"OK"'; }
api POST /openapi/v1/projects '{"name": "scraped"}' || { echo "FAIL: project not created"; exit 1; }
api PUT /openapi/v1/projects/scraped/quota '{"max_running_gpus": 2}' || { echo "FAIL: quota not set"; exit 1; }
# 36 an hour is 0.01 a second: a soft budget of 0.05 is past 80% after a few seconds of jobs,
# so the cost and budget panels (and the threshold counter) have data.
api PUT /openapi/v1/resourcespecs/cpu-1/centers/local-1/price '{"price": 36}' || { echo "FAIL: price not set"; exit 1; }
api PUT /openapi/v1/projects/scraped/budget '{"monthly": 0.05}' || { echo "FAIL: budget not set"; exit 1; }
run_job first
echo "--- what Prometheus has"
wait_query 'up{job="jointcloud-rest"} == 1' "the control plane scraped over HTTPS with the admin token"
wait_query 'up{job="adapter"} == 1' "the adapter scraped"
wait_query 'count(up{job="nexec"} == 1) == 3' "the nexec master and both agents scraped"
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

echo "--- every panel of every Grafana dashboard, evaluated in this Prometheus"
# A GPU job (GPU seconds), a job running while the panels are asked (the per-task series
# exist only then), and a connection to the endpoint listener (its outcome counter).
run_job gpu gpu-1
long=$(submit running cpu-1 "sleep 120")
for _ in $(seq 1 300); do [[ "$(job_status "$long")" == running ]] && break; sleep 0.1; done
[[ "$(job_status "$long")" == running ]] || { echo "FAIL: job $long is not running"; exit 1; }
curl -s -o /dev/null -H "Host: nothing.endpoints.localhost" "http://127.0.0.1:$endpoint_port/" || true
wait_query 'jc_usage_gpu_seconds_total{project="scraped"} > 0' "the project's GPU seconds"
wait_query 'jc_project_budget_used_ratio{project="scraped"} >= 0.8' "the project's budget past 80%"
wait_query 'nexec_task_cpu_seconds' "the running job's task at the nexec master"
python3 "$root/tests/deploy/dashboard_queries.py" "http://127.0.0.1:$prom_port" "$root/deploy/grafana/dashboards" --wait 90 ||
  { echo "FAIL: a dashboard's panel is an error or has no data"; exit 1; }
# The check catches a broken panel: one planted in a copy of the dashboards must fail it, named.
mkdir -p "$work/broken"
cp "$root"/deploy/grafana/dashboards/*.json "$work/broken/"
python3 - "$work/broken/jointcloud-federation.json" "$work/broken/jointcloud-federation.json" <<'PLANT'
import json, sys
d = json.load(open(sys.argv[1]))
panel = next(p for p in d["panels"] if p.get("targets"))
panel["title"] = "planted"
panel["targets"][0]["expr"] = "sum by (status) (rate(jc_jobs_ended_total[$__rate_interval])"
json.dump(d, open(sys.argv[2], "w"))
PLANT
if planted=$(python3 "$root/tests/deploy/dashboard_queries.py" "http://127.0.0.1:$prom_port" "$work/broken" --wait 0); then
  echo "FAIL: the dashboard check passed a panel whose query is an error"; exit 1
fi
grep -q "panel 'planted' A: /api/v1/query of .* answered bad_data" <<<"$planted" ||
  { echo "$planted"; echo "FAIL: the dashboard check did not name the broken panel"; exit 1; }
echo "ok: a planted broken query fails the dashboard check, named"
api POST "/openapi/v1/trainjob/$long/stop" '{}' || { echo "FAIL: job $long not stopped"; exit 1; }

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
