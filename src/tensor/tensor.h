/*
 * tensor.h -- the tensor layer's private interface (src/tensor/): the
 * tensor struct, the eager workspace pool and its state on the context
 * (ctx->ws), and the argument checks every op uses.
 */
#ifndef TEENY_TENSOR_H
#define TEENY_TENSOR_H

#include "../core/core.h"

typedef enum { TEENY__F32, TEENY__I32 } teeny__dtype;

struct teeny_tensor {
    teeny_ctx *ctx;
    teeny_tensor *base; /* a view keeps its base alive */
    int refs;           /* 1 for the handle + 1 per view or other holder (teeny__tensor_hold) */
    int handle_alive;
    cl_mem buf;
    size_t offset;      /* in elements, from the start of buf */
    teeny__dtype dtype;
    int ndim;
    int64_t shape[TEENY_MAX_DIMS];
    int64_t numel;
};

#define TEENY__WS_SLOTS 8 /* workspace buffers one op may hold at once */

/* The workspace pool on the context (ctx->ws; device.c frees the buffers
 * with the context). */
typedef struct {
    struct {
        cl_mem buf;
        size_t bytes;
        int busy; /* taken by the op running now */
    } slot[TEENY__WS_SLOTS];
    int op_depth; /* teeny__op_exec nesting (ops.h); the workspace is returned at 0 */
} teeny__workspace;

/* ---- workspace (tensor.c) ----
 * A device buffer of at least bytes that the calling op owns until its
 * last launch is enqueued: every buffer taken during one op is distinct
 * (a later, larger request never frees an earlier one), and all of them
 * go back to the context's pool when teeny__op_run returns (the queue is
 * in order, so the next op's kernels run after this op's). While a graph
 * records, each request is a fresh buffer the plan owns. */
teeny_status teeny__scratch(teeny_ctx *ctx, size_t bytes, cl_mem *out);
/* Return one buffer early, once the launches that use it are enqueued
 * (a helper that an op calls many times; a no-op for recorded buffers). */
void teeny__scratch_give(teeny_ctx *ctx, cl_mem buf);
/* Return every buffer taken since the outermost op began (teeny__op_run). */
void teeny__scratch_release_all(teeny_ctx *ctx);

/* ---- checking helpers (tensor.c) ----
 * They record a message naming the argument and return a status. */
teeny_status teeny__check_tensor(teeny_ctx *ctx, const teeny_tensor *t, const char *name);
/* The same for int32 arguments (labels, argmax). */
teeny_status teeny__check_tensor_i32(teeny_ctx *ctx, const teeny_tensor *t, const char *name);
teeny_status teeny__check_same_numel(teeny_ctx *ctx, const teeny_tensor *a, const char *an,
                                     const teeny_tensor *b, const char *bn);
teeny_status teeny__check_vector(teeny_ctx *ctx, const teeny_tensor *t, const char *name, int64_t len);
/* "[2, 3, 4]" into buf. */
const char *teeny__shape_str(const teeny_tensor *t, char *buf, size_t cap);
/* Whether two tensors share any element of the same buffer. */
int teeny__overlap(const teeny_tensor *a, const teeny_tensor *b);
/* t[0..n_in) are a call's inputs, t[n_in..n) its outputs (in-place state
 * counts as an output; NULL entries are skipped): every output must be
 * disjoint from every other tensor. fn and names go into the message. */
teeny_status teeny__check_disjoint(teeny_ctx *ctx, const char *fn, const teeny_tensor *const *t,
                                   const char *const *names, int n_in, int n);
int teeny__ctx_check(const teeny_ctx *ctx);
/* Keep t's struct and storage alive past teeny_tensor_destroy (which then
 * only clears handle_alive) until the matching drop: how a holder such as
 * the safetensors writer tells a destroyed tensor without reading freed
 * memory. */
void teeny__tensor_hold(teeny_tensor *t);
void teeny__tensor_drop(teeny_tensor *t);

/* int32 element offset of a tensor, for kernels. */
static inline int teeny__off(const teeny_tensor *t) { return (int)t->offset; }

#endif
