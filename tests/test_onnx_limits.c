/*
 * test_onnx_limits.c -- the importer's limits on what a model may cost.
 * errors: the folding budget (teenycl_onnx.h): a model of a few hundred
 * bytes whose ConstantOfShape, Add and Mul are folded on the host must be
 * refused with TEENY_ERR_NOMEM naming the node before anything is
 * allocated (it took 50 s and 6.3 GB, or asked for 16 GiB a value), while
 * a value just under the budget, and a weight folded at its own size,
 * still import. Crafted models come from tests/onnx_craft.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "onnx/onnx_internal.h" /* teeny__ox_load_budget */
#include "onnx_craft.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Loads size bytes (teeny_onnx_load_memory, or with budget's caps when
 * not NULL); the status, *seconds the load's time, the model destroyed. */
static teeny_status load_bytes(const unsigned char *bytes, size_t size, const ox_budget *budget, double *seconds)
{
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    teeny_onnx_model *model = (teeny_onnx_model *)&p; /* must become NULL on failure */
    double t0 = now_s();
    teeny_status st = budget ? teeny__ox_load_budget(th_ctx(), bytes, size, &p, *budget, &model)
                             : teeny_onnx_load_memory(th_ctx(), bytes, size, &p, &model);
    if (seconds)
        *seconds = now_s() - t0;
    ck_assert_msg(st == TEENY_OK ? model != NULL : model == NULL, "*out not NULL after a failure");
    teeny_onnx_destroy(model);
    return st;
}

/* Packs m (freed) and loads it (budget: as load_bytes). */
static teeny_status load(oc_model *m, const ox_budget *budget, double *seconds)
{
    size_t size;
    unsigned char *bytes = oc_pack(m, &size);
    oc_free(m);
    teeny_status st = load_bytes(bytes, size, budget, seconds);
    free(bytes);
    return st;
}

/* load(m, budget) gives want within a second (a refusal allocates
 * nothing; the 10 s bound is for slow machines and sanitizers), the
 * message holding word1 and word2 (may be NULL). */
static void expect(const char *what, oc_model *m, const ox_budget *budget, teeny_status want, const char *word1,
                   const char *word2)
{
    double s;
    teeny_status st = load(m, budget, &s);
    const char *msg = st == TEENY_OK ? "" : teeny_last_error(th_ctx());
    ck_assert_msg(st == want, "%s: %s, want %s (%s)", what, teeny_status_name(st), teeny_status_name(want), msg);
    ck_assert_msg((!word1 || strstr(msg, word1)) && (!word2 || strstr(msg, word2)),
                  "%s: the message \"%s\" lacks \"%s\" or \"%s\"", what, msg, word1 ? word1 : "",
                  word2 ? word2 : "");
    ck_assert_msg(s < 10.0, "%s: took %.1f s", what, s);
}

/* shape -> ConstantOfShape "c" (no value: float zeros; else int64 value
 * 7) -> Add "a" (c + c) -> Mul "y" (a * a), the graph output: every
 * node folded on the host. */
static oc_model *const_add_mul(int64_t numel, int int64_value)
{
    oc_model *m = oc_new(17);
    oc_init_i64(m, "shape", 1, (int64_t[]){1}, &numel);
    oc_node(m, "ConstantOfShape", "shape", "c");
    if (int64_value)
        oc_attr_tensor_i64(m, "value", 1, (int64_t[]){1}, (int64_t[]){7});
    oc_node(m, "Add", "c,c", "a");
    oc_node(m, "Mul", "a,a", "y");
    oc_output(m, "y");
    return m;
}

/* n ConstantOfShape nodes "c0".."c<n-1>" of numel float zeros, the last
 * one's shape (8 bytes, also folded) the output; the zeros are never
 * touched (calloc's pages). The model holds 8 bytes of its own. */
static oc_model *zeros(int n, int64_t numel)
{
    oc_model *m = oc_new(17);
    char c[16];
    oc_init_i64(m, "shape", 1, (int64_t[]){1}, &numel);
    for (int i = 0; i < n; i++) {
        snprintf(c, sizeof c, "c%d", i);
        oc_node(m, "ConstantOfShape", "shape", c);
    }
    oc_node(m, "Shape", c, "s");
    oc_output(m, "s");
    return m;
}

/* The models: a few hundred bytes asking for gigabytes. */
START_TEST(test_onnx_limits_fold_huge)
{
    static float row[16384];
    /* 2^28 float zeros (1 GiB), then Add and Mul of them: refused at the first */
    expect("ConstantOfShape [2^28]", const_add_mul((int64_t)1 << 28, 0), NULL, TEENY_ERR_NOMEM,
           "node \"c\" (ConstantOfShape)", "folding budget for one value");
    /* 2^31 - 1 int64 sevens (16 GiB a value) */
    expect("ConstantOfShape [2^31 - 1]", const_add_mul(INT32_MAX, 1), NULL, TEENY_ERR_NOMEM,
           "node \"c\" (ConstantOfShape)", "TEENY_ONNX_FOLD_VALUE_BYTES");
    /* two 64 KiB initializers broadcast by Add to [16384, 16384] floats (1 GiB) */
    oc_model *m = oc_new(17);
    oc_init_f32(m, "col", 2, (int64_t[]){16384, 1}, row);
    oc_init_f32(m, "row", 2, (int64_t[]){1, 16384}, row);
    oc_node(m, "Add", "col,row", "sum");
    oc_output(m, "sum");
    expect("Add [16384, 1] + [1, 16384]", m, NULL, TEENY_ERR_NOMEM, "node \"sum\" (Add)", "[16384, 16384]");
}
END_TEST

/* Values at the default budget's edges: 256 MiB a value (2^26 floats) and
 * 1 GiB for all plus twice the model's own 8 bytes: four such values and
 * an 8-byte shape fit, a fifth value does not. */
START_TEST(test_onnx_limits_fold_edges)
{
    const int64_t at_cap = TEENY_ONNX_FOLD_VALUE_BYTES / 4;
    expect("one value of 256 MiB", zeros(1, at_cap), NULL, TEENY_OK, NULL, NULL);
    expect("one value of 256 MiB + 4 bytes", zeros(1, at_cap + 1), NULL, TEENY_ERR_NOMEM,
           "node \"c0\" (ConstantOfShape)", "folding budget for one value");
    expect("int64: one value of 256 MiB + 8 bytes", const_add_mul(TEENY_ONNX_FOLD_VALUE_BYTES / 8 + 1, 1), NULL,
           TEENY_ERR_NOMEM, "node \"c\" (ConstantOfShape)", "int64");
    expect("four values of 256 MiB", zeros(4, at_cap), NULL, TEENY_OK, NULL, NULL);
    expect("five values of 256 MiB", zeros(5, at_cap), NULL, TEENY_ERR_NOMEM, "node \"c4\" (ConstantOfShape)",
           "for all of them");
}
END_TEST

/* The budget's rules at small caps (teeny__ox_load_budget), and the
 * model's own tensors widening it: a weight passed through Identity is
 * folded at its own size. */
START_TEST(test_onnx_limits_fold_rules)
{
    static float w[2048];
    ox_budget b = {4096, 4096};
    for (int i = 0; i < 2048; i++)
        w[i] = (float)(i % 7) - 3.0f;
    /* w (8 KiB) through Identity twice: one value of 8 KiB is the model's
     * largest tensor, 16 KiB in all is under 4 KiB + 2 * 8 KiB ... */
    for (int copies = 2; copies <= 3; copies++) {
        oc_model *m = oc_new(17);
        char in[16] = "w", out[16];
        oc_init_f32(m, "w", 1, (int64_t[]){2048}, w);
        for (int i = 0; i < copies; i++) {
            snprintf(out, sizeof out, "id%d", i);
            oc_node(m, "Identity", in, out);
            snprintf(in, sizeof in, "%s", out);
        }
        oc_output(m, out);
        /* ... a third copy (24 KiB) is not */
        if (copies == 2)
            expect("two copies of an 8 KiB weight", m, &b, TEENY_OK, NULL, NULL);
        else
            expect("three copies of an 8 KiB weight", m, &b, TEENY_ERR_NOMEM, "node \"id2\" (Identity)",
                   "20480 bytes");
    }
    /* with no large tensor in the model, the value cap itself */
    b = (ox_budget){8192, TEENY_ONNX_FOLD_TOTAL_BYTES};
    expect("2048 floats", zeros(1, 2048), &b, TEENY_OK, NULL, NULL);
    expect("2049 floats", zeros(1, 2049), &b, TEENY_ERR_NOMEM, "node \"c0\" (ConstantOfShape)", "8196 bytes");
}
END_TEST

Suite *suite_onnx_limits(void)
{
    Suite *s = suite_create("onnx_limits");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_onnx_limits_fold_huge);
    tcase_add_test(tc, test_onnx_limits_fold_edges);
    tcase_add_test(tc, test_onnx_limits_fold_rules);
    suite_add_tcase(s, tc);
    return s;
}
