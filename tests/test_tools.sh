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
#   every program           --help (stdout, exit 0, each option), --version, and
#                           -i, --device without a value, --device=cpu named
#                           with exit 2 (issue 44)
#   teeny-run               --info and teeny-info --onnx list the declared inputs
#                           and outputs (symbolic dimensions by name); seeded
#                           random inputs; nothing written without --output-dir,
#                           which is created; "/l2/probs:0" written as a safe
#                           name, collisions resolved, checked before the run;
#                           duplicate or unknown inputs, two models, a file that
#                           is not a model refused; --warmup/--repeat statistics,
#                           --profile (rows sorted, launches add up), --json;
#                           --input files as the model declares the input:
#                           int64 labels (the int32 labels' bits; past int32
#                           refused naming the value), an int64 operand past
#                           int32 (Slice's ends) kept whole, a bool mask, rank-0
#                           inputs from 0-d files (or [1]); a type or shape
#                           the input cannot take refused naming both
#   finetune_onnx errors    a batch-1 export's hint, a --freeze-prefix matching
#                           nothing, no C expressions
#   train_fashion_mnist     into a file: lines in order, no \r progress bar
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

# ==== the command line of every program, teeny-run, install-free checks (issue 44) ====
# Every binary: --help on stdout with exit 0 describing its options,
# --version from the library, and an unknown option, a missing value and
# --name=value named on stderr with exit 2, before any device work.
for prog in teeny-info teeny-run teeny-bench train_fashion_mnist eval_fashion_mnist finetune_onnx embed_app bn_demo; do
    run "help-$prog" 0 "$build/$prog" --help
    has_match "help-$prog" "^usage: $prog "
    has_match "help-$prog" '^  --device '
    has_match "help-$prog" '^  --version +the program.s name and the teenycl library.s version$'
    if [ -s "$tmp/help-$prog.err" ]; then fail "help-$prog: wrote to stderr"; else ok; fi
    run "version-$prog" 0 "$build/$prog" --version
    has_match "version-$prog" "^$prog \\(teenycl\\) [0-9]+\\.[0-9]+\\.[0-9]+\$"
    run "unknown-$prog" 2 "$build/$prog" -i
    has_err "unknown-$prog" "$prog: unknown option \"-i\" (try $prog --help)"
    run "novalue-$prog" 2 "$build/$prog" --device
    has_err "novalue-$prog" "$prog: --device needs a value: --device "
    run "equals-$prog" 2 "$build/$prog" --device=cpu
    has_err "equals-$prog" "\"--device=cpu\": give the value of --device as the next argument: --device cpu"
done
# teeny-run's help describes every option its usage line names
for opt in --input --output-dir --device --batch --seed --warmup --repeat --profile --json --info; do
    has_match help-teeny-run "^  $opt( |\$)"
done

# -- teeny-run: bad command lines (exit 2, named), before the model is read
run run-dup-input 2 "$build/teeny-run" tests/onnx/convnet.onnx --input x=a.npy --input x=b.npy
has_err run-dup-input '--input x given twice (x=a.npy and x=b.npy)'
run run-two-models 2 "$build/teeny-run" tests/onnx/convnet.onnx tests/onnx/gemm.onnx
has_err run-two-models 'a second model "tests/onnx/gemm.onnx" (the model is "tests/onnx/convnet.onnx"; one per run)'
run run-input-equals 2 "$build/teeny-run" --input=x=f tests/onnx/convnet.onnx
has_err run-input-equals '"--input=x=f": give the value of --input as the next argument: --input x=f'
run run-input-no-file 2 "$build/teeny-run" tests/onnx/convnet.onnx --input x
has_err run-input-no-file '--input "x": give NAME=FILE.npy'
run run-no-model 2 "$build/teeny-run" --repeat 3
has_err run-no-model 'no model given'
run run-repeat-0 2 "$build/teeny-run" tests/onnx/convnet.onnx --repeat 0
has_err run-repeat-0 '--repeat "0" is out of range'
# an input the model does not have: its inputs listed (exit 1: the model was read)
run run-unknown-input 1 "$build/teeny-run" tests/onnx/convnet.onnx --input y=tests/onnx/convnet.in0.npy
has_err run-unknown-input '--input y: tests/onnx/convnet.onnx has no input of that name; its inputs: x'

# -- a file that is not a model says so (it said "wire type 3 (groups) at byte 1")
run run-not-onnx 1 "$build/teeny-run" README.md
has_err run-not-onnx 'README.md: not an ONNX model (protobuf parse failed: '
run info-not-onnx 1 "$info" --onnx README.md
has_err info-not-onnx 'not an ONNX model (protobuf parse failed: '

# -- --list-ops: the importer's registry, one op a line, the count at the end
run info-list-ops 0 "$info" --list-ops
has_match info-list-ops '^Conv +[0-9]+\.\.[0-9]+$'
ops=$(grep -Ec '^[A-Za-z]+ +[0-9]+\.\.[0-9]+$' "$tmp/info-list-ops.out")
has_match info-list-ops "^$ops ops \\(domain"

# -- the inputs and outputs: declared (symbolic dimensions by name), and at the batch
run info-onnx-io 0 "$info" --onnx tests/onnx/io_names.onnx
has_line info-onnx-io 'input   img          float  [batch, 3, 4, 4]'
has_line info-onnx-io 'input   meta         float  [batch, 5]'
has_line info-onnx-io 'output  /l2/probs:0  float  [batch, 3, 4, 4]'
has_line info-onnx-io 'output  _l2_probs_0  float  [batch, 5]'
has_line info-onnx-io '2 of 2 nodes supported'
run run-info 0 "$build/teeny-run" --info tests/onnx/io_names.onnx --batch 3
has_line run-info '  input   img          float  [batch, 3, 4, 4]'
has_line run-info 'run at batch 3:'
has_line run-info '  input   img          float  [3, 3, 4, 4]  random unless --input img=FILE.npy'
has_line run-info '  input   meta         float  [3, 5]  random unless --input meta=FILE.npy'
has_line run-info '  output  /l2/probs:0  float  [3, 3, 4, 4]  file _l2_probs_0.npy'
has_line run-info '  output  _l2_probs_0  float  [3, 5]  file _l2_probs_0_1.npy'
run run-info-labels 0 "$build/teeny-run" --info tests/onnx/sce.onnx
has_line run-info-labels '  input   labels  int64  [N]'
has_line run-info-labels '  input   labels  int32  [1]  random unless --input labels=FILE.npy'

# -- random inputs, nothing written without --output-dir (run where any
#    stray file would show)
mkdir "$tmp/cwd"
here=$(pwd)
run run-random 0 sh -c "cd '$tmp/cwd' && '$here/$build/teeny-run' '$here/tests/onnx/io_names.onnx'"
has_match run-random '^input +img +float +\[1, 3, 4, 4\]  random \(seed 1\)$'
has_match run-random '^output +/l2/probs:0 +float +\[1, 3, 4, 4\]$'
has_match run-random '^forward +1 run: min [0-9.]+  median [0-9.]+  mean [0-9.]+  p90 [0-9.]+  p99 [0-9.]+  max [0-9.]+ ms$'
if [ -z "$(ls -A "$tmp/cwd")" ]; then ok; else fail "run-random: wrote $(ls -A "$tmp/cwd") without --output-dir"; fi

# -- --output-dir created with its parents; "/l2/probs:0" written as
#    _l2_probs_0.npy and the output really named _l2_probs_0 as
#    _l2_probs_0_1.npy; the same seed gives the same values, another seed others
run run-out 0 "$build/teeny-run" tests/onnx/io_names.onnx --output-dir "$tmp/out/a/b" --batch 2 --seed 7
has_line run-out "output      /l2/probs:0  float  [2, 3, 4, 4]  -> $tmp/out/a/b/_l2_probs_0.npy"
has_line run-out "output      _l2_probs_0  float  [2, 5]  -> $tmp/out/a/b/_l2_probs_0_1.npy"
run run-out-again 0 "$build/teeny-run" tests/onnx/io_names.onnx --output-dir "$tmp/out2" --batch 2 --seed 7
run run-out-seed 0 "$build/teeny-run" tests/onnx/io_names.onnx --output-dir "$tmp/out3" --batch 2 --seed 8
for f in _l2_probs_0.npy _l2_probs_0_1.npy; do
    if cmp -s "$tmp/out/a/b/$f" "$tmp/out2/$f"; then ok; else fail "run-out: $f differs between two runs of seed 7"; fi
    if cmp -s "$tmp/out/a/b/$f" "$tmp/out3/$f"; then fail "run-out: $f the same for seeds 7 and 8"; else ok; fi
done
# given values: the committed input gives the committed output's shape, written as logits.npy
run run-given 0 "$build/teeny-run" tests/onnx/convnet.onnx --input x=tests/onnx/convnet.in0.npy --output-dir "$tmp/given"
has_match run-given '^input +x +float +\[2, 3, 8, 8\]  from tests/onnx/convnet.in0.npy$'
if [ "$(head -c 128 "$tmp/given/logits.npy" | tr -d '\0')" = "$(head -c 128 tests/onnx/convnet.out0.npy | tr -d '\0')" ]; then
    ok; else fail "run-given: logits.npy's header is not convnet.out0.npy's"; fi
# --no-optimize: the plan as written, the same output bits, one more launch per convolution (PoCL packs weights)
run run-no-optimize 0 "$build/teeny-run" tests/onnx/convnet.onnx --input x=tests/onnx/convnet.in0.npy --output-dir \
    "$tmp/noopt" --no-optimize --repeat 2 --profile
if cmp -s "$tmp/given/logits.npy" "$tmp/noopt/logits.npy"; then ok; else fail "run-no-optimize: logits differ"; fi
has_match run-no-optimize '^conv1 +2\.0 '
# ---- --input files as the model declares its inputs (issue 42) ----
# npy FILE DESCR SHAPE: an .npy v1.0 header (padded to a multiple of 64
# bytes, as numpy's) into FILE; the data follows with i64le / u8 / f32one.
npy() {
    dict="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
    hlen=$(((10 + ${#dict} + 1 + 63) / 64 * 64 - 10))
    printf "\223NUMPY\001\000\\$(printf %03o $hlen)\000%s%$((hlen - ${#dict} - 1))s\n" "$dict" '' > "$1"
}
i64le() { # little-endian int64s (non-negative)
    for v; do b=0; while [ $b -lt 8 ]; do
        printf "\\$(printf %03o $(((v >> (8 * b)) & 255)))"; b=$((b + 1)); done; done
}
u8() { for v; do printf "\\$(printf %03o "$v")"; done; }
f32one() { printf '\000\000\200\077'; } # 1.0f
# int64 labels give the bits the committed int32 labels give
npy "$tmp/labels_i8.npy" '<i8' '(5,)'; i64le 0 3 1 2 3 >> "$tmp/labels_i8.npy"
run run-i4 0 "$build/teeny-run" tests/onnx/sce.onnx --input x=tests/onnx/sce.in0.npy \
    --input labels=tests/onnx/sce.in1.npy --output-dir "$tmp/sce_i4"
run run-i8 0 "$build/teeny-run" tests/onnx/sce.onnx --input x=tests/onnx/sce.in0.npy \
    --input labels="$tmp/labels_i8.npy" --output-dir "$tmp/sce_i8"
has_match run-i8 "^input +labels +int32 +\[5\]  from $tmp/labels_i8.npy\$"
if cmp -s "$tmp/sce_i4/loss.npy" "$tmp/sce_i8/loss.npy"; then ok; else fail "run-i8: loss differs from int32 labels'"; fi
# an int64 past int32 is refused, naming the input, the element and the value
npy "$tmp/labels_big.npy" '<i8' '(5,)'; i64le 0 3 1 1099511627776 3 >> "$tmp/labels_big.npy"
run run-i8-range 1 "$build/teeny-run" tests/onnx/sce.onnx --input x=tests/onnx/sce.in0.npy \
    --input labels="$tmp/labels_big.npy"
has_err run-i8-range 'TEENY_ERR_RANGE: input labels: element 3 is 1099511627776, outside int32 (the plan takes int32 [5])'
# an int64 operand the importer takes as a constant stays whole: Slice's ends INT64_MAX
run run-i8-operand 0 "$build/teeny-run" tests/onnx/slice_feed.onnx --input x=tests/onnx/slice_feed.in0.npy \
    --input ends=tests/onnx/slice_feed.in1.npy --output-dir "$tmp/slice"
has_match run-i8-operand '^output +y +float +\[2, 4\]  -> '
# a type the input cannot take, and a shape it cannot: both named
run run-f4-labels 1 "$build/teeny-run" tests/onnx/sce.onnx --input labels=tests/onnx/sce.in0.npy
has_err run-f4-labels "--input labels=tests/onnx/sce.in0.npy: TEENY_ERR_ARG: input labels is int64 [N] (give int32, int64 or bool values); the file holds float [5, 6]"
run run-i8-float 1 "$build/teeny-run" tests/onnx/sce.onnx --input x="$tmp/labels_i8.npy"
has_err run-i8-float "--input x=$tmp/labels_i8.npy: TEENY_ERR_ARG: input x is float [N, 6] (give float values); the file holds int64 [5]"
run run-bad-shape 1 "$build/teeny-run" tests/onnx/convnet.onnx --input x=tests/onnx/sce.in0.npy
has_err run-bad-shape "--input x=tests/onnx/sce.in0.npy: TEENY_ERR_SHAPE: input x is float [N, 3, 8, 8]; the file holds float [5, 6]"
# rank-0 inputs (ONNX's Gemm with a scalar bias, Pow with a scalar exponent) from 0-d files
sf=tests/onnx/scalar_feed
run run-rank0 0 "$build/teeny-run" $sf.onnx --input a=$sf.in0.npy --input b=$sf.in1.npy --input c=$sf.in2.npy \
    --input x=$sf.in3.npy --input e=$sf.in4.npy --output-dir "$tmp/scalar"
has_match run-rank0 "^input +c +float +\[1\]  from $sf.in2.npy\$"
for out in 0:y 1:z; do
    k=${out%%:*} f=${out#*:}.npy
    if [ "$(head -c 64 "$tmp/scalar/$f" | tr -d '\0')" = "$(head -c 64 $sf.out$k.npy | tr -d '\0')" ]; then
        ok; else fail "run-rank0: $f's header is not $sf.out$k.npy's"; fi
done
# a [1] file is taken for a scalar (teeny-run writes a scalar as [1]); a [3] one is not
npy "$tmp/one.npy" '<f4' '(1,)'; f32one >> "$tmp/one.npy"
run run-rank0-one 0 "$build/teeny-run" $sf.onnx --input e="$tmp/one.npy"
run run-rank0-bad 1 "$build/teeny-run" $sf.onnx --input e=$sf.in3.npy
has_err run-rank0-bad "--input e=$sf.in3.npy: TEENY_ERR_SHAPE: input e is float []; the file holds float [3]"
# bool: the Attention mask the importer takes only from a feed; an int64 file for it refused
npy "$tmp/mask.npy" '|b1' '(3, 3)'; u8 1 1 0 0 1 1 1 1 1 >> "$tmp/mask.npy"
run run-bool 0 "$build/teeny-run" tests/onnx/bad_attn_bool_mask.onnx --input m="$tmp/mask.npy"
npy "$tmp/mask_i8.npy" '<i8' '(3, 3)'; i64le 1 1 0 0 1 1 1 1 1 >> "$tmp/mask_i8.npy"
run run-bool-i8 1 "$build/teeny-run" tests/onnx/bad_attn_bool_mask.onnx --input m="$tmp/mask_i8.npy"
has_err run-bool-i8 "--input m=$tmp/mask_i8.npy: TEENY_ERR_ARG: input m is bool [3, 3] (give bool values); the file holds int64 [3, 3]"
npy "$tmp/mask_bad.npy" '|b1' '(3, 3)'; u8 1 1 0 0 7 1 1 1 1 >> "$tmp/mask_bad.npy"
run run-bool-byte 1 "$build/teeny-run" tests/onnx/bad_attn_bool_mask.onnx --input m="$tmp/mask_bad.npy"
has_err run-bool-byte 'TEENY_ERR_FORMAT: npy '"$tmp"'/mask_bad.npy: bool element 4 is byte 7 (a bool is 0 or 1)'
npy "$tmp/be.npy" '>i8' '(5,)'; i64le 0 3 1 2 3 >> "$tmp/be.npy"
run run-big-endian 1 "$build/teeny-run" tests/onnx/sce.onnx --input labels="$tmp/be.npy"
has_err run-big-endian "dtype '>i8' is not supported ('<f4', '<i4', '<i8', '|b1', '<f2'; big-endian data is not read)"
# float16 (issue 46): a float16 input takes '<f2' files, a float16 output is written as '<f2' (numpy's header,
# ONNX Runtime's type); a float file for a float16 input, and the other way round, refused by name
h=tests/onnx/fp16_io k=tests/onnx/fp16_keepio
run run-f2 0 "$build/teeny-run" $h.onnx --input x=$h.in0.npy --output-dir "$tmp/fp16"
has_match run-f2 "^input +x +float16 +\[2, 3, 8, 8\]  from $h.in0.npy\$"
has_match run-f2 "^output +logits +float16 +\[2, 5\]  -> $tmp/fp16/logits.npy\$"
for out in 0:logits 1:act; do
    n=${out%%:*} f=${out#*:}.npy
    if [ "$(head -c 64 "$tmp/fp16/$f" | tr -d '\0')" = "$(head -c 64 $h.out$n.npy | tr -d '\0')" ]; then
        ok; else fail "run-f2: $f's header is not $h.out$n.npy's"; fi
done
run run-f2-keepio 0 "$build/teeny-run" $k.onnx --input x=$k.in0.npy --output-dir "$tmp/keepio"
has_match run-f2-keepio "^output +logits +float +\[2, 5\]  -> $tmp/keepio/logits.npy\$"
run run-f4-for-f2 1 "$build/teeny-run" $h.onnx --input x=$k.in0.npy
has_err run-f4-for-f2 "--input x=$k.in0.npy: TEENY_ERR_ARG: input x is float16 [N, 3, 8, 8] (give float16 values); the file holds float [2, 3, 8, 8]"
run run-f2-for-f4 1 "$build/teeny-run" $k.onnx --input x=$h.in0.npy
has_err run-f2-for-f4 "--input x=$h.in0.npy: TEENY_ERR_ARG: input x is float [N, 3, 8, 8] (give float values); the file holds float16 [2, 3, 8, 8]"
run run-f2-json 0 "$build/teeny-run" $h.onnx --json
has_match run-f2-json '"outputs": \[\{"name": "logits", "dtype": "float16", "shape": \[1, 5\]'
# an output directory that cannot be made, and an output path that is a
# directory: refused before the model is compiled or run
: > "$tmp/a-file"
run run-out-file 1 "$build/teeny-run" tests/onnx/convnet.onnx --output-dir "$tmp/a-file/sub"
has_err run-out-file "--output-dir $tmp/a-file/sub: cannot create $tmp/a-file/sub: Not a directory"
mkdir -p "$tmp/dirout/logits.npy"
run run-out-dir 1 "$build/teeny-run" tests/onnx/convnet.onnx --output-dir "$tmp/dirout"
has_err run-out-dir "output logits would be written to $tmp/dirout/logits.npy, which exists and is not a file"
if grep -q '^forward' "$tmp/run-out-dir.out"; then fail "run-out-dir: ran before refusing"; else ok; fi

# -- timing: warm-up apart, then the statistics, throughput, import and
#    compile times, the device; min <= median <= p90 <= p99 <= max
run run-time 0 "$build/teeny-run" tests/onnx/convnet.onnx --warmup 2 --repeat 7 --batch 4
has_match run-time '^device +[^ ].*$'
has_match run-time '^import +[0-9]+\.[0-9]{3} ms$'
has_match run-time '^compile +[0-9]+\.[0-9]{3} ms$'
has_match run-time '^warm-up +2 runs: first [0-9.]+ ms, last [0-9.]+ ms$'
has_match run-time '^forward +7 runs: min [0-9.]+  median [0-9.]+  mean [0-9.]+  p90 [0-9.]+  p99 [0-9.]+  max [0-9.]+ ms$'
has_match run-time '^throughput +[0-9.]+ inferences/s at batch 4 \(from the mean\)$'
order=$(awk '/^forward/ { print ($5 <= $7 && $7 <= $11 && $11 <= $13 && $13 <= $15 && $5 <= $9 && $9 <= $15) ? "yes" : "no: " $0 }' \
        "$tmp/run-time.out")
if [ "$order" = yes ]; then ok; else fail "run-time: statistics out of order (${order:-no forward line})"; fi

# -- --profile: per kernel and per graph node, slowest first; each table's launches a pass add up to the plan's
run run-profile 0 "$build/teeny-run" tests/onnx/convnet.onnx --repeat 3 --profile
has_match run-profile '^profile: 3 forward passes back to back; per pass [0-9.]+ ms of device time'
has_match run-profile '^kernel \(slowest first\) +launches/pass +ms/pass +ms/launch +share +idle ms/pass$'
has_match run-profile '^graph node \(slowest first\) +launches/pass +ms/pass +ms/launch +share +idle ms/pass$'
has_match run-profile '^conv1 +1\.0 ' # frozen parameters: its weights packed at compile (PoCL)
for table in kernel 'graph node'; do
    prof=$(awk -v t="$table" '/^launches / { want = $2 } index($0, t " (slowest") == 1 { on = 1; next } on && /^$|^\(/ { on = 0 }
                on { n += $(NF - 4); if (seen && $(NF - 3) > last + 1e-9) bad = 1; last = $(NF - 3); seen = 1 }
                END { print (seen && !bad && n == want) ? "yes" : "no: " n " launches in the rows, " want " a pass, sorted " (bad ? "no" : "yes") }' \
           "$tmp/run-profile.out")
    if [ "$prof" = yes ]; then ok; else fail "run-profile ($table): $prof"; fi
done

# -- --json: one object with the timings, the device, the profile
run run-json 0 "$build/teeny-run" tests/onnx/io_names.onnx --json --repeat 2 --profile --output-dir "$tmp/json"
for key in '"model": "tests/onnx/io_names.onnx"' '"device": "' '"import_ms": ' '"compile_ms": ' '"min_ms": ' \
           '"median_ms": ' '"mean_ms": ' '"p90_ms": ' '"p99_ms": ' '"throughput_per_s": ' '"profile": {"passes": 2' \
           '"nodes": [{"name": "' \
           '"name": "/l2/probs:0", "dtype": "float", "shape": [1, 3, 4, 4], "file": "_l2_probs_0.npy", "written": true'; do
    if grep -Fq -- "$key" "$tmp/run-json.out"; then ok; else fail "run-json: no $key in: $(cat "$tmp/run-json.out")"; fi
done
if [ "$(wc -l < "$tmp/run-json.out")" -eq 1 ]; then ok; else fail "run-json: more than the one JSON line"; fi
if command -v python3 > /dev/null; then
    if python3 -c 'import json, sys; json.load(sys.stdin)' < "$tmp/run-json.out"; then ok; else fail "run-json: not JSON"; fi
fi

# -- finetune_onnx's errors for users: a batch-1 export gets the dynamic
#    batch hint, a --freeze-prefix that matches nothing lists the names,
#    and no message ends in a C expression
run finetune-batch1 1 "$build/finetune_onnx" tests/onnx/external.onnx --synthetic --steps 2
has_err finetune-batch1 'hint: the model was exported for a batch of 1, and training needs batches of 2 or more.'
has_err finetune-batch1 'Export it with a dynamic batch: torch.onnx.export('
run finetune-freeze-none 1 "$build/finetune_onnx" tests/onnx/convnet.onnx --synthetic --steps 2 --freeze-prefix nope.
has_err finetune-freeze-none 'error: --freeze-prefix "nope.": no parameter'"'"'s name starts with it; the model'"'"'s 8 parameters: conv1.weight, conv1.bias,'
if grep -q 'teeny_[a-z_]*(' "$tmp/finetune-batch1.err" "$tmp/finetune-freeze-none.err"; then
    fail "finetune: a message with a C call in it: $(cat "$tmp/finetune-batch1.err" "$tmp/finetune-freeze-none.err")"
else ok; fi

# -- train_fashion_mnist into a file: stdout line-buffered (the header and
#    "compiled in" before the epoch line, as on a terminal), no \r progress bar
if [ -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ]; then
    run train-log 0 sh -c "'$build/train_fashion_mnist' --epochs 1 --train-limit 128 --test-limit 64 --batch 64 \
        --out '$tmp/train' 2>&1"
    first=$(awk '/^teenycl .* parameters/ { h = NR } /^compiled in/ { c = NR } /^epoch 1\/1 / { e = NR }
                 END { print (h && c && e && h < c && c < e) ? "yes" : "no: header " h ", compiled " c ", epoch " e }' \
            "$tmp/train-log.out")
    if [ "$first" = yes ]; then ok; else fail "train-log: lines out of order ($first)"; fi
    if tr -d '\n' < "$tmp/train-log.out" | grep -q "$(printf '\r')"; then fail "train-log: a \\r progress bar in a file"; else ok; fi
else
    echo "SKIP: train_fashion_mnist's log: /usr/share/datasets/fashion-mnist missing"
fi
# ==== end of the issue 44 block ====

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

# ==== examples/run_onnx: the README's "Embed it in C" ====
run run-onnx 0 "$build/run_onnx" tests/onnx/convnet.onnx
has_match run-onnx '^-?[0-9][0-9.e+-]*( -?[0-9][0-9.e+-]*){4}$'
run run-onnx-missing 1 "$build/run_onnx" "$tmp/no-such.onnx"
has_err run-onnx-missing 'no-such.onnx: cannot open'

echo "test_tools.sh: $passes checks passed, $failures failed"
[ "$failures" -eq 0 ]
