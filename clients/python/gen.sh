#!/usr/bin/env bash
# Generates the Python gRPC stubs of Jointcloud's API (proto/jointcloud/v1/*.proto) into
# OUT_DIR, as the package jointcloud.v1 (jobs_pb2.py, jobs_pb2_grpc.py, ...), with Debian's
# protoc and gRPC's Python plugin (protobuf-compiler, protobuf-compiler-grpc), for Debian's
# python3-grpcio and python3-protobuf (the same protobuf release as protoc, so the generated
# code and the runtime match). The stubs are generated, not committed: make them again
# after the .proto files change.
#   clients/python/gen.sh OUT_DIR
# Then: PYTHONPATH=OUT_DIR /usr/bin/python3 clients/python/submit_job.py ... (README.md here).
set -euo pipefail
out=${1:?usage: clients/python/gen.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v protoc >/dev/null ||
  { echo "gen.sh: protoc is not installed (apt-get install protobuf-compiler; scripts/setup.sh installs it)" >&2; exit 1; }
plugin=$(command -v grpc_python_plugin || true)
[[ -n "$plugin" ]] ||
  { echo "gen.sh: grpc_python_plugin is not installed (apt-get install protobuf-compiler-grpc; scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$out"
protoc -I "$root/proto" --python_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-grpc_python="$plugin" "$root"/proto/jointcloud/v1/*.proto
# Regular packages (not namespace packages), so that "import jointcloud.v1" finds these.
touch "$out/jointcloud/__init__.py" "$out/jointcloud/v1/__init__.py"
echo "gen.sh: $(protoc --version) wrote $(ls "$out"/jointcloud/v1/*_pb2*.py | wc -l) modules of jointcloud.v1 to $out"
