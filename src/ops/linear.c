/*
 * linear.c -- the fully connected layer, PyTorch layout: x [N, in],
 * weight [out, in], bias [out], y [N, out] = x w^T + bias.
 *
 * Kernels: cl/linear.cl. Every product is one strided tiled GEMM
 * (lin_gemm): forward y = x w^T, backward dx = dy w and dw = dy^T x (its
 * reduction over N runs in one work-item, in order: no atomics). db, the
 * column sums of dy, is two fixed-order passes over row chunks with the
 * partials in the context's workspace. Where a device limits a
 * work-item's loop trips, a GEMM's k loop runs in launches over segments
 * of k (C carrying the sums: the bits of one launch) and db takes more
 * runs of rows.
 * Tunable: the GEMM's work-group shape, from the device's work-group size
 * (ctx->work_group_size), and its register tile and k depth, from the
 * device profile (ctx->tune, src/tune/profiles.def) within the local
 * memory, passed as -D options (see gemm_plan). With tf32 active
 * (teeny_ctx_tf32_active: teeny_ctx_set_tf32 asked and the probe ran
 * tf32 mma) and a profile with a linear_tf32 tuning, every GEMM here (the
 * layer's three and MatMul's, matmul.c) takes the tensor-core tile, built with
 * -DTEENY_TF32=1: a program of its own, and the column sums with it.
 *
 * Op-table entry (slots TEENY__LINEAR_*, ops.h): one input x [N, in]
 * (rank 2); attrs.linear = {out_features, has_bias}; params weight
 * [out, in] and, with has_bias, bias [out] (both TEENY__INIT_FAN_IN,
 * fan_in = in; without it the bias slot and its gradient are NULL).
 */
#include <stdio.h>

#include "linear_internal.h"

static int tf32_emulate; /* teeny__linear_debug_tf32_emulate */

void teeny__linear_debug_tf32_emulate(int on)
{
    tf32_emulate = on;
}

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
             tf32 && tf32_emulate ? " -DTEENY_TF32_EMULATE=1" : "");
}

/* The plan for the device's work-group size, or for the largest power of
 * two below it whose LIN_LX * LIN_LY work-group and panels the built
 * lin_gemm takes (down to 4 x 4); checked before anything is enqueued.
 * tf32 where teeny_ctx_tf32_active says so (the one place that decides;
 * the test hook's emulation needs only teeny_ctx_set_tf32) and the
 * profile has a tf32 tuning. */
teeny_status teeny__lin_plan_fit(teeny_ctx *ctx, gemm_plan *g)
{
    int first = ctx->work_group_size, tf32 = 0;
    teeny_status st = teeny_ctx_tf32_active(ctx, &tf32);
    if (st != TEENY_OK)
        return st;
    tf32 = (tf32 || (tf32_emulate && ctx->tf32)) && ctx->tune.profile->linear_tf32.rm > 0;
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
} gemm_args;

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

/* The fewest loop trips one lin_gemm item needs (one k tile): checked
 * before a call enqueues anything. */
static teeny_status gemm_fits(teeny_ctx *ctx)
{
    gemm_plan pl;
    teeny_status st = teeny__lin_plan_fit(ctx, &pl);
    return st == TEENY_OK ? teeny__loop_check(ctx, "lin_gemm", teeny__lin_tile_fixed(&pl) + teeny__lin_tile_trips(&pl))
                          : st;
}

/* One GEMM: one launch, or where the device limits a work-item's loop
 * trips, launches over segments of k with C carrying the sums (the bits of
 * one launch). */
static teeny_status gemm(teeny_ctx *ctx, const gemm_args *ga)
{
    static const char name[] = "lin_gemm";
    gemm_plan pl;
    int a_off = teeny__off(ga->a), b_off = teeny__off(ga->b), c_off = teeny__off(ga->c);
    int has_bias = ga->bias != NULL, bias_off = has_bias ? teeny__off(ga->bias) : 0;
    cl_mem bias_buf = has_bias ? ga->bias->buf : ga->a->buf; /* stand-in, never read */
    int k_begin = 0, k_end = 0, seg = 0;
    int64_t per, tiles;
    teeny_status st = teeny__lin_plan_fit(ctx, &pl);
    if (st != TEENY_OK)
        return st;
    tiles = ((int64_t)ga->K + pl.tk - 1) / pl.tk;
    if ((st = teeny__loop_split(ctx, name, tiles, teeny__lin_tile_fixed(&pl), teeny__lin_tile_trips(&pl), &per)) !=
        TEENY_OK)
        return st;
    teeny__karg a[] = {TEENY__KARG_INT(ga->M),   TEENY__KARG_INT(ga->N),     TEENY__KARG_INT(ga->K),
                       TEENY__KARG_MEM(ga->a->buf), TEENY__KARG_INT(a_off),  TEENY__KARG_INT(ga->a_sm),
                       TEENY__KARG_INT(ga->a_sk), TEENY__KARG_MEM(ga->b->buf), TEENY__KARG_INT(b_off),
                       TEENY__KARG_INT(ga->b_sk), TEENY__KARG_INT(ga->b_sn), TEENY__KARG_MEM(bias_buf),
                       TEENY__KARG_INT(bias_off), TEENY__KARG_INT(has_bias), TEENY__KARG_MEM(ga->c->buf),
                       TEENY__KARG_INT(c_off),   TEENY__KARG_INT(ga->c_sm),  TEENY__KARG_INT(k_begin),
                       TEENY__KARG_INT(k_end),   TEENY__KARG_INT(seg)};
    size_t tm = (size_t)pl.ly * pl.rm, tn = (size_t)pl.lx * pl.rn;
    size_t global[2] = {((size_t)ga->N + tn - 1) / tn * pl.lx, ((size_t)ga->M + tm - 1) / tm * pl.ly};
    size_t local[2] = {(size_t)pl.lx, (size_t)pl.ly};
    for (int64_t t = 0; (t == 0 || t < tiles) && st == TEENY_OK; t += per) {
        cl_kernel k;
        k_begin = (int)(t * pl.tk);
        k_end = t + per >= tiles ? ga->K : (int)((t + per) * pl.tk);
        seg = (t == 0 ? LIN_SEG_FIRST : 0) | (t + per >= tiles ? LIN_SEG_LAST : 0);
        st = teeny__kernel_get(ctx, "linear", pl.opt, name, &k);
        if (st == TEENY_OK)
            st = teeny__set_arg_list(ctx, k, name, a, (int)(sizeof a / sizeof a[0]));
        if (st == TEENY_OK)
            st = teeny__launch(ctx, k, name, 2, global, local);
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
    if (st == TEENY_OK) {
        size_t global = (size_t)cols, local = teeny__local_clamp(ctx, k, "lin_colsum_final", (size_t)ctx->work_group_size);
        st = teeny__launch(ctx, k, "lin_colsum_final", 1, &global, &local);
    }
    return st;
}

teeny_status teeny__linear_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__LINEAR_X], *w = a->in[TEENY__LINEAR_WEIGHT], *bias = a->in[TEENY__LINEAR_BIAS];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int N = (int)x->shape[0], in = (int)x->shape[1], out = (int)w->shape[0];
    gemm_args g = {.M = N, .N = out, .K = in, .a = x, .a_sm = in, .a_sk = 1, .b = w, .b_sk = 1, .b_sn = in,
                   .bias = bias, .c = y, .c_sm = out};
    return gemm(ctx, &g);
}

teeny_status teeny__linear_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__LINEAR_X], *w = a->in[TEENY__LINEAR_WEIGHT], *dy = a->in[TEENY__LINEAR_DY];
    teeny_tensor *dx = a->out[TEENY__LINEAR_X], *dw = a->out[TEENY__LINEAR_WEIGHT], *db = a->out[TEENY__LINEAR_BIAS];
    int N = (int)x->shape[0], in = (int)x->shape[1], out = (int)w->shape[0], chunk, P;
    teeny_status st = gemm_fits(ctx); /* every plan before the first launch */
    if (st == TEENY_OK && db)
        st = colsum_plan(ctx, N, out, &chunk, &P);
    if (st == TEENY_OK && dx) {
        gemm_args g = {.M = N, .N = in, .K = out, .a = dy, .a_sm = out, .a_sk = 1, .b = w, .b_sk = in, .b_sn = 1,
                       .c = dx, .c_sm = in};
        st = gemm(ctx, &g);
    }
    if (st == TEENY_OK && dw) {
        gemm_args g = {.M = out, .N = in, .K = N, .a = dy, .a_sm = 1, .a_sk = out, .b = x, .b_sk = in, .b_sn = 1,
                       .c = dw, .c_sm = in};
        st = gemm(ctx, &g);
    }
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
