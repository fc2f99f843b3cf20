/*
 * layout_eager.c -- the eager API of the layout ops (layout.c): each
 * function names its tensors by the op's slots and runs them through
 * teeny__eager_run (the op's infer validates); concatenation and split
 * check their parts against the whole and run in groups of four.
 */
#include <string.h>

#include "../ops.h"

/* ---- the eager API ---- */

/* perm (entries past t's rank zeroed) into at, or an error naming fn. */
static teeny_status transpose_attrs(teeny_ctx *ctx, const char *fn, const int *perm, const teeny_tensor *t,
                                    teeny__op_attrs *at)
{
    if (!perm)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: perm is NULL", fn);
    for (int d = 0; t && d < TEENY_MAX_DIMS; d++)
        at->transpose.perm[d] = d < t->ndim ? perm[d] : 0;
    return TEENY_OK;
}

/* p's start, end and step into at, or an error naming fn. */
static teeny_status slice_attrs(teeny_ctx *ctx, const char *fn, const teeny_slice_params *p, teeny__op_attrs *at)
{
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: p is NULL", fn);
    memcpy(at->slicend.start, p->start, sizeof p->start);
    memcpy(at->slicend.end, p->end, sizeof p->end);
    memcpy(at->slicend.step, p->step, sizeof p->step);
    return TEENY_OK;
}

static teeny_status run2(teeny_ctx *ctx, teeny__eager *e, const char *a_name, const teeny_tensor *a, int a_slot,
                         const char *b_name, const teeny_tensor *b, int b_slot)
{
    const teeny__earg args[] = {{a_name, a, a_slot, 0}, {b_name, b, b_slot, TEENY__EA_OUT}};
    return teeny__eager_run(ctx, e, args, 2);
}

teeny_status teeny_transpose(teeny_ctx *ctx, const int *perm, const teeny_tensor *x, teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_transpose", TRANSPOSE, transpose, forward)};
    EAGER_BEGIN("teeny_transpose");
    teeny_status st = transpose_attrs(ctx, "teeny_transpose", perm, x, &e.attrs);
    return st != TEENY_OK ? st : run2(ctx, &e, "x", x, TEENY__TRANSPOSE_X, "y", y, TEENY__OUT_VALUE);
}

teeny_status teeny_transpose_backward(teeny_ctx *ctx, const int *perm, const teeny_tensor *dy, teeny_tensor *dx)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_transpose_backward", TRANSPOSE, transpose, backward)};
    EAGER_BEGIN("teeny_transpose_backward");
    teeny_status st = transpose_attrs(ctx, "teeny_transpose_backward", perm, dx, &e.attrs);
    return st != TEENY_OK ? st : run2(ctx, &e, "dy", dy, TEENY__TRANSPOSE_DY, "dx", dx, TEENY__TRANSPOSE_X);
}

teeny_status teeny_slice(teeny_ctx *ctx, const teeny_slice_params *p, const teeny_tensor *x, teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_slice", SLICE, slice, forward)};
    EAGER_BEGIN("teeny_slice");
    teeny_status st = slice_attrs(ctx, "teeny_slice", p, &e.attrs);
    return st != TEENY_OK ? st : run2(ctx, &e, "x", x, TEENY__SLICE_X, "y", y, TEENY__OUT_VALUE);
}

teeny_status teeny_slice_backward(teeny_ctx *ctx, const teeny_slice_params *p, const teeny_tensor *dy,
                                  teeny_tensor *dx)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_slice_backward", SLICE, slice, backward)};
    EAGER_BEGIN("teeny_slice_backward");
    teeny_status st = slice_attrs(ctx, "teeny_slice_backward", p, &e.attrs);
    return st != TEENY_OK ? st : run2(ctx, &e, "dy", dy, TEENY__SLICE_DY, "dx", dx, TEENY__SLICE_X);
}

static teeny_status pad_attrs(teeny_ctx *ctx, const char *fn, const int64_t *lo, const int64_t *hi, float value,
                              const teeny_tensor *x, teeny__op_attrs *at)
{
    if (!lo || !hi)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: lo or hi is NULL", fn);
    for (int d = 0; x && d < x->ndim && d < TEENY_MAX_DIMS; d++) {
        at->pad.lo[d] = lo[d];
        at->pad.hi[d] = hi[d];
    }
    at->pad.value = value;
    return TEENY_OK;
}

teeny_status teeny_pad(teeny_ctx *ctx, const int64_t *lo, const int64_t *hi, float value, const teeny_tensor *x,
                       teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_pad", PAD, pad, forward)};
    EAGER_BEGIN("teeny_pad");
    teeny_status st = teeny__eager_tensors(ctx, "teeny_pad", &(teeny__earg){"x", x, 0, 0}, 1);
    if (st == TEENY_OK)
        st = pad_attrs(ctx, "teeny_pad", lo, hi, value, x, &e.attrs);
    return st != TEENY_OK ? st : run2(ctx, &e, "x", x, TEENY__PAD_X, "y", y, TEENY__OUT_VALUE);
}

teeny_status teeny_pad_backward(teeny_ctx *ctx, const int64_t *lo, const int64_t *hi, const teeny_tensor *dy,
                                teeny_tensor *dx)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_pad_backward", PAD, pad, backward)};
    EAGER_BEGIN("teeny_pad_backward");
    teeny_status st = teeny__eager_tensors(ctx, "teeny_pad_backward", &(teeny__earg){"dx", dx, 0, 0}, 1);
    if (st == TEENY_OK)
        st = pad_attrs(ctx, "teeny_pad_backward", lo, hi, 0.0f, dx, &e.attrs);
    return st != TEENY_OK ? st : run2(ctx, &e, "dy", dy, TEENY__PAD_DY, "dx", dx, TEENY__PAD_X);
}

/* The target is y's (dy's) shape. */
static teeny_status expand_run(teeny_ctx *ctx, teeny__eager *e, const teeny_tensor *target, const char *a_name,
                               const teeny_tensor *a, int a_slot, const char *b_name, const teeny_tensor *b, int b_slot)
{
    const teeny__earg t = {e->backward ? "dy" : "y", target, 0, 0};
    teeny_status st = teeny__eager_tensors(ctx, e->fn, &t, 1);
    if (st != TEENY_OK)
        return st;
    e->attrs.expand.ndim = target->ndim;
    memcpy(e->attrs.expand.shape, target->shape, sizeof(int64_t) * (size_t)target->ndim);
    return run2(ctx, e, a_name, a, a_slot, b_name, b, b_slot);
}

teeny_status teeny_expand(teeny_ctx *ctx, const teeny_tensor *x, teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_expand", EXPAND, expand, forward)};
    EAGER_BEGIN("teeny_expand");
    return expand_run(ctx, &e, y, "x", x, TEENY__EXPAND_X, "y", y, TEENY__OUT_VALUE);
}

teeny_status teeny_expand_backward(teeny_ctx *ctx, const teeny_tensor *dy, teeny_tensor *dx)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_expand_backward", EXPAND, expand, backward)};
    EAGER_BEGIN("teeny_expand_backward");
    return expand_run(ctx, &e, dy, "dy", dy, TEENY__EXPAND_DY, "dx", dx, TEENY__EXPAND_X);
}

/* Concatenation and its inverse: every part checked against the whole
 * (fp32 of its rank, equal but along the axis, sizes summing to its, no
 * overlap) before the first group of at most four runs. */
static teeny_status cat_run(teeny_ctx *ctx, const char *fn, int backward, int axis, int n,
                            const teeny_tensor *const *parts, const teeny_tensor *whole)
{
    const char *pname = backward ? "ys" : "xs", *wname = backward ? "x" : "y";
    char b1[96], b2[96];
    teeny_status st = teeny__eager_tensors(ctx, fn, &(teeny__earg){wname, whole, 0, 0}, 1);
    if (st != TEENY_OK)
        return st;
    if (n < 1 || !parts)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: n = %d with %s %s; need at least one part", fn, n, pname,
                            parts ? "set" : "NULL");
    if (axis < 0 || axis >= whole->ndim)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: axis %d is not one of %s's %d", fn, axis, wname, whole->ndim);
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        const teeny_tensor *p = parts[i];
        if ((st = teeny__eager_tensors(ctx, fn, &(teeny__earg){backward ? "ys[i]" : "xs[i]", p, 0, 0}, 1)) != TEENY_OK)
            return st;
        int ok = p->ndim == whole->ndim;
        for (int d = 0; ok && d < p->ndim; d++)
            ok = d == axis || p->shape[d] == whole->shape[d];
        if (!ok)
            return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %s[%d] has shape %s; expected %s's %s but along axis %d", fn,
                                pname, i, teeny__shape_str(p, b1, sizeof b1), wname,
                                teeny__shape_str(whole, b2, sizeof b2), axis);
        sum += p->shape[axis];
        if (teeny__overlap(p, whole))
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s[%d] overlaps %s in memory", fn, pname, i, wname);
        for (int k = 0; backward && k < i; k++)
            if (teeny__overlap(p, parts[k]))
                return teeny__error(ctx, TEENY_ERR_ARG, "%s: ys[%d] overlaps ys[%d] in memory", fn, i, k);
    }
    if (sum != whole->shape[axis])
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: the parts' sizes along axis %d sum to %lld, %s's is %lld", fn,
                            axis, (long long)sum, wname, (long long)whole->shape[axis]);
    int64_t first = 0;
    for (int i = 0; i < n && st == TEENY_OK; i += TEENY__OP_MAX_SLOTS) {
        int m = n - i < TEENY__OP_MAX_SLOTS ? n - i : TEENY__OP_MAX_SLOTS;
        teeny__op_args a;
        memset(&a, 0, sizeof a);
        a.attrs.cat = (teeny__cat_attrs){m, axis, (int)first};
        for (int j = 0; j < m; j++) {
            if (backward)
                a.out[TEENY__CONCAT_AXIS_X0 + j] = (teeny_tensor *)parts[i + j];
            else
                a.in[TEENY__CONCAT_AXIS_X0 + j] = parts[i + j];
            first += parts[i + j]->shape[axis];
        }
        if (backward)
            a.in[TEENY__CONCAT_AXIS_DY] = whole;
        else
            a.out[TEENY__OUT_VALUE] = (teeny_tensor *)whole;
        st = teeny__op_exec(ctx, backward ? teeny__concat_axis_backward : teeny__concat_axis_forward, &a);
    }
    return st;
}

teeny_status teeny_concat(teeny_ctx *ctx, int axis, int n, const teeny_tensor *const *xs, teeny_tensor *y)
{
    EAGER_BEGIN("teeny_concat");
    return cat_run(ctx, "teeny_concat", 0, axis, n, xs, y);
}

teeny_status teeny_split(teeny_ctx *ctx, int axis, const teeny_tensor *x, int n, teeny_tensor *const *ys)
{
    EAGER_BEGIN("teeny_split");
    return cat_run(ctx, "teeny_split", 1, axis, n, (const teeny_tensor *const *)ys, x);
}

teeny_status teeny_gather(teeny_ctx *ctx, int axis, const teeny_tensor *x, const teeny_tensor *indices,
                          teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_gather", GATHER, gather, forward), .attrs.gather = {axis}};
    const teeny__earg args[] = {{"x", x, TEENY__GATHER_X, 0},
                                {"indices", indices, TEENY__GATHER_INDICES, TEENY__EA_I32},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_gather");
    return teeny__eager_run(ctx, &e, args, 3);
}

teeny_status teeny_gather_backward(teeny_ctx *ctx, int axis, const teeny_tensor *indices, const teeny_tensor *dy,
                                   teeny_tensor *dx)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_gather_backward", GATHER, gather, backward), .attrs.gather = {axis}};
    const teeny__earg args[] = {{"indices", indices, TEENY__GATHER_INDICES, TEENY__EA_I32},
                                {"dy", dy, TEENY__GATHER_DY, 0},
                                {"dx", dx, TEENY__GATHER_X, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_gather_backward");
    return teeny__eager_run(ctx, &e, args, 3);
}
