#!/usr/bin/env bash
# Every daemon's --help lists its own flags on stdout with exit 0 (issue 33: `jointcloud
# --help` printed "No flags matched"), the shared ones (--log_level) included.
#   daemon_help_test.sh BINARY...
set -uo pipefail
failed=0
for binary in "$@"; do
  name=$(basename "$binary")
  out=$("$binary" --help 2>/dev/null)
  code=$?
  # absl exits 1 after --help; what matters is that the flags are there, on stdout.
  if grep -q "No flags matched" <<<"$out" || ! grep -q -- "--log_level" <<<"$out"; then
    echo "FAIL: $name --help lists no flags of its own (exit $code):" >&2
    head -5 <<<"$out" >&2
    failed=1
    continue
  fi
  if grep -q -- "^    --flagfile" <<<"$out"; then
    echo "FAIL: $name --help lists Abseil's own flags (those are --helpfull's)" >&2
    failed=1
    continue
  fi
  echo "ok: $name --help lists $(grep -c -- '^    --' <<<"$out") flags"
done
exit $failed
