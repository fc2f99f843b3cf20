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
 *
 * The program is this file (the parameters and the helpers every pass
 * shares) followed by attention_fwd.cl, attention_bwd.cl,
 * attention_tf32.cl and attention_cpu.cl (src/program/build.c's parts).
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

#if ATT_VEC
/* att_load_as where the host promises (ATT_VEC) that every matrix these
 * kernels load comes in float4 chunks: along rows (colwise 0, ATT_VEC 1:
 * unit column stride; offset, strides and valid columns multiples of 4)
 * or down columns (colwise 1, ATT_VEC 2, PSA's NCHW views: unit row
 * stride; offset, strides and lengths multiples of 4, and every tile's
 * rows too). Chunk e is chunk i of line o (a row, resp. a column; n4
 * chunks a line, lines st apart); consecutive work-items on consecutive
 * chunks, up to 8 chunks an item loaded before the first is stored, so a
 * tile's loads are in flight together. */
TEENY_INLINE void att_load_v4(__local float *dst, const int ds, const int rows, const int cols,
                              __global const float *src, int base, int st, int nr, int nc, int lid, const int nt,
                              const int tc, const int colwise)
{
    const int n4 = colwise ? rows / 4 : cols / 4, lines = colwise ? cols : rows, trips = (lines * n4 + nt - 1) / nt;
    for (int b = 0; b < trips; b += 8) {
        float4 x[8];
        TEENY_UNROLL
        for (int k = 0; k < 8; k++) {
            const int e = lid + (b + k) * nt, o = e / n4, i = 4 * (e - o * n4);
            const int r = colwise ? i : o, c = colwise ? o : i;
            x[k] = b + k < trips && r < nr && c < nc
                       ? *(__global const float4 *)(colwise ? src + base + r + c * st : src + base + r * st + c)
                       : (float4)(0.0f);
        }
        TEENY_UNROLL
        for (int k = 0; k < 8; k++) {
            const int e = lid + (b + k) * nt, o = e / n4, i = 4 * (e - o * n4);
            if (b + k < trips && o < lines) {
                if (colwise) {
                    dst[i * ds + o] = tc ? ATT_TC_ROUND(x[k].x) : x[k].x;
                    dst[(i + 1) * ds + o] = tc ? ATT_TC_ROUND(x[k].y) : x[k].y;
                    dst[(i + 2) * ds + o] = tc ? ATT_TC_ROUND(x[k].z) : x[k].z;
                    dst[(i + 3) * ds + o] = tc ? ATT_TC_ROUND(x[k].w) : x[k].w;
                } else {
                    att_put_chunk(dst, ds, rows, e, n4, x[k], tc);
                }
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
#if ATT_VEC
    att_load_v4(dst, ds, rows, cols, src, base, ATT_VEC == 2 ? sd : sn, nr, nc, lid, nt, tc, ATT_VEC == 2);
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

/* The tiled kernels' blocks. ATT_QUERY_BLOCK: the group's BM query rows
 * of matrix bh from row0 (nr valid) and the keys they see, [0, k_end):
 * under ATT_EXT none past the block's causal frontier (mb: the mask's
 * matrix). ATT_KEY_BLOCK: its BR keys from key0 (nkr valid) and the
 * queries that see them, [q_begin, n_q): under ATT_EXT none before the
 * first that sees one of these keys. */
#if ATT_EXT
#define ATT_KEYS_SEEN const int mb = ATT_MASK_BASE, k_end = min(n_k, max(0, row0 + nr + causal_off))
#define ATT_QUERIES_SEEN const int mb = ATT_MASK_BASE, q_begin = max(0, key0 - causal_off)
#else
#define ATT_KEYS_SEEN const int k_end = n_k
#define ATT_QUERIES_SEEN const int q_begin = 0
#endif
#define ATT_QUERY_BLOCK(BM)                                                                                       \
    const int bh = att_group_bh(), row0 = att_group_blk(1) * (BM);                                               \
    const int nr = min((BM), n_q - row0);                                                                        \
    ATT_KEYS_SEEN
#define ATT_KEY_BLOCK(BR)                                                                                         \
    const int bh = att_group_bh(), key0 = att_group_blk(0) * (BR);                                               \
    const int nkr = min((BR), n_k - key0);                                                                       \
    ATT_QUERIES_SEEN
