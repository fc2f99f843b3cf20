/*
 * conv2d_gemm.cl -- the implicit GEMMs: the tf32 tensor-core pieces (built
 * with -DTEENY_TF32=1 only), the portable tile loaders and micro-tiles,
 * and conv_gemm_gather, conv_gemm_1x1 and conv_gemm_dw. The conv2d
 * program's second part, after conv2d.cl, whose banner holds the layouts,
 * the k ranges and the tunables (TILE_*, WPT_*).
 */
#ifdef TEENY_TF32
/* ---- tf32 tensor cores (NVIDIA; built with -DTEENY_TF32=1 only where a
 * build-and-run probe of the instruction succeeded, src/program/probe.c).
 * The operands are rounded to tf32 (tf32_round, cl/common.cl) as they are
 * staged into local memory; products accumulate in fp32 in the fixed
 * order of the hardware's mma, so results stay deterministic. A warp owns
 * a (16 TF32_MT) x (8 TF32_NT) block of the work-group's tile: TF32_MT x
 * TF32_NT mma.sync.m16n8k8 tiles (tf32_mma; the fragments' layout is in
 * cl/common.cl). The per-item acc[WPT_M * WPT_N] holds those C fragments,
 * tile by tile. Work-items 32 w .. 32 w + 31 of a 1-D work-group form
 * warp w. */
#define TF32_MT (WPT_M / 4)
#define TF32_NT WPT_N
#define TF32_WM (16 * TF32_MT) /* rows of a warp's block */
#define TF32_WN (8 * TF32_NT)  /* columns */
#define TF32_WARPS_M (TILE_M / TF32_WM)

#define TF32_STAGE(x) tf32_round(x)
#define TF32_STAGE4(v) ((float4)(tf32_round((v).x), tf32_round((v).y), tf32_round((v).z), tf32_round((v).w)))

/* The warp's block += As[k][m] * Bs[k][n] over one TILE_K slice. In test
 * builds (TEENY_TF32_EMULATE, conv2d_plan.c's hook) the mma is
 * cl/common.cl's portable one, its fragments exchanged through xchg
 * (GEMM_XCHG, 6 words an item): every item of the work-group calls this
 * alike, as the GEMM kernels do. */
TEENY_INLINE void gemm_micro(__local const float4 *As4, __local const float4 *Bs4, int tm, int tn,
                             float *acc GEMM_XCHG_PARAM)
{
    __local const float *As = (__local const float *)As4, *Bs = (__local const float *)Bs4;
    const int lane = get_local_id(0) & 31, warp = get_local_id(0) >> 5;
    const int r = lane >> 2, c = lane & 3;
    const int wm = (warp % TF32_WARPS_M) * TF32_WM + r, wn = (warp / TF32_WARPS_M) * TF32_WN + r;
    (void)tm;
    (void)tn;
    TEENY_UNROLL
    for (int kk = 0; kk < TILE_K; kk += 8) {
        __local const float *a_lo = As + (kk + c) * LDA + wm, *a_hi = a_lo + 4 * LDA;
        __local const float *b_lo = Bs + (kk + c) * LDB + wn, *b_hi = b_lo + 4 * LDB;
        uint a[TF32_MT][4], b[TF32_NT][2];
        TEENY_UNROLL
        for (int i = 0; i < TF32_MT; i++) {
            a[i][0] = as_uint(a_lo[16 * i]);
            a[i][1] = as_uint(a_lo[16 * i + 8]);
            a[i][2] = as_uint(a_hi[16 * i]);
            a[i][3] = as_uint(a_hi[16 * i + 8]);
        }
        TEENY_UNROLL
        for (int j = 0; j < TF32_NT; j++) {
            b[j][0] = as_uint(b_lo[8 * j]);
            b[j][1] = as_uint(b_hi[8 * j]);
        }
        TEENY_UNROLL
        for (int i = 0; i < TF32_MT; i++)
            TEENY_UNROLL
            for (int j = 0; j < TF32_NT; j++)
                GEMM_MMA(acc + (i * TF32_NT + j) * 4, a[i][0], a[i][1], a[i][2], a[i][3], b[j][0], b[j][1]);
    }
}
#else
#define TF32_STAGE(x) (x)
#define TF32_STAGE4(v) (v)

/* An item's operand values of one k: d[4*r .. 4*r + 3] = the float4
 * src[r*stride], r < n4. */
TEENY_INLINE void gemm_operand(float *d, __local const float4 *src, const int n4, const int stride)
{
    TEENY_UNROLL
    for (int r = 0; r < n4; r++) {
        float4 v = src[r * stride];
        d[4 * r] = v.x;
        d[4 * r + 1] = v.y;
        d[4 * r + 2] = v.z;
        d[4 * r + 3] = v.w;
    }
}

/* acc[WPT_M][WPT_N] += As[k][m] * Bs[k][n] over one TILE_K slice; item
 * (tm, tn) owns rows {r*THREADS_M*4 + tm*4 + 0..3} and columns
 * {s*THREADS_N*4 + tn*4 + 0..3}, so a warp reads consecutive float4s. */
TEENY_INLINE void gemm_micro(__local const float4 *As, __local const float4 *Bs, int tm, int tn,
                             float *acc GEMM_XCHG_PARAM)
{
    TEENY_UNROLL
    for (int kk = 0; kk < TILE_K; kk++) {
        float a[WPT_M], b[WPT_N];
        gemm_operand(a, As + kk * (LDA / 4) + tm, WPT_M / 4, THREADS_M);
        gemm_operand(b, Bs + kk * (LDB / 4) + tn, WPT_N / 4, THREADS_N);
        TEENY_UNROLL
        for (int i = 0; i < WPT_M; i++)
            TEENY_UNROLL
            for (int j = 0; j < WPT_N; j++)
                acc[i * WPT_N + j] = TEENY_MAD(a[i], b[j], acc[i * WPT_N + j]);
    }
}
#endif

#ifdef TEENY_TF32
/* Read back the warp's C fragments from where gemm_store wrote them
 * (a k range's raw sums; 0 outside M x N). */
TEENY_INLINE void gemm_load(float *acc, int tm, int tn, int m0, int n0, int g, int M, int N, int P, int Q,
                            __global const float *out, int out_off, int out_bstride, int out_nstride,
                            int out_hstride, int out_wstride)
{
    const int lane = get_local_id(0) & 31, warp = get_local_id(0) >> 5, PQ = P * Q;
    const int wm = m0 + (warp % TF32_WARPS_M) * TF32_WM + (lane >> 2);
    const int wn = n0 + (warp / TF32_WARPS_M) * TF32_WN + 2 * (lane & 3);
    (void)tm;
    (void)tn;
    TEENY_UNROLL
    for (int i = 0; i < 2 * TF32_MT; i++) {
        int m = wm + (i >> 1) * 16 + (i & 1) * 8, ok = m < M;
        int mm = ok ? m : 0, b = mm / PQ, pq = mm - b * PQ, p = pq / Q, q = pq - p * Q;
        int base = out_off + b * out_bstride + p * out_hstride + q * out_wstride + g * N * out_nstride;
        TEENY_UNROLL
        for (int j = 0; j < 2 * TF32_NT; j++) {
            int n = wn + (j >> 1) * 8 + (j & 1);
            acc[((i >> 1) * TF32_NT + (j >> 1)) * 4 + (i & 1) * 2 + (j & 1)] =
                ok && n < N ? out[base + n * out_nstride] : 0.0f;
        }
    }
}

/* Write the warp's C fragments: element (m, n) goes where the fp32
 * gemm_store below puts it, through the same epilogue. */
TEENY_INLINE void gemm_store(const float *acc, int tm, int tn, int m0, int n0, int g, int M, int N, int P, int Q,
                       __global float *out, int out_off, int out_bstride, int out_nstride, int out_hstride,
                       int out_wstride, __global const float *bias, int bias_off, __global const float *scale,
                       int scale_off, __global const float *shift, int shift_off, int epi, int act, int vec_out)
{
    const int lane = get_local_id(0) & 31, warp = get_local_id(0) >> 5, PQ = P * Q;
    const int wm = m0 + (warp % TF32_WARPS_M) * TF32_WM + (lane >> 2);
    const int wn = n0 + (warp / TF32_WARPS_M) * TF32_WN + 2 * (lane & 3);
    float sc[2 * TF32_NT], sh[2 * TF32_NT];
    (void)tm;
    (void)tn;
    (void)vec_out;
    TEENY_UNROLL
    for (int j = 0; j < 2 * TF32_NT; j++) {
        int n = wn + (j >> 1) * 8 + (j & 1), ch = g * N + n;
        sc[j] = 1.0f;
        sh[j] = 0.0f;
        if (n < N && epi) {
            if (epi & EPI_SCALE)
                sc[j] = scale[scale_off + ch];
            if (epi & EPI_SHIFT)
                sh[j] = shift[shift_off + ch];
            if (epi & EPI_BIAS)
                sh[j] += bias[bias_off + ch];
        }
    }
    TEENY_UNROLL
    for (int i = 0; i < 2 * TF32_MT; i++) { /* rows wm + 16 (i / 2) + 8 (i % 2) */
        int m = wm + (i >> 1) * 16 + (i & 1) * 8;
        if (m >= M)
            continue;
        int b = m / PQ, pq = m - b * PQ, p = pq / Q, q = pq - p * Q;
        int base = out_off + b * out_bstride + p * out_hstride + q * out_wstride + g * N * out_nstride;
        TEENY_UNROLL
        for (int j = 0; j < 2 * TF32_NT; j++) {
            int n = wn + (j >> 1) * 8 + (j & 1);
            if (n < N)
                out[base + n * out_nstride] =
                    conv_act(act, acc[((i >> 1) * TF32_NT + (j >> 1)) * 4 + (i & 1) * 2 + (j & 1)] * sc[j] + sh[j]);
        }
    }
}
#else
/* Read back the micro-tile from where gemm_store wrote it (a k range's
 * raw sums; 0 outside M x N). The float4 stores of vec_out hit the same
 * positions as this element-wise mapping. */
TEENY_INLINE void gemm_load(float *acc, int tm, int tn, int m0, int n0, int g, int M, int N, int P, int Q,
                            __global const float *out, int out_off, int out_bstride, int out_nstride,
                            int out_hstride, int out_wstride)
{
    int PQ = P * Q;
    TEENY_UNROLL
    for (int r = 0; r < WPT_M / 4; r++)
        TEENY_UNROLL
        for (int i = 0; i < 4; i++) {
            int m = m0 + r * THREADS_M * 4 + tm * 4 + i, ok = m < M;
            int mm = ok ? m : 0, b = mm / PQ, pq = mm - b * PQ, p = pq / Q, q = pq - p * Q;
            int base = out_off + b * out_bstride + p * out_hstride + q * out_wstride + g * N * out_nstride;
            TEENY_UNROLL
            for (int j = 0; j < WPT_N; j++) {
                int n = n0 + (j / 4) * THREADS_N * 4 + tn * 4 + (j & 3);
                acc[(4 * r + i) * WPT_N + j] = ok && n < N ? out[base + n * out_nstride] : 0.0f;
            }
        }
}

/* Write the micro-tile: element (m, n) goes to
 *   out[out_off + b*out_bstride + (g*N + n)*out_nstride + p*out_hstride + q*out_wstride]
 * with m = (b*P + p)*Q + q, through the epilogue
 *   act(v * scale[c] + shift[c] + bias[c]), c = g*N + n (flags say which exist).
 * vec_out (set by the host when out_wstride == 1, out_hstride == Q, P*Q,
 * out_off and the strides are multiples of 4) stores float4s along m. */
TEENY_INLINE void gemm_store(const float *acc, int tm, int tn, int m0, int n0, int g, int M, int N, int P, int Q,
                       __global float *out, int out_off, int out_bstride, int out_nstride, int out_hstride,
                       int out_wstride, __global const float *bias, int bias_off, __global const float *scale,
                       int scale_off, __global const float *shift, int shift_off, int epi, int act, int vec_out)
{
    int PQ = P * Q;
    float sc[WPT_N], sh[WPT_N];
    int nn[WPT_N];
    TEENY_UNROLL
    for (int j = 0; j < WPT_N; j++) {
        int n = n0 + (j / 4) * THREADS_N * 4 + tn * 4 + (j & 3);
        float2 e = n < N ? conv_epilogue(epi, g * N + n, bias, bias_off, scale, scale_off, shift, shift_off)
                         : (float2)(1.0f, 0.0f);
        nn[j] = n;
        sc[j] = e.x;
        sh[j] = e.y;
    }
    TEENY_UNROLL
    for (int r = 0; r < WPT_M / 4; r++) {
        int mb = m0 + r * THREADS_M * 4 + tm * 4;
        if (vec_out && mb + 3 < M) {
            int b = mb / PQ;
            int base = out_off + b * out_bstride + (mb - b * PQ) + g * N * out_nstride;
            TEENY_UNROLL
            for (int j = 0; j < WPT_N; j++) {
                if (nn[j] >= N)
                    continue;
                float4 v;
                v.x = conv_act(act, acc[(4 * r) * WPT_N + j] * sc[j] + sh[j]);
                v.y = conv_act(act, acc[(4 * r + 1) * WPT_N + j] * sc[j] + sh[j]);
                v.z = conv_act(act, acc[(4 * r + 2) * WPT_N + j] * sc[j] + sh[j]);
                v.w = conv_act(act, acc[(4 * r + 3) * WPT_N + j] * sc[j] + sh[j]);
                *(__global float4 *)(out + base + nn[j] * out_nstride) = v;
            }
        } else {
            TEENY_UNROLL
            for (int i = 0; i < 4; i++) {
                int m = mb + i;
                if (m >= M)
                    continue;
                int b = m / PQ, pq = m - b * PQ, p = pq / Q, q = pq - p * Q;
                int base = out_off + b * out_bstride + p * out_hstride + q * out_wstride + g * N * out_nstride;
                TEENY_UNROLL
                for (int j = 0; j < WPT_N; j++)
                    if (nn[j] < N)
                        out[base + nn[j] * out_nstride] =
                            conv_act(act, acc[(4 * r + i) * WPT_N + j] * sc[j] + sh[j]);
            }
        }
    }
}
#endif

/* Weight (B) operand loads shared by conv_gemm and conv_gemm_1x1: item
 * (bk, bn) loads k = k0 + bk for columns n0 + bn + i*B_TN, k-adjacent
 * items reading neighbouring weights. */
#define GEMM_B_SETUP()                                                                                      \
    const int bk = tid % TILE_K, bn = tid / TILE_K;                                                         \
    const int b_base = w_off + g * w_gstride + (n0 + bn) * w_nstride, b_nstep = B_TN * w_nstride;          \
    const int b_count = bn < TILE_N ? (N - n0 - bn + B_TN - 1) / B_TN : 0; /* its columns inside N */     \
    conv_idx b_at = idx_make(bk + k_begin, Kh, Kw), b_step = idx_make(TILE_K, Kh, Kw)

#define GEMM_B_LOAD(rb)                                                                                     \
    do {                                                                                                    \
        int koff = b_base + b_at.c * w_cstride + b_at.h * w_hstride + b_at.w * w_wstride;                   \
        for (int i = 0; i < B_NN; i++)                                                                      \
            (rb)[i] = b_at.c < Kc && i < b_count ? w[koff + i * b_nstep] : 0.0f;                            \
        b_at = idx_add(b_at, b_step, Kh, Kw);                                                               \
    } while (0)

/* The work-group's tiles: its double-buffered A and B tiles (and the tf32
 * exchange), item tid, group g and the tile's first column n0 and row m0
 * (every GEMM kernel's grid: (ceil(M/TILE_M)*GEMM_WG, ceil(N/TILE_N)*G, *)). */
#define GEMM_GROUP                                                                                          \
    __local float4 As[2][TILE_K * LDA / 4];                                                                 \
    __local float4 Bs[2][TILE_K * LDB / 4];                                                                 \
    GEMM_XCHG_LOCAL                                                                                         \
    const int tid = get_local_id(0);                                                                        \
    const int n_tiles = (N + TILE_N - 1) / TILE_N;                                                          \
    const int g = get_group_id(1) / n_tiles;                                                                \
    const int n0 = (get_group_id(1) - g * n_tiles) * TILE_N;                                                \
    const int m0 = get_group_id(0) * TILE_M

/* The k loop of conv_gemm_gather and conv_gemm_1x1 over k_tiles TILE_K
 * slices, after the caller's LOAD_A() (the next slice's A values into
 * registers ra: AT, float or float4, the item's NK x NM of them at rows
 * ak + j*TK, columns am + i*TM of an A tile of LDT AT a row, staged
 * through STAGE): acc from 0, or from what the k range before stored (not
 * CONV_SEG_FIRST); each slice's A and B staged, the next slice's loads in
 * flight over this one's gemm_micro; then gemm_store, through the
 * epilogue on the last k range only. */
#define GEMM_K_LOOP(k_tiles_expr, AT, NK, NM, TK, TM, LDT, STAGE)                                           \
    float acc[WPT_M * WPT_N];                                                                               \
    for (int i = 0; i < WPT_M * WPT_N; i++)                                                                 \
        acc[i] = 0.0f;                                                                                      \
    const int tm = tid % THREADS_M, tn = tid / THREADS_M;                                                   \
    if (!(seg & CONV_SEG_FIRST))                                                                            \
        gemm_load(acc, tm, tn, m0, n0, g, M, N, P, Q, out, out_off, out_bstride, out_nstride, out_hstride,  \
                  out_wstride);                                                                             \
    const int k_tiles = (k_tiles_expr);                                                                     \
    if (k_tiles > 0) {                                                                                      \
        LOAD_A();                                                                                           \
        GEMM_B_LOAD(rb);                                                                                    \
    }                                                                                                       \
    for (int t = 0; t < k_tiles; t++) {                                                                     \
        __local AT *as = (__local AT *)As[t & 1];                                                           \
        __local float *bs = (__local float *)Bs[t & 1];                                                     \
        for (int j = 0; j < (NK); j++)                                                                      \
            for (int i = 0; i < (NM); i++)                                                                  \
                as[(ak + j * (TK)) * (LDT) + am + i * (TM)] = STAGE(ra[j * (NM) + i]);                      \
        for (int i = 0; i < B_NN; i++)                                                                      \
            if (B_TN * B_NN == TILE_N || bn + i * B_TN < TILE_N) /* a constant but for thin tiles */        \
                bs[bk * LDB + bn + i * B_TN] = TF32_STAGE(rb[i]);                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                       \
        if (t + 1 < k_tiles) {                                                                              \
            LOAD_A();                                                                                       \
            GEMM_B_LOAD(rb);                                                                                \
        }                                                                                                   \
        gemm_micro(As[t & 1], Bs[t & 1], tm, tn, acc GEMM_XCHG_ARG);                                        \
    }                                                                                                       \
    gemm_store(acc, tm, tn, m0, n0, g, M, N, P, Q, out, out_off, out_bstride, out_nstride, out_hstride,     \
               out_wstride, bias, bias_off, scale, scale_off, shift, shift_off, seg & CONV_SEG_LAST ? epi : 0, \
               seg & CONV_SEG_LAST ? act : 0, vec_out)

/* The input gradient's stride phases in one conv_gemm_gather launch
 * (conv2d_exec.c packs the int16 argument `phase`): grid index z is phase
 * (rh, rw) = (z / PHASE_COLS, z % PHASE_COLS), the dx positions
 * (rh + p*s_h, rw + q*s_w). Per axis the phase sees the taps k0 + i*step
 * (step = s / gcd(s, d)) of the count that fit the kernel, whose dy row is
 * p + c - i*d/gcd(s, d) with c = (r + pad - k0*d) / s; a phase no tap
 * reaches has Kc = 0 (dx = 0). PHASE_COLS 0: one GEMM as the arguments
 * say (the forward, an unstrided input gradient, one phase per launch).
 * Built only with -DCONV_PHASES (the host asks for it in merged launches),
 * so the other GEMMs keep their arguments as constants. */
#define PHASE_COLS(v) (v).s0
#define PHASE_GEOMETRY(v)                                                                                   \
    const int s_h = (v).s1, s_w = (v).s2, p_h = (v).s3, p_w = (v).s4, d_h = (v).s5, d_w = (v).s6,          \
              KH = (v).s7, KW = (v).s8, H = (v).s9, W = (v).sa, step_h = (v).sb, step_w = (v).sc, B = (v).sd

/* Phase z's GEMM from the launch's: its rows (M, P, Q), taps (Kh, Kw,
 * Kc 0 where none), dy offsets (c_h, c_w), weight taps and dx positions,
 * and the launch's k range cut to its K. */
TEENY_INLINE void conv_phase_job(int16 phase, int z, int *M, int *P, int *Q, int *Kc, int *Kh, int *Kw, int *c_h,
                                 int *c_w, int *w_off, int *w_hstride, int *w_wstride, int *out_off, int *k_end)
{
    PHASE_GEOMETRY(phase);
    const int rh = z / PHASE_COLS(phase), rw = z - rh * PHASE_COLS(phase);
    const int3 th = conv_phase_axis(rh, s_h, p_h, d_h, KH, step_h);
    const int3 tw = conv_phase_axis(rw, s_w, p_w, d_w, KW, step_w);
    *P = (H - rh + s_h - 1) / s_h;
    *Q = (W - rw + s_w - 1) / s_w;
    *M = B * *P * *Q;
    *Kc = th.y && tw.y ? *Kc : 0;
    *Kh = max(th.y, 1);
    *Kw = max(tw.y, 1);
    *c_h = th.z;
    *c_w = tw.z;
    *w_off += th.x * KW + tw.x;
    *w_hstride = step_h * KW;
    *w_wstride = step_w;
    *out_off += rh * W + rw;
    *k_end = min(*k_end, *Kc * *Kh * *Kw);
}

/* The arguments of conv_gemm_gather and conv_gemm_1x1 (src/ops/conv2d/
 * gemm.c sets them alike for both). */
#define CONV_GEMM_ARGS                                                                                      \
    __global const float *restrict src, int src_off, __global const float *restrict w, int w_off,           \
        __global float *restrict out, int out_off, int M, int N, int P, int Q, int Kc, int Kh, int Kw,      \
        int src_bstride, int src_cstride, int Hs, int Ws, int a_h, int c_h, int e_h, int a_w, int c_w,      \
        int e_w, int w_gstride, int w_nstride, int w_cstride, int w_hstride, int w_wstride,                 \
        int out_bstride, int out_nstride, int out_hstride, int out_wstride, __global const float *bias,     \
        int bias_off, __global const float *scale, int scale_off, __global const float *shift,              \
        int shift_off, int epi, int act, int vec_out, int k_begin, int k_end, int seg, int16 phase

/* Grid (ceil(M/TILE_M)*GEMM_WG, ceil(N/TILE_N)*G, phases), work-group
 * (GEMM_WG): group (i, j, z) computes rows [i*TILE_M, +TILE_M) and columns
 * [(j % n_tiles)*TILE_N, +TILE_N) of group j / n_tiles (of stride phase z
 * where PHASE_COLS(phase) > 0: M is then the largest phase's, and a
 * group past its phase's rows computes and stores nothing); each item a
 * WPT_M x WPT_N micro-tile (see the banner for the gather).
 * No kernel name here is a prefix of another: oclgrind 21.10 charges a
 * kernel for the __local arrays of every kernel whose name starts with its
 * own, so a plain "conv_gemm" was refused on 32 KiB of local memory for
 * the tiles of conv_gemm_1x1 and conv_gemm_dw too. */
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1)))
void conv_gemm_gather(CONV_GEMM_ARGS)
{
    GEMM_GROUP;
#ifdef CONV_PHASES /* only the merged launches' program: the phase search cost the forward GEMMs 5% (H200) */
    if (PHASE_COLS(phase) > 0)
        conv_phase_job(phase, get_group_id(2), &M, &P, &Q, &Kc, &Kh, &Kw, &c_h, &c_w, &w_off, &w_hstride,
                       &w_wstride, &out_off, &k_end);
#else
    (void)phase;
#endif
    const int PQ = P * Q;

    /* this item's A rows: the source offset of tap (0, 0) and its row and
     * column; a row past M gets a row far below 0, so every tap misses.
     * Offsets are unsigned: a padded row's partial sums may wrap, the
     * offsets of taps inside the source never do. */
    const int am = tid % A_TM, ak = tid / A_TM;
    uint a_off[A_NM];
    int a_h0[A_NM], a_w0[A_NM];
    for (int i = 0; i < A_NM; i++) {
        int m = m0 + am + i * A_TM, ok = m < M;
        int mm = ok ? m : 0, b = mm / PQ, pq = mm - b * PQ, p = pq / Q, q = pq - p * Q;
        a_h0[i] = ok ? p * a_h + c_h : -(1 << 30);
        a_w0[i] = q * a_w + c_w;
        a_off[i] = (uint)(src_off + b * src_bstride + g * Kc * src_cstride) + (uint)a_h0[i] * (uint)Ws + (uint)a_w0[i];
    }
    conv_idx a_at = idx_make(ak + k_begin, Kh, Kw), a_step = idx_make(A_TK, Kh, Kw);
    GEMM_B_SETUP();

    float ra[A_NM * A_NK], rb[B_NN];
#define LOAD_A()                                                                                            \
    for (int j = 0; j < A_NK; j++) {                                                                        \
        int dh = a_at.h * e_h, dw = a_at.w * e_w, kin = a_at.c < Kc;                                        \
        uint koff = (uint)(a_at.c * src_cstride) + (uint)dh * (uint)Ws + (uint)dw;                          \
        for (int i = 0; i < A_NM; i++) {                                                                    \
            int ok = kin && (uint)(a_h0[i] + dh) < (uint)Hs && (uint)(a_w0[i] + dw) < (uint)Ws;             \
            ra[j * A_NM + i] = ok ? src[a_off[i] + koff] : 0.0f;                                            \
        }                                                                                                   \
        a_at = idx_add(a_at, a_step, Kh, Kw);                                                               \
    }

    /* a phase whose rows end before this group's (or whose k range ends
     * before this launch's) stores what it holds */
    GEMM_K_LOOP(m0 < M && k_end > k_begin ? (k_end - k_begin + TILE_K - 1) / TILE_K : 0, float, A_NK, A_NM, A_TK,
                A_TM, LDA, TF32_STAGE);
#undef LOAD_A
}

/* The plain GEMM of a 1x1, stride-1, unpadded convolution (Kh = Kw = 1,
 * source [B, *, P*Q] with P*Q, src_off and the strides multiples of 4):
 * A is read as float4s along m. Same arguments, grid and work-group as
 * conv_gemm_gather (the gather arguments are unused). */
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1)))
void conv_gemm_1x1(CONV_GEMM_ARGS)
{
    GEMM_GROUP;
    const int K = Kc, PQ = P * Q;
    (void)Hs; (void)Ws; (void)a_h; (void)c_h; (void)e_h; (void)a_w; (void)c_w; (void)e_w; (void)phase;

    const int am = tid % A4_TM, ak = tid / A4_TM;
    int a_base[A4_NM];
    for (int i = 0; i < A4_NM; i++) {
        int m = m0 + (am + i * A4_TM) * 4, b = m / PQ;
        a_base[i] = m < M ? src_off + b * src_bstride + g * Kc * src_cstride + (m - b * PQ) : -1;
    }
    int a_k = ak + k_begin;
    GEMM_B_SETUP();

    float4 ra[A4_NM * A4_NK];
    float rb[B_NN];
#define LOAD_A()                                                                                            \
    for (int j = 0; j < A4_NK; j++) {                                                                       \
        int k = a_k + j * A4_TK;                                                                            \
        for (int i = 0; i < A4_NM; i++)                                                                     \
            ra[j * A4_NM + i] = k < K && a_base[i] >= 0                                                     \
                                    ? *(__global const float4 *)(src + a_base[i] + k * src_cstride)         \
                                    : (float4)(0.0f);                                                       \
    }                                                                                                       \
    a_k += TILE_K;

    GEMM_K_LOOP((k_end - k_begin + TILE_K - 1) / TILE_K, float4, A4_NK, A4_NM, A4_TK, A4_TM, LDA / 4, TF32_STAGE4);
#undef LOAD_A
}

/* Weight gradient as a GEMM per group: out[m, n] = sum_r X[r, m] * DY[r, n]
 * with m = (c, kh, kw) in [0, Cig*KH*KW), n an output channel of the group
 * and r = (b, oh, ow) in chunk z = [z*r_chunk, +r_chunk) of B*OH*OW:
 *   X[r, m] = x[b, g*Cig + c, oh*s_h - p_h + kh*d_h, ow*s_w - p_w + kw*d_w]
 *   DY[r, n] = dy[b, g*Cog + n, oh, ow].
 * Grid (ceil(M/TILE_M)*GEMM_WG, ceil(N/TILE_N)*G, Z), work-group (GEMM_WG).
 * Item (tid % TILE_K) loads r-adjacent elements (coalesced along ow).
 * Chunk z's partial goes to out[out_off + z*out_zstride + (g*N + n)*M + m]
 * (= dw itself when Z == 1). */
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1)))
void conv_gemm_dw(__global const float *restrict x, int x_off, __global const float *restrict dy, int dy_off,
                  __global float *restrict out, int out_off, int out_zstride, int M, int N, int Cig, int KH, int KW,
                  int Cin, int H, int W, int Cout, int OH, int OW, int s_h, int s_w, int p_h, int p_w, int d_h,
                  int d_w, int R, int r_chunk, int vec_out)
{
    GEMM_GROUP;
    const int z = get_group_id(2);
    const int r_begin = z * r_chunk, r_end = min(R, r_begin + r_chunk);
    const int HW = H * W, OHW = OH * OW, KHW = KH * KW;

    const int rk = tid % TILE_K, rx = tid / TILE_K;
    int m_coff[R_NM], m_h[R_NM], m_w[R_NM];
    for (int i = 0; i < R_NM; i++) {
        int m = m0 + rx + i * R_TX, c = m / KHW, t = m - c * KHW, kh = t / KW, kw = t - kh * KW;
        m_coff[i] = m < M ? (g * Cig + c) * HW : -1;
        m_h[i] = kh * d_h - p_h;
        m_w[i] = kw * d_w - p_w;
    }
    int n_off[R_NN];
    for (int i = 0; i < R_NN; i++) {
        int n = n0 + rx + i * R_TX;
        n_off[i] = n < N && rx + i * R_TX < TILE_N ? (g * N + n) * OHW : -1;
    }
    /* r = (b, oh, ow) as a (c, h, w) index of extents (*, OH, OW) */
    conv_idx r_at = idx_make(r_begin + rk, OH, OW), r_step = idx_make(TILE_K, OH, OW);
    int r = r_begin + rk;

    float ra[R_NM], rb[R_NN];
#define LOAD_AB()                                                                                           \
    do {                                                                                                    \
        int ok = r < r_end, ih = r_at.h * s_h, iw = r_at.w * s_w;                                           \
        int xb = x_off + r_at.c * Cin * HW, yb = dy_off + r_at.c * Cout * OHW + r_at.h * OW + r_at.w;      \
        for (int i = 0; i < R_NM; i++) {                                                                    \
            int hh = ih + m_h[i], ww = iw + m_w[i];                                                         \
            ra[i] = ok && m_coff[i] >= 0 && (uint)hh < (uint)H && (uint)ww < (uint)W                        \
                        ? x[xb + m_coff[i] + hh * W + ww] : 0.0f;                                           \
        }                                                                                                   \
        for (int i = 0; i < R_NN; i++)                                                                      \
            rb[i] = ok && n_off[i] >= 0 ? dy[yb + n_off[i]] : 0.0f;                                        \
        r_at = idx_add(r_at, r_step, OH, OW);                                                               \
        r += TILE_K;                                                                                        \
    } while (0)

    float acc[WPT_M * WPT_N];
    for (int i = 0; i < WPT_M * WPT_N; i++)
        acc[i] = 0.0f;
    const int tm = tid % THREADS_M, tn = tid / THREADS_M;
    const int k_tiles = r_end > r_begin ? (r_end - r_begin + TILE_K - 1) / TILE_K : 0;
    if (k_tiles > 0)
        LOAD_AB();
    for (int t = 0; t < k_tiles; t++) {
        __local float *as = (__local float *)As[t & 1], *bs = (__local float *)Bs[t & 1];
        for (int i = 0; i < R_NM; i++)
            as[rk * LDA + rx + i * R_TX] = TF32_STAGE(ra[i]);
        for (int i = 0; i < R_NN; i++)
            if (R_TX * R_NN == TILE_N || rx + i * R_TX < TILE_N)
                bs[rk * LDB + rx + i * R_TX] = TF32_STAGE(rb[i]);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t + 1 < k_tiles)
            LOAD_AB();
        gemm_micro(As[t & 1], Bs[t & 1], tm, tn, acc GEMM_XCHG_ARG);
    }
#undef LOAD_AB
    gemm_store(acc, tm, tn, m0, n0, g, M, N, 1, M, out, out_off + z * out_zstride, 0, M, 0, 1, x, 0, x, 0, x, 0, 0,
               0, vec_out);
}
