#!/usr/bin/env bash
# [A13][C6] A platform's Python gRPC client, as clients/python/README.md tells one to make
# it: stubs generated from proto/ with Debian's protoc and grpc_python_plugin, run on
# Debian's python3-grpcio and python3-protobuf, against a real control plane serving gRPC
# over TLS with bearer tokens and the demo center. The README's commands run as written;
# the examples submit a job (the same
# job in `jcctl job get` and REST), get, list and watch it to completion, stop another
# (it ends failed, "stopped by the user"); a bad or missing token is UNAUTHENTICATED
# in the server's words, an invalid job INVALID_ARGUMENT naming the field, and nothing is
# written; a client that does not speak TLS, or trusts another CA, is not let in.
#   python_client_test.sh ROOT BUILD_DIR
set -euo pipefail
root=$1
build=$2
py=/usr/bin/python3  # Debian's interpreter, whose python3-grpcio the client runs on
for tool in protoc grpc_python_plugin openssl curl; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed (scripts/setup.sh installs it)"; exit 1; }
done
"$py" -c 'import grpc, google.protobuf' 2>/dev/null ||
  { echo "FAIL: $py has no grpc or google.protobuf: apt-get install python3-grpcio python3-protobuf (scripts/setup.sh --test installs them)"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/jc-pyclient.XXXXXX")
server_pid="" failed=1
cleanup() {
  set +e
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null
  wait 2>/dev/null
  "$root/scripts/demo-center.sh" stop "$work/center" >/dev/null 2>&1
  if [[ $failed == 1 ]]; then
    echo "--- jointcloud.log"; tail -n 30 "$work/jointcloud.log"
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

source "$root/tests/deploy/wait_for_log.sh"

echo "--- the stubs, generated as clients/python/README.md says"
"$root/clients/python/gen.sh" "$work/stubs"
export PYTHONPATH="$work/stubs" PYTHONDONTWRITEBYTECODE=1  # nothing written into the source tree
# Every service's module imports on Debian's runtime: protoc's generated code and
# python3-protobuf are of one protobuf release.
modules=$(cd "$work/stubs" && ls jointcloud/v1/*_pb2*.py | sed 's#/#.#g; s#\.py$##')
want=$((2 * $(ls "$root"/proto/jointcloud/v1/*.proto | wc -l)))
[[ $(wc -l <<<"$modules") -eq $want ]] || fail "gen.sh made $(wc -l <<<"$modules") modules, not $want (two per .proto)"
"$py" -c 'import importlib, sys, grpc, google.protobuf
for m in sys.argv[1:]: importlib.import_module(m)
print(f"ok: {len(sys.argv) - 1} modules import on grpcio {grpc.__version__}, protobuf {google.protobuf.__version__}")' $modules

echo "--- the control plane (gRPC and REST over TLS) and the demo center"
adapter=$("$root/scripts/demo-center.sh" start "$work/center")
# On the suite's store: embedded, or PostgreSQL when scripts/test.sh runs it there.
store_args=(--data_dir="$work/data")
if [[ "${JC_TEST_STORE:-sqlite}" == postgres ]]; then
  store_args=(--store="$JC_TEST_PG_URI" --store_schema="pyclient_$$_$RANDOM" --data_dir="$work/data")
fi
[[ -s "$work/center/registry-ca/ca.crt" ]] && store_args+=(--registry_ca_file="$work/center/registry-ca/ca.crt")
bash "$root/scripts/dev-ca.sh" "$work/tls" jointcloud >/dev/null
"$build/services/server/jointcloud" --rest_address=127.0.0.1:0 --grpc_address=127.0.0.1:0 --admin_address=127.0.0.1:0 \
  "${store_args[@]}" --admin_token_file="$work/admin.token" --monitor_interval=200ms --scheduler_refresh=100ms \
  --tls_cert="$work/tls/jointcloud.crt" --tls_key="$work/tls/jointcloud.key" --tls_ca="$work/tls/ca.crt" \
  >"$work/jointcloud.log" 2>&1 &
server_pid=$!
rest=$(wait_for_log "$work/jointcloud.log" "rest listening on https://127.0.0.1:")
grpc=$(wait_for_log "$work/jointcloud.log" "grpc listening on port ")
for _ in $(seq 1 300); do grep -q "jointcloud ready" "$work/jointcloud.log" && break; sleep 0.1; done
export CURL_CA_BUNDLE="$work/tls/ca.crt" JC_TOKEN
JC_TOKEN=$(cat "$work/admin.token")
"$root/scripts/demo-center.sh" register "https://127.0.0.1:$rest" "$adapter" "$work/center" >/dev/null
# As clients/python/README.md: the address, the CA, the token in $JC_TOKEN.
export JC_GRPC_ADDRESS="127.0.0.1:$grpc" JCCTL_CA_FILE="$work/tls/ca.crt"
client() {  # EXAMPLE.py ARGS...: runs clients/python/EXAMPLE.py with Debian's python3
  "$py" "$root/clients/python/$1" "${@:2}"
}
rest_job() {  # JOB FIELD: a field of the job's data, over REST
  curl -s -H "Authorization: Bearer $JC_TOKEN" "https://127.0.0.1:$rest/openapi/v1/trainjob/$1" |
    "$py" -c 'import json,sys; print(json.load(sys.stdin)["data"][sys.argv[1]])' "$2"
}
rest_count() {  # the number of jobs, over REST
  curl -s -H "Authorization: Bearer $JC_TOKEN" "https://127.0.0.1:$rest/openapi/v1/trainjob?pageSize=1000" |
    "$py" -c 'import json,sys; print(len(json.load(sys.stdin)["data"]["jobs"]))'
}
jcctl=("$build/tools/jcctl/jcctl" --server "https://127.0.0.1:$rest" --ca_file "$work/tls/ca.crt")

echo "--- clients/python/README.md's \"Run a job from Python\", as written (TLS on)"
awk '/^## Run a job from Python/{f=1} f&&/^```sh/{b=1;next} b&&/^```/{exit} b{print}' "$root/clients/python/README.md" |
  sed "s#\$PWD/build/python#$work/readme-stubs#g; s#build/python#$work/readme-stubs#g; s#data/admin.token#$work/admin.token#g;
       s#localhost:50051#127.0.0.1:$grpc#g; s#^\# With TLS on (docs/security.md): ##; s#data/tls/ca.crt#$work/tls/ca.crt#g" \
  >"$work/readme.sh"
grep -q '^clients/python/watch_job.py' "$work/readme.sh" || fail "no \"Run a job from Python\" block in clients/python/README.md"
grep -q "^export JCCTL_CA_FILE=$work/tls/ca.crt" "$work/readme.sh" || fail "the README block no longer says how to give the CA"
(cd "$root" && env -u JC_GRPC_ADDRESS -u JCCTL_CA_FILE -u PYTHONPATH timeout 180 bash -e "$work/readme.sh") >"$work/readme.out" 2>&1 &&
  fail "the README block's last watch (of a stopped job) exited 0"
cat "$work/readme.out"
grep -qx "job job-00000001 submitted" "$work/readme.out" || fail "the README's submit did not print job-00000001"
grep -qx "job job-00000001 completed" "$work/readme.out" || fail "the README's job-00000001 did not complete"
grep -q "^ *[0-9]* CREATED " "$work/readme.out" || fail "the README's watch --history did not start from CREATED"
grep -qE "^job-00000001 +mnist-py " "$work/readme.out" || fail "the README's list_jobs.py does not list job-00000001"
tail -n 1 "$work/readme.out" | grep -qx "job job-00000002 failed" || fail "the README's stopped job did not end failed, last"
grep -q "failed.*stopped by the user" "$work/readme.out" || fail "the README's stopped job does not say stopped by the user"
echo "ok: the README's commands work as written"

echo "--- a job submitted from Python runs to completion"
client submit_job.py --name py-train --command 'echo training replica $JC_REPLICA_INDEX; sleep 3' \
  --spec cpu-1 --image pytorch-demo --replicas 2 >"$work/submit.txt" || { cat "$work/submit.txt"; fail "submit_job.py failed"; }
cat "$work/submit.txt"
job=$(sed -n 's/^job \(job-[0-9a-z-]*\) submitted$/\1/p' "$work/submit.txt")
[[ -n "$job" ]] || fail "submit_job.py printed no job id"
grep -q "task main: 2 replica(s) at " "$work/submit.txt" || fail "submit_job.py does not say where the replicas go"
# The same job in jcctl and REST, under the name Python gave it.
JCCTL_TOKEN=$JC_TOKEN "${jcctl[@]}" job get "$job" >"$work/jcctl-get.txt" || { cat "$work/jcctl-get.txt"; fail "jcctl job get $job failed"; }
grep -q "py-train" "$work/jcctl-get.txt" || { cat "$work/jcctl-get.txt"; fail "jcctl job get $job does not show the name py-train"; }
[[ "$(rest_job "$job" name)" == py-train ]] || fail "REST shows job $job under another name"
echo "ok: $job is py-train in jcctl job get and REST"
client get_job.py "$job" >"$work/get.json" || fail "get_job.py failed"
"$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["jobId"]==sys.argv[2] and d["name"]=="py-train", d' \
  "$work/get.json" "$job" || fail "get_job.py's JSON is not job $job named py-train"
client list_jobs.py >"$work/list.txt" || fail "list_jobs.py failed"
grep -qE "^$job +py-train " "$work/list.txt" || { cat "$work/list.txt"; fail "list_jobs.py does not list $job py-train"; }
echo "ok: get_job.py and list_jobs.py show it"
timeout 120 "$py" "$root/clients/python/watch_job.py" "$job" >"$work/watch.txt" ||
  { cat "$work/watch.txt"; fail "watch_job.py did not end 0 (completed)"; }
cat "$work/watch.txt"
tail -n 1 "$work/watch.txt" | grep -qx "job $job completed" || fail "watch_job.py did not end with the job completed"
# Usually watched live to its ENDED event; on a slow machine it may have ended first (a
# SNAPSHOT of the ended job). The live ENDED is checked on the stopped job below.
grep -qE " ENDED | SNAPSHOT completed" "$work/watch.txt" || fail "watch_job.py saw neither ENDED nor the ended job"
[[ "$(rest_job "$job" status)" == completed ]] || fail "REST does not show $job completed"
timeout 60 "$py" "$root/clients/python/watch_job.py" "$job" --history >"$work/history.txt" ||
  { cat "$work/history.txt"; fail "watch_job.py --history of a completed job did not end 0"; }
head -n 1 "$work/history.txt" | grep -q " CREATED " && grep -q " ENDED " "$work/history.txt" ||
  { cat "$work/history.txt"; fail "watch_job.py --history does not tell the job from CREATED to ENDED"; }
client get_job.py "$job" >"$work/got.json" || fail "get_job.py failed"
"$py" -c 'import json,sys; t=json.load(open(sys.argv[1]))["taskInfos"][0]; assert t["centerIDs"]==["local-1"]*2 and t["replicaStatus"]==["completed"]*2, t' \
  "$work/got.json" || fail "get_job.py does not show both replicas completed at local-1"
echo "ok: watched to completion, REST agrees, get_job.py shows both replicas completed at local-1, and --history tells it again from CREATED to ENDED"

echo "--- a job from a JSON file (REST's body), idempotent, stopped from Python"
cat >"$work/long.json" <<'JSON'
{"name": "py-long", "tasks": [{"name": "sleep", "command": "sleep 300", "imageId": "pytorch-demo",
  "resourceSpecId": "cpu-1", "replicaNumber": 1}]}
JSON
long=$(client submit_job.py -f "$work/long.json" --idempotency_key py-long-1 -q) || fail "submit_job.py -f failed"
again=$(client submit_job.py -f "$work/long.json" --idempotency_key py-long-1 -q) || fail "submit_job.py -f (again) failed"
[[ "$long" == "$again" ]] || fail "a retried submit with the same idempotency key made $again beside $long"
status=""
for _ in $(seq 1 600); do
  status=$(rest_job "$long" status)
  [[ "$status" == running ]] && break
  sleep 0.1
done
[[ "$status" == running ]] || fail "$long is $status, not running"
# Watched while it runs: the stop reaches the open stream as its ENDED event.
timeout 120 "$py" "$root/clients/python/watch_job.py" "$long" >"$work/watch-long.txt" &
watch_pid=$!
for _ in $(seq 1 300); do grep -q " SNAPSHOT " "$work/watch-long.txt" && break; sleep 0.1; done
grep -q " SNAPSHOT running" "$work/watch-long.txt" || { cat "$work/watch-long.txt"; fail "watch_job.py did not start with the running job"; }
client stop_job.py "$long" | grep -qx "job $long stopping" || fail "stop_job.py failed"
rc=0
wait "$watch_pid" || rc=$?
cat "$work/watch-long.txt"
grep -q " ENDED .*stopped by the user" "$work/watch-long.txt" || fail "the open watch got no ENDED event saying stopped by the user"
[[ $rc == 1 ]] || fail "watch_job.py of a stopped job exited $rc, not 1 (failed)"
grep -q "stopped by the user" "$work/watch-long.txt" || fail "watch_job.py does not say the job was stopped by the user"
[[ "$(rest_job "$long" status)" == failed ]] || fail "REST does not show $long failed"
[[ "$(rest_job "$long" statusReason)" == *"stopped by the user"* ]] || fail "REST's statusReason does not say stopped by the user"
echo "ok: stopped, and it ended failed, stopped by the user"

echo "--- refusals, in the server's words"
expect_refusal() {  # WHAT CODE TEXT EXAMPLE ARGS...: the example exits 1 saying CODE and TEXT
  local what=$1 code=$2 text=$3 rc=0
  shift 3
  client "$@" >"$work/refused.out" 2>"$work/refused.err" || rc=$?
  [[ $rc == 1 ]] || { cat "$work/refused.out" "$work/refused.err"; fail "$what: exited $rc, not 1"; }
  grep -q "error: $code: .*$text" "$work/refused.err" || { cat "$work/refused.err"; fail "$what: not \"$code: ...$text\""; }
  echo "ok: $what: $(head -n 1 "$work/refused.err")"
}
jobs_before=$(rest_count)
JC_TOKEN=jc_0123456789abcdef_notthesecret expect_refusal "an unknown token" UNAUTHENTICATED "invalid API token" get_job.py "$job"
JC_TOKEN=jc_nothex expect_refusal "a malformed API token" UNAUTHENTICATED "malformed API token" list_jobs.py
JC_TOKEN=not-a-token expect_refusal "not a token" UNAUTHENTICATED "neither an API token (jc_...) nor a JWT" stop_job.py "$job"
JC_TOKEN=jc_0123456789abcdef_notthesecret expect_refusal "a submit with an unknown token" UNAUTHENTICATED "invalid API token" \
  submit_job.py --name py-intruder --command true --spec cpu-1
# No token at all: the example says so before calling; the server refuses a call without one.
rc=0
JC_TOKEN="" client list_jobs.py 2>"$work/none.err" >/dev/null || rc=$?
[[ $rc != 0 ]] && grep -q "no token" "$work/none.err" || fail "list_jobs.py without a token did not say it has none"
"$py" - "127.0.0.1:$grpc" "$work/tls/ca.crt" <<'PY' || fail "a call without a token was not refused UNAUTHENTICATED"
import sys, grpc
from jointcloud.v1 import jobs_pb2, jobs_pb2_grpc
channel = grpc.secure_channel(sys.argv[1], grpc.ssl_channel_credentials(open(sys.argv[2], "rb").read()))
try:
    jobs_pb2_grpc.JobServiceStub(channel).ListTrainJobs(jobs_pb2.ListTrainJobsRequest(), timeout=30)
    sys.exit("answered without a token")
except grpc.RpcError as e:
    print(f"ok: a call without a token: {e.code().name}: {e.details()}")
    sys.exit(0 if e.code() == grpc.StatusCode.UNAUTHENTICATED else 1)
PY
expect_refusal "a task without a command" INVALID_ARGUMENT "tasks\[0\]\.command" submit_job.py --name py-bad --spec cpu-1
# In the words REST puts in errorMsg for the same job.
rest_words=$(curl -s -H "Authorization: Bearer $JC_TOKEN" "https://127.0.0.1:$rest/openapi/v1/trainjob" \
  -d '{"name": "py-bad", "tasks": [{"name": "main", "resourceSpecId": "cpu-1"}]}' |
  "$py" -c 'import json,sys; d=json.load(sys.stdin); print(d["code"] + ": " + d["errorMsg"])')
grep -qF "error: $rest_words" "$work/refused.err" || fail "gRPC said \"$(head -n 1 "$work/refused.err")\", REST \"$rest_words\""
echo "ok: REST refuses the same job in the same words"
expect_refusal "a job without a name" INVALID_ARGUMENT "name" submit_job.py --command true --spec cpu-1
expect_refusal "an unknown resource spec" INVALID_ARGUMENT "no-such-spec" submit_job.py --name py-bad --command true --spec no-such-spec
expect_refusal "replicaNumber 0" INVALID_ARGUMENT "replica" submit_job.py --name py-bad --command true --spec cpu-1 --replicas 0
[[ "$(rest_count)" == "$jobs_before" ]] || fail "a refused submit wrote a job: $(rest_count) jobs, $jobs_before before"
echo "ok: nothing refused was written ($jobs_before jobs)"
# A misspelt field in a job file is refused before anything is sent, naming it.
sed 's/"command"/"comand"/' "$work/long.json" >"$work/typo.json"
rc=0
client submit_job.py -f "$work/typo.json" 2>"$work/typo.err" >/dev/null || rc=$?
[[ $rc != 0 ]] && grep -q '"comand"' "$work/typo.err" || { cat "$work/typo.err"; fail "a job file with \"comand\" was not refused naming it"; }
echo "ok: a job file's misspelt field: $(head -n 1 "$work/typo.err")"

echo "--- TLS: the server is checked, and speaks nothing else"
rc=0
JCCTL_CA_FILE="" timeout 60 "$py" "$root/clients/python/list_jobs.py" >/dev/null 2>"$work/plain.err" || rc=$?
[[ $rc == 1 ]] && grep -q "error: UNAVAILABLE" "$work/plain.err" || { cat "$work/plain.err"; fail "plaintext to the TLS port was not refused (exit $rc)"; }
bash "$root/scripts/dev-ca.sh" "$work/other-ca" other >/dev/null
rc=0
JCCTL_CA_FILE="$work/other-ca/ca.crt" timeout 60 "$py" "$root/clients/python/list_jobs.py" >/dev/null 2>"$work/other.err" || rc=$?
[[ $rc == 1 ]] && grep -q "error: UNAVAILABLE" "$work/other.err" || { cat "$work/other.err"; fail "a server certificate of another CA was trusted (exit $rc)"; }
echo "ok: plaintext to the TLS port is refused: $(grep -m 1 '^error:' "$work/plain.err" | cut -c1-160)"
echo "ok: a server certificate of another CA is refused: $(grep -m 1 '^error:' "$work/other.err" | cut -c1-160)"
failed=0
echo "python client: all checks passed"
