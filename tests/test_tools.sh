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

# -- the embedding example
run embed "0" "$build/embed_app"
has_match embed '^max error .* \(relative .*, limit 1e-4\): ok$'

# ==== teeny-bench: ceilings and roofline shares (issue 21 item 16) ====
# The FMA ceiling is the best of its probe kernels (fma and mad, 8, 12 and
# 16 chains, the device's vector widths: at least 3 measured), and no
# case's share of a ceiling is printed as a figure above 100 %: such a
# share is null, with the raw value under "over_ceiling".
run bench 0 "$build/teeny-bench" --json --filter conv_fashion_3x3_1to32_28_b128 --reps 5 --warmup 1
has_match bench '^\{"type": "header", .*"fma_gflops": [0-9.e+]+, .*"fma_op": "(fma|mad)", "fma_variants": ([3-9]|[1-9][0-9])\}$'
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
# ==== end of the teeny-bench block ====

echo "test_tools.sh: $passes checks passed, $failures failed"
[ "$failures" -eq 0 ]
