/*
 * fuse_apply.c -- the chains attn_fuse.c's scan deferred, imported at
 * their final node (teeny__ox_fuse_node): an attention chain as one
 * teeny__ox_attention (attn_import.c) where its constants are scalars,
 * its transpose swaps the last two axes, its softmax is on the last axis
 * and its mask does not broadcast the scores; a GELU's five nodes as one
 * GELU activation where its constants are GELU's; otherwise the deferred
 * nodes as they are, in their order, then the final node.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuse.h"
#include "onnx_internal.h"

#define S(x) ((x) ? (x) : "")

/* ---- at the final MatMul ---- */

/* The node's input i as a graph node and its ONNX shape (im->node set
 * to node j for the call). */
static teeny_status operand_at(ox_import *im, int j, int i, const char *what, teeny_node *n, ox_shape *s)
{
    const Onnx__NodeProto *keep = im->node;
    im->node = im->graph->node[j];
    teeny_status st = teeny__ox_operand(im, i, what, n, s);
    im->node = keep;
    return st;
}

/* Name's value as a float scalar constant (numel 1, rank <= max_rank). */
static int scalar_of(ox_import *im, const char *name, int max_rank, double *v)
{
    int idx = teeny__ox_find(im, name);
    if (idx < 0 || im->vals[idx].kind != OX_CONST || im->vals[idx].c.type != OX_F32 || im->vals[idx].c.numel != 1 ||
        im->vals[idx].c.shape.ndim > max_rank)
        return 0;
    *v = teeny__ox_get_f(&im->vals[idx].c, 0);
    return 1;
}

/* Mul node j of value name and a scalar constant: the factor, the input
 * index of name (-1: not so). */
static int mul_by_scalar(ox_import *im, int j, const char *name, int rank, double *c)
{
    const Onnx__NodeProto *n = im->graph->node[j];
    for (int k = 0; k < 2; k++)
        if ((!name || !strcmp(S(n->input[k]), name)) && scalar_of(im, S(n->input[1 - k]), rank, c) &&
            n->n_attribute == 0)
            return k;
    return -1;
}

static int attrs_only(const Onnx__NodeProto *n, const char *allowed)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (!allowed || strcmp(S(n->attribute[i]->name), allowed) || (n->attribute[i]->ref_attr_name &&
                                                                      *n->attribute[i]->ref_attr_name))
            return 0;
    return 1;
}

/* The chain's scale (c1 c2, times or divided by c) and Q's input index
 * in its node; 0 when a factor is not a scalar constant. */
static int chain_scale(ox_import *im, const int *ch, int rank, double *scale, int *q_node, int *q_in)
{
    const Onnx__GraphProto *g = im->graph;
    double c = 1;
    *scale = 1;
    *q_node = ch[CH_SCORES];
    *q_in = 0;
    if (ch[CH_MUL_Q] >= 0) {
        int k = mul_by_scalar(im, ch[CH_MUL_Q], NULL, rank, &c);
        if (k < 0)
            return 0;
        *scale *= c;
        *q_node = ch[CH_MUL_Q];
        *q_in = k;
    }
    if (ch[CH_MUL_K] >= 0) {
        if (mul_by_scalar(im, ch[CH_MUL_K], g->node[ch[CH_TRANSPOSE]]->output[0], rank, &c) < 0)
            return 0;
        *scale *= c;
    }
    if (ch[CH_SCALE] >= 0) {
        const Onnx__NodeProto *n = g->node[ch[CH_SCALE]];
        const char *scores = g->node[ch[CH_SCORES]]->output[0];
        if (!strcmp(S(n->op_type), "Mul")) {
            if (mul_by_scalar(im, ch[CH_SCALE], scores, rank, &c) < 0)
                return 0;
            *scale *= c;
        } else if (n->n_input != 2 || !attrs_only(n, NULL) || strcmp(S(n->input[0]), scores) ||
                   !scalar_of(im, S(n->input[1]), rank, &c) || c == 0) {
            return 0;
        } else {
            *scale /= c;
        }
    }
    return 1;
}

/* The transpose swaps K's last two axes; the softmax is on the last. */
static int chain_layout(ox_import *im, const int *ch, int rank)
{
    const Onnx__NodeProto *t = im->graph->node[ch[CH_TRANSPOSE]], *sm = im->graph->node[ch[CH_SOFTMAX]];
    const Onnx__AttributeProto *perm = NULL, *axis = NULL;
    if (!attrs_only(t, "perm") || !attrs_only(sm, "axis") || !attrs_only(im->graph->node[ch[CH_SCORES]], NULL) ||
        (ch[CH_ADD] >= 0 && !attrs_only(im->graph->node[ch[CH_ADD]], NULL)) || !attrs_only(im->node, NULL))
        return 0;
    if (t->n_attribute)
        perm = t->attribute[0];
    if (sm->n_attribute)
        axis = sm->attribute[0];
    if (!perm || perm->n_ints != (size_t)rank)
        return 0;
    for (int d = 0; d < rank; d++)
        if (perm->ints[d] != (d == rank - 2 ? rank - 1 : d == rank - 1 ? rank - 2 : d))
            return 0;
    int64_t ax = axis ? axis->i : im->opset < 13 ? 1 : -1;
    return ax == -1 || ax == rank - 1;
}

/* Whether q, k, v (and the mask) make the chain's shapes: one rank 3..5,
 * k's and v's leading dimensions q's or 1 (never the batch), the mask
 * within the scores' shape. */
static int chain_shapes(const ox_attn *a, int rank)
{
    ox_shape sc = a->qs, o;
    if (a->ks.ndim != rank || a->vs.ndim != rank || rank < 3 || rank > TEENY_MAX_DIMS ||
        a->ks.d[rank - 1] != a->qs.d[rank - 1] || a->vs.d[rank - 2] != a->ks.d[rank - 2] || a->ks.d[0] != a->qs.d[0])
        return 0;
    for (int d = 0; d < rank - 2; d++)
        if (a->ks.d[d] != a->vs.d[d] || (a->ks.d[d] != a->qs.d[d] && a->ks.d[d] != 1))
            return 0;
    sc.d[rank - 1] = a->ks.d[rank - 2];
    return a->mask < 0 || (teeny__ox_broadcast(&a->ms, &sc, &o) && o.ndim == rank &&
                           !memcmp(o.d, sc.d, sizeof(int64_t) * (size_t)rank));
}

/* The chain as one teeny__ox_attention; *fused 0 when it does not apply. */
static teeny_status try_fuse(ox_import *im, const int *ch, int *fused)
{
    const Onnx__GraphProto *g = im->graph;
    ox_attn a = {.mask = -1};
    ox_attn_out o;
    double scale;
    int q_node, q_in, rank;
    *fused = 0;
    if (g->node[ch[CH_TRANSPOSE]]->n_input != 1 || g->node[ch[CH_SOFTMAX]]->n_input != 1)
        return TEENY_OK;
    /* every value the chain reads is defined by now (its producers precede it) */
    teeny_status st = operand_at(im, ch[CH_TRANSPOSE], 0, "K", &a.k, &a.ks);
    rank = a.ks.ndim;
    if (st != TEENY_OK || rank < 3 || !chain_layout(im, ch, rank) || !chain_scale(im, ch, rank, &scale, &q_node, &q_in))
        return st;
    if ((st = operand_at(im, q_node, q_in, "Q", &a.q, &a.qs)) != TEENY_OK ||
        (st = teeny__ox_operand(im, 1, "V", &a.v, &a.vs)) != TEENY_OK)
        return st;
    if (ch[CH_ADD] >= 0) {
        const Onnx__NodeProto *add = g->node[ch[CH_ADD]];
        const char *into = ch[CH_SCALE] >= 0 ? g->node[ch[CH_SCALE]]->output[0] : g->node[ch[CH_SCORES]]->output[0];
        int m = strcmp(S(add->input[0]), into) ? 0 : 1;
        if (add->n_input != 2 || strcmp(S(add->input[1 - m]), into))
            return TEENY_OK;
        if ((st = operand_at(im, ch[CH_ADD], m, "mask", &a.mask, &a.ms)) != TEENY_OK)
            return st;
    }
    a.scale = (float)scale;
    if (!chain_shapes(&a, rank))
        return TEENY_OK;
    if ((st = teeny__ox_attention(im, &a, &o)) != TEENY_OK || (st = teeny__ox_out_runtime(im, 0, o.y, &o.ys)) != TEENY_OK)
        return st;
    *fused = 1;
    return TEENY_OK;
}

/* The GELU chain as one activation; *fused 0 when its constants are not
 * GELU's. */
static teeny_status try_gelu(ox_import *im, const int *ch, int *fused)
{
    const Onnx__NodeProto *d = im->graph->node[ch[GE_SCALE]], *a = im->graph->node[ch[GE_ADD]];
    const char *erf = S(im->graph->node[ch[GE_ERF]]->output[0]), *prod = S(im->graph->node[ch[GE_MUL]]->output[0]);
    double c1, c2, c3;
    int xi = 0;
    *fused = 0;
    if (!strcmp(S(d->op_type), "Div")) {
        if (!scalar_of(im, S(d->input[1]), 8, &c1) || fabs(c1 - SQRT2) > 1e-6 * SQRT2)
            return TEENY_OK;
    } else if ((xi = mul_by_scalar(im, ch[GE_SCALE], NULL, 8, &c1)) < 0 || fabs(c1 - 1.0 / SQRT2) > 1e-6 / SQRT2) {
        return TEENY_OK;
    }
    if (!scalar_of(im, S(a->input[strcmp(S(a->input[0]), erf) ? 0 : 1]), 8, &c2) || c2 != 1.0 ||
        mul_by_scalar(im, ch[CH_FINAL], prod, 8, &c3) < 0 || c3 != 0.5)
        return TEENY_OK;
    teeny_act_params p = teeny_act_defaults(TEENY_ACT_GELU);
    teeny_node x, y;
    ox_shape s;
    char buf[TEENY__NAME_CAP];
    teeny_status st = operand_at(im, ch[GE_SCALE], xi, "X", &x, &s);
    if (st != TEENY_OK)
        return st;
    if ((st = teeny_graph_activation_ex(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x, &p, &y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    *fused = 1;
    return teeny__ox_out_runtime(im, 0, y, &s);
}

static int int_cmp(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

teeny_status teeny__ox_fuse_node(ox_import *im, ox_handler import_one)
{
    const int *ch = &im->chain[(size_t)im->node_index * CH_N];
    const Onnx__NodeProto *final = im->node;
    int final_index = im->node_index, order[CH_N], n = 0, fused;
    teeny_status st = teeny__ox_outputs_at_most(im, 1);
    if (st == TEENY_OK && (st = (ch[CH_KIND] == CHAIN_GELU ? try_gelu : try_fuse)(im, ch, &fused)) == TEENY_OK &&
        fused)
        return TEENY_OK;
    im->node = final;
    im->node_index = final_index;
    if (st != TEENY_OK)
        return st;
    for (int k = 0; k < CH_KIND; k++) /* not fused: the deferred nodes as they are, in order */
        if (ch[k] >= 0 && ch[k] != final_index)
            order[n++] = ch[k];
    qsort(order, (size_t)n, sizeof *order, int_cmp);
    for (int k = 0; k < n && st == TEENY_OK; k++) {
        im->node = im->graph->node[order[k]];
        im->node_index = order[k];
        st = import_one(im);
    }
    if (st != TEENY_OK)
        return st;
    im->node = final;
    im->node_index = final_index;
    return import_one(im);
}

int teeny__ox_fuse_deferred(const ox_import *im, int i)
{
    return im->defer && im->defer[i] >= 0 && im->defer[i] != i;
}

int teeny__ox_fuse_final(const ox_import *im, int i)
{
    return im->defer && im->defer[i] == i;
}
