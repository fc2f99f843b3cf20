#!/bin/sh
# Install the Debian packages teenycl needs, or say exactly what to install.
# Usage: install-deps.sh [test|run|asan|oclgrind|onnx]...
# The base list builds the library: ONNX import links libprotobuf-c and
# generates C from libonnx-dev's onnx.proto with protoc-c; `onnx` adds
# ONNX's backend test data for make check-onnx: Debian's libonnx-testdata
# (1.12, opset <= 17) and, from PyPI, the Attention node cases (opset 23/24)
# that only the onnx==1.22.0 wheel ships (see fetch_attention_cases).
set -e
pkgs="opencl-c-headers ocl-icd-opencl-dev pocl-opencl-icd pkg-config zlib1g-dev libcjson-dev"
pkgs="$pkgs libprotobuf-c-dev protobuf-c-compiler libonnx-dev"
for what in "$@"; do
    case $what in
        test) pkgs="$pkgs check libsubunit-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin python3-numpy" ;;
        run) pkgs="$pkgs dataset-fashion-mnist" ;;
        oclgrind) pkgs="$pkgs check libsubunit-dev oclgrind" ;;
        asan) pkgs="$pkgs check libsubunit-dev" ;;
        onnx) pkgs="$pkgs libonnx-testdata python3-pip" ;;
    esac
done
missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

# The onnx==1.22.0 wheel's onnx/backend/test/data/node/test_attention*
# cases (128 of them, 2 MB) into $ONNX_ATTENTION_DATA (default
# build/onnx-1.22-testdata, relative to the repository root) as
# node/<case>/..., the layout onnx-node-tests reads. Idempotent: a
# complete copy (its .complete stamp) is kept; the wheel (19 MB) is
# downloaded into a temporary directory and removed. Any failure is loud
# and fails the script: make check-onnx must not count fewer cases.
fetch_attention_cases() {
    dest=${ONNX_ATTENTION_DATA:-build/onnx-1.22-testdata}
    [ -f "$dest/.complete" ] && return 0
    tmp=$(mktemp -d)
    echo "teenycl: fetching the onnx==1.22.0 wheel's Attention node tests into $dest"
    if ! python3 -m pip download -q onnx==1.22.0 --no-deps --only-binary=:all: -d "$tmp" >"$tmp/log" 2>&1; then
        cat "$tmp/log" >&2
        rm -rf "$tmp"
        echo "teenycl: ERROR: could not download onnx==1.22.0 from PyPI; make check-onnx needs its Attention" \
             "cases (set ONNX_ATTENTION_DATA to a directory holding node/test_attention_*)" >&2
        return 1
    fi
    rm -rf "$dest.tmp"
    if ! python3 - "$tmp" "$dest.tmp" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "onnx-1.22.0-*.whl"))[0]
prefix, n = "onnx/backend/test/data/node/", 0
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        rel = name[len(prefix):] if name.startswith(prefix) else ""
        if not rel.startswith("test_attention") or name.endswith("/") or ".." in rel.split("/"):
            continue
        out = os.path.join(sys.argv[2], "node", rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            f.write(z.read(name))
        n += name.endswith("/model.onnx")
if n == 0:
    sys.exit("no test_attention cases in " + wheel)
print("teenycl: %d Attention cases" % n)
PY
    then
        rm -rf "$tmp" "$dest.tmp"
        echo "teenycl: ERROR: could not unpack the Attention cases from the onnx==1.22.0 wheel" >&2
        return 1
    fi
    rm -rf "$tmp" "$dest"
    mkdir -p "$(dirname "$dest")"
    mv "$dest.tmp" "$dest"
    touch "$dest/.complete"
}

onnx=0
for what in "$@"; do [ "$what" = onnx ] && onnx=1; done
if [ -z "$missing" ]; then
    if [ $onnx = 1 ]; then fetch_attention_cases || exit 1; fi
    exit 0
fi
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
if [ $onnx = 1 ]; then fetch_attention_cases || exit 1; fi
exit 0
