/*
 * test_onnx_half.c -- float16 models through the importer and teeny-run's
 * run path (tools/onnx_run.c): float16 initializers (raw_data and
 * int32_data), Constant values, graph inputs and outputs, Cast and
 * CastLike to and from float16 of run-time values and of constants.
 *
 * The models of tests/onnx/make_models.py fp16() are onnxconverter-common's
 * conversions of one conv net: fp16_io (float16 everywhere, its input and
 * outputs too) and fp16_keepio (float input and outputs, Casts to float16
 * and back). teenycl holds every value in fp32: the float16 weights and
 * input exactly, the arithmetic fp32, a float16 output rounded to half at
 * the end (what teeny-run writes as '<f2'). Two references:
 *   .ref*.npy  ONNX Runtime's fp32 run of the same half weights and input:
 *              fp16_io's outputs must lie within one half-ulp of it (our
 *              final rounding; the two fp32 computations differ by
 *              rounding noise, below 1e-5 of the output's largest value),
 *              fp16_keepio's (not rounded: the last Cast to float is an
 *              identity) within nRMS 1e-5 -- an input Cast to float16 that
 *              did not round would be ~1e-4 off;
 *   .out*.npy  ONNX Runtime's own fp16 run, fp16 arithmetic in between:
 *              within 2 half-ulps of the element (its rounding and ours)
 *              plus 1 half-ulp of the output's largest value (the absolute
 *              error fp16 intermediates leave where an element arises by
 *              cancellation; make_models.py asserts ONNX Runtime stays
 *              within 1 + 1 of the fp32 reference).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "onnx_craft.h"
#include "teenycl_onnx.h"
#include "../tools/onnx_run.h"

#define DIR "tests/onnx"

/* An .npy file as floats (a '<f2' one converted exactly; caller frees); *info its header. */
static float *npy_floats(teeny_ctx *ctx, const char *path, teeny_npy_info *info)
{
    TH_OK(ctx, teeny_npy_read(ctx, path, info, NULL, 0));
    ck_assert_msg(info->dtype == TEENY_NPY_F32 || info->dtype == TEENY_NPY_F16, "%s: not float", path);
    void *raw = th_malloc(info->bytes + 1);
    float *v = th_malloc((size_t)info->numel * sizeof *v + 1);
    TH_OK(ctx, teeny_npy_read(ctx, path, info, raw, info->bytes));
    if (info->dtype == TEENY_NPY_F16)
        teeny_half_to_float(raw, v, (size_t)info->numel);
    else
        memcpy(v, raw, info->bytes);
    free(raw);
    return v;
}

/* The spacing of halves at |v| (2^-24 among the subnormals). */
static double half_ulp(double v)
{
    int e;
    frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
    return ldexp(1.0, (e - 1 < -14 ? -14 : e - 1) - 10);
}

static void check_fp16_model(const char *name, int io_half)
{
    teeny_ctx *ctx = th_ctx();
    char path[256];
    teeny_npy_info info;
    onnx_run_input in;
    onnx_run_result r;
    double ms;
    snprintf(path, sizeof path, DIR "/%s.in0.npy", name);
    float *x = npy_floats(ctx, path, &info);
    ck_assert_int_eq(info.dtype, io_half ? TEENY_NPY_F16 : TEENY_NPY_F32);
    in = (onnx_run_input){"x", TEENY_ONNX_FLOAT, info.ndim, {0}, x, 0, info.dtype == TEENY_NPY_F16};
    memcpy(in.shape, info.shape, sizeof(int64_t) * (size_t)info.ndim);
    snprintf(path, sizeof path, DIR "/%s.onnx", name);
    teeny_status st = onnx_run(ctx, path, 0, 1, &in, 1, &r, &ms);
    ck_assert_msg(st == TEENY_OK, "%s: %s: %s", name, teeny_status_name(st), onnx_run_error(ctx));
    ck_assert_int_eq(r.n, 2);
    for (int k = 0; k < r.n; k++) {
        teeny_npy_info oi, ri;
        snprintf(path, sizeof path, DIR "/%s.out%d.npy", name, k);
        float *ort = npy_floats(ctx, path, &oi);
        snprintf(path, sizeof path, DIR "/%s.ref%d.npy", name, k);
        float *ref = npy_floats(ctx, path, &ri);
        ck_assert_int_eq(oi.dtype, io_half ? TEENY_NPY_F16 : TEENY_NPY_F32); /* ONNX Runtime's output type */
        ck_assert_int_eq(r.declared[k], io_half ? TEENY_ONNX_FLOAT16 : TEENY_ONNX_FLOAT);
        int64_t n = ri.numel, got_n = 1;
        for (int d = 0; d < r.ndim[k]; d++)
            got_n *= r.shape[k][d];
        ck_assert_msg(got_n == n && oi.numel == n, "%s output %d: %lld values, want %lld", name, k, (long long)got_n,
                      (long long)n);
        double ref_max = 0, ort_max = 0;
        for (int64_t i = 0; i < n; i++) {
            ref_max = fmax(ref_max, fabs(ref[i]));
            ort_max = fmax(ort_max, fabs(ort[i]));
        }
        double *ref_d = th_dbl(ref, (size_t)n);
        if (!io_half)
            ck_assert_msg(th_nrms(r.data[k], ref_d, (size_t)n) <= 1e-5, "%s output %d: nrms %g against the fp32 "
                          "reference", name, k, th_nrms(r.data[k], ref_d, (size_t)n));
        for (int64_t i = 0; i < n; i++) {
            double got = r.data[k][i];
            ck_assert_msg(isfinite(got), "%s output %d[%lld] is %g", name, k, (long long)i, got);
            if (io_half) {
                ck_assert_msg(teeny_round_half((float)got) == (float)got, "%s output %d[%lld]: %.9g is no half", name,
                              k, (long long)i, got);
                ck_assert_msg(fabs(got - ref[i]) <= half_ulp(ref[i]) + 1e-5 * ref_max, "%s output %d[%lld]: %.9g, "
                              "the fp32 reference %.9g", name, k, (long long)i, got, (double)ref[i]);
            }
            double tol = 2 * half_ulp(ort[i]) + half_ulp(ort_max);
            ck_assert_msg(fabs(got - ort[i]) <= tol, "%s output %d[%lld]: %.9g, ONNX Runtime's fp16 %.9g (tolerance "
                          "%.3g)", name, k, (long long)i, got, (double)ort[i], tol);
        }
        free(ref_d);
        free(ort);
        free(ref);
    }
    onnx_run_result_free(&r);
    free(x);
}

START_TEST(test_onnx_half_models)
{
    check_fp16_model("fp16_io", 1);
    check_fp16_model("fp16_keepio", 0);
}
END_TEST

static const int64_t X2x4[2] = {2, 4}, N4[1] = {4};

/* y = Cast<float>(Cast<float16>(x * w_raw + w_i32)), z = x + Cast<float16>(c):
 * float16 initializers in both encodings, a Constant folded through Cast
 * to float16; x a float16 input given half values. */
static oc_model *craft_half(void)
{
    static const uint16_t w_raw[4] = {0x0001u, 0x83ffu, 0x7bffu, 0x3c01u}; /* 2^-24, -(2^-14 - 2^-24), 65504, 1+2^-10 */
    static const uint16_t w_i32[4] = {0x0400u, 0xc000u, 0x3555u, 0x0200u}; /* 2^-14, -2, 0.333, 2^-15 */
    static const float c[4] = {1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 70000.0f, 1e-8f};
    oc_model *m = oc_new(17);
    oc_input(m, "x", OC_FLOAT16, 2, X2x4);
    oc_init_f16(m, "w_raw", 1, N4, w_raw, 0);
    oc_init_f16(m, "w_i32", 1, N4, w_i32, 1);
    oc_init_f32(m, "c", 1, N4, c);
    oc_node(m, "Mul", "x,w_raw", "a");
    oc_node(m, "Add", "a,w_i32", "b");
    oc_node(m, "Cast", "b", "b16");
    oc_attr_int(m, "to", OC_FLOAT16);
    oc_node(m, "Cast", "b16", "y");
    oc_attr_int(m, "to", OC_FLOAT);
    oc_node(m, "Cast", "c", "c16");
    oc_attr_int(m, "to", OC_FLOAT16);
    oc_node(m, "Add", "x,c16", "z");
    oc_output(m, "y");
    oc_output(m, "z");
    return m;
}

static teeny_status load_half(const teeny_onnx_feed *feed, teeny_onnx_model **model)
{
    size_t size;
    oc_model *m = craft_half();
    unsigned char *bytes = oc_pack(m, &size);
    oc_free(m);
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    p.n_feeds = feed ? 1 : 0;
    p.feeds = feed;
    teeny_status st = teeny_onnx_load_memory(th_ctx(), bytes, size, &p, model);
    free(bytes);
    return st;
}

START_TEST(test_onnx_half_crafted)
{
    teeny_ctx *ctx = th_ctx();
    static const float x[8] = {1, -1, 0.5f, 3, 65504, 0x1p-24f, -2, 0.099975586f}; /* halves */
    static const float w_raw[4] = {0x1p-24f, -(0x1p-14f - 0x1p-24f), 65504, 1 + 0x1p-10f};
    static const float w_i32[4] = {0x1p-14f, -2, 0x1.554p-2f, 0x1p-15f};
    static const float c16[4] = {1, 1 + 0x1p-9f, INFINITY, 0};
    teeny_onnx_model *m;
    /* the model, x's value a feed of half bits (a float input: the feed sets its shape) */
    uint16_t xbits[8];
    teeny_float_to_half(x, xbits, 8);
    teeny_onnx_feed feed = {"x", TEENY_ONNX_FLOAT16, 2, X2x4, xbits};
    TH_OK(ctx, load_half(&feed, &m));
    teeny_onnx_dtype dt;
    int declared;
    const char *name;
    ck_assert_int_eq(teeny_onnx_input_count(m), 1);
    TH_OK(ctx, teeny_onnx_input(m, 0, &name, NULL, &dt));
    TH_OK(ctx, teeny_onnx_input_declared(m, 0, &declared));
    ck_assert(!strcmp(name, "x") && dt == TEENY_ONNX_FLOAT && declared == TEENY_ONNX_FLOAT16);
    TH_OK(ctx, teeny_onnx_output_declared(m, 0, &declared));
    ck_assert_int_eq(declared, 0); /* oc_output declares no type */
    ck_assert_int_eq(teeny_onnx_output_declared(m, 2, &declared), TEENY_ERR_ARG);
    ck_assert_int_eq(teeny_onnx_input_declared(m, -1, &declared), TEENY_ERR_ARG);
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = teeny_onnx_batch(m);
    pp.training = 0;
    teeny_plan *plan;
    TH_OK(ctx, teeny_graph_compile(teeny_onnx_graph(m), &pp, &plan));
    teeny_node in;
    teeny_tensor *t;
    TH_OK(ctx, teeny_onnx_input(m, 0, NULL, &in, NULL));
    TH_OK(ctx, teeny_plan_tensor(plan, in, &t));
    TH_OK(ctx, teeny_tensor_write(t, x, 8));
    TH_OK(ctx, teeny_plan_forward(plan));
    float y[8], z[8];
    for (int i = 0; i < 8; i++)
        y[i] = z[i] = NAN;
    TH_OK(ctx, teeny_onnx_output_read(m, plan, 0, y, 8));
    TH_OK(ctx, teeny_onnx_output_read(m, plan, 1, z, 8));
    for (int i = 0; i < 8; i++) {
        /* the device's fp32 multiply and add, each rounded once, as these are on the host */
        volatile float a = x[i] * w_raw[i % 4];
        volatile float b = a + w_i32[i % 4];
        float want_y = teeny_round_half(b), want_z = x[i] + c16[i % 4];
        ck_assert_msg(memcmp(&y[i], &want_y, 4) == 0, "y[%d] = %a, want %a", i, (double)y[i], (double)want_y);
        ck_assert_msg(memcmp(&z[i], &want_z, 4) == 0, "z[%d] = %a, want %a", i, (double)z[i], (double)want_z);
    }
    /* element 6: -2 * 65504 + 0.333 overflows half: -inf; z[0]: the tie 1 + 2^-11 went to 1; z[2]: 70000 to inf */
    ck_assert(isinf(y[6]) && y[6] < 0 && z[0] == 2.0f && isinf(z[2]));
    teeny_plan_destroy(plan);
    teeny_onnx_destroy(m);
    /* feeds that do not fit the float16 input: named with both types */
    static const int64_t ints[8] = {0};
    teeny_onnx_feed bad = {"x", TEENY_ONNX_INT64, 2, X2x4, ints};
    m = (teeny_onnx_model *)&bad;
    ck_assert_int_eq(load_half(&bad, &m), TEENY_ERR_ARG);
    ck_assert(m == NULL);
    const char *msg = teeny_last_error(ctx);
    ck_assert_msg(strstr(msg, "input: float16 [2, 4]") && strstr(msg, "feed: int64 [2, 4]"), "%s", msg);
    bad = (teeny_onnx_feed){"x", TEENY_ONNX_FLOAT16, 2, (const int64_t[]){2, 5}, xbits};
    ck_assert_int_eq(load_half(&bad, &m), TEENY_ERR_SHAPE);
    msg = teeny_last_error(ctx);
    ck_assert_msg(strstr(msg, "input: float16 [2, 4]") && strstr(msg, "feed: float16 [2, 5]"), "%s", msg);
    /* Cast to a type still refused, by name */
    oc_model *o = oc_new(17);
    oc_input(o, "x", OC_FLOAT16, 2, X2x4);
    oc_node(o, "Cast", "x", "y");
    oc_attr_int(o, "to", 16);
    oc_output(o, "y");
    size_t size;
    unsigned char *bytes = oc_pack(o, &size);
    oc_free(o);
    ck_assert_int_eq(teeny_onnx_load_memory(ctx, bytes, size, NULL, &m), TEENY_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(teeny_last_error(ctx), "to=bfloat16"), "%s", teeny_last_error(ctx));
    free(bytes);
}
END_TEST

/* CastLike: to a float16 constant's type, folded (the ties to even, 70000
 * to inf); to a graph input's declared float16 at run time; a target
 * computed at run time refused (its type is not tracked). */
START_TEST(test_onnx_half_castlike)
{
    teeny_ctx *ctx = th_ctx();
    static const float c[4] = {1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 70000.0f, -0x1p-25f};
    static const uint16_t one = 0x3c00u;
    oc_model *o = oc_new(17);
    oc_input(o, "x", OC_FLOAT, 1, N4);
    oc_input(o, "like_in", OC_FLOAT16, 1, N4);
    oc_init_f32(o, "c", 1, N4, c);
    oc_init_f16(o, "like", 1, (const int64_t[]){1}, &one, 0);
    oc_node(o, "CastLike", "c,like", "folded");
    oc_node(o, "CastLike", "x,like_in", "y");
    oc_output(o, "folded");
    oc_output(o, "y");
    size_t size;
    unsigned char *bytes = oc_pack(o, &size);
    oc_free(o);
    teeny_onnx_model *m;
    TH_OK(ctx, teeny_onnx_load_memory(ctx, bytes, size, NULL, &m));
    free(bytes);
    teeny_node node;
    float got[4] = {NAN, NAN, NAN, NAN};
    TH_OK(ctx, teeny_onnx_output(m, 0, NULL, &node, NULL, NULL));
    ck_assert_int_eq(node, -1);
    TH_OK(ctx, teeny_onnx_output_read(m, NULL, 0, got, 4));
    ck_assert(got[0] == 1.0f && got[1] == 1.0f + 0x1p-9f && isinf(got[2]) && got[3] == 0.0f && signbit(got[3]));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = teeny_onnx_batch(m);
    pp.training = 0;
    teeny_plan *plan;
    teeny_tensor *t;
    TH_OK(ctx, teeny_graph_compile(teeny_onnx_graph(m), &pp, &plan));
    TH_OK(ctx, teeny_onnx_input(m, 0, NULL, &node, NULL));
    TH_OK(ctx, teeny_plan_tensor(plan, node, &t));
    TH_OK(ctx, teeny_tensor_write(t, c, 4));
    TH_OK(ctx, teeny_plan_forward(plan));
    TH_OK(ctx, teeny_onnx_output_read(m, plan, 1, got, 4));
    for (int i = 0; i < 4; i++) {
        float want = teeny_round_half(c[i]);
        ck_assert_msg(memcmp(&got[i], &want, 4) == 0, "y[%d] = %a, want %a", i, (double)got[i], (double)want);
    }
    teeny_plan_destroy(plan);
    teeny_onnx_destroy(m);
    o = oc_new(17);
    oc_input(o, "x", OC_FLOAT, 1, N4);
    oc_node(o, "Relu", "x", "r");
    oc_node(o, "CastLike", "x,r", "y");
    oc_output(o, "y");
    bytes = oc_pack(o, &size);
    oc_free(o);
    ck_assert_int_eq(teeny_onnx_load_memory(ctx, bytes, size, NULL, &m), TEENY_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(teeny_last_error(ctx), "CastLike") && strstr(teeny_last_error(ctx), "\"r\" is computed at "
                  "run time"), "%s", teeny_last_error(ctx));
    free(bytes);
}
END_TEST

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* x [3, 4] -> MatMul W1 (float16, int32_data) -> [Cast to float16] ->
 * MatMul W2 (float16, raw) -> [Cast to float] -> y; with a softmax
 * cross-entropy appended by the test. */
static teeny_graph *half_mlp(int casts, const uint16_t *w1, const uint16_t *w2, teeny_onnx_model **m, teeny_node *loss)
{
    teeny_ctx *ctx = th_ctx();
    oc_model *o = oc_new(17);
    oc_input(o, "x", OC_FLOAT, 2, (const int64_t[]){-1, 4});
    oc_init_f16(o, "W1", 2, (const int64_t[]){4, 6}, w1, 1);
    oc_init_f16(o, "W2", 2, (const int64_t[]){6, 3}, w2, 0);
    oc_node(o, "MatMul", "x,W1", "h");
    if (casts) {
        oc_node(o, "Cast", "h", "h16");
        oc_attr_int(o, "to", OC_FLOAT16);
    }
    oc_node(o, "MatMul", casts ? "h16,W2" : "h,W2", casts ? "y16" : "y");
    if (casts) {
        oc_node(o, "Cast", "y16", "y");
        oc_attr_int(o, "to", OC_FLOAT);
    }
    oc_output(o, "y");
    size_t size;
    unsigned char *bytes = oc_pack(o, &size);
    oc_free(o);
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    p.batch = 3;
    TH_OK(ctx, teeny_onnx_load_memory(ctx, bytes, size, &p, m));
    free(bytes);
    teeny_graph *g = teeny_onnx_graph(*m);
    teeny_node y, labels, x;
    TH_OK(ctx, teeny_onnx_input(*m, 0, NULL, &x, NULL));
    ck_assert_int_eq(x, 0); /* th_plan_step writes x as node 0 */
    TH_OK(ctx, teeny_onnx_output(*m, 0, NULL, &y, NULL, NULL));
    TH_OK(ctx, teeny_graph_labels(g, "labels", &labels));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", y, labels, loss));
    ck_assert_int_eq(teeny_graph_param_count(g), 2);
    return g;
}

/* Fine-tuning through Casts: the float16 weights are fp32 parameters
 * (master weights, trained unrounded); W2's gradient matches central
 * differences; the Cast's backward is straight through, so W1's gradient
 * is the cast-free net's (at half-rounded hidden values: within 1e-2). */
START_TEST(test_onnx_half_train)
{
    teeny_ctx *ctx = th_ctx();
    th_rng rng = th_rng_make(4648);
    float w1f[24], w2f[18], xs[12];
    uint16_t w1[24], w2[18];
    th_fill_normal(&rng, w1f, 24, 0, 0.7);
    th_fill_normal(&rng, w2f, 18, 0, 0.7);
    th_fill_normal(&rng, xs, 12, 0, 1);
    teeny_float_to_half(w1f, w1, 24);
    teeny_float_to_half(w2f, w2, 18);
    const int32_t lab[3] = {2, 0, 1};
    teeny_onnx_model *m, *plain;
    teeny_node loss, loss_plain;
    teeny_graph *g = half_mlp(1, w1, w2, &m, &loss), *gp = half_mlp(0, w1, w2, &plain, &loss_plain);
    float *vals[2] = {NULL, NULL}, *grads[2], *grads_plain[2], *unused[2], l0, lp, lm;
    size_t sizes[2];
    th_plan_step(g, loss, xs, 12, lab, 3, vals, &l0, grads, sizes, NULL);
    for (int i = 0; i < 2; i++) { /* the parameters start as the halves, exactly */
        const char *name;
        TH_OK(ctx, teeny_graph_param(g, i, &name, NULL, NULL));
        const uint16_t *bits = !strcmp(name, "W1") ? w1 : w2;
        float *want = th_malloc(sizes[i] * sizeof *want);
        teeny_half_to_float(bits, want, sizes[i]);
        /* stored [out, in] (the linear's layout): compared as sorted values */
        float *got = th_malloc(sizes[i] * sizeof *got);
        memcpy(got, vals[i], sizes[i] * sizeof *got);
        qsort(got, sizes[i], sizeof *got, cmp_float);
        qsort(want, sizes[i], sizeof *want, cmp_float);
        ck_assert_msg(!memcmp(got, want, sizes[i] * sizeof *got), "%s: not the float16 initializer's values", name);
        free(got);
        free(want);
    }
    th_plan_step(gp, loss_plain, xs, 12, lab, 3, vals, &lp, grads_plain, NULL, NULL);
    for (int i = 0; i < 2; i++) {
        const char *name;
        TH_OK(ctx, teeny_graph_param(g, i, &name, NULL, NULL));
        double *ref = th_dbl(grads_plain[i], sizes[i]), norm = 0;
        for (size_t k = 0; k < sizes[i]; k++)
            norm += ref[k] * ref[k];
        ck_assert_msg(norm > 1e-6 && th_nrms(grads[i], ref, sizes[i]) <= 1e-2, "%s: gradient nrms %g against the "
                      "cast-free net's", name, th_nrms(grads[i], ref, sizes[i]));
        free(ref);
        if (strcmp(name, "W2"))
            continue;
        for (size_t k = 0; k < sizes[i]; k++) { /* after the Cast: the loss is smooth in W2 */
            const float h = 1e-2f, v = vals[i][k];
            vals[i][k] = v + h;
            th_plan_step(g, loss, xs, 12, lab, 3, vals, &lp, unused, NULL, NULL);
            free(unused[0]);
            free(unused[1]);
            vals[i][k] = v - h;
            th_plan_step(g, loss, xs, 12, lab, 3, vals, &lm, unused, NULL, NULL);
            free(unused[0]);
            free(unused[1]);
            vals[i][k] = v;
            double fd = ((double)lp - (double)lm) / (2.0 * h);
            ck_assert_msg(fabs(grads[i][k] - fd) <= 1e-3 + 2e-2 * fabs(fd), "W2 gradient[%zu]: %.6g, finite "
                          "differences %.6g (seed 4648)", k, (double)grads[i][k], fd);
        }
    }
    for (int i = 0; i < 2; i++) {
        free(vals[i]);
        free(grads[i]);
        free(grads_plain[i]);
    }
    teeny_onnx_destroy(m);
    teeny_onnx_destroy(plain);
}
END_TEST

Suite *suite_onnx_half(void)
{
    Suite *s = suite_create("onnx_half");
    TCase *tc = tcase_create("forward");
    tcase_add_test(tc, test_onnx_half_models);
    tcase_add_test(tc, test_onnx_half_crafted);
    tcase_add_test(tc, test_onnx_half_castlike);
    tcase_add_test(tc, test_onnx_half_train);
    suite_add_tcase(s, tc);
    return s;
}
