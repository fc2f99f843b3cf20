/*
 * probe.c -- device facts no query reports, found by running a kernel of
 * cl/probe.cl once per context and kept on the context.
 *
 * The loop budget. Mesa's llvmpipe (rusticl on a CPU) stops every loop of a
 * kernel invocation once its loops have run 65535 trips in all, silently
 * (gallivm's loop limiter, LP_MAX_TGSI_LOOP_ITERATIONS, shared by every
 * loop of the kernel): a work-item that owns a long reduction returns a
 * truncated sum. Ops whose per-item trips grow with the problem ask
 * teeny__loop_budget and split their work so no item passes it.
 */
#include "internal.h"

/* Trips the probe asks for: past any limit worth honouring, and exact in
 * the kernel's float count (< 2^24). */
#define PROBE_TRIPS (1 << 20)

static teeny_status probe_loop_limit(teeny_ctx *ctx, int64_t *limit)
{
    static const char name[] = "probe_loop_trips";
    cl_kernel k = NULL;
    cl_mem out = NULL;
    cl_int err = CL_SUCCESS;
    int n = PROBE_TRIPS;
    float trips = 0.0f;
    size_t one = 1;
    /* a kernel object of its own (not a recorder's) and a direct enqueue:
     * the probe may run while a graph records its launches */
    teeny_status st = teeny__kernel_create(ctx, "probe", "", name, &k);
    if (st != TEENY_OK)
        return st;
    out = TEENY_CLO(clCreateBuffer, &err, ctx->context, CL_MEM_READ_WRITE, sizeof trips, NULL);
    if (!out) {
        st = teeny__cl_error(ctx, err, "clCreateBuffer");
        goto cleanup;
    }
    st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &out, sizeof(int), &n, (size_t)0);
    if (st == TEENY_OK)
        st = teeny__enqueue_kernel(ctx, k, name, 1, &one, &one);
    if (st == TEENY_OK && (err = TEENY_CL(clEnqueueReadBuffer, ctx->queue, out, CL_TRUE, 0, sizeof trips, &trips, 0,
                                          NULL, NULL)) != CL_SUCCESS)
        st = teeny__cl_error(ctx, err, "clEnqueueReadBuffer");
    if (st == TEENY_OK) {
        *limit = trips >= (float)n ? 0 : (int64_t)trips;
        if (*limit)
            teeny__log(TEENY_LOG_INFO, "this device ends a kernel's loops after %lld trips in all (%s): long "
                       "reductions are split to stay under it", (long long)*limit, ctx->info.device_name);
    }
cleanup:
    TEENY_CL_RELEASE(clReleaseMemObject, out);
    TEENY_CL_RELEASE(clReleaseKernel, k);
    return st;
}

teeny_status teeny__loop_budget(teeny_ctx *ctx, int64_t *budget)
{
    if (!ctx->loop_probed) {
        int64_t limit = 0;
        teeny_status st = probe_loop_limit(ctx, &limit);
        if (st != TEENY_OK)
            return st;
        ctx->loop_limit = limit;
        ctx->loop_probed = 1;
    }
    /* half the limit: the ops' trip counts are estimates of what a
     * compiler leaves as loops (it may unroll some, or add a trip) */
    *budget = ctx->loop_limit ? ctx->loop_limit / 2 : INT64_MAX;
    return TEENY_OK;
}
