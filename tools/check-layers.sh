#!/bin/sh
# check-layers.sh -- prove that the library's source files call each other
# one way only. From each object's symbol table (nm: the global functions
# it defines, the ones it needs) it builds the file-level call graph, prints
# it, and hands it to tsort, which fails on any cycle.
#
#   tools/check-layers.sh [BUILD_DIR [FILES]]   (run after make)
# BUILD_DIR defaults to build; FILES is an extended regex of the source
# paths to check (default: every file), e.g. the core layers:
#   tools/check-layers.sh build 'src/(device|status|clwrap|simulator|profile|record|cache|build|launch|tensor)\.c'
# Exit 0 with the graph in dependency order, 1 if any cycle exists.
set -eu
build=${1:-build}
only=${2:-.*}
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
echo "calls (file -> file it calls):"
sed 's/^/  /; s/ \([^ ]*\)$/ -> \1/' "$tmp/edges"
# tsort sees every file, even one with no edges
for o in $objs; do f=${o#"$build"/}; f=${f%.o}.c; echo "$f $f"; done >>"$tmp/edges"
if tsort "$tmp/edges" >"$tmp/order" 2>"$tmp/err"; then
    echo "no cycles; callers before callees:"
    tr '\n' ' ' <"$tmp/order"; echo
else
    echo "check-layers: call cycle between files:" >&2
    cat "$tmp/err" >&2
    exit 1
fi
