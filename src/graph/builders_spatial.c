/*
 * builders_spatial.c -- the graph builders of the ops over NCHW planes
 * (teeny_graph_<op>, the public API): convolution and transposed
 * convolution, resizing, the pools (max, average, global, MaxPool's
 * indices). Like builders.c: attributes, then teeny__graph_node.
 */
#include "graph_internal.h"

/* ---- convolution ---- */

/* out_channels and the kernel's sizes in 1..2^24; else *out = -1 and the
 * error, naming fn. */
static int sizes_ok(teeny_graph *g, const char *fn, int out_channels, int kernel_h, int kernel_w, teeny_node *out)
{
    const int most = 1 << 24;
    if (out_channels >= 1 && kernel_h >= 1 && kernel_w >= 1 && out_channels <= most && kernel_h <= most &&
        kernel_w <= most)
        return 1;
    if (out)
        *out = -1;
    teeny__error(teeny__graph_ctx(g), TEENY_ERR_ARG, "%s: out_channels %d, kernel %dx%d must be 1..2^24", fn,
                 out_channels, kernel_h, kernel_w);
    return 0;
}

static teeny_status conv2d_node(teeny_graph *g, const char *fn, const char *name, teeny_node x, int out_channels,
                                int kernel_h, int kernel_w, const teeny_conv2d_params *p, int bias,
                                const teeny_act_params *act, teeny_node *out)
{
    static const teeny_conv2d_params defaults = TEENY_CONV2D_PARAMS_INIT;
    if (!p)
        p = &defaults;
    if (!sizes_ok(g, fn, out_channels, kernel_h, kernel_w, out))
        return TEENY_ERR_ARG;
    teeny__op_attrs at = {
        .conv2d = teeny__conv2d_attrs_of(p, act->act, bias != 0, out_channels, kernel_h, kernel_w, 0)};
    at.conv2d.act_alpha = act->alpha;
    at.conv2d.act_beta = act->beta;
    return teeny__graph_node(g, TEENY__OP_CONV2D, name, 1, &x, &at, out);
}

teeny_status teeny_graph_conv2d(teeny_graph *g, const char *name, teeny_node x, int out_channels, int kernel_h,
                                int kernel_w, const teeny_conv2d_params *p, int bias, teeny_node *out)
{
    const teeny_act_params none = teeny_act_defaults(TEENY_ACT_NONE);
    return conv2d_node(g, "teeny_graph_conv2d", name, x, out_channels, kernel_h, kernel_w, p, bias, &none, out);
}

teeny_status teeny_graph_conv2d_act(teeny_graph *g, const char *name, teeny_node x, int out_channels, int kernel_h,
                                    int kernel_w, const teeny_conv2d_params *p, int bias, teeny_act act,
                                    teeny_node *out)
{
    static const char fn[] = "teeny_graph_conv2d_act";
    if (act != TEENY_ACT_NONE && act != TEENY_ACT_RELU && act != TEENY_ACT_SILU) {
        if (out)
            *out = -1;
        return teeny__error(teeny__graph_ctx(g), TEENY_ERR_ARG, "%s: act %d must be TEENY_ACT_NONE, TEENY_ACT_RELU or "
                            "TEENY_ACT_SILU", fn, (int)act);
    }
    const teeny_act_params params = teeny_act_defaults(act);
    return conv2d_node(g, fn, name, x, out_channels, kernel_h, kernel_w, p, bias, &params, out);
}

teeny_status teeny_graph_conv2d_act_ex(teeny_graph *g, const char *name, teeny_node x, int out_channels,
                                       int kernel_h, int kernel_w, const teeny_conv2d_params *p, int bias,
                                       const teeny_act_params *act, teeny_node *out)
{
    if (!act)
        return teeny__graph_null_arg(g, "teeny_graph_conv2d_act_ex", "act", out);
    return conv2d_node(g, "teeny_graph_conv2d_act_ex", name, x, out_channels, kernel_h, kernel_w, p, bias, act, out);
}

teeny_status teeny_graph_conv_transpose2d(teeny_graph *g, const char *name, teeny_node x, int out_channels,
                                          int kernel_h, int kernel_w, const teeny_conv_transpose2d_params *p, int bias,
                                          teeny_node *out)
{
    static const teeny_conv_transpose2d_params defaults = TEENY_CONV_TRANSPOSE2D_PARAMS_INIT;
    if (!p)
        p = &defaults;
    if (!sizes_ok(g, "teeny_graph_conv_transpose2d", out_channels, kernel_h, kernel_w, out))
        return TEENY_ERR_ARG;
    teeny__op_attrs at = {
        .conv_transpose2d = teeny__conv_transpose2d_attrs_of(p, bias != 0, out_channels, kernel_h, kernel_w)};
    return teeny__graph_node(g, TEENY__OP_CONV_TRANSPOSE2D, name, 1, &x, &at, out);
}

/* ---- resize ---- */

teeny_status teeny_graph_resize2d(teeny_graph *g, const char *name, teeny_node x, const teeny_resize2d_params *p,
                                  teeny_node *out)
{
    if (!p)
        return teeny__graph_null_arg(g, "teeny_graph_resize2d", "p", out);
    teeny__op_attrs at = {.resize2d = {(int)p->mode, (int)p->coord, (int)p->rounding, {p->size[0], p->size[1]},
                                       {p->scale[0], p->scale[1]}}};
    return teeny__graph_node(g, TEENY__OP_RESIZE2D, name, 1, &x, &at, out);
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

teeny_status teeny_graph_global_maxpool(teeny_graph *g, const char *name, teeny_node x, teeny_node *out)
{
    return teeny__graph_node(g, TEENY__OP_GLOBAL_MAXPOOL, name, 1, &x, NULL, out);
}

teeny_status teeny_graph_maxpool2d_indices(teeny_graph *g, const char *name, teeny_node x,
                                           const teeny_pool2d_params *p, int column_major, teeny_node *out)
{
    static const teeny_pool2d_params defaults = TEENY_POOL2D_PARAMS_INIT;
    teeny__op_attrs at = {.pool2d = teeny__pool2d_attrs_of(p ? p : &defaults)};
    at.pool2d.storage_order = column_major;
    return teeny__graph_node(g, TEENY__OP_MAXPOOL2D_INDICES, name, 1, &x, &at, out);
}
