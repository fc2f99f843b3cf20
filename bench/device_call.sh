#!/usr/bin/env bash
# device_call.sh -- the pieces of a session's call to the NVIDIA machine
# (the `device` tool), so that a call is one line and its figures land in
# $OUT under names bench/RESULTS.md can cite.
#
# On the development machine, first:
#   bash bench/device_call.sh prepare      # binaries and the shared libraries
#                                          # the device image lacks, into .dev/
# (.dev/ must be git-ignored locally: echo /.dev/ >> .git/info/exclude) and
# call the device with carry [".dev"]. There, in one command:
#   bash bench/device_call.sh suite                 # the full suite, 4 groups in parallel
#   bash bench/device_call.sh compare [ARGS...]     # compare_torch.py ARGS, saved to $OUT
#   bash bench/device_call.sh profile FILTER        # TEENY_PROFILE=2 of the matching cases
#   bash bench/device_call.sh pocl SUITES...        # PoCL 5.0 on the machine's CPU
#   bash bench/device_call.sh ab OLD_DIR FILTER     # this binary against OLD_DIR's, twice each
#   bash bench/device_call.sh sass                  # ptxas_report.py --sass over the call's kernel cache
# Steps may be chained: `bash bench/device_call.sh suite compare --loop`
# runs the suite, then the comparison with the remaining arguments.
# Every step writes $OUT/<step>*.txt and prints a summary line; the kernel
# cache stays in /tmp/nvc for the call's later steps.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1

prepare() {
    mkdir -p .dev/build_new .dev/lib
    cp build/teeny-tests build/teeny-bench build/train_fashion_mnist .dev/build_new/ || return 1
    for l in libsubunit.so.0 libprotobuf-c.so.1 libcjson.so.1; do
        cp -L "/lib/x86_64-linux-gnu/$l" .dev/lib/ || return 1
    done
    grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
    echo "prepared .dev/ ($(du -sh .dev | cut -f1)); call the device with carry [\".dev\"]"
}

setup() {
    : "${OUT:?device_call.sh runs on the device machine, where \$OUT is set}"
    mkdir -p /etc/OpenCL/vendors && echo /usr/lib/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
    export LD_LIBRARY_PATH=$here/.dev/lib TEENY_CACHE_DIR=/tmp/nvc CK_FORK=no CK_DEFAULT_TIMEOUT=1200
    export TEENY_BUILD_DIR=build PYTHONUNBUFFERED=1
    mkdir -p build /tmp/nvc && cp .dev/build_new/* build/
}

# The NVIDIA suite in four groups of about equal length (~430 s cold,
# 2026-12-02); the last takes every suite of tests/suites.def the others
# do not name.
suite() {
    local a="conv2d conv2d_wino conv_transpose"
    local b="device tune tensor program elementwise batchnorm bn_act optim attention attention_mask psa pool"
    local c="linear linear_tf32 loss loss_ex concat strided layout norm matmul resize limits shapes ops faults io fuzz"
    local d="" s
    for s in $(sed -n 's/^XX(\([a-z0-9_]*\))$/\1/p' tests/suites.def); do
        case " $a $b $c " in *" $s "*) ;; *) d="$d $s" ;; esac
    done
    group() {
        TEENY_TEST_SUITES="$2" timeout 500 build/teeny-tests > "$OUT/suite_$1.txt" 2>&1
        echo "suite $1 rc=$? $(tail -1 "$OUT/suite_$1.txt")"
    }
    group a "$a" &
    group b "$b" &
    group c "$c" &
    group d "$d" &
    wait
    grep -h "^[^ ]*:[0-9]*:[EF]:" "$OUT"/suite_*.txt | head -20
}

case "${1:-}" in
prepare)
    prepare
    exit $?
    ;;
"")
    sed -n '2,20p' "$0"
    exit 2
    ;;
esac
setup
while [ $# -gt 0 ]; do
    step=$1
    shift
    case "$step" in
    suite) suite ;;
    compare)
        timeout 400 python3 bench/compare_torch.py --save-json "$OUT/compare.jsonl" "$@" > "$OUT/compare.txt" 2>&1
        echo "compare rc=$?"
        grep -A40 "^| family | pass" "$OUT/compare.txt" | head -30
        set --
        ;;
    profile)
        TEENY_PROFILE=2 timeout 120 build/teeny-bench --filter "$1" --reps 2 --warmup 1 >> "$OUT/profile.txt" 2>&1
        echo "profile $1 rc=$?"
        shift
        ;;
    pocl)
        TEENY_DEVICE=pocl TEENY_CACHE_DIR=/tmp/pc TEENY_TEST_SUITES="$*" timeout 440 build/teeny-tests \
            > "$OUT/pocl.txt" 2>&1
        echo "pocl rc=$? $(tail -1 "$OUT/pocl.txt")"
        set --
        ;;
    ab)
        for r in 1 2; do
            for v in build "$1"; do
                echo "## $v run $r $(date -u +%T)"
                timeout 120 "$v/teeny-bench" --filter "$2" --reps 20 --warmup 3 --csv 2>&1 | grep -v '^family' |
                    cut -d, -f2-4 | tr '\n' ' '
                echo
            done
        done > "$OUT/ab.txt" 2>&1
        cat "$OUT/ab.txt"
        shift 2
        ;;
    sass)
        timeout 200 python3 bench/ptxas_report.py --sass /tmp/nvc /usr/local/cuda-13.0/bin/ptxas > "$OUT/sass.txt" 2>&1
        echo "sass rc=$?"
        ;;
    *)
        echo "device_call.sh: unknown step '$step'" >&2
        exit 2
        ;;
    esac
done
