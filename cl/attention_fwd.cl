/*
 * attention_fwd.cl -- attn_fwd, the fp32 tiled forward (in every
 * attention program but the tf32 one). The second part of the attention
 * program, after attention.cl, whose banner holds the layouts, the tiling
 * and the compile-time parameters (FW_*).
 */
/* ---- forward ---- */

#ifndef TEENY_TF32 /* the tf32 program has attn_fwd_tc instead */
#define FW_NT (FW_TR * FW_TC)
#define FW_BM (FW_TR * FW_RM)
#define FW_BN (FW_TC * FW_SC)
#define FW_PS (FW_BN + 4)
#define FW_OCH (ATT_DV / (4 * FW_TC))
#define FW_LR ((FW_RM + FW_TC - 1) / FW_TC) /* lse rows per work-item */
#define FW_LDS (FW_BM * FW_TC + ATT_MAX(FW_BM * QS + FW_BN * QS + FW_BN * VS + FW_BM * FW_PS, FW_BM * VS))

/* The online softmax over a tile's scores s (after each row's tile
 * maximum is in Rm, before P V): each row's running max m and sum l,
 * its probabilities into Ps, its accumulators rescaled. */
TEENY_INLINE void fw_softmax(float *m, float *l, float4 *acc, const float *s, __local const float *Rm,
                             __local float *Ps, const int tr, const int tc)
{
    TEENY_UNROLL
    for (int i = 0; i < FW_RM; i++) {
        const int r = tr + i * FW_TR;
        float mt = m[i], ls = 0.0f;
        TEENY_UNROLL
        for (int t = 0; t < FW_TC; t += 4) {
            float4 x = *(__local const float4 *)(Rm + r * FW_TC + t);
            mt = fmax(mt, fmax(fmax(x.x, x.y), fmax(x.z, x.w)));
        }
#if ATT_EXT
        /* no visible key yet: exponentials against 0 (all give 0) */
        const float ms = mt == -INFINITY ? 0.0f : mt;
#else
        const float ms = mt; /* finite: every tile holds at least one valid key */
#endif
        const float alpha = exp(m[i] - ms);
        m[i] = mt;
        TEENY_UNROLL
        for (int j = 0; j < FW_SC; j++) {
            float p = exp(s[i * ATT_MAXT + j] - ms);
            ls += p;
            Ps[r * FW_PS + tc + j * FW_TC] = p;
        }
        l[i] = l[i] * alpha + ls;
        TEENY_UNROLL
        for (int c = 0; c < FW_OCH; c++)
            acc[i * ATT_MAXT + c] *= alpha;
    }
}

/* The rows' outputs, acc over their sums (the per-thread sums in Rm,
 * added in a fixed order), staged in Os; the max and sum of the rows whose
 * lse this work-item writes into lse_m, lse_s. */
TEENY_INLINE void fw_stage(__local float *Os, float *lse_m, float *lse_s, const float4 *acc, const float *m,
                           __local const float *Rm, const int tr, const int tc)
{
    TEENY_UNROLL
    for (int j = 0; j < FW_LR; j++) {
        lse_m[j] = 0.0f;
        lse_s[j] = 1.0f;
    }
    TEENY_UNROLL
    for (int i = 0; i < FW_RM; i++) {
        const int r = tr + i * FW_TR;
        float sum = 0.0f;
        for (int t = 0; t < FW_TC; t++)
            sum += Rm[r * FW_TC + t];
#if ATT_EXT
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f; /* a fully masked row: o = 0 */
#else
        const float inv = 1.0f / sum;
#endif
        TEENY_UNROLL
        for (int c = 0; c < FW_OCH; c++)
            *(__local float4 *)(Os + r * VS + 4 * (tc + c * FW_TC)) = acc[i * ATT_MAXT + c] * inv;
        if (tc == i % FW_TC) {
            lse_m[i / FW_TC] = m[i];
            lse_s[i / FW_TC] = sum;
        }
    }
}

/* Grid (ceil(n_q / FW_BM) * FW_NT, BH), work-group (FW_NT, 1): group
 * (qb, bh) computes rows [qb*FW_BM, +FW_BM) of O (and lse) for matrix bh.
 * Each work-item holds FW_RM rows x (Dv / FW_TC) columns of the output and
 * the running max of its rows; key/value tiles of FW_BN rows stream through
 * local memory. */
__kernel __attribute__((reqd_work_group_size(FW_NT, 1, 1)))
void attn_fwd(ATT_MAT(q), ATT_MAT(k), ATT_MAT(v), ATT_OUT(o), __global float *lse, int lse_off, int has_lse,
              int heads, int n_q, int n_k, int d, int dv, float scale ATT_EXT_ARGS)
{
    __local float4 lds4[(FW_LDS + 3) / 4];
    __local float *lds = (__local float *)lds4;
    __local float *Rm = lds;                  /* [FW_BM][FW_TC] row partials */
    __local float *Qs = Rm + FW_BM * FW_TC;   /* [FW_BM][QS] */
    __local float *Ks = Qs + FW_BM * QS;      /* [FW_BN][QS] */
    __local float *Vs = Ks + FW_BN * QS;      /* [FW_BN][VS] */
    __local float *Ps = Vs + FW_BN * VS;      /* [FW_BM][FW_PS] probabilities */
    __local float *Os = Qs;                   /* [FW_BM][VS] output staging */
    const int lid = get_local_id(0), tr = lid / FW_TC, tc = lid % FW_TC;
    ATT_QUERY_BLOCK(FW_BM);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), ob = ATT_BASE(o);
    float m[FW_RM], l[FW_RM];
    float4 acc[FW_RM * ATT_MAXT];

    att_load(Qs, QS, FW_BM, ATT_DQ, q, qb + row0 * q_sn, q_sn, q_sd, nr, d, lid, FW_NT);
    TEENY_UNROLL
    for (int i = 0; i < FW_RM; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    TEENY_UNROLL
    for (int i = 0; i < FW_RM * ATT_MAXT; i++)
        acc[i] = (float4)(0.0f);

    for (int k0 = 0; k0 < k_end; k0 += FW_BN) {
        const int nk = min(FW_BN, k_end - k0);
        float s[FW_RM * ATT_MAXT];
        barrier(CLK_LOCAL_MEM_FENCE); /* previous tile's readers are done */
        att_load(Ks, QS, FW_BN, ATT_DQ, k, kb + k0 * k_sn, k_sn, k_sd, nk, d, lid, FW_NT);
        att_load(Vs, VS, FW_BN, ATT_DV, v, vb + k0 * v_sn, v_sn, v_sd, nk, dv, lid, FW_NT);
        barrier(CLK_LOCAL_MEM_FENCE);
        TEENY_UNROLL
        for (int i = 0; i < FW_RM * ATT_MAXT; i++)
            s[i] = 0.0f;
        att_mm_nt(s, FW_RM, FW_SC, Qs, QS, tr, FW_TR, Ks, QS, tc, FW_TC, ATT_DQ);
        TEENY_UNROLL
        for (int i = 0; i < FW_RM; i++) {
            float mx = -INFINITY;
            TEENY_UNROLL
            for (int j = 0; j < FW_SC; j++) {
                float x = tc + j * FW_TC < nk ? s[i * ATT_MAXT + j] * scale : -INFINITY;
#if ATT_EXT
                const int qi = row0 + tr + i * FW_TR, kj = k0 + tc + j * FW_TC;
                const int valid = tr + i * FW_TR < nr && tc + j * FW_TC < nk;
                float dcap;
                x = att_ext(x, mask, valid ? mb + qi * mask_sq + kj * mask_sk : mb, kj - qi, causal_off, softcap,
                            valid, &dcap);
#endif
                s[i * ATT_MAXT + j] = x;
                mx = fmax(mx, x);
            }
            Rm[(tr + i * FW_TR) * FW_TC + tc] = mx;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        fw_softmax(m, l, acc, s, Rm, Ps, tr, tc);
        barrier(CLK_LOCAL_MEM_FENCE);
        att_mm_nn(acc, FW_RM, FW_OCH, Ps, FW_PS, tr, FW_TR, Vs, VS, tc, FW_TC, FW_BN);
    }

    /* combine the per-thread row sums in a fixed order */
    barrier(CLK_LOCAL_MEM_FENCE);
    TEENY_UNROLL
    for (int i = 0; i < FW_RM; i++)
        Rm[(tr + i * FW_TR) * FW_TC + tc] = l[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    /* Row tr + i*FW_TR's lse is written by its work-item with
     * tc == i % FW_TC, which keeps that row's max and sum here; the log is
     * taken after fw_stage (see the banner on log()). */
    float lse_m[FW_LR], lse_s[FW_LR];
    fw_stage(Os, lse_m, lse_s, acc, m, Rm, tr, tc);
    TEENY_UNROLL
    for (int j = 0; j < FW_LR; j++) {
        const int i = tc + j * FW_TC, r = tr + i * FW_TR;
        const float row_lse = lse_m[j] + log(lse_s[j]);
        if (has_lse && i < FW_RM && r < nr)
            lse[lse_off + bh * n_q + row0 + r] = row_lse;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    att_store(o, ob + row0 * o_sn, o_sn, o_sd, nr, dv, Os, VS, FW_BM, ATT_DV, lid, FW_NT);
}
#endif
