/*
 * test_conv2d.c -- grouped 2-D convolution against the float64 reference:
 * a seeded sweep over groups (1, 2, 3, 4, depthwise, depthwise x2), kernel
 * sizes 1-7 (square and not), strides 1-3, padding 0-3, dilation 1-2, odd
 * sizes and views at odd offsets, forward and backward; every tile shape
 * of every device profile's conv2d tuning (forced through the tune layer's
 * hook, the tile through the conv2d one) on shapes with
 * partial edge tiles; the fused epilogues against unfused compositions;
 * determinism; finite differences of the reference; shape inference; and
 * every error path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clwrap.h"
#include "conv_data.h"
#include "harness.h"
#include "internal.h"
#include "ops/conv2d/conv2d_internal.h"
#include "ops/ops.h"
#include "ref/conv2d_ref.h"
#include "ref/elementwise_ref.h"

#define TOL 1e-5
#define TOL_TF32 1e-3 /* teeny_ctx_set_tf32: the bound on normalized RMS error */
static double tol = TOL; /* what expect_close allows: TOL, or TOL_TF32 while a tf32 GEMM runs */

typedef struct {
    ref_conv c;
    int bias; /* forward adds a bias */
    int view; /* every tensor lives at an odd offset inside a larger one */
    int skip; /* backward: bit 0 no dx, bit 1 no dw, bit 2 no dbias */
} conv_case;

static int out_h(const ref_conv *c) { return ref_conv_oh(c); }
static int out_w(const ref_conv *c) { return ref_conv_ow(c); }

static teeny_conv2d_params params_of(const ref_conv *c)
{
    teeny_conv2d_params p = {{c->sh, c->sw}, {c->ph, c->pw}, {c->dh, c->dw}, c->G, {c->peh, c->pew}};
    return p;
}

static void repro_str(const conv_case *k, uint64_t seed, char *buf, size_t cap)
{
    const ref_conv *c = &k->c;
    snprintf(buf, cap,
             "x [%d, %d, %d, %d] w [%d, %d, %d, %d] stride (%d, %d) pad (%d, %d) pad_end_extra (%d, %d) dilation "
             "(%d, %d) groups %d%s%s%s seed %llu",
             c->B, c->Cin, c->H, c->W, c->Cout, c->Cin / c->G, c->KH, c->KW, c->sh, c->sw, c->ph, c->pw, c->peh, c->pew,
             c->dh, c->dw,
             c->G, k->bias ? " bias" : "", k->view ? " (views)" : "", th_ctx()->tune.variant == TEENY_VARIANT_CPU ? " (CPU variants)" : "",
             (unsigned long long)seed);
}

/* Channel counts: mostly small, sometimes up to 64. */
static int channels(th_rng *r, int cmax)
{
    int u = th_int(r, 0, 19), n = u < 13 ? th_int(r, 1, 8) : u < 18 ? th_int(r, 9, 24) : th_int(r, 25, 64);
    return n < cmax ? n : cmax;
}

/* Configuration i of the sweep: the group kind cycles with i, the rest is
 * drawn; spatial sizes stay small (the reference is a direct loop), and a
 * draw whose reference would be slow is redrawn with fewer channels. */
static conv_case sweep_case(th_rng *r, int i)
{
    conv_case k = {0};
    ref_conv *c = &k.c;
    int kind = i % 6;
    for (int attempt = 0;; attempt++) {
        int cmax = attempt < 3 ? 64 : 8;
        c->KH = th_int(r, 1, 7);
        c->KW = th_int(r, 0, 2) == 0 ? c->KH : th_int(r, 1, 7);
        c->sh = th_int(r, 1, 3);
        c->sw = th_int(r, 0, 1) ? c->sh : th_int(r, 1, 3);
        c->ph = th_int(r, 0, 3);
        c->pw = th_int(r, 0, 3);
        c->dh = th_int(r, 1, 2);
        c->dw = th_int(r, 1, 2);
        c->B = th_int(r, 1, 4);
        c->H = th_int(r, 1, 13);
        c->W = th_int(r, 1, 13);
        if (c->H + 2 * c->ph < c->dh * (c->KH - 1) + 1)
            c->H = c->dh * (c->KH - 1) + 1 - 2 * c->ph + th_int(r, 0, 2);
        if (c->W + 2 * c->pw < c->dw * (c->KW - 1) + 1)
            c->W = c->dw * (c->KW - 1) + 1 - 2 * c->pw + th_int(r, 0, 2);
        if (c->H < 1)
            c->H = 1;
        if (c->W < 1)
            c->W = 1;
        if (kind == 0) {
            c->G = 1;
            c->Cin = channels(r, cmax);
            c->Cout = channels(r, cmax);
        } else if (kind <= 3) {
            c->G = kind + 1;
            int per_in = (channels(r, cmax) + c->G - 1) / c->G, per_out = (channels(r, cmax) + c->G - 1) / c->G;
            c->Cin = c->G * per_in;
            c->Cout = c->G * per_out;
        } else {
            c->Cin = c->G = channels(r, cmax);
            c->Cout = c->Cin * (kind == 5 ? 2 : 1);
        }
        double cost = (double)c->B * c->Cout * out_h(c) * out_w(c) * (c->Cin / c->G) * c->KH * c->KW;
        if (cost <= 1.5e6)
            break;
    }
    k.bias = th_int(r, 0, 3) != 0;
    k.view = i % 3 == 1;
    k.skip = i % 7 == 3 ? 1 : i % 7 == 5 ? 2 : i % 7 == 6 ? 4 : 0;
    if (i % 4 == 2) { /* ONNX's pads begin != end: the padding after drawn apart */
        c->peh = th_int(r, -c->ph, 3);
        c->pew = th_int(r, -c->pw, 3);
        if (c->H + 2 * c->ph + c->peh < c->dh * (c->KH - 1) + 1)
            c->peh = c->dh * (c->KH - 1) + 1 - c->H - 2 * c->ph;
        if (c->W + 2 * c->pw + c->pew < c->dw * (c->KW - 1) + 1)
            c->pew = c->dw * (c->KW - 1) + 1 - c->W - 2 * c->pw;
    }
    return k;
}

/* A small fixed subset for sanitizer and oclgrind runs. */
static conv_case small_case(int i)
{
    static const conv_case s[] = {
        {{2, 4, 5, 6, 6, 3, 2, 1, 2, 1, 0, 1, 2, 2, 0, 0}, 1, 0, 0},
        {{1, 3, 7, 5, 3, 3, 3, 2, 2, 1, 1, 1, 1, 3, 0, 0}, 0, 1, 0},
        {{2, 2, 4, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 1, 0, 0},
        {{1, 2, 6, 7, 4, 5, 3, 1, 3, 2, 1, 2, 1, 2, 0, 0}, 1, 1, 0},
        {{3, 5, 3, 3, 2, 2, 2, 3, 1, 0, 2, 1, 1, 1, 0, 0}, 0, 0, 0},
        {{1, 1, 9, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 1, 0, 0},
    };
    return s[i % 6];
}

/* ---- host data and device tensors ---- */

/* A device tensor, or a view at an odd offset inside a NaN-filled one. */
typedef struct {
    teeny_tensor *base, *t;
    int64_t off;
} dtensor;

static dtensor dt_make(teeny_ctx *ctx, int ndim, const int64_t *shape, const float *data, int view, int64_t off)
{
    dtensor d = {0};
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    if (view) {
        int64_t big = n + off + 6;
        d.base = th_tensor(ctx, 1, &big);
        d.off = off;
        th_poison(d.base);
        TH_OK(ctx, teeny_tensor_view(d.base, off, ndim, shape, &d.t));
    } else {
        d.t = th_tensor(ctx, ndim, shape);
    }
    if (data)
        TH_OK(ctx, teeny_tensor_write(d.t, data, (size_t)n));
    else
        th_poison(d.t);
    return d;
}

static void dt_free(dtensor *d)
{
    teeny_tensor_destroy(d->t);
    teeny_tensor_destroy(d->base);
    d->t = d->base = NULL;
}

/* Compare with the reference (nrms, or nrms_mag when mag is given); every
 * element must have been written, and nothing of a view's base outside it. */
static void expect_close(const dtensor *d, const double *ref, const double *mag, size_t n, const char *what,
                         const char *repro)
{
    float *out = th_read(d->t);
    long bad = th_first_nonfinite(out, n);
    ck_assert_msg(bad < 0, "%s: element %ld not written or not finite (%g); %s", what, bad,
                  bad >= 0 ? (double)out[bad] : 0.0, repro);
    double e = mag ? th_nrms_mag(out, ref, mag, n) : th_nrms(out, ref, n);
    ck_assert_msg(e <= tol, "%s: nrms %.3g > %.1g; %s", what, e, tol, repro);
    free(out);
    if (d->base) {
        float *all = th_read(d->base);
        size_t nb = (size_t)teeny_tensor_numel(d->base);
        for (size_t i = 0; i < nb; i++)
            if (i < (size_t)d->off || i >= (size_t)d->off + n)
                ck_assert_msg(isnan(all[i]), "%s: wrote element %zu outside the view; %s", what, i, repro);
        free(all);
    }
}

static void shapes_of(const ref_conv *c, int64_t *xs, int64_t *ws, int64_t *ys)
{
    int64_t x[4] = {c->B, c->Cin, c->H, c->W}, w[4] = {c->Cout, c->Cin / c->G, c->KH, c->KW},
            y[4] = {c->B, c->Cout, out_h(c), out_w(c)};
    memcpy(xs, x, sizeof x);
    memcpy(ws, w, sizeof w);
    memcpy(ys, y, sizeof y);
}

/* Forward of one case through teeny_conv2d_forward. */
static void check_forward(const conv_case *k, const conv_data *d, const char *repro)
{
    teeny_ctx *ctx = th_ctx();
    const ref_conv *c = &k->c;
    int64_t xs[4], ws[4], ys[4], cs = c->Cout;
    teeny_conv2d_params p = params_of(c);
    shapes_of(c, xs, ws, ys);
    dtensor tx = dt_make(ctx, 4, xs, d->x, k->view, 1), tw = dt_make(ctx, 4, ws, d->w, k->view, 3),
            tb = dt_make(ctx, 1, &cs, d->b, k->view, 5), ty = dt_make(ctx, 4, ys, NULL, k->view, 7);
    double *y = th_malloc(d->ny * sizeof *y);
    TH_OK(ctx, teeny_conv2d_forward(ctx, &p, tx.t, tw.t, k->bias ? tb.t : NULL, ty.t));
    ref_conv2d_forward(c, d->xd, d->wd, k->bias ? d->bd : NULL, y, NULL);
    expect_close(&ty, y, NULL, d->ny, "y", repro);
    free(y);
    dt_free(&tx);
    dt_free(&tw);
    dt_free(&tb);
    dt_free(&ty);
}

/* Backward of one case: dx by nrms, dw and dbias (long sums) by nrms_mag. */
static void check_backward(const conv_case *k, const conv_data *d, const char *repro)
{
    teeny_ctx *ctx = th_ctx();
    const ref_conv *c = &k->c;
    int64_t xs[4], ws[4], ys[4], cs = c->Cout;
    teeny_conv2d_params p = params_of(c);
    shapes_of(c, xs, ws, ys);
    dtensor tx = dt_make(ctx, 4, xs, d->x, k->view, 1), tw = dt_make(ctx, 4, ws, d->w, k->view, 3),
            tdy = dt_make(ctx, 4, ys, d->dy, k->view, 5), tdx = dt_make(ctx, 4, xs, NULL, k->view, 7),
            tdw = dt_make(ctx, 4, ws, NULL, k->view, 9), tdb = dt_make(ctx, 1, &cs, NULL, k->view, 11);
    double *dx = th_malloc(d->nx * sizeof *dx), *dw = th_malloc(d->nw * sizeof *dw),
           *db = th_malloc((size_t)c->Cout * sizeof *db), *mdw = th_malloc(d->nw * sizeof *mdw),
           *mdb = th_malloc((size_t)c->Cout * sizeof *mdb);
    TH_OK(ctx, teeny_conv2d_backward(ctx, &p, tx.t, tw.t, tdy.t, k->skip & 1 ? NULL : tdx.t, k->skip & 2 ? NULL : tdw.t,
                                     k->skip & 4 ? NULL : tdb.t));
    ref_conv2d_backward(c, d->xd, d->wd, d->dyd, dx, dw, db, NULL, mdw, mdb);
    if (!(k->skip & 1))
        expect_close(&tdx, dx, NULL, d->nx, "dx", repro);
    if (!(k->skip & 2))
        expect_close(&tdw, dw, mdw, d->nw, "dw", repro);
    if (!(k->skip & 4))
        expect_close(&tdb, db, mdb, (size_t)c->Cout, "dbias", repro);
    /* an output that was not asked for stays untouched */
    for (int i = 0; i < 3; i++) {
        if (!(k->skip & (1 << i)))
            continue;
        dtensor *t = i == 0 ? &tdx : i == 1 ? &tdw : &tdb;
        float *v = th_read(t->t);
        ck_assert_msg(th_first_nonfinite(v, (size_t)teeny_tensor_numel(t->t)) == 0, "NULL output %d was written; %s",
                      i, repro);
        free(v);
    }
    void *h[] = {dx, dw, db, mdw, mdb};
    for (int i = 0; i < 5; i++)
        free(h[i]);
    dtensor *ts[] = {&tx, &tw, &tdy, &tdx, &tdw, &tdb};
    for (int i = 0; i < 6; i++)
        dt_free(ts[i]);
}

static void run_case(const conv_case *k, uint64_t seed, int forward, int backward)
{
    th_rng r = th_rng_make(seed);
    char repro[320];
    conv_data d;
    repro_str(k, seed, repro, sizeof repro);
    data_make(&d, &k->c, &r);
    if (forward)
        check_forward(k, &d, repro);
    if (backward)
        check_backward(k, &d, repro);
    data_free(&d);
}

static int sweep_count(void)
{
    return th_small() ? 6 : th_full() ? 6000 : 1008;
}

START_TEST(test_conv2d_forward_sweep)
{
    uint64_t seed = 20000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    conv_case k = th_small() ? small_case(_i) : sweep_case(&r, _i);
    th_cpu_kernels(_i / 6 % 2); /* the depthwise kinds (i % 6 = 4, 5) in both variants */
    run_case(&k, seed, 1, 0);
    th_cpu_kernels(-1);
}
END_TEST

START_TEST(test_conv2d_backward_sweep)
{
    uint64_t seed = 20000 + (uint64_t)_i; /* the forward sweep's configurations */
    th_rng r = th_rng_make(seed);
    conv_case k = th_small() ? small_case(_i) : sweep_case(&r, _i);
    th_cpu_kernels(_i / 6 % 2);
    run_case(&k, seed, 0, 1);
    th_cpu_kernels(-1);
}
END_TEST

/* Shapes large enough for several tiles in every direction, none a
 * multiple of a tile: general GEMM, 1x1 plain GEMM, strided input
 * gradient, depthwise (several tiles, wide rows, multiplier), a 1-channel
 * input to 32 channels (the GEMM: a wide multiplier), and split
 * weight-gradient reductions. */
static const conv_case large_cases[] = {
    {{2, 24, 33, 33, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 1, 0, 0},
    {{2, 36, 16, 18, 20, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 1, 0, 0},
    {{2, 12, 31, 29, 18, 5, 5, 2, 2, 2, 2, 1, 1, 2, 0, 0}, 1, 1, 0},
    {{2, 32, 45, 45, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, 0, 0}, 1, 0, 0},
    {{1, 8, 40, 37, 16, 7, 7, 2, 2, 3, 3, 2, 2, 8, 0, 0}, 1, 1, 0},
    {{2, 2, 5, 300, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 0, 0, 0},
    {{3, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 1, 0, 0},
    {{2, 3, 45, 44, 20, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0, 0}, 1, 0, 0},
    {{4, 64, 7, 7, 72, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 0, 1, 0},
    {{2, 20, 17, 21, 12, 3, 3, 3, 2, 0, 1, 2, 1, 4, 0, 0}, 1, 0, 0},
};
#define N_LARGE ((int)(sizeof large_cases / sizeof large_cases[0]))

START_TEST(test_conv2d_large)
{
    const ref_conv *c = &large_cases[_i].c;
    int depthwise = c->G == c->Cin; /* then both variants */
    for (int cpu = 0; cpu < 1 + depthwise; cpu++) {
        if (depthwise)
            th_cpu_kernels(cpu);
        run_case(&large_cases[_i], 300 + (uint64_t)_i, 1, 1);
    }
    th_cpu_kernels(-1);
}
END_TEST

/* Every tile of every device profile's conv2d tuning (the row forced
 * through the tune layer, so a CPU run also checks the GPU tile shapes),
 * GEMM path only, then the row's depthwise kernels. Rows that share a
 * conv2d tuning run once. A program build costs PoCL seconds, so on CPU
 * devices the default run takes each tuning's largest tile and its thin
 * ones only; make test-full and GPU devices take them all. */
static const conv_case tile_cases[] = {
    {{2, 20, 13, 15, 70, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 1, 0, 0},  /* M 390, N 35/group, K 90 */
    {{2, 40, 12, 11, 36, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 1, 1, 0},  /* 1x1: plain GEMM (aligned) / general (view) */
    {{1, 36, 16, 16, 140, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 0, 0, 0}, /* 1x1 plain GEMM, N > 128 */
    {{2, 6, 19, 17, 10, 4, 3, 2, 3, 1, 2, 2, 1, 2, 0, 0}, 1, 0, 0},   /* strided phases, dilation */
    {{2, 3, 23, 21, 2, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0, 0}, 1, 1, 0},    /* a stem: N 2 (y, dw), 3 (dx) */
};

/* A thin tile: more weight-loading items than columns (B_TN > TILE_N in
 * cl/conv2d.cl), which load none. */
static int thin_tile(const teeny__gemm_tile *t)
{
    return (t->tm / t->wm) * (t->tn / t->wn) / t->tk > t->tn;
}

/* The profile rows with a conv2d tuning no earlier row has (its index in
 * rows[]); their count. */
static int distinct_conv_rows(int *rows, int cap)
{
    int n = 0;
    for (int i = 0; i < teeny__tune_count() && n < cap; i++) {
        int seen = 0;
        for (int j = 0; j < n && !seen; j++)
            seen = !memcmp(&teeny__tune_row(i)->conv, &teeny__tune_row(rows[j])->conv, sizeof(teeny__conv_tune));
        if (!seen)
            rows[n++] = i;
    }
    return n;
}

START_TEST(test_conv2d_tiles)
{
    int rows[16];
    distinct_conv_rows(rows, 16);
    const teeny__profile *p = teeny__tune_row(rows[_i]);
    teeny_device_info info = TEENY_DEVICE_INFO_INIT;
    TH_OK(th_ctx(), teeny_ctx_device_info(th_ctx(), &info));
    if (!th_profile(p->name))
        return; /* the device cannot hold the row's work-groups or local memory (th_profile says so) */
    int all = info.is_gpu || th_full(); /* else each tuning's largest and thin tiles only (CPU time budget) */
    for (int tile = 0; tile < p->conv.n_tiles; tile++) {
        if (!all && tile > 0 && !thin_tile(&p->conv.tiles[tile]))
            continue;
        th_hook(TEENY__HOOK_CONV_TILE, tile);
        th_hook(TEENY__HOOK_CONV_FLAGS, 1);
        for (int i = 0; i < (int)(sizeof tile_cases / sizeof tile_cases[0]); i++) {
            conv_case k = tile_cases[i];
            run_case(&k, 700 + (uint64_t)(rows[_i] * 10 + tile) * 10 + (uint64_t)i, 1, 1);
        }
    }
    th_hook(TEENY__HOOK_CONV_TILE, all ? -1 : 0);
    th_hook(TEENY__HOOK_CONV_FLAGS, 0);
    run_case(&large_cases[3], 801, 1, 1);
    run_case(&large_cases[4], 802, 1, 1);
    th_hook(TEENY__HOOK_CONV_TILE, -1);
    th_hook(TEENY__HOOK_CONV_FLAGS, 0);
    th_profile(NULL);
}
END_TEST

/* pick_tile on the NVIDIA tuning of a 132-unit device (an H200): the
 * thin tile for the input gradients of 3- and 1-channel inputs (the
 * 7x7 stem: 4 phases of 32 x 112 x 112 rows), 128 x 64 where 128 x 128
 * would leave units idle, 128 x 128 with waves to spare and for weight
 * gradients whose chunks keep half the units busy (98 and 25 chunks),
 * 128 x 32 for 32 channels a group, 64 x 32 for the example net's 7 x 7
 * layers (6,272 rows) and the weight gradient of its 1x1 layers (2 x 25
 * work-groups of 128 x 128), the smallest tile where nothing fills the
 * device. */
START_TEST(test_conv2d_tile_pick)
{
    static const struct {
        int64_t M, N, G, z;
        int tm, tn;
    } cases[] = {
        {4 * 32 * 112 * 112, 3, 1, 0, 256, 4}, {128 * 28 * 28, 1, 1, 0, 256, 4}, {32 * 28 * 28, 128, 1, 0, 128, 64},
        {32 * 112 * 112, 128, 1, 0, 128, 128}, {128 * 9, 128, 1, 98, 128, 128}, {32 * 28 * 28, 32, 4, 0, 128, 32},
        {128 * 7 * 7, 128, 1, 0, 64, 32},      {128, 256, 1, 25, 64, 32},       {576, 128, 1, 25, 128, 128},
        {100, 8, 1, 0, 64, 16},
    };
    teeny_ctx *ctx = th_ctx();
    if (!th_profile("nvidia"))
        return; /* the device cannot hold the row (th_profile says so) */
    th_compute_units(132);
    const teeny__conv_tune *tu = &ctx->tune.profile->conv;
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        int t = teeny__conv2d_debug_pick(ctx, cases[i].M, cases[i].N, cases[i].G, cases[i].z);
        ck_assert_msg(t >= 0 && t < tu->n_tiles && tu->tiles[t].tm == cases[i].tm && tu->tiles[t].tn == cases[i].tn,
                      "M %lld N %lld G %lld: tile %d (%d x %d), want %d x %d", (long long)cases[i].M,
                      (long long)cases[i].N, (long long)cases[i].G, t, t >= 0 ? tu->tiles[t].tm : 0,
                      t >= 0 ? tu->tiles[t].tn : 0, cases[i].tm, cases[i].tn);
    }
    th_compute_units(0);
    th_profile(NULL);
}
END_TEST

/* The same with the NVIDIA profile's tf32 tiles (emulated): the weight
 * gradients whose M and N fill a 128 x 128 tile take its dw_first tile
 * (ResNet's 3x3 128->128 and 128->256: M = 1,152), the others and every
 * forward and input gradient never do. */
START_TEST(test_conv2d_tile_pick_tf32)
{
    static const struct {
        int64_t M, N, z;
        int dw_first;
    } cases[] = {
        {128 * 9, 128, 98, 1}, {128 * 9, 256, 25, 1}, {64 * 9, 64, 98, 0}, {32 * 9, 64, 25, 0},
        {127, 256, 25, 0},     {32 * 28 * 28, 256, 0, 0}, {128 * 9, 128, 0, 0},
    };
    teeny_ctx *ctx = th_ctx();
    if (!th_profile("nvidia"))
        return; /* the device cannot hold the row (th_profile says so) */
    th_compute_units(132);
    th_hook(TEENY__HOOK_CONV_TF32_EMULATE, 1);
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    const teeny__conv_tune *tu = &ctx->tune.conv_tf32;
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        int t = teeny__conv2d_debug_pick(ctx, cases[i].M, cases[i].N, 1, cases[i].z);
        ck_assert_msg(t >= 0 && t < tu->n_tiles && tu->tiles[t].dw_first == cases[i].dw_first,
                      "M %lld N %lld z %lld: tile %d, dw_first %d", (long long)cases[i].M, (long long)cases[i].N,
                      (long long)cases[i].z, t, cases[i].dw_first);
    }
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    th_hook(TEENY__HOOK_CONV_TF32_EMULATE, 0);
    th_compute_units(0);
    th_profile(NULL);
}
END_TEST

/* teeny_ctx_set_tf32(ctx, 1) on a device with tf32 tensor cores: every
 * GEMM path (gather, 1x1, strided input gradient, split weight gradient)
 * within TOL_TF32 of the float64 references, with and without bias, the
 * same bits twice, and visibly not the fp32 path (the rounding shows);
 * Winograd off, which tf32 calls take in fp32 where their GEMM would
 * leave units idle (test_conv2d_wino_tf32). A device without them keeps
 * fp32: the test says so and counts as skipped. */
static void tf32_checks(teeny_ctx *ctx)
{
    static const int cases[] = {0, 1, 2, 4, 7, 8};
    th_hook(TEENY__HOOK_CONV_WINO, -1);
    tol = TOL_TF32;
    for (int tile = -1; tile < ctx->tune.conv_tf32.n_tiles; tile++) { /* the tuning's choice, then each tile */
        th_hook(TEENY__HOOK_CONV_TILE, tile);
        th_hook(TEENY__HOOK_CONV_FLAGS, 1);
        for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
            run_case(&large_cases[cases[i]], 900 + (uint64_t)i, 1, 1);
    }
    th_hook(TEENY__HOOK_CONV_TILE, -1);
    th_hook(TEENY__HOOK_CONV_FLAGS, 0);
    tol = TOL;
    /* tf32 changes the bits and is deterministic */
    const conv_case *k = &large_cases[0];
    th_rng r = th_rng_make(950);
    conv_data d;
    int64_t xs[4], ws[4], ys[4];
    teeny_conv2d_params p = params_of(&k->c);
    shapes_of(&k->c, xs, ws, ys);
    data_make(&d, &k->c, &r);
    dtensor tx = dt_make(ctx, 4, xs, d.x, 0, 1), tw = dt_make(ctx, 4, ws, d.w, 0, 3), ty = dt_make(ctx, 4, ys, NULL, 0, 7);
    float *out[3];
    for (int run = 0; run < 3; run++) { /* tf32, tf32, fp32 */
        TH_OK(ctx, teeny_ctx_set_tf32(ctx, run < 2));
        TH_OK(ctx, teeny_conv2d_forward(ctx, &p, tx.t, tw.t, NULL, ty.t));
        out[run] = th_read(ty.t);
    }
    ck_assert_msg(!memcmp(out[0], out[1], d.ny * sizeof(float)), "tf32 forward differs between runs");
    ck_assert_msg(memcmp(out[0], out[2], d.ny * sizeof(float)) != 0, "tf32 forward gives fp32's bits: not engaged");
    for (int run = 0; run < 3; run++)
        free(out[run]);
    dt_free(&tx);
    dt_free(&tw);
    dt_free(&ty);
    data_free(&d);
    th_hook(TEENY__HOOK_CONV_WINO, 0);
}

START_TEST(test_conv2d_tf32)
{
    teeny_ctx *ctx = th_ctx();
    TH_SKIP_NO_TF32(ctx);
    tf32_checks(ctx);
}
END_TEST

/* The same checks on the nvidia profile's tf32 tiles emulated in portable
 * OpenCL C (the test hook CONV_TF32_EMULATE: cl/common.cl's tf32_round
 * and a warp's mma through local memory), on any device that holds the
 * row: the tiles' staging, fragment loads, C fragment positions, the
 * fused epilogue and the partial sums of every GEMM path run, and are
 * checked, wherever the suite does, not only on NVIDIA. */
START_TEST(test_conv2d_tf32_emulated)
{
    teeny_ctx *ctx = th_ctx();
    if (!th_profile("nvidia"))
        th_skip("%s cannot take the nvidia profile's work-groups and local memory", teeny_ctx_device_name(ctx));
    th_hook(TEENY__HOOK_CONV_TF32_EMULATE, 1);
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    tf32_checks(ctx);
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    th_hook(TEENY__HOOK_CONV_TF32_EMULATE, 0);
    th_profile(NULL);
}
END_TEST

/* Shapes whose backward takes two workspace buffers at once on CPU
 * devices (the dw/db partials, then the packed weights of the dw GEMM):
 * the second, larger request once freed the first, and the bias-gradient
 * pass then ran on a released buffer (PoCL aborted). */
START_TEST(test_conv2d_backward_workspace)
{
    static const conv_case cases[] = {
        {{4, 8, 6, 6, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 1, 0, 0},
        {{4, 8, 9, 7, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 1, 1, 0},
        {{8, 16, 12, 12, 4, 3, 3, 2, 2, 1, 1, 1, 1, 2, 0, 0}, 1, 0, 0},
        {{2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 1, 0, 1}, /* dw and db only: aborted PoCL 3.1 before */
    };
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        conv_case k = cases[i];
        run_case(&k, 950 + (uint64_t)i, 0, 1);
    }
}
END_TEST

/* Depthwise shapes through the GEMM path too (the fallback where the
 * depthwise kernels do not fit), and a huge dilation (dwconv_dx's patch
 * cannot fit in local memory; dwconv_fwd stages nothing). */
START_TEST(test_conv2d_depthwise_fallback)
{
    th_hook(TEENY__HOOK_CONV_FLAGS, 1);
    run_case(&large_cases[4], 901, 1, 1);
    th_hook(TEENY__HOOK_CONV_TILE, -1);
    th_hook(TEENY__HOOK_CONV_FLAGS, 0);
    conv_case k = {{1, 2, 3, 3, 2, 2, 2, 1, 1, 3000, 3000, 6000, 6000, 2, 0, 0}, 1, 0, 0};
    run_case(&k, 902, 1, 1);
}
END_TEST

/* Whether a kernel named `name` ran since teeny_profile_begin. */
static int profiled(teeny_ctx *ctx, const char *name)
{
    TH_OK(ctx, teeny_ctx_finish(ctx));
    for (int i = 0; i < ctx->prog.prof_count; i++)
        if (!strcmp(ctx->prog.prof_names[i], name))
            return 1;
    return 0;
}

/* The depthwise input gradient through the work-group kernels: at stride
 * 1 with multiplier 1 it is dwconv_fwd over dy with the taps reversed and
 * padding (K-1)*d - p (any kernel size, dilation, padding, ONNX's
 * asymmetric padding, 1-pixel planes, padding wider than the kernel: a
 * negative padding for the forward pass); strides above 1 and multipliers
 * above 1 keep dwconv_dx. Every gradient against the float64 reference. */
START_TEST(test_conv2d_depthwise_dx_route)
{
    static const struct {
        conv_case k;
        int flipped; /* 1: dx by dwconv_fwd; 0: by dwconv_dx */
    } cases[] = {
        {{{2, 5, 9, 13, 5, 3, 3, 1, 1, 1, 1, 1, 1, 5, 0, 0}, 1, 0, 0}, 1},   /* 3x3, H != W */
        {{{1, 4, 11, 10, 4, 3, 3, 1, 1, 2, 2, 2, 2, 4, 0, 0}, 1, 1, 0}, 1},  /* dilation 2 (views) */
        {{{2, 3, 12, 9, 3, 5, 5, 1, 1, 2, 2, 1, 1, 3, 0, 0}, 1, 0, 0}, 1},   /* 5x5 */
        {{{1, 3, 7, 8, 3, 2, 4, 1, 1, 0, 1, 1, 1, 3, 0, 0}, 0, 0, 0}, 1},    /* even sizes, one unpadded axis */
        {{{1, 4, 8, 9, 4, 3, 3, 1, 1, 1, 0, 1, 1, 4, -1, 2}, 1, 0, 0}, 1},  /* pads begin != end */
        {{{2, 6, 10, 7, 6, 3, 5, 1, 1, 3, 1, 2, 1, 6, 1, -1}, 1, 0, 0}, 1},  /* (3, 5), dilation (2, 1), asymmetric */
        {{{3, 6, 1, 1, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, 0, 0}, 1, 0, 0}, 1},    /* 1-pixel planes */
        {{{2, 3, 1, 1, 3, 1, 1, 1, 1, 0, 0, 1, 1, 3, 0, 0}, 0, 0, 0}, 1},    /* 1x1 kernel on 1-pixel planes */
        {{{1, 3, 4, 5, 3, 1, 1, 1, 1, 1, 2, 1, 1, 3, 0, 0}, 1, 0, 0}, 1},    /* pad wider than the kernel */
        {{{1, 2, 6, 5, 2, 3, 3, 1, 1, 3, 2, 1, 1, 2, 0, 0}, 1, 0, 0}, 1},    /* pad (3, 2) > (K-1)*d */
        {{{2, 4, 9, 9, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4, 0, 0}, 1, 0, 0}, 0},    /* stride 2 */
        {{{1, 3, 8, 9, 3, 3, 3, 1, 2, 1, 1, 1, 1, 3, 0, 0}, 1, 0, 0}, 0},    /* stride (1, 2) */
        {{{2, 3, 7, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 1, 0, 0}, 0},    /* multiplier 2 */
    };
    teeny_ctx *ctx = th_ctx();
    th_cpu_kernels(0);
    th_hook(TEENY__HOOK_CONV_DW_BWD, -1); /* not the one-pass backward (test_conv2d_depthwise_bwd3) */
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        TH_OK(ctx, teeny_profile_begin(ctx));
        run_case(&cases[i].k, 1100 + (uint64_t)i, 0, 1);
        int fwd = profiled(ctx, "dwconv_fwd"), dx = profiled(ctx, "dwconv_dx");
        TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
        ck_assert_msg(fwd == cases[i].flipped && dx == !cases[i].flipped,
                      "case %d: dx by dwconv_fwd %d, by dwconv_dx %d; expected %s", i, fwd, dx,
                      cases[i].flipped ? "dwconv_fwd" : "dwconv_dx");
    }
    th_cpu_kernels(-1);
}
END_TEST

/* dwconv_fwd's strips (cl/conv2d_dw.cl): planes of 56, 28, 14 and 7 rows
 * (strips of 8 and 7 rows), a row count no strip height divides (17: 6, 6,
 * 5), one-row planes, planes far smaller than a work-group (several per
 * group), multipliers 2 and 4, stride 2 and dilation; the 3x3 path
 * (dw_fwd_rows3: row strides 1 and 2, short last strips, column stride
 * and dilation, uneven padding) and 3x3 kernels it leaves to the general
 * path (row dilation 2, row stride 3); forward with bias and backward
 * (at stride 1 dx is dwconv_fwd again, taps reversed), in the portable
 * variant, against the float64 reference; and the 3x3 path's two and four
 * columns per item (teeny__conv_dw_plan_fwd) at odd and tiny widths. */
START_TEST(test_conv2d_depthwise_strips)
{
    static const conv_case cases[] = {
        {{2, 3, 56, 56, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 1, 0, 0},
        {{3, 4, 28, 28, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 0, 0}, 1, 1, 0},
        {{5, 6, 14, 14, 12, 3, 3, 1, 1, 1, 1, 1, 1, 6, 0, 0}, 1, 0, 0},
        {{7, 5, 7, 7, 20, 3, 3, 1, 1, 1, 1, 1, 1, 5, 0, 0}, 1, 0, 0},
        {{2, 3, 9, 11, 3, 3, 3, 2, 2, 1, 1, 1, 1, 3, 0, 0}, 1, 0, 0},
        {{1, 2, 17, 5, 2, 5, 5, 1, 1, 4, 2, 2, 1, 2, 0, 0}, 0, 0, 0},
        {{2, 4, 1, 40, 4, 1, 3, 1, 1, 0, 1, 1, 1, 4, 0, 0}, 1, 0, 0},
        {{1, 3, 19, 6, 3, 3, 3, 1, 1, 0, 2, 1, 1, 3, 0, 0}, 1, 1, 0},  /* 3x3 path, strips 6, 6, 5, pad (0, 2) */
        {{2, 3, 33, 10, 3, 3, 3, 2, 1, 1, 1, 1, 2, 3, 0, 0}, 1, 0, 0}, /* 3x3 path: stride (2, 1), dilation (1, 2) */
        {{1, 2, 34, 5, 4, 3, 3, 2, 2, 2, 0, 1, 1, 2, 0, 0}, 0, 0, 0},  /* 3x3 path: stride 2, multiplier 2 */
        {{1, 2, 12, 7, 2, 3, 3, 1, 1, 2, 1, 2, 1, 2, 0, 0}, 1, 0, 0},  /* 3x3, dilation (2, 1): general path */
        {{1, 2, 13, 8, 2, 3, 3, 3, 1, 1, 1, 1, 1, 2, 0, 0}, 1, 0, 0},  /* 3x3, stride 3: general path */
        /* two columns per item (column stride and dilation 1): odd OW (the last item's second column
         * masked), OW 1 and 2, row stride 2, multiplier 2, uneven padding, float2 stores (even OW, no
         * view) and scalar ones (views: odd offsets) */
        {{2, 3, 13, 9, 3, 3, 3, 2, 1, 1, 1, 1, 1, 3, 0, 0}, 1, 0, 0},  /* stride (2, 1), OW 9 */
        {{1, 4, 10, 12, 4, 3, 3, 2, 1, 1, 0, 1, 1, 4, 0, 0}, 0, 1, 0},  /* stride (2, 1), pad (1, 0), OW 10 */
        {{3, 2, 6, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 1, 0, 0},   /* OW 2 */
        {{2, 2, 5, 1, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 1, 1, 0},   /* OW 1 */
        {{1, 2, 11, 10, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 1, 0, 0}, /* multiplier 2 */
        {{1, 2, 8, 8, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 1}, 0, 0, 0},   /* pad_end_extra (0, 1): OW 9 */
        {{2, 3, 12, 14, 3, 3, 3, 1, 1, 2, 2, 1, 1, 3, 1, 0}, 1, 0, 0}, /* pad 2, pad_end_extra (1, 0) */
        /* four columns per item (row stride 1, OW >= 7): the middle four inputs of a row as a float4 where x's
         * rows and offset allow it (W % 4 == 0; views: x at offset 1, so pad 2 there, or dy at 5 and pad 0 for
         * the input gradient), float4 stores (OW % 4 == 0, no view), OW 7 and odd widths (the last item's 1-3
         * columns), W no multiple of 4, items half inside the row (pad 5), OW = W + 1 (a last item past x) */
        {{1, 3, 9, 28, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 1, 0, 0},  /* OW 28: float4 in and out */
        {{2, 2, 8, 28, 2, 3, 3, 1, 1, 1, 2, 1, 1, 2, 0, 0}, 1, 1, 0},  /* views, pad (1, 2): float4 loads from x */
        {{1, 2, 6, 14, 2, 3, 3, 1, 1, 1, 0, 1, 1, 2, 0, 0}, 0, 1, 0},  /* views, pad (1, 0): dx's from dy */
        {{2, 2, 7, 7, 2, 3, 3, 1, 1, 0, 1, 1, 1, 2, 0, 0}, 1, 0, 0},   /* OW 7 */
        {{1, 3, 10, 13, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 1, 0, 0}, /* OW 13 */
        {{1, 2, 6, 19, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 0, 1, 0},  /* OW 19, views */
        {{1, 2, 9, 16, 2, 3, 3, 1, 1, 1, 5, 1, 1, 2, 0, 0}, 1, 0, 0},  /* pad (1, 5): OW 24 */
        {{1, 2, 8, 16, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 1}, 1, 0, 0},  /* pad_end_extra (0, 1): OW 17 */
        {{1, 2, 5, 10, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 1, 0, 0},  /* multiplier 2 */
    };
    teeny_ctx *ctx = th_ctx();
    th_cpu_kernels(0);
    th_hook(TEENY__HOOK_CONV_DW_BWD, -1); /* dx by dwconv_fwd, not the one-pass backward */
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        TH_OK(ctx, teeny_profile_begin(ctx));
        run_case(&cases[i], 1200 + (uint64_t)i, 1, 1);
        int fwd = profiled(ctx, "dwconv_fwd");
        TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
        ck_assert_msg(fwd, "case %d: dwconv_fwd did not run", i);
    }
    th_cpu_kernels(-1);
}
END_TEST

/* One forward and one input gradient through the depthwise kernels, x (and dx) a view at x_off, y (and dy) at
 * y_off; their outputs for the caller to free. */
static void dw_cols_run(const ref_conv *c, const conv_data *d, int x_off, int y_off, float **y, float **dx)
{
    teeny_ctx *ctx = th_ctx();
    int64_t xs[4], ws[4], ys[4];
    teeny_conv2d_params p = params_of(c);
    shapes_of(c, xs, ws, ys);
    dtensor tx = dt_make(ctx, 4, xs, d->x, 1, x_off), tw = dt_make(ctx, 4, ws, d->w, 0, 0),
            ty = dt_make(ctx, 4, ys, NULL, 1, y_off), tdy = dt_make(ctx, 4, ys, d->dy, 1, y_off),
            tdx = dt_make(ctx, 4, xs, NULL, 1, x_off);
    TH_OK(ctx, teeny_profile_begin(ctx));
    TH_OK(ctx, teeny_conv2d_forward(ctx, &p, tx.t, tw.t, NULL, ty.t));
    TH_OK(ctx, teeny_conv2d_backward(ctx, &p, tx.t, tw.t, tdy.t, tdx.t, NULL, NULL));
    int fwd = profiled(ctx, "dwconv_fwd"), dxk = profiled(ctx, "dwconv_dx");
    TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
    ck_assert_msg(fwd && !dxk, "forward and dx not both by dwconv_fwd (%d, %d)", fwd, dxk);
    double *ref = th_malloc(d->ny * sizeof *ref), *rdx = th_malloc(d->nx * sizeof *rdx);
    ref_conv2d_forward(c, d->xd, d->wd, NULL, ref, NULL);
    ref_conv2d_backward(c, d->xd, d->wd, d->dyd, rdx, NULL, NULL, NULL, NULL, NULL);
    expect_close(&ty, ref, NULL, d->ny, "y", "dw_cols_run");
    expect_close(&tdx, rdx, NULL, d->nx, "dx", "dw_cols_run");
    *y = th_read(ty.t);
    *dx = th_read(tdx.t);
    free(ref);
    free(rdx);
    dtensor *ts[] = {&tx, &tw, &ty, &tdy, &tdx};
    for (int i = 0; i < 5; i++)
        dt_free(ts[i]);
}

/* dwconv_fwd's four columns per item (dw_fwd_rows3's NC 4, with and
 * without the float4 loads; float4, float2 and scalar stores) and two
 * (the plan's choice where the input rows are no whole float4s) against
 * one column per item (the test hook CONV_FLAGS, bit 8): the same bits,
 * forward and the stride-1 input gradient (dwconv_fwd over dy, taps
 * reversed), on planes 56, 28, 14 and 7 wide, odd widths, W no multiple
 * of 4, x or y at offsets that are no multiple of 4, pads 0, 1, 2 and 5. */
START_TEST(test_conv2d_depthwise_cols)
{
    static const struct {
        ref_conv c;
        int x_off, y_off;
    } cases[] = {
        {{1, 4, 20, 56, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 0, 0}, 0, 0},  /* float4 loads and stores */
        {{2, 3, 28, 28, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 4, 2},  /* y (dy) at 2: scalar stores (loads) */
        {{2, 3, 14, 14, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 0, 0},
        {{3, 2, 7, 7, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 0, 0},
        {{1, 3, 9, 23, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 1, 3},  /* OW 23 */
        {{1, 2, 8, 24, 2, 3, 3, 1, 1, 0, 2, 1, 1, 2, 0, 0}, 1, 4},  /* pad 2 at x offset 1: float4 loads */
        {{1, 2, 8, 26, 2, 3, 3, 1, 1, 1, 0, 1, 1, 2, 0, 0}, 3, 1},  /* pad 0: dx's float4 loads from dy at 1 */
        {{1, 2, 9, 16, 2, 3, 3, 1, 1, 2, 5, 1, 1, 2, 0, 0}, 0, 0},  /* pad 5: items half outside x */
        {{1, 2, 8, 12, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1, 1}, 0, 0},  /* pad_end_extra 1: OW 13 */
    };
    th_cpu_kernels(0);
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        const ref_conv *c = &cases[i].c;
        th_rng r = th_rng_make(1300 + (uint64_t)i);
        conv_data d;
        data_make(&d, c, &r);
        float *y[2], *dx[2];
        for (int one = 0; one < 2; one++) {
            th_hook(TEENY__HOOK_CONV_FLAGS, one ? 8 : 0);
            dw_cols_run(c, &d, cases[i].x_off, cases[i].y_off, &y[one], &dx[one]);
        }
        th_hook(TEENY__HOOK_CONV_TILE, -1);
        th_hook(TEENY__HOOK_CONV_FLAGS, 0);
        ck_assert_msg(!memcmp(y[0], y[1], d.ny * sizeof(float)), "case %d: y differs between the planned and 1 column", i);
        ck_assert_msg(!memcmp(dx[0], dx[1], d.nx * sizeof(float)), "case %d: dx differs between the planned and 1 column", i);
        for (int one = 0; one < 2; one++) {
            free(y[one]);
            free(dx[one]);
        }
        data_free(&d);
    }
    th_cpu_kernels(-1);
}
END_TEST

/* dwconv_dw's 3x3 path (dw_dw_rows3, cl/conv2d_dw.cl: column strips of
 * DW_ROWS rows with a sliding 3 x 3 window): chunks of positions that end
 * mid-row (1 channel: the work is split over partials, which
 * conv_reduce_parts sums; rows of 61 and 41, so no chunk ends on a row
 * boundary, and over 4 x 256 x 2 positions, so even a 256-item DW_WG's
 * chunks of at least 4 rounds split them: the H200 did not split 37 x 21),
 * strips that cross from one plane into the next (97, 45, 11 and 5 rows),
 * several batches, one-column planes, padding 0, 1 and (2, 0), a
 * multiplier of 2, and 3x3 shapes it leaves to the per-position walk
 * (stride 2, dilation 2); each with four position columns an item where
 * rows are 8 or more wide (float4 loads on the 64- and 20-wide rows at
 * padding 1; scalar ones at padding 2, at odd widths and where every
 * tensor sits at an odd offset; a last group of 2 columns on the 22-wide
 * rows) and with one (hook flag 16); the weight gradient against the
 * float64 reference in the portable variant. */
START_TEST(test_conv2d_depthwise_dw_strips)
{
    static const struct {
        conv_case k;
        int split; /* 1: the weight gradient must be split over partials */
    } cases[] = {
        {{{1, 1, 97, 61, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 1, 0, 0}, 1},
        {{{3, 1, 45, 41, 1, 3, 3, 1, 1, 0, 1, 1, 1, 1, 0, 0}, 1, 1, 0}, 1},
        {{{2, 3, 16, 16, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 1, 0, 0}, 0},
        {{{2, 2, 9, 3, 4, 3, 3, 1, 1, 2, 0, 1, 1, 2, 0, 0}, 0, 0, 0}, 0},
        {{{1, 2, 5, 1, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 1, 0, 0}, 0},
        {{{2, 2, 11, 13, 2, 3, 3, 2, 2, 1, 1, 1, 1, 2, 0, 0}, 1, 0, 0}, 0},
        {{{1, 2, 12, 10, 2, 3, 3, 1, 1, 2, 2, 2, 2, 2, 0, 0}, 1, 0, 0}, 0},
        {{{1, 1, 97, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 0, 0, 0}, 1},
        {{{2, 4, 30, 20, 4, 3, 3, 1, 1, 1, 2, 1, 1, 4, 0, 0}, 0, 0, 0}, 0},
        {{{2, 4, 13, 20, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 0, 0}, 0, 0, 0}, 0},
    };
    teeny_ctx *ctx = th_ctx();
    th_cpu_kernels(0);
    th_hook(TEENY__HOOK_CONV_DW_BWD, -1); /* not the one-pass backward */
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        for (int one = 0; one < 2; one++) { /* 4 columns an item where OW >= 8, then one (hook flag 16) */
            th_hook(TEENY__HOOK_CONV_FLAGS, one ? 16 : 0);
            TH_OK(ctx, teeny_profile_begin(ctx));
            run_case(&cases[i].k, 1300 + (uint64_t)i, 0, 1);
            int dw = profiled(ctx, "dwconv_dw"), parts = profiled(ctx, "conv_reduce_parts");
            TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
            ck_assert_msg(dw, "case %d: dwconv_dw did not run", i);
            ck_assert_msg(!cases[i].split || parts, "case %d: the weight gradient was not split", i);
        }
    th_hook(TEENY__HOOK_CONV_TILE, -1);
    th_hook(TEENY__HOOK_CONV_FLAGS, 0);
    th_cpu_kernels(-1);
}
END_TEST

/* dx and dw of k's backward (no bias gradient), read back (caller frees); every tensor at offset 0 unless
 * k->view (then at odd offsets). */
static void bwd3_read(const conv_case *k, const conv_data *d, float **dx, float **dw)
{
    teeny_ctx *ctx = th_ctx();
    int64_t xs[4], ws[4], ys[4];
    teeny_conv2d_params p = params_of(&k->c);
    shapes_of(&k->c, xs, ws, ys);
    dtensor tx = dt_make(ctx, 4, xs, d->x, k->view, 1), tw = dt_make(ctx, 4, ws, d->w, k->view, 3),
            tdy = dt_make(ctx, 4, ys, d->dy, k->view, 5), tdx = dt_make(ctx, 4, xs, NULL, k->view, 7),
            tdw = dt_make(ctx, 4, ws, NULL, k->view, 9);
    TH_OK(ctx, teeny_conv2d_backward(ctx, &p, tx.t, tw.t, tdy.t, tdx.t, tdw.t, NULL));
    *dx = th_read(tdx.t);
    *dw = th_read(tdw.t);
    dtensor *ts[] = {&tx, &tw, &tdy, &tdx, &tdw};
    for (int i = 0; i < 5; i++)
        dt_free(ts[i]);
}

/* The depthwise backward in one pass (dwconv_bwd3: dx and dw of a 3x3
 * depthwise convolution at stride 1, padding 1, dilation 1, multiplier 1,
 * x and dy read once) in the portable variant: every gradient against the
 * float64 reference (run_case: outputs NaN-poisoned, views' margins
 * untouched, outputs not asked for untouched), on planes of 16, 56, 40
 * and 13 columns (float4 rows; scalar ones where W % 4 != 0 or the tensors
 * sit at odd offsets), 1-, 2- and 5-row planes (a short last strip of
 * DWB_ROWS), one-pixel planes, and more units per channel than a
 * work-group holds (partials summed by conv_reduce_parts); dx equal to
 * the two-launch path's (the same sums in the same order), dx and dw the
 * same bits run to run; and the shapes and requests it leaves to the
 * other kernels (no dx, no dw, padding 0 or 2, an extra end padding,
 * stride 2, dilation 2, multiplier 2). */
START_TEST(test_conv2d_depthwise_bwd3)
{
    static const struct {
        conv_case k;
        int fused; /* 1: dwconv_bwd3 must take it; 0: must not */
    } cases[] = {
        {{{2, 3, 16, 16, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 1, 0, 0}, 1}, /* float4 rows */
        {{{1, 2, 11, 56, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 0, 0, 0}, 1}, /* 56 wide, strips 4, 4, 3 */
        {{{3, 2, 9, 13, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 1, 1, 0}, 1}, /* views: scalar; a 1-column group */
        {{{2, 3, 5, 6, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 0, 0, 0}, 1},   /* W % 4 != 0 */
        {{{3, 2, 1, 1, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 1, 0, 0}, 1},   /* one-pixel planes */
        {{{2, 2, 2, 3, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 0, 0, 0}, 1},   /* 2 x 3 */
        {{{3, 1, 40, 40, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 0, 0, 4}, 1}, /* 300 units: partials; no dbias */
        {{{2, 2, 8, 4, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 1, 0, 0}, 1},   /* 4 wide */
        {{{2, 4, 12, 12, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 0, 0}, 1, 0, 1}, 0}, /* no dx */
        {{{2, 4, 12, 12, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 0, 0}, 1, 0, 2}, 0}, /* no dw */
        {{{2, 3, 12, 12, 3, 3, 3, 1, 1, 0, 0, 1, 1, 3, 0, 0}, 0, 0, 0}, 0}, /* padding 0 */
        {{{2, 3, 12, 12, 3, 3, 3, 1, 1, 2, 2, 1, 1, 3, 0, 0}, 0, 0, 0}, 0}, /* padding 2 */
        {{{2, 3, 12, 12, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 1, 0}, 0, 0, 0}, 0}, /* end padding 2 down the rows */
        {{{2, 3, 12, 12, 3, 3, 3, 2, 2, 1, 1, 1, 1, 3, 0, 0}, 0, 0, 0}, 0}, /* stride 2 */
        {{{2, 3, 12, 12, 3, 3, 3, 1, 1, 1, 1, 2, 2, 3, 0, 0}, 0, 0, 0}, 0}, /* dilation 2 */
        {{{2, 3, 12, 12, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 0, 0, 0}, 0}, /* multiplier 2 */
    };
    teeny_ctx *ctx = th_ctx();
    th_cpu_kernels(0);
    for (int prof = 0; prof < 2; prof++) { /* the device's profile, then the nvidia one (dwb_wg 128 of 256) */
        if (prof == 1 && !th_profile("nvidia"))
            break;
        const int wg = ctx->tune.conv.dwb_wg > 0 ? ctx->tune.conv.dwb_wg : ctx->tune.conv.dw_wg;
        for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
            const conv_case *k = &cases[i].k;
            TH_OK(ctx, teeny_profile_begin(ctx));
            run_case(k, 1400 + (uint64_t)i, 0, 1);
            int fused = profiled(ctx, "dwconv_bwd3"), parts = profiled(ctx, "conv_reduce_parts");
            int dwk = profiled(ctx, "dwconv_dw"), fwd = profiled(ctx, "dwconv_fwd");
            TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
            ck_assert_msg(fused == cases[i].fused, "case %d: dwconv_bwd3 ran %d, expected %d", i, fused,
                          cases[i].fused);
            ck_assert_msg(!fused || (!dwk && !fwd), "case %d: dwconv_dw (%d) or dwconv_fwd (%d) beside dwconv_bwd3", i,
                          dwk, fwd);
            if (k->skip == 4) /* no dbias: the partials are the weight gradient's */
                ck_assert_msg(parts == (3 * 10 * 10 > wg), "case %d: conv_reduce_parts ran %d", i, parts);
            if (!fused)
                continue;
            th_rng r = th_rng_make(1400 + (uint64_t)i);
            conv_data d;
            data_make(&d, &k->c, &r);
            float *dx[3], *dw[3];
            for (int run = 0; run < 3; run++) { /* fused twice, then the two-launch path */
                th_hook(TEENY__HOOK_CONV_DW_BWD, run == 2 ? -1 : 0);
                bwd3_read(k, &d, &dx[run], &dw[run]);
            }
            th_hook(TEENY__HOOK_CONV_DW_BWD, 0);
            ck_assert_msg(!memcmp(dx[0], dx[1], d.nx * sizeof(float)) && !memcmp(dw[0], dw[1], d.nw * sizeof(float)),
                          "case %d: dx or dw differ between two runs", i);
            for (size_t e = 0; e < d.nx; e++)
                ck_assert_msg(dx[0][e] == dx[2][e], "case %d: dx[%zu] %.9g, the two-launch path's %.9g", i, e,
                              (double)dx[0][e], (double)dx[2][e]);
            for (int run = 0; run < 3; run++) {
                free(dx[run]);
                free(dw[run]);
            }
            data_free(&d);
        }
    }
    th_profile(NULL);
    th_cpu_kernels(-1);
}
END_TEST

/* Forward and backward of k (bias, every gradient) against the
 * reference; out[0..3] = y, dx, dw, dbias as read back (caller frees).
 * Returns the kernels launched. */
static long split_run(const conv_case *k, const conv_data *d, float **out, teeny_status want, const char *repro)
{
    teeny_ctx *ctx = th_ctx();
    const ref_conv *c = &k->c;
    int64_t xs[4], ws[4], ys[4], cs = c->Cout;
    teeny_conv2d_params p = params_of(c);
    shapes_of(c, xs, ws, ys);
    dtensor tx = dt_make(ctx, 4, xs, d->x, 0, 0), tw = dt_make(ctx, 4, ws, d->w, 0, 0),
            tb = dt_make(ctx, 1, &cs, d->b, 0, 0), tdy = dt_make(ctx, 4, ys, d->dy, 0, 0);
    dtensor o[4] = {dt_make(ctx, 4, ys, NULL, 1, 3), dt_make(ctx, 4, xs, NULL, 1, 5), dt_make(ctx, 4, ws, NULL, 1, 7),
                    dt_make(ctx, 1, &cs, NULL, 1, 9)};
    size_t n[4] = {d->ny, d->nx, d->nw, (size_t)c->Cout};
    teeny__calls_reset();
    TH_STATUS(ctx, want, teeny_conv2d_forward(ctx, &p, tx.t, tw.t, tb.t, o[0].t));
    TH_STATUS(ctx, want, teeny_conv2d_backward(ctx, &p, tx.t, tw.t, tdy.t, o[1].t, o[2].t, o[3].t));
    TH_OK(ctx, teeny_ctx_finish(ctx));
    long launches = teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel);
    if (want == TEENY_OK) {
        double *ref[4], *mag[4] = {NULL, NULL, NULL, NULL};
        for (int i = 0; i < 4; i++)
            ref[i] = th_malloc(n[i] * sizeof(double));
        mag[2] = th_malloc(n[2] * sizeof(double));
        mag[3] = th_malloc(n[3] * sizeof(double));
        ref_conv2d_forward(c, d->xd, d->wd, d->bd, ref[0], NULL);
        ref_conv2d_backward(c, d->xd, d->wd, d->dyd, ref[1], ref[2], ref[3], NULL, mag[2], mag[3]);
        static const char *const what[4] = {"y", "dx", "dw", "dbias"};
        for (int i = 0; i < 4; i++) {
            expect_close(&o[i], ref[i], mag[i], n[i], what[i], repro);
            out[i] = th_read(o[i].t);
            free(ref[i]);
            free(mag[i]);
        }
    } else {
        for (int i = 0; i < 4; i++) { /* untouched, view padding included */
            float *v = th_read(o[i].base);
            size_t nb = (size_t)teeny_tensor_numel(o[i].base);
            for (size_t e = 0; e < nb; e++)
                ck_assert_msg(isnan(v[e]), "output %d element %zu written by a rejected call; %s", i, e, repro);
            free(v);
        }
    }
    dtensor *ts[] = {&tx, &tw, &tb, &tdy, &o[0], &o[1], &o[2], &o[3]};
    for (int i = 0; i < 8; i++)
        dt_free(ts[i]);
    return launches;
}

/* Where a device limits a work-item's loop trips (Mesa's llvmpipe;
 * forced here with th_loop_limit) every kernel's loops stay within it
 * (conv2d/gemm.c, depthwise.c), with the device's own tuning (the CPU GEMM and the
 * depthwise CPU variants here) and the generic one (the tiled GEMMs, the
 * work-group depthwise kernels): the forward and input-gradient GEMMs run
 * their k loop in launches that carry the sums (the bits of one launch,
 * y and dx compared bitwise where same says so); the weight and bias
 * gradients take more chunks (against the reference), or the CPU GEMM's
 * chunks as launches in order when their partials would not fit
 * conv_reduce_parts' loop (the bits of one launch again); the depthwise
 * CPU variants take fewer rows per item (same bits), and a depthwise
 * kernel whose item cannot fit leaves the work to the work-group kernel or
 * the GEMM. More kernels run than without the limit. A tile whose one k
 * tile would pass the budget is not picked (the NVIDIA profile's 8 x 8
 * micro-tiles under a limit of 2000: its 64 x 16 tile). A limit below one
 * unit of a GEMM is TEENY_ERR_UNSUPPORTED before anything is written. The
 * plans are a 2-compute-unit device's (llvmpipe here; a 16-core PoCL gave
 * the depthwise kernels rows short enough not to split). */
typedef struct {
    conv_case k;
    const char *profile; /* NULL: the device's own */
    long limit;
    int same; /* outputs whose bits equal the unlimited run's: 1 y, 2 dx, 4 dw, 8 dbias */
} split_case;

static void split_cases(const split_case *cases, int n, uint64_t seed0)
{
    th_compute_units(2);
    for (int ci = 0; ci < n; ci++) {
        const conv_case *k = &cases[ci].k;
        uint64_t seed = seed0 + (uint64_t)ci;
        th_rng r = th_rng_make(seed);
        char repro[400];
        conv_data d;
        float *one[4], *got[4];
        if (cases[ci].profile && !th_profile(cases[ci].profile))
            continue;
        repro_str(k, seed, repro, sizeof repro);
        snprintf(repro + strlen(repro), sizeof repro - strlen(repro), ", %s tuning, loop limit %ld",
                 cases[ci].profile ? cases[ci].profile : "own", cases[ci].limit);
        data_make(&d, &k->c, &r);
        th_hook(TEENY__HOOK_CONV_FLAGS, 4); /* dx by the GEMM, whose k loop splits (conv_dx_direct has no split) */
        th_hook(TEENY__HOOK_CONV_DW_BWD, -1); /* dwconv_dw, whose chunks split (dwconv_bwd3's items fit any limit here) */
        th_loop_limit(0);
        long n0 = split_run(k, &d, one, TEENY_OK, repro);
        th_loop_limit(cases[ci].limit);
        long n1 = split_run(k, &d, got, TEENY_OK, repro);
        ck_assert_msg(n1 > n0, "%ld kernels launched, %ld without the limit: nothing split; %s", n1, n0, repro);
        size_t sz[4] = {d.ny, d.nx, d.nw, (size_t)k->c.Cout};
        for (int i = 0; i < 4; i++) {
            if (cases[ci].same & (1 << i))
                ck_assert_msg(!memcmp(got[i], one[i], sz[i] * 4), "output %d differs from the unlimited run's; %s",
                              i, repro);
            free(one[i]);
            free(got[i]);
        }
        th_loop_limit(200); /* below one unit of every GEMM */
        split_run(k, &d, got, TEENY_ERR_UNSUPPORTED, repro);
        th_loop_limit(-1);
        th_hook(TEENY__HOOK_CONV_TILE, -1);
        th_hook(TEENY__HOOK_CONV_FLAGS, 0);
        th_hook(TEENY__HOOK_CONV_DW_BWD, 0);
        th_profile(NULL);
        data_free(&d);
    }
    th_compute_units(0);
}

START_TEST(test_conv2d_split_loops)
{
    static const split_case cases[] = {
        {{{2, 24, 10, 10, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 1, 0, 0}, NULL, 4000, 1 | 2},
        {{{2, 40, 12, 12, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 1, 0, 0}, NULL, 2000, 1 | 2},
        {{{2, 6, 19, 17, 10, 4, 3, 2, 3, 1, 2, 2, 1, 2, 0, 0}, 1, 0, 0}, NULL, 2000, 1 | 2},
        {{{2, 24, 10, 10, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 1, 0, 0}, "generic", 4000, 1 | 2},
        {{{2, 40, 12, 12, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 1, 0, 0}, "generic", 2000, 1 | 2},
        {{{2, 6, 19, 17, 10, 4, 3, 2, 3, 1, 2, 2, 1, 2, 0, 0}, 1, 0, 0}, "generic", 2000, 1 | 2},
        {{{2, 8, 40, 40, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 0, 0}, 1, 0, 0}, "generic", 2000, 1 | 2},
        {{{1, 4, 30, 30, 4, 15, 15, 1, 1, 7, 7, 1, 1, 4, 0, 0}, 1, 0, 0}, "generic", 2000, 0}, /* every depthwise: GEMM */
    };
    split_cases(cases, (int)(sizeof cases / sizeof cases[0]), 5100);
}
END_TEST

/* The input gradient's stride phases in one conv_gemm_gather launch (the
 * GPU tunings, forced here; conv_gemm_cpu keeps a launch per phase): y,
 * dx, dw and dbias against the reference and bit for bit those of one
 * launch per phase (the test hook CONV_FLAGS, bit 2), with exactly phases - 1
 * launches fewer (flag 4 keeps dx on the GEMM where conv_dx_direct would
 * take it): thin and wide channel counts, phases no tap reaches
 * (1x1 stride 3; stride 2 with dilation 2), mixed strides with groups and
 * ONNX's extra end padding, a plane smaller than the stride; under tf32
 * too where the device has it. */
START_TEST(test_conv2d_dx_phases)
{
    static const struct {
        conv_case k;
        int phases;
    } cases[] = {
        {{{2, 3, 23, 21, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0, 0}, 1, 0, 0}, 4},   /* a 7x7 stem, 3 channels */
        {{{2, 5, 10, 11, 6, 1, 1, 3, 3, 0, 0, 1, 1, 1, 0, 0}, 1, 0, 0}, 9},   /* 8 phases without taps */
        {{{2, 6, 13, 12, 4, 3, 3, 2, 2, 2, 1, 2, 2, 2, 0, 0}, 1, 0, 0}, 4},   /* dilation 2: one row phase empty */
        {{{3, 6, 19, 17, 9, 4, 3, 2, 3, 1, 2, 2, 1, 3, 1, 0}, 1, 0, 0}, 6},   /* strides (2, 3), groups, end pad */
        {{{1, 4, 1, 5, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0}, 1, 0, 0}, 2},     /* H = 1 < stride */
        {{{2, 40, 9, 9, 36, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0}, 1, 0, 0}, 4},   /* 40 channels: more column tiles */
    };
    static const char *const profiles[] = {"generic", "nvidia"};
    teeny_ctx *ctx = th_ctx();
    int n_cases = (int)(sizeof cases / sizeof cases[0]);
    int64_t budget; /* the loop-limit probe's launch now, not inside a count below */
    TH_OK(ctx, teeny__loop_budget(ctx, &budget));
    for (int pi = 0; pi < 2; pi++) {
        if (!th_profile(profiles[pi]))
            continue;
        for (int tf32 = 0; tf32 < 2; tf32++) {
            if (tf32 && !th_tf32_on(ctx))
                break;
            tol = tf32 ? TOL_TF32 : TOL;
            for (int ci = 0; ci < n_cases; ci++) {
                const conv_case *k = &cases[ci].k;
                uint64_t seed = 5200 + (uint64_t)ci;
                th_rng r = th_rng_make(seed);
                char repro[400];
                conv_data d;
                float *merged[4], *each[4];
                repro_str(k, seed, repro, sizeof repro);
                snprintf(repro + strlen(repro), sizeof repro - strlen(repro), ", %s tuning%s", profiles[pi],
                         tf32 ? ", tf32" : "");
                data_make(&d, &k->c, &r);
                th_hook(TEENY__HOOK_CONV_FLAGS, 4); /* the GEMM path, not conv_dx_direct */
                long n_merged = split_run(k, &d, merged, TEENY_OK, repro);
                th_hook(TEENY__HOOK_CONV_FLAGS, 2 | 4);
                long n_each = split_run(k, &d, each, TEENY_OK, repro);
                th_hook(TEENY__HOOK_CONV_TILE, -1);
                th_hook(TEENY__HOOK_CONV_FLAGS, 0);
                ck_assert_msg(n_each - n_merged == cases[ci].phases - 1,
                              "%ld launches merged, %ld one per phase (%d phases); %s", n_merged, n_each,
                              cases[ci].phases, repro);
                size_t sz[4] = {d.ny, d.nx, d.nw, (size_t)k->c.Cout};
                for (int i = 0; i < 4; i++) {
                    ck_assert_msg(!memcmp(merged[i], each[i], sz[i] * 4),
                                  "output %d: merged phases differ from one launch per phase; %s", i, repro);
                    free(merged[i]);
                    free(each[i]);
                }
                data_free(&d);
            }
        }
        TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
        tol = TOL;
        th_profile(NULL);
    }
}
END_TEST

/* The input gradient alone (dw, dbias NULL) into a NaN-poisoned dx (a
 * view where k->view says so), against the reference; returns dx as read
 * back (caller frees) and in *direct whether conv_dx_direct ran. */
static float *dx_run(const conv_case *k, const conv_data *d, int *direct, const char *repro)
{
    teeny_ctx *ctx = th_ctx();
    const ref_conv *c = &k->c;
    int64_t xs[4], ws[4], ys[4];
    teeny_conv2d_params p = params_of(c);
    shapes_of(c, xs, ws, ys);
    dtensor tx = dt_make(ctx, 4, xs, d->x, k->view, 1), tw = dt_make(ctx, 4, ws, d->w, k->view, 3),
            tdy = dt_make(ctx, 4, ys, d->dy, k->view, 5), tdx = dt_make(ctx, 4, xs, NULL, k->view, 7);
    double *ref = th_malloc(d->nx * sizeof *ref);
    TH_OK(ctx, teeny_profile_begin(ctx));
    TH_OK(ctx, teeny_conv2d_backward(ctx, &p, tx.t, tw.t, tdy.t, tdx.t, NULL, NULL));
    *direct = profiled(ctx, "conv_dx_direct");
    TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
    ref_conv2d_backward(c, d->xd, d->wd, d->dyd, ref, NULL, NULL, NULL, NULL, NULL);
    expect_close(&tdx, ref, NULL, d->nx, "dx", repro);
    float *out = th_read(tdx.t);
    free(ref);
    dtensor *ts[] = {&tx, &tw, &tdy, &tdx};
    for (int i = 0; i < 4; i++)
        dt_free(ts[i]);
    return out;
}

/* conv_dx_direct, the input gradient of convolutions with 1-4 input
 * channels per group (the GPU and CPU tunings, forced here): 1, 2, 3 and 4
 * channels; 7x7 stride 2 (the stem), 3x3 at strides 1 and 2, 5x5 stride 3
 * dilation 2, 1x1 stride 2, a 2x3 kernel at stride (2, 1), 7x7 stride 1
 * (two passes of column taps), dilation 2 at stride 1 (items over
 * interleaved columns), groups 2, ONNX's extra end padding, a plane
 * smaller than the stride, phases no tap reaches (1x1 stride 3); odd
 * planes, batches 1-3, views at odd offsets. dx against the float64
 * reference, the same bits on a second run, and within TOL of the GEMM
 * path (TOL_TF32 in tf32 mode: that GEMM rounds to tf32; the test hook
 * CONV_FLAGS, bit 4), which must not launch it; 5 channels
 * a group keep the GEMM, and so does a stem whose item would pass a
 * device's loop budget. In tf32 mode too where the device has it (the
 * kernel is exact fp32 there). */
START_TEST(test_conv2d_dx_direct)
{
    static const struct {
        conv_case k;
        int direct;
    } cases[] = {
        {{{2, 3, 29, 31, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0, 0}, 0, 1, 0}, 1},   /* a 7x7 stem, 3 channels (views) */
        {{{3, 1, 13, 12, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 0, 0, 0}, 1},   /* 1 channel, 3x3 */
        {{{1, 2, 29, 31, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0}, 0, 1, 0}, 1},   /* 2 channels, 3x3 s2 (views) */
        {{{2, 4, 23, 25, 6, 5, 5, 3, 3, 2, 2, 2, 2, 1, 0, 0}, 0, 0, 0}, 1},   /* 4 channels, 5x5 s3 dilation 2 */
        {{{2, 3, 15, 17, 7, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0, 0}, 0, 0, 0}, 1},   /* 1x1 s2 */
        {{{1, 2, 14, 19, 5, 2, 3, 2, 1, 1, 1, 1, 1, 1, 0, 0}, 0, 0, 0}, 1},   /* 2x3 at stride (2, 1) */
        {{{1, 4, 12, 20, 9, 7, 7, 1, 1, 3, 3, 1, 1, 1, 0, 0}, 0, 1, 0}, 1},   /* 7x7 s1: two passes (views) */
        {{{1, 3, 11, 21, 4, 3, 3, 1, 1, 2, 2, 2, 2, 1, 0, 0}, 0, 0, 0}, 1},   /* dilation 2, stride 1 */
        {{{2, 6, 17, 13, 8, 3, 3, 2, 2, 1, 1, 1, 1, 2, 0, 0}, 0, 1, 0}, 1},   /* groups 2, 3 channels each */
        {{{1, 3, 12, 11, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, -1}, 0, 0, 0}, 1},  /* end padding apart */
        {{{1, 4, 1, 5, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0}, 0, 0, 0}, 1},     /* H = 1 < stride */
        {{{2, 4, 10, 11, 6, 1, 1, 3, 3, 0, 0, 1, 1, 1, 0, 0}, 0, 0, 0}, 1},   /* 8 of 9 phases without taps */
        {{{2, 5, 12, 11, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0}, 0, 0, 0}, 0},   /* 5 channels: the GEMM */
    };
    static const char *const profiles[] = {"nvidia", "generic", "cpu"}; /* 4, 4 and 8 columns an item */
    teeny_ctx *ctx = th_ctx();
    int ran = 0;
    for (int pi = 0; pi < 3; pi++) {
        if (!th_profile(profiles[pi]))
            continue;
        for (int tf32 = 0; tf32 < 2; tf32++) {
            if (tf32 && !th_tf32_on(ctx))
                break;
            for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
                const conv_case *k = &cases[ci].k;
                uint64_t seed = 5300 + (uint64_t)ci;
                th_rng r = th_rng_make(seed);
                char repro[400];
                conv_data d;
                int direct[3];
                repro_str(k, seed, repro, sizeof repro);
                snprintf(repro + strlen(repro), sizeof repro - strlen(repro), ", %s tuning%s", profiles[pi],
                         tf32 ? ", tf32" : "");
                data_make(&d, &k->c, &r);
                /* the GEMM in tf32 mode rounds to tf32; the direct kernel is exact fp32 */
                tol = tf32 && !cases[ci].direct ? TOL_TF32 : TOL;
                float *a = dx_run(k, &d, &direct[0], repro), *b = dx_run(k, &d, &direct[1], repro);
                th_hook(TEENY__HOOK_CONV_FLAGS, 4);
                tol = tf32 ? TOL_TF32 : TOL; /* the forced GEMM */
                float *gemm = dx_run(k, &d, &direct[2], repro);
                tol = TOL;
                th_hook(TEENY__HOOK_CONV_TILE, -1);
                th_hook(TEENY__HOOK_CONV_FLAGS, 0);
                ck_assert_msg(direct[0] == cases[ci].direct && direct[1] == cases[ci].direct,
                              "conv_dx_direct ran: %d, %d; expected %d; %s", direct[0], direct[1], cases[ci].direct,
                              repro);
                ck_assert_msg(!direct[2], "conv_dx_direct ran with the GEMM path forced; %s", repro);
                ck_assert_msg(!memcmp(a, b, d.nx * sizeof(float)), "dx differs between two runs; %s", repro);
                /* the GEMM path in tf32 mode rounds its operands to tf32 */
                double *g = th_dbl(gemm, d.nx), e = th_nrms(a, g, d.nx), lim = tf32 ? TOL_TF32 : TOL;
                ck_assert_msg(e <= lim, "dx: nrms %.3g against the GEMM path > %.1g; %s", e, lim, repro);
                ran += direct[0];
                free(a);
                free(b);
                free(gemm);
                free(g);
                data_free(&d);
            }
        }
        TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
        th_profile(NULL);
    }
    /* where a device ends a work-item's loops early (llvmpipe) and the
     * stem's item would pass the budget, the GEMM takes dx */
    th_loop_limit(2000);
    for (int pi = 0; pi < 3; pi++) {
        if (!th_profile(profiles[pi]))
            continue;
        th_rng r = th_rng_make(5399);
        conv_data d;
        char repro[400];
        int direct;
        repro_str(&cases[0].k, 5399, repro, sizeof repro);
        snprintf(repro + strlen(repro), sizeof repro - strlen(repro), ", %s tuning, loop limit 2000",
                 profiles[pi]);
        data_make(&d, &cases[0].k.c, &r);
        free(dx_run(&cases[0].k, &d, &direct, repro));
        ck_assert_msg(!direct, "conv_dx_direct ran past the loop budget; %s", repro);
        data_free(&d);
        th_profile(NULL);
    }
    th_loop_limit(-1);
    if (!ran)
        th_skip("this device holds none of the nvidia, generic and cpu profiles");
}
END_TEST

/* The CPU variants' splits (the CPU GEMM's chunks, the depthwise CPU
 * kernels' rows): on devices whose profile takes them. */
START_TEST(test_conv2d_split_loops_cpu)
{
    static const split_case cases[] = {
        {{{2, 8, 40, 40, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 0, 0}, 1, 0, 0}, NULL, 4000, 1 | 2},   /* depthwise: rows */
        {{{1, 4, 9, 150, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 0, 0}, 1, 0, 0}, NULL, 2000, 0}, /* rows too long: dwconv_fwd/dx */
        {{{1, 4, 30, 30, 4, 15, 15, 1, 1, 7, 7, 1, 1, 4, 0, 0}, 1, 0, 0}, NULL, 2000, 0}, /* and their items too: GEMM */
        {{{1, 2, 3, 1200, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}, 1, 0, 0}, NULL, 2000, 0},  /* dw: a row too long, GEMM */
        /* dw: launches; at 2500 its chunks outnumber conv_reduce_parts'
         * loop with either CPU tuning (cpu: 4 rows an item, cpu_vec16: 6);
         * at 3000 the cpu tuning's partials fit (and at 4000 with 6 rows),
         * and their sum is not the one launch's */
        {{{4, 2, 160, 160, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 1, 0, 0}, NULL, 2500, 1 | 2 | 4},
    };
    if (th_ctx()->tune.variant != TEENY_VARIANT_CPU)
        th_skip("this device's profile (%s) takes no CPU variants", th_ctx()->tune.profile->name);
    split_cases(cases, (int)(sizeof cases / sizeof cases[0]), 5150);
}
END_TEST

/* 1x1, stride-1, unpadded convolutions on the CPU tunings take
 * conv_gemm_cpu_px (pixels along the vector, conv2d/gemm.c) for y and dx:
 * against the reference (split_run) and bit for bit conv_gemm_cpu's (the
 * test hook CONV_FLAGS bit 32), the same sum in the same order; where a
 * device limits loop trips (4000: a few channels a launch), k in
 * launches with one launch's bits and more launches. Planes of 35 pixels
 * (a tail of 3 after two vectors of 16), 64 (none), 21; channel counts
 * that are no multiple of an item's rows; groups; batch 1-3; views. A
 * plane of 1 pixel (a convolution after a global pooling) is
 * conv_gemm_cpu's: the hook changes no launch there. */
START_TEST(test_conv2d_cpu_px)
{
    static const conv_case cases[] = {
        {{2, 24, 5, 7, 20, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 1, 0, 0},
        {{1, 40, 8, 8, 30, 1, 1, 1, 1, 0, 0, 1, 1, 2, 0, 0}, 1, 1, 0},
        {{3, 7, 3, 7, 9, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 0, 0, 0},
        {{2, 300, 4, 5, 6, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 1, 1, 0},
        {{3, 7, 1, 1, 9, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, 0, 0, 0}, /* one pixel: not px's */
    };
    if (!th_profile("cpu"))
        th_skip("%s cannot take the cpu profile", teeny_ctx_device_name(th_ctx()));
    for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
        const conv_case *k = &cases[ci];
        uint64_t seed = 5200 + (uint64_t)ci;
        th_rng r = th_rng_make(seed);
        char repro[400];
        conv_data d;
        float *px[4], *rows[4], *lim[4];
        repro_str(k, seed, repro, sizeof repro);
        data_make(&d, &k->c, &r);
        teeny_ctx *ctx = th_ctx();
        th_hook(TEENY__HOOK_CONV_FLAGS, 4); /* dx by the GEMM */
        int64_t items0 = ctx->prog.items_enqueued;
        long n_px = split_run(k, &d, px, TEENY_OK, repro);
        int64_t items_px = ctx->prog.items_enqueued - items0;
        th_loop_limit(4000);
        long n_lim = split_run(k, &d, lim, TEENY_OK, repro);
        th_loop_limit(0);
        th_hook(TEENY__HOOK_CONV_FLAGS, 4 | 32);
        items0 = ctx->prog.items_enqueued;
        split_run(k, &d, rows, TEENY_OK, repro);
        /* the other kernel's grids: another count of work-items (the same where px takes nothing) */
        ck_assert_msg((ctx->prog.items_enqueued - items0 != items_px) == (ci != 4), "the hook changed %s; %s",
                      ci != 4 ? "no kernel" : "a launch px should not take", repro);
        ck_assert_msg(ci != 3 || n_lim > n_px, "%ld launches under the limit, %ld without; %s", n_lim, n_px, repro);
        size_t sz[2] = {d.ny, d.nx};
        for (int i = 0; i < 2; i++) {
            ck_assert_msg(!memcmp(px[i], rows[i], sz[i] * 4), "output %d: conv_gemm_cpu_px's bits differ from "
                          "conv_gemm_cpu's; %s", i, repro);
            ck_assert_msg(!memcmp(lim[i], px[i], sz[i] * 4), "output %d: in k ranges differs from one launch; %s",
                          i, repro);
        }
        for (int i = 0; i < 4; i++) {
            free(px[i]);
            free(rows[i]);
            free(lim[i]);
        }
        th_loop_limit(-1);
        th_hook(TEENY__HOOK_CONV_FLAGS, 0);
        data_free(&d);
    }
    th_profile(NULL);
}
END_TEST

/* The CPU depthwise forward through a padded band (dwconv_fwd_cpu_band)
 * against the reference (split_run) and bit for bit against
 * dwconv_fwd_cpu (the test hook CONV_FLAGS bit 64): the same taps summed
 * in the same order, padding taps adding 0 * w. Rows too wide for a whole
 * plane's band (300 columns: 4 output rows an item), rows narrower than a
 * vector (5), tails of 8-column chunks, strides 2 on either axis,
 * dilation, 5x5 and 3x5 taps, pads wider than the taps, a channel
 * multiplier, batch, views; and where a device limits loop trips (3000),
 * fewer rows an item (the backward's launches may split), the same bits. Stride 3 is not the band's: both runs
 * take dwconv_fwd_cpu. */
START_TEST(test_conv2d_dw_band)
{
    static const conv_case cases[] = {
        {{2, 6, 21, 19, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, 0, 0}, 1, 1, 0},
        {{1, 3, 13, 300, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}, 0, 0, 0},
        {{2, 4, 23, 21, 8, 5, 5, 2, 2, 2, 3, 2, 1, 4, 0, 0}, 1, 0, 0},
        {{1, 5, 7, 10, 5, 3, 5, 1, 2, 1, 2, 1, 1, 5, 0, 0}, 1, 1, 0},
        {{2, 3, 6, 5, 3, 3, 3, 2, 1, 4, 4, 1, 1, 3, 0, 0}, 0, 0, 0},
        {{1, 4, 17, 17, 4, 3, 3, 3, 3, 1, 1, 1, 1, 4, 0, 0}, 1, 0, 0},
    };
    if (!th_profile("cpu"))
        th_skip("%s cannot take the cpu profile", teeny_ctx_device_name(th_ctx()));
    teeny_ctx *ctx = th_ctx();
    for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
        const conv_case *k = &cases[ci];
        uint64_t seed = 5300 + (uint64_t)ci;
        th_rng r = th_rng_make(seed);
        char repro[400];
        conv_data d;
        float *band[4], *rows[4], *lim[4];
        int band_case = k->c.sw <= 2;
        repro_str(k, seed, repro, sizeof repro);
        data_make(&d, &k->c, &r);
        TH_OK(ctx, teeny_profile_begin(ctx));
        split_run(k, &d, band, TEENY_OK, repro);
        ck_assert_msg(profiled(ctx, "dwconv_fwd_cpu_band") == band_case, "dwconv_fwd_cpu_band %s; %s",
                      band_case ? "did not run" : "ran", repro);
        TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
        th_loop_limit(3000);
        split_run(k, &d, lim, TEENY_OK, repro);
        th_loop_limit(0);
        th_hook(TEENY__HOOK_CONV_FLAGS, 64);
        TH_OK(ctx, teeny_profile_begin(ctx));
        split_run(k, &d, rows, TEENY_OK, repro);
        ck_assert_msg(profiled(ctx, "dwconv_fwd_cpu"), "the hook left dwconv_fwd_cpu out; %s", repro);
        TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
        ck_assert_msg(!memcmp(band[0], rows[0], d.ny * 4), "y: dwconv_fwd_cpu_band's bits differ from "
                      "dwconv_fwd_cpu's; %s", repro);
        ck_assert_msg(!memcmp(lim[0], band[0], d.ny * 4), "y: under the loop limit the bits differ; %s", repro);
        for (int i = 0; i < 4; i++) {
            free(band[i]);
            free(rows[i]);
            free(lim[i]);
        }
        th_loop_limit(-1);
        th_hook(TEENY__HOOK_CONV_FLAGS, 0);
        data_free(&d);
    }
    th_profile(NULL);
}
END_TEST

/* ---- determinism ---- */

START_TEST(test_conv2d_determinism)
{
    teeny_ctx *ctx = th_ctx();
    static const ref_conv shapes[] = {
        {4, 16, 20, 20, 24, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0},
        {6, 3, 30, 30, 6, 3, 3, 2, 2, 1, 1, 1, 1, 3, 0, 0},
    };
    for (int s = 0; s < 2; s++) {
        const ref_conv *c = &shapes[s];
        th_rng r = th_rng_make(55 + (uint64_t)s);
        conv_data d;
        int64_t xs[4], ws[4], ys[4], cs = c->Cout;
        teeny_conv2d_params p = params_of(c);
        shapes_of(c, xs, ws, ys);
        data_make(&d, c, &r);
        dtensor tx = dt_make(ctx, 4, xs, d.x, 0, 0), tw = dt_make(ctx, 4, ws, d.w, 0, 0),
                tb = dt_make(ctx, 1, &cs, d.b, 0, 0), tdy = dt_make(ctx, 4, ys, d.dy, 0, 0);
        float *out[2][4];
        for (int run = 0; run < 2; run++) {
            dtensor ty = dt_make(ctx, 4, ys, NULL, 0, 0), tdx = dt_make(ctx, 4, xs, NULL, 0, 0),
                    tdw = dt_make(ctx, 4, ws, NULL, 0, 0), tdb = dt_make(ctx, 1, &cs, NULL, 0, 0);
            TH_OK(ctx, teeny_conv2d_forward(ctx, &p, tx.t, tw.t, tb.t, ty.t));
            TH_OK(ctx, teeny_conv2d_backward(ctx, &p, tx.t, tw.t, tdy.t, tdx.t, tdw.t, tdb.t));
            out[run][0] = th_read(ty.t);
            out[run][1] = th_read(tdx.t);
            out[run][2] = th_read(tdw.t);
            out[run][3] = th_read(tdb.t);
            dt_free(&ty);
            dt_free(&tdx);
            dt_free(&tdw);
            dt_free(&tdb);
        }
        size_t sizes[4] = {d.ny, d.nx, d.nw, (size_t)c->Cout};
        for (int j = 0; j < 4; j++) {
            ck_assert_msg(th_first_nonfinite(out[0][j], sizes[j]) < 0, "shape %d output %d not written", s, j);
            ck_assert_msg(!memcmp(out[0][j], out[1][j], sizes[j] * sizeof(float)), "shape %d output %d differs between runs",
                          s, j);
            free(out[0][j]);
            free(out[1][j]);
        }
        dt_free(&tx);
        dt_free(&tw);
        dt_free(&tb);
        dt_free(&tdy);
        data_free(&d);
    }
}
END_TEST

/* ---- fused epilogues ---- */

/* fused(x, w, NULL, scale, shift, act) with scale/shift from
 * teeny_batchnorm_fold against conv -> batchnorm_forward_infer ->
 * activation; and the other NULL combinations against the reference. */
static void check_fused(const ref_conv *c, uint64_t seed)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(seed);
    conv_case k = {*c, 1, 0, 0};
    char repro[320];
    conv_data d;
    int64_t xs[4], ws[4], ys[4], cs = c->Cout;
    int C = c->Cout;
    teeny_conv2d_params p = params_of(c);
    repro_str(&k, seed, repro, sizeof repro);
    shapes_of(c, xs, ws, ys);
    data_make(&d, c, &r);
    float *bn_w = th_malloc((size_t)C * sizeof(float)), *bn_b = th_malloc((size_t)C * sizeof(float)),
          *rm = th_malloc((size_t)C * sizeof(float)), *rv = th_malloc((size_t)C * sizeof(float));
    th_fill_uniform(&r, bn_w, (size_t)C, 0.5, 2);
    th_fill_uniform(&r, bn_b, (size_t)C, -1, 1);
    th_fill_uniform(&r, rm, (size_t)C, -0.5, 0.5);
    th_fill_uniform(&r, rv, (size_t)C, 0.5, 2);
    dtensor tx = dt_make(ctx, 4, xs, d.x, 0, 0), tw = dt_make(ctx, 4, ws, d.w, 0, 0),
            tb = dt_make(ctx, 1, &cs, d.b, 0, 0), tbw = dt_make(ctx, 1, &cs, bn_w, 0, 0),
            tbb = dt_make(ctx, 1, &cs, bn_b, 0, 0), trm = dt_make(ctx, 1, &cs, rm, 0, 0),
            trv = dt_make(ctx, 1, &cs, rv, 0, 0), tsc = dt_make(ctx, 1, &cs, NULL, 0, 0),
            tsh = dt_make(ctx, 1, &cs, NULL, 0, 0), ty = dt_make(ctx, 4, ys, NULL, 0, 0),
            tconv = dt_make(ctx, 4, ys, NULL, 0, 0), tbn = dt_make(ctx, 4, ys, NULL, 0, 0),
            tref = dt_make(ctx, 4, ys, NULL, 0, 0);
    const float eps = 1e-3f;
    TH_OK(ctx, teeny_batchnorm_fold(ctx, tbw.t, tbb.t, trm.t, trv.t, eps, tsc.t, tsh.t));
    float *scale = th_read(tsc.t), *shift = th_read(tsh.t);
    double *conv = th_malloc(d.ny * sizeof *conv), *want = th_malloc(d.ny * sizeof *want);
    ref_conv2d_forward(c, d.xd, d.wd, NULL, conv, NULL);
    int OHW = out_h(c) * out_w(c);

    for (int act = TEENY_ACT_NONE; act <= TEENY_ACT_ERF; act++) { /* every teeny_act, default parameters */
        char what[64];
        /* BN-folded against the unfused device composition */
        th_poison(ty.t);
        TH_OK(ctx, teeny_conv2d_forward_fused(ctx, &p, tx.t, tw.t, NULL, tsc.t, tsh.t, (teeny_act)act, ty.t));
        TH_OK(ctx, teeny_conv2d_forward(ctx, &p, tx.t, tw.t, NULL, tconv.t));
        TH_OK(ctx, teeny_batchnorm_forward_infer(ctx, tconv.t, tbw.t, tbb.t, trm.t, trv.t, eps, tbn.t));
        TH_OK(ctx, teeny_activation_forward(ctx, (teeny_act)act, tbn.t, tref.t));
        float *got = th_read(ty.t), *ref = th_read(tref.t);
        ck_assert_msg(th_first_nonfinite(got, d.ny) < 0, "fused act %d: unwritten output; %s", act, repro);
        double e = th_nrms_f(got, ref, d.ny);
        ck_assert_msg(e <= TOL, "fused conv-BN act %d vs conv -> batchnorm -> activation: nrms %.3g; %s", act, e, repro);
        free(got);
        free(ref);

        /* bias, scale, shift in every NULL combination against the reference (all eight for the
         * activations the store computes, route.c's epilogue_act) */
        for (int m = 0; m < 8; m += act <= TEENY_ACT_SILU || act == TEENY_ACT_HARDSWISH ? 1 : 7) {
            int has_b = m & 1, has_sc = m & 2, has_sh = m & 4;
            for (size_t i = 0; i < d.ny; i++) {
                int co = (int)(i / (size_t)OHW % (size_t)C);
                double v = conv[i] * (has_sc ? scale[co] : 1.0) + (has_sh ? shift[co] : 0.0) + (has_b ? d.bd[co] : 0.0);
                want[i] = ref_act(act, v);
            }
            th_poison(ty.t);
            TH_OK(ctx, teeny_conv2d_forward_fused(ctx, &p, tx.t, tw.t, has_b ? tb.t : NULL, has_sc ? tsc.t : NULL,
                                                  has_sh ? tsh.t : NULL, (teeny_act)act, ty.t));
            snprintf(what, sizeof what, "fused act %d bias %d scale %d shift %d", act, has_b, !!has_sc, !!has_sh);
            expect_close(&ty, want, NULL, d.ny, what, repro);
        }
    }
    free(scale);
    free(shift);
    free(conv);
    free(want);
    free(bn_w);
    free(bn_b);
    free(rm);
    free(rv);
    dtensor *ts[] = {&tx, &tw, &tb, &tbw, &tbb, &trm, &trv, &tsc, &tsh, &ty, &tconv, &tbn, &tref};
    for (int i = 0; i < 13; i++)
        dt_free(ts[i]);
    data_free(&d);
}

START_TEST(test_conv2d_fused)
{
    static const ref_conv shapes[] = {
        {2, 8, 11, 10, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0},   /* GEMM */
        {2, 16, 8, 8, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0},    /* 1x1 plain GEMM, float4 stores */
        {2, 6, 9, 13, 12, 3, 3, 2, 1, 1, 1, 1, 1, 6, 0, 0},    /* depthwise x2 */
    };
    for (int i = 0; i < 3; i++)
        check_fused(&shapes[i], 400 + (uint64_t)i);
}
END_TEST

/* ---- the reference against finite differences ---- */

static double loss(const ref_conv *c, const double *x, const double *w, const double *b, const double *g, size_t ny)
{
    double *y = th_malloc(ny * sizeof *y), L = 0;
    ref_conv2d_forward(c, x, w, b, y, NULL);
    for (size_t i = 0; i < ny; i++)
        L += g[i] * y[i];
    free(y);
    return L;
}

START_TEST(test_conv2d_finite_differences)
{
    static const ref_conv shapes[] = {
        {2, 4, 5, 6, 4, 3, 2, 2, 1, 1, 1, 1, 2, 2, 0, 0},
        {1, 3, 6, 5, 6, 2, 3, 1, 2, 0, 2, 2, 1, 3, 0, 0},
    };
    for (int s = 0; s < 2; s++) {
        const ref_conv *c = &shapes[s];
        th_rng r = th_rng_make(31 + (uint64_t)s);
        size_t nx = ref_conv_x_numel(c), nw = ref_conv_w_numel(c), ny = ref_conv_y_numel(c), nb = (size_t)c->Cout;
        double *x = th_malloc(nx * sizeof *x), *w = th_malloc(nw * sizeof *w), *b = th_malloc(nb * sizeof *b),
               *g = th_malloc(ny * sizeof *g), *dx = th_malloc(nx * sizeof *dx), *dw = th_malloc(nw * sizeof *dw),
               *db = th_malloc(nb * sizeof *db);
        for (size_t i = 0; i < nx; i++)
            x[i] = th_normal(&r);
        for (size_t i = 0; i < nw; i++)
            w[i] = th_normal(&r);
        for (size_t i = 0; i < nb; i++)
            b[i] = th_normal(&r);
        for (size_t i = 0; i < ny; i++)
            g[i] = th_normal(&r);
        ref_conv2d_backward(c, x, w, g, dx, dw, db, NULL, NULL, NULL);
        double *params[3] = {x, w, b}, *grads[3] = {dx, dw, db};
        size_t counts[3] = {nx, nw, nb};
        const double h = 1e-5;
        for (int q = 0; q < 3; q++)
            for (size_t i = 0; i < counts[q]; i++) {
                double keep = params[q][i], lp, lm;
                params[q][i] = keep + h;
                lp = loss(c, x, w, b, g, ny);
                params[q][i] = keep - h;
                lm = loss(c, x, w, b, g, ny);
                params[q][i] = keep;
                double fd = (lp - lm) / (2 * h);
                ck_assert_msg(fabs(fd - grads[q][i]) <= 1e-6 * (1 + fabs(fd)),
                              "shape %d param %d[%zu]: analytic %.9g, finite difference %.9g", s, q, i, grads[q][i], fd);
            }
        void *hs[] = {x, w, b, g, dx, dw, db};
        for (int i = 0; i < 7; i++)
            free(hs[i]);
    }
}
END_TEST

/* ---- shape inference ---- */

START_TEST(test_conv2d_output_shape)
{
    static const struct {
        teeny_conv2d_params p;
        int64_t x[4], w[4], y[4];
    } cases[] = {
        {{{2, 2}, {3, 3}, {1, 1}, 1, {0, 0}}, {32, 3, 224, 224}, {64, 3, 7, 7}, {32, 64, 112, 112}},
        {{{1, 1}, {1, 1}, {1, 1}, 1, {0, 0}}, {32, 64, 56, 56}, {64, 64, 3, 3}, {32, 64, 56, 56}},
        {{{2, 1}, {0, 2}, {2, 3}, 4, {0, 0}}, {2, 8, 10, 9}, {12, 2, 3, 2}, {2, 12, 3, 10}},
        {{{3, 3}, {0, 0}, {1, 1}, 5, {0, 0}}, {1, 5, 3, 4}, {10, 1, 3, 4}, {1, 10, 1, 1}},
        /* ONNX's pads begin != end: H (10 + 1 + 0 - 3) / 2 + 1 = 5, W 9 + 0 + 3 - 2 + 1 = 11 */
        {{{2, 1}, {1, 0}, {1, 1}, 1, {-1, 3}}, {2, 8, 10, 9}, {12, 8, 3, 2}, {2, 12, 5, 11}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t y[4] = {0};
        TH_OK(NULL, teeny_conv2d_output_shape(&cases[i].p, cases[i].x, cases[i].w, y));
        ck_assert_msg(!memcmp(y, cases[i].y, sizeof y), "case %zu: [%lld, %lld, %lld, %lld]", i, (long long)y[0],
                      (long long)y[1], (long long)y[2], (long long)y[3]);
    }
    teeny_conv2d_params p = TEENY_CONV2D_PARAMS_INIT;
    int64_t x[4] = {1, 4, 5, 5}, w[4] = {2, 4, 3, 3}, y[4] = {-7, -7, -7, -7};
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv2d_output_shape(NULL, x, w, y));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv2d_output_shape(&p, NULL, w, y));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv2d_output_shape(&p, x, w, NULL));
    int64_t w6[4] = {2, 4, 6, 3};
    TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_conv2d_output_shape(&p, x, w6, y));
    ck_assert_msg(strstr(teeny_last_error(NULL), "smaller than the dilated kernel") != NULL, "%s",
                  teeny_last_error(NULL));
    p.dilation[1] = 3;
    TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_conv2d_output_shape(&p, x, w, y)); /* 3*(3-1)+1 = 7 > 5 */
    p.pad[1] = 1;
    TH_OK(NULL, teeny_conv2d_output_shape(&p, x, w, y)); /* 5 + 2 = 7: exactly one column */
    ck_assert(y[3] == 1 && y[2] == 3);
    p.pad_end_extra[0] = -2; /* pad 0 + (-2): a negative padding after */
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv2d_output_shape(&p, x, w, y));
    p.pad_end_extra[0] = 0;
    p.pad_end_extra[1] = -1; /* 5 + 1 + 0 = 6 < 7 */
    TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_conv2d_output_shape(&p, x, w, y));
    p.pad_end_extra[1] = 0;
    int64_t xbig[4] = {1 << 20, 1 << 10, 64, 64}, wbig[4] = {1 << 10, 1 << 10, 1, 1}, keep[4];
    memcpy(keep, y, sizeof keep);
    TH_STATUS(NULL, TEENY_ERR_RANGE, teeny_conv2d_output_shape(&p, xbig, wbig, y));
    ck_assert_msg(!memcmp(keep, y, sizeof keep), "y_shape written on failure");
}
END_TEST

/* The op table's infer slot: shapes, parameters, initializers. */
START_TEST(test_conv2d_infer)
{
    teeny_ctx *ctx = th_ctx();
    teeny__node_shapes s = {0};
    s.n_in = 1;
    s.in[0] = (teeny__shape){.ndim = 4, .shape = {8, 6, 20, 18}};
    s.attrs.conv2d = (teeny__conv2d_attrs){.stride = {2, 1}, .pad = {1, 0}, .dilation = {1, 2}, .groups = 3,
                                           .act = TEENY_ACT_RELU, .has_bias = 1, .out_channels = 9, .kernel_h = 3,
                                           .kernel_w = 4};
    TH_OK(ctx, teeny__ops[TEENY__OP_CONV2D].infer(ctx, &s));
    ck_assert(s.out.ndim == 4 && s.out.shape[0] == 8 && s.out.shape[1] == 9 && s.out.shape[2] == 10 &&
              s.out.shape[3] == 12);
    ck_assert(s.n_param == 2 && s.param[0].ndim == 4 && s.param[0].shape[0] == 9 && s.param[0].shape[1] == 2 &&
              s.param[0].shape[2] == 3 && s.param[0].shape[3] == 4);
    ck_assert(s.param[1].ndim == 1 && s.param[1].shape[0] == 9 && s.fan_in == 24);
    ck_assert(!strcmp(s.param_name[0], "weight") && !strcmp(s.param_name[1], "bias"));
    /* with an activation, training saves the pre-activation (y's shape) */
    ck_assert(s.n_state == 0 && s.n_saved == 1 && s.saved_needs_training);
    ck_assert(!memcmp(&s.saved[0], &s.out, sizeof s.out));
    s.attrs.conv2d.act = TEENY_ACT_NONE;
    s.attrs.conv2d.has_bias = 0;
    TH_OK(ctx, teeny__ops[TEENY__OP_CONV2D].infer(ctx, &s));
    ck_assert(s.n_param == 1 && s.n_saved == 0);
    s.attrs.conv2d.out_channels = 10; /* groups 3 does not divide 10 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny__ops[TEENY__OP_CONV2D].infer(ctx, &s));
    s.attrs.conv2d.out_channels = 0;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny__ops[TEENY__OP_CONV2D].infer(ctx, &s));
    s.attrs.conv2d.out_channels = 9;
    s.attrs.conv2d.has_bias = 2;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny__ops[TEENY__OP_CONV2D].infer(ctx, &s));
}
END_TEST

/* ---- errors: exact status, nothing modified ---- */

typedef struct {
    teeny_tensor *t;
    float *before;
} snap;

START_TEST(test_conv2d_errors)
{
    teeny_ctx *ctx = th_ctx(), *other = NULL;
    enum { B = 2, Ci = 4, H = 6, W = 5, Co = 6, G = 2, K = 3 };
    th_rng r = th_rng_make(9);
    int64_t xs[4] = {B, Ci, H, W}, ws[4] = {Co, Ci / G, K, K}, ys[4] = {B, Co, H, W}, cs = Co;
    int64_t x3[3] = {B, Ci, H * W}, w3[3] = {Co, Ci / G, K * K}, ys_bad[4] = {B, Co, H - 1, W}, c7 = Co + 1;
    int64_t ws_g[4] = {Co, Ci, K, K}, ws_big[4] = {Co, Ci / G, H + 3, K}, ws_co[4] = {Co + 1, Ci / G, K, K};
    float x[B * Ci * H * W], w[Co * (Ci / G) * K * K], v[Co], y[B * Co * H * W];
    th_fill_normal(&r, x, sizeof x / sizeof x[0], 0, 1);
    th_fill_normal(&r, w, sizeof w / sizeof w[0], 0, 1);
    th_fill_normal(&r, v, Co, 0, 1);
    th_fill_normal(&r, y, sizeof y / sizeof y[0], 0, 1);
    teeny_tensor *tx = th_tensor_from(ctx, 4, xs, x), *tw = th_tensor_from(ctx, 4, ws, w),
                 *tb = th_tensor_from(ctx, 1, &cs, v), *tsc = th_tensor_from(ctx, 1, &cs, v),
                 *tsh = th_tensor_from(ctx, 1, &cs, v), *ty = th_tensor_from(ctx, 4, ys, y),
                 *tdy = th_tensor_from(ctx, 4, ys, y), *tdx = th_tensor_from(ctx, 4, xs, x),
                 *tdw = th_tensor_from(ctx, 4, ws, w), *tdb = th_tensor_from(ctx, 1, &cs, v);
    teeny_tensor *tx3 = th_tensor(ctx, 3, x3), *tw3 = th_tensor(ctx, 3, w3), *tybad = th_tensor(ctx, 4, ys_bad),
                 *tb7 = th_tensor(ctx, 1, &c7), *twg = th_tensor(ctx, 4, ws_g), *twbig = th_tensor(ctx, 4, ws_big),
                 *twco = th_tensor(ctx, 4, ws_co), *ti = NULL, *tforeign = NULL, *ty_in_x = NULL;
    /* a y-shaped view overlapping x's storage */
    int64_t big = (int64_t)(sizeof y / sizeof y[0]) + 8;
    teeny_tensor *tbig = th_tensor(ctx, 1, &big);
    float *fill = th_malloc((size_t)big * sizeof(float));
    th_fill_normal(&r, fill, (size_t)big, 0, 1);
    TH_OK(ctx, teeny_tensor_write(tbig, fill, (size_t)big));
    free(fill);
    TH_OK(ctx, teeny_tensor_view(tbig, 4, 4, ys, &ty_in_x));
    teeny_tensor *tx_in_big = NULL, *tw_in_big = NULL, *tb_in_big = NULL;
    TH_OK(ctx, teeny_tensor_view(tbig, 0, 4, xs, &tx_in_big));
    TH_OK(ctx, teeny_tensor_view(tbig, 10, 4, ws, &tw_in_big));
    TH_OK(ctx, teeny_tensor_view(tbig, 2, 1, &cs, &tb_in_big));
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 4, xs, &ti));
    TH_OK(NULL, teeny_ctx_create(NULL, &other));
    TH_OK(other, teeny_tensor_create(other, 4, ws, &tforeign));
    snap s[11];
    teeny_tensor *watched[11] = {tx, tw, tb, tsc, tsh, ty, tdy, tdx, tdw, tdb, tbig};
    for (int i = 0; i < 11; i++) {
        s[i].t = watched[i];
        s[i].before = th_read(watched[i]);
    }
    teeny_conv2d_params p = TEENY_CONV2D_PARAMS_INIT, q;
    p.pad[0] = p.pad[1] = 1;
    p.groups = G;
#define FWD(P, X, Wt, Bi, Y) teeny_conv2d_forward(ctx, P, X, Wt, Bi, Y)
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv2d_forward(NULL, &p, tx, tw, tb, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(NULL, tx, tw, tb, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&p, NULL, tw, tb, ty));
    ck_assert_msg(strstr(teeny_last_error(ctx), "x is NULL") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&p, tx, NULL, tb, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&p, tx, tw, tb, NULL));
    q = p, q.stride[0] = 0;
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&q, tx, tw, tb, ty));
    ck_assert_msg(strstr(teeny_last_error(ctx), "stride") != NULL, "message: %s", teeny_last_error(ctx));
    q = p, q.stride[1] = -2;
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&q, tx, tw, tb, ty));
    q = p, q.dilation[1] = 0;
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&q, tx, tw, tb, ty));
    q = p, q.pad[0] = -1;
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&q, tx, tw, tb, ty));
    q = p, q.groups = 0;
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&q, tx, tw, tb, ty));
    q = p, q.groups = 3; /* does not divide Cin = 4 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&q, tx, tw, tb, ty));
    ck_assert_msg(strstr(teeny_last_error(ctx), "groups 3") != NULL, "message: %s", teeny_last_error(ctx));
    q = p, q.groups = 4; /* divides Cin 4, not Cout 6 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&q, tx, tw, tb, ty));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&p, tx, twg, tb, ty)); /* weight has Cin, not Cin/groups */
    ck_assert_msg(strstr(teeny_last_error(ctx), "input channels per group") != NULL, "message: %s",
                  teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&p, tx, twco, tb, ty));   /* Cout 7 not divisible by 2 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&p, tx3, tw, tb, ty));    /* x rank 3 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&p, tx, tw3, tb, ty));    /* weight rank 3 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&p, tx, tw, tb, tybad));  /* y shape */
    ck_assert_msg(strstr(teeny_last_error(ctx), "y has shape [2, 6, 5, 5]") != NULL, "message: %s",
                  teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&p, tx, tw, tb7, ty));    /* bias numel */
    ck_assert_msg(strstr(teeny_last_error(ctx), "bias") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&p, tx, twbig, tb, ty));  /* kernel taller than padded input */
    q = p, q.pad[0] = 1 << 29, q.stride[0] = 1 << 29;             /* indices past int32 */
    TH_STATUS(ctx, TEENY_ERR_RANGE, FWD(&q, tx, tw, tb, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&p, ti, tw, tb, ty));       /* int32 */
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&p, tx, tforeign, tb, ty)); /* other context */
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&p, tx_in_big, tw, tb, ty_in_x)); /* y overlaps x */
    ck_assert_msg(strstr(teeny_last_error(ctx), "overlaps") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_ARG,
              teeny_conv2d_forward_fused(ctx, &p, tx, tw, tb, tsc, tsh, (teeny_act)TEENY__ACT_COUNT, ty));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_conv2d_forward_fused(ctx, &p, tx, tw, tb, tb7, tsh, TEENY_ACT_SILU, ty));
    ck_assert_msg(strstr(teeny_last_error(ctx), "scale") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_conv2d_forward_fused(ctx, &p, tx, tw, tb, tsc, tb7, TEENY_ACT_SILU, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_conv2d_forward_fused(ctx, &p, tx, tw, tb, tsc, tsh, TEENY_ACT_SILU, NULL));
    /* backward */
#define BWD(P, Dy, Dx, Dw, Db) teeny_conv2d_backward(ctx, P, tx, tw, Dy, Dx, Dw, Db)
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv2d_backward(NULL, &p, tx, tw, tdy, tdx, tdw, tdb));
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(&p, NULL, tdx, tdw, tdb));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(&p, tybad, tdx, tdw, tdb));
    ck_assert_msg(strstr(teeny_last_error(ctx), "dy") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(&p, tdy, tdy, tdw, tdb));  /* dx shaped like y */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(&p, tdy, tdx, twg, tdb));  /* dw shape */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(&p, tdy, tdx, tdw, tb7));  /* dbias numel */
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(&p, tdy, tx, tdw, tdb));     /* dx is x */
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(&p, tdy, tdx, tw, tdb));     /* dw is w */
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(&p, tdy, tx_in_big, tw_in_big, NULL)); /* dw overlaps dx */
    q = p, q.dilation[0] = -1;
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(&q, tdy, tdx, tdw, tdb));
    q = p, q.groups = 4;
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(&q, tdy, tdx, tdw, tdb));
    q = p, q.pad[1] = 1 << 29, q.stride[1] = 1 << 29;
    TH_STATUS(ctx, TEENY_ERR_RANGE, BWD(&q, tdy, tdx, tdw, tdb));
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(&p, tdy, tx_in_big, NULL, tb_in_big)); /* dbias inside dx */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_conv2d_backward(ctx, &p, tx, tw, ty_in_x, tx_in_big, NULL, NULL));
    TH_OK(ctx, teeny_ctx_finish(ctx));
#undef FWD
#undef BWD
    for (int i = 0; i < 11; i++) {
        teeny_tensor *t = s[i].t;
        float *now = th_read(t);
        ck_assert_msg(!memcmp(now, s[i].before, (size_t)teeny_tensor_numel(t) * sizeof(float)),
                      "a rejected conv2d call modified tensor %d", i);
        free(now);
        free(s[i].before);
    }
    /* the same arguments, corrected, are accepted */
    TH_OK(ctx, teeny_conv2d_forward_fused(ctx, &p, tx, tw, tb, tsc, tsh, TEENY_ACT_SILU, ty));
    TH_OK(ctx, teeny_conv2d_backward(ctx, &p, tx, tw, tdy, tdx, tdw, tdb));
    TH_OK(ctx, teeny_ctx_finish(ctx));
    teeny_tensor *ts[] = {tx,    tw,   tb,    tsc,   tsh,   ty,  tdy,      tdx,     tdw,      tdb,     tx3,
                          tw3,   tybad, tb7,  twg,   twbig, twco, ti,      tforeign, ty_in_x, tx_in_big, tbig, tw_in_big, tb_in_big};
    for (int i = 0; i < 24; i++)
        teeny_tensor_destroy(ts[i]);
    teeny_ctx_destroy(other);
}
END_TEST

Suite *suite_conv2d(void)
{
    Suite *s = suite_create("conv2d");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    TCase *emu = tcase_create("tf32_emulated");
    tcase_add_loop_test(fwd, test_conv2d_forward_sweep, 0, sweep_count());
    tcase_add_loop_test(bwd, test_conv2d_backward_sweep, 0, sweep_count());
    tcase_add_test(fwd, test_conv2d_fused);
    tcase_add_test(fwd, test_conv2d_output_shape);
    tcase_add_test(fwd, test_conv2d_infer);
    tcase_add_test(fwd, test_conv2d_tile_pick);
    tcase_add_test(fwd, test_conv2d_tile_pick_tf32);
    tcase_add_test(bwd, test_conv2d_finite_differences);
    tcase_add_test(bwd, test_conv2d_backward_workspace);
    tcase_add_test(bwd, test_conv2d_depthwise_dx_route);
    tcase_add_test(fwd, test_conv2d_depthwise_strips);
    tcase_add_test(bwd, test_conv2d_depthwise_cols);
    tcase_add_test(bwd, test_conv2d_depthwise_dw_strips);
    tcase_add_test(bwd, test_conv2d_depthwise_bwd3);
    tcase_add_test(bwd, test_conv2d_tf32);
    tcase_add_test(bwd, test_conv2d_split_loops);
    tcase_add_test(bwd, test_conv2d_dx_phases);
    tcase_add_test(bwd, test_conv2d_dx_direct);
    tcase_add_test(bwd, test_conv2d_split_loops_cpu);
    tcase_add_test(bwd, test_conv2d_cpu_px);
    tcase_add_test(fwd, test_conv2d_dw_band);
    if (!th_small()) {
        tcase_add_loop_test(fwd, test_conv2d_large, 0, N_LARGE);
        int rows[16];
        tcase_add_loop_test(fwd, test_conv2d_tiles, 0, distinct_conv_rows(rows, 16));
        tcase_add_test(fwd, test_conv2d_depthwise_fallback);
        tcase_add_test(bwd, test_conv2d_determinism);
    }
    tcase_add_test(err, test_conv2d_errors);
    tcase_add_test(emu, test_conv2d_tf32_emulated);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    suite_add_tcase(s, emu);
    return s;
}
