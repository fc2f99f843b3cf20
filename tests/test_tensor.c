/*
 * test_tensor.c -- tensor creation and its size checks, views, upload and
 * download, int32 tensors, fill, lifetimes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

START_TEST(test_tensor_roundtrip)
{
    teeny_ctx *ctx = th_ctx();
    int64_t shape[5] = {2, 3, 1, 4, 5};
    teeny_tensor *t = th_tensor(ctx, 5, shape);
    ck_assert_int_eq(teeny_tensor_ndim(t), 5);
    ck_assert_int_eq(teeny_tensor_numel(t), 120);
    ck_assert_int_eq(teeny_tensor_dim(t, 3), 4);
    ck_assert_int_eq(teeny_tensor_dim(t, 5), -1);
    ck_assert_int_eq(teeny_tensor_dim(t, -1), -1);
    float x[120], y[120];
    for (int i = 0; i < 120; i++)
        x[i] = (float)i * 0.25f - 7;
    TH_OK(ctx, teeny_tensor_write(t, x, 120));
    TH_OK(ctx, teeny_tensor_read(t, y, 120));
    ck_assert(!memcmp(x, y, sizeof x));
    TH_OK(ctx, teeny_tensor_fill(t, 2.5f));
    TH_OK(ctx, teeny_tensor_read(t, y, 120));
    for (int i = 0; i < 120; i++)
        ck_assert(y[i] == 2.5f);
    cl_mem buf;
    size_t off;
    TH_OK(ctx, teeny_tensor_cl(t, &buf, &off));
    ck_assert(buf != NULL && off == 0);
    teeny_tensor_destroy(t);
    teeny_tensor_destroy(NULL);
}
END_TEST

START_TEST(test_tensor_views)
{
    teeny_ctx *ctx = th_ctx();
    int64_t shape[1] = {100}, vshape[2] = {3, 5}, vv[1] = {4};
    float x[100], y[15], z[4];
    for (int i = 0; i < 100; i++)
        x[i] = (float)i;
    teeny_tensor *base = th_tensor_from(ctx, 1, shape, x), *v = NULL, *vv_t = NULL;
    TH_OK(ctx, teeny_tensor_view(base, 17, 2, vshape, &v));
    TH_OK(ctx, teeny_tensor_read(v, y, 15));
    for (int i = 0; i < 15; i++)
        ck_assert(y[i] == 17 + i);
    TH_OK(ctx, teeny_tensor_view(v, 2, 1, vv, &vv_t)); /* view of a view */
    cl_mem buf;
    size_t off;
    TH_OK(ctx, teeny_tensor_cl(vv_t, &buf, &off));
    ck_assert_uint_eq(off, 19 * 4);
    teeny_tensor_destroy(base); /* views keep the storage alive */
    teeny_tensor_destroy(v);
    TH_OK(ctx, teeny_tensor_read(vv_t, z, 4));
    for (int i = 0; i < 4; i++)
        ck_assert(z[i] == 19 + i);
    teeny_tensor_destroy(vv_t);

    base = th_tensor(ctx, 1, shape);
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_tensor_view(base, 90, 2, vshape, &v));
    ck_assert(v == NULL);
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_tensor_view(base, -1, 1, vv, &v));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_view(base, 0, 0, vv, &v));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_tensor_view(NULL, 0, 1, vv, &v));
    teeny_tensor_destroy(base);
}
END_TEST

START_TEST(test_tensor_i32)
{
    teeny_ctx *ctx = th_ctx();
    int64_t shape[1] = {7};
    int32_t a[7] = {0, -1, 2, 2147483647, -2147483647 - 1, 9, 10}, b[7];
    teeny_tensor *t = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, shape, &t));
    TH_OK(ctx, teeny_tensor_write_i32(t, a, 7));
    TH_OK(ctx, teeny_tensor_read_i32(t, b, 7));
    ck_assert(!memcmp(a, b, sizeof a));
    float f[7];
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_read(t, f, 7));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_fill(t, 1.0f));
    teeny_tensor_destroy(t);
}
END_TEST

START_TEST(test_tensor_errors)
{
    teeny_ctx *ctx = th_ctx();
    teeny_tensor *t = (teeny_tensor *)0x1;
    int64_t ok[2] = {2, 3}, zero[2] = {2, 0}, neg[2] = {-1, 3}, huge[2] = {65536, 65536}, big[1] = {INT32_MAX};
    int64_t six[6] = {1, 1, 1, 1, 1, 1};
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_create(ctx, 2, zero, &t));
    ck_assert(t == NULL);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_create(ctx, 2, neg, &t));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_create(ctx, 0, ok, &t));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_create(ctx, 6, six, &t));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_create(ctx, 2, NULL, &t));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_create(ctx, 2, ok, NULL));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_tensor_create(NULL, 2, ok, &t));
    TH_STATUS(ctx, TEENY_ERR_RANGE, teeny_tensor_create(ctx, 2, huge, &t));
    ck_assert_msg(strstr(teeny_last_error(ctx), "2^31") != NULL, "%s", teeny_last_error(ctx));
    teeny_device_info info = TEENY_DEVICE_INFO_INIT;
    TH_OK(ctx, teeny_ctx_device_info(ctx, &info));
    if ((uint64_t)INT32_MAX * 4 > info.max_alloc_bytes) {
        TH_STATUS(ctx, TEENY_ERR_RANGE, teeny_tensor_create(ctx, 1, big, &t));
        ck_assert_msg(strstr(teeny_last_error(ctx), "max allocation") != NULL, "%s", teeny_last_error(ctx));
    }
    t = th_tensor(ctx, 2, ok);
    float x[6] = {0};
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_tensor_write(t, x, 5));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_tensor_read(t, x, 7));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_write(t, NULL, 6));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_tensor_write(NULL, x, 6));
    teeny_tensor_destroy(t);
}
END_TEST

/* Destroying the context first defers the release to the last tensor. */
START_TEST(test_tensor_outlives_ctx)
{
    teeny_ctx *ctx = NULL;
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    int64_t shape[1] = {8};
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    teeny_tensor *t = th_tensor_from(ctx, 1, shape, x);
    teeny_ctx_destroy(ctx);
    TH_OK(NULL, teeny_tensor_read(t, y, 8));
    ck_assert(!memcmp(x, y, sizeof x));
    teeny_tensor_destroy(t);
}
END_TEST

/* Workspace has an owner: buffers taken during one op are distinct, a
 * larger request never frees an earlier one, and the pool takes them all
 * back when the op ends (the conv2d backward used a freed buffer when a
 * later, larger request replaced the context's single scratch buffer). */
START_TEST(test_tensor_workspace_owner)
{
    teeny_ctx *ctx = th_ctx();
    cl_mem a, b, c, d;
    ctx->ws.op_depth++; /* as teeny__op_run does */
    TH_OK(ctx, teeny__scratch(ctx, 1000, &a));
    TH_OK(ctx, teeny__scratch(ctx, 1 << 20, &b)); /* larger: must not replace a */
    TH_OK(ctx, teeny__scratch(ctx, 10, &c));
    ck_assert_ptr_ne(a, b);
    ck_assert_ptr_ne(a, c);
    ck_assert_ptr_ne(b, c);
    size_t size = 0;
    ck_assert_int_eq(clGetMemObjectInfo(a, CL_MEM_SIZE, sizeof size, &size, NULL), CL_SUCCESS);
    ck_assert_uint_ge(size, 1000); /* a is still a live buffer */
    for (int i = 3; i < TEENY__WS_SLOTS; i++)
        TH_OK(ctx, teeny__scratch(ctx, 4, &d));
    TH_STATUS(ctx, TEENY_ERR_STATE, teeny__scratch(ctx, 4, &d)); /* all taken: an error, not a shared buffer */
    ctx->ws.op_depth--;
    teeny__scratch_release_all(ctx);
    TH_OK(ctx, teeny__scratch(ctx, 1 << 20, &d)); /* back in the pool: reused */
    ck_assert_ptr_eq(d, b);
    teeny__scratch_release_all(ctx);
}
END_TEST

Suite *suite_tensor(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("forward"), *err = tcase_create("errors");
    tcase_add_test(tc, test_tensor_roundtrip);
    tcase_add_test(tc, test_tensor_views);
    tcase_add_test(tc, test_tensor_i32);
    tcase_add_test(tc, test_tensor_outlives_ctx);
    tcase_add_test(tc, test_tensor_workspace_owner);
    tcase_add_test(err, test_tensor_errors);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, err);
    return s;
}
