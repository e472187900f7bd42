#!/bin/bash
# Placement variants on the Philly and PAI shapes (issue 45 items 2 and 6): each policy x
# queue order on 3 seeds x 5,000 recurring jobs at loads 0.5 and 3.0, over the federation of
# `jc-sim federation --centers 10 --seed 7`; prints per shape, load, queue and policy the mean
# JCT and cost against first fit + fcfs, the share of JCT spent waiting, and Jain's index over
# the projects' mean slowdown. Queues: fcfs, sef (aging 1), sef/0.25 (aging 0.25). About 3 minutes.
# usage: tests/bench/placement_variants.sh [build dir=build]
set -euo pipefail
S=${1:-build}/tools/sim/jc-sim
[ -x "$S" ] || { echo "placement_variants: $S not built" >&2; exit 2; }
dir=$(mktemp -d /tmp/jc-variants.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$S" federation --centers 10 --seed 7 --out "$dir/fed.yaml" >/dev/null
ALL="least_load spec_free_capacity data_topology_affinity lowest_price lowest_energy highest_performance highest_security load_fairness network data_aware qos_deadline gpu_fragmentation"
# weights: the default's (every strategy 1, expected_completion 0), then overrides ID=W.
w() {
  local out="" id v kv
  declare -A o=()
  for kv in "$@"; do o[${kv%%=*}]=${kv#*=}; done
  for id in $ALL expected_completion; do
    v=1; [ "$id" = expected_completion ] && v=0
    [ -n "${o[$id]:-}" ] && v=${o[$id]}
    out="$out,$id=$v"
  done
  echo "weights:${out#,}"
}
policies=(first_fit profile:default profile:cost profile:completion "$(w lowest_price=2)" "$(w lowest_price=3)"
          "$(w lowest_price=3 highest_performance=0)" "$(w lowest_price=2 load_fairness=3)")
for shape in philly pai; do for load in 0.5 3.0; do for seed in 1 2 3; do
  f="$dir/$shape-$load-$seed"
  "$S" generate --federation "$dir/fed.yaml" --out "$f.csv" --jobs 5000 --load $load --seed $seed --shape $shape \
    --recurring 0.8 --federation-out "$f.yaml" >/dev/null
  for p in "${policies[@]}"; do for q in fcfs sef sef/0.25; do  # sef/A: sef with --queue_aging A
    aging=1; [[ $q == */* ]] && aging=${q#*/}
    echo "$shape $load $seed $q $p | $("$S" run --federation "$f.yaml" --trace "$f.csv" --policy "$p" --queue ${q%/*} \
      --queue_aging $aging | sed -n 2p)"
  done; done
done; done; done > "$dir/runs.txt"
python3 - "$dir/runs.txt" <<'PY'
import collections, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    left, right = line.split('|', 1)
    shape, load, seed, q, p = left.split(None, 4)
    f = right.split()
    rows[(shape, load, q, p.strip())].append((float(f[2]), float(f[4]), float(f[5]), float(f[7])))
mean = lambda v: [sum(x[i] for x in v) / len(v) for i in range(4)]
base = {(s, l): mean(v) for (s, l, q, p), v in rows.items() if p == 'first_fit' and q == 'fcfs'}
print(f"{'SHAPE':6} {'LOAD':4} {'QUEUE':8} {'POLICY (weights other than the default)':44} {'JCT':>7} {'WAIT/JCT':>8} {'COST':>6} {'JAIN':>6} {'BASE JAIN':>9}")
for (s, l, q, p), v in sorted(rows.items()):
    m, b = mean(v), base[(s, l)]
    if p.startswith('weights:'):
        p = 'w:' + ','.join(kv for kv in p[8:].split(',') if not kv.endswith('=1') and kv != 'expected_completion=0')
    print(f"{s:6} {l:4} {q:8} {p:44} {100*(m[0]-b[0])/b[0]:+6.1f}% {m[1]/m[0]:8.2f} {100*(m[2]-b[2])/b[2]:+5.1f}% {m[3]:6.3f} {b[3]:9.3f}")
PY
