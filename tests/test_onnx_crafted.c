/*
 * test_onnx_crafted.c -- crafted models (tests/onnx_craft.h) against the
 * importer's shape arithmetic: every op that makes a result of a new rank,
 * at rank TEENY_ONNX_MAX_DIMS + 1 (the importer wrote the ninth dimension
 * past an 8-entry array before it checked); Slice with extreme starts,
 * ends and steps against NumPy's slicing, folded and at run time; Pad and
 * Resize whose sizes overflow int64; Split whose num_outputs disagrees
 * with its outputs. Each refusal is checked by status and message; make
 * check-asan runs these under AddressSanitizer and UBSan.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "onnx_craft.h"
#include "teenycl_onnx.h"

/* Loads m (freed) at batch 0; the status, the model destroyed. */
static teeny_status load(oc_model *m)
{
    size_t size;
    unsigned char *bytes = oc_pack(m, &size);
    oc_free(m);
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    teeny_onnx_model *model = (teeny_onnx_model *)&p; /* must become NULL on failure */
    teeny_status st = teeny_onnx_load_memory(th_ctx(), bytes, size, &p, &model);
    free(bytes);
    ck_assert_msg(st == TEENY_OK ? model != NULL : model == NULL, "*out not NULL after a failure");
    teeny_onnx_destroy(model);
    return st;
}

/* load(m) fails with want, its message holding every one of the words. */
static void expect_refused(const char *what, oc_model *m, teeny_status want, const char *word1, const char *word2)
{
    teeny_status st = load(m);
    const char *msg = teeny_last_error(th_ctx());
    ck_assert_msg(st == want, "%s: %s, want %s (%s)", what, teeny_status_name(st), teeny_status_name(want), msg);
    ck_assert_msg(strstr(msg, word1) && (!word2 || strstr(msg, word2)), "%s: the message \"%s\" lacks \"%s\"%s%s",
                  what, msg, word1, word2 ? " or " : "", word2 ? word2 : "");
}

static const int64_t ONES9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
static const int64_t ZERO1[1] = {0}, N9[1] = {9}, N5[5] = {1, 1, 1, 1, 1};

/* One crafted model per op that appends dimensions, each making a result
 * of rank 9. */
START_TEST(test_onnx_crafted_rank)
{
    static const int64_t x5[5] = {1, 2, 2, 2, 2}, x8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    static const float data32[16] = {0};
    oc_model *m;
    /* the file: Gather (axis 1) of a rank-5 input at constant indices of rank 5 */
    m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 5, x5);
    oc_init_i64(m, "i", 5, N5, ZERO1);
    oc_node(m, "Gather", "x,i", "y");
    oc_attr_int(m, "axis", 1);
    oc_output(m, "y");
    expect_refused("Gather, run time", m, TEENY_ERR_SHAPE, "rank 9", NULL);
    /* the same of a constant (folded) */
    m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 1, (int64_t[]){1});
    oc_init_f32(m, "c", 5, x5, data32);
    oc_init_i64(m, "i", 5, N5, ZERO1);
    oc_node(m, "Gather", "c,i", "g");
    oc_attr_int(m, "axis", 1);
    oc_node(m, "Shape", "g", "s");
    oc_node(m, "Reshape", "x,s", "y");
    oc_output(m, "y");
    expect_refused("Gather, folded", m, TEENY_ERR_SHAPE, "rank 9", NULL);
    /* Unsqueeze to rank 9, run time (a rank-5 input, four axes; opset 13: axes as an input) and folded */
    m = oc_new(13);
    oc_input(m, "x", OC_FLOAT, 5, x5);
    oc_init_i64(m, "axes", 1, (int64_t[]){4}, (int64_t[]){0, 1, 2, 3});
    oc_node(m, "Unsqueeze", "x,axes", "y");
    oc_output(m, "y");
    expect_refused("Unsqueeze, run time", m, TEENY_ERR_SHAPE, "rank 9", NULL);
    m = oc_new(11);
    oc_input(m, "x", OC_FLOAT, 1, (int64_t[]){1});
    oc_init_f32(m, "c", 8, x8, data32);
    oc_node(m, "Unsqueeze", "c", "u");
    oc_attr_ints(m, "axes", 1, ZERO1);
    oc_node(m, "Add", "x,u", "y");
    oc_output(m, "y");
    expect_refused("Unsqueeze, folded", m, TEENY_ERR_SHAPE, "rank 9", NULL);
    /* Expand, Reshape and ConstantOfShape to a shape of nine values */
    m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 1, (int64_t[]){1});
    oc_init_i64(m, "s", 1, N9, ONES9);
    oc_node(m, "Expand", "x,s", "y");
    oc_output(m, "y");
    expect_refused("Expand", m, TEENY_ERR_SHAPE, "rank 9", NULL);
    m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 1, (int64_t[]){1});
    oc_init_i64(m, "s", 1, N9, ONES9);
    oc_node(m, "Reshape", "x,s", "y");
    oc_output(m, "y");
    expect_refused("Reshape", m, TEENY_ERR_SHAPE, "rank 9", NULL);
    m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 1, (int64_t[]){1});
    oc_init_i64(m, "s", 1, N9, ONES9);
    oc_node(m, "ConstantOfShape", "s", "c");
    oc_node(m, "Add", "x,c", "y");
    oc_output(m, "y");
    expect_refused("ConstantOfShape", m, TEENY_ERR_SHAPE, "rank 9", NULL);
    /* a rank-9 value in a Constant, an initializer and a graph input */
    m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 1, (int64_t[]){1});
    oc_node(m, "Constant", "", "c");
    oc_attr_tensor_i64(m, "value", 9, ONES9, ZERO1);
    oc_node(m, "Shape", "c", "s");
    oc_node(m, "Reshape", "x,s", "y");
    oc_output(m, "y");
    expect_refused("Constant", m, TEENY_ERR_SHAPE, "rank 9", NULL);
    m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 1, (int64_t[]){1});
    oc_init_f32(m, "c", 9, ONES9, data32);
    oc_node(m, "Add", "x,c", "y");
    oc_output(m, "y");
    expect_refused("initializer", m, TEENY_ERR_SHAPE, "rank 9", NULL);
    m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 9, ONES9);
    oc_node(m, "Relu", "x", "y");
    oc_output(m, "y");
    expect_refused("graph input", m, TEENY_ERR_SHAPE, "rank 9", NULL);
}
END_TEST

Suite *suite_onnx_crafted(void)
{
    Suite *s = suite_create("onnx_crafted");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_onnx_crafted_rank);
    suite_add_tcase(s, tc);
    return s;
}
