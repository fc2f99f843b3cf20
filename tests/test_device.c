/*
 * test_device.c -- device listing, selection by spec, contexts over an
 * application's own OpenCL objects, status names and the log callback.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "clwrap.h"

START_TEST(test_device_list)
{
    int n = -1;
    TH_OK(NULL, teeny_devices_list(NULL, 0, &n));
    ck_assert_int_gt(n, 0);
    teeny_device_info *d = th_malloc((size_t)n * sizeof *d);
    TH_OK(NULL, teeny_devices_list(d, n, &n));
    int defaults = 0;
    for (int i = 0; i < n; i++) {
        ck_assert(d[i].device_name[0] != '\0');
        ck_assert_uint_gt(d[i].compute_units, 0);
        ck_assert_uint_gt(d[i].max_work_group_size, 0);
        ck_assert(d[i].local_mem_bytes > 0 && d[i].global_mem_bytes > 0 && d[i].max_alloc_bytes > 0);
        ck_assert(strstr(d[i].opencl_c_version, "OpenCL C") != NULL);
        defaults += d[i].is_default;
    }
    ck_assert_int_eq(defaults, 1);
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_devices_list(NULL, 0, NULL));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_devices_list(NULL, 3, &n));
    free(d);
}
END_TEST

START_TEST(test_device_specs)
{
    teeny_device_info first;
    int n;
    TH_OK(NULL, teeny_devices_list(&first, 1, &n));
    char by_index[16], by_name[32];
    snprintf(by_index, sizeof by_index, "%d:%d", first.platform_index, first.device_index);
    /* a lower-case piece of the name */
    snprintf(by_name, sizeof by_name, "%.6s", first.device_name);
    for (char *p = by_name; *p; p++)
        *p = (char)((*p >= 'A' && *p <= 'Z') ? *p - 'A' + 'a' : *p);
    const char *ok_specs[] = {by_index, by_name, first.is_cpu ? "cpu" : "gpu", NULL};
    for (int i = 0; i < 4; i++) {
        teeny_ctx *ctx = NULL;
        if (i == 3 && !getenv("TEENY_DEVICE")) {
            TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
        } else if (i < 3) {
            TH_OK(NULL, teeny_ctx_create(ok_specs[i], &ctx));
        } else {
            continue;
        }
        ck_assert_str_eq(teeny_ctx_device_name(ctx), first.device_name);
        ck_assert(teeny_ctx_cl_queue(ctx) != NULL);
        TH_OK(ctx, teeny_ctx_finish(ctx));
        TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
        teeny_ctx_destroy(ctx);
    }
    teeny_ctx *ctx = (teeny_ctx *)0x1;
    TH_STATUS(NULL, TEENY_ERR_NO_DEVICE, teeny_ctx_create("no-such-device-xyz", &ctx));
    ck_assert(ctx == NULL);
    /* the message lists the devices that exist */
    ck_assert_msg(strstr(teeny_last_error(NULL), first.device_name) != NULL, "%s", teeny_last_error(NULL));
    TH_STATUS(NULL, TEENY_ERR_NO_DEVICE, teeny_ctx_create("9:9", &ctx));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_ctx_create(NULL, NULL));
    teeny_ctx_destroy(NULL);
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_ctx_finish(NULL));
}
END_TEST

/* An application's own context and queue: retained, used, never destroyed. */
START_TEST(test_device_from_cl)
{
    cl_platform_id p;
    cl_device_id d;
    cl_int err;
    teeny_device_info first;
    int n;
    TH_OK(NULL, teeny_devices_list(&first, 1, &n));
    cl_platform_id ps[16];
    cl_uint np;
    ck_assert(clGetPlatformIDs(16, ps, &np) == CL_SUCCESS);
    p = ps[first.platform_index];
    cl_device_id ds[16];
    cl_uint nd;
    ck_assert(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 16, ds, &nd) == CL_SUCCESS);
    d = ds[first.device_index];
    cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    ck_assert(err == CL_SUCCESS);
    cl_command_queue q = clCreateCommandQueue(c, d, 0, &err);
    ck_assert(err == CL_SUCCESS);
    cl_mem buf = clCreateBuffer(c, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
    ck_assert(err == CL_SUCCESS);

    teeny_ctx *ctx = NULL;
    TH_OK(NULL, teeny_ctx_create_from_cl(c, d, q, &ctx));
    ck_assert(teeny_ctx_cl_queue(ctx) == q);
    int64_t shape[1] = {10};
    teeny_tensor *a = NULL, *b = NULL;
    TH_OK(ctx, teeny_tensor_wrap_cl(ctx, buf, 16, 1, shape, &a)); /* floats 4..13 */
    TH_OK(ctx, teeny_tensor_wrap_cl(ctx, buf, 4 * 20, 1, shape, &b)); /* floats 20..29 */
    float x[10], y[10];
    for (int i = 0; i < 10; i++)
        x[i] = (float)i;
    TH_OK(ctx, teeny_tensor_write(a, x, 10));
    TH_OK(ctx, teeny_activation_forward(ctx, TEENY_ACT_NONE, a, b));
    TH_OK(ctx, teeny_tensor_read(b, y, 10));
    for (int i = 0; i < 10; i++)
        ck_assert(y[i] == x[i]);
    /* the bytes really are the application's buffer */
    float raw[64];
    ck_assert(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, sizeof raw, raw, 0, NULL, NULL) == CL_SUCCESS);
    ck_assert(raw[4] == 0.0f && raw[13] == 9.0f && raw[29] == 9.0f);
    teeny_tensor *bad = NULL;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_wrap_cl(ctx, buf, 2, 1, shape, &bad));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_tensor_wrap_cl(ctx, buf, 4 * 60, 1, shape, &bad));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_wrap_cl(ctx, NULL, 0, 1, shape, &bad));
    ck_assert(bad == NULL);
    teeny_tensor_destroy(a);
    teeny_tensor_destroy(b);
    teeny_ctx_destroy(ctx);
    /* still ours and alive */
    ck_assert(clFinish(q) == CL_SUCCESS);
    ck_assert(clReleaseMemObject(buf) == CL_SUCCESS);
    ck_assert(clReleaseCommandQueue(q) == CL_SUCCESS);
    ck_assert(clReleaseContext(c) == CL_SUCCESS);
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_ctx_create_from_cl(NULL, d, q, &ctx));
}
END_TEST

START_TEST(test_device_status_names)
{
    ck_assert_str_eq(teeny_status_name(TEENY_OK), "TEENY_OK");
    ck_assert_str_eq(teeny_status_name(TEENY_ERR_SHAPE), "TEENY_ERR_SHAPE");
    ck_assert_str_eq(teeny_status_name(TEENY_ERR_BUILD), "TEENY_ERR_BUILD");
    ck_assert_str_eq(teeny_status_name((teeny_status)999), "TEENY_UNKNOWN");
    for (int s = 0; s < TEENY_STATUS_COUNT; s++)
        ck_assert(strlen(teeny_status_str((teeny_status)s)) > 3);
    ck_assert_uint_eq(teeny_version(), TEENY_VERSION_HEX);
}
END_TEST

static int log_count;
static void count_log(teeny_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)msg;
    *(int *)ud += 1;
}

START_TEST(test_device_log_callback)
{
    log_count = 0;
    teeny_log_set(count_log, &log_count);
    teeny_ctx *ctx = NULL;
    teeny_ctx_create("no-such-device-xyz", &ctx);
    teeny_log_set(NULL, NULL);
    ck_assert_int_gt(log_count, 0);
}
END_TEST

Suite *suite_device(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("forward");
    TCase *err = tcase_create("errors");
    tcase_add_test(tc, test_device_list);
    tcase_add_test(tc, test_device_specs);
    tcase_add_test(tc, test_device_from_cl);
    tcase_add_test(err, test_device_status_names);
    tcase_add_test(err, test_device_log_callback);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, err);
    return s;
}
