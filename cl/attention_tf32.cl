/*
 * attention_tf32.cl -- the tensor-core passes (attn_fwd_tc,
 * attn_bwd_dkdv_tc, attn_bwd_dq_tc), all under TEENY_TF32. The attention
 * program's fourth part, after attention_bwd.cl.
 */
#ifdef TEENY_TF32
/* ---- tf32 tensor cores (teeny_ctx_set_tf32; built with -DTEENY_TF32=1
 * only where src/program/probe.c's kernel ran cl/common.cl's tf32 helpers
 * exactly) ----
 *
 * The same three passes, attn_fwd_tc, attn_bwd_dkdv_tc and attn_bwd_dq_tc,
 * with the arguments and grid of their fp32 twins. Each warp of a
 * work-group owns 16 rows (queries; keys in attn_bwd_dkdv_tc), so a group
 * of W warps owns 16 W rows and has 32 W work-items. Every product is
 * mma.sync.m16n8k8 on tf32 operands, rounded (cvt.rna) as they are staged
 * in local memory; the scores, the softmax and every accumulator stay
 * fp32. A warp's own operand rows (Q; K and V; Q and dO) are loaded once
 * as A fragments into registers; the column tiles stream through local
 * memory. P and dS never leave registers: a C fragment of 8 columns
 * (lane 4 r + c: rows r, r + 8 at columns 2c, 2c + 1) is used as is as the
 * A fragment of the next product's k step, whose k = c then stands for
 * column 2c and k = c + 4 for column 2c + 1; the B operand's rows are read
 * in that same order (TC_MM_PN), so the sum over k is the same sum, taken
 * in a different (fixed) order. A row's values live in the four lanes of
 * a quad (lane = 4 r + c holds rows r and r + 8 of its 16, columns 2c,
 * 2c + 1 of each 8-column tile): its maximum and sum are combined by
 * tf32_shfl_xor, 1 then 2, which gives every lane of the quad the same
 * bits. The column tiles, like the fp32 kernels', are visited in one fixed
 * order, so the results are deterministic. Register use grows with the
 * head dims: the host takes these kernels for ATT_DQ, ATT_DV <= 64.
 *
 * TEENY_TF32_X3 (fp32 calls, where the profile says fp32_x3): the same
 * kernels at fp32's accuracy. Nothing is rounded as it is staged; each
 * product splits its operands x = hi + lo, hi = tf32(x), lo = x - hi
 * (exact; the mma reads its top 19 bits), and takes lo_a hi_b, hi_a lo_b,
 * then hi_a hi_b (three mmas into the same fp32 accumulator, the small
 * products first); lo_a lo_b, about 2^-22 of a b, is dropped (CUTLASS's
 * 3xTF32, the arithmetic of PyTorch's fp32 SDPA on these GPUs).
 *
 * Compile-time parameters: TF_W, TF_BN (attn_fwd_tc: warps, key tile),
 * TK_W, TK_BC (dK/dV: warps, query tile), TQ_W, TQ_BN (dQ: warps, key
 * tile); the column tiles are multiples of 8. */
#ifndef TF_W
#define TF_W 4
#endif
#ifndef TF_BN
#define TF_BN 32
#endif
#ifndef TK_W
#define TK_W 4
#endif
#ifndef TK_BC
#define TK_BC 32
#endif
#ifndef TQ_W
#define TQ_W 4
#endif
#ifndef TQ_BN
#define TQ_BN 32
#endif
#define TC_KQ (ATT_DQ / 8) /* k steps over the head dims, n tiles of the accumulators */
#define TC_KV (ATT_DV / 8)

/* Test builds (TEENY_TF32_EMULATE, attention_plan.c's hook, never a
 * device's choice): the mma and the quad shuffles in portable OpenCL C,
 * exchanged through xchg (6 words an item) between barriers, so the
 * fragment logic of these kernels runs, and is checked, on any device.
 * Every item of a work-group makes the same calls, as the kernels do. */
#ifdef TEENY_TF32_EMULATE
#define TC_XCHG_LOCAL(nt) __local uint xchg[6 * (nt)];
#define TC_XCHG_PARAM , __local uint *xchg
#define TC_XCHG_ARG , xchg
#define TC_MMA1(c, a0, a1, a2, a3, b0, b1) tf32_mma_xchg(xchg, c, a0, a1, a2, a3, b0, b1)
#define TC_SHFL_XOR(x, mask) tc_shfl_xor_emu(xchg, x, mask)
#define TC_UNROLL _Pragma("nounroll") /* a loop of barriers, not hundreds: PoCL compiles it in seconds */

TEENY_INLINE float tc_shfl_xor_emu(__local uint *xchg, float x, int mask)
{
    const int lid = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE); /* the last exchange's reads are done */
    xchg[lid] = as_uint(x);
    barrier(CLK_LOCAL_MEM_FENCE);
    return as_float(xchg[lid ^ mask]);
}
#else
#define TC_XCHG_LOCAL(nt)
#define TC_XCHG_PARAM
#define TC_XCHG_ARG
#define TC_MMA1(c, a0, a1, a2, a3, b0, b1) tf32_mma(c, a0, a1, a2, a3, b0, b1)
#define TC_SHFL_XOR(x, mask) tf32_shfl_xor(x, mask)
#define TC_UNROLL TEENY_UNROLL
#endif

/* ATT_EXP (tf32 calls, where the profile says so; never with X3): the
 * passes whose softmax takes its exponentials by the hardware's
 * approximation (TC_EXP, below), a mask: 1 the forward, 2 the backward.
 * Each kernel sets TC_FEXP from its pass's bit before its body. */
#ifndef ATT_EXP
#define ATT_EXP 0
#endif

#ifdef TEENY_TF32_X3
#define TC_OPERAND(x) (x) /* P and dS stay fp32 */
#define TC_EXP(x) exp(x)

/* hi = x rounded to tf32, to nearest, ties away from zero, in integer
 * arithmetic: cvt.rna.tf32.f32 costs sm_90 four to five instructions
 * with its tests for NaN and infinity, and these splits run once for
 * every mma operand. The same bits as cvt.rna for every x but the NaNs
 * whose top fraction bits are all set (NVIDIA's own NaN, 0x7fffffff,
 * among them), whose hi wraps to a zero; their lo is NaN, so the
 * products still are. lo = x - hi (exact) goes to the mma as it is: the tensor
 * core reads a tf32 operand's top 19 bits, so lo is truncated there
 * (|lo| <= 2^-11 |x|, truncated by at most 2^-21 |x|, as likely up as
 * down since hi was rounded to nearest). */
TEENY_INLINE uint tc_hi(uint x)
{
    return (x + 0x1000u) & 0xffffe000u;
}

TEENY_INLINE uint tc_lo(uint x)
{
    return as_uint(as_float(x) - as_float(tc_hi(x)));
}

/* One k step: acc[4 j ..] (j < NT) += A B_j, A the fragment a0..a3, B_j's
 * fragment b_[0], b_[bo] at b_ = BJ (an expression of j_). Under X3 the
 * operands are split once a step and the three products (lo hi, hi lo,
 * hi hi, in that order on every accumulator) are three sweeps over up to
 * four accumulators: an mma that waits for the one before it on the same
 * accumulator would leave the tensor core idle for its latency. */
#define TC_G(NT) ((NT) < 4 ? (NT) : 4)
#define TC_KSTEP(acc, NT, a0, a1, a2, a3, BJ, bo)                                                                 \
    do {                                                                                                         \
        const uint h0_ = tc_hi(a0), h1_ = tc_hi(a1), h2_ = tc_hi(a2), h3_ = tc_hi(a3);                           \
        const uint l0_ = tc_lo(a0), l1_ = tc_lo(a1), l2_ = tc_lo(a2), l3_ = tc_lo(a3);                           \
        TC_UNROLL                                                                                                \
        for (int g_ = 0; g_ < (NT); g_ += TC_G(NT)) {                                                            \
            uint bh_[4][2], bl_[4][2];                                                                           \
            TC_UNROLL                                                                                            \
            for (int i_ = 0; i_ < TC_G(NT); i_++) {                                                              \
                const int j_ = g_ + i_;                                                                          \
                __local const float *b_ = (BJ);                                                                  \
                bh_[i_][0] = tc_hi(as_uint(b_[0]));                                                              \
                bh_[i_][1] = tc_hi(as_uint(b_[bo]));                                                             \
                bl_[i_][0] = tc_lo(as_uint(b_[0]));                                                              \
                bl_[i_][1] = tc_lo(as_uint(b_[bo]));                                                             \
            }                                                                                                    \
            TC_UNROLL                                                                                            \
            for (int i_ = 0; i_ < TC_G(NT); i_++)                                                                \
                TC_MMA1((acc) + 4 * (g_ + i_), l0_, l1_, l2_, l3_, bh_[i_][0], bh_[i_][1]);                      \
            TC_UNROLL                                                                                            \
            for (int i_ = 0; i_ < TC_G(NT); i_++)                                                                \
                TC_MMA1((acc) + 4 * (g_ + i_), h0_, h1_, h2_, h3_, bl_[i_][0], bl_[i_][1]);                      \
            TC_UNROLL                                                                                            \
            for (int i_ = 0; i_ < TC_G(NT); i_++)                                                                \
                TC_MMA1((acc) + 4 * (g_ + i_), h0_, h1_, h2_, h3_, bh_[i_][0], bh_[i_][1]);                      \
        }                                                                                                        \
    } while (0)
#else
#define TC_OPERAND(x) tf32_round(x) /* P and dS as tf32 A fragments */
/* The softmax's exponentials under tf32, whose P and dS are rounded to
 * tf32 (relative error up to 2^-11) right after, where TC_FEXP: e^x as
 * 2^(x log2 e) by the hardware's approximation (ex2.approx.ftz.f32: a
 * multiply and one instruction where exp() takes about eight). CUDA
 * documents the same sequence (__expf) at 2 + floor(|1.173 x|) ulp: under
 * 2^-17 relative for the |x| < 30 that carry any weight against the row's
 * maximum, far below the operands' rounding. 2^-inf is +0 and NaN stays
 * NaN; results below 2^-126 flush to zero. Emulated builds (tests) take
 * exp2(). */
#define TC_EXP(x) (TC_FEXP ? tc_exp(x) : exp(x))
TEENY_INLINE float tc_exp(float x)
{
#ifdef TEENY_TF32_EMULATE
    return exp2(x * M_LOG2E_F);
#else
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * M_LOG2E_F));
    return r;
#endif
}
#define TC_KSTEP(acc, NT, a0, a1, a2, a3, BJ, bo)                                                                 \
    TC_UNROLL                                                                                                    \
    for (int j_ = 0; j_ < (NT); j_++) {                                                                          \
        __local const float *b_ = (BJ);                                                                          \
        TC_MMA1((acc) + 4 * j_, a0, a1, a2, a3, as_uint(b_[0]), as_uint(b_[bo]));                                \
    }
#endif

/* The A fragment of rows row0 + r, row0 + r + 8 at k = k0 + c, k0 + c + 4
 * of a row-major local matrix (row stride s; tf32 values). */
TEENY_INLINE void tc_frag_a(uint *a, __local const float *m, int s, int row0, int k0, int lane)
{
    __local const float *p = m + (row0 + (lane >> 2)) * s + k0 + (lane & 3);
    a[0] = as_uint(p[0]);
    a[1] = as_uint(p[8 * s]);
    a[2] = as_uint(p[4]);
    a[3] = as_uint(p[8 * s + 4]);
}

/* acc[4 j ..] (j < NT) += A B^T over KS k steps: A from register fragments
 * a[KS][4], B row-major in local memory (row stride bs), its rows 8 j + r
 * read at k = 8 s + c, + 4. */
#define TC_MM_NT(acc, NT, a, KS, B, bs, lane)                                                                    \
    TC_UNROLL                                                                                                    \
    for (int s_ = 0; s_ < (KS); s_++)                                                                            \
    TC_KSTEP(acc, NT, (a)[s_][0], (a)[s_][1], (a)[s_][2], (a)[s_][3],                                            \
             (B) + (8 * j_ + ((lane) >> 2)) * (bs) + 8 * s_ + ((lane) & 3), 4)

/* acc[4 j ..] (j < NT) += P B over KS k steps: P the C fragments p[4 s ..]
 * of the warp's 16 x 8 KS scores (rows r, r + 8 at columns 2c, 2c + 1 of
 * each 8; tf32 values), taken as A fragments with k = c standing for
 * column 2c and k = c + 4 for 2c + 1; B row-major in local memory (k
 * rows, stride bs), its columns 8 j + r read at rows 8 s + 2c and + 1
 * accordingly. With bs a multiple of 4 and not of 8 (the rows padded by
 * 4) a warp's reads hit 32 banks. */
#define TC_MM_PN(acc, NT, p, KS, B, bs, lane)                                                                    \
    TC_UNROLL                                                                                                    \
    for (int s_ = 0; s_ < (KS); s_++)                                                                            \
    TC_KSTEP(acc, NT, as_uint((p)[4 * s_]), as_uint((p)[4 * s_ + 2]), as_uint((p)[4 * s_ + 1]),                  \
             as_uint((p)[4 * s_ + 3]), (B) + (8 * s_ + 2 * ((lane) & 3)) * (bs) + 8 * j_ + ((lane) >> 2), bs)

/* The A fragments of a warp's 16 rows of a staged matrix, all its k steps. */
#define TC_FRAGS(a, KS, m, s, row0, lane)                                                                        \
    TEENY_UNROLL                                                                                                 \
    for (int s_ = 0; s_ < (KS); s_++)                                                                            \
        tc_frag_a((a)[s_], (m), (s), (row0), 8 * s_, (lane))

/* The maximum (sum) of x over the four lanes of a quad. */
TEENY_INLINE float tc_quad_max(float x TC_XCHG_PARAM)
{
    x = fmax(x, TC_SHFL_XOR(x, 1));
    return fmax(x, TC_SHFL_XOR(x, 2));
}

TEENY_INLINE float tc_quad_sum(float x TC_XCHG_PARAM)
{
    x += TC_SHFL_XOR(x, 1);
    return x + TC_SHFL_XOR(x, 2);
}

/* Store C fragments acc[4 j ..] (j < NT) of rows row0 + r, + 8 at
 * m[row * s + col] times f. */
#define TC_STAGE(m, s, row0, acc, NT, f, lane)                                                                   \
    TEENY_UNROLL                                                                                                 \
    for (int j_ = 0; j_ < (NT); j_++)                                                                            \
        TEENY_UNROLL                                                                                             \
        for (int e_ = 0; e_ < 4; e_++)                                                                           \
            (m)[((row0) + ((lane) >> 2) + 8 * (e_ >> 1)) * (s) + 8 * j_ + 2 * ((lane) & 3) + (e_ & 1)] =          \
                (acc)[4 * j_ + e_] * (f)

#define TF_NT (32 * TF_W)
#define TF_BM (16 * TF_W)
#define TF_LDS ATT_MAX(TF_BN * QS + TF_BN * VS, TF_BM * ATT_MAX(QS, VS))

#define TC_FEXP (ATT_EXP & 1)

/* The online softmax over a tile's scores s (mx: this lane's maximum of
 * each of its two rows): the rows' running max m and sum l, the
 * accumulators rescaled, and s turned into P as tf32 A fragments. */
TEENY_INLINE void tf_softmax(float *s, float *m, float *l, float *acc, const float *mx TC_XCHG_PARAM)
{
    float ms[2], ls[2] = {0.0f, 0.0f};
    TEENY_UNROLL
    for (int h = 0; h < 2; h++) {
        const float mt = fmax(m[h], tc_quad_max(mx[h] TC_XCHG_ARG));
#if ATT_EXT
        ms[h] = mt == -INFINITY ? 0.0f : mt; /* no visible key yet: exponentials against 0 */
#else
        ms[h] = mt;
#endif
        const float alpha = TC_EXP(m[h] - ms[h]);
        m[h] = mt;
        l[h] *= alpha;
        TEENY_UNROLL
        for (int j = 0; j < TC_KV; j++) {
            acc[4 * j + 2 * h] *= alpha;
            acc[4 * j + 2 * h + 1] *= alpha;
        }
    }
    TEENY_UNROLL
    for (int i = 0; i < TF_BN / 2; i++) {
        const float p = TC_EXP(s[i] - ms[(i >> 1) & 1]);
        ls[(i >> 1) & 1] += p;
        s[i] = TC_OPERAND(p);
    }
    l[0] += ls[0];
    l[1] += ls[1];
}

__kernel __attribute__((reqd_work_group_size(TF_NT, 1, 1)))
void attn_fwd_tc(ATT_MAT(q), ATT_MAT(k), ATT_MAT(v), ATT_OUT(o), __global float *lse, int lse_off, int has_lse,
                 int heads, int n_q, int n_k, int d, int dv, float scale ATT_EXT_ARGS)
{
    __local float4 lds4[(TF_LDS + 3) / 4];
    TC_XCHG_LOCAL(TF_NT)
    __local float *lds = (__local float *)lds4;
    __local float *Ks = lds;               /* [TF_BN][QS] */
    __local float *Vs = Ks + TF_BN * QS;   /* [TF_BN][VS] */
    __local float *Qs = lds, *Os = lds;    /* [TF_BM][QS] Q staging, [TF_BM][VS] output staging */
    const int lid = get_local_id(0), lane = lid & 31, w0 = 16 * (lid >> 5), r = lane >> 2, c = lane & 3;
    ATT_QUERY_BLOCK(TF_BM);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), ob = ATT_BASE(o);
    uint qa[TC_KQ][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, acc[4 * TC_KV];

    att_load_tc(Qs, QS, TF_BM, ATT_DQ, q, qb + row0 * q_sn, q_sn, q_sd, nr, d, lid, TF_NT);
    barrier(CLK_LOCAL_MEM_FENCE);
    TC_FRAGS(qa, TC_KQ, Qs, QS, w0, lane);
    TEENY_UNROLL
    for (int i = 0; i < 4 * TC_KV; i++)
        acc[i] = 0.0f;

    ATT_PF_DECL(pk, TF_BN, ATT_DQ, TF_NT);
    ATT_PF_DECL(pv, TF_BN, ATT_DV, TF_NT);
    ATT_PF_FETCH(TF_PF, pk, TF_BN, ATT_DQ, k, kb, k_sn, min(TF_BN, k_end), d, lid, TF_NT);
    ATT_PF_FETCH(TF_PF, pv, TF_BN, ATT_DV, v, vb, v_sn, min(TF_BN, k_end), dv, lid, TF_NT);
    for (int k0 = 0; k0 < k_end; k0 += TF_BN) {
        const int nk = min(TF_BN, k_end - k0), k1 = k0 + TF_BN;
        float s[TF_BN / 2], mx[2] = {-INFINITY, -INFINITY};
        barrier(CLK_LOCAL_MEM_FENCE); /* Q staging and the previous tile's readers are done */
        ATT_PF_PUT(TF_PF, pk, Ks, QS, TF_BN, ATT_DQ, k, kb + k0 * k_sn, k_sn, k_sd, nk, d, lid, TF_NT);
        ATT_PF_PUT(TF_PF, pv, Vs, VS, TF_BN, ATT_DV, v, vb + k0 * v_sn, v_sn, v_sd, nk, dv, lid, TF_NT);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k1 < k_end) { /* the next tile's loads, in flight during this one */
            ATT_PF_FETCH(TF_PF, pk, TF_BN, ATT_DQ, k, kb + k1 * k_sn, k_sn, min(TF_BN, k_end - k1), d, lid, TF_NT);
            ATT_PF_FETCH(TF_PF, pv, TF_BN, ATT_DV, v, vb + k1 * v_sn, v_sn, min(TF_BN, k_end - k1), dv, lid, TF_NT);
        }
        TEENY_UNROLL
        for (int i = 0; i < TF_BN / 2; i++)
            s[i] = 0.0f;
        TC_MM_NT(s, TF_BN / 8, qa, TC_KQ, Ks, QS, lane);
        TEENY_UNROLL
        for (int i = 0; i < TF_BN / 2; i++) {
            const int h = (i >> 1) & 1, row = w0 + r + 8 * h, col = 8 * (i >> 2) + 2 * c + (i & 1);
            float x = col < nk ? s[i] * scale : -INFINITY;
#if ATT_EXT
            const int qi = row0 + row, kj = k0 + col, valid = row < nr && col < nk;
            float dcap;
            x = att_ext(x, mask, valid ? mb + qi * mask_sq + kj * mask_sk : mb, kj - qi, causal_off, softcap, valid,
                        &dcap);
#endif
            s[i] = x;
            mx[h] = fmax(mx[h], x);
        }
        tf_softmax(s, m, l, acc, mx TC_XCHG_ARG);
        TC_MM_PN(acc, TC_KV, s, TF_BN / 8, Vs, VS, lane);
    }

    float inv[2], row_lse[2];
    TEENY_UNROLL
    for (int h = 0; h < 2; h++) {
        const float sum = tc_quad_sum(l[h] TC_XCHG_ARG);
#if ATT_EXT
        inv[h] = sum > 0.0f ? 1.0f / sum : 0.0f; /* a fully masked row: o = 0 */
#else
        inv[h] = 1.0f / sum;
#endif
        row_lse[h] = m[h] + log(sum);
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* Os overlaps every tile */
    TEENY_UNROLL
    for (int j = 0; j < TC_KV; j++)
        TEENY_UNROLL
        for (int e = 0; e < 4; e++)
            Os[(w0 + r + 8 * (e >> 1)) * VS + 8 * j + 2 * c + (e & 1)] = acc[4 * j + e] * inv[e >> 1];
    TEENY_UNROLL
    for (int h = 0; h < 2; h++)
        if (has_lse && c == 0 && w0 + r + 8 * h < nr)
            lse[lse_off + bh * n_q + row0 + w0 + r + 8 * h] = row_lse[h];
    barrier(CLK_LOCAL_MEM_FENCE);
    att_store(o, ob + row0 * o_sn, o_sn, o_sd, nr, dv, Os, VS, TF_BM, ATT_DV, lid, TF_NT);
}

#undef TC_FEXP
#define TC_FEXP (ATT_EXP & 2) /* the backward's, both kernels */

/* A tile's raw scores s = A B^T and dp = Ag Bg^T, the item's n/2 C
 * fragment values of each (n columns a warp's 16 rows), from zero: A's
 * and Ag's register fragments a, ag (of Q and dO, or K and V) against B
 * ([*][QS]) and Bg ([*][VS]) in local memory. */
#define TC_BWD_SCORES(s, dp, n, a, ag, B, Bg, lane)                                                              \
    TEENY_UNROLL                                                                                                 \
    for (int i_ = 0; i_ < (n) / 2; i_++)                                                                         \
        (s)[i_] = (dp)[i_] = 0.0f;                                                                               \
    TC_MM_NT(s, (n) / 8, a, TC_KQ, B, QS, lane);                                                                 \
    TC_MM_NT(dp, (n) / 8, ag, TC_KV, Bg, VS, lane)

/* P and dS over the item's n/2 C fragment values of a tile, in place as
 * tf32 operands (TC_OPERAND): value i at row w0 + r + 8 h (h = (i >> 1)
 * & 1), column 8 (i >> 2) + 2 c + (i & 1) of raw scores s and dO V^T dp.
 * keys (dK/dV): rows are keys key0 + row (n_rows of them), columns
 * queries q0 + col (n_cols), lse, corr and Di per column in Lc, Cc, Dc;
 * P to s, dS to dp. Else (dQ): rows are queries q0 + row, columns keys
 * key0 + col, those per row half in lr, cr, dr; dS to s. As
 * attention_bwd.cl's att_bwd_pds, with TC_EXP. */
TEENY_INLINE void tc_bwd_pds(float *s, float *dp, const int n, float scale, const int keys, int q0, int key0,
                             int n_rows, int n_cols, int w0, int r, int c, __local const float *Lc,
                             __local const float *Cc, __local const float *Dc, const float *lr, const float *cr,
                             const float *dr ATT_PDS_EXT_PARAMS)
{
    TEENY_UNROLL
    for (int i = 0; i < n / 2; i++) {
        const int h = (i >> 1) & 1, row = w0 + r + 8 * h, col = 8 * (i >> 2) + 2 * c + (i & 1);
        const float l = keys ? Lc[col] : lr[h], lc = keys ? Cc[col] : cr[h], ld = keys ? Dc[col] : dr[h];
#if ATT_EXT
        const int qi = keys ? q0 + col : q0 + row, kj = keys ? key0 + row : key0 + col;
        const int valid = col < n_cols && row < n_rows;
        float dcap;
        const float x = att_ext(s[i] * scale, mask, valid ? mb + qi * mask_sq + kj * mask_sk : mb, kj - qi,
                                causal_off, softcap, valid, &dcap);
        const float p = x == -INFINITY ? 0.0f : TC_EXP((x - l) + lc);
        const float ds = x == -INFINITY ? 0.0f : p * (dp[i] - ld) * dcap;
#else
        const float p = col < n_cols ? TC_EXP((s[i] * scale - l) + lc) : 0.0f;
        const float ds = p * (dp[i] - ld);
#endif
        if (keys) {
            s[i] = TC_OPERAND(p);
            dp[i] = TC_OPERAND(ds);
        } else {
            s[i] = TC_OPERAND(ds);
        }
    }
}

#define TK_NT (32 * TK_W)
#define TK_BR (16 * TK_W) /* keys per work-group */
#define TK_LDS ATT_MAX(TK_BC * QS + TK_BC * VS + 3 * TK_BC, TK_BR * (QS + VS))

/* The lse, Di and corr entries of a query tile (nr valid; lse's at lse_at,
 * Di's and corr's at at): fetched into pl, pd, pc where the pass
 * prefetches, then (tk_rows_put) stored in Ls, Ds, Cs (ATT_PF_*_ROWS). */
TEENY_INLINE void tk_rows_fetch(float *pl, float *pd, float *pc, __global const float *lse, int lse_at,
                                __global const float *di, __global const float *corr, int at, int nr, int lid)
{
    ATT_PF_FETCH_ROWS(TB_PF, pl, TK_BC, lse, lse_at, nr, lid, TK_NT);
    ATT_PF_FETCH_ROWS(TB_PF, pd, TK_BC, di, at, nr, lid, TK_NT);
    ATT_PF_FETCH_ROWS(TB_PF, pc, TK_BC, corr, at, nr, lid, TK_NT);
}

TEENY_INLINE void tk_rows_put(__local float *Ls, __local float *Ds, __local float *Cs, float *pl, float *pd, float *pc,
                              __global const float *lse, int lse_at, __global const float *di,
                              __global const float *corr, int at, int nr, int lid)
{
    ATT_PF_PUT_ROWS(TB_PF, pl, Ls, TK_BC, lse, lse_at, nr, lid, TK_NT);
    ATT_PF_PUT_ROWS(TB_PF, pd, Ds, TK_BC, di, at, nr, lid, TK_NT);
    ATT_PF_PUT_ROWS(TB_PF, pc, Cs, TK_BC, corr, at, nr, lid, TK_NT);
}

__kernel __attribute__((reqd_work_group_size(TK_NT, 1, 1)))
void attn_bwd_dkdv_tc(ATT_MAT(q), ATT_MAT(k), ATT_MAT(v), ATT_MAT(d_o), __global const float *lse, int lse_off,
                      __global const float *di, __global const float *corr, ATT_OUT(dk), ATT_OUT(dv), int want,
                      int heads, int n_q, int n_k, int d, int dvn, float scale ATT_EXT_ARGS)
{
    __local float4 lds4[(TK_LDS + 3) / 4];
    TC_XCHG_LOCAL(TK_NT)
    __local float *lds = (__local float *)lds4;
    __local float *Qs = lds;                /* [TK_BC][QS] */
    __local float *Gs = Qs + TK_BC * QS;    /* [TK_BC][VS] dO */
    __local float *Ls = Gs + TK_BC * VS;    /* [TK_BC] lse */
    __local float *Ds = Ls + TK_BC;         /* [TK_BC] Di */
    __local float *Cs = Ds + TK_BC;         /* [TK_BC] corr */
    __local float *Ks = lds, *Vs = lds + TK_BR * QS; /* K, V staging; then dK, dV */
    const int lid = get_local_id(0), lane = lid & 31, w0 = 16 * (lid >> 5), r = lane >> 2, c = lane & 3;
    ATT_KEY_BLOCK(TK_BR);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), gb = ATT_BASE(d_o);
    uint ka[TC_KQ][4], va[TC_KV][4];
    float acc_k[4 * TC_KQ], acc_v[4 * TC_KV];

    att_load_tc(Ks, QS, TK_BR, ATT_DQ, k, kb + key0 * k_sn, k_sn, k_sd, nkr, d, lid, TK_NT);
    att_load_tc(Vs, VS, TK_BR, ATT_DV, v, vb + key0 * v_sn, v_sn, v_sd, nkr, dvn, lid, TK_NT);
    barrier(CLK_LOCAL_MEM_FENCE);
    TC_FRAGS(ka, TC_KQ, Ks, QS, w0, lane);
    TC_FRAGS(va, TC_KV, Vs, VS, w0, lane);
    TEENY_UNROLL
    for (int i = 0; i < 4 * TC_KQ; i++)
        acc_k[i] = 0.0f;
    TEENY_UNROLL
    for (int i = 0; i < 4 * TC_KV; i++)
        acc_v[i] = 0.0f;

    ATT_PF_DECL(pq, TK_BC, ATT_DQ, TK_NT);
    ATT_PF_DECL(pg, TK_BC, ATT_DV, TK_NT);
    ATT_PF_DECL_ROWS(pl, TK_BC, TK_NT);
    ATT_PF_DECL_ROWS(pd, TK_BC, TK_NT);
    ATT_PF_DECL_ROWS(pc, TK_BC, TK_NT);
    ATT_PF_FETCH(TB_PF, pq, TK_BC, ATT_DQ, q, qb + q_begin * q_sn, q_sn, min(TK_BC, n_q - q_begin), d, lid, TK_NT);
    ATT_PF_FETCH(TB_PF, pg, TK_BC, ATT_DV, d_o, gb + q_begin * d_o_sn, d_o_sn, min(TK_BC, n_q - q_begin), dvn, lid,
                 TK_NT);
    tk_rows_fetch(pl, pd, pc, lse, lse_off + bh * n_q + q_begin, di, corr, bh * n_q + q_begin, n_q - q_begin,
                  lid);
    for (int q0 = q_begin; q0 < n_q; q0 += TK_BC) {
        const int nq = min(TK_BC, n_q - q0), q1 = q0 + TK_BC;
        float st[TK_BC / 2], dp[TK_BC / 2];
        barrier(CLK_LOCAL_MEM_FENCE);
        ATT_PF_PUT(TB_PF, pq, Qs, QS, TK_BC, ATT_DQ, q, qb + q0 * q_sn, q_sn, q_sd, nq, d, lid, TK_NT);
        ATT_PF_PUT(TB_PF, pg, Gs, VS, TK_BC, ATT_DV, d_o, gb + q0 * d_o_sn, d_o_sn, d_o_sd, nq, dvn, lid, TK_NT);
        tk_rows_put(Ls, Ds, Cs, pl, pd, pc, lse, lse_off + bh * n_q + q0, di, corr, bh * n_q + q0, nq, lid);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (q1 < n_q) { /* the next tile's loads, in flight during this one */
            ATT_PF_FETCH(TB_PF, pq, TK_BC, ATT_DQ, q, qb + q1 * q_sn, q_sn, min(TK_BC, n_q - q1), d, lid, TK_NT);
            ATT_PF_FETCH(TB_PF, pg, TK_BC, ATT_DV, d_o, gb + q1 * d_o_sn, d_o_sn, min(TK_BC, n_q - q1), dvn, lid,
                         TK_NT);
            tk_rows_fetch(pl, pd, pc, lse, lse_off + bh * n_q + q1, di, corr, bh * n_q + q1, n_q - q1, lid);
        }
        TC_BWD_SCORES(st, dp, TK_BC, ka, va, Qs, Gs, lane);
        /* P^T and dS^T, in place */
        tc_bwd_pds(st, dp, TK_BC, scale, 1, q0, key0, nkr, nq, w0, r, c, Ls, Cs, Ds, 0, 0, 0 ATT_PDS_EXT);
        TC_MM_PN(acc_v, TC_KV, st, TK_BC / 8, Gs, VS, lane);
        TC_MM_PN(acc_k, TC_KQ, dp, TK_BC / 8, Qs, QS, lane);
    }

    barrier(CLK_LOCAL_MEM_FENCE);
    TC_STAGE(Ks, QS, w0, acc_k, TC_KQ, scale, lane);
    TC_STAGE(Vs, VS, w0, acc_v, TC_KV, 1.0f, lane);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (want & 1)
        att_store(dk, ATT_BASE(dk) + key0 * dk_sn, dk_sn, dk_sd, nkr, d, Ks, QS, TK_BR, ATT_DQ, lid, TK_NT);
    if (want & 2)
        att_store(dv, ATT_BASE(dv) + key0 * dv_sn, dv_sn, dv_sd, nkr, dvn, Vs, VS, TK_BR, ATT_DV, lid, TK_NT);
}

#define TQ_NT (32 * TQ_W)
#define TQ_BM (16 * TQ_W)
#define TQ_LDS ATT_MAX(TQ_BN * QS + TQ_BN * VS, TQ_BM * (QS + VS))

__kernel __attribute__((reqd_work_group_size(TQ_NT, 1, 1)))
void attn_bwd_dq_tc(ATT_MAT(q), ATT_MAT(k), ATT_MAT(v), ATT_MAT(d_o), __global const float *lse, int lse_off,
                    __global const float *di, __global const float *corr, ATT_OUT(dq), int heads, int n_q, int n_k,
                    int d, int dvn, float scale ATT_EXT_ARGS)
{
    __local float4 lds4[(TQ_LDS + 3) / 4];
    TC_XCHG_LOCAL(TQ_NT)
    __local float *lds = (__local float *)lds4;
    __local float *Ks = lds;              /* [TQ_BN][QS] */
    __local float *Vs = Ks + TQ_BN * QS;  /* [TQ_BN][VS] */
    __local float *Qs = lds, *Gs = lds + TQ_BM * QS; /* Q, dO staging; then dQ */
    const int lid = get_local_id(0), lane = lid & 31, w0 = 16 * (lid >> 5), r = lane >> 2, c = lane & 3;
    ATT_QUERY_BLOCK(TQ_BM);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), gb = ATT_BASE(d_o);
    uint qa[TC_KQ][4], ga[TC_KV][4];
    float lrow[2], drow[2], crow[2], acc[4 * TC_KQ];

    att_load_tc(Qs, QS, TQ_BM, ATT_DQ, q, qb + row0 * q_sn, q_sn, q_sd, nr, d, lid, TQ_NT);
    att_load_tc(Gs, VS, TQ_BM, ATT_DV, d_o, gb + row0 * d_o_sn, d_o_sn, d_o_sd, nr, dvn, lid, TQ_NT);
    barrier(CLK_LOCAL_MEM_FENCE);
    TC_FRAGS(qa, TC_KQ, Qs, QS, w0, lane);
    TC_FRAGS(ga, TC_KV, Gs, VS, w0, lane);
    TEENY_UNROLL
    for (int h = 0; h < 2; h++) {
        const int row = w0 + r + 8 * h;
        lrow[h] = row < nr ? lse[lse_off + bh * n_q + row0 + row] : 0.0f;
        drow[h] = row < nr ? di[bh * n_q + row0 + row] : 0.0f;
        crow[h] = row < nr ? corr[bh * n_q + row0 + row] : 0.0f;
    }
    TEENY_UNROLL
    for (int i = 0; i < 4 * TC_KQ; i++)
        acc[i] = 0.0f;

    ATT_PF_DECL(pk, TQ_BN, ATT_DQ, TQ_NT);
    ATT_PF_DECL(pv, TQ_BN, ATT_DV, TQ_NT);
    ATT_PF_FETCH(TB_PF, pk, TQ_BN, ATT_DQ, k, kb, k_sn, min(TQ_BN, k_end), d, lid, TQ_NT);
    ATT_PF_FETCH(TB_PF, pv, TQ_BN, ATT_DV, v, vb, v_sn, min(TQ_BN, k_end), dvn, lid, TQ_NT);
    for (int k0 = 0; k0 < k_end; k0 += TQ_BN) {
        const int nk = min(TQ_BN, k_end - k0), k1 = k0 + TQ_BN;
        float s[TQ_BN / 2], dp[TQ_BN / 2];
        barrier(CLK_LOCAL_MEM_FENCE);
        ATT_PF_PUT(TB_PF, pk, Ks, QS, TQ_BN, ATT_DQ, k, kb + k0 * k_sn, k_sn, k_sd, nk, d, lid, TQ_NT);
        ATT_PF_PUT(TB_PF, pv, Vs, VS, TQ_BN, ATT_DV, v, vb + k0 * v_sn, v_sn, v_sd, nk, dvn, lid, TQ_NT);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k1 < k_end) { /* the next tile's loads, in flight during this one */
            ATT_PF_FETCH(TB_PF, pk, TQ_BN, ATT_DQ, k, kb + k1 * k_sn, k_sn, min(TQ_BN, k_end - k1), d, lid, TQ_NT);
            ATT_PF_FETCH(TB_PF, pv, TQ_BN, ATT_DV, v, vb + k1 * v_sn, v_sn, min(TQ_BN, k_end - k1), dvn, lid, TQ_NT);
        }
        TC_BWD_SCORES(s, dp, TQ_BN, qa, ga, Ks, Vs, lane);
        tc_bwd_pds(s, dp, TQ_BN, scale, 0, row0, k0, nr, nk, w0, r, c, 0, 0, 0, lrow, crow, drow ATT_PDS_EXT); /* dS */
        TC_MM_PN(acc, TC_KQ, s, TQ_BN / 8, Ks, QS, lane);
    }

    barrier(CLK_LOCAL_MEM_FENCE);
    TC_STAGE(Qs, QS, w0, acc, TC_KQ, scale, lane);
    barrier(CLK_LOCAL_MEM_FENCE);
    att_store(dq, ATT_BASE(dq) + row0 * dq_sn, dq_sn, dq_sd, nr, d, Qs, QS, TQ_BM, ATT_DQ, lid, TQ_NT);
}
#endif /* TEENY_TF32 */
