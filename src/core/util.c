/*
 * util.c -- the library's small host helpers, one copy of each: bounded
 * string copy, case-insensitive substring search (device and vendor names),
 * FNV-1a 64 (kernel-cache keys and checkpoint checksums), growing an array
 * by doubling, overflow-checked size products, and "[2, 3, 4]" shape text
 * for error messages. No OpenCL and
 * no context here: every other layer may call them.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

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

int64_t teeny__mul_sizes(int64_t a, int64_t b)
{
    if (a < 0 || b < 0 || (a && b > INT64_MAX / a))
        return -1;
    return a * b;
}

int64_t teeny__dims_product(const int64_t *dims, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n && p >= 0; i++)
        p = teeny__mul_sizes(p, dims[i]);
    return p;
}
