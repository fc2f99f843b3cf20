/*
 * tune.h -- device profiles: what each op family runs on this device.
 *
 * A profile is one row of src/tune/profiles.def: what a device must
 * report to take it (vendor id, type, limits, probed capabilities), the
 * kernel variant every family takes, and each family's typed tuning
 * (tiles, work-groups). tune.c matches the rows in order once, when a
 * context is created (the first row the device satisfies; the last row
 * asks nothing), applies TEENY_TUNING and the TEENY_ATTN_* overrides, and
 * leaves the result in ctx->tune. The op families read ctx->tune and
 * never the device's name, type or the environment themselves.
 *
 * Adding a device class is one row in profiles.def; adding a kernel
 * variant is one enum line below, the rows that take it, and in each
 * family that has such kernels the branch that launches them (a family
 * takes its portable kernels for any variant it does not implement).
 */
#ifndef TEENY_TUNE_H
#define TEENY_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "teenycl.h"

/* The shape of kernel a family runs. */
typedef enum {
    TEENY_VARIANT_PORTABLE, /* OpenCL C 1.2 shaped for GPUs: work-groups sharing local memory, barriers */
    TEENY_VARIANT_CPU,      /* the CPU twins (<kernel>_cpu): one item owns a row block, no local memory */
    TEENY_VARIANT_COUNT
} teeny__variant;

/* What a device reports, as the rows are matched on it (device.c probes
 * it into ctx->caps); a row's `device` says what it needs in the same
 * terms: 0 asks nothing, every other field is a minimum, except vendor_id
 * (equal) and type (a CL_DEVICE_TYPE_* bit in common). */
typedef struct {
    unsigned vendor_id;     /* CL_DEVICE_VENDOR_ID: the PCI vendor (0x10de NVIDIA, 0x1002 AMD, 0x8086 Intel) */
    cl_device_type type;    /* CL_DEVICE_TYPE_GPU, _CPU, _ACCELERATOR */
    unsigned compute_units; /* CL_DEVICE_MAX_COMPUTE_UNITS */
    uint64_t local_mem;     /* CL_DEVICE_LOCAL_MEM_SIZE, bytes */
    size_t work_group;      /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    size_t param_bytes;     /* CL_DEVICE_MAX_PARAMETER_SIZE: a kernel's argument space */
    int float_vector;       /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT (1 when unknown) */
    int cap_fma;            /* CL_FP_FMA in CL_DEVICE_SINGLE_FP_CONFIG: fma() is one instruction */
    int cap_subgroups;      /* cl_khr_subgroups or cl_intel_subgroups */
    int cap_nvidia_ptx;     /* NVIDIA's compiler: inline PTX (asm volatile) */
    /* tf32 tensor cores are no profile trait: they are the application's
     * opt-in (teeny_ctx_set_tf32), taken where a build-and-run probe says
     * the device runs them (src/program/probe.c, teeny__tf32_capable) */
} teeny__device_caps;

/* ---- each family's tuning ---- */

/* conv2d (src/ops/conv2d/gemm.c): GEMM tile shapes, largest first. */
typedef struct {
    int tm, tn, tk;  /* block tile */
    int wm, wn;      /* micro-tile per work-item (multiples of 4) */
    int min_per_cu;  /* forward / input-gradient GEMMs take this tile only
                      * with at least this many work-groups per compute unit */
    int dw_first;    /* 1: the weight gradient's GEMM (conv_gemm_dw) takes this tile before the others
                      * wherever its M and N fill it; no other GEMM takes it (but a test's forced tile) */
} teeny__gemm_tile;

typedef struct {
    int n_tiles;
    teeny__gemm_tile tiles[6]; /* largest (tm x tn) first */
    int dw_wg;                 /* depthwise / reduction work-group (power of two) */
    int dwb_wg;                /* dwconv_bwd3's work-group (power of two; 0: dw_wg) */
    int dw_rows;               /* output rows per item in dwconv_dx, at most in dwconv_fwd */
    int dw_taps;               /* taps per pass in dwconv_dw */
    int dw_mult_max;           /* depthwise kernels up to this channel multiplier */
    int waves;                 /* work-groups per compute unit to aim for */
    int cpu_rows;              /* > 0: GEMMs by conv_gemm_cpu, this many rows per item */
    int cpu_wg;                /* its work-group (items along m) */
    int cpu_nv;                /* its float16 column vectors per item (CPU_NV) */
    int wino;                  /* 2 or 4: 3x3 stride-1 dense convolutions (forward, input gradient) by
                                * Winograd F(2x2, 3x3) or F(4x4, 3x3) where winograd.c's
                                * teeny__conv_wino_plan finds them large enough (fp32 tunings only; tf32
                                * calls take the fp32 tuning's where their GEMM would leave units idle);
                                * 0: not */
    int wino_dw;               /* > 0: the weight gradients of those convolutions by Winograd too, where
                                * both channel counts are at least this (fp32 tunings only, fp32 calls) */
    int tf32;                  /* the GEMMs' tf32 tensor-core micro-kernel (-DTEENY_TF32=1): each tile
                                * also needs tm % (4 wm) == 0, tn % (8 wn) == 0, tk % 8 == 0 */
    int dx_cols;               /* > 0: input gradients with at most 4 input channels per group by
                                * conv_dx_direct (src/ops/conv2d/dx_direct.c), this many dx columns per item */
} teeny__conv_tune;

/* attention (src/ops/attention/attention.c): where the tile search starts. */
typedef struct {
    int threads;    /* threads per work-group (TEENY_ATTN_NT) */
    int rows;       /* query rows per thread (TEENY_ATTN_RM) */
    int cols;       /* key-column tile (TEENY_ATTN_BN) */
    int rows_first; /* 1: shrink thread rows before the column tile to fit (TEENY_ATTN_FIT) */
    int cpu_lanes;  /* rows per work-item of the CPU variants: a float8 or float16 */
} teeny__attention_tune;

/* attention with tf32 tensor cores (src/ops/attention/attention_plan.c: the
 * attn_*_tc kernels, with teeny_ctx_set_tf32 where probe.c found tf32
 * mma): where the tile search starts; warps 0: none. */
typedef struct {
    int warps;      /* the backward passes' warps per work-group, 16 rows each */
    int cols;       /* the backward passes' column tile (a multiple of 8) */
    int fw_warps;   /* the forward pass's warps (0: warps) */
    int fw_cols;    /* the forward pass's column tile, tf32 (0: cols) */
    int x3_fw_cols; /* the forward pass's column tile under fp32_x3 (0: fw_cols) */
    int max_dim;    /* the padded head dims it takes at most (registers grow with them) */
    int fp32_x3; /* 1: fp32 calls (tf32 off) take these kernels too, each operand split in two tf32
                  * parts and three products summed (3xTF32: fp32's accuracy), where the probe passes */
    int prefetch;    /* the passes whose next tile's loads are issued before the current tile's
                      * work (bit 1 forward, 2 backward), tf32 (where the loads can be float4s) */
    int x3_prefetch; /* the same under fp32_x3 */
    int small_dim;      /* padded head dims (q and v) at or below it take small_prefetch instead, */
    int small_prefetch; /* in both arithmetics (0 0: no such bucket) */
    int fast_exp; /* the passes of tf32 calls (not 3xTF32) whose softmax takes the hardware's approximate
                   * exponentials (ex2.approx; -DATT_EXP): 1 the forward, 2 the backward, 3 both */
} teeny__attention_tf32_tune;

/* linear (src/ops/linear/linear.c): the GEMM's register tile and k depth (the
 * work-group comes from ctx->work_group_size). A tf32 tuning (rm > 0)
 * runs cl/linear.cl's tensor-core tile (-DTEENY_TF32=1), which also needs
 * rm % 4 == 0, tk % 8 == 0 and a work-group of at least 32 items. */
typedef struct {
    int rm, rn, tk;
} teeny__linear_tune;

/* One row of profiles.def. */
typedef struct {
    const char *name;          /* what TEENY_TUNING and the tests call it */
    teeny__device_caps device; /* what a device must report to take this row */
    teeny__variant variant;    /* the kernels every family takes */
    int work_group;            /* the default 1-D work-group (capped by the device's maximum) */
    teeny__conv_tune conv;
    teeny__conv_tune conv_tf32; /* conv with teeny_ctx_set_tf32, where probe.c found tf32 mma (n_tiles 0: none) */
    teeny__attention_tune attention;
    teeny__attention_tf32_tune attention_tf32; /* with teeny_ctx_set_tf32 (warps 0: none) */
    teeny__linear_tune linear;
    teeny__linear_tune linear_tf32; /* linear and MatMul with teeny_ctx_set_tf32, where probe.c found tf32
                                     * mma (rm 0: none) */
    int optim_slots;           /* parameters per Adam launch at most (optim.c; fewer where the
                                * kernel-argument space holds fewer) */
    int bn_parts;              /* batch norm's partials per channel at most (batchnorm.c): every
                                * work-group of the consuming kernel merges them in turn */
} teeny__profile;

/* The context's tuning (ctx->tune), fixed at creation except through the
 * test hooks below. */
typedef struct {
    const teeny__profile *profile;   /* the row in use */
    const teeny__profile *matched;   /* the row the device took (or TEENY_TUNING named) */
    teeny__variant variant;          /* the profile's, or a test's */
    int generic;                     /* TEENY_TUNING=generic: also build without compiler hints */
    teeny__attention_tune attention; /* the profile's with the TEENY_ATTN_* overrides */
    teeny__attention_tune attention_env; /* the TEENY_ATTN_* values (-1: not set) */
    teeny__attention_tf32_tune attention_tf32;     /* the profile's with TEENY_ATTN_TF32_* (warps 0: none) */
    teeny__attention_tf32_tune attention_tf32_env; /* the TEENY_ATTN_TF32_* values (-1: not set) */
    teeny__conv_tune conv;           /* the profile's, its tiles replaced by TEENY_CONV_TILE's one */
    teeny__conv_tune conv_tf32;      /* the profile's, its tiles replaced by TEENY_CONV_TF32_TILE's one */
    teeny__gemm_tile conv_env;       /* TEENY_CONV_TILE (tm 0: not set) */
    teeny__gemm_tile conv_tf32_env;  /* TEENY_CONV_TF32_TILE (tm 0: not set) */
    int conv_wino_env;               /* TEENY_CONV_WINO (-1: not set) */
    int conv_wino_dw_env;            /* TEENY_CONV_WINO_DW (-1: not set) */
} teeny__tune;

/* Match ctx->caps against the rows, read TEENY_TUNING and TEENY_ATTN_*
 * (strictly: a malformed or out-of-range value is TEENY_ERR_ARG naming
 * the variable), fill ctx->tune and ctx->work_group_size. Called once by
 * device.c while it creates the context; errors go to the thread's
 * message (teeny_last_error(NULL)). */
teeny_status teeny__tune_init(teeny_ctx *ctx);

/* ---- the rows, and test hooks ---- */
int teeny__tune_count(void);
const teeny__profile *teeny__tune_row(int i); /* NULL outside 0 .. count-1 */
int teeny__tune_find(const char *name);       /* the row's index, -1 if none */
/* Why cl/conv2d.cl's GEMMs cannot take tile t (the loaders' and micro-
 * tile's shape constraints; tf32: also the tensor-core micro-kernel's),
 * NULL if they can. Device limits are the plan's (conv2d/gemm.c). */
const char *teeny__conv_tile_check(const teeny__gemm_tile *t, int tf32);
int teeny__tune_match(const teeny__device_caps *caps); /* the row a device reporting caps takes */
/* Run ctx as if it had taken row i (-1: its own again): its families'
 * tunings, variant and work-group. TEENY_ERR_UNSUPPORTED when the device
 * lacks the row's limits (work-group, local memory) or capabilities
 * (subgroups, inline PTX); vendor, type, compute units, vector
 * width and fma only make a row faster, so a test may force it anywhere. */
teeny_status teeny__tune_force(teeny_ctx *ctx, int i);
/* Make every family take variant v (-1: the profile's again). */
void teeny__tune_force_variant(teeny_ctx *ctx, int v);

#endif /* TEENY_TUNE_H */
