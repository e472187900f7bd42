#!/usr/bin/env bash
# Regenerates the charts and tables of docs/placement-quality.md with jc-sim:
#   scripts/placement-report.sh [BUILD_DIR=build] [OUT=docs/placement-quality]
# Every figure there comes from these commands; the seeds make them reproducible.
set -euo pipefail
build=${1:-build}
out=${2:-docs/placement-quality}
sim="$build/tools/sim/jc-sim"
[ -x "$sim" ] || { echo "placement-report: $sim not built (scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# A 10-center heterogeneous federation (T4 to H100, 8 to 256 GPUs), and a 5,000-job trace
# at 80% offered load (its datasets go into the federation it writes).
"$sim" federation --centers 10 --seed 1 --out "$work/federation.yaml"
"$sim" generate --federation "$work/federation.yaml" --jobs 5000 --load 0.8 --seed 1 \
  --out "$work/trace.csv" --federation-out "$out/federation.yaml"
# Every baseline, scorer and profile on that trace, FCFS and fair share.
"$sim" compare --federation "$out/federation.yaml" --trace "$work/trace.csv" --queue both --out "$work/compare"
# Offered load from 50% to 120%, three seeds per point, 10,000 jobs each (fewer: the
# heavy tail runs past the arrivals and the load is lower than offered).
"$sim" sweep --federation "$work/federation.yaml" --loads 0.5,0.6,0.7,0.8,0.9,1.0,1.1,1.2 --seeds 3 --jobs 10000 \
  --policies first_fit,random,round_robin,profile:default,profile:performance,profile:cost --out "$work/sweep"
# Weights tuned on one trace, reported on another.
"$sim" generate --federation "$out/federation.yaml" --jobs 3000 --load 0.8 --seed 7 --out "$work/train.csv"
"$sim" generate --federation "$out/federation.yaml" --jobs 3000 --load 0.8 --seed 8 --out "$work/holdout.csv"
"$sim" tune --federation "$out/federation.yaml" --trace "$work/train.csv" --holdout "$work/holdout.csv" \
  --evaluations 60 --out "$out/tuned-profile.yaml" | tee "$out/tune.txt"

cp "$work"/compare/*.svg "$work"/compare/runs.csv "$work"/sweep/*.svg "$work"/sweep/sweep.csv "$out/"
cp "$work/compare/index.html" "$out/compare.html"
cp "$work/sweep/index.html" "$out/sweep.html"
echo "placement-report: wrote $out"
