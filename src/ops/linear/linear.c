/*
 * linear.c -- the fully connected layer, PyTorch layout: x [N, in],
 * weight [out, in], bias [out], y [N, out] = x w^T + bias.
 *
 * Kernels: cl/linear.cl. Every product is one strided GEMM: forward
 * y = x w^T, backward dx = dy w and dw = dy^T x (its reduction over N
 * runs in one work-item, in order: no atomics), by one of two routes
 * (gemm_route): the tiled lin_gemm, or for small outputs in fp32
 * lin_gemm_small, one item per output with its k loop in registers (the
 * rule and its reasons at small_route). db, the column sums of dy, is two
 * fixed-order passes over row chunks with the partials in the context's
 * workspace. Where a device limits a work-item's loop trips, a GEMM's k
 * loop runs in launches over segments of k (C carrying the sums: the bits
 * of one launch) and db takes more runs of rows.
 * Tunable: the GEMM's work-group shape, from the device's work-group size
 * (ctx->work_group_size), and its register tile and k depth, from the
 * device profile (ctx->tune, src/tune/profiles.def) within the local
 * memory, passed as -D options (see gemm_plan). With tf32 active
 * (teeny_ctx_tf32_active: teeny_ctx_set_tf32 asked and the probe ran
 * tf32 mma) and a profile with a linear_tf32 tuning, every GEMM here (the
 * layer's three and MatMul's, matmul.c) takes the tensor-core tile, built
 * with -DTEENY_TF32=1: a program of its own, and the column sums with it;
 * the small route is then never taken (tf32 mode keeps its promise of
 * tf32 products, include/teenycl.h).
 *
 * Op-table entry (slots TEENY__LINEAR_*, ops.h): one input x [N, in]
 * (rank 2); attrs.linear = {out_features, has_bias}; params weight
 * [out, in] and, with has_bias, bias [out] (both TEENY__INIT_FAN_IN,
 * fan_in = in; without it the bias slot and its gradient are NULL).
 */
#include <stdio.h>

#include "linear_internal.h"

/* Work-group (lx, ly) from the device's work-group size: a square (or 2:1)
 * power-of-two shape, the profile's register tile (its tf32 one with
 * tf32), and its k depth halved until the two panels fit in half the
 * local memory. A shape the tf32 tile cannot take (warps of 8 x 4 items,
 * rm % 4, tk % 8) gets the fp32 plan. */
static void gemm_plan_make(const teeny_ctx *ctx, int wg, int tf32, gemm_plan *g)
{
    const teeny__linear_tune *tune = tf32 ? &ctx->tune.profile->linear_tf32 : &ctx->tune.profile->linear;
    int lx = 1, ly = 1, pad = tf32 ? 8 : 0; /* the tf32 tile's padded local rows */
    uint64_t local = ctx->info.local_mem_bytes ? ctx->info.local_mem_bytes : 16384;
    while (lx * ly * 2 <= wg) {
        if (lx <= ly)
            lx *= 2;
        else
            ly *= 2;
    }
    g->lx = lx;
    g->ly = ly;
    g->rm = tune->rm;
    g->rn = tune->rn;
    g->tk = tune->tk;
    while (g->tk > 1 && (uint64_t)g->tk * (uint64_t)(ly * g->rm + lx * g->rn + 2 * pad) * 4 > local / 2)
        g->tk /= 2;
    if (tf32 && (lx % 8 || ly % 4 || g->rm % 4 || g->tk % 8)) {
        gemm_plan_make(ctx, wg, 0, g);
        return;
    }
    g->tf32 = tf32;
    snprintf(g->opt, sizeof g->opt, "-DLIN_LX=%d -DLIN_LY=%d -DLIN_RM=%d -DLIN_RN=%d -DLIN_TK=%d%s%s", g->lx,
             g->ly, g->rm, g->rn, g->tk, tf32 ? " -DTEENY_TF32=1" : "",
             tf32 && ctx->hooks.linear_tf32_emulate ? " -DTEENY_TF32_EMULATE=1" : "");
}

/* The plan for the device's work-group size, or for the largest power of
 * two below it whose LIN_LX * LIN_LY work-group and panels the built
 * lin_gemm takes (down to 4 x 4); checked before anything is enqueued.
 * tf32 where teeny_ctx_tf32_active says so (the one place that decides;
 * the test hook LINEAR_TF32_EMULATE's emulation needs only teeny_ctx_set_tf32) and the
 * profile has a tf32 tuning. */
teeny_status teeny__lin_plan_fit(teeny_ctx *ctx, gemm_plan *g)
{
    int first = ctx->work_group_size, tf32 = 0;
    teeny_status st = teeny_ctx_tf32_active(ctx, &tf32);
    if (st != TEENY_OK)
        return st;
    tf32 = (tf32 || (ctx->hooks.linear_tf32_emulate && ctx->tf32)) && ctx->tune.profile->linear_tf32.rm > 0;
    for (int wg = first;; wg /= 2) {
        gemm_plan_make(ctx, wg, tf32, g);
        st = teeny__kernel_fit(ctx, "linear", g->opt, "lin_gemm", (size_t)g->lx * (size_t)g->ly, 0, NULL);
        if (st != TEENY_ERR_UNSUPPORTED || wg / 2 < TEENY__WG_FLOOR) {
            if (st == TEENY_OK && wg != first)
                teeny__clear_error(ctx);
            return st;
        }
    }
}

/* lin_gemm's loop trips per work-item, every loop counted as not unrolled
 * and one more trip per entry (cl/linear.cl): per k tile of LIN_TK, the
 * tile loop's trip, the two staging loops (TM*TK/NT and TN*TK/NT, + 1
 * each), the kk loop (TK + 1) and per kk the register loads (RM + 1,
 * RN + 1) and the micro-tile (RM + 1 + RM*(RN + 1)); outside it the
 * micro-tile's start, load and store (3 * (RM + 1 + RM*(RN + 1))) and the
 * tile loop's exit. The tf32 tile runs fewer (kk in steps of 8, RM / 4
 * fragment rows, one loop over the RM * RN accumulators to load and to
 * store): the count bounds it too. */
int64_t teeny__lin_tile_trips(const gemm_plan *pl)
{
    int64_t nt = (int64_t)pl->lx * pl->ly, tm = (int64_t)pl->ly * pl->rm, tn = (int64_t)pl->lx * pl->rn;
    int64_t micro = pl->rm + 1 + (int64_t)pl->rm * (pl->rn + 1);
    return 1 + ((tm * pl->tk + nt - 1) / nt + 1) + ((tn * pl->tk + nt - 1) / nt + 1) + (pl->tk + 1) +
           (int64_t)pl->tk * (pl->rm + 1 + pl->rn + 1 + micro);
}

int64_t teeny__lin_tile_fixed(const gemm_plan *pl)
{
    return 3 * (pl->rm + 1 + (int64_t)pl->rm * (pl->rn + 1)) + 1;
}

/* One strided GEMM launch: C [M, N] (row stride c_sm) = A B (+ bias). */
typedef struct {
    int M, N, K;
    const teeny_tensor *a;
    int a_sm, a_sk;
    const teeny_tensor *b;
    int b_sk, b_sn;
    const teeny_tensor *bias; /* NULL: none */
    teeny_tensor *c;
    int c_sm;
    int b_frozen; /* b a constant of the recording (a frozen plan's weight) */
} gemm_args;

#define LIN_SK 8           /* lin_gemm_small's k per step, as cl/linear.cl */
#define LIN_SMALL_WG 64    /* its work-group: two warps, so that a few outputs spread over many units */
#define LIN_SMALL_PER_CU 128
#define LIN_SMALL_MAX_K 4096

/* The small route where M x N is at most LIN_SMALL_PER_CU outputs per
 * compute unit and K at most LIN_SMALL_MAX_K, in fp32 only. Why: lin_gemm
 * gives a work-group LIN_TM x LIN_TN outputs (64 x 64 on GPUs), so such
 * an output fills at most 1/32 of the units (the example's classifier at
 * batch 128: 1-4 work-groups of the H200's 132) and its time is the
 * serial chain of K / LIN_TK panels, each a global load, two barriers and
 * LIN_TK steps: on the H200 0.019 ms at K = 128 (8 panels), 0.008 at
 * K = 10 (one), ~1.6 us a panel over ~6 us. lin_gemm_small spreads the
 * same outputs over M N / 64 work-groups (one output an item, at most ~4
 * warps a unit: none saturated) and its time is the item's chain of K
 * multiply-adds, the loads of each step of LIN_SK issued ahead of its
 * fmas: ~8 x 4 cycles of fma plus one load latency a step (L1 ~40
 * cycles; L2 ~250 where each k reads a new line, as dw's x does), so
 * K = 128 is ~1-3 us over the launch, K = 10 one step. Above the output
 * bound its loads (two floats a multiply-add, a line a lane where B is
 * strided along n, as y's w is) would outrun the caches' throughput where
 * lin_gemm reuses each loaded float LIN_RM or LIN_RN times; above
 * LIN_SMALL_MAX_K both routes are serial chains over k on few units and
 * the small one, streaming from L2 or memory a step at a time, is no
 * longer clearly ahead of a panel's 16 k (unmeasured: the tile keeps
 * them). On CPUs the tile's place is the CPU GEMM's (cpu_route), which
 * also takes few rows of many outputs: there one item an output waits on
 * one scalar sum's chain (a classifier's 1 x 1280 x 1000: 0.91 ms by this
 * route, 0.25 by the CPU GEMM on PoCL 3.1, 2026-12-07; profiles.def once
 * sent up to 16 rows here, from when the tile took them, 5-20x slower at
 * M = 1). tf32 mode keeps lin_gemm's tf32 tile.
 * The test hook LINEAR_SMALL forces the small route wherever fp32 (1) or
 * never (-1). */
static int small_route(const teeny_ctx *ctx, const gemm_plan *pl, int M, int N, int K)
{
    int64_t cus = ctx->info.compute_units ? ctx->info.compute_units : 1;
    if (pl->tf32 || ctx->hooks.linear_small < 0)
        return 0;
    if (ctx->hooks.linear_small > 0)
        return 1;
    return (int64_t)M * N <= LIN_SMALL_PER_CU * cus && K <= LIN_SMALL_MAX_K;
}

/* How one GEMM runs: its kernel and grid, and the loop trips of an item
 * outside its k loop (fixed) and per unit of k (per_unit; units of
 * LIN_TK for lin_gemm, LIN_SK for lin_gemm_small: each unrolled step's
 * trip and its two 8-trip loops counted as not unrolled, + 1 each;
 * outside, the remainder loop's LIN_SK trips and the exit). */
typedef struct {
    const char *name;
    int unit;
    int64_t fixed, per_unit;
    size_t global[2], local[2];
    cl_uint dims;
} gemm_route;

/* The small route's work-group: LIN_SMALL_WG, or halved until the built
 * kernel takes it (checked, never recorded); lin_gemm where none does. */
static teeny_status gemm_route_make(teeny_ctx *ctx, const gemm_args *ga, gemm_plan *pl, gemm_route *r)
{
    teeny_status st = teeny__lin_plan_fit(ctx, pl);
    for (size_t wg = LIN_SMALL_WG; st == TEENY_OK && wg > 0 && small_route(ctx, pl, ga->M, ga->N, ga->K); wg /= 2) {
        st = teeny__kernel_fit(ctx, "linear", pl->opt, "lin_gemm_small", wg, 0, NULL);
        if (st == TEENY_ERR_UNSUPPORTED) {
            teeny__clear_error(ctx);
            st = TEENY_OK;
            continue;
        }
        *r = (gemm_route){.name = "lin_gemm_small", .unit = LIN_SK, .fixed = LIN_SK + 2, .per_unit = 2 * LIN_SK + 3,
                          .dims = 1, .local = {wg},
                          .global = {((size_t)ga->M * (size_t)ga->N + wg - 1) / wg * wg}};
        return st;
    }
    if (st != TEENY_OK)
        return st;
    size_t tm = (size_t)pl->ly * pl->rm, tn = (size_t)pl->lx * pl->rn;
    *r = (gemm_route){.name = "lin_gemm", .unit = pl->tk, .fixed = teeny__lin_tile_fixed(pl),
                      .per_unit = teeny__lin_tile_trips(pl), .dims = 2,
                      .global = {((size_t)ga->N + tn - 1) / tn * pl->lx, ((size_t)ga->M + tm - 1) / tm * pl->ly},
                      .local = {(size_t)pl->lx, (size_t)pl->ly}};
    return TEENY_OK;
}

teeny_status teeny__linear_route(teeny_ctx *ctx, int M, int N, int K, int *small)
{
    gemm_plan pl;
    gemm_route r;
    gemm_args ga = {.M = M, .N = N, .K = K};
    teeny_status st = gemm_route_make(ctx, &ga, &pl, &r);
    *small = st == TEENY_OK && r.dims == 1;
    return st;
}

/* Where the tile would take the GEMM on a CPU tuning, conv2d's CPU GEMM
 * (ops.h) takes it instead (*takes; the test hook LINEAR_CPU_GEMM -1:
 * never): a register tile of 4-6 rows by 16 columns an item from packed B
 * panels, no local memory or barrier, k summed in the tile's order (the
 * same bits). Imported ConvNeXt-T's 36 linears took 2.46 s a forward by
 * the tile on PoCL 3.1, ~0.13 s by this route (2026-12-07). */
static teeny_status cpu_route(teeny_ctx *ctx, const gemm_args *ga, const gemm_route *r, teeny__cpu_gemm_args *c,
                              int *takes)
{
    *c = (teeny__cpu_gemm_args){.M = ga->M, .N = ga->N, .K = ga->K, .a = ga->a->buf, .b = ga->b->buf,
                                .bias = ga->bias ? ga->bias->buf : NULL, .c = ga->c->buf, .a_off = teeny__off(ga->a),
                                .a_sm = ga->a_sm, .a_sk = ga->a_sk, .b_off = teeny__off(ga->b), .b_sk = ga->b_sk,
                                .b_sn = ga->b_sn, .bias_off = ga->bias ? teeny__off(ga->bias) : 0,
                                .c_off = teeny__off(ga->c), .c_sm = ga->c_sm, .b_frozen = ga->b_frozen};
    *takes = 0;
    if (r->dims != 2 || ctx->hooks.linear_cpu_gemm < 0)
        return TEENY_OK;
    return teeny__cpu_gemm_takes(ctx, c, takes);
}

/* The fewest loop trips one item of the GEMM's route needs (one unit of
 * k): checked before a call enqueues anything. */
static teeny_status gemm_fits(teeny_ctx *ctx, const gemm_args *ga)
{
    gemm_plan pl;
    gemm_route r;
    teeny__cpu_gemm_args cg;
    int cpu = 0;
    teeny_status st = gemm_route_make(ctx, ga, &pl, &r);
    if (st == TEENY_OK)
        st = cpu_route(ctx, ga, &r, &cg, &cpu);
    return st == TEENY_OK && !cpu ? teeny__loop_check(ctx, r.name, r.fixed + r.per_unit) : st;
}

/* One GEMM: one launch, or where the device limits a work-item's loop
 * trips, launches over segments of k with C carrying the sums (the bits of
 * one launch). Both routes take the same arguments. */
static teeny_status gemm(teeny_ctx *ctx, const gemm_args *ga)
{
    gemm_plan pl;
    gemm_route r;
    int a_off = teeny__off(ga->a), b_off = teeny__off(ga->b), c_off = teeny__off(ga->c);
    int has_bias = ga->bias != NULL, bias_off = has_bias ? teeny__off(ga->bias) : 0;
    cl_mem bias_buf = has_bias ? ga->bias->buf : ga->a->buf; /* stand-in, never read */
    int k_begin = 0, k_end = 0, seg = 0;
    int64_t per, units;
    teeny__cpu_gemm_args cg;
    int cpu = 0;
    teeny_status st = gemm_route_make(ctx, ga, &pl, &r);
    if (st == TEENY_OK)
        st = cpu_route(ctx, ga, &r, &cg, &cpu);
    if (st != TEENY_OK || cpu)
        return st == TEENY_OK ? teeny__cpu_gemm(ctx, &cg) : st;
    units = ((int64_t)ga->K + r.unit - 1) / r.unit;
    if ((st = teeny__loop_split(ctx, r.name, units, r.fixed, r.per_unit, &per)) != TEENY_OK)
        return st;
    teeny__karg a[] = {TEENY__KARG_INT(ga->M),   TEENY__KARG_INT(ga->N),     TEENY__KARG_INT(ga->K),
                       TEENY__KARG_MEM(ga->a->buf), TEENY__KARG_INT(a_off),  TEENY__KARG_INT(ga->a_sm),
                       TEENY__KARG_INT(ga->a_sk), TEENY__KARG_MEM(ga->b->buf), TEENY__KARG_INT(b_off),
                       TEENY__KARG_INT(ga->b_sk), TEENY__KARG_INT(ga->b_sn), TEENY__KARG_MEM(bias_buf),
                       TEENY__KARG_INT(bias_off), TEENY__KARG_INT(has_bias), TEENY__KARG_MEM(ga->c->buf),
                       TEENY__KARG_INT(c_off),   TEENY__KARG_INT(ga->c_sm),  TEENY__KARG_INT(k_begin),
                       TEENY__KARG_INT(k_end),   TEENY__KARG_INT(seg)};
    for (int64_t t = 0; (t == 0 || t < units) && st == TEENY_OK; t += per) {
        cl_kernel k;
        k_begin = (int)(t * r.unit);
        k_end = t + per >= units ? ga->K : (int)((t + per) * r.unit);
        seg = (t == 0 ? LIN_SEG_FIRST : 0) | (t + per >= units ? LIN_SEG_LAST : 0);
        st = teeny__kernel_get(ctx, "linear", pl.opt, r.name, &k);
        if (st == TEENY_OK)
            st = teeny__set_arg_list(ctx, k, r.name, a, (int)(sizeof a / sizeof a[0]));
        if (st == TEENY_OK)
            st = teeny__launch(ctx, k, r.name, r.dims, r.global, r.local);
    }
    return st;
}

/* out [cols] = column sums of g [rows, cols], two deterministic passes.
 * Built with the GEMM's options so the family stays one program. */
/* The column sums' runs: chunk rows per item of pass 1, P partials. Where
 * a device limits a work-item's loop trips, runs of at most the rows an
 * item may loop over (chunk + 1 trips), and pass 2's P + 1. */
static teeny_status colsum_plan(teeny_ctx *ctx, int rows, int cols, int *chunk, int *P)
{
    int64_t target = (int64_t)(ctx->info.compute_units ? ctx->info.compute_units : 1) * ctx->work_group_size * 4;
    int64_t p = (target + cols - 1) / cols, per;
    teeny_status st;
    if (p > rows)
        p = rows;
    if (p > 64)
        p = 64; /* keeps pass 2 short */
    if ((st = teeny__loop_split(ctx, "lin_colsum_partial", rows, 1, 1, &per)) != TEENY_OK)
        return st;
    if (p < (rows + per - 1) / per)
        p = (rows + per - 1) / per;
    if (p < 1)
        p = 1;
    *chunk = (int)((rows + p - 1) / p);
    *P = (rows + *chunk - 1) / *chunk;
    return teeny__loop_check(ctx, "lin_colsum_final", (int64_t)*P + 1);
}

static teeny_status colsum(teeny_ctx *ctx, const teeny_tensor *g, int rows, int cols, teeny_tensor *out)
{
    gemm_plan pl;
    int chunk, P, g_off = teeny__off(g), out_off = teeny__off(out);
    cl_mem part;
    cl_kernel k;
    teeny_status st = colsum_plan(ctx, rows, cols, &chunk, &P);
    if (st == TEENY_OK)
        st = teeny__lin_plan_fit(ctx, &pl);
    if (st == TEENY_OK)
        st = teeny__scratch(ctx, (size_t)P * (size_t)cols * sizeof(float), &part);
    if (st == TEENY_OK)
        st = teeny__kernel_get(ctx, "linear", pl.opt, "lin_colsum_partial", &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, "lin_colsum_partial", sizeof(cl_mem), &g->buf, sizeof(int), &g_off, sizeof(int),
                             &rows, sizeof(int), &cols, sizeof(int), &chunk, sizeof(cl_mem), &part, (size_t)0);
    if (st == TEENY_OK) {
        /* a fixed local size: one compiled work-group shape on every device
         * that specializes per launch shape (PoCL) */
        size_t global[2] = {(size_t)cols, (size_t)P}, local[2] = {teeny__local_clamp(ctx, k, "lin_colsum_partial", (size_t)ctx->work_group_size), 1};
        st = teeny__launch(ctx, k, "lin_colsum_partial", 2, global, local);
    }
    if (st == TEENY_OK)
        st = teeny__kernel_get(ctx, "linear", pl.opt, "lin_colsum_final", &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, "lin_colsum_final", sizeof(cl_mem), &part, sizeof(int), &cols, sizeof(int), &P,
                             sizeof(cl_mem), &out->buf, sizeof(int), &out_off, (size_t)0);
    return st == TEENY_OK ? teeny__launch_1d(ctx, k, "lin_colsum_final", (size_t)cols) : st;
}

teeny_status teeny__linear_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__LINEAR_X], *w = a->in[TEENY__LINEAR_WEIGHT], *bias = a->in[TEENY__LINEAR_BIAS];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int N = (int)x->shape[0], in = (int)x->shape[1], out = (int)w->shape[0];
    gemm_args g = {.M = N, .N = out, .K = in, .a = x, .a_sm = in, .a_sk = 1, .b = w, .b_sk = 1, .b_sn = in,
                   .bias = bias, .c = y, .c_sm = out, .b_frozen = a->frozen};
    return gemm(ctx, &g);
}

teeny_status teeny__linear_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__LINEAR_X], *w = a->in[TEENY__LINEAR_WEIGHT], *dy = a->in[TEENY__LINEAR_DY];
    teeny_tensor *dx = a->out[TEENY__LINEAR_X], *dw = a->out[TEENY__LINEAR_WEIGHT], *db = a->out[TEENY__LINEAR_BIAS];
    int N = (int)x->shape[0], in = (int)x->shape[1], out = (int)w->shape[0], chunk, P;
    gemm_args gdx = {.M = N, .N = in, .K = out, .a = dy, .a_sm = out, .a_sk = 1, .b = w, .b_sk = in, .b_sn = 1,
                     .c = dx, .c_sm = in};
    gemm_args gdw = {.M = out, .N = in, .K = N, .a = dy, .a_sm = 1, .a_sk = out, .b = x, .b_sk = in, .b_sn = 1,
                     .c = dw, .c_sm = in};
    gemm_plan pl;
    teeny_status st = teeny__lin_plan_fit(ctx, &pl); /* every plan before the first launch */
    if (st == TEENY_OK && dx)
        st = gemm_fits(ctx, &gdx);
    if (st == TEENY_OK && dw)
        st = gemm_fits(ctx, &gdw);
    if (st == TEENY_OK && db)
        st = colsum_plan(ctx, N, out, &chunk, &P);
    if (st == TEENY_OK && dx)
        st = gemm(ctx, &gdx);
    if (st == TEENY_OK && dw)
        st = gemm(ctx, &gdw);
    if (st == TEENY_OK && db)
        st = colsum(ctx, dy, N, out, db);
    return st;
}

/* ---- shapes and the eager API ---- */

/* x [N, in] -> y [N, out_features]; params weight [out, in] and, with
 * has_bias, bias [out] (its shape is given either way: the eager
 * backward's db is checked against it). */
teeny_status teeny__linear_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    int64_t out = s->attrs.linear.out_features;
    int has_bias = s->attrs.linear.has_bias;
    char b[96];
    if (s->n_in != 1 || x->ndim != 2 || x->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x has shape %s%s; expected fp32 [N, in]",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b), x->is_i32 ? " int32" : "");
    if (out < 1 || (has_bias != 0 && has_bias != 1))
        return teeny__error(ctx, TEENY_ERR_ARG, "out_features %lld must be >= 1 and has_bias %d 0 or 1", (long long)out,
                            has_bias);
    if (x->shape[0] < 1 || x->shape[1] < 1)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x [%lld, %lld] has an empty dimension", (long long)x->shape[0],
                            (long long)x->shape[1]);
    if (x->shape[0] * out > INT32_MAX || x->shape[1] * out > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "[%lld, %lld] output or [%lld, %lld] weight passes int32 indexing",
                            (long long)x->shape[0], (long long)out, (long long)out, (long long)x->shape[1]);
    s->out = (teeny__shape){.ndim = 2, .shape = {x->shape[0], out}};
    s->n_param = has_bias ? 2 : 1;
    s->param[0] = (teeny__shape){.ndim = 2, .shape = {out, x->shape[1]}};
    s->param[1] = (teeny__shape){.ndim = 1, .shape = {out}};
    s->param_name[0] = "weight";
    s->param_name[1] = "bias";
    s->param_init[0] = s->param_init[1] = TEENY__INIT_FAN_IN;
    s->fan_in = x->shape[1];
    s->n_state = 0;
    s->n_saved = 0;
    return TEENY_OK;
}

/* The attributes come from w [out, in]. */
static teeny_status run_linear(teeny_ctx *ctx, teeny__eager *e, const teeny_tensor *w, int has_bias,
                               const teeny__earg *args, int n)
{
    teeny_status st = teeny__eager_tensors(ctx, e->fn, args, n);
    if (st == TEENY_OK)
        st = teeny__eager_rank(ctx, e->fn, w, "w", 2, "[out, in]");
    if (st != TEENY_OK)
        return st;
    e->attrs.linear = (teeny__linear_attrs){(int)w->shape[0], has_bias};
    return teeny__eager_run(ctx, e, args, n);
}

teeny_status teeny_linear_forward(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *w,
                                  const teeny_tensor *bias, teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_linear_forward", LINEAR, linear, forward)};
    const teeny__earg args[] = {{"x", x, TEENY__LINEAR_X, 0},
                                {"w", w, TEENY__LINEAR_WEIGHT, 0},
                                {"bias", bias, TEENY__LINEAR_BIAS, TEENY__EA_OPTIONAL | TEENY__EA_NUMEL},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_linear_forward");
    return run_linear(ctx, &e, w, bias != NULL, args, 4);
}

teeny_status teeny_linear_backward(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *dy,
                                   teeny_tensor *dx, teeny_tensor *dw, teeny_tensor *db)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_linear_backward", LINEAR, linear, backward)};
    const teeny__earg args[] = {{"x", x, TEENY__LINEAR_X, 0},
                                {"w", w, TEENY__LINEAR_WEIGHT, 0},
                                {"dy", dy, TEENY__LINEAR_DY, 0},
                                {"dx", dx, TEENY__LINEAR_X, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"dw", dw, TEENY__LINEAR_WEIGHT, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"db", db, TEENY__LINEAR_BIAS, TEENY__EA_OUT | TEENY__EA_OPTIONAL | TEENY__EA_NUMEL}};
    EAGER_BEGIN("teeny_linear_backward");
    return run_linear(ctx, &e, w, db != NULL, args, 6);
}
