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
 * Tuning is data: TUNINGS maps a device class (vendor, GPU or not, work-
 * group and local-memory limits) to a short list of GEMM tile shapes
 * (TILE_M x TILE_N x TILE_K, WPT_M x WPT_N per work-item) and the
 * depthwise/reduction work-group size, passed as -D options. Per problem,
 * pick_tile takes the largest tile that does not waste columns and still
 * gives every compute unit work. Problem geometry is always a kernel
 * argument, so a device builds one program per tile shape at most.
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
#include <stdio.h>
#include <string.h>

#include "ops.h"

/* ---- tuning table ---- */

typedef struct {
    int tm, tn, tk;  /* block tile */
    int wm, wn;      /* micro-tile per work-item (multiples of 4) */
    int min_per_cu;  /* forward / input-gradient GEMMs take this tile only
                      * with at least this many work-groups per compute unit */
} gemm_tile;

typedef struct {
    const char *vendor; /* substring of the device vendor, "" for any */
    int gpu;            /* 1: GPUs, 0: CPUs and other devices */
    int min_wg;         /* needs max_work_group_size >= min_wg */
    int n_tiles;
    gemm_tile tiles[4]; /* largest first */
    int dw_wg;          /* depthwise / reduction work-group (power of two) */
    int dw_rows;        /* output rows per item in dwconv_dx */
    int dw_taps;        /* taps per pass in dwconv_dw */
    int dw_mult_max;    /* depthwise kernels up to this channel multiplier */
    int waves;          /* work-groups per compute unit to aim for */
    int cpu_rows;       /* > 0: GEMMs by conv_gemm_cpu, this many rows per item */
    int cpu_wg;         /* its work-group (items along m) */
} conv_tuning;

/* NVIDIA's register-blocked 8x8 micro-tiles need 128-256-item
 * work-groups and 34 KiB of local memory at most; entries whose tiles a
 * device cannot hold are skipped tile by tile (tile_fits), and a kernel
 * whose own limits (CL_KERNEL_WORK_GROUP_SIZE) refuse a tile falls back
 * to the next smaller one. The 256-item 128x128 tile needs about
 * 160 registers per item, so a compute unit holds one such work-group at
 * a time: the gathered GEMMs take it only when there are many waves of
 * them (it still pays for the split weight gradient, whose partial sums
 * it halves). The depthwise kernels loop over a group's output channels
 * in one work-group, so a wide channel multiplier goes to the GEMM.
 * A GPU of any other make gets the conservative 64-item 32x32 tiles
 * (TEENY_TUNING=generic forces them anywhere: the tests run them on PoCL).
 * CPUs (PoCL) run one small tile: there a work-group is a loop, and one
 * program keeps the build time (seconds on PoCL) low; their GEMMs take
 * conv_gemm_cpu (cpu_rows > 0), which has no local memory or barriers
 * and keeps a cpu_rows x 16 block per item in vector registers. */
#ifndef CPU_ROWS
#define CPU_ROWS 6
#endif
#ifndef CPU_WG
#define CPU_WG 8
#endif
static const conv_tuning TUNINGS[] = {
    {"nvidia", 1, 256, 4,
     {{128, 128, 16, 8, 8, 16}, {128, 64, 16, 8, 8, 2}, {128, 32, 16, 8, 4, 2}, {64, 16, 16, 4, 4, 0}},
     256, 8, 9, 4, 4, 0, 0},
    {"", 1, 32, 2, {{32, 32, 16, 4, 4, 2}, {32, 16, 16, 4, 4, 0}}, 32, 8, 9, 4, 4, 0, 0},
    {"", 0, 64, 1, {{32, 32, 8, 4, 4, 0}}, 64, 8, 9, 4, 4, CPU_ROWS, CPU_WG},
};
#define N_TUNINGS ((int)(sizeof TUNINGS / sizeof TUNINGS[0]))

/* Test hooks (see ops.h): a tuning entry, a tile, no depthwise path. */
static int force_tuning = -1, force_tile = -1, force_no_depthwise = 0;

void teeny__conv2d_debug(int tuning, int tile, int no_depthwise)
{
    force_tuning = tuning >= 0 && tuning < N_TUNINGS ? tuning : -1;
    force_tile = tile;
    force_no_depthwise = no_depthwise;
}

static int gemm_wg(const gemm_tile *t)
{
    return (t->tm / t->wm) * (t->tn / t->wn);
}

static size_t gemm_local_bytes(const gemm_tile *t)
{
    return (size_t)2 * t->tk * ((t->tm + 4) + (t->tn + 4)) * sizeof(float);
}

static int tile_fits(const teeny_ctx *ctx, const gemm_tile *t)
{
    return (size_t)gemm_wg(t) <= ctx->info.max_work_group_size && gemm_local_bytes(t) <= ctx->info.local_mem_bytes;
}

static const conv_tuning *tuning_for(const teeny_ctx *ctx)
{
    /* TEENY_TUNING=generic: what a GPU of unknown make gets */
    if (ctx->generic && force_tuning < 0)
        for (int i = 0; i < N_TUNINGS; i++)
            if (TUNINGS[i].gpu && !*TUNINGS[i].vendor && tile_fits(ctx, &TUNINGS[i].tiles[TUNINGS[i].n_tiles - 1]))
                return &TUNINGS[i];
    /* a forced entry too must fit (its smallest tile at least; pick_tile
     * skips the larger ones that do not), or its GEMMs could not launch */
    if (force_tuning >= 0 && tile_fits(ctx, &TUNINGS[force_tuning].tiles[TUNINGS[force_tuning].n_tiles - 1]))
        return &TUNINGS[force_tuning];
    for (int i = 0; i < N_TUNINGS; i++) {
        const conv_tuning *t = &TUNINGS[i];
        if (t->gpu == ctx->info.is_gpu && (size_t)t->min_wg <= ctx->info.max_work_group_size &&
            teeny__contains_nocase(ctx->info.vendor, t->vendor) && tile_fits(ctx, &t->tiles[t->n_tiles - 1]))
            return t;
    }
    return &TUNINGS[N_TUNINGS - 1];
}

static void tile_options(const conv_tuning *tu, int tile, char *buf, size_t cap)
{
    const gemm_tile *t = &tu->tiles[tile];
    int n = snprintf(buf, cap,
                     "-DTILE_M=%d -DTILE_N=%d -DTILE_K=%d -DWPT_M=%d -DWPT_N=%d -DDW_WG=%d -DDW_ROWS=%d -DDW_TAPS=%d",
                     t->tm, t->tn, t->tk, t->wm, t->wn, tu->dw_wg, tu->dw_rows, tu->dw_taps);
    if (tu->cpu_rows > 0 && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " -DCPU_RM=%d", tu->cpu_rows);
}

static int64_t cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static int64_t target_groups(const teeny_ctx *ctx, const conv_tuning *tu)
{
    return (int64_t)(ctx->info.compute_units ? ctx->info.compute_units : 1) * tu->waves;
}

/* The tile for an M x N GEMM per group over G groups: the largest whose
 * columns are not mostly padding and, when occupancy matters (not for the
 * split weight gradient), that gives every compute unit the tile's
 * min_per_cu work-groups. */
static int pick_tile(const teeny_ctx *ctx, const conv_tuning *tu, int64_t M, int64_t N, int64_t G, int occupancy)
{
    int last = tu->n_tiles - 1;
    while (last > 0 && !tile_fits(ctx, &tu->tiles[last]))
        last--;
    if (force_tile >= 0 && force_tile < tu->n_tiles && tile_fits(ctx, &tu->tiles[force_tile]))
        return force_tile;
    for (int i = 0; i < last; i++) {
        const gemm_tile *t = &tu->tiles[i];
        if (!tile_fits(ctx, t))
            continue;
        if (t->tn > N && tu->tiles[i + 1].tn >= N)
            continue; /* a narrower tile covers N with less padding */
        if (occupancy && cdiv(M, t->tm) * cdiv(N, t->tn) * G <
                             (int64_t)t->min_per_cu * (ctx->info.compute_units ? ctx->info.compute_units : 1))
            continue;
        return i;
    }
    return last;
}

/* The kernel's own limits (CL_KERNEL_WORK_GROUP_SIZE, its static local
 * memory) have the last word: the picked tile, else the next smaller one
 * its compiler allows; TEENY_ERR_UNSUPPORTED when none does. */
static teeny_status fit_tile(teeny_ctx *ctx, const conv_tuning *tu, const char *name, int *tile)
{
    teeny_status st = TEENY_ERR_UNSUPPORTED;
    for (int i = *tile; i < tu->n_tiles; i++) {
        char opt[256];
        if (!tile_fits(ctx, &tu->tiles[i]))
            continue;
        tile_options(tu, i, opt, sizeof opt);
        st = teeny__kernel_fit(ctx, "conv2d", opt, name, (size_t)gemm_wg(&tu->tiles[i]), 0, NULL);
        if (st == TEENY_OK) {
            if (i != *tile)
                teeny__clear_error(ctx);
            *tile = i;
            return TEENY_OK;
        }
        if (st != TEENY_ERR_UNSUPPORTED)
            return st;
    }
    return st;
}

/* Whether a depthwise kernel fits as planned; a misfit takes the GEMM path
 * (1: fits, 0: does not, negative: the query failed with status -ret). */
static int dw_fits(teeny_ctx *ctx, const conv_tuning *tu, const char *name, size_t local_bytes, teeny_status *st)
{
    char opt[256];
    tile_options(tu, 0, opt, sizeof opt);
    *st = teeny__kernel_fit(ctx, "conv2d", opt, name, (size_t)tu->dw_wg, local_bytes, NULL);
    if (*st == TEENY_ERR_UNSUPPORTED) {
        teeny__clear_error(ctx);
        *st = TEENY_OK;
        return 0;
    }
    return *st == TEENY_OK;
}

/* ---- geometry ---- */

typedef struct {
    int B, Cin, H, W, Cout, KH, KW, OH, OW, G, Cig, Cog;
    int sh, sw, ph, pw, dh, dw;
} conv_geom;

static conv_geom geom_make(const teeny_tensor *x, const teeny_tensor *w, const teeny__conv2d_attrs *at)
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
    g.OH = (g.H + 2 * g.ph - g.dh * (g.KH - 1) - 1) / g.sh + 1;
    g.OW = (g.W + 2 * g.pw - g.dw * (g.KW - 1) - 1) / g.sw + 1;
    return g;
}

/* ---- kernel arguments ---- */

/* The launch layer's argument type (internal.h); KM/KI/KL keep the
 * argument lists below one short entry per kernel parameter. */
typedef teeny__karg karg;

#define KM(m) TEENY__KARG_MEM(m)
#define KI(i) TEENY__KARG_INT(i)
#define KL(bytes) TEENY__KARG_LOCAL(bytes)

static teeny_status run_kernel(teeny_ctx *ctx, const char *options, const char *name, const karg *a, int n,
                               int dims, const size_t *global, const size_t *local)
{
    return teeny__run_kernel(ctx, "conv2d", options, name, a, n, dims, global, local);
}

/* ---- the implicit GEMM (forward and input gradient) ---- */

/* One conv_gemm_gather launch: see the kernel's comment for each field. */
typedef struct {
    cl_mem src, w, out;
    int src_off, w_off, out_off;
    int M, N, G, P, Q, Kc, Kh, Kw;
    int src_bstride, src_cstride, Hs, Ws, a_h, c_h, e_h, a_w, c_w, e_w;
    int src_gstride; /* conv_gemm_cpu: group g's source at g*src_gstride (conv_gemm_gather: g*Kc*src_cstride) */
    int w_gstride, w_nstride, w_cstride, w_hstride, w_wstride;
    int out_bstride, out_nstride, out_hstride, out_wstride;
    cl_mem bias, scale, shift;
    int bias_off, scale_off, shift_off, epi, act, vec_out;
    int plain; /* conv_gemm_1x1 */
} gemm_job;

/* The packed B operand of conv_gemm_cpu in floats (0: beyond int32). */
static int64_t cpu_packed(const gemm_job *j)
{
    int64_t n = (int64_t)j->G * j->Kh * j->Kw * j->Kc * cdiv(j->N, 16) * 16;
    return n > INT32_MAX / 2 ? 0 : n;
}

/* conv_gemm_cpu: pack B into a workspace, then the GEMM. */
static teeny_status cpu_gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j, const char *opt)
{
    int Np = (int)cdiv(j->N, 16) * 16, total = (int)cpu_packed(j), zero = 0;
    cl_mem bp = NULL;
    teeny_status st = TEENY_OK;
    if (total > 0) {
        if ((st = teeny__scratch(ctx, (size_t)total * sizeof(float), &bp)) != TEENY_OK)
            return st;
        size_t pg[2] = {(size_t)cdiv(j->Kc, 16) * 16, (size_t)j->G * j->Kh * j->Kw}, pl[2] = {16, 1};
        karg k[] = {KM(j->w),         KI(j->w_off),     KI(j->w_gstride), KI(j->w_nstride), KI(j->w_cstride),
                    KI(j->w_hstride), KI(j->w_wstride), KI(j->N),         KI(Np),           KI(j->Kc),
                    KI(j->Kh),        KI(j->Kw),        KM(bp),           KI(zero)};
        if ((st = run_kernel(ctx, opt, "conv_pack_b", k, (int)(sizeof k / sizeof k[0]), 2, pg, pl)) !=
            TEENY_OK) {
            teeny__scratch_give(ctx, bp);
            return st;
        }
    } else {
        bp = j->w; /* Kc == 0: no taps, B is never read */
    }
    size_t wg = (size_t)tu->cpu_wg;
    size_t global[2] = {(size_t)cdiv(cdiv(j->M, tu->cpu_rows), (int64_t)wg) * wg, (size_t)(Np / 16) * j->G};
    size_t local[2] = {wg, 1};
    karg a[] = {KM(j->src),         KI(j->src_off),     KM(bp),             KI(zero),           KI(Np),
                KM(j->out),         KI(j->out_off),     KI(j->M),           KI(j->N),           KI(j->P),
                KI(j->Q),           KI(j->Kc),          KI(j->Kh),          KI(j->Kw),          KI(j->src_bstride),
                KI(j->src_gstride), KI(j->src_cstride), KI(j->Hs),          KI(j->Ws),          KI(j->a_h),
                KI(j->c_h),         KI(j->e_h),         KI(j->a_w),         KI(j->c_w),         KI(j->e_w),
                KI(j->out_bstride), KI(j->out_nstride), KI(j->out_hstride), KI(j->out_wstride), KM(j->bias),
                KI(j->bias_off),    KM(j->scale),       KI(j->scale_off),   KM(j->shift),       KI(j->shift_off),
                KI(j->epi),         KI(j->act)};
    st = run_kernel(ctx, opt, "conv_gemm_cpu", a, (int)(sizeof a / sizeof a[0]), 2, global, local);
    if (total > 0)
        teeny__scratch_give(ctx, bp); /* enqueued: the next GEMM of this op may take it */
    return st;
}

static int use_cpu_gemm(const conv_tuning *tu, const gemm_job *j)
{
    return tu->cpu_rows > 0 && (j->Kc == 0 || cpu_packed(j) > 0);
}

static teeny_status gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j)
{
    if (use_cpu_gemm(tu, j)) {
        char opt[256];
        tile_options(tu, 0, opt, sizeof opt);
        return cpu_gemm_run(ctx, tu, j, opt);
    }
    int tile = pick_tile(ctx, tu, j->M, j->N, j->G, 1);
    const char *name = j->plain ? "conv_gemm_1x1" : "conv_gemm_gather";
    teeny_status st = fit_tile(ctx, tu, name, &tile);
    if (st != TEENY_OK)
        return st;
    const gemm_tile *t = &tu->tiles[tile];
    char opt[256];
    tile_options(tu, tile, opt, sizeof opt);
    size_t wg = (size_t)gemm_wg(t);
    size_t global[2] = {(size_t)cdiv(j->M, t->tm) * wg, (size_t)(cdiv(j->N, t->tn) * j->G)};
    size_t local[2] = {wg, 1};
    karg a[] = {KM(j->src),         KI(j->src_off),     KM(j->w),           KI(j->w_off),       KM(j->out),
                KI(j->out_off),     KI(j->M),           KI(j->N),           KI(j->P),           KI(j->Q),
                KI(j->Kc),          KI(j->Kh),          KI(j->Kw),          KI(j->src_bstride), KI(j->src_cstride),
                KI(j->Hs),          KI(j->Ws),          KI(j->a_h),         KI(j->c_h),         KI(j->e_h),
                KI(j->a_w),         KI(j->c_w),         KI(j->e_w),         KI(j->w_gstride),   KI(j->w_nstride),
                KI(j->w_cstride),   KI(j->w_hstride),   KI(j->w_wstride),   KI(j->out_bstride), KI(j->out_nstride),
                KI(j->out_hstride), KI(j->out_wstride), KM(j->bias),        KI(j->bias_off),    KM(j->scale),
                KI(j->scale_off),   KM(j->shift),       KI(j->shift_off),   KI(j->epi),         KI(j->act),
                KI(j->vec_out)};
    return run_kernel(ctx, opt, name, a, (int)(sizeof a / sizeof a[0]), 2, global, local);
}

/* ---- depthwise plans ---- */

typedef struct {
    int TH, TW, tiles_h, tiles_w, PH, PW;
    int m_per, m_chunks; /* forward: output channels per work-group */
    size_t local_bytes;
} dw_plan;

/* Tile an R x C output plane for a work-group of wg items: TW columns
 * (whole rows up to 128 wide), TH rows about `rows` per item. */
static void dw_tile(int R, int C, int wg, int rows, dw_plan *pl)
{
    int cap = wg < 128 ? wg : 128;
    pl->tiles_w = (int)cdiv(C, cap);
    pl->TW = (int)cdiv(C, pl->tiles_w);
    int rstep = wg / pl->TW;
    int th = rstep * rows < R ? rstep * rows : R;
    pl->tiles_h = (int)cdiv(R, th);
    pl->TH = (int)cdiv(R, pl->tiles_h);
}

static size_t local_budget(const teeny_ctx *ctx)
{
    return ctx->info.local_mem_bytes > 1024 ? (size_t)ctx->info.local_mem_bytes - 1024 : 0;
}

/* Forward plan; 0 when the input patch cannot fit in local memory. */
static int dw_plan_fwd(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, dw_plan *pl)
{
    int mult = g->Cog;
    int64_t KHW = (int64_t)g->KH * g->KW;
    dw_tile(g->OH, g->OW, tu->dw_wg, 4, pl);
    while (pl->TH > 1 && (int64_t)pl->tiles_h * pl->tiles_w * g->Cin * g->B * mult < target_groups(ctx, tu)) {
        pl->TH = (pl->TH + 1) / 2;
        pl->tiles_h = (int)cdiv(g->OH, pl->TH);
    }
    int64_t groups = (int64_t)pl->tiles_h * pl->tiles_w * g->Cin * g->B;
    int64_t chunks = mult > 1 ? cdiv(target_groups(ctx, tu), groups) : 1;
    if (chunks > mult)
        chunks = mult;
    pl->m_per = (int)cdiv(mult, chunks);
    for (;;) {
        int64_t ph = (int64_t)(pl->TH - 1) * g->sh + (int64_t)(g->KH - 1) * g->dh + 1;
        int64_t pw = (int64_t)(pl->TW - 1) * g->sw + (int64_t)(g->KW - 1) * g->dw + 1;
        int64_t bytes = (ph * pw + pl->m_per * KHW) * (int64_t)sizeof(float);
        if (ph * pw <= INT32_MAX && bytes <= (int64_t)local_budget(ctx)) {
            pl->PH = (int)ph;
            pl->PW = (int)pw;
            pl->local_bytes = (size_t)bytes;
            break;
        }
        if (pl->TH > 1) {
            pl->TH = (pl->TH + 1) / 2;
            pl->tiles_h = (int)cdiv(g->OH, pl->TH);
        } else if (pl->m_per > 1) {
            pl->m_per = (pl->m_per + 1) / 2;
        } else {
            return 0;
        }
    }
    pl->m_chunks = (int)cdiv(mult, pl->m_per);
    return 1;
}

/* Input-gradient plan over the H x W plane of dx. */
static int dw_plan_dx(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, dw_plan *pl)
{
    int rows = tu->dw_rows < 4 ? tu->dw_rows : 4;
    dw_tile(g->H, g->W, tu->dw_wg, rows, pl);
    while (pl->TH > 1 && (int64_t)pl->tiles_h * pl->tiles_w * g->Cin * g->B < target_groups(ctx, tu)) {
        pl->TH = (pl->TH + 1) / 2;
        pl->tiles_h = (int)cdiv(g->H, pl->TH);
    }
    for (;;) {
        int64_t ph = ((int64_t)pl->TH - 1 + (int64_t)(g->KH - 1) * g->dh) / g->sh + 2;
        int64_t pw = ((int64_t)pl->TW - 1 + (int64_t)(g->KW - 1) * g->dw) / g->sw + 2;
        /* every output channel's dy patch and taps at once (cl/conv2d.cl) */
        int64_t bytes = (ph * pw + (int64_t)g->KH * g->KW) * g->Cog * (int64_t)sizeof(float);
        if (ph * pw * g->Cog <= INT32_MAX && bytes <= (int64_t)local_budget(ctx)) {
            pl->PH = (int)ph;
            pl->PW = (int)pw;
            pl->local_bytes = (size_t)bytes;
            return 1;
        }
        if (pl->TH == 1)
            return 0;
        pl->TH = (pl->TH + 1) / 2;
        pl->tiles_h = (int)cdiv(g->H, pl->TH);
    }
}

static int use_depthwise(const conv_tuning *tu, const conv_geom *g)
{
    return g->Cig == 1 && g->Cog <= tu->dw_mult_max && !force_no_depthwise;
}

/* ---- forward ---- */

teeny_status teeny__conv2d_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[0], *w = a->in[1], *bias = a->in[2], *scale = a->in[3], *shift = a->in[4];
    teeny_tensor *y = a->out[0];
    conv_geom g = geom_make(x, w, &a->attrs.conv2d);
    const conv_tuning *tu = tuning_for(ctx);
    int act = (int)a->attrs.conv2d.act;
    int epi = (bias ? 1 : 0) | (scale ? 2 : 0) | (shift ? 4 : 0);
    cl_mem bias_m = bias ? bias->buf : x->buf, scale_m = scale ? scale->buf : x->buf,
           shift_m = shift ? shift->buf : x->buf;
    int bias_off = bias ? teeny__off(bias) : 0, scale_off = scale ? teeny__off(scale) : 0,
        shift_off = shift ? teeny__off(shift) : 0;
    int x_off = teeny__off(x), w_off = teeny__off(w), y_off = teeny__off(y);
    dw_plan pl;
    teeny_status st = TEENY_OK;

    if (use_depthwise(tu, &g) && dw_plan_fwd(ctx, tu, &g, &pl) && dw_fits(ctx, tu, "dwconv_fwd", pl.local_bytes, &st)) {
        char opt[256];
        tile_options(tu, 0, opt, sizeof opt);
        int mult = g.Cog;
        size_t global[3] = {(size_t)tu->dw_wg * pl.tiles_h * pl.tiles_w, (size_t)g.Cin * pl.m_chunks, (size_t)g.B};
        size_t local[3] = {(size_t)tu->dw_wg, 1, 1};
        karg k[] = {KM(x->buf),   KI(x_off),      KM(w->buf), KI(w_off),     KM(y->buf), KI(y_off),  KI(g.Cin),
                    KI(g.H),      KI(g.W),        KI(mult),   KI(pl.m_per),  KI(pl.m_chunks), KI(g.OH), KI(g.OW),
                    KI(g.KH),     KI(g.KW),       KI(g.sh),   KI(g.sw),      KI(g.ph),   KI(g.pw),   KI(g.dh),
                    KI(g.dw),     KI(pl.TH),      KI(pl.TW),  KI(pl.tiles_w), KI(pl.PH), KI(pl.PW),  KM(bias_m),
                    KI(bias_off), KM(scale_m),    KI(scale_off), KM(shift_m), KI(shift_off), KI(epi), KI(act),
                    KL(pl.local_bytes)};
        return run_kernel(ctx, opt, "dwconv_fwd", k, (int)(sizeof k / sizeof k[0]), 3, global, local);
    }
    if (st != TEENY_OK)
        return st;

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
    j.plain = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && (g.H * g.W) % 4 == 0 &&
              x_off % 4 == 0;
    return gemm_run(ctx, tu, &j);
}

/* ---- backward ---- */

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Taps of one axis that reach input positions of residue r (mod stride):
 * the first k0, the step between them, how many, and the output offset
 * c = (r + pad - k0*dil) / stride of the first. */
static void phase_taps(int r, int stride, int pad, int dil, int K, int *k0, int *step, int *count, int *c)
{
    *step = stride / gcd(stride, dil);
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

static teeny_status backward_dx(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const teeny_tensor *w,
                                const teeny_tensor *dy, teeny_tensor *dx)
{
    int w_off = teeny__off(w), dy_off = teeny__off(dy), dx_off = teeny__off(dx);
    dw_plan pl;
    teeny_status st = TEENY_OK;

    if (use_depthwise(tu, g) && dw_plan_dx(ctx, tu, g, &pl) && dw_fits(ctx, tu, "dwconv_dx", pl.local_bytes, &st)) {
        char opt[256];
        tile_options(tu, 0, opt, sizeof opt);
        int mult = g->Cog;
        size_t global[3] = {(size_t)tu->dw_wg * pl.tiles_h * pl.tiles_w, (size_t)g->Cin, (size_t)g->B};
        size_t local[3] = {(size_t)tu->dw_wg, 1, 1};
        karg k[] = {KM(dy->buf), KI(dy_off), KM(w->buf), KI(w_off), KM(dx->buf), KI(dx_off), KI(g->Cin),
                    KI(g->H),    KI(g->W),   KI(mult),   KI(g->OH), KI(g->OW),   KI(g->KH),  KI(g->KW),
                    KI(g->sh),   KI(g->sw),  KI(g->ph),  KI(g->pw), KI(g->dh),   KI(g->dw),  KI(pl.TH),
                    KI(pl.TW),   KI(pl.tiles_w), KI(pl.PH), KI(pl.PW), KL(pl.local_bytes)};
        return run_kernel(ctx, opt, "dwconv_dx", k, (int)(sizeof k / sizeof k[0]), 3, global, local);
    }
    if (st != TEENY_OK)
        return st;

    /* one GEMM per stride phase (rh, rw) of dx: those positions only see
     * the taps k0 + i*step, whose dy rows are (p + c - i*dil/gcd) */
    for (int rh = 0; rh < g->sh && rh < g->H && st == TEENY_OK; rh++)
        for (int rw = 0; rw < g->sw && rw < g->W && st == TEENY_OK; rw++) {
            int kh0, step_h, nkh, c_h, kw0, step_w, nkw, c_w;
            phase_taps(rh, g->sh, g->ph, g->dh, g->KH, &kh0, &step_h, &nkh, &c_h);
            phase_taps(rw, g->sw, g->pw, g->dw, g->KW, &kw0, &step_w, &nkw, &c_w);
            gemm_job j = {0};
            j.src = dy->buf;
            j.src_off = dy_off;
            j.w = w->buf;
            j.w_off = w_off + kh0 * g->KW + kw0;
            j.out = dx->buf;
            j.out_off = dx_off + rh * g->W + rw;
            j.P = (g->H - rh + g->sh - 1) / g->sh;
            j.Q = (g->W - rw + g->sw - 1) / g->sw;
            j.M = g->B * j.P * j.Q;
            j.N = g->Cig;
            j.G = g->G;
            j.Kc = nkh && nkw ? g->Cog : 0; /* no tap reaches this phase: dx = 0 */
            j.Kh = nkh ? nkh : 1;
            j.Kw = nkw ? nkw : 1;
            j.src_bstride = g->Cout * g->OH * g->OW;
            j.src_cstride = g->OH * g->OW;
            j.src_gstride = g->Cog * g->OH * g->OW;
            j.Hs = g->OH;
            j.Ws = g->OW;
            j.a_h = 1;
            j.c_h = c_h;
            j.e_h = -(g->dh / gcd(g->sh, g->dh));
            j.a_w = 1;
            j.c_w = c_w;
            j.e_w = -(g->dw / gcd(g->sw, g->dw));
            j.w_gstride = g->Cog * g->Cig * g->KH * g->KW;
            j.w_nstride = g->KH * g->KW;
            j.w_cstride = g->Cig * g->KH * g->KW;
            j.w_hstride = step_h * g->KW;
            j.w_wstride = step_w;
            j.out_bstride = g->Cin * g->H * g->W;
            j.out_nstride = g->H * g->W;
            j.out_hstride = g->sh * g->W;
            j.out_wstride = g->sw;
            j.bias = j.scale = j.shift = dy->buf;
            j.vec_out = g->sh == 1 && g->sw == 1 && (g->H * g->W) % 4 == 0 && dx_off % 4 == 0;
            j.plain = g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 &&
                      (g->OH * g->OW) % 4 == 0 && dy_off % 4 == 0;
            st = gemm_run(ctx, tu, &j);
        }
    return st;
}

/* The weight gradient as a conv_gemm_cpu problem: rows m = (c, kh, kw)
 * (c in the batch slot, (kh, kw) in the output-grid slots), reduction
 * k = (b, oh, ow) (b in the channel slot, (oh, ow) in the tap slots), B
 * = dy, out = dw. Geometry only; the caller sets buffers and offsets. */
static void dw_job_make(const conv_geom *g, gemm_job *j)
{
    int HW = g->H * g->W, OHW = g->OH * g->OW, KHW = g->KH * g->KW;
    memset(j, 0, sizeof *j);
    j->M = g->Cig * KHW;
    j->N = g->Cog;
    j->G = g->G;
    j->P = g->KH;
    j->Q = g->KW;
    j->Kc = g->B;
    j->Kh = g->OH;
    j->Kw = g->OW;
    j->src_bstride = HW;
    j->src_gstride = g->Cig * HW;
    j->src_cstride = g->Cin * HW;
    j->Hs = g->H;
    j->Ws = g->W;
    j->a_h = g->dh;
    j->c_h = -g->ph;
    j->e_h = g->sh;
    j->a_w = g->dw;
    j->c_w = -g->pw;
    j->e_w = g->sw;
    j->w_gstride = g->Cog * OHW;
    j->w_nstride = OHW;
    j->w_cstride = g->Cout * OHW;
    j->w_hstride = g->OW;
    j->w_wstride = 1;
    j->out_bstride = KHW;
    j->out_nstride = g->Cig * KHW;
    j->out_hstride = g->KW;
    j->out_wstride = 1;
}

/* Weight- and bias-gradient split: partials per chunk in the workspace,
 * then a fixed-order sum. */
typedef struct {
    int cpu;         /* conv_gemm_cpu (dw_job_make), no split */
    int tile;        /* GEMM path */
    int depthwise;
    int z, r_chunk;  /* dweight chunks over B*OH*OW */
    int zb, b_chunk; /* dbias chunks over B */
    int64_t dw_elems, db_elems; /* partial floats in the workspace */
} grad_plan;

static teeny_status grad_plan_make(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int want_dw,
                                   int want_db, grad_plan *gp)
{
    int64_t R = (int64_t)g->B * g->OH * g->OW, target = target_groups(ctx, tu);
    int64_t Mk = (int64_t)g->Cig * g->KH * g->KW, dw_numel = (int64_t)g->Cout * Mk;
    int64_t max_floats = (int64_t)(ctx->info.max_alloc_bytes / sizeof(float)) / 2;
    int64_t z = 1, min_chunk, tiles;
    memset(gp, 0, sizeof *gp);
    if (max_floats > INT32_MAX / 2)
        max_floats = INT32_MAX / 2;
    gp->depthwise = use_depthwise(tu, g) && (size_t)tu->dw_taps * tu->dw_wg * sizeof(float) <= local_budget(ctx);
    if (!gp->depthwise) {
        gemm_job j;
        dw_job_make(g, &j);
        gp->cpu = use_cpu_gemm(tu, &j);
    }
    if (gp->depthwise) {
        tiles = g->Cout;
        min_chunk = (int64_t)tu->dw_wg * 4;
    } else if (gp->cpu) {
        tiles = target;
        min_chunk = R;
    } else {
        gp->tile = pick_tile(ctx, tu, Mk, g->Cog, g->G, 0);
        teeny_status st = want_dw ? fit_tile(ctx, tu, "conv_gemm_dw", &gp->tile) : TEENY_OK;
        if (st != TEENY_OK)
            return st;
        const gemm_tile *t = &tu->tiles[gp->tile];
        tiles = cdiv(Mk, t->tm) * cdiv(g->Cog, t->tn) * g->G;
        min_chunk = (int64_t)t->tk * 16;
    }
    if (want_dw) {
        z = cdiv(target, tiles);
        if (z > cdiv(R, min_chunk))
            z = cdiv(R, min_chunk);
        while (z > 1 && z * dw_numel > max_floats)
            z /= 2;
        if (z < 1)
            z = 1;
        int64_t chunk = cdiv(R, z);
        if (!gp->depthwise && !gp->cpu)
            chunk = cdiv(chunk, tu->tiles[gp->tile].tk) * tu->tiles[gp->tile].tk;
        gp->r_chunk = (int)chunk;
        gp->z = (int)cdiv(R, chunk);
        gp->dw_elems = gp->z > 1 ? gp->z * dw_numel : 0;
    }
    if (want_db) {
        int64_t zb = cdiv(target, g->Cout);
        if (zb > g->B)
            zb = g->B;
        while (zb > 1 && zb * g->Cout > max_floats)
            zb /= 2;
        gp->b_chunk = (int)cdiv(g->B, zb);
        gp->zb = (int)cdiv(g->B, gp->b_chunk);
        gp->db_elems = gp->zb > 1 ? (int64_t)gp->zb * g->Cout : 0;
    }
    return TEENY_OK;
}

static teeny_status reduce_parts(teeny_ctx *ctx, const conv_tuning *tu, const char *opt, cl_mem part, int part_off, int n, int z,
                                 cl_mem out, int out_off)
{
    /* a fixed local size: PoCL compiles a kernel once per local size */
    size_t global = (size_t)n, local = (size_t)tu->dw_wg;
    karg k[] = {KM(part), KI(part_off), KI(n), KI(z), KM(out), KI(out_off)};
    return run_kernel(ctx, opt, "conv_reduce_parts", k, 6, 1, &global, &local);
}

static teeny_status backward_dw(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                const teeny_tensor *x, const teeny_tensor *dy, teeny_tensor *dw, cl_mem scratch)
{
    int x_off = teeny__off(x), dy_off = teeny__off(dy), dw_off = teeny__off(dw);
    int R = g->B * g->OH * g->OW, Mk = g->Cig * g->KH * g->KW, numel = g->Cout * Mk;
    cl_mem out = gp->z > 1 ? scratch : dw->buf;
    int out_off = gp->z > 1 ? 0 : dw_off, zstride = gp->z > 1 ? numel : 0;
    char opt[256];
    teeny_status st;

    if (gp->cpu) {
        gemm_job j;
        dw_job_make(g, &j);
        j.src = x->buf;
        j.src_off = x_off;
        j.w = dy->buf;
        j.w_off = dy_off;
        j.out = dw->buf;
        j.out_off = dw_off;
        j.bias = j.scale = j.shift = x->buf;
        tile_options(tu, 0, opt, sizeof opt);
        return cpu_gemm_run(ctx, tu, &j, opt);
    }
    if (gp->depthwise) {
        tile_options(tu, 0, opt, sizeof opt);
        int mult = g->Cog;
        size_t global[2] = {(size_t)tu->dw_wg * gp->z, (size_t)g->Cout}, local[2] = {(size_t)tu->dw_wg, 1};
        karg k[] = {KM(x->buf), KI(x_off), KM(dy->buf), KI(dy_off), KM(out),   KI(out_off), KI(zstride),
                    KI(g->Cin), KI(g->H),  KI(g->W),    KI(mult),   KI(g->OH), KI(g->OW),   KI(g->KH),
                    KI(g->KW),  KI(g->sh), KI(g->sw),   KI(g->ph),  KI(g->pw), KI(g->dh),   KI(g->dw),
                    KI(R),      KI(gp->r_chunk)};
        st = run_kernel(ctx, opt, "dwconv_dw", k, (int)(sizeof k / sizeof k[0]), 2, global, local);
    } else {
        const gemm_tile *t = &tu->tiles[gp->tile];
        tile_options(tu, gp->tile, opt, sizeof opt);
        int vec_out = Mk % 4 == 0 && out_off % 4 == 0;
        size_t wg = (size_t)gemm_wg(t);
        size_t global[3] = {(size_t)cdiv(Mk, t->tm) * wg, (size_t)(cdiv(g->Cog, t->tn) * g->G), (size_t)gp->z};
        size_t local[3] = {wg, 1, 1};
        karg k[] = {KM(x->buf), KI(x_off),  KM(dy->buf), KI(dy_off), KM(out),   KI(out_off), KI(zstride),
                    KI(Mk),     KI(g->Cog), KI(g->Cig),  KI(g->KH),  KI(g->KW), KI(g->Cin),  KI(g->H),
                    KI(g->W),   KI(g->Cout), KI(g->OH),  KI(g->OW),  KI(g->sh), KI(g->sw),   KI(g->ph),
                    KI(g->pw),  KI(g->dh),  KI(g->dw),   KI(R),      KI(gp->r_chunk), KI(vec_out)};
        st = run_kernel(ctx, opt, "conv_gemm_dw", k, (int)(sizeof k / sizeof k[0]), 3, global, local);
    }
    if (st == TEENY_OK && gp->z > 1)
        st = reduce_parts(ctx, tu, opt, scratch, 0, numel, gp->z, dw->buf, dw_off);
    return st;
}

static teeny_status backward_db(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                const teeny_tensor *dy, teeny_tensor *db, cl_mem scratch, int part_off)
{
    int dy_off = teeny__off(dy), db_off = teeny__off(db), OHW = g->OH * g->OW;
    cl_mem out = gp->zb > 1 ? scratch : db->buf;
    int out_off = gp->zb > 1 ? part_off : db_off;
    char opt[256];
    tile_options(tu, 0, opt, sizeof opt);
    size_t global[2] = {(size_t)tu->dw_wg * gp->zb, (size_t)g->Cout}, local[2] = {(size_t)tu->dw_wg, 1};
    karg k[] = {KM(dy->buf), KI(dy_off), KM(out), KI(out_off), KI(g->B), KI(g->Cout), KI(OHW), KI(gp->b_chunk)};
    teeny_status st = run_kernel(ctx, opt, "conv_dbias_part", k, 8, 2, global, local);
    if (st == TEENY_OK && gp->zb > 1)
        st = reduce_parts(ctx, tu, opt, scratch, part_off, g->Cout, gp->zb, db->buf, db_off);
    return st;
}

teeny_status teeny__conv2d_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    int has_bias = a->attrs.conv2d.has_bias != 0;
    const teeny_tensor *x = a->in[0], *w = a->in[1], *dy = a->in[has_bias ? 4 : 3];
    teeny_tensor *dx = a->out[0], *dw = a->out[1], *db = has_bias ? a->out[2] : NULL;
    conv_geom g = geom_make(x, w, &a->attrs.conv2d);
    const conv_tuning *tu = tuning_for(ctx);
    teeny_status st = TEENY_OK;
    grad_plan gp;
    cl_mem scratch = NULL;

    if (dx)
        st = backward_dx(ctx, tu, &g, w, dy, dx);
    if (st != TEENY_OK || (!dw && !db))
        return st;
    if ((st = grad_plan_make(ctx, tu, &g, dw != NULL, db != NULL, &gp)) != TEENY_OK)
        return st;
    if (gp.dw_elems + gp.db_elems > 0)
        st = teeny__scratch(ctx, (size_t)(gp.dw_elems + gp.db_elems) * sizeof(float), &scratch);
    if (st == TEENY_OK && dw)
        st = backward_dw(ctx, tu, &g, &gp, x, dy, dw, scratch);
    if (st == TEENY_OK && db)
        st = backward_db(ctx, tu, &g, &gp, dy, db, scratch, (int)gp.dw_elems);
    return st;
}

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
    int64_t ws[4] = {wdim[0], x->shape[1] / (at->groups > 0 ? at->groups : 1), wdim[1], wdim[2]};
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
    s->fan_in = ws[1] * ws[2] * ws[3];
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
