#!/usr/bin/env bash
# Builds a small OCI image for the tests, from what Debian ships, without a daemon or a
# download: busybox (static) as /bin/sh and its applets, and the file /etc/jc-image that
# names the image: a command that reads it succeeds only inside the image.
#   make-oci-image.sh DIR TAG TEXT [ARCH]  ->  an OCI image layout in DIR holding TAG (for
#   linux/ARCH, amd64 by default; busybox is this host's whatever ARCH says)
# Push it with `skopeo copy oci:DIR:TAG docker://HOST/REPO:TAG`. With $JC_IMAGE_PAD_MB, the
# image also holds that many MB of random data (/opt/pad), as a framework image would.
# With $JC_IMAGE_HOSTILE=1 (as root: mknod), it also holds what a hostile image would bring
# to a host (issue 44): the character device 1:11 (/dev/kmsg's numbers), mode 0666, as
# /dev/kmsg and /opt/kmsg, the block device 7:0 (a loop device) as /opt/disk, and busybox
# setuid root as /opt/suid and setgid root as /opt/sgid.
set -euo pipefail
dir=${1:?usage: make-oci-image.sh DIR TAG TEXT}
tag=${2:?usage: make-oci-image.sh DIR TAG TEXT}
text=${3:?usage: make-oci-image.sh DIR TAG TEXT}
arch=${4:-amd64}
busybox=$(command -v busybox) || { echo "make-oci-image: busybox is not installed (busybox-static)" >&2; exit 1; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/proc" "$root/sys" "$root/dev" "$root/work"
cp "$busybox" "$root/bin/busybox"
for applet in sh cat echo ls id sleep true false env pwd head wc grep; do ln -s busybox "$root/bin/$applet"; done
printf '%s\n' "$text" >"$root/etc/jc-image"
if [[ ${JC_IMAGE_PAD_MB:-0} -gt 0 ]]; then
  mkdir -p "$root/opt"
  head -c "$((JC_IMAGE_PAD_MB * 1024 * 1024))" /dev/urandom >"$root/opt/pad"
fi
if [[ ${JC_IMAGE_HOSTILE:-0} == 1 ]]; then
  mkdir -p "$root/opt"
  mknod -m 0666 "$root/dev/kmsg" c 1 11
  mknod -m 0666 "$root/opt/kmsg" c 1 11
  mknod -m 0666 "$root/opt/disk" b 7 0
  cp "$busybox" "$root/opt/suid"
  chmod 4755 "$root/opt/suid"
  cp "$busybox" "$root/opt/sgid"
  chmod 2755 "$root/opt/sgid"
fi
chmod 1777 "$root/tmp"
mkdir -p "$dir/blobs/sha256"
blob() {  # FILE -> moved into blobs, prints its digest
  local d
  d=$(sha256sum "$1" | cut -d' ' -f1)
  mv "$1" "$dir/blobs/sha256/$d"
  echo "$d"
}
# One layer, reproducible: sorted names, fixed times and owners.
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -cf "$root.tar" .
diff_id=$(sha256sum "$root.tar" | cut -d' ' -f1)
gzip -n -9 "$root.tar"
layer_size=$(stat -c %s "$root.tar.gz")
layer=$(blob "$root.tar.gz")
printf '{"architecture":"%s","os":"linux","config":{"Cmd":["/bin/sh"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
  "$arch" "$diff_id" >"$root.config"
config_size=$(stat -c %s "$root.config")
config=$(blob "$root.config")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
  "$config" "$config_size" "$layer" "$layer_size" >"$root.manifest"
manifest_size=$(stat -c %s "$root.manifest")
manifest=$(blob "$root.manifest")
printf '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest" "$manifest_size" "$tag" >"$dir/index.json"
echo "sha256:$manifest"
