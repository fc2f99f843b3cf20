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

/* Filter g = w[o][i] (w [O][I][3][3]), or with flip the input gradient's
 * w'[o][i][r][s] = w[i][o][2-r][2-s] (w [I][O][3][3]): 9 taps, row-major. */
TEENY_INLINE void wino_filter(float *g, __global const float *restrict w, int w_off, int O, int I, int flip, int i,
                              int o)
{
    const int base = w_off + (flip ? i * O + o : o * I + i) * 9;
    TEENY_UNROLL
    for (int k = 0; k < 9; k++)
        g[k] = w[base + (flip ? 8 - k : k)];
}

/* Tile t's n x n input patch of channel c into d (row-major): rows
 * (n - 2) ty - pad_h .. + n - 1, columns (n - 2) tx - pad_w .. (n = 4:
 * F(2x2, 3x3), 6: F(4x4, 3x3)), zero outside the image and for t >= T. */
TEENY_INLINE void wino_patch(float *d, const int n, __global const float *restrict x, int x_off, int I, int H, int W,
                             int pad_h, int pad_w, int TH, int TW, int T, int t, int c)
{
    if (t < T) {
        const int b = t / (TH * TW), r = t - b * TH * TW, ty = r / TW, tx = r - ty * TW;
        const int h0 = (n - 2) * ty - pad_h, w0 = (n - 2) * tx - pad_w, base = x_off + (b * I + c) * H * W;
        TEENY_UNROLL
        for (int i = 0; i < n; i++)
            TEENY_UNROLL
            for (int j = 0; j < n; j++) {
                int h = h0 + i, ww = w0 + j;
                d[n * i + j] = (uint)h < (uint)H && (uint)ww < (uint)W ? x[base + h * W + ww] : 0.0f;
            }
    } else {
        TEENY_UNROLL
        for (int k = 0; k < n * n; k++)
            d[k] = 0.0f;
    }
}

/* Tile t = (b*TH + ty)*TW + tx of n x n outputs: its first output
 * (*oh, *ow) = (n ty, n tx), and that output's element in plane (b, o) of
 * a [B, O, OH, OW] tensor at element off. */
TEENY_INLINE int wino_tile_at(int t, int TH, int TW, const int n, int O, int o, int OH, int OW, int off, int *oh,
                              int *ow)
{
    const int b = t / (TH * TW), q = t - b * TH * TW, ty = q / TW, tx = q - ty * TW;
    *oh = n * ty;
    *ow = n * tx;
    return off + (b * O + o) * OH * OW + *oh * OW + *ow;
}

/* Tile t's ne values of M of output channel o, a[k] = m[m_off + k*step +
 * o*Tp + t], step = O*Tp. */
TEENY_INLINE void wino_gather(float *a, const int ne, __global const float *restrict m, int m_off, int step, int o,
                              int Tp, int t)
{
    TEENY_UNROLL
    for (int k = 0; k < ne; k++)
        a[k] = m[m_off + k * step + o * Tp + t];
}

/* U[e][o][i] = (G g G^T)[e] of filter g = w[o][i] (w [O][I][3][3]), or
 * with flip the input gradient's w'[o][i][r][s] = w[i][o][2-r][2-s]
 * (w [I][O][3][3]). Grid (I, O), one item per filter. */
__kernel void wino_weights(__global const float *restrict w, int w_off, int O, int I, int flip,
                           __global float *restrict u, int u_off)
{
    const int i = get_global_id(0), o = get_global_id(1);
    if (i >= I || o >= O)
        return;
    float g[9], t[12];
    wino_filter(g, w, w_off, O, I, flip, i, o);
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

/* The 2-D maps of F(4, 3) through the 1-D ones, rows of 6 (row-major):
 * r = G g G^T (6x6 from 3x3; t: G g, 6x3), d = B^T d B in place (e: B^T
 * d), y = A^T a A (4x4 from 6x6; r: A^T a, 4x6). */
TEENY_INLINE void wino4_g2(float *r, float *t, const float *g)
{
    TEENY_UNROLL
    for (int s = 0; s < 3; s++) /* G g: 6 x 3, column s */
        wino4_g(t + s, 3, g + s, 3);
    TEENY_UNROLL
    for (int a = 0; a < 6; a++) /* (G g) G^T: 6 x 6, row a */
        wino4_g(r + 6 * a, 1, t + 3 * a, 1);
}

TEENY_INLINE void wino4_bt2(float *d, float *e)
{
    TEENY_UNROLL
    for (int j = 0; j < 6; j++) /* B^T d, column j */
        wino4_bt(e + j, 6, d + j, 6);
    TEENY_UNROLL
    for (int i = 0; i < 6; i++) /* (B^T d) B, row i */
        wino4_bt(d + 6 * i, 1, e + 6 * i, 1);
}

TEENY_INLINE void wino4_at2(float *y, float *r, const float *a)
{
    TEENY_UNROLL
    for (int j = 0; j < 6; j++) /* A^T a: 4 x 6, column j */
        wino4_at(r + j, 6, a + j, 6);
    TEENY_UNROLL
    for (int i = 0; i < 4; i++) /* (A^T a) A, row i */
        wino4_at(y + 4 * i, 1, r + 6 * i, 1);
}

/* dst[at + k*step] = src[k], k < ne: a tile's ne transformed values, each
 * to its own matrix. */
TEENY_INLINE void wino_scatter(__global float *restrict dst, int at, int step, const float *src, const int ne)
{
    TEENY_UNROLL
    for (int k = 0; k < ne; k++)
        dst[at + k * step] = src[k];
}

/* The arguments of the input (wino_input, wino4_input) and output
 * (wino_output, wino4_output) transforms, each pair's alike. */
#define WINO_INPUT_ARGS                                                                                            \
    __global const float *restrict x, int x_off, int I, int H, int W, int pad_h, int pad_w, int TH, int TW, int T,  \
        __global float *restrict v, int v_off, int Tp
#define WINO_INPUT_PASS x, x_off, I, H, W, pad_h, pad_w, TH, TW, T, v, v_off, Tp
#define WINO_OUTPUT_ARGS                                                                                           \
    __global const float *restrict m, int m_off, int Tp, int O, int TH, int TW, int T, __global float *restrict out, \
        int out_off, int OH, int OW, __global const float *bias, int bias_off, __global const float *scale,         \
        int scale_off, __global const float *shift, int shift_off, int epi, int act
#define WINO_OUTPUT_PASS                                                                                           \
    m, m_off, Tp, O, TH, TW, T, out, out_off, OH, OW, bias, bias_off, scale, scale_off, shift, shift_off, epi, act

/* A^T a A of F(2x2, 3x3): y (2x2) from a (4x4; r: A^T a, 2x4), row-major. */
TEENY_INLINE void wino_at2(float *y, float *r, const float *a)
{
    TEENY_UNROLL
    for (int j = 0; j < 4; j++) { /* A^T a: 2 x 4 */
        r[j] = a[j] + a[4 + j] + a[8 + j];
        r[4 + j] = a[4 + j] - a[8 + j] - a[12 + j];
    }
    TEENY_UNROLL
    for (int i = 0; i < 2; i++) { /* (A^T a) A, row i */
        y[2 * i] = r[4 * i] + r[4 * i + 1] + r[4 * i + 2];
        y[2 * i + 1] = r[4 * i + 1] - r[4 * i + 2] - r[4 * i + 3];
    }
}

/* The output transforms' item (t, o) of grid (T, O): out[b][o][n ty + i]
 * [n tx + j] = act((A^T M A)[i][j] * sc + sh) of tile t = (b, ty, tx) and
 * output channel o (n = 2: F(2x2, 3x3), wino_at2; 4: F(4x4, 3x3),
 * wino4_at2), the outputs inside OH x OW only; sc, sh from conv_epilogue
 * (flags epi: bias, scale, shift; act: none, ReLU, SiLU). */
TEENY_INLINE void wino_output_tile(const int n, WINO_OUTPUT_ARGS)
{
    const int t = get_global_id(0), o = get_global_id(1);
    if (t >= T || o >= O)
        return;
    float a[36], r[24], y[16];
    wino_gather(a, (n + 2) * (n + 2), m, m_off, O * Tp, o, Tp, t);
    if (n == 2)
        wino_at2(y, r, a);
    else
        wino4_at2(y, r, a);
    const float2 f = conv_epilogue(epi, o, bias, bias_off, scale, scale_off, shift, shift_off);
    int oh, ow;
    const int base = wino_tile_at(t, TH, TW, n, O, o, OH, OW, out_off, &oh, &ow);
    TEENY_UNROLL
    for (int i = 0; i < n; i++)
        TEENY_UNROLL
        for (int j = 0; j < n; j++)
            if (oh + i < OH && ow + j < OW)
                out[base + i * OW + j] = conv_act(act, y[n * i + j] * f.x + f.y);
}

/* B^T d B of F(2x2, 3x3) in place over a 4x4 tile d (row-major; e: B^T d). */
TEENY_INLINE void wino_bt2(float *d, float *e)
{
    TEENY_UNROLL
    for (int j = 0; j < 4; j++) { /* B^T d, column j */
        float d0 = d[j], d1 = d[4 + j], d2 = d[8 + j], d3 = d[12 + j];
        e[j] = d0 - d2;
        e[4 + j] = d1 + d2;
        e[8 + j] = d2 - d1;
        e[12 + j] = d1 - d3;
    }
    TEENY_UNROLL
    for (int i = 0; i < 4; i++) { /* (B^T d) B, row i */
        float a0 = e[4 * i], a1 = e[4 * i + 1], a2 = e[4 * i + 2], a3 = e[4 * i + 3];
        d[4 * i] = a0 - a2;
        d[4 * i + 1] = a1 + a2;
        d[4 * i + 2] = a2 - a1;
        d[4 * i + 3] = a1 - a3;
    }
}

/* The input transforms' item (t, c) of grid (Tp, I): tile t's n x n
 * input patch of channel c (wino_patch; n = 4: F(2x2, 3x3), wino_bt2; 6:
 * F(4x4, 3x3), wino4_bt2) to V[e][c][t], items along t writing adjacent
 * floats. */
TEENY_INLINE void wino_input_tile(const int n, WINO_INPUT_ARGS)
{
    const int t = get_global_id(0), c = get_global_id(1);
    if (t >= Tp || c >= I)
        return;
    float d[36], e[36];
    wino_patch(d, n, x, x_off, I, H, W, pad_h, pad_w, TH, TW, T, t, c);
    if (n == 4)
        wino_bt2(d, e);
    else
        wino4_bt2(d, e);
    wino_scatter(v, v_off + c * Tp + t, I * Tp, d, n * n);
}

/* V[e][c][t] = (B^T d B)[e] of tile t's 4x4 input patch of channel c,
 * rows 2ty - pad_h .. +3, columns 2tx - pad_w .. +3 (zero outside the
 * image, and for t >= T). Grid (Tp, I): items along t write adjacent
 * floats. */
__kernel void wino_input(WINO_INPUT_ARGS)
{
    wino_input_tile(4, WINO_INPUT_PASS);
}

/* out[b][o][2ty + i][2tx + j] = act((A^T M A)[i][j] * sc + sh) of tile t
 * = (b, ty, tx) and output channel o, the outputs inside OH x OW only;
 * sc, sh from conv_epilogue (flags epi: bias, scale, shift; act: none,
 * ReLU, SiLU). Grid (T, O). */
__kernel void wino_output(WINO_OUTPUT_ARGS)
{
    wino_output_tile(2, WINO_OUTPUT_PASS);
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
        int oh, ow;
        const int base = wino_tile_at(t, TH, TW, 2, O, o, OH, OW, dy_off, &oh, &ow);
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

/* U[e][o][i] = (G g G^T)[e], as wino_weights (flip: the input gradient's
 * filters). Grid (I, O). */
__kernel void wino4_weights(__global const float *restrict w, int w_off, int O, int I, int flip,
                            __global float *restrict u, int u_off)
{
    const int i = get_global_id(0), o = get_global_id(1);
    if (i >= I || o >= O)
        return;
    float g[9], t[18], r[36];
    wino_filter(g, w, w_off, O, I, flip, i, o);
    wino4_g2(r, t, g);
    wino_scatter(u, u_off + o * I + i, O * I, r, 36);
}

/* V[e][c][t] = (B^T d B)[e] of tile t's 6x6 input patch of channel c,
 * rows 4ty - pad_h .. +5, columns 4tx - pad_w .. +5 (zero outside the
 * image, and for t >= T). Grid (Tp, I). */
__kernel void wino4_input(WINO_INPUT_ARGS)
{
    wino_input_tile(6, WINO_INPUT_PASS);
}

/* out[b][o][4ty + i][4tx + j] = act((A^T M A)[i][j] * sc + sh), the
 * outputs inside OH x OW only, as wino_output. Grid (T, O). */
__kernel void wino4_output(WINO_OUTPUT_ARGS)
{
    wino_output_tile(4, WINO_OUTPUT_PASS);
}
