/*
 * route.c -- which route each pass of a convolution takes, and the
 * op-table entries teeny__conv2d_forward and teeny__conv2d_backward (in
 * and out slots as conv2d.c's banner lists them).
 *
 * A forward or input gradient goes to the first route of its list that
 * takes it (conv_route_fn: a route runs the pass, or leaves it to the
 * next where the problem or the device is not its own):
 *   forward:        depthwise.c, winograd.c, gemm.c
 *   input gradient: depthwise.c, dx_direct.c (its direct kernel),
 *                   winograd.c, dx_direct.c (a GEMM per stride phase)
 * The GEMM takes any pass, so a list always ends in a launch. Before the
 * list, every call checks that one unit of every GEMM fits the device's
 * loop budget (gemm.c), so that no later split can fail.
 * The backward plans everything before its first launch: where dx and
 * dweight of a 3x3 depthwise convolution at stride 1 are both asked,
 * dwconv_bwd3 computes them in one pass (depthwise.c); else the input
 * gradient by its list, and the weight gradient by Winograd
 * (winograd.c) or by weight_grad.c's plan, which also takes the bias
 * gradient; their partials share one workspace buffer.
 */
#include "conv2d_internal.h"

/* ---- geometry ---- */

conv_geom teeny__conv_geom_make(const teeny_tensor *x, const teeny_tensor *w, const teeny__conv2d_attrs *at)
{
    conv_geom g;
    g.B = (int)x->shape[0];
    g.Cin = (int)x->shape[1];
    g.H = (int)x->shape[2];
    g.W = (int)x->shape[3];
    g.Cout = (int)w->shape[0];
    g.KH = (int)w->shape[2];
    g.KW = (int)w->shape[3];
    g.sh = at->stride[0];
    g.sw = at->stride[1];
    g.ph = at->pad[0];
    g.pw = at->pad[1];
    g.dh = at->dilation[0];
    g.dw = at->dilation[1];
    g.G = at->groups;
    g.Cig = g.Cin / g.G;
    g.Cog = g.Cout / g.G;
    g.OH = (g.H + 2 * g.ph + at->pad_end_extra[0] - g.dh * (g.KH - 1) - 1) / g.sh + 1;
    g.OW = (g.W + 2 * g.pw + at->pad_end_extra[1] - g.dw * (g.KW - 1) - 1) / g.sw + 1;
    return g;
}

/* ---- the tuning ---- */

/* The profile's tf32 tuning when the application asked for tf32
 * (teeny_ctx_set_tf32), the probe found the instructions
 * (conv_tf32_probe has run) or a test emulates them (the test hook
 * CONV_TF32_EMULATE), and the profile has tf32 tiles; else its fp32 one
 * (ctx->tune's copies, with TEENY_CONV_TILE / _TF32_TILE). */
static const conv_tuning *conv_tuning_of(const teeny_ctx *ctx)
{
    const teeny__tune *t = &ctx->tune;
    int mma = ctx->prog.tf32_mma || ctx->hooks.conv_tf32_emulate;
    return ctx->tf32 && mma && t->conv_tf32.n_tiles > 0 ? &t->conv_tf32 : &t->conv;
}

/* Probe the tf32 instructions once (probe.c) if the application asked
 * for tf32; what conv_tuning_of then reads. */
static teeny_status conv_tf32_probe(teeny_ctx *ctx)
{
    int capable;
    return ctx->tf32 ? teeny__tf32_capable(ctx, &capable) : TEENY_OK;
}

int teeny__conv2d_debug_pick(const teeny_ctx *ctx, int64_t M, int64_t N, int64_t G, int64_t z)
{
    return teeny__conv_pick_tile(ctx, conv_tuning_of(ctx), M, N, G, z);
}

/* ---- the routes ---- */

static const conv_route_fn forward_routes[] = {teeny__conv_dw_forward, teeny__conv_wino_forward,
                                               teeny__conv_gemm_forward};
static const conv_route_fn dx_routes[] = {teeny__conv_dw_dx, teeny__conv_dx_direct, teeny__conv_wino_dx,
                                          teeny__conv_gemm_dx};

/* p by the first of the n routes that takes it. */
static teeny_status route_run(teeny_ctx *ctx, const conv_route_fn *routes, int n, const conv_pass *p)
{
    teeny_status st = TEENY_OK;
    int taken = 0;
    for (int i = 0; i < n && st == TEENY_OK && !taken; i++)
        st = routes[i](ctx, p, &taken);
    if (st == TEENY_OK && !taken)
        return teeny__error(ctx, TEENY_ERR_STATE, "conv2d: no route took the pass");
    return st;
}

/* ---- forward ---- */

/* The convolution with the epilogue's activation act (a code of
 * epilogue_act: conv_act in cl/common.cl). */
static teeny_status forward_run(teeny_ctx *ctx, const teeny__op_args *a, int act)
{
    const teeny_tensor *x = a->in[TEENY__CONV2D_X], *w = a->in[TEENY__CONV2D_WEIGHT], *bias = a->in[TEENY__CONV2D_BIAS],
                       *scale = a->in[TEENY__CONV2D_SCALE], *shift = a->in[TEENY__CONV2D_SHIFT];
    conv_pass p = {.g = teeny__conv_geom_make(x, w, &a->attrs.conv2d), .x = x, .w = w, .out = a->out[TEENY__OUT_VALUE],
                   .w_frozen = a->frozen};
    teeny_status st = conv_tf32_probe(ctx);
    p.tu = conv_tuning_of(ctx);
    if (st == TEENY_OK) /* the device's loop budget (gemm.c) */
        st = teeny__conv_loops_check(ctx, p.tu, &p.g.Cog, 1);
    if (st != TEENY_OK)
        return st;
    p.e.epi = (bias ? 1 : 0) | (scale ? 2 : 0) | (shift ? 4 : 0);
    p.e.act = act;
    p.e.bias = bias ? bias->buf : x->buf;
    p.e.scale = scale ? scale->buf : x->buf;
    p.e.shift = shift ? shift->buf : x->buf;
    p.e.bias_off = bias ? teeny__off(bias) : 0;
    p.e.scale_off = scale ? teeny__off(scale) : 0;
    p.e.shift_off = shift ? teeny__off(shift) : 0;
    return route_run(ctx, forward_routes, (int)(sizeof forward_routes / sizeof forward_routes[0]), &p);
}

/* The node's activation with its parameters. */
static teeny__activation_attrs act_of(const teeny__conv2d_attrs *at)
{
    return (teeny__activation_attrs){at->act, at->act_alpha, at->act_beta};
}

/* The code of the activation in the convolution's store (conv_act in
 * cl/common.cl: none, ReLU, SiLU; where the tuning has the CPU GEMM,
 * whose builds of the conv2d program have them, also HardSwish and Clip
 * to [0, 6] as TEENY__CONV_ACT_RELU6), or -1 where it runs as a pass
 * after it. */
static int epilogue_act(const teeny__conv2d_attrs *at, const conv_tuning *tu)
{
    if (at->act == TEENY_ACT_NONE || at->act == TEENY_ACT_RELU || at->act == TEENY_ACT_SILU)
        return (int)at->act;
    if (tu->cpu_rows <= 0)
        return -1;
    if (at->act == TEENY_ACT_HARDSWISH)
        return (int)at->act;
    return at->act == TEENY_ACT_CLIP && at->act_alpha == 0.0f && at->act_beta == 6.0f ? TEENY__CONV_ACT_RELU6 : -1;
}

/* The activations epilogue_act names run in the convolution's store. Any
 * other runs in place on y after the convolution, and so does every
 * activation of a training graph node, whose convolution writes the
 * pre-activation it saves for the backward (out slot 1,
 * TEENY__CONV2D_PRE's). Either way the same bits (conv_act computes
 * teeny_act's formulas). */
teeny_status teeny__conv2d_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny_act act = a->attrs.conv2d.act;
    teeny_tensor *pre = act != TEENY_ACT_NONE ? a->out[1] : NULL;
    teeny_status st = conv_tf32_probe(ctx); /* the tuning epilogue_act reads */
    if (st != TEENY_OK)
        return st;
    int epi = epilogue_act(&a->attrs.conv2d, conv_tuning_of(ctx)), post = pre || epi < 0;
    teeny__op_args c = *a;
    if (pre)
        c.out[TEENY__OUT_VALUE] = pre;
    st = forward_run(ctx, &c, post ? (int)TEENY_ACT_NONE : epi);
    if (st == TEENY_OK && post) {
        teeny__op_args p = {0};
        p.in[TEENY__ACTIVATION_X] = c.out[TEENY__OUT_VALUE];
        p.out[TEENY__OUT_VALUE] = a->out[TEENY__OUT_VALUE];
        p.attrs.activation = act_of(&a->attrs.conv2d);
        st = teeny__activation_forward(ctx, &p);
    }
    return st;
}

/* A node with an activation: dy through the activation's gradient at the
 * saved pre-activation, into workspace *t (y's shape), so that the
 * convolution's backward below takes it as its dy. */
static teeny_status act_backward(teeny_ctx *ctx, const teeny__op_args *a, teeny_tensor *t, cl_mem *buf)
{
    const teeny_tensor *pre = a->in[TEENY__CONV2D_PRE], *dy = a->in[TEENY__CONV2D_DY];
    if (!pre)
        return teeny__error(ctx, TEENY_ERR_STATE, "conv2d with activation %d: its backward needs the pre-activation "
                            "that a training forward saves", (int)a->attrs.conv2d.act);
    teeny_status st = teeny__scratch(ctx, (size_t)dy->numel * sizeof(float), buf);
    if (st != TEENY_OK)
        return st;
    *t = *dy;
    t->buf = *buf;
    t->offset = 0;
    teeny__op_args p = {0};
    p.in[TEENY__ACTIVATION_X] = pre;
    p.in[TEENY__ACTIVATION_DY] = dy;
    p.out[TEENY__ACTIVATION_X] = t;
    p.attrs.activation = act_of(&a->attrs.conv2d);
    return teeny__activation_backward(ctx, &p);
}

/* ---- backward ---- */

static teeny_status backward_run(teeny_ctx *ctx, const teeny__op_args *a, const teeny_tensor *dy);

teeny_status teeny__conv2d_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    if (a->attrs.conv2d.act == TEENY_ACT_NONE)
        return backward_run(ctx, a, a->in[TEENY__CONV2D_DY]);
    teeny_tensor t;
    cl_mem buf = NULL;
    teeny_status st = act_backward(ctx, a, &t, &buf);
    if (st == TEENY_OK)
        st = backward_run(ctx, a, &t);
    if (buf)
        teeny__scratch_give(ctx, buf); /* enqueued: later launches may take it */
    return st;
}

/* The convolution's gradients for dy, the gradient of its output before
 * any activation. */
static teeny_status backward_run(teeny_ctx *ctx, const teeny__op_args *a, const teeny_tensor *dy)
{
    const teeny_tensor *x = a->in[TEENY__CONV2D_X], *w = a->in[TEENY__CONV2D_WEIGHT];
    teeny_tensor *dx = a->out[TEENY__CONV2D_X], *dw = a->out[TEENY__CONV2D_WEIGHT], *db = a->out[TEENY__CONV2D_BIAS];
    conv_geom g = teeny__conv_geom_make(x, w, &a->attrs.conv2d);
    teeny_status st = conv_tf32_probe(ctx);
    const conv_tuning *tu = conv_tuning_of(ctx);
    grad_plan gp, wino_gp;
    cl_mem scratch = NULL;
    int wino_dw = 0, fused = 0; /* fused: dwconv_bwd3's partials per channel (dx and dw in one pass) */

    int n_pack[2] = {g.Cig, g.Cog};
    conv_pass dx_pass = {.g = g, .tu = tu, .w = w, .dy = dy, .out = dx};

    /* every plan before the first launch: one unit of every GEMM fits the
     * device's loop budget (gemm.c), the gradient splits (the Winograd
     * weight gradient's of its own GEMMs) */
    if (st == TEENY_OK)
        st = teeny__conv_loops_check(ctx, tu, n_pack, 2);
    if (st == TEENY_OK && dx && dw)
        fused = teeny__conv_dw_bwd3_plan(ctx, tu, &g, &st);
    if (st == TEENY_OK && dw && !fused)
        st = teeny__conv_wino_dw_plan(ctx, tu, &g, &wino_gp, &wino_dw);
    if (st == TEENY_OK && (dw || db))
        st = teeny__conv_grad_plan_make(ctx, tu, &g, dw && !wino_dw && !fused, db != NULL, &gp);
    if (fused > 1) /* its partials where the weight gradient's would be */
        gp.dw_elems = (int64_t)fused * g.Cout * 9;
    if (st == TEENY_OK && dx && !fused)
        st = route_run(ctx, dx_routes, (int)(sizeof dx_routes / sizeof dx_routes[0]), &dx_pass);
    if (st != TEENY_OK || (!dw && !db))
        return st;
    if (gp.dw_elems + gp.db_elems > 0)
        st = teeny__scratch(ctx, (size_t)(gp.dw_elems + gp.db_elems) * sizeof(float), &scratch);
    if (st == TEENY_OK && fused)
        st = teeny__conv_dw_bwd3(ctx, tu, &g, fused, x, w, dy, dx, dw, scratch);
    else if (st == TEENY_OK && dw && wino_dw)
        st = teeny__conv_wino_dw(ctx, tu, &g, &wino_gp, x, dy, dw);
    else if (st == TEENY_OK && dw)
        st = teeny__conv_dw_run(ctx, tu, &g, &gp, x->buf, teeny__off(x), dy->buf, teeny__off(dy), dw->buf,
                                teeny__off(dw), scratch);
    if (st == TEENY_OK && db)
        st = teeny__conv_db_run(ctx, tu, &g, &gp, dy, db, scratch, (int)gp.dw_elems);
    return st;
}
