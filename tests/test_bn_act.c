/*
 * test_bn_act.c -- batch norm with its fused activation (the BATCHNORM op's
 * act attribute, teeny_graph_batchnorm_act) and the launches it saves.
 *
 * The op is driven through the eager layer's internal entry (as the public
 * eager functions are, with attrs.batchnorm.act set), on the portable and
 * the CPU kernels, against the float64 reference composed in
 * tests/ref/batchnorm_ref.c (ref_bn_act_*): seeded shapes with odd spatial
 * sizes, C = 1, the rows layout and [N, C]; outputs NaN-poisoned; the
 * running statistics updated exactly once; two runs give the same bits.
 * The graph checks: fused == batchnorm + activation, the builder's error
 * status, and the launches the example network's training step saves.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "teenycl.h"

/* The example network as it is (batch norm and SiLU one node), or with
 * each fused pair built as two nodes, batchnorm then activation, as before
 * teeny_graph_batchnorm_act (test_bn_act_example_launches). */
static int example_unfused, example_split;
static teeny_status bn_act_or_two(teeny_graph *g, const char *name, teeny_node x, float momentum, float eps, int act,
                                  teeny_node *out)
{
    char an[128];
    teeny_node b;
    if (!example_unfused || act == TEENY_ACT_NONE)
        return teeny_graph_batchnorm_act(g, name, x, momentum, eps, act, out);
    snprintf(an, sizeof an, "%s.act", name);
    example_split++;
    teeny_status st = teeny_graph_batchnorm(g, name, x, momentum, eps, &b);
    return st != TEENY_OK ? st : teeny_graph_activation(g, an, b, act, out);
}
#define teeny_graph_batchnorm_act bn_act_or_two
#include "../examples/fashion_net.h"
#undef teeny_graph_batchnorm_act
#include "harness.h"
#include "internal.h"
#include "ops/ops.h"
#include "ref/batchnorm_ref.h"

#define TOL 1e-5

typedef struct {
    int ndim, B, C, H, W;
} shape;

static const shape SHAPES[] = {
    {4, 2, 3, 5, 7}, {4, 3, 1, 9, 9}, {4, 2, 4, 8, 8}, {4, 5, 2, 3, 3}, {2, 12, 5, 1, 1}, {4, 4, 3, 17, 1},
};
#define N_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

static teeny_tensor *dev(teeny_ctx *ctx, int ndim, const int64_t *s, const float *v)
{
    return v ? th_tensor_from(ctx, ndim, s, v) : th_tensor(ctx, ndim, s);
}

static teeny_status run_fwd(teeny_ctx *ctx, int act, int training, teeny_tensor *const *t)
{
    teeny__eager e = {TEENY__EAGER_OF("bn_act forward", BATCHNORM, batchnorm, forward),
                      .attrs.batchnorm = {0.1f, 1e-5f, act}, .training = training};
    const teeny__earg args[] = {
        {"x", t[0], TEENY__BATCHNORM_X, 0},
        {"weight", t[1], TEENY__BATCHNORM_WEIGHT, TEENY__EA_NUMEL},
        {"bias", t[2], TEENY__BATCHNORM_BIAS, TEENY__EA_NUMEL},
        {"y", t[5], TEENY__OUT_VALUE, TEENY__EA_OUT | TEENY__EA_NUMEL},
        {"save_mean", t[6], TEENY__BATCHNORM_OUT_SAVE_MEAN, TEENY__EA_OUT | TEENY__EA_NUMEL},
        {"save_rstd", t[7], TEENY__BATCHNORM_OUT_SAVE_RSTD, TEENY__EA_OUT | TEENY__EA_NUMEL},
        {"running_mean", t[3], TEENY__BATCHNORM_RUNNING_MEAN, TEENY__EA_UPDATED | TEENY__EA_NUMEL},
        {"running_var", t[4], TEENY__BATCHNORM_RUNNING_VAR, TEENY__EA_UPDATED | TEENY__EA_NUMEL}};
    const teeny__earg infer[] = {
        {"x", t[0], TEENY__BATCHNORM_X, 0},
        {"weight", t[1], TEENY__BATCHNORM_WEIGHT, TEENY__EA_NUMEL},
        {"bias", t[2], TEENY__BATCHNORM_BIAS, TEENY__EA_NUMEL},
        {"running_mean", t[3], TEENY__BATCHNORM_RUNNING_MEAN, TEENY__EA_NUMEL},
        {"running_var", t[4], TEENY__BATCHNORM_RUNNING_VAR, TEENY__EA_NUMEL},
        {"y", t[5], TEENY__OUT_VALUE, TEENY__EA_OUT | TEENY__EA_NUMEL}};
    return training ? teeny__eager_run(ctx, &e, args, 8) : teeny__eager_run(ctx, &e, infer, 6);
}

/* t: x, w, b, rm, rv, y, save_mean, save_rstd, dy, dx, dw, db. */
static teeny_status run_bwd(teeny_ctx *ctx, int act, int training, teeny_tensor *const *t)
{
    teeny__eager e = {TEENY__EAGER_OF("bn_act backward", BATCHNORM, batchnorm, backward),
                      .attrs.batchnorm = {0.1f, 1e-5f, act}, .training = training};
    const teeny__earg args[] = {
        {"x", t[0], TEENY__BATCHNORM_X, 0},
        {"dy", t[8], TEENY__BATCHNORM_DY, TEENY__EA_NUMEL},
        {"weight", t[1], TEENY__BATCHNORM_WEIGHT, TEENY__EA_NUMEL},
        {"bias", t[2], TEENY__BATCHNORM_BIAS, TEENY__EA_NUMEL},
        {"mean", training ? t[6] : t[3], training ? TEENY__BATCHNORM_SAVE_MEAN : TEENY__BATCHNORM_RUNNING_MEAN,
         TEENY__EA_NUMEL},
        {"r", training ? t[7] : t[4], training ? TEENY__BATCHNORM_SAVE_RSTD : TEENY__BATCHNORM_RUNNING_VAR,
         TEENY__EA_NUMEL},
        {"dx", t[9], TEENY__BATCHNORM_X, TEENY__EA_OUT | TEENY__EA_NUMEL},
        {"dweight", t[10], TEENY__BATCHNORM_WEIGHT, TEENY__EA_OUT | TEENY__EA_NUMEL},
        {"dbias", t[11], TEENY__BATCHNORM_BIAS, TEENY__EA_OUT | TEENY__EA_NUMEL}};
    return teeny__eager_run(ctx, &e, args, 9);
}

static void expect_near(const teeny_tensor *t, const double *ref, size_t n, const char *what, const char *repro)
{
    float *got = th_read(t);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(!isnan(got[i]), "%s: %s[%zu] not written", repro, what, i);
    double e = th_nrms(got, ref, n);
    ck_assert_msg(e <= TOL, "%s: %s nrms %g > %g", repro, what, e, TOL);
    free(got);
}

/* One shape, one act, one variant: training forward + backward, inference
 * forward + frozen backward, against the reference; then the training
 * pair again, bit-identical. */
static void check_case(teeny_ctx *ctx, const shape *sh, int act, uint64_t seed, const char *variant)
{
    int B = sh->B, C = sh->C, S = sh->H * sh->W;
    size_t n = (size_t)B * C * S;
    int64_t xs[4] = {B, C, sh->H, sh->W}, cs[1] = {C};
    char repro[160];
    snprintf(repro, sizeof repro, "bn_act act %d %s x [%d, %d, %d, %d] seed %llu", act, variant, B, C, sh->H, sh->W,
             (unsigned long long)seed);
    th_rng r = th_rng_make(seed);
    float *x = malloc(n * 4), *dy = malloc(n * 4), w[8], b[8], rm[8], rv[8];
    th_fill_normal(&r, x, n, 0.7, 1.5);
    th_fill_normal(&r, dy, n, 0.0, 1.0);
    th_fill_uniform(&r, w, (size_t)C, 0.5, 1.5);
    th_fill_uniform(&r, b, (size_t)C, -0.5, 0.5);
    th_fill_uniform(&r, rm, (size_t)C, -0.2, 0.2);
    th_fill_uniform(&r, rv, (size_t)C, 0.5, 1.5);
    double *xd = th_dbl(x, n), *dyd = th_dbl(dy, n), *wd = th_dbl(w, (size_t)C), *bd = th_dbl(b, (size_t)C);
    double *rmd = th_dbl(rm, (size_t)C), *rvd = th_dbl(rv, (size_t)C), *y = malloc(n * 8), *dx = malloc(n * 8);
    double mean[8], rstd[8], dw[8], db[8];
    teeny_tensor *t[12] = {dev(ctx, sh->ndim, xs, x), dev(ctx, 1, cs, w),    dev(ctx, 1, cs, b),
                           dev(ctx, 1, cs, rm),        dev(ctx, 1, cs, rv),   dev(ctx, sh->ndim, xs, NULL),
                           dev(ctx, 1, cs, NULL),      dev(ctx, 1, cs, NULL), dev(ctx, sh->ndim, xs, dy),
                           dev(ctx, sh->ndim, xs, NULL), dev(ctx, 1, cs, NULL), dev(ctx, 1, cs, NULL)};
    float *bits[4] = {0};
    for (int rep = 0; rep < 2; rep++) {
        TH_OK(ctx, teeny_tensor_write(t[3], rm, (size_t)C));
        TH_OK(ctx, teeny_tensor_write(t[4], rv, (size_t)C));
        for (int i = 5; i < 12; i++)
            if (i != 8)
                th_poison(t[i]);
        TH_OK(ctx, run_fwd(ctx, act, 1, t));
        TH_OK(ctx, run_bwd(ctx, act, 1, t));
        float *now[4] = {th_read(t[5]), th_read(t[9]), th_read(t[10]), th_read(t[11])};
        for (int k = 0; k < 4; k++) {
            if (rep)
                ck_assert_msg(!memcmp(bits[k], now[k], (k < 2 ? n : (size_t)C) * 4), "%s: run 2 differs (output %d)",
                              repro, k);
            free(bits[k]);
            bits[k] = now[k];
        }
    }
    double rmr[8], rvr[8];
    memcpy(rmr, rmd, (size_t)C * 8);
    memcpy(rvr, rvd, (size_t)C * 8);
    ref_bn_act_forward_train(xd, B, C, S, wd, bd, 0.1, 1e-5, act, y, mean, rstd, rmr, rvr);
    expect_near(t[5], y, n, "y", repro);
    expect_near(t[6], mean, (size_t)C, "save_mean", repro);
    expect_near(t[7], rstd, (size_t)C, "save_rstd", repro);
    expect_near(t[3], rmr, (size_t)C, "running_mean (one update)", repro);
    expect_near(t[4], rvr, (size_t)C, "running_var (one update)", repro);
    float mf[8], rf[8];
    float *m_dev = th_read(t[6]), *r_dev = th_read(t[7]);
    memcpy(mf, m_dev, (size_t)C * 4);
    memcpy(rf, r_dev, (size_t)C * 4);
    double *md = th_dbl(mf, (size_t)C), *rd = th_dbl(rf, (size_t)C);
    ref_bn_act_backward(xd, dyd, B, C, S, wd, bd, md, rd, act, 1, dx, dw, db);
    expect_near(t[9], dx, n, "dx", repro);
    expect_near(t[10], dw, (size_t)C, "dweight", repro);
    expect_near(t[11], db, (size_t)C, "dbias", repro);
    /* inference forward and frozen backward, with the original running statistics */
    TH_OK(ctx, teeny_tensor_write(t[3], rm, (size_t)C));
    TH_OK(ctx, teeny_tensor_write(t[4], rv, (size_t)C));
    for (int i = 9; i < 12; i++)
        th_poison(t[i]);
    th_poison(t[5]);
    TH_OK(ctx, run_fwd(ctx, act, 0, t));
    TH_OK(ctx, run_bwd(ctx, act, 0, t));
    double rs0[8];
    for (int c = 0; c < C; c++)
        rs0[c] = 1.0 / sqrt(rvd[c] + 1e-5);
    ref_bn_act_apply(xd, B, C, S, rmd, rs0, wd, bd, act, y);
    expect_near(t[5], y, n, "inference y", repro);
    ref_bn_act_backward(xd, dyd, B, C, S, wd, bd, rmd, rs0, act, 0, dx, dw, db);
    expect_near(t[9], dx, n, "frozen dx", repro);
    expect_near(t[10], dw, (size_t)C, "frozen dweight", repro);
    expect_near(t[11], db, (size_t)C, "frozen dbias", repro);
    for (int i = 0; i < 12; i++)
        teeny_tensor_destroy(t[i]);
    for (int k = 0; k < 4; k++)
        free(bits[k]);
    void *hs[] = {x, dy, xd, dyd, wd, bd, rmd, rvd, y, dx, m_dev, r_dev, md, rd};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}

START_TEST(test_bn_act_sweep)
{
    teeny_ctx *ctx = th_ctx();
    const shape *sh = &SHAPES[_i % N_SHAPES];
    static const int acts[3] = {TEENY_ACT_NONE, TEENY_ACT_RELU, TEENY_ACT_SILU};
    for (int cpu = 0; cpu < 2; cpu++) {
        th_cpu_kernels(cpu);
        for (int a = 0; a < 3; a++)
            check_case(ctx, sh, acts[a], 500 + (uint64_t)_i * 7 + (uint64_t)a, cpu ? "cpu" : "portable");
    }
    th_cpu_kernels(-1);
}
END_TEST

/* ---- the training forward in one launch (bn_train_channel) ----
 * Where a channel's units fit one work-group (wg * TEENY__BN_REG: the
 * portable kernels, spatial layout) the forward is one launch; the hook
 * forces the two-launch path. Both against the float64 reference: y,
 * save_mean, save_rstd, the running statistics updated once, every act;
 * outputs NaN-poisoned; the launches counted; the same bits twice. */
typedef struct {
    int B, C, H, W;
    double mean, std; /* of x */
} one_shape;

/* Run one training forward on the portable kernels; the launches it took. */
static int one_run(teeny_ctx *ctx, const one_shape *sh, int act, int two, const float *x, const float *w,
                   const float *b, const float *rm, const float *rv, float **out)
{
    int64_t xs[4] = {sh->B, sh->C, sh->H, sh->W}, cs[1] = {sh->C};
    size_t n = (size_t)sh->B * sh->C * sh->H * sh->W, C = (size_t)sh->C;
    teeny_tensor *t[12] = {dev(ctx, 4, xs, x), dev(ctx, 1, cs, w), dev(ctx, 1, cs, b), dev(ctx, 1, cs, rm),
                           dev(ctx, 1, cs, rv), dev(ctx, 4, xs, NULL), dev(ctx, 1, cs, NULL), dev(ctx, 1, cs, NULL)};
    for (int i = 5; i < 8; i++)
        th_poison(t[i]);
    th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, two);
    int64_t k0 = ctx->prog.kernels_enqueued;
    TH_OK(ctx, run_fwd(ctx, act, 1, t));
    int launches = (int)(ctx->prog.kernels_enqueued - k0);
    th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, 0);
    const size_t counts[5] = {n, C, C, C, C};
    const int which[5] = {5, 6, 7, 3, 4}; /* y, save_mean, save_rstd, running_mean, running_var */
    for (int k = 0; k < 5; k++) {
        out[k] = th_read(t[which[k]]);
        ck_assert_msg(th_first_nonfinite(out[k], counts[k]) < 0, "output %d not written", k);
    }
    for (int i = 0; i < 8; i++)
        teeny_tensor_destroy(t[i]);
    return launches;
}

static void one_check(teeny_ctx *ctx, const one_shape *sh, int act, uint64_t seed, double tol)
{
    int C = sh->C, S = sh->H * sh->W, vec = S % 4 == 0 ? 4 : 1;
    size_t n = (size_t)sh->B * C * S;
    int fits = S >= 16 && (int64_t)sh->B * S / vec <=
                              (int64_t)ctx->work_group_size * (vec == 1 ? TEENY__BN_REG_SCALAR : TEENY__BN_REG);
    char repro[200];
    snprintf(repro, sizeof repro, "one launch: x [%d, %d, %d, %d] mean %g act %d seed %llu (fits: %d)", sh->B, C,
             sh->H, sh->W, sh->mean, act, (unsigned long long)seed, fits);
    th_rng r = th_rng_make(seed);
    float *x = th_malloc(n * 4), *w = th_malloc((size_t)C * 4), *b = th_malloc((size_t)C * 4);
    float *rm = th_malloc((size_t)C * 4), *rv = th_malloc((size_t)C * 4);
    th_fill_normal(&r, x, n, sh->mean, sh->std);
    th_fill_uniform(&r, w, (size_t)C, 0.5, 1.5);
    th_fill_uniform(&r, b, (size_t)C, -0.5, 0.5);
    th_fill_uniform(&r, rm, (size_t)C, -0.2, 0.2);
    th_fill_uniform(&r, rv, (size_t)C, 0.5, 1.5);
    double *xd = th_dbl(x, n), *wd = th_dbl(w, (size_t)C), *bd = th_dbl(b, (size_t)C);
    double *ref[5] = {th_malloc(n * 8), th_malloc((size_t)C * 8), th_malloc((size_t)C * 8), th_dbl(rm, (size_t)C),
                      th_dbl(rv, (size_t)C)};
    ref_bn_act_forward_train(xd, sh->B, C, S, wd, bd, 0.1, 1e-5, act, ref[0], ref[1], ref[2], ref[3], ref[4]);
    const size_t counts[5] = {n, (size_t)C, (size_t)C, (size_t)C, (size_t)C};
    static const char *names[5] = {"y", "save_mean", "save_rstd", "running_mean", "running_var"};
    float *out[3][5];
    for (int run = 0; run < 3; run++) { /* the rule, the rule again, two launches */
        int two = run == 2, launches = one_run(ctx, sh, act, two, x, w, b, rm, rv, out[run]);
        ck_assert_msg(launches == (fits && !two ? 1 : 2), "%s, two-launch hook %d: %d launches", repro, two,
                      launches);
        for (int k = 0; k < 5; k++) {
            double e = th_nrms(out[run][k], ref[k], counts[k]);
            ck_assert_msg(e <= (k == 0 ? tol : TOL), "%s, two-launch hook %d: %s nrms %g", repro, two, names[k], e);
        }
    }
    for (int k = 0; k < 5; k++) {
        ck_assert_msg(!memcmp(out[0][k], out[1][k], counts[k] * 4), "%s: %s differs between runs", repro, names[k]);
        for (int run = 0; run < 3; run++)
            free(out[run][k]);
        free(ref[k]);
    }
    void *hs[] = {x, w, b, rm, rv, xd, wd, bd};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}

START_TEST(test_bn_act_one_launch)
{
    teeny_ctx *ctx = th_ctx();
    const int cap = ctx->work_group_size * TEENY__BN_REG; /* units of one work-group */
    const one_shape shapes[] = {
        {8, 24, 14, 14, 0.7, 1.5}, /* float4 units */
        {4, 6, 7, 7, 0.7, 1.5},    /* S = 49: single floats */
        {2, 1, 17, 3, -2.0, 0.5},  /* C = 1, S = 51 */
        {1, 2, 4, cap, 0.3, 1.0},  /* exactly one work-group's units */
        {1, 2, 4, cap + 1, 0.3, 1.0}, /* one more: two launches */
        {3, 5, 3, 5, 0.7, 1.5},    /* S = 15: the rows layout, two launches */
        /* single floats past 8 per item: 32 per item (-DBN_REG=32 -DBN_VEC=1); the most, then one more plane */
        {cap / 49 + 1, 2, 7, 7, 0.7, 1.5},
        {cap * 4 / 49, 3, 7, 7, 0.7, 1.5},
        {cap * 4 / 49 + 1, 2, 7, 7, 0.7, 1.5},
    };
    th_cpu_kernels(0);
    for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++)
        for (int act = TEENY_ACT_NONE; act <= TEENY_ACT_SILU; act++)
            one_check(ctx, &shapes[i], act, 700 + (uint64_t)i * 3 + (uint64_t)act, TOL);
    th_cpu_kernels(-1);
}
END_TEST

/* Mean 1e4, std 1: the one-launch path sums deviations from the channel's
 * first element and then from their exact mean, so y keeps ~1e-7 of its
 * scale (the two-launch path's float mean near 1e4 costs up to half an
 * ulp of 1e4, the 5e-4 of test_batchnorm_stability; run here too, at 5e-4). */
START_TEST(test_bn_act_one_launch_offset)
{
    teeny_ctx *ctx = th_ctx();
    const one_shape sh = {6, 3, 16, 12, 1e4, 1.0};
    th_cpu_kernels(0);
    one_check(ctx, &sh, TEENY_ACT_NONE, 4242, 5e-4);
    /* the one-launch run alone, tighter */
    int64_t xs[4] = {sh.B, sh.C, sh.H, sh.W};
    size_t n = (size_t)sh.B * sh.C * sh.H * sh.W;
    th_rng r = th_rng_make(4243);
    float *x = th_malloc(n * 4), w[3] = {1, 1, 1}, b[3] = {0.5f, -0.5f, 0.25f}, rm[3] = {0}, rv[3] = {1, 1, 1};
    th_fill_normal(&r, x, n, 1e4, 1.0);
    double *xd = th_dbl(x, n), *wd = th_dbl(w, 3), *bd = th_dbl(b, 3), *y = th_malloc(n * 8), mean[3], rstd[3];
    double rmd[3] = {0}, rvd[3] = {1, 1, 1};
    ref_bn_act_forward_train(xd, sh.B, sh.C, sh.H * sh.W, wd, bd, 0.1, 1e-5, TEENY_ACT_NONE, y, mean, rstd, rmd, rvd);
    float *out[5];
    ck_assert_int_eq(one_run(ctx, &sh, TEENY_ACT_NONE, 0, x, w, b, rm, rv, out), 1);
    double e = th_nrms(out[0], y, n);
    ck_assert_msg(e <= 1e-6, "one launch at mean 1e4: y nrms %g", e);
    (void)xs;
    for (int k = 0; k < 5; k++)
        free(out[k]);
    void *hs[] = {x, xd, wd, bd, y};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
    th_cpu_kernels(-1);
}
END_TEST

/* The one-launch kernel's loops within a device's loop budget: a budget
 * one trip short of them takes the two launches (the same outputs); a
 * budget that fits neither is TEENY_ERR_UNSUPPORTED before anything is
 * enqueued, every output and running statistic as it was. */
START_TEST(test_bn_act_one_launch_budget)
{
    teeny_ctx *ctx = th_ctx();
    const one_shape sh = {8, 24, 14, 14, 0.7, 1.5};
    int wg = ctx->work_group_size, lg = 0;
    while ((1 << (lg + 1)) <= wg)
        lg++;
    long long trips = 3 * (TEENY__BN_REG + 1) + 2 * (3 * lg + 1) + 1; /* batchnorm.c's count */
    th_cpu_kernels(0);
    th_loop_limit(2 * trips); /* budget: half the limit */
    one_check(ctx, &sh, TEENY_ACT_RELU, 99, TOL);
    th_loop_limit(2 * (trips - 1));
    float *o[5];
    size_t n = (size_t)sh.B * sh.C * sh.H * sh.W;
    float *x = th_malloc(n * 4), w[24], b[24], rm[24], rv[24];
    th_rng r = th_rng_make(98);
    th_fill_normal(&r, x, n, 0.7, 1.5);
    th_fill_uniform(&r, w, 24, 0.5, 1.5);
    th_fill_uniform(&r, b, 24, -0.5, 0.5);
    th_fill_uniform(&r, rm, 24, -0.2, 0.2);
    th_fill_uniform(&r, rv, 24, 0.5, 1.5);
    ck_assert_int_eq(one_run(ctx, &sh, TEENY_ACT_RELU, 0, x, w, b, rm, rv, o), 2);
    for (int k = 0; k < 5; k++)
        free(o[k]);
    /* no plan fits */
    th_loop_limit(8);
    int64_t xs[4] = {sh.B, sh.C, sh.H, sh.W}, cs[1] = {sh.C};
    teeny_tensor *t[8] = {dev(ctx, 4, xs, x), dev(ctx, 1, cs, w), dev(ctx, 1, cs, b), dev(ctx, 1, cs, rm),
                          dev(ctx, 1, cs, rv), dev(ctx, 4, xs, NULL), dev(ctx, 1, cs, NULL), dev(ctx, 1, cs, NULL)};
    for (int i = 5; i < 8; i++)
        th_poison(t[i]);
    int64_t k0 = ctx->prog.kernels_enqueued;
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, run_fwd(ctx, TEENY_ACT_RELU, 1, t));
    ck_assert_int_eq(ctx->prog.kernels_enqueued, k0);
    for (int i = 5; i < 8; i++)
        th_expect_all(t[i], NAN);
    float *rm_now = th_read(t[3]), *rv_now = th_read(t[4]);
    ck_assert(!memcmp(rm_now, rm, sizeof rm) && !memcmp(rv_now, rv, sizeof rv));
    free(rm_now);
    free(rv_now);
    for (int i = 0; i < 8; i++)
        teeny_tensor_destroy(t[i]);
    free(x);
    th_loop_limit(-1);
    th_cpu_kernels(-1);
}
END_TEST

/* The backward in one launch (bn_backward_channel) where the forward is
 * one: training (saved statistics) and frozen (running ones), every act,
 * against the float64 reference and the two-launch path; dx, dweight,
 * dbias NaN-poisoned; the launches counted; the same bits twice. */
static void one_check_bwd(teeny_ctx *ctx, const one_shape *sh, int act, int training, uint64_t seed)
{
    int C = sh->C, S = sh->H * sh->W, vec = S % 4 == 0 ? 4 : 1;
    size_t n = (size_t)sh->B * C * S, cn = (size_t)C;
    int fits = S >= 16 && (int64_t)sh->B * S / vec <=
                              (int64_t)ctx->work_group_size * (vec == 1 ? TEENY__BN_REG_SCALAR : TEENY__BN_REG);
    int64_t xs[4] = {sh->B, C, sh->H, sh->W}, cs[1] = {C};
    char repro[200];
    snprintf(repro, sizeof repro, "one-launch backward: x [%d, %d, %d, %d] act %d training %d seed %llu (fits: %d)",
             sh->B, C, sh->H, sh->W, act, training, (unsigned long long)seed, fits);
    th_rng r = th_rng_make(seed);
    float *x = th_malloc(n * 4), *dy = th_malloc(n * 4), *w = th_malloc(cn * 4), *b = th_malloc(cn * 4);
    float *rm = th_malloc(cn * 4), *rv = th_malloc(cn * 4), *mf = th_malloc(cn * 4), *rf = th_malloc(cn * 4);
    th_fill_normal(&r, x, n, sh->mean, sh->std);
    th_fill_normal(&r, dy, n, 0.0, 1.0);
    th_fill_uniform(&r, w, cn, 0.5, 1.5);
    th_fill_uniform(&r, b, cn, -0.5, 0.5);
    th_fill_uniform(&r, rm, cn, -0.2, 0.2);
    th_fill_uniform(&r, rv, cn, 0.5, 1.5);
    double *xd = th_dbl(x, n), *dyd = th_dbl(dy, n), *wd = th_dbl(w, cn), *bd = th_dbl(b, cn);
    double *y = th_malloc(n * 8), *md = th_malloc(cn * 8), *rd = th_malloc(cn * 8), *rmd = th_dbl(rm, cn),
           *rvd = th_dbl(rv, cn);
    ref_bn_act_forward_train(xd, sh->B, C, S, wd, bd, 0.1, 1e-5, act, y, md, rd, rmd, rvd);
    for (int c = 0; c < C; c++) { /* the saved statistics as floats; frozen: the running ones */
        mf[c] = training ? (float)md[c] : rm[c];
        rf[c] = (float)(training ? rd[c] : 1.0 / sqrt((double)rv[c] + 1e-5));
        md[c] = mf[c];
        rd[c] = rf[c];
    }
    double *ref[3] = {th_malloc(n * 8), th_malloc(cn * 8), th_malloc(cn * 8)};
    ref_bn_act_backward(xd, dyd, sh->B, C, S, wd, bd, md, rd, act, training, ref[0], ref[1], ref[2]);
    const size_t counts[3] = {n, cn, cn};
    static const char *names[3] = {"dx", "dweight", "dbias"};
    float *out[3][3];
    for (int run = 0; run < 3; run++) { /* the rule, the rule again, two launches */
        teeny_tensor *t[12] = {dev(ctx, 4, xs, x),    dev(ctx, 1, cs, w),    dev(ctx, 1, cs, b),
                               dev(ctx, 1, cs, rm),   dev(ctx, 1, cs, rv),   dev(ctx, 4, xs, NULL),
                               dev(ctx, 1, cs, mf),   dev(ctx, 1, cs, rf),   dev(ctx, 4, xs, dy),
                               dev(ctx, 4, xs, NULL), dev(ctx, 1, cs, NULL), dev(ctx, 1, cs, NULL)};
        for (int i = 9; i < 12; i++)
            th_poison(t[i]);
        th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, run == 2);
        int64_t k0 = ctx->prog.kernels_enqueued;
        TH_OK(ctx, run_bwd(ctx, act, training, t));
        int launches = (int)(ctx->prog.kernels_enqueued - k0);
        th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, 0);
        ck_assert_msg(launches == (fits && run < 2 ? 1 : 2), "%s, run %d: %d launches", repro, run, launches);
        for (int k = 0; k < 3; k++) {
            out[run][k] = th_read(t[9 + k]);
            ck_assert_msg(th_first_nonfinite(out[run][k], counts[k]) < 0, "%s: %s not written", repro, names[k]);
            double e = th_nrms(out[run][k], ref[k], counts[k]);
            ck_assert_msg(e <= TOL, "%s, run %d: %s nrms %g", repro, run, names[k], e);
        }
        for (int i = 0; i < 12; i++)
            teeny_tensor_destroy(t[i]);
    }
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(!memcmp(out[0][k], out[1][k], counts[k] * 4), "%s: %s differs between runs", repro, names[k]);
        for (int run = 0; run < 3; run++)
            free(out[run][k]);
        free(ref[k]);
    }
    void *hs[] = {x, dy, w, b, rm, rv, mf, rf, xd, dyd, wd, bd, y, md, rd, rmd, rvd};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}

START_TEST(test_bn_act_one_launch_backward)
{
    teeny_ctx *ctx = th_ctx();
    const int cap = ctx->work_group_size * TEENY__BN_REG;
    const one_shape shapes[] = {
        {8, 24, 14, 14, 0.7, 1.5}, {4, 6, 7, 7, 0.7, 1.5}, {2, 1, 17, 3, -2.0, 0.5},
        {1, 2, 4, cap, 0.3, 1.0},  {1, 2, 4, cap + 1, 0.3, 1.0}, {3, 5, 3, 5, 0.7, 1.5},
        {cap / 49 + 1, 2, 7, 7, 0.7, 1.5}, {cap * 4 / 49, 3, 7, 7, 0.7, 1.5}, {cap * 4 / 49 + 1, 2, 7, 7, 0.7, 1.5},
    };
    th_cpu_kernels(0);
    for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++)
        for (int act = TEENY_ACT_NONE; act <= TEENY_ACT_SILU; act++)
            for (int training = 0; training < 2; training++)
                one_check_bwd(ctx, &shapes[i], act, training, 800 + (uint64_t)i * 7 + (uint64_t)act * 2 + training);
    th_cpu_kernels(-1);
}
END_TEST

/* The reference's backward against central differences of its forward,
 * on L = sum(dy * y): every dx, dweight, dbias, both acts. */
START_TEST(test_bn_act_finite_differences)
{
    enum { B = 2, C = 2, S = 5 };
    const int n = B * C * S;
    th_rng r = th_rng_make(77);
    float xf[B * C * S], dyf[B * C * S];
    th_fill_normal(&r, xf, (size_t)n, 0.3, 1.0);
    th_fill_normal(&r, dyf, (size_t)n, 0.0, 1.0);
    double x[B * C * S], dy[B * C * S], w[C] = {1.2, 0.7}, b[C] = {0.1, -0.3}, y[B * C * S];
    for (int i = 0; i < n; i++) {
        x[i] = xf[i];
        dy[i] = dyf[i];
    }
    for (int act = TEENY_ACT_RELU; act <= TEENY_ACT_SILU; act++) {
        double mean[C], rstd[C], rm[C] = {0}, rv[C] = {1, 1}, dx[B * C * S], dw[C], db[C];
        ref_bn_act_forward_train(x, B, C, S, w, b, 0.1, 1e-5, act, y, mean, rstd, rm, rv);
        ref_bn_act_backward(x, dy, B, C, S, w, b, mean, rstd, act, 1, dx, dw, db);
        double *vars[3] = {x, w, b}, *grads[3] = {dx, dw, db};
        int counts[3] = {n, C, C};
        for (int v = 0; v < 3; v++)
            for (int i = 0; i < counts[v]; i++) {
                double keep = vars[v][i], h = 1e-6, l[2];
                for (int sgn = 0; sgn < 2; sgn++) {
                    vars[v][i] = keep + (sgn ? -h : h);
                    ref_bn_act_forward_train(x, B, C, S, w, b, 0.1, 1e-5, act, y, mean, rstd, rm, rv);
                    l[sgn] = 0;
                    for (int j = 0; j < n; j++)
                        l[sgn] += dy[j] * y[j];
                }
                vars[v][i] = keep;
                double fd = (l[0] - l[1]) / (2 * h);
                ck_assert_msg(fabs(fd - grads[v][i]) <= 1e-5 * (1 + fabs(fd)), "act %d var %d [%d]: fd %.9g analytic %.9g",
                              act, v, i, fd, grads[v][i]);
            }
    }
}
END_TEST

/* conv -> bn_act(act) -> global pool -> linear -> loss, against conv -> bn
 * -> activation -> ...: same parameters (the unfused graph's, copied),
 * the same loss and parameter gradients to 1e-5 (nrms), and one launch
 * fewer each way. */
static void build_small(teeny_ctx *ctx, int fused, int act, teeny_graph **gout, teeny_node *loss)
{
    teeny_graph *g;
    teeny_node x, c, b, a, p, l, lab;
    int64_t xs[4] = {-1, 2, 7, 5};
    teeny_conv2d_params cp = TEENY_CONV2D_PARAMS_INIT;
    cp.pad[0] = cp.pad[1] = 1;
    TH_OK(ctx, teeny_graph_create(ctx, 3, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 4, xs, &x));
    TH_OK(ctx, teeny_graph_conv2d(g, "conv", x, 3, 3, 3, &cp, 0, &c));
    if (fused) {
        TH_OK(ctx, teeny_graph_batchnorm_act(g, "bn", c, 0.1f, 1e-5f, (teeny_act)act, &a));
    } else {
        TH_OK(ctx, teeny_graph_batchnorm(g, "bn", c, 0.1f, 1e-5f, &b));
        TH_OK(ctx, teeny_graph_activation(g, "act", b, (teeny_act)act, &a));
    }
    TH_OK(ctx, teeny_graph_global_avgpool(g, "gap", a, &p));
    TH_OK(ctx, teeny_graph_linear(g, "fc", p, 4, 1, &l));
    TH_OK(ctx, teeny_graph_labels(g, "y", &lab));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", l, lab, loss));
    *gout = g;
}

/* Run one plan (th_plan_step): the unfused graph reads its own initial
 * parameters into vals, the fused one takes them; the loss and every
 * parameter gradient out. */
static void run_plan(teeny_ctx *ctx, int fused, int act, const float *x, size_t nx, const int32_t *lab, int B,
                     float **vals, float *loss, float **grads, int *np, int launches[2])
{
    teeny_graph *g;
    teeny_node l;
    build_small(ctx, fused, act, &g, &l);
    *np = th_plan_step(g, l, x, nx, lab, B, vals, loss, grads, NULL, launches);
    teeny_graph_destroy(g);
}

START_TEST(test_bn_act_graph_fused_matches)
{
    teeny_ctx *ctx = th_ctx();
    enum { B = 3, NX = B * 2 * 35 };
    th_rng r = th_rng_make(91);
    float x[NX];
    int32_t lab[B] = {0, 3, 1};
    th_fill_normal(&r, x, NX, 0.2, 1.0);
    for (int act = TEENY_ACT_RELU; act <= TEENY_ACT_SILU; act++) {
        float loss[2], *vals[8] = {0}, *grads[2][8] = {{0}};
        int np[2], launches[2][2];
        for (int fused = 0; fused < 2; fused++)
            run_plan(ctx, fused, act, x, NX, lab, B, vals, &loss[fused], grads[fused], &np[fused], launches[fused]);
        ck_assert_int_eq(np[0], np[1]);
        ck_assert_msg(fabsf(loss[0] - loss[1]) <= 1e-6f * (1 + fabsf(loss[0])), "act %d: loss %.9g fused %.9g", act,
                      (double)loss[0], (double)loss[1]);
        for (int i = 0; i < np[0]; i++) {
            size_t n = i == 0 ? 3 * 2 * 9 : i < 3 ? 3 : i == 3 ? 4 * 3 : 4;
            double e = th_nrms_f(grads[1][i], grads[0][i], n);
            ck_assert_msg(e <= 1e-5, "act %d: parameter %d gradient nrms %g fused vs unfused", act, i, e);
        }
        /* one launch fewer each way: the activation's */
        ck_assert_int_eq(launches[1][0], launches[0][0] - 1);
        ck_assert_int_eq(launches[1][1], launches[0][1] - 1);
        for (int i = 0; i < 8; i++) {
            free(vals[i]);
            free(grads[0][i]);
            free(grads[1][i]);
        }
    }
}
END_TEST

/* An activation the op does not fuse: TEENY_ERR_ARG at the builder, with
 * a message naming the choices; no node added. */
START_TEST(test_bn_act_errors)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, y = 7;
    int64_t xs[4] = {-1, 2, 4, 4};
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 4, xs, &x));
    int before = teeny_graph_node_count(g);
    const teeny_act bad[] = {TEENY_ACT_SIGMOID, TEENY_ACT_GELU, (teeny_act)-1, (teeny_act)99};
    for (int i = 0; i < 4; i++) {
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_batchnorm_act(g, "bn", x, 0.1f, 1e-5f, bad[i], &y));
        ck_assert_msg(strstr(teeny_last_error(ctx), "TEENY_ACT_SILU") != NULL, "%s", teeny_last_error(ctx));
        ck_assert_int_eq(y, -1);
        ck_assert_int_eq(teeny_graph_node_count(g), before);
    }
    TH_OK(ctx, teeny_graph_batchnorm_act(g, "bn", x, 0.1f, 1e-5f, TEENY_ACT_RELU, &y));
    teeny_graph_destroy(g);
}
END_TEST

/* The example network's training step (examples/fashion_net.h, batch 128)
 * in the portable and the CPU kernels: each of its fused batch norm +
 * SiLU nodes takes exactly one launch fewer forward and one fewer
 * backward than the two nodes it replaces (the counts themselves differ
 * between devices: 40 and 76 on PoCL, 33 and 65 on the H200). */
START_TEST(test_bn_act_example_launches)
{
    teeny_ctx *ctx = th_ctx();
    for (int cpu = 0; cpu < 2; cpu++) {
        int f[2], b[2];
        th_cpu_kernels(cpu);
        for (int unfused = 0; unfused < 2; unfused++) {
            fn_net net = {0};
            teeny_plan *p;
            teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
            example_unfused = unfused;
            example_split = 0;
            TH_OK(ctx, fn_build(ctx, 1, &net));
            pp.batch = 128;
            pp.loss = net.loss;
            TH_OK(ctx, teeny_graph_compile(net.g, &pp, &p));
            TH_OK(ctx, teeny_plan_launches(p, &f[unfused], &b[unfused]));
            teeny_plan_destroy(p);
            teeny_graph_destroy(net.g);
        }
        example_unfused = 0;
        fprintf(stderr, "bn_act: example launches (%s kernels): forward %d, backward %d (unfused %d, %d)\n",
                cpu ? "cpu" : "portable", f[0], b[0], f[1], b[1]);
        ck_assert_int_eq(example_split, 4); /* conv1-3 and psa.ffn.0 end in SiLU */
        ck_assert_int_eq(f[1] - f[0], example_split);
        ck_assert_int_eq(b[1] - b[0], example_split);
    }
    th_cpu_kernels(-1);
}
END_TEST

Suite *suite_bn_act(void)
{
    Suite *s = suite_create("bn_act");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_bn_act_sweep, 0, N_SHAPES);
    tcase_add_test(fwd, test_bn_act_one_launch);
    tcase_add_test(fwd, test_bn_act_one_launch_offset);
    tcase_add_test(fwd, test_bn_act_one_launch_budget);
    tcase_add_test(bwd, test_bn_act_one_launch_backward);
    tcase_add_test(bwd, test_bn_act_finite_differences);
    tcase_add_test(fwd, test_bn_act_graph_fused_matches);
    tcase_add_test(fwd, test_bn_act_example_launches);
    tcase_add_test(err, test_bn_act_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
