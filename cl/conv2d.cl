/*
 * conv2d.cl -- grouped 2-D convolution over NCHW fp32 tensors: forward
 * (with a fused per-channel scale/shift/bias + activation epilogue), input
 * gradient, weight gradient and bias gradient. OpenCL C 1.2.
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
 * Tunables (-D, chosen by src/ops/conv2d.c from the device's limits):
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

#ifdef TEENY_TF32
/* ---- tf32 tensor cores (NVIDIA; built with -DTEENY_TF32=1 only where a
 * build-and-run probe of the instruction succeeded, src/program/probe.c).
 * The operands are rounded to tf32 (tf32_round, cl/common.cl) as they are
 * staged into local memory; products accumulate in fp32 in the fixed
 * order of the hardware's mma, so results stay deterministic. A warp owns
 * a (16 TF32_MT) x (8 TF32_NT) block of the work-group's tile: TF32_MT x
 * TF32_NT mma.sync.m16n8k8 tiles (tf32_mma; the fragments' layout is in
 * cl/common.cl). The per-item acc[WPT_M * WPT_N] holds those C fragments,
 * tile by tile. Work-items 32 w .. 32 w + 31 of a 1-D work-group form
 * warp w. */
#define TF32_MT (WPT_M / 4)
#define TF32_NT WPT_N
#define TF32_WM (16 * TF32_MT) /* rows of a warp's block */
#define TF32_WN (8 * TF32_NT)  /* columns */
#define TF32_WARPS_M (TILE_M / TF32_WM)

#define TF32_STAGE(x) tf32_round(x)
#define TF32_STAGE4(v) ((float4)(tf32_round((v).x), tf32_round((v).y), tf32_round((v).z), tf32_round((v).w)))

/* The warp's block += As[k][m] * Bs[k][n] over one TILE_K slice. In test
 * builds (TEENY_TF32_EMULATE, conv2d_plan.c's hook) the mma is
 * cl/common.cl's portable one, its fragments exchanged through xchg
 * (GEMM_XCHG, 6 words an item): every item of the work-group calls this
 * alike, as the GEMM kernels do. */
TEENY_INLINE void gemm_micro(__local const float4 *As4, __local const float4 *Bs4, int tm, int tn,
                             float *acc GEMM_XCHG_PARAM)
{
    __local const float *As = (__local const float *)As4, *Bs = (__local const float *)Bs4;
    const int lane = get_local_id(0) & 31, warp = get_local_id(0) >> 5;
    const int r = lane >> 2, c = lane & 3;
    const int wm = (warp % TF32_WARPS_M) * TF32_WM + r, wn = (warp / TF32_WARPS_M) * TF32_WN + r;
    (void)tm;
    (void)tn;
    TEENY_UNROLL
    for (int kk = 0; kk < TILE_K; kk += 8) {
        __local const float *a_lo = As + (kk + c) * LDA + wm, *a_hi = a_lo + 4 * LDA;
        __local const float *b_lo = Bs + (kk + c) * LDB + wn, *b_hi = b_lo + 4 * LDB;
        uint a[TF32_MT][4], b[TF32_NT][2];
        TEENY_UNROLL
        for (int i = 0; i < TF32_MT; i++) {
            a[i][0] = as_uint(a_lo[16 * i]);
            a[i][1] = as_uint(a_lo[16 * i + 8]);
            a[i][2] = as_uint(a_hi[16 * i]);
            a[i][3] = as_uint(a_hi[16 * i + 8]);
        }
        TEENY_UNROLL
        for (int j = 0; j < TF32_NT; j++) {
            b[j][0] = as_uint(b_lo[8 * j]);
            b[j][1] = as_uint(b_hi[8 * j]);
        }
        TEENY_UNROLL
        for (int i = 0; i < TF32_MT; i++)
            TEENY_UNROLL
            for (int j = 0; j < TF32_NT; j++)
                GEMM_MMA(acc + (i * TF32_NT + j) * 4, a[i][0], a[i][1], a[i][2], a[i][3], b[j][0], b[j][1]);
    }
}
#else
#define TF32_STAGE(x) (x)
#define TF32_STAGE4(v) (v)

/* acc[WPT_M][WPT_N] += As[k][m] * Bs[k][n] over one TILE_K slice; item
 * (tm, tn) owns rows {r*THREADS_M*4 + tm*4 + 0..3} and columns
 * {s*THREADS_N*4 + tn*4 + 0..3}, so a warp reads consecutive float4s. */
TEENY_INLINE void gemm_micro(__local const float4 *As, __local const float4 *Bs, int tm, int tn,
                             float *acc GEMM_XCHG_PARAM)
{
    TEENY_UNROLL
    for (int kk = 0; kk < TILE_K; kk++) {
        float a[WPT_M], b[WPT_N];
        TEENY_UNROLL
        for (int r = 0; r < WPT_M / 4; r++) {
            float4 v = As[kk * (LDA / 4) + r * THREADS_M + tm];
            a[4 * r] = v.x;
            a[4 * r + 1] = v.y;
            a[4 * r + 2] = v.z;
            a[4 * r + 3] = v.w;
        }
        TEENY_UNROLL
        for (int s = 0; s < WPT_N / 4; s++) {
            float4 v = Bs[kk * (LDB / 4) + s * THREADS_N + tn];
            b[4 * s] = v.x;
            b[4 * s + 1] = v.y;
            b[4 * s + 2] = v.z;
            b[4 * s + 3] = v.w;
        }
        TEENY_UNROLL
        for (int i = 0; i < WPT_M; i++)
            TEENY_UNROLL
            for (int j = 0; j < WPT_N; j++)
                acc[i * WPT_N + j] = TEENY_MAD(a[i], b[j], acc[i * WPT_N + j]);
    }
}
#endif

#ifdef TEENY_TF32
/* Read back the warp's C fragments from where gemm_store wrote them
 * (a k range's raw sums; 0 outside M x N). */
TEENY_INLINE void gemm_load(float *acc, int tm, int tn, int m0, int n0, int g, int M, int N, int P, int Q,
                            __global const float *out, int out_off, int out_bstride, int out_nstride,
                            int out_hstride, int out_wstride)
{
    const int lane = get_local_id(0) & 31, warp = get_local_id(0) >> 5, PQ = P * Q;
    const int wm = m0 + (warp % TF32_WARPS_M) * TF32_WM + (lane >> 2);
    const int wn = n0 + (warp / TF32_WARPS_M) * TF32_WN + 2 * (lane & 3);
    (void)tm;
    (void)tn;
    TEENY_UNROLL
    for (int i = 0; i < 2 * TF32_MT; i++) {
        int m = wm + (i >> 1) * 16 + (i & 1) * 8, ok = m < M;
        int mm = ok ? m : 0, b = mm / PQ, pq = mm - b * PQ, p = pq / Q, q = pq - p * Q;
        int base = out_off + b * out_bstride + p * out_hstride + q * out_wstride + g * N * out_nstride;
        TEENY_UNROLL
        for (int j = 0; j < 2 * TF32_NT; j++) {
            int n = wn + (j >> 1) * 8 + (j & 1);
            acc[((i >> 1) * TF32_NT + (j >> 1)) * 4 + (i & 1) * 2 + (j & 1)] =
                ok && n < N ? out[base + n * out_nstride] : 0.0f;
        }
    }
}

/* Write the warp's C fragments: element (m, n) goes where the fp32
 * gemm_store below puts it, through the same epilogue. */
TEENY_INLINE void gemm_store(const float *acc, int tm, int tn, int m0, int n0, int g, int M, int N, int P, int Q,
                       __global float *out, int out_off, int out_bstride, int out_nstride, int out_hstride,
                       int out_wstride, __global const float *bias, int bias_off, __global const float *scale,
                       int scale_off, __global const float *shift, int shift_off, int epi, int act, int vec_out)
{
    const int lane = get_local_id(0) & 31, warp = get_local_id(0) >> 5, PQ = P * Q;
    const int wm = m0 + (warp % TF32_WARPS_M) * TF32_WM + (lane >> 2);
    const int wn = n0 + (warp / TF32_WARPS_M) * TF32_WN + 2 * (lane & 3);
    float sc[2 * TF32_NT], sh[2 * TF32_NT];
    (void)tm;
    (void)tn;
    (void)vec_out;
    TEENY_UNROLL
    for (int j = 0; j < 2 * TF32_NT; j++) {
        int n = wn + (j >> 1) * 8 + (j & 1), ch = g * N + n;
        sc[j] = 1.0f;
        sh[j] = 0.0f;
        if (n < N && epi) {
            if (epi & EPI_SCALE)
                sc[j] = scale[scale_off + ch];
            if (epi & EPI_SHIFT)
                sh[j] = shift[shift_off + ch];
            if (epi & EPI_BIAS)
                sh[j] += bias[bias_off + ch];
        }
    }
    TEENY_UNROLL
    for (int i = 0; i < 2 * TF32_MT; i++) { /* rows wm + 16 (i / 2) + 8 (i % 2) */
        int m = wm + (i >> 1) * 16 + (i & 1) * 8;
        if (m >= M)
            continue;
        int b = m / PQ, pq = m - b * PQ, p = pq / Q, q = pq - p * Q;
        int base = out_off + b * out_bstride + p * out_hstride + q * out_wstride + g * N * out_nstride;
        TEENY_UNROLL
        for (int j = 0; j < 2 * TF32_NT; j++) {
            int n = wn + (j >> 1) * 8 + (j & 1);
            if (n < N)
                out[base + n * out_nstride] =
                    conv_act(act, acc[((i >> 1) * TF32_NT + (j >> 1)) * 4 + (i & 1) * 2 + (j & 1)] * sc[j] + sh[j]);
        }
    }
}
#else
/* Read back the micro-tile from where gemm_store wrote it (a k range's
 * raw sums; 0 outside M x N). The float4 stores of vec_out hit the same
 * positions as this element-wise mapping. */
TEENY_INLINE void gemm_load(float *acc, int tm, int tn, int m0, int n0, int g, int M, int N, int P, int Q,
                            __global const float *out, int out_off, int out_bstride, int out_nstride,
                            int out_hstride, int out_wstride)
{
    int PQ = P * Q;
    TEENY_UNROLL
    for (int r = 0; r < WPT_M / 4; r++)
        TEENY_UNROLL
        for (int i = 0; i < 4; i++) {
            int m = m0 + r * THREADS_M * 4 + tm * 4 + i, ok = m < M;
            int mm = ok ? m : 0, b = mm / PQ, pq = mm - b * PQ, p = pq / Q, q = pq - p * Q;
            int base = out_off + b * out_bstride + p * out_hstride + q * out_wstride + g * N * out_nstride;
            TEENY_UNROLL
            for (int j = 0; j < WPT_N; j++) {
                int n = n0 + (j / 4) * THREADS_N * 4 + tn * 4 + (j & 3);
                acc[(4 * r + i) * WPT_N + j] = ok && n < N ? out[base + n * out_nstride] : 0.0f;
            }
        }
}

/* Write the micro-tile: element (m, n) goes to
 *   out[out_off + b*out_bstride + (g*N + n)*out_nstride + p*out_hstride + q*out_wstride]
 * with m = (b*P + p)*Q + q, through the epilogue
 *   act(v * scale[c] + shift[c] + bias[c]), c = g*N + n (flags say which exist).
 * vec_out (set by the host when out_wstride == 1, out_hstride == Q, P*Q,
 * out_off and the strides are multiples of 4) stores float4s along m. */
TEENY_INLINE void gemm_store(const float *acc, int tm, int tn, int m0, int n0, int g, int M, int N, int P, int Q,
                       __global float *out, int out_off, int out_bstride, int out_nstride, int out_hstride,
                       int out_wstride, __global const float *bias, int bias_off, __global const float *scale,
                       int scale_off, __global const float *shift, int shift_off, int epi, int act, int vec_out)
{
    int PQ = P * Q;
    float sc[WPT_N], sh[WPT_N];
    int nn[WPT_N];
    TEENY_UNROLL
    for (int j = 0; j < WPT_N; j++) {
        int n = n0 + (j / 4) * THREADS_N * 4 + tn * 4 + (j & 3);
        float2 e = n < N ? conv_epilogue(epi, g * N + n, bias, bias_off, scale, scale_off, shift, shift_off)
                         : (float2)(1.0f, 0.0f);
        nn[j] = n;
        sc[j] = e.x;
        sh[j] = e.y;
    }
    TEENY_UNROLL
    for (int r = 0; r < WPT_M / 4; r++) {
        int mb = m0 + r * THREADS_M * 4 + tm * 4;
        if (vec_out && mb + 3 < M) {
            int b = mb / PQ;
            int base = out_off + b * out_bstride + (mb - b * PQ) + g * N * out_nstride;
            TEENY_UNROLL
            for (int j = 0; j < WPT_N; j++) {
                if (nn[j] >= N)
                    continue;
                float4 v;
                v.x = conv_act(act, acc[(4 * r) * WPT_N + j] * sc[j] + sh[j]);
                v.y = conv_act(act, acc[(4 * r + 1) * WPT_N + j] * sc[j] + sh[j]);
                v.z = conv_act(act, acc[(4 * r + 2) * WPT_N + j] * sc[j] + sh[j]);
                v.w = conv_act(act, acc[(4 * r + 3) * WPT_N + j] * sc[j] + sh[j]);
                *(__global float4 *)(out + base + nn[j] * out_nstride) = v;
            }
        } else {
            TEENY_UNROLL
            for (int i = 0; i < 4; i++) {
                int m = mb + i;
                if (m >= M)
                    continue;
                int b = m / PQ, pq = m - b * PQ, p = pq / Q, q = pq - p * Q;
                int base = out_off + b * out_bstride + p * out_hstride + q * out_wstride + g * N * out_nstride;
                TEENY_UNROLL
                for (int j = 0; j < WPT_N; j++)
                    if (nn[j] < N)
                        out[base + nn[j] * out_nstride] =
                            conv_act(act, acc[(4 * r + i) * WPT_N + j] * sc[j] + sh[j]);
            }
        }
    }
}
#endif

/* Weight (B) operand loads shared by conv_gemm and conv_gemm_1x1: item
 * (bk, bn) loads k = k0 + bk for columns n0 + bn + i*B_TN, k-adjacent
 * items reading neighbouring weights. */
#define GEMM_B_SETUP()                                                                                      \
    const int bk = tid % TILE_K, bn = tid / TILE_K;                                                         \
    const int b_base = w_off + g * w_gstride + (n0 + bn) * w_nstride, b_nstep = B_TN * w_nstride;          \
    const int b_count = bn < TILE_N ? (N - n0 - bn + B_TN - 1) / B_TN : 0; /* its columns inside N */     \
    conv_idx b_at = idx_make(bk + k_begin, Kh, Kw), b_step = idx_make(TILE_K, Kh, Kw)

#define GEMM_B_LOAD(rb)                                                                                     \
    do {                                                                                                    \
        int koff = b_base + b_at.c * w_cstride + b_at.h * w_hstride + b_at.w * w_wstride;                   \
        for (int i = 0; i < B_NN; i++)                                                                      \
            (rb)[i] = b_at.c < Kc && i < b_count ? w[koff + i * b_nstep] : 0.0f;                            \
        b_at = idx_add(b_at, b_step, Kh, Kw);                                                               \
    } while (0)

/* The input gradient's stride phases in one conv_gemm_gather launch
 * (conv2d_exec.c packs the int16 argument `phase`): grid index z is phase
 * (rh, rw) = (z / PHASE_COLS, z % PHASE_COLS), the dx positions
 * (rh + p*s_h, rw + q*s_w). Per axis the phase sees the taps k0 + i*step
 * (step = s / gcd(s, d)) of the count that fit the kernel, whose dy row is
 * p + c - i*d/gcd(s, d) with c = (r + pad - k0*d) / s; a phase no tap
 * reaches has Kc = 0 (dx = 0). PHASE_COLS 0: one GEMM as the arguments
 * say (the forward, an unstrided input gradient, one phase per launch).
 * Built only with -DCONV_PHASES (the host asks for it in merged launches),
 * so the other GEMMs keep their arguments as constants. */
#define PHASE_COLS(v) (v).s0
#define PHASE_GEOMETRY(v)                                                                                   \
    const int s_h = (v).s1, s_w = (v).s2, p_h = (v).s3, p_w = (v).s4, d_h = (v).s5, d_w = (v).s6,          \
              KH = (v).s7, KW = (v).s8, H = (v).s9, W = (v).sa, step_h = (v).sb, step_w = (v).sc, B = (v).sd

/* Phase z's GEMM from the launch's: its rows (M, P, Q), taps (Kh, Kw,
 * Kc 0 where none), dy offsets (c_h, c_w), weight taps and dx positions,
 * and the launch's k range cut to its K. */
TEENY_INLINE void conv_phase_job(int16 phase, int z, int *M, int *P, int *Q, int *Kc, int *Kh, int *Kw, int *c_h,
                                 int *c_w, int *w_off, int *w_hstride, int *w_wstride, int *out_off, int *k_end)
{
    PHASE_GEOMETRY(phase);
    const int rh = z / PHASE_COLS(phase), rw = z - rh * PHASE_COLS(phase);
    const int3 th = conv_phase_axis(rh, s_h, p_h, d_h, KH, step_h);
    const int3 tw = conv_phase_axis(rw, s_w, p_w, d_w, KW, step_w);
    *P = (H - rh + s_h - 1) / s_h;
    *Q = (W - rw + s_w - 1) / s_w;
    *M = B * *P * *Q;
    *Kc = th.y && tw.y ? *Kc : 0;
    *Kh = max(th.y, 1);
    *Kw = max(tw.y, 1);
    *c_h = th.z;
    *c_w = tw.z;
    *w_off += th.x * KW + tw.x;
    *w_hstride = step_h * KW;
    *w_wstride = step_w;
    *out_off += rh * W + rw;
    *k_end = min(*k_end, *Kc * *Kh * *Kw);
}

/* Grid (ceil(M/TILE_M)*GEMM_WG, ceil(N/TILE_N)*G, phases), work-group
 * (GEMM_WG): group (i, j, z) computes rows [i*TILE_M, +TILE_M) and columns
 * [(j % n_tiles)*TILE_N, +TILE_N) of group j / n_tiles (of stride phase z
 * where PHASE_COLS(phase) > 0: M is then the largest phase's, and a
 * group past its phase's rows computes and stores nothing); each item a
 * WPT_M x WPT_N micro-tile (see the banner for the gather).
 * No kernel name here is a prefix of another: oclgrind 21.10 charges a
 * kernel for the __local arrays of every kernel whose name starts with its
 * own, so a plain "conv_gemm" was refused on 32 KiB of local memory for
 * the tiles of conv_gemm_1x1 and conv_gemm_dw too. */
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1)))
void conv_gemm_gather(__global const float *restrict src, int src_off, __global const float *restrict w, int w_off,
               __global float *restrict out, int out_off, int M, int N, int P, int Q, int Kc, int Kh, int Kw,
               int src_bstride, int src_cstride, int Hs, int Ws, int a_h, int c_h, int e_h, int a_w, int c_w,
               int e_w, int w_gstride, int w_nstride, int w_cstride, int w_hstride, int w_wstride,
               int out_bstride, int out_nstride, int out_hstride, int out_wstride,
               __global const float *bias, int bias_off, __global const float *scale, int scale_off,
               __global const float *shift, int shift_off, int epi, int act, int vec_out, int k_begin, int k_end,
               int seg, int16 phase)
{
    __local float4 As[2][TILE_K * LDA / 4];
    __local float4 Bs[2][TILE_K * LDB / 4];
    GEMM_XCHG_LOCAL
    const int tid = get_local_id(0);
    const int n_tiles = (N + TILE_N - 1) / TILE_N;
    const int g = get_group_id(1) / n_tiles;
    const int n0 = (get_group_id(1) - g * n_tiles) * TILE_N;
    const int m0 = get_group_id(0) * TILE_M;
#ifdef CONV_PHASES /* only the merged launches' program: the phase search cost the forward GEMMs 5% (H200) */
    if (PHASE_COLS(phase) > 0)
        conv_phase_job(phase, get_group_id(2), &M, &P, &Q, &Kc, &Kh, &Kw, &c_h, &c_w, &w_off, &w_hstride,
                       &w_wstride, &out_off, &k_end);
#else
    (void)phase;
#endif
    const int PQ = P * Q;

    /* this item's A rows: the source offset of tap (0, 0) and its row and
     * column; a row past M gets a row far below 0, so every tap misses.
     * Offsets are unsigned: a padded row's partial sums may wrap, the
     * offsets of taps inside the source never do. */
    const int am = tid % A_TM, ak = tid / A_TM;
    uint a_off[A_NM];
    int a_h0[A_NM], a_w0[A_NM];
    for (int i = 0; i < A_NM; i++) {
        int m = m0 + am + i * A_TM, ok = m < M;
        int mm = ok ? m : 0, b = mm / PQ, pq = mm - b * PQ, p = pq / Q, q = pq - p * Q;
        a_h0[i] = ok ? p * a_h + c_h : -(1 << 30);
        a_w0[i] = q * a_w + c_w;
        a_off[i] = (uint)(src_off + b * src_bstride + g * Kc * src_cstride) + (uint)a_h0[i] * (uint)Ws + (uint)a_w0[i];
    }
    conv_idx a_at = idx_make(ak + k_begin, Kh, Kw), a_step = idx_make(A_TK, Kh, Kw);
    GEMM_B_SETUP();

    float ra[A_NM * A_NK], rb[B_NN];
#define LOAD_A()                                                                                            \
    for (int j = 0; j < A_NK; j++) {                                                                        \
        int dh = a_at.h * e_h, dw = a_at.w * e_w, kin = a_at.c < Kc;                                        \
        uint koff = (uint)(a_at.c * src_cstride) + (uint)dh * (uint)Ws + (uint)dw;                          \
        for (int i = 0; i < A_NM; i++) {                                                                    \
            int ok = kin && (uint)(a_h0[i] + dh) < (uint)Hs && (uint)(a_w0[i] + dw) < (uint)Ws;             \
            ra[j * A_NM + i] = ok ? src[a_off[i] + koff] : 0.0f;                                            \
        }                                                                                                   \
        a_at = idx_add(a_at, a_step, Kh, Kw);                                                               \
    }

    float acc[WPT_M * WPT_N];
    for (int i = 0; i < WPT_M * WPT_N; i++)
        acc[i] = 0.0f;
    const int tm = tid % THREADS_M, tn = tid / THREADS_M;
    if (!(seg & CONV_SEG_FIRST))
        gemm_load(acc, tm, tn, m0, n0, g, M, N, P, Q, out, out_off, out_bstride, out_nstride, out_hstride,
                  out_wstride);
    /* a phase whose rows end before this group's (or whose k range ends
     * before this launch's) stores what it holds */
    const int k_tiles = m0 < M && k_end > k_begin ? (k_end - k_begin + TILE_K - 1) / TILE_K : 0;
    if (k_tiles > 0) {
        LOAD_A();
        GEMM_B_LOAD(rb);
    }
    for (int t = 0; t < k_tiles; t++) {
        __local float *as = (__local float *)As[t & 1], *bs = (__local float *)Bs[t & 1];
        for (int j = 0; j < A_NK; j++)
            for (int i = 0; i < A_NM; i++)
                as[(ak + j * A_TK) * LDA + am + i * A_TM] = TF32_STAGE(ra[j * A_NM + i]);
        for (int i = 0; i < B_NN; i++)
            if (B_TN * B_NN == TILE_N || bn + i * B_TN < TILE_N) /* a constant but for thin tiles */
                bs[bk * LDB + bn + i * B_TN] = TF32_STAGE(rb[i]);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t + 1 < k_tiles) {
            LOAD_A();
            GEMM_B_LOAD(rb);
        }
        gemm_micro(As[t & 1], Bs[t & 1], tm, tn, acc GEMM_XCHG_ARG);
    }
#undef LOAD_A
    gemm_store(acc, tm, tn, m0, n0, g, M, N, P, Q, out, out_off, out_bstride, out_nstride, out_hstride, out_wstride,
               bias, bias_off, scale, scale_off, shift, shift_off, seg & CONV_SEG_LAST ? epi : 0,
               seg & CONV_SEG_LAST ? act : 0, vec_out);
}

/* The plain GEMM of a 1x1, stride-1, unpadded convolution (Kh = Kw = 1,
 * source [B, *, P*Q] with P*Q, src_off and the strides multiples of 4):
 * A is read as float4s along m. Same arguments, grid and work-group as
 * conv_gemm_gather (the gather arguments are unused). */
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1)))
void conv_gemm_1x1(__global const float *restrict src, int src_off, __global const float *restrict w, int w_off,
                   __global float *restrict out, int out_off, int M, int N, int P, int Q, int Kc, int Kh, int Kw,
                   int src_bstride, int src_cstride, int Hs, int Ws, int a_h, int c_h, int e_h, int a_w, int c_w,
                   int e_w, int w_gstride, int w_nstride, int w_cstride, int w_hstride, int w_wstride,
                   int out_bstride, int out_nstride, int out_hstride, int out_wstride,
                   __global const float *bias, int bias_off, __global const float *scale, int scale_off,
                   __global const float *shift, int shift_off, int epi, int act, int vec_out, int k_begin,
                   int k_end, int seg, int16 phase)
{
    __local float4 As[2][TILE_K * LDA / 4];
    __local float4 Bs[2][TILE_K * LDB / 4];
    GEMM_XCHG_LOCAL
    const int tid = get_local_id(0);
    const int n_tiles = (N + TILE_N - 1) / TILE_N;
    const int g = get_group_id(1) / n_tiles;
    const int n0 = (get_group_id(1) - g * n_tiles) * TILE_N;
    const int m0 = get_group_id(0) * TILE_M;
    const int K = Kc, PQ = P * Q;
    (void)Hs; (void)Ws; (void)a_h; (void)c_h; (void)e_h; (void)a_w; (void)c_w; (void)e_w; (void)phase;

    const int am = tid % A4_TM, ak = tid / A4_TM;
    int a_base[A4_NM];
    for (int i = 0; i < A4_NM; i++) {
        int m = m0 + (am + i * A4_TM) * 4, b = m / PQ;
        a_base[i] = m < M ? src_off + b * src_bstride + g * Kc * src_cstride + (m - b * PQ) : -1;
    }
    int a_k = ak + k_begin;
    GEMM_B_SETUP();

    float4 ra[A4_NM * A4_NK];
    float rb[B_NN];
#define LOAD_A()                                                                                            \
    for (int j = 0; j < A4_NK; j++) {                                                                       \
        int k = a_k + j * A4_TK;                                                                            \
        for (int i = 0; i < A4_NM; i++)                                                                     \
            ra[j * A4_NM + i] = k < K && a_base[i] >= 0                                                     \
                                    ? *(__global const float4 *)(src + a_base[i] + k * src_cstride)         \
                                    : (float4)(0.0f);                                                       \
    }                                                                                                       \
    a_k += TILE_K;

    float acc[WPT_M * WPT_N];
    for (int i = 0; i < WPT_M * WPT_N; i++)
        acc[i] = 0.0f;
    const int tm = tid % THREADS_M, tn = tid / THREADS_M;
    if (!(seg & CONV_SEG_FIRST))
        gemm_load(acc, tm, tn, m0, n0, g, M, N, P, Q, out, out_off, out_bstride, out_nstride, out_hstride,
                  out_wstride);
    const int k_tiles = (k_end - k_begin + TILE_K - 1) / TILE_K;
    if (k_tiles > 0) {
        LOAD_A();
        GEMM_B_LOAD(rb);
    }
    for (int t = 0; t < k_tiles; t++) {
        __local float4 *as = As[t & 1];
        __local float *bs = (__local float *)Bs[t & 1];
        for (int j = 0; j < A4_NK; j++)
            for (int i = 0; i < A4_NM; i++)
                as[(ak + j * A4_TK) * (LDA / 4) + am + i * A4_TM] = TF32_STAGE4(ra[j * A4_NM + i]);
        for (int i = 0; i < B_NN; i++)
            if (B_TN * B_NN == TILE_N || bn + i * B_TN < TILE_N) /* a constant but for thin tiles */
                bs[bk * LDB + bn + i * B_TN] = TF32_STAGE(rb[i]);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t + 1 < k_tiles) {
            LOAD_A();
            GEMM_B_LOAD(rb);
        }
        gemm_micro(As[t & 1], Bs[t & 1], tm, tn, acc GEMM_XCHG_ARG);
    }
#undef LOAD_A
    gemm_store(acc, tm, tn, m0, n0, g, M, N, P, Q, out, out_off, out_bstride, out_nstride, out_hstride, out_wstride,
               bias, bias_off, scale, scale_off, shift, shift_off, seg & CONV_SEG_LAST ? epi : 0,
               seg & CONV_SEG_LAST ? act : 0, vec_out);
}

/* Weight gradient as a GEMM per group: out[m, n] = sum_r X[r, m] * DY[r, n]
 * with m = (c, kh, kw) in [0, Cig*KH*KW), n an output channel of the group
 * and r = (b, oh, ow) in chunk z = [z*r_chunk, +r_chunk) of B*OH*OW:
 *   X[r, m] = x[b, g*Cig + c, oh*s_h - p_h + kh*d_h, ow*s_w - p_w + kw*d_w]
 *   DY[r, n] = dy[b, g*Cog + n, oh, ow].
 * Grid (ceil(M/TILE_M)*GEMM_WG, ceil(N/TILE_N)*G, Z), work-group (GEMM_WG).
 * Item (tid % TILE_K) loads r-adjacent elements (coalesced along ow).
 * Chunk z's partial goes to out[out_off + z*out_zstride + (g*N + n)*M + m]
 * (= dw itself when Z == 1). */
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1)))
void conv_gemm_dw(__global const float *restrict x, int x_off, __global const float *restrict dy, int dy_off,
                  __global float *restrict out, int out_off, int out_zstride, int M, int N, int Cig, int KH, int KW,
                  int Cin, int H, int W, int Cout, int OH, int OW, int s_h, int s_w, int p_h, int p_w, int d_h,
                  int d_w, int R, int r_chunk, int vec_out)
{
    __local float4 As[2][TILE_K * LDA / 4];
    __local float4 Bs[2][TILE_K * LDB / 4];
    GEMM_XCHG_LOCAL
    const int tid = get_local_id(0);
    const int n_tiles = (N + TILE_N - 1) / TILE_N;
    const int g = get_group_id(1) / n_tiles;
    const int n0 = (get_group_id(1) - g * n_tiles) * TILE_N;
    const int m0 = get_group_id(0) * TILE_M;
    const int z = get_group_id(2);
    const int r_begin = z * r_chunk, r_end = min(R, r_begin + r_chunk);
    const int HW = H * W, OHW = OH * OW, KHW = KH * KW;

    const int rk = tid % TILE_K, rx = tid / TILE_K;
    int m_coff[R_NM], m_h[R_NM], m_w[R_NM];
    for (int i = 0; i < R_NM; i++) {
        int m = m0 + rx + i * R_TX, c = m / KHW, t = m - c * KHW, kh = t / KW, kw = t - kh * KW;
        m_coff[i] = m < M ? (g * Cig + c) * HW : -1;
        m_h[i] = kh * d_h - p_h;
        m_w[i] = kw * d_w - p_w;
    }
    int n_off[R_NN];
    for (int i = 0; i < R_NN; i++) {
        int n = n0 + rx + i * R_TX;
        n_off[i] = n < N && rx + i * R_TX < TILE_N ? (g * N + n) * OHW : -1;
    }
    /* r = (b, oh, ow) as a (c, h, w) index of extents (*, OH, OW) */
    conv_idx r_at = idx_make(r_begin + rk, OH, OW), r_step = idx_make(TILE_K, OH, OW);
    int r = r_begin + rk;

    float ra[R_NM], rb[R_NN];
#define LOAD_AB()                                                                                           \
    do {                                                                                                    \
        int ok = r < r_end, ih = r_at.h * s_h, iw = r_at.w * s_w;                                           \
        int xb = x_off + r_at.c * Cin * HW, yb = dy_off + r_at.c * Cout * OHW + r_at.h * OW + r_at.w;      \
        for (int i = 0; i < R_NM; i++) {                                                                    \
            int hh = ih + m_h[i], ww = iw + m_w[i];                                                         \
            ra[i] = ok && m_coff[i] >= 0 && (uint)hh < (uint)H && (uint)ww < (uint)W                        \
                        ? x[xb + m_coff[i] + hh * W + ww] : 0.0f;                                           \
        }                                                                                                   \
        for (int i = 0; i < R_NN; i++)                                                                      \
            rb[i] = ok && n_off[i] >= 0 ? dy[yb + n_off[i]] : 0.0f;                                        \
        r_at = idx_add(r_at, r_step, OH, OW);                                                               \
        r += TILE_K;                                                                                        \
    } while (0)

    float acc[WPT_M * WPT_N];
    for (int i = 0; i < WPT_M * WPT_N; i++)
        acc[i] = 0.0f;
    const int tm = tid % THREADS_M, tn = tid / THREADS_M;
    const int k_tiles = r_end > r_begin ? (r_end - r_begin + TILE_K - 1) / TILE_K : 0;
    if (k_tiles > 0)
        LOAD_AB();
    for (int t = 0; t < k_tiles; t++) {
        __local float *as = (__local float *)As[t & 1], *bs = (__local float *)Bs[t & 1];
        for (int i = 0; i < R_NM; i++)
            as[rk * LDA + rx + i * R_TX] = TF32_STAGE(ra[i]);
        for (int i = 0; i < R_NN; i++)
            if (R_TX * R_NN == TILE_N || rx + i * R_TX < TILE_N)
                bs[rk * LDB + rx + i * R_TX] = TF32_STAGE(rb[i]);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t + 1 < k_tiles)
            LOAD_AB();
        gemm_micro(As[t & 1], Bs[t & 1], tm, tn, acc GEMM_XCHG_ARG);
    }
#undef LOAD_AB
    gemm_store(acc, tm, tn, m0, n0, g, M, N, 1, M, out, out_off + z * out_zstride, 0, M, 0, 1, x, 0, x, 0, x, 0, 0,
               0, vec_out);
}

/* ---- CPU GEMM (no local memory; tuning entries with cpu_rows > 0) ----
 * On CPU runtimes (PoCL) a work-group is a loop over its items and
 * barriers split it, so this variant has neither: each item computes
 * CPU_RM rows x 16 columns of out[m, n] (the conv_gemm_gather problem: rows m =
 * (b, p, q) gathered from src, k = (c, kh, kw)) in float16 registers,
 * reading B from a packed copy made by conv_pack_b:
 *     bp[(((g*Kh + kh)*Kw + kw)*Kc + c)*Np + n]   (n < Np, zero past N)
 * The loop runs over taps (kh, kw), whose bounds checks it hoists, then
 * channels c (a fixed order, so results are deterministic). The source
 * of group g starts at src_gstride*g. The weight gradient uses the same
 * kernel with the roles of batch and channel swapped (conv2d.c). */
#ifndef CPU_RM
#define CPU_RM 6
#endif
/* float16 vectors of columns per item: 2 where the device's native float
 * vector is 16 wide (AVX-512: 12 accumulators in its 32 registers) */
#ifndef CPU_NV
#define CPU_NV 1
#endif
#define CPU_NC (16 * CPU_NV) /* columns per item */
/* float16 values pass through builtins here (vload16, TEENY_MAD: fma or
 * mad, vstore16). On an x86 CPU without AVX-512, clang may warn that such
 * a call changes the ABI; the conformance suite counts build warnings. An
 * operator-only form avoided the calls but crashed oclgrind 21.10's
 * uninitialized-value plugin, so the calls stay. */

/* Grid (round_up(Kc, 16), G*Kh*Kw), work-group (16, 1): item (c, r)
 * writes the Np columns of packed row r*Kc + c (the B operand above) from
 * w[w_off + g*w_gstride + n*w_nstride + c*w_cstride + kh*w_hstride +
 * kw*w_wstride], r = (g*Kh + kh)*Kw + kw. */
__kernel __attribute__((reqd_work_group_size(16, 1, 1)))
void conv_pack_b(__global const float *restrict w, int w_off, int w_gstride, int w_nstride, int w_cstride,
                 int w_hstride, int w_wstride, int N, int Np, int Kc, int Kh, int Kw, __global float *restrict bp,
                 int bp_off)
{
    const int c = get_global_id(0), r = get_global_id(1);
    if (c >= Kc)
        return;
    const int kw = r % Kw, t = r / Kw, kh = t % Kh, g = t / Kh;
    __global const float *src = w + w_off + g * w_gstride + c * w_cstride + kh * w_hstride + kw * w_wstride;
    __global float *dst = bp + bp_off + (r * Kc + c) * Np;
    for (int n = 0; n < N; n++)
        dst[n] = src[n * w_nstride];
    for (int n = N; n < Np; n++)
        dst[n] = 0.0f;
}

/* Where row m of out starts for group g: out[conv_cpu_row(...) + n*out_nstride]. */
TEENY_INLINE int conv_cpu_row(int m, int PQ, int Q, int g, int N, int out_off, int out_bstride, int out_nstride,
                              int out_hstride, int out_wstride)
{
    int b = m / PQ, pq = m - b * PQ, p = pq / Q, q = pq - p * Q;
    return out_off + b * out_bstride + p * out_hstride + q * out_wstride + g * N * out_nstride;
}

/* Grid (round_up(ceil(M/CPU_RM), CPU_WG), (Np/16)*G, Z), work-group
 * (CPU_WG, 1, 1): item (i, j, z) sums k range [k_begin + z*k_chunk,
 * + k_chunk) of the flattened k = (tap, channel), in that order, into
 * out + z*out_zstride (see the banner for seg). */
__kernel void conv_gemm_cpu(__global const float *restrict src, int src_off, __global const float *restrict bp,
                            int bp_off, int Np, __global float *restrict out, int out_off, int M, int N, int P, int Q,
                            int Kc, int Kh, int Kw, int src_bstride, int src_gstride, int src_cstride, int Hs, int Ws,
                            int a_h, int c_h, int e_h, int a_w, int c_w, int e_w, int out_bstride, int out_nstride,
                            int out_hstride, int out_wstride, __global const float *bias, int bias_off,
                            __global const float *scale, int scale_off, __global const float *shift, int shift_off,
                            int epi, int act, int k_begin, int k_chunk, int out_zstride, int seg)
{
    const int n_tiles = Np / CPU_NC;
    const int g = get_global_id(1) / n_tiles;
    const int n0 = (get_global_id(1) - g * n_tiles) * CPU_NC;
    const int m0 = get_global_id(0) * CPU_RM;
    const int PQ = P * Q, KT = Kh * Kw, KK = KT * Kc;
    const int kb = min(KK, k_begin + (int)get_global_id(2) * k_chunk), ke = min(KK, kb + k_chunk);
    out_off += (int)get_global_id(2) * out_zstride;
    if (m0 >= M)
        return;

    int h0[CPU_RM], w0[CPU_RM], base[CPU_RM];
TEENY_UNROLL
    for (int i = 0; i < CPU_RM; i++) {
        int m = m0 + i, ok = m < M;
        int mm = ok ? m : 0, b = mm / PQ, pq = mm - b * PQ, p = pq / Q, q = pq - p * Q;
        h0[i] = ok ? p * a_h + c_h : -(1 << 30);
        w0[i] = q * a_w + c_w;
        base[i] = src_off + b * src_bstride + g * src_gstride;
    }
    float16 acc[CPU_RM * CPU_NV]; /* row i, columns n0 + 16*v: acc[v*CPU_RM + i] */
TEENY_UNROLL
    for (int i = 0; i < CPU_RM * CPU_NV; i++)
        acc[i] = (float16)(0.0f);
    if (!(seg & CONV_SEG_FIRST))
        for (int i = 0; i < CPU_RM && m0 + i < M; i++) {
            __global const float *o = out + conv_cpu_row(m0 + i, PQ, Q, g, N, out_off, out_bstride, out_nstride,
                                                         out_hstride, out_wstride);
            float v[CPU_NC];
            for (int j = 0; j < CPU_NC; j++)
                v[j] = n0 + j < N ? o[(n0 + j) * out_nstride] : 0.0f;
            for (int u = 0; u < CPU_NV; u++)
                acc[u * CPU_RM + i] = vload16(u, v);
        }
    __global const float *bg = bp + bp_off + g * KT * Kc * Np + n0;

    for (int t = kb < ke ? kb / Kc : KT; t < KT && t * Kc < ke; t++) {
        const int c_lo = max(kb - t * Kc, 0), c_hi = min(ke - t * Kc, Kc);
        int kh = t / Kw, kw = t - kh * Kw, dh = kh * e_h, dw = kw * e_w;
        int off[CPU_RM], ok[CPU_RM], any = 0, all = 1;
TEENY_UNROLL
        for (int i = 0; i < CPU_RM; i++) {
            int hh = h0[i] + dh, ww = w0[i] + dw;
            ok[i] = (uint)hh < (uint)Hs && (uint)ww < (uint)Ws;
            /* a missed tap reads its row's first element (always inside) */
            off[i] = ok[i] ? (int)((uint)base[i] + (uint)hh * (uint)Ws + (uint)ww) : base[i];
            any |= ok[i];
            all &= ok[i];
        }
        if (!any)
            continue;
        __global const float *bk = bg + t * Kc * Np;
        if (all) {
            for (int c = c_lo; c < c_hi; c++) {
                float16 b[CPU_NV];
TEENY_UNROLL
                for (int v = 0; v < CPU_NV; v++)
                    b[v] = vload16(v, bk + c * Np);
                int co = c * src_cstride;
TEENY_UNROLL
                for (int i = 0; i < CPU_RM; i++) {
                    float16 a = (float16)(src[off[i] + co]);
TEENY_UNROLL
                    for (int v = 0; v < CPU_NV; v++)
                        acc[v * CPU_RM + i] = TEENY_MAD(a, b[v], acc[v * CPU_RM + i]);
                }
            }
        } else {
            for (int c = c_lo; c < c_hi; c++) {
                float16 b[CPU_NV];
TEENY_UNROLL
                for (int v = 0; v < CPU_NV; v++)
                    b[v] = vload16(v, bk + c * Np);
                int co = c * src_cstride;
TEENY_UNROLL
                for (int i = 0; i < CPU_RM; i++) {
                    float a = src[off[i] + co];
                    float16 av = (float16)(ok[i] ? a : 0.0f);
TEENY_UNROLL
                    for (int v = 0; v < CPU_NV; v++)
                        acc[v * CPU_RM + i] = TEENY_MAD(av, b[v], acc[v * CPU_RM + i]);
                }
            }
        }
    }

    float sc[CPU_NC], sh[CPU_NC];
    for (int j = 0; j < CPU_NC; j++) {
        int n = n0 + j;
        float2 e = n < N ? conv_epilogue(epi, g * N + n, bias, bias_off, scale, scale_off, shift, shift_off)
                         : (float2)(1.0f, 0.0f);
        sc[j] = e.x;
        sh[j] = e.y;
    }
TEENY_UNROLL
    for (int i = 0; i < CPU_RM; i++) {
        int m = m0 + i;
        if (m >= M)
            break;
        float v[CPU_NC];
TEENY_UNROLL
        for (int u = 0; u < CPU_NV; u++)
            vstore16(acc[u * CPU_RM + i], u, v);
        __global float *o = out + conv_cpu_row(m, PQ, Q, g, N, out_off, out_bstride, out_nstride, out_hstride,
                                               out_wstride);
        if (seg & CONV_SEG_LAST)
            for (int j = 0; j < CPU_NC && n0 + j < N; j++)
                o[(n0 + j) * out_nstride] = conv_act(act, v[j] * sc[j] + sh[j]);
        else
            for (int j = 0; j < CPU_NC && n0 + j < N; j++)
                o[(n0 + j) * out_nstride] = v[j];
    }
}

/* ---- depthwise (one input channel per group) ---- */

/* The depthwise kernels' geometry, one int16 argument (the host packs it
 * in the same order: conv2d_internal.h dw_geometry): batch, input channels
 * and plane, the channel multiplier (Cout / Cin), the output plane, the
 * kernel, and per axis (h, w) stride, padding and dilation; slot 15 holds
 * the groups (= Cin). DW_GEOMETRY(g) names them as the kernels' locals. */
#define DW_GEOMETRY(g)                                                                                      \
    const int B = (g).s0, Cin = (g).s1, H = (g).s2, W = (g).s3, mult = (g).s4, OH = (g).s5, OW = (g).s6, \
              KH = (g).s7, KW = (g).s8, s_h = (g).s9, s_w = (g).sa, p_h = (g).sb, p_w = (g).sc, d_h = (g).sd, \
              d_w = (g).se

/* Values iw0 + p * dc (p < 6) of one input row, from r = row + iw0: value
 * p where the row is inside the plane (in) and so is column p (bit p of
 * cin), else 0. V4 (a constant; dc 1): values 1-4 as one float4, the
 * caller having checked that they lie inside the row and 16-byte aligned.
 * dw_fwd_rows3 and dw_bwd3_unit load their windows with it. */
TEENY_INLINE void dw_row6(__global const float *r, int in, int cin, int dc, const int V4, float *v)
{
    if (V4) {
        const float4 q = in ? *(__global const float4 *)(r + 1) : (float4)(0.0f);
        v[0] = in && cin & 1 ? r[0] : 0.0f;
        v[1] = q.x;
        v[2] = q.y;
        v[3] = q.z;
        v[4] = q.w;
        v[5] = in && cin & 32 ? r[5] : 0.0f;
    } else {
        TEENY_UNROLL
        for (int p = 0; p < 6; p++)
            v[p] = in && cin >> p & 1 ? r[p * dc] : 0.0f;
    }
}

/* dw_fwd_rows3's sums of input row j (a constant where it is inlined):
 * its values v[0 .. NC + 1] into every output row r < nr of the strip
 * that reads it (tap kh = j - r * SH), columns q < NC, taps kw in order,
 * those whose input column lies outside the row (bit q + kw of cin)
 * skipped. */
TEENY_INLINE void dw_fwd_row_sums(const float *v, const float *wv, const int j, const int SH, int nr, const int NC,
                                  int cin, float *acc)
{
    TEENY_UNROLL
    for (int r = 0; r < DW_ROWS; r++) {
        const int kh = j - r * SH;
        if (kh < 0 || kh > 2 || r >= nr)
            continue;
        TEENY_UNROLL
        for (int q = 0; q < 4; q++) {
            TEENY_UNROLL
            for (int kw = 0; kw < 3; kw++)
                if (q < NC && cin >> (q + kw) & 1)
                    acc[q * DW_ROWS + r] = TEENY_MAD(v[q + kw], wv[kh * 3 + kw], acc[q * DW_ROWS + r]);
        }
    }
}

/* dwconv_fwd's path for 3x3 kernels with dilation 1 down the rows and
 * row stride SH (1 or 2: a constant where it is inlined, so the unrolled
 * loops resolve every tap test at compile time). The item walks its
 * strip's input rows once, (nr - 1) * SH + 3 of them, loads each row's
 * values once and adds them into every output row r that reads that row
 * (input row j is tap kh = j - r * SH of row r): 3 loads per input row
 * instead of 3 per tap and output row; at row stride 1 it loads all
 * DW_ROWS + 2 rows before the first sum, so that every load of the strip
 * is in flight at once. Per output the taps arrive in the general path's
 * order (kh, then kw), so both paths give the same bits.
 * NC (a constant, 1, 2 or 4): output columns per item, column q's sums
 * in acc[q * DW_ROWS + r]; with 2 or 4 (column stride and dilation 1, the
 * plan's rule) the NC + 2 input values of a row serve the NC columns'
 * taps (4 loads for 2 outputs, 6 for 4, instead of 3 per output), the
 * taps again in (kh, kw) order: the same bits as one column per item.
 * V4 (a constant): with NC 4, the row's values 1-4 as one float4, the
 * caller having checked that they lie inside the row and 16-byte aligned
 * (dwconv_fwd: 3 loads per input row for 4 outputs). */
TEENY_INLINE void dw_fwd_rows3(__global const float *xc, __global const float *wc, int wstep, int ih0, int iw0,
                               int H, int W, int d_w, int nr, const int SH, const int NC, const int V4, float *acc)
{
    float wv[9];
    TEENY_UNROLL
    for (int t = 0; t < 9; t++)
        wv[t] = wc[t * wstep];
    const int dc = NC == 1 ? d_w : 1;
    int cin = 0; /* bit p: input column iw0 + p * dc inside the row (p < NC + 2; a mask, not an array, which
                  * a compiler might place in memory) */
    TEENY_UNROLL
    for (int p = 0; p < 6; p++)
        cin |= (p < NC + 2 && (uint)(iw0 + p * dc) < (uint)W) << p;
    if (NC == 4 && V4)
        cin |= 0x1e; /* what the caller checked, for the compiler: the taps of columns 1-4 need no test */
    const int n_in = (nr - 1) * SH + 3;
    if (SH == 1) {
        /* every input row's values first, then the sums: the loads carry no branch between them, so all of
         * them can be in flight at once (a row's loads under its own branch waited on the previous row's
         * sums: one memory round trip per input row) */
        float v[(DW_ROWS + 2) * 6];
        int rin = 0; /* bit j: input row ih0 + j is one of the strip's and inside the plane */
        TEENY_UNROLL
        for (int j = 0; j < DW_ROWS + 2; j++) {
            const int ih = ih0 + j, in = j < n_in && (uint)ih < (uint)H;
            rin |= in << j;
            dw_row6(xc + ih * W + iw0, in, cin, dc, NC == 4 && V4, v + j * 6);
        }
        TEENY_UNROLL
        for (int j = 0; j < DW_ROWS + 2; j++)
            if (rin >> j & 1)
                dw_fwd_row_sums(v + j * 6, wv, j, 1, nr, NC, cin, acc);
        return;
    }
    TEENY_UNROLL
    for (int j = 0; j < (DW_ROWS - 1) * SH + 3; j++) {
        const int ih = ih0 + j;
        if (j >= n_in || (uint)ih >= (uint)H)
            continue;
        float v[6];
        dw_row6(xc + ih * W + iw0, 1, cin, dc, NC == 4 && V4, v);
        dw_fwd_row_sums(v, wv, j, SH, nr, NC, cin, acc);
    }
}

/* Grid (items rounded up to DW_WG), work-group (DW_WG); no local memory
 * and no barrier. The output planes (b, co) are cut into strips of one
 * column by up to `rows` (<= DW_ROWS) rows: row_blocks strips down each
 * column, items numbered column-fastest through a plane, then
 * row-blocks, then planes, so a work-group's lanes run along rows
 * (coalesced loads and stores) and fill whole planes, several planes per
 * group when planes are small (no idle lanes at W = 56, 28, 14, 7). Item
 * i decodes its strip once (three divisions) and accumulates one
 * register per row and column. cols (1, 2 or 4,
 * teeny__conv_dw_plan_fwd): output columns per item, 2 or 4 only on
 * dw_fwd_rows3's unit column stride and dilation, 4 only at row stride 1
 * (items then number runs of cols columns; where OW is no multiple of
 * cols the last item stores the 1 to cols - 1 columns left; a run goes
 * out as one float2 or float4 where y's rows and offset are multiples of
 * cols; with 4, each input row's middle four values come as one float4
 * where x's rows and offset allow it, v4). 3x3 kernels with row stride 1 or 2 and row dilation
 * 1 take dw_fwd_rows3 (each input value loaded once); any other kernel
 * loads, per tap (kh, kw), the DW_ROWS inputs under its strip's rows --
 * independent loads in flight, the strip's rows sharing each input row
 * through the cache. flip != 0 reads each channel's taps in reverse
 * order (the kernel rotated by 180 degrees): the input gradient of a
 * stride-1 depthwise convolution with multiplier 1 is this forward pass
 * over dy (conv2d_exec.c). */
__kernel __attribute__((reqd_work_group_size(DW_WG, 1, 1)))
void dwconv_fwd(__global const float *restrict x, int x_off, __global const float *restrict w, int w_off,
                __global float *restrict y, int y_off, int16 geo, int rows, int row_blocks,
                __global const float *bias, int bias_off, __global const float *scale, int scale_off,
                __global const float *shift, int shift_off, int epi, int act, int flip, int cols)
{
    DW_GEOMETRY(geo);
    const int Cout = Cin * mult, KHW = KH * KW, OWc = (OW + cols - 1) / cols, per_plane = row_blocks * OWc;
    if (get_global_id(0) >= (size_t)B * Cout * per_plane) /* the grid is rounded up past int range at most */
        return;
    const int i = get_global_id(0), plane = i / per_plane;
    const int in_plane = i - plane * per_plane, rb = in_plane / OWc, ow = (in_plane - rb * OWc) * cols;
    const int b = plane / Cout, co = plane - b * Cout, oh0 = rb * rows, nr = min(rows, OH - oh0);
    __global const float *xc = x + x_off + (b * Cin + co / mult) * H * W;
    __global const float *wc = w + w_off + co * KHW + (flip ? KHW - 1 : 0);
    const int wstep = flip ? -1 : 1, ih0 = oh0 * s_h - p_h, iw0 = ow * s_w - p_w, sW = s_h * W;
    float acc[4 * DW_ROWS];
    TEENY_UNROLL
    for (int r = 0; r < 4 * DW_ROWS; r++)
        acc[r] = 0.0f;
    /* cols 4: values 1-4 of each input row as one float4 where the rows start 16-byte aligned and they lie
     * inside the row */
    const int v4 = cols == 4 && ((x_off + iw0 + 1) & 3) == 0 && (W & 3) == 0 && (uint)(iw0 + 1) < (uint)W &&
                   (uint)(iw0 + 4) < (uint)W;
    if (KH == 3 && KW == 3 && d_h == 1 && s_h == 1) {
        if (v4)
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 1, 4, 1, acc);
        else if (cols == 4)
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 1, 4, 0, acc);
        else if (cols == 2)
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 1, 2, 0, acc);
        else
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 1, 1, 0, acc);
    } else if (KH == 3 && KW == 3 && d_h == 1 && s_h == 2) {
        if (cols == 2)
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 2, 2, 0, acc);
        else
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 2, 1, 0, acc);
    } else {
        for (int kh = 0; kh < KH; kh++) {
            const int ihk = ih0 + kh * d_h;
            __global const float *xr = xc + ihk * W + iw0;
            for (int kw = 0; kw < KW; kw++, wc += wstep) {
                const float wv = *wc;
                if ((uint)(iw0 + kw * d_w) >= (uint)W)
                    continue;
                TEENY_UNROLL
                for (int r = 0; r < DW_ROWS; r++)
                    if (r < nr && (uint)(ihk + r * s_h) < (uint)H)
                        acc[r] = TEENY_MAD(xr[r * sW + kw * d_w], wv, acc[r]);
            }
        }
    }
    const float2 e = conv_epilogue(epi, co, bias, bias_off, scale, scale_off, shift, shift_off);
    __global float *yc = y + y_off + (plane * OH + oh0) * OW + ow;
    /* nc columns to store: a float4 (cols 4) or float2 (cols 2) where y's rows and offset allow it */
    const int nc = min(cols, OW - ow), vec = nc == cols && cols > 1 && ((y_off | OW) & (cols - 1)) == 0;
    TEENY_UNROLL
    for (int r = 0; r < DW_ROWS; r++) {
        if (r >= nr)
            continue;
        float o[4];
        TEENY_UNROLL
        for (int q = 0; q < 4; q++)
            o[q] = q < nc ? conv_act(act, acc[q * DW_ROWS + r] * e.x + e.y) : 0.0f;
        __global float *yr = yc + r * OW;
        if (vec && cols == 4) {
            *(__global float4 *)yr = (float4)(o[0], o[1], o[2], o[3]);
        } else if (vec) {
            *(__global float2 *)yr = (float2)(o[0], o[1]);
        } else {
            TEENY_UNROLL
            for (int q = 0; q < 4; q++)
                if (q < nc)
                    yr[q] = o[q];
        }
    }
}

TEENY_INLINE int floor_div(int a, int b)
{
    int q = a / b;
    return q * b > a ? q - 1 : q;
}

/* Input gradient of the depthwise case. Grid (DW_WG * tiles_h * tiles_w,
 * Cin, B), work-group (DW_WG); group (tile, ci, b) computes the TH x TW
 * tile of dx[b, ci] at (tile / tiles_w * TH, tile % tiles_w * TW), summing
 * over the mult output channels of ci. The dy patches the tile touches
 * (at most PH x PW per channel, from row floor((ih0 + p_h - (KH-1)*d_h)/s_h))
 * and the taps of all mult channels are staged in local memory at once
 * (patch: [mult][PH*PW], then [mult][KH*KW]), so the kernel has one
 * barrier and no barrier inside a loop: PoCL 5.0 loses the staged taps
 * when a barrier loop carries per-item state. Item t owns column t % TW
 * of rows t / TW + i * (DW_WG / TW), i < DW_ROWS (TH allows no more). */
__kernel __attribute__((reqd_work_group_size(DW_WG, 1, 1)))
void dwconv_dx(__global const float *restrict dy, int dy_off, __global const float *restrict w, int w_off,
               __global float *restrict dx, int dx_off, int16 geo, int TH, int TW, int tiles_w, int PH, int PW,
               __local float *patch)
{
    DW_GEOMETRY(geo);
    const int lid = get_local_id(0), tile = get_group_id(0), ci = get_group_id(1), b = get_group_id(2);
    const int ih0 = tile / tiles_w * TH, iw0 = (tile % tiles_w) * TW, KHW = KH * KW, Cout = Cin * mult;
    const int oh_lo = floor_div(ih0 + p_h - (KH - 1) * d_h, s_h), ow_lo = floor_div(iw0 + p_w - (KW - 1) * d_w, s_w);
    const int ph = min(PH, floor_div(ih0 + TH - 1 + p_h, s_h) - oh_lo + 1);
    const int pw = min(PW, floor_div(iw0 + TW - 1 + p_w, s_w) - ow_lo + 1);
    const int PP = PH * PW, n_patch = mult * ph * pw;
    __local float *wl = patch + mult * PP;
    __global const float *dyb = dy + dy_off + (b * Cout + ci * mult) * OH * OW;
    __global const float *wc = w + w_off + ci * mult * KHW; /* the mult channels' taps are contiguous */

    for (int e = lid; e < n_patch + mult * KHW; e += DW_WG) {
        if (e < n_patch) {
            int j = e / (ph * pw), rc = e - j * (ph * pw), r = rc / pw, c = rc - r * pw;
            int oh = oh_lo + r, ow = ow_lo + c;
            patch[j * PP + r * PW + c] =
                (uint)oh < (uint)OH && (uint)ow < (uint)OW ? dyb[j * OH * OW + oh * OW + ow] : 0.0f;
        } else {
            wl[e - n_patch] = wc[e - n_patch];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const int rstep = DW_WG / TW, col = lid % TW, row0 = lid / TW, iw = iw0 + col;
    if (row0 >= rstep || iw >= W)
        return;
    for (int i = 0; i < DW_ROWS; i++) {
        int row = row0 + i * rstep, ih = ih0 + row;
        if (row >= TH || ih >= H)
            break;
        float a = 0.0f;
        for (int j = 0; j < mult; j++) {
            __local const float *pj = patch + j * PP, *wj = wl + j * KHW;
            for (int kh = 0; kh < KH; kh++) {
                int th = ih + p_h - kh * d_h - oh_lo * s_h; /* >= 0 by the choice of oh_lo */
                int lr = th / s_h;
                if (th % s_h || lr >= ph)
                    continue;
                for (int kw = 0; kw < KW; kw++) {
                    int tw = iw + p_w - kw * d_w - ow_lo * s_w;
                    int lc = tw / s_w;
                    if (tw % s_w == 0 && lc < pw)
                        a = TEENY_MAD(pj[lr * PW + lc], wj[kh * KW + kw], a);
                }
            }
        }
        dx[dx_off + ((b * Cin + ci) * H + ih) * W + iw] = a;
    }
}

/* dwconv_dw's path for 3x3 kernels at stride 1 and dilation 1 (the host
 * sets `rows3` to NC, 1 or 4). The chunk's positions [r_begin, r_end) lie
 * in output rows row_b .. row_l of the B*OH rows; these are cut into
 * strips of DW_ROWS rows, and item lid takes units u = lid, + DW_WG, ...
 * of (strip u / OWc, columns NC * (u % OWc) .. + NC - 1), so a
 * work-group's lanes run along rows (coalesced loads). Walking its
 * columns down the strip, the item keeps the 3 x (NC + 2) inputs under
 * the current positions in registers: moving one row down in the same
 * plane loads one new input row (NC + 2 values, the middle four as a
 * float4 where AX says x's rows allow it) and NC dy values (a float4
 * where AD says so), where the per-position walk loads 10 values a
 * position; the first position and a new plane load all 3 rows (the
 * chunk skips positions only before its first and after its last, so
 * the positions a unit takes in one plane are consecutive rows).
 * Positions outside the chunk or the plane and inputs outside the plane
 * are skipped, not added as zeros. acc[tap] gets tap kh * 3 + kw, in the
 * order of the positions (row, then column). */
TEENY_INLINE void dw_dw_rows3(__global const float *xc0, __global const float *dyc0, int Cin, int Cout, int H,
                              int W, int OH, int OW, int p_h, int p_w, int r_begin, int r_end, int lid, const int NC,
                              int AX, int AD, float *acc)
{
    const int HW = H * W, OHW = OH * OW, row_b = r_begin / OW, row_l = (r_end - 1) / OW, OWc = (OW + NC - 1) / NC;
    const int n_units = (row_l - row_b + DW_ROWS) / DW_ROWS * OWc;
    for (int u = lid; u < n_units; u += DW_WG) {
        const int strip = u / OWc, ow = (u - strip * OWc) * NC, iw0 = ow - p_w;
        /* bit m: input column iw0 + m inside the row (m < NC + 2); bit 8 + q: output column ow + q inside */
        int cin = 0;
        TEENY_UNROLL
        for (int m = 0; m < 6; m++)
            cin |= (m < NC + 2 && (uint)(iw0 + m) < (uint)W) << m;
        TEENY_UNROLL
        for (int q = 0; q < 4; q++)
            cin |= (q < NC && ow + q < OW) << (8 + q);
        const int vx = NC == 4 && AX && (cin & 0x1e) == 0x1e, vd = NC == 4 && AD && (cin & 0xf00) == 0xf00;
        int row = row_b + strip * DW_ROWS, b = row / OH, oh = row - b * OH, last_b = -1;
        float xw[18]; /* [3][6]: the window's input rows */
        int rv[3];
        TEENY_UNROLL
        for (int k = 0; k < DW_ROWS; k++, row++) {
            const int pos = row * OW + ow;
            if (row <= row_l && pos + NC > r_begin && pos < r_end) {
                __global const float *xb = xc0 + b * Cin * HW + iw0;
                __global const float *gb = dyc0 + b * Cout * OHW + oh * OW + ow;
                int gin = 0; /* bit q: position pos + q is the chunk's and the plane's */
                TEENY_UNROLL
                for (int q = 0; q < 4; q++)
                    gin |= (cin >> (8 + q) & 1 && pos + q >= r_begin && pos + q < r_end) << q;
                float g[4];
                if (vd) {
                    const float4 t = *(__global const float4 *)gb;
                    g[0] = t.x;
                    g[1] = t.y;
                    g[2] = t.z;
                    g[3] = t.w;
                } else {
                    TEENY_UNROLL
                    for (int q = 0; q < 4; q++)
                        g[q] = gin >> q & 1 ? gb[q] : 0.0f;
                }
                const int first = b != last_b; /* a fresh window: all 3 rows, else one row down */
                TEENY_UNROLL
                for (int kh = 0; kh < 3; kh++) {
                    if (kh < 2 && !first) {
                        TEENY_UNROLL
                        for (int m = 0; m < 6; m++)
                            xw[kh * 6 + m] = xw[kh * 6 + 6 + m];
                        rv[kh] = rv[kh + 1];
                        continue;
                    }
                    const int ih = oh - p_h + kh;
                    rv[kh] = (uint)ih < (uint)H;
                    __global const float *xr = xb + ih * W;
                    if (rv[kh] && vx) {
                        const float4 t = *(__global const float4 *)(xr + 1);
                        xw[kh * 6] = cin & 1 ? xr[0] : 0.0f;
                        xw[kh * 6 + 1] = t.x;
                        xw[kh * 6 + 2] = t.y;
                        xw[kh * 6 + 3] = t.z;
                        xw[kh * 6 + 4] = t.w;
                        xw[kh * 6 + 5] = cin & 32 ? xr[5] : 0.0f;
                    } else {
                        TEENY_UNROLL
                        for (int m = 0; m < 6; m++)
                            xw[kh * 6 + m] = rv[kh] && cin >> m & 1 ? xr[m] : 0.0f;
                    }
                }
                TEENY_UNROLL
                for (int q = 0; q < 4; q++)
                    TEENY_UNROLL
                    for (int kh = 0; kh < 3; kh++)
                        TEENY_UNROLL
                        for (int kw = 0; kw < 3; kw++)
                            if (q < NC && gin >> q & 1 && rv[kh] && cin >> (q + kw) & 1)
                                acc[kh * 3 + kw] = TEENY_MAD(g[q], xw[kh * 6 + q + kw], acc[kh * 3 + kw]);
                last_b = b;
            }
            if (++oh == OH) {
                oh = 0;
                b++;
            }
        }
    }
}

/* Weight gradient of the depthwise case. Grid (DW_WG * Z, Cout),
 * work-group (DW_WG): group (z, co) sums dy[b, co, oh, ow] *
 * x[b, co / mult, oh*s_h - p_h + kh*d_h, ow*s_w - p_w + kw*d_w] over
 * r = (b, oh, ow) in [z*r_chunk, +r_chunk), item t taking r = t, t + DW_WG,
 * ..., DW_TAPS taps per pass -- or, where rows3 != 0 (3x3, stride 1,
 * dilation 1, DW_TAPS >= 9: one pass), column strips (dw_dw_rows3); the
 * work-group tree sum of each tap goes to
 * out[out_off + z*out_zstride + co*KH*KW + tap]. */
__kernel __attribute__((reqd_work_group_size(DW_WG, 1, 1)))
void dwconv_dw(__global const float *restrict x, int x_off, __global const float *restrict dy, int dy_off,
               __global float *restrict out, int out_off, int out_zstride, int16 geo, int R, int r_chunk, int rows3)
{
    DW_GEOMETRY(geo);
    __local float red[DW_TAPS * DW_WG];
    const int lid = get_local_id(0), z = get_group_id(0), co = get_group_id(1);
    const int ci = co / mult, KHW = KH * KW, Cout = Cin * mult, HW = H * W, OHW = OH * OW;
    const int r_begin = z * r_chunk, r_end = min(R, r_begin + r_chunk);
    const conv_idx step = idx_make(DW_WG, OH, OW);
    __global float *o = out + out_off + z * out_zstride + co * KHW;

    for (int t0 = 0; t0 < KHW; t0 += DW_TAPS) {
        float acc[DW_TAPS];
        for (int t = 0; t < DW_TAPS; t++)
            acc[t] = 0.0f;
        const int kh0 = t0 / KW, kw0 = t0 - kh0 * KW;
        conv_idx at = idx_make(r_begin + lid, OH, OW);
#if DW_TAPS >= 9
        if (rows3 == 4)
            dw_dw_rows3(x + x_off + ci * HW, dy + dy_off + co * OHW, Cin, Cout, H, W, OH, OW, p_h, p_w, r_begin,
                        r_end, lid, 4, ((x_off - p_w + 1) & 3) == 0 && (W & 3) == 0,
                        (dy_off & 3) == 0 && (OW & 3) == 0, acc);
        else if (rows3)
            dw_dw_rows3(x + x_off + ci * HW, dy + dy_off + co * OHW, Cin, Cout, H, W, OH, OW, p_h, p_w, r_begin,
                        r_end, lid, 1, 0, 0, acc);
        else
#endif
            for (int r = r_begin + lid; r < r_end; r += DW_WG) {
                float g = dy[dy_off + (at.c * Cout + co) * OHW + at.h * OW + at.w];
                __global const float *xc = x + x_off + (at.c * Cin + ci) * HW;
                int ihb = at.h * s_h - p_h, iwb = at.w * s_w - p_w, kh = kh0, kw = kw0;
                TEENY_UNROLL
                for (int t = 0; t < DW_TAPS; t++) {
                    int ih = ihb + kh * d_h, iw = iwb + kw * d_w;
                    if (t0 + t < KHW && (uint)ih < (uint)H && (uint)iw < (uint)W)
                        acc[t] = TEENY_MAD(g, xc[ih * W + iw], acc[t]);
                    if (++kw == KW) {
                        kw = 0;
                        kh++;
                    }
                }
                at = idx_add(at, step, OH, OW);
            }
        for (int t = 0; t < DW_TAPS; t++)
            red[t * DW_WG + lid] = acc[t];
        teeny_group_sum_rows(red, lid, DW_WG, DW_TAPS);
        if (lid < DW_TAPS && t0 + lid < KHW)
            o[t0 + lid] = red[lid * DW_WG];
        barrier(CLK_LOCAL_MEM_FENCE); /* red is reused by the next pass */
    }
}

/* ---- the depthwise backward in one pass (dwconv_bwd3) ---- */

/* Output rows per item of dwconv_bwd3 (conv2d_internal.h's TEENY__DWB_ROWS: the host's count of its items),
 * and its work-group (the profile's dwb_wg, conv_dwb_wg). */
#define DWB_ROWS 4
#ifndef DWB_WG
#define DWB_WG DW_WG
#endif

/* dwconv_bwd3's unit: rows oh0 .. oh0 + DWB_ROWS - 1 (those inside the
 * plane) by columns ow0 .. ow0 + 3 (those inside) of one H x W plane; xc,
 * dyc and dxc point at the plane of x, dy and dx, wv holds the channel's
 * 9 taps. It loads dy's window around the unit (rows oh0 - 1 .. oh0 +
 * DWB_ROWS, columns ow0 - 1 .. ow0 + 4), values outside the plane as
 * zeros, all rows before any sum, and writes
 *   dx[ih][iw] = sum over (kh, kw) of dy[ih + 1 - kh][iw + 1 - kw] w[kh][kw],
 * in the order of dwconv_fwd over dy with the taps reversed (taps kh' =
 * 2 - kh, kw' = 2 - kw ascending); then, keeping only the unit's own dy
 * values, x's window in the same registers, and adds dy[oh][ow]
 * x[oh - 1 + kh][ow - 1 + kw] into dwacc[kh * 3 + kw] over its positions
 * (row, column, then tap order). One window at a time took the kernel
 * from 128 registers to 79 (ptxas for sm_90) and the H200's 3x3
 * 256-channel backward at 56^2 from 0.132 to 0.113 ms (2026-12-03), though
 * an item now waits on two rounds of loads. Every product is taken, the
 * window's zeros included (zero padding, as PyTorch's; a test per product
 * made the kernel 1.8x slower on the H200): with finite inputs a zero
 * adds nothing, so dx has the bits of the input gradient it replaces
 * (which skips them) but for the sign of a zero; an infinite tap or dy
 * next to the border gives NaN there, as zero padding does. V4: x, dy and
 * dx rows are whole float4s (W % 4 == 0, offsets too), so a window row's
 * middle four load as one float4 and dx goes out as float4s. */
TEENY_INLINE void dw_bwd3_unit(__global const float *xc, __global const float *dyc, __global float *dxc,
                               const float *wv, int H, int W, int oh0, int ow0, const int V4, float *dwacc)
{
    const int nr = min(DWB_ROWS, H - oh0), iw0 = ow0 - 1;
    int cin = 0; /* bit p: column iw0 + p inside the row */
    TEENY_UNROLL
    for (int p = 0; p < 6; p++)
        cin |= ((uint)(iw0 + p) < (uint)W) << p;
    if (V4)
        cin |= 0x1e; /* what the caller checked, for the compiler */
    float v[(DWB_ROWS + 2) * 6], g[DWB_ROWS * 4];
    TEENY_UNROLL
    for (int j = 0; j < DWB_ROWS + 2; j++) { /* dy's window row j: row oh0 - 1 + j, zeros past the unit or plane */
        const int ih = oh0 - 1 + j, in = j < nr + 2 && (uint)ih < (uint)H;
        dw_row6(dyc + ih * W + iw0, in, cin, 1, V4, v + j * 6);
    }
    TEENY_UNROLL
    for (int r = 0; r < DWB_ROWS; r++) {
        if (r >= nr)
            continue;
        float o[4];
        TEENY_UNROLL
        for (int q = 0; q < 4; q++) {
            float a = 0.0f;
            g[r * 4 + q] = v[(r + 1) * 6 + q + 1];
            TEENY_UNROLL
            for (int k = 0; k < 9; k++) { /* k = kh' * 3 + kw': dy row r + kh', column q + kw', tap 8 - k */
                const int kh = k / 3, kw = k % 3;
                a = TEENY_MAD(v[(r + kh) * 6 + q + kw], wv[8 - k], a);
            }
            o[q] = a;
        }
        __global float *dr = dxc + (oh0 + r) * W + ow0;
        if (V4) {
            *(__global float4 *)dr = (float4)(o[0], o[1], o[2], o[3]);
        } else {
            TEENY_UNROLL
            for (int q = 0; q < 4; q++)
                if (cin >> (q + 1) & 1)
                    dr[q] = o[q];
        }
    }
    TEENY_UNROLL
    for (int j = 0; j < DWB_ROWS + 2; j++) { /* x's window in the same registers */
        const int ih = oh0 - 1 + j, in = j < nr + 2 && (uint)ih < (uint)H;
        dw_row6(xc + ih * W + iw0, in, cin, 1, V4, v + j * 6);
    }
    TEENY_UNROLL
    for (int r = 0; r < DWB_ROWS; r++) {
        if (r >= nr)
            continue;
        TEENY_UNROLL
        for (int q = 0; q < 4; q++)
            TEENY_UNROLL
            for (int k = 0; k < 9; k++) { /* tap k = kh * 3 + kw: x row r + kh, column q + kw */
                const int kh = k / 3, kw = k % 3;
                dwacc[k] = TEENY_MAD(g[r * 4 + q], v[(r + kh) * 6 + q + kw], dwacc[k]);
            }
    }
}

/* Input and weight gradients of a 3x3 depthwise convolution at stride 1,
 * dilation 1, padding 1 and multiplier 1 (OH = H, OW = W) in one pass:
 * each of x and dy is read once, where dwconv_fwd (dx) and dwconv_dw read
 * dy twice and x once in two launches. Grid (DW_WG * Z, C), work-group
 * (DW_WG): channel c's units (b, strip of DWB_ROWS rows, 4 columns),
 * numbered column-fastest so that a work-group's lanes run along rows,
 * DW_WG to a group: group (z, c) takes units z * DW_WG .. + DW_WG - 1
 * (dw_bwd3_unit: dx of the unit, and its positions' weight-gradient sums),
 * then sums the 9 taps over its items (teeny_group_sum_rows) into
 * out[out_off + z * out_zstride + c * 9 + tap]; conv_reduce_parts sums
 * the Z partials in order where Z > 1 (conv2d_grad.c). */
__kernel __attribute__((reqd_work_group_size(DWB_WG, 1, 1)))
void dwconv_bwd3(__global const float *restrict x, int x_off, __global const float *restrict dy, int dy_off,
                 __global const float *restrict w, int w_off, __global float *restrict dx, int dx_off,
                 __global float *restrict out, int out_off, int out_zstride, int B, int C, int H, int W)
{
    __local float red[9 * DWB_WG];
    const int lid = get_local_id(0), z = get_group_id(0), c = get_group_id(1);
    const int OWc = (W + 3) / 4, per_b = (H + DWB_ROWS - 1) / DWB_ROWS * OWc, u = z * DWB_WG + lid;
    float dwacc[9];
    TEENY_UNROLL
    for (int t = 0; t < 9; t++)
        dwacc[t] = 0.0f;
    if (u < B * per_b) {
        const int b = u / per_b, rest = u - b * per_b, strip = rest / OWc, cg = rest - strip * OWc;
        const int plane = (b * C + c) * H * W;
        float wv[9];
        TEENY_UNROLL
        for (int t = 0; t < 9; t++)
            wv[t] = w[w_off + c * 9 + t];
        if ((W & 3) == 0 && ((x_off | dy_off | dx_off) & 3) == 0)
            dw_bwd3_unit(x + x_off + plane, dy + dy_off + plane, dx + dx_off + plane, wv, H, W, strip * DWB_ROWS,
                         cg * 4, 1, dwacc);
        else
            dw_bwd3_unit(x + x_off + plane, dy + dy_off + plane, dx + dx_off + plane, wv, H, W, strip * DWB_ROWS,
                         cg * 4, 0, dwacc);
    }
    TEENY_UNROLL
    for (int t = 0; t < 9; t++)
        red[t * DWB_WG + lid] = dwacc[t];
    teeny_group_sum_rows(red, lid, DWB_WG, 9);
    if (lid < 9)
        out[out_off + z * out_zstride + c * 9 + lid] = red[lid * DWB_WG];
}

/* ---- depthwise, CPU variants (TEENY_VARIANT_CPU, src/tune) ----
 * No local memory and no barrier (a CPU runs a work-group's items as a
 * loop, split at each barrier). An item owns whole output rows and
 * accumulates DW_CPU_COLS columns at a time in a private array; per tap
 * the innermost loop runs along the row (contiguous for stride 1, so the
 * compiler vectorizes it). Per output the taps are summed in the order of
 * the portable kernels. Grid (ceil(rows / rows_per), channels, B);
 * rows_per is the last argument. */
#define DW_CPU_COLS 64

/* The first o >= 0 with o*s - a >= 0, and one past the last with o*s - a
 * <= lim - 1 (s > 0): the outputs whose input o*s - a lies in [0, lim). */
TEENY_INLINE int dw_lo(int a, int s)
{
    return a <= 0 ? 0 : s == 1 ? a : (a + s - 1) / s; /* no division at stride 1 */
}

TEENY_INLINE int dw_hi(int a, int s, int lim)
{
    return lim - 1 + a < 0 ? 0 : s == 1 ? lim + a : (lim - 1 + a) / s + 1;
}

/* Item (rb, co, b): output rows [rb*rows_per, +rows_per) of y[b, co]. */
__kernel void dwconv_fwd_cpu(__global const float *restrict x, int x_off, __global const float *restrict w, int w_off,
                             __global float *restrict y, int y_off, int16 geo, __global const float *bias,
                             int bias_off, __global const float *scale, int scale_off, __global const float *shift,
                             int shift_off, int epi, int act, int rows_per)
{
    DW_GEOMETRY(geo);
    const int rb = get_global_id(0), co = get_global_id(1), b = get_global_id(2), Cout = Cin * mult;
    if (co >= Cout || b >= B || rb * rows_per >= OH)
        return;
    const float2 e = conv_epilogue(epi, co, bias, bias_off, scale, scale_off, shift, shift_off);
    const float sc = e.x, sh = e.y;
    __global const float *xc = x + x_off + (b * Cin + co / mult) * H * W, *wc = w + w_off + co * KH * KW;
    __global float *yc = y + y_off + (b * Cout + co) * OH * OW;
    const int oh_end = min(OH, rb * rows_per + rows_per);
    for (int oh = rb * rows_per; oh < oh_end; oh++)
        for (int ow0 = 0; ow0 < OW; ow0 += DW_CPU_COLS) {
            const int n = min(DW_CPU_COLS, OW - ow0);
            float acc[DW_CPU_COLS];
            for (int j = 0; j < n; j++)
                acc[j] = 0.0f;
            for (int kh = 0; kh < KH; kh++) {
                const int ih = oh * s_h - p_h + kh * d_h;
                if ((uint)ih >= (uint)H)
                    continue;
                __global const float *xr = xc + ih * W;
                for (int kw = 0; kw < KW; kw++) {
                    const int a = p_w - kw * d_w, lo = max(ow0, dw_lo(a, s_w)), hi = min(ow0 + n, dw_hi(a, s_w, W));
                    const float wv = wc[kh * KW + kw];
                    for (int ow = lo; ow < hi; ow++)
                        acc[ow - ow0] = TEENY_MAD(xr[ow * s_w - a], wv, acc[ow - ow0]);
                }
            }
            for (int j = 0; j < n; j++)
                yc[oh * OW + ow0 + j] = conv_act(act, acc[j] * sc + sh);
        }
}

/* Item (rb, ci, b): input rows [rb*rows_per, +rows_per) of dx[b, ci], the
 * sum over ci's mult output channels and the taps that reach each column. */
__kernel void dwconv_dx_cpu(__global const float *restrict dy, int dy_off, __global const float *restrict w, int w_off,
                            __global float *restrict dx, int dx_off, int16 geo, int rows_per)
{
    DW_GEOMETRY(geo);
    const int rb = get_global_id(0), ci = get_global_id(1), b = get_global_id(2), Cout = Cin * mult;
    if (ci >= Cin || b >= B || rb * rows_per >= H)
        return;
    const int ih_end = min(H, rb * rows_per + rows_per);
    for (int ih = rb * rows_per; ih < ih_end; ih++)
        for (int iw0 = 0; iw0 < W; iw0 += DW_CPU_COLS) {
            const int n = min(DW_CPU_COLS, W - iw0);
            float acc[DW_CPU_COLS];
            for (int j = 0; j < n; j++)
                acc[j] = 0.0f;
            for (int m = 0; m < mult; m++) {
                const int co = ci * mult + m;
                __global const float *gc = dy + dy_off + (b * Cout + co) * OH * OW, *wc = w + w_off + co * KH * KW;
                for (int kh = 0; kh < KH; kh++) {
                    const int t = ih + p_h - kh * d_h, oh = t / s_h;
                    if (t < 0 || oh * s_h != t || oh >= OH)
                        continue;
                    __global const float *gr = gc + oh * OW;
                    for (int kw = 0; kw < KW; kw++) {
                        /* column iw = ow*s_w - (p_w - kw*d_w) of this chunk, for ow in [0, OW) */
                        const int a = p_w - kw * d_w + iw0, lo = dw_lo(a, s_w), hi = min(OW, dw_hi(a, s_w, n));
                        const float wv = wc[kh * KW + kw];
                        for (int ow = lo; ow < hi; ow++)
                            acc[ow * s_w - a] = TEENY_MAD(gr[ow], wv, acc[ow * s_w - a]);
                    }
                }
            }
            for (int j = 0; j < n; j++)
                dx[dx_off + ((b * Cin + ci) * H + ih) * W + iw0 + j] = acc[j];
        }
}

/* Item (tap, co, z): the sum over rows (b, oh) in [z*rows_chunk,
 * + rows_chunk) of B*OH, in order, of each row's sum over ow of
 * dy[b, co, oh, ow] * x[b, co / mult, oh*s_h - p_h + kh*d_h, ow*s_w - p_w + kw*d_w],
 * to dw[dw_off + z*out_zstride + co*KH*KW + tap]: dw[co, tap] itself when
 * one chunk holds every row, else partials for conv_reduce_parts (where a
 * device limits a work-item's loop trips, conv2d_plan.c). */
__kernel void dwconv_dw_cpu(__global const float *restrict x, int x_off, __global const float *restrict dy, int dy_off,
                            __global float *restrict dw, int dw_off, int16 geo, int rows_chunk, int out_zstride)
{
    DW_GEOMETRY(geo);
    const int tap = get_global_id(0), co = get_global_id(1), z = get_global_id(2), Cout = Cin * mult;
    if (tap >= KH * KW || co >= Cout)
        return;
    const int kh = tap / KW, kw = tap - kh * KW, a = p_w - kw * d_w;
    const int lo = dw_lo(a, s_w), hi = min(OW, dw_hi(a, s_w, W));
    const int r_end = min(B * OH, z * rows_chunk + rows_chunk);
    float s = 0.0f;
    for (int row = z * rows_chunk; row < r_end; row++) {
        const int b = row / OH, oh = row - b * OH, ih = oh * s_h - p_h + kh * d_h;
        if ((uint)ih >= (uint)H)
            continue;
        __global const float *xc = x + x_off + (b * Cin + co / mult) * H * W;
        __global const float *gc = dy + dy_off + (b * Cout + co) * OH * OW;
        float r = 0.0f;
        for (int ow = lo; ow < hi; ow++)
            r = TEENY_MAD(gc[oh * OW + ow], xc[ih * W + ow * s_w - a], r);
        s += r;
    }
    dw[dw_off + z * out_zstride + co * KH * KW + tap] = s;
}

/* ---- reductions ---- */

/* Grid (DW_WG * Z, Cout), work-group (DW_WG): group (z, co) sums dy[b, co]
 * over batches [z*b_chunk, +b_chunk), items striding over OH*OW, then a
 * tree sum; the result goes to out[out_off + z*Cout + co]. */
__kernel __attribute__((reqd_work_group_size(DW_WG, 1, 1)))
void conv_dbias_part(__global const float *restrict dy, int dy_off, __global float *restrict out, int out_off,
                     int B, int Cout, int OHW, int b_chunk)
{
    __local float red[DW_WG];
    const int lid = get_local_id(0), z = get_group_id(0), co = get_group_id(1);
    const int b_end = min(B, z * b_chunk + b_chunk);
    float s = 0.0f;
    for (int b = z * b_chunk; b < b_end; b++) {
        __global const float *p = dy + dy_off + (b * Cout + co) * OHW;
        for (int i = lid; i < OHW; i += DW_WG)
            s += p[i];
    }
    red[lid] = s;
    teeny_group_sum(red, lid, DW_WG);
    if (lid == 0)
        out[out_off + z * Cout + co] = red[0];
}

/* Grid (n): out[out_off + i] = sum over z < Z of part[part_off + z*n + i],
 * in order of z. */
__kernel void conv_reduce_parts(__global const float *restrict part, int part_off, int n, int Z,
                                __global float *restrict out, int out_off)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    float s = 0.0f;
    for (int z = 0; z < Z; z++)
        s += part[part_off + z * n + i];
    out[out_off + i] = s;
}
