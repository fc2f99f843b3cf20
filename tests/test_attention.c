/*
 * test_attention.c -- flash attention forward and backward against the
 * float64 reference (tests/ref/attention_ref.c): a seeded sweep of shapes
 * (BH, Nq != Nk, head dims D and Dv = D or 2D, scales, views at odd
 * offsets), the log-sum-exp, large-magnitude logits, determinism, launch
 * and allocation counts, optional gradients, finite differences of the
 * reference, every error path, and the tf32 tensor-core kernels where the
 * device has them.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clwrap.h"
#include "internal.h"
#include "harness.h"
#include "ops/attention/attention_internal.h"
#include "ops/ops.h"
#include "ref/attention_ref.h"

#define TOL 1e-5
#define TOL_TF32 1e-3 /* teeny_ctx_set_tf32: the bound on normalized RMS error */
static double check_tol = TOL; /* what check_forward / check_backward allow: TOL_TF32 under test_attention_tf32 */

typedef struct {
    int BH, Nq, Nk, D, Dv;
    float scale;
    int view; /* every tensor lives at an odd offset inside a larger one */
} at_shape;

static const int seq_lens[] = {1, 2, 7, 16, 49, 64, 100, 257, 400, 1024};
#define N_LENS ((int)(sizeof seq_lens / sizeof seq_lens[0]))

static void shape_str(const at_shape *s, uint64_t seed, char *buf, size_t cap)
{
    snprintf(buf, cap, "attention BH %d Nq %d Nk %d D %d Dv %d scale %.9g%s seed %llu", s->BH, s->Nq, s->Nk, s->D,
             s->Dv, (double)s->scale, s->view ? " (views)" : "", (unsigned long long)seed);
}

static double shape_cost(const at_shape *s)
{
    return (double)s->BH * s->Nq * s->Nk * (s->D + s->Dv);
}

/* Shape i of the sweep. Long sequences come with small BH and head dims so
 * that no case costs more than ~3.5e7 multiply-adds. */
static at_shape sweep_shape(th_rng *r, int i)
{
    static const int dims[] = {8, 16, 32, 64, 128};
    at_shape s;
    int qi = th_int(r, 0, N_LENS - 1), ki = th_int(r, 0, N_LENS - 1), di = th_int(r, 0, 4);
    s.BH = th_int(r, 1, 8);
    s.D = dims[di];
    s.Dv = th_int(r, 0, 1) ? 2 * s.D : s.D;
    s.view = i % 3 == 0;
    while (1) {
        s.Nq = seq_lens[qi];
        s.Nk = seq_lens[ki];
        if (shape_cost(&s) <= 3.5e7)
            break;
        if (s.BH > 1)
            s.BH = (s.BH + 1) / 2;
        else if (s.D > 8 && (qi < 8 && ki < 8)) {
            s.D /= 2;
            s.Dv /= 2;
        } else if (qi >= ki)
            qi--;
        else
            ki--;
    }
    switch (th_int(r, 0, 5)) {
    case 0: s.scale = 1.0f; break;
    case 1: s.scale = (float)th_uniform(r, 0.01, 0.5); break;
    case 2: s.scale = -0.25f; break;
    default: s.scale = (float)(1.0 / sqrt((double)s.D)); break;
    }
    return s;
}

static at_shape small_shape(int i)
{
    static const at_shape s[] = {{1, 1, 1, 8, 8, 0.5f, 0},   {2, 7, 16, 16, 32, 0.25f, 1},
                                 {1, 16, 7, 32, 32, 0.2f, 0}, {3, 2, 49, 8, 16, 1.0f, 1},
                                 {1, 9, 33, 64, 64, 0.1f, 0}, {1, 5, 3, 128, 256, 0.09f, 1}};
    return s[i % 6];
}

static void expect_close_mag(const teeny_tensor *t, const double *ref, const double *mag, size_t n, double tol,
                             const char *what, const char *repro)
{
    float *out = th_read(t);
    long bad = th_first_nonfinite(out, n);
    ck_assert_msg(bad < 0, "%s: element %ld not written or not finite (%g); %s", what, bad,
                  bad >= 0 ? (double)out[bad] : 0.0, repro);
    double e = mag ? th_nrms_mag(out, ref, mag, n) : th_nrms(out, ref, n);
    ck_assert_msg(e <= tol, "%s: nrms %.3g > %.1g; %s", what, e, tol, repro);
    free(out);
}

/* ---- one case ---- */

typedef struct {
    at_shape s;
    size_t nq, nk, nv, no, nl;
    float *q, *k, *v, *g;
} at_case;

static void case_make(at_case *c, const at_shape *s, th_rng *r)
{
    c->s = *s;
    c->nq = (size_t)s->BH * s->Nq * s->D;
    c->nk = (size_t)s->BH * s->Nk * s->D;
    c->nv = (size_t)s->BH * s->Nk * s->Dv;
    c->no = (size_t)s->BH * s->Nq * s->Dv;
    c->nl = (size_t)s->BH * s->Nq;
    c->q = th_malloc(c->nq * sizeof(float));
    c->k = th_malloc(c->nk * sizeof(float));
    c->v = th_malloc(c->nv * sizeof(float));
    c->g = th_malloc(c->no * sizeof(float));
    th_fill_normal(r, c->q, c->nq, 0, 1);
    th_fill_normal(r, c->k, c->nk, 0, 1);
    th_fill_normal(r, c->v, c->nv, th_uniform(r, -1, 1), 1);
    th_fill_normal(r, c->g, c->no, 0, 1);
}

static void case_free(at_case *c)
{
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->g);
}

typedef struct {
    th_dev q, k, v, o, lse, g, dq, dk, dv;
} at_dev;

static void dev_inputs(teeny_ctx *ctx, const at_case *c, at_dev *d)
{
    const at_shape *s = &c->s;
    int64_t qs[3] = {s->BH, s->Nq, s->D}, ks[3] = {s->BH, s->Nk, s->D}, vs[3] = {s->BH, s->Nk, s->Dv};
    int64_t os[3] = {s->BH, s->Nq, s->Dv}, ls[2] = {s->BH, s->Nq};
    memset(d, 0, sizeof *d);
    d->q = th_dev_make(ctx, 0, 3, qs, (s->view) ? 3 : 0, c->q);
    d->k = th_dev_make(ctx, 0, 3, ks, (s->view) ? 3 : 0, c->k);
    d->v = th_dev_make(ctx, 0, 3, vs, (s->view) ? 3 : 0, c->v);
    d->o = th_dev_make(ctx, 0, 3, os, (s->view) ? 3 : 0, NULL);
    d->lse = th_dev_make(ctx, 0, 2, ls, (s->view) ? 3 : 0, NULL);
}

static void dev_free_all(at_dev *d)
{
    th_dev *all[] = {&d->q, &d->k, &d->v, &d->o, &d->lse, &d->g, &d->dq, &d->dk, &d->dv};
    for (int i = 0; i < 9; i++)
        th_dev_free(all[i]);
}

/* Per query row: |scale| max_j sum_d |q_d k_jd|, the scores' magnitude. */
static double *score_mag(const at_case *c)
{
    const at_shape *s = &c->s;
    double *m = th_malloc(c->nl * sizeof *m);
    for (int b = 0; b < s->BH; b++)
        for (int i = 0; i < s->Nq; i++) {
            double best = 0;
            for (int j = 0; j < s->Nk; j++) {
                double a = 0;
                for (int d = 0; d < s->D; d++)
                    a += fabs((double)c->q[((size_t)b * s->Nq + i) * s->D + d] *
                              c->k[((size_t)b * s->Nk + j) * s->D + d]);
                best = a > best ? a : best;
            }
            m[(size_t)b * s->Nq + i] = fabs((double)s->scale) * best;
        }
    return m;
}

static void check_forward(const at_case *c, const char *repro)
{
    teeny_ctx *ctx = th_ctx();
    const at_shape *s = &c->s;
    at_dev d;
    double *q = th_dbl(c->q, c->nq), *k = th_dbl(c->k, c->nk), *v = th_dbl(c->v, c->nv);
    double *o = th_malloc(c->no * sizeof *o), *lse = th_malloc(c->nl * sizeof *lse);
    dev_inputs(ctx, c, &d);
    TH_OK(ctx, teeny_attention_forward(ctx, d.q.t, d.k.t, d.v.t, s->scale, d.o.t, d.lse.t));
    ref_attention_forward(q, k, v, s->BH, s->Nq, s->Nk, s->D, s->Dv, (double)s->scale, o, lse);
    expect_close_mag(d.o.t, o, NULL, c->no, check_tol, "o", repro);
    /* tf32: each score carries the rounding of its inputs, ~1e-3 of
     * scale * sum |q_d k_d|, which is what an lse is measured against */
    double *lmag = check_tol > TOL ? score_mag(c) : NULL;
    expect_close_mag(d.lse.t, lse, lmag, c->nl, check_tol, "lse", repro);
    free(lmag);
    th_dev_check_guard(&d.o, "o", repro);
    th_dev_check_guard(&d.lse, "lse", repro);
    /* without lse: the same o */
    th_poison(d.o.t);
    TH_OK(ctx, teeny_attention_forward(ctx, d.q.t, d.k.t, d.v.t, s->scale, d.o.t, NULL));
    expect_close_mag(d.o.t, o, NULL, c->no, check_tol, "o (lse NULL)", repro);
    dev_free_all(&d);
    free(q);
    free(k);
    free(v);
    free(o);
    free(lse);
}

static void check_backward(const at_case *c, const char *repro)
{
    teeny_ctx *ctx = th_ctx();
    const at_shape *s = &c->s;
    at_dev d;
    int64_t qs[3] = {s->BH, s->Nq, s->D}, ks[3] = {s->BH, s->Nk, s->D}, vs[3] = {s->BH, s->Nk, s->Dv};
    int64_t os[3] = {s->BH, s->Nq, s->Dv};
    double *q = th_dbl(c->q, c->nq), *k = th_dbl(c->k, c->nk), *v = th_dbl(c->v, c->nv), *g = th_dbl(c->g, c->no);
    double *dq = th_malloc(c->nq * sizeof *dq), *dk = th_malloc(c->nk * sizeof *dk), *dv = th_malloc(c->nv * sizeof *dv);
    double *mq = th_malloc(c->nq * sizeof *mq), *mk = th_malloc(c->nk * sizeof *mk), *mv = th_malloc(c->nv * sizeof *mv);
    dev_inputs(ctx, c, &d);
    d.g = th_dev_make(ctx, 0, 3, os, (s->view) ? 3 : 0, c->g);
    d.dq = th_dev_make(ctx, 0, 3, qs, (s->view) ? 3 : 0, NULL);
    d.dk = th_dev_make(ctx, 0, 3, ks, (s->view) ? 3 : 0, NULL);
    d.dv = th_dev_make(ctx, 0, 3, vs, (s->view) ? 3 : 0, NULL);
    TH_OK(ctx, teeny_attention_forward(ctx, d.q.t, d.k.t, d.v.t, s->scale, d.o.t, d.lse.t));
    TH_OK(ctx, teeny_attention_backward(ctx, d.q.t, d.k.t, d.v.t, d.o.t, d.lse.t, d.g.t, s->scale, d.dq.t, d.dk.t,
                                        d.dv.t));
    ref_attention_backward(q, k, v, g, s->BH, s->Nq, s->Nk, s->D, s->Dv, (double)s->scale, dq, dk, dv, mq, mk, mv);
    expect_close_mag(d.dq.t, dq, mq, c->nq, check_tol, "dq", repro);
    expect_close_mag(d.dk.t, dk, mk, c->nk, check_tol, "dk", repro);
    expect_close_mag(d.dv.t, dv, mv, c->nv, check_tol, "dv", repro);
    th_dev_check_guard(&d.dq, "dq", repro);
    th_dev_check_guard(&d.dk, "dk", repro);
    th_dev_check_guard(&d.dv, "dv", repro);
    dev_free_all(&d);
    void *hs[] = {q, k, v, g, dq, dk, dv, mq, mk, mv};
    for (int i = 0; i < 10; i++)
        free(hs[i]);
}

static int sweep_count(void)
{
    return th_small() ? 6 : th_full() ? 2000 : 320;
}

START_TEST(test_attention_forward_sweep)
{
    uint64_t seed = 7000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    at_shape s = th_small() ? small_shape(_i) : sweep_shape(&r, _i);
    char repro[200];
    at_case c;
    shape_str(&s, seed, repro, sizeof repro);
    if (_i % 2) /* the CPU variant on every device, on every other case */
        strncat(repro, " (CPU variant)", sizeof repro - strlen(repro) - 1);
    case_make(&c, &s, &r);
    th_cpu_kernels(_i % 2);
    check_forward(&c, repro);
    th_cpu_kernels(-1);
    case_free(&c);
}
END_TEST

START_TEST(test_attention_backward_sweep)
{
    uint64_t seed = 9000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    at_shape s = th_small() ? small_shape(_i) : sweep_shape(&r, _i);
    char repro[200];
    at_case c;
    shape_str(&s, seed, repro, sizeof repro);
    if (_i % 2) /* the CPU variant on every device, on every other case */
        strncat(repro, " (CPU variant)", sizeof repro - strlen(repro) - 1);
    case_make(&c, &s, &r);
    th_cpu_kernels(_i % 2);
    check_backward(&c, repro);
    th_cpu_kernels(-1);
    case_free(&c);
}
END_TEST

/* Logits of magnitude ~1e3 and a common offset of ~2500, where a softmax
 * without the running maximum overflows. q and k hold small integers and
 * the scales are powers of two, so every logit is exact in fp32 and the
 * full tolerance applies to o and lse. */
START_TEST(test_attention_large_logits)
{
    static const at_shape shapes[] = {{2, 64, 100, 32, 32, 0.125f, 0}, {1, 49, 257, 16, 32, 0.25f, 1}};
    for (int t = 0; t < 4; t++) { /* each shape in the portable and the CPU variant */
        const int sh = t % 2;
        const at_shape *s = &shapes[sh];
        th_cpu_kernels(t / 2);
        th_rng r = th_rng_make(31 + (uint64_t)sh);
        char repro[200];
        at_case c;
        shape_str(s, 31 + (uint64_t)sh, repro, sizeof repro);
        if (t / 2)
            strncat(repro, " (CPU variant)", sizeof repro - strlen(repro) - 1);
        case_make(&c, s, &r);
        for (size_t i = 0; i < c.nq; i++) /* shape 0: spread, |logit| up to ~1e3; shape 1: every logit 2500 + O(1) */
            c.q[i] = sh == 0 ? (float)th_int(&r, -40, 40) : i % (size_t)s->D == 0 ? 100.0f : (float)th_int(&r, -2, 2);
        for (size_t i = 0; i < c.nk; i++)
            c.k[i] = sh == 0 ? (float)th_int(&r, -40, 40) : i % (size_t)s->D == 0 ? 100.0f : (float)th_int(&r, -2, 2);
        teeny_ctx *ctx = th_ctx();
        at_dev d;
        int64_t qs[3] = {s->BH, s->Nq, s->D}, ks[3] = {s->BH, s->Nk, s->D}, vs[3] = {s->BH, s->Nk, s->Dv};
        int64_t os[3] = {s->BH, s->Nq, s->Dv};
        double *q = th_dbl(c.q, c.nq), *k = th_dbl(c.k, c.nk), *v = th_dbl(c.v, c.nv), *g = th_dbl(c.g, c.no);
        double *o = th_malloc(c.no * sizeof *o), *lse = th_malloc(c.nl * sizeof *lse);
        double *dq = th_malloc(c.nq * sizeof *dq), *dk = th_malloc(c.nk * sizeof *dk), *dv = th_malloc(c.nv * sizeof *dv);
        double *mq = th_malloc(c.nq * sizeof *mq), *mk = th_malloc(c.nk * sizeof *mk), *mv = th_malloc(c.nv * sizeof *mv);
        dev_inputs(ctx, &c, &d);
        d.g = th_dev_make(ctx, 0, 3, os, (s->view) ? 3 : 0, c.g);
        d.dq = th_dev_make(ctx, 0, 3, qs, (s->view) ? 3 : 0, NULL);
        d.dk = th_dev_make(ctx, 0, 3, ks, (s->view) ? 3 : 0, NULL);
        d.dv = th_dev_make(ctx, 0, 3, vs, (s->view) ? 3 : 0, NULL);
        TH_OK(ctx, teeny_attention_forward(ctx, d.q.t, d.k.t, d.v.t, s->scale, d.o.t, d.lse.t));
        TH_OK(ctx, teeny_attention_backward(ctx, d.q.t, d.k.t, d.v.t, d.o.t, d.lse.t, d.g.t, s->scale, d.dq.t,
                                            d.dk.t, d.dv.t));
        ref_attention_forward(q, k, v, s->BH, s->Nq, s->Nk, s->D, s->Dv, (double)s->scale, o, lse);
        ref_attention_backward(q, k, v, g, s->BH, s->Nq, s->Nk, s->D, s->Dv, (double)s->scale, dq, dk, dv, mq, mk,
                               mv);
        double lmax = 0;
        for (size_t i = 0; i < c.nl; i++)
            lmax = fmax(lmax, fabs(lse[i]));
        ck_assert_msg(lmax > 500, "the case should have large logits (max |lse| %g); %s", lmax, repro);
        expect_close_mag(d.o.t, o, NULL, c.no, TOL, "o", repro);
        expect_close_mag(d.lse.t, lse, NULL, c.nl, TOL, "lse", repro);
        /* backward recomputes P = exp(s - lse) from the saved fp32 lse, whose
         * rounding (half an ulp of |lse|) bounds the relative error of P */
        double gtol = fmax(TOL, 2 * lmax * FLT_EPSILON);
        expect_close_mag(d.dq.t, dq, mq, c.nq, gtol, "dq", repro);
        expect_close_mag(d.dk.t, dk, mk, c.nk, gtol, "dk", repro);
        expect_close_mag(d.dv.t, dv, mv, c.nv, gtol, "dv", repro);
        dev_free_all(&d);
        void *hs[] = {q, k, v, g, o, lse, dq, dk, dv, mq, mk, mv};
        for (int i = 0; i < 12; i++)
            free(hs[i]);
        case_free(&c);
    }
    th_cpu_kernels(-1);
}
END_TEST

/* The attention tiles started from 4 threads, 8 rows per thread and a
 * 128-key column tile (TEENY_ATTN_NT=4 TEENY_ATTN_RM=8 TEENY_ATTN_BN=128,
 * all in range, set here on the context's tuning as src/tune/tune.c does):
 * head dims wider than 4 thread columns hold (D 64/Dv 128 needs 4, D
 * 128/Dv 256 needs 8) ended in "internal invariant failed" (issue 21 item
 * 11); the tiles now take the thread columns the head dims need. Both
 * variants, every bucket, against the reference. */
START_TEST(test_attention_small_threads)
{
    static const at_shape shapes[] = {{2, 37, 50, 32, 32, 0.2f, 0},
                                      {2, 33, 40, 64, 128, 0.125f, 1},
                                      {3, 20, 70, 128, 256, 0.09f, 0}};
    teeny_ctx *ctx = th_ctx();
    teeny__attention_tune saved = ctx->tune.attention;
    int x3 = ctx->tune.attention_tf32.fp32_x3;
    ctx->tune.attention_tf32.fp32_x3 = 0; /* the FMA kernels' tiles, also where 3xTF32 would take D 32 */
    ctx->tune.attention.threads = 4;
    ctx->tune.attention.rows = 8;
    ctx->tune.attention.cols = 128;
    for (int t = 0; t < 6; t++) {
        const at_shape *s = &shapes[t % 3];
        th_rng r = th_rng_make(61 + (uint64_t)t);
        char repro[200];
        at_case c;
        shape_str(s, 61 + (uint64_t)t, repro, sizeof repro);
        strncat(repro, t / 3 ? " NT 4 RM 8 BN 128 (CPU variant)" : " NT 4 RM 8 BN 128", sizeof repro - strlen(repro) - 1);
        th_cpu_kernels(t / 3);
        case_make(&c, s, &r);
        check_forward(&c, repro);
        check_backward(&c, repro);
        case_free(&c);
    }
    th_cpu_kernels(-1);
    ctx->tune.attention = saved;
    ctx->tune.attention_tf32.fp32_x3 = x3;
}
END_TEST

/* Forward and backward outputs (o, lse, dq, dk, dv) of case c, with tf32
 * asked for or not. */
static void run_both(const at_case *c, int tf32, float *out[5])
{
    teeny_ctx *ctx = th_ctx();
    const at_shape *s = &c->s;
    at_dev d;
    int64_t qs[3] = {s->BH, s->Nq, s->D}, ks[3] = {s->BH, s->Nk, s->D}, vs[3] = {s->BH, s->Nk, s->Dv};
    int64_t os[3] = {s->BH, s->Nq, s->Dv};
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, tf32));
    dev_inputs(ctx, c, &d);
    d.g = th_dev_make(ctx, 0, 3, os, 0, c->g);
    d.dq = th_dev_make(ctx, 0, 3, qs, 0, NULL);
    d.dk = th_dev_make(ctx, 0, 3, ks, 0, NULL);
    d.dv = th_dev_make(ctx, 0, 3, vs, 0, NULL);
    TH_OK(ctx, teeny_attention_forward(ctx, d.q.t, d.k.t, d.v.t, s->scale, d.o.t, d.lse.t));
    TH_OK(ctx, teeny_attention_backward(ctx, d.q.t, d.k.t, d.v.t, d.o.t, d.lse.t, d.g.t, s->scale, d.dq.t, d.dk.t,
                                        d.dv.t));
    th_dev *all[5] = {&d.o, &d.lse, &d.dq, &d.dk, &d.dv};
    for (int j = 0; j < 5; j++)
        out[j] = th_read(all[j]->t);
    dev_free_all(&d);
}

/* The same inputs twice give bit-identical o, lse, dq, dk, dv. */
START_TEST(test_attention_determinism)
{
    at_shape s = {3, 257, 100, 64, 128, 0.125f, 0};
    th_rng r = th_rng_make(4711);
    at_case c;
    float *out[2][5];
    case_make(&c, &s, &r);
    for (int run = 0; run < 2; run++)
        run_both(&c, 0, out[run]);
    size_t sizes[5] = {c.no, c.nl, c.nq, c.nk, c.nv};
    for (int j = 0; j < 5; j++) {
        ck_assert_msg(!memcmp(out[0][j], out[1][j], sizes[j] * sizeof(float)), "output %d differs between runs", j);
        free(out[0][j]);
        free(out[1][j]);
    }
    case_free(&c);
}
END_TEST

/* After a warm-up, forward is one launch and backward three, and neither
 * creates a buffer or allocates host memory. */
START_TEST(test_attention_launch_counts)
{
    teeny_ctx *ctx = th_ctx();
    at_shape s = {2, 100, 64, 32, 32, 0.2f, 0};
    th_rng r = th_rng_make(5);
    at_case c;
    at_dev d;
    int64_t qs[3] = {s.BH, s.Nq, s.D}, ks[3] = {s.BH, s.Nk, s.D}, vs[3] = {s.BH, s.Nk, s.Dv}, os[3] = {s.BH, s.Nq, s.Dv};
    case_make(&c, &s, &r);
    dev_inputs(ctx, &c, &d);
    d.g = th_dev_make(ctx, 0, 3, os, 0, c.g);
    d.dq = th_dev_make(ctx, 0, 3, qs, 0, NULL);
    d.dk = th_dev_make(ctx, 0, 3, ks, 0, NULL);
    d.dv = th_dev_make(ctx, 0, 3, vs, 0, NULL);
    for (int pass = 0; pass < 2; pass++) {
        teeny__calls_reset();
        TH_OK(ctx, teeny_attention_forward(ctx, d.q.t, d.k.t, d.v.t, s.scale, d.o.t, d.lse.t));
        long fwd_launch = teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel),
             fwd_buf = teeny__calls_id(TEENY__ID_clCreateBuffer), fwd_alloc = teeny__calls_id(TEENY__ID_malloc);
        teeny__calls_reset();
        TH_OK(ctx, teeny_attention_backward(ctx, d.q.t, d.k.t, d.v.t, d.o.t, d.lse.t, d.g.t, s.scale, d.dq.t, d.dk.t,
                                            d.dv.t));
        long bwd_launch = teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel),
             bwd_buf = teeny__calls_id(TEENY__ID_clCreateBuffer), bwd_alloc = teeny__calls_id(TEENY__ID_malloc);
        if (pass == 0)
            continue; /* warm-up: programs built, workspace grown */
        ck_assert_int_eq(fwd_launch, 1);
        ck_assert_int_eq(fwd_buf, 0);
        ck_assert_int_eq(fwd_alloc, 0);
        ck_assert_int_eq(bwd_launch, 3);
        ck_assert_int_eq(bwd_buf, 0);
        ck_assert_int_eq(bwd_alloc, 0);
    }
    TH_OK(ctx, teeny_ctx_finish(ctx));
    dev_free_all(&d);
    case_free(&c);
}
END_TEST

/* Gradients asked one at a time match the full backward bit for bit, and
 * the ones not asked for are left alone. */
START_TEST(test_attention_backward_partial)
{
    teeny_ctx *ctx = th_ctx();
    at_shape s = {2, 49, 70, 16, 32, 0.3f, 0};
    th_rng r = th_rng_make(6);
    at_case c;
    at_dev d;
    int64_t qs[3] = {s.BH, s.Nq, s.D}, ks[3] = {s.BH, s.Nk, s.D}, vs[3] = {s.BH, s.Nk, s.Dv}, os[3] = {s.BH, s.Nq, s.Dv};
    case_make(&c, &s, &r);
    dev_inputs(ctx, &c, &d);
    d.g = th_dev_make(ctx, 0, 3, os, 0, c.g);
    d.dq = th_dev_make(ctx, 0, 3, qs, 0, NULL);
    d.dk = th_dev_make(ctx, 0, 3, ks, 0, NULL);
    d.dv = th_dev_make(ctx, 0, 3, vs, 0, NULL);
    TH_OK(ctx, teeny_attention_forward(ctx, d.q.t, d.k.t, d.v.t, s.scale, d.o.t, d.lse.t));
    TH_OK(ctx, teeny_attention_backward(ctx, d.q.t, d.k.t, d.v.t, d.o.t, d.lse.t, d.g.t, s.scale, d.dq.t, d.dk.t,
                                        d.dv.t));
    th_dev *gr[3] = {&d.dq, &d.dk, &d.dv};
    float *full[3];
    for (int j = 0; j < 3; j++)
        full[j] = th_read(gr[j]->t);
    for (int want = 0; want < 3; want++) {
        teeny_tensor *o3[3] = {NULL, NULL, NULL};
        for (int j = 0; j < 3; j++)
            th_poison(gr[j]->t);
        o3[want] = gr[want]->t;
        TH_OK(ctx, teeny_attention_backward(ctx, d.q.t, d.k.t, d.v.t, d.o.t, d.lse.t, d.g.t, s.scale, o3[0], o3[1],
                                            o3[2]));
        for (int j = 0; j < 3; j++) {
            float *x = th_read(gr[j]->t);
            size_t n = (size_t)teeny_tensor_numel(gr[j]->t);
            if (j == want)
                ck_assert_msg(!memcmp(x, full[j], n * sizeof(float)), "gradient %d alone differs", j);
            else
                for (size_t e = 0; e < n; e++)
                    ck_assert_msg(isnan(x[e]), "gradient %d written though not asked for (asked %d)", j, want);
            free(x);
        }
    }
    for (int j = 0; j < 3; j++)
        free(full[j]);
    dev_free_all(&d);
    case_free(&c);
}
END_TEST

/* The CPU variants' loops split into launches (a device that ends a
 * work-item's loops after L trips, as Mesa's llvmpipe does at 65535) give
 * the bits of a single launch: forward, full backward, and each gradient
 * alone (an output not asked for stands in for the other and must stay
 * untouched). A limit too small for even one block of keys is
 * TEENY_ERR_UNSUPPORTED before anything is written. */
START_TEST(test_attention_split_loops)
{
    teeny_ctx *ctx = th_ctx();
    static const struct {
        at_shape s;
        long long limits[2], too_small;
    } cases[] = {{{2, 77, 300, 64, 128, 0.125f, 0}, {40000, 60000}, 8000},
                 {{3, 150, 41, 32, 32, 0.2f, 1}, {9000, 12000}, 2000}};
    th_cpu_kernels(1);
    for (int ci = 0; ci < 2; ci++) {
        const at_shape *sh = &cases[ci].s;
        th_rng r = th_rng_make(777 + (uint64_t)ci);
        at_case c;
        at_dev d;
        int64_t qs[3] = {sh->BH, sh->Nq, sh->D}, ks[3] = {sh->BH, sh->Nk, sh->D}, vs[3] = {sh->BH, sh->Nk, sh->Dv},
                os[3] = {sh->BH, sh->Nq, sh->Dv};
        case_make(&c, sh, &r);
        dev_inputs(ctx, &c, &d);
        d.g = th_dev_make(ctx, 0, 3, os, 0, c.g);
        d.dq = th_dev_make(ctx, 0, 3, qs, 0, NULL);
        d.dk = th_dev_make(ctx, 0, 3, ks, 0, NULL);
        d.dv = th_dev_make(ctx, 0, 3, vs, 0, NULL);
        th_dev *all[5] = {&d.o, &d.lse, &d.dq, &d.dk, &d.dv};
        float *one[5];
        th_loop_limit(0);
        TH_OK(ctx, teeny_attention_forward(ctx, d.q.t, d.k.t, d.v.t, sh->scale, d.o.t, d.lse.t));
        TH_OK(ctx, teeny_attention_backward(ctx, d.q.t, d.k.t, d.v.t, d.o.t, d.lse.t, d.g.t, sh->scale, d.dq.t,
                                            d.dk.t, d.dv.t));
        for (int j = 0; j < 5; j++)
            one[j] = th_read(all[j]->t);
        for (int li = 0; li < 2; li++) {
            th_loop_limit(cases[ci].limits[li]);
            for (int want = -1; want < 3; want++) { /* -1: everything; else only gradient want */
                for (int j = 0; j < 5; j++)
                    if (j >= 2 || want == -1)
                        th_poison(all[j]->t);
                teeny__calls_reset();
                if (want == -1)
                    TH_OK(ctx, teeny_attention_forward(ctx, d.q.t, d.k.t, d.v.t, sh->scale, d.o.t, d.lse.t));
                TH_OK(ctx, teeny_attention_backward(ctx, d.q.t, d.k.t, d.v.t, d.o.t, d.lse.t, d.g.t, sh->scale,
                                                    want < 1 ? d.dq.t : NULL, want == -1 || want == 1 ? d.dk.t : NULL,
                                                    want == -1 || want == 2 ? d.dv.t : NULL));
                /* split: unsplit, the forward, Di, dK/dV and dQ are four
                 * launches; the limits are chosen to split at least three */
                if (want == -1)
                    ck_assert_int_ge(teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel), 3 * 2 + 1);
                for (int j = 0; j < 5; j++) {
                    float *x = th_read(all[j]->t);
                    size_t n = (size_t)teeny_tensor_numel(all[j]->t);
                    if (want == -1 || j < 2 || j - 2 == want)
                        ck_assert_msg(!memcmp(x, one[j], n * sizeof(float)),
                                      "case %d, limit %lld, want %d: output %d differs from one launch's", ci,
                                      cases[ci].limits[li], want, j);
                    else
                        for (size_t e = 0; e < n; e++)
                            ck_assert_msg(isnan(x[e]), "case %d, limit %lld: gradient %d written though not asked "
                                          "for (asked %d)", ci, cases[ci].limits[li], j - 2, want);
                    free(x);
                }
            }
        }
        th_loop_limit(cases[ci].too_small);
        for (int j = 0; j < 5; j++)
            th_poison(all[j]->t);
        TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED,
                  teeny_attention_forward(ctx, d.q.t, d.k.t, d.v.t, sh->scale, d.o.t, d.lse.t));
        TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_attention_backward(ctx, d.q.t, d.k.t, d.v.t, d.o.t, d.lse.t, d.g.t,
                                                                       sh->scale, d.dq.t, d.dk.t, d.dv.t));
        for (int j = 0; j < 5; j++)
            th_expect_all(all[j]->t, NAN);
        for (int j = 0; j < 5; j++)
            free(one[j]);
        dev_free_all(&d);
        case_free(&c);
    }
    th_loop_limit(-1);
    th_cpu_kernels(-1);
}
END_TEST

/* The reference backward against central differences of the reference
 * forward, loss L = sum(g * o). */
static double fd_loss(const double *q, const double *k, const double *v, const double *g, int BH, int Nq, int Nk,
                      int D, int Dv, double scale)
{
    size_t no = (size_t)BH * Nq * Dv;
    double *o = th_malloc(no * sizeof *o), L = 0;
    ref_attention_forward(q, k, v, BH, Nq, Nk, D, Dv, scale, o, NULL);
    for (size_t i = 0; i < no; i++)
        L += g[i] * o[i];
    free(o);
    return L;
}

START_TEST(test_attention_finite_differences)
{
    enum { BH = 2, NQ = 3, NK = 4, D = 3, DV = 5 };
    const double scale = 0.7, h = 1e-6;
    th_rng r = th_rng_make(2718);
    double q[BH * NQ * D], k[BH * NK * D], v[BH * NK * DV], g[BH * NQ * DV];
    double dq[BH * NQ * D], dk[BH * NK * D], dv[BH * NK * DV];
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        q[i] = th_normal(&r);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        k[i] = th_normal(&r);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        v[i] = th_normal(&r);
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        g[i] = th_normal(&r);
    ref_attention_backward(q, k, v, g, BH, NQ, NK, D, DV, scale, dq, dk, dv, NULL, NULL, NULL);
    double *params[3] = {q, k, v}, *grads[3] = {dq, dk, dv};
    int counts[3] = {BH * NQ * D, BH * NK * D, BH * NK * DV};
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < counts[p]; i++) {
            double keep = params[p][i];
            params[p][i] = keep + h;
            double lp = fd_loss(q, k, v, g, BH, NQ, NK, D, DV, scale);
            params[p][i] = keep - h;
            double lm = fd_loss(q, k, v, g, BH, NQ, NK, D, DV, scale);
            params[p][i] = keep;
            double fd = (lp - lm) / (2 * h);
            ck_assert_msg(fabs(fd - grads[p][i]) <= 1e-6 * (1 + fabs(fd)),
                          "param %d[%d]: analytic %.9g, finite difference %.9g", p, i, grads[p][i], fd);
        }
}
END_TEST

/* ---- errors: exact status, nothing modified ---- */

typedef struct {
    teeny_tensor *t;
    float *before;
} snap;

static void snap_check(snap *s, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        float *now = th_read(s[i].t);
        ck_assert_msg(!memcmp(now, s[i].before, (size_t)teeny_tensor_numel(s[i].t) * sizeof(float)),
                      "%s modified tensor %d", what, i);
        free(now);
    }
}

START_TEST(test_attention_errors)
{
    teeny_ctx *ctx = th_ctx(), *other = NULL;
    enum { BH = 2, NQ = 5, NK = 7, D = 8, DV = 16 };
    th_rng r = th_rng_make(99);
    int64_t qs[3] = {BH, NQ, D}, ks[3] = {BH, NK, D}, vs[3] = {BH, NK, DV}, os[3] = {BH, NQ, DV}, ls[2] = {BH, NQ};
    int64_t q_bh[3] = {BH + 1, NQ, D}, k_d[3] = {BH, NK, D + 1}, v_n[3] = {BH, NK + 1, DV}, o_n[3] = {BH, NQ + 1, DV};
    int64_t l_n[2] = {BH, NQ + 1}, q2[2] = {BH * NQ, D}, big_d[3] = {BH, NQ, 129}, big_kd[3] = {BH, NK, 129};
    int64_t big_v[3] = {BH, NK, 257}, big_o[3] = {BH, NQ, 257}, whole = BH * NQ * D + BH * NQ * DV;
    float buf[BH * NK * DV];
    th_fill_normal(&r, buf, sizeof buf / sizeof buf[0], 0, 1);
    teeny_tensor *q = th_tensor_from(ctx, 3, qs, buf), *k = th_tensor_from(ctx, 3, ks, buf);
    teeny_tensor *v = th_tensor_from(ctx, 3, vs, buf), *o = th_tensor_from(ctx, 3, os, buf);
    teeny_tensor *lse = th_tensor_from(ctx, 2, ls, buf), *g = th_tensor_from(ctx, 3, os, buf);
    teeny_tensor *dq = th_tensor_from(ctx, 3, qs, buf), *dk = th_tensor_from(ctx, 3, ks, buf);
    teeny_tensor *dv = th_tensor_from(ctx, 3, vs, buf);
    teeny_tensor *tq_bh = th_tensor(ctx, 3, q_bh), *tk_d = th_tensor(ctx, 3, k_d), *tv_n = th_tensor(ctx, 3, v_n);
    teeny_tensor *to_n = th_tensor(ctx, 3, o_n), *tl_n = th_tensor(ctx, 2, l_n), *tq2 = th_tensor(ctx, 2, q2);
    teeny_tensor *tbig_q = th_tensor(ctx, 3, big_d), *tbig_k = th_tensor(ctx, 3, big_kd);
    teeny_tensor *tbig_v = th_tensor(ctx, 3, big_v), *tbig_o = th_tensor(ctx, 3, big_o);
    teeny_tensor *shared = th_tensor(ctx, 1, &whole), *vq = NULL, *vo = NULL, *ti = NULL, *tforeign = NULL;
    teeny_tensor *vdq = NULL, *vdk = NULL, *lo = NULL;
    TH_OK(ctx, teeny_tensor_view(o, 4, 2, ls, &lo));
    TH_OK(ctx, teeny_tensor_view(shared, 0, 3, qs, &vq));
    TH_OK(ctx, teeny_tensor_view(shared, BH * NQ * D - 1, 3, os, &vo)); /* overlaps vq by one element */
    TH_OK(ctx, teeny_tensor_view(shared, 0, 3, qs, &vdq));
    TH_OK(ctx, teeny_tensor_view(shared, BH * NQ * D - 1, 3, ks, &vdk)); /* overlaps vdq */
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 3, qs, &ti));
    TH_OK(NULL, teeny_ctx_create(NULL, &other));
    TH_OK(other, teeny_tensor_create(other, 3, qs, &tforeign));
    teeny_tensor *watched[] = {q, k, v, o, lse, g, dq, dk, dv};
    snap s[9];
    for (int i = 0; i < 9; i++) {
        s[i].t = watched[i];
        s[i].before = th_read(watched[i]);
    }

#define FWD(...) teeny_attention_forward(__VA_ARGS__)
#define BWD(...) teeny_attention_backward(__VA_ARGS__)
    TH_STATUS(NULL, TEENY_ERR_ARG, FWD(NULL, q, k, v, 0.3f, o, lse));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, NULL, k, v, 0.3f, o, lse));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, q, NULL, v, 0.3f, o, lse));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, q, k, NULL, 0.3f, o, lse));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, q, k, v, 0.3f, NULL, lse));
    ck_assert_msg(strstr(teeny_last_error(ctx), "o") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, ti, k, v, 0.3f, o, lse));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tforeign, k, v, 0.3f, o, lse));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, tq2, k, v, 0.3f, o, lse));                /* rank */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, tq_bh, k, v, 0.3f, o, lse));              /* BH */
    ck_assert_msg(strstr(teeny_last_error(ctx), "k has shape") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, q, tk_d, v, 0.3f, o, lse));               /* D */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, q, k, tv_n, 0.3f, o, lse));               /* Nk */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, q, k, v, 0.3f, to_n, lse));               /* Nq of o */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, q, k, v, 0.3f, o, tl_n));                 /* lse */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, q, k, v, 0.3f, o, g));                    /* lse rank */
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, FWD(ctx, tbig_q, tbig_k, v, 0.3f, o, lse));  /* D = 129 */
    ck_assert_msg(strstr(teeny_last_error(ctx), "128") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, FWD(ctx, q, k, tbig_v, 0.3f, tbig_o, lse));  /* Dv = 257 */
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, q, k, v, NAN, o, lse));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, q, k, v, INFINITY, o, lse));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, vq, k, v, 0.3f, vo, lse));                  /* o overlaps q */
    ck_assert_msg(strstr(teeny_last_error(ctx), "overlaps") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, q, k, v, 0.3f, o, lo));                     /* lse inside o */

    TH_STATUS(NULL, TEENY_ERR_ARG, BWD(NULL, q, k, v, o, lse, g, 0.3f, dq, dk, dv));
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(ctx, q, k, v, o, NULL, g, 0.3f, dq, dk, dv));
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(ctx, q, k, v, o, lse, NULL, 0.3f, dq, dk, dv));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(ctx, q, k, v, to_n, lse, g, 0.3f, dq, dk, dv));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(ctx, q, k, v, o, lse, to_n, 0.3f, dq, dk, dv));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(ctx, q, k, v, o, tl_n, g, 0.3f, dq, dk, dv));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(ctx, q, k, v, o, lse, g, 0.3f, dk, dq, dv));    /* swapped */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(ctx, q, k, v, o, lse, g, 0.3f, dq, dk, tv_n));
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, BWD(ctx, tbig_q, tbig_k, v, o, lse, g, 0.3f, dq, dk, dv));
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(ctx, q, k, v, o, lse, g, NAN, dq, dk, dv));
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(ctx, q, k, v, o, lse, g, 0.3f, dq, dk, v));       /* dv is v */
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(ctx, q, k, v, o, lse, g, 0.3f, q, dk, dv));       /* dq is q */
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(ctx, q, k, v, o, lse, g, 0.3f, vdq, vdk, dv));    /* dq overlaps dk */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(ctx, q, k, v, o, lse, g, 0.3f, dq, dk, g));     /* dv shaped like o */
#undef FWD
#undef BWD
    snap_check(s, 9, "a rejected attention call");
    for (int i = 0; i < 9; i++)
        free(s[i].before);
    teeny_tensor *ts[] = {q, k, v, o, lse, g, dq, dk, dv, tq_bh, tk_d, tv_n, to_n, tl_n, tq2, tbig_q, tbig_k, tbig_v,
                          tbig_o, vq, vo, vdq, vdk, lo, shared, ti, tforeign};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        teeny_tensor_destroy(ts[i]);
    teeny_ctx_destroy(other);
}
END_TEST

/* teeny_ctx_set_tf32(ctx, 1) on a device with tf32 tensor cores: the
 * tensor-core kernels (head dims up to 64) within TOL_TF32 of the float64
 * references, forward and backward, over every head-dim bucket they take,
 * lengths off the tiles, views and negative scales; the same bits twice
 * and not fp32's; head dims past their bucket keep the fp32 kernels' bits.
 * A device without them keeps fp32: the test says so and counts as
 * skipped. */
START_TEST(test_attention_tf32)
{
    teeny_ctx *ctx = th_ctx();
    TH_SKIP_NO_TF32(ctx);
    static const at_shape shapes[] = {{2, 100, 64, 32, 32, 0.2f, 0},   {1, 1, 1, 8, 8, 0.5f, 0},
                                      {3, 7, 257, 16, 32, 0.25f, 1},   {2, 257, 100, 64, 64, 0.125f, 1},
                                      {1, 400, 49, 64, 32, 0.3f, 0},   {4, 64, 64, 32, 64, -0.25f, 0},
                                      {1, 1024, 1024, 64, 64, 0.125f, 0}, {2, 49, 33, 24, 40, 1.0f, 1}};
    check_tol = TOL_TF32;
    for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++) {
        uint64_t seed = 7700 + (uint64_t)i;
        th_rng r = th_rng_make(seed);
        char repro[200];
        at_case c;
        shape_str(&shapes[i], seed, repro, sizeof repro);
        strncat(repro, " (tf32)", sizeof repro - strlen(repro) - 1);
        case_make(&c, &shapes[i], &r);
        check_forward(&c, repro);
        check_backward(&c, repro);
        case_free(&c);
    }
    check_tol = TOL;
    /* deterministic, not fp32's bits; past the tf32 kernels' head dims, fp32's */
    static const at_shape bits[2] = {{2, 100, 70, 64, 64, 0.125f, 0}, {1, 33, 40, 128, 64, 0.1f, 0}};
    for (int t = 0; t < 2; t++) {
        th_rng r = th_rng_make(7750 + (uint64_t)t);
        at_case c;
        float *out[3][5];
        case_make(&c, &bits[t], &r);
        for (int run = 0; run < 3; run++) /* tf32, tf32, fp32 */
            run_both(&c, run < 2, out[run]);
        size_t n[5] = {c.no, c.nl, c.nq, c.nk, c.nv};
        for (int j = 0; j < 5; j++) {
            ck_assert_msg(!memcmp(out[0][j], out[1][j], n[j] * sizeof(float)), "tf32: output %d differs between runs",
                          j);
            int same = !memcmp(out[0][j], out[2][j], n[j] * sizeof(float));
            ck_assert_msg(t == 0 ? !same : same, t == 0 ? "tf32: output %d has fp32's bits: not engaged"
                                                        : "D 128 under tf32: output %d is not fp32's", j);
            for (int run = 0; run < 3; run++)
                free(out[run][j]);
        }
        case_free(&c);
    }
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
}
END_TEST

/* The tf32 kernels' fragment logic on any device: the nvidia profile's
 * tf32 tiles built with the mma and the quad shuffles emulated in OpenCL
 * C (the test hook ATTENTION_TF32_EMULATE; cl/common.cl's tf32_round and
 * tf32_mma_xchg). Both head-dim buckets, partial row and column tiles, a
 * view, a negative scale, forward and backward within TOL_TF32 of the
 * float64 references; the same bits twice and not fp32's (the tf32
 * kernels ran). Where the device cannot take the profile's work-groups
 * and local memory, skipped with the reason. */
START_TEST(test_attention_tf32_emulated)
{
    teeny_ctx *ctx = th_ctx();
    if (!th_profile("nvidia"))
        th_skip("%s cannot take the nvidia profile's work-groups and local memory", teeny_ctx_device_name(ctx));
    th_hook(TEENY__HOOK_ATTENTION_TF32_EMULATE, 1);
    ctx->tune.attention_tf32.fp32_x3 = 0; /* fp32 calls on the FMA kernels (test_attention_x3_emulated: not) */
    static const at_shape shapes[] = {{2, 37, 70, 32, 32, 0.2f, 0}, {1, 70, 41, 64, 48, -0.3f, 1}};
    for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++) {
        uint64_t seed = 7760 + (uint64_t)i;
        th_rng r = th_rng_make(seed);
        char repro[200];
        at_case c;
        float *out[3][5];
        shape_str(&shapes[i], seed, repro, sizeof repro);
        strncat(repro, " (tf32 emulated)", sizeof repro - strlen(repro) - 1);
        case_make(&c, &shapes[i], &r);
        TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
        check_tol = TOL_TF32;
        check_forward(&c, repro);
        check_backward(&c, repro);
        check_tol = TOL;
        for (int run = 0; run < 3; run++) /* tf32, tf32, fp32 */
            run_both(&c, run < 2, out[run]);
        size_t n[5] = {c.no, c.nl, c.nq, c.nk, c.nv};
        for (int j = 0; j < 5; j++) {
            ck_assert_msg(!memcmp(out[0][j], out[1][j], n[j] * sizeof(float)), "%s: output %d differs between runs",
                          repro, j);
            ck_assert_msg(memcmp(out[0][j], out[2][j], n[j] * sizeof(float)),
                          "%s: output %d has fp32's bits: the tf32 kernels did not run", repro, j);
            for (int run = 0; run < 3; run++)
                free(out[run][j]);
        }
        case_free(&c);
    }
    /* the approximate exponentials (-DATT_EXP) where the profile says so,
     * in both head-dim buckets: tf32 calls; never 3xTF32 (fp32 calls) */
    const teeny__attention_tf32_tune *tu = &ctx->tune.attention_tf32;
    for (int x3 = 0; x3 < 2; x3++) {
        TH_OK(ctx, teeny_ctx_set_tf32(ctx, !x3));
        ctx->tune.attention_tf32.fp32_x3 = x3;
        for (int d = 32; d <= 64; d += 32) {
            teeny__attn_problem p = {.bh = 2, .heads = 1, .n_q = 40, .n_k = 40, .d = d, .dv = d, .scale = 0.1f};
            att_plan pl;
            TH_OK(ctx, teeny__attn_plan(ctx, &p, 1, 0, &pl));
            const char *o = strstr(pl.options, "-DATT_EXP=");
            int fast_exp = o ? atoi(o + strlen("-DATT_EXP=")) : 0;
            ck_assert_msg(pl.tc && pl.x3 == x3, "D %d, x3 %d: not the tensor-core kernels (%s)", d, x3, pl.options);
            ck_assert_msg(fast_exp == (x3 ? 0 : tu->fast_exp), "D %d, x3 %d: ATT_EXP %d against the profile's (%s)", d,
                          x3, fast_exp, pl.options);
        }
    }
    ck_assert_int_eq(ctx->tune.profile->attention_tf32.fast_exp, 3); /* the nvidia row's: both passes */
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    th_hook(TEENY__HOOK_ATTENTION_TF32_EMULATE, 0);
    th_profile(NULL);
}
END_TEST

/* fp32 calls by 3xTF32 (the profile's attention_tf32.fp32_x3) against the
 * FMA kernels (fp32_x3 0), shapes of both head-dim buckets with partial
 * tiles, a view and a negative scale: each within fp32's tolerance (TOL)
 * of the float64 references, forward and backward, the same bits twice,
 * and the two not each other's bits (both ran). */
static void x3_checks(teeny_ctx *ctx, const char *how)
{
    static const at_shape shapes[] = {{2, 37, 70, 32, 32, 0.2f, 0}, {1, 70, 41, 64, 48, -0.3f, 1},
                                      {2, 257, 100, 64, 64, 0.125f, 0}};
    int x3 = ctx->tune.attention_tf32.fp32_x3;
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++) {
        uint64_t seed = 7780 + (uint64_t)i;
        th_rng r = th_rng_make(seed);
        char repro[200];
        at_case c;
        float *out[3][5];
        case_make(&c, &shapes[i], &r);
        for (int fma = 0; fma < 2; fma++) {
            ctx->tune.attention_tf32.fp32_x3 = !fma;
            shape_str(&shapes[i], seed, repro, sizeof repro);
            strncat(repro, fma ? " (FMA kernels)" : how, sizeof repro - strlen(repro) - 1);
            check_forward(&c, repro);
            check_backward(&c, repro);
        }
        for (int run = 0; run < 3; run++) { /* 3xTF32, 3xTF32, FMA */
            ctx->tune.attention_tf32.fp32_x3 = run < 2;
            run_both(&c, 0, out[run]);
        }
        shape_str(&shapes[i], seed, repro, sizeof repro);
        size_t n[5] = {c.no, c.nl, c.nq, c.nk, c.nv};
        for (int j = 0; j < 5; j++) {
            ck_assert_msg(!memcmp(out[0][j], out[1][j], n[j] * sizeof(float)), "%s%s: output %d differs between runs",
                          repro, how, j);
            ck_assert_msg(memcmp(out[0][j], out[2][j], n[j] * sizeof(float)),
                          "%s%s: output %d has the FMA kernels' bits: 3xTF32 did not run", repro, how, j);
            for (int run = 0; run < 3; run++)
                free(out[run][j]);
        }
        case_free(&c);
    }
    ctx->tune.attention_tf32.fp32_x3 = x3;
}

/* Where the device runs tf32 and its profile takes 3xTF32 for fp32. */
START_TEST(test_attention_x3)
{
    teeny_ctx *ctx = th_ctx();
    TH_SKIP_NO_TF32(ctx);
    if (ctx->tune.attention_tf32.fp32_x3 <= 0 || ctx->tune.attention_tf32.warps <= 0)
        th_skip("the %s profile keeps fp32 attention on the FMA kernels", ctx->tune.profile->name);
    x3_checks(ctx, " (3xTF32)");
}
END_TEST

/* The same on the nvidia profile with the mma and shuffles emulated in
 * OpenCL C (the test hook ATTENTION_TF32_EMULATE), on any device that can
 * take the profile's work-groups. */
START_TEST(test_attention_x3_emulated)
{
    teeny_ctx *ctx = th_ctx();
    if (!th_profile("nvidia"))
        th_skip("%s cannot take the nvidia profile's work-groups and local memory", teeny_ctx_device_name(ctx));
    th_hook(TEENY__HOOK_ATTENTION_TF32_EMULATE, 1);
    x3_checks(ctx, " (3xTF32 emulated)");
    th_hook(TEENY__HOOK_ATTENTION_TF32_EMULATE, 0);
    th_profile(NULL);
}
END_TEST

Suite *suite_attention(void)
{
    Suite *s = suite_create("attention");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_attention_forward_sweep, 0, sweep_count());
    tcase_add_loop_test(bwd, test_attention_backward_sweep, 0, sweep_count());
    if (!th_small()) {
        tcase_add_test(fwd, test_attention_large_logits);
        tcase_add_test(fwd, test_attention_determinism);
    }
    tcase_add_test(fwd, test_attention_launch_counts);
    tcase_add_test(fwd, test_attention_small_threads);
    tcase_add_test(bwd, test_attention_tf32);
    tcase_add_test(bwd, test_attention_tf32_emulated);
    tcase_add_test(bwd, test_attention_x3);
    tcase_add_test(bwd, test_attention_x3_emulated);
    tcase_add_test(bwd, test_attention_backward_partial);
    tcase_add_test(bwd, test_attention_split_loops);
    tcase_add_test(bwd, test_attention_finite_differences);
    tcase_add_test(err, test_attention_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
