/*
 * dist.c -- data-parallel training over MPI (include/teenycl_dist.h):
 * the dist (a duplicated communicator, node-local ranks, each rank's
 * device), host-side collectives polled against a deadline, and the
 * gradient exchanger.
 *
 * Built only with `make WITH_MPI=1`, into libteenycl_dist, on top of the
 * public API: tensors are reached through teeny_tensor_cl and the context's
 * in-order queue (teeny_ctx_cl_queue), so every copy here is ordered after
 * the backward pass that produced the gradients without a wait.
 *
 * Gradient layout: one flat device buffer of local_shards * total floats.
 * Parameters are taken in reverse order (last layer first, the order the
 * backward pass finishes them) and cut into buckets of at most
 * bucket_bytes per shard (a parameter larger than that is a bucket of its
 * own). Bucket b holds local_shards consecutive slices of blen[b] floats,
 * slice k being local shard k, so one read per bucket fetches every local
 * shard of it. The exchange is a reduce-scatter then an allgather, both
 * in a fixed order: chunk c of each bucket (its floats [blen*c/R,
 * blen*(c+1)/R)) belongs to rank c, which receives that chunk of every
 * rank's local shards (MPI_Ialltoallv) in global shard order (rank-major,
 * then local shard), sums them in double in that order, divides by the
 * number of shards, and sends the result to everyone (MPI_Iallgatherv).
 * Each float crosses the network about twice, whatever the rank count,
 * and the result is the same as every rank summing every shard itself.
 *
 * Deadlines: nonblocking collectives, then MPI_Testall polling with a
 * short sleep until done or timeout_s. A collective that times out cannot
 * be cancelled (MPI has no cancel for collectives), so the dist is marked
 * broken and refuses later collectives instead of mixing them with the
 * stale one.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "teenycl_dist.h"

#define DIST_DEFAULT_TIMEOUT_S 600.0
#define DIST_DEFAULT_BUCKET_BYTES ((size_t)4 << 20)
#define DIST_ERR_CAP 1024

struct teeny_dist {
    MPI_Comm comm;        /* duplicate of the caller's */
    MPI_Comm node;        /* ranks on this node */
    int rank, size, local_rank, local_size;
    double timeout_s;
    size_t bucket_bytes;
    int broken;           /* a collective timed out or failed: no more collectives */
    char err[DIST_ERR_CAP];
};

struct teeny_dist_grads {
    teeny_dist *d;
    teeny_ctx *ctx;
    cl_command_queue queue;
    int n;
    cl_mem *grad_buf;
    size_t *grad_off;     /* bytes */
    size_t *numel;
    size_t *pos;          /* per param: offset inside its bucket's shard slice, floats */
    int *bucket_of;
    int n_buckets;
    size_t *blen;         /* per bucket: floats in one shard's slice */
    size_t *boff;         /* per bucket: its start in the flat buffer (local_shards * earlier blens) */
    int local_shards, added;
    size_t total;         /* floats of one shard */
    cl_mem flat;          /* local_shards * total floats */
    float *send;          /* host: local_shards * total, laid out like flat */
    float *pack;          /* host: the same floats regrouped per bucket by owner: [owner][local shard][its chunk] */
    float *recv;          /* host: per bucket [rank][local shard][my chunk] = my chunk in global shard order */
    float *mine;          /* host: per bucket the mean of my chunk */
    float *mean;          /* host: total, laid out like flat's slice 0 of each bucket */
    int *flags;           /* per rank: its step status */
    /* per bucket b, R entries each at [b * R]: chunk c of the bucket is
     * owned by rank c and spans [lo, lo + len) of the bucket */
    int *chunk_lo, *chunk_len, *send_counts, *send_displs, *recv_counts, *recv_displs;
    size_t *recv_off, *mine_off; /* per bucket: its region of recv and mine */
};

static _Thread_local char dist_err_global[DIST_ERR_CAP];

static teeny_status fail(teeny_dist *d, teeny_status st, const char *fmt, ...)
{
    va_list ap;
    char *buf = d ? d->err : dist_err_global;
    va_start(ap, fmt);
    vsnprintf(buf, DIST_ERR_CAP, fmt, ap);
    va_end(ap);
    return st;
}

static void clear(teeny_dist *d)
{
    if (d)
        d->err[0] = '\0';
    else
        dist_err_global[0] = '\0';
}

static const char *mpi_text(int rc, char *buf)
{
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
        snprintf(buf, MPI_MAX_ERROR_STRING, "MPI error %d", rc);
    return buf;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Poll reqs until all complete or the deadline passes. A rank waits here
 * for the slowest rank, so the sleep grows from 20 us to 1 ms: short
 * exchanges stay fast, long waits leave the core to the others. */
static teeny_status wait_all(teeny_dist *d, int n, MPI_Request *reqs, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    double deadline = now_s() + d->timeout_s;
    long sleep_ns = 20000;
    for (;;) {
        int done = 0, rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            d->broken = 1;
            return fail(d, TEENY_ERR_IO, "%s: rank %d: MPI_Testall failed: %s", what, d->rank, mpi_text(rc, text));
        }
        if (done)
            return TEENY_OK;
        if (now_s() > deadline) {
            d->broken = 1;
            return fail(d, TEENY_ERR_IO,
                        "%s: rank %d: not every rank arrived within %.1f s (a rank failed or stalls); "
                        "the dist is broken, end the job", what, d->rank, d->timeout_s);
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000)
            sleep_ns *= 2;
    }
}

static teeny_status check_usable(teeny_dist *d, const char *fn)
{
    if (!d)
        return fail(NULL, TEENY_ERR_ARG, "%s: dist is NULL", fn);
    clear(d);
    if (d->broken)
        return fail(d, TEENY_ERR_STATE, "%s: the dist is broken by an earlier failed or timed-out collective", fn);
    return TEENY_OK;
}

/* MPI_Iallgather of count elements of type per rank, waited with the deadline. */
static teeny_status allgather(teeny_dist *d, const void *send, void *recv, int count, MPI_Datatype type,
                              const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    MPI_Request req;
    int rc = MPI_Iallgather(send, count, type, recv, count, type, d->comm, &req);
    if (rc != MPI_SUCCESS) {
        d->broken = 1;
        return fail(d, TEENY_ERR_IO, "%s: rank %d: MPI_Iallgather failed: %s", what, d->rank, mpi_text(rc, text));
    }
    return wait_all(d, 1, &req, what);
}

teeny_status teeny_dist_create(MPI_Comm comm, const teeny_dist_params *p, teeny_dist **out)
{
    char text[MPI_MAX_ERROR_STRING];
    teeny_dist_params dp = TEENY_DIST_PARAMS_INIT;
    int inited = 0, finalized = 0, rc;
    teeny_dist *d;
    clear(NULL);
    if (!out)
        return fail(NULL, TEENY_ERR_ARG, "teeny_dist_create: out is NULL");
    *out = NULL;
    if (p)
        dp = *p;
    if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited || MPI_Finalized(&finalized) != MPI_SUCCESS || finalized)
        return fail(NULL, TEENY_ERR_STATE, "teeny_dist_create: MPI is %s (call MPI_Init first)",
                    finalized ? "finalized" : "not initialized");
    if (comm == MPI_COMM_NULL)
        return fail(NULL, TEENY_ERR_ARG, "teeny_dist_create: comm is MPI_COMM_NULL");
    if (!isfinite(dp.timeout_s) || dp.timeout_s < 0)
        return fail(NULL, TEENY_ERR_ARG, "teeny_dist_create: timeout_s %g is not a finite value >= 0", dp.timeout_s);
    if (dp.timeout_s == 0) {
        const char *env = getenv("TEENY_DIST_TIMEOUT");
        char *end = NULL;
        dp.timeout_s = DIST_DEFAULT_TIMEOUT_S;
        if (env && *env) {
            double v = strtod(env, &end);
            if (*end || !isfinite(v) || v <= 0)
                return fail(NULL, TEENY_ERR_ARG, "teeny_dist_create: TEENY_DIST_TIMEOUT=%s is not a number of seconds > 0",
                            env);
            dp.timeout_s = v;
        }
    }
    if (!dp.bucket_bytes)
        dp.bucket_bytes = DIST_DEFAULT_BUCKET_BYTES;
    d = calloc(1, sizeof *d);
    if (!d)
        return fail(NULL, TEENY_ERR_NOMEM, "teeny_dist_create: out of host memory");
    d->comm = d->node = MPI_COMM_NULL;
    d->timeout_s = dp.timeout_s;
    d->bucket_bytes = dp.bucket_bytes;
    if ((rc = MPI_Comm_dup(comm, &d->comm)) != MPI_SUCCESS) {
        fail(NULL, TEENY_ERR_IO, "teeny_dist_create: MPI_Comm_dup failed: %s", mpi_text(rc, text));
        goto fail_free;
    }
    /* errors come back as codes (and become statuses), never abort the job */
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    if ((rc = MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &d->node)) != MPI_SUCCESS) {
        fail(NULL, TEENY_ERR_IO, "teeny_dist_create: MPI_Comm_split_type failed: %s", mpi_text(rc, text));
        goto fail_free;
    }
    MPI_Comm_set_errhandler(d->node, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->node, &d->local_rank);
    MPI_Comm_size(d->node, &d->local_size);
    *out = d;
    return TEENY_OK;
fail_free:
    if (d->node != MPI_COMM_NULL)
        MPI_Comm_free(&d->node);
    if (d->comm != MPI_COMM_NULL)
        MPI_Comm_free(&d->comm);
    free(d);
    return TEENY_ERR_IO;
}

void teeny_dist_destroy(teeny_dist *d)
{
    if (!d)
        return;
    if (!d->broken) {
        MPI_Comm_free(&d->node);
        MPI_Comm_free(&d->comm);
    }
    free(d);
}

const char *teeny_dist_last_error(const teeny_dist *d)
{
    return d ? d->err : dist_err_global;
}

int teeny_dist_rank(const teeny_dist *d) { return d ? d->rank : -1; }
int teeny_dist_size(const teeny_dist *d) { return d ? d->size : -1; }
int teeny_dist_local_rank(const teeny_dist *d) { return d ? d->local_rank : -1; }
int teeny_dist_local_size(const teeny_dist *d) { return d ? d->local_size : -1; }

/* Append s to buf[*len..cap); 0 when it does not fit. */
static int append(char *buf, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + n + 1 > cap)
        return 0;
    memcpy(buf + *len, s, n);
    *len += n;
    buf[*len] = '\0';
    return 1;
}

teeny_status teeny_dist_device_spec(const teeny_dist *d, const char *spec_template, char *buf, size_t cap)
{
    teeny_dist *md = (teeny_dist *)d; /* only the error text changes */
    if (!d || !buf || !cap)
        return fail(md, TEENY_ERR_ARG, "teeny_dist_device_spec: %s", !d ? "dist is NULL" : "buf is NULL or cap 0");
    clear(md);
    const char *t = spec_template ? spec_template : getenv("TEENY_DEVICE");
    size_t len = 0;
    buf[0] = '\0';
    if (t && *t) {
        char num[24];
        for (const char *s = t; *s;) {
            int fits;
            if (!strncmp(s, "{local_rank}", 12)) {
                snprintf(num, sizeof num, "%d", d->local_rank);
                fits = append(buf, cap, &len, num, strlen(num));
                s += 12;
            } else if (!strncmp(s, "{rank}", 6)) {
                snprintf(num, sizeof num, "%d", d->rank);
                fits = append(buf, cap, &len, num, strlen(num));
                s += 6;
            } else {
                fits = append(buf, cap, &len, s, 1);
                s++;
            }
            if (!fits)
                return fail(md, TEENY_ERR_RANGE, "teeny_dist_device_spec: the spec from \"%s\" needs more than %zu bytes",
                            t, cap);
        }
        return TEENY_OK;
    }
    /* round-robin over this node's GPUs, else the first CPU */
    int count = 0, n_gpu = 0, pick = -1;
    teeny_status st = teeny_devices_list(NULL, 0, &count);
    if (st != TEENY_OK)
        return fail(md, st, "teeny_dist_device_spec: %s", teeny_last_error(NULL));
    if (count <= 0)
        return fail(md, TEENY_ERR_NO_DEVICE, "teeny_dist_device_spec: no OpenCL device on this node");
    teeny_device_info *info = calloc((size_t)count, sizeof *info);
    if (!info)
        return fail(md, TEENY_ERR_NOMEM, "teeny_dist_device_spec: out of host memory");
    info[0].struct_size = sizeof *info;
    if ((st = teeny_devices_list(info, count, &count)) != TEENY_OK) {
        free(info);
        return fail(md, st, "teeny_dist_device_spec: %s", teeny_last_error(NULL));
    }
    for (int i = 0; i < count; i++)
        n_gpu += info[i].is_gpu != 0;
    for (int i = 0, k = 0; i < count && pick < 0; i++)
        if (n_gpu ? info[i].is_gpu && k++ == d->local_rank % n_gpu : info[i].is_cpu)
            pick = i;
    if (pick < 0)
        pick = 0;
    int w = snprintf(buf, cap, "%d:%d", info[pick].platform_index, info[pick].device_index);
    free(info);
    if (w < 0 || (size_t)w >= cap)
        return fail(md, TEENY_ERR_RANGE, "teeny_dist_device_spec: cap %zu is too small for a P:D spec", cap);
    return TEENY_OK;
}

teeny_status teeny_dist_ctx_create(const teeny_dist *d, const char *spec_template, teeny_ctx **out)
{
    char spec[512];
    if (out)
        *out = NULL;
    if (!out)
        return fail((teeny_dist *)d, TEENY_ERR_ARG, "teeny_dist_ctx_create: out is NULL");
    teeny_status st = teeny_dist_device_spec(d, spec_template, spec, sizeof spec);
    if (st != TEENY_OK)
        return st;
    return teeny_ctx_create(spec, out);
}

teeny_status teeny_dist_sum_f64(teeny_dist *d, const double *in, double *out, int n)
{
    teeny_status st = check_usable(d, "teeny_dist_sum_f64");
    if (st != TEENY_OK)
        return st;
    /* first every rank's n (-1 for bad arguments): a bad or different n on
     * one rank fails every rank, and different counts never become
     * different message sizes (MPI treats a truncation as fatal) */
    int mine = !in || !out || n <= 0 ? -1 : n;
    double *all = malloc((mine > 1 ? (size_t)mine : 1) * (size_t)d->size * sizeof *all);
    if (!all)
        return fail(d, TEENY_ERR_NOMEM, "teeny_dist_sum_f64: out of host memory");
    int *ns = (int *)all;
    st = allgather(d, &mine, ns, 1, MPI_INT, "teeny_dist_sum_f64");
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (ns[r] < 0)
            st = fail(d, TEENY_ERR_ARG, "teeny_dist_sum_f64: rank %d passed NULL in or out, or n <= 0", r);
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (ns[r] != mine)
            st = fail(d, TEENY_ERR_SHAPE, "teeny_dist_sum_f64: rank %d sums %d values, rank %d %d", d->rank, n, r, ns[r]);
    if (st == TEENY_OK)
        st = allgather(d, in, all, n, MPI_DOUBLE, "teeny_dist_sum_f64");
    if (st == TEENY_OK)
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int r = 0; r < d->size; r++)
                s += all[(size_t)r * (size_t)n + (size_t)i];
            out[i] = s;
        }
    free(all);
    return st;
}

teeny_status teeny_dist_broadcast(teeny_dist *d, teeny_ctx *ctx, int root, int n, teeny_tensor *const *ts)
{
    char text[MPI_MAX_ERROR_STRING];
    teeny_status st = check_usable(d, "teeny_dist_broadcast");
    if (st != TEENY_OK)
        return st;
    /* every rank checks its arguments and all compare a fixed-size summary
     * (argument check, count, floats, a hash of the numels in order, root),
     * so that a rank with bad or different arguments fails every rank at
     * once instead of leaving them at the deadline */
    int local_bad = !ctx || !ts || n <= 0 || root < 0 || root >= d->size;
    int64_t summary[5] = {local_bad, local_bad ? 0 : n, 0, 0, root};
    uint64_t layout = 1469598103934665603ULL;
    size_t total = 0;
    for (int i = 0; !local_bad && i < n; i++) {
        if (!ts[i]) {
            summary[0] = local_bad = 1;
            break;
        }
        total += (size_t)teeny_tensor_numel(ts[i]);
        layout = (layout ^ (uint64_t)teeny_tensor_numel(ts[i])) * 1099511628211ULL;
    }
    summary[2] = (int64_t)total;
    summary[3] = (int64_t)(layout >> 1);
    int64_t *all = malloc(5 * (size_t)d->size * sizeof *all);
    if (!all)
        return fail(d, TEENY_ERR_NOMEM, "teeny_dist_broadcast: out of host memory");
    st = allgather(d, summary, all, 5, MPI_INT64_T, "teeny_dist_broadcast");
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (all[5 * r])
            st = fail(d, TEENY_ERR_ARG, "teeny_dist_broadcast: rank %d passed a NULL ctx, ts or tensor, n <= 0 or a "
                      "root that is no rank", r);
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (memcmp(all + 5 * r, summary, sizeof summary))
            st = fail(d, TEENY_ERR_SHAPE, "teeny_dist_broadcast: rank %d and rank %d differ in the tensors' count, "
                      "numels or the root", d->rank, r);
    free(all);
    if (st != TEENY_OK)
        return st;
    float *host = malloc((total ? total : 1) * sizeof *host);
    if (!host)
        return fail(d, TEENY_ERR_NOMEM, "teeny_dist_broadcast: out of host memory");
    size_t at = 0;
    for (int i = 0; d->rank == root && i < n && st == TEENY_OK; i++) {
        size_t m = (size_t)teeny_tensor_numel(ts[i]);
        if ((st = teeny_tensor_read(ts[i], host + at, m)) != TEENY_OK)
            fail(d, st, "teeny_dist_broadcast: reading tensor %d: %s", i, teeny_last_error(ctx));
        at += m;
    }
    /* the root's read status travels with the data, so a failed read
     * fails every rank rather than spreading garbage */
    int ok = st == TEENY_OK;
    MPI_Request req[2];
    int rc = MPI_Ibcast(&ok, 1, MPI_INT, root, d->comm, &req[0]);
    if (rc == MPI_SUCCESS)
        rc = MPI_Ibcast(host, (int)total, MPI_FLOAT, root, d->comm, &req[1]);
    if (rc != MPI_SUCCESS) {
        d->broken = 1;
        free(host);
        return fail(d, TEENY_ERR_IO, "teeny_dist_broadcast: rank %d: MPI_Ibcast failed: %s", d->rank,
                    mpi_text(rc, text));
    }
    teeny_status wst = wait_all(d, 2, req, "teeny_dist_broadcast");
    if (wst != TEENY_OK || st != TEENY_OK) {
        free(host);
        return wst != TEENY_OK ? wst : st;
    }
    if (!ok) {
        free(host);
        return fail(d, TEENY_ERR_STATE, "teeny_dist_broadcast: the root, rank %d, failed to read its tensors", root);
    }
    at = 0;
    for (int i = 0; d->rank != root && i < n && st == TEENY_OK; i++) {
        size_t m = (size_t)teeny_tensor_numel(ts[i]);
        if ((st = teeny_tensor_write(ts[i], host + at, m)) != TEENY_OK)
            fail(d, st, "teeny_dist_broadcast: writing tensor %d: %s", i, teeny_last_error(ctx));
        at += m;
    }
    if (st == TEENY_OK && d->rank != root && (st = teeny_ctx_finish(ctx)) != TEENY_OK)
        fail(d, st, "teeny_dist_broadcast: %s", teeny_last_error(ctx));
    free(host);
    return st;
}

/* ---- the gradient exchanger ---- */

static const char *cl_text(cl_int e)
{
    static _Thread_local char buf[32];
    snprintf(buf, sizeof buf, "OpenCL error %d", (int)e);
    return buf;
}

void teeny_dist_grads_destroy(teeny_dist_grads *dg)
{
    if (!dg)
        return;
    if (dg->queue)
        clFinish(dg->queue);
    if (dg->flat)
        clReleaseMemObject(dg->flat);
    free(dg->grad_buf);
    free(dg->grad_off);
    free(dg->numel);
    free(dg->pos);
    free(dg->bucket_of);
    free(dg->blen);
    free(dg->boff);
    free(dg->send);
    free(dg->pack);
    free(dg->recv);
    free(dg->mine);
    free(dg->mean);
    free(dg->flags);
    free(dg->chunk_lo);
    free(dg->chunk_len);
    free(dg->send_counts);
    free(dg->send_displs);
    free(dg->recv_counts);
    free(dg->recv_displs);
    free(dg->recv_off);
    free(dg->mine_off);
    free(dg);
}

teeny_status teeny_dist_grads_create(teeny_dist *d, teeny_ctx *ctx, int n, teeny_tensor *const *grads,
                                     int local_shards, teeny_dist_grads **out)
{
    const char *fn = "teeny_dist_grads_create";
    teeny_status st = check_usable(d, fn);
    teeny_dist_grads *dg = NULL;
    if (st != TEENY_OK)
        return st;
    if (!out)
        return fail(d, TEENY_ERR_ARG, "%s: out is NULL", fn);
    *out = NULL;
    /* every rank checks its own arguments, then all agree, so that a bad
     * argument on one rank fails every rank instead of leaving them waiting */
    /* n, local_shards, total floats, a hash of the numels in order (the
     * bucket layout follows from them) */
    int64_t mine[4] = {n, local_shards, 0, 0};
    uint64_t layout = 1469598103934665603ULL;
    int local_bad = !ctx || !grads || n <= 0 || local_shards < 1;
    for (int i = 0; !local_bad && i < n; i++) {
        if (!grads[i]) {
            local_bad = 1;
            break;
        }
        mine[2] += teeny_tensor_numel(grads[i]);
        layout = (layout ^ (uint64_t)teeny_tensor_numel(grads[i])) * 1099511628211ULL;
    }
    mine[3] = (int64_t)(layout >> 1);
    if (local_bad)
        mine[0] = -1; /* differs from any valid rank's count */
    int64_t *all = malloc(4 * (size_t)d->size * sizeof *all);
    if (!all)
        return fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    st = allgather(d, mine, all, 4, MPI_INT64_T, fn);
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (all[4 * r] < 0)
            st = fail(d, TEENY_ERR_ARG, "%s: rank %d passed a NULL ctx, grads or grad, n <= 0 or local_shards < 1", fn, r);
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (memcmp(all + 4 * r, mine, sizeof mine))
            st = fail(d, TEENY_ERR_SHAPE,
                      "%s: rank %d has %lld gradients of %lld floats and %lld local shards, rank %d %lld, %lld and %lld%s",
                      fn, d->rank, (long long)mine[0], (long long)mine[2], (long long)mine[1], r,
                      (long long)all[4 * r], (long long)all[4 * r + 2], (long long)all[4 * r + 1],
                      all[4 * r + 3] != mine[3] ? " (the gradients' numels differ)" : "");
    free(all);
    if (st != TEENY_OK)
        return st;
    size_t total = (size_t)mine[2], shards = (size_t)d->size * (size_t)local_shards;
    if (total == 0 || total > (size_t)INT32_MAX / (size_t)local_shards / (size_t)d->size)
        return fail(d, TEENY_ERR_RANGE, "%s: %zu gradient floats times %zu shards does not fit one MPI count", fn, total,
                    shards);

    dg = calloc(1, sizeof *dg);
    if (!dg) {
        st = fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
        goto agree;
    }
    dg->d = d;
    dg->ctx = ctx;
    dg->n = n;
    dg->local_shards = local_shards;
    dg->total = total;
    dg->grad_buf = malloc((size_t)n * sizeof *dg->grad_buf);
    dg->grad_off = malloc((size_t)n * sizeof *dg->grad_off);
    dg->numel = malloc((size_t)n * sizeof *dg->numel);
    dg->pos = malloc((size_t)n * sizeof *dg->pos);
    dg->bucket_of = malloc((size_t)n * sizeof *dg->bucket_of);
    dg->blen = calloc((size_t)n, sizeof *dg->blen);
    dg->boff = calloc((size_t)n, sizeof *dg->boff);
    dg->send = malloc(total * (size_t)local_shards * sizeof *dg->send);
    dg->pack = malloc(total * (size_t)local_shards * sizeof *dg->pack);
    dg->mean = malloc(total * sizeof *dg->mean);
    dg->flags = malloc((size_t)d->size * sizeof *dg->flags);
    if (!dg->grad_buf || !dg->grad_off || !dg->numel || !dg->pos || !dg->bucket_of || !dg->blen ||
        !dg->boff || !dg->send || !dg->pack || !dg->mean || !dg->flags) {
        st = fail(d, TEENY_ERR_NOMEM, "%s: out of host memory (%zu gradient floats, %zu shards)", fn, total, shards);
        goto agree;
    }
    for (int i = 0; i < n; i++) {
        dg->numel[i] = (size_t)teeny_tensor_numel(grads[i]);
        if ((st = teeny_tensor_cl(grads[i], &dg->grad_buf[i], &dg->grad_off[i])) != TEENY_OK) {
            fail(d, st, "%s: grads[%d]: %s", fn, i, teeny_last_error(ctx));
            goto agree;
        }
    }
    /* buckets over the parameters in reverse order */
    size_t cap = d->bucket_bytes / sizeof(float), start = 0;
    dg->n_buckets = 0;
    for (int i = n - 1; i >= 0; i--) {
        int b = dg->n_buckets - 1;
        if (b < 0 || (dg->blen[b] > 0 && dg->blen[b] + dg->numel[i] > cap)) {
            b = dg->n_buckets++;
            dg->boff[b] = start;
        }
        dg->bucket_of[i] = b;
        dg->pos[i] = dg->blen[b];
        dg->blen[b] += dg->numel[i];
        start += dg->numel[i] * (size_t)local_shards;
    }
    /* the reduce-scatter's chunks: rank c owns [blen * c / R, blen * (c + 1) / R) of each bucket */
    size_t R = (size_t)d->size, L = (size_t)local_shards, nbR = (size_t)dg->n_buckets * R, recv_total = 0, mine_total = 0;
    int **arrays[] = {&dg->chunk_lo, &dg->chunk_len, &dg->send_counts, &dg->send_displs, &dg->recv_counts,
                      &dg->recv_displs};
    for (int k = 0; k < 6; k++)
        if (!(*arrays[k] = malloc(nbR * sizeof(int)))) {
            st = fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
            goto agree;
        }
    dg->recv_off = malloc((size_t)dg->n_buckets * sizeof *dg->recv_off);
    dg->mine_off = malloc((size_t)dg->n_buckets * sizeof *dg->mine_off);
    if (!dg->recv_off || !dg->mine_off) {
        st = fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
        goto agree;
    }
    for (int b = 0; b < dg->n_buckets; b++) {
        size_t blen = dg->blen[b], me = (size_t)d->rank;
        size_t my_len = blen * (me + 1) / R - blen * me / R;
        for (size_t c = 0; c < R; c++) {
            size_t lo = blen * c / R, len = blen * (c + 1) / R - lo;
            dg->chunk_lo[b * R + c] = (int)lo;
            dg->chunk_len[b * R + c] = (int)len;
            dg->send_counts[b * R + c] = (int)(L * len);
            dg->send_displs[b * R + c] = (int)(L * lo);
            dg->recv_counts[b * R + c] = (int)(L * my_len);
            dg->recv_displs[b * R + c] = (int)(c * L * my_len);
        }
        dg->recv_off[b] = recv_total;
        dg->mine_off[b] = mine_total;
        recv_total += R * L * my_len;
        mine_total += my_len;
    }
    dg->recv = malloc((recv_total ? recv_total : 1) * sizeof *dg->recv);
    dg->mine = malloc((mine_total ? mine_total : 1) * sizeof *dg->mine);
    if (!dg->recv || !dg->mine) {
        st = fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
        goto agree;
    }
    dg->queue = teeny_ctx_cl_queue(ctx);
    cl_context clctx = NULL;
    cl_int e = clGetCommandQueueInfo(dg->queue, CL_QUEUE_CONTEXT, sizeof clctx, &clctx, NULL);
    if (e == CL_SUCCESS)
        dg->flat = clCreateBuffer(clctx, CL_MEM_READ_WRITE, total * (size_t)local_shards * sizeof(float), NULL, &e);
    if (e != CL_SUCCESS) {
        dg->queue = NULL;
        st = fail(d, TEENY_ERR_OPENCL, "%s: the flat gradient buffer (%zu bytes): clCreateBuffer: %s", fn,
                  total * (size_t)local_shards * sizeof(float), cl_text(e));
        goto agree;
    }
agree:;
    /* every rank made its exchanger, or none keeps one (a minimum of ints:
     * MPI's reduction order cannot matter) */
    int ok = st == TEENY_OK, all_ok = 0;
    MPI_Request req;
    char text[MPI_MAX_ERROR_STRING];
    int rc = MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, d->comm, &req);
    teeny_status ast = rc == MPI_SUCCESS ? wait_all(d, 1, &req, fn)
                                         : fail(d, TEENY_ERR_IO, "%s: MPI_Iallreduce failed: %s", fn, mpi_text(rc, text));
    if (ast == TEENY_OK && ok && !all_ok)
        ast = fail(d, TEENY_ERR_STATE, "%s: another rank could not make its exchanger (see its error)", fn);
    if (st == TEENY_OK && ast == TEENY_OK) {
        *out = dg;
        return TEENY_OK;
    }
    teeny_dist_grads_destroy(dg);
    return st != TEENY_OK ? st : ast;
}



teeny_status teeny_dist_grads_add(teeny_dist_grads *dg)
{
    if (!dg)
        return fail(NULL, TEENY_ERR_ARG, "teeny_dist_grads_add: dg is NULL");
    teeny_dist *d = dg->d;
    clear(d);
    if (dg->added >= dg->local_shards)
        return fail(d, TEENY_ERR_STATE, "teeny_dist_grads_add: all %d local shards are already added (all-reduce first)",
                    dg->local_shards);
    for (int i = 0; i < dg->n; i++) {
        int b = dg->bucket_of[i];
        size_t dst = dg->boff[b] + (size_t)dg->added * dg->blen[b] + dg->pos[i];
        cl_int e = clEnqueueCopyBuffer(dg->queue, dg->grad_buf[i], dg->flat, dg->grad_off[i], dst * sizeof(float),
                                       dg->numel[i] * sizeof(float), 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            /* this shard is incomplete: the step must fail on every rank */
            dg->added = dg->local_shards + 1;
            return fail(d, TEENY_ERR_OPENCL, "teeny_dist_grads_add: clEnqueueCopyBuffer of gradient %d: %s", i,
                        cl_text(e));
        }
    }
    dg->added++;
    return TEENY_OK;
}

teeny_status teeny_dist_grads_allreduce(teeny_dist_grads *dg, teeny_status local)
{
    const char *fn = "teeny_dist_grads_allreduce";
    char text[MPI_MAX_ERROR_STRING];
    if (!dg)
        return fail(NULL, TEENY_ERR_ARG, "%s: dg is NULL", fn);
    teeny_dist *d = dg->d;
    teeny_status st = check_usable(d, fn);
    int added = dg->added, L = dg->local_shards, R = d->size;
    dg->added = 0;
    if (st != TEENY_OK)
        return st;
    cl_event *ev = calloc((size_t)dg->n_buckets, sizeof *ev);
    MPI_Request *req = malloc(2 * (size_t)dg->n_buckets * sizeof *req); /* alltoallv per bucket, then allgatherv */
    int n_req = 0;
    if (!ev || !req) {
        free(ev);
        free(req);
        return fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    }

    /* 1. this rank's data, read bucket by bucket without waiting */
    int ok = local == TEENY_OK && added == L;
    for (int b = 0; ok && b < dg->n_buckets; b++) {
        cl_int e = clEnqueueReadBuffer(dg->queue, dg->flat, CL_FALSE, dg->boff[b] * sizeof(float),
                                       dg->blen[b] * (size_t)L * sizeof(float), dg->send + dg->boff[b], 0, NULL, &ev[b]);
        if (e != CL_SUCCESS) {
            ok = 0;
            fail(d, TEENY_ERR_OPENCL, "%s: rank %d: reading bucket %d: clEnqueueReadBuffer: %s", fn, d->rank, b,
                 cl_text(e));
        }
    }
    if (ok)
        clFlush(dg->queue);
    /* 2. every rank's status: the step goes on only if every rank can give its part */
    st = allgather(d, &ok, dg->flags, 1, MPI_INT, fn);
    if (st == TEENY_OK) {
        char ranks[256] = "";
        size_t len = 0;
        int bad = 0;
        for (int r = 0; r < R; r++)
            if (!dg->flags[r]) {
                bad++;
                if (len + 16 < sizeof ranks)
                    len += (size_t)snprintf(ranks + len, sizeof ranks - len, "%s%d", bad > 1 ? ", " : "", r);
            }
        if (bad)
            st = fail(d, TEENY_ERR_STATE,
                      "%s: rank %d: %d rank(s) failed this step (%s)%s; gradients unchanged", fn, d->rank, bad, ranks,
                      !ok ? (local != TEENY_OK ? ": this rank's step reported an error"
                                               : added != L ? ": this rank did not add every local shard"
                                                            : ": this rank could not read its gradients")
                          : "");
    }
    /* 3. the reduce-scatter, bucket by bucket as each read comes in: rank c
     * receives chunk c of every rank's local shards (MPI_Ialltoallv), in
     * [rank][local shard][chunk] order, which is global shard order */
    size_t Rz = (size_t)R, Lz = (size_t)L;
    for (int b = 0; st == TEENY_OK && b < dg->n_buckets; b++) {
        cl_int e = clWaitForEvents(1, &ev[b]);
        if (e != CL_SUCCESS) {
            /* the others wait for this bucket: they meet the deadline */
            d->broken = 1;
            st = fail(d, TEENY_ERR_OPENCL, "%s: rank %d: waiting for bucket %d's read: %s; the dist is broken", fn,
                      d->rank, b, cl_text(e));
            break;
        }
        size_t blen = dg->blen[b];
        const float *src = dg->send + dg->boff[b];
        float *packed = dg->pack + dg->boff[b];
        for (size_t c = 0; c < Rz; c++) {
            size_t lo = (size_t)dg->chunk_lo[b * Rz + c], len = (size_t)dg->chunk_len[b * Rz + c];
            for (size_t k = 0; k < Lz; k++)
                memcpy(packed + Lz * lo + k * len, src + k * blen + lo, len * sizeof *packed);
        }
        int rc = MPI_Ialltoallv(packed, dg->send_counts + b * Rz, dg->send_displs + b * Rz, MPI_FLOAT,
                                dg->recv + dg->recv_off[b], dg->recv_counts + b * Rz, dg->recv_displs + b * Rz,
                                MPI_FLOAT, d->comm, &req[n_req]);
        if (rc != MPI_SUCCESS) {
            d->broken = 1;
            st = fail(d, TEENY_ERR_IO, "%s: rank %d: MPI_Ialltoallv of bucket %d failed: %s", fn, d->rank, b,
                      mpi_text(rc, text));
            break;
        }
        n_req++;
    }
    /* 4. per bucket: the mean of this rank's chunk over every shard of the
     * job, summed in global shard order in double, then every chunk to
     * every rank (MPI_Iallgatherv) */
    double inv = 1.0 / (double)(Rz * Lz);
    for (int b = 0; st == TEENY_OK && b < dg->n_buckets; b++) {
        if ((st = wait_all(d, 1, &req[b], fn)) != TEENY_OK)
            break;
        size_t me = (size_t)d->rank, my_len = (size_t)dg->chunk_len[b * Rz + me];
        const float *src = dg->recv + dg->recv_off[b];
        float *dst = dg->mine + dg->mine_off[b];
        for (size_t e = 0; e < my_len; e++) {
            double sum = 0;
            for (size_t g = 0; g < Rz * Lz; g++)
                sum += (double)src[g * my_len + e];
            dst[e] = (float)(sum * inv);
        }
        int rc = MPI_Iallgatherv(dst, (int)my_len, MPI_FLOAT, dg->mean + dg->boff[b] / Lz, dg->chunk_len + b * Rz,
                                 dg->chunk_lo + b * Rz, MPI_FLOAT, d->comm, &req[n_req]);
        if (rc != MPI_SUCCESS) {
            d->broken = 1;
            st = fail(d, TEENY_ERR_IO, "%s: rank %d: MPI_Iallgatherv of bucket %d failed: %s", fn, d->rank, b,
                      mpi_text(rc, text));
            break;
        }
        n_req++;
    }
    if (st == TEENY_OK)
        st = wait_all(d, n_req - dg->n_buckets, req + dg->n_buckets, fn);
    for (int b = 0; b < dg->n_buckets; b++)
        if (ev[b]) {
            if (st != TEENY_OK)
                clWaitForEvents(1, &ev[b]); /* the host buffer must not be read into after we return */
            clReleaseEvent(ev[b]);
        }
    free(ev);
    free(req);
    if (st != TEENY_OK)
        return st;

    /* 5. one write per bucket into local shard 0's slice, then copies out */
    for (int b = 0; b < dg->n_buckets && st == TEENY_OK; b++) {
        cl_int e = clEnqueueWriteBuffer(dg->queue, dg->flat, CL_FALSE, dg->boff[b] * sizeof(float),
                                        dg->blen[b] * sizeof(float), dg->mean + dg->boff[b] / (size_t)L, 0, NULL, NULL);
        if (e != CL_SUCCESS)
            st = fail(d, TEENY_ERR_OPENCL, "%s: writing bucket %d: clEnqueueWriteBuffer: %s", fn, b, cl_text(e));
    }
    for (int i = 0; i < dg->n && st == TEENY_OK; i++) {
        int b = dg->bucket_of[i];
        cl_int e = clEnqueueCopyBuffer(dg->queue, dg->flat, dg->grad_buf[i], (dg->boff[b] + dg->pos[i]) * sizeof(float),
                                       dg->grad_off[i], dg->numel[i] * sizeof(float), 0, NULL, NULL);
        if (e != CL_SUCCESS)
            st = fail(d, TEENY_ERR_OPENCL, "%s: copying gradient %d back: clEnqueueCopyBuffer: %s", fn, i, cl_text(e));
    }
    /* the non-blocking writes read dg->mean: it must hold still until they
     * are done (the next all-reduce's reads follow them in the queue, but
     * the host could rewrite mean before that) */
    cl_int e = clFinish(dg->queue);
    if (st == TEENY_OK && e != CL_SUCCESS)
        st = fail(d, TEENY_ERR_OPENCL, "%s: clFinish: %s", fn, cl_text(e));
    return st;
}

int64_t teeny_dist_grads_numel(const teeny_dist_grads *dg)
{
    return dg ? (int64_t)dg->total : -1;
}

int teeny_dist_grads_buckets(const teeny_dist_grads *dg)
{
    return dg ? dg->n_buckets : -1;
}

/* ---- batch norm over the global batch (SyncBatchNorm) ----
 *
 * Built from the eager batch-norm kernels, so that the statistics are the
 * kernels' own: a local training forward (into scratch running statistics)
 * gives each rank's per-channel mean and rstd, from which var = 1/rstd^2 -
 * eps in double; the ranks' (count, mean, var) rows are gathered and
 * combined in rank order (Chan's parallel formula, in double); the output
 * is the inference kernel run with the global mean and variance. The
 * backward is the frozen-statistics kernel (dx = dy * w * rstd, and the
 * local sums dbias = sum dy, dweight = sum dy * xhat), the two sums
 * gathered and added in rank order, and the correction
 * -w * rstd * (sum dy + xhat * sum dy xhat) / N, again a per-channel affine
 * map of x run by the inference kernel, added to dx. */

/* Allgather of one row of len doubles per rank; row[0] is the rank's ok
 * flag (1 or 0). *all_ok: every rank's flag was 1. */
static teeny_status gather_rows(teeny_dist *d, const double *row, int len, double *all, int *all_ok, const char *fn)
{
    teeny_status st = allgather(d, row, all, len, MPI_DOUBLE, fn);
    *all_ok = st == TEENY_OK;
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (all[(size_t)r * (size_t)len] != 1.0) {
            *all_ok = 0;
            if (r != d->rank || row[0] == 1.0)
                fail(d, TEENY_ERR_STATE,
                     "%s: rank %d failed its local part; running statistics and parameters are unchanged, "
                     "this call's other outputs unspecified", fn, r);
            break;
        }
    return st;
}

/* Shape facts both directions need: C and this rank's count per channel. */
static int bn_shape(const teeny_tensor *x, int64_t *C, int64_t *n)
{
    int nd = x ? teeny_tensor_ndim(x) : 0;
    if (nd != 2 && nd != 4)
        return 0;
    *C = teeny_tensor_dim(x, 1);
    *n = teeny_tensor_numel(x) / *C;
    return *C > 0 && *n > 0;
}

static teeny_status make_vec(teeny_ctx *ctx, int64_t C, const float *v, teeny_tensor **out)
{
    teeny_status st = teeny_tensor_create(ctx, 1, &C, out);
    if (st == TEENY_OK && v && (st = teeny_tensor_write(*out, v, (size_t)C)) != TEENY_OK) {
        teeny_tensor_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* The header exchange: (ok, C, n) per rank; all must be ok with one C.
 * counts (size entries, may be NULL) receives each rank's n. */
static teeny_status bn_header(teeny_dist *d, int ok, int64_t C, int64_t n, double *counts, int64_t *n_total,
                              const char *fn)
{
    double row[3] = {ok ? 1.0 : 0.0, (double)C, (double)n};
    double *all = malloc(3 * (size_t)d->size * sizeof *all);
    int all_ok = 0;
    if (!all)
        return fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    teeny_status st = gather_rows(d, row, 3, all, &all_ok, fn);
    *n_total = 0;
    for (int r = 0; st == TEENY_OK && all_ok && r < d->size; r++) {
        if (all[3 * r + 1] != (double)C)
            st = fail(d, TEENY_ERR_SHAPE, "%s: rank %d has %lld channels, rank %d %.0f", fn, d->rank, (long long)C, r,
                      all[3 * r + 1]);
        *n_total += (int64_t)all[3 * r + 2];
        if (counts)
            counts[r] = all[3 * r + 2];
    }
    if (st == TEENY_OK && !all_ok)
        st = TEENY_ERR_STATE; /* gather_rows said which rank */
    free(all);
    return st;
}

teeny_status teeny_dist_batchnorm_forward_train(teeny_dist *d, teeny_ctx *ctx, const teeny_tensor *x,
                                                const teeny_tensor *weight, const teeny_tensor *bias,
                                                teeny_tensor *running_mean, teeny_tensor *running_var, float momentum,
                                                float eps, teeny_tensor *y, teeny_tensor *save_mean,
                                                teeny_tensor *save_rstd)
{
    const char *fn = "teeny_dist_batchnorm_forward_train";
    teeny_status st = check_usable(d, fn), local = TEENY_OK;
    teeny_tensor *scratch_rm = NULL, *scratch_rv = NULL, *gvar_t = NULL;
    float *hm = NULL, *hr = NULL, *rm = NULL, *rv = NULL;
    double *row = NULL, *all = NULL, *counts = NULL;
    int64_t C = 0, n = 0, N = 0;
    if (st != TEENY_OK)
        return st;
    /* the local part: any failure here is carried to every rank */
    if (!ctx || !bn_shape(x, &C, &n) || !running_mean || !running_var || !save_mean || !save_rstd)
        local = fail(d, TEENY_ERR_ARG, "%s: rank %d: NULL ctx or tensor, or x not [N, C] / [B, C, H, W]", fn, d->rank);
    if (local == TEENY_OK) {
        hm = malloc((size_t)C * 4 * sizeof *hm);
        row = malloc((1 + 2 * (size_t)C) * sizeof *row);
        all = malloc((1 + 2 * (size_t)C) * (size_t)d->size * sizeof *all);
        if (!hm || !row || !all)
            local = fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
        else
            hr = hm + C, rm = hm + 2 * C, rv = hm + 3 * C;
    }
    if (local == TEENY_OK && ((local = make_vec(ctx, C, NULL, &scratch_rm)) != TEENY_OK ||
                              (local = make_vec(ctx, C, NULL, &scratch_rv)) != TEENY_OK ||
                              (local = teeny_tensor_fill(scratch_rm, 0.0f)) != TEENY_OK ||
                              (local = teeny_tensor_fill(scratch_rv, 1.0f)) != TEENY_OK ||
                              (local = teeny_batchnorm_forward_train(ctx, x, weight, bias, scratch_rm, scratch_rv,
                                                                     momentum, eps, y, save_mean, save_rstd)) != TEENY_OK ||
                              (local = teeny_tensor_read(save_mean, hm, (size_t)C)) != TEENY_OK ||
                              (local = teeny_tensor_read(save_rstd, hr, (size_t)C)) != TEENY_OK ||
                              (local = teeny_tensor_read(running_mean, rm, (size_t)C)) != TEENY_OK ||
                              (local = teeny_tensor_read(running_var, rv, (size_t)C)) != TEENY_OK))
        fail(d, local, "%s: rank %d: the local statistics: %s", fn, d->rank, teeny_last_error(ctx));
    counts = malloc((size_t)d->size * sizeof *counts);
    if (!counts && local == TEENY_OK)
        local = fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    st = bn_header(d, local == TEENY_OK, C, n, counts, &N, fn);
    if (st == TEENY_ERR_STATE && local != TEENY_OK)
        st = local; /* this rank's own failure, with its own message */
    if (st != TEENY_OK)
        goto cleanup;
    row[0] = 1.0;
    for (int64_t c = 0; c < C; c++) {
        row[1 + c] = hm[c];
        row[1 + C + c] = 1.0 / ((double)hr[c] * hr[c]) - (double)eps; /* the kernel's biased variance */
    }
    int all_ok;
    if ((st = gather_rows(d, row, (int)(1 + 2 * C), all, &all_ok, fn)) != TEENY_OK)
        goto cleanup;
    for (int64_t c = 0; c < C; c++) {
        double mean = 0, m2 = 0;
        size_t stride = 1 + 2 * (size_t)C;
        for (int r = 0; r < d->size; r++)
            mean += counts[r] * all[(size_t)r * stride + 1 + (size_t)c];
        mean /= (double)N;
        for (int r = 0; r < d->size; r++) {
            double dm = all[(size_t)r * stride + 1 + (size_t)c] - mean;
            m2 += counts[r] * (all[(size_t)r * stride + 1 + (size_t)C + (size_t)c] + dm * dm);
        }
        double var = m2 / (double)N;
        hm[c] = (float)mean;
        hr[c] = (float)(1.0 / sqrt(var + (double)eps));
        row[1 + C + c] = var; /* keep the double for the running update */
        rm[c] = (float)((1.0 - momentum) * rm[c] + momentum * mean);
        rv[c] = (float)((1.0 - momentum) * rv[c] + momentum * (N > 1 ? var * (double)N / (double)(N - 1) : var));
    }
    /* the global mean and variance through the inference kernel */
    float *gv = malloc((size_t)C * sizeof *gv);
    if (!gv) {
        st = fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
        goto cleanup;
    }
    for (int64_t c = 0; c < C; c++)
        gv[c] = (float)row[1 + C + c];
    if ((st = make_vec(ctx, C, gv, &gvar_t)) != TEENY_OK || (st = teeny_tensor_write(save_mean, hm, (size_t)C)) ||
        (st = teeny_batchnorm_forward_infer(ctx, x, weight, bias, save_mean, gvar_t, eps, y)) ||
        (st = teeny_tensor_write(save_rstd, hr, (size_t)C)) || (st = teeny_tensor_write(running_mean, rm, (size_t)C)) ||
        (st = teeny_tensor_write(running_var, rv, (size_t)C)) || (st = teeny_ctx_finish(ctx)))
        fail(d, st, "%s: rank %d: %s", fn, d->rank, teeny_last_error(ctx));
    free(gv);
cleanup:
    teeny_tensor_destroy(scratch_rm);
    teeny_tensor_destroy(scratch_rv);
    teeny_tensor_destroy(gvar_t);
    free(hm);
    free(row);
    free(all);
    free(counts);
    return st;
}

teeny_status teeny_dist_batchnorm_backward_train(teeny_dist *d, teeny_ctx *ctx, const teeny_tensor *x,
                                                 const teeny_tensor *dy, const teeny_tensor *weight,
                                                 const teeny_tensor *save_mean, const teeny_tensor *save_rstd,
                                                 float eps, teeny_tensor *dx, teeny_tensor *dweight,
                                                 teeny_tensor *dbias)
{
    const char *fn = "teeny_dist_batchnorm_backward_train";
    teeny_status st = check_usable(d, fn), local = TEENY_OK;
    teeny_tensor *var_t = NULL, *a_t = NULL, *b_t = NULL, *corr = NULL;
    float *h = NULL;
    double *row = NULL, *all = NULL;
    int64_t C = 0, n = 0, N = 0;
    if (st != TEENY_OK)
        return st;
    if (!ctx || !bn_shape(x, &C, &n) || !weight || !save_mean || !save_rstd || !dx || !dweight || !dbias)
        local = fail(d, TEENY_ERR_ARG, "%s: rank %d: NULL ctx or tensor, or x not [N, C] / [B, C, H, W]", fn, d->rank);
    if (local == TEENY_OK) {
        h = malloc((size_t)C * 6 * sizeof *h);
        row = malloc((1 + 2 * (size_t)C) * sizeof *row);
        all = malloc((1 + 2 * (size_t)C) * (size_t)d->size * sizeof *all);
        if (!h || !row || !all)
            local = fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    }
    float *rstd = NULL, *w = NULL, *var = NULL, *sdw = NULL, *sdb = NULL, *coef = NULL;
    if (h)
        rstd = h, w = h + C, var = h + 2 * C, sdw = h + 3 * C, sdb = h + 4 * C, coef = h + 5 * C;
    if (local == TEENY_OK && ((local = teeny_tensor_read(save_rstd, rstd, (size_t)C)) != TEENY_OK ||
                              (local = teeny_tensor_read(weight, w, (size_t)C)) != TEENY_OK))
        fail(d, local, "%s: rank %d: %s", fn, d->rank, teeny_last_error(ctx));
    if (local == TEENY_OK) {
        for (int64_t c = 0; c < C; c++)
            var[c] = (float)(1.0 / ((double)rstd[c] * rstd[c]) - (double)eps);
        int64_t shape[4];
        for (int i = 0; i < teeny_tensor_ndim(x); i++)
            shape[i] = teeny_tensor_dim(x, i);
        /* dx = dy * w * rstd; dweight, dbias: this rank's sums */
        if ((local = make_vec(ctx, C, var, &var_t)) != TEENY_OK ||
            (local = teeny_batchnorm_backward_frozen(ctx, x, dy, weight, save_mean, var_t, eps, dx, dweight, dbias)) !=
                TEENY_OK ||
            (local = teeny_tensor_read(dweight, sdw, (size_t)C)) != TEENY_OK ||
            (local = teeny_tensor_read(dbias, sdb, (size_t)C)) != TEENY_OK ||
            (local = teeny_tensor_create(ctx, teeny_tensor_ndim(x), shape, &corr)) != TEENY_OK)
            fail(d, local, "%s: rank %d: the local sums: %s", fn, d->rank, teeny_last_error(ctx));
    }
    st = bn_header(d, local == TEENY_OK, C, n, NULL, &N, fn);
    if (st == TEENY_ERR_STATE && local != TEENY_OK)
        st = local; /* this rank's own failure, with its own message */
    if (st != TEENY_OK)
        goto cleanup;
    row[0] = 1.0;
    for (int64_t c = 0; c < C; c++) {
        row[1 + c] = sdb[c];
        row[1 + C + c] = sdw[c];
    }
    int all_ok;
    if ((st = gather_rows(d, row, (int)(1 + 2 * C), all, &all_ok, fn)) != TEENY_OK)
        goto cleanup;
    /* correction = -w * rstd / N * (sum dy + xhat * sum dy xhat): the
     * inference kernel computes xhat * a + b with a, b per channel */
    for (int64_t c = 0; c < C; c++) {
        double s_dy = 0, s_dyx = 0, k;
        size_t stride = 1 + 2 * (size_t)C;
        for (int r = 0; r < d->size; r++) {
            s_dy += all[(size_t)r * stride + 1 + (size_t)c];
            s_dyx += all[(size_t)r * stride + 1 + (size_t)C + (size_t)c];
        }
        k = -(double)w[c] * (double)rstd[c] / (double)N;
        coef[c] = (float)(k * s_dyx);
        sdb[c] = (float)(k * s_dy); /* reused as the correction's bias */
    }
    if ((st = make_vec(ctx, C, coef, &a_t)) != TEENY_OK || (st = make_vec(ctx, C, sdb, &b_t)) != TEENY_OK ||
        (st = teeny_batchnorm_forward_infer(ctx, x, a_t, b_t, save_mean, var_t, eps, corr)) != TEENY_OK ||
        (st = teeny_add(ctx, dx, corr, dx)) != TEENY_OK || (st = teeny_ctx_finish(ctx)) != TEENY_OK)
        fail(d, st, "%s: rank %d: %s", fn, d->rank, teeny_last_error(ctx));
cleanup:
    teeny_tensor_destroy(var_t);
    teeny_tensor_destroy(a_t);
    teeny_tensor_destroy(b_t);
    teeny_tensor_destroy(corr);
    free(h);
    free(row);
    free(all);
    return st;
}
