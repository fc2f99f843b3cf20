/*
 * launch.c -- the launch layer ops call: kernel arguments (one helper, an
 * array of teeny__karg; teeny__set_args is its varargs spelling for the
 * families that still use it), teeny__launch over a 1-3 D grid, the
 * recordable teeny__fill, teeny__run_kernel (get, set, launch in one),
 * and the simulator's kernel-store fill/upload path (ctx->kernel_stores,
 * see simulator.c), kept in one marked section at the end.
 *
 * Dependencies run down only: launch.c calls build.c (kernels and their
 * limits), record.c (while a graph records, launches go there instead of
 * the queue) and profile.c (the enqueue primitives); none of them calls
 * back up into this file.
 */
#include <stdarg.h>
#include <string.h>

#include "internal.h"

/* ---- kernel arguments ---- */

static teeny_status set_one(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, cl_uint i, size_t size,
                            const void *ptr)
{
    cl_int err = TEENY_CL(clSetKernelArg, k, i, size, ptr);
    if (err != CL_SUCCESS)
        return teeny__error(ctx, TEENY_ERR_OPENCL, "clSetKernelArg failed: %s (%d), kernel %s argument %u",
                            teeny__cl_error_name(err), (int)err, kernel_name, (unsigned)i);
    return TEENY_OK;
}

teeny_status teeny__set_arg_list(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, const teeny__karg *a, int n)
{
    for (int i = 0; i < n; i++) {
        teeny_status st = set_one(ctx, k, kernel_name, (cl_uint)i, a[i].size, a[i].ptr);
        if (st != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}

teeny_status teeny__set_args(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, ...)
{
    teeny_status st = TEENY_OK;
    va_list ap;
    va_start(ap, kernel_name);
    for (cl_uint i = 0;; i++) {
        size_t size = va_arg(ap, size_t);
        if (!size)
            break;
        const void *ptr = va_arg(ap, const void *);
        if ((st = set_one(ctx, k, kernel_name, i, size, ptr)) != TEENY_OK)
            break;
    }
    va_end(ap);
    return st;
}

/* ---- launches ---- */

teeny_status teeny__launch(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, int dims,
                           const size_t *global, const size_t *local)
{
    size_t g[3];
    for (int i = 0; i < dims; i++) {
        size_t l = local ? local[i] : 1;
        g[i] = (global[i] + l - 1) / l * l;
        if (g[i] == 0)
            return TEENY_OK; /* nothing to do */
    }
    if (ctx->prog.rec)
        return teeny__record_launch(ctx, k, kernel_name, dims, g, local);
    return teeny__enqueue_kernel(ctx, k, kernel_name, NULL, (cl_uint)dims, g, local);
}

teeny_status teeny__launch_1d(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, size_t items)
{
    size_t local = teeny__local_clamp(ctx, k, kernel_name, (size_t)ctx->work_group_size);
    return teeny__launch(ctx, k, kernel_name, 1, &items, &local);
}

size_t teeny__cpu_local(const teeny_ctx *ctx, size_t items)
{
    size_t groups = 4 * (size_t)(ctx->info.compute_units > 0 ? ctx->info.compute_units : 1), l = 64;
    while (l > 1 && items / l < groups)
        l /= 2;
    return l;
}

int teeny__cpu_rows_per(const teeny_ctx *ctx, int64_t rows, int64_t planes, int64_t rows_max)
{
    int64_t want = 16 * (int64_t)(ctx->info.compute_units > 0 ? ctx->info.compute_units : 1);
    int64_t per = planes >= want ? rows : (rows * planes + want - 1) / want;
    if (per > rows_max)
        per = rows_max;
    return (int)(per < 1 ? 1 : per > rows ? rows : per);
}

teeny_status teeny__run_kernel(teeny_ctx *ctx, const char *family, const char *options, const char *kernel_name,
                               const teeny__karg *a, int n, int dims, const size_t *global, const size_t *local)
{
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, family, options, kernel_name, &k);
    if (st == TEENY_OK)
        st = teeny__set_arg_list(ctx, k, kernel_name, a, n);
    if (st == TEENY_OK)
        st = teeny__launch(ctx, k, kernel_name, dims, global, local);
    return st;
}

static teeny_status sim_fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value);

teeny_status teeny__fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value)
{
    if (!n)
        return TEENY_OK;
    if (ctx->kernel_stores) /* simulator workaround (simulator.c) */
        return sim_fill(ctx, buf, off, n, value);
    if (ctx->prog.rec)
        return teeny__record_fill(ctx, buf, off, n, value);
    return teeny__enqueue_fill(ctx, buf, off, n, value);
}

/* ---- simulator path: ctx->kernel_stores (see simulator.c) ---- */

/* The ctx->kernel_stores paths: ew_fill / ew_copy over n words (n and off
 * are within int32 range: tensors are checked at creation). Under a
 * recorder the kernel is the node's own and teeny__launch records it. */
/* ew_fill / ew_copy over n words. */
static teeny_status sim_launch(teeny_ctx *ctx, const char *name, const teeny__karg *a, int n_args, size_t n)
{
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "elementwise", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_arg_list(ctx, k, name, a, n_args);
    return st == TEENY_OK ? teeny__launch_1d(ctx, k, name, n) : st;
}

static teeny_status sim_fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value)
{
    int y_off = (int)off, count = (int)n;
    cl_uint bits;
    memcpy(&bits, &value, sizeof bits);
    const teeny__karg a[] = {TEENY__KARG(buf), TEENY__KARG(y_off), TEENY__KARG(bits), TEENY__KARG(count)};
    return sim_launch(ctx, "ew_fill", a, 4, n);
}

teeny_status teeny__sim_upload(teeny_ctx *ctx, cl_mem src, cl_mem dst, size_t off, size_t n)
{
    int y_off = (int)off, count = (int)n;
    const teeny__karg a[] = {TEENY__KARG(src), TEENY__KARG(dst), TEENY__KARG(y_off), TEENY__KARG(count)};
    return sim_launch(ctx, "ew_copy", a, 4, n);
}

