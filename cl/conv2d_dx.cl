/*
 * conv2d_dx.cl -- the input gradient of a convolution with 1-4 input
 * channels per group, computed directly (src/ops/conv2d/dx_direct.c plans it):
 * the 7x7 stem's dx as an implicit GEMM would have 3 columns. A program of
 * its own, apart from conv2d.cl's GEMMs and depthwise kernels, because its
 * compile-time shape (DX_CI, DX_R, DX_TAPS) follows the convolution: each
 * shape builds this small program, not the whole conv2d family again.
 * conv_phase_axis is common.cl's.
 */

/* ---- direct input gradient (few input channels per group) ---- */

/* conv_dx_direct's compile-time shape (the host passes all three): DX_CI
 * the input channels per group (1-4, exactly), DX_R the phase columns an
 * item owns, DX_TAPS the column taps per pass (DX_TAPS * DX_CI a multiple
 * of 4: a pass's weights are whole float4s of local memory). */
#ifndef DX_CI
#define DX_CI 4
#endif
#ifndef DX_R
#define DX_R 8
#endif
#ifndef DX_TAPS
#define DX_TAPS 4
#endif
#define DX_WIN (DX_R + DX_TAPS - 1) /* dy values a pass loads for its DX_R x DX_TAPS products per channel */
#define DX_PASS4 (DX_TAPS * DX_CI / 4)

/* The input gradient computed directly where a group has few input
 * channels (the 7x7 stem: dx as an implicit GEMM has 3 columns, so every
 * gathered dy value fed 3 products). geo packs (B, G, Cog, H, W, OH, OW,
 * KH, KW, s_h, s_w, p_h, p_w, d_h, d_w, n_w), steps (step_h, step_w, e_h,
 * e_w): per axis the tap step s / gcd(s, d) of a stride phase and the dy
 * step d / gcd(s, d) between its taps (conv_phase_axis).
 * Grid (items, G * phases, B), any work-group size (items in the first
 * dimension only): group (., g * phases + z, b) works on stride phase z =
 * (rh, rw) (rh = z / n_w) of dx[b] in group g, the dx positions
 * (rh + p*s_h, rw + q*s_w); its item i owns phase row p = i / NX and the
 * DX_R phase columns q0 + r*e_w (r < DX_R; x = i % NX, q0 = (x / e_w) *
 * DX_R * e_w + x % e_w), for all DX_CI channels of the group, in
 * registers. The phase sees kernel rows kh0 + i_h*step_h (dy row p + c_h -
 * i_h*e_h) and columns kw0 + t*step_w (dy column q + c_w - t*e_w), so
 * output column r and column tap t meet at dy column
 * q0 + c_w + (r - t)*e_w: per output channel and kernel row, a pass of
 * DX_TAPS column taps loads the DX_WIN dy values of that row once and
 * reuses each across the outputs and taps it meets (DX_R * DX_TAPS *
 * DX_CI products per DX_WIN loads). The phase's weights, every output
 * channel of the group, are staged once in local memory as
 * wl[co][i_h][pass][DX_TAPS][DX_CI] (taps past the phase's zero, never
 * used), one barrier, outside any loop. Sums run over co, then kernel
 * rows, then column taps, in that fixed order; a position no tap reaches
 * gets 0. Each dx element is written by exactly one item. */
__kernel void conv_dx_direct(__global const float *restrict dy, int dy_off, __global const float *restrict w,
                             int w_off, __global float *restrict dx, int dx_off, int16 geo, int4 steps,
                             __local float4 *restrict wl)
{
    const int G = geo.s1, Cog = geo.s2, H = geo.s3, W = geo.s4, OH = geo.s5, OW = geo.s6, KH = geo.s7,
              KW = geo.s8, s_h = geo.s9, s_w = geo.sa, p_h = geo.sb, p_w = geo.sc, d_h = geo.sd, d_w = geo.se,
              n_w = geo.sf;
    const int step_h = steps.s0, step_w = steps.s1, e_h = steps.s2, e_w = steps.s3;
    const int phases = min(s_h, H) * n_w, g = get_group_id(1) / phases, z = get_group_id(1) - g * phases;
    const int b = get_group_id(2), rh = z / n_w, rw = z - rh * n_w;
    const int3 th = conv_phase_axis(rh, s_h, p_h, d_h, KH, step_h);
    const int3 tw = conv_phase_axis(rw, s_w, p_w, d_w, KW, step_w);
    const int n_th = th.y && tw.y ? th.y : 0, n_pass = (tw.y + DX_TAPS - 1) / DX_TAPS;
    const int P = (H - rh + s_h - 1) / s_h, Q = (W - rw + s_w - 1) / s_w;
    const int NX = (Q + DX_R * e_w - 1) / (DX_R * e_w) * e_w;

    /* the phase's weights: co, kernel row, pass, tap, channel */
    const int KHW = KH * KW, n_stage = Cog * n_th * n_pass * (DX_TAPS * DX_CI);
    __local float *ws = (__local float *)wl;
    for (int e = get_local_id(0); e < n_stage; e += get_local_size(0)) {
        const int ci = e % DX_CI, t = e / DX_CI % (n_pass * DX_TAPS), ih = e / (DX_CI * n_pass * DX_TAPS) % n_th;
        const int co = e / (DX_CI * n_pass * DX_TAPS * n_th);
        ws[e] = t < tw.y ? w[w_off + ((g * Cog + co) * DX_CI + ci) * KHW + (th.x + ih * step_h) * KW + tw.x +
                             t * step_w]
                         : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const int item = get_global_id(0), p = item / NX, x = item - p * NX;
    if (p >= P)
        return;
    const int q0 = x / e_w * (DX_R * e_w) + x % e_w, OHW = OH * OW;
    float acc[DX_R * DX_CI];
    TEENY_UNROLL
    for (int i = 0; i < DX_R * DX_CI; i++)
        acc[i] = 0.0f;
    __global const float *dyg = dy + dy_off + (b * G + g) * Cog * OHW;
    for (int co = 0; co < Cog; co++) {
        for (int ih = 0; ih < n_th; ih++) {
            const int oh = p + th.z - ih * e_h;
            if ((uint)oh >= (uint)OH)
                continue;
            __global const float *row = dyg + co * OHW + oh * OW;
            __local const float4 *wr = wl + (co * n_th + ih) * n_pass * DX_PASS4;
            for (int pass = 0; pass < n_pass; pass++) {
                const int col0 = q0 + tw.z - (DX_TAPS - 1 + pass * DX_TAPS) * e_w;
                float win[DX_WIN], wt[DX_TAPS * DX_CI];
                TEENY_UNROLL
                for (int j = 0; j < DX_WIN; j++) {
                    const int col = col0 + j * e_w;
                    win[j] = (uint)col < (uint)OW ? row[col] : 0.0f;
                }
                TEENY_UNROLL
                for (int j = 0; j < DX_PASS4; j++) {
                    const float4 v = wr[pass * DX_PASS4 + j];
                    wt[4 * j] = v.x;
                    wt[4 * j + 1] = v.y;
                    wt[4 * j + 2] = v.z;
                    wt[4 * j + 3] = v.w;
                }
                TEENY_UNROLL
                for (int t = 0; t < DX_TAPS; t++) {
                    if (pass * DX_TAPS + t < tw.y) /* a branch, not a break: the loop stays unrolled */
                        TEENY_UNROLL
                        for (int r = 0; r < DX_R; r++)
                            TEENY_UNROLL
                            for (int ci = 0; ci < DX_CI; ci++)
                                acc[r * DX_CI + ci] =
                                    TEENY_MAD(win[r - t + DX_TAPS - 1], wt[t * DX_CI + ci], acc[r * DX_CI + ci]);
                }
            }
        }
    }
    __global float *out = dx + dx_off + ((b * G + g) * DX_CI * H + rh + p * s_h) * W + rw;
    TEENY_UNROLL
    for (int r = 0; r < DX_R; r++) {
        const int q = q0 + r * e_w;
        if (q < Q)
            TEENY_UNROLL
            for (int ci = 0; ci < DX_CI; ci++)
                out[ci * H * W + q * s_w] = acc[r * DX_CI + ci];
    }
}
