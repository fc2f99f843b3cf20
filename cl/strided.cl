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
 *
 * rank (1..8) says how many dimensions are used: the host squeezes the
 * space first (drops sizes of 1, merges dimensions every tensor steps
 * through as one), so a contiguous operation is rank 1 and an item finds
 * its coordinates with rank - 1 divisions, not eight. rank is the same for
 * every work-item, so its branches never diverge.
 */

/* Dimension c (component .c, index d) of item index `rem`, innermost
 * first: its coordinate k, rem divided down. The outermost used dimension
 * (d == 8 - rank) takes what is left of rem, undivided. ST_DIM runs body
 * for a used dimension only. */
#define ST_COORD(c, d)                                                                                             \
    if (8 - (d) == rank) {                                                                                         \
        k = rem;                                                                                                   \
    } else {                                                                                                       \
        k = rem % n.c;                                                                                             \
        rem /= n.c;                                                                                                \
    }
#define ST_DIM(c, d, body)                                                                                         \
    if (8 - (d) <= rank) {                                                                                         \
        ST_COORD(c, d)                                                                                             \
        body                                                                                                       \
    }
/* body once per used dimension, innermost first. */
#define ST_DIMS(body)                                                                                              \
    ST_DIM(s7, 7, body(s7, 7))                                                                                     \
    ST_DIM(s6, 6, body(s6, 6))                                                                                     \
    ST_DIM(s5, 5, body(s5, 5))                                                                                     \
    ST_DIM(s4, 4, body(s4, 4))                                                                                     \
    ST_DIM(s3, 3, body(s3, 3))                                                                                     \
    ST_DIM(s2, 2, body(s2, 2))                                                                                     \
    ST_DIM(s1, 1, body(s1, 1))                                                                                     \
    ST_DIM(s0, 0, body(s0, 0))

/* y at item i of space n (y's offsets ys) = scale * x at (c - lo) * xs
 * where every coordinate c lies in [lo, hi), else pad. Along map_axis
 * (0..7 = .s0...s7; -1 none) the source coordinate is map[map_off + c]
 * instead, pad when outside [0, map_dim). */
#define ST_COPY_DIM(c, d)                                                                                          \
    dst += k * ys.c;                                                                                               \
    if (map_axis == (d)) {                                                                                         \
        m = map[map_off + k];                                                                                      \
        inside &= m >= 0 && m < map_dim;                                                                           \
        src += m * xs.c;                                                                                           \
    } else {                                                                                                       \
        inside &= k >= lo.c && k < hi.c;                                                                           \
        src += (k - lo.c) * xs.c;                                                                                  \
    }
__kernel void st_copy(__global const float *x, int x_off, int8 xs, __global float *y, int y_off, int8 ys, int8 n,
                      int rank, int8 lo, int8 hi, float pad, float scale, __global const int *map, int map_off,
                      int map_axis, int map_dim, int total)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    int rem = i, k, src = x_off, dst = y_off, inside = 1, m;
    ST_DIMS(ST_COPY_DIM)
    y[dst] = inside ? scale * x[src] : pad;
}

/* st_copy's CPU variant (TEENY_VARIANT_CPU, strided.c): item (q, row)
 * writes elements [q*chunk, + chunk) of row `row` of the space, the run of
 * its innermost dimension (.s7), the row's coordinates found once (rank - 1
 * divisions) rather than per element; where both tensors step through the
 * run contiguously and the map is elsewhere, the copy is a plain loop the
 * compiler vectorizes. The same values as st_copy, element for element. The
 * host keeps chunk within the device's loop budget. */
__kernel void st_copy_rows(__global const float *restrict x, int x_off, int8 xs, __global float *restrict y,
                           int y_off, int8 ys, int8 n, int rank, int8 lo, int8 hi, float pad, float scale,
                           __global const int *map, int map_off, int map_axis, int map_dim, int rows, int chunk)
{
    const int q = get_global_id(0), row = get_global_id(1), j0 = q * chunk;
    if (row >= rows || j0 >= n.s7)
        return;
    int rem = row, k, src = x_off, dst = y_off, inside = 1, m;
    ST_DIM(s6, 6, ST_COPY_DIM(s6, 6))
    ST_DIM(s5, 5, ST_COPY_DIM(s5, 5))
    ST_DIM(s4, 4, ST_COPY_DIM(s4, 4))
    ST_DIM(s3, 3, ST_COPY_DIM(s3, 3))
    ST_DIM(s2, 2, ST_COPY_DIM(s2, 2))
    ST_DIM(s1, 1, ST_COPY_DIM(s1, 1))
    ST_DIM(s0, 0, ST_COPY_DIM(s0, 0))
    const int j1 = min(n.s7, j0 + chunk);
    if (map_axis == 7) {
        for (int j = j0; j < j1; j++) {
            m = map[map_off + j];
            y[dst + j * ys.s7] = inside && m >= 0 && m < map_dim ? scale * x[src + m * xs.s7] : pad;
        }
        return;
    }
    /* the run's [a, b) inside [lo, hi) reads x; the rest is pad */
    const int a = inside ? clamp(lo.s7, j0, j1) : j1, b = inside ? clamp(hi.s7, a, j1) : j1;
    for (int j = j0; j < a; j++)
        y[dst + j * ys.s7] = pad;
    if (xs.s7 == 1 && ys.s7 == 1) {
        __global const float *xr = x + src - lo.s7;
        __global float *yr = y + dst;
        for (int j = a; j < b; j++)
            yr[j] = scale * xr[j];
    } else {
        for (int j = a; j < b; j++)
            y[dst + j * ys.s7] = scale * x[src + (j - lo.s7) * xs.s7];
    }
    for (int j = b; j < j1; j++)
        y[dst + j * ys.s7] = pad;
}

/* Sums. Grid (n_out * parts): item (o, p) adds x over reduction
 * coordinates r in [p*chunk, min((p+1)*chunk, r_total)) of space rn (x's
 * strides rs, r_rank used dimensions) at output coordinate o of space on
 * (x's strides os, o_rank used), in ascending r, and writes scale * sum
 * to y[y_off + o*parts + p]. With parts > 1 the host sums the parts the
 * same way (a second launch), so the order is fixed: same inputs, same
 * bits. A work-item loops chunk times: the host keeps that within the
 * device's loop budget. */
#define ST_BASE_DIM(c, d) base += k * os.c;
#define ST_AT_DIM(c, d) at += k * rs.c;
__kernel void st_reduce(__global const float *x, int x_off, int8 on, int8 os, int o_rank, int8 rn, int8 rs,
                        int r_rank, float scale, __global float *y, int y_off, int n_out, int parts, int chunk,
                        int r_total)
{
    int i = get_global_id(0);
    if (i >= n_out * parts)
        return;
    int o = i / parts, p = i - o * parts, rem = o, k, base = x_off, rank = o_rank;
    int8 n = on;
    ST_DIMS(ST_BASE_DIM)
    n = rn;
    rank = r_rank;
    float s = 0.0f;
    int r_end = min(p * chunk + chunk, r_total);
    for (int r = p * chunk; r < r_end; r++) {
        int at = base;
        rem = r;
        ST_DIMS(ST_AT_DIM)
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

/* The offsets of a and b at y's item i of space n (rank used dimensions). */
#define ST_AB_DIM(c, d)                                                                                            \
    ia += k * as.c;                                                                                                \
    ib += k * bs.c;
#define ST_AB_OFFSETS                                                                                              \
    int rem = i, k, ia = a_off, ib = b_off;                                                                        \
    ST_DIMS(ST_AB_DIM)

/* Grid (total): y[y_off + i] = a op b. */
__kernel void st_binary_forward(int op, __global const float *a, int a_off, int8 as, __global const float *b,
                                int b_off, int8 bs, __global float *y, int y_off, int8 n, int rank, int total)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    ST_AB_OFFSETS;
    y[y_off + i] = st_binary(op, a[ia], b[ib]);
}

/* st_binary_forward's CPU variant (strided.c): item (q, row) writes
 * elements [q*chunk, + chunk) of row `row` of y's space, the run of its
 * innermost dimension (.s7), along which a and b each step by 1 or 0
 * (broadcast); the row's offsets found once (rank - 1 divisions) rather
 * than per element, then 16 elements a step (a broadcast operand's one
 * value in every lane) and the last ones singly; ops 0-3 only (pow keeps
 * the scalar kernel's bits). The same values as st_binary_forward, element
 * for element. The host keeps chunk within the device's loop budget. */
TEENY_INLINE float16 st_binary16(int op, float16 a, float16 b)
{
    return op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : a / b;
}

__kernel void st_binary_rows(int op, __global const float *a, int a_off, int8 as, __global const float *b, int b_off,
                             int8 bs, __global float *y, int y_off, int8 n, int rank, int rows, int chunk)
{
    const int q = get_global_id(0), row = get_global_id(1), j0 = q * chunk;
    if (row >= rows || j0 >= n.s7)
        return;
    const int i = row * n.s7; /* the row's first element: coordinate 0 along .s7 */
    ST_AB_OFFSETS;
    const int len = min(n.s7 - j0, chunk);
    __global const float *pa = a + ia + j0 * as.s7, *pb = b + ib + j0 * bs.s7;
    __global float *py = y + y_off + i + j0;
    int j = 0;
    for (; j + 16 <= len; j += 16) {
        float16 av = as.s7 ? vload16(0, pa + j) : (float16)(pa[0]), bv = bs.s7 ? vload16(0, pb + j) : (float16)(pb[0]);
        vstore16(st_binary16(op, av, bv), 0, py + j);
    }
    for (; j < len; j++)
        py[j] = st_binary(op, pa[j * as.s7], pb[j * bs.s7]);
}

/* Grid (total): t[t_off + i] = dy * d(a op b)/d(a) (wrt 0) or d/d(b) (wrt
 * 1) at y's item i; the host sums t over the operand's broadcast
 * dimensions (st_reduce), or t is the gradient itself. pow's gradient wrt
 * b is 0 where a is 0 and b >= 0 (PyTorch's choice), a^b ln a elsewhere. */
__kernel void st_binary_term(int op, int wrt, __global const float *a, int a_off, int8 as, __global const float *b,
                             int b_off, int8 bs, __global const float *dy, int dy_off, __global float *t, int t_off,
                             int8 n, int rank, int total)
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
