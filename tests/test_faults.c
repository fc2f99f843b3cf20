/*
 * test_faults.c -- fault injection: fail every OpenCL call and host
 * allocation a batch-norm training step (forward + backward, warm kernel
 * cache) makes, one at a time. Each failure must come back as a status
 * naming the failed call, leak nothing (make check-asan), and leave the
 * context and tensors usable: the same step then succeeds and gives the
 * same bits as a clean run.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "clwrap.h"

enum { B = 3, C = 5, H = 6, W = 7, N = B * C * H * W };

typedef struct {
    teeny_tensor *x, *dy, *y, *dx, *w, *b, *rm, *rv, *m, *r, *dw, *db;
} step_tensors;

static void step_make(teeny_ctx *ctx, step_tensors *t)
{
    th_rng rng = th_rng_make(17);
    float x[N], dy[N], v[C];
    int64_t xs[4] = {B, C, H, W}, cs[1] = {C};
    th_fill_normal(&rng, x, N, 1, 2);
    th_fill_normal(&rng, dy, N, 0, 1);
    th_fill_uniform(&rng, v, C, 0.5, 1.5);
    t->x = th_tensor_from(ctx, 4, xs, x);
    t->dy = th_tensor_from(ctx, 4, xs, dy);
    t->y = th_tensor(ctx, 4, xs);
    t->dx = th_tensor(ctx, 4, xs);
    teeny_tensor **vs[] = {&t->w, &t->b, &t->rm, &t->rv, &t->m, &t->r, &t->dw, &t->db};
    for (int i = 0; i < 8; i++)
        *vs[i] = th_tensor_from(ctx, 1, cs, v);
}

static void step_reset_state(teeny_ctx *ctx, step_tensors *t)
{
    float v[C];
    for (int i = 0; i < C; i++)
        v[i] = 1.0f;
    TH_OK(ctx, teeny_tensor_write(t->rm, v, C));
    TH_OK(ctx, teeny_tensor_write(t->rv, v, C));
}

static teeny_status step(teeny_ctx *ctx, step_tensors *t)
{
    teeny_status st = teeny_batchnorm_forward_train(ctx, t->x, t->w, t->b, t->rm, t->rv, 0.1f, 1e-5f, t->y, t->m, t->r);
    if (st == TEENY_OK)
        st = teeny_batchnorm_backward_train(ctx, t->x, t->dy, t->w, t->m, t->r, t->dx, t->dw, t->db);
    return st;
}

static void step_free(step_tensors *t)
{
    teeny_tensor **all = (teeny_tensor **)t;
    for (size_t i = 0; i < sizeof *t / sizeof(teeny_tensor *); i++)
        teeny_tensor_destroy(all[i]);
}

START_TEST(test_faults_batchnorm_step)
{
    teeny_ctx *ctx = NULL;
    step_tensors t;
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    step_make(ctx, &t);
    step_reset_state(ctx, &t);
    TH_OK(ctx, step(ctx, &t)); /* warm the kernel cache and workspace */
    float *y_ref = th_read(t.y), *dx_ref = th_read(t.dx);

    step_reset_state(ctx, &t);
    TH_OK(ctx, teeny_ctx_finish(ctx));
    teeny__calls_reset();
    TH_OK(ctx, step(ctx, &t));
    long total = teeny__calls_total();
    ck_assert_int_gt(total, 4);

    for (long k = 1; k <= total; k++) {
        step_reset_state(ctx, &t);
        TH_OK(ctx, teeny_ctx_finish(ctx));
        teeny__fault_arm(k);
        teeny_status st = step(ctx, &t);
        int fired = teeny__fault_fired();
        teeny__fault_arm(0);
        ck_assert_msg(fired, "call %ld of %ld was not reached", k, total);
        ck_assert_msg(st != TEENY_OK, "call %ld failed but the step reported success", k);
        ck_assert_msg(st == TEENY_ERR_OPENCL || st == TEENY_ERR_NOMEM, "call %ld: %s", k, teeny_status_name(st));
        const char *msg = teeny_last_error(ctx);
        ck_assert_msg(strstr(msg, "failed") != NULL && (strstr(msg, "cl") != NULL || strstr(msg, "memory") != NULL),
                      "call %ld: message does not name the call: %s", k, msg);
        /* still usable: the same step now succeeds, bit-identically */
        step_reset_state(ctx, &t);
        TH_OK(ctx, step(ctx, &t));
        float *y = th_read(t.y), *dx = th_read(t.dx);
        ck_assert_msg(!memcmp(y, y_ref, sizeof(float) * N) && !memcmp(dx, dx_ref, sizeof(float) * N),
                      "results differ after fault at call %ld", k);
        free(y);
        free(dx);
    }
    free(y_ref);
    free(dx_ref);
    step_free(&t);
    teeny_ctx_destroy(ctx);
}
END_TEST

/* Faults while creating a context and tensors and building kernels from a
 * cold in-memory cache: every failure is a status, nothing leaks, and a
 * fault the library absorbs (a disk-cache read or write is only an
 * optimization) still gives the right results. */
static teeny_status setup_and_step(float *y_out)
{
    teeny_ctx *ctx = NULL;
    teeny_status st = teeny_ctx_create(NULL, &ctx);
    if (st != TEENY_OK) {
        ck_assert(ctx == NULL);
        return st;
    }
    th_rng rng = th_rng_make(17);
    float x[N], v[C];
    th_fill_normal(&rng, x, N, 1, 2);
    for (int i = 0; i < C; i++)
        v[i] = 1.0f;
    int64_t xs[4] = {B, C, H, W}, cs[1] = {C};
    teeny_tensor *ts[12] = {0};
    for (int i = 0; i < 12 && st == TEENY_OK; i++)
        st = i < 4 ? teeny_tensor_create(ctx, 4, xs, &ts[i]) : teeny_tensor_create(ctx, 1, cs, &ts[i]);
    step_tensors *t = (step_tensors *)ts;
    if (st == TEENY_OK)
        st = teeny_tensor_write(t->x, x, N);
    if (st == TEENY_OK)
        st = teeny_tensor_write(t->dy, x, N);
    for (int i = 4; i < 12 && st == TEENY_OK; i++)
        st = teeny_tensor_write(ts[i], v, C);
    if (st == TEENY_OK)
        st = step(ctx, t);
    if (st == TEENY_OK)
        st = teeny_tensor_read(t->y, y_out, N);
    for (int i = 0; i < 12; i++)
        teeny_tensor_destroy(ts[i]);
    teeny_ctx_destroy(ctx);
    return st;
}

START_TEST(test_faults_setup)
{
    static float y_ref[N], y[N];
    teeny__calls_reset();
    TH_OK(NULL, setup_and_step(y_ref));
    long total = teeny__calls_total();
    for (long k = 1; k <= total; k += th_small() ? 7 : 1) {
        teeny__fault_arm(k);
        teeny_status st = setup_and_step(y);
        int fired = teeny__fault_fired();
        teeny__fault_arm(0);
        ck_assert_msg(fired, "call %ld of %ld was not reached", k, total);
        if (st == TEENY_OK)
            ck_assert_msg(!memcmp(y, y_ref, sizeof y), "fault at call %ld absorbed but results differ", k);
    }
}
END_TEST

Suite *suite_faults(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_faults_batchnorm_step);
    tcase_add_test(tc, test_faults_setup);
    suite_add_tcase(s, tc);
    return s;
}
