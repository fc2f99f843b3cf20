/*
 * args.h -- strict numbers on the tools' command lines (teeny-info,
 * teeny-bench): the rules of the library's own parser (teeny__parse_int in
 * src/core/util.c, which the tools cannot reach: they build against the
 * public header alone, as check-install does). A number is whole decimal
 * text in its range: digits, a leading '-' only where negatives are
 * allowed, no '+', blank, base prefix, exponent or trailing text, no
 * wrap-around. Anything else is reported with the option, the text and
 * the range, and the tool exits with its usage status (2).
 */
#ifndef TEENY_TOOLS_ARGS_H
#define TEENY_TOOLS_ARGS_H

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* text as an int in [lo, hi] into *out: 1, or 0 after printing
 * "prog: opt "text" is ...; it takes lo..hi" to stderr. */
static int args_int(const char *prog, const char *opt, const char *text, int lo, int hi, int *out)
{
    const char *digits = text[0] == '-' && lo < 0 ? text + 1 : text;
    const char *why = "is not a decimal integer";
    char *end = NULL;
    long long v = 0;
    if (!*text) {
        why = "is empty";
    } else if (isdigit((unsigned char)digits[0])) {
        errno = 0;
        v = strtoll(text, &end, 10);
        if (*end)
            why = "is not a decimal integer";
        else if (errno == ERANGE || v < lo || v > hi || (text[0] == '-' && lo >= 0))
            why = "is out of range";
        else {
            *out = (int)v;
            return 1;
        }
    } else if (text[0] == '-' && lo >= 0 && isdigit((unsigned char)text[1])) {
        why = "is out of range";
    }
    fprintf(stderr, "%s: %s \"%s\" %s; it takes a decimal integer in %d..%d\n", prog, opt, text, why, lo, hi);
    return 0;
}

#endif
