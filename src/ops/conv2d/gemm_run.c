/*
 * gemm_run.c -- the GEMM route's runs, above gemm.c's tiles: the forward's
 * job (teeny__conv_gemm_forward), the one dispatch of a forward or
 * input-gradient GEMM (teeny__conv_gemm_run: the CPU GEMMs on a CPU
 * tuning, else gemm.c's tiles), every call's loop check, and the CPU
 * tunings' GEMMs (cl/conv2d_gemm_cpu.cl): conv_gemm_cpu, an implicit GEMM
 * of cpu_rows output rows by 16 * cpu_nv channels an item from B packed
 * per column tile (conv_pack_b), and conv_gemm_cpu_px for 1x1 stride-1
 * unpadded convolutions, output channels by 16 * cpu_nv pixels an item
 * from weights packed per channel tile (conv_pack_w); no local memory, no
 * barrier. weight_grad.c sends its weight gradients to conv_gemm_cpu, and
 * the linear family its matrix products (ops.h's teeny__cpu_gemm). Frozen
 * weights (a plan's constants) are packed by setup launches. k is summed
 * in order from 0: the bits do not depend on the kernel, the split or the
 * device's loop budget (launches over ranges of k, out carrying the sums).
 */
#include "conv2d_internal.h"

/* conv_gemm_cpu: per unit k = (tap, channel) the channel loop's trip, the
 * B loads (CPU_NV + 1) and the rows (CPU_RM + 1, each CPU_NV + 1); per tap
 * its loop trip, the row offsets (CPU_RM + 1) and the channel loop's exit,
 * shared by its Kc units; fixed: the row setup, the accumulators, the load
 * and the store (CPU_RM + 1, each CPU_NV + 1 and CPU_NC + 1), the epilogue
 * factors, the tap loop's exit and the partial taps at a range's ends. */
static void cpu_gemm_trips(const conv_tuning *tu, int Kc, int64_t *fixed, int64_t *per_unit)
{
    int64_t rm = tu->cpu_rows, nv = tu->cpu_nv, nc = 16 * nv;
    int64_t unit = 1 + (nv + 1) + (rm + 1) + rm * (nv + 1), tap = 1 + (rm + 1) + 1;
    *fixed = (rm + 1) + (rm * nv + 1) + 2 * ((rm + 1) + rm * (nv + 1 + nc + 1)) + (nc + 1) + 1 + 2 * tap;
    *per_unit = unit + teeny__conv_cdiv(tap, Kc > 0 ? Kc : 1);
}

teeny_status teeny__conv_cpu_gemm_chunk(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j, int64_t *chunk)
{
    int64_t fixed, per_unit;
    cpu_gemm_trips(tu, j->Kc, &fixed, &per_unit);
    return teeny__loop_split(ctx, "conv_gemm_cpu", (int64_t)j->Kh * j->Kw * j->Kc, fixed, per_unit, chunk);
}

/* The packed B operand of conv_gemm_cpu in floats (0: beyond int32). */
static int64_t cpu_packed(const conv_tuning *tu, const gemm_job *j)
{
    int64_t n = (int64_t)j->G * j->Kh * j->Kw * j->Kc * teeny__conv_cdiv(j->N, 16 * tu->cpu_nv) * 16 * tu->cpu_nv;
    return n > INT32_MAX / 2 ? 0 : n;
}

/* conv_gemm_cpu: pack B into a workspace, then the GEMM. A frozen w (a
 * plan's constant) is packed by a setup launch: once at compile, not at
 * every forward (the recorder's workspace is the plan's own). */
teeny_status teeny__conv_cpu_gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j, const char *opt,
                                      int z, int64_t chunk, int zstride)
{
    int nc = 16 * tu->cpu_nv, Np = (int)teeny__conv_cdiv(j->N, nc) * nc, total = (int)cpu_packed(tu, j), zero = 0;
    cl_mem bp = NULL;
    teeny_status st = TEENY_OK;
    if (total > 0) {
        if ((st = teeny__scratch(ctx, (size_t)total * sizeof(float), &bp)) != TEENY_OK)
            return st;
        size_t pg[2] = {(size_t)teeny__conv_cdiv(j->Kc, 16) * 16, (size_t)j->G * j->Kh * j->Kw}, pl[2] = {16, 1};
        karg k[] = {KM(j->w),         KI(j->w_off),     KI(j->w_gstride), KI(j->w_nstride), KI(j->w_cstride),
                    KI(j->w_hstride), KI(j->w_wstride), KI(j->N),         KI(Np),           KI(j->Kc),
                    KI(j->Kh),        KI(j->Kw),        KM(bp),           KI(zero)};
        teeny__record_setup(ctx, j->w_frozen);
        st = teeny__run_kernel(ctx, "conv2d", opt, "conv_pack_b", k, (int)(sizeof k / sizeof k[0]), 2, pg, pl);
        teeny__record_setup(ctx, 0);
        if (st != TEENY_OK) {
            teeny__scratch_give(ctx, bp);
            return st;
        }
    } else {
        bp = j->w; /* Kc == 0: no taps, B is never read */
    }
    /* a CPU runs a work-group on one core: few items (a weight gradient
     * with few rows) get smaller groups, so every core takes some */
    size_t row_items = (size_t)teeny__conv_cdiv(j->M, tu->cpu_rows), col_items = (size_t)(Np / nc) * j->G;
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
        st = teeny__run_kernel(ctx, "conv2d", opt, "conv_gemm_cpu", a, (int)(sizeof a / sizeof a[0]), 3, global,
                               local);
    }
    if (total > 0)
        teeny__scratch_give(ctx, bp); /* enqueued: the next GEMM of this op may take it */
    return st;
}

int teeny__conv_use_cpu_gemm(const conv_tuning *tu, const gemm_job *j)
{
    return tu->cpu_rows > 0 && (j->Kc == 0 || cpu_packed(tu, j) > 0);
}

/* ---- the CPU GEMM for the linear family (ops.h) ----
 * The matrix product as a 1x1 convolution of one group over a 1 x 1
 * image: rows m are "batches" (src_bstride a_sm), k its channels
 * (src_cstride a_sk), C's rows at out_bstride c_sm. */
static gemm_job cpu_matmul_job(const teeny__cpu_gemm_args *g)
{
    return (gemm_job){.src = g->a, .w = g->b, .out = g->c, .src_off = g->a_off, .w_off = g->b_off,
                      .out_off = g->c_off, .M = g->M, .N = g->N, .G = 1, .P = 1, .Q = 1, .Kc = g->K, .Kh = 1,
                      .Kw = 1, .src_bstride = g->a_sm, .src_cstride = g->a_sk, .Hs = 1, .Ws = 1,
                      .w_nstride = g->b_sn, .w_cstride = g->b_sk, .out_bstride = g->c_sm, .out_nstride = 1,
                      .bias = g->bias ? g->bias : g->a, .scale = g->a, .shift = g->a, .bias_off = g->bias_off,
                      .epi = g->bias ? 1 : 0, .act = TEENY_ACT_NONE, .w_frozen = g->b_frozen};
}

teeny_status teeny__cpu_gemm_takes(teeny_ctx *ctx, const teeny__cpu_gemm_args *g, int *takes)
{
    const conv_tuning *tu = &ctx->tune.conv;
    gemm_job j = cpu_matmul_job(g);
    int64_t fixed, per, budget;
    *takes = 0;
    if (g->K <= 0 || !teeny__conv_use_cpu_gemm(tu, &j))
        return TEENY_OK;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    cpu_gemm_trips(tu, 1, &fixed, &per);
    *takes = st == TEENY_OK && fixed + per <= budget &&
             teeny__conv_cdiv(g->N, 16 * tu->cpu_nv) * 16 * tu->cpu_nv + 2 <= budget; /* conv_pack_b's row */
    return st;
}

teeny_status teeny__cpu_gemm(teeny_ctx *ctx, const teeny__cpu_gemm_args *g)
{
    gemm_job j = cpu_matmul_job(g);
    return teeny__conv_gemm_run(ctx, &ctx->tune.conv, &j);
}

/* ---- 1x1 convolutions along the pixels (conv_gemm_cpu_px) ---- */

/* A 1x1, stride-1, unpadded GEMM over whole planes (pixels contiguous in
 * src and out, M images of P*Q pixels): the kernel's geometry. Planes of
 * fewer than PX_MIN_PIXELS pixels go to conv_gemm_cpu (channels along the
 * vector): a strip of 16 or 32 lanes with one pixel in it, as after a
 * global pooling (squeeze-and-excitation's convolutions), gathers its
 * lanes one by one for each k and wastes the rest (MobileNetV3-Small's
 * 1x1 convolutions by both kernels: 2.44 -> 1.98 ms a forward on PoCL
 * 3.1, its 18 after poolings ~0.17 ms of that). */
#define PX_MIN_PIXELS 16

static int px_geometry(const gemm_job *j)
{
    return j->phases <= 1 && j->Kh == 1 && j->Kw == 1 && j->a_h == 1 && j->a_w == 1 && j->c_h == 0 && j->c_w == 0 &&
           j->Hs == j->P && j->Ws == j->Q && j->out_wstride == 1 && j->out_hstride == j->Q && j->Kc > 0 &&
           (int64_t)j->P * j->Q >= PX_MIN_PIXELS && j->M % (j->P * j->Q) == 0;
}

/* Its loop trips, as cpu_gemm_trips: per k the loop's trip, the vector
 * loads (CPU_NV + 1), the last pixels' masked loads (CPU_NC + 1) and the
 * channels (CPU_RM + 1, each CPU_NV + 1); fixed: the accumulators, the
 * load of partial sums and the store (CPU_RM + 1, each CPU_NC + 1 and
 * CPU_NV + 1) and the k loop's exit. */
static void px_trips(const conv_tuning *tu, int64_t *fixed, int64_t *per_unit)
{
    int64_t rm = tu->cpu_rows, nv = tu->cpu_nv, nc = 16 * nv;
    *per_unit = 1 + (nv + 1) + (nc + 1) + (rm + 1) + rm * (nv + 1);
    *fixed = (rm * nv + 1) + 2 * (rm + 1) * (nc + 1 + nv + 1) + 1;
}

/* Whether conv_gemm_cpu_px takes job j (the test hook CONV_FLAGS bit 32:
 * never), its packed weights within int32 and one k and conv_pack_w's
 * row within the loop budget; *per: its k a launch. */
static teeny_status px_takes(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j, int *takes, int64_t *per)
{
    int64_t fixed, per_unit, budget, Np = teeny__conv_cdiv(j->N, tu->cpu_rows) * tu->cpu_rows;
    *takes = 0;
    if ((ctx->hooks.conv_flags & 32) || !px_geometry(j) || (int64_t)j->G * Np * j->Kc > INT32_MAX / 2)
        return TEENY_OK;
    px_trips(tu, &fixed, &per_unit);
    teeny_status st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK || fixed + per_unit > budget || Np + 2 > budget)
        return st;
    *takes = 1;
    return teeny__loop_split(ctx, "conv_gemm_cpu_px", j->Kc, fixed, per_unit, per);
}

/* conv_gemm_cpu_px: pack the weights (a setup launch where they are
 * frozen, as conv_gemm_cpu's), then k in ranges of per, in order. */
static teeny_status px_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j, const char *opt, int64_t per)
{
    int rm = tu->cpu_rows, nc = 16 * tu->cpu_nv, Np = (int)teeny__conv_cdiv(j->N, rm) * rm, PQ = j->P * j->Q, zero = 0;
    cl_mem wp = NULL;
    teeny_status st = teeny__scratch(ctx, (size_t)j->G * (size_t)Np * (size_t)j->Kc * sizeof(float), &wp);
    if (st != TEENY_OK)
        return st;
    size_t pg[2] = {(size_t)teeny__conv_cdiv(j->Kc, 16) * 16, (size_t)j->G}, pl[2] = {16, 1};
    karg k[] = {KM(j->w), KI(j->w_off), KI(j->w_gstride), KI(j->w_nstride), KI(j->w_cstride),
                KI(j->N), KI(Np),       KI(j->Kc),        KM(wp),           KI(zero)};
    teeny__record_setup(ctx, j->w_frozen);
    st = teeny__run_kernel(ctx, "conv2d", opt, "conv_pack_w", k, (int)(sizeof k / sizeof k[0]), 2, pg, pl);
    teeny__record_setup(ctx, 0);
    size_t items = (size_t)teeny__conv_cdiv(PQ, nc) * (size_t)(Np / rm); /* a group's strips x channel tiles */
    size_t wg = teeny__cpu_local(ctx, items * (size_t)j->G * (size_t)(j->M / PQ));
    if (wg > (size_t)tu->cpu_wg)
        wg = (size_t)tu->cpu_wg;
    size_t global[3] = {(items + wg - 1) / wg * wg, (size_t)j->G, (size_t)(j->M / PQ)}, local[3] = {wg, 1, 1};
    int k_begin = 0, k_end = 0, seg = 0, tiles_first = j->Kc >= j->N; /* the kernel's comment says why */
    karg a[] = {KM(j->src),      KI(j->src_off),     KM(wp),           KI(zero),          KI(Np),
                KM(j->out),      KI(j->out_off),     KI(PQ),           KI(j->N),          KI(j->Kc),
                KI(j->src_bstride), KI(j->src_gstride), KI(j->src_cstride), KI(j->out_bstride), KI(j->out_nstride),
                KM(j->bias),     KI(j->bias_off),    KM(j->scale),     KI(j->scale_off),  KM(j->shift),
                KI(j->shift_off), KI(j->epi),        KI(j->act),       KI(k_begin),       KI(k_end),
                KI(seg),         KI(tiles_first)};
    for (int64_t k0 = 0; st == TEENY_OK && k0 < j->Kc; k0 += per) {
        k_begin = (int)k0;
        k_end = (int)(k0 + per < j->Kc ? k0 + per : j->Kc);
        seg = (k0 == 0 ? CONV_SEG_FIRST : 0) | (k_end == j->Kc ? CONV_SEG_LAST : 0);
        st = teeny__run_kernel(ctx, "conv2d", opt, "conv_gemm_cpu_px", a, (int)(sizeof a / sizeof a[0]), 3, global,
                               local);
    }
    teeny__scratch_give(ctx, wp);
    return st;
}

/* ---- every call's minimum ----
 * One k unit of each GEMM this device may take (its smallest tile, the
 * CPU GEMM of its tuning), and conv_pack_b's row of Np columns (Np + 1
 * trips, counted as Np + 2) for each n_pack[i] columns: checked before a
 * call enqueues anything, so that no later split can fail. */
teeny_status teeny__conv_loops_check(teeny_ctx *ctx, const conv_tuning *tu, const int *n_pack, int n)
{
    int64_t fixed, per;
    teeny_status st = TEENY_OK;
    if (tu->cpu_rows > 0) {
        cpu_gemm_trips(tu, 1, &fixed, &per);
        st = teeny__loop_check(ctx, "conv_gemm_cpu", fixed + per);
    }
    for (int i = 0; i < n && st == TEENY_OK && tu->cpu_rows > 0; i++)
        st = teeny__loop_check(ctx, "conv_pack_b", teeny__conv_cdiv(n_pack[i], 16 * tu->cpu_nv) * 16 * tu->cpu_nv + 2);
    return st == TEENY_OK ? teeny__conv_tile_loops_check(ctx, tu) : st;
}

/* ---- the forward and input-gradient GEMMs' runs ----
 * On a CPU tuning conv_gemm_cpu_px where it takes the job, else
 * conv_gemm_cpu, k in launches as the loop budget allows; elsewhere the
 * tiles (gemm.c). */
teeny_status teeny__conv_gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j)
{
    char opt[256];
    int px;
    int64_t per;
    teeny_status st;
    if (!teeny__conv_use_cpu_gemm(tu, j))
        return teeny__conv_tile_gemm_run(ctx, tu, j);
    teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
    if ((st = px_takes(ctx, tu, j, &px, &per)) != TEENY_OK)
        return st;
    if (px)
        return px_run(ctx, tu, j, opt, per);
    if ((st = teeny__conv_cpu_gemm_chunk(ctx, tu, j, &per)) != TEENY_OK)
        return st;
    return teeny__conv_cpu_gemm_run(ctx, tu, j, opt, 1, per, 0);
}

/* ---- the route: the forward (the input gradient's phases: dx_direct.c) ---- */

/* The forward as one implicit GEMM: M = B*OH*OW rows, N = Cog columns
 * per group, k = (channel, kh, kw); always takes the pass. */
teeny_status teeny__conv_gemm_forward(teeny_ctx *ctx, const conv_pass *p, int *taken)
{
    const conv_geom g = p->g;
    const dw_epilogue *e = &p->e;
    int x_off = teeny__off(p->x), y_off = teeny__off(p->out);
    gemm_job j = {0};
    *taken = 1;
    j.src = p->x->buf;
    j.src_off = x_off;
    j.w = p->w->buf;
    j.w_off = teeny__off(p->w);
    j.out = p->out->buf;
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
    j.bias = e->bias;
    j.scale = e->scale;
    j.shift = e->shift;
    j.bias_off = e->bias_off;
    j.scale_off = e->scale_off;
    j.shift_off = e->shift_off;
    j.epi = e->epi;
    j.act = e->act;
    j.vec_out = (g.OH * g.OW) % 4 == 0 && y_off % 4 == 0;
    j.plain = teeny__conv_plain(&g) && (g.H * g.W) % 4 == 0 && x_off % 4 == 0;
    j.w_frozen = p->w_frozen;
    return teeny__conv_gemm_run(ctx, p->tu, &j);
}
