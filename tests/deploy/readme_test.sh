#!/usr/bin/env bash
# [C1][A12] The README's examples work as written: start the real server on free ports
# (on the suite's store: embedded, or PostgreSQL) with the demo center scripts/run.sh
# starts (nexec master and agents behind the native adapter), run the examples (with
# localhost:8080 pointed at it), and check every answer: "Try it", then "Run a job",
# whose trainjob must really run on the demo center, complete, and have its log download,
# then "Services and notebooks", whose service must answer through its endpoint link.
set -euo pipefail
root=$1
binary=$2
work=$(mktemp -d /tmp/jc-readme.XXXXXX)
server_pid=""
export JC_BUILD_DIR
JC_BUILD_DIR=$(cd "$(dirname "$binary")/../.." && pwd)
cleanup() {
  set +e  # stop everything even when a step fails
  if [[ -n "$server_pid" ]]; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  "$root/scripts/demo-center.sh" stop "$work/demo"
  rm -rf "$work"
}
trap cleanup EXIT

# scripts/run.sh installs what the demo's image needs (issue 49 item 1): every tool the
# demo center checks for before it starts its registry comes from a package of
# `setup.sh --demo`, which run.sh asks for when it runs as root.
demo_list=$("$root/scripts/setup.sh" --list --demo)
tools=$(sed -n 's/^  for tool in \(.*\); do$/\1/p' "$root/scripts/demo-center.sh")
[[ -n "$tools" ]] || { echo "FAIL: scripts/demo-center.sh names no tools its registry needs"; exit 1; }
for tool in $tools; do
  package=$tool
  [[ $tool == busybox ]] && package=busybox-static
  grep -qx "$package" <<<"$demo_list" || { echo "FAIL: setup.sh --demo does not install $package, which the demo needs"; exit 1; }
done
grep -q 'scripts/setup.sh" --demo' "$root/scripts/run.sh" || { echo "FAIL: scripts/run.sh does not install the demo's packages"; exit 1; }
adapter=$("$root/scripts/demo-center.sh" start "$work/demo") || { echo "FAIL: the demo center did not start"; exit 1; }
# The test script runs the suite once per store: on PostgreSQL, so does this.
store_args=(--data_dir="$work/data")
if [[ "${JC_TEST_STORE:-sqlite}" == postgres ]]; then
  store_args=(--store="$JC_TEST_PG_URI" --store_schema="readme_$$_$RANDOM")
fi
# The demo center's image registry, where it could start one (as root, as CI runs).
[[ -s "$work/demo/registry-ca/ca.crt" ]] && store_args+=(--registry_ca_file="$work/demo/registry-ca/ca.crt")
"$binary" "${store_args[@]}" --rest_address=127.0.0.1:0 --grpc_address=127.0.0.1:0 \
  --admin_address=127.0.0.1:0 --endpoint_address=127.0.0.1:0 --monitor_interval=200ms --scheduler_refresh=100ms \
  --admin_token_file="$work/admin.token" >"$work/server.log" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 1 300); do
  port=$(grep -oE 'rest listening on http://127\.0\.0\.1:[0-9]+' "$work/server.log" | grep -oE '[0-9]+$' || true)
  [[ -n "$port" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; echo "FAIL: server exited"; exit 1; }
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$work/server.log"; echo "FAIL: server did not start"; exit 1; }
# Secure by default: the first start wrote the admin's token, and nothing answers without one.
[[ -s "$work/admin.token" ]] || { cat "$work/server.log"; echo "FAIL: no admin token was written"; exit 1; }
export JC_TOKEN
JC_TOKEN=$(cat "$work/admin.token")
grep -q '"code":"UNAUTHENTICATED"' <<<"$(command curl -s "127.0.0.1:$port/openapi/v1/centers")" || {
  echo "FAIL: a request without a token was not refused"; exit 1; }
"$root/scripts/demo-center.sh" register "http://127.0.0.1:$port" "$adapter" "$work/demo" || { echo "FAIL: register"; exit 1; }
# As root (CI), the demo's image has content and the README's jobs run in it.
if [[ $(id -u) -eq 0 ]]; then
  demo_image=$(command curl -s -H "Authorization: Bearer $JC_TOKEN" "127.0.0.1:$port/openapi/v1/images/pytorch-demo")
  grep -q '"digest":"sha256:' <<<"$demo_image" || { echo "$demo_image"; echo "FAIL: the demo image has no content (no digest)"; exit 1; }
  # [C6] Another local account cannot push to the demo's registry (issue 44): it would
  # replace the image the demo's jobs run in under its tag. Tried as nobody, by skopeo.
  demo_ref=$(cat "$work/demo/image.ref")
  attacker="$work/attacker"
  mkdir -p "$attacker" && echo '{}' >"$attacker/auth.json"
  JC_IMAGE_PAD_MB=0 "$root/tests/testing/make-oci-image.sh" "$attacker/layout" evil "not the demo's image" >/dev/null
  chmod -R a+rX "$attacker" "$work/demo/registry-ca"
  chmod a+x "$work" "$work/demo"
  if (cd "$attacker" && runuser -u nobody -- env HOME="$attacker" REGISTRY_AUTH_FILE="$attacker/auth.json" \
        skopeo copy --quiet --dest-cert-dir "$work/demo/registry-ca" oci:"$attacker/layout":evil "docker://$demo_ref") \
        >"$attacker/push.log" 2>&1; then
    echo "FAIL: an unprivileged account pushed to the demo's registry"; exit 1
  fi
  grep -q "405" "$attacker/push.log" || { cat "$attacker/push.log"; echo "FAIL: the push was not refused by the registry"; exit 1; }
  echo "ok: the demo's registry refuses pushes from other accounts"
fi

# The shell block under "## Try it".
awk '/^## Try it/{f=1} f&&/^```sh/{b=1;next} b&&/^```/{exit} b{print}' "$root/README.md" \
  | sed "s#localhost:8080#127.0.0.1:$port#g; s#data/admin.token#$work/admin.token#g" >"$work/examples.sh"
[[ -s "$work/examples.sh" ]] || { echo "FAIL: no examples found in README.md"; exit 1; }

# One answer per line: curl prints bodies without a trailing newline.
(curl() { command curl --max-time 10 "$@"; echo; }; source "$work/examples.sh") >"$work/out.txt"
answers=$(wc -l <"$work/out.txt")
calls=$(grep -c '^curl ' "$work/examples.sh")
grep -q 'Authorization: Bearer' "$work/examples.sh" || { echo "FAIL: the README's examples send no token"; exit 1; }
if [[ "$answers" -ne "$calls" ]]; then
  cat "$work/out.txt"; echo "FAIL: $calls curl calls gave $answers answers"; exit 1
fi
ok=$(grep -c '"code":"OK"' "$work/out.txt" || true)
if [[ "$ok" -ne $((calls - 1)) ]] || ! tail -n 1 "$work/out.txt" | grep -q '"code":"INVALID_ARGUMENT"'; then
  cat -n "$work/out.txt"
  echo "FAIL: expected every example but the last to succeed and the last to be refused"
  exit 1
fi
grep -q '"sources":\[{"ai_center_id":"sh-1"' "$work/out.txt" || {
  cat -n "$work/out.txt"; echo "FAIL: the migration example did not pick sh-1"; exit 1; }
echo "ok: all $calls README \"Try it\" examples answered as documented"

# "Run a job": run the block, wait for the job to complete, run it again (the submit's
# Idempotency-Key returns the same job) and check what the user would see.
awk '/^## Run a job/{f=1} f&&/^```sh/{b=1;next} b&&/^```/{exit} b{print}' "$root/README.md" \
  | sed "s#localhost:8080#127.0.0.1:$port#g; s#data/admin.token#$work/admin.token#g" >"$work/job.sh"
[[ -s "$work/job.sh" ]] || { echo "FAIL: no \"Run a job\" block in README.md"; exit 1; }
(curl() { command curl --max-time 10 "$@"; echo; }; source "$work/job.sh") >"$work/job1.txt" 2>&1
head -n 1 "$work/job1.txt" | grep -q '"jobId":"job-00000001".*"centerIDs":\["local-1"\]' || {
  cat -n "$work/job1.txt"; echo "FAIL: the trainjob was not placed on local-1"; exit 1; }
status=""
for _ in $(seq 1 600); do
  status=$(command curl -s -H "Authorization: Bearer $JC_TOKEN" "127.0.0.1:$port/openapi/v1/trainjob/job-00000001" | grep -oE '"status":"[a-z]+"' | head -n 1)
  [[ "$status" == '"status":"completed"' || "$status" == '"status":"failed"' ]] && break
  sleep 0.1
done
if [[ "$status" != '"status":"completed"' ]]; then
  command curl -s -H "Authorization: Bearer $JC_TOKEN" "127.0.0.1:$port/openapi/v1/trainjob/job-00000001"; echo
  echo "FAIL: the README's trainjob did not complete ($status)"; exit 1
fi
(curl() { command curl --max-time 10 "$@"; echo; }; source "$work/job.sh") >"$work/job2.txt" 2>&1
check() {
  grep -q "$1" "$work/job2.txt" || { cat -n "$work/job2.txt"; echo "FAIL: $2"; exit 1; }
}
check '"jobId":"job-00000001"' "the repeated submit did not return the same job"
check '"replicaStatus":\["completed","completed"\]' "the train replicas are not completed"
check '"logUrl":"/openapi/v1/trainjob/job-00000001/task/1/replica/1/log/content"' "no logUrl"
check 'training replica 1 of 2' "the log did not download"
if [[ $(id -u) -eq 0 ]]; then
  # It ran in the demo's image: the image's file is there, the host has none.
  command curl -s -H "Authorization: Bearer $JC_TOKEN" -X POST "127.0.0.1:$port/openapi/v1/trainjob" -d '{"name": "in-image",
    "tasks": [{"name": "t", "command": "cat /etc/jc-image", "imageId": "pytorch-demo", "resourceSpecId": "cpu-1", "replicaNumber": 1}]}' \
    | grep -oE '"jobId":"[^"]+"' | head -n 1 | cut -d'"' -f4 >"$work/image-job"
  image_job=$(cat "$work/image-job")
  for _ in $(seq 1 300); do
    status=$(command curl -s -H "Authorization: Bearer $JC_TOKEN" "127.0.0.1:$port/openapi/v1/trainjob/$image_job" | grep -oE '"status":"[a-z]+"' | head -n 1)
    [[ "$status" == '"status":"completed"' || "$status" == '"status":"failed"' ]] && break
    sleep 0.1
  done
  grep -q 'the pytorch-demo image' <<<"$(command curl -s -H "Authorization: Bearer $JC_TOKEN" "127.0.0.1:$port/openapi/v1/trainjob/$image_job/task/0/replica/0/log/content")" || {
    command curl -s -H "Authorization: Bearer $JC_TOKEN" "127.0.0.1:$port/openapi/v1/trainjob/$image_job"; echo
    echo "FAIL: the demo's job did not run in its image ($status)"; exit 1; }
  echo "ok: the demo's jobs run in its image (pytorch-demo, by digest from the demo registry)"
fi
check '"placed":true' "the plan placed nothing"
echo "ok: the README's trainjob ran on the demo center, completed, and its log downloaded"

# "Services and notebooks": a service at the demo center, opened through its link as a
# browser would (a cookie jar, the redirect), scaled, stopped.
awk '/^## Services and notebooks/{f=1} f&&/^```sh/{b=1;next} b&&/^```/{exit} b{print}' "$root/README.md" \
  | sed "s#localhost:8080#127.0.0.1:$port#g; s#/tmp/jc-cookies#$work/cookies#g" >"$work/service.sh"
[[ -s "$work/service.sh" ]] || { echo "FAIL: no \"Services and notebooks\" block in README.md"; exit 1; }
if ! timeout 180 bash -c 'curl() { command curl --max-time 10 "$@"; echo; }; source "$1"' _ "$work/service.sh" \
    >"$work/service.txt" 2>&1; then
  cat -n "$work/service.txt"; echo "FAIL: the README's service block did not finish"; exit 1
fi
grep -q '^hello from a service$' "$work/service.txt" || {
  cat -n "$work/service.txt"; grep -i endpoint "$work/server.log" | tail -n 5
  echo "FAIL: the service did not answer through its link"; exit 1; }
grep -q '"replicaNumber":3' "$work/service.txt" || { cat -n "$work/service.txt"; echo "FAIL: the scale was not answered"; exit 1; }
grep -q 'jc_endpoint' "$work/cookies" || { cat "$work/cookies"; echo "FAIL: no endpoint session in the cookie jar"; exit 1; }
echo "ok: the README's service answered through its endpoint link, scaled and stopped"

# "jcctl and the operator console": the block as written, with the built jcctl.
awk '/^## jcctl and the operator console/{f=1} f&&/^```sh/{b=1;next} b&&/^```/{exit} b{print}' "$root/README.md" \
  | sed "s#localhost:8080#127.0.0.1:$port#g; s#data/admin.token#$work/admin.token#g; s#build/tools/jcctl/jcctl#$JC_BUILD_DIR/tools/jcctl/jcctl#g; s#/tmp/hello.yaml#$work/hello.yaml#g" >"$work/jcctl.sh"
grep -q 'job watch' "$work/jcctl.sh" || { echo "FAIL: no jcctl block in README.md"; exit 1; }
(set -e; source "$work/jcctl.sh") >"$work/jcctl.txt" 2>&1 || { cat -n "$work/jcctl.txt"; echo "FAIL: the jcctl block failed"; exit 1; }
check_jcctl() {
  grep -q -- "$1" "$work/jcctl.txt" || { cat -n "$work/jcctl.txt"; echo "FAIL: $2"; exit 1; }
}
check_jcctl '^CENTER ' "jcctl center list printed no table"
check_jcctl 'local-1' "jcctl center list does not show the demo center"
check_jcctl '-> local-1' "jcctl plan did not place on local-1"
check_jcctl 'ended  completed' "jcctl job watch did not see the job complete"
check_jcctl 'hello from replica 1' "jcctl job logs did not print the log"
check_jcctl 'hello-jcctl' "jcctl job list does not show the job"
echo "ok: the README's jcctl block ran a job to completion"
grep -q '<title>Jointcloud console</title>' <<<"$(command curl -sf "127.0.0.1:$port/ui/")" || { echo "FAIL: no console at /ui/"; exit 1; }
echo "ok: the console is served at /ui/"
