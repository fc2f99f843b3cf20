/*
 * common.cl -- device helpers shared by every program; prepended to each
 * family's source before it is built. OpenCL C 1.2.
 */
#ifndef TEENY_COMMON_CL
#define TEENY_COMMON_CL

/* Compiler hints outside OpenCL C 1.2, used only where the host says the
 * compiler takes them (src/core/device.c: TEENY_HINTS for the clang-based and
 * NVIDIA compilers): a conformant compiler that knows neither still builds
 * every kernel, just without the hints. */
#if defined(TEENY_HINTS) && TEENY_HINTS
#define TEENY_UNROLL _Pragma("unroll")
#define TEENY_INLINE static inline __attribute__((always_inline))
#else
#define TEENY_UNROLL
#define TEENY_INLINE static inline
#endif

/* a * b + c, the one spelling of a multiply-add in every kernel: fma()
 * where the device says it does fma in hardware (TEENY_FMA, from
 * CL_DEVICE_SINGLE_FP_CONFIG: PoCL on x86, NVIDIA), else mad(). A device
 * without hardware fma would emulate fma() in software; PoCL 3.1 compiles
 * mad() as a multiply and an add, half the rate of its AVX-512 fma (and
 * rounded twice: fma() and mad() give different bits there). */
#if defined(TEENY_FMA) && TEENY_FMA
#define TEENY_MAD(a, b, c) fma(a, b, c)
#else
#define TEENY_MAD(a, b, c) mad(a, b, c)
#endif

#define TEENY_ACT_NONE 0
#define TEENY_ACT_RELU 1
#define TEENY_ACT_SILU 2
#define TEENY_ACT_SIGMOID 3
#define TEENY_ACT_TANH 4
#define TEENY_ACT_HARDSIGMOID 5 /* clamp(alpha x + beta, 0, 1) */
#define TEENY_ACT_HARDSWISH 6   /* x clamp(x / 6 + 1/2, 0, 1) */
#define TEENY_ACT_LEAKY_RELU 7  /* x >= 0 ? x : alpha x */
#define TEENY_ACT_GELU 8        /* x/2 (1 + erf(x / sqrt 2)) */
#define TEENY_ACT_GELU_TANH 9   /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
#define TEENY_ACT_CLIP 10       /* min(max(x, alpha), beta) */
#define TEENY_ACT_MISH 11       /* x tanh(softplus(x)) */
#define TEENY_ACT_ERF 12
#define TEENY_ACT_ROUND_HALF 13 /* to the nearest IEEE half, kept in fp32 (teeny_round_half below) */

TEENY_INLINE float teeny_sigmoid(float x)
{
    return 1.0f / (1.0f + exp(-x));
}

/* x rounded to the nearest IEEE half, ties to even, kept in fp32: what
 * vstore_half then vload_half give, in integer bit operations instead (exact
 * and the same on every device, whatever it does with fp32 subnormals or
 * its conversion builtins). T float or float16, U uint or uint16 (?: and
 * select take vector conditions per component). The host's twin is
 * src/core/half.c (teeny_round_half), bit for bit:
 *   |x| >= 65520 (the tie above 65504 goes to even, inf) and inf: +-inf;
 *   NaN: a quiet NaN, sign and the payload's top 10 bits kept;
 *   |x| >= 2^-14 (a normal half): 13 low mantissa bits rounded off;
 *   2^-25 < |x| < 2^-14: a multiple of 2^-24 (a subnormal half), the
 *   mantissa shifted by 126 - exponent (14..24), the remainder rounded;
 *   |x| <= 2^-25 (the tie at 2^-25 to even, 0): a signed 0. */
#define TEENY_ROUND_HALF_STMTS(T, U, x)                                                                            \
    U a_ = as_##U(x) & 0x7fffffffu, s_ = as_##U(x) & 0x80000000u;                                                  \
    U bits_ = s_ | ((a_ + 0x0fffu + ((a_ >> 13) & 1u)) & 0xffffe000u);                                           \
    U m_ = (a_ & 0x7fffffu) | 0x800000u, sh_ = clamp(126u - min(a_ >> 23, 126u), 14u, 24u);                      \
    U q_ = m_ >> sh_, rem_ = m_ & (((U)(1u) << sh_) - 1u), hf_ = (U)(1u) << (sh_ - 1u);                            \
    q_ = select(q_, q_ + 1u, (rem_ > hf_) | ((rem_ == hf_) & ((q_ & 1u) == 1u)));                                  \
    bits_ = select(bits_, s_ | as_##U(convert_##T(q_) * 0x1p-24f), a_ < 0x38800000u);                              \
    bits_ = select(bits_, s_, a_ < 0x33000000u);                                                                   \
    bits_ = select(bits_, s_ | 0x7f800000u, a_ >= 0x477ff000u);                                                    \
    bits_ = select(bits_, s_ | 0x7fc00000u | (a_ & 0x7fe000u), a_ > 0x7f800000u);                                  \
    return as_##T(bits_)

TEENY_INLINE float teeny_round_half_float(float x)
{
    TEENY_ROUND_HALF_STMTS(float, uint, x);
}

TEENY_INLINE float16 teeny_round_half_float16(float16 x)
{
    TEENY_ROUND_HALF_STMTS(float16, uint16, x);
}

/* The activations and their derivatives as statements over x of type T,
 * float or floatN alike (the builtins are overloaded and ?: with a vector
 * condition selects per component), so the scalar kernels, the CPU
 * variants' float16 runs and the convolution epilogue share one formula.
 * alpha, beta: HARDSIGMOID's slope and offset, LEAKY_RELU's slope, CLIP's
 * bounds (ONNX's defaults in teeny_act below). */
#define TEENY_ACT_STMTS(T, act, x, alpha, beta)                                                                     \
    if (act == TEENY_ACT_RELU)                                                                                     \
        return fmax(x, 0.0f);                                                                                      \
    if (act == TEENY_ACT_SILU)                                                                                     \
        return x * (1.0f / (1.0f + exp(-x)));                                                                      \
    if (act == TEENY_ACT_SIGMOID)                                                                                  \
        return 1.0f / (1.0f + exp(-x));                                                                            \
    if (act == TEENY_ACT_TANH)                                                                                     \
        return tanh(x);                                                                                            \
    if (act == TEENY_ACT_HARDSIGMOID)                                                                              \
        return fmin(fmax(alpha * x + beta, 0.0f), 1.0f);                                                           \
    if (act == TEENY_ACT_HARDSWISH)                                                                                \
        return x * fmin(fmax(x * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);                                               \
    if (act == TEENY_ACT_LEAKY_RELU)                                                                               \
        return x >= 0.0f ? x : alpha * x;                                                                          \
    if (act == TEENY_ACT_GELU)                                                                                     \
        return 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));                                                  \
    if (act == TEENY_ACT_GELU_TANH)                                                                                \
        return 0.5f * x * (1.0f + tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));                       \
    if (act == TEENY_ACT_CLIP)                                                                                     \
        return fmin(fmax(x, alpha), beta);                                                                         \
    if (act == TEENY_ACT_MISH)                                                                                     \
        return x * tanh(x > 20.0f ? x : log1p(exp(x)));                                                            \
    if (act == TEENY_ACT_ERF)                                                                                      \
        return erf(x);                                                                                             \
    if (act == TEENY_ACT_ROUND_HALF)                                                                               \
        return teeny_round_half_##T(x);                                                                            \
    return x

#define TEENY_ACT_GRAD_STMTS(T, act, x, alpha, beta)                                                                \
    if (act == TEENY_ACT_RELU)                                                                                     \
        return x > 0.0f ? (T)(1.0f) : (T)(0.0f);                                                                   \
    if (act == TEENY_ACT_SILU || act == TEENY_ACT_SIGMOID) {                                                       \
        T s_ = 1.0f / (1.0f + exp(-x));                                                                            \
        return act == TEENY_ACT_SIGMOID ? s_ * (1.0f - s_) : s_ * (1.0f + x * (1.0f - s_));                        \
    }                                                                                                              \
    if (act == TEENY_ACT_TANH) {                                                                                   \
        T t_ = tanh(x);                                                                                            \
        return 1.0f - t_ * t_;                                                                                     \
    }                                                                                                              \
    if (act == TEENY_ACT_HARDSIGMOID) {                                                                            \
        T u_ = alpha * x + beta;                                                                                   \
        return u_ > 0.0f && u_ < 1.0f ? (T)(alpha) : (T)(0.0f);                                                    \
    }                                                                                                              \
    if (act == TEENY_ACT_HARDSWISH)                                                                                \
        return x < -3.0f ? (T)(0.0f) : x > 3.0f ? (T)(1.0f) : x * (1.0f / 3.0f) + 0.5f;                            \
    if (act == TEENY_ACT_LEAKY_RELU)                                                                               \
        return x > 0.0f ? (T)(1.0f) : (T)(alpha);                                                                  \
    if (act == TEENY_ACT_GELU)                                                                                     \
        return 0.5f * (1.0f + erf(x * 0.70710678118654752f)) + x * 0.39894228040143268f * exp(-0.5f * x * x);     \
    if (act == TEENY_ACT_GELU_TANH) {                                                                              \
        T t_ = tanh(0.79788456080286536f * (x + 0.044715f * x * x * x));                                           \
        return 0.5f * (1.0f + t_) +                                                                                \
               0.5f * x * (1.0f - t_ * t_) * 0.79788456080286536f * (1.0f + 3.0f * 0.044715f * x * x);             \
    }                                                                                                              \
    if (act == TEENY_ACT_CLIP)                                                                                     \
        return x >= alpha && x <= beta ? (T)(1.0f) : (T)(0.0f);                                                    \
    if (act == TEENY_ACT_MISH) {                                                                                   \
        T t_ = tanh(x > 20.0f ? x : log1p(exp(x)));                                                                \
        return t_ + x * (1.0f - t_ * t_) * (1.0f / (1.0f + exp(-x)));                                              \
    }                                                                                                              \
    if (act == TEENY_ACT_ERF)                                                                                      \
        return 1.12837916709551257f * exp(-x * x);                                                                 \
    return (T)(1.0f)

/* act(x) with its parameters, and d act(x) / dx. */
TEENY_INLINE float teeny_act_p(int act, float x, float alpha, float beta)
{
    TEENY_ACT_STMTS(float, act, x, alpha, beta);
}

TEENY_INLINE float teeny_act_grad_p(int act, float x, float alpha, float beta)
{
    TEENY_ACT_GRAD_STMTS(float, act, x, alpha, beta);
}

/* ---- the convolutions' fused epilogue (cl/conv2d.cl, cl/winograd.cl) ---- */

/* The epilogues' activations: none, ReLU and SiLU; in the conv2d
 * program's builds for a CPU tuning (CPU_RM defined: the conv tuning's
 * cpu_rows > 0) also HardSwish and ReLU6 (CONV_ACT_RELU6: Clip to [0, 6],
 * MobileNet's; its host twin is TEENY__CONV_ACT_RELU6; route.c's
 * epilogue_act asks for them on those tunings only, and Winograd's
 * program, built without CPU_RM, declines them). Each computes what
 * teeny_act's formula does (TEENY_ACT_STMTS). The others run as an
 * element-wise pass after the convolution (route.c). Inlined into every
 * store of an item's tile, teeny_act's twelve formulas took the H200's
 * GEMMs from 0.10 to 0.19 ms (a 1x1 256->64 convolution at 56^2); the two
 * more, 5-11% on the H100's (2026-12-08): hence only where the CPU
 * kernels run. */
#define CONV_ACT_RELU6 64
#ifdef CPU_RM
#define CONV_ACT_MORE(act, x)                                                                                      \
    (act == CONV_ACT_RELU6        ? fmin(fmax(x, 0.0f), 6.0f)                                                       \
     : act == TEENY_ACT_HARDSWISH ? x * fmin(fmax(x * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f)                           \
                                  : x)
#else
#define CONV_ACT_MORE(act, x) (x)
#endif

TEENY_INLINE float conv_act(int act, float x)
{
    return act == TEENY_ACT_RELU ? fmax(x, 0.0f) : act == TEENY_ACT_SILU ? x * teeny_sigmoid(x) : CONV_ACT_MORE(act, x);
}

/* The same over 16 and 8 values (the CPU kernels' stores): the vector exp, where
 * a loop of scalar ones was ~40% of a depthwise convolution with SiLU on
 * PoCL 3.1 (EfficientNet-B0, 2026-12-07). */
TEENY_INLINE float16 conv_act16(int act, float16 x)
{
    return act == TEENY_ACT_RELU   ? fmax(x, 0.0f)
           : act == TEENY_ACT_SILU ? x * (1.0f / (1.0f + exp(-x)))
                                   : CONV_ACT_MORE(act, x);
}

/* The first min(n, 8) values of v to p[0..): a vector store when all 8
 * fit (the CPU kernels' rows of 8 outputs and their tails). */
TEENY_INLINE void teeny_vstore8_part(float8 v, __global float *p, int n)
{
    if (n >= 8) {
        vstore8(v, 0, p);
        return;
    }
    float t[8];
    vstore8(v, 0, t);
    for (int j = 0; j < n; j++)
        p[j] = t[j];
}

/* The private band of the CPU window kernels (dwconv_fwd_cpu_band,
 * pool_max_forward_cpu): rows input rows from row0 of plane [H, W], each
 * of pitch columns, column c holding input column c - pw (pw >= 0), pad
 * where the row or the column lies outside the plane; then TEENY_BAND_SLACK
 * pads after the last row, which the last row's vector lanes past the
 * output read (8*stride - 1 floats at most). rows * pitch is at most
 * TEENY_BAND_FLOATS (the host's teeny__band_rows_max, src/program/probe.c). */
#define TEENY_BAND_FLOATS 2048
#define TEENY_BAND_SLACK 16

TEENY_INLINE void teeny_band_fill(float *band, __global const float *plane, int H, int W, int row0, int rows,
                                  int pitch, int pw, float pad)
{
    const int c_lo = min(pw, pitch), c_hi = max(c_lo, min(pitch, pw + W));
    for (int c = 0; c < TEENY_BAND_SLACK; c++)
        band[rows * pitch + c] = pad;
    for (int t = 0; t < rows; t++) {
        const int ih = row0 + t;
        float *br = band + t * pitch;
        if ((uint)ih >= (uint)H) {
            for (int c = 0; c < pitch; c++)
                br[c] = pad;
            continue;
        }
        __global const float *xr = plane + ih * W - pw;
        for (int c = 0; c < c_lo; c++)
            br[c] = pad;
        for (int c = c_lo; c < c_hi; c++)
            br[c] = xr[c];
        for (int c = c_hi; c < pitch; c++)
            br[c] = pad;
    }
}

TEENY_INLINE float8 conv_act8(int act, float8 x)
{
    return act == TEENY_ACT_RELU   ? fmax(x, 0.0f)
           : act == TEENY_ACT_SILU ? x * (1.0f / (1.0f + exp(-x)))
                                   : CONV_ACT_MORE(act, x);
}

#define EPI_BIAS 1
#define EPI_SCALE 2
#define EPI_SHIFT 4

/* The fused epilogue y = act(v * sc + sh) of output channel c, its two
 * factors (sc, sh): sc = scale[c], 1 without EPI_SCALE; sh = shift[c] +
 * bias[c], each 0 without its flag. Every kernel that stores y takes them
 * from here. */
TEENY_INLINE float2 conv_epilogue(int epi, int c, __global const float *bias, int bias_off,
                                  __global const float *scale, int scale_off, __global const float *shift,
                                  int shift_off)
{
    float sc = epi & EPI_SCALE ? scale[scale_off + c] : 1.0f;
    float sh = epi & EPI_SHIFT ? shift[shift_off + c] : 0.0f;
    if (epi & EPI_BIAS)
        sh += bias[bias_off + c];
    return (float2)(sc, sh);
}

/* One axis of phase r of a strided convolution's input gradient (cl/conv2d.cl's
 * merged GEMM launches, cl/conv2d_dx.cl): (k0, count, c), (0, 0, 0) where no
 * tap reaches it (as conv2d_exec.c's phase_taps). */
TEENY_INLINE int3 conv_phase_axis(int r, int s, int pad, int d, int K, int step)
{
    for (int k = 0; k < K && k < step; k++) {
        int t = r + pad - k * d;
        if (((t % s) + s) % s == 0)
            return (int3)(k, (K - k + step - 1) / step, t / s);
    }
    return (int3)(0, 0, 0);
}

/* Work-group tree sum of rows arrays laid out at stride wg in red (row t
 * is red[t*wg .. t*wg + wg)), each into its slot 0. wg is the work-group
 * size, a power of two; every item of the group calls it after writing
 * its own slots. Slot i adds slot i + span for span = wg/2, wg/4, ..., 1:
 * a fixed order, so the same inputs give bit-identical sums. Ends with a
 * barrier, so every item may read the results. */
TEENY_INLINE void teeny_group_sum_rows(__local float *red, int lid, int wg, int rows)
{
    for (int span = wg / 2; span > 0; span >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < span)
            for (int t = 0; t < rows; t++)
                red[t * wg + lid] += red[t * wg + lid + span];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* The same for one array: red[0] = sum of red[0 .. wg). */
TEENY_INLINE void teeny_group_sum(__local float *red, int lid, int wg)
{
    teeny_group_sum_rows(red, lid, wg, 1);
}

/* a[0] + a[stride] + ... + a[(n - 1)*stride], added in that order from
 * 0: the partial sums' second pass (pool_gap_parts_cpu, lin_colsum_final),
 * so the same partials give the same bits. */
TEENY_INLINE float teeny_sum_strided(__global const float *a, int n, int stride)
{
    float s = 0.0f;
    for (int p = 0; p < n; p++)
        s += a[p * stride];
    return s;
}

#ifdef TEENY_TF32
/* tf32 tensor cores (NVIDIA inline PTX; a program is built with
 * -DTEENY_TF32=1 only where a build-and-run probe of these instructions
 * succeeded, src/program/probe.c, whose kernel runs these same helpers).
 * The GEMMs that use them (conv2d.cl, linear.cl, attention.cl's _tc
 * kernels) round each operand to tf32 (10-bit mantissa, round to
 * nearest, ties away: cvt.rna) as they stage it into local memory and
 * feed one warp's mma.sync.m16n8k8 from there; the fragments (PTX ISA,
 * "Matrix Fragments for mma.m16n8k8" with .tf32) hold, for lane = 4 r + c
 * of the warp: A rows r, r + 8 at k = c, c + 4; B column r at k = c,
 * c + 4; C rows r, r + 8 at columns 2c, 2c + 1. Work-items 32 w .. 32 w +
 * 31 of a work-group (in its linear order) form warp w. */
#ifdef TEENY_TF32_EMULATE
/* Test builds only (linear.c's teeny__linear_debug_tf32_emulate, never a
 * device's choice): the rounding and a warp's mma in portable OpenCL C,
 * so that a kernel's fragment logic runs, and is checked, on any device.
 * The 32 lanes of a warp (linear local ids 32 w .. 32 w + 31) exchange
 * their fragments through xchg (6 uints per work-item of the work-group)
 * between barriers: every item of the work-group calls it alike. */
TEENY_INLINE float tf32_round(float x)
{
    return as_float((as_uint(x) + 0x1000u) & 0xffffe000u); /* nearest, ties away (finite x) */
}

TEENY_INLINE void tf32_mma_xchg(__local uint *xchg, float *c, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1)
{
    const int lid = get_local_id(1) * get_local_size(0) + get_local_id(0), lane = lid & 31;
    const int r = lane >> 2, q = lane & 3;
    __local uint *w = xchg + (lid - lane) * 6;
    barrier(CLK_LOCAL_MEM_FENCE); /* the last call's reads are done */
    w[lane * 6] = a0;
    w[lane * 6 + 1] = a1;
    w[lane * 6 + 2] = a2;
    w[lane * 6 + 3] = a3;
    w[lane * 6 + 4] = b0;
    w[lane * 6 + 5] = b1;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int f = 0; f < 4; f++) { /* C (r + 8 h, 2 q + e), f = 2 h + e */
        int h = f >> 1, n = 2 * q + (f & 1);
        float s = c[f];
        /* A (r + 8 h, k) in lane 4 r + k % 4; B (k, n) in lane 4 n + k % 4; of each operand its top 19
         * bits, the tf32 the hardware reads (a tensor core ignores the low 13) */
        for (int k = 0; k < 8; k++)
            s += as_float(w[(4 * r + (k & 3)) * 6 + h + 2 * (k >> 2)] & 0xffffe000u) *
                 as_float(w[(4 * n + (k & 3)) * 6 + 4 + (k >> 2)] & 0xffffe000u);
        c[f] = s;
    }
}
#else
TEENY_INLINE float tf32_round(float x)
{
    uint r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return as_float(r);
}

/* c (a C fragment) += A B, in place; products accumulate in fp32 in the
 * hardware's fixed order. */
TEENY_INLINE void tf32_mma(float *c, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* x of lane ^ mask of the warp (shfl.sync.bfly; the whole warp calls it). */
TEENY_INLINE float tf32_shfl_xor(float x, int mask)
{
    uint r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(x)), "r"(mask));
    return as_float(r);
}
#endif /* TEENY_TF32_EMULATE */
#endif /* TEENY_TF32 */

#endif
