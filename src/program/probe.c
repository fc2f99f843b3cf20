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
 *
 * tf32 tensor cores. Where the device's compiler may take NVIDIA inline
 * PTX, one warp runs mma.sync.m16n8k8 .tf32 on inputs whose product is
 * exact, and a shfl.sync.bfly of the result (cl/common.cl's tf32 helpers,
 * which every TEENY_TF32 kernel uses); the families take their TEENY_TF32
 * kernels only where that built, ran and gave the exact values
 * (teeny__tf32_capable), never on a device name.
 */
#include "internal.h"

/* Trips the probe asks for: past any limit worth honouring, and exact in
 * the kernel's float count (< 2^24). */
#define PROBE_TRIPS (1 << 20)

/* A probe runs on a queue of its own, created and released around it, and
 * waits only for itself: never for work the application has on the
 * context's queue (a queue held by a user event would deadlock a probe
 * that waited there), and nothing of it is recorded or profiled. */
static teeny_status probe_run(teeny_ctx *ctx, cl_kernel k, size_t items, cl_mem out, void *dst,
                              size_t bytes)
{
    cl_int err;
    teeny_status st = TEENY_OK;
    cl_command_queue q = TEENY_CLO(clCreateCommandQueue, &err, ctx->context, ctx->device, 0);
    if (!q)
        return teeny__cl_error(ctx, err, "clCreateCommandQueue");
    if ((err = TEENY_CL(clEnqueueNDRangeKernel, q, k, 1, NULL, &items, &items, 0, NULL, NULL)) != CL_SUCCESS)
        st = teeny__cl_error(ctx, err, "clEnqueueNDRangeKernel");
    else if ((err = TEENY_CL(clEnqueueReadBuffer, q, out, CL_TRUE, 0, bytes, dst, 0, NULL, NULL)) != CL_SUCCESS)
        st = teeny__cl_error(ctx, err, "clEnqueueReadBuffer");
    TEENY_CL_RELEASE(clReleaseCommandQueue, q);
    return st;
}

static teeny_status probe_loop_limit(teeny_ctx *ctx, int64_t *limit)
{
    static const char name[] = "probe_loop_trips";
    cl_kernel k = NULL;
    cl_mem out = NULL;
    cl_int err = CL_SUCCESS;
    int n = PROBE_TRIPS;
    float trips = 0.0f;
    /* a kernel object of its own (not a recorder's) and a queue of its
     * own: the probe may run while a graph records its launches */
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
        st = probe_run(ctx, k, 1, out, &trips, sizeof trips);
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
    if (!ctx->prog.loop_probed) {
        int64_t limit = 0;
        teeny_status st = probe_loop_limit(ctx, &limit);
        if (st != TEENY_OK)
            return st;
        ctx->prog.loop_limit = limit;
        ctx->prog.loop_probed = 1;
    }
    *budget = teeny__loop_budget_known(ctx);
    return TEENY_OK;
}

int64_t teeny__loop_budget_known(const teeny_ctx *ctx)
{
    /* half the limit: the ops' trip counts are estimates of what a
     * compiler leaves as loops (it may unroll some, or add a trip) */
    return ctx->prog.loop_probed && ctx->prog.loop_limit ? ctx->prog.loop_limit / 2 : INT64_MAX;
}

/* ---- the CPU window kernels' band (program.h) under the loop budget ---- */

static int64_t band_rows(const teeny__band_geom *b, int64_t R)
{
    return (R - 1) * b->sh + (b->kh - 1) * b->dh + 1;
}

static int64_t band_pitch(const teeny__band_geom *b)
{
    return (b->OW - 1) * b->sw + (b->kw - 1) * b->dw + 1;
}

/* An item's trips for R output rows, every loop counted with one more
 * trip: the slack's fill, the band's rows (3 loops over pitch columns in
 * all), and per block of 4 rows its chunks of 8 columns, each with the
 * taps (kh + 1, kw + 1 per row of taps) and 4 stores' tails (8 at most). */
static int64_t band_trips(const teeny__band_geom *b, int64_t R)
{
    int64_t rows = band_rows(b, R), blocks = (R + 3) / 4, chunks = (b->OW + 7) / 8;
    int64_t chunk = (b->kh + 1) + b->kh * (b->kw + 1) + 4 * 8;
    return (TEENY__BAND_SLACK + 1) + (rows + 1) + rows * (band_pitch(b) + 3) + (blocks + 1) +
           blocks * (chunks + 1 + chunks * chunk);
}

teeny_status teeny__band_rows_max(teeny_ctx *ctx, const teeny__band_geom *b, int64_t *rows_max)
{
    int64_t budget, pitch = band_pitch(b);
    teeny_status st;
    *rows_max = 0;
    if (b->sw > 2 || b->ph < 0 || b->pw < 0 || band_rows(b, 1) * pitch > TEENY__BAND_FLOATS)
        return TEENY_OK;
    if ((st = teeny__loop_budget(ctx, &budget)) != TEENY_OK)
        return st;
    int64_t fit = (TEENY__BAND_FLOATS / pitch - band_rows(b, 1)) / b->sh + 1;
    while (fit > 0 && band_trips(b, fit) > budget)
        fit--;
    *rows_max = fit;
    return TEENY_OK;
}

teeny_status teeny__loop_check(teeny_ctx *ctx, const char *name, int64_t trips)
{
    int64_t budget;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    if (st == TEENY_OK && trips > budget)
        st = teeny__error(ctx, TEENY_ERR_UNSUPPORTED,
                          "%s: a work-item would run about %lld loop trips; %s ends a kernel's loops after %lld "
                          "in all", name, (long long)trips, ctx->info.device_name, (long long)ctx->prog.loop_limit);
    return st;
}

teeny_status teeny__loop_split(teeny_ctx *ctx, const char *name, int64_t n, int64_t fixed, int64_t per_unit,
                               int64_t *per_piece)
{
    int64_t budget, pieces;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    *per_piece = n > 0 ? n : 1;
    if (st != TEENY_OK || n <= 0 || fixed + per_unit * n <= budget)
        return st;
    if ((st = teeny__loop_check(ctx, name, fixed + per_unit)) != TEENY_OK)
        return st;
    *per_piece = (budget - fixed) / per_unit;
    pieces = (n + *per_piece - 1) / *per_piece;
    *per_piece = (n + pieces - 1) / pieces;
    return TEENY_OK;
}

/* The probe's operands: multiples of 1/4 up to 4 (exact in tf32, and
 * every sum of 8 products exact in fp32). */
static float probe_value(int i, int mul)
{
    return (float)((i * mul) % 33 - 16) / 4.0f;
}

static teeny_status probe_tf32(teeny_ctx *ctx, int *ok)
{
    static const char name[] = "probe_tf32_mma";
    float a[128], b[64], c[160];
    cl_mem buf[3] = {NULL, NULL, NULL};
    size_t bytes[3] = {sizeof a, sizeof b, sizeof c};
    cl_kernel k = NULL;
    cl_int err = CL_SUCCESS;
    *ok = 0;
    for (int i = 0; i < 128; i++)
        a[i] = probe_value(i, 7);
    for (int i = 0; i < 64; i++)
        b[i] = probe_value(i, 5);
    /* a compiler that refuses the PTX is an answer, not an error */
    if (teeny__kernel_create(ctx, "probe", "-DTEENY_TF32=1", name, &k) != TEENY_OK) {
        teeny__log(TEENY_LOG_INFO, "no tf32 tensor cores on %s: %s", ctx->info.device_name, teeny_last_error(ctx));
        teeny__clear_error(ctx);
        return TEENY_OK;
    }
    teeny_status st = TEENY_OK;
    const void *init[3] = {a, b, NULL};
    for (int i = 0; i < 3 && st == TEENY_OK; i++) {
        buf[i] = TEENY_CLO(clCreateBuffer, &err, ctx->context,
                           init[i] ? CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR : CL_MEM_WRITE_ONLY, bytes[i],
                           (void *)init[i]);
        if (!buf[i])
            st = teeny__cl_error(ctx, err, "clCreateBuffer");
    }
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &buf[0], sizeof(cl_mem), &buf[1], sizeof(cl_mem), &buf[2],
                             (size_t)0);
    if (st == TEENY_OK)
        st = probe_run(ctx, k, 32, buf[2], c, sizeof c);
    if (st == TEENY_OK) {
        int exact = 1;
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 8; j++) {
                float want = 0.0f;
                for (int t = 0; t < 8; t++)
                    want += a[i * 8 + t] * b[t * 8 + j];
                exact &= c[i * 8 + j] == want;
            }
        for (int lane = 0; lane < 32; lane++) { /* lane ^ 1's C element (r, 2k) */
            int src = lane ^ 1;
            exact &= c[128 + lane] == c[(src >> 2) * 8 + 2 * (src & 3)];
        }
        *ok = exact;
        teeny__log(exact ? TEENY_LOG_INFO : TEENY_LOG_WARN, "tf32 mma probe on %s: %s", ctx->info.device_name,
                   exact ? "exact; tf32 kernels available" : "wrong product; tf32 kernels off");
    }
    for (int i = 0; i < 3; i++)
        TEENY_CL_RELEASE(clReleaseMemObject, buf[i]);
    TEENY_CL_RELEASE(clReleaseKernel, k);
    return st;
}

teeny_status teeny__tf32_capable(teeny_ctx *ctx, int *capable)
{
    if (!ctx->prog.tf32_probed) {
        int ok = 0;
        teeny_status st = ctx->info.has_nvidia_ptx ? probe_tf32(ctx, &ok) : TEENY_OK;
        if (st != TEENY_OK)
            return st;
        ctx->prog.tf32_mma = ok;
        ctx->prog.tf32_probed = 1;
    }
    *capable = ctx->prog.tf32_mma;
    return TEENY_OK;
}

teeny_status teeny_ctx_tf32_active(teeny_ctx *ctx, int *active)
{
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_ctx_tf32_active: ctx is NULL or destroyed");
    if (!active)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_ctx_tf32_active: active is NULL");
    int capable = 0;
    teeny_status st = ctx->tf32 ? teeny__tf32_capable(ctx, &capable) : TEENY_OK;
    const teeny__profile *p = ctx->tune.profile;
    *active = st == TEENY_OK && ctx->tf32 && capable &&
              (p->conv_tf32.n_tiles > 0 || p->linear_tf32.rm > 0 || p->attention_tf32.warps > 0);
    return st;
}
