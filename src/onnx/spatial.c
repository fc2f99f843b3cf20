/*
 * spatial.c -- the ONNX ops over NCHW planes that become graph nodes:
 * Conv, ConvTranspose, MaxPool (with its Indices output), AveragePool,
 * GlobalAveragePool and GlobalMaxPool, in 1-D and 2-D (a 1-D [N, C, L]
 * value is the plane [L, 1]). The spatial attributes follow ONNX: pads
 * begin and end apart, auto_pad (NOTSET, VALID, SAME_UPPER, SAME_LOWER),
 * strides, dilations, ceil_mode, count_include_pad, storage_order,
 * output_padding and output_shape; every value the graph's
 * ops cannot compute exactly is refused, naming the attribute. Resize
 * and Upsample of [N, C, H, W] over H and W (nearest, linear) become a
 * resize2d node.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_internal.h"

/* ---- spatial attributes ---- */

/* kernel_shape (when given), strides, dilations, pads / auto_pad for an
 * input of spatial sizes in[]: the padding before (pad) and after
 * (pad_end) each axis. */
teeny_status teeny__ox_spatial_attrs(ox_import *im, const int64_t *in, ox_spatial *sp, int kernel_given)
{
    int64_t v[4];
    int n;
    char autopad[32];
    teeny_status st = teeny__ox_attr_ints(im, "kernel_shape", 2, v, &n);
    if (st != TEENY_OK)
        return st;
    if (n >= 0) {
        if (n != sp->nsp || (kernel_given && (v[0] != sp->kernel[0] || (n > 1 && v[1] != sp->kernel[1]))))
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute kernel_shape does not match the input or weight");
        for (int i = 0; i < n; i++)
            sp->kernel[i] = v[i];
    } else if (!kernel_given) {
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute kernel_shape is missing");
    }
    const char *names[2] = {"strides", "dilations"};
    int64_t *dst[2] = {sp->stride, sp->dil};
    for (int a = 0; a < 2; a++) {
        dst[a][0] = dst[a][1] = 1;
        if ((st = teeny__ox_attr_ints(im, names[a], 2, v, &n)) != TEENY_OK)
            return st;
        if (n >= 0 && n != sp->nsp)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute %s has %d values for %d axes", names[a], n, sp->nsp);
        for (int i = 0; i < n; i++)
            if ((dst[a][i] = v[i]) < 1 || v[i] > INT32_MAX)
                return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute %s value %lld", names[a], (long long)v[i]);
    }
    for (int i = 0; i < sp->nsp; i++)
        if (sp->kernel[i] < 1 || sp->kernel[i] > INT32_MAX)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "kernel size %lld", (long long)sp->kernel[i]);
    if ((st = teeny__ox_attr_string(im, "auto_pad", "NOTSET", autopad, sizeof autopad)) != TEENY_OK ||
        (st = teeny__ox_attr_ints(im, "pads", 4, v, &n)) != TEENY_OK)
        return st;
    for (int i = 0; i < 2; i++)
        sp->pad[i] = sp->pad_end[i] = 0;
    if (!strcmp(autopad, "SAME_UPPER") || !strcmp(autopad, "SAME_LOWER")) {
        /* out = ceil(in / stride); the padding that takes, its odd unit
         * after the input (UPPER) or before it (LOWER) */
        for (int i = 0; i < sp->nsp; i++) {
            int64_t out = (in[i] + sp->stride[i] - 1) / sp->stride[i];
            int64_t total = (out - 1) * sp->stride[i] + (sp->kernel[i] - 1) * sp->dil[i] + 1 - in[i];
            total = total < 0 ? 0 : total;
            sp->pad[i] = autopad[5] == 'U' ? total / 2 : total - total / 2;
            sp->pad_end[i] = total - sp->pad[i];
        }
        return TEENY_OK;
    }
    if (strcmp(autopad, "NOTSET") && strcmp(autopad, "VALID"))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute auto_pad=%s", autopad);
    if (n >= 0 && !strcmp(autopad, "NOTSET")) {
        if (n != 2 * sp->nsp)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute pads has %d values for %d axes", n, sp->nsp);
        for (int i = 0; i < sp->nsp; i++) {
            if (v[i] < 0 || v[i] > INT32_MAX || v[i + sp->nsp] < 0 || v[i + sp->nsp] > INT32_MAX)
                return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute pads value %lld, %lld along axis %d",
                                      (long long)v[i], (long long)v[i + sp->nsp], i);
            sp->pad[i] = v[i];
            sp->pad_end[i] = v[i + sp->nsp];
        }
    }
    return TEENY_OK;
}

/* A runtime [N, C, L] value viewed as [N, C, L, 1] (2-D values as they are). */
teeny_status teeny__ox_as_2d(ox_import *im, int idx, teeny_node *n)
{
    const ox_shape *s = &im->vals[idx].shape;
    ox_shape t = {4, {s->d[0], s->d[1], s->d[2], 1}};
    if (s->ndim == 4) {
        *n = im->vals[idx].node;
        return TEENY_OK;
    }
    return teeny__ox_view(im, idx, &t, n);
}

/* Output out from a [N, C, H, W] node; a 1-D op's result viewed back. */
teeny_status teeny__ox_out_nd(ox_import *im, int out, teeny_node n, int nsp)
{
    ox_shape s;
    teeny_status st = teeny__ox_node_shape(im, n, &s);
    if (st == TEENY_OK && nsp == 1) {
        ox_shape t = {3, {s.d[0], s.d[1], s.d[2]}};
        if (s.d[3] != 1)
            return teeny__ox_fail(im, TEENY_ERR_STATE, "internal: a 1-D result of width %lld", (long long)s.d[3]);
        st = teeny__ox_view_node(im, n, &s, &t, &n);
        s = t;
    }
    return st != TEENY_OK ? st : teeny__ox_out_runtime(im, out, n, &s);
}

/* ---- Conv ---- */

/* What Conv and ConvTranspose read of a node: inputs X (run-time, shape
 * xs), W (constant) and B (constant, or none: bi -1, b NULL), the group. */
typedef struct {
    int xi, wi, bi;
    const ox_const *w, *b;
    int64_t group;
    const ox_shape *xs;
} ox_conv;

/* Conv's and ConvTranspose's attributes (attrs allowed), one output, the
 * inputs and the group into c, and X's rank: 1-D or 2-D (kind names the
 * op), the spatial axes into sp->nsp. */
static teeny_status conv_inputs(ox_import *im, const char *const *attrs, const char *kind, ox_conv *c,
                                ox_spatial *sp)
{
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    c->b = NULL;
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "group", 1, &c->group)) != TEENY_OK ||
        (st = teeny__ox_in_runtime(im, 0, "X", &c->xi)) != TEENY_OK ||
        (st = teeny__ox_in_const(im, 1, "W", 1, &c->w)) != TEENY_OK ||
        (st = teeny__ox_in(im, 1, &c->wi)) != TEENY_OK || (st = teeny__ox_in(im, 2, &c->bi)) != TEENY_OK ||
        (c->bi >= 0 && (st = teeny__ox_in_const(im, 2, "B", 1, &c->b)) != TEENY_OK))
        return st;
    c->xs = &im->vals[c->xi].shape;
    if (c->xs->ndim != 3 && c->xs->ndim != 4)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "%d-D %s (supported: 1-D and 2-D)", c->xs->ndim - 2, kind);
    sp->nsp = c->xs->ndim - 2;
    return TEENY_OK;
}

/* After the graph builder (its status st) made y: W and B bound to y's
 * parameters, y the node's output of nsp spatial axes. */
static teeny_status conv_output(ox_import *im, const ox_conv *c, teeny_status st, teeny_node y, int nsp)
{
    if (st != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    if ((st = teeny__ox_bind(im, c->wi, y, 0, 0, NULL)) != TEENY_OK ||
        (c->b && (st = teeny__ox_bind(im, c->bi, y, 0, 1, NULL)) != TEENY_OK))
        return st;
    return teeny__ox_out_nd(im, 0, y, nsp);
}

/* The stride, dilation and groups of Conv's and ConvTranspose's params
 * from sp and c, and X as a 2-D node x2. */
static teeny_status conv_params_x2(ox_import *im, const ox_conv *c, const ox_spatial *sp, int *stride, int *dilation,
                                   int *groups, teeny_node *x2)
{
    for (int i = 0; i < 2; i++) {
        stride[i] = (int)sp->stride[i];
        dilation[i] = (int)sp->dil[i];
    }
    *groups = (int)c->group;
    return teeny__ox_as_2d(im, c->xi, x2);
}

teeny_status teeny__ox_op_conv(ox_import *im)
{
    static const char *const attrs[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", NULL};
    ox_conv c;
    ox_spatial sp = {0};
    teeny_status st = conv_inputs(im, attrs, "convolution", &c, &sp);
    if (st != TEENY_OK)
        return st;
    if (c.w->shape.ndim != c.xs->ndim || c.w->shape.d[0] < 1 || c.w->shape.d[0] > INT32_MAX ||
        (c.b && (c.b->shape.ndim != 1 || c.b->shape.d[0] != c.w->shape.d[0])))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "W or B has the wrong shape for X");
    if (c.group < 1 || c.group > INT32_MAX || c.xs->d[1] % c.group || c.w->shape.d[1] * c.group != c.xs->d[1])
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "group %lld does not divide the %lld channels into W's %lld",
                              (long long)c.group, (long long)c.xs->d[1], (long long)c.w->shape.d[1]);
    sp.kernel[0] = c.w->shape.d[2];
    sp.kernel[1] = sp.nsp == 2 ? c.w->shape.d[3] : 1;
    if ((st = teeny__ox_spatial_attrs(im, c.xs->d + 2, &sp, 1)) != TEENY_OK)
        return st;
    teeny_conv2d_params p = TEENY_CONV2D_PARAMS_INIT;
    for (int i = 0; i < 2; i++) {
        p.pad[i] = (int)sp.pad[i];
        p.pad_end_extra[i] = (int)(sp.pad_end[i] - sp.pad[i]); /* both pads within int32 */
    }
    teeny_node x2, y;
    char buf[TEENY__NAME_CAP];
    if ((st = conv_params_x2(im, &c, &sp, p.stride, p.dilation, &p.groups, &x2)) != TEENY_OK)
        return st;
    teeny_act_params act = teeny__ox_act_params_of(im, im->node_index); /* an activation after it (attn_fuse.c) */
    st = teeny_graph_conv2d_act_ex(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x2, (int)c.w->shape.d[0],
                                   (int)sp.kernel[0], (int)sp.kernel[1], &p, c.b != NULL, &act, &y);
    return conv_output(im, &c, st, y, sp.nsp);
}

/* ---- ConvTranspose ---- */

/* ONNX's padding of ConvTranspose along each axis, into p: pads (NOTSET),
 * none (VALID), or those that output_shape implies (given, or in * stride
 * under SAME_*): total = stride*(in - 1) + output_padding + (kernel - 1)*
 * dilation + 1 - out, split as ONNX's reference does (floor division:
 * SAME_UPPER total/2 before, else total - total/2 before). A negative
 * padding after is extra rows after the last tap (output_padding); a
 * negative padding before, or output_padding past the stride and the
 * dilation, has no teenycl equivalent (TEENY_ERR_UNSUPPORTED). */
static teeny_status convt_pads(ox_import *im, const int64_t *in, const ox_spatial *sp,
                               teeny_conv_transpose2d_params *p)
{
    int64_t outpad[2] = {0, 0}, oshape[2], v[4];
    int n_op, n_os, n_pads;
    char autopad[32];
    teeny_status st;
    if ((st = teeny__ox_attr_ints(im, "output_padding", 2, outpad, &n_op)) != TEENY_OK ||
        (st = teeny__ox_attr_ints(im, "output_shape", 2, oshape, &n_os)) != TEENY_OK ||
        (st = teeny__ox_attr_ints(im, "pads", 4, v, &n_pads)) != TEENY_OK ||
        (st = teeny__ox_attr_string(im, "auto_pad", "NOTSET", autopad, sizeof autopad)) != TEENY_OK)
        return st;
    if ((n_op >= 0 && n_op != sp->nsp) || (n_os >= 0 && n_os != sp->nsp))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute %s has %d values for %d axes",
                              n_op >= 0 && n_op != sp->nsp ? "output_padding" : "output_shape",
                              n_op >= 0 && n_op != sp->nsp ? n_op : n_os, sp->nsp);
    int same = !strncmp(autopad, "SAME_", 5), upper = !strcmp(autopad, "SAME_UPPER");
    for (int i = 0; i < sp->nsp; i++) {
        if (outpad[i] < 0 || outpad[i] > INT32_MAX || (n_os >= 0 && (oshape[i] < 1 || oshape[i] > INT32_MAX)))
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute output_padding %lld or output_shape %lld",
                                  (long long)outpad[i], n_os >= 0 ? (long long)oshape[i] : 0LL);
        int64_t pad = sp->pad[i], end = sp->pad_end[i], op = outpad[i];
        int64_t natural = sp->stride[i] * (in[i] - 1) + op + (sp->kernel[i] - 1) * sp->dil[i] + 1;
        if (n_os >= 0 && n_pads >= 0 && !strcmp(autopad, "NOTSET")) {
            if (natural - pad - end != oshape[i])
                return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute output_shape %lld with pads %lld, %lld "
                                      "(an output of %lld) along axis %d", (long long)oshape[i], (long long)pad,
                                      (long long)end, (long long)(natural - pad - end), i);
        } else if (n_os >= 0 || same) {
            int64_t out = n_os >= 0 ? oshape[i] : in[i] * sp->stride[i], total = natural - out;
            int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2); /* floor(total / 2) */
            pad = upper ? half : total - half;
            end = total - pad;
        }
        if (end < 0) /* rows after the last tap */
            op -= end, end = 0;
        if (pad < 0 || (op >= sp->stride[i] && op >= sp->dil[i]))
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute %s along axis %d: padding %lld before the "
                                  "input, %lld rows past the last tap with stride %lld, dilation %lld (supported: "
                                  "padding >= 0, rows past < stride or < dilation)",
                                  n_os >= 0 ? "output_shape" : same ? "auto_pad" : "output_padding", i,
                                  (long long)pad, (long long)op, (long long)sp->stride[i], (long long)sp->dil[i]);
        if (pad > INT32_MAX / 2 || end > INT32_MAX / 2)
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "padding %lld, %lld along axis %d", (long long)pad,
                                  (long long)end, i);
        p->pad[i] = (int)pad;
        p->pad_end_extra[i] = (int)(end - pad);
        p->output_padding[i] = (int)op;
    }
    return TEENY_OK;
}

/* ConvTranspose in 1-D ([L, 1]) and 2-D: W [C, M/group, k...], B [M]. */
teeny_status teeny__ox_op_conv_transpose(ox_import *im)
{
    static const char *const attrs[] = {"auto_pad", "dilations",    "group", "kernel_shape", "output_padding",
                                        "output_shape", "pads", "strides", NULL};
    ox_conv c;
    ox_spatial sp = {0};
    teeny_status st = conv_inputs(im, attrs, "transposed convolution", &c, &sp);
    if (st != TEENY_OK)
        return st;
    if (c.group < 1 || c.group > INT32_MAX || c.xs->d[1] % c.group)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "group %lld does not divide the %lld channels",
                              (long long)c.group, (long long)c.xs->d[1]);
    if (c.w->shape.ndim != c.xs->ndim || c.w->shape.d[0] != c.xs->d[1] || c.w->shape.d[1] < 1 ||
        c.w->shape.d[1] > INT32_MAX / c.group ||
        (c.b && (c.b->shape.ndim != 1 || c.b->shape.d[0] != c.w->shape.d[1] * c.group)))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "W or B has the wrong shape for X (W: [C, M/group, k...], B: [M])");
    sp.kernel[0] = c.w->shape.d[2];
    sp.kernel[1] = sp.nsp == 2 ? c.w->shape.d[3] : 1;
    teeny_conv_transpose2d_params p = TEENY_CONV_TRANSPOSE2D_PARAMS_INIT;
    if ((st = teeny__ox_spatial_attrs(im, c.xs->d + 2, &sp, 1)) != TEENY_OK ||
        (st = convt_pads(im, c.xs->d + 2, &sp, &p)) != TEENY_OK)
        return st;
    teeny_node x2, y;
    char buf[TEENY__NAME_CAP];
    if ((st = conv_params_x2(im, &c, &sp, p.stride, p.dilation, &p.groups, &x2)) != TEENY_OK)
        return st;
    st = teeny_graph_conv_transpose2d(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x2,
                                      (int)(c.w->shape.d[1] * c.group), (int)sp.kernel[0], (int)sp.kernel[1], &p,
                                      c.b != NULL, &y);
    return conv_output(im, &c, st, y, sp.nsp);
}

/* ---- pooling ---- */

/* MaxPool / AveragePool: ONNX's pads (any size; windows entirely in the
 * padding are legal), ceil_mode, dilations, count_include_pad, and
 * MaxPool's Indices (output 1: flat over X, storage_order 0 or 1). */
teeny_status teeny__ox_op_pool(ox_import *im)
{
    static const char *const attrs[] = {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape",
                                        "pads", "strides", "storage_order", NULL};
    int xi, is_max = !strcmp(im->node->op_type, "MaxPool");
    int64_t ceil_mode, include_pad, order;
    ox_spatial sp = {0};
    teeny_node x2, y;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, is_max ? 2 : 1)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "ceil_mode", 0, &ceil_mode)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "count_include_pad", 0, &include_pad)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "storage_order", 0, &order)) != TEENY_OK ||
        (st = teeny__ox_in_runtime(im, 0, "X", &xi)) != TEENY_OK)
        return st;
    if ((is_max && teeny__ox_attr(im, "count_include_pad")) || (!is_max && teeny__ox_attr(im, "storage_order")))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute %s is not an attribute of this op",
                              is_max ? "count_include_pad" : "storage_order");
    if ((uint64_t)ceil_mode > 1 || (uint64_t)include_pad > 1 || (uint64_t)order > 1)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute ceil_mode=%lld, count_include_pad=%lld or "
                              "storage_order=%lld (each 0 or 1)", (long long)ceil_mode, (long long)include_pad,
                              (long long)order);
    const ox_shape *xs = &im->vals[xi].shape;
    if (xs->ndim != 3 && xs->ndim != 4)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "%d-D pooling (supported: 1-D and 2-D)", xs->ndim - 2);
    sp.nsp = xs->ndim - 2;
    if ((st = teeny__ox_spatial_attrs(im, xs->d + 2, &sp, 0)) != TEENY_OK)
        return st;
    teeny_pool2d_params p = TEENY_POOL2D_PARAMS_INIT;
    for (int i = 0; i < 2; i++) {
        int64_t k = i < sp.nsp ? sp.kernel[i] : 1, s = i < sp.nsp ? sp.stride[i] : 1;
        int64_t d = i < sp.nsp ? sp.dil[i] : 1, extra = sp.pad_end[i] - sp.pad[i];
        p.kernel[i] = (int)k;
        p.stride[i] = (int)s;
        p.dilation[i] = (int)d;
        p.pad[i] = (int)sp.pad[i];
        p.pad_end_extra[i] = (int)extra; /* |extra| < 2^31: both pads are */
    }
    p.ceil_mode = (int)ceil_mode;
    p.exclude_pad = !include_pad;
    p.large_pads = 1;
    if ((st = teeny__ox_as_2d(im, xi, &x2)) != TEENY_OK)
        return st;
    if (im->node->n_output > 1 && *im->node->output[1]) {
        teeny_node ix;
        if (sp.nsp == 1) /* an int32 value has no views in the graph */
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "output 1 (Indices) of a 1-D MaxPool");
        st = teeny_graph_maxpool2d_indices(im->g, teeny__ox_name(im, "indices", buf, sizeof buf), x2, &p,
                                           (int)order, &ix);
        if (st != TEENY_OK)
            return teeny__ox_graph_fail(im, st);
        if ((st = teeny__ox_out_nd(im, 1, ix, sp.nsp)) != TEENY_OK)
            return st;
    }
    if (!*im->node->output[0])
        return TEENY_OK;
    st = (is_max ? teeny_graph_maxpool2d : teeny_graph_avgpool2d)(im->g, teeny__ox_name(im, NULL, buf, sizeof buf),
                                                                  x2, &p, &y);
    return st != TEENY_OK ? teeny__ox_graph_fail(im, st) : teeny__ox_out_nd(im, 0, y, sp.nsp);
}

/* GlobalAveragePool / GlobalMaxPool over 1-D and 2-D planes: [N, C, 1(, 1)]. */
teeny_status teeny__ox_op_global_pool(ox_import *im)
{
    static const char *const no_attrs[] = {NULL};
    int xi, is_max = !strcmp(im->node->op_type, "GlobalMaxPool");
    teeny_node x2, y;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, no_attrs);
    if (st != TEENY_OK || (st = teeny__ox_in_runtime(im, 0, "X", &xi)) != TEENY_OK)
        return st;
    ox_shape s = im->vals[xi].shape, g;
    if (s.ndim != 3 && s.ndim != 4)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "an input of rank %d (supported: 3 and 4)", s.ndim);
    if ((st = teeny__ox_as_2d(im, xi, &x2)) != TEENY_OK)
        return st;
    st = (is_max ? teeny_graph_global_maxpool : teeny_graph_global_avgpool)(
        im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x2, &y);
    if (st != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    for (int i = 2; i < s.ndim; i++)
        s.d[i] = 1;
    if ((st = teeny__ox_node_shape(im, y, &g)) != TEENY_OK || (st = teeny__ox_view_node(im, y, &g, &s, &y)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, y, &s);
}

/* ---- Resize, Upsample ---- */

/* v's index in names (NULL-ended), or -1. */
static int pick(const char *v, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(v, names[i]))
            return i;
    return -1;
}

/* mode, coordinate_transformation_mode and nearest_mode into p (Resize
 * from opset 11); Upsample and Resize-10 are asymmetric, their nearest
 * rounding ORT's (floor up, ceil down: resize_values). */
static teeny_status resize_modes(ox_import *im, int legacy, teeny_resize2d_params *p)
{
    static const char *const modes[] = {"nearest", "linear", NULL};
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners",
                                         "tf_half_pixel_for_nn", NULL};
    static const char *const roundings[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
    char mode[24], coord[32], rounding[32], policy[24];
    int64_t exclude, antialias;
    teeny_status st = teeny__ox_attr_string(im, "mode", "nearest", mode, sizeof mode);
    if (st != TEENY_OK || (st = teeny__ox_attr_string(im, "coordinate_transformation_mode", "half_pixel", coord,
                                                      sizeof coord)) != TEENY_OK ||
        (st = teeny__ox_attr_string(im, "nearest_mode", "round_prefer_floor", rounding, sizeof rounding)) != TEENY_OK ||
        (st = teeny__ox_attr_string(im, "keep_aspect_ratio_policy", "stretch", policy, sizeof policy)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "exclude_outside", 0, &exclude)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "antialias", 0, &antialias)) != TEENY_OK)
        return st;
    int m = pick(mode, modes), c = legacy ? TEENY_RESIZE_ASYMMETRIC : pick(coord, coords), r = pick(rounding, roundings);
    if (m < 0 || c < 0 || r < 0)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute %s=%.32s (supported: %s)",
                              m < 0 ? "mode" : c < 0 ? "coordinate_transformation_mode" : "nearest_mode",
                              m < 0 ? mode : c < 0 ? coord : rounding,
                              m < 0 ? "nearest, linear" : c < 0 ? "half_pixel, pytorch_half_pixel, asymmetric, "
                              "align_corners, tf_half_pixel_for_nn" : "round_prefer_floor, round_prefer_ceil, floor, ceil");
    if (exclude || antialias || strcmp(policy, "stretch"))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute %s", exclude ? "exclude_outside=1"
                              : antialias ? "antialias=1" : "keep_aspect_ratio_policy other than stretch");
    p->mode = (teeny_resize_mode)m;
    p->coord = (teeny_resize_coord)c;
    p->rounding = (teeny_resize_rounding)r;
    return TEENY_OK;
}

/* Input i (scales or sizes) as n values (*got -1: absent or empty); a
 * constant, or a graph input given a value at import. */
static teeny_status resize_input(ox_import *im, int i, const char *what, int n, double *out, int *got)
{
    int idx;
    const ox_const *c;
    teeny_status st = teeny__ox_in(im, i, &idx);
    *got = -1;
    if (st != TEENY_OK || idx < 0 || (st = teeny__ox_in_const(im, i, what, 1, &c)) != TEENY_OK || c->numel == 0)
        return st;
    if (c->shape.ndim != 1 || c->numel != n)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "input %s has %lld values for %d axes", what, (long long)c->numel, n);
    for (int k = 0; k < n; k++)
        out[k] = c->type == OX_F32 ? (double)((const float *)c->data)[k] : (double)((const int64_t *)c->data)[k];
    *got = n;
    return TEENY_OK;
}

/* The output size and scale of H and W from scales or sizes (over all
 * four axes, or over axes [2, 3]); N and C must stay. */
static teeny_status resize_values(ox_import *im, int legacy, const ox_shape *xs, teeny_resize2d_params *p)
{
    int64_t axes[4];
    int n_axes, n_sc = -1, n_sz = -1, first;
    double sc[4], sz[4];
    teeny_status st = teeny__ox_attr_ints(im, "axes", 4, axes, &n_axes);
    if (st != TEENY_OK)
        return st;
    int two = n_axes == 2 && (axes[0] == 2 || axes[0] == -2) && (axes[1] == 3 || axes[1] == -1);
    if (n_axes >= 0 && !two && !(n_axes == 4 && axes[0] == 0 && axes[1] == 1 && axes[2] == 2 && axes[3] == 3))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute axes (supported: the last two, H and W)");
    int n = two ? 2 : 4;
    const Onnx__AttributeProto *a = teeny__ox_attr(im, "scales"); /* Upsample-7 */
    if (a) {
        if (a->n_floats != 4)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute scales has %zu values for 4 axes", a->n_floats);
        for (int k = 0; k < 4; k++)
            sc[k] = a->floats[k];
        n_sc = 4;
    } else if ((st = resize_input(im, legacy ? 1 : 2, "scales", n, sc, &n_sc)) != TEENY_OK ||
               (!legacy && (st = resize_input(im, 3, "sizes", n, sz, &n_sz)) != TEENY_OK)) {
        return st;
    }
    if ((n_sc < 0) == (n_sz < 0))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "one of scales and sizes is needed, not %s", n_sc < 0 ? "neither" : "both");
    first = n - 2;
    for (int k = 0; k < first; k++)
        if (n_sc > 0 ? sc[k] != 1.0 : sz[k] != (double)xs->d[k])
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "%s resizes axis %d (supported: the last two, H and W)",
                                  n_sc > 0 ? "scales" : "sizes", k);
    for (int k = 0; k < 2; k++) {
        double in = (double)xs->d[2 + k], s = n_sc > 0 ? sc[first + k] : 0.0,
               out = n_sc > 0 ? floor(in * s) : sz[first + k];
        if (!(out >= 1 && out <= INT32_MAX) || !(s >= 0 && s <= 3.4e38))
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "axis %d of size %g resizes to %g (scale %g)", 2 + k, in,
                                  out, s);
        p->size[k] = (int)out;
        p->scale[k] = (float)s;
    }
    if (legacy && p->mode == TEENY_RESIZE_NEAREST) { /* ORT's rounding: floor upsampling, ceil downsampling */
        int down0 = p->size[0] < xs->d[2] || (p->scale[0] > 0 && p->scale[0] < 1);
        int down1 = p->size[1] < xs->d[3] || (p->scale[1] > 0 && p->scale[1] < 1);
        if (down0 != down1)
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "nearest resizing one axis up and the other down "
                                  "(opset %lld rounds each its own way)", (long long)im->opset);
        p->rounding = down0 ? TEENY_RESIZE_CEIL : TEENY_RESIZE_FLOOR;
    }
    return TEENY_OK;
}

/* Resize (opsets 10 to 19) and Upsample (7, 9) of a run-time [N, C, H, W]
 * value over H and W, scales or sizes constant: a resize2d node. */
teeny_status teeny__ox_op_resize(ox_import *im)
{
    static const char *const attrs[] = {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                                        "exclude_outside", "extrapolation_value", "antialias", "axes",
                                        "keep_aspect_ratio_policy", NULL};
    static const char *const upsample_attrs[] = {"mode", "scales", NULL};
    int upsample = !strcmp(im->node->op_type, "Upsample"), legacy = upsample || im->opset < 11, xi;
    teeny_resize2d_params p = TEENY_RESIZE2D_PARAMS_INIT;
    teeny_node y;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_attrs_allowed(im, upsample ? upsample_attrs : attrs);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = resize_modes(im, legacy, &p)) != TEENY_OK || (st = teeny__ox_in_runtime(im, 0, "X", &xi)) != TEENY_OK)
        return st;
    ox_shape s = im->vals[xi].shape;
    if (s.ndim != 4)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "X of rank %d (supported: [N, C, H, W], resized over H and W)",
                              s.ndim);
    if ((st = resize_values(im, legacy, &s, &p)) != TEENY_OK)
        return st;
    if ((st = teeny_graph_resize2d(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), im->vals[xi].node, &p, &y)) !=
        TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    s.d[2] = p.size[0];
    s.d[3] = p.size[1];
    return teeny__ox_out_runtime(im, 0, y, &s);
}
