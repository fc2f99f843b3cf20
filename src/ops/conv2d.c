/*
 * conv2d.c -- grouped 2-D convolution (PyTorch F.conv2d semantics): NCHW
 * x [B, Cin, H, W], weight [Cout, Cin/G, KH, KW], optional bias [Cout],
 * y [B, Cout, OH, OW], with per-axis stride, zero padding and dilation.
 * Forward (with the fused inference epilogue act(conv * scale + shift)),
 * backward (dx, dweight, dbias, each optional) and shape inference.
 *
 * Paths (kernels in cl/conv2d.cl):
 *   - implicit GEMM (conv_gemm_gather) for the general case, the plain GEMM
 *     (conv_gemm_1x1) for 1x1 stride-1 unpadded convolutions, the input
 *     gradient as the same GEMM over dy once per stride phase, and the
 *     weight gradient as a GEMM over B*OH*OW split into chunks whose
 *     partials conv_reduce_parts sums in a fixed order;
 *   - depthwise kernels when each group has one input channel and at most
 *     dw_mult_max output channels (depthwise, small channel multipliers),
 *     unless the input patch of a tile does not fit in local memory (huge
 *     dilation); otherwise (e.g. a 1-channel input to 32 channels) the GEMM.
 * Everything is deterministic: no atomics; partials live in the context's
 * workspace.
 *
 * Files: conv2d.c (this one) validates the eager API's arguments, infers
 * graph shapes and builds graph nodes; conv2d_exec.c holds the op-table
 * forward and backward (the path choice and the launches of each pass);
 * conv2d_plan.c tile picking and fit checks, the GEMM
 * launches, the depthwise plans and the weight-gradient plan, with the
 * types they share in conv2d_internal.h; conv2d_loops.c the loop trips of
 * every kernel and the splits a device's loop limit asks for.
 *
 * Op-table entry (the convention of ops.h): one input x [B, Cin, H, W];
 * params weight [Cout, Cin/groups, KH, KW] and, with has_bias, bias [Cout]
 * (both TEENY__INIT_FAN_IN, fan_in = Cin/groups*KH*KW); no states or saved
 * tensors.
 *   attrs.conv2d: stride, pad, dilation, groups, act, has_bias, and
 *            out_channels, kernel_h, kernel_w (read by infer only)
 *   forward:  in  = [x, weight, bias (has_bias only), scale, shift]   out = [y]
 *             y = act(conv(x, w) * scale[c] + shift[c] + bias[c]); scale and
 *             shift sit in fixed slots 3 and 4 and may be NULL (1 and 0), as
 *             may bias without has_bias (a graph node leaves them NULL)
 *   backward: in  = [x, weight, bias?, y, dy]   out = [dx, dweight, dbias?]
 *             (dy is in[4] with has_bias, else in[3]; y is unused; any output
 *             may be NULL; the gradient is of conv + bias, act must be none)
 */
#include <string.h>

#include "ops.h"

/* ---- validation and the eager API ---- */

/* Parameter values and the two shapes; y_shape gets the output shape.
 * ctx may be NULL (teeny_conv2d_output_shape). */
static teeny_status conv_shape(teeny_ctx *ctx, const char *fn, const teeny_conv2d_params *p, const int64_t *xs,
                               const int64_t *ws, int64_t *ys)
{
    static const char *const axis[2] = {"H", "W"};
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: params is NULL", fn);
    for (int i = 0; i < 2; i++) {
        if (p->stride[i] < 1)
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: stride[%d] (%s) is %d; must be >= 1", fn, i, axis[i],
                                p->stride[i]);
        if (p->dilation[i] < 1)
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: dilation[%d] (%s) is %d; must be >= 1", fn, i, axis[i],
                                p->dilation[i]);
        if (p->pad[i] < 0)
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: pad[%d] (%s) is %d; must be >= 0", fn, i, axis[i],
                                p->pad[i]);
    }
    if (p->groups < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: groups is %d; must be >= 1", fn, p->groups);
    for (int i = 0; i < 4; i++)
        if (xs[i] < 1 || ws[i] < 1)
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s dimension %d is %lld; sizes must be >= 1", fn,
                                xs[i] < 1 ? "x" : "weight", i, (long long)(xs[i] < 1 ? xs[i] : ws[i]));
    for (int i = 0; i < 4; i++) /* so the sums and products below stay far inside int64 */
        if (xs[i] > INT32_MAX || ws[i] > INT32_MAX)
            return teeny__error(ctx, TEENY_ERR_RANGE, "%s: %s dimension %d is %lld; beyond int32 indexing", fn,
                                xs[i] > INT32_MAX ? "x" : "weight", i, (long long)(xs[i] > INT32_MAX ? xs[i] : ws[i]));
    int64_t G = p->groups;
    if (xs[1] % G)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: groups %d does not divide the %lld input channels of x [%lld, %lld, %lld, %lld]",
                            fn, p->groups, (long long)xs[1], (long long)xs[0], (long long)xs[1], (long long)xs[2],
                            (long long)xs[3]);
    if (ws[0] % G)
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "%s: groups %d does not divide the %lld output channels of weight [%lld, %lld, %lld, %lld]",
                            fn, p->groups, (long long)ws[0], (long long)ws[0], (long long)ws[1], (long long)ws[2],
                            (long long)ws[3]);
    if (ws[1] * G != xs[1])
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "%s: weight [%lld, %lld, %lld, %lld] has %lld input channels per group; x [%lld, %lld, %lld, "
                            "%lld] with groups %d needs %lld",
                            fn, (long long)ws[0], (long long)ws[1], (long long)ws[2], (long long)ws[3],
                            (long long)ws[1], (long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)xs[3],
                            p->groups, (long long)(xs[1] / G));
    int64_t out[2];
    for (int i = 0; i < 2; i++) {
        int64_t in = xs[2 + i] + 2 * (int64_t)p->pad[i], span = (int64_t)p->dilation[i] * (ws[2 + i] - 1) + 1;
        if (in < span)
            return teeny__error(ctx, TEENY_ERR_SHAPE,
                                "%s: %s: input %lld + 2*pad %d = %lld is smaller than the dilated kernel "
                                "dilation %d * (%lld - 1) + 1 = %lld",
                                fn, axis[i], (long long)xs[2 + i], p->pad[i], (long long)in, p->dilation[i],
                                (long long)ws[2 + i], (long long)span);
        if (in > INT32_MAX / 2)
            return teeny__error(ctx, TEENY_ERR_RANGE,
                                "%s: %s: input %lld + 2*pad %d is beyond int32 indexing (kernels index with int32)",
                                fn, axis[i], (long long)xs[2 + i], p->pad[i]);
        out[i] = (in - span) / p->stride[i] + 1;
    }
    int64_t dims[4] = {xs[0], ws[0], out[0], out[1]}, n = 1;
    for (int i = 0; i < 4; i++) {
        if (dims[i] > INT32_MAX || n > INT32_MAX / dims[i])
            return teeny__error(ctx, TEENY_ERR_RANGE,
                                "%s: output [%lld, %lld, %lld, %lld] has more than 2^31-1 elements (kernels index "
                                "with int32)",
                                fn, (long long)dims[0], (long long)dims[1], (long long)dims[2], (long long)dims[3]);
        n *= dims[i];
    }
    if (ys)
        memcpy(ys, dims, sizeof dims);
    return TEENY_OK;
}

static teeny_status check_rank4(teeny_ctx *ctx, const char *fn, const teeny_tensor *t, const char *name,
                                const char *layout)
{
    char s[96];
    teeny_status st = teeny__check_tensor(ctx, t, name);
    if (st != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    if (t->ndim != 4)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %s has shape %s; expected %s", fn, name,
                            teeny__shape_str(t, s, sizeof s), layout);
    return TEENY_OK;
}

/* t must be exactly `want` (rank 4). */
static teeny_status check_exact(teeny_ctx *ctx, const char *fn, const teeny_tensor *t, const char *name,
                                const int64_t *want, const char *why)
{
    char s[96];
    teeny_status st = teeny__check_tensor(ctx, t, name);
    if (st != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    if (t->ndim != 4 || memcmp(t->shape, want, 4 * sizeof(int64_t)) != 0)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %s has shape %s; expected [%lld, %lld, %lld, %lld] (%s)", fn,
                            name, teeny__shape_str(t, s, sizeof s), (long long)want[0], (long long)want[1],
                            (long long)want[2], (long long)want[3], why);
    return TEENY_OK;
}

/* Optional per-output-channel vector (NULL allowed). */
static teeny_status check_channel_vec(teeny_ctx *ctx, const char *fn, const teeny_tensor *t, const char *name,
                                      int64_t Cout)
{
    teeny_status st;
    if (!t)
        return TEENY_OK;
    if ((st = teeny__check_vector(ctx, t, name, Cout)) != TEENY_OK) {
        char msg[512];
        teeny__strlcpy(msg, teeny_last_error(ctx), sizeof msg);
        return teeny__error(ctx, st, "%s: %s (weight has %lld output channels)", fn, msg, (long long)Cout);
    }
    return TEENY_OK;
}

/* The eager API's attributes; the weight's shape fields stay 0 (infer only). */
static void params_attrs(const teeny_conv2d_params *p, teeny_act act, int has_bias, teeny__conv2d_attrs *at)
{
    *at = (teeny__conv2d_attrs){{p->stride[0], p->stride[1]}, {p->pad[0], p->pad[1]},
                                {p->dilation[0], p->dilation[1]}, p->groups, act, has_bias, 0, 0, 0};
}

teeny_status teeny_conv2d_output_shape(const teeny_conv2d_params *p, const int64_t x_shape[4],
                                       const int64_t w_shape[4], int64_t y_shape[4])
{
    static const char fn[] = "teeny_conv2d_output_shape";
    if (!x_shape || !w_shape || !y_shape)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: %s is NULL", fn,
                            !x_shape ? "x_shape" : !w_shape ? "w_shape" : "y_shape");
    return conv_shape(NULL, fn, p, x_shape, w_shape, y_shape);
}

/* x and w well-formed, shapes agree; ys = the output shape. */
static teeny_status check_xw(teeny_ctx *ctx, const char *fn, const teeny_conv2d_params *p, const teeny_tensor *x,
                             const teeny_tensor *w, int64_t *ys)
{
    teeny_status st;
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: params is NULL", fn);
    if ((st = check_rank4(ctx, fn, x, "x", "[B, Cin, H, W]")) != TEENY_OK ||
        (st = check_rank4(ctx, fn, w, "weight", "[Cout, Cin/groups, KH, KW]")) != TEENY_OK)
        return st;
    return conv_shape(ctx, fn, p, x->shape, w->shape, ys);
}

teeny_status teeny_conv2d_forward_fused(teeny_ctx *ctx, const teeny_conv2d_params *p, const teeny_tensor *x,
                                        const teeny_tensor *w, const teeny_tensor *bias, const teeny_tensor *scale,
                                        const teeny_tensor *shift, teeny_act act, teeny_tensor *y)
{
    static const char fn[] = "teeny_conv2d_forward_fused";
    int64_t ys[4];
    teeny_status st;
    EAGER_BEGIN("teeny_conv2d_forward_fused");
    if ((st = check_xw(ctx, fn, p, x, w, ys)) != TEENY_OK)
        return st;
    if ((st = check_channel_vec(ctx, fn, bias, "bias", ys[1])) != TEENY_OK ||
        (st = check_channel_vec(ctx, fn, scale, "scale", ys[1])) != TEENY_OK ||
        (st = check_channel_vec(ctx, fn, shift, "shift", ys[1])) != TEENY_OK)
        return st;
    if ((st = check_exact(ctx, fn, y, "y", ys, "the convolution's output shape")) != TEENY_OK)
        return st;
    if (act != TEENY_ACT_NONE && act != TEENY_ACT_RELU && act != TEENY_ACT_SILU)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: act %d is not a teeny_act value", fn, (int)act);
    const teeny_tensor *all[] = {x, w, bias, scale, shift, y};
    const char *names[] = {"x", "weight", "bias", "scale", "shift", "y"};
    if ((st = teeny__check_disjoint(ctx, fn, all, names, 5, 6)) != TEENY_OK)
        return st;
    teeny__op_args args = {.in = {x, w, bias, scale, shift}, .out = {y}};
    params_attrs(p, act, bias != NULL, &args.attrs.conv2d);
    return teeny__op_run(ctx, TEENY__OP_CONV2D, 0, &args);
}

teeny_status teeny_conv2d_forward(teeny_ctx *ctx, const teeny_conv2d_params *p, const teeny_tensor *x,
                                  const teeny_tensor *w, const teeny_tensor *bias, teeny_tensor *y)
{
    static const char fn[] = "teeny_conv2d_forward";
    int64_t ys[4];
    teeny_status st;
    EAGER_BEGIN("teeny_conv2d_forward");
    if ((st = check_xw(ctx, fn, p, x, w, ys)) != TEENY_OK)
        return st;
    if ((st = check_channel_vec(ctx, fn, bias, "bias", ys[1])) != TEENY_OK)
        return st;
    if ((st = check_exact(ctx, fn, y, "y", ys, "the convolution's output shape")) != TEENY_OK)
        return st;
    const teeny_tensor *all[] = {x, w, bias, y};
    const char *names[] = {"x", "weight", "bias", "y"};
    if ((st = teeny__check_disjoint(ctx, fn, all, names, 3, 4)) != TEENY_OK)
        return st;
    teeny__op_args args = {.in = {x, w, bias}, .out = {y}};
    params_attrs(p, TEENY_ACT_NONE, bias != NULL, &args.attrs.conv2d);
    return teeny__op_run(ctx, TEENY__OP_CONV2D, 0, &args);
}

teeny_status teeny_conv2d_backward(teeny_ctx *ctx, const teeny_conv2d_params *p, const teeny_tensor *x,
                                   const teeny_tensor *w, const teeny_tensor *dy, teeny_tensor *dx, teeny_tensor *dw,
                                   teeny_tensor *dbias)
{
    static const char fn[] = "teeny_conv2d_backward";
    int64_t ys[4];
    teeny_status st;
    EAGER_BEGIN("teeny_conv2d_backward");
    if ((st = check_xw(ctx, fn, p, x, w, ys)) != TEENY_OK)
        return st;
    if ((st = check_exact(ctx, fn, dy, "dy", ys, "the convolution's output shape")) != TEENY_OK)
        return st;
    if (dx && (st = check_exact(ctx, fn, dx, "dx", x->shape, "the shape of x")) != TEENY_OK)
        return st;
    if (dw && (st = check_exact(ctx, fn, dw, "dw", w->shape, "the shape of weight")) != TEENY_OK)
        return st;
    if ((st = check_channel_vec(ctx, fn, dbias, "dbias", ys[1])) != TEENY_OK)
        return st;
    const teeny_tensor *all[] = {x, w, dy, dx, dw, dbias};
    const char *names[] = {"x", "weight", "dy", "dx", "dw", "dbias"};
    if ((st = teeny__check_disjoint(ctx, fn, all, names, 3, 6)) != TEENY_OK)
        return st;
    if (!dx && !dw && !dbias)
        return TEENY_OK;
    /* the op-table order: dy follows the (absent) bias and y slots */
    teeny__op_args args = {.in = {x, w, NULL, NULL, dy}, .out = {dx, dw, dbias}};
    params_attrs(p, TEENY_ACT_NONE, 1, &args.attrs.conv2d);
    return teeny__op_run(ctx, TEENY__OP_CONV2D, 1, &args);
}

/* Graph shapes: x [B, Cin, H, W]; the weight shape comes from the attributes. */
teeny_status teeny__conv2d_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    const teeny__conv2d_attrs *at = &s->attrs.conv2d;
    int has_bias = at->has_bias;
    teeny_act act = at->act;
    teeny_conv2d_params p = {{at->stride[0], at->stride[1]}, {at->pad[0], at->pad[1]},
                             {at->dilation[0], at->dilation[1]}, at->groups};
    teeny_status st;
    if (s->n_in != 1 || x->ndim != 4 || x->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "conv2d: input must be one fp32 [B, Cin, H, W] tensor (rank %d given)",
                            x->ndim);
    if ((has_bias != 0 && has_bias != 1) || (act != TEENY_ACT_NONE && act != TEENY_ACT_RELU && act != TEENY_ACT_SILU))
        return teeny__error(ctx, TEENY_ERR_ARG, "conv2d: act %d must be a teeny_act, has_bias %d 0 or 1", (int)act,
                            has_bias);
    const int wdim[3] = {at->out_channels, at->kernel_h, at->kernel_w};
    for (int i = 0; i < 3; i++)
        if (wdim[i] < 1 || wdim[i] > (1 << 24))
            return teeny__error(ctx, TEENY_ERR_ARG, "conv2d: %s %d must be 1..2^24",
                                i == 0 ? "out_channels" : i == 1 ? "kernel height" : "kernel width", wdim[i]);
    /* groups past the channels: conv_shape says they do not divide them */
    int64_t per_group = at->groups > 0 && at->groups <= x->shape[1] ? x->shape[1] / at->groups : 1;
    int64_t ws[4] = {wdim[0], per_group, wdim[1], wdim[2]};
    int64_t ys[4];
    if ((st = conv_shape(ctx, "conv2d", &p, x->shape, ws, ys)) != TEENY_OK)
        return st;
    s->out = (teeny__shape){.ndim = 4, .shape = {ys[0], ys[1], ys[2], ys[3]}};
    s->n_param = has_bias ? 2 : 1;
    s->param[0] = (teeny__shape){.ndim = 4, .shape = {ws[0], ws[1], ws[2], ws[3]}};
    s->param_name[0] = "weight";
    s->param_init[0] = TEENY__INIT_FAN_IN;
    if (has_bias) {
        s->param[1] = (teeny__shape){.ndim = 1, .shape = {ws[0]}};
        s->param_name[1] = "bias";
        s->param_init[1] = TEENY__INIT_FAN_IN;
    }
    s->fan_in = teeny__dims_product(&ws[1], 3); /* -1 past INT64_MAX: the weight's own check rejects it */
    s->n_state = 0;
    s->n_saved = 0;
    return TEENY_OK;
}

/* ---- graph builder ---- */

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
        return teeny__error(teeny__graph_ctx(g), TEENY_ERR_ARG, "teeny_graph_conv2d: out_channels %d, kernel %dx%d must be 1..2^24",
                            out_channels, kernel_h, kernel_w);
    }
    teeny__op_attrs at;
    params_attrs(p, TEENY_ACT_NONE, bias != 0, &at.conv2d);
    at.conv2d.out_channels = out_channels;
    at.conv2d.kernel_h = kernel_h;
    at.conv2d.kernel_w = kernel_w;
    return teeny__graph_node(g, TEENY__OP_CONV2D, name, 1, &x, &at, out);
}
