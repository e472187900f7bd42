#!/usr/bin/env bash
# Builds the Jointcloud image with podman from binaries already built, without a registry
# and without running anything inside a container (issue 16 item 7):
#   1. the base: a Debian bookworm root filesystem made by mmdebstrap from Debian's own
#      packages, holding exactly the libraries the binaries link (found with ldd and
#      dpkg -S) and a `jointcloud` system user, imported with `podman import`; it is kept
#      under a tag named by the hash of that package list, so it is made again only when
#      the list changes;
#   2. the image: deploy/Dockerfile on top of it, which only copies the binaries in.
#
#   deploy/image/build.sh BUILD_DIR [TAG] [--postgres]   (default TAG: jointcloud:latest)
# --postgres also builds localhost/jointcloud-postgres:15 (PostgreSQL from Debian's
# packages, for the compose stack where no registry is reachable).
# Needs root, podman and mmdebstrap (scripts/setup.sh --test installs them).
set -euo pipefail
build=$(cd "${1:?usage: build.sh BUILD_DIR [TAG] [--postgres]}" && pwd)
tag=${2:-jointcloud:latest}
with_postgres=${3:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
for tool in podman mmdebstrap; do
  command -v "$tool" >/dev/null || { echo "build.sh: $tool is not installed (scripts/setup.sh --test)" >&2; exit 1; }
done

binaries=(services/server/jointcloud tools/jcctl/jcctl executor/nexec-master executor/nexec-agent executor/nexec
          executor/nexec-run adapters/jc-adapter-native adapters/jc-adapter-local adapters/jc-adapter-slurm)
work=$(mktemp -d /tmp/jc-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/context/bin"
for b in "${binaries[@]}"; do
  [[ -x "$build/$b" ]] || { echo "build.sh: $build/$b is not built" >&2; exit 1; }
  cp "$build/$b" "$work/context/bin/"
done
cp "$root/deploy/Dockerfile" "$work/context/Dockerfile"
cp "$root/deploy/image/jc-demo-center" "$root/deploy/image/jc-demo-job" "$work/context/bin/"

# The Debian package of every library a binary links.
packages=$(
  for b in "${binaries[@]}"; do ldd "$build/$b" | awk '$3 ~ /^\// {print $3}'; done | sort -u | while read -r lib; do
    real=$(realpath "$lib")
    pkg=$(dpkg -S "$real" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null) || {
      echo "build.sh: no Debian package owns $lib" >&2; exit 1; }
    echo "${pkg%%:*}"
  done | sort -u | tr '\n' ',' )
packages="${packages}ca-certificates,passwd,procps,curl"
base="localhost/jointcloud-base:$(sha256sum <<<"$packages" | cut -c1-12)"
if ! podman image exists "$base"; then
  echo "build.sh: making the base root filesystem with mmdebstrap (bookworm: ${packages//,/ })"
  mmdebstrap --variant=essential --include="$packages" \
    --customize-hook='chroot "$1" useradd --system --home-dir /var/lib/jointcloud --create-home jointcloud' \
    --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*' \
    bookworm "$work/base.tar" >"$work/mmdebstrap.log" 2>&1 || { tail -n 30 "$work/mmdebstrap.log" >&2; exit 1; }
  podman import --quiet "$work/base.tar" "$base" >/dev/null
fi
podman build --quiet --build-arg BASE="$base" -t "$tag" "$work/context" >/dev/null
echo "build.sh: built $tag on $base"

if [[ "$with_postgres" == --postgres ]]; then
  pg_base=localhost/jointcloud-postgres-base:15
  if ! podman image exists "$pg_base"; then
    echo "build.sh: making PostgreSQL's root filesystem with mmdebstrap"
    mmdebstrap --variant=essential --include=postgresql-15,postgresql-client-15,passwd,procps \
      --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*' \
      bookworm "$work/pg.tar" >"$work/mmdebstrap-pg.log" 2>&1 || { tail -n 30 "$work/mmdebstrap-pg.log" >&2; exit 1; }
    podman import --quiet "$work/pg.tar" "$pg_base" >/dev/null
  fi
  mkdir -p "$work/pg-context"
  cp "$root/deploy/image/Dockerfile.postgres" "$work/pg-context/Dockerfile"
  cp "$root/deploy/image/postgres-entrypoint" "$work/pg-context/"
  podman build --quiet --build-arg BASE="$pg_base" -t localhost/jointcloud-postgres:15 "$work/pg-context" >/dev/null
  echo "build.sh: built localhost/jointcloud-postgres:15 on $pg_base"
fi
