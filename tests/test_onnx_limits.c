/*
 * test_onnx_limits.c -- the importer's limits on what a model may cost.
 * errors: the folding budget (teenycl_onnx.h): a model of a few hundred
 * bytes whose ConstantOfShape, Add and Mul are folded on the host must be
 * refused with TEENY_ERR_NOMEM naming the node before anything is
 * allocated (it took 50 s and 6.3 GB, or asked for 16 GiB a value), while
 * a value just under the budget, and a weight folded at its own size,
 * still import. limits: import time linear in the node count (a name
 * check per node against every node made it quadratic: 20,000 nodes took
 * 9-21 s): chains of 10,000 and 100,000 nodes, timed (the importing
 * thread's CPU time, so a busy machine does not skew the ratio), and the
 * name indexes the graph keeps for it. Crafted models come from
 * tests/onnx_craft.h; the long chains are packed here directly (protobuf-c
 * structs), 100,000 nodes through the helper's per-call checks would take
 * seconds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "onnx/onnx_internal.h" /* teeny__ox_load_budget; graph_internal.h's teeny__graph_find */
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

/* ---- linear import time ---- */

/* A chain of n nodes on x [1, 4], packed straight from protobuf-c structs.
 * A cycle of ten ops: Relu, Add (of the value twice), Identity, Reshape
 * to [1, 2, 2] and back, Add of a new graph input whose long name makes
 * its graph node "input_<k>", Mul; every hundredth node a Gemm with a
 * weight of its own, and one sharing a weight with every other such Gemm
 * (a tied parameter); every hundredth node named "same" (graph names
 * "same", "same_1", ...). */
typedef struct {
    Onnx__NodeProto *nodes, **node_ptrs;
    Onnx__TensorProto *inits, **init_ptrs;
    Onnx__ValueInfoProto *inputs, **input_ptrs, output, *output_ptr;
    char *names, **ios;                    /* each node's name, then two inputs and one output */
    size_t n_inits, n_inputs;
} chain_model;

static const char *SAME = "same";

static char *chain_name(chain_model *c, size_t slot, const char *fmt, long k)
{
    char *s = c->names + slot * 72;
    snprintf(s, 72, fmt, k);
    return s;
}

static unsigned char *chain_pack(int n, size_t *size)
{
    static const float weight[16] = {0.5f, -0.25f, 0.125f, 1.0f, -1.0f, 0.75f, 0.0f, 0.5f,
                                     0.25f, 0.5f, -0.5f, 1.5f, 1.0f, -0.125f, 0.25f, -0.75f};
    static int64_t x_dims[2] = {1, 4}, w_dims[2] = {4, 4}, to3[3] = {1, 2, 2}, to2[2] = {1, 4}, s3[1] = {3},
                   s2[1] = {2};
    chain_model c = {0};
    Onnx__TensorShapeProto__Dimension d[2] = {ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT,
                                              ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT};
    Onnx__TensorShapeProto__Dimension *dp[2] = {&d[0], &d[1]};
    Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    Onnx__TypeProto type = ONNX__TYPE_PROTO__INIT;
    for (int i = 0; i < 2; i++) {
        d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d[i].dim_value = x_dims[i];
    }
    shape.n_dim = 2;
    shape.dim = dp;
    tt.has_elem_type = 1;
    tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt.shape = &shape;
    type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type.tensor_type = &tt;
    size_t n_inputs = 1 + (size_t)n / 10 + 1, n_inits = 3 + (size_t)n / 100 + 1;
    c.nodes = th_malloc((size_t)n * sizeof *c.nodes);
    c.node_ptrs = th_malloc((size_t)n * sizeof *c.node_ptrs);
    c.inits = th_malloc(n_inits * sizeof *c.inits);
    c.init_ptrs = th_malloc(n_inits * sizeof *c.init_ptrs);
    c.inputs = th_malloc(n_inputs * sizeof *c.inputs);
    c.input_ptrs = th_malloc(n_inputs * sizeof *c.input_ptrs);
    c.names = th_malloc(((size_t)n + n_inputs + n_inits) * 72);
    c.ios = th_malloc((size_t)n * 3 * sizeof *c.ios);
    size_t slot = 0;
    /* initializers: the two shapes, the shared weight, then each Gemm's own */
    struct { const char *name; int64_t *dims; size_t nd; int f32; const void *data; } fixed[3] = {
        {"to3", s3, 1, 0, to3}, {"to2", s2, 1, 0, to2}, {"w_shared", w_dims, 2, 1, weight}};
    for (int i = 0; i < 3 + n / 100; i++) {
        Onnx__TensorProto *t = &c.inits[c.n_inits];
        onnx__tensor_proto__init(t);
        int own = i >= 3;
        t->name = own ? chain_name(&c, slot++, "w%ld", i - 3) : (char *)fixed[i].name;
        t->n_dims = own ? 2 : fixed[i].nd;
        t->dims = own ? w_dims : fixed[i].dims;
        t->has_data_type = 1;
        t->data_type = own || fixed[i].f32 ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT : ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
        t->has_raw_data = 1;
        t->raw_data.data = (uint8_t *)(own ? weight : fixed[i].data);
        t->raw_data.len = own || fixed[i].f32 ? sizeof weight : (size_t)fixed[i].dims[0] * sizeof(int64_t);
        c.init_ptrs[c.n_inits++] = t;
    }
    for (int i = 0; i < n / 10 + 1; i++) { /* x, then the side inputs */
        Onnx__ValueInfoProto *vi = &c.inputs[c.n_inputs];
        onnx__value_info_proto__init(vi);
        vi->name = i ? chain_name(&c, slot++, "a_side_input_whose_name_is_too_long_for_a_graph_node_%ld", i - 1)
                     : "x";
        vi->type = &type;
        c.input_ptrs[c.n_inputs++] = vi;
    }
    const char *prev = "x";
    for (int i = 0; i < n; i++) {
        Onnx__NodeProto *nd = &c.nodes[i];
        char **io = &c.ios[3 * i];
        static const char *const cycle[10] = {"Relu", "Add", "Identity", "Reshape", "Relu", "Reshape", "Add",
                                              "Relu", "Relu", "Mul"};
        onnx__node_proto__init(nd);
        nd->op_type = (char *)(i % 100 == 7 || i % 100 == 8 ? "Gemm" : cycle[i % 10]);
        io[0] = (char *)prev;
        io[1] = i % 10 == 1 || i % 10 == 9 ? (char *)prev : i % 10 == 3 ? "to3" : i % 10 == 5 ? "to2" : NULL;
        if (i % 10 == 6)
            io[1] = c.input_ptrs[1 + i / 10]->name;
        if (i % 100 == 7 || i % 100 == 8)
            io[1] = i % 100 == 8 ? "w_shared" : c.init_ptrs[3 + i / 100]->name;
        io[2] = chain_name(&c, slot++, "v%ld", i);
        nd->name = i % 100 == 50 ? (char *)SAME : io[2];
        nd->n_input = io[1] ? 2 : 1;
        nd->input = io;
        nd->n_output = 1;
        nd->output = &io[2];
        c.node_ptrs[i] = nd;
        prev = io[2];
    }
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    onnx__value_info_proto__init(&c.output);
    c.output.name = (char *)prev;
    c.output_ptr = &c.output;
    graph.name = "chain";
    graph.n_node = (size_t)n;
    graph.node = c.node_ptrs;
    graph.n_initializer = c.n_inits;
    graph.initializer = c.init_ptrs;
    graph.n_input = c.n_inputs;
    graph.input = c.input_ptrs;
    graph.n_output = 1;
    graph.output = &c.output_ptr;
    opset.domain = "";
    opset.has_version = 1;
    opset.version = 17;
    model.has_ir_version = 1;
    model.ir_version = 8;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.graph = &graph;
    *size = onnx__model_proto__get_packed_size(&model);
    unsigned char *bytes = th_malloc(*size);
    onnx__model_proto__pack(&model, bytes);
    free(c.nodes);
    free(c.node_ptrs);
    free(c.inits);
    free(c.init_ptrs);
    free(c.inputs);
    free(c.input_ptrs);
    free(c.names);
    free(c.ios);
    return bytes;
}

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The fastest of runs imports of an n-node chain: the importing thread's
 * CPU time (what the import's own steps cost, whatever else the machine
 * runs), and its wall time in *wall. */
static double chain_seconds(int n, int runs, double *wall)
{
    size_t size;
    unsigned char *bytes = chain_pack(n, &size);
    double best = 1e30;
    *wall = 1e30;
    for (int r = 0; r < runs; r++) {
        double s, cpu = thread_cpu_s();
        TH_OK(th_ctx(), load_bytes(bytes, size, NULL, &s));
        cpu = thread_cpu_s() - cpu;
        best = cpu < best ? cpu : best;
        *wall = s < *wall ? s : *wall;
    }
    free(bytes);
    return best;
}

/* Ten times the nodes must take well under a hundred times as long (what a
 * quadratic step gives): < 25x, the fastest of a few runs each. */
START_TEST(test_onnx_limits_linear_chain)
{
    double wall_small, wall_large;
    double small = chain_seconds(10000, 3, &wall_small), large = chain_seconds(100000, 2, &wall_large);
    printf("onnx_limits: importing a chain of 10,000 nodes took %.3f s (CPU; %.3f s wall), 100,000 nodes %.3f s "
           "(%.3f s wall): %.1fx\n", small, wall_small, large, wall_large, large / small);
    ck_assert_msg(large < 25.0 * small, "10x the nodes took %.1fx as long (%.3f s, %.3f s of CPU): not linear",
                  large / small, small, large);
}
END_TEST

/* What the chain's import makes: every node of the shared name, numbered
 * in order, the side inputs as input_<k>, one parameter per own weight
 * plus the shared one. */
START_TEST(test_onnx_limits_chain_names)
{
    size_t size;
    unsigned char *bytes = chain_pack(1000, &size);
    teeny_onnx_model *m = NULL;
    TH_OK(th_ctx(), teeny_onnx_load_memory(th_ctx(), bytes, size, NULL, &m));
    free(bytes);
    const teeny_graph *g = teeny_onnx_graph(m);
    ck_assert(teeny__graph_find(g, "same") >= 0 && teeny__graph_find(g, "same_9") >= 0);
    ck_assert(teeny__graph_find(g, "same_10") < 0);
    ck_assert(teeny__graph_find(g, "input") >= 0 && teeny__graph_find(g, "input_99") >= 0);
    ck_assert(teeny__graph_find(g, "input_100") < 0);
    ck_assert_int_eq(teeny_graph_param_count(g), 10 + 1);
    teeny_onnx_destroy(m);
}
END_TEST

/* The graph's name indexes: node names unique, a slot alias unique among
 * every slot's full name (aliases and "<node>.<suffix>"), a tied slot's
 * alias free again, teeny_graph_tie_param finding slots by either name. */
START_TEST(test_onnx_limits_graph_names)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, fc[3], r;
    char name[32];
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 2, (int64_t[]){-1, 4}, &x));
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "fc%d", i);
        TH_OK(ctx, teeny_graph_linear(g, name, i ? fc[i - 1] : x, 4, 1, &fc[i]));
    }
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_activation(g, "fc1", fc[2], TEENY_ACT_RELU, &r));
    ck_assert(strstr(teeny_last_error(ctx), "already exists"));
    for (int i = 0; i < 2000; i++) { /* automatic names too */
        snprintf(name, sizeof name, "relu%d", i);
        TH_OK(ctx, teeny_graph_activation(g, i % 2 ? name : NULL, i ? r : fc[2], TEENY_ACT_RELU, &r));
    }
    ck_assert_int_eq(teeny__graph_find(g, "relu1999"), teeny_graph_node_count(g) - 1);
    ck_assert_int_eq(teeny__graph_find(g, "fc1"), 2);
    ck_assert_int_eq(teeny__graph_find(g, "fc"), -1);
    TH_OK(ctx, teeny__graph_slot_alias(g, fc[0], 0, 0, "shared.weight"));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny__graph_slot_alias(g, fc[1], 0, 0, "shared.weight")); /* an alias */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny__graph_slot_alias(g, fc[1], 0, 0, "fc2.bias"));      /* a slot's own */
    TH_OK(ctx, teeny__graph_slot_alias(g, fc[0], 0, 0, "shared.weight"));  /* its own alias again */
    TH_OK(ctx, teeny__graph_slot_alias(g, fc[1], 0, 0, "fc0.weight"));     /* fc0's own name is its alias now */
    TH_OK(ctx, teeny_graph_tie_param(g, "fc0.weight", "shared.weight"));   /* fc1's weight shares fc0's */
    ck_assert_int_eq(teeny_graph_param_count(g), 5);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_tie_param(g, "fc0.weight", "shared.weight")); /* no such name now */
    TH_OK(ctx, teeny__graph_slot_alias(g, fc[2], 0, 0, "fc0.weight"));     /* free again */
    TH_STATUS(ctx, TEENY_ERR_STATE, teeny_graph_tie_param(g, "shared.weight", "fc2.bias")); /* shared by fc1 */
    TH_OK(ctx, teeny_graph_tie_param(g, "fc0.weight", "shared.weight"));
    ck_assert_int_eq(teeny_graph_param_count(g), 4);
    const char *pname;
    TH_OK(ctx, teeny_graph_param(g, 0, &pname, NULL, NULL));
    ck_assert_str_eq(pname, "shared.weight");
    teeny_graph_destroy(g);
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
    tc = tcase_create("limits");
    tcase_add_test(tc, test_onnx_limits_linear_chain);
    tcase_add_test(tc, test_onnx_limits_chain_names);
    tcase_add_test(tc, test_onnx_limits_graph_names);
    suite_add_tcase(s, tc);
    return s;
}
