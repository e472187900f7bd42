#!/usr/bin/env bash
# The served OpenAPI document passes the tools platforms use (issue 16 item 4): `redocly
# lint` with its recommended rules, and a TypeScript client generated from it by
# openapi-typescript that compiles with `tsc --strict`. The tools come from npm at the
# versions tests/openapi/package-lock.json pins (installed once into the build tree).
#   openapi_tools_test.sh SOURCE_DIR JOINTCLOUD_BINARY WORK_DIR
set -euo pipefail
src=$1
server=$2
work=$3
tools="$work/tools"
mkdir -p "$tools"
command -v npm >/dev/null || { echo "FAIL: npm is not installed (scripts/setup.sh --test installs it)" >&2; exit 1; }
# One install at a time: two suites sharing a build tree (both stores at once) would
# otherwise both run npm ci into one node_modules and break each other's.
exec 9>"$work/tools.lock"
flock 9
if ! cmp -s "$src/tests/openapi/package-lock.json" "$tools/package-lock.json" || [[ ! -x "$tools/node_modules/.bin/redocly" ]]; then
  cp "$src/tests/openapi/package.json" "$src/tests/openapi/package-lock.json" "$tools/"
  (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error) || { echo "FAIL: npm ci of the OpenAPI tools failed" >&2; exit 1; }
fi
flock -u 9

run=$(mktemp -d /tmp/jc-openapi.XXXXXX)
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$run"
}
trap cleanup EXIT
"$server" --rest_address=127.0.0.1:0 --grpc_address=127.0.0.1:0 --admin_address=127.0.0.1:0 \
  --data_dir="$run/data" --admin_token_file="$run/admin.token" > "$run/server.log" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 1 600); do
  port=$(grep -oE 'rest listening on http://127\.0\.0\.1:[0-9]+' "$run/server.log" | grep -oE '[0-9]+$' || true)
  [[ -n "$port" ]] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n "$port" ]] || { echo "FAIL: the server did not start" >&2; cat "$run/server.log" >&2; exit 1; }
curl -fsS "http://127.0.0.1:$port/openapi/v1/openapi.json" -o "$run/openapi.json"

echo "== redocly lint (recommended rules)"
"$tools/node_modules/.bin/redocly" lint "$run/openapi.json" --format=stylish

echo "== openapi-typescript + tsc --strict"
"$tools/node_modules/.bin/openapi-typescript" "$run/openapi.json" -o "$run/api.d.ts"
cp "$src/tests/openapi/client.ts" "$src/tests/openapi/tsconfig.json" "$run/"
"$tools/node_modules/.bin/tsc" -p "$run/tsconfig.json"
echo "ok: the document lints clean and a generated client compiles"
