/*
 * test_elementwise.c -- add, mul and activations against the float64
 * reference, aliasing, views, the op-table entry of mul and error paths.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/ops.h"
#include "ref/elementwise_ref.h"

#define N_ACTS 14 /* teeny_act values */

/* act's parameters for sweep case i: the defaults on even cases (through
 * the functions that take a bare teeny_act), random ones on odd. */
static teeny_act_params act_params(th_rng *r, int act, int i)
{
    teeny_act_params p = teeny_act_defaults((teeny_act)act);
    if (i % 2 == 0)
        return p;
    if (act == TEENY_ACT_HARDSIGMOID)
        p.alpha = (float)th_uniform(r, 0.05, 0.5), p.beta = (float)th_uniform(r, 0.2, 0.8);
    if (act == TEENY_ACT_LEAKY_RELU)
        p.alpha = (float)th_uniform(r, -0.5, 1.5);
    if (act == TEENY_ACT_CLIP)
        p.alpha = (float)th_uniform(r, -4, 0), p.beta = (float)th_uniform(r, 0, 4);
    return p;
}

/* Whether x lies within h of a kink of the activation (no derivative there). */
static int near_kink(const teeny_act_params *p, double x, double h)
{
    double kinks[2] = {NAN, NAN};
    if (p->act == TEENY_ACT_RELU || p->act == TEENY_ACT_LEAKY_RELU)
        kinks[0] = 0;
    if (p->act == TEENY_ACT_HARDSWISH)
        kinks[0] = -3, kinks[1] = 3;
    if (p->act == TEENY_ACT_HARDSIGMOID)
        kinks[0] = -p->beta / p->alpha, kinks[1] = (1 - p->beta) / p->alpha;
    if (p->act == TEENY_ACT_CLIP)
        kinks[0] = p->alpha, kinks[1] = p->beta;
    return fabs(x - kinks[0]) < h || fabs(x - kinks[1]) < h;
}

START_TEST(test_elementwise_forward)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(100 + (uint64_t)_i);
    int n = th_int(&r, 1, _i % 4 == 3 ? 70000 : 5000);
    th_cpu_kernels(_i % 2); /* the CPU variants (runs of 2048 elements) on every device */
    int64_t shape[1] = {n};
    float *a = th_malloc((size_t)n * 4), *b = th_malloc((size_t)n * 4);
    double *ref = th_malloc((size_t)n * 8);
    th_fill_uniform(&r, a, (size_t)n, -6, 6);
    th_fill_uniform(&r, b, (size_t)n, -6, 6);
    teeny_tensor *ta = th_tensor_from(ctx, 1, shape, a), *tb = th_tensor_from(ctx, 1, shape, b),
                 *ty = th_tensor(ctx, 1, shape);
    th_poison(ty);
    TH_OK(ctx, teeny_add(ctx, ta, tb, ty));
    for (int i = 0; i < n; i++)
        ref[i] = (double)a[i] + b[i];
    float *y = th_read(ty);
    ck_assert(th_first_nonfinite(y, (size_t)n) < 0);
    ck_assert_msg(th_nrms(y, ref, (size_t)n) <= 1e-7, "add n=%d seed %d cpu %d", n, 100 + _i, _i % 2);
    free(y);
    for (int act = 0; act < N_ACTS; act++) {
        teeny_act_params p = act_params(&r, act, _i);
        th_poison(ty);
        if (_i % 2 == 0)
            TH_OK(ctx, teeny_activation_forward(ctx, (teeny_act)act, ta, ty));
        else
            TH_OK(ctx, teeny_activation_forward_ex(ctx, &p, ta, ty));
        for (int i = 0; i < n; i++)
            ref[i] = ref_act_p(act, a[i], p.alpha, p.beta);
        y = th_read(ty);
        ck_assert(th_first_nonfinite(y, (size_t)n) < 0);
        ck_assert_msg(th_nrms(y, ref, (size_t)n) <= 1e-6, "act %d n=%d seed %d cpu %d: %g", act, n, 100 + _i,
                      _i % 2, th_nrms(y, ref, (size_t)n));
        free(y);
    }
    /* y aliasing a */
    TH_OK(ctx, teeny_add(ctx, ta, tb, ta));
    y = th_read(ta);
    for (int i = 0; i < n; i++)
        ck_assert(y[i] == a[i] + b[i]);
    free(y);
    free(a);
    free(b);
    free(ref);
    teeny_tensor_destroy(ta);
    teeny_tensor_destroy(tb);
    teeny_tensor_destroy(ty);
    th_cpu_kernels(-1);
}
END_TEST

START_TEST(test_elementwise_backward)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(300 + (uint64_t)_i);
    int n = th_int(&r, 1, _i % 4 == 3 ? 70000 : 3000);
    th_cpu_kernels(_i % 2);
    int64_t shape[1] = {n};
    float *x = th_malloc((size_t)n * 4), *dy = th_malloc((size_t)n * 4);
    double *ref = th_malloc((size_t)n * 8);
    th_fill_uniform(&r, x, (size_t)n, -6, 6);
    th_fill_normal(&r, dy, (size_t)n, 0, 1);
    teeny_tensor *tx = th_tensor_from(ctx, 1, shape, x), *tdy = th_tensor_from(ctx, 1, shape, dy),
                 *tdx = th_tensor(ctx, 1, shape);
    for (int act = 0; act < N_ACTS; act++) {
        teeny_act_params p = act_params(&r, act, _i);
        th_poison(tdx);
        if (_i % 2 == 0)
            TH_OK(ctx, teeny_activation_backward(ctx, (teeny_act)act, tx, tdy, tdx));
        else
            TH_OK(ctx, teeny_activation_backward_ex(ctx, &p, tx, tdy, tdx));
        for (int i = 0; i < n; i++) {
            ref[i] = dy[i] * ref_act_grad_p(act, x[i], p.alpha, p.beta);
            /* the reference derivative itself against central differences */
            double h = 1e-6, fd = (ref_act_p(act, x[i] + h, p.alpha, p.beta) - ref_act_p(act, x[i] - h, p.alpha, p.beta)) / (2 * h);
            if (!near_kink(&p, x[i], 1e-5) && act != TEENY_ACT_ROUND_HALF) /* its gradient is straight-through */
                ck_assert_msg(fabs(fd - ref_act_grad_p(act, x[i], p.alpha, p.beta)) < 1e-6, "act %d at %g", act,
                              (double)x[i]);
        }
        float *dx = th_read(tdx);
        ck_assert(th_first_nonfinite(dx, (size_t)n) < 0);
        ck_assert_msg(th_nrms(dx, ref, (size_t)n) <= 1e-6, "act %d backward n=%d seed %d cpu %d", act, n, 300 + _i,
                      _i % 2);
        free(dx);
    }
    free(x);
    free(dy);
    free(ref);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(tdy);
    teeny_tensor_destroy(tdx);
    th_cpu_kernels(-1);
}
END_TEST

START_TEST(test_elementwise_errors)
{
    teeny_ctx *ctx = th_ctx();
    int64_t s4[1] = {4}, s5[1] = {5}, s8[1] = {8};
    teeny_tensor *a = th_tensor(ctx, 1, s4), *b = th_tensor(ctx, 1, s5), *big = th_tensor(ctx, 1, s8), *v = NULL;
    TH_OK(ctx, teeny_tensor_fill(a, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(big, 2.0f));
    TH_OK(ctx, teeny_tensor_view(big, 2, 1, s4, &v));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_add(ctx, a, b, a));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_add(ctx, a, NULL, a));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_add(NULL, a, a, a));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_activation_forward(ctx, (teeny_act)99, a, a));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_activation_forward(ctx, (teeny_act)-1, a, a));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_activation_forward(ctx, (teeny_act)N_ACTS, a, a));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_activation_forward_ex(ctx, NULL, a, a));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_activation_backward_ex(ctx, NULL, a, a, a));
    teeny_act_params bad = {TEENY_ACT_LEAKY_RELU, NAN, 0.0f};
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_activation_forward_ex(ctx, &bad, a, a));
    bad = (teeny_act_params){TEENY_ACT_CLIP, 0.0f, NAN};
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_activation_backward_ex(ctx, &bad, a, a, a));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_activation_backward(ctx, TEENY_ACT_SILU, a, b, a));
    teeny_tensor *v2 = NULL;
    TH_OK(ctx, teeny_tensor_view(big, 0, 1, s4, &v2));
    /* partial overlap between output and input is rejected */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_add(ctx, v, a, v2));
    float y[8];
    TH_OK(ctx, teeny_tensor_read(big, y, 8));
    for (int i = 0; i < 8; i++)
        ck_assert(y[i] == 2.0f);
    teeny_tensor_destroy(v);
    teeny_tensor_destroy(v2);
    teeny_tensor_destroy(a);
    teeny_tensor_destroy(b);
    teeny_tensor_destroy(big);
}
END_TEST

/* ---- mul ---- */

/* A tensor of n elements, a view at view_off inside a NaN-poisoned base
 * when view_off > 0. */
typedef struct {
    teeny_tensor *base, *t;
    int off, n;
} mul_dev;

static mul_dev mul_dev_make(teeny_ctx *ctx, int n, int view_off, const float *data)
{
    mul_dev d = {0};
    int64_t shape[1] = {n}, big = n + view_off + 4;
    d.off = view_off;
    d.n = n;
    if (view_off) {
        d.base = th_tensor(ctx, 1, &big);
        th_poison(d.base);
        TH_OK(ctx, teeny_tensor_view(d.base, view_off, 1, shape, &d.t));
    } else {
        d.t = th_tensor(ctx, 1, shape);
        th_poison(d.t);
    }
    if (data)
        TH_OK(ctx, teeny_tensor_write(d.t, data, (size_t)n));
    return d;
}

/* Every element written and close to ref; the base's guard still NaN. */
static void mul_expect(const mul_dev *d, const double *ref, const char *what, int n, uint64_t seed)
{
    float *y = th_read(d->t);
    ck_assert_msg(th_first_nonfinite(y, (size_t)n) < 0, "%s: unwritten element; n=%d seed %llu", what, n,
                  (unsigned long long)seed);
    ck_assert_msg(th_nrms(y, ref, (size_t)n) <= 1e-6, "%s: nrms %g; n=%d seed %llu", what,
                  th_nrms(y, ref, (size_t)n), n, (unsigned long long)seed);
    free(y);
    if (d->base) {
        int64_t nb = teeny_tensor_numel(d->base);
        float *all = th_read(d->base);
        for (int64_t i = 0; i < nb; i++)
            if (i < d->off || i >= d->off + d->n)
                ck_assert_msg(isnan(all[i]), "%s wrote outside its view; n=%d seed %llu", what, n,
                              (unsigned long long)seed);
        free(all);
    }
}

static void mul_free(mul_dev *d)
{
    teeny_tensor_destroy(d->t);
    teeny_tensor_destroy(d->base);
}

/* The portable add, mul and add's backward take float4s where every
 * offset is a multiple of 4 (elementwise.c launch3), elements elsewhere:
 * both paths at lengths around the vector width, offsets aligned and not,
 * exact (each element is one float operation), nothing outside the
 * views written. */
START_TEST(test_elementwise_float4)
{
    teeny_ctx *ctx = th_ctx();
    static const int lengths[] = {1, 3, 4, 5, 8, 11, 1029};
    static const int offs[][3] = {{0, 0, 0}, {4, 8, 12}, {4, 1, 8}, {2, 2, 2}, {0, 4, 3}};
    th_rng r = th_rng_make(900);
    th_cpu_kernels(0);
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (size_t oi = 0; oi < sizeof offs / sizeof offs[0]; oi++) {
            int n = lengths[li];
            float *a = th_malloc((size_t)n * 4), *b = th_malloc((size_t)n * 4);
            double *sum = th_malloc((size_t)n * 8), *prod = th_malloc((size_t)n * 8), *copy = th_malloc((size_t)n * 8);
            th_fill_uniform(&r, a, (size_t)n, -4, 4);
            th_fill_uniform(&r, b, (size_t)n, -4, 4);
            for (int i = 0; i < n; i++) {
                sum[i] = (double)(a[i] + b[i]);
                prod[i] = (double)(a[i] * b[i]);
                copy[i] = a[i];
            }
            mul_dev ta = mul_dev_make(ctx, n, offs[oi][0], a), tb = mul_dev_make(ctx, n, offs[oi][1], b),
                    ty = mul_dev_make(ctx, n, offs[oi][2], NULL), tz = mul_dev_make(ctx, n, offs[oi][1] ? 0 : 4, NULL);
            char what[64];
            snprintf(what, sizeof what, "add, offsets %d %d %d", offs[oi][0], offs[oi][1], offs[oi][2]);
            TH_OK(ctx, teeny_add(ctx, ta.t, tb.t, ty.t));
            mul_expect(&ty, sum, what, n, 900);
            float *y = th_read(ty.t);
            for (int i = 0; i < n; i++)
                ck_assert_msg(y[i] == a[i] + b[i], "%s: element %d of %d", what, i, n);
            free(y);
            snprintf(what, sizeof what, "mul, offsets %d %d %d", offs[oi][0], offs[oi][1], offs[oi][2]);
            TH_OK(ctx, teeny_mul(ctx, ta.t, tb.t, ty.t));
            mul_expect(&ty, prod, what, n, 900);
            /* add's backward: dy (a) into both gradients (ew_copy2) */
            snprintf(what, sizeof what, "add backward, offsets %d %d %d", offs[oi][0], offs[oi][2], offs[oi][1] ? 0 : 4);
            teeny__op_args oa;
            memset(&oa, 0, sizeof oa);
            oa.in[TEENY__ADD_DY] = ta.t;
            oa.out[TEENY__ADD_A] = ty.t;
            oa.out[TEENY__ADD_B] = tz.t;
            TH_OK(ctx, teeny__add_backward(ctx, &oa));
            mul_expect(&ty, copy, what, n, 900);
            mul_expect(&tz, copy, what, n, 900);
            mul_free(&ta);
            mul_free(&tb);
            mul_free(&ty);
            mul_free(&tz);
            free(a);
            free(b);
            free(sum);
            free(prod);
            free(copy);
        }
    th_cpu_kernels(-1);
}
END_TEST

START_TEST(test_mul_forward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 500 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    int n = _i % 10 == 0 ? th_int(&r, 1, 20000) : th_int(&r, 1, 700), view = _i % 3 == 0 ? 1 + 2 * (_i % 4) : 0;
    float *a = th_malloc((size_t)n * 4), *b = th_malloc((size_t)n * 4);
    double *ad = th_malloc((size_t)n * 8), *bd = th_malloc((size_t)n * 8), *ref = th_malloc((size_t)n * 8);
    th_fill_normal(&r, a, (size_t)n, 0, 3);
    th_fill_normal(&r, b, (size_t)n, 0, 3);
    th_to_double(a, ad, (size_t)n);
    th_to_double(b, bd, (size_t)n);
    ref_mul(ad, bd, (size_t)n, ref);
    mul_dev ta = mul_dev_make(ctx, n, view, a), tb = mul_dev_make(ctx, n, view ? view + 1 : 0, b),
            ty = mul_dev_make(ctx, n, view ? view + 2 : 0, NULL);
    TH_OK(ctx, teeny_mul(ctx, ta.t, tb.t, ty.t));
    mul_expect(&ty, ref, "y", n, seed);
    /* y aliasing a, then b, exactly */
    TH_OK(ctx, teeny_mul(ctx, ta.t, tb.t, ta.t));
    mul_expect(&ta, ref, "y = a", n, seed);
    TH_OK(ctx, teeny_tensor_write(ta.t, a, (size_t)n));
    TH_OK(ctx, teeny_mul(ctx, ta.t, tb.t, tb.t));
    mul_expect(&tb, ref, "y = b", n, seed);
    free(a);
    free(b);
    free(ad);
    free(bd);
    free(ref);
    mul_free(&ta);
    mul_free(&tb);
    mul_free(&ty);
}
END_TEST

START_TEST(test_mul_backward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 700 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    int n = _i % 10 == 0 ? th_int(&r, 1, 20000) : th_int(&r, 1, 700), view = _i % 3 == 1 ? 1 + 2 * (_i % 4) : 0;
    int want_da = _i % 4 != 1, want_db = _i % 4 != 2;
    float *a = th_malloc((size_t)n * 4), *b = th_malloc((size_t)n * 4), *dy = th_malloc((size_t)n * 4);
    double *ad = th_malloc((size_t)n * 8), *bd = th_malloc((size_t)n * 8), *dyd = th_malloc((size_t)n * 8),
           *rda = th_malloc((size_t)n * 8), *rdb = th_malloc((size_t)n * 8);
    th_fill_normal(&r, a, (size_t)n, 0, 2);
    th_fill_normal(&r, b, (size_t)n, 0, 2);
    th_fill_normal(&r, dy, (size_t)n, 0, 1);
    th_to_double(a, ad, (size_t)n);
    th_to_double(b, bd, (size_t)n);
    th_to_double(dy, dyd, (size_t)n);
    ref_mul_backward(ad, bd, dyd, (size_t)n, rda, rdb);
    mul_dev ta = mul_dev_make(ctx, n, view, a), tb = mul_dev_make(ctx, n, 0, b),
            tdy = mul_dev_make(ctx, n, view ? view + 1 : 0, dy), tda = mul_dev_make(ctx, n, view ? view + 2 : 0, NULL),
            tdb = mul_dev_make(ctx, n, view, NULL);
    TH_OK(ctx, teeny_mul_backward(ctx, ta.t, tb.t, tdy.t, want_da ? tda.t : NULL, want_db ? tdb.t : NULL));
    if (want_da)
        mul_expect(&tda, rda, "da", n, seed);
    if (want_db)
        mul_expect(&tdb, rdb, "db", n, seed);
    const mul_dev *skipped = !want_da ? &tda : !want_db ? &tdb : NULL;
    if (skipped) {
        float *o = th_read(skipped->t);
        for (int i = 0; i < n; i++)
            ck_assert_msg(isnan(o[i]), "unwanted gradient written; n=%d seed %llu", n, (unsigned long long)seed);
        free(o);
    }
    /* da aliasing dy exactly (what an in-place graph would do) */
    TH_OK(ctx, teeny_mul_backward(ctx, ta.t, tb.t, tdy.t, tdy.t, tdb.t));
    mul_expect(&tdy, rda, "da = dy", n, seed);
    mul_expect(&tdb, rdb, "db (with da = dy)", n, seed);
    free(a);
    free(b);
    free(dy);
    free(ad);
    free(bd);
    free(dyd);
    free(rda);
    free(rdb);
    mul_free(&ta);
    mul_free(&tb);
    mul_free(&tdy);
    mul_free(&tda);
    mul_free(&tdb);
}
END_TEST

/* Reference gradients against central differences of sum(a * b * dy);
 * bit-identical repeated runs; the op-table entry. */
START_TEST(test_mul_reference_and_table)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(13);
    double a[6], b[6], dy[6], y[6], da[6], db[6];
    for (int i = 0; i < 6; i++) {
        a[i] = th_normal(&r);
        b[i] = th_normal(&r);
        dy[i] = th_normal(&r);
    }
    ref_mul_backward(a, b, dy, 6, da, db);
    double *vars[2] = {a, b}, *grads[2] = {da, db};
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 6; i++) {
            double keep = vars[v][i], h = 1e-5, l[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                vars[v][i] = keep + (sgn ? -h : h);
                ref_mul(a, b, 6, y);
                l[sgn] = 0;
                for (int j = 0; j < 6; j++)
                    l[sgn] += y[j] * dy[j];
            }
            vars[v][i] = keep;
            ck_assert_msg(fabs((l[0] - l[1]) / (2 * h) - grads[v][i]) <= 1e-8, "var %d elem %d", v, i);
        }

    int64_t s[1] = {3001};
    float *x = th_malloc(3001 * 4), *w = th_malloc(3001 * 4);
    th_fill_normal(&r, x, 3001, 0, 1);
    th_fill_normal(&r, w, 3001, 0, 1);
    teeny_tensor *tx = th_tensor_from(ctx, 1, s, x), *tw = th_tensor_from(ctx, 1, s, w), *o1 = th_tensor(ctx, 1, s),
                 *o2 = th_tensor(ctx, 1, s);
    TH_OK(ctx, teeny_mul(ctx, tx, tw, o1));
    TH_OK(ctx, teeny_mul(ctx, tx, tw, o2));
    float *r1 = th_read(o1), *r2 = th_read(o2);
    ck_assert(!memcmp(r1, r2, 3001 * 4));
    free(r1);
    free(r2);
    free(x);
    free(w);

    const teeny__op *op = &teeny__ops[TEENY__OP_MUL];
    ck_assert_str_eq(op->name, "mul");
    ck_assert(op->infer && op->forward && op->backward);
    teeny__node_shapes ns = {.n_in = 2, .in = {{.ndim = 3, .shape = {4, 5, 6}}, {.ndim = 3, .shape = {4, 5, 6}}}};
    TH_OK(ctx, op->infer(ctx, &ns));
    ck_assert(ns.out.ndim == 3 && ns.out.shape[0] == 4 && ns.out.shape[1] == 5 && ns.out.shape[2] == 6);
    ck_assert(ns.n_param == 0 && ns.n_saved == 0);
    ns.in[1].shape[2] = 7;
    TH_STATUS(ctx, TEENY_ERR_SHAPE, op->infer(ctx, &ns));
    /* backward through the table: in = [a, b, y, dy], out = [da, db] */
    teeny_tensor *tda = th_tensor(ctx, 1, s);
    th_poison(tda);
    teeny__op_args args = {.in = {[TEENY__MUL_A] = tx, [TEENY__MUL_B] = tw, [TEENY__MUL_Y] = o1, [TEENY__MUL_DY] = tw},
                           .out = {[TEENY__MUL_A] = tda},
                           .training = 1};
    TH_OK(ctx, teeny__op_run(ctx, TEENY__OP_MUL, 1, &args));
    float *g = th_read(tda), *wv = th_read(tw);
    for (int i = 0; i < 3001; i++)
        ck_assert(g[i] == wv[i] * wv[i]);
    free(g);
    free(wv);
    teeny_tensor_destroy(tda);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(tw);
    teeny_tensor_destroy(o1);
    teeny_tensor_destroy(o2);
}
END_TEST

START_TEST(test_mul_errors)
{
    teeny_ctx *ctx = th_ctx();
    int64_t s4[1] = {4}, s5[1] = {5}, s8[1] = {8};
    teeny_tensor *a = th_tensor(ctx, 1, s4), *b = th_tensor(ctx, 1, s5), *c = th_tensor(ctx, 1, s4),
                 *big = th_tensor(ctx, 1, s8), *v = NULL, *v2 = NULL, *ai = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, s4, &ai));
    TH_OK(ctx, teeny_tensor_fill(a, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(c, 3.0f));
    TH_OK(ctx, teeny_tensor_fill(big, 2.0f));
    TH_OK(ctx, teeny_tensor_view(big, 2, 1, s4, &v));
    TH_OK(ctx, teeny_tensor_view(big, 0, 1, s4, &v2));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_mul(NULL, a, a, c));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_mul(ctx, a, NULL, c));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_mul(ctx, a, a, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_mul(ctx, ai, a, c));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_mul(ctx, a, b, c));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_mul(ctx, a, a, b));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_mul(ctx, v, a, v2)); /* partial overlap */
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_mul_backward(NULL, a, a, a, c, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_mul_backward(ctx, a, a, NULL, c, NULL));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_mul_backward(ctx, a, b, a, c, NULL));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_mul_backward(ctx, a, a, a, b, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_mul_backward(ctx, a, a, a, c, c));   /* da is db */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_mul_backward(ctx, a, a, v, v2, NULL)); /* partial overlap with dy */
    float y[8];
    TH_OK(ctx, teeny_tensor_read(big, y, 8));
    for (int i = 0; i < 8; i++)
        ck_assert(y[i] == 2.0f);
    TH_OK(ctx, teeny_tensor_read(c, y, 4));
    for (int i = 0; i < 4; i++)
        ck_assert(y[i] == 3.0f);
    teeny_tensor_destroy(v);
    teeny_tensor_destroy(v2);
    teeny_tensor_destroy(a);
    teeny_tensor_destroy(b);
    teeny_tensor_destroy(c);
    teeny_tensor_destroy(big);
    teeny_tensor_destroy(ai);
}
END_TEST

Suite *suite_elementwise(void)
{
    Suite *s = suite_create("elementwise");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_elementwise_forward, 0, th_small() ? 2 : 20);
    tcase_add_loop_test(bwd, test_elementwise_backward, 0, th_small() ? 2 : 20);
    tcase_add_test(err, test_elementwise_errors);
    tcase_add_loop_test(fwd, test_mul_forward, 0, th_small() ? 4 : th_full() ? 400 : 100);
    tcase_add_test(fwd, test_mul_reference_and_table);
    tcase_add_test(fwd, test_elementwise_float4);
    tcase_add_loop_test(bwd, test_mul_backward, 0, th_small() ? 4 : th_full() ? 400 : 100);
    tcase_add_test(err, test_mul_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
