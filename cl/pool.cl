/*
 * pool.cl -- 2-D max and average pooling and global average pooling over
 * NCHW tensors, with their gradients.
 *
 * x is [B, C, H, W] and y [B, C, OH, OW]; plane bc = b*C + c starts at
 * bc*H*W (x) and bc*OH*OW (y). Window (oh, ow) has the taps rows
 * oh*sh - ph + i*dh (i < kh) and columns ow*sw - pw + j*dw (j < kw) of its
 * plane; ph, pw are the padding before the input (the padding after only
 * changes OH, OW and what an average counts). Padding is -inf for max and
 * 0 for average pooling, which divides by the taps its bounds count (the
 * padded input, or x alone: count_include_pad). Windows may lie entirely
 * in the padding (ONNX's large pads). The host guarantees that x and y fit
 * int32 indexing and the padded extents (H plus both pads, and the dilated
 * kernel within them) fit int32, so every window bound below does too
 * (kh * kw need not: windows past 2^31 positions are legal over a small
 * padded input).
 * Gradients are gathers: each dx element loops over the windows that can
 * contain it in a fixed order, so there are no atomics and results are
 * deterministic. argmax holds h*W + w within the plane (PyTorch's
 * convention).
 *
 * Row bands. Where a device limits the loop trips of a work-item (Mesa's
 * llvmpipe; src/program/probe.c) the host splits each window loop into
 * launches over bands of its rows: a launch visits window rows (forward)
 * or covering window rows (gradients) [r0, r0 + nr) of each item's own
 * range, counted from its first, and carries the running sum (maximum and
 * argmax) in the output between launches: seg says whether it starts the
 * loop (POOL_SEG_FIRST: from zero) and ends it (POOL_SEG_LAST: the final
 * value). The order of the visits does not change, so the bits equal one
 * launch's (r0 = 0, nr = every row, both flags).
 *
 * Tunable: GAP_WG, the global-average work-group size (a power of two).
 */
#ifndef GAP_WG
#define GAP_WG 256
#endif

/* Geometry shared by the window kernels, and their row band. A window
 * (oh, ow) starts at h0 = oh*sh - ph, w0 = ow*sw - pw (ph, pw: the padding
 * before) and has taps h0 + i*dh, i < kh (dilation dh), likewise along W. */
#define POOL_GEOM int H, int W, int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw
#define POOL_BAND int r0, int nr, int seg
#define POOL_SEG_FIRST 1
#define POOL_SEG_LAST 2
/* Rows [r0, r0 + nr) of an item's own rows [lo, hi), clipped to them;
 * no sum here passes hi (window bounds come near INT_MAX). */
#define POOL_BAND_FROM(lo, hi, r0) ((hi) - (lo) > (r0) ? (lo) + (r0) : (hi))
#define POOL_BAND_TO(lo, hi, r0, nr) ((hi) - (lo) - (r0) > (nr) ? (lo) + (r0) + (nr) : (hi))

/* Item i = (bc*OH + oh)*OW + ow of a forward kernel (none past total):
 * its window's first tap (h0, w0), its taps inside x (rows [ih0, ih1),
 * columns [jw0, jw1)), its plane of x and the band's tap rows
 * [i_from, i_to). */
#define POOL_WINDOW                                                                                         \
    int i = get_global_id(0);                                                                               \
    if (i >= total)                                                                                         \
        return;                                                                                             \
    int ow = i % OW, t = i / OW, oh = t % OH, bc = t / OH;                                                  \
    int h0 = oh * sh - ph, w0 = ow * sw - pw;                                                               \
    int ih0 = pool_tap_first(h0, dh, 0), ih1 = pool_tap_end(h0, kh, dh, H);                                 \
    int jw0 = pool_tap_first(w0, dw, 0), jw1 = pool_tap_end(w0, kw, dw, W);                                 \
    __global const float *plane = x + x_off + bc * H * W;                                                   \
    int i_from = POOL_BAND_FROM(ih0, ih1, r0), i_to = POOL_BAND_TO(ih0, ih1, r0, nr)

/* Item i = (bc*H + h)*W + w of a gradient kernel (none past total): its
 * plane's first window (base), the windows covering it (rows [oh0, oh1],
 * columns [ow0, ow1]), the band's window rows [o0, o1) and the sum s the
 * bands before left in dx. */
#define POOL_COVER                                                                                          \
    int i = get_global_id(0);                                                                               \
    if (i >= total)                                                                                         \
        return;                                                                                             \
    int w = i % W, t = i / W, h = t % H, bc = t / H, base = bc * OH * OW;                                   \
    int oh0 = pool_first(h, (kh - 1) * dh + 1, sh, ph), oh1 = pool_last(h, sh, ph, OH);                     \
    int ow0 = pool_first(w, (kw - 1) * dw + 1, sw, pw), ow1 = pool_last(w, sw, pw, OW);                     \
    int o0 = POOL_BAND_FROM(oh0, oh1 + 1, r0), o1 = POOL_BAND_TO(oh0, oh1 + 1, r0, nr);                     \
    float s = seg & POOL_SEG_FIRST ? 0.0f : dx[dx_off + i]

/* What the index output holds (pool_max_forward's index_mode): h*W + w
 * within the plane (the gradient's argmax), or the flat index over all of
 * x in row-major (ONNX's MaxPool Indices, storage_order 0) or with each
 * plane column-major (storage_order 1). */
#define POOL_INDEX_PLANE 0
#define POOL_INDEX_FLAT 1
#define POOL_INDEX_FLAT_COLS 2

/* The taps [first, end) of a window starting at p0 (k taps, d apart) that
 * fall in [lo, hi). The host guarantees the padded extent fits int32, so
 * lo - p0 and hi - p0 do: no sum here overflows. */
TEENY_INLINE int pool_tap_first(int p0, int d, int lo)
{
    return p0 >= lo ? 0 : d == 1 ? lo - p0 : (lo - p0 - 1) / d + 1; /* no division without dilation */
}

TEENY_INLINE int pool_tap_end(int p0, int k, int d, int hi)
{
    return hi <= p0 ? 0 : min(k, d == 1 ? hi - p0 : (hi - 1 - p0) / d + 1);
}

/* Taps of a window in [lo, hi) along one axis (0 when none). */
TEENY_INLINE int pool_tap_count(int p0, int k, int d, int lo, int hi)
{
    return max(pool_tap_end(p0, k, d, hi) - pool_tap_first(p0, d, lo), 0);
}

/* Grid (B*C*OH*OW), 1-D: item i = (bc*OH + oh)*OW + ow computes one max
 * and, when want_argmax, its index (index_mode). NaN wins (and a later NaN
 * replaces an earlier one), as in PyTorch; a window with no tap inside x
 * (padding only: ONNX's large pads) gives -inf and index -1. Band: tap rows
 * [ih0 + r0, + nr). */
__kernel void pool_max_forward(__global const float *x, int x_off, POOL_GEOM, int total,
                               __global float *y, int y_off, __global int *argmax, int am_off, int want_argmax,
                               int index_mode, POOL_BAND)
{
    POOL_WINDOW;
    int empty = ih0 >= ih1 || jw0 >= jw1;
    float best = seg & POOL_SEG_FIRST ? -INFINITY : y[y_off + i];
    int arg = seg & POOL_SEG_FIRST || !want_argmax ? (empty ? -1 : (h0 + ih0 * dh) * W + w0 + jw0 * dw)
                                                   : argmax[am_off + i];
    if (!want_argmax) /* the maximum alone: one select a tap (a branch mispredicts on random data) */
        for (int a = i_from; a < i_to; a++) {
            __global const float *row = plane + (h0 + a * dh) * W + w0;
            for (int b = jw0; b < jw1; b++) {
                float v = row[b * dw];
                best = v > best || isnan(v) ? v : best;
            }
        }
    else
        for (int a = i_from; a < i_to; a++) {
            int h = h0 + a * dh;
            for (int b = jw0; b < jw1; b++) {
                int w = w0 + b * dw;
                float v = plane[h * W + w];
                if (v > best || isnan(v)) {
                    best = v;
                    arg = h * W + w;
                }
            }
        }
    y[y_off + i] = best;
    if (!want_argmax)
        return;
    if ((seg & POOL_SEG_LAST) && index_mode != POOL_INDEX_PLANE && arg >= 0)
        arg = bc * H * W + (index_mode == POOL_INDEX_FLAT ? arg : arg % W * H + arg / W);
    argmax[am_off + i] = arg;
}

/* pool_max_forward's CPU variant for the maximum alone (no index):
 * item (rb, bc) computes output rows [oh0, oh0 + R), oh0 = rb*rows_per, of
 * plane bc. It first copies the input rows they read, oh0*sh - ph + t for
 * t < (R - 1)*sh + (kh - 1)*dh + 1, into a private band of pitch =
 * (OW - 1)*sw + (kw - 1)*dw + 1 columns a row, column c holding input
 * column c - pw and -inf where the row or the column lies outside x
 * (padding, ceil_mode's overhang). The taps then read the band without a
 * bounds check, 8 outputs of a row at a time (stride 1: vload8; stride 2:
 * the even lanes of a vload16), 4 rows at once (a block past R takes row
 * R - 1 again and stores the same values again). The portable kernel's
 * order and rule, NaN winning and a later NaN replacing an earlier one, a
 * -inf tap never winning: the same bits, -inf for a window with no tap in
 * x. Lanes past OW read up to 8*sw - 1 floats past their row (the next
 * row, or the slack, -inf) and are never stored. The host (pool.c) takes
 * it at strides 1 and 2 with pads >= 0 and a band of at most TEENY_BAND_FLOATS
 * floats; rows_per is the last argument. One item per pixel of a
 * ResNet's 3x3 stride-2 max pool took 3.2 ms on PoCL 3.1 (2 threads). */

/* m[i] = the maximum of the taps over the band rows from bp[i], i < 4, by LOAD(p). */
#define POOL_MAX_TAP(m, v) m = select(m, v, (v > m) | isnan(v))
#define POOL_BAND_MAX(LOAD)                                                       \
    for (int a = 0; a < kh; a++) {                                                \
        const int o = a * dh * pitch;                                             \
        for (int b = 0; b < kw; b++) {                                            \
            const int q = o + b * dw;                                             \
            const float8 v0 = LOAD(b0 + q), v1 = LOAD(b1 + q), v2 = LOAD(b2 + q), \
                         v3 = LOAD(b3 + q);                                       \
            POOL_MAX_TAP(m0, v0);                                                 \
            POOL_MAX_TAP(m1, v1);                                                 \
            POOL_MAX_TAP(m2, v2);                                                 \
            POOL_MAX_TAP(m3, v3);                                                 \
        }                                                                         \
    }
#define POOL_LOAD_S1(p) vload8(0, p)
#define POOL_LOAD_S2(p) vload16(0, p).even

__kernel void pool_max_forward_cpu(__global const float *restrict x, int x_off, POOL_GEOM, int total,
                                   __global float *restrict y, int y_off, int rows_per)
{
    const int rb = get_global_id(0), bc = get_global_id(1), oh0 = rb * rows_per;
    if (bc >= total / (OH * OW) || oh0 >= OH)
        return;
    __global const float *plane = x + x_off + bc * H * W;
    __global float *yp = y + y_off + bc * OH * OW;
    const int R = min(rows_per, OH - oh0), pitch = (OW - 1) * sw + (kw - 1) * dw + 1;
    const int band_rows = (R - 1) * sh + (kh - 1) * dh + 1;
    float band[TEENY_BAND_FLOATS + TEENY_BAND_SLACK];
    teeny_band_fill(band, plane, H, W, oh0 * sh - ph, band_rows, pitch, pw, -INFINITY);
    for (int r = 0; r < R; r += 4) {
        const int r1 = min(r + 1, R - 1), r2 = min(r + 2, R - 1), r3 = min(r + 3, R - 1);
        for (int ow0 = 0; ow0 < OW; ow0 += 8) {
            const float *b0 = band + r * sh * pitch + ow0 * sw, *b1 = band + r1 * sh * pitch + ow0 * sw;
            const float *b2 = band + r2 * sh * pitch + ow0 * sw, *b3 = band + r3 * sh * pitch + ow0 * sw;
            float8 m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
            if (sw == 1)
                POOL_BAND_MAX(POOL_LOAD_S1)
            else
                POOL_BAND_MAX(POOL_LOAD_S2)
            teeny_vstore8_part(m0, yp + (oh0 + r) * OW + ow0, OW - ow0);
            teeny_vstore8_part(m1, yp + (oh0 + r1) * OW + ow0, OW - ow0);
            teeny_vstore8_part(m2, yp + (oh0 + r2) * OW + ow0, OW - ow0);
            teeny_vstore8_part(m3, yp + (oh0 + r3) * OW + ow0, OW - ow0);
        }
    }
}

/* The divisor of window (h0, w0) of an average: its taps inside rows
 * [lo_h, hi_h) and columns [lo_w, hi_w) (the padded input with
 * count_include_pad, x itself without), as a float rounded once from the
 * 64-bit product. */
TEENY_INLINE float pool_avg_count(int h0, int w0, int kh, int kw, int dh, int dw, int lo_h, int hi_h, int lo_w,
                                  int hi_w)
{
    long n = (long)pool_tap_count(h0, kh, dh, lo_h, hi_h) * (long)pool_tap_count(w0, kw, dw, lo_w, hi_w);
    return (float)n;
}

/* The bounds an average counts, and its constant divisor: area > 0 where
 * every window counts kh*kw taps (area = kh*kw as a float, computed by the
 * host in 64-bit integers: the int product overflows for windows past
 * 2^31), else 0 and each window counts its own (pool_avg_count). */
#define POOL_AVG float area, int lo_h, int hi_h, int lo_w, int hi_w

/* Grid (B*C*OH*OW): item i averages its window. Band: tap rows
 * [ih0 + r0, + nr). A window that counts no tap (count_include_pad=0 over
 * padding only) gives 0/0 = NaN. */
__kernel void pool_avg_forward(__global const float *x, int x_off, POOL_GEOM, int total, POOL_AVG,
                               __global float *y, int y_off, POOL_BAND)
{
    POOL_WINDOW;
    float s = seg & POOL_SEG_FIRST ? 0.0f : y[y_off + i];
    for (int a = i_from; a < i_to; a++) {
        int h = h0 + a * dh;
        for (int b = jw0; b < jw1; b++)
            s += plane[h * W + w0 + b * dw];
    }
    if (seg & POOL_SEG_LAST)
        s /= area > 0.0f ? area : pool_avg_count(h0, w0, kh, kw, dh, dw, lo_h, hi_h, lo_w, hi_w);
    y[y_off + i] = s;
}

/* First and last window index (along one axis) whose span covers
 * position p: o*s - pad <= p <= o*s - pad + ke - 1 (ke = the dilated
 * kernel, (k-1)*d + 1), clipped to [0, O). The host guarantees the padded
 * extent fits int32, so p + pad does; the ceiling is (a - 1) / s + 1, not
 * (a + s - 1) / s, which overflows for strides near 2^31. */
TEENY_INLINE int pool_first(int p, int ke, int s, int pad)
{
    int a = p + pad - ke + 1;
    return a <= 0 ? 0 : (a - 1) / s + 1;
}

TEENY_INLINE int pool_last(int p, int s, int pad, int O)
{
    return min((p + pad) / s, O - 1);
}

/* Grid (B*C*H*W): item i = (bc*H + h)*W + w sums dy over the windows that
 * cover (h, w) and chose it as their maximum. Band: window rows
 * [oh0 + r0, + nr). */
__kernel void pool_max_backward(__global const int *argmax, int am_off, __global const float *dy, int dy_off,
                                POOL_GEOM, int total, __global float *dx, int dx_off, POOL_BAND)
{
    POOL_COVER;
    int me = h * W + w;
    for (int oh = o0; oh < o1; oh++)
        for (int ow = ow0; ow <= ow1; ow++) {
            int o = base + oh * OW + ow;
            if (argmax[am_off + o] == me)
                s += dy[dy_off + o];
        }
    dx[dx_off + i] = s;
}

/* Grid (B*C*H*W): item i sums dy over the windows with a tap on it, each
 * divided by its window's divisor (as in the forward; with a constant
 * area the sum is divided once). Band: window rows [oh0 + r0, + nr). */
__kernel void pool_avg_backward(__global const float *dy, int dy_off, POOL_GEOM, int total, POOL_AVG,
                                __global float *dx, int dx_off, POOL_BAND)
{
    POOL_COVER;
    for (int oh = o0; oh < o1; oh++) {
        int h0 = oh * sh - ph;
        if ((h - h0) % dh)
            continue;
        for (int ow = ow0; ow <= ow1; ow++) {
            int w0 = ow * sw - pw;
            float g = dy[dy_off + base + oh * OW + ow];
            if ((w - w0) % dw)
                continue;
            s += area > 0.0f ? g : g / pool_avg_count(h0, w0, kh, kw, dh, dw, lo_h, hi_h, lo_w, hi_w);
        }
    }
    dx[dx_off + i] = (seg & POOL_SEG_LAST) && area > 0.0f ? s / area : s;
}

/* Grid (GAP_WG * B*C), work-group GAP_WG: group bc sums its plane of S
 * elements (items take a fixed strided subset, then a tree) and writes
 * the mean to y[bc]. */
__kernel __attribute__((reqd_work_group_size(GAP_WG, 1, 1)))
void pool_gap_forward(__global const float *x, int x_off, int S, __global float *y, int y_off)
{
    __local float red[GAP_WG];
    int lid = get_local_id(0), bc = get_group_id(0);
    __global const float *plane = x + x_off + bc * S;
    float s = 0.0f;
    for (int e = lid; e < S; e += GAP_WG)
        s += plane[e];
    red[lid] = s;
    teeny_group_sum(red, lid, GAP_WG);
    if (lid == 0)
        y[y_off + bc] = red[0] / (float)S;
}

/* The CPU variant (TEENY_VARIANT_CPU, src/tune): grid (P, B*C), item
 * (p, bc) sums elements [p*chunk, + chunk) of plane bc: 32 lanes (two
 * float16 sums, element e in lane e % 32 of its run of 32), added as a
 * fixed tree (lanes j and j + 16, then halves), then the last n % 32
 * elements in order. One sum's chain of scalar adds had the core wait on
 * each add's latency (EfficientNet-B0's 16 poolings: 1.4 ms a forward on
 * PoCL 3.1). A CPU runs a work-group's items as a loop, so a tree per
 * plane would be all overhead. P == 1 (chunk = S): the item writes the
 * mean; else its sum goes to part[bc*P + p] and pool_gap_parts_cpu adds
 * them up (only where a device limits a work-item's loop trips, pool.c:
 * at most chunk + 1 trips, as the scalar loop). */
__kernel void pool_gap_forward_cpu(__global const float *x, int x_off, int S, int planes, __global float *y,
                                   int y_off, int chunk, int P, __global float *part)
{
    int p = get_global_id(0), bc = get_global_id(1);
    if (p >= P || bc >= planes)
        return;
    __global const float *v = x + x_off + bc * S + p * chunk;
    const int n = min(S, p * chunk + chunk) - p * chunk;
    float16 a0 = (float16)(0.0f), a1 = (float16)(0.0f);
    int e = 0;
    for (; e + 32 <= n; e += 32) {
        a0 += vload16(0, v + e);
        a1 += vload16(1, v + e);
    }
    /* the tree through a private copy: the same adds as s16.lo + s16.hi
     * and so on, which oclgrind 21.10's --uninitialized plugin takes for
     * uninitialized values (its shadow of a float16's halves) */
    float t[16];
    vstore16(a0 + a1, 0, t);
    vstore8(vload8(0, t) + vload8(1, t), 0, t);
    vstore4(vload4(0, t) + vload4(1, t), 0, t);
    vstore2(vload2(0, t) + vload2(1, t), 0, t);
    float s = t[0] + t[1];
    for (; e < n; e++)
        s += v[e];
    if (P == 1)
        y[y_off + bc] = s / (float)S;
    else
        part[bc * P + p] = s;
}

/* Grid (B*C): y[bc] = the sum of plane bc's P partials, in order, / S. */
__kernel void pool_gap_parts_cpu(__global const float *part, int P, int S, int planes, __global float *y, int y_off)
{
    int bc = get_global_id(0);
    if (bc >= planes)
        return;
    y[y_off + bc] = teeny_sum_strided(part + bc * P, P, 1) / (float)S;
}

/* Grid (B*C*S): dx[i] = dy[i / S] / S. */
__kernel void pool_gap_backward(__global const float *dy, int dy_off, int S, int total, __global float *dx,
                                int dx_off)
{
    int i = get_global_id(0);
    if (i < total)
        dx[dx_off + i] = dy[dy_off + i / S] / (float)S;
}
