/*
 * linear.cl -- the fully connected layer's GEMMs and bias gradient.
 *
 * One strided GEMM serves all three products of the layer (and, batched
 * with broadcasting, the ONNX MatMul of two run-time values):
 *     C[m, n] = sum_k A(m, k) * B(k, n)  (+ bias[n])
 * with A(m, k) at a_off + m*a_sm + k*a_sk and B(k, n) at b_off + k*b_sk +
 * n*b_sn, so y = x w^T, dx = dy w and dw = dy^T x are the same kernel with
 * different strides (no transposed copies). C is row-major with row stride
 * c_sm. Each output is summed by one work-item in ascending k: results are
 * deterministic and independent of the launch. Two kernels take these
 * arguments: lin_gemm, tiled through local memory, and lin_gemm_small,
 * one output an item with no local memory, for outputs too small to fill
 * the device with lin_gemm's tiles (linear.c: small_route); the same sum
 * in the same order, so the same bits where the compiler contracts
 * acc += a * b alike in both (PoCL, NVIDIA: fma).
 *
 * Tunable (from the device's work-group size, see linear.c):
 *   LIN_LX, LIN_LY  work-group shape (LIN_LX * LIN_LY items)
 *   LIN_RM, LIN_RN  register micro-tile: outputs per work-item
 *   LIN_TK          depth of the local-memory tiles
 * A work-group computes a LIN_TM x LIN_TN block of C, LIN_TM = LIN_LY *
 * LIN_RM, LIN_TN = LIN_LX * LIN_RN.
 *
 * k segments. Where a device limits the loop trips of a work-item (Mesa's
 * llvmpipe; src/program/probe.c) the host runs the k loop in launches over
 * segments [k_begin, k_end) (multiples of LIN_TK but the last), C
 * carrying the running sums from one to the next: seg says whether a
 * launch starts them (LIN_SEG_FIRST: from zero) and ends them
 * (LIN_SEG_LAST: + bias). The sums see the same terms in the same order,
 * so the bits equal one launch's (0, K, both flags).
 *
 * tf32 (built with -DTEENY_TF32=1 where teeny_ctx_set_tf32 asked and the
 * device ran probe.c's mma kernel exactly; linear.c decides): the same
 * grid, work-group, staging and k segments, but the operands are rounded
 * to tf32 as they are staged and each warp multiplies its block of the
 * tile with mma.sync.m16n8k8 (see lin_gemm_tile's tf32 version): fixed
 * order, so still deterministic, within about 1e-3 of the exact product.
 */
#ifndef LIN_LX
#define LIN_LX 16
#endif
#ifndef LIN_LY
#define LIN_LY 16
#endif
#ifndef LIN_RM
#define LIN_RM 4
#endif
#ifndef LIN_RN
#define LIN_RN 4
#endif
#ifndef LIN_TK
#define LIN_TK 16
#endif
#define LIN_TM (LIN_LY * LIN_RM)
#define LIN_TN (LIN_LX * LIN_RN)
#define LIN_NT (LIN_LX * LIN_LY)
#define LIN_SEG_FIRST 1
#define LIN_SEG_LAST 2
#define LIN_SK 8 /* lin_gemm_small's k per step (linear.c counts its loop trips by it) */

/* Local rows of the staged panels: as[k][m], bs[k][n]. The tf32 variant
 * pads them by 8 so that a fragment's 4 k rows x 8 columns fall in 32
 * different banks (the row length is a multiple of 16). */
#ifdef TEENY_TF32
#define LIN_LDA (LIN_TM + 8)
#define LIN_LDB (LIN_TN + 8)
#define LIN_STAGE(x) tf32_round(x)
#else
#define LIN_LDA LIN_TM
#define LIN_LDB LIN_TN
#define LIN_STAGE(x) (x)
#endif
/* Rows of as: the k panel's, and in an emulated tf32 build (common.cl)
 * rows past them for the mma's exchange of fragments. */
#ifdef TEENY_TF32_EMULATE
#define LIN_AS_ROWS (LIN_TK + (LIN_NT * 6 + LIN_LDA - 1) / LIN_LDA)
#define LIN_MMA(as, acc, a0, a1, a2, a3, b0, b1) \
    tf32_mma_xchg((__local uint *)as[LIN_TK], acc, a0, a1, a2, a3, b0, b1)
#else
#define LIN_AS_ROWS LIN_TK
#define LIN_MMA(as, acc, a0, a1, a2, a3, b0, b1) tf32_mma(acc, a0, a1, a2, a3, b0, b1)
#endif

/* Stage the block's A and B panels for k in [k0, k0 + LIN_TK) into
 * local memory, zero outside M x K and K x N; the loop order follows
 * whichever index is contiguous in memory so that neighbouring items load
 * neighbours. lid: the item's linear id in its work-group. */
TEENY_INLINE void lin_stage(int M, int N, int K, __global const float *a, int a_off, int a_sm, int a_sk,
                            __global const float *b, int b_off, int b_sk, int b_sn, int m0, int n0, int k0, int lid,
                            __local float (*as)[LIN_LDA], __local float (*bs)[LIN_LDB])
{
    for (int t = lid; t < LIN_TM * LIN_TK; t += LIN_NT) {
        int mm = a_sk == 1 ? t / LIN_TK : t % LIN_TM;
        int kk = a_sk == 1 ? t % LIN_TK : t / LIN_TM;
        int m = m0 + mm, k = k0 + kk;
        as[kk][mm] = m < M && k < K ? LIN_STAGE(a[a_off + m * a_sm + k * a_sk]) : 0.0f;
    }
    for (int t = lid; t < LIN_TN * LIN_TK; t += LIN_NT) {
        int nn = b_sn == 1 ? t % LIN_TN : t / LIN_TK;
        int kk = b_sn == 1 ? t / LIN_TN : t % LIN_TK;
        int n = n0 + nn, k = k0 + kk;
        bs[kk][nn] = n < N && k < K ? LIN_STAGE(b[b_off + k * b_sk + n * b_sn]) : 0.0f;
    }
}

/* Grid (ceil(N / LIN_TN) * LIN_LX, ceil(M / LIN_TM) * LIN_LY), work-group
 * (LIN_LX, LIN_LY). Work-group (gx, gy) owns rows [gy*LIN_TM, +LIN_TM) and
 * columns [gx*LIN_TN, +LIN_TN) of C. The block's A and B panels are
 * staged through local memory LIN_TK deep; out-of-range elements load as
 * zero and out-of-range outputs are not written. */
#ifdef TEENY_TF32
/* ---- tf32 tensor cores (built with -DTEENY_TF32=1 only where probe.c's
 * mma kernel ran exactly; tf32_round, tf32_mma and the fragment layout in
 * cl/common.cl). Work-items 32 w .. 32 w + 31 (linear id lx + ly LIN_LX)
 * form warp w, which owns a LIN_WM x LIN_WN block of the work-group's
 * tile: LIN_RM / 4 x LIN_RN mma.sync.m16n8k8 tiles, whose C fragments an
 * item keeps in acc[LIN_RM * LIN_RN] (4 per mma tile). The host builds it
 * only with LIN_LX % 8 == 0, LIN_LY % 4 == 0, LIN_RM % 4 == 0 and
 * LIN_TK % 8 == 0, so the warps tile the block exactly. */
#define LIN_MT (LIN_RM / 4)
#define LIN_WM (16 * LIN_MT) /* rows of a warp's block */
#define LIN_WN (8 * LIN_RN)  /* columns */
#define LIN_WARPS_M (LIN_TM / LIN_WM)
/* Fragment element f = (i * LIN_RN + j) * 4 + 2 h + e of lane 4 r + c:
 * row 16 i + 8 h + r, column 8 j + 2 c + e of the warp's block. */
#define LIN_FRAG_M(f) (((f) >> 2) / LIN_RN * 16 + ((f) >> 1 & 1) * 8)
#define LIN_FRAG_N(f) (((f) >> 2) % LIN_RN * 8 + ((f) & 1))

TEENY_INLINE void lin_gemm_tile(int M, int N, int K, __global const float *a, int a_off, int a_sm, int a_sk,
                                 __global const float *b, int b_off, int b_sk, int b_sn, __global const float *bias,
                                 int bias_off, int has_bias, __global float *c, int c_off, int c_sm, int k_begin,
                                 int k_end, int seg, __local float (*as)[LIN_LDA], __local float (*bs)[LIN_LDB])
{
    const int lid = get_local_id(1) * LIN_LX + get_local_id(0), lane = lid & 31, warp = lid >> 5;
    const int lr = lane >> 2, lc = lane & 3;
    const int bm = (warp % LIN_WARPS_M) * LIN_WM, bn = (warp / LIN_WARPS_M) * LIN_WN; /* the warp's block */
    const int m0 = get_group_id(1) * LIN_TM, n0 = get_group_id(0) * LIN_TN;
    const int fm = m0 + bm + lr, fn = n0 + bn + 2 * lc; /* where fragment element 0 lies in C */
    float acc[LIN_RM * LIN_RN];
    TEENY_UNROLL
    for (int f = 0; f < LIN_RM * LIN_RN; f++) {
        int m = fm + LIN_FRAG_M(f), n = fn + LIN_FRAG_N(f);
        acc[f] = seg & LIN_SEG_FIRST || m >= M || n >= N ? 0.0f : c[c_off + m * c_sm + n];
    }

    for (int k0 = k_begin; k0 < k_end; k0 += LIN_TK) {
        lin_stage(M, N, K, a, a_off, a_sm, a_sk, b, b_off, b_sk, b_sn, m0, n0, k0, lid, as, bs);
        barrier(CLK_LOCAL_MEM_FENCE);
        TEENY_UNROLL
        for (int kk = 0; kk < LIN_TK; kk += 8) {
            __local const float *a_lo = &as[kk + lc][bm + lr], *a_hi = &as[kk + lc + 4][bm + lr];
            __local const float *b_lo = &bs[kk + lc][bn + lr], *b_hi = &bs[kk + lc + 4][bn + lr];
            uint fa[LIN_MT][4], fb[LIN_RN][2];
            TEENY_UNROLL
            for (int i = 0; i < LIN_MT; i++) {
                fa[i][0] = as_uint(a_lo[16 * i]);
                fa[i][1] = as_uint(a_lo[16 * i + 8]);
                fa[i][2] = as_uint(a_hi[16 * i]);
                fa[i][3] = as_uint(a_hi[16 * i + 8]);
            }
            TEENY_UNROLL
            for (int j = 0; j < LIN_RN; j++) {
                fb[j][0] = as_uint(b_lo[8 * j]);
                fb[j][1] = as_uint(b_hi[8 * j]);
            }
            TEENY_UNROLL
            for (int i = 0; i < LIN_MT; i++)
                TEENY_UNROLL
                for (int j = 0; j < LIN_RN; j++)
                    LIN_MMA(as, acc + (i * LIN_RN + j) * 4, fa[i][0], fa[i][1], fa[i][2], fa[i][3], fb[j][0],
                            fb[j][1]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    TEENY_UNROLL
    for (int f = 0; f < LIN_RM * LIN_RN; f++) {
        int m = fm + LIN_FRAG_M(f), n = fn + LIN_FRAG_N(f);
        if (m < M && n < N)
            c[c_off + m * c_sm + n] =
                seg & LIN_SEG_LAST ? acc[f] + (has_bias ? bias[bias_off + n] : 0.0f) : acc[f];
    }
}
#else
/* Item (lx, ly) accumulates rows ly + i*LIN_LY and columns lx + j*LIN_LX
 * of the block (strided, so neighbouring items write neighbouring
 * columns), each output summed in ascending k. */
TEENY_INLINE void lin_gemm_tile(int M, int N, int K, __global const float *a, int a_off, int a_sm, int a_sk,
                                 __global const float *b, int b_off, int b_sk, int b_sn, __global const float *bias,
                                 int bias_off, int has_bias, __global float *c, int c_off, int c_sm, int k_begin,
                                 int k_end, int seg, __local float (*as)[LIN_LDA], __local float (*bs)[LIN_LDB])
{
    int lx = get_local_id(0), ly = get_local_id(1), lid = ly * LIN_LX + lx;
    int m0 = get_group_id(1) * LIN_TM, n0 = get_group_id(0) * LIN_TN;
    float acc[LIN_RM][LIN_RN];
    for (int i = 0; i < LIN_RM; i++)
        for (int j = 0; j < LIN_RN; j++) {
            int m = m0 + ly + i * LIN_LY, n = n0 + lx + j * LIN_LX;
            acc[i][j] = seg & LIN_SEG_FIRST || m >= M || n >= N ? 0.0f : c[c_off + m * c_sm + n];
        }

    for (int k0 = k_begin; k0 < k_end; k0 += LIN_TK) {
        lin_stage(M, N, K, a, a_off, a_sm, a_sk, b, b_off, b_sk, b_sn, m0, n0, k0, lid, as, bs);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < LIN_TK; kk++) {
            float ra[LIN_RM], rb[LIN_RN];
            for (int i = 0; i < LIN_RM; i++)
                ra[i] = as[kk][ly + i * LIN_LY];
            for (int j = 0; j < LIN_RN; j++)
                rb[j] = bs[kk][lx + j * LIN_LX];
            for (int i = 0; i < LIN_RM; i++)
                for (int j = 0; j < LIN_RN; j++)
                    acc[i][j] += ra[i] * rb[j];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    for (int i = 0; i < LIN_RM; i++) {
        int m = m0 + ly + i * LIN_LY;
        if (m >= M)
            break;
        for (int j = 0; j < LIN_RN; j++) {
            int n = n0 + lx + j * LIN_LX;
            if (n < N)
                c[c_off + m * c_sm + n] =
                    seg & LIN_SEG_LAST ? acc[i][j] + (has_bias ? bias[bias_off + n] : 0.0f) : acc[i][j];
        }
    }
}
#endif

__kernel __attribute__((reqd_work_group_size(LIN_LX, LIN_LY, 1)))
void lin_gemm(int M, int N, int K,
              __global const float *a, int a_off, int a_sm, int a_sk,
              __global const float *b, int b_off, int b_sk, int b_sn,
              __global const float *bias, int bias_off, int has_bias,
              __global float *c, int c_off, int c_sm, int k_begin, int k_end, int seg)
{
    __local float as[LIN_AS_ROWS][LIN_LDA];
    __local float bs[LIN_TK][LIN_LDB];
    lin_gemm_tile(M, N, K, a, a_off, a_sm, a_sk, b, b_off, b_sk, b_sn, bias, bias_off, has_bias, c, c_off, c_sm,
                  k_begin, k_end, seg, as, bs);
}

/* The small route. Grid (ceil(M N / L) L) for any work-group size L:
 * item i computes C[m, n], m = i / N, n = i % N (neighbouring items,
 * neighbouring columns), its sum in a register. No local memory, no
 * barriers: the time is the item's chain of multiply-adds over k, whose
 * loads go LIN_SK at a time ahead of them. k segments and bias as
 * lin_gemm's, and the same sum (acc += a * b from k_begin up, from zero
 * or C; + bias after the last term). */
__kernel void lin_gemm_small(int M, int N, int K,
                             __global const float *a, int a_off, int a_sm, int a_sk,
                             __global const float *b, int b_off, int b_sk, int b_sn,
                             __global const float *bias, int bias_off, int has_bias,
                             __global float *c, int c_off, int c_sm, int k_begin, int k_end, int seg)
{
    size_t i = get_global_id(0);
    (void)K; /* lin_gemm's arguments: k_end bounds the sum */
    if (i >= (size_t)M * (size_t)N)
        return;
    int m = (int)(i / (size_t)N), n = (int)(i % (size_t)N), k = k_begin;
    __global const float *pa = a + a_off + m * a_sm + k * a_sk, *pb = b + b_off + k * b_sk + n * b_sn;
    float acc = seg & LIN_SEG_FIRST ? 0.0f : c[c_off + m * c_sm + n];
    for (; k + LIN_SK <= k_end; k += LIN_SK) {
        float ra[LIN_SK], rb[LIN_SK];
        TEENY_UNROLL
        for (int j = 0; j < LIN_SK; j++) {
            ra[j] = pa[j * a_sk];
            rb[j] = pb[j * b_sk];
        }
        TEENY_UNROLL
        for (int j = 0; j < LIN_SK; j++)
            acc += ra[j] * rb[j];
        pa += LIN_SK * a_sk;
        pb += LIN_SK * b_sk;
    }
    for (; k < k_end; k++) {
        acc += *pa * *pb;
        pa += a_sk;
        pb += b_sk;
    }
    c[c_off + m * c_sm + n] = seg & LIN_SEG_LAST ? acc + (has_bias ? bias[bias_off + n] : 0.0f) : acc;
}

/* Batched: grid dimension 2 counts the batch, up to three dimensions of
 * sizes bn.s1, bn.s2, bn.s3 (bn.s0 unused); each operand's offset moves by
 * its own strides per batch dimension (0 where it is broadcast). Every
 * matrix as lin_gemm's (k segments too), no bias. */
__kernel __attribute__((reqd_work_group_size(LIN_LX, LIN_LY, 1)))
void lin_gemm_batched(int M, int N, int K,
                      __global const float *a, int a_off, int a_sm, int a_sk, int4 a_sb,
                      __global const float *b, int b_off, int b_sk, int b_sn, int4 b_sb,
                      __global float *c, int c_off, int c_sm, int4 c_sb, int4 bn, int k_begin, int k_end,
                      int seg)
{
    __local float as[LIN_AS_ROWS][LIN_LDA];
    __local float bs[LIN_TK][LIN_LDB];
    int z = get_group_id(2), z3 = z % bn.s3, z2 = z / bn.s3 % bn.s2, z1 = z / bn.s3 / bn.s2;
    a_off += z1 * a_sb.s1 + z2 * a_sb.s2 + z3 * a_sb.s3;
    b_off += z1 * b_sb.s1 + z2 * b_sb.s2 + z3 * b_sb.s3;
    c_off += z1 * c_sb.s1 + z2 * c_sb.s2 + z3 * c_sb.s3;
    lin_gemm_tile(M, N, K, a, a_off, a_sm, a_sk, b, b_off, b_sk, b_sn, a, 0, 0, c, c_off, c_sm, k_begin, k_end, seg,
                  as, bs);
}

/* Bias gradient, pass 1. Grid (cols, P): item (j, p) sums column j of
 * g [rows, cols] over rows [p*chunk, min((p+1)*chunk, rows)) in order and
 * writes part[p*cols + j]; neighbouring items read neighbouring columns. */
__kernel void lin_colsum_partial(__global const float *g, int g_off, int rows, int cols, int chunk,
                                 __global float *part)
{
    int j = get_global_id(0), p = get_global_id(1);
    if (j >= cols)
        return;
    int r_end = min(p * chunk + chunk, rows);
    float s = 0.0f;
    for (int r = p * chunk; r < r_end; r++)
        s += g[g_off + r * cols + j];
    part[p * cols + j] = s;
}

/* Bias gradient, pass 2. Grid (cols): item j adds its P partials in order. */
__kernel void lin_colsum_final(__global const float *part, int cols, int P, __global float *out, int out_off)
{
    int j = get_global_id(0);
    if (j >= cols)
        return;
    out[out_off + j] = teeny_sum_strided(part + j, P, cols);
}
