/*
 * layers.c -- the ONNX ops that become graph nodes, through the public
 * teeny_graph_* builders only: BatchNormalization (inference form; any
 * rank >= 2 viewed as [N, C, S, 1]), Gemm and MatMul with a constant
 * weight (a linear layer; leading dimensions folded into rows by views),
 * MatMul of two run-time values (the batched matmul node), Gemm's alpha,
 * beta, transposes and C of [M, N] (transpose, matmul, mul and add
 * nodes), SoftmaxCrossEntropyLoss (mean, no weights). Activations and
 * arithmetic are pointwise.c's, Concat ops_layout.c's; Conv,
 * ConvTranspose, the pools and Resize spatial.c's. Weights come from
 * constants and become parameters under their ONNX names
 * (teeny__ox_bind). Every attribute value outside what the graph's ops
 * compute exactly is refused, naming the attribute.
 */
#include <stdio.h>
#include <string.h>

#include "onnx_internal.h"

static const char *const NO_ATTRS[] = {NULL};

/* BatchNormalization in its inference form (running statistics); the plan's
 * mode decides, so training_mode=1 is refused. */
teeny_status teeny__ox_op_batchnorm(ox_import *im)
{
    static const char *const attrs[] = {"epsilon", "momentum", "spatial", "is_test", "training_mode", NULL};
    int xi, idx[4];
    int64_t training, spatial_attr;
    float eps, momentum;
    teeny_node x2, y;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_float(im, "epsilon", 1e-5f, &eps)) != TEENY_OK ||
        (st = teeny__ox_attr_float(im, "momentum", 0.9f, &momentum)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "training_mode", 0, &training)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "spatial", 1, &spatial_attr)) != TEENY_OK)
        return st;
    if (training)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute training_mode=1 (compile the graph for training "
                       "instead; its running variance is PyTorch's unbiased one)");
    if (!spatial_attr)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute spatial=0 (per-element statistics)");
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute epsilon=%g or momentum=%g", (double)eps,
                       (double)momentum);
    if ((st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK || (st = teeny__ox_in_runtime(im, 0, "X", &xi)) != TEENY_OK)
        return st;
    const char *names[4] = {"scale", "B", "mean", "var"};
    ox_shape xs = im->vals[xi].shape, v = {4, {xs.d[0], xs.ndim > 1 ? xs.d[1] : 0, 1, 1}};
    for (int i = 0; i < 4; i++) {
        const ox_const *c;
        if ((st = teeny__ox_in_const(im, i + 1, names[i], 1, &c)) != TEENY_OK || (st = teeny__ox_in(im, i + 1, &idx[i])) != TEENY_OK)
            return st;
        if (c->shape.ndim != 1 || xs.ndim < 2 || c->shape.d[0] != xs.d[1])
            return teeny__ox_fail(im, TEENY_ERR_SHAPE, "%s must be [C] for X of %d dimensions", names[i], xs.ndim);
    }
    for (int i = 2; i < xs.ndim; i++)
        v.d[2] *= xs.d[i];
    x2 = im->vals[xi].node;
    if (xs.ndim > 2 && (st = teeny__ox_view(im, xi, &v, &x2)) != TEENY_OK)
        return st;
    /* a PyTorch export names the statistics "<module>.running_mean": so is the node */
    const char *mean = im->vals[idx[2]].name, *dot = strrchr(mean, '.');
    char base[48] = "";
    if (dot && !strcmp(dot, ".running_mean") && dot - mean < 40)
        snprintf(base, sizeof base, "%.*s", (int)(dot - mean), mean);
    teeny__ox_name_prefer(im, base, buf, sizeof buf);
    teeny_act act = (teeny_act)teeny__ox_act_of(im, im->node_index); /* a Relu or SiLU after it (attn_fuse.c) */
    if ((st = teeny_graph_batchnorm_act(im->g, buf, x2, 1.0f - momentum, eps, act, &y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    for (int i = 0; i < 4; i++)
        if ((st = teeny__ox_bind(im, idx[i], y, i >= 2, i % 2, NULL)) != TEENY_OK)
            return st;
    if (xs.ndim > 2) {
        ox_shape g;
        if ((st = teeny__ox_node_shape(im, y, &g)) != TEENY_OK || (st = teeny__ox_view_node(im, y, &g, &xs, &y)) != TEENY_OK)
            return st;
    }
    return teeny__ox_out_runtime(im, 0, y, &xs);
}

/* y = x w (+ bias) as a linear node: x a node of ONNX shape xs [..., K]
 * (leading dimensions folded into rows by a view), w constant [K, N]
 * (trans 0) or [N, K] (trans 1), bias constant with N elements or one
 * (broadcast). *out (NULL: output 0) receives y and its shape. */
static teeny_status linear(ox_import *im, teeny_node x, const ox_shape *xs, int wi, int trans, int bi, teeny_node *yout,
                           ox_shape *ys)
{
    const ox_const *w = &im->vals[wi].c, *b = bi >= 0 ? &im->vals[bi].c : NULL;
    teeny_node x2, y;
    char buf[TEENY__NAME_CAP];
    teeny_status st;
    if (w->shape.ndim != 2 || xs->ndim < 2)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "a weight of rank %d on an input of rank %d (supported: a 2-D "
                       "constant weight, an input of rank >= 2)", w->shape.ndim, xs->ndim);
    int64_t K = w->shape.d[trans ? 1 : 0], N = w->shape.d[trans ? 0 : 1];
    if (K != xs->d[xs->ndim - 1] || N < 1 || N > INT32_MAX)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "the weight [%lld, %lld] does not fit an input of %lld features",
                       (long long)w->shape.d[0], (long long)w->shape.d[1], (long long)xs->d[xs->ndim - 1]);
    if (b && b->type == OX_F32 && b->numel != N && b->numel != 1)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "a bias of %lld elements for %lld outputs (supported: [N] or one "
                       "value)", (long long)b->numel, (long long)N);
    ox_shape rows = {2, {teeny__ox_numel(xs) / K, K}}, out = *xs;
    out.d[out.ndim - 1] = N;
    if ((st = teeny__ox_view_node(im, x, xs, &rows, &x2)) != TEENY_OK)
        return st;
    if ((st = teeny_graph_linear(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x2, (int)N, b != NULL, &y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    float *tmp = teeny__malloc((size_t)(N * K > N ? N * K : N) * sizeof *tmp);
    if (!tmp)
        return teeny__ox_fail(im, TEENY_ERR_NOMEM, "out of host memory");
    for (int64_t o = 0; !trans && o < N; o++)
        for (int64_t k = 0; k < K; k++)
            tmp[o * K + k] = ((const float *)w->data)[k * N + o];
    st = teeny__ox_bind(im, wi, y, 0, 0, trans || w->type != OX_F32 ? NULL : tmp);
    for (int64_t o = 0; st == TEENY_OK && b && b->type == OX_F32 && o < N; o++)
        tmp[o] = ((const float *)b->data)[b->numel == 1 ? 0 : o];
    if (st == TEENY_OK && b)
        st = teeny__ox_bind(im, bi, y, 0, 1, b->type == OX_F32 ? tmp : NULL);
    teeny__free(tmp);
    if (st != TEENY_OK)
        return st;
    ox_shape g;
    if ((st = teeny__ox_node_shape(im, y, &g)) != TEENY_OK || (st = teeny__ox_view_node(im, y, &g, &out, &y)) != TEENY_OK)
        return st;
    if (yout) {
        *yout = y;
        *ys = out;
        return TEENY_OK;
    }
    return teeny__ox_out_runtime(im, 0, y, &out);
}

/* *y = *y * v for a float v, through a [1] graph constant named <node>.<what>. */
static teeny_status scale_node(ox_import *im, const char *what, float v, teeny_node *y)
{
    char buf[TEENY__NAME_CAP];
    int64_t one = 1;
    teeny_node c;
    teeny_status st = teeny_graph_constant(im->g, teeny__ox_name(im, what, buf, sizeof buf), 1, &one, &v, &c);
    if (st == TEENY_OK)
        st = teeny_graph_binary(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), TEENY_BINARY_MUL, *y, c, y);
    return st != TEENY_OK ? teeny__ox_graph_fail(im, st) : TEENY_OK;
}

/* Input i of Gemm as a 2-D node, transposed when trans. */
static teeny_status gemm_operand(ox_import *im, int i, const char *what, int trans, teeny_node *n, ox_shape *s)
{
    char buf[TEENY__NAME_CAP];
    static const int perm[2] = {1, 0};
    teeny_status st = teeny__ox_operand(im, i, what, n, s);
    if (st != TEENY_OK)
        return st;
    if (s->ndim != 2)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "%s must be 2-D", what);
    if (!trans)
        return TEENY_OK;
    if ((st = teeny_graph_transpose(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), *n, perm, n)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    *s = (ox_shape){2, {s->d[1], s->d[0]}};
    return TEENY_OK;
}

/* Gemm: Y = alpha A' B' + beta C (A' = A or its transpose, as B'; C
 * broadcasting to [M, N]). A run-time A with a constant B is a linear
 * node (B its weight), with C its bias where alpha = beta = 1 and C has N
 * elements; otherwise A' B' is a matmul node, alpha and beta multiply by
 * graph constants and C is added with broadcasting. */
teeny_status teeny__ox_op_gemm(ox_import *im)
{
    static const char *const attrs[] = {"alpha", "beta", "transA", "transB", "broadcast", NULL};
    float alpha, beta;
    int64_t ta, tb;
    int ai, wi, ci;
    char buf[TEENY__NAME_CAP];
    teeny_node a, b, y, c;
    ox_shape as, bs, ys, cs, o;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_float(im, "alpha", 1.0f, &alpha)) != TEENY_OK ||
        (st = teeny__ox_attr_float(im, "beta", 1.0f, &beta)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "transA", 0, &ta)) != TEENY_OK || (st = teeny__ox_attr_int(im, "transB", 0, &tb)) != TEENY_OK ||
        (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK || (st = teeny__ox_in(im, 0, &ai)) != TEENY_OK ||
        (st = teeny__ox_in(im, 1, &wi)) != TEENY_OK || (st = teeny__ox_in(im, 2, &ci)) != TEENY_OK)
        return st;
    if (ai < 0 || wi < 0)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "inputs A and B are needed");
    if (beta == 0.0f)
        ci = -1; /* beta C is zero: C is not read */
    int b_weight = im->vals[wi].kind == OX_CONST && im->vals[ai].kind != OX_CONST;
    const ox_const *cc = ci >= 0 && im->vals[ci].kind == OX_CONST ? &im->vals[ci].c : NULL;
    if (b_weight && im->vals[wi].c.shape.ndim != 2)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "B must be 2-D");
    int64_t n_out = b_weight ? im->vals[wi].c.shape.d[tb ? 0 : 1] : 0;
    int c_bias = cc && beta == 1.0f && cc->shape.ndim <= 2 && (cc->numel == 1 || (cc->numel == n_out &&
                 (cc->shape.ndim == 1 || (cc->shape.ndim == 2 && cc->shape.d[0] == 1))));
    if ((st = gemm_operand(im, 0, "A", ta != 0, &a, &as)) != TEENY_OK)
        return st;
    if (b_weight && alpha == 1.0f && (ci < 0 || c_bias)) /* the exact fast path: one linear node */
        return linear(im, a, &as, wi, tb != 0, ci, NULL, NULL);
    if (b_weight) {
        st = linear(im, a, &as, wi, tb != 0, -1, &y, &ys);
    } else if ((st = gemm_operand(im, 1, "B", tb != 0, &b, &bs)) == TEENY_OK) {
        if (as.d[1] != bs.d[0])
            return teeny__ox_fail(im, TEENY_ERR_SHAPE, "A' [%lld, %lld] and B' [%lld, %lld] do not multiply",
                                  (long long)as.d[0], (long long)as.d[1], (long long)bs.d[0], (long long)bs.d[1]);
        if ((st = teeny_graph_matmul(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), a, b, &y)) != TEENY_OK)
            return teeny__ox_graph_fail(im, st);
        ys = (ox_shape){2, {as.d[0], bs.d[1]}};
    }
    if (st != TEENY_OK || (alpha != 1.0f && (st = scale_node(im, "alpha", alpha, &y)) != TEENY_OK) || ci < 0)
        return st != TEENY_OK ? st : teeny__ox_out_runtime(im, 0, y, &ys);
    if ((st = teeny__ox_operand(im, 2, "C", &c, &cs)) != TEENY_OK)
        return st;
    if (!teeny__ox_broadcast(&cs, &ys, &o) || o.ndim != 2 || o.d[0] != ys.d[0] || o.d[1] != ys.d[1])
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "C of %d dimensions does not broadcast to [%lld, %lld]", cs.ndim,
                              (long long)ys.d[0], (long long)ys.d[1]);
    if (beta != 1.0f && (st = scale_node(im, "beta", beta, &c)) != TEENY_OK)
        return st;
    if ((st = teeny_graph_binary(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), TEENY_BINARY_ADD, y, c, &y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    return teeny__ox_out_runtime(im, 0, y, &ys);
}

/* MatMul of two run-time values (or one constant of rank other than 2):
 * the batched matmul node; a 1-D operand is a row (A) or column (B)
 * viewed in and its dimension dropped from the result, as NumPy does. */
static teeny_status matmul_runtime(ox_import *im)
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
        return teeny__ox_graph_fail(im, st);
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

teeny_status teeny__ox_op_matmul(ox_import *im)
{
    int xi, wi;
    const ox_const *w;
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_in(im, 1, &wi)) != TEENY_OK)
        return st;
    if (wi < 0 || im->vals[wi].kind != OX_CONST || im->vals[wi].c.shape.ndim != 2 ||
        (st = teeny__ox_in(im, 0, &xi)) != TEENY_OK || xi < 0 || im->vals[xi].kind == OX_CONST)
        return st != TEENY_OK ? st : matmul_runtime(im); /* not x W with a 2-D constant W: a batched product */
    if ((st = teeny__ox_in_runtime(im, 0, "A", &xi)) != TEENY_OK ||
        (st = teeny__ox_in_const(im, 1, "B", 1, &w)) != TEENY_OK || (st = teeny__ox_in(im, 1, &wi)) != TEENY_OK)
        return st;
    return linear(im, im->vals[xi].node, &im->vals[xi].shape, wi, 0, -1, NULL, NULL);
}

/* SoftmaxCrossEntropyLoss: mean over the batch, no class weights. */
/* SoftmaxCrossEntropyLoss: reduction, ignore_index, weights (constant or
 * run-time [C]) and the optional log_prob output (a LogSoftmax over the
 * classes of the same scores). Scores [N, C] or [N, C, d1, ...] (labels
 * [N, d1, ...]). */
static teeny_status sce_params(ox_import *im, teeny_ce_params *p)
{
    static const char *const attrs[] = {"reduction", "ignore_index", NULL};
    static const char *const reds[] = {"mean", "sum", "none"};
    char red[16];
    int64_t ii = 0;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_string(im, "reduction", "mean", red, sizeof red)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "ignore_index", 0, &ii)) != TEENY_OK)
        return st;
    int r = 0;
    while (r < 3 && strcmp(red, reds[r]))
        r++;
    if (r == 3)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute reduction \"%.15s\" (supported: mean, sum, none)",
                              red);
    if (ii < INT32_MIN || ii > INT32_MAX) /* labels run as int32 */
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute ignore_index %lld outside int32", (long long)ii);
    *p = (teeny_ce_params){(teeny_reduction)r, teeny__ox_attr(im, "ignore_index") != NULL, (int)ii};
    return TEENY_OK;
}

teeny_status teeny__ox_op_sce(ox_import *im)
{
    int si, li, wi, yi;
    teeny_node y, lp, w = -1;
    teeny_ce_params p;
    ox_shape ws;
    char buf[TEENY__NAME_CAP];
    teeny_status st = sce_params(im, &p);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 2)) != TEENY_OK ||
        (st = teeny__ox_in(im, 2, &wi)) != TEENY_OK)
        return st;
    if ((st = teeny__ox_in_runtime(im, 0, "scores", &si)) != TEENY_OK || (st = teeny__ox_in_labels(im, 1, "labels", &li)) != TEENY_OK)
        return st;
    const ox_shape sc = im->vals[si].shape, ls = im->vals[li].shape;
    if (sc.ndim < 2)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "scores of rank %d (expected [N, C, ...])", sc.ndim);
    if (wi >= 0 && (st = teeny__ox_operand(im, 2, "weights", &w, &ws)) != TEENY_OK)
        return st;
    if (wi >= 0 && (ws.ndim != 1 || ws.d[0] != sc.d[1]))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "input 2 (weights) has rank %d; expected [%lld]", ws.ndim,
                              (long long)sc.d[1]);
    if ((st = teeny_graph_softmax_cross_entropy_ex(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), im->vals[si].node,
                                                   im->vals[li].node, w, &p, &y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    if (p.reduction == TEENY_REDUCTION_NONE) {
        if ((st = teeny__ox_out_runtime(im, 0, y, &ls)) != TEENY_OK)
            return st;
    } else {
        if (im->node->n_output < 1 || !im->node->output[0] || !*im->node->output[0])
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "output 0 (the loss) is missing");
        if ((st = teeny__ox_define(im, im->node->output[0], OX_RUNTIME, &yi)) != TEENY_OK)
            return st;
        im->vals[yi].node = y;
        im->vals[yi].is_loss = 1; /* a scalar: shape.ndim 0 */
    }
    if (im->node->n_output < 2 || !im->node->output[1] || !*im->node->output[1])
        return TEENY_OK;
    if ((st = teeny_graph_softmax(im->g, teeny__ox_name(im, "log_prob", buf, sizeof buf), im->vals[si].node, 1, 1,
                                  &lp)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    return teeny__ox_out_runtime(im, 1, lp, &sc);
}
