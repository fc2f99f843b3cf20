/*
 * conv2d.c -- grouped 2-D convolution (PyTorch F.conv2d semantics): NCHW
 * x [B, Cin, H, W], weight [Cout, Cin/G, KH, KW], optional bias [Cout],
 * y [B, Cout, OH, OW], with per-axis stride, zero padding and dilation.
 * Forward (with the fused inference epilogue act(conv * scale + shift)),
 * backward (dx, dweight, dbias, each optional) and shape inference.
 *
 * Routes (kernels in the conv2d program, cl/conv2d.cl and its parts; route.c says which a pass takes):
 *   - gemm.c: implicit GEMM (conv_gemm_gather) for the general case, the
 *     plain GEMM (conv_gemm_1x1) for 1x1 stride-1 unpadded convolutions,
 *     conv_gemm_cpu on the CPU tunings; the route every pass can take;
 *   - depthwise.c: the depthwise kernels when each group has one input
 *     channel and at most dw_mult_max output channels, unless a kernel
 *     does not fit the device; with dwconv_bwd3, dx and dweight of a 3x3
 *     depthwise convolution at stride 1, dilation 1, padding 1 and
 *     multiplier 1 (MobileNet's and EfficientNet's) in one pass;
 *   - winograd.c: Winograd F(2x2, 3x3) or F(4x4, 3x3) (cl/winograd.cl)
 *     for the forward and input gradient of dense 3x3 stride-1
 *     convolutions, and F(2x2, 3x3) for their weight gradient, where the
 *     profile asks for it and the problem is large enough: three
 *     transforms around 16 or 36 GEMMs that run as one grouped 1x1
 *     convolution (the weight gradient: its weight gradient);
 *   - dx_direct.c: the input gradient by stride phases, directly
 *     (conv_dx_direct, cl/conv2d_dx.cl) for 1-4 input channels a group,
 *     else as the GEMM per phase;
 *   - weight_grad.c: the weight gradient as a GEMM over B*OH*OW split into
 *     chunks whose partials conv_reduce_parts sums in a fixed order (or
 *     the depthwise kernels), and the bias gradient.
 * Everything is deterministic: no atomics; partials live in the context's
 * workspace. conv2d.c (this one) infers shapes (the one validator of the
 * eager API and the graph) and holds the eager API; conv2d_internal.h the
 * family's types; conv_transpose.c runs these passes for the transposed
 * convolution.
 *
 * Op-table entry (slots TEENY__CONV2D_*, ops.h): one input x
 * [B, Cin, H, W]; params weight [Cout, Cin/groups, KH, KW] and, with
 * has_bias, bias [Cout] (both TEENY__INIT_FAN_IN, fan_in =
 * Cin/groups*KH*KW), then scale and shift, the fused epilogue's, which
 * only the eager API fills; no states or saved tensors.
 *   attrs.conv2d: stride, pad, dilation, groups, act, has_bias, and the
 *            weight's out_channels, kernel_h, kernel_w, in_per_group
 *            (read by infer only)
 *   forward:  y = act(conv(x, w) * scale[c] + shift[c] + bias[c]); bias,
 *             scale and shift may be NULL (0, 1 and 0)
 *   backward: dx, dweight, dbias (any may be NULL; y is unused; the
 *             gradient is of conv + bias, act must be none)
 */
#include <string.h>

#include "../ops.h"
#include "conv2d_internal.h"

/* ---- shapes and the eager API ---- */

teeny_status teeny__conv_out_dims(teeny_ctx *ctx, const int64_t dims[4], int64_t *ys)
{
    int64_t n = 1;
    for (int i = 0; i < 4; i++) {
        if (dims[i] > INT32_MAX || n > INT32_MAX / dims[i])
            return teeny__error(ctx, TEENY_ERR_RANGE,
                                "output [%lld, %lld, %lld, %lld] has more than 2^31-1 elements (kernels index "
                                "with int32)",
                                (long long)dims[0], (long long)dims[1], (long long)dims[2], (long long)dims[3]);
        n *= dims[i];
    }
    if (ys)
        memcpy(ys, dims, 4 * sizeof *dims);
    return TEENY_OK;
}

teeny_status teeny__conv_shape_args(const char *fn, const void *p, const int64_t *x_shape, const int64_t *w_shape,
                                    const int64_t *y_shape)
{
    if (!p || !x_shape || !w_shape || !y_shape)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: %s is NULL", fn,
                            !p         ? "params"
                            : !x_shape ? "x_shape"
                            : !w_shape ? "w_shape"
                                       : "y_shape");
    return TEENY_OK;
}

teeny_status teeny__conv_eager_args(teeny_ctx *ctx, const teeny__eager *e, const void *p, const teeny_tensor *w,
                                    const char *w_layout, const teeny__earg *args, int n)
{
    teeny_status st;
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: params is NULL", e->fn);
    if ((st = teeny__eager_tensors(ctx, e->fn, args, n)) == TEENY_OK)
        st = teeny__eager_rank(ctx, e->fn, w, "weight", 4, w_layout);
    return st;
}

/* The convolution rule: parameter values and the shapes of x and the
 * weight; ys gets the output shape. ctx may be NULL (the thread's error). */
static teeny_status conv_shape(teeny_ctx *ctx, const teeny_conv2d_params *p, const int64_t *xs, const int64_t *ws,
                               int64_t *ys)
{
    static const char *const axis[2] = {"H", "W"};
    for (int i = 0; i < 2; i++) {
        if (p->stride[i] < 1)
            return teeny__error(ctx, TEENY_ERR_ARG, "stride[%d] (%s) is %d; must be >= 1", i, axis[i], p->stride[i]);
        if (p->dilation[i] < 1)
            return teeny__error(ctx, TEENY_ERR_ARG, "dilation[%d] (%s) is %d; must be >= 1", i, axis[i],
                                p->dilation[i]);
        if (p->pad[i] < 0 || (int64_t)p->pad[i] + p->pad_end_extra[i] < 0)
            return teeny__error(ctx, TEENY_ERR_ARG, "pad[%d] (%s) is %d, pad_end_extra %d; both pads must be >= 0", i,
                                axis[i], p->pad[i], p->pad_end_extra[i]);
    }
    if (p->groups < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "groups is %d; must be >= 1", p->groups);
    for (int i = 0; i < 4; i++)
        if (xs[i] < 1 || ws[i] < 1)
            return teeny__error(ctx, TEENY_ERR_ARG, "%s dimension %d is %lld; sizes must be >= 1",
                                xs[i] < 1 ? "x" : "weight", i, (long long)(xs[i] < 1 ? xs[i] : ws[i]));
    for (int i = 0; i < 4; i++) /* so the sums and products below stay far inside int64 */
        if (xs[i] > INT32_MAX || ws[i] > INT32_MAX)
            return teeny__error(ctx, TEENY_ERR_RANGE, "%s dimension %d is %lld; beyond int32 indexing",
                                xs[i] > INT32_MAX ? "x" : "weight", i, (long long)(xs[i] > INT32_MAX ? xs[i] : ws[i]));
    int64_t G = p->groups;
    if (xs[1] % G)
        return teeny__error(
            ctx, TEENY_ERR_SHAPE, "groups %d does not divide the %lld input channels of x [%lld, %lld, %lld, %lld]",
            p->groups, (long long)xs[1], (long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)xs[3]);
    if (ws[0] % G)
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "groups %d does not divide the %lld output channels of weight [%lld, %lld, %lld, %lld]",
                            p->groups, (long long)ws[0], (long long)ws[0], (long long)ws[1], (long long)ws[2],
                            (long long)ws[3]);
    if (ws[1] * G != xs[1])
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "weight [%lld, %lld, %lld, %lld] has %lld input channels per group; x [%lld, %lld, %lld, "
                            "%lld] with groups %d needs %lld",
                            (long long)ws[0], (long long)ws[1], (long long)ws[2], (long long)ws[3], (long long)ws[1],
                            (long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)xs[3], p->groups,
                            (long long)(xs[1] / G));
    int64_t out[2];
    for (int i = 0; i < 2; i++) {
        int64_t pads = 2 * (int64_t)p->pad[i] + p->pad_end_extra[i], in = xs[2 + i] + pads,
                span = (int64_t)p->dilation[i] * (ws[2 + i] - 1) + 1;
        if (in < span)
            return teeny__error(ctx, TEENY_ERR_SHAPE,
                                "%s: input %lld + pads %lld = %lld is smaller than the dilated kernel "
                                "dilation %d * (%lld - 1) + 1 = %lld",
                                axis[i], (long long)xs[2 + i], (long long)pads, (long long)in, p->dilation[i],
                                (long long)ws[2 + i], (long long)span);
        if (in > INT32_MAX / 2)
            return teeny__error(ctx, TEENY_ERR_RANGE,
                                "%s: input %lld + pads %lld is beyond int32 indexing (kernels index with int32)",
                                axis[i], (long long)xs[2 + i], (long long)pads);
        out[i] = (in - span) / p->stride[i] + 1;
    }
    const int64_t dims[4] = {xs[0], ws[0], out[0], out[1]};
    return teeny__conv_out_dims(ctx, dims, ys);
}

static teeny_conv2d_params params_of(const teeny__conv2d_attrs *at)
{
    return (teeny_conv2d_params){{at->stride[0], at->stride[1]},
                                 {at->pad[0], at->pad[1]},
                                 {at->dilation[0], at->dilation[1]},
                                 at->groups,
                                 {at->pad_end_extra[0], at->pad_end_extra[1]}};
}

/* x [B, Cin, H, W] -> y [B, Cout, OH, OW]; the weight's shape comes from
 * the attributes (its input channels per group from x and groups unless
 * given), the bias's and the eager epilogue's scale and shift are [Cout]. */
teeny_status teeny__conv2d_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    const teeny__conv2d_attrs *at = &s->attrs.conv2d;
    teeny_conv2d_params p = params_of(at);
    char b[96];
    teeny_status st;
    if (s->n_in != 1 || x->ndim != 4 || x->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x has shape %s%s; expected fp32 [B, Cin, H, W]",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b), x->is_i32 ? " int32" : "");
    if ((at->has_bias != 0 && at->has_bias != 1) ||
        (int)at->act < 0 || (int)at->act >= TEENY__ACT_COUNT)
        return teeny__error(ctx, TEENY_ERR_ARG, "act %d must be a teeny_act and has_bias %d 0 or 1", (int)at->act,
                            at->has_bias);
    /* groups past the channels: conv_shape says they do not divide them */
    int64_t per_group = at->in_per_group                              ? at->in_per_group
                        : at->groups > 0 && at->groups <= x->shape[1] ? x->shape[1] / at->groups
                                                                      : 1;
    int64_t ws[4] = {at->out_channels, per_group, at->kernel_h, at->kernel_w}, ys[4];
    if ((st = conv_shape(ctx, &p, x->shape, ws, ys)) != TEENY_OK)
        return st;
    s->out = (teeny__shape){.ndim = 4, .shape = {ys[0], ys[1], ys[2], ys[3]}};
    s->n_param = at->has_bias ? 2 : 1;
    s->param[0] = (teeny__shape){.ndim = 4, .shape = {ws[0], ws[1], ws[2], ws[3]}};
    s->param[1] = s->param[2] = s->param[3] = (teeny__shape){.ndim = 1, .shape = {ws[0]}};
    s->param_name[0] = "weight";
    s->param_name[1] = "bias";
    s->param_init[0] = s->param_init[1] = TEENY__INIT_FAN_IN;
    s->fan_in = teeny__dims_product(&ws[1], 3); /* -1 past INT64_MAX: the weight's own check rejects it */
    s->n_state = 0;
    /* with an activation, training keeps the pre-activation for the backward */
    s->n_saved = at->act != TEENY_ACT_NONE;
    s->saved[0] = s->out;
    s->saved_needs_training = 1;
    return TEENY_OK;
}

teeny_status teeny_conv2d_output_shape(const teeny_conv2d_params *p, const int64_t x_shape[4],
                                       const int64_t w_shape[4], int64_t y_shape[4])
{
    static const char fn[] = "teeny_conv2d_output_shape";
    teeny_status st = teeny__conv_shape_args(fn, p, x_shape, w_shape, y_shape);
    if (st != TEENY_OK)
        return st;
    st = conv_shape(NULL, p, x_shape, w_shape, y_shape);
    return st == TEENY_OK ? st : teeny__error(NULL, st, "%s: %s", fn, teeny_last_error(NULL));
}

/* The attributes come from p and the weight [Cout, Cin/groups, KH, KW]. */
static teeny_status run_conv(teeny_ctx *ctx, teeny__eager *e, const teeny_conv2d_params *p, const teeny_tensor *w,
                             teeny_act act, int has_bias, const teeny__earg *args, int n, int none_wanted)
{
    teeny__op_args a;
    teeny_status st = teeny__conv_eager_args(ctx, e, p, w, "[Cout, Cin/groups, KH, KW]", args, n);
    if (st != TEENY_OK)
        return st;
    e->attrs.conv2d = teeny__conv2d_attrs_of(p, act, has_bias, (int)w->shape[0], (int)w->shape[2], (int)w->shape[3],
                                             (int)w->shape[1]);
    if ((st = teeny__eager_check(ctx, e, args, n, &a)) != TEENY_OK || none_wanted)
        return st;
    return teeny__op_exec(ctx, e->pass, &a);
}

#define VEC (TEENY__EA_OPTIONAL | TEENY__EA_NUMEL) /* a per-output-channel vector: any shape of Cout elements */

teeny_status teeny_conv2d_forward_fused(teeny_ctx *ctx, const teeny_conv2d_params *p, const teeny_tensor *x,
                                        const teeny_tensor *w, const teeny_tensor *bias, const teeny_tensor *scale,
                                        const teeny_tensor *shift, teeny_act act, teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_conv2d_forward_fused", CONV2D, conv2d, forward)};
    const teeny__earg args[] = {{"x", x, TEENY__CONV2D_X, 0},
                                {"weight", w, TEENY__CONV2D_WEIGHT, 0},
                                {"bias", bias, TEENY__CONV2D_BIAS, VEC},
                                {"scale", scale, TEENY__CONV2D_SCALE, VEC},
                                {"shift", shift, TEENY__CONV2D_SHIFT, VEC},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_conv2d_forward_fused");
    return run_conv(ctx, &e, p, w, act, bias != NULL, args, 6, 0);
}

teeny_status teeny_conv2d_forward(teeny_ctx *ctx, const teeny_conv2d_params *p, const teeny_tensor *x,
                                  const teeny_tensor *w, const teeny_tensor *bias, teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_conv2d_forward", CONV2D, conv2d, forward)};
    const teeny__earg args[] = {{"x", x, TEENY__CONV2D_X, 0},
                                {"weight", w, TEENY__CONV2D_WEIGHT, 0},
                                {"bias", bias, TEENY__CONV2D_BIAS, VEC},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_conv2d_forward");
    return run_conv(ctx, &e, p, w, TEENY_ACT_NONE, bias != NULL, args, 4, 0);
}

teeny_status teeny_conv2d_backward(teeny_ctx *ctx, const teeny_conv2d_params *p, const teeny_tensor *x,
                                   const teeny_tensor *w, const teeny_tensor *dy, teeny_tensor *dx, teeny_tensor *dw,
                                   teeny_tensor *dbias)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_conv2d_backward", CONV2D, conv2d, backward)};
    const teeny__earg args[] = {{"x", x, TEENY__CONV2D_X, 0},
                                {"weight", w, TEENY__CONV2D_WEIGHT, 0},
                                {"dy", dy, TEENY__CONV2D_DY, 0},
                                {"dx", dx, TEENY__CONV2D_X, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"dw", dw, TEENY__CONV2D_WEIGHT, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"dbias", dbias, TEENY__CONV2D_BIAS, TEENY__EA_OUT | VEC}};
    EAGER_BEGIN("teeny_conv2d_backward");
    return run_conv(ctx, &e, p, w, TEENY_ACT_NONE, dbias != NULL, args, 6, !dx && !dw && !dbias);
}
