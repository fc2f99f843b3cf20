/*
 * test_onnx.c -- the ONNX importer (src/onnx/, include/teenycl_onnx.h).
 * forward: the small models of tests/onnx/ (made by make_models.py, which
 * stored onnxruntime's outputs) through the run path teeny-run uses,
 * compared with ONNX's tolerance (|d| <= 1e-7 + 1e-3 |want|, every value
 * written); parameters named after initializers; frozen parameters; one
 * training step of the imported conv net; GroupNormalization's gradients
 * against finite differences. errors: exact statuses for
 * malformed files (truncated, too deeply nested, bad or huge dimensions,
 * short data), unsupported ops and attributes (the message names the
 * node, the op and the attribute), external data that escapes the model's
 * directory or is missing, and seeded mutations of every model.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, symlink */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "onnx/onnx.pb-c.h"
#include "onnx_craft.h"
#include "teenycl_onnx.h"
#include "../tools/onnx_run.h"

#define DIR "tests/onnx"

static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = th_malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

/* An .npy input as a run input at the file's own rank (a 0-d array is a
 * rank-0 feed): fp32, int32, int64, or bool as int32 0/1. */
static void load_npy(teeny_ctx *ctx, const char *path, const char *name, onnx_run_input *in)
{
    teeny_npy_info info;
    TH_OK(ctx, teeny_npy_read(ctx, path, &info, NULL, 0));
    unsigned char *data = th_malloc(info.bytes * 4 + 1);
    TH_OK(ctx, teeny_npy_read(ctx, path, &info, data, info.bytes));
    in->name = name;
    in->ndim = info.ndim;
    for (int i = 0; i < in->ndim; i++)
        in->shape[i] = info.shape[i];
    in->dtype = info.dtype == TEENY_NPY_F32 ? TEENY_ONNX_FLOAT
              : info.dtype == TEENY_NPY_I64 ? TEENY_ONNX_INT64 : TEENY_ONNX_INT32;
    in->is_bool = info.dtype == TEENY_NPY_BOOL;
    for (int64_t i = info.numel - 1; in->is_bool && i >= 0; i--) /* widen in place, back to front */
        ((int32_t *)(void *)data)[i] = data[i];
    in->data = data;
}

static void check_model(const char *name, int n_in, const char *const *in_names)
{
    teeny_ctx *ctx = th_ctx();
    onnx_run_input in[16];
    onnx_run_result r;
    double ms;
    char path[256];
    for (int i = 0; i < n_in; i++) {
        snprintf(path, sizeof path, DIR "/%s.in%d.npy", name, i);
        load_npy(ctx, path, in_names[i], &in[i]);
    }
    snprintf(path, sizeof path, DIR "/%s.onnx", name);
    teeny_status st = onnx_run(ctx, path, 0, n_in, in, 1, &r, &ms);
    ck_assert_msg(st == TEENY_OK, "%s: %s: %s", name, teeny_status_name(st), onnx_run_error(ctx));
    for (int k = 0; k < r.n; k++) {
        teeny_tensor *t;
        snprintf(path, sizeof path, DIR "/%s.out%d.npy", name, k);
        TH_OK(ctx, teeny_npy_load(ctx, path, &t));
        int64_t n = teeny_tensor_numel(t);
        float *want = th_read(t);
        int64_t got_n = 1;
        for (int d = 0; d < r.ndim[k]; d++)
            got_n *= r.shape[k][d];
        ck_assert_msg(got_n == n, "%s output %d: %lld values, want %lld", name, k, (long long)got_n, (long long)n);
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(isfinite(r.data[k][i]) && fabs(r.data[k][i] - want[i]) <= 1e-7 + 1e-3 * fabs(want[i]),
                          "%s output %s[%lld]: got %.9g, want %.9g", name, r.names[k], (long long)i,
                          (double)r.data[k][i], (double)want[i]);
        free(want);
        teeny_tensor_destroy(t);
    }
    onnx_run_result_free(&r);
    for (int i = 0; i < n_in; i++)
        free((void *)in[i].data);
}

START_TEST(test_onnx_models)
{
    static const char *const x[] = {"x"}, *const xl[] = {"x", "labels"}, *const xg[] = {"x", "xt", "b"};
    check_model("convnet", 1, x);
    check_model("shapes", 1, x);
    check_model("conv1d", 1, x);
    check_model("external", 1, x);
    check_model("sce", 2, xl);
    check_model("sce_options", 2, xl); /* weights, ignore_index, reductions none and sum, log_prob */
    static const char *const xlw[] = {"x", "labels", "cw"};
    check_model("sce_nd", 3, xlw); /* scores [N, C, d], labels [N, d], run-time weights */
    check_model("pools", 1, x);
    static const char *const xx1[] = {"x", "x1"};
    check_model("convt", 2, xx1); /* ConvTranspose: groups, pads, output_padding, SAME_LOWER, output_shape, 1-D */
    check_model("gemm", 3, xg);
    check_model("resize", 1, x);
    check_model("upsample", 1, x);
    static const char *const qkv[] = {"q4", "k4", "v4", "q3", "k3", "v3", "mask", "past_k", "past_v", "k4b", "v4b"};
    check_model("attention", 11, qkv); /* ONNX Attention: GQA, 3-D, past/present, causal, masks, softcap, qk output */
    static const char *const qkvm[] = {"q", "k", "v", "m"};
    check_model("attn_fused", 4, qkvm); /* PyTorch's MatMul-Softmax-MatMul, fused at import */
    check_model("attn_nofuse", 3, qkvm); /* the same with a second consumer: left as it is */
    check_model("bn_act", 1, x); /* batch norm + Relu / SiLU fused at import, and where it is not */
    check_model("conv_act", 1, x); /* Conv + HardSwish / Clip(0, 6) fused at import, and where they are not */
    check_model("shared", 1, x); /* initializers feeding two or three nodes */
    check_model("fashion_cnn", 1, x); /* finetune_onnx's Fashion-MNIST model */
    check_model("gelu", 1, x);        /* PyTorch's exact GELU, fused at import, and where it is not */
    static const char *const abcxe[] = {"a", "b", "c", "x", "e"};
    check_model("scalar_feed", 5, abcxe); /* rank-0 inputs from 0-d .npy files: a Gemm bias, a Pow exponent */
    static const char *const x_ends[] = {"x", "ends"};
    check_model("slice_feed", 2, x_ends); /* Slice's ends INT64_MAX from an int64 .npy feed (a constant) */
    check_model("shape_checks", 1, x); /* attention's exported shape checks (Equal, Mod, Where, Range, If, ...), folded */
    static const char *const x34[] = {"x3", "x4"};
    check_model("norms_instance", 2, x34); /* InstanceNormalization 3-D, 4-D, epsilon; PyTorch's GroupNorm(1, C) */
    check_model("norms_group18", 2, x34);  /* GroupNormalization-18: scale and bias per group; G = 1, C, between */
    check_model("norms_group21", 2, x34);  /* GroupNormalization-21: per channel; stash_type */
    check_model("tile", 1, x);   /* Tile of run-time values (the batch axis too) and of a constant */
    check_model("cumsum", 1, x); /* CumSum: axes 1, 2, -1; exclusive, reverse; of a constant */
    static const char *const qkvam[] = {"q", "k", "v", "a", "m"};
    check_model("einsum", 5, qkvam); /* Einsum: attention's contractions, matmuls, transpose, reductions, implicit */
    static const char *const xxmym[] = {"x", "xm", "y", "m"};
    check_model("rank6", 4, xxmym); /* rank 6..8 Reshape/Transpose (Swin, MaxViT), ScatterND, Shape(Sigmoid) */
    static const char *const es[] = {"q", "k", "m1", "m2", "t1", "t2", "v1", "v2", "p1", "p2"};
    check_model("einsum_maxvit", 10, es); /* MaxViT's contractions, permuted outputs, implicit output, a scalar */
}
END_TEST

static teeny_onnx_model *load_ok(const char *name, const teeny_onnx_params *p)
{
    teeny_ctx *ctx = th_ctx();
    teeny_onnx_model *m = NULL;
    char path[256];
    snprintf(path, sizeof path, DIR "/%s.onnx", name);
    TH_OK(ctx, teeny_onnx_load(ctx, path, p, &m));
    return m;
}

/* Whether the graph has a node named name (prefix: whose name starts so). */
static int has_node_as(const teeny_graph *g, const char *name, int prefix)
{
    for (int i = 0; i < teeny_graph_node_count(g); i++) {
        const char *nm;
        if (teeny_graph_node_info(g, i, &nm, NULL, NULL) == TEENY_OK &&
            (prefix ? !strncmp(nm, name, strlen(name)) : !strcmp(nm, name)))
            return 1;
    }
    return 0;
}

static int has_node(const teeny_graph *g, const char *name)
{
    return has_node_as(g, name, 0);
}

/* Attention maps to the fused kernel where nothing masks or caps the
 * scores (grouped queries folded per key/value head) and, with masks,
 * where the mask's shape fits the kernel's broadcasting (teeny_graph_attention_ex);
 * it decomposes where the scores are wanted or the heads are grouped. */
START_TEST(test_onnx_attention_paths)
{
    teeny_onnx_model *m = load_ok("attention", NULL);
    const teeny_graph *g = teeny_onnx_graph(m);
    ck_assert(has_node(g, "gqa.attention") && !has_node(g, "gqa.probs"));
    ck_assert(has_node(g, "dec.probs") && has_node(g, "dec.causal") && !has_node(g, "dec.attention"));
    ck_assert(has_node(g, "bmask.attention") && !has_node(g, "bmask.probs"));
    teeny_onnx_destroy(m);
    /* PyTorch's exports: SDPA's, the hand-written and the masked chain
     * become the fused kernel; nothing of the chains' own nodes is left (no
     * MatMul node named after the scores) */
    m = load_ok("attn_fused", NULL);
    g = teeny_onnx_graph(m);
    ck_assert(has_node(g, "sdpa.attention") && has_node(g, "hand.attention"));
    ck_assert(has_node(g, "masked.attention") && !has_node(g, "masked.probs"));
    static const char *const chain_ops[] = {"MatMul_", "Softmax_", "Transpose_", "Mul_", "Div_", "Add_"};
    for (int i = 0; i < 6; i++) /* the chains' nodes are unnamed: they would be "<op>_<index>" */
        ck_assert_msg(!has_node_as(g, chain_ops[i], 1), "a %s node is left", chain_ops[i]);
    teeny_onnx_destroy(m);
    /* a second consumer of the probabilities or the scores: no fusion */
    m = load_ok("attn_nofuse", NULL);
    g = teeny_onnx_graph(m);
    ck_assert(!has_node(g, "probs_out.attention") && !has_node(g, "twice_out.attention"));
    ck_assert(has_node(g, "Softmax_2") && has_node(g, "Softmax_6"));
    teeny_onnx_destroy(m);
}
END_TEST

/* Batch norm followed by Relu or x * Sigmoid(x), the activation its only
 * consumer, imports as one node (teeny_graph_batchnorm_act): no activation
 * node is left for bn1-bn3 (their Relu and Mul nodes would be named
 * "Relu_1", "silu..." after the ONNX node); bn4 (also a graph output) and
 * bn5 (a second consumer) keep their Relu. The values match onnxruntime's
 * (test_onnx_models). */
START_TEST(test_onnx_bn_act_fused)
{
    teeny_onnx_model *m = load_ok("bn_act", NULL);
    const teeny_graph *g = teeny_onnx_graph(m);
    ck_assert(has_node(g, "bn1") && has_node(g, "bn2") && has_node(g, "bn3"));
    ck_assert_msg(!has_node_as(g, "Relu_1", 0), "bn1's Relu is a node of its own");
    ck_assert_msg(!has_node_as(g, "Mul_4", 1) && !has_node_as(g, "Mul_7", 1), "a SiLU is a node of its own");
    ck_assert_msg(has_node_as(g, "Relu_9", 1), "bn4 (a graph output) lost its Relu");
    ck_assert_msg(has_node_as(g, "Relu_11", 1), "bn5 (two consumers) lost its Relu");
    /* x, 5 batch norms with a view before and after each, 2 Relu, 2 Add: without the fusion, 23 */
    ck_assert_int_eq(teeny_graph_node_count(g), 1 + 5 * 3 + 2 + 2);
    teeny_onnx_destroy(m);
}
END_TEST

/* Conv followed by Relu or x * Sigmoid(x), the activation its only
 * consumer, imports as one node (teeny_graph_conv2d_act_ex): shared.onnx's
 * conv0 and conv1 lose their Relu nodes ("Relu_1", "Relu_3"), fc1's Relu
 * ("Relu_10", after a Gemm) stays; convnet.onnx's conv2 loses its SiLU.
 * So do HardSwish and Clip(0, 6) with either kind of constant bounds
 * (conv_act.onnx), but not Clip to other bounds or a HardSwish whose Conv
 * has a second consumer. The values match onnxruntime's (test_onnx_models),
 * and shared.onnx trains through the fused nodes (test_onnx_shared_*). */
START_TEST(test_onnx_conv_act_fused)
{
    teeny_onnx_model *m = load_ok("shared", NULL);
    const teeny_graph *g = teeny_onnx_graph(m);
    ck_assert(has_node(g, "conv0") && has_node(g, "conv1"));
    ck_assert_msg(!has_node(g, "Relu_1") && !has_node(g, "Relu_3"), "a convolution's Relu is a node of its own");
    ck_assert_msg(has_node(g, "Relu_10"), "the Gemm's Relu was lost");
    teeny_onnx_destroy(m);
    m = load_ok("convnet", NULL);
    g = teeny_onnx_graph(m);
    ck_assert_msg(!has_node_as(g, "silu", 1), "conv2's SiLU is a node of its own");
    teeny_onnx_destroy(m);
    m = load_ok("conv_act", NULL);
    g = teeny_onnx_graph(m);
    for (int i = 1; i <= 5; i++) {
        char conv[8];
        snprintf(conv, sizeof conv, "conv%d", i);
        ck_assert_msg(has_node(g, conv), "no node %s", conv);
    }
    ck_assert_msg(!has_node(g, "relu6_const") && !has_node(g, "relu6_init"), "a ReLU6 is a node of its own");
    ck_assert_msg(!has_node(g, "hswish"), "conv3's HardSwish is a node of its own");
    ck_assert_msg(has_node(g, "clip_other") && has_node(g, "hswish_shared"), "an activation that stays was lost");
    teeny_onnx_destroy(m);
}
END_TEST

/* The exact GELU as PyTorch exports it (Div or Mul, Erf, Add, Mul, Mul)
 * imports as one GELU node named after its last Mul ("div", "mul"): none
 * of the chain's Erf nodes is left ("Erf_1", "Erf_6" by the ONNX node
 * index). Where a constant is not GELU's ("quarter") or a value of the
 * chain is also a graph output ("erf_out") the nodes stay as they are.
 * The values match onnxruntime's (test_onnx_models). */
START_TEST(test_onnx_gelu_fused)
{
    teeny_onnx_model *m = load_ok("gelu", NULL);
    const teeny_graph *g = teeny_onnx_graph(m);
    ck_assert(has_node(g, "div") && has_node(g, "mul"));
    ck_assert_msg(!has_node(g, "Erf_1") && !has_node(g, "Erf_6"), "a GELU chain's Erf is a node of its own");
    ck_assert_msg(has_node(g, "Erf_11") && has_node(g, "Erf_16"), "a chain that is not GELU's was fused");
    /* x, the four constants the unfused chains read, 2 GELUs, 2 chains of 5 */
    ck_assert_int_eq(teeny_graph_node_count(g), 1 + 4 + 2 + 2 * 5);
    teeny_onnx_destroy(m);
}
END_TEST

/* Parameters carry the initializers' names; state the running statistics'. */
START_TEST(test_onnx_names)
{
    static const char *const want[] = {"conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias",
                                       "conv2.weight", "conv2.bias", "fc.weight", "fc.bias"};
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    p.batch = 3;
    teeny_onnx_model *m = load_ok("convnet", &p);
    teeny_graph *g = teeny_onnx_graph(m);
    ck_assert_int_eq(teeny_onnx_batch(m), 3);
    ck_assert_int_eq(teeny_graph_param_count(g), 8);
    for (int i = 0; i < 8; i++) {
        const char *name;
        TH_OK(th_ctx(), teeny_graph_param(g, i, &name, NULL, NULL));
        ck_assert_str_eq(name, want[i]);
    }
    const char *sname;
    ck_assert_int_eq(teeny_graph_state_count(g), 2);
    TH_OK(th_ctx(), teeny_graph_state(g, 1, &sname, NULL));
    ck_assert_str_eq(sname, "bn1.running_var");
    /* the weight holds the initializer's values */
    teeny_tensor *w;
    TH_OK(th_ctx(), teeny_graph_param(g, 6, NULL, &w, NULL));
    ck_assert_int_eq(teeny_tensor_dim(w, 0), 5);
    ck_assert_int_eq(teeny_onnx_input_count(m), 1);
    ck_assert_int_eq(teeny_onnx_output_count(m), 1);
    const char *oname;
    int ndim;
    int64_t shape[TEENY_ONNX_MAX_DIMS];
    TH_OK(th_ctx(), teeny_onnx_output(m, 0, &oname, NULL, &ndim, shape));
    ck_assert_str_eq(oname, "logits");
    ck_assert_int_eq(ndim, 2);
    ck_assert_int_eq(shape[0], 3);
    TH_STATUS(th_ctx(), TEENY_ERR_ARG, teeny_onnx_output(m, 1, NULL, NULL, NULL, NULL));
    TH_STATUS(th_ctx(), TEENY_ERR_ARG, teeny_onnx_set_trainable(m, "no.such", 0));
    teeny_onnx_destroy(m);
    /* a folded output reads without a plan */
    m = load_ok("shapes", NULL);
    float v[3];
    TH_OK(th_ctx(), teeny_onnx_output_read(m, NULL, 1, v, 3));
    ck_assert(v[0] == 4.0f && v[1] == 3.0f && v[2] == 3.0f);
    TH_STATUS(th_ctx(), TEENY_ERR_ARG, teeny_onnx_output_read(m, NULL, 1, v, 2));
    teeny_onnx_destroy(m);
}
END_TEST

/* One training step of the imported conv net: a loss added on the logits,
 * gradients for every trainable initializer (none for a frozen one), an
 * SGD step that moves them, and a checkpoint under the ONNX names. */
START_TEST(test_onnx_train_step)
{
    teeny_ctx *ctx = th_ctx();
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    p.batch = 2;
    teeny_onnx_model *m = load_ok("convnet", &p);
    teeny_graph *g = teeny_onnx_graph(m);
    teeny_node logits, labels, loss, x;
    TH_OK(ctx, teeny_onnx_output(m, 0, NULL, &logits, NULL, NULL));
    TH_OK(ctx, teeny_onnx_input(m, 0, NULL, &x, NULL));
    TH_OK(ctx, teeny_graph_labels(g, "labels", &labels));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", logits, labels, &loss));
    TH_OK(ctx, teeny_onnx_set_trainable(m, "conv2.bias", 0));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = 2;
    pp.loss = loss;
    teeny_plan *plan;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &plan));
    teeny_tensor *tx, *tl;
    float xs[2 * 3 * 8 * 8];
    int32_t ls[2] = {1, 4};
    th_rng rng = th_rng_make(18);
    th_fill_normal(&rng, xs, 2 * 3 * 8 * 8, 0.0, 1.0);
    TH_OK(ctx, teeny_plan_tensor(plan, x, &tx));
    TH_OK(ctx, teeny_plan_tensor(plan, labels, &tl));
    TH_OK(ctx, teeny_tensor_write(tx, xs, 2 * 3 * 8 * 8));
    TH_OK(ctx, teeny_tensor_write_i32(tl, ls, 2));
    TH_OK(ctx, teeny_plan_forward(plan));
    TH_OK(ctx, teeny_plan_backward(plan));
    teeny_tensor *params[8], *grads[8];
    int n = 0;
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        const char *name;
        teeny_tensor *v, *gr;
        TH_OK(ctx, teeny_graph_param(g, i, &name, &v, &gr));
        if (!strcmp(name, "conv2.bias")) {
            ck_assert_msg(gr == NULL, "a frozen parameter has a gradient");
            continue;
        }
        ck_assert_msg(gr != NULL, "%s has no gradient", name);
        float *d = th_read(gr);
        double sum = 0.0;
        for (int64_t k = 0; k < teeny_tensor_numel(gr); k++) {
            ck_assert_msg(isfinite(d[k]), "%s gradient[%lld] is not finite", name, (long long)k);
            sum += fabs(d[k]);
        }
        ck_assert_msg(sum > 0.0, "%s has an all-zero gradient", name);
        free(d);
        params[n] = v;
        grads[n++] = gr;
    }
    ck_assert_int_eq(n, 7);
    float before = 0.0f, after = 0.0f;
    TH_OK(ctx, teeny_plan_read_loss(plan, &before));
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    op.lr = 0.05f;
    teeny_optimizer *opt;
    TH_OK(ctx, teeny_optimizer_create(ctx, &op, n, params, (const teeny_tensor *const *)grads, &opt));
    TH_OK(ctx, teeny_optimizer_step(opt, 0.05f, 0.9f));
    TH_OK(ctx, teeny_plan_forward(plan));
    TH_OK(ctx, teeny_plan_read_loss(plan, &after));
    ck_assert_msg(after < before, "one SGD step did not lower the loss (%g -> %g)", before, after);
    /* checkpoints use the initializer names */
    char path[256];
    snprintf(path, sizeof path, "%s/teeny-onnx-ckpt-%d.safetensors", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    TH_OK(ctx, teeny_graph_save(g, NULL, path, 0, NULL, NULL));
    teeny_st_file *f;
    TH_OK(ctx, teeny_st_open(path, &f));
    int ndim;
    int64_t shape[TEENY_ST_MAX_DIMS];
    TH_OK(ctx, teeny_st_info(f, "fc.weight", NULL, &ndim, shape));
    TH_OK(ctx, teeny_st_info(f, "bn1.running_mean", NULL, NULL, NULL));
    TH_OK(ctx, teeny_st_info(f, "bn1.num_batches_tracked", NULL, NULL, NULL));
    teeny_st_file_destroy(f);
    TH_OK(ctx, teeny_graph_load(g, NULL, path));
    unlink(path);
    teeny_optimizer_destroy(opt);
    teeny_plan_destroy(plan);
    teeny_onnx_destroy(m);
}
END_TEST

/* GroupNormalization (opset 21, 2 groups of 3 channels) after a 1-D
 * 1x1 Conv, trained: the gradients of the Conv's weight and bias (through
 * the normalization's reduce and binary nodes) and of the norm's scale
 * and bias (its depthwise conv's parameters) against central finite
 * differences of the loss. The PyTorch-style InstanceNormalization of
 * Constant ones and zeros ("pf" in norms_instance) adds no parameter,
 * nor does a scale another op reads too ("gs" in norms_group21). */
START_TEST(test_onnx_norm_grad)
{
    teeny_ctx *ctx = th_ctx();
    enum { B = 2, C = 6, L = 5 };
    th_rng rng = th_rng_make(4204);
    float wv[C * C], bv[C], sv[C], ov[C], xs[B * C * L];
    th_fill_normal(&rng, wv, C * C, 0.0, 0.5);
    th_fill_normal(&rng, bv, C, 0.0, 0.5);
    th_fill_normal(&rng, sv, C, 1.0, 0.3);
    th_fill_normal(&rng, ov, C, 0.0, 0.3);
    th_fill_normal(&rng, xs, B * C * L, 0.5, 1.5);
    oc_model *om = oc_new(21);
    oc_input(om, "x", OC_FLOAT, 3, (int64_t[]){-1, C, L});
    oc_init_f32(om, "w", 3, (int64_t[]){C, C, 1}, wv);
    oc_init_f32(om, "b", 1, (int64_t[]){C}, bv);
    oc_init_f32(om, "s", 1, (int64_t[]){C}, sv);
    oc_init_f32(om, "o", 1, (int64_t[]){C}, ov);
    oc_node(om, "Conv", "x,w,b", "h");
    oc_attr_ints(om, "kernel_shape", 1, (int64_t[]){1});
    oc_node(om, "GroupNormalization", "h,s,o", "y");
    oc_attr_int(om, "num_groups", 2);
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
    const int32_t lab[B] = {7, 22};
    int np = teeny_graph_param_count(g);
    ck_assert_int_eq(np, 4);
    char what[96];
    snprintf(what, sizeof what, "GroupNormalization 2 of %d channels, [%d, %d, %d], seed 4204", C, B, C, L);
    th_check_fd_grads(g, loss, xs, B * C * L, lab, B, what);
    teeny_onnx_destroy(m);
    m = load_ok("norms_instance", NULL);
    ck_assert_int_eq(teeny_graph_param_count(teeny_onnx_graph(m)), 4); /* in3 and in4's scale and B; pf none */
    teeny_onnx_destroy(m);
    m = load_ok("norms_group21", NULL); /* gs's scale and bias, read by a Reshape too: graph constants */
    ck_assert_int_eq(teeny_graph_param_count(teeny_onnx_graph(m)), 8);
    ck_assert(has_node(teeny_onnx_graph(m), "gs.scaled") && !has_node(teeny_onnx_graph(m), "g1.scaled"));
    teeny_onnx_destroy(m);
}
END_TEST

/* With freeze, no parameter gets a gradient until made trainable. */
START_TEST(test_onnx_freeze)
{
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    p.freeze = 1;
    teeny_onnx_model *m = load_ok("convnet", &p);
    teeny_graph *g = teeny_onnx_graph(m);
    teeny_node logits, labels, loss;
    TH_OK(th_ctx(), teeny_onnx_output(m, 0, NULL, &logits, NULL, NULL));
    TH_OK(th_ctx(), teeny_graph_labels(g, "labels", &labels));
    TH_OK(th_ctx(), teeny_graph_softmax_cross_entropy(g, "loss", logits, labels, &loss));
    TH_OK(th_ctx(), teeny_onnx_set_trainable(m, "fc.weight", 1));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = teeny_onnx_batch(m);
    pp.loss = loss;
    teeny_plan *plan;
    TH_OK(th_ctx(), teeny_graph_compile(g, &pp, &plan));
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        const char *name;
        teeny_tensor *gr;
        TH_OK(th_ctx(), teeny_graph_param(g, i, &name, NULL, &gr));
        ck_assert_msg((gr != NULL) == !strcmp(name, "fc.weight"), "%s: gradient %p", name, (void *)gr);
    }
    teeny_plan_destroy(plan);
    teeny_onnx_destroy(m);
}
END_TEST

/* ---- shared initializers ---- */

typedef struct {
    teeny_onnx_model *m;
    teeny_plan *plan;
    float loss;
} onnx_trained;

/* Import name at batch 2 (freeze as given), add a cross-entropy loss,
 * compile, and run one forward and backward on a seeded batch. */
static onnx_trained shared_step(const char *name, int freeze, const char *trainable)
{
    teeny_ctx *ctx = th_ctx();
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    onnx_trained r = {0};
    p.batch = 2;
    p.freeze = freeze;
    r.m = load_ok(name, &p);
    if (trainable)
        TH_OK(ctx, teeny_onnx_set_trainable(r.m, trainable, 1));
    teeny_graph *g = teeny_onnx_graph(r.m);
    teeny_node logits, labels, loss, x;
    TH_OK(ctx, teeny_onnx_output(r.m, 0, NULL, &logits, NULL, NULL));
    TH_OK(ctx, teeny_onnx_input(r.m, 0, NULL, &x, NULL));
    TH_OK(ctx, teeny_graph_labels(g, "labels", &labels));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", logits, labels, &loss));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = 2;
    pp.loss = loss;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &r.plan));
    teeny_tensor *tx, *tl;
    float xs[2 * 3 * 6 * 6];
    int32_t ls[2] = {3, 1};
    th_rng rng = th_rng_make(1801);
    th_fill_normal(&rng, xs, 2 * 3 * 6 * 6, 0.0, 1.0);
    TH_OK(ctx, teeny_plan_tensor(r.plan, x, &tx));
    TH_OK(ctx, teeny_plan_tensor(r.plan, labels, &tl));
    TH_OK(ctx, teeny_tensor_write(tx, xs, 2 * 3 * 6 * 6));
    TH_OK(ctx, teeny_tensor_write_i32(tl, ls, 2));
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        teeny_tensor *gr;
        TH_OK(ctx, teeny_graph_param(g, i, NULL, NULL, &gr));
        if (gr)
            th_poison(gr);
    }
    TH_OK(ctx, teeny_plan_forward(r.plan));
    TH_OK(ctx, teeny_plan_backward(r.plan));
    TH_OK(ctx, teeny_plan_read_loss(r.plan, &r.loss));
    return r;
}

static float *param_named(teeny_onnx_model *m, const char *name, int grad, int64_t *n)
{
    teeny_graph *g = teeny_onnx_graph(m);
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        const char *pname;
        teeny_tensor *v, *gr;
        TH_OK(th_ctx(), teeny_graph_param(g, i, &pname, &v, &gr));
        if (!strcmp(pname, name)) {
            *n = teeny_tensor_numel(v);
            if (grad && !gr)
                return NULL;
            return th_read(grad ? gr : v);
        }
    }
    ck_abort_msg("no parameter %s", name);
    return NULL;
}

/* One parameter per shared initializer (under its ONNX name), whose
 * gradient is the sum of its uses' -- the model with a copy per use is the
 * reference, bit for bit (summed as the graph does: the latest use first)
 * -- with the loss equal to the copies'; freezing applies to every use; a
 * checkpoint holds it once. */
START_TEST(test_onnx_shared)
{
    teeny_ctx *ctx = th_ctx();
    static const char *const names[] = {"w0", "b0", "w", "b", "w3", "fc.w", "fc.b", "fc.b2"};
    static const char *const uses[][3] = {{"w", "w_copy1", NULL}, {"b", "b_copy1", "b_copy2"},
                                          {"fc.w", "fc.w_copy1", NULL}};
    onnx_trained t = shared_step("shared", 0, NULL), u = shared_step("shared_untied", 0, NULL);
    teeny_graph *g = teeny_onnx_graph(t.m);
    ck_assert_int_eq(teeny_graph_param_count(g), 8);
    ck_assert_int_eq(teeny_graph_param_count(teeny_onnx_graph(u.m)), 12);
    for (int i = 0; i < 8; i++) {
        const char *name;
        TH_OK(ctx, teeny_graph_param(g, i, &name, NULL, NULL));
        ck_assert_str_eq(name, names[i]);
    }
    ck_assert_msg(t.loss == u.loss, "loss %.9g, with copies %.9g", t.loss, u.loss);
    for (size_t k = 0; k < sizeof uses / sizeof *uses; k++) {
        int64_t n, m;
        float *got = param_named(t.m, uses[k][0], 1, &n), *want = NULL;
        for (int c = 2; c >= 0; c--) {
            if (!uses[k][c])
                continue;
            float *d = param_named(u.m, uses[k][c], 1, &m);
            ck_assert_int_eq(m, n);
            if (!want) {
                want = d;
                continue;
            }
            for (int64_t i = 0; i < n; i++)
                want[i] += d[i];
            free(d);
        }
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(isfinite(got[i]) && got[i] == want[i], "%s gradient[%lld]: %.9g, the copies' sum %.9g",
                          uses[k][0], (long long)i, (double)got[i], (double)want[i]);
        free(got);
        free(want);
    }
    /* one checkpoint entry per initializer, under its ONNX name; it loads back */
    char path[256];
    snprintf(path, sizeof path, "%s/teeny-onnx-shared-%d.safetensors", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    TH_OK(ctx, teeny_graph_save(g, NULL, path, 0, NULL, NULL));
    teeny_st_file *f;
    TH_OK(ctx, teeny_st_open(path, &f));
    for (int i = 0; i < 8; i++)
        TH_OK(ctx, teeny_st_info(f, names[i], NULL, NULL, NULL));
    ck_assert_int_eq(teeny_st_count(f), 8);
    teeny_st_file_destroy(f);
    TH_OK(ctx, teeny_graph_load(g, NULL, path));
    TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_graph_load(teeny_onnx_graph(u.m), NULL, path));
    unlink(path);
    teeny_plan_destroy(t.plan);
    teeny_onnx_destroy(t.m);
    teeny_plan_destroy(u.plan);
    teeny_onnx_destroy(u.m);
    /* frozen at import, "b" made trainable: only it has a gradient, the sum over its three uses */
    t = shared_step("shared", 1, "b");
    u = shared_step("shared_untied", 0, NULL);
    g = teeny_onnx_graph(t.m);
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        const char *name;
        teeny_tensor *gr;
        TH_OK(ctx, teeny_graph_param(g, i, &name, NULL, &gr));
        ck_assert_msg((gr != NULL) == !strcmp(name, "b"), "%s: gradient %p", name, (void *)gr);
    }
    int64_t n, m;
    float *got = param_named(t.m, "b", 1, &n), *b2 = param_named(u.m, "b_copy2", 1, &m),
          *b1 = param_named(u.m, "b_copy1", 1, &m), *b0 = param_named(u.m, "b", 1, &m);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == (b2[i] + b1[i]) + b0[i], "frozen import, b trainable: gradient[%lld] %.9g",
                      (long long)i, (double)got[i]);
    free(got);
    free(b0);
    free(b1);
    free(b2);
    teeny_plan_destroy(t.plan);
    teeny_onnx_destroy(t.m);
    teeny_plan_destroy(u.plan);
    teeny_onnx_destroy(u.m);
    /* uses that would hold different values, or statistics, are refused */
    teeny_onnx_model *bad = NULL;
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_onnx_load(ctx, DIR "/bad_shared_layout.onnx", NULL, &bad));
    const char *msg = teeny_last_error(ctx);
    ck_assert_msg(strstr(msg, "\"gemm_n\"") && strstr(msg, "Gemm") && strstr(msg, "\"m\"") &&
                      strstr(msg, "different layouts"), "%s", msg);
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_onnx_load(ctx, DIR "/bad_shared_state.onnx", NULL, &bad));
    msg = teeny_last_error(ctx);
    ck_assert_msg(strstr(msg, "\"bn_b\"") && strstr(msg, "BatchNormalization") && strstr(msg, "statistics"), "%s",
                  msg);
    ck_assert_ptr_null(bad);
}
END_TEST

/* ---- errors ---- */

enum { V_OK, V_NEG_DIM, V_HUGE, V_SHORT, V_EXT, V_OPSET5 };

/* A one-Conv model (x [1, 1, 4, 4], W [1, 1, 3, 3]) packed with
 * protobuf-c, its weight varied; ext: the external data location. */
static unsigned char *conv_model(int variant, const char *ext, size_t *size)
{
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    Onnx__NodeProto node = ONNX__NODE_PROTO__INIT, *nodes[1] = {&node};
    Onnx__TensorProto w = ONNX__TENSOR_PROTO__INIT, *inits[1] = {&w};
    Onnx__StringStringEntryProto loc = ONNX__STRING_STRING_ENTRY_PROTO__INIT, *locs[1] = {&loc};
    Onnx__ValueInfoProto xi = ONNX__VALUE_INFO_PROTO__INIT, yi = ONNX__VALUE_INFO_PROTO__INIT;
    Onnx__ValueInfoProto *ins[1] = {&xi}, *outs[1] = {&yi};
    Onnx__TypeProto xt = ONNX__TYPE_PROTO__INIT;
    Onnx__TypeProto__Tensor xtt = ONNX__TYPE_PROTO__TENSOR__INIT;
    Onnx__TensorShapeProto xs = ONNX__TENSOR_SHAPE_PROTO__INIT;
    Onnx__TensorShapeProto__Dimension dims[4], *dimp[4];
    int64_t wdims[4] = {1, 1, 3, 3};
    float wdata[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    char *node_in[2] = {"x", "W"}, *node_out[1] = {"y"};
    for (int i = 0; i < 4; i++) {
        onnx__tensor_shape_proto__dimension__init(&dims[i]);
        dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims[i].dim_value = i < 2 ? 1 : 4;
        dimp[i] = &dims[i];
    }
    xs.n_dim = 4;
    xs.dim = dimp;
    xtt.has_elem_type = 1;
    xtt.elem_type = 1;
    xtt.shape = &xs;
    xt.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    xt.tensor_type = &xtt;
    xi.name = "x";
    xi.type = &xt;
    yi.name = "y";
    if (variant == V_NEG_DIM)
        wdims[1] = -1;
    if (variant == V_HUGE)
        wdims[0] = wdims[1] = wdims[2] = (int64_t)1 << 20;
    w.name = "W";
    w.n_dims = 4;
    w.dims = wdims;
    w.has_data_type = 1;
    w.data_type = 1;
    w.has_raw_data = variant != V_EXT;
    w.raw_data.len = variant == V_SHORT ? 8 : sizeof wdata;
    w.raw_data.data = (uint8_t *)wdata;
    if (variant == V_EXT) {
        loc.key = "location";
        loc.value = (char *)ext;
        w.n_external_data = 1;
        w.external_data = locs;
        w.has_data_location = 1;
        w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    }
    node.n_input = 2;
    node.input = node_in;
    node.n_output = 1;
    node.output = node_out;
    node.op_type = "Conv";
    node.name = "c";
    graph.n_node = 1;
    graph.node = nodes;
    graph.n_initializer = 1;
    graph.initializer = inits;
    graph.n_input = 1;
    graph.input = ins;
    graph.n_output = 1;
    graph.output = outs;
    opset.domain = "";
    opset.has_version = 1;
    opset.version = variant == V_OPSET5 ? 5 : 17;
    model.has_ir_version = 1;
    model.ir_version = 8;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.graph = &graph;
    *size = onnx__model_proto__get_packed_size(&model);
    unsigned char *buf = th_malloc(*size);
    onnx__model_proto__pack(&model, buf);
    return buf;
}

static teeny_status load_bytes(const unsigned char *data, size_t size, const char *base_dir)
{
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    teeny_onnx_model *m = (teeny_onnx_model *)&p; /* must become NULL on failure */
    p.base_dir = base_dir;
    teeny_status st = teeny_onnx_load_memory(th_ctx(), data, size, &p, &m);
    ck_assert_msg(st == TEENY_OK ? m != NULL : m == NULL, "*out not NULL after a failure");
    if (st != TEENY_OK)
        ck_assert_msg(teeny_last_error(th_ctx())[0], "an error without a message");
    teeny_onnx_destroy(m);
    return st;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f && fwrite(data, 1, n, f) == n, "writing %s", path);
    fclose(f);
}

START_TEST(test_onnx_malformed)
{
    size_t size;
    unsigned char *ok = conv_model(V_OK, NULL, &size), *b;
    ck_assert_int_eq(load_bytes(ok, size, NULL), TEENY_OK);
    ck_assert_int_eq(load_bytes(ok, size / 2, NULL), TEENY_ERR_FORMAT);     /* truncated */
    ck_assert_int_eq(load_bytes(ok, size - 1, NULL), TEENY_ERR_FORMAT);
    free(ok);
    b = conv_model(V_NEG_DIM, NULL, &size);
    ck_assert_int_eq(load_bytes(b, size, NULL), TEENY_ERR_FORMAT);
    free(b);
    b = conv_model(V_HUGE, NULL, &size);
    ck_assert_int_eq(load_bytes(b, size, NULL), TEENY_ERR_RANGE);
    free(b);
    b = conv_model(V_SHORT, NULL, &size);
    ck_assert_int_eq(load_bytes(b, size, NULL), TEENY_ERR_FORMAT);
    ck_assert_msg(strstr(teeny_last_error(th_ctx()), "initializer \"W\""), "%s", teeny_last_error(th_ctx()));
    free(b);
    b = conv_model(V_OPSET5, NULL, &size);
    ck_assert_int_eq(load_bytes(b, size, NULL), TEENY_ERR_UNSUPPORTED);
    free(b);
    /* make fuzz: a MaxPool whose output list is empty (its handler read output[0], UBSan) */
    b = slurp(DIR "/fuzz-no-outputs.onnx", &size);
    ck_assert_int_eq(load_bytes(b, size, DIR), TEENY_ERR_FORMAT);
    ck_assert_msg(strstr(teeny_last_error(th_ctx()), "MaxPool") && strstr(teeny_last_error(th_ctx()), "no outputs"),
                  "%s", teeny_last_error(th_ctx()));
    free(b);
    /* make fuzz: an initializer of 96 bytes whose dimensions claim 1e9 floats: refused before the 8.5 GB
     * were allocated (the loader allocated, then compared the data's size) */
    b = slurp(DIR "/fuzz-huge-dims.onnx", &size);
    ck_assert_int_eq(load_bytes(b, size, DIR), TEENY_ERR_FORMAT);
    ck_assert_msg(strstr(teeny_last_error(th_ctx()), "the data holds 96 bytes"), "%s", teeny_last_error(th_ctx()));
    free(b);
    /* make fuzz: an empty STRING attribute (NULL data: memchr(NULL, 0, 0), UBSan) */
    b = slurp(DIR "/fuzz-empty-string.onnx", &size);
    ck_assert_int_eq(load_bytes(b, size, DIR), TEENY_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(teeny_last_error(th_ctx()), "nearest_mode= "), "%s", teeny_last_error(th_ctx()));
    free(b);
    /* make fuzz: an Attention whose attn_mask is a rank-0 constant (the refusal's message read the mask's
     * dimension -1, UBSan) */
    b = slurp(DIR "/fuzz-attn-mask-rank0.onnx", &size);
    ck_assert_int_eq(load_bytes(b, size, DIR), TEENY_ERR_SHAPE);
    ck_assert_msg(strstr(teeny_last_error(th_ctx()), "attn_mask of rank 0"), "%s", teeny_last_error(th_ctx()));
    free(b);
    /* 120 levels of graph -> node -> attribute -> graph nesting */
    unsigned char deep[2048];
    size_t n = 0;
    static const unsigned char tags[3] = {0x32, 0x2a, 0x0a}; /* attribute.g, node.attribute, graph.node */
    for (int level = 0; level < 120; level++) {
        memmove(deep + 2, deep, n);
        deep[0] = tags[level % 3];
        deep[1] = (unsigned char)n; /* n < 128 would be needed: lengths grow by 2 per level */
        n += 2;
        if (n >= 126)
            break;
    }
    memmove(deep + 2, deep, n);
    deep[0] = 0x3a; /* model.graph */
    deep[1] = (unsigned char)n;
    ck_assert_int_eq(load_bytes(deep, n + 2, NULL), TEENY_ERR_FORMAT);
    ck_assert_msg(strstr(teeny_last_error(th_ctx()), "nest deeper"), "%s", teeny_last_error(th_ctx()));
    /* argument errors */
    teeny_onnx_model *m = NULL;
    TH_STATUS(th_ctx(), TEENY_ERR_ARG, teeny_onnx_load(th_ctx(), NULL, NULL, &m));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_onnx_load(NULL, DIR "/convnet.onnx", NULL, &m));
    TH_STATUS(th_ctx(), TEENY_ERR_IO, teeny_onnx_load(th_ctx(), DIR "/no-such.onnx", NULL, &m));
    ck_assert_ptr_null(m);
    teeny_onnx_feed feed = {"nope", TEENY_ONNX_FLOAT, 0, NULL, NULL};
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    p.n_feeds = 1;
    p.feeds = &feed;
    TH_STATUS(th_ctx(), TEENY_ERR_ARG, teeny_onnx_load(th_ctx(), DIR "/convnet.onnx", &p, &m));
    p = (teeny_onnx_params)TEENY_ONNX_PARAMS_INIT;
    p.batch = 3; /* conv1d.onnx fixes its batch at 2 */
    TH_STATUS(th_ctx(), TEENY_ERR_SHAPE, teeny_onnx_load(th_ctx(), DIR "/conv1d.onnx", &p, &m));
    ck_assert_ptr_null(m);
    /* a feed that does not fit its graph input: the message names both */
    static const int64_t three = 3;
    static const float e3[3] = {1, 2, 3};
    static const int64_t ints[3] = {1, 2, 3};
    teeny_onnx_feed bad_rank = {"e", TEENY_ONNX_FLOAT, 1, &three, e3};
    p = (teeny_onnx_params)TEENY_ONNX_PARAMS_INIT;
    p.n_feeds = 1;
    p.feeds = &bad_rank;
    TH_STATUS(th_ctx(), TEENY_ERR_SHAPE, teeny_onnx_load(th_ctx(), DIR "/scalar_feed.onnx", &p, &m));
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(teeny_last_error(th_ctx()), "graph input \"e\" has rank 0, its feed 1 (input: float []; "
                                                     "feed: float [3])"), "%s", teeny_last_error(th_ctx()));
    teeny_onnx_feed bad_dim = {"x", TEENY_ONNX_FLOAT, 1, (const int64_t[]){4}, e3};
    p.feeds = &bad_dim;
    TH_STATUS(th_ctx(), TEENY_ERR_SHAPE, teeny_onnx_load(th_ctx(), DIR "/scalar_feed.onnx", &p, &m));
    ck_assert_msg(strstr(teeny_last_error(th_ctx()), "(input: float [3]; feed: float [4])"), "%s",
                  teeny_last_error(th_ctx()));
    teeny_onnx_feed bad_type = {"x", TEENY_ONNX_INT64, 1, &three, ints};
    p.feeds = &bad_type;
    TH_STATUS(th_ctx(), TEENY_ERR_ARG, teeny_onnx_load(th_ctx(), DIR "/scalar_feed.onnx", &p, &m));
    ck_assert_msg(strstr(teeny_last_error(th_ctx()), "the feed of graph input \"x\" is int64, the input float "
                                                     "(input: float [3]; feed: int64 [3])"), "%s",
                  teeny_last_error(th_ctx()));
    ck_assert_ptr_null(m);
}
END_TEST

START_TEST(test_onnx_unsupported)
{
    teeny_onnx_model *m = NULL;
    const char *msg;
    TH_STATUS(th_ctx(), TEENY_ERR_UNSUPPORTED, teeny_onnx_load(th_ctx(), DIR "/bad_op.onnx", NULL, &m));
    msg = teeny_last_error(th_ctx());
    ck_assert_msg(strstr(msg, "\"my_softplus\"") && strstr(msg, "Softplus"), "%s", msg);
    TH_STATUS(th_ctx(), TEENY_ERR_UNSUPPORTED, teeny_onnx_load(th_ctx(), DIR "/bad_attr.onnx", NULL, &m));
    msg = teeny_last_error(th_ctx());
    ck_assert_msg(strstr(msg, "\"bn_s\"") && strstr(msg, "BatchNormalization") && strstr(msg, "spatial"), "%s", msg);
    /* Resize: cubic, a scale on the channels, scales only known at run time */
    static const char *const bad[3][3] = {{"bad_resize", "\"up_cubic\"", "mode=cubic"},
                                          {"bad_resize_axes", "\"up_c\"", "resizes axis 1"},
                                          {"bad_resize_input", "\"up_rt\"", "must be a constant"}};
    for (int i = 0; i < 3; i++) {
        char path[256];
        snprintf(path, sizeof path, DIR "/%s.onnx", bad[i][0]);
        TH_STATUS(th_ctx(), TEENY_ERR_UNSUPPORTED, teeny_onnx_load(th_ctx(), path, NULL, &m));
        msg = teeny_last_error(th_ctx());
        ck_assert_msg(strstr(msg, bad[i][1]) && strstr(msg, "Resize") && strstr(msg, bad[i][2]), "%s", msg);
    }
    ck_assert_ptr_null(m);
    /* a rank-6 value read by anything but Reshape and Transpose; ScatterND max into run-time data; an Einsum
     * diagonal */
    static const char *const wide[3][3] = {{"bad_rank6", "\"relu6\"", "has rank 6"},
                                           {"bad_scatter", "\"scatter_rt\"", "max or min"},
                                           {"bad_einsum_diag", "\"es\"", "ii->i"}};
    for (int i = 0; i < 3; i++) {
        char path[256];
        snprintf(path, sizeof path, DIR "/%s.onnx", wide[i][0]);
        TH_STATUS(th_ctx(), TEENY_ERR_UNSUPPORTED, teeny_onnx_load(th_ctx(), path, NULL, &m));
        msg = teeny_last_error(th_ctx());
        ck_assert_msg(strstr(msg, wide[i][1]) && strstr(msg, wide[i][2]), "%s", msg);
    }
    /* ScatterND's malformed indices and updates: exact statuses, the node named */
    TH_STATUS(th_ctx(), TEENY_ERR_RANGE, teeny_onnx_load(th_ctx(), DIR "/bad_scatter_range.onnx", NULL, &m));
    msg = teeny_last_error(th_ctx());
    ck_assert_msg(strstr(msg, "\"scatter_far\"") && strstr(msg, "index 4 out of range"), "%s", msg);
    TH_STATUS(th_ctx(), TEENY_ERR_SHAPE, teeny_onnx_load(th_ctx(), DIR "/bad_scatter_shape.onnx", NULL, &m));
    msg = teeny_last_error(th_ctx());
    ck_assert_msg(strstr(msg, "\"scatter_short\"") && strstr(msg, "updates dimension 1 is 3, not 4"), "%s", msg);
    ck_assert_ptr_null(m);
    /* ConvTranspose values with no teenycl equivalent (make_models.py's convt_unsupported) */
    static const char *const convt[][3] = {{"bad_convt_same", "\"up_same\"", "auto_pad"},
                                           {"bad_convt_shape", "\"up_shape\"", "output_shape"},
                                           {"bad_convt_3d", "\"up_3d\"", "3-D"}};
    for (int i = 0; i < 3; i++) {
        char path[256];
        snprintf(path, sizeof path, DIR "/%s.onnx", convt[i][0]);
        TH_STATUS(th_ctx(), TEENY_ERR_UNSUPPORTED, teeny_onnx_load(th_ctx(), path, NULL, &m));
        msg = teeny_last_error(th_ctx());
        ck_assert_msg(strstr(msg, convt[i][1]) && strstr(msg, "ConvTranspose") && strstr(msg, convt[i][2]), "%s: %s",
                      convt[i][0], msg);
        ck_assert_ptr_null(m);
    }
    /* a reduction SoftmaxCrossEntropyLoss has not in teenycl (make_models.py's sce_unsupported) */
    TH_STATUS(th_ctx(), TEENY_ERR_UNSUPPORTED, teeny_onnx_load(th_ctx(), DIR "/bad_sce_reduction.onnx", NULL, &m));
    msg = teeny_last_error(th_ctx());
    ck_assert_msg(strstr(msg, "\"ce_max\"") && strstr(msg, "SoftmaxCrossEntropyLoss") && strstr(msg, "reduction") &&
                      strstr(msg, "max"), "%s", msg);
    ck_assert_ptr_null(m);
    /* Attention: a softmax precision other than fp32 or fp16 (both computed in fp32); a bool mask known only
     * at run time */
    static const char *const attn[][3] = {{"bad_attn_precision", "\"attn_fp64\"", "softmax_precision=11"},
                                          {"bad_attn_bool_mask", "\"attn_bool\"", "\"m\""}};
    for (int i = 0; i < 2; i++) {
        char path[256];
        snprintf(path, sizeof path, DIR "/%s.onnx", attn[i][0]);
        TH_STATUS(th_ctx(), TEENY_ERR_UNSUPPORTED, teeny_onnx_load(th_ctx(), path, NULL, &m));
        msg = teeny_last_error(th_ctx());
        ck_assert_msg(strstr(msg, attn[i][1]) && strstr(msg, "Attention") && strstr(msg, attn[i][2]), "%s: %s",
                      attn[i][0], msg);
        ck_assert_ptr_null(m);
    }
}
END_TEST

static int reports, reports_ok;
static void count_report(const teeny_onnx_node_report *r, void *user)
{
    (void)user;
    reports++;
    reports_ok += r->status == TEENY_OK;
    ck_assert(r->status == TEENY_OK ? !r->message[0] : strstr(r->message, r->op_type) != NULL);
}

START_TEST(test_onnx_inspect)
{
    reports = reports_ok = 0;
    TH_OK(th_ctx(), teeny_onnx_inspect(th_ctx(), DIR "/convnet.onnx", NULL, count_report, NULL));
    ck_assert_int_eq(reports, 12);
    ck_assert_int_eq(reports_ok, 12);
    reports = reports_ok = 0;
    TH_STATUS(th_ctx(), TEENY_ERR_UNSUPPORTED, teeny_onnx_inspect(th_ctx(), DIR "/bad_attr.onnx", NULL, count_report,
                                                                  NULL));
    ck_assert_int_eq(reports, 1);
    ck_assert_int_eq(reports_ok, 0);
}
END_TEST

/* teeny_onnx_inspect_io: the declared inputs and outputs, symbolic
 * dimensions by name, initializers not listed; a file that is not a model
 * says so. Each report is written out as "i|o name type [dims]". */
static void io_line(const teeny_onnx_io_report *r, void *user)
{
    char *text = user;
    size_t len = strlen(text);
    len += (size_t)snprintf(text + len, 1024 - len, "%s%d %s %s %d [", r->is_output ? "o" : "i", r->index, r->name,
                            r->elem_type_name, r->elem_type);
    for (int d = 0; d < r->ndim; d++) {
        if (r->dims[d] >= 0)
            ck_assert_str_eq(r->dim_names[d], "");
        len += (size_t)(r->dims[d] < 0 ? snprintf(text + len, 1024 - len, "%s%s", d ? "," : "", r->dim_names[d])
                                       : snprintf(text + len, 1024 - len, "%s%lld", d ? "," : "", (long long)r->dims[d]));
    }
    snprintf(text + len, 1024 - len, "%s];", r->ndim < 0 ? "no shape" : "");
}

START_TEST(test_onnx_inspect_io)
{
    teeny_ctx *ctx = th_ctx();
    char text[1024] = "";
    TH_OK(ctx, teeny_onnx_inspect_io(ctx, DIR "/convnet.onnx", io_line, text));
    ck_assert_str_eq(text, "i0 x float 1 [N,3,8,8];o0 logits float 1 [N,5];");
    text[0] = 0;
    TH_OK(ctx, teeny_onnx_inspect_io(ctx, DIR "/sce.onnx", io_line, text)); /* int64 labels, a rank-0 loss */
    ck_assert_str_eq(text, "i0 x float 1 [N,6];i1 labels int64 7 [N];o0 loss float 1 [];");
    text[0] = 0;
    TH_OK(ctx, teeny_onnx_inspect_io(ctx, DIR "/io_names.onnx", io_line, text));
    ck_assert_str_eq(text, "i0 img float 1 [batch,3,4,4];i1 meta float 1 [batch,5];"
                           "o0 /l2/probs:0 float 1 [batch,3,4,4];o1 _l2_probs_0 float 1 [batch,5];");
    /* not a model: a text file, an .npy */
    TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_onnx_inspect_io(ctx, "README.md", io_line, text));
    ck_assert_msg(strstr(teeny_last_error(ctx), "README.md: not an ONNX model (protobuf parse failed: "), "%s",
                  teeny_last_error(ctx));
    teeny_onnx_model *m = NULL;
    TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_onnx_load(ctx, DIR "/convnet.in0.npy", NULL, &m));
    ck_assert_msg(strstr(teeny_last_error(ctx), "not an ONNX model (protobuf parse failed: "), "%s",
                  teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_IO, teeny_onnx_inspect_io(ctx, DIR "/no-such.onnx", io_line, text));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_onnx_inspect_io(ctx, DIR "/convnet.onnx", NULL, text));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_onnx_inspect_io(NULL, DIR "/convnet.onnx", io_line, text));
}
END_TEST

/* External data: beside the model it loads; a location that is absolute,
 * climbs out with "..", or is a symlink to a file outside is refused
 * (TEENY_ERR_FORMAT); a missing file is TEENY_ERR_IO; without a base
 * directory, TEENY_ERR_UNSUPPORTED. */
START_TEST(test_onnx_external)
{
    char dir[256], sub[300], path[400], outside[400];
    const char *base = getenv("TMPDIR");
    float wdata[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    size_t size;
    unsigned char *b;
    snprintf(dir, sizeof dir, "%s/teeny-onnx-XXXXXX", base && *base ? base : "/tmp");
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(sub, sizeof sub, "%s/model", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    snprintf(path, sizeof path, "%s/w.bin", sub);
    write_file(path, wdata, sizeof wdata);
    snprintf(outside, sizeof outside, "%s/secret.bin", dir);
    write_file(outside, wdata, sizeof wdata);
    snprintf(path, sizeof path, "%s/link.bin", sub);
    ck_assert_int_eq(symlink(outside, path), 0);
    static const struct { const char *loc; teeny_status want; } cases[] = {
        {"w.bin", TEENY_OK}, {"./w.bin", TEENY_OK}, {"../secret.bin", TEENY_ERR_FORMAT},
        {"sub/../../secret.bin", TEENY_ERR_FORMAT}, {"/etc/hostname", TEENY_ERR_FORMAT},
        {"link.bin", TEENY_ERR_FORMAT}, {"missing.bin", TEENY_ERR_IO}, {"", TEENY_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        b = conv_model(V_EXT, cases[i].loc, &size);
        teeny_status st = load_bytes(b, size, sub);
        ck_assert_msg(st == cases[i].want, "location \"%s\": %s, want %s (%s)", cases[i].loc, teeny_status_name(st),
                      teeny_status_name(cases[i].want), teeny_last_error(th_ctx()));
        /* the same through a file in that directory */
        snprintf(path, sizeof path, "%s/m.onnx", sub);
        write_file(path, b, size);
        teeny_onnx_model *m = NULL;
        st = teeny_onnx_load(th_ctx(), path, NULL, &m);
        ck_assert_msg(st == cases[i].want, "file, location \"%s\": %s", cases[i].loc, teeny_status_name(st));
        teeny_onnx_destroy(m);
        free(b);
    }
    b = conv_model(V_EXT, "w.bin", &size);
    ck_assert_int_eq(load_bytes(b, size, NULL), TEENY_ERR_UNSUPPORTED);
    free(b);
    const char *names[] = {"w.bin", "link.bin", "m.onnx"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", sub, names[i]);
        unlink(path);
    }
    unlink(outside);
    rmdir(sub);
    rmdir(dir);
}
END_TEST

/* Seeded mutations of every model (truncations, flipped and inserted
 * bytes): each load returns a status (with a message on failure); under
 * check-asan a memory error, undefined behaviour or leak fails the run.
 * fuzz-empty-ints.onnx is what make fuzz found: memcpy from the NULL array
 * of an INTS attribute that has no values; fuzz-silu-shape.onnx (convnet
 * with one integer changed) read x's shape for x * Sigmoid(x) from the
 * value table after defining the result had moved it (ASan);
 * fuzz-no-outputs.onnx a MaxPool with no outputs, fuzz-empty-string.onnx
 * an empty STRING attribute (UBSan); fuzz-huge-dims.onnx and
 * fuzz-huge-external.onnx initializers whose dimensions claim gigabytes
 * that their data (in the model, or external.bin) does not hold (8 GB
 * allocated before the data's size was compared: libFuzzer's OOM). */
START_TEST(test_onnx_mutations)
{
    static const char *models[] = {"convnet",          "shapes",          "conv1d",           "sce",
                                   "bad_attr",         "fuzz-empty-ints", "fuzz-silu-shape",  "fuzz-no-outputs",
                                   "fuzz-empty-string", "fuzz-huge-dims", "fuzz-huge-external", "gemm",
                                   "resize",           "convt",           "sce_options",      "sce_nd",
                                   "shared"};
    th_rng rng = th_rng_make(1018);
    int rounds = th_small() ? 60 : 250;
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        char path[256];
        size_t size;
        snprintf(path, sizeof path, DIR "/%s.onnx", models[k]);
        unsigned char *orig = slurp(path, &size), *buf = th_malloc(size + 16);
        load_bytes(orig, size, DIR); /* fuzz-empty-ints: an INTS attribute without values (UBSan) */
        for (int r = 0; r < rounds; r++) {
            size_t n = size;
            memcpy(buf, orig, size);
            int flips = th_int(&rng, 1, 4);
            for (int f = 0; f < flips; f++) {
                size_t at = (size_t)th_int(&rng, 0, (int)n - 1);
                switch (th_int(&rng, 0, 3)) {
                case 0: buf[at] ^= (unsigned char)(1u << th_int(&rng, 0, 7)); break;
                case 1: buf[at] = (unsigned char)th_int(&rng, 0, 255); break;
                case 2: n = at + 1; break;
                default: buf[at] = 0xff; break; /* a huge varint or length */
                }
            }
            load_bytes(buf, n, DIR);
        }
        free(orig);
        free(buf);
    }
}
END_TEST

Suite *suite_onnx(void)
{
    Suite *s = suite_create("onnx");
    TCase *fwd = tcase_create("forward"), *err = tcase_create("errors");
    tcase_add_test(fwd, test_onnx_models);
    tcase_add_test(fwd, test_onnx_names);
    tcase_add_test(fwd, test_onnx_attention_paths);
    tcase_add_test(fwd, test_onnx_bn_act_fused);
    tcase_add_test(fwd, test_onnx_conv_act_fused);
    tcase_add_test(fwd, test_onnx_gelu_fused);
    tcase_add_test(fwd, test_onnx_train_step);
    tcase_add_test(fwd, test_onnx_freeze);
    tcase_add_test(fwd, test_onnx_shared);
    tcase_add_test(fwd, test_onnx_norm_grad);
    tcase_add_test(err, test_onnx_malformed);
    tcase_add_test(err, test_onnx_unsupported);
    tcase_add_test(err, test_onnx_inspect);
    tcase_add_test(err, test_onnx_inspect_io);
    tcase_add_test(err, test_onnx_external);
    tcase_add_test(err, test_onnx_mutations);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, err);
    return s;
}
