#!/usr/bin/env bash
# Docs that match the code (issue 16 item 8): every flag a binary defines in its own
# sources (absl's --helpfull groups flags by the file defining them) is named in its doc
# as `--flag`, and with --table, every `--flag` in the doc's first flag table exists.
#   docs_flags_test.sh DOC SOURCE_REGEX BINARY... [--table]
set -uo pipefail
doc=$1
sources=$2
shift 2
check_table=0
binaries=()
for a in "$@"; do
  if [[ "$a" == --table ]]; then check_table=1; else binaries+=("$a"); fi
done
failed=0
declare -A defined=()
for binary in "${binaries[@]}"; do
  flags=$("$binary" --helpfull 2>&1 | awk -v re="$sources" '/^  Flags from/{keep = ($0 ~ re)} keep && /^    --/' |
          sed -E 's/^    --([a-z_0-9]+).*/\1/')
  [[ -n "$flags" ]] || { echo "FAIL: $(basename "$binary") --helpfull lists no flag from $sources" >&2; failed=1; }
  for f in $flags; do
    defined[$f]=1
    if ! grep -qE -- "--$f([^a-z_0-9]|$)" "$doc"; then
      echo "FAIL: $(basename "$binary") --$f is not in $(basename "$doc")" >&2
      failed=1
    fi
  done
done
if [[ $check_table -eq 1 ]]; then
  # The first table whose header is "| flag | default | meaning |".
  table=$(awk '/^\| flag \| default \| meaning \|/{on=1; next} on && !/^\|/{exit} on' "$doc")
  for f in $(grep -oE -- '--[a-z_0-9*]+' <<<"$table" | sed 's/^--//' | sort -u); do
    if [[ "$f" == *"*"* ]]; then
      pattern="^${f//\*/.*}$"
      matched=0
      for d in "${!defined[@]}"; do [[ "$d" =~ $pattern ]] && matched=1; done
      [[ $matched -eq 1 ]] || { echo "FAIL: $(basename "$doc") names --$f, which matches no flag" >&2; failed=1; }
    elif [[ -z "${defined[$f]:-}" ]]; then
      echo "FAIL: $(basename "$doc") names --$f, which the binary does not have" >&2
      failed=1
    fi
  done
fi
[[ $failed -eq 0 ]] && echo "ok: ${#defined[@]} flags documented in $(basename "$doc")"
exit $failed
