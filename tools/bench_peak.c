/*
 * bench_peak.c -- the device's own ceilings, measured once per run on the
 * context's queue so that every case can be set against them:
 *
 *   copy bandwidth  a buffer of min(256 MiB, max alloc / 2, global memory
 *                   / 8) copied by clEnqueueCopyBuffer and by a float4
 *                   copy kernel (one float4 per work-item); GB/s counts
 *                   the bytes read plus the bytes written; the better of
 *                   the two is the ceiling (PoCL's clEnqueueCopyBuffer is
 *                   a single memcpy, its kernels run on every core).
 *   FMA rate        a kernel of 8 independent mad() chains per work-item
 *                   on float8 and on float16 vectors (explicit vectors, so
 *                   that PoCL and other CPU compilers emit SIMD code;
 *                   independent chains, so that latency is hidden),
 *                   2 flops per lane per mad; the better width is the
 *                   ceiling. Global size from CL_DEVICE_MAX_COMPUTE_UNITS:
 *                   on a GPU 8 work-groups of 256 per compute unit (2,048
 *                   work-items, a full SM or CU), on a CPU 4 work-groups
 *                   of 16 per compute unit (PoCL runs one work-group per
 *                   core at a time). The loop count is calibrated so one
 *                   launch takes about 20 ms.
 *
 * Both are timed with profiling events: a warm-up launch, then the
 * median of max(5, reps) launches (at most 30).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const char peak_src[] =
    "__kernel void copy_f4(__global const float4 *src, __global float4 *dst)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    dst[i] = src[i];\n"
    "}\n"
    "\n"
    "/* FT: float8 or float16 (-D). 8 chains of x = x * a + b; a, b keep x\n"
    " * bounded (it converges to b / (1 - a)) and the compiler cannot fold\n"
    " * the loop; the sum is stored so nothing is dead. */\n"
    "__kernel void fma_chain(__global FT *out, float a, float b, int iters)\n"
    "{\n"
    "    size_t gid = get_global_id(0);\n"
    "    FT x0 = (FT)((float)(gid & 15) * 1e-3f);\n"
    "    FT x1 = x0 + 0.125f, x2 = x0 + 0.25f, x3 = x0 + 0.375f;\n"
    "    FT x4 = x0 + 0.5f, x5 = x0 + 0.625f, x6 = x0 + 0.75f, x7 = x0 + 0.875f;\n"
    "    for (int i = 0; i < iters; i++) {\n"
    "        x0 = mad(x0, a, b); x1 = mad(x1, a, b); x2 = mad(x2, a, b); x3 = mad(x3, a, b);\n"
    "        x4 = mad(x4, a, b); x5 = mad(x5, a, b); x6 = mad(x6, a, b); x7 = mad(x7, a, b);\n"
    "    }\n"
    "    out[gid] = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));\n"
    "}\n";

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cl_fail(const char *what, cl_int err)
{
    fprintf(stderr, "teeny-bench: peak measurement: %s failed (%d)\n", what, (int)err);
    return 1;
}

static double event_ms(cl_event ev)
{
    cl_ulong s = 0, e = 0;
    if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof s, &s, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof e, &e, NULL) != CL_SUCCESS)
        return -1.0;
    return (double)(e - s) * 1e-6;
}

/* One launch of k (or, k NULL, one copy from src to dst); its device time
 * in ms, < 0 on failure. */
static double launch_ms(cl_command_queue q, cl_kernel k, size_t global, size_t local, cl_mem src, cl_mem dst,
                        size_t bytes)
{
    cl_event ev = NULL;
    cl_int err;
    if (k)
        err = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, local ? &local : NULL, 0, NULL, &ev);
    else
        err = clEnqueueCopyBuffer(q, src, dst, 0, 0, bytes, 0, NULL, &ev);
    if (err != CL_SUCCESS)
        return -1.0;
    double ms = clWaitForEvents(1, &ev) == CL_SUCCESS ? event_ms(ev) : -1.0;
    clReleaseEvent(ev);
    return ms;
}

/* Warm-up, then the median of n launches; < 0 on failure. */
static double median_ms(cl_command_queue q, cl_kernel k, size_t global, size_t local, cl_mem src, cl_mem dst,
                        size_t bytes, int n)
{
    double t[30];
    if (launch_ms(q, k, global, local, src, dst, bytes) < 0)
        return -1.0;
    for (int i = 0; i < n; i++)
        if ((t[i] = launch_ms(q, k, global, local, src, dst, bytes)) < 0)
            return -1.0;
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

static cl_program build(cl_context c, cl_device_id d, const char *options)
{
    const char *src = peak_src;
    cl_int err;
    cl_program p = clCreateProgramWithSource(c, 1, &src, NULL, &err);
    if (err != CL_SUCCESS)
        return NULL;
    if (clBuildProgram(p, 1, &d, options, NULL, NULL) != CL_SUCCESS) {
        char log[4096] = "";
        clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        fprintf(stderr, "teeny-bench: peak kernels (%s) failed to build:\n%s\n", options, log);
        clReleaseProgram(p);
        return NULL;
    }
    return p;
}

static int measure_copy(cl_context c, cl_device_id d, cl_command_queue q, int n, bench_peaks *out)
{
    cl_ulong max_alloc = 0, global_mem = 0;
    cl_int err;
    int failed = 1;
    cl_mem a = NULL, b = NULL;
    cl_program p = NULL;
    cl_kernel k = NULL;
    clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global_mem, &global_mem, NULL);
    size_t bytes = (size_t)256 << 20;
    while (bytes > ((size_t)1 << 20) && (bytes > max_alloc / 2 || bytes > global_mem / 8))
        bytes /= 2;
    out->copy_bytes = bytes;
    a = clCreateBuffer(c, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err == CL_SUCCESS)
        b = clCreateBuffer(c, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        cl_fail("clCreateBuffer for the copy", err);
        goto cleanup;
    }
    float zero = 0.5f;
    if ((err = clEnqueueFillBuffer(q, a, &zero, sizeof zero, 0, bytes, 0, NULL, NULL)) != CL_SUCCESS) {
        cl_fail("clEnqueueFillBuffer", err);
        goto cleanup;
    }
    double ms = median_ms(q, NULL, 0, 0, a, b, bytes, n);
    if (ms <= 0) {
        cl_fail("clEnqueueCopyBuffer", -1);
        goto cleanup;
    }
    out->copy_enqueue_gbps = 2.0 * (double)bytes / ms * 1e-6;

    if (!(p = build(c, d, "-D FT=float8")))
        goto cleanup;
    k = clCreateKernel(p, "copy_f4", &err);
    if (err != CL_SUCCESS || clSetKernelArg(k, 0, sizeof a, &a) != CL_SUCCESS ||
        clSetKernelArg(k, 1, sizeof b, &b) != CL_SUCCESS) {
        cl_fail("copy_f4 kernel", err);
        goto cleanup;
    }
    size_t kwg = 0, global = bytes / 16, local = 256;
    clGetKernelWorkGroupInfo(k, d, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
    while (local > kwg)
        local /= 2;
    if ((ms = median_ms(q, k, global, local, NULL, NULL, 0, n)) <= 0) {
        cl_fail("the copy kernel", -1);
        goto cleanup;
    }
    out->copy_kernel_gbps = 2.0 * (double)bytes / ms * 1e-6;
    out->copy_gbps = out->copy_kernel_gbps > out->copy_enqueue_gbps ? out->copy_kernel_gbps : out->copy_enqueue_gbps;
    failed = 0;
cleanup:
    if (k)
        clReleaseKernel(k);
    if (p)
        clReleaseProgram(p);
    if (a)
        clReleaseMemObject(a);
    if (b)
        clReleaseMemObject(b);
    return failed;
}

/* One vector width: GFLOP/s, or < 0 on failure. */
static double measure_fma_vec(cl_context c, cl_device_id d, cl_command_queue q, int vec, int n, size_t global,
                              size_t local)
{
    char options[32];
    snprintf(options, sizeof options, "-D FT=float%d", vec);
    double result = -1.0;
    cl_int err;
    cl_mem out = NULL;
    cl_kernel k = NULL;
    cl_program p = build(c, d, options);
    if (!p)
        return -1.0;
    out = clCreateBuffer(c, CL_MEM_WRITE_ONLY, global * (size_t)vec * sizeof(float), NULL, &err);
    if (err == CL_SUCCESS)
        k = clCreateKernel(p, "fma_chain", &err);
    if (err != CL_SUCCESS) {
        cl_fail("fma_chain setup", err);
        goto cleanup;
    }
    size_t kwg = 0;
    clGetKernelWorkGroupInfo(k, d, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
    while (local > kwg) { /* keep the work-item count: more, smaller groups */
        local /= 2;
    }
    float a = 0.999f, b = 1e-3f;
    cl_int iters = 64;
    clSetKernelArg(k, 0, sizeof out, &out);
    clSetKernelArg(k, 1, sizeof a, &a);
    clSetKernelArg(k, 2, sizeof b, &b);
    /* calibrate: grow the loop until one launch takes about 20 ms */
    for (;;) {
        clSetKernelArg(k, 3, sizeof iters, &iters);
        double ms = launch_ms(q, k, global, local, NULL, NULL, 0);
        if (ms < 0) {
            cl_fail("fma_chain launch", -1);
            goto cleanup;
        }
        if (ms >= 5.0 || iters >= (1 << 24)) {
            double want = (double)iters * 20.0 / (ms > 1e-3 ? ms : 1e-3);
            iters = (cl_int)(want < 64 ? 64 : want > (1 << 26) ? (1 << 26) : want);
            break;
        }
        iters *= 4;
    }
    clSetKernelArg(k, 3, sizeof iters, &iters);
    double ms = median_ms(q, k, global, local, NULL, NULL, 0, n);
    if (ms > 0)
        result = (double)global * iters * 8.0 * vec * 2.0 / ms * 1e-6;
cleanup:
    if (k)
        clReleaseKernel(k);
    if (out)
        clReleaseMemObject(out);
    clReleaseProgram(p);
    return result;
}

int bench_measure_peaks(teeny_ctx *ctx, const bench_opts *o, bench_peaks *out)
{
    memset(out, 0, sizeof *out);
    cl_command_queue q = teeny_ctx_cl_queue(ctx);
    cl_context c = NULL;
    cl_device_id d = NULL;
    cl_uint units = 1;
    cl_device_type type = 0;
    cl_int err;
    if ((err = clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof c, &c, NULL)) != CL_SUCCESS ||
        (err = clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof d, &d, NULL)) != CL_SUCCESS)
        return cl_fail("clGetCommandQueueInfo", err);
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (teeny_ctx_finish(ctx) != TEENY_OK)
        return 1;
    int n = o->reps < 5 ? 5 : o->reps > 30 ? 30 : o->reps;
    if (measure_copy(c, d, q, n, out))
        return 1;
    int cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
    out->fma_local = cpu ? 16 : 256;
    out->fma_global = (size_t)(units ? units : 1) * (cpu ? 4 : 8) * out->fma_local;
    static const int widths[2] = {8, 16};
    for (int i = 0; i < 2; i++) {
        double g = measure_fma_vec(c, d, q, widths[i], n, out->fma_global, out->fma_local);
        if (g > out->fma_gflops) {
            out->fma_gflops = g;
            out->fma_vec = widths[i];
        }
    }
    if (out->fma_gflops <= 0) {
        fprintf(stderr, "teeny-bench: the FMA-rate kernel did not run\n");
        return 1;
    }
    return 0;
}
