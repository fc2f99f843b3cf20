/*
 * half.c -- IEEE 754 binary16 (half) <-> fp32 on the host: the ONNX
 * importer's float16 initializers and Cast folding, the '<f2' .npy files
 * (src/io/npy.c) and teeny-run's float16 outputs. Half to fp32 is exact
 * (every half, subnormals included, is an fp32); fp32 to half rounds to
 * nearest, ties to even (as ONNX Runtime, NumPy and the OpenCL kernel
 * teeny_round_half in cl/common.cl do), overflows to +-inf past 65504
 * (from 65520 up: the tie at 65520 rounds to even, which is inf), and
 * keeps NaN a quiet NaN with the sign and the payload's top bits. Integer
 * bit operations only: exact and the same on every host.
 */
#include "../internal.h"

#include <string.h>

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float f32_from(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

float teeny__half_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) /* inf, NaN (payload kept in the top mantissa bits) */
        return f32_from(sign | 0x7f800000u | man << 13);
    if (exp == 0) {
        if (!man)
            return f32_from(sign);
        /* a subnormal: man x 2^-24, normalized (its leading bit becomes the implicit one) */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400u));
        return f32_from(sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ffu) << 13);
    }
    return f32_from(sign | (exp + 127 - 15) << 23 | man << 13);
}

uint16_t teeny__f32_to_half(float x)
{
    uint32_t u = f32_bits(x), a = u & 0x7fffffffu;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (a > 0x7f800000u) /* NaN: quiet, the payload's top bits kept */
        return (uint16_t)(sign | 0x7e00u | (a >> 13 & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 (and inf): rounds past 65504 */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* a normal half (>= 2^-14): 10 of the 23 mantissa bits, to nearest even */
        uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | (((r >> 13) - ((127u - 15u) << 10)) & 0x7fffu));
    }
    uint32_t e = a >> 23; /* below 2^-14: a multiple of 2^-24 */
    if (e < 102)           /* below 2^-25 (2^-25 itself: a tie, to even 0 below) */
        return sign;
    uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e; /* |x| = m 2^(e-150) = m 2^-shift 2^-24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    q += rem > half || (rem == half && (q & 1u));
    return (uint16_t)(sign | q); /* q == 1024 is 2^-14, the smallest normal: its bits */
}

void teeny_half_to_float(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; src && dst && i < n; i++)
        dst[i] = teeny__half_to_f32(src[i]);
}

void teeny_float_to_half(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; src && dst && i < n; i++)
        dst[i] = teeny__f32_to_half(src[i]);
}

float teeny_round_half(float x)
{
    return teeny__half_to_f32(teeny__f32_to_half(x));
}
