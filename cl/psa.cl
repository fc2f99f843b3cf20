/*
 * psa.cl -- the rearrangements around PSA (YOLO C2PSA) attention and their
 * backwards. Layouts, with N = H*W tokens and kd the key dim:
 *   qkv    [B, heads*4*kd, H, W] NCHW; head h's channels
 *          [h*4kd, +kd) Q, [+kd, +2kd) K, [+2kd, +3kd) V_lo, [+3kd, +4kd) V_hi
 *   packed [4, B*heads, N, kd]: sections Q, K, V_lo, V_hi
 *   v, out [B, heads*2*kd, H, W] NCHW
 *   o_lo, o_hi [B*heads, N, kd]
 * Every kernel is a grid over the elements of its destination (any
 * work-group size): work-item e computes destination element e, so every
 * element has exactly one writer and the backwards overwrite instead of
 * accumulating. Destinations are walked in memory order, so writes are
 * coalesced; the gathers read with strides. The grid is 1-D, but for the V
 * extraction, whose rows of n tokens are contiguous on both sides: a 2-D
 * grid (token, row) with no division per element (on a CPU, the token
 * loop vectorizes). The fused attention that needs
 * none of these copies is attn_fwd / attn_bwd_* in attention.cl.
 */

/* packed[sec][bh][n][j] = qkv[b][h*4kd + sec*kd + j][n] */
__kernel void psa_pack(__global const float *qkv, int qkv_off, __global float *packed, int p_off, int heads, int n,
                       int kd, int total)
{
    const int e = get_global_id(0);
    if (e >= total)
        return;
    const int j = e % kd, t = e / kd, tok = t % n, u = t / n;
    const int bh_all = total / (4 * n * kd), bh = u % bh_all, sec = u / bh_all;
    const int b = bh / heads, h = bh % heads, c = heads * 4 * kd;
    packed[p_off + e] = qkv[qkv_off + (b * c + h * 4 * kd + sec * kd + j) * n + tok];
}

/* d_qkv[b][ch][n] = d_packed[ch's section][bh][n][ch's j]: covers every
 * channel, so d_qkv is fully overwritten. */
__kernel void psa_pack_backward(__global const float *dp, int dp_off, __global float *dqkv, int dq_off, int heads,
                                int n, int kd, int total)
{
    const int e = get_global_id(0);
    if (e >= total)
        return;
    const int tok = e % n, t = e / n, c = heads * 4 * kd, ch = t % c, b = t / c;
    const int h = ch / (4 * kd), r = ch % (4 * kd), sec = r / kd, j = r % kd;
    const int bh_all = total / (4 * n * kd), bh = b * heads + h;
    dqkv[dq_off + e] = dp[dp_off + ((sec * bh_all + bh) * n + tok) * kd + j];
}

/* v[b][h*2kd + j][n] = qkv[b][h*4kd + 2kd + j][n] */
__kernel void psa_extract_v(__global const float *qkv, int qkv_off, __global float *v, int v_off, int heads, int n,
                            int kd, int total)
{
    const int tok = get_global_id(0), t = get_global_id(1), e = t * n + tok;
    if (tok >= n || e >= total)
        return;
    const int cv = heads * 2 * kd, ch = t % cv, b = t / cv;
    const int h = ch / (2 * kd), j = ch % (2 * kd);
    v[v_off + e] = qkv[qkv_off + (b * 2 * cv + h * 4 * kd + 2 * kd + j) * n + tok];
}

/* d_qkv[b][ch][n] = d_v at ch's V position, 0 in the Q and K channels. */
__kernel void psa_extract_v_backward(__global const float *dv, int dv_off, __global float *dqkv, int dq_off,
                                     int heads, int n, int kd, int total)
{
    const int tok = get_global_id(0), t = get_global_id(1), e = t * n + tok;
    if (tok >= n || e >= total)
        return;
    const int c = heads * 4 * kd, ch = t % c, b = t / c;
    const int h = ch / (4 * kd), r = ch % (4 * kd);
    dqkv[dq_off + e] = r < 2 * kd ? 0.0f : dv[dv_off + (b * heads * 2 * kd + h * 2 * kd + r - 2 * kd) * n + tok];
}

/* The CPU variants of the two above (TEENY_VARIANT_CPU, src/tune): grid (rows), item
 * t copies (or zeroes) row t's n contiguous tokens in a loop the compiler
 * vectorizes; a CPU pays for every work-item and every division. */
__kernel void psa_extract_v_cpu(__global const float *qkv, int qkv_off, __global float *v, int v_off, int heads,
                                int n, int kd, int total)
{
    const int t = get_global_id(0);
    if (t >= total / n)
        return;
    const int cv = heads * 2 * kd, ch = t % cv, b = t / cv, h = ch / (2 * kd), j = ch % (2 * kd);
    __global const float *src = qkv + qkv_off + (b * 2 * cv + h * 4 * kd + 2 * kd + j) * n;
    __global float *dst = v + v_off + t * n;
    for (int e = 0; e < n; e++)
        dst[e] = src[e];
}

__kernel void psa_extract_v_backward_cpu(__global const float *dv, int dv_off, __global float *dqkv, int dq_off,
                                         int heads, int n, int kd, int total)
{
    const int t = get_global_id(0);
    if (t >= total / n)
        return;
    const int c = heads * 4 * kd, ch = t % c, b = t / c, h = ch / (4 * kd), r = ch % (4 * kd);
    __global float *dst = dqkv + dq_off + t * n;
    if (r < 2 * kd) {
        for (int e = 0; e < n; e++)
            dst[e] = 0.0f;
    } else {
        __global const float *src = dv + dv_off + (b * heads * 2 * kd + h * 2 * kd + r - 2 * kd) * n;
        for (int e = 0; e < n; e++)
            dst[e] = src[e];
    }
}

/* out[b][h*2kd + j][n] = j < kd ? o_lo[bh][n][j] : o_hi[bh][n][j - kd] */
__kernel void psa_merge(__global const float *lo, int lo_off, __global const float *hi, int hi_off,
                        __global float *out, int out_off, int heads, int n, int kd, int total)
{
    const int e = get_global_id(0);
    if (e >= total)
        return;
    const int tok = e % n, t = e / n, cv = heads * 2 * kd, ch = t % cv, b = t / cv;
    const int h = ch / (2 * kd), j = ch % (2 * kd), bh = b * heads + h;
    out[out_off + e] = j < kd ? lo[lo_off + (bh * n + tok) * kd + j] : hi[hi_off + (bh * n + tok) * kd + j - kd];
}

/* d_lo[bh][n][j] = d_out[b][h*2kd + j][n], d_hi likewise at +kd. */
__kernel void psa_merge_backward(__global const float *dout, int do_off, __global float *dlo, int lo_off,
                                 __global float *dhi, int hi_off, int heads, int n, int kd, int total)
{
    const int e = get_global_id(0);
    if (e >= total)
        return;
    const int j = e % kd, t = e / kd, tok = t % n, bh = t / n;
    const int b = bh / heads, h = bh % heads;
    const int src = do_off + (b * heads * 2 * kd + h * 2 * kd + j) * n + tok;
    dlo[lo_off + e] = dout[src];
    dhi[hi_off + e] = dout[src + kd * n];
}
