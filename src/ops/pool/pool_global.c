/*
 * pool_global.c -- global average pooling (x [B, C, H, W] -> y [B, C]),
 * forward and backward, and its eager calls; its shape rule
 * (teeny__global_avgpool_infer) sits with the other pooling shapes in
 * pool.c. Kernels: cl/pool.cl (pool_gap_*). One work-group per plane, or
 * one work-item per plane (gap_items) in the CPU variant
 * (ctx->tune.variant) and on any device where the planes are small and
 * many (GAP_ITEM_S, GAP_ITEM_PER_CU); where a device limits a work-item's
 * loop trips (teeny__loop_budget) a plane's sum goes in chunks.
 * Tunable: GAP_WG, the work-group size (ctx->work_group_size).
 */
#include "../ops.h"

#define KI(i) TEENY__KARG_INT(i)
#define KM(m) TEENY__KARG_MEM(m)

/* Planes of at most GAP_ITEM_S elements, at least GAP_ITEM_PER_CU of them
 * per compute unit, take a work-item each on every device: a work-group
 * and its tree per 7x7 plane cost 16x the time of the reads (H200, the
 * example net's pooling of 128 x 128 planes: 0.020 ms). */
#define GAP_ITEM_S 256
#define GAP_ITEM_PER_CU 64

/* One work-item per plane (the CPU variant; small planes): grid (P, B*C),
 * item (p, bc) summing chunk elements of its plane, chunk + 1 loop trips. Where the device
 * limits a work-item's trips and a plane passes them, each plane is cut
 * into P chunks (teeny__loop_split) whose sums pool_gap_parts_cpu adds up
 * in order (P + 1 trips); elsewhere P = 1 and the item writes the mean. */
static teeny_status gap_items(teeny_ctx *ctx, const teeny_tensor *x, teeny_tensor *y, int S, int planes)
{
    static const char name[] = "pool_gap_forward_cpu", parts_name[] = "pool_gap_parts_cpu";
    int x_off = teeny__off(x), y_off = teeny__off(y), chunk, P;
    int64_t per;
    cl_mem part = y->buf; /* stand-in, never written where P == 1 */
    teeny_status st = teeny__loop_split(ctx, name, S, 1, 1, &per);
    if (st != TEENY_OK)
        return st;
    chunk = (int)per;
    P = (int)(((int64_t)S + chunk - 1) / chunk);
    if (P > 1 && ((st = teeny__loop_check(ctx, parts_name, (int64_t)P + 1)) != TEENY_OK ||
                  (st = teeny__scratch(ctx, (size_t)planes * (size_t)P * sizeof(float), &part)) != TEENY_OK))
        return st;
    teeny__karg a[] = {KM(x->buf), KI(x_off), KI(S), KI(planes), KM(y->buf), KI(y_off), KI(chunk), KI(P), KM(part)};
    cl_kernel k;
    st = teeny__kernel_get(ctx, "pool", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_arg_list(ctx, k, name, a, (int)(sizeof a / sizeof a[0]));
    if (st == TEENY_OK) {
        size_t global[2] = {(size_t)P, (size_t)planes};
        size_t local[2] = {1, teeny__local_clamp(ctx, k, name, (size_t)ctx->work_group_size)};
        st = teeny__launch(ctx, k, name, 2, global, local);
    }
    if (st != TEENY_OK || P == 1)
        return st;
    teeny__karg b[] = {KM(part), KI(P), KI(S), KI(planes), KM(y->buf), KI(y_off)};
    st = teeny__kernel_get(ctx, "pool", "", parts_name, &k);
    if (st == TEENY_OK)
        st = teeny__set_arg_list(ctx, k, parts_name, b, (int)(sizeof b / sizeof b[0]));
    return st == TEENY_OK ? teeny__launch_1d(ctx, k, parts_name, (size_t)planes) : st;
}

/* The portable global pooling: a work-group of wg items per plane, each
 * summing every wg-th element (S / wg + 1 trips), then a tree (log2(wg)
 * levels of at most 3 trips, + 1). Where that passes a device's loop
 * budget, the CPU variant's split takes the plane instead. */
teeny_status teeny__global_avgpool_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    static const char name[] = "pool_gap_forward";
    const teeny_tensor *x = a->in[TEENY__GLOBAL_AVGPOOL_X];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int S = (int)(x->shape[2] * x->shape[3]), x_off = teeny__off(x), y_off = teeny__off(y);
    int planes = (int)(x->shape[0] * x->shape[1]);
    char opt[32];
    cl_kernel k;
    int wg, levels = 0;
    int64_t budget;
    int64_t cus = ctx->info.compute_units ? ctx->info.compute_units : 1;
    if (ctx->tune.variant == TEENY_VARIANT_CPU || (S <= GAP_ITEM_S && planes >= GAP_ITEM_PER_CU * cus))
        return gap_items(ctx, x, y, S, planes);
    /* GAP_WG: the device's work-group size, or the largest power of two
     * below it the kernel takes (its reduction halves spans) */
    teeny_status st = teeny__fit_halving(ctx, "pool", "-DGAP_WG=%d", (const char *const[]){name}, 1,
                                         ctx->work_group_size, TEENY__WG_FLOOR, &wg, opt, sizeof opt);
    if (st == TEENY_OK)
        st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK)
        return st;
    while ((1 << levels) < wg)
        levels++;
    if (((int64_t)S + wg - 1) / wg + 1 + 3 * (int64_t)levels + 1 > budget)
        return gap_items(ctx, x, y, S, planes);
    st = teeny__kernel_get(ctx, "pool", opt, name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(int), &S,
                             sizeof(cl_mem), &y->buf, sizeof(int), &y_off, (size_t)0);
    if (st == TEENY_OK) {
        size_t local = (size_t)wg, global = local * (size_t)planes;
        st = teeny__launch(ctx, k, name, 1, &global, &local);
    }
    return st;
}

teeny_status teeny__global_avgpool_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    static const char name[] = "pool_gap_backward";
    const teeny_tensor *dy = a->in[TEENY__GLOBAL_AVGPOOL_DY];
    teeny_tensor *dx = a->out[TEENY__GLOBAL_AVGPOOL_X];
    if (!dx)
        return TEENY_OK;
    int S = (int)(dx->shape[2] * dx->shape[3]), total = (int)dx->numel, dy_off = teeny__off(dy),
        dx_off = teeny__off(dx);
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "pool", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &dy->buf, sizeof(int), &dy_off, sizeof(int), &S,
                             sizeof(int), &total, sizeof(cl_mem), &dx->buf, sizeof(int), &dx_off, (size_t)0);
    if (st == TEENY_OK)
        st = teeny__launch_1d(ctx, k, name, (size_t)total);
    return st;
}

/* y (and dy) may be [B, C] or [B, C, 1, 1]. */
teeny_status teeny_global_avgpool_forward(teeny_ctx *ctx, const teeny_tensor *x, teeny_tensor *y)
{
    static const teeny__eager e = {
        TEENY__EAGER_OF("teeny_global_avgpool_forward", GLOBAL_AVGPOOL, global_avgpool, forward)};
    const teeny__earg args[] = {{"x", x, TEENY__GLOBAL_AVGPOOL_X, 0},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT | TEENY__EA_HW1}};
    EAGER_BEGIN("teeny_global_avgpool_forward");
    return teeny__eager_run(ctx, &e, args, 2);
}

teeny_status teeny_global_avgpool_backward(teeny_ctx *ctx, const teeny_tensor *dy, teeny_tensor *dx)
{
    static const teeny__eager e = {
        TEENY__EAGER_OF("teeny_global_avgpool_backward", GLOBAL_AVGPOOL, global_avgpool, backward)};
    const teeny__earg args[] = {{"dy", dy, TEENY__GLOBAL_AVGPOOL_DY, TEENY__EA_HW1},
                                {"dx", dx, TEENY__GLOBAL_AVGPOOL_X, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_global_avgpool_backward");
    return teeny__eager_run(ctx, &e, args, 2);
}
