#!/usr/bin/env bash
# Makes a development certificate authority and certificates signed by it, with openssl,
# for TLS and mutual TLS between Jointcloud's processes (docs/security.md):
#   scripts/dev-ca.sh DIR NAME...
# DIR/ca.crt and DIR/ca.key (made once, kept on later calls), and for each NAME
# DIR/NAME.crt and DIR/NAME.key: valid for 30 days, for the host names NAME and localhost
# and the address 127.0.0.1, usable as server and as client certificates. Keys are mode
# 0600. For production, use your organisation's CA; this one is for tests and trials.
set -euo pipefail
dir=${1:?usage: dev-ca.sh DIR NAME...}
shift
[[ $# -gt 0 ]] || { echo "usage: dev-ca.sh DIR NAME..." >&2; exit 2; }
command -v openssl >/dev/null || { echo "dev-ca: openssl is not installed" >&2; exit 1; }
mkdir -p "$dir"
umask 077
if [[ ! -f "$dir/ca.key" || ! -f "$dir/ca.crt" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" -subj "/CN=Jointcloud development CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi
for name in "$@"; do
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
  printf 'subjectAltName=DNS:%s,DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' \
    "$name" >"$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 30 -out "$dir/$name.crt" -extfile "$dir/$name.ext" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
done
chmod 644 "$dir"/*.crt
echo "dev-ca: $dir/ca.crt signs $*"
