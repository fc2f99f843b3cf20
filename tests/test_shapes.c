/*
 * test_shapes.c -- the shape-overflow sweep: every entry point that takes
 * sizes or size-like parameters (tensor creation and views, every graph
 * builder, graph compile, and the eager ops' integer parameters) at sizes
 * near 2^31 and 2^63, zero and negative, each asserting the exact status
 * and that a failed builder leaves out = -1. The library forms every
 * product with overflow checks; make check-asan runs this suite under
 * UBSan with halt_on_error, so a signed overflow or a division by zero on
 * any of these paths fails it even where the status came out right.
 *
 * The eager ops that take only tensors (add, mul, activations, batch norm,
 * linear, loss, argmax, attention, global pooling) get every size from
 * tensors, which the tensor sweeps below bound; their integer-parameter
 * siblings (convolution, pooling, PSA, concat/split) are swept here.
 *
 * The rule for a shape of sizes s[i], from include/teenycl.h: a size < 1
 * is TEENY_ERR_ARG, a product past 2^31 - 1 elements TEENY_ERR_RANGE
 * (kernels index with int32). The expected products below are formed in
 * double, which is exact wherever it matters (below 2^53) and far past
 * 2^31 elsewhere -- independent of the library's integer helpers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "graph/graph_internal.h" /* the shape phase of a compile, run without allocating */

#define I32 ((int64_t)INT32_MAX)

/* Sizes near the edges: zero, negative, around 2^31 (46341^2 and 65536 x
 * 32768 pass it, 46340^2 does not), around 2^63 (3037000500^2 passes it;
 * 3 x 6148914691236517206 wraps to 2 in int64). */
static const int64_t EDGE[] = {0,     -1,    -2,          INT64_MIN,  1,           2,          3,
                               46340, 46341, 65536,       I32,        I32 + 1,     1LL << 32,  3037000499LL,
                               3037000500LL,   6148914691236517206LL, INT64_MAX};
#define N_EDGE ((int)(sizeof EDGE / sizeof EDGE[0]))

/* The status the header promises for a shape: ARG for a size < 1, RANGE
 * past 2^31 - 1 elements, else OK. */
static teeny_status rule(const int64_t *s, int n)
{
    double p = 1;
    for (int i = 0; i < n; i++)
        if (s[i] < 1)
            return TEENY_ERR_ARG;
    for (int i = 0; i < n; i++)
        p *= (double)s[i];
    return p > (double)INT32_MAX ? TEENY_ERR_RANGE : TEENY_OK;
}

static double dprod(const int64_t *s, int n)
{
    double p = 1;
    for (int i = 0; i < n; i++)
        p *= (double)s[i];
    return p;
}

static const char *dims(const int64_t *s, int n, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

#define EXPECT_STATUS(ctx, want, call, what)                                                                   \
    do {                                                                                                      \
        teeny_status st_ = (call);                                                                            \
        ck_assert_msg(st_ == (want), "%s: %s -> %s, want %s (%s)", (what), #call, teeny_status_name(st_),     \
                      teeny_status_name(want), teeny_last_error(ctx));                                       \
    } while (0)

/* A builder call: the exact status, out = -1 on failure, a message. */
#define BUILD(g, want, call, outp)                                                                             \
    do {                                                                                                      \
        *(outp) = 12345;                                                                                      \
        teeny_status st_ = (call);                                                                            \
        ck_assert_msg(st_ == (want), "line %d: %s -> %s, want %s (%s)", __LINE__, #call,                      \
                      teeny_status_name(st_), teeny_status_name(want), teeny_last_error(th_ctx()));            \
        if (st_ != TEENY_OK) {                                                                                \
            ck_assert_msg(*(outp) == -1, "line %d: %s failed but out = %d", __LINE__, #call, (int)*(outp));     \
            ck_assert_msg(teeny_last_error(th_ctx())[0] != '\0', "line %d: %s: no message", __LINE__, #call);  \
        }                                                                                                     \
    } while (0)

/* ---- tensors ---- */

START_TEST(test_shapes_tensor_create)
{
    teeny_ctx *ctx = th_ctx();
    char b[128];
    int64_t one1[1] = {1};
    teeny_tensor *sentinel = th_tensor(ctx, 1, one1); /* *out must not keep it on failure */
    for (int i = 0; i < N_EDGE; i++)
        for (int j = 0; j < N_EDGE; j++)
            for (int rank = 1; rank <= 3; rank++) {
                int64_t s[3] = {EDGE[i], EDGE[j], 3};
                teeny_status want = rule(s, rank);
                if (want == TEENY_OK && dprod(s, rank) > 65536)
                    continue; /* valid but large: device memory, not shapes */
                for (int i32 = 0; i32 < 2; i32++) {
                    teeny_tensor *t = sentinel;
                    teeny_status st = i32 ? teeny_tensor_create_i32(ctx, rank, s, &t)
                                          : teeny_tensor_create(ctx, rank, s, &t);
                    ck_assert_msg(st == want, "tensor %s%s -> %s, want %s", dims(s, rank, b, sizeof b),
                                  i32 ? " int32" : "", teeny_status_name(st), teeny_status_name(want));
                    ck_assert(st == TEENY_OK ? t != NULL && t != sentinel : t == NULL);
                    teeny_tensor_destroy(t);
                }
            }
    teeny_tensor_destroy(sentinel);
    teeny_tensor *t;
    int64_t s[6] = {1, 1, 1, 1, 1, 1};
    EXPECT_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_create(ctx, 0, s, &t), "rank 0");
    EXPECT_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_create(ctx, 6, s, &t), "rank 6");
    EXPECT_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_create(ctx, -1, s, &t), "rank -1");
    EXPECT_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_create(ctx, 2, NULL, &t), "NULL shape");
    /* five sizes whose int64 product wraps to exactly 2^31 - 1 ... and to 1 */
    int64_t wrap[5] = {I32, 1LL << 32, 1LL << 32, 1, 1}, one[5] = {3, 6148914691236517206LL, 1, 1, 1};
    EXPECT_STATUS(ctx, TEENY_ERR_RANGE, teeny_tensor_create(ctx, 5, wrap, &t), "wrapping 5-d");
    EXPECT_STATUS(ctx, TEENY_ERR_RANGE, teeny_tensor_create(ctx, 2, one, &t), "[3, 6148914691236517206]");
}
END_TEST

START_TEST(test_shapes_tensor_view)
{
    teeny_ctx *ctx = th_ctx();
    teeny_device_info info = TEENY_DEVICE_INFO_INIT;
    int64_t bs[1] = {64};
    char b[128];
    TH_OK(ctx, teeny_ctx_device_info(ctx, &info));
    teeny_tensor *base = th_tensor(ctx, 1, bs), *v;
    for (int i = 0; i < N_EDGE; i++)
        for (int j = 0; j < N_EDGE; j++) {
            int64_t s[2] = {EDGE[i], EDGE[j]};
            teeny_status want = rule(s, 2);
            if (want == TEENY_OK && dprod(s, 2) > 64) /* a valid shape larger than the base */
                want = dprod(s, 2) * 4 > (double)info.max_alloc_bytes ? TEENY_ERR_RANGE : TEENY_ERR_SHAPE;
            teeny_status st = teeny_tensor_view(base, 0, 2, s, &v);
            ck_assert_msg(st == want, "view %s of [64] -> %s, want %s", dims(s, 2, b, sizeof b),
                          teeny_status_name(st), teeny_status_name(want));
            teeny_tensor_destroy(v);
        }
    static const struct { int64_t offset, n; teeny_status want; } off[] = {
        {-1, 1, TEENY_ERR_SHAPE},        {INT64_MIN, 1, TEENY_ERR_SHAPE}, {INT64_MAX, 1, TEENY_ERR_SHAPE},
        {INT64_MAX - 1, 2, TEENY_ERR_SHAPE}, {64, 1, TEENY_ERR_SHAPE},   {63, 2, TEENY_ERR_SHAPE},
        {63, 1, TEENY_OK},               {0, 64, TEENY_OK},                {1, 64, TEENY_ERR_SHAPE}};
    for (size_t k = 0; k < sizeof off / sizeof off[0]; k++) {
        teeny_status st = teeny_tensor_view(base, off[k].offset, 1, &off[k].n, &v);
        ck_assert_msg(st == off[k].want, "view [%lld] at offset %lld -> %s", (long long)off[k].n,
                      (long long)off[k].offset, teeny_status_name(st));
        teeny_tensor_destroy(v);
    }
    teeny_tensor_destroy(base);
}
END_TEST

/* ---- graph inputs, reshapes, compile batches ---- */

START_TEST(test_shapes_graph_inputs)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node n;
    char b[128];
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    for (int i = 0; i < N_EDGE; i++)
        for (int j = 0; j < N_EDGE; j++)
            for (int rank = 2; rank <= 4; rank++) {
                int64_t s[4] = {-1, EDGE[i], EDGE[j], 2};
                teeny_status want = rule(s + 1, rank - 1);
                n = 12345;
                teeny_status st = teeny_graph_input(g, NULL, rank, s, &n);
                ck_assert_msg(st == want, "graph input %s -> %s, want %s", dims(s, rank, b, sizeof b),
                              teeny_status_name(st), teeny_status_name(want));
                ck_assert(st == TEENY_OK ? n >= 0 : n == -1);
            }
    static const int64_t first[] = {0, 1, 2, -2, INT64_MIN, INT64_MAX};
    for (size_t k = 0; k < sizeof first / sizeof first[0]; k++) {
        int64_t s[2] = {first[k], 4};
        BUILD(g, TEENY_ERR_ARG, teeny_graph_input(g, NULL, 2, s, &n), &n);
    }
    teeny_graph_destroy(g);
}
END_TEST

/* The status of reshaping numel elements to s[0..n): ARG for a size < 1
 * other than one -1, else SHAPE unless the product (or, with a -1, a
 * divisor of numel) is numel. */
static teeny_status reshape_rule(const int64_t *s, int n, int64_t numel)
{
    int free_at = -1;
    double p = 1;
    for (int i = 0; i < n; i++) {
        if (s[i] == -1 && free_at < 0)
            free_at = i;
        else if (s[i] < 1)
            return TEENY_ERR_ARG;
    }
    for (int i = 0; i < n; i++)
        if (i != free_at)
            p *= (double)s[i];
    if (p > (double)numel)
        return TEENY_ERR_SHAPE;
    if (free_at >= 0)
        return numel % (int64_t)p ? TEENY_ERR_SHAPE : TEENY_OK;
    return p == (double)numel ? TEENY_OK : TEENY_ERR_SHAPE;
}

START_TEST(test_shapes_graph_reshape)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, big, n;
    char b[128];
    int64_t xs[3] = {-1, 2, 3}, bigs[3] = {-1, 46340, 46340};
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 3, xs, &x));      /* 6 elements at batch 1 */
    TH_OK(ctx, teeny_graph_input(g, "big", 3, bigs, &big)); /* 2147395600 */
    const int64_t numel[2] = {6, 46340LL * 46340};
    static const int64_t extra[] = {-1, 6, 46340LL * 46340, 46340LL * 46341};
    int64_t vals[N_EDGE + 4];
    memcpy(vals, EDGE, sizeof EDGE);
    memcpy(vals + N_EDGE, extra, sizeof extra);
    int nv = N_EDGE + 4;
    for (int src = 0; src < 2; src++)
        for (int i = 0; i < nv; i++)
            for (int j = 0; j < nv; j++)
                for (int rank = 1; rank <= 3; rank++) {
                    int64_t s[3] = {vals[i], vals[j], rank == 3 && src ? 46340 : 1};
                    teeny_status want = reshape_rule(s, rank, numel[src]);
                    n = 12345;
                    teeny_status st = teeny_graph_reshape(g, NULL, src ? big : x, rank, s, &n);
                    ck_assert_msg(st == want, "reshape of %lld elements to %s -> %s, want %s (%s)",
                                  (long long)numel[src], dims(s, rank, b, sizeof b), teeny_status_name(st),
                                  teeny_status_name(want), teeny_last_error(ctx));
                    ck_assert(st == TEENY_OK ? n >= 0 : n == -1);
                    if (st == TEENY_OK) { /* the inferred size, and zeros past the rank */
                        int nd;
                        int64_t got[5];
                        TH_OK(ctx, teeny_graph_node_info(g, n, NULL, &nd, got));
                        ck_assert(nd == rank && dprod(got, nd) == (double)numel[src]);
                    }
                }
    /* the issue's case, and a product that wraps to 0 (then a modulo by 0) */
    int64_t issue[2] = {3, 6148914691236517206LL}, zero[3] = {-1, 1LL << 32, 1LL << 32};
    TH_OK(ctx, teeny_graph_input(g, "two", 2, (int64_t[]){-1, 2}, &x)); /* 2 elements */
    BUILD(g, TEENY_ERR_SHAPE, teeny_graph_reshape(g, NULL, x, 2, issue, &n), &n);
    BUILD(g, TEENY_ERR_SHAPE, teeny_graph_reshape(g, NULL, x, 3, zero, &n), &n);
    BUILD(g, TEENY_ERR_ARG, teeny_graph_reshape(g, NULL, x, 0, issue, &n), &n);
    BUILD(g, TEENY_ERR_ARG, teeny_graph_reshape(g, NULL, x, 6, issue, &n), &n);
    BUILD(g, TEENY_ERR_ARG, teeny_graph_reshape(g, NULL, x, 2, NULL, &n), &n);
    teeny_graph_destroy(g);
}
END_TEST

/* The shape phase of a compile for batch (no memory is allocated). */
static teeny_status shapes_at(teeny_graph *g, teeny_node loss, int64_t batch, int training)
{
    teeny_plan *p = NULL;
    TH_OK(th_ctx(), teeny__plan_alloc(g, batch, training, loss, 1, &p));
    teeny_status st = teeny__compile_shapes(p);
    teeny__plan_free(p);
    return st;
}

/* Each node's value at the largest batch that fits int32 indexing passes,
 * one more is TEENY_ERR_RANGE: inputs, and ops whose value outgrows their
 * input (linear, 1x1 conv with more channels, concat, padded pooling,
 * the PSA merge, attention with Nq > Nk). */
START_TEST(test_shapes_compile_batches)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_plan *p;
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_node x, y, n, lo, q, k, v;
    teeny_conv2d_params c1 = TEENY_CONV2D_PARAMS_INIT;
    teeny_pool2d_params grow = {.kernel = {2, 2}, .stride = {1, 1}, .pad = {1, 1}};
    const struct { const char *what; int64_t ok; } cases[] = {
        {"input", (1LL << 30) - 1}, {"linear", 65535}, {"conv", 65535}, {"concat", 32767},
        {"pool", 1}, {"merge", 1}, {"attention", 7}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
        switch (c) {
        case 0: TH_OK(ctx, teeny_graph_input(g, "x", 2, (int64_t[]){-1, 2}, &n)); break;
        case 1:
            TH_OK(ctx, teeny_graph_input(g, "x", 2, (int64_t[]){-1, 1}, &x));
            TH_OK(ctx, teeny_graph_linear(g, "fc", x, 1 << 15, 0, &n)); /* [B, 2^15] */
            break;
        case 2:
            TH_OK(ctx, teeny_graph_input(g, "x", 4, (int64_t[]){-1, 1, 1, 1}, &x));
            TH_OK(ctx, teeny_graph_conv2d(g, "conv", x, 1 << 15, 1, 1, &c1, 0, &n)); /* [B, 2^15, 1, 1] */
            break;
        case 3:
            TH_OK(ctx, teeny_graph_input(g, "x", 2, (int64_t[]){-1, 1 << 15}, &x));
            TH_OK(ctx, teeny_graph_input(g, "y", 2, (int64_t[]){-1, 1 << 15}, &y));
            TH_OK(ctx, teeny_graph_concat(g, "cat", 2, (teeny_node[]){x, y}, &n)); /* [B, 2^16] */
            break;
        case 4: /* (2^15 - 1)^2 in, 2^30 out per sample */
            TH_OK(ctx, teeny_graph_input(g, "x", 4, (int64_t[]){-1, 1, 32767, 32767}, &x));
            TH_OK(ctx, teeny_graph_avgpool2d(g, "pool", x, &grow, &n));
            break;
        case 5: /* lo, hi [B, 2^14, 2^15] -> [B, 2^16, 2^7, 2^7] */
            TH_OK(ctx, teeny_graph_input(g, "lo", 3, (int64_t[]){-1, 1 << 14, 1 << 15}, &lo));
            TH_OK(ctx, teeny_graph_psa_merge_attn(g, "merge", lo, lo, 1, 1 << 7, 1 << 7, &n));
            break;
        default: /* q [B, 2^20, 1], k [B, 1, 1], v [B, 1, 256] -> o [B, 2^20, 256] */
            TH_OK(ctx, teeny_graph_input(g, "q", 3, (int64_t[]){-1, 1 << 20, 1}, &q));
            TH_OK(ctx, teeny_graph_input(g, "k", 3, (int64_t[]){-1, 1, 1}, &k));
            TH_OK(ctx, teeny_graph_input(g, "v", 3, (int64_t[]){-1, 1, 256}, &v));
            TH_OK(ctx, teeny_graph_attention(g, "att", q, k, v, 1.0f, &n));
            break;
        }
        EXPECT_STATUS(ctx, TEENY_OK, shapes_at(g, n, cases[c].ok, 0), cases[c].what);
        EXPECT_STATUS(ctx, TEENY_ERR_RANGE, shapes_at(g, n, cases[c].ok + 1, 0), cases[c].what);
        EXPECT_STATUS(ctx, TEENY_ERR_RANGE, shapes_at(g, n, INT32_MAX, 0), cases[c].what);
        /* the public compile: the same RANGE before anything is allocated;
         * batches outside 1..2^31 - 1 are TEENY_ERR_ARG */
        static const int64_t bad[] = {0, -1, INT64_MIN, I32 + 1, INT64_MAX};
        pp.training = 0;
        pp.loss = n;
        pp.batch = cases[c].ok + 1;
        p = NULL;
        EXPECT_STATUS(ctx, TEENY_ERR_RANGE, teeny_graph_compile(g, &pp, &p), cases[c].what);
        ck_assert_ptr_null(p);
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            pp.batch = bad[i];
            EXPECT_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_compile(g, &pp, &p), cases[c].what);
        }
        teeny_graph_destroy(g);
    }
}
END_TEST

/* ---- every builder at edge attributes and edge input sizes ---- */

START_TEST(test_shapes_builders)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x4, x2, big4, big2, lab, q, kv, vv, qkv, lo, n;
    teeny_conv2d_params cp = TEENY_CONV2D_PARAMS_INIT;
    teeny_pool2d_params pl = TEENY_POOL2D_PARAMS_INIT;
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "x4", 4, (int64_t[]){-1, 2, 5, 5}, &x4));
    TH_OK(ctx, teeny_graph_input(g, "x2", 2, (int64_t[]){-1, 6}, &x2));
    TH_OK(ctx, teeny_graph_input(g, "big4", 4, (int64_t[]){-1, 2, 32768, 32767}, &big4)); /* 2^31 - 2^16 */
    TH_OK(ctx, teeny_graph_input(g, "big2", 2, (int64_t[]){-1, I32}, &big2));
    TH_OK(ctx, teeny_graph_labels(g, "labels", &lab));
    TH_OK(ctx, teeny_graph_input(g, "q", 3, (int64_t[]){-1, 3, 4}, &q));
    TH_OK(ctx, teeny_graph_input(g, "k", 3, (int64_t[]){-1, 5, 4}, &kv));
    TH_OK(ctx, teeny_graph_input(g, "v", 3, (int64_t[]){-1, 5, 6}, &vv));
    TH_OK(ctx, teeny_graph_input(g, "qkv", 4, (int64_t[]){-1, 16, 3, 3}, &qkv)); /* heads 2, key_dim 2 */
    TH_OK(ctx, teeny_graph_input(g, "lo", 3, (int64_t[]){-1, 9, 2}, &lo));

    /* same-size ops on inputs of nearly 2^31 elements: fine at batch 1 */
    BUILD(g, TEENY_OK, teeny_graph_activation(g, NULL, big4, TEENY_ACT_SILU, &n), &n);
    BUILD(g, TEENY_OK, teeny_graph_add(g, NULL, big4, big4, &n), &n);
    BUILD(g, TEENY_OK, teeny_graph_mul(g, NULL, big2, big2, &n), &n);
    BUILD(g, TEENY_OK, teeny_graph_batchnorm(g, NULL, big4, 0.1f, 1e-5f, &n), &n);
    BUILD(g, TEENY_OK, teeny_graph_global_avgpool(g, NULL, big4, &n), &n);
    BUILD(g, TEENY_OK, teeny_graph_maxpool2d(g, NULL, big4, &pl, &n), &n);
    BUILD(g, TEENY_OK, teeny_graph_slice_channels(g, NULL, big4, 1, 1, &n), &n);
    BUILD(g, TEENY_OK, teeny_graph_flatten(g, NULL, big4, &n), &n);
    BUILD(g, TEENY_OK, teeny_graph_concat(g, NULL, 1, &big4, &n), &n);
    BUILD(g, TEENY_ERR_RANGE, teeny_graph_concat(g, NULL, 2, (teeny_node[]){big4, big4}, &n), &n);
    BUILD(g, TEENY_ERR_RANGE, teeny_graph_concat(g, NULL, 2, (teeny_node[]){big2, x2}, &n), &n);
    BUILD(g, TEENY_OK, teeny_graph_softmax_cross_entropy(g, NULL, x2, lab, &n), &n);

    /* conv2d: out_channels and kernels 1..2^24; stride, dilation >= 1,
     * pad >= 0, groups dividing the channels; a padded input past 2^30 or
     * an output or weight past 2^31 - 1 elements is TEENY_ERR_RANGE */
    static const int bad_count[] = {0, -1, INT32_MIN, (1 << 24) + 1, INT32_MAX};
    for (size_t i = 0; i < sizeof bad_count / sizeof bad_count[0]; i++) {
        BUILD(g, TEENY_ERR_ARG, teeny_graph_conv2d(g, NULL, x4, bad_count[i], 3, 3, &cp, 1, &n), &n);
        BUILD(g, TEENY_ERR_ARG, teeny_graph_conv2d(g, NULL, x4, 4, bad_count[i], 3, &cp, 1, &n), &n);
        BUILD(g, TEENY_ERR_ARG, teeny_graph_conv2d(g, NULL, x4, 4, 3, bad_count[i], &cp, 1, &n), &n);
    }
    static const int bad_min1[] = {0, -1, INT32_MIN};
    for (size_t i = 0; i < sizeof bad_min1 / sizeof bad_min1[0]; i++)
        for (int axis = 0; axis < 2; axis++) {
            teeny_conv2d_params s = cp, d = cp, p = cp, gr = cp;
            s.stride[axis] = d.dilation[axis] = bad_min1[i];
            p.pad[axis] = bad_min1[i] == 0 ? -1 : bad_min1[i];
            gr.groups = bad_min1[i];
            BUILD(g, TEENY_ERR_ARG, teeny_graph_conv2d(g, NULL, x4, 4, 3, 3, &s, 1, &n), &n);
            BUILD(g, TEENY_ERR_ARG, teeny_graph_conv2d(g, NULL, x4, 4, 3, 3, &d, 1, &n), &n);
            BUILD(g, TEENY_ERR_ARG, teeny_graph_conv2d(g, NULL, x4, 4, 3, 3, &p, 1, &n), &n);
            BUILD(g, TEENY_ERR_ARG, teeny_graph_conv2d(g, NULL, x4, 4, 3, 3, &gr, 1, &n), &n);
        }
    for (int axis = 0; axis < 2; axis++) {
        teeny_conv2d_params s = cp, d = cp, p = cp, p2 = cp, p3 = cp;
        s.stride[axis] = INT32_MAX; /* one window per axis */
        BUILD(g, TEENY_OK, teeny_graph_conv2d(g, NULL, x4, 4, 3, 3, &s, 1, &n), &n);
        d.dilation[axis] = INT32_MAX; /* the dilated kernel passes the input */
        BUILD(g, TEENY_ERR_SHAPE, teeny_graph_conv2d(g, NULL, x4, 4, 3, 3, &d, 1, &n), &n);
        p.pad[axis] = INT32_MAX; /* 5 + 2*pad past int32 */
        BUILD(g, TEENY_ERR_RANGE, teeny_graph_conv2d(g, NULL, x4, 4, 3, 3, &p, 1, &n), &n);
        p2.pad[axis] = 1 << 29; /* 5 + 2^30 > 2^30 - 1 */
        BUILD(g, TEENY_ERR_RANGE, teeny_graph_conv2d(g, NULL, x4, 4, 3, 3, &p2, 1, &n), &n);
        p3.pad[0] = p3.pad[1] = 1 << 16; /* [1, 4, 131075, 131075]: 2^36 elements */
        BUILD(g, TEENY_ERR_RANGE, teeny_graph_conv2d(g, NULL, x4, 4, 3, 3, &p3, 1, &n), &n);
    }
    {
        teeny_conv2d_params gr = cp, big_k = cp;
        gr.groups = INT32_MAX;
        BUILD(g, TEENY_ERR_SHAPE, teeny_graph_conv2d(g, NULL, x4, 4, 3, 3, &gr, 1, &n), &n);
        gr.groups = 2;
        BUILD(g, TEENY_ERR_SHAPE, teeny_graph_conv2d(g, NULL, x4, 3, 3, 3, &gr, 1, &n), &n);
        /* weight [1, 2, 2^24, 2^24] (2^49 elements; Cin/groups * kh * kw
         * once overflowed int64 for wider inputs) */
        big_k.pad[0] = big_k.pad[1] = 1 << 23;
        BUILD(g, TEENY_ERR_RANGE, teeny_graph_conv2d(g, NULL, x4, 1, 1 << 24, 1 << 24, &big_k, 0, &n), &n);
        teeny_node wide;
        TH_OK(ctx, teeny_graph_input(g, "wide", 4, (int64_t[]){-1, 1 << 20, 1, 1}, &wide));
        BUILD(g, TEENY_ERR_RANGE, teeny_graph_conv2d(g, NULL, wide, 1, 1 << 24, 1 << 24, &big_k, 0, &n), &n);
        /* an output past 2^31 - 1: [1, 2^24, 16, 16] */
        teeny_node x16;
        TH_OK(ctx, teeny_graph_input(g, "x16", 4, (int64_t[]){-1, 1, 16, 16}, &x16));
        BUILD(g, TEENY_ERR_RANGE, teeny_graph_conv2d(g, NULL, x16, 1 << 24, 1, 1, &cp, 0, &n), &n);
    }

    /* pooling: kernel, stride >= 1, 0 <= pad <= kernel / 2 (ARG); kernel
     * past the padded input (SHAPE); padded extent past 2^31 - 1 (RANGE) */
    for (int axis = 0; axis < 2; axis++)
        for (size_t i = 0; i < sizeof bad_min1 / sizeof bad_min1[0]; i++) {
            teeny_pool2d_params k = pl, s = pl, p = pl;
            k.kernel[axis] = s.stride[axis] = bad_min1[i];
            p.pad[axis] = bad_min1[i] == 0 ? -1 : bad_min1[i];
            BUILD(g, TEENY_ERR_ARG, teeny_graph_maxpool2d(g, NULL, x4, &k, &n), &n);
            BUILD(g, TEENY_ERR_ARG, teeny_graph_avgpool2d(g, NULL, x4, &s, &n), &n);
            BUILD(g, TEENY_ERR_ARG, teeny_graph_avgpool2d(g, NULL, x4, &p, &n), &n);
        }
    for (int axis = 0; axis < 2; axis++) {
        teeny_pool2d_params k = pl, kp = pl, s = pl, p = pl, edge = pl;
        k.kernel[axis] = INT32_MAX;
        BUILD(g, TEENY_ERR_SHAPE, teeny_graph_avgpool2d(g, NULL, x4, &k, &n), &n);
        kp.kernel[axis] = INT32_MAX;
        kp.pad[axis] = INT32_MAX / 2; /* 5 + 2^31 - 2 */
        BUILD(g, TEENY_ERR_RANGE, teeny_graph_avgpool2d(g, NULL, x4, &kp, &n), &n);
        p.pad[axis] = 2; /* more than half the kernel */
        BUILD(g, TEENY_ERR_ARG, teeny_graph_avgpool2d(g, NULL, x4, &p, &n), &n);
        s.stride[axis] = INT32_MAX;
        BUILD(g, TEENY_OK, teeny_graph_avgpool2d(g, NULL, x4, &s, &n), &n);
        edge.kernel[axis] = INT32_MAX - 4; /* 5 + 2*pad = 2^31 - 1 exactly */
        edge.pad[axis] = (INT32_MAX - 5) / 2;
        BUILD(g, TEENY_OK, teeny_graph_avgpool2d(g, NULL, x4, &edge, &n), &n);
    }

    /* linear: out_features >= 1 (ARG); output or weight past 2^31 - 1 (RANGE) */
    for (size_t i = 0; i < sizeof bad_min1 / sizeof bad_min1[0]; i++)
        BUILD(g, TEENY_ERR_ARG, teeny_graph_linear(g, NULL, x2, bad_min1[i], 1, &n), &n);
    BUILD(g, TEENY_ERR_RANGE, teeny_graph_linear(g, NULL, x2, INT32_MAX, 1, &n), &n);
    BUILD(g, TEENY_ERR_RANGE, teeny_graph_linear(g, NULL, x2, (INT32_MAX / 6) + 1, 0, &n), &n);
    BUILD(g, TEENY_ERR_RANGE, teeny_graph_linear(g, NULL, big2, 2, 0, &n), &n);

    /* slice: start >= 0, count >= 1, start + count <= channels (no int overflow) */
    static const int starts[][2] = {{-1, 1}, {INT32_MIN, 1}, {INT32_MAX, 1}, {0, 0}, {0, -1}, {0, INT32_MAX},
                                    {1, INT32_MAX}, {INT32_MAX, INT32_MAX}, {5, 2}};
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++)
        BUILD(g, TEENY_ERR_ARG, teeny_graph_slice_channels(g, NULL, x2, starts[i][0], starts[i][1], &n), &n);
    BUILD(g, TEENY_OK, teeny_graph_slice_channels(g, NULL, x2, 5, 1, &n), &n);

    /* concat: n >= 1 */
    BUILD(g, TEENY_ERR_ARG, teeny_graph_concat(g, NULL, 0, &x2, &n), &n);
    BUILD(g, TEENY_ERR_ARG, teeny_graph_concat(g, NULL, -1, &x2, &n), &n);
    BUILD(g, TEENY_ERR_ARG, teeny_graph_concat(g, NULL, INT32_MIN, &x2, &n), &n);

    /* attention: the sizes come from the inputs; D above 128 is unsupported */
    BUILD(g, TEENY_OK, teeny_graph_attention(g, NULL, q, kv, vv, 0.5f, &n), &n);
    BUILD(g, TEENY_ERR_SHAPE, teeny_graph_attention(g, NULL, q, vv, vv, 0.5f, &n), &n);

    /* PSA: heads, key_dim >= 1 (ARG); heads*4*key_dim past 2^31 - 1
     * (RANGE: it once overflowed int64 at INT32_MAX^2) or not the channels
     * (SHAPE) */
    static const struct { int heads, kd; teeny_status want; } psa[] = {
        {2, 2, TEENY_OK},
        {0, 2, TEENY_ERR_ARG},
        {2, 0, TEENY_ERR_ARG},
        {-1, 2, TEENY_ERR_ARG},
        {INT32_MIN, INT32_MIN, TEENY_ERR_ARG},
        {INT32_MAX, INT32_MAX, TEENY_ERR_RANGE},
        {1 << 29, 1, TEENY_ERR_RANGE},
        {1, 1 << 29, TEENY_ERR_RANGE},
        {(1 << 29) - 1, 1, TEENY_ERR_SHAPE},
        {3, 1, TEENY_ERR_SHAPE},
    };
    for (size_t i = 0; i < sizeof psa / sizeof psa[0]; i++) {
        BUILD(g, psa[i].want, teeny_graph_psa_attention(g, NULL, qkv, psa[i].heads, psa[i].kd, &n), &n);
        BUILD(g, psa[i].want, teeny_graph_psa_pack_qkv(g, NULL, qkv, psa[i].heads, psa[i].kd, &n), &n);
        BUILD(g, psa[i].want, teeny_graph_psa_extract_v(g, NULL, qkv, psa[i].heads, psa[i].kd, &n), &n);
    }
    /* merge: heads, height, width >= 1 (ARG); heads*2*key_dim within int32
     * (RANGE, as the eager call: one infer checks both); H*W must be the
     * tokens (SHAPE) */
    static const struct { int heads, h, w; teeny_status want;
    } merge[] = {
        {1, 3, 3, TEENY_OK},
        {0, 3, 3, TEENY_ERR_ARG},
        {1, 0, 3, TEENY_ERR_ARG},
        {1, 3, -1, TEENY_ERR_ARG},
        {INT32_MIN, 3, 3, TEENY_ERR_ARG},
        {INT32_MAX, 3, 3, TEENY_ERR_RANGE},
        {1, INT32_MAX, INT32_MAX, TEENY_ERR_SHAPE},
        {2, 3, 3, TEENY_ERR_SHAPE},
    };
    for (size_t i = 0; i < sizeof merge / sizeof merge[0]; i++)
        BUILD(g, merge[i].want, teeny_graph_psa_merge_attn(g, NULL, lo, lo, merge[i].heads, merge[i].h, merge[i].w, &n),
              &n);
    teeny_graph_destroy(g);
}
END_TEST

/* ---- the eager ops' integer parameters ---- */

START_TEST(test_shapes_eager_conv_pool)
{
    teeny_ctx *ctx = th_ctx();
    int64_t xs[4] = {1, 2, 5, 5}, ws[4] = {4, 2, 3, 3}, ys[4] = {1, 4, 3, 3}, y1[4] = {1, 4, 1, 3}, bs[1] = {4},
            ps[4] = {1, 2, 2, 2}, p1[4] = {1, 2, 1, 2}, out[4];
    teeny_tensor *x = th_tensor(ctx, 4, xs), *w = th_tensor(ctx, 4, ws), *y = th_tensor(ctx, 4, ys),
                 *ya = th_tensor(ctx, 4, y1), *b = th_tensor(ctx, 1, bs), *dx = th_tensor(ctx, 4, xs),
                 *py = th_tensor(ctx, 4, ps), *py1 = th_tensor(ctx, 4, p1);
    teeny_tensor *all[] = {x, w, y, ya, b, dx, py, py1};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        TH_OK(ctx, teeny_tensor_fill(all[i], 0.5f));
    teeny_conv2d_params cp = TEENY_CONV2D_PARAMS_INIT;
    /* conv2d_output_shape: sizes < 1 ARG, past int32 RANGE (they once
     * overflowed int64 in H + 2*pad and Cin/groups * groups) */
    for (int i = 0; i < N_EDGE; i++)
        for (int which = 0; which < 2; which++)
            for (int d = 0; d < 4; d++) {
                int64_t xe[4] = {1, 2, 5, 5}, we[4] = {4, 2, 3, 3};
                (which ? we : xe)[d] = EDGE[i];
                teeny_status want = EDGE[i] < 1 ? TEENY_ERR_ARG : EDGE[i] > I32 ? TEENY_ERR_RANGE : TEENY_OK;
                if (want == TEENY_OK) /* within int32: channels, kernel and output rules */
                    continue;
                teeny_status st = teeny_conv2d_output_shape(&cp, xe, we, out);
                ck_assert_msg(st == want, "conv2d_output_shape %s dim %d = %lld -> %s, want %s", which ? "w" : "x", d,
                              (long long)EDGE[i], teeny_status_name(st), teeny_status_name(want));
            }
    /* the parameters, through output_shape and every eager convolution */
    const struct { int field, axis, value; teeny_status want; } conv[] = {
        {0, 0, 0, TEENY_ERR_ARG},        {0, 1, -1, TEENY_ERR_ARG},       {0, 0, INT32_MIN, TEENY_ERR_ARG},
        {1, 0, -1, TEENY_ERR_ARG},       {1, 1, INT32_MIN, TEENY_ERR_ARG}, {1, 0, INT32_MAX, TEENY_ERR_RANGE},
        {1, 1, 1 << 29, TEENY_ERR_RANGE}, {2, 0, 0, TEENY_ERR_ARG},        {2, 1, INT32_MAX, TEENY_ERR_SHAPE},
        {3, 0, 0, TEENY_ERR_ARG},        {3, 0, -1, TEENY_ERR_ARG},       {3, 0, INT32_MAX, TEENY_ERR_SHAPE},
        {0, 0, INT32_MAX, TEENY_OK},
    };
    for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++) {
        teeny_conv2d_params p = cp;
        int *f = conv[i].field == 0   ? p.stride
                 : conv[i].field == 1 ? p.pad
                 : conv[i].field == 2 ? p.dilation
                                      : &p.groups;
        f[conv[i].field == 3 ? 0 : conv[i].axis] = conv[i].value;
        char what[64];
        snprintf(what, sizeof what, "conv param %d[%d] = %d", conv[i].field, conv[i].axis, conv[i].value);
        EXPECT_STATUS(NULL, conv[i].want, teeny_conv2d_output_shape(&p, xs, ws, out), what);
        if (conv[i].want == TEENY_OK) {
            ck_assert(out[2] == 1 && out[3] == 3);
            TH_OK(ctx, teeny_conv2d_forward(ctx, &p, x, w, b, ya));
            th_expect_all(ya, 2 * 3 * 3 * 0.25f + 0.5f); /* every window inside x, all 0.5 */
            continue;
        }
        EXPECT_STATUS(ctx, conv[i].want, teeny_conv2d_forward(ctx, &p, x, w, b, y), what);
        EXPECT_STATUS(ctx, conv[i].want, teeny_conv2d_forward_fused(ctx, &p, x, w, b, NULL, NULL, TEENY_ACT_RELU, y),
                      what);
        EXPECT_STATUS(ctx, conv[i].want, teeny_conv2d_backward(ctx, &p, x, w, y, dx, NULL, NULL), what);
    }
    th_expect_all(y, 0.5f);
    th_expect_all(dx, 0.5f);

    /* pooling parameters, through output_shape and every eager window op */
    teeny_pool2d_params pl = TEENY_POOL2D_PARAMS_INIT;
    const struct { int field, axis, value; teeny_status want; } pool[] = {
        {0, 0, 0, TEENY_ERR_ARG},           {0, 1, -1, TEENY_ERR_ARG},        {0, 0, INT32_MIN, TEENY_ERR_ARG},
        {0, 1, INT32_MAX, TEENY_ERR_SHAPE}, {1, 0, 0, TEENY_ERR_ARG},         {1, 1, INT32_MIN, TEENY_ERR_ARG},
        {2, 0, -1, TEENY_ERR_ARG},          {2, 1, INT32_MAX, TEENY_ERR_ARG}, {2, 0, 2, TEENY_ERR_ARG},
        {1, 0, INT32_MAX, TEENY_OK},
    };
    for (size_t i = 0; i < sizeof pool / sizeof pool[0]; i++) {
        teeny_pool2d_params p = pl;
        int *f = pool[i].field == 0 ? p.kernel : pool[i].field == 1 ? p.stride : p.pad;
        f[pool[i].axis] = pool[i].value;
        char what[64];
        snprintf(what, sizeof what, "pool param %d[%d] = %d", pool[i].field, pool[i].axis, pool[i].value);
        EXPECT_STATUS(NULL, pool[i].want, teeny_pool2d_output_shape(&p, xs, out), what);
        teeny_tensor *yy = pool[i].want == TEENY_OK ? py1 : py;
        EXPECT_STATUS(ctx, pool[i].want, teeny_maxpool2d_forward(ctx, &p, x, yy, NULL), what);
        EXPECT_STATUS(ctx, pool[i].want, teeny_avgpool2d_forward(ctx, &p, x, yy), what);
        EXPECT_STATUS(ctx, pool[i].want, teeny_avgpool2d_backward(ctx, &p, x, yy, dx), what);
    }
    {   /* kernel and pad whose padded extent passes int32 */
        teeny_pool2d_params p = {.kernel = {INT32_MAX, 2}, .stride = {1, 2}, .pad = {INT32_MAX / 2, 0}};
        EXPECT_STATUS(NULL, TEENY_ERR_RANGE, teeny_pool2d_output_shape(&p, xs, out), "pool padded extent");
        EXPECT_STATUS(ctx, TEENY_ERR_RANGE, teeny_avgpool2d_forward(ctx, &p, x, py), "pool padded extent");
    }
    th_expect_all(py, 0.5f);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        teeny_tensor_destroy(all[i]);
}
END_TEST

START_TEST(test_shapes_eager_psa_concat)
{
    teeny_ctx *ctx = th_ctx();
    int64_t qs[4] = {1, 16, 3, 3}, os[4] = {1, 8, 3, 3}, ls[2] = {2, 9}, pk[4] = {4, 2, 9, 2}, lo[3] = {2, 9, 2};
    teeny_tensor *qkv = th_tensor(ctx, 4, qs), *o = th_tensor(ctx, 4, os), *lse = th_tensor(ctx, 2, ls),
                 *packed = th_tensor(ctx, 4, pk), *dq = th_tensor(ctx, 4, qs), *ol = th_tensor(ctx, 3, lo),
                 *oh = th_tensor(ctx, 3, lo);
    teeny_tensor *all[] = {qkv, o, lse, packed, dq, ol, oh};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        TH_OK(ctx, teeny_tensor_fill(all[i], 0.25f));
    static const struct { int heads, kd; teeny_status want; } psa[] = {
        {0, 2, TEENY_ERR_ARG},
        {2, -1, TEENY_ERR_ARG},
        {INT32_MIN, INT32_MIN, TEENY_ERR_ARG},
        {INT32_MAX, INT32_MAX, TEENY_ERR_RANGE},
        {1 << 29, 1, TEENY_ERR_RANGE},
        {1, 1 << 29, TEENY_ERR_RANGE},
        {INT32_MAX, 1, TEENY_ERR_RANGE},
        {3, 1, TEENY_ERR_SHAPE},
    };
    for (size_t i = 0; i < sizeof psa / sizeof psa[0]; i++) {
        int h = psa[i].heads, kd = psa[i].kd;
        teeny_status want = psa[i].want;
        char what[64];
        snprintf(what, sizeof what, "heads %d key_dim %d", h, kd);
        EXPECT_STATUS(ctx, want, teeny_psa_attention_forward(ctx, qkv, h, kd, o, lse), what);
        EXPECT_STATUS(ctx, want, teeny_psa_attention_backward(ctx, qkv, h, kd, o, lse, o, dq), what);
        EXPECT_STATUS(ctx, want, teeny_psa_pack_qkv(ctx, qkv, h, kd, packed), what);
        EXPECT_STATUS(ctx, want, teeny_psa_pack_qkv_backward(ctx, packed, h, kd, dq), what);
        EXPECT_STATUS(ctx, want, teeny_psa_extract_v(ctx, qkv, h, kd, o), what);
        EXPECT_STATUS(ctx, want, teeny_psa_extract_v_backward(ctx, o, h, kd, dq), what);
    }
    static const int heads[] = {0, -1, INT32_MIN};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        EXPECT_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_merge_attn(ctx, ol, oh, heads[i], o), "merge heads");
        EXPECT_STATUS(ctx, TEENY_ERR_ARG, teeny_psa_merge_attn_backward(ctx, o, heads[i], ol, oh), "merge heads");
    }
    static const int big_heads[] = {3, 1 << 30, INT32_MAX};
    for (size_t i = 0; i < sizeof big_heads / sizeof big_heads[0]; i++) {
        teeny_status want = big_heads[i] == 3 ? TEENY_ERR_SHAPE : TEENY_ERR_RANGE;
        EXPECT_STATUS(ctx, want, teeny_psa_merge_attn(ctx, ol, oh, big_heads[i], o), "merge heads");
        EXPECT_STATUS(ctx, TEENY_ERR_SHAPE, teeny_psa_merge_attn_backward(ctx, o, big_heads[i], ol, oh),
                      "merge heads");
    }
    /* concat / split: n >= 1 */
    static const int counts[] = {0, -1, INT32_MIN};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        EXPECT_STATUS(ctx, TEENY_ERR_ARG, teeny_concat_channels(ctx, counts[i], (const teeny_tensor *const *)all, o),
                      "concat n");
        EXPECT_STATUS(ctx, TEENY_ERR_ARG, teeny_split_channels(ctx, o, counts[i], all), "split n");
    }
    th_expect_all(o, 0.25f);
    th_expect_all(lse, 0.25f);
    th_expect_all(packed, 0.25f);
    th_expect_all(dq, 0.25f);
    th_expect_all(ol, 0.25f);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        teeny_tensor_destroy(all[i]);
}
END_TEST

Suite *suite_shapes(void)
{
    Suite *s = suite_create("shapes");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_shapes_tensor_create);
    tcase_add_test(tc, test_shapes_tensor_view);
    tcase_add_test(tc, test_shapes_graph_inputs);
    tcase_add_test(tc, test_shapes_graph_reshape);
    tcase_add_test(tc, test_shapes_compile_batches);
    tcase_add_test(tc, test_shapes_builders);
    tcase_add_test(tc, test_shapes_eager_conv_pool);
    tcase_add_test(tc, test_shapes_eager_psa_concat);
    suite_add_tcase(s, tc);
    return s;
}
