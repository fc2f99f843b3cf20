/*
 * gemm.c -- the GEMM route, the one every convolution can take: the
 * implicit GEMM of the forward (conv_gemm_gather; conv_gemm_1x1 for 1x1
 * stride-1 unpadded convolutions), the GEMM launches of the input
 * gradient's stride phases (dx_direct.c makes their jobs; on the CPU
 * tunings gemm_run.c's kernels take them), and conv_gemm_dw, the weight
 * gradient's GEMM that weight_grad.c plans; their tiles, fit checks and
 * loop trips. Also here,
 * as the family's lowest file, what every route's launches share: the
 * conv2d program's build options (teeny__conv_tile_options), the local
 * memory a kernel may plan for, and conv_reduce_parts, the fixed-order sum
 * of a split's partials.
 *
 * The tuning is the device profile's (ctx->tune, src/tune/profiles.def):
 * GEMM tile shapes (TILE_M x TILE_N x TILE_K, WPT_M x WPT_N per item) and
 * the depthwise/reduction work-group size, as -D options. The plan takes
 * the tile of least estimated cost that still gives every compute unit
 * work. Geometry is always a kernel argument: a device builds one program
 * per tile shape at most.
 *
 * Loop trips: where a device limits a work-item's loop trips (Mesa's
 * llvmpipe ends every loop of an invocation after 65535 trips in all;
 * teeny__loop_budget gives half of that, and INT64_MAX where nothing is
 * limited, so that every split is then one piece and the plans, and the
 * bits, are those of an unlimited device), the GEMMs' k loops run in
 * launches over k ranges, out carrying the sums (the bits of one launch).
 * Every estimate counts each loop of cl/conv2d.cl as not unrolled, with
 * one trip more per entry than its body runs (the limiter counts the exit
 * test too), and the widest item of a launch.
 */
#include <stdio.h>
#include <string.h>

#include "conv2d_internal.h"

int64_t teeny__conv_cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* ---- the conv2d program's options, and what every route plans with ---- */

static int gemm_wg(const gemm_tile *t)
{
    return (t->tm / t->wm) * (t->tn / t->wn);
}

int teeny__conv_dwb_wg(const conv_tuning *tu)
{
    return tu->dwb_wg > 0 ? tu->dwb_wg : tu->dw_wg;
}

void teeny__conv_tile_options(const teeny_ctx *ctx, const conv_tuning *tu, int tile, char *buf, size_t cap)
{
    const gemm_tile *t = &tu->tiles[tile];
    int n = snprintf(buf, cap, "-DTILE_M=%d -DTILE_N=%d -DTILE_K=%d -DWPT_M=%d -DWPT_N=%d -DDW_WG=%d -DDWB_WG=%d "
                     "-DDW_ROWS=%d -DDW_TAPS=%d", t->tm, t->tn, t->tk, t->wm, t->wn, tu->dw_wg, teeny__conv_dwb_wg(tu),
                     tu->dw_rows, tu->dw_taps);
    if (tu->cpu_rows > 0 && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " -DCPU_RM=%d -DCPU_NV=%d", tu->cpu_rows, tu->cpu_nv);
    if (tu->tf32 && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " -DTEENY_TF32=1%s",
                 ctx->hooks.conv_tf32_emulate ? " -DTEENY_TF32_EMULATE=1" : "");
}

size_t teeny__conv_local_budget(const teeny_ctx *ctx)
{
    return ctx->info.local_mem_bytes > 1024 ? (size_t)ctx->info.local_mem_bytes - 1024 : 0;
}

int64_t teeny__conv_target_groups(const teeny_ctx *ctx, const conv_tuning *tu)
{
    return (int64_t)(ctx->info.compute_units ? ctx->info.compute_units : 1) * tu->waves;
}

/* ---- tiles ---- */

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
    return teeny__conv_cdiv(M, t->tm) * teeny__conv_cdiv(N, t->tn) * G *
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
        int64_t groups = teeny__conv_cdiv(M, t->tm) * teeny__conv_cdiv(N, t->tn) * G * z;
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
int teeny__conv_pick_tile(const teeny_ctx *ctx, const conv_tuning *tu, int64_t M, int64_t N, int64_t G, int64_t z)
{
    int64_t cus = ctx->info.compute_units ? ctx->info.compute_units : 1;
    int64_t forced = ctx->hooks.conv_tile; /* the test hook CONV_TILE */
    if (forced >= 0 && forced < tu->n_tiles && tile_fits(ctx, tu, &tu->tiles[forced]))
        return (int)forced;
    if (z <= 0)
        return cheapest_tile(ctx, tu, M, N, G, 1, -1);
    int i = cheapest_tile(ctx, tu, M, N, G, z, 0);
    const gemm_tile *t = &tu->tiles[i];
    if (!tu->tf32 && teeny__conv_cdiv(M, t->tm) * teeny__conv_cdiv(N, t->tn) * G * z < cus / 2)
        i = cheapest_tile(ctx, tu, M, N, G, z, 2 * cus);
    return i;
}

/* A tile's options, and -DCONV_PHASES for a launch of several stride
 * phases (cl/conv2d_gemm.cl: only that program has the phase search). */
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
teeny_status teeny__conv_fit_tile(teeny_ctx *ctx, const conv_tuning *tu, const char *name, int phases, int *tile)
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

/* ---- launches ---- */

int teeny__conv_plain(const conv_geom *g)
{
    return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->OH == g->H &&
           g->OW == g->W;
}

/* One forward or input-gradient GEMM by the tiles: one launch, or where
 * the device limits a work-item's loop trips, launches over ranges of
 * whole k tiles in order, out carrying the sums (the trips below). */
teeny_status teeny__conv_tile_gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j)
{
    int64_t per;
    teeny_status st;
    int phases = j->phases > 1 ? j->phases : 1;
    int tile = teeny__conv_pick_tile(ctx, tu, (int64_t)j->M * phases, j->N, j->G, 0);
    const char *name = j->plain ? "conv_gemm_1x1" : "conv_gemm_gather";
    st = teeny__conv_fit_tile(ctx, tu, name, phases, &tile);
    if (st != TEENY_OK)
        return st;
    const gemm_tile *t = &tu->tiles[tile];
    int64_t K = j->plain ? j->Kc : (int64_t)j->Kc * j->Kh * j->Kw, k_tiles = teeny__conv_cdiv(K, t->tk);
    if ((st = teeny__conv_gemm_tiles(ctx, t, j->plain, k_tiles, j->phase_trips, &per)) != TEENY_OK)
        return st;
    char opt[256];
    gemm_options(ctx, tu, tile, phases, opt, sizeof opt);
    size_t wg = (size_t)gemm_wg(t);
    size_t global[3] = {(size_t)teeny__conv_cdiv(j->M, t->tm) * wg, (size_t)(teeny__conv_cdiv(j->N, t->tn) * j->G),
                        (size_t)phases};
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
        st = teeny__run_kernel(ctx, "conv2d", opt, name, a, (int)(sizeof a / sizeof a[0]), 3, global, local);
    }
    return st;
}

/* conv_gemm_dw: the weight gradient [Cout][Cig][KH][KW] of g as a GEMM
 * with gp's tile over gp->z chunks of B*OH*OW positions, into out at
 * out_off (partials zstride apart where gp->z > 1); opt its tile's
 * options. */
teeny_status teeny__conv_gemm_dw_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                     const char *opt, cl_mem x, int x_off, cl_mem dy, int dy_off, cl_mem out,
                                     int out_off, int zstride)
{
    int R = g->B * g->OH * g->OW, Mk = g->Cig * g->KH * g->KW;
    const gemm_tile *t = &tu->tiles[gp->tile];
    int vec_out = Mk % 4 == 0 && out_off % 4 == 0;
    size_t wg = (size_t)gemm_wg(t);
    size_t global[3] = {(size_t)teeny__conv_cdiv(Mk, t->tm) * wg, (size_t)(teeny__conv_cdiv(g->Cog, t->tn) * g->G),
                        (size_t)gp->z};
    size_t local[3] = {wg, 1, 1};
    karg k[] = {KM(x),      KI(x_off),  KM(dy),      KI(dy_off), KM(out),   KI(out_off), KI(zstride),
                KI(Mk),     KI(g->Cog), KI(g->Cig),  KI(g->KH),  KI(g->KW), KI(g->Cin),  KI(g->H),
                KI(g->W),   KI(g->Cout), KI(g->OH),  KI(g->OW),  KI(g->sh), KI(g->sw),   KI(g->ph),
                KI(g->pw),  KI(g->dh),  KI(g->dw),   KI(R),      KI(gp->r_chunk), KI(vec_out)};
    return teeny__run_kernel(ctx, "conv2d", opt, "conv_gemm_dw", k, (int)(sizeof k / sizeof k[0]), 3, global, local);
}

/* conv_reduce_parts: out[i] = the sum of z partials part[i + j*n] in order
 * (no atomics: the same bits every run). */
teeny_status teeny__conv_reduce_parts(teeny_ctx *ctx, const conv_tuning *tu, const char *opt, cl_mem part,
                                      int part_off, int n, int z, cl_mem out, int out_off)
{
    /* a fixed local size: PoCL compiles a kernel once per local size */
    size_t global = (size_t)n, local = (size_t)tu->dw_wg;
    karg k[] = {KM(part), KI(part_off), KI(n), KI(z), KM(out), KI(out_off)};
    return teeny__run_kernel(ctx, "conv2d", opt, "conv_reduce_parts", k, 6, 1, &global, &local);
}

/* ---- loop trips ---- */

/* conv_gemm_gather / conv_gemm_1x1 (plain) / conv_gemm_dw (dw) with tile
 * t, mirroring the loop extents of cl/conv2d.cl's A_*, A4_*, B_* and R_*
 * macros: per k tile (TILE_K deep) the tile loop's trip, the staging of A
 * and B into local memory and the next tile's loads (each outer + 1 and
 * inner + 1), and gemm_micro (TILE_K + 1, per kk the A and B row reads and
 * the WPT_M x WPT_N multiply-adds); around them the row setup, the
 * accumulators, the first loads, the tile loop's exit, and gemm_load and
 * gemm_store. */
static void gemm_trips(const gemm_tile *t, int kind, int64_t *fixed, int64_t *per_tile)
{
    int64_t wg = gemm_wg(t), tm = t->tm, tn = t->tn, tk = t->tk, wm = t->wm, wn = t->wn;
    int64_t a_tm = tm < 32 ? tm : 32, a_tm4 = tm / 4;
    if (a_tm > wg)
        a_tm = wg;
    if (a_tm4 > wg)
        a_tm4 = wg;
    int64_t a_nm = tm / a_tm, a_nk = tk / (wg / a_tm), a4_nm = tm / 4 / a_tm4, a4_nk = tk / (wg / a_tm4);
    int64_t b_nn = teeny__conv_cdiv(tn, wg / tk), r_nm = tm / (wg / tk), r_nn = teeny__conv_cdiv(tn, wg / tk);
    int64_t a_loads = kind == 1 ? (a4_nk + 1) + a4_nk * (a4_nm + 1) : (a_nk + 1) + a_nk * (a_nm + 1);
    int64_t b_loads = b_nn + 1, setup = (kind == 1 ? a4_nm : a_nm) + 1;
    if (kind == 2) { /* conv_gemm_dw: A and B rows along r */
        a_loads = r_nm + 1;
        b_loads = r_nn + 1;
        setup = (r_nm + 1) + (r_nn + 1);
    }
    int64_t micro = (tk + 1) + tk * ((wm / 4 + 1) + (wn / 4 + 1) + (wm + 1) + wm * (wn + 1));
    int64_t load = (wm / 4 + 1) + (wm / 4) * (4 + 1 + 4 * (wn + 1));
    int64_t store = (wn + 1) + (wm / 4 + 1) + (wm / 4) * (4 + 1 + 4 * (wn + 1));
    *per_tile = 1 + 2 * (a_loads + b_loads) + micro;
    *fixed = setup + (wm * wn + 1) + (a_loads + b_loads) + 1 + load + store;
}

/* extra_trips: the merged stride phases' search (gemm_job.phase_trips). */
teeny_status teeny__conv_gemm_tiles(teeny_ctx *ctx, const gemm_tile *t, int plain, int64_t k_tiles,
                                    int64_t extra_trips, int64_t *per)
{
    int64_t fixed, per_tile;
    gemm_trips(t, plain ? 1 : 0, &fixed, &per_tile);
    fixed += extra_trips;
    return teeny__loop_split(ctx, plain ? "conv_gemm_1x1" : "conv_gemm_gather", k_tiles, fixed, per_tile, per);
}

int64_t teeny__conv_gemm_dw_tiles_max(const gemm_tile *t, int64_t budget)
{
    int64_t fixed, per_tile;
    gemm_trips(t, 2, &fixed, &per_tile);
    if (budget == INT64_MAX)
        return INT64_MAX;
    return budget < fixed + per_tile ? 0 : (budget - fixed) / per_tile;
}

/* ---- every call's minimum ----
 * One k unit of each tiled GEMM this device may take (its smallest tile;
 * gemm_run.c's teeny__conv_loops_check adds the CPU GEMM's). */
teeny_status teeny__conv_tile_loops_check(teeny_ctx *ctx, const conv_tuning *tu)
{
    int64_t fixed, per;
    teeny_status st = TEENY_OK;
    /* the tiles beyond the budget are not picked (teeny__conv_tile_loops_fit):
     * the smallest must fit, its message where it does not */
    for (int kind = 0; kind < 3 && st == TEENY_OK && tu->n_tiles > 0; kind++) {
        static const char *const names[3] = {"conv_gemm_gather", "conv_gemm_1x1", "conv_gemm_dw"};
        gemm_trips(&tu->tiles[tu->n_tiles - 1], kind, &fixed, &per);
        st = teeny__loop_check(ctx, names[kind], fixed + per);
    }
    return st;
}

int teeny__conv_tile_loops_fit(const teeny_ctx *ctx, const gemm_tile *t)
{
    int64_t fixed, per, budget = teeny__loop_budget_known(ctx);
    for (int kind = 0; kind < 3; kind++) {
        gemm_trips(t, kind, &fixed, &per);
        if (fixed + per > budget)
            return 0;
    }
    return 1;
}

/* conv_reduce_parts: Z + 1 trips. */
teeny_status teeny__conv_reduce_check(teeny_ctx *ctx, int64_t z)
{
    return z > 1 ? teeny__loop_check(ctx, "conv_reduce_parts", z + 1) : TEENY_OK;
}
