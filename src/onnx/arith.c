/*
 * arith.c -- host arithmetic on constants for the folded shape
 * computations: Slice (starts/ends/axes/steps, negative steps), Add, Sub,
 * Mul, Div (and Pow of floats) with NumPy broadcasting (integers wrap, division by zero is
 * refused), and Concat along any axis.
 */
#include <math.h>
#include <string.h>

#include "onnx_internal.h"

static const char *const NO_ATTRS[] = {NULL};

/* Slice of a constant: starts/ends/axes/steps inputs (opset >= 10) or
 * attributes (before). */
teeny_status teeny__ox_slice_params(ox_import *im, int rank, int64_t *start, int64_t *step, ox_shape *o,
                                    const ox_shape *s)
{
    static const char *const attrs[] = {"starts", "ends", "axes", NULL};
    int64_t v[4][OX_MAX_DIMS];
    int n[4] = {-1, -1, -1, -1};
    teeny_status st = teeny__ox_attrs_allowed(im, im->opset < 10 ? attrs : NO_ATTRS);
    for (int k = 0; k < 4 && st == TEENY_OK; k++) {
        static const char *names[] = {"starts", "ends", "axes", "steps"};
        int idx;
        const ox_const *c;
        if (im->opset < 10) {
            if (k < 3)
                st = teeny__ox_attr_ints(im, names[k], OX_MAX_DIMS, v[k], &n[k]);
        } else if ((st = teeny__ox_in(im, k + 1, &idx)) == TEENY_OK && idx >= 0 &&
                   (st = teeny__ox_in_const(im, k + 1, names[k], 0, &c)) == TEENY_OK)
            st = teeny__ox_const_ints(im, c, names[k], OX_MAX_DIMS, v[k], &n[k]);
    }
    if (st != TEENY_OK)
        return st;
    if (n[0] < 0 || n[1] != n[0] || (n[2] >= 0 && n[2] != n[0]) || (n[3] >= 0 && n[3] != n[0]))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "starts, ends, axes and steps differ in length");
    *o = *s;
    for (int i = 0; i < rank; i++)
        start[i] = 0, step[i] = 1;
    for (int i = 0; i < n[0]; i++) {
        int ax;
        if ((st = teeny__ox_axis(im, "axis", n[2] >= 0 ? v[2][i] : i, rank, &ax)) != TEENY_OK)
            return st;
        int64_t d = s->d[ax], sp = n[3] >= 0 ? v[3][i] : 1, b = v[0][i], e = v[1][i];
        if (sp == 0)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "step 0");
        int64_t len;
        teeny__slice_axis(d, b, e, sp, &b, &len);
        start[ax] = b;
        step[ax] = len > 1 ? sp : sp > 0 ? 1 : -1; /* one element: any step of its sign takes it */
        o->d[ax] = len;
    }
    return TEENY_OK;
}

teeny_status teeny__ox_fold_slice(ox_import *im)
{
    const ox_const *in;
    int64_t start[OX_MAX_DIMS], step[OX_MAX_DIMS], idx[OX_MAX_DIMS] = {0};
    ox_shape o;
    ox_const c;
    teeny_status st = teeny__ox_in_const(im, 0, "data", 0, &in);
    if (st != TEENY_OK || (st = teeny__ox_slice_params(im, in->shape.ndim, start, step, &o, &in->shape)) != TEENY_OK)
        return st;
    if ((st = teeny__ox_const_alloc(im, in->type, in->onnx_type, &o, &c)) != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    size_t es = teeny__ox_esize(in->type);
    for (int64_t k = 0; k < c.numel; k++) {
        int64_t src = 0;
        for (int d = 0; d < o.ndim; d++)
            src = src * in->shape.d[d] + start[d] + idx[d] * step[d];
        memcpy((char *)c.data + k * es, (const char *)in->data + src * es, es);
        for (int d = o.ndim - 1; d >= 0 && ++idx[d] == o.d[d]; d--)
            idx[d] = 0;
    }
    return teeny__ox_out_const(im, 0, &c);
}

int teeny__ox_broadcast(const ox_shape *a, const ox_shape *b, ox_shape *o)
{
    o->ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < o->ndim; i++) {
        int ja = i - (o->ndim - a->ndim), jb = i - (o->ndim - b->ndim);
        int64_t x = ja < 0 ? 1 : a->d[ja], y = jb < 0 ? 1 : b->d[jb];
        if (x != y && x != 1 && y != 1)
            return 0;
        o->d[i] = x == 1 ? y : x;
    }
    return 1;
}

int64_t teeny__ox_bcast_index(const ox_shape *o, const ox_shape *s, int64_t k)
{
    int64_t at = 0, mul = 1;
    for (int i = o->ndim - 1; i >= 0; i--) {
        int64_t coord = k % o->d[i];
        k /= o->d[i];
        int j = i - (o->ndim - s->ndim);
        if (j >= 0) {
            at += (s->d[j] == 1 ? 0 : coord) * mul;
            mul *= s->d[j];
        }
    }
    return at;
}

/* Add, Sub, Mul, Div of two constants (shape arithmetic). */
teeny_status teeny__ox_fold_binary(ox_import *im, const ox_const *a, const ox_const *b)
{
    const char *op = im->node->op_type;
    ox_shape o;
    ox_const c;
    if (a->type != b->type)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "operands of different types");
    if (!teeny__ox_broadcast(&a->shape, &b->shape, &o))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "operand shapes do not broadcast");
    teeny_status st = teeny__ox_const_alloc(im, a->type, a->onnx_type, &o, &c);
    if (st != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    for (int64_t k = 0; k < c.numel; k++) {
        int64_t i = teeny__ox_bcast_index(&o, &a->shape, k), j = teeny__ox_bcast_index(&o, &b->shape, k);
        if (a->type == OX_F32) {
            float x = ((const float *)a->data)[i], y = ((const float *)b->data)[j];
            ((float *)c.data)[k] = op[0] == 'A' ? x + y : op[0] == 'S' ? x - y : op[0] == 'M' ? x * y
                                   : op[0] == 'P' ? powf(x, y) : x / y;
            continue;
        }
        if (op[0] == 'P') {
            teeny__ox_const_free(&c);
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "Pow of integer constants");
        }
        int64_t x = ((const int64_t *)a->data)[i], y = ((const int64_t *)b->data)[j];
        if (op[0] == 'D' && (y == 0 || (x == INT64_MIN && y == -1))) {
            teeny__ox_const_free(&c);
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "integer division by %lld", (long long)y);
        }
        /* wrap like two's complement instead of overflowing */
        ((int64_t *)c.data)[k] = op[0] == 'A' ? (int64_t)((uint64_t)x + (uint64_t)y)
                                 : op[0] == 'S' ? (int64_t)((uint64_t)x - (uint64_t)y)
                                 : op[0] == 'M' ? (int64_t)((uint64_t)x * (uint64_t)y) : x / y;
    }
    return teeny__ox_out_const(im, 0, &c);
}

/* Concat of constants along any axis. */
teeny_status teeny__ox_fold_concat(ox_import *im, int axis_attr)
{
    int n = teeny__ox_n_in(im), ax;
    const ox_const *first;
    ox_shape o;
    ox_const c;
    teeny_status st = teeny__ox_in_const(im, 0, "inputs", 0, &first);
    if (st != TEENY_OK || (st = teeny__ox_axis(im, "axis", axis_attr, first->shape.ndim, &ax)) != TEENY_OK)
        return st;
    o = first->shape;
    o.d[ax] = 0;
    for (int i = 0; i < n; i++) {
        const ox_const *x;
        if ((st = teeny__ox_in_const(im, i, "inputs", 0, &x)) != TEENY_OK)
            return st;
        if (x->type != first->type || x->shape.ndim != o.ndim)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "inputs differ in type or rank");
        for (int d = 0; d < o.ndim; d++)
            if (d != ax && x->shape.d[d] != o.d[d])
                return teeny__ox_fail(im, TEENY_ERR_SHAPE, "input %d differs in dimension %d", i, d);
        o.d[ax] += x->shape.d[ax];
    }
    if ((st = teeny__ox_const_alloc(im, first->type, first->onnx_type, &o, &c)) != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    int64_t outer = 1, inner = 1, at = 0;
    for (int d = 0; d < ax; d++)
        outer *= o.d[d];
    for (int d = ax + 1; d < o.ndim; d++)
        inner *= o.d[d];
    size_t es = teeny__ox_esize(c.type);
    for (int64_t r = 0; r < outer; r++)
        for (int i = 0; i < n; i++) {
            const ox_const *x;
            teeny__ox_in_const(im, i, "inputs", 0, &x);
            size_t len = (size_t)(x->shape.d[ax] * inner) * es;
            if (len)
                memcpy((char *)c.data + at, (const char *)x->data + (size_t)r * len, len);
            at += (int64_t)len;
        }
    return teeny__ox_out_const(im, 0, &c);
}
