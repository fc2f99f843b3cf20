/*
 * winograd.cl -- the transforms of Winograd F(2x2, 3x3) for 3x3, stride-1,
 * dilation-1, ungrouped convolutions over NCHW fp32 tensors
 * (src/ops/conv2d_wino.c runs them). OpenCL C 1.2.
 *
 * out = conv(in, g) is computed over tiles of 2x2 outputs, each from a 4x4
 * input tile d (Lavin & Gray, "Fast Algorithms for Convolutional Neural
 * Networks", 2016):
 *   U = G g G^T per (output channel, input channel)   wino_weights
 *   V = B^T d B per (input channel, tile)              wino_input
 *   M_e = U_e V_e over input channels, e = 0..15      cl/conv2d.cl's GEMMs
 *   out tile = A^T M A, cropped, through the epilogue  wino_output
 * and the weight gradient through the adjoints of the same maps:
 *   dM = A dY A^T per (output channel, tile)          wino_dy
 *   dU_e = dM_e V_e^T over tiles, e = 0..15           cl/conv2d.cl's GEMMs
 *   dg = G^T dU G per (output channel, input channel) wino_weights_grad
 * with G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],
 *      B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],
 *      A^T = [1 1 1 0; 0 1 -1 -1].
 * Layouts (floats, each buffer with an element offset): in [B, I, H, W],
 * out [B, O, OH, OW]; U and dU [16][O][I], V [16][I][Tp], M and dM
 * [16][O][Tp], where
 * tile t = (b*TH + ty)*TW + tx covers outputs (2ty.., 2tx..), TH x TW =
 * ceil(OH/2) x ceil(OW/2) per image, T tiles in all, Tp >= T a multiple of
 * 4 (the GEMM's float4 loads along t); V's columns past T are zero.
 * F(4x4, 3x3) (the wino4_* kernels, the forward and input gradient where
 * the profile asks for it) is the same with 4x4 output tiles from 6x6
 * input tiles, 36 GEMMs, 4x fewer multiply-adds than the direct sum:
 *   G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6;
 *        1/24 -1/12 1/6; 0 0 1],
 *   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0;
 *          0 2 -1 -2 1 0; 0 4 0 -5 0 1],
 *   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1],
 * U [36][O][I], V [36][I][Tp], M [36][O][Tp], tiles of 4x4 outputs.
 * Every element is computed by one item in a fixed order: no atomics, the
 * same bits every run. No local memory, no barriers: any work-group size.
 */

/* U[e][o][i] = (G g G^T)[e] of filter g = w[o][i] (w [O][I][3][3]), or
 * with flip the input gradient's w'[o][i][r][s] = w[i][o][2-r][2-s]
 * (w [I][O][3][3]). Grid (I, O), one item per filter. */
__kernel void wino_weights(__global const float *restrict w, int w_off, int O, int I, int flip,
                           __global float *restrict u, int u_off)
{
    const int i = get_global_id(0), o = get_global_id(1);
    if (i >= I || o >= O)
        return;
    const int base = w_off + (flip ? i * O + o : o * I + i) * 9;
    float g[9], t[12];
    TEENY_UNROLL
    for (int k = 0; k < 9; k++)
        g[k] = w[base + (flip ? 8 - k : k)];
    TEENY_UNROLL
    for (int s = 0; s < 3; s++) { /* G g: 4 x 3 */
        float a = g[s], b = g[3 + s], c = g[6 + s];
        t[s] = a;
        t[3 + s] = 0.5f * (a + b + c);
        t[6 + s] = 0.5f * (a - b + c);
        t[9 + s] = c;
    }
    TEENY_UNROLL
    for (int r = 0; r < 4; r++) { /* (G g) G^T: 4 x 4 */
        float a = t[3 * r], b = t[3 * r + 1], c = t[3 * r + 2];
        const int e = u_off + 4 * r * O * I + o * I + i, step = O * I;
        u[e] = a;
        u[e + step] = 0.5f * (a + b + c);
        u[e + 2 * step] = 0.5f * (a - b + c);
        u[e + 3 * step] = c;
    }
}

/* V[e][c][t] = (B^T d B)[e] of tile t's 4x4 input patch of channel c,
 * rows 2ty - pad_h .. +3, columns 2tx - pad_w .. +3 (zero outside the
 * image, and for t >= T). Grid (Tp, I): items along t write adjacent
 * floats. */
__kernel void wino_input(__global const float *restrict x, int x_off, int I, int H, int W, int pad_h, int pad_w,
                         int TH, int TW, int T, __global float *restrict v, int v_off, int Tp)
{
    const int t = get_global_id(0), c = get_global_id(1);
    if (t >= Tp || c >= I)
        return;
    float d[16], e[16];
    if (t < T) {
        const int b = t / (TH * TW), r = t - b * TH * TW, ty = r / TW, tx = r - ty * TW;
        const int h0 = 2 * ty - pad_h, w0 = 2 * tx - pad_w, base = x_off + (b * I + c) * H * W;
        TEENY_UNROLL
        for (int i = 0; i < 4; i++)
            TEENY_UNROLL
            for (int j = 0; j < 4; j++) {
                int h = h0 + i, ww = w0 + j;
                d[4 * i + j] = (uint)h < (uint)H && (uint)ww < (uint)W ? x[base + h * W + ww] : 0.0f;
            }
    } else {
        TEENY_UNROLL
        for (int k = 0; k < 16; k++)
            d[k] = 0.0f;
    }
    TEENY_UNROLL
    for (int j = 0; j < 4; j++) { /* B^T d, column j */
        float d0 = d[j], d1 = d[4 + j], d2 = d[8 + j], d3 = d[12 + j];
        e[j] = d0 - d2;
        e[4 + j] = d1 + d2;
        e[8 + j] = d2 - d1;
        e[12 + j] = d1 - d3;
    }
    const int step = I * Tp;
    TEENY_UNROLL
    for (int i = 0; i < 4; i++) { /* (B^T d) B, row i */
        float a0 = e[4 * i], a1 = e[4 * i + 1], a2 = e[4 * i + 2], a3 = e[4 * i + 3];
        const int at = v_off + 4 * i * step + c * Tp + t;
        v[at] = a0 - a2;
        v[at + step] = a1 + a2;
        v[at + 2 * step] = a2 - a1;
        v[at + 3 * step] = a1 - a3;
    }
}

/* out[b][o][2ty + i][2tx + j] = act((A^T M A)[i][j] * sc + sh) of tile t
 * = (b, ty, tx) and output channel o, the outputs inside OH x OW only;
 * sc, sh from conv_epilogue (flags epi: bias, scale, shift; act: none,
 * ReLU, SiLU). Grid (T, O). */
__kernel void wino_output(__global const float *restrict m, int m_off, int Tp, int O, int TH, int TW, int T,
                          __global float *restrict out, int out_off, int OH, int OW, __global const float *bias,
                          int bias_off, __global const float *scale, int scale_off, __global const float *shift,
                          int shift_off, int epi, int act)
{
    const int t = get_global_id(0), o = get_global_id(1);
    if (t >= T || o >= O)
        return;
    float a[16], r[8];
    const int step = O * Tp;
    TEENY_UNROLL
    for (int k = 0; k < 16; k++)
        a[k] = m[m_off + k * step + o * Tp + t];
    TEENY_UNROLL
    for (int j = 0; j < 4; j++) { /* A^T a: 2 x 4 */
        r[j] = a[j] + a[4 + j] + a[8 + j];
        r[4 + j] = a[4 + j] - a[8 + j] - a[12 + j];
    }
    const float2 f = conv_epilogue(epi, o, bias, bias_off, scale, scale_off, shift, shift_off);
    const int b = t / (TH * TW), q = t - b * TH * TW, ty = q / TW, tx = q - ty * TW;
    const int oh = 2 * ty, ow = 2 * tx, base = out_off + (b * O + o) * OH * OW + oh * OW + ow;
    TEENY_UNROLL
    for (int i = 0; i < 2; i++) { /* (A^T a) A, row i */
        float y0 = r[4 * i] + r[4 * i + 1] + r[4 * i + 2], y1 = r[4 * i + 1] - r[4 * i + 2] - r[4 * i + 3];
        if (oh + i < OH)
            out[base + i * OW] = conv_act(act, y0 * f.x + f.y);
        if (oh + i < OH && ow + 1 < OW)
            out[base + i * OW + 1] = conv_act(act, y1 * f.x + f.y);
    }
}

/* dM[e][o][t] = (A Y A^T)[e] of tile t's 2x2 output gradient Y of channel
 * o, dy [B, O, OH, OW] (zero outside OH x OW, and for t >= T): the adjoint
 * of wino_output's A^T M A, for the weight gradient. Grid (Tp, O): items
 * along t write adjacent floats. */
__kernel void wino_dy(__global const float *restrict dy, int dy_off, int O, int OH, int OW, int TH, int TW, int T,
                      __global float *restrict m, int m_off, int Tp)
{
    const int t = get_global_id(0), o = get_global_id(1);
    if (t >= Tp || o >= O)
        return;
    float y00 = 0.0f, y01 = 0.0f, y10 = 0.0f, y11 = 0.0f;
    if (t < T) {
        const int b = t / (TH * TW), q = t - b * TH * TW, ty = q / TW, tx = q - ty * TW;
        const int oh = 2 * ty, ow = 2 * tx, base = dy_off + (b * O + o) * OH * OW + oh * OW + ow;
        const int right = ow + 1 < OW, down = oh + 1 < OH;
        y00 = dy[base];
        y01 = right ? dy[base + 1] : 0.0f;
        y10 = down ? dy[base + OW] : 0.0f;
        y11 = right && down ? dy[base + OW + 1] : 0.0f;
    }
    /* A Y: 4 x 2, row i = (r[2i], r[2i + 1]) */
    const float r[8] = {y00, y01, y00 + y10, y01 + y11, y00 - y10, y01 - y11, -y10, -y11};
    const int step = O * Tp;
    TEENY_UNROLL
    for (int i = 0; i < 4; i++) { /* (A Y) A^T, row i */
        const float a = r[2 * i], c = r[2 * i + 1];
        const int at = m_off + 4 * i * step + o * Tp + t;
        m[at] = a;
        m[at + step] = a + c;
        m[at + 2 * step] = a - c;
        m[at + 3 * step] = -c;
    }
}

/* dw[o][i] = G^T dU[o][i] G (3x3 from the 16 values dU[e][o][i]), the
 * adjoint of wino_weights' G g G^T: the weight gradient, written over
 * dw [O][I][3][3]. Grid (I, O), one item per filter. */
__kernel void wino_weights_grad(__global const float *restrict du, int du_off, int O, int I,
                                __global float *restrict dw, int dw_off)
{
    const int i = get_global_id(0), o = get_global_id(1);
    if (i >= I || o >= O)
        return;
    float d[16], t[12];
    TEENY_UNROLL
    for (int k = 0; k < 16; k++)
        d[k] = du[du_off + k * O * I + o * I + i];
    TEENY_UNROLL
    for (int j = 0; j < 4; j++) { /* G^T d: 3 x 4 */
        const float a = d[j], b = d[4 + j], c = d[8 + j], e = d[12 + j];
        t[j] = a + 0.5f * (b + c);
        t[4 + j] = 0.5f * (b - c);
        t[8 + j] = 0.5f * (b + c) + e;
    }
    const int base = dw_off + (o * I + i) * 9;
    TEENY_UNROLL
    for (int r = 0; r < 3; r++) { /* (G^T d) G, row r */
        const float a = t[4 * r], b = t[4 * r + 1], c = t[4 * r + 2], e = t[4 * r + 3];
        dw[base + 3 * r] = a + 0.5f * (b + c);
        dw[base + 3 * r + 1] = 0.5f * (b - c);
        dw[base + 3 * r + 2] = 0.5f * (b + c) + e;
    }
}

/* ---- F(4x4, 3x3) ---- */

/* The 1-D maps of F(4, 3): v = B^T d (6 from 6), u = G g (6 from 3),
 * y = A^T m (4 from 6), each over elements s apart in a[] from a[0]. */
TEENY_INLINE void wino4_bt(float *v, int vs, const float *d, int ds)
{
    const float d0 = d[0], d1 = d[ds], d2 = d[2 * ds], d3 = d[3 * ds], d4 = d[4 * ds], d5 = d[5 * ds];
    v[0] = 4.0f * d0 - 5.0f * d2 + d4;
    v[vs] = d3 + d4 - 4.0f * (d1 + d2);
    v[2 * vs] = d4 - d3 + 4.0f * (d1 - d2);
    v[3 * vs] = d4 - d2 + 2.0f * (d3 - d1);
    v[4 * vs] = d4 - d2 + 2.0f * (d1 - d3);
    v[5 * vs] = 4.0f * d1 - 5.0f * d3 + d5;
}

TEENY_INLINE void wino4_g(float *u, int us, const float *g, int gs)
{
    const float g0 = g[0], g1 = g[gs], g2 = g[2 * gs];
    const float even = g0 + g2, even24 = g0 * (1.0f / 24.0f) + g2 * (1.0f / 6.0f), odd12 = g1 * (1.0f / 12.0f);
    u[0] = 0.25f * g0;
    u[us] = (even + g1) * (-1.0f / 6.0f);
    u[2 * us] = (even - g1) * (-1.0f / 6.0f);
    u[3 * us] = even24 + odd12;
    u[4 * us] = even24 - odd12;
    u[5 * us] = g2;
}

TEENY_INLINE void wino4_at(float *y, int ys, const float *m, int ms)
{
    const float m0 = m[0], m1 = m[ms], m2 = m[2 * ms], m3 = m[3 * ms], m4 = m[4 * ms], m5 = m[5 * ms];
    const float s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
    y[0] = m0 + s12 + s34;
    y[ys] = d12 + 2.0f * d34;
    y[2 * ys] = s12 + 4.0f * s34;
    y[3 * ys] = d12 + 8.0f * d34 + m5;
}

/* U[e][o][i] = (G g G^T)[e], as wino_weights (flip: the input gradient's
 * filters). Grid (I, O). */
__kernel void wino4_weights(__global const float *restrict w, int w_off, int O, int I, int flip,
                            __global float *restrict u, int u_off)
{
    const int i = get_global_id(0), o = get_global_id(1);
    if (i >= I || o >= O)
        return;
    const int base = w_off + (flip ? i * O + o : o * I + i) * 9;
    float g[9], t[18], r[36];
    TEENY_UNROLL
    for (int k = 0; k < 9; k++)
        g[k] = w[base + (flip ? 8 - k : k)];
    TEENY_UNROLL
    for (int s = 0; s < 3; s++) /* G g: 6 x 3, column s */
        wino4_g(t + s, 3, g + s, 3);
    TEENY_UNROLL
    for (int a = 0; a < 6; a++) /* (G g) G^T: 6 x 6, row a */
        wino4_g(r + 6 * a, 1, t + 3 * a, 1);
    const int at = u_off + o * I + i, step = O * I;
    TEENY_UNROLL
    for (int e = 0; e < 36; e++)
        u[at + e * step] = r[e];
}

/* V[e][c][t] = (B^T d B)[e] of tile t's 6x6 input patch of channel c,
 * rows 4ty - pad_h .. +5, columns 4tx - pad_w .. +5 (zero outside the
 * image, and for t >= T). Grid (Tp, I). */
__kernel void wino4_input(__global const float *restrict x, int x_off, int I, int H, int W, int pad_h, int pad_w,
                          int TH, int TW, int T, __global float *restrict v, int v_off, int Tp)
{
    const int t = get_global_id(0), c = get_global_id(1);
    if (t >= Tp || c >= I)
        return;
    float d[36], e[36];
    if (t < T) {
        const int b = t / (TH * TW), r = t - b * TH * TW, ty = r / TW, tx = r - ty * TW;
        const int h0 = 4 * ty - pad_h, w0 = 4 * tx - pad_w, base = x_off + (b * I + c) * H * W;
        TEENY_UNROLL
        for (int i = 0; i < 6; i++)
            TEENY_UNROLL
            for (int j = 0; j < 6; j++) {
                int h = h0 + i, ww = w0 + j;
                d[6 * i + j] = (uint)h < (uint)H && (uint)ww < (uint)W ? x[base + h * W + ww] : 0.0f;
            }
    } else {
        TEENY_UNROLL
        for (int k = 0; k < 36; k++)
            d[k] = 0.0f;
    }
    TEENY_UNROLL
    for (int j = 0; j < 6; j++) /* B^T d, column j */
        wino4_bt(e + j, 6, d + j, 6);
    TEENY_UNROLL
    for (int i = 0; i < 6; i++) /* (B^T d) B, row i */
        wino4_bt(d + 6 * i, 1, e + 6 * i, 1);
    const int at = v_off + c * Tp + t, step = I * Tp;
    TEENY_UNROLL
    for (int k = 0; k < 36; k++)
        v[at + k * step] = d[k];
}

/* out[b][o][4ty + i][4tx + j] = act((A^T M A)[i][j] * sc + sh), the
 * outputs inside OH x OW only, as wino_output. Grid (T, O). */
__kernel void wino4_output(__global const float *restrict m, int m_off, int Tp, int O, int TH, int TW, int T,
                           __global float *restrict out, int out_off, int OH, int OW, __global const float *bias,
                           int bias_off, __global const float *scale, int scale_off, __global const float *shift,
                           int shift_off, int epi, int act)
{
    const int t = get_global_id(0), o = get_global_id(1);
    if (t >= T || o >= O)
        return;
    float a[36], r[24], y[16];
    const int step = O * Tp;
    TEENY_UNROLL
    for (int k = 0; k < 36; k++)
        a[k] = m[m_off + k * step + o * Tp + t];
    TEENY_UNROLL
    for (int j = 0; j < 6; j++) /* A^T a: 4 x 6, column j */
        wino4_at(r + j, 6, a + j, 6);
    TEENY_UNROLL
    for (int i = 0; i < 4; i++) /* (A^T a) A, row i */
        wino4_at(y + 4 * i, 1, r + 6 * i, 1);
    const float2 f = conv_epilogue(epi, o, bias, bias_off, scale, scale_off, shift, shift_off);
    const int b = t / (TH * TW), q = t - b * TH * TW, ty = q / TW, tx = q - ty * TW;
    const int oh = 4 * ty, ow = 4 * tx, base = out_off + (b * O + o) * OH * OW + oh * OW + ow;
    TEENY_UNROLL
    for (int i = 0; i < 4; i++)
        TEENY_UNROLL
        for (int j = 0; j < 4; j++)
            if (oh + i < OH && ow + j < OW)
                out[base + i * OW + j] = conv_act(act, y[4 * i + j] * f.x + f.y);
}
