#!/bin/sh
# check-layers.sh -- prove that the code calls down the layers only. From
# each object's symbol table (the global functions and data it defines,
# the ones it needs) it builds the file-level call graph of the library
# (src/), its MPI layer and the tools (tools/), then fails on
#   - a call up the layer order below (LAYERS) between folders, unless
#     EXCEPTIONS lists that caller file and callee file;
#   - a tool calling a library function outside the public API (a symbol
#     the library does not export: visibility hidden, teeny__ names);
#   - a call cycle between files (tsort), inside a folder too;
#   - a file in a folder the order does not name;
#   - a source without an object (a stale build: run make first).
# A file's folder is the first directory under src/ (src/ops/conv2d/gemm.c
# is in ops), or tools.
#
# The MPI layer (src/mpi/) is checked in every build: its objects need
# mpi.h, so make gauges (part of make test) builds them whenever mpicc
# exists. The rule: when mpicc ($MPICC, default mpicc)
# exists, a missing MPI object fails like any other; when it does not, the
# MPI layer is reported as NOT CHECKED (never as passed) and the rest is
# checked (tools/install-deps.sh test installs Open MPI).
#
#   tools/check-layers.sh [-q] [BUILD_DIR]   (run from the tree's root, after make)
# BUILD_DIR defaults to build; objects are BUILD_DIR/<source>.o. Without
# -q it prints the file-level calls, the same folded to folders, and the
# files in dependency order; -q prints only what fails (and NOT CHECKED).
# Exit 0 when every call runs down, 1 naming each one that does not (caller
# file, callee file, the symbol), 2 when there is nothing to check.
set -eu
export LC_ALL=C

# The layers, top to bottom (ARCHITECTURE.md's diagram): a file may call
# files of its own layer and of the layers below it, never above.
LAYERS='
tools
mpi
onnx
io
graph
ops
tensor
program
tune
core
'
# The calls up the order that ARCHITECTURE.md documents, one per line:
# caller file, callee file. Core creates the context and matches its
# device profile (tune.c calls only core/status.c); the kernel cache
# reads and writes its files through io/file.c. (The context's layout,
# src/internal.h, reaches every layer as a header: no call.)
EXCEPTIONS='
src/core/device.c src/tune/tune.c
src/program/build.c src/io/file.c
src/program/cache.c src/io/file.c
'

quiet=0
if [ "${1:-}" = "-q" ]; then quiet=1; shift; fi
build=${1:-build}
[ -d src ] || { echo "check-layers: no src/ here (run from the tree's root)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# the rank of each folder: 1 at the top
echo "$LAYERS" | awk 'NF { r++; for (i = 1; i <= NF; i++) print $i, r }' >"$tmp/ranks"
echo "$EXCEPTIONS" | awk 'NF == 2 { print $1, $2 }' >"$tmp/exceptions"

# the sources and their objects; an MPI source without mpicc is noted, not checked
mpi_missing=0
: >"$tmp/files"
for f in $(find src tools -name '*.c' 2>/dev/null | sort); do
    o=$build/${f%.c}.o
    case $f in src/mpi/*) mpi=1 ;; *) mpi=0 ;; esac
    if [ -f "$o" ]; then
        echo "$f $o" >>"$tmp/files"
    elif [ "$mpi" = 1 ] && ! command -v "${MPICC:-mpicc}" >/dev/null 2>&1; then
        mpi_missing=1
    else
        echo "check-layers: $f has no object $o (run make first)" >&2
        if [ "$mpi" = 1 ]; then echo "  (the MPI layer's objects: make gauges builds them)" >&2; fi
        fail=1
    fi
done
[ -s "$tmp/files" ] || { echo "check-layers: no objects under $build (run make first)" >&2; exit 2; }
if [ "$mpi_missing" = 1 ]; then
    echo "check-layers: NOT CHECKED: the MPI layer (src/mpi): mpicc is missing, so it has no objects" \
         "(sh tools/install-deps.sh test installs Open MPI)"
fi

# "symbol file" for each global a file defines (with "hidden" where the
# library does not export it), and each it needs
while read -r f o; do
    readelf -sW "$o" | awk -v f="$f" '($5 == "GLOBAL" || $5 == "WEAK") && $7 != "UND" &&
        ($4 == "FUNC" || $4 == "OBJECT") && $8 != "" { print $8, f, ($6 == "HIDDEN" ? "hidden" : "public") }'
done <"$tmp/files" | sort -u >"$tmp/defs"
while read -r f o; do
    nm -u "$o" | awk -v f="$f" '{ print $NF, f }'
done <"$tmp/files" | sort -u >"$tmp/uses"
# "caller callee symbol visibility" for every symbol a file needs that another file defines
join "$tmp/uses" "$tmp/defs" | awk '$2 != $3 { print $2, $3, $1, $4 }' | sort -u >"$tmp/calls"

# the checks: each call's folders against the order
awk -v ranks="$tmp/ranks" -v exc="$tmp/exceptions" -v files="$tmp/files" '
    function folder(f, a) { split(f, a, "/"); return a[1] == "tools" ? "tools" : a[2] }
    BEGIN {
        while ((getline line < ranks) > 0) { split(line, a, " "); rank[a[1]] = a[2] }
        while ((getline line < exc) > 0) { split(line, a, " "); allowed[a[1] " " a[2]] = 1 }
        while ((getline line < files) > 0) {
            split(line, a, " ")
            d = folder(a[1])
            if (!(d in rank) && !(d in told)) {
                printf "check-layers: %s: folder %s is not in the layer order (LAYERS in tools/check-layers.sh)\n",
                       a[1], d
                told[d] = 1; bad = 1
            }
        }
    }
    {
        caller = $1; callee = $2; sym = $3; dc = folder(caller); dd = folder(callee)
        if (dc == "tools" && dd != "tools" && $4 == "hidden") {
            printf "check-layers: %s calls %s outside the public API: %s\n", caller, callee, sym
            bad = 1
        }
        if ((dc in rank) && (dd in rank) && rank[dd] < rank[dc] && !((caller " " callee) in allowed)) {
            printf "check-layers: %s calls up to %s (%s is above %s): %s\n", caller, callee, dd, dc, sym
            bad = 1
        }
    }
    END { exit bad }' "$tmp/calls" >&2 || fail=1

awk '{ print $1, $2 }' "$tmp/calls" | sort -u >"$tmp/edges"
if [ "$quiet" = 0 ]; then
    echo "the layer order, top to bottom:" $(echo "$LAYERS" | awk 'NF { $1 = $1; gsub(/ /, "|"); print }')
    echo "calls (file -> file it calls):"
    sed 's/^/  /; s/ \([^ ]*\)$/ -> \1/' "$tmp/edges"
    echo "layers (folder -> folder it calls: how many file pairs):"
    awk 'function folder(f, a) { split(f, a, "/"); return a[1] == "tools" ? "tools" : a[2] }
         { dc = folder($1); dd = folder($2); if (dc != dd) print dc, dd }' "$tmp/edges" | sort | uniq -c |
        awk '{ printf "  %s -> %s: %d\n", $2, $3, $1 }'
fi
# tsort sees every file, even one with no edges
awk '{ print $1, $1 }' "$tmp/files" >>"$tmp/edges"
if tsort "$tmp/edges" >"$tmp/order" 2>"$tmp/err"; then
    if [ "$quiet" = 0 ]; then
        echo "no cycles; callers before callees:"
        tr '\n' ' ' <"$tmp/order"; echo
    fi
else
    echo "check-layers: call cycle between files:" >&2
    sed 's/^tsort: .*input contains a loop:$/  a loop through:/; s/^tsort: /    /' "$tmp/err" >&2
    fail=1
fi
if [ "$fail" = 0 ] && [ "$quiet" = 0 ]; then echo "every call runs down the layers"; fi
exit "$fail"
