/*
 * dx_direct.c -- the input gradient by stride phases: which kernel taps
 * reach the dx positions of one residue of the stride
 * (teeny__conv_phase_taps), the direct kernel conv_dx_direct
 * (cl/conv2d_dx.cl, a program of its own built with only its shape's
 * defines) and, where it does not take the pass, one GEMM per phase
 * (their jobs here, their launches gemm.c's).
 *
 * conv_dx_direct computes dx of a convolution with at most TEENY__DX_CI
 * input channels per group without the GEMM, whose N = Cig columns let
 * each gathered dy value feed only Cig products (the 7x7 stem's 3): an
 * item owns dx_cols phase columns of a row for all channels and reuses
 * each dy value of a row across them and DX_TAPS taps. Its plan decides
 * (teeny__conv_dx_direct_plan: the profile's dx_cols, the test hook
 * CONV_FLAGS, the channels, the device's local memory, loop budget and
 * the kernel's own limits). The phase GEMMs run all phases in one launch
 * on the tiled GPU kernels (teeny__conv_phases_merged), one launch each
 * with conv_gemm_cpu.
 */
#include <stdio.h>
#include <string.h>

#include "conv2d_internal.h"

int teeny__conv_gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

void teeny__conv_phase_taps(int r, int stride, int pad, int dil, int K, int *k0, int *step, int *count, int *c)
{
    *step = stride / teeny__conv_gcd(stride, dil);
    *count = 0;
    *k0 = 0;
    *c = 0;
    for (int k = 0; k < K && k < *step; k++) {
        int t = r + pad - k * dil;
        if (((t % stride) + stride) % stride == 0) {
            *k0 = k;
            *count = (K - k + *step - 1) / *step;
            *c = t / stride;
            return;
        }
    }
}

int teeny__conv_taps_most(int n, int stride, int pad, int dil, int K)
{
    int k0, step, count, c, most = 0;
    for (int r = 0; r < n; r++) {
        teeny__conv_phase_taps(r, stride, pad, dil, K, &k0, &step, &count, &c);
        most = count > most ? count : most;
    }
    return most;
}

/* ---- the direct kernel ---- */

int teeny__conv_dx_direct_on(const teeny_ctx *ctx, const conv_tuning *tu)
{
    return tu->dx_cols > 0 && !(ctx->hooks.conv_flags & 4);
}

/* conv_dx_direct's loop trips per item (gemm.c's rules: every
 * loop as not unrolled, one trip more per entry): the two phase searches,
 * the staging loop, the clear, per output channel its kernel rows, per
 * row its passes, per pass the window, the weights and the taps (each
 * with its loops over columns and channels), and the store. */
static int64_t dx_direct_trips(const conv_geom *g, const teeny__dx_direct_plan *pl, int64_t staged)
{
    int64_t R = pl->cols, T = TEENY__DX_TAPS, C = g->Cig;
    int64_t pass = (R + T - 1 + 1) + (T * C / 4 + 1) + (T + 1) + T * ((R + 1) + R * (C + 1));
    int64_t row = 1 + (pl->passes_most + 1) + (int64_t)pl->passes_most * pass;
    int64_t co = 1 + (pl->rows_most + 1) + (int64_t)pl->rows_most * row;
    int64_t search = (g->KH < pl->step_h ? g->KH : pl->step_h) + 1 + (g->KW < pl->step_w ? g->KW : pl->step_w) + 1;
    return search + teeny__conv_cdiv(staged, (int64_t)pl->wg) + 1 + (R * C + 1) + (g->Cog + 1) + (int64_t)g->Cog * co +
           (R + 1) + R * (C + 1);
}

int teeny__conv_dx_direct_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, teeny__dx_direct_plan *pl,
                               teeny_status *st)
{
    int64_t budget;
    *st = TEENY_OK;
    memset(pl, 0, sizeof *pl);
    if (!teeny__conv_dx_direct_on(ctx, tu) || g->Cig > TEENY__DX_CI)
        return 0;
    pl->cols = tu->dx_cols;
    pl->n_h = g->sh < g->H ? g->sh : g->H;
    pl->n_w = g->sw < g->W ? g->sw : g->W;
    pl->step_h = g->sh / teeny__conv_gcd(g->sh, g->dh);
    pl->step_w = g->sw / teeny__conv_gcd(g->sw, g->dw);
    pl->e_h = g->dh / teeny__conv_gcd(g->sh, g->dh);
    pl->e_w = g->dw / teeny__conv_gcd(g->sw, g->dw);
    pl->rows_most = teeny__conv_taps_most(pl->n_h, g->sh, g->ph, g->dh, g->KH);
    pl->passes_most = (int)teeny__conv_cdiv(teeny__conv_taps_most(pl->n_w, g->sw, g->pw, g->dw, g->KW), TEENY__DX_TAPS);
    /* phase (0, 0) has the most rows and columns */
    int64_t P = teeny__conv_cdiv(g->H, g->sh), Q = teeny__conv_cdiv(g->W, g->sw), per_x = (int64_t)pl->cols * pl->e_w;
    pl->items = P * (teeny__conv_cdiv(Q, per_x) * pl->e_w);
    int64_t staged = (int64_t)g->Cog * pl->rows_most * pl->passes_most * TEENY__DX_TAPS * g->Cig;
    pl->local_bytes = (size_t)(staged > 4 ? staged : 4) * sizeof(float);
    if (staged > INT32_MAX || pl->items > INT32_MAX || pl->local_bytes > teeny__conv_local_budget(ctx))
        return 0;
    snprintf(pl->opt, sizeof pl->opt, "-DDX_CI=%d -DDX_R=%d -DDX_TAPS=%d", g->Cig, pl->cols, TEENY__DX_TAPS);
    /* 128 items a group (several phase rows of the stem's 14-28 items
     * each, little padding), fewer where the kernel's own limits ask */
    for (pl->wg = 128; pl->wg >= 1; pl->wg /= 2) {
        if (pl->wg > ctx->info.max_work_group_size)
            continue;
        *st = teeny__kernel_fit(ctx, "conv2d_dx", pl->opt, "conv_dx_direct", pl->wg, pl->local_bytes, NULL);
        if (*st != TEENY_ERR_UNSUPPORTED)
            break;
        teeny__clear_error(ctx);
        *st = TEENY_OK;
    }
    if (*st != TEENY_OK || pl->wg < 1)
        return 0;
    if ((*st = teeny__loop_budget(ctx, &budget)) != TEENY_OK)
        return 0;
    return budget == INT64_MAX || dx_direct_trips(g, pl, staged) <= budget;
}

teeny_status teeny__conv_dx_direct_run(teeny_ctx *ctx, const conv_geom *g, const teeny__dx_direct_plan *pl,
                                       const teeny_tensor *w, const teeny_tensor *dy, teeny_tensor *dx)
{
    cl_int16 geo = {{g->B, g->G, g->Cog, g->H, g->W, g->OH, g->OW, g->KH, g->KW, g->sh, g->sw, g->ph, g->pw, g->dh,
                     g->dw, pl->n_w}};
    cl_int4 steps = {{pl->step_h, pl->step_w, pl->e_h, pl->e_w}};
    size_t global[3] = {(size_t)teeny__conv_cdiv(pl->items, (int64_t)pl->wg) * pl->wg, (size_t)g->G * pl->n_h * pl->n_w,
                        (size_t)g->B};
    size_t local[3] = {pl->wg, 1, 1};
    int dy_off = teeny__off(dy), w_off = teeny__off(w), dx_off = teeny__off(dx);
    karg k[] = {KM(dy->buf), KI(dy_off), KM(w->buf), KI(w_off),         KM(dx->buf),
                KI(dx_off),  KG(geo),    KG(steps),  KL(pl->local_bytes)};
    return teeny__run_kernel(ctx, "conv2d_dx", pl->opt, "conv_dx_direct", k, (int)(sizeof k / sizeof k[0]), 3, global,
                             local);
}

/* The route: conv_dx_direct where its plan takes the pass. */
teeny_status teeny__conv_dx_direct(teeny_ctx *ctx, const conv_pass *p, int *taken)
{
    teeny__dx_direct_plan dp;
    teeny_status st;
    *taken = teeny__conv_dx_direct_plan(ctx, p->tu, &p->g, &dp, &st);
    return *taken ? teeny__conv_dx_direct_run(ctx, &p->g, &dp, p->w, p->dy, p->out) : st;
}

/* ---- a GEMM per phase ---- */

int teeny__conv_phases_merged(const teeny_ctx *ctx, const conv_tuning *tu)
{
    return tu->cpu_rows == 0 && !(ctx->hooks.conv_flags & 2);
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

/* The route every input gradient can take: one GEMM per stride phase over
 * dy (all of them in one launch where teeny__conv_phases_merged says so). */
teeny_status teeny__conv_gemm_dx(teeny_ctx *ctx, const conv_pass *p, int *taken)
{
    const conv_geom *g = &p->g;
    const conv_tuning *tu = p->tu;
    const teeny_tensor *w = p->w, *dy = p->dy;
    teeny_tensor *dx = p->out;
    int w_off = teeny__off(w), dx_off = teeny__off(dx);
    teeny_status st = TEENY_OK;
    *taken = 1;
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
