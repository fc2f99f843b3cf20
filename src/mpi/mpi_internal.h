/*
 * mpi_internal.h -- what the three parts of the MPI layer share
 * (include/teenycl_dist.h): the dist itself, its error text, and the
 * host-side collectives polled against the deadline.
 *
 *   comm.c    the dist (a duplicated communicator, node-local ranks, each
 *             rank's device), the deadline-polled collectives, sum_f64 and
 *             broadcast
 *   grads.c   the gradient exchanger (flat buffer, buckets, the
 *             reduce-scatter + allgather in global shard order)
 *   syncbn.c  batch norm over the global batch (SyncBatchNorm)
 *
 * Every OpenCL call and host allocation goes through core/clwrap.h, so
 * the fault tests reach them as they reach the library's own; the rest is
 * the public API of teenycl.h. Built only with `make WITH_MPI=1`.
 */
#ifndef TEENY_MPI_INTERNAL_H
#define TEENY_MPI_INTERNAL_H

#include <stdint.h>

#include "teenycl_dist.h"
#include "core/clwrap.h"

#define TEENY__DIST_ERR_CAP 1024

/* The first exchange of every collective is a header of this many int64
 * per rank: [0] the operation (below), then what the ranks must agree on.
 * One size for all, so that ranks in different collectives still pair up
 * in it and find out, instead of meeting in exchanges of different sizes
 * (a truncation, which MPI reports as an error or not at all). */
#define TEENY__DIST_HDR 6
typedef enum {
    TEENY__DIST_OP_SUM_F64 = 1,
    TEENY__DIST_OP_BROADCAST,
    TEENY__DIST_OP_GRADS_CREATE,
    TEENY__DIST_OP_GRADS_ALLREDUCE,
    TEENY__DIST_OP_BN_FORWARD,
    TEENY__DIST_OP_BN_BACKWARD,
    TEENY__DIST_OP_CHECK_SAME,
    TEENY__DIST_OP_COUNT
} teeny__dist_op;

struct teeny_dist {
    MPI_Comm comm;        /* duplicate of the caller's, MPI_ERRORS_RETURN */
    MPI_Comm node;        /* ranks on this node, MPI_ERRORS_RETURN */
    int rank, size, local_rank, local_size;
    double timeout_s;
    size_t bucket_bytes;
    int broken;           /* a collective failed, timed out or found the ranks out of step: no more collectives */
    int stuck;            /* a request may still be pending: comm cannot be freed */
    int64_t *agree;       /* size * TEENY__DIST_HDR: every rank's header of the current collective */
    char err[TEENY__DIST_ERR_CAP];
};

/* Record the message in d (NULL: the calling thread's dist-less error)
 * and return st. */
teeny_status teeny__dist_fail(teeny_dist *d, teeny_status st, const char *fmt, ...);
/* Clear d's (NULL: the thread's) last error. */
void teeny__dist_clear(teeny_dist *d);
/* MPI's text for rc, into buf (MPI_MAX_ERROR_STRING bytes). */
const char *teeny__dist_mpi_text(int rc, char *buf);
/* An MPI call that returned rc != MPI_SUCCESS: TEENY_ERR_IO naming the
 * call and MPI's text; the dist is broken (the ranks no longer agree on
 * where they are). */
teeny_status teeny__dist_mpi_fail(teeny_dist *d, int rc, const char *call, const char *fn);
/* TEENY_ERR_ARG for a NULL dist, TEENY_ERR_STATE for a broken one; clears
 * the last error. */
teeny_status teeny__dist_usable(teeny_dist *d, const char *fn);
/* Poll reqs until all complete or d's deadline passes (TEENY_ERR_IO, the
 * dist broken). Errors of the requests come back as TEENY_ERR_IO too,
 * never through an error handler that ends the job. */
teeny_status teeny__dist_wait(teeny_dist *d, int n, MPI_Request *reqs, const char *what);
/* MPI_Iallgather of count elements of type per rank, waited with the deadline. */
teeny_status teeny__dist_allgather(teeny_dist *d, const void *send, void *recv, int count, MPI_Datatype type,
                                   const char *what);
/* The header exchange that opens every collective: h[0] is the
 * operation, h[1..] what this rank passes; every rank's header lands in
 * d->agree. A rank in another collective fails every rank with
 * TEENY_ERR_IO and breaks the dist (they are out of step: no later
 * exchange would pair up). Comparing the rest is the caller's. */
teeny_status teeny__dist_agree(teeny_dist *d, const int64_t h[TEENY__DIST_HDR], const char *fn);
/* The tensors' total numel and an FNV-1a hash of their numels in order
 * (shifted to fit an int64_t): the layout fingerprint the ranks compare.
 * 0 when ts or one of its n tensors is NULL. */
int teeny__dist_layout(int n, teeny_tensor *const *ts, int64_t *total, int64_t *hash);

#endif
