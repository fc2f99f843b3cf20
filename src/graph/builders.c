/*
 * builders.c -- the graph builders (teeny_graph_<op>, the public API) of
 * the element-wise and broadcasting ops, reductions, normalizations,
 * softmax, the linear layer and matmul, the losses, channel concatenation
 * and attention; builders_spatial.c has the convolutions, pools and
 * resizing, builders_layout.c constants and the layout ops. Each turns
 * its arguments into the op's attributes (teeny__op_attrs, ops.h) and
 * adds a node through teeny__graph_node, which runs the op's infer and
 * creates its parameters. Builders are graph code: the op families never
 * call into graph/, so a new op's builder goes here or beside its kind
 * (one function, a few lines).
 */
#include <stdio.h>

#include "graph_internal.h"

/* A builder's NULL argument (graph_internal.h). */
teeny_status teeny__graph_null_arg(teeny_graph *g, const char *fn, const char *what, teeny_node *out)
{
    if (out)
        *out = -1;
    return teeny__error(teeny__graph_ctx(g), TEENY_ERR_ARG, "%s: %s is NULL", fn, what);
}

/* ---- elementwise and broadcasting ---- */

teeny_status teeny_graph_activation(teeny_graph *g, const char *name, teeny_node x, teeny_act act, teeny_node *out)
{
    teeny__op_attrs at = {.activation = teeny__act_attrs(act)};
    return teeny__graph_node(g, TEENY__OP_ACTIVATION, name, 1, &x, &at, out);
}

teeny_status teeny_graph_activation_ex(teeny_graph *g, const char *name, teeny_node x, const teeny_act_params *p,
                                       teeny_node *out)
{
    if (!p)
        return teeny__graph_null_arg(g, "teeny_graph_activation_ex", "p", out);
    teeny__op_attrs at = {.activation = {p->act, p->alpha, p->beta}};
    return teeny__graph_node(g, TEENY__OP_ACTIVATION, name, 1, &x, &at, out);
}

teeny_status teeny_graph_add(teeny_graph *g, const char *name, teeny_node a, teeny_node b, teeny_node *out)
{
    teeny_node in[2] = {a, b};
    return teeny__graph_node(g, TEENY__OP_ADD, name, 2, in, NULL, out);
}

teeny_status teeny_graph_mul(teeny_graph *g, const char *name, teeny_node a, teeny_node b, teeny_node *out)
{
    teeny_node in[2] = {a, b};
    return teeny__graph_node(g, TEENY__OP_MUL, name, 2, in, NULL, out);
}

teeny_status teeny_graph_binary(teeny_graph *g, const char *name, teeny_binary_op op, teeny_node a, teeny_node b,
                                teeny_node *out)
{
    teeny_node in[2] = {a, b};
    teeny__op_attrs at = {.binary = {op}};
    return teeny__graph_node(g, TEENY__OP_BINARY, name, 2, in, &at, out);
}

teeny_status teeny_graph_reduce(teeny_graph *g, const char *name, teeny_node x, const teeny_reduce_params *p,
                                teeny_node *out)
{
    if (!p)
        return teeny__graph_null_arg(g, "teeny_graph_reduce", "p", out);
    teeny__op_attrs at = {.reduce = {p->axes, p->keepdims, p->mean}};
    return teeny__graph_node(g, TEENY__OP_REDUCE, name, 1, &x, &at, out);
}

/* ---- batchnorm ---- */

teeny_status teeny_graph_batchnorm(teeny_graph *g, const char *name, teeny_node x, float momentum, float eps,
                                   teeny_node *out)
{
    teeny__op_attrs at = {.batchnorm = {momentum, eps, TEENY_ACT_NONE}};
    return teeny__graph_node(g, TEENY__OP_BATCHNORM, name, 1, &x, &at, out);
}

/* The same op with its activation attribute (checked by the op's infer). */
teeny_status teeny_graph_batchnorm_act(teeny_graph *g, const char *name, teeny_node x, float momentum, float eps,
                                       teeny_act act, teeny_node *out)
{
    teeny__op_attrs at = {.batchnorm = {momentum, eps, (int)act}};
    return teeny__graph_node(g, TEENY__OP_BATCHNORM, name, 1, &x, &at, out);
}

/* ---- softmax, layer norm ---- */

/* axis in [-rank, rank) of x as 0..rank-1 (x checked); -1 when outside. */
static int norm_axis(teeny_graph *g, teeny_node x, int axis)
{
    if (!g || x < 0 || x >= g->n_nodes)
        return axis;
    int r = g->nodes[x].shapes.out.ndim;
    return axis < -r || axis >= r ? -1 : axis < 0 ? axis + r : axis;
}

teeny_status teeny_graph_softmax(teeny_graph *g, const char *name, teeny_node x, int axis, int log, teeny_node *out)
{
    teeny__op_attrs at = {.softmax = {norm_axis(g, x, axis), log}};
    return teeny__graph_node(g, TEENY__OP_SOFTMAX, name, 1, &x, &at, out);
}

teeny_status teeny_graph_softmax_ex(teeny_graph *g, const char *name, teeny_node x, const teeny_softmax_params *p,
                                    teeny_node *out)
{
    if (!p)
        return teeny__graph_null_arg(g, "teeny_graph_softmax_ex", "p", out);
    teeny__op_attrs at = {.softmax = {norm_axis(g, x, p->axis), p->log, p->masked_zero}};
    return teeny__graph_node(g, TEENY__OP_SOFTMAX, name, 1, &x, &at, out);
}

teeny_status teeny_graph_layernorm(teeny_graph *g, const char *name, teeny_node x, int axis, float eps, int bias,
                                   teeny_node *out)
{
    teeny__op_attrs at = {.layernorm = {norm_axis(g, x, axis), eps, bias != 0}};
    return teeny__graph_node(g, TEENY__OP_LAYERNORM, name, 1, &x, &at, out);
}

/* ---- linear, matmul and loss ---- */

teeny_status teeny_graph_linear(teeny_graph *g, const char *name, teeny_node x, int out_features, int bias,
                                teeny_node *out)
{
    teeny__op_attrs at = {.linear = {out_features, bias != 0}};
    return teeny__graph_node(g, TEENY__OP_LINEAR, name, 1, &x, &at, out);
}

teeny_status teeny_graph_matmul(teeny_graph *g, const char *name, teeny_node a, teeny_node b, teeny_node *out)
{
    teeny_node in[2] = {a, b};
    return teeny__graph_node(g, TEENY__OP_MATMUL, name, 2, in, NULL, out);
}

teeny_status teeny_graph_softmax_cross_entropy(teeny_graph *g, const char *name, teeny_node logits, teeny_node labels,
                                               teeny_node *out)
{
    teeny_node in[2] = {logits, labels};
    return teeny__graph_node(g, TEENY__OP_SOFTMAX_CE, name, 2, in, NULL, out);
}

teeny_status teeny_graph_softmax_cross_entropy_ex(teeny_graph *g, const char *name, teeny_node logits,
                                                  teeny_node labels, teeny_node weights, const teeny_ce_params *p,
                                                  teeny_node *out)
{
    teeny_node in[3] = {logits, labels, weights};
    teeny__op_attrs at = {.softmax_ce = teeny__softmax_ce_attrs_of(p)};
    return teeny__graph_node(g, TEENY__OP_SOFTMAX_CE, name, weights < 0 ? 2 : 3, in, &at, out);
}

/* ---- concatenation ---- */

/* More than TEENY__OP_MAX_SLOTS inputs become a chain of concat nodes (the
 * first takes 4 inputs, each later one the previous result plus up to 3
 * more) named "<name>.part<k>", the last one carrying name itself; the
 * gradient of a chain is the same channel copy as one wide concat. */
teeny_status teeny_graph_concat(teeny_graph *g, const char *name, int n, const teeny_node *xs, teeny_node *out)
{
    teeny_ctx *ctx = teeny__graph_ctx(g);
    if (!g || !out || !xs || n < 1) {
        if (out)
            *out = -1;
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_graph_concat: %s",
                            !g     ? "graph is NULL"
                            : !out ? "out is NULL"
                            : !xs  ? "inputs array is NULL"
                                   : "needs at least one input");
    }
    return teeny__graph_concat_chain(g, name, TEENY__OP_CONCAT, 0, n, xs, out);
}

teeny_status teeny__graph_concat_chain(teeny_graph *g, const char *name, teeny__op_id op, int axis, int n,
                                       const teeny_node *xs, teeny_node *out)
{
    teeny_node part[TEENY__OP_MAX_SLOTS], acc = -1;
    int done = 0, k = 0;
    teeny_status st = TEENY_OK;
    while (done < n && st == TEENY_OK) {
        int m = 0;
        char pname[128], *pn = NULL;
        if (acc >= 0)
            part[m++] = acc;
        while (m < TEENY__OP_MAX_SLOTS && done < n)
            part[m++] = xs[done++];
        if (done < n && name && *name) {
            snprintf(pname, sizeof pname, "%s.part%d", name, k++);
            pn = pname;
        }
        teeny__op_attrs at = op == TEENY__OP_CONCAT ? (teeny__op_attrs){.concat = {m, 0}}
                                                    : (teeny__op_attrs){.cat = {m, axis, 0}};
        st = teeny__graph_node(g, op, done < n ? pn : name, m, part, &at, &acc);
    }
    *out = st == TEENY_OK ? acc : -1;
    return st;
}

teeny_status teeny_graph_slice_channels(teeny_graph *g, const char *name, teeny_node x, int start, int count,
                                        teeny_node *out)
{
    teeny__op_attrs at = {.slice = {start, count}};
    return teeny__graph_node(g, TEENY__OP_SLICE_CHANNELS, name, 1, &x, &at, out);
}

/* ---- attention ---- */

teeny_status teeny_graph_attention(teeny_graph *g, const char *name, teeny_node q, teeny_node k, teeny_node v,
                                   float scale, teeny_node *out)
{
    teeny_node in[3] = {q, k, v};
    teeny__op_attrs at = {.attention = {scale}};
    return teeny__graph_node(g, TEENY__OP_ATTENTION, name, 3, in, &at, out);
}

teeny_status teeny_graph_attention_ex(teeny_graph *g, const char *name, teeny_node q, teeny_node k, teeny_node v,
                                      teeny_node mask, const teeny_attention_params *p, teeny_node *out)
{
    static const teeny_attention_params defaults = TEENY_ATTENTION_PARAMS_INIT;
    teeny_node in[4] = {q, k, v, mask};
    if (!p)
        p = &defaults;
    teeny__op_attrs at = {.attention = {p->scale, p->causal, p->causal_offset, p->heads, p->softcap, 1}};
    return teeny__graph_node(g, TEENY__OP_ATTENTION, name, mask < 0 ? 3 : 4, in, &at, out);
}

teeny_status teeny_graph_psa_attention(teeny_graph *g, const char *name, teeny_node qkv, int heads, int key_dim,
                                       teeny_node *out)
{
    teeny__op_attrs at = {.psa = {heads, key_dim}};
    return teeny__graph_node(g, TEENY__OP_PSA_ATTENTION, name, 1, &qkv, &at, out);
}

teeny_status teeny_graph_psa_pack_qkv(teeny_graph *g, const char *name, teeny_node qkv, int heads, int key_dim,
                                      teeny_node *out)
{
    teeny__op_attrs at = {.psa = {heads, key_dim}};
    return teeny__graph_node(g, TEENY__OP_PSA_PACK_QKV, name, 1, &qkv, &at, out);
}

teeny_status teeny_graph_psa_extract_v(teeny_graph *g, const char *name, teeny_node qkv, int heads, int key_dim,
                                       teeny_node *out)
{
    teeny__op_attrs at = {.psa = {heads, key_dim}};
    return teeny__graph_node(g, TEENY__OP_PSA_EXTRACT_V, name, 1, &qkv, &at, out);
}

teeny_status teeny_graph_psa_merge_attn(teeny_graph *g, const char *name, teeny_node o_lo, teeny_node o_hi, int heads,
                                        int height, int width, teeny_node *out)
{
    teeny__op_attrs at = {.psa_merge = {heads, height, width}};
    teeny_node in[2] = {o_lo, o_hi};
    return teeny__graph_node(g, TEENY__OP_PSA_MERGE_ATTN, name, 2, in, &at, out);
}
