/*
 * grads.c -- the gradient exchanger (include/teenycl_dist.h): every
 * rank's gradients averaged over every shard of the job, in global shard
 * order, so the bits do not depend on the rank count.
 *
 * Tensors are reached through teeny_tensor_cl and the context's in-order
 * queue (teeny_ctx_cl_queue), so every copy here is ordered after the
 * backward pass that produced the gradients without a wait.
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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_internal.h"

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
    int64_t layout;       /* the numels' hash (teeny__dist_layout) */
    cl_event *ev;         /* per bucket: its read in the current all-reduce */
    MPI_Request *req;     /* an alltoallv per bucket, then an allgatherv per bucket */
    /* per bucket b, R entries each at [b * R]: chunk c of the bucket is
     * owned by rank c and spans [lo, lo + len) of the bucket */
    int *chunk_lo, *chunk_len, *send_counts, *send_displs, *recv_counts, *recv_displs;
    size_t *recv_off, *mine_off; /* per bucket: its region of recv and mine */
};

/* A wait that host memory depends on (a pending read or write must not
 * outlive its buffer): an injected fault fires once, so it is retried. */
static void wait_event_hard(cl_event ev)
{
    if (TEENY_CL(clWaitForEvents, 1, &ev) == TEENY__FAULT_ERR)
        (void)TEENY_CL(clWaitForEvents, 1, &ev);
}

void teeny_dist_grads_destroy(teeny_dist_grads *dg)
{
    if (!dg)
        return;
    if (dg->queue && TEENY_CL(clFinish, dg->queue) == TEENY__FAULT_ERR)
        (void)TEENY_CL(clFinish, dg->queue); /* as wait_event_hard */
    TEENY_CL_RELEASE(clReleaseMemObject, dg->flat);
    void *host[] = {dg->grad_buf, dg->grad_off, dg->numel, dg->pos, dg->bucket_of, dg->blen, dg->boff,
                    dg->send, dg->pack, dg->recv, dg->mine, dg->mean, dg->chunk_lo, dg->chunk_len,
                    dg->send_counts, dg->send_displs, dg->recv_counts, dg->recv_displs, dg->recv_off, dg->mine_off,
                    dg->ev, dg->req};
    for (size_t i = 0; i < sizeof host / sizeof *host; i++)
        teeny__free(host[i]);
    teeny__free(dg);
}

/* Every rank checks its own arguments, then all compare (n, local_shards,
 * total floats, a hash of the numels in order: the bucket layout follows
 * from them), so that a bad or different argument on one rank fails every
 * rank instead of leaving them waiting. *total: one shard's floats,
 * *layout: the hash. */
static teeny_status agree_layout(teeny_dist *d, teeny_ctx *ctx, int n, teeny_tensor *const *grads, int local_shards,
                                 size_t *total, int64_t *layout, const char *fn)
{
    int64_t h[TEENY__DIST_HDR] = {TEENY__DIST_OP_GRADS_CREATE, n, local_shards, 0, 0};
    if (!ctx || n <= 0 || local_shards < 1 || !teeny__dist_layout(n, grads, &h[3], &h[4]))
        h[1] = -1; /* differs from any valid rank's count */
    teeny_status st = teeny__dist_agree(d, h, fn);
    const int64_t *all = d->agree;
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (all[TEENY__DIST_HDR * r + 1] < 0)
            st = teeny__dist_fail(d, TEENY_ERR_ARG,
                                  "%s: rank %d passed a NULL ctx, grads or grad, n <= 0 or local_shards < 1", fn, r);
    for (int r = 0; st == TEENY_OK && r < d->size; r++) {
        const int64_t *o = all + TEENY__DIST_HDR * r;
        if (memcmp(o, h, sizeof h))
            st = teeny__dist_fail(
                d, TEENY_ERR_SHAPE,
                "%s: rank %d has %lld gradients of %lld floats and %lld local shards, rank %d %lld, %lld and %lld%s",
                fn, d->rank, (long long)h[1], (long long)h[3], (long long)h[2], r, (long long)o[1], (long long)o[3],
                (long long)o[2], o[4] != h[4] ? " (the gradients' numels differ)" : "");
    }
    *total = (size_t)h[3];
    *layout = h[4];
    return st;
}

/* The parameters' host arrays and device handles, and their buckets:
 * taken in reverse order, a new bucket when the next one would pass
 * bucket_bytes per shard. */
static teeny_status plan_buckets(teeny_dist_grads *dg, teeny_tensor *const *grads, const char *fn)
{
    teeny_dist *d = dg->d;
    size_t n = (size_t)dg->n, L = (size_t)dg->local_shards;
    dg->grad_buf = teeny__malloc(n * sizeof *dg->grad_buf);
    dg->grad_off = teeny__malloc(n * sizeof *dg->grad_off);
    dg->numel = teeny__malloc(n * sizeof *dg->numel);
    dg->pos = teeny__malloc(n * sizeof *dg->pos);
    dg->bucket_of = teeny__malloc(n * sizeof *dg->bucket_of);
    dg->blen = teeny__calloc(n, sizeof *dg->blen);
    dg->boff = teeny__calloc(n, sizeof *dg->boff);
    dg->send = teeny__malloc(dg->total * L * sizeof *dg->send);
    dg->pack = teeny__malloc(dg->total * L * sizeof *dg->pack);
    dg->mean = teeny__malloc(dg->total * sizeof *dg->mean);
    if (!dg->grad_buf || !dg->grad_off || !dg->numel || !dg->pos || !dg->bucket_of || !dg->blen || !dg->boff ||
        !dg->send || !dg->pack || !dg->mean)
        return teeny__dist_fail(d, TEENY_ERR_NOMEM, "%s: out of host memory (%zu gradient floats, %zu shards)", fn,
                                dg->total, (size_t)d->size * L);
    for (int i = 0; i < dg->n; i++) {
        dg->numel[i] = (size_t)teeny_tensor_numel(grads[i]);
        teeny_status st = teeny_tensor_cl(grads[i], &dg->grad_buf[i], &dg->grad_off[i]);
        if (st != TEENY_OK)
            return teeny__dist_fail(d, st, "%s: grads[%d]: %s", fn, i, teeny_last_error(dg->ctx));
    }
    size_t cap = d->bucket_bytes / sizeof(float), start = 0;
    dg->n_buckets = 0;
    for (int i = dg->n - 1; i >= 0; i--) {
        int b = dg->n_buckets - 1;
        if (b < 0 || (dg->blen[b] > 0 && dg->blen[b] + dg->numel[i] > cap)) {
            b = dg->n_buckets++;
            dg->boff[b] = start;
        }
        dg->bucket_of[i] = b;
        dg->pos[i] = dg->blen[b];
        dg->blen[b] += dg->numel[i];
        start += dg->numel[i] * L;
    }
    return TEENY_OK;
}

/* The reduce-scatter's chunks: rank c owns [blen * c / R, blen * (c + 1) / R)
 * of each bucket; the counts and displacements of both exchanges and the
 * host buffers they fill. */
static teeny_status plan_chunks(teeny_dist_grads *dg, const char *fn)
{
    teeny_dist *d = dg->d;
    size_t R = (size_t)d->size, L = (size_t)dg->local_shards, nbR = (size_t)dg->n_buckets * R;
    size_t recv_total = 0, mine_total = 0;
    int **arrays[] = {&dg->chunk_lo, &dg->chunk_len, &dg->send_counts, &dg->send_displs, &dg->recv_counts,
                      &dg->recv_displs};
    for (int k = 0; k < 6; k++)
        if (!(*arrays[k] = teeny__malloc(nbR * sizeof(int))))
            return teeny__dist_fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    dg->recv_off = teeny__malloc((size_t)dg->n_buckets * sizeof *dg->recv_off);
    dg->mine_off = teeny__malloc((size_t)dg->n_buckets * sizeof *dg->mine_off);
    if (!dg->recv_off || !dg->mine_off)
        return teeny__dist_fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
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
    dg->recv = teeny__malloc((recv_total ? recv_total : 1) * sizeof *dg->recv);
    dg->mine = teeny__malloc((mine_total ? mine_total : 1) * sizeof *dg->mine);
    /* made here, so that an all-reduce never fails for memory on one rank */
    dg->ev = teeny__calloc((size_t)dg->n_buckets, sizeof *dg->ev);
    dg->req = teeny__malloc(2 * (size_t)dg->n_buckets * sizeof *dg->req);
    if (!dg->recv || !dg->mine || !dg->ev || !dg->req)
        return teeny__dist_fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    return TEENY_OK;
}

/* The flat device buffer, in the context of the context's queue. */
static teeny_status make_flat(teeny_dist_grads *dg, const char *fn)
{
    size_t bytes = dg->total * (size_t)dg->local_shards * sizeof(float);
    cl_context clctx = NULL;
    cl_command_queue queue = teeny_ctx_cl_queue(dg->ctx);
    cl_int e = TEENY_CL(clGetCommandQueueInfo, queue, CL_QUEUE_CONTEXT, sizeof clctx, &clctx, NULL);
    if (e == CL_SUCCESS)
        dg->flat = (cl_mem)TEENY_CLO(clCreateBuffer, &e, clctx, CL_MEM_READ_WRITE, bytes, NULL);
    if (e != CL_SUCCESS) {
        dg->flat = NULL;
        return teeny__dist_fail(dg->d, TEENY_ERR_OPENCL,
                                "%s: the flat gradient buffer (%zu bytes): clCreateBuffer failed: %s", fn, bytes,
                                teeny__cl_error_name(e));
    }
    dg->queue = queue;
    return TEENY_OK;
}

teeny_status teeny_dist_grads_create(teeny_dist *d, teeny_ctx *ctx, int n, teeny_tensor *const *grads,
                                     int local_shards, teeny_dist_grads **out)
{
    const char *fn = "teeny_dist_grads_create";
    teeny_status st = teeny__dist_usable(d, fn);
    teeny_dist_grads *dg = NULL;
    size_t total = 0;
    int64_t layout = 0;
    if (st != TEENY_OK)
        return st;
    if (!out)
        return teeny__dist_fail(d, TEENY_ERR_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if ((st = agree_layout(d, ctx, n, grads, local_shards, &total, &layout, fn)) != TEENY_OK)
        return st;
    size_t shards = (size_t)d->size * (size_t)local_shards;
    if (total == 0 || total > (size_t)INT32_MAX / (size_t)local_shards / (size_t)d->size)
        return teeny__dist_fail(d, TEENY_ERR_RANGE,
                                "%s: %zu gradient floats times %zu shards does not fit one MPI count", fn, total,
                                shards);
    dg = teeny__calloc(1, sizeof *dg);
    if (!dg)
        st = teeny__dist_fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    if (dg) {
        dg->d = d;
        dg->ctx = ctx;
        dg->n = n;
        dg->local_shards = local_shards;
        dg->total = total;
        dg->layout = layout;
        if ((st = plan_buckets(dg, grads, fn)) == TEENY_OK && (st = plan_chunks(dg, fn)) == TEENY_OK)
            st = make_flat(dg, fn);
    }
    /* every rank made its exchanger, or none keeps one (a minimum of ints:
     * MPI's reduction order cannot matter) */
    int ok = st == TEENY_OK, all_ok = 0;
    MPI_Request req;
    int rc = MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, d->comm, &req);
    teeny_status ast = rc == MPI_SUCCESS ? teeny__dist_wait(d, 1, &req, fn)
                                         : teeny__dist_mpi_fail(d, rc, "MPI_Iallreduce", fn);
    if (ast == TEENY_OK && ok && !all_ok)
        ast = teeny__dist_fail(d, TEENY_ERR_STATE, "%s: another rank could not make its exchanger (see its error)", fn);
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
        return teeny__dist_fail(NULL, TEENY_ERR_ARG, "teeny_dist_grads_add: dg is NULL");
    teeny_dist *d = dg->d;
    teeny__dist_clear(d);
    if (dg->added >= dg->local_shards)
        return teeny__dist_fail(d, TEENY_ERR_STATE,
                                "teeny_dist_grads_add: all %d local shards are already added (all-reduce first)",
                                dg->local_shards);
    for (int i = 0; i < dg->n; i++) {
        int b = dg->bucket_of[i];
        size_t dst = dg->boff[b] + (size_t)dg->added * dg->blen[b] + dg->pos[i];
        cl_int e = TEENY_CL(clEnqueueCopyBuffer, dg->queue, dg->grad_buf[i], dg->flat, dg->grad_off[i],
                            dst * sizeof(float), dg->numel[i] * sizeof(float), 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            /* this shard is incomplete: the step must fail on every rank */
            dg->added = dg->local_shards + 1;
            return teeny__dist_fail(d, TEENY_ERR_OPENCL,
                                    "teeny_dist_grads_add: clEnqueueCopyBuffer of gradient %d failed: %s", i,
                                    teeny__cl_error_name(e));
        }
    }
    dg->added++;
    return TEENY_OK;
}

/* 1. this rank's data, read bucket by bucket without waiting (ev[b]);
 * 0 when a read could not be enqueued. */
static int start_reads(teeny_dist_grads *dg, cl_event *ev, const char *fn)
{
    size_t L = (size_t)dg->local_shards;
    for (int b = 0; b < dg->n_buckets; b++) {
        cl_int e = TEENY_CL(clEnqueueReadBufferAsync, dg->queue, dg->flat, CL_FALSE, dg->boff[b] * sizeof(float),
                            dg->blen[b] * L * sizeof(float), dg->send + dg->boff[b], 0, NULL, &ev[b]);
        if (e != CL_SUCCESS) {
            teeny__dist_fail(dg->d, TEENY_ERR_OPENCL, "%s: rank %d: reading bucket %d: clEnqueueReadBuffer failed: %s",
                             fn, dg->d->rank, b, teeny__cl_error_name(e));
            return 0;
        }
    }
    cl_int e = TEENY_CL(clFlush, dg->queue);
    if (e != CL_SUCCESS) {
        teeny__dist_fail(dg->d, TEENY_ERR_OPENCL, "%s: rank %d: clFlush failed: %s", fn, dg->d->rank,
                         teeny__cl_error_name(e));
        return 0;
    }
    return 1;
}

/* 2. every rank's status and exchanger: the step goes on only if every
 * rank can give its part (ok: this rank can; why: what failed here when
 * it cannot) to an exchanger of the same layout. */
static teeny_status agree_step(teeny_dist_grads *dg, int ok, const char *why, const char *fn)
{
    teeny_dist *d = dg->d;
    int64_t h[TEENY__DIST_HDR] = {TEENY__DIST_OP_GRADS_ALLREDUCE, ok, (int64_t)dg->total, dg->local_shards,
                                  dg->layout, dg->n_buckets};
    teeny_status st = teeny__dist_agree(d, h, fn);
    if (st != TEENY_OK)
        return st;
    for (int r = 0; r < d->size; r++)
        if (memcmp(d->agree + TEENY__DIST_HDR * r + 2, h + 2, sizeof h - 2 * sizeof *h))
            return teeny__dist_fail(d, TEENY_ERR_SHAPE, "%s: rank %d and rank %d pass exchangers of different "
                                    "layouts (another teeny_dist_grads); gradients unchanged", fn, d->rank, r);
    char ranks[256] = "";
    size_t len = 0;
    int bad = 0;
    for (int r = 0; r < d->size; r++)
        if (!d->agree[TEENY__DIST_HDR * r + 1]) {
            bad++;
            if (len + 16 < sizeof ranks)
                len += (size_t)snprintf(ranks + len, sizeof ranks - len, "%s%d", bad > 1 ? ", " : "", r);
        }
    if (bad)
        return teeny__dist_fail(d, TEENY_ERR_STATE,
                                "%s: rank %d: %d rank(s) failed this step (%s)%s%s; gradients unchanged", fn, d->rank,
                                bad, ranks, ok ? "" : ": ", ok ? "" : why);
    return TEENY_OK;
}

/* 3. the reduce-scatter, bucket by bucket as each read comes in: rank c
 * receives chunk c of every rank's local shards (MPI_Ialltoallv, into
 * req[b]), in [rank][local shard][chunk] order, which is global shard
 * order. */
static teeny_status scatter_buckets(teeny_dist_grads *dg, cl_event *ev, MPI_Request *req, int *n_req, const char *fn)
{
    teeny_dist *d = dg->d;
    size_t R = (size_t)d->size, L = (size_t)dg->local_shards;
    for (int b = 0; b < dg->n_buckets; b++) {
        cl_int e = TEENY_CL(clWaitForEvents, 1, &ev[b]);
        if (e != CL_SUCCESS) {
            /* the others wait for this bucket: they meet the deadline */
            d->broken = 1;
            d->stuck = *n_req > 0; /* the earlier buckets' exchanges are posted */
            return teeny__dist_fail(d, TEENY_ERR_OPENCL,
                                    "%s: rank %d: waiting for bucket %d's read: clWaitForEvents failed: %s; "
                                    "the dist is broken", fn, d->rank, b, teeny__cl_error_name(e));
        }
        size_t blen = dg->blen[b];
        const float *src = dg->send + dg->boff[b];
        float *packed = dg->pack + dg->boff[b];
        for (size_t c = 0; c < R; c++) {
            size_t lo = (size_t)dg->chunk_lo[b * R + c], len = (size_t)dg->chunk_len[b * R + c];
            for (size_t k = 0; k < L; k++)
                memcpy(packed + L * lo + k * len, src + k * blen + lo, len * sizeof *packed);
        }
        int rc = MPI_Ialltoallv(packed, dg->send_counts + b * R, dg->send_displs + b * R, MPI_FLOAT,
                                dg->recv + dg->recv_off[b], dg->recv_counts + b * R, dg->recv_displs + b * R,
                                MPI_FLOAT, d->comm, &req[*n_req]);
        if (rc != MPI_SUCCESS) {
            d->stuck = *n_req > 0;
            return teeny__dist_mpi_fail(d, rc, "MPI_Ialltoallv", fn);
        }
        (*n_req)++;
    }
    return TEENY_OK;
}

/* 4. per bucket: the mean of this rank's chunk over every shard of the
 * job, summed in global shard order in double, then every chunk to every
 * rank (MPI_Iallgatherv, into req[n_buckets + b]). */
static teeny_status gather_means(teeny_dist_grads *dg, MPI_Request *req, int *n_req, const char *fn)
{
    teeny_dist *d = dg->d;
    size_t R = (size_t)d->size, L = (size_t)dg->local_shards;
    double inv = 1.0 / (double)(R * L);
    for (int b = 0; b < dg->n_buckets; b++) {
        teeny_status st = teeny__dist_wait(d, 1, &req[b], fn);
        if (st != TEENY_OK)
            return st;
        size_t me = (size_t)d->rank, my_len = (size_t)dg->chunk_len[b * R + me];
        const float *src = dg->recv + dg->recv_off[b];
        float *dst = dg->mine + dg->mine_off[b];
        for (size_t e = 0; e < my_len; e++) {
            double sum = 0;
            for (size_t g = 0; g < R * L; g++)
                sum += (double)src[g * my_len + e];
            dst[e] = (float)(sum * inv);
        }
        int rc = MPI_Iallgatherv(dst, (int)my_len, MPI_FLOAT, dg->mean + dg->boff[b] / L, dg->chunk_len + b * R,
                                 dg->chunk_lo + b * R, MPI_FLOAT, d->comm, &req[*n_req]);
        if (rc != MPI_SUCCESS) {
            d->stuck = 1; /* later buckets' alltoallv are posted */
            return teeny__dist_mpi_fail(d, rc, "MPI_Iallgatherv", fn);
        }
        (*n_req)++;
    }
    return teeny__dist_wait(d, *n_req - dg->n_buckets, req + dg->n_buckets, fn);
}

/* 5. one write per bucket into local shard 0's slice, then copies out to
 * the gradient tensors. */
static teeny_status write_back(teeny_dist_grads *dg, const char *fn)
{
    teeny_dist *d = dg->d;
    teeny_status st = TEENY_OK;
    for (int b = 0; b < dg->n_buckets && st == TEENY_OK; b++) {
        cl_int e = TEENY_CL(clEnqueueWriteBuffer, dg->queue, dg->flat, CL_FALSE, dg->boff[b] * sizeof(float),
                            dg->blen[b] * sizeof(float), dg->mean + dg->boff[b] / (size_t)dg->local_shards, 0, NULL,
                            NULL);
        if (e != CL_SUCCESS)
            st = teeny__dist_fail(d, TEENY_ERR_OPENCL, "%s: writing bucket %d: clEnqueueWriteBuffer failed: %s", fn, b,
                                  teeny__cl_error_name(e));
    }
    for (int i = 0; i < dg->n && st == TEENY_OK; i++) {
        int b = dg->bucket_of[i];
        cl_int e = TEENY_CL(clEnqueueCopyBuffer, dg->queue, dg->flat, dg->grad_buf[i],
                            (dg->boff[b] + dg->pos[i]) * sizeof(float), dg->grad_off[i], dg->numel[i] * sizeof(float),
                            0, NULL, NULL);
        if (e != CL_SUCCESS)
            st = teeny__dist_fail(d, TEENY_ERR_OPENCL,
                                  "%s: copying gradient %d back: clEnqueueCopyBuffer failed: %s", fn, i,
                                  teeny__cl_error_name(e));
    }
    /* the non-blocking writes read dg->mean: it must hold still until they
     * are done (the next all-reduce's reads follow them in the queue, but
     * the host could rewrite mean before that) */
    cl_int e = TEENY_CL(clFinish, dg->queue);
    if (st == TEENY_OK && e != CL_SUCCESS)
        st = teeny__dist_fail(d, TEENY_ERR_OPENCL, "%s: clFinish failed: %s", fn, teeny__cl_error_name(e));
    return st;
}

teeny_status teeny_dist_grads_allreduce(teeny_dist_grads *dg, teeny_status local)
{
    const char *fn = "teeny_dist_grads_allreduce";
    if (!dg)
        return teeny__dist_fail(NULL, TEENY_ERR_ARG, "%s: dg is NULL", fn);
    teeny_dist *d = dg->d;
    teeny_status st = teeny__dist_usable(d, fn);
    int added = dg->added;
    dg->added = 0;
    if (st != TEENY_OK)
        return st;
    cl_event *ev = dg->ev;
    MPI_Request *req = dg->req;
    int n_req = 0;
    int ok = local == TEENY_OK && added == dg->local_shards && start_reads(dg, ev, fn);
    const char *why = local != TEENY_OK ? "this rank's step reported an error"
                      : added != dg->local_shards ? "this rank did not add every local shard"
                                                  : "this rank could not read its gradients";
    st = agree_step(dg, ok, why, fn);
    if (st == TEENY_OK)
        st = scatter_buckets(dg, ev, req, &n_req, fn);
    if (st == TEENY_OK)
        st = gather_means(dg, req, &n_req, fn);
    for (int b = 0; b < dg->n_buckets; b++)
        if (ev[b]) {
            if (st != TEENY_OK)
                wait_event_hard(ev[b]); /* the host buffer must not be read into after we return */
            TEENY_CL_RELEASE(clReleaseEvent, ev[b]);
            ev[b] = NULL;
        }
    if (st != TEENY_OK)
        return st;
    return write_back(dg, fn);
}

int64_t teeny_dist_grads_numel(const teeny_dist_grads *dg)
{
    return dg ? (int64_t)dg->total : -1;
}

int teeny_dist_grads_buckets(const teeny_dist_grads *dg)
{
    return dg ? dg->n_buckets : -1;
}
