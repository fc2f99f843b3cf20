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

TEENY_INLINE float teeny_sigmoid(float x)
{
    return 1.0f / (1.0f + exp(-x));
}

TEENY_INLINE float teeny_act(int act, float x)
{
    if (act == TEENY_ACT_RELU)
        return fmax(x, 0.0f);
    if (act == TEENY_ACT_SILU)
        return x * teeny_sigmoid(x);
    return x;
}

/* d act(x) / dx */
TEENY_INLINE float teeny_act_grad(int act, float x)
{
    if (act == TEENY_ACT_RELU)
        return x > 0.0f ? 1.0f : 0.0f;
    if (act == TEENY_ACT_SILU) {
        float s = teeny_sigmoid(x);
        return s * (1.0f + x * (1.0f - s));
    }
    return 1.0f;
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

#endif
