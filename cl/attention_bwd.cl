/*
 * attention_bwd.cl -- the backward: attn_bwd_prep (Di and the lse
 * correction, every variant's) and the fp32 tiled attn_bwd_dkdv and
 * attn_bwd_dq (KV_*, QG_*). The attention program's third part, after
 * attention_fwd.cl.
 */
/* ---- backward ---- */

/* The backward takes P = exp((s - lse) + corr) with a per-row correction
 * corr. lse = m + log(l) (m the row's largest score, l its sum of
 * exp(s - m)) holds log(l) only to lse's precision: where |lse| is large,
 * as in a row whose every key is masked by a large finite value (-1e30,
 * -FLT_MAX: every score the same), log(l) is lost and exp(s - lse) would
 * be 1 for every key instead of 1/l. corr is 0 where |lse| <
 * ATT_LSE_EXACT (there lse is m + log(l) to within 2^-17: P keeps the bits
 * of exp(s - lse)), else (lse - m) - log(l) from the row's m and l
 * recomputed by attn_bwd_prep, so that (s - lse) + corr is s - m - log(l)
 * (s - lse exact where s is near lse). */
#define ATT_LSE_EXACT 256.0f

/* seg: which launch of a loop split over several (attn_bwd_prep, the CPU
 * variants) this is */
#define ATT_SEG_FIRST 1
#define ATT_SEG_LAST 2

/* Grid (n_q, BH), any work-group: work-item (n, bh) writes
 * di[bh*n_q + n] = sum_c dO[bh][n][c] * O[bh][n][c], summed in order, and
 * the row's corr[bh*n_q + n] (above). Where |lse| >= ATT_LSE_EXACT it walks
 * the row's keys, each score taken as the passes take it: (q . k) scale
 * summed along the head dim in order, (scale q) . k in the CPU variants'
 * order (prescale), each operand rounded to tf32 in the tf32 program (not
 * under 3xTF32), then softcap, mask and causal frontier. A long walk is
 * split into launches (teeny__loop_budget): each takes keys [seg_begin,
 * seg_end), the running max and sum kept in state[2 * (bh*n_q + n)]
 * between them (state is never read in a first launch or written in a
 * last one); Di is taken in the first. */
__kernel void attn_bwd_prep(ATT_MAT(o), ATT_MAT(d_o), ATT_MAT(q), ATT_MAT(k), __global const float *lse, int lse_off,
                            __global float *di, __global float *corr, __global float *state, int heads, int n_q,
                            int n_k, int d, int dv, float scale ATT_EXT_ARGS, int prescale, int seg_begin, int seg_end,
                            int seg)
{
    /* items past n_q redo the last row and store nothing (no early
     * return: see ATT_CPU_BLOCK) */
    const int n_ = get_global_id(0), bh = get_global_id(1), n = min(n_, n_q - 1), live = n_ == n;
    const int row = bh * n_q + n, first = seg & ATT_SEG_FIRST, last = seg & ATT_SEG_LAST;
    const int ob = ATT_BASE(o) + n * o_sn, gb = ATT_BASE(d_o) + n * d_o_sn;
    float acc = 0.0f;
    for (int c = 0; c < (first ? dv : 0); c++)
        acc = TEENY_MAD(o[ob + c * o_sd], d_o[gb + c * d_o_sd], acc);
    if (live && first)
        di[row] = acc;

    const float l_row = lse[lse_off + row];
    const int fix = isfinite(l_row) && fabs(l_row) >= ATT_LSE_EXACT;
    const float qs = prescale ? scale : 1.0f, ss = prescale ? 1.0f : scale;
    const int qb = ATT_BASE(q) + n * q_sn, kb = ATT_BASE(k);
#if ATT_EXT
    const int mb = ATT_MASK_BASE + n * mask_sq, k_end = fix ? min(seg_end, max(seg_begin, n + 1 + causal_off)) : 0;
#else
    const int k_end = fix ? seg_end : 0;
#endif
    float m = fix && !first ? state[2 * row] : -INFINITY, l = fix && !first ? state[2 * row + 1] : 0.0f;
    for (int j = seg_begin; j < k_end; j++) {
        float s = 0.0f;
        for (int c = 0; c < d; c++)
            s = TEENY_MAD(ATT_TC_ROUND(q[qb + c * q_sd]) * qs, ATT_TC_ROUND(k[kb + j * k_sn + c * k_sd]), s);
        float x = s * ss;
#if ATT_EXT
        float dcap;
        x = att_ext(x, mask, mb + j * mask_sk, j - n, causal_off, softcap, 1, &dcap);
#endif
        if (x > m) {
            l = TEENY_MAD(l, exp(m - x), 1.0f);
            m = x;
        } else if (x != -INFINITY) {
            l += exp(x - m);
        }
    }
    const float g = log(l); /* outside every branch (see log() above) */
    if (live && last)
        corr[row] = fix && l > 0.0f ? (l_row - m) - g : 0.0f;
    if (live && !last && fix) {
        state[2 * row] = m;
        state[2 * row + 1] = l;
    }
}

/* The ATT_EXT arguments of P and dS (att_bwd_pds, attention_tf32.cl's
 * tc_bwd_pds). */
#if ATT_EXT
#define ATT_PDS_EXT_PARAMS , __global const float *mask, int mb, int mask_sq, int mask_sk, int causal_off, float softcap
#define ATT_PDS_EXT , mask, mb, mask_sq, mask_sk, causal_off, softcap
#else
#define ATT_PDS_EXT_PARAMS
#define ATT_PDS_EXT
#endif

#ifndef TEENY_TF32 /* the tf32 program has attn_bwd_dkdv_tc and attn_bwd_dq_tc instead */

/* P and dS of raw score s (times scale here) of query qi and key kj:
 * p = exp((x - l) + c) and *ds = p (dp - dd) (times the cap's derivative
 * under ATT_EXT), x the scaled score (masked and capped under ATT_EXT,
 * where the pair exists: valid); 0 where x is -inf, or without ATT_EXT
 * where the tile's column is past the last (col_in 0). Returns p. */
TEENY_INLINE float att_bwd_pds(float s, float scale, float dp, float l, float c, float dd, int qi, int kj, int valid,
                               int col_in ATT_PDS_EXT_PARAMS, float *ds)
{
#if ATT_EXT
    float dcap;
    const float x = att_ext(s * scale, mask, valid ? mb + qi * mask_sq + kj * mask_sk : mb, kj - qi, causal_off,
                            softcap, valid, &dcap);
    const float p = x == -INFINITY ? 0.0f : exp((x - l) + c);
    *ds = x == -INFINITY ? 0.0f : p * (dp - dd) * dcap;
    (void)col_in;
#else
    float p = col_in ? exp((s * scale - l) + c) : 0.0f;
    *ds = p * (dp - dd);
    (void)qi;
    (void)kj;
    (void)valid;
#endif
    return p;
}

/* The item's rm x nc tile of a key tile against a query tile: raw scores
 * s = A B^T (rows of Q and K, [*][QS]) and dp = Ag Bg^T (their rows of dO
 * and V, [*][VS]), rows r = r0 + i*rs and columns c = c0 + j*cs, then P
 * and dS (att_bwd_pds) to S[r*ps + c] (and P to P). keys: rows are keys
 * key0 + r (n_rows of them) and columns queries q0 + c (n_cols), lse,
 * corr and Di per column in Lc, Cc, Dc (dK/dV); else rows are queries
 * q0 + r, columns keys key0 + c, those per row in lr, cr, dr (dQ). */
TEENY_INLINE void att_bwd_tile(float *s, float *dp, const int rm, const int nc, __local const float *A,
                               __local const float *Ag, const int r0, const int rs, __local const float *B,
                               __local const float *Bg, const int c0, const int cs, float scale, const int keys,
                               int q0, int key0, int n_rows, int n_cols, __local const float *Lc,
                               __local const float *Cc, __local const float *Dc, const float *lr, const float *cr,
                               const float *dr, __local float *P, __local float *S, const int ps ATT_PDS_EXT_PARAMS)
{
    TEENY_UNROLL
    for (int i = 0; i < rm * ATT_MAXT; i++)
        s[i] = dp[i] = 0.0f;
    att_mm_nt(s, rm, nc, A, QS, r0, rs, B, QS, c0, cs, ATT_DQ);
    att_mm_nt(dp, rm, nc, Ag, VS, r0, rs, Bg, VS, c0, cs, ATT_DV);
    TEENY_UNROLL
    for (int i = 0; i < rm; i++) {
        const int r = r0 + i * rs;
        TEENY_UNROLL
        for (int j = 0; j < nc; j++) {
            const int c = c0 + j * cs;
            float ds;
            const float p = att_bwd_pds(s[i * ATT_MAXT + j], scale, dp[i * ATT_MAXT + j], keys ? Lc[c] : lr[i],
                                        keys ? Cc[c] : cr[i], keys ? Dc[c] : dr[i], keys ? q0 + c : q0 + r,
                                        keys ? key0 + r : key0 + c, c < n_cols && r < n_rows, c < n_cols ATT_PDS_EXT,
                                        &ds);
            if (keys)
                P[r * ps + c] = p;
            S[r * ps + c] = ds;
        }
    }
}

/* Stage the item's rm accumulator rows (rows r = r0 + i*rs, float4
 * chunks c0 + c*cs, c < nch; times scale where scaled) in T[r*ts + ...]
 * for att_store. */
TEENY_INLINE void att_bwd_stage(__local float *T, const int ts, const float4 *acc, const int rm, const int nch,
                                const int r0, const int rs, const int c0, const int cs, const int scaled, float scale)
{
    TEENY_UNROLL
    for (int i = 0; i < rm; i++) {
        const int r = r0 + i * rs;
        TEENY_UNROLL
        for (int c = 0; c < nch; c++)
            *(__local float4 *)(T + r * ts + 4 * (c0 + c * cs)) =
                scaled ? acc[i * ATT_MAXT + c] * scale : acc[i * ATT_MAXT + c];
    }
}

#define KV_NT (KV_TR * KV_TC)
#define KV_BR (KV_TR * KV_RM) /* keys per work-group */
#define KV_BC (KV_TC * KV_SC) /* queries per tile */
#define KV_PS (KV_BC + 4)
#define KV_OCH (ATT_DV / (4 * KV_TC))
#define KV_KCH (ATT_DQ / (4 * KV_TC))
#define KV_LDS (KV_BR * QS + KV_BR * VS + KV_BC * QS + KV_BC * VS + 3 * KV_BC + 2 * KV_BR * KV_PS)

/* Grid (ceil(n_k / KV_BR) * KV_NT, BH), work-group (KV_NT, 1): group
 * (kb, bh) owns keys [kb*KV_BR, +KV_BR) of matrix bh and walks every query
 * tile, recomputing P^T = exp((scale K Q^T - lse) + corr) and
 * dS^T = P^T * (V dO^T - Di); each work-item accumulates KV_RM key rows of
 * dV += P^T dO and dK += dS^T Q (times scale), then writes them once
 * (want: bit 0 dK, bit 1 dV). */
__kernel __attribute__((reqd_work_group_size(KV_NT, 1, 1)))
void attn_bwd_dkdv(ATT_MAT(q), ATT_MAT(k), ATT_MAT(v), ATT_MAT(d_o), __global const float *lse, int lse_off,
                   __global const float *di, __global const float *corr, ATT_OUT(dk), ATT_OUT(dv), int want,
                   int heads, int n_q, int n_k, int d, int dvn, float scale ATT_EXT_ARGS)
{
    __local float4 lds4[(KV_LDS + 3) / 4];
    __local float *lds = (__local float *)lds4;
    __local float *Ks = lds;                  /* [KV_BR][QS], later dK staging */
    __local float *Vs = Ks + KV_BR * QS;      /* [KV_BR][VS], later dV staging */
    __local float *Qs = Vs + KV_BR * VS;      /* [KV_BC][QS] */
    __local float *Gs = Qs + KV_BC * QS;      /* [KV_BC][VS] dO */
    __local float *Ls = Gs + KV_BC * VS;      /* [KV_BC] lse */
    __local float *Ds = Ls + KV_BC;           /* [KV_BC] Di */
    __local float *Cs = Ds + KV_BC;           /* [KV_BC] corr */
    __local float *Pt = Cs + KV_BC;           /* [KV_BR][KV_PS] P^T */
    __local float *St = Pt + KV_BR * KV_PS;   /* [KV_BR][KV_PS] dS^T */
    const int lid = get_local_id(0), tr = lid / KV_TC, tc = lid % KV_TC;
    ATT_KEY_BLOCK(KV_BR);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), gb = ATT_BASE(d_o);
    float4 acc_k[KV_RM * ATT_MAXT], acc_v[KV_RM * ATT_MAXT];

    att_load(Ks, QS, KV_BR, ATT_DQ, k, kb + key0 * k_sn, k_sn, k_sd, nkr, d, lid, KV_NT);
    att_load(Vs, VS, KV_BR, ATT_DV, v, vb + key0 * v_sn, v_sn, v_sd, nkr, dvn, lid, KV_NT);
    TEENY_UNROLL
    for (int i = 0; i < KV_RM * ATT_MAXT; i++)
        acc_k[i] = (float4)(0.0f);
    TEENY_UNROLL
    for (int i = 0; i < KV_RM * ATT_MAXT; i++)
        acc_v[i] = (float4)(0.0f);

    for (int q0 = q_begin; q0 < n_q; q0 += KV_BC) {
        const int nq = min(KV_BC, n_q - q0);
        float st[KV_RM * ATT_MAXT], dp[KV_RM * ATT_MAXT];
        barrier(CLK_LOCAL_MEM_FENCE);
        att_load(Qs, QS, KV_BC, ATT_DQ, q, qb + q0 * q_sn, q_sn, q_sd, nq, d, lid, KV_NT);
        att_load(Gs, VS, KV_BC, ATT_DV, d_o, gb + q0 * d_o_sn, d_o_sn, d_o_sd, nq, dvn, lid, KV_NT);
        for (int e = lid; e < KV_BC; e += KV_NT) {
            Ls[e] = e < nq ? lse[lse_off + bh * n_q + q0 + e] : 0.0f;
            Ds[e] = e < nq ? di[bh * n_q + q0 + e] : 0.0f;
            Cs[e] = e < nq ? corr[bh * n_q + q0 + e] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        att_bwd_tile(st, dp, KV_RM, KV_SC, Ks, Vs, tr, KV_TR, Qs, Gs, tc, KV_TC, scale, 1, q0, key0, nkr, nq, Ls, Cs,
                     Ds, 0, 0, 0, Pt, St, KV_PS ATT_PDS_EXT);
        barrier(CLK_LOCAL_MEM_FENCE);
        att_mm_nn(acc_v, KV_RM, KV_OCH, Pt, KV_PS, tr, KV_TR, Gs, VS, tc, KV_TC, KV_BC);
        att_mm_nn(acc_k, KV_RM, KV_KCH, St, KV_PS, tr, KV_TR, Qs, QS, tc, KV_TC, KV_BC);
    }

    barrier(CLK_LOCAL_MEM_FENCE);
    att_bwd_stage(Ks, QS, acc_k, KV_RM, KV_KCH, tr, KV_TR, tc, KV_TC, 1, scale);
    att_bwd_stage(Vs, VS, acc_v, KV_RM, KV_OCH, tr, KV_TR, tc, KV_TC, 0, scale);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (want & 1)
        att_store(dk, ATT_BASE(dk) + key0 * dk_sn, dk_sn, dk_sd, nkr, d, Ks, QS, KV_BR, ATT_DQ, lid, KV_NT);
    if (want & 2)
        att_store(dv, ATT_BASE(dv) + key0 * dv_sn, dv_sn, dv_sd, nkr, dvn, Vs, VS, KV_BR, ATT_DV, lid, KV_NT);
}

#define QG_NT (QG_TR * QG_TC)
#define QG_BM (QG_TR * QG_RM)
#define QG_BN (QG_TC * QG_SC)
#define QG_PS (QG_BN + 4)
#define QG_KCH (ATT_DQ / (4 * QG_TC))
#define QG_LDS (QG_BM * QS + QG_BM * VS + QG_BN * QS + QG_BN * VS + QG_BM * QG_PS)

/* Grid (ceil(n_q / QG_BM) * QG_NT, BH), work-group (QG_NT, 1): group
 * (qb, bh) owns queries [qb*QG_BM, +QG_BM) of matrix bh and walks every
 * key tile, recomputing P (with corr) and dS = P * (dO V^T - Di); each work-item
 * accumulates QG_RM rows of dQ += dS K (times scale), written once. */
__kernel __attribute__((reqd_work_group_size(QG_NT, 1, 1)))
void attn_bwd_dq(ATT_MAT(q), ATT_MAT(k), ATT_MAT(v), ATT_MAT(d_o), __global const float *lse, int lse_off,
                 __global const float *di, __global const float *corr, ATT_OUT(dq), int heads, int n_q, int n_k,
                 int d, int dvn, float scale ATT_EXT_ARGS)
{
    __local float4 lds4[(QG_LDS + 3) / 4];
    __local float *lds = (__local float *)lds4;
    __local float *Qs = lds;                  /* [QG_BM][QS], later dQ staging */
    __local float *Gs = Qs + QG_BM * QS;      /* [QG_BM][VS] dO */
    __local float *Ks = Gs + QG_BM * VS;      /* [QG_BN][QS] */
    __local float *Vs = Ks + QG_BN * QS;      /* [QG_BN][VS] */
    __local float *Ss = Vs + QG_BN * VS;      /* [QG_BM][QG_PS] dS */
    const int lid = get_local_id(0), tr = lid / QG_TC, tc = lid % QG_TC;
    ATT_QUERY_BLOCK(QG_BM);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), gb = ATT_BASE(d_o);
    float lrow[QG_RM], drow[QG_RM], crow[QG_RM];
    float4 acc[QG_RM * ATT_MAXT];

    att_load(Qs, QS, QG_BM, ATT_DQ, q, qb + row0 * q_sn, q_sn, q_sd, nr, d, lid, QG_NT);
    att_load(Gs, VS, QG_BM, ATT_DV, d_o, gb + row0 * d_o_sn, d_o_sn, d_o_sd, nr, dvn, lid, QG_NT);
    TEENY_UNROLL
    for (int i = 0; i < QG_RM; i++) {
        const int r = tr + i * QG_TR;
        lrow[i] = r < nr ? lse[lse_off + bh * n_q + row0 + r] : 0.0f;
        drow[i] = r < nr ? di[bh * n_q + row0 + r] : 0.0f;
        crow[i] = r < nr ? corr[bh * n_q + row0 + r] : 0.0f;
    }
    TEENY_UNROLL
    for (int i = 0; i < QG_RM * ATT_MAXT; i++)
        acc[i] = (float4)(0.0f);

    for (int k0 = 0; k0 < k_end; k0 += QG_BN) {
        const int nk = min(QG_BN, k_end - k0);
        float s[QG_RM * ATT_MAXT], dp[QG_RM * ATT_MAXT];
        barrier(CLK_LOCAL_MEM_FENCE);
        att_load(Ks, QS, QG_BN, ATT_DQ, k, kb + k0 * k_sn, k_sn, k_sd, nk, d, lid, QG_NT);
        att_load(Vs, VS, QG_BN, ATT_DV, v, vb + k0 * v_sn, v_sn, v_sd, nk, dvn, lid, QG_NT);
        barrier(CLK_LOCAL_MEM_FENCE);
        att_bwd_tile(s, dp, QG_RM, QG_SC, Qs, Gs, tr, QG_TR, Ks, Vs, tc, QG_TC, scale, 0, row0, k0, nr, nk, 0, 0, 0,
                     lrow, crow, drow, 0, Ss, QG_PS ATT_PDS_EXT);
        barrier(CLK_LOCAL_MEM_FENCE);
        att_mm_nn(acc, QG_RM, QG_KCH, Ss, QG_PS, tr, QG_TR, Ks, QS, tc, QG_TC, QG_BN);
    }

    barrier(CLK_LOCAL_MEM_FENCE);
    att_bwd_stage(Qs, QS, acc, QG_RM, QG_KCH, tr, QG_TR, tc, QG_TC, 1, scale);
    barrier(CLK_LOCAL_MEM_FENCE);
    att_store(dq, ATT_BASE(dq) + row0 * dq_sn, dq_sn, dq_sd, nr, d, Qs, QS, QG_BM, ATT_DQ, lid, QG_NT);
}
#endif
