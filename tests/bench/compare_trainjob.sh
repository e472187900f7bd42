#!/usr/bin/env bash
# Benchmark (b) of two commits one after the other on this machine (this VM's speed drifts
# by up to 2x between hours, so only figures from one run of this script compare):
#   tests/bench/compare_trainjob.sh OLD_REV [NEW_REV|.] [jobs] [clients] [rounds]
# Builds trainjob_throughput_bench of OLD_REV in a worktree under /tmp (NEW_REV "." is the
# working tree's build/), starts a PostgreSQL with fsync on, and alternates the two,
# printing each run's line and the median ratio new/old of jobs/s.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
old=$1
new=${2:-.}
jobs=${3:-20000}
clients=${4:-32}
rounds=${5:-3}

build_rev() {  # prints the bench binary's path for a revision
  local rev=$1
  if [[ $rev == "." ]]; then
    ninja -C "$root/build" trainjob_throughput_bench >/dev/null
    echo "$root/build/tests/bench/trainjob_throughput_bench"
    return
  fi
  local sha
  sha=$(git -C "$root" rev-parse --short "$rev")
  local tree=/tmp/jc-bench-$sha
  [[ -d $tree ]] || git -C "$root" worktree add -f "$tree" "$sha" >/dev/null 2>&1
  [[ -f $tree/build/build.ninja ]] || cmake -S "$tree" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C "$tree/build" trainjob_throughput_bench >/dev/null
  echo "$tree/build/tests/bench/trainjob_throughput_bench"
}

old_bin=$(build_rev "$old")
new_bin=$(build_rev "$new")
pgdir=$(mktemp -d /tmp/jc-bench-pg.XXXXXX)
trap '"$root/scripts/pg.sh" stop "$pgdir"' EXIT
pg=$(JC_PG_FSYNC=on "$root/scripts/pg.sh" start "$pgdir")

rate() { grep -oE '[0-9]+ jobs/s end to end' | head -n 1 | grep -oE '^[0-9]+'; }
cpu() { grep -oE '[0-9]+ us per job' | head -n 1 | grep -oE '^[0-9]+'; }
# Each run starts on a database with no other run's tables: a bench before session 78 leaves its
# schema behind, and autovacuum works through those tables during later runs' timed windows, on
# one of the two cores (with 24 left, T's p99 was 13-41 ms in 6 of 15 runs; with none, 7-8 ms).
fresh() {
  local s
  for s in $(psql "$pg" -Atc "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench\_%'"); do
    psql "$pg" -qc "SET client_min_messages TO warning; DROP SCHEMA $s CASCADE"
  done
  psql "$pg" -qc "CHECKPOINT"
}
ratios=()
for r in $(seq 1 "$rounds"); do
  fresh
  o_out=$("$old_bin" "$pg" "$jobs" "$clients" 1000 2>/dev/null)
  fresh
  n_out=$("$new_bin" "$pg" "$jobs" "$clients" 1000 2>/dev/null)
  printf '%s\n%s\n' "$o_out" "$n_out" >&2
  o=$(rate <<<"$o_out")
  n=$(rate <<<"$n_out")
  echo "round $r: old $old ${o} jobs/s ($(cpu <<<"$o_out") us CPU per job), new $new ${n} jobs/s ($(cpu <<<"$n_out") us CPU per job)"
  ratios+=("$(awk -v a="$n" -v b="$o" 'BEGIN { printf "%.3f", a / b }')")
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "median new/old: %.3f (of %d rounds)\n", a[int((NR + 1) / 2)], NR }'
