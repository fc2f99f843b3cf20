/*
 * bench_attention.c -- flash attention forward and forward+backward on
 * transformer and YOLO-PSA shapes (D_v = D), and the fused PSA attention
 * on the NCHW qkv tensor. Flops: 2*BH*Nq*Nk*(D + Dv) forward (4*BH*N*N*D
 * when Dv = D), the backward counted as 2.5 times the forward. Bytes, the
 * compulsory traffic: forward q, k, v read, o and lse written; backward
 * q, k, v, o, lse, dO read, dq, dk, dv written.
 *
 * Each case has a batch B and a head count H: teenycl's [B*H, N, D] is
 * the memory of PyTorch's [B, H, N, D], which bench/compare_torch.py
 * hands to scaled_dot_product_attention, as PyTorch models call it. The
 * causal cases (teeny_attention_forward_ex with causal = 1; PyTorch's
 * is_causal=True) count the flops of the visible scores only, N(N+1)/2
 * of the N^2.
 */
#include <math.h>
#include <stdio.h>

#include "bench.h"

typedef struct {
    teeny_tensor *q, *k, *v, *o, *lse, *g, *dq, *dk, *dv;
    teeny_attention_params p;
} at_args;

static teeny_status fwd(teeny_ctx *ctx, void *p)
{
    at_args *a = p;
    return teeny_attention_forward_ex(ctx, a->q, a->k, a->v, NULL, &a->p, a->o, a->lse);
}

static teeny_status fwd_bwd(teeny_ctx *ctx, void *p)
{
    at_args *a = p;
    teeny_status st = fwd(ctx, p);
    if (st == TEENY_OK)
        st = teeny_attention_backward_ex(ctx, a->q, a->k, a->v, NULL, &a->p, a->o, a->lse, a->g, a->dq, a->dk, a->dv);
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

int bench_attention(teeny_ctx *ctx, const bench_opts *o)
{
    static const struct {
        const char *name;
        int b, heads, n, d, causal;
    } cases[] = {
        {"attn_bh128_n400_d32", 32, 4, 400, 32, 0}, /* YOLO PSA size: B 32, 4 heads, 20 x 20 tokens */
        {"attn_bh64_n1600_d32", 16, 4, 1600, 32, 0},
        {"attn_bh32_n4096_d64", 4, 8, 4096, 64, 0},
        {"attn_bh64_n1024_d64", 8, 8, 1024, 64, 0},
        {"attn_causal_bh32_n4096_d64", 4, 8, 4096, 64, 1},
        {"attn_causal_bh64_n1024_d64", 8, 8, 1024, 64, 1},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!bench_wanted(o, cases[i].name))
            continue;
        int bh = cases[i].b * cases[i].heads;
        int64_t qs[3] = {bh, cases[i].n, cases[i].d}, ls[2] = {bh, cases[i].n};
        at_args a = {0};
        a.p = (teeny_attention_params)TEENY_ATTENTION_PARAMS_INIT;
        a.p.scale = (float)(1.0 / sqrt((double)cases[i].d));
        a.p.causal = cases[i].causal;
        a.q = bench_tensor(ctx, 3, qs, 1);
        a.k = bench_tensor(ctx, 3, qs, 2);
        a.v = bench_tensor(ctx, 3, qs, 3);
        a.g = bench_tensor(ctx, 3, qs, 4);
        a.o = bench_tensor(ctx, 3, qs, 5);
        a.dq = bench_tensor(ctx, 3, qs, 6);
        a.dk = bench_tensor(ctx, 3, qs, 7);
        a.dv = bench_tensor(ctx, 3, qs, 8);
        a.lse = bench_tensor(ctx, 2, ls, 9);
        double n = cases[i].n, qkvo = (double)bh * n * cases[i].d, lse = (double)bh * n;
        double flops = 4.0 * bh * (cases[i].causal ? n * (n + 1) / 2 : n * n) * cases[i].d;
        char shape[160];
        snprintf(shape, sizeof shape,
                 "{\"op\": \"attention\", \"b\": %d, \"heads\": %d, \"n\": %d, \"d\": %d, \"dv\": %d, "
                 "\"causal\": %d}",
                 cases[i].b, cases[i].heads, cases[i].n, cases[i].d, cases[i].d, cases[i].causal);
        bench_case fc = {"attention", cases[i].name, "fwd", shape, flops, 4 * (4 * qkvo + lse)};
        bench_case fbc = {"attention", cases[i].name, "fwd+bwd", shape, 3.5 * flops,
                          fc.bytes + 4 * (8 * qkvo + lse)};
        if (!a.q || !a.k || !a.v || !a.g || !a.o || !a.dq || !a.dk || !a.dv || !a.lse) {
            bench_report_error(o, &fc, "allocation failed");
            failed = 1;
        } else {
            failed |= bench_run(ctx, o, &fc, fwd, &a);
            failed |= bench_run(ctx, o, &fbc, fwd_bwd, &a);
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
        double n = (double)H * W, flops = 2.0 * B * heads * n * n * (kd + 2 * kd);
        double nqkv = (double)B * heads * 4 * kd * n, no = (double)B * heads * 2 * kd * n, nl = (double)B * heads * n;
        char shape[160];
        snprintf(shape, sizeof shape,
                 "{\"op\": \"psa_attention\", \"b\": %d, \"heads\": %d, \"key_dim\": %d, \"h\": %d, \"w\": %d}",
                 B, heads, kd, H, W);
        bench_case fc = {"attention", psa_name, "fwd", shape, flops, 4 * (nqkv + no + nl)};
        bench_case fbc = {"attention", psa_name, "fwd+bwd", shape, 3.5 * flops,
                          fc.bytes + 4 * (2 * nqkv + 2 * no + nl)};
        if (!a.qkv || !a.dqkv || !a.o || !a.g || !a.lse) {
            bench_report_error(o, &fc, "allocation failed");
            failed = 1;
        } else {
            failed |= bench_run(ctx, o, &fc, psa_fwd, &a);
            failed |= bench_run(ctx, o, &fbc, psa_fwd_bwd, &a);
        }
        teeny_tensor *all[] = {a.qkv, a.dqkv, a.o, a.g, a.lse};
        for (int j = 0; j < 5; j++)
            teeny_tensor_destroy(all[j]);
    }
    return failed;
}
