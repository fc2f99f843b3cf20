/*
 * batchnorm.c -- batch normalization, every variant: [N, C] and
 * [B, C, H, W] layouts; training forward (batch statistics, running-stat
 * update), inference forward (running statistics), training backward and
 * frozen-statistics backward, and folding into per-channel scale/shift.
 * Semantics follow PyTorch's F.batch_norm: the batch is normalized with the
 * biased variance, running_var is updated with the unbiased one.
 *
 * Kernels: cl/batchnorm.cl. Reductions are two-pass and deterministic (see
 * the .cl banner); their partials live in the context's workspace, and the
 * second pass runs inside the element-wise kernel that consumes it, so a
 * training forward is two launches (partials, bn_normalize_train) and a
 * backward two (partials, bn_backward_dx). On the portable kernels'
 * spatial layout the consumers are the _spatial twins (a few work-groups
 * per channel, each merging the partials once), and a training forward
 * or a backward with dx whose channels fit one work-group's registers is
 * one launch, bn_train_channel / bn_backward_channel (plan_fused, the one
 * rule). Where a device limits a
 * work-item's loop trips, the number of partials follows that limit too
 * (budget_parts). Shape inference and the eager functions: batchnorm_api.c.
 * Tunable: BN_WG, the reduction work-group size, from the device's
 * max work-group size (ctx->work_group_size); the profile's bn_parts
 * (src/tune) bounds the partials per channel.
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
#include <string.h>

#include "../ops.h"

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
    /* the portable spatial consumers (bn_normalize_train_spatial, bn_backward_dx_spatial): G work-groups per
     * channel, ew_chunk units each; fused: one launch instead (bn_train_channel, bn_backward_channel) */
    int G, ew_chunk, fused;
    /* element-wise */
    int inner, outer;
    size_t ew_global[2], ew_local[2];
} bn_plan;

/* The CPU variants' run of floats per item (BN_CPU_RUN in the .cl). */
#define BN_CPU_RUN 1024
/* bn_train_channel's units per work-item (BN_REG in the .cl): a channel of
 * up to BN_WG * BN_REG units lives in one work-group's registers. */
#define BN_REG TEENY__BN_REG

/* min_parts, max_parts: the partials per channel (spatial) or runs of the
 * batch (rows) the device's loop budget asks for (budget_parts). */
static void plan_make(const teeny_ctx *ctx, int wg, int B, int C, int S, int64_t min_parts, int64_t max_parts,
                      bn_plan *pl)
{
    int64_t target = (int64_t)(ctx->info.compute_units ? ctx->info.compute_units : 1) * 4;
    memset(pl, 0, sizeof *pl);
    pl->B = B;
    pl->C = C;
    pl->S = S;
    pl->spatial = S >= BN_SPATIAL_MIN;
    pl->cpu = pl->spatial && ctx->tune.variant == TEENY_VARIANT_CPU;
    if (pl->cpu)
        wg = 1; /* one item per partial: its runs are as long as the split allows */
    pl->vec = pl->spatial && S % 4 == 0 ? 4 : 1;
    if (pl->spatial) {
        /* the portable kernels: at most 4 work-groups per compute unit, all C*K of them (and C*G) at once in
         * one wave on a GPU that holds 4 of 256 items (an H200 SM holds 8 of the one-load-a-trip kernels;
         * with four units' loads in flight per item, bn_walk4, fewer items keep as many bytes in flight
         * with room for the registers they take). Rounded down, not up: one group per channel more than
         * fits (C 64: 17 of 16.5) is a second wave of a few groups, which the others wait for. */
        int units = (int)((int64_t)B * S / pl->vec);
        int64_t k = pl->cpu ? (target + C - 1) / C : target / C;
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
        /* the portable consumers: as many work-groups, >= 2 units per item */
        int64_t g = target / C;
        if (g > k_max) g = k_max;
        if (g < 1) g = 1;
        pl->ew_chunk = (int)((units + g - 1) / g);
        pl->G = pl->cpu ? 0 : (units + pl->ew_chunk - 1) / pl->ew_chunk;
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

/* ---- loop budget ----
 * Where a device limits a work-item's loop trips (teeny__loop_budget), the
 * reductions take more partials, so that no item passes it; elsewhere
 * (and wherever the default split fits) the plan, and so the bits, stay
 * as they are. Every loop counted as not unrolled, one more trip per entry:
 *   bn_stats_cpu / bn_grad_cpu: an item's F floats lie in at most
 *     F/S + 2 runs of a plane (the BN_RUNS loop), each a float16 loop
 *     (len/16 + 1) and a tail (<= 16), then two 8-lane sums (18):
 *     F/16 + 18 (F/S + 2) + 19 <= blocks * (1 + 288/S) + 55, F = 16 blocks;
 *   bn_stats_spatial / bn_grad_spatial: chunk/BN_WG + 1 strided trips
 *     (an upper bound: a trip takes four of those units, bn_walk4) and
 *     a tree of log2(BN_WG) levels of at most 3 trips, + 1;
 *   bn_stats_rows / bn_grad_rows: rows_per + 1;
 *   the consumers' merge (bn_normalize_train, bn_backward_dx, their CPU
 *     twins and _spatial twins, bn_grad_finalize): K + 1 (K partials per
 *     channel);
 *   bn_normalize_train_spatial / bn_backward_dx_spatial: ew_chunk/BN_WG + 1
 *     strided trips more (again four units a trip; the plan takes more
 *     work-groups per channel where they would not fit);
 *   bn_normalize(_train)_cpu / bn_backward_dx_cpu: BN_CPU_RUN/16 + 1 + 16
 *     more;
 *   bn_train_channel: three loops of BN_REG + 1 and two trees, + 1. */
static int log2_floor(int v)
{
    int l = 0;
    while ((1 << (l + 1)) <= v)
        l++;
    return l;
}

/* The fewest partials per channel (spatial) or runs of the batch (rows)
 * whose items stay within the budget, and the most partials per channel
 * a consuming item may merge (the CPU twins' runs counted too; at most the
 * profile's bn_parts). A spatial chunk is counted in units, so it
 * may hold one block (round) more than teeny__loop_split gave: the fixed
 * cost has room for it. */
static teeny_status budget_parts(teeny_ctx *ctx, int wg, int B, int S, int grad, int cpu, int64_t *min_parts,
                                 int64_t *max_parts)
{
    int64_t per, n, budget;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK)
        return st;
    *max_parts = budget == INT64_MAX ? INT64_MAX : budget - 1 - (cpu ? BN_CPU_RUN / 16 + 17 : 0);
    if (ctx->tune.profile->bn_parts > 0 && *max_parts > ctx->tune.profile->bn_parts)
        *max_parts = ctx->tune.profile->bn_parts;
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

/* The kernel that consumes the partials (or, inference, the one kernel):
 * by layout and variant; pl->G set: the portable spatial twins. */
static const char *consumer_name(const bn_plan *pl, int grad, int consume)
{
    if (grad && !consume)
        return "bn_grad_finalize";
    if (grad)
        return pl->cpu     ? "bn_backward_dx_cpu"
               : pl->fused ? "bn_backward_channel"
               : pl->G     ? "bn_backward_dx_spatial"
                           : "bn_backward_dx";
    if (consume)
        return pl->cpu     ? "bn_normalize_train_cpu"
               : pl->fused ? "bn_train_channel"
               : pl->G     ? "bn_normalize_train_spatial"
                           : "bn_normalize_train";
    return pl->cpu ? "bn_normalize_cpu" : "bn_normalize";
}

/* The plan's other loops: the consumer's merge of K partials (training
 * forward; backward: bn_backward_dx or, without dx, bn_grad_finalize),
 * the CPU element-wise runs. consume: the backward has dx, or the forward
 * trains. */
static teeny_status budget_check(teeny_ctx *ctx, const bn_plan *pl, int wg, int grad, int consume)
{
    const char *name = consumer_name(pl, grad, consume);
    int64_t trips = 0;
    if (grad || consume)
        trips += (int64_t)pl->K + 1;
    if (pl->cpu && (!grad || consume))
        trips += BN_CPU_RUN / 16 + 17;
    if (consume && pl->G)
        trips += (pl->ew_chunk + wg - 1) / wg + 1;
    return trips ? teeny__loop_check(ctx, name, trips) : TEENY_OK;
}

/* The spatial consumers' split within the budget: at most as many strided
 * rounds per work-group as the budget leaves beside the merge (none left:
 * budget_check reports it). */
static void budget_consumers(bn_plan *pl, int wg, int64_t budget)
{
    int64_t rounds = budget - (pl->K + 1) - 2;
    if (!pl->G || budget == INT64_MAX || rounds < 1 || pl->ew_chunk <= rounds * wg)
        return;
    pl->ew_chunk = (int)(rounds * wg);
    pl->G = (pl->total + pl->ew_chunk - 1) / pl->ew_chunk;
}

/* Whether a training forward (bn_train_channel) or a backward with dx
 * (bn_backward_channel) runs in one launch: the portable kernels, spatial
 * layout, a channel of at most wg * BN_REG units (held in its
 * work-group's registers), within the loop budget (the forward's count,
 * the larger), the kernel taking wg items. At any channel count: the
 * tensor is then at most C channels of 32 KB (wg 256, forward), a few
 * microseconds of one work-group per channel, while the two-launch path
 * pays a second launch and the gap before it (9-16 us apart on the H200,
 * as measured). The test hook BATCHNORM_TWO_LAUNCH keeps the two. */
static teeny_status plan_fused(teeny_ctx *ctx, int wg, char *opt, size_t cap, int64_t budget, int grad,
                               bn_plan *pl)
{
    /* planes of single floats: up to 32 per item (a float each, -DBN_VEC=1), where 8 do not hold the channel */
    int reg = pl->vec == 1 && (int64_t)pl->total > (int64_t)wg * BN_REG ? TEENY__BN_REG_SCALAR : BN_REG;
    int64_t trips = 3 * (reg + 1) + 2 * (3 * log2_floor(wg) + 1) + 1;
    char fused_opt[64];
    if (!pl->spatial || pl->cpu || ctx->hooks.batchnorm_two_launch || (int64_t)pl->total > (int64_t)wg * reg ||
        trips > budget)
        return TEENY_OK;
    snprintf(fused_opt, sizeof fused_opt, "%s%s", opt, reg != BN_REG ? " -DBN_REG=32 -DBN_VEC=1" : "");
    teeny_status st = teeny__kernel_fit(ctx, "batchnorm", fused_opt,
                                        grad ? "bn_backward_channel" : "bn_train_channel", (size_t)wg, 0, NULL);
    if (st == TEENY_ERR_UNSUPPORTED) { /* the two-launch path, its kernels checked */
        teeny__clear_error(ctx);
        return TEENY_OK;
    }
    pl->fused = st == TEENY_OK;
    if (pl->fused) /* the call's one launch takes the fused kernel's build */
        teeny__strlcpy(opt, fused_opt, cap);
    return st;
}

/* Pick BN_WG before anything is enqueued: the device's work-group size, or
 * the largest power of two below it that every kernel of this call takes
 * (the reductions need a power of two); then plan with it. grad: the
 * backward; consume: as budget_check. */
static teeny_status plan_fit(teeny_ctx *ctx, int B, int C, int S, int grad, int consume, bn_plan *pl, char *opt,
                             size_t cap)
{
    const char *names[2];
    int n = 0, wg;
    bn_plan shape = {0};
    shape.spatial = S >= BN_SPATIAL_MIN;
    shape.cpu = shape.spatial && ctx->tune.variant == TEENY_VARIANT_CPU;
    shape.G = shape.spatial && !shape.cpu; /* the _spatial consumers */
    if (grad || consume)
        names[n++] = grad ? (shape.spatial ? "bn_grad_spatial" : "bn_grad_rows")
                          : (shape.spatial ? "bn_stats_spatial" : "bn_stats_rows");
    names[n++] = consumer_name(&shape, grad, consume);
    int64_t min_parts = 1, max_parts = INT64_MAX, budget = INT64_MAX;
    teeny_status st = teeny__fit_halving(ctx, "batchnorm", "-DBN_WG=%d", names, n, ctx->work_group_size,
                                         TEENY__WG_FLOOR, &wg, opt, cap);
    if (st == TEENY_OK && (grad || consume))
        st = budget_parts(ctx, wg, B, S, grad, shape.cpu, &min_parts, &max_parts);
    if (st == TEENY_OK && (grad || consume))
        st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK)
        return st;
    plan_make(ctx, wg, B, C, S, min_parts, max_parts, pl);
    if (consume && (st = plan_fused(ctx, wg, opt, cap, budget, grad, pl)) != TEENY_OK)
        return st;
    if (pl->fused)
        return TEENY_OK;
    budget_consumers(pl, wg, budget);
    return budget_check(ctx, pl, wg, grad, consume);
}

/* The reduction partials of statistics (dy NULL) or gradient sums; act:
 * the backward's activation (BN_ACT_ARGS: w, bias, r as the dx kernel
 * takes them; bias unread, and may be NULL, for TEENY_ACT_NONE). */
static teeny_status reduce(teeny_ctx *ctx, const bn_plan *pl, const char *opt, const teeny_tensor *x,
                           const teeny_tensor *dy, const teeny_tensor *mean, const teeny_tensor *const *act_t,
                           const int *act, const float *eps, const int *r_is_var, cl_mem *part_out)
{
    int grad = dy != NULL;
    const char *name = grad ? (pl->cpu ? "bn_grad_cpu" : pl->spatial ? "bn_grad_spatial" : "bn_grad_rows")
                            : (pl->cpu ? "bn_stats_cpu" : pl->spatial ? "bn_stats_spatial" : "bn_stats_rows");
    cl_mem part;
    int offs[6] = {teeny__off(x), grad ? teeny__off(dy) : 0, grad ? teeny__off(mean) : 0};
    int CS = pl->C * pl->S, n = 0;
    teeny__karg k[24];
    teeny_status st = teeny__scratch(ctx, (size_t)pl->C * pl->K * 2 * sizeof(float), &part);
    if (st != TEENY_OK)
        return st;
    k[n++] = TEENY__KARG_MEM(x->buf);
    k[n++] = TEENY__KARG_INT(offs[0]);
    if (grad) {
        k[n++] = TEENY__KARG_MEM(dy->buf);
        k[n++] = TEENY__KARG_INT(offs[1]);
        k[n++] = TEENY__KARG_MEM(mean->buf);
        k[n++] = TEENY__KARG_INT(offs[2]);
    }
    if (pl->spatial) { /* C, S, vec, units, chunk (, K for the CPU variant) */
        k[n++] = TEENY__KARG_INT(pl->C);
        k[n++] = TEENY__KARG_INT(pl->S);
        k[n++] = TEENY__KARG_INT(pl->vec);
        k[n++] = TEENY__KARG_INT(pl->total);
        k[n++] = TEENY__KARG_INT(pl->chunk);
        if (pl->cpu)
            k[n++] = TEENY__KARG_INT(pl->K);
    } else { /* B, C*S, S, rows per run */
        k[n++] = TEENY__KARG_INT(pl->B);
        k[n++] = TEENY__KARG_INT(CS);
        k[n++] = TEENY__KARG_INT(pl->S);
        k[n++] = TEENY__KARG_INT(pl->chunk);
    }
    k[n++] = TEENY__KARG_MEM(part);
    if (grad) { /* BN_ACT_ARGS: w, bias, r, r_is_var, eps, act */
        for (int j = 0; j < 3; j++) {
            const teeny_tensor *t = act_t[j] ? act_t[j] : act_t[0];
            offs[3 + j] = teeny__off(t);
            k[n++] = TEENY__KARG_MEM(t->buf);
            k[n++] = TEENY__KARG_INT(offs[3 + j]);
        }
        k[n++] = TEENY__KARG_INT(*r_is_var);
        k[n++] = TEENY__KARG(*eps);
        k[n++] = TEENY__KARG_INT(*act);
    }
    *part_out = part;
    return teeny__run_kernel(ctx, "batchnorm", opt, name, k, n, 2, pl->red_global, pl->red_local);
}

/* The arguments bn_train_stats takes (BN_STATS_ARGS), appended to a;
 * part NULL: bn_train_channel's, from eps on. */
static int stats_args(const bn_plan *pl, const cl_mem *part, const float *eps, const float *momentum,
                      const teeny__op_args *oa, int *offs, teeny__karg *a)
{
    int n = 0;
    if (part) {
        a[n++] = TEENY__KARG_MEM(*part);
        a[n++] = TEENY__KARG_INT(pl->K);
        a[n++] = TEENY__KARG_INT(pl->P);
        a[n++] = TEENY__KARG_INT(pl->chunk);
        a[n++] = TEENY__KARG_INT(pl->total);
    }
    a[n++] = TEENY__KARG(*eps);
    a[n++] = TEENY__KARG(*momentum);
    for (int j = 0; j < 4; j++) { /* save_mean, save_rstd, running_mean, running_var */
        const teeny_tensor *t = oa->out[TEENY__BATCHNORM_OUT_SAVE_MEAN + j];
        offs[j] = teeny__off(t);
        a[n++] = TEENY__KARG_MEM(t->buf);
        a[n++] = TEENY__KARG_INT(offs[j]);
    }
    return n;
}

/* Training forward on the portable spatial kernels: one launch
 * (bn_train_channel) where plan_fused took it, else the partials and
 * bn_normalize_train_spatial. */
static teeny_status forward_train_spatial(teeny_ctx *ctx, const bn_plan *pl, const char *opt, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__BATCHNORM_X], *w = a->in[TEENY__BATCHNORM_WEIGHT],
                       *bias = a->in[TEENY__BATCHNORM_BIAS];
    const teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    float momentum = a->attrs.batchnorm.momentum, eps = a->attrs.batchnorm.eps;
    int act = a->attrs.batchnorm.act, offs[8] = {teeny__off(x), teeny__off(y), teeny__off(w), teeny__off(bias)};
    cl_mem part = NULL;
    teeny__karg k[40];
    int n = 0;
    size_t global[2] = {(size_t)pl->G * pl->red_local[0], (size_t)pl->C}, local[2] = {pl->red_local[0], 1};
    if (pl->fused) {
        global[0] = local[0];
    } else {
        teeny_status st = reduce(ctx, pl, opt, x, NULL, NULL, NULL, NULL, NULL, NULL, &part);
        if (st != TEENY_OK)
            return st;
    }
    k[n++] = TEENY__KARG_MEM(x->buf);
    k[n++] = TEENY__KARG_INT(offs[0]);
    k[n++] = TEENY__KARG_MEM(y->buf);
    k[n++] = TEENY__KARG_INT(offs[1]);
    k[n++] = TEENY__KARG_INT(pl->C);
    k[n++] = TEENY__KARG_INT(pl->S);
    k[n++] = TEENY__KARG_INT(pl->vec);
    k[n++] = TEENY__KARG_INT(pl->total);
    if (!pl->fused)
        k[n++] = TEENY__KARG_INT(pl->ew_chunk);
    k[n++] = TEENY__KARG_MEM(w->buf);
    k[n++] = TEENY__KARG_INT(offs[2]);
    k[n++] = TEENY__KARG_MEM(bias->buf);
    k[n++] = TEENY__KARG_INT(offs[3]);
    k[n++] = TEENY__KARG_INT(act);
    n += stats_args(pl, pl->fused ? NULL : &part, &eps, &momentum, a, offs + 4, k + n);
    return teeny__run_kernel(ctx, "batchnorm", opt, consumer_name(pl, 0, 1), k, n, 2, global, local);
}

/* Training: the partials, then bn_normalize_train(_cpu), which merges them
 * and writes y and the per-channel outputs. Inference: bn_normalize(_cpu)
 * with the running statistics. */
teeny_status teeny__batchnorm_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__BATCHNORM_X], *w = a->in[TEENY__BATCHNORM_WEIGHT],
                       *bias = a->in[TEENY__BATCHNORM_BIAS], *rm = a->in[TEENY__BATCHNORM_RUNNING_MEAN],
                       *rv = a->in[TEENY__BATCHNORM_RUNNING_VAR];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int training = a->training, r_is_var = 1, act = a->attrs.batchnorm.act;
    float momentum = a->attrs.batchnorm.momentum, eps = a->attrs.batchnorm.eps;
    int B = (int)x->shape[0], C = (int)x->shape[1], S = (int)(x->numel / ((int64_t)B * C));
    bn_plan pl;
    char opt[64];
    cl_mem part = NULL;
    teeny__karg k[40];
    int n = 0, offs[4], planes = B * C;
    int x_off = teeny__off(x), y_off = teeny__off(y), m_off = teeny__off(rm), r_off = teeny__off(rv),
        w_off = teeny__off(w), b_off = teeny__off(bias);
    teeny_status st;

    if ((st = plan_fit(ctx, B, C, S, 0, training, &pl, opt, sizeof opt)) != TEENY_OK)
        return st;
    if (training && pl.G)
        return forward_train_spatial(ctx, &pl, opt, a);
    if (training && (st = reduce(ctx, &pl, opt, x, NULL, NULL, NULL, NULL, NULL, NULL, &part)) != TEENY_OK)
        return st;
    const char *name = consumer_name(&pl, 0, training);
    k[n++] = TEENY__KARG_MEM(x->buf);
    k[n++] = TEENY__KARG_INT(x_off);
    k[n++] = TEENY__KARG_MEM(y->buf);
    k[n++] = TEENY__KARG_INT(y_off);
    if (!pl.cpu) {
        k[n++] = TEENY__KARG_INT(pl.inner);
        k[n++] = TEENY__KARG_INT(pl.outer);
    }
    k[n++] = TEENY__KARG_INT(C);
    k[n++] = TEENY__KARG_INT(S);
    if (pl.cpu)
        k[n++] = TEENY__KARG_INT(planes);
    else if (!training) /* bn_normalize: either layout */
        k[n++] = TEENY__KARG_INT(pl.spatial);
    if (pl.cpu ? training : !training) /* bn_normalize_train_cpu, bn_normalize */
        k[n++] = TEENY__KARG_INT(pl.vec);
    if (!training) {
        k[n++] = TEENY__KARG_MEM(rm->buf);
        k[n++] = TEENY__KARG_INT(m_off);
        k[n++] = TEENY__KARG_MEM(rv->buf);
        k[n++] = TEENY__KARG_INT(r_off);
        k[n++] = TEENY__KARG_INT(r_is_var);
        k[n++] = TEENY__KARG(eps);
    }
    k[n++] = TEENY__KARG_MEM(w->buf);
    k[n++] = TEENY__KARG_INT(w_off);
    k[n++] = TEENY__KARG_MEM(bias->buf);
    k[n++] = TEENY__KARG_INT(b_off);
    k[n++] = TEENY__KARG_INT(act);
    if (training)
        n += stats_args(&pl, &part, &eps, &momentum, a, offs, k + n);
    return teeny__run_kernel(ctx, "batchnorm", opt, name, k, n, 2, pl.ew_global, pl.ew_local);
}

/* The gradient partials, then bn_backward_dx(_cpu), which merges them and
 * writes dweight, dbias and dx; without dx, bn_grad_finalize. */
teeny_status teeny__batchnorm_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    int training = a->training, frozen = !training, r_is_var = frozen;
    const teeny_tensor *x = a->in[TEENY__BATCHNORM_X], *w = a->in[TEENY__BATCHNORM_WEIGHT],
                       *dy = a->in[TEENY__BATCHNORM_DY], *bias = a->in[TEENY__BATCHNORM_BIAS];
    const teeny_tensor *mean = a->in[training ? TEENY__BATCHNORM_SAVE_MEAN : TEENY__BATCHNORM_RUNNING_MEAN],
                       *r = a->in[training ? TEENY__BATCHNORM_SAVE_RSTD : TEENY__BATCHNORM_RUNNING_VAR];
    teeny_tensor *dx = a->out[TEENY__BATCHNORM_X], *dw = a->out[TEENY__BATCHNORM_WEIGHT],
                 *db = a->out[TEENY__BATCHNORM_BIAS];
    float eps = a->attrs.batchnorm.eps;
    int act = a->attrs.batchnorm.act;
    int B = (int)x->shape[0], C = (int)x->shape[1], S = (int)(x->numel / ((int64_t)B * C));
    float inv_n = (float)(1.0 / ((double)B * S));
    bn_plan pl;
    char opt[64];
    cl_mem part = NULL;
    size_t g = (size_t)C, l = 1;
    teeny__karg k[32];
    int n = 0, planes = B * C;
    int r_off = teeny__off(r), dw_off = teeny__off(dw), db_off = teeny__off(db), x_off = teeny__off(x),
        dy_off = teeny__off(dy), m_off = teeny__off(mean), w_off = teeny__off(w), dx_off = dx ? teeny__off(dx) : 0;
    teeny_status st;

    if ((st = plan_fit(ctx, B, C, S, 1, dx != NULL, &pl, opt, sizeof opt)) != TEENY_OK)
        return st;
    if (!bias) /* the eager functions have none: act is TEENY_ACT_NONE, bias unread */
        bias = w;
    int b_off = teeny__off(bias);
    const teeny_tensor *act_t[3] = {w, bias, r};
    if (!pl.fused && (st = reduce(ctx, &pl, opt, x, dy, mean, act_t, &act, &eps, &r_is_var, &part)) != TEENY_OK)
        return st;
    if (!dx) {
        const teeny__karg f[] = {TEENY__KARG_MEM(part),  TEENY__KARG_INT(pl.K),     TEENY__KARG_INT(C),
                                 TEENY__KARG_MEM(r->buf), TEENY__KARG_INT(r_off),   TEENY__KARG_INT(r_is_var),
                                 TEENY__KARG(eps),        TEENY__KARG_MEM(dw->buf), TEENY__KARG_INT(dw_off),
                                 TEENY__KARG_MEM(db->buf), TEENY__KARG_INT(db_off)};
        return teeny__run_kernel(ctx, "batchnorm", opt, "bn_grad_finalize", f, 11, 1, &g, &l);
    }
    k[n++] = TEENY__KARG_MEM(x->buf);
    k[n++] = TEENY__KARG_INT(x_off);
    k[n++] = TEENY__KARG_MEM(dy->buf);
    k[n++] = TEENY__KARG_INT(dy_off);
    k[n++] = TEENY__KARG_MEM(dx->buf);
    k[n++] = TEENY__KARG_INT(dx_off);
    if (!pl.cpu && !pl.G) {
        k[n++] = TEENY__KARG_INT(pl.inner);
        k[n++] = TEENY__KARG_INT(pl.outer);
    }
    k[n++] = TEENY__KARG_INT(C);
    k[n++] = TEENY__KARG_INT(S);
    if (pl.cpu) {
        k[n++] = TEENY__KARG_INT(planes);
    } else if (pl.G) { /* bn_backward_dx_spatial: vec, units, ew_chunk, grid (BN_WG * G, C); _channel: G 1 */
        k[n++] = TEENY__KARG_INT(pl.vec);
        k[n++] = TEENY__KARG_INT(pl.total);
        if (!pl.fused)
            k[n++] = TEENY__KARG_INT(pl.ew_chunk);
        pl.ew_global[0] = (size_t)(pl.fused ? 1 : pl.G) * pl.red_local[0];
        pl.ew_global[1] = (size_t)C;
        pl.ew_local[0] = pl.red_local[0];
        pl.ew_local[1] = 1;
    }
    const teeny__karg tail[] = {TEENY__KARG_MEM(mean->buf), TEENY__KARG_INT(m_off),     TEENY__KARG_MEM(r->buf),
                                TEENY__KARG_INT(r_off),     TEENY__KARG_INT(r_is_var),  TEENY__KARG(eps),
                                TEENY__KARG_MEM(w->buf),    TEENY__KARG_INT(w_off),     TEENY__KARG_MEM(part),
                                TEENY__KARG_INT(pl.K),      TEENY__KARG_MEM(dw->buf),   TEENY__KARG_INT(dw_off),
                                TEENY__KARG_MEM(db->buf),   TEENY__KARG_INT(db_off),    TEENY__KARG(inv_n),
                                TEENY__KARG_INT(frozen),    TEENY__KARG_MEM(bias->buf), TEENY__KARG_INT(b_off),
                                TEENY__KARG_INT(act)};
    for (int j = 0; j < 19; j++)
        if (!pl.fused || (j != 8 && j != 9)) /* bn_backward_channel: no partials */
            k[n++] = tail[j];
    return teeny__run_kernel(ctx, "batchnorm", opt, consumer_name(&pl, 1, 1), k, n, 2, pl.ew_global, pl.ew_local);
}
