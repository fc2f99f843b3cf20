/*
 * teeny-bench -- benchmarks on one device. Every case is timed with OpenCL
 * profiling events (device time from the first kernel's start to the last
 * kernel's end): warm-up runs first, then the median of many runs.
 *
 * Usage: teeny-bench [--device SPEC] [--filter TEXT] [--reps N] [--warmup N] [--csv]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int bench_time(teeny_ctx *ctx, const bench_opts *o, bench_fn fn, void *arg, double *ms)
{
    double *t = malloc((size_t)o->reps * sizeof *t);
    teeny_status st = TEENY_OK;
    if (!t)
        return 1;
    for (int i = 0; i < o->warmup && st == TEENY_OK; i++)
        st = fn(ctx, arg);
    if (st == TEENY_OK)
        st = teeny_ctx_finish(ctx);
    for (int i = 0; i < o->reps && st == TEENY_OK; i++) {
        st = teeny_profile_begin(ctx);
        if (st == TEENY_OK)
            st = fn(ctx, arg);
        teeny_status st2 = teeny_profile_end(ctx, &t[i], NULL);
        if (st == TEENY_OK)
            st = st2;
    }
    if (st != TEENY_OK) {
        fprintf(stderr, "bench: %s: %s\n", teeny_status_name(st), teeny_last_error(ctx));
        free(t);
        return 1;
    }
    qsort(t, (size_t)o->reps, sizeof *t, cmp_double);
    *ms = t[o->reps / 2];
    free(t);
    return 0;
}

void bench_report(const bench_opts *o, const char *family, const char *name, const char *pass, double ms,
                  double flops, double bytes)
{
    if (o->csv) {
        printf("%s,%s,%s,%.5f,%.3f,%.3f\n", family, name, pass, ms, flops > 0 ? flops / ms * 1e-9 : 0.0,
               bytes > 0 ? bytes / ms * 1e-6 : 0.0);
    } else {
        printf("%-10s %-34s %-8s %10.4f ms", family, name, pass, ms);
        if (flops > 0)
            printf("  %10.1f GFLOP/s", flops / ms * 1e-6);
        if (bytes > 0)
            printf("  %8.1f GB/s", bytes / ms * 1e-6);
        printf("\n");
    }
    fflush(stdout);
}

int bench_wanted(const bench_opts *o, const char *name)
{
    return !o->filter || strstr(name, o->filter) != NULL;
}

teeny_tensor *bench_tensor(teeny_ctx *ctx, int ndim, const int64_t *shape, unsigned seed)
{
    teeny_tensor *t = NULL;
    if (teeny_tensor_create(ctx, ndim, shape, &t) != TEENY_OK)
        return NULL;
    size_t n = (size_t)teeny_tensor_numel(t);
    float *x = malloc(n * sizeof *x);
    if (!x) {
        teeny_tensor_destroy(t);
        return NULL;
    }
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 8388608.0f - 1.0f;
    }
    teeny_status st = teeny_tensor_write(t, x, n);
    free(x);
    if (st != TEENY_OK) {
        teeny_tensor_destroy(t);
        return NULL;
    }
    return t;
}

int main(int argc, char **argv)
{
    bench_opts o = {NULL, 5, 30, 0};
    const char *spec = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            spec = argv[++i];
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            o.filter = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            o.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            o.warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--csv"))
            o.csv = 1;
        else {
            fprintf(stderr, "usage: %s [--device SPEC] [--filter TEXT] [--reps N] [--warmup N] [--csv]\n", argv[0]);
            return 2;
        }
    }
    if (o.reps < 1)
        o.reps = 1;
    teeny_ctx *ctx = NULL;
    if (teeny_ctx_create(spec, &ctx) != TEENY_OK) {
        fprintf(stderr, "%s\n", teeny_last_error(NULL));
        return 1;
    }
    if (!o.csv)
        printf("teeny-bench %s on %s (median of %d after %d warm-up runs, device time from profiling events)\n",
               teeny_version_string(), teeny_ctx_device_name(ctx), o.reps, o.warmup);
    else
        printf("family,case,pass,ms,gflops,gbps\n");
    int failed = 0;
#define XX(f) failed |= bench_##f(ctx, &o);
    BENCH_FAMILIES(XX)
#undef XX
    teeny_ctx_destroy(ctx);
    return failed;
}
