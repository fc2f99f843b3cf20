/*
 * conv2d_exec.c -- the conv2d op-table entries teeny__conv2d_forward and
 * teeny__conv2d_backward (in/out slots as conv2d.c's banner lists them):
 * per pass, the choice between the depthwise kernels and the GEMM path,
 * the depthwise launches, the input gradient by conv_dx_direct where
 * its plan takes it (few input channels per group: conv2d_dx.c), else as
 * one GEMM per stride phase (all of them in one launch where the GEMMs
 * are the tiled GPU kernels: teeny__conv_phases_merged), and the weight
 * and bias gradients' plans (their launches: conv2d_grad.c). Plans, tiles
 * and GEMM launches come from conv2d_plan.c through conv2d_internal.h;
 * the problem's geometry (teeny__conv_geom_make) is made here.
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

/* ---- forward ---- */

/* The depthwise CPU variants' launch (conv_cpu_variant): `name` over
 * `rows` rows of channels x B planes, whole rows per item, at most
 * rows_max (teeny__conv_dw_cpu_rows); a holds the arguments but the last,
 * the rows per item, which this appends (a has room for n + 1). */
static teeny_status dw_cpu_run(teeny_ctx *ctx, const char *opt, const char *name, karg *a, int n, int rows,
                               int channels, int B, int64_t rows_max)
{
    /* rows per item: whole planes unless that leaves fewer than 16 items
     * per compute unit, or the device's loop budget allows fewer */
    int64_t want = 16 * (int64_t)(ctx->info.compute_units > 0 ? ctx->info.compute_units : 1);
    int64_t planes = (int64_t)channels * B, per = planes >= want ? rows : cdiv(rows * planes, want);
    if (per > rows_max)
        per = rows_max;
    int rows_per = (int)(per < 1 ? 1 : per > rows ? rows : per);
    size_t items = (size_t)(cdiv(rows, rows_per) * planes);
    size_t global[3] = {(size_t)cdiv(rows, rows_per), (size_t)channels, (size_t)B};
    size_t local[3] = {1, teeny__cpu_local(ctx, items), 1};
    a[n] = KI(rows_per);
    return run_kernel(ctx, opt, name, a, n + 1, 3, global, local);
}

/* The forward's plan under the device's loop budget (conv2d_loops.c):
 * one unit of every GEMM fits (the splits then always do), and where it
 * takes the depthwise CPU variant, the rows an item may own (0: that
 * kernel cannot fit; the work-group kernel or the GEMM then takes it). */
static teeny_status forward_loops(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int64_t *rows_max)
{
    teeny_status st = teeny__conv_loops_check(ctx, tu, &g->Cog, 1);
    *rows_max = 0;
    if (st == TEENY_OK && teeny__conv_use_depthwise(ctx, tu, g) && conv_cpu_variant(ctx))
        st = teeny__conv_dw_cpu_rows(ctx, g, 0, rows_max);
    return st;
}

/* dwconv_fwd over g (x -> y), its taps reversed where flip is set (the
 * stride-1 input gradient, backward_dx). *done is 0, with TEENY_OK, where
 * the kernel does not fit the device (its work-group size, or the loop
 * budget: the caller takes another path). */
static teeny_status dw_forward_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, cl_mem x, int x_off,
                                   cl_mem w, int w_off, cl_mem y, int y_off, const dw_epilogue *e, int flip, int *done)
{
    dw_plan pl;
    int loops_fit = 0;
    teeny_status st = TEENY_OK;
    *done = 0;
    teeny__conv_dw_plan_fwd(ctx, tu, g, &pl);
    if (!teeny__conv_dw_fits(ctx, tu, "dwconv_fwd", (size_t)tu->dw_wg, 0, &st) ||
        (st = teeny__conv_dw_loops_fit(ctx, tu, g, &pl, 0, &loops_fit)) != TEENY_OK || !loops_fit)
        return st;
    char opt[256];
    teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
    cl_int16 geo = dw_geometry(g);
    int64_t items = (int64_t)g->B * g->Cout * pl.row_blocks * cdiv(g->OW, pl.cols);
    size_t global = (size_t)cdiv(items, tu->dw_wg) * (size_t)tu->dw_wg, local = (size_t)tu->dw_wg;
    karg k[] = {KM(x),       KI(x_off),        KM(w),       KI(w_off),       KM(y),        KI(y_off),
                KG(geo),     KI(pl.rows),      KI(pl.row_blocks), KM(e->bias), KI(e->bias_off), KM(e->scale),
                KI(e->scale_off), KM(e->shift), KI(e->shift_off), KI(e->epi), KI(e->act),   KI(flip),
                KI(pl.cols)};
    *done = 1;
    return run_kernel(ctx, opt, "dwconv_fwd", k, (int)(sizeof k / sizeof k[0]), 1, &global, &local);
}

/* The convolution with the epilogue's activation act (none, ReLU, SiLU:
 * conv_act in cl/conv2d.cl). */
static teeny_status forward_run(teeny_ctx *ctx, const teeny__op_args *a, int act)
{
    const teeny_tensor *x = a->in[TEENY__CONV2D_X], *w = a->in[TEENY__CONV2D_WEIGHT], *bias = a->in[TEENY__CONV2D_BIAS],
                       *scale = a->in[TEENY__CONV2D_SCALE], *shift = a->in[TEENY__CONV2D_SHIFT];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    conv_geom g = teeny__conv_geom_make(x, w, &a->attrs.conv2d);
    int64_t rows_max = 0;
    teeny_status st = conv_tf32_probe(ctx);
    const conv_tuning *tu = conv_tuning_of(ctx);
    if (st == TEENY_OK) /* the device's loop budget (conv2d_loops.c) */
        st = forward_loops(ctx, tu, &g, &rows_max);
    if (st != TEENY_OK)
        return st;
    int epi = (bias ? 1 : 0) | (scale ? 2 : 0) | (shift ? 4 : 0);
    cl_mem bias_m = bias ? bias->buf : x->buf, scale_m = scale ? scale->buf : x->buf,
           shift_m = shift ? shift->buf : x->buf;
    int bias_off = bias ? teeny__off(bias) : 0, scale_off = scale ? teeny__off(scale) : 0,
        shift_off = shift ? teeny__off(shift) : 0;
    int x_off = teeny__off(x), w_off = teeny__off(w), y_off = teeny__off(y);

    if (teeny__conv_use_depthwise(ctx, tu, &g) && conv_cpu_variant(ctx) && rows_max >= 1) {
        char opt[256];
        teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
        cl_int16 geo = dw_geometry(&g);
        karg k[] = {KM(x->buf), KI(x_off),   KM(w->buf),    KI(w_off),     KM(y->buf), KI(y_off), KG(geo),
                    KM(bias_m), KI(bias_off), KM(scale_m),  KI(scale_off), KM(shift_m), KI(shift_off), KI(epi),
                    KI(act),    {0, NULL}};
        return dw_cpu_run(ctx, opt, "dwconv_fwd_cpu", k, (int)(sizeof k / sizeof k[0]) - 1, g.OH, g.Cout, g.B,
                          rows_max);
    }
    if (teeny__conv_use_depthwise(ctx, tu, &g)) {
        dw_epilogue e = {bias_m, scale_m, shift_m, bias_off, scale_off, shift_off, epi, act};
        int done = 0;
        st = dw_forward_run(ctx, tu, &g, x->buf, x_off, w->buf, w_off, y->buf, y_off, &e, 0, &done);
        if (st != TEENY_OK || done)
            return st;
    }

    int wino_batch = teeny__conv_wino_plan(ctx, tu, &g, TEENY__WINO_FWD);
    if (wino_batch > 0) {
        dw_epilogue e = {bias_m, scale_m, shift_m, bias_off, scale_off, shift_off, epi, act};
        return teeny__conv_wino_forward(ctx, tu, &g, wino_batch, x, w, y, &e);
    }

    gemm_job j = {0};
    j.src = x->buf;
    j.src_off = x_off;
    j.w = w->buf;
    j.w_off = w_off;
    j.out = y->buf;
    j.out_off = y_off;
    j.M = g.B * g.OH * g.OW;
    j.N = g.Cog;
    j.G = g.G;
    j.P = g.OH;
    j.Q = g.OW;
    j.Kc = g.Cig;
    j.Kh = g.KH;
    j.Kw = g.KW;
    j.src_bstride = g.Cin * g.H * g.W;
    j.src_cstride = g.H * g.W;
    j.src_gstride = g.Cig * g.H * g.W;
    j.Hs = g.H;
    j.Ws = g.W;
    j.a_h = g.sh;
    j.c_h = -g.ph;
    j.e_h = g.dh;
    j.a_w = g.sw;
    j.c_w = -g.pw;
    j.e_w = g.dw;
    j.w_gstride = g.Cog * g.Cig * g.KH * g.KW;
    j.w_nstride = g.Cig * g.KH * g.KW;
    j.w_cstride = g.KH * g.KW;
    j.w_hstride = g.KW;
    j.w_wstride = 1;
    j.out_bstride = g.Cout * g.OH * g.OW;
    j.out_nstride = g.OH * g.OW;
    j.out_hstride = g.OW;
    j.out_wstride = 1;
    j.bias = bias_m;
    j.scale = scale_m;
    j.shift = shift_m;
    j.bias_off = bias_off;
    j.scale_off = scale_off;
    j.shift_off = shift_off;
    j.epi = epi;
    j.act = act;
    j.vec_out = (g.OH * g.OW) % 4 == 0 && y_off % 4 == 0;
    j.plain = teeny__conv_plain(&g) && (g.H * g.W) % 4 == 0 && x_off % 4 == 0;
    return teeny__conv_gemm_run(ctx, tu, &j);
}

/* Any other activation runs in place on y after the convolution. */
teeny_status teeny__conv2d_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny_act act = a->attrs.conv2d.act;
    int post = act != TEENY_ACT_NONE && act != TEENY_ACT_RELU && act != TEENY_ACT_SILU;
    teeny_status st = forward_run(ctx, a, post ? (int)TEENY_ACT_NONE : (int)act);
    if (st == TEENY_OK && post) {
        teeny__op_args p = {0};
        p.in[TEENY__ACTIVATION_X] = a->out[TEENY__OUT_VALUE];
        p.out[TEENY__OUT_VALUE] = a->out[TEENY__OUT_VALUE];
        p.attrs.activation = teeny__act_attrs(act);
        st = teeny__activation_forward(ctx, &p);
    }
    return st;
}

/* ---- backward ---- */


/* The depthwise input gradient at stride 1 with multiplier 1: dx[ih] =
 * sum over kh of dy[ih + p - kh*d] * w[kh] (per axis), the forward
 * convolution of dy with the taps reversed, stride 1, the same dilation
 * and padding (K-1)*d - p (negative where p is wider than the kernel:
 * dwconv_fwd's bounds checks hold for any). *done as dw_forward_run's. */
static teeny_status dx_as_forward(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const teeny_tensor *w,
                                  const teeny_tensor *dy, teeny_tensor *dx, int *done)
{
    conv_geom t = *g;
    t.H = g->OH;
    t.W = g->OW;
    t.OH = g->H;
    t.OW = g->W;
    t.ph = (g->KH - 1) * g->dh - g->ph;
    t.pw = (g->KW - 1) * g->dw - g->pw;
    dw_epilogue e = {dy->buf, dy->buf, dy->buf, 0, 0, 0, 0, TEENY_ACT_NONE};
    return dw_forward_run(ctx, tu, &t, dy->buf, teeny__off(dy), w->buf, teeny__off(w), dx->buf, teeny__off(dx), &e,
                          1, done);
}

/* The GEMM of stride phase (rh, rw) of dx: those positions only see the
 * taps k0 + i*step, whose dy rows are (p + c - i*dil/gcd). */
static void dx_phase_job(const conv_geom *g, const teeny_tensor *w, const teeny_tensor *dy, teeny_tensor *dx, int rh,
                         int rw, gemm_job *j)
{
    int kh0, step_h, nkh, c_h, kw0, step_w, nkw, c_w, dy_off = teeny__off(dy), dx_off = teeny__off(dx);
    teeny__conv_phase_taps(rh, g->sh, g->ph, g->dh, g->KH, &kh0, &step_h, &nkh, &c_h);
    teeny__conv_phase_taps(rw, g->sw, g->pw, g->dw, g->KW, &kw0, &step_w, &nkw, &c_w);
    memset(j, 0, sizeof *j);
    j->src = dy->buf;
    j->src_off = dy_off;
    j->w = w->buf;
    j->w_off = teeny__off(w) + kh0 * g->KW + kw0;
    j->out = dx->buf;
    j->out_off = dx_off + rh * g->W + rw;
    j->P = (g->H - rh + g->sh - 1) / g->sh;
    j->Q = (g->W - rw + g->sw - 1) / g->sw;
    j->M = g->B * j->P * j->Q;
    j->N = g->Cig;
    j->G = g->G;
    j->Kc = nkh && nkw ? g->Cog : 0; /* no tap reaches this phase: dx = 0 */
    j->Kh = nkh ? nkh : 1;
    j->Kw = nkw ? nkw : 1;
    j->src_bstride = g->Cout * g->OH * g->OW;
    j->src_cstride = g->OH * g->OW;
    j->src_gstride = g->Cog * g->OH * g->OW;
    j->Hs = g->OH;
    j->Ws = g->OW;
    j->a_h = 1;
    j->c_h = c_h;
    j->e_h = -(g->dh / teeny__conv_gcd(g->sh, g->dh));
    j->a_w = 1;
    j->c_w = c_w;
    j->e_w = -(g->dw / teeny__conv_gcd(g->sw, g->dw));
    j->w_gstride = g->Cog * g->Cig * g->KH * g->KW;
    j->w_nstride = g->KH * g->KW;
    j->w_cstride = g->Cig * g->KH * g->KW;
    j->w_hstride = step_h * g->KW;
    j->w_wstride = step_w;
    j->out_bstride = g->Cin * g->H * g->W;
    j->out_nstride = g->H * g->W;
    j->out_hstride = g->sh * g->W;
    j->out_wstride = g->sw;
    j->bias = j->scale = j->shift = dy->buf;
    j->vec_out = g->sh == 1 && g->sw == 1 && (g->H * g->W) % 4 == 0 && dx_off % 4 == 0;
    j->plain = teeny__conv_plain(g) && (g->OH * g->OW) % 4 == 0 && dy_off % 4 == 0;
}

/* Phase (0, 0)'s job j as the launch of all n_h x n_w phases (grid index
 * z; cl/conv2d.cl's conv_phase_job derives each phase's fields from the
 * launch's as dx_phase_job does): the weights and dx from their tensors'
 * offsets, every channel, the most taps of any phase per axis (for the
 * launch's k range; phase (0, 0) has the most rows). */
static void phase_merge(const conv_geom *g, int n_h, int n_w, int w_off, int dx_off, gemm_job *j)
{
    int step_h = g->sh / teeny__conv_gcd(g->sh, g->dh), step_w = g->sw / teeny__conv_gcd(g->sw, g->dw);
    int most_h = teeny__conv_taps_most(n_h, g->sh, g->ph, g->dh, g->KH);
    int most_w = teeny__conv_taps_most(n_w, g->sw, g->pw, g->dw, g->KW);
    j->w_off = w_off;
    j->out_off = dx_off;
    j->Kc = g->Cog;
    j->Kh = most_h ? most_h : 1;
    j->Kw = most_w ? most_w : 1;
    cl_int16 v = {{n_w, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw, g->KH, g->KW, g->H, g->W, step_h, step_w, g->B,
                   0, 0}};
    j->phase = v;
    j->phases = n_h * n_w;
    /* conv_phase_axis's loops: at most min(K, step) trips and the exit, per axis */
    j->phase_trips = (g->KH < step_h ? g->KH : step_h) + 1 + (g->KW < step_w ? g->KW : step_w) + 1;
}

static teeny_status backward_dx(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const teeny_tensor *w,
                                const teeny_tensor *dy, teeny_tensor *dx)
{
    int w_off = teeny__off(w), dy_off = teeny__off(dy), dx_off = teeny__off(dx), loops_fit = 0;
    int64_t rows_max = 0;
    dw_plan pl;
    teeny_status st = TEENY_OK;

    if (teeny__conv_use_depthwise(ctx, tu, g) && conv_cpu_variant(ctx) &&
        (st = teeny__conv_dw_cpu_rows(ctx, g, 1, &rows_max)) != TEENY_OK)
        return st;
    if (teeny__conv_use_depthwise(ctx, tu, g) && conv_cpu_variant(ctx) && rows_max >= 1) {
        char opt[256];
        teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
        cl_int16 geo = dw_geometry(g);
        karg k[] = {KM(dy->buf), KI(dy_off), KM(w->buf), KI(w_off), KM(dx->buf), KI(dx_off), KG(geo), {0, NULL}};
        return dw_cpu_run(ctx, opt, "dwconv_dx_cpu", k, (int)(sizeof k / sizeof k[0]) - 1, g->H, g->Cin, g->B,
                          rows_max);
    }
    if (teeny__conv_use_depthwise(ctx, tu, g) && g->Cog == 1 && g->sh == 1 && g->sw == 1) {
        int done = 0;
        if ((st = dx_as_forward(ctx, tu, g, w, dy, dx, &done)) != TEENY_OK || done)
            return st;
    }
    if (teeny__conv_use_depthwise(ctx, tu, g) && teeny__conv_dw_plan_dx(ctx, tu, g, &pl) &&
        teeny__conv_dw_fits(ctx, tu, "dwconv_dx", (size_t)tu->dw_wg, pl.local_bytes, &st) &&
        (st = teeny__conv_dw_loops_fit(ctx, tu, g, &pl, 1, &loops_fit)) == TEENY_OK && loops_fit) {
        char opt[256];
        teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
        cl_int16 geo = dw_geometry(g);
        size_t global[3] = {(size_t)tu->dw_wg * pl.tiles_h * pl.tiles_w, (size_t)g->Cin, (size_t)g->B};
        size_t local[3] = {(size_t)tu->dw_wg, 1, 1};
        karg k[] = {KM(dy->buf), KI(dy_off), KM(w->buf), KI(w_off),    KM(dx->buf), KI(dx_off), KG(geo),
                    KI(pl.TH),   KI(pl.TW),  KI(pl.tiles_w), KI(pl.PH), KI(pl.PW),  KL(pl.local_bytes)};
        return run_kernel(ctx, opt, "dwconv_dx", k, (int)(sizeof k / sizeof k[0]), 3, global, local);
    }
    if (st != TEENY_OK)
        return st;
    teeny__dx_direct_plan dp;
    if (teeny__conv_dx_direct_plan(ctx, tu, g, &dp, &st))
        return teeny__conv_dx_direct_run(ctx, g, &dp, w, dy, dx);
    if (st != TEENY_OK)
        return st;

    int wino_batch = teeny__conv_wino_plan(ctx, tu, g, TEENY__WINO_DX);
    if (wino_batch > 0)
        return teeny__conv_wino_dx(ctx, tu, g, wino_batch, w, dy, dx);

    gemm_job j;
    int n_h = g->sh < g->H ? g->sh : g->H, n_w = g->sw < g->W ? g->sw : g->W;
    if (n_h * n_w > 1 && teeny__conv_phases_merged(ctx, tu)) { /* every phase in one launch */
        dx_phase_job(g, w, dy, dx, 0, 0, &j);
        phase_merge(g, n_h, n_w, w_off, dx_off, &j);
        return teeny__conv_gemm_run(ctx, tu, &j);
    }
    for (int rh = 0; rh < n_h && st == TEENY_OK; rh++)
        for (int rw = 0; rw < n_w && st == TEENY_OK; rw++) {
            dx_phase_job(g, w, dy, dx, rh, rw, &j);
            st = teeny__conv_gemm_run(ctx, tu, &j);
        }
    return st;
}

teeny_status teeny__conv2d_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__CONV2D_X], *w = a->in[TEENY__CONV2D_WEIGHT], *dy = a->in[TEENY__CONV2D_DY];
    teeny_tensor *dx = a->out[TEENY__CONV2D_X], *dw = a->out[TEENY__CONV2D_WEIGHT], *db = a->out[TEENY__CONV2D_BIAS];
    conv_geom g = teeny__conv_geom_make(x, w, &a->attrs.conv2d);
    teeny_status st = conv_tf32_probe(ctx);
    const conv_tuning *tu = conv_tuning_of(ctx);
    grad_plan gp, wino_gp;
    cl_mem scratch = NULL;
    int wino_dw = 0, fused = 0; /* fused: dwconv_bwd3's partials per channel (dx and dw in one pass) */

    int n_pack[2] = {g.Cig, g.Cog};

    /* every plan before the first launch: one unit of every GEMM fits the
     * device's loop budget (conv2d_loops.c), the gradient splits (the
     * Winograd weight gradient's of its own GEMMs) */
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
        st = backward_dx(ctx, tu, &g, w, dy, dx);
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
