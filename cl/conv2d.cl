/*
 * conv2d.cl -- grouped 2-D convolution over NCHW fp32 tensors: forward
 * (with a fused per-channel scale/shift/bias + activation epilogue), input
 * gradient, weight gradient and bias gradient. OpenCL C 1.2. The conv2d
 * program is this file (the layouts, the tunables, the shared GEMM
 * pieces), then conv2d_gemm.cl, conv2d_gemm_cpu.cl, conv2d_dw.cl,
 * conv2d_dwb.cl, conv2d_dw_cpu.cl and conv2d_reduce.cl
 * (src/program/build.c's parts table).
 *
 * Layouts: x [B, Cin, H, W], w [Cout, Cin/G, KH, KW], y and dy
 * [B, Cout, OH, OW]; every buffer comes with an element offset (tensors may
 * be views). Problem geometry is always a kernel argument; only the tile
 * shape below is compiled in, so one program serves every shape.
 *
 * Kernel shapes:
 *  - Implicit GEMM. conv_gemm_gather computes out[m, n] = sum_k A[m, k] * B[k, n]
 *    per group, where m walks an output grid (b, p, q), n an output channel
 *    of the group and k = (c, kh, kw) a source channel and kernel tap; A is
 *    gathered from a source tensor on the fly (never materialized):
 *        src[b, g*Kc + c, p*a_h + c_h + kh*e_h, q*a_w + c_w + kw*e_w]
 *    (zero outside the source), B from the weights through strides. The
 *    forward pass is (src = x, a = stride, c = -pad, e = dilation); the
 *    input gradient is the same gather over dy per stride phase of dx, so
 *    that only taps that hit an output are visited (a = 1,
 *    e = -dilation/gcd(stride, dilation)); one launch holds every phase,
 *    the grid's third index picking it (conv_phase_job). conv_gemm_1x1 is
 *    the plain GEMM of 1x1 stride-1 unpadded convolutions with float4
 *    loads.
 *    conv_gemm_dw computes the weight gradient as a GEMM over
 *    r = (b, oh, ow), split into chunks whose partials a second pass
 *    (conv_reduce_parts) sums in a fixed order.
 *    (conv_dx_direct, the input gradient without the GEMM where a group
 *    has 1-4 input channels, is cl/conv2d_dx.cl: a program of its own.)
 *    Tiles: a work-group owns a TILE_M x TILE_N block of out; each
 *    TILE_K slice of A and B is staged in local memory (double-buffered,
 *    one barrier per slice, the next slice's global loads in flight during
 *    the arithmetic), and each work-item accumulates a WPT_M x WPT_N
 *    micro-tile in registers, reading the operands as float4.
 *  - Depthwise (Cin/G == 1 and a small channel multiplier Cout/G):
 *    dwconv_fwd gives each item a column strip of output rows (3x3
 *    kernels: each input row of the strip loaded once), reading through
 *    the cache; dwconv_dx stages a dy patch in local memory so each
 *    element is read from global memory about once; dwconv_dw reduces
 *    per-tap products over a chunk of (b, oh, ow) (3x3 at stride 1: down
 *    column strips with a sliding window of inputs).
 *  - Reductions: conv_dbias_part, conv_reduce_parts.
 * Nothing here uses atomics: every reduction has one fixed order, so the
 * same inputs give the same bits on the same device.
 *
 * k ranges. Where a device limits the loop trips of a work-item (Mesa's
 * llvmpipe; src/program/probe.c) the GEMMs run their reduction over a
 * range of k per launch: conv_gemm_gather and conv_gemm_1x1 over
 * [k_begin, k_end) (k_begin a multiple of TILE_K), conv_gemm_cpu over
 * [k_begin + z*k_chunk, + k_chunk) of its flattened (tap, channel) loop,
 * z the grid's third index. seg says whether a launch starts the sums
 * (CONV_SEG_FIRST: from zero; else from what the last one stored in out)
 * and ends them (CONV_SEG_LAST: the epilogue; else the raw sums, which the
 * store leaves exact). Launches in order over consecutive ranges see the
 * same terms in the same order as one launch: the same bits. Partial
 * ranges (z > 0) with their sums in out + z*out_zstride, added up by
 * conv_reduce_parts, are another order, taken only where needed.
 *
 * Tunables (-D, chosen by src/ops/conv2d/gemm.c from the device's limits):
 *   TILE_M, TILE_N, TILE_K  GEMM block tile; WPT_M, WPT_N  per-item micro
 *   tile (multiples of 4); the GEMM work-group has
 *   (TILE_M/WPT_M)*(TILE_N/WPT_N) items, which must be >= TILE_K and a
 *   multiple or divisor of TILE_M. DW_WG  work-group of the depthwise
 *   and reduction kernels (a power of two); DW_ROWS  output rows per item
 *   in dwconv_fwd (at most) and dwconv_dx; DW_TAPS  kernel taps reduced
 *   per pass in dwconv_dw.
 */
#ifndef TILE_M
#define TILE_M 32
#endif
#ifndef TILE_N
#define TILE_N 32
#endif
#ifndef TILE_K
#define TILE_K 8
#endif
#ifndef WPT_M
#define WPT_M 4
#endif
#ifndef WPT_N
#define WPT_N 4
#endif
#ifndef DW_WG
#define DW_WG 64
#endif
#ifndef DW_ROWS
#define DW_ROWS 8
#endif
#ifndef DW_TAPS
#define DW_TAPS 9
#endif

#define THREADS_M (TILE_M / WPT_M)
#define THREADS_N (TILE_N / WPT_N)
#define GEMM_WG (THREADS_M * THREADS_N)

/* Local rows padded by one float4: the weight-gradient kernel stores
 * k-adjacent items to different rows, which would otherwise share banks.
 * The tf32 micro-kernel pads by two, so that a fragment's 4 rows x 8
 * columns fall in 32 different banks. */
/* The tf32 micro-kernel's mma: the tensor cores' (tf32_mma), or in test
 * builds the portable emulation, whose fragments pass through a local
 * exchange each GEMM kernel declares (GEMM_XCHG_LOCAL) and hands down. */
#ifdef TEENY_TF32_EMULATE
#define GEMM_XCHG_LOCAL __local uint xchg[6 * GEMM_WG];
#define GEMM_XCHG_PARAM , __local uint *xchg
#define GEMM_XCHG_ARG , xchg
#define GEMM_MMA(c, a0, a1, a2, a3, b0, b1) tf32_mma_xchg(xchg, c, a0, a1, a2, a3, b0, b1)
#else
#define GEMM_XCHG_LOCAL
#define GEMM_XCHG_PARAM
#define GEMM_XCHG_ARG
#define GEMM_MMA tf32_mma
#endif

#ifdef TEENY_TF32
#define LDA (TILE_M + 8)
#define LDB (TILE_N + 8)
#else
#define LDA (TILE_M + 4)
#define LDB (TILE_N + 4)
#endif
/* A (gathered operand) loads: A_WARP items along m (one coalesced row of
 * a warp), the rest along k; each item keeps A_NM rows' offsets and
 * decodes A_NK k indices per slice. */
#ifndef A_WARP
#define A_WARP 32
#endif
#define A_TM0 (A_WARP < TILE_M ? A_WARP : TILE_M)
#define A_TM (A_TM0 < GEMM_WG ? A_TM0 : GEMM_WG)
#define A_TK (GEMM_WG / A_TM)
#define A_NM (TILE_M / A_TM)
#define A_NK (TILE_K / A_TK)
/* A loads of the 1x1 kernel: float4 along m. */
#define A4_TM (GEMM_WG < TILE_M / 4 ? GEMM_WG : TILE_M / 4)
#define A4_TK (GEMM_WG / A4_TM)
#define A4_NM (TILE_M / 4 / A4_TM)
#define A4_NK (TILE_K / A4_TK)
/* B (weight) loads: TILE_K items along k, the rest along n; where they
 * outnumber a thin tile's columns (B_TN > TILE_N), those past TILE_N load
 * none. */
#define B_TN (GEMM_WG / TILE_K)
#define B_NN ((TILE_N + B_TN - 1) / B_TN)
/* Weight-gradient kernel: TILE_K items along r, the rest along m and n
 * (as B: items past a thin tile's columns load none of DY). */
#define R_TX (GEMM_WG / TILE_K)
#define R_NM (TILE_M / R_TX)
#define R_NN ((TILE_N + R_TX - 1) / R_TX)

#define CONV_SEG_FIRST 1
#define CONV_SEG_LAST 2

/* ---- shared GEMM pieces ---- */

/* A position in a (c, h, w) index space of extents (*, Kh, Kw), advanced
 * by a fixed step with carries instead of a division per element. */
typedef struct {
    int c, h, w;
} conv_idx;

TEENY_INLINE conv_idx idx_make(int k, int Kh, int Kw)
{
    conv_idx s;
    s.w = k % Kw;
    k /= Kw;
    s.h = k % Kh;
    s.c = k / Kh;
    return s;
}

/* s + d where d = idx_make(step): each digit carries at most once. */
TEENY_INLINE conv_idx idx_add(conv_idx s, conv_idx d, int Kh, int Kw)
{
    s.w += d.w;
    int cw = s.w >= Kw;
    s.w -= cw ? Kw : 0;
    s.h += d.h + cw;
    int ch = s.h >= Kh;
    s.h -= ch ? Kh : 0;
    s.c += d.c + ch;
    return s;
}
