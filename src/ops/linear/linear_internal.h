/*
 * linear_internal.h -- private to the linear family (linear.c, the layer;
 * matmul.c, the batched MatMul): lin_gemm's plan (work-group, register
 * tile, k depth and their -D options) and its loop-trip counts, which
 * every launch of cl/linear.cl's tile kernels sizes its k segments by.
 */
#ifndef TEENY_LINEAR_INTERNAL_H
#define TEENY_LINEAR_INTERNAL_H

#include "../ops.h"

typedef struct {
    int lx, ly, rm, rn, tk;
    int tf32; /* the tensor-core tile (cl/linear.cl, -DTEENY_TF32=1) */
    char opt[136];
} gemm_plan;

#define LIN_SEG_FIRST 1 /* as cl/linear.cl */
#define LIN_SEG_LAST 2

/* The plan for ctx (fp32 or tf32, see linear.c), checked against the
 * built lin_gemm's limits before anything is enqueued. */
teeny_status teeny__lin_plan_fit(teeny_ctx *ctx, gemm_plan *g);
/* lin_gemm's loop trips per work-item: outside the k loop, and per k
 * tile of LIN_TK. */
int64_t teeny__lin_tile_fixed(const gemm_plan *pl);
int64_t teeny__lin_tile_trips(const gemm_plan *pl);

#endif
