#!/usr/bin/env bash
# [C1] The README's "Try it" examples work as written: start the real server on free
# ports, run the examples (with localhost:8080 pointed at it), and check every answer.
set -euo pipefail
root=$1
binary=$2
work=$(mktemp -d /tmp/jc-readme.XXXXXX)
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$binary" --data_dir="$work/data" --rest_address=127.0.0.1:0 --grpc_address=127.0.0.1:0 \
  >"$work/server.log" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 1 300); do
  port=$(grep -oE 'rest listening on http://127\.0\.0\.1:[0-9]+' "$work/server.log" | grep -oE '[0-9]+$' || true)
  [[ -n "$port" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; echo "FAIL: server exited"; exit 1; }
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$work/server.log"; echo "FAIL: server did not start"; exit 1; }

# The shell block under "## Try it".
awk '/^## Try it/{f=1} f&&/^```sh/{b=1;next} b&&/^```/{exit} b{print}' "$root/README.md" \
  | sed "s#localhost:8080#127.0.0.1:$port#g" >"$work/examples.sh"
[[ -s "$work/examples.sh" ]] || { echo "FAIL: no examples found in README.md"; exit 1; }

# One answer per line: curl prints bodies without a trailing newline.
(curl() { command curl --max-time 10 "$@"; echo; }; source "$work/examples.sh") >"$work/out.txt"
answers=$(wc -l <"$work/out.txt")
calls=$(grep -c '^curl ' "$work/examples.sh")
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
echo "ok: all $calls README examples answered as documented"
