/*
 * attention_cpu.cl -- the CPU variants of the three passes (attn_*_cpu).
 * The attention program's last part, after attention_tf32.cl.
 */
/* ---- CPU variants (TEENY_VARIANT_CPU, src/tune) ----
 *
 * On a CPU a work-group is a loop over its items and every barrier splits
 * it into more loops, and PoCL vectorizes across items only in code
 * without inner loops. These kernels have no local memory and no barrier:
 * one work-item owns ATT_CR rows and keeps them as the lanes of floatN
 * vectors, with the softmax state and the accumulators in private arrays.
 * Rows past the end are zero and never stored. Each output still has one
 * writer and a fixed summation order. Grid (BH * ceil(n / ATT_CR)), any
 * work-group: item g = bh * blocks + blk. */
#ifndef ATT_CR
#define ATT_CR 8
#endif
#if ATT_CR == 16
#define attv float16
#define attvi int16
#define attv_load vload16
#define ATT_LANES (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#else
#define attv float8
#define attvi int8
#define attv_load vload8
#define ATT_LANES (int8)(0, 1, 2, 3, 4, 5, 6, 7)
#endif

/* Rows row0 .. row0 + ATT_CR - 1 of column c: lanes past nr are zero. */
TEENY_INLINE attv att_rows(__global const float *m, int base, int sn, int nr)
{
    float t[ATT_CR];
    if (sn == 1 && nr == ATT_CR)
        return attv_load(0, m + base);
    for (int r = 0; r < ATT_CR; r++)
        t[r] = r < nr ? m[base + r * sn] : 0.0f;
    return attv_load(0, t);
}

TEENY_INLINE void att_rows_store(__global float *m, int base, int sn, int nr, attv v)
{
    float t[ATT_CR];
#if ATT_CR == 16
    vstore16(v, 0, t);
#else
    vstore8(v, 0, t);
#endif
    for (int r = 0; r < nr; r++)
        m[base + r * sn] = t[r];
}

#if ATT_EXT
/* att_ext over the lanes: x scores (any lane may be a padding row: its
 * result is never stored), bias the mask's elements (zero without
 * ATT_F_MASK), kj_minus_qi per lane; valid for every lane. */
TEENY_INLINE attv att_ext_rows(attv x, attv bias, attvi kj_minus_qi, int causal_off, float softcap, int valid,
                               attv *dcap)
{
#if ATT_EXT & ATT_F_SOFTCAP
    const attv t = tanh(x / softcap);
    x = softcap * t;
    *dcap = 1.0f - t * t;
#else
    *dcap = (attv)(1.0f);
#endif
    x += bias;
    return select(x, (attv)(-INFINITY), kj_minus_qi > (attvi)(causal_off) || (attvi)(!valid));
}

/* The mask's elements of rows (lanes) base + r*sr, r < nr (0 past nr, and
 * everywhere without ATT_F_MASK). */
TEENY_INLINE attv att_mask_rows(__global const float *mask, int base, int sr, int nr)
{
#if ATT_EXT & ATT_F_MASK
    return att_rows(mask, base, sr, nr);
#else
    return (attv)(0.0f);
#endif
}

/* v, or 0 where x is -inf (a masked score: whatever ref or v hold). */
TEENY_INLINE attv att_unless_masked(attv v, attv x)
{
    return select(v, (attv)(0.0f), isequal(x, (attv)(-INFINITY)));
}
#endif

/* The block of rows of item g: matrix bh, first row, valid rows. An item
 * past the last block (the grid is rounded up to the work-group) redoes
 * the last block and stores nothing (nr = 0) rather than returning early:
 * Mesa's llvmpipe warns that it treats kernel arguments read after a
 * divergent return as uniform ("results may be incorrect"). */
#define ATT_CPU_BLOCK(n)                                                                                          \
    const int blocks = ((n) + ATT_CR - 1) / ATT_CR, g_ = get_global_id(0);                                         \
    const int g = min(g_, bh_count * blocks - 1);                                                                  \
    const int bh = g / blocks, row0 = (g - bh * blocks) * ATT_CR;                                                  \
    const int nr = g_ == g ? min(ATT_CR, (n) - row0) : 0

/* One launch of a CPU variant runs the blocks [seg_begin, seg_end) of its
 * loop over keys (queries in dK/dV); a long loop is split into several
 * launches (teeny__loop_budget: Mesa's llvmpipe ends a kernel's loops
 * after 65535 trips in all). ATT_SEG_FIRST starts the accumulators at
 * zero, else they are read back from where the previous launch left them
 * (the outputs, unscaled; the forward's row max and sum in state);
 * ATT_SEG_LAST finishes. Boundaries fall on whole blocks of ATT_KB, so
 * the sums are the ones a single launch makes, bit for bit (ATT_SEG_*:
 * above attn_bwd_prep, which splits its loop the same way). */

/* Keys (queries in dK/dV) are taken in blocks of ATT_KB: one rescale of
 * the accumulators per block, and each private accumulator is read and
 * written once per block instead of once per key. The block loops carry
 * TEENY_UNROLL (their arrays must live in registers) except the ones that
 * choose between exp() and 0: unrolled, those abort PoCL 6.0's compiler
 * (LLVM 18: "Instruction Combining did not reach a fixpoint"). */
#define ATT_KB 8

/* The block of ATT_KB keys (queries in dK/dV) at j0, n valid: each one's
 * element offset in two matrices (a at ab + j*as, b likewise); a short
 * block repeats its last key. */
TEENY_INLINE void att_block_at(int *a, int ab, int as, int *b, int bb, int bs, int j0, int n)
{
    TEENY_UNROLL
    for (int j = 0; j < ATT_KB; j++) {
        const int jj = j0 + min(j, n - 1);
        a[j] = ab + jj * as;
        b[j] = bb + jj * bs;
    }
}

/* s[j] = r . m[at[j] + c * sd], summed over c < n in order from 0: the
 * block's dot products with the item's rows r (scores, dO V^T). */
TEENY_INLINE void att_block_dot(attv *s, const attv *r, __global const float *m, const int *at, int sd, int n)
{
    TEENY_UNROLL
    for (int j = 0; j < ATT_KB; j++)
        s[j] = (attv)(0.0f);
    for (int c = 0; c < n; c++) {
        const attv rc = r[c];
        TEENY_UNROLL
        for (int j = 0; j < ATT_KB; j++)
            s[j] = TEENY_MAD(rc, (attv)(m[at[j] + c * sd]), s[j]);
    }
}

#if ATT_EXT
#define ATT_BLOCK_EXT_PARAMS , __global const float *mask, int mb, int m_sj, int m_sr, int causal_off, float softcap
#define ATT_BLOCK_EXT(m_sj, m_sr) , mask, mb, m_sj, m_sr, causal_off, softcap
#else
#define ATT_BLOCK_EXT_PARAMS
#define ATT_BLOCK_EXT(m_sj, m_sr)
#endif

/* The backward's block of ATT_KB queries (dK/dV, keys_down: the item's
 * rows are keys) or keys (dQ) at j0, n valid: their offsets in the scores'
 * matrix ma (a, at ab + j*as) and dO V^T's mbm (b), the scores s[j] =
 * ra . ma[a[j] + c*asd] (c < d) and dp[j] = rb . mbm[b[j] + c*bsd]
 * (c < dvn); under ATT_EXT s masked and capped (dcap the cap's
 * derivative), the mask's element of lane r and block entry jj at
 * mb + jj*m_sj + r*m_sr. */
TEENY_INLINE void att_bwd_block(attv *s, attv *dp, attv *dcap, int *a, int *b, const attv *ra,
                                __global const float *ma, int ab, int as, int asd, int d, const attv *rb,
                                __global const float *mbm, int bb, int bs, int bsd, int dvn, int j0, int n, int row0,
                                int nr, int keys_down ATT_BLOCK_EXT_PARAMS)
{
    att_block_at(a, ab, as, b, bb, bs, j0, n);
    att_block_dot(s, ra, ma, a, asd, d);
    att_block_dot(dp, rb, mbm, b, bsd, dvn);
#if ATT_EXT
    for (int j = 0; j < ATT_KB; j++) {
        const int jj = j0 + min(j, n - 1);
        s[j] = att_ext_rows(s[j], att_mask_rows(mask, mb + jj * m_sj, m_sr, nr),
                            keys_down ? (attvi)(row0 - jj) + ATT_LANES : (attvi)(jj - row0) - ATT_LANES,
                            causal_off, softcap, j < n, &dcap[j]);
    }
#else
    (void)dcap;
    (void)row0;
    (void)nr;
    (void)keys_down;
#endif
}

/* acc[c] = acc[c] * f + sum_j w[j] m[at[j] + c * sd] over c < n, the
 * block's keys in order: P V (f rescales the forward's rows), P^T dO,
 * dS^T Q, dS K. */
TEENY_INLINE void att_block_acc(attv *acc, attv f, const attv *w, __global const float *m, const int *at, int sd,
                                int n)
{
    for (int c = 0; c < n; c++) {
        attv a = acc[c] * f;
        TEENY_UNROLL
        for (int j = 0; j < ATT_KB; j++)
            a = TEENY_MAD(w[j], (attv)(m[at[j] + c * sd]), a);
        acc[c] = a;
    }
}

/* state: the row max at [bh * n_q + row] and the row sum at [bh_count *
 * n_q + bh * n_q + row] between the launches of a split loop. */
__kernel void attn_fwd_cpu(ATT_MAT(q), ATT_MAT(k), ATT_MAT(v), ATT_OUT(o), __global float *lse, int lse_off,
                           int has_lse, int heads, int n_q, int n_k, int d, int dv, float scale ATT_EXT_ARGS,
                           int bh_count, __global float *state, int seg_begin, int seg_end, int seg)
{
    ATT_CPU_BLOCK(n_q);
    const int qb = ATT_BASE(q) + row0 * q_sn, kb = ATT_BASE(k), vb = ATT_BASE(v), ob = ATT_BASE(o) + row0 * o_sn;
#if ATT_EXT
    /* keys past the rows' causal frontier are never visited; the blocks
     * keep their boundaries (the split launches' bits) */
    const int mb = ATT_MASK_BASE + row0 * mask_sq, k_end = min(seg_end, max(seg_begin, row0 + nr + causal_off));
#else
    const int k_end = seg_end;
#endif
    const int mrow = bh * n_q + row0, lrow = bh_count * n_q + mrow;
    /* rows read back: none in a first launch (branch-free: see
     * ATT_CPU_BLOCK) */
    const int first = seg & ATT_SEG_FIRST, back = first ? 0 : nr, last = seg & ATT_SEG_LAST;
    attv qr[ATT_DQ], acc[ATT_DV];
    for (int c = 0; c < d; c++)
        qr[c] = att_rows(q, qb + c * q_sd, q_sn, nr) * scale;
    for (int c = 0; c < dv; c++)
        acc[c] = att_rows(o, ob + c * o_sd, o_sn, back);
    attv m = first ? (attv)(-INFINITY) : att_rows(state, mrow, 1, back), l = att_rows(state, lrow, 1, back);
    /* a block's ATT_KB keys share each load of q[c] and each
     * read-modify-write of acc[c] (the sums' order is the same as key by
     * key); a short last block reads its last key again with p = 0 */
    for (int j0 = seg_begin; j0 < k_end; j0 += ATT_KB) {
        const int nk = min(ATT_KB, k_end - j0);
        int kr[ATT_KB], vr[ATT_KB];
        attv s[ATT_KB], p[ATT_KB], mx = m;
        att_block_at(kr, kb, k_sn, vr, vb, v_sn, j0, nk);
        att_block_dot(s, qr, k, kr, k_sd, d);
#if ATT_EXT
        for (int j = 0; j < nk; j++) {
            attv dcap;
            s[j] = att_ext_rows(s[j], att_mask_rows(mask, mb + (j0 + j) * mask_sk, mask_sq, nr),
                                (attvi)(j0 + j - row0) - ATT_LANES, causal_off, softcap, 1, &dcap);
        }
#endif
        for (int j = 0; j < nk; j++)
            mx = fmax(mx, s[j]);
#if ATT_EXT
        /* rows with no visible key yet: exponentials against 0 (all 0) */
        const attv ms = select(mx, (attv)(0.0f), isequal(mx, (attv)(-INFINITY)));
#else
        const attv ms = mx;
#endif
        const attv alpha = exp(m - ms);
        m = mx;
        l *= alpha;
        for (int j = 0; j < ATT_KB; j++) {
            p[j] = j < nk ? exp(s[j] - ms) : (attv)(0.0f);
            l += p[j];
        }
        att_block_acc(acc, alpha, p, v, vr, v_sd, dv);
    }
    /* the last launch normalizes; the others leave the state */
#if ATT_EXT
    /* a fully masked row (l = 0): o = 0 */
    const attv inv = last ? select((attv)(0.0f), 1.0f / l, isgreater(l, (attv)(0.0f))) : (attv)(1.0f);
#else
    const attv inv = last ? 1.0f / l : (attv)(1.0f);
#endif
    for (int c = 0; c < dv; c++)
        att_rows_store(o, ob + c * o_sd, o_sn, nr, acc[c] * inv);
    att_rows_store(lse, lse_off + bh * n_q + row0, 1, last && has_lse ? nr : 0, m + log(l));
    att_rows_store(state, mrow, 1, last ? 0 : nr, m);
    att_rows_store(state, lrow, 1, last ? 0 : nr, l);
}

/* Item (bh, key block): dV = P^T dO and dK = scale dS^T Q over every query
 * in order (want: bit 0 dK, bit 1 dV). */
__kernel void attn_bwd_dkdv_cpu(ATT_MAT(q), ATT_MAT(k), ATT_MAT(v), ATT_MAT(d_o), __global const float *lse,
                                int lse_off, __global const float *di, __global const float *corr, ATT_OUT(dk),
                                ATT_OUT(dv), int want, int heads, int n_q, int n_k, int d, int dvn,
                                float scale ATT_EXT_ARGS, int bh_count, int seg_begin, int seg_end, int seg)
{
    ATT_CPU_BLOCK(n_k);
#if ATT_EXT
    /* queries before the first that sees one of these keys are skipped */
    const int mb = ATT_MASK_BASE + row0 * mask_sk, i_begin = min(seg_end, max(seg_begin, row0 - causal_off));
#else
    const int i_begin = seg_begin;
#endif
    const int qb = ATT_BASE(q), kb = ATT_BASE(k) + row0 * k_sn, vb = ATT_BASE(v) + row0 * v_sn, gb = ATT_BASE(d_o);
    const int dkb = ATT_BASE(dk) + row0 * dk_sn, dvb = ATT_BASE(dv) + row0 * dv_sn;
    /* rows of dK and dV written, and read back (none in a first launch);
     * an output not wanted may stand in for the other: never touched */
    const int nk_out = want & 1 ? nr : 0, nv_out = want & 2 ? nr : 0, first = seg & ATT_SEG_FIRST;
    attv kr[ATT_DQ], vr[ATT_DV], ak[ATT_DQ], av[ATT_DV];
    for (int c = 0; c < d; c++) {
        kr[c] = att_rows(k, kb + c * k_sd, k_sn, nr) * scale;
        ak[c] = att_rows(dk, dkb + c * dk_sd, dk_sn, first ? 0 : nk_out);
    }
    for (int c = 0; c < dvn; c++) {
        vr[c] = att_rows(v, vb + c * v_sd, v_sn, nr);
        av[c] = att_rows(dv, dvb + c * dv_sd, dv_sn, first ? 0 : nv_out);
    }
    /* queries in blocks of ATT_KB, as attn_fwd_cpu's keys (same order) */
    for (int i0 = i_begin; i0 < seg_end; i0 += ATT_KB) {
        const int ni = min(ATT_KB, seg_end - i0);
        int qi[ATT_KB], gi[ATT_KB];
        attv s[ATT_KB], dp[ATT_KB], dcap[ATT_KB], p[ATT_KB], ds[ATT_KB];
        att_bwd_block(s, dp, dcap, qi, gi, kr, q, qb, q_sn, q_sd, d, vr, d_o, gb, d_o_sn, d_o_sd, dvn, i0, ni, row0,
                      nr, 1 ATT_BLOCK_EXT(mask_sq, mask_sk));
#if ATT_EXT
        for (int j = 0; j < ATT_KB; j++) {
            const int ii = i0 + min(j, ni - 1);
            p[j] = att_unless_masked(exp((s[j] - lse[lse_off + bh * n_q + ii]) + corr[bh * n_q + ii]), s[j]);
            ds[j] = att_unless_masked(p[j] * (dp[j] - di[bh * n_q + ii]) * dcap[j], s[j]);
        }
#else
        TEENY_UNROLL
        for (int j = 0; j < ATT_KB; j++) {
            const int ii = i0 + min(j, ni - 1);
            p[j] = j < ni ? exp((s[j] - lse[lse_off + bh * n_q + ii]) + corr[bh * n_q + ii]) : (attv)(0.0f);
            ds[j] = p[j] * (dp[j] - di[bh * n_q + ii]);
        }
#endif
        att_block_acc(av, (attv)(1.0f), p, d_o, gi, d_o_sd, dvn);
        att_block_acc(ak, (attv)(1.0f), ds, q, qi, q_sd, d);
    }
    const float ks = seg & ATT_SEG_LAST ? scale : 1.0f;
    for (int c = 0; c < d; c++)
        att_rows_store(dk, dkb + c * dk_sd, dk_sn, nk_out, ak[c] * ks);
    for (int c = 0; c < dvn; c++)
        att_rows_store(dv, dvb + c * dv_sd, dv_sn, nv_out, av[c]);
}

/* Item (bh, query block): dQ = scale dS K over every key in order. */
__kernel void attn_bwd_dq_cpu(ATT_MAT(q), ATT_MAT(k), ATT_MAT(v), ATT_MAT(d_o), __global const float *lse,
                              int lse_off, __global const float *di, __global const float *corr, ATT_OUT(dq),
                              int heads, int n_q, int n_k, int d, int dvn, float scale ATT_EXT_ARGS, int bh_count,
                              int seg_begin, int seg_end, int seg)
{
    ATT_CPU_BLOCK(n_q);
#if ATT_EXT
    const int mb = ATT_MASK_BASE + row0 * mask_sq, k_end = min(seg_end, max(seg_begin, row0 + nr + causal_off));
#else
    const int k_end = seg_end;
#endif
    const int qb = ATT_BASE(q) + row0 * q_sn, kb = ATT_BASE(k), vb = ATT_BASE(v), gb = ATT_BASE(d_o) + row0 * d_o_sn;
    const int dqb = ATT_BASE(dq) + row0 * dq_sn, back = seg & ATT_SEG_FIRST ? 0 : nr;
    attv qr[ATT_DQ], gr[ATT_DV], acc[ATT_DQ];
    for (int c = 0; c < d; c++) {
        qr[c] = att_rows(q, qb + c * q_sd, q_sn, nr) * scale;
        acc[c] = att_rows(dq, dqb + c * dq_sd, dq_sn, back);
    }
    for (int c = 0; c < dvn; c++)
        gr[c] = att_rows(d_o, gb + c * d_o_sd, d_o_sn, nr);
    const attv lr = att_rows(lse, lse_off + bh * n_q + row0, 1, nr), dr = att_rows(di, bh * n_q + row0, 1, nr);
    const attv cr = att_rows(corr, bh * n_q + row0, 1, nr);
    /* keys in blocks of ATT_KB, as attn_fwd_cpu's (same order) */
    for (int j0 = seg_begin; j0 < k_end; j0 += ATT_KB) {
        const int nk = min(ATT_KB, k_end - j0);
        int kj[ATT_KB], vj[ATT_KB];
        attv s[ATT_KB], dp[ATT_KB], dcap[ATT_KB], ds[ATT_KB];
        att_bwd_block(s, dp, dcap, kj, vj, qr, k, kb, k_sn, k_sd, d, gr, v, vb, v_sn, v_sd, dvn, j0, nk, row0, nr,
                      0 ATT_BLOCK_EXT(mask_sk, mask_sq));
#if ATT_EXT
        for (int j = 0; j < ATT_KB; j++)
            ds[j] = att_unless_masked(exp((s[j] - lr) + cr) * (dp[j] - dr) * dcap[j], s[j]);
#else
        for (int j = 0; j < ATT_KB; j++)
            ds[j] = j < nk ? exp((s[j] - lr) + cr) * (dp[j] - dr) : (attv)(0.0f);
#endif
        att_block_acc(acc, (attv)(1.0f), ds, k, kj, k_sd, d);
    }
    const float qs = seg & ATT_SEG_LAST ? scale : 1.0f;
    for (int c = 0; c < d; c++)
        att_rows_store(dq, dqb + c * dq_sd, dq_sn, nr, acc[c] * qs);
}
