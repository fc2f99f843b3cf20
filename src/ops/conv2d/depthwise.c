/*
 * depthwise.c -- the depthwise route: the kernels of convolutions whose
 * groups have one input channel and at most dw_mult_max output channels
 * (depthwise, small channel multipliers), unless a kernel does not fit
 * the device (dwconv_dx's patch in local memory at a huge dilation, a
 * loop budget): then the GEMM takes the pass (e.g. a 1-channel input to
 * 32 channels). Their plans, fit checks, launches and loop trips:
 *   - the forward, dwconv_fwd (its 3x3 path 2 or 4 output columns an
 *     item), or on the CPU variant dwconv_fwd_cpu_band (through a
 *     padded private band, strides 1 and 2) or dwconv_fwd_cpu;
 *   - the input gradient: at stride 1 with multiplier 1 the forward
 *     kernel over dy with the taps reversed (dwconv_fwd's flip) and
 *     padding (K-1)*d - p; else dwconv_dx (or dwconv_dx_cpu), which takes
 *     strides and multipliers > 1;
 *   - the weight gradient's launches (dwconv_dw, dwconv_dw_cpu) as
 *     weight_grad.c plans them;
 *   - dwconv_bwd3, the input and weight gradients of a 3x3 depthwise
 *     convolution at stride 1, dilation 1, padding 1 and multiplier 1
 *     (MobileNet's and EfficientNet's) in one pass, x and dy each read
 *     once, where route.c's backward asks for both.
 * Loop trips: the CPU variants take fewer rows per item where a device
 * limits a work-item's trips (gemm.c says how they are counted), and a
 * kernel whose item cannot fit (a row too long, a huge kernel) leaves the
 * pass to the GEMM.
 */
#include <string.h>

#include "conv2d_internal.h"

/* DW_CPU_COLS of cl/conv2d_dw_cpu.cl: columns a depthwise CPU item holds at once. */
#define DW_CPU_COLS 64

/* The depthwise kernels' CPU twins (dwconv_*_cpu) rather than the
 * work-group ones; the dense GEMMs follow the tuning (cpu_rows). */
int teeny__conv_cpu_variant(const teeny_ctx *ctx)
{
    return ctx->tune.variant == TEENY_VARIANT_CPU;
}

int teeny__conv_use_depthwise(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g)
{
    return g->Cig == 1 && g->Cog <= tu->dw_mult_max && !(ctx->hooks.conv_flags & 1);
}

/* The depthwise kernels' geometry as one int16 argument, in the order
 * cl/conv2d_dw.cl's DW_GEOMETRY names it. */
static cl_int16 dw_geometry(const conv_geom *g)
{
    cl_int16 v = {{g->B, g->Cin, g->H, g->W, g->Cog, g->OH, g->OW, g->KH, g->KW, g->sh, g->sw, g->ph, g->pw, g->dh,
                   g->dw, g->G}};
    return v;
}

/* ---- plans ---- */

/* Tile an R x C output plane for a work-group of wg items: TW columns
 * (whole rows up to 128 wide), TH rows about `rows` per item. */
static void dw_tile(int R, int C, int wg, int rows, dw_plan *pl)
{
    int cap = wg < 128 ? wg : 128;
    pl->tiles_w = (int)teeny__conv_cdiv(C, cap);
    pl->TW = (int)teeny__conv_cdiv(C, pl->tiles_w);
    int rstep = wg / pl->TW;
    int th = rstep * rows < R ? rstep * rows : R;
    pl->tiles_h = (int)teeny__conv_cdiv(R, th);
    pl->TH = (int)teeny__conv_cdiv(R, pl->tiles_h);
}

/* Forward plan: each column of an output plane in row_blocks strips of `rows` rows, at most DW_ROWS and as
 * even as they go (56 rows: 7 strips of 8; 28: 4 of 7), so that no strip is mostly empty; on dwconv_fwd's 3x3
 * path (dw_fwd_rows3: row stride 1 or 2, row dilation 1, column stride and dilation 1) 4 columns per item at
 * row stride 1 where the input rows are whole float4s (W % 4 == 0) and OW >= 8 (per input row 3 loads for 4
 * outputs with the middle four as a float4; H200, x [32, 256, 56, 56]: 0.105 -> 0.094 ms), else 2 (4 loads
 * for 2): on 14- and 7-wide planes 4 scalar columns halved the items and took the example's two depthwise
 * forwards from 0.023 to 0.041 ms (2026-12-02); hook flag 8: one column (the same bits). */
void teeny__conv_dw_plan_fwd(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, dw_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->row_blocks = (int)teeny__conv_cdiv(g->OH, tu->dw_rows);
    pl->rows = (int)teeny__conv_cdiv(g->OH, pl->row_blocks);
    int rows3 = g->KH == 3 && g->KW == 3 && g->dh == 1 && (g->sh == 1 || g->sh == 2) && g->sw == 1 && g->dw == 1;
    pl->cols = !rows3 || (ctx->hooks.conv_flags & 8) ? 1 : g->sh == 1 && g->W % 4 == 0 && g->OW >= 8 ? 4 : 2;
}

/* Columns per item of dwconv_dw's 3x3 path (dw_dw_rows3): 4 where output rows are at least 8 wide (per
 * row of 4 positions one dy load, a float4 where dy's rows allow it, and one input row of 6 values, the
 * middle four as a float4 where x's do, for 36 products: 16 scalar loads for the same products one column
 * an item), else 1; hook flag 16: 1. */
int teeny__conv_dw_grad_cols(const teeny_ctx *ctx, const conv_geom *g)
{
    return g->OW >= 8 && !(ctx->hooks.conv_flags & 16) ? 4 : 1;
}

/* Input-gradient plan over the H x W plane of dx. */
int teeny__conv_dw_plan_dx(const teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, dw_plan *pl)
{
    int rows = tu->dw_rows < 4 ? tu->dw_rows : 4;
    dw_tile(g->H, g->W, tu->dw_wg, rows, pl);
    while (pl->TH > 1 && (int64_t)pl->tiles_h * pl->tiles_w * g->Cin * g->B < teeny__conv_target_groups(ctx, tu)) {
        pl->TH = (pl->TH + 1) / 2;
        pl->tiles_h = (int)teeny__conv_cdiv(g->H, pl->TH);
    }
    for (;;) {
        int64_t ph = ((int64_t)pl->TH - 1 + (int64_t)(g->KH - 1) * g->dh) / g->sh + 2;
        int64_t pw = ((int64_t)pl->TW - 1 + (int64_t)(g->KW - 1) * g->dw) / g->sw + 2;
        /* every output channel's dy patch and taps at once (cl/conv2d_dw.cl) */
        int64_t bytes = (ph * pw + (int64_t)g->KH * g->KW) * g->Cog * (int64_t)sizeof(float);
        if (ph * pw * g->Cog <= INT32_MAX && bytes <= (int64_t)teeny__conv_local_budget(ctx)) {
            pl->PH = (int)ph;
            pl->PW = (int)pw;
            pl->local_bytes = (size_t)bytes;
            return 1;
        }
        if (pl->TH == 1)
            return 0;
        pl->TH = (pl->TH + 1) / 2;
        pl->tiles_h = (int)teeny__conv_cdiv(g->H, pl->TH);
    }
}

/* Whether a depthwise kernel fits as planned, work-groups of wg: 1 fits; 0 does not (the caller takes the GEMM
 * path), with *st TEENY_OK, or the build or query failed, with *st that status. */
int teeny__conv_dw_fits(teeny_ctx *ctx, const conv_tuning *tu, const char *name, size_t wg, size_t local_bytes,
                        teeny_status *st)
{
    char opt[256];
    teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
    *st = teeny__kernel_fit(ctx, "conv2d", opt, name, wg, local_bytes, NULL);
    if (*st == TEENY_ERR_UNSUPPORTED) {
        teeny__clear_error(ctx);
        *st = TEENY_OK;
        return 0;
    }
    return *st == TEENY_OK;
}

/* ---- loop trips ---- */

static int log2_floor(int64_t v)
{
    int l = 0;
    while ((int64_t)1 << (l + 1) <= v)
        l++;
    return l;
}

/* teeny_group_sum_rows over wg items and `rows` rows: log2(wg) levels of
 * the level loop and the rows loop, + 1. */
int64_t teeny__conv_tree_trips(int64_t wg, int64_t rows)
{
    return (int64_t)log2_floor(wg) * (1 + rows + 1) + 1;
}

/* dwconv_fwd_cpu / dwconv_dx_cpu, one output (fwd) or input (dx) row: its
 * loop trip and its chunks of DW_CPU_COLS columns (chunks + 1), each with a
 * clear and a store (n + 1 each), the taps (KH + 1, KW + 1 per kh) and per
 * tap the columns it reaches (n + 1 at most); dx loops over the mult
 * output channels of its input channel around the taps. */
static int64_t dw_cpu_row_trips(const conv_geom *g, int dx)
{
    int64_t width = dx ? g->W : g->OW, n = width < DW_CPU_COLS ? width : DW_CPU_COLS;
    int64_t chunks = teeny__conv_cdiv(width, DW_CPU_COLS);
    int64_t taps = (g->KH + 1) + (int64_t)g->KH * ((g->KW + 1) + (int64_t)g->KW * (n + 1));
    int64_t chunk = 2 * (n + 1) + (dx ? (g->Cog + 1) + (int64_t)g->Cog * taps : taps);
    return 1 + (chunks + 1) + chunks * chunk;
}

teeny_status teeny__conv_dw_cpu_rows(teeny_ctx *ctx, const conv_geom *g, int dx, int64_t *rows_max)
{
    int64_t budget, row = dw_cpu_row_trips(g, dx);
    teeny_status st = teeny__loop_budget(ctx, &budget);
    /* rows_per rows and the row loop's exit */
    *rows_max = budget == INT64_MAX ? INT64_MAX : row + 1 > budget ? 0 : (budget - 1) / row;
    return st;
}

/* dwconv_fwd: the clear (4 * DW_ROWS + 1), the store (DW_ROWS + 1) and
 * the taps (KH + 1, KW + 1 per kh), each with its loop over DW_ROWS rows
 * (+ 1); its 3x3 path (dw_fwd_rows3) instead loads the 9 taps (+ 1) and
 * walks (DW_ROWS - 1) * s_h + 3 input rows (+ 1), each with its loop over
 * DW_ROWS rows (+ 1). Their loops over 3 taps and at most 6 columns
 * (literal bounds) count as unrolled, as llvmpipe's LLVM leaves them.
 * dwconv_dx: the staging loop, DW_ROWS rows (+ 1), and per row the mult
 * channels (+ 1) of taps. */
static int64_t dw_item_trips(const conv_tuning *tu, const conv_geom *g, const dw_plan *pl, int dx)
{
    int64_t wg = tu->dw_wg, KHW = (int64_t)g->KH * g->KW;
    int64_t taps = (g->KH + 1) + (int64_t)g->KH * (g->KW + 1);
    if (dx) {
        int64_t stage = teeny__conv_cdiv((int64_t)g->Cog * pl->PH * pl->PW + g->Cog * KHW, wg) + 1;
        return stage + (tu->dw_rows + 1) + (int64_t)tu->dw_rows * ((g->Cog + 1) + (int64_t)g->Cog * taps);
    }
    int64_t rows = tu->dw_rows + 1, ends = 4 * (int64_t)tu->dw_rows + 1 + rows;
    if (g->KH == 3 && g->KW == 3 && g->dh == 1 && (g->sh == 1 || g->sh == 2)) {
        int64_t in_rows = (int64_t)(tu->dw_rows - 1) * g->sh + 3;
        return ends + 10 + (in_rows + 1) + in_rows * rows;
    }
    return ends + (g->KH + 1) + (int64_t)g->KH * ((g->KW + 1) + (int64_t)g->KW * rows);
}

teeny_status teeny__conv_dw_loops_fit(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const dw_plan *pl,
                                      int dx, int *fits)
{
    int64_t budget;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    *fits = st == TEENY_OK && dw_item_trips(tu, g, pl, dx) <= budget;
    return st;
}

/* dwconv_dw: per pass of DW_TAPS taps (KHW / DW_TAPS passes, + 1) the
 * clear and the store of its taps (DW_TAPS + 1 each), the loop over its
 * rounds of DW_WG positions (+ 1; each DW_TAPS + 2) and the tree. The
 * most rounds one item may take; 0 where not one fits. */
int64_t teeny__conv_dw_rounds_max(const conv_tuning *tu, const conv_geom *g, int64_t budget)
{
    int64_t passes = teeny__conv_cdiv((int64_t)g->KH * g->KW, tu->dw_taps);
    int64_t pass = 1 + 2 * ((int64_t)tu->dw_taps + 1) + 1 + teeny__conv_tree_trips(tu->dw_wg, tu->dw_taps);
    if (budget == INT64_MAX)
        return INT64_MAX;
    int64_t left = (budget - 1) / passes - pass;
    return left < tu->dw_taps + 2 ? 0 : left / (tu->dw_taps + 2);
}

/* dwconv_bwd3 (DWB_ROWS rows of 4 columns an item, cl/conv2d_dwb.cl): the
 * clears and loads of its 9 sums and taps (10 each), the column mask (7),
 * two windows (DWB_ROWS + 3 rows each, rows of 6 + 1), the input
 * gradient's rows (DWB_ROWS + 1: columns 4 + 1 of 9 + 1 taps, stores
 * 4 + 1), the weight gradient's (DWB_ROWS + 1: columns 4 + 1 of 9 + 1
 * taps), the partial's store (10) and the tree. */
int64_t teeny__conv_dw_bwd3_trips(const conv_tuning *tu)
{
    int64_t window = 2 * ((TEENY__DWB_ROWS + 3) + (int64_t)(TEENY__DWB_ROWS + 2) * 7);
    int64_t dx = (TEENY__DWB_ROWS + 1) + (int64_t)TEENY__DWB_ROWS * ((4 + 1) + 4 * 10 + (4 + 1));
    int64_t dw = (TEENY__DWB_ROWS + 1) + (int64_t)TEENY__DWB_ROWS * ((4 + 1) + 4 * 10);
    return 10 + 10 + 7 + window + dx + dw + 10 + teeny__conv_tree_trips(teeny__conv_dwb_wg(tu), 9) + 1;
}

/* dwconv_dw's 3x3 path (dw_dw_rows3): 3x3, stride 1, dilation 1, one pass
 * of DW_TAPS >= 9 taps, and its trips within the budget: the pass (its
 * loop, clear, store and tree) and per round (one unit: cols columns of a
 * strip of DW_ROWS rows) the rows (DW_ROWS + 1), each with its window
 * loop (at most 6 + 1) and its 3 + 1 kernel rows per column. A chunk of
 * r_chunk positions touches at most r_chunk / OW + 2 output rows. */
int teeny__conv_dw_rows3_fit(const conv_tuning *tu, const conv_geom *g, int cols, int64_t r_chunk, int64_t budget)
{
    if (g->KH != 3 || g->KW != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || tu->dw_taps < 9)
        return 0;
    if (budget == INT64_MAX)
        return cols;
    int64_t units = teeny__conv_cdiv(r_chunk / g->OW + 2, tu->dw_rows) * teeny__conv_cdiv(g->OW, cols),
            rounds = teeny__conv_cdiv(units, tu->dw_wg);
    int64_t round = 1 + (tu->dw_rows + 1) + (int64_t)tu->dw_rows * (7 + 4 * cols);
    int64_t pass = 1 + 2 * ((int64_t)tu->dw_taps + 1) + 1 + teeny__conv_tree_trips(tu->dw_wg, tu->dw_taps);
    return 1 + pass + (rounds + 1) + rounds * round <= budget ? cols : 0;
}

/* dwconv_dw_cpu: per row (b, oh) of its chunk the row loop's trip and the
 * columns (OW + 1 at most); the most rows one item may take. */
int64_t teeny__conv_dw_cpu_rows_max(const conv_geom *g, int64_t budget)
{
    if (budget == INT64_MAX)
        return INT64_MAX;
    return (budget - 1) / ((int64_t)g->OW + 2);
}

/* ---- the route: forward and input gradient ---- */

/* The depthwise CPU variants' launch (conv_cpu_variant): `name` over
 * `rows` rows of channels x B planes, whole rows per item, at most
 * rows_max (teeny__conv_dw_cpu_rows); a holds the arguments but the last,
 * the rows per item, which this appends (a has room for n + 1). */
static teeny_status dw_cpu_run(teeny_ctx *ctx, const char *opt, const char *name, karg *a, int n, int rows,
                               int channels, int B, int64_t rows_max)
{
    int64_t planes = (int64_t)channels * B;
    int rows_per = teeny__cpu_rows_per(ctx, rows, planes, rows_max);
    size_t items = (size_t)(teeny__conv_cdiv(rows, rows_per) * planes);
    size_t global[3] = {(size_t)teeny__conv_cdiv(rows, rows_per), (size_t)channels, (size_t)B};
    size_t local[3] = {1, teeny__cpu_local(ctx, items), 1};
    a[n] = KI(rows_per);
    return teeny__run_kernel(ctx, "conv2d", opt, name, a, n + 1, 3, global, local);
}

/* dwconv_fwd over g (x -> y), its taps reversed where flip is set (the
 * stride-1 input gradient, dx_as_forward). *done is 0, with TEENY_OK, where
 * the kernel does not fit the device (its work-group size, or the loop
 * budget: the caller takes another path). */
static teeny_status dw_forward_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, cl_mem x, int x_off,
                                   cl_mem w, int w_off, cl_mem y, int y_off, const dw_epilogue *e, int flip, int *done)
{
    dw_plan pl;
    int loops_fit = 0;
    teeny_status st = TEENY_OK;
    *done = 0;
    teeny__conv_dw_plan_fwd(ctx, tu, g, &pl);
    if (!teeny__conv_dw_fits(ctx, tu, "dwconv_fwd", (size_t)tu->dw_wg, 0, &st) ||
        (st = teeny__conv_dw_loops_fit(ctx, tu, g, &pl, 0, &loops_fit)) != TEENY_OK || !loops_fit)
        return st;
    char opt[256];
    teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
    cl_int16 geo = dw_geometry(g);
    int64_t items = (int64_t)g->B * g->Cout * pl.row_blocks * teeny__conv_cdiv(g->OW, pl.cols);
    size_t global = (size_t)teeny__conv_cdiv(items, tu->dw_wg) * (size_t)tu->dw_wg, local = (size_t)tu->dw_wg;
    karg k[] = {KM(x),       KI(x_off),        KM(w),       KI(w_off),       KM(y),        KI(y_off),
                KG(geo),     KI(pl.rows),      KI(pl.row_blocks), KM(e->bias), KI(e->bias_off), KM(e->scale),
                KI(e->scale_off), KM(e->shift), KI(e->shift_off), KI(e->epi), KI(e->act),   KI(flip),
                KI(pl.cols)};
    *done = 1;
    return teeny__run_kernel(ctx, "conv2d", opt, "dwconv_fwd", k, (int)(sizeof k / sizeof k[0]), 1, &global,
                             &local);
}

/* The most output rows a dwconv_fwd_cpu_band item may take
 * (teeny__band_rows_max); 0 where CONV_FLAGS bit 64 keeps dwconv_fwd_cpu. */
static teeny_status band_rows_max(teeny_ctx *ctx, const conv_geom *g, int64_t *rows_max)
{
    teeny__band_geom b = {g->OH, g->OW, g->KH, g->KW, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw};
    *rows_max = 0;
    return ctx->hooks.conv_flags & 64 ? TEENY_OK : teeny__band_rows_max(ctx, &b, rows_max);
}

/* The route's forward on the CPU variant: dwconv_fwd_cpu_band where its
 * band and trips fit, else dwconv_fwd_cpu where its rows fit the loop
 * budget; elsewhere, or where neither fits, dwconv_fwd where it fits;
 * else the pass goes on. */
teeny_status teeny__conv_dw_forward(teeny_ctx *ctx, const conv_pass *p, int *taken)
{
    const conv_geom *g = &p->g;
    const dw_epilogue *e = &p->e;
    const teeny_tensor *x = p->x, *w = p->w;
    teeny_tensor *y = p->out;
    int64_t rows_max = 0;
    teeny_status st;
    int x_off = teeny__off(x), w_off = teeny__off(w), y_off = teeny__off(y);
    *taken = 0;
    if (!teeny__conv_use_depthwise(ctx, p->tu, g))
        return TEENY_OK;
    int64_t band_max = 0;
    if (teeny__conv_cpu_variant(ctx) && ((st = band_rows_max(ctx, g, &band_max)) != TEENY_OK ||
                                         (st = teeny__conv_dw_cpu_rows(ctx, g, 0, &rows_max)) != TEENY_OK))
        return st;
    if (teeny__conv_cpu_variant(ctx) && (band_max >= 1 || rows_max >= 1)) {
        char opt[256];
        teeny__conv_tile_options(ctx, p->tu, 0, opt, sizeof opt);
        cl_int16 geo = dw_geometry(g);
        karg k[] = {KM(x->buf),  KI(x_off),        KM(w->buf),   KI(w_off),        KM(y->buf),   KI(y_off),
                    KG(geo),     KM(e->bias),      KI(e->bias_off), KM(e->scale), KI(e->scale_off), KM(e->shift),
                    KI(e->shift_off), KI(e->epi),  KI(e->act),   {0, NULL}};
        *taken = 1;
        return dw_cpu_run(ctx, opt, band_max >= 1 ? "dwconv_fwd_cpu_band" : "dwconv_fwd_cpu", k,
                          (int)(sizeof k / sizeof k[0]) - 1, g->OH, g->Cout, g->B, band_max >= 1 ? band_max : rows_max);
    }
    return dw_forward_run(ctx, p->tu, g, x->buf, x_off, w->buf, w_off, y->buf, y_off, e, 0, taken);
}

/* The depthwise input gradient at stride 1 with multiplier 1: dx[ih] =
 * sum over kh of dy[ih + p - kh*d] * w[kh] (per axis), the forward
 * convolution of dy with the taps reversed, stride 1, the same dilation
 * and padding (K-1)*d - p (negative where p is wider than the kernel:
 * dwconv_fwd's bounds checks hold for any). *done as dw_forward_run's. */
static teeny_status dx_as_forward(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const teeny_tensor *w,
                                  const teeny_tensor *dy, teeny_tensor *dx, int *done)
{
    conv_geom t = *g;
    t.H = g->OH;
    t.W = g->OW;
    t.OH = g->H;
    t.OW = g->W;
    t.ph = (g->KH - 1) * g->dh - g->ph;
    t.pw = (g->KW - 1) * g->dw - g->pw;
    dw_epilogue e = {dy->buf, dy->buf, dy->buf, 0, 0, 0, 0, TEENY_ACT_NONE};
    return dw_forward_run(ctx, tu, &t, dy->buf, teeny__off(dy), w->buf, teeny__off(w), dx->buf, teeny__off(dx), &e,
                          1, done);
}

/* The route's input gradient: dwconv_dx_cpu on the CPU variant where its
 * rows fit the loop budget; at stride 1 with multiplier 1 dwconv_fwd over
 * dy (dx_as_forward); else dwconv_dx where its patch and loops fit; else
 * the pass goes on. */
teeny_status teeny__conv_dw_dx(teeny_ctx *ctx, const conv_pass *p, int *taken)
{
    const conv_geom *g = &p->g;
    const conv_tuning *tu = p->tu;
    const teeny_tensor *w = p->w, *dy = p->dy;
    teeny_tensor *dx = p->out;
    int w_off = teeny__off(w), dy_off = teeny__off(dy), dx_off = teeny__off(dx), loops_fit = 0;
    int64_t rows_max = 0;
    dw_plan pl;
    teeny_status st = TEENY_OK;
    *taken = 0;
    if (teeny__conv_use_depthwise(ctx, tu, g) && teeny__conv_cpu_variant(ctx) &&
        (st = teeny__conv_dw_cpu_rows(ctx, g, 1, &rows_max)) != TEENY_OK)
        return st;
    if (teeny__conv_use_depthwise(ctx, tu, g) && teeny__conv_cpu_variant(ctx) && rows_max >= 1) {
        char opt[256];
        teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
        cl_int16 geo = dw_geometry(g);
        karg k[] = {KM(dy->buf), KI(dy_off), KM(w->buf), KI(w_off), KM(dx->buf), KI(dx_off), KG(geo), {0, NULL}};
        *taken = 1;
        return dw_cpu_run(ctx, opt, "dwconv_dx_cpu", k, (int)(sizeof k / sizeof k[0]) - 1, g->H, g->Cin, g->B,
                          rows_max);
    }
    if (teeny__conv_use_depthwise(ctx, tu, g) && g->Cog == 1 && g->sh == 1 && g->sw == 1) {
        if ((st = dx_as_forward(ctx, tu, g, w, dy, dx, taken)) != TEENY_OK || *taken)
            return st;
    }
    if (teeny__conv_use_depthwise(ctx, tu, g) && teeny__conv_dw_plan_dx(ctx, tu, g, &pl) &&
        teeny__conv_dw_fits(ctx, tu, "dwconv_dx", (size_t)tu->dw_wg, pl.local_bytes, &st) &&
        (st = teeny__conv_dw_loops_fit(ctx, tu, g, &pl, 1, &loops_fit)) == TEENY_OK && loops_fit) {
        char opt[256];
        teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
        cl_int16 geo = dw_geometry(g);
        size_t global[3] = {(size_t)tu->dw_wg * pl.tiles_h * pl.tiles_w, (size_t)g->Cin, (size_t)g->B};
        size_t local[3] = {(size_t)tu->dw_wg, 1, 1};
        karg k[] = {KM(dy->buf), KI(dy_off), KM(w->buf), KI(w_off),    KM(dx->buf), KI(dx_off), KG(geo),
                    KI(pl.TH),   KI(pl.TW),  KI(pl.tiles_w), KI(pl.PH), KI(pl.PW),  KL(pl.local_bytes)};
        *taken = 1;
        return teeny__run_kernel(ctx, "conv2d", opt, "dwconv_dx", k, (int)(sizeof k / sizeof k[0]), 3, global, local);
    }
    return st;
}

/* ---- the weight gradient, and both gradients in one pass ---- */

/* The weight gradient's depthwise launches as weight_grad.c plans them
 * (gp->depthwise): dwconv_dw_cpu on the CPU variant, one item per (tap,
 * co) straight into out, per chunk of rows where the device's loop budget
 * asks for it (gp->z > 1); else dwconv_dw over gp->z chunks of B*OH*OW
 * positions, its partials zstride apart. opt: the program's options. */
teeny_status teeny__conv_dw_wgrad_run(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, const grad_plan *gp,
                                      const char *opt, cl_mem x, int x_off, cl_mem dy, int dy_off, cl_mem out,
                                      int out_off, int zstride)
{
    int R = g->B * g->OH * g->OW;
    teeny_status st;
    if (teeny__conv_cpu_variant(ctx)) {
        int KHW = g->KH * g->KW;
        cl_int16 geo = dw_geometry(g);
        size_t global[3] = {(size_t)KHW, (size_t)g->Cout, (size_t)gp->z};
        size_t local[3] = {1, teeny__cpu_local(ctx, (size_t)KHW * (size_t)g->Cout), 1};
        karg k[] = {KM(x),       KI(x_off), KM(dy), KI(dy_off), KM(out), KI(out_off), KG(geo), KI(gp->r_chunk),
                    KI(zstride)};
        return teeny__run_kernel(ctx, "conv2d", opt, "dwconv_dw_cpu", k, (int)(sizeof k / sizeof k[0]), 3, global,
                                 local);
    }
    int64_t budget;
    if ((st = teeny__loop_budget(ctx, &budget)) != TEENY_OK)
        return st;
    int rows3 = teeny__conv_dw_rows3_fit(tu, g, teeny__conv_dw_grad_cols(ctx, g), gp->r_chunk, budget);
    cl_int16 geo = dw_geometry(g);
    size_t global[2] = {(size_t)tu->dw_wg * gp->z, (size_t)g->Cout}, local[2] = {(size_t)tu->dw_wg, 1};
    karg k[] = {KM(x),       KI(x_off), KM(dy), KI(dy_off),      KM(out),  KI(out_off),
                KI(zstride), KG(geo),   KI(R),  KI(gp->r_chunk), KI(rows3)};
    return teeny__run_kernel(ctx, "conv2d", opt, "dwconv_dw", k, (int)(sizeof k / sizeof k[0]), 2, global, local);
}

/* dwconv_bwd3's work-groups per channel (its partials), 0 where it does
 * not apply (or the test hook CONV_DW_BWD is -1): the CPU variant or a device where its items, partials or
 * their sum do not fit (*st TEENY_OK), or a failed build or query (*st). */
int teeny__conv_dw_bwd3_plan(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, teeny_status *st)
{
    int64_t budget, wg = teeny__conv_dwb_wg(tu),
                    units = (int64_t)g->B * teeny__conv_cdiv(g->H, TEENY__DWB_ROWS) * teeny__conv_cdiv(g->W, 4);
    int64_t z = teeny__conv_cdiv(units, wg);
    int64_t max_floats = (int64_t)(ctx->info.max_alloc_bytes / sizeof(float)) / 2;
    *st = TEENY_OK;
    if (ctx->hooks.conv_dw_bwd < 0 || teeny__conv_cpu_variant(ctx) || !teeny__conv_use_depthwise(ctx, tu, g) ||
        g->Cog != 1 || g->KH != 3 || g->KW != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || g->ph != 1 ||
        g->pw != 1 || g->OH != g->H || g->OW != g->W || z * wg > INT32_MAX ||
        (int64_t)g->B * g->Cin * g->H * g->W > INT32_MAX || z * g->Cout * 9 > max_floats ||
        (size_t)9 * wg * sizeof(float) > teeny__conv_local_budget(ctx))
        return 0;
    if ((*st = teeny__loop_budget(ctx, &budget)) != TEENY_OK ||
        teeny__conv_dw_bwd3_trips(tu) > budget || (z > 1 && z + 1 > budget))
        return 0;
    return teeny__conv_dw_fits(ctx, tu, "dwconv_bwd3", (size_t)wg, 0, st) ? (int)z : 0;
}

teeny_status teeny__conv_dw_bwd3(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int z,
                                 const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *dy,
                                 teeny_tensor *dx, teeny_tensor *dw, cl_mem scratch)
{
    cl_mem out = z > 1 ? scratch : dw->buf;
    int x_off = teeny__off(x), dy_off = teeny__off(dy), w_off = teeny__off(w), dx_off = teeny__off(dx);
    int out_off = z > 1 ? 0 : teeny__off(dw), zstride = g->Cout * 9;
    char opt[256];
    teeny__conv_tile_options(ctx, tu, 0, opt, sizeof opt);
    size_t global[2] = {(size_t)teeny__conv_dwb_wg(tu) * z, (size_t)g->Cout},
           local[2] = {(size_t)teeny__conv_dwb_wg(tu), 1};
    karg k[] = {KM(x->buf), KI(x_off),   KM(dy->buf),  KI(dy_off), KM(w->buf), KI(w_off),
                KM(dx->buf), KI(dx_off), KM(out),      KI(out_off), KI(zstride), KI(g->B),
                KI(g->Cout), KI(g->H),   KI(g->W)};
    teeny_status st =
        teeny__run_kernel(ctx, "conv2d", opt, "dwconv_bwd3", k, (int)(sizeof k / sizeof k[0]), 2, global, local);
    if (st == TEENY_OK && z > 1)
        st = teeny__conv_reduce_parts(ctx, tu, opt, scratch, 0, zstride, z, dw->buf, teeny__off(dw));
    return st;
}
