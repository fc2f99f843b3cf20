/*
 * reductions.c -- the ONNX ops that reduce along axes, through the public
 * graph builders: ReduceSum and ReduceMean (axes from the attribute or a
 * constant input, keepdims, noop_with_empty_axes), Softmax and LogSoftmax
 * (any axis; before opset 13 over the input coerced to 2-D, as ONNX
 * defines) and LayerNormalization (with its optional Mean and InvStdDev
 * outputs), InstanceNormalization and GroupNormalization (reduce and
 * broadcasting binary nodes, a depthwise 1x1 convolution for the affine).
 * Attribute values the ops cannot compute are refused, naming the
 * attribute.
 */
#include <math.h>
#include <string.h>

#include "onnx_internal.h"

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
        return teeny__ox_graph_fail(im, st);
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
        return teeny__ox_graph_fail(im, st);
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
        return st == TEENY_OK ? TEENY_OK : teeny__ox_graph_fail(im, st);
    if ((st = teeny_graph_binary(im->g, teeny__ox_name(im, "dev", buf, sizeof buf), TEENY_BINARY_SUB, x, mean, &d)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "sq", buf, sizeof buf), TEENY_BINARY_MUL, d, d, &sq)) ||
        (st = teeny_graph_reduce(im->g, teeny__ox_name(im, "var", buf, sizeof buf), sq, &rp, &var)) ||
        (st = teeny_graph_constant(im->g, teeny__ox_name(im, "eps", buf, sizeof buf), 1, cs.d, &eps, &e)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "var_eps", buf, sizeof buf), TEENY_BINARY_ADD, var, e, &ve)) ||
        (st = teeny_graph_constant(im->g, teeny__ox_name(im, "half", buf, sizeof buf), 1, cs.d, &half, &h)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "inv_std", buf, sizeof buf), TEENY_BINARY_POW, ve, h, &inv)))
        return teeny__ox_graph_fail(im, st);
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
        return teeny__ox_graph_fail(im, st);
    if ((st = teeny__ox_bind(im, si, y, 0, 0, NULL)) != TEENY_OK ||
        (bias && (st = teeny__ox_bind(im, bi, y, 0, 1, NULL)) != TEENY_OK) ||
        (st = teeny__ox_out_runtime(im, 0, y, &s)) != TEENY_OK)
        return st;
    return ln_stats(im, im->vals[xi].node, &s, ax, eps);
}

/* ---- instance and group normalization ---- */

/* Whether c holds v in every element. */
static int const_all(const ox_const *c, float v)
{
    for (int64_t i = 0; i < c->numel; i++)
        if (teeny__ox_get_f(c, i) != (double)v)
            return 0;
    return 1;
}

/* Whether a node of the graph other than an InstanceNormalization or
 * GroupNormalization reads value name (torch.export merges equal
 * initializers: a fresh model's norm weights of ones feed its LayerNorms
 * too, whose parameter slots have another shape than the depthwise
 * conv's, so the two cannot share one parameter). */
static int read_by_other_ops(const ox_import *im, const char *name)
{
    for (size_t i = 0; i < im->graph->n_node; i++) {
        const Onnx__NodeProto *n = im->graph->node[i];
        if (!strcmp(n->op_type, "InstanceNormalization") || !strcmp(n->op_type, "GroupNormalization"))
            continue;
        for (size_t j = 0; j < n->n_input; j++)
            if (!strcmp(n->input[j], name))
                return 1;
    }
    return 0;
}

/* y [N, A, R] times scale, plus bias ([A] each, fp32) by broadcasting
 * binary nodes with [A, 1] graph constants (not parameters). */
static teeny_status affine_const(ox_import *im, const ox_const *scale, const ox_const *bias, teeny_node *y)
{
    char buf[TEENY__NAME_CAP];
    int64_t shape[2] = {scale->numel, 1};
    teeny_node s, b;
    if (scale->type != OX_F32 || bias->type != OX_F32)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "scale and bias must be float");
    teeny_status st;
    if ((st = teeny_graph_constant(im->g, teeny__ox_name(im, "scale", buf, sizeof buf), 2, shape, scale->data, &s)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "scaled", buf, sizeof buf), TEENY_BINARY_MUL, *y, s, y)) ||
        (st = teeny_graph_constant(im->g, teeny__ox_name(im, "bias", buf, sizeof buf), 2, shape, bias->data, &b)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "shifted", buf, sizeof buf), TEENY_BINARY_ADD, *y, b, y)))
        return teeny__ox_graph_fail(im, st);
    return TEENY_OK;
}

/* InstanceNormalization and GroupNormalization: x [N, C, D1, ...] viewed
 * as [N, G, C/G * D1 * ...] (G = C for InstanceNormalization), mean and
 * variance over the last axis by reduce nodes (two passes, as ONNX's
 * function body: var = mean((x - mean)^2)), y = (x - mean) *
 * (var + eps)^-1/2 by broadcasting binary nodes, then the affine scale
 * and bias per channel (InstanceNormalization, GroupNormalization from
 * opset 21: [C]) or per group (GroupNormalization 18: [G]) as a
 * depthwise 1x1 convolution over that axis (its weight and bias, bound
 * to scale and bias, train as parameters); where another op also reads
 * scale or bias, by broadcasting mul and add nodes with graph constants
 * (not trained). Every node is differentiable, so the gradient composes.
 * A scale of ones with a bias of zeros that are no initializers
 * (PyTorch's GroupNorm export: Constant nodes around
 * InstanceNormalization) adds no affine node. */
teeny_status teeny__ox_op_groupnorm(ox_import *im)
{
    static const char *const attrs[] = {"num_groups", "epsilon", "stash_type", NULL}; /* stash_type: opset 21 */
    static const char *const attrs_18[] = {"num_groups", "epsilon", NULL}, *const attrs_instance[] = {"epsilon", NULL};
    int instance = !strcmp(im->node->op_type, "InstanceNormalization");
    int64_t groups = 0, stash;
    float eps, minus_half = -0.5f;
    int xi, si, bi;
    const ox_const *scale, *bias;
    teeny_node x, mean, dev, sq, var, e, ve, h, inv, y;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, instance ? attrs_instance : im->opset < 21 ? attrs_18 : attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_float(im, "epsilon", 1e-5f, &eps)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "stash_type", 1, &stash)) != TEENY_OK ||
        (!instance && (st = teeny__ox_attr_int(im, "num_groups", 0, &groups)) != TEENY_OK))
        return st;
    if (stash != 1)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute stash_type=%lld (supported: 1, float)", (long long)stash);
    if (!(eps >= 0.0f) || isinf(eps))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute epsilon=%g (supported: finite, >= 0)", (double)eps);
    if (!instance && !teeny__ox_attr(im, "num_groups"))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute num_groups is required");
    if ((st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK || (st = teeny__ox_in_runtime(im, 0, "X", &xi)) != TEENY_OK ||
        (st = teeny__ox_in_const(im, 1, "scale", 1, &scale)) != TEENY_OK || (st = teeny__ox_in(im, 1, &si)) != TEENY_OK ||
        (st = teeny__ox_in_const(im, 2, instance ? "B" : "bias", 1, &bias)) != TEENY_OK ||
        (st = teeny__ox_in(im, 2, &bi)) != TEENY_OK)
        return st;
    ox_shape xs = im->vals[xi].shape;
    if (xs.ndim < 2)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "X of rank %d (expected [N, C, ...])", xs.ndim);
    int64_t C = xs.d[1], S = 1;
    for (int d = 2; d < xs.ndim; d++)
        S *= xs.d[d];
    if (instance)
        groups = C;
    if (groups < 1 || C % groups)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "num_groups %lld does not divide the %lld channels", (long long)groups,
                              (long long)C);
    /* per group: GroupNormalization before opset 21 (its deprecated form) */
    int per_group = !instance && im->opset < 21;
    int64_t n_affine = per_group ? groups : C;
    if (scale->shape.ndim != 1 || scale->shape.d[0] != n_affine || bias->shape.ndim != 1 || bias->shape.d[0] != n_affine)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "scale and %s must be [%lld] (%s) for X of %lld channels; they have "
                              "%lld and %lld elements", instance ? "B" : "bias", (long long)n_affine,
                              per_group ? "num_groups, before opset 21" : "C", (long long)C, (long long)scale->numel,
                              (long long)bias->numel);
    ox_shape gs = {3, {xs.d[0], groups, C / groups * S}}, cs = {1, {1}};
    teeny_reduce_params rp = {1u << 2, 1, 1};
    if ((st = teeny__ox_view(im, xi, &gs, &x)) != TEENY_OK)
        return st;
    if ((st = teeny_graph_reduce(im->g, teeny__ox_name(im, "mean", buf, sizeof buf), x, &rp, &mean)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "dev", buf, sizeof buf), TEENY_BINARY_SUB, x, mean, &dev)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "sq", buf, sizeof buf), TEENY_BINARY_MUL, dev, dev, &sq)) ||
        (st = teeny_graph_reduce(im->g, teeny__ox_name(im, "var", buf, sizeof buf), sq, &rp, &var)) ||
        (st = teeny_graph_constant(im->g, teeny__ox_name(im, "eps", buf, sizeof buf), 1, cs.d, &eps, &e)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "var_eps", buf, sizeof buf), TEENY_BINARY_ADD, var, e, &ve)) ||
        (st = teeny_graph_constant(im->g, teeny__ox_name(im, "minus_half", buf, sizeof buf), 1, cs.d, &minus_half, &h)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "inv_std", buf, sizeof buf), TEENY_BINARY_POW, ve, h, &inv)) ||
        (st = teeny_graph_binary(im->g, teeny__ox_name(im, "norm", buf, sizeof buf), TEENY_BINARY_MUL, dev, inv, &y)))
        return teeny__ox_graph_fail(im, st);
    int identity = const_all(scale, 1.0f) && const_all(bias, 0.0f) && !im->vals[si].is_initializer &&
                   !im->vals[bi].is_initializer;
    if (!identity && (read_by_other_ops(im, im->vals[si].name) || read_by_other_ops(im, im->vals[bi].name))) {
        ox_shape as = {3, {xs.d[0], n_affine, C * S / n_affine}};
        if ((st = teeny__ox_view_node(im, y, &gs, &as, &y)) != TEENY_OK || (st = affine_const(im, scale, bias, &y)) != TEENY_OK)
            return st;
        gs = as;
    } else if (!identity) {
        /* the affine axis as the channels of a [N, A, rest, 1] plane */
        ox_shape ps = {4, {xs.d[0], n_affine, C * S / n_affine, 1}};
        teeny_conv2d_params p = TEENY_CONV2D_PARAMS_INIT;
        p.groups = (int)n_affine;
        if ((st = teeny__ox_view_node(im, y, &gs, &ps, &y)) != TEENY_OK)
            return st;
        if ((st = teeny_graph_conv2d(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), y, (int)n_affine, 1, 1, &p, 1,
                                     &y)) != TEENY_OK)
            return teeny__ox_graph_fail(im, st);
        if ((st = teeny__ox_bind(im, si, y, 0, 0, NULL)) != TEENY_OK || (st = teeny__ox_bind(im, bi, y, 0, 1, NULL)) != TEENY_OK)
            return st;
        gs = ps;
    }
    if ((st = teeny__ox_view_node(im, y, &gs, &xs, &y)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, y, &xs);
}
