#!/usr/bin/env bash
# [C3] The docs name nothing the code no longer has (issue 49 item 13): every repository
# path they write in backquotes exists (`x.{h,cc}` both, a binary's name as its .cc), every
# `Class::member` they name is in the sources, and every `--flag` is one some program,
# script or configuration of the repository takes.
#   docs_names_test.sh SOURCE_DIR
set -euo pipefail
cd "$1"
docs=(README.md docs/*.md docs/adr/*.md clients/*/README.md)
failed=0
# Made by the reader, as the docs say (`openssl rand … > deploy/service.token`).
made_by_reader='^(deploy/service\.token)$'
exists() {
  local p=$1
  if [[ $p =~ ^(.*)\{([^}]*)\}(.*)$ ]]; then
    local pre=${BASH_REMATCH[1]} post=${BASH_REMATCH[3]} a
    IFS=, read -ra parts <<<"${BASH_REMATCH[2]}"
    for a in "${parts[@]}"; do exists "$pre$a$post" || return 1; done
    return 0
  fi
  [[ -e $p || -e $p.cc || -e $p.h ]] || compgen -G "$p" >/dev/null
}
while read -r p; do
  p=${p//\`/}; p=${p%%:*}; p=${p%%#*}
  [[ $p =~ $made_by_reader ]] && continue
  exists "$p" || { echo "FAIL: the docs name $p, which the repository does not have"; failed=1; }
done < <(grep -ohE '`(services|common|executor|adapters|tools|tests|scripts|deploy|proto|cmake|docs|clients)/[A-Za-z0-9_./{},*-]+`' "${docs[@]}" | sort -u)
sources=(services common executor adapters tools tests)
while read -r n; do
  n=${n//\`/}; n=${n%()}; m=${n##*::}
  grep -rqw --include=*.h --include=*.cc --include=*.proto -- "$m" "${sources[@]}" ||
    { echo "FAIL: the docs name $n; the sources have no $m"; failed=1; }
done < <(grep -ohE '`[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_:]*(\(\))?`' "${docs[@]}" |
         grep -vE '^`(absl|std|grpc|google|pqxx|YAML|prometheus|httplib|nlohmann)::' | sort -u)
# A flag: declared (ABSL_FLAG(type, name, …), maybe over two lines), in a command table or
# a script ("name", --name), or a program's own we run (Slurm's, munge's, PostgreSQL's …).
foreign='^(num-threads|container)$'
flags_in_code=$(grep -rhzoP --include=*.cc 'ABSL_FLAG\([^,]*,\s*\K[a-z][a-z0-9_]*' "${sources[@]}" | tr '\0' '\n' | sort -u)
while read -r f; do
  f=${f#\`--}
  [[ $f =~ $foreign ]] && continue
  grep -qx -- "$f" <<<"$flags_in_code" && continue
  grep -rqE -- "(\"$f\"|--$f\b)" "${sources[@]}" scripts deploy .ci cmake 2>/dev/null && continue
  grep -rqE --exclude='*.md' -- "(\"$f\"|--$f\b)" clients && continue  # its code, not its README
  echo "FAIL: the docs name the flag --$f, which nothing of the repository takes"
  failed=1
done < <(grep -ohE '`--[a-z][a-z0-9_-]*' "${docs[@]}" | sort -u)
[[ $failed -eq 0 ]] && echo "ok: every path, Class::member and --flag the docs name exists"
exit $failed
