/*
 * layout.c -- ops that move elements, each one strided copy (strided.c,
 * cl/strided.cl) forward and its adjoint backward:
 *   transpose    y dim d = x dim perm[d]; dx = dy transposed back
 *   slice        ONNX Slice on every axis (start, end, step; negative
 *                steps and out-of-range bounds clamped as ONNX does);
 *                dx = dy scattered into zeros
 *   pad          constant padding lo/hi per axis (negative crops); dx =
 *                the window of dy
 *   expand       x broadcast (NumPy) to a shape; dx = dy summed over the
 *                broadcast dimensions (teeny__st_reduce)
 *   concat_axis  concatenation along any axis of up to 4 inputs per node;
 *                dx_i = its part of dy
 *   gather       x's slices at int32 indices along an axis; dx sums dy
 *                over the positions that read each slice (cl/layout.cl,
 *                a loop over the indices in order: no atomics)
 * Shapes are rank 1..5; every backward overwrites its output.
 *
 * Op-table entries (slots TEENY__<OP>_*: ops.h): forward in = [x] (gather:
 * [x, indices]; concat_axis: [x0 .. x3]), out = [y]; backward in = [...,
 * y, dy], out = [dx] ([dx0 .. dx3]; gather: indices take no gradient).
 */
#include <math.h>
#include <string.h>

#include "../ops.h"

static void strides(const int64_t *shape, int ndim, int64_t *s)
{
    teeny__st_contiguous(shape, ndim, s);
}

/* A copy from src to dst over space dims[0..ndim) (the defaults: window
 * everything, scale 1). */
static teeny__st_copy_args copy_of(const teeny_tensor *src, teeny_tensor *dst, int ndim, const int64_t *dims)
{
    teeny__st_copy_args c = teeny__st_copy_init(ndim, dims);
    c.x = src->buf;
    c.x_off = teeny__off(src);
    c.y = dst->buf;
    c.y_off = teeny__off(dst);
    return c;
}

static teeny_status zero(teeny_ctx *ctx, teeny_tensor *t)
{
    return teeny__fill(ctx, t->buf, t->offset, (size_t)t->numel, 0.0f);
}

static teeny_status shape_err(teeny_ctx *ctx, const char *what, const teeny__shape *s, const char *want)
{
    char b[96];
    return teeny__error(ctx, TEENY_ERR_SHAPE, "%s has shape %s%s; expected %s", what,
                        teeny__dims_str(s->shape, s->ndim, b, sizeof b), s->is_i32 ? " int32" : "", want);
}

/* The one fp32 input of rank 1..5. */
static teeny_status one_input(teeny_ctx *ctx, const teeny__node_shapes *s)
{
    if (s->n_in != 1 || s->in[0].is_i32 || s->in[0].ndim < 1)
        return shape_err(ctx, "x", &s->in[0], "fp32 of rank 1..5");
    return TEENY_OK;
}

static void no_params(teeny__node_shapes *s)
{
    s->n_param = s->n_state = s->n_saved = 0;
}

/* ---- transpose ---- */

teeny_status teeny__transpose_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__TRANSPOSE_X];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int64_t xs[TEENY_MAX_DIMS];
    teeny__st_copy_args c = copy_of(x, y, y->ndim, y->shape);
    strides(x->shape, x->ndim, xs);
    strides(y->shape, y->ndim, c.ys);
    for (int d = 0; d < y->ndim; d++)
        c.xs[d] = xs[a->attrs.transpose.perm[d]];
    return teeny__st_copy(ctx, &c);
}

teeny_status teeny__transpose_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dy = a->in[TEENY__TRANSPOSE_DY];
    teeny_tensor *dx = a->out[TEENY__TRANSPOSE_X];
    int64_t ds[TEENY_MAX_DIMS];
    if (!dx)
        return TEENY_OK;
    teeny__st_copy_args c = copy_of(dy, dx, dx->ndim, dx->shape);
    strides(dy->shape, dy->ndim, ds);
    strides(dx->shape, dx->ndim, c.ys);
    for (int d = 0; d < dy->ndim; d++) /* x dim perm[d] is dy dim d */
        c.xs[a->attrs.transpose.perm[d]] = ds[d];
    return teeny__st_copy(ctx, &c);
}

teeny_status teeny__transpose_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const int *perm = s->attrs.transpose.perm;
    int seen = 0;
    teeny_status st = one_input(ctx, s);
    if (st != TEENY_OK)
        return st;
    s->out = s->in[0];
    for (int d = 0; d < s->in[0].ndim; d++) {
        if (perm[d] < 0 || perm[d] >= s->in[0].ndim || (seen & (1 << perm[d])))
            return teeny__error(ctx, TEENY_ERR_ARG, "perm is not a permutation of x's %d axes (perm[%d] = %d)",
                                s->in[0].ndim, d, perm[d]);
        seen |= 1 << perm[d];
        s->out.shape[d] = s->in[0].shape[perm[d]];
    }
    no_params(s);
    return TEENY_OK;
}

/* ---- slice ---- */

/* The copy between x's elements in the slice and y (dy): space y's. */
static teeny__st_copy_args slice_copy(const teeny__slicend_attrs *at, const int64_t *xshape, int ndim,
                                      const int64_t *yshape, int64_t *x_off)
{
    int64_t xs[TEENY_MAX_DIMS], b, len;
    teeny__st_copy_args c = teeny__st_copy_init(ndim, yshape);
    strides(xshape, ndim, xs);
    *x_off = 0;
    for (int d = 0; d < ndim; d++) {
        teeny__slice_axis(xshape[d], at->start[d], at->end[d], at->step[d], &b, &len);
        c.xs[d] = xs[d] * at->step[d];
        *x_off += b * xs[d];
    }
    return c;
}

teeny_status teeny__slice_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__SLICE_X];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int64_t off;
    teeny__st_copy_args c = slice_copy(&a->attrs.slicend, x->shape, x->ndim, y->shape, &off);
    strides(y->shape, y->ndim, c.ys);
    c.x = x->buf;
    c.x_off = teeny__off(x) + (int)off;
    c.y = y->buf;
    c.y_off = teeny__off(y);
    return teeny__st_copy(ctx, &c);
}

teeny_status teeny__slice_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dy = a->in[TEENY__SLICE_DY];
    teeny_tensor *dx = a->out[TEENY__SLICE_X];
    int64_t off, step_strides[TEENY_MAX_DIMS];
    if (!dx)
        return TEENY_OK;
    teeny__st_copy_args c = slice_copy(&a->attrs.slicend, dx->shape, dx->ndim, dy->shape, &off);
    memcpy(step_strides, c.xs, sizeof step_strides); /* dx's strides through the slice */
    strides(dy->shape, dy->ndim, c.xs);
    memcpy(c.ys, step_strides, sizeof step_strides);
    c.x = dy->buf;
    c.x_off = teeny__off(dy);
    c.y = dx->buf;
    c.y_off = teeny__off(dx) + (int)off;
    teeny_status st = zero(ctx, dx);
    return st == TEENY_OK ? teeny__st_copy(ctx, &c) : st;
}

teeny_status teeny__slice_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__slicend_attrs *at = &s->attrs.slicend;
    teeny_status st = one_input(ctx, s);
    if (st != TEENY_OK)
        return st;
    s->out = s->in[0];
    for (int d = 0; d < s->in[0].ndim; d++) {
        int64_t b, len;
        if (at->step[d] == 0 || at->step[d] < -INT32_MAX || at->step[d] > INT32_MAX)
            return teeny__error(ctx, TEENY_ERR_ARG, "step %lld on axis %d (nonzero, within int32)",
                                (long long)at->step[d], d);
        teeny__slice_axis(s->in[0].shape[d], at->start[d], at->end[d], at->step[d], &b, &len);
        if (len < 1)
            return teeny__error(ctx, TEENY_ERR_SHAPE, "axis %d: start %lld, end %lld, step %lld select nothing of %lld",
                                d, (long long)at->start[d], (long long)at->end[d], (long long)at->step[d],
                                (long long)s->in[0].shape[d]);
        s->out.shape[d] = len;
    }
    no_params(s);
    return TEENY_OK;
}

/* ---- pad ---- */

teeny_status teeny__pad_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__PAD_X];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    teeny__st_copy_args c = copy_of(x, y, y->ndim, y->shape);
    strides(x->shape, x->ndim, c.xs);
    strides(y->shape, y->ndim, c.ys);
    for (int d = 0; d < y->ndim; d++) {
        c.lo[d] = a->attrs.pad.lo[d];
        c.hi[d] = a->attrs.pad.lo[d] + x->shape[d];
    }
    c.pad = a->attrs.pad.value;
    return teeny__st_copy(ctx, &c);
}

/* dx = dy's elements at x's positions (the padding takes no gradient). */
teeny_status teeny__pad_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dy = a->in[TEENY__PAD_DY];
    teeny_tensor *dx = a->out[TEENY__PAD_X];
    if (!dx)
        return TEENY_OK;
    teeny__st_copy_args c = copy_of(dy, dx, dx->ndim, dx->shape);
    strides(dy->shape, dy->ndim, c.xs);
    strides(dx->shape, dx->ndim, c.ys);
    for (int d = 0; d < dx->ndim; d++) {
        c.lo[d] = -a->attrs.pad.lo[d];
        c.hi[d] = -a->attrs.pad.lo[d] + dy->shape[d];
    }
    return teeny__st_copy(ctx, &c);
}

teeny_status teeny__pad_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__pad_attrs *at = &s->attrs.pad;
    teeny_status st = one_input(ctx, s);
    if (st != TEENY_OK)
        return st;
    s->out = s->in[0];
    for (int d = 0; d < s->in[0].ndim; d++) {
        int64_t lo = at->lo[d], hi = at->hi[d];
        if (lo < -INT32_MAX || lo > INT32_MAX || hi < -INT32_MAX || hi > INT32_MAX ||
            s->in[0].shape[d] + lo + hi < 1)
            return teeny__error(ctx, TEENY_ERR_ARG, "axis %d of size %lld padded by %lld, %lld leaves nothing", d,
                                (long long)s->in[0].shape[d], (long long)lo, (long long)hi);
        s->out.shape[d] += lo + hi;
    }
    no_params(s);
    return TEENY_OK;
}

/* ---- expand ---- */

teeny_status teeny__expand_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__EXPAND_X];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    teeny__shape xs = teeny__shape_of(x), ys = teeny__shape_of(y);
    teeny__st_copy_args c = copy_of(x, y, y->ndim, y->shape);
    teeny__st_broadcast_strides(&xs, &ys, c.xs);
    strides(y->shape, y->ndim, c.ys);
    return teeny__st_copy(ctx, &c);
}

teeny_status teeny__expand_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dy = a->in[TEENY__EXPAND_DY];
    teeny_tensor *dx = a->out[TEENY__EXPAND_X];
    int64_t ds[TEENY_MAX_DIMS];
    if (!dx)
        return TEENY_OK;
    teeny__shape xs = teeny__shape_of(dx), ys = teeny__shape_of(dy);
    strides(dy->shape, dy->ndim, ds);
    return teeny__st_reduce(ctx, dy->buf, teeny__off(dy), dy->ndim, dy->shape, ds, teeny__st_broadcast_mask(&xs, &ys),
                            1.0f, dx->buf, teeny__off(dx));
}

/* y = x broadcast with the target (NumPy: either may have size 1 or lack
 * leading dimensions; the result has the larger rank). */
teeny_status teeny__expand_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__expand_attrs *at = &s->attrs.expand;
    const teeny__shape *x = &s->in[0];
    teeny_status st = one_input(ctx, s);
    if (st != TEENY_OK)
        return st;
    if (at->ndim < 1 || at->ndim > TEENY_MAX_DIMS)
        return teeny__error(ctx, TEENY_ERR_ARG, "the target's rank %d is outside 1..5", at->ndim);
    s->out = (teeny__shape){.ndim = x->ndim > at->ndim ? x->ndim : at->ndim};
    for (int d = 0; d < s->out.ndim; d++) {
        int jx = d - (s->out.ndim - x->ndim), jt = d - (s->out.ndim - at->ndim);
        int64_t a = jx < 0 ? 1 : x->shape[jx], b = jt < 0 ? 1 : at->shape[jt];
        if ((a != b && a != 1 && b != 1) || b < 1)
            return teeny__error(ctx, TEENY_ERR_SHAPE, "x's dimension %lld and the target's %lld do not broadcast",
                                (long long)a, (long long)b);
        s->out.shape[d] = a == 1 ? b : a;
    }
    no_params(s);
    return TEENY_OK;
}

/* ---- concat_axis ---- */

/* Part i's copy to (or, backward, from) its place along the axis of whole. */
static teeny__st_copy_args cat_copy(const teeny_tensor *part, const teeny_tensor *whole, int axis, int64_t at)
{
    int64_t ws[TEENY_MAX_DIMS];
    teeny__st_copy_args c = teeny__st_copy_init(part->ndim, part->shape);
    strides(whole->shape, whole->ndim, ws);
    strides(part->shape, part->ndim, c.xs);
    memcpy(c.ys, ws, sizeof ws);
    c.y_off = (int)(at * ws[axis]);
    return c;
}

teeny_status teeny__concat_axis_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny__cat_attrs *at = &a->attrs.cat;
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int64_t pos = at->first;
    teeny_status st = TEENY_OK;
    for (int i = 0; i < at->n_inputs && st == TEENY_OK; i++) {
        const teeny_tensor *x = a->in[TEENY__CONCAT_AXIS_X0 + i];
        teeny__st_copy_args c = cat_copy(x, y, at->axis, pos);
        c.x = x->buf;
        c.x_off = teeny__off(x);
        c.y = y->buf;
        c.y_off += teeny__off(y);
        st = teeny__st_copy(ctx, &c);
        pos += x->shape[at->axis];
    }
    return st;
}

teeny_status teeny__concat_axis_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny__cat_attrs *at = &a->attrs.cat;
    const teeny_tensor *dy = a->in[TEENY__CONCAT_AXIS_DY];
    int64_t pos = at->first;
    teeny_status st = TEENY_OK;
    for (int i = 0; i < at->n_inputs && st == TEENY_OK; i++) {
        teeny_tensor *dx = a->out[TEENY__CONCAT_AXIS_X0 + i];
        const teeny_tensor *shape = a->in[TEENY__CONCAT_AXIS_X0 + i] ? a->in[TEENY__CONCAT_AXIS_X0 + i] : dx;
        TEENY_ASSERT(ctx, shape != NULL);
        if (dx) {
            teeny__st_copy_args c = cat_copy(dx, dy, at->axis, pos), swap = c;
            memcpy(c.xs, swap.ys, sizeof c.xs); /* read dy through the whole's strides */
            memcpy(c.ys, swap.xs, sizeof c.ys);
            c.x = dy->buf;
            c.x_off = swap.y_off + teeny__off(dy);
            c.y = dx->buf;
            c.y_off = teeny__off(dx);
            st = teeny__st_copy(ctx, &c);
        }
        pos += shape->shape[at->axis];
    }
    return st;
}

teeny_status teeny__concat_axis_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__cat_attrs *at = &s->attrs.cat;
    const teeny__shape *x0 = &s->in[0];
    if (s->n_in < 1 || s->n_in > TEENY__OP_MAX_SLOTS || at->n_inputs != s->n_in || at->first != 0 || x0->ndim < 1 ||
        at->axis < 0 || at->axis >= x0->ndim)
        return teeny__error(ctx, TEENY_ERR_ARG, "%d inputs with n_inputs %d, axis %d, first %d; need 1..%d inputs, "
                            "n_inputs = their number, an axis of theirs, first 0", s->n_in, at->n_inputs, at->axis,
                            at->first, TEENY__OP_MAX_SLOTS);
    s->out = *x0;
    s->out.shape[at->axis] = 0;
    for (int i = 0; i < s->n_in; i++) {
        const teeny__shape *x = &s->in[i];
        int ok = !x->is_i32 && x->ndim == x0->ndim;
        for (int d = 0; ok && d < x->ndim; d++)
            ok = d == at->axis || x->shape[d] == x0->shape[d];
        if (!ok)
            return shape_err(ctx, "an input", x, "fp32 equal to x[0] in every dimension but the axis");
        s->out.shape[at->axis] += x->shape[at->axis];
    }
    if (teeny__dims_product(s->out.shape, s->out.ndim) > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "the output passes int32 indexing");
    no_params(s);
    return TEENY_OK;
}

/* ---- gather ---- */

/* The space y is read in: x's dimensions with the axis replaced by the
 * Q indices (y's own shape flattened over the indices' dimensions). */
static int gather_space(const teeny_tensor *x, int axis, int64_t q, int64_t *space)
{
    for (int d = 0; d < x->ndim; d++)
        space[d] = d == axis ? q : x->shape[d];
    return x->ndim;
}

teeny_status teeny__gather_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__GATHER_X], *idx = a->in[TEENY__GATHER_INDICES];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int axis = a->attrs.gather.axis;
    int64_t space[TEENY_MAX_DIMS];
    int n = gather_space(x, axis, idx->numel, space);
    teeny__st_copy_args c = copy_of(x, y, n, space);
    strides(x->shape, x->ndim, c.xs);
    strides(space, n, c.ys);
    c.map = idx->buf;
    c.map_off = teeny__off(idx);
    c.map_axis = axis;
    c.map_dim = (int)x->shape[axis];
    c.pad = NAN;
    return teeny__st_copy(ctx, &c);
}

/* Grid (numel of dx), one item per element, summing over the indices in
 * order (cl/layout.cl); the index loop stays within the loop budget. */
teeny_status teeny__gather_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    static const char name[] = "lay_gather_backward";
    const teeny_tensor *idx = a->in[TEENY__GATHER_INDICES], *dy = a->in[TEENY__GATHER_DY];
    teeny_tensor *dx = a->out[TEENY__GATHER_X];
    int64_t budget;
    if (!dx)
        return TEENY_OK;
    int axis = a->attrs.gather.axis, q = (int)idx->numel, dim = (int)dx->shape[axis], inner = 1, total = (int)dx->numel;
    for (int d = axis + 1; d < dx->ndim; d++)
        inner *= (int)dx->shape[d];
    teeny_status st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK)
        return st;
    if (q > budget)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "gather backward over %d indices: %s ends a kernel's loops "
                            "after %lld", q, ctx->info.device_name, (long long)ctx->prog.loop_limit);
    int i_off = teeny__off(idx), dy_off = teeny__off(dy), dx_off = teeny__off(dx);
    cl_kernel k;
    st = teeny__kernel_get(ctx, "layout", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &idx->buf, sizeof(int), &i_off, sizeof(int), &q,
                             sizeof(cl_mem), &dy->buf, sizeof(int), &dy_off, sizeof(cl_mem), &dx->buf, sizeof(int),
                             &dx_off, sizeof(int), &dim, sizeof(int), &inner, sizeof(int), &total, (size_t)0);
    if (st == TEENY_OK)
        st = teeny__launch_1d(ctx, k, name, (size_t)total);
    return st;
}

/* x fp32 of rank 1..5, indices int32 of any shape; y = x's dimensions
 * with the axis replaced by the indices' (rank at most 5). */
teeny_status teeny__gather_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0], *ind = &s->in[1];
    int axis = s->attrs.gather.axis;
    if (s->n_in != 2 || x->is_i32 || x->ndim < 1 || !ind->is_i32 || ind->ndim < 1)
        return shape_err(ctx, "x", x, "fp32 of rank 1..5 and int32 indices");
    if (axis < 0 || axis >= x->ndim)
        return teeny__error(ctx, TEENY_ERR_ARG, "axis %d is not one of x's %d", axis, x->ndim);
    if (x->ndim - 1 + ind->ndim > TEENY_MAX_DIMS)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "the result would have rank %d (at most 5)", x->ndim - 1 + ind->ndim);
    s->out = (teeny__shape){0};
    for (int d = 0; d < x->ndim; d++)
        if (d != axis)
            s->out.shape[s->out.ndim++] = x->shape[d];
        else
            for (int j = 0; j < ind->ndim; j++)
                s->out.shape[s->out.ndim++] = ind->shape[j];
    no_params(s);
    return TEENY_OK;
}
