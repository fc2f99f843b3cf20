/*
 * test_psa.c -- PSA attention: the rearrangement ops (pack_qkv, extract_v,
 * merge_attn) and their backwards against the reference's index maps, the
 * fused attention on the NCHW qkv tensor against the float64 reference
 * written from the definition, the pack -> attention -> merge pipeline
 * against the fused path (forward and backward), launch and allocation
 * counts of the fused path, determinism, views, and every error path.
 */
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

typedef struct {
    int B, heads, kd, H, W;
    int view;
} psa_shape;

static const psa_shape shapes[] = {
    {1, 1, 8, 1, 1, 0},  {2, 2, 16, 5, 7, 1}, {1, 2, 32, 20, 20, 0}, {2, 3, 16, 7, 9, 1},
    {1, 2, 64, 8, 8, 0}, {1, 1, 128, 4, 6, 1}, {3, 1, 4, 3, 11, 0},  {1, 4, 32, 13, 10, 1},
};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static const psa_shape small_shapes[] = {{1, 1, 8, 1, 1, 0}, {2, 2, 16, 5, 7, 1}, {1, 1, 128, 2, 3, 1}};

static int n_cases(void)
{
    return th_small() ? 3 : N_SHAPES;
}

static psa_shape shape_at(int i)
{
    return th_small() ? small_shapes[i] : shapes[i];
}

static void shape_str(const psa_shape *s, uint64_t seed, char *buf, size_t cap)
{
    snprintf(buf, cap, "psa B %d heads %d kd %d H %d W %d%s seed %llu", s->B, s->heads, s->kd, s->H, s->W,
             s->view ? " (views)" : "", (unsigned long long)seed);
}

/* Copies must be exact: every element equal to the reference's. */
static void expect_exact(const teeny_tensor *t, const double *ref, size_t n, const char *what, const char *repro)
{
    float *out = th_read(t);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(out[i] == (float)ref[i], "%s: element %zu is %g, want %g; %s", what, i, (double)out[i], ref[i],
                      repro);
    free(out);
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
    psa_shape s;
    int N, BH;
    size_t n_qkv, n_o, n_half, n_lse;
    int64_t qkv_shape[4], o_shape[4], packed_shape[4], half_shape[3], lse_shape[2];
    float *qkv, *g;
} psa_case;

static void case_make(psa_case *c, const psa_shape *s, th_rng *r)
{
    c->s = *s;
    c->N = s->H * s->W;
    c->BH = s->B * s->heads;
    c->n_qkv = (size_t)s->B * s->heads * 4 * s->kd * c->N;
    c->n_o = c->n_qkv / 2;
    c->n_half = c->n_qkv / 4;
    c->n_lse = (size_t)c->BH * c->N;
    int64_t qs[4] = {s->B, (int64_t)s->heads * 4 * s->kd, s->H, s->W}, os[4] = {s->B, (int64_t)s->heads * 2 * s->kd,
                                                                             s->H, s->W};
    int64_t ps[4] = {4, c->BH, c->N, s->kd}, hs[3] = {c->BH, c->N, s->kd}, ls[2] = {c->BH, c->N};
    memcpy(c->qkv_shape, qs, sizeof qs);
    memcpy(c->o_shape, os, sizeof os);
    memcpy(c->packed_shape, ps, sizeof ps);
    memcpy(c->half_shape, hs, sizeof hs);
    memcpy(c->lse_shape, ls, sizeof ls);
    c->qkv = th_malloc(c->n_qkv * sizeof(float));
    c->g = th_malloc(c->n_o * sizeof(float));
    th_fill_normal(r, c->qkv, c->n_qkv, 0, 1);
    th_fill_normal(r, c->g, c->n_o, 0, 1);
}

static void case_free(psa_case *c)
{
    free(c->qkv);
    free(c->g);
}

/* The fused op's device tensors: qkv and the upstream gradient g filled
 * from the case, o, lse and d_qkv empty; off: each one's offset in its
 * buffer (a view when non-zero). */
typedef struct {
    th_dev q, g, o, l, dq;
} psa_devs;

static psa_devs devs_make(teeny_ctx *ctx, const psa_case *c, int off)
{
    psa_devs d;
    d.q = th_dev_make(ctx, 0, 4, c->qkv_shape, off, c->qkv);
    d.g = th_dev_make(ctx, 0, 4, c->o_shape, off, c->g);
    d.o = th_dev_make(ctx, 0, 4, c->o_shape, off, NULL);
    d.l = th_dev_make(ctx, 0, 2, c->lse_shape, off, NULL);
    d.dq = th_dev_make(ctx, 0, 4, c->qkv_shape, off, NULL);
    return d;
}

static void devs_free(psa_devs *d)
{
    th_dev *ds[] = {&d->q, &d->g, &d->o, &d->l, &d->dq};
    for (int i = 0; i < 5; i++)
        th_dev_free(ds[i]);
}

/* ---- rearrangements ---- */

START_TEST(test_psa_rearrange_forward)
{
    teeny_ctx *ctx = th_ctx();
    psa_shape sh = shape_at(_i);
    uint64_t seed = 300 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    char repro[160];
    psa_case c;
    shape_str(&sh, seed, repro, sizeof repro);
    case_make(&c, &sh, &r);
    int heads = sh.heads, kd = sh.kd;
    double *qkv = th_dbl(c.qkv, c.n_qkv), *packed = th_malloc(c.n_qkv * sizeof(double));
    double *v = th_malloc(c.n_o * sizeof(double)), *out = th_malloc(c.n_o * sizeof(double));
    th_dev tq = th_dev_make(ctx, 0, 4, c.qkv_shape, (sh.view) ? 5 : 0, c.qkv), tp = th_dev_make(ctx, 0, 4, c.packed_shape, (sh.view) ? 5 : 0, NULL);
    th_dev tv = th_dev_make(ctx, 0, 4, c.o_shape, (sh.view) ? 5 : 0, NULL), to = th_dev_make(ctx, 0, 4, c.o_shape, (sh.view) ? 5 : 0, NULL);
    th_dev tlo = th_dev_make(ctx, 0, 3, c.half_shape, (sh.view) ? 5 : 0, c.qkv), thi = th_dev_make(ctx, 0, 3, c.half_shape, (sh.view) ? 5 : 0, c.g);

    TH_OK(ctx, teeny_psa_pack_qkv(ctx, tq.t, heads, kd, tp.t));
    ref_psa_pack(qkv, sh.B, heads, kd, c.N, packed);
    expect_exact(tp.t, packed, c.n_qkv, "packed", repro);
    th_dev_check_guard(&tp, "packed", repro);

    th_cpu_kernels(_i % 2); /* the extraction's CPU variant on every device, every other case */
    TH_OK(ctx, teeny_psa_extract_v(ctx, tq.t, heads, kd, tv.t));
    th_cpu_kernels(-1);
    ref_psa_extract_v(qkv, sh.B, heads, kd, c.N, v);
    expect_exact(tv.t, v, c.n_o, "v", repro);
    th_dev_check_guard(&tv, "v", repro);

    double *lo = th_dbl(c.qkv, c.n_half), *hi = th_dbl(c.g, c.n_half);
    TH_OK(ctx, teeny_psa_merge_attn(ctx, tlo.t, thi.t, heads, to.t));
    ref_psa_merge(lo, hi, sh.B, heads, kd, c.N, out);
    expect_exact(to.t, out, c.n_o, "merged", repro);
    th_dev_check_guard(&to, "merged", repro);

    th_dev *ds[] = {&tq, &tp, &tv, &to, &tlo, &thi};
    for (int i = 0; i < 6; i++)
        th_dev_free(ds[i]);
    void *hs[] = {qkv, packed, v, out, lo, hi};
    for (int i = 0; i < 6; i++)
        free(hs[i]);
    case_free(&c);
}
END_TEST

/* Each backward is the transpose of its copy: applying the forward's
 * reference map to the result gives back the incoming gradient exactly,
 * and extract_v_backward writes zeros in the Q and K channels. */
START_TEST(test_psa_rearrange_backward)
{
    teeny_ctx *ctx = th_ctx();
    psa_shape sh = shape_at(_i);
    uint64_t seed = 400 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    char repro[160];
    psa_case c;
    shape_str(&sh, seed, repro, sizeof repro);
    case_make(&c, &sh, &r);
    int heads = sh.heads, kd = sh.kd;
    float *dpacked = th_malloc(c.n_qkv * sizeof(float));
    th_fill_normal(&r, dpacked, c.n_qkv, 0, 1);
    th_dev tdp = th_dev_make(ctx, 0, 4, c.packed_shape, (sh.view) ? 5 : 0, dpacked), tdq = th_dev_make(ctx, 0, 4, c.qkv_shape, (sh.view) ? 5 : 0, NULL);
    th_dev tdv = th_dev_make(ctx, 0, 4, c.o_shape, (sh.view) ? 5 : 0, c.g);
    th_dev tdlo = th_dev_make(ctx, 0, 3, c.half_shape, (sh.view) ? 5 : 0, NULL), tdhi = th_dev_make(ctx, 0, 3, c.half_shape, (sh.view) ? 5 : 0, NULL);

    /* pack */
    TH_OK(ctx, teeny_psa_pack_qkv_backward(ctx, tdp.t, heads, kd, tdq.t));
    float *got = th_read(tdq.t);
    double *gd = th_dbl(got, c.n_qkv), *again = th_malloc(c.n_qkv * sizeof(double)), *want = th_dbl(dpacked, c.n_qkv);
    ref_psa_pack(gd, sh.B, heads, kd, c.N, again);
    for (size_t i = 0; i < c.n_qkv; i++)
        ck_assert_msg(again[i] == want[i], "pack backward element %zu; %s", i, repro);
    th_dev_check_guard(&tdq, "d_qkv", repro);
    free(got);
    free(gd);

    /* extract_v: V channels from d_v, zeros elsewhere (d_qkv poisoned first) */
    th_poison(tdq.t);
    th_cpu_kernels(_i % 2);
    TH_OK(ctx, teeny_psa_extract_v_backward(ctx, tdv.t, heads, kd, tdq.t));
    th_cpu_kernels(-1);
    got = th_read(tdq.t);
    gd = th_dbl(got, c.n_qkv);
    double *vback = th_malloc(c.n_o * sizeof(double)), *g = th_dbl(c.g, c.n_o);
    ref_psa_extract_v(gd, sh.B, heads, kd, c.N, vback);
    for (size_t i = 0; i < c.n_o; i++)
        ck_assert_msg(vback[i] == g[i], "extract_v backward V element %zu; %s", i, repro);
    for (size_t i = 0; i < c.n_qkv; i++) {
        size_t ch = i / (size_t)c.N % ((size_t)heads * 4 * kd);
        if (ch % (4 * (size_t)kd) < 2 * (size_t)kd)
            ck_assert_msg(got[i] == 0.0f, "extract_v backward: Q/K channel element %zu is %g; %s", i,
                          (double)got[i], repro);
    }
    free(got);
    free(gd);

    /* merge: merging the two halves back gives d_out */
    TH_OK(ctx, teeny_psa_merge_attn_backward(ctx, tdv.t, heads, tdlo.t, tdhi.t));
    float *flo = th_read(tdlo.t), *fhi = th_read(tdhi.t);
    double *dlo = th_dbl(flo, c.n_half), *dhi = th_dbl(fhi, c.n_half), *merged = th_malloc(c.n_o * sizeof(double));
    ref_psa_merge(dlo, dhi, sh.B, heads, kd, c.N, merged);
    for (size_t i = 0; i < c.n_o; i++)
        ck_assert_msg(merged[i] == g[i], "merge backward element %zu; %s", i, repro);
    th_dev_check_guard(&tdlo, "d_lo", repro);
    th_dev_check_guard(&tdhi, "d_hi", repro);
    /* one half only */
    th_poison(tdlo.t);
    TH_OK(ctx, teeny_psa_merge_attn_backward(ctx, tdv.t, heads, NULL, tdhi.t));
    float *fhi2 = th_read(tdhi.t), *flo2 = th_read(tdlo.t);
    ck_assert_msg(!memcmp(fhi, fhi2, c.n_half * sizeof(float)), "merge backward d_hi alone differs; %s", repro);
    ck_assert_msg(th_first_nonfinite(flo2, c.n_half) == 0, "merge backward wrote d_lo though NULL; %s", repro);

    th_dev *ds[] = {&tdp, &tdq, &tdv, &tdlo, &tdhi};
    for (int i = 0; i < 5; i++)
        th_dev_free(ds[i]);
    void *hs[] = {dpacked, again, want, vback, g, flo, fhi, dlo, dhi, merged, fhi2, flo2};
    for (int i = 0; i < 12; i++)
        free(hs[i]);
    case_free(&c);
}
END_TEST

/* ---- fused attention ---- */

START_TEST(test_psa_attention_forward)
{
    teeny_ctx *ctx = th_ctx();
    psa_shape sh = shape_at(_i);
    uint64_t seed = 500 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    char repro[160];
    psa_case c;
    shape_str(&sh, seed, repro, sizeof repro);
    case_make(&c, &sh, &r);
    double *qkv = th_dbl(c.qkv, c.n_qkv), *o = th_malloc(c.n_o * sizeof(double)), *lse = th_malloc(c.n_lse * sizeof(double));
    th_dev tq = th_dev_make(ctx, 0, 4, c.qkv_shape, (sh.view) ? 5 : 0, c.qkv), to = th_dev_make(ctx, 0, 4, c.o_shape, (sh.view) ? 5 : 0, NULL);
    th_dev tl = th_dev_make(ctx, 0, 2, c.lse_shape, (sh.view) ? 5 : 0, NULL);
    TH_OK(ctx, teeny_psa_attention_forward(ctx, tq.t, sh.heads, sh.kd, to.t, tl.t));
    ref_psa_attention_forward(qkv, sh.B, sh.heads, sh.kd, c.N, o, lse);
    expect_close_mag(to.t, o, NULL, c.n_o, TOL, "o", repro);
    expect_close_mag(tl.t, lse, NULL, c.n_lse, TOL, "lse", repro);
    th_dev_check_guard(&to, "o", repro);
    th_dev_check_guard(&tl, "lse", repro);
    th_poison(to.t);
    TH_OK(ctx, teeny_psa_attention_forward(ctx, tq.t, sh.heads, sh.kd, to.t, NULL));
    expect_close_mag(to.t, o, NULL, c.n_o, TOL, "o (lse NULL)", repro);
    th_dev_free(&tq);
    th_dev_free(&to);
    th_dev_free(&tl);
    free(qkv);
    free(o);
    free(lse);
    case_free(&c);
}
END_TEST

START_TEST(test_psa_attention_backward)
{
    teeny_ctx *ctx = th_ctx();
    psa_shape sh = shape_at(_i);
    uint64_t seed = 600 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    char repro[160];
    psa_case c;
    shape_str(&sh, seed, repro, sizeof repro);
    case_make(&c, &sh, &r);
    double *qkv = th_dbl(c.qkv, c.n_qkv), *g = th_dbl(c.g, c.n_o);
    double *dqkv = th_malloc(c.n_qkv * sizeof(double)), *mag = th_malloc(c.n_qkv * sizeof(double));
    psa_devs d = devs_make(ctx, &c, sh.view ? 5 : 0);
    TH_OK(ctx, teeny_psa_attention_forward(ctx, d.q.t, sh.heads, sh.kd, d.o.t, d.l.t));
    TH_OK(ctx, teeny_psa_attention_backward(ctx, d.q.t, sh.heads, sh.kd, d.o.t, d.l.t, d.g.t, d.dq.t));
    ref_psa_attention_backward(qkv, g, sh.B, sh.heads, sh.kd, c.N, dqkv, mag);
    expect_close_mag(d.dq.t, dqkv, mag, c.n_qkv, TOL, "d_qkv", repro);
    th_dev_check_guard(&d.dq, "d_qkv", repro);
    devs_free(&d);
    free(qkv);
    free(g);
    free(dqkv);
    free(mag);
    case_free(&c);
}
END_TEST

/* The reference's pipeline -- pack, attention on (Q, K, V_lo) and
 * (Q, K, V_hi), merge; backward: merge_backward, two attention backwards,
 * dQ and dK summed with teeny_add, pack_backward -- gives what the fused
 * path gives, forward and backward. */
START_TEST(test_psa_pipeline_matches_fused)
{
    teeny_ctx *ctx = th_ctx();
    psa_shape sh = shape_at(_i);
    uint64_t seed = 700 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    char repro[160];
    psa_case c;
    shape_str(&sh, seed, repro, sizeof repro);
    case_make(&c, &sh, &r);
    int heads = sh.heads, kd = sh.kd;
    float scale = (float)(1.0 / sqrt((double)kd));
    double *qkv = th_dbl(c.qkv, c.n_qkv), *g = th_dbl(c.g, c.n_o);
    double *o_ref = th_malloc(c.n_o * sizeof(double)), *lse_ref = th_malloc(c.n_lse * sizeof(double));
    double *d_ref = th_malloc(c.n_qkv * sizeof(double)), *mag = th_malloc(c.n_qkv * sizeof(double));
    ref_psa_attention_forward(qkv, sh.B, heads, kd, c.N, o_ref, lse_ref);
    ref_psa_attention_backward(qkv, g, sh.B, heads, kd, c.N, d_ref, mag);

    psa_devs d = devs_make(ctx, &c, sh.view ? 5 : 0);
    teeny_tensor *packed = th_tensor(ctx, 4, c.packed_shape), *dpacked = th_tensor(ctx, 4, c.packed_shape);
    teeny_tensor *sec[4], *dsec[4];
    for (int i = 0; i < 4; i++) {
        TH_OK(ctx, teeny_tensor_view(packed, (int64_t)i * (int64_t)c.n_half, 3, c.half_shape, &sec[i]));
        TH_OK(ctx, teeny_tensor_view(dpacked, (int64_t)i * (int64_t)c.n_half, 3, c.half_shape, &dsec[i]));
    }
    teeny_tensor *olo = th_tensor(ctx, 3, c.half_shape), *ohi = th_tensor(ctx, 3, c.half_shape);
    teeny_tensor *llo = th_tensor(ctx, 2, c.lse_shape), *lhi = th_tensor(ctx, 2, c.lse_shape);
    teeny_tensor *out = th_tensor(ctx, 4, c.o_shape), *dlo = th_tensor(ctx, 3, c.half_shape);
    teeny_tensor *dhi = th_tensor(ctx, 3, c.half_shape), *dq_lo = th_tensor(ctx, 3, c.half_shape);
    teeny_tensor *dq_hi = th_tensor(ctx, 3, c.half_shape), *dk_lo = th_tensor(ctx, 3, c.half_shape);
    teeny_tensor *dk_hi = th_tensor(ctx, 3, c.half_shape), *dqkv_pipe = th_tensor(ctx, 4, c.qkv_shape);
    th_poison(out);
    th_poison(dpacked);
    th_poison(dqkv_pipe);

    /* pipeline forward */
    TH_OK(ctx, teeny_psa_pack_qkv(ctx, d.q.t, heads, kd, packed));
    TH_OK(ctx, teeny_attention_forward(ctx, sec[0], sec[1], sec[2], scale, olo, llo));
    TH_OK(ctx, teeny_attention_forward(ctx, sec[0], sec[1], sec[3], scale, ohi, lhi));
    TH_OK(ctx, teeny_psa_merge_attn(ctx, olo, ohi, heads, out));
    /* pipeline backward */
    TH_OK(ctx, teeny_psa_merge_attn_backward(ctx, d.g.t, heads, dlo, dhi));
    TH_OK(ctx, teeny_attention_backward(ctx, sec[0], sec[1], sec[2], olo, llo, dlo, scale, dq_lo, dk_lo, dsec[2]));
    TH_OK(ctx, teeny_attention_backward(ctx, sec[0], sec[1], sec[3], ohi, lhi, dhi, scale, dq_hi, dk_hi, dsec[3]));
    TH_OK(ctx, teeny_add(ctx, dq_lo, dq_hi, dsec[0]));
    TH_OK(ctx, teeny_add(ctx, dk_lo, dk_hi, dsec[1]));
    TH_OK(ctx, teeny_psa_pack_qkv_backward(ctx, dpacked, heads, kd, dqkv_pipe));
    /* fused */
    TH_OK(ctx, teeny_psa_attention_forward(ctx, d.q.t, heads, kd, d.o.t, d.l.t));
    TH_OK(ctx, teeny_psa_attention_backward(ctx, d.q.t, heads, kd, d.o.t, d.l.t, d.g.t, d.dq.t));

    /* both against the reference, and against each other */
    expect_close_mag(out, o_ref, NULL, c.n_o, TOL, "pipeline o", repro);
    expect_close_mag(d.o.t, o_ref, NULL, c.n_o, TOL, "fused o", repro);
    expect_close_mag(llo, lse_ref, NULL, c.n_lse, TOL, "pipeline lse (lo)", repro);
    expect_close_mag(d.l.t, lse_ref, NULL, c.n_lse, TOL, "fused lse", repro);
    expect_close_mag(dqkv_pipe, d_ref, mag, c.n_qkv, TOL, "pipeline d_qkv", repro);
    expect_close_mag(d.dq.t, d_ref, mag, c.n_qkv, TOL, "fused d_qkv", repro);
    float *fo = th_read(d.o.t), *po = th_read(out), *fd = th_read(d.dq.t), *pd = th_read(dqkv_pipe);
    double e = th_nrms_f(po, fo, c.n_o);
    ck_assert_msg(e <= TOL, "pipeline o vs fused o: nrms %.3g; %s", e, repro);
    double *fdd = th_dbl(fd, c.n_qkv);
    e = th_nrms_mag(pd, fdd, mag, c.n_qkv);
    ck_assert_msg(e <= TOL, "pipeline d_qkv vs fused d_qkv: nrms %.3g; %s", e, repro);

    free(fo);
    free(po);
    free(fd);
    free(pd);
    free(fdd);
    for (int i = 0; i < 4; i++) {
        teeny_tensor_destroy(sec[i]);
        teeny_tensor_destroy(dsec[i]);
    }
    teeny_tensor *ts[] = {packed, dpacked, olo, ohi, llo, lhi, out, dlo, dhi, dq_lo, dq_hi, dk_lo, dk_hi, dqkv_pipe};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        teeny_tensor_destroy(ts[i]);
    devs_free(&d);
    void *hs[] = {qkv, g, o_ref, lse_ref, d_ref, mag};
    for (int i = 0; i < 6; i++)
        free(hs[i]);
    case_free(&c);
}
END_TEST

/* After a warm-up, the fused forward is one launch and the backward at most
 * three, creating no buffer and allocating no host memory; both are
 * deterministic (bit-identical on a second run). */
START_TEST(test_psa_launch_counts_and_determinism)
{
    teeny_ctx *ctx = th_ctx();
    psa_shape sh = th_small() ? small_shapes[1] : shapes[2];
    th_rng r = th_rng_make(800);
    psa_case c;
    case_make(&c, &sh, &r);
    psa_devs d = devs_make(ctx, &c, 0);
    float *first[3] = {NULL, NULL, NULL};
    for (int pass = 0; pass < 3; pass++) {
        teeny__calls_reset();
        TH_OK(ctx, teeny_psa_attention_forward(ctx, d.q.t, sh.heads, sh.kd, d.o.t, d.l.t));
        long f_launch = teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel),
             f_buf = teeny__calls_id(TEENY__ID_clCreateBuffer), f_alloc = teeny__calls_id(TEENY__ID_malloc);
        teeny__calls_reset();
        TH_OK(ctx, teeny_psa_attention_backward(ctx, d.q.t, sh.heads, sh.kd, d.o.t, d.l.t, d.g.t, d.dq.t));
        long b_launch = teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel),
             b_buf = teeny__calls_id(TEENY__ID_clCreateBuffer), b_alloc = teeny__calls_id(TEENY__ID_malloc);
        float *now[3] = {th_read(d.o.t), th_read(d.l.t), th_read(d.dq.t)};
        size_t sizes[3] = {c.n_o, c.n_lse, c.n_qkv};
        if (pass == 0) { /* warm-up: programs built, workspace grown */
            memcpy(first, now, sizeof now);
            continue;
        }
        ck_assert_int_eq(f_launch, 1);
        ck_assert_int_eq(f_buf, 0);
        ck_assert_int_eq(f_alloc, 0);
        ck_assert_int_le(b_launch, 3);
        ck_assert_int_eq(b_buf, 0);
        ck_assert_int_eq(b_alloc, 0);
        for (int j = 0; j < 3; j++) {
            ck_assert_msg(!memcmp(first[j], now[j], sizes[j] * sizeof(float)), "output %d differs between runs", j);
            free(now[j]);
        }
    }
    for (int j = 0; j < 3; j++)
        free(first[j]);
    devs_free(&d);
    case_free(&c);
}
END_TEST

/* The tiled kernels walk the matrices as the host's ATT_LAYOUT says (PSA's
 * NCHW views: by columns; float4 chunks down the columns, ATT_VEC 2, where
 * the planes are 4k pixels and the views aligned: the second shape); every
 * walk loads the same values, so forcing the others (rows; per matrix at
 * run time; by columns one float at a time) gives the same bits. */
START_TEST(test_psa_layouts)
{
    teeny_ctx *ctx = th_ctx();
    static const psa_shape shapes_[2] = {{2, 2, 16, 5, 7, 1}, {2, 2, 16, 4, 6, 0}};
    psa_shape sh = shapes_[_i];
    th_rng r = th_rng_make(801 + (uint64_t)_i);
    psa_case c;
    case_make(&c, &sh, &r);
    psa_devs d = devs_make(ctx, &c, 0);
    size_t sizes[3] = {c.n_o, c.n_lse, c.n_qkv};
    float *first[3] = {NULL, NULL, NULL};
    th_cpu_kernels(0); /* the tiled kernels (the CPU variants have no loaders) */
    for (int layout = -1; layout <= 2; layout++) {
        th_hook(TEENY__HOOK_ATTENTION_LAYOUT, layout);
        th_poison(d.o.t);
        th_poison(d.l.t);
        th_poison(d.dq.t);
        TH_OK(ctx, teeny_psa_attention_forward(ctx, d.q.t, sh.heads, sh.kd, d.o.t, d.l.t));
        TH_OK(ctx, teeny_psa_attention_backward(ctx, d.q.t, sh.heads, sh.kd, d.o.t, d.l.t, d.g.t, d.dq.t));
        float *now[3] = {th_read(d.o.t), th_read(d.l.t), th_read(d.dq.t)};
        for (int j = 0; j < 3; j++) {
            ck_assert_msg(th_first_nonfinite(now[j], sizes[j]) < 0, "layout %d: output %d not finite", layout, j);
            if (layout < 0)
                first[j] = now[j];
            else {
                ck_assert_msg(!memcmp(first[j], now[j], sizes[j] * sizeof(float)),
                              "layout %d: output %d differs from the chosen layout's", layout, j);
                free(now[j]);
            }
        }
    }
    th_hook(TEENY__HOOK_ATTENTION_LAYOUT, -1);
    th_cpu_kernels(-1);
    for (int j = 0; j < 3; j++)
        free(first[j]);
    devs_free(&d);
    case_free(&c);
}
END_TEST

/* The reference PSA backward against central differences of the reference
 * PSA forward (it gathers qkv itself, so this checks the index maps too). */
START_TEST(test_psa_finite_differences)
{
    enum { B = 2, HEADS = 2, KD = 2, N = 3, NQKV = B * HEADS * 4 * KD * N, NO = NQKV / 2 };
    const double h = 1e-6;
    th_rng r = th_rng_make(1618);
    double qkv[NQKV], g[NO], o[NO], d[NQKV];
    for (int i = 0; i < NQKV; i++)
        qkv[i] = th_normal(&r);
    for (int i = 0; i < NO; i++)
        g[i] = th_normal(&r);
    ref_psa_attention_backward(qkv, g, B, HEADS, KD, N, d, NULL);
    for (int i = 0; i < NQKV; i++) {
        double keep = qkv[i], lp = 0, lm = 0;
        qkv[i] = keep + h;
        ref_psa_attention_forward(qkv, B, HEADS, KD, N, o, NULL);
        for (int j = 0; j < NO; j++)
            lp += g[j] * o[j];
        qkv[i] = keep - h;
        ref_psa_attention_forward(qkv, B, HEADS, KD, N, o, NULL);
        for (int j = 0; j < NO; j++)
            lm += g[j] * o[j];
        qkv[i] = keep;
        double fd = (lp - lm) / (2 * h);
        ck_assert_msg(fabs(fd - d[i]) <= 1e-6 * (1 + fabs(fd)), "d_qkv[%d]: analytic %.9g, finite difference %.9g",
                      i, d[i], fd);
    }
}
END_TEST

/* ---- errors: exact status, nothing modified ---- */

/* The kernel names launched since the profile began, in order, one
 * string ("a b c"); ends the profile. */
static void launched(teeny_ctx *ctx, char *buf, size_t cap)
{
    buf[0] = '\0';
    TH_OK(ctx, teeny_ctx_finish(ctx));
    for (int i = 0; i < ctx->prog.prof_count; i++) {
        strncat(buf, ctx->prog.prof_names[i], cap - strlen(buf) - 1);
        strncat(buf, " ", cap - strlen(buf) - 1);
    }
    TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
}

/* Where a device limits a work-item's loop trips below a row of tokens
 * (Mesa's llvmpipe; forced here with th_loop_limit: 576 tokens, 577
 * trips, limit 400), the V extraction and its backward take the 2-D grid,
 * which has no loop, instead of their CPU variants: the same copies. */
START_TEST(test_psa_split_loops)
{
    teeny_ctx *ctx = th_ctx();
    psa_shape sh = {2, 2, 8, 24, 24, 0};
    th_rng r = th_rng_make(808);
    psa_case c;
    case_make(&c, &sh, &r);
    double *qkv = th_dbl(c.qkv, c.n_qkv), *v = th_malloc(c.n_o * sizeof(double));
    ref_psa_extract_v(qkv, sh.B, sh.heads, sh.kd, c.N, v);
    th_dev tq = th_dev_make(ctx, 0, 4, c.qkv_shape, 0, c.qkv), tv = th_dev_make(ctx, 0, 4, c.o_shape, 0, NULL),
           tb = th_dev_make(ctx, 0, 4, c.qkv_shape, 0, NULL);
    th_cpu_kernels(1);
    for (int li = 0; li < 2; li++) {
        char names[256];
        th_loop_limit(li ? 400 : 0);
        th_poison(tv.t);
        th_poison(tb.t);
        TH_OK(ctx, teeny_profile_begin(ctx));
        TH_OK(ctx, teeny_psa_extract_v(ctx, tq.t, sh.heads, sh.kd, tv.t));
        TH_OK(ctx, teeny_psa_extract_v_backward(ctx, tv.t, sh.heads, sh.kd, tb.t));
        launched(ctx, names, sizeof names);
        ck_assert_str_eq(names, li ? "psa_extract_v psa_extract_v_backward "
                                   : "psa_extract_v_cpu psa_extract_v_backward_cpu ");
        expect_exact(tv.t, v, c.n_o, "v", "test_psa_split_loops");
        /* the backward: V's channels back in place, zeros in Q and K */
        float *got = th_read(tb.t);
        for (size_t e = 0; e < c.n_qkv; e++) {
            size_t ch = e / (size_t)c.N % ((size_t)sh.heads * 4 * sh.kd);
            ck_assert_msg(ch % (4 * (size_t)sh.kd) < 2 * (size_t)sh.kd ? got[e] == 0.0f : got[e] == c.qkv[e],
                          "limit %d: d_qkv[%zu] = %g", li ? 400 : 0, e, (double)got[e]);
        }
        free(got);
    }
    th_cpu_kernels(-1);
    th_loop_limit(-1);
    th_dev_free(&tq);
    th_dev_free(&tv);
    th_dev_free(&tb);
    free(qkv);
    free(v);
    case_free(&c);
}
END_TEST

START_TEST(test_psa_errors)
{
    teeny_ctx *ctx = th_ctx();
    enum { B = 2, HEADS = 2, KD = 4, H = 3, W = 5, N = H * W };
    int64_t qs[4] = {B, HEADS * 4 * KD, H, W}, os[4] = {B, HEADS * 2 * KD, H, W}, ls[2] = {B * HEADS, N};
    int64_t ps[4] = {4, B * HEADS, N, KD}, hs[3] = {B * HEADS, N, KD};
    int64_t q_c[4] = {B, HEADS * 4 * KD + 2, H, W}, o_w[4] = {B, HEADS * 2 * KD, H, W + 1}, l_n[2] = {B * HEADS, N + 1};
    int64_t p_n[4] = {4, B * HEADS, N + 1, KD}, h_bh[3] = {B * HEADS + 1, N, KD}, q3[3] = {B, HEADS * 4 * KD, N};
    int64_t big_q[4] = {1, 4 * 129, 1, 2}, big_o[4] = {1, 2 * 129, 1, 2}, o_b[4] = {B + 1, HEADS * 2 * KD, H, W};
    th_rng r = th_rng_make(17);
    size_t nq = (size_t)B * HEADS * 4 * KD * N;
    float *data = th_malloc(nq * sizeof(float));
    th_fill_normal(&r, data, nq, 0, 1);
    teeny_tensor *qkv = th_tensor_from(ctx, 4, qs, data), *o = th_tensor_from(ctx, 4, os, data);
    teeny_tensor *lse = th_tensor_from(ctx, 2, ls, data), *g = th_tensor_from(ctx, 4, os, data);
    teeny_tensor *dqkv = th_tensor_from(ctx, 4, qs, data), *packed = th_tensor_from(ctx, 4, ps, data);
    teeny_tensor *lo = th_tensor_from(ctx, 3, hs, data), *hi = th_tensor_from(ctx, 3, hs, data);
    teeny_tensor *v = th_tensor_from(ctx, 4, os, data);
    teeny_tensor *tq_c = th_tensor(ctx, 4, q_c), *to_w = th_tensor(ctx, 4, o_w), *tl_n = th_tensor(ctx, 2, l_n);
    teeny_tensor *tp_n = th_tensor(ctx, 4, p_n), *th_bh = th_tensor(ctx, 3, h_bh), *tq3 = th_tensor(ctx, 3, q3);
    teeny_tensor *tbig_q = th_tensor(ctx, 4, big_q), *tbig_o = th_tensor(ctx, 4, big_o), *to_b = th_tensor(ctx, 4, o_b);
    teeny_tensor *qview = NULL, *oview = NULL;
    TH_OK(ctx, teeny_tensor_view(qkv, 1, 4, os, &oview)); /* inside qkv */
    TH_OK(ctx, teeny_tensor_view(dqkv, 0, 4, os, &qview));
    teeny_tensor *watched[] = {qkv, o, lse, g, dqkv, packed, lo, hi, v};
    enum { NW = 9 };
    float *before[NW];
    for (int i = 0; i < NW; i++)
        before[i] = th_read(watched[i]);

    /* fused forward */
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_psa_attention_forward(NULL, qkv, HEADS, KD, o, lse));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_attention_forward(ctx, NULL, HEADS, KD, o, lse));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_attention_forward(ctx, qkv, 0, KD, o, lse));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_attention_forward(ctx, qkv, HEADS, -1, o, lse));
    TH_STATUS(ctx, TEENY_ERR_RANGE, teeny_psa_attention_forward(ctx, qkv, 1 << 20, 1 << 10, o, lse));
    ck_assert_msg(strstr(teeny_last_error(ctx), "int32") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_psa_attention_forward(ctx, tbig_q, 1, 129, tbig_o, NULL));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_attention_forward(ctx, tq_c, HEADS, KD, o, lse)); /* channels */
    ck_assert_msg(strstr(teeny_last_error(ctx), "heads*4*key_dim") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_attention_forward(ctx, qkv, 3, KD, o, lse));      /* heads */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_attention_forward(ctx, tq3, HEADS, KD, o, lse));  /* rank */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_attention_forward(ctx, qkv, HEADS, KD, to_w, lse));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_attention_forward(ctx, qkv, HEADS, KD, to_b, lse));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_attention_forward(ctx, qkv, HEADS, KD, o, tl_n));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_attention_forward(ctx, qkv, HEADS, KD, oview, lse)); /* o inside qkv */
    ck_assert_msg(strstr(teeny_last_error(ctx), "overlaps") != NULL, "message: %s", teeny_last_error(ctx));
    /* fused backward */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_attention_backward(ctx, qkv, HEADS, KD, o, NULL, g, dqkv));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_attention_backward(ctx, qkv, HEADS, KD, o, lse, g, NULL));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_attention_backward(ctx, qkv, HEADS, KD, o, lse, to_w, dqkv));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_attention_backward(ctx, qkv, HEADS, KD, o, lse, g, tq_c));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_attention_backward(ctx, qkv, HEADS, KD, o, lse, g, qkv));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_attention_backward(ctx, qkv, HEADS, KD, qview, lse, g, dqkv));
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_psa_attention_backward(ctx, tbig_q, 1, 129, tbig_o, lse, g, dqkv));
    /* rearrangements */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_pack_qkv(ctx, qkv, HEADS, KD, tp_n));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_pack_qkv(ctx, tq_c, HEADS, KD, packed));
    TH_STATUS(ctx, TEENY_ERR_RANGE, teeny_psa_pack_qkv(ctx, qkv, 1 << 16, 1 << 15, packed));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_pack_qkv(ctx, qkv, HEADS, 0, packed));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_pack_qkv_backward(ctx, tp_n, HEADS, KD, dqkv));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_pack_qkv_backward(ctx, packed, HEADS, KD, tq_c));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_extract_v(ctx, qkv, HEADS, KD, to_w));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_extract_v(ctx, tq_c, HEADS, KD, v));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_extract_v(ctx, qkv, HEADS, KD, oview));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_extract_v_backward(ctx, to_w, HEADS, KD, dqkv));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_extract_v_backward(ctx, g, HEADS, KD, tq_c));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_extract_v_backward(ctx, g, HEADS, KD, NULL));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_merge_attn(ctx, lo, th_bh, HEADS, o));     /* o_hi differs */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_merge_attn(ctx, lo, hi, 3, o));            /* 4 % 3 */
    ck_assert_msg(strstr(teeny_last_error(ctx), "multiple") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_merge_attn(ctx, lo, hi, HEADS, to_w));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_merge_attn(ctx, lo, hi, HEADS, qkv));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_merge_attn(ctx, lo, hi, 0, o));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_merge_attn(ctx, lo, lo, HEADS, NULL));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_merge_attn_backward(ctx, g, 3, lo, hi));  /* 16 % 6 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_merge_attn_backward(ctx, g, HEADS, th_bh, hi));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_merge_attn_backward(ctx, g, HEADS, lo, lo));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_merge_attn_backward(ctx, g, -2, lo, hi));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_merge_attn_backward(ctx, g, HEADS, NULL, NULL));
    for (int i = 0; i < NW; i++) {
        float *now = th_read(watched[i]);
        ck_assert_msg(!memcmp(now, before[i], (size_t)teeny_tensor_numel(watched[i]) * sizeof(float)),
                      "a rejected PSA call modified tensor %d", i);
        free(now);
        free(before[i]);
    }
    teeny_tensor *ts[] = {qkv, o, lse, g, dqkv, packed, lo, hi, v, tq_c, to_w, tl_n, tp_n, th_bh, tq3, tbig_q, tbig_o,
                          to_b, qview, oview};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        teeny_tensor_destroy(ts[i]);
    free(data);
}
END_TEST

Suite *suite_psa(void)
{
    Suite *s = suite_create("psa");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_psa_rearrange_forward, 0, n_cases());
    tcase_add_loop_test(fwd, test_psa_attention_forward, 0, n_cases());
    tcase_add_loop_test(fwd, test_psa_pipeline_matches_fused, 0, n_cases());
    tcase_add_test(fwd, test_psa_launch_counts_and_determinism);
    tcase_add_loop_test(fwd, test_psa_layouts, 0, 2);
    tcase_add_test(fwd, test_psa_split_loops);
    tcase_add_loop_test(bwd, test_psa_rearrange_backward, 0, n_cases());
    tcase_add_loop_test(bwd, test_psa_attention_backward, 0, n_cases());
    tcase_add_test(bwd, test_psa_finite_differences);
    tcase_add_test(err, test_psa_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
