/*
 * test_limits.c -- launch configurations chosen from the built kernels'
 * own limits. The test hook KERNEL_WG_CAP makes every kernel report at most
 * cap work-items, which forces each family's smaller fallbacks on PoCL:
 * at caps 64, 32 and 16 the results still match the float64 references
 * (the families' own tolerance), and below anything a family can use the
 * call fails with TEENY_ERR_UNSUPPORTED, a message, and its outputs
 * untouched (the plan is checked before anything is enqueued).
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "../src/ops/ops.h"
#include "ref/batchnorm_ref.h"
#include "ref/linear_ref.h"
#include "ref/loss_ref.h"
#include "ref/pool_ref.h"

#define TOL 1e-5

static const size_t CAPS[] = {64, 32, 16};
#define N_CAPS ((int)(sizeof CAPS / sizeof CAPS[0]))
#define CAP_NONE 2 /* below every reduction's floor (TEENY__WG_FLOOR) */

static void expect_close(const teeny_tensor *t, const double *ref, size_t n, const char *what, size_t cap)
{
    float *got = th_read(t);
    double e = th_nrms(got, ref, n);
    ck_assert_msg(e <= TOL, "%s at cap %zu: nrms %.3g > %.1g", what, cap, e, TOL);
    free(got);
}

/* Every element still NaN: the rejected call wrote nothing. */
static void expect_all_nan(const teeny_tensor *t, const char *what)
{
    float *got = th_read(t);
    for (int64_t i = 0; i < teeny_tensor_numel(t); i++)
        ck_assert_msg(isnan(got[i]), "%s: a rejected call wrote element %lld", what, (long long)i);
    free(got);
}

static void expect_unsupported(teeny_ctx *ctx, teeny_status st, const char *what)
{
    ck_assert_msg(st == TEENY_ERR_UNSUPPORTED, "%s at cap %d -> %s, want TEENY_ERR_UNSUPPORTED", what, CAP_NONE,
                  teeny_status_name(st));
    ck_assert_msg(teeny_last_error(ctx)[0] != '\0', "%s: empty message", what);
}

START_TEST(test_batchnorm_caps)
{
    teeny_ctx *ctx = th_ctx();
    enum { B = 3, C = 5, S = 36 };
    size_t n = (size_t)B * C * S;
    int64_t xs[4] = {B, C, 6, 6}, cs[1] = {C};
    th_rng r = th_rng_make(41);
    float x[B * C * S], w[C], b[C], rm[C], rv[C];
    th_fill_normal(&r, x, n, 0.5, 2.0);
    th_fill_uniform(&r, w, C, 0.5, 1.5);
    th_fill_uniform(&r, b, C, -0.5, 0.5);
    double *xd = th_dbl(x, n), *wd = th_dbl(w, C), *bd = th_dbl(b, C), y[B * C * S], mean[C], rstd[C], rmd[C], rvd[C];
    teeny_tensor *tx = th_tensor_from(ctx, 4, xs, x), *ty = th_tensor(ctx, 4, xs), *tw = th_tensor_from(ctx, 1, cs, w),
                 *tb = th_tensor_from(ctx, 1, cs, b), *trm = th_tensor(ctx, 1, cs), *trv = th_tensor(ctx, 1, cs),
                 *tm = th_tensor(ctx, 1, cs), *tr = th_tensor(ctx, 1, cs);
    for (int i = 0; i <= N_CAPS; i++) {
        size_t cap = i < N_CAPS ? CAPS[i] : CAP_NONE;
        for (int c = 0; c < C; c++) {
            rm[c] = 0.0f;
            rv[c] = 1.0f;
            rmd[c] = 0.0;
            rvd[c] = 1.0;
        }
        TH_OK(ctx, teeny_tensor_write(trm, rm, C));
        TH_OK(ctx, teeny_tensor_write(trv, rv, C));
        th_poison(ty);
        th_poison(tm);
        th_poison(tr);
        th_hook(TEENY__HOOK_KERNEL_WG_CAP, cap);
        teeny_status st = teeny_batchnorm_forward_train(ctx, tx, tw, tb, trm, trv, 0.1f, 1e-5f, ty, tm, tr);
        th_hook(TEENY__HOOK_KERNEL_WG_CAP, 0);
        if (i == N_CAPS) {
            expect_unsupported(ctx, st, "teeny_batchnorm_forward_train");
            expect_all_nan(ty, "ty");
            expect_all_nan(tm, "tm");
            expect_all_nan(tr, "tr");
            th_expect_all(trv, 1.0f);
            break;
        }
        ck_assert_msg(st == TEENY_OK, "cap %zu: %s", cap, teeny_last_error(ctx));
        ref_bn_forward_train(xd, B, C, S, wd, bd, 0.1, 1e-5, y, mean, rstd, rmd, rvd);
        expect_close(ty, y, n, "batchnorm y", cap);
        expect_close(tr, rstd, C, "batchnorm save_rstd", cap);
        expect_close(trv, rvd, C, "batchnorm running_var", cap);
    }
    th_hook(TEENY__HOOK_KERNEL_WG_CAP, 0);
    teeny_tensor *ts[] = {tx, ty, tw, tb, trm, trv, tm, tr};
    for (int i = 0; i < 8; i++)
        teeny_tensor_destroy(ts[i]);
    free(xd);
    free(wd);
    free(bd);
}
END_TEST

START_TEST(test_loss_caps)
{
    teeny_ctx *ctx = th_ctx();
    enum { N = 7, K = 300 };
    int64_t xs[2] = {N, K}, ls[1] = {N}, one[1] = {1};
    th_rng r = th_rng_make(42);
    float *x = th_malloc(sizeof(float) * N * K);
    int32_t labels[N];
    th_fill_normal(&r, x, (size_t)N * K, 0.0, 3.0);
    for (int i = 0; i < N; i++)
        labels[i] = th_int(&r, 0, K - 1);
    double *xd = th_dbl(x, (size_t)N * K), *pd = th_malloc(sizeof(double) * N * K);
    double want = ref_softmax_ce_forward(xd, labels, N, K, pd);
    teeny_tensor *tx = th_tensor_from(ctx, 2, xs, x), *tl = NULL, *tloss = th_tensor(ctx, 1, one),
                 *tp = th_tensor(ctx, 2, xs);
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, ls, &tl));
    TH_OK(ctx, teeny_tensor_write_i32(tl, labels, N));
    for (int i = 0; i <= N_CAPS; i++) {
        size_t cap = i < N_CAPS ? CAPS[i] : CAP_NONE;
        th_poison(tloss);
        th_poison(tp);
        th_hook(TEENY__HOOK_KERNEL_WG_CAP, cap);
        teeny_status st = teeny_softmax_cross_entropy_forward(ctx, tx, tl, tloss, tp);
        th_hook(TEENY__HOOK_KERNEL_WG_CAP, 0);
        if (i == N_CAPS) {
            expect_unsupported(ctx, st, "teeny_softmax_cross_entropy_forward");
            expect_all_nan(tloss, "tloss");
            expect_all_nan(tp, "tp");
            break;
        }
        ck_assert_msg(st == TEENY_OK, "cap %zu: %s", cap, teeny_last_error(ctx));
        float got;
        TH_OK(ctx, teeny_tensor_read(tloss, &got, 1));
        ck_assert_msg(fabs(got - want) <= TOL * fabs(want), "cap %zu: loss %.8g, want %.8g", cap, (double)got, want);
        expect_close(tp, pd, (size_t)N * K, "probs", cap);
    }
    th_hook(TEENY__HOOK_KERNEL_WG_CAP, 0);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(tl);
    teeny_tensor_destroy(tloss);
    teeny_tensor_destroy(tp);
    free(x);
    free(xd);
    free(pd);
}
END_TEST

START_TEST(test_gap_caps)
{
    teeny_ctx *ctx = th_ctx();
    enum { B = 2, C = 3, S = 49 };
    int64_t xs[4] = {B, C, 7, 7}, ys[4] = {B, C, 1, 1};
    th_rng r = th_rng_make(43);
    float x[B * C * S];
    th_fill_normal(&r, x, B * C * S, 1.0, 1.0);
    double *xd = th_dbl(x, B * C * S), y[B * C];
    ref_gap_forward(B, C, S, xd, y);
    teeny_tensor *tx = th_tensor_from(ctx, 4, xs, x), *ty = th_tensor(ctx, 4, ys);
    /* the portable kernel's tree needs a power-of-two work-group of at
     * least TEENY__WG_FLOOR; the CPU variant (a plane per item) takes any */
    for (int cpu = 0; cpu < 2; cpu++) {
        th_cpu_kernels(cpu);
        for (int i = 0; i <= N_CAPS; i++) {
            size_t cap = i < N_CAPS ? CAPS[i] : CAP_NONE;
            th_poison(ty);
            th_hook(TEENY__HOOK_KERNEL_WG_CAP, cap);
            teeny_status st = teeny_global_avgpool_forward(ctx, tx, ty);
            th_hook(TEENY__HOOK_KERNEL_WG_CAP, 0);
            if (i == N_CAPS && !cpu) {
                expect_unsupported(ctx, st, "teeny_global_avgpool_forward");
                expect_all_nan(ty, "ty");
                break;
            }
            ck_assert_msg(st == TEENY_OK, "cap %zu%s: %s", cap, cpu ? " (CPU variant)" : "", teeny_last_error(ctx));
            expect_close(ty, y, B * C, cpu ? "global avgpool (CPU variant)" : "global avgpool", cap);
        }
    }
    th_cpu_kernels(-1);
    th_hook(TEENY__HOOK_KERNEL_WG_CAP, 0);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(ty);
    free(xd);
}
END_TEST

START_TEST(test_linear_caps)
{
    teeny_ctx *ctx = th_ctx();
    enum { N = 9, IN = 37, OUT = 21 };
    int64_t xs[2] = {N, IN}, ws[2] = {OUT, IN}, bs[1] = {OUT}, ys[2] = {N, OUT};
    th_rng r = th_rng_make(44);
    float x[N * IN], w[OUT * IN], b[OUT];
    th_fill_normal(&r, x, N * IN, 0.0, 1.0);
    th_fill_normal(&r, w, OUT * IN, 0.0, 0.2);
    th_fill_normal(&r, b, OUT, 0.0, 1.0);
    double *xd = th_dbl(x, N * IN), *wd = th_dbl(w, OUT * IN), *bd = th_dbl(b, OUT), y[N * OUT];
    ref_linear_forward(xd, wd, bd, N, IN, OUT, y);
    teeny_tensor *tx = th_tensor_from(ctx, 2, xs, x), *tw = th_tensor_from(ctx, 2, ws, w),
                 *tb = th_tensor_from(ctx, 1, bs, b), *ty = th_tensor(ctx, 2, ys);
    for (int i = 0; i <= N_CAPS; i++) {
        size_t cap = i < N_CAPS ? CAPS[i] : CAP_NONE;
        th_poison(ty);
        th_hook(TEENY__HOOK_KERNEL_WG_CAP, cap);
        teeny_status st = teeny_linear_forward(ctx, tx, tw, tb, ty);
        th_hook(TEENY__HOOK_KERNEL_WG_CAP, 0);
        if (i == N_CAPS) {
            expect_unsupported(ctx, st, "teeny_linear_forward");
            expect_all_nan(ty, "ty");
            break;
        }
        ck_assert_msg(st == TEENY_OK, "cap %zu: %s", cap, teeny_last_error(ctx));
        expect_close(ty, y, N * OUT, "linear y", cap);
    }
    th_hook(TEENY__HOOK_KERNEL_WG_CAP, 0);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(tw);
    teeny_tensor_destroy(tb);
    teeny_tensor_destroy(ty);
    free(xd);
    free(wd);
    free(bd);
}
END_TEST

/* Element-wise kernels take any work-group size: the local size is clamped,
 * so even a cap of 1 gives the exact sums. */
START_TEST(test_elementwise_clamp)
{
    teeny_ctx *ctx = th_ctx();
    enum { N = 1000 };
    int64_t s[1] = {N};
    th_rng r = th_rng_make(45);
    float a[N], b[N], got[N];
    th_fill_normal(&r, a, N, 0.0, 1.0);
    th_fill_normal(&r, b, N, 0.0, 1.0);
    teeny_tensor *ta = th_tensor_from(ctx, 1, s, a), *tb = th_tensor_from(ctx, 1, s, b), *ty = th_tensor(ctx, 1, s);
    const size_t caps[] = {64, 16, 1};
    for (int i = 0; i < 3; i++) {
        th_poison(ty);
        th_hook(TEENY__HOOK_KERNEL_WG_CAP, caps[i]);
        teeny_status st = teeny_add(ctx, ta, tb, ty);
        th_hook(TEENY__HOOK_KERNEL_WG_CAP, 0);
        ck_assert_msg(st == TEENY_OK, "cap %zu: %s", caps[i], teeny_last_error(ctx));
        TH_OK(ctx, teeny_tensor_read(ty, got, N));
        for (int j = 0; j < N; j++)
            ck_assert_msg(got[j] == a[j] + b[j], "cap %zu: y[%d] = %g, want %g", caps[i], j, (double)got[j],
                          (double)(a[j] + b[j]));
    }
    th_hook(TEENY__HOOK_KERNEL_WG_CAP, 0);
    teeny_tensor_destroy(ta);
    teeny_tensor_destroy(tb);
    teeny_tensor_destroy(ty);
}
END_TEST

Suite *suite_limits(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("caps");
    tcase_add_test(tc, test_batchnorm_caps);
    tcase_add_test(tc, test_loss_caps);
    tcase_add_test(tc, test_gap_caps);
    tcase_add_test(tc, test_linear_caps);
    tcase_add_test(tc, test_elementwise_clamp);
    suite_add_tcase(s, tc);
    return s;
}
