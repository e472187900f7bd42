#!/usr/bin/env bash
# [C3] deploy/docker-compose.yml is valid for Debian's docker-compose, every jointcloud
# flag it passes exists in the binary, and Prometheus scrapes services that exist.
# (compose_up_test.sh brings the stack up and runs a job.)
set -euo pipefail
root=$1
binary=$2
compose="$root/deploy/docker-compose.yml"

command -v docker-compose >/dev/null || { echo "FAIL: docker-compose is not installed (scripts/setup.sh --test installs it)"; exit 1; }
docker-compose -f "$compose" config -q
echo "ok: docker-compose config accepts $compose"

known=$({ "$binary" --helpfull 2>&1 || true; } | grep -oE -- '--[a-z_]+' | sort -u)
used=$(grep -oE -- '- --[a-z_]+' "$compose" | sed 's/- //' | sort -u)
[[ -n "$used" ]] || { echo "FAIL: no jointcloud flags found in $compose"; exit 1; }
for flag in $used; do
  if ! grep -qx -- "$flag" <<<"$known"; then
    echo "FAIL: $compose passes $flag, which jointcloud does not know"
    exit 1
  fi
done
echo "ok: all $(wc -w <<<"$used") jointcloud flags in the compose file exist"

services=$(docker-compose -f "$compose" config --services)
for target in $(grep -oE '[a-z][a-z0-9-]*:[0-9]+' "$root/deploy/prometheus.yml"); do
  host=${target%%:*}
  if ! grep -qx "$host" <<<"$services"; then
    echo "FAIL: prometheus.yml scrapes $target but the compose file has no service $host"
    exit 1
  fi
done
echo "ok: every Prometheus target is a compose service"
