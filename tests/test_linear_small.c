/*
 * test_linear_small.c -- the linear layer's small route (cl/linear.cl's
 * lin_gemm_small, linear.c's small_route), a TCase of the linear suite:
 * forced through the test hook LINEAR_SMALL over seeded shapes (sizes of
 * 1, odd sizes, K of each product -- in for y, out for dx, N for dw --
 * up to a few thousand, with and without bias, views at odd offsets in
 * NaN-poisoned buffers) against the float64 references, with the tiled
 * route's bits (the same sum in the same order), and so the CPU tuning's
 * route (conv2d's CPU GEMM, linear.c's cpu_route); the k segments of both
 * where a device limits loop trips; and the plan: the example's
 * classifier on an H200-sized device takes it, large or deep products and
 * tf32 do not.
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

#define TOL 1e-5 /* test_linear.c's */

/* Forward and backward (db only with want_db) into NaN-poisoned outputs;
 * st each; the outputs read back into got (NULL: not read). */
static void sm_run(teeny_ctx *ctx, lin_case *c, int want_db, teeny_status st, float *got[4])
{
    for (int i = 0; i < 4; i++)
        th_poison(lin_case_out(c, i)->t);
    TH_STATUS(ctx, st, teeny_linear_forward(ctx, c->x.t, c->w.t, c->bias ? c->b.t : NULL, c->y.t));
    TH_STATUS(ctx, st, teeny_linear_backward(ctx, c->x.t, c->w.t, c->dy.t, c->dx.t, c->dw.t,
                                             want_db ? c->db.t : NULL));
    for (int i = 0; got && i < 4; i++)
        got[i] = th_read(lin_case_out(c, i)->t);
}

static void bits_free(float *b[4])
{
    for (int i = 0; i < 4; i++)
        free(b[i]);
}

/* Shape i: small odd sizes; every fourth case one of the three K (in,
 * N, out) in the hundreds or thousands; some sizes 1. */
static void sm_shape(th_rng *r, int i, lin_case *c)
{
    c->N = th_int(r, 1, 40);
    c->in = th_int(r, 1, 60);
    c->out = th_int(r, 1, 30);
    if (i % 4 == 1)
        c->in = th_int(r, 500, 3000);
    if (i % 4 == 2)
        c->N = th_int(r, 500, 3000);
    if (i % 4 == 3)
        c->out = th_int(r, 300, 1500);
    if (i % 5 == 0)
        c->N = 1;
    if (i % 7 == 3)
        c->in = 1;
    if (i % 6 == 5)
        c->out = 1;
    c->bias = i % 3 != 2;
    c->view = i % 2 ? 1 + 2 * (i % 4) : 0;
}

/* Sweep case i on the small route: y (with or without bias), dx, dw, db
 * against the float64 references, guards untouched; then the tiled
 * route's outputs have the same bits. */
START_TEST(test_linear_small_layer)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 9100 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    lin_case c;
    sm_shape(&r, _i, &c);
    char repro[160];
    snprintf(repro, sizeof repro, "small route: x [%d, %d] w [%d, %d]%s%s seed %llu", c.N, c.in, c.out, c.in,
             c.bias ? " bias" : "", c.view ? " (views)" : "", (unsigned long long)seed);
    lin_case_make(ctx, &c, seed);
    float *small[4], *tile[4];
    th_hook(TEENY__HOOK_LINEAR_SMALL, 1);
    sm_run(ctx, &c, 1, TEENY_OK, small);
    size_t nx = (size_t)c.N * c.in, nw = (size_t)c.out * c.in, ny = (size_t)c.N * c.out, n[4] = {ny, nx, nw};
    n[3] = (size_t)c.out;
    double *x = th_dbl(c.hx, nx), *w = th_dbl(c.hw, nw), *b = th_dbl(c.hb, (size_t)c.out), *dy = th_dbl(c.hdy, ny);
    double *ref[4], *mag[4];
    for (int i = 0; i < 4; i++) {
        ref[i] = th_malloc(n[i] * 8);
        mag[i] = th_malloc(n[i] * 8);
    }
    ref_linear_forward(x, w, c.bias ? b : NULL, c.N, c.in, c.out, ref[0]);
    ref_linear_backward(x, w, dy, c.N, c.in, c.out, ref[1], ref[2], ref[3]);
    ref_linear_mags(x, w, dy, c.N, c.in, c.out, mag[0], mag[1], mag[2], mag[3]);
    for (size_t i = 0; c.bias && i < ny; i++)
        mag[0][i] += fabs(b[i % (size_t)c.out]);
    static const char *const names[4] = {"y", "dx", "dw", "db"};
    for (int i = 0; i < 4; i++) {
        long bad = th_first_nonfinite(small[i], n[i]);
        ck_assert_msg(bad < 0, "%s: element %ld not written; %s", names[i], bad, repro);
        double e = th_nrms_mag(small[i], ref[i], mag[i], n[i]);
        ck_assert_msg(e <= TOL, "%s: nrms %.3g > %.1g; %s", names[i], e, TOL, repro);
        th_dev_check_guard(lin_case_out(&c, i), names[i], repro);
    }
    th_hook(TEENY__HOOK_LINEAR_SMALL, -1);
    th_hook(TEENY__HOOK_LINEAR_CPU_GEMM, -1);
    sm_run(ctx, &c, 1, TEENY_OK, tile);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(!memcmp(small[i], tile[i], n[i] * 4), "%s: the small route's bits differ from lin_gemm's; %s",
                      names[i], repro);
    /* the CPU tuning's route (conv2d's CPU GEMM): the same bits again */
    ck_assert(th_profile("cpu"));
    th_hook(TEENY__HOOK_LINEAR_CPU_GEMM, 0);
    float *cpu[4];
    sm_run(ctx, &c, 1, TEENY_OK, cpu);
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(!memcmp(cpu[i], tile[i], n[i] * 4), "%s: the CPU GEMM's bits differ from lin_gemm's; %s",
                      names[i], repro);
        th_dev_check_guard(lin_case_out(&c, i), names[i], repro);
    }
    th_profile(NULL);
    bits_free(cpu);
    bits_free(small);
    bits_free(tile);
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
END_TEST

/* Where a device limits a work-item's loop trips (th_loop_limit): the
 * small route's k loop (19 trips per step of 8, 10 around it) runs in
 * launches over k segments, C carrying the sums, with one launch's bits;
 * limit 200 (budget 100): 4 steps a launch, K = 300 in 10 launches and
 * K = 260 in 9; limit 40 (budget 20 < 29) is TEENY_ERR_UNSUPPORTED with
 * nothing launched. y, dx, dw (db's runs are test_linear.c's). */
START_TEST(test_linear_small_segments)
{
    teeny_ctx *ctx = th_ctx();
    /* K = 300 for y, for dw, and K = 260 for dx */
    static const int shapes[3][3] = {{5, 300, 7}, {300, 6, 5}, {4, 9, 260}};
    static const long launches[3] = {10 + 1 + 1, 1 + 1 + 10, 1 + 9 + 1};
    th_hook(TEENY__HOOK_LINEAR_SMALL, 1);
    for (int ci = 0; ci < 3; ci++) {
        lin_case c = {.N = shapes[ci][0], .in = shapes[ci][1], .out = shapes[ci][2], .bias = 1, .view = ci};
        float *one[4], *got[4];
        lin_case_make(ctx, &c, 9300 + (uint64_t)ci);
        for (int li = 0; li < 3; li++) {
            long limit = li == 0 ? 0 : li == 1 ? 200 : 40;
            th_loop_limit(limit);
            teeny__calls_reset();
            sm_run(ctx, &c, 0, li == 2 ? TEENY_ERR_UNSUPPORTED : TEENY_OK, li == 2 ? NULL : li ? got : one);
            TH_OK(ctx, teeny_ctx_finish(ctx));
            long n = teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel);
            if (li == 2) {
                ck_assert_int_eq(n, 0);
                for (int j = 0; j < 3; j++)
                    th_expect_all(lin_case_out(&c, j)->t, NAN);
                continue;
            }
            ck_assert_msg(li == 0 ? n == 3 : n == launches[ci], "case %d, limit %ld: %ld launches", ci, limit, n);
            for (int j = 0; li == 1 && j < 3; j++)
                ck_assert_msg(!memcmp(got[j], one[j], (size_t)lin_case_out(&c, j)->n * 4),
                              "case %d: output %d in segments differs from one launch's", ci, j);
            for (int j = 0; j < 3; j++)
                th_dev_check_guard(lin_case_out(&c, j), "small route output", "test_linear_small_segments");
            if (li == 1)
                bits_free(got);
        }
        th_loop_limit(-1);
        bits_free(one);
        lin_case_free(&c);
    }
}
END_TEST

/* The CPU tuning's route (conv2d's CPU GEMM) where a device limits a
 * work-item's loop trips: its k ranges run as launches in order, C
 * carrying the sums, with one launch's bits and more launches; y, dx, dw
 * of the shapes above. */
START_TEST(test_linear_cpu_segments)
{
    teeny_ctx *ctx = th_ctx();
    static const int shapes[3][3] = {{5, 300, 7}, {300, 6, 5}, {4, 9, 260}};
    ck_assert(th_profile("cpu"));
    th_hook(TEENY__HOOK_LINEAR_SMALL, -1);
    for (int ci = 0; ci < 3; ci++) {
        lin_case c = {.N = shapes[ci][0], .in = shapes[ci][1], .out = shapes[ci][2], .bias = 1, .view = ci};
        float *one[4], *got[4];
        long n[2];
        lin_case_make(ctx, &c, 9350 + (uint64_t)ci);
        for (int li = 0; li < 2; li++) {
            th_loop_limit(li ? 1000 : 0);
            teeny__calls_reset();
            sm_run(ctx, &c, 0, TEENY_OK, li ? got : one);
            TH_OK(ctx, teeny_ctx_finish(ctx));
            n[li] = teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel);
            for (int j = 0; j < 3; j++)
                th_dev_check_guard(lin_case_out(&c, j), "CPU GEMM output", "test_linear_cpu_segments");
        }
        ck_assert_msg(n[1] > n[0], "case %d: %ld launches under the limit, %ld without", ci, n[1], n[0]);
        for (int j = 0; j < 3; j++)
            ck_assert_msg(!memcmp(got[j], one[j], (size_t)lin_case_out(&c, j)->n * 4),
                          "case %d: output %d in k ranges differs from one launch's", ci, j);
        th_loop_limit(-1);
        bits_free(one);
        bits_free(got);
        lin_case_free(&c);
    }
    th_profile(NULL);
}
END_TEST

static int route_of(teeny_ctx *ctx, int M, int N, int K)
{
    int small = -1;
    TH_OK(ctx, teeny__linear_route(ctx, M, N, K, &small));
    return small;
}

/* The plan on an H200-sized device (the nvidia profile, 132 units): the
 * example's classifier at batch 128 (y [128, 10] of K 128, dx [128, 128]
 * of K 10, dw [10, 128] of K 128) takes the small route, and a forward
 * run launches its one item an output; large outputs, K past 4096 and
 * tf32 mode take lin_gemm; the hook forces either way. */
START_TEST(test_linear_small_plan)
{
    teeny_ctx *ctx = th_ctx();
    if (!th_profile("nvidia"))
        th_skip("%s cannot take the nvidia profile's work-groups and local memory", teeny_ctx_device_name(ctx));
    th_compute_units(132);
    ck_assert(route_of(ctx, 128, 10, 128) && route_of(ctx, 128, 128, 10) && route_of(ctx, 10, 128, 128));
    ck_assert(route_of(ctx, 1, 1, 1) && route_of(ctx, 1, 128 * 132, 64) && route_of(ctx, 10, 10, 4096));
    ck_assert(!route_of(ctx, 1, 128 * 132 + 1, 64) && !route_of(ctx, 10, 10, 4097));
    ck_assert(!route_of(ctx, 128, 1000, 128) && !route_of(ctx, 1024, 1024, 1024));
    th_hook(TEENY__HOOK_LINEAR_SMALL, -1);
    ck_assert(!route_of(ctx, 128, 10, 128));
    th_hook(TEENY__HOOK_LINEAR_SMALL, 1);
    ck_assert(route_of(ctx, 1024, 1024, 1024));
    th_hook(TEENY__HOOK_LINEAR_TF32_EMULATE, 1); /* tf32 mode (emulated on any device): the tf32 tile, even forced */
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    ck_assert(!route_of(ctx, 128, 10, 128));
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    th_hook(TEENY__HOOK_LINEAR_TF32_EMULATE, 0);
    th_hook(TEENY__HOOK_LINEAR_SMALL, 0);
    /* the classifier's forward: 1280 items (the small route) against
     * lin_gemm's 2 work-groups of 256; the same bits */
    lin_case c = {.N = 128, .in = 128, .out = 10, .bias = 1, .view = 1};
    float *by[2][4];
    lin_case_make(ctx, &c, 9400);
    for (int run = 0; run < 2; run++) {
        th_hook(TEENY__HOOK_LINEAR_SMALL, run ? -1 : 0);
        TH_OK(ctx, teeny_ctx_finish(ctx));
        ctx->prog.items_enqueued = 0;
        TH_OK(ctx, teeny_linear_forward(ctx, c.x.t, c.w.t, c.b.t, c.y.t));
        TH_OK(ctx, teeny_ctx_finish(ctx));
        ck_assert_msg(ctx->prog.items_enqueued == (run ? 512 : 1280), "run %d: %lld items", run,
                      (long long)ctx->prog.items_enqueued);
        sm_run(ctx, &c, 1, TEENY_OK, by[run]);
    }
    for (int i = 0; i < 4; i++)
        ck_assert_msg(!memcmp(by[0][i], by[1][i], (size_t)lin_case_out(&c, i)->n * 4),
                      "classifier: output %d's bits differ", i);
    bits_free(by[0]);
    bits_free(by[1]);
    lin_case_free(&c);
    /* a kernel that takes fewer than 64 items (forced: 16) gets a smaller
     * work-group: y [3, 7], 21 items in one group of 64, then two of 16 */
    lin_case t = {.N = 3, .in = 5, .out = 7, .bias = 1, .view = 0};
    float *ty[2];
    lin_case_make(ctx, &t, 9401);
    th_hook(TEENY__HOOK_LINEAR_SMALL, 0);
    for (int run = 0; run < 2; run++) {
        th_hook(TEENY__HOOK_KERNEL_WG_CAP, run ? 16 : 0);
        TH_OK(ctx, teeny_ctx_finish(ctx));
        ctx->prog.items_enqueued = 0;
        th_poison(t.y.t);
        TH_OK(ctx, teeny_linear_forward(ctx, t.x.t, t.w.t, t.b.t, t.y.t));
        TH_OK(ctx, teeny_ctx_finish(ctx));
        ck_assert_msg(ctx->prog.items_enqueued == (run ? 32 : 64), "wg cap run %d: %lld items", run,
                      (long long)ctx->prog.items_enqueued);
        ty[run] = th_read(t.y.t);
    }
    ck_assert_msg(th_first_nonfinite(ty[1], 21) < 0 && !memcmp(ty[0], ty[1], 21 * 4), "wg cap: y differs");
    free(ty[0]);
    free(ty[1]);
    lin_case_free(&t);
    th_compute_units(0);
    th_profile(NULL);
}
END_TEST

/* The linear suite's "small" TCase (suite_linear, test_linear.c). */
TCase *tcase_linear_small(void)
{
    TCase *tc = tcase_create("small");
    tcase_add_loop_test(tc, test_linear_small_layer, 0, th_small() ? 4 : th_full() ? 60 : 16);
    tcase_add_test(tc, test_linear_small_segments);
    tcase_add_test(tc, test_linear_cpu_segments);
    tcase_add_test(tc, test_linear_small_plan);
    return tc;
}
