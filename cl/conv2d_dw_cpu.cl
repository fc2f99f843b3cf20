/*
 * conv2d_dw_cpu.cl -- the depthwise kernels' CPU variants (dwconv_*_cpu).
 * The conv2d program's sixth part, after conv2d_dwb.cl.
 */
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

/* acc[j] = output (oh, ow0 + j), j < n, of input plane xc convolved with
 * the channel's taps wc: the taps in order, from 0. */
TEENY_INLINE void dw_fwd_cpu_chunk(float *acc, __global const float *restrict xc, __global const float *restrict wc,
                                   int oh, int ow0, int n, int H, int W, int KH, int KW, int s_h, int s_w, int p_h,
                                   int p_w, int d_h, int d_w)
{
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
}

/* acc[j] = dx at (ih, iw0 + j), j < n, of input channel ci: over its mult
 * output channels co (planes of dy at (bC + co)*OH*OW, bC = b*Cout; taps
 * at w + co*KH*KW) and the taps that reach each column, in order, from 0. */
TEENY_INLINE void dw_dx_cpu_chunk(float *acc, __global const float *restrict dy, __global const float *restrict w,
                                  int bC, int ci, int ih, int iw0, int n, int mult, int OH, int OW, int KH, int KW,
                                  int s_h, int s_w, int p_h, int p_w, int d_h, int d_w)
{
    for (int j = 0; j < n; j++)
        acc[j] = 0.0f;
    for (int m = 0; m < mult; m++) {
        const int co = ci * mult + m;
        __global const float *gc = dy + (bC + co) * OH * OW, *wc = w + co * KH * KW;
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
            dw_fwd_cpu_chunk(acc, xc, wc, oh, ow0, n, H, W, KH, KW, s_h, s_w, p_h, p_w, d_h, d_w);
            int j = 0;
            for (; j + 16 <= n; j += 16) /* the vector activation (conv_act16) */
                vstore16(conv_act16(act, vload16(0, acc + j) * sc + sh), 0, yc + oh * OW + ow0 + j);
            for (; j < n; j++)
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
            dw_dx_cpu_chunk(acc, dy + dy_off, w + w_off, b * Cout, ci, ih, iw0, n, mult, OH, OW, KH, KW, s_h, s_w, p_h,
                            p_w, d_h, d_w);
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

/* ---- the depthwise forward through a padded band (dwconv_fwd_cpu_band) ----
 * Item (rb, co, b) computes output rows [oh0, oh0 + R), oh0 = rb*rows_per,
 * of y[b, co]. It first copies the input rows they read, oh0*s_h - p_h + t
 * for t < (R - 1)*s_h + (KH - 1)*d_h + 1, into a private band of `pitch` =
 * (OW - 1)*s_w + (KW - 1)*d_w + 1 columns a row, column c holding input
 * column c - p_w and zero where the row or the column is padding. The taps
 * then read the band without a bounds check, 8 outputs of a row at a time
 * (vload8 at stride 1; at stride 2 the even lanes of a vload16), for 4
 * output rows at once: four independent sums, where one sum's chain of
 * fused multiply-adds waited on each one's latency (PoCL 3.1 on Zen 3, 54%
 * of the kernel on the instruction after the fma). A block past R takes
 * row R - 1 again and stores its same values again. Lanes past OW read up
 * to 8*s_w - 1 floats past their row (the next row, or the zeroed slack
 * after the last) and are never stored. Per output the taps are summed in
 * order from 0, as dwconv_fwd_cpu sums them, padding taps adding 0 * w.
 * The host (depthwise.c) takes it at strides 1 and 2 with pads >= 0 and a
 * band of at most TEENY_BAND_FLOATS floats; rows_per is the last argument. */

/* a[i] += the taps of wc over the band rows from bp[i] (one output row's
 * first band row, column ow0*s_w), i < 4, by LOAD(p) (the 8 inputs from p). */
#define DW_BAND_TAPS(LOAD)                                                      \
    for (int kh = 0; kh < KH; kh++) {                                           \
        const int o = kh * d_h * pitch;                                         \
        __global const float *wr = wc + kh * KW;                                \
        for (int kw = 0; kw < KW; kw++) {                                       \
            const float8 wv = (float8)wr[kw];                                   \
            const int q = o + kw * d_w;                                         \
            a0 = TEENY_MAD(LOAD(b0 + q), wv, a0);                               \
            a1 = TEENY_MAD(LOAD(b1 + q), wv, a1);                               \
            a2 = TEENY_MAD(LOAD(b2 + q), wv, a2);                               \
            a3 = TEENY_MAD(LOAD(b3 + q), wv, a3);                               \
        }                                                                       \
    }
#define DW_LOAD_S1(p) vload8(0, p)
#define DW_LOAD_S2(p) vload16(0, p).even

__kernel void dwconv_fwd_cpu_band(__global const float *restrict x, int x_off, __global const float *restrict w,
                                  int w_off, __global float *restrict y, int y_off, int16 geo,
                                  __global const float *bias, int bias_off, __global const float *scale,
                                  int scale_off, __global const float *shift, int shift_off, int epi, int act,
                                  int rows_per)
{
    DW_GEOMETRY(geo);
    const int rb = get_global_id(0), co = get_global_id(1), b = get_global_id(2), Cout = Cin * mult;
    const int oh0 = rb * rows_per;
    if (co >= Cout || b >= B || oh0 >= OH)
        return;
    const float2 e = conv_epilogue(epi, co, bias, bias_off, scale, scale_off, shift, shift_off);
    const float sc = e.x, sh = e.y;
    __global const float *wc = w + w_off + co * KH * KW;
    __global float *yc = y + y_off + (b * Cout + co) * OH * OW;
    const int R = min(rows_per, OH - oh0), pitch = (OW - 1) * s_w + (KW - 1) * d_w + 1;
    const int band_rows = (R - 1) * s_h + (KH - 1) * d_h + 1;
    float band[TEENY_BAND_FLOATS + TEENY_BAND_SLACK];
    teeny_band_fill(band, x + x_off + (b * Cin + co / mult) * H * W, H, W, oh0 * s_h - p_h, band_rows, pitch, p_w,
                    0.0f);
    for (int r = 0; r < R; r += 4) {
        const int r1 = min(r + 1, R - 1), r2 = min(r + 2, R - 1), r3 = min(r + 3, R - 1);
        for (int ow0 = 0; ow0 < OW; ow0 += 8) {
            const float *b0 = band + r * s_h * pitch + ow0 * s_w, *b1 = band + r1 * s_h * pitch + ow0 * s_w;
            const float *b2 = band + r2 * s_h * pitch + ow0 * s_w, *b3 = band + r3 * s_h * pitch + ow0 * s_w;
            float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            if (s_w == 1)
                DW_BAND_TAPS(DW_LOAD_S1)
            else
                DW_BAND_TAPS(DW_LOAD_S2)
            teeny_vstore8_part(conv_act8(act, a0 * sc + sh), yc + (oh0 + r) * OW + ow0, OW - ow0);
            teeny_vstore8_part(conv_act8(act, a1 * sc + sh), yc + (oh0 + r1) * OW + ow0, OW - ow0);
            teeny_vstore8_part(conv_act8(act, a2 * sc + sh), yc + (oh0 + r2) * OW + ow0, OW - ow0);
            teeny_vstore8_part(conv_act8(act, a3 * sc + sh), yc + (oh0 + r3) * OW + ow0, OW - ow0);
        }
    }
}
