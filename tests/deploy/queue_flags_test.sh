#!/usr/bin/env bash
# The control plane refuses an unknown queue order, a non-positive --queue_max_wait, an
# --queue_aging outside (0, 100] and move settings out of range at start, naming the valid
# values, and starts with each valid order (SPEC A16, issue 45).
#   queue_flags_test.sh JOINTCLOUD
set -uo pipefail
binary=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
refuse() {  # refuse WHAT-IT-SAYS FLAGS...
  local says=$1
  shift
  if out=$(timeout 20 "$binary" --data_dir="$dir/refused" --grpc_address=127.0.0.1:0 --rest_address=127.0.0.1:0 "$@" 2>&1); then
    echo "FAIL: jointcloud $* started" >&2
    failed=1
  elif ! grep -qF -- "$says" <<<"$out"; then
    echo "FAIL: jointcloud $* did not say '$says':" >&2
    tail -3 <<<"$out" >&2
    failed=1
  else
    echo "ok: jointcloud $* refused: $(grep -F -- "$says" <<<"$out" | head -1)"
  fi
}
refuse "fcfs, fair_share, sef, fair_share+sef, hrrn, fair_share+hrrn, las, fair_share+las" --queue_order=shortest
refuse "--queue_max_wait: must be positive" --queue_order=sef --queue_max_wait=0s
refuse "--queue_aging: must be in (0, 100]" --queue_order=sef --queue_aging=0
refuse "--queue_aging: must be in (0, 100]" --queue_order=sef --queue_aging=nan
refuse "--max_moves: must be between 0 (never) and 100" --max_moves=-1
refuse "--move_after: must be positive" --move_after=0s
refuse "--move_margin: must be a fraction in [0, 1)" --move_margin=1
# Told nothing, it runs the measured default (highest response ratio next) and says so.
log="$dir/default.log"
"$binary" --data_dir="$dir/default" --grpc_address=127.0.0.1:0 --rest_address=127.0.0.1:0 >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  if grep -q "rest listening" "$log" || ! kill -0 "$pid" 2>/dev/null; then break; fi
  sleep 0.1
done
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if grep -qF "queue order: hrrn, max wait 24h" "$log"; then echo "ok: the default queue order is said at start"; else
  echo "FAIL: the default start did not say 'queue order: hrrn, max wait 24h':" >&2
  tail -5 "$log" >&2
  failed=1
fi
# Each valid order starts (and is stopped once its REST port answers /healthz).
for order in fcfs fair_share sef fair_share+sef hrrn fair_share+hrrn las fair_share+las; do
  log="$dir/$order.log"
  : >"$log"
  "$binary" --data_dir="$dir/$order" --grpc_address=127.0.0.1:0 --rest_address=127.0.0.1:0 --queue_order="$order" >"$log" 2>&1 &
  pid=$!
  up=0
  for _ in $(seq 1 100); do
    if grep -q "rest listening" "$log"; then up=1; break; fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  if [ "$up" = 1 ]; then echo "ok: --queue_order=$order starts"; else
    echo "FAIL: --queue_order=$order did not start:" >&2
    tail -3 "$log" >&2
    failed=1
  fi
done
exit $failed
