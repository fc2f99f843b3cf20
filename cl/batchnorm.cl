/*
 * batchnorm.cl -- batch normalization over [B, C, S] data (S = H*W for the
 * 2-d layout [B, C, H, W], S = 1 for the 1-d layout [N, C]).
 *
 * Element (b, c, s) lives at x_off + (b*C + c)*S + s. Per-channel
 * reductions run in two deterministic passes with no atomics:
 *   1. partial kernels: each work-group (or work-item) reduces a fixed
 *      slice of one channel and writes one partial;
 *   2. finalize: one work-item per channel combines its partials in index
 *      order.
 * Two partial layouts:
 *   spatial (S large): work-group (p, c) walks chunk p of channel c's B*S
 *     elements in units of VEC floats (VEC = 4 when S % 4 == 0, loaded with
 *     vload4), items striding by BN_WG so loads are coalesced; partials at
 *     [c][p].
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

/* Grid (BN_WG * K, C), work-group (BN_WG, 1): group (p, c) reduces units
 * [p*chunk, min((p+1)*chunk, units)) of channel c, units = B*S/vec. */
__kernel __attribute__((reqd_work_group_size(BN_WG, 1, 1)))
void bn_stats_spatial(__global const float *x, int x_off, int C, int S, int vec, int units, int chunk,
                      __global float *part)
{
    __local float ln[BN_WG], lm[BN_WG], lq[BN_WG];
    int lid = get_local_id(0), p = get_group_id(0), c = get_group_id(1), K = get_num_groups(0);
    int units_per_row = S / vec;
    int u_end = min(p * chunk + chunk, units);
    float shift = x[x_off + c * S], sd = 0.0f, sdd = 0.0f;
    int cnt = 0;
    for (int u = p * chunk + lid; u < u_end; u += BN_WG) {
        int b = u / units_per_row;
        __global const float *px = x + x_off + (b * C + c) * S + (u - b * units_per_row) * vec;
        if (vec == 4) {
            float4 v = vload4(0, px) - shift;
            sd += (v.x + v.y) + (v.z + v.w);
            sdd += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
            cnt += 4;
        } else {
            float v = *px - shift;
            sd += v;
            sdd += v * v;
            cnt += 1;
        }
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

/* Grid (C): item c merges its K partials in order, writes the batch mean
 * (the shift x[c*S] added back) and rstd and, when update is set, the
 * running statistics (unbiased variance, as PyTorch). */
__kernel void bn_stats_finalize(__global const float *part, int K, int P, int chunk, int total, int vec, int C,
                                __global const float *x, int x_off, int S, float eps, float momentum, int update,
                                __global float *save_mean, int sm_off, __global float *save_rstd, int sr_off,
                                __global float *run_mean, int rm_off, __global float *run_var, int rv_off)
{
    int c = get_global_id(0);
    if (c >= C)
        return;
    float n = 0.0f, m = 0.0f, q = 0.0f;
    for (int i = 0; i < K; i++)
        bn_merge(&n, &m, &q, bn_part_count(i, P, chunk, total, vec), part[(c * K + i) * 2],
                 part[(c * K + i) * 2 + 1]);
    float var = q / n, mean = x[x_off + c * S] + m;
    save_mean[sm_off + c] = mean;
    save_rstd[sr_off + c] = rsqrt(var + eps);
    if (update) {
        run_mean[rm_off + c] = (1.0f - momentum) * run_mean[rm_off + c] + momentum * mean;
        run_var[rv_off + c] = (1.0f - momentum) * run_var[rv_off + c] + momentum * (q / (n - 1.0f));
    }
}

/* The per-channel factor r: rstd itself, or 1/sqrt(var + eps). */
TEENY_INLINE float bn_rstd(__global const float *r, int r_off, int r_is_var, float eps, int c)
{
    float v = r[r_off + c];
    return r_is_var ? rsqrt(v + eps) : v;
}

/* Grid (inner, outer): spatial layout inner = S/vec, outer = B*C (row o is
 * channel o % C); rows layout inner = C*S, outer = B (column i is channel
 * i / S), vec = 1. Each item writes vec outputs:
 * y = (x - mean[c]) * (w[c] * r[c]) + bias[c]. */
__kernel void bn_normalize(__global const float *x, int x_off, __global float *y, int y_off, int inner, int outer,
                           int C, int S, int spatial, int vec,
                           __global const float *mean, int mean_off, __global const float *r, int r_off,
                           int r_is_var, float eps, __global const float *w, int w_off,
                           __global const float *bias, int bias_off)
{
    int i = get_global_id(0), o = get_global_id(1);
    if (i >= inner || o >= outer)
        return;
    int c = spatial ? o % C : i / S;
    float scale = w[w_off + c] * bn_rstd(r, r_off, r_is_var, eps, c);
    float m = mean[mean_off + c], shift = bias[bias_off + c];
    int e = o * inner * vec + i * vec;
    if (vec == 4)
        vstore4((vload4(0, x + x_off + e) - m) * scale + shift, 0, y + y_off + e);
    else
        y[y_off + e] = (x[x_off + e] - m) * scale + shift;
}

/* Gradient sums, spatial layout (grid as bn_stats_spatial): partial
 * [c][p] = (sum dy, sum dy * (x - mean[c])). */
__kernel __attribute__((reqd_work_group_size(BN_WG, 1, 1)))
void bn_grad_spatial(__global const float *x, int x_off, __global const float *dy, int dy_off,
                     __global const float *mean, int mean_off, int C, int S, int vec, int units, int chunk,
                     __global float *part)
{
    __local float sums[2 * BN_WG]; /* rows: sum dy, sum dy * (x - mean) */
    int lid = get_local_id(0), p = get_group_id(0), c = get_group_id(1), K = get_num_groups(0);
    int units_per_row = S / vec;
    int u_end = min(p * chunk + chunk, units);
    float m = mean[mean_off + c], sdy = 0.0f, sdyx = 0.0f;
    for (int u = p * chunk + lid; u < u_end; u += BN_WG) {
        int b = u / units_per_row;
        int e = (b * C + c) * S + (u - b * units_per_row) * vec;
        if (vec == 4) {
            float4 g = vload4(0, dy + dy_off + e), d = vload4(0, x + x_off + e) - m;
            sdy += (g.x + g.y) + (g.z + g.w);
            sdyx += (g.x * d.x + g.y * d.y) + (g.z * d.z + g.w * d.w);
        } else {
            float g = dy[dy_off + e];
            sdy += g;
            sdyx += g * (x[x_off + e] - m);
        }
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
                           __global float *part)
{
    int j = get_global_id(0), p = get_global_id(1), P = get_global_size(1);
    if (j >= CS)
        return;
    int b_end = min(p * rows_per + rows_per, B);
    float m = mean[mean_off + j / S], sdy = 0.0f, sdyx = 0.0f;
    for (int b = p * rows_per; b < b_end; b++) {
        float g = dy[dy_off + b * CS + j];
        sdy += g;
        sdyx += g * (x[x_off + b * CS + j] - m);
    }
    part[(j * P + p) * 2] = sdy;
    part[(j * P + p) * 2 + 1] = sdyx;
}

/* Grid (C): dbias = sum dy, dweight = sum dy * (x - mean) * r. */
__kernel void bn_grad_finalize(__global const float *part, int K, int C, __global const float *r, int r_off,
                               int r_is_var, float eps, __global float *dweight, int dw_off,
                               __global float *dbias, int db_off)
{
    int c = get_global_id(0);
    if (c >= C)
        return;
    float sdy = 0.0f, sdyx = 0.0f;
    for (int i = 0; i < K; i++) {
        sdy += part[(c * K + i) * 2];
        sdyx += part[(c * K + i) * 2 + 1];
    }
    dbias[db_off + c] = sdy;
    dweight[dw_off + c] = sdyx * bn_rstd(r, r_off, r_is_var, eps, c);
}

/* Grid as bn_normalize. Frozen statistics: dx = w * r * dy. Batch
 * statistics: dx = w * r * (dy - dbias/n - xhat * dweight/n), xhat =
 * (x - mean) * r. */
__kernel void bn_backward_dx(__global const float *x, int x_off, __global const float *dy, int dy_off,
                             __global float *dx, int dx_off, int inner, int outer, int C, int S, int spatial, int vec,
                             __global const float *mean, int mean_off, __global const float *r, int r_off,
                             int r_is_var, float eps, __global const float *w, int w_off,
                             __global const float *dweight, int dw_off, __global const float *dbias, int db_off,
                             float inv_n, int frozen)
{
    int i = get_global_id(0), o = get_global_id(1);
    if (i >= inner || o >= outer)
        return;
    int c = spatial ? o % C : i / S;
    float rs = bn_rstd(r, r_off, r_is_var, eps, c);
    float scale = w[w_off + c] * rs;
    float m = mean[mean_off + c];
    float a = frozen ? 0.0f : dbias[db_off + c] * inv_n;
    float k = frozen ? 0.0f : dweight[dw_off + c] * inv_n * rs;
    int e = o * inner * vec + i * vec;
    if (vec == 4) {
        float4 g = vload4(0, dy + dy_off + e), d = vload4(0, x + x_off + e) - m;
        vstore4(scale * (g - a - d * k), 0, dx + dx_off + e);
    } else {
        dx[dx_off + e] = scale * (dy[dy_off + e] - a - (x[x_off + e] - m) * k);
    }
}

/* ---- CPU variants (TEENY_VARIANT_CPU, src/tune), spatial layout ----
 * A CPU runs a work-group's items as a loop, and a barrier splits it: these
 * have none. An item walks its floats in order along contiguous planes,
 * sixteen at a time into float16 accumulators, whose lanes it adds in a
 * fixed order at the end. The reductions split the units as the portable
 * kernels do (partial p of channel c covers units [p*chunk, +chunk)), so
 * the finalize kernels serve both. */

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
                          int K, __global float *part)
{
    const int p = get_global_id(0), c = get_global_id(1);
    if (p >= K || c >= C)
        return;
    const int u0 = p * chunk, u1 = min(u0 + chunk, units);
    const float m = mean[mean_off + c];
    __global const float *xc = x + x_off, *gc = dy + dy_off;
    float16 s16 = (float16)(0.0f), q16 = (float16)(0.0f);
    float s1 = 0.0f, q1 = 0.0f;
    BN_RUNS(u0, u1, vec, S, C, c, {
        int e = 0;
        for (; e + 16 <= len; e += 16) {
            float16 g = vload16(0, gc + base + e);
            s16 += g;
            q16 = TEENY_MAD(g, vload16(0, xc + base + e) - m, q16);
        }
        for (; e < len; e++) {
            float g = gc[base + e];
            s1 += g;
            q1 = TEENY_MAD(g, xc[base + e] - m, q1);
        }
    })
    part[(c * K + p) * 2] = bn_hsum16(s16) + s1;
    part[(c * K + p) * 2 + 1] = bn_hsum16(q16) + q1;
}

/* Grid (ceil(S / BN_CPU_RUN), B*C): item (t, o) normalizes floats
 * [t*BN_CPU_RUN, +BN_CPU_RUN) of plane o (channel o % C), as bn_normalize. */
#define BN_CPU_RUN 1024
__kernel void bn_normalize_cpu(__global const float *x, int x_off, __global float *y, int y_off, int C, int S,
                               int planes, __global const float *mean, int mean_off, __global const float *r,
                               int r_off, int r_is_var, float eps, __global const float *w, int w_off,
                               __global const float *bias, int bias_off)
{
    const int t = get_global_id(0), o = get_global_id(1), c = o % C, e0 = t * BN_CPU_RUN;
    if (o >= planes || e0 >= S)
        return;
    const float scale = w[w_off + c] * bn_rstd(r, r_off, r_is_var, eps, c);
    const float m = mean[mean_off + c], shift = bias[bias_off + c];
    __global const float *px = x + x_off + o * S;
    __global float *py = y + y_off + o * S;
    const int e1 = min(S, e0 + BN_CPU_RUN);
    int e = e0;
    for (; e + 16 <= e1; e += 16)
        vstore16((vload16(0, px + e) - m) * scale + shift, 0, py + e);
    for (; e < e1; e++)
        py[e] = (px[e] - m) * scale + shift;
}

/* Grid as bn_normalize_cpu: dx of bn_backward_dx. */
__kernel void bn_backward_dx_cpu(__global const float *x, int x_off, __global const float *dy, int dy_off,
                                 __global float *dx, int dx_off, int C, int S, int planes,
                                 __global const float *mean, int mean_off, __global const float *r, int r_off,
                                 int r_is_var, float eps, __global const float *w, int w_off,
                                 __global const float *dweight, int dw_off, __global const float *dbias, int db_off,
                                 float inv_n, int frozen)
{
    const int t = get_global_id(0), o = get_global_id(1), c = o % C, e0 = t * BN_CPU_RUN;
    if (o >= planes || e0 >= S)
        return;
    const float rs = bn_rstd(r, r_off, r_is_var, eps, c), scale = w[w_off + c] * rs, m = mean[mean_off + c];
    const float a = frozen ? 0.0f : dbias[db_off + c] * inv_n, k = frozen ? 0.0f : dweight[dw_off + c] * inv_n * rs;
    __global const float *px = x + x_off + o * S, *pg = dy + dy_off + o * S;
    __global float *pd = dx + dx_off + o * S;
    const int e1 = min(S, e0 + BN_CPU_RUN);
    int e = e0;
    for (; e + 16 <= e1; e += 16)
        vstore16(scale * (vload16(0, pg + e) - a - (vload16(0, px + e) - m) * k), 0, pd + e);
    for (; e < e1; e++)
        pd[e] = scale * (pg[e] - a - (px[e] - m) * k);
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
