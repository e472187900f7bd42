#!/usr/bin/env bash
# Installs the browser driver (tests/browser: puppeteer-core at the version package-lock.json
# pins, and drive.mjs) into TOOLS_DIR in the build tree, once per lock file; the console's
# end-to-end tests call it before they drive chromium (tests/testing/browser.h).
#   install.sh SOURCE_DIR TOOLS_DIR
set -euo pipefail
src=$1/tests/browser
tools=$2
mkdir -p "$tools"
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "FAIL: node and npm are not installed (scripts/setup.sh --test installs them)" >&2; exit 1; }
command -v chromium >/dev/null || { echo "FAIL: chromium is not installed (scripts/setup.sh --test installs it)" >&2; exit 1; }
# One install at a time: both stores' suites share a build tree.
exec 9>"$tools/install.lock"
flock 9
if ! cmp -s "$src/package-lock.json" "$tools/package-lock.json" || [[ ! -d "$tools/node_modules/puppeteer-core" ]]; then
  cp "$src/package.json" "$src/package-lock.json" "$tools/"
  (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error) || { echo "FAIL: npm ci of the browser driver failed" >&2; exit 1; }
fi
cp "$src/drive.mjs" "$tools/drive.mjs"
