/*
 * bench_batchnorm.c -- batch-norm training forward, backward and the two
 * together on conv-net activation shapes. Memory-bound: what counts is
 * the compulsory traffic as a share of the copy bandwidth. Per element of
 * x (n elements, C channels):
 *   fwd  x read, y written: 8n bytes (+ 32C: weight, bias, the running
 *        statistics read and written, mean and rstd written); 5 flops
 *        (sum, sum of squares, scale-and-shift);
 *   bwd  x, dy read, dx written: 12n bytes (+ 20C); 11 flops (x-hat,
 *        the two sums, dx);
 *   fwd+bwd  the sum of both (x is read by each pass).
 * A two-pass forward reads x twice and so reaches at most 2/3 of the copy
 * bandwidth on this count; one that holds x on-chip can reach all of it.
 */
#include <inttypes.h>
#include <stdio.h>

#include "bench.h"

typedef struct {
    teeny_tensor *x, *y, *dy, *dx, *w, *b, *rm, *rv, *m, *r, *dw, *db;
} bn_args;

static teeny_status fwd(teeny_ctx *ctx, void *p)
{
    bn_args *a = p;
    return teeny_batchnorm_forward_train(ctx, a->x, a->w, a->b, a->rm, a->rv, 0.1f, 1e-5f, a->y, a->m, a->r);
}

static teeny_status bwd(teeny_ctx *ctx, void *p)
{
    bn_args *a = p;
    return teeny_batchnorm_backward_train(ctx, a->x, a->dy, a->w, a->m, a->r, a->dx, a->dw, a->db);
}

static teeny_status fwd_bwd(teeny_ctx *ctx, void *p)
{
    teeny_status st = fwd(ctx, p);
    return st == TEENY_OK ? bwd(ctx, p) : st;
}

int bench_batchnorm(teeny_ctx *ctx, const bench_opts *o)
{
    static const struct {
        const char *name;
        int64_t shape[4];
    } cases[] = {
        {"bn2d_resnet_64x56x56_b32", {32, 64, 56, 56}},
        {"bn2d_256x14x14_b32", {32, 256, 14, 14}},
        {"bn2d_fashion_32x28x28_b128", {128, 32, 28, 28}},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!bench_wanted(o, cases[i].name))
            continue;
        int64_t c[1] = {cases[i].shape[1]};
        bn_args a = {0};
        a.x = bench_tensor(ctx, 4, cases[i].shape, 1);
        a.dy = bench_tensor(ctx, 4, cases[i].shape, 2);
        a.y = bench_tensor(ctx, 4, cases[i].shape, 3);
        a.dx = bench_tensor(ctx, 4, cases[i].shape, 4);
        teeny_tensor **v[] = {&a.w, &a.b, &a.rm, &a.rv, &a.m, &a.r, &a.dw, &a.db};
        for (int j = 0; j < 8; j++)
            *v[j] = bench_tensor(ctx, 1, c, 10 + (unsigned)j);
        double n = (double)teeny_tensor_numel(a.x), ch = (double)c[0];
        char shape[192];
        snprintf(shape, sizeof shape,
                 "{\"op\": \"batchnorm2d\", \"x\": [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "], "
                 "\"momentum\": 0.1, \"eps\": 1e-05}",
                 cases[i].shape[0], cases[i].shape[1], cases[i].shape[2], cases[i].shape[3]);
        bench_case fc = {"batchnorm", cases[i].name, "fwd", shape, 5 * n, 8 * n + 32 * ch};
        bench_case bc = {"batchnorm", cases[i].name, "bwd", shape, 11 * n, 12 * n + 20 * ch};
        bench_case fbc = {"batchnorm", cases[i].name, "fwd+bwd", shape, fc.flops + bc.flops, fc.bytes + bc.bytes};
        if (!a.x || !a.dy || !a.y || !a.dx || !a.w || !a.b || !a.rm || !a.rv || !a.m || !a.r || !a.dw || !a.db) {
            bench_report_error(o, &fc, "allocation failed");
            failed = 1;
        } else if (teeny_tensor_fill(a.rv, 1.0f) != TEENY_OK) {
            bench_report_error(o, &fc, teeny_last_error(ctx));
            failed = 1;
        } else {
            failed |= bench_run(ctx, o, &fc, fwd, &a);
            failed |= bench_run(ctx, o, &bc, bwd, &a);
            failed |= bench_run(ctx, o, &fbc, fwd_bwd, &a);
        }
        teeny_tensor *all[] = {a.x, a.y, a.dy, a.dx, a.w, a.b, a.rm, a.rv, a.m, a.r, a.dw, a.db};
        for (int j = 0; j < 12; j++)
            teeny_tensor_destroy(all[j]);
    }
    return failed;
}
