#!/usr/bin/env bash
# The notebook test's image (SPEC A17, issue 46): Jupyter Notebook from Debian's packages,
# made by deploy/notebook/make-notebook-image.sh as an OCI layout in the build tree, once:
# its blobs are cached under OUT/cache by a key of the package list and the script, so a
# second run (the second store's suite) only links them (well under a second).
#   notebook-image.sh SOURCE_DIR OUT  ->  OUT/layout holding the tag "notebook"
# Not run (and says so) where images cannot be made: mmdebstrap's root mode needs root, as
# the executor's images do; the notebook test says the same.
set -euo pipefail
source_dir=${1:?usage: notebook-image.sh SOURCE_DIR OUT}
out=${2:?usage: notebook-image.sh SOURCE_DIR OUT}
if [[ $(id -u) -ne 0 ]]; then
  echo "not run: making the notebook image needs root (CI runs as root)"
  exit 0
fi
mkdir -p "$out"
rm -rf "$out/layout.new"
started=$(date +%s)
"$source_dir/deploy/notebook/make-notebook-image.sh" "$out/layout.new" notebook "$out/cache"
rm -rf "$out/layout"
mv "$out/layout.new" "$out/layout"
echo "the notebook image is in $out/layout (tag notebook), made in $(( $(date +%s) - started )) s"
