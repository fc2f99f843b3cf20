/*
 * hooks.h -- the ops' test hooks (ops.h includes it): each forces a path
 * the device and problem would not otherwise take, so the tests reach it
 * on any device; tests/harness.c resets every one after each test.
 */
#ifndef TEENY_OPS_HOOKS_H
#define TEENY_OPS_HOOKS_H

#include <stddef.h>

/* Test hooks, not thread-safe (a profile is forced through teeny__tune_force). conv2d_plan.c: force a GEMM
 * tile of the profile's list (-1: by device and problem), disable the depthwise kernels (1). linear.c: with
 * tf32 asked, run the profile's linear_tf32 tile emulated in portable OpenCL C (1: common.cl), on any device. */
void teeny__conv2d_debug(int tile, int no_depthwise);
void teeny__linear_debug_tf32_emulate(int on);
/* attention_plan.c: the tiled kernels' ATT_LAYOUT forced (0 decided per matrix, 1 rows, 2 columns; -1: by
 * the problem's strides). */
void teeny__attention_debug_layout(int layout);
/* program/build.c: kernels report at most cap work-items (0: off), so every fallback can be forced anywhere. */
void teeny__debug_kernel_wg_cap(size_t cap);

#endif
