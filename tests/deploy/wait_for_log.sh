# Sourced by the deploy tests that start daemons and read their ports from their logs.
wait_for_log() {  # FILE PATTERN: the first number after PATTERN, within 30 s
  local found=""
  for _ in $(seq 1 300); do
    found=$(grep -oE "$2[0-9]+" "$1" 2>/dev/null | grep -oE '[0-9]+$' | head -n 1 || true)
    [[ -n "$found" ]] && { echo "$found"; return 0; }
    sleep 0.1
  done
  echo "FAIL: no \"$2\" in $1" >&2
  return 1
}
