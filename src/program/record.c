/*
 * record.c -- the graph launch recorder: between teeny__record_begin and
 * teeny__record_end, launches and fills are appended to a recorder instead
 * of enqueued, kernels created for them and their workspace buffers are
 * owned by it, and a replay enqueues exactly the recorded launches (no
 * object creation, no argument setting).
 *
 * Setup launches: what an op records between teeny__record_setup(ctx, 1)
 * and (ctx, 0) derives data from constants (a plan whose parameters are
 * frozen: conv_gemm_cpu's packed weights). Those launches keep their place
 * in the list but a replay of a range skips them; the plan enqueues them
 * once, by teeny__recorder_replay_setup, after compiling and again when
 * asked to refresh.
 *
 * Dependencies run down only: launch.c and build.c call in here; record.c
 * calls profile.c (the enqueue primitives a replay shares with eager
 * launches) and simulator.c (a new workspace buffer's simulator store),
 * never the launch or build layers.
 */
#include <string.h>

#include "internal.h"

/* ---- recorder ---- */

typedef struct {
    cl_kernel kernel;      /* NULL for a fill */
    const char *name;
    cl_uint dims;
    size_t global[3], local[3];
    int has_local;
    cl_mem buf;            /* fill */
    size_t off, n;
    float value;
    int node;              /* index into the recorder's node names; -1: none */
    int setup;             /* a setup launch: replay_setup's, skipped by replay */
} recorded;

struct teeny__recorder {
    recorded *items;
    int n, cap;
    int in_setup; /* teeny__record_setup's switch */
    struct {
        cl_kernel kernel;
        teeny__klimits limits;
    } *kernels;
    int n_kernels, cap_kernels;
    cl_mem *scratch;
    int n_scratch, cap_scratch;
    size_t scratch_bytes;
    char **nodes; /* the graph nodes' names (copies), in recording order */
    int n_nodes, cap_nodes;
};

teeny_status teeny__recorder_create(teeny_ctx *ctx, teeny__recorder **out)
{
    *out = teeny__calloc(1, sizeof **out);
    if (!*out)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory creating a recorder");
    return TEENY_OK;
}

void teeny__recorder_free(teeny__recorder *rec)
{
    if (!rec)
        return;
    /* newest first: PoCL unlinks a kernel from its program's list by a walk from the newest one */
    for (int i = rec->n_kernels - 1; i >= 0; i--)
        TEENY_CL_RELEASE(clReleaseKernel, rec->kernels[i].kernel);
    for (int i = rec->n_scratch - 1; i >= 0; i--)
        TEENY_CL_RELEASE(clReleaseMemObject, rec->scratch[i]);
    teeny__free(rec->items);
    teeny__free(rec->kernels);
    teeny__free(rec->scratch);
    for (int i = 0; i < rec->n_nodes; i++)
        teeny__free(rec->nodes[i]);
    teeny__free(rec->nodes);
    teeny__free(rec);
}

void teeny__record_begin(teeny_ctx *ctx, teeny__recorder *rec)
{
    ctx->prog.rec = rec;
}

void teeny__record_end(teeny_ctx *ctx)
{
    ctx->prog.rec = NULL;
}

int teeny__recorder_count(const teeny__recorder *rec)
{
    return rec->n;
}

void teeny__record_setup(teeny_ctx *ctx, int on)
{
    if (ctx->prog.rec)
        ctx->prog.rec->in_setup = on;
}

int teeny__recorder_launches(const teeny__recorder *rec, int from, int to)
{
    int n = 0;
    for (int i = from; i < to; i++)
        n += !rec->items[i].setup;
    return n;
}

size_t teeny__recorder_scratch_bytes(const teeny__recorder *rec)
{
    return rec->scratch_bytes;
}

teeny_status teeny__recorder_add_kernel(teeny_ctx *ctx, teeny__recorder *rec, cl_kernel k,
                                        const teeny__klimits *lim)
{
    if (!teeny__grow((void **)&rec->kernels, &rec->cap_kernels, rec->n_kernels, sizeof rec->kernels[0]))
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory recording a kernel");
    rec->kernels[rec->n_kernels].kernel = k;
    rec->kernels[rec->n_kernels++].limits = *lim;
    return TEENY_OK;
}

/* The limits a recorded kernel was created with; 0 when not one of rec's. */
int teeny__recorder_limits(const teeny__recorder *rec, cl_kernel k, teeny__klimits *out)
{
    /* newest first: PoCL unlinks a kernel from its program's list by a walk from the newest one */
    for (int i = rec->n_kernels - 1; i >= 0; i--)
        if (rec->kernels[i].kernel == k) {
            *out = rec->kernels[i].limits;
            return 1;
        }
    return 0;
}

static teeny_status recorder_add(teeny_ctx *ctx, recorded *r)
{
    teeny__recorder *rec = ctx->prog.rec;
    if (!teeny__grow((void **)&rec->items, &rec->cap, rec->n, sizeof(recorded)))
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory recording a launch");
    r->node = rec->n_nodes - 1;
    r->setup = rec->in_setup;
    rec->items[rec->n++] = *r;
    return TEENY_OK;
}

teeny_status teeny__record_node(teeny_ctx *ctx, const char *node)
{
    teeny__recorder *rec = ctx->prog.rec;
    if (!rec || (rec->n_nodes && !strcmp(rec->nodes[rec->n_nodes - 1], node)))
        return TEENY_OK;
    size_t len = strlen(node) + 1;
    char *copy = teeny__malloc(len);
    if (!copy || !teeny__grow((void **)&rec->nodes, &rec->cap_nodes, rec->n_nodes, sizeof(char *))) {
        teeny__free(copy);
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory recording node %s", node);
    }
    memcpy(copy, node, len);
    rec->nodes[rec->n_nodes++] = copy;
    return TEENY_OK;
}

teeny_status teeny__recorder_scratch(teeny_ctx *ctx, size_t bytes, cl_mem *out)
{
    teeny__recorder *rec = ctx->prog.rec;
    cl_int err;
    if (!teeny__grow((void **)&rec->scratch, &rec->cap_scratch, rec->n_scratch, sizeof(cl_mem)))
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory recording a workspace");
    cl_mem m = TEENY_CLO(clCreateBuffer, &err, ctx->context, CL_MEM_READ_WRITE, bytes, NULL);
    if (!m)
        return teeny__error(ctx, TEENY_ERR_OPENCL, "clCreateBuffer of %zu-byte workspace failed: %s (%d) on %s", bytes,
                            teeny__cl_error_name(err), (int)err, ctx->info.device_name);
    rec->scratch[rec->n_scratch++] = m;
    rec->scratch_bytes += bytes;
    *out = m;
    return ctx->kernel_stores ? teeny__sim_buffer_born(ctx, m, bytes) : TEENY_OK; /* simulator.c */
}


teeny_status teeny__record_launch(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, int dims,
                                  const size_t *g, const size_t *local)
{
    recorded r = {0};
    r.kernel = k;
    r.name = kernel_name;
    r.dims = (cl_uint)dims;
    for (int i = 0; i < dims; i++) {
        r.global[i] = g[i];
        r.local[i] = local ? local[i] : 1;
    }
    r.has_local = local != NULL;
    return recorder_add(ctx, &r);
}

teeny_status teeny__record_fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value)
{
    recorded r = {0};
    r.name = "fill";
    r.buf = buf;
    r.off = off;
    r.n = n;
    r.value = value;
    return recorder_add(ctx, &r);
}

/* The items in [from, to) whose setup flag is setup, in order. */
static teeny_status replay(teeny_ctx *ctx, const teeny__recorder *rec, int from, int to, int setup)
{
    for (int i = from; i < to; i++) {
        const recorded *r = &rec->items[i];
        if (r->setup != setup)
            continue;
        const char *node = r->node >= 0 ? rec->nodes[r->node] : NULL;
        teeny_status st = r->kernel ? teeny__enqueue_kernel(ctx, r->kernel, r->name, node, r->dims, r->global,
                                                     r->has_local ? r->local : NULL)
                                    : teeny__enqueue_fill(ctx, r->buf, r->off, r->n, r->value);
        if (st != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}

teeny_status teeny__recorder_replay(teeny_ctx *ctx, const teeny__recorder *rec, int from, int to)
{
    return replay(ctx, rec, from, to, 0);
}

teeny_status teeny__recorder_replay_setup(teeny_ctx *ctx, const teeny__recorder *rec)
{
    return replay(ctx, rec, 0, rec->n, 1);
}
