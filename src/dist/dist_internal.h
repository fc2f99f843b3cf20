/*
 * dist_internal.h -- what the three parts of the MPI layer share
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
#ifndef TEENY_DIST_INTERNAL_H
#define TEENY_DIST_INTERNAL_H

#include <stdint.h>

#include "teenycl_dist.h"
#include "core/clwrap.h"

#define TEENY__DIST_ERR_CAP 1024

struct teeny_dist {
    MPI_Comm comm;        /* duplicate of the caller's */
    MPI_Comm node;        /* ranks on this node */
    int rank, size, local_rank, local_size;
    double timeout_s;
    size_t bucket_bytes;
    int broken;           /* a collective timed out or failed: no more collectives */
    char err[TEENY__DIST_ERR_CAP];
};

/* Record the message in d (NULL: the calling thread's dist-less error)
 * and return st. */
teeny_status teeny__dist_fail(teeny_dist *d, teeny_status st, const char *fmt, ...);
/* Clear d's (NULL: the thread's) last error. */
void teeny__dist_clear(teeny_dist *d);
/* MPI's text for rc, into buf (MPI_MAX_ERROR_STRING bytes). */
const char *teeny__dist_mpi_text(int rc, char *buf);
/* TEENY_ERR_ARG for a NULL dist, TEENY_ERR_STATE for a broken one; clears
 * the last error. */
teeny_status teeny__dist_usable(teeny_dist *d, const char *fn);
/* Poll reqs until all complete or d's deadline passes (TEENY_ERR_IO, the
 * dist broken). */
teeny_status teeny__dist_wait(teeny_dist *d, int n, MPI_Request *reqs, const char *what);
/* MPI_Iallgather of count elements of type per rank, waited with the deadline. */
teeny_status teeny__dist_allgather(teeny_dist *d, const void *send, void *recv, int count, MPI_Datatype type,
                                   const char *what);
/* The tensors' total numel and an FNV-1a hash of their numels in order
 * (shifted to fit an int64_t): the layout fingerprint the ranks compare.
 * 0 when ts or one of its n tensors is NULL. */
int teeny__dist_layout(int n, teeny_tensor *const *ts, int64_t *total, int64_t *hash);

#endif
