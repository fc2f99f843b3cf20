/* nv_cp_async.c -- does NVIDIA's OpenCL take cp.async through inline PTX?
 *
 * A question for the tf32 conv GEMMs (bench/NOTES.md, session 21): they
 * stage every tile through registers (global load, tf32 rounding, local
 * store) and wait on those loads' latency with one 256-item group a unit;
 * sm_80's cp.async copies global memory to local memory without registers,
 * in groups a kernel can wait for while it multiplies the tile before.
 * OpenCL C cannot say it, and inline PTX needs a __local pointer as a
 * .shared address. This program checks, on the first GPU it finds, that
 * (uint)(size_t) of a __local pointer is one: a kernel copies its group's
 * floats into local memory by cp.async (4 bytes, and zeros where src-size
 * is 0, as a convolution's padding would want), two commit groups deep,
 * and writes them back reversed. Not part of the library or its tests.
 *
 *     cc -std=c11 -O2 bench/nv_cp_async.c -o build/nv_cp_async -lOpenCL
 *     build/nv_cp_async          # exit 0: exact; 1: wrong values; 2: no GPU
 *                                # or the program did not build (its log)
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

#define GROUP 128
#define GROUPS 64
#define VALID (GROUP * GROUPS - 37) /* the items past it copy zeros */

static const char *source =
    "#define GROUP 128\n"
    "__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))\n"
    "void copy_rev(__global const float *src, __global float *dst, int valid)\n"
    "{\n"
    "    __local float buf[2][GROUP];\n"
    "    const int i = get_local_id(0), g = get_global_id(0);\n"
    "    for (int h = 0; h < 2; h++) { /* two commit groups: the halves' values, the second scaled below */\n"
    "        const uint dst_s = (uint)(size_t)&buf[h][i];\n"
    "        const int ok = g < valid;\n"
    "        asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\"\n"
    "                     :: \"r\"(dst_s), \"l\"(src + (ok ? g : 0)), \"r\"(ok ? 4 : 0) : \"memory\");\n"
    "        asm volatile(\"cp.async.commit_group;\" ::: \"memory\");\n"
    "    }\n"
    "    asm volatile(\"cp.async.wait_group 1;\" ::: \"memory\"); /* the first group is in */\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    const float a = buf[0][GROUP - 1 - i];\n"
    "    asm volatile(\"cp.async.wait_group 0;\" ::: \"memory\");\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    dst[g] = a + 2.0f * buf[1][GROUP - 1 - i];\n"
    "}\n";

int main(void)
{
    cl_platform_id plats[8];
    cl_uint np = 0;
    cl_device_id dev = NULL;
    if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS)
        np = 0;
    for (cl_uint p = 0; p < np && !dev; p++)
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_GPU, 1, &dev, NULL) != CL_SUCCESS)
            dev = NULL;
    if (!dev) {
        fprintf(stderr, "nv_cp_async: no OpenCL GPU\n");
        return 2;
    }
    char name[256] = "";
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &source, NULL, &err);
    if (clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
        static char log[1 << 16];
        clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        fprintf(stderr, "nv_cp_async: %s: the program did not build:\n%s\n", name, log);
        return 2;
    }
    cl_kernel k = clCreateKernel(prog, "copy_rev", &err);
    const size_t n = (size_t)GROUP * GROUPS;
    float *h = malloc(n * sizeof *h), *out = malloc(n * sizeof *out);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)i + 0.25f;
    cl_mem src = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof *h, h, &err);
    cl_mem dst = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, n * sizeof *out, NULL, &err);
    const cl_int valid = VALID;
    clSetKernelArg(k, 0, sizeof src, &src);
    clSetKernelArg(k, 1, sizeof dst, &dst);
    clSetKernelArg(k, 2, sizeof valid, &valid);
    size_t global = n, local = GROUP;
    err = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(q, dst, CL_TRUE, 0, n * sizeof *out, out, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "nv_cp_async: %s: run failed (%d)\n", name, err);
        return 2;
    }
    size_t bad = 0;
    for (size_t g = 0; g < n; g++) {
        size_t j = g - g % GROUP + (GROUP - 1 - g % GROUP);
        float want = j < VALID ? 3.0f * h[j] : 0.0f;
        if (out[g] != want && bad++ < 5)
            fprintf(stderr, "nv_cp_async: item %zu: %g, want %g\n", g, out[g], want);
    }
    printf("nv_cp_async: %s: %s (%zu of %zu wrong)\n", name, bad ? "WRONG" : "exact", bad, n);
    free(h);
    free(out);
    clReleaseMemObject(src);
    clReleaseMemObject(dst);
    clReleaseKernel(k);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return bad ? 1 : 0;
}
