/*
 * batchnorm.c -- batch normalization, every variant: [N, C] and
 * [B, C, H, W] layouts; training forward (batch statistics, running-stat
 * update), inference forward (running statistics), training backward and
 * frozen-statistics backward, and folding into per-channel scale/shift.
 * Semantics follow PyTorch's F.batch_norm: the batch is normalized with the
 * biased variance, running_var is updated with the unbiased one.
 *
 * Kernels: cl/batchnorm.cl. Reductions are two-pass and deterministic (see
 * the .cl banner); their partials live in the context's workspace. Where a
 * device limits a work-item's loop trips, the number of partials follows
 * that limit too (budget_parts).
 * Tunable: BN_WG, the reduction work-group size, from the device's
 * max work-group size (ctx->work_group_size).
 *
 * Op-table entry (slots TEENY__BATCHNORM_*, ops.h): one input x; params weight
 * (ones), bias (zeros); states running_mean (zeros), running_var (ones);
 * saved save_mean, save_rstd (training only); attrs.batchnorm = {momentum,
 * eps}.
 *   forward:  in  = [x, weight, bias, running_mean, running_var]
 *             out = [y, save_mean, save_rstd, running_mean, running_var]
 *             training: batch statistics, running stats updated;
 *             otherwise running statistics (save_* and states unused)
 *   backward: in  = [x, weight, bias, running_mean, running_var, y, save_mean,
 *                    save_rstd, dy]
 *             out = [dx, dweight, dbias]; training: through the batch
 *             statistics (the saved slots), otherwise frozen statistics (the
 *             state slots). dx may be NULL.
 */
#include <stdio.h>

#include "ops.h"

/* Below this spatial size the "rows" reduction layout is used. */
#define BN_SPATIAL_MIN 16

typedef struct {
    int B, C, S;
    int spatial, vec;
    int cpu;    /* the CPU variants (spatial layout, TEENY_VARIANT_CPU) */
    /* reduction */
    int K;      /* partials per channel */
    int P;      /* runs of the batch (rows) or chunks (spatial) */
    int chunk;  /* units per run */
    int total;  /* units the runs split */
    size_t red_global[2], red_local[2];
    /* element-wise */
    int inner, outer;
    size_t ew_global[2], ew_local[2];
} bn_plan;

/* The CPU variants' run of floats per item (BN_CPU_RUN in the .cl). */
#define BN_CPU_RUN 1024

/* min_parts, max_parts: the partials per channel (spatial) or runs of the
 * batch (rows) the device's loop budget asks for (budget_parts). */
static void plan_make(const teeny_ctx *ctx, int wg, int B, int C, int S, int64_t min_parts, int64_t max_parts,
                      bn_plan *pl)
{
    int64_t target = (int64_t)(ctx->info.compute_units ? ctx->info.compute_units : 1) * 4;
    pl->B = B;
    pl->C = C;
    pl->S = S;
    pl->spatial = S >= BN_SPATIAL_MIN;
    pl->cpu = pl->spatial && ctx->tune.variant == TEENY_VARIANT_CPU;
    if (pl->cpu)
        wg = 1; /* one item per partial: its runs are as long as the split allows */
    pl->vec = pl->spatial && S % 4 == 0 ? 4 : 1;
    if (pl->spatial) {
        int units = (int)((int64_t)B * S / pl->vec);
        int64_t k = (target + C - 1) / C;
        int64_t k_max = (units + 2 * wg - 1) / (2 * wg);       /* >= 2 units per item */
        int64_t k_min = ((int64_t)units * pl->vec >> 22) + 1;  /* counts stay exact in float */
        if (k_min < min_parts) k_min = min_parts;
        if (k > k_max) k = k_max;
        if (k > max_parts) k = max_parts;
        if (k < k_min) k = k_min;
        if (k < 1) k = 1;
        pl->chunk = (int)((units + k - 1) / k);
        pl->K = pl->P = (units + pl->chunk - 1) / pl->chunk;
        pl->total = units;
        pl->red_global[0] = (size_t)wg * pl->K;
        pl->red_global[1] = (size_t)C;
        pl->red_local[0] = (size_t)wg;
        pl->red_local[1] = 1;
        pl->inner = S / pl->vec;
        pl->outer = B * C;
    } else {
        int64_t cs = (int64_t)C * S;
        int64_t p = (target * wg + cs - 1) / cs;
        if (p > B) p = B;
        if (p > max_parts / S) p = max_parts / S;
        if (p < min_parts) p = min_parts;
        if (p < 1) p = 1;
        pl->chunk = (int)((B + p - 1) / p);
        pl->P = (B + pl->chunk - 1) / pl->chunk;
        pl->K = S * pl->P;
        pl->total = B;
        pl->red_global[0] = (size_t)cs;
        pl->red_global[1] = (size_t)pl->P;
        pl->red_local[0] = (size_t)(cs < wg ? 1 : wg);
        pl->red_local[1] = 1;
        pl->inner = (int)cs;
        pl->outer = B;
    }
    /* element-wise grid: a power-of-two split of wg over (inner, outer) */
    size_t l0 = 1;
    while ((int)l0 < pl->inner && (int)l0 < wg)
        l0 *= 2;
    pl->ew_local[0] = l0;
    pl->ew_local[1] = (size_t)wg / l0;
    pl->ew_global[0] = (size_t)pl->inner;
    pl->ew_global[1] = (size_t)pl->outer;
    if (pl->cpu) { /* grids (K, C) and (runs per plane, B*C); groups along the second dimension */
        pl->red_global[0] = (size_t)pl->K;
        pl->red_local[1] = teeny__cpu_local(ctx, (size_t)pl->K * (size_t)C);
        pl->ew_global[0] = (size_t)((S + BN_CPU_RUN - 1) / BN_CPU_RUN);
        pl->ew_local[0] = 1;
        pl->ew_local[1] = teeny__cpu_local(ctx, pl->ew_global[0] * (size_t)pl->outer);
    }
}

static void wg_option(const teeny_ctx *ctx, char *buf, size_t cap)
{
    snprintf(buf, cap, "-DBN_WG=%d", ctx->work_group_size);
}

/* ---- loop budget ----
 * Where a device limits a work-item's loop trips (teeny__loop_budget), the
 * reductions take more partials, so that no item passes it; elsewhere
 * (and wherever the default split fits) the plan, and so the bits, stay
 * as they are. Every loop counted as not unrolled, one more trip per entry:
 *   bn_stats_cpu / bn_grad_cpu: an item's F floats lie in at most
 *     F/S + 2 runs of a plane (the BN_RUNS loop), each a float16 loop
 *     (len/16 + 1) and a tail (<= 16), then two 8-lane sums (18):
 *     F/16 + 18 (F/S + 2) + 19 <= blocks * (1 + 288/S) + 55, F = 16 blocks;
 *   bn_stats_spatial / bn_grad_spatial: chunk/BN_WG + 1 strided trips and
 *     a tree of log2(BN_WG) levels of at most 3 trips, + 1;
 *   bn_stats_rows / bn_grad_rows: rows_per + 1;
 *   the finalize kernels: K + 1 (K partials per channel);
 *   bn_normalize_cpu / bn_backward_dx_cpu: BN_CPU_RUN/16 + 1 + 16. */
static int log2_floor(int v)
{
    int l = 0;
    while ((1 << (l + 1)) <= v)
        l++;
    return l;
}

/* The fewest partials per channel (spatial) or runs of the batch (rows)
 * whose items stay within the budget, and the most partials per channel
 * its finalize item may merge. A spatial chunk is counted in units, so it
 * may hold one block (round) more than teeny__loop_split gave: the fixed
 * cost has room for it. */
static teeny_status budget_parts(teeny_ctx *ctx, int wg, int B, int S, int grad, int cpu, int64_t *min_parts,
                                 int64_t *max_parts)
{
    int64_t per, n, budget;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK)
        return st;
    *max_parts = budget == INT64_MAX ? INT64_MAX : budget - 1;
    if (S < BN_SPATIAL_MIN) {
        st = teeny__loop_split(ctx, grad ? "bn_grad_rows" : "bn_stats_rows", B, 1, 1, &per);
        n = B;
    } else if (cpu) {
        n = ((int64_t)B * S + 15) / 16; /* blocks of 16 floats */
        int64_t per_block = 1 + (288 + S - 1) / S;
        st = teeny__loop_split(ctx, grad ? "bn_grad_cpu" : "bn_stats_cpu", n, 55 + per_block, per_block, &per);
    } else {
        int vec = S % 4 == 0 ? 4 : 1;
        n = ((int64_t)B * S / vec + wg - 1) / wg; /* rounds of the work-group's strided loop */
        st = teeny__loop_split(ctx, grad ? "bn_grad_spatial" : "bn_stats_spatial", n, 3 * log2_floor(wg) + 3, 1,
                               &per);
    }
    *min_parts = st == TEENY_OK && per < n ? (n + per - 1) / per : 1;
    return st;
}

/* The plan's other loops: the finalize over K partials, the CPU
 * element-wise runs. */
static teeny_status budget_check(teeny_ctx *ctx, const bn_plan *pl, int grad, int training)
{
    teeny_status st = TEENY_OK;
    if (grad || training)
        st = teeny__loop_check(ctx, grad ? "bn_grad_finalize" : "bn_stats_finalize", (int64_t)pl->K + 1);
    if (st == TEENY_OK && pl->cpu)
        st = teeny__loop_check(ctx, grad ? "bn_backward_dx_cpu" : "bn_normalize_cpu", BN_CPU_RUN / 16 + 17);
    return st;
}

/* Pick BN_WG before anything is enqueued: the device's work-group size, or
 * the largest power of two below it that every kernel of this call takes
 * (the reductions need a power of two); then plan with it. */
static teeny_status plan_fit(teeny_ctx *ctx, int B, int C, int S, int grad, int training, bn_plan *pl, char *opt,
                             size_t cap)
{
    const char *names[3];
    int n = 0, wg;
    int spatial = S >= BN_SPATIAL_MIN;
    if (grad) {
        names[n++] = spatial ? "bn_grad_spatial" : "bn_grad_rows";
        names[n++] = "bn_grad_finalize";
        names[n++] = "bn_backward_dx";
    } else {
        if (training) {
            names[n++] = spatial ? "bn_stats_spatial" : "bn_stats_rows";
            names[n++] = "bn_stats_finalize";
        }
        names[n++] = "bn_normalize";
    }
    int cpu = spatial && ctx->tune.variant == TEENY_VARIANT_CPU;
    int64_t min_parts = 1, max_parts = INT64_MAX;
    teeny_status st = teeny__fit_halving(ctx, "batchnorm", "-DBN_WG=%d", names, n, ctx->work_group_size,
                                         TEENY__WG_FLOOR, &wg, opt, cap);
    if (st == TEENY_OK && (grad || training))
        st = budget_parts(ctx, wg, B, S, grad, cpu, &min_parts, &max_parts);
    if (st == TEENY_OK) {
        plan_make(ctx, wg, B, C, S, min_parts, max_parts, pl);
        st = budget_check(ctx, pl, grad, training);
    }
    return st;
}

/* Reduction partials + finalize for statistics or gradient sums. */
static teeny_status reduce(teeny_ctx *ctx, const bn_plan *pl, const char *opt, int grad, const teeny_tensor *x,
                           const teeny_tensor *dy, const teeny_tensor *mean, cl_mem *part_out)
{
    const char *name = grad ? (pl->cpu ? "bn_grad_cpu" : pl->spatial ? "bn_grad_spatial" : "bn_grad_rows")
                            : (pl->cpu ? "bn_stats_cpu" : pl->spatial ? "bn_stats_spatial" : "bn_stats_rows");
    cl_kernel k;
    cl_mem part;
    int x_off = teeny__off(x), units = pl->total, CS = pl->C * pl->S;
    teeny_status st;
    st = teeny__scratch(ctx, (size_t)pl->C * pl->K * 2 * sizeof(float), &part);
    if (st == TEENY_OK)
        st = teeny__kernel_get(ctx, "batchnorm", opt, name, &k);
    if (st != TEENY_OK)
        return st;
    if (!grad && pl->cpu)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(int), &pl->C,
                             sizeof(int), &pl->S, sizeof(int), &pl->vec, sizeof(int), &units, sizeof(int), &pl->chunk,
                             sizeof(int), &pl->K, sizeof(cl_mem), &part, (size_t)0);
    else if (!grad && pl->spatial)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(int), &pl->C,
                             sizeof(int), &pl->S, sizeof(int), &pl->vec, sizeof(int), &units, sizeof(int), &pl->chunk,
                             sizeof(cl_mem), &part, (size_t)0);
    else if (!grad)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(int), &pl->B,
                             sizeof(int), &CS, sizeof(int), &pl->S, sizeof(int), &pl->chunk, sizeof(cl_mem), &part,
                             (size_t)0);
    else {
        int dy_off = teeny__off(dy), m_off = teeny__off(mean);
        if (pl->cpu)
            st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(cl_mem), &dy->buf,
                                 sizeof(int), &dy_off, sizeof(cl_mem), &mean->buf, sizeof(int), &m_off, sizeof(int),
                                 &pl->C, sizeof(int), &pl->S, sizeof(int), &pl->vec, sizeof(int), &units, sizeof(int),
                                 &pl->chunk, sizeof(int), &pl->K, sizeof(cl_mem), &part, (size_t)0);
        else if (pl->spatial)
            st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(cl_mem), &dy->buf,
                                 sizeof(int), &dy_off, sizeof(cl_mem), &mean->buf, sizeof(int), &m_off, sizeof(int),
                                 &pl->C, sizeof(int), &pl->S, sizeof(int), &pl->vec, sizeof(int), &units, sizeof(int),
                                 &pl->chunk, sizeof(cl_mem), &part, (size_t)0);
        else
            st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(cl_mem), &dy->buf,
                                 sizeof(int), &dy_off, sizeof(cl_mem), &mean->buf, sizeof(int), &m_off, sizeof(int),
                                 &pl->B, sizeof(int), &CS, sizeof(int), &pl->S, sizeof(int), &pl->chunk,
                                 sizeof(cl_mem), &part, (size_t)0);
    }
    if (st == TEENY_OK)
        st = teeny__launch(ctx, k, name, 2, pl->red_global, pl->red_local);
    *part_out = part;
    return st;
}

teeny_status teeny__batchnorm_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__BATCHNORM_X], *w = a->in[TEENY__BATCHNORM_WEIGHT],
                       *bias = a->in[TEENY__BATCHNORM_BIAS];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int training = a->training;
    float momentum = a->attrs.batchnorm.momentum, eps = a->attrs.batchnorm.eps;
    int B = (int)x->shape[0], C = (int)x->shape[1], S = (int)(x->numel / ((int64_t)B * C));
    bn_plan pl;
    char opt[32];
    cl_kernel k;
    teeny_status st;
    const teeny_tensor *mean, *r;
    int r_is_var;

    if ((st = plan_fit(ctx, B, C, S, 0, training, &pl, opt, sizeof opt)) != TEENY_OK)
        return st;
    if (training) {
        teeny_tensor *save_mean = a->out[TEENY__BATCHNORM_OUT_SAVE_MEAN],
                     *save_rstd = a->out[TEENY__BATCHNORM_OUT_SAVE_RSTD],
                     *rm = a->out[TEENY__BATCHNORM_OUT_RUNNING_MEAN], *rv = a->out[TEENY__BATCHNORM_OUT_RUNNING_VAR];
        cl_mem part;
        int update = 1, x_off = teeny__off(x), sm_off = teeny__off(save_mean), sr_off = teeny__off(save_rstd),
            rm_off = teeny__off(rm), rv_off = teeny__off(rv);
        size_t g = (size_t)C, l = 1;
        st = reduce(ctx, &pl, opt, 0, x, NULL, NULL, &part);
        if (st == TEENY_OK)
            st = teeny__kernel_get(ctx, "batchnorm", opt, "bn_stats_finalize", &k);
        if (st == TEENY_OK)
            st = teeny__set_args(ctx, k, "bn_stats_finalize", sizeof(cl_mem), &part, sizeof(int), &pl.K, sizeof(int),
                                 &pl.P, sizeof(int), &pl.chunk, sizeof(int), &pl.total, sizeof(int), &pl.vec,
                                 sizeof(int), &C, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(int), &S,
                                 sizeof(float), &eps, sizeof(float), &momentum, sizeof(int), &update,
                                 sizeof(cl_mem), &save_mean->buf, sizeof(int), &sm_off, sizeof(cl_mem),
                                 &save_rstd->buf, sizeof(int), &sr_off, sizeof(cl_mem), &rm->buf, sizeof(int), &rm_off,
                                 sizeof(cl_mem), &rv->buf, sizeof(int), &rv_off, (size_t)0);
        if (st == TEENY_OK)
            st = teeny__launch(ctx, k, "bn_stats_finalize", 1, &g, &l);
        if (st != TEENY_OK)
            return st;
        mean = save_mean;
        r = save_rstd;
        r_is_var = 0;
    } else {
        mean = a->in[TEENY__BATCHNORM_RUNNING_MEAN];
        r = a->in[TEENY__BATCHNORM_RUNNING_VAR];
        r_is_var = 1;
    }

    int x_off = teeny__off(x), y_off = teeny__off(y), m_off = teeny__off(mean), r_off = teeny__off(r),
        w_off = teeny__off(w), b_off = teeny__off(bias), planes = B * C;
    if (pl.cpu) {
        static const char name[] = "bn_normalize_cpu";
        st = teeny__kernel_get(ctx, "batchnorm", opt, name, &k);
        if (st == TEENY_OK)
            st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(cl_mem), &y->buf,
                                 sizeof(int), &y_off, sizeof(int), &C, sizeof(int), &S, sizeof(int), &planes,
                                 sizeof(cl_mem), &mean->buf, sizeof(int), &m_off, sizeof(cl_mem), &r->buf, sizeof(int),
                                 &r_off, sizeof(int), &r_is_var, sizeof(float), &eps, sizeof(cl_mem), &w->buf,
                                 sizeof(int), &w_off, sizeof(cl_mem), &bias->buf, sizeof(int), &b_off, (size_t)0);
        return st == TEENY_OK ? teeny__launch(ctx, k, name, 2, pl.ew_global, pl.ew_local) : st;
    }
    st = teeny__kernel_get(ctx, "batchnorm", opt, "bn_normalize", &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, "bn_normalize", sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(cl_mem),
                             &y->buf, sizeof(int), &y_off, sizeof(int), &pl.inner, sizeof(int), &pl.outer, sizeof(int),
                             &C, sizeof(int), &S, sizeof(int), &pl.spatial, sizeof(int), &pl.vec, sizeof(cl_mem),
                             &mean->buf, sizeof(int), &m_off, sizeof(cl_mem), &r->buf, sizeof(int), &r_off, sizeof(int),
                             &r_is_var, sizeof(float), &eps, sizeof(cl_mem), &w->buf, sizeof(int), &w_off,
                             sizeof(cl_mem), &bias->buf, sizeof(int), &b_off, (size_t)0);
    if (st == TEENY_OK)
        st = teeny__launch(ctx, k, "bn_normalize", 2, pl.ew_global, pl.ew_local);
    return st;
}

teeny_status teeny__batchnorm_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    int training = a->training, frozen = !training, r_is_var = frozen;
    const teeny_tensor *x = a->in[TEENY__BATCHNORM_X], *w = a->in[TEENY__BATCHNORM_WEIGHT],
                       *dy = a->in[TEENY__BATCHNORM_DY];
    const teeny_tensor *mean = a->in[training ? TEENY__BATCHNORM_SAVE_MEAN : TEENY__BATCHNORM_RUNNING_MEAN],
                       *r = a->in[training ? TEENY__BATCHNORM_SAVE_RSTD : TEENY__BATCHNORM_RUNNING_VAR];
    teeny_tensor *dx = a->out[TEENY__BATCHNORM_X], *dw = a->out[TEENY__BATCHNORM_WEIGHT],
                 *db = a->out[TEENY__BATCHNORM_BIAS];
    float eps = a->attrs.batchnorm.eps;
    int B = (int)x->shape[0], C = (int)x->shape[1], S = (int)(x->numel / ((int64_t)B * C));
    float inv_n = (float)(1.0 / ((double)B * S));
    bn_plan pl;
    char opt[32];
    cl_kernel k;
    cl_mem part;
    size_t g = (size_t)C, l = 1;
    int r_off = teeny__off(r), dw_off = teeny__off(dw), db_off = teeny__off(db);
    teeny_status st;

    if ((st = plan_fit(ctx, B, C, S, 1, 0, &pl, opt, sizeof opt)) != TEENY_OK)
        return st;
    st = reduce(ctx, &pl, opt, 1, x, dy, mean, &part);
    if (st == TEENY_OK)
        st = teeny__kernel_get(ctx, "batchnorm", opt, "bn_grad_finalize", &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, "bn_grad_finalize", sizeof(cl_mem), &part, sizeof(int), &pl.K, sizeof(int), &C,
                             sizeof(cl_mem), &r->buf, sizeof(int), &r_off, sizeof(int), &r_is_var, sizeof(float), &eps,
                             sizeof(cl_mem), &dw->buf, sizeof(int), &dw_off, sizeof(cl_mem), &db->buf, sizeof(int),
                             &db_off, (size_t)0);
    if (st == TEENY_OK)
        st = teeny__launch(ctx, k, "bn_grad_finalize", 1, &g, &l);
    if (st != TEENY_OK || !dx)
        return st;

    int x_off = teeny__off(x), dy_off = teeny__off(dy), dx_off = teeny__off(dx), m_off = teeny__off(mean),
        w_off = teeny__off(w), planes = B * C;
    if (pl.cpu) {
        static const char name[] = "bn_backward_dx_cpu";
        st = teeny__kernel_get(ctx, "batchnorm", opt, name, &k);
        if (st == TEENY_OK)
            st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(cl_mem), &dy->buf,
                                 sizeof(int), &dy_off, sizeof(cl_mem), &dx->buf, sizeof(int), &dx_off, sizeof(int), &C,
                                 sizeof(int), &S, sizeof(int), &planes, sizeof(cl_mem), &mean->buf, sizeof(int), &m_off,
                                 sizeof(cl_mem), &r->buf, sizeof(int), &r_off, sizeof(int), &r_is_var, sizeof(float),
                                 &eps, sizeof(cl_mem), &w->buf, sizeof(int), &w_off, sizeof(cl_mem), &dw->buf,
                                 sizeof(int), &dw_off, sizeof(cl_mem), &db->buf, sizeof(int), &db_off, sizeof(float),
                                 &inv_n, sizeof(int), &frozen, (size_t)0);
        return st == TEENY_OK ? teeny__launch(ctx, k, name, 2, pl.ew_global, pl.ew_local) : st;
    }
    st = teeny__kernel_get(ctx, "batchnorm", opt, "bn_backward_dx", &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, "bn_backward_dx", sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(cl_mem),
                             &dy->buf, sizeof(int), &dy_off, sizeof(cl_mem), &dx->buf, sizeof(int), &dx_off,
                             sizeof(int), &pl.inner, sizeof(int), &pl.outer, sizeof(int), &C, sizeof(int), &S,
                             sizeof(int), &pl.spatial, sizeof(int), &pl.vec, sizeof(cl_mem), &mean->buf, sizeof(int),
                             &m_off, sizeof(cl_mem), &r->buf, sizeof(int), &r_off, sizeof(int), &r_is_var,
                             sizeof(float), &eps, sizeof(cl_mem), &w->buf, sizeof(int), &w_off, sizeof(cl_mem),
                             &dw->buf, sizeof(int), &dw_off, sizeof(cl_mem), &db->buf, sizeof(int), &db_off,
                             sizeof(float), &inv_n, sizeof(int), &frozen, (size_t)0);
    if (st == TEENY_OK)
        st = teeny__launch(ctx, k, "bn_backward_dx", 2, pl.ew_global, pl.ew_local);
    return st;
}

/* ---- shapes and the eager API ---- */

static teeny_status check_eps(teeny_ctx *ctx, float eps)
{
    if (!(eps >= 0.0f) || eps > 1e30f)
        return teeny__error(ctx, TEENY_ERR_ARG, "eps %g must be finite and >= 0", (double)eps);
    return TEENY_OK;
}

/* x [N, C] or [B, C, H, W] -> y of x's shape; params weight (ones), bias
 * (zeros), states running_mean (zeros), running_var (ones), saved
 * save_mean, save_rstd (training only): all [C]. */
teeny_status teeny__batchnorm_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    const teeny__batchnorm_attrs *at = &s->attrs.batchnorm;
    char b[96];
    teeny_status st;
    if (s->n_in != 1 || (x->ndim != 2 && x->ndim != 4) || x->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x has shape %s%s; expected fp32 [N, C] or [B, C, H, W]",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b), x->is_i32 ? " int32" : "");
    if ((st = check_eps(ctx, at->eps)) != TEENY_OK)
        return st;
    if (!(at->momentum >= 0.0f && at->momentum <= 1.0f))
        return teeny__error(ctx, TEENY_ERR_ARG, "momentum %g is outside [0, 1]", (double)at->momentum);
    teeny__shape c = {.ndim = 1, .shape = {x->shape[1]}};
    s->out = *x;
    s->n_param = 2;
    s->param[0] = s->param[1] = c;
    s->param_name[0] = "weight";
    s->param_name[1] = "bias";
    s->param_init[0] = TEENY__INIT_ONES;
    s->param_init[1] = TEENY__INIT_ZEROS;
    s->n_state = 2;
    s->state[0] = s->state[1] = c;
    s->state_name[0] = "running_mean";
    s->state_name[1] = "running_var";
    s->state_init[0] = TEENY__INIT_ZEROS;
    s->state_init[1] = TEENY__INIT_ONES;
    s->n_saved = 2;
    s->saved[0] = s->saved[1] = c;
    s->saved_needs_training = 1;
    s->counts_batches = 1;
    return TEENY_OK;
}

/* The eager functions take every per-channel vector in any shape of C
 * elements, and y (dy, dx) in any shape of x's element count. */
#define VEC TEENY__EA_NUMEL

teeny_status teeny_batchnorm_forward_train(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *weight,
                                           const teeny_tensor *bias, teeny_tensor *running_mean,
                                           teeny_tensor *running_var, float momentum, float eps, teeny_tensor *y,
                                           teeny_tensor *save_mean, teeny_tensor *save_rstd)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_batchnorm_forward_train", BATCHNORM, batchnorm, forward),
                      .attrs.batchnorm = {momentum, eps}, .training = 1};
    const teeny__earg args[] = {{"x", x, TEENY__BATCHNORM_X, 0},
                                {"weight", weight, TEENY__BATCHNORM_WEIGHT, VEC},
                                {"bias", bias, TEENY__BATCHNORM_BIAS, VEC},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT | VEC},
                                {"save_mean", save_mean, TEENY__BATCHNORM_OUT_SAVE_MEAN, TEENY__EA_OUT | VEC},
                                {"save_rstd", save_rstd, TEENY__BATCHNORM_OUT_SAVE_RSTD, TEENY__EA_OUT | VEC},
                                {"running_mean", running_mean, TEENY__BATCHNORM_RUNNING_MEAN, TEENY__EA_UPDATED | VEC},
                                {"running_var", running_var, TEENY__BATCHNORM_RUNNING_VAR, TEENY__EA_UPDATED | VEC}};
    teeny__op_args a;
    EAGER_BEGIN("teeny_batchnorm_forward_train");
    teeny_status st = teeny__eager_check(ctx, &e, args, 8, &a);
    if (st != TEENY_OK)
        return st;
    if (x->numel / x->shape[1] < 2) /* the unbiased variance divides by n - 1 */
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "%s: training needs more than one value per channel (x has %lld per channel)", e.fn,
                            (long long)(x->numel / x->shape[1]));
    return teeny__op_exec(ctx, e.pass, &a);
}

teeny_status teeny_batchnorm_forward_infer(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *weight,
                                           const teeny_tensor *bias, const teeny_tensor *running_mean,
                                           const teeny_tensor *running_var, float eps, teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_batchnorm_forward_infer", BATCHNORM, batchnorm, forward),
                      .attrs.batchnorm = {0.0f, eps}};
    const teeny__earg args[] = {{"x", x, TEENY__BATCHNORM_X, 0},
                                {"weight", weight, TEENY__BATCHNORM_WEIGHT, VEC},
                                {"bias", bias, TEENY__BATCHNORM_BIAS, VEC},
                                {"running_mean", running_mean, TEENY__BATCHNORM_RUNNING_MEAN, VEC},
                                {"running_var", running_var, TEENY__BATCHNORM_RUNNING_VAR, VEC},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT | VEC}};
    EAGER_BEGIN("teeny_batchnorm_forward_infer");
    return teeny__eager_run(ctx, &e, args, 6);
}

/* The statistics go in the slots the mode reads: the saved ones in
 * training, the running ones when frozen. */
static teeny_status backward(teeny_ctx *ctx, const char *fn, int training, const teeny_tensor *x,
                             const teeny_tensor *dy, const teeny_tensor *weight, const teeny_tensor *mean,
                             const char *mean_name, const teeny_tensor *r, const char *r_name, float eps,
                             teeny_tensor *dx, teeny_tensor *dweight, teeny_tensor *dbias)
{
    teeny__eager e = {TEENY__EAGER_OF(fn, BATCHNORM, batchnorm, backward), .attrs.batchnorm = {0.0f, eps},
                      .training = training};
    const teeny__earg args[] = {
        {"x", x, TEENY__BATCHNORM_X, 0},
        {"dy", dy, TEENY__BATCHNORM_DY, VEC},
        {"weight", weight, TEENY__BATCHNORM_WEIGHT, VEC},
        {mean_name, mean, training ? TEENY__BATCHNORM_SAVE_MEAN : TEENY__BATCHNORM_RUNNING_MEAN, VEC},
        {r_name, r, training ? TEENY__BATCHNORM_SAVE_RSTD : TEENY__BATCHNORM_RUNNING_VAR, VEC},
        {"dx", dx, TEENY__BATCHNORM_X, TEENY__EA_OUT | VEC},
        {"dweight", dweight, TEENY__BATCHNORM_WEIGHT, TEENY__EA_OUT | VEC},
        {"dbias", dbias, TEENY__BATCHNORM_BIAS, TEENY__EA_OUT | VEC}};
    return teeny__eager_run(ctx, &e, args, 8);
}

teeny_status teeny_batchnorm_backward_train(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *dy,
                                            const teeny_tensor *weight, const teeny_tensor *save_mean,
                                            const teeny_tensor *save_rstd, teeny_tensor *dx, teeny_tensor *dweight,
                                            teeny_tensor *dbias)
{
    EAGER_BEGIN("teeny_batchnorm_backward_train");
    return backward(ctx, "teeny_batchnorm_backward_train", 1, x, dy, weight, save_mean, "save_mean", save_rstd,
                    "save_rstd", 0.0f, dx, dweight, dbias);
}

teeny_status teeny_batchnorm_backward_frozen(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *dy,
                                             const teeny_tensor *weight, const teeny_tensor *running_mean,
                                             const teeny_tensor *running_var, float eps, teeny_tensor *dx,
                                             teeny_tensor *dweight, teeny_tensor *dbias)
{
    EAGER_BEGIN("teeny_batchnorm_backward_frozen");
    return backward(ctx, "teeny_batchnorm_backward_frozen", 0, x, dy, weight, running_mean, "running_mean",
                    running_var, "running_var", eps, dx, dweight, dbias);
}

/* Not an op of the table (no graph node, no gradient): a direct launch
 * over C channels, C from weight. */
teeny_status teeny_batchnorm_fold(teeny_ctx *ctx, const teeny_tensor *weight, const teeny_tensor *bias,
                                  const teeny_tensor *running_mean, const teeny_tensor *running_var, float eps,
                                  teeny_tensor *scale, teeny_tensor *shift)
{
    static const char fn[] = "teeny_batchnorm_fold";
    teeny_status st;
    char opt[32];
    cl_kernel k;
    EAGER_BEGIN("teeny_batchnorm_fold");
    if ((st = teeny__check_tensor(ctx, weight, "weight")) != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    int64_t C = weight->numel;
    const teeny_tensor *vecs[] = {bias, running_mean, running_var, scale, shift};
    const char *vec_names[] = {"bias", "running_mean", "running_var", "scale", "shift"};
    for (int i = 0; i < 5; i++)
        if ((st = teeny__check_vector(ctx, vecs[i], vec_names[i], C)) != TEENY_OK)
            return teeny__error(ctx, st, "%s: %s (weight has %lld elements)", fn, teeny_last_error(ctx),
                                (long long)C);
    if ((st = check_eps(ctx, eps)) != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    const teeny_tensor *all[] = {weight, bias, running_mean, running_var, scale, shift};
    const char *all_names[] = {"weight", "bias", "running_mean", "running_var", "scale", "shift"};
    if ((st = teeny__check_disjoint(ctx, fn, all, all_names, 4, 6)) != TEENY_OK)
        return st;
    int c = (int)C, w_off = teeny__off(weight), b_off = teeny__off(bias), m_off = teeny__off(running_mean),
        v_off = teeny__off(running_var), sc_off = teeny__off(scale), sh_off = teeny__off(shift);
    size_t g = (size_t)C, l = 1;
    wg_option(ctx, opt, sizeof opt);
    st = teeny__kernel_get(ctx, "batchnorm", opt, "bn_fold", &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, "bn_fold", sizeof(cl_mem), &weight->buf, sizeof(int), &w_off, sizeof(cl_mem),
                             &bias->buf, sizeof(int), &b_off, sizeof(cl_mem), &running_mean->buf, sizeof(int), &m_off,
                             sizeof(cl_mem), &running_var->buf, sizeof(int), &v_off, sizeof(float), &eps, sizeof(int),
                             &c, sizeof(cl_mem), &scale->buf, sizeof(int), &sc_off, sizeof(cl_mem), &shift->buf,
                             sizeof(int), &sh_off, (size_t)0);
    if (st == TEENY_OK)
        st = teeny__launch(ctx, k, "bn_fold", 1, &g, &l);
    return st;
}
