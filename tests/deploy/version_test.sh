#!/usr/bin/env bash
# Every binary answers --version on stdout with "NAME VERSION (commit HASH)" and exit 0
# (issue 16 item 7; the image test runs the same inside the image).
#   version_test.sh VERSION BINARY...
set -uo pipefail
version=$1
shift
failed=0
for binary in "$@"; do
  name=$(basename "$binary")
  out=$("$binary" --version 2>/dev/null)
  code=$?
  if [[ $code -ne 0 ]]; then
    echo "FAIL: $name --version exited $code" >&2
    failed=1
    continue
  fi
  if ! [[ "$out" =~ ^$name\ $version\ \(commit\ ([0-9a-f]+|unknown)\)$ ]]; then
    echo "FAIL: $name --version printed \"$out\"" >&2
    failed=1
    continue
  fi
  echo "ok: $out"
done
exit $failed
