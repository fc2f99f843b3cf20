/*
 * test_onnx_attention.c -- ONNX Attention's rule for fully masked rows
 * (src/onnx/attn_import.c, include/teenycl_onnx.h): a query row whose every
 * key is masked (-inf or false, the causal mask included) gives 0 on every
 * path the importer takes -- the fused kernel (teeny_graph_attention_ex)
 * and the decomposition (a rank-1 mask; qk_matmul_output asked for, with
 * masks of rank 2 to 4; grouped-query heads with a mask) -- for float
 * masks (a run-time input, an initializer) and bool ones (a feed, an
 * initializer), with and without is_causal and softcap; every other row
 * matches a float64 reference, rows masked by -1e30 or -FLT_MAX on every
 * key included (the average of v: those are not masked). The
 * qk_matmul_output of mode 3 (the softmax) has the same zero rows. Each
 * case's path is checked by the graph's node names ("<node>.attention":
 * the fused kernel; "<node>.probs": the decomposition's softmax). Models
 * are built here with protobuf-c, as test_onnx.c's conv_model is.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "onnx/onnx.pb-c.h"
#include "teenycl_onnx.h"

enum { MK_FLOAT_INPUT, MK_FLOAT_CONST, MK_BOOL_FEED, MK_BOOL_CONST };

typedef struct {
    const char *what;
    int b, hq, hkv, s, t, d, dv;
    int mrank;        /* 0: no mask; 1..4 */
    int mfull[4];     /* per dim of [B, Hq, S, T], right-aligned to the mask's rank: 1 full, 0 size 1 */
    int kind;         /* MK_* */
    int causal;
    float softcap;
    int want_qk;      /* qk_matmul_output (mode 3) asked for: the decomposition */
    int fused;        /* the path the importer must take */
} oa_case;

/* ---- the model ---- */

typedef struct {
    Onnx__ValueInfoProto vi;
    Onnx__TypeProto tp;
    Onnx__TypeProto__Tensor tt;
    Onnx__TensorShapeProto sp;
    Onnx__TensorShapeProto__Dimension dim[4], *dimp[4];
} oa_vi;

static void vi_make(oa_vi *v, const char *name, int elem_type, int ndim, const int64_t *shape)
{
    onnx__value_info_proto__init(&v->vi);
    onnx__type_proto__init(&v->tp);
    onnx__type_proto__tensor__init(&v->tt);
    onnx__tensor_shape_proto__init(&v->sp);
    for (int i = 0; i < ndim; i++) {
        onnx__tensor_shape_proto__dimension__init(&v->dim[i]);
        v->dim[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        v->dim[i].dim_value = shape[i];
        v->dimp[i] = &v->dim[i];
    }
    v->sp.n_dim = (size_t)ndim;
    v->sp.dim = v->dimp;
    v->tt.has_elem_type = 1;
    v->tt.elem_type = elem_type;
    v->tt.shape = &v->sp;
    v->tp.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    v->tp.tensor_type = &v->tt;
    v->vi.name = (char *)name;
    v->vi.type = &v->tp;
}

static void attr_f(Onnx__AttributeProto *a, const char *name, float f)
{
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    a->has_f = 1;
    a->f = f;
}

static void attr_i(Onnx__AttributeProto *a, const char *name, int64_t i)
{
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = i;
}

/* One Attention node "att" (opset 23) on Q [B, Hq, S, D], K [B, Hkv, T, D],
 * V [B, Hkv, T, Dv] and mask M (c->kind: a graph input, or an initializer
 * of mdata / bdata), output Y (and QK, mode 3, where c->want_qk). */
static unsigned char *model_make(const oa_case *c, const int64_t *mshape, const float *mdata, const uint8_t *bdata,
                                 size_t mcount, size_t *size)
{
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    Onnx__NodeProto node = ONNX__NODE_PROTO__INIT, *nodes[1] = {&node};
    Onnx__TensorProto mt = ONNX__TENSOR_PROTO__INIT, *inits[1] = {&mt};
    Onnx__AttributeProto at[4], *atp[4];
    oa_vi in[4], out[2];
    Onnx__ValueInfoProto *ins[4], *outs[2];
    int64_t qs[4] = {c->b, c->hq, c->s, c->d}, ks[4] = {c->b, c->hkv, c->t, c->d}, vs[4] = {c->b, c->hkv, c->t, c->dv};
    int64_t ys[4] = {c->b, c->hq, c->s, c->dv}, ps[4] = {c->b, c->hq, c->s, c->t};
    int is_bool = c->kind == MK_BOOL_FEED || c->kind == MK_BOOL_CONST, mask_input = c->mrank && (c->kind == MK_FLOAT_INPUT ||
                  c->kind == MK_BOOL_FEED);
    char *node_in[4] = {"Q", "K", "V", c->mrank ? "M" : ""}, *node_out[4] = {"Y", "", "", "QK"};
    int n_at = 0, n_in = 3;
    vi_make(&in[0], "Q", 1, 4, qs);
    vi_make(&in[1], "K", 1, 4, ks);
    vi_make(&in[2], "V", 1, 4, vs);
    if (mask_input)
        vi_make(&in[n_in++], "M", is_bool ? 9 : 1, c->mrank, mshape);
    for (int i = 0; i < n_in; i++)
        ins[i] = &in[i].vi;
    vi_make(&out[0], "Y", 1, 4, ys);
    vi_make(&out[1], "QK", 1, 4, ps);
    outs[0] = &out[0].vi;
    outs[1] = &out[1].vi;
    attr_f(&at[n_at++], "scale", (float)(1.0 / sqrt((double)c->d)));
    if (c->causal)
        attr_i(&at[n_at++], "is_causal", 1);
    if (c->softcap > 0)
        attr_f(&at[n_at++], "softcap", c->softcap);
    if (c->want_qk)
        attr_i(&at[n_at++], "qk_matmul_output_mode", 3);
    for (int i = 0; i < n_at; i++)
        atp[i] = &at[i];
    if (c->mrank && !mask_input) {
        mt.name = "M";
        mt.n_dims = (size_t)c->mrank;
        mt.dims = (int64_t *)mshape;
        mt.has_data_type = 1;
        mt.data_type = is_bool ? 9 : 1;
        mt.has_raw_data = 1;
        mt.raw_data.len = mcount * (is_bool ? 1 : 4);
        mt.raw_data.data = is_bool ? (uint8_t *)bdata : (uint8_t *)mdata;
        graph.n_initializer = 1;
        graph.initializer = inits;
    }
    node.n_input = c->mrank ? 4 : 3;
    node.input = node_in;
    node.n_output = c->want_qk ? 4 : 1;
    node.output = node_out;
    node.op_type = "Attention";
    node.name = "att";
    node.n_attribute = (size_t)n_at;
    node.attribute = atp;
    graph.name = "attention";
    graph.n_node = 1;
    graph.node = nodes;
    graph.n_input = (size_t)n_in;
    graph.input = ins;
    graph.n_output = c->want_qk ? 2 : 1;
    graph.output = outs;
    opset.domain = "";
    opset.has_version = 1;
    opset.version = 23;
    model.has_ir_version = 1;
    model.ir_version = 10;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.graph = &graph;
    *size = onnx__model_proto__get_packed_size(&model);
    unsigned char *buf = th_malloc(*size);
    onnx__model_proto__pack(&model, buf);
    return buf;
}

/* ---- the values and the reference ---- */

typedef struct {
    float *q, *k, *v, *m;   /* m: the mask's own elements, additive (bool: 0 / -inf) */
    uint8_t *bm;            /* bool masks: 1 attend */
    int64_t *bm64;          /* the same as a feed */
    int64_t mshape[4];
    long ms[4];             /* m's element strides against [B, Hq, S, T] (0: broadcast) */
    size_t nq, nk, nv, ny, nm;
} oa_data;

/* The mask's value of query row i (of S) at key j: row kinds by i % 6 --
 * 1 every key -inf (false), 3 the keys j <= i -inf (false) and the rest
 * drawn (a row that only is_causal makes fully masked), 4 every key -1e30
 * (bool: every key true), 5 every key -FLT_MAX (bool: as drawn); rank 1
 * (no query dim): row kind 1 or 4 for every row (whole), else drawn. */
static float mask_value(const oa_case *c, int i, int j, int whole, th_rng *r)
{
    int kind = c->mrank == 1 ? whole : i % 6;
    int is_bool = c->kind == MK_BOOL_FEED || c->kind == MK_BOOL_CONST;
    float drawn = is_bool ? (th_int(r, 0, 4) ? 0.0f : -INFINITY) : (float)th_normal(r);
    if (kind == 1 || (kind == 3 && j <= i))
        return -INFINITY;
    if (kind == 4)
        return is_bool ? 0.0f : -1e30f;
    if (kind == 5 && !is_bool)
        return -FLT_MAX;
    return drawn;
}

static void data_make(const oa_case *c, int whole, th_rng *r, oa_data *x)
{
    const int64_t full[4] = {c->b, c->hq, c->s, c->t};
    memset(x, 0, sizeof *x);
    x->nq = (size_t)c->b * c->hq * c->s * c->d;
    x->nk = (size_t)c->b * c->hkv * c->t * c->d;
    x->nv = (size_t)c->b * c->hkv * c->t * c->dv;
    x->ny = (size_t)c->b * c->hq * c->s * c->dv;
    x->q = th_malloc(x->nq * sizeof(float));
    x->k = th_malloc(x->nk * sizeof(float));
    x->v = th_malloc(x->nv * sizeof(float));
    th_fill_normal(r, x->q, x->nq, 0, 1);
    th_fill_normal(r, x->k, x->nk, 0, 1);
    th_fill_normal(r, x->v, x->nv, 0, 1);
    if (!c->mrank)
        return;
    long acc = 1;
    for (int i = 3; i >= 0; i--) {
        int mine = i >= 4 - c->mrank;
        int64_t dim = mine && (c->mfull[i] || i >= 2) ? full[i] : 1; /* S and T always full */
        if (mine)
            x->mshape[i - (4 - c->mrank)] = dim;
        x->ms[i] = dim == 1 ? 0 : acc;
        acc *= (long)dim;
    }
    x->nm = (size_t)acc;
    x->m = th_malloc(x->nm * sizeof(float));
    x->bm = th_malloc(x->nm);
    x->bm64 = th_malloc(x->nm * sizeof(int64_t));
    int64_t row_len = c->t, rows = (int64_t)x->nm / row_len;
    for (int64_t row = 0; row < rows; row++) {
        int i = (int)(c->mrank == 1 ? 0 : row % c->s);
        for (int j = 0; j < c->t; j++) {
            float m = mask_value(c, i, j, whole, r);
            x->m[row * row_len + j] = m;
            x->bm[row * row_len + j] = m == 0.0f;
            x->bm64[row * row_len + j] = m == 0.0f;
        }
    }
}

static void data_free(oa_data *x)
{
    free(x->q);
    free(x->k);
    free(x->v);
    free(x->m);
    free(x->bm);
    free(x->bm64);
}

/* y [B, Hq, S, Dv] and p [B, Hq, S, T] in float64 from the definition: a
 * row whose every score is -inf gives 0 (dead[row] = 1). */
static void reference(const oa_case *c, const oa_data *x, double *y, double *p, int *dead)
{
    double scale = (double)(float)(1.0 / sqrt((double)c->d));
    double *s = th_malloc((size_t)c->t * sizeof *s);
    for (int b = 0; b < c->b; b++)
        for (int h = 0; h < c->hq; h++)
            for (int i = 0; i < c->s; i++) {
                int hk = h / (c->hq / c->hkv);
                size_t row = ((size_t)(b * c->hq + h)) * c->s + i;
                const float *qi = x->q + row * c->d;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < c->t; j++) {
                    const float *kj = x->k + (((size_t)(b * c->hkv + hk)) * c->t + j) * c->d;
                    double acc = 0;
                    for (int e = 0; e < c->d; e++)
                        acc += (double)qi[e] * kj[e];
                    acc *= scale;
                    if (c->softcap > 0)
                        acc = c->softcap * tanh(acc / c->softcap);
                    if (c->mrank)
                        acc += x->m[b * x->ms[0] + h * x->ms[1] + i * x->ms[2] + j * x->ms[3]];
                    if (c->causal && j > i)
                        acc = -INFINITY;
                    s[j] = acc;
                    mx = fmax(mx, acc);
                }
                for (int j = 0; j < c->t; j++)
                    sum += s[j] = mx == -INFINITY ? 0 : exp(s[j] - mx);
                dead[row] = mx == -INFINITY;
                for (int j = 0; j < c->t; j++)
                    p[row * c->t + j] = dead[row] ? 0 : s[j] / sum;
                for (int e = 0; e < c->dv; e++) {
                    double acc = 0;
                    for (int j = 0; j < c->t; j++)
                        acc += p[row * c->t + j] * x->v[(((size_t)(b * c->hkv + hk)) * c->t + j) * c->dv + e];
                    y[row * c->dv + e] = acc;
                }
            }
    free(s);
}

/* ---- one case ---- */

static int has_node(const teeny_graph *g, const char *name)
{
    for (int i = 0; i < teeny_graph_node_count(g); i++) {
        const char *nm;
        if (teeny_graph_node_info(g, i, &nm, NULL, NULL) == TEENY_OK && !strcmp(nm, name))
            return 1;
    }
    return 0;
}

/* got (n rows of w) against want: every element finite, the dead rows
 * exactly 0, the others within |d| <= 1e-5 + 1e-4 |want|. */
static void expect_rows(const float *got, const double *want, const int *dead, size_t rows, int w, const char *what,
                        const char *repro)
{
    for (size_t r = 0; r < rows; r++) {
        for (int e = 0; e < w; e++) {
            double g = got[r * w + e], x = want[r * w + e];
            if (dead[r])
                ck_assert_msg(g == 0.0, "%s row %zu (every key masked) element %d = %g; want 0; %s", what, r, e, g,
                              repro);
            else
                ck_assert_msg(isfinite(g) && fabs(g - x) <= 1e-5 + 1e-4 * fabs(x), "%s row %zu element %d = %.9g; "
                              "want %.9g; %s", what, r, e, g, x, repro);
        }
    }
}

/* Write input name's values into the plan's tensor for it (a graph input
 * the model keeps at run time). */
static void write_input(teeny_ctx *ctx, teeny_onnx_model *m, teeny_plan *plan, const oa_data *x)
{
    for (int i = 0; i < teeny_onnx_input_count(m); i++) {
        const char *name;
        teeny_node node;
        teeny_tensor *t;
        TH_OK(ctx, teeny_onnx_input(m, i, &name, &node, NULL));
        TH_OK(ctx, teeny_plan_tensor(plan, node, &t));
        const float *src = !strcmp(name, "Q") ? x->q : !strcmp(name, "K") ? x->k : !strcmp(name, "V") ? x->v
                         : !strcmp(name, "M") ? x->m : NULL;
        ck_assert_msg(src != NULL, "an unexpected graph input %s", name);
        TH_OK(ctx, teeny_tensor_write(t, src, (size_t)teeny_tensor_numel(t)));
    }
}

/* Case c (whole: rank-1 masks' row kind) through the importer: the path
 * taken, Y (and QK) against the reference. Returns the dead rows. */
static size_t run_case(const oa_case *c, int whole, uint64_t seed)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(seed);
    oa_data x;
    char repro[300];
    size_t size, rows = (size_t)c->b * c->hq * c->s, n_dead = 0;
    snprintf(repro, sizeof repro, "%s (B %d Hq %d Hkv %d S %d T %d D %d Dv %d mask rank %d kind %d causal %d "
             "softcap %g qk %d whole %d seed %llu)", c->what, c->b, c->hq, c->hkv, c->s, c->t, c->d, c->dv, c->mrank,
             c->kind, c->causal, (double)c->softcap, c->want_qk, whole, (unsigned long long)seed);
    data_make(c, whole, &r, &x);
    unsigned char *bytes = model_make(c, x.mshape, x.m, x.bm, x.nm, &size);
    int64_t qs[4] = {c->b, c->hq, c->s, c->d}, ks[4] = {c->b, c->hkv, c->t, c->d}, vs[4] = {c->b, c->hkv, c->t, c->dv};
    teeny_onnx_feed feeds[4] = {{"Q", TEENY_ONNX_FLOAT, 4, qs, x.q}, {"K", TEENY_ONNX_FLOAT, 4, ks, x.k},
                                {"V", TEENY_ONNX_FLOAT, 4, vs, x.v}, {"M", TEENY_ONNX_FLOAT, c->mrank, x.mshape, x.m}};
    if (c->kind == MK_BOOL_FEED)
        feeds[3] = (teeny_onnx_feed){"M", TEENY_ONNX_INT64, c->mrank, x.mshape, x.bm64};
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    p.n_feeds = c->mrank && (c->kind == MK_FLOAT_INPUT || c->kind == MK_BOOL_FEED) ? 4 : 3;
    p.feeds = feeds;
    teeny_onnx_model *m = NULL;
    TH_OK(ctx, teeny_onnx_load_memory(ctx, bytes, size, &p, &m));
    const teeny_graph *g = teeny_onnx_graph(m);
    ck_assert_msg(c->fused ? has_node(g, "att.attention") && !has_node(g, "att.probs")
                           : has_node(g, "att.probs") && !has_node(g, "att.attention"),
                  "not the %s path; %s", c->fused ? "fused" : "decomposed", repro);
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *plan = NULL;
    pp.batch = teeny_onnx_batch(m);
    pp.training = 0;
    TH_OK(ctx, teeny_graph_compile(teeny_onnx_graph(m), &pp, &plan));
    write_input(ctx, m, plan, &x);
    TH_OK(ctx, teeny_plan_forward(plan));
    float *y = th_malloc(x.ny * sizeof(float)), *qk = th_malloc(rows * c->t * sizeof(float));
    double *yr = th_malloc(x.ny * sizeof(double)), *pr = th_malloc(rows * c->t * sizeof(double));
    int *dead = th_malloc(rows * sizeof(int));
    TH_OK(ctx, teeny_onnx_output_read(m, plan, 0, y, x.ny));
    reference(c, &x, yr, pr, dead);
    expect_rows(y, yr, dead, rows, c->dv, "Y", repro);
    if (c->want_qk) {
        TH_OK(ctx, teeny_onnx_output_read(m, plan, 1, qk, rows * c->t));
        expect_rows(qk, pr, dead, rows, c->t, "qk_matmul_output (mode 3)", repro);
    }
    for (size_t i = 0; i < rows; i++)
        n_dead += dead[i] != 0;
    teeny_plan_destroy(plan);
    teeny_onnx_destroy(m);
    free(bytes);
    free(y);
    free(qk);
    free(yr);
    free(pr);
    free(dead);
    data_free(&x);
    return n_dead;
}

/* ---- the cases ---- */

/* Every mask rank on the decomposition (rank 1 always; 2..4 through
 * qk_matmul_output) and, for 2..4, the fused kernel, float (run-time and
 * constant) and bool (feed and constant), causal or not, with and without
 * softcap: the dead rows are 0 and the -1e30 / -FLT_MAX rows the average. */
START_TEST(test_onnx_attention_masked_rows)
{
    static const oa_case cases[] = {
        {"rank 2, fused", 2, 2, 2, 12, 9, 16, 8, 2, {0, 0, 1, 1}, MK_FLOAT_INPUT, 0, 0.0f, 0, 1},
        {"rank 2, decomposed", 2, 2, 2, 12, 9, 16, 8, 2, {0, 0, 1, 1}, MK_FLOAT_INPUT, 0, 0.0f, 1, 0},
        {"rank 3, fused, causal", 2, 2, 2, 12, 14, 16, 16, 3, {0, 1, 1, 1}, MK_FLOAT_CONST, 1, 0.0f, 0, 1},
        {"rank 3, decomposed, causal", 2, 2, 2, 12, 14, 16, 16, 3, {0, 1, 1, 1}, MK_FLOAT_CONST, 1, 0.0f, 1, 0},
        {"rank 4, fused, softcap", 2, 3, 3, 12, 10, 8, 8, 4, {1, 0, 1, 1}, MK_FLOAT_INPUT, 0, 2.0f, 0, 1},
        {"rank 4, decomposed, softcap", 2, 3, 3, 12, 10, 8, 8, 4, {1, 0, 1, 1}, MK_FLOAT_INPUT, 0, 2.0f, 1, 0},
        {"rank 4 bool, fused, causal", 2, 2, 2, 12, 12, 16, 8, 4, {1, 1, 1, 1}, MK_BOOL_FEED, 1, 0.0f, 0, 1},
        {"rank 4 bool, decomposed, causal", 2, 2, 2, 12, 12, 16, 8, 4, {1, 1, 1, 1}, MK_BOOL_FEED, 1, 0.0f, 1, 0},
        {"rank 2 bool, fused", 1, 2, 2, 12, 7, 16, 16, 2, {0, 0, 1, 1}, MK_BOOL_CONST, 0, 0.0f, 0, 1},
        {"rank 2 bool, decomposed", 1, 2, 2, 12, 7, 16, 16, 2, {0, 0, 1, 1}, MK_BOOL_CONST, 0, 0.0f, 1, 0},
        {"rank 3 bool, decomposed, grouped heads", 2, 4, 2, 12, 9, 16, 8, 3, {0, 1, 1, 1}, MK_BOOL_CONST, 1, 0.0f,
         0, 0},
        {"rank 2, decomposed, grouped heads", 2, 4, 2, 12, 9, 16, 8, 2, {0, 0, 1, 1}, MK_FLOAT_INPUT, 0, 0.0f, 0, 0},
    };
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        size_t dead = run_case(&cases[i], 0, 600 + (uint64_t)i);
        ck_assert_msg(dead > 0, "%s: no row fully masked", cases[i].what);
    }
}
END_TEST

/* A rank-1 mask [T] (the decomposition, always): every key -inf (every
 * row masked: 0, where the plain softmax gave NaN), every key -1e30 (the
 * average), drawn (bool: a few false); causal, softcap, bool too. */
START_TEST(test_onnx_attention_rank1)
{
    static const oa_case cases[] = {
        {"rank 1", 2, 2, 2, 6, 9, 16, 8, 1, {0, 0, 0, 1}, MK_FLOAT_INPUT, 0, 0.0f, 0, 0},
        {"rank 1, causal, softcap", 1, 2, 2, 8, 8, 16, 16, 1, {0, 0, 0, 1}, MK_FLOAT_CONST, 1, 1.5f, 0, 0},
        {"rank 1 bool", 2, 2, 2, 6, 9, 16, 8, 1, {0, 0, 0, 1}, MK_BOOL_FEED, 0, 0.0f, 1, 0},
    };
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        const oa_case *c = &cases[i];
        size_t rows = (size_t)c->b * c->hq * c->s;
        ck_assert_uint_eq(run_case(c, 1, 700 + (uint64_t)i), rows); /* every key -inf (false) */
        ck_assert_uint_eq(run_case(c, 0, 710 + (uint64_t)i), 0);    /* drawn */
        if (c->kind != MK_BOOL_FEED)
            ck_assert_uint_eq(run_case(c, 4, 720 + (uint64_t)i), 0); /* every key -1e30 */
    }
}
END_TEST

Suite *suite_onnx_attention(void)
{
    Suite *s = suite_create("onnx_attention");
    TCase *fwd = tcase_create("forward");
    tcase_add_test(fwd, test_onnx_attention_masked_rows);
    tcase_add_test(fwd, test_onnx_attention_rank1);
    suite_add_tcase(s, fwd);
    return s;
}
