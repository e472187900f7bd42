#!/usr/bin/env bash
# Configures (once) and builds Jointcloud into build/ with Ninja and ccache on every core.
#   scripts/build.sh              everything: binaries, tests, benchmarks (scripts/test.sh)
#   scripts/build.sh --run        only what scripts/run.sh starts and what a user drives it
#                                 with: the server, nexec, the adapters and jcctl
#   scripts/build.sh TARGET...    those Ninja targets
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${JC_BUILD_DIR:-$root/build}"
# The binaries a running Jointcloud is made of (scripts/run.sh and its demo center).
run_targets=(jointcloud jcctl nexec-master nexec-agent nexec nexec-run
             jc-adapter-native jc-adapter-local jc-adapter-slurm)
targets=()
for a in "$@"; do
  if [[ "$a" == --run ]]; then targets+=("${run_targets[@]}"); else targets+=("$a"); fi
done
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${JC_BUILD_TYPE:-RelWithDebInfo}"
fi
ninja -C "$build" -j"$(nproc)" "${targets[@]}"
