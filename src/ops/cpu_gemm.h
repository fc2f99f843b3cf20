/*
 * cpu_gemm.h -- the CPU tunings' GEMM (conv2d/gemm_run.c) as the other
 * families call it (ops.h includes it).
 */
#ifndef TEENY_OPS_CPU_GEMM_H
#define TEENY_OPS_CPU_GEMM_H

/* ---- conv2d/gemm_run.c: the CPU GEMM, shared with the linear family ----
 * C [M, N] = A [M, K] B [K, N] (+ bias [N]) over strided matrices: A's
 * element (m, k) at a_off + m*a_sm + k*a_sk of a, B's (k, n) at b_off +
 * k*b_sk + n*b_sn of b, C's (m, n) at c_off + m*c_sm + n; bias NULL: none.
 * b_frozen: b is a constant of the recording (teeny__op_args.frozen), so
 * its packing is a setup launch. Runs as conv_gemm_cpu (k in order, no
 * atomics), where the device's tuning has it (CPUs). */
typedef struct {
    int M, N, K;
    cl_mem a, b, bias, c;
    int a_off, a_sm, a_sk, b_off, b_sk, b_sn, bias_off, c_off, c_sm;
    int b_frozen;
} teeny__cpu_gemm_args;
/* *takes: whether the device's tuning has the CPU GEMM and it takes g,
 * its packed B within int32 and an item of its smallest k range within
 * the device's loop budget (probed on first use: the status is the
 * probe's). Then the run, over ranges of k where loops are limited. */
teeny_status teeny__cpu_gemm_takes(teeny_ctx *ctx, const teeny__cpu_gemm_args *g, int *takes);
teeny_status teeny__cpu_gemm(teeny_ctx *ctx, const teeny__cpu_gemm_args *g);

#endif
