/*
 * bench.h -- what the benchmark families of teeny-bench share: timing by
 * OpenCL profiling events (warm-up runs, then the median of many), result
 * printing, and data helpers. One file per family: tools/bench_<family>.c
 * defines bench_<family>() and is listed in BENCH_FAMILIES below.
 */
#ifndef TEENY_BENCH_H
#define TEENY_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "teenycl.h"

typedef struct {
    const char *filter; /* run cases whose name contains this (NULL: all) */
    int warmup, reps;
    int csv;
} bench_opts;

/* One timed thing: enqueue it once, return a status. */
typedef teeny_status (*bench_fn)(teeny_ctx *ctx, void *arg);

/* Run fn warmup times, then reps times each between teeny_profile_begin
 * and teeny_profile_end; the median device time in ms goes to *ms.
 * Returns nonzero (after printing why) on failure. */
int bench_time(teeny_ctx *ctx, const bench_opts *o, bench_fn fn, void *arg, double *ms);
/* Print one result row: family, case name, pass (fwd/bwd/...), ms and the
 * rate (flops or bytes per second; 0 to omit). */
void bench_report(const bench_opts *o, const char *family, const char *name, const char *pass, double ms,
                  double flops, double bytes);
int bench_wanted(const bench_opts *o, const char *name);
/* A tensor of the shape filled with uniform values in [-1, 1); NULL on error. */
teeny_tensor *bench_tensor(teeny_ctx *ctx, int ndim, const int64_t *shape, unsigned seed);

#define BENCH_FAMILIES(XX) \
    XX(batchnorm) \
    XX(conv2d) \
    XX(attention)

#define XX(f) int bench_##f(teeny_ctx *ctx, const bench_opts *o);
BENCH_FAMILIES(XX)
#undef XX

#endif
