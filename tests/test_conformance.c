/*
 * test_conformance.c -- the portability subset (suite "conformance"): one
 * tiny case per kernel variant of every op family against the float64
 * references in tests/ref/ (the tolerances of each family's own test
 * file), outputs NaN-poisoned and placed at an offset inside a guarded
 * buffer, plus a finite-difference gradient check of one small graph and
 * 20 training steps of the example network (examples/fashion_net.h) on
 * synthetic data. It is what tools/check-matrix.sh and make
 * check-oclgrind run on every OpenCL implementation, so it stays small:
 * about a minute on PoCL with a warm kernel cache.
 *
 * Coverage is proven, not assumed: every test profiles its launches
 * (teeny_profile_begin; the context's per-launch kernel names, read through
 * src/internal.h before teeny_profile_end) and the last test fails when a
 * __kernel of the embedded sources (the generated teeny__sources table) was
 * never launched, or a launched name is not in the sources. Paths a device
 * class never takes are forced through the library's internal hooks: the
 * conv2d cases run twice, with the device's own profile and with one of
 * the other class (teeny__tune_force through th_profile: the GEMM kernels
 * of GPUs on a CPU, conv_gemm_cpu on a GPU), and the simulator-only fill/upload kernels
 * (ew_fill, ew_copy) run with ctx->kernel_stores set for one test.
 * Needs CK_FORK=no (as make test sets): the launched names are collected
 * across tests in this process.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "ops/ops.h"
#include "ref/attention_ref.h"
#include "ref/batchnorm_ref.h"
#include "ref/concat_ref.h"
#include "ref/conv2d_ref.h"
#include "ref/conv_transpose_ref.h"
#include "ref/elementwise_ref.h"
#include "ref/layout_ref.h"
#include "ref/resize_ref.h"
#include "ref/linear_ref.h"
#include "ref/loss_ref.h"
#include "ref/matmul_ref.h"
#include "ref/norm_ref.h"
#include "ref/optim_ref.h"
#include "ref/pool_ref.h"
#include "ref/strided_ref.h"
#include "../examples/fashion_net.h"

#define TOL 1e-5      /* every family's forward/backward tolerance (nrms) */
#define TOL_EW 1e-6   /* test_elementwise.c: activations, mul */
#define TOL_ADD 1e-7  /* test_elementwise.c: add */
#define TOL_TF32 1e-3 /* convolutions with teeny_ctx_set_tf32 (test_conv2d.c) */
#define OUT_OFF 4     /* outputs are views at this offset in a NaN-filled guard buffer */

/* ---- kernel coverage ---- */

/* teeny__sources (internal.h): the embedded sources, parsed for __kernel. */

#define COV_MAX 256
static char cov_seen[COV_MAX][64];
static int cov_n_seen;

/* Kernels this device may legitimately never launch in this suite. Every
 * other path is reachable on every device through the hooks described in
 * the banner. */
static int cov_unused_ok(const char *name)
{
    int64_t budget = INT64_MAX;
    /* built only where the compiler may take NVIDIA inline PTX (probe.c) */
    if (!strcmp(name, "probe_tf32_mma"))
        return !th_ctx()->info.has_nvidia_ptx;
    /* the tf32 attention kernels, where the device runs tf32 and its
     * profile has tiles for them (test_conformance_attention's last pass) */
    if (!strcmp(name, "attn_fwd_tc") || !strcmp(name, "attn_bwd_dkdv_tc") || !strcmp(name, "attn_bwd_dq_tc")) {
        int tf32 = 0;
        TH_OK(th_ctx(), teeny__tf32_capable(th_ctx(), &tf32));
        return !tf32 || th_ctx()->tune.profile->attention_tf32.warps <= 0;
    }
    /* where a work-item's loop trips are limited, attention takes the CPU
     * variants, which split their loops (attention.c, use_cpu) */
    if (!strcmp(name, "attn_fwd") || !strcmp(name, "attn_bwd_dkdv") || !strcmp(name, "attn_bwd_dq")) {
        TH_OK(th_ctx(), teeny__loop_budget(th_ctx(), &budget));
        return budget != INT64_MAX;
    }
    return 0;
}

static void cov_note(const char *name)
{
    for (int i = 0; i < cov_n_seen; i++)
        if (!strcmp(cov_seen[i], name))
            return;
    ck_assert_msg(cov_n_seen < COV_MAX, "more than %d kernel names", COV_MAX);
    snprintf(cov_seen[cov_n_seen++], sizeof cov_seen[0], "%s", name);
}

static void cov_start(void)
{
    TH_OK(th_ctx(), teeny_profile_begin(th_ctx()));
}

/* Collect the names launched since cov_start and end the profile. */
static void cov_stop(void)
{
    teeny_ctx *ctx = th_ctx();
    TH_OK(ctx, teeny_ctx_finish(ctx));
    ck_assert_msg(ctx->prog.prof_count < ctx->prog.prof_cap, "profile full (%d launches): call cov_stop more often",
                  ctx->prog.prof_count);
    for (int i = 0; i < ctx->prog.prof_count; i++)
        cov_note(ctx->prog.prof_names[i]);
    TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
}

/* Every "__kernel ... void NAME(" at the start of a line of one source. */
static int cov_source_kernels(const char *src, char (*out)[64], int n, int max)
{
    for (const char *p = src; (p = strstr(p, "__kernel")) != NULL; p += 8) {
        if (p != src && p[-1] != '\n')
            continue;
        const char *v = p;
        while ((v = strstr(v, "void")) != NULL && !((v[-1] == ' ' || v[-1] == '\n' || v[-1] == ')') &&
                                                     (v[4] == ' ' || v[4] == '\n')))
            v += 4;
        ck_assert_msg(v != NULL, "a __kernel without void");
        v += 4;
        while (*v == ' ' || *v == '\n')
            v++;
        size_t len = strcspn(v, " (\n");
        ck_assert_msg(len > 0 && len < 64 && n < max, "cannot parse a kernel name");
        memcpy(out[n], v, len);
        out[n++][len] = '\0';
    }
    return n;
}

/* ---- helpers ---- */

static float *rnd(th_rng *r, size_t n, double mean, double std)
{
    float *x = th_malloc(n * sizeof *x);
    th_fill_normal(r, x, n, mean, std);
    return x;
}

static th_dev din(int ndim, const int64_t *shape, const float *data)
{
    return th_dev_make(th_ctx(), 0, ndim, shape, 0, data);
}

static th_dev dout(int ndim, const int64_t *shape)
{
    return th_dev_make(th_ctx(), 0, ndim, shape, OUT_OFF, NULL);
}

/* Every element written and finite, within tol of ref (nrms, or nrms_mag
 * against the term sizes mag), and nothing outside the view touched. */
static void expect(const th_dev *d, const double *ref, const double *mag, double tol, const char *what,
                   const char *repro)
{
    float *out = th_read(d->t);
    long bad = th_first_nonfinite(out, (size_t)d->n);
    ck_assert_msg(bad < 0, "%s: element %ld not written or not finite; %s", what, bad, repro);
    double e = mag ? th_nrms_mag(out, ref, mag, (size_t)d->n) : th_nrms(out, ref, (size_t)d->n);
    ck_assert_msg(e <= tol, "%s: nrms %.3g > %.1g; %s", what, e, tol, repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

/* Copies are exact. */
static void expect_exact(const th_dev *d, const float *ref, const char *what, const char *repro)
{
    float *out = th_read(d->t);
    for (int64_t i = 0; i < d->n; i++)
        ck_assert_msg(out[i] == ref[i], "%s: element %lld is %g, want %g; %s", what, (long long)i, (double)out[i],
                      (double)ref[i], repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

static void free_devs(th_dev *const *ds, int n)
{
    for (int i = 0; i < n; i++)
        th_dev_free(ds[i]);
}

/* ---- batch normalization ---- */


/* x [B, C] (ndim 2) or [B, C, H, W]: training forward, inference, training
 * and frozen backward. */
static void bn_case(int ndim, int B, int C, int H, int W, uint64_t seed)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(seed);
    int S = ndim == 2 ? 1 : H * W;
    size_t n = (size_t)B * C * S;
    int64_t xs[4] = {B, C, H, W}, cs[1] = {C};
    char repro[128];
    snprintf(repro, sizeof repro, "batchnorm %s B %d C %d H %d W %d seed %llu", ndim == 2 ? "NC" : "NCHW", B, C, H, W,
             (unsigned long long)seed);
    float *x = rnd(&r, n, th_uniform(&r, -2, 2), 1.5), *dy = rnd(&r, n, 0, 1), *w = rnd(&r, (size_t)C, 1, 0.3),
          *b = rnd(&r, (size_t)C, 0, 0.5), *rm = rnd(&r, (size_t)C, 0, 0.5), *rv = th_malloc((size_t)C * 4);
    th_fill_uniform(&r, rv, (size_t)C, 0.5, 2);
    float momentum = 0.1f, eps = 1e-5f;
    double *xd = th_dbl(x, n), *dyd = th_dbl(dy, n), *wd = th_dbl(w, (size_t)C), *bd = th_dbl(b, (size_t)C),
           *rmd = th_dbl(rm, (size_t)C), *rvd = th_dbl(rv, (size_t)C), *rm0 = th_dbl(rm, (size_t)C),
           *rv0 = th_dbl(rv, (size_t)C);
    double *y = th_malloc(n * 8), *mean = th_malloc((size_t)C * 8), *rstd = th_malloc((size_t)C * 8),
           *mag = th_malloc((size_t)C * 8), *mag2 = th_malloc((size_t)C * 8), *mag_dx = th_malloc(n * 8),
           *dx = th_malloc(n * 8), *dw = th_malloc((size_t)C * 8), *db = th_malloc((size_t)C * 8);
    th_dev tx = din(ndim, xs, x), tdy = din(ndim, xs, dy), tw = din(1, cs, w), tb = din(1, cs, b), trm = din(1, cs, rm),
           trv = din(1, cs, rv), ty = dout(ndim, xs), tm = dout(1, cs), tr = dout(1, cs), tdx = dout(ndim, xs),
           tdw = dout(1, cs), tdb = dout(1, cs);

    TH_OK(ctx, teeny_batchnorm_forward_train(ctx, tx.t, tw.t, tb.t, trm.t, trv.t, momentum, eps, ty.t, tm.t, tr.t));
    ref_bn_forward_train(xd, B, C, S, wd, bd, momentum, eps, y, mean, rstd, rmd, rvd);
    for (int c = 0; c < C; c++) {
        mag[c] = fabs(mean[c]) + 1 / rstd[c];
        mag2[c] = (1 - momentum) * fabs(rm0[c]) + momentum * mag[c];
    }
    expect(&ty, y, NULL, TOL, "train y", repro);
    expect(&tm, mean, mag, TOL, "save_mean", repro);
    expect(&tr, rstd, NULL, TOL, "save_rstd", repro);
    expect(&trm, rmd, mag2, TOL, "running_mean", repro);
    expect(&trv, rvd, NULL, TOL, "running_var", repro);

    /* training backward from the saved statistics as floats */
    float *meanf = th_malloc((size_t)C * 4), *rstdf = th_malloc((size_t)C * 4);
    for (int c = 0; c < C; c++) {
        meanf[c] = (float)mean[c];
        rstdf[c] = (float)rstd[c];
    }
    double *meand = th_dbl(meanf, (size_t)C), *rstdd = th_dbl(rstdf, (size_t)C);
    th_dev tm2 = din(1, cs, meanf), tr2 = din(1, cs, rstdf);
    TH_OK(ctx, teeny_batchnorm_backward_train(ctx, tx.t, tdy.t, tw.t, tm2.t, tr2.t, tdx.t, tdw.t, tdb.t));
    ref_bn_backward_train(xd, dyd, B, C, S, wd, meand, rstdd, dx, dw, db);
    ref_bn_grad_mags(xd, dyd, B, C, S, wd, meand, rstdd, mag2, mag, mag_dx);
    expect(&tdx, dx, mag_dx, TOL, "train dx", repro);
    expect(&tdw, dw, mag, TOL, "train dweight", repro);
    expect(&tdb, db, mag2, TOL, "train dbias", repro);

    /* inference and frozen backward with the original running statistics */
    TH_OK(ctx, teeny_tensor_write(trm.t, rm, (size_t)C));
    TH_OK(ctx, teeny_tensor_write(trv.t, rv, (size_t)C));
    th_poison(ty.t);
    TH_OK(ctx, teeny_batchnorm_forward_infer(ctx, tx.t, tw.t, tb.t, trm.t, trv.t, eps, ty.t));
    ref_bn_normalize(xd, B, C, S, rm0, rv0, eps, wd, bd, y);
    expect(&ty, y, NULL, TOL, "infer y", repro);
    th_poison(tdx.t);
    th_poison(tdw.t);
    th_poison(tdb.t);
    TH_OK(ctx, teeny_batchnorm_backward_frozen(ctx, tx.t, tdy.t, tw.t, trm.t, trv.t, eps, tdx.t, tdw.t, tdb.t));
    ref_bn_backward_frozen(xd, dyd, B, C, S, wd, rm0, rv0, eps, dx, dw, db);
    for (int c = 0; c < C; c++)
        rstdd[c] = 1 / sqrt(rv0[c] + eps);
    ref_bn_grad_mags(xd, dyd, B, C, S, wd, rm0, rstdd, mag2, mag, NULL);
    expect(&tdx, dx, NULL, TOL, "frozen dx", repro);
    expect(&tdw, dw, mag, TOL, "frozen dweight", repro);
    expect(&tdb, db, mag2, TOL, "frozen dbias", repro);
    /* without dx: the gradient sums alone (bn_grad_finalize) */
    th_poison(tdw.t);
    th_poison(tdb.t);
    TH_OK(ctx, teeny_batchnorm_backward_frozen(ctx, tx.t, tdy.t, tw.t, trm.t, trv.t, eps, NULL, tdw.t, tdb.t));
    expect(&tdw, dw, mag, TOL, "frozen dweight, no dx", repro);
    expect(&tdb, db, mag2, TOL, "frozen dbias, no dx", repro);

    th_dev *ds[] = {&tx, &tdy, &tw, &tb, &trm, &trv, &ty, &tm, &tr, &tdx, &tdw, &tdb, &tm2, &tr2};
    free_devs(ds, 14);
    void *hs[] = {x, dy, w, b, rm, rv, xd, dyd, wd, bd, rmd, rvd, rm0, rv0, y, mean, rstd, mag, mag2, mag_dx,
                  dx, dw, db, meanf, rstdf, meand, rstdd};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}

START_TEST(test_conformance_batchnorm)
{
    cov_start();
    bn_case(2, 6, 5, 1, 1, 11);  /* NC: the rows reduction */
    bn_case(4, 2, 3, 3, 3, 12);  /* NCHW, small plane: rows */
    for (int run = 0; run < 3; run++) { /* portable (one launch, then two), CPU variants */
        th_cpu_kernels(run == 2);
        th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, run == 1);
        bn_case(4, 2, 3, 4, 4, 13);  /* NCHW spatial, float4 */
        bn_case(4, 3, 2, 3, 7, 14);  /* NCHW spatial, scalar */
        bn_case(2, 3, 2, 5, 9, 16);  /* NCHW spatial, one float16 run and a tail */
    }
    th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, 0);
    th_cpu_kernels(-1);

    /* fold (the fused conv epilogue's scale/shift) */
    teeny_ctx *ctx = th_ctx();
    enum { C = 7 };
    th_rng r = th_rng_make(15);
    float w[C], b[C], rm[C], rv[C];
    double scale[C], shift[C];
    int64_t cs[1] = {C};
    th_fill_uniform(&r, w, C, -2, 2);
    th_fill_uniform(&r, b, C, -1, 1);
    th_fill_uniform(&r, rm, C, -3, 3);
    th_fill_uniform(&r, rv, C, 0.01, 4);
    for (int c = 0; c < C; c++) {
        scale[c] = w[c] / sqrt((double)rv[c] + 1e-3);
        shift[c] = b[c] - rm[c] * scale[c];
    }
    th_dev tw = din(1, cs, w), tb = din(1, cs, b), trm = din(1, cs, rm), trv = din(1, cs, rv), tsc = dout(1, cs),
           tsh = dout(1, cs);
    TH_OK(ctx, teeny_batchnorm_fold(ctx, tw.t, tb.t, trm.t, trv.t, 1e-3f, tsc.t, tsh.t));
    expect(&tsc, scale, NULL, TOL, "fold scale", "fold C 7");
    expect(&tsh, shift, NULL, TOL, "fold shift", "fold C 7");
    th_dev *ds[] = {&tw, &tb, &trm, &trv, &tsc, &tsh};
    free_devs(ds, 6);
    cov_stop();
}
END_TEST

/* ---- convolution ---- */

typedef struct {
    const char *what;
    ref_conv c; /* B, Cin, H, W, Cout, KH, KW, sh, sw, ph, pw, dh, dw, G, peh, pew */
} conv_case;

static const conv_case conv_cases[] = {
    {"dense 3x3", {2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
    {"1x1", {2, 4, 4, 4, 6, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}},
    {"strided", {1, 3, 7, 7, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0}},
    {"dilated", {1, 2, 7, 6, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, 0, 0}},
    {"grouped", {2, 4, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0}},
    {"depthwise", {2, 4, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 0, 0}},
    {"depthwise x2", {1, 3, 5, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, 0}},
    {"depthwise strided", {2, 2, 9, 9, 2, 3, 3, 2, 2, 1, 1, 1, 1, 2, 0, 0}},
    {"pads after apart (ONNX)", {2, 3, 7, 6, 4, 3, 2, 2, 1, 1, 0, 1, 1, 1, -1, 2}},
    {"1x1 padded after (ONNX)", {2, 4, 4, 4, 6, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 2}},
};

static teeny_conv2d_params conv_params(const ref_conv *c)
{
    teeny_conv2d_params p = TEENY_CONV2D_PARAMS_INIT;
    p.stride[0] = c->sh;
    p.stride[1] = c->sw;
    p.pad[0] = c->ph;
    p.pad[1] = c->pw;
    p.dilation[0] = c->dh;
    p.dilation[1] = c->dw;
    p.groups = c->G;
    p.pad_end_extra[0] = c->peh;
    p.pad_end_extra[1] = c->pew;
    return p;
}

/* Forward (plain with bias, fused epilogues) and backward of one case. */
static double conv_tol = TOL; /* TOL, or TOL_TF32 in test_conformance_conv2d's tf32 pass */

static void conv_run(const conv_case *k, const char *tuning, uint64_t seed)
{
    teeny_ctx *ctx = th_ctx();
    const ref_conv *c = &k->c;
    th_rng r = th_rng_make(seed);
    char repro[200];
    snprintf(repro, sizeof repro,
             "conv2d %s (%s tuning) B %d Cin %d H %d W %d Cout %d K %dx%d stride %d,%d pad %d,%d dil %d,%d groups %d "
             "seed %llu",
             k->what, tuning, c->B, c->Cin, c->H, c->W, c->Cout, c->KH, c->KW, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw,
             c->G, (unsigned long long)seed);
    size_t nx = ref_conv_x_numel(c), nw = ref_conv_w_numel(c), ny = ref_conv_y_numel(c), C = (size_t)c->Cout;
    int OH = ref_conv_oh(c), OW = ref_conv_ow(c);
    int64_t xs[4] = {c->B, c->Cin, c->H, c->W}, ws[4] = {c->Cout, c->Cin / c->G, c->KH, c->KW},
            ys[4] = {c->B, c->Cout, OH, OW}, cs[1] = {c->Cout};
    float *x = rnd(&r, nx, 0, 1), *w = rnd(&r, nw, 0, 0.5), *b = rnd(&r, C, 0, 0.5), *dy = rnd(&r, ny, 0, 1),
          *sc = rnd(&r, C, 1, 0.3), *sh = rnd(&r, C, 0, 0.5);
    double *xd = th_dbl(x, nx), *wd = th_dbl(w, nw), *bd = th_dbl(b, C), *dyd = th_dbl(dy, ny);
    double *y = th_malloc(ny * 8), *yf = th_malloc(ny * 8), *dx = th_malloc(nx * 8), *dw = th_malloc(nw * 8),
           *db = th_malloc(C * 8), *mdw = th_malloc(nw * 8), *mdb = th_malloc(C * 8);
    teeny_conv2d_params p = conv_params(c);
    th_dev tx = din(4, xs, x), tw = din(4, ws, w), tb = din(1, cs, b), tdy = din(4, ys, dy), tsc = din(1, cs, sc),
           tsh = din(1, cs, sh), ty = dout(4, ys), tdx = dout(4, xs), tdw = dout(4, ws), tdb = dout(1, cs);
    size_t plane = (size_t)OH * OW;

    TH_OK(ctx, teeny_conv2d_forward(ctx, &p, tx.t, tw.t, tb.t, ty.t));
    ref_conv2d_forward(c, xd, wd, bd, y, NULL);
    expect(&ty, y, NULL, conv_tol, "y", repro);

    /* fused: act(conv * scale + shift), and act(conv + bias) */
    ref_conv2d_forward(c, xd, wd, NULL, y, NULL);
    for (int act = 1; act <= 2; act++) {
        for (size_t i = 0; i < ny; i++) {
            size_t ch = i / plane % C;
            yf[i] = ref_act(act, y[i] * sc[ch] + sh[ch]);
        }
        th_poison(ty.t);
        TH_OK(ctx, teeny_conv2d_forward_fused(ctx, &p, tx.t, tw.t, NULL, tsc.t, tsh.t, (teeny_act)act, ty.t));
        expect(&ty, yf, NULL, conv_tol, act == 1 ? "fused scale/shift relu" : "fused scale/shift silu", repro);
    }
    for (size_t i = 0; i < ny; i++)
        yf[i] = ref_act(2, y[i] + b[i / plane % C]);
    th_poison(ty.t);
    TH_OK(ctx, teeny_conv2d_forward_fused(ctx, &p, tx.t, tw.t, tb.t, NULL, NULL, TEENY_ACT_SILU, ty.t));
    expect(&ty, yf, NULL, conv_tol, "fused bias silu", repro);

    TH_OK(ctx, teeny_conv2d_backward(ctx, &p, tx.t, tw.t, tdy.t, tdx.t, tdw.t, tdb.t));
    ref_conv2d_backward(c, xd, wd, dyd, dx, dw, db, NULL, mdw, mdb);
    expect(&tdx, dx, NULL, conv_tol, "dx", repro);
    expect(&tdw, dw, mdw, conv_tol, "dweight", repro);
    expect(&tdb, db, mdb, conv_tol, "dbias", repro);

    th_dev *ds[] = {&tx, &tw, &tb, &tdy, &tsc, &tsh, &ty, &tdx, &tdw, &tdb};
    free_devs(ds, 10);
    void *hs[] = {x, w, b, dy, sc, sh, xd, wd, bd, dyd, y, yf, dx, dw, db, mdw, mdb};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}

START_TEST(test_conformance_conv2d)
{
    teeny_ctx *ctx = th_ctx();
    int n = (int)(sizeof conv_cases / sizeof conv_cases[0]), tf32 = 0;
    cov_start();
    for (int i = 0; i < n; i++)
        conv_run(&conv_cases[i], "own", 100 + (uint64_t)i);
    /* the profile of the other class (src/tune/profiles.def): on a CPU the
     * generic GPU row's GEMM kernels and portable depthwise kernels, on a
     * GPU the CPU row's conv_gemm_cpu and depthwise CPU twins (TEENY_TUNING=
     * generic makes a CPU take the GPU row itself) */
    int own_cpu = th_ctx()->tune.variant == TEENY_VARIANT_CPU;
    th_profile(own_cpu ? "generic" : "cpu_vec16");
    for (int i = 0; i < n; i++)
        conv_run(&conv_cases[i], own_cpu ? "GPU" : "CPU", 200 + (uint64_t)i);
    /* the CPU depthwise forward's other kernel, dwconv_fwd_cpu (CONV_FLAGS
     * bit 64), where dwconv_fwd_cpu_band takes strides 1 and 2 */
    th_profile(own_cpu ? NULL : "cpu_vec16");
    th_hook(TEENY__HOOK_CONV_FLAGS, 64);
    for (int i = 0; i < n; i++)
        if (conv_cases[i].c.G == conv_cases[i].c.Cin)
            conv_run(&conv_cases[i], "CPU, dwconv_fwd_cpu", 250 + (uint64_t)i);
    th_hook(TEENY__HOOK_CONV_FLAGS, 0);
    th_profile(NULL);
    /* depthwise shapes through the GEMM (the fallback for huge dilation) */
    th_hook(TEENY__HOOK_CONV_FLAGS, 1);
    conv_run(&conv_cases[5], "own, no depthwise", 300);
    th_hook(TEENY__HOOK_CONV_TILE, -1);
    th_hook(TEENY__HOOK_CONV_FLAGS, 0);
    /* 3x3 stride 1 by Winograd F(2x2, 3x3) and F(4x4, 3x3)
     * (cl/winograd.cl), forced: the NVIDIA profile's path for large enough
     * problems */
    for (int m = 2; m <= 4; m += 2) {
        th_hook(TEENY__HOOK_CONV_WINO, 1);
        th_ctx()->tune.conv.wino = m;
        conv_run(&conv_cases[0], m == 2 ? "own, Winograd F(2x2)" : "own, Winograd F(4x4)", 301);
        ck_assert_msg(th_hook_value(TEENY__HOOK_CONV_WINO_TAKEN) > 0, "the forced Winograd path did not run");
    }
    th_hook(TEENY__HOOK_CONV_WINO, 0);
    th_profile(NULL);
    /* tf32 where the device runs it (teeny_ctx_set_tf32) */
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    TH_OK(ctx, teeny_ctx_tf32_active(ctx, &tf32));
    conv_tol = TOL_TF32;
    for (int i = 0; tf32 && i < n; i++)
        conv_run(&conv_cases[i], "tf32", 400 + (uint64_t)i);
    conv_tol = TOL;
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    cov_stop();
}
END_TEST

/* ---- attention ---- */

static const char *attn_pass = ""; /* which variant test_conformance_attention runs, for the reproducer */
static double attn_tol = TOL;      /* TOL, or TOL_TF32 in its tf32 pass */

/* The masked kernels (teeny_attention_forward_ex): with mk, a causal
 * frontier mk->causal_offset, softcap mk->softcap and a key-padding mask
 * [BH / 2, 1, 1, Nk] (heads 2) holding one -inf per batch. */
static void attn_case_ex(int BH, int Nq, int Nk, int D, int Dv, uint64_t seed, const teeny_attention_params *mk)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(seed);
    char repro[160];
    float scale = (float)(1 / sqrt((double)D));
    snprintf(repro, sizeof repro, "attention BH %d Nq %d Nk %d D %d Dv %d seed %llu (%s)%s", BH, Nq, Nk, D, Dv,
             (unsigned long long)seed, attn_pass, mk ? " causal, key-padding mask, softcap" : "");
    int64_t ms[4] = {BH / 2, 1, 1, Nk};
    size_t nm = (size_t)(BH / 2) * Nk;
    float *m = mk ? rnd(&r, nm, 0, 1) : NULL;
    for (size_t b = 0; m && b < (size_t)BH / 2; b++)
        m[b * Nk + (b + 1) % Nk] = -INFINITY;
    double *md = m ? th_dbl(m, nm) : NULL;
    teeny_attention_params p = mk ? *mk : (teeny_attention_params)TEENY_ATTENTION_PARAMS_INIT;
    ref_attn_mask rm = {md, Nk, 0, 0, 1, 2, p.causal, p.causal_offset, p.softcap};
    th_dev tm = m ? din(4, ms, m) : (th_dev){0};
    p.scale = scale;
    p.heads = 2;
    size_t nq = (size_t)BH * Nq * D, nk = (size_t)BH * Nk * D, nv = (size_t)BH * Nk * Dv, no = (size_t)BH * Nq * Dv,
           nl = (size_t)BH * Nq;
    int64_t qs[3] = {BH, Nq, D}, ks[3] = {BH, Nk, D}, vs[3] = {BH, Nk, Dv}, os[3] = {BH, Nq, Dv}, ls[2] = {BH, Nq};
    float *q = rnd(&r, nq, 0, 1), *k = rnd(&r, nk, 0, 1), *v = rnd(&r, nv, 0.3, 1), *g = rnd(&r, no, 0, 1);
    double *qd = th_dbl(q, nq), *kd = th_dbl(k, nk), *vd = th_dbl(v, nv), *gd = th_dbl(g, no);
    double *o = th_malloc(no * 8), *lse = th_malloc(nl * 8), *dq = th_malloc(nq * 8), *dk = th_malloc(nk * 8),
           *dv = th_malloc(nv * 8), *mq = th_malloc(nq * 8), *mk_ = th_malloc(nk * 8), *mv = th_malloc(nv * 8);
    th_dev tq = din(3, qs, q), tk = din(3, ks, k), tv = din(3, vs, v), tg = din(3, os, g), to = dout(3, os),
           tl = dout(2, ls), tdq = dout(3, qs), tdk = dout(3, ks), tdv = dout(3, vs);
    if (mk) {
        TH_OK(ctx, teeny_attention_forward_ex(ctx, tq.t, tk.t, tv.t, tm.t, &p, to.t, tl.t));
        TH_OK(ctx, teeny_attention_backward_ex(ctx, tq.t, tk.t, tv.t, tm.t, &p, to.t, tl.t, tg.t, tdq.t, tdk.t,
                                               tdv.t));
    } else {
        TH_OK(ctx, teeny_attention_forward(ctx, tq.t, tk.t, tv.t, scale, to.t, tl.t));
        TH_OK(ctx, teeny_attention_backward(ctx, tq.t, tk.t, tv.t, to.t, tl.t, tg.t, scale, tdq.t, tdk.t, tdv.t));
    }
    ref_attention_forward_ex(qd, kd, vd, BH, Nq, Nk, D, Dv, scale, mk ? &rm : NULL, o, lse);
    ref_attention_backward_ex(qd, kd, vd, gd, BH, Nq, Nk, D, Dv, scale, mk ? &rm : NULL, dq, dk, dv, mq, mk_, mv);
    expect(&to, o, NULL, attn_tol, "o", repro);
    expect(&tl, lse, NULL, attn_tol, "lse", repro);
    expect(&tdq, dq, mq, attn_tol, "dq", repro);
    expect(&tdk, dk, mk_, attn_tol, "dk", repro);
    expect(&tdv, dv, mv, attn_tol, "dv", repro);
    th_dev *ds[] = {&tq, &tk, &tv, &tg, &to, &tl, &tdq, &tdk, &tdv, &tm};
    free_devs(ds, m ? 10 : 9);
    free(m);
    free(md);
    void *hs[] = {q, k, v, g, qd, kd, vd, gd, o, lse, dq, dk, dv, mq, mk_, mv};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}

static void attn_case(int BH, int Nq, int Nk, int D, int Dv, uint64_t seed)
{
    attn_case_ex(BH, Nq, Nk, D, Dv, seed, NULL);
}

/* Pass 0: the portable kernels; 1: the CPU variants; 2: the CPU variants
 * as on a device that ends a work-item's loops after 60000 trips (their
 * loops split into several launches, as on Mesa's llvmpipe from a few
 * hundred keys). The loop-limit probe runs again in pass 1. */
START_TEST(test_conformance_attention)
{
    cov_start();
    for (int pass = 0; pass < 3; pass++) {
        static const char *const names[] = {"portable kernels", "CPU variants", "CPU variants, loop limit 60000"};
        attn_pass = names[pass];
        th_cpu_kernels(pass > 0);
        th_loop_limit(pass == 2 ? 60000 : -1);
        /* each padded head-dim bucket (32, 64, 128; values up to 256) */
        attn_case(2, 5, 7, 16, 16, 400);   /* D 32 bucket, Nq != Nk */
        attn_case(1, 9, 6, 40, 40, 401);   /* 64 */
        attn_case(1, 4, 5, 100, 100, 402); /* 128 */
        attn_case(2, 6, 3, 8, 24, 403);    /* Dv != D, same bucket */
        attn_case(1, 3, 4, 16, 200, 404);  /* Dv != D, Dv bucket 256 */
        attn_case(1, 3, 4, 128, 64, 405);  /* Dv < D */
        {
            /* masked: bottom-right causal, then top-left with softcap */
            teeny_attention_params br = {0.0f, 1, 3, 2, 0.0f}, tl = {0.0f, 1, 0, 2, 2.0f};
            attn_case_ex(4, 6, 9, 16, 32, 409, &br);
            attn_case_ex(2, 9, 6, 40, 40, 410, &tl);
        }
        if (th_small())
            continue;
        /* each bucket with BH > 1 and more keys than a tile holds, and
         * than one launch of a CPU variant may loop over on llvmpipe
         * (65535 trips: from about 416, 128 and 56 keys) */
        attn_case(2, 500, 500, 32, 32, 406);
        attn_case(2, 300, 300, 64, 128, 407);
        attn_case(3, 100, 100, 128, 256, 408);
    }
    th_loop_limit(-1);
    th_cpu_kernels(-1);
    /* the tf32 tensor-core kernels where the device runs them (head dims up to 64) */
    teeny_ctx *ctx = th_ctx();
    int tf32 = 0;
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    TH_OK(ctx, teeny_ctx_tf32_active(ctx, &tf32));
    attn_pass = "tf32 kernels";
    attn_tol = TOL_TF32;
    if (tf32) {
        teeny_attention_params br = {0.0f, 1, 3, 2, 0.0f}, tl = {0.0f, 1, 0, 2, 2.0f};
        attn_case(2, 5, 7, 16, 16, 420);
        attn_case(1, 9, 6, 40, 40, 421);
        attn_case(2, 6, 3, 8, 24, 422);
        attn_case_ex(4, 6, 9, 16, 32, 423, &br);
        attn_case_ex(2, 9, 6, 40, 40, 424, &tl);
        attn_case(2, 300, 300, 64, 64, 425);
    }
    attn_tol = TOL;
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    cov_stop();
}
END_TEST

/* ---- PSA attention ---- */

START_TEST(test_conformance_psa)
{
    teeny_ctx *ctx = th_ctx();
    const int B = 2, heads = 2, kd = 4, H = 3, W = 5, N = H * W;
    th_rng r = th_rng_make(500);
    const char *repro = "psa B 2 heads 2 kd 4 H 3 W 5 seed 500";
    size_t n_qkv = (size_t)B * heads * 4 * kd * N, n_o = (size_t)B * heads * 2 * kd * N, n_l = (size_t)B * heads * N,
           n_pk = 4 * (size_t)B * heads * N * kd, n_half = (size_t)B * heads * N * kd;
    int64_t qkv_s[4] = {B, heads * 4 * kd, H, W}, o_s[4] = {B, heads * 2 * kd, H, W}, l_s[2] = {B * heads, N},
            pk_s[4] = {4, B * heads, N, kd}, half_s[3] = {B * heads, N, kd};
    float *qkv = rnd(&r, n_qkv, 0, 1), *g = rnd(&r, n_o, 0, 1);
    double *qkvd = th_dbl(qkv, n_qkv), *gd = th_dbl(g, n_o);
    double *o = th_malloc(n_o * 8), *lse = th_malloc(n_l * 8), *dqkv = th_malloc(n_qkv * 8), *mag = th_malloc(n_qkv * 8);
    cov_start();

    /* fused forward and backward */
    th_dev tq = din(4, qkv_s, qkv), tg = din(4, o_s, g), to = dout(4, o_s), tl = dout(2, l_s), tdq = dout(4, qkv_s);
    TH_OK(ctx, teeny_psa_attention_forward(ctx, tq.t, heads, kd, to.t, tl.t));
    ref_psa_attention_forward(qkvd, B, heads, kd, N, o, lse);
    expect(&to, o, NULL, TOL, "psa o", repro);
    expect(&tl, lse, NULL, TOL, "psa lse", repro);
    TH_OK(ctx, teeny_psa_attention_backward(ctx, tq.t, heads, kd, to.t, tl.t, tg.t, tdq.t));
    ref_psa_attention_backward(qkvd, gd, B, heads, kd, N, dqkv, mag);
    expect(&tdq, dqkv, mag, TOL, "psa d_qkv", repro);

    /* the reference's rearrangements (exact copies) and their backwards */
    double *pk = th_malloc(n_pk * 8), *vx = th_malloc(n_o * 8), *mo = th_malloc(n_o * 8);
    float *pkf = th_malloc(n_pk * 4), *vxf = th_malloc(n_o * 4), *mof = th_malloc(n_o * 4), *zq = th_malloc(n_qkv * 4);
    ref_psa_pack(qkvd, B, heads, kd, N, pk);
    ref_psa_extract_v(qkvd, B, heads, kd, N, vx);
    for (size_t i = 0; i < n_pk; i++)
        pkf[i] = (float)pk[i];
    for (size_t i = 0; i < n_o; i++)
        vxf[i] = (float)vx[i];
    /* merge(lo, hi) with lo, hi the packed V halves */
    double *lo = pk + 2 * n_half, *hi = pk + 3 * n_half;
    ref_psa_merge(lo, hi, B, heads, kd, N, mo);
    for (size_t i = 0; i < n_o; i++)
        mof[i] = (float)mo[i];
    /* extract_v_backward: V channels from d_v, zeros in Q and K */
    for (size_t i = 0; i < n_qkv; i++)
        zq[i] = (i / (size_t)N) % (size_t)(4 * kd) >= (size_t)(2 * kd) ? qkv[i] : 0.0f;
    th_dev tp = dout(4, pk_s), tv = dout(4, o_s), tdp = din(4, pk_s, pkf), tdv = din(4, o_s, vxf),
           tlo = din(3, half_s, pkf + 2 * n_half), thi = din(3, half_s, pkf + 3 * n_half), tm = dout(4, o_s),
           tdm = din(4, o_s, mof), tdlo = dout(3, half_s), tdhi = dout(3, half_s);
    TH_OK(ctx, teeny_psa_pack_qkv(ctx, tq.t, heads, kd, tp.t));
    expect_exact(&tp, pkf, "pack", repro);
    for (int cpu = 0; cpu < 2; cpu++) { /* the portable and the CPU variants */
        th_cpu_kernels(cpu);
        th_poison(tv.t);
        TH_OK(ctx, teeny_psa_extract_v(ctx, tq.t, heads, kd, tv.t));
        expect_exact(&tv, vxf, cpu ? "extract_v (CPU variant)" : "extract_v", repro);
    }
    th_cpu_kernels(-1);
    TH_OK(ctx, teeny_psa_merge_attn(ctx, tlo.t, thi.t, heads, tm.t));
    expect_exact(&tm, mof, "merge", repro);
    th_poison(tdq.t);
    TH_OK(ctx, teeny_psa_pack_qkv_backward(ctx, tdp.t, heads, kd, tdq.t));
    expect_exact(&tdq, qkv, "pack backward", repro); /* a permutation: its backward inverts it */
    for (int cpu = 0; cpu < 2; cpu++) {
        th_cpu_kernels(cpu);
        th_poison(tdq.t);
        TH_OK(ctx, teeny_psa_extract_v_backward(ctx, tdv.t, heads, kd, tdq.t));
        expect_exact(&tdq, zq, cpu ? "extract_v backward (CPU variant)" : "extract_v backward", repro);
    }
    th_cpu_kernels(-1);
    TH_OK(ctx, teeny_psa_merge_attn_backward(ctx, tdm.t, heads, tdlo.t, tdhi.t));
    expect_exact(&tdlo, pkf + 2 * n_half, "merge backward lo", repro);
    expect_exact(&tdhi, pkf + 3 * n_half, "merge backward hi", repro);
    cov_stop();

    th_dev *ds[] = {&tq, &tg, &to, &tl, &tdq, &tp, &tv, &tdp, &tdv, &tlo, &thi, &tm, &tdm, &tdlo, &tdhi};
    free_devs(ds, 15);
    void *hs[] = {qkv, g, qkvd, gd, o, lse, dqkv, mag, pk, vx, mo, pkf, vxf, mof, zq};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}
END_TEST

/* ---- pooling ---- */

START_TEST(test_conformance_pool)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(600);
    const char *repro = "pool B 2 C 3 H 7 W 6 kernel 3x2 stride 2x2 pad 1x1 seed 600";
    ref_pool g = {.B = 2, .C = 3, .H = 7, .W = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 2, .ph = 1, .pw = 1};
    ref_pool_geom(&g);
    teeny_pool2d_params p = {.kernel = {g.kh, g.kw}, .stride = {g.sh, g.sw}, .pad = {g.ph, g.pw}};
    size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.C * g.OH * g.OW, nbc = (size_t)g.B * g.C;
    int S = g.H * g.W;
    int64_t xs[4] = {g.B, g.C, g.H, g.W}, ys[4] = {g.B, g.C, g.OH, g.OW}, gs[2] = {g.B, g.C};
    float *x = rnd(&r, nx, 0.5, 2), *dy = rnd(&r, ny, 0, 1), *dg = rnd(&r, nbc, 0, 1);
    double *xd = th_dbl(x, nx), *dyd = th_dbl(dy, ny), *dgd = th_dbl(dg, nbc), *y = th_malloc(ny * 8),
           *dx = th_malloc(nx * 8), *gy = th_malloc(nbc * 8), *gmag = th_malloc(nbc * 8);
    int32_t *arg = th_malloc(ny * 4), *got_arg = th_malloc(ny * 4);
    cov_start();
    th_dev tx = din(4, xs, x), tdy = din(4, ys, dy), tdg = din(2, gs, dg), ty = dout(4, ys), tdx = dout(4, xs),
           tgy = dout(2, gs), ta = th_dev_make(ctx, 1, 4, ys, OUT_OFF, NULL);
    TH_OK(ctx, teeny_maxpool2d_forward(ctx, &p, tx.t, ty.t, ta.t));
    ref_maxpool_forward(&g, xd, y, arg);
    expect(&ty, y, NULL, TOL, "maxpool y", repro);
    TH_OK(ctx, teeny_tensor_read_i32(ta.t, got_arg, ny));
    ck_assert_msg(!memcmp(arg, got_arg, ny * 4), "maxpool argmax differs; %s", repro);
    th_dev_check_guard(&ta, "argmax", repro);
    TH_OK(ctx, teeny_maxpool2d_backward(ctx, &p, tx.t, ta.t, tdy.t, tdx.t));
    ref_maxpool_backward(&g, arg, dyd, dx);
    expect(&tdx, dx, NULL, TOL, "maxpool dx", repro);
    /* the maximum alone: the portable kernel without indices, then the CPU
     * variant's band (pool_max_forward_cpu) on any device (the cpu profile) */
    for (int cpu = 0; cpu < 2; cpu++) {
        th_hook(TEENY__HOOK_POOL_MAX_CPU, cpu ? 0 : -1);
        if (cpu)
            ck_assert(th_profile("cpu"));
        th_poison(ty.t);
        TH_OK(ctx, teeny_maxpool2d_forward(ctx, &p, tx.t, ty.t, NULL));
        expect(&ty, y, NULL, TOL, cpu ? "maxpool y, no indices (cpu profile)" : "maxpool y, no indices", repro);
    }
    th_profile(NULL);
    th_hook(TEENY__HOOK_POOL_MAX_CPU, 0);
    th_poison(ty.t);
    TH_OK(ctx, teeny_avgpool2d_forward(ctx, &p, tx.t, ty.t));
    ref_avgpool_forward(&g, xd, y);
    expect(&ty, y, NULL, TOL, "avgpool y", repro);
    th_poison(tdx.t);
    TH_OK(ctx, teeny_avgpool2d_backward(ctx, &p, tx.t, tdy.t, tdx.t));
    ref_avgpool_backward(&g, dyd, dx);
    expect(&tdx, dx, NULL, TOL, "avgpool dx", repro);
    /* global average pooling, both variants; the mean of signed values
     * measured against mean |x| */
    ref_gap_forward(g.B, g.C, S, xd, gy);
    for (size_t bc = 0; bc < nbc; bc++) {
        gmag[bc] = 0;
        for (int e = 0; e < S; e++)
            gmag[bc] += fabs(xd[bc * (size_t)S + (size_t)e]) / S;
    }
    for (int cpu = 0; cpu < 2; cpu++) {
        th_cpu_kernels(cpu);
        th_poison(tgy.t);
        TH_OK(ctx, teeny_global_avgpool_forward(ctx, tx.t, tgy.t));
        expect(&tgy, gy, gmag, TOL, cpu ? "gap y (CPU variant)" : "gap y", repro);
    }
    /* as on a device that ends a work-item's loops after 20 trips: the
     * forward windows in bands of 2 rows, the plane's sum in chunks of 9
     * (pool.c; the portable kernel's tree alone passes that budget) */
    th_loop_limit(20);
    th_poison(ty.t);
    TH_OK(ctx, teeny_avgpool2d_forward(ctx, &p, tx.t, ty.t));
    ref_avgpool_forward(&g, xd, y);
    expect(&ty, y, NULL, TOL, "avgpool y (loop limit 20)", repro);
    for (int cpu = 0; cpu < 2; cpu++) {
        th_cpu_kernels(cpu);
        th_poison(tgy.t);
        TH_OK(ctx, teeny_global_avgpool_forward(ctx, tx.t, tgy.t));
        expect(&tgy, gy, gmag, TOL, "gap y (loop limit 20)", repro);
    }
    th_loop_limit(-1);
    th_cpu_kernels(-1);
    th_poison(tdx.t);
    TH_OK(ctx, teeny_global_avgpool_backward(ctx, tdg.t, tdx.t));
    ref_gap_backward(g.B, g.C, S, dgd, dx);
    expect(&tdx, dx, NULL, TOL, "gap dx", repro);
    /* global max pooling, and ONNX's window options: dilation 2, pads
     * before and after apart (past half the span), ceil_mode,
     * count_include_pad=0, the flat indices */
    int32_t garg[6];
    th_dev tga = th_dev_make(ctx, 1, 2, gs, OUT_OFF, NULL);
    th_poison(tgy.t);
    TH_OK(ctx, teeny_global_maxpool_forward(ctx, tx.t, tgy.t, tga.t));
    ck_assert(nbc <= 6);
    ref_gmp_forward(g.B, g.C, S, xd, gy, garg);
    expect(&tgy, gy, NULL, TOL, "global max y", repro);
    th_poison(tdx.t);
    TH_OK(ctx, teeny_global_maxpool_backward(ctx, tga.t, tdg.t, tdx.t));
    ref_gmp_backward(g.B, g.C, S, garg, dgd, dx);
    expect(&tdx, dx, NULL, TOL, "global max dx", repro);
    ref_pool o = {.B = 2, .C = 3, .H = 7, .W = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 2, .ph = 2, .pw = 1,
                  .peh = -1, .pew = 2, .dh = 2, .dw = 2, .ceil_mode = 1, .exclude_pad = 1};
    ref_pool_geom(&o);
    ck_assert(o.OH == g.OH && o.OW == g.OW); /* 4 x 2: the same y, dy */
    teeny_pool2d_params po = {.kernel = {o.kh, o.kw}, .stride = {o.sh, o.sw}, .pad = {o.ph, o.pw},
                              .pad_end_extra = {o.peh, o.pew}, .dilation = {o.dh, o.dw}, .ceil_mode = 1,
                              .exclude_pad = 1, .large_pads = 1};
    th_poison(ty.t);
    TH_OK(ctx, teeny_avgpool2d_forward(ctx, &po, tx.t, ty.t));
    ref_avgpool_forward(&o, xd, y);
    expect(&ty, y, NULL, TOL, "avgpool y (ONNX options)", repro);
    th_poison(tdx.t);
    TH_OK(ctx, teeny_avgpool2d_backward(ctx, &po, tx.t, tdy.t, tdx.t));
    ref_avgpool_backward(&o, dyd, dx);
    expect(&tdx, dx, NULL, TOL, "avgpool dx (ONNX options)", repro);
    th_poison(ty.t);
    TH_OK(ctx, teeny_maxpool2d_forward(ctx, &po, tx.t, ty.t, ta.t));
    ref_maxpool_forward(&o, xd, y, arg);
    expect(&ty, y, NULL, TOL, "maxpool y (ONNX options)", repro);
    th_poison(tdx.t);
    TH_OK(ctx, teeny_maxpool2d_backward(ctx, &po, tx.t, ta.t, tdy.t, tdx.t));
    ref_maxpool_backward(&o, arg, dyd, dx);
    expect(&tdx, dx, NULL, TOL, "maxpool dx (ONNX options)", repro);
    TH_OK(ctx, teeny_maxpool2d_indices(ctx, &po, tx.t, 0, ta.t));
    TH_OK(ctx, teeny_tensor_read_i32(ta.t, got_arg, ny));
    for (size_t i = 0; i < ny; i++)
        ck_assert_msg(got_arg[i] == (int32_t)(i / (size_t)(o.OH * o.OW)) * S + arg[i], "indices[%zu]; %s", i, repro);
    cov_stop();
    th_dev *ds[] = {&tx, &tdy, &tdg, &ty, &tdx, &tgy, &ta, &tga};
    free_devs(ds, 8);
    void *hs[] = {x, dy, dg, xd, dyd, dgd, y, dx, gy, gmag, arg, got_arg};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}
END_TEST

/* ---- linear and loss ---- */

START_TEST(test_conformance_linear_loss)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(700);
    enum { N = 5, IN = 13, OUT = 7 };
    const char *repro = "linear x [5, 13] w [7, 13]; softmax-ce logits [5, 7]; seed 700";
    int64_t xs[2] = {N, IN}, ws[2] = {OUT, IN}, ys[2] = {N, OUT}, bs[1] = {OUT}, ns[1] = {N}, one[1] = {1};
    float *x = rnd(&r, N * IN, 0, 1), *w = th_malloc(OUT * IN * 4), *b = rnd(&r, OUT, 0, 0.5), *dy = rnd(&r, N * OUT, 0, 1);
    th_fill_uniform(&r, w, OUT * IN, -1, 1);
    double *xd = th_dbl(x, N * IN), *wd = th_dbl(w, OUT * IN), *bd = th_dbl(b, OUT), *dyd = th_dbl(dy, N * OUT);
    double y[N * OUT], my[N * OUT], dx[N * IN], mdx[N * IN], dw[OUT * IN], mdw[OUT * IN], db[OUT], mdb[OUT];
    cov_start();
    th_dev tx = din(2, xs, x), tw = din(2, ws, w), tb = din(1, bs, b), tdy = din(2, ys, dy), ty = dout(2, ys),
           tdx = dout(2, xs), tdw = dout(2, ws), tdb = dout(1, bs);
    ref_linear_forward(xd, wd, bd, N, IN, OUT, y);
    ref_linear_mags(xd, wd, dyd, N, IN, OUT, my, mdx, mdw, mdb);
    ref_linear_backward(xd, wd, dyd, N, IN, OUT, dx, dw, db);
    /* by the plan (a layer this small: lin_gemm_small), then the tiled
     * lin_gemm, which no other case here launches in small mode, then
     * what a larger layer takes (on CPU tunings conv2d's CPU GEMM) */
    const th_dev *outs[] = {&ty, &tdx, &tdw, &tdb};
    for (int route = 0; route < 3; route++) {
        th_hook(TEENY__HOOK_LINEAR_SMALL, route ? -1 : 0);
        th_hook(TEENY__HOOK_LINEAR_CPU_GEMM, route == 1 ? -1 : 0);
        for (int i = 0; route > 0 && i < 4; i++) /* to be written again */
            th_poison(outs[i]->base);
        TH_OK(ctx, teeny_linear_forward(ctx, tx.t, tw.t, tb.t, ty.t));
        expect(&ty, y, my, TOL, "linear y", repro);
        TH_OK(ctx, teeny_linear_backward(ctx, tx.t, tw.t, tdy.t, tdx.t, tdw.t, tdb.t));
        expect(&tdx, dx, mdx, TOL, "linear dx", repro);
        expect(&tdw, dw, mdw, TOL, "linear dw", repro);
        expect(&tdb, db, mdb, TOL, "linear db", repro);
    }
    th_hook(TEENY__HOOK_LINEAR_SMALL, 0);
    th_hook(TEENY__HOOK_LINEAR_CPU_GEMM, 0);

    /* softmax cross-entropy over the linear output's shape, and argmax */
    int32_t labels[N], want_arg[N], got_arg[N];
    for (int i = 0; i < N; i++)
        labels[i] = th_int(&r, 0, OUT - 1);
    double probs[N * OUT], loss, dlogits[N * OUT];
    float dloss = 0.75f;
    loss = ref_softmax_ce_forward(xd, labels, N, OUT, probs); /* logits: x's first N*OUT values */
    ref_softmax_ce_backward(probs, labels, dloss, N, OUT, dlogits);
    ref_argmax_rows(x, N, OUT, want_arg);
    th_dev tlog = din(2, ys, x), tlab = th_dev_make(ctx, 1, 1, ns, 0, labels), tloss = dout(1, one), tp = dout(2, ys),
           tdl = din(1, one, &dloss), tdlog = dout(2, ys), targ = th_dev_make(ctx, 1, 1, ns, OUT_OFF, NULL);
    TH_OK(ctx, teeny_softmax_cross_entropy_forward(ctx, tlog.t, tlab.t, tloss.t, tp.t));
    expect(&tloss, &loss, NULL, TOL, "loss", repro);
    expect(&tp, probs, NULL, TOL, "probs", repro);
    TH_OK(ctx, teeny_softmax_cross_entropy_backward(ctx, tp.t, tlab.t, tdl.t, tdlog.t));
    expect(&tdlog, dlogits, NULL, TOL, "dlogits", repro);
    TH_OK(ctx, teeny_argmax_rows(ctx, tlog.t, targ.t));
    TH_OK(ctx, teeny_tensor_read_i32(targ.t, got_arg, N));
    ck_assert_msg(!memcmp(want_arg, got_arg, sizeof got_arg), "argmax differs; %s", repro);
    th_dev_check_guard(&targ, "argmax", repro);

    /* with class weights and ignore_index (label of row 1): MEAN (the
     * backward's ce_mean sums the weights) and NONE */
    labels[1] = 2;
    double cwd[OUT], rows[N], dls[N] = {0.75, 0.75, 0.75, 0.75, 0.75};
    float *cw = rnd(&r, OUT, 1, 0.2);
    th_to_double(cw, cwd, OUT);
    th_dev tcw = din(1, bs, cw), tlab2 = th_dev_make(ctx, 1, 1, ns, 0, labels), tloss_n = dout(1, ns),
           tdl_n = din(1, ns, (float[N]){0.75f, 0.75f, 0.75f, 0.75f, 0.75f}), tdlog2 = dout(2, ys);
    for (int red = 0; red < 3; red += 2) {
        teeny_ce_params cp = {(teeny_reduction)red, 1, 2};
        ref_ce_opts o = {cwd, 1, 2, red};
        loss = ref_softmax_ce_ex_forward(xd, labels, &o, N, OUT, probs, rows);
        ref_softmax_ce_ex_backward(probs, labels, &o, dls, N, OUT, dlogits);
        th_dev *tl = red ? &tloss_n : &tloss, *td = red ? &tdl_n : &tdl;
        TH_OK(ctx, teeny_softmax_cross_entropy_ex_forward(ctx, tlog.t, tlab2.t, tcw.t, &cp, tl->t, tp.t));
        expect(tl, red ? rows : &loss, NULL, TOL, "weighted loss", repro);
        TH_OK(ctx, teeny_softmax_cross_entropy_ex_backward(ctx, tp.t, tlab2.t, tcw.t, &cp, td->t, tdlog2.t));
        expect(&tdlog2, dlogits, NULL, TOL, "weighted dlogits", repro);
    }
    /* scores [1, 7, 5] (x's first 35 values: rows of stride 5), labels [1, 5], SUM */
    {
        int32_t l3[5] = {6, 0, 2, 2, 4};
        int64_t s3[3] = {1, OUT, N}, sl[2] = {1, N};
        double xt[N * OUT], pt[N * OUT], gt[N * OUT], p3[N * OUT], g3[N * OUT], dd = 0.75;
        for (int k = 0; k < OUT; k++)
            for (int d = 0; d < N; d++)
                xt[d * OUT + k] = xd[k * N + d];
        teeny_ce_params cp = {TEENY_REDUCTION_SUM, 1, 2};
        ref_ce_opts o = {cwd, 1, 2, 1};
        loss = ref_softmax_ce_ex_forward(xt, l3, &o, N, OUT, pt, NULL);
        ref_softmax_ce_ex_backward(pt, l3, &o, &dd, N, OUT, gt);
        for (int k = 0; k < OUT; k++)
            for (int d = 0; d < N; d++)
                p3[k * N + d] = pt[d * OUT + k], g3[k * N + d] = gt[d * OUT + k];
        th_dev tx3 = din(3, s3, x), tl3 = th_dev_make(ctx, 1, 2, sl, 0, l3), tp3 = dout(3, s3), tg3 = dout(3, s3);
        TH_OK(ctx, teeny_softmax_cross_entropy_ex_forward(ctx, tx3.t, tl3.t, tcw.t, &cp, tloss.t, tp3.t));
        expect(&tloss, &loss, NULL, TOL, "rank-3 loss", repro);
        expect(&tp3, p3, NULL, TOL, "rank-3 probs", repro);
        TH_OK(ctx, teeny_softmax_cross_entropy_ex_backward(ctx, tp3.t, tl3.t, tcw.t, &cp, tdl.t, tg3.t));
        expect(&tg3, g3, NULL, TOL, "rank-3 dlogits", repro);
        th_dev *d3[] = {&tx3, &tl3, &tp3, &tg3};
        free_devs(d3, 4);
    }
    free(cw);
    cov_stop();
    th_dev *ds[] = {&tx,  &tw,  &tb,   &tdy,  &ty,  &tdx, &tdw,   &tdb,    &tlog,  &tlab,
                    &tloss, &tp, &tdl, &tdlog, &targ, &tcw, &tlab2, &tloss_n, &tdl_n, &tdlog2};
    free_devs(ds, 20);
    void *hs[] = {x, w, b, dy, xd, wd, bd, dyd};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}
END_TEST

/* ---- loops past a device's loop limit ----
 * One case per family whose per-item loops, run naively, pass the 65535
 * trips after which Mesa's llvmpipe ends every loop of a work-item
 * (src/program/probe.c): there each family's plan splits them, elsewhere
 * these are just larger cases. Skipped in small mode (oclgrind). Not
 * among them: optimizer clipping (an item loops over a tensor's elements
 * / (64 * OPT_WG), past 65535 only beyond a billion) and the mean of the
 * loss over rows (past 8 million rows): test_optim.c and test_loss.c force
 * small limits on them. */

/* Average and max pooling with a 300 x 300 window (90000 positions per
 * output), and global pooling of 1100 x 1100 planes. */
static void long_pool(void)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(1200);
    const char *repro = "pool x [1, 2, 302, 302] kernel 300x300 stride 1; global pooling x [1, 2, 1100, 1100]";
    ref_pool g = {.B = 1, .C = 2, .H = 302, .W = 302, .kh = 300, .kw = 300, .sh = 1, .sw = 1};
    ref_pool_geom(&g);
    teeny_pool2d_params p = {.kernel = {300, 300}, .stride = {1, 1}, .pad = {0, 0}};
    size_t nx = (size_t)2 * 302 * 302, ny = (size_t)2 * g.OH * g.OW, ng = (size_t)2 * 1100 * 1100;
    int64_t xs[4] = {1, 2, 302, 302}, ys[4] = {1, 2, g.OH, g.OW}, gxs[4] = {1, 2, 1100, 1100}, gys[2] = {1, 2};
    float *x = rnd(&r, nx, 0, 1), *gx = rnd(&r, ng, 0.5, 1);
    double *xd = th_dbl(x, nx), *gxd = th_dbl(gx, ng), *y = th_malloc(ny * 8), gy[2], gmag[2] = {0, 0};
    int32_t *arg = th_malloc(ny * 4), *got = th_malloc(ny * 4);
    th_dev tx = din(4, xs, x), ty = dout(4, ys), tgx = din(4, gxs, gx), tgy = dout(2, gys),
           ta = th_dev_make(ctx, 1, 4, ys, OUT_OFF, NULL);
    TH_OK(ctx, teeny_avgpool2d_forward(ctx, &p, tx.t, ty.t));
    ref_avgpool_forward(&g, xd, y);
    expect(&ty, y, NULL, TOL, "avgpool y", repro);
    th_poison(ty.t);
    TH_OK(ctx, teeny_maxpool2d_forward(ctx, &p, tx.t, ty.t, ta.t));
    ref_maxpool_forward(&g, xd, y, arg);
    expect(&ty, y, NULL, TOL, "maxpool y", repro);
    TH_OK(ctx, teeny_tensor_read_i32(ta.t, got, ny));
    ck_assert_msg(!memcmp(arg, got, ny * 4), "maxpool argmax differs; %s", repro);
    TH_OK(ctx, teeny_global_avgpool_forward(ctx, tgx.t, tgy.t));
    ref_gap_forward(1, 2, 1100 * 1100, gxd, gy);
    for (size_t i = 0; i < ng; i++)
        gmag[i / (1100 * 1100)] += fabs(gxd[i]) / (1100 * 1100);
    expect(&tgy, gy, gmag, TOL, "global pooling y", repro);
    th_dev *ds[] = {&tx, &ty, &tgx, &tgy, &ta};
    free_devs(ds, 5);
    void *hs[] = {x, gx, xd, gxd, y, arg, got};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}

/* The fully connected layer over 100000 input features (y's sums) and
 * 100000 rows (dw's), argmax over rows of 100000 classes, and the PSA
 * V extraction over 66560 tokens. */
static void long_linear_loss_psa(void)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(1300);
    enum { K = 100000, O = 4 };
    const char *repro = "linear x [4, 100000] w [4, 100000]; x [100000, 4] dw; argmax [4, 100000]; psa qkv "
                        "[1, 32, 256, 260] kd 8";
    int64_t xs[2] = {O, K}, ys[2] = {O, O}, x2s[2] = {K, O}, os[1] = {O};
    float *x = rnd(&r, (size_t)O * K, 0, 1), *w = rnd(&r, (size_t)O * K, 0, 1), *dy = rnd(&r, (size_t)K * O, 0, 1);
    double *xd = th_dbl(x, (size_t)O * K), *wd = th_dbl(w, (size_t)O * K), *dyd = th_dbl(dy, (size_t)K * O);
    double y[O * O], my[O * O], dw[O * O], mdw[O * O];
    th_dev tx = din(2, xs, x), tw = din(2, xs, w), ty = dout(2, ys), tx2 = din(2, x2s, w), tw2 = din(2, ys, x),
           tdy = din(2, x2s, dy), tdw = dout(2, ys), targ = th_dev_make(ctx, 1, 1, os, OUT_OFF, NULL);
    TH_OK(ctx, teeny_linear_forward(ctx, tx.t, tw.t, NULL, ty.t));
    ref_linear_forward(xd, wd, NULL, O, K, O, y);
    ref_linear_mags(xd, wd, NULL, O, K, O, my, NULL, NULL, NULL);
    expect(&ty, y, my, TOL, "linear y (K = 100000)", repro);
    TH_OK(ctx, teeny_linear_backward(ctx, tx2.t, tw2.t, tdy.t, NULL, tdw.t, NULL));
    ref_linear_backward(wd, xd, dyd, K, O, O, NULL, dw, NULL);
    ref_linear_mags(wd, xd, dyd, K, O, O, NULL, NULL, mdw, NULL);
    expect(&tdw, dw, mdw, TOL, "linear dw (N = 100000)", repro);
    int32_t want[O], got[O];
    x[3 * (size_t)K + 99999] = 40.0f; /* a maximum in the last column */
    TH_OK(ctx, teeny_tensor_write(tx.t, x, (size_t)O * K));
    ref_argmax_rows(x, O, K, want);
    TH_OK(ctx, teeny_argmax_rows(ctx, tx.t, targ.t));
    TH_OK(ctx, teeny_tensor_read_i32(targ.t, got, O));
    ck_assert_msg(!memcmp(want, got, sizeof got) && got[3] == 99999, "argmax differs; %s", repro);
    th_dev *ds[] = {&tx, &tw, &ty, &tx2, &tw2, &tdy, &tdw, &targ};
    free_devs(ds, 8);

    enum { KD = 8, N = 256 * 260 };
    int64_t qs[4] = {1, 4 * KD, 256, 260}, vs[4] = {1, 2 * KD, 256, 260};
    float *qkv = rnd(&r, (size_t)4 * KD * N, 0, 1), *v = th_malloc((size_t)2 * KD * N * 4),
          *back = th_malloc((size_t)4 * KD * N * 4);
    for (size_t i = 0; i < (size_t)4 * KD * N; i++) {
        size_t ch = i / N;
        back[i] = ch >= 2 * KD ? qkv[i] : 0.0f;
        if (ch >= 2 * KD)
            v[(ch - 2 * KD) * N + i % N] = qkv[i];
    }
    th_dev tq = din(4, qs, qkv), tv = dout(4, vs), tdq = dout(4, qs);
    TH_OK(ctx, teeny_psa_extract_v(ctx, tq.t, 1, KD, tv.t));
    expect_exact(&tv, v, "extract_v (66560 tokens)", repro);
    TH_OK(ctx, teeny_psa_extract_v_backward(ctx, tv.t, 1, KD, tdq.t));
    expect_exact(&tdq, back, "extract_v backward (66560 tokens)", repro);
    th_dev *ps[] = {&tq, &tv, &tdq};
    free_devs(ps, 3);
    void *hs[] = {x, w, dy, xd, wd, dyd, qkv, v, back};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}

/* Batch norm with 1.1 million values per channel in one partial (the
 * split of a one-compute-unit device), the depthwise convolution over
 * 100 x 100 planes (whole planes per item, weight gradients over 16
 * batches), and dense weight gradients summing 80000 positions. */
START_TEST(test_conformance_long_loops)
{
    if (th_small())
        th_skip("small mode: these cases are large");
    cov_start();
    th_compute_units(1);
    bn_case(4, 4, 4, 525, 525, 1100);
    th_compute_units(0);
    static const conv_case big[] = {
        {"depthwise, whole planes", {16, 8, 100, 100, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 0, 0}},
        {"1x1, weight gradient over 80000", {8, 4, 100, 100, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}},
        {"3x3, weight gradient over 80000", {8, 4, 100, 100, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
    };
    for (int i = 0; i < 3; i++)
        conv_run(&big[i], "own", 1110 + (uint64_t)i);
    cov_stop();
    cov_start();
    long_pool();
    long_linear_loss_psa();
    cov_stop();
}
END_TEST

/* ---- concat, element-wise, fills and copies ---- */

START_TEST(test_conformance_elementwise)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(800);
    enum { B = 2, C0 = 3, C1 = 2, S = 5, N = 37 };
    const char *repro = "concat [2,3,5]+[2,2,5]; element-wise n 37; seed 800";
    int64_t s0[3] = {B, C0, S}, s1[3] = {B, C1, S}, sy[3] = {B, C0 + C1, S}, sn[1] = {N};
    float *a = rnd(&r, B * C0 * S, 0, 1), *b = rnd(&r, B * C1 * S, 0, 1), *u = rnd(&r, N, 0, 2), *v = rnd(&r, N, 0, 2),
          *g = rnd(&r, N, 0, 1);
    double *ad = th_dbl(a, B * C0 * S), *bd = th_dbl(b, B * C1 * S);
    double y[B * (C0 + C1) * S], ya[B * C0 * S], yb[B * C1 * S], e[N], e2[N];
    cov_start();

    th_dev ta = din(3, s0, a), tb = din(3, s1, b), ty = dout(3, sy), ta2 = dout(3, s0), tb2 = dout(3, s1);
    /* the portable channel copies (cat_copy), then the CPU variant's
     * (cat_copy_cpu) on any device: the cpu profile */
    for (int cpu = 0; cpu < 2; cpu++) {
        th_hook(TEENY__HOOK_CAT_COPY_CPU, cpu ? 0 : -1);
        if (cpu)
            ck_assert(th_profile("cpu"));
        th_poison(ty.t);
        TH_OK(ctx, teeny_concat_channels(ctx, 2, (const teeny_tensor *const[]){ta.t, tb.t}, ty.t));
        ref_concat(2, (const double *const[]){ad, bd}, (const int[]){C0, C1}, B, S, y);
        expect(&ty, y, NULL, TOL, cpu ? "concat (cpu profile)" : "concat", repro);
        th_poison(ta2.t);
        th_poison(tb2.t);
        TH_OK(ctx, teeny_split_channels(ctx, ty.t, 2, (teeny_tensor *const[]){ta2.t, tb2.t}));
        ref_slice(y, B, C0 + C1, S, 0, C0, ya);
        ref_slice(y, B, C0 + C1, S, C0, C1, yb);
        expect(&ta2, ya, NULL, TOL, "split 0", repro);
        expect(&tb2, yb, NULL, TOL, "split 1", repro);
    }
    th_profile(NULL);
    th_hook(TEENY__HOOK_CAT_COPY_CPU, 0);
    /* the graph's slice_channels backward (no eager API): dx is dy inside
     * channels [C0, C0 + C1), zero elsewhere */
    {
        teeny__op_args oa = {0};
        oa.in[TEENY__SLICE_CHANNELS_DY] = tb.t;
        oa.out[TEENY__SLICE_CHANNELS_X] = ty.t;
        oa.attrs.slice.first_channel = C0;
        oa.attrs.slice.count = C1;
        th_poison(ty.t);
        TH_OK(ctx, teeny__slice_channels_backward(ctx, &oa));
        ref_slice_backward(bd, B, C0 + C1, S, C0, C1, y);
        expect(&ty, y, NULL, TOL, "slice backward", repro);
    }

    th_dev tu = din(1, sn, u), tv = din(1, sn, v), tg = din(1, sn, g), to = dout(1, sn), to2 = dout(1, sn);
    for (int cpu = 0; cpu < 2; cpu++) { /* the portable and the CPU variants */
        th_cpu_kernels(cpu);
        th_poison(to.t);
        TH_OK(ctx, teeny_add(ctx, tu.t, tv.t, to.t));
        for (int i = 0; i < N; i++)
            e[i] = (double)u[i] + v[i];
        expect(&to, e, NULL, TOL_ADD, "add", repro);
        /* the add's backward: dy into both inputs' gradients (ew_copy2), or into the one wanted */
        for (int want = 0; want < 3; want++) {
            teeny__op_args oa;
            memset(&oa, 0, sizeof oa);
            oa.in[TEENY__ADD_DY] = tg.t;
            oa.out[TEENY__ADD_A] = want != 1 ? to.t : NULL;
            oa.out[TEENY__ADD_B] = want != 0 ? to2.t : NULL;
            th_poison(to.t);
            th_poison(to2.t);
            TH_OK(ctx, teeny__add_backward(ctx, &oa));
            for (int k = 0; k < 2; k++) {
                const th_dev *d = k ? &to2 : &to;
                if (want == 2 || want == k) {
                    expect_exact(d, g, k ? "add backward db" : "add backward da", repro);
                } else { /* the gradient not asked for is not written */
                    float *out = th_read(d->t);
                    for (int64_t i = 0; i < d->n; i++)
                        ck_assert_msg(isnan(out[i]), "add backward wrote the unwanted d%c at %lld; %s", k ? 'b' : 'a',
                                      (long long)i, repro);
                    free(out);
                }
            }
        }
        for (int act = 0; act <= 2; act++) {
            th_poison(to.t);
            TH_OK(ctx, teeny_activation_forward(ctx, (teeny_act)act, tu.t, to.t));
            for (int i = 0; i < N; i++)
                e[i] = ref_act(act, u[i]);
            expect(&to, e, NULL, TOL_EW, "activation", repro);
            th_poison(to.t);
            TH_OK(ctx, teeny_activation_backward(ctx, (teeny_act)act, tu.t, tg.t, to.t));
            for (int i = 0; i < N; i++)
                e[i] = ref_act_grad(act, u[i]) * g[i];
            expect(&to, e, NULL, TOL_EW, "activation backward", repro);
        }
    }
    th_cpu_kernels(-1);
    double *ud = th_dbl(u, N), *vd = th_dbl(v, N), *gd = th_dbl(g, N);
    th_poison(to.t);
    TH_OK(ctx, teeny_mul(ctx, tu.t, tv.t, to.t));
    ref_mul(ud, vd, N, e);
    expect(&to, e, NULL, TOL_EW, "mul", repro);
    th_poison(to.t);
    TH_OK(ctx, teeny_mul_backward(ctx, tu.t, tv.t, tg.t, to.t, to2.t));
    ref_mul_backward(ud, vd, gd, N, e, e2);
    expect(&to, e, NULL, TOL_EW, "mul backward da", repro);
    expect(&to2, e2, NULL, TOL_EW, "mul backward db", repro);

    /* fills and uploads: the host-side stores, then the kernel stores the
     * simulator uses (ew_fill, ew_copy), into views inside guarded buffers.
     * On the simulator itself (kernel_stores already set) only the kernel
     * stores: its shadow tracking mishandles host-side stores into views
     * (src/core/device.c derive_defaults). */
    for (int kernels = ctx->kernel_stores; kernels <= 1; kernels++) {
        int saved = ctx->kernel_stores;
        ctx->kernel_stores = kernels;
        TH_OK(ctx, teeny_tensor_fill(to.t, 2.5f));
        for (int i = 0; i < N; i++)
            e[i] = 2.5;
        expect(&to, e, NULL, 0, kernels ? "fill (kernel)" : "fill", repro);
        TH_OK(ctx, teeny_tensor_write(to.t, g, N));
        expect_exact(&to, g, kernels ? "upload (kernel)" : "upload", repro);
        ctx->kernel_stores = saved;
    }
    cov_stop();

    th_dev *ds[] = {&ta, &tb, &ty, &ta2, &tb2, &tu, &tv, &tg, &to, &to2};
    free_devs(ds, 10);
    void *hs[] = {a, b, u, v, g, ad, bd, ud, vd, gd};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}
END_TEST

/* ---- the ONNX ops (group A) ----
 * Broadcasting binary ops and their gradient terms, a reduction, a
 * transpose, gather's backward, a batched matmul, softmax and layer norm
 * (the tolerances of test_strided.c, test_layout.c, test_matmul.c and
 * test_norm.c). */
START_TEST(test_conformance_onnx_ops)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(850);
    const char *repro = "a [2,3,4] op b [3,1]; reduce axes 0,2; transpose (2,0,1); gather axis 1 of [2,3,4] at "
                        "[2,0,2]; matmul [2,3,5]x[5,4]; softmax axis 1 of [2,6,3]; layernorm [4,7] axis 1; seed 850";
    int64_t sa[3] = {2, 3, 4}, sb[2] = {3, 1}, n = 24;
    ref_shape ra = {3, {2, 3, 4}}, rb = {2, {3, 1}}, ry = {3, {2, 3, 4}};
    float *a = rnd(&r, 24, 1.5, 0.3), *b = rnd(&r, 3, 1.0, 0.2), *dy = rnd(&r, 24, 0, 1);
    double *ad = th_dbl(a, 24), *bd = th_dbl(b, 3), *dyd = th_dbl(dy, 24);
    double y[24], da[24], db[3];
    cov_start();

    th_dev ta = din(3, sa, a), tb = din(2, sb, b), tdy = din(3, sa, dy), ty = dout(3, sa), tda = dout(3, sa),
           tdb = dout(2, sb);
    for (int op = TEENY_BINARY_ADD; op <= TEENY_BINARY_POW; op++) {
        th_poison(ty.t);
        TH_OK(ctx, teeny_binary(ctx, (teeny_binary_op)op, ta.t, tb.t, ty.t));
        ref_binary(op, ad, &ra, bd, &rb, y, &ry);
        expect(&ty, y, NULL, 1e-6, "binary", repro);
        th_poison(tda.t);
        th_poison(tdb.t);
        TH_OK(ctx, teeny_binary_backward(ctx, (teeny_binary_op)op, ta.t, tb.t, tdy.t, tda.t, tdb.t));
        ref_binary_backward(op, ad, &ra, bd, &rb, dyd, &ry, da, db);
        expect(&tda, da, NULL, 1e-5, "binary backward da", repro);
        expect(&tdb, db, NULL, 1e-5, "binary backward db", repro);
    }
    /* the CPU variant's forward, a row an item (st_binary_rows), on any
     * device: the cpu profile */
    ck_assert(th_profile("cpu"));
    for (int op = TEENY_BINARY_ADD; op <= TEENY_BINARY_DIV; op++) {
        th_poison(ty.t);
        TH_OK(ctx, teeny_binary(ctx, (teeny_binary_op)op, ta.t, tb.t, ty.t));
        ref_binary(op, ad, &ra, bd, &rb, y, &ry);
        expect(&ty, y, NULL, 1e-6, "binary, cpu profile", repro);
    }
    th_profile(NULL);

    /* sum over axes 0 and 2, kept: [1, 3, 1] */
    int64_t sr[3] = {1, 3, 1};
    th_dev tr = dout(3, sr);
    teeny_reduce_params rp = {5u, 1, 0};
    TH_OK(ctx, teeny_reduce(ctx, &rp, ta.t, tr.t));
    ref_reduce(ad, &ra, 5u, 0, y);
    expect(&tr, y, NULL, 1e-6, "reduce", repro);

    /* transpose (2, 0, 1): [4, 2, 3] */
    int perm[3] = {2, 0, 1};
    int64_t st[3] = {4, 2, 3}, src[24];
    ref_shape rt;
    th_dev tt = dout(3, st);
    TH_OK(ctx, teeny_transpose(ctx, perm, ta.t, tt.t));
    ref_transpose_map(&ra, perm, &rt, src);
    ref_map_forward(ad, src, n, 0, y);
    expect(&tt, y, NULL, 1e-6, "transpose", repro);
    /* rows of 20: the copy a row an item (st_copy_rows) on any device (the
     * cpu profile), and an element an item (STRIDED_ROWS -1); transpose
     * (1, 0, 2) of [2, 3, 20] */
    {
        int perm2[3] = {1, 0, 2};
        int64_t sl[3] = {2, 3, 20}, slt[3] = {3, 2, 20}, lsrc[120];
        ref_shape rl = {3, {2, 3, 20}}, rlt;
        float *l = rnd(&r, 120, 0, 1);
        double *ld = th_dbl(l, 120), ly[120];
        th_dev tl = din(3, sl, l), tlt = dout(3, slt);
        ref_transpose_map(&rl, perm2, &rlt, lsrc);
        ref_map_forward(ld, lsrc, 120, 0, ly);
        ck_assert(th_profile("cpu"));
        for (int run = 0; run < 2; run++) {
            th_hook(TEENY__HOOK_STRIDED_ROWS, run ? -1 : 0);
            th_poison(tlt.t);
            TH_OK(ctx, teeny_transpose(ctx, perm2, tl.t, tlt.t));
            expect(&tlt, ly, NULL, 0, run ? "transpose, rows of 20, an element an item" : "transpose, rows of 20",
                   repro);
        }
        th_hook(TEENY__HOOK_STRIDED_ROWS, 0);
        th_profile(NULL);
        th_dev_free(&tl);
        th_dev_free(&tlt);
        free(l);
        free(ld);
    }

    /* gather along axis 1 at [2, 0, 2]: its backward sums slice 2 twice */
    int32_t idx[3] = {2, 0, 2};
    int64_t si[1] = {3};
    ref_shape rind = {1, {3}}, rg;
    th_dev ti = th_dev_make(ctx, 1, 1, si, 0, idx), tgx = dout(3, sa);
    TH_OK(ctx, teeny_gather_backward(ctx, 1, ti.t, tdy.t, tgx.t));
    ref_gather_map(&ra, 1, &rind, idx, &rg, src);
    ref_map_backward(dyd, src, ref_numel(&rg), n, y);
    expect(&tgx, y, NULL, 1e-6, "gather backward", repro);

    /* batched matmul [2, 3, 5] x [5, 4] */
    int64_t sm[3] = {2, 3, 5}, sw[2] = {5, 4}, so[3] = {2, 3, 4};
    ref_shape rm = {3, {2, 3, 5}}, rw = {2, {5, 4}};
    float *m = rnd(&r, 30, 0, 1), *w = rnd(&r, 20, 0, 1);
    double *md = th_dbl(m, 30), *wd = th_dbl(w, 20);
    th_dev tm = din(3, sm, m), tw = din(2, sw, w), to = dout(3, so);
    TH_OK(ctx, teeny_matmul(ctx, tm.t, tw.t, to.t));
    ref_matmul(md, &rm, wd, &rw, y);
    expect(&to, y, NULL, 1e-6, "matmul", repro);

    /* softmax and log softmax along axis 1 of [2, 6, 3], forward and backward */
    int64_t ss[3] = {2, 6, 3};
    float *x = rnd(&r, 36, 0, 2), *g = rnd(&r, 36, 0, 1);
    double *xd = th_dbl(x, 36), *gd = th_dbl(g, 36), sy[36], sdx[36];
    th_dev tx = din(3, ss, x), tg = din(3, ss, g), tsy = dout(3, ss), tsdx = dout(3, ss);
    for (int lg = 0; lg < 2; lg++) {
        th_poison(tsy.t);
        TH_OK(ctx, teeny_softmax(ctx, 1, lg, tx.t, tsy.t));
        ref_softmax(xd, 2, 6, 3, lg, sy);
        expect(&tsy, sy, NULL, 1e-6, lg ? "log softmax" : "softmax", repro);
        th_poison(tsdx.t);
        TH_OK(ctx, teeny_softmax_backward(ctx, 1, lg, tsy.t, tg.t, tsdx.t));
        ref_softmax_backward(sy, gd, 2, 6, 3, lg, sdx);
        expect(&tsdx, sdx, NULL, 1e-5, lg ? "log softmax backward" : "softmax backward", repro);
    }

    /* layer norm of [4, 7] over axis 1, weight and bias, forward and backward */
    int64_t sl[2] = {4, 7}, sf[1] = {7}, s4[1] = {4};
    float *lw = rnd(&r, 7, 1, 0.2), *lb = rnd(&r, 7, 0, 0.2);
    double *lwd = th_dbl(lw, 7), *lbd = th_dbl(lb, 7), ly[28], lmean[4], lrstd[4], ldx[28], ldw[7], ldb[7];
    th_dev tlx = din(2, sl, x), tlw = din(1, sf, lw), tlb = din(1, sf, lb), tldy = din(2, sl, g), tly = dout(2, sl),
           tmean = dout(1, s4), trstd = dout(1, s4), tldx = dout(2, sl), tldw = dout(1, sf), tldb = dout(1, sf);
    TH_OK(ctx, teeny_layernorm_forward(ctx, 1, 1e-5f, tlx.t, tlw.t, tlb.t, tly.t, tmean.t, trstd.t));
    ref_layernorm(xd, 4, 7, lwd, lbd, 1e-5, ly, lmean, lrstd);
    expect(&tly, ly, NULL, 1e-5, "layernorm", repro);
    expect(&tmean, lmean, NULL, 1e-6, "layernorm mean", repro);
    expect(&trstd, lrstd, NULL, 1e-5, "layernorm rstd", repro);
    TH_OK(ctx, teeny_layernorm_backward(ctx, 1, tlx.t, tlw.t, tmean.t, trstd.t, tldy.t, tldx.t, tldw.t, tldb.t));
    ref_layernorm_backward(xd, 4, 7, lwd, gd, 1e-5, ldx, ldw, ldb);
    expect(&tldx, ldx, NULL, 1e-5, "layernorm dx", repro);
    expect(&tldw, ldw, NULL, 1e-5, "layernorm dweight", repro);
    expect(&tldb, ldb, NULL, 1e-5, "layernorm dbias", repro);
    cov_stop();

    th_dev *ds[] = {&ta, &tb, &tdy, &ty, &tda, &tdb, &tr, &tt, &ti, &tgx, &tm, &tw, &to, &tx, &tg, &tsy, &tsdx,
                    &tlx, &tlw, &tlb, &tldy, &tly, &tmean, &trstd, &tldx, &tldw, &tldb};
    free_devs(ds, (int)(sizeof ds / sizeof ds[0]));
    void *hs[] = {a, b, dy, ad, bd, dyd, m, w, md, wd, x, g, xd, gd, lw, lb, lwd, lbd};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}
END_TEST

/* Transposed convolution (group B): conv2d's passes plus convt_bias_add,
 * forward with bias and backward, against the float64 scatter reference. */
START_TEST(test_conformance_conv_transpose)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(870);
    const char *repro = "conv_transpose x [2,4,5,4] w [4,3,3,2] groups 2 stride (2,1) pad (1,0) pad_end_extra (0,1) "
                        "dilation (1,2) output_padding (1,0) bias; seed 870";
    const ref_convt c = {2, 4, 5, 4, 6, 3, 2, 2, 1, 1, 0, 1, 2, 2, 0, 1, 1, 0};
    size_t nx = ref_convt_x_numel(&c), nw = ref_convt_w_numel(&c), ny = ref_convt_y_numel(&c);
    int64_t xs[4] = {c.B, c.Cin, c.H, c.W}, ws[4] = {c.Cin, c.Cout / c.G, c.KH, c.KW},
            ys[4] = {c.B, c.Cout, ref_convt_oh(&c), ref_convt_ow(&c)}, cs = c.Cout;
    teeny_conv_transpose2d_params p = {{c.sh, c.sw}, {c.ph, c.pw}, {c.dh, c.dw}, c.G, {c.peh, c.pew}, {c.oph, c.opw}};
    float *x = rnd(&r, nx, 0, 1), *w = rnd(&r, nw, 0, 0.4), *b = rnd(&r, (size_t)c.Cout, 0, 1), *dy = rnd(&r, ny, 0, 1);
    double *xd = th_dbl(x, nx), *wd = th_dbl(w, nw), *bd = th_dbl(b, (size_t)c.Cout), *dyd = th_dbl(dy, ny);
    double *y = th_malloc(ny * sizeof *y), *dx = th_malloc(nx * sizeof *dx), *dw = th_malloc(nw * sizeof *dw),
           *mdw = th_malloc(nw * sizeof *mdw), db[6], mdb[6];
    th_dev tx = din(4, xs, x), tw = din(4, ws, w), tb = din(1, &cs, b), tdy = din(4, ys, dy), ty = dout(4, ys),
           tdx = dout(4, xs), tdw = dout(4, ws), tdb = dout(1, &cs);
    cov_start();
    TH_OK(ctx, teeny_conv_transpose2d_forward(ctx, &p, tx.t, tw.t, tb.t, ty.t));
    TH_OK(ctx, teeny_conv_transpose2d_backward(ctx, &p, tx.t, tw.t, tdy.t, tdx.t, tdw.t, tdb.t));
    cov_stop();
    ref_convt_forward(&c, xd, wd, bd, y);
    ref_convt_backward(&c, xd, wd, dyd, dx, dw, db, mdw, mdb);
    expect(&ty, y, NULL, 1e-5, "conv_transpose y", repro);
    expect(&tdx, dx, NULL, 1e-5, "conv_transpose dx", repro);
    expect(&tdw, dw, mdw, 1e-5, "conv_transpose dw", repro);
    expect(&tdb, db, mdb, 1e-5, "conv_transpose dbias", repro);
    th_dev *ds[] = {&tx, &tw, &tb, &tdy, &ty, &tdx, &tdw, &tdb};
    free_devs(ds, 8);
    void *hs[] = {x, w, b, dy, xd, wd, bd, dyd, y, dx, dw, mdw};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}
END_TEST

/* ---- resize ---- */

/* Both kernels of cl/resize.cl: nearest (round_prefer_ceil, asymmetric)
 * and bilinear (half_pixel, scale 1.5 on H, sizes on W) up- and
 * down-sampling, forward and backward against the float64 reference. */
START_TEST(test_conformance_resize)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(860);
    const char *repro = "resize [2,3,5,6] -> [7,4]: nearest asymmetric round_prefer_ceil, bilinear half_pixel "
                        "scale (1.5, sizes); seed 860";
    int64_t xs[4] = {2, 3, 5, 6}, ys[4] = {2, 3, 7, 4};
    float *x = rnd(&r, 180, 0, 1), *dy = rnd(&r, 168, 0, 1);
    double *xd = th_dbl(x, 180), *dyd = th_dbl(dy, 168), y[168], dx[180];
    th_dev tx = din(4, xs, x), tdy = din(4, ys, dy), ty = dout(4, ys), tdx = dout(4, xs);
    cov_start();
    for (int mode = 0; mode < 2; mode++) {
        ref_resize g = {2, 3, 5, 6, 7, 4, mode, mode ? TEENY_RESIZE_HALF_PIXEL : TEENY_RESIZE_ASYMMETRIC,
                        TEENY_RESIZE_ROUND_PREFER_CEIL, 1.5f, 0.0f};
        teeny_resize2d_params p = {(teeny_resize_mode)g.mode, (teeny_resize_coord)g.coord,
                                   (teeny_resize_rounding)g.rounding, {7, 4}, {1.5f, 0.0f}};
        th_poison(ty.t);
        th_poison(tdx.t);
        TH_OK(ctx, teeny_resize2d_forward(ctx, &p, tx.t, ty.t));
        TH_OK(ctx, teeny_resize2d_backward(ctx, &p, tdy.t, tdx.t));
        ref_resize_forward(&g, xd, y);
        ref_resize_backward(&g, dyd, dx);
        expect(&ty, y, NULL, 1e-6, mode ? "bilinear resize" : "nearest resize", repro);
        expect(&tdx, dx, NULL, 1e-5, mode ? "bilinear resize backward" : "nearest resize backward", repro);
    }
    cov_stop();
    th_dev *ds[] = {&tx, &tdy, &ty, &tdx};
    free_devs(ds, 4);
    void *hs[] = {x, dy, xd, dyd};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}
END_TEST

/* ---- optimizers ---- */

START_TEST(test_conformance_optim)
{
    teeny_ctx *ctx = th_ctx();
    enum { N0 = 19, N1 = 6, STEPS = 3 };
    static const struct {
        const char *name;
        teeny_optim_kind kind;
        float momentum, wd, clip;
        int nesterov;
    } cases[] = {
        {"sgd momentum nesterov", TEENY_OPTIM_SGD, 0.9f, 1e-2f, 0, 1},
        {"adam", TEENY_OPTIM_ADAM, 0, 1e-2f, 0, 0},
        {"adamw clipped", TEENY_OPTIM_ADAMW, 0, 5e-2f, 0.3f, 0},
    };
    cov_start();
    for (int ci = 0; ci < 3; ci++) {
        th_rng r = th_rng_make(900 + (uint64_t)ci);
        char repro[96];
        snprintf(repro, sizeof repro, "optim %s, params [19] and [2, 3], %d steps, seed %d", cases[ci].name, STEPS,
                 900 + ci);
        teeny_optim_params p = TEENY_OPTIM_PARAMS_INIT;
        p.kind = cases[ci].kind;
        p.lr = 0.05f;
        p.momentum = cases[ci].momentum;
        p.nesterov = cases[ci].nesterov;
        p.weight_decay = cases[ci].wd;
        p.max_grad_norm = cases[ci].clip;
        ref_optim_hyper h = {(int)p.kind, p.momentum, p.dampening, p.weight_decay, p.nesterov, p.beta2, p.eps};
        size_t n[2] = {N0, N1};
        int64_t s0[1] = {N0}, s1[2] = {2, 3};
        float *p0 = rnd(&r, N0, 0, 1), *p1 = rnd(&r, N1, 0, 1), *gf[2] = {th_malloc(N0 * 4), th_malloc(N1 * 4)};
        th_dev tp[2] = {th_dev_make(ctx, 0, 1, s0, 3, p0), th_dev_make(ctx, 0, 2, s1, 5, p1)},
               tg[2] = {th_dev_make(ctx, 0, 1, s0, 0, NULL), th_dev_make(ctx, 0, 2, s1, 0, NULL)};
        double *rp[2] = {th_dbl(p0, N0), th_dbl(p1, N1)}, *rg[2] = {th_malloc(N0 * 8), th_malloc(N1 * 8)},
               *s0r[2] = {calloc(N0, 8), calloc(N1, 8)}, *s1r[2] = {calloc(N0, 8), calloc(N1, 8)};
        teeny_optimizer *opt = NULL;
        TH_OK(ctx, teeny_optimizer_create(ctx, &p, 2, (teeny_tensor *const[]){tp[0].t, tp[1].t},
                                          (const teeny_tensor *const[]){tg[0].t, tg[1].t}, &opt));
        for (int k = 1; k <= STEPS; k++) {
            for (int i = 0; i < 2; i++) {
                th_fill_normal(&r, gf[i], n[i], 0, 0.5);
                TH_OK(ctx, teeny_tensor_write(tg[i].t, gf[i], n[i]));
                th_to_double(gf[i], rg[i], n[i]);
            }
            TH_OK(ctx, teeny_optimizer_step(opt, p.lr, -1));
            if (p.max_grad_norm > 0)
                ref_clip_grad_norm(2, rg, n, p.max_grad_norm);
            for (int i = 0; i < 2; i++)
                ref_optim_step(&h, rp[i], rg[i], s0r[i], s1r[i], n[i], p.lr, p.beta1, k);
        }
        expect(&tp[0], rp[0], NULL, TOL, "param 0", repro);
        expect(&tp[1], rp[1], NULL, TOL, "param 1", repro);
        teeny_optimizer_destroy(opt);
        for (int i = 0; i < 2; i++) {
            th_dev_free(&tp[i]);
            th_dev_free(&tg[i]);
            free(gf[i]);
            free(rp[i]);
            free(rg[i]);
            free(s0r[i]);
            free(s1r[i]);
        }
        free(p0);
        free(p1);
    }
    cov_stop();
}
END_TEST

/* ---- graph: gradient check of one small graph ---- */

typedef struct {
    teeny_graph *g;
    teeny_node x, labels, loss;
} small_net;

/* conv -> bn -> silu -> conv 1x1 -> residual add -> maxpool -> global
 * avgpool -> linear -> cross-entropy (test_graph.c's conv net) */
static void small_net_build(small_net *m)
{
    teeny_ctx *ctx = th_ctx();
    teeny_conv2d_params p3 = TEENY_CONV2D_PARAMS_INIT, p1 = TEENY_CONV2D_PARAMS_INIT;
    teeny_pool2d_params pool = TEENY_POOL2D_PARAMS_INIT;
    teeny_node a, b, c, d, e, f, h;
    int64_t xs[4] = {-1, 3, 6, 6};
    p3.pad[0] = p3.pad[1] = 1;
    TH_OK(ctx, teeny_graph_create(ctx, 1, &m->g));
    TH_OK(ctx, teeny_graph_input(m->g, "x", 4, xs, &m->x));
    TH_OK(ctx, teeny_graph_labels(m->g, "labels", &m->labels));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "conv1", m->x, 8, 3, 3, &p3, 0, &a));
    TH_OK(ctx, teeny_graph_batchnorm(m->g, "bn1", a, 0.1f, 1e-5f, &b));
    TH_OK(ctx, teeny_graph_activation(m->g, "act1", b, TEENY_ACT_SILU, &c));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "conv2", c, 8, 1, 1, &p1, 1, &d));
    TH_OK(ctx, teeny_graph_add(m->g, "res", c, d, &e));
    TH_OK(ctx, teeny_graph_maxpool2d(m->g, "pool", e, &pool, &f));
    TH_OK(ctx, teeny_graph_global_avgpool(m->g, "gap", f, &h));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc", h, 5, 1, &a));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(m->g, "loss", a, m->labels, &m->loss));
}

static float plan_loss(teeny_plan *p)
{
    float l;
    TH_OK(th_ctx(), teeny_plan_forward(p));
    TH_OK(th_ctx(), teeny_plan_read_loss(p, &l));
    return l;
}

/* Directional finite differences per parameter tensor, as test_graph.c's
 * gradcheck: (L(p + h v) - L(p - h v)) / 2h against <grad, v>. */
START_TEST(test_conformance_graph_gradients)
{
    teeny_ctx *ctx = th_ctx();
    const int64_t B = 4;
    small_net m;
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *p = NULL;
    teeny_tensor *tx, *tl;
    th_rng r = th_rng_make(99);
    cov_start();
    small_net_build(&m);
    pp.batch = B;
    pp.loss = m.loss;
    TH_OK(ctx, teeny_graph_compile(m.g, &pp, &p));
    TH_OK(ctx, teeny_plan_tensor(p, m.x, &tx));
    TH_OK(ctx, teeny_plan_tensor(p, m.labels, &tl));
    size_t nx = (size_t)teeny_tensor_numel(tx);
    float *x = rnd(&r, nx, 0, 1);
    int32_t l[4];
    for (int i = 0; i < B; i++)
        l[i] = th_int(&r, 0, 4);
    TH_OK(ctx, teeny_tensor_write(tx, x, nx));
    TH_OK(ctx, teeny_tensor_write_i32(tl, l, (size_t)B));
    TH_OK(ctx, teeny_plan_forward(p));
    TH_OK(ctx, teeny_plan_backward(p));
    for (int i = 0; i < teeny_graph_param_count(m.g); i++) {
        teeny_tensor *v, *gr;
        const char *name;
        TH_OK(ctx, teeny_graph_param(m.g, i, &name, &v, &gr));
        size_t k = (size_t)teeny_tensor_numel(v);
        float *theta = th_read(v), *grad = th_read(gr), *probe = th_malloc(k * 4);
        ck_assert_msg(th_first_nonfinite(grad, k) < 0, "%s: gradient not finite", name);
        double *dir = th_malloc(k * 8), dot = 0, norm = 0, gnorm = 0;
        for (size_t j = 0; j < k; j++) {
            dir[j] = th_normal(&r);
            dot += dir[j] * grad[j];
            norm += dir[j] * dir[j];
            gnorm += (double)grad[j] * grad[j];
        }
        double h = 1e-2 / sqrt(norm / (double)k), lp, lm;
        for (size_t j = 0; j < k; j++)
            probe[j] = (float)(theta[j] + h * dir[j]);
        TH_OK(ctx, teeny_tensor_write(v, probe, k));
        lp = plan_loss(p);
        for (size_t j = 0; j < k; j++)
            probe[j] = (float)(theta[j] - h * dir[j]);
        TH_OK(ctx, teeny_tensor_write(v, probe, k));
        lm = plan_loss(p);
        TH_OK(ctx, teeny_tensor_write(v, theta, k));
        double fd = (lp - lm) / (2 * h), scale = sqrt(gnorm * norm) + 1e-4;
        ck_assert_msg(fabs(fd - dot) <= 2e-2 * scale, "graph %s: finite difference %.6g vs analytic %.6g (scale %.3g)",
                      name, fd, dot, scale);
        free(theta);
        free(grad);
        free(probe);
        free(dir);
    }
    cov_stop();
    free(x);
    teeny_plan_destroy(p);
    teeny_graph_destroy(m.g);
}
END_TEST

/* ---- the example network: 20 training steps on synthetic data ---- */

START_TEST(test_conformance_fashion_net_trains)
{
    teeny_ctx *ctx = th_ctx();
    enum { B = 8, STEPS = 20 };
    fn_net net;
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *plan = NULL;
    teeny_tensor *tx, *tl;
    teeny_optimizer *opt = NULL;
    th_rng r = th_rng_make(1000);
    float *x = th_malloc(B * 784 * sizeof *x), loss[STEPS];
    int32_t labels[B];
    cov_start();
    TH_OK(ctx, fn_build(ctx, 3, &net));
    pp.batch = B;
    pp.loss = net.loss;
    TH_OK(ctx, teeny_graph_compile(net.g, &pp, &plan));
    /* synthetic images: a class-dependent horizontal band plus noise */
    for (int i = 0; i < B; i++) {
        labels[i] = i % FN_CLASSES;
        for (int p = 0; p < 784; p++)
            x[i * 784 + p] = (float)((p / 28) / 3 == labels[i] ? 1.5 : -0.5) + (float)(0.3 * th_normal(&r));
    }
    TH_OK(ctx, teeny_plan_tensor(plan, net.x, &tx));
    TH_OK(ctx, teeny_plan_tensor(plan, net.labels, &tl));
    TH_OK(ctx, teeny_tensor_write(tx, x, B * 784));
    TH_OK(ctx, teeny_tensor_write_i32(tl, labels, B));
    int n = teeny_graph_param_count(net.g);
    teeny_tensor **ps = th_malloc((size_t)n * sizeof *ps), **gs = th_malloc((size_t)n * sizeof *gs);
    for (int i = 0; i < n; i++)
        TH_OK(ctx, teeny_graph_param(net.g, i, NULL, &ps[i], &gs[i]));
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    op.kind = TEENY_OPTIM_ADAMW;
    op.lr = 2e-3f;
    op.weight_decay = 1e-4f;
    TH_OK(ctx, teeny_optimizer_create(ctx, &op, n, ps, (const teeny_tensor *const *)gs, &opt));
    for (int s = 0; s < STEPS; s++) {
        TH_OK(ctx, teeny_plan_forward(plan));
        TH_OK(ctx, teeny_plan_backward(plan));
        TH_OK(ctx, teeny_optimizer_step(opt, op.lr, -1));
        TH_OK(ctx, teeny_plan_read_loss(plan, &loss[s]));
        ck_assert_msg(isfinite(loss[s]), "step %d: loss %g", s, (double)loss[s]);
        cov_stop(); /* a step is ~150 launches: keep the profile short */
        cov_start();
    }
    ck_assert_msg(loss[STEPS - 1] < 0.8f * loss[0], "loss did not fall: %g -> %g", (double)loss[0],
                  (double)loss[STEPS - 1]);
    for (int i = 0; i < n; i++) {
        float *v = th_read(ps[i]);
        ck_assert_msg(th_first_nonfinite(v, (size_t)teeny_tensor_numel(ps[i])) < 0, "parameter %d not finite", i);
        free(v);
    }
    cov_stop();
    teeny_optimizer_destroy(opt);
    teeny_plan_destroy(plan);
    teeny_graph_destroy(net.g);
    free(ps);
    free(gs);
    free(x);
}
END_TEST

/* ---- probes ----
 * The capability probes (src/program/probe.c) run on a queue of their
 * own, outside the profile, once per context: run them again here and
 * note their kernels for the coverage check. */
START_TEST(test_conformance_probes)
{
    teeny_ctx *ctx = th_ctx();
    int64_t budget = 0;
    int tf32 = -1;
    th_loop_limit(-1);
    TH_OK(ctx, teeny__loop_budget(ctx, &budget));
    ck_assert_msg(ctx->prog.loop_probed && budget > 1000, "loop budget %lld", (long long)budget);
    cov_note("probe_loop_trips");
    ctx->prog.tf32_probed = 0;
    TH_OK(ctx, teeny__tf32_capable(ctx, &tf32));
    ck_assert(ctx->prog.tf32_probed && (tf32 == 0 || tf32 == 1));
    if (ctx->info.has_nvidia_ptx) /* the only devices where its kernel is built */
        cov_note("probe_tf32_mma");
}
END_TEST

/* ---- coverage: every kernel of the embedded sources was launched ---- */

START_TEST(test_conformance_kernel_coverage)
{
    static char all[COV_MAX][64];
    int n = 0;
    const char *fork = getenv("CK_FORK");
    ck_assert_msg(fork && !strcmp(fork, "no"),
                  "the coverage check needs CK_FORK=no (the earlier tests' launches are collected in this process)");
    for (int i = 0; i < teeny__n_sources; i++)
        n = cov_source_kernels((const char *)teeny__sources[i].data, all, n, COV_MAX);
    ck_assert_msg(n > 40, "only %d kernels found in the embedded sources", n);
    char missing[2048] = "";
    int n_missing = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < cov_n_seen && !seen; j++)
            seen = !strcmp(all[i], cov_seen[j]);
        seen = seen || cov_unused_ok(all[i]);
        if (!seen) {
            n_missing++;
            strncat(missing, " ", sizeof missing - strlen(missing) - 1);
            strncat(missing, all[i], sizeof missing - strlen(missing) - 1);
        }
    }
    for (int j = 0; j < cov_n_seen; j++) {
        int known = 0;
        for (int i = 0; i < n && !known; i++)
            known = !strcmp(all[i], cov_seen[j]);
        ck_assert_msg(known, "launched kernel %s is not a __kernel of the embedded sources", cov_seen[j]);
    }
    fprintf(stderr, "conformance: %d of %d kernels launched on %s\n", n - n_missing, n,
            teeny_ctx_device_name(th_ctx()));
    ck_assert_msg(n_missing == 0, "%d kernel(s) never launched by the conformance suite:%s", n_missing, missing);
    /* no build from source in this process warned (TEENY_LOG=debug shows the log) */
    ck_assert_msg(th_ctx()->prog.build_warnings == 0, "%d kernel build(s) warned on %s (run with TEENY_LOG=debug)",
                  th_ctx()->prog.build_warnings, teeny_ctx_device_name(th_ctx()));
}
END_TEST

Suite *suite_conformance(void)
{
    Suite *s = suite_create("conformance");
    TCase *tc = tcase_create("kernels");
    tcase_add_test(tc, test_conformance_batchnorm);
    tcase_add_test(tc, test_conformance_conv2d);
    tcase_add_test(tc, test_conformance_attention);
    tcase_add_test(tc, test_conformance_psa);
    tcase_add_test(tc, test_conformance_pool);
    tcase_add_test(tc, test_conformance_linear_loss);
    tcase_add_test(tc, test_conformance_elementwise);
    tcase_add_test(tc, test_conformance_onnx_ops);
    tcase_add_test(tc, test_conformance_conv_transpose);
    tcase_add_test(tc, test_conformance_resize);
    tcase_add_test(tc, test_conformance_optim);
    tcase_add_test(tc, test_conformance_probes);
    tcase_add_test(tc, test_conformance_long_loops);
    suite_add_tcase(s, tc);
    tc = tcase_create("graph");
    tcase_add_test(tc, test_conformance_graph_gradients);
    /* not in small mode (sanitizers, oclgrind), for time only: its kernels
     * are all launched by the cases above */
    if (!th_small())
        tcase_add_test(tc, test_conformance_fashion_net_trains);
    suite_add_tcase(s, tc);
    tc = tcase_create("coverage");
    tcase_add_test(tc, test_conformance_kernel_coverage);
    suite_add_tcase(s, tc);
    return s;
}
