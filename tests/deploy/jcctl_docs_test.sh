#!/usr/bin/env bash
# [C3] docs/jcctl.md's command table names every command `jcctl --help` lists, each with
# every flag its own --help lists, and no command jcctl lacks.
#   jcctl_docs_test.sh DOC JCCTL
set -euo pipefail
doc=$1
jcctl=$2
failed=0
commands=$("$jcctl" --help | sed -n '/^Commands:/,/^$/p' | sed -n 's/^  \([a-z][a-z -]*[a-z]\)\( [A-Z\[].*\)\?  .*/\1/p' | sed 's/ *$//')
[[ -n "$commands" ]] || { echo "FAIL: jcctl --help lists no commands"; exit 1; }
while read -r command; do
  # shellcheck disable=SC2086
  row=$(grep -E "^\| \`jcctl $command( |\`)" "$doc" || true)
  if [[ -z "$row" ]]; then
    echo "FAIL: $doc has no row for jcctl $command"
    failed=1
    continue
  fi
  # shellcheck disable=SC2086
  for flag in $("$jcctl" $command --help | sed -n '/^Flags:/,/^$/p' | grep -oE -- '--[a-z_]+'); do
    grep -qE -- "\`$flag[\` ]" <<<"$row" || { echo "FAIL: $doc's row for jcctl $command does not name $flag"; failed=1; }
  done
done <<<"$commands"
while read -r documented; do
  # "completion bash|zsh": a one-word command and its argument
  grep -qx "$documented" <<<"$commands" || grep -qx "${documented%% *}" <<<"$commands" || { echo "FAIL: $doc documents jcctl $documented, which jcctl lacks"; failed=1; }
done < <(grep -oE '^\| `jcctl [a-z]+( [a-z][a-z-]*)?' "$doc" | sed 's/^| `jcctl //')
[[ $failed -eq 0 ]] && echo "ok: $(wc -l <<<"$commands") jcctl commands and their flags are in $doc"
exit $failed
