/*
 * conv2d_gemm_cpu.cl -- the CPU GEMM (conv_pack_b, conv_gemm_cpu: no local
 * memory, float16 along the output channels; CPU_RM, CPU_NV). The conv2d
 * program's third part, after conv2d_gemm.cl.
 */
/* ---- CPU GEMM (no local memory; tuning entries with cpu_rows > 0) ----
 * On CPU runtimes (PoCL) a work-group is a loop over its items and
 * barriers split it, so this variant has neither: each item computes
 * CPU_RM rows x 16 columns of out[m, n] (the conv_gemm_gather problem: rows m =
 * (b, p, q) gathered from src, k = (c, kh, kw)) in float16 registers,
 * reading B from a packed copy made by conv_pack_b, each item's CPU_NC
 * columns one run in k order (read front to back, prefetch-friendly):
 *     bp[((g*(Np/CPU_NC) + n/CPU_NC)*KK + k)*CPU_NC + n%CPU_NC]
 *     k = (kh*Kw + kw)*Kc + c, KK = Kh*Kw*Kc   (n < Np, zero past N)
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
 * writes the Np columns of row k = (kh*Kw + kw)*Kc + c of group g (the B
 * operand above) from w[w_off + g*w_gstride + n*w_nstride + c*w_cstride +
 * kh*w_hstride + kw*w_wstride], r = (g*Kh + kh)*Kw + kw. */
__kernel __attribute__((reqd_work_group_size(16, 1, 1)))
void conv_pack_b(__global const float *restrict w, int w_off, int w_gstride, int w_nstride, int w_cstride,
                 int w_hstride, int w_wstride, int N, int Np, int Kc, int Kh, int Kw, __global float *restrict bp,
                 int bp_off)
{
    const int c = get_global_id(0), r = get_global_id(1);
    if (c >= Kc)
        return;
    const int kw = r % Kw, t = r / Kw, kh = t % Kh, g = t / Kh, KK = Kh * Kw * Kc;
    __global const float *src = w + w_off + g * w_gstride + c * w_cstride + kh * w_hstride + kw * w_wstride;
    /* tile 0's run of row k; tile i's is i*KK*CPU_NC further */
    __global float *dst = bp + bp_off + (g * (Np / CPU_NC) * KK + (kh * Kw + kw) * Kc + c) * CPU_NC;
    for (int n = 0; n < Np; n++)
        dst[(n / CPU_NC) * KK * CPU_NC + n % CPU_NC] = n < N ? src[n * w_nstride] : 0.0f;
}

/* Where row m of out starts for group g: out[conv_cpu_row(...) + n*out_nstride]. */
TEENY_INLINE int conv_cpu_row(int m, int PQ, int Q, int g, int N, int out_off, int out_bstride, int out_nstride,
                              int out_hstride, int out_wstride)
{
    int b = m / PQ, pq = m - b * PQ, p = pq / Q, q = pq - p * Q;
    return out_off + b * out_bstride + p * out_hstride + q * out_wstride + g * N * out_nstride;
}

/* conv_gemm_cpu's stores: rows m0 .. m0 + CPU_RM - 1 (those below M) of
 * the sums acc[v*CPU_RM + i] (row i, columns n0 + 16*v), with the epilogue
 * (scale, shift, activation) where seg has CONV_SEG_LAST, else raw. */
TEENY_INLINE void conv_cpu_store(const float16 *acc, __global float *restrict out, int m0, int n0, int g, int M,
                                 int N, int PQ, int Q, int out_off, int out_bstride, int out_nstride, int out_hstride,
                                 int out_wstride, __global const float *bias, int bias_off,
                                 __global const float *scale, int scale_off, __global const float *shift,
                                 int shift_off, int epi, int act, int seg)
{
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
            vstore16(seg & CONV_SEG_LAST ? conv_act16(act, acc[u * CPU_RM + i] * vload16(u, sc) + vload16(u, sh))
                                         : acc[u * CPU_RM + i],
                     u, v);
        __global float *o = out + conv_cpu_row(m, PQ, Q, g, N, out_off, out_bstride, out_nstride, out_hstride,
                                               out_wstride);
        for (int j = 0; j < CPU_NC && n0 + j < N; j++)
            o[(n0 + j) * out_nstride] = v[j];
    }
}

/* acc[v*CPU_RM + i] += src[off[i] + c*src_cstride] * bk[c*CPU_NC + 16*v ..]
 * over channels c in [c_lo, c_hi) of one tap, in order; masked (some row
 * misses the tap: ok[i] 0, its off[i] inside the source): a missed row's
 * value counts as 0. Unmasked, the loop takes no select. */
TEENY_INLINE void conv_cpu_channels(float16 *acc, __global const float *restrict src, const int *off, const int *ok,
                                    __global const float *bk, int c_lo, int c_hi, int src_cstride,
                                    const int masked)
{
    for (int c = c_lo; c < c_hi; c++) {
        float16 b[CPU_NV];
TEENY_UNROLL
        for (int v = 0; v < CPU_NV; v++)
            b[v] = vload16(v, bk + c * CPU_NC);
        int co = c * src_cstride;
TEENY_UNROLL
        for (int i = 0; i < CPU_RM; i++) {
            float a = src[off[i] + co];
            float16 av = (float16)(masked ? (ok[i] ? a : 0.0f) : a);
TEENY_UNROLL
            for (int v = 0; v < CPU_NV; v++)
                acc[v * CPU_RM + i] = TEENY_MAD(av, b[v], acc[v * CPU_RM + i]);
        }
    }
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
    __global const float *bg = bp + bp_off + (g * n_tiles * KK + n0 / CPU_NC * KK) * CPU_NC;

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
        __global const float *bk = bg + t * Kc * CPU_NC;
        if (all)
            conv_cpu_channels(acc, src, off, ok, bk, c_lo, c_hi, src_cstride, 0);
        else
            conv_cpu_channels(acc, src, off, ok, bk, c_lo, c_hi, src_cstride, 1);
    }

    conv_cpu_store(acc, out, m0, n0, g, M, N, PQ, Q, out_off, out_bstride, out_nstride, out_hstride, out_wstride,
                   bias, bias_off, scale, scale_off, shift, shift_off, epi, act, seg);
}

/* ---- 1x1 convolutions along the pixels (conv_pack_w, conv_gemm_cpu_px) ----
 * A 1x1, stride-1, unpadded convolution of planes whose pixels are
 * contiguous in src and out is, per image b and group g, the product
 *     out[n, m] = sum_k w[n, k] src[k, m]      (m = p*Q + q of P*Q pixels)
 * whose rows of src and out are contiguous: an item computes CPU_RM
 * output channels of CPU_NC pixels in float16 registers, per k one
 * vector load of src's row and CPU_RM broadcast weights from a packed copy
 * made by conv_pack_w, each tile's run in k order:
 *     wp[((g*(Np/CPU_RM) + n/CPU_RM)*K + k)*CPU_RM + n%CPU_RM]   (zero past N)
 * and stores whole vectors of pixels (conv_gemm_cpu's rows of 16 channels
 * a pixel scatter across the planes). k summed in order from 0 (as
 * conv_gemm_cpu: deterministic). */

/* Grid (round_up(K, 16), G), work-group (16, 1): item (k, g) writes
 * column k of group g's Np packed rows from w[w_off + g*w_gstride +
 * n*w_nstride + k*w_cstride]. */
__kernel __attribute__((reqd_work_group_size(16, 1, 1)))
void conv_pack_w(__global const float *restrict w, int w_off, int w_gstride, int w_nstride, int w_cstride, int N,
                 int Np, int K, __global float *restrict wp, int wp_off)
{
    const int k = get_global_id(0), g = get_global_id(1);
    if (k >= K)
        return;
    __global const float *src = w + w_off + g * w_gstride + k * w_cstride;
    __global float *dst = wp + wp_off + (g * (Np / CPU_RM) * K + k) * CPU_RM;
    for (int n = 0; n < Np; n++)
        dst[(n / CPU_RM) * K * CPU_RM + n % CPU_RM] = n < N ? src[n * w_nstride] : 0.0f;
}

/* Grid (round_up(S*T, CPU_WG), G, B), work-group (CPU_WG, 1, 1), S =
 * ceil(PQ/CPU_NC) strips of pixels, T = Np/CPU_RM tiles of channels: item
 * (t, g, b) sums k in [k_begin, k_end) for the pixels m0.. of strip s and
 * the channels n0.. of tile c of group g of image b into out, from 0 where
 * seg has CONV_SEG_FIRST, else onto out's values; the epilogue (scale,
 * shift, activation) where seg has CONV_SEG_LAST. The order of items:
 * with tiles_first (t = s*T + c), a strip's channel tiles are neighbours,
 * so its K input rows, read by the first, are in the core's cache for
 * the others, where strips first read the whole input again for each
 * tile (from L3 or memory: the host takes it where K >= N); else (t =
 * c*S + s) neighbours write neighbouring pixels of the same CPU_RM planes,
 * where the output is the larger (tiles first scatters its writes over
 * every plane). The same sums either way. */
__kernel void conv_gemm_cpu_px(__global const float *restrict src, int src_off, __global const float *restrict wp,
                               int wp_off, int Np, __global float *restrict out, int out_off, int PQ, int N, int K,
                               int src_bstride, int src_gstride, int src_cstride, int out_bstride, int out_nstride,
                               __global const float *bias, int bias_off, __global const float *scale,
                               int scale_off, __global const float *shift, int shift_off, int epi, int act,
                               int k_begin, int k_end, int seg, int tiles_first)
{
    const int n_tiles = Np / CPU_RM, strips = (PQ + CPU_NC - 1) / CPU_NC;
    const int t = get_global_id(0), g = get_global_id(1), b = get_global_id(2);
    if (t >= strips * n_tiles)
        return;
    const int n0 = (tiles_first ? t % n_tiles : t / strips) * CPU_RM;
    const int m0 = (tiles_first ? t / n_tiles : t % strips) * CPU_NC;
    const int full = m0 + CPU_NC <= PQ;
    __global const float *s = src + src_off + b * src_bstride + g * src_gstride + m0;
    __global const float *wk = wp + wp_off + (g * n_tiles + n0 / CPU_RM) * K * CPU_RM;
    __global float *o = out + out_off + b * out_bstride + (g * N + n0) * out_nstride + m0;
    float16 acc[CPU_RM * CPU_NV]; /* channel i, pixels m0 + 16*v: acc[v*CPU_RM + i] */
TEENY_UNROLL
    for (int i = 0; i < CPU_RM * CPU_NV; i++)
        acc[i] = (float16)(0.0f);
    if (!(seg & CONV_SEG_FIRST))
        for (int i = 0; i < CPU_RM && n0 + i < N; i++) {
            float v[CPU_NC];
            for (int j = 0; j < CPU_NC; j++)
                v[j] = m0 + j < PQ ? o[i * out_nstride + j] : 0.0f;
            for (int u = 0; u < CPU_NV; u++)
                acc[u * CPU_RM + i] = vload16(u, v);
        }
    for (int k = k_begin; k < k_end; k++) {
        float16 x[CPU_NV];
        if (full) {
TEENY_UNROLL
            for (int v = 0; v < CPU_NV; v++)
                x[v] = vload16(v, s + k * src_cstride);
        } else { /* the last pixels of a plane: the missing ones read as 0 */
            float t[CPU_NC];
            for (int j = 0; j < CPU_NC; j++)
                t[j] = m0 + j < PQ ? s[k * src_cstride + j] : 0.0f;
TEENY_UNROLL
            for (int v = 0; v < CPU_NV; v++)
                x[v] = vload16(v, t);
        }
TEENY_UNROLL
        for (int i = 0; i < CPU_RM; i++) {
            float16 wv = (float16)(wk[k * CPU_RM + i]);
TEENY_UNROLL
            for (int v = 0; v < CPU_NV; v++)
                acc[v * CPU_RM + i] = TEENY_MAD(wv, x[v], acc[v * CPU_RM + i]);
        }
    }
    for (int i = 0; i < CPU_RM && n0 + i < N; i++) {
        __global float *oi = o + i * out_nstride;
        const float2 e = seg & CONV_SEG_LAST
                             ? conv_epilogue(epi, g * N + n0 + i, bias, bias_off, scale, scale_off, shift, shift_off)
                             : (float2)(1.0f, 0.0f);
        float16 r[CPU_NV];
TEENY_UNROLL
        for (int u = 0; u < CPU_NV; u++)
            r[u] = seg & CONV_SEG_LAST ? conv_act16(act, acc[u * CPU_RM + i] * e.x + e.y) : acc[u * CPU_RM + i];
        if (full) {
TEENY_UNROLL
            for (int u = 0; u < CPU_NV; u++)
                vstore16(r[u], u, oi);
        } else {
            float v[CPU_NC];
TEENY_UNROLL
            for (int u = 0; u < CPU_NV; u++)
                vstore16(r[u], u, v);
            for (int j = 0; j < PQ - m0; j++)
                oi[j] = v[j];
        }
    }
}
