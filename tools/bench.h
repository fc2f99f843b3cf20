/*
 * bench.h -- what the benchmark families of teeny-bench share: timing by
 * OpenCL profiling events (warm-up runs, then the median of many), the
 * device's measured peaks (bench_peak.c), result printing (text, CSV or
 * JSON lines), and data helpers. One file per family: tools/bench_<family>.c
 * defines bench_<family>() and is listed in BENCH_FAMILIES below.
 *
 * Every case reports two rates and sets each against a measured ceiling
 * of the same device in the same run:
 *   bytes  the compulsory traffic: every input read once, every output
 *          written once (an algorithm that reads x twice moves more, and
 *          its % of copy bandwidth says how far it is from the floor);
 *   flops  the algorithm's arithmetic as each family's banner counts it;
 *   % copy  (bytes / time) / the measured copy bandwidth (read + write);
 *   % fma   (flops / time) / the measured FMA-chain rate.
 * A case cannot beat a true ceiling: a share above 100% is a measurement
 * error (or, for bytes, a working set that stayed in a cache) and is
 * flagged, never printed as a figure (bench_report).
 *
 * The files call one way only: teeny-bench.c (main) -> the families and
 * bench_peak.c -> bench_util.c (the functions up to bench_json_str
 * below), which calls none of them (tools/check-layers.sh checks it).
 */
#ifndef TEENY_BENCH_H
#define TEENY_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "teenycl.h"

typedef enum { BENCH_TEXT, BENCH_CSV, BENCH_JSON } bench_format;

typedef struct {
    const char *filter; /* run cases whose name contains one of these, comma-separated (NULL: all) */
    int warmup, reps;
    bench_format format;
    double copy_gbps;   /* measured copy bandwidth, GB/s (read + write); 0: not measured */
    double fma_gflops;  /* measured FMA-chain rate, GFLOP/s; 0: not measured */
    int list_only;      /* --list: print each case's row without timing it */
    int tf32;           /* --tf32: teeny_ctx_set_tf32(ctx, 1) and the device runs it (teeny_ctx_tf32_active) */
    int loop;           /* --loop: each case also timed as reps runs back to back by the host's clock */
} bench_opts;

/* One timed thing: enqueue it once, return a status. */
typedef teeny_status (*bench_fn)(teeny_ctx *ctx, void *arg);

/* One result row. shape is a JSON object's text describing the case
 * completely enough for another tool to rebuild it (bench/compare_torch.py
 * does): {"op": "...", ...}. */
typedef struct {
    const char *family, *name, *pass; /* pass: "fwd", "bwd", "fwd+bwd" */
    const char *shape;
    double flops, bytes;              /* per run; 0: not counted */
} bench_case;

/* Run fn warmup times, then reps times each between teeny_profile_begin
 * and teeny_profile_end; the median device time in ms goes to *ms. With
 * o->loop, then reps runs back to back without profiling events, the
 * queue drained before and after, by the host's clock: the time per run
 * in *loop_ms (what a loop of calls takes, launch costs included but not
 * the events' own; -1 without o->loop). Returns nonzero (after printing
 * why) on failure. */
int bench_time(teeny_ctx *ctx, const bench_opts *o, bench_fn fn, void *arg, double *ms, double *loop_ms);
/* Time fn and print its row (or, on failure, a row that says so: an
 * object with "error" in JSON). Returns nonzero on failure. */
int bench_run(teeny_ctx *ctx, const bench_opts *o, const bench_case *c, bench_fn fn, void *arg);
/* Print one result row with its rates and their share of the peaks, and
 * loop_ms where it is >= 0 (bench_time). */
void bench_report(const bench_opts *o, const bench_case *c, double ms, double loop_ms);
/* The host's monotonic clock in ms. */
double bench_wall_ms(void);
/* Print a row for a case that could not run (why: one line of text). */
void bench_report_error(const bench_opts *o, const bench_case *c, const char *why);
int bench_wanted(const bench_opts *o, const char *name);
/* Sort n times ascending (the median is then t[n / 2]). */
void bench_sort(double *t, int n);
/* A tensor of the shape filled with uniform values in [-1, 1); NULL on error. */
teeny_tensor *bench_tensor(teeny_ctx *ctx, int ndim, const int64_t *shape, unsigned seed);
/* Print s as a JSON string: quoted, quotes and control characters escaped. */
void bench_json_str(const char *s);

/* The device's ceilings, measured with kernels of our own on the
 * context's queue (bench_peak.c). */
typedef struct {
    double copy_gbps;          /* the better of the two below */
    double copy_kernel_gbps;   /* a float4 copy kernel */
    double copy_enqueue_gbps;  /* clEnqueueCopyBuffer */
    size_t copy_bytes;         /* size of the buffer copied */
    double fma_gflops;         /* the best FMA-chain variant */
    int fma_vec;               /* its vector width (1 .. 16) */
    size_t fma_global, fma_local;
    int fma_chains;            /* its independent chains per work-item */
    const char *fma_op;        /* its operation: "fma" or "mad" */
    int fma_variants, fma_runs; /* FMA kernels measured; launches each (the best counts) */
} bench_peaks;

/* Measure both ceilings (warm-up, then the median of o->reps, at least 5).
 * Returns nonzero after printing why on failure. */
int bench_measure_peaks(teeny_ctx *ctx, const bench_opts *o, bench_peaks *out);

#define BENCH_FAMILIES(XX) \
    XX(batchnorm) \
    XX(conv2d) \
    XX(attention) \
    XX(train)

#define XX(f) int bench_##f(teeny_ctx *ctx, const bench_opts *o);
BENCH_FAMILIES(XX)
#undef XX

#endif
