/*
 * test_elementwise.c -- add and activations against the float64 reference,
 * aliasing, views and error paths.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ref/elementwise_ref.h"

START_TEST(test_elementwise_forward)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(100 + (uint64_t)_i);
    int n = th_int(&r, 1, 5000);
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
    ck_assert_msg(th_nrms(y, ref, (size_t)n) <= 1e-7, "add n=%d seed %d", n, 100 + _i);
    free(y);
    for (int act = 0; act < 3; act++) {
        th_poison(ty);
        TH_OK(ctx, teeny_activation_forward(ctx, (teeny_act)act, ta, ty));
        for (int i = 0; i < n; i++)
            ref[i] = ref_act(act, a[i]);
        y = th_read(ty);
        ck_assert(th_first_nonfinite(y, (size_t)n) < 0);
        ck_assert_msg(th_nrms(y, ref, (size_t)n) <= 1e-6, "act %d n=%d seed %d: %g", act, n, 100 + _i,
                      th_nrms(y, ref, (size_t)n));
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
}
END_TEST

START_TEST(test_elementwise_backward)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(300 + (uint64_t)_i);
    int n = th_int(&r, 1, 3000);
    int64_t shape[1] = {n};
    float *x = th_malloc((size_t)n * 4), *dy = th_malloc((size_t)n * 4);
    double *ref = th_malloc((size_t)n * 8);
    th_fill_uniform(&r, x, (size_t)n, -6, 6);
    th_fill_normal(&r, dy, (size_t)n, 0, 1);
    teeny_tensor *tx = th_tensor_from(ctx, 1, shape, x), *tdy = th_tensor_from(ctx, 1, shape, dy),
                 *tdx = th_tensor(ctx, 1, shape);
    for (int act = 0; act < 3; act++) {
        th_poison(tdx);
        TH_OK(ctx, teeny_activation_backward(ctx, (teeny_act)act, tx, tdy, tdx));
        for (int i = 0; i < n; i++) {
            ref[i] = dy[i] * ref_act_grad(act, x[i]);
            /* the reference derivative itself against central differences */
            double h = 1e-6, fd = (ref_act(act, x[i] + h) - ref_act(act, x[i] - h)) / (2 * h);
            if (act != 1 || fabs(x[i]) > 1e-5)
                ck_assert_msg(fabs(fd - ref_act_grad(act, x[i])) < 1e-6, "act %d at %g", act, (double)x[i]);
        }
        float *dx = th_read(tdx);
        ck_assert(th_first_nonfinite(dx, (size_t)n) < 0);
        ck_assert_msg(th_nrms(dx, ref, (size_t)n) <= 1e-6, "act %d backward n=%d seed %d", act, n, 300 + _i);
        free(dx);
    }
    free(x);
    free(dy);
    free(ref);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(tdy);
    teeny_tensor_destroy(tdx);
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
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_activation_forward(ctx, (teeny_act)7, a, a));
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

Suite *suite_elementwise(void)
{
    Suite *s = suite_create("elementwise");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_elementwise_forward, 0, th_small() ? 2 : 20);
    tcase_add_loop_test(bwd, test_elementwise_backward, 0, th_small() ? 2 : 20);
    tcase_add_test(err, test_elementwise_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
