#!/bin/sh
# test_gauges.sh -- the gauges fail where they should: each is run on a
# tiny tree of its own in a temporary directory, first clean (it passes,
# exit 0), then with one violation planted (exit 1, the offender named).
# make gauges (part of make test) runs it; it needs only cc, nm, readelf.
#
#   check-sizes.sh   a 601-line file; a 101-line function in .c and a
#                    101-line kernel in .cl (measured from its __kernel
#                    line); 100 lines pass; a missing path exits 2
#   check-layers.sh  a call up the order (core -> graph), a file in
#                    src/ops/<family>/ counted as ops, a documented
#                    exception allowed (program/build.c -> io/file.c),
#                    a tool calling outside the public API, a circle
#                    inside tools/, a folder not in the order, a source
#                    without an object, and the MPI layer's rule: without
#                    mpicc NOT CHECKED and exit 0, with it a missing
#                    object fails
#
# Usage: sh tests/test_gauges.sh   (from the tree's root)
set -u
root=$(pwd)
sizes="$root/tools/check-sizes.sh"
layers="$root/tools/check-layers.sh"
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passes=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# gauge NAME EXPECTED_RC TEXT DIR CMD...: CMD run in DIR exits EXPECTED_RC
# and, when TEXT is not empty, prints it (stdout or stderr)
gauge() {
    name=$1 want=$2 text=$3 dir=$4
    shift 4
    (cd "$dir" && "$@") >"$tmp/$name.out" 2>&1
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$name: exit status $rc, expected $want; output:"
        sed 's/^/    /' "$tmp/$name.out"
    elif [ -n "$text" ] && ! grep -Fq -- "$text" "$tmp/$name.out"; then
        fail "$name: no \"$text\" in the output:"
        sed 's/^/    /' "$tmp/$name.out"
    else
        passes=$((passes + 1))
    fi
}

# lines N: N lines of a statement each
lines() {
    i=0
    while [ "$i" -lt "$1" ]; do
        echo "    x += $i;"
        i=$((i + 1))
    done
}

# ==== check-sizes.sh ====
t=$tmp/sizes
mkdir -p "$t/src/core" "$t/cl" "$t/tools" "$t/examples"
# a function of exactly 100 lines: signature, {, 97 statements, }
{ echo "int fits(int x)"; echo "{"; lines 96; echo "    return x;"; echo "}"; } >"$t/src/core/ok.c"
{ echo "__kernel __attribute__((reqd_work_group_size(64, 1, 1)))"; echo "void k_ok(__global float *y)";
  echo "{"; echo "    float x = 0;"; lines 94; echo "    y[0] = x;"; echo "}"; } >"$t/cl/ok.cl"
echo "int main(void) { return 0; }" >"$t/tools/tool.c"
echo "int main(void) { return 0; }" >"$t/examples/demo.c"
gauge sizes-clean 0 "" "$t" sh "$sizes"
gauge sizes-missing 2 "nope: no such file" "$t" sh "$sizes" src nope
# 601 lines
{ echo "/* long */"; lines 600; } >"$t/examples/long.h"
gauge sizes-file 1 "check-sizes: examples/long.h: 601 lines (at most 600)" "$t" sh "$sizes"
rm "$t/examples/long.h"
# a C function of 101 lines, its signature on two lines
{ echo "static int too_long(int x,"; echo "                    int y)"; echo "{"; lines 96; echo "    return x;";
  echo "}"; } >"$t/tools/long_fn.c"
gauge sizes-fn-c 1 "check-sizes: tools/long_fn.c:1: a function of 101 lines (at most 100): static int too_long(int x," \
    "$t" sh "$sizes"
rm "$t/tools/long_fn.c"
# a kernel of 101 lines, counted from its __kernel line
{ echo "/* a kernel */"; echo "__kernel __attribute__((reqd_work_group_size(64, 1, 1)))";
  echo "void k_long(__global float *y)"; echo "{"; echo "    float x = 0;"; lines 95; echo "    y[0] = x;";
  echo "}"; } >"$t/cl/long.cl"
gauge sizes-fn-cl 1 "check-sizes: cl/long.cl:2: a function of 101 lines (at most 100): void k_long(__global float *y)" \
    "$t" sh "$sizes"
rm "$t/cl/long.cl"
gauge sizes-clean-again 0 "" "$t" sh "$sizes"

# ==== check-layers.sh ====
t=$tmp/layers
# put FILE CODE: a source file (public: visibility default; the rest hidden, as the library builds)
put() {
    mkdir -p "$(dirname "$t/$1")"
    printf '#define PUBLIC __attribute__((visibility("default")))\n%s\n' "$2" >"$t/$1"
}
# build: every source's object under build/, as the Makefile puts them
build() {
    (cd "$t" && find src tools -name '*.c' | while read -r f; do
        mkdir -p "build/$(dirname "$f")"
        "$cc" -std=c11 -fvisibility=hidden -c "$f" -o "build/${f%.c}.o" || exit 1
    done)
}
put src/core/util.c 'PUBLIC int teeny_version_number(void) { return 1; } int teeny__hash(int x) { return x; }'
put src/io/file.c 'int teeny__hash(int); int teeny__file_read(void) { return teeny__hash(2); }'
put src/program/build.c 'int teeny__file_read(void); int teeny__hash(int);
int teeny__build(void) { return teeny__file_read() + teeny__hash(1); }'
put src/ops/conv2d/gemm.c 'int teeny__build(void); int teeny__conv_gemm(void) { return teeny__build(); }'
put src/graph/graph.c 'int teeny__conv_gemm(void); PUBLIC int teeny_graph_run(void) { return teeny__conv_gemm(); }'
put tools/tool.c 'int teeny_graph_run(void); int tool_util(void);
int main(void) { return teeny_graph_run() + tool_util(); }'
put tools/tool_util.c 'int teeny_version_number(void); int tool_util(void) { return teeny_version_number(); }'
build
gauge layers-clean 0 "every call runs down the layers" "$t" sh "$layers" build
gauge layers-clean-q 0 "" "$t" sh "$layers" -q build
if [ -s "$tmp/layers-clean-q.out" ]; then fail "layers-clean-q: -q printed something on a clean tree"; fi

# a call up the order: core calls graph
put src/core/up.c 'int teeny_graph_run(void); int teeny__up(void) { return teeny_graph_run(); }'
build
gauge layers-up 1 "check-layers: src/core/up.c calls up to src/graph/graph.c (graph is above core): teeny_graph_run" \
    "$t" sh "$layers" -q build
rm "$t/src/core/up.c" "$t/build/src/core/up.o"
# the same into a family's subfolder: ops/conv2d/gemm.c is in ops
put src/tensor/up.c 'int teeny__conv_gemm(void); int teeny__tensor_up(void) { return teeny__conv_gemm(); }'
build
gauge layers-up-subfolder 1 "check-layers: src/tensor/up.c calls up to src/ops/conv2d/gemm.c (ops is above tensor): teeny__conv_gemm" \
    "$t" sh "$layers" -q build
rm "$t/src/tensor/up.c" "$t/build/src/tensor/up.o"
# a tool calling a function the library does not export
put tools/inside.c 'int teeny__build(void); int tool_inside(void) { return teeny__build(); }'
build
gauge layers-private 1 "check-layers: tools/inside.c calls src/program/build.c outside the public API: teeny__build" \
    "$t" sh "$layers" -q build
rm "$t/tools/inside.c" "$t/build/tools/inside.o"
# a circle inside tools: tool_util.c calls back into a helper of tool_b.c, which calls tool_util
put tools/tool_b.c 'int tool_util(void); int tool_b(void) { return tool_util(); }'
put tools/tool_util.c 'int teeny_version_number(void); int tool_b(void);
int tool_util(void) { return teeny_version_number() + tool_b(); }'
build
gauge layers-circle 1 "check-layers: call cycle between files:" "$t" sh "$layers" -q build
if grep -q "tools/tool_b.c" "$tmp/layers-circle.out" && grep -q "tools/tool_util.c" "$tmp/layers-circle.out"; then
    passes=$((passes + 1))
else
    fail "layers-circle: the cycle's files are not named:"
    sed 's/^/    /' "$tmp/layers-circle.out"
fi
rm "$t/tools/tool_b.c" "$t/build/tools/tool_b.o"
put tools/tool_util.c 'int teeny_version_number(void); int tool_util(void) { return teeny_version_number(); }'
build
# a folder the order does not name
put src/extra/x.c 'int teeny__x(void) { return 0; }'
build
gauge layers-folder 1 "check-layers: src/extra/x.c: folder extra is not in the layer order" "$t" sh "$layers" -q build
rm -r "$t/src/extra" "$t/build/src/extra"
# a source without an object
put src/core/new.c 'int teeny__new(void) { return 0; }'
gauge layers-stale 1 "check-layers: src/core/new.c has no object build/src/core/new.o (run make first)" \
    "$t" sh "$layers" -q build
rm "$t/src/core/new.c"
# the MPI layer: no objects (as without mpicc); NOT CHECKED without mpicc, a failure with it
put src/mpi/comm.c 'int teeny_graph_run(void); int teeny_dist_x(void) { return teeny_graph_run(); }'
gauge layers-mpi-none 0 "check-layers: NOT CHECKED: the MPI layer" "$t" env MPICC=/nonexistent/mpicc sh "$layers" -q build
gauge layers-mpi-stale 1 "check-layers: src/mpi/comm.c has no object build/src/mpi/comm.o" "$t" env MPICC=true \
    sh "$layers" -q build
build
gauge layers-mpi 0 "every call runs down the layers" "$t" sh "$layers" build
gauge layers-clean-again 0 "" "$t" sh "$layers" -q build

echo "test_gauges.sh: $passes checks passed, $failures failed"
[ "$failures" -eq 0 ]
