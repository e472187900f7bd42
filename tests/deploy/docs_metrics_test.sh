#!/usr/bin/env bash
# Every metric the code exports (a prometheus-cpp family's .Name("...")) is named in the
# docs (issue 33: four exported metrics were in no document).
#   docs_metrics_test.sh SOURCE_DIR
set -uo pipefail
src=$1
failed=0
names=$(grep -rhoE '\.Name\("[a-z_:]+"\)' "$src/services" "$src/common" "$src/executor" "$src/adapters" |
        sed -E 's/\.Name\("([a-z_:]+)"\)/\1/' | sort -u)
[[ -n "$names" ]] || { echo "FAIL: found no metric in the sources" >&2; exit 1; }
for m in $names; do
  if ! grep -q -- "$m" "$src"/docs/*.md; then
    echo "FAIL: metric $m is in no document under docs/" >&2
    failed=1
  fi
done
[[ $failed -eq 0 ]] && echo "ok: $(wc -w <<<"$names") metrics documented"
exit $failed
