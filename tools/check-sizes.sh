#!/bin/sh
# check-sizes.sh -- the size rules of the library's sources: no file under
# src/ longer than 600 lines, no function longer than 100 (from the first
# line of its signature to its closing brace; functions open with "{" and
# close with "}" in column 0, the house style). make test runs it.
#
#   tools/check-sizes.sh [DIR]   (DIR defaults to src)
# Exit 0 when every file and function fits, 1 naming each one that does not.
set -eu
dir=${1:-src}
max_file=600
max_fn=100
find "$dir" -name '*.[ch]' | sort | while read -r f; do
    awk -v f="$f" -v max_file="$max_file" -v max_fn="$max_fn" '
        /^[A-Za-z_].*\(/ && !/;[ \t]*$/ { sig = FNR; name = $0 }
        /^\{/ { start = sig ? sig : FNR; inside = 1 }
        /^\}/ && inside {
            if (FNR - start + 1 > max_fn)
                printf "check-sizes: %s:%d: a function of %d lines (at most %d): %s\n", f, start, FNR - start + 1,
                       max_fn, name
            inside = 0; sig = 0
        }
        END { if (FNR > max_file) printf "check-sizes: %s: %d lines (at most %d)\n", f, FNR, max_file }' "$f"
done >"${TMPDIR:-/tmp}/check-sizes.$$"
if [ -s "${TMPDIR:-/tmp}/check-sizes.$$" ]; then
    cat "${TMPDIR:-/tmp}/check-sizes.$$" >&2
    rm -f "${TMPDIR:-/tmp}/check-sizes.$$"
    exit 1
fi
rm -f "${TMPDIR:-/tmp}/check-sizes.$$"
