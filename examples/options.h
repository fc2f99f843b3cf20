/*
 * options.h -- what the example programs share on their command lines:
 * whole numbers and reals parsed strictly (the whole text, digits only, in
 * range: strtoull would take "-1" as 2^64 - 1 and skip leading spaces), the
 * splitmix64 generator their --seed drives, and proving before any work
 * that an output directory takes a new file (a missing or read-only
 * directory fails at start-up, not after the last step). Each check prints
 * "error: <option> ..." and returns 0; the caller exits 2 for a bad number
 * (its usage status) and 1 for an unusable output. The option table,
 * --help, --version and the command-line errors are tools/cli.h's, the
 * same in every teenycl program. Header-only, as fashion_net.h, so each
 * example stays one program.
 */
#ifndef TEENY_EXAMPLE_OPTIONS_H
#define TEENY_EXAMPLE_OPTIONS_H

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/cli.h"

static inline uint64_t ex_rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The whole of s as a decimal number in [lo, hi] into *out, or a message
 * and 0: digits only (no sign, space or fraction), no overflow, in range. */
static inline int ex_parse_number(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
    if (!end || *end) {
        fprintf(stderr, "error: %s \"%s\": not a whole number >= 0 (digits only)\n", opt, s);
        return 0;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "error: %s %s: out of range (%" PRIu64 " to %" PRIu64 ")\n", opt, s, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

/* The whole of s as a finite decimal real in (lo, hi] (no leading space or
 * sign, nothing after it), or a message and 0. */
static inline int ex_parse_real(const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = (*s >= '0' && *s <= '9') || *s == '.' ? strtod(s, &end) : 0;
    if (!end || *end || errno == ERANGE || !isfinite(v) || v <= lo || v > hi) {
        fprintf(stderr, "error: %s \"%s\": not a number in (%g, %g]\n", opt, s, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

/* Whether a new file can be made in directory dir (created and removed
 * again; name tags it), for option opt given as `given`: 1, or a message
 * and 0. */
static inline int ex_dir_takes_files(const char *opt, const char *given, const char *dir, const char *name)
{
    char probe[1200];
    snprintf(probe, sizeof probe, "%s/.%s.%ld.probe", dir, name, (long)getpid());
    FILE *f = fopen(probe, "wx");
    if (!f) {
        fprintf(stderr, "error: %s %s: cannot write there: %s\n", opt, given, strerror(errno));
        return 0;
    }
    fclose(f);
    remove(probe);
    return 1;
}

#endif
