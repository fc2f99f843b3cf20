/*
 * winograd.c -- the Winograd route: 3x3, stride-1, dense convolutions by Winograd
 * F(2x2, 3x3) or F(4x4, 3x3): the forward (with its fused epilogue) and
 * the input gradient, both as out = conv(in, filters) through the three
 * transforms of cl/winograd.cl (its banner has the algebra and the
 * layouts of U, V, M) and, between them, the n_e = 16 (F(2x2)) or 36
 * (F(4x4)) GEMMs M_e[O][Tp] = U_e[O][I] V_e[I][Tp] as one grouped 1x1
 * convolution through gemm.c's GEMM launches
 * (teeny__conv_gemm_run: conv_gemm_1x1 on GPUs, conv_gemm_cpu on CPUs):
 * n_e groups of I input and O output channels over a 1 x Tp "image".
 * The weight gradient (F(2x2, 3x3) only) runs the adjoints: V of x as in
 * the forward, dM of dy (wino_dy), the 16 GEMMs dU_e[O][I] = dM_e V_e^T
 * as that grouped 1x1 convolution's weight gradient (weight_grad.c's
 * teeny__conv_dw_run: split over the tiles, partials summed in a fixed
 * order), then dw = G^T dU G (wino_weights_grad).
 * Whether a pass takes this route, and how many images per pass, is
 * teeny__conv_wino_plan's call (below, with its test hooks): the forward
 * and input gradient ask it when route.c hands them the pass, route.c's
 * backward for the weight gradient. U, V, M, dM, dU and the partials are
 * workspace buffers from teeny__scratch.
 */
#include <string.h>

#include "conv2d_internal.h"

/* ---- the plan (the one place that routes a pass here) ---- */

/* The route: Winograd where the profile asks for it
 * (tu->wino for the forward and input gradient, 2 or 4 its tiles' side;
 * for the weight gradient tu->wino_dw, the fewest channels each way it
 * takes; read from the fp32 tuning, a tf32 one's being unset: tf32 calls
 * as wino_tuning says; forced, the profile's tiles or 2x2), a 3x3,
 * stride-1, dilation-1, ungrouped
 * convolution with pads of at most 2 (the input gradient's are 2 - pad)
 * and at least WINO_MIN_CHANNELS channels each way, with WINO_MIN_TILES
 * 2x2 output tiles' worth of outputs or more: fewer leave the GEMMs too
 * few work-groups to fill a GPU. 256, measured (H200, 2026-12-03): at
 * 1024, ResNet's 3x3 512->512 at 7^2, batch 32 (512 tiles) took the
 * implicit GEMM, 52 work-groups of 128 x 128 for 7.4 GFLOP: 0.419 ms
 * forward, 0.671 backward; by Winograd 0.147-0.161 and 0.350-0.369, the
 * larger cases unchanged. Its workspace
 * (U, V, M: n_e x (I*O + (I + O) * tiles) floats) stays under
 * WINO_SCRATCH_MAX bytes and the device's largest buffer (all three in
 * one sum, so each does too): the
 * images go in passes of as many as fit, and where one image does not,
 * the GEMM path takes the convolution. The weight gradient sums over every
 * image, so it takes one pass of all of them or the GEMM path. */
#define WINO_MIN_CHANNELS 16
#define WINO_MIN_TILES 256
#define WINO_SCRATCH_MAX ((int64_t)256 << 20)

/* The output tiles' side m of pass: 4, F(4x4, 3x3), where the profile's
 * wino is 4 (not for the weight gradient), else 2; (m + 2)^2 GEMMs. */
static int wino_m(const conv_tuning *tu, int pass)
{
    return pass != TEENY__WINO_DW && tu->wino == 4 ? 4 : 2;
}

/* With tf32 (a tf32 tuning), Winograd takes a forward or input gradient
 * only where the tf32 implicit GEMM would give the compute units fewer
 * work-groups of its largest tile than there are units, and then runs the
 * fp32 tuning's transforms and GEMMs (fp32 products: fp32's accuracy,
 * where the tf32 GEMM's operands would lose bits). On the H200
 * (2026-12-03, batch 32) the tf32 GEMM took 0.171 ms for 3x3 256->256 at
 * 14^2 (98 work-groups of 128 x 128 for 132 units) and 0.311 for 512->512
 * at 7^2 (52), fp32 Winograd 0.135-0.145 and 0.136-0.147; at 28^2 and
 * 56^2 (196 and 784 work-groups) the tf32 GEMM was the faster. The weight
 * gradient keeps the tf32 GEMM. */
static const conv_tuning *wino_tuning(const teeny_ctx *ctx, const conv_tuning *tu)
{
    return tu->tf32 ? &ctx->tune.conv : tu;
}

static int tf32_gemm_fills(const teeny_ctx *ctx, const conv_tuning *tu, int64_t M, int64_t N)
{
    int i = 0; /* the largest tile a forward takes */
    while (i + 1 < tu->n_tiles && tu->tiles[i].dw_first)
        i++;
    int64_t cus = ctx->info.compute_units ? ctx->info.compute_units : 1;
    return teeny__conv_cdiv(M, tu->tiles[i].tm) * teeny__conv_cdiv(N, tu->tiles[i].tn) >= cus;
}

int teeny__conv_wino_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int pass)
{
    int64_t mode = ctx->hooks.conv_wino; /* the test hooks CONV_WINO, _CAP, _TAKEN */
    if (g->KH != 3 || g->KW != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || g->G != 1 ||
        g->ph > 2 || g->pw > 2 || mode < 0)
        return 0;
    int forced = mode > 0, dx = pass == TEENY__WINO_DX;
    int64_t I = dx ? g->Cout : g->Cin, O = dx ? g->Cin : g->Cout, OH = dx ? g->H : g->OH, OW = dx ? g->W : g->OW;
    if (tu->tf32 && (pass == TEENY__WINO_DW || tf32_gemm_fills(ctx, tu, g->B * OH * OW, O)))
        return 0;
    tu = wino_tuning(ctx, tu);
    int m = wino_m(tu, pass), n_e = (m + 2) * (m + 2);
    int64_t least = pass == TEENY__WINO_DW ? tu->wino_dw : tu->wino ? WINO_MIN_CHANNELS : 0;
    if (!forced &&
        (!least || I < least || O < least || g->B * teeny__conv_cdiv(OH, 2) * teeny__conv_cdiv(OW, 2) < WINO_MIN_TILES))
        return 0;
    int64_t cap = ctx->hooks.conv_wino_cap > 0 ? ctx->hooks.conv_wino_cap : WINO_SCRATCH_MAX;
    if (cap > (int64_t)ctx->info.max_alloc_bytes)
        cap = (int64_t)ctx->info.max_alloc_bytes;
    cap /= (int64_t)sizeof(float);
    if (cap > INT32_MAX / 2)
        cap = INT32_MAX / 2;
    /* per pass: U (dU), then V and M (dM) with their tile rows padded by up to 3 */
    int64_t fixed = n_e * I * O + n_e * (I + O) * 3,
            per_image = n_e * (I + O) * teeny__conv_cdiv(OH, m) * teeny__conv_cdiv(OW, m);
    int64_t batch = cap > fixed ? (cap - fixed) / per_image : 0;
    if (batch < 1 || (pass == TEENY__WINO_DW && batch < g->B))
        return 0;
    ctx->hooks.conv_wino_taken++;
    return (int)(batch < g->B ? batch : g->B);
}

/* ---- the passes ---- */

/* One convolution: out [B, O, OH, OW] = conv3x3(in [B, I, H, W]) with
 * top/left pads pad_h, pad_w, stride 1, filters w [O][I][3][3], or with
 * flip w [I][O][3][3] read flipped and transposed (the input gradient),
 * through epilogue e. */
typedef struct {
    cl_mem in, w, out;
    int in_off, w_off, out_off;
    int B, I, H, W, O, OH, OW, pad_h, pad_w, flip;
    dw_epilogue e;
    int w_frozen; /* w a constant of the recording: its transform (and, on CPUs, its packing) are setup launches */
} wino_conv;

/* A transform over a (g0, g1) grid: work-groups of the profile's dw_wg
 * items along g0 where the kernel takes them, else the driver's choice
 * (the kernels need no local memory). */
static teeny_status wino_launch(teeny_ctx *ctx, const conv_tuning *tu, const char *name, const karg *a, int n,
                                int64_t g0, int64_t g1)
{
    size_t global[2] = {(size_t)g0, (size_t)g1}, local[2] = {(size_t)tu->dw_wg, 1};
    teeny_status st = teeny__kernel_fit(ctx, "winograd", "", name, local[0], 0, NULL);
    if (st == TEENY_ERR_UNSUPPORTED)
        teeny__clear_error(ctx);
    else if (st != TEENY_OK)
        return st;
    return teeny__run_kernel(ctx, "winograd", "", name, a, n, 2, global, st == TEENY_OK ? local : NULL);
}

/* The n_e GEMMs of one pass over Tp tiles: group e reads V rows
 * e*I + c (stride Tp) and U_e [O][I], writes M rows e*O + o. */
static teeny_status wino_gemms(teeny_ctx *ctx, const conv_tuning *tu, const wino_conv *c, const cl_mem *uvm, int Tp,
                               int n_e)
{
    gemm_job j;
    memset(&j, 0, sizeof j);
    j.w = uvm[0];
    j.src = uvm[1];
    j.out = uvm[2];
    j.M = Tp;
    j.N = c->O;
    j.G = n_e;
    j.P = 1;
    j.Q = Tp;
    j.Kc = c->I;
    j.Kh = j.Kw = 1;
    j.src_bstride = n_e * c->I * Tp;
    j.src_cstride = Tp;
    j.src_gstride = c->I * Tp;
    j.Hs = 1;
    j.Ws = Tp;
    j.a_h = j.e_h = j.a_w = j.e_w = 1;
    j.w_gstride = c->O * c->I;
    j.w_nstride = c->I;
    j.w_cstride = 1;
    j.w_hstride = j.w_wstride = 1;
    j.out_bstride = n_e * c->O * Tp;
    j.out_nstride = Tp;
    j.out_hstride = Tp;
    j.out_wstride = 1;
    j.bias = j.scale = j.shift = uvm[0];
    j.vec_out = 1; /* Tp is a multiple of 4, the offsets 0 */
    j.plain = 1;
    j.w_frozen = c->w_frozen; /* U derives from w alone */
    return teeny__conv_gemm_run(ctx, tu, &j);
}

static teeny_status wino_run(teeny_ctx *ctx, const conv_tuning *tu, const wino_conv *c, int batch)
{
    tu = wino_tuning(ctx, tu);
    const int m = wino_m(tu, TEENY__WINO_FWD), n_e = (m + 2) * (m + 2);
    const int TH = (c->OH + m - 1) / m, TW = (c->OW + m - 1) / m, per = TH * TW;
    const int Tp_max = (int)teeny__conv_cdiv((int64_t)batch * per, 4) * 4;
    const char *names[3] = {m == 4 ? "wino4_weights" : "wino_weights", m == 4 ? "wino4_input" : "wino_input",
                            m == 4 ? "wino4_output" : "wino_output"};
    /* U, V, M (teeny__conv_wino_plan kept them within int32 offsets) */
    const size_t floats[3] = {(size_t)n_e * c->O * c->I, (size_t)n_e * c->I * Tp_max, (size_t)n_e * c->O * Tp_max};
    cl_mem uvm[3] = {NULL, NULL, NULL};
    teeny_status st = TEENY_OK;
    for (int i = 0; i < 3 && st == TEENY_OK; i++)
        st = teeny__scratch(ctx, floats[i] * sizeof(float), &uvm[i]);
    int zero = 0;
    karg kw[] = {KM(c->w), KI(c->w_off), KI(c->O), KI(c->I), KI(c->flip), KM(uvm[0]), KI(zero)};
    if (st == TEENY_OK) {
        teeny__record_setup(ctx, c->w_frozen);
        st = wino_launch(ctx, tu, names[0], kw, (int)(sizeof kw / sizeof kw[0]), c->I, c->O);
        teeny__record_setup(ctx, 0);
    }
    for (int b0 = 0; b0 < c->B && st == TEENY_OK; b0 += batch) {
        int nb = c->B - b0 < batch ? c->B - b0 : batch, T = nb * per, Tp = (int)teeny__conv_cdiv(T, 4) * 4;
        int in_off = c->in_off + b0 * c->I * c->H * c->W, out_off = c->out_off + b0 * c->O * c->OH * c->OW;
        karg ki[] = {KM(c->in), KI(in_off), KI(c->I), KI(c->H),   KI(c->W), KI(c->pad_h), KI(c->pad_w),
                     KI(TH),    KI(TW),     KI(T),    KM(uvm[1]), KI(zero), KI(Tp)};
        st = wino_launch(ctx, tu, names[1], ki, (int)(sizeof ki / sizeof ki[0]), Tp, c->I);
        if (st == TEENY_OK)
            st = wino_gemms(ctx, tu, c, uvm, Tp, n_e);
        const dw_epilogue *e = &c->e;
        karg ko[] = {KM(uvm[2]),      KI(zero),     KI(Tp),          KI(c->O),     KI(TH),          KI(TW),
                     KI(T),           KM(c->out),   KI(out_off),     KI(c->OH),    KI(c->OW),       KM(e->bias),
                     KI(e->bias_off), KM(e->scale), KI(e->scale_off), KM(e->shift), KI(e->shift_off), KI(e->epi),
                     KI(e->act)};
        if (st == TEENY_OK)
            st = wino_launch(ctx, tu, names[2], ko, (int)(sizeof ko / sizeof ko[0]), T, c->O);
    }
    for (int i = 0; i < 3; i++)
        if (uvm[i])
            teeny__scratch_give(ctx, uvm[i]); /* enqueued: the op's next launches may take them */
    return st;
}

/* The route's forward, where teeny__conv_wino_plan takes it. */
teeny_status teeny__conv_wino_forward(teeny_ctx *ctx, const conv_pass *p, int *taken)
{
    const conv_geom *g = &p->g;
    /* its program has the epilogue's none, ReLU and SiLU only (cl/common.cl's conv_act) */
    int batch = p->e.act == TEENY_ACT_NONE || p->e.act == TEENY_ACT_RELU || p->e.act == TEENY_ACT_SILU
                    ? teeny__conv_wino_plan(ctx, p->tu, g, TEENY__WINO_FWD)
                    : 0;
    *taken = batch > 0;
    if (!*taken)
        return TEENY_OK;
    wino_conv c = {p->x->buf, p->w->buf, p->out->buf, teeny__off(p->x), teeny__off(p->w), teeny__off(p->out),
                   g->B, g->Cin, g->H, g->W, g->Cout, g->OH, g->OW, g->ph, g->pw, 0, p->e, p->w_frozen};
    return wino_run(ctx, p->tu, &c, batch);
}

/* The route's input gradient, where teeny__conv_wino_plan takes it:
 * dx[i] = sum over r of dy[i + p - r] w[r] per axis, the convolution of
 * dy with the filters flipped, their channels swapped, top/left pads
 * 2 - p (zeros past dy's end cover any bottom/right extent). */
teeny_status teeny__conv_wino_dx(teeny_ctx *ctx, const conv_pass *p, int *taken)
{
    const conv_geom *g = &p->g;
    const teeny_tensor *w = p->w, *dy = p->dy;
    teeny_tensor *dx = p->out;
    int batch = teeny__conv_wino_plan(ctx, p->tu, g, TEENY__WINO_DX);
    *taken = batch > 0;
    if (!*taken)
        return TEENY_OK;
    wino_conv c = {dy->buf, w->buf, dx->buf, teeny__off(dy), teeny__off(w), teeny__off(dx),
                   g->B, g->Cout, g->OH, g->OW, g->Cin, g->H, g->W, 2 - g->ph, 2 - g->pw, 1,
                   {dy->buf, dy->buf, dy->buf, 0, 0, 0, 0, TEENY_ACT_NONE}, 0};
    return wino_run(ctx, p->tu, &c, batch);
}

/* The weight gradient's 16 GEMMs as the weight gradient of a grouped 1x1
 * convolution: x = V [1, 16 I, 1, Tp], dy = dM [1, 16 O, 1, Tp], 16
 * groups, out dU [16 O][I][1][1] = U's layout. */
static conv_geom wino_dw_geom(const conv_geom *g)
{
    const int T = g->B * (int)(teeny__conv_cdiv(g->OH, 2) * teeny__conv_cdiv(g->OW, 2)),
              Tp = (int)teeny__conv_cdiv(T, 4) * 4;
    conv_geom w = {1, 16 * g->Cin, 1, Tp, 16 * g->Cout, 1, 1, 1, Tp, 16, g->Cin, g->Cout, 1, 1, 0, 0, 1, 1};
    return w;
}

teeny_status teeny__conv_wino_dw_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, grad_plan *gp,
                                      int *on)
{
    *on = teeny__conv_wino_plan(ctx, tu, g, TEENY__WINO_DW) > 0;
    if (!*on)
        return TEENY_OK;
    conv_geom w = wino_dw_geom(g);
    return teeny__conv_grad_plan_make(ctx, tu, &w, 1, 0, gp);
}

teeny_status teeny__conv_wino_dw(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                 const teeny_tensor *x, const teeny_tensor *dy, teeny_tensor *dw)
{
    const conv_geom w = wino_dw_geom(g);
    const int TH = (g->OH + 1) / 2, TW = (g->OW + 1) / 2, T = g->B * TH * TW, Tp = w.W, I = g->Cin, O = g->Cout;
    /* V, dM, dU, the partials (teeny__conv_wino_plan kept the first three within int32 offsets) */
    const size_t floats[4] = {(size_t)16 * I * Tp, (size_t)16 * O * Tp, (size_t)16 * O * I, (size_t)gp->dw_elems};
    cl_mem buf[4] = {NULL, NULL, NULL, NULL};
    teeny_status st = TEENY_OK;
    for (int i = 0; i < 4 && st == TEENY_OK; i++)
        st = teeny__scratch(ctx, floats[i] * sizeof(float), &buf[i]);
    int zero = 0, x_off = teeny__off(x), dy_off = teeny__off(dy);
    karg ki[] = {KM(x->buf), KI(x_off), KI(I), KI(g->H),   KI(g->W),  KI(g->ph), KI(g->pw),
                 KI(TH),     KI(TW),    KI(T), KM(buf[0]), KI(zero),  KI(Tp)};
    if (st == TEENY_OK)
        st = wino_launch(ctx, tu, "wino_input", ki, (int)(sizeof ki / sizeof ki[0]), Tp, I);
    karg kd[] = {KM(dy->buf), KI(dy_off), KI(O),      KI(g->OH), KI(g->OW), KI(TH),
                 KI(TW),      KI(T),      KM(buf[1]), KI(zero),  KI(Tp)};
    if (st == TEENY_OK)
        st = wino_launch(ctx, tu, "wino_dy", kd, (int)(sizeof kd / sizeof kd[0]), Tp, O);
    if (st == TEENY_OK)
        st = teeny__conv_dw_run(ctx, tu, &w, gp, buf[0], 0, buf[1], 0, buf[2], 0, buf[3]);
    int dw_off = teeny__off(dw);
    karg kw[] = {KM(buf[2]), KI(zero), KI(O), KI(I), KM(dw->buf), KI(dw_off)};
    if (st == TEENY_OK)
        st = wino_launch(ctx, tu, "wino_weights_grad", kw, (int)(sizeof kw / sizeof kw[0]), I, O);
    for (int i = 0; i < 4; i++)
        if (buf[i])
            teeny__scratch_give(ctx, buf[i]);
    return st;
}
