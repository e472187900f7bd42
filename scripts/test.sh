#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, starts a throwaway PostgreSQL
# and a throwaway Slurm cluster (for the Slurm adapter), runs every test on the embedded
# store (SQLite) and again on PostgreSQL each test that uses the store (the others, labelled
# store_independent by cmake/jc.cmake and tests/CMakeLists.txt, would run the same twice),
# stops what it started, and exits non-zero if anything failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${JC_BUILD_DIR:-$root/build}"

# How long each stage took, printed at the end (CI has 90 minutes for all of it).
stages=()
stage_start=$(date +%s)
stage_done() {  # NAME: the stage that just ended
  local now
  now=$(date +%s)
  stages+=("$(printf '%-22s %6ss  (%s)' "$1" $((now - stage_start)) "$(date -u -d @$((now - stage_start)) +%H:%M:%S)")")
  stage_start=$now
}
print_stages() {
  echo "test: stage times"
  local line
  for line in "${stages[@]}"; do echo "  $line"; done
}
run_start=$stage_start
if [[ ! -x "$build/services/server/jointcloud" ]]; then
  # docs/benchmarks.md, "First start" and "Build and test time".
  echo "test: first run: installs what is missing, builds everything (654 steps: about 32 minutes on"
  echo "      2 cores), runs every test on SQLite and those that use the store on PostgreSQL, then fuzzes;"
  echo "      stage times at the end."
fi

"$root/scripts/setup.sh" --test --slurm || { stage_done "setup (FAILED)"; print_stages; exit 1; }
stage_done setup
"$root/scripts/build.sh" || { stage_done "build (FAILED)"; print_stages; exit 1; }
stage_done build

pgdir=$(mktemp -d /tmp/jc-pg.XXXXXX)
slurmdir=$(mktemp -d /tmp/jc-slurm.XXXXXX)
cleanup() {
  "$root/scripts/slurm.sh" stop "$slurmdir"
  "$root/scripts/pg.sh" stop "$pgdir"
}
trap cleanup EXIT
pg_uri=$("$root/scripts/pg.sh" start "$pgdir") || { echo "test: PostgreSQL did not start"; cat "$pgdir"/*.log; exit 1; }
echo "test: PostgreSQL at $pg_uri"

# The Slurm adapter's tests need a real cluster. When it cannot start here (Slurm's
# daemons need root), those tests fail and say why; they are never skipped silently.
if slurm_conf=$("$root/scripts/slurm.sh" start "$slurmdir" 2>"$build/slurm-start.log"); then
  export JC_TEST_SLURM_CONF=$slurm_conf
  echo "test: Slurm at $slurm_conf"
else
  JC_TEST_SLURM_UNAVAILABLE=$(tail -n 5 "$build/slurm-start.log" | tr '\n' ' ')
  export JC_TEST_SLURM_UNAVAILABLE
  echo "test: SLURM DID NOT START, the Slurm adapter's tests will fail: $JC_TEST_SLURM_UNAVAILABLE"
fi

failed=0
passed=0
failed_names=()  # "store: test", printed again after the stage times (CI keeps only the tail)
run_suite() {  # BACKEND [ctest arguments]
  local backend=$1
  shift
  echo "=== tests on the $backend store ==="
  local log="$build/ctest-$backend.log"
  JC_TEST_STORE=$backend JC_TEST_PG_URI=$pg_uri \
    ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@" 2>&1 | tee "$log"
  local line
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -n 1)
  if [[ -z "$line" ]]; then
    echo "test: ctest produced no summary on $backend"
    failed=$((failed + 1))
    failed_names+=("$backend: (no ctest summary)")
    return
  fi
  local total fails
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
  fails=$(sed -E 's/.*tests passed, ([0-9]+) tests failed.*/\1/' <<<"$line")
  passed=$((passed + total - fails))
  failed=$((failed + fails))
  local name
  while IFS= read -r name; do
    [[ -n "$name" ]] && failed_names+=("$backend: $name")
  done < <(sed -n '/The following tests FAILED:/,$p' "$log" | sed -nE 's/^[[:space:]]*[0-9]+ - (.*)$/\1/p')
}
stage_done "start PostgreSQL, Slurm"
run_suite sqlite
stage_done "tests (SQLite)"
run_suite postgres --label-exclude store_independent
stage_done "tests (PostgreSQL)"

# Every parser of outside input under libFuzzer for a few seconds each (a clang build of
# just the harnesses, in build-fuzz/); a crash fails the run and prints its input.
echo "=== fuzzing ==="
if "$root/scripts/fuzz.sh" "${JC_FUZZ_SECONDS:-5}"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  failed_names+=("fuzzing: a harness crashed (its input is printed above)")
fi

stage_done "fuzzing (build + run)"
stages+=("$(printf '%-22s %6ss' total $(($(date +%s) - run_start)))")
print_stages
if [[ ${#failed_names[@]} -gt 0 ]]; then
  echo "test: failed tests"
  for name in "${failed_names[@]}"; do echo "  $name"; done
fi
echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]
