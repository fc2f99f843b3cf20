#!/usr/bin/env bash
# check-matrix.sh -- the portability matrix (make check-matrix): the
# conformance suite (TEENY_TEST_SUITES=conformance), once with the device's
# own tuning and once with TEENY_TUNING=generic (the conservative defaults
# an unknown vendor gets), plus short runs of the examples, on every OpenCL
# implementation Debian can install here:
#   pocl     PoCL of the host (3.1 on Debian 12)
#   rusticl  Mesa rusticl on llvmpipe (mesa-opencl-icd, RUSTICL_ENABLE=llvmpipe)
#   trixie   PoCL 6.0 inside a Debian 13 minimal chroot (debootstrap), cached
#            in $MATRIX_CACHE (default /var/cache/teenycl-matrix) between
#            runs and rebuilt when broken; the tree is bind-mounted and built
#            there in its own folder (build-trixie)
#   dist     the MPI layer (WITH_MPI=1) with one PoCL and one rusticl rank:
#            the averaged gradient over unlike devices (tests/test_dist.c grads)
# Each prints implementation, version, device, checks, result and time;
# a summary table follows. Exit status: non-zero when any leg failed.
#
# Usage: tools/check-matrix.sh [pocl] [rusticl] [trixie] [dist]   (default: all)
# Environment: BUILD (host build folder, default build), MATRIX_CACHE,
# DEBIAN_MIRROR (default http://deb.debian.org/debian), MATRIX_LOG (folder
# for each leg's full output, default $BUILD/matrix).
# Needs root for the packages and the chroot (as CI runs it).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
MATRIX_CACHE=${MATRIX_CACHE:-/var/cache/teenycl-matrix}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
LOGDIR=${MATRIX_LOG:-$ROOT/$BUILD/matrix}
CHROOT=$MATRIX_CACHE/trixie
legs=("$@")
[ ${#legs[@]} -eq 0 ] && legs=(pocl rusticl trixie dist)
mkdir -p "$LOGDIR"
summary=()
failed=0

# The test runner's environment (Makefile TEST_ENV) and the examples' short
# runs on a subset of Fashion-MNIST (512 training, 256 test images, made by
# make_subset: the evaluation program has no limit option).
test_env=(CK_DEFAULT_TIMEOUT=1200 CK_FORK=no TEENY_TEST_SUITES=conformance)
FMNIST=/usr/share/datasets/fashion-mnist
example_args="--epochs 1 --batch 64 --seed 1"

say() { printf '%s\n' "$*"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }

need_pkgs() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ]; then
        say "check-matrix: missing packages: ${missing[*]} (run as root or install them)" >&2
        return 1
    fi
    say "check-matrix: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
}

# The first $3 records of an IDX file (gzip) $1 into $2, whose header of $4
# bytes gets the new count; records are $5 bytes.
idx_head() ( # a subshell: head closes its pipe early, which pipefail would count as failure
    set +o pipefail
    local src=$1 dst=$2 count=$3 hdr=$4 rec=$5 be
    be=$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((count >> 24 & 255)) $((count >> 16 & 255)) \
        $((count >> 8 & 255)) $((count & 255)))
    { gzip -dc "$src" | head -c 4; printf "$be"; gzip -dc "$src" | head -c "$hdr" | tail -c $((hdr - 8));
      gzip -dc "$src" | tail -c +$((hdr + 1)) | head -c $((count * rec)); } | gzip -1 > "$dst.tmp" && mv "$dst.tmp" "$dst"
)

# $1/fashion-mnist: 512 training and 256 test images (the example programs' --data).
make_subset() {
    local d=$1/fashion-mnist
    [ -s "$d/t10k-labels-idx1-ubyte.gz" ] && return 0
    [ -r "$FMNIST/t10k-labels-idx1-ubyte.gz" ] || return 1
    mkdir -p "$d" &&
        idx_head "$FMNIST/train-images-idx3-ubyte.gz" "$d/train-images-idx3-ubyte.gz" 512 16 784 &&
        idx_head "$FMNIST/train-labels-idx1-ubyte.gz" "$d/train-labels-idx1-ubyte.gz" 512 8 1 &&
        idx_head "$FMNIST/t10k-images-idx3-ubyte.gz" "$d/t10k-images-idx3-ubyte.gz" 256 16 784 &&
        idx_head "$FMNIST/t10k-labels-idx1-ubyte.gz" "$d/t10k-labels-idx1-ubyte.gz" 256 8 1
}

# "Checks: 11, Failures: 0, Errors: 0" -> "11 checks, 0 failed"
checks_of() {
    sed -n 's/.*Checks: \([0-9]*\), Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 checks, \2 failed, \3 errors/p' "$1" | tail -1
}

# One leg's tests and examples. $1 leg name, $2 a command prefix that runs
# its argument in the leg's environment (a shell string), $3 build folder,
# $4 device spec ("" for the default), $5 implementation name.
run_leg() {
    local leg=$1 runner=$2 build=$3 dev=$4 impl=$5
    local log=$LOGDIR/$leg.log t0 ok=1 version device checks checks_g
    : > "$log"
    t0=$(now)
    say "== $leg: $impl"
    local devenv="" data=$BUILD/matrix-data/fashion-mnist
    [ -n "$dev" ] && devenv="TEENY_DEVICE=$dev"
    $runner "$devenv $build/teeny-info" >> "$log" 2>&1 || ok=0
    device=$(sed -n 's/^self-test on \(.*\): built.*/\1/p' "$log" | head -1)
    # teeny-info's lines under the device: "platform NAME; ..." and "VERSION; OpenCL C ...; driver D"
    version=$(awk -v dev="$device" 'f == 1 { sub(/^ *platform /, ""); sub(/;.*/, ""); p = $0; f = 2; next }
        f == 2 { n = split($0, a, "; "); printf "%s %s", p, substr(a[n], 8); exit }
        dev != "" && index($0, dev) { f = 1 }' "$log" | sed 's/Portable Computing Language/PoCL/; s/^rusticl/Mesa rusticl/')
    # the conformance suite with the device's tuning, then the generic one
    $runner "${test_env[*]} TEENY_BUILD_DIR=$build $devenv $build/teeny-tests" > "$LOGDIR/$leg-tests.log" 2>&1 || ok=0
    checks=$(checks_of "$LOGDIR/$leg-tests.log")
    $runner "${test_env[*]} TEENY_BUILD_DIR=$build TEENY_TUNING=generic $devenv $build/teeny-tests" \
        > "$LOGDIR/$leg-tests-generic.log" 2>&1 || ok=0
    checks_g=$(checks_of "$LOGDIR/$leg-tests-generic.log")
    cat "$LOGDIR/$leg-tests.log" "$LOGDIR/$leg-tests-generic.log" >> "$log"
    # the examples as a user runs them
    local dflag=""
    [ -n "$dev" ] && dflag="--device $dev"
    $runner "$build/bn_demo $dflag" >> "$log" 2>&1 || { say "   bn_demo failed"; ok=0; }
    if make_subset "$ROOT/$BUILD/matrix-data"; then
        $runner "$build/train_fashion_mnist $example_args $dflag --data $data --out $build/matrix-run" >> "$log" 2>&1 ||
            { say "   train_fashion_mnist failed"; ok=0; }
        $runner "$build/eval_fashion_mnist $dflag --data $data $build/matrix-run/epoch_001.safetensors" >> "$log" 2>&1 ||
            { say "   eval_fashion_mnist failed"; ok=0; }
    else
        say "   examples: Fashion-MNIST not installed (dataset-fashion-mnist)"; ok=0
    fi
    local secs result
    secs=$(elapsed "$t0")
    result=$([ $ok = 1 ] && echo pass || echo FAIL)
    [ $ok = 1 ] || failed=1
    say "   implementation: $impl"
    say "   version:        ${version:-unknown}"
    say "   device:         ${device:-unknown}"
    say "   checks:         conformance ${checks:-did not finish}; TEENY_TUNING=generic ${checks_g:-did not finish}; examples bn_demo, train_fashion_mnist (1 short epoch), eval_fashion_mnist"
    say "   result:         $result in ${secs}s (log: $log)"
    [ $ok = 1 ] || tail -n 30 "$log" | sed 's/^/   | /'
    summary+=("$(printf '%-8s | %-22s | %-34s | %-30s | %-5s | %5ss' "$leg" "${version:-unknown}" "${device:-unknown}" \
        "${checks:-none}" "$result" "$secs")")
}

host() { bash -c "$1"; }

leg_pocl() {
    sh tools/install-deps.sh test || { summary+=("pocl     | packages missing | FAIL"); failed=1; return; }
    make -s -j"$(nproc)" BUILD="$BUILD" all "$BUILD/teeny-tests" >/dev/null || { summary+=("pocl     | build failed | FAIL"); failed=1; return; }
    run_leg pocl host "$BUILD" pocl "PoCL (host)"
}

leg_rusticl() {
    need_pkgs mesa-opencl-icd && sh tools/install-deps.sh test ||
        { summary+=("rusticl  | packages missing | FAIL"); failed=1; return; }
    make -s -j"$(nproc)" BUILD="$BUILD" all "$BUILD/teeny-tests" >/dev/null || { summary+=("rusticl  | build failed | FAIL"); failed=1; return; }
    run_leg rusticl rusticl_run "$BUILD" llvmpipe "Mesa rusticl (llvmpipe)"
}
rusticl_run() { RUSTICL_ENABLE=llvmpipe bash -c "$1"; }

# The MPI layer (make WITH_MPI=1) on unlike devices: one PoCL rank and one
# Mesa rusticl rank run tests/test_dist.c's grads check, so the gradient
# averaged over both devices must equal each rank's own full-batch
# gradient within 1e-6 normalized RMS, with the same bits on both ranks.
leg_dist() {
    local log=$LOGDIR/dist.log t0 as_root="" n result
    t0=$(now)
    say "== dist: MPI, one PoCL rank and one Mesa rusticl rank"
    need_pkgs mesa-opencl-icd && sh tools/install-deps.sh test ||
        { summary+=("dist     | packages missing | FAIL"); failed=1; return; }
    command -v mpirun >/dev/null || { summary+=("dist     | mpirun missing | FAIL"); failed=1; return; }
    make -s -j"$(nproc)" BUILD="$BUILD" WITH_MPI=1 "$BUILD/test_dist" >/dev/null ||
        { summary+=("dist     | build failed | FAIL"); failed=1; return; }
    [ "$(id -u)" = 0 ] && as_root="--allow-run-as-root"
    timeout 600 mpirun --oversubscribe $as_root -np 1 -x TEENY_DEVICE=pocl -x POCL_MAX_PTHREAD_COUNT=1 \
        "$BUILD/test_dist" grads : -np 1 -x TEENY_DEVICE=llvmpipe -x RUSTICL_ENABLE=llvmpipe \
        "$BUILD/test_dist" grads > "$log" 2>&1
    n=$(grep -c "^rank [0-9]*: grads: ok" "$log")
    if [ "$n" -eq 2 ] && grep -q "grads: ok.* on pthread" "$log" && grep -q "grads: ok.* on llvmpipe" "$log" &&
        ! grep -q FAIL "$log"; then result=pass; else result=FAIL; failed=1; fi
    say "   ranks:          $(grep "grads: ok" "$log" | sed 's/.* on //' | paste -sd, -)"
    say "   result:         $result in $(elapsed "$t0")s (log: $log)"
    [ $result = pass ] || tail -n 30 "$log" | sed 's/^/   | /'
    summary+=("$(printf '%-8s | %-22s | %-34s | %-30s | %-5s | %5ss' dist "Open MPI, 2 ranks" "PoCL + rusticl (llvmpipe)" \
        "grads: $n of 2 ranks ok" "$result" "$(elapsed "$t0")")")
}

# ---- the Debian 13 chroot ----

mounted=()
unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[$i]}" 2>/dev/null
    done
    mounted=()
}
trap unmount_all EXIT
trap 'unmount_all; exit 130' INT TERM

mount_bind() { # $1 source, $2 target inside the chroot
    mkdir -p "$2" && mount --bind "$1" "$2" && mounted+=("$2")
}

chroot_ok() {
    [ -x "$CHROOT/usr/bin/apt-get" ] && [ -f "$CHROOT/.teenycl-ready" ] &&
        grep -q "^13\|trixie" "$CHROOT/etc/debian_version" 2>/dev/null && chroot "$CHROOT" /bin/true 2>/dev/null
}

chroot_create() {
    local t0
    t0=$(now)
    need_pkgs debootstrap || return 1
    # whatever a broken earlier attempt left (never while something is mounted there)
    if grep -q " $CHROOT/" /proc/mounts; then
        say "check-matrix: $CHROOT has mounts left by another run; not touching it" >&2
        return 1
    fi
    rm -rf "$CHROOT"
    mkdir -p "$MATRIX_CACHE"
    say "== trixie: creating $CHROOT (debootstrap --variant=minbase trixie)"
    debootstrap --variant=minbase trixie "$CHROOT" "$DEBIAN_MIRROR" > "$LOGDIR/debootstrap.log" 2>&1 ||
        { say "debootstrap failed (log: $LOGDIR/debootstrap.log)"; tail -n 20 "$LOGDIR/debootstrap.log"; return 1; }
    touch "$CHROOT/.teenycl-ready"
    say "   chroot created in $(elapsed "$t0")s"
}

in_chroot() { # run a shell string inside the chroot, in the bind-mounted tree
    chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        TEENY_CACHE_DIR=/src/build-trixie/kernel-cache /bin/bash -c "cd /src && $1"
}

leg_trixie() {
    local t0
    t0=$(now)
    if [ "$(id -u)" != 0 ]; then
        say "check-matrix: the trixie leg needs root (debootstrap, chroot, mounts)" >&2
        summary+=("trixie   | not root | FAIL"); failed=1; return
    fi
    sh tools/install-deps.sh run || { summary+=("trixie   | host packages missing | FAIL"); failed=1; return; }
    if ! chroot_ok; then
        chroot_create || { summary+=("trixie   | chroot creation failed | FAIL"); failed=1; return; }
    fi
    mount_bind /proc "$CHROOT/proc" && mount_bind /sys "$CHROOT/sys" && mount_bind /dev "$CHROOT/dev" &&
        mount_bind "$ROOT" "$CHROOT/src" ||
        { unmount_all; summary+=("trixie   | mounts failed | FAIL"); failed=1; return; }
    cp /etc/resolv.conf "$CHROOT/etc/resolv.conf" 2>/dev/null
    # the project's own dependency step, plus a compiler and make
    if ! in_chroot "export DEBIAN_FRONTEND=noninteractive; \
            dpkg-query -W -f='\${Status}' gcc make 2>/dev/null | grep -c 'install ok installed' | grep -q 2 || \
            { apt-get update -q && apt-get install -y -q --no-install-recommends gcc libc6-dev make; } && \
            sh tools/install-deps.sh test" > "$LOGDIR/trixie-deps.log" 2>&1; then
        say "   packages failed inside the chroot (log: $LOGDIR/trixie-deps.log)"; tail -n 20 "$LOGDIR/trixie-deps.log"
        unmount_all; summary+=("trixie   | packages failed | FAIL"); failed=1; return
    fi
    if ! in_chroot "make -s -j$(nproc) BUILD=build-trixie all build-trixie/teeny-tests" > "$LOGDIR/trixie-build.log" 2>&1; then
        say "   build failed inside the chroot (log: $LOGDIR/trixie-build.log)"; tail -n 30 "$LOGDIR/trixie-build.log"
        unmount_all; summary+=("trixie   | build failed | FAIL"); failed=1; return
    fi
    say "   chroot ready, packages and build in $(elapsed "$t0")s"
    run_leg trixie in_chroot build-trixie pocl "PoCL (Debian 13 chroot)"
    unmount_all
}

for leg in "${legs[@]}"; do
    case $leg in
        pocl) leg_pocl ;;
        rusticl) leg_rusticl ;;
        dist) leg_dist ;;
        trixie) leg_trixie ;;
        *) say "check-matrix: unknown leg $leg (pocl, rusticl, trixie, dist)" >&2; failed=1 ;;
    esac
done

say ""
say "== matrix ($(date -u +%Y-%m-%d)): leg | platform version | device | conformance | result | time"
for row in "${summary[@]}"; do say "$row"; done
[ $failed = 0 ] && say "check-matrix: all legs passed" || say "check-matrix: FAILED"
exit $failed
