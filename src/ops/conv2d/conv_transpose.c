/*
 * conv_transpose.c -- 2-D transposed convolution (PyTorch's
 * conv_transpose2d, ONNX's ConvTranspose): x [B, Cin, H, W], weight
 * [Cin, Cout/groups, KH, KW], bias [Cout] or none, y [B, Cout, OH, OW]
 * with, per axis, OH = (H - 1)*stride - pad - pad_end + dilation*(KH - 1)
 * + 1 + output_padding. It is the gradient of a convolution, so every pass
 * runs conv2d's own (route.c, through the op table's functions):
 *   forward:  y = conv2d's input gradient, with dy = x (the convolution
 *             that maps y's shape to x's: same weight layout, stride,
 *             padding before, dilation, groups), then the bias
 *             (convt_bias_add in cl/conv_transpose.cl);
 *   backward: dx = conv2d forward of dy; dweight = conv2d's weight
 *             gradient with x = dy and dy = x; dbias = the per-channel
 *             sum of dy, conv2d's bias gradient over a 1x1 stand-in.
 * So the passes inherit conv2d's kernels, CPU variants, loop-budget
 * splits and determinism. The convolution's padding after is chosen so
 * that its output is exactly H: pad_end - output_padding + output_padding
 * mod stride (output_padding's extra rows receive no tap).
 *
 * Op-table entry conv_transpose2d (slots TEENY__CONV_TRANSPOSE2D_*, ops.h;
 * attrs.conv_transpose2d): forward in = [x, weight, bias], out = [y];
 * backward in = [x, weight, bias, y, dy], out = [dx, dweight, dbias].
 */
#include <string.h>

#include "../ops.h"
#include "conv2d_internal.h"

/* ---- the convolution behind it ---- */

/* The convolution whose input gradient this is (its input: y's shape). */
static teeny__conv2d_attrs conv_of(const teeny__conv_transpose2d_attrs *at)
{
    teeny__conv2d_attrs c = {{at->stride[0], at->stride[1]},
                             {at->pad[0], at->pad[1]},
                             {at->dilation[0], at->dilation[1]},
                             at->groups,
                             TEENY_ACT_NONE,
                             {0, 0},
                             0,
                             0,
                             0,
                             0,
                             0,
                             0.0f,
                             0.0f};
    for (int i = 0; i < 2; i++) {
        int op = at->output_padding[i], pe = at->pad[i] + at->pad_end_extra[i];
        c.pad_end_extra[i] = pe - op + op % at->stride[i] - at->pad[i];
    }
    return c;
}

/* A stand-in conv2d's passes read only for its shape (and buffer, never
 * read or written): t with the shape [n, c, h, w]. */
static teeny_tensor stand_in(const teeny_tensor *t, int64_t n, int64_t c, int64_t h, int64_t w)
{
    teeny_tensor s = *t;
    s.ndim = 4;
    s.shape[0] = n;
    s.shape[1] = c;
    s.shape[2] = h;
    s.shape[3] = w;
    s.numel = n * c * h * w;
    return s;
}

teeny_status teeny__conv_transpose2d_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    static const char name[] = "convt_bias_add";
    const teeny_tensor *x = a->in[TEENY__CONV_TRANSPOSE2D_X], *w = a->in[TEENY__CONV_TRANSPOSE2D_WEIGHT],
                       *bias = a->in[TEENY__CONV_TRANSPOSE2D_BIAS];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    teeny__op_args c = {.attrs.conv2d = conv_of(&a->attrs.conv_transpose2d), .training = a->training};
    c.in[TEENY__CONV2D_X] = y; /* the convolution's input: its shape */
    c.in[TEENY__CONV2D_WEIGHT] = w;
    c.in[TEENY__CONV2D_DY] = x;
    c.out[TEENY__CONV2D_X] = y;
    teeny_status st = teeny__conv2d_backward(ctx, &c);
    if (st != TEENY_OK || !bias)
        return st;
    int y_off = teeny__off(y), b_off = teeny__off(bias), C = (int)y->shape[1], S = (int)(y->shape[2] * y->shape[3]),
        total = (int)y->numel;
    teeny__karg k[] = {TEENY__KARG_MEM(y->buf),    TEENY__KARG_INT(y_off), TEENY__KARG_MEM(bias->buf),
                       TEENY__KARG_INT(b_off),     TEENY__KARG_INT(C),     TEENY__KARG_INT(S),
                       TEENY__KARG_INT(total)};
    cl_kernel kern;
    if ((st = teeny__kernel_get(ctx, "conv_transpose", "", name, &kern)) != TEENY_OK ||
        (st = teeny__set_arg_list(ctx, kern, name, k, (int)(sizeof k / sizeof k[0]))) != TEENY_OK)
        return st;
    return teeny__launch_1d(ctx, kern, name, (size_t)total);
}

/* dx, dweight, dbias (each may be NULL). */
teeny_status teeny__conv_transpose2d_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__CONV_TRANSPOSE2D_X], *w = a->in[TEENY__CONV_TRANSPOSE2D_WEIGHT],
                       *dy = a->in[TEENY__CONV_TRANSPOSE2D_DY];
    teeny_tensor *dx = a->out[TEENY__CONV_TRANSPOSE2D_X], *dw = a->out[TEENY__CONV_TRANSPOSE2D_WEIGHT],
                 *db = a->out[TEENY__CONV_TRANSPOSE2D_BIAS];
    teeny__conv2d_attrs ca = conv_of(&a->attrs.conv_transpose2d);
    teeny_status st = TEENY_OK;
    if (dx) { /* the convolution's forward of dy */
        teeny__op_args c = {.attrs.conv2d = ca, .training = a->training};
        c.in[TEENY__CONV2D_X] = dy;
        c.in[TEENY__CONV2D_WEIGHT] = w;
        c.out[TEENY__OUT_VALUE] = dx;
        st = teeny__conv2d_forward(ctx, &c);
    }
    if (st == TEENY_OK && dw) { /* its weight gradient, with x = dy and dy = x */
        teeny__op_args c = {.attrs.conv2d = ca, .training = a->training};
        c.in[TEENY__CONV2D_X] = dy;
        c.in[TEENY__CONV2D_WEIGHT] = w;
        c.in[TEENY__CONV2D_DY] = x;
        c.out[TEENY__CONV2D_WEIGHT] = dw;
        st = teeny__conv2d_backward(ctx, &c);
    }
    if (st == TEENY_OK && db) { /* the bias gradient of a 1x1 convolution whose output is dy */
        teeny_tensor in = stand_in(dy, dy->shape[0], 1, dy->shape[2], dy->shape[3]),
                     w1 = stand_in(dy, dy->shape[1], 1, 1, 1);
        teeny__op_args c = {.attrs.conv2d = {{1, 1}, {0, 0}, {1, 1}, 1, TEENY_ACT_NONE, {0, 0}, 1, 0, 0, 0, 0},
                            .training = a->training};
        c.in[TEENY__CONV2D_X] = &in;
        c.in[TEENY__CONV2D_WEIGHT] = &w1;
        c.in[TEENY__CONV2D_DY] = dy;
        c.out[TEENY__CONV2D_BIAS] = db;
        st = teeny__conv2d_backward(ctx, &c);
    }
    return st;
}

/* ---- shapes and the eager API ---- */

/* The rule: parameter values and the shapes of x and the weight; ys gets
 * the output shape. ctx may be NULL (the thread's error). */
static teeny_status convt_shape(teeny_ctx *ctx, const teeny__conv_transpose2d_attrs *at, const int64_t *xs,
                                const int64_t *ws, int64_t *ys)
{
    static const char *const axis[2] = {"H", "W"};
    int64_t out[2];
    for (int i = 0; i < 2; i++) {
        int s = at->stride[i], d = at->dilation[i], p = at->pad[i], op = at->output_padding[i];
        int64_t pe = (int64_t)p + at->pad_end_extra[i];
        if (s < 1 || d < 1 || p < 0 || pe < 0 || op < 0 || (op >= s && op >= d))
            return teeny__error(ctx, TEENY_ERR_ARG,
                                "%s: stride %d, dilation %d, pad %d, pad_end_extra %d, output_padding %d; need "
                                "stride, dilation >= 1, both pads >= 0, 0 <= output_padding < stride or dilation",
                                axis[i], s, d, p, at->pad_end_extra[i], op);
    }
    if (at->groups < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "groups is %d; must be >= 1", at->groups);
    for (int i = 0; i < 4; i++) {
        if (xs[i] < 1 || ws[i] < 1)
            return teeny__error(ctx, TEENY_ERR_ARG, "%s dimension %d is %lld; sizes must be >= 1",
                                xs[i] < 1 ? "x" : "weight", i, (long long)(xs[i] < 1 ? xs[i] : ws[i]));
        if (xs[i] > INT32_MAX || ws[i] > INT32_MAX)
            return teeny__error(ctx, TEENY_ERR_RANGE, "%s dimension %d is %lld; beyond int32 indexing",
                                xs[i] > INT32_MAX ? "x" : "weight", i, (long long)(xs[i] > INT32_MAX ? xs[i] : ws[i]));
    }
    if (ws[0] != xs[1] || xs[1] % at->groups)
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "weight [%lld, %lld, %lld, %lld] needs x's %lld input channels first, divisible by "
                            "groups %d",
                            (long long)ws[0], (long long)ws[1], (long long)ws[2], (long long)ws[3],
                            (long long)xs[1], at->groups);
    for (int i = 0; i < 2; i++) {
        int64_t pe = (int64_t)at->pad[i] + at->pad_end_extra[i];
        out[i] = (xs[2 + i] - 1) * at->stride[i] - at->pad[i] - pe + (int64_t)at->dilation[i] * (ws[2 + i] - 1) + 1 +
                 at->output_padding[i];
        if (out[i] < 1)
            return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: the output would have %lld rows (the padding takes them "
                                "all)", axis[i], (long long)out[i]);
        if (out[i] + at->pad[i] + pe > INT32_MAX / 2)
            return teeny__error(ctx, TEENY_ERR_RANGE, "%s: the output %lld with its padding is beyond int32 indexing",
                                axis[i], (long long)out[i]);
    }
    const int64_t dims[4] = {xs[0], ws[1] * at->groups, out[0], out[1]};
    return teeny__conv_out_dims(ctx, dims, ys);
}

/* x [B, Cin, H, W] -> y [B, Cout, OH, OW]; params weight [Cin, Cout/groups,
 * KH, KW] and bias [Cout], initialized as PyTorch does (fan-in from the
 * weight's dimensions 1..3). */
teeny_status teeny__conv_transpose2d_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    const teeny__conv_transpose2d_attrs *at = &s->attrs.conv_transpose2d;
    char b[96];
    teeny_status st;
    if (s->n_in != 1 || x->ndim != 4 || x->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x has shape %s%s; expected fp32 [B, Cin, H, W]",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b), x->is_i32 ? " int32" : "");
    if ((at->has_bias != 0 && at->has_bias != 1) || at->out_channels < 1 || at->groups < 1 ||
        at->out_channels % at->groups)
        return teeny__error(ctx, TEENY_ERR_ARG, "out_channels %d must be >= 1 and divisible by groups %d, has_bias "
                            "%d 0 or 1", at->out_channels, at->groups, at->has_bias);
    int64_t ws[4] = {x->shape[1], at->out_channels / at->groups, at->kernel_h, at->kernel_w}, ys[4];
    if ((st = convt_shape(ctx, at, x->shape, ws, ys)) != TEENY_OK)
        return st;
    s->out = (teeny__shape){.ndim = 4, .shape = {ys[0], ys[1], ys[2], ys[3]}};
    s->n_param = at->has_bias ? 2 : 1;
    s->param[0] = (teeny__shape){.ndim = 4, .shape = {ws[0], ws[1], ws[2], ws[3]}};
    s->param[1] = (teeny__shape){.ndim = 1, .shape = {ys[1]}};
    s->param_name[0] = "weight";
    s->param_name[1] = "bias";
    s->param_init[0] = s->param_init[1] = TEENY__INIT_FAN_IN;
    s->fan_in = teeny__dims_product(&ws[1], 3);
    s->n_state = s->n_saved = 0;
    return TEENY_OK;
}

teeny_status teeny_conv_transpose2d_output_shape(const teeny_conv_transpose2d_params *p, const int64_t x_shape[4],
                                                 const int64_t w_shape[4], int64_t y_shape[4])
{
    static const char fn[] = "teeny_conv_transpose2d_output_shape";
    teeny_status st = teeny__conv_shape_args(fn, p, x_shape, w_shape, y_shape);
    if (st != TEENY_OK)
        return st;
    teeny__conv_transpose2d_attrs at = teeny__conv_transpose2d_attrs_of(p, 0, 1, 1, 1);
    int64_t ys[4];
    st = convt_shape(NULL, &at, x_shape, w_shape, ys);
    if (st != TEENY_OK)
        return teeny__error(NULL, st, "%s: %s", fn, teeny_last_error(NULL));
    memcpy(y_shape, ys, sizeof ys);
    return TEENY_OK;
}

/* The eager calls: the weight gives the attributes' channels and kernel. */
static teeny_status run_convt(teeny_ctx *ctx, teeny__eager *e, const teeny_conv_transpose2d_params *p,
                              const teeny_tensor *w, int has_bias, const teeny__earg *args, int n)
{
    teeny_status st = teeny__conv_eager_args(ctx, e, p, w, "[Cin, Cout/groups, KH, KW]", args, n);
    if (st != TEENY_OK)
        return st;
    int64_t g = p->groups > 0 ? p->groups : 1; /* groups < 1: the shape rule's TEENY_ERR_ARG */
    if (w->shape[1] > INT32_MAX / g || w->shape[2] > INT32_MAX || w->shape[3] > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "%s: weight [%lld, %lld, %lld, %lld] with groups %d passes int32",
                            e->fn, (long long)w->shape[0], (long long)w->shape[1], (long long)w->shape[2],
                            (long long)w->shape[3], p->groups);
    int64_t out = w->shape[1] * g;
    e->attrs.conv_transpose2d = teeny__conv_transpose2d_attrs_of(p, has_bias, (int)out, (int)w->shape[2], (int)w->shape[3]);
    return teeny__eager_run(ctx, e, args, n);
}

#define VEC (TEENY__EA_OPTIONAL | TEENY__EA_NUMEL) /* [Cout]: any shape of Cout elements */

teeny_status teeny_conv_transpose2d_forward(teeny_ctx *ctx, const teeny_conv_transpose2d_params *p,
                                            const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *bias,
                                            teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_conv_transpose2d_forward", CONV_TRANSPOSE2D, conv_transpose2d, forward)};
    const teeny__earg args[] = {{"x", x, TEENY__CONV_TRANSPOSE2D_X, 0},
                                {"weight", w, TEENY__CONV_TRANSPOSE2D_WEIGHT, 0},
                                {"bias", bias, TEENY__CONV_TRANSPOSE2D_BIAS, VEC},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_conv_transpose2d_forward");
    return run_convt(ctx, &e, p, w, bias != NULL, args, 4);
}

teeny_status teeny_conv_transpose2d_backward(teeny_ctx *ctx, const teeny_conv_transpose2d_params *p,
                                             const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *dy,
                                             teeny_tensor *dx, teeny_tensor *dw, teeny_tensor *dbias)
{
    teeny__eager e = {
        TEENY__EAGER_OF("teeny_conv_transpose2d_backward", CONV_TRANSPOSE2D, conv_transpose2d, backward)};
    const teeny__earg args[] = {{"x", x, TEENY__CONV_TRANSPOSE2D_X, 0},
                                {"weight", w, TEENY__CONV_TRANSPOSE2D_WEIGHT, 0},
                                {"dy", dy, TEENY__CONV_TRANSPOSE2D_DY, 0},
                                {"dx", dx, TEENY__CONV_TRANSPOSE2D_X, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"dw", dw, TEENY__CONV_TRANSPOSE2D_WEIGHT, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"dbias", dbias, TEENY__CONV_TRANSPOSE2D_BIAS, TEENY__EA_OUT | VEC}};
    EAGER_BEGIN("teeny_conv_transpose2d_backward");
    return run_convt(ctx, &e, p, w, dbias != NULL, args, 6);
}
