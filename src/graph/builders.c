/*
 * builders.c -- the graph builders of every op (teeny_graph_<op>, the
 * public API): each turns its arguments into the op's attributes
 * (teeny__op_attrs, ops.h) and adds a node through teeny__graph_node,
 * which runs the op's infer and creates its parameters. Builders are
 * graph code: the op families never call into graph/, so a new op's
 * builder goes here (one function, a few lines).
 */
#include <stdio.h>

#include "graph_internal.h"

/* ---- elementwise ---- */

teeny_status teeny_graph_activation(teeny_graph *g, const char *name, teeny_node x, teeny_act act, teeny_node *out)
{
    teeny__op_attrs at = {.activation = teeny__act_attrs(act)};
    return teeny__graph_node(g, TEENY__OP_ACTIVATION, name, 1, &x, &at, out);
}

teeny_status teeny_graph_activation_ex(teeny_graph *g, const char *name, teeny_node x, const teeny_act_params *p,
                                       teeny_node *out)
{
    if (!p) {
        if (out)
            *out = -1;
        return teeny__error(teeny__graph_ctx(g), TEENY_ERR_ARG, "teeny_graph_activation_ex: p is NULL");
    }
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

/* ---- pooling ---- */

static teeny_status graph_pool(teeny_graph *g, teeny__op_id op, const char *name, teeny_node x,
                               const teeny_pool2d_params *p, teeny_node *out)
{
    static const teeny_pool2d_params defaults = TEENY_POOL2D_PARAMS_INIT;
    if (!p)
        p = &defaults;
    teeny__op_attrs at = {.pool2d = teeny__pool2d_attrs_of(p)};
    return teeny__graph_node(g, op, name, 1, &x, &at, out);
}

teeny_status teeny_graph_maxpool2d(teeny_graph *g, const char *name, teeny_node x, const teeny_pool2d_params *p,
                                   teeny_node *out)
{
    return graph_pool(g, TEENY__OP_MAXPOOL2D, name, x, p, out);
}

teeny_status teeny_graph_avgpool2d(teeny_graph *g, const char *name, teeny_node x, const teeny_pool2d_params *p,
                                   teeny_node *out)
{
    return graph_pool(g, TEENY__OP_AVGPOOL2D, name, x, p, out);
}

teeny_status teeny_graph_global_avgpool(teeny_graph *g, const char *name, teeny_node x, teeny_node *out)
{
    return teeny__graph_node(g, TEENY__OP_GLOBAL_AVGPOOL, name, 1, &x, NULL, out);
}

/* ---- linear and loss ---- */

teeny_status teeny_graph_linear(teeny_graph *g, const char *name, teeny_node x, int out_features, int bias,
                                teeny_node *out)
{
    teeny__op_attrs at = {.linear = {out_features, bias != 0}};
    return teeny__graph_node(g, TEENY__OP_LINEAR, name, 1, &x, &at, out);
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

/* ---- convolution ---- */

teeny_status teeny_graph_conv2d(teeny_graph *g, const char *name, teeny_node x, int out_channels, int kernel_h,
                                int kernel_w, const teeny_conv2d_params *p, int bias, teeny_node *out)
{
    static const teeny_conv2d_params defaults = TEENY_CONV2D_PARAMS_INIT;
    if (!p)
        p = &defaults;
    if (out_channels < 1 || kernel_h < 1 || kernel_w < 1 || out_channels > (1 << 24) || kernel_h > (1 << 24) ||
        kernel_w > (1 << 24)) {
        if (out)
            *out = -1;
        return teeny__error(teeny__graph_ctx(g), TEENY_ERR_ARG,
                            "teeny_graph_conv2d: out_channels %d, kernel %dx%d must be 1..2^24", out_channels, kernel_h,
                            kernel_w);
    }
    teeny__op_attrs at = {
        .conv2d = teeny__conv2d_attrs_of(p, TEENY_ACT_NONE, bias != 0, out_channels, kernel_h, kernel_w, 0)};
    return teeny__graph_node(g, TEENY__OP_CONV2D, name, 1, &x, &at, out);
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
