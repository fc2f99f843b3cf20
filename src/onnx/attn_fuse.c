/*
 * attn_fuse.c -- the unfused attention PyTorch exports (TorchScript
 * exporter, opset 17, for F.scaled_dot_product_attention and hand-written
 * attention), fused at import through teeny__ox_attention (attn_import.c);
 * this file's scan finds the chains before the nodes are imported, and
 * fuse_apply.c turns each into one node at its final node:
 *
 *   [Mul(Q, c1)]   Transpose(K, last two swapped) [-> Mul(., c2)]
 *          \              /
 *           MatMul (scores) [-> Mul/Div by a constant c] [-> Add mask]
 *             -> Softmax (last axis) -> MatMul(., V)
 *
 * c1, c2, c scalar constants (SDPA's sqrt(scale) on both operands). Before
 * the nodes are imported, a scan finds such chains whose intermediate
 * values have exactly one consumer and are not graph outputs, and defers
 * their nodes to the final MatMul. There, with every value known, the
 * chain becomes one teeny__ox_attention (the fused kernel unmasked; with
 * a mask, through the same core, decomposed until the kernel takes masks)
 * when the constants are scalars, the transpose swaps the last two axes,
 * the softmax is on the last axis and the mask does not broadcast the
 * scores; otherwise the deferred nodes are imported as they are, in their
 * order, then the final MatMul.
 *
 * The same scan finds BatchNormalization or Conv -> Relu and -> x *
 * Sigmoid(x), and Conv -> HardSwish and -> Clip(0, 6) (ReLU6, its bounds
 * constants), where the activation's nodes are the producer's value's only
 * consumers (and the sigmoid's is the Mul): the producer is imported with
 * the activation (teeny_graph_batchnorm_act: one kernel instead of two,
 * forward and backward; teeny_graph_conv2d_act_ex: the activation in the
 * convolution's store in inference) and the activation's nodes take its
 * value (teeny__ox_act_absorb).
 *
 * And it finds the exact GELU as the exporter writes it, x * (erf(x /
 * sqrt 2) + 1) * 0.5 in five nodes (match_gelu): deferred like an
 * attention chain, it becomes one GELU activation at its last Mul where
 * its constants are GELU's.
 */
#include <stdlib.h>
#include <string.h>

#include "fuse.h"
#include "onnx_internal.h"

#define S(x) ((x) ? (x) : "")


typedef struct {
    const char *name;
    int node;                      /* producer index, or consumer count */
} name_ref;

static int ref_cmp(const void *a, const void *b)
{
    return strcmp(((const name_ref *)a)->name, ((const name_ref *)b)->name);
}

typedef struct {
    const Onnx__GraphProto *g;
    name_ref *uses, *producers;    /* sorted by name */
    size_t n_uses, n_producers;
} scan_ctx;

static size_t uses_of(const scan_ctx *sc, const char *name)
{
    name_ref key = {name, 0};
    const name_ref *hit = bsearch(&key, sc->uses, sc->n_uses, sizeof key, ref_cmp);
    if (!hit)
        return 0;
    const name_ref *lo = hit, *hi = hit;
    while (lo > sc->uses && !strcmp(lo[-1].name, name))
        lo--;
    while (hi + 1 < sc->uses + sc->n_uses && !strcmp(hi[1].name, name))
        hi++;
    return (size_t)(hi - lo) + 1;
}

/* The node producing name when it has op type op and name is its only
 * output used, consumed once; else -1. */
static int single_producer(const scan_ctx *sc, const char *name, const char *op)
{
    name_ref key = {name, 0};
    const name_ref *hit = *name ? bsearch(&key, sc->producers, sc->n_producers, sizeof key, ref_cmp) : NULL;
    if (!hit || uses_of(sc, name) != 1)
        return -1;
    const Onnx__NodeProto *n = sc->g->node[hit->node];
    if (strcmp(S(n->op_type), op) || n->n_output != 1 || (n->domain && *n->domain && strcmp(n->domain, "ai.onnx")))
        return -1;
    return hit->node;
}

static const char *in_name(const scan_ctx *sc, int node, size_t i)
{
    const Onnx__NodeProto *n = sc->g->node[node];
    return i < n->n_input ? S(n->input[i]) : "";
}

/* Through Mul(x, c) or Mul(c, x) to x when such a Mul produces name
 * (*mul; which input is c is decided at import): the Transpose behind it
 * for K. */
static int transpose_behind(const scan_ctx *sc, const char *name, int *mul)
{
    int t = single_producer(sc, name, "Transpose");
    *mul = -1;
    if (t >= 0)
        return t;
    if ((*mul = single_producer(sc, name, "Mul")) < 0 || sc->g->node[*mul]->n_input != 2)
        return *mul = -1, -1;
    for (size_t k = 0; k < 2; k++)
        if ((t = single_producer(sc, in_name(sc, *mul, k), "Transpose")) >= 0)
            return t;
    return -1;
}

/* The chain ending at MatMul node f, or 0. */
static int match(const scan_ctx *sc, int f, int *ch)
{
    const Onnx__NodeProto *fn = sc->g->node[f];
    int mask_in = -1;
    for (int k = 0; k < CH_N; k++)
        ch[k] = -1;
    ch[CH_FINAL] = f;
    ch[CH_KIND] = CHAIN_ATTENTION;
    if (fn->n_input != 2 || (ch[CH_SOFTMAX] = single_producer(sc, in_name(sc, f, 0), "Softmax")) < 0)
        return 0;
    const char *x = in_name(sc, ch[CH_SOFTMAX], 0);
    if ((ch[CH_ADD] = single_producer(sc, x, "Add")) >= 0) {
        for (int k = 0; k < 2 && mask_in < 0; k++) {
            const char *a = in_name(sc, ch[CH_ADD], (size_t)k);
            if (single_producer(sc, a, "MatMul") >= 0 || single_producer(sc, a, "Mul") >= 0 ||
                single_producer(sc, a, "Div") >= 0) {
                x = a;
                mask_in = 1 - k;
            }
        }
        if (mask_in < 0)
            return 0;
    }
    if ((ch[CH_SCALE] = single_producer(sc, x, "Mul")) < 0)
        ch[CH_SCALE] = single_producer(sc, x, "Div");
    if (ch[CH_SCALE] >= 0)
        x = in_name(sc, ch[CH_SCALE], 0); /* Div(scores, c), Mul(scores, c) or, below, Mul(c, scores) */
    if (ch[CH_SCALE] >= 0 && single_producer(sc, x, "MatMul") < 0 && !strcmp(sc->g->node[ch[CH_SCALE]]->op_type, "Mul"))
        x = in_name(sc, ch[CH_SCALE], 1);
    if ((ch[CH_SCORES] = single_producer(sc, x, "MatMul")) < 0 || sc->g->node[ch[CH_SCORES]]->n_input != 2)
        return 0;
    if ((ch[CH_MUL_Q] = single_producer(sc, in_name(sc, ch[CH_SCORES], 0), "Mul")) >= 0 &&
        sc->g->node[ch[CH_MUL_Q]]->n_input != 2)
        ch[CH_MUL_Q] = -1;
    return (ch[CH_TRANSPOSE] = transpose_behind(sc, in_name(sc, ch[CH_SCORES], 1), &ch[CH_MUL_K])) >= 0;
}

/* ---- batch norm + activation ---- */

/* The consumers of name (a graph output as -1), at most max of them into
 * c; their count. */
static size_t consumers(const scan_ctx *sc, const char *name, int *c, size_t max)
{
    name_ref key = {name, 0};
    const name_ref *hit = *name ? bsearch(&key, sc->uses, sc->n_uses, sizeof key, ref_cmp) : NULL;
    size_t n = 0;
    if (!hit)
        return 0;
    while (hit > sc->uses && !strcmp(hit[-1].name, name))
        hit--;
    for (; hit < sc->uses + sc->n_uses && !strcmp(hit->name, name); hit++, n++)
        if (n < max)
            c[n] = hit->node;
    return n;
}

/* Node i is op of the default domain with n_in inputs, one output and no
 * attributes. */
static int plain(const scan_ctx *sc, int i, const char *op, size_t n_in)
{
    const Onnx__NodeProto *n = i >= 0 ? sc->g->node[i] : NULL;
    return n && !strcmp(S(n->op_type), op) && (!n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx")) &&
           n->n_input == n_in && n->n_output == 1 && !n->n_attribute;
}

/* Whether name is a one-float constant equal to v: an initializer or a
 * Constant node's value (read here, before either is imported). */
static int const_is(const scan_ctx *sc, ox_import *im, const char *name, float v)
{
    const Onnx__TensorProto *t = NULL;
    for (size_t i = 0; i < sc->g->n_initializer && !t; i++)
        if (!strcmp(S(sc->g->initializer[i]->name), name))
            t = sc->g->initializer[i];
    int k = t ? -1 : single_producer(sc, name, "Constant");
    if (k >= 0 && sc->g->node[k]->n_attribute == 1 && !strcmp(S(sc->g->node[k]->attribute[0]->name), "value"))
        t = sc->g->node[k]->attribute[0]->t;
    ox_const c = {0};
    if (!t || teeny__ox_tensor_load(im->ctx, t, NULL, name, &c) != TEENY_OK) {
        teeny__clear_error(im->ctx);
        return 0;
    }
    int is = c.type == OX_F32 && c.numel == 1 && teeny__ox_get_f(&c, 0) == v;
    teeny__ox_const_free(&c);
    return is;
}

/* Batch norm or Conv node b whose output only Relu, or only Sigmoid and
 * Mul(x, Sigmoid(x)), read, or a Conv's only HardSwish or Clip(0, 6)
 * (ReLU6, whose Clip the convolution's store computes; other bounds
 * stay a node): its act, and those nodes absorbed by it. */
static void match_act(const scan_ctx *sc, ox_import *im, int b)
{
    const Onnx__NodeProto *bn = sc->g->node[b];
    const char *y = bn->n_output ? S(bn->output[0]) : "";
    int c[2], s, m = -1, act, conv = !strcmp(S(bn->op_type), "Conv");
    for (size_t k = 1; k < bn->n_output; k++)
        if (*S(bn->output[k])) /* the training outputs */
            return;
    size_t n = consumers(sc, y, c, 2);
    if (n == 1 && plain(sc, c[0], "Relu", 1)) {
        act = TEENY_ACT_RELU;
        s = c[0];
    } else if (n == 1 && conv && plain(sc, c[0], "HardSwish", 1)) {
        act = TEENY_ACT_HARDSWISH;
        s = c[0];
    } else if (n == 1 && conv && plain(sc, c[0], "Clip", 3) && const_is(sc, im, in_name(sc, c[0], 1), 0.0f) &&
               const_is(sc, im, in_name(sc, c[0], 2), 6.0f)) {
        act = TEENY_ACT_CLIP;
        s = c[0];
    } else if (n == 2 && c[0] != c[1]) {
        s = plain(sc, c[0], "Sigmoid", 1) ? c[0] : c[1];
        m = s == c[0] ? c[1] : c[0];
        const char *so = plain(sc, s, "Sigmoid", 1) ? S(sc->g->node[s]->output[0]) : "";
        if (!*so || !plain(sc, m, "Mul", 2) || uses_of(sc, so) != 1)
            return;
        const Onnx__NodeProto *mn = sc->g->node[m];
        if (!(!strcmp(S(mn->input[0]), y) && !strcmp(S(mn->input[1]), so)) &&
            !(!strcmp(S(mn->input[1]), y) && !strcmp(S(mn->input[0]), so)))
            return;
        act = TEENY_ACT_SILU;
    } else {
        return;
    }
    if (im->defer[b] >= 0 || im->defer[s] >= 0 || (m >= 0 && im->defer[m] >= 0))
        return;
    im->fused_act[b] = act;
    im->absorbed_by[s] = b;
    if (m >= 0)
        im->absorbed_by[m] = b;
}

int teeny__ox_act_of(const ox_import *im, int i)
{
    return im->fused_act ? im->fused_act[i] : TEENY_ACT_NONE;
}

teeny_act_params teeny__ox_act_params_of(const ox_import *im, int i)
{
    teeny_act_params p = teeny_act_defaults((teeny_act)teeny__ox_act_of(im, i));
    if (p.act == TEENY_ACT_CLIP) /* ReLU6's bounds: match_act takes no other */
        p.alpha = 0.0f, p.beta = 6.0f;
    return p;
}

int teeny__ox_act_absorbed(const ox_import *im, int i)
{
    return im->absorbed_by && im->absorbed_by[i] >= 0;
}

teeny_status teeny__ox_act_absorb(ox_import *im)
{
    const Onnx__NodeProto *bn = im->graph->node[im->absorbed_by[im->node_index]];
    if (!strcmp(S(im->node->op_type), "Sigmoid"))
        return TEENY_OK; /* read by the absorbed Mul only */
    int v = teeny__ox_find(im, S(bn->output[0]));
    if (v < 0 || im->vals[v].kind != OX_RUNTIME)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "the output of its batch norm or Conv is not a run-time value");
    return teeny__ox_out_runtime(im, 0, im->vals[v].node, &im->vals[v].shape);
}

/* ---- GELU ---- */

/* The exact GELU as PyTorch's TorchScript exporter writes it (opsets
 * before 20 have no Gelu) ending at Mul node f:
 *   Div(x, c1) or Mul(x, c1) -> Erf -> Add(., c2) -> Mul(x, .) -> Mul(., c3)
 * every value but x consumed once; the constants (c1 sqrt 2, or 1/sqrt 2
 * for the Mul; c2 1, c3 0.5) are checked at import. 0 where not so. */
static int match_gelu(const scan_ctx *sc, int f, int *ch)
{
    for (int k = 0; k < CH_N; k++)
        ch[k] = -1;
    ch[CH_FINAL] = f;
    ch[CH_KIND] = CHAIN_GELU;
    if (!plain(sc, f, "Mul", 2))
        return 0;
    for (int k = 0; k < 2 && ch[GE_MUL] < 0; k++) {
        int m = single_producer(sc, in_name(sc, f, (size_t)k), "Mul");
        ch[GE_MUL] = plain(sc, m, "Mul", 2) ? m : -1;
    }
    for (int k = 0; k < 2 && ch[GE_MUL] >= 0; k++) {
        const char *x = in_name(sc, ch[GE_MUL], (size_t)(1 - k));
        int a = single_producer(sc, in_name(sc, ch[GE_MUL], (size_t)k), "Add");
        for (int j = 0; j < 2 && plain(sc, a, "Add", 2); j++) {
            int e = single_producer(sc, in_name(sc, a, (size_t)j), "Erf"), d = -1;
            if (plain(sc, e, "Erf", 1) && (d = single_producer(sc, in_name(sc, e, 0), "Div")) < 0)
                d = single_producer(sc, in_name(sc, e, 0), "Mul");
            if (d < 0 || !(plain(sc, d, "Div", 2) || plain(sc, d, "Mul", 2)) ||
                (strcmp(in_name(sc, d, 0), x) && (strcmp(sc->g->node[d]->op_type, "Mul") || strcmp(in_name(sc, d, 1), x))))
                continue;
            ch[GE_SCALE] = d;
            ch[GE_ERF] = e;
            ch[GE_ADD] = a;
            return 1;
        }
    }
    return 0;
}

/* The outer values node's graph attributes (If's branches, nested ones
 * too) read, into out (NULL: counted only), each as a use by no node, as
 * a graph output is: a value a branch reads stays whole, never fused
 * away. */
static size_t branch_uses(const Onnx__NodeProto *n, name_ref *out)
{
    size_t count = 0;
    for (size_t a = 0; a < n->n_attribute; a++) {
        const Onnx__GraphProto *g = n->attribute[a]->g;
        for (size_t i = 0; g && i < g->n_output; i++, count++)
            if (out)
                out[count] = (name_ref){S(g->output[i]->name), -1};
        for (size_t j = 0; g && j < g->n_node; j++) {
            for (size_t k = 0; k < g->node[j]->n_input; k++, count++)
                if (out)
                    out[count] = (name_ref){S(g->node[j]->input[k]), -1};
            count += branch_uses(g->node[j], out ? out + count : NULL);
        }
    }
    return count;
}

teeny_status teeny__ox_fuse_scan(ox_import *im)
{
    const Onnx__GraphProto *g = im->graph;
    scan_ctx sc = {g, NULL, NULL, 0, 0};
    size_t n_uses = g->n_output, n_prod = 0;
    teeny_status st = TEENY_OK;
    for (size_t i = 0; i < g->n_node; i++) {
        n_uses += g->node[i]->n_input + branch_uses(g->node[i], NULL);
        n_prod += g->node[i]->n_output;
    }
    im->defer = teeny__calloc(g->n_node ? g->n_node : 1, sizeof *im->defer);
    im->chain = teeny__calloc(g->n_node ? g->n_node * CH_N : 1, sizeof *im->chain);
    im->fused_act = teeny__calloc(g->n_node ? g->n_node : 1, sizeof *im->fused_act);
    im->absorbed_by = teeny__calloc(g->n_node ? g->n_node : 1, sizeof *im->absorbed_by);
    sc.uses = teeny__malloc((n_uses ? n_uses : 1) * sizeof *sc.uses);
    sc.producers = teeny__malloc((n_prod ? n_prod : 1) * sizeof *sc.producers);
    if (!im->defer || !im->chain || !im->fused_act || !im->absorbed_by || !sc.uses || !sc.producers) {
        st = teeny__error(im->ctx, TEENY_ERR_NOMEM, "out of host memory");
        goto cleanup;
    }
    for (size_t i = 0; i < g->n_output; i++)
        sc.uses[sc.n_uses++] = (name_ref){S(g->output[i]->name), -1};
    for (size_t i = 0; i < g->n_node; i++) {
        im->defer[i] = im->absorbed_by[i] = -1;
        for (size_t k = 0; k < g->node[i]->n_input; k++)
            if (*S(g->node[i]->input[k]))
                sc.uses[sc.n_uses++] = (name_ref){g->node[i]->input[k], (int)i};
        sc.n_uses += branch_uses(g->node[i], sc.uses + sc.n_uses);
        for (size_t k = 0; k < g->node[i]->n_output; k++)
            if (*S(g->node[i]->output[k]))
                sc.producers[sc.n_producers++] = (name_ref){g->node[i]->output[k], (int)i};
    }
    qsort(sc.uses, sc.n_uses, sizeof *sc.uses, ref_cmp);
    qsort(sc.producers, sc.n_producers, sizeof *sc.producers, ref_cmp);
    for (size_t i = 0; i < g->n_node && g->n_node <= INT32_MAX; i++) {
        int *ch = &im->chain[i * CH_N];
        const char *op = S(g->node[i]->op_type);
        if ((g->node[i]->domain && *g->node[i]->domain) ||
            !(!strcmp(op, "MatMul") ? match(&sc, (int)i, ch) : !strcmp(op, "Mul") && match_gelu(&sc, (int)i, ch)))
            continue;
        int taken = 0;
        for (int k = 0; k < CH_KIND; k++)
            taken |= ch[k] >= 0 && im->defer[ch[k]] >= 0;
        for (int k = 0; k < CH_KIND && !taken; k++)
            if (ch[k] >= 0)
                im->defer[ch[k]] = (int)i;
    }
    for (size_t i = 0; i < g->n_node && g->n_node <= INT32_MAX; i++)
        if ((!strcmp(S(g->node[i]->op_type), "BatchNormalization") || !strcmp(S(g->node[i]->op_type), "Conv")) &&
            (!g->node[i]->domain || !*g->node[i]->domain || !strcmp(g->node[i]->domain, "ai.onnx")))
            match_act(&sc, im, (int)i);
cleanup:
    teeny__free(sc.uses);
    teeny__free(sc.producers);
    return st;
}
