/*
 * batchnorm_bwd.cl -- the backward's gradient sums and dx (rows and
 * spatial layouts, bn_backward_channel in one launch), and beside its
 * backward twin the spatial training forward (bn_normalize_train_spatial).
 * The batch-norm program's second part, after batchnorm.cl, whose banner
 * holds the layouts, the two passes and BN_WG.
 */
/* The four units of a trip at e (bn_walk4), loaded (bn_ld) in unit order. */
TEENY_INLINE void bn_ld4(float4 *v, __global const float *p, int4 e, int vec)
{
    v[0] = bn_ld(p, e.s0, vec);
    v[1] = bn_ld(p, e.s1, vec);
    v[2] = bn_ld(p, e.s2, vec);
    v[3] = bn_ld(p, e.s3, vec);
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
        float4 xv[4], gv[4];
        bn_ld4(xv, xc, e, vx);
        bn_ld4(gv, gc, e, vg);
        bn_grad_acc(&sdy, &sdyx, xv[0], gv[0], e.s0, vec, m, act, ascale, ashift); /* in unit order */
        bn_grad_acc(&sdy, &sdyx, xv[1], gv[1], e.s1, vec, m, act, ascale, ashift);
        bn_grad_acc(&sdy, &sdyx, xv[2], gv[2], e.s2, vec, m, act, ascale, ashift);
        bn_grad_acc(&sdy, &sdyx, xv[3], gv[3], e.s3, vec, m, act, ascale, ashift);
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

/* bn_dx_put of a trip's four units at e (bn_walk4), in unit order. */
TEENY_INLINE void bn_dx_put4(__global float *dx, int4 e, int vec, const float4 *xv, const float4 *gv, float m,
                             float scale, float a, float k, int act, float ascale, float ashift)
{
    bn_dx_put(dx, e.s0, vec, xv[0], gv[0], m, scale, a, k, act, ascale, ashift);
    bn_dx_put(dx, e.s1, vec, xv[1], gv[1], m, scale, a, k, act, ascale, ashift);
    bn_dx_put(dx, e.s2, vec, xv[2], gv[2], m, scale, a, k, act, ascale, ashift);
    bn_dx_put(dx, e.s3, vec, xv[3], gv[3], m, scale, a, k, act, ascale, ashift);
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
    float4 v[4];
    bn_ld4(v, xc, e, vx);
    if (lid == 0) {
        float2 ms = bn_train_stats(BN_STATS_PASS, vec, x[x_off + c * S], c, g == 0);
        stat[0] = ms.x;
        stat[1] = ms.y;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float m = stat[0], scale = w[w_off + c] * stat[1], shift = bias[bias_off + c];
    for (;;) {
        bn_put(yc, e.s0, vy, v[0], m, scale, shift, act);
        bn_put(yc, e.s1, vy, v[1], m, scale, shift, act);
        bn_put(yc, e.s2, vy, v[2], m, scale, shift, act);
        bn_put(yc, e.s3, vy, v[3], m, scale, shift, act);
        if ((u += 4 * BN_WG) >= u_end)
            break;
        e = bn_walk4(&wk, u, u_end, C, S, c, vec);
        bn_ld4(v, xc, e, vx);
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
    float4 xv[4], gv[4];
    bn_ld4(xv, xc, e, vx);
    bn_ld4(gv, gc, e, vg);
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
        bn_dx_put4(dxc, e, vd, xv, gv, m, scale, a, k, act, ascale, ashift);
        if ((u += 4 * BN_WG) >= u_end)
            break;
        e = bn_walk4(&wk, u, u_end, C, S, c, vec);
        bn_ld4(xv, xc, e, vx);
        bn_ld4(gv, gc, e, vg);
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
