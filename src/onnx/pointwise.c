/*
 * pointwise.c -- the element-wise ONNX ops, through the public graph
 * builders: the activations (Relu, Sigmoid, Tanh, HardSigmoid, HardSwish,
 * LeakyRelu, Gelu, Clip, Mish, Erf; x * Sigmoid(x) stays one SiLU node),
 * Add/Sub/Mul/Div/Pow and Sum with NumPy broadcasting (two constants
 * fold; one constant operand becomes a graph constant), and the operand
 * rule the other files' ops share (teeny__ox_operand: a run-time value,
 * or a float constant as a graph constant). Attribute values the ops
 * cannot compute are refused, naming the attribute.
 */
#include <string.h>

#include "onnx_internal.h"

static const char *const NO_ATTRS[] = {NULL};

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
    return st != TEENY_OK ? teeny__ox_graph_fail(im, st) : TEENY_OK;
}

/* Input i as a graph node and its ONNX shape: a run-time value, or a
 * float constant as a graph constant. */
teeny_status teeny__ox_operand(ox_import *im, int i, const char *what, teeny_node *n, ox_shape *s)
{
    int idx;
    teeny_status st = teeny__ox_in_present(im, i, what, &idx);
    if (st != TEENY_OK)
        return st;
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
        return teeny__ox_graph_fail(im, st);
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
    im->vals[yi].shape = im->vals[xi].shape; /* Shape of it needs no sigmoid node */
    return TEENY_OK;
}

/* ---- arithmetic ---- */

/* y = a op b through the graph, a and b nodes of ONNX shapes as, bs. */
static teeny_status binary_node(ox_import *im, teeny_binary_op op, teeny_node a, const ox_shape *as, teeny_node b,
                                const ox_shape *bs, teeny_node *y, ox_shape *ys)
{
    char buf[TEENY__NAME_CAP];
    if (!teeny__ox_broadcast(as, bs, ys))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "the operands' shapes do not broadcast");
    teeny_status st = teeny_graph_binary(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), op, a, b, y);
    return st != TEENY_OK ? teeny__ox_graph_fail(im, st) : TEENY_OK;
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
                return teeny__ox_graph_fail(im, st);
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
