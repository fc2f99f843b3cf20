/*
 * ops_layout.c -- the ONNX layout ops on run-time values: Slice, Split,
 * Gather (constant indices), Expand, Pad (constant mode) and Concat
 * (Transpose: transpose.c), each a graph layout node (copies; Reshape, Squeeze,
 * Unsqueeze and Flatten stay views, fold.c). Slice, Gather and Concat
 * of constants fold (arith.c, fold.c).
 */
#include <string.h>

#include "onnx_internal.h"

static const char *const NO_ATTRS[] = {NULL};

/* ---- layout ---- */

/* Whether input i is a constant (or absent). */
static int is_const(ox_import *im, int i)
{
    int idx;
    return teeny__ox_in(im, i, &idx) == TEENY_OK && (idx < 0 || im->vals[idx].kind == OX_CONST);
}

/* An ONNX slice (first index b, step, length len per axis) as the graph's
 * slice parameters, whatever the sign of the step. */
static teeny_slice_params slice_of(int ndim, const int64_t *b, const int64_t *step, const ox_shape *o)
{
    teeny_slice_params p = TEENY_SLICE_PARAMS_INIT;
    for (int d = 0; d < ndim; d++) {
        int64_t last = b[d] + (o->d[d] - 1) * step[d];
        p.start[d] = b[d];
        p.step[d] = step[d];
        p.end[d] = step[d] > 0 ? last + 1 : last - 1 < 0 ? INT64_MIN : last - 1;
    }
    return p;
}

teeny_status teeny__ox_op_slice(ox_import *im)
{
    int64_t start[OX_MAX_DIMS], step[OX_MAX_DIMS];
    teeny_node x, y;
    ox_shape s, o;
    char buf[TEENY__NAME_CAP];
    if (is_const(im, 0))
        return teeny__ox_fold_slice(im);
    teeny_status st = teeny__ox_outputs_at_most(im, 1);
    if (st != TEENY_OK || (st = teeny__ox_operand(im, 0, "data", &x, &s)) != TEENY_OK ||
        (st = teeny__ox_slice_params(im, s.ndim, start, step, &o, &s)) != TEENY_OK)
        return st;
    if (teeny__ox_numel(&o) == 0)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "an empty result");
    teeny_slice_params p = slice_of(s.ndim, start, step, &o);
    if ((st = teeny_graph_slice(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x, &p, &y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    return teeny__ox_out_runtime(im, 0, y, &o);
}

/* Split: slices along the axis, sizes from the split attribute (before
 * opset 13) or input, else num_outputs (opset 18) or the output count. */
teeny_status teeny__ox_op_split(ox_import *im)
{
    static const char *const attrs[] = {"axis", "split", "num_outputs", NULL};
    int64_t axis, sizes[64], num;
    int n = -1, idx, ax, outs = (int)im->node->n_output;
    teeny_node x, y;
    ox_shape s;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "axis", 0, &axis)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "num_outputs", 0, &num)) != TEENY_OK ||
        (st = teeny__ox_attr_ints(im, "split", 64, sizes, &n)) != TEENY_OK || (st = teeny__ox_in(im, 1, &idx)) != TEENY_OK)
        return st;
    if (idx >= 0) {
        const ox_const *c;
        if ((st = teeny__ox_in_const(im, 1, "split", 1, &c)) != TEENY_OK ||
            (st = teeny__ox_const_ints(im, c, "split", 64, sizes, &n)) != TEENY_OK)
            return st;
    }
    if ((st = teeny__ox_operand(im, 0, "input", &x, &s)) != TEENY_OK || (st = teeny__ox_axis(im, "axis", axis, s.ndim, &ax)) != TEENY_OK)
        return st;
    if (num != 0 && (n >= 0 || num != outs))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, n >= 0 ? "num_outputs=%lld beside split sizes (%d outputs)"
                              : "num_outputs=%lld for %d outputs", (long long)num, outs);
    if (outs < 1 || outs > 64 || (n >= 0 && n != outs))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "%d outputs for %d split sizes", outs, n);
    if (n < 0) { /* equal parts, the last smaller (num_outputs) */
        int64_t part = (s.d[ax] + outs - 1) / outs;
        for (int i = 0; i < outs; i++)
            sizes[i] = i < outs - 1 ? part : s.d[ax] - part * (outs - 1);
    }
    int64_t at = 0;
    for (int i = 0; i < outs; i++) {
        if (sizes[i] < 1 || at + sizes[i] > s.d[ax])
            return teeny__ox_fail(im, sizes[i] < 0 || at + sizes[i] > s.d[ax] ? TEENY_ERR_FORMAT : TEENY_ERR_UNSUPPORTED,
                                  "split size %lld at %lld of %lld (empty outputs are not supported)",
                                  (long long)sizes[i], (long long)at, (long long)s.d[ax]);
        at += sizes[i];
    }
    if (at != s.d[ax])
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "the split sizes sum to %lld, not %lld", (long long)at, (long long)s.d[ax]);
    at = 0;
    for (int i = 0; i < outs; at += sizes[i++]) {
        teeny_slice_params p = TEENY_SLICE_PARAMS_INIT;
        ox_shape o = s;
        if (!*im->node->output[i])
            continue;
        p.start[ax] = at;
        p.end[ax] = at + sizes[i];
        o.d[ax] = sizes[i];
        if ((st = teeny_graph_slice(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x, &p, &y)) != TEENY_OK)
            return teeny__ox_graph_fail(im, st);
        if ((st = teeny__ox_out_runtime(im, i, y, &o)) != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}

/* Gather of a run-time value at constant indices (negative ones counted
 * from the end). */
teeny_status teeny__ox_op_gather(ox_import *im)
{
    static const char *const attrs[] = {"axis", NULL};
    int64_t axis;
    int ax;
    const ox_const *ind;
    teeny_node x, y;
    ox_shape s, o = {0};
    char buf[TEENY__NAME_CAP];
    if (is_const(im, 0))
        return teeny__ox_fold_gather(im);
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "axis", 0, &axis)) != TEENY_OK ||
        (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK || (st = teeny__ox_operand(im, 0, "data", &x, &s)) != TEENY_OK ||
        (st = teeny__ox_in_const(im, 1, "indices", 0, &ind)) != TEENY_OK ||
        (st = teeny__ox_axis(im, "axis", axis, s.ndim, &ax)) != TEENY_OK)
        return st;
    if (ind->type != OX_I64 || ind->numel < 1 || ind->shape.ndim > TEENY_MAX_DIMS)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "indices must be a non-empty integer tensor of rank 0..5");
    int32_t *v = teeny__malloc((size_t)ind->numel * sizeof *v);
    if (!v)
        return teeny__ox_fail(im, TEENY_ERR_NOMEM, "out of host memory");
    for (int64_t k = 0; k < ind->numel; k++) {
        int64_t at = ((const int64_t *)ind->data)[k];
        at = at < 0 ? at + s.d[ax] : at;
        if (at < 0 || at >= s.d[ax]) {
            teeny__free(v);
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "index %lld is outside [-%lld, %lld)",
                                  (long long)((const int64_t *)ind->data)[k], (long long)s.d[ax], (long long)s.d[ax]);
        }
        v[k] = (int32_t)at;
    }
    ox_shape is = ind->shape.ndim ? ind->shape : (ox_shape){1, {1}};
    if ((st = teeny__ox_rank_ok(im, "the result", s.ndim - 1 + ind->shape.ndim)) != TEENY_OK) {
        teeny__free(v);
        return st;
    }
    for (int d = 0; d < s.ndim; d++)
        for (int j = 0; j < (d == ax ? ind->shape.ndim : 1); j++)
            o.d[o.ndim++] = d == ax ? ind->shape.d[j] : s.d[d];
    st = teeny_graph_gather(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x, ax, is.ndim, is.d, v, &y);
    teeny__free(v);
    if (st != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    ox_shape g;
    if ((st = teeny__ox_node_shape(im, y, &g)) != TEENY_OK || (st = teeny__ox_view_node(im, y, &g, &o, &y)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, y, &o);
}

/* Expand's result shape o from input shape s and its constant shape c. */
static teeny_status expand_shape(ox_import *im, const ox_const *c, const ox_shape *s, ox_shape *o)
{
    ox_shape t;
    int n;
    teeny_status st = teeny__ox_const_shape(im, c, "shape", t.d, &n);
    if (st != TEENY_OK)
        return st;
    t.ndim = n;
    if (!teeny__ox_broadcast(s, &t, o))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "the input and the shape do not broadcast");
    return TEENY_OK;
}

/* Expand of a constant: folded. */
static teeny_status expand_const(ox_import *im)
{
    const ox_const *x, *c;
    ox_const r;
    ox_shape o;
    teeny_status st = teeny__ox_in_const(im, 0, "input", 0, &x);
    if (st != TEENY_OK || (st = teeny__ox_in_const(im, 1, "shape", 0, &c)) != TEENY_OK ||
        (st = expand_shape(im, c, &x->shape, &o)) != TEENY_OK)
        return st;
    if ((st = teeny__ox_const_alloc(im, x->type, x->onnx_type, &o, &r)) != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    size_t es = teeny__ox_esize(x->type);
    for (int64_t k = 0; k < r.numel; k++)
        memcpy((char *)r.data + (size_t)k * es, (const char *)x->data + (size_t)teeny__ox_bcast_index(&o, &x->shape, k) * es,
               es);
    return teeny__ox_out_const(im, 0, &r);
}

teeny_status teeny__ox_op_expand(ox_import *im)
{
    const ox_const *c;
    teeny_node x, y;
    ox_shape s, o;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK)
        return st;
    int xi;
    if ((st = teeny__ox_in_present(im, 0, "input", &xi)) != TEENY_OK)
        return st;
    /* folded (Swin's mask arithmetic), but for a float initializer of rank
     * <= 5: a graph constant expanded, no folded copy in the budget */
    const ox_value *xv = &im->vals[xi];
    if (xv->kind == OX_CONST && (xv->c.type != OX_F32 || !xv->is_initializer || xv->c.shape.ndim > TEENY_MAX_DIMS))
        return expand_const(im);
    if ((st = teeny__ox_operand(im, 0, "input", &x, &s)) != TEENY_OK || (st = teeny__ox_in_const(im, 1, "shape", 0, &c)) != TEENY_OK ||
        (st = expand_shape(im, c, &s, &o)) != TEENY_OK)
        return st;
    if (o.ndim == 0 || o.ndim > TEENY_MAX_DIMS || teeny__ox_numel(&o) < 1)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "a result of rank %d, %lld elements", o.ndim,
                              (long long)teeny__ox_numel(&o));
    if ((st = teeny_graph_expand(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x, o.ndim, o.d, &y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    return teeny__ox_out_runtime(im, 0, y, &o);
}

/* Pad, constant mode: pads (and the value) from attributes before opset
 * 11, constant inputs after (axes from opset 18). */
teeny_status teeny__ox_op_pad(ox_import *im)
{
    static const char *const old_attrs[] = {"mode", "pads", "paddings", "value", NULL}, *const attrs[] = {"mode", NULL};
    int64_t pads[2 * OX_MAX_DIMS], axes[OX_MAX_DIMS], lo[TEENY_MAX_DIMS] = {0}, hi[TEENY_MAX_DIMS] = {0};
    int n = -1, n_axes = -1, idx;
    float value = 0.0f;
    char mode[16];
    teeny_node x, y;
    ox_shape s;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, im->opset < 11 ? old_attrs : attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_string(im, "mode", "constant", mode, sizeof mode)) != TEENY_OK ||
        (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK)
        return st;
    if (strcmp(mode, "constant"))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute mode=%s (supported: constant)", mode);
    if ((st = teeny__ox_operand(im, 0, "data", &x, &s)) != TEENY_OK)
        return st;
    if (im->opset < 11) {
        if ((st = teeny__ox_attr_ints(im, "pads", 2 * OX_MAX_DIMS, pads, &n)) != TEENY_OK ||
            (n < 0 && (st = teeny__ox_attr_ints(im, "paddings", 2 * OX_MAX_DIMS, pads, &n)) != TEENY_OK) ||
            (st = teeny__ox_attr_float(im, "value", 0.0f, &value)) != TEENY_OK)
            return st;
    } else {
        const ox_const *c;
        if ((st = teeny__ox_in_const(im, 1, "pads", 0, &c)) != TEENY_OK ||
            (st = teeny__ox_const_ints(im, c, "pads", 2 * OX_MAX_DIMS, pads, &n)) != TEENY_OK)
            return st;
        if ((st = teeny__ox_in(im, 2, &idx)) == TEENY_OK && idx >= 0) {
            if ((st = teeny__ox_in_const(im, 2, "constant_value", 1, &c)) != TEENY_OK)
                return st;
            if (c->numel != 1 || c->type != OX_F32)
                return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "constant_value must be one float");
            value = ((const float *)c->data)[0];
        }
        if (st == TEENY_OK && (st = teeny__ox_in(im, 3, &idx)) == TEENY_OK && idx >= 0 &&
            ((st = teeny__ox_in_const(im, 3, "axes", 0, &c)) != TEENY_OK ||
             (st = teeny__ox_const_ints(im, c, "axes", OX_MAX_DIMS, axes, &n_axes)) != TEENY_OK))
            return st;
        if (st != TEENY_OK)
            return st;
    }
    int k = n_axes >= 0 ? n_axes : s.ndim;
    if (n != 2 * k)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "pads has %d values for %d axes", n, k);
    ox_shape o = s;
    for (int i = 0; i < k; i++) {
        int ax = i;
        if (n_axes >= 0 && (st = teeny__ox_axis(im, "axis", axes[i], s.ndim, &ax)) != TEENY_OK)
            return st;
        int64_t both;
        lo[ax] = pads[i];
        hi[ax] = pads[i + k];
        if (!teeny__add_i64(pads[i], pads[i + k], &both) || !teeny__add_i64(o.d[ax], both, &o.d[ax]))
            o.d[ax] = -1; /* pads that far pass int32: teeny_graph_pad refuses them, naming the axis */
    }
    if ((st = teeny_graph_pad(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x, lo, hi, value, &y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    return teeny__ox_out_runtime(im, 0, y, &o);
}

/* Concat: of constants folded (arith.c), along channels the concat node,
 * along any other axis the concat_axis node. */
teeny_status teeny__ox_op_concat(ox_import *im)
{
    static const char *const attrs[] = {"axis", NULL};
    int64_t axis;
    int n = teeny__ox_n_in(im), all_const = 1, ax, xi;
    teeny_node xs[64], y;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "axis", im->opset < 4 ? 1 : INT64_MAX, &axis)) != TEENY_OK)
        return st;
    if (axis == INT64_MAX)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute axis is missing");
    for (int i = 0; i < n && all_const; i++)
        all_const = (st = teeny__ox_in(im, i, &xi)) == TEENY_OK && xi >= 0 && im->vals[xi].kind == OX_CONST;
    if (st != TEENY_OK || n < 1)
        return st != TEENY_OK ? st : teeny__ox_fail(im, TEENY_ERR_FORMAT, "no inputs");
    if (all_const)
        return teeny__ox_fold_concat(im, (int)(axis < INT32_MIN || axis > INT32_MAX ? INT32_MAX : axis));
    if (n > 64)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "%d inputs (at most 64)", n);
    ox_shape s, first;
    for (int i = 0; i < n; i++) {
        if ((st = teeny__ox_operand(im, i, "inputs", &xs[i], &s)) != TEENY_OK)
            return st;
        if (!i)
            first = s;
        if (s.ndim != first.ndim)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "inputs differ in rank");
    }
    if ((st = teeny__ox_axis(im, "axis", axis, first.ndim, &ax)) != TEENY_OK)
        return st;
    st = ax == 1 ? teeny_graph_concat(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), n, xs, &y)
                 : teeny_graph_concat_axis(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), ax, n, xs, &y);
    if (st != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    if ((st = teeny__ox_node_shape(im, y, &s)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, y, &s);
}
