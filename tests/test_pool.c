/*
 * test_pool.c -- max, average and global average pooling against the
 * float64 reference: seeded sweeps over kernels, strides, pads and sizes
 * (views at odd offsets, argmax given or not), NaN propagation,
 * determinism, finite differences of the reference gradients, the
 * op-table entries (infer) and every error path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clwrap.h"
#include "harness.h"
#include "ops/ops.h"
#include "ref/pool_ref.h"

#define TOL 1e-5

/* d against ref by nrms; where ref is not finite (a window entirely in
 * the padding: -inf, or NaN for an average that counts no tap) the output
 * must be the same value, every other element finite (written). */
static void expect_close(const th_dev *d, const double *ref, double tol, const char *what, const char *repro)
{
    float *out = th_read(d->t);
    double *r = th_malloc((size_t)d->n * sizeof *r);
    for (int64_t i = 0; i < d->n; i++) {
        r[i] = ref[i];
        if (isfinite(ref[i]))
            continue;
        ck_assert_msg(isnan(ref[i]) ? isnan(out[i]) : out[i] == ref[i], "%s: element %lld is %g, want %g; %s", what,
                      (long long)i, (double)out[i], ref[i], repro);
        out[i] = 0.0f;
        r[i] = 0.0;
    }
    long bad = th_first_nonfinite(out, (size_t)d->n);
    ck_assert_msg(bad < 0, "%s: element %ld not written (%g); %s", what, bad, bad >= 0 ? (double)out[bad] : 0.0,
                  repro);
    double e = th_nrms(out, r, (size_t)d->n);
    ck_assert_msg(e <= tol, "%s: nrms %.3g > %.1g; %s", what, e, tol, repro);
    free(out);
    free(r);
    th_dev_check_guard(d, what, repro);
}

/* Where ref holds NaN (an average that counts no tap) a NaN poison
 * cannot show the element was written: run again over a finite poison and
 * require NaN there. */
static void expect_nan_written(teeny_ctx *ctx, const teeny_pool2d_params *p, const th_dev *x, const th_dev *y,
                               const double *ref, const char *repro)
{
    int any = 0;
    for (int64_t i = 0; i < y->n && !any; i++)
        any = isnan(ref[i]);
    if (!any)
        return;
    TH_OK(ctx, teeny_tensor_fill(y->t, 12345.0f));
    TH_OK(ctx, teeny_avgpool2d_forward(ctx, p, x->t, y->t));
    float *out = th_read(y->t);
    for (int64_t i = 0; i < y->n; i++)
        ck_assert_msg(!isnan(ref[i]) || isnan(out[i]), "avgpool y[%lld] = %g, want NaN; %s", (long long)i,
                      (double)out[i], repro);
    free(out);
}

static int n_sweep(void)
{
    return th_small() ? 6 : th_full() ? 400 : 100;
}

/* ONNX's options on a sweep case: dilations 1..3, ceil_mode,
 * count_include_pad=0, pads before and after drawn apart (a third of the
 * cases past half the kernel span: windows entirely in the padding), the
 * plane grown where the padded input is shorter than the span. */
static void sweep_options(th_rng *r, ref_pool *p)
{
    int *k[2] = {&p->kh, &p->kw}, *d[2] = {&p->dh, &p->dw}, *pad[2] = {&p->ph, &p->pw}, *extra[2] = {&p->peh, &p->pew},
        *n[2] = {&p->H, &p->W};
    p->ceil_mode = th_int(r, 0, 1);
    p->exclude_pad = th_int(r, 0, 1);
    int large = th_int(r, 0, 2) == 0;
    for (int a = 0; a < 2; a++) {
        *d[a] = th_int(r, 1, 3);
        int span = (*k[a] - 1) * *d[a] + 1, most = large ? span + 1 : span / 2, end = th_int(r, 0, most);
        *pad[a] = th_int(r, 0, most);
        *extra[a] = end - *pad[a];
        if (*n[a] + *pad[a] + end < span)
            *n[a] = span - *pad[a] - end;
    }
}

/* Case i of the window sweep: kernels 1..5, strides 1..3, pads up to half
 * the kernel, planes from 1x1 up, some larger than the work-group. Every
 * sixth case is a window of more than 2^31 positions (kh * kw overflows
 * int; legal over a small input with pads near half the kernel), every
 * seventh has strides near 2^31 (a window start's ceiling division once
 * overflowed in the gradient); the other odd cases take ONNX's options
 * (sweep_options). */
static ref_pool sweep_geom(th_rng *r, int i)
{
    ref_pool p = {0};
    p.B = th_int(r, 1, 3);
    p.C = th_int(r, 1, 4);
    p.kh = th_int(r, 1, i % 4 == 0 ? 5 : 3);
    p.kw = i % 5 == 0 ? p.kh : th_int(r, 1, 4);
    p.sh = th_int(r, 1, 3);
    p.sw = i % 5 == 0 ? p.sh : th_int(r, 1, 3);
    if (i % 7 == 4) {
        p.sh = INT32_MAX - th_int(r, 0, 2);
        p.sw = th_int(r, 0, 1) ? p.sh : (1 << 30) + th_int(r, 0, 5);
    }
    p.ph = th_int(r, 0, p.kh / 2);
    p.pw = th_int(r, 0, p.kw / 2);
    p.H = th_int(r, 1, i % 10 == 0 ? 40 : 14);
    p.W = th_int(r, 1, i % 10 == 0 ? 40 : 14);
    if (i % 6 == 5) {
        p.H = th_int(r, 1, 5);
        p.W = th_int(r, 1, 5);
        p.kh = th_int(r, 46341, 70000);
        p.kw = th_int(r, INT32_MAX / p.kh + 1, 70000);
        p.ph = th_int(r, (p.kh - p.H + 1) / 2, p.kh / 2);
        p.pw = th_int(r, (p.kw - p.W + 1) / 2, p.kw / 2);
    }
    if (p.H + 2 * p.ph < p.kh)
        p.H = p.kh;
    if (p.W + 2 * p.pw < p.kw)
        p.W = p.kw;
    if (i % 2 == 1 && i % 6 != 5 && i % 7 != 4)
        sweep_options(r, &p);
    ref_pool_geom(&p);
    return p;
}

static int span_of(int k, int d)
{
    return (k - 1) * (d ? d : 1) + 1;
}

static teeny_pool2d_params to_params(const ref_pool *g)
{
    teeny_pool2d_params p = {.kernel = {g->kh, g->kw}, .stride = {g->sh, g->sw}, .pad = {g->ph, g->pw},
                             .pad_end_extra = {g->peh, g->pew}, .dilation = {g->dh, g->dw},
                             .ceil_mode = g->ceil_mode, .exclude_pad = g->exclude_pad};
    int hh = span_of(g->kh, g->dh) / 2, hw = span_of(g->kw, g->dw) / 2;
    p.large_pads = g->ph > hh || g->ph + g->peh > hh || g->pw > hw || g->pw + g->pew > hw;
    return p;
}

static void geom_str(const ref_pool *g, int view, uint64_t seed, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "x [%d, %d, %d, %d] kernel %dx%d stride %dx%d pad %dx%d pad_end_extra %dx%d dilation %dx%d ceil %d "
             "exclude_pad %d%s seed %llu",
             g->B, g->C, g->H, g->W, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->peh, g->pew, g->dh, g->dw,
             g->ceil_mode, g->exclude_pad, view ? " (views)" : "", (unsigned long long)seed);
}

START_TEST(test_pool_forward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 6000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    ref_pool g = sweep_geom(&r, _i);
    int view = _i % 3 == 0 ? 1 + 2 * (_i % 4) : 0, want_argmax = _i % 4 != 3;
    char repro[200];
    geom_str(&g, view, seed, repro, sizeof repro);
    teeny_pool2d_params p = to_params(&g);
    size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.C * g.OH * g.OW;
    float *x = th_malloc(nx * 4);
    th_fill_normal(&r, x, nx, th_uniform(&r, -3, 3), 2);
    if (_i % 3 == 2) /* small integers: ties, where the first maximum must win */
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)th_int(&r, -2, 2);
    int64_t xs[4] = {g.B, g.C, g.H, g.W}, ys[4] = {g.B, g.C, g.OH, g.OW}, ys_api[4];
    TH_OK(NULL, teeny_pool2d_output_shape(&p, xs, ys_api));
    ck_assert(!memcmp(ys, ys_api, sizeof ys));
    th_dev tx = th_dev_make(ctx, 0, 4, xs, view, x), ty = th_dev_make(ctx, 0, 4, ys, view ? view + 2 : 0, NULL),
           ta = th_dev_make(ctx, 1, 4, ys, view ? view + 1 : 0, NULL), tavg = th_dev_make(ctx, 0, 4, ys, view, NULL);
    TH_OK(ctx, teeny_maxpool2d_forward(ctx, &p, tx.t, ty.t, want_argmax ? ta.t : NULL));
    TH_OK(ctx, teeny_avgpool2d_forward(ctx, &p, tx.t, tavg.t));
    double *xd = th_dbl(x, nx), *ref = th_malloc(ny * 8);
    int32_t *ref_arg = th_malloc(ny * 4), *got_arg = th_malloc(ny * 4);
    ref_maxpool_forward(&g, xd, ref, ref_arg);
    expect_close(&ty, ref, TOL, "maxpool y", repro);
    TH_OK(ctx, teeny_tensor_read_i32(ta.t, got_arg, ny));
    for (size_t i = 0; i < ny; i++)
        ck_assert_msg(got_arg[i] == (want_argmax ? ref_arg[i] : -7), "argmax[%zu] = %d, want %d; %s", i, got_arg[i],
                      want_argmax ? ref_arg[i] : -7, repro);
    th_dev_check_guard(&ta, "argmax", repro);
    ref_avgpool_forward(&g, xd, ref);
    expect_close(&tavg, ref, TOL, "avgpool y", repro);
    expect_nan_written(ctx, &p, &tx, &tavg, ref, repro);
    free(x);
    free(xd);
    free(ref);
    free(ref_arg);
    free(got_arg);
    th_dev_free(&tx);
    th_dev_free(&ty);
    th_dev_free(&ta);
    th_dev_free(&tavg);
}
END_TEST

START_TEST(test_pool_backward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 7000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    ref_pool g = sweep_geom(&r, _i);
    int view = _i % 3 == 1 ? 1 + 2 * (_i % 4) : 0;
    char repro[200];
    geom_str(&g, view, seed, repro, sizeof repro);
    teeny_pool2d_params p = to_params(&g);
    size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.C * g.OH * g.OW;
    float *x = th_malloc(nx * 4), *dy = th_malloc(ny * 4);
    th_fill_normal(&r, x, nx, 0, 1);
    th_fill_normal(&r, dy, ny, 0, 1);
    int64_t xs[4] = {g.B, g.C, g.H, g.W}, ys[4] = {g.B, g.C, g.OH, g.OW};
    th_dev tx = th_dev_make(ctx, 0, 4, xs, view, x), ty = th_dev_make(ctx, 0, 4, ys, 0, NULL),
           ta = th_dev_make(ctx, 1, 4, ys, view ? view + 1 : 0, NULL), tdy = th_dev_make(ctx, 0, 4, ys, view, dy),
           tdx = th_dev_make(ctx, 0, 4, xs, view ? view + 2 : 0, NULL), tdx2 = th_dev_make(ctx, 0, 4, xs, view, NULL);
    TH_OK(ctx, teeny_maxpool2d_forward(ctx, &p, tx.t, ty.t, ta.t));
    TH_OK(ctx, teeny_maxpool2d_backward(ctx, &p, tx.t, ta.t, tdy.t, tdx.t));
    TH_OK(ctx, teeny_avgpool2d_backward(ctx, &p, tx.t, tdy.t, tdx2.t));
    double *xd = th_dbl(x, nx), *dyd = th_dbl(dy, ny), *yd = th_malloc(ny * 8), *ref = th_malloc(nx * 8);
    int32_t *arg = th_malloc(ny * 4);
    ref_maxpool_forward(&g, xd, yd, arg);
    ref_maxpool_backward(&g, arg, dyd, ref);
    expect_close(&tdx, ref, TOL, "maxpool dx", repro);
    ref_avgpool_backward(&g, dyd, ref);
    expect_close(&tdx2, ref, TOL, "avgpool dx", repro);
    free(x);
    free(dy);
    free(xd);
    free(dyd);
    free(yd);
    free(ref);
    free(arg);
    th_dev_free(&tx);
    th_dev_free(&ty);
    th_dev_free(&ta);
    th_dev_free(&tdy);
    th_dev_free(&tdx);
    th_dev_free(&tdx2);
}
END_TEST

START_TEST(test_pool_global)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 8000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    int B = th_int(&r, 1, 4), C = th_int(&r, 1, 9), H = th_int(&r, 1, _i % 5 == 0 ? 40 : 9),
        W = th_int(&r, 1, _i % 5 == 0 ? 40 : 9), S = H * W, view = _i % 3 == 0 ? 1 + 2 * (_i % 4) : 0;
    int flat = _i % 2, cpu = _i / 2 % 2; /* y as [B, C] or [B, C, 1, 1]; the CPU or the portable kernel */
    char repro[160];
    snprintf(repro, sizeof repro, "x [%d, %d, %d, %d]%s%s%s seed %llu", B, C, H, W, flat ? "" : " y 4-d",
             view ? " (views)" : "", cpu ? " (CPU variant)" : "", (unsigned long long)seed);
    size_t nx = (size_t)B * C * S, ny = (size_t)B * C;
    float *x = th_malloc(nx * 4), *dy = th_malloc(ny * 4);
    th_fill_normal(&r, x, nx, th_uniform(&r, -2, 2), 1);
    th_fill_normal(&r, dy, ny, 0, 1);
    int64_t xs[4] = {B, C, H, W}, ys[4] = {B, C, 1, 1};
    th_dev tx = th_dev_make(ctx, 0, 4, xs, view, x), ty = th_dev_make(ctx, 0, flat ? 2 : 4, ys, view ? view + 1 : 0, NULL),
           tdy = th_dev_make(ctx, 0, flat ? 2 : 4, ys, view, dy), tdx = th_dev_make(ctx, 0, 4, xs, view ? view + 2 : 0, NULL);
    th_cpu_kernels(cpu);
    TH_OK(ctx, teeny_global_avgpool_forward(ctx, tx.t, ty.t));
    th_cpu_kernels(-1);
    TH_OK(ctx, teeny_global_avgpool_backward(ctx, tdy.t, tdx.t));
    double *xd = th_dbl(x, nx), *dyd = th_dbl(dy, ny), *ry = th_malloc(ny * 8), *rdx = th_malloc(nx * 8),
           *mag = th_malloc(ny * 8);
    ref_gap_forward(B, C, S, xd, ry);
    for (size_t bc = 0; bc < ny; bc++) { /* the mean of signed values: measure against mean |x| */
        double m = 0;
        for (int e = 0; e < S; e++)
            m += fabs(xd[bc * (size_t)S + e]);
        mag[bc] = m / S;
    }
    ref_gap_backward(B, C, S, dyd, rdx);
    float *got = th_read(ty.t);
    ck_assert_msg(th_first_nonfinite(got, ny) < 0, "y not written; %s", repro);
    ck_assert_msg(th_nrms_mag(got, ry, mag, ny) <= TOL, "y nrms %g; %s", th_nrms_mag(got, ry, mag, ny), repro);
    free(got);
    th_dev_check_guard(&ty, "y", repro);
    expect_close(&tdx, rdx, TOL, "dx", repro);
    free(x);
    free(dy);
    free(xd);
    free(dyd);
    free(ry);
    free(rdx);
    free(mag);
    th_dev_free(&tx);
    th_dev_free(&ty);
    th_dev_free(&tdy);
    th_dev_free(&tdx);
}
END_TEST

/* Global max pooling against the float64 reference: y [B, C] or
 * [B, C, 1, 1] (argmax too), views, ties (small integers: the first
 * maximum wins), and the gradient, a gather of dy onto each argmax. */
/* The portable kernels (not the CPU variant) pool small planes a
 * work-item each where there are GAP_ITEM_PER_CU (64) per compute unit,
 * else a work-group each (pool_global.c): both routes against the
 * reference, planes of 49 and of 257 (past GAP_ITEM_S) elements. */
START_TEST(test_pool_global_route)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(8100);
    int many = 64 * (ctx->info.compute_units ? (int)ctx->info.compute_units : 1) + 3;
    static const struct {
        int B, H, W, many;
        const char *kernel;
    } cases[] = {{2, 7, 7, 1, "pool_gap_forward_cpu"}, {2, 7, 7, 0, "pool_gap_forward"},
                 {1, 1, 257, 1, "pool_gap_forward"}, {3, 16, 16, 1, "pool_gap_forward_cpu"}};
    th_cpu_kernels(0);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        int B = cases[ci].B, C = cases[ci].many ? (many + B - 1) / B : 5, S = cases[ci].H * cases[ci].W;
        size_t nx = (size_t)B * C * S, ny = (size_t)B * C;
        int64_t xs[4] = {B, C, cases[ci].H, cases[ci].W}, ys[2] = {B, C};
        float *x = th_malloc(nx * 4);
        th_fill_normal(&r, x, nx, 0.5, 1);
        th_dev tx = th_dev_make(ctx, 0, 4, xs, 3, x), ty = th_dev_make(ctx, 0, 2, ys, 1, NULL);
        double *xd = th_dbl(x, nx), *ref = th_malloc(ny * 8);
        char what[96];
        snprintf(what, sizeof what, "x [%d, %d, %d, %d]", B, C, cases[ci].H, cases[ci].W);
        ref_gap_forward(B, C, S, xd, ref);
        TH_OK(ctx, teeny_profile_begin(ctx));
        TH_OK(ctx, teeny_global_avgpool_forward(ctx, tx.t, ty.t));
        TH_OK(ctx, teeny_ctx_finish(ctx));
        ck_assert_int_eq(ctx->prog.prof_count, 1);
        ck_assert_msg(!strcmp(ctx->prog.prof_names[0], cases[ci].kernel), "%s: ran %s, not %s", what,
                      ctx->prog.prof_names[0], cases[ci].kernel);
        TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
        expect_close(&ty, ref, TOL, what, "test_pool_global_route");
        th_dev_check_guard(&ty, "y", what);
        free(x);
        free(xd);
        free(ref);
        th_dev_free(&tx);
        th_dev_free(&ty);
    }
    th_cpu_kernels(-1);
}
END_TEST

START_TEST(test_pool_global_max)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 8500 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    int B = th_int(&r, 1, 4), C = th_int(&r, 1, 9), H = th_int(&r, 1, _i % 5 == 0 ? 40 : 9),
        W = th_int(&r, 1, _i % 5 == 0 ? 40 : 9), S = H * W, view = _i % 3 == 0 ? 1 + 2 * (_i % 4) : 0, flat = _i % 2;
    char repro[160];
    snprintf(repro, sizeof repro, "global max x [%d, %d, %d, %d]%s%s seed %llu", B, C, H, W, flat ? "" : " y 4-d",
             view ? " (views)" : "", (unsigned long long)seed);
    size_t nx = (size_t)B * C * S, ny = (size_t)B * C;
    float *x = th_malloc(nx * 4), *dy = th_malloc(ny * 4);
    th_fill_normal(&r, x, nx, th_uniform(&r, -2, 2), 1);
    if (_i % 4 == 2)
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)th_int(&r, -2, 2);
    th_fill_normal(&r, dy, ny, 0, 1);
    int64_t xs[4] = {B, C, H, W}, ys[4] = {B, C, 1, 1};
    th_dev tx = th_dev_make(ctx, 0, 4, xs, view, x), ty = th_dev_make(ctx, 0, flat ? 2 : 4, ys, view ? view + 1 : 0, NULL),
           ta = th_dev_make(ctx, 1, flat ? 2 : 4, ys, view ? view + 2 : 0, NULL),
           ty2 = th_dev_make(ctx, 0, 2, ys, 0, NULL), tdy = th_dev_make(ctx, 0, flat ? 2 : 4, ys, view, dy),
           tdx = th_dev_make(ctx, 0, 4, xs, view ? view + 3 : 0, NULL);
    TH_OK(ctx, teeny_global_maxpool_forward(ctx, tx.t, ty.t, ta.t));
    TH_OK(ctx, teeny_global_maxpool_forward(ctx, tx.t, ty2.t, NULL));
    TH_OK(ctx, teeny_global_maxpool_backward(ctx, ta.t, tdy.t, tdx.t));
    double *xd = th_dbl(x, nx), *dyd = th_dbl(dy, ny), *ry = th_malloc(ny * 8), *rdx = th_malloc(nx * 8);
    int32_t *ra = th_malloc(ny * 4), *ga = th_malloc(ny * 4);
    ref_gmp_forward(B, C, S, xd, ry, ra);
    ref_gmp_backward(B, C, S, ra, dyd, rdx);
    expect_close(&ty, ry, 0.0, "y", repro); /* a maximum is exact */
    expect_close(&ty2, ry, 0.0, "y (no argmax)", repro);
    TH_OK(ctx, teeny_tensor_read_i32(ta.t, ga, ny));
    ck_assert_msg(!memcmp(ga, ra, ny * 4), "argmax differs; %s", repro);
    th_dev_check_guard(&ta, "argmax", repro);
    expect_close(&tdx, rdx, 0.0, "dx", repro);
    free(x);
    free(dy);
    free(xd);
    free(dyd);
    free(ry);
    free(rdx);
    free(ra);
    free(ga);
    th_dev_free(&tx);
    th_dev_free(&ty);
    th_dev_free(&ta);
    th_dev_free(&ty2);
    th_dev_free(&tdy);
    th_dev_free(&tdx);
}
END_TEST

/* ONNX's MaxPool Indices over the sweep's windows: the plane argmax of the
 * reference made flat over x, row-major or each plane column-major (-1
 * for windows entirely in the padding), the NaN-poisoned maxima aside. */
START_TEST(test_pool_indices)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 6000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    ref_pool g = sweep_geom(&r, _i);
    int cols = _i % 2, view = _i % 3 == 0 ? 3 : 0;
    char repro[240];
    geom_str(&g, view, seed, repro, sizeof repro);
    teeny_pool2d_params p = to_params(&g);
    size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.C * g.OH * g.OW, plane = (size_t)g.H * g.W;
    float *x = th_malloc(nx * 4);
    th_fill_normal(&r, x, nx, 0, 2);
    int64_t xs[4] = {g.B, g.C, g.H, g.W}, ys[4] = {g.B, g.C, g.OH, g.OW};
    th_dev tx = th_dev_make(ctx, 0, 4, xs, view, x), ti = th_dev_make(ctx, 1, 4, ys, view ? view + 2 : 0, NULL);
    TH_OK(ctx, teeny_maxpool2d_indices(ctx, &p, tx.t, cols, ti.t));
    double *xd = th_dbl(x, nx), *y = th_malloc(ny * 8);
    int32_t *arg = th_malloc(ny * 4), *got = th_malloc(ny * 4);
    ref_maxpool_forward(&g, xd, y, arg);
    TH_OK(ctx, teeny_tensor_read_i32(ti.t, got, ny));
    for (size_t o = 0; o < ny; o++) {
        size_t bc = o / ((size_t)g.OH * g.OW);
        int32_t a = arg[o], want = a < 0 ? -1 : (int32_t)(bc * plane) + (cols ? a % g.W * g.H + a / g.W : a);
        ck_assert_msg(got[o] == want, "indices[%zu] = %d, want %d (%s); %s", o, got[o], want,
                      cols ? "column-major" : "row-major", repro);
    }
    th_dev_check_guard(&ti, "indices", repro);
    free(x);
    free(xd);
    free(y);
    free(arg);
    free(got);
    th_dev_free(&tx);
    th_dev_free(&ti);
}
END_TEST

/* NaN wins its windows (PyTorch), and argmax points at it. */
START_TEST(test_pool_nan)
{
    teeny_ctx *ctx = th_ctx();
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i;
    x[5] = NAN;
    int64_t xs[4] = {1, 1, 4, 4}, ys[4] = {1, 1, 2, 2};
    teeny_pool2d_params p = TEENY_POOL2D_PARAMS_INIT;
    th_dev tx = th_dev_make(ctx, 0, 4, xs, 0, x), ty = th_dev_make(ctx, 0, 4, ys, 0, NULL),
           ta = th_dev_make(ctx, 1, 4, ys, 0, NULL);
    TH_OK(ctx, teeny_maxpool2d_forward(ctx, &p, tx.t, ty.t, ta.t));
    float *y = th_read(ty.t);
    int32_t a[4];
    TH_OK(ctx, teeny_tensor_read_i32(ta.t, a, 4));
    ck_assert(isnan(y[0]) && a[0] == 5);
    ck_assert(y[1] == 7.0f && a[1] == 7 && y[2] == 13.0f && a[2] == 13 && y[3] == 15.0f && a[3] == 15);
    free(y);
    th_dev_free(&tx);
    th_dev_free(&ty);
    th_dev_free(&ta);
}
END_TEST

/* The CPU variant's max pool without indices through a padded band
 * (pool_max_forward_cpu) against the reference and bit for bit against
 * pool_max_forward (the test hook POOL_MAX_CPU -1), on the cpu profile:
 * strides 1 and 2 (stride 3 stays pool_max_forward's), dilation, ceil
 * mode, pads wider than the window (windows of padding only: -inf), rows
 * narrower than 8, rows too wide for a whole plane's band (600 columns),
 * NaNs (a NaN wins; PyTorch's rule), views; and where a device limits
 * loop trips (8000), fewer rows an item, the same bits. */
START_TEST(test_pool_max_cpu)
{
    static const ref_pool cases[] = {
        /* B, C, H, W, kh, kw, sh, sw, ph, pw, (OH, OW), peh, pew, dh, dw, ceil, exclude */
        {2, 3, 17, 19, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0},
        {1, 2, 9, 7, 2, 3, 1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0},
        {1, 3, 12, 13, 3, 2, 2, 1, 1, 0, 0, 0, 1, 0, 2, 1, 1, 0},
        {2, 2, 6, 5, 2, 2, 1, 2, 3, 3, 0, 0, 0, 0, 1, 1, 0, 0},
        {1, 2, 5, 600, 3, 3, 1, 2, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0},
        {1, 2, 11, 11, 3, 3, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0},
    };
    teeny_ctx *ctx = th_ctx();
    if (!th_profile("cpu"))
        th_skip("%s cannot take the cpu profile", teeny_ctx_device_name(ctx));
    for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
        ref_pool g = cases[ci];
        ref_pool_geom(&g);
        uint64_t seed = 6900 + (uint64_t)ci;
        th_rng r = th_rng_make(seed);
        char repro[240];
        geom_str(&g, ci % 2, seed, repro, sizeof repro);
        teeny_pool2d_params p = to_params(&g);
        size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.C * g.OH * g.OW;
        float *x = th_malloc(nx * 4), *got[3];
        th_fill_normal(&r, x, nx, 0, 2);
        for (size_t i = 7; i < nx; i += 37) /* NaNs, a few windows with two */
            x[i] = NAN;
        int64_t xs[4] = {g.B, g.C, g.H, g.W}, ys[4] = {g.B, g.C, g.OH, g.OW};
        th_dev tx = th_dev_make(ctx, 0, 4, xs, ci % 2 ? 3 : 0, x), ty = th_dev_make(ctx, 0, 4, ys, ci % 2 ? 5 : 0, NULL);
        double *xd = th_dbl(x, nx), *ref = th_malloc(ny * 8);
        ref_maxpool_forward(&g, xd, ref, NULL);
        int band = g.sw <= 2;
        for (int run = 0; run < 3; run++) { /* band; band under a loop limit; pool_max_forward */
            th_hook(TEENY__HOOK_POOL_MAX_CPU, run == 2 ? -1 : 0);
            th_loop_limit(run == 1 ? 8000 : 0);
            th_poison(ty.t);
            TH_OK(ctx, teeny_profile_begin(ctx));
            TH_OK(ctx, teeny_maxpool2d_forward(ctx, &p, tx.t, ty.t, NULL));
            TH_OK(ctx, teeny_ctx_finish(ctx));
            int ran = 0;
            for (int i = 0; i < ctx->prog.prof_count; i++)
                ran = ran || !strcmp(ctx->prog.prof_names[i], "pool_max_forward_cpu");
            TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
            ck_assert_msg(ran == (band && run < 2), "run %d: pool_max_forward_cpu %s; %s", run,
                          ran ? "ran" : "did not run", repro);
            got[run] = th_read(ty.t);
            for (size_t i = 0; i < ny; i++)
                ck_assert_msg(isnan(ref[i]) ? isnan(got[run][i]) : got[run][i] == (float)ref[i],
                              "run %d: y[%zu] = %g, want %g; %s", run, i, got[run][i], ref[i], repro);
            th_dev_check_guard(&ty, "y", repro);
        }
        for (int run = 0; run < 2; run++)
            ck_assert_msg(!memcmp(got[run], got[2], ny * 4), "run %d: bits differ from pool_max_forward's; %s", run,
                          repro);
        th_loop_limit(-1);
        th_hook(TEENY__HOOK_POOL_MAX_CPU, 0);
        for (int run = 0; run < 3; run++)
            free(got[run]);
        free(x);
        free(xd);
        free(ref);
        th_dev_free(&tx);
        th_dev_free(&ty);
    }
    th_profile(NULL);
}
END_TEST

START_TEST(test_pool_determinism)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(31);
    ref_pool g = {.B = 2, .C = 3, .H = 37, .W = 29, .kh = 3, .kw = 3, .sh = 1, .sw = 2, .ph = 1, .pw = 1};
    ref_pool_geom(&g);
    teeny_pool2d_params p = to_params(&g);
    size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.C * g.OH * g.OW;
    float *x = th_malloc(nx * 4), *dy = th_malloc(ny * 4);
    th_fill_normal(&r, x, nx, 0, 1);
    th_fill_normal(&r, dy, ny, 0, 1);
    int64_t xs[4] = {g.B, g.C, g.H, g.W}, ys[4] = {g.B, g.C, g.OH, g.OW}, gs[2] = {g.B, g.C};
    th_dev tx = th_dev_make(ctx, 0, 4, xs, 0, x), tdy = th_dev_make(ctx, 0, 4, ys, 0, dy),
           ta = th_dev_make(ctx, 1, 4, ys, 0, NULL), ty = th_dev_make(ctx, 0, 4, ys, 0, NULL);
    TH_OK(ctx, teeny_maxpool2d_forward(ctx, &p, tx.t, ty.t, ta.t));
    float *out[2][3];
    for (int run = 0; run < 2; run++) {
        th_dev a = th_dev_make(ctx, 0, 4, xs, 0, NULL), b = th_dev_make(ctx, 0, 4, xs, 0, NULL),
               c = th_dev_make(ctx, 0, 2, gs, 0, NULL);
        TH_OK(ctx, teeny_maxpool2d_backward(ctx, &p, tx.t, ta.t, tdy.t, a.t));
        TH_OK(ctx, teeny_avgpool2d_backward(ctx, &p, tx.t, tdy.t, b.t));
        TH_OK(ctx, teeny_global_avgpool_forward(ctx, tx.t, c.t));
        out[run][0] = th_read(a.t);
        out[run][1] = th_read(b.t);
        out[run][2] = th_read(c.t);
        th_dev_free(&a);
        th_dev_free(&b);
        th_dev_free(&c);
    }
    size_t sizes[3] = {nx * 4, nx * 4, (size_t)g.B * g.C * 4};
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(!memcmp(out[0][k], out[1][k], sizes[k]), "output %d differs between runs", k);
        free(out[0][k]);
        free(out[1][k]);
    }
    free(x);
    free(dy);
    th_dev_free(&tx);
    th_dev_free(&tdy);
    th_dev_free(&ta);
    th_dev_free(&ty);
}
END_TEST

/* Windows whose kh * kw passes 2^31 (the divisor was an int product: the
 * wrong sign at 46341^2, -2^31 at 65536 x 32768, inf at 65536^2), over a
 * one-element padded input, eager and through a graph: every output is
 * x / (kh * kw) in float64, and every gradient dy / (kh * kw). */
START_TEST(test_pool_huge_windows)
{
    teeny_ctx *ctx = th_ctx();
    static const int k[][2] = {{46341, 46341}, {65536, 32768}, {65536, 65536}, {INT32_MAX, 3}};
    int64_t xs[4] = {1, 2, 1, 1};
    float x[2] = {3.5f, -1.25f}, dy[8] = {0.75f, -2.0f, 1.5f, 0.25f, -0.5f, 3.0f, 1.0f, -1.5f};
    double xd[2] = {x[0], x[1]}, dyd[8], yref[8], dxref[2];
    th_to_double(dy, dyd, 8);
    th_dev tx = th_dev_make(ctx, 0, 4, xs, 0, x);
    for (size_t c = 0; c < sizeof k / sizeof k[0]; c++) {
        ref_pool g = {.B = 1, .C = 2, .H = 1, .W = 1, .kh = k[c][0], .kw = k[c][1], .sh = 1, .sw = 1,
                      .ph = k[c][0] / 2, .pw = k[c][1] / 2};
        ref_pool_geom(&g);
        teeny_pool2d_params p = to_params(&g);
        int64_t ys[4] = {1, 2, g.OH, g.OW}, ys_api[4];
        char what[160];
        geom_str(&g, 0, 0, what, sizeof what);
        TH_OK(NULL, teeny_pool2d_output_shape(&p, xs, ys_api));
        ck_assert_msg(!memcmp(ys, ys_api, sizeof ys), "%s: output shape", what);
        th_dev ty = th_dev_make(ctx, 0, 4, ys, 2, NULL), tdy = th_dev_make(ctx, 0, 4, ys, 1, dy),
               tdx = th_dev_make(ctx, 0, 4, xs, 3, NULL);
        TH_OK(ctx, teeny_avgpool2d_forward(ctx, &p, tx.t, ty.t));
        TH_OK(ctx, teeny_avgpool2d_backward(ctx, &p, tx.t, tdy.t, tdx.t));
        ref_avgpool_forward(&g, xd, yref);
        ref_avgpool_backward(&g, dyd, dxref);
        /* every window covers the one element: y = x / (kh * kw) */
        for (int j = 0; j < g.OH * g.OW; j++)
            ck_assert(yref[j] == xd[0] / ((double)g.kh * g.kw) &&
                      yref[g.OH * g.OW + j] == xd[1] / ((double)g.kh * g.kw));
        expect_close(&ty, yref, TOL, "avgpool y", what);
        expect_close(&tdx, dxref, TOL, "avgpool dx", what);
        th_dev_free(&ty);
        th_dev_free(&tdy);
        th_dev_free(&tdx);
    }
    /* 46341 x 46341 through a graph plan (the op table's forward) */
    teeny_graph *g;
    teeny_node in, out;
    teeny_plan *plan;
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_pool2d_params p = {.kernel = {46341, 46341}, .stride = {1, 1}, .pad = {23170, 23170}};
    int64_t gs[4] = {-1, 2, 1, 1};
    float got[2];
    pp.training = 0;
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 4, gs, &in));
    TH_OK(ctx, teeny_graph_avgpool2d(g, "avg", in, &p, &out));
    TH_OK(ctx, teeny_graph_compile(g, &pp, &plan));
    teeny_tensor *px;
    TH_OK(ctx, teeny_plan_tensor(plan, in, &px));
    TH_OK(ctx, teeny_tensor_write(px, x, 2));
    TH_OK(ctx, teeny_plan_forward(plan));
    TH_OK(ctx, teeny_plan_read(plan, out, got, 2));
    for (int i = 0; i < 2; i++) {
        double want = x[i] / (46341.0 * 46341.0);
        ck_assert_msg(fabs(got[i] - want) <= TOL * fabs(want), "graph: y[%d] = %g, want %g", i, (double)got[i], want);
    }
    teeny_plan_destroy(plan);
    teeny_graph_destroy(g);
    th_dev_free(&tx);
}
END_TEST

/* The window ops' five launches of test_pool_split_loops, outputs
 * poisoned first; returns the kernels launched. */
static long split_run(teeny_ctx *ctx, const teeny_pool2d_params *p, th_dev *d, teeny_status want)
{
    int32_t *m7 = th_malloc((size_t)d[2].n * 4);
    for (int64_t i = 0; i < d[2].n; i++)
        m7[i] = -7;
    TH_OK(ctx, teeny_tensor_write_i32(d[2].t, m7, (size_t)d[2].n));
    free(m7);
    for (int i = 1; i < 7; i++)
        if (i != 2)
            th_poison(d[i].t);
    teeny__calls_reset();
    TH_STATUS(ctx, want, teeny_maxpool2d_forward(ctx, p, d[0].t, d[1].t, d[2].t));
    TH_STATUS(ctx, want, teeny_maxpool2d_forward(ctx, p, d[0].t, d[3].t, NULL));
    TH_STATUS(ctx, want, teeny_avgpool2d_forward(ctx, p, d[0].t, d[4].t));
    TH_STATUS(ctx, want, teeny_maxpool2d_backward(ctx, p, d[0].t, d[2].t, d[7].t, d[5].t));
    TH_STATUS(ctx, want, teeny_avgpool2d_backward(ctx, p, d[0].t, d[7].t, d[6].t));
    TH_OK(ctx, teeny_ctx_finish(ctx));
    return teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel);
}

static float *split_read(teeny_ctx *ctx, const th_dev *d)
{
    if (!d->i32)
        return th_read(d->t);
    float *v = th_malloc((size_t)d->n * 4); /* the int32 argmax, compared bitwise */
    TH_OK(ctx, teeny_tensor_read_i32(d->t, (int32_t *)(void *)v, (size_t)d->n));
    return v;
}

/* Where a device limits a work-item's loop trips (Mesa's llvmpipe;
 * forced here with th_loop_limit): the window loops run in launches over
 * bands of rows (forward: 13 rows of 11, 13*13 + 1 trips; gradients: 13
 * covering rows of 6 windows, 13*8 + 1), the outputs carrying the running
 * result, so the bits equal one launch's; global pooling sums a plane in
 * chunks (its CPU variant, and the portable kernel past its budget)
 * against the float64 reference. A limit too small for one row or chunk
 * is TEENY_ERR_UNSUPPORTED with every output untouched. */
START_TEST(test_pool_split_loops)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(4242);
    ref_pool g = {.B = 2, .C = 3, .H = 40, .W = 37, .kh = 13, .kw = 11, .sh = 1, .sw = 2, .ph = 6, .pw = 5};
    ref_pool_geom(&g);
    teeny_pool2d_params p = to_params(&g);
    size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.C * g.OH * g.OW;
    float *x = th_malloc(nx * 4), *dy = th_malloc(ny * 4), *one[7];
    th_fill_normal(&r, x, nx, 0, 1);
    th_fill_normal(&r, dy, ny, 0, 1);
    int64_t xs[4] = {g.B, g.C, g.H, g.W}, ys[4] = {g.B, g.C, g.OH, g.OW};
    /* x, y, argmax, y without argmax, avg y, max dx, avg dx, dy */
    th_dev d[8] = {th_dev_make(ctx, 0, 4, xs, 0, x),    th_dev_make(ctx, 0, 4, ys, 3, NULL),
                   th_dev_make(ctx, 1, 4, ys, 0, NULL), th_dev_make(ctx, 0, 4, ys, 0, NULL),
                   th_dev_make(ctx, 0, 4, ys, 1, NULL), th_dev_make(ctx, 0, 4, xs, 0, NULL),
                   th_dev_make(ctx, 0, 4, xs, 2, NULL), th_dev_make(ctx, 0, 4, ys, 0, dy)};
    th_loop_limit(0);
    ck_assert_int_eq(split_run(ctx, &p, d, TEENY_OK), 5);
    for (int i = 1; i < 7; i++)
        one[i] = split_read(ctx, &d[i]);
    /* limit 120 (budget 60): forward bands of 4 rows (4 launches), gradients
     * of 7 (2); limit 40: 1 and 2 rows (13 and 7 launches) */
    static const long limits[2] = {120, 40}, launches[2] = {3 * 4 + 2 * 2, 3 * 13 + 2 * 7};
    for (int li = 0; li < 2; li++) {
        th_loop_limit(limits[li]);
        ck_assert_int_eq(split_run(ctx, &p, d, TEENY_OK), launches[li]);
        for (int i = 1; i < 7; i++) {
            float *got = split_read(ctx, &d[i]);
            ck_assert_msg(!memcmp(got, one[i], (size_t)d[i].n * 4), "limit %ld: output %d differs from one "
                          "launch's", limits[li], i);
            free(got);
            th_dev_check_guard(&d[i], "split output", "test_pool_split_loops");
        }
    }
    th_loop_limit(16); /* budget 8: not one row of the forward (14 trips) or the gradients (9) */
    ck_assert_int_eq(split_run(ctx, &p, d, TEENY_ERR_UNSUPPORTED), 0);
    for (int i = 1; i < 7; i++)
        if (i != 2)
            th_expect_all(d[i].t, NAN);
    int32_t *am = th_malloc(ny * 4);
    TH_OK(ctx, teeny_tensor_read_i32(d[2].t, am, ny));
    for (size_t i = 0; i < ny; i++)
        ck_assert_int_eq(am[i], -7);
    free(am);

    /* global pooling: [2, 3, 40, 37] on the CPU variant (chunks of 99 of
     * 1480: 15 partials), [1, 2, 300, 1000] on the portable kernel (at a
     * work-group of 256, 1198 trips: past budget 1000, so chunks of 999) */
    static const struct {
        int64_t shape[4];
        int cpu;
        long limit;
    } gc[2] = {{{2, 3, 40, 37}, 1, 200}, {{1, 2, 300, 1000}, 0, 2000}};
    for (int ci = 0; ci < 2; ci++) {
        int64_t gs[2] = {gc[ci].shape[0], gc[ci].shape[1]};
        int S = (int)(gc[ci].shape[2] * gc[ci].shape[3]);
        size_t n = (size_t)gs[0] * gs[1] * S, nb = (size_t)gs[0] * gs[1];
        float *gx = th_malloc(n * 4);
        th_fill_normal(&r, gx, n, 1, 1);
        th_dev tgx = th_dev_make(ctx, 0, 4, gc[ci].shape, 0, gx), tgy = th_dev_make(ctx, 0, 2, gs, 1, NULL);
        double *xd = th_dbl(gx, n), *ref = th_malloc(nb * 8);
        ref_gap_forward((int)gs[0], (int)gs[1], S, xd, ref);
        th_cpu_kernels(gc[ci].cpu);
        for (int li = 0; li < 2; li++) {
            char what[96];
            snprintf(what, sizeof what, "global pooling, case %d, limit %ld", ci, li ? gc[ci].limit : 0L);
            th_loop_limit(li ? gc[ci].limit : 0);
            th_poison(tgy.t);
            teeny__calls_reset();
            TH_OK(ctx, teeny_global_avgpool_forward(ctx, tgx.t, tgy.t));
            TH_OK(ctx, teeny_ctx_finish(ctx));
            ck_assert_msg(teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel) == 1 + li, "%s: %ld launches", what,
                          teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel));
            expect_close(&tgy, ref, TOL, what, "test_pool_split_loops");
        }
        th_loop_limit(4); /* budget 2: chunks of 1, too many partials for one item */
        th_poison(tgy.t);
        TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_global_avgpool_forward(ctx, tgx.t, tgy.t));
        th_expect_all(tgy.t, NAN);
        th_cpu_kernels(-1);
        free(gx);
        free(xd);
        free(ref);
        th_dev_free(&tgx);
        th_dev_free(&tgy);
    }
    th_loop_limit(-1);
    for (int i = 1; i < 7; i++)
        free(one[i]);
    for (int i = 0; i < 8; i++)
        th_dev_free(&d[i]);
    free(x);
    free(dy);
}
END_TEST

/* The loop splits with ONNX's options (dilation 2x3, pads before and
 * after apart and past half the span, ceil_mode, count_include_pad=0):
 * under a loop limit the window ops run in more launches with the same
 * bits as one; global max pooling bands a plane's rows (forward: 40 rows
 * of 37 + 2 trips, 2 rows a launch at budget 100 -> 20 launches; its
 * gradient covers one window: 1 launch). */
START_TEST(test_pool_split_options)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(4343);
    ref_pool g = {.B = 2, .C = 2, .H = 33, .W = 29, .kh = 9, .kw = 7, .sh = 2, .sw = 1, .ph = 9, .pw = 4,
                  .peh = -6, .pew = 5, .dh = 2, .dw = 3, .ceil_mode = 1, .exclude_pad = 1};
    ref_pool_geom(&g);
    teeny_pool2d_params p = to_params(&g);
    ck_assert(p.large_pads);
    size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.C * g.OH * g.OW;
    float *x = th_malloc(nx * 4), *dy = th_malloc(ny * 4), *one[7];
    th_fill_normal(&r, x, nx, 0, 1);
    th_fill_normal(&r, dy, ny, 0, 1);
    int64_t xs[4] = {g.B, g.C, g.H, g.W}, ys[4] = {g.B, g.C, g.OH, g.OW};
    th_dev d[8] = {th_dev_make(ctx, 0, 4, xs, 0, x),    th_dev_make(ctx, 0, 4, ys, 3, NULL),
                   th_dev_make(ctx, 1, 4, ys, 0, NULL), th_dev_make(ctx, 0, 4, ys, 0, NULL),
                   th_dev_make(ctx, 0, 4, ys, 1, NULL), th_dev_make(ctx, 0, 4, xs, 0, NULL),
                   th_dev_make(ctx, 0, 4, xs, 2, NULL), th_dev_make(ctx, 0, 4, ys, 0, dy)};
    th_loop_limit(0);
    ck_assert_int_eq(split_run(ctx, &p, d, TEENY_OK), 5);
    double *xd = th_dbl(x, nx), *ref = th_malloc(nx * 8);
    ref_avgpool_forward(&g, xd, ref);
    expect_close(&d[4], ref, TOL, "avgpool y (one launch)", "test_pool_split_options");
    for (int i = 1; i < 7; i++)
        one[i] = split_read(ctx, &d[i]);
    th_loop_limit(60); /* budget 30: forward bands of 3 rows, gradients of 1 */
    ck_assert(split_run(ctx, &p, d, TEENY_OK) > 10);
    for (int i = 1; i < 7; i++) {
        float *got = split_read(ctx, &d[i]);
        ck_assert_msg(!memcmp(got, one[i], (size_t)d[i].n * 4), "output %d differs from one launch's", i);
        free(got);
        th_dev_check_guard(&d[i], "split output", "test_pool_split_options");
    }
    /* global max pooling */
    int64_t gx[4] = {2, 3, 40, 37}, gy[2] = {2, 3};
    size_t ngx = 2 * 3 * 40 * 37;
    float *gxv = th_malloc(ngx * 4), *gdy = th_malloc(6 * 4);
    th_fill_normal(&r, gxv, ngx, 0, 1);
    th_fill_normal(&r, gdy, 6, 0, 1);
    th_dev tgx = th_dev_make(ctx, 0, 4, gx, 0, gxv), tgy = th_dev_make(ctx, 0, 2, gy, 1, NULL),
           tga = th_dev_make(ctx, 1, 2, gy, 0, NULL), tgdy = th_dev_make(ctx, 0, 2, gy, 0, gdy),
           tgdx = th_dev_make(ctx, 0, 4, gx, 0, NULL);
    double *gxd = th_dbl(gxv, ngx), *gdyd = th_dbl(gdy, 6), gref[6], *gdx = th_malloc(ngx * 8);
    int32_t garg[6];
    ref_gmp_forward(2, 3, 40 * 37, gxd, gref, garg);
    ref_gmp_backward(2, 3, 40 * 37, garg, gdyd, gdx);
    static const long limits[2] = {0, 200}, launches[2] = {1, 20};
    for (int li = 0; li < 2; li++) {
        th_loop_limit(limits[li]);
        th_poison(tgy.t);
        th_poison(tgdx.t);
        teeny__calls_reset();
        TH_OK(ctx, teeny_global_maxpool_forward(ctx, tgx.t, tgy.t, tga.t));
        TH_OK(ctx, teeny_ctx_finish(ctx));
        ck_assert_int_eq(teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel), launches[li]);
        TH_OK(ctx, teeny_global_maxpool_backward(ctx, tga.t, tgdy.t, tgdx.t));
        expect_close(&tgy, gref, 0.0, "global max y", "test_pool_split_options");
        expect_close(&tgdx, gdx, 0.0, "global max dx", "test_pool_split_options");
    }
    th_loop_limit(-1);
    for (int i = 1; i < 7; i++)
        free(one[i]);
    for (int i = 0; i < 8; i++)
        th_dev_free(&d[i]);
    th_dev_free(&tgx);
    th_dev_free(&tgy);
    th_dev_free(&tga);
    th_dev_free(&tgdy);
    th_dev_free(&tgdx);
    free(x);
    free(dy);
    free(xd);
    free(ref);
    free(gxv);
    free(gdy);
    free(gxd);
    free(gdyd);
    free(gdx);
}
END_TEST

/* The reference gradients against central differences of sum(y * dy):
 * PyTorch's windows, ONNX's options (dilation 2, pads before and after
 * apart and past half the kernel span, ceil_mode adding a window, with and
 * without count_include_pad; every window keeps a tap inside x), and
 * global max pooling. */
START_TEST(test_pool_finite_diff)
{
    static const ref_pool geoms[3] = {
        {.B = 1, .C = 2, .H = 5, .W = 4, .kh = 3, .kw = 2, .sh = 2, .sw = 1, .ph = 1, .pw = 1},
        {.B = 1, .C = 2, .H = 7, .W = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 3, .ph = 2, .pw = 1, .peh = -1, .pew = 2,
         .dh = 2, .dw = 2, .ceil_mode = 1, .exclude_pad = 1},
        {.B = 1, .C = 2, .H = 7, .W = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 3, .ph = 2, .pw = 1, .peh = -1, .pew = 2,
         .dh = 2, .dw = 2, .ceil_mode = 1},
    };
    th_rng r = th_rng_make(8);
    enum { NX = 84, NY = 64 };
    for (int gi = 0; gi < 3; gi++) {
        ref_pool g = geoms[gi];
        ref_pool_geom(&g);
        int nx = g.B * g.C * g.H * g.W, ny = g.B * g.C * g.OH * g.OW, S = g.H * g.W;
        ck_assert(nx <= NX && ny <= NY);
        double x[NX], dy[NY], y[NY], dmax[NX], davg[NX], dgmp[NX], gdy[2], gy[2];
        int32_t arg[NY], garg[2];
        for (int i = 0; i < nx; i++)
            x[i] = (i * 37 % nx) * 0.37 + 0.1 * th_normal(&r); /* distinct, no near-ties */
        for (int i = 0; i < ny; i++)
            dy[i] = th_normal(&r);
        gdy[0] = th_normal(&r);
        gdy[1] = th_normal(&r);
        ref_maxpool_forward(&g, x, y, arg);
        for (int i = 0; i < ny; i++)
            ck_assert_msg(arg[i] >= 0, "geometry %d: window %d has no tap inside x", gi, i);
        ref_maxpool_backward(&g, arg, dy, dmax);
        ref_avgpool_backward(&g, dy, davg);
        ref_gmp_forward(1, 2, S, x, gy, garg);
        ref_gmp_backward(1, 2, S, garg, gdy, dgmp);
        for (int i = 0; i < nx; i++) {
            double keep = x[i], h = 1e-6, l[3][2];
            for (int sgn = 0; sgn < 2; sgn++) {
                x[i] = keep + (sgn ? -h : h);
                ref_maxpool_forward(&g, x, y, NULL);
                l[0][sgn] = 0;
                for (int j = 0; j < ny; j++)
                    l[0][sgn] += y[j] * dy[j];
                ref_avgpool_forward(&g, x, y);
                l[1][sgn] = 0;
                for (int j = 0; j < ny; j++)
                    l[1][sgn] += y[j] * dy[j];
                ref_gmp_forward(1, 2, S, x, gy, NULL);
                l[2][sgn] = gy[0] * gdy[0] + gy[1] * gdy[1];
            }
            x[i] = keep;
            const double *grads[3] = {dmax, davg, dgmp};
            for (int k = 0; k < 3; k++) {
                double fd = (l[k][0] - l[k][1]) / (2 * h);
                ck_assert_msg(fabs(fd - grads[k][i]) <= 1e-6, "geometry %d op %d elem %d: fd %g ref %g", gi, k, i, fd,
                              grads[k][i]);
            }
        }
    }
    /* the global average too, on the first geometry's plane */
    double x[40], gdy[2] = {0.7, -1.3}, dgap[40], gy[2];
    for (int i = 0; i < 40; i++)
        x[i] = th_normal(&r);
    ref_gap_backward(1, 2, 20, gdy, dgap);
    for (int i = 0; i < 40; i++) {
        double keep = x[i], h = 1e-6, l[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            x[i] = keep + (sgn ? -h : h);
            ref_gap_forward(1, 2, 20, x, gy);
            l[sgn] = gy[0] * gdy[0] + gy[1] * gdy[1];
        }
        x[i] = keep;
        ck_assert_msg(fabs((l[0] - l[1]) / (2 * h) - dgap[i]) <= 1e-6, "global average elem %d", i);
    }
}
END_TEST

START_TEST(test_pool_op_table)
{
    teeny_ctx *ctx = th_ctx();
    const teeny__op *mx = &teeny__ops[TEENY__OP_MAXPOOL2D], *av = &teeny__ops[TEENY__OP_AVGPOOL2D],
                    *gp = &teeny__ops[TEENY__OP_GLOBAL_AVGPOOL];
    ck_assert_str_eq(mx->name, "maxpool2d");
    ck_assert_str_eq(av->name, "avgpool2d");
    ck_assert_str_eq(gp->name, "global_avgpool");
    teeny__node_shapes s = {.n_in = 1, .in = {{.ndim = 4, .shape = {8, 3, 28, 27}}},
                            .attrs.pool2d = {.kernel = {3, 2}, .stride = {2, 2}, .pad = {1, 0}}};
    TH_OK(ctx, mx->infer(ctx, &s));
    ck_assert(s.out.ndim == 4 && s.out.shape[0] == 8 && s.out.shape[1] == 3 && s.out.shape[2] == 14 &&
              s.out.shape[3] == 13 && !s.out.is_i32);
    ck_assert(s.n_saved == 1 && s.saved[0].is_i32 == 1 && s.saved_needs_training == 1 && s.n_param == 0);
    ck_assert(!memcmp(s.saved[0].shape, s.out.shape, sizeof s.out.shape) && s.saved[0].ndim == 4);
    teeny__node_shapes a = {.n_in = 1, .in = {{.ndim = 4, .shape = {2, 5, 7, 7}}},
                            .attrs.pool2d = {.kernel = {2, 2}, .stride = {2, 2}, .pad = {0, 0}}};
    TH_OK(ctx, av->infer(ctx, &a));
    ck_assert(a.out.shape[2] == 3 && a.out.shape[3] == 3 && a.n_saved == 0);
    teeny__node_shapes gs = {.n_in = 1, .in = {{.ndim = 4, .shape = {2, 5, 7, 6}}}};
    TH_OK(ctx, gp->infer(ctx, &gs));
    ck_assert(gs.out.ndim == 2 && gs.out.shape[0] == 2 && gs.out.shape[1] == 5 && gs.n_saved == 0);
    teeny__node_shapes bad = {.n_in = 1, .in = {{.ndim = 4, .shape = {2, 5, 7, 7}}},
                            .attrs.pool2d = {.kernel = {2, 2}, .stride = {2, 2}, .pad = {2, 0}}};
    TH_STATUS(ctx, TEENY_ERR_ARG, mx->infer(ctx, &bad)); /* pad > kernel / 2 */
    teeny__node_shapes small = {.n_in = 1, .in = {{.ndim = 4, .shape = {2, 5, 2, 7}}},
                            .attrs.pool2d = {.kernel = {5, 2}, .stride = {1, 1}, .pad = {1, 0}}};
    TH_STATUS(ctx, TEENY_ERR_SHAPE, av->infer(ctx, &small)); /* kernel larger than the padded input */
    teeny__node_shapes rank = {.n_in = 1, .in = {{.ndim = 2, .shape = {2, 5}}}};
    TH_STATUS(ctx, TEENY_ERR_SHAPE, gp->infer(ctx, &rank));
    rank.attrs.pool2d = (teeny__pool2d_attrs){.kernel = {1, 1}, .stride = {1, 1}, .pad = {0, 0}};
    TH_STATUS(ctx, TEENY_ERR_SHAPE, mx->infer(ctx, &rank));
    /* group B: the indices (int32, y's shape, nothing saved) and global max
     * pooling (y [B, C], argmax saved in training) */
    const teeny__op *ix = &teeny__ops[TEENY__OP_MAXPOOL2D_INDICES], *gm = &teeny__ops[TEENY__OP_GLOBAL_MAXPOOL];
    ck_assert_str_eq(ix->name, "maxpool2d_indices");
    ck_assert_str_eq(gm->name, "global_maxpool");
    ck_assert(ix->backward == NULL && gm->backward != NULL);
    teeny__node_shapes is = {.n_in = 1, .in = {{.ndim = 4, .shape = {2, 3, 9, 8}}},
                             .attrs.pool2d = {.kernel = {3, 2}, .stride = {2, 2}, .pad = {1, 0}, .pad_end_extra = {1, 1},
                                              .dilation = {2, 0}, .ceil_mode = 1, .large_pads = 1}};
    TH_OK(ctx, ix->infer(ctx, &is));
    /* H: span 5 over 9 + 1 + 2, ceil((12 - 5) / 2) + 1 = 5; W: ceil((8 + 0 + 1 - 2) / 2) + 1 = 5, but that
     * window would start at 8, past the input: 4 */
    ck_assert(is.out.ndim == 4 && is.out.shape[2] == 5 && is.out.shape[3] == 4 && is.out.is_i32 && is.n_saved == 0);
    teeny__node_shapes gms = {.n_in = 1, .in = {{.ndim = 4, .shape = {2, 5, 7, 6}}}};
    TH_OK(ctx, gm->infer(ctx, &gms));
    ck_assert(gms.out.ndim == 2 && gms.out.shape[1] == 5 && gms.n_saved == 1 && gms.saved[0].is_i32 &&
              gms.saved[0].ndim == 2 && gms.saved_needs_training);
    TH_STATUS(ctx, TEENY_ERR_SHAPE, gm->infer(ctx, &rank));
}
END_TEST

START_TEST(test_pool_output_shape)
{
    teeny_pool2d_params p = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}};
    int64_t xs[4] = {2, 3, 10, 11}, ys[4] = {-1, -1, -1, -1};
    TH_OK(NULL, teeny_pool2d_output_shape(&p, xs, ys));
    ck_assert(ys[0] == 2 && ys[1] == 3 && ys[2] == 5 && ys[3] == 6);
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_pool2d_output_shape(NULL, xs, ys));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_pool2d_output_shape(&p, NULL, ys));
    teeny_pool2d_params bad[] = {{.kernel = {0, 3}, .stride = {1, 1}, .pad = {0, 0}},
                                 {.kernel = {3, 3}, .stride = {0, 1}, .pad = {0, 0}},
                                 {.kernel = {3, 3}, .stride = {1, 1}, .pad = {-1, 0}},
                                 {.kernel = {3, 3}, .stride = {1, 1}, .pad = {0, 2}},
                                 {.kernel = {1, 1}, .stride = {1, 1}, .pad = {1, 0}}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_pool2d_output_shape(&bad[i], xs, ys));
    ck_assert(ys[2] == 5); /* untouched on failure */
    teeny_pool2d_params big_k = {.kernel = {30, 3}, .stride = {1, 1}, .pad = {0, 0}};
    TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_pool2d_output_shape(&big_k, xs, ys));
    /* 2x2 windows with stride 1 and pad 1 grow each side by one: past int32 */
    teeny_pool2d_params grow = {.kernel = {2, 2}, .stride = {1, 1}, .pad = {1, 1}};
    int64_t huge[4] = {1, 2, 32768, 32767};
    TH_STATUS(NULL, TEENY_ERR_RANGE, teeny_pool2d_output_shape(&grow, huge, ys));
    int64_t wide[4] = {1, 1, 1, (int64_t)1 << 40};
    TH_STATUS(NULL, TEENY_ERR_RANGE, teeny_pool2d_output_shape(&p, wide, ys));
    /* x must fit int32 indexing itself, whatever y is */
    teeny_pool2d_params one = {.kernel = {1, 1}, .stride = {1, 1}, .pad = {0, 0}},
                        all_h = {.kernel = {1 << 30, 1}, .stride = {1, 1}, .pad = {0, 0}};
    int64_t at_max[4] = {1, 1, INT32_MAX, 1}, past[4][4] = {{2, 1, 1 << 30, 1}, {1, 1, 1 << 30, 2},
                                                            {1, 1, INT64_MAX, INT64_MAX}, {INT64_MAX, 2, 1, 1}};
    TH_OK(NULL, teeny_pool2d_output_shape(&one, at_max, ys));
    for (int i = 0; i < 4; i++)
        TH_STATUS(NULL, TEENY_ERR_RANGE, teeny_pool2d_output_shape(&all_h, past[i], ys));
    /* ONNX's options: a negative dilation or end pad, a flag other than 0
     * or 1, an end pad past half the span without large_pads (ARG); a
     * dilated span past the padded input (SHAPE); ceil_mode's extra window
     * dropped where it would start past the input and its front pad */
    teeny_pool2d_params opt = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}};
    teeny_pool2d_params neg_d = opt, neg_end = opt, flag = opt, big_end = opt, long_span = opt, ceil = opt;
    neg_d.dilation[1] = -1;
    neg_end.pad_end_extra[0] = -2;
    flag.exclude_pad = 2;
    big_end.pad_end_extra[1] = 1;
    long_span.dilation[0] = 6;
    ceil.ceil_mode = 1;
    ceil.pad_end_extra[0] = -1;
    teeny_pool2d_params *bad_opts[4] = {&neg_d, &neg_end, &flag, &big_end};
    for (int i = 0; i < 4; i++)
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_pool2d_output_shape(bad_opts[i], xs, ys));
    big_end.large_pads = 1;
    TH_OK(NULL, teeny_pool2d_output_shape(&big_end, xs, ys));
    ck_assert(ys[2] == 5 && ys[3] == 6); /* W: (11 + 1 + 2 - 3) / 2 + 1 */
    TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_pool2d_output_shape(&long_span, xs, ys)); /* span 13 > 12 */
    TH_OK(NULL, teeny_pool2d_output_shape(&ceil, xs, ys));
    ck_assert(ys[2] == 5 && ys[3] == 6); /* H: ceil((10 + 1 - 3) / 2) + 1 = 5; W: ceil(10 / 2) + 1 = 6 */
    int64_t xs9[4] = {1, 1, 9, 9};
    ceil.pad_end_extra[0] = 0;
    ceil.pad[0] = 0;
    ceil.stride[0] = 3;
    TH_OK(NULL, teeny_pool2d_output_shape(&ceil, xs9, ys));
    ck_assert(ys[2] == 3); /* ceil((9 - 3) / 3) + 1 = 3: the window at 6 starts inside */
    ceil.kernel[0] = 2;
    ceil.pad_end_extra[0] = 2;
    ceil.large_pads = 1;
    TH_OK(NULL, teeny_pool2d_output_shape(&ceil, xs9, ys));
    ck_assert(ys[2] == 3); /* ceil((11 - 2) / 3) + 1 = 4, but the window at 9 starts past the input: 3 */
    int64_t empty[3][4] = {{0, 1, 4, 4}, {1, -1, 4, 4}, {1, 1, 4, INT64_MIN}};
    for (int i = 0; i < 3; i++)
        TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_pool2d_output_shape(&one, empty[i], ys));
    /* the padded extent H + 2*pad (W + 2*pad) fits int32 exactly up to
     * INT32_MAX; one more is TEENY_ERR_RANGE, in either axis */
    for (int axis = 0; axis < 2; axis++) {
        teeny_pool2d_params edge = {.kernel = {1, 1}, .stride = {1, 1}, .pad = {0, 0}};
        edge.kernel[axis] = 1 << 30;
        edge.pad[axis] = 1 << 29;
        int64_t xe[4] = {1, 1, 1, 1};
        xe[2 + axis] = INT32_MAX - 2 * ((int64_t)1 << 29);
        TH_OK(NULL, teeny_pool2d_output_shape(&edge, xe, ys));
        ck_assert(ys[2 + axis] == INT32_MAX - (1 << 30) + 1 && ys[3 - axis] == 1);
        xe[2 + axis]++;
        TH_STATUS(NULL, TEENY_ERR_RANGE, teeny_pool2d_output_shape(&edge, xe, ys));
    }
}
END_TEST

/* The graph builders and the compile's shape inference check the same
 * limits as the eager API (they share the shape function). */
START_TEST(test_pool_graph_limits)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node in, ok_in, out;
    teeny_pool2d_params edge = {.kernel = {1 << 30, 1}, .stride = {1, 1}, .pad = {1 << 29, 0}},
                        huge = {.kernel = {46341, 46341}, .stride = {1, 1}, .pad = {23170, 23170}};
    int64_t at[4] = {-1, 1, INT32_MAX - ((int64_t)1 << 30), 1},
            past[4] = {-1, 1, INT32_MAX - ((int64_t)1 << 30) + 1, 1}, tiny[4] = {-1, 1, 1, 1};
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "at", 4, at, &ok_in));
    TH_OK(ctx, teeny_graph_input(g, "past", 4, past, &in));
    TH_OK(ctx, teeny_graph_avgpool2d(g, "ok", ok_in, &edge, &out));
    TH_STATUS(ctx, TEENY_ERR_RANGE, teeny_graph_avgpool2d(g, "bad", in, &edge, &out));
    ck_assert_int_eq(out, -1);
    TH_STATUS(ctx, TEENY_ERR_RANGE, teeny_graph_maxpool2d(g, "bad2", in, &edge, &out));
    TH_OK(ctx, teeny_graph_input(g, "tiny", 4, tiny, &in));
    TH_OK(ctx, teeny_graph_avgpool2d(g, "big_window", in, &huge, &out));
    TH_OK(ctx, teeny_graph_maxpool2d(g, "big_window_max", in, &huge, &out));
    teeny_graph_destroy(g);
}
END_TEST

START_TEST(test_pool_errors)
{
    teeny_ctx *ctx = th_ctx();
    teeny_pool2d_params p = TEENY_POOL2D_PARAMS_INIT, bad_pad = {.kernel = {2, 2}, .stride = {2, 2}, .pad = {2, 0}};
    int64_t xs[4] = {1, 2, 4, 4}, ys[4] = {1, 2, 2, 2}, y3[4] = {1, 2, 3, 2}, x3[3] = {2, 4, 4}, gs[2] = {1, 2},
            g3[2] = {1, 3}, g1[3] = {1, 2, 1}, big[1] = {64};
    teeny_tensor *x = th_tensor(ctx, 4, xs), *y = th_tensor(ctx, 4, ys), *ybad = th_tensor(ctx, 4, y3),
                 *xr3 = th_tensor(ctx, 3, x3), *dx = th_tensor(ctx, 4, xs), *dy = th_tensor(ctx, 4, ys),
                 *gy = th_tensor(ctx, 2, gs), *gbad = th_tensor(ctx, 2, g3), *base = th_tensor(ctx, 1, big),
                 *am = NULL, *amf = th_tensor(ctx, 4, ys), *xv = NULL, *yv = NULL, *gone = th_tensor(ctx, 3, g1);
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 4, ys, &am));
    int32_t amv[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    TH_OK(ctx, teeny_tensor_write_i32(am, amv, 8));
    teeny_tensor *filled[] = {x, y, dx, dy, gy, base, amf};
    for (size_t i = 0; i < sizeof filled / sizeof filled[0]; i++)
        TH_OK(ctx, teeny_tensor_fill(filled[i], 7.0f));
    TH_OK(ctx, teeny_tensor_view(base, 0, 4, xs, &xv));
    TH_OK(ctx, teeny_tensor_view(base, 30, 4, ys, &yv)); /* overlaps xv's last two elements */

    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_maxpool2d_forward(NULL, &p, x, y, am));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_forward(ctx, NULL, x, y, am));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_forward(ctx, &bad_pad, x, y, am));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_forward(ctx, &p, NULL, y, am));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_forward(ctx, &p, x, NULL, am));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_forward(ctx, &p, x, y, amf)); /* fp32 argmax */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_maxpool2d_forward(ctx, &p, xr3, y, am));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_maxpool2d_forward(ctx, &p, x, ybad, am));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_forward(ctx, &p, xv, yv, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_backward(ctx, &p, x, am, dy, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_backward(ctx, &p, x, NULL, dy, dx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_maxpool2d_backward(ctx, &p, x, am, ybad, dx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_maxpool2d_backward(ctx, &p, x, am, dy, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_backward(ctx, &p, x, am, dy, x));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_avgpool2d_forward(ctx, &bad_pad, x, y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_avgpool2d_forward(ctx, &p, x, ybad));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_avgpool2d_forward(ctx, &p, xv, yv));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_avgpool2d_backward(ctx, &p, x, ybad, dx));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_avgpool2d_backward(ctx, &p, x, dy, NULL));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_global_avgpool_forward(ctx, x, gbad));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_global_avgpool_forward(ctx, xr3, gy));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_global_avgpool_forward(ctx, x, gone));  /* [B, C, 1]: [B, C] or [B, C, 1, 1] */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_global_avgpool_backward(ctx, gone, dx));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_global_avgpool_forward(ctx, x, NULL));
    teeny_tensor *gv = NULL;
    TH_OK(ctx, teeny_tensor_view(base, 31, 2, gs, &gv)); /* overlaps xv's last element */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_global_avgpool_forward(ctx, xv, gv));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_global_avgpool_backward(ctx, gv, xv));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_global_avgpool_backward(ctx, gbad, dx));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_global_avgpool_backward(NULL, gy, dx));
    th_expect_all(y, 7.0f);
    th_expect_all(dx, 7.0f);
    th_expect_all(gy, 7.0f);
    th_expect_all(base, 7.0f);
    int32_t got[8];
    TH_OK(ctx, teeny_tensor_read_i32(am, got, 8));
    ck_assert(!memcmp(got, amv, sizeof got));

    /* group B: global max pooling and the indices */
    teeny_tensor *ga = NULL, *gaf = th_tensor(ctx, 2, gs), *ga4 = NULL, *ix = NULL;
    int64_t g4[4] = {1, 2, 1, 1};
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 2, gs, &ga));
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 4, g4, &ga4));
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 4, ys, &ix));
    TH_OK(ctx, teeny_tensor_write_i32(ix, amv, 8));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_global_maxpool_forward(NULL, x, gy, ga));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_global_maxpool_forward(ctx, x, NULL, ga));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_global_maxpool_forward(ctx, x, gy, gaf)); /* fp32 argmax */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_global_maxpool_forward(ctx, x, gbad, ga));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_global_maxpool_forward(ctx, xr3, gy, ga));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_global_maxpool_forward(ctx, x, gone, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_global_maxpool_forward(ctx, xv, gv, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_global_maxpool_backward(ctx, ga, gy, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_global_maxpool_backward(ctx, gaf, gy, dx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_global_maxpool_backward(ctx, ga, gbad, dx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_global_maxpool_backward(ctx, ga, gy, xr3));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_global_maxpool_backward(ctx, ga4, gv, xv));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_indices(ctx, NULL, x, 0, ix));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_indices(ctx, &bad_pad, x, 0, ix));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_indices(ctx, &p, x, 2, ix)); /* column_major 0 or 1 */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_maxpool2d_indices(ctx, &p, x, 0, y));  /* fp32 indices */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_maxpool2d_indices(ctx, &p, x, 0, ga4));
    th_expect_all(gy, 7.0f);
    th_expect_all(dx, 7.0f);
    th_expect_all(base, 7.0f);
    TH_OK(ctx, teeny_tensor_read_i32(ix, got, 8));
    ck_assert(!memcmp(got, amv, sizeof got));

    teeny_tensor *all[] = {x,  y,  ybad, xr3, dx,  dy,  gy,  gbad, base, am, amf,
                           xv, yv, gv,   gone, ga, gaf, ga4, ix};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        teeny_tensor_destroy(all[i]);
}
END_TEST

Suite *suite_pool(void)
{
    Suite *s = suite_create("pool");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_pool_forward, 0, n_sweep());
    tcase_add_loop_test(fwd, test_pool_global, 0, n_sweep());
    tcase_add_loop_test(fwd, test_pool_global_max, 0, n_sweep());
    tcase_add_test(fwd, test_pool_global_route);
    tcase_add_loop_test(fwd, test_pool_indices, 0, n_sweep());
    tcase_add_test(fwd, test_pool_nan);
    tcase_add_test(fwd, test_pool_max_cpu);
    tcase_add_test(fwd, test_pool_determinism);
    tcase_add_test(fwd, test_pool_op_table);
    tcase_add_loop_test(bwd, test_pool_backward, 0, n_sweep());
    tcase_add_test(bwd, test_pool_finite_diff);
    tcase_add_test(bwd, test_pool_huge_windows);
    tcase_add_test(bwd, test_pool_split_loops);
    tcase_add_test(bwd, test_pool_split_options);
    tcase_add_test(err, test_pool_errors);
    tcase_add_test(err, test_pool_output_shape);
    tcase_add_test(err, test_pool_graph_limits);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
