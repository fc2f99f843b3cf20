#!/bin/sh
# check-sizes.sh -- the size rules of the whole tree's code: no file longer
# than 600 lines, no function longer than 100, in the library (src/), the
# kernels (cl/: kernels and helper functions alike), the tools (tools/)
# and the examples (examples/). make test runs it.
#
# A function runs from the first line of its signature to its closing
# brace, the house style in C and OpenCL C alike: the signature starts in
# column 0 (a line holding "(" that does not end in ";"; a kernel's
# "__kernel __attribute__((...))" line directly above its declarator
# belongs to it), the body opens with "{" and closes with "}" in column 0.
#
#   tools/check-sizes.sh [PATH...]   (default: src cl tools examples, from the tree's root)
# PATH is a directory (its *.c, *.h and *.cl files, recursively) or a file.
# Exit 0 when every file and function fits; 1 naming each one that does
# not (file:line, its length, the function's declarator); 2 when a PATH
# does not exist.
set -eu
max_file=600
max_fn=100
if [ $# -eq 0 ]; then set -- src cl tools examples; fi
for p in "$@"; do
    [ -e "$p" ] || { echo "check-sizes: $p: no such file or directory (run from the tree's root)" >&2; exit 2; }
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
find "$@" -type f \( -name '*.[ch]' -o -name '*.cl' \) | sort | while read -r f; do
    awk -v f="$f" -v max_file="$max_file" -v max_fn="$max_fn" '
        /^[A-Za-z_].*\(/ && !/;[ \t]*$/ {
            if (!(sig && FNR == last + 1))
                sig = FNR
            last = FNR; name = $0
        }
        /^\{/ { start = sig ? sig : FNR; inside = 1 }
        /^\}/ && inside {
            if (FNR - start + 1 > max_fn)
                printf "check-sizes: %s:%d: a function of %d lines (at most %d): %s\n", f, start, FNR - start + 1,
                       max_fn, name
            inside = 0; sig = 0
        }
        END { if (FNR > max_file) printf "check-sizes: %s: %d lines (at most %d)\n", f, FNR, max_file }' "$f"
done >"$out"
if [ -s "$out" ]; then
    cat "$out" >&2
    exit 1
fi
