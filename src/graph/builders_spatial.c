/*
 * builders_b.c -- the graph builders of the ops ONNX import phase 2 added
 * for conv nets and attention models (group B: pooling options,
 * convolution transpose, Gemm, resize, attention masks, the losses'
 * options). Like builders.c: attributes, then teeny__graph_node.
 */
#include "graph_internal.h"

/* ---- pooling ---- */

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

/* ---- transposed convolution ---- */

teeny_status teeny_graph_conv_transpose2d(teeny_graph *g, const char *name, teeny_node x, int out_channels,
                                          int kernel_h, int kernel_w, const teeny_conv_transpose2d_params *p, int bias,
                                          teeny_node *out)
{
    static const teeny_conv_transpose2d_params defaults = TEENY_CONV_TRANSPOSE2D_PARAMS_INIT;
    if (!p)
        p = &defaults;
    if (out_channels < 1 || kernel_h < 1 || kernel_w < 1 || out_channels > (1 << 24) || kernel_h > (1 << 24) ||
        kernel_w > (1 << 24)) {
        if (out)
            *out = -1;
        return teeny__error(teeny__graph_ctx(g), TEENY_ERR_ARG,
                            "teeny_graph_conv_transpose2d: out_channels %d, kernel %dx%d must be 1..2^24", out_channels,
                            kernel_h, kernel_w);
    }
    teeny__op_attrs at = {
        .conv_transpose2d = teeny__conv_transpose2d_attrs_of(p, bias != 0, out_channels, kernel_h, kernel_w)};
    return teeny__graph_node(g, TEENY__OP_CONV_TRANSPOSE2D, name, 1, &x, &at, out);
}

/* ---- resize (ONNX phase 3) ---- */

teeny_status teeny_graph_resize2d(teeny_graph *g, const char *name, teeny_node x, const teeny_resize2d_params *p,
                                  teeny_node *out)
{
    if (!p) {
        if (out)
            *out = -1;
        return teeny__error(teeny__graph_ctx(g), TEENY_ERR_ARG, "teeny_graph_resize2d: p is NULL");
    }
    teeny__op_attrs at = {.resize2d = {(int)p->mode, (int)p->coord, (int)p->rounding, {p->size[0], p->size[1]},
                                       {p->scale[0], p->scale[1]}}};
    return teeny__graph_node(g, TEENY__OP_RESIZE2D, name, 1, &x, &at, out);
}
