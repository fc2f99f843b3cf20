/*
 * onnx_seeds.c -- seeds for fuzz_onnx beside tests/onnx/'s models: one
 * small model per op the importer takes, each with the attributes and
 * operand kinds (run-time or constant) its checks look at, so mutations
 * start next to every attribute check rather than only the ops the test
 * models happen to use. Written by make-fuzz-corpus into <dir>/onnx/.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../onnx_craft.h"
#include "onnx_seeds.h"

static const int64_t X4[4] = {1, 2, 4, 4}, X2[2] = {1, 4}, ONE[1] = {1}, TWO[1] = {2}, FOUR[1] = {4};
static const float W[32] = {0.5f, -1, 2, 0.25f, 1, -0.5f, 0.75f, 3, 1, 1, 1, 1, 2, 2, 2, 2,
                            -1, 0, 1, 0, 0.5f, 0.5f, 0.5f, 0.5f, 1, 2, 3, 4, 4, 3, 2, 1};

static int seeds_written;

static int write_seed(const char *dir, const char *name, oc_model *m)
{
    char path[1024];
    size_t size;
    unsigned char *bytes = oc_pack(m, &size);
    oc_free(m);
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(bytes, 1, size, f) == size;
    if (f && fclose(f) != 0)
        ok = 0;
    free(bytes);
    if (!ok) {
        fprintf(stderr, "make-fuzz-corpus: cannot write %s\n", path);
        return -1;
    }
    seeds_written++;
    return 0;
}

/* x [1, 2, 4, 4] -> op -> y, the op's attributes set by the caller. */
static oc_model *unary(int64_t opset, const char *op, const char *inputs)
{
    oc_model *m = oc_new(opset);
    oc_input(m, "x", OC_FLOAT, 4, X4);
    oc_node(m, op, inputs, "y");
    oc_output(m, "y");
    return m;
}

/* The elementwise ops, each once. */
static int elementwise(const char *dir)
{
    static const char *const ops[] = {"Relu", "Sigmoid", "Tanh", "Erf", "Identity", "HardSwish", "Mish",
                                      "Softmax", "LogSoftmax", "GlobalAveragePool", "GlobalMaxPool", "Dropout"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (write_seed(dir, ops[i], unary(17, ops[i], "x")) < 0)
            return -1;
    oc_model *m = unary(17, "LeakyRelu", "x");
    oc_attr_float(m, "alpha", 0.1f);
    if (write_seed(dir, "LeakyRelu", m) < 0)
        return -1;
    m = unary(17, "HardSigmoid", "x");
    oc_attr_float(m, "alpha", 0.2f);
    oc_attr_float(m, "beta", 0.5f);
    if (write_seed(dir, "HardSigmoid", m) < 0)
        return -1;
    m = unary(20, "Gelu", "x");
    oc_attr_string(m, "approximate", "tanh");
    if (write_seed(dir, "Gelu", m) < 0)
        return -1;
    m = oc_new(17); /* Sqrt of a constant (folded) */
    oc_input(m, "x", OC_FLOAT, 4, X4);
    oc_init_f32(m, "c", 1, (int64_t[]){4}, W + 8);
    oc_node(m, "Sqrt", "c", "r");
    oc_node(m, "Mul", "x,r", "y");
    oc_output(m, "y");
    if (write_seed(dir, "Sqrt", m) < 0)
        return -1;
    m = unary(17, "Clip", "x,lo,hi");
    oc_init_f32(m, "lo", 0, NULL, W + 1);
    oc_init_f32(m, "hi", 0, NULL, W + 2);
    if (write_seed(dir, "Clip", m) < 0)
        return -1;
    static const char *const binary[] = {"Add", "Sub", "Mul", "Div", "Pow", "Sum"};
    for (size_t i = 0; i < sizeof binary / sizeof *binary; i++) {
        m = unary(17, binary[i], "x,c");
        oc_init_f32(m, "c", 1, (int64_t[]){4}, W);
        if (write_seed(dir, binary[i], m) < 0)
            return -1;
    }
    return 0;
}

/* Convolutions, pools, normalizations, resizes. */
static int spatial(const char *dir)
{
    oc_model *m = unary(17, "Conv", "x,w,b");
    oc_init_f32(m, "w", 4, (int64_t[]){2, 1, 3, 3}, (const float[18]){0});
    oc_init_f32(m, "b", 1, TWO, W);
    oc_attr_ints(m, "kernel_shape", 2, (int64_t[]){3, 3});
    oc_attr_ints(m, "strides", 2, (int64_t[]){2, 1});
    oc_attr_ints(m, "dilations", 2, (int64_t[]){1, 2});
    oc_attr_ints(m, "pads", 4, (int64_t[]){1, 2, 1, 2});
    oc_attr_int(m, "group", 2);
    if (write_seed(dir, "Conv", m) < 0)
        return -1;
    m = unary(17, "ConvTranspose", "x,w");
    oc_init_f32(m, "w", 4, (int64_t[]){2, 1, 2, 2}, W);
    oc_attr_ints(m, "strides", 2, (int64_t[]){2, 2});
    oc_attr_ints(m, "output_padding", 2, (int64_t[]){1, 0});
    oc_attr_int(m, "group", 2);
    if (write_seed(dir, "ConvTranspose", m) < 0)
        return -1;
    static const char *const pools[] = {"MaxPool", "AveragePool"};
    for (int i = 0; i < 2; i++) {
        m = unary(17, pools[i], "x");
        oc_attr_ints(m, "kernel_shape", 2, (int64_t[]){3, 2});
        oc_attr_ints(m, "strides", 2, (int64_t[]){2, 2});
        oc_attr_string(m, "auto_pad", "SAME_UPPER");
        oc_attr_int(m, "ceil_mode", 1);
        if (i)
            oc_attr_int(m, "count_include_pad", 1);
        if (write_seed(dir, pools[i], m) < 0)
            return -1;
    }
    m = unary(17, "BatchNormalization", "x,s,b,mean,var");
    oc_init_f32(m, "s", 1, TWO, W);
    oc_init_f32(m, "b", 1, TWO, W + 2);
    oc_init_f32(m, "mean", 1, TWO, W + 4);
    oc_init_f32(m, "var", 1, TWO, W + 8);
    oc_attr_float(m, "epsilon", 1e-3f);
    if (write_seed(dir, "BatchNormalization", m) < 0)
        return -1;
    m = unary(17, "LayerNormalization", "x,s,b");
    oc_init_f32(m, "s", 1, FOUR, W);
    oc_init_f32(m, "b", 1, FOUR, W + 4);
    oc_attr_int(m, "axis", -1);
    oc_attr_float(m, "epsilon", 1e-5f);
    if (write_seed(dir, "LayerNormalization", m) < 0)
        return -1;
    m = unary(13, "Resize", "x,,scales");
    oc_init_f32(m, "scales", 1, FOUR, (const float[4]){1, 1, 2, 1.5f});
    oc_attr_string(m, "mode", "linear");
    oc_attr_string(m, "coordinate_transformation_mode", "align_corners");
    if (write_seed(dir, "Resize", m) < 0)
        return -1;
    m = unary(13, "Resize", "x,,,sizes");
    oc_init_i64(m, "sizes", 1, FOUR, (const int64_t[4]){1, 2, 3, 8});
    oc_attr_string(m, "mode", "nearest");
    oc_attr_string(m, "nearest_mode", "floor");
    if (write_seed(dir, "Resize_sizes", m) < 0)
        return -1;
    m = unary(9, "Upsample", "x,scales");
    oc_init_f32(m, "scales", 1, FOUR, (const float[4]){1, 1, 2, 2});
    return write_seed(dir, "Upsample", m);
}

/* Layout ops on run-time values and shape arithmetic on constants. */
static int layout(const char *dir)
{
    oc_model *m = unary(17, "Transpose", "x");
    oc_attr_ints(m, "perm", 4, (int64_t[]){0, 2, 3, 1});
    if (write_seed(dir, "Transpose", m) < 0)
        return -1;
    m = unary(13, "Slice", "x,starts,ends,axes,steps");
    oc_init_i64(m, "starts", 1, TWO, (const int64_t[2]){-1, 0});
    oc_init_i64(m, "ends", 1, TWO, (const int64_t[2]){INT64_MIN, INT64_MAX});
    oc_init_i64(m, "axes", 1, TWO, (const int64_t[2]){2, 3});
    oc_init_i64(m, "steps", 1, TWO, (const int64_t[2]){-2, 3});
    if (write_seed(dir, "Slice", m) < 0)
        return -1;
    m = oc_new(18);
    oc_input(m, "x", OC_FLOAT, 4, X4);
    oc_node(m, "Split", "x", "a,b");
    oc_attr_int(m, "axis", 2);
    oc_attr_int(m, "num_outputs", 2);
    oc_output(m, "a");
    oc_output(m, "b");
    if (write_seed(dir, "Split", m) < 0)
        return -1;
    m = unary(13, "Gather", "x,i");
    oc_init_i64(m, "i", 2, (int64_t[]){2, 1}, (const int64_t[2]){-1, 0});
    oc_attr_int(m, "axis", 3);
    if (write_seed(dir, "Gather", m) < 0)
        return -1;
    m = unary(13, "Expand", "x,s");
    oc_init_i64(m, "s", 1, (int64_t[]){5}, (const int64_t[5]){3, 1, 2, 1, 1});
    if (write_seed(dir, "Expand", m) < 0)
        return -1;
    m = unary(13, "Pad", "x,pads,v");
    oc_init_i64(m, "pads", 1, (int64_t[]){8}, (const int64_t[8]){0, 0, 1, -1, 0, 0, 2, 1});
    oc_init_f32(m, "v", 0, NULL, W + 3);
    if (write_seed(dir, "Pad", m) < 0)
        return -1;
    m = unary(13, "Concat", "x,x");
    oc_attr_int(m, "axis", -3);
    if (write_seed(dir, "Concat", m) < 0)
        return -1;
    m = unary(13, "Flatten", "x");
    oc_attr_int(m, "axis", 2);
    if (write_seed(dir, "Flatten", m) < 0)
        return -1;
    /* the exporters' shape arithmetic: Shape -> Gather -> Unsqueeze -> Concat -> Reshape */
    m = oc_new(13);
    oc_input(m, "x", OC_FLOAT, 4, X4);
    oc_node(m, "Shape", "x", "s");
    oc_init_i64(m, "zero", 0, NULL, (const int64_t[1]){0});
    oc_node(m, "Gather", "s,zero", "n");
    oc_attr_int(m, "axis", 0);
    oc_init_i64(m, "ax0", 1, ONE, (const int64_t[1]){0});
    oc_node(m, "Unsqueeze", "n,ax0", "n1");
    oc_init_i64(m, "rest", 1, ONE, (const int64_t[1]){-1});
    oc_node(m, "Concat", "n1,rest", "shape");
    oc_attr_int(m, "axis", 0);
    oc_node(m, "Reshape", "x,shape", "r");
    oc_node(m, "Squeeze", "n1,ax0", "n0");
    oc_node(m, "Cast", "n0", "f");
    oc_attr_int(m, "to", OC_FLOAT);
    oc_node(m, "Mul", "r,f", "y");
    oc_output(m, "y");
    if (write_seed(dir, "shape_arith", m) < 0)
        return -1;
    m = oc_new(13);
    oc_input(m, "x", OC_FLOAT, 2, X2);
    oc_node(m, "Constant", "", "shape");
    oc_attr_tensor_i64(m, "value", 1, ONE, (const int64_t[1]){4});
    oc_node(m, "ConstantOfShape", "shape", "c");
    oc_node(m, "Add", "x,c", "y");
    oc_output(m, "y");
    return write_seed(dir, "ConstantOfShape", m);
}

/* Matrix products, reductions, losses, attention. */
static int dense(const char *dir)
{
    oc_model *m = oc_new(13);
    oc_input(m, "x", OC_FLOAT, 2, X2);
    oc_init_f32(m, "w", 2, (int64_t[]){2, 4}, W);
    oc_init_f32(m, "b", 1, TWO, W + 8);
    oc_node(m, "Gemm", "x,w,b", "y");
    oc_attr_int(m, "transB", 1);
    oc_attr_float(m, "alpha", 0.5f);
    oc_attr_float(m, "beta", 2.0f);
    oc_output(m, "y");
    if (write_seed(dir, "Gemm", m) < 0)
        return -1;
    m = unary(13, "MatMul", "x,w");
    oc_init_f32(m, "w", 2, (int64_t[]){4, 3}, W);
    if (write_seed(dir, "MatMul", m) < 0)
        return -1;
    static const char *const reduce[] = {"ReduceMean", "ReduceSum"};
    for (int i = 0; i < 2; i++) {
        m = unary(13, reduce[i], i ? "x,axes" : "x");
        if (i)
            oc_init_i64(m, "axes", 1, TWO, (const int64_t[2]){-1, 1});
        else
            oc_attr_ints(m, "axes", 2, (int64_t[]){2, 3});
        oc_attr_int(m, "keepdims", i);
        if (write_seed(dir, reduce[i], m) < 0)
            return -1;
    }
    m = oc_new(13);
    oc_input(m, "x", OC_FLOAT, 2, X2);
    oc_input(m, "labels", OC_INT64, 1, ONE);
    oc_node(m, "SoftmaxCrossEntropyLoss", "x,labels", "loss");
    oc_attr_string(m, "reduction", "mean");
    oc_attr_int(m, "ignore_index", -1);
    oc_output(m, "loss");
    if (write_seed(dir, "SoftmaxCrossEntropyLoss", m) < 0)
        return -1;
    m = oc_new(23);
    oc_input(m, "q", OC_FLOAT, 4, (int64_t[]){1, 2, 3, 8});
    oc_input(m, "k", OC_FLOAT, 4, (int64_t[]){1, 1, 5, 8});
    oc_input(m, "v", OC_FLOAT, 4, (int64_t[]){1, 1, 5, 4});
    oc_init_f32(m, "mask", 2, (int64_t[]){3, 5}, W);
    oc_node(m, "Attention", "q,k,v,mask", "y");
    oc_attr_int(m, "is_causal", 1);
    oc_attr_float(m, "scale", 0.5f);
    oc_attr_float(m, "softcap", 20.0f);
    oc_output(m, "y");
    return write_seed(dir, "Attention", m);
}

/* The shape checks folded at import (logic.c): x's shape through the
 * comparisons, logic, Mod, Where, Range, Size and an If of both branches
 * into a Reshape of x, so the result stays a run-time value. */
static int shape_checks(const char *dir)
{
    static const char *const cmp[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                      "And", "Or", "Xor", "Not"};
    static const uint8_t yes = 1;
    static const int64_t zero = 0, two = 2, n32 = 32;
    for (size_t i = 0; i < sizeof cmp / sizeof *cmp; i++) { /* Where(op(shape, 4), shape, [1, 32]) */
        oc_model *m = oc_new(17);
        int logic = i >= 5, unary_op = i == 8;
        oc_input(m, "x", OC_FLOAT, 4, X4);
        oc_init_i64(m, "four", 1, ONE, FOUR);
        oc_init_bool(m, "t", 1, ONE, &yes);
        oc_init_i64(m, "flat", 1, TWO, (const int64_t[]){1, 32});
        oc_node(m, "Shape", "x", "s");
        oc_node(m, "Equal", "s,four", "e");
        oc_node(m, cmp[i], logic ? (unary_op ? "e" : "e,t") : "s,four", "c");
        oc_node(m, "Where", "c,s,s", "target");
        oc_node(m, "Reshape", "x,target", "y");
        oc_output(m, "y");
        if (write_seed(dir, cmp[i], m) < 0)
            return -1;
    }
    oc_model *m = oc_new(17); /* Mod, Size and Range into a Reshape's target */
    oc_input(m, "x", OC_FLOAT, 4, X4);
    oc_init_i64(m, "zero", 0, NULL, &zero);
    oc_init_i64(m, "two", 0, NULL, &two);
    oc_init_i64(m, "n32", 0, NULL, &n32);
    oc_node(m, "Size", "x", "n");
    oc_node(m, "Mod", "n,n32", "r");
    oc_attr_int(m, "fmod", 0);
    oc_node(m, "Add", "r,two", "stop");
    oc_node(m, "Range", "zero,stop,two", "idx"); /* [0]: one value */
    oc_node(m, "Add", "idx,n", "len");
    oc_node(m, "Reshape", "x,len", "y");
    oc_output(m, "y");
    if (write_seed(dir, "Mod", m) < 0)
        return -1;
    m = oc_new(17); /* If of a constant condition, a run-time value in each branch */
    oc_model *then_g = oc_new(17), *else_g = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 4, X4);
    oc_init_bool(m, "c", 0, NULL, &yes);
    oc_node(then_g, "Relu", "x", "t");
    oc_output(then_g, "t");
    oc_node(else_g, "Identity", "x", "e");
    oc_output(else_g, "e");
    oc_node(m, "If", "c", "y");
    oc_attr_graph(m, "then_branch", then_g);
    oc_attr_graph(m, "else_branch", else_g);
    oc_output(m, "y");
    return write_seed(dir, "If", m);
}

int onnx_make_seeds(const char *dir)
{
    seeds_written = 0;
    if (elementwise(dir) < 0 || spatial(dir) < 0 || layout(dir) < 0 || dense(dir) < 0 || shape_checks(dir) < 0)
        return -1;
    return seeds_written;
}
