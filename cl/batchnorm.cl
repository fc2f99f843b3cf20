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
 *
 * The program is this file (the statistics and the forward) followed by
 * batchnorm_bwd.cl and batchnorm_cpu.cl (src/program/build.c's parts).
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
