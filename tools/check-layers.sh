#!/bin/sh
# check-layers.sh -- prove that the library's source files call each other
# one way only. From each object's symbol table (nm: the global functions
# and data it defines, the ones it needs) it builds the file-level call
# graph and hands it to tsort, which fails on any cycle; it also prints the
# same graph folded to directories (src/core, src/program, ...), the layer
# diagram of ARCHITECTURE.md as the objects have it.
#
#   tools/check-layers.sh [-q] [BUILD_DIR [FILES]]   (run after make)
# BUILD_DIR defaults to build; FILES is an extended regex of the source
# paths to check, default every file under src/ that has an object (the
# dist layer's too once make WITH_MPI=1 built them). -q prints only a
# cycle. make test runs it (tools/check-layers.sh -q build).
# Exit 0 with the graph in dependency order, 1 if any cycle exists.
set -eu
quiet=0
if [ "${1:-}" = "-q" ]; then quiet=1; shift; fi
build=${1:-build}
only=${2:-src/.*}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objs=$(find "$build/src" -name '*.o' | sort | while read -r o; do
    f=${o#"$build"/}; f=${f%.o}.c
    if echo "$f" | grep -Eq "^($only)\$"; then echo "$o"; fi
done)
[ -n "$objs" ] || { echo "check-layers: no objects under $build/src (run make first)" >&2; exit 2; }
for o in $objs; do
    f=${o#"$build"/}; f=${f%.o}.c
    nm --defined-only -g "$o" | awk -v f="$f" '$2 ~ /^[TDRB]$/ { print $3, f }'
done | sort -u >"$tmp/defs"
for o in $objs; do
    f=${o#"$build"/}; f=${f%.o}.c
    nm -u "$o" | awk -v f="$f" '{ print $NF, f }'
done | sort -u >"$tmp/uses"
# "user definer" for every symbol a file needs that another file defines
join "$tmp/uses" "$tmp/defs" | awk '$2 != $3 { print $2, $3 }' | sort -u >"$tmp/edges"
if [ "$quiet" = 0 ]; then
    echo "calls (file -> file it calls):"
    sed 's/^/  /; s/ \([^ ]*\)$/ -> \1/' "$tmp/edges"
    echo "layers (directory -> directory it calls: how many file pairs):"
    awk '{ n = split($1, a, "/"); m = split($2, b, "/"); da = a[n - 1]; db = b[m - 1];
           if (da != db) print da, db }' "$tmp/edges" | sort | uniq -c |
        awk '{ printf "  %s -> %s: %d\n", $2, $3, $1 }'
fi
# tsort sees every file, even one with no edges
for o in $objs; do f=${o#"$build"/}; f=${f%.o}.c; echo "$f $f"; done >>"$tmp/edges"
if tsort "$tmp/edges" >"$tmp/order" 2>"$tmp/err"; then
    if [ "$quiet" = 0 ]; then
        echo "no cycles; callers before callees:"
        tr '\n' ' ' <"$tmp/order"; echo
    fi
else
    echo "check-layers: call cycle between files:" >&2
    cat "$tmp/err" >&2
    exit 1
fi
