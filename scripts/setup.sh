#!/usr/bin/env bash
# Installs, from Debian's packages, whatever Jointcloud needs to build, run and test that
# is not installed yet. Does nothing (and needs no network) when everything is present.
#   scripts/setup.sh            build and run dependencies
#   scripts/setup.sh --test     plus what the test suite starts (PostgreSQL, docker-compose,
#                               MPICH and PyTorch for the multi-host executor tests, procps
#                               for tests that look for processes)
#                               and clang with libFuzzer (scripts/fuzz.sh), and Debian's
#                               python3-grpcio and python3-protobuf for the Python client
#                               (clients/python)
#   scripts/setup.sh --slurm    plus Slurm and munge (scripts/slurm.sh, the benchmarks)
#   scripts/setup.sh --demo     plus what scripts/run.sh's demo center runs its jobs in an
#                               image with (an image registry, skopeo, umoci, runc, busybox)
#   scripts/setup.sh --prometheus  plus Prometheus (scripts/run.sh --prometheus)
#   scripts/setup.sh --list ... prints the packages of the groups given, installs nothing
set -euo pipefail
# What the demo center's image needs (scripts/demo-center.sh start_registry checks each).
demo_packages=(docker-registry skopeo umoci runc busybox-static)
list=0

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  nlohmann-json3-dev libpqxx-dev libcpp-httplib-dev prometheus-cpp-dev libspdlog-dev
  catch2 libsqlite3-dev libyaml-cpp-dev libgoogle-perftools-dev libssl-dev munge libmunge-dev
  curl ca-certificates libcurl4-openssl-dev gnuplot-nox
)
for arg in "$@"; do
  case "$arg" in
    --test) packages+=(postgresql docker-compose clang lld libclang-rt-14-dev mpich libmpich-dev python3-torch procps chromium fonts-liberation podman netavark aardvark-dns iptables mmdebstrap runc docker-registry skopeo busybox-static umoci prometheus socat python3-grpcio python3-protobuf) ;;
    --slurm) packages+=(slurm-wlm slurmrestd slurm-wlm-jwt-plugin) ;;
    --demo) packages+=("${demo_packages[@]}") ;;
    --prometheus) packages+=(prometheus) ;;
    --list) list=1 ;;
    *) echo "setup: unknown option $arg (use --test, --slurm, --demo, --prometheus or --list)" >&2; exit 2 ;;
  esac
done

# The OpenAPI checks run npm tools (tests/openapi): Node.js from Debian where none is
# installed (a machine with its own Node.js and npm keeps them; the pinned redocly needs
# Node.js 20.19 or later, newer than Debian 12's 18).
for arg in "$@"; do
  if [[ "$arg" == --test ]] && ! command -v npm >/dev/null; then packages+=(nodejs npm); fi
done

if [[ $list -eq 1 ]]; then
  printf '%s\n' "${packages[@]}" | sort -u
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install packages" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
