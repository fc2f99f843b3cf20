/*
 * bench_attention.c -- flash attention forward and forward+backward on
 * transformer and YOLO-PSA shapes (D_v = D), and the fused PSA attention
 * on the NCHW qkv tensor. Reported in ms and TFLOP/s, counting
 * 2*BH*Nq*Nk*(D + Dv) flops forward (4*BH*N*N*D when Dv = D) and the
 * backward as 2.5 times the forward. bench/torch_attention.py times
 * PyTorch's scaled_dot_product_attention on the same case names.
 */
#include <math.h>
#include <stdio.h>

#include "bench.h"

typedef struct {
    teeny_tensor *q, *k, *v, *o, *lse, *g, *dq, *dk, *dv;
    float scale;
} at_args;

static teeny_status fwd(teeny_ctx *ctx, void *p)
{
    at_args *a = p;
    return teeny_attention_forward(ctx, a->q, a->k, a->v, a->scale, a->o, a->lse);
}

static teeny_status fwd_bwd(teeny_ctx *ctx, void *p)
{
    at_args *a = p;
    teeny_status st = teeny_attention_forward(ctx, a->q, a->k, a->v, a->scale, a->o, a->lse);
    if (st == TEENY_OK)
        st = teeny_attention_backward(ctx, a->q, a->k, a->v, a->o, a->lse, a->g, a->scale, a->dq, a->dk, a->dv);
    return st;
}

typedef struct {
    teeny_tensor *qkv, *o, *lse, *g, *dqkv;
    int heads, kd;
} psa_args;

static teeny_status psa_fwd(teeny_ctx *ctx, void *p)
{
    psa_args *a = p;
    return teeny_psa_attention_forward(ctx, a->qkv, a->heads, a->kd, a->o, a->lse);
}

static teeny_status psa_fwd_bwd(teeny_ctx *ctx, void *p)
{
    psa_args *a = p;
    teeny_status st = teeny_psa_attention_forward(ctx, a->qkv, a->heads, a->kd, a->o, a->lse);
    if (st == TEENY_OK)
        st = teeny_psa_attention_backward(ctx, a->qkv, a->heads, a->kd, a->o, a->lse, a->g, a->dqkv);
    return st;
}

static void report(const bench_opts *o, const char *name, const char *pass, double ms, double flops)
{
    if (o->csv)
        bench_report(o, "attention", name, pass, ms, flops, 0);
    else {
        printf("%-10s %-34s %-8s %10.4f ms  %8.2f TFLOP/s\n", "attention", name, pass, ms, flops / ms * 1e-9);
        fflush(stdout);
    }
}

static int run_pair(teeny_ctx *ctx, const bench_opts *o, const char *name, bench_fn f1, bench_fn f2, void *arg,
                    double flops)
{
    double ms;
    int failed = 0;
    if (!bench_time(ctx, o, f1, arg, &ms))
        report(o, name, "fwd", ms, flops);
    else
        failed = 1;
    if (!bench_time(ctx, o, f2, arg, &ms))
        report(o, name, "fwd+bwd", ms, 3.5 * flops);
    else
        failed = 1;
    return failed;
}

int bench_attention(teeny_ctx *ctx, const bench_opts *o)
{
    static const struct {
        const char *name;
        int bh, n, d;
    } cases[] = {
        {"attn_bh128_n400_d32", 128, 400, 32}, /* YOLO PSA size */
        {"attn_bh64_n1600_d32", 64, 1600, 32},
        {"attn_bh32_n4096_d64", 32, 4096, 64},
        {"attn_bh64_n1024_d64", 64, 1024, 64},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!bench_wanted(o, cases[i].name))
            continue;
        int64_t qs[3] = {cases[i].bh, cases[i].n, cases[i].d}, ls[2] = {cases[i].bh, cases[i].n};
        at_args a = {0};
        a.scale = (float)(1.0 / sqrt((double)cases[i].d));
        a.q = bench_tensor(ctx, 3, qs, 1);
        a.k = bench_tensor(ctx, 3, qs, 2);
        a.v = bench_tensor(ctx, 3, qs, 3);
        a.g = bench_tensor(ctx, 3, qs, 4);
        a.o = bench_tensor(ctx, 3, qs, 5);
        a.dq = bench_tensor(ctx, 3, qs, 6);
        a.dk = bench_tensor(ctx, 3, qs, 7);
        a.dv = bench_tensor(ctx, 3, qs, 8);
        a.lse = bench_tensor(ctx, 2, ls, 9);
        if (!a.q || !a.k || !a.v || !a.g || !a.o || !a.dq || !a.dk || !a.dv || !a.lse) {
            fprintf(stderr, "bench %s: allocation failed\n", cases[i].name);
            failed = 1;
        } else {
            double flops = 4.0 * cases[i].bh * (double)cases[i].n * cases[i].n * cases[i].d;
            failed |= run_pair(ctx, o, cases[i].name, fwd, fwd_bwd, &a, flops);
        }
        teeny_tensor *all[] = {a.q, a.k, a.v, a.g, a.o, a.dq, a.dk, a.dv, a.lse};
        for (int j = 0; j < 9; j++)
            teeny_tensor_destroy(all[j]);
    }

    /* fused PSA attention: B = 32, 4 heads, key_dim 32, 20 x 20 tokens */
    static const char psa_name[] = "psa_b32_h4_kd32_20x20";
    if (bench_wanted(o, psa_name)) {
        const int B = 32, heads = 4, kd = 32, H = 20, W = 20;
        int64_t qs[4] = {B, heads * 4 * kd, H, W}, os[4] = {B, heads * 2 * kd, H, W}, ls[2] = {B * heads, H * W};
        psa_args a = {0};
        a.heads = heads;
        a.kd = kd;
        a.qkv = bench_tensor(ctx, 4, qs, 11);
        a.dqkv = bench_tensor(ctx, 4, qs, 12);
        a.o = bench_tensor(ctx, 4, os, 13);
        a.g = bench_tensor(ctx, 4, os, 14);
        a.lse = bench_tensor(ctx, 2, ls, 15);
        if (!a.qkv || !a.dqkv || !a.o || !a.g || !a.lse) {
            fprintf(stderr, "bench %s: allocation failed\n", psa_name);
            failed = 1;
        } else {
            double n = (double)H * W, flops = 2.0 * B * heads * n * n * (kd + 2 * kd);
            failed |= run_pair(ctx, o, psa_name, psa_fwd, psa_fwd_bwd, &a, flops);
        }
        teeny_tensor *all[] = {a.qkv, a.dqkv, a.o, a.g, a.lse};
        for (int j = 0; j < 5; j++)
            teeny_tensor_destroy(all[j]);
    }
    return failed;
}
