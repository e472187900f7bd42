#!/usr/bin/env bash
# Installs what is missing, builds, and starts Jointcloud in the foreground with the
# embedded store in ./data: REST on 127.0.0.1:8080, gRPC on 127.0.0.1:50051.
# Extra arguments go to the server (see `build/services/server/jointcloud --help`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
exec "${JC_BUILD_DIR:-$root/build}/services/server/jointcloud" --data_dir="$root/data" "$@"
