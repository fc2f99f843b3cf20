/*
 * conv2d_internal.h -- private to the conv2d family (conv2d_plan.c,
 * conv2d_exec.c): the device profile's tuning and GEMM tile shapes, the problem
 * geometry, one GEMM launch (gemm_job), the depthwise and weight-gradient
 * plans, the kernel-argument shorthands, and the plan layer's functions
 * that the forward and backward passes call. Layouts and paths are
 * described in conv2d.c, the tunables in conv2d_plan.c.
 */
#ifndef TEENY_CONV2D_INTERNAL_H
#define TEENY_CONV2D_INTERNAL_H

#include <stdio.h>
#include <string.h>

#include "../ops.h"

/* ---- tuning: the device profile's (src/tune/profiles.def) ---- */

typedef teeny__gemm_tile gemm_tile;
typedef teeny__conv_tune conv_tuning;

/* The profile's tf32 tuning when the application asked for tf32
 * (teeny_ctx_set_tf32), the probe found the instructions
 * (conv_tf32_probe has run) or a test emulates them, and the profile has
 * tf32 tiles; else its fp32 one (ctx->tune's copies, with
 * TEENY_CONV_TILE / _TF32_TILE). */
static inline const conv_tuning *conv_tuning_of(const teeny_ctx *ctx)
{
    const teeny__tune *t = &ctx->tune;
    int mma = ctx->prog.tf32_mma || ctx->hooks.conv_tf32_emulate;
    return ctx->tf32 && mma && t->conv_tf32.n_tiles > 0 ? &t->conv_tf32 : &t->conv;
}

/* Probe the tf32 instructions once (probe.c) if the application asked
 * for tf32; what conv_tuning_of then reads. */
static inline teeny_status conv_tf32_probe(teeny_ctx *ctx)
{
    int capable;
    return ctx->tf32 ? teeny__tf32_capable(ctx, &capable) : TEENY_OK;
}

/* The depthwise kernels' CPU twins (dwconv_*_cpu) rather than the
 * work-group ones; the dense GEMMs follow the tuning (cpu_rows). */
static inline int conv_cpu_variant(const teeny_ctx *ctx)
{
    return ctx->tune.variant == TEENY_VARIANT_CPU;
}

static inline int gemm_wg(const gemm_tile *t)
{
    return (t->tm / t->wm) * (t->tn / t->wn);
}

static inline int64_t cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* ---- geometry ---- */

typedef struct {
    int B, Cin, H, W, Cout, KH, KW, OH, OW, G, Cig, Cog;
    int sh, sw, ph, pw, dh, dw;
} conv_geom;

/* ---- kernel arguments ---- */

/* The depthwise kernels' geometry as one int16 argument, in the order
 * cl/conv2d.cl's DW_GEOMETRY names it. */
static inline cl_int16 dw_geometry(const conv_geom *g)
{
    cl_int16 v = {{g->B, g->Cin, g->H, g->W, g->Cog, g->OH, g->OW, g->KH, g->KW, g->sh, g->sw, g->ph, g->pw, g->dh,
                   g->dw, g->G}};
    return v;
}

/* The launch layer's argument type (internal.h); KM/KI/KL keep the
 * argument lists below one short entry per kernel parameter. */
typedef teeny__karg karg;

#define KM(m) TEENY__KARG_MEM(m)
#define KI(i) TEENY__KARG_INT(i)
#define KL(bytes) TEENY__KARG_LOCAL(bytes)
#define KG(geo) TEENY__KARG(geo) /* a cl_int16 from dw_geometry */

static inline teeny_status run_kernel(teeny_ctx *ctx, const char *options, const char *name, const karg *a, int n,
                               int dims, const size_t *global, const size_t *local)
{
    return teeny__run_kernel(ctx, "conv2d", options, name, a, n, dims, global, local);
}

/* ---- the implicit GEMM (forward and input gradient) ---- */

/* One conv_gemm_gather launch: see the kernel's comment for each field. */
typedef struct {
    cl_mem src, w, out;
    int src_off, w_off, out_off;
    int M, N, G, P, Q, Kc, Kh, Kw;
    int src_bstride, src_cstride, Hs, Ws, a_h, c_h, e_h, a_w, c_w, e_w;
    int src_gstride; /* conv_gemm_cpu: group g's source at g*src_gstride (conv_gemm_gather: g*Kc*src_cstride) */
    int w_gstride, w_nstride, w_cstride, w_hstride, w_wstride;
    int out_bstride, out_nstride, out_hstride, out_wstride;
    cl_mem bias, scale, shift;
    int bias_off, scale_off, shift_off, epi, act, vec_out;
    int plain; /* conv_gemm_1x1 */
    /* the input gradient's stride phases in one launch (grid index z; cl/conv2d.cl's conv_phase_job): the
     * packed geometry, their count (0 or 1: one GEMM as above, phase.s0 = 0) and the loop trips of the
     * kernel's phase search (conv2d_loops.c); M, Kh and Kw are then phase (0, 0)'s, the most of any phase */
    cl_int16 phase;
    int phases, phase_trips;
} gemm_job;

/* ---- depthwise plans ---- */

typedef struct {
    int TH, TW, tiles_h, tiles_w, PH, PW; /* input gradient (dwconv_dx): tiles and the staged patch */
    int rows, row_blocks;                 /* forward (dwconv_fwd): rows per strip, strips per column */
    int cols;                             /* forward: output columns per item (1, 2 or 4) */
    size_t local_bytes;
} dw_plan;

/* The forward epilogue's operands (conv_epilogue in cl/common.cl). */
typedef struct {
    cl_mem bias, scale, shift;
    int bias_off, scale_off, shift_off, epi, act;
} dw_epilogue;

/* Weight- and bias-gradient split: partials per chunk in the workspace,
 * then a fixed-order sum. */
typedef struct {
    int cpu;         /* conv_gemm_cpu (dw_job_make): no split, but where a device limits loop trips */
    int tile;        /* GEMM path */
    int depthwise;
    int z, r_chunk;  /* dweight chunks over B*OH*OW (dwconv_dw_cpu: over the B*OH rows; conv_gemm_cpu: its k) */
    int cpu_launches; /* conv_gemm_cpu: the chunks as launches in order into dw, not partials */
    int zb, b_chunk; /* dbias chunks over B */
    int64_t dw_elems, db_elems; /* partial floats in the workspace */
} grad_plan;

/* ---- the input gradient's phases and direct kernel (conv2d_dx.c) ---- */

#define TEENY__DX_CI 4   /* conv_dx_direct takes up to this many input channels per group */
#define TEENY__DX_TAPS 4 /* its column taps per pass (cl/conv2d.cl: DX_TAPS) */

/* conv_dx_direct's launch: the profile's columns per item, the phases per
 * axis, per axis the tap step and dy step of a phase, the most kernel rows
 * and column passes of any phase, items of the largest phase, the
 * work-group, the staged weights' bytes, the build options. */
typedef struct {
    int cols, n_h, n_w, step_h, step_w, e_h, e_w, rows_most, passes_most;
    int64_t items;
    size_t wg, local_bytes;
    char opt[320];
} teeny__dx_direct_plan;

int teeny__conv_gcd(int a, int b);
/* Taps of one axis that reach input positions of residue r (mod stride):
 * the first k0, the step between them, how many, and the output offset
 * c = (r + pad - k0*dil) / stride of the first. */
void teeny__conv_phase_taps(int r, int stride, int pad, int dil, int K, int *k0, int *step, int *count, int *c);
/* The most taps any of the first n phases of an axis sees. */
int teeny__conv_taps_most(int n, int stride, int pad, int dil, int K);
/* 1: conv_dx_direct computes g's input gradient on this device, as pl
 * says; 0: the GEMM path does (*st TEENY_OK), or a build or query failed
 * (*st says which). */
int teeny__conv_dx_direct_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, teeny__dx_direct_plan *pl,
                               teeny_status *st);
teeny_status teeny__conv_dx_direct_run(teeny_ctx *ctx, const conv_geom *g, const teeny__dx_direct_plan *pl,
                                       const teeny_tensor *w, const teeny_tensor *dy, teeny_tensor *dx);

/* ---- the plan layer (conv2d_plan.c) ---- */

conv_geom teeny__conv_geom_make(const teeny_tensor *x, const teeny_tensor *w, const teeny__conv2d_attrs *at);
/* A 1x1, stride-1, unpadded convolution (y's pixels are x's). */
int teeny__conv_plain(const conv_geom *g);
int teeny__conv_use_depthwise(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g);
void teeny__conv_dw_plan_fwd(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, dw_plan *pl);
int teeny__conv_dw_grad_cols(const teeny_ctx *ctx, const conv_geom *g);
int teeny__conv_dw_plan_dx(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, dw_plan *pl);
int teeny__conv_dw_fits(teeny_ctx *ctx, const conv_tuning *tu, const char *name, size_t wg, size_t local_bytes,
                        teeny_status *st);
void teeny__conv_tile_options(const teeny_ctx *ctx, const conv_tuning *tu, int tile, char *buf, size_t cap);
/* The input gradient's stride phases in one launch (1: the tiled GPU GEMMs, unless the test hook
 * CONV_FLAGS asks for one each) or one launch each (0: conv_gemm_cpu). */
int teeny__conv_phases_merged(const teeny_ctx *ctx, const conv_tuning *tu);
/* Whether the profile takes conv_dx_direct (dx_cols > 0) and the test hook
 * CONV_FLAGS (bit 4) does not keep it to the GEMM path. */
int teeny__conv_dx_direct_on(const teeny_ctx *ctx, const conv_tuning *tu);
/* The local memory a conv2d kernel may plan for: the device's, less 1 KiB. */
size_t teeny__conv_local_budget(const teeny_ctx *ctx);
/* Test hook: the tile pick_tile takes for an M x N GEMM per group over G groups, z its k chunks (0: one
 * launch's GEMM) (test_conv2d.c). */
int teeny__conv2d_debug_pick(const teeny_ctx *ctx, int64_t M, int64_t N, int64_t G, int64_t z);
teeny_status teeny__conv_gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j);
/* conv_gemm_cpu over k chunks of `chunk` units: z > 1 partials at
 * out + i*zstride in one launch, else launches in order (one where chunk
 * covers k). */
teeny_status teeny__conv_cpu_gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j, const char *opt,
                                      int z, int64_t chunk, int zstride);
void teeny__conv_dw_job_make(const conv_geom *g, gemm_job *j);
teeny_status teeny__conv_grad_plan_make(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int want_dw,
                                        int want_db, grad_plan *gp);

/* ---- the weight and bias gradients' launches (conv2d_grad.c) ---- */

/* The weight gradient as gp plans it: dw [Cout][Cig][KH][KW] at element
 * dw_off of buffer dw, from x and dy at theirs, gp->dw_elems floats of
 * partials in scratch. */
teeny_status teeny__conv_dw_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                cl_mem x, int x_off, cl_mem dy, int dy_off, cl_mem dw, int dw_off, cl_mem scratch);
/* The bias gradient as gp plans it, its partials at scratch + part_off. */
teeny_status teeny__conv_db_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                const teeny_tensor *dy, teeny_tensor *db, cl_mem scratch, int part_off);
/* The depthwise backward in one pass (dwconv_bwd3): dx and dw of a 3x3 depthwise convolution at stride 1,
 * dilation 1, padding 1 and multiplier 1. The plan, before any launch: its partials per channel, z (0: it does
 * not apply, or *st says what failed); the launch then writes dx whole, and dw from z * Cout * 9 floats of
 * partials in scratch where z > 1. */
int teeny__conv_dw_bwd3_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, teeny_status *st);
teeny_status teeny__conv_dw_bwd3(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int z,
                                 const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *dy,
                                 teeny_tensor *dx, teeny_tensor *dw, cl_mem scratch);

/* ---- Winograd F(2x2, 3x3) and F(4x4, 3x3) (conv2d_wino.c) ---- */

enum { TEENY__WINO_FWD, TEENY__WINO_DX, TEENY__WINO_DW }; /* the passes it computes */

/* For g's pass (TEENY__WINO_*): the images per pass, 0 where Winograd
 * does not apply (conv2d_wino.c says when); the weight gradient takes all
 * B in one pass or none. Called once per pass that then takes it (the
 * test hook counts). */
int teeny__conv_wino_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int pass);
/* The passes, `batch` images each (from teeny__conv_wino_plan). */
teeny_status teeny__conv_wino_forward(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int batch,
                                      const teeny_tensor *x, const teeny_tensor *w, teeny_tensor *y,
                                      const dw_epilogue *e);
teeny_status teeny__conv_wino_dx(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int batch,
                                 const teeny_tensor *w, const teeny_tensor *dy, teeny_tensor *dx);
/* The weight gradient's plan, before any launch: *on whether it takes
 * Winograd, and then gp, the split of its 16 GEMMs (a grouped 1x1 weight
 * gradient); then its launches, dw written whole. */
teeny_status teeny__conv_wino_dw_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, grad_plan *gp,
                                      int *on);
teeny_status teeny__conv_wino_dw(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                 const teeny_tensor *x, const teeny_tensor *dy, teeny_tensor *dw);

/* ---- loop budget (conv2d_loops.c) ---- */

teeny_status teeny__conv_dw_cpu_rows(teeny_ctx *ctx, const conv_geom *g, int dx, int64_t *rows_max);
teeny_status teeny__conv_dw_loops_fit(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const dw_plan *pl,
                                      int dx, int *fits);
int64_t teeny__conv_dw_rounds_max(const conv_tuning *tu, const conv_geom *g, int64_t budget);
#define TEENY__DWB_ROWS 4 /* output rows per dwconv_bwd3 item: cl/conv2d.cl's DWB_ROWS */
static inline int conv_dwb_wg(const conv_tuning *tu) /* dwconv_bwd3's work-group (its -DDWB_WG) */
{
    return tu->dwb_wg > 0 ? tu->dwb_wg : tu->dw_wg;
}
/* dwconv_bwd3's loop trips per item (one unit, the tree sum). */
int64_t teeny__conv_dw_bwd3_trips(const conv_tuning *tu);
/* Whether dwconv_dw takes its 3x3 path (column strips of cols columns an
 * item) for chunks of r_chunk positions: cols where the geometry allows
 * it and its loops fit budget, else 0. */
int teeny__conv_dw_rows3_fit(const conv_tuning *tu, const conv_geom *g, int cols, int64_t r_chunk, int64_t budget);
int64_t teeny__conv_dw_cpu_rows_max(const conv_geom *g, int64_t budget);
teeny_status teeny__conv_gemm_tiles(teeny_ctx *ctx, const gemm_tile *t, int plain, int64_t k_tiles,
                                    int64_t extra_trips, int64_t *per);
int64_t teeny__conv_gemm_dw_tiles_max(const gemm_tile *t, int64_t budget);
teeny_status teeny__conv_cpu_gemm_chunk(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j, int64_t *chunk);
teeny_status teeny__conv_loops_check(teeny_ctx *ctx, const conv_tuning *tu, const int *n_pack, int n);
/* Whether one k tile of each GEMM kernel with tile t fits the device's
 * loop budget (always where loops are not limited): the tile search skips
 * the tiles that do not, so a loop-limited device takes a smaller tile. */
int teeny__conv_tile_loops_fit(const teeny_ctx *ctx, const gemm_tile *t);
teeny_status teeny__conv_db_batches_max(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int64_t *per);
teeny_status teeny__conv_reduce_check(teeny_ctx *ctx, int64_t z);

#endif /* TEENY_CONV2D_INTERNAL_H */
