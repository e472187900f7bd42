#!/usr/bin/env bash
# Configures (once) and builds Jointcloud into build/ with Ninja and ccache on every core.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${JC_BUILD_DIR:-$root/build}"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${JC_BUILD_TYPE:-RelWithDebInfo}"
fi
ninja -C "$build" -j"$(nproc)"
