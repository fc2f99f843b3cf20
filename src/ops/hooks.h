/*
 * hooks.h -- what the ops show the tests beyond the op table (ops.h
 * includes it). The test hooks themselves, the switches that force a
 * path, are on the context: core/test_hooks.def lists them, and the tests
 * set them through teeny__test_hook_set.
 */
#ifndef TEENY_OPS_HOOKS_H
#define TEENY_OPS_HOOKS_H

#include <stddef.h>
#include <stdint.h>

/* linear/linear.c: what the plan (the test hook LINEAR_SMALL included) picks for C [M, N] of depth K on ctx,
 * *small 1 for lin_gemm_small. */
teeny_status teeny__linear_route(teeny_ctx *ctx, int M, int N, int K, int *small);
/* norm/batchnorm.c: the one-launch kernels' units (floats, float4s where H*W % 4 == 0) per item: a channel of up
 * to BN_WG * 8 (cl/batchnorm.cl: BN_REG). */
#define TEENY__BN_REG 8
#define TEENY__BN_REG_SCALAR 32 /* the same for planes of single floats (H*W % 4 != 0), built with -DBN_REG=32 */

#endif
