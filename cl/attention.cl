/*
 * attention.cl -- flash attention, forward and backward, fp32, OpenCL C 1.2.
 *
 *   S = scale * Q K^T,  P = softmax_rows(S),  O = P V,  lse = log sum exp S
 *
 * Every matrix is addressed through strides, so the same kernels serve the
 * contiguous [BH, N, D] layout and PSA's NCHW qkv tensor: element (bh, n, c)
 * of a matrix lives at
 *     off + (bh / heads) * sb + (bh % heads) * sh + n * sn + c * sd
 * (contiguous: heads = 1, sb = N*D, sn = D, sd = 1; NCHW qkv: sn = 1,
 * sd = H*W). lse is [BH, N_q] contiguous.
 *
 * Tiling. A work-group owns a block of "rows" and streams "column" tiles
 * through local memory; the N x N matrix never exists. Threads form a
 * TR x TC grid (lid = tr * TC + tc). Thread (tr, tc) owns rows
 * tr + i*TR (i < RM) and, in the score tile, columns tc + j*TC (j < SC);
 * in the accumulators it owns float4 column chunks tc + q*TC. Strided
 * ownership keeps local reads free of bank conflicts (row strides are
 * multiples of 4 plus 4). The softmax statistics of a row are shared by
 * its TC threads through a small local array; the running sum stays
 * per-thread and is combined once at the end, in a fixed order.
 *   attn_fwd:       rows = queries, columns = keys (online softmax).
 *   attn_bwd_dkdv:  rows = keys, columns = queries; owns dK, dV of its keys.
 *   attn_bwd_dq:    rows = queries, columns = keys; owns dQ of its queries.
 *   attn_bwd_prep:  Di = rowsum(dO * O) and the row's correction to lse
 *                   (corr: rows whose lse lost log sum), one work-item
 *                   per query row.
 * Each output element has exactly one writer: no atomics, and results are
 * bit-identical from run to run.
 *
 * log() is called only outside branches and outside loops that might stay
 * loops (attn_fwd's lse): libclc's log reads a constant table, Mesa's
 * rusticl passes that table as a hidden kernel argument, and llvmpipe
 * prints a warning on stderr when it loads a kernel argument inside
 * control flow.
 *
 * Masks (ATT_EXT, a bit set; 0 or absent: none of this code exists, the
 * kernels are the unmasked ones). Each score goes, in ONNX Attention's
 * order, x = scale q.k -> softcap * tanh(x / softcap) (bit ATT_F_SOFTCAP)
 * -> x + mask[b][h][i][j] (bit ATT_F_MASK, a strided matrix of
 * mask_heads heads whose broadcast dims have stride 0) -> -inf where key
 * j > query i + causal_off (always; the host passes n_k when not causal).
 * Every kernel then also skips the column tiles that lie wholly past the
 * causal frontier of its rows (the speed point of a causal mask). A row
 * whose every score is -inf gives o = 0, lse = -inf and no gradient: the
 * softmax takes its exponentials against 0 instead of a -inf maximum, and
 * the backward's p and dS are 0 wherever the score is -inf (whatever dO V
 * holds there).
 *
 * Compile-time parameters (host: src/ops/attention_plan.c, from the
 * device's work-group size and local memory): ATT_DQ, ATT_DV padded head
 * dims (multiples of 16; the true D, Dv are arguments and the padding is
 * zero), per kernel (prefixes FW_, KV_, QG_) TR, RM, TC, SC, ATT_EXT,
 * ATT_LAYOUT (the matrices' walk, below) and ATT_VEC (float4 loads:
 * att_load_v4, att_load_v4c).
 */
#ifndef ATT_DQ
#define ATT_DQ 32
#endif
#ifndef ATT_DV
#define ATT_DV 32
#endif
#ifndef FW_TR
#define FW_TR 16
#endif
#ifndef FW_RM
#define FW_RM 4
#endif
#ifndef FW_TC
#define FW_TC 8
#endif
#ifndef FW_SC
#define FW_SC 4
#endif
#ifndef KV_TR
#define KV_TR 8
#endif
#ifndef KV_RM
#define KV_RM 4
#endif
#ifndef KV_TC
#define KV_TC 8
#endif
#ifndef KV_SC
#define KV_SC 4
#endif
#ifndef QG_TR
#define QG_TR 16
#endif
#ifndef QG_RM
#define QG_RM 4
#endif
#ifndef QG_TC
#define QG_TC 8
#endif
#ifndef QG_SC
#define QG_SC 4
#endif

#define ATT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define ATT_MAX4(a, b, c, d) ATT_MAX(ATT_MAX(a, b), ATT_MAX(c, d))
/* the largest register-tile dimension of this program's kernels (<= 8):
 * rows per thread, score columns per thread, float4 chunks of Dv and D */
#define ATT_MAXT                                                                                                  \
    ATT_MAX(ATT_MAX4(FW_RM, FW_SC, KV_RM, KV_SC),                                                                 \
            ATT_MAX4(ATT_MAX(QG_RM, QG_SC), ATT_DV / (4 * FW_TC), ATT_MAX(ATT_DV, ATT_DQ) / (4 * KV_TC),          \
                     ATT_DQ / (4 * QG_TC)))
#define QS (ATT_DQ + 4) /* local row stride of Q, K, dQ, dK tiles */
#define VS (ATT_DV + 4) /* local row stride of V, O, dO, dV tiles */

/* ---- helpers ---- */

/* tc: round to tf32 as staged (the TEENY_TF32 kernels' operands; under
 * TEENY_TF32_X3 they stay fp32, split at each product) */
#if defined(TEENY_TF32) && !defined(TEENY_TF32_X3)
#define ATT_TC_ROUND(x) tf32_round(x)
#else
#define ATT_TC_ROUND(x) (x)
#endif

/* How the loaders walk a matrix: along columns where it is column-major
 * (sn == 1, sd != 1), else along rows; either walk is correct for any
 * strides. ATT_LAYOUT (the host's choice when every matrix of the call
 * agrees, attention_plan.c problem_layout) makes it a constant: 1 rows,
 * 2 columns; unset, each matrix is tested as it is loaded. */
#if defined(ATT_LAYOUT) && ATT_LAYOUT == 1
#define ATT_COL_MAJOR(sn, sd) 0
#elif defined(ATT_LAYOUT) && ATT_LAYOUT == 2
#define ATT_COL_MAJOR(sn, sd) 1
#else
#define ATT_COL_MAJOR(sn, sd) ((sn) == 1 && (sd) != 1)
#endif

#ifndef ATT_VEC
#define ATT_VEC 0
#endif

/* Chunk e of a rows x cols tile (c4 = cols / 4 float4s a row): its load,
 * zero outside the valid nr x nc corner, and its store into the local
 * tile, rounded to tf32 where tc. */
TEENY_INLINE float4 att_fetch_chunk(const int e, const int c4, __global const float *src, int base, int sn, int nr,
                                    int nc)
{
    const int r = e / c4, c = 4 * (e - r * c4);
    return r < nr && c < nc ? *(__global const float4 *)(src + base + r * sn + c) : (float4)(0.0f);
}

TEENY_INLINE void att_put_chunk(__local float *dst, const int ds, const int rows, const int e, const int c4, float4 x,
                                const int tc)
{
    const int r = e / c4, c = 4 * (e - r * c4);
    if (r < rows)
        vstore4(tc ? (float4)(ATT_TC_ROUND(x.x), ATT_TC_ROUND(x.y), ATT_TC_ROUND(x.z), ATT_TC_ROUND(x.w)) : x, 0,
                dst + r * ds + c);
}

#if ATT_VEC == 1
/* att_load_as where the host promises (ATT_VEC 1) that every matrix these
 * kernels load has unit column stride and an offset, strides and valid
 * columns that are multiples of 4: float4 chunks, consecutive work-items
 * on consecutive chunks, up to 8 chunks an item loaded before the first
 * is stored, so a tile's loads are in flight together. */
TEENY_INLINE void att_load_v4(__local float *dst, const int ds, const int rows, const int cols,
                              __global const float *src, int base, int sn, int nr, int nc, int lid, const int nt,
                              const int tc)
{
    const int c4 = cols / 4, trips = (rows * c4 + nt - 1) / nt;
    for (int b = 0; b < trips; b += 8) {
        float4 x[8];
        TEENY_UNROLL
        for (int k = 0; k < 8; k++)
            x[k] = b + k < trips ? att_fetch_chunk(lid + (b + k) * nt, c4, src, base, sn, nr, nc) : (float4)(0.0f);
        TEENY_UNROLL
        for (int k = 0; k < 8; k++)
            if (b + k < trips)
                att_put_chunk(dst, ds, rows, lid + (b + k) * nt, c4, x[k], tc);
    }
}
#elif ATT_VEC == 2
/* The same for column-major matrices (ATT_VEC 2, PSA's NCHW views: unit
 * row stride; offset, strides and lengths multiples of 4, and every tile's
 * rows too): a chunk is 4 rows of one column, consecutive work-items on
 * consecutive chunks down a column. */
TEENY_INLINE void att_load_v4c(__local float *dst, const int ds, const int rows, const int cols,
                               __global const float *src, int base, int sd, int nr, int nc, int lid, const int nt,
                               const int tc)
{
    const int r4 = rows / 4, trips = (r4 * cols + nt - 1) / nt;
    for (int b = 0; b < trips; b += 8) {
        float4 x[8];
        TEENY_UNROLL
        for (int k = 0; k < 8; k++) {
            const int e = lid + (b + k) * nt, c = e / r4, r = 4 * (e - c * r4);
            x[k] = b + k < trips && r < nr && c < nc ? *(__global const float4 *)(src + base + r + c * sd)
                                                     : (float4)(0.0f);
        }
        TEENY_UNROLL
        for (int k = 0; k < 8; k++) {
            const int e = lid + (b + k) * nt, c = e / r4, r = 4 * (e - c * r4);
            if (b + k < trips && c < cols) {
                dst[r * ds + c] = tc ? ATT_TC_ROUND(x[k].x) : x[k].x;
                dst[(r + 1) * ds + c] = tc ? ATT_TC_ROUND(x[k].y) : x[k].y;
                dst[(r + 2) * ds + c] = tc ? ATT_TC_ROUND(x[k].z) : x[k].z;
                dst[(r + 3) * ds + c] = tc ? ATT_TC_ROUND(x[k].w) : x[k].w;
            }
        }
    }
}
#endif

/* dst[r*ds + c] = M[row0 + r][c] for r < rows, c < cols, zero outside the
 * valid nr x nc corner. base already includes row0 * sn. Consecutive
 * work-items read consecutive addresses in either layout. */
TEENY_INLINE void att_load_as(__local float *dst, int ds, int rows, int cols, __global const float *src, int base,
                               int sn, int sd, int nr, int nc, int lid, int nt, const int tc)
{
#if ATT_VEC == 1
    (void)sd;
    att_load_v4(dst, ds, rows, cols, src, base, sn, nr, nc, lid, nt, tc);
#elif ATT_VEC == 2
    (void)sn;
    att_load_v4c(dst, ds, rows, cols, src, base, sd, nr, nc, lid, nt, tc);
#else
    /* One loop for both layouts, not one loop per layout: PoCL 5.0
     * miscompiles a barrier loop that follows an if/else holding a
     * work-item-dependent loop in each branch (pocl#1435). The element's
     * (outer, inner) index advances by carries, with no division per
     * element. */
    const int total = rows * cols, col_major = ATT_COL_MAJOR(sn, sd), inner = col_major ? rows : cols;
    const int step_o = nt / inner, step_i = nt - step_o * inner;
    int o = lid / inner, i = lid - o * inner;
    for (int e = lid; e < total; e += nt) {
        int r = col_major ? i : o, c = col_major ? o : i;
        const float x = r < nr && c < nc ? src[base + r * sn + c * sd] : 0.0f;
        dst[r * ds + c] = tc ? ATT_TC_ROUND(x) : x;
        i += step_i;
        o += step_o;
        if (i >= inner) {
            i -= inner;
            o++;
        }
    }
#endif
}

/* att_load_as as is (fp32 kernels) and rounded to tf32 (the TEENY_TF32 kernels). */
TEENY_INLINE void att_load(__local float *dst, int ds, int rows, int cols, __global const float *src, int base, int sn,
                           int sd, int nr, int nc, int lid, int nt)
{
    att_load_as(dst, ds, rows, cols, src, base, sn, sd, nr, nc, lid, nt, 0);
}

TEENY_INLINE void att_load_tc(__local float *dst, int ds, int rows, int cols, __global const float *src, int base,
                              int sn, int sd, int nr, int nc, int lid, int nt)
{
    att_load_as(dst, ds, rows, cols, src, base, sn, sd, nr, nc, lid, nt, 1);
}

/* A tile's global loads issued early, before the work that precedes its
 * store into local memory, so that their latency overlaps that work: the
 * tensor-core kernels' choice per pass (ATT_PF, the host's: bit 1 the
 * forward, bit 2 the backward; taken only where the host promises
 * ATT_VEC 1). ATT_PF_FETCH loads att_load_v4's chunks into the registers
 * x (ATT_PF_FETCH_ROWS the lse / Di entries of a tile's rows),
 * ATT_PF_PUT stores them. Where the pass does not prefetch (on 0), FETCH
 * does nothing and PUT loads and stores as att_load_tc does: the same
 * values land in the same places either way. */
#ifndef ATT_PF
#define ATT_PF 0
#endif
#define TF_PF ((ATT_PF & 1) && ATT_VEC == 1)
#define TB_PF ((ATT_PF & 2) && ATT_VEC == 1)
#define ATT_PF_TRIPS(rows, cols, nt) (((rows) * ((cols) / 4) + (nt) - 1) / (nt))

TEENY_INLINE void att_fetch_v4(float4 *x, const int rows, const int cols, __global const float *src, int base, int sn,
                               int nr, int nc, int lid, const int nt)
{
    TEENY_UNROLL
    for (int k = 0; k < ATT_PF_TRIPS(rows, cols, nt); k++)
        x[k] = att_fetch_chunk(lid + k * nt, cols / 4, src, base, sn, nr, nc);
}

TEENY_INLINE void att_put_v4(__local float *dst, const int ds, const int rows, const int cols, const float4 *x, int lid,
                             const int nt)
{
    TEENY_UNROLL
    for (int k = 0; k < ATT_PF_TRIPS(rows, cols, nt); k++)
        att_put_chunk(dst, ds, rows, lid + k * nt, cols / 4, x[k], 1);
}

#define ATT_PF_DECL(x, rows, cols, nt) float4 x[ATT_PF_TRIPS(rows, cols, nt)]
#define ATT_PF_FETCH(on, x, rows, cols, src, base, sn, nr, nc, lid, nt)                                          \
    do {                                                                                                         \
        if (on)                                                                                                  \
            att_fetch_v4(x, rows, cols, src, base, sn, nr, nc, lid, nt);                                         \
    } while (0)
#define ATT_PF_PUT(on, x, dst, ds, rows, cols, src, base, sn, sd, nr, nc, lid, nt)                                \
    do {                                                                                                         \
        if (on)                                                                                                  \
            att_put_v4(dst, ds, rows, cols, x, lid, nt);                                                         \
        else                                                                                                     \
            att_load_tc(dst, ds, rows, cols, src, base, sn, sd, nr, nc, lid, nt);                                \
    } while (0)
/* The rows' entries: FETCH_ROWS loads them where the pass prefetches,
 * PUT_ROWS loads them where it does not, then stores. */
#define ATT_PF_DECL_ROWS(x, rows, nt) float x[((rows) + (nt) - 1) / (nt)]
#define ATT_PF_LOAD_ROWS(x, rows, src, off, nr, lid, nt)                                                          \
    TEENY_UNROLL                                                                                                 \
    for (int t_ = 0; t_ < ((rows) + (nt) - 1) / (nt); t_++)                                                      \
        x[t_] = (lid) + t_ * (nt) < (nr) ? (src)[(off) + (lid) + t_ * (nt)] : 0.0f
#define ATT_PF_FETCH_ROWS(on, x, rows, src, off, nr, lid, nt)                                                     \
    do {                                                                                                         \
        if (on) {                                                                                                \
            ATT_PF_LOAD_ROWS(x, rows, src, off, nr, lid, nt);                                                    \
        }                                                                                                        \
    } while (0)
#define ATT_PF_PUT_ROWS(on, x, dst, rows, src, off, nr, lid, nt)                                                  \
    do {                                                                                                         \
        if (!(on)) {                                                                                             \
            ATT_PF_LOAD_ROWS(x, rows, src, off, nr, lid, nt);                                                    \
        }                                                                                                        \
        TEENY_UNROLL                                                                                             \
        for (int t_ = 0; t_ < ((rows) + (nt) - 1) / (nt); t_++)                                                  \
            if ((lid) + t_ * (nt) < (rows))                                                                      \
                (dst)[(lid) + t_ * (nt)] = x[t_];                                                                \
    } while (0)

/* M[row0 + r][c] = src[r*ss + c] for the valid nr x nc corner. */
TEENY_INLINE void att_store(__global float *dst, int base, int sn, int sd, int nr, int nc, __local const float *src,
                             int ss, int rows, int cols, int lid, int nt)
{
    const int total = rows * cols, col_major = ATT_COL_MAJOR(sn, sd), inner = col_major ? rows : cols;
    const int step_o = nt / inner, step_i = nt - step_o * inner;
    int o = lid / inner, i = lid - o * inner;
    for (int e = lid; e < total; e += nt) {
        int r = col_major ? i : o, c = col_major ? o : i;
        if (r < nr && c < nc)
            dst[base + r * sn + c * sd] = src[r * ss + c];
        i += step_i;
        o += step_o;
        if (i >= inner) {
            i -= inner;
            o++;
        }
    }
}

/* The register-tile helpers take their tile sizes as arguments; every
 * loop runs a fixed ATT_MAXT trips with a guard, so it unrolls in the helper
 * itself and the guards fold once the constant sizes are inlined (loop
 * bounds that only become constant after inlining leave the tiles in
 * memory on some compilers). Sizes are at most ATT_MAXT, and register
 * tiles have rows of ATT_MAXT so every index is a constant in the helper
 * itself (unused slots are never touched and cost no registers). */

/* acc[i*ATT_MAXT + j] += sum_{d < dd} A[(r0 + i*rs)*as + d] * B[(c0 + j*cs)*bs + d]:
 * an nr x nc register tile of A B^T, both operands row-major in local memory
 * with 16-byte aligned rows. */
TEENY_INLINE void att_mm_nt(float *acc, const int nr, const int nc, __local const float *A, const int as, const int r0,
                      const int rs, __local const float *B, const int bs, const int c0, const int cs, const int dd)
{
    for (int d = 0; d < dd; d += 4) {
        float4 a[ATT_MAXT], b[ATT_MAXT];
        TEENY_UNROLL
        for (int i = 0; i < ATT_MAXT; i++)
            if (i < nr)
                a[i] = *(__local const float4 *)(A + (r0 + i * rs) * as + d);
        TEENY_UNROLL
        for (int j = 0; j < ATT_MAXT; j++)
            if (j < nc)
                b[j] = *(__local const float4 *)(B + (c0 + j * cs) * bs + d);
        TEENY_UNROLL
        for (int i = 0; i < ATT_MAXT; i++)
            TEENY_UNROLL
            for (int j = 0; j < ATT_MAXT; j++)
                if (i < nr && j < nc)
                    acc[i * ATT_MAXT + j] = TEENY_MAD(a[i].w, b[j].w, TEENY_MAD(a[i].z, b[j].z, TEENY_MAD(a[i].y, b[j].y, TEENY_MAD(a[i].x, b[j].x, acc[i * ATT_MAXT + j]))));
    }
}

TEENY_INLINE float att_comp(float4 v, const int c)
{
    return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
}

/* acc[i*ATT_MAXT + q] += sum_{k < kk} P[(r0 + i*rs)*ps + k] * V[k*vs + 4*(q0 + q*qs) .. +4]:
 * rows of P (local, row-major) times float4 column chunks of V. */
TEENY_INLINE void att_mm_nn(float4 *acc, const int nr, const int nch, __local const float *P, const int ps, const int r0,
                      const int rs, __local const float *V, const int vs, const int q0, const int qs, const int kk)
{
    for (int k = 0; k < kk; k += 4) {
        float4 p[ATT_MAXT];
        TEENY_UNROLL
        for (int i = 0; i < ATT_MAXT; i++)
            if (i < nr)
                p[i] = *(__local const float4 *)(P + (r0 + i * rs) * ps + k);
        TEENY_UNROLL
        for (int e = 0; e < 4; e++)
            TEENY_UNROLL
            for (int q = 0; q < ATT_MAXT; q++)
                if (q < nch) {
                    float4 v = *(__local const float4 *)(V + (k + e) * vs + 4 * (q0 + q * qs));
                    TEENY_UNROLL
                    for (int i = 0; i < ATT_MAXT; i++)
                        if (i < nr)
                            acc[i * ATT_MAXT + q] = TEENY_MAD((float4)(att_comp(p[i], e)), v, acc[i * ATT_MAXT + q]);
                }
    }
}

/* Base offset of matrix bh. */
TEENY_INLINE int att_base(int off, int sb, int sh, int bh, int heads)
{
    int b = bh / heads;
    return off + b * sb + (bh - b * heads) * sh;
}

#define ATT_MAT(name) __global const float *name, int name##_off, int name##_sb, int name##_sh, int name##_sn, int name##_sd
#define ATT_OUT(name) __global float *name, int name##_off, int name##_sb, int name##_sh, int name##_sn, int name##_sd
#define ATT_BASE(name) att_base(name##_off, name##_sb, name##_sh, bh, heads)

/* ---- masks (ATT_EXT) ---- */

#ifndef ATT_EXT
#define ATT_EXT 0
#endif
#define ATT_F_MASK 2    /* bit 0 (causal) is a host-side name only: */
#define ATT_F_SOFTCAP 4 /* the frontier is always applied under ATT_EXT */

#if ATT_EXT
/* The mask's arguments, after scale: the matrix (element (b, h, i, j) at
 * off + b*sb + h*sh + i*sq + j*sk, b = bh / mask_heads), the causal
 * frontier (n_k: none) and the softcap (used under ATT_F_SOFTCAP). */
#define ATT_EXT_ARGS                                                                                              \
    , __global const float *mask, int mask_off, int mask_sb, int mask_sh, int mask_sq, int mask_sk, int mask_heads, \
        int causal_off, float softcap
#define ATT_MASK_BASE att_base(mask_off, mask_sb, mask_sh, bh, mask_heads)

/* Score x = scale q_i.k_j through softcap, mask (element mi: the caller
 * passes an element that exists even when !valid) and the causal
 * frontier; -inf when !valid (a padding row or column). *dcap =
 * d(capped)/dx, 1 without softcap. */
TEENY_INLINE float att_ext(float x, __global const float *mask, int mi, int kj_minus_qi, int causal_off,
                           float softcap, int valid, float *dcap)
{
#if ATT_EXT & ATT_F_SOFTCAP
    const float t = tanh(x / softcap);
    x = softcap * t;
    *dcap = 1.0f - t * t;
#else
    *dcap = 1.0f;
#endif
#if ATT_EXT & ATT_F_MASK
    x += mask[mi];
#endif
    return valid && kj_minus_qi <= causal_off ? x : -INFINITY;
}
#else
#define ATT_EXT_ARGS
#endif

/* The work-group's block (of query rows; of keys in the dK/dV pass) and
 * matrix bh, from a grid of blocks x BH groups. Under ATT_EXT a causal
 * frontier gives the blocks unequal work (the last query block, the first
 * key block, sees every key, resp. query), and groups start in the order
 * of their linear id: so they take the blocks heaviest first across all
 * matrices (matrices fastest), and the last to start are the lightest
 * (the longest-first order; on the H200 the causal passes took 73% of the
 * unmasked ones' time for 51% of their work). heavy_last: the heaviest
 * block is the last (query blocks). */
#if ATT_EXT
TEENY_INLINE int att_group_bh(void)
{
    return (int)((get_group_id(1) * get_num_groups(0) + get_group_id(0)) % get_num_groups(1));
}

TEENY_INLINE int att_group_blk(int heavy_last)
{
    const int i = (int)((get_group_id(1) * get_num_groups(0) + get_group_id(0)) / get_num_groups(1));
    return heavy_last ? (int)get_num_groups(0) - 1 - i : i;
}
#else
#define att_group_bh() ((int)get_group_id(1))
#define att_group_blk(heavy_last) ((int)get_group_id(0))
#endif

/* ---- forward ---- */

#ifndef TEENY_TF32 /* the tf32 program has attn_fwd_tc instead */
#define FW_NT (FW_TR * FW_TC)
#define FW_BM (FW_TR * FW_RM)
#define FW_BN (FW_TC * FW_SC)
#define FW_PS (FW_BN + 4)
#define FW_OCH (ATT_DV / (4 * FW_TC))
#define FW_LR ((FW_RM + FW_TC - 1) / FW_TC) /* lse rows per work-item */
#define FW_LDS (FW_BM * FW_TC + ATT_MAX(FW_BM * QS + FW_BN * QS + FW_BN * VS + FW_BM * FW_PS, FW_BM * VS))

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
    const int bh = att_group_bh(), row0 = att_group_blk(1) * FW_BM;
    const int nr = min(FW_BM, n_q - row0);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), ob = ATT_BASE(o);
#if ATT_EXT
    /* keys past the block's causal frontier are never visited */
    const int mb = ATT_MASK_BASE, k_end = min(n_k, max(0, row0 + nr + causal_off));
#else
    const int k_end = n_k;
#endif
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
     * taken after this loop (see the banner on log()). */
    float lse_m[FW_LR], lse_s[FW_LR];
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

#ifndef TEENY_TF32 /* the tf32 program has attn_bwd_dkdv_tc and attn_bwd_dq_tc instead */
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
    const int bh = att_group_bh(), key0 = att_group_blk(0) * KV_BR;
    const int nkr = min(KV_BR, n_k - key0);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), gb = ATT_BASE(d_o);
#if ATT_EXT
    /* queries before the first that sees one of these keys are never visited */
    const int mb = ATT_MASK_BASE, q_begin = max(0, key0 - causal_off);
#else
    const int q_begin = 0;
#endif
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
        TEENY_UNROLL
        for (int i = 0; i < KV_RM * ATT_MAXT; i++)
            st[i] = dp[i] = 0.0f;
        att_mm_nt(st, KV_RM, KV_SC, Ks, QS, tr, KV_TR, Qs, QS, tc, KV_TC, ATT_DQ);
        att_mm_nt(dp, KV_RM, KV_SC, Vs, VS, tr, KV_TR, Gs, VS, tc, KV_TC, ATT_DV);
        TEENY_UNROLL
        for (int i = 0; i < KV_RM; i++) {
            const int r = tr + i * KV_TR;
            TEENY_UNROLL
            for (int j = 0; j < KV_SC; j++) {
                const int c = tc + j * KV_TC;
#if ATT_EXT
                const int qi = q0 + c, kj = key0 + r, valid = c < nq && r < nkr;
                float dcap;
                const float x = att_ext(st[i * ATT_MAXT + j] * scale, mask,
                                        valid ? mb + qi * mask_sq + kj * mask_sk : mb, kj - qi, causal_off, softcap,
                                        valid, &dcap);
                const float p = x == -INFINITY ? 0.0f : exp((x - Ls[c]) + Cs[c]);
                Pt[r * KV_PS + c] = p;
                St[r * KV_PS + c] = x == -INFINITY ? 0.0f : p * (dp[i * ATT_MAXT + j] - Ds[c]) * dcap;
#else
                float p = c < nq ? exp((st[i * ATT_MAXT + j] * scale - Ls[c]) + Cs[c]) : 0.0f;
                Pt[r * KV_PS + c] = p;
                St[r * KV_PS + c] = p * (dp[i * ATT_MAXT + j] - Ds[c]);
#endif
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        att_mm_nn(acc_v, KV_RM, KV_OCH, Pt, KV_PS, tr, KV_TR, Gs, VS, tc, KV_TC, KV_BC);
        att_mm_nn(acc_k, KV_RM, KV_KCH, St, KV_PS, tr, KV_TR, Qs, QS, tc, KV_TC, KV_BC);
    }

    barrier(CLK_LOCAL_MEM_FENCE);
    TEENY_UNROLL
    for (int i = 0; i < KV_RM; i++) {
        const int r = tr + i * KV_TR;
        TEENY_UNROLL
        for (int c = 0; c < KV_KCH; c++)
            *(__local float4 *)(Ks + r * QS + 4 * (tc + c * KV_TC)) = acc_k[i * ATT_MAXT + c] * scale;
        TEENY_UNROLL
        for (int c = 0; c < KV_OCH; c++)
            *(__local float4 *)(Vs + r * VS + 4 * (tc + c * KV_TC)) = acc_v[i * ATT_MAXT + c];
    }
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
    const int bh = att_group_bh(), row0 = att_group_blk(1) * QG_BM;
    const int nr = min(QG_BM, n_q - row0);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), gb = ATT_BASE(d_o);
#if ATT_EXT
    const int mb = ATT_MASK_BASE, k_end = min(n_k, max(0, row0 + nr + causal_off)); /* as attn_fwd's */
#else
    const int k_end = n_k;
#endif
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
        TEENY_UNROLL
        for (int i = 0; i < QG_RM * ATT_MAXT; i++)
            s[i] = dp[i] = 0.0f;
        att_mm_nt(s, QG_RM, QG_SC, Qs, QS, tr, QG_TR, Ks, QS, tc, QG_TC, ATT_DQ);
        att_mm_nt(dp, QG_RM, QG_SC, Gs, VS, tr, QG_TR, Vs, VS, tc, QG_TC, ATT_DV);
        TEENY_UNROLL
        for (int i = 0; i < QG_RM; i++) {
            const int r = tr + i * QG_TR;
            TEENY_UNROLL
            for (int j = 0; j < QG_SC; j++) {
                const int c = tc + j * QG_TC;
#if ATT_EXT
                const int qi = row0 + r, kj = k0 + c, valid = c < nk && r < nr;
                float dcap;
                const float x = att_ext(s[i * ATT_MAXT + j] * scale, mask,
                                        valid ? mb + qi * mask_sq + kj * mask_sk : mb, kj - qi, causal_off, softcap,
                                        valid, &dcap);
                const float p = x == -INFINITY ? 0.0f : exp((x - lrow[i]) + crow[i]);
                Ss[r * QG_PS + c] = x == -INFINITY ? 0.0f : p * (dp[i * ATT_MAXT + j] - drow[i]) * dcap;
#else
                float p = c < nk ? exp((s[i * ATT_MAXT + j] * scale - lrow[i]) + crow[i]) : 0.0f;
                Ss[r * QG_PS + c] = p * (dp[i * ATT_MAXT + j] - drow[i]);
#endif
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        att_mm_nn(acc, QG_RM, QG_KCH, Ss, QG_PS, tr, QG_TR, Ks, QS, tc, QG_TC, QG_BN);
    }

    barrier(CLK_LOCAL_MEM_FENCE);
    TEENY_UNROLL
    for (int i = 0; i < QG_RM; i++) {
        const int r = tr + i * QG_TR;
        TEENY_UNROLL
        for (int c = 0; c < QG_KCH; c++)
            *(__local float4 *)(Qs + r * QS + 4 * (tc + c * QG_TC)) = acc[i * ATT_MAXT + c] * scale;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    att_store(dq, ATT_BASE(dq) + row0 * dq_sn, dq_sn, dq_sd, nr, d, Qs, QS, QG_BM, ATT_DQ, lid, QG_NT);
}
#endif

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
    const int bh = att_group_bh(), row0 = att_group_blk(1) * TF_BM;
    const int nr = min(TF_BM, n_q - row0);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), ob = ATT_BASE(o);
#if ATT_EXT
    const int mb = ATT_MASK_BASE, k_end = min(n_k, max(0, row0 + nr + causal_off));
#else
    const int k_end = n_k;
#endif
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
        float s[TF_BN / 2], mx[2] = {-INFINITY, -INFINITY}, ms[2], ls[2] = {0.0f, 0.0f};
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

#define TK_NT (32 * TK_W)
#define TK_BR (16 * TK_W) /* keys per work-group */
#define TK_LDS ATT_MAX(TK_BC * QS + TK_BC * VS + 3 * TK_BC, TK_BR * (QS + VS))

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
    const int bh = att_group_bh(), key0 = att_group_blk(0) * TK_BR;
    const int nkr = min(TK_BR, n_k - key0);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), gb = ATT_BASE(d_o);
#if ATT_EXT
    const int mb = ATT_MASK_BASE, q_begin = max(0, key0 - causal_off);
#else
    const int q_begin = 0;
#endif
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
    ATT_PF_FETCH_ROWS(TB_PF, pl, TK_BC, lse, lse_off + bh * n_q + q_begin, n_q - q_begin, lid, TK_NT);
    ATT_PF_FETCH_ROWS(TB_PF, pd, TK_BC, di, bh * n_q + q_begin, n_q - q_begin, lid, TK_NT);
    ATT_PF_FETCH_ROWS(TB_PF, pc, TK_BC, corr, bh * n_q + q_begin, n_q - q_begin, lid, TK_NT);
    for (int q0 = q_begin; q0 < n_q; q0 += TK_BC) {
        const int nq = min(TK_BC, n_q - q0), q1 = q0 + TK_BC;
        float st[TK_BC / 2], dp[TK_BC / 2];
        barrier(CLK_LOCAL_MEM_FENCE);
        ATT_PF_PUT(TB_PF, pq, Qs, QS, TK_BC, ATT_DQ, q, qb + q0 * q_sn, q_sn, q_sd, nq, d, lid, TK_NT);
        ATT_PF_PUT(TB_PF, pg, Gs, VS, TK_BC, ATT_DV, d_o, gb + q0 * d_o_sn, d_o_sn, d_o_sd, nq, dvn, lid, TK_NT);
        ATT_PF_PUT_ROWS(TB_PF, pl, Ls, TK_BC, lse, lse_off + bh * n_q + q0, nq, lid, TK_NT);
        ATT_PF_PUT_ROWS(TB_PF, pd, Ds, TK_BC, di, bh * n_q + q0, nq, lid, TK_NT);
        ATT_PF_PUT_ROWS(TB_PF, pc, Cs, TK_BC, corr, bh * n_q + q0, nq, lid, TK_NT);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (q1 < n_q) { /* the next tile's loads, in flight during this one */
            ATT_PF_FETCH(TB_PF, pq, TK_BC, ATT_DQ, q, qb + q1 * q_sn, q_sn, min(TK_BC, n_q - q1), d, lid, TK_NT);
            ATT_PF_FETCH(TB_PF, pg, TK_BC, ATT_DV, d_o, gb + q1 * d_o_sn, d_o_sn, min(TK_BC, n_q - q1), dvn, lid,
                         TK_NT);
            ATT_PF_FETCH_ROWS(TB_PF, pl, TK_BC, lse, lse_off + bh * n_q + q1, n_q - q1, lid, TK_NT);
            ATT_PF_FETCH_ROWS(TB_PF, pd, TK_BC, di, bh * n_q + q1, n_q - q1, lid, TK_NT);
            ATT_PF_FETCH_ROWS(TB_PF, pc, TK_BC, corr, bh * n_q + q1, n_q - q1, lid, TK_NT);
        }
        TEENY_UNROLL
        for (int i = 0; i < TK_BC / 2; i++)
            st[i] = dp[i] = 0.0f;
        TC_MM_NT(st, TK_BC / 8, ka, TC_KQ, Qs, QS, lane);
        TC_MM_NT(dp, TK_BC / 8, va, TC_KV, Gs, VS, lane);
        TEENY_UNROLL
        for (int i = 0; i < TK_BC / 2; i++) { /* P^T and dS^T, in place */
            const int row = w0 + r + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * c + (i & 1);
#if ATT_EXT
            const int qi = q0 + col, kj = key0 + row, valid = col < nq && row < nkr;
            float dcap;
            const float x = att_ext(st[i] * scale, mask, valid ? mb + qi * mask_sq + kj * mask_sk : mb, kj - qi,
                                    causal_off, softcap, valid, &dcap);
            const float p = x == -INFINITY ? 0.0f : TC_EXP((x - Ls[col]) + Cs[col]);
            const float ds = x == -INFINITY ? 0.0f : p * (dp[i] - Ds[col]) * dcap;
#else
            const float p = col < nq ? TC_EXP((st[i] * scale - Ls[col]) + Cs[col]) : 0.0f;
            const float ds = p * (dp[i] - Ds[col]);
#endif
            st[i] = TC_OPERAND(p);
            dp[i] = TC_OPERAND(ds);
        }
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
    const int bh = att_group_bh(), row0 = att_group_blk(1) * TQ_BM;
    const int nr = min(TQ_BM, n_q - row0);
    const int qb = ATT_BASE(q), kb = ATT_BASE(k), vb = ATT_BASE(v), gb = ATT_BASE(d_o);
#if ATT_EXT
    const int mb = ATT_MASK_BASE, k_end = min(n_k, max(0, row0 + nr + causal_off)); /* as attn_fwd's */
#else
    const int k_end = n_k;
#endif
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
        TEENY_UNROLL
        for (int i = 0; i < TQ_BN / 2; i++)
            s[i] = dp[i] = 0.0f;
        TC_MM_NT(s, TQ_BN / 8, qa, TC_KQ, Ks, QS, lane);
        TC_MM_NT(dp, TQ_BN / 8, ga, TC_KV, Vs, VS, lane);
        TEENY_UNROLL
        for (int i = 0; i < TQ_BN / 2; i++) { /* dS, in place */
            const int h = (i >> 1) & 1, row = w0 + r + 8 * h, col = 8 * (i >> 2) + 2 * c + (i & 1);
#if ATT_EXT
            const int qi = row0 + row, kj = k0 + col, valid = col < nk && row < nr;
            float dcap;
            const float x = att_ext(s[i] * scale, mask, valid ? mb + qi * mask_sq + kj * mask_sk : mb, kj - qi,
                                    causal_off, softcap, valid, &dcap);
            const float p = x == -INFINITY ? 0.0f : TC_EXP((x - lrow[h]) + crow[h]);
            const float ds = x == -INFINITY ? 0.0f : p * (dp[i] - drow[h]) * dcap;
#else
            const float p = col < nk ? TC_EXP((s[i] * scale - lrow[h]) + crow[h]) : 0.0f;
            const float ds = p * (dp[i] - drow[h]);
#endif
            s[i] = TC_OPERAND(ds);
        }
        TC_MM_PN(acc, TC_KQ, s, TQ_BN / 8, Ks, QS, lane);
    }

    barrier(CLK_LOCAL_MEM_FENCE);
    TC_STAGE(Qs, QS, w0, acc, TC_KQ, scale, lane);
    barrier(CLK_LOCAL_MEM_FENCE);
    att_store(dq, ATT_BASE(dq) + row0 * dq_sn, dq_sn, dq_sd, nr, d, Qs, QS, TQ_BM, ATT_DQ, lid, TQ_NT);
}
#endif /* TEENY_TF32 */

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
        TEENY_UNROLL
        for (int j = 0; j < ATT_KB; j++) {
            const int jj = j0 + min(j, nk - 1);
            kr[j] = kb + jj * k_sn;
            vr[j] = vb + jj * v_sn;
            s[j] = (attv)(0.0f);
        }
        for (int c = 0; c < d; c++) {
            const attv qc = qr[c];
            TEENY_UNROLL
            for (int j = 0; j < ATT_KB; j++)
                s[j] = TEENY_MAD(qc, (attv)(k[kr[j] + c * k_sd]), s[j]);
        }
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
        for (int c = 0; c < dv; c++) {
            attv a = acc[c] * alpha;
            TEENY_UNROLL
            for (int j = 0; j < ATT_KB; j++)
                a = TEENY_MAD(p[j], (attv)(v[vr[j] + c * v_sd]), a);
            acc[c] = a;
        }
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
        attv s[ATT_KB], dp[ATT_KB], p[ATT_KB], ds[ATT_KB];
        TEENY_UNROLL
        for (int j = 0; j < ATT_KB; j++) {
            const int ii = i0 + min(j, ni - 1);
            qi[j] = qb + ii * q_sn;
            gi[j] = gb + ii * d_o_sn;
            s[j] = dp[j] = (attv)(0.0f);
        }
        for (int c = 0; c < d; c++) {
            const attv kc = kr[c];
            TEENY_UNROLL
            for (int j = 0; j < ATT_KB; j++)
                s[j] = TEENY_MAD(kc, (attv)(q[qi[j] + c * q_sd]), s[j]);
        }
        for (int c = 0; c < dvn; c++) {
            const attv vc = vr[c];
            TEENY_UNROLL
            for (int j = 0; j < ATT_KB; j++)
                dp[j] = TEENY_MAD(vc, (attv)(d_o[gi[j] + c * d_o_sd]), dp[j]);
        }
#if ATT_EXT
        for (int j = 0; j < ATT_KB; j++) {
            const int ii = i0 + min(j, ni - 1);
            attv dcap;
            const attv x = att_ext_rows(s[j], att_mask_rows(mask, mb + ii * mask_sq, mask_sk, nr),
                                        (attvi)(row0 - ii) + ATT_LANES, causal_off, softcap, j < ni, &dcap);
            p[j] = att_unless_masked(exp((x - lse[lse_off + bh * n_q + ii]) + corr[bh * n_q + ii]), x);
            ds[j] = att_unless_masked(p[j] * (dp[j] - di[bh * n_q + ii]) * dcap, x);
        }
#else
        TEENY_UNROLL
        for (int j = 0; j < ATT_KB; j++) {
            const int ii = i0 + min(j, ni - 1);
            p[j] = j < ni ? exp((s[j] - lse[lse_off + bh * n_q + ii]) + corr[bh * n_q + ii]) : (attv)(0.0f);
            ds[j] = p[j] * (dp[j] - di[bh * n_q + ii]);
        }
#endif
        for (int c = 0; c < dvn; c++) {
            attv a = av[c];
            TEENY_UNROLL
            for (int j = 0; j < ATT_KB; j++)
                a = TEENY_MAD(p[j], (attv)(d_o[gi[j] + c * d_o_sd]), a);
            av[c] = a;
        }
        for (int c = 0; c < d; c++) {
            attv a = ak[c];
            TEENY_UNROLL
            for (int j = 0; j < ATT_KB; j++)
                a = TEENY_MAD(ds[j], (attv)(q[qi[j] + c * q_sd]), a);
            ak[c] = a;
        }
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
        attv s[ATT_KB], dp[ATT_KB], ds[ATT_KB];
        TEENY_UNROLL
        for (int j = 0; j < ATT_KB; j++) {
            const int jj = j0 + min(j, nk - 1);
            kj[j] = kb + jj * k_sn;
            vj[j] = vb + jj * v_sn;
            s[j] = dp[j] = (attv)(0.0f);
        }
        for (int c = 0; c < d; c++) {
            const attv qc = qr[c];
            TEENY_UNROLL
            for (int j = 0; j < ATT_KB; j++)
                s[j] = TEENY_MAD(qc, (attv)(k[kj[j] + c * k_sd]), s[j]);
        }
        for (int c = 0; c < dvn; c++) {
            const attv gc = gr[c];
            TEENY_UNROLL
            for (int j = 0; j < ATT_KB; j++)
                dp[j] = TEENY_MAD(gc, (attv)(v[vj[j] + c * v_sd]), dp[j]);
        }
#if ATT_EXT
        for (int j = 0; j < ATT_KB; j++) {
            const int jj = j0 + min(j, nk - 1);
            attv dcap;
            const attv x = att_ext_rows(s[j], att_mask_rows(mask, mb + jj * mask_sk, mask_sq, nr),
                                        (attvi)(jj - row0) - ATT_LANES, causal_off, softcap, j < nk, &dcap);
            ds[j] = att_unless_masked(exp((x - lr) + cr) * (dp[j] - dr) * dcap, x);
        }
#else
        for (int j = 0; j < ATT_KB; j++)
            ds[j] = j < nk ? exp((s[j] - lr) + cr) * (dp[j] - dr) : (attv)(0.0f);
#endif
        for (int c = 0; c < d; c++) {
            attv a = acc[c];
            TEENY_UNROLL
            for (int j = 0; j < ATT_KB; j++)
                a = TEENY_MAD(ds[j], (attv)(k[kj[j] + c * k_sd]), a);
            acc[c] = a;
        }
    }
    const float qs = seg & ATT_SEG_LAST ? scale : 1.0f;
    for (int c = 0; c < d; c++)
        att_rows_store(dq, dqb + c * dq_sd, dq_sn, nr, acc[c] * qs);
}
