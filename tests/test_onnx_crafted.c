/*
 * test_onnx_crafted.c -- crafted models (tests/onnx_craft.h) against the
 * importer's shape arithmetic: every op that makes a result of a new rank,
 * at rank TEENY_ONNX_MAX_DIMS + 1 (the importer wrote the ninth dimension
 * past an 8-entry array before it checked); Slice with extreme starts,
 * ends and steps against NumPy's slicing, folded and at run time; Pad and
 * Resize whose sizes overflow int64; Split whose num_outputs disagrees
 * with its outputs; InstanceNormalization's and GroupNormalization's
 * shape and attribute refusals; gradients through a rank-6 transpose,
 * ScatterND and Einsum, and rank-6 graph inputs and outputs (backward).
 * Each refusal is checked by status and
 * message; make check-asan runs these under AddressSanitizer and UBSan.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz/onnx_seeds.h"
#include "harness.h"
#include "onnx_craft.h"
#include "teenycl_onnx.h"
#include "../tools/onnx_run.h"

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

/* NumPy's x[start:end:step] of an axis of dim elements (Python's
 * slice.indices, then the walk), in 128-bit arithmetic: the indices into
 * out, their count returned. An independent reference for the library's
 * overflow-free arithmetic. */
__extension__ typedef __int128 i128; /* GCC and Clang */

static int numpy_slice(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *out)
{
    i128 b = start, e = end, sp = step, d = dim;
    if (b < 0)
        b += d;
    if (e < 0)
        e += d;
    if (sp > 0) {
        b = b < 0 ? 0 : b > d ? d : b;
        e = e < 0 ? 0 : e > d ? d : e;
    } else {
        b = b < 0 ? -1 : b > d - 1 ? d - 1 : b;
        e = e < 0 ? -1 : e > d - 1 ? d - 1 : e;
    }
    int n = 0;
    for (i128 i = b; sp > 0 ? i < e : i > e; i += sp)
        out[n++] = (int64_t)i;
    return n;
}

/* A Slice of x [1, 6] along axis 1 by (start, end, step): of a constant
 * (folded; the result read from the model) or of a graph input (run time,
 * through a plan). The result's values go to y (its count returned), or
 * -1 with the status in *st. */
static int slice_model(int runtime, int64_t start, int64_t end, int64_t step, float *y, teeny_status *st)
{
    static const float x[6] = {10, 11, 12, 13, 14, 15};
    const int64_t shape[2] = {1, 6}, one[1] = {1};
    oc_model *m = oc_new(13);
    oc_input(m, "x", OC_FLOAT, 2, shape);
    if (!runtime)
        oc_init_f32(m, "c", 2, shape, x);
    oc_init_i64(m, "starts", 1, one, &start);
    oc_init_i64(m, "ends", 1, one, &end);
    oc_init_i64(m, "axes", 1, one, (int64_t[]){1});
    oc_init_i64(m, "steps", 1, one, &step);
    oc_node(m, "Slice", runtime ? "x,starts,ends,axes,steps" : "c,starts,ends,axes,steps", runtime ? "y" : "s");
    if (!runtime) /* a run-time result beside the folded one keeps the graph from being empty */
        oc_node(m, "Relu", "x", "r");
    oc_output(m, runtime ? "y" : "s");
    size_t size;
    unsigned char *bytes = oc_pack(m, &size);
    oc_free(m);
    teeny_onnx_model *model = NULL;
    teeny_plan *plan = NULL;
    int64_t dims[TEENY_ONNX_MAX_DIMS];
    int ndim = 0, n = -1;
    *st = teeny_onnx_load_memory(th_ctx(), bytes, size, NULL, &model);
    free(bytes);
    if (*st == TEENY_OK)
        *st = teeny_onnx_output(model, 0, NULL, NULL, &ndim, dims);
    if (*st == TEENY_OK && runtime) {
        teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
        teeny_node in;
        teeny_tensor *t;
        pp.batch = teeny_onnx_batch(model);
        pp.training = 0;
        if ((*st = teeny_graph_compile(teeny_onnx_graph(model), &pp, &plan)) == TEENY_OK &&
            (*st = teeny_onnx_input(model, 0, NULL, &in, NULL)) == TEENY_OK &&
            (*st = teeny_plan_tensor(plan, in, &t)) == TEENY_OK && (*st = teeny_tensor_write(t, x, 6)) == TEENY_OK)
            *st = teeny_plan_forward(plan);
    }
    if (*st == TEENY_OK) {
        ck_assert_int_eq(ndim, 2);
        ck_assert_int_eq(dims[0], 1);
        n = (int)dims[1];
        ck_assert_int_le(n, 6);
        for (int i = 0; i < n; i++)
            y[i] = NAN;
        *st = teeny_onnx_output_read(model, plan, 0, y, (size_t)n);
        if (*st != TEENY_OK)
            n = -1;
    }
    teeny_plan_destroy(plan);
    teeny_onnx_destroy(model);
    return n;
}

/* Slice with extreme starts, ends and steps, folded and at run time,
 * against NumPy's slicing (a step of INT64_MAX folded to an empty tensor,
 * through a signed overflow, and was refused at run time). */
START_TEST(test_onnx_crafted_slice)
{
    static const int64_t ends[] = {INT64_MIN, INT64_MIN + 1, -7, -6, -1, 0, 1, 5, 6, 7, INT64_MAX - 1, INT64_MAX};
    static const int64_t steps[] = {INT64_MIN, INT64_MIN + 1, -INT64_MAX / 2, -7, -2, -1,
                                    1, 2, 5, 7, INT64_MAX / 2, INT64_MAX - 1, INT64_MAX};
    const int n_ends = (int)(sizeof ends / sizeof ends[0]), n_steps = (int)(sizeof steps / sizeof steps[0]);
    int runtime = _i; /* 0 folded: every combination; 1 run time: every step, a spread of starts and ends */
    for (int a = 0; a < n_ends; a++)
        for (int b = 0; b < n_ends; b++)
            for (int c = 0; c < n_steps; c++) {
                if (runtime && (a * 5 + b * 3 + c) % 11 != 0 && !(a == 3 && b == n_ends - 1))
                    continue;
                int64_t want_i[8];
                float y[8];
                teeny_status st;
                int want = numpy_slice(6, ends[a], ends[b], steps[c], want_i);
                int got = slice_model(runtime, ends[a], ends[b], steps[c], y, &st);
                char repro[160];
                snprintf(repro, sizeof repro, "%s x[%lld:%lld:%lld] of 6", runtime ? "run time" : "folded",
                         (long long)ends[a], (long long)ends[b], (long long)steps[c]);
                if (want == 0) { /* ONNX Runtime gives an empty tensor; we refuse one (no empty tensors) */
                    ck_assert_msg(got < 0 || got == 0, "%s: %d elements, want none", repro, got);
                    continue;
                }
                ck_assert_msg(got == want, "%s: %d elements (%s: %s), want %d", repro, got, teeny_status_name(st),
                              teeny_last_error(th_ctx()), want);
                for (int i = 0; i < want; i++)
                    ck_assert_msg(y[i] == 10.0f + (float)want_i[i], "%s: element %d is %g, want %g", repro, i, y[i],
                                  10.0 + (double)want_i[i]);
            }
}
END_TEST

/* Pad and Resize whose sizes pass int64 (UBSan: signed overflows before
 * the refusals), and Split whose num_outputs disagrees with its outputs
 * (split 3 channels into [2, 1]). */
START_TEST(test_onnx_crafted_overflow)
{
    static const int64_t x2[2] = {1, 4}, x4[4] = {2, 3, 4, 4}, four[1] = {4};
    oc_model *m;
    m = oc_new(13);
    oc_input(m, "x", OC_FLOAT, 2, x2);
    oc_init_i64(m, "pads", 1, four, (int64_t[]){0, INT64_MAX, 0, INT64_MAX});
    oc_node(m, "Pad", "x,pads", "y");
    oc_output(m, "y");
    expect_refused("Pad by INT64_MAX", m, TEENY_ERR_ARG, "axis 1", NULL);
    m = oc_new(13);
    oc_input(m, "x", OC_FLOAT, 2, x2);
    oc_init_i64(m, "pads", 1, four, (int64_t[]){0, INT64_MIN, 0, INT64_MIN});
    oc_node(m, "Pad", "x,pads", "y");
    oc_output(m, "y");
    expect_refused("Pad by INT64_MIN", m, TEENY_ERR_ARG, "axis 1", NULL);
    m = oc_new(13);
    oc_input(m, "x", OC_FLOAT, 4, x4);
    oc_init_i64(m, "sizes", 1, four, (int64_t[]){2, 3, INT32_MAX, INT32_MAX});
    oc_node(m, "Resize", "x,,,sizes", "y");
    oc_output(m, "y");
    expect_refused("Resize to 2^31 - 1 squared", m, TEENY_ERR_RANGE, "passes 2^31 - 1 elements", NULL);
    m = oc_new(18);
    oc_input(m, "x", OC_FLOAT, 2, (int64_t[]){1, 3});
    oc_node(m, "Split", "x", "a,b");
    oc_attr_int(m, "axis", 1);
    oc_attr_int(m, "num_outputs", 3);
    oc_output(m, "a");
    oc_output(m, "b");
    expect_refused("Split, num_outputs 3 for 2 outputs", m, TEENY_ERR_FORMAT, "num_outputs=3 for 2 outputs", NULL);
    m = oc_new(18);
    oc_input(m, "x", OC_FLOAT, 2, (int64_t[]){1, 3});
    oc_init_i64(m, "split", 1, (int64_t[]){2}, (int64_t[]){2, 1});
    oc_node(m, "Split", "x,split", "a,b");
    oc_attr_int(m, "axis", 1);
    oc_attr_int(m, "num_outputs", 2);
    oc_output(m, "a");
    oc_output(m, "b");
    expect_refused("Split, num_outputs beside split", m, TEENY_ERR_FORMAT, "beside split sizes", NULL);
    /* and the same Split, right, still imports */
    m = oc_new(18);
    oc_input(m, "x", OC_FLOAT, 2, (int64_t[]){1, 3});
    oc_node(m, "Split", "x", "a,b,c");
    oc_attr_int(m, "axis", 1);
    oc_attr_int(m, "num_outputs", 3);
    oc_output(m, "a");
    oc_output(m, "b");
    oc_output(m, "c");
    ck_assert_msg(load(m) == TEENY_OK, "Split, num_outputs 3: %s", teeny_last_error(th_ctx()));
}
END_TEST

/* fuzz_onnx's crafted seeds (one model per op, tests/fuzz/onnx_seeds.c)
 * all import: a seed the importer refuses would start the fuzzer far from
 * the attribute checks it is there to reach. */
START_TEST(test_onnx_crafted_seeds)
{
    char dir[] = "/tmp/teeny-seeds-XXXXXX", path[1200];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    int n = onnx_make_seeds(dir);
    ck_assert_int_gt(n, 40);
    DIR *d = opendir(dir);
    struct dirent *e;
    int loaded = 0;
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        teeny_onnx_model *m = NULL;
        teeny_status st = teeny_onnx_load(th_ctx(), path, NULL, &m);
        if (st != TEENY_OK)
            fprintf(stderr, "seed %s: %s: %s\n", e->d_name, teeny_status_name(st), teeny_last_error(th_ctx()));
        teeny_onnx_destroy(m);
        unlink(path);
        loaded += st == TEENY_OK;
    }
    closedir(d);
    rmdir(dir);
    ck_assert_msg(loaded == n, "%d of %d seeds import (the others are named above)", loaded, n);
}
END_TEST

/* The importer's past findings (tests/onnx/fuzz-*.onnx, from make fuzz and
 * reviews): each loads or fails with a message, *out NULL on failure; the
 * sanitizer build (make check-asan) is what finds a regression here. */
START_TEST(test_onnx_crafted_replay)
{
    DIR *d = opendir("tests/onnx");
    struct dirent *e;
    int replayed = 0;
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        char path[600];
        if (strncmp(e->d_name, "fuzz-", 5) || !strstr(e->d_name, ".onnx"))
            continue;
        snprintf(path, sizeof path, "tests/onnx/%s", e->d_name);
        teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
        teeny_onnx_model *m = (teeny_onnx_model *)&p;
        teeny_status st = teeny_onnx_load(th_ctx(), path, &p, &m);
        ck_assert_msg(st == TEENY_OK ? m != NULL : m == NULL && teeny_last_error(th_ctx())[0],
                      "%s: %s without a model or a message", e->d_name, teeny_status_name(st));
        teeny_onnx_destroy(m);
        replayed++;
    }
    closedir(d);
    ck_assert_int_ge(replayed, 7);
}
END_TEST

/* A GroupNormalization (opset: 18 or 21; num_groups < 1: absent) or, with
 * groups 0 and opset 17, InstanceNormalization of x [N, 6, 5] named "gn",
 * its scale and bias of n_affine elements. */
static oc_model *norm_model(int64_t opset, int64_t groups, int64_t n_affine)
{
    static const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    oc_model *m = oc_new(opset);
    oc_input(m, "x", OC_FLOAT, 3, (int64_t[]){-1, 6, 5});
    oc_init_f32(m, "s", 1, &n_affine, ones);
    oc_init_f32(m, "b", 1, &n_affine, ones);
    oc_node(m, groups ? "GroupNormalization" : "InstanceNormalization", "x,s,b", "gn");
    if (groups > 0)
        oc_attr_int(m, "num_groups", groups);
    oc_output(m, "gn");
    return m;
}

/* InstanceNormalization and GroupNormalization refused, naming the node:
 * num_groups not dividing C, scale and bias of the other opset's shape or
 * of the wrong size, num_groups missing, stash_type other than float, a
 * run-time scale, GroupNormalization before opset 18; the shapes that
 * import do. */
START_TEST(test_onnx_crafted_norms)
{
    expect_refused("num_groups 4 of 6 channels", norm_model(21, 4, 6), TEENY_ERR_SHAPE,
                   "node \"gn\" (GroupNormalization)", "num_groups 4 does not divide the 6 channels");
    expect_refused("opset 21, scale per group", norm_model(21, 3, 3), TEENY_ERR_SHAPE, "node \"gn\"",
                   "must be [6] (C)");
    expect_refused("opset 18, scale per channel", norm_model(18, 3, 6), TEENY_ERR_SHAPE, "node \"gn\"",
                   "must be [3] (num_groups, before opset 21)");
    expect_refused("InstanceNormalization, scale [5]", norm_model(17, 0, 5), TEENY_ERR_SHAPE,
                   "node \"gn\" (InstanceNormalization)", "must be [6]");
    expect_refused("num_groups missing", norm_model(21, -1, 6), TEENY_ERR_FORMAT, "node \"gn\"", "num_groups is required");
    oc_model *m = norm_model(21, 2, 6);
    oc_attr_int(m, "stash_type", 11);
    expect_refused("stash_type double", m, TEENY_ERR_UNSUPPORTED, "node \"gn\"", "stash_type=11");
    m = norm_model(17, 0, 6);
    oc_attr_int(m, "num_groups", 6);
    expect_refused("InstanceNormalization with num_groups", m, TEENY_ERR_UNSUPPORTED, "node \"gn\"",
                   "attribute num_groups is not supported");
    m = norm_model(17, 6, 6);
    expect_refused("GroupNormalization at opset 17", m, TEENY_ERR_UNSUPPORTED, "GroupNormalization", NULL);
    m = oc_new(21);
    oc_input(m, "x", OC_FLOAT, 3, (int64_t[]){-1, 6, 5});
    oc_input(m, "s", OC_FLOAT, 1, (int64_t[]){6});
    oc_init_f32(m, "b", 1, (int64_t[]){6}, (float[6]){0});
    oc_node(m, "GroupNormalization", "x,s,b", "gn");
    oc_attr_int(m, "num_groups", 2);
    oc_output(m, "gn");
    expect_refused("a run-time scale", m, TEENY_ERR_UNSUPPORTED, "node \"gn\"", "scale");
    ck_assert_int_eq(load(norm_model(21, 2, 6)), TEENY_OK);
    ck_assert_int_eq(load(norm_model(18, 2, 2)), TEENY_OK);
    ck_assert_int_eq(load(norm_model(17, 0, 6)), TEENY_OK);
}
END_TEST

/* Gradients through issue 42's import paths, against central finite
 * differences of the loss: x [B, 6] -> MatMul W1 (a linear parameter) ->
 * Reshape [B, 3, 2, 2, 2, 2] -> MaxViT's Transpose (0, 2, 4, 3, 5, 1)
 * (two stepped transposes of a rank-6 value) -> Reshape [B, 12, 4] ->
 * ScatterND add of run-time updates (x MatMul W2, as [3, 4]) at a repeated
 * index (two layers) -> ScatterND none of Einsum("bk,kj->bj", x, W3) rows
 * (x MatMul W4 the run-time operand; W3 a graph constant) -> cross-entropy
 * over the flattened [B, 48]. Every element of W1, W2 and W4 is perturbed;
 * the overwritten rows' data gets no gradient. */
START_TEST(test_onnx_crafted_wide_grad)
{
    teeny_ctx *ctx = th_ctx();
    enum { B = 2, IN = 6 };
    th_rng rng = th_rng_make(4208);
    float w1[IN * 48], w2[IN * 6], w3[IN * 4], w4[IN * IN], xs[B * IN];
    th_fill_normal(&rng, w1, IN * 48, 0.0, 0.5);
    th_fill_normal(&rng, w2, IN * 6, 0.0, 0.5);
    th_fill_normal(&rng, w3, IN * 4, 0.0, 0.5);
    th_fill_normal(&rng, w4, IN * IN, 0.0, 0.5);
    th_fill_normal(&rng, xs, B * IN, 0.3, 1.0);
    oc_model *om = oc_new(17);
    oc_input(om, "x", OC_FLOAT, 2, (int64_t[]){B, IN});
    oc_init_f32(om, "w1", 2, (int64_t[]){IN, 48}, w1);
    oc_init_f32(om, "w2", 2, (int64_t[]){IN, 6}, w2);
    oc_init_f32(om, "w3", 2, (int64_t[]){IN, 4}, w3);
    oc_init_f32(om, "w4", 2, (int64_t[]){IN, IN}, w4);
    oc_init_i64(om, "s6", 1, (int64_t[]){6}, (int64_t[]){B, 3, 2, 2, 2, 2});
    oc_init_i64(om, "s3", 1, (int64_t[]){3}, (int64_t[]){B, 12, 4});
    oc_init_i64(om, "s34", 1, (int64_t[]){2}, (int64_t[]){3, 4});
    oc_init_i64(om, "s24", 1, (int64_t[]){2}, (int64_t[]){2, 4});
    oc_init_i64(om, "cells", 2, (int64_t[]){3, 2}, (int64_t[]){0, 3, 1, 7, 0, 3});
    oc_init_i64(om, "rows", 2, (int64_t[]){2, 2}, (int64_t[]){1, 0, 0, 11});
    oc_node(om, "MatMul", "x,w1", "h");
    oc_node(om, "Reshape", "h,s6", "h6");
    oc_node(om, "Transpose", "h6", "t6");
    oc_attr_ints(om, "perm", 6, (int64_t[]){0, 2, 4, 3, 5, 1});
    oc_node(om, "Reshape", "t6,s3", "d");
    oc_node(om, "MatMul", "x,w2", "u");
    oc_node(om, "Reshape", "u,s34", "u34");
    oc_node(om, "ScatterND", "d,cells,u34", "sa");
    oc_attr_string(om, "reduction", "add");
    oc_node(om, "MatMul", "x,w4", "v");
    oc_node(om, "Einsum", "v,w3", "e");
    oc_attr_string(om, "equation", "bk,kj->bj");
    oc_node(om, "Reshape", "e,s24", "e24");
    oc_node(om, "ScatterND", "sa,rows,e24", "y");
    oc_output(om, "y");
    size_t size;
    unsigned char *bytes = oc_pack(om, &size);
    oc_free(om);
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    p.batch = B;
    teeny_onnx_model *m;
    TH_OK(ctx, teeny_onnx_load_memory(ctx, bytes, size, &p, &m));
    free(bytes);
    teeny_graph *g = teeny_onnx_graph(m);
    teeny_node y, flat, labels, loss;
    TH_OK(ctx, teeny_onnx_output(m, 0, NULL, &y, NULL, NULL));
    TH_OK(ctx, teeny_graph_flatten(g, "flat", y, &flat));
    TH_OK(ctx, teeny_graph_labels(g, "labels", &labels));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", flat, labels, &loss));
    const int32_t lab[B] = {5, 30};
    int np = teeny_graph_param_count(g);
    ck_assert_int_eq(np, 3); /* W1, W2, W4: the linear layers' weights */
    float loss0 = th_check_fd_grads(g, loss, xs, B * IN, lab, B, "rank-6 transpose, ScatterND, Einsum; seed 4208");
    ck_assert(isfinite(loss0));
    teeny_onnx_destroy(m);
}
END_TEST

/* A rank-6 graph input transposed into a rank-6 graph output, and read
 * through Reshape -> Relu too: graph inputs and outputs of rank 6..8 are
 * values whose node holds them at rank 5 (values.c), fed and read by
 * element count through teeny-run's path (tools/onnx_run.c). The
 * transpose is a copy: compared exactly with the host's. */
START_TEST(test_onnx_crafted_wide_io)
{
    teeny_ctx *ctx = th_ctx();
    static const int64_t xs[6] = {2, 3, 2, 2, 2, 2}, perm[6] = {0, 2, 4, 3, 5, 1};
    float x[96];
    th_rng rng = th_rng_make(4209);
    th_fill_normal(&rng, x, 96, 0.0, 1.0);
    oc_model *om = oc_new(17);
    oc_input(om, "x6", OC_FLOAT, 6, xs);
    oc_init_i64(om, "s2", 1, (int64_t[]){2}, (int64_t[]){2, 48});
    oc_node(om, "Transpose", "x6", "t6");
    oc_attr_ints(om, "perm", 6, perm);
    oc_node(om, "Reshape", "t6,s2", "r");
    oc_node(om, "Relu", "r", "y");
    oc_output(om, "t6");
    oc_output(om, "y");
    size_t size;
    unsigned char *bytes = oc_pack(om, &size);
    oc_free(om);
    char dir[] = "/tmp/teeny-wide-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/wide.onnx", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, size, f), size);
    fclose(f);
    free(bytes);
    onnx_run_input in = {.name = "x6", .dtype = TEENY_ONNX_FLOAT, .ndim = 6, .data = x};
    memcpy(in.shape, xs, sizeof xs);
    onnx_run_result r;
    double ms;
    teeny_status st = onnx_run(ctx, path, 0, 1, &in, 1, &r, &ms);
    unlink(path);
    rmdir(dir);
    ck_assert_msg(st == TEENY_OK, "%s: %s", teeny_status_name(st), onnx_run_error(ctx));
    ck_assert_int_eq(r.n, 2);
    ck_assert_int_eq(r.ndim[0], 6);
    for (int d = 0; d < 6; d++)
        ck_assert_int_eq(r.shape[0][d], xs[perm[d]]);
    int64_t o[6] = {0};
    for (int k = 0; k < 96; k++) { /* o: output k's coordinates; input axis perm[d] is at o[d] */
        int64_t at = 0, c[6];
        for (int d = 0; d < 6; d++)
            c[perm[d]] = o[d];
        for (int d = 0; d < 6; d++)
            at = at * xs[d] + c[d];
        ck_assert_msg(r.data[0][k] == x[at] && r.data[1][k] == (x[at] > 0.0f ? x[at] : 0.0f),
                      "t6[%d] = %g, y %g; want %g (input element %lld)", k, (double)r.data[0][k], (double)r.data[1][k],
                      (double)x[at], (long long)at);
        for (int d = 5; d >= 0 && ++o[d] == r.shape[0][d]; d--)
            o[d] = 0;
    }
    onnx_run_result_free(&r);
}
END_TEST

Suite *suite_onnx_crafted(void)
{
    Suite *s = suite_create("onnx_crafted");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_onnx_crafted_rank);
    tcase_add_loop_test(tc, test_onnx_crafted_slice, 0, 2);
    tcase_add_test(tc, test_onnx_crafted_overflow);
    tcase_add_test(tc, test_onnx_crafted_seeds);
    tcase_add_test(tc, test_onnx_crafted_replay);
    tcase_add_test(tc, test_onnx_crafted_norms);
    suite_add_tcase(s, tc);
    TCase *bwd = tcase_create("backward");
    tcase_add_test(bwd, test_onnx_crafted_wide_grad);
    tcase_add_test(bwd, test_onnx_crafted_wide_io);
    suite_add_tcase(s, bwd);
    return s;
}
