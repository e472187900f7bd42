#!/usr/bin/env bash
# Builds an OCI image holding Jupyter Notebook from Debian's own packages, without a daemon
# (no podman, no docker): a Debian bookworm root made by mmdebstrap (--variant=essential,
# as deploy/image/build.sh makes the project's base) from bookworm and bookworm-security,
# with python3-notebook (Notebook 6.4.12; it brings python3-ipykernel, the python3 kernel),
# jupyter-notebook (the `jupyter-notebook` command that `jupyter notebook` runs; it brings
# jupyter-core, the `jupyter` command), and nothing more: merged-/usr made by mmdebstrap's
# merged-usr hook (symlinks and usr-is-merged, as debootstrap does) rather than by the
# usrmerge package that bookworm's essential init-system-helpers takes otherwise, with perl
# (~50 MB); no Recommends, no apt lists or caches, no docs (but the copyright files), man
# pages or translations: 107 MB gzipped, 315 MB unpacked. The layout is written as
# tests/testing/make-oci-image.sh writes its own: one gzip layer, the config, the
# manifest, index.json naming TAG.
#   make-notebook-image.sh DIR TAG [CACHE_DIR]  ->  an OCI image layout in DIR holding TAG
#   (linux/amd64); prints the manifest's digest (sha256:...) as its last line.
# Push it with `skopeo copy oci:DIR:TAG docker://HOST/REPO:TAG`.
# The finished blobs are kept under CACHE_DIR (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/jointcloud/notebook-image), in a directory named by a hash
# of the suite, the architecture, the package list and this script's lines (comments
# aside): a second run only links or copies them into DIR (well under a second). Debian's
# archive moves on meanwhile: remove CACHE_DIR (or CACHE_DIR/KEY) to build from today's
# packages. Older keys' directories are left there (about 110 MB each).
# Needs root (mmdebstrap's root mode), mmdebstrap and mmtarfilter, and Debian's mirror.
#
# Running it: Jupyter writes its runtime files below $HOME (~/.local/share/jupyter), so
# on a read-only root (the executor's containers; they set HOME to the user's home on the
# host, which the image lacks) give it a writable one, e.g. HOME=/tmp (a tmpfs there):
#   HOME=/tmp jupyter notebook --no-browser --ip=127.0.0.1 --port=$JC_PORT_JUPYTER \
#     --NotebookApp.token= --NotebookApp.password= --NotebookApp.allow_remote_access=True \
#     --NotebookApp.base_url=/ --notebook-dir=.
# (allow_remote_access: else Notebook answers 403 to the endpoint's Host header,
# <job>-<task>-<replica>-<port>.endpoints.localhost:PORT, which is not "localhost".)
# With no token, whatever reaches the port runs code as the job's user: the containers
# share the host's network, so any process on that host can, and on 0.0.0.0 any host.
set -euo pipefail
dir=${1:?usage: make-notebook-image.sh DIR TAG [CACHE_DIR]}
tag=${2:?usage: make-notebook-image.sh DIR TAG [CACHE_DIR]}
cache=${3:-${XDG_CACHE_HOME:-$HOME/.cache}/jointcloud/notebook-image}
suite=bookworm
mirrors=("deb http://deb.debian.org/debian $suite main" "deb http://deb.debian.org/debian-security $suite-security main")
arch=amd64
packages=python3-notebook,jupyter-notebook
for tool in mmdebstrap mmtarfilter sha256sum gzip flock; do
  command -v "$tool" >/dev/null || { echo "make-notebook-image: $tool is not installed" >&2; exit 1; }
done
[[ -d /usr/share/mmdebstrap/hooks/merged-usr ]] || { echo "make-notebook-image: mmdebstrap's merged-usr hook is missing" >&2; exit 1; }

key=$( { printf '%s\n' "$suite" "$arch" "$packages" "${mirrors[@]}"; grep -v '^ *#' "$0"; } | sha256sum | cut -c1-16)
mkdir -p "$cache"
entry=$cache/$key
exec 9>"$cache/.lock"
flock 9  # one build at a time per cache

if [[ ! -f $entry/done ]]; then
  work=$(mktemp -d "$cache/.build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "make-notebook-image: making the root filesystem with mmdebstrap ($suite: ${packages//,/ })" >&2
  mmdebstrap --variant=essential --architectures="$arch" --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/apt/* "$1"/var/log/dpkg.log "$1"/var/cache/debconf/*-old "$1"/var/lib/dpkg/*-old' \
    --customize-hook='for p in usrmerge perl; do if chroot "$1" dpkg-query -s $p >/dev/null 2>&1; then echo "$p came in" >&2; exit 1; fi; done' \
    "$suite" "$work/root.tar" "${mirrors[@]}" >"$work/mmdebstrap.log" 2>&1 || { tail -n 30 "$work/mmdebstrap.log" >&2; exit 1; }
  mkdir -p "$work/layout/blobs/sha256"
  blob() {  # FILE -> moved into blobs, prints its digest
    local d
    d=$(sha256sum "$1" | cut -d' ' -f1)
    mv "$1" "$work/layout/blobs/sha256/$d"
    echo "$d"
  }
  # One layer: the root without /dev's nodes (the runtime makes /dev; the executor unpacks
  # without privilege and would turn them into empty files anyway).
  mmtarfilter --path-exclude='/dev/*' <"$work/root.tar" >"$work/layer.tar"
  rm "$work/root.tar"
  diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  gzip -n -6 "$work/layer.tar"
  layer_size=$(stat -c %s "$work/layer.tar.gz")
  layer=$(blob "$work/layer.tar.gz")
  printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8","HOME=/tmp","PYDEVD_DISABLE_FILE_VALIDATION=1"],"Cmd":["jupyter","notebook","--no-browser","--ip=127.0.0.1","--port=8888","--allow-root","--notebook-dir=/tmp"],"WorkingDir":"/tmp","ExposedPorts":{"8888/tcp":{}}},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$arch" "$diff_id" >"$work/config"
  config_size=$(stat -c %s "$work/config")
  config=$(blob "$work/config")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
    "$config" "$config_size" "$layer" "$layer_size" >"$work/manifest"
  manifest_size=$(stat -c %s "$work/manifest")
  manifest=$(blob "$work/manifest")
  printf 'sha256:%s %s\n' "$manifest" "$manifest_size" >"$work/layout/manifest"
  mv "$work/mmdebstrap.log" "$work/layout/"
  touch "$work/layout/done"
  rm -rf "$entry"
  mv "$work/layout" "$entry"
fi

read -r manifest manifest_size <"$entry/manifest"
mkdir -p "$dir/blobs/sha256"
for b in "$entry"/blobs/sha256/*; do
  # Hard links where the cache and DIR share a file system (the cache's blobs are never
  # written again), else copies.
  [[ -e $dir/blobs/sha256/${b##*/} ]] || ln "$b" "$dir/blobs/sha256/" 2>/dev/null || cp "$b" "$dir/blobs/sha256/"
done
printf '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest" "$manifest_size" "$tag" >"$dir/index.json"
echo "$manifest"
