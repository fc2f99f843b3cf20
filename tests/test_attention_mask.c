/*
 * test_attention_mask.c -- attention with masks (teeny_attention_forward_ex,
 * _backward_ex, teeny_graph_attention_ex) against the float64 reference
 * (tests/ref/attention_ref.c, ref_attention_*_ex): a seeded sweep over
 * Nq != Nk, heads, causal frontiers (top-left, bottom-right, anywhere in
 * [-Nq, Nk]), every broadcast pattern of a 2-, 3- or 4-D mask, -inf
 * entries, fully masked rows and softcap, in the portable and the CPU
 * variants; fully masked rows exactly (o = 0, lse = -inf, no gradient);
 * keys past every causal frontier never read; finite differences of the
 * reference; determinism; split loops; the graph builder (and its refusal
 * of a mask that would need a gradient); every error status.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clwrap.h"
#include "harness.h"
#include "internal.h"
#include "ops/ops.h"
#include "ref/attention_ref.h"

#define TOL 1e-5
#define TOL_TF32 1e-3 /* teeny_ctx_set_tf32: the bound on normalized RMS error */
static double check_tol = TOL; /* what expect_close allows: TOL_TF32 under test_attention_mask_tf32 */

typedef struct {
    int B, H, Nq, Nk, D, Dv;
    float scale;           /* 0: 1/sqrt(D) */
    int pass_heads;        /* teeny_attention_params.heads (0 allowed when B == 1) */
    int causal, offset;
    float softcap;
    int mrank;             /* 0: no mask, else 2..4 */
    int mfull[4];          /* per dim of [B, H, Nq, Nk]: 1 full, 0 broadcast (dims past mrank: 0) */
    double ninf;           /* probability of a -inf mask entry */
    int dead_row;          /* 1: one mask row wholly -inf */
} mk_shape;

static void shape_str(const mk_shape *s, uint64_t seed, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "attention_ex B %d H %d (heads %d) Nq %d Nk %d D %d Dv %d scale %.9g causal %d offset %d softcap %.9g "
             "mask rank %d full %d%d%d%d ninf %.2f dead_row %d seed %llu",
             s->B, s->H, s->pass_heads, s->Nq, s->Nk, s->D, s->Dv, (double)s->scale, s->causal, s->offset,
             (double)s->softcap, s->mrank, s->mfull[0], s->mfull[1], s->mfull[2], s->mfull[3], s->ninf, s->dead_row,
             (unsigned long long)seed);
}

static mk_shape sweep_shape(th_rng *r)
{
    static const int lens[] = {1, 3, 5, 16, 33, 64, 100, 130};
    static const int dims[] = {8, 16, 32};
    mk_shape s;
    memset(&s, 0, sizeof s);
    s.B = th_int(r, 1, 3);
    s.H = th_int(r, 1, 3);
    s.Nq = lens[th_int(r, 0, 7)];
    s.Nk = lens[th_int(r, 0, 7)];
    s.D = dims[th_int(r, 0, 2)];
    s.Dv = th_int(r, 0, 1) ? 2 * s.D : s.D;
    s.scale = th_int(r, 0, 2) == 0 ? 0.0f : (float)th_uniform(r, 0.05, 0.6);
    s.pass_heads = s.B == 1 && th_int(r, 0, 1) ? 0 : s.H;
    s.causal = th_int(r, 0, 1);
    if (s.causal)
        switch (th_int(r, 0, 2)) {
        case 0: s.offset = 0; break;
        case 1: s.offset = s.Nk - s.Nq; break;
        default: s.offset = th_int(r, -s.Nq, s.Nk); break;
        }
    s.softcap = th_int(r, 0, 3) == 0 ? (float)th_uniform(r, 0.5, 4.0) : 0.0f;
    s.mrank = th_int(r, 0, 3) == 0 ? 0 : th_int(r, 2, 4);
    for (int i = 4 - s.mrank; s.mrank && i < 4; i++)
        s.mfull[i] = i == 3 ? th_int(r, 0, 5) != 0 : th_int(r, 0, 1);
    if (s.mrank) {
        s.ninf = th_int(r, 0, 1) ? 0.0 : 0.2;
        s.dead_row = th_int(r, 0, 2) == 0;
    }
    if (!s.mrank && !s.causal && s.softcap == 0.0f) /* always something masked */
        s.causal = 1;
    return s;
}

/* ---- one case: host data, the reference, the device ---- */

typedef struct {
    mk_shape s;
    int BH;
    size_t nq, nk, nv, no, nl, nm;
    int64_t mshape[4];     /* the mask's own shape (mrank dims) */
    long ms[4];            /* its element strides against [B, H, Nq, Nk], 0 broadcast */
    float *q, *k, *v, *g, *m;
    teeny_attention_params p;
    ref_attn_mask rm;
    double *md;
} mk_case;

static void case_make(mk_case *c, const mk_shape *s, th_rng *r)
{
    const int64_t full[4] = {s->B, s->H, s->Nq, s->Nk};
    memset(c, 0, sizeof *c);
    c->s = *s;
    c->BH = s->B * s->H;
    c->nq = (size_t)c->BH * s->Nq * s->D;
    c->nk = (size_t)c->BH * s->Nk * s->D;
    c->nv = (size_t)c->BH * s->Nk * s->Dv;
    c->no = (size_t)c->BH * s->Nq * s->Dv;
    c->nl = (size_t)c->BH * s->Nq;
    c->q = th_malloc(c->nq * sizeof(float));
    c->k = th_malloc(c->nk * sizeof(float));
    c->v = th_malloc(c->nv * sizeof(float));
    c->g = th_malloc(c->no * sizeof(float));
    th_fill_normal(r, c->q, c->nq, 0, 1);
    th_fill_normal(r, c->k, c->nk, 0, 1);
    th_fill_normal(r, c->v, c->nv, th_uniform(r, -1, 1), 1);
    th_fill_normal(r, c->g, c->no, 0, 1);
    c->nm = 1;
    long acc = 1;
    for (int i = 3; i >= 0; i--) {
        int64_t dim = i >= 4 - s->mrank && s->mfull[i] ? full[i] : 1;
        if (i >= 4 - s->mrank)
            c->mshape[i - (4 - s->mrank)] = dim;
        c->ms[i] = dim == 1 ? 0 : acc;
        acc *= (long)dim;
    }
    c->nm = (size_t)acc;
    if (s->mrank) {
        c->m = th_malloc(c->nm * sizeof(float));
        th_fill_normal(r, c->m, c->nm, 0, 1);
        for (size_t i = 0; i < c->nm; i++)
            if (th_uniform(r, 0, 1) < s->ninf)
                c->m[i] = -INFINITY;
        if (s->dead_row) { /* the mask's last row (every key, its last query and head) */
            size_t nk = s->mfull[3] ? (size_t)s->Nk : 1;
            for (size_t j = 0; j < nk; j++)
                c->m[c->nm - 1 - j] = -INFINITY;
        }
        c->md = th_dbl(c->m, c->nm);
    }
    c->p = (teeny_attention_params)TEENY_ATTENTION_PARAMS_INIT;
    c->p.scale = s->scale;
    c->p.causal = s->causal;
    c->p.causal_offset = s->offset;
    c->p.heads = s->pass_heads;
    c->p.softcap = s->softcap;
    c->rm = (ref_attn_mask){c->md, c->ms[0], c->ms[1], c->ms[2], c->ms[3], s->H, s->causal, s->offset, s->softcap};
}

static double case_scale(const mk_case *c)
{
    return c->s.scale != 0.0f ? (double)c->s.scale : (double)(float)(1.0 / sqrt((double)c->s.D));
}

static void case_free(mk_case *c)
{
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->g);
    free(c->m);
    free(c->md);
}

typedef struct {
    th_dev q, k, v, m, o, lse, g, dq, dk, dv;
} mk_dev;

static void dev_make(teeny_ctx *ctx, const mk_case *c, int view, mk_dev *d)
{
    const mk_shape *s = &c->s;
    int64_t qs[3] = {c->BH, s->Nq, s->D}, ks[3] = {c->BH, s->Nk, s->D}, vs[3] = {c->BH, s->Nk, s->Dv};
    int64_t os[3] = {c->BH, s->Nq, s->Dv}, ls[2] = {c->BH, s->Nq};
    int off = view ? 3 : 0;
    memset(d, 0, sizeof *d);
    d->q = th_dev_make(ctx, 0, 3, qs, off, c->q);
    d->k = th_dev_make(ctx, 0, 3, ks, off, c->k);
    d->v = th_dev_make(ctx, 0, 3, vs, off, c->v);
    if (c->m)
        d->m = th_dev_make(ctx, 0, s->mrank, c->mshape, off, c->m);
    d->o = th_dev_make(ctx, 0, 3, os, off, NULL);
    d->lse = th_dev_make(ctx, 0, 2, ls, off, NULL);
    d->g = th_dev_make(ctx, 0, 3, os, off, c->g);
    d->dq = th_dev_make(ctx, 0, 3, qs, off, NULL);
    d->dk = th_dev_make(ctx, 0, 3, ks, off, NULL);
    d->dv = th_dev_make(ctx, 0, 3, vs, off, NULL);
}

static void dev_free(mk_dev *d)
{
    th_dev *all[] = {&d->q, &d->k, &d->v, &d->m, &d->o, &d->lse, &d->g, &d->dq, &d->dk, &d->dv};
    for (int i = 0; i < 10; i++)
        if (all[i]->t)
            th_dev_free(all[i]);
}

static teeny_status run_forward(teeny_ctx *ctx, const mk_case *c, mk_dev *d)
{
    return teeny_attention_forward_ex(ctx, d->q.t, d->k.t, d->v.t, d->m.t, &c->p, d->o.t, d->lse.t);
}

static teeny_status run_backward(teeny_ctx *ctx, const mk_case *c, mk_dev *d)
{
    return teeny_attention_backward_ex(ctx, d->q.t, d->k.t, d->v.t, d->m.t, &c->p, d->o.t, d->lse.t, d->g.t, d->dq.t,
                                       d->dk.t, d->dv.t);
}

/* out against ref: every element finite (or -inf exactly where ref is),
 * rows the reference gives as exactly 0 are 0, nrms <= tol on the rest. */
static void expect_close(const teeny_tensor *t, const double *ref, const double *mag, size_t n, const char *what,
                         const char *repro)
{
    float *out = th_read(t);
    for (size_t i = 0; i < n; i++) {
        if (isinf(ref[i]) && ref[i] < 0) {
            ck_assert_msg(isinf(out[i]) && out[i] < 0, "%s[%zu] = %g; want -inf (a fully masked row); %s", what, i,
                          (double)out[i], repro);
            out[i] = 0.0f;
            continue;
        }
        ck_assert_msg(isfinite(out[i]), "%s[%zu] not written or not finite (%g); %s", what, i, (double)out[i], repro);
    }
    double *r = th_malloc(n * sizeof *r);
    for (size_t i = 0; i < n; i++)
        r[i] = isinf(ref[i]) ? 0.0 : ref[i];
    double e = mag ? th_nrms_mag(out, r, mag, n) : th_nrms(out, r, n);
    ck_assert_msg(e <= check_tol, "%s: nrms %.3g > %.1g; %s", what, e, check_tol, repro);
    free(r);
    free(out);
}

/* Rows of o (Dv wide) whose lse is -inf in the reference are exactly 0. */
static void expect_dead_rows_zero(const teeny_tensor *o, const double *lse, size_t rows, int dv, const char *repro)
{
    float *out = th_read(o);
    for (size_t i = 0; i < rows; i++)
        for (int c = 0; isinf(lse[i]) && c < dv; c++)
            ck_assert_msg(out[i * (size_t)dv + c] == 0.0f, "o row %zu (fully masked) element %d = %g; want 0; %s", i,
                          c, (double)out[i * (size_t)dv + c], repro);
    free(out);
}

/* Case c's outputs o, lse, dq, dk, dv (no views), forward then backward. */
static void run_outputs(const mk_case *c, float *out[5])
{
    teeny_ctx *ctx = th_ctx();
    mk_dev d;
    dev_make(ctx, c, 0, &d);
    TH_OK(ctx, run_forward(ctx, c, &d));
    TH_OK(ctx, run_backward(ctx, c, &d));
    th_dev *all[5] = {&d.o, &d.lse, &d.dq, &d.dk, &d.dv};
    for (int j = 0; j < 5; j++)
        out[j] = th_read(all[j]->t);
    dev_free(&d);
}

/* Rows whose every visible key is masked by a large finite value (the
 * reference's |lse| >= 1e6, finite): o and dq of each such row within
 * tol of the reference on their own (a few wrong rows would hide in the
 * whole tensor's error), and lse of every row within 10 tol relative to
 * its size (the whole tensor's error is dominated by the -1e30 rows). */
static void expect_huge_rows(const mk_dev *d, const mk_case *c, const double *o, const double *lse,
                             const double *dq, const double *mq, const char *repro)
{
    const mk_shape *s = &c->s;
    float *oo = th_read(d->o.t), *ol = th_read(d->lse.t), *odq = th_read(d->dq.t);
    for (size_t i = 0; i < c->nl; i++) {
        if (isfinite(lse[i]))
            ck_assert_msg(fabs((double)ol[i] - lse[i]) <= 10 * check_tol * fmax(1.0, fabs(lse[i])),
                          "lse[%zu] = %.9g; want %.9g; %s", i, (double)ol[i], lse[i], repro);
        if (!isfinite(lse[i]) || fabs(lse[i]) < 1e6)
            continue;
        double eo = th_nrms(oo + i * (size_t)s->Dv, o + i * (size_t)s->Dv, (size_t)s->Dv);
        double eq = th_nrms_mag(odq + i * (size_t)s->D, dq + i * (size_t)s->D, mq + i * (size_t)s->D, (size_t)s->D);
        ck_assert_msg(eo <= check_tol, "o row %zu (every key masked by a large finite value, lse %.9g): nrms %.3g; %s",
                      i, lse[i], eo, repro);
        ck_assert_msg(eq <= check_tol, "dq row %zu (every key masked by a large finite value, lse %.9g): nrms %.3g; "
                      "%s", i, lse[i], eq, repro);
    }
    free(oo);
    free(ol);
    free(odq);
}

/* Forward and backward of one case against the reference (huge: also
 * expect_huge_rows). */
static void check_case_rows(const mk_case *c, int view, const char *repro, int huge)
{
    teeny_ctx *ctx = th_ctx();
    const mk_shape *s = &c->s;
    mk_dev d;
    double scale = case_scale(c);
    double *q = th_dbl(c->q, c->nq), *k = th_dbl(c->k, c->nk), *v = th_dbl(c->v, c->nv), *g = th_dbl(c->g, c->no);
    double *o = th_malloc(c->no * sizeof *o), *lse = th_malloc(c->nl * sizeof *lse);
    double *dq = th_malloc(c->nq * sizeof *dq), *dk = th_malloc(c->nk * sizeof *dk), *dv = th_malloc(c->nv * sizeof *dv);
    double *mq = th_malloc(c->nq * sizeof *mq), *mk = th_malloc(c->nk * sizeof *mk), *mv = th_malloc(c->nv * sizeof *mv);
    dev_make(ctx, c, view, &d);
    TH_OK(ctx, run_forward(ctx, c, &d));
    TH_OK(ctx, run_backward(ctx, c, &d));
    ref_attention_forward_ex(q, k, v, c->BH, s->Nq, s->Nk, s->D, s->Dv, scale, &c->rm, o, lse);
    ref_attention_backward_ex(q, k, v, g, c->BH, s->Nq, s->Nk, s->D, s->Dv, scale, &c->rm, dq, dk, dv, mq, mk, mv);
    expect_close(d.o.t, o, NULL, c->no, "o", repro);
    expect_dead_rows_zero(d.o.t, lse, c->nl, s->Dv, repro);
    expect_close(d.lse.t, lse, NULL, c->nl, "lse", repro);
    expect_close(d.dq.t, dq, mq, c->nq, "dq", repro);
    expect_close(d.dk.t, dk, mk, c->nk, "dk", repro);
    expect_close(d.dv.t, dv, mv, c->nv, "dv", repro);
    if (huge)
        expect_huge_rows(&d, c, o, lse, dq, mq, repro);
    th_dev *outs[] = {&d.o, &d.lse, &d.dq, &d.dk, &d.dv};
    for (int i = 0; i < 5; i++)
        th_dev_check_guard(outs[i], "an output", repro);
    dev_free(&d);
    void *hs[] = {q, k, v, g, o, lse, dq, dk, dv, mq, mk, mv};
    for (int i = 0; i < 12; i++)
        free(hs[i]);
}

static void check_case(const mk_case *c, int view, const char *repro)
{
    check_case_rows(c, view, repro, 0);
}

static int sweep_count(void)
{
    return th_small() ? 4 : th_full() ? 600 : 80;
}

START_TEST(test_attention_mask_sweep)
{
    uint64_t seed = 18000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    mk_shape s = sweep_shape(&r);
    char repro[400];
    mk_case c;
    shape_str(&s, seed, repro, sizeof repro);
    if (_i % 2) /* the CPU variant on every device, on every other case */
        strncat(repro, " (CPU variant)", sizeof repro - strlen(repro) - 1);
    case_make(&c, &s, &r);
    th_cpu_kernels(_i % 2);
    check_case(&c, _i % 3 == 0, repro);
    th_cpu_kernels(-1);
    case_free(&c);
}
END_TEST

/* Wide head dims (the other programs' buckets) and long sequences, each
 * in both variants: causal bottom-right with a key-padding mask
 * [B, 1, 1, Nk], and top-left causal with softcap and a per-head mask. */
START_TEST(test_attention_mask_wide)
{
    static const mk_shape shapes[] = {
        {2, 2, 70, 300, 64, 128, 0.0f, 2, 1, 230, 0.0f, 4, {1, 0, 0, 1}, 0.1, 0},
        {1, 3, 257, 100, 128, 128, 0.07f, 3, 1, 0, 2.5f, 3, {0, 1, 1, 1}, 0.0, 1},
    };
    for (int t = 0; t < 4; t++) {
        uint64_t seed = 1800 + (uint64_t)t;
        th_rng r = th_rng_make(seed);
        char repro[400];
        mk_case c;
        shape_str(&shapes[t % 2], seed, repro, sizeof repro);
        if (t / 2)
            strncat(repro, " (CPU variant)", sizeof repro - strlen(repro) - 1);
        case_make(&c, &shapes[t % 2], &r);
        th_cpu_kernels(t / 2);
        check_case(&c, t % 2, repro);
        case_free(&c);
    }
    th_cpu_kernels(-1);
}
END_TEST

/* Rows with no visible key: queries i < -offset under a negative causal
 * offset, and a mask row of -inf. o is exactly 0, lse -inf, every
 * gradient finite, and dq of those rows exactly 0; keys no query sees get
 * dk = dv = 0 exactly. */
START_TEST(test_attention_mask_fully_masked)
{
    mk_shape s = {1, 2, 20, 24, 16, 16, 0.3f, 2, 1, -5, 0.0f, 2, {0, 0, 1, 1}, 0.0, 0};
    for (int t = 0; t < 2; t++) {
        th_rng r = th_rng_make(77);
        char repro[400];
        mk_case c;
        shape_str(&s, 77, repro, sizeof repro);
        strncat(repro, t ? " (CPU variant)" : "", sizeof repro - strlen(repro) - 1);
        case_make(&c, &s, &r);
        for (int j = 0; j < s.Nk; j++) /* query 10 sees nothing; key 3 is seen by no query */
            c.m[10 * s.Nk + j] = -INFINITY;
        for (int i = 0; i < s.Nq; i++)
            c.m[i * s.Nk + 3] = -INFINITY;
        free(c.md); /* the float64 copy again */
        c.md = th_dbl(c.m, c.nm);
        c.rm.mask = c.md;
        th_cpu_kernels(t);
        check_case(&c, 0, repro);
        teeny_ctx *ctx = th_ctx();
        mk_dev d;
        dev_make(ctx, &c, 0, &d);
        TH_OK(ctx, run_forward(ctx, &c, &d));
        TH_OK(ctx, run_backward(ctx, &c, &d));
        float *lse = th_read(d.lse.t), *dq = th_read(d.dq.t), *dk = th_read(d.dk.t), *dv = th_read(d.dv.t);
        for (int bh = 0; bh < c.BH; bh++) {
            for (int i = 0; i < s.Nq; i++) {
                int dead = i < 5 || i == 10;
                float l = lse[bh * s.Nq + i];
                ck_assert_msg(dead ? isinf(l) && l < 0 : isfinite(l), "bh %d row %d: lse %g; %s", bh, i, (double)l,
                              repro);
                for (int e = 0; dead && e < s.D; e++)
                    ck_assert_msg(dq[(bh * s.Nq + i) * s.D + e] == 0.0f, "bh %d row %d: dq %g; %s", bh, i,
                                  (double)dq[(bh * s.Nq + i) * s.D + e], repro);
            }
            for (int e = 0; e < s.D; e++)
                ck_assert_msg(dk[(bh * s.Nk + 3) * s.D + e] == 0.0f, "dk of an unseen key %g; %s",
                              (double)dk[(bh * s.Nk + 3) * s.D + e], repro);
            for (int e = 0; e < s.Dv; e++)
                ck_assert_msg(dv[(bh * s.Nk + 3) * s.Dv + e] == 0.0f, "dv of an unseen key %g; %s",
                              (double)dv[(bh * s.Nk + 3) * s.Dv + e], repro);
        }
        free(lse);
        free(dq);
        free(dk);
        free(dv);
        dev_free(&d);
        case_free(&c);
    }
    th_cpu_kernels(-1);
}
END_TEST

/* The causal frontier skips work, not just its results: keys past every
 * query's frontier (j > Nq - 1 + offset) hold NaN in k and v, which a
 * kernel that read them and masked afterwards would spread (0 * NaN).
 * o, lse, dq match the reference on the visible keys; dk and dv of the
 * unseen keys are exactly 0. Both variants, short and long sequences. */
START_TEST(test_attention_mask_causal_skips)
{
    static const mk_shape shapes[] = {{1, 2, 40, 300, 32, 32, 0.2f, 2, 1, 3, 0.0f, 0, {0}, 0.0, 0},
                                      {2, 1, 9, 70, 16, 32, 0.0f, 1, 1, 0, 0.0f, 0, {0}, 0.0, 0}};
    for (int t = 0; t < 4; t++) {
        const mk_shape *s = &shapes[t % 2];
        const int seen = s->Nq + s->offset; /* keys [0, seen) are visible to someone */
        th_rng r = th_rng_make(4242 + (uint64_t)t);
        char repro[400];
        mk_case c, cut;
        mk_shape s_cut = *s;
        shape_str(s, 4242 + (uint64_t)t, repro, sizeof repro);
        strncat(repro, t / 2 ? " (CPU variant)" : "", sizeof repro - strlen(repro) - 1);
        case_make(&c, s, &r);
        s_cut.Nk = seen;
        r = th_rng_make(4242 + (uint64_t)t);
        case_make(&cut, &s_cut, &r);
        for (int bh = 0; bh < c.BH; bh++) /* same visible keys as the full case, NaN past them */
            for (int j = 0; j < s->Nk; j++) {
                for (int e = 0; e < s->D; e++)
                    c.k[((size_t)bh * s->Nk + j) * s->D + e] = j < seen ? cut.k[((size_t)bh * seen + j) * s->D + e] : NAN;
                for (int e = 0; e < s->Dv; e++)
                    c.v[((size_t)bh * s->Nk + j) * s->Dv + e] = j < seen ? cut.v[((size_t)bh * seen + j) * s->Dv + e] : NAN;
            }
        memcpy(c.q, cut.q, c.nq * sizeof(float));
        memcpy(c.g, cut.g, c.no * sizeof(float));
        th_cpu_kernels(t / 2);
        teeny_ctx *ctx = th_ctx();
        mk_dev d, dc;
        dev_make(ctx, &c, 0, &d);
        dev_make(ctx, &cut, 0, &dc);
        TH_OK(ctx, run_forward(ctx, &c, &d));
        TH_OK(ctx, run_backward(ctx, &c, &d));
        TH_OK(ctx, run_forward(ctx, &cut, &dc));
        TH_OK(ctx, run_backward(ctx, &cut, &dc));
        float *o = th_read(d.o.t), *oc = th_read(dc.o.t), *dq = th_read(d.dq.t), *dqc = th_read(dc.dq.t);
        float *dk = th_read(d.dk.t), *dv = th_read(d.dv.t);
        /* the cut case (every key visible to someone) is checked by the sweep's
         * rules; here the full case must give its bits where they overlap */
        ck_assert_msg(!memcmp(o, oc, c.no * sizeof(float)), "o differs from the case without the unseen keys; %s",
                      repro);
        ck_assert_msg(!memcmp(dq, dqc, c.nq * sizeof(float)), "dq differs from the case without the unseen keys; %s",
                      repro);
        for (int bh = 0; bh < c.BH; bh++)
            for (int j = seen; j < s->Nk; j++) {
                for (int e = 0; e < s->D; e++)
                    ck_assert_msg(dk[((size_t)bh * s->Nk + j) * s->D + e] == 0.0f, "dk of unseen key %d: %g; %s", j,
                                  (double)dk[((size_t)bh * s->Nk + j) * s->D + e], repro);
                for (int e = 0; e < s->Dv; e++)
                    ck_assert_msg(dv[((size_t)bh * s->Nk + j) * s->Dv + e] == 0.0f, "dv of unseen key %d: %g; %s", j,
                                  (double)dv[((size_t)bh * s->Nk + j) * s->Dv + e], repro);
            }
        check_case(&cut, 0, repro);
        free(o);
        free(oc);
        free(dq);
        free(dqc);
        free(dk);
        free(dv);
        dev_free(&d);
        dev_free(&dc);
        case_free(&c);
        case_free(&cut);
    }
    th_cpu_kernels(-1);
}
END_TEST

/* The same inputs twice give bit-identical outputs and gradients (both
 * variants; mask, causal and softcap together). */
START_TEST(test_attention_mask_determinism)
{
    mk_shape s = {2, 2, 130, 100, 32, 64, 0.0f, 2, 1, 0, 3.0f, 4, {1, 1, 1, 1}, 0.1, 1};
    for (int t = 0; t < 2; t++) {
        th_rng r = th_rng_make(5150);
        mk_case c;
        float *out[2][5];
        case_make(&c, &s, &r);
        th_cpu_kernels(t);
        for (int run = 0; run < 2; run++)
            run_outputs(&c, out[run]);
        size_t n[5] = {c.no, c.nl, c.nq, c.nk, c.nv};
        for (int j = 0; j < 5; j++) {
            ck_assert_msg(!memcmp(out[0][j], out[1][j], n[j] * sizeof(float)), "output %d differs between runs "
                          "(variant %d)", j, t);
            free(out[0][j]);
            free(out[1][j]);
        }
        case_free(&c);
    }
    th_cpu_kernels(-1);
}
END_TEST

/* ---- rows masked by a large finite value ----
 *
 * Hugging Face models pad with -1e30 or -FLT_MAX (torch.finfo.min), not
 * -inf. A query row whose every key carries such a value has every score
 * equal in fp32 (q.k is far below their spacing), the softmax is the
 * uniform average (the float64 reference's too: its sums round the same
 * way), and lse = m + log(l) rounds back to m, so a backward that took
 * P = exp(s - lse) had P = 1 for every key: gradients Nk times too large
 * (issue 43 item 2). */

/* Head dims of every bucket (16/16, 64/128, 128/256), Nk 70 (the issue's),
 * a bottom-right causal frontier, softcap; masks of rank 2, 4 and 3 whose
 * last two dims are full. */
static const mk_shape huge_shapes[] = {
    {1, 2, 20, 70, 16, 16, 0.0f, 2, 0, 0, 0.0f, 2, {0, 0, 1, 1}, 0.0, 0},
    {2, 2, 37, 70, 64, 128, 0.0f, 2, 1, 33, 0.0f, 4, {1, 0, 1, 1}, 0.0, 0},
    {1, 2, 33, 45, 128, 256, 0.09f, 2, 0, 0, 2.0f, 3, {0, 1, 1, 1}, 0.0, 0},
};

/* Case c's mask (a stack of [Nq, Nk] matrices) with these query rows in
 * every matrix: i % 6 == 1 every key -1e30, i % 6 == 3 every key -FLT_MAX,
 * i == 5 every key -inf, any other i % 6 == 5 every key masked by the
 * three in turn (-1e30, the largest, on keys 0, 3, 6, ...), i % 12 == 0
 * -1e30 on every key but one (a live row); the other rows as drawn. */
static void huge_rows(mk_case *c)
{
    const int nq = c->s.Nq, nk = c->s.Nk;
    ck_assert(c->s.mrank >= 2 && c->s.mfull[2] && c->s.mfull[3]);
    for (size_t m0 = 0; m0 < c->nm; m0 += (size_t)nq * nk)
        for (int i = 0; i < nq; i++)
            for (int j = 0; j < nk; j++) {
                float *x = &c->m[m0 + (size_t)i * nk + j];
                if (i % 6 == 1)
                    *x = -1e30f;
                else if (i % 6 == 3)
                    *x = -FLT_MAX;
                else if (i == 5)
                    *x = -INFINITY;
                else if (i % 6 == 5)
                    *x = j % 3 == 0 ? -1e30f : j % 3 == 1 ? -FLT_MAX : -INFINITY;
                else if (i % 12 == 0 && j != i % nk)
                    *x = -1e30f;
            }
    free(c->md); /* the float64 copy again */
    c->md = th_dbl(c->m, c->nm);
    c->rm.mask = c->md;
}

/* huge_shapes[t]'s case with its huge_rows against the reference, row by
 * row for the masked ones (how: the kernels, for the reproducer). */
static void huge_check(int t, uint64_t seed, int view, const char *how)
{
    th_rng r = th_rng_make(seed);
    char repro[400];
    mk_case c;
    shape_str(&huge_shapes[t], seed, repro, sizeof repro);
    strncat(repro, " (rows masked by -1e30, -FLT_MAX, -inf)", sizeof repro - strlen(repro) - 1);
    strncat(repro, how, sizeof repro - strlen(repro) - 1);
    case_make(&c, &huge_shapes[t], &r);
    huge_rows(&c);
    check_case_rows(&c, view, repro, 1);
    case_free(&c);
}

/* Every bucket in the portable and the CPU variant (one case a view). */
START_TEST(test_attention_mask_huge_finite)
{
    for (int t = 0; t < 6; t++) {
        th_cpu_kernels(t / 3);
        huge_check(t % 3, 4300 + (uint64_t)t, t == 1, t / 3 ? " (CPU variant)" : "");
    }
    th_cpu_kernels(-1);
}
END_TEST

/* Masks on the tf32 tensor-core kernels (teeny_ctx_set_tf32, where the
 * device has them): causal frontiers, broadcast masks with -inf entries,
 * fully masked rows and softcap within TOL_TF32 of the reference (dead
 * rows exactly as in fp32), and the same bits twice. A device without
 * them counts as skipped. */
static void mask_tf32_checks(teeny_ctx *ctx, int count)
{
    static const mk_shape shapes[] = {
        {2, 2, 130, 100, 32, 64, 0.0f, 2, 1, 0, 3.0f, 4, {1, 1, 1, 1}, 0.1, 1},
        {2, 2, 70, 300, 64, 64, 0.0f, 2, 1, 230, 0.0f, 4, {1, 0, 0, 1}, 0.1, 0},
        {1, 3, 257, 100, 64, 32, 0.07f, 3, 1, 0, 2.5f, 3, {0, 1, 1, 1}, 0.0, 1},
        {1, 2, 90, 300, 16, 16, 0.2f, 2, 1, -40, 1.5f, 0, {0, 0, 0, 0}, 0.0, 0},
    };
    check_tol = TOL_TF32;
    for (int t = 0; t < count && t < (int)(sizeof shapes / sizeof shapes[0]); t++) {
        uint64_t seed = 1900 + (uint64_t)t;
        th_rng r = th_rng_make(seed);
        char repro[400];
        mk_case c;
        shape_str(&shapes[t], seed, repro, sizeof repro);
        strncat(repro, " (tf32)", sizeof repro - strlen(repro) - 1);
        case_make(&c, &shapes[t], &r);
        check_case(&c, t % 2, repro);
        case_free(&c);
    }
    for (int t = 0; t < 2; t++) /* the buckets the tf32 kernels take */
        huge_check(t, 4400 + (uint64_t)t, t, " (tf32)");
    check_tol = TOL;
    th_rng r = th_rng_make(1950);
    mk_case c;
    float *out[2][5];
    case_make(&c, &shapes[0], &r);
    for (int run = 0; run < 2; run++)
        run_outputs(&c, out[run]);
    size_t n[5] = {c.no, c.nl, c.nq, c.nk, c.nv};
    for (int j = 0; j < 5; j++) {
        ck_assert_msg(!memcmp(out[0][j], out[1][j], n[j] * sizeof(float)), "tf32: output %d differs between runs", j);
        free(out[0][j]);
        free(out[1][j]);
    }
    case_free(&c);
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
}

START_TEST(test_attention_mask_tf32)
{
    teeny_ctx *ctx = th_ctx();
    TH_SKIP_NO_TF32(ctx);
    mask_tf32_checks(ctx, 4);
}
END_TEST

/* The first two cases (both head-dim buckets, causal offsets, a mask with
 * -inf entries, softcap, fully masked rows) on the nvidia profile's tf32
 * kernels with the mma and shuffles emulated in OpenCL C
 * (the test hook ATTENTION_TF32_EMULATE), on any device that can take the
 * profile's work-groups. */
START_TEST(test_attention_mask_tf32_emulated)
{
    teeny_ctx *ctx = th_ctx();
    if (!th_profile("nvidia"))
        th_skip("%s cannot take the nvidia profile's work-groups and local memory", teeny_ctx_device_name(ctx));
    th_hook(TEENY__HOOK_ATTENTION_TF32_EMULATE, 1);
    ctx->tune.attention_tf32.fp32_x3 = 0; /* fp32 calls on the FMA kernels */
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    mask_tf32_checks(ctx, 2);
    static const mk_shape one = {2, 2, 130, 100, 32, 64, 0.0f, 2, 1, 0, 3.0f, 4, {1, 1, 1, 1}, 0.1, 1};
    th_rng r = th_rng_make(1960);
    mk_case c;
    float *out[2][5];
    case_make(&c, &one, &r);
    for (int run = 0; run < 2; run++) { /* tf32, fp32 */
        TH_OK(ctx, teeny_ctx_set_tf32(ctx, run == 0));
        run_outputs(&c, out[run]);
    }
    size_t n[5] = {c.no, c.nl, c.nq, c.nk, c.nv};
    for (int j = 0; j < 5; j++) {
        ck_assert_msg(memcmp(out[0][j], out[1][j], n[j] * sizeof(float)),
                      "output %d has fp32's bits: the emulated tf32 kernels did not run", j);
        free(out[0][j]);
        free(out[1][j]);
    }
    case_free(&c);
    /* fp32 calls by 3xTF32 on the same kernels: rows masked by large
     * finite values within fp32's tolerance */
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    ctx->tune.attention_tf32.fp32_x3 = 1;
    for (int t = 0; t < 2; t++)
        huge_check(t, 4500 + (uint64_t)t, !t, " (3xTF32 emulated)");
    th_hook(TEENY__HOOK_ATTENTION_TF32_EMULATE, 0);
    th_profile(NULL);
}
END_TEST

/* The CPU variants' loops split into launches (a device that ends a
 * work-item's loops after L trips) give the bits of one launch with masks
 * too: the frontier trims the loop inside whichever launch it falls in.
 * launches: the fewest launches the split forward and backward take. */
static void split_compare(mk_case *c, long long limit, long launches, const char *what)
{
    teeny_ctx *ctx = th_ctx();
    mk_dev d;
    th_cpu_kernels(1);
    dev_make(ctx, c, 0, &d);
    th_dev *all[5] = {&d.o, &d.lse, &d.dq, &d.dk, &d.dv};
    size_t n[5] = {c->no, c->nl, c->nq, c->nk, c->nv};
    float *one[5];
    th_loop_limit(0);
    TH_OK(ctx, run_forward(ctx, c, &d));
    TH_OK(ctx, run_backward(ctx, c, &d));
    for (int j = 0; j < 5; j++)
        one[j] = th_read(all[j]->t);
    th_loop_limit(limit);
    for (int j = 0; j < 5; j++)
        th_poison(all[j]->t);
    teeny__calls_reset();
    TH_OK(ctx, run_forward(ctx, c, &d));
    TH_OK(ctx, run_backward(ctx, c, &d));
    ck_assert_int_ge(teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel), launches);
    for (int j = 0; j < 5; j++) {
        float *x = th_read(all[j]->t);
        ck_assert_msg(!memcmp(x, one[j], n[j] * sizeof(float)), "%s: output %d of split launches differs from one "
                      "launch's", what, j);
        free(x);
        free(one[j]);
    }
    th_loop_limit(-1);
    th_cpu_kernels(-1);
    dev_free(&d);
}

START_TEST(test_attention_mask_split_loops)
{
    mk_shape s = {1, 2, 90, 300, 32, 32, 0.2f, 2, 1, 150, 1.5f, 3, {0, 1, 0, 1}, 0.1, 0};
    th_rng r = th_rng_make(31337);
    mk_case c;
    case_make(&c, &s, &r);
    /* unsplit: the forward, Di, dK/dV and dQ are four launches */
    split_compare(&c, 25000, 3 * 2 + 1, "a causal mask");
    case_free(&c);
    /* rows masked by large finite values: their statistics' loop over the
     * keys (attn_bwd_prep) split too, and the split launches right */
    mk_shape h = {1, 2, 40, 300, 32, 32, 0.2f, 2, 1, 150, 0.0f, 2, {0, 0, 1, 1}, 0.0, 0};
    r = th_rng_make(31338);
    case_make(&c, &h, &r);
    huge_rows(&c);
    split_compare(&c, 12000, 3 * 2 + 1, "rows masked by -1e30, -FLT_MAX, -inf");
    th_loop_limit(12000);
    check_case_rows(&c, 0, "the split launches of rows masked by -1e30, -FLT_MAX, -inf", 1);
    th_loop_limit(-1);
    case_free(&c);
}
END_TEST

/* The reference backward with masks against central differences of the
 * reference forward (loss sum(g * o)): causal, a broadcast mask with -inf
 * entries and softcap. */
static double fd_loss(const mk_case *c, const double *q, const double *k, const double *v, const double *g)
{
    double *o = th_malloc(c->no * sizeof *o), L = 0;
    ref_attention_forward_ex(q, k, v, c->BH, c->s.Nq, c->s.Nk, c->s.D, c->s.Dv, case_scale(c), &c->rm, o, NULL);
    for (size_t i = 0; i < c->no; i++)
        L += g[i] * o[i];
    free(o);
    return L;
}

START_TEST(test_attention_mask_finite_differences)
{
    mk_shape s = {2, 1, 4, 5, 3, 4, 0.7f, 1, 1, 1, 1.3f, 3, {0, 1, 1, 1}, 0.15, 0};
    const double h = 1e-6;
    th_rng r = th_rng_make(2719);
    mk_case c;
    case_make(&c, &s, &r);
    double *q = th_dbl(c.q, c.nq), *k = th_dbl(c.k, c.nk), *v = th_dbl(c.v, c.nv), *g = th_dbl(c.g, c.no);
    double *dq = th_malloc(c.nq * sizeof *dq), *dk = th_malloc(c.nk * sizeof *dk), *dv = th_malloc(c.nv * sizeof *dv);
    ref_attention_backward_ex(q, k, v, g, c.BH, s.Nq, s.Nk, s.D, s.Dv, case_scale(&c), &c.rm, dq, dk, dv, NULL, NULL,
                              NULL);
    double *params[3] = {q, k, v}, *grads[3] = {dq, dk, dv};
    size_t counts[3] = {c.nq, c.nk, c.nv};
    int nonzero = 0;
    for (int p = 0; p < 3; p++)
        for (size_t i = 0; i < counts[p]; i++) {
            double keep = params[p][i];
            params[p][i] = keep + h;
            double lp = fd_loss(&c, q, k, v, g);
            params[p][i] = keep - h;
            double lm = fd_loss(&c, q, k, v, g);
            params[p][i] = keep;
            double fd = (lp - lm) / (2 * h);
            nonzero += fabs(fd) > 1e-3;
            ck_assert_msg(fabs(fd - grads[p][i]) <= 1e-6 * (1 + fabs(fd)),
                          "param %d[%zu]: analytic %.9g, finite difference %.9g", p, i, grads[p][i], fd);
        }
    ck_assert_int_gt(nonzero, (int)(c.nq + c.nk + c.nv) / 2);
    free(q);
    free(k);
    free(v);
    free(g);
    free(dq);
    free(dk);
    free(dv);
    case_free(&c);
}
END_TEST

/* ---- the graph ---- */

/* q from a linear layer (a parameter upstream), k, v inputs, a constant
 * [Nq, Nk] mask with -inf entries, causal: the inference plan gives the
 * eager function's bits; the training plan compiles and its backward runs;
 * a mask built from a parameter is refused at compile (training) with
 * TEENY_ERR_UNSUPPORTED, and compiles for inference. */
START_TEST(test_attention_mask_graph)
{
    enum { B = 3, NQ = 6, NK = 9, D = 8 };
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g = NULL;
    teeny_plan *inf = NULL, *train = NULL;
    th_rng r = th_rng_make(606);
    float mask[NQ * NK], xs[B * NQ * D], ks[B * NK * D], vs[B * NK * D];
    th_fill_normal(&r, mask, NQ * NK, 0, 1);
    mask[5] = mask[NK + 2] = -INFINITY;
    th_fill_normal(&r, xs, B * NQ * D, 0, 1);
    th_fill_normal(&r, ks, B * NK * D, 0, 1);
    th_fill_normal(&r, vs, B * NK * D, 0, 1);
    int64_t xshape[2] = {-1, NQ * D}, kshape[3] = {-1, NK, D}, qshape[3] = {-1, NQ, D}, mshape[2] = {NQ, NK};
    teeny_node x, q, k, v, m, o, loss, o2, mx, ml, mr, bad;
    teeny_attention_params p = TEENY_ATTENTION_PARAMS_INIT;
    p.causal = 1;
    p.causal_offset = NK - NQ;
    TH_OK(ctx, teeny_graph_create(ctx, 5, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 2, xshape, &x));
    TH_OK(ctx, teeny_graph_input(g, "k", 3, kshape, &k));
    TH_OK(ctx, teeny_graph_input(g, "v", 3, kshape, &v));
    TH_OK(ctx, teeny_graph_constant(g, "mask", 2, mshape, mask, &m));
    TH_OK(ctx, teeny_graph_linear(g, "proj", x, NQ * D, 1, &q));
    TH_OK(ctx, teeny_graph_reshape(g, "q", q, 3, qshape, &q));
    TH_OK(ctx, teeny_graph_attention_ex(g, "att", q, k, v, m, &p, &o));
    TH_OK(ctx, teeny_graph_mark_output(g, o));
    teeny_reduce_params rp = {7, 0, 0};
    TH_OK(ctx, teeny_graph_reduce(g, "loss", o, &rp, &loss));
    /* bad attributes: nothing added */
    teeny_attention_params badp = p;
    badp.causal = 2;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_attention_ex(g, "bad", q, k, v, m, &badp, &bad));
    ck_assert_int_eq(bad, -1);
    badp = p;
    badp.heads = 4; /* does not divide BH = 3 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_graph_attention_ex(g, "bad", q, k, v, m, &badp, &bad));
    ck_assert_int_eq(bad, -1);

    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = B;
    pp.training = 0;
    pp.reuse_memory = 0; /* q stays readable after forward */
    TH_OK(ctx, teeny_graph_compile(g, &pp, &inf));
    teeny_tensor *tx, *tk, *tv, *tq;
    TH_OK(ctx, teeny_plan_tensor(inf, x, &tx));
    TH_OK(ctx, teeny_plan_tensor(inf, k, &tk));
    TH_OK(ctx, teeny_plan_tensor(inf, v, &tv));
    TH_OK(ctx, teeny_tensor_write(tx, xs, B * NQ * D));
    TH_OK(ctx, teeny_tensor_write(tk, ks, B * NK * D));
    TH_OK(ctx, teeny_tensor_write(tv, vs, B * NK * D));
    TH_OK(ctx, teeny_plan_forward(inf));
    float out[B * NQ * D];
    TH_OK(ctx, teeny_plan_read(inf, o, out, B * NQ * D));
    /* the eager function on the plan's q gives the same bits */
    TH_OK(ctx, teeny_plan_tensor(inf, q, &tq));
    teeny_tensor *em = th_tensor_from(ctx, 2, mshape, mask), *eo = th_tensor(ctx, 3, (int64_t[3]){B, NQ, D});
    TH_OK(ctx, teeny_attention_forward_ex(ctx, tq, tk, tv, em, &p, eo, NULL));
    float *eager = th_read(eo);
    ck_assert_msg(!memcmp(out, eager, sizeof out), "graph attention_ex differs from the eager call");
    free(eager);

    pp.training = 1;
    pp.loss = loss;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &train));
    TH_OK(ctx, teeny_plan_tensor(train, x, &tx));
    TH_OK(ctx, teeny_plan_tensor(train, k, &tk));
    TH_OK(ctx, teeny_plan_tensor(train, v, &tv));
    TH_OK(ctx, teeny_tensor_write(tx, xs, B * NQ * D));
    TH_OK(ctx, teeny_tensor_write(tk, ks, B * NK * D));
    TH_OK(ctx, teeny_tensor_write(tv, vs, B * NK * D));
    TH_OK(ctx, teeny_plan_forward(train));
    TH_OK(ctx, teeny_plan_backward(train));
    teeny_tensor *w, *wg;
    const char *wname;
    TH_OK(ctx, teeny_graph_param(g, 0, &wname, &w, &wg));
    float *grad = th_read(wg);
    int64_t nw = teeny_tensor_numel(wg), nonzero = 0;
    for (int64_t i = 0; i < nw; i++) {
        ck_assert_msg(isfinite(grad[i]), "%s gradient %lld not finite", wname, (long long)i);
        nonzero += grad[i] != 0.0f;
    }
    ck_assert_msg(nonzero > nw / 2, "%s gradient mostly zero (%lld of %lld)", wname, (long long)nonzero,
                  (long long)nw);
    free(grad);
    teeny_plan_destroy(train);
    teeny_plan_destroy(inf);
    train = inf = NULL;

    /* a mask from a parameter: [B, NQ * NK] -> [B, NQ, NK] (heads 0: per matrix) */
    int64_t m3[3] = {-1, NQ, NK};
    TH_OK(ctx, teeny_graph_linear(g, "mproj", x, NQ * NK, 0, &mx));
    TH_OK(ctx, teeny_graph_reshape(g, "mr", mx, 3, m3, &mr));
    TH_OK(ctx, teeny_graph_attention_ex(g, "att2", q, k, v, mr, &p, &o2));
    TH_OK(ctx, teeny_graph_reduce(g, "loss2", o2, &rp, &ml));
    pp.loss = ml;
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_graph_compile(g, &pp, &train));
    ck_assert_ptr_null(train);
    ck_assert_msg(strstr(teeny_last_error(ctx), "mask") != NULL, "message: %s", teeny_last_error(ctx));
    pp.training = 0;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &inf));
    teeny_plan_destroy(inf);
    teeny_tensor_destroy(em);
    teeny_tensor_destroy(eo);
    teeny_graph_destroy(g);
}
END_TEST

/* ---- errors: exact status, nothing modified ---- */

START_TEST(test_attention_mask_errors)
{
    enum { B = 2, H = 3, NQ = 5, NK = 7, D = 8, BH = B * H };
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(98);
    int64_t qs[3] = {BH, NQ, D}, ks[3] = {BH, NK, D}, ls[2] = {BH, NQ};
    int64_t m_ok[4] = {B, 1, 1, NK}, m_r1[1] = {NK}, m_r5[5] = {1, B, H, NQ, NK}, m_bad_b[4] = {3, H, NQ, NK};
    int64_t m_bad_h[3] = {2, NQ, NK}, m_bad_q[2] = {NQ + 1, NK}, m_bad_k[2] = {NQ, NK - 1};
    float buf[BH * NK * D];
    th_fill_normal(&r, buf, sizeof buf / sizeof buf[0], 0, 1);
    teeny_tensor *q = th_tensor_from(ctx, 3, qs, buf), *k = th_tensor_from(ctx, 3, ks, buf);
    teeny_tensor *v = th_tensor_from(ctx, 3, ks, buf), *o = th_tensor_from(ctx, 3, qs, buf);
    teeny_tensor *lse = th_tensor_from(ctx, 2, ls, buf), *g = th_tensor_from(ctx, 3, qs, buf);
    teeny_tensor *dq = th_tensor_from(ctx, 3, qs, buf), *dk = th_tensor_from(ctx, 3, ks, buf);
    teeny_tensor *dv = th_tensor_from(ctx, 3, ks, buf), *mask = th_tensor_from(ctx, 4, m_ok, buf);
    teeny_tensor *mr1 = th_tensor(ctx, 1, m_r1), *mr5 = th_tensor(ctx, 5, m_r5), *mbb = th_tensor(ctx, 4, m_bad_b);
    teeny_tensor *mbh = th_tensor(ctx, 3, m_bad_h), *mbq = th_tensor(ctx, 2, m_bad_q), *mbk = th_tensor(ctx, 2, m_bad_k);
    teeny_tensor *mi = NULL, *mo = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 4, m_ok, &mi));
    TH_OK(ctx, teeny_tensor_view(o, 0, 4, m_ok, &mo)); /* the mask inside o */
    teeny_tensor *watched[] = {q, k, v, o, lse, g, dq, dk, dv, mask};
    float *before[10];
    for (int i = 0; i < 10; i++)
        before[i] = th_read(watched[i]);
    teeny_attention_params ok = TEENY_ATTENTION_PARAMS_INIT, p;
    ok.heads = H;
    ok.causal = 1;

#define FWD(m, pp) teeny_attention_forward_ex(ctx, q, k, v, m, pp, o, lse)
#define BWD(m, pp) teeny_attention_backward_ex(ctx, q, k, v, m, pp, o, lse, g, dq, dk, dv)
#define BOTH(want, m, pp)                                                                                          \
    do {                                                                                                           \
        TH_STATUS(ctx, want, FWD(m, pp));                                                                          \
        TH_STATUS(ctx, want, BWD(m, pp));                                                                          \
    } while (0)
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_attention_forward_ex(NULL, q, k, v, mask, &ok, o, lse));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_attention_backward_ex(NULL, q, k, v, mask, &ok, o, lse, g, dq, dk, dv));
    BOTH(TEENY_ERR_ARG, mask, NULL);
    p = ok, p.causal = 2;
    BOTH(TEENY_ERR_ARG, mask, &p);
    p = ok, p.causal = -1;
    BOTH(TEENY_ERR_ARG, mask, &p);
    p = ok, p.causal = 0, p.causal_offset = 1; /* an offset without causal */
    BOTH(TEENY_ERR_ARG, mask, &p);
    ck_assert_msg(strstr(teeny_last_error(ctx), "causal_offset") != NULL, "message: %s", teeny_last_error(ctx));
    p = ok, p.causal_offset = -NQ - 1;
    BOTH(TEENY_ERR_ARG, mask, &p);
    p = ok, p.causal_offset = NK + 1;
    BOTH(TEENY_ERR_ARG, mask, &p);
    p = ok, p.softcap = -1.0f;
    BOTH(TEENY_ERR_ARG, mask, &p);
    p = ok, p.softcap = NAN;
    BOTH(TEENY_ERR_ARG, mask, &p);
    p = ok, p.softcap = INFINITY;
    BOTH(TEENY_ERR_ARG, mask, &p);
    p = ok, p.scale = NAN;
    BOTH(TEENY_ERR_ARG, mask, &p);
    p = ok, p.heads = -1;
    BOTH(TEENY_ERR_SHAPE, mask, &p);
    p = ok, p.heads = 4; /* does not divide BH = 6 */
    BOTH(TEENY_ERR_SHAPE, mask, &p);
    p = ok, p.heads = 0; /* H = BH = 6, B = 1: the mask's B = 2 is neither */
    BOTH(TEENY_ERR_SHAPE, mask, &p);
    BOTH(TEENY_ERR_SHAPE, mr1, &ok);  /* rank 1 */
    BOTH(TEENY_ERR_SHAPE, mr5, &ok);  /* rank 5 */
    BOTH(TEENY_ERR_SHAPE, mbb, &ok);  /* B 3 */
    BOTH(TEENY_ERR_SHAPE, mbh, &ok);  /* H 2 */
    BOTH(TEENY_ERR_SHAPE, mbq, &ok);  /* Nq + 1 */
    BOTH(TEENY_ERR_SHAPE, mbk, &ok);  /* Nk - 1 */
    ck_assert_msg(strstr(teeny_last_error(ctx), "mask has shape") != NULL, "message: %s", teeny_last_error(ctx));
    BOTH(TEENY_ERR_ARG, mi, &ok);     /* int32 */
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(mo, &ok)); /* o overlaps the mask */
    ck_assert_msg(strstr(teeny_last_error(ctx), "overlaps") != NULL, "message: %s", teeny_last_error(ctx));
#undef FWD
#undef BWD
#undef BOTH
    for (int i = 0; i < 10; i++) {
        float *now = th_read(watched[i]);
        ck_assert_msg(!memcmp(now, before[i], (size_t)teeny_tensor_numel(watched[i]) * sizeof(float)),
                      "a rejected call modified tensor %d", i);
        free(now);
        free(before[i]);
    }
    /* the range's ends are accepted */
    p = ok, p.causal_offset = -NQ;
    TH_OK(ctx, teeny_attention_forward_ex(ctx, q, k, v, mask, &p, o, lse));
    p = ok, p.causal_offset = NK;
    TH_OK(ctx, teeny_attention_forward_ex(ctx, q, k, v, NULL, &p, o, NULL));
    teeny_tensor *ts[] = {q, k, v, o, lse, g, dq, dk, dv, mask, mr1, mr5, mbb, mbh, mbq, mbk, mi, mo};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        teeny_tensor_destroy(ts[i]);
}
END_TEST

Suite *suite_attention_mask(void)
{
    Suite *s = suite_create("attention_mask");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_attention_mask_sweep, 0, sweep_count());
    tcase_add_test(fwd, test_attention_mask_fully_masked);
    tcase_add_test(fwd, test_attention_mask_huge_finite);
    tcase_add_test(fwd, test_attention_mask_causal_skips);
    tcase_add_test(fwd, test_attention_mask_graph);
    tcase_add_test(fwd, test_attention_mask_tf32);
    tcase_add_test(fwd, test_attention_mask_tf32_emulated);
    if (!th_small()) {
        tcase_add_test(fwd, test_attention_mask_wide);
        tcase_add_test(fwd, test_attention_mask_determinism);
    }
    tcase_add_test(bwd, test_attention_mask_split_loops);
    tcase_add_test(bwd, test_attention_mask_finite_differences);
    tcase_add_test(err, test_attention_mask_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
