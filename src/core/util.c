/*
 * util.c -- the library's small host helpers, one copy of each: bounded
 * string copy, case-insensitive substring search (device and vendor names),
 * FNV-1a 64 (kernel-cache keys and checkpoint checksums), growing an array
 * by doubling, overflow-checked size products, "[2, 3, 4]" shape text for
 * error messages, UTF-8 validation (file headers), and the one strict
 * number parser (env.c builds the environment checks on it). No OpenCL,
 * no context state and no error reporting here: every other file may call
 * them, status.c included.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

void teeny__strlcpy(char *dst, const char *src, size_t cap)
{
    if (!cap)
        return;
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int teeny__contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    if (!n)
        return 1;
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

uint64_t teeny__fnv1a64(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

int teeny__grow(void **arr, int *cap, int n, size_t elem)
{
    void *p;
    int want;
    if (n < *cap)
        return 1;
    want = *cap ? *cap * 2 : 16;
    p = teeny__malloc((size_t)want * elem);
    if (!p)
        return 0;
    if (n)
        memcpy(p, *arr, (size_t)n * elem);
    teeny__free(*arr);
    *arr = p;
    *cap = want;
    return 1;
}

const char *teeny__dims_str(const int64_t *shape, int ndim, char *buf, size_t cap)
{
    size_t len;
    if (!cap)
        return buf;
    len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

int teeny__utf8_valid(const void *text, size_t n, size_t *bad)
{
    const unsigned char *p = text;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
        if (!len || len > n - i)
            goto invalid;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                goto invalid;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        /* overlong forms, UTF-16 surrogates and code points past U+10FFFF */
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
            goto invalid;
        i += len;
        continue;
    invalid:
        if (bad)
            *bad = i;
        return 0;
    }
    return 1;
}

/* ---- strict numbers and the environment ---- */

int teeny__parse_int(const char *text, size_t len, long long lo, long long hi, long long *out, const char **why)
{
    const char *p = text, *end = text + len;
    unsigned long long v = 0;
    int neg = 0, big = 0;
    long long value;
    *why = "is not a decimal integer";
    if (p == end) {
        *why = "is empty";
        return 0;
    }
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p == end || !isdigit((unsigned char)*p))
        return 0; /* "+1", " 5", "abc", "-", "0x" after a sign... */
    for (; p < end && isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (ULLONG_MAX - d) / 10)
            big = 1;
        else
            v = v * 10 + d;
    }
    if (p != end)
        return 0; /* "12abc", "1e3", "0x10", "5 ", "1.0" */
    *why = "is out of range";
    if (big || v > (unsigned long long)LLONG_MAX + neg || (neg && lo >= 0)) /* "-0" too: no sign where none fits */
        return 0;
    value = neg ? (v ? -(long long)(v - 1) - 1 : 0) : (long long)v;
    if (value < lo || value > hi)
        return 0;
    *out = value;
    return 1;
}

int64_t teeny__mul_sizes(int64_t a, int64_t b)
{
    if (a < 0 || b < 0 || (a && b > INT64_MAX / a))
        return -1;
    return a * b;
}

int teeny__add_i64(int64_t a, int64_t b, int64_t *out)
{
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
        return 0;
    *out = a + b;
    return 1;
}

void teeny__slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *len)
{
    start = start < 0 ? (start < -dim ? -dim - 1 : start) + dim : start; /* no sum below INT64_MIN */
    end = end < 0 ? (end < -dim ? -dim - 1 : end) + dim : end;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        /* end - start <= dim: the count of whole steps, then one for the first */
        *len = end > start ? 1 + (end - start - 1) / step : 0;
    } else {
        start = start < 0 ? -1 : start > dim - 1 ? dim - 1 : start;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
        uint64_t down = (uint64_t)0 - (uint64_t)step; /* |step|, INT64_MIN included */
        *len = start > end ? 1 + (int64_t)((uint64_t)(start - end - 1) / down) : 0;
    }
    *first = start;
}

int64_t teeny__dims_product(const int64_t *dims, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n && p >= 0; i++)
        p = teeny__mul_sizes(p, dims[i]);
    return p;
}
