/*
 * comm.c -- the dist (include/teenycl_dist.h): a duplicated communicator,
 * node-local ranks, each rank's device spec, and the host-side
 * collectives (sum_f64, broadcast) -- every one nonblocking and polled
 * against the deadline.
 *
 * Deadlines: nonblocking collectives, then MPI_Testall polling with a
 * short sleep until done or timeout_s. A collective that times out cannot
 * be cancelled (MPI has no cancel for collectives), so the dist is marked
 * broken and refuses later collectives instead of mixing them with the
 * stale one.
 *
 * Every collective opens with the same fixed-size header exchange
 * (teeny__dist_agree: the operation, then what the ranks must agree on),
 * so ranks in different collectives meet there and all fail at once, and
 * the exchanges after it always match in size. MPI errors come back as
 * codes (MPI_ERRORS_RETURN on the dist's communicators, and on
 * MPI_COMM_WORLD while polling: see teeny__dist_wait); every code becomes
 * a status.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi/mpi_internal.h"

#define DIST_DEFAULT_TIMEOUT_S 600.0
#define DIST_DEFAULT_BUCKET_BYTES ((size_t)4 << 20)

static _Thread_local char dist_err_global[TEENY__DIST_ERR_CAP];

teeny_status teeny__dist_fail(teeny_dist *d, teeny_status st, const char *fmt, ...)
{
    va_list ap;
    char *buf = d ? d->err : dist_err_global;
    va_start(ap, fmt);
    vsnprintf(buf, TEENY__DIST_ERR_CAP, fmt, ap);
    va_end(ap);
    return st;
}

void teeny__dist_clear(teeny_dist *d)
{
    if (d)
        d->err[0] = '\0';
    else
        dist_err_global[0] = '\0';
}

const char *teeny__dist_mpi_text(int rc, char *buf)
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

teeny_status teeny__dist_mpi_fail(teeny_dist *d, int rc, const char *call, const char *fn)
{
    char text[MPI_MAX_ERROR_STRING];
    d->broken = 1;
    return teeny__dist_fail(d, TEENY_ERR_IO, "%s: rank %d: %s failed: %s; the dist is broken, end the job", fn,
                            d->rank, call, teeny__dist_mpi_text(rc, text));
}

/* Poll reqs until all complete or the deadline passes. A rank waits here
 * for the slowest rank, so the sleep grows from 20 us to 1 ms: short
 * exchanges stay fast, long waits leave the core to the others. */
static teeny_status poll_all(teeny_dist *d, int n, MPI_Request *reqs, const char *what)
{
    double deadline = now_s() + d->timeout_s;
    long sleep_ns = 20000;
    for (;;) {
        int done = 0, rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            d->stuck = 1;
            return teeny__dist_mpi_fail(d, rc, "MPI_Testall", what);
        }
        if (done)
            return TEENY_OK;
        if (now_s() > deadline) {
            d->broken = d->stuck = 1;
            return teeny__dist_fail(d, TEENY_ERR_IO,
                                    "%s: rank %d: not every rank arrived within %.1f s (a rank failed or stalls); "
                                    "the dist is broken, end the job", what, d->rank, d->timeout_s);
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000)
            sleep_ns *= 2;
    }
}

/* Open MPI (4.1) reports an error of a nonblocking collective's request
 * (a truncated message, a failed peer) through MPI_COMM_WORLD's error
 * handler, not through the communicator's: MPI_ERRORS_ARE_FATAL unless
 * the application changed it, so an error in MPI_Testall would end the
 * job whatever handler the dist's communicator has. While it polls, the
 * dist therefore sets MPI_ERRORS_RETURN on MPI_COMM_WORLD and puts the
 * application's handler back before it returns: the application, which
 * uses a dist from one thread, never runs while the swap lasts. */
teeny_status teeny__dist_wait(teeny_dist *d, int n, MPI_Request *reqs, const char *what)
{
    MPI_Errhandler app = MPI_ERRHANDLER_NULL;
    int rc = MPI_Comm_get_errhandler(MPI_COMM_WORLD, &app);
    if (rc != MPI_SUCCESS) {
        d->stuck = 1;
        return teeny__dist_mpi_fail(d, rc, "MPI_Comm_get_errhandler", what);
    }
    if ((rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)) != MPI_SUCCESS) {
        (void)MPI_Errhandler_free(&app); /* the failure reported is the one above */
        d->stuck = 1;
        return teeny__dist_mpi_fail(d, rc, "MPI_Comm_set_errhandler", what);
    }
    teeny_status st = poll_all(d, n, reqs, what);
    if ((rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, app)) != MPI_SUCCESS && st == TEENY_OK)
        st = teeny__dist_mpi_fail(d, rc, "MPI_Comm_set_errhandler (restoring MPI_COMM_WORLD's)", what);
    if ((rc = MPI_Errhandler_free(&app)) != MPI_SUCCESS && st == TEENY_OK)
        st = teeny__dist_mpi_fail(d, rc, "MPI_Errhandler_free", what);
    return st;
}

teeny_status teeny__dist_usable(teeny_dist *d, const char *fn)
{
    if (!d)
        return teeny__dist_fail(NULL, TEENY_ERR_ARG, "%s: dist is NULL", fn);
    teeny__dist_clear(d);
    if (d->broken)
        return teeny__dist_fail(d, TEENY_ERR_STATE,
                                "%s: the dist is broken by an earlier failed or timed-out collective or by ranks "
                                "out of step", fn);
    return TEENY_OK;
}

int teeny__dist_layout(int n, teeny_tensor *const *ts, int64_t *total, int64_t *hash)
{
    uint64_t h = 1469598103934665603ULL;
    *total = 0;
    for (int i = 0; ts && i < n; i++) {
        if (!ts[i])
            return 0;
        *total += teeny_tensor_numel(ts[i]);
        h = (h ^ (uint64_t)teeny_tensor_numel(ts[i])) * 1099511628211ULL;
    }
    *hash = (int64_t)(h >> 1);
    return ts != NULL;
}

/* MPI_Iallgather of count elements of type per rank, waited with the deadline. */
teeny_status teeny__dist_allgather(teeny_dist *d, const void *send, void *recv, int count, MPI_Datatype type,
                                   const char *what)
{
    MPI_Request req;
    int rc = MPI_Iallgather(send, count, type, recv, count, type, d->comm, &req);
    if (rc != MPI_SUCCESS)
        return teeny__dist_mpi_fail(d, rc, "MPI_Iallgather", what);
    return teeny__dist_wait(d, 1, &req, what);
}

static const char *const op_names[TEENY__DIST_OP_COUNT] = {
    "?", "teeny_dist_sum_f64", "teeny_dist_broadcast", "teeny_dist_grads_create", "teeny_dist_grads_allreduce",
    "teeny_dist_batchnorm_forward_train", "teeny_dist_batchnorm_backward_train", "teeny_dist_check_same"};

static const char *op_name(int64_t op)
{
    return op > 0 && op < TEENY__DIST_OP_COUNT ? op_names[op] : "an unknown exchange";
}

teeny_status teeny__dist_agree(teeny_dist *d, const int64_t h[TEENY__DIST_HDR], const char *fn)
{
    teeny_status st = teeny__dist_allgather(d, h, d->agree, TEENY__DIST_HDR, MPI_INT64_T, fn);
    for (int r = 0; st == TEENY_OK && r < d->size; r++) {
        int64_t op = d->agree[(size_t)r * TEENY__DIST_HDR];
        if (op != h[0]) {
            d->broken = 1;
            st = teeny__dist_fail(d, TEENY_ERR_IO,
                                  "%s: rank %d is in %s and rank %d in %s: the ranks are out of step (one called a "
                                  "collective the others did not); the dist is broken, end the job",
                                  fn, d->rank, op_name(h[0]), r, op_name(op));
        }
    }
    return st;
}

static teeny_status create_fail(int rc, const char *call)
{
    char text[MPI_MAX_ERROR_STRING];
    return teeny__dist_fail(NULL, TEENY_ERR_IO, "teeny_dist_create: %s failed: %s", call,
                            teeny__dist_mpi_text(rc, text));
}

/* A communicator the dist made: errors returned as codes (and so statuses)
 * instead of ending the job, and this process's rank in it and its size. */
static teeny_status join_comm(MPI_Comm c, int *rank, int *size)
{
    int rc;
    if ((rc = MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN)) != MPI_SUCCESS)
        return create_fail(rc, "MPI_Comm_set_errhandler");
    if ((rc = MPI_Comm_rank(c, rank)) != MPI_SUCCESS)
        return create_fail(rc, "MPI_Comm_rank");
    if ((rc = MPI_Comm_size(c, size)) != MPI_SUCCESS)
        return create_fail(rc, "MPI_Comm_size");
    return TEENY_OK;
}

/* The dist's duplicate of comm and its node-local split. */
static teeny_status setup_comms(teeny_dist *d, MPI_Comm comm)
{
    int rc;
    teeny_status st;
    if ((rc = MPI_Comm_dup(comm, &d->comm)) != MPI_SUCCESS)
        return create_fail(rc, "MPI_Comm_dup");
    if ((st = join_comm(d->comm, &d->rank, &d->size)) != TEENY_OK)
        return st;
    if ((rc = MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &d->node)) != MPI_SUCCESS)
        return create_fail(rc, "MPI_Comm_split_type");
    return join_comm(d->node, &d->local_rank, &d->local_size);
}

teeny_status teeny_dist_create(MPI_Comm comm, const teeny_dist_params *p, teeny_dist **out)
{
    teeny_dist_params dp = TEENY_DIST_PARAMS_INIT;
    int inited = 0, finalized = 0;
    teeny_dist *d;
    teeny__dist_clear(NULL);
    if (!out)
        return teeny__dist_fail(NULL, TEENY_ERR_ARG, "teeny_dist_create: out is NULL");
    *out = NULL;
    if (p)
        dp = *p;
    if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited || MPI_Finalized(&finalized) != MPI_SUCCESS || finalized)
        return teeny__dist_fail(NULL, TEENY_ERR_STATE, "teeny_dist_create: MPI is %s (call MPI_Init first)",
                                finalized ? "finalized" : "not initialized");
    if (comm == MPI_COMM_NULL)
        return teeny__dist_fail(NULL, TEENY_ERR_ARG, "teeny_dist_create: comm is MPI_COMM_NULL");
    if (!isfinite(dp.timeout_s) || dp.timeout_s < 0)
        return teeny__dist_fail(NULL, TEENY_ERR_ARG, "teeny_dist_create: timeout_s %g is not a finite value >= 0",
                                dp.timeout_s);
    if (dp.timeout_s == 0) {
        const char *env = getenv("TEENY_DIST_TIMEOUT");
        char *end = NULL;
        dp.timeout_s = DIST_DEFAULT_TIMEOUT_S;
        if (env && *env) {
            double v = strtod(env, &end);
            if (*end || !isfinite(v) || v <= 0)
                return teeny__dist_fail(NULL, TEENY_ERR_ARG,
                                        "teeny_dist_create: TEENY_DIST_TIMEOUT=%s is not a number of seconds > 0", env);
            dp.timeout_s = v;
        }
    }
    if (!dp.bucket_bytes)
        dp.bucket_bytes = DIST_DEFAULT_BUCKET_BYTES;
    d = teeny__calloc(1, sizeof *d);
    if (!d)
        return teeny__dist_fail(NULL, TEENY_ERR_NOMEM, "teeny_dist_create: out of host memory");
    d->comm = d->node = MPI_COMM_NULL;
    d->timeout_s = dp.timeout_s;
    d->bucket_bytes = dp.bucket_bytes;
    teeny_status st = setup_comms(d, comm);
    if (st == TEENY_OK && !(d->agree = teeny__malloc((size_t)d->size * TEENY__DIST_HDR * sizeof *d->agree)))
        st = teeny__dist_fail(NULL, TEENY_ERR_NOMEM, "teeny_dist_create: out of host memory");
    if (st != TEENY_OK) {
        teeny_dist_destroy(d);
        return st;
    }
    *out = d;
    return TEENY_OK;
}

void teeny_dist_destroy(teeny_dist *d)
{
    if (!d)
        return;
    /* a request that never completed may still use the communicator;
     * MPI_Comm_free's own failure has nowhere to go (and cannot abort:
     * both communicators return errors) */
    if (!d->stuck) {
        if (d->node != MPI_COMM_NULL)
            (void)MPI_Comm_free(&d->node);
        if (d->comm != MPI_COMM_NULL)
            (void)MPI_Comm_free(&d->comm);
    }
    teeny__free(d->agree);
    teeny__free(d);
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
        return teeny__dist_fail(md, TEENY_ERR_ARG, "teeny_dist_device_spec: %s",
                                !d ? "dist is NULL" : "buf is NULL or cap 0");
    teeny__dist_clear(md);
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
                return teeny__dist_fail(md, TEENY_ERR_RANGE,
                                        "teeny_dist_device_spec: the spec from \"%s\" needs more than %zu bytes", t,
                                        cap);
        }
        return TEENY_OK;
    }
    /* round-robin over this node's GPUs, else the first CPU */
    int count = 0, n_gpu = 0, pick = -1;
    teeny_status st = teeny_devices_list(NULL, 0, &count);
    if (st != TEENY_OK)
        return teeny__dist_fail(md, st, "teeny_dist_device_spec: %s", teeny_last_error(NULL));
    if (count <= 0)
        return teeny__dist_fail(md, TEENY_ERR_NO_DEVICE, "teeny_dist_device_spec: no OpenCL device on this node");
    teeny_device_info *info = teeny__calloc((size_t)count, sizeof *info);
    if (!info)
        return teeny__dist_fail(md, TEENY_ERR_NOMEM, "teeny_dist_device_spec: out of host memory");
    info[0].struct_size = sizeof *info;
    if ((st = teeny_devices_list(info, count, &count)) != TEENY_OK) {
        teeny__free(info);
        return teeny__dist_fail(md, st, "teeny_dist_device_spec: %s", teeny_last_error(NULL));
    }
    for (int i = 0; i < count; i++)
        n_gpu += info[i].is_gpu != 0;
    for (int i = 0, k = 0; i < count && pick < 0; i++)
        if (n_gpu ? info[i].is_gpu && k++ == d->local_rank % n_gpu : info[i].is_cpu)
            pick = i;
    if (pick < 0)
        pick = 0;
    int w = snprintf(buf, cap, "%d:%d", info[pick].platform_index, info[pick].device_index);
    teeny__free(info);
    if (w < 0 || (size_t)w >= cap)
        return teeny__dist_fail(md, TEENY_ERR_RANGE, "teeny_dist_device_spec: cap %zu is too small for a P:D spec",
                                cap);
    return TEENY_OK;
}

teeny_status teeny_dist_ctx_create(const teeny_dist *d, const char *spec_template, teeny_ctx **out)
{
    char spec[512];
    if (out)
        *out = NULL;
    if (!out)
        return teeny__dist_fail((teeny_dist *)d, TEENY_ERR_ARG, "teeny_dist_ctx_create: out is NULL");
    teeny_status st = teeny_dist_device_spec(d, spec_template, spec, sizeof spec);
    if (st != TEENY_OK)
        return st;
    return teeny_ctx_create(spec, out);
}

teeny_status teeny_dist_sum_f64(teeny_dist *d, const double *in, double *out, int n)
{
    const char *fn = "teeny_dist_sum_f64";
    teeny_status st = teeny__dist_usable(d, fn);
    if (st != TEENY_OK)
        return st;
    /* first every rank's n (-1 for bad arguments): a bad or different n on
     * one rank fails every rank, and different counts never become
     * different message sizes */
    int mine = !in || !out || n <= 0 ? -1 : n;
    double *all = teeny__malloc((mine > 1 ? (size_t)mine : 1) * (size_t)d->size * sizeof *all);
    int64_t h[TEENY__DIST_HDR] = {TEENY__DIST_OP_SUM_F64, mine, all != NULL};
    st = teeny__dist_agree(d, h, fn);
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (!d->agree[r * TEENY__DIST_HDR + 2])
            st = r == d->rank ? teeny__dist_fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn)
                              : teeny__dist_fail(d, TEENY_ERR_STATE, "%s: rank %d is out of host memory", fn, r);
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (d->agree[r * TEENY__DIST_HDR + 1] < 0)
            st = teeny__dist_fail(d, TEENY_ERR_ARG, "%s: rank %d passed NULL in or out, or n <= 0", fn, r);
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (d->agree[r * TEENY__DIST_HDR + 1] != mine)
            st = teeny__dist_fail(d, TEENY_ERR_SHAPE, "%s: rank %d sums %d values, rank %d %lld", fn, d->rank, n, r,
                                  (long long)d->agree[r * TEENY__DIST_HDR + 1]);
    if (st == TEENY_OK)
        st = teeny__dist_allgather(d, in, all, n, MPI_DOUBLE, fn);
    if (st == TEENY_OK)
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int r = 0; r < d->size; r++)
                s += all[(size_t)r * (size_t)n + (size_t)i];
            out[i] = s;
        }
    teeny__free(all);
    return st;
}

teeny_status teeny_dist_broadcast(teeny_dist *d, teeny_ctx *ctx, int root, int n, teeny_tensor *const *ts)
{
    const char *fn = "teeny_dist_broadcast";
    teeny_status st = teeny__dist_usable(d, fn);
    if (st != TEENY_OK)
        return st;
    /* every rank checks its arguments and all compare a fixed-size summary
     * (argument check, count, floats, a hash of the numels in order, root),
     * so that a rank with bad or different arguments fails every rank at
     * once instead of leaving them at the deadline */
    int64_t numel = 0, layout = 0;
    int local_bad = !ctx || n <= 0 || root < 0 || root >= d->size || !teeny__dist_layout(n, ts, &numel, &layout);
    size_t total = (size_t)numel;
    float *host = local_bad ? NULL : teeny__malloc((total ? total : 1) * sizeof *host);
    int64_t h[TEENY__DIST_HDR] = {TEENY__DIST_OP_BROADCAST, local_bad ? 1 : !host ? 2 : 0, local_bad ? 0 : n, numel,
                                  layout, root};
    st = teeny__dist_agree(d, h, fn);
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (d->agree[r * TEENY__DIST_HDR + 1] == 1)
            st = teeny__dist_fail(d, TEENY_ERR_ARG, "%s: rank %d passed a NULL ctx, ts or tensor, n <= 0 or a root "
                                  "that is no rank", fn, r);
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (d->agree[r * TEENY__DIST_HDR + 1] == 2)
            st = r == d->rank ? teeny__dist_fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn)
                              : teeny__dist_fail(d, TEENY_ERR_STATE, "%s: rank %d is out of host memory", fn, r);
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (memcmp(d->agree + r * TEENY__DIST_HDR, h, sizeof h))
            st = teeny__dist_fail(d, TEENY_ERR_SHAPE, "%s: rank %d and rank %d differ in the tensors' count, numels "
                                  "or the root", fn, d->rank, r);
    if (st != TEENY_OK) {
        teeny__free(host);
        return st;
    }
    size_t at = 0;
    for (int i = 0; d->rank == root && i < n && st == TEENY_OK; i++) {
        size_t m = (size_t)teeny_tensor_numel(ts[i]);
        if ((st = teeny_tensor_read(ts[i], host + at, m)) != TEENY_OK)
            teeny__dist_fail(d, st, "teeny_dist_broadcast: reading tensor %d: %s", i, teeny_last_error(ctx));
        at += m;
    }
    /* the root's read status travels with the data, so a failed read
     * fails every rank rather than spreading garbage */
    int ok = st == TEENY_OK;
    MPI_Request req[2];
    int rc = MPI_Ibcast(&ok, 1, MPI_INT, root, d->comm, &req[0]);
    if (rc == MPI_SUCCESS && (rc = MPI_Ibcast(host, (int)total, MPI_FLOAT, root, d->comm, &req[1])) != MPI_SUCCESS)
        d->stuck = 1; /* the first one is posted */
    if (rc != MPI_SUCCESS) {
        teeny__free(host);
        return teeny__dist_mpi_fail(d, rc, "MPI_Ibcast", fn);
    }
    teeny_status wst = teeny__dist_wait(d, 2, req, fn);
    if (wst != TEENY_OK || st != TEENY_OK) {
        teeny__free(host);
        return wst != TEENY_OK ? wst : st;
    }
    if (!ok) {
        teeny__free(host);
        return teeny__dist_fail(d, TEENY_ERR_STATE,
                                "teeny_dist_broadcast: the root, rank %d, failed to read its tensors", root);
    }
    at = 0;
    for (int i = 0; d->rank != root && i < n && st == TEENY_OK; i++) {
        size_t m = (size_t)teeny_tensor_numel(ts[i]);
        if ((st = teeny_tensor_write(ts[i], host + at, m)) != TEENY_OK)
            teeny__dist_fail(d, st, "teeny_dist_broadcast: writing tensor %d: %s", i, teeny_last_error(ctx));
        at += m;
    }
    if (st == TEENY_OK && d->rank != root && (st = teeny_ctx_finish(ctx)) != TEENY_OK)
        teeny__dist_fail(d, st, "teeny_dist_broadcast: %s", teeny_last_error(ctx));
    teeny__free(host);
    return st;
}


/* FNV-1a over bytes from the offset basis h. */
static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

teeny_status teeny_dist_check_same(teeny_dist *d, const void *data, size_t bytes, const char *what)
{
    const char *fn = "teeny_dist_check_same";
    teeny_status st = teeny__dist_usable(d, fn);
    if (st != TEENY_OK)
        return st;
    int bad = !data && bytes > 0;
    uint64_t h1 = 1469598103934665603ULL, h2 = 0x84222325cbf29ce4ULL; /* two offset bases: 128 bits compared */
    if (!bad) {
        h1 = fnv1a(h1, data, bytes);
        h2 = fnv1a(h2, data, bytes);
    }
    int64_t h[TEENY__DIST_HDR] = {TEENY__DIST_OP_CHECK_SAME, bad, (int64_t)bytes, 0, 0};
    memcpy(&h[3], &h1, sizeof h1);
    memcpy(&h[4], &h2, sizeof h2);
    st = teeny__dist_agree(d, h, fn);
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (d->agree[r * TEENY__DIST_HDR + 1])
            st = teeny__dist_fail(d, TEENY_ERR_ARG, "%s: rank %d passed NULL data", fn, r);
    /* the same message on every rank: the first rank that differs from rank 0 */
    for (int r = 1; st == TEENY_OK && r < d->size; r++)
        if (memcmp(d->agree + r * TEENY__DIST_HDR, d->agree, sizeof h)) {
            char sizes[64] = "";
            long long b0 = (long long)d->agree[2], br = (long long)d->agree[r * TEENY__DIST_HDR + 2];
            if (b0 != br)
                snprintf(sizes, sizeof sizes, " (%lld and %lld bytes)", b0, br);
            st = teeny__dist_fail(d, TEENY_ERR_SHAPE, "%s: %s differs between rank 0 and rank %d%s", fn,
                                  what && *what ? what : "the data", r, sizes);
        }
    return st;
}
