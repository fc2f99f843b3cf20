/*
 * test_device.c -- device listing, selection by spec, contexts over an
 * application's own OpenCL objects, status names, the log callback (and
 * replacing it while other threads log), the ABI rules: struct_size of
 * teeny_device_info, the uniform _destroy names; the strict number parser
 * and every environment variable the library reads, malformed values
 * refused at context creation.
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "core/clwrap.h"
#include "internal.h"

START_TEST(test_device_list)
{
    int n = -1;
    TH_OK(NULL, teeny_devices_list(NULL, 0, &n));
    ck_assert_int_gt(n, 0);
    teeny_device_info *d = th_malloc((size_t)n * sizeof *d);
    d[0].struct_size = sizeof *d;
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
    teeny_device_info first = TEENY_DEVICE_INFO_INIT;
    int n;
    TH_OK(NULL, teeny_devices_list(&first, 1, &n));
    char by_index[16], by_name[32];
    snprintf(by_index, sizeof by_index, "%d:%d", first.platform_index, first.device_index);
    /* a lower-case piece of the name */
    snprintf(by_name, sizeof by_name, "%.6s", first.device_name);
    for (char *p = by_name; *p; p++)
        *p = (char)((*p >= 'A' && *p <= 'Z') ? *p - 'A' + 'a' : *p);
    const char *ok_specs[] = {by_index, by_name, first.is_cpu ? "cpu" : "gpu", NULL};
    /* the default device (no spec, no TEENY_DEVICE) is the first GPU, else
     * the first device: the listing's first where it is a GPU or no GPU
     * is listed (the ICD loader may list a CPU platform first) */
    teeny_device_info all[32];
    int n_all = 0, dflt = 0;
    for (int i = 0; i < 32; i++)
        all[i] = (teeny_device_info)TEENY_DEVICE_INFO_INIT;
    TH_OK(NULL, teeny_devices_list(all, 32, &n_all));
    while (dflt < n_all && dflt < 32 && !all[dflt].is_gpu)
        dflt++;
    if (dflt == n_all || dflt == 32)
        dflt = 0;
    for (int i = 0; i < 4; i++) {
        teeny_ctx *ctx = NULL;
        if (i == 3 && !getenv("TEENY_DEVICE")) {
            TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
        } else if (i < 3) {
            TH_OK(NULL, teeny_ctx_create(ok_specs[i], &ctx));
        } else {
            continue;
        }
        ck_assert_str_eq(teeny_ctx_device_name(ctx), i == 3 ? all[dflt].device_name : first.device_name);
        ck_assert(teeny_ctx_cl_queue(ctx) != NULL);
        TH_OK(ctx, teeny_ctx_finish(ctx));
        int active = -1;
        TH_OK(ctx, teeny_ctx_tf32_active(ctx, &active));
        ck_assert_int_eq(active, 0); /* off by default */
        TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
        TH_OK(ctx, teeny_ctx_tf32_active(ctx, &active));
        ck_assert(active == 0 || active == 1);
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_ctx_tf32_active(ctx, NULL));
        teeny_ctx_destroy(ctx);
    }
    int active_null;
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_ctx_tf32_active(NULL, &active_null));
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
    teeny_device_info first = TEENY_DEVICE_INFO_INIT;
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

/* A caller built against a newer header (a larger struct, fields the
 * library does not know) and one that sets the smallest size: the library
 * writes what fits, zeroes what it does not know, never past struct_size. */
START_TEST(test_device_info_struct_size)
{
    int n = -1, n2 = -1;
    TH_OK(NULL, teeny_devices_list(NULL, 0, &n));
    ck_assert_int_gt(n, 0);
    teeny_device_info *d = th_malloc((size_t)n * sizeof *d);
    d[0].struct_size = sizeof *d;
    TH_OK(NULL, teeny_devices_list(d, n, &n));

    const size_t big = sizeof(teeny_device_info) + 24, extra = 64;
    unsigned char *buf = th_malloc((size_t)n * big + extra);
    memset(buf, 0xAB, (size_t)n * big + extra);
    ((teeny_device_info *)buf)->struct_size = big;
    TH_OK(NULL, teeny_devices_list((teeny_device_info *)buf, n, &n2));
    ck_assert_int_eq(n2, n);
    for (int i = 0; i < n; i++) {
        teeny_device_info e;
        memcpy(&e, buf + (size_t)i * big, sizeof e);
        ck_assert_uint_eq(e.struct_size, big);
        ck_assert_str_eq(e.device_name, d[i].device_name);
        ck_assert_str_eq(e.driver_version, d[i].driver_version);
        ck_assert_uint_eq(e.compute_units, d[i].compute_units);
        ck_assert(e.max_alloc_bytes == d[i].max_alloc_bytes);
        ck_assert_int_eq(e.is_default, d[i].is_default);
        for (size_t b = sizeof e; b < big; b++)
            ck_assert_uint_eq(buf[(size_t)i * big + b], 0);
    }
    for (size_t b = (size_t)n * big; b < (size_t)n * big + extra; b++)
        ck_assert_uint_eq(buf[b], 0xAB);

    /* the smallest size: nothing written past it */
    const size_t small = TEENY_DEVICE_INFO_MIN_SIZE;
    memset(buf, 0xAB, sizeof(teeny_device_info) + extra);
    ((teeny_device_info *)buf)->struct_size = small;
    TH_OK(NULL, teeny_devices_list((teeny_device_info *)buf, 1, &n2));
    ck_assert_int_eq(((teeny_device_info *)buf)->is_default, d[0].is_default);
    for (size_t b = small; b < sizeof(teeny_device_info) + extra; b++)
        ck_assert_uint_eq(buf[b], 0xAB);

    /* unset or nonsense sizes: refused, nothing written */
    const size_t bad[3] = {0, TEENY_DEVICE_INFO_MIN_SIZE - 1, (size_t)1 << 20};
    for (int k = 0; k < 3; k++) {
        memset(buf, 0xAB, big + extra);
        ((teeny_device_info *)buf)->struct_size = bad[k];
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_devices_list((teeny_device_info *)buf, 1, &n2));
        ck_assert(strstr(teeny_last_error(NULL), "struct_size") != NULL);
        for (size_t b = sizeof(size_t); b < big + extra; b++)
            ck_assert_uint_eq(buf[b], 0xAB);
    }

    teeny_ctx *ctx;
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    teeny_device_info info = TEENY_DEVICE_INFO_INIT;
    TH_OK(ctx, teeny_ctx_device_info(ctx, &info));
    ck_assert_uint_eq(info.struct_size, sizeof info);
    ck_assert_str_eq(info.device_name, teeny_ctx_device_name(ctx));
    memset(buf, 0xAB, big + extra);
    ((teeny_device_info *)buf)->struct_size = big;
    TH_OK(ctx, teeny_ctx_device_info(ctx, (teeny_device_info *)buf));
    ck_assert_str_eq(((teeny_device_info *)buf)->device_name, info.device_name);
    for (size_t b = sizeof info; b < big; b++)
        ck_assert_uint_eq(buf[b], 0);
    ck_assert_uint_eq(buf[big], 0xAB);
    info.struct_size = 0;
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_ctx_device_info(ctx, &info));
    teeny_ctx_destroy(ctx);
    free(buf);
    free(d);
}
END_TEST

/* Two sinks, each checking that it is called with its own user data, swapped
 * by one thread while two others log: every message reaches one whole pair. */
static atomic_int sink_calls[2], sink_mixups;
static int sink_ids[2] = {0, 1};
static void sink_a(teeny_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)msg;
    if (ud != &sink_ids[0])
        atomic_fetch_add(&sink_mixups, 1);
    atomic_fetch_add(&sink_calls[0], 1);
}
static void sink_b(teeny_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)msg;
    if (ud != &sink_ids[1])
        atomic_fetch_add(&sink_mixups, 1);
    atomic_fetch_add(&sink_calls[1], 1);
}
static void *log_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++)
        teeny__log(TEENY_LOG_DEBUG, "message %d", i); /* the default sink drops debug */
    return NULL;
}
static void *swap_sinks(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++)
        teeny_log_set(i % 2 ? sink_b : sink_a, &sink_ids[i % 2]);
    return NULL;
}

START_TEST(test_device_log_threads)
{
    pthread_t t[3];
    atomic_store(&sink_mixups, 0);
    atomic_store(&sink_calls[0], 0);
    atomic_store(&sink_calls[1], 0);
    teeny_log_set(sink_a, &sink_ids[0]);
    ck_assert_int_eq(pthread_create(&t[0], NULL, log_many, NULL), 0);
    ck_assert_int_eq(pthread_create(&t[1], NULL, log_many, NULL), 0);
    ck_assert_int_eq(pthread_create(&t[2], NULL, swap_sinks, NULL), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    teeny_log_set(NULL, NULL);
    ck_assert_int_eq(atomic_load(&sink_mixups), 0);
    /* no sink was ever unset during the run: every message was delivered */
    ck_assert_int_eq(atomic_load(&sink_calls[0]) + atomic_load(&sink_calls[1]), 40000);
}
END_TEST

/* The uniform destructor names next to their deprecated aliases. */
START_TEST(test_device_destroy_names)
{
    char path[64];
    static const unsigned char idx_bytes[] = {0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9};
    snprintf(path, sizeof path, "/tmp/teeny-destroy-%d.idx", (int)getpid());
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(idx_bytes, 1, sizeof idx_bytes, f), sizeof idx_bytes);
    fclose(f);
    teeny_idx *a, *b;
    TH_OK(NULL, teeny_idx_load(path, &a));
    TH_OK(NULL, teeny_idx_load(path, &b));
    ck_assert_int_eq(teeny_idx_data(a)[2], 9);
    teeny_idx_destroy(a);
    teeny_idx_free(b); /* deprecated alias, still there */
    teeny_idx_destroy(NULL);
    teeny_idx_free(NULL);
    teeny_st_file_destroy(NULL);
    teeny_st_close(NULL);
    remove(path);
}
END_TEST

/* The spec matcher as a pure function over the strings implementations
 * report (only PoCL runs here): which of these devices each spec picks. */
START_TEST(test_device_spec_names)
{
    static const struct {
        const char *platform, *vendor, *device;
        int gpu;
    } DEVS[] = {
        /* 0 */ {"Portable Computing Language", "AuthenticAMD", "pthread-skylake-avx512-AMD EPYC", 0},
        /* 1 */ {"rusticl", "Mesa/X.org", "llvmpipe (LLVM 15.0.6, 256 bits)", 0},
        /* 2 */ {"rusticl", "AMD", "AMD Radeon RX 6800 (radeonsi, navi21, LLVM 15.0.6)", 1},
        /* 3 */ {"Clover", "AMD", "AMD Radeon RX 580 Series (polaris10, LLVM 15.0.6)", 1},
        /* 4 */ {"Apple", "Apple", "Apple M1", 1},
        /* 5 */ {"Apple", "Intel", "Intel(R) Core(TM) i7-8850H CPU @ 2.60GHz", 0},
        /* 6 */ {"ARM Platform", "ARM", "Mali-G78 r0p1", 1},
        /* 7 */ {"QUALCOMM Snapdragon(TM)", "QUALCOMM", "QUALCOMM Adreno(TM)", 1},
        /* 8 */ {"NVIDIA CUDA", "NVIDIA Corporation", "NVIDIA H200", 1},
        /* 9 */ {"Intel(R) OpenCL Graphics", "Intel(R) Corporation", "Intel(R) Arc(TM) A770 Graphics", 1},
        /* 10 */ {"AMD Accelerated Parallel Processing", "Advanced Micro Devices, Inc.", "gfx90a:sramecc+:xnack-", 1},
        /* 11 */ {"rusticl", "Mesa", "Mali-G52 (Panfrost)", 1},
        /* 12 */ {"Oclgrind", "University of Bristol", "Oclgrind Simulator", 0},
    };
    enum { N = sizeof DEVS / sizeof DEVS[0] };
    /* for each spec, one character per device above: 'x' where it matches */
    static const struct { const char *spec, *want; } SPECS[] = {
        {"pocl",     "x............"},
        {"rusticl",  ".xx........x."},
        {"RustiCL",  ".xx........x."},
        {"clover",   "...x........."},
        {"mesa",     ".xxx.......x."},
        {"apple",    "....xx......."},
        {"arm",      "......x....x."},
        {"mali",     "......x....x."},
        {"qualcomm", ".......x....."},
        {"adreno",   ".......x....."},
        {"nvidia",   "........x...."},
        {"intel",    ".....x...x..."},
        {"amd",      "x.xx......x.."},
        {"gpu",      "..xxx.xxxxxx."},
        {"cpu",      "xx...x......x"},
        {"gfx90a:sramecc+", "..........x.."},
        {"oclgrind", "............x"},
        {"1:0",      ".x..........."},
        {"4294967297:0", "............."},
        {"no-such",  "............."},
    };
    for (size_t s = 0; s < sizeof SPECS / sizeof SPECS[0]; s++) {
        char got[N + 1];
        for (int d = 0; d < N; d++) {
            teeny_device_info info = TEENY_DEVICE_INFO_INIT;
            snprintf(info.platform_name, sizeof info.platform_name, "%s", DEVS[d].platform);
            snprintf(info.vendor, sizeof info.vendor, "%s", DEVS[d].vendor);
            snprintf(info.device_name, sizeof info.device_name, "%s", DEVS[d].device);
            info.is_gpu = DEVS[d].gpu;
            info.is_cpu = !DEVS[d].gpu;
            info.platform_index = d;
            info.device_index = 0;
            got[d] = teeny__device_matches(&info, SPECS[s].spec) ? 'x' : '.';
        }
        got[N] = '\0';
        ck_assert_msg(!strcmp(got, SPECS[s].want), "spec \"%s\": matched %s, want %s", SPECS[s].spec, got,
                      SPECS[s].want);
    }
}
END_TEST

/* ---- numbers and the environment ---- */

/* The strict parser every number of the environment and the device spec
 * goes through: whole decimal text in range, nothing else. */
START_TEST(test_device_parse_int)
{
    static const struct {
        const char *text;
        long long lo, hi;
        int ok;
        long long value;
        const char *why;
    } cases[] = {
        {"0", 0, 10, 1, 0, NULL},
        {"007", 0, 10, 1, 7, NULL},
        {"10", 0, 10, 1, 10, NULL},
        {"11", 0, 10, 0, 0, "out of range"},
        {"-5", -10, 10, 1, -5, NULL},
        {"-11", -10, 10, 0, 0, "out of range"},
        {"-1", 0, 10, 0, 0, "out of range"},
        {"-0", 0, 10, 0, 0, "out of range"},
        {"", 0, 10, 0, 0, "empty"},
        {"abc", 0, 10, 0, 0, "not a decimal"},
        {"12abc", 0, 100, 0, 0, "not a decimal"},
        {"1e3", 0, 10000, 0, 0, "not a decimal"},
        {" 5", 0, 10, 0, 0, "not a decimal"},
        {"5 ", 0, 10, 0, 0, "not a decimal"},
        {"+5", 0, 10, 0, 0, "not a decimal"},
        {"0x10", 0, 100, 0, 0, "not a decimal"},
        {"1.0", 0, 10, 0, 0, "not a decimal"},
        {"-", -10, 10, 0, 0, "not a decimal"},
        {"4294967296", 0, INT_MAX, 0, 0, "out of range"},
        {"4294967296", 0, LLONG_MAX, 1, 4294967296LL, NULL},
        {"9223372036854775807", 0, LLONG_MAX, 1, LLONG_MAX, NULL},
        {"9223372036854775808", 0, LLONG_MAX, 0, 0, "out of range"},
        {"-9223372036854775808", LLONG_MIN, 0, 1, LLONG_MIN, NULL},
        {"-9223372036854775809", LLONG_MIN, 0, 0, 0, "out of range"},
        {"99999999999999999999999", 0, LLONG_MAX, 0, 0, "out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long long v = -42;
        const char *why = NULL;
        int ok = teeny__parse_int(cases[i].text, strlen(cases[i].text), cases[i].lo, cases[i].hi, &v, &why);
        ck_assert_msg(ok == cases[i].ok, "\"%s\" in %lld..%lld: %s", cases[i].text, cases[i].lo, cases[i].hi,
                      ok ? "accepted" : why);
        if (ok)
            ck_assert_msg(v == cases[i].value, "\"%s\" -> %lld", cases[i].text, v);
        else
            ck_assert_msg(v == -42 && why && strstr(why, cases[i].why), "\"%s\": %s, *out %lld", cases[i].text,
                          why ? why : "(no reason)", v);
    }
    /* the length bounds the text: a NUL inside is not the end */
    long long v = -42;
    const char *why = NULL;
    ck_assert(!teeny__parse_int("12\0" "3", 4, 0, 1000, &v, &why) && v == -42);
    ck_assert(teeny__parse_int("123", 2, 0, 1000, &v, &why) && v == 12);
}
END_TEST

/* Values that are not a number in range: every variable that takes a
 * number or a word refuses each of them. */
static const char *const MALFORMED[] = {"", "abc", "12abc", "-1", "4294967296", "1e3", " 5", "+1", "0x10", "1 "};
#define N_MALFORMED (sizeof MALFORMED / sizeof MALFORMED[0])

/* Every environment variable the library reads (grep getenv src/), with
 * values it takes and values it must refuse at context creation
 * (TEENY_ERR_ARG, a message naming the variable), besides MALFORMED for
 * the word-valued ones. The numeric rows (the tune layer's TEENY_ATTN_*)
 * have words 0 and numeric 1: every MALFORMED value, and lo - 1 and
 * hi + 1, are refused (teeny__env_int). TEENY_DEVICE: its own test below. */
static const struct {
    const char *name;
    int words;    /* word-valued: every MALFORMED value is refused */
    int numeric;  /* a number in lo..hi (teeny__env_int) */
    long long lo, hi;
    const char *ok[4], *bad[4];
} ENV_CASES[] = {
    {"TEENY_NO_CACHE", 1, 0, 0, 0, {"0", "1"}, {"yes", "true", "2", "01"}},
    {"TEENY_PROFILE", 1, 0, 0, 0, {"0", "1", "2"}, {"on", "10", "3"}},
    {"TEENY_TUNING", 1, 0, 0, 0, {"generic"}, {"GENERIC", "portable", "generic "}},
    {"TEENY_ATTN_NT", 0, 1, 4, 1024, {"4", "128"}, {"abc"}},
    {"TEENY_ATTN_RM", 0, 1, 1, 8, {"1", "8"}, {"abc"}},
    {"TEENY_ATTN_BN", 0, 1, 4, 128, {"16"}, {"abc"}},
    {"TEENY_ATTN_FIT", 0, 1, 0, 1, {"0", "1"}, {"yes"}},
    {"TEENY_ATTN_TF32_W", 0, 1, 1, 8, {"1", "8"}, {"abc"}},
    {"TEENY_ATTN_TF32_BN", 0, 1, 8, 128, {"8", "128"}, {"abc", "20"}},
    {"TEENY_ATTN_TF32_X3", 0, 1, 0, 1, {"0", "1"}, {"yes"}},
    {"TEENY_ATTN_TF32_PF", 0, 1, 0, 3, {"0", "3"}, {"both"}},
    {"TEENY_ATTN_TF32_EXP", 0, 1, 0, 3, {"0", "3"}, {"yes"}},
    {"TEENY_LOG", 1, 0, 0, 0, {"debug", "WARN", "none", "error"}, {"verbose", "warning", "3"}},
    /* paths: any text but an empty or over-long one */
    {"TEENY_CACHE_DIR", 0, 0, 0, 0, {"/tmp/teenycl-env-test", "relative dir"}, {""}},
    {"TEENY_KERNEL_DIR", 0, 0, 0, 0, {"/tmp/teenycl-env-test"}, {""}},
};

/* setenv name=value (NULL: unset) and create a context; its status, with
 * the context destroyed. */
static teeny_status ctx_with_env(const char *name, const char *value)
{
    teeny_ctx *ctx = (teeny_ctx *)0x1;
    if (value)
        ck_assert_int_eq(setenv(name, value, 1), 0);
    else
        unsetenv(name);
    teeny_status st = teeny_ctx_create(NULL, &ctx);
    if (st != TEENY_OK)
        ck_assert_ptr_null(ctx);
    teeny_ctx_destroy(ctx);
    return st;
}

static void expect_refused(const char *name, const char *value)
{
    teeny_status st = ctx_with_env(name, value);
    const char *msg = teeny_last_error(NULL);
    int shown = strlen(value) < 64; /* a long path is named by its length */
    ck_assert_msg(st == TEENY_ERR_ARG, "%s=\"%.64s\": %s (%s), want TEENY_ERR_ARG", name, value,
                  teeny_status_name(st), msg);
    ck_assert_msg(strstr(msg, name) && (!*value || !shown || strstr(msg, value)), "%s=\"%.64s\": message \"%s\"",
                  name, value, msg);
}

START_TEST(test_device_env)
{
    char long_path[4200];
    memset(long_path, 'd', sizeof long_path - 1);
    long_path[0] = '/';
    long_path[sizeof long_path - 1] = '\0';
    for (size_t i = 0; i < sizeof ENV_CASES / sizeof ENV_CASES[0]; i++) {
        const char *name = ENV_CASES[i].name, *saved = getenv(name);
        char keep[4200];
        snprintf(keep, sizeof keep, "%s", saved ? saved : "");
        for (int k = 0; k < 4 && ENV_CASES[i].ok[k]; k++) {
            teeny_status st = ctx_with_env(name, ENV_CASES[i].ok[k]);
            ck_assert_msg(st == TEENY_OK, "%s=\"%s\": %s (%s)", name, ENV_CASES[i].ok[k], teeny_status_name(st),
                          teeny_last_error(NULL));
        }
        for (int k = 0; k < 4 && ENV_CASES[i].bad[k]; k++)
            expect_refused(name, ENV_CASES[i].bad[k]);
        if (ENV_CASES[i].words || ENV_CASES[i].numeric)
            for (size_t k = 0; k < N_MALFORMED; k++)
                expect_refused(name, MALFORMED[k]);
        if (ENV_CASES[i].numeric) {
            char edge[32];
            snprintf(edge, sizeof edge, "%lld", ENV_CASES[i].lo - 1);
            expect_refused(name, edge);
            snprintf(edge, sizeof edge, "%lld", ENV_CASES[i].hi + 1);
            expect_refused(name, edge);
        }
        if (!ENV_CASES[i].words && !ENV_CASES[i].numeric)
            expect_refused(name, long_path);
        TH_OK(NULL, ctx_with_env(name, saved ? keep : NULL));
    }
}
END_TEST

/* teeny__env_int, the reader of numeric variables: the default when
 * unset, the value when well formed, TEENY_ERR_ARG naming the variable,
 * its value and the range otherwise (and *out = the default). */
START_TEST(test_device_env_int)
{
    const char *name = "TEENY_TEST_ENV_INT";
    long long v = 0;
    unsetenv(name);
    TH_OK(NULL, teeny__env_int(NULL, name, 4, 1024, 128, &v));
    ck_assert_int_eq(v, 128);
    setenv(name, "256", 1);
    TH_OK(NULL, teeny__env_int(NULL, name, 4, 1024, 128, &v));
    ck_assert_int_eq(v, 256);
    static const char *const bad[] = {"3", "1025"};
    for (size_t k = 0; k < N_MALFORMED + 2; k++) {
        const char *value = k < N_MALFORMED ? MALFORMED[k] : bad[k - N_MALFORMED];
        setenv(name, value, 1);
        v = 0;
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny__env_int(NULL, name, 4, 1024, 128, &v));
        ck_assert_int_eq(v, 128);
        const char *msg = teeny_last_error(NULL);
        ck_assert_msg(strstr(msg, name) && strstr(msg, "4..1024") && strstr(msg, value), "\"%s\": %s", value, msg);
    }
    unsetenv(name);
}
END_TEST

/* TEENY_DEVICE and the spec argument: a "P:D" whose numbers do not parse
 * is TEENY_ERR_ARG (4294967296:0 wrapped to platform 0), an empty
 * TEENY_DEVICE too; any other text is a name, refused with
 * TEENY_ERR_NO_DEVICE unless a device's name holds it. */
START_TEST(test_device_env_spec)
{
    static const char *const bad_index[] = {"4294967296:0", "0:4294967296", "-1:0", "0:-1", "+0:0", " 0:0",
                                            "0: 0", "0:0 ", "0:", "0:0abc", "0:1e3", "1:2:3", "99999999999999999999:0"};
    const char *saved = getenv("TEENY_DEVICE");
    char keep[256];
    int n = 0;
    teeny_device_info devs[64];
    devs[0].struct_size = sizeof devs[0];
    TH_OK(NULL, teeny_devices_list(devs, 64, &n));
    snprintf(keep, sizeof keep, "%s", saved ? saved : "");
    for (size_t i = 0; i < sizeof bad_index / sizeof bad_index[0]; i++) {
        teeny_ctx *ctx = (teeny_ctx *)0x1;
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_ctx_create(bad_index[i], &ctx));
        ck_assert_ptr_null(ctx);
        ck_assert_msg(strstr(teeny_last_error(NULL), "device spec") && strstr(teeny_last_error(NULL), bad_index[i]),
                      "%s: %s", bad_index[i], teeny_last_error(NULL));
        expect_refused("TEENY_DEVICE", bad_index[i]);
    }
    expect_refused("TEENY_DEVICE", "");
    for (size_t k = 1; k < N_MALFORMED; k++) {
        teeny_status st = ctx_with_env("TEENY_DEVICE", MALFORMED[k]);
        int named = 0;
        for (int d = 0; d < n; d++)
            named |= strstr(devs[d].device_name, MALFORMED[k]) != NULL;
        if (named)
            continue;
        ck_assert_msg(st == TEENY_ERR_NO_DEVICE, "TEENY_DEVICE=\"%s\": %s", MALFORMED[k], teeny_status_name(st));
        ck_assert_msg(strstr(teeny_last_error(NULL), "TEENY_DEVICE") && strstr(teeny_last_error(NULL), MALFORMED[k]),
                      "%s", teeny_last_error(NULL));
    }
    TH_OK(NULL, ctx_with_env("TEENY_DEVICE", saved ? keep : NULL));
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
    tcase_add_test(err, test_device_info_struct_size);
    tcase_add_test(err, test_device_log_threads);
    tcase_add_test(err, test_device_destroy_names);
    tcase_add_test(tc, test_device_spec_names);
    tcase_add_test(err, test_device_parse_int);
    tcase_add_test(err, test_device_env);
    tcase_add_test(err, test_device_env_int);
    tcase_add_test(err, test_device_env_spec);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, err);
    return s;
}
