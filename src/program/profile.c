/*
 * profile.c -- where launches reach the queue, and the profiler that
 * watches them: teeny__enqueue_kernel is the one place a kernel is
 * enqueued (eager launches from launch.c, graph replays from record.c), so
 * between teeny_profile_begin and teeny_profile_end every launch's event
 * and kernel name is kept; the event list grows as needed (it used to stop
 * at 4,096 and under-report). If growing fails the launch still runs, its
 * event is dropped, and teeny_profile_end reports TEENY_ERR_NOMEM instead
 * of a short count. TEENY_PROFILE=1 logs a per-kernel summary at the end:
 * every kernel (no cap on their number), slowest first; TEENY_PROFILE=2
 * also each launch in order, with its work-items and device time.
 *
 * The bottom of the launch stack: it calls only device.c (context checks
 * and its release hook) and status.c.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define PROFILE_FIRST_CAP 4096

teeny_status teeny__enqueue_fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value)
{
    teeny_status st = TEENY_OK;
    TEENY_CL_TRY(clEnqueueFillBuffer, ctx->queue, buf, &value, sizeof value, off * 4, n * 4, 0, NULL, NULL);
cleanup:
    return st;
}

/* The profile's parallel arrays, one entry per kept launch: its event,
 * kernel name, graph node (a copy) and work-items. */
#define PROF_ARRAYS 4

static void profile_arrays(teeny__program_state *s, void **arrays[PROF_ARRAYS], size_t sizes[PROF_ARRAYS])
{
    arrays[0] = (void **)&s->prof_events;
    arrays[1] = (void **)&s->prof_names;
    arrays[2] = (void **)&s->prof_nodes;
    arrays[3] = (void **)&s->prof_items;
    sizes[0] = sizeof *s->prof_events;
    sizes[1] = sizeof *s->prof_names;
    sizes[2] = sizeof *s->prof_nodes;
    sizes[3] = sizeof *s->prof_items;
}

/* Every array at cap entries (0: freed), the first prof_count kept; 0,
 * with nothing changed, when out of host memory. */
static int profile_resize(teeny_ctx *ctx, int cap)
{
    teeny__program_state *s = &ctx->prog;
    void **arrays[PROF_ARRAYS], *fresh[PROF_ARRAYS] = {NULL};
    size_t sizes[PROF_ARRAYS];
    profile_arrays(s, arrays, sizes);
    for (int i = 0; i < PROF_ARRAYS && cap; i++)
        if (!(fresh[i] = teeny__calloc((size_t)cap, sizes[i]))) {
            for (int j = 0; j < i; j++)
                teeny__free(fresh[j]);
            return 0;
        }
    for (int i = 0; i < PROF_ARRAYS; i++) {
        if (fresh[i] && *arrays[i])
            memcpy(fresh[i], *arrays[i], (size_t)s->prof_count * sizes[i]);
        teeny__free(*arrays[i]);
        *arrays[i] = fresh[i];
    }
    s->prof_cap = cap;
    return 1;
}

/* Keep one more event: grow the arrays, leaving room for the next so
 * that prof_count < prof_cap always holds. 0 when out of host memory. */
static int profile_grow(teeny_ctx *ctx)
{
    if (ctx->prog.prof_count + 1 < ctx->prog.prof_cap)
        return 1;
    if (ctx->prog.prof_cap > INT_MAX / 2)
        return 0; /* counted as lost, like a failed allocation */
    return profile_resize(ctx, ctx->prog.prof_cap * 2);
}

teeny_status teeny__enqueue_kernel(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, const char *node,
                                   cl_uint dims, const size_t *g, const size_t *local)
{
    cl_int err;
    cl_event ev = NULL, *evp = NULL;
    int64_t items = 1;
    if (ctx->prog.profiling)
        evp = &ev;
    err = TEENY_CL(clEnqueueNDRangeKernel, ctx->queue, k, dims, NULL, g, local, 0, NULL, evp);
    if (err == CL_SUCCESS) {
        for (cl_uint i = 0; i < dims; i++)
            items *= (int64_t)g[i];
        ctx->prog.items_enqueued += items;
        ctx->prog.kernels_enqueued++;
    }
    if (err == CL_SUCCESS && ev) {
        char *copy = node ? teeny__strdup(node) : NULL;
        if ((!node || copy) && profile_grow(ctx)) {
            ctx->prog.prof_nodes[ctx->prog.prof_count] = copy;
            ctx->prog.prof_names[ctx->prog.prof_count] = kernel_name;
            ctx->prog.prof_items[ctx->prog.prof_count] = items;
            ctx->prog.prof_events[ctx->prog.prof_count++] = ev;
        } else {
            teeny__free(copy);
            TEENY_CL_RELEASE(clReleaseEvent, ev); /* the launch stands; the profile reports the loss */
            ctx->prog.prof_lost++;
        }
    }
    if (err != CL_SUCCESS)
        return teeny__error(ctx, TEENY_ERR_OPENCL, "clEnqueueNDRangeKernel failed: %s (%d), kernel %s on %s",
                            teeny__cl_error_name(err), (int)err, kernel_name, ctx->info.device_name);
    return TEENY_OK;
}

/* ---- profiling ---- */

/* Each launch of the profile in order, with its device time and the idle
 * gap since the previous launch ended, to fn; 0 when an event's times
 * cannot be read. Events are complete (teeny_profile_end waited). */
static int profile_walk(teeny_ctx *ctx, teeny_profile_fn fn, void *user)
{
    const teeny__program_state *p = &ctx->prog;
    cl_ulong prev_end = 0;
    for (int i = 0; i < p->prof_count; i++) {
        cl_ulong s = 0, e = 0;
        if (TEENY_CL(clGetEventProfilingInfo, p->prof_events[i], CL_PROFILING_COMMAND_START, sizeof s, &s, NULL) ||
            TEENY_CL(clGetEventProfilingInfo, p->prof_events[i], CL_PROFILING_COMMAND_END, sizeof e, &e, NULL))
            return 0;
        teeny_profile_launch l = {i, p->prof_names[i], p->prof_nodes[i], (long long)p->prof_items[i],
                                  (double)(e - s) * 1e-6, i && s > prev_end ? (double)(s - prev_end) * 1e-6 : 0.0};
        fn(&l, user);
        prev_end = e;
    }
    return 1;
}

/* TEENY_PROFILE=1: log each kernel's launches and device time, slowest
 * first, and the totals; each (TEENY_PROFILE=2): every launch before
 * them, in order. */
typedef struct {
    const char *name;
    double ms;
    int calls;
} profile_row;

typedef struct {
    profile_row *rows;
    int n, each;
    double total;
} profile_sum;

static int profile_row_cmp(const void *a, const void *b)
{
    const profile_row *x = a, *y = b;
    return (x->ms < y->ms) - (x->ms > y->ms);
}

static void profile_add(const teeny_profile_launch *l, void *user)
{
    profile_sum *sum = user;
    int k;
    for (k = 0; k < sum->n && strcmp(sum->rows[k].name, l->kernel); k++)
        ;
    if (k == sum->n)
        sum->rows[sum->n++] = (profile_row){l->kernel, 0.0, 0};
    sum->rows[k].ms += l->ms;
    sum->rows[k].calls++;
    sum->total += l->ms;
    if (sum->each)
        teeny__log(TEENY_LOG_WARN, "profile: launch %4d %-28s %10lld items %10.4f ms gap %8.4f ms%s%s", l->index,
                   l->kernel, l->items, l->ms, l->gap_ms, l->node ? " node " : "", l->node ? l->node : "");
}

static void profile_summary(teeny_ctx *ctx, double span_ms, int each)
{
    profile_sum sum = {teeny__malloc((size_t)(ctx->prog.prof_count ? ctx->prog.prof_count : 1) * sizeof *sum.rows),
                       0, each, 0.0};
    if (!sum.rows) {
        teeny__log(TEENY_LOG_WARN, "profile: no per-kernel summary: out of host memory");
        return;
    }
    if (!profile_walk(ctx, profile_add, &sum)) {
        teeny__log(TEENY_LOG_WARN, "profile: no per-kernel summary: clGetEventProfilingInfo failed");
        teeny__free(sum.rows);
        return;
    }
    qsort(sum.rows, (size_t)sum.n, sizeof *sum.rows, profile_row_cmp);
    for (int k = 0; k < sum.n; k++)
        teeny__log(TEENY_LOG_WARN, "profile: %-28s %5d launches %10.4f ms %5.1f%%", sum.rows[k].name,
                   sum.rows[k].calls, sum.rows[k].ms, sum.total > 0 ? 100.0 * sum.rows[k].ms / sum.total : 0.0);
    teeny__log(TEENY_LOG_WARN, "profile: %d kernels, %d launches, %.4f ms of kernel time in a %.4f ms span", sum.n,
               ctx->prog.prof_count, sum.total, span_ms);
    teeny__free(sum.rows);
}

static void profile_clear(teeny_ctx *ctx)
{
    for (int i = 0; i < ctx->prog.prof_count; i++) {
        TEENY_CL_RELEASE(clReleaseEvent, ctx->prog.prof_events[i]);
        teeny__free(ctx->prog.prof_nodes[i]);
    }
    ctx->prog.prof_count = 0;
    ctx->prog.prof_lost = 0;
}

/* The context's release hook (device.c runs it at destruction). */
static void profile_release(teeny_ctx *ctx)
{
    profile_clear(ctx);
    profile_resize(ctx, 0);
}

teeny_status teeny_profile_begin(teeny_ctx *ctx)
{
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_profile_begin: ctx is NULL or destroyed");
    teeny__clear_error(ctx);
    if (!ctx->prog.prof_events) {
        teeny_status st = teeny__ctx_on_release(ctx, profile_release);
        if (st != TEENY_OK)
            return st;
        if (!profile_resize(ctx, PROFILE_FIRST_CAP))
            return teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_profile_begin: out of host memory");
    }
    profile_clear(ctx);
    ctx->prog.profiling = 1;
    return TEENY_OK;
}

teeny_status teeny_profile_end(teeny_ctx *ctx, double *device_ms, int *kernels)
{
    return teeny_profile_end_each(ctx, device_ms, kernels, NULL, NULL);
}

teeny_status teeny_profile_end_each(teeny_ctx *ctx, double *device_ms, int *kernels, teeny_profile_fn each,
                                    void *user_data)
{
    teeny_status st = TEENY_OK;
    cl_ulong first = 0, last = 0;
    cl_command_queue_properties props = 0;
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_profile_end: ctx is NULL or destroyed");
    teeny__clear_error(ctx);
    if (!ctx->prog.profiling)
        return teeny__error(ctx, TEENY_ERR_STATE, "teeny_profile_end without teeny_profile_begin");
    ctx->prog.profiling = 0;
    TEENY_CL_TRY(clGetCommandQueueInfo, ctx->queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (!(props & CL_QUEUE_PROFILING_ENABLE)) {
        st = teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "the context's queue was created without profiling");
        goto cleanup;
    }
    if (ctx->prog.prof_count)
        TEENY_CL_TRY(clWaitForEvents, (cl_uint)ctx->prog.prof_count, ctx->prog.prof_events);
    for (int i = 0; i < ctx->prog.prof_count; i++) {
        cl_ulong s, e;
        TEENY_CL_TRY(clGetEventProfilingInfo, ctx->prog.prof_events[i], CL_PROFILING_COMMAND_START, sizeof s, &s, NULL);
        TEENY_CL_TRY(clGetEventProfilingInfo, ctx->prog.prof_events[i], CL_PROFILING_COMMAND_END, sizeof e, &e, NULL);
        if (i == 0 || s < first)
            first = s;
        if (e > last)
            last = e;
    }
    if (ctx->prog.prof_lost) {
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_profile_end: out of host memory recording events; "
                          "%d launch%s missing from the profile of %d", ctx->prog.prof_lost,
                          ctx->prog.prof_lost == 1 ? " is" : "es are", ctx->prog.prof_count + ctx->prog.prof_lost);
        goto cleanup;
    }
    if (each && !profile_walk(ctx, each, user_data)) {
        st = teeny__error(ctx, TEENY_ERR_OPENCL, "teeny_profile_end_each: clGetEventProfilingInfo failed");
        goto cleanup;
    }
    if (device_ms)
        *device_ms = (double)(last - first) * 1e-6;
    if (kernels)
        *kernels = ctx->prog.prof_count;
    const char *summary = getenv("TEENY_PROFILE");
    if (summary && *summary && strcmp(summary, "0"))
        profile_summary(ctx, (double)(last - first) * 1e-6, !strcmp(summary, "2"));
cleanup:
    profile_clear(ctx);
    return st;
}
