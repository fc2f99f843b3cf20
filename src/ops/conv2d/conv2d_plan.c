/*
 * conv2d_plan.c -- how a grouped convolution runs on this device: tile
 * picking and the fit checks against device and kernel limits, its test
 * hooks' reads (CONV_TILE, CONV_FLAGS, CONV_TF32_EMULATE), the GEMM launches
 * (conv_gemm_gather, conv_gemm_1x1, conv_gemm_cpu with its packing), the
 * depthwise tile plans and the weight-gradient split plan. conv2d_exec.c
 * calls these per pass; shared types live in conv2d_internal.h, layouts
 * and paths are described in conv2d.c.
 *
 * The tuning is the device profile's (ctx->tune, src/tune/profiles.def):
 * GEMM tile shapes (TILE_M x TILE_N x TILE_K, WPT_M x WPT_N per item) and
 * the depthwise/reduction work-group size, as -D options. pick_tile takes
 * the tile of least estimated cost that still gives every compute unit
 * work. Geometry is always a kernel argument: a device builds one program
 * per tile shape at most.
 */
#include "conv2d_internal.h"

int teeny__conv_phases_merged(const teeny_ctx *ctx, const conv_tuning *tu)
{
    return tu->cpu_rows == 0 && !(ctx->hooks.conv_flags & 2);
}

int teeny__conv_dx_direct_on(const teeny_ctx *ctx, const conv_tuning *tu)
{
    return tu->dx_cols > 0 && !(ctx->hooks.conv_flags & 4);
}

/* The GEMMs' double-buffered A and B slices (LDA, LDB in cl/conv2d.cl:
 * rows padded by 4 floats, 8 for the tf32 micro-kernel), and the emulated
 * mma's exchange (6 words an item, cl/common.cl). */
static size_t gemm_local_bytes(const teeny_ctx *ctx, const conv_tuning *tu, const gemm_tile *t)
{
    int pad = tu->tf32 ? 8 : 4;
    size_t xchg = tu->tf32 && ctx->hooks.conv_tf32_emulate ? (size_t)6 * gemm_wg(t) : 0;
    return ((size_t)2 * t->tk * ((t->tm + pad) + (t->tn + pad)) + xchg) * sizeof(float);
}

static int tile_fits(const teeny_ctx *ctx, const conv_tuning *tu, const gemm_tile *t)
{
    return (size_t)gemm_wg(t) <= ctx->info.max_work_group_size &&
           gemm_local_bytes(ctx, tu, t) <= ctx->info.local_mem_bytes && teeny__conv_tile_loops_fit(ctx, t);
}

void teeny__conv_tile_options(const teeny_ctx *ctx, const conv_tuning *tu, int tile, char *buf, size_t cap)
{
    const gemm_tile *t = &tu->tiles[tile];
    int n = snprintf(buf, cap, "-DTILE_M=%d -DTILE_N=%d -DTILE_K=%d -DWPT_M=%d -DWPT_N=%d -DDW_WG=%d -DDWB_WG=%d "
                     "-DDW_ROWS=%d -DDW_TAPS=%d", t->tm, t->tn, t->tk, t->wm, t->wn, tu->dw_wg, conv_dwb_wg(tu),
                     tu->dw_rows, tu->dw_taps);
    if (tu->cpu_rows > 0 && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " -DCPU_RM=%d -DCPU_NV=%d", tu->cpu_rows, tu->cpu_nv);
    if (tu->tf32 && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " -DTEENY_TF32=1%s",
                 ctx->hooks.conv_tf32_emulate ? " -DTEENY_TF32_EMULATE=1" : "");
}

static int64_t target_groups(const teeny_ctx *ctx, const conv_tuning *tu)
{
    return (int64_t)(ctx->info.compute_units ? ctx->info.compute_units : 1) * tu->waves;
}

/* A GEMM's cost with tile t, in quarter multiply-adds per k: per
 * work-group its tm x tn products (padding included) at the micro-tile's
 * local-memory reads per product (a WPT_M x WPT_N item reads wm + wn
 * operands for wm*wn products; 8 x 8 keeps up with the FMA units, 4 x 4
 * takes twice their time; tf32's mma makes a product a quarter), and its
 * tm + tn staged operands (a gathered load, its bounds test, a local store:
 * STAGE_COST products each), times the work-groups. */
#define STAGE_COST 8
static int64_t tile_cost(const conv_tuning *tu, const gemm_tile *t, int64_t M, int64_t N, int64_t G)
{
    int64_t per_product = tu->tf32 ? 1 : 16 / t->wm + 16 / t->wn;
    if (per_product < 4 && !tu->tf32)
        per_product = 4;
    return cdiv(M, t->tm) * cdiv(N, t->tn) * G *
           ((int64_t)t->tm * t->tn * per_product + 4 * STAGE_COST * ((int64_t)t->tm + t->tn));
}

/* The cheapest tile (tile_cost: padded rows and columns alike) of those the device holds that give every
 * unit work: min_groups < 0 (no weight gradient: no dw_first tile), each tile's min_per_cu work-groups per unit;
 * else min_groups over the z chunks (0: none), a dw_first tile M and N fill before any. The smallest tile
 * (min_per_cu 0) where none does. */
static int cheapest_tile(const teeny_ctx *ctx, const conv_tuning *tu, int64_t M, int64_t N, int64_t G, int64_t z,
                         int64_t min_groups)
{
    int64_t cus = ctx->info.compute_units ? ctx->info.compute_units : 1;
    int last = tu->n_tiles - 1, best = -1;
    int64_t best_cost = 0;
    while (last > 0 && !tile_fits(ctx, tu, &tu->tiles[last]))
        last--;
    for (int i = 0; i <= last; i++) {
        const gemm_tile *t = &tu->tiles[i];
        int64_t groups = cdiv(M, t->tm) * cdiv(N, t->tn) * G * z;
        if ((t->dw_first && (min_groups < 0 || M < t->tm || N < t->tn)) || !tile_fits(ctx, tu, t) ||
            (i < last && groups < (min_groups < 0 ? (int64_t)t->min_per_cu * cus : min_groups)))
            continue;
        int64_t cost = t->dw_first ? 0 : tile_cost(tu, t, M, N, G); /* dw_first: the weight gradient's first */
        if (best < 0 || cost < best_cost) {
            best = i;
            best_cost = cost;
        }
    }
    return best >= 0 ? best : last;
}

/* The tile for an M x N GEMM per group over G groups. z 0 (one launch):
 * the cheapest giving every unit the tile's min_per_cu work-groups. z > 0
 * (the split weight gradient, up to z chunks of k): the cheapest, unless
 * it leaves half the units idle (128 x 128 over a 1x1 layer's 128 x 256
 * gradient at 7 x 7: 50 work-groups for the H200's 132 units, 0.035 ms;
 * 64 x 32: 400, 0.027), then the cheapest giving every unit two (fp32). */
static int pick_tile(const teeny_ctx *ctx, const conv_tuning *tu, int64_t M, int64_t N, int64_t G, int64_t z)
{
    int64_t cus = ctx->info.compute_units ? ctx->info.compute_units : 1;
    int64_t forced = ctx->hooks.conv_tile; /* the test hook CONV_TILE */
    if (forced >= 0 && forced < tu->n_tiles && tile_fits(ctx, tu, &tu->tiles[forced]))
        return (int)forced;
    if (z <= 0)
        return cheapest_tile(ctx, tu, M, N, G, 1, -1);
    int i = cheapest_tile(ctx, tu, M, N, G, z, 0);
    const gemm_tile *t = &tu->tiles[i];
    if (!tu->tf32 && cdiv(M, t->tm) * cdiv(N, t->tn) * G * z < cus / 2)
        i = cheapest_tile(ctx, tu, M, N, G, z, 2 * cus);
    return i;
}

int teeny__conv2d_debug_pick(const teeny_ctx *ctx, int64_t M, int64_t N, int64_t G, int64_t z)
{
    return pick_tile(ctx, conv_tuning_of(ctx), M, N, G, z);
}

/* A tile's options, and -DCONV_PHASES for a launch of several stride
 * phases (cl/conv2d.cl: only that program has the phase search). */
static void gemm_options(const teeny_ctx *ctx, const conv_tuning *tu, int tile, int phases, char *buf, size_t cap)
{
    teeny__conv_tile_options(ctx, tu, tile, buf, cap);
    size_t n = strlen(buf);
    if (phases > 1 && n < cap)
        snprintf(buf + n, cap - n, " -DCONV_PHASES=1");
}

/* The kernel's own limits (CL_KERNEL_WORK_GROUP_SIZE, its static local
 * memory) have the last word: the picked tile, else the next smaller one
 * its compiler allows; TEENY_ERR_UNSUPPORTED when none does. */
static teeny_status fit_tile(teeny_ctx *ctx, const conv_tuning *tu, const char *name, int phases, int *tile)
{
    teeny_status st = TEENY_ERR_UNSUPPORTED;
    int tried = 0;
    for (int i = *tile; i < tu->n_tiles; i++) {
        char opt[256];
        if (!tile_fits(ctx, tu, &tu->tiles[i]))
            continue;
        tried = 1;
        gemm_options(ctx, tu, i, phases, opt, sizeof opt);
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
    if (!tried)
        st = teeny__error(ctx, st, "%s: no GEMM tile of this device's profile fits its work-group size, local "
                          "memory and loop limits", name);
    return st;
}

/* Whether a depthwise kernel fits as planned, work-groups of wg: 1 fits; 0 does not (the caller takes the GEMM
 * path), with *st TEENY_OK, or the build or query failed, with *st that status. */
int teeny__conv_dw_fits(teeny_ctx *ctx, const conv_tuning *tu, const char *name, size_t wg, size_t local_bytes,
                        teeny_status *st)
{
    char opt[256];
    teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
    *st = teeny__kernel_fit(ctx, "conv2d", opt, name, wg, local_bytes, NULL);
    if (*st == TEENY_ERR_UNSUPPORTED) {
        teeny__clear_error(ctx);
        *st = TEENY_OK;
        return 0;
    }
    return *st == TEENY_OK;
}

int teeny__conv_plain(const conv_geom *g)
{
    return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->OH == g->H &&
           g->OW == g->W;
}

/* The packed B operand of conv_gemm_cpu in floats (0: beyond int32). */
static int64_t cpu_packed(const conv_tuning *tu, const gemm_job *j)
{
    int64_t n = (int64_t)j->G * j->Kh * j->Kw * j->Kc * cdiv(j->N, 16 * tu->cpu_nv) * 16 * tu->cpu_nv;
    return n > INT32_MAX / 2 ? 0 : n;
}

#define CONV_SEG_FIRST 1 /* as cl/conv2d.cl */
#define CONV_SEG_LAST 2

/* conv_gemm_cpu: pack B into a workspace, then the GEMM. */
teeny_status teeny__conv_cpu_gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j, const char *opt,
                                      int z, int64_t chunk, int zstride)
{
    int nc = 16 * tu->cpu_nv, Np = (int)cdiv(j->N, nc) * nc, total = (int)cpu_packed(tu, j), zero = 0;
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
    /* a CPU runs a work-group on one core: few items (a weight gradient
     * with few rows) get smaller groups, so every core takes some */
    size_t row_items = (size_t)cdiv(j->M, tu->cpu_rows), col_items = (size_t)(Np / nc) * j->G;
    size_t wg = teeny__cpu_local(ctx, row_items * col_items);
    if (wg > (size_t)tu->cpu_wg)
        wg = (size_t)tu->cpu_wg;
    size_t global[3] = {(row_items + wg - 1) / wg * wg, col_items, (size_t)(z > 1 ? z : 1)};
    size_t local[3] = {wg, 1, 1};
    int64_t K = (int64_t)j->Kh * j->Kw * j->Kc;
    int k_begin = 0, k_chunk = (int)chunk, zs = z > 1 ? zstride : 0, seg = 0;
    karg a[] = {KM(j->src),         KI(j->src_off),     KM(bp),             KI(zero),           KI(Np),
                KM(j->out),         KI(j->out_off),     KI(j->M),           KI(j->N),           KI(j->P),
                KI(j->Q),           KI(j->Kc),          KI(j->Kh),          KI(j->Kw),          KI(j->src_bstride),
                KI(j->src_gstride), KI(j->src_cstride), KI(j->Hs),          KI(j->Ws),          KI(j->a_h),
                KI(j->c_h),         KI(j->e_h),         KI(j->a_w),         KI(j->c_w),         KI(j->e_w),
                KI(j->out_bstride), KI(j->out_nstride), KI(j->out_hstride), KI(j->out_wstride), KM(j->bias),
                KI(j->bias_off),    KM(j->scale),       KI(j->scale_off),   KM(j->shift),       KI(j->shift_off),
                KI(j->epi),         KI(j->act),         KI(k_begin),        KI(k_chunk),        KI(zs),
                KI(seg)};
    /* z > 1: one launch of partials; else k in order, chunk units a launch */
    for (int64_t k0 = 0; st == TEENY_OK && (k0 == 0 || (z <= 1 && k0 < K)); k0 += chunk) {
        k_begin = (int)k0;
        seg = z > 1 ? CONV_SEG_FIRST | CONV_SEG_LAST
                    : (k0 == 0 ? CONV_SEG_FIRST : 0) | (k0 + chunk >= K ? CONV_SEG_LAST : 0);
        st = run_kernel(ctx, opt, "conv_gemm_cpu", a, (int)(sizeof a / sizeof a[0]), 3, global, local);
    }
    if (total > 0)
        teeny__scratch_give(ctx, bp); /* enqueued: the next GEMM of this op may take it */
    return st;
}

static int use_cpu_gemm(const conv_tuning *tu, const gemm_job *j)
{
    return tu->cpu_rows > 0 && (j->Kc == 0 || cpu_packed(tu, j) > 0);
}

/* One forward or input-gradient GEMM: one launch, or where the device
 * limits a work-item's loop trips, launches over ranges of k (whole k
 * tiles; conv_gemm_cpu: of its (tap, channel) units) in order, out carrying
 * the sums (conv2d_loops.c). */
teeny_status teeny__conv_gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j)
{
    int64_t per;
    teeny_status st;
    if (use_cpu_gemm(tu, j)) {
        char opt[256];
        teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
        if ((st = teeny__conv_cpu_gemm_chunk(ctx, tu, j, &per)) != TEENY_OK)
            return st;
        return teeny__conv_cpu_gemm_run(ctx, tu, j, opt, 1, per, 0);
    }
    int phases = j->phases > 1 ? j->phases : 1;
    int tile = pick_tile(ctx, tu, (int64_t)j->M * phases, j->N, j->G, 0);
    const char *name = j->plain ? "conv_gemm_1x1" : "conv_gemm_gather";
    st = fit_tile(ctx, tu, name, phases, &tile);
    if (st != TEENY_OK)
        return st;
    const gemm_tile *t = &tu->tiles[tile];
    int64_t K = j->plain ? j->Kc : (int64_t)j->Kc * j->Kh * j->Kw, k_tiles = cdiv(K, t->tk);
    if ((st = teeny__conv_gemm_tiles(ctx, t, j->plain, k_tiles, j->phase_trips, &per)) != TEENY_OK)
        return st;
    char opt[256];
    gemm_options(ctx, tu, tile, phases, opt, sizeof opt);
    size_t wg = (size_t)gemm_wg(t);
    size_t global[3] = {(size_t)cdiv(j->M, t->tm) * wg, (size_t)(cdiv(j->N, t->tn) * j->G), (size_t)phases};
    size_t local[3] = {wg, 1, 1};
    int k_begin = 0, k_end = 0, seg = 0;
    karg a[] = {KM(j->src),         KI(j->src_off),     KM(j->w),           KI(j->w_off),       KM(j->out),
                KI(j->out_off),     KI(j->M),           KI(j->N),           KI(j->P),           KI(j->Q),
                KI(j->Kc),          KI(j->Kh),          KI(j->Kw),          KI(j->src_bstride), KI(j->src_cstride),
                KI(j->Hs),          KI(j->Ws),          KI(j->a_h),         KI(j->c_h),         KI(j->e_h),
                KI(j->a_w),         KI(j->c_w),         KI(j->e_w),         KI(j->w_gstride),   KI(j->w_nstride),
                KI(j->w_cstride),   KI(j->w_hstride),   KI(j->w_wstride),   KI(j->out_bstride), KI(j->out_nstride),
                KI(j->out_hstride), KI(j->out_wstride), KM(j->bias),        KI(j->bias_off),    KM(j->scale),
                KI(j->scale_off),   KM(j->shift),       KI(j->shift_off),   KI(j->epi),         KI(j->act),
                KI(j->vec_out),     KI(k_begin),        KI(k_end),          KI(seg),            KG(j->phase)};
    for (int64_t kt = 0; st == TEENY_OK && (kt == 0 || kt < k_tiles); kt += per) {
        k_begin = (int)(kt * t->tk);
        k_end = kt + per >= k_tiles ? (int)K : (int)((kt + per) * t->tk);
        seg = (kt == 0 ? CONV_SEG_FIRST : 0) | (kt + per >= k_tiles ? CONV_SEG_LAST : 0);
        st = run_kernel(ctx, opt, name, a, (int)(sizeof a / sizeof a[0]), 3, global, local);
    }
    return st;
}

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

size_t teeny__conv_local_budget(const teeny_ctx *ctx)
{
    return ctx->info.local_mem_bytes > 1024 ? (size_t)ctx->info.local_mem_bytes - 1024 : 0;
}

/* Forward plan: each column of an output plane in row_blocks strips of `rows` rows, at most DW_ROWS and as
 * even as they go (56 rows: 7 strips of 8; 28: 4 of 7), so that no strip is mostly empty; on dwconv_fwd's 3x3
 * path (dw_fwd_rows3: row stride 1 or 2, row dilation 1, column stride and dilation 1) 4 columns per item at
 * row stride 1 where the input rows are whole float4s (W % 4 == 0) and OW >= 8 (per input row 3 loads for 4
 * outputs with the middle four as a float4; H200, x [32, 256, 56, 56]: 0.105 -> 0.094 ms), else 2 (4 loads
 * for 2): on 14- and 7-wide planes 4 scalar columns halved the items and took the example's two depthwise
 * forwards from 0.023 to 0.041 ms (2026-12-02); hook flag 8: one column (the same bits). */
void teeny__conv_dw_plan_fwd(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, dw_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->row_blocks = (int)cdiv(g->OH, tu->dw_rows);
    pl->rows = (int)cdiv(g->OH, pl->row_blocks);
    int rows3 = g->KH == 3 && g->KW == 3 && g->dh == 1 && (g->sh == 1 || g->sh == 2) && g->sw == 1 && g->dw == 1;
    pl->cols = !rows3 || (ctx->hooks.conv_flags & 8) ? 1 : g->sh == 1 && g->W % 4 == 0 && g->OW >= 8 ? 4 : 2;
}

/* Columns per item of dwconv_dw's 3x3 path (dw_dw_rows3): 4 where output rows are at least 8 wide (per
 * row of 4 positions one dy load, a float4 where dy's rows allow it, and one input row of 6 values, the
 * middle four as a float4 where x's do, for 36 products: 16 scalar loads for the same products one column
 * an item), else 1; hook flag 16: 1. */
int teeny__conv_dw_grad_cols(const teeny_ctx *ctx, const conv_geom *g)
{
    return g->OW >= 8 && !(ctx->hooks.conv_flags & 16) ? 4 : 1;
}

/* Input-gradient plan over the H x W plane of dx. */
int teeny__conv_dw_plan_dx(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, dw_plan *pl)
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
        if (ph * pw * g->Cog <= INT32_MAX && bytes <= (int64_t)teeny__conv_local_budget(ctx)) {
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

int teeny__conv_use_depthwise(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g)
{
    return g->Cig == 1 && g->Cog <= tu->dw_mult_max && !(ctx->hooks.conv_flags & 1);
}

/* The weight gradient as a conv_gemm_cpu problem: rows m = (c, kh, kw)
 * (c in the batch slot, (kh, kw) in the output-grid slots), reduction
 * k = (b, oh, ow) (b in the channel slot, (oh, ow) in the tap slots), B
 * = dy, out = dw. Geometry only; the caller sets buffers and offsets. */
void teeny__conv_dw_job_make(const conv_geom *g, gemm_job *j)
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
    if (teeny__conv_plain(g)) {
        /* 1x1, stride 1, no padding: the reduction's inner loop walks the
         * pixels, contiguous in x and dy alike, and the batch is the
         * (always valid) tap: row c reads x[b][c][pix] at
         * c*HW + b*(Cin*HW) + pix, B reads dy[b][n][pix] */
        j->Kc = OHW;
        j->Kh = g->B;
        j->Kw = 1;
        j->src_cstride = 1;
        j->Hs = g->B;
        j->Ws = g->Cin * HW;
        j->a_h = j->c_h = 0;
        j->e_h = 1;
        j->a_w = j->c_w = j->e_w = 0;
        j->w_cstride = 1;
        j->w_hstride = g->Cout * OHW;
        j->w_wstride = 0;
    }
}

/* The most k chunks of a GEMM weight gradient as the split plan below cuts them: 16 k slices of 16 at least. */
#define DW_CHUNKS_MAX(g) cdiv((int64_t)(g)->B * (g)->OH * (g)->OW, 16 * 16)

/* Where the device limits a work-item's loop trips and not one row (one
 * round of taps) of the depthwise weight gradient fits an item, the GEMM
 * path takes it (conv2d_loops.c). */
static teeny_status grad_budget_path(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, grad_plan *gp)
{
    int64_t budget;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK || !gp->depthwise ||
        (conv_cpu_variant(ctx) ? teeny__conv_dw_cpu_rows_max(g, budget) : teeny__conv_dw_rounds_max(tu, g, budget)) >=
            1)
        return st;
    gemm_job j;
    gp->depthwise = 0;
    teeny__conv_dw_job_make(g, &j);
    gp->cpu = use_cpu_gemm(tu, &j);
    if (!gp->cpu)
        gp->tile = pick_tile(ctx, tu, (int64_t)g->Cig * g->KH * g->KW, g->Cog, g->G, DW_CHUNKS_MAX(g));
    return TEENY_OK;
}

/* The fewest dweight chunks the device's loop budget asks for, in the
 * unit of gp->r_chunk (conv2d_loops.c); 1 where nothing is limited. */
static teeny_status grad_z_min(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                               int64_t *z_min)
{
    int64_t budget, R = (int64_t)g->B * g->OH * g->OW, per;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    *z_min = 1;
    if (st != TEENY_OK || budget == INT64_MAX)
        return st;
    if (gp->depthwise && conv_cpu_variant(ctx)) {
        *z_min = cdiv((int64_t)g->B * g->OH, teeny__conv_dw_cpu_rows_max(g, budget));
    } else if (gp->depthwise) {
        *z_min = cdiv(R, teeny__conv_dw_rounds_max(tu, g, budget) * tu->dw_wg);
    } else if (gp->cpu) {
        gemm_job j;
        teeny__conv_dw_job_make(g, &j);
        if ((st = teeny__conv_cpu_gemm_chunk(ctx, tu, &j, &per)) == TEENY_OK)
            *z_min = cdiv(R, per);
    } else { /* per >= 1: teeny__conv_loops_check held one tile */
        per = teeny__conv_gemm_dw_tiles_max(&tu->tiles[gp->tile], budget);
        *z_min = cdiv(cdiv(R, tu->tiles[gp->tile].tk), per);
    }
    return st;
}

teeny_status teeny__conv_grad_plan_make(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int want_dw,
                                        int want_db, grad_plan *gp)
{
    int64_t R = (int64_t)g->B * g->OH * g->OW, target = target_groups(ctx, tu);
    int64_t Mk = (int64_t)g->Cig * g->KH * g->KW, dw_numel = (int64_t)g->Cout * Mk;
    int64_t max_floats = (int64_t)(ctx->info.max_alloc_bytes / sizeof(float)) / 2;
    int64_t z = 1, min_chunk, tiles, z_min = 1, budget;
    teeny_status st;
    memset(gp, 0, sizeof *gp);
    if (max_floats > INT32_MAX / 2)
        max_floats = INT32_MAX / 2;
    gp->depthwise =
        teeny__conv_use_depthwise(ctx, tu, g) &&
        (size_t)tu->dw_taps * tu->dw_wg * sizeof(float) <= teeny__conv_local_budget(ctx);
    if (!gp->depthwise) {
        gemm_job j;
        teeny__conv_dw_job_make(g, &j);
        gp->cpu = use_cpu_gemm(tu, &j);
        if (!gp->cpu)
            gp->tile = pick_tile(ctx, tu, Mk, g->Cog, g->G, DW_CHUNKS_MAX(g));
    }
    if ((st = teeny__loop_budget(ctx, &budget)) != TEENY_OK ||
        (want_dw && (st = grad_budget_path(ctx, tu, g, gp)) != TEENY_OK))
        return st;
    if (!gp->depthwise && !gp->cpu && want_dw && (st = fit_tile(ctx, tu, "conv_gemm_dw", 1, &gp->tile)) != TEENY_OK)
        return st;
    if (want_dw && (st = grad_z_min(ctx, tu, g, gp, &z_min)) != TEENY_OK)
        return st;
    if (gp->depthwise) {
        tiles = conv_cpu_variant(ctx) ? target : g->Cout; /* the CPU variant takes no split: z = 1 */
        min_chunk = (int64_t)tu->dw_wg * 4;
    } else if (gp->cpu) {
        tiles = target;
        min_chunk = R;
    } else {
        const gemm_tile *t = &tu->tiles[gp->tile];
        tiles = cdiv(Mk, t->tm) * cdiv(g->Cog, t->tn) * g->G;
        min_chunk = (int64_t)t->tk * 16;
    }
    if (want_dw) {
        /* chunks of rows of B*OH (the depthwise CPU variant), k units (the
         * CPU GEMM, k = B*OH*OW) or positions of B*OH*OW */
        int64_t units = gp->depthwise && conv_cpu_variant(ctx) ? (int64_t)g->B * g->OH : R;
        z = cdiv(target, tiles);
        if (z > cdiv(R, min_chunk))
            z = cdiv(R, min_chunk);
        if (z < z_min) /* only where the device limits a work-item's loop trips */
            z = z_min;
        while (z > 1 && z * dw_numel > max_floats)
            z /= 2;
        if (z < 1)
            z = 1;
        if (z < z_min || (z > 1 && z + 1 > budget)) {
            /* the partials do not fit the workspace, or conv_reduce_parts'
             * loop over them: the CPU GEMM runs its chunks as launches in
             * order into dw itself; the other paths cannot */
            if (!gp->cpu)
                return teeny__error(ctx, TEENY_ERR_UNSUPPORTED,
                                    "conv2d weight gradient: %s ends a kernel's loops after %lld trips in all; "
                                    "staying within them takes %lld partials of %lld floats, more than the "
                                    "workspace (%lld floats) or conv_reduce_parts' loop holds",
                                    ctx->info.device_name, (long long)ctx->prog.loop_limit, (long long)z_min,
                                    (long long)dw_numel, (long long)max_floats);
            gp->cpu_launches = 1;
            z = z_min;
        }
        int64_t chunk = cdiv(units, z);
        if (!gp->depthwise && !gp->cpu)
            chunk = cdiv(chunk, tu->tiles[gp->tile].tk) * tu->tiles[gp->tile].tk;
        gp->r_chunk = (int)chunk;
        gp->z = (int)cdiv(units, chunk);
        gp->dw_elems = gp->z > 1 && !gp->cpu_launches ? gp->z * dw_numel : 0;
    }
    if (want_db) {
        int64_t zb = cdiv(target, g->Cout), per;
        if ((st = teeny__conv_db_batches_max(ctx, tu, g, &per)) != TEENY_OK)
            return st;
        if (zb > g->B)
            zb = g->B;
        while (zb > 1 && zb * g->Cout > max_floats)
            zb /= 2;
        if (zb < cdiv(g->B, per)) /* only where the device limits a work-item's loop trips */
            zb = cdiv(g->B, per);
        gp->b_chunk = (int)cdiv(g->B, zb);
        gp->zb = (int)cdiv(g->B, gp->b_chunk);
        gp->db_elems = gp->zb > 1 ? (int64_t)gp->zb * g->Cout : 0;
        if ((st = teeny__conv_reduce_check(ctx, gp->zb)) != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}
