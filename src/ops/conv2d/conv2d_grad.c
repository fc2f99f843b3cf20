/*
 * conv2d_grad.c -- the launches of a conv2d weight gradient and bias
 * gradient as teeny__conv_grad_plan_make (conv2d_plan.c) planned them:
 * the weight gradient by the CPU GEMM, the depthwise kernels or the GEMM
 * conv_gemm_dw, over chunks of B*OH*OW whose partials conv_reduce_parts
 * sums in a fixed order (no atomics: the same bits every run); the bias
 * gradient by conv_dbias_part, chunked over the batch the same way.
 * conv2d_exec.c's backward calls them, and conv2d_wino.c for the 16 GEMMs
 * of the Winograd weight gradient. Also here: the depthwise backward in
 * one pass (dwconv_bwd3: input and weight gradients of a 3x3, stride-1,
 * padding-1 depthwise convolution with x and dy each read once).
 */
#include "conv2d_internal.h"

static teeny_status reduce_parts(teeny_ctx *ctx, const conv_tuning *tu, const char *opt, cl_mem part, int part_off,
                                 int n, int z, cl_mem out, int out_off)
{
    /* a fixed local size: PoCL compiles a kernel once per local size */
    size_t global = (size_t)n, local = (size_t)tu->dw_wg;
    karg k[] = {KM(part), KI(part_off), KI(n), KI(z), KM(out), KI(out_off)};
    return run_kernel(ctx, opt, "conv_reduce_parts", k, 6, 1, &global, &local);
}

teeny_status teeny__conv_dw_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                cl_mem x, int x_off, cl_mem dy, int dy_off, cl_mem dw, int dw_off, cl_mem scratch)
{
    int R = g->B * g->OH * g->OW, Mk = g->Cig * g->KH * g->KW, numel = g->Cout * Mk;
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
    } else if (gp->depthwise && conv_cpu_variant(ctx)) {
        /* one item per (tap, co), straight into dw; per chunk of rows where
         * the device's loop budget asks for it (gp->z > 1) */
        teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
        int KHW = g->KH * g->KW;
        cl_int16 geo = dw_geometry(g);
        size_t global[3] = {(size_t)KHW, (size_t)g->Cout, (size_t)gp->z};
        size_t local[3] = {1, teeny__cpu_local(ctx, (size_t)KHW * (size_t)g->Cout), 1};
        karg k[] = {KM(x),       KI(x_off), KM(dy), KI(dy_off), KM(out), KI(out_off), KG(geo), KI(gp->r_chunk),
                    KI(zstride)};
        st = run_kernel(ctx, opt, "dwconv_dw_cpu", k, (int)(sizeof k / sizeof k[0]), 3, global, local);
    } else if (gp->depthwise) {
        int64_t budget;
        if ((st = teeny__loop_budget(ctx, &budget)) != TEENY_OK)
            return st;
        int rows3 = teeny__conv_dw_rows3_fit(tu, g, teeny__conv_dw_grad_cols(ctx, g), gp->r_chunk, budget);
        teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
        cl_int16 geo = dw_geometry(g);
        size_t global[2] = {(size_t)tu->dw_wg * gp->z, (size_t)g->Cout}, local[2] = {(size_t)tu->dw_wg, 1};
        karg k[] = {KM(x),       KI(x_off), KM(dy), KI(dy_off),      KM(out),  KI(out_off),
                    KI(zstride), KG(geo),   KI(R),  KI(gp->r_chunk), KI(rows3)};
        st = run_kernel(ctx, opt, "dwconv_dw", k, (int)(sizeof k / sizeof k[0]), 2, global, local);
    } else {
        const gemm_tile *t = &tu->tiles[gp->tile];
        teeny__conv_tile_options(ctx, tu, gp->tile, opt, sizeof opt);
        int vec_out = Mk % 4 == 0 && out_off % 4 == 0;
        size_t wg = (size_t)gemm_wg(t);
        size_t global[3] = {(size_t)cdiv(Mk, t->tm) * wg, (size_t)(cdiv(g->Cog, t->tn) * g->G), (size_t)gp->z};
        size_t local[3] = {wg, 1, 1};
        karg k[] = {KM(x),      KI(x_off),  KM(dy),      KI(dy_off), KM(out),   KI(out_off), KI(zstride),
                    KI(Mk),     KI(g->Cog), KI(g->Cig),  KI(g->KH),  KI(g->KW), KI(g->Cin),  KI(g->H),
                    KI(g->W),   KI(g->Cout), KI(g->OH),  KI(g->OW),  KI(g->sh), KI(g->sw),   KI(g->ph),
                    KI(g->pw),  KI(g->dh),  KI(g->dw),   KI(R),      KI(gp->r_chunk), KI(vec_out)};
        st = run_kernel(ctx, opt, "conv_gemm_dw", k, (int)(sizeof k / sizeof k[0]), 3, global, local);
    }
    if (st == TEENY_OK && gp->z > 1 && !gp->cpu_launches)
        st = reduce_parts(ctx, tu, opt, scratch, 0, numel, gp->z, dw, dw_off);
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
    teeny_status st = run_kernel(ctx, opt, "conv_dbias_part", k, 8, 2, global, local);
    if (st == TEENY_OK && gp->zb > 1)
        st = reduce_parts(ctx, tu, opt, scratch, part_off, g->Cout, gp->zb, db->buf, db_off);
    return st;
}

/* ---- the depthwise backward in one pass ---- */

/* dwconv_bwd3's work-groups per channel (its partials), 0 where it does
 * not apply (or the test hook CONV_DW_BWD is -1): the CPU variant or a device where its items, partials or
 * their sum do not fit (*st TEENY_OK), or a failed build or query (*st). */
int teeny__conv_dw_bwd3_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, teeny_status *st)
{
    int64_t budget, wg = conv_dwb_wg(tu), units = (int64_t)g->B * cdiv(g->H, TEENY__DWB_ROWS) * cdiv(g->W, 4);
    int64_t z = cdiv(units, wg);
    int64_t max_floats = (int64_t)(ctx->info.max_alloc_bytes / sizeof(float)) / 2;
    *st = TEENY_OK;
    if (ctx->hooks.conv_dw_bwd < 0 || conv_cpu_variant(ctx) || !teeny__conv_use_depthwise(ctx, tu, g) || g->Cog != 1 ||
        g->KH != 3 || g->KW != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || g->ph != 1 ||
        g->pw != 1 || g->OH != g->H || g->OW != g->W || z * wg > INT32_MAX ||
        (int64_t)g->B * g->Cin * g->H * g->W > INT32_MAX || z * g->Cout * 9 > max_floats ||
        (size_t)9 * wg * sizeof(float) > teeny__conv_local_budget(ctx))
        return 0;
    if ((*st = teeny__loop_budget(ctx, &budget)) != TEENY_OK ||
        teeny__conv_dw_bwd3_trips(tu) > budget || (z > 1 && z + 1 > budget))
        return 0;
    return teeny__conv_dw_fits(ctx, tu, "dwconv_bwd3", (size_t)wg, 0, st) ? (int)z : 0;
}

teeny_status teeny__conv_dw_bwd3(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int z,
                                 const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *dy,
                                 teeny_tensor *dx, teeny_tensor *dw, cl_mem scratch)
{
    cl_mem out = z > 1 ? scratch : dw->buf;
    int x_off = teeny__off(x), dy_off = teeny__off(dy), w_off = teeny__off(w), dx_off = teeny__off(dx);
    int out_off = z > 1 ? 0 : teeny__off(dw), zstride = g->Cout * 9;
    char opt[256];
    teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
    size_t global[2] = {(size_t)conv_dwb_wg(tu) * z, (size_t)g->Cout}, local[2] = {(size_t)conv_dwb_wg(tu), 1};
    karg k[] = {KM(x->buf), KI(x_off),   KM(dy->buf),  KI(dy_off), KM(w->buf), KI(w_off),
                KM(dx->buf), KI(dx_off), KM(out),      KI(out_off), KI(zstride), KI(g->B),
                KI(g->Cout), KI(g->H),   KI(g->W)};
    teeny_status st = run_kernel(ctx, opt, "dwconv_bwd3", k, (int)(sizeof k / sizeof k[0]), 2, global, local);
    if (st == TEENY_OK && z > 1)
        st = reduce_parts(ctx, tu, opt, scratch, 0, zstride, z, dw->buf, teeny__off(dw));
    return st;
}
