#!/usr/bin/env bash
# Packs what tests/gpu/gpu-check.sh needs on the GPU machine (the `device` tool's, which
# has CUDA and nvidia-smi but none of our Debian packages) into OUT (default .gpu, which
# .git/info/exclude should list; carry it): the nexec binaries and munged with their
# libraries (../shared/tools/gpu-bundle.sh), runc and libseccomp, the CUDA probe, and an
# image's root filesystem (busybox, glibc, the probe) for tasks in images.
#   tests/gpu/make-bundle.sh [OUT] [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/.gpu}
build=${2:-$root/build}
rm -rf "$out"
mkdir -p "$out/sys" "$out/image/rootfs"
bash "$root/../shared/tools/gpu-bundle.sh" "$out/bin" "$build/executor/nexec-master" "$build/executor/nexec-agent" \
  "$build/executor/nexec" "$build/executor/nexec-run" "$build/tests/slurm_image_script" /usr/sbin/munged >/dev/null
cp "$build/executor/nexec-image-run" "$build/executor/nexec-userns-exec" "$out/bin/"
cp /usr/sbin/runc "$out/sys/runc"
cp -L /lib/x86_64-linux-gnu/libseccomp.so.2 "$out/sys/"
gcc -O2 -o "$out/cuda_probe" "$root/tests/gpu/cuda_probe.c" -ldl
# The image: busybox as /bin/sh, glibc for the probe and the driver's nvidia-smi, the probe.
img=$out/image/rootfs
mkdir -p "$img/bin" "$img/etc" "$img/tmp" "$img/proc" "$img/sys" "$img/dev" "$img/lib64" "$img/lib/x86_64-linux-gnu"
cp "$(command -v busybox)" "$img/bin/busybox"
for applet in sh cat echo ls id env head grep true; do ln -s busybox "$img/bin/$applet"; done
cp -L /lib64/ld-linux-x86-64.so.2 "$img/lib64/"
for lib in libc.so.6 libdl.so.2 libpthread.so.0 libm.so.6 librt.so.1; do cp -L "/lib/x86_64-linux-gnu/$lib" "$img/lib/x86_64-linux-gnu/"; done
cp "$out/cuda_probe" "$img/bin/cuda_probe"
echo "the GPU check's image" >"$img/etc/jc-image"
chmod 1777 "$img/tmp"
tar -C "$out/image" -czf "$out/image.tar.gz" rootfs
rm -rf "$out/image"
du -sh "$out"
