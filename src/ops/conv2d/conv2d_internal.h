/*
 * conv2d_internal.h -- private to the conv2d family (src/ops/conv2d/):
 * the types its files share and the functions one file calls in another,
 * grouped by the file that defines them; types and declarations only.
 * Which route a pass takes: route.c's banner; the layouts: conv2d.c's.
 * The files, each above the ones it calls: route.c; weight_grad.c and
 * winograd.c; depthwise.c and dx_direct.c; gemm.c.
 */
#ifndef TEENY_CONV2D_INTERNAL_H
#define TEENY_CONV2D_INTERNAL_H

#include "../ops.h"

/* ---- tuning: the device profile's (src/tune/profiles.def) ---- */

typedef teeny__gemm_tile gemm_tile;
typedef teeny__conv_tune conv_tuning;

/* ---- geometry ---- */

typedef struct {
    int B, Cin, H, W, Cout, KH, KW, OH, OW, G, Cig, Cog;
    int sh, sw, ph, pw, dh, dw;
} conv_geom;

/* ---- kernel arguments ---- */

/* The launch layer's argument type (internal.h); KM/KI/KL keep the
 * argument lists one short entry per kernel parameter. */
typedef teeny__karg karg;

#define KM(m) TEENY__KARG_MEM(m)
#define KI(i) TEENY__KARG_INT(i)
#define KL(bytes) TEENY__KARG_LOCAL(bytes)
#define KG(geo) TEENY__KARG(geo) /* a cl_int16 (the depthwise geometry, the phases) */

/* ---- the implicit GEMM (forward, input gradient, Winograd's products) ---- */

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
    int w_frozen; /* w a constant of the recording: conv_gemm_cpu packs it in a setup launch */
    /* the input gradient's stride phases in one launch (grid index z; cl/conv2d.cl's conv_phase_job): the
     * packed geometry, their count (0 or 1: one GEMM as above, phase.s0 = 0) and the loop trips of the
     * kernel's phase search (dx_direct.c); M, Kh and Kw are then phase (0, 0)'s, the most of any phase */
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

#define TEENY__DWB_ROWS 4 /* output rows per dwconv_bwd3 item: cl/conv2d_dwb.cl's DWB_ROWS */

/* ---- the weight and bias gradients' plan (weight_grad.c) ---- */

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

/* ---- the input gradient's direct kernel (dx_direct.c) ---- */

#define TEENY__DX_CI 4   /* conv_dx_direct takes up to this many input channels per group */
#define TEENY__DX_TAPS 4 /* its column taps per pass (cl/conv2d_dx.cl: DX_TAPS) */

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

/* ---- Winograd (winograd.c) ---- */

enum { TEENY__WINO_FWD, TEENY__WINO_DX, TEENY__WINO_DW }; /* the passes it computes */

/* ---- a pass and its routes (route.c) ---- */

/* One forward or input-gradient pass as route.c hands it to a route. */
typedef struct {
    conv_geom g;
    const conv_tuning *tu;          /* conv_tuning_of: the profile's fp32 or tf32 tuning */
    const teeny_tensor *x, *w, *dy; /* forward: x and w; input gradient: w and dy */
    teeny_tensor *out;              /* y, or dx */
    dw_epilogue e;                  /* the forward's epilogue (cl/common.cl's conv_epilogue) */
    int w_frozen;                   /* w is a constant of the recording (teeny__op_args.frozen) */
} conv_pass;

/* A route's take on a pass: it runs the pass (*taken 1), or leaves it to
 * the next route (*taken 0, TEENY_OK); any other status ends the pass. */
typedef teeny_status (*conv_route_fn)(teeny_ctx *ctx, const conv_pass *p, int *taken);

conv_geom teeny__conv_geom_make(const teeny_tensor *x, const teeny_tensor *w, const teeny__conv2d_attrs *at);
/* Test hook: the tile the GEMM plan takes for an M x N GEMM per group over G groups, z its k chunks (0: one
 * launch's GEMM), under ctx's tuning (test_conv2d.c). */
int teeny__conv2d_debug_pick(const teeny_ctx *ctx, int64_t M, int64_t N, int64_t G, int64_t z);

/* ---- the routes' entries: conv_route_fn ---- */

teeny_status teeny__conv_dw_forward(teeny_ctx *ctx, const conv_pass *p, int *taken);   /* depthwise.c */
teeny_status teeny__conv_wino_forward(teeny_ctx *ctx, const conv_pass *p, int *taken); /* winograd.c */
teeny_status teeny__conv_gemm_forward(teeny_ctx *ctx, const conv_pass *p, int *taken); /* gemm.c: takes any */
teeny_status teeny__conv_dw_dx(teeny_ctx *ctx, const conv_pass *p, int *taken);        /* depthwise.c */
teeny_status teeny__conv_dx_direct(teeny_ctx *ctx, const conv_pass *p, int *taken);    /* dx_direct.c */
teeny_status teeny__conv_wino_dx(teeny_ctx *ctx, const conv_pass *p, int *taken);      /* winograd.c */
teeny_status teeny__conv_gemm_dx(teeny_ctx *ctx, const conv_pass *p, int *taken);      /* dx_direct.c: takes any */

/* ---- weight_grad.c ---- */

void teeny__conv_dw_job_make(const conv_geom *g, gemm_job *j);
teeny_status teeny__conv_grad_plan_make(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int want_dw,
                                        int want_db, grad_plan *gp);
teeny_status teeny__conv_db_batches_max(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int64_t *per);
/* The weight gradient as gp plans it: dw [Cout][Cig][KH][KW] at element
 * dw_off of buffer dw, from x and dy at theirs, gp->dw_elems floats of
 * partials in scratch. */
teeny_status teeny__conv_dw_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                cl_mem x, int x_off, cl_mem dy, int dy_off, cl_mem dw, int dw_off, cl_mem scratch);
/* The bias gradient as gp plans it, its partials at scratch + part_off. */
teeny_status teeny__conv_db_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                const teeny_tensor *dy, teeny_tensor *db, cl_mem scratch, int part_off);

/* ---- winograd.c ---- */

/* For g's pass (TEENY__WINO_*): the images per pass, 0 where Winograd
 * does not apply (winograd.c says when); the weight gradient takes all
 * B in one pass or none. Called once per pass that then takes it (the
 * test hook CONV_WINO_TAKEN counts). */
int teeny__conv_wino_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int pass);
/* The weight gradient's plan, before any launch: *on whether it takes
 * Winograd, and then gp, the split of its 16 GEMMs (a grouped 1x1 weight
 * gradient); then its launches, dw written whole. */
teeny_status teeny__conv_wino_dw_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, grad_plan *gp,
                                      int *on);
teeny_status teeny__conv_wino_dw(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                 const teeny_tensor *x, const teeny_tensor *dy, teeny_tensor *dw);

/* ---- depthwise.c ---- */

int teeny__conv_cpu_variant(const teeny_ctx *ctx);
int teeny__conv_use_depthwise(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g);
void teeny__conv_dw_plan_fwd(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, dw_plan *pl);
int teeny__conv_dw_grad_cols(const teeny_ctx *ctx, const conv_geom *g);
int teeny__conv_dw_plan_dx(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, dw_plan *pl);
int teeny__conv_dw_fits(teeny_ctx *ctx, const conv_tuning *tu, const char *name, size_t wg, size_t local_bytes,
                        teeny_status *st);
/* teeny_group_sum_rows over wg items and `rows` rows: its loop trips. */
int64_t teeny__conv_tree_trips(int64_t wg, int64_t rows);
teeny_status teeny__conv_dw_cpu_rows(teeny_ctx *ctx, const conv_geom *g, int dx, int64_t *rows_max);
teeny_status teeny__conv_dw_loops_fit(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const dw_plan *pl,
                                      int dx, int *fits);
int64_t teeny__conv_dw_rounds_max(const conv_tuning *tu, const conv_geom *g, int64_t budget);
/* dwconv_bwd3's loop trips per item (one unit, the tree sum). */
int64_t teeny__conv_dw_bwd3_trips(const conv_tuning *tu);
/* Whether dwconv_dw takes its 3x3 path (column strips of cols columns an
 * item) for chunks of r_chunk positions: cols where the geometry allows
 * it and its loops fit budget, else 0. */
int teeny__conv_dw_rows3_fit(const conv_tuning *tu, const conv_geom *g, int cols, int64_t r_chunk, int64_t budget);
int64_t teeny__conv_dw_cpu_rows_max(const conv_geom *g, int64_t budget);
teeny_status teeny__conv_dw_wgrad_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                      const char *opt, cl_mem x, int x_off, cl_mem dy, int dy_off, cl_mem out,
                                      int out_off, int zstride);
/* The depthwise backward in one pass (dwconv_bwd3): dx and dw of a 3x3 depthwise convolution at stride 1,
 * dilation 1, padding 1 and multiplier 1. The plan, before any launch: its partials per channel, z (0: it does
 * not apply, or *st says what failed); the launch then writes dx whole, and dw from z * Cout * 9 floats of
 * partials in scratch where z > 1. */
int teeny__conv_dw_bwd3_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, teeny_status *st);
teeny_status teeny__conv_dw_bwd3(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int z,
                                 const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *dy,
                                 teeny_tensor *dx, teeny_tensor *dw, cl_mem scratch);

/* ---- dx_direct.c ---- */

int teeny__conv_gcd(int a, int b);
/* Taps of one axis that reach input positions of residue r (mod stride):
 * the first k0, the step between them, how many, and the output offset
 * c = (r + pad - k0*dil) / stride of the first. */
void teeny__conv_phase_taps(int r, int stride, int pad, int dil, int K, int *k0, int *step, int *count, int *c);
/* The most taps any of the first n phases of an axis sees. */
int teeny__conv_taps_most(int n, int stride, int pad, int dil, int K);
/* Whether the profile takes conv_dx_direct (dx_cols > 0) and the test hook
 * CONV_FLAGS (bit 4) does not keep it to the GEMM path. */
int teeny__conv_dx_direct_on(const teeny_ctx *ctx, const conv_tuning *tu);
/* 1: conv_dx_direct computes g's input gradient on this device, as pl
 * says; 0: the GEMM path does (*st TEENY_OK), or a build or query failed
 * (*st says which). */
int teeny__conv_dx_direct_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, teeny__dx_direct_plan *pl,
                               teeny_status *st);
teeny_status teeny__conv_dx_direct_run(teeny_ctx *ctx, const conv_geom *g, const teeny__dx_direct_plan *pl,
                                       const teeny_tensor *w, const teeny_tensor *dy, teeny_tensor *dx);
/* The input gradient's stride phases in one launch (1: the tiled GPU GEMMs, unless the test hook
 * CONV_FLAGS asks for one each) or one launch each (0: conv_gemm_cpu). */
int teeny__conv_phases_merged(const teeny_ctx *ctx, const conv_tuning *tu);

/* ---- gemm.c ---- */

/* ceil(a / b) for b > 0. */
int64_t teeny__conv_cdiv(int64_t a, int64_t b);
/* dwconv_bwd3's work-group (its -DDWB_WG). */
int teeny__conv_dwb_wg(const conv_tuning *tu);
/* The conv2d program's build options with GEMM tile `tile` of tu. */
void teeny__conv_tile_options(const teeny_ctx *ctx, const conv_tuning *tu, int tile, char *buf, size_t cap);
/* The local memory a conv2d kernel may plan for: the device's, less 1 KiB. */
size_t teeny__conv_local_budget(const teeny_ctx *ctx);
/* The work-groups that fill the device: its compute units times the profile's waves. */
int64_t teeny__conv_target_groups(const teeny_ctx *ctx, const conv_tuning *tu);
int teeny__conv_pick_tile(const teeny_ctx *ctx, const conv_tuning *tu, int64_t M, int64_t N, int64_t G, int64_t z);
teeny_status teeny__conv_fit_tile(teeny_ctx *ctx, const conv_tuning *tu, const char *name, int phases, int *tile);
/* A 1x1, stride-1, unpadded convolution (y's pixels are x's). */
int teeny__conv_plain(const conv_geom *g);
/* The epilogue's code for Clip to [0, 6] (ReLU6), past teeny_act's values:
 * cl/common.cl's CONV_ACT_RELU6 (route.c's epilogue_act chooses). */
#define TEENY__CONV_ACT_RELU6 64
#define CONV_SEG_FIRST 1 /* a k range's first launch (as cl/conv2d.cl) */
#define CONV_SEG_LAST 2  /* its last: the epilogue */
/* gemm.c: a forward or input-gradient GEMM by the tiles (GPU tunings). */
teeny_status teeny__conv_tile_gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j);
/* gemm_run.c: whether job j runs on the CPU GEMMs (the CPU tunings, B
 * packable within int32); one forward or input-gradient GEMM, by them or
 * the tiles. */
int teeny__conv_use_cpu_gemm(const conv_tuning *tu, const gemm_job *j);
teeny_status teeny__conv_gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j);
/* conv_gemm_cpu over k chunks of `chunk` units: z > 1 partials at
 * out + i*zstride in one launch, else launches in order (one where chunk
 * covers k). */
teeny_status teeny__conv_cpu_gemm_run(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j, const char *opt,
                                      int z, int64_t chunk, int zstride);
/* gemm.c: one k tile of each tiled GEMM kernel within the loop budget
 * (gemm_run.c's teeny__conv_loops_check, below, adds the CPU GEMM). */
teeny_status teeny__conv_tile_loops_check(teeny_ctx *ctx, const conv_tuning *tu);
teeny_status teeny__conv_gemm_dw_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                     const char *opt, cl_mem x, int x_off, cl_mem dy, int dy_off, cl_mem out,
                                     int out_off, int zstride);
teeny_status teeny__conv_reduce_parts(teeny_ctx *ctx, const conv_tuning *tu, const char *opt, cl_mem part,
                                      int part_off, int n, int z, cl_mem out, int out_off);
teeny_status teeny__conv_gemm_tiles(teeny_ctx *ctx, const gemm_tile *t, int plain, int64_t k_tiles,
                                    int64_t extra_trips, int64_t *per);
int64_t teeny__conv_gemm_dw_tiles_max(const gemm_tile *t, int64_t budget);
teeny_status teeny__conv_cpu_gemm_chunk(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j, int64_t *chunk);
teeny_status teeny__conv_loops_check(teeny_ctx *ctx, const conv_tuning *tu, const int *n_pack, int n);
/* Whether one k tile of each GEMM kernel with tile t fits the device's
 * loop budget (always where loops are not limited): the tile search skips
 * the tiles that do not, so a loop-limited device takes a smaller tile. */
int teeny__conv_tile_loops_fit(const teeny_ctx *ctx, const gemm_tile *t);
teeny_status teeny__conv_reduce_check(teeny_ctx *ctx, int64_t z);

/* ---- conv2d.c's checks, which conv_transpose.c shares ---- */

/* An output [B, C, OH, OW] of dims within int32 indexing (the kernels'),
 * copied to ys (may be NULL). */
teeny_status teeny__conv_out_dims(teeny_ctx *ctx, const int64_t dims[4], int64_t *ys);
/* The *_output_shape functions' pointers (p their params): fn's
 * TEENY_ERR_ARG naming the first NULL. */
teeny_status teeny__conv_shape_args(const char *fn, const void *p, const int64_t *x_shape, const int64_t *w_shape,
                                    const int64_t *y_shape);
/* The eager calls' first checks: params p given, the tensors of args
 * usable, the weight w of rank 4 (w_layout for the message). */
teeny_status teeny__conv_eager_args(teeny_ctx *ctx, const teeny__eager *e, const void *p, const teeny_tensor *w,
                                    const char *w_layout, const teeny__earg *args, int n);

#endif /* TEENY_CONV2D_INTERNAL_H */
