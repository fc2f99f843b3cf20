/*
 * hooks.h -- the ops' test hooks (ops.h includes it): each forces a path
 * the device and problem would not otherwise take, so the tests reach it
 * on any device; tests/harness.c resets every one after each test.
 */
#ifndef TEENY_OPS_HOOKS_H
#define TEENY_OPS_HOOKS_H

#include <stddef.h>
#include <stdint.h>

/* Test hooks, not thread-safe (a profile is forced through teeny__tune_force). conv2d_plan.c: force a GEMM tile
 * of the profile's list (-1: by device and problem); flags 1: no depthwise kernels, 2: dx one launch per stride
 * phase, 4: dx by the GEMM path, not conv_dx_direct, 8: dwconv_fwd one output column per item, 16: dwconv_dw's
 * 3x3 path one position column per item. linear.c: with tf32 asked, run the linear_tf32 tile emulated in OpenCL C (1: common.cl), on any device. */
void teeny__conv2d_debug(int tile, int flags);
/* conv2d_grad.c: the depthwise backward in one pass (dwconv_bwd3) by its plan (0) or never (-1). */
void teeny__conv2d_debug_dw_bwd(int mode);
/* conv2d_wino.c: Winograd F(2x2, 3x3) forced (1: wherever the geometry allows it -- 3x3, stride 1, dilation 1,
 * groups 1, pads <= 2, not the tf32 tuning -- whatever the profile and size; -1: never; 0: by profile and size),
 * which also resets the count and the cap below. The count of passes (forward, input gradient) that took it since;
 * the workspace's cap in bytes (0: 256 MiB), so that a test reaches the passes over part of the batch and the
 * fallback where one image does not fit. */
void teeny__conv2d_debug_wino(int mode);
/* conv2d_plan.c: with tf32 asked, run the tf32 tiles emulated in OpenCL C (1: cl/common.cl's tf32_round and
 * tf32_mma_xchg), on any device whose profile has them (teeny__tune_force). */
void teeny__conv2d_debug_tf32_emulate(int on);
int teeny__conv2d_debug_wino_count(void);
void teeny__conv2d_debug_wino_cap(int64_t bytes);
void teeny__linear_debug_tf32_emulate(int on);
/* linear.c: the layer's fp32 GEMMs by lin_gemm_small (1: every one; -1: none, lin_gemm; 0: by the plan,
 * small_route). teeny__linear_route: what the plan (this hook included) picks for C [M, N] of depth K on ctx,
 * *small 1 for lin_gemm_small. */
void teeny__linear_debug_small(int mode);
teeny_status teeny__linear_route(teeny_ctx *ctx, int M, int N, int K, int *small);
/* attention_plan.c: the tiled kernels' ATT_LAYOUT forced (0 decided per matrix, 1 rows, 2 columns; -1: by
 * the problem's strides). */
void teeny__attention_debug_layout(int layout);
/* attention_plan.c: with tf32 asked, the tf32 kernels emulated in OpenCL C (1: cl/common.cl's tf32_round and
 * tf32_mma_xchg, attention.cl's quad shuffles through local memory), on any device whose profile has them. */
void teeny__attention_debug_tf32_emulate(int on);
/* batchnorm.c: two launches each way even where one would do (1). TEENY__BN_REG: the one-launch kernels'
 * units (floats, float4s where H*W % 4 == 0) per item: a channel of up to BN_WG * 8 (cl/batchnorm.cl: BN_REG). */
void teeny__batchnorm_debug_two_launch(int on);
#define TEENY__BN_REG 8
#define TEENY__BN_REG_SCALAR 32 /* the same for planes of single floats (H*W % 4 != 0), built with -DBN_REG=32 */
/* program/build.c: kernels report at most cap work-items (0: off), so every fallback can be forced anywhere. */
void teeny__debug_kernel_wg_cap(size_t cap);

#endif
