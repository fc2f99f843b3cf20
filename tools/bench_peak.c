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
 *   FMA rate        kernels of K independent chains x = op(x, a, b) per
 *                   work-item on floatW vectors, 2 flops per lane per
 *                   op; the best variant is the ceiling:
 *                     op  fma() (when CL_DEVICE_SINGLE_FP_CONFIG has
 *                         CL_FP_FMA) and mad() -- PoCL 3.1 compiles mad()
 *                         as a multiply and an add, half the rate of its
 *                         AVX-512 fma on cores whose multiplies and adds
 *                         share the FMA ports; a device without hardware
 *                         fma emulates fma();
 *                     K   8, 12, 16 chains: latency x throughput of the
 *                         FMA pipes (2 pipes x 4-6 cycles on current
 *                         CPUs) needs 8-12 in flight per core; 16 covers
 *                         more where registers allow (32 zmm), 12 fits
 *                         16 ymm registers with a and b;
 *                     W   the device's native and preferred float vector
 *                         widths (CL_DEVICE_NATIVE/PREFERRED_VECTOR_WIDTH
 *                         _FLOAT: 16 on AVX-512, 8 on AVX2, 1 on GPUs) and
 *                         16.
 *                   Global size from CL_DEVICE_MAX_COMPUTE_UNITS: on a
 *                   GPU 8 work-groups of 256 per compute unit (2,048
 *                   work-items, a full SM or CU), on a CPU 8 work-groups
 *                   of 16 per compute unit (PoCL runs one work-group per
 *                   core at a time: every core gets the same 8). The
 *                   loop count is calibrated so one launch takes about
 *                   20 ms; the rate is the best of the runs (a ceiling:
 *                   anything slower is interference).
 *
 * Both are timed with profiling events: a warm-up launch, then max(5,
 * reps) launches (at most 30): the copy's median, the FMA kernels' best.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const char copy_src[] =
    "__kernel void copy_f4(__global const float4 *src, __global float4 *dst)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    dst[i] = src[i];\n"
    "}\n";

#define FMA_OPS 2
#define FMA_CHAIN_KINDS 3
static const char *const fma_ops[FMA_OPS] = {"fma", "mad"};
static const int fma_chains[FMA_CHAIN_KINDS] = {8, 12, 16};

/* The FMA kernels for FT (-D): fma_<op>_<K> for each op and chain count,
 * K chains of x = op(x, a, b); a, b keep x bounded (it converges to
 * b / (1 - a)) and the compiler cannot fold the loop; the sum is stored
 * so nothing is dead. Written out chain by chain, so that no compiler has
 * to unroll anything for the chains to be independent registers. */
static int fma_source(char *buf, size_t cap)
{
    size_t n = 0;
#define EMIT(...) \
    do { int w_ = snprintf(buf + n, cap - n, __VA_ARGS__); if (w_ < 0 || (size_t)w_ >= cap - n) return 0; n += (size_t)w_; } while (0)
    for (int o = 0; o < FMA_OPS; o++)
        for (int k = 0; k < FMA_CHAIN_KINDS; k++) {
            int K = fma_chains[k];
            EMIT("__kernel void fma_%s_%d(__global FT *out, float a, float b, int iters)\n{\n", fma_ops[o], K);
            EMIT("    size_t gid = get_global_id(0);\n    FT va = (FT)a, vb = (FT)b;\n");
            EMIT("    FT x0 = (FT)((float)(gid & 15) * 1e-3f);\n");
            for (int c = 1; c < K; c++)
                EMIT("    FT x%d = x0 + %d.0f / %d.0f;\n", c, c, K);
            EMIT("    for (int i = 0; i < iters; i++) {\n");
            for (int c = 0; c < K; c++)
                EMIT("        x%d = %s(x%d, va, vb);\n", c, fma_ops[o], c);
            EMIT("    }\n    FT s = x0;\n");
            for (int c = 1; c < K; c++)
                EMIT("    s += x%d;\n", c);
            EMIT("    out[gid] = s;\n}\n\n");
        }
#undef EMIT
    return 1;
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

/* Warm-up, then n launches: their median (best 0) or their best (best 1)
 * time; < 0 on failure. */
static double timed_ms(cl_command_queue q, cl_kernel k, size_t global, size_t local, cl_mem src, cl_mem dst,
                       size_t bytes, int n, int best)
{
    double t[30];
    if (launch_ms(q, k, global, local, src, dst, bytes) < 0)
        return -1.0;
    for (int i = 0; i < n; i++)
        if ((t[i] = launch_ms(q, k, global, local, src, dst, bytes)) < 0)
            return -1.0;
    bench_sort(t, n);
    return best ? t[0] : t[n / 2];
}

static cl_program build(cl_context c, cl_device_id d, const char *src, const char *options)
{
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
    double ms = timed_ms(q, NULL, 0, 0, a, b, bytes, n, 0);
    if (ms <= 0) {
        cl_fail("clEnqueueCopyBuffer", -1);
        goto cleanup;
    }
    out->copy_enqueue_gbps = 2.0 * (double)bytes / ms * 1e-6;

    if (!(p = build(c, d, copy_src, "")))
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
    if ((ms = timed_ms(q, k, global, local, NULL, NULL, 0, n, 0)) <= 0) {
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

/* One FMA kernel: calibrated to about 20 ms a launch, then the best of n
 * launches; GFLOP/s, or < 0 on failure. */
static double measure_fma_kernel(cl_program p, const char *name, cl_device_id d, cl_command_queue q, cl_mem out,
                                 int vec, int chains, int n, size_t global, size_t local)
{
    cl_int err;
    double result = -1.0;
    cl_kernel k = clCreateKernel(p, name, &err);
    if (err != CL_SUCCESS) {
        cl_fail(name, err);
        return -1.0;
    }
    size_t kwg = 0;
    clGetKernelWorkGroupInfo(k, d, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
    while (local > 1 && local > kwg) /* keep the work-item count: more, smaller groups */
        local /= 2;
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
            cl_fail(name, -1);
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
    double ms = timed_ms(q, k, global, local, NULL, NULL, 0, n, 1);
    if (ms > 0)
        result = (double)global * iters * chains * vec * 2.0 / ms * 1e-6;
cleanup:
    clReleaseKernel(k);
    return result;
}

/* Every FMA kernel of one vector width; the best into out (a kernel that
 * fails to build or run says so on stderr and counts for nothing). */
static void measure_fma_width(cl_context c, cl_device_id d, cl_command_queue q, int vec, int have_fma, int n,
                             bench_peaks *out)
{
    static char src[32768];
    char options[32], name[32];
    cl_int err;
    if (!fma_source(src, sizeof src)) {
        cl_fail("the FMA kernels' source", -1);
        return;
    }
    snprintf(options, sizeof options, vec > 1 ? "-D FT=float%d" : "-D FT=float", vec);
    cl_program p = build(c, d, src, options);
    if (!p)
        return;
    cl_mem buf = clCreateBuffer(c, CL_MEM_WRITE_ONLY, out->fma_global * (size_t)vec * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        clReleaseProgram(p);
        cl_fail("clCreateBuffer for the FMA kernels", err);
        return;
    }
    for (int o = 0; o < FMA_OPS; o++)
        for (int k = 0; k < FMA_CHAIN_KINDS && (o || have_fma); k++) {
            snprintf(name, sizeof name, "fma_%s_%d", fma_ops[o], fma_chains[k]);
            double g = measure_fma_kernel(p, name, d, q, buf, vec, fma_chains[k], n, out->fma_global, out->fma_local);
            out->fma_variants += g > 0;
            if (g > out->fma_gflops) {
                out->fma_gflops = g;
                out->fma_vec = vec;
                out->fma_chains = fma_chains[k];
                out->fma_op = fma_ops[o];
            }
        }
    clReleaseMemObject(buf);
    clReleaseProgram(p);
}

int bench_measure_peaks(teeny_ctx *ctx, const bench_opts *o, bench_peaks *out)
{
    memset(out, 0, sizeof *out);
    cl_command_queue q = teeny_ctx_cl_queue(ctx);
    cl_context c = NULL;
    cl_device_id d = NULL;
    cl_uint units = 1, native = 0, preferred = 0;
    cl_device_type type = 0;
    cl_device_fp_config fp = 0;
    cl_int err;
    if ((err = clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof c, &c, NULL)) != CL_SUCCESS ||
        (err = clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof d, &d, NULL)) != CL_SUCCESS)
        return cl_fail("clGetCommandQueueInfo", err);
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    clGetDeviceInfo(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof native, &native, NULL);
    clGetDeviceInfo(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof preferred, &preferred, NULL);
    clGetDeviceInfo(d, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
    if (teeny_ctx_finish(ctx) != TEENY_OK)
        return 1;
    int n = o->reps < 5 ? 5 : o->reps > 30 ? 30 : o->reps;
    if (measure_copy(c, d, q, n, out))
        return 1;
    int cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
    out->fma_local = cpu ? 16 : 256;
    out->fma_global = (size_t)(units ? units : 1) * 8 * out->fma_local;
    out->fma_runs = n;
    /* the widths the device names, and 16 (OpenCL's widest), each once;
     * a width must be an OpenCL vector size */
    int widths[3] = {0, 0, 16}, n_widths = 0;
    const cl_uint named[2] = {native, preferred};
    for (int i = 0; i < 2; i++)
        if (named[i] == 1 || named[i] == 2 || named[i] == 4 || named[i] == 8 || named[i] == 16)
            widths[n_widths++] = (int)named[i];
    widths[n_widths++] = 16;
    for (int i = 0; i < n_widths; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= widths[j] == widths[i];
        if (!seen)
            measure_fma_width(c, d, q, widths[i], (fp & CL_FP_FMA) != 0, n, out);
    }
    if (out->fma_gflops <= 0) {
        fprintf(stderr, "teeny-bench: the FMA-rate kernels did not run\n");
        return 1;
    }
    return 0;
}
