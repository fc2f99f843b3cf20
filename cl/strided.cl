/*
 * strided.cl -- copies and sums over strided index spaces: the layout ops
 * (transpose, slice, pad, expand, concatenation and gather along any axis)
 * are one strided copy, the reductions (ReduceSum/Mean, the gradients of
 * broadcasting) one strided sum, and the NumPy-broadcasting binary ops
 * read their operands the same way.
 *
 * An index space has 8 dimensions (int8 arguments: sizes n and element
 * strides per tensor), the used ones last (the host pads the front with
 * size 1), dimension .s7 the innermost. A stride may be 0 (broadcast) or
 * negative (a reversed slice). Every buffer comes with an element offset.
 * Grid: one work-item per element written (1-D).
 */

/* Dimension c of item index `rem` (innermost first): its coordinate k,
 * rem divided down. */
#define ST_COORD(c)                                                                                                \
    k = rem % n.c;                                                                                                 \
    rem /= n.c

/* y at item i of space n (y's offsets ys) = scale * x at (c - lo) * xs
 * where every coordinate c lies in [lo, hi), else pad. Along map_axis
 * (0..7 = .s0...s7; -1 none) the source coordinate is map[map_off + c]
 * instead, pad when outside [0, map_dim). */
__kernel void st_copy(__global const float *x, int x_off, int8 xs, __global float *y, int y_off, int8 ys, int8 n,
                      int8 lo, int8 hi, float pad, float scale, __global const int *map, int map_off, int map_axis,
                      int map_dim, int total)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    int rem = i, k, src = x_off, dst = y_off, inside = 1, m;
#define ST_COPY_DIM(c, d)                                                                                          \
    ST_COORD(c);                                                                                                   \
    dst += k * ys.c;                                                                                               \
    if (map_axis == d) {                                                                                           \
        m = map[map_off + k];                                                                                      \
        inside &= m >= 0 && m < map_dim;                                                                           \
        src += m * xs.c;                                                                                           \
    } else {                                                                                                       \
        inside &= k >= lo.c && k < hi.c;                                                                           \
        src += (k - lo.c) * xs.c;                                                                                  \
    }
    ST_COPY_DIM(s7, 7)
    ST_COPY_DIM(s6, 6)
    ST_COPY_DIM(s5, 5)
    ST_COPY_DIM(s4, 4)
    ST_COPY_DIM(s3, 3)
    ST_COPY_DIM(s2, 2)
    ST_COPY_DIM(s1, 1)
    ST_COPY_DIM(s0, 0)
#undef ST_COPY_DIM
    y[dst] = inside ? scale * x[src] : pad;
}

/* Sums. Grid (n_out * parts): item (o, p) adds x over reduction
 * coordinates r in [p*chunk, min((p+1)*chunk, r_total)) of space rn (x's
 * strides rs) at output coordinate o of space on (x's strides os), in
 * ascending r, and writes scale * sum to y[y_off + o*parts + p]. With
 * parts > 1 the host sums the parts the same way (a second launch), so
 * the order is fixed: same inputs, same bits. A work-item loops chunk
 * times: the host keeps that within the device's loop budget. */
__kernel void st_reduce(__global const float *x, int x_off, int8 on, int8 os, int8 rn, int8 rs, float scale,
                        __global float *y, int y_off, int n_out, int parts, int chunk, int r_total)
{
    int i = get_global_id(0);
    if (i >= n_out * parts)
        return;
    int o = i / parts, p = i - o * parts, rem = o, k, base = x_off;
    int8 n = on;
    ST_COORD(s7);
    base += k * os.s7;
    ST_COORD(s6);
    base += k * os.s6;
    ST_COORD(s5);
    base += k * os.s5;
    ST_COORD(s4);
    base += k * os.s4;
    ST_COORD(s3);
    base += k * os.s3;
    ST_COORD(s2);
    base += k * os.s2;
    ST_COORD(s1);
    base += k * os.s1;
    ST_COORD(s0);
    base += k * os.s0;
    n = rn;
    float s = 0.0f;
    int r_end = min(p * chunk + chunk, r_total);
    for (int r = p * chunk; r < r_end; r++) {
        int at = base;
        rem = r;
        ST_COORD(s7);
        at += k * rs.s7;
        ST_COORD(s6);
        at += k * rs.s6;
        ST_COORD(s5);
        at += k * rs.s5;
        ST_COORD(s4);
        at += k * rs.s4;
        ST_COORD(s3);
        at += k * rs.s3;
        ST_COORD(s2);
        at += k * rs.s2;
        ST_COORD(s1);
        at += k * rs.s1;
        at += rem * rs.s0;
        s += x[at];
    }
    y[y_off + i] = scale * s;
}

/* ---- NumPy-broadcasting binary ops ----
 * op: 0 add, 1 sub, 2 mul, 3 div, 4 pow (teeny_binary_op). a and b are
 * read at y's coordinates through their own strides (0 along a
 * broadcast dimension). */
TEENY_INLINE float st_binary(int op, float a, float b)
{
    if (op == 0)
        return a + b;
    if (op == 1)
        return a - b;
    if (op == 2)
        return a * b;
    if (op == 3)
        return a / b;
    return pow(a, b);
}

/* The offsets of a and b at y's item i of space n. */
#define ST_AB_DIM(c)                                                                                               \
    ST_COORD(c);                                                                                                   \
    ia += k * as.c;                                                                                                \
    ib += k * bs.c
#define ST_AB_OFFSETS                                                                                              \
    int rem = i, k, ia = a_off, ib = b_off;                                                                        \
    ST_AB_DIM(s7);                                                                                                 \
    ST_AB_DIM(s6);                                                                                                 \
    ST_AB_DIM(s5);                                                                                                 \
    ST_AB_DIM(s4);                                                                                                 \
    ST_AB_DIM(s3);                                                                                                 \
    ST_AB_DIM(s2);                                                                                                 \
    ST_AB_DIM(s1);                                                                                                 \
    ST_AB_DIM(s0)

/* Grid (total): y[y_off + i] = a op b. */
__kernel void st_binary_forward(int op, __global const float *a, int a_off, int8 as, __global const float *b,
                                int b_off, int8 bs, __global float *y, int y_off, int8 n, int total)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    ST_AB_OFFSETS;
    y[y_off + i] = st_binary(op, a[ia], b[ib]);
}

/* Grid (total): t[t_off + i] = dy * d(a op b)/d(a) (wrt 0) or d/d(b) (wrt
 * 1) at y's item i; the host sums t over the operand's broadcast
 * dimensions (st_reduce), or t is the gradient itself. pow's gradient wrt
 * b is 0 where a is 0 and b >= 0 (PyTorch's choice), a^b ln a elsewhere. */
__kernel void st_binary_term(int op, int wrt, __global const float *a, int a_off, int8 as, __global const float *b,
                             int b_off, int8 bs, __global const float *dy, int dy_off, __global float *t, int t_off,
                             int8 n, int total)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    ST_AB_OFFSETS;
    float av = a[ia], bv = b[ib], g = dy[dy_off + i], d;
    if (op == 0)
        d = 1.0f;
    else if (op == 1)
        d = wrt ? -1.0f : 1.0f;
    else if (op == 2)
        d = wrt ? av : bv;
    else if (op == 3)
        d = wrt ? -av / (bv * bv) : 1.0f / bv;
    else if (wrt)
        d = av == 0.0f && bv >= 0.0f ? 0.0f : pow(av, bv) * log(av);
    else
        d = bv == 0.0f ? 0.0f : bv * pow(av, bv - 1.0f);
    t[t_off + i] = g * d;
}
