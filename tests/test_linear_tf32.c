/*
 * test_linear_tf32.c -- the linear layer and MatMul with tf32 tensor cores
 * (teeny_ctx_set_tf32; cl/linear.cl's TEENY_TF32 tile): every use of the
 * GEMM (forward with and without bias, dx, dw, batched MatMul with
 * broadcasting and its gradients, k segments) over seeded shapes that
 * divide neither the tile nor 8, within TF32_TOL of the float64
 * references, outputs in NaN-poisoned views whose guards stay untouched,
 * the same bits twice and not fp32's bits. Where teeny_ctx_tf32_active is
 * 0 these tests are counted as skipped, with the reason; and on any device
 * a context without tf32 (here, or forced onto a profile without tf32
 * tiles) gives fp32's bits when tf32 is requested.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clwrap.h"
#include "harness.h"
#include "linear_case.h"
#include "internal.h"
#include "ops/ops.h"
#include "ref/linear_ref.h"
#include "ref/matmul_ref.h"

#define TF32_TOL 1e-3 /* the bound on normalized RMS error in tf32 mode */

static void expect_tf32(const th_dev *d, const double *ref, const double *mag, const char *what, const char *repro)
{
    float *out = th_read(d->t);
    long bad = th_first_nonfinite(out, (size_t)d->n);
    ck_assert_msg(bad < 0, "%s: element %ld not written; %s", what, bad, repro);
    double e = mag ? th_nrms_mag(out, ref, mag, (size_t)d->n) : th_nrms(out, ref, (size_t)d->n);
    ck_assert_msg(e <= TF32_TOL, "%s: nrms %.3g > %.0e; %s", what, e, TF32_TOL, repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

/* The layer's outputs y, dx, dw, db of one call each, read back. */
typedef struct {
    float *o[4];
} lin_bits;

/* Forward and backward once (outputs poisoned first); the bits read back. */
static lin_bits case_run(teeny_ctx *ctx, lin_case *c)
{
    lin_bits bits;
    th_dev *outs[4] = {&c->y, &c->dx, &c->dw, &c->db};
    for (int i = 0; i < 4; i++)
        th_poison(outs[i]->t);
    TH_OK(ctx, teeny_linear_forward(ctx, c->x.t, c->w.t, c->bias ? c->b.t : NULL, c->y.t));
    TH_OK(ctx, teeny_linear_backward(ctx, c->x.t, c->w.t, c->dy.t, c->dx.t, c->dw.t, c->db.t));
    for (int i = 0; i < 4; i++)
        bits.o[i] = th_read(outs[i]->t);
    return bits;
}

static void bits_free(lin_bits *b)
{
    for (int i = 0; i < 4; i++)
        free(b->o[i]);
}

/* Each output of a and b has the same bits (want 1) or the GEMM outputs
 * y, dx, dw all differ somewhere (want 0; db is no GEMM). */
static void bits_expect(const lin_case *c, const lin_bits *a, const lin_bits *b, int want, const char *what,
                        const char *repro)
{
    size_t n[4] = {(size_t)c->y.n, (size_t)c->dx.n, (size_t)c->dw.n, (size_t)c->db.n};
    for (int i = 0; i < (want ? 4 : 3); i++)
        ck_assert_msg((memcmp(a->o[i], b->o[i], n[i] * 4) == 0) == want, "output %d (y, dx, dw, db): %s; %s", i, what,
                      repro);
}

/* Shape i: every third larger than the 64 x 64 tile, sizes that divide
 * neither it nor 8, some 1-sized, some K past several k panels. */
static void sweep_shape(th_rng *r, int i, lin_case *c)
{
    int big = i % 3 == 0;
    c->N = th_int(r, 1, big ? 200 : 40);
    c->in = th_int(r, 1, big ? 300 : 50);
    c->out = th_int(r, 1, big ? 150 : 40);
    if (i % 7 == 1)
        c->N = 1;
    if (i % 11 == 2)
        c->in = 1;
    if (i % 5 == 4) /* multiples of 8 and of the tile, for the aligned paths */
        c->N = 64 * th_int(r, 1, 2), c->in = 8 * th_int(r, 1, 9), c->out = 64;
    c->bias = i % 4 != 3;
    c->view = i % 2 ? 1 + 2 * (i % 4) : 0;
}

static int n_sweep(void)
{
    return th_small() ? 4 : th_full() ? 120 : 30;
}

/* Sweep shape i of the layer in tf32: y (with or without bias), dx, dw,
 * db against the float64 references; the same bits on a second run; not
 * fp32's bits. */
static void layer_case(teeny_ctx *ctx, int i)
{
    uint64_t seed = 8000 + (uint64_t)i;
    th_rng r = th_rng_make(seed);
    lin_case c;
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    sweep_shape(&r, i, &c);
    char repro[160];
    snprintf(repro, sizeof repro, "tf32: x [%d, %d] w [%d, %d]%s%s seed %llu", c.N, c.in, c.out, c.in,
             c.bias ? " bias" : "", c.view ? " (views)" : "", (unsigned long long)seed);
    lin_case_make(ctx, &c, seed);
    lin_bits t1 = case_run(ctx, &c);
    size_t nx = (size_t)c.N * c.in, nw = (size_t)c.out * c.in, ny = (size_t)c.N * c.out;
    double *x = th_dbl(c.hx, nx), *w = th_dbl(c.hw, nw), *b = th_dbl(c.hb, (size_t)c.out), *dy = th_dbl(c.hdy, ny);
    double *ref[4] = {th_malloc(ny * 8), th_malloc(nx * 8), th_malloc(nw * 8), th_malloc((size_t)c.out * 8)};
    double *mag[4] = {th_malloc(ny * 8), th_malloc(nx * 8), th_malloc(nw * 8), th_malloc((size_t)c.out * 8)};
    ref_linear_forward(x, w, c.bias ? b : NULL, c.N, c.in, c.out, ref[0]);
    ref_linear_backward(x, w, dy, c.N, c.in, c.out, ref[1], ref[2], ref[3]);
    ref_linear_mags(x, w, dy, c.N, c.in, c.out, mag[0], mag[1], mag[2], mag[3]);
    for (size_t i = 0; c.bias && i < ny; i++)
        mag[0][i] += fabs(b[i % (size_t)c.out]);
    th_dev *outs[4] = {&c.y, &c.dx, &c.dw, &c.db};
    static const char *const names[4] = {"y", "dx", "dw", "db"};
    for (int i = 0; i < 4; i++)
        expect_tf32(outs[i], ref[i], mag[i], names[i], repro);
    lin_bits t2 = case_run(ctx, &c);
    bits_expect(&c, &t1, &t2, 1, "tf32 differs between runs", repro);
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    lin_bits f = case_run(ctx, &c);
    /* fp32's bits differ once an operand rounds: K >= 2 and enough elements */
    if (c.in >= 8 && c.N >= 8 && c.out >= 8)
        bits_expect(&c, &t1, &f, 0, "tf32 gives fp32's bits: not engaged", repro);
    bits_free(&t1);
    bits_free(&t2);
    bits_free(&f);
    for (int i = 0; i < 4; i++) {
        free(ref[i]);
        free(mag[i]);
    }
    free(x);
    free(w);
    free(b);
    free(dy);
    lin_case_free(&c);
}

START_TEST(test_linear_tf32_layer)
{
    teeny_ctx *ctx = th_ctx();
    TH_SKIP_NO_TF32(ctx);
    for (int i = 0; i < n_sweep(); i++)
        layer_case(ctx, i);
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
}
END_TEST

/* Batched MatMul in tf32: a [2, 1, M, K] b [3, K, N] -> y [2, 3, M, N]
 * (both operands broadcast), da and db summed over the broadcast batch
 * dimensions; references, deterministic bits, not fp32's. */
static void matmul_cases(teeny_ctx *ctx)
{
    static const int mkn[3][3] = {{37, 45, 29}, {70, 130, 66}, {9, 200, 100}};
    for (int ci = 0; ci < 3; ci++) {
        int M = mkn[ci][0], K = mkn[ci][1], N = mkn[ci][2];
        ref_shape as = {4, {2, 1, M, K}}, bs = {3, {3, K, N}}, ys;
        ck_assert(ref_matmul_shape(&as, &bs, &ys));
        int64_t na = ref_numel(&as), nb = ref_numel(&bs), ny = ref_numel(&ys);
        th_rng r = th_rng_make(8500 + (uint64_t)ci);
        float *a = th_malloc((size_t)na * 4), *b = th_malloc((size_t)nb * 4), *dy = th_malloc((size_t)ny * 4);
        th_fill_uniform(&r, a, (size_t)na, -1, 1);
        th_fill_uniform(&r, b, (size_t)nb, -1, 1);
        th_fill_uniform(&r, dy, (size_t)ny, -1, 1);
        double *ad = th_dbl(a, (size_t)na), *bd = th_dbl(b, (size_t)nb), *dyd = th_dbl(dy, (size_t)ny);
        double *ref[3] = {th_malloc((size_t)ny * 8), th_malloc((size_t)na * 8), th_malloc((size_t)nb * 8)};
        ref_matmul(ad, &as, bd, &bs, ref[0]);
        ref_matmul_backward(ad, &as, bd, &bs, dyd, ref[1], ref[2]);
        th_dev ta = th_dev_make(ctx, 0, as.ndim, as.d, 3, a), tb = th_dev_make(ctx, 0, bs.ndim, bs.d, 0, b),
               tdy = th_dev_make(ctx, 0, ys.ndim, ys.d, 5, dy);
        th_dev out[3] = {th_dev_make(ctx, 0, ys.ndim, ys.d, 1, NULL), th_dev_make(ctx, 0, as.ndim, as.d, 7, NULL),
                         th_dev_make(ctx, 0, bs.ndim, bs.d, 2, NULL)};
        char repro[128];
        snprintf(repro, sizeof repro, "tf32 matmul a [2, 1, %d, %d] b [3, %d, %d]", M, K, K, N);
        float *bits[3][3]; /* run (tf32, tf32, fp32) x output */
        for (int run = 0; run < 3; run++) {
            TH_OK(ctx, teeny_ctx_set_tf32(ctx, run < 2));
            for (int i = 0; i < 3; i++)
                th_poison(out[i].t);
            TH_OK(ctx, teeny_matmul(ctx, ta.t, tb.t, out[0].t));
            TH_OK(ctx, teeny_matmul_backward(ctx, ta.t, tb.t, tdy.t, out[1].t, out[2].t));
            for (int i = 0; i < 3; i++)
                bits[run][i] = th_read(out[i].t);
            for (int i = 0; run == 0 && i < 3; i++) /* plain nrms, as test_matmul measures */
                expect_tf32(&out[i], ref[i], NULL, i == 0 ? "y" : i == 1 ? "da" : "db", repro);
        }
        for (int i = 0; i < 3; i++) {
            ck_assert_msg(!memcmp(bits[0][i], bits[1][i], (size_t)out[i].n * 4), "output %d differs between runs; %s",
                          i, repro);
            ck_assert_msg(memcmp(bits[0][i], bits[2][i], (size_t)out[i].n * 4) != 0,
                          "output %d has fp32's bits: tf32 not engaged; %s", i, repro);
            for (int run = 0; run < 3; run++)
                free(bits[run][i]);
            free(ref[i]);
            th_dev_free(&out[i]);
        }
        free(a);
        free(b);
        free(dy);
        free(ad);
        free(bd);
        free(dyd);
        th_dev_free(&ta);
        th_dev_free(&tb);
        th_dev_free(&tdy);
    }
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
}

START_TEST(test_linear_tf32_matmul)
{
    teeny_ctx *ctx = th_ctx();
    TH_SKIP_NO_TF32(ctx);
    matmul_cases(ctx);
}
END_TEST

/* k segments in tf32 (a loop limit forced with th_loop_limit, as Mesa's
 * llvmpipe has one): C carries the sums from launch to launch, the bias
 * comes with the last; the bits of one launch, in more launches. Forward
 * K = in = 300, dw's K = N = 300. */
static void segment_cases(teeny_ctx *ctx)
{
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    static const int shapes[2][3] = {{37, 300, 70}, {300, 45, 66}}; /* N, in, out */
    for (int ci = 0; ci < 2; ci++) {
        lin_case c = {.N = shapes[ci][0], .in = shapes[ci][1], .out = shapes[ci][2], .bias = 1, .view = 3};
        char repro[96];
        snprintf(repro, sizeof repro, "tf32 k segments: x [%d, %d] w [%d, %d]", c.N, c.in, c.out, c.in);
        lin_case_make(ctx, &c, 8600 + (uint64_t)ci);
        lin_bits bits[2];
        long n[2];
        for (int run = 0; run < 2; run++) {
            th_loop_limit(run ? 4000 : 0);
            teeny__calls_reset();
            bits[run] = case_run(ctx, &c);
            TH_OK(ctx, teeny_ctx_finish(ctx));
            n[run] = teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel);
        }
        th_loop_limit(-1);
        ck_assert_msg(n[1] > n[0], "%ld launches, %ld without the limit: nothing split; %s", n[1], n[0], repro);
        bits_expect(&c, &bits[0], &bits[1], 1, "k segments differ from one launch", repro);
        th_dev *outs[4] = {&c.y, &c.dx, &c.dw, &c.db};
        for (int i = 0; i < 4; i++)
            th_dev_check_guard(outs[i], "segmented output", repro);
        bits_free(&bits[0]);
        bits_free(&bits[1]);
        lin_case_free(&c);
    }
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
}

START_TEST(test_linear_tf32_segments)
{
    teeny_ctx *ctx = th_ctx();
    TH_SKIP_NO_TF32(ctx);
    segment_cases(ctx);
}
END_TEST

/* The same checks on the tf32 tile emulated in portable OpenCL C
 * (the test hook LINEAR_TF32_EMULATE: cl/common.cl's tf32_round and a
 * warp's mma through local memory) with the nvidia profile's linear_tf32
 * tuning, on any device: the tile's staging, fragment loads, C fragment
 * positions, bounds, bias and k segments run wherever the suite does. */
START_TEST(test_linear_tf32_emulated)
{
    teeny_ctx *ctx = th_ctx();
    if (!th_profile("nvidia"))
        th_skip("%s cannot take the nvidia profile's work-groups and local memory", teeny_ctx_device_name(ctx));
    th_hook(TEENY__HOOK_LINEAR_TF32_EMULATE, 1);
    for (int i = 0; i < (th_small() ? 3 : 8); i++)
        layer_case(ctx, i);
    matmul_cases(ctx);
    segment_cases(ctx);
    th_hook(TEENY__HOOK_LINEAR_TF32_EMULATE, 0);
    th_profile(NULL);
}
END_TEST

/* tf32 requested where it does not run gives fp32's bits: on this device
 * if it has no tf32, else forced onto the "generic" profile (no tf32
 * tunings), where teeny_ctx_tf32_active must then say 0. */
START_TEST(test_linear_tf32_fallback)
{
    teeny_ctx *ctx = th_ctx();
    int active = -1, forced = 0;
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    TH_OK(ctx, teeny_ctx_tf32_active(ctx, &active));
    if (active) {
        forced = th_profile("generic");
        if (!forced) {
            TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
            th_skip("%s runs tf32 and cannot take the generic profile to run without it", teeny_ctx_device_name(ctx));
        }
        TH_OK(ctx, teeny_ctx_tf32_active(ctx, &active));
        ck_assert_int_eq(active, 0);
    }
    lin_case c = {.N = 70, .in = 45, .out = 66, .bias = 1, .view = 3};
    lin_case_make(ctx, &c, 8700);
    lin_bits bits[2];
    for (int run = 0; run < 2; run++) { /* tf32 requested, then not */
        TH_OK(ctx, teeny_ctx_set_tf32(ctx, run == 0));
        bits[run] = case_run(ctx, &c);
    }
    bits_expect(&c, &bits[0], &bits[1], 1, "tf32 requested without tf32 changed the bits", "fallback");
    /* MatMul too */
    int64_t as[3] = {2, 9, 45}, bs[2] = {45, 10}, ys[3] = {2, 9, 10};
    th_rng r = th_rng_make(8701);
    float ha[2 * 9 * 45], hb[45 * 10], *y[2];
    th_fill_uniform(&r, ha, sizeof ha / 4, -1, 1);
    th_fill_uniform(&r, hb, sizeof hb / 4, -1, 1);
    th_dev ta = th_dev_make(ctx, 0, 3, as, 0, ha), tb = th_dev_make(ctx, 0, 2, bs, 0, hb),
           ty = th_dev_make(ctx, 0, 3, ys, 1, NULL);
    for (int run = 0; run < 2; run++) {
        TH_OK(ctx, teeny_ctx_set_tf32(ctx, run == 0));
        TH_OK(ctx, teeny_matmul(ctx, ta.t, tb.t, ty.t));
        y[run] = th_read(ty.t);
    }
    ck_assert_msg(!memcmp(y[0], y[1], (size_t)ty.n * 4), "matmul: tf32 requested without tf32 changed the bits");
    if (forced)
        th_profile(NULL);
    free(y[0]);
    free(y[1]);
    th_dev_free(&ta);
    th_dev_free(&tb);
    th_dev_free(&ty);
    bits_free(&bits[0]);
    bits_free(&bits[1]);
    lin_case_free(&c);
}
END_TEST

Suite *suite_linear_tf32(void)
{
    Suite *s = suite_create("linear_tf32");
    TCase *tf = tcase_create("tf32");
    tcase_add_test(tf, test_linear_tf32_layer);
    tcase_add_test(tf, test_linear_tf32_matmul);
    tcase_add_test(tf, test_linear_tf32_segments);
    tcase_add_test(tf, test_linear_tf32_fallback);
    tcase_add_test(tf, test_linear_tf32_emulated);
    suite_add_tcase(s, tf);
    return s;
}
