/*
 * batchnorm.cl -- batch normalization over [B, C, S] data (S = H*W for the
 * 2-d layout [B, C, H, W], S = 1 for the 1-d layout [N, C]).
 *
 * Element (b, c, s) lives at x_off + (b*C + c)*S + s. Per-channel
 * reductions run in two deterministic passes with no atomics:
 *   1. partial kernels: each work-group (or work-item) reduces a fixed
 *      slice of one channel and writes one partial;
 *   2. finalize: the consumer combines a channel's partials in index
 *      order (bn_train_stats, bn_grad_sums), in the same order wherever it
 *      runs, so every item that does it gets the same bits: bn_normalize_train
 *      (training forward) and bn_backward_dx (backward) do it themselves, in
 *      one item per row (spatial) or column (rows) of a work-group, shared
 *      through local memory; the CPU twins in every item. Exactly one item
 *      per channel, the one holding element (0, c, 0), writes the channel's
 *      outputs (save_mean, save_rstd, the running statistics; dweight,
 *      dbias). bn_grad_finalize remains for a backward without dx.
 * Spatial layout, portable kernels: the consumers are
 * bn_normalize_train_spatial and bn_backward_dx_spatial, grid (BN_WG * G,
 * C), each work-group merging once and then writing a run of its channel;
 * and where a channel's units fit one work-group's registers (BN_WG *
 * BN_REG) the training forward is one launch, bn_train_channel: one
 * work-group per channel, exact two-pass statistics, no partials; and so
 * is the backward with dx, bn_backward_channel.
 * Two partial layouts:
 *   spatial (S large): work-group (p, c) walks chunk p of channel c's B*S
 *     elements in units of VEC floats (VEC = 4 when S % 4 == 0: one float4,
 *     vload4 where the tensor's offset leaves it unaligned), items striding
 *     by BN_WG so loads are coalesced, four units a trip (bn_walk4);
 *     partials at [c][p].
 *   rows (S small, incl. [N, C]): work-item (j, p) owns column j = c*S + s
 *     and the p-th run of rows; neighbouring items read neighbouring
 *     columns; partials at [j][p], i.e. [c][s*P + p].
 * Mean and variance use sums shifted by one value of the channel, its
 * first element x[c*S] (so a large common offset cancels exactly before
 * anything is summed or squared); the partials hold (mean - shift, m2),
 * merged with Chan's formula in that small range, and the finalize adds
 * the shift back once. Means held near the offset itself lost half an ulp
 * of it at every merge (nrms 3e-3 at mean 1e4 over 176 partials). m2 is
 * never negative.
 *
 * Tunable: BN_WG (work-group size, a power of two).
 */
#ifndef BN_WG
#define BN_WG 256
#endif

/* Merge (nb, mb, qb) into (n, m, q): counts, means, sums of squared
 * deviations (Chan et al.). */
TEENY_INLINE void bn_merge(float *n, float *m, float *q, float nb, float mb, float qb)
{
    float na = *n, nt = na + nb;
    if (nb == 0.0f)
        return;
    if (na == 0.0f) {
        *n = nb;
        *m = mb;
        *q = qb;
        return;
    }
    float delta = mb - *m, f = nb / nt;
    *m += delta * f;
    *q += qb + delta * delta * na * f;
    *n = nt;
}

/* Work-group tree merge of per-item (n, mean, m2); result in slot 0. */
TEENY_INLINE void bn_group_merge(__local float *ln, __local float *lm, __local float *lq, int lid)
{
    for (int span = BN_WG / 2; span > 0; span >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < span) {
            float n = ln[lid], m = lm[lid], q = lq[lid];
            bn_merge(&n, &m, &q, ln[lid + span], lm[lid + span], lq[lid + span]);
            ln[lid] = n;
            lm[lid] = m;
            lq[lid] = q;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* A work-item's walk over the units of one channel, BN_WG units apart, as
 * (row b, unit s of the row; upr units per row): one division where it
 * starts, none per unit. bn_walk_e: the unit's first element in channel c
 * (relative to the tensor's offset). */
typedef struct {
    int b, s, upr, db, ds;
} bn_walk;

TEENY_INLINE bn_walk bn_walk_at(int u, int upr)
{
    bn_walk w;
    w.upr = upr;
    w.b = u / upr;
    w.s = u - w.b * upr;
    w.db = BN_WG / upr;
    w.ds = BN_WG - w.db * upr;
    return w;
}

TEENY_INLINE void bn_walk_next(bn_walk *w)
{
    w->b += w->db;
    w->s += w->ds;
    if (w->s >= w->upr) {
        w->s -= w->upr;
        w->b++;
    }
}

TEENY_INLINE int bn_walk_e(const bn_walk *w, int C, int S, int c, int vec)
{
    return (w->b * C + c) * S + w->s * vec;
}

/* The _spatial kernels take four units of their walk per trip: the
 * elements of all four first (-1 for a unit at or past u_end), then their
 * loads, then the arithmetic, so that four loads (eight in the backward)
 * are in flight per item rather than one, whose wait each trip used to
 * pay alone (a store between them may alias the next load: the compiler
 * cannot hoist it). Written out, not an inner loop: a trip stays one of
 * the loop budget's strided rounds at most (batchnorm.c). bn_walk4: the
 * elements of units u, u + BN_WG, u + 2*BN_WG, u + 3*BN_WG; the walk moves
 * past them. */
TEENY_INLINE int bn_walk4_one(bn_walk *w, int live, int C, int S, int c, int vec)
{
    int e = live ? bn_walk_e(w, C, S, c, vec) : -1;
    bn_walk_next(w);
    return e;
}

TEENY_INLINE int4 bn_walk4(bn_walk *w, int u, int u_end, int C, int S, int c, int vec)
{
    const int left = u_end - u;
    int4 e;
    e.s0 = bn_walk4_one(w, left > 0, C, S, c, vec);
    e.s1 = bn_walk4_one(w, left > BN_WG, C, S, c, vec);
    e.s2 = bn_walk4_one(w, left > 2 * BN_WG, C, S, c, vec);
    e.s3 = bn_walk4_one(w, left > 3 * BN_WG, C, S, c, vec);
    return e;
}

/* How one tensor's units are loaded and stored: vec, or BN_AL where vec is
 * 4 and the tensor's element offset a multiple of 4: every unit then
 * starts on 16 bytes (S % 4 == 0; buffers and sub-buffers are aligned far
 * beyond that, as conv2d.cl's float4 paths assume), so one float4 access
 * where vload4 may compile to four scalar ones. */
#define BN_AL 16
TEENY_INLINE int bn_vec_at(int vec, int off)
{
    return vec == 4 && (off & 3) == 0 ? BN_AL : vec;
}

/* The floats of a unit at element e of p (vec 1: in .x; vec as bn_vec_at
 * gave it), zeros where e < 0. */
TEENY_INLINE float4 bn_ld(__global const float *p, int e, int vec)
{
    if (e < 0)
        return (float4)(0.0f);
    if (vec == BN_AL)
        return *(__global const float4 *)(p + e);
    return vec == 4 ? vload4(0, p + e) : (float4)(p[e], 0.0f, 0.0f, 0.0f);
}

/* Store a unit of four floats at element e of p (vec 4 or BN_AL). */
TEENY_INLINE void bn_st4(__global float *p, int e, int vec, float4 v)
{
    if (vec == BN_AL)
        *(__global float4 *)(p + e) = v;
    else
        vstore4(v, 0, p + e);
}

/* Add the unit v (element e; nothing where e < 0), shifted, to the sums
 * and the count of a statistics partial. */
TEENY_INLINE void bn_stats_acc(float *sd, float *sdd, int *cnt, float4 v, int e, int vec, float shift)
{
    if (e < 0)
        return;
    if (vec != 1) {
        v -= shift;
        *sd += (v.x + v.y) + (v.z + v.w);
        *sdd += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
        *cnt += 4;
    } else {
        float t = v.x - shift;
        *sd += t;
        *sdd += t * t;
        *cnt += 1;
    }
}

/* Grid (BN_WG * K, C), work-group (BN_WG, 1): group (p, c) reduces units
 * [p*chunk, min((p+1)*chunk, units)) of channel c, units = B*S/vec. */
__kernel __attribute__((reqd_work_group_size(BN_WG, 1, 1)))
void bn_stats_spatial(__global const float *x, int x_off, int C, int S, int vec, int units, int chunk,
                      __global float *part)
{
    __local float ln[BN_WG], lm[BN_WG], lq[BN_WG];
    int lid = get_local_id(0), p = get_group_id(0), c = get_group_id(1), K = get_num_groups(0);
    int u = p * chunk + lid, u_end = min(p * chunk + chunk, units);
    float shift = x[x_off + c * S], sd = 0.0f, sdd = 0.0f;
    int cnt = 0;
    __global const float *xc = x + x_off;
    const int vx = bn_vec_at(vec, x_off);
    for (bn_walk wk = bn_walk_at(u, S / vec); u < u_end; u += 4 * BN_WG) {
        const int4 e = bn_walk4(&wk, u, u_end, C, S, c, vec);
        const float4 v0 = bn_ld(xc, e.s0, vx), v1 = bn_ld(xc, e.s1, vx), v2 = bn_ld(xc, e.s2, vx),
                     v3 = bn_ld(xc, e.s3, vx);
        bn_stats_acc(&sd, &sdd, &cnt, v0, e.s0, vec, shift); /* in unit order, as one unit a trip was */
        bn_stats_acc(&sd, &sdd, &cnt, v1, e.s1, vec, shift);
        bn_stats_acc(&sd, &sdd, &cnt, v2, e.s2, vec, shift);
        bn_stats_acc(&sd, &sdd, &cnt, v3, e.s3, vec, shift);
    }
    float n = (float)cnt;
    ln[lid] = n;
    lm[lid] = cnt ? sd / n : 0.0f;
    lq[lid] = cnt ? fmax(sdd - sd * (sd / n), 0.0f) : 0.0f;
    bn_group_merge(ln, lm, lq, lid);
    if (lid == 0) {
        part[(c * K + p) * 2] = lm[0];
        part[(c * K + p) * 2 + 1] = lq[0];
    }
}

/* Grid (C*S, P): item (j, p) reduces column j over rows
 * [p*rows_per, min((p+1)*rows_per, B)). */
__kernel void bn_stats_rows(__global const float *x, int x_off, int B, int CS, int S, int rows_per,
                            __global float *part)
{
    int j = get_global_id(0), p = get_global_id(1), P = get_global_size(1);
    if (j >= CS)
        return;
    int b_end = min(p * rows_per + rows_per, B);
    float shift = x[x_off + j / S * S], sd = 0.0f, sdd = 0.0f;
    int cnt = 0;
    for (int b = p * rows_per; b < b_end; b++) {
        float v = x[x_off + b * CS + j] - shift;
        sd += v;
        sdd += v * v;
        cnt++;
    }
    float n = (float)cnt;
    part[(j * P + p) * 2] = cnt ? sd / n : 0.0f;
    part[(j * P + p) * 2 + 1] = cnt ? fmax(sdd - sd * (sd / n), 0.0f) : 0.0f;
}

/* Count of partial q of a channel: partial q covers slice q % P of a
 * total of `total` units split into runs of `chunk`, each unit vec floats. */
TEENY_INLINE float bn_part_count(int q, int P, int chunk, int total, int vec)
{
    int p = q % P;
    return (float)(min(chunk, total - p * chunk) * vec);
}

/* The training forward's statistics arguments: the partials (K per
 * channel, P runs of chunk units out of total) and the per-channel outputs. */
#define BN_STATS_ARGS                                                                                              \
    __global const float *part, int K, int P, int chunk, int total, float eps, float momentum,                   \
        __global float *save_mean, int sm_off, __global float *save_rstd, int sr_off, __global float *run_mean,    \
        int rm_off, __global float *run_var, int rv_off
#define BN_STATS_PASS part, K, P, chunk, total, eps, momentum, save_mean, sm_off, save_rstd, sr_off, run_mean, \
        rm_off, run_var, rv_off

/* Channel c's batch (mean, rstd): its K partials merged in index order,
 * the shift (x[c*S]) added back. The writer also stores save_mean,
 * save_rstd and updates the running statistics (unbiased variance, as
 * PyTorch). */
TEENY_INLINE float2 bn_train_stats(BN_STATS_ARGS, int vec, float shift, int c, int writer)
{
    float n = 0.0f, m = 0.0f, q = 0.0f;
    for (int i = 0; i < K; i++)
        bn_merge(&n, &m, &q, bn_part_count(i, P, chunk, total, vec), part[(c * K + i) * 2],
                 part[(c * K + i) * 2 + 1]);
    float var = q / n, mean = shift + m, rstd = rsqrt(var + eps);
    if (writer) {
        save_mean[sm_off + c] = mean;
        save_rstd[sr_off + c] = rstd;
        run_mean[rm_off + c] = (1.0f - momentum) * run_mean[rm_off + c] + momentum * mean;
        run_var[rv_off + c] = (1.0f - momentum) * run_var[rv_off + c] + momentum * (q / (n - 1.0f));
    }
    return (float2)(mean, rstd);
}

/* The per-channel factor r: rstd itself, or 1/sqrt(var + eps). */
TEENY_INLINE float bn_rstd(__global const float *r, int r_off, int r_is_var, float eps, int c)
{
    float v = r[r_off + c];
    return r_is_var ? rsqrt(v + eps) : v;
}

/* The fused activation (TEENY_ACT_NONE, _RELU, _SILU; the op refuses the
 * others) and its derivative, by common.cl's formulas, over float, float4
 * and float16: a three-way test of a uniform argument, cheap in a hot
 * store (conv2d.cl's banner: the full twelve-way chain is not). */
#define BN_ACT_FNS(T)                                                                                              \
    TEENY_INLINE T bn_act_##T(int act, T v)                                                                        \
    {                                                                                                              \
        if (act == TEENY_ACT_RELU)                                                                                 \
            return fmax(v, 0.0f);                                                                                  \
        if (act == TEENY_ACT_SILU)                                                                                 \
            return v * (1.0f / (1.0f + exp(-v)));                                                                 \
        return v;                                                                                                  \
    }                                                                                                              \
    TEENY_INLINE T bn_dact_##T(int act, T v)                                                                       \
    {                                                                                                              \
        if (act == TEENY_ACT_RELU)                                                                                 \
            return v > 0.0f ? (T)(1.0f) : (T)(0.0f);                                                               \
        if (act != TEENY_ACT_SILU)                                                                                 \
            return (T)(1.0f);                                                                                      \
        T s_ = 1.0f / (1.0f + exp(-v));                                                                            \
        return s_ * (1.0f + v * (1.0f - s_));                                                                      \
    }
BN_ACT_FNS(float)
BN_ACT_FNS(float4)
BN_ACT_FNS(float16)

/* The backward's view of the fused activation: the per-channel affine
 * that rebuilds the pre-activation from d = x - mean, and act. The
 * incoming gradient dy becomes dy * act'(d * scale + shift) (act NONE:
 * dy unchanged, nothing read). */
#define BN_ACT_ARGS                                                                                                \
    __global const float *w, int w_off, __global const float *bias, int bias_off, __global const float *r,       \
        int r_off, int r_is_var, float eps, int act
#define BN_ACT_SETUP(c)                                                                                            \
    const float ascale = act ? w[w_off + (c)] * bn_rstd(r, r_off, r_is_var, eps, (c)) : 0.0f,                     \
                ashift = act ? bias[bias_off + (c)] : 0.0f
#define BN_DY(T, g, d) (act ? (g) * bn_dact_##T(act, (d) * ascale + ashift) : (g))

/* y = act((v - m) * scale + shift) into the vec floats at element e of y
 * (v as bn_ld loaded it; nothing where e < 0). */
TEENY_INLINE void bn_put(__global float *y, int e, int vec, float4 v, float m, float scale, float shift, int act)
{
    if (e < 0)
        return;
    if (vec != 1)
        bn_st4(y, e, vec, bn_act_float4(act, (v - m) * scale + shift));
    else
        y[e] = bn_act_float(act, (v.x - m) * scale + shift);
}

/* y = act((x - m) * scale + shift) over the vec floats at element e. */
TEENY_INLINE void bn_store(__global const float *x, int x_off, __global float *y, int y_off, int e, int vec, float m,
                           float scale, float shift, int act)
{
    bn_put(y + y_off, e, vec, bn_ld(x + x_off, e, vec), m, scale, shift, act);
}

/* Grid (inner, outer): spatial layout inner = S/vec, outer = B*C (row o is
 * channel o % C); rows layout inner = C*S, outer = B (column i is channel
 * i / S), vec = 1. Each item writes vec outputs:
 * y = act((x - mean[c]) * (w[c] * r[c]) + bias[c]). */
__kernel void bn_normalize(__global const float *x, int x_off, __global float *y, int y_off, int inner, int outer,
                           int C, int S, int spatial, int vec,
                           __global const float *mean, int mean_off, __global const float *r, int r_off,
                           int r_is_var, float eps, __global const float *w, int w_off,
                           __global const float *bias, int bias_off, int act)
{
    int i = get_global_id(0), o = get_global_id(1);
    if (i >= inner || o >= outer)
        return;
    int c = spatial ? o % C : i / S;
    float scale = w[w_off + c] * bn_rstd(r, r_off, r_is_var, eps, c);
    bn_store(x, x_off, y, y_off, o * inner * vec + i * vec, vec, mean[mean_off + c], scale, bias[bias_off + c], act);
}

/* Rows layout (the spatial one has its _spatial and _channel kernels),
 * grid as bn_normalize, vec 1: the item of a (BN_WG-item,
 * two-dimensional) work-group that computes its column's per-channel
 * values for the others (local row 0) and the local slot they share (its
 * column). The channel's outputs are written by the one such item holding
 * element (0, c, 0). */
#define BN_LANE_SETUP                                                                                              \
    int i = get_global_id(0), o = get_global_id(1), slot = get_local_id(0), c = i / S;                            \
    int valid = i < inner && o < outer, lane = valid && get_local_id(1) == 0, writer = o == 0 && i % S == 0

/* Training forward, rows layout: the batch statistics from the partials
 * (bn_train_stats), then y as bn_normalize. */
__kernel void bn_normalize_train(__global const float *x, int x_off, __global float *y, int y_off, int inner,
                                 int outer, int C, int S, __global const float *w, int w_off,
                                 __global const float *bias, int bias_off, int act, BN_STATS_ARGS)
{
    __local float stat[2 * BN_WG];
    BN_LANE_SETUP;
    if (lane) {
        float2 ms = bn_train_stats(BN_STATS_PASS, 1, x[x_off + c * S], c, writer);
        stat[2 * slot] = ms.x;
        stat[2 * slot + 1] = ms.y;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!valid)
        return;
    bn_store(x, x_off, y, y_off, o * inner + i, 1, stat[2 * slot], w[w_off + c] * stat[2 * slot + 1],
             bias[bias_off + c], act);
}

/* Training forward in one launch, spatial layout, grid (BN_WG, C): work-group
 * c holds channel c's `units` (at most BN_WG * BN_REG) in registers, item
 * lid units lid + j*BN_WG, shifted by the channel's first element as the
 * partials are; the exact mean of the shifted values, then the sum of
 * squared deviations from it (two passes over the registers, fixed-order
 * tree sums: no cancellation), then y; item 0 writes the channel's
 * outputs as bn_train_stats does. */
#ifndef BN_REG
#define BN_REG 8
#endif
/* BN_VEC (built with BN_REG 32 for planes of single floats, batchnorm.c
 * plan_fused): vec as a constant, so the registers hold one float per
 * unit, not a float4 of which one lane is used. */
#ifdef BN_VEC
#define BN_VEC_FIX(vec) ((vec) = BN_VEC)
#else
#define BN_VEC_FIX(vec) ((void)0)
#endif
__kernel __attribute__((reqd_work_group_size(BN_WG, 1, 1)))
void bn_train_channel(__global const float *x, int x_off, __global float *y, int y_off, int C, int S, int vec,
                      int units, __global const float *w, int w_off, __global const float *bias, int bias_off,
                      int act, float eps, float momentum, __global float *save_mean, int sm_off,
                      __global float *save_rstd, int sr_off, __global float *run_mean, int rm_off,
                      __global float *run_var, int rv_off)
{
    __local float red[2 * BN_WG];
    BN_VEC_FIX(vec);
    const int lid = get_local_id(0), c = get_group_id(1), upr = S / vec;
    __global const float *xc = x + x_off;
    const float shift = xc[c * S], n = (float)(units * vec);
    float4 v[BN_REG];
    float sd = 0.0f, sq = 0.0f;
    bn_walk wk = bn_walk_at(lid, upr);
    TEENY_UNROLL
    for (int j = 0; j < BN_REG; j++, bn_walk_next(&wk)) {
        float4 t = (float4)(0.0f);
        if (lid + j * BN_WG < units) {
            int e = bn_walk_e(&wk, C, S, c, vec);
            t = vec == 4 ? vload4(0, xc + e) - shift : (float4)(xc[e] - shift, 0.0f, 0.0f, 0.0f);
        }
        v[j] = t;
        sd += (t.x + t.y) + (t.z + t.w);
    }
    red[lid] = sd;
    teeny_group_sum(red, lid, BN_WG);
    const float m = red[0] / n;
    TEENY_UNROLL
    for (int j = 0; j < BN_REG; j++) {
        float4 d = v[j] - m;
        if (vec == 1)
            d.yzw = (float3)(0.0f);
        if (lid + j * BN_WG < units)
            sq += (d.x * d.x + d.y * d.y) + (d.z * d.z + d.w * d.w);
    }
    red[BN_WG + lid] = sq;
    teeny_group_sum(red + BN_WG, lid, BN_WG);
    const float q = red[BN_WG], rstd = rsqrt(q / n + eps), mean = shift + m;
    if (lid == 0) {
        save_mean[sm_off + c] = mean;
        save_rstd[sr_off + c] = rstd;
        run_mean[rm_off + c] = (1.0f - momentum) * run_mean[rm_off + c] + momentum * mean;
        run_var[rv_off + c] = (1.0f - momentum) * run_var[rv_off + c] + momentum * (q / (n - 1.0f));
    }
    const float scale = w[w_off + c] * rstd, bshift = bias[bias_off + c];
    wk = bn_walk_at(lid, upr);
    TEENY_UNROLL
    for (int j = 0; j < BN_REG; j++, bn_walk_next(&wk)) {
        if (lid + j * BN_WG < units) {
            int e = y_off + bn_walk_e(&wk, C, S, c, vec);
            float4 o = bn_act_float4(act, (v[j] - m) * scale + bshift);
            if (vec == 4)
                vstore4(o, 0, y + e);
            else
                y[e] = o.x;
        }
    }
}

/* Add unit (xv, gv) (element e; nothing where e < 0) to the gradient
 * sums: dy through the activation (BN_DY), sum dy, sum dy * (x - m). */
TEENY_INLINE void bn_grad_acc(float *sdy, float *sdyx, float4 xv, float4 gv, int e, int vec, float m, int act,
                              float ascale, float ashift)
{
    if (e < 0)
        return;
    if (vec != 1) {
        float4 d = xv - m, g = BN_DY(float4, gv, d);
        *sdy += (g.x + g.y) + (g.z + g.w);
        *sdyx += (g.x * d.x + g.y * d.y) + (g.z * d.z + g.w * d.w);
    } else {
        float d = xv.x - m, g = BN_DY(float, gv.x, d);
        *sdy += g;
        *sdyx += g * d;
    }
}

/* Gradient sums, spatial layout (grid as bn_stats_spatial): partial
 * [c][p] = (sum dy, sum dy * (x - mean[c])), dy through the activation
 * (BN_DY). */
__kernel __attribute__((reqd_work_group_size(BN_WG, 1, 1)))
void bn_grad_spatial(__global const float *x, int x_off, __global const float *dy, int dy_off,
                     __global const float *mean, int mean_off, int C, int S, int vec, int units, int chunk,
                     __global float *part, BN_ACT_ARGS)
{
    __local float sums[2 * BN_WG]; /* rows: sum dy, sum dy * (x - mean) */
    int lid = get_local_id(0), p = get_group_id(0), c = get_group_id(1), K = get_num_groups(0);
    int u = p * chunk + lid, u_end = min(p * chunk + chunk, units);
    float m = mean[mean_off + c], sdy = 0.0f, sdyx = 0.0f;
    BN_ACT_SETUP(c);
    __global const float *xc = x + x_off, *gc = dy + dy_off;
    const int vx = bn_vec_at(vec, x_off), vg = bn_vec_at(vec, dy_off);
    for (bn_walk wk = bn_walk_at(u, S / vec); u < u_end; u += 4 * BN_WG) { /* four units a trip (bn_walk4) */
        const int4 e = bn_walk4(&wk, u, u_end, C, S, c, vec);
        const float4 x0 = bn_ld(xc, e.s0, vx), x1 = bn_ld(xc, e.s1, vx), x2 = bn_ld(xc, e.s2, vx),
                     x3 = bn_ld(xc, e.s3, vx);
        const float4 g0 = bn_ld(gc, e.s0, vg), g1 = bn_ld(gc, e.s1, vg), g2 = bn_ld(gc, e.s2, vg),
                     g3 = bn_ld(gc, e.s3, vg);
        bn_grad_acc(&sdy, &sdyx, x0, g0, e.s0, vec, m, act, ascale, ashift); /* in unit order */
        bn_grad_acc(&sdy, &sdyx, x1, g1, e.s1, vec, m, act, ascale, ashift);
        bn_grad_acc(&sdy, &sdyx, x2, g2, e.s2, vec, m, act, ascale, ashift);
        bn_grad_acc(&sdy, &sdyx, x3, g3, e.s3, vec, m, act, ascale, ashift);
    }
    sums[lid] = sdy;
    sums[BN_WG + lid] = sdyx;
    teeny_group_sum_rows(sums, lid, BN_WG, 2);
    if (lid == 0) {
        part[(c * K + p) * 2] = sums[0];
        part[(c * K + p) * 2 + 1] = sums[BN_WG];
    }
}

/* Gradient sums, rows layout (grid as bn_stats_rows). */
__kernel void bn_grad_rows(__global const float *x, int x_off, __global const float *dy, int dy_off,
                           __global const float *mean, int mean_off, int B, int CS, int S, int rows_per,
                           __global float *part, BN_ACT_ARGS)
{
    int j = get_global_id(0), p = get_global_id(1), P = get_global_size(1);
    if (j >= CS)
        return;
    int b_end = min(p * rows_per + rows_per, B);
    float m = mean[mean_off + j / S], sdy = 0.0f, sdyx = 0.0f;
    BN_ACT_SETUP(j / S);
    for (int b = p * rows_per; b < b_end; b++) {
        float d = x[x_off + b * CS + j] - m, g = BN_DY(float, dy[dy_off + b * CS + j], d);
        sdy += g;
        sdyx += g * d;
    }
    part[(j * P + p) * 2] = sdy;
    part[(j * P + p) * 2 + 1] = sdyx;
}

/* Channel c's (dbias, dweight): dbias = sum dy, dweight = sum dy * (x -
 * mean) * rs, its K partials added in index order; the writer stores them. */
TEENY_INLINE float2 bn_grad_sums(__global const float *part, int K, int c, float rs, int writer,
                                 __global float *dweight, int dw_off, __global float *dbias, int db_off)
{
    float sdy = 0.0f, sdyx = 0.0f;
    for (int i = 0; i < K; i++) {
        sdy += part[(c * K + i) * 2];
        sdyx += part[(c * K + i) * 2 + 1];
    }
    float dwc = sdyx * rs;
    if (writer) {
        dbias[db_off + c] = sdy;
        dweight[dw_off + c] = dwc;
    }
    return (float2)(sdy, dwc);
}

/* Grid (C), for a backward without dx: dbias and dweight (bn_grad_sums). */
__kernel void bn_grad_finalize(__global const float *part, int K, int C, __global const float *r, int r_off,
                               int r_is_var, float eps, __global float *dweight, int dw_off,
                               __global float *dbias, int db_off)
{
    int c = get_global_id(0);
    if (c < C)
        bn_grad_sums(part, K, c, bn_rstd(r, r_off, r_is_var, eps, c), 1, dweight, dw_off, dbias, db_off);
}

/* dx = scale * (dy' - a - d * k) into the vec floats at element e of dx
 * (nothing where e < 0), d = x - m, dy' = dy through the activation
 * (BN_DY, ascale/ashift of BN_ACT_SETUP); xv, gv: x and dy as bn_ld
 * loaded them. */
TEENY_INLINE void bn_dx_put(__global float *dx, int e, int vec, float4 xv, float4 gv, float m, float scale, float a,
                            float k, int act, float ascale, float ashift)
{
    if (e < 0)
        return;
    if (vec != 1) {
        float4 d = xv - m, g = BN_DY(float4, gv, d);
        bn_st4(dx, e, vec, scale * (g - a - d * k));
    } else {
        float d = xv.x - m;
        dx[e] = scale * (BN_DY(float, gv.x, d) - a - d * k);
    }
}

/* bn_dx_put of the vec floats at element e of x and dy. */
TEENY_INLINE void bn_dx_store(__global const float *x, __global const float *dy, __global float *dx, int e, int vec,
                              float m, float scale, float a, float k, int act, float ascale, float ashift)
{
    bn_dx_put(dx, e, vec, bn_ld(x, e, vec), bn_ld(dy, e, vec), m, scale, a, k, act, ascale, ashift);
}

/* Rows layout, grid as bn_normalize: dweight and dbias from the partials
 * (bn_grad_sums, one writer per channel), then dx. Frozen statistics:
 * dx = w * r * dy. Batch statistics: dx = w * r * (dy - dbias/n - xhat *
 * dweight/n), xhat = (x - mean) * r; dy through the activation (BN_DY). */
__kernel void bn_backward_dx(__global const float *x, int x_off, __global const float *dy, int dy_off,
                             __global float *dx, int dx_off, int inner, int outer, int C, int S,
                             __global const float *mean, int mean_off, __global const float *r, int r_off,
                             int r_is_var, float eps, __global const float *w, int w_off,
                             __global const float *part, int K, __global float *dweight, int dw_off,
                             __global float *dbias, int db_off, float inv_n, int frozen,
                             __global const float *bias, int bias_off, int act)
{
    __local float sums[2 * BN_WG];
    BN_LANE_SETUP;
    if (lane) {
        float2 g = bn_grad_sums(part, K, c, bn_rstd(r, r_off, r_is_var, eps, c), writer, dweight, dw_off, dbias,
                                db_off);
        sums[2 * slot] = g.x;
        sums[2 * slot + 1] = g.y;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!valid)
        return;
    float rs = bn_rstd(r, r_off, r_is_var, eps, c);
    float scale = w[w_off + c] * rs;
    float m = mean[mean_off + c];
    float a = frozen ? 0.0f : sums[2 * slot] * inv_n;
    float k = frozen ? 0.0f : sums[2 * slot + 1] * inv_n * rs;
    BN_ACT_SETUP(c);
    bn_dx_store(x + x_off, dy + dy_off, dx + dx_off, o * inner + i, 1, m, scale, a, k, act, ascale, ashift);
}

/* Training forward, spatial layout, grid (BN_WG * G, C): work-group (g, c)
 * merges channel c's partials once (bn_train_stats; group (0, c)'s item 0
 * writes the channel's outputs), then writes units [g*ew_chunk, +ew_chunk)
 * of the channel's `units`, its items BN_WG units apart (loads coalesced
 * along each row), four a trip (bn_walk4), as bn_normalize_train: the same
 * bits. */
__kernel __attribute__((reqd_work_group_size(BN_WG, 1, 1)))
void bn_normalize_train_spatial(__global const float *x, int x_off, __global float *y, int y_off, int C, int S,
                                int vec, int units, int ew_chunk, __global const float *w, int w_off,
                                __global const float *bias, int bias_off, int act, BN_STATS_ARGS)
{
    __local float stat[2];
    int lid = get_local_id(0), g = get_group_id(0), c = get_group_id(1);
    int u = g * ew_chunk + lid, u_end = min(g * ew_chunk + ew_chunk, units);
    __global const float *xc = x + x_off;
    __global float *yc = y + y_off;
    const int vx = bn_vec_at(vec, x_off), vy = bn_vec_at(vec, y_off);
    bn_walk wk = bn_walk_at(u, S / vec);
    int4 e = bn_walk4(&wk, u, u_end, C, S, c, vec);
    /* the first trip's loads: in flight while item 0 merges the partials */
    float4 v0 = bn_ld(xc, e.s0, vx), v1 = bn_ld(xc, e.s1, vx), v2 = bn_ld(xc, e.s2, vx),
           v3 = bn_ld(xc, e.s3, vx);
    if (lid == 0) {
        float2 ms = bn_train_stats(BN_STATS_PASS, vec, x[x_off + c * S], c, g == 0);
        stat[0] = ms.x;
        stat[1] = ms.y;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float m = stat[0], scale = w[w_off + c] * stat[1], shift = bias[bias_off + c];
    for (;;) {
        bn_put(yc, e.s0, vy, v0, m, scale, shift, act);
        bn_put(yc, e.s1, vy, v1, m, scale, shift, act);
        bn_put(yc, e.s2, vy, v2, m, scale, shift, act);
        bn_put(yc, e.s3, vy, v3, m, scale, shift, act);
        if ((u += 4 * BN_WG) >= u_end)
            break;
        e = bn_walk4(&wk, u, u_end, C, S, c, vec);
        v0 = bn_ld(xc, e.s0, vx);
        v1 = bn_ld(xc, e.s1, vx);
        v2 = bn_ld(xc, e.s2, vx);
        v3 = bn_ld(xc, e.s3, vx);
    }
}

/* Backward, spatial layout, grid as bn_normalize_train_spatial: channel
 * c's dweight and dbias merged once per work-group (bn_grad_sums; group
 * (0, c)'s item 0 writes them), then dx over the group's units as
 * bn_backward_dx: the same bits. */
__kernel __attribute__((reqd_work_group_size(BN_WG, 1, 1)))
void bn_backward_dx_spatial(__global const float *x, int x_off, __global const float *dy, int dy_off,
                            __global float *dx, int dx_off, int C, int S, int vec, int units, int ew_chunk,
                            __global const float *mean, int mean_off, __global const float *r, int r_off,
                            int r_is_var, float eps, __global const float *w, int w_off,
                            __global const float *part, int K, __global float *dweight, int dw_off,
                            __global float *dbias, int db_off, float inv_n, int frozen,
                            __global const float *bias, int bias_off, int act)
{
    __local float sums[2];
    int lid = get_local_id(0), g = get_group_id(0), c = get_group_id(1);
    int u = g * ew_chunk + lid, u_end = min(g * ew_chunk + ew_chunk, units);
    __global const float *xc = x + x_off, *gc = dy + dy_off;
    __global float *dxc = dx + dx_off;
    const int vx = bn_vec_at(vec, x_off), vg = bn_vec_at(vec, dy_off), vd = bn_vec_at(vec, dx_off);
    bn_walk wk = bn_walk_at(u, S / vec);
    int4 e = bn_walk4(&wk, u, u_end, C, S, c, vec);
    /* the first trip's loads: in flight while item 0 merges the partials */
    float4 x0 = bn_ld(xc, e.s0, vx), x1 = bn_ld(xc, e.s1, vx), x2 = bn_ld(xc, e.s2, vx),
           x3 = bn_ld(xc, e.s3, vx);
    float4 g0 = bn_ld(gc, e.s0, vg), g1 = bn_ld(gc, e.s1, vg), g2 = bn_ld(gc, e.s2, vg),
           g3 = bn_ld(gc, e.s3, vg);
    float rs = bn_rstd(r, r_off, r_is_var, eps, c);
    if (lid == 0) {
        float2 gs = bn_grad_sums(part, K, c, rs, g == 0, dweight, dw_off, dbias, db_off);
        sums[0] = gs.x;
        sums[1] = gs.y;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float scale = w[w_off + c] * rs, m = mean[mean_off + c];
    float a = frozen ? 0.0f : sums[0] * inv_n, k = frozen ? 0.0f : sums[1] * inv_n * rs;
    BN_ACT_SETUP(c);
    for (;;) {
        bn_dx_put(dxc, e.s0, vd, x0, g0, m, scale, a, k, act, ascale, ashift);
        bn_dx_put(dxc, e.s1, vd, x1, g1, m, scale, a, k, act, ascale, ashift);
        bn_dx_put(dxc, e.s2, vd, x2, g2, m, scale, a, k, act, ascale, ashift);
        bn_dx_put(dxc, e.s3, vd, x3, g3, m, scale, a, k, act, ascale, ashift);
        if ((u += 4 * BN_WG) >= u_end)
            break;
        e = bn_walk4(&wk, u, u_end, C, S, c, vec);
        x0 = bn_ld(xc, e.s0, vx);
        x1 = bn_ld(xc, e.s1, vx);
        x2 = bn_ld(xc, e.s2, vx);
        x3 = bn_ld(xc, e.s3, vx);
        g0 = bn_ld(gc, e.s0, vg);
        g1 = bn_ld(gc, e.s1, vg);
        g2 = bn_ld(gc, e.s2, vg);
        g3 = bn_ld(gc, e.s3, vg);
    }
}

/* Backward in one launch, spatial layout, grid (BN_WG, C), where the
 * training forward is one (bn_train_channel's units): work-group c holds
 * d = x - mean and dy (through the activation, BN_DY) of channel c in
 * registers, sums dy and dy * d over them (fixed-order tree), item 0
 * writes dbias and dweight, then every item its dx as bn_backward_dx. A
 * missing unit (or lane, vec 1) holds dy = 0: it adds nothing. */
__kernel __attribute__((reqd_work_group_size(BN_WG, 1, 1)))
void bn_backward_channel(__global const float *x, int x_off, __global const float *dy, int dy_off,
                         __global float *dx, int dx_off, int C, int S, int vec, int units,
                         __global const float *mean, int mean_off, __global const float *r, int r_off,
                         int r_is_var, float eps, __global const float *w, int w_off, __global float *dweight,
                         int dw_off, __global float *dbias, int db_off, float inv_n, int frozen,
                         __global const float *bias, int bias_off, int act)
{
    __local float red[2 * BN_WG];
    BN_VEC_FIX(vec);
    const int lid = get_local_id(0), c = get_group_id(1), upr = S / vec;
    const float m = mean[mean_off + c], rs = bn_rstd(r, r_off, r_is_var, eps, c);
    BN_ACT_SETUP(c);
    float4 d[BN_REG], g[BN_REG];
    float sdy = 0.0f, sdyx = 0.0f;
    bn_walk wk = bn_walk_at(lid, upr);
    TEENY_UNROLL
    for (int j = 0; j < BN_REG; j++, bn_walk_next(&wk)) {
        float4 xv = (float4)(0.0f), gv = (float4)(0.0f);
        if (lid + j * BN_WG < units) {
            int e = bn_walk_e(&wk, C, S, c, vec);
            xv = vec == 4 ? vload4(0, x + x_off + e) : (float4)(x[x_off + e], 0.0f, 0.0f, 0.0f);
            gv = vec == 4 ? vload4(0, dy + dy_off + e) : (float4)(dy[dy_off + e], 0.0f, 0.0f, 0.0f);
        }
        d[j] = xv - m;
        if (vec == 1) /* lanes y, z, w unused: zeros, so no activation derivative runs for them (BN_VEC: a constant) */
            d[j].yzw = (float3)(0.0f);
        g[j] = BN_DY(float4, gv, d[j]);
        if (vec == 1)
            g[j].yzw = (float3)(0.0f);
        sdy += (g[j].x + g[j].y) + (g[j].z + g[j].w);
        sdyx += (g[j].x * d[j].x + g[j].y * d[j].y) + (g[j].z * d[j].z + g[j].w * d[j].w);
    }
    red[lid] = sdy;
    red[BN_WG + lid] = sdyx;
    teeny_group_sum_rows(red, lid, BN_WG, 2);
    const float db = red[0], dwc = red[BN_WG] * rs;
    if (lid == 0) {
        dbias[db_off + c] = db;
        dweight[dw_off + c] = dwc;
    }
    const float scale = w[w_off + c] * rs, a = frozen ? 0.0f : db * inv_n, k = frozen ? 0.0f : dwc * inv_n * rs;
    wk = bn_walk_at(lid, upr);
    TEENY_UNROLL
    for (int j = 0; j < BN_REG; j++, bn_walk_next(&wk)) {
        if (lid + j * BN_WG < units) {
            int e = dx_off + bn_walk_e(&wk, C, S, c, vec);
            float4 o = scale * (g[j] - a - d[j] * k);
            if (vec == 4)
                vstore4(o, 0, dx + e);
            else
                dx[e] = o.x;
        }
    }
}

/* ---- CPU variants (TEENY_VARIANT_CPU, src/tune), spatial layout ----
 * A CPU runs a work-group's items as a loop, and a barrier splits it: these
 * have none. An item walks its floats in order along contiguous planes,
 * sixteen at a time into float16 accumulators, whose lanes it adds in a
 * fixed order at the end. The reductions split the units as the portable
 * kernels do (partial p of channel c covers units [p*chunk, +chunk)), and
 * the consumers merge them in the same order (every item of
 * bn_normalize_train_cpu and bn_backward_dx_cpu for its own channel). */

/* Visit the contiguous runs of units [u0, u1) of channel c: per plane b,
 * floats [e0, e1) from the channel's element 0 of that plane. */
#define BN_RUNS(u0, u1, vec, S, C, c, BODY)                                                                       \
    {                                                                                                             \
        const int upr_ = (S) / (vec);                                                                             \
        int u_ = (u0);                                                                                            \
        while (u_ < (u1)) {                                                                                       \
            const int b_ = u_ / upr_, s0_ = (u_ - b_ * upr_) * (vec);                                             \
            const int n_ = min((u1) - u_, upr_ - s0_ / (vec));                                                    \
            const int base = (b_ * (C) + (c)) * (S) + s0_, len = n_ * (vec);                                     \
            BODY;                                                                                                 \
            u_ += n_;                                                                                             \
        }                                                                                                         \
    }

/* The lanes' sum in a fixed order. Through a private array, not .lo/.hi:
 * oclgrind 21.10's --uninitialized plugin reports a float16's .lo + .hi as
 * uninitialized (a false positive, reproduced on a three-line kernel). */
TEENY_INLINE float bn_hsum16(float16 v)
{
    float t[16], s = 0.0f;
    vstore16(v, 0, t);
    for (int i = 0; i < 8; i++)
        s += t[i] + t[i + 8];
    return s;
}

/* Grid (K, C), item (p, c): partial p of channel c, as bn_stats_spatial. */
__kernel void bn_stats_cpu(__global const float *x, int x_off, int C, int S, int vec, int units, int chunk, int K,
                           __global float *part)
{
    const int p = get_global_id(0), c = get_global_id(1);
    if (p >= K || c >= C)
        return;
    const int u0 = p * chunk, u1 = min(u0 + chunk, units);
    __global const float *xc = x + x_off;
    const float shift = xc[c * S];
    float16 s16 = (float16)(0.0f), q16 = (float16)(0.0f);
    float s1 = 0.0f, q1 = 0.0f;
    BN_RUNS(u0, u1, vec, S, C, c, {
        int e = 0;
        for (; e + 16 <= len; e += 16) {
            float16 v = vload16(0, xc + base + e) - shift;
            s16 += v;
            q16 = TEENY_MAD(v, v, q16);
        }
        for (; e < len; e++) {
            float v = xc[base + e] - shift;
            s1 += v;
            q1 = TEENY_MAD(v, v, q1);
        }
    })
    const float n = (float)((u1 - u0) * vec), sd = bn_hsum16(s16) + s1, sdd = bn_hsum16(q16) + q1;
    part[(c * K + p) * 2] = sd / n;
    part[(c * K + p) * 2 + 1] = fmax(sdd - sd * (sd / n), 0.0f);
}

/* Grid (K, C): the gradient sums of bn_grad_spatial. */
__kernel void bn_grad_cpu(__global const float *x, int x_off, __global const float *dy, int dy_off,
                          __global const float *mean, int mean_off, int C, int S, int vec, int units, int chunk,
                          int K, __global float *part, BN_ACT_ARGS)
{
    const int p = get_global_id(0), c = get_global_id(1);
    if (p >= K || c >= C)
        return;
    const int u0 = p * chunk, u1 = min(u0 + chunk, units);
    const float m = mean[mean_off + c];
    BN_ACT_SETUP(c);
    __global const float *xc = x + x_off, *gc = dy + dy_off;
    float16 s16 = (float16)(0.0f), q16 = (float16)(0.0f);
    float s1 = 0.0f, q1 = 0.0f;
    BN_RUNS(u0, u1, vec, S, C, c, {
        int e = 0;
        for (; e + 16 <= len; e += 16) {
            float16 d = vload16(0, xc + base + e) - m; /* one declarator each: BN_RUNS's body is */
            float16 g = BN_DY(float16, vload16(0, gc + base + e), d); /* a macro argument */
            s16 += g;
            q16 = TEENY_MAD(g, d, q16);
        }
        for (; e < len; e++) {
            float d = xc[base + e] - m;
            float g = BN_DY(float, gc[base + e], d);
            s1 += g;
            q1 = TEENY_MAD(g, d, q1);
        }
    })
    part[(c * K + p) * 2] = bn_hsum16(s16) + s1;
    part[(c * K + p) * 2 + 1] = bn_hsum16(q16) + q1;
}

/* Grid (ceil(S / BN_CPU_RUN), B*C): item (t, o) normalizes floats
 * [t*BN_CPU_RUN, +BN_CPU_RUN) of plane o (channel o % C), as bn_normalize. */
#define BN_CPU_RUN 1024
#define BN_CPU_SETUP                                                                                               \
    const int t = get_global_id(0), o = get_global_id(1), c = o % C, e0 = t * BN_CPU_RUN;                          \
    if (o >= planes || e0 >= S)                                                                                    \
        return;                                                                                                    \
    const int e1 = min(S, e0 + BN_CPU_RUN), writer = t == 0 && o < C

TEENY_INLINE void bn_store_cpu(__global const float *px, __global float *py, int e, int e1, float m, float scale,
                               float shift, int act)
{
    for (; e + 16 <= e1; e += 16)
        vstore16(bn_act_float16(act, (vload16(0, px + e) - m) * scale + shift), 0, py + e);
    for (; e < e1; e++)
        py[e] = bn_act_float(act, (px[e] - m) * scale + shift);
}

__kernel void bn_normalize_cpu(__global const float *x, int x_off, __global float *y, int y_off, int C, int S,
                               int planes, __global const float *mean, int mean_off, __global const float *r,
                               int r_off, int r_is_var, float eps, __global const float *w, int w_off,
                               __global const float *bias, int bias_off, int act)
{
    BN_CPU_SETUP;
    (void)writer;
    bn_store_cpu(x + x_off + o * S, y + y_off + o * S, e0, e1, mean[mean_off + c],
                 w[w_off + c] * bn_rstd(r, r_off, r_is_var, eps, c), bias[bias_off + c], act);
}

/* Training forward, grid as bn_normalize_cpu: every item merges its
 * channel's partials itself (bn_train_stats; vec is 1 or 4 as the partials
 * were taken), item (0, c) writes the channel's outputs. */
__kernel void bn_normalize_train_cpu(__global const float *x, int x_off, __global float *y, int y_off, int C, int S,
                                     int planes, int vec, __global const float *w, int w_off,
                                     __global const float *bias, int bias_off, int act, BN_STATS_ARGS)
{
    BN_CPU_SETUP;
    float2 ms = bn_train_stats(BN_STATS_PASS, vec, x[x_off + c * S], c, writer);
    bn_store_cpu(x + x_off + o * S, y + y_off + o * S, e0, e1, ms.x, w[w_off + c] * ms.y, bias[bias_off + c], act);
}

/* Grid as bn_normalize_cpu: dweight and dbias (every item merges its
 * channel's partials, item (0, c) writes them), then dx of bn_backward_dx. */
__kernel void bn_backward_dx_cpu(__global const float *x, int x_off, __global const float *dy, int dy_off,
                                 __global float *dx, int dx_off, int C, int S, int planes,
                                 __global const float *mean, int mean_off, __global const float *r, int r_off,
                                 int r_is_var, float eps, __global const float *w, int w_off,
                                 __global const float *part, int K, __global float *dweight, int dw_off,
                                 __global float *dbias, int db_off, float inv_n, int frozen,
                                 __global const float *bias, int bias_off, int act)
{
    BN_CPU_SETUP;
    const float rs = bn_rstd(r, r_off, r_is_var, eps, c), scale = w[w_off + c] * rs, m = mean[mean_off + c];
    const float2 g = bn_grad_sums(part, K, c, rs, writer, dweight, dw_off, dbias, db_off);
    const float a = frozen ? 0.0f : g.x * inv_n, k = frozen ? 0.0f : g.y * inv_n * rs;
    BN_ACT_SETUP(c);
    __global const float *px = x + x_off + o * S, *pg = dy + dy_off + o * S;
    __global float *pd = dx + dx_off + o * S;
    int e = e0;
    for (; e + 16 <= e1; e += 16) {
        float16 d = vload16(0, px + e) - m;
        vstore16(scale * (BN_DY(float16, vload16(0, pg + e), d) - a - d * k), 0, pd + e);
    }
    for (; e < e1; e++) {
        float d = px[e] - m;
        pd[e] = scale * (BN_DY(float, pg[e], d) - a - d * k);
    }
}

/* Grid (C): scale = w / sqrt(var + eps), shift = bias - mean * scale. */
__kernel void bn_fold(__global const float *w, int w_off, __global const float *bias, int bias_off,
                      __global const float *mean, int mean_off, __global const float *var, int var_off, float eps,
                      int C, __global float *scale, int scale_off, __global float *shift, int shift_off)
{
    int c = get_global_id(0);
    if (c >= C)
        return;
    float s = w[w_off + c] * rsqrt(var[var_off + c] + eps);
    scale[scale_off + c] = s;
    shift[shift_off + c] = bias[bias_off + c] - mean[mean_off + c] * s;
}
