/*
 * ops_a.c -- group A's ONNX ops (phase 2), through the public graph
 * builders: the activations (Relu, Sigmoid, Tanh, HardSigmoid, HardSwish,
 * LeakyRelu, Gelu, Clip, Mish, Erf; x * Sigmoid(x) stays one SiLU node),
 * Add/Sub/Mul/Div/Pow and Sum with NumPy broadcasting (two constants
 * fold; one constant operand becomes a graph constant), and Concat (of
 * constants folded, along channels the concat node, along any other axis
 * the concat_axis node). Attribute values the ops cannot compute are
 * refused, naming the attribute.
 */
#include <string.h>

#include "onnx_internal.h"

static const char *const NO_ATTRS[] = {NULL};

static teeny_status graph_err(ox_import *im, teeny_status st)
{
    return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
}

/* ---- operands ---- */

/* Constant value idx as a graph constant (made once; a scalar is [1]). */
static teeny_status const_node(ox_import *im, int idx)
{
    ox_value *v = &im->vals[idx];
    char buf[TEENY__NAME_CAP];
    if (v->node >= 0)
        return TEENY_OK;
    if (v->c.type != OX_F32)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "constant \"%.80s\" is %s; a run-time operand here is float",
                              v->name, teeny__ox_type_name(v->c.onnx_type));
    if (v->c.shape.ndim > TEENY_MAX_DIMS || v->c.numel < 1)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "constant \"%.80s\" of rank %d and %lld elements (supported: "
                              "rank 0..5, not empty)", v->name, v->c.shape.ndim, (long long)v->c.numel);
    ox_shape s = v->c.shape.ndim ? v->c.shape : (ox_shape){1, {1}};
    teeny_status st = teeny_graph_constant(im->g, teeny__ox_name_prefer(im, v->name, buf, sizeof buf), s.ndim, s.d,
                                           v->c.data, &v->node);
    return st != TEENY_OK ? graph_err(im, st) : TEENY_OK;
}

/* Input i as a graph node and its ONNX shape: a run-time value, or a
 * float constant as a graph constant. */
teeny_status teeny__ox_operand(ox_import *im, int i, const char *what, teeny_node *n, ox_shape *s)
{
    int idx;
    teeny_status st = teeny__ox_in(im, i, &idx);
    if (st != TEENY_OK)
        return st;
    if (idx < 0)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "input %d (%s) is missing", i, what);
    if (im->vals[idx].kind == OX_CONST) {
        if ((st = const_node(im, idx)) != TEENY_OK)
            return st;
    } else if ((st = teeny__ox_in_runtime(im, i, what, &idx)) != TEENY_OK) {
        return st;
    }
    *n = im->vals[idx].node;
    *s = im->vals[idx].kind == OX_CONST ? im->vals[idx].c.shape : im->vals[idx].shape;
    return TEENY_OK;
}

/* ---- activations ---- */

/* Clip's bounds: attributes before opset 11, optional constant inputs after. */
static teeny_status clip_bounds(ox_import *im, teeny_act_params *p)
{
    static const char *const attrs[] = {"min", "max", NULL};
    teeny_status st = teeny__ox_attrs_allowed(im, im->opset < 11 ? attrs : NO_ATTRS);
    if (st != TEENY_OK)
        return st;
    if (im->opset < 11) {
        if ((st = teeny__ox_attr_float(im, "min", p->alpha, &p->alpha)) == TEENY_OK)
            st = teeny__ox_attr_float(im, "max", p->beta, &p->beta);
        return st;
    }
    for (int i = 1; i <= 2; i++) {
        int idx;
        const ox_const *c;
        if ((st = teeny__ox_in(im, i, &idx)) != TEENY_OK || idx < 0)
            continue;
        if ((st = teeny__ox_in_const(im, i, i == 1 ? "min" : "max", 1, &c)) != TEENY_OK)
            return st;
        if (c->numel != 1 || c->type != OX_F32)
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "%s must be one float", i == 1 ? "min" : "max");
        *(i == 1 ? &p->alpha : &p->beta) = ((const float *)c->data)[0];
    }
    return st;
}

/* The op's activation and parameters from its attributes. */
static teeny_status act_of(ox_import *im, teeny_act_params *p)
{
    static const struct {
        const char *op;
        teeny_act act;
        const char *attrs[3];
    } acts[] = {
        {"Relu", TEENY_ACT_RELU, {NULL}},          {"Tanh", TEENY_ACT_TANH, {NULL}},
        {"HardSigmoid", TEENY_ACT_HARDSIGMOID, {"alpha", "beta", NULL}},
        {"HardSwish", TEENY_ACT_HARDSWISH, {NULL}}, {"LeakyRelu", TEENY_ACT_LEAKY_RELU, {"alpha", NULL}},
        {"Gelu", TEENY_ACT_GELU, {"approximate", NULL}}, {"Clip", TEENY_ACT_CLIP, {NULL}},
        {"Mish", TEENY_ACT_MISH, {NULL}},           {"Erf", TEENY_ACT_ERF, {NULL}},
    };
    const char *op = im->node->op_type;
    size_t k = 0;
    while (strcmp(acts[k].op, op))
        k++; /* the handler is only registered for these */
    *p = teeny_act_defaults(acts[k].act);
    if (p->act == TEENY_ACT_CLIP)
        return clip_bounds(im, p);
    teeny_status st = teeny__ox_attrs_allowed(im, acts[k].attrs);
    if (st == TEENY_OK && p->act != TEENY_ACT_GELU && p->act != TEENY_ACT_TANH && acts[k].attrs[0])
        st = teeny__ox_attr_float(im, "alpha", p->alpha, &p->alpha);
    if (st == TEENY_OK && p->act == TEENY_ACT_HARDSIGMOID)
        st = teeny__ox_attr_float(im, "beta", p->beta, &p->beta);
    if (st == TEENY_OK && p->act == TEENY_ACT_GELU) {
        char approx[16];
        if ((st = teeny__ox_attr_string(im, "approximate", "none", approx, sizeof approx)) != TEENY_OK)
            return st;
        if (!strcmp(approx, "tanh"))
            p->act = TEENY_ACT_GELU_TANH;
        else if (strcmp(approx, "none"))
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute approximate=%s", approx);
    }
    return st;
}

teeny_status teeny__ox_op_act(ox_import *im)
{
    teeny_act_params p;
    teeny_node x, y;
    ox_shape s;
    char buf[TEENY__NAME_CAP];
    teeny_status st = act_of(im, &p);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = teeny__ox_operand(im, 0, "X", &x, &s)) != TEENY_OK)
        return st;
    if ((st = teeny_graph_activation_ex(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x, &p, &y)) != TEENY_OK)
        return graph_err(im, st);
    return teeny__ox_out_runtime(im, 0, y, &s);
}

/* Sigmoid(x) waits for its consumer: Mul(x, Sigmoid(x)) becomes SiLU, any
 * other use a sigmoid node (values.c, when it is taken as a run-time input). */
teeny_status teeny__ox_op_sigmoid(ox_import *im)
{
    int xi, yi;
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = teeny__ox_in_runtime(im, 0, "X", &xi)) != TEENY_OK || !*im->node->output[0])
        return st;
    if ((st = teeny__ox_define(im, im->node->output[0], OX_SIGMOID, &yi)) != TEENY_OK)
        return st;
    im->vals[yi].sigmoid_of = xi;
    return TEENY_OK;
}

/* ---- arithmetic ---- */

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

/* y = a op b through the graph, a and b nodes of ONNX shapes as, bs. */
static teeny_status binary_node(ox_import *im, teeny_binary_op op, teeny_node a, const ox_shape *as, teeny_node b,
                                const ox_shape *bs, teeny_node *y, ox_shape *ys)
{
    char buf[TEENY__NAME_CAP];
    if (!teeny__ox_broadcast(as, bs, ys))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "the operands' shapes do not broadcast");
    teeny_status st = teeny_graph_binary(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), op, a, b, y);
    return st != TEENY_OK ? graph_err(im, st) : TEENY_OK;
}

/* Opset < 7's broadcast=1 with axis: b aligned at axis of a; taken where
 * that is NumPy's alignment (b's last dimension at a's last). */
static teeny_status legacy_broadcast(ox_import *im, const ox_shape *as, const ox_shape *bs)
{
    static const char *const old_attrs[] = {"broadcast", "axis", NULL};
    int64_t bc, axis;
    teeny_status st = teeny__ox_attrs_allowed(im, old_attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "broadcast", 0, &bc)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "axis", as->ndim - bs->ndim, &axis)) != TEENY_OK)
        return st;
    if (!bc && (as->ndim != bs->ndim || memcmp(as->d, bs->d, sizeof(int64_t) * (size_t)as->ndim)))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "operands of different shapes without broadcast=1");
    if (bc && axis != as->ndim - bs->ndim)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute axis=%lld (supported: B aligned at A's last "
                              "dimension)", (long long)axis);
    return TEENY_OK;
}

teeny_status teeny__ox_op_binary(ox_import *im)
{
    static const char *const names[] = {"Add", "Sub", "Mul", "Div", "Pow"};
    int ai, bi, op = 0;
    teeny_node a, b, y;
    ox_shape as, bs, ys;
    while (strcmp(names[op], im->node->op_type))
        op++;
    teeny_status st = teeny__ox_outputs_at_most(im, 1);
    if (st != TEENY_OK || (st = teeny__ox_in(im, 0, &ai)) != TEENY_OK || (st = teeny__ox_in(im, 1, &bi)) != TEENY_OK)
        return st;
    if (ai < 0 || bi < 0)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "two inputs are needed");
    if (im->opset >= 7 && (st = teeny__ox_attrs_allowed(im, NO_ATTRS)) != TEENY_OK)
        return st;
    if (im->vals[ai].kind == OX_CONST && im->vals[bi].kind == OX_CONST)
        return teeny__ox_fold_binary(im, &im->vals[ai].c, &im->vals[bi].c);
    for (int k = 0; k < 2 && op == TEENY_BINARY_MUL; k++) { /* x * Sigmoid(x): SiLU */
        int s = k ? bi : ai, x = k ? ai : bi;
        char buf[TEENY__NAME_CAP];
        if (im->vals[s].kind == OX_SIGMOID && im->vals[s].sigmoid_of == x) {
            if ((st = teeny_graph_activation(im->g, teeny__ox_name(im, "silu", buf, sizeof buf), im->vals[x].node,
                                             TEENY_ACT_SILU, &y)) != TEENY_OK)
                return graph_err(im, st);
            return teeny__ox_out_runtime(im, 0, y, &im->vals[x].shape);
        }
    }
    if ((st = teeny__ox_operand(im, 0, "A", &a, &as)) != TEENY_OK || (st = teeny__ox_operand(im, 1, "B", &b, &bs)) != TEENY_OK)
        return st;
    if (im->opset < 7 && (st = legacy_broadcast(im, &as, &bs)) != TEENY_OK)
        return st;
    if ((st = binary_node(im, (teeny_binary_op)op, a, &as, b, &bs, &y, &ys)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, y, &ys);
}

teeny_status teeny__ox_op_sum(ox_import *im)
{
    int n = teeny__ox_n_in(im);
    teeny_node acc, x;
    ox_shape s, xs;
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = teeny__ox_operand(im, 0, "data_0", &acc, &s)) != TEENY_OK)
        return st;
    if (n == 1) { /* the identity: a view keeps one node per value */
        teeny_node v;
        return (st = teeny__ox_view_node(im, acc, &s, &s, &v)) == TEENY_OK ? teeny__ox_out_runtime(im, 0, v, &s) : st;
    }
    for (int i = 1; i < n; i++) {
        ox_shape o;
        if ((st = teeny__ox_operand(im, i, "data", &x, &xs)) != TEENY_OK ||
            (st = binary_node(im, TEENY_BINARY_ADD, acc, &s, x, &xs, &acc, &o)) != TEENY_OK)
            return st;
        s = o;
    }
    return teeny__ox_out_runtime(im, 0, acc, &s);
}

/* ---- reductions ---- */

/* ReduceSum / ReduceMean: axes from the attribute (before opset 13 /
 * 18) or a constant input; none: all (or, with noop_with_empty_axes, the
 * identity). */
teeny_status teeny__ox_op_reduce(ox_import *im)
{
    static const char *const attrs[] = {"axes", "keepdims", "noop_with_empty_axes", NULL};
    int mean = !strcmp(im->node->op_type, "ReduceMean"), n = -1, idx;
    int64_t axes[OX_MAX_DIMS], keepdims, noop;
    teeny_node x, y;
    ox_shape s, o = {0};
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "keepdims", 1, &keepdims)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "noop_with_empty_axes", 0, &noop)) != TEENY_OK ||
        (st = teeny__ox_attr_ints(im, "axes", OX_MAX_DIMS, axes, &n)) != TEENY_OK ||
        (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK || (st = teeny__ox_in(im, 1, &idx)) != TEENY_OK)
        return st;
    if (idx >= 0) {
        const ox_const *c;
        if (n >= 0)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "axes given as attribute and input");
        if ((st = teeny__ox_in_const(im, 1, "axes", 0, &c)) != TEENY_OK ||
            (st = teeny__ox_const_ints(im, c, "axes", OX_MAX_DIMS, axes, &n)) != TEENY_OK)
            return st;
    }
    if ((st = teeny__ox_operand(im, 0, "data", &x, &s)) != TEENY_OK)
        return st;
    unsigned mask = 0;
    for (int i = 0; i < n; i++) {
        int ax;
        if ((st = teeny__ox_axis(im, "axis", axes[i], s.ndim, &ax)) != TEENY_OK)
            return st;
        mask |= 1u << ax;
    }
    if (n <= 0 && noop) { /* the identity */
        if ((st = teeny__ox_view_node(im, x, &s, &s, &y)) != TEENY_OK)
            return st;
        return teeny__ox_out_runtime(im, 0, y, &s);
    }
    if (n <= 0)
        mask = s.ndim ? (1u << s.ndim) - 1 : 1;
    for (int d = 0; d < s.ndim; d++)
        if (!(mask & (1u << d)) || keepdims)
            o.d[o.ndim++] = mask & (1u << d) ? 1 : s.d[d];
    teeny_reduce_params p = {s.ndim ? mask : 1, keepdims != 0, mean};
    if ((st = teeny_graph_reduce(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x, &p, &y)) != TEENY_OK)
        return graph_err(im, st);
    return teeny__ox_out_runtime(im, 0, y, &o);
}

/* ---- softmax, layer norm ---- */

/* Softmax / LogSoftmax: along axis (opset >= 13, default -1), or before
 * opset 13 over the input flattened to 2-D at axis (default 1). */
teeny_status teeny__ox_op_softmax(ox_import *im)
{
    static const char *const attrs[] = {"axis", NULL};
    int64_t axis;
    int ax, log_out = !strcmp(im->node->op_type, "LogSoftmax");
    teeny_node x, y;
    ox_shape s;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "axis", im->opset < 13 ? 1 : -1, &axis)) != TEENY_OK ||
        (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK || (st = teeny__ox_operand(im, 0, "input", &x, &s)) != TEENY_OK)
        return st;
    if (s.ndim < 1)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "a scalar input");
    if ((st = teeny__ox_axis(im, "axis", axis, s.ndim, &ax)) != TEENY_OK)
        return st;
    ox_shape flat = {2, {1, 1}};
    for (int d = 0; d < s.ndim; d++)
        flat.d[d >= ax] *= s.d[d];
    int coerce = im->opset < 13 && ax != s.ndim - 1;
    if (coerce && (st = teeny__ox_view_node(im, x, &s, &flat, &x)) != TEENY_OK)
        return st;
    if ((st = teeny_graph_softmax(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x, coerce ? 1 : ax, log_out,
                                  &y)) != TEENY_OK)
        return graph_err(im, st);
    if (coerce && (st = teeny__ox_view_node(im, y, &flat, &s, &y)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, y, &s);
}

/* LayerNormalization's optional outputs Mean and InvStdDev (x's shape with
 * 1 from axis on) as nodes of their own: a mean, and 1/sqrt(mean((x -
 * mean)^2) + eps) through the broadcasting ops. */
static teeny_status ln_stats(ox_import *im, teeny_node x, const ox_shape *s, int ax, float eps)
{
    teeny_reduce_params rp = {((1u << s->ndim) - 1) & ~((1u << ax) - 1), 1, 1};
    ox_shape m = *s, cs = {1, {1}};
    teeny_node mean, d, sq, var, e, h, ve, inv;
    float half = -0.5f;
    char buf[TEENY__NAME_CAP];
    for (int k = ax; k < s->ndim; k++)
        m.d[k] = 1;
    teeny_status st = teeny_graph_reduce(im->g, teeny__ox_name(im, "mean", buf, sizeof buf), x, &rp, &mean);
    if (st == TEENY_OK && im->node->n_output > 1 && *im->node->output[1] &&
        (st = teeny__ox_out_runtime(im, 1, mean, &m)) != TEENY_OK)
        return st;
    if (st != TEENY_OK || im->node->n_output < 3 || !*im->node->output[2])
        return st == TEENY_OK ? TEENY_OK : graph_err(im, st);
    if ((st = teeny_graph_binary(im->g, teeny__ox_name(im, "dev", buf, sizeof buf), TEENY_BINARY_SUB, x, mean, &d)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "sq", buf, sizeof buf), TEENY_BINARY_MUL, d, d, &sq)) ||
        (st = teeny_graph_reduce(im->g, teeny__ox_name(im, "var", buf, sizeof buf), sq, &rp, &var)) ||
        (st = teeny_graph_constant(im->g, teeny__ox_name(im, "eps", buf, sizeof buf), 1, cs.d, &eps, &e)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "var_eps", buf, sizeof buf), TEENY_BINARY_ADD, var, e, &ve)) ||
        (st = teeny_graph_constant(im->g, teeny__ox_name(im, "half", buf, sizeof buf), 1, cs.d, &half, &h)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "inv_std", buf, sizeof buf), TEENY_BINARY_POW, ve, h, &inv)))
        return graph_err(im, st);
    return teeny__ox_out_runtime(im, 2, inv, &m);
}

teeny_status teeny__ox_op_layernorm(ox_import *im)
{
    static const char *const attrs[] = {"axis", "epsilon", "stash_type", NULL};
    int64_t axis, stash;
    float eps;
    int ax, xi, si, bi;
    const ox_const *scale, *bias = NULL;
    teeny_node y;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "axis", -1, &axis)) != TEENY_OK ||
        (st = teeny__ox_attr_float(im, "epsilon", 1e-5f, &eps)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "stash_type", 1, &stash)) != TEENY_OK ||
        (st = teeny__ox_outputs_at_most(im, 3)) != TEENY_OK || (st = teeny__ox_in_runtime(im, 0, "X", &xi)) != TEENY_OK ||
        (st = teeny__ox_in_const(im, 1, "Scale", 1, &scale)) != TEENY_OK || (st = teeny__ox_in(im, 1, &si)) != TEENY_OK ||
        (st = teeny__ox_in(im, 2, &bi)) != TEENY_OK || (bi >= 0 && (st = teeny__ox_in_const(im, 2, "B", 1, &bias)) != TEENY_OK))
        return st;
    if (stash != 1)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute stash_type=%lld (supported: 1, float)", (long long)stash);
    ox_shape s = im->vals[xi].shape;
    if ((st = teeny__ox_axis(im, "axis", axis, s.ndim, &ax)) != TEENY_OK)
        return st;
    int64_t n = 1;
    for (int d = ax; d < s.ndim; d++)
        n *= s.d[d];
    if (scale->numel != n || (bias && bias->numel != n))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "Scale or B of %lld elements for %lld normalized ones "
                              "(supported: the normalized shape)", (long long)scale->numel, (long long)n);
    if ((st = teeny_graph_layernorm(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), im->vals[xi].node, ax, eps,
                                    bias != NULL, &y)) != TEENY_OK)
        return graph_err(im, st);
    if ((st = teeny__ox_bind(im, si, y, 0, 0, NULL)) != TEENY_OK ||
        (bias && (st = teeny__ox_bind(im, bi, y, 0, 1, NULL)) != TEENY_OK) ||
        (st = teeny__ox_out_runtime(im, 0, y, &s)) != TEENY_OK)
        return st;
    return ln_stats(im, im->vals[xi].node, &s, ax, eps);
}

/* ---- Concat ---- */

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
        return graph_err(im, st);
    if ((st = teeny__ox_node_shape(im, y, &s)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, y, &s);
}

/* MatMul of two run-time values (or one constant of rank other than 2):
 * the batched matmul node; a 1-D operand is a row (A) or column (B)
 * viewed in and its dimension dropped from the result, as NumPy does. */
teeny_status teeny__ox_matmul(ox_import *im)
{
    teeny_node a, b, y;
    ox_shape as, bs, a2, b2, o = {0};
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = teeny__ox_operand(im, 0, "A", &a, &as)) != TEENY_OK || (st = teeny__ox_operand(im, 1, "B", &b, &bs)) != TEENY_OK)
        return st;
    if (as.ndim < 1 || bs.ndim < 1)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "a scalar operand");
    a2 = as.ndim == 1 ? (ox_shape){2, {1, as.d[0]}} : as;
    b2 = bs.ndim == 1 ? (ox_shape){2, {bs.d[0], 1}} : bs;
    if ((st = teeny__ox_view_node(im, a, &as, &a2, &a)) != TEENY_OK || (st = teeny__ox_view_node(im, b, &bs, &b2, &b)) != TEENY_OK)
        return st;
    if ((st = teeny_graph_matmul(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), a, b, &y)) != TEENY_OK)
        return graph_err(im, st);
    ox_shape g;
    if ((st = teeny__ox_node_shape(im, y, &g)) != TEENY_OK)
        return st;
    for (int d = 0; d < g.ndim; d++) /* the 1-D operands' dimensions go */
        if (!((d == g.ndim - 2 && as.ndim == 1) || (d == g.ndim - 1 && bs.ndim == 1)))
            o.d[o.ndim++] = g.d[d];
    if ((st = teeny__ox_view_node(im, y, &g, &o, &y)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, y, &o);
}
