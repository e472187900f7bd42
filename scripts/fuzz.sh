#!/usr/bin/env bash
# Fuzzes every parser of outside input with libFuzzer (tests/fuzz/), address and
# undefined-behaviour checks on:
#   scripts/fuzz.sh [seconds=5] [harness...]
# Builds the harnesses with clang in build-fuzz/ (once; then only what changed), runs each
# for `seconds` starting from its corpus in tests/fuzz/corpus/<harness>/ (what it finds
# goes to a scratch directory, not the repository), and exits non-zero on the first crash,
# leak or timeout, printing the input that caused it. A long run: scripts/fuzz.sh 600.
# The mutations follow JC_FUZZ_SEED (default 1), so a run can be repeated and the test
# command's short run is the same on every machine (a slower one goes less far along the
# same path); long runs should set another seed each time.
# Add an input that found a bug to its corpus and a test for it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-5}
shift || true
build="${JC_FUZZ_BUILD_DIR:-$root/build-fuzz}"
harnesses=("$@")
[[ ${#harnesses[@]} -gt 0 ]] || harnesses=(quantity_fuzz requirement_fuzz center_config_fuzz executor_config_fuzz trainjob_body_fuzz auth_header_fuzz
                                            image_reference_fuzz oci_manifest_fuzz oci_token_fuzz
                                            slurm_output_fuzz accounting_period_fuzz cdi_spec_fuzz)

command -v clang++ >/dev/null || { echo "fuzz: clang++ is not installed (scripts/setup.sh --test installs it)" >&2; exit 1; }
if [[ ! -f "$build/build.ninja" ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJC_FUZZ=ON >/dev/null
fi
ninja -C "$build" -j"$(nproc)" "${harnesses[@]}"

scratch=$(mktemp -d /tmp/jc-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
failed=0
for h in "${harnesses[@]}"; do
  corpus="$root/tests/fuzz/corpus/$h"
  mkdir -p "$scratch/$h" "$scratch/$h-crash"
  log="$scratch/$h.log"
  if "$build/tests/fuzz/$h" -seed="${JC_FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$scratch/$h-crash/" "$scratch/$h" "$corpus" >"$log" 2>&1; then
    echo "fuzz: $h: $(grep -oE '#[0-9]+ +DONE.*' "$log" | tail -n 1 || tail -n 1 "$log")"
  else
    failed=$((failed + 1))
    echo "fuzz: $h FAILED:"
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$log" | head -n 20 || tail -n 30 "$log"
    for f in "$scratch/$h-crash"/*; do
      [[ -f $f ]] && { echo "  input (base64): $(base64 -w0 "$f" | head -c 2000)"; cp "$f" "$build/"; }
    done
  fi
done
[[ $failed -eq 0 ]] && echo "fuzz: ${#harnesses[@]} harnesses, ${seconds} s each: no crash" || exit 1
