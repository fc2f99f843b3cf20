/*
 * test_half.c -- IEEE half on the host (teeny_half_to_float,
 * teeny_float_to_half, teeny_round_half: src/core/half.c), on the device
 * (TEENY_ACT_ROUND_HALF, the rounding ONNX Cast to float16 runs:
 * cl/common.cl), and in '<f2' .npy files (teeny_npy_read / _load /
 * _write). Every rounding is compared bit for bit with the float64
 * reference (ref_round_half) over a sweep that holds every half, every
 * midpoint between neighbouring halves (the ties, which go to even) and
 * the fp32 values one ulp either side of them, the subnormal range, the
 * overflow boundary (65504, 65519.99, 65520), inf, NaN, fp32 subnormals
 * and seeded random fp32 bit patterns.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ref/elementwise_ref.h"

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* A half's value from its fields, in float64: independent of half.c. */
static double ref_half_value(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v = exp == 0x1f ? (man ? NAN : INFINITY) : exp ? ldexp(1024 + man, exp - 25) : ldexp(man, -24);
    return sign ? -v : v;
}

/* The sweep: n values into x (room for 65536 * 4 + 4096 + 64). */
static size_t sweep(float *x)
{
    size_t n = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        double v = ref_half_value((uint16_t)h);
        x[n++] = (float)v;
        if (!isfinite(v) || (h & 0x7fffu) == 0x7bffu) /* inf, NaN; the largest finite: overflow cases below */
            continue;
        double next = ref_half_value((uint16_t)(h + 1)), mid = (v + next) / 2; /* exact in fp32: 12 bits */
        x[n++] = (float)mid;
        x[n++] = nextafterf((float)mid, 0.0f);
        x[n++] = nextafterf((float)mid, (float)(2 * mid));
    }
    static const float edges[] = {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, 3.4e38f, 0x1p-25f, 0x1.000002p-25f,
                                  0x1p-26f, 0x1.8p-25f, 0x1p-24f, 0x1.8p-24f, 0x1.4p-24f, 0x1.ffcp-15f, 0x1.ffep-15f,
                                  0x1p-14f, 0x1p-149f, 0x1p-127f, 0x1.fffffcp-127f, 0x1p-126f, 0.0f};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
        x[n++] = edges[i];
        x[n++] = -edges[i];
    }
    x[n++] = float_of(0x7fc00000u);  /* quiet NaN */
    x[n++] = float_of(0xff812345u);  /* a signalling NaN with a payload, negative */
    th_rng r = th_rng_make(4646);
    for (int i = 0; i < 4096; i++)
        x[n++] = float_of((uint32_t)th_next(&r));
    return n;
}

/* want: the reference's bits (NaN: a quiet NaN of x's sign with x's top
 * 10 payload bits, as half.c keeps it). */
static uint32_t want_bits(float x)
{
    uint32_t u = bits_of(x);
    if (isnan(x))
        return (u & 0x80000000u) | 0x7fc00000u | (u & 0x7fe000u);
    return bits_of((float)ref_round_half(x));
}

START_TEST(test_half_host)
{
    /* every half to float, exactly, and back to the same bits (NaN: quiet, payload kept) */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        uint16_t in = (uint16_t)h, back;
        float f;
        teeny_half_to_float(&in, &f, 1);
        double want = ref_half_value(in);
        ck_assert_msg(isnan(want) ? isnan(f) : (f == want && !signbit(f) == !signbit(want)), "half 0x%04x: %a, want %a",
                      h, (double)f, want);
        teeny_float_to_half(&f, &back, 1);
        ck_assert_msg(back == (isnan(want) ? (in | 0x0200u) : in), "half 0x%04x came back 0x%04x", h, back);
    }
    float *x = th_malloc((65536 * 4 + 4096 + 64) * sizeof *x);
    size_t n = sweep(x);
    for (size_t i = 0; i < n; i++) {
        float got = teeny_round_half(x[i]);
        ck_assert_msg(bits_of(got) == want_bits(x[i]), "teeny_round_half(%a) = %a (0x%08x), want 0x%08x", (double)x[i],
                      (double)got, bits_of(got), want_bits(x[i]));
    }
    /* the ties go to even: 1 + 2^-11 down to 1, 1 + 3 2^-11 up to 1 + 2^-9; 2^-25 to 0, 3 2^-25 to 2^-23 */
    ck_assert(teeny_round_half(1.0f + 0x1p-11f) == 1.0f && teeny_round_half(1.0f + 0x3p-11f) == 1.0f + 0x1p-9f);
    ck_assert(teeny_round_half(0x1p-25f) == 0.0f && teeny_round_half(0x3p-25f) == 0x1p-23f);
    ck_assert(teeny_round_half(65519.99f) == 65504.0f && isinf(teeny_round_half(65520.0f)));
    ck_assert(signbit(teeny_round_half(-0x1p-30f)) && teeny_round_half(-0x1p-30f) == 0.0f);
    /* NULL arrays: no op */
    teeny_half_to_float(NULL, x, 1);
    teeny_float_to_half(x, NULL, 1);
    free(x);
}
END_TEST

/* The device's rounding against the reference, bit for bit, on the
 * portable kernel and the CPU variant (float16 runs and the scalar tail),
 * the output NaN-poisoned first; its backward is dy itself. */
START_TEST(test_half_round_device)
{
    teeny_ctx *ctx = th_ctx();
    float *x = th_malloc((65536 * 4 + 4096 + 64) * sizeof *x);
    size_t n = sweep(x);
    int64_t shape[1] = {(int64_t)n};
    teeny_tensor *tx = th_tensor_from(ctx, 1, shape, x), *ty = th_tensor(ctx, 1, shape);
    th_cpu_kernels(_i);
    th_poison(ty);
    TH_OK(ctx, teeny_activation_forward(ctx, TEENY_ACT_ROUND_HALF, tx, ty));
    float *y = th_read(ty);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(bits_of(y[i]) == want_bits(x[i]), "round half, cpu %d: element %zu of %zu: %a gave %a (0x%08x), "
                      "want 0x%08x", _i, i, n, (double)x[i], (double)y[i], bits_of(y[i]), want_bits(x[i]));
    free(y);
    /* backward: straight through, dx = dy whatever x is (inf, NaN included) */
    float *dy = th_malloc(n * sizeof *dy);
    th_rng r = th_rng_make(4647);
    th_fill_normal(&r, dy, n, 0, 1);
    teeny_tensor *tdy = th_tensor_from(ctx, 1, shape, dy);
    th_poison(ty);
    TH_OK(ctx, teeny_activation_backward(ctx, TEENY_ACT_ROUND_HALF, tx, tdy, ty));
    y = th_read(ty);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(bits_of(y[i]) == bits_of(dy[i]), "round half backward, cpu %d: element %zu", _i, i);
    free(y);
    free(dy);
    free(x);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(ty);
    teeny_tensor_destroy(tdy);
    th_cpu_kernels(-1);
}
END_TEST

/* '<f2' files: written by teeny_npy_write, read back raw (teeny_npy_read)
 * and as an fp32 tensor (teeny_npy_load), every half pattern; a 0-d one;
 * the errors. */
START_TEST(test_half_npy)
{
    teeny_ctx *ctx = th_ctx();
    char path[256];
    const char *base = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/teeny-half-%ld.npy", base && *base ? base : "/tmp", (long)getpid());
    uint16_t *h = th_malloc(65536 * sizeof *h), *back = th_malloc(65536 * sizeof *back);
    for (uint32_t i = 0; i < 0x10000u; i++)
        h[i] = (uint16_t)(i * 40503u); /* every pattern once, shuffled */
    teeny_npy_info info = {TEENY_NPY_F16, 3, {16, 64, 64}, 0, 0}, got;
    TH_OK(ctx, teeny_npy_write(ctx, path, &info, h));
    TH_OK(ctx, teeny_npy_read(ctx, path, &got, back, 65536 * sizeof *back));
    ck_assert_int_eq(got.dtype, TEENY_NPY_F16);
    ck_assert(got.ndim == 3 && got.shape[0] == 16 && got.shape[2] == 64 && got.numel == 65536 && got.bytes == 131072);
    ck_assert(!memcmp(h, back, 65536 * sizeof *h));
    teeny_tensor *t = NULL;
    TH_OK(ctx, teeny_npy_load(ctx, path, &t));
    ck_assert_int_eq(teeny_tensor_ndim(t), 3);
    float *v = th_read(t);
    for (int i = 0; i < 65536; i++) {
        double want = ref_half_value(h[i]);
        ck_assert_msg(isnan(want) ? isnan(v[i]) : (v[i] == want && !signbit(v[i]) == !signbit(want)),
                      "element %d (0x%04x): %a, want %a", i, h[i], (double)v[i], want);
    }
    free(v);
    teeny_tensor_destroy(t);
    /* a 0-d array */
    teeny_npy_info scalar = {TEENY_NPY_F16, 0, {0}, 0, 0};
    uint16_t one = 0x3c00u;
    TH_OK(ctx, teeny_npy_write(ctx, path, &scalar, &one));
    TH_OK(ctx, teeny_npy_read(ctx, path, &got, back, 2));
    ck_assert(got.ndim == 0 && got.numel == 1 && got.bytes == 2 && back[0] == 0x3c00u);
    /* errors */
    teeny_npy_info bad = info;
    bad.dtype = (teeny_npy_dtype)5;
    ck_assert_int_eq(teeny_npy_write(ctx, path, &bad, h), TEENY_ERR_ARG);
    ck_assert_msg(strstr(teeny_last_error(ctx), "dtype 5"), "%s", teeny_last_error(ctx));
    bad = info;
    bad.shape[1] = 0;
    ck_assert_int_eq(teeny_npy_write(ctx, path, &bad, h), TEENY_ERR_ARG);
    ck_assert_msg(strstr(teeny_last_error(ctx), "dimension 1 is 0"), "%s", teeny_last_error(ctx));
    bad = info;
    bad.ndim = TEENY_NPY_MAX_DIMS + 1;
    ck_assert_int_eq(teeny_npy_write(ctx, path, &bad, h), TEENY_ERR_ARG);
    ck_assert_int_eq(teeny_npy_write(ctx, path, &info, NULL), TEENY_ERR_ARG);
    ck_assert_int_eq(teeny_npy_write(NULL, path, &info, h), TEENY_ERR_ARG);
    /* the file of the last good write is still there, untouched */
    TH_OK(ctx, teeny_npy_read(ctx, path, &got, NULL, 0));
    ck_assert(got.dtype == TEENY_NPY_F16 && got.ndim == 0);
    unlink(path);
    free(h);
    free(back);
}
END_TEST

Suite *suite_half(void)
{
    Suite *s = suite_create("half");
    TCase *host = tcase_create("host"), *dev = tcase_create("forward"), *io = tcase_create("npy");
    tcase_add_test(host, test_half_host);
    tcase_add_loop_test(dev, test_half_round_device, 0, 2);
    tcase_add_test(io, test_half_npy);
    suite_add_tcase(s, host);
    suite_add_tcase(s, dev);
    suite_add_tcase(s, io);
    return s;
}
