/*
 * resize.cl -- resize over the last two dimensions of [B, C, H, W]
 * (src/ops/resize.c). Per axis an output index o maps to the input index
 * floor((a*o + b) / d) in 64-bit integers (a >= 0, d > 0; the nearest
 * mode's rounding folded in), clamped to [0, in - 1]; bilinear
 * (linear = 1) clamps the numerator to [0, (in - 1)*d] and weighs the
 * next index by its remainder over d. Every buffer comes with an element
 * offset (views). No local memory, no barrier.
 */

inline long rs_floor_div(long n, long d)
{
    long q = n / d;
    return (n % d != 0 && n < 0) ? q - 1 : q;
}

/* Nearest: the input index output o reads. */
inline int rs_nearest(int o, long a, long b, long d, int in)
{
    return (int)clamp(rs_floor_div(a * o + b, d), 0L, (long)(in - 1));
}

/* Bilinear: the first input index output o reads; *i1 the second, *w1
 * its weight (the first's is 1 - *w1). */
inline int rs_linear(int o, long a, long b, long d, int in, int *i1, float *w1)
{
    long n = clamp(a * o + b, 0L, (long)(in - 1) * d), i0 = n / d;
    *i1 = min((int)i0 + 1, in - 1);
    *w1 = (float)(n - i0 * d) / (float)d;
    return (int)i0;
}

/* The weight output o reads input index t with (o in t's range). */
inline float rs_weight(int o, int t, long a, long b, long d, int in, int linear)
{
    if (!linear)
        return 1.0f;
    int i1;
    float w1;
    int i0 = rs_linear(o, a, b, d, in, &i1, &w1);
    return (i0 == t ? 1.0f - w1 : 0.0f) + (i1 == t ? w1 : 0.0f);
}

/* The outputs [*lo, *hi] whose clamped index lies in [t0, t1] (t1 <= in - 1):
 * the map is non-decreasing, so they are a range. */
inline void rs_range(int t0, int t1, long a, long b, long d, int in, int out, int *lo, int *hi)
{
    long c = rs_floor_div(b, d), l, h;
    if (t0 <= 0)
        l = 0;
    else if (a == 0)
        l = c >= t0 ? 0 : out;
    else
        l = -rs_floor_div(b - (long)t0 * d, a);
    if (t1 >= in - 1)
        h = out - 1;
    else if (a == 0)
        h = c <= t1 ? out - 1 : -1;
    else
        h = rs_floor_div(((long)t1 + 1) * d - b - 1, a);
    *lo = (int)clamp(l, 0L, (long)out);
    *hi = (int)clamp(h, -1L, (long)out - 1);
}

/* Grid (numel of y): item (plane, oy, ox) reads its one (nearest) or four
 * (bilinear) inputs. */
__kernel void resize_forward(__global const float *x, int x_off, __global float *y, int y_off, int H, int W, int OH,
                             int OW, int total, int linear, long ya, long yb, long yd, long xa, long xb, long xd)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    int ox = i % OW, r = i / OW, oy = r % OH, plane = r / OH;
    __global const float *p = x + x_off + plane * H * W;
    if (!linear) {
        y[y_off + i] = p[rs_nearest(oy, ya, yb, yd, H) * W + rs_nearest(ox, xa, xb, xd, W)];
        return;
    }
    int y1, x1;
    float wy, wx;
    int y0 = rs_linear(oy, ya, yb, yd, H, &y1, &wy), x0 = rs_linear(ox, xa, xb, xd, W, &x1, &wx);
    float top = p[y0 * W + x0] * (1.0f - wx) + p[y0 * W + x1] * wx;
    float bottom = p[y1 * W + x0] * (1.0f - wx) + p[y1 * W + x1] * wx;
    y[y_off + i] = top * (1.0f - wy) + bottom * wy;
}

/* Grid (numel of dx): item (plane, ty, tx) sums dy over the outputs that
 * read it, weighted as the forward read it: rows [first, first + rows) of
 * its row range (rows ascending, then columns ascending), added to what
 * dx holds where accumulate (an earlier band's sum), so bands in several
 * launches give one launch's bits. rows * (columns + 1) + 1 loop trips. */
__kernel void resize_backward(__global const float *dy, int dy_off, __global float *dx, int dx_off, int H, int W,
                              int OH, int OW, int total, int linear, long ya, long yb, long yd, long xa, long xb,
                              long xd, int first, int rows, int accumulate)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    int tx = i % W, r = i / W, ty = r % H, plane = r / H;
    int ylo, yhi, xlo, xhi;
    rs_range(ty - linear, ty, ya, yb, yd, H, OH, &ylo, &yhi);
    rs_range(tx - linear, tx, xa, xb, xd, W, OW, &xlo, &xhi);
    int y_end = (int)min((long)yhi, (long)ylo + first + rows - 1);
    __global const float *g = dy + dy_off + plane * OH * OW;
    float s = accumulate ? dx[dx_off + i] : 0.0f;
    for (int oy = ylo + first; oy <= y_end; oy++) {
        float row = 0.0f;
        for (int ox = xlo; ox <= xhi; ox++)
            row += g[oy * OW + ox] * rs_weight(ox, tx, xa, xb, xd, W, linear);
        s += row * rs_weight(oy, ty, ya, yb, yd, H, linear);
    }
    dx[dx_off + i] = s;
}
