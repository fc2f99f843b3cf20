/*
 * fold.c -- the graph-level ops: the shape arithmetic exporters emit
 * around dynamic batches (Shape, Size, Gather, Unsqueeze, Squeeze,
 * Concat, Reshape, Cast, Constant, ConstantOfShape; Slice, Concat and
 * arithmetic in arith.c; comparisons, Mod, Where, Range, If in logic.c)
 * is computed on the host at import for the batch given; Sqrt of
 * constants (SDPA's scale) too;
 * Identity and Dropout (inference) pass their input through; Reshape,
 * Flatten, Squeeze and Unsqueeze of a run-time value become views (no
 * copy) as long as the batch stays the outermost dimension.
 */
#include <math.h>
#include <string.h>

#include "onnx_internal.h"

static const char *const NO_ATTRS[] = {NULL};

/* The input's shape (constant or run-time; a graph input becomes one). */
static teeny_status in_shape(ox_import *im, int i, ox_shape *s, int *idx)
{
    teeny_status st = teeny__ox_in(im, i, idx);
    if (st != TEENY_OK)
        return st;
    if (*idx < 0)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "input %d is missing", i);
    ox_value *v = &im->vals[*idx];
    if (v->kind == OX_INPUT && v->feed && !teeny__ox_is_float((int)v->feed->dtype)) {
        const ox_const *c; /* an integer or bool input given at import: a constant (a padding mask's shape) */
        if ((st = teeny__ox_in_const(im, i, "data", 0, &c)) != TEENY_OK)
            return st;
    }
    if (v->kind == OX_INPUT && (st = teeny__ox_in_runtime(im, i, "data", idx)) != TEENY_OK)
        return st;
    if (v->kind == OX_CONST)
        *s = v->c.shape;
    else if ((v->kind == OX_RUNTIME && !v->is_loss) || v->kind == OX_SIGMOID) /* a deferred Sigmoid: x's shape */
        *s = v->shape;
    else
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "input %d (\"%.80s\") has no known shape here", i, v->name);
    return TEENY_OK;
}

/* A copy of constant c's elements with a new shape (same count). */
static teeny_status const_reshaped(ox_import *im, const ox_const *c, const ox_shape *s, ox_const *out)
{
    teeny_status st = teeny__ox_const_alloc(im, c->type, c->onnx_type, s, out);
    if (st != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    if (out->numel != c->numel) {
        teeny__ox_const_free(out);
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "%lld elements cannot take a shape of %lld", (long long)c->numel,
                       (long long)out->numel);
    }
    if (c->numel)
        memcpy(out->data, c->data, (size_t)c->numel * teeny__ox_esize(c->type));
    return TEENY_OK;
}

/* Output 0 is input 0 with shape s: a folded copy or a view. */
static teeny_status reshaped_out(ox_import *im, int idx, const ox_shape *s)
{
    ox_const c;
    teeny_node n;
    teeny_status st;
    if (im->vals[idx].kind == OX_CONST) {
        if ((st = const_reshaped(im, &im->vals[idx].c, s, &c)) != TEENY_OK)
            return st;
        return teeny__ox_out_const(im, 0, &c);
    }
    if (teeny__ox_numel(s) != teeny__ox_numel(&im->vals[idx].shape))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "%lld elements cannot take a shape of %lld",
                       (long long)teeny__ox_numel(&im->vals[idx].shape), (long long)teeny__ox_numel(s));
    if ((st = teeny__ox_view(im, idx, s, &n)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, n, s);
}

teeny_status teeny__ox_op_identity(ox_import *im)
{
    ox_shape s;
    int idx;
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st == TEENY_OK && (st = teeny__ox_outputs_at_most(im, 1)) == TEENY_OK && (st = in_shape(im, 0, &s, &idx)) == TEENY_OK)
        st = reshaped_out(im, idx, &s);
    return st;
}

/* Dropout at inference: the identity; its optional mask is all true. */
teeny_status teeny__ox_op_dropout(ox_import *im)
{
    static const char *const attrs[] = {"ratio", "is_test", "seed", NULL};
    int64_t is_test = 0, seed;
    int idx, tidx;
    ox_shape s;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st == TEENY_OK && (st = teeny__ox_attr_int(im, "is_test", 0, &is_test)) == TEENY_OK)
        st = teeny__ox_attr_int(im, "seed", 0, &seed);
    if (st != TEENY_OK || (st = teeny__ox_in(im, 2, &tidx)) != TEENY_OK)
        return st;
    if (tidx >= 0) {
        const ox_const *t;
        if ((st = teeny__ox_in_const(im, 2, "training_mode", 0, &t)) != TEENY_OK)
            return st;
        if (t->numel != 1 || teeny__ox_get_i(t, 0))
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "training_mode true: dropout is random; inference only");
    }
    if ((st = in_shape(im, 0, &s, &idx)) != TEENY_OK || (st = reshaped_out(im, idx, &s)) != TEENY_OK)
        return st;
    if (im->node->n_output > 1 && *im->node->output[1]) {
        ox_const mask;
        if ((st = teeny__ox_const_alloc(im, OX_I64, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, &s, &mask)) != TEENY_OK)
            return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
        for (int64_t i = 0; i < mask.numel; i++)
            ((int64_t *)mask.data)[i] = 1;
        return teeny__ox_out_const(im, 1, &mask);
    }
    return teeny__ox_outputs_at_most(im, 2);
}

teeny_status teeny__ox_op_constant(ox_import *im)
{
    static const char *const attrs[] = {"value", "value_float", "value_floats", "value_int", "value_ints", NULL};
    const Onnx__AttributeProto *a;
    ox_const c;
    ox_shape s = {0};
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK)
        return st;
    if (im->node->n_attribute != 1)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "Constant needs exactly one value attribute");
    a = im->node->attribute[0];
    if (!strcmp(a->name, "value")) {
        if (!a->t)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute value holds no tensor");
        if ((st = teeny__ox_tensor_load(im->ctx, a->t, im->dir, "attribute value", &c)) != TEENY_OK)
            return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
        teeny__ox_const_held(im, &c); /* the model's own data, like an initializer */
        return teeny__ox_out_const(im, 0, &c);
    }
    int is_f = !strcmp(a->name, "value_float") || !strcmp(a->name, "value_floats");
    int list = !strcmp(a->name, "value_floats") || !strcmp(a->name, "value_ints");
    size_t n = list ? (is_f ? a->n_floats : a->n_ints) : 1;
    if (list) {
        s.ndim = 1;
        s.d[0] = (int64_t)n;
    }
    if (n > OX_MAX_ELEMS)
        return teeny__ox_fail(im, TEENY_ERR_RANGE, "too many values");
    if ((st = teeny__ox_const_alloc(im, is_f ? OX_F32 : OX_I64, is_f ? 1 : 7, &s, &c)) != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    for (size_t i = 0; i < n; i++) {
        if (is_f)
            ((float *)c.data)[i] = list ? a->floats[i] : a->f;
        else
            ((int64_t *)c.data)[i] = list ? a->ints[i] : a->i;
    }
    return teeny__ox_out_const(im, 0, &c);
}

teeny_status teeny__ox_op_shape(ox_import *im)
{
    static const char *const attrs[] = {"start", "end", NULL};
    int64_t start, end;
    ox_shape s, o = {1, {0}};
    ox_const c;
    int idx;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "start", 0, &start)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "end", INT64_MAX, &end)) != TEENY_OK || (st = in_shape(im, 0, &s, &idx)) != TEENY_OK)
        return st;
    start = start < 0 ? start + s.ndim : start;
    end = end < 0 ? end + s.ndim : end;
    start = start < 0 ? 0 : start > s.ndim ? s.ndim : start;
    end = end < start ? start : end > s.ndim ? s.ndim : end;
    o.d[0] = end - start;
    if ((st = teeny__ox_const_alloc(im, OX_I64, 7, &o, &c)) != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    for (int64_t i = start; i < end; i++)
        ((int64_t *)c.data)[i - start] = s.d[i];
    return teeny__ox_out_const(im, 0, &c);
}

/* Size: the element count of a constant or run-time value (its ONNX
 * shape at the import batch), an int64 scalar. */
teeny_status teeny__ox_op_size(ox_import *im)
{
    ox_shape s, o = {0};
    ox_const c;
    int idx;
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK || (st = in_shape(im, 0, &s, &idx)) != TEENY_OK)
        return st;
    if ((st = teeny__ox_const_alloc(im, OX_I64, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, &o, &c)) != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    *(int64_t *)c.data = teeny__ox_numel(&s);
    return teeny__ox_out_const(im, 0, &c);
}

/* Gather on constants: data[..., indices, ...] along axis. */
teeny_status teeny__ox_fold_gather(ox_import *im)
{
    static const char *const attrs[] = {"axis", NULL};
    const ox_const *data, *ind;
    int64_t axis;
    int ax;
    ox_shape s = {0};
    ox_const c;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "axis", 0, &axis)) != TEENY_OK ||
        (st = teeny__ox_in_const(im, 0, "data", 0, &data)) != TEENY_OK || (st = teeny__ox_in_const(im, 1, "indices", 0, &ind)) != TEENY_OK)
        return st;
    if (data->shape.ndim < 1 || ind->type != OX_I64)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "Gather needs data of rank >= 1 and integer indices");
    if ((st = teeny__ox_axis(im, "axis", axis, data->shape.ndim, &ax)) != TEENY_OK)
        return st;
    if ((st = teeny__ox_rank_ok(im, "the result", data->shape.ndim - 1 + ind->shape.ndim)) != TEENY_OK)
        return st;
    for (int i = 0; i < ax; i++)
        s.d[s.ndim++] = data->shape.d[i];
    for (int i = 0; i < ind->shape.ndim; i++)
        s.d[s.ndim++] = ind->shape.d[i];
    for (int i = ax + 1; i < data->shape.ndim; i++)
        s.d[s.ndim++] = data->shape.d[i];
    if ((st = teeny__ox_const_alloc(im, data->type, data->onnx_type, &s, &c)) != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    int64_t outer = 1, inner = 1, dim = data->shape.d[ax];
    for (int i = 0; i < ax; i++)
        outer *= data->shape.d[i];
    for (int i = ax + 1; i < data->shape.ndim; i++)
        inner *= data->shape.d[i];
    size_t es = teeny__ox_esize(c.type);
    char *dst = c.data;
    int64_t k = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ind->numel; j++) {
            int64_t at = ((const int64_t *)ind->data)[j];
            at = at < 0 ? at + dim : at;
            if (at < 0 || at >= dim) {
                teeny__ox_const_free(&c);
                return teeny__ox_fail(im, TEENY_ERR_FORMAT, "index %lld is outside [-%lld, %lld)",
                               (long long)((const int64_t *)ind->data)[j], (long long)dim, (long long)dim);
            }
            if (inner)
                memcpy(dst + k * es, (const char *)data->data + (size_t)((o * dim + at) * inner) * es,
                       (size_t)inner * es);
            k += inner;
        }
    return teeny__ox_out_const(im, 0, &c);
}

/* The axes of Squeeze/Unsqueeze: attribute before opset 13, input 1 from
 * it; *n -1 when absent. */
static teeny_status axes_of(ox_import *im, int64_t *axes, int *n)
{
    static const char *const attrs[] = {"axes", NULL};
    teeny_status st = teeny__ox_attrs_allowed(im, im->opset < 13 ? attrs : NO_ATTRS);
    int idx;
    const ox_const *c;
    if (st != TEENY_OK)
        return st;
    if (im->opset < 13)
        return teeny__ox_attr_ints(im, "axes", OX_MAX_DIMS, axes, n);
    *n = -1;
    if ((st = teeny__ox_in(im, 1, &idx)) != TEENY_OK || idx < 0)
        return st;
    if ((st = teeny__ox_in_const(im, 1, "axes", 0, &c)) != TEENY_OK)
        return st;
    return teeny__ox_const_ints(im, c, "axes", OX_MAX_DIMS, axes, n);
}

/* Unsqueeze's result: s with a 1 at each of the n axes of o. */
static teeny_status unsqueezed(ox_import *im, const int64_t *axes, int n, const ox_shape *s, ox_shape *o)
{
    int mark[OX_MAX_DIMS] = {0};
    teeny_status st;
    if (n < 1)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "%d axes on rank %d", n, s->ndim);
    if ((st = teeny__ox_rank_ok(im, "the result", (int64_t)s->ndim + n)) != TEENY_OK)
        return st;
    o->ndim = s->ndim + n;
    for (int i = 0; i < n; i++) {
        int ax;
        if ((st = teeny__ox_axis(im, "axis", axes[i], o->ndim, &ax)) != TEENY_OK)
            return st;
        if (mark[ax]++)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "axis %d is given twice", ax);
    }
    for (int i = 0, k = 0; i < o->ndim; i++)
        o->d[i] = mark[i] ? 1 : s->d[k++];
    return TEENY_OK;
}

/* Squeeze's result: s without its n axes (n < 0: without every axis of size 1). */
static teeny_status squeezed(ox_import *im, const int64_t *axes, int n, const ox_shape *s, ox_shape *o)
{
    int mark[OX_MAX_DIMS] = {0};
    teeny_status st;
    for (int i = 0; i < n; i++) {
        int ax;
        if ((st = teeny__ox_axis(im, "axis", axes[i], s->ndim, &ax)) != TEENY_OK)
            return st;
        if (s->d[ax] != 1)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "axis %d has size %lld, not 1", ax, (long long)s->d[ax]);
        mark[ax] = 1;
    }
    for (int i = 0; i < s->ndim; i++)
        if (!(n < 0 ? s->d[i] == 1 : mark[i]))
            o->d[o->ndim++] = s->d[i];
    return TEENY_OK;
}

/* Unsqueeze (un) or Squeeze: the axes, one output, the input's shape, the result reshaped. */
static teeny_status squeeze_op(ox_import *im, int un)
{
    int64_t axes[OX_MAX_DIMS];
    int n, idx;
    ox_shape s, o = {0};
    teeny_status st = axes_of(im, axes, &n);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = in_shape(im, 0, &s, &idx)) != TEENY_OK ||
        (st = (un ? unsqueezed : squeezed)(im, axes, n, &s, &o)) != TEENY_OK)
        return st;
    return reshaped_out(im, idx, &o);
}

teeny_status teeny__ox_op_unsqueeze(ox_import *im)
{
    return squeeze_op(im, 1);
}

teeny_status teeny__ox_op_squeeze(ox_import *im)
{
    return squeeze_op(im, 0);
}

teeny_status teeny__ox_op_reshape(ox_import *im)
{
    static const char *const attrs[] = {"allowzero", NULL};
    int64_t allowzero, want[OX_MAX_DIMS], known = 1;
    int n, idx, infer = -1;
    const ox_const *c;
    ox_shape s, o;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "allowzero", 0, &allowzero)) != TEENY_OK ||
        (st = in_shape(im, 0, &s, &idx)) != TEENY_OK || (st = teeny__ox_in_const(im, 1, "shape", 0, &c)) != TEENY_OK ||
        (st = teeny__ox_const_shape(im, c, "shape", want, &n)) != TEENY_OK)
        return st;
    o.ndim = n;
    for (int i = 0; i < n; i++) {
        o.d[i] = want[i] == 0 && !allowzero ? (i < s.ndim ? s.d[i] : -2) : want[i];
        if (o.d[i] == -1 && infer < 0)
            infer = i;
        else if (o.d[i] < 0)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "shape value %lld at %d", (long long)want[i], i);
        else
            known = o.d[i] && known > OX_MAX_ELEMS / o.d[i] ? OX_MAX_ELEMS + 1LL : known * o.d[i];
    }
    int64_t numel = teeny__ox_numel(&s);
    if (infer >= 0) {
        if (!known || numel % known)
            return teeny__ox_fail(im, TEENY_ERR_SHAPE, "%lld elements do not divide into %lld", (long long)numel,
                           (long long)known);
        o.d[infer] = numel / known;
    }
    return reshaped_out(im, idx, &o);
}

teeny_status teeny__ox_op_flatten(ox_import *im)
{
    static const char *const attrs[] = {"axis", NULL};
    int64_t axis;
    int idx, ax;
    ox_shape s, o = {2, {1, 1}};
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "axis", 1, &axis)) != TEENY_OK ||
        (st = in_shape(im, 0, &s, &idx)) != TEENY_OK)
        return st;
    if ((st = teeny__ox_axis(im, "axis", axis, s.ndim + 1, &ax)) != TEENY_OK)
        return st;
    if (axis < 0 && (st = teeny__ox_axis(im, "axis", axis, s.ndim, &ax)) != TEENY_OK)
        return st;
    for (int i = 0; i < s.ndim; i++)
        o.d[i >= ax] *= s.d[i];
    return reshaped_out(im, idx, &o);
}

teeny_status teeny__ox_op_constant_of_shape(ox_import *im)
{
    static const char *const attrs[] = {"value", NULL};
    const Onnx__AttributeProto *a = teeny__ox_attr(im, "value");
    const ox_const *sc;
    ox_const v = {0}, c;
    ox_shape s;
    int n;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_in_const(im, 0, "shape", 0, &sc)) != TEENY_OK ||
        (st = teeny__ox_const_shape(im, sc, "shape", s.d, &n)) != TEENY_OK)
        return st;
    s.ndim = n;
    if (a && (!a->t || (st = teeny__ox_tensor_load(im->ctx, a->t, NULL, "attribute value", &v)) != TEENY_OK))
        return teeny__ox_fail(im, a->t ? st : TEENY_ERR_FORMAT, "%s", a->t ? teeny_last_error(im->ctx) : "value: no tensor");
    if (a && v.numel != 1) {
        teeny__ox_const_free(&v);
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute value must hold one element");
    }
    st = teeny__ox_const_alloc(im, a ? v.type : OX_F32, a ? v.onnx_type : 1, &s, &c);
    for (int64_t i = 0; st == TEENY_OK && a && i < c.numel; i++) /* no value: zeros, as allocated */
        memcpy((char *)c.data + i * teeny__ox_esize(c.type), v.data, teeny__ox_esize(c.type));
    teeny__ox_const_free(&v);
    if (st != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    return teeny__ox_out_const(im, 0, &c);
}

/* Input 0 cast to ONNX type to (Cast's attribute, CastLike's target's type). */
static teeny_status cast_to(ox_import *im, int64_t to)
{
    int idx;
    ox_const c;
    teeny_status st = teeny__ox_in(im, 0, &idx);
    if (st != TEENY_OK)
        return st;
    int to_f = teeny__ox_is_float((int)to), to_half = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    if (!to_f && (to < 2 || to > 13 || to == 8 || to == 11))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute to=%s", teeny__ox_type_name((int)to));
    const ox_const *in;
    if (idx >= 0 && im->vals[idx].kind != OX_CONST && (im->vals[idx].kind == OX_RUNTIME || !im->vals[idx].feed ||
                                                      teeny__ox_is_float((int)im->vals[idx].feed->dtype))) {
        ox_shape s; /* a run-time value: float or float16 to float or float16 only */
        teeny_node y;
        char buf[TEENY__NAME_CAP];
        if (!to_f)
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "casting a run-time value to %s", teeny__ox_type_name((int)to));
        if ((st = in_shape(im, 0, &s, &idx)) != TEENY_OK)
            return st;
        if (im->vals[idx].is_i32)
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "casting labels to %s", teeny__ox_type_name((int)to));
        if (!to_half) /* to float: every value held is an fp32 already (a float16 one exactly) */
            return reshaped_out(im, idx, &s);
        /* to float16: storage stays fp32, the values round to half as ONNX Runtime's do */
        if ((st = teeny_graph_activation(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), im->vals[idx].node,
                                         TEENY_ACT_ROUND_HALF, &y)) != TEENY_OK)
            return teeny__ox_graph_fail(im, st);
        return teeny__ox_out_runtime(im, 0, y, &s);
    }
    if ((st = teeny__ox_in_const(im, 0, "input", 0, &in)) != TEENY_OK)
        return st;
    if ((st = teeny__ox_const_alloc(im, to_f ? OX_F32 : OX_I64, (int)to, &in->shape, &c)) != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    for (int64_t i = 0; i < c.numel; i++) {
        if (to_half) /* via fp32: a double rounds to fp32, then to half (ONNX Runtime's double cast too) */
            ((float *)c.data)[i] = teeny_round_half((float)teeny__ox_get_f(in, i));
        else if (to_f)
            ((float *)c.data)[i] = (float)teeny__ox_get_f(in, i);
        else if (to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL)
            ((int64_t *)c.data)[i] = teeny__ox_get_f(in, i) != 0.0;
        else if (in->type == OX_F32 && !(teeny__ox_get_f(in, i) > -9.2e18 && teeny__ox_get_f(in, i) < 9.2e18)) {
            teeny__ox_const_free(&c);
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "casting %g to an integer", teeny__ox_get_f(in, i));
        } else
            ((int64_t *)c.data)[i] = teeny__ox_get_i(in, i);
    }
    return teeny__ox_out_const(im, 0, &c);
}

teeny_status teeny__ox_op_cast(ox_import *im)
{
    static const char *const attrs[] = {"to", "saturate", NULL};
    int64_t to;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "to", 0, &to)) != TEENY_OK)
        return st;
    return cast_to(im, to);
}

/* CastLike: Cast to target_type's element type, which must be known at
 * import: a constant's, or a graph input's declared type (or its feed's);
 * a value computed at run time is float or float16 alike here, refused. */
teeny_status teeny__ox_op_castlike(ox_import *im)
{
    static const char *const attrs[] = {"saturate", NULL};
    int like;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_in_present(im, 1, "target_type", &like)) != TEENY_OK)
        return st;
    const ox_value *v = &im->vals[like];
    int to = v->kind == OX_CONST ? v->c.onnx_type : teeny__ox_declared_type(v);
    if (!to && v->kind == OX_INPUT && v->feed)
        to = (int)v->feed->dtype;
    if (!to)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "input 1 (target_type) \"%.80s\" is computed at run time: its "
                              "element type is not known at import", v->name);
    return cast_to(im, to);
}

/* Sqrt of a float constant (the scale PyTorch's scaled_dot_product_attention
 * export computes from the head size); of a run-time value, unsupported. */
teeny_status teeny__ox_op_sqrt(ox_import *im)
{
    const ox_const *in;
    ox_const c;
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = teeny__ox_in_const(im, 0, "X", 0, &in)) != TEENY_OK)
        return st;
    if (in->type != OX_F32)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "Sqrt of %s", teeny__ox_type_name(in->onnx_type));
    if ((st = teeny__ox_const_alloc(im, OX_F32, in->onnx_type, &in->shape, &c)) != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    for (int64_t i = 0; i < c.numel; i++)
        ((float *)c.data)[i] = sqrtf(((const float *)in->data)[i]);
    return teeny__ox_out_const(im, 0, &c);
}
