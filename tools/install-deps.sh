#!/bin/sh
# Install the Debian packages teenycl needs, or say exactly what to install.
# Usage: install-deps.sh [test|run|asan|oclgrind|onnx]...
# The base list builds the library: ONNX import links libprotobuf-c and
# generates C from libonnx-dev's onnx.proto with protoc-c; `onnx` adds
# ONNX's backend test data for make check-onnx.
set -e
pkgs="opencl-c-headers ocl-icd-opencl-dev pocl-opencl-icd pkg-config zlib1g-dev libcjson-dev"
pkgs="$pkgs libprotobuf-c-dev protobuf-c-compiler libonnx-dev"
for what in "$@"; do
    case $what in
        test) pkgs="$pkgs check libsubunit-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin" ;;
        run) pkgs="$pkgs dataset-fashion-mnist" ;;
        oclgrind) pkgs="$pkgs check libsubunit-dev oclgrind" ;;
        asan) pkgs="$pkgs check libsubunit-dev" ;;
        onnx) pkgs="$pkgs libonnx-testdata" ;;
    esac
done
missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "teenycl: not a Debian system; install the equivalents of:$missing" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "teenycl: missing packages; run:" >&2
    echo "  sudo apt-get install -y --no-install-recommends$missing" >&2
    exit 1
fi
echo "teenycl: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends $missing >/dev/null
