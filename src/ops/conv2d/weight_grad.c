/*
 * weight_grad.c -- the weight and bias gradients of a convolution: the
 * split plan (teeny__conv_grad_plan_make: the kernel, the chunks of
 * B*OH*OW and of the batch, the partials in the workspace) and the
 * launches as it planned them. The weight gradient goes by the CPU GEMM
 * (conv_gemm_cpu), the depthwise kernels (depthwise.c) or the GEMM
 * conv_gemm_dw (gemm.c), over chunks whose partials conv_reduce_parts
 * sums in a fixed order (no atomics: the same bits every run); the bias
 * gradient by conv_dbias_part, chunked over the batch the same way. Where
 * a device limits a work-item's loop trips the chunks become more and
 * shorter (gemm.c says how trips are counted). route.c's backward calls
 * these, and winograd.c for the 16 GEMMs of its weight gradient.
 */
#include <string.h>

#include "conv2d_internal.h"

/* ---- the plan ---- */

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
#define DW_CHUNKS_MAX(g) teeny__conv_cdiv((int64_t)(g)->B * (g)->OH * (g)->OW, 16 * 16)

/* Where the device limits a work-item's loop trips and not one row (one
 * round of taps) of the depthwise weight gradient fits an item, the GEMM
 * path takes it (depthwise.c counts its trips). */
static teeny_status grad_budget_path(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, grad_plan *gp)
{
    int64_t budget;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK || !gp->depthwise ||
        (teeny__conv_cpu_variant(ctx) ? teeny__conv_dw_cpu_rows_max(g, budget)
                                      : teeny__conv_dw_rounds_max(tu, g, budget)) >= 1)
        return st;
    gemm_job j;
    gp->depthwise = 0;
    teeny__conv_dw_job_make(g, &j);
    gp->cpu = teeny__conv_use_cpu_gemm(tu, &j);
    if (!gp->cpu)
        gp->tile = teeny__conv_pick_tile(ctx, tu, (int64_t)g->Cig * g->KH * g->KW, g->Cog, g->G, DW_CHUNKS_MAX(g));
    return TEENY_OK;
}

/* The fewest dweight chunks the device's loop budget asks for, in the
 * unit of gp->r_chunk (the kernels' trips: depthwise.c, gemm.c); 1 where
 * nothing is limited. */
static teeny_status grad_z_min(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                               int64_t *z_min)
{
    int64_t budget, R = (int64_t)g->B * g->OH * g->OW, per;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    *z_min = 1;
    if (st != TEENY_OK || budget == INT64_MAX)
        return st;
    if (gp->depthwise && teeny__conv_cpu_variant(ctx)) {
        *z_min = teeny__conv_cdiv((int64_t)g->B * g->OH, teeny__conv_dw_cpu_rows_max(g, budget));
    } else if (gp->depthwise) {
        *z_min = teeny__conv_cdiv(R, teeny__conv_dw_rounds_max(tu, g, budget) * tu->dw_wg);
    } else if (gp->cpu) {
        gemm_job j;
        teeny__conv_dw_job_make(g, &j);
        if ((st = teeny__conv_cpu_gemm_chunk(ctx, tu, &j, &per)) == TEENY_OK)
            *z_min = teeny__conv_cdiv(R, per);
    } else { /* per >= 1: teeny__conv_loops_check held one tile */
        per = teeny__conv_gemm_dw_tiles_max(&tu->tiles[gp->tile], budget);
        *z_min = teeny__conv_cdiv(teeny__conv_cdiv(R, tu->tiles[gp->tile].tk), per);
    }
    return st;
}

teeny_status teeny__conv_grad_plan_make(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int want_dw,
                                        int want_db, grad_plan *gp)
{
    int64_t R = (int64_t)g->B * g->OH * g->OW, target = teeny__conv_target_groups(ctx, tu);
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
        gp->cpu = teeny__conv_use_cpu_gemm(tu, &j);
        if (!gp->cpu)
            gp->tile = teeny__conv_pick_tile(ctx, tu, Mk, g->Cog, g->G, DW_CHUNKS_MAX(g));
    }
    if ((st = teeny__loop_budget(ctx, &budget)) != TEENY_OK ||
        (want_dw && (st = grad_budget_path(ctx, tu, g, gp)) != TEENY_OK))
        return st;
    if (!gp->depthwise && !gp->cpu && want_dw &&
        (st = teeny__conv_fit_tile(ctx, tu, "conv_gemm_dw", 1, &gp->tile)) != TEENY_OK)
        return st;
    if (want_dw && (st = grad_z_min(ctx, tu, g, gp, &z_min)) != TEENY_OK)
        return st;
    if (gp->depthwise) {
        tiles = teeny__conv_cpu_variant(ctx) ? target : g->Cout; /* the CPU variant takes no split: z = 1 */
        min_chunk = (int64_t)tu->dw_wg * 4;
    } else if (gp->cpu) {
        tiles = target;
        min_chunk = R;
    } else {
        const gemm_tile *t = &tu->tiles[gp->tile];
        tiles = teeny__conv_cdiv(Mk, t->tm) * teeny__conv_cdiv(g->Cog, t->tn) * g->G;
        min_chunk = (int64_t)t->tk * 16;
    }
    if (want_dw) {
        /* chunks of rows of B*OH (the depthwise CPU variant), k units (the
         * CPU GEMM, k = B*OH*OW) or positions of B*OH*OW */
        int64_t units = gp->depthwise && teeny__conv_cpu_variant(ctx) ? (int64_t)g->B * g->OH : R;
        z = teeny__conv_cdiv(target, tiles);
        if (z > teeny__conv_cdiv(R, min_chunk))
            z = teeny__conv_cdiv(R, min_chunk);
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
        int64_t chunk = teeny__conv_cdiv(units, z);
        if (!gp->depthwise && !gp->cpu)
            chunk = teeny__conv_cdiv(chunk, tu->tiles[gp->tile].tk) * tu->tiles[gp->tile].tk;
        gp->r_chunk = (int)chunk;
        gp->z = (int)teeny__conv_cdiv(units, chunk);
        gp->dw_elems = gp->z > 1 && !gp->cpu_launches ? gp->z * dw_numel : 0;
    }
    if (want_db) {
        int64_t zb = teeny__conv_cdiv(target, g->Cout), per;
        if ((st = teeny__conv_db_batches_max(ctx, tu, g, &per)) != TEENY_OK)
            return st;
        if (zb > g->B)
            zb = g->B;
        while (zb > 1 && zb * g->Cout > max_floats)
            zb /= 2;
        if (zb < teeny__conv_cdiv(g->B, per)) /* only where the device limits a work-item's loop trips */
            zb = teeny__conv_cdiv(g->B, per);
        gp->b_chunk = (int)teeny__conv_cdiv(g->B, zb);
        gp->zb = (int)teeny__conv_cdiv(g->B, gp->b_chunk);
        gp->db_elems = gp->zb > 1 ? (int64_t)gp->zb * g->Cout : 0;
        if ((st = teeny__conv_reduce_check(ctx, gp->zb)) != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}

/* conv_dbias_part: per batch of its chunk the batch loop's trip and the
 * strided loop over the plane (OHW / DW_WG + 1), then the tree; the most
 * batches one item may take (TEENY_ERR_UNSUPPORTED where not one fits:
 * planes of more than about 2 million outputs at DW_WG 64 on llvmpipe). */
teeny_status teeny__conv_db_batches_max(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int64_t *per)
{
    int64_t plane = teeny__conv_cdiv((int64_t)g->OH * g->OW, tu->dw_wg) + 2;
    return teeny__loop_split(ctx, "conv_dbias_part", g->B, 1 + teeny__conv_tree_trips(tu->dw_wg, 1), plane, per);
}

/* ---- the launches ---- */

teeny_status teeny__conv_dw_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                cl_mem x, int x_off, cl_mem dy, int dy_off, cl_mem dw, int dw_off, cl_mem scratch)
{
    int Mk = g->Cig * g->KH * g->KW, numel = g->Cout * Mk;
    cl_mem out = gp->z > 1 && !gp->cpu_launches ? scratch : dw;
    int out_off = gp->z > 1 && !gp->cpu_launches ? 0 : dw_off, zstride = gp->z > 1 ? numel : 0;
    char opt[256];
    teeny_status st;

    if (gp->cpu) { /* partials where the device's loop budget asks for them (gp->z > 1) */
        gemm_job j;
        teeny__conv_dw_job_make(g, &j);
        j.src = x;
        j.src_off = x_off;
        j.w = dy;
        j.w_off = dy_off;
        j.out = gp->cpu_launches ? dw : out;
        j.out_off = gp->cpu_launches ? dw_off : out_off;
        j.bias = j.scale = j.shift = x;
        teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
        st = teeny__conv_cpu_gemm_run(ctx, tu, &j, opt, gp->cpu_launches ? 1 : gp->z, gp->r_chunk, zstride);
    } else if (gp->depthwise) {
        teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
        st = teeny__conv_dw_wgrad_run(ctx, tu, g, gp, opt, x, x_off, dy, dy_off, out, out_off, zstride);
    } else {
        teeny__conv_tile_options(ctx, tu, gp->tile, opt, sizeof opt);
        st = teeny__conv_gemm_dw_run(ctx, tu, g, gp, opt, x, x_off, dy, dy_off, out, out_off, zstride);
    }
    if (st == TEENY_OK && gp->z > 1 && !gp->cpu_launches)
        st = teeny__conv_reduce_parts(ctx, tu, opt, scratch, 0, numel, gp->z, dw, dw_off);
    return st;
}

teeny_status teeny__conv_db_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                const teeny_tensor *dy, teeny_tensor *db, cl_mem scratch, int part_off)
{
    int dy_off = teeny__off(dy), db_off = teeny__off(db), OHW = g->OH * g->OW;
    cl_mem out = gp->zb > 1 ? scratch : db->buf;
    int out_off = gp->zb > 1 ? part_off : db_off;
    char opt[256];
    teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
    size_t global[2] = {(size_t)tu->dw_wg * gp->zb, (size_t)g->Cout}, local[2] = {(size_t)tu->dw_wg, 1};
    karg k[] = {KM(dy->buf), KI(dy_off), KM(out), KI(out_off), KI(g->B), KI(g->Cout), KI(OHW), KI(gp->b_chunk)};
    teeny_status st = teeny__run_kernel(ctx, "conv2d", opt, "conv_dbias_part", k, 8, 2, global, local);
    if (st == TEENY_OK && gp->zb > 1)
        st = teeny__conv_reduce_parts(ctx, tu, opt, scratch, part_off, g->Cout, gp->zb, db->buf, db_off);
    return st;
}
