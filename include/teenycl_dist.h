/*
 * teenycl_dist.h -- data-parallel training over MPI: one rank per OpenCL
 * device, gradients averaged across ranks after each backward pass in a
 * fixed order, so results do not depend on MPI's reduction order.
 *
 * Optional: built with `make WITH_MPI=1` into libteenycl_dist.a, which
 * applications link before libteenycl and MPI; `make WITH_MPI=1 install`
 * also installs this header and teenycl-mpi.pc (Cflags -DTEENY_WITH_MPI,
 * Libs -lteenycl_dist, Requires teenycl and Open MPI's ompi-c):
 *     cc app.c $(pkg-config --cflags --libs teenycl-mpi)
 * The default build and libteenycl itself never need MPI; the dist layer
 * uses only the public API of teenycl.h (plus the context's queue).
 *
 * Overview
 * --------
 * The caller initializes MPI (MPI_Init) and creates a teeny_dist from a
 * communicator; the dist duplicates it, so its traffic never meets the
 * caller's. Each rank creates its context with teeny_dist_ctx_create,
 * which picks the rank's device (TEENY_DEVICE with "{local_rank}"
 * substituted, else a round-robin over the node's GPUs, else its CPU).
 * Every rank builds the same graph from the same seed (so parameters start
 * equal), compiles a plan for one *shard* of the global batch, and per
 * step runs, for each of its local shards: write the shard's inputs,
 * forward, backward, teeny_dist_grads_add. Then teeny_dist_grads_allreduce
 * leaves in every rank's gradient tensors the mean over all shards of the
 * job -- the gradient of the mean loss over the global batch when shards
 * are equal-sized and the loss is a batch mean -- and each rank takes the
 * same optimizer step.
 *
 * Example (errors unchecked for brevity; see examples/train_fashion_mnist.c):
 *
 *     MPI_Init(&argc, &argv);
 *     teeny_dist *d;  teeny_ctx *ctx;  teeny_dist_grads *dg;
 *     teeny_dist_create(MPI_COMM_WORLD, NULL, &d);
 *     teeny_dist_ctx_create(d, NULL, &ctx);          // this rank's device
 *     // build graph g with the same seed everywhere, compile `plan` for
 *     // global_batch / (size * L) samples, collect grads[] with
 *     // teeny_graph_param, create the optimizer, then:
 *     teeny_dist_grads_create(d, ctx, n_params, grads, L, &dg);
 *     for (each step) {
 *         for (int k = 0; k < L; k++) {  // global shard rank * L + k
 *             // write that shard's inputs and labels into the plan
 *             teeny_plan_forward(plan);
 *             teeny_plan_backward(plan);
 *             teeny_dist_grads_add(dg);
 *         }
 *         if (teeny_dist_grads_allreduce(dg, TEENY_OK) != TEENY_OK)
 *             break;                                 // every rank sees it
 *         teeny_optimizer_step(opt, lr, -1.0f);
 *     }
 *     teeny_dist_grads_destroy(dg);  ...  teeny_ctx_destroy(ctx);
 *     teeny_dist_destroy(d);
 *     MPI_Finalize();
 *
 * Shards and determinism: the job's global batch is split into
 * size * local_shards equal shards; rank r owns global shards
 * r*local_shards .. r*local_shards + local_shards - 1, in the order of the
 * global batch. The all-reduce is host-staged, per bucket: device-side
 * packing, one read, a reduce-scatter (MPI_Ialltoallv: rank c receives
 * chunk c of the bucket from every shard and sums it in global shard
 * order, in double, then divides by the shard count), an MPI_Iallgatherv
 * of the averaged chunks, and one write back. MPI's own reduction order
 * is never used. So for a fixed number of global shards S, any rank
 * count that divides S (1, 2, 3 for S = 6) gives bit-identical averaged
 * gradients and weights, provided each shard's gradient is itself computed
 * by the same kernels: the same plan batch on devices that report the same
 * limits (the same device and driver; e.g. PoCL's compute-unit count
 * follows POCL_MAX_PTHREAD_COUNT, and kernel variants follow it). With one
 * shard per rank (local_shards = 1) the result is the same average over a
 * different grouping: equal to a single process's full-batch gradient up
 * to rounding, not bit for bit.
 *
 * Batch norm: in a graph plan each shard normalizes with its own batch
 * statistics (PyTorch DDP's default) and each rank keeps its own running
 * statistics (rank 0's are the ones to save). Statistics over the global
 * batch (SyncBatchNorm) are offered as eager calls,
 * teeny_dist_batchnorm_forward_train / _backward_train; the graph's batch
 * norm does not use them.
 *
 * Failures never hang: every collective is nonblocking and polled against
 * a deadline (teeny_dist_params.timeout_s). A rank whose own step failed
 * still calls teeny_dist_grads_allreduce (passing its status); every rank
 * then returns TEENY_ERR_STATE naming the failed ranks, and the gradients
 * are left as they were. A rank that does not arrive in time makes the
 * others return TEENY_ERR_IO when the deadline passes; the dist is then
 * broken (every later collective returns TEENY_ERR_STATE at once) and the
 * job should end. Ranks out of step -- one rank in another collective
 * than the others (say teeny_dist_sum_f64 against teeny_dist_broadcast,
 * or one more or one fewer call) -- are found in the first exchange of
 * every collective, which names the operation: every rank returns
 * TEENY_ERR_IO at once ("out of step", naming both calls) and the dist is
 * broken likewise. A process that dies is mpirun's to handle: it ends
 * every rank of the job. Details of any failure: teeny_dist_last_error.
 *
 * MPI errors never end the job from inside the layer: the duplicated
 * communicators return errors as codes (MPI_ERRORS_RETURN), every MPI
 * call's code becomes a status, and while a collective is polled the
 * layer sets MPI_ERRORS_RETURN on MPI_COMM_WORLD too (Open MPI reports the
 * errors of nonblocking collectives' requests there, whatever the
 * communicator), putting the application's handler back before it
 * returns. The caller's communicator is never changed.
 *
 * Threads: a dist and its gradient exchangers are used by one thread at a
 * time (the one that uses their context); MPI_THREAD_SINGLE suffices.
 */
#ifndef TEENYCL_DIST_H
#define TEENYCL_DIST_H

#include <mpi.h>

#include "teenycl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct teeny_dist teeny_dist;
typedef struct teeny_dist_grads teeny_dist_grads;

typedef struct {
    double timeout_s;      /* deadline of each collective, seconds; 0: $TEENY_DIST_TIMEOUT, else 600 */
    size_t bucket_bytes;   /* gradient bucket size (one shard's share); 0: 4 MiB */
} teeny_dist_params;
#define TEENY_DIST_PARAMS_INIT { 0.0, 0 }

/* Create a dist over comm (MPI_COMM_WORLD or a caller's communicator;
 * duplicated, not borrowed). p may be NULL (defaults). MPI must be
 * initialized and not finalized (TEENY_ERR_STATE otherwise); TEENY_ERR_ARG
 * for MPI_COMM_NULL or a negative or non-finite timeout. Collective: every
 * rank of comm calls it. Caller frees with teeny_dist_destroy. */
TEENY_API teeny_status teeny_dist_create(MPI_Comm comm, const teeny_dist_params *p, teeny_dist **out);
/* Frees the dist (the duplicated communicator too, unless a collective
 * timed out or failed while pending: it may still hold it). Destroy its gradient
 * exchangers first. NULL is a no-op. Call before MPI_Finalize. */
TEENY_API void teeny_dist_destroy(teeny_dist *d);
/* The failure details of the last failed call on d; with d NULL, of the
 * calling thread's last failed teeny_dist_create or call given a NULL
 * dist. Never NULL; "" when there is none. Borrowed until the next call. */
TEENY_API const char *teeny_dist_last_error(const teeny_dist *d);

/* This rank and the number of ranks in the dist's communicator; the rank
 * among the ranks on the same node (MPI_COMM_TYPE_SHARED) and their
 * number. -1 for NULL. */
TEENY_API int teeny_dist_rank(const teeny_dist *d);
TEENY_API int teeny_dist_size(const teeny_dist *d);
TEENY_API int teeny_dist_local_rank(const teeny_dist *d);
TEENY_API int teeny_dist_local_size(const teeny_dist *d);

/* The device spec this rank should use, into buf (cap bytes): spec_template
 * if not NULL, else $TEENY_DEVICE, with every "{local_rank}" replaced by
 * the local rank (and "{rank}" by the rank), e.g. "0:{local_rank}"; with
 * neither, "P:D" of the node's GPU number local_rank modulo the GPU count,
 * else of the first CPU device. TEENY_ERR_NO_DEVICE when there is no
 * device, TEENY_ERR_RANGE when the spec does not fit in cap. Local. */
TEENY_API teeny_status teeny_dist_device_spec(const teeny_dist *d, const char *spec_template, char *buf, size_t cap);
/* teeny_ctx_create on that spec. On failure the details are in
 * teeny_last_error(NULL). Caller frees with teeny_ctx_destroy. */
TEENY_API teeny_status teeny_dist_ctx_create(const teeny_dist *d, const char *spec_template, teeny_ctx **out);

/* Sum n doubles across ranks, in rank order on every rank (the same bits
 * on all ranks and for every run): out[i] = sum over ranks of in[i].
 * in and out may be the same array. Collective, host only; for losses,
 * counts and timings. Every rank returns TEENY_ERR_ARG when one passes
 * NULL or n <= 0, TEENY_ERR_SHAPE when the ranks' n differ; TEENY_ERR_IO
 * on an MPI failure or the deadline. */
TEENY_API teeny_status teeny_dist_sum_f64(teeny_dist *d, const double *in, double *out, int n);
/* Check that every rank passed the same bytes (e.g. the options or
 * configuration a data-parallel run needs to agree on): TEENY_OK on every
 * rank when they are equal (compared by length and two 64-bit hashes);
 * otherwise TEENY_ERR_SHAPE on every rank, the message naming what (NULL:
 * "the data") and the first rank that differs from rank 0. TEENY_ERR_ARG
 * on every rank when one passes NULL data with bytes > 0. Collective,
 * host only. */
TEENY_API teeny_status teeny_dist_check_same(teeny_dist *d, const void *data, size_t bytes, const char *what);
/* Copy root's tensors into every rank's (the same root, count, numels and
 * order on every rank; TEENY_ERR_SHAPE on every rank when they differ,
 * TEENY_ERR_ARG on every rank when one passes a NULL ctx, ts or tensor,
 * n <= 0 or a root that is no rank): e.g. parameters and running
 * statistics after rank 0 loaded a checkpoint. Host-staged (the root
 * reads, one MPI_Ibcast, the others write). Collective; host sync. */
TEENY_API teeny_status teeny_dist_broadcast(teeny_dist *d, teeny_ctx *ctx, int root, int n, teeny_tensor *const *ts);

/* A gradient exchanger for n gradient tensors (e.g. every grad of
 * teeny_graph_param, in parameter order; fp32, of ctx, borrowed: they must
 * outlive it) and local_shards >= 1 shards per rank, the same n, numels
 * and local_shards on every rank (TEENY_ERR_SHAPE on every rank
 * otherwise). Allocates one flat device buffer of local_shards * total
 * numel floats, laid out in buckets (parameters in reverse order, as the
 * backward pass produces them) and the host buffers for the exchange.
 * Collective. Caller frees with teeny_dist_grads_destroy. */
TEENY_API teeny_status teeny_dist_grads_create(teeny_dist *d, teeny_ctx *ctx, int n, teeny_tensor *const *grads,
    int local_shards, teeny_dist_grads **out);
/* Waits for its pending device work, frees it. NULL is a no-op. */
TEENY_API void teeny_dist_grads_destroy(teeny_dist_grads *dg);
/* Record the current gradients as this rank's next local shard (device-side
 * copies into the flat buffer; enqueues, does not wait). Call once after
 * each shard's backward. TEENY_ERR_STATE when local_shards shards are
 * already recorded since the last all-reduce. Local. */
TEENY_API teeny_status teeny_dist_grads_add(teeny_dist_grads *dg);
/* The all-reduce, after every local shard was added: every rank's gradient
 * tensors receive mean over the job's shards, summed in global shard order
 * (see the overview). local is this rank's own status for the step: a rank
 * whose step failed passes it (or simply has not added every shard) and
 * still calls this, so that every rank returns TEENY_ERR_STATE naming it,
 * gradients unchanged, instead of waiting. Every rank returns
 * TEENY_ERR_SHAPE, gradients unchanged, when the ranks pass exchangers of
 * different layouts. Host sync. Collective. Starts the next step's count
 * of shards at 0 whatever it returns. */
TEENY_API teeny_status teeny_dist_grads_allreduce(teeny_dist_grads *dg, teeny_status local);
/* Total gradient elements (one shard's) and the number of buckets. */
TEENY_API int64_t teeny_dist_grads_numel(const teeny_dist_grads *dg);
TEENY_API int teeny_dist_grads_buckets(const teeny_dist_grads *dg);

/* SyncBatchNorm: teeny_batchnorm_forward_train / _backward_train (same
 * arguments, layouts and PyTorch semantics, see teenycl.h) with the
 * statistics over the global batch, every rank's x together (ranks may
 * hold different batch sizes; C must agree). Forward: each rank's
 * per-channel count, mean and biased variance (from the batch-norm
 * kernel's own statistics; var = 1/rstd^2 - eps, in double) are gathered
 * and combined in rank order in double; y is normalized with the global
 * mean and variance, save_mean / save_rstd receive them, and the running
 * statistics are updated with them (unbiased variance over the global
 * count), the same on every rank. Backward (save_mean, save_rstd and eps
 * from the forward): dweight and dbias are this rank's sums (the gradient
 * exchange averages them with the other parameters' gradients), dx uses
 * the global sums of dy and dy * xhat, gathered and added in rank order,
 * as PyTorch's SyncBatchNorm does. With every rank's dy the gradient of
 * one loss, the dx equal those of teeny_batchnorm_backward_train on the
 * concatenated batch, and the sums of dweight and dbias over the ranks
 * equal its dweight and dbias. Results match single-process batch norm to
 * rounding (about 1e-6 relative), not bit for bit. Host syncs (two small
 * gathers per call, C floats read and written per tensor). Collective: a
 * rank whose local part fails still takes part, and every rank returns
 * TEENY_ERR_STATE naming it, running statistics unchanged. Temporaries
 * are allocated per call. */
TEENY_API teeny_status teeny_dist_batchnorm_forward_train(teeny_dist *d, teeny_ctx *ctx, const teeny_tensor *x,
    const teeny_tensor *weight, const teeny_tensor *bias, teeny_tensor *running_mean, teeny_tensor *running_var,
    float momentum, float eps, teeny_tensor *y, teeny_tensor *save_mean, teeny_tensor *save_rstd);
TEENY_API teeny_status teeny_dist_batchnorm_backward_train(teeny_dist *d, teeny_ctx *ctx, const teeny_tensor *x,
    const teeny_tensor *dy, const teeny_tensor *weight, const teeny_tensor *save_mean, const teeny_tensor *save_rstd,
    float eps, teeny_tensor *dx, teeny_tensor *dweight, teeny_tensor *dbias);

#ifdef __cplusplus
}
#endif

#endif
