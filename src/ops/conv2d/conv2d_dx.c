/*
 * conv2d_dx.c -- the input gradient's stride phases and its direct
 * kernel. teeny__conv_phase_taps says which kernel taps reach the dx
 * positions of one residue of the stride (the GEMM jobs of conv2d_exec.c
 * and the plan below); conv_dx_direct (cl/conv2d_dx.cl, a program
 * of its own built with only its shape's defines) computes dx of a
 * convolution with at most TEENY__DX_CI input channels per group without
 * the GEMM, whose N = Cig columns let each gathered dy value feed only Cig
 * products (the 7x7 stem's 3): an item owns dx_cols phase columns of a
 * row for all channels and reuses each dy value of a row across them and
 * DX_TAPS taps. The plan decides the route (teeny__conv_dx_direct_plan:
 * the profile's dx_cols, the test hook, the channels, the device's local
 * memory, loop budget and the kernel's own limits); conv2d_exec.c's
 * backward_dx launches it where the plan says so, else the GEMM path.
 */
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

/* conv_dx_direct's loop trips per item (conv2d_loops.c's rules: every
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
    return search + cdiv(staged, (int64_t)pl->wg) + 1 + (R * C + 1) + (g->Cog + 1) + (int64_t)g->Cog * co +
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
    pl->passes_most = (int)cdiv(teeny__conv_taps_most(pl->n_w, g->sw, g->pw, g->dw, g->KW), TEENY__DX_TAPS);
    /* phase (0, 0) has the most rows and columns */
    int64_t P = cdiv(g->H, g->sh), Q = cdiv(g->W, g->sw), per_x = (int64_t)pl->cols * pl->e_w;
    pl->items = P * (cdiv(Q, per_x) * pl->e_w);
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
    size_t global[3] = {(size_t)cdiv(pl->items, (int64_t)pl->wg) * pl->wg, (size_t)g->G * pl->n_h * pl->n_w,
                        (size_t)g->B};
    size_t local[3] = {pl->wg, 1, 1};
    int dy_off = teeny__off(dy), w_off = teeny__off(w), dx_off = teeny__off(dx);
    karg k[] = {KM(dy->buf), KI(dy_off), KM(w->buf), KI(w_off),         KM(dx->buf),
                KI(dx_off),  KG(geo),    KG(steps),  KL(pl->local_bytes)};
    return teeny__run_kernel(ctx, "conv2d_dx", pl->opt, "conv_dx_direct", k, (int)(sizeof k / sizeof k[0]), 3, global,
                             local);
}
