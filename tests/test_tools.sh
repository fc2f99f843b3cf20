#!/bin/sh
# test_tools.sh -- tests of the command-line tools and the embedding example,
# run by `make test` after the check suite (they run programs, not library
# calls, so they live outside build/teeny-tests).
#
#   teeny-info              still lists devices and passes its self-test
#   teeny-info --check      a family whose .cl does not compile (TEENY_KERNEL_DIR
#                           with one broken copy), a compiler crash
#                           (TEENY_CHECK_CRASH), a hang (TEENY_CHECK_HANG +
#                           --timeout), no device: each reported on exactly the
#                           expected line, the other families still pass, exit 1
#   embed_app               its result matches the host computation
#   finetune_onnx           100 steps of tests/onnx/convnet.onnx on Fashion-MNIST
#                           lower the loss and raise the test accuracy it
#                           prints before and after; 20 synthetic steps lower
#                           the loss; bad options exit 2, a missing --data 1
#   numbers and names       every numeric option of teeny-info and teeny-bench
#                           refuses malformed values (empty, abc, 12abc, -1,
#                           4294967296, 1e3, " 5", ...) and --only an unknown
#                           family: exit 2 and a message naming the option,
#                           before anything runs; the library's environment
#                           checks reach the tools (exit 1, the variable named)
#
# Usage: sh tests/test_tools.sh BUILD_DIR   (on the default device, TEENY_DEVICE)
set -u
build=${1:-build}
info=$build/teeny-info
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passes=0
dash=$(printf '\342\200\224') # an em dash, as teeny-info prints it

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

ok() {
    passes=$((passes + 1))
}

# run NAME EXPECTED_RC CMD...: output in $tmp/NAME.out
run() {
    name=$1 want=$2
    shift 2
    "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$name: exit status $rc, expected $want; output:"
        sed 's/^/    /' "$tmp/$name.out" "$tmp/$name.err"
    else
        ok
    fi
}

# has_line NAME LINE: the exact line is in NAME's output
has_line() {
    if grep -Fxq -- "$2" "$tmp/$1.out"; then ok; else
        fail "$1: no line \"$2\"; output:"
        sed 's/^/    /' "$tmp/$1.out"
    fi
}

# has_err NAME TEXT: the text is in NAME's standard error
has_err() {
    if grep -Fq -- "$2" "$tmp/$1.err"; then ok; else
        fail "$1: stderr lacks \"$2\"; it says:"
        sed 's/^/    /' "$tmp/$1.err"
    fi
}

# has_match NAME REGEX: a line matches
has_match() {
    if grep -Eq -- "$2" "$tmp/$1.out"; then ok; else
        fail "$1: no line matching /$2/; output:"
        sed 's/^/    /' "$tmp/$1.out"
    fi
}

# passed NAME FAMILY... / failed NAME FAMILY: the family's table row
passed() {
    name=$1
    shift
    for f in "$@"; do
        has_match "$name" "^$f +[0-9]+ +[0-9]+ +[0-9.]+e[-+][0-9]+  pass "
    done
}
failed() {
    has_match "$1" "^$2 +[-0-9]+ +[-0-9]+ +[-0-9.e+]+  FAIL "
}

all="common elementwise batchnorm conv2d attention psa pool linear loss concat optim"

# -- teeny-info without --check: unchanged (make run and check-install use it)
run info 0 "$info"
has_match info '^teenycl [0-9]+\.[0-9]+\.[0-9]+$'
has_match info '^\* [0-9]+:[0-9]+  '
has_match info '^self-test on .*: built and ran ew_add on 1000 elements: ok$'
run info-usage 2 "$info" --no-such-option

# -- (a) one family's source does not compile: that family fails with the
#    build log, the ten others build and pass
mkdir "$tmp/cl"
cp cl/*.cl "$tmp/cl/"
printf '\n__kernel void broken(__global float *y)\n{\n    y[0] = undeclared_thing;\n}\n' >> "$tmp/cl/pool.cl"
run build-failure 1 env TEENY_KERNEL_DIR="$tmp/cl" "$info" --check
has_line build-failure "pool: pool.cl does not build on this device (TEENY_ERR_BUILD); build log:"
has_match build-failure '^    .*undeclared_thing'
failed build-failure pool
passed build-failure $(echo "$all" | sed 's/ pool / /')
has_line build-failure "1 of the families above failed on this device."

# -- (b) the compiler crashes (SIGABRT) while building attention.cl
run crash 1 env TEENY_CHECK_CRASH=attention "$info" --check --only common,attention,concat
has_line crash "attention: the OpenCL compiler crashed (SIGABRT) while building attention.cl $dash this driver cannot run teenycl's attention; report it"
failed crash attention
passed crash common concat
has_line crash "1 of the families above failed on this device."

# -- (c) the compiler hangs while building common.cl: killed at the time
#    limit, and the next family still runs
run hang 1 env TEENY_CHECK_HANG=common "$info" --check --only common,psa --timeout 8
has_line hang "common: the OpenCL compiler hung (no result after 8 s) while building common.cl $dash killed; this driver cannot run teenycl's common; report it"
failed hang common
passed hang psa

# -- no such device: one clear failure, not eleven
run no-device 1 "$info" --check no-such-device-anywhere
has_line no-device "common: cannot create a context (TEENY_ERR_NO_DEVICE):"
has_line no-device "(the other families were not run: there is no context to run them in)"

# -- numbers and names on the command line: refused with the usage status
#    (2) and a message naming the option and the text, before any device
#    work (an unknown --only family used to check nothing and pass)
bench=$build/teeny-bench
run only-unknown 2 "$info" --check --only nosuchfamily
has_err only-unknown '--only: "nosuchfamily" is not a kernel family; the families are common, elementwise,'
run only-one-unknown 2 "$info" --check --only pool,nosuch
has_err only-one-unknown '"nosuch" is not a kernel family'
run only-empty 2 "$info" --check --only ''
run hook-unknown 2 env TEENY_CHECK_CRASH=nosuchfamily "$info" --check --only pool
has_err hook-unknown 'TEENY_CHECK_CRASH: "nosuchfamily" is not a kernel family'
k=0
for opt in "$info --check --timeout" "$bench --reps" "$bench --warmup"; do
    for v in '' abc 12abc -1 4294967296 1e3 ' 5' '+5' 0x10 '5 ' 99999999999999999999; do
        k=$((k + 1))
        # shellcheck disable=SC2086 # $opt is the program and the option
        run "number-$k" 2 $opt "$v"
        has_err "number-$k" "${opt##* } \"$v\" is "
    done
done
for v in 0 86401; do
    run "timeout-$v" 2 "$info" --check --timeout "$v"
    has_err "timeout-$v" "--timeout \"$v\" is out of range; it takes a decimal integer in 1..86400"
done
run reps-zero 2 "$bench" --reps 0
has_err reps-zero '--reps "0" is out of range'
run info-timeout-last 2 "$info" --check --timeout
# the library's checks, through the tools: exit 1, the variable named
run env-device 1 env TEENY_DEVICE=4294967296:0 "$info"
has_err env-device 'TEENY_DEVICE "4294967296:0": the platform index is out of range'
run env-no-cache 1 env TEENY_NO_CACHE=yes "$bench" --list
has_err env-no-cache 'TEENY_NO_CACHE="yes" is not one of 0/1'

# -- the embedding example
run embed "0" "$build/embed_app"
has_match embed '^max error .* \(relative .*, limit 1e-4\): ok$'

# -- fine-tuning an imported ONNX model (examples/finetune_onnx.c): 100
#    AdamW steps of batch 8 on Fashion-MNIST (classes 0..4: the committed
#    convnet has 5 outputs; images resized to its 8x8 input), the first conv
#    frozen, the checkpoint written; exit 0, a final loss below the first,
#    and a test accuracy (first 1000 test images of those classes) above
#    the one before (0.20 -> about 0.6 on PoCL 3.1). Then 20 steps of the
#    synthetic task (--synthetic: no accuracy lines), and options refused
#    before anything runs: a bad number, --steps with --epochs, --data with
#    --synthetic (exit 2), a --data directory that does not exist (exit 1).
if [ -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ]; then
    run finetune 0 "$build/finetune_onnx" tests/onnx/convnet.onnx --steps 100 --freeze-prefix conv1. \
        --test-limit 1000 --out "$tmp/finetune.safetensors"
    has_match finetune '^model tests/onnx/convnet.onnx: 8 parameters, 2 frozen \(prefix "conv1\."\), 5 classes, batch 8, '
    has_match finetune '^data: Fashion-MNIST \(/usr/share/datasets/fashion-mnist\): classes 0\.\.4 \(the model.s outputs\), 30000 training and 1000 test images; 28x28 resized to 8x8 by area averaging, repeated over 3 channel\(s\)$'
    has_match finetune '^test_accuracy_before 0\.[0-9]{4} \(1000 images\)$'
    has_match finetune '^step 100/100 loss [0-9.]+$'
    has_match finetune '^test_accuracy_after 0\.[0-9]{4} \(1000 images\)$'
    has_match finetune '^saved '
    lower=$(awk '/^first_loss / { print ($4 < $2) ? "yes" : "no: " $0 }' "$tmp/finetune.out")
    if [ "$lower" = yes ]; then ok; else fail "finetune: final loss not below the first (${lower:-no first_loss line})"; fi
    better=$(awk '/^test_accuracy_before / { b = $2 } /^test_accuracy_after / { a = $2 }
                  END { print (a != "" && b != "" && a > b + 0.1) ? "yes" : "no: before " b " after " a }' "$tmp/finetune.out")
    if [ "$better" = yes ]; then ok; else fail "finetune: test accuracy did not rise by 0.1 ($better)"; fi
    if [ -s "$tmp/finetune.safetensors" ]; then ok; else fail "finetune: no checkpoint written"; fi
else
    echo "SKIP: finetune_onnx on Fashion-MNIST: /usr/share/datasets/fashion-mnist missing (install dataset-fashion-mnist)"
fi
run finetune-synthetic 0 "$build/finetune_onnx" tests/onnx/convnet.onnx --steps 20 --synthetic
has_match finetune-synthetic '^data: synthetic \(--synthetic\): per-class channel offsets plus noise$'
has_match finetune-synthetic '^step 20/20 loss [0-9.]+$'
lower=$(awk '/^first_loss / { print ($4 < $2) ? "yes" : "no: " $0 }' "$tmp/finetune-synthetic.out")
if [ "$lower" = yes ]; then ok; else fail "finetune-synthetic: final loss not below the first (${lower:-no first_loss line})"; fi
if grep -q '^test_accuracy' "$tmp/finetune-synthetic.out"; then fail "finetune-synthetic: an accuracy line"; else ok; fi
run finetune-bad-steps 2 "$build/finetune_onnx" tests/onnx/convnet.onnx --steps 12abc
has_err finetune-bad-steps '--steps "12abc": not a whole number'
run finetune-bad-lr 2 "$build/finetune_onnx" tests/onnx/convnet.onnx --lr 1e9
has_err finetune-bad-lr '--lr "1e9": not a number in (0, 1]'
run finetune-steps-epochs 2 "$build/finetune_onnx" tests/onnx/convnet.onnx --steps 5 --epochs 1
has_err finetune-steps-epochs '--steps and --epochs: give one'
run finetune-data-synthetic 2 "$build/finetune_onnx" tests/onnx/convnet.onnx --synthetic --data "$tmp"
has_err finetune-data-synthetic '--data and --synthetic: give one'
run finetune-no-data 1 "$build/finetune_onnx" tests/onnx/convnet.onnx --data "$tmp/none"
has_err finetune-no-data "$tmp/none/train-images-idx3-ubyte.gz"

# ==== teeny-bench: ceilings and roofline shares (issue 21 item 16) ====
# The FMA ceiling is the best of its probe kernels (fma and mad, 8, 12 and
# 16 chains, the device's vector widths: at least 3 measured), and no
# case's share of a ceiling is printed as a figure above 100 %: such a
# share is null, with the raw value under "over_ceiling".
run bench 0 "$build/teeny-bench" --json --filter conv_fashion_3x3_1to32_28_b128 --reps 5 --warmup 1
has_match bench '^\{"type": "header", .*"fma_gflops": [0-9.e+]+, .*"fma_op": "(fma|mad)", "fma_variants": ([3-9]|[1-9][0-9]), "tf32": (true|false), "loop": false\}$'
has_match bench '^\{"type": "case", .*"family": "conv2d"'
bad=$(grep '"type": "case"' "$tmp/bench.out" | awk '
    { for (k = 1; k <= 2; k++) {
          key = k == 1 ? "pct_copy_bw" : "pct_fma"
          if (!match($0, "\"" key "\": [^,}]+")) { print "no " key ": " $0; continue }
          v = substr($0, RSTART + length(key) + 4, RLENGTH - length(key) - 4)
          if (v == "null" && $0 !~ /"over_ceiling": \{/) print key " null without over_ceiling: " $0
          else if (v != "null" && v + 0 > 100) print key " " v " above 100: " $0
      } }')
if [ -z "$bad" ]; then ok; else fail "bench: $bad"; fi
if grep -q loop_ms "$tmp/bench.out"; then fail "bench: loop_ms without --loop"; else ok; fi
# --loop: every case also timed back to back by the host's clock
run bench-loop 0 "$build/teeny-bench" --json --loop --filter conv_fashion_3x3_1to32_28_b128 --reps 2 --warmup 0
has_match bench-loop '^\{"type": "header", .*"loop": true\}$'
cases=$(grep -c '"type": "case"' "$tmp/bench-loop.out")
timed=$(grep -cE '^\{"type": "case", .*"median_ms": [0-9.e+-]+, .*"loop_ms": [0-9][0-9.e+-]*\}$' "$tmp/bench-loop.out")
if [ "$cases" -eq 2 ] && [ "$timed" -eq 2 ]; then ok; else fail "bench-loop: $timed of $cases cases (2) with loop_ms"; fi
# The training step's two cases (one step from an idle device; steps back
# to back), each selectable by its own name, listed without running
run bench-train-list 0 "$build/teeny-bench" --list --filter train
has_match bench-train-list '^train +train_fashion_b128 +step$'
has_match bench-train-list '^train +train_fashion_b128_loop +loop$'
run bench-loop-list 0 "$build/teeny-bench" --list --filter train_fashion_b128_loop
if grep -q ' step$' "$tmp/bench-loop-list.out"; then fail "bench-loop-list: the step case listed"; else ok; fi
# ==== end of the teeny-bench block ====

echo "test_tools.sh: $passes checks passed, $failures failed"
[ "$failures" -eq 0 ]
