/*
 * tensor.c -- fp32/int32 tensors of rank 1..5 in device buffers: creation
 * with size checks, views, upload/download, fill, the per-context scratch
 * buffer, and the argument checks every op shares.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

void teeny__ctx_unref(teeny_ctx *ctx);

static const char *dtype_name(teeny__dtype dt)
{
    return dt == TEENY__F32 ? "fp32" : "int32";
}

const char *teeny__shape_str(const teeny_tensor *t, char *buf, size_t cap)
{
    if (!t) {
        buf[0] = '\0';
        return buf;
    }
    return teeny__dims_str(t->shape, t->ndim, buf, cap);
}

/* Validate rank and sizes; on success *numel is the element count. */
static teeny_status check_shape(teeny_ctx *ctx, const char *fn, int ndim, const int64_t *shape, int64_t *numel)
{
    int64_t n = 1;
    if (ndim < 1 || ndim > TEENY_MAX_DIMS)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: rank %d is outside 1..%d", fn, ndim, TEENY_MAX_DIMS);
    if (!shape)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: shape is NULL", fn);
    for (int i = 0; i < ndim; i++) /* a size < 1 is ARG wherever it is, before any product */
        if (shape[i] < 1)
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: dimension %d is %lld; sizes must be >= 1", fn, i,
                                (long long)shape[i]);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] > INT32_MAX || n > INT32_MAX / shape[i])
            return teeny__error(ctx, TEENY_ERR_RANGE,
                                "%s: %d-d shape with dimension %d = %lld has more than 2^31-1 elements "
                                "(kernels index with int32)", fn, ndim, i, (long long)shape[i]);
        n *= shape[i];
    }
    *numel = n;
    return TEENY_OK;
}

/* A tensor without storage into *made, for the caller to give storage and
 * then hand out through out (which fn's failures leave NULL). */
static teeny_status tensor_new(teeny_ctx *ctx, const char *fn, int ndim, const int64_t *shape,
                               teeny__dtype dtype, teeny_tensor **out, teeny_tensor **made)
{
    teeny_tensor *t;
    int64_t numel = 0;
    teeny_status st;
    if (!out)
        return teeny__error(teeny__ctx_check(ctx) ? ctx : NULL, TEENY_ERR_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: ctx is NULL or destroyed", fn);
    teeny__clear_error(ctx);
    st = check_shape(ctx, fn, ndim, shape, &numel);
    if (st != TEENY_OK)
        return st;
    if ((uint64_t)numel * 4 > ctx->info.max_alloc_bytes)
        return teeny__error(ctx, TEENY_ERR_RANGE, "%s: %lld bytes exceed the device's max allocation of %llu (%s)",
                            fn, (long long)numel * 4, (unsigned long long)ctx->info.max_alloc_bytes,
                            ctx->info.device_name);
    t = teeny__calloc(1, sizeof *t);
    if (!t)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    t->ctx = ctx;
    t->refs = 1;
    t->handle_alive = 1;
    t->dtype = dtype;
    t->ndim = ndim;
    t->numel = numel;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    *made = t;
    return TEENY_OK;
}

static teeny_status tensor_create(teeny_ctx *ctx, const char *fn, int ndim, const int64_t *shape,
                                  teeny__dtype dtype, teeny_tensor **out)
{
    teeny_tensor *t;
    cl_int err;
    teeny_status st = tensor_new(ctx, fn, ndim, shape, dtype, out, &t);
    if (st != TEENY_OK)
        return st;
    t->buf = TEENY_CLO(clCreateBuffer, &err, ctx->context, CL_MEM_READ_WRITE, (size_t)t->numel * 4, NULL);
    if (!t->buf) {
        long long bytes = (long long)t->numel * 4;
        teeny__free(t);
        return teeny__error(ctx, TEENY_ERR_OPENCL, "%s: clCreateBuffer of %lld bytes failed: %s (%d) on %s", fn,
                            bytes, teeny__cl_error_name(err), (int)err, ctx->info.device_name);
    }
    if (ctx->kernel_stores && /* simulator workaround (simulator.c) */
        (st = teeny__sim_buffer_born(ctx, t->buf, (size_t)t->numel * 4)) != TEENY_OK) {
        TEENY_CL_RELEASE(clReleaseMemObject, t->buf);
        teeny__free(t);
        return st;
    }
    ctx->refs++;
    *out = t;
    return TEENY_OK;
}

teeny_status teeny_tensor_create(teeny_ctx *ctx, int ndim, const int64_t *shape, teeny_tensor **out)
{
    return tensor_create(ctx, "teeny_tensor_create", ndim, shape, TEENY__F32, out);
}

teeny_status teeny_tensor_create_i32(teeny_ctx *ctx, int ndim, const int64_t *shape, teeny_tensor **out)
{
    return tensor_create(ctx, "teeny_tensor_create_i32", ndim, shape, TEENY__I32, out);
}

teeny_status teeny_tensor_wrap_cl(teeny_ctx *ctx, cl_mem buf, size_t offset_bytes, int ndim, const int64_t *shape,
                                  teeny_tensor **out)
{
    static const char fn[] = "teeny_tensor_wrap_cl";
    teeny_tensor *t;
    size_t size = 0;
    cl_context owner = NULL;
    cl_int err;
    teeny_status st = tensor_new(ctx, fn, ndim, shape, TEENY__F32, out, &t);
    if (st != TEENY_OK)
        return st;
    if (!buf) {
        st = teeny__error(ctx, TEENY_ERR_ARG, "%s: buf is NULL", fn);
        goto fail;
    }
    if (offset_bytes % 4) {
        st = teeny__error(ctx, TEENY_ERR_ARG, "%s: offset_bytes %zu is not a multiple of 4", fn, offset_bytes);
        goto fail;
    }
    err = TEENY_CL(clGetMemObjectInfo, buf, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err == CL_SUCCESS)
        err = TEENY_CL(clGetMemObjectInfo, buf, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (err != CL_SUCCESS) {
        st = teeny__cl_error(ctx, err, "clGetMemObjectInfo");
        goto fail;
    }
    if (owner != ctx->context) {
        st = teeny__error(ctx, TEENY_ERR_ARG, "%s: buf belongs to another cl_context", fn);
        goto fail;
    }
    if (offset_bytes > size || (size - offset_bytes) / 4 < (size_t)t->numel) {
        st = teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %lld elements at byte offset %zu do not fit a %zu-byte buffer",
                          fn, (long long)t->numel, offset_bytes, size);
        goto fail;
    }
    if (offset_bytes / 4 > INT32_MAX - (size_t)t->numel) {
        st = teeny__error(ctx, TEENY_ERR_RANGE, "%s: offset beyond int32 indexing", fn);
        goto fail;
    }
    err = TEENY_CL(clRetainMemObject, buf);
    if (err != CL_SUCCESS) {
        st = teeny__cl_error(ctx, err, "clRetainMemObject");
        goto fail;
    }
    t->buf = buf;
    t->offset = offset_bytes / 4;
    ctx->refs++;
    *out = t;
    return TEENY_OK;
fail:
    teeny__free(t);
    return st;
}

teeny_status teeny_tensor_view(teeny_tensor *base, int64_t offset, int ndim, const int64_t *shape, teeny_tensor **out)
{
    static const char fn[] = "teeny_tensor_view";
    teeny_tensor *t;
    teeny_status st;
    if (out)
        *out = NULL;
    if (!base)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: base is NULL", fn);
    st = tensor_new(base->ctx, fn, ndim, shape, base->dtype, out, &t);
    if (st != TEENY_OK)
        return st;
    if (offset < 0 || offset > base->numel || t->numel > base->numel - offset) {
        char b[96];
        int64_t numel = t->numel;
        teeny__free(t);
        return teeny__error(base->ctx, TEENY_ERR_SHAPE,
                            "%s: %lld elements at offset %lld do not fit in base of shape %s (%lld elements)", fn,
                            (long long)numel, (long long)offset, teeny__shape_str(base, b, sizeof b),
                            (long long)base->numel);
    }
    /* Views always point at the root tensor that owns the buffer. */
    teeny_tensor *root = base->base ? base->base : base;
    t->base = root;
    t->buf = root->buf;
    t->offset = base->offset + (size_t)offset;
    root->refs++;
    base->ctx->refs++;
    *out = t;
    return TEENY_OK;
}

static void tensor_unref(teeny_tensor *t)
{
    if (--t->refs > 0)
        return;
    teeny_ctx *ctx = t->ctx;
    if (t->base)
        tensor_unref(t->base);
    else
        TEENY_CL_RELEASE(clReleaseMemObject, t->buf);
    teeny__free(t);
    teeny__ctx_unref(ctx);
}

void teeny_tensor_destroy(teeny_tensor *t)
{
    if (!t || !t->handle_alive)
        return;
    t->handle_alive = 0;
    tensor_unref(t);
}

void teeny__tensor_hold(teeny_tensor *t)
{
    t->refs++;
}

void teeny__tensor_drop(teeny_tensor *t)
{
    tensor_unref(t);
}

static teeny_status check_io(const teeny_tensor *t, const void *ptr, size_t count, teeny__dtype dtype,
                             const char *fn)
{
    /* a destroyed tensor whose storage a view keeps alive still knows its
     * context: report there, where the caller looks */
    if (!t || !t->handle_alive)
        return teeny__error(t ? t->ctx : NULL, TEENY_ERR_ARG, "%s: tensor is %s", fn, t ? "destroyed" : "NULL");
    teeny__clear_error(t->ctx);
    if (!ptr)
        return teeny__error(t->ctx, TEENY_ERR_ARG, "%s: host pointer is NULL", fn);
    if (t->dtype != dtype)
        return teeny__error(t->ctx, TEENY_ERR_ARG, "%s: tensor is %s, call expects %s", fn, dtype_name(t->dtype),
                            dtype_name(dtype));
    if (count != (size_t)t->numel)
        return teeny__error(t->ctx, TEENY_ERR_SHAPE, "%s: count %zu != numel %lld", fn, count, (long long)t->numel);
    return TEENY_OK;
}

/* Stage src in a fresh device buffer (copied at creation, so src is free on
 * return) and enqueue a device copy: ordered after queued work, no wait. */
static teeny_status tensor_write(teeny_tensor *t, const void *src, size_t count, teeny__dtype dtype, const char *fn)
{
    teeny_status st = check_io(t, src, count, dtype, fn);
    teeny_ctx *ctx;
    cl_mem staging = NULL;
    cl_int err;
    if (st != TEENY_OK)
        return st;
    ctx = t->ctx;
    staging = TEENY_CLO(clCreateBuffer, &err, ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, count * 4,
                        (void *)src);
    if (!staging)
        return teeny__cl_error(ctx, err, "clCreateBuffer (staging)");
    if (!ctx->kernel_stores)
        TEENY_CL_TRY(clEnqueueCopyBuffer, ctx->queue, staging, t->buf, 0, t->offset * 4, count * 4, 0, NULL, NULL);
    else /* simulator workaround (simulator.c): a kernel store */
        st = teeny__sim_upload(ctx, staging, t->buf, t->offset, count);
cleanup:
    TEENY_CL_RELEASE(clReleaseMemObject, staging); /* freed once the copy completes */
    return st;
}

static teeny_status tensor_read(const teeny_tensor *t, void *dst, size_t count, teeny__dtype dtype, const char *fn)
{
    teeny_status st = check_io(t, dst, count, dtype, fn);
    teeny_ctx *ctx;
    if (st != TEENY_OK)
        return st;
    ctx = t->ctx;
    TEENY_CL_TRY(clEnqueueReadBuffer, ctx->queue, t->buf, CL_TRUE, t->offset * 4, count * 4, dst, 0, NULL, NULL);
cleanup:
    return st;
}

teeny_status teeny_tensor_write(teeny_tensor *t, const float *src, size_t count)
{
    return tensor_write(t, src, count, TEENY__F32, "teeny_tensor_write");
}

teeny_status teeny_tensor_read(const teeny_tensor *t, float *dst, size_t count)
{
    return tensor_read(t, dst, count, TEENY__F32, "teeny_tensor_read");
}

teeny_status teeny_tensor_write_i32(teeny_tensor *t, const int32_t *src, size_t count)
{
    return tensor_write(t, src, count, TEENY__I32, "teeny_tensor_write_i32");
}

teeny_status teeny_tensor_read_i32(const teeny_tensor *t, int32_t *dst, size_t count)
{
    return tensor_read(t, dst, count, TEENY__I32, "teeny_tensor_read_i32");
}

teeny_status teeny_tensor_fill(teeny_tensor *t, float value)
{
    teeny_ctx *ctx;
    teeny_status st = TEENY_OK;
    if (!t || !t->handle_alive) /* see check_io */
        return teeny__error(t ? t->ctx : NULL, TEENY_ERR_ARG, "teeny_tensor_fill: tensor is %s",
                            t ? "destroyed" : "NULL");
    ctx = t->ctx;
    teeny__clear_error(ctx);
    if (t->dtype != TEENY__F32)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_tensor_fill: tensor is int32");
    if (!ctx->kernel_stores)
        TEENY_CL_TRY(clEnqueueFillBuffer, ctx->queue, t->buf, &value, sizeof value, t->offset * 4,
                     (size_t)t->numel * 4, 0, NULL, NULL);
    else /* simulator workaround (simulator.c): a kernel store */
        st = teeny__fill(ctx, t->buf, t->offset, (size_t)t->numel, value);
cleanup:
    return st;
}

int teeny_tensor_ndim(const teeny_tensor *t)
{
    return t ? t->ndim : 0;
}

int64_t teeny_tensor_dim(const teeny_tensor *t, int axis)
{
    if (!t || axis < 0 || axis >= t->ndim)
        return -1;
    return t->shape[axis];
}

int64_t teeny_tensor_numel(const teeny_tensor *t)
{
    return t ? t->numel : 0;
}

teeny_status teeny_tensor_cl(const teeny_tensor *t, cl_mem *buf, size_t *offset_bytes)
{
    if (!t || !buf || !offset_bytes)
        return teeny__error(t ? t->ctx : NULL, TEENY_ERR_ARG, "teeny_tensor_cl: %s is NULL",
                            !t ? "t" : !buf ? "buf" : "offset_bytes");
    *buf = t->buf;
    *offset_bytes = t->offset * 4;
    return TEENY_OK;
}

/* ---- workspace ---- */

teeny_status teeny__recorder_scratch(teeny_ctx *ctx, size_t bytes, cl_mem *out);

teeny_status teeny__scratch(teeny_ctx *ctx, size_t bytes, cl_mem *out)
{
    cl_int err;
    int pick = -1;
    if (bytes == 0)
        bytes = 4;
    if (ctx->prog.rec) /* a recorded node keeps its own workspace */
        return teeny__recorder_scratch(ctx, bytes, out);
    /* the smallest free buffer that holds bytes, else the largest free one
     * (replaced by a bigger buffer below) */
    for (int i = 0; i < TEENY__WS_SLOTS; i++) {
        if (ctx->ws.slot[i].busy)
            continue;
        int fits = ctx->ws.slot[i].bytes >= bytes, pick_fits = pick >= 0 && ctx->ws.slot[pick].bytes >= bytes;
        if (pick < 0 || (fits && (!pick_fits || ctx->ws.slot[i].bytes < ctx->ws.slot[pick].bytes)) ||
            (!fits && !pick_fits && ctx->ws.slot[i].bytes > ctx->ws.slot[pick].bytes))
            pick = i;
    }
    if (pick < 0)
        return teeny__error(ctx, TEENY_ERR_STATE, "internal: one op took more than %d workspace buffers",
                            TEENY__WS_SLOTS);
    if (ctx->ws.slot[pick].bytes < bytes) {
        size_t want = bytes + bytes / 4;
        if (want > ctx->info.max_alloc_bytes)
            want = bytes;
        cl_mem m = TEENY_CLO(clCreateBuffer, &err, ctx->context, CL_MEM_READ_WRITE, want, NULL);
        if (!m)
            return teeny__error(ctx, TEENY_ERR_OPENCL, "clCreateBuffer of %zu-byte workspace failed: %s (%d) on %s",
                                want, teeny__cl_error_name(err), (int)err, ctx->info.device_name);
        teeny_status st = ctx->kernel_stores /* simulator workaround (simulator.c) */
                              ? teeny__sim_buffer_born(ctx, m, want) : TEENY_OK;
        if (st != TEENY_OK) {
            TEENY_CL_RELEASE(clReleaseMemObject, m);
            return st;
        }
        /* no op holds this slot: kernels already queued on the old buffer
         * keep it alive until they finish */
        TEENY_CL_RELEASE(clReleaseMemObject, ctx->ws.slot[pick].buf);
        ctx->ws.slot[pick].buf = m;
        ctx->ws.slot[pick].bytes = want;
    }
    ctx->ws.slot[pick].busy = 1;
    *out = ctx->ws.slot[pick].buf;
    return TEENY_OK;
}

void teeny__scratch_give(teeny_ctx *ctx, cl_mem buf)
{
    for (int i = 0; i < TEENY__WS_SLOTS; i++)
        if (ctx->ws.slot[i].buf == buf)
            ctx->ws.slot[i].busy = 0;
}

void teeny__scratch_release_all(teeny_ctx *ctx)
{
    for (int i = 0; i < TEENY__WS_SLOTS; i++)
        ctx->ws.slot[i].busy = 0;
}

/* ---- argument checks ---- */

static teeny_status check_tensor(teeny_ctx *ctx, const teeny_tensor *t, const char *name, teeny__dtype want)
{
    if (!t)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s is NULL", name);
    if (!t->handle_alive)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s was destroyed", name);
    if (t->ctx != ctx)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s belongs to another context", name);
    if (t->dtype != want)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s is %s; this argument takes %s", name, dtype_name(t->dtype),
                            dtype_name(want));
    return TEENY_OK;
}

teeny_status teeny__check_tensor(teeny_ctx *ctx, const teeny_tensor *t, const char *name)
{
    return check_tensor(ctx, t, name, TEENY__F32);
}

teeny_status teeny__check_tensor_i32(teeny_ctx *ctx, const teeny_tensor *t, const char *name)
{
    return check_tensor(ctx, t, name, TEENY__I32);
}

teeny_status teeny__check_same_numel(teeny_ctx *ctx, const teeny_tensor *a, const char *an, const teeny_tensor *b,
                                     const char *bn)
{
    char sa[96], sb[96];
    if (a->numel != b->numel)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s %s and %s %s differ in size", an, teeny__shape_str(a, sa, sizeof sa),
                            bn, teeny__shape_str(b, sb, sizeof sb));
    return TEENY_OK;
}

teeny_status teeny__check_vector(teeny_ctx *ctx, const teeny_tensor *t, const char *name, int64_t len)
{
    char s[96];
    teeny_status st = teeny__check_tensor(ctx, t, name);
    if (st != TEENY_OK)
        return st;
    if (t->numel != len)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s has shape %s; expected %lld elements (one per channel)", name,
                            teeny__shape_str(t, s, sizeof s), (long long)len);
    return TEENY_OK;
}

int teeny__overlap(const teeny_tensor *a, const teeny_tensor *b)
{
    if (!a || !b || a->buf != b->buf)
        return 0;
    return a->offset < b->offset + (size_t)b->numel && b->offset < a->offset + (size_t)a->numel;
}

teeny_status teeny__check_disjoint(teeny_ctx *ctx, const char *fn, const teeny_tensor *const *t,
                                   const char *const *names, int n_in, int n)
{
    for (int i = n_in; i < n; i++)
        for (int j = 0; j < n; j++)
            if (j != i && teeny__overlap(t[i], t[j]))
                return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s overlaps %s in memory", fn, names[i], names[j]);
    return TEENY_OK;
}
