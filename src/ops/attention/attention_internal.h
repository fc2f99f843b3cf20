/*
 * attention_internal.h -- what attention.c (launches) and
 * attention_plan.c (tiles and build options) share.
 */
#ifndef TEENY_ATTENTION_INTERNAL_H
#define TEENY_ATTENTION_INTERNAL_H

#include "../ops.h"

#define ATT_EXT_CAUSAL 1 /* ATT_EXT bits (cl/attention.cl) */
#define ATT_EXT_MASK 2
#define ATT_EXT_SOFTCAP 4

/* A pass's tile. The fp32 kernels: thread grid TR x TC, RM rows and SC
 * columns per thread. The tf32 kernels (att_plan.tc): tr warps of rm = 16
 * rows, tc = 32 lanes, column tiles of 8 sc. Either way a work-group has
 * tr * tc work-items and owns tr * rm rows. */
typedef struct {
    int tr, rm, tc, sc;
} att_tile;

typedef struct {
    int cr;              /* rows per work-item of the CPU variants: the lanes of a float8 or float16 */
    int ext;             /* ATT_EXT: ATT_EXT_* bits, 0 without masks */
    int dq, dv;          /* padded head dims */
    int tc;              /* 1: the tf32 tensor-core kernels (attn_*_tc, -DTEENY_TF32=1) */
    int x3;              /* with tc, an fp32 call: every operand split in two tf32 parts (-DTEENY_TF32_X3=1) */
    int pf;              /* with tc, the passes that prefetch their next tile: bit 1 forward, 2 backward (-DATT_PF) */
    int fast_exp;        /* with tc, not x3: the passes taking ex2.approx exponentials (-DATT_EXP, tune.h) */
    int emulate;         /* with tc, the test hook ATTENTION_TF32_EMULATE: the mma in OpenCL C (-DTEENY_TF32_EMULATE) */
    int vec;             /* ATT_VEC: every loaded matrix in float4 chunks, 1 along rows, 2 down columns */
    int layout;          /* ATT_LAYOUT: how the tiled kernels walk every matrix (1 rows, 2 columns), 0: per
                          * matrix at run time */
    att_tile fw, kv, qg; /* attn_fwd, attn_bwd_dkdv, attn_bwd_dq (or their _tc twins) */
    char options[320];
} att_plan;

/* The plan of problem p's forward (backward 0) or backward pass, its tiles
 * checked against the built kernels, before anything is enqueued. cpu: the
 * call takes the CPU variants (never the tf32 kernels). The tf32 kernels
 * where teeny_ctx_set_tf32 asked, the device runs them
 * (teeny__tf32_capable), the profile has tiles for them and the padded
 * head dims are at most its max_dim; else the fp32 kernels. */
teeny_status teeny__attn_plan(teeny_ctx *ctx, const teeny__attn_problem *p, int backward, int cpu, att_plan *pl);

/* The kernel of pass 0 (forward), 1 (dK/dV) or 2 (dQ) in pl's program. */
const char *teeny__attn_kernel(const att_plan *pl, int pass);

#endif
