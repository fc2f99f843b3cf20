/*
 * bench_batchnorm.c -- batch-norm training forward and backward on
 * conv-net activation shapes; reported as effective memory bandwidth
 * (bytes each pass must move at least once).
 */
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
        double ms, n = (double)teeny_tensor_numel(a.x) * 4;
        if (!a.x || !a.dy || !a.y || !a.dx || !a.db) {
            fprintf(stderr, "bench %s: allocation failed\n", cases[i].name);
            failed = 1;
        } else {
            teeny_tensor_fill(a.rv, 1.0f);
            if (!bench_time(ctx, o, fwd, &a, &ms))
                bench_report(o, "batchnorm", cases[i].name, "fwd", ms, 0, 3 * n); /* read x twice, write y */
            else
                failed = 1;
            if (!bench_time(ctx, o, bwd, &a, &ms))
                bench_report(o, "batchnorm", cases[i].name, "bwd", ms, 0, 5 * n); /* x, dy twice; dx */
            else
                failed = 1;
        }
        teeny_tensor *all[] = {a.x, a.y, a.dy, a.dx, a.w, a.b, a.rm, a.rv, a.m, a.r, a.dw, a.db};
        for (int j = 0; j < 12; j++)
            teeny_tensor_destroy(all[j]);
    }
    return failed;
}
