/*
 * batchnorm_cpu.cl -- the CPU variants (bn_*_cpu) and bn_fold. The
 * batch-norm program's last part, after batchnorm_bwd.cl.
 */
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
