/*
 * test_conv2d_wino.c -- the Winograd F(2x2, 3x3) path of 3x3 stride-1
 * dense convolutions (src/ops/conv2d/winograd.c, cl/winograd.cl), forced on
 * through its test hook wherever the geometry allows it: forward
 * (with a bias on views at odd offsets, and the fused scale/shift/SiLU
 * epilogue), the input gradient and the weight gradient (with the bias
 * gradient beside it) against the float64 reference over
 * channels 16/33/64, sizes 1x1 to 28x28, pads 0-2 (also asymmetric and
 * with extra padding at the end), batches 1 and 3 (tile counts not a
 * multiple of 4); on this device's GEMMs and on the NVIDIA profile's
 * tiled ones; passes over part of the batch under a small workspace cap
 * (the weight gradient then on the GEMM path: it takes every image in
 * one pass); the route (taken where it should be, not for stride 2,
 * groups 2, dilation 2, 5x5, 1x1 or pad 3, nor by default outside the
 * NVIDIA profile or below its size and channel thresholds); a training
 * step through the graph executor's recorded plans against the GEMM
 * path; and determinism.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_data.h"
#include "harness.h"
#include "internal.h"
#include "ops/ops.h"
#include "ref/conv2d_ref.h"

/* Normalized RMS error bound. F(2x2, 3x3) adds the transforms' roundings
 * to the direct sum's: each output is A^T (sum over channels of U V) A
 * with U, V and A's terms sums of 2-4 inputs each, a few more fp32
 * roundings per term than the implicit GEMM. Measured on PoCL 3.1
 * (2026-12-02) over these cases: at most 3.1e-7 (the implicit GEMM on the
 * same cases: 4.3e-7). 2e-6 leaves a 6x margin and is 4 orders below a
 * broken transform: a G entry of 0.49 for 0.5 gave 7e-3 to 1.3e-2, a B^T
 * entry's sign flipped 1.1 (each checked once through TEENY_KERNEL_DIR,
 * every case failing). */
#define TOL_WINO 2e-6
/* The weight gradient sums over B*OH*OW positions (8192 in the largest
 * case), so its rounding grows with them on every path: on PoCL 3.1
 * (2026-12-03) at most 1.38e-6 by Winograd, and 1.66e-6 by the implicit
 * GEMM on the same 2 x 16 x 64 x 64 case (the route tests run both).
 * 5e-6 leaves a 3x margin over either and is 3 orders below a broken
 * transform (a G^T entry of 0.49 for 0.5: 1.2e-2 to 2e-2; an A sign
 * flipped: about 1; each checked once through TEENY_KERNEL_DIR). */
#define TOL_WINO_DW 5e-6
/* F(4x4, 3x3)'s transforms have larger entries (B^T's 4 and 5, A^T's 8,
 * G's 1/24), so more rounding: measured on PoCL 3.1 (2026-12-03) at most
 * 1.33e-6 (y) and 1.79e-6 (dx) over these cases. 1e-5, the implicit
 * GEMM tests' bound, leaves a 5x margin and is 2-5 orders below a broken
 * transform (a G entry of 1/25 for 1/24: 3.8e-3 and up; a B^T or A^T
 * sign flipped: 0.31 and up; each checked once through TEENY_KERNEL_DIR). */
#define TOL_WINO4 1e-5
/* A tf32 GEMM's bound (test_conv2d.c's TOL_TF32, the issue's). */
#define TOL_TF32 1e-3
/* check_case's bounds where a test sets them (> 0): the forward and input
 * gradient's, the weight gradient's. */
static double tol_y_set, tol_dw_set;

#define WINO_FORCE 1 /* the test hook CONV_WINO's values (src/core/test_hooks.def) */
#define WINO_NEVER (-1)
#define WINO_PROFILE 0

typedef struct {
    int B, C, K, H, W, ph, pw, peh, pew;
} wino_case;

static const wino_case cases[] = {
    {1, 16, 16, 1, 1, 1, 1, 0, 0},   {3, 16, 33, 2, 2, 1, 1, 0, 0},  {1, 33, 16, 5, 7, 0, 0, 0, 0},
    {3, 33, 64, 5, 7, 2, 2, 0, 0},   {1, 64, 33, 13, 9, 1, 2, 0, 0}, {3, 16, 64, 13, 9, 2, 0, 0, 0},
    {1, 64, 64, 28, 28, 1, 1, 0, 0}, {3, 33, 33, 28, 28, 0, 1, 0, 0}, {3, 16, 16, 13, 9, 1, 1, 1, 0},
    {1, 33, 16, 5, 7, 0, 2, 2, 1},   {3, 64, 16, 2, 2, 2, 2, 0, 0},  {1, 16, 33, 1, 1, 2, 1, 0, 0},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static ref_conv ref_of(const wino_case *k, int stride, int dil, int groups, int ksize)
{
    ref_conv c = {k->B, k->C, k->H, k->W, k->K, ksize, ksize, stride, stride, k->ph, k->pw, dil, dil, groups,
                  k->peh, k->pew};
    return c;
}

static teeny_conv2d_params params_of(const ref_conv *c)
{
    teeny_conv2d_params p = {{c->sh, c->sw}, {c->ph, c->pw}, {c->dh, c->dw}, c->G, {c->peh, c->pew}};
    return p;
}

static void repro_of(const ref_conv *c, uint64_t seed, char *buf, size_t cap)
{
    snprintf(buf, cap, "x [%d, %d, %d, %d] w [%d, %d, %d, %d] stride %d pad (%d, %d) end (%d, %d) dilation %d "
             "groups %d profile %s seed %llu", c->B, c->Cin, c->H, c->W, c->Cout, c->Cin / c->G, c->KH, c->KW, c->sh,
             c->ph, c->pw, c->peh, c->pew, c->dh, c->G, th_ctx()->tune.profile->name, (unsigned long long)seed);
}

/* Every element written, within tol of the reference, nothing outside a
 * view touched. */
static void expect_near(const th_dev *t, const double *ref, size_t n, double tol, const char *what,
                        const char *repro)
{
    float *out = th_read(t->t);
    long bad = th_first_nonfinite(out, n);
    ck_assert_msg(bad < 0, "%s: element %ld not written or not finite; %s", what, bad, repro);
    double e = th_nrms(out, ref, n);
    ck_assert_msg(e <= tol, "%s: nrms %.3g > %.1g; %s", what, e, tol, repro);
    free(out);
    th_dev_check_guard(t, what, repro);
}

static void expect_close(const th_dev *t, const double *ref, size_t n, const char *what, const char *repro)
{
    expect_near(t, ref, n, TOL_WINO, what, repro);
}

/* Forward (with a bias), input, weight and bias gradients of c, every
 * tensor a view at an odd offset where view is set; how many passes took
 * Winograd. */
static int check_case(const ref_conv *c, uint64_t seed, int view)
{
    teeny_ctx *ctx = th_ctx();
    char repro[320];
    conv_data d;
    repro_of(c, seed, repro, sizeof repro);
    th_rng r = th_rng_make(seed);
    data_make(&d, c, &r);
    int64_t xs[4] = {c->B, c->Cin, c->H, c->W}, ws[4] = {c->Cout, c->Cin / c->G, c->KH, c->KW},
            ys[4] = {c->B, c->Cout, ref_conv_oh(c), ref_conv_ow(c)}, bs = c->Cout;
    th_dev tx = th_dev_make(ctx, 0, 4, xs, view ? 1 : 0, d.x), tw = th_dev_make(ctx, 0, 4, ws, view ? 3 : 0, d.w),
           tb = th_dev_make(ctx, 0, 1, &bs, view ? 5 : 0, d.b), ty = th_dev_make(ctx, 0, 4, ys, view ? 7 : 0, NULL),
           tdy = th_dev_make(ctx, 0, 4, ys, view ? 9 : 0, d.dy), tdx = th_dev_make(ctx, 0, 4, xs, view ? 11 : 0, NULL),
           tdw = th_dev_make(ctx, 0, 4, ws, view ? 13 : 0, NULL), tdb = th_dev_make(ctx, 0, 1, &bs, view ? 15 : 0, NULL);
    teeny_conv2d_params p = params_of(c);
    double *y = th_malloc(d.ny * sizeof *y), *dx = th_malloc(d.nx * sizeof *dx), *dw = th_malloc(d.nw * sizeof *dw),
           *db = th_malloc((size_t)c->Cout * sizeof *db);
    int before = th_hook_value(TEENY__HOOK_CONV_WINO_TAKEN);
    TH_OK(ctx, teeny_conv2d_forward(ctx, &p, tx.t, tw.t, tb.t, ty.t));
    TH_OK(ctx, teeny_conv2d_backward(ctx, &p, tx.t, tw.t, tdy.t, tdx.t, tdw.t, tdb.t));
    int taken = th_hook_value(TEENY__HOOK_CONV_WINO_TAKEN) - before;
    ref_conv2d_forward(c, d.xd, d.wd, d.bd, y, NULL);
    ref_conv2d_backward(c, d.xd, d.wd, d.dyd, dx, dw, db, NULL, NULL, NULL);
    double tol = tol_y_set > 0 ? tol_y_set : th_ctx()->tune.conv.wino == 4 ? TOL_WINO4 : TOL_WINO;
    expect_near(&ty, y, d.ny, tol, "y", repro);
    expect_near(&tdx, dx, d.nx, tol, "dx", repro);
    expect_near(&tdw, dw, d.nw, tol_dw_set > 0 ? tol_dw_set : TOL_WINO_DW, "dw", repro);
    expect_close(&tdb, db, (size_t)c->Cout, "db", repro);
    free(y);
    free(dx);
    free(dw);
    free(db);
    th_dev *ts[] = {&tx, &tw, &tb, &ty, &tdy, &tdx, &tdw, &tdb};
    for (int i = 0; i < 8; i++)
        th_dev_free(ts[i]);
    data_free(&d);
    return taken;
}

/* Case _i on this device's GEMMs, forced: all three passes take Winograd,
 * the forward and input gradient by F(2x2, 3x3) and by F(4x4, 3x3). */
START_TEST(test_conv2d_wino_cases)
{
    ref_conv c = ref_of(&cases[_i], 1, 1, 1, 3);
    th_hook(TEENY__HOOK_CONV_WINO, WINO_FORCE);
    for (int m = 2; m <= 4; m += 2) {
        th_ctx()->tune.conv.wino = m;
        ck_assert_int_eq(check_case(&c, 900 + (uint64_t)_i, _i % 2), 3);
    }
}
END_TEST

/* The same on the NVIDIA profile's tiled GEMMs (conv_gemm_1x1 over 16
 * groups, float4 loads and stores along the tiles), where the device
 * holds its work-groups; there the route needs no forcing on a large
 * enough problem. */
START_TEST(test_conv2d_wino_nvidia)
{
    if (!th_profile("nvidia"))
        th_skip("this device cannot hold the nvidia profile's work-groups or local memory");
    th_hook(TEENY__HOOK_CONV_WINO, WINO_FORCE);
    for (int i = 0; i < N_CASES; i += th_full() ? 1 : 3) {
        ref_conv c = ref_of(&cases[i], 1, 1, 1, 3);
        th_ctx()->tune.conv.wino = 2 + 2 * (i % 2); /* F(2x2) and F(4x4) in turn */
        ck_assert_int_eq(check_case(&c, 950 + (uint64_t)i, 1), 3);
    }
    th_profile("nvidia");
    /* by the profile: 2 x 32 x 32 = 2048 output tiles each way; the weight
     * gradient where the channels reach the profile's wino_dw (set here to
     * this case's 16, the NVIDIA row's being larger) */
    th_hook(TEENY__HOOK_CONV_WINO, WINO_PROFILE);
    wino_case big = {2, 16, 16, 64, 64, 1, 1, 0, 0};
    ref_conv c = ref_of(&big, 1, 1, 1, 3);
    th_ctx()->tune.conv.wino_dw = 16;
    ck_assert_int_eq(check_case(&c, 990, 0), 3);
    th_profile(NULL);
}
END_TEST

/* Under a workspace cap of one or two images a pass (B = 3: passes of 1,
 * or of 2 and 1) the offsets of every pass, the weight gradient on the
 * GEMM path; under a cap of three F(2x2) images, all three passes; under
 * a cap below one image, the GEMM path. For F(2x2, 3x3) and F(4x4, 3x3)
 * (the weight gradient's F(2x2) then does not fit). */
START_TEST(test_conv2d_wino_passes)
{
    wino_case k = {3, 33, 16, 13, 9, 1, 1, 0, 0};
    ref_conv c = ref_of(&k, 1, 1, 1, 3);
    for (int m = 2; m <= 4; m += 2) {
        /* floats of U and of one image's V and M: n_e (C K + (C + K) tiles), 7 x 5 tiles or 4 x 3 */
        int64_t n_e = (m + 2) * (m + 2), tiles = (13 + m - 1) / m * ((9 + m - 1) / m);
        int64_t u = n_e * 33 * 16, image = n_e * (33 + 16) * tiles, pad = n_e * (33 + 16) * 3;
        for (int per = 1; per <= (m == 2 ? 3 : 2); per++) {
            th_hook(TEENY__HOOK_CONV_WINO, WINO_FORCE);
            th_hook(TEENY__HOOK_CONV_WINO_CAP, (u + pad + per * image) * (int64_t)sizeof(float));
            th_ctx()->tune.conv.wino = m;
            ck_assert_int_eq(check_case(&c, 960 + (uint64_t)per, per == 2), per < 3 ? 2 : 3);
        }
        th_hook(TEENY__HOOK_CONV_WINO, WINO_FORCE);
        th_hook(TEENY__HOOK_CONV_WINO_CAP, (u + pad + image / 2) * (int64_t)sizeof(float));
        ck_assert_int_eq(check_case(&c, 963, 0), 0);
    }
}
END_TEST

/* Geometry Winograd does not cover runs the other paths even when
 * forced; without forcing, this device's profile decides (only NVIDIA's
 * asks for it, from 256 2x2 output tiles and 16 channels each way, its
 * wino_dw channels for the weight gradient), and mode WINO_NEVER
 * overrides every profile. */
START_TEST(test_conv2d_wino_route)
{
    wino_case k = {1, 16, 16, 9, 9, 1, 1, 0, 0};
    static const struct {
        int stride, dil, groups, ksize;
    } other[] = {{2, 1, 1, 3}, {1, 2, 1, 3}, {1, 1, 2, 3}, {1, 1, 1, 5}, {1, 1, 1, 1}};
    th_hook(TEENY__HOOK_CONV_WINO, WINO_FORCE);
    for (int i = 0; i < (int)(sizeof other / sizeof other[0]); i++) {
        ref_conv c = ref_of(&k, other[i].stride, other[i].dil, other[i].groups, other[i].ksize);
        ck_assert_int_eq(check_case(&c, 970 + (uint64_t)i, 0), 0);
    }
    wino_case wide = {1, 16, 16, 9, 9, 3, 3, 0, 0}; /* pad 3: the input gradient's would be -1 */
    ref_conv c = ref_of(&wide, 1, 1, 1, 3);
    ck_assert_int_eq(check_case(&c, 976, 0), 0);
    th_hook(TEENY__HOOK_CONV_WINO, WINO_PROFILE);
    wino_case big = {2, 16, 16, 64, 64, 1, 1, 0, 0};
    c = ref_of(&big, 1, 1, 1, 3);
    const teeny__conv_tune *tu = &th_ctx()->tune.conv;
    ck_assert_int_eq(check_case(&c, 977, 0), (tu->wino ? 2 : 0) + (tu->wino_dw > 0 && tu->wino_dw <= 16));
    th_hook(TEENY__HOOK_CONV_WINO, WINO_NEVER);
    ck_assert_int_eq(check_case(&c, 978, 0), 0);
    if (th_profile("nvidia")) {
        th_hook(TEENY__HOOK_CONV_WINO, WINO_PROFILE);
        int dw_16 = th_ctx()->tune.conv.wino_dw > 0 && th_ctx()->tune.conv.wino_dw <= 16; /* TEENY_CONV_WINO_DW */
        ck_assert_int_eq(check_case(&c, 979, 0), 2 + dw_16);
        th_ctx()->tune.conv.wino_dw = 17; /* the weight gradient's threshold, either side */
        ck_assert_int_eq(check_case(&c, 984, 0), 2);
        th_ctx()->tune.conv.wino_dw = 16;
        ck_assert_int_eq(check_case(&c, 985, 0), 3);
        ref_conv few_tiles = ref_of(&k, 1, 1, 1, 3); /* 5 x 5 tiles */
        ck_assert_int_eq(check_case(&few_tiles, 982, 0), 0);
        wino_case at = {1, 16, 16, 31, 32, 1, 1, 0, 0}, below = {1, 16, 16, 30, 32, 1, 1, 0, 0};
        ref_conv at_least = ref_of(&at, 1, 1, 1, 3), too_few = ref_of(&below, 1, 1, 1, 3); /* 16 x 16, 15 x 16 */
        ck_assert_int_eq(check_case(&at_least, 986, 0), 3); /* wino_dw 16 still */
        ck_assert_int_eq(check_case(&too_few, 987, 0), 0);
        wino_case thin = {2, 8, 16, 64, 64, 1, 1, 0, 0}; /* 8 input channels: no pass */
        ref_conv few_channels = ref_of(&thin, 1, 1, 1, 3);
        ck_assert_int_eq(check_case(&few_channels, 983, 0), 0);
        th_hook(TEENY__HOOK_CONV_WINO, WINO_NEVER);
        ck_assert_int_eq(check_case(&c, 979, 0), 0);
        th_profile(NULL);
    }
}
END_TEST

/* With tf32 (the nvidia profile's tf32 tiles, emulated), the forward and
 * input gradient take Winograd where their tf32 GEMM would leave compute
 * units idle (2 x 64 x 64 rows over 16 channels: 64 work-groups of
 * 128 x 128, against 132 units) and run the fp32 tuning's GEMMs there:
 * y and dx within fp32 Winograd's bound, which a tf32 GEMM misses by
 * orders; with as many units as work-groups, the tf32 GEMM. The weight
 * gradient takes the tf32 GEMM either way. */
START_TEST(test_conv2d_wino_tf32)
{
    teeny_ctx *ctx = th_ctx();
    if (!th_profile("nvidia"))
        th_skip("this device cannot hold the nvidia profile's work-groups or local memory");
    th_hook(TEENY__HOOK_CONV_TF32_EMULATE, 1);
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    th_hook(TEENY__HOOK_CONV_WINO, WINO_PROFILE);
    wino_case big = {2, 16, 16, 64, 64, 1, 1, 0, 0};
    ref_conv c = ref_of(&big, 1, 1, 1, 3);
    tol_dw_set = TOL_TF32;
    th_compute_units(132);
    ck_assert_int_eq(check_case(&c, 991, 1), 2);
    th_compute_units(64);
    tol_y_set = TOL_TF32;
    ck_assert_int_eq(check_case(&c, 992, 0), 0);
    tol_y_set = tol_dw_set = 0;
    th_compute_units(0);
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    th_hook(TEENY__HOOK_CONV_TF32_EMULATE, 0);
    th_profile(NULL);
}
END_TEST

/* The fused epilogue y = act(conv * scale + shift + bias) through
 * wino_output: bias, scale and shift, SiLU. */
START_TEST(test_conv2d_wino_fused)
{
    teeny_ctx *ctx = th_ctx();
    wino_case k = {3, 33, 16, 13, 9, 1, 2, 0, 0};
    ref_conv c = ref_of(&k, 1, 1, 1, 3);
    char repro[320];
    conv_data d;
    repro_of(&c, 980, repro, sizeof repro);
    th_rng r0 = th_rng_make(980), r = th_rng_make(981);
    data_make(&d, &c, &r0);
    float *sc = th_malloc((size_t)c.Cout * sizeof(float)), *sh = th_malloc((size_t)c.Cout * sizeof(float));
    th_fill_uniform(&r, sc, (size_t)c.Cout, 0.5, 2);
    th_fill_uniform(&r, sh, (size_t)c.Cout, -1, 1);
    int64_t xs[4] = {c.B, c.Cin, c.H, c.W}, ws[4] = {c.Cout, c.Cin, 3, 3},
            ys[4] = {c.B, c.Cout, ref_conv_oh(&c), ref_conv_ow(&c)}, cs = c.Cout;
    th_dev tx = th_dev_make(ctx, 0, 4, xs, 1, d.x), tw = th_dev_make(ctx, 0, 4, ws, 0, d.w),
           tb = th_dev_make(ctx, 0, 1, &cs, 0, d.b), tsc = th_dev_make(ctx, 0, 1, &cs, 0, sc),
           tsh = th_dev_make(ctx, 0, 1, &cs, 3, sh), ty = th_dev_make(ctx, 0, 4, ys, 5, NULL);
    teeny_conv2d_params p = params_of(&c);
    double *y = th_malloc(d.ny * sizeof *y);
    ref_conv2d_forward(&c, d.xd, d.wd, NULL, y, NULL);
    size_t plane = (size_t)ys[2] * (size_t)ys[3];
    for (size_t i = 0; i < d.ny; i++) {
        int co = (int)(i / plane % (size_t)c.Cout);
        double v = y[i] * sc[co] + sh[co] + d.bd[co];
        y[i] = v / (1.0 + exp(-v));
    }
    for (int m = 2; m <= 4; m += 2) { /* F(2x2, 3x3), F(4x4, 3x3) */
        th_hook(TEENY__HOOK_CONV_WINO, WINO_FORCE);
        th_ctx()->tune.conv.wino = m;
        th_poison(ty.t);
        TH_OK(ctx, teeny_conv2d_forward_fused(ctx, &p, tx.t, tw.t, tb.t, tsc.t, tsh.t, TEENY_ACT_SILU, ty.t));
        ck_assert_int_eq(th_hook_value(TEENY__HOOK_CONV_WINO_TAKEN), 1);
        expect_near(&ty, y, d.ny, m == 4 ? TOL_WINO4 : TOL_WINO, "fused y", repro);
    }
    free(y);
    free(sc);
    free(sh);
    th_dev *ts[] = {&tx, &tw, &tb, &tsc, &tsh, &ty};
    for (int i = 0; i < 6; i++)
        th_dev_free(ts[i]);
    data_free(&d);
}
END_TEST

/* The same inputs give the same bits, forward, input and weight
 * gradients. */
START_TEST(test_conv2d_wino_determinism)
{
    teeny_ctx *ctx = th_ctx();
    wino_case k = {3, 33, 16, 13, 9, 1, 1, 0, 0};
    ref_conv c = ref_of(&k, 1, 1, 1, 3);
    conv_data d;
    th_rng r = th_rng_make(985);
    data_make(&d, &c, &r);
    int64_t xs[4] = {c.B, c.Cin, c.H, c.W}, ws[4] = {c.Cout, c.Cin, 3, 3},
            ys[4] = {c.B, c.Cout, ref_conv_oh(&c), ref_conv_ow(&c)};
    teeny_tensor *tx = th_tensor_from(ctx, 4, xs, d.x), *tw = th_tensor_from(ctx, 4, ws, d.w),
                 *tdy = th_tensor_from(ctx, 4, ys, d.dy);
    teeny_conv2d_params p = params_of(&c);
    th_hook(TEENY__HOOK_CONV_WINO, WINO_FORCE);
    float *out[2][3];
    for (int run = 0; run < 2; run++) {
        teeny_tensor *ty = th_tensor(ctx, 4, ys), *tdx = th_tensor(ctx, 4, xs), *tdw = th_tensor(ctx, 4, ws);
        th_poison(ty);
        th_poison(tdx);
        th_poison(tdw);
        TH_OK(ctx, teeny_conv2d_forward(ctx, &p, tx, tw, NULL, ty));
        TH_OK(ctx, teeny_conv2d_backward(ctx, &p, tx, tw, tdy, tdx, tdw, NULL));
        out[run][0] = th_read(ty);
        out[run][1] = th_read(tdx);
        out[run][2] = th_read(tdw);
        teeny_tensor_destroy(ty);
        teeny_tensor_destroy(tdx);
        teeny_tensor_destroy(tdw);
    }
    ck_assert_int_eq(th_hook_value(TEENY__HOOK_CONV_WINO_TAKEN), 6);
    size_t n[3] = {d.ny, d.nx, d.nw};
    for (int j = 0; j < 3; j++) {
        ck_assert_msg(th_first_nonfinite(out[0][j], n[j]) < 0, "output %d not written", j);
        ck_assert_msg(!memcmp(out[0][j], out[1][j], n[j] * sizeof(float)), "output %d differs between runs", j);
        free(out[0][j]);
        free(out[1][j]);
    }
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(tw);
    teeny_tensor_destroy(tdy);
    data_free(&d);
}
END_TEST

/* Through the graph executor (recorded plans, their own workspace): x ->
 * conv 3x3 16->16 -> conv 3x3 16->16 -> global pool -> linear -> loss,
 * one forward and backward with Winograd forced (F(2x2) and F(4x4): both
 * forwards, the second conv's input gradient, both weight gradients) and
 * never; the loss and every parameter gradient agree. */
static void graph_step(int mode, int m, const float *x, size_t nx, const int32_t *lab, int B, float **vals,
                       float *loss, float **grads, size_t *sizes, int *np)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node n, l, y;
    teeny_conv2d_params cp = TEENY_CONV2D_PARAMS_INIT;
    int64_t xs[4] = {-1, 16, 9, 7};
    cp.pad[0] = cp.pad[1] = 1;
    th_hook(TEENY__HOOK_CONV_WINO, mode);
    th_ctx()->tune.conv.wino = m;
    TH_OK(ctx, teeny_graph_create(ctx, 3, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 4, xs, &n));
    TH_OK(ctx, teeny_graph_conv2d(g, "c1", n, 16, 3, 3, &cp, 0, &n));
    TH_OK(ctx, teeny_graph_conv2d(g, "c2", n, 16, 3, 3, &cp, 1, &n));
    TH_OK(ctx, teeny_graph_global_avgpool(g, "gap", n, &n));
    TH_OK(ctx, teeny_graph_linear(g, "fc", n, 4, 1, &l));
    TH_OK(ctx, teeny_graph_labels(g, "y", &y));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", l, y, &l));
    *np = th_plan_step(g, l, x, nx, lab, B, vals, loss, grads, sizes, NULL);
    teeny_graph_destroy(g);
}

START_TEST(test_conv2d_wino_graph)
{
    enum { B = 2, NX = B * 16 * 9 * 7, NP = 8 };
    th_rng r = th_rng_make(995);
    static float x[NX];
    int32_t lab[B] = {1, 3};
    th_fill_normal(&r, x, NX, 0.0, 1.0);
    float *vals[NP] = {0}, *ref[NP] = {0}, loss_ref, loss;
    size_t sizes[NP];
    int np_ref, np;
    graph_step(WINO_NEVER, 2, x, NX, lab, B, vals, &loss_ref, ref, sizes, &np_ref);
    ck_assert_int_eq(th_hook_value(TEENY__HOOK_CONV_WINO_TAKEN), 0);
    ck_assert_int_eq(np_ref, 5); /* two conv weights, the second's bias, fc's weight and bias */
    for (int m = 2; m <= 4; m += 2) {
        float *grads[NP] = {0};
        graph_step(WINO_FORCE, m, x, NX, lab, B, vals, &loss, grads, sizes, &np);
        ck_assert_int_eq(th_hook_value(TEENY__HOOK_CONV_WINO_TAKEN), 5); /* 2 forwards, 1 input gradient, 2 weight gradients */
        ck_assert_int_eq(np, np_ref);
        ck_assert_msg(fabsf(loss - loss_ref) <= 1e-5f * (1 + fabsf(loss_ref)), "F(%dx%d): loss %.9g, GEMM path %.9g",
                      m, m, (double)loss, (double)loss_ref);
        for (int i = 0; i < np; i++) {
            ck_assert_msg(th_first_nonfinite(grads[i], sizes[i]) < 0, "F(%dx%d): parameter %d's gradient not finite",
                          m, m, i);
            double e = th_nrms_f(grads[i], ref[i], sizes[i]);
            ck_assert_msg(e <= TOL_WINO4, "F(%dx%d): parameter %d's gradient nrms %.3g from the GEMM path's", m, m, i,
                          e);
            free(grads[i]);
        }
    }
    for (int i = 0; i < np_ref; i++) {
        free(vals[i]);
        free(ref[i]);
    }
}
END_TEST

Suite *suite_conv2d_wino(void)
{
    Suite *s = suite_create("conv2d_wino");
    TCase *fwd = tcase_create("forward");
    tcase_add_loop_test(fwd, test_conv2d_wino_cases, 0, th_small() ? 4 : N_CASES);
    tcase_add_test(fwd, test_conv2d_wino_passes);
    tcase_add_test(fwd, test_conv2d_wino_route);
    tcase_add_test(fwd, test_conv2d_wino_fused);
    tcase_add_test(fwd, test_conv2d_wino_determinism);
    tcase_add_test(fwd, test_conv2d_wino_graph);
    if (!th_small()) {
        tcase_add_test(fwd, test_conv2d_wino_nvidia);
        tcase_add_test(fwd, test_conv2d_wino_tf32);
    }
    suite_add_tcase(s, fwd);
    return s;
}
