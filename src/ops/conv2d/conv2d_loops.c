/*
 * conv2d_loops.c -- the loop trips of every conv2d kernel, and the splits
 * they ask for where a device limits the trips of a work-item (Mesa's
 * llvmpipe ends every loop of an invocation after 65535 trips in all;
 * teeny__loop_budget gives half of that, and INT64_MAX where nothing is
 * limited, so that every split below is then one piece and the plans, and
 * the bits, are those of an unlimited device).
 *
 * Every estimate counts each loop of cl/conv2d.cl as not unrolled, with
 * one trip more per entry than its body runs (the limiter counts the exit
 * test too), and the widest item of a launch. The plans that launch the
 * kernels (conv2d_plan.c, conv2d_exec.c) call these:
 *   - the GEMMs' k loops (conv_gemm_gather, conv_gemm_1x1, conv_gemm_cpu)
 *     run in launches over k ranges, out carrying the sums (the bits of
 *     one launch); the CPU GEMM of the weight gradient in partials instead
 *     where the workspace holds them;
 *   - the weight gradients' chunks of B*OH*OW (conv_gemm_dw, dwconv_dw,
 *     dwconv_dw_cpu) and the bias gradient's chunks of the batch become
 *     more and shorter; conv_reduce_parts loops over the chunks;
 *   - the depthwise CPU variants take fewer rows per item; a depthwise
 *     kernel whose item cannot fit (a row too long, a huge kernel) leaves
 *     the convolution to the GEMM path.
 */
#include "conv2d_internal.h"

/* DW_CPU_COLS of cl/conv2d.cl: columns a depthwise CPU item holds at once. */
#define DW_CPU_COLS 64

static int log2_floor(int64_t v)
{
    int l = 0;
    while ((int64_t)1 << (l + 1) <= v)
        l++;
    return l;
}

/* teeny_group_sum_rows over wg items and `rows` rows: log2(wg) levels of
 * the level loop and the rows loop, + 1. */
static int64_t tree_trips(int64_t wg, int64_t rows)
{
    return (int64_t)log2_floor(wg) * (1 + rows + 1) + 1;
}

/* ---- depthwise ---- */

/* dwconv_fwd_cpu / dwconv_dx_cpu, one output (fwd) or input (dx) row: its
 * loop trip and its chunks of DW_CPU_COLS columns (chunks + 1), each with a
 * clear and a store (n + 1 each), the taps (KH + 1, KW + 1 per kh) and per
 * tap the columns it reaches (n + 1 at most); dx loops over the mult
 * output channels of its input channel around the taps. */
static int64_t dw_cpu_row_trips(const conv_geom *g, int dx)
{
    int64_t width = dx ? g->W : g->OW, n = width < DW_CPU_COLS ? width : DW_CPU_COLS;
    int64_t chunks = cdiv(width, DW_CPU_COLS);
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
        int64_t stage = cdiv((int64_t)g->Cog * pl->PH * pl->PW + g->Cog * KHW, wg) + 1;
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
    int64_t passes = cdiv((int64_t)g->KH * g->KW, tu->dw_taps);
    int64_t pass = 1 + 2 * ((int64_t)tu->dw_taps + 1) + 1 + tree_trips(tu->dw_wg, tu->dw_taps);
    if (budget == INT64_MAX)
        return INT64_MAX;
    int64_t left = (budget - 1) / passes - pass;
    return left < tu->dw_taps + 2 ? 0 : left / (tu->dw_taps + 2);
}

/* dwconv_bwd3 (DWB_ROWS rows of 4 columns an item, cl/conv2d.cl): the
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
    return 10 + 10 + 7 + window + dx + dw + 10 + tree_trips(conv_dwb_wg(tu), 9) + 1;
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
    int64_t units = cdiv(r_chunk / g->OW + 2, tu->dw_rows) * cdiv(g->OW, cols), rounds = cdiv(units, tu->dw_wg);
    int64_t round = 1 + (tu->dw_rows + 1) + (int64_t)tu->dw_rows * (7 + 4 * cols);
    int64_t pass = 1 + 2 * ((int64_t)tu->dw_taps + 1) + 1 + tree_trips(tu->dw_wg, tu->dw_taps);
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

/* ---- GEMMs ---- */

/* conv_gemm_gather / conv_gemm_1x1 (plain) / conv_gemm_dw (dw) with tile
 * t, mirroring the loop extents of cl/conv2d.cl's A_*, A4_*, B_* and R_*
 * macros: per k tile (TILE_K deep) the tile loop's trip, the staging of A
 * and B into local memory and the next tile's loads (each outer + 1 and
 * inner + 1), and gemm_micro (TILE_K + 1, per kk the A and B row reads and
 * the WPT_M x WPT_N multiply-adds); around them the row setup, the
 * accumulators, the first loads, the tile loop's exit, and gemm_load and
 * gemm_store. */
static void gemm_trips(const gemm_tile *t, int kind, int64_t *fixed, int64_t *per_tile)
{
    int64_t wg = gemm_wg(t), tm = t->tm, tn = t->tn, tk = t->tk, wm = t->wm, wn = t->wn;
    int64_t a_tm = tm < 32 ? tm : 32, a_tm4 = tm / 4;
    if (a_tm > wg)
        a_tm = wg;
    if (a_tm4 > wg)
        a_tm4 = wg;
    int64_t a_nm = tm / a_tm, a_nk = tk / (wg / a_tm), a4_nm = tm / 4 / a_tm4, a4_nk = tk / (wg / a_tm4);
    int64_t b_nn = cdiv(tn, wg / tk), r_nm = tm / (wg / tk), r_nn = cdiv(tn, wg / tk);
    int64_t a_loads = kind == 1 ? (a4_nk + 1) + a4_nk * (a4_nm + 1) : (a_nk + 1) + a_nk * (a_nm + 1);
    int64_t b_loads = b_nn + 1, setup = (kind == 1 ? a4_nm : a_nm) + 1;
    if (kind == 2) { /* conv_gemm_dw: A and B rows along r */
        a_loads = r_nm + 1;
        b_loads = r_nn + 1;
        setup = (r_nm + 1) + (r_nn + 1);
    }
    int64_t micro = (tk + 1) + tk * ((wm / 4 + 1) + (wn / 4 + 1) + (wm + 1) + wm * (wn + 1));
    int64_t load = (wm / 4 + 1) + (wm / 4) * (4 + 1 + 4 * (wn + 1));
    int64_t store = (wn + 1) + (wm / 4 + 1) + (wm / 4) * (4 + 1 + 4 * (wn + 1));
    *per_tile = 1 + 2 * (a_loads + b_loads) + micro;
    *fixed = setup + (wm * wn + 1) + (a_loads + b_loads) + 1 + load + store;
}

/* extra_trips: the merged stride phases' search (gemm_job.phase_trips). */
teeny_status teeny__conv_gemm_tiles(teeny_ctx *ctx, const gemm_tile *t, int plain, int64_t k_tiles,
                                    int64_t extra_trips, int64_t *per)
{
    int64_t fixed, per_tile;
    gemm_trips(t, plain ? 1 : 0, &fixed, &per_tile);
    fixed += extra_trips;
    return teeny__loop_split(ctx, plain ? "conv_gemm_1x1" : "conv_gemm_gather", k_tiles, fixed, per_tile, per);
}

int64_t teeny__conv_gemm_dw_tiles_max(const gemm_tile *t, int64_t budget)
{
    int64_t fixed, per_tile;
    gemm_trips(t, 2, &fixed, &per_tile);
    if (budget == INT64_MAX)
        return INT64_MAX;
    return budget < fixed + per_tile ? 0 : (budget - fixed) / per_tile;
}

/* conv_gemm_cpu: per unit k = (tap, channel) the channel loop's trip, the
 * B loads (CPU_NV + 1) and the rows (CPU_RM + 1, each CPU_NV + 1); per tap
 * its loop trip, the row offsets (CPU_RM + 1) and the channel loop's exit,
 * shared by its Kc units; fixed: the row setup, the accumulators, the load
 * and the store (CPU_RM + 1, each CPU_NV + 1 and CPU_NC + 1), the epilogue
 * factors, the tap loop's exit and the partial taps at a range's ends. */
static void cpu_gemm_trips(const conv_tuning *tu, int Kc, int64_t *fixed, int64_t *per_unit)
{
    int64_t rm = tu->cpu_rows, nv = tu->cpu_nv, nc = 16 * nv;
    int64_t unit = 1 + (nv + 1) + (rm + 1) + rm * (nv + 1), tap = 1 + (rm + 1) + 1;
    *fixed = (rm + 1) + (rm * nv + 1) + 2 * ((rm + 1) + rm * (nv + 1 + nc + 1)) + (nc + 1) + 1 + 2 * tap;
    *per_unit = unit + cdiv(tap, Kc > 0 ? Kc : 1);
}

teeny_status teeny__conv_cpu_gemm_chunk(teeny_ctx *ctx, const conv_tuning *tu, const gemm_job *j, int64_t *chunk)
{
    int64_t fixed, per_unit;
    cpu_gemm_trips(tu, j->Kc, &fixed, &per_unit);
    return teeny__loop_split(ctx, "conv_gemm_cpu", (int64_t)j->Kh * j->Kw * j->Kc, fixed, per_unit, chunk);
}

/* ---- every call's minimum ----
 * One k unit of each GEMM this device may take (its smallest tile, the
 * CPU GEMM of its tuning), and conv_pack_b's row of Np columns (N + 1 and
 * Np - N + 1 trips) for each n_pack[i] columns: checked before a call
 * enqueues anything, so that no later split can fail. */
teeny_status teeny__conv_loops_check(teeny_ctx *ctx, const conv_tuning *tu, const int *n_pack, int n)
{
    int64_t fixed, per;
    teeny_status st = TEENY_OK;
    if (tu->cpu_rows > 0) {
        cpu_gemm_trips(tu, 1, &fixed, &per);
        st = teeny__loop_check(ctx, "conv_gemm_cpu", fixed + per);
        for (int i = 0; i < n && st == TEENY_OK; i++)
            st = teeny__loop_check(ctx, "conv_pack_b", cdiv(n_pack[i], 16 * tu->cpu_nv) * 16 * tu->cpu_nv + 2);
    }
    /* the tiles beyond the budget are not picked (teeny__conv_tile_loops_fit):
     * the smallest must fit, its message where it does not */
    for (int kind = 0; kind < 3 && st == TEENY_OK && tu->n_tiles > 0; kind++) {
        static const char *const names[3] = {"conv_gemm_gather", "conv_gemm_1x1", "conv_gemm_dw"};
        gemm_trips(&tu->tiles[tu->n_tiles - 1], kind, &fixed, &per);
        st = teeny__loop_check(ctx, names[kind], fixed + per);
    }
    return st;
}

int teeny__conv_tile_loops_fit(const teeny_ctx *ctx, const gemm_tile *t)
{
    int64_t fixed, per, budget = teeny__loop_budget_known(ctx);
    for (int kind = 0; kind < 3; kind++) {
        gemm_trips(t, kind, &fixed, &per);
        if (fixed + per > budget)
            return 0;
    }
    return 1;
}

/* ---- reductions ---- */

/* conv_dbias_part: per batch of its chunk the batch loop's trip and the
 * strided loop over the plane (OHW / DW_WG + 1), then the tree; the most
 * batches one item may take (TEENY_ERR_UNSUPPORTED where not one fits:
 * planes of more than about 2 million outputs at DW_WG 64 on llvmpipe). */
teeny_status teeny__conv_db_batches_max(teeny_ctx *ctx, const conv_tuning *tu, const conv_geom *g, int64_t *per)
{
    int64_t plane = cdiv((int64_t)g->OH * g->OW, tu->dw_wg) + 2;
    return teeny__loop_split(ctx, "conv_dbias_part", g->B, 1 + tree_trips(tu->dw_wg, 1), plane, per);
}

/* conv_reduce_parts: Z + 1 trips. */
teeny_status teeny__conv_reduce_check(teeny_ctx *ctx, int64_t z)
{
    return z > 1 ? teeny__loop_check(ctx, "conv_reduce_parts", z + 1) : TEENY_OK;
}
