/*
 * test_graph.c -- the graph executor: whole-graph gradients against finite
 * differences (every op, a PSA block, a residual add), training versus
 * inference batch norm, the memory plan (reuse on and off give identical
 * bits; peak below the no-reuse total and equal to what is allocated),
 * no object creation, argument setting or blocking after compile,
 * host-sync counts, determinism, several batch sizes sharing parameters,
 * training to near-perfect accuracy on a separable problem, and errors;
 * and each compile phase on its own (graph_internal.h): shape inference,
 * backward derivation, liveness and placement, recording.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "core/clwrap.h"
#include "graph/graph_internal.h" /* the compile phases, run one at a time */

/* ---- helpers ---- */

typedef struct {
    teeny_graph *g;
    teeny_node x, labels, loss;
    int64_t x_shape[4]; /* without batch: [C, H, W] in [1..3] */
    int x_ndim;
    int classes;
} net;

static void feed(teeny_plan *p, const net *m, int64_t batch, uint64_t seed)
{
    teeny_ctx *ctx = th_ctx();
    teeny_tensor *tx, *tl;
    TH_OK(ctx, teeny_plan_tensor(p, m->x, &tx));
    TH_OK(ctx, teeny_plan_tensor(p, m->labels, &tl));
    size_t n = (size_t)teeny_tensor_numel(tx);
    float *x = th_malloc(n * sizeof *x);
    int32_t *l = th_malloc((size_t)batch * sizeof *l);
    th_rng r = th_rng_make(seed);
    th_fill_normal(&r, x, n, 0, 1);
    for (int64_t i = 0; i < batch; i++)
        l[i] = th_int(&r, 0, m->classes - 1);
    TH_OK(ctx, teeny_tensor_write(tx, x, n));
    TH_OK(ctx, teeny_tensor_write_i32(tl, l, (size_t)batch));
    free(x);
    free(l);
}

static teeny_plan *compile(const net *m, int64_t batch, int training, int reuse)
{
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *p = NULL;
    pp.batch = batch;
    pp.training = training;
    pp.loss = m->loss;
    pp.reuse_memory = reuse;
    TH_OK(th_ctx(), teeny_graph_compile(m->g, &pp, &p));
    return p;
}

static float loss_of(teeny_plan *p)
{
    float l;
    TH_OK(th_ctx(), teeny_plan_forward(p));
    TH_OK(th_ctx(), teeny_plan_read_loss(p, &l));
    return l;
}

/* conv -> bn -> silu -> conv 1x1 -> residual add -> maxpool -> global avgpool
 * -> linear -> cross-entropy */
static void build_conv_net(net *m, uint64_t seed)
{
    teeny_ctx *ctx = th_ctx();
    teeny_conv2d_params p3 = TEENY_CONV2D_PARAMS_INIT, p1 = TEENY_CONV2D_PARAMS_INIT;
    teeny_pool2d_params pool = TEENY_POOL2D_PARAMS_INIT;
    teeny_node a, b, c, d, e, f, h;
    p3.pad[0] = p3.pad[1] = 1;
    m->x_ndim = 4;
    m->classes = 5;
    int64_t xs[4] = {-1, 3, 6, 6};
    TH_OK(ctx, teeny_graph_create(ctx, seed, &m->g));
    TH_OK(ctx, teeny_graph_input(m->g, "x", 4, xs, &m->x));
    TH_OK(ctx, teeny_graph_labels(m->g, "labels", &m->labels));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "conv1", m->x, 8, 3, 3, &p3, 0, &a));
    TH_OK(ctx, teeny_graph_batchnorm(m->g, "bn1", a, 0.1f, 1e-5f, &b));
    TH_OK(ctx, teeny_graph_activation(m->g, "act1", b, TEENY_ACT_SILU, &c));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "conv2", c, 8, 1, 1, &p1, 1, &d));
    TH_OK(ctx, teeny_graph_add(m->g, "res", c, d, &e)); /* c fans out */
    TH_OK(ctx, teeny_graph_maxpool2d(m->g, "pool", e, &pool, &f));
    TH_OK(ctx, teeny_graph_global_avgpool(m->g, "gap", f, &h));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc", h, m->classes, 1, &a));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(m->g, "loss", a, m->labels, &m->loss));
}

/* A C2PSA-style block: qkv conv -> fused PSA attention (+ depthwise pe on
 * V) -> proj -> residual, FFN with residual, then a head. */
static void build_psa_net(net *m, uint64_t seed)
{
    teeny_ctx *ctx = th_ctx();
    teeny_conv2d_params p1 = TEENY_CONV2D_PARAMS_INIT, dw = TEENY_CONV2D_PARAMS_INIT;
    teeny_node qkv, att, v, pe, sum, proj, r1, f1, f2, r2, gap, fc;
    const int C = 8, heads = 2, kd = 2; /* head_dim = C / heads = 2 * kd */
    dw.pad[0] = dw.pad[1] = 1;
    dw.groups = C;
    m->x_ndim = 4;
    m->classes = 3;
    int64_t xs[4] = {-1, C, 4, 5};
    TH_OK(ctx, teeny_graph_create(ctx, seed, &m->g));
    TH_OK(ctx, teeny_graph_input(m->g, "x", 4, xs, &m->x));
    TH_OK(ctx, teeny_graph_labels(m->g, "labels", &m->labels));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "attn.qkv", m->x, heads * 4 * kd, 1, 1, &p1, 1, &qkv));
    TH_OK(ctx, teeny_graph_psa_attention(m->g, "attn.core", qkv, heads, kd, &att));
    TH_OK(ctx, teeny_graph_psa_extract_v(m->g, "attn.v", qkv, heads, kd, &v));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "attn.pe", v, C, 3, 3, &dw, 1, &pe));
    TH_OK(ctx, teeny_graph_add(m->g, "attn.sum", att, pe, &sum));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "attn.proj", sum, C, 1, 1, &p1, 1, &proj));
    TH_OK(ctx, teeny_graph_add(m->g, "res1", m->x, proj, &r1));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "ffn.0", r1, 2 * C, 1, 1, &p1, 1, &f1));
    TH_OK(ctx, teeny_graph_activation(m->g, "ffn.act", f1, TEENY_ACT_SILU, &f2));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "ffn.1", f2, C, 1, 1, &p1, 1, &f1));
    TH_OK(ctx, teeny_graph_add(m->g, "res2", r1, f1, &r2));
    TH_OK(ctx, teeny_graph_global_avgpool(m->g, "gap", r2, &gap));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc", gap, m->classes, 1, &fc));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(m->g, "loss", fc, m->labels, &m->loss));
}

/* slice / concat / mul / avgpool / reshape / relu / batchnorm1d */
static void build_misc_net(net *m, uint64_t seed)
{
    teeny_ctx *ctx = th_ctx();
    teeny_conv2d_params p3 = TEENY_CONV2D_PARAMS_INIT;
    teeny_pool2d_params pool = TEENY_POOL2D_PARAMS_INIT;
    teeny_node a, lo, hi, prod, cat, act, pooled, flat, fc, bn;
    p3.pad[0] = p3.pad[1] = 1;
    m->x_ndim = 4;
    m->classes = 4;
    int64_t xs[4] = {-1, 2, 4, 4};
    TH_OK(ctx, teeny_graph_create(ctx, seed, &m->g));
    TH_OK(ctx, teeny_graph_input(m->g, "x", 4, xs, &m->x));
    TH_OK(ctx, teeny_graph_labels(m->g, "labels", &m->labels));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "conv", m->x, 6, 3, 3, &p3, 1, &a));
    TH_OK(ctx, teeny_graph_slice_channels(m->g, "lo", a, 0, 3, &lo));
    TH_OK(ctx, teeny_graph_slice_channels(m->g, "hi", a, 3, 3, &hi));
    TH_OK(ctx, teeny_graph_mul(m->g, "gate", lo, hi, &prod));
    TH_OK(ctx, teeny_graph_concat(m->g, "cat", 2, (teeny_node[]){prod, a}, &cat));
    TH_OK(ctx, teeny_graph_activation(m->g, "relu", cat, TEENY_ACT_RELU, &act));
    TH_OK(ctx, teeny_graph_avgpool2d(m->g, "avg", act, &pool, &pooled));
    TH_OK(ctx, teeny_graph_flatten(m->g, "flat", pooled, &flat));
    TH_OK(ctx, teeny_graph_batchnorm(m->g, "bn1d", flat, 0.1f, 1e-5f, &bn));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc", bn, m->classes, 1, &fc));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(m->g, "loss", fc, m->labels, &m->loss));
}

/* Read every parameter into one host vector (caller frees). */
static float *read_params(teeny_graph *g, size_t *total, int grads)
{
    int n = teeny_graph_param_count(g);
    size_t sum = 0;
    for (int i = 0; i < n; i++) {
        teeny_tensor *v, *d;
        TH_OK(th_ctx(), teeny_graph_param(g, i, NULL, &v, &d));
        sum += (size_t)teeny_tensor_numel(v);
    }
    float *out = th_malloc(sum * sizeof *out);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        teeny_tensor *v, *d;
        TH_OK(th_ctx(), teeny_graph_param(g, i, NULL, &v, &d));
        size_t k = (size_t)teeny_tensor_numel(v);
        TH_OK(th_ctx(), teeny_tensor_read(grads ? d : v, out + at, k));
        at += k;
    }
    *total = sum;
    return out;
}

static void write_params(teeny_graph *g, const float *x)
{
    size_t at = 0;
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        teeny_tensor *v;
        TH_OK(th_ctx(), teeny_graph_param(g, i, NULL, &v, NULL));
        size_t k = (size_t)teeny_tensor_numel(v);
        TH_OK(th_ctx(), teeny_tensor_write(v, x + at, k));
        at += k;
    }
}

/*
 * Per-parameter gradient check. For each parameter tensor (analytic
 * gradient g, k elements) and each of two unit directions d -- d = g / |g|,
 * where a gradient off by a factor (1 + e) shows its full relative error e,
 * and one seeded random Gaussian direction, which catches errors that are
 * not along g -- estimate the directional derivative <grad L, d> by central
 * differences and require
 *     |fd - <g, d>| <= tol * |g|        (tol 2e-3: a 1% error fails)
 *
 * Why these choices, given that the forward runs in fp32 on the device:
 * - The fp32 loss is a few roundings (~1e-7 relative) from exact, so a
 *   central difference with step t carries ~1e-7 L / t of noise. The step
 *   is chosen so the first-order change t |g| is 0.2% of the loss: noise
 *   ~5e-5 of |g|, 40x under tol (capped so no tensor moves by more than
 *   half its RMS, floor 0.05, per element on average).
 * - The O(t^2) truncation error of that step is removed by Richardson
 *   extrapolation, fd = (4 D(t/2) - D(t)) / 3, error O(t^4).
 * - ReLU and maxpool are not smooth: a step that moves an argmax makes D(t)
 *   and D(t/2) disagree far beyond O(t^2) (measured: conv1 of the conv net
 *   in a random direction was 0.5-1% off at steps >= 0.007, 4e-5 below).
 *   Such a pair is detected and the step quartered (up to 3 times), so the
 *   check stays tight without trusting a difference across a kink.
 * - Differences and dot products are accumulated in float64 on the host;
 *   the perturbed parameters are rounded to fp32 once, and the realised
 *   perturbation (fl(theta + s d) - theta, in float64) is what the analytic
 *   gradient is dotted with, so rounding of the parameters is not mistaken
 *   for a gradient error.
 * Measured worst relative error over every net here: 4e-4 (PoCL).
 * perturb >= 0 multiplies the analytic gradient of parameter tensor
 * `perturb` by factor first (the test that proves a 1% error fails).
 * Returns the number of failing (tensor, direction) pairs and the worst
 * relative error in *worst. TEENY_GRADCHECK_VERBOSE=1 prints every pair.
 */
static double loss_at(teeny_plan *p, teeny_graph *g, const float *theta, size_t total, size_t at, size_t k,
                      const double *dir, double step, const float *grad, double *dot)
{
    float *probe = th_malloc(total * sizeof *probe);
    memcpy(probe, theta, total * sizeof *probe);
    *dot = 0;
    for (size_t j = 0; j < k; j++) {
        probe[at + j] = (float)((double)theta[at + j] + step * dir[j]);
        *dot += (double)grad[at + j] * ((double)probe[at + j] - (double)theta[at + j]);
    }
    write_params(g, probe);
    free(probe);
    return (double)loss_of(p);
}

static int gradcheck_run(net *m, const char *what, int perturb, double factor, double tol, double *worst)
{
    const int64_t B = 4;
    teeny_plan *p = compile(m, B, 1, 1);
    feed(p, m, B, 99);
    size_t total;
    float *theta = read_params(m->g, &total, 0);
    TH_OK(th_ctx(), teeny_plan_forward(p));
    TH_OK(th_ctx(), teeny_plan_backward(p));
    double l0 = (double)loss_of(p);
    float *grad = read_params(m->g, &total, 1);
    ck_assert(th_first_nonfinite(grad, total) < 0);
    th_rng r = th_rng_make(7);
    size_t at = 0;
    int n = teeny_graph_param_count(m->g), fails = 0;
    const char *verbose = getenv("TEENY_GRADCHECK_VERBOSE");
    *worst = 0;
    for (int i = 0; i < n; i++) {
        teeny_tensor *v;
        const char *pname;
        TH_OK(th_ctx(), teeny_graph_param(m->g, i, &pname, &v, NULL));
        char name[128];
        snprintf(name, sizeof name, "%s", pname);
        size_t k = (size_t)teeny_tensor_numel(v);
        if (i == perturb)
            for (size_t j = 0; j < k; j++)
                grad[at + j] = (float)((double)grad[at + j] * factor);
        double gn = 0, tn = 0;
        for (size_t j = 0; j < k; j++) {
            gn += (double)grad[at + j] * grad[at + j];
            tn += (double)theta[at + j] * theta[at + j];
        }
        gn = sqrt(gn);
        tn = sqrt(tn / (double)k);
        double *dir = th_malloc(k * sizeof *dir);
        for (int di = 0, redraws = 0; di < 2 && gn > 0; di++) {
            double dn = 0;
            /* a direction along which every step crossed a kink is
             * redrawn at random (at most 3 times): no step size gives a
             * difference quotient there to compare with */
            for (size_t j = 0; j < k; j++) {
                dir[j] = di == 0 && redraws == 0 ? (double)grad[at + j] : th_normal(&r);
                dn += dir[j] * dir[j];
            }
            dn = sqrt(dn);
            for (size_t j = 0; j < k; j++)
                dir[j] /= dn;
            double t = 2e-3 * (fabs(l0) > 0.1 ? fabs(l0) : 0.1) / gn;
            double cap = 0.5 * (tn > 0.05 ? tn : 0.05) * sqrt((double)k);
            if (t > cap)
                t = cap;
            double fd = 0, an = 0;
            int smooth = 0;
            for (int tries = 0; tries < 4; tries++, t /= 4) {
                double est[2], ana[2];
                for (int h = 0; h < 2; h++) { /* D(t), D(t/2) */
                    double s = h ? t / 2 : t, dp, dm;
                    double lp = loss_at(p, m->g, theta, total, at, k, dir, s, grad, &dp);
                    double lm = loss_at(p, m->g, theta, total, at, k, dir, -s, grad, &dm);
                    est[h] = (lp - lm) / (2 * s); /* ~ <grad L, realised difference> / (2 s) */
                    ana[h] = (dp - dm) / (2 * s);
                }
                fd = (4 * est[1] - est[0]) / 3; /* Richardson: the t^2 term cancels */
                an = (4 * ana[1] - ana[0]) / 3;
                /* for a smooth loss D(t) and D(t/2) differ by O(t^2); much
                 * more means the step crossed a kink (a relu, a maxpool's
                 * argmax): retry with a quarter of the step */
                if (fabs((est[0] - ana[0]) - (est[1] - ana[1])) <= 0.25 * tol * gn) {
                    smooth = 1;
                    break;
                }
            }
            if (!smooth && redraws < 3) {
                if (verbose)
                    fprintf(stderr, "gradcheck %s %s dir %d: kinked at every step; another random direction\n", what,
                            name, di);
                redraws++;
                di--;
                continue;
            }
            double rel = fabs(fd - an) / gn;
            if (verbose)
                fprintf(stderr, "gradcheck %s %s dir %d: |g| %.3g step %.3g fd %.9g analytic %.9g rel %.3g\n", what,
                        name, di, gn, t, fd, an, rel);
            if (rel > *worst)
                *worst = rel;
            if (rel > tol) {
                fails++;
                if (perturb < 0)
                    fprintf(stderr, "gradcheck %s: %s direction %d: finite difference %.9g vs analytic %.9g "
                                    "(relative %.3g > %.3g)\n", what, name, di, fd, an, rel, tol);
            }
        }
        free(dir);
        at += k;
    }
    write_params(m->g, theta);
    free(theta);
    free(grad);
    teeny_plan_destroy(p);
    return fails;
}

#define GRADCHECK_TOL 2e-3

static void gradcheck(net *m, const char *what)
{
    double worst;
    int fails = gradcheck_run(m, what, -1, 1.0, GRADCHECK_TOL, &worst);
    ck_assert_msg(fails == 0, "%s: %d parameter directions off by more than %.g relative (worst %.3g)", what, fails,
                  GRADCHECK_TOL, worst);
}

/* Concat-heavy: twelve 4-way concats of one 2-channel value (each needs
 * three gradient-accumulation temporaries) joined by one 12-input concat
 * (a chain of concat nodes). The executor once sized its temporaries 2n+1
 * for n nodes, which this graph overflows (ASan). */
static void build_concat_net(net *m, uint64_t seed, int levels)
{
    teeny_ctx *ctx = th_ctx();
    teeny_conv2d_params p1 = TEENY_CONV2D_PARAMS_INIT;
    teeny_node a, c[16], cat, gap, fc;
    m->x_ndim = 4;
    m->classes = 3;
    int64_t xs[4] = {-1, 2, 3, 3};
    TH_OK(ctx, teeny_graph_create(ctx, seed, &m->g));
    TH_OK(ctx, teeny_graph_input(m->g, "x", 4, xs, &m->x));
    TH_OK(ctx, teeny_graph_labels(m->g, "labels", &m->labels));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "conv", m->x, 2, 1, 1, &p1, 1, &a));
    for (int i = 0; i < levels; i++)
        TH_OK(ctx, teeny_graph_concat(m->g, NULL, 4, (teeny_node[]){a, a, a, a}, &c[i]));
    TH_OK(ctx, teeny_graph_concat(m->g, "cat", levels, c, &cat));
    TH_OK(ctx, teeny_graph_global_avgpool(m->g, "gap", cat, &gap));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc", gap, m->classes, 1, &fc));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(m->g, "loss", fc, m->labels, &m->loss));
    int ndim;
    int64_t shape[5];
    TH_OK(ctx, teeny_graph_node_info(m->g, cat, NULL, &ndim, shape));
    ck_assert_int_eq(shape[1], 8 * levels);
}

START_TEST(test_graph_concat_chains)
{
    net m = {0};
    build_concat_net(&m, 4, 12);
    gradcheck(&m, "12 chained 4-way concats");
    teeny_graph_destroy(m.g);
    build_concat_net(&m, 5, 8);
    gradcheck(&m, "8-way concat");
    teeny_graph_destroy(m.g);
}
END_TEST

/* Every builder given a NULL array or pointer: TEENY_ERR_ARG with a message
 * in the graph's context, no node added, no crash. */
START_TEST(test_graph_null_arguments)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, a = 7;
    int64_t xs[4] = {-1, 4, 3, 3};
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 4, xs, &x));
    int before = teeny_graph_node_count(g);
#define EXPECT_ARG(call)                                                                                        \
    do {                                                                                                        \
        TH_STATUS(ctx, TEENY_ERR_ARG, call);                                                                    \
        ck_assert_msg(teeny_last_error(ctx)[0] != '\0', "%s: no message in the graph's context", #call);       \
        ck_assert_int_eq(teeny_graph_node_count(g), before);                                                   \
    } while (0)
    EXPECT_ARG(teeny_graph_concat(g, "c", 2, NULL, &a));
    ck_assert_int_eq(a, -1);
    EXPECT_ARG(teeny_graph_concat(g, "c", 9, NULL, &a));
    EXPECT_ARG(teeny_graph_concat(g, "c", 0, (teeny_node[]){x}, &a));
    EXPECT_ARG(teeny_graph_concat(g, "c", 2, (teeny_node[]){x, x}, NULL));
    EXPECT_ARG(teeny_graph_input(g, "y", 4, NULL, &a));
    EXPECT_ARG(teeny_graph_input(g, "y", 4, xs, NULL));
    EXPECT_ARG(teeny_graph_labels(g, "l", NULL));
    EXPECT_ARG(teeny_graph_reshape(g, "r", x, 2, NULL, &a));
    EXPECT_ARG(teeny_graph_reshape(g, "r", x, 2, (int64_t[]){-1, 36}, NULL));
    EXPECT_ARG(teeny_graph_flatten(g, "f", x, NULL));
    EXPECT_ARG(teeny_graph_batchnorm(g, "bn", x, 0.1f, 1e-5f, NULL));
    EXPECT_ARG(teeny_graph_activation(g, "act", x, TEENY_ACT_RELU, NULL));
    EXPECT_ARG(teeny_graph_add(g, "add", x, x, NULL));
    EXPECT_ARG(teeny_graph_mul(g, "mul", x, x, NULL));
    EXPECT_ARG(teeny_graph_conv2d(g, "conv", x, 4, 1, 1, NULL, 0, NULL));
    EXPECT_ARG(teeny_graph_conv2d(g, "conv", x, 0, 1, 1, NULL, 0, &a));
    EXPECT_ARG(teeny_graph_maxpool2d(g, "mp", x, NULL, NULL));
    EXPECT_ARG(teeny_graph_avgpool2d(g, "ap", x, NULL, NULL));
    EXPECT_ARG(teeny_graph_global_avgpool(g, "gap", x, NULL));
    EXPECT_ARG(teeny_graph_linear(g, "fc", x, 3, 1, NULL));
    EXPECT_ARG(teeny_graph_softmax_cross_entropy(g, "ce", x, x, NULL));
    EXPECT_ARG(teeny_graph_slice_channels(g, "s", x, 0, 1, NULL));
    EXPECT_ARG(teeny_graph_attention(g, "att", x, x, x, 1.0f, NULL));
    EXPECT_ARG(teeny_graph_psa_attention(g, "psa", x, 1, 1, NULL));
    EXPECT_ARG(teeny_graph_psa_pack_qkv(g, "pk", x, 1, 1, NULL));
    EXPECT_ARG(teeny_graph_psa_extract_v(g, "ev", x, 1, 1, NULL));
    EXPECT_ARG(teeny_graph_psa_merge_attn(g, "ma", x, x, 1, 3, 3, NULL));
    EXPECT_ARG(teeny_graph_mark_output(g, -1));
    EXPECT_ARG(teeny_graph_compile(g, NULL, NULL));
#undef EXPECT_ARG
    /* NULL graph: the thread's context-less error */
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_graph_concat(NULL, "c", 2, (teeny_node[]){0, 0}, &a));
    ck_assert(teeny_last_error(NULL)[0] != '\0');
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_graph_input(NULL, "x", 4, xs, &a));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_graph_conv2d(NULL, "conv", 0, 4, 1, 1, NULL, 0, &a));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_graph_node_info(NULL, 0, NULL, NULL, NULL));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_graph_param(NULL, 0, NULL, NULL, NULL));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_graph_state(NULL, 0, NULL, NULL));
    teeny_graph_destroy(g);
}
END_TEST

/* The checker itself: a gradient 1% too large or too small in one
 * parameter tensor is reported, and only there. */
START_TEST(test_graph_gradcheck_sensitivity)
{
    net m = {0};
    double worst;
    build_conv_net(&m, 1);
    int n = teeny_graph_param_count(m.g);
    ck_assert_int_gt(n, 2);
    ck_assert_int_eq(gradcheck_run(&m, "conv net, exact", -1, 1.0, GRADCHECK_TOL, &worst), 0);
    int which[2] = {0, n - 2}; /* conv1.weight (the first layer), fc.weight */
    for (int k = 0; k < 2; k++) {
        double factor = k ? 0.99 : 1.01;
        int fails = gradcheck_run(&m, "conv net, 1% off", which[k], factor, GRADCHECK_TOL, &worst);
        ck_assert_msg(fails >= 1, "a gradient scaled by %.2f in parameter %d passed (worst %.3g)", factor, which[k],
                      worst);
        ck_assert_msg(worst > 0.005, "parameter %d scaled by %.2f: worst relative error only %.3g", which[k], factor,
                      worst);
    }
    teeny_graph_destroy(m.g);
}
END_TEST

START_TEST(test_graph_gradients)
{
    net m = {0};
    build_conv_net(&m, 1);
    gradcheck(&m, "conv net");
    teeny_graph_destroy(m.g);
    build_psa_net(&m, 2);
    gradcheck(&m, "psa net");
    teeny_graph_destroy(m.g);
    build_misc_net(&m, 3);
    gradcheck(&m, "misc net");
    teeny_graph_destroy(m.g);
}
END_TEST

/* Reuse on and off: identical bits; reuse saves memory; planned equals
 * allocated. */
START_TEST(test_graph_memory_plan)
{
    net m = {0};
    build_psa_net(&m, 5);
    teeny_plan *a = compile(&m, 6, 1, 1), *b = compile(&m, 6, 1, 0);
    size_t peak_a, total_a, alloc_a, peak_b, total_b, alloc_b;
    TH_OK(th_ctx(), teeny_plan_memory(a, &peak_a, &total_a, &alloc_a));
    TH_OK(th_ctx(), teeny_plan_memory(b, &peak_b, &total_b, &alloc_b));
    ck_assert_uint_eq(peak_a, alloc_a);
    ck_assert_uint_eq(peak_b, alloc_b);
    ck_assert_uint_eq(total_a, total_b);
    ck_assert_uint_eq(peak_b, total_b);
    ck_assert_msg(peak_a < total_a * 0.8, "reuse saved too little: %zu of %zu", peak_a, total_a);
    float out[2][2];
    size_t n;
    float *grads[2];
    teeny_plan *plans[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        feed(plans[k], &m, 6, 11);
        TH_OK(th_ctx(), teeny_plan_forward(plans[k]));
        TH_OK(th_ctx(), teeny_plan_backward(plans[k]));
        TH_OK(th_ctx(), teeny_plan_read_loss(plans[k], &out[k][0]));
        grads[k] = read_params(m.g, &n, 1);
    }
    ck_assert(out[0][0] == out[1][0]);
    ck_assert(!memcmp(grads[0], grads[1], n * sizeof(float)));
    free(grads[0]);
    free(grads[1]);
    teeny_plan_destroy(a);
    teeny_plan_destroy(b);
    teeny_graph_destroy(m.g);
}
END_TEST

static teeny_optimizer *adamw_for(teeny_graph *g);

/* After compile a training step (zero-grad, forward, backward, optimizer
 * step) creates nothing, builds nothing, sets no kernel argument and never
 * blocks; reading the loss is the one host sync. */
START_TEST(test_graph_no_setup_after_compile)
{
    net m = {0};
    build_conv_net(&m, 6);
    teeny_plan *p = compile(&m, 8, 1, 1);
    teeny_optimizer *opt = adamw_for(m.g);
    feed(p, &m, 8, 1);
    TH_OK(th_ctx(), teeny_ctx_finish(th_ctx()));
    teeny__calls_reset();
    for (int step = 0; step < 3; step++) {
        TH_OK(th_ctx(), teeny_plan_zero_grad(p));
        TH_OK(th_ctx(), teeny_plan_forward(p));
        TH_OK(th_ctx(), teeny_plan_backward(p));
        TH_OK(th_ctx(), teeny_optimizer_step(opt, 1e-3f, -1.0f));
    }
    ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_CREATE), 0);
    ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_BUILD), 0);
    ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_SETARG), 0);
    ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_BLOCKING), 0);
    int fwd, bwd;
    TH_OK(th_ctx(), teeny_plan_launches(p, &fwd, &bwd));
    ck_assert_int_gt(fwd, 8);
    ck_assert_int_gt(bwd, fwd);
    int64_t syncs = teeny_plan_host_syncs(p);
    float loss, loss2;
    TH_OK(th_ctx(), teeny_plan_read_loss(p, &loss));
    ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_BLOCKING), 1);
    ck_assert_int_eq(teeny_plan_host_syncs(p), syncs + 1);
    /* non-blocking read: the start does not block, the wait does once */
    TH_OK(th_ctx(), teeny_plan_forward(p));
    TH_OK(th_ctx(), teeny_plan_loss_start(p));
    ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_BLOCKING), 1);
    TH_OK(th_ctx(), teeny_plan_loss_wait(p, &loss2));
    ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_BLOCKING), 2);
    ck_assert(isfinite(loss) && isfinite(loss2));
    ck_assert_int_eq(teeny_plan_host_syncs(p), syncs + 2);
    float loss3; /* the non-blocking read saw the same value as a blocking one */
    TH_OK(th_ctx(), teeny_plan_read_loss(p, &loss3));
    ck_assert(loss2 == loss3);
    teeny_optimizer_destroy(opt);
    teeny_plan_destroy(p);
    teeny_graph_destroy(m.g);
}
END_TEST

/* Training plans normalize with batch statistics and update the running
 * ones; inference plans normalize with the running statistics. */
START_TEST(test_graph_batchnorm_modes)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, labels, y, flat, fc, loss;
    enum { B = 5, C = 3, S = 16 };
    int64_t xs[4] = {-1, C, 4, 4};
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 4, xs, &x));
    TH_OK(ctx, teeny_graph_labels(g, "labels", &labels));
    TH_OK(ctx, teeny_graph_batchnorm(g, "bn", x, 0.5f, 1e-5f, &y));
    TH_OK(ctx, teeny_graph_mark_output(g, y));
    TH_OK(ctx, teeny_graph_flatten(g, "flat", y, &flat));
    TH_OK(ctx, teeny_graph_linear(g, "fc", flat, 2, 1, &fc));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", fc, labels, &loss));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *train, *infer;
    pp.batch = B;
    pp.loss = loss;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &train));
    pp.training = 0;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &infer));
    float host[B * C * S], out[B * C * S];
    int32_t lab[B] = {0, 1, 0, 1, 1};
    th_rng r = th_rng_make(3);
    th_fill_normal(&r, host, B * C * S, 2, 3);
    teeny_plan *plans[2] = {train, infer};
    for (int k = 0; k < 2; k++) {
        teeny_tensor *tx, *tl;
        TH_OK(ctx, teeny_plan_tensor(plans[k], x, &tx));
        TH_OK(ctx, teeny_plan_tensor(plans[k], labels, &tl));
        TH_OK(ctx, teeny_tensor_write(tx, host, B * C * S));
        TH_OK(ctx, teeny_tensor_write_i32(tl, lab, B));
    }
    /* inference first: running stats are the initial 0 / 1 */
    TH_OK(ctx, teeny_plan_forward(infer));
    TH_OK(ctx, teeny_plan_read(infer, y, out, B * C * S));
    for (int i = 0; i < B * C * S; i++)
        ck_assert_msg(fabsf(out[i] - host[i] / sqrtf(1 + 1e-5f)) < 1e-5f * (1 + fabsf(host[i])), "inference y[%d]", i);
    /* training: batch statistics; running stats move halfway (momentum 0.5) */
    TH_OK(ctx, teeny_plan_forward(train));
    TH_OK(ctx, teeny_plan_read(train, y, out, B * C * S));
    ck_assert_int_eq(teeny_graph_train_steps(g), 1);
    double mean[C], var[C];
    for (int c = 0; c < C; c++) {
        double m = 0, v = 0, om = 0, ov = 0;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < S; i++) {
                m += host[(b * C + c) * S + i];
                om += out[(b * C + c) * S + i];
            }
        m /= B * S;
        om /= B * S;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < S; i++) {
                v += (host[(b * C + c) * S + i] - m) * (host[(b * C + c) * S + i] - m);
                ov += (out[(b * C + c) * S + i] - om) * (out[(b * C + c) * S + i] - om);
            }
        mean[c] = m;
        var[c] = v / (B * S);
        ck_assert_msg(fabs(om) < 1e-4 && fabs(ov / (B * S) - 1) < 1e-3, "training output channel %d: mean %g var %g", c,
                      om, ov / (B * S));
    }
    for (int i = 0; i < teeny_graph_state_count(g); i++) {
        const char *name;
        teeny_tensor *t;
        float st[C];
        TH_OK(ctx, teeny_graph_state(g, i, &name, &t));
        TH_OK(ctx, teeny_tensor_read(t, st, C));
        for (int c = 0; c < C; c++) {
            double want = strstr(name, "mean") ? 0.5 * mean[c] : 0.5 + 0.5 * var[c] * (B * S) / (B * S - 1);
            ck_assert_msg(fabs(st[c] - want) < 1e-4 * (1 + fabs(want)), "%s[%d] = %g, want %g", name, c, st[c], want);
        }
    }
    /* inference now follows the updated running statistics */
    TH_OK(ctx, teeny_plan_forward(infer));
    TH_OK(ctx, teeny_plan_read(infer, y, out, B * C * S));
    for (int c = 0; c < C; c++) {
        double rm = 0.5 * mean[c], rv = 0.5 + 0.5 * var[c] * (B * S) / (B * S - 1);
        for (int i = 0; i < B * S; i++) {
            int e = ((i / S) * C + c) * S + i % S;
            double want = (host[e] - rm) / sqrt(rv + 1e-5);
            ck_assert_msg(fabs(out[e] - want) < 1e-4 * (1 + fabs(want)), "inference after training y[%d]", e);
        }
    }
    ck_assert_int_eq(teeny_graph_train_steps(g), 1);
    teeny_plan_destroy(train);
    teeny_plan_destroy(infer);
    teeny_graph_destroy(g);
}
END_TEST

/* Two graphs with the same seed trained the same way end bit-identical;
 * a training plan and an evaluation plan of another batch size share
 * parameters. */
static void sgd_step(teeny_graph *g, float lr)
{
    size_t n;
    float *w = read_params(g, &n, 0), *d = read_params(g, &n, 1);
    for (size_t i = 0; i < n; i++)
        w[i] -= lr * d[i];
    write_params(g, w);
    free(w);
    free(d);
}

static teeny_optimizer *adamw_for(teeny_graph *g)
{
    int n = teeny_graph_param_count(g);
    teeny_tensor **params = th_malloc((size_t)n * sizeof *params), **grads = th_malloc((size_t)n * sizeof *grads);
    for (int i = 0; i < n; i++)
        TH_OK(th_ctx(), teeny_graph_param(g, i, NULL, &params[i], &grads[i]));
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    teeny_optimizer *opt = NULL;
    op.kind = TEENY_OPTIM_ADAMW;
    op.lr = 1e-2f;
    op.weight_decay = 1e-2f;
    op.max_grad_norm = 5.0f;
    TH_OK(th_ctx(), teeny_optimizer_create(th_ctx(), &op, n, params, (const teeny_tensor *const *)grads, &opt));
    free(params);
    free(grads);
    return opt;
}

START_TEST(test_graph_determinism)
{
    net m[2] = {{0}, {0}};
    float *params[2];
    size_t n;
    for (int k = 0; k < 2; k++) {
        build_psa_net(&m[k], 42);
        teeny_plan *p = compile(&m[k], 8, 1, 1);
        teeny_optimizer *opt = adamw_for(m[k].g);
        for (int step = 0; step < 20; step++) {
            feed(p, &m[k], 8, 1000 + (uint64_t)step);
            TH_OK(th_ctx(), teeny_plan_forward(p));
            TH_OK(th_ctx(), teeny_plan_backward(p));
            TH_OK(th_ctx(), teeny_optimizer_step(opt, 1e-2f * (1.0f - 0.03f * (float)step), -1.0f));
        }
        params[k] = read_params(m[k].g, &n, 0);
        ck_assert_int_eq(teeny_graph_train_steps(m[k].g), 20);
        teeny_optimizer_destroy(opt);
        teeny_plan_destroy(p);
    }
    ck_assert(!memcmp(params[0], params[1], n * sizeof(float)));
    free(params[0]);
    free(params[1]);
    teeny_graph_destroy(m[0].g);
    teeny_graph_destroy(m[1].g);
}
END_TEST

/* Two heads over one trunk, two losses, two plans (batches 4 and 3) over
 * the shared parameters, and a dead branch that reaches no loss. Each
 * backward overwrites every parameter gradient: the other head's and the
 * dead branch's with zeros (they once kept the previous plan's gradient,
 * which an optimizer then re-applied), the rest with this plan's own
 * gradient, bit for bit what it computes from zeroed gradients. */
typedef struct {
    teeny_graph *g;
    teeny_node x, labels, loss[2];
    teeny_plan *plan[2];
} two_heads;

static void build_two_heads(two_heads *h)
{
    teeny_ctx *ctx = th_ctx();
    teeny_node trunk, act, fa, fb, dead, dead2;
    int64_t xs[2] = {-1, 5};
    TH_OK(ctx, teeny_graph_create(ctx, 77, &h->g));
    TH_OK(ctx, teeny_graph_input(h->g, "x", 2, xs, &h->x));
    TH_OK(ctx, teeny_graph_labels(h->g, "labels", &h->labels));
    TH_OK(ctx, teeny_graph_linear(h->g, "trunk", h->x, 6, 1, &trunk));
    TH_OK(ctx, teeny_graph_activation(h->g, "act", trunk, TEENY_ACT_SILU, &act));
    TH_OK(ctx, teeny_graph_linear(h->g, "head_a", act, 3, 1, &fa));
    TH_OK(ctx, teeny_graph_linear(h->g, "dead", act, 2, 1, &dead)); /* feeds nothing that reaches a loss */
    TH_OK(ctx, teeny_graph_linear(h->g, "dead2", dead, 2, 0, &dead2));
    TH_OK(ctx, teeny_graph_linear(h->g, "head_b", act, 4, 1, &fb));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(h->g, "loss_a", fa, h->labels, &h->loss[0]));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(h->g, "loss_b", fb, h->labels, &h->loss[1]));
    for (int k = 0; k < 2; k++) {
        teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
        pp.batch = 4 - k;
        pp.loss = h->loss[k];
        TH_OK(ctx, teeny_graph_compile(h->g, &pp, &h->plan[k]));
        teeny_tensor *tx, *tl;
        TH_OK(ctx, teeny_plan_tensor(h->plan[k], h->x, &tx));
        TH_OK(ctx, teeny_plan_tensor(h->plan[k], h->labels, &tl));
        float xv[20];
        int32_t lv[4] = {0, 2, 1, 2};
        th_rng r = th_rng_make(300 + (uint64_t)k);
        th_fill_normal(&r, xv, (size_t)pp.batch * 5, 0, 1);
        TH_OK(ctx, teeny_tensor_write(tx, xv, (size_t)pp.batch * 5));
        TH_OK(ctx, teeny_tensor_write_i32(tl, lv, (size_t)pp.batch));
    }
}

/* Which node a parameter belongs to: its name up to the dot. */
static int param_of(const teeny_graph *g, int i, const char *node)
{
    const char *name;
    TH_OK(th_ctx(), teeny_graph_param(g, i, &name, NULL, NULL));
    size_t n = strlen(node);
    return !strncmp(name, node, n) && name[n] == '.';
}

START_TEST(test_graph_shared_heads)
{
    teeny_ctx *ctx = th_ctx();
    two_heads h;
    build_two_heads(&h);
    int n = teeny_graph_param_count(h.g);
    size_t total;
    float *want[2];
    /* each plan's own gradients, from zeroed gradients */
    for (int k = 0; k < 2; k++) {
        TH_OK(ctx, teeny_plan_zero_grad(h.plan[k]));
        TH_OK(ctx, teeny_plan_forward(h.plan[k]));
        TH_OK(ctx, teeny_plan_backward(h.plan[k]));
        want[k] = read_params(h.g, &total, 1);
    }
    /* the other plan's backward, then NaN in every gradient, then this
     * plan's backward: every gradient is written, and equals want[k] */
    for (int round = 0; round < 2; round++)
        for (int k = 0; k < 2; k++) {
            TH_OK(ctx, teeny_plan_forward(h.plan[1 - k]));
            TH_OK(ctx, teeny_plan_backward(h.plan[1 - k]));
            if (round == 1)
                for (int i = 0; i < n; i++) {
                    teeny_tensor *grad;
                    TH_OK(ctx, teeny_graph_param(h.g, i, NULL, NULL, &grad));
                    th_poison(grad);
                }
            TH_OK(ctx, teeny_plan_forward(h.plan[k]));
            TH_OK(ctx, teeny_plan_backward(h.plan[k]));
            float *got = read_params(h.g, &total, 1);
            ck_assert_msg(!memcmp(got, want[k], total * sizeof *got), "plan %d (round %d): gradients differ from "
                          "its own backward from zero", k, round);
            free(got);
            /* and the heads' and dead branch's gradients are the zeros */
            size_t at = 0;
            for (int i = 0; i < n; i++) {
                teeny_tensor *v;
                TH_OK(ctx, teeny_graph_param(h.g, i, NULL, &v, NULL));
                size_t len = (size_t)teeny_tensor_numel(v);
                int off_path = param_of(h.g, i, k ? "head_a" : "head_b") || param_of(h.g, i, "dead") ||
                               param_of(h.g, i, "dead2");
                double norm = 0;
                for (size_t e = 0; e < len; e++)
                    norm += fabs(want[k][at + e]);
                ck_assert_msg(off_path ? norm == 0 : norm > 0, "plan %d, parameter %d: |grad| %g", k, i, norm);
                at += len;
            }
        }
    /* an SGD step after plan 1's backward then plan 0's moves only the
     * trunk and head_a (no weight decay, no momentum) */
    teeny_tensor **params = th_malloc((size_t)n * sizeof *params), **grads = th_malloc((size_t)n * sizeof *grads);
    for (int i = 0; i < n; i++)
        TH_OK(ctx, teeny_graph_param(h.g, i, NULL, &params[i], &grads[i]));
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    teeny_optimizer *opt;
    op.lr = 0.5f;
    TH_OK(ctx, teeny_optimizer_create(ctx, &op, n, params, (const teeny_tensor *const *)grads, &opt));
    float *before = read_params(h.g, &total, 0);
    TH_OK(ctx, teeny_plan_forward(h.plan[1]));
    TH_OK(ctx, teeny_plan_backward(h.plan[1]));
    TH_OK(ctx, teeny_plan_forward(h.plan[0]));
    TH_OK(ctx, teeny_plan_backward(h.plan[0]));
    TH_OK(ctx, teeny_optimizer_step(opt, op.lr, -1.0f));
    float *after = read_params(h.g, &total, 0);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t len = (size_t)teeny_tensor_numel(params[i]);
        int moved = memcmp(before + at, after + at, len * sizeof *after) != 0;
        int should = param_of(h.g, i, "trunk") || param_of(h.g, i, "head_a");
        ck_assert_msg(moved == should, "parameter %d %s by the step", i, moved ? "moved" : "did not move");
        at += len;
    }
    free(before);
    free(after);
    free(params);
    free(grads);
    free(want[0]);
    free(want[1]);
    teeny_optimizer_destroy(opt);
    teeny_plan_destroy(h.plan[0]);
    teeny_plan_destroy(h.plan[1]);
    teeny_graph_destroy(h.g);
}
END_TEST

/* Two well-separated Gaussian blobs per class in 2-D, a small MLP with
 * batch norm: a few hundred SGD steps reach near-perfect accuracy, also
 * in an inference plan of a different batch size. */
START_TEST(test_graph_trains_separable)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, labels, h1, h2, h3, logits, loss;
    int64_t xs[2] = {-1, 2};
    TH_OK(ctx, teeny_graph_create(ctx, 9, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 2, xs, &x));
    TH_OK(ctx, teeny_graph_labels(g, "y", &labels));
    TH_OK(ctx, teeny_graph_linear(g, "fc1", x, 16, 1, &h1));
    TH_OK(ctx, teeny_graph_batchnorm(g, "bn", h1, 0.1f, 1e-5f, &h2));
    TH_OK(ctx, teeny_graph_activation(g, "act", h2, TEENY_ACT_RELU, &h3));
    TH_OK(ctx, teeny_graph_linear(g, "fc2", h3, 3, 1, &logits));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", logits, labels, &loss));
    TH_OK(ctx, teeny_graph_mark_output(g, logits));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *train, *eval;
    pp.batch = 32;
    pp.loss = loss;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &train));
    pp.batch = 50;
    pp.training = 0;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &eval));
    static const float centers[3][2] = {{-3, 0}, {3, 0}, {0, 4}};
    th_rng r = th_rng_make(12);
    float first = 0, last = 0;
    for (int step = 0; step < 300; step++) {
        float xb[64];
        int32_t yb[32];
        for (int i = 0; i < 32; i++) {
            yb[i] = th_int(&r, 0, 2);
            xb[2 * i] = centers[yb[i]][0] + (float)th_normal(&r);
            xb[2 * i + 1] = centers[yb[i]][1] + (float)th_normal(&r);
        }
        teeny_tensor *tx, *ty;
        TH_OK(ctx, teeny_plan_tensor(train, x, &tx));
        TH_OK(ctx, teeny_plan_tensor(train, labels, &ty));
        TH_OK(ctx, teeny_tensor_write(tx, xb, 64));
        TH_OK(ctx, teeny_tensor_write_i32(ty, yb, 32));
        TH_OK(ctx, teeny_plan_forward(train));
        TH_OK(ctx, teeny_plan_backward(train));
        if (step == 0)
            TH_OK(ctx, teeny_plan_read_loss(train, &first));
        sgd_step(g, 0.1f);
    }
    TH_OK(ctx, teeny_plan_forward(train));
    TH_OK(ctx, teeny_plan_read_loss(train, &last));
    ck_assert_msg(last < first * 0.2f, "loss %g -> %g", (double)first, (double)last);
    float xb[100], logit_host[150];
    int32_t yb[50];
    for (int i = 0; i < 50; i++) {
        yb[i] = th_int(&r, 0, 2);
        xb[2 * i] = centers[yb[i]][0] + (float)th_normal(&r);
        xb[2 * i + 1] = centers[yb[i]][1] + (float)th_normal(&r);
    }
    teeny_tensor *tx, *ty;
    TH_OK(ctx, teeny_plan_tensor(eval, x, &tx));
    TH_OK(ctx, teeny_plan_tensor(eval, labels, &ty));
    TH_OK(ctx, teeny_tensor_write(tx, xb, 100));
    TH_OK(ctx, teeny_tensor_write_i32(ty, yb, 50));
    TH_OK(ctx, teeny_plan_forward(eval));
    TH_OK(ctx, teeny_plan_read(eval, logits, logit_host, 150));
    int correct = 0;
    for (int i = 0; i < 50; i++) {
        int best = 0;
        for (int c = 1; c < 3; c++)
            if (logit_host[i * 3 + c] > logit_host[i * 3 + best])
                best = c;
        correct += best == yb[i];
    }
    ck_assert_msg(correct >= 48, "accuracy %d / 50", correct);
    teeny_plan_destroy(train);
    teeny_plan_destroy(eval);
    teeny_graph_destroy(g);
}
END_TEST

START_TEST(test_graph_errors)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, y, a, b, bad = 99;
    int64_t xs[4] = {-1, 3, 4, 4}, ys[4] = {-1, 4, 4, 4}, nobatch[2] = {5, 3};
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 4, xs, &x));
    TH_OK(ctx, teeny_graph_input(g, "y", 4, ys, &y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_graph_add(g, "sum", x, y, &a));
    ck_assert_msg(strstr(teeny_last_error(ctx), "x") && strstr(teeny_last_error(ctx), "y"), "%s",
                  teeny_last_error(ctx));
    ck_assert_int_eq(a, -1);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_add(g, "sum", x, bad, &a));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_input(g, "x", 4, xs, &a)); /* duplicate name */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_input(g, "z", 2, nobatch, &a));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_graph_reshape(g, "r", x, 2, (int64_t[]){-1, 5}, &a));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_graph_add(NULL, "s", x, x, &a));
    TH_OK(ctx, teeny_graph_activation(g, "act", x, TEENY_ACT_SILU, &a));
    TH_OK(ctx, teeny_graph_add(g, "twice", a, a, &b));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *p = NULL;
    pp.batch = 0;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_compile(g, &pp, &p));
    pp.batch = 2;
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_graph_compile(g, &pp, &p)); /* loss not scalar */
    ck_assert(p == NULL);
    /* TEENY_PLAN_PARAMS_INIT means training: the message says how to run for inference (issue 44) */
    ck_assert_msg(strstr(teeny_last_error(ctx), "training needs a scalar (to run the graph for inference, set "
                                                "pp.training = 0"), "%s", teeny_last_error(ctx));
    pp.training = 0;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &p));
    TH_STATUS(ctx, TEENY_ERR_STATE, teeny_plan_backward(p));
    float buf[96];
    TH_STATUS(ctx, TEENY_ERR_STATE, teeny_plan_read(p, a, buf, 96)); /* not an output */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_plan_tensor(p, bad, NULL));
    teeny_plan_destroy(p);
    teeny_graph_destroy(g);
    teeny_graph_destroy(NULL);
    teeny_plan_destroy(NULL);
}
END_TEST

/* Errors land where the caller looks: a call with a graph, plan or tensor
 * reports into its context (the example once printed "TEENY_ERR_ARG: " with
 * nothing after it), and reading a plan before any forward is a state
 * error, not uninitialised memory. */
/* A context-less call that succeeds clears the thread's message. */
static void clear_thread_error(void)
{
    teeny_lr_schedule c = TEENY_LR_SCHEDULE_INIT;
    double lr;
    TH_OK(NULL, teeny_lr_at(&c, 0, &lr, NULL));
}

START_TEST(test_graph_error_routing)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, a, l, fc, loss;
    int64_t xs[4] = {-1, 2, 3, 3}, n8 = 8;
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 4, xs, &x));
    TH_OK(ctx, teeny_graph_labels(g, "labels", &l));
    clear_thread_error();
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_conv2d(g, "conv", x, 4, 0, 1, NULL, 0, &a));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "teeny_graph_conv2d"));
    ck_assert_str_eq(teeny_last_error(NULL), "");
    TH_OK(ctx, teeny_graph_conv2d(g, "conv", x, 4, 1, 1, NULL, 0, &a));
    TH_OK(ctx, teeny_graph_global_avgpool(g, "gap", a, &a));
    TH_OK(ctx, teeny_graph_linear(g, "fc", a, 3, 1, &fc));
    TH_OK(ctx, teeny_graph_mark_output(g, fc));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", fc, l, &loss));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *p = NULL;
    float v[6];
    pp.batch = 2;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &p));
    TH_STATUS(ctx, TEENY_ERR_STATE, teeny_plan_read_loss(p, v));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "no forward"));
    TH_STATUS(ctx, TEENY_ERR_STATE, teeny_plan_read(p, fc, v, 6));
    TH_STATUS(ctx, TEENY_ERR_STATE, teeny_plan_loss_start(p));
    float xin[36] = {0};
    TH_OK(ctx, teeny_plan_read(p, x, xin, 36)); /* inputs are the caller's: readable */
    for (int i = 0; i < 36; i++)
        xin[i] = 0.1f * (float)(i % 7) - 0.3f; /* what was read is whatever the buffer held */
    teeny_tensor *tx, *tl;
    TH_OK(ctx, teeny_plan_tensor(p, x, &tx));
    TH_OK(ctx, teeny_plan_tensor(p, l, &tl));
    TH_OK(ctx, teeny_tensor_write(tx, xin, 36));
    TH_OK(ctx, teeny_tensor_write_i32(tl, (int32_t[]){0, 1}, 2));
    TH_OK(ctx, teeny_plan_forward(p));
    TH_OK(ctx, teeny_plan_read_loss(p, v));
    ck_assert(isfinite(v[0]));
    TH_OK(ctx, teeny_plan_read(p, fc, v, 6));
    teeny_plan_destroy(p);
    teeny_graph_destroy(g);
    /* a destroyed tensor that a view keeps alive still names its context */
    teeny_tensor *base = th_tensor(ctx, 1, &n8), *view = NULL;
    TH_OK(ctx, teeny_tensor_view(base, 2, 1, (int64_t[]){4}, &view));
    teeny_tensor_destroy(base);
    clear_thread_error();
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_fill(base, 1.0f));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "destroyed"));
    ck_assert_str_eq(teeny_last_error(NULL), "");
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_tensor_read(base, v, 8));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "destroyed"));
    teeny_tensor_destroy(view);
}
END_TEST

/* ---- checkpoints ---- */

static char ckpt_path[256];

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fclose(f);
    return n;
}

static void copy_prefix(const char *src, const char *dst, long n, long flip_at)
{
    FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
    ck_assert(a && b);
    for (long i = 0; i < n; i++) {
        int c = fgetc(a);
        ck_assert(c != EOF);
        fputc(i == flip_at ? c ^ 0x10 : c, b);
    }
    fclose(a);
    fclose(b);
}

/* Save after training steps, load into a fresh graph of another seed:
 * parameters, running statistics, num_batches_tracked, optimizer state and
 * metadata come back exactly; every damaged file is rejected and changes
 * nothing. */
START_TEST(test_graph_checkpoints)
{
    teeny_ctx *ctx = th_ctx();
    net a = {0}, b = {0}, other = {0};
    build_conv_net(&a, 21); /* with batch norm: num_batches_tracked */
    build_conv_net(&b, 22);
    teeny_plan *p = compile(&a, 4, 1, 1), *plan_b = compile(&b, 4, 1, 1); /* plans create the gradients */
    teeny_optimizer *oa = adamw_for(a.g), *ob = adamw_for(b.g);
    for (int step = 0; step < 3; step++) {
        feed(p, &a, 4, (uint64_t)step);
        TH_OK(ctx, teeny_plan_forward(p));
        TH_OK(ctx, teeny_plan_backward(p));
        TH_OK(ctx, teeny_optimizer_step(oa, 1e-2f, -1.0f));
    }
    snprintf(ckpt_path, sizeof ckpt_path, "/tmp/teenycl-ckpt-%ld.safetensors", (long)getpid());
    const char *keys[] = {"epoch", "note"}, *vals[] = {"7", "hello"};
    TH_OK(ctx, teeny_graph_save(a.g, oa, ckpt_path, 2, keys, vals));
    char meta[32];
    TH_OK(NULL, teeny_checkpoint_metadata(ckpt_path, "note", meta, sizeof meta));
    ck_assert_str_eq(meta, "hello");

    size_t n;
    float *before = read_params(b.g, &n, 0);
    /* damaged copies: truncations, flipped bytes in header and data */
    char bad[300];
    snprintf(bad, sizeof bad, "%s.bad", ckpt_path);
    long size = file_size(ckpt_path);
    long cuts[] = {0, 4, 8, 40, size / 2, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        copy_prefix(ckpt_path, bad, cuts[i], -1);
        teeny_status st = teeny_graph_load(b.g, ob, bad);
        ck_assert_msg(st == TEENY_ERR_FORMAT, "truncated at %ld: %s", cuts[i], teeny_status_name(st));
    }
    long flips[] = {12, 60, size / 2, size - 3};
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        copy_prefix(ckpt_path, bad, size, flips[i]);
        teeny_status st = teeny_graph_load(b.g, ob, bad);
        ck_assert_msg(st == TEENY_ERR_FORMAT, "flipped byte %ld of %ld: %s", flips[i], size, teeny_status_name(st));
    }
    TH_STATUS(ctx, TEENY_ERR_IO, teeny_graph_load(b.g, ob, "/nonexistent/dir/x.safetensors"));
    /* a file from another network: missing keys, and shapes that differ */
    build_psa_net(&other, 1);
    TH_OK(ctx, teeny_graph_save(other.g, NULL, bad, 0, NULL, NULL));
    TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_graph_load(b.g, ob, bad));
    ck_assert_msg(strstr(teeny_last_error(ctx), "missing"), "%s", teeny_last_error(ctx));
    teeny_graph_destroy(other.g);
    {
        /* the same network saved without optimizer state */
        net wide = {0};
        build_conv_net(&wide, 3);
        TH_OK(ctx, teeny_graph_save(wide.g, NULL, bad, 0, NULL, NULL));
        teeny_graph_destroy(wide.g);
        /* the optimizer state is missing from that file */
        TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_graph_load(b.g, ob, bad));
    }
    /* a graph without an optimizer but with a wrong-shaped fc */
    {
        teeny_graph *g;
        teeny_node x, l, h, f, lo;
        int64_t xs[4] = {-1, 8, 4, 5};
        TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
        TH_OK(ctx, teeny_graph_input(g, "x", 4, xs, &x));
        TH_OK(ctx, teeny_graph_labels(g, "labels", &l));
        TH_OK(ctx, teeny_graph_global_avgpool(g, "gap", x, &h));
        TH_OK(ctx, teeny_graph_linear(g, "fc", h, 4, 1, &f));
        TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", f, l, &lo));
        TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_graph_load(g, NULL, ckpt_path));
        teeny_graph_destroy(g);
    }
    float *still = read_params(b.g, &n, 0);
    ck_assert_msg(!memcmp(before, still, n * sizeof(float)), "a rejected checkpoint changed parameters");
    free(still);

    TH_OK(ctx, teeny_graph_load(b.g, ob, ckpt_path));
    float *pa = read_params(a.g, &n, 0), *pb = read_params(b.g, &n, 0);
    ck_assert(!memcmp(pa, pb, n * sizeof(float)));
    ck_assert_int_eq(teeny_graph_train_steps(b.g), 3);
    ck_assert_int_eq(teeny_optimizer_steps(ob), 3);
    for (int i = 0; i < teeny_graph_state_count(a.g); i++) {
        teeny_tensor *ta, *tb;
        TH_OK(ctx, teeny_graph_state(a.g, i, NULL, &ta));
        TH_OK(ctx, teeny_graph_state(b.g, i, NULL, &tb));
        float *xa = th_read(ta), *xb = th_read(tb);
        ck_assert(!memcmp(xa, xb, (size_t)teeny_tensor_numel(ta) * sizeof(float)));
        free(xa);
        free(xb);
    }
    for (int i = 0; i < teeny_optimizer_state_count(oa); i++) {
        teeny_tensor *ta, *tb;
        TH_OK(ctx, teeny_optimizer_state(oa, i, NULL, &ta));
        TH_OK(ctx, teeny_optimizer_state(ob, i, NULL, &tb));
        float *xa = th_read(ta), *xb = th_read(tb);
        ck_assert(!memcmp(xa, xb, (size_t)teeny_tensor_numel(ta) * sizeof(float)));
        free(xa);
        free(xb);
    }
    /* .npy for single tensors */
    {
        teeny_tensor *w, *back = NULL;
        char npy[300];
        snprintf(npy, sizeof npy, "%s.npy", ckpt_path);
        TH_OK(ctx, teeny_graph_param(a.g, 0, NULL, &w, NULL));
        TH_OK(ctx, teeny_npy_save(w, npy));
        TH_OK(ctx, teeny_npy_load(ctx, npy, &back));
        float *x1 = th_read(w), *x2 = th_read(back);
        ck_assert(!memcmp(x1, x2, (size_t)teeny_tensor_numel(w) * sizeof(float)));
        free(x1);
        free(x2);
        teeny_tensor_destroy(back);
        remove(npy);
    }
    free(before);
    free(pa);
    free(pb);
    remove(bad);
    remove(ckpt_path);
    teeny_optimizer_destroy(oa);
    teeny_optimizer_destroy(ob);
    teeny_plan_destroy(p);
    teeny_plan_destroy(plan_b);
    teeny_graph_destroy(a.g);
    teeny_graph_destroy(b.g);
}
END_TEST

/* Two batch norms, so their num_batches_tracked can differ. */
static void build_two_bn_net(net *m, uint64_t seed)
{
    teeny_ctx *ctx = th_ctx();
    teeny_conv2d_params p1 = TEENY_CONV2D_PARAMS_INIT;
    teeny_node a, b, c, d, e, h, fc;
    m->x_ndim = 4;
    m->classes = 3;
    int64_t xs[4] = {-1, 2, 3, 3};
    TH_OK(ctx, teeny_graph_create(ctx, seed, &m->g));
    TH_OK(ctx, teeny_graph_input(m->g, "x", 4, xs, &m->x));
    TH_OK(ctx, teeny_graph_labels(m->g, "labels", &m->labels));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "conv1", m->x, 4, 1, 1, &p1, 0, &a));
    TH_OK(ctx, teeny_graph_batchnorm(m->g, "bn1", a, 0.1f, 1e-5f, &b));
    TH_OK(ctx, teeny_graph_activation(m->g, "act", b, TEENY_ACT_SILU, &c));
    TH_OK(ctx, teeny_graph_conv2d(m->g, "conv2", c, 4, 1, 1, &p1, 0, &d));
    TH_OK(ctx, teeny_graph_batchnorm(m->g, "bn2", d, 0.1f, 1e-5f, &e));
    TH_OK(ctx, teeny_graph_global_avgpool(m->g, "gap", e, &h));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc", h, m->classes, 1, &fc));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(m->g, "loss", fc, m->labels, &m->loss));
}

/* A checkpoint of g's tensors (and o's) with chosen counters; a counter
 * named in skip is left out. */
/* The checkpoint name of optimizer state i of o, built over g's parameters
 * in g's order: "optimizer.<param name>.<kind>" where the state's own name
 * is "<kind>.<param index>"; positional (an earlier version's layout):
 * "optimizer.<kind>.<param index>". */
static void opt_key(teeny_graph *g, teeny_optimizer *o, int i, int positional, char *key, size_t cap)
{
    const char *sn, *pname;
    TH_OK(th_ctx(), teeny_optimizer_state(o, i, &sn, NULL));
    const char *dot = strrchr(sn, '.');
    ck_assert_ptr_nonnull(dot);
    if (positional) {
        snprintf(key, cap, "optimizer.%s", sn);
        return;
    }
    TH_OK(th_ctx(), teeny_graph_param(g, atoi(dot + 1), &pname, NULL, NULL));
    snprintf(key, cap, "optimizer.%s.%.*s", pname, (int)(dot - sn), sn);
}

static void write_counted(teeny_graph *g, teeny_optimizer *o, const char *path, int64_t bn1, int64_t bn2,
                          int64_t step, const char *skip)
{
    teeny_ctx *ctx = th_ctx();
    teeny_st_writer *w = NULL;
    const char *name;
    teeny_tensor *t;
    TH_OK(NULL, teeny_st_writer_create(&w));
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        TH_OK(ctx, teeny_graph_param(g, i, &name, &t, NULL));
        TH_OK(NULL, teeny_st_add_tensor(w, name, t));
    }
    for (int i = 0; i < teeny_graph_state_count(g); i++) {
        TH_OK(ctx, teeny_graph_state(g, i, &name, &t));
        TH_OK(NULL, teeny_st_add_tensor(w, name, t));
    }
    for (int i = 0; i < teeny_optimizer_state_count(o); i++) {
        char full[256];
        TH_OK(ctx, teeny_optimizer_state(o, i, NULL, &t));
        opt_key(g, o, i, skip && !strcmp(skip, "positional"), full, sizeof full);
        TH_OK(NULL, teeny_st_add_tensor(w, full, t));
    }
    const char *cn[3] = {"bn1.num_batches_tracked", "bn2.num_batches_tracked", "optimizer.step"};
    int64_t cv[3] = {bn1, bn2, step};
    for (int i = 0; i < 3; i++)
        if (!skip || strcmp(skip, cn[i]))
            TH_OK(NULL, teeny_st_add_i64(w, cn[i], 0, NULL, &cv[i]));
    TH_OK(NULL, teeny_st_write(w, path));
    teeny_st_writer_destroy(w);
}

/* Every parameter, state and optimizer tensor of g and o, concatenated. */
static float *snapshot(teeny_graph *g, teeny_optimizer *o, size_t *total)
{
    size_t n = 0, at = 0;
    teeny_tensor *t;
    int np = teeny_graph_param_count(g), ns = teeny_graph_state_count(g), no = teeny_optimizer_state_count(o);
    for (int i = 0; i < np + ns + no; i++) {
        if (i < np)
            TH_OK(th_ctx(), teeny_graph_param(g, i, NULL, &t, NULL));
        else if (i < np + ns)
            TH_OK(th_ctx(), teeny_graph_state(g, i - np, NULL, &t));
        else
            TH_OK(th_ctx(), teeny_optimizer_state(o, i - np - ns, NULL, &t));
        n += (size_t)teeny_tensor_numel(t);
    }
    float *all = th_malloc(n * sizeof *all);
    for (int i = 0; i < np + ns + no; i++) {
        if (i < np)
            TH_OK(th_ctx(), teeny_graph_param(g, i, NULL, &t, NULL));
        else if (i < np + ns)
            TH_OK(th_ctx(), teeny_graph_state(g, i - np, NULL, &t));
        else
            TH_OK(th_ctx(), teeny_optimizer_state(o, i - np - ns, NULL, &t));
        TH_OK(th_ctx(), teeny_tensor_read(t, all + at, (size_t)teeny_tensor_numel(t)));
        at += (size_t)teeny_tensor_numel(t);
    }
    *total = n;
    return all;
}

static int64_t saved_count(const char *path, const char *name)
{
    teeny_st_file *f = NULL;
    int64_t v = -99;
    TH_OK(NULL, teeny_st_open(path, &f));
    TH_OK(NULL, teeny_st_read_i64(f, name, &v, 1));
    teeny_st_close(f);
    return v;
}

/* Counters in checkpoints: per-batch-norm num_batches_tracked round trips
 * (PyTorch keeps one per module); a negative count or optimizer.step, or a
 * missing one, is rejected with its exact status before anything is
 * written: every parameter, state and optimizer tensor stays bit-identical
 * and so do the counters. */
START_TEST(test_graph_checkpoint_counters)
{
    teeny_ctx *ctx = th_ctx();
    net a = {0}, b = {0};
    build_two_bn_net(&a, 31);
    build_two_bn_net(&b, 32);
    teeny_plan *pa = compile(&a, 4, 1, 1), *pb = compile(&b, 4, 1, 1);
    teeny_optimizer *oa = adamw_for(a.g), *ob = adamw_for(b.g);
    for (int step = 0; step < 2; step++) {
        feed(pa, &a, 4, (uint64_t)step);
        TH_OK(ctx, teeny_plan_forward(pa));
        TH_OK(ctx, teeny_plan_backward(pa));
        TH_OK(ctx, teeny_optimizer_step(oa, 1e-2f, -1.0f));
    }
    char path[256], out[300];
    snprintf(path, sizeof path, "/tmp/teenycl-counters-%ld.safetensors", (long)getpid());
    snprintf(out, sizeof out, "%s.out", path);
    TH_OK(ctx, teeny_graph_set_train_steps(b.g, 4));
    TH_OK(ctx, teeny_optimizer_set_steps(ob, 1));
    size_t n, n2;
    float *before = snapshot(b.g, ob, &n);
    const struct {
        int64_t bn1, bn2, step;
        const char *skip;
        teeny_status want;
    } bad[] = {
        {5, 9, -1, NULL, TEENY_ERR_RANGE},
        {5, 9, INT64_MIN, NULL, TEENY_ERR_RANGE},
        {-3, 9, 2, NULL, TEENY_ERR_RANGE},
        {5, -1, 2, NULL, TEENY_ERR_RANGE},
        {5, 9, 2, "bn2.num_batches_tracked", TEENY_ERR_FORMAT},
        {5, 9, 2, "optimizer.step", TEENY_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_counted(a.g, oa, path, bad[i].bn1, bad[i].bn2, bad[i].step, bad[i].skip);
        teeny_status st = teeny_graph_load(b.g, ob, path);
        ck_assert_msg(st == bad[i].want, "case %zu: %s, want %s (%s)", i, teeny_status_name(st),
                      teeny_status_name(bad[i].want), teeny_last_error(ctx));
        ck_assert_msg(teeny_last_error(ctx)[0], "case %zu: no message", i);
        float *after = snapshot(b.g, ob, &n2);
        ck_assert_msg(n2 == n && !memcmp(before, after, n * sizeof(float)), "case %zu: a rejected checkpoint "
                      "changed a tensor", i);
        free(after);
        ck_assert_int_eq(teeny_graph_train_steps(b.g), 4);
        ck_assert_int_eq(teeny_optimizer_steps(ob), 1);
        TH_OK(ctx, teeny_graph_save(b.g, ob, out, 0, NULL, NULL));
        ck_assert_int_eq(saved_count(out, "bn1.num_batches_tracked"), 4);
        ck_assert_int_eq(saved_count(out, "bn2.num_batches_tracked"), 4);
    }
    /* differing per-node counters survive load, training and save */
    write_counted(a.g, oa, path, 5, 9, 2, NULL);
    TH_OK(ctx, teeny_graph_load(b.g, ob, path));
    ck_assert_int_eq(teeny_graph_train_steps(b.g), 9);
    ck_assert_int_eq(teeny_optimizer_steps(ob), 2);
    feed(pb, &b, 4, 7);
    TH_OK(ctx, teeny_plan_forward(pb));
    TH_OK(ctx, teeny_graph_save(b.g, ob, out, 0, NULL, NULL));
    ck_assert_int_eq(saved_count(out, "bn1.num_batches_tracked"), 6);
    ck_assert_int_eq(saved_count(out, "bn2.num_batches_tracked"), 10);
    /* a counter at its maximum: the next training forward is refused */
    write_counted(a.g, oa, path, INT64_MAX, 1, 2, NULL);
    TH_OK(ctx, teeny_graph_load(b.g, ob, path));
    TH_STATUS(ctx, TEENY_ERR_RANGE, teeny_plan_forward(pb));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "bn1"));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_set_train_steps(b.g, -1));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_graph_set_train_steps(NULL, 1));
    TH_OK(ctx, teeny_graph_set_train_steps(b.g, 0));
    TH_OK(ctx, teeny_plan_forward(pb));
    ck_assert_int_eq(teeny_graph_train_steps(b.g), 1);
    free(before);
    remove(path);
    remove(out);
    teeny_optimizer_destroy(oa);
    teeny_optimizer_destroy(ob);
    teeny_plan_destroy(pa);
    teeny_plan_destroy(pb);
    teeny_graph_destroy(a.g);
    teeny_graph_destroy(b.g);
}
END_TEST

/* Optimizer state in checkpoints is keyed by parameter name
 * ("optimizer.fc1.weight.exp_avg"), so a load pairs each moment with its
 * own parameter whatever order the optimizer lists them in: two linears
 * of equal shapes, trained with one order, loaded into an optimizer with
 * the other order (positional keys paired fc1's moments with fc2). An
 * optimizer whose parameters are not all the graph's is refused by save
 * and load (TEENY_ERR_ARG, nothing written, no file); one over a subset
 * is fine. A file with an earlier version's positional keys is refused
 * with an optimizer (TEENY_ERR_FORMAT, the reason named) and loads
 * without one. */
static teeny_graph *twin_linears(uint64_t seed, teeny_plan **plan, teeny_node *x, teeny_node *labels)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node a, b, c, l;
    int64_t xs[2] = {-1, 4};
    TH_OK(ctx, teeny_graph_create(ctx, seed, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 2, xs, x));
    TH_OK(ctx, teeny_graph_labels(g, "labels", labels));
    TH_OK(ctx, teeny_graph_linear(g, "fc1", *x, 4, 1, &a));
    TH_OK(ctx, teeny_graph_activation(g, "act", a, TEENY_ACT_SILU, &b));
    TH_OK(ctx, teeny_graph_linear(g, "fc2", b, 4, 1, &c));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", c, *labels, &l));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = 3;
    TH_OK(ctx, teeny_graph_compile(g, &pp, plan));
    return g;
}

/* Adam over g's parameters in the order idx[0..n). */
static teeny_optimizer *adam_over(teeny_graph *g, const int *idx, int n)
{
    teeny_tensor *params[8], *grads[8];
    for (int i = 0; i < n; i++)
        TH_OK(th_ctx(), teeny_graph_param(g, idx[i], NULL, &params[i], &grads[i]));
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    teeny_optimizer *o;
    op.kind = TEENY_OPTIM_ADAM;
    op.lr = 0.05f;
    TH_OK(th_ctx(), teeny_optimizer_create(th_ctx(), &op, n, params, (const teeny_tensor *const *)grads, &o));
    return o;
}

/* Every state tensor of o equals the one of r for the same parameter name. */
static void expect_same_moments(teeny_graph *g, teeny_optimizer *o, const int *idx, teeny_graph *rg,
                                teeny_optimizer *r, const int *ridx, int n)
{
    for (int i = 0; i < teeny_optimizer_state_count(o); i++) {
        int pi = i / 2, k = i % 2, match = -1;
        const char *name, *rname;
        TH_OK(th_ctx(), teeny_graph_param(g, idx[pi], &name, NULL, NULL));
        char want[128];
        snprintf(want, sizeof want, "%s", name);
        for (int j = 0; j < n && match < 0; j++) {
            TH_OK(th_ctx(), teeny_graph_param(rg, ridx[j], &rname, NULL, NULL));
            if (!strcmp(rname, want))
                match = j;
        }
        ck_assert_int_ge(match, 0);
        teeny_tensor *t, *rt;
        TH_OK(th_ctx(), teeny_optimizer_state(o, i, NULL, &t));
        TH_OK(th_ctx(), teeny_optimizer_state(r, 2 * match + k, NULL, &rt));
        float *a = th_read(t), *b = th_read(rt);
        ck_assert_msg(!memcmp(a, b, (size_t)teeny_tensor_numel(t) * sizeof *a), "%s %s: moments of another "
                      "parameter", want, k ? "exp_avg_sq" : "exp_avg");
        free(a);
        free(b);
    }
}

START_TEST(test_graph_checkpoint_optimizer_keys)
{
    teeny_ctx *ctx = th_ctx();
    teeny_plan *pa, *pb;
    teeny_node xa, la, xb, lb;
    teeny_graph *a = twin_linears(41, &pa, &xa, &la), *b = twin_linears(42, &pb, &xb, &lb);
    static const int order[4] = {0, 1, 2, 3}, swapped[4] = {2, 3, 0, 1}, fc2_only[2] = {2, 3};
    teeny_optimizer *oa = adam_over(a, order, 4), *ob = adam_over(b, swapped, 4), *foreign = adam_over(b, order, 4);
    net m = {.g = a, .x = xa, .labels = la, .classes = 4};
    for (int step = 0; step < 3; step++) {
        feed(pa, &m, 3, 50 + (uint64_t)step);
        TH_OK(ctx, teeny_plan_forward(pa));
        TH_OK(ctx, teeny_plan_backward(pa));
        TH_OK(ctx, teeny_optimizer_step(oa, 0.05f, -1.0f));
    }
    char path[256], old[300], none[300];
    snprintf(path, sizeof path, "/tmp/teenycl-optkeys-%ld.safetensors", (long)getpid());
    snprintf(old, sizeof old, "%s.old", path);
    snprintf(none, sizeof none, "%s.none", path);
    remove(none);
    TH_OK(ctx, teeny_graph_save(a, oa, path, 0, NULL, NULL));
    /* the names in the file */
    {
        teeny_st_file *f;
        TH_OK(NULL, teeny_st_open(path, &f));
        int is_i64, nd;
        int64_t shape[8];
        static const char *const want[] = {"optimizer.fc1.weight.exp_avg", "optimizer.fc1.bias.exp_avg_sq",
                                           "optimizer.fc2.weight.exp_avg_sq", "optimizer.fc2.bias.exp_avg"};
        for (int i = 0; i < 4; i++)
            TH_OK(NULL, teeny_st_info(f, want[i], &is_i64, &nd, shape));
        ck_assert(teeny_st_info(f, "optimizer.exp_avg.0", &is_i64, &nd, shape) != TEENY_OK);
        teeny_st_close(f);
    }
    /* an optimizer over another graph's parameters, whole or in part */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_save(a, foreign, none, 0, NULL, NULL));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "not a parameter of this graph"));
    ck_assert(access(none, F_OK) != 0);
    size_t n, n2;
    float *before = snapshot(b, ob, &n);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_load(b, oa, path));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "not a parameter of this graph"));
    {
        teeny_tensor *params[4], *grads[4];
        for (int i = 0; i < 4; i++)
            TH_OK(ctx, teeny_graph_param(i < 3 ? a : b, i, NULL, &params[i], &grads[i]));
        teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
        teeny_optimizer *mixed;
        op.momentum = 0.9f;
        TH_OK(ctx, teeny_optimizer_create(ctx, &op, 4, params, (const teeny_tensor *const *)grads, &mixed));
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_save(a, mixed, none, 0, NULL, NULL));
        ck_assert(access(none, F_OK) != 0);
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_load(a, mixed, path));
        teeny_optimizer_destroy(mixed);
    }
    /* an earlier version's positional keys: refused with an optimizer */
    write_counted(a, oa, old, 0, 0, 3, "positional");
    TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_graph_load(b, ob, old));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "by position"));
    float *after = snapshot(b, ob, &n2);
    ck_assert_msg(n2 == n && !memcmp(before, after, n * sizeof *after), "a rejected load changed a tensor");
    free(after);

    /* by name: b's optimizer lists fc2 first, and gets fc2's moments */
    TH_OK(ctx, teeny_graph_load(b, ob, path));
    expect_same_moments(b, ob, swapped, a, oa, order, 4);
    ck_assert_int_eq(teeny_optimizer_steps(ob), 3);
    /* one more step from the same state moves both graphs' parameters alike */
    net mb = {.g = b, .x = xb, .labels = lb, .classes = 4};
    feed(pa, &m, 3, 99);
    feed(pb, &mb, 3, 99);
    TH_OK(ctx, teeny_plan_forward(pa));
    TH_OK(ctx, teeny_plan_backward(pa));
    TH_OK(ctx, teeny_plan_forward(pb));
    TH_OK(ctx, teeny_plan_backward(pb));
    TH_OK(ctx, teeny_optimizer_step(oa, 0.05f, -1.0f));
    TH_OK(ctx, teeny_optimizer_step(ob, 0.05f, -1.0f));
    float *wa = read_params(a, &n, 0), *wb = read_params(b, &n2, 0);
    ck_assert(n == n2 && !memcmp(wa, wb, n * sizeof *wa));
    free(wa);
    free(wb);
    /* the old file still restores the parameters without an optimizer */
    TH_OK(ctx, teeny_graph_load(b, NULL, old));
    /* an optimizer over a subset of the graph's parameters round-trips */
    teeny_optimizer *sub = adam_over(a, fc2_only, 2), *sub_b = adam_over(b, fc2_only, 2);
    TH_OK(ctx, teeny_optimizer_step(sub, 0.05f, -1.0f));
    TH_OK(ctx, teeny_graph_save(a, sub, path, 0, NULL, NULL));
    TH_OK(ctx, teeny_graph_load(b, sub_b, path));
    expect_same_moments(b, sub_b, fc2_only, a, sub, fc2_only, 2);
    TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_graph_load(b, ob, path)); /* fc1's state is not in it */
    free(before);
    remove(path);
    remove(old);
    teeny_optimizer_destroy(sub);
    teeny_optimizer_destroy(sub_b);
    teeny_optimizer_destroy(oa);
    teeny_optimizer_destroy(ob);
    teeny_optimizer_destroy(foreign);
    teeny_plan_destroy(pa);
    teeny_plan_destroy(pb);
    teeny_graph_destroy(a);
    teeny_graph_destroy(b);
}
END_TEST

/* The example network's training plan: planned peak under 65% of the
 * no-reuse total, under 160 MB, and equal to what is allocated. Batch
 * norm fused with its SiLU (teeny_graph_batchnorm_act) took the peak from
 * 191.5 to 162.6 MB and the no-reuse total from 326.4 to 268.6 MB (ratio
 * 0.587 -> 0.605: the fused graph has no activation tensors to reuse);
 * the residual adds' inputs sharing their gradient (ALIAS) took them to
 * 159.4 and 249.3 MB (0.639: fewer buffers, each the same size). */
#include "../examples/fashion_net.h"

START_TEST(test_graph_example_memory)
{
    fn_net fn = {0};
    ck_assert_int_eq(fn_build(th_ctx(), 1, &fn), TEENY_OK);
    ck_assert_int_eq(fn_param_count(&fn), 211818);
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *p = NULL;
    pp.batch = 128;
    pp.loss = fn.loss;
    TH_OK(th_ctx(), teeny_graph_compile(fn.g, &pp, &p));
    size_t peak, total, alloc;
    TH_OK(th_ctx(), teeny_plan_memory(p, &peak, &total, &alloc));
    ck_assert_msg(peak < total * 0.65, "planned peak %zu is not under 65%% of %zu", peak, total);
    ck_assert_msg(peak < 160000000, "planned peak %zu is not under 160 MB", peak);
    ck_assert_uint_eq(peak, alloc);
    teeny_plan_destroy(p);
    teeny_graph_destroy(fn.g);
}
END_TEST

/* teeny_graph_node_info writes shape[0..ndim) and zeros after (it once
 * copied all five entries of the node's shape, whatever lay past ndim),
 * and writes nothing on failure. The node's own entries past ndim are set
 * to stale values first, as a view's once were (uninitialized stack). */
START_TEST(test_graph_node_info)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, r, fc, flat;
    int64_t xs[4] = {-1, 2, 3, 4}, want_r[1] = {24}, stale = 0x5eed;
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 4, xs, &x));
    TH_OK(ctx, teeny_graph_reshape(g, "r", x, 1, want_r, &r));
    TH_OK(ctx, teeny_graph_flatten(g, "flat", x, &flat));
    TH_OK(ctx, teeny_graph_linear(g, "fc", flat, 7, 1, &fc));
    const struct { teeny_node n; int ndim; int64_t shape[5]; } want[] = {
        {x, 4, {1, 2, 3, 4}}, {r, 1, {24}}, {flat, 2, {1, 24}}, {fc, 2, {1, 7}}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        /* the views' and ops' internal shapes were zeroed past ndim */
        for (int i = want[k].ndim; i < 5; i++) {
            ck_assert_msg(g->nodes[want[k].n].shapes.out.shape[i] == 0, "node %d: internal dim %d not zero",
                          (int)want[k].n, i);
            g->nodes[want[k].n].shapes.out.shape[i] = stale;
        }
        const char *name = NULL;
        int ndim = -7;
        int64_t shape[5] = {-7, -7, -7, -7, -7};
        TH_OK(ctx, teeny_graph_node_info(g, want[k].n, &name, &ndim, shape));
        ck_assert_int_eq(ndim, want[k].ndim);
        for (int i = 0; i < 5; i++)
            ck_assert_msg(shape[i] == (i < ndim ? want[k].shape[i] : 0), "node %s: shape[%d] = %lld", name, i,
                          (long long)shape[i]);
        TH_OK(ctx, teeny_graph_node_info(g, want[k].n, NULL, NULL, shape)); /* any output may be NULL */
    }
    const char *name = "untouched";
    int ndim = -7;
    int64_t shape[5] = {-7, -7, -7, -7, -7};
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_node_info(g, teeny_graph_node_count(g), &name, &ndim, shape));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_node_info(g, -1, &name, &ndim, shape));
    ck_assert(!strcmp(name, "untouched") && ndim == -7);
    for (int i = 0; i < 5; i++)
        ck_assert(shape[i] == -7);
    teeny_graph_destroy(g);
}
END_TEST

/* ---- the compile phases, one at a time ---- */

/* x[-1, 6] -> fc1 -> relu a -> fc2; s = a + fc2 (a fans out to fc2 and s);
 * loss = cross-entropy(s, labels). Node indices in order of creation. */
enum { PH_X, PH_LABELS, PH_FC1, PH_A, PH_FC2, PH_S, PH_LOSS, PH_NODES };

static teeny_graph *phase_graph(void)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g = NULL;
    teeny_node n[PH_NODES];
    int64_t xs[2] = {-1, 6};
    TH_OK(ctx, teeny_graph_create(ctx, 3, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 2, xs, &n[PH_X]));
    TH_OK(ctx, teeny_graph_labels(g, "labels", &n[PH_LABELS]));
    TH_OK(ctx, teeny_graph_linear(g, "fc1", n[PH_X], 4, 1, &n[PH_FC1]));
    TH_OK(ctx, teeny_graph_activation(g, "a", n[PH_FC1], TEENY_ACT_RELU, &n[PH_A]));
    TH_OK(ctx, teeny_graph_linear(g, "fc2", n[PH_A], 4, 1, &n[PH_FC2]));
    TH_OK(ctx, teeny_graph_add(g, "s", n[PH_A], n[PH_FC2], &n[PH_S]));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", n[PH_S], n[PH_LABELS], &n[PH_LOSS]));
    for (int i = 0; i < PH_NODES; i++)
        ck_assert_int_eq(n[i], i);
    return g;
}

static teeny_plan *phase_plan(teeny_graph *g, int64_t batch, int training, int reuse)
{
    teeny_plan *p = NULL;
    TH_OK(th_ctx(), teeny__plan_alloc(g, batch, training, teeny_graph_node_count(g) - 1, reuse, &p));
    return p;
}

static void assert_shape(const teeny__shape *s, int ndim, int64_t d0, int64_t d1, const char *what)
{
    ck_assert_msg(s->ndim == ndim && s->shape[0] == d0 && (ndim < 2 || s->shape[1] == d1),
                  "%s: got rank %d [%lld, %lld], want rank %d [%lld, %lld]", what, s->ndim, (long long)s->shape[0],
                  (long long)(s->ndim > 1 ? s->shape[1] : 0), ndim, (long long)d0, (long long)d1);
}

/* Phase 1: the same graph's shapes for two batch sizes (and a view's shape
 * re-derived from its input); a non-scalar loss is refused for training. */
START_TEST(test_graph_phase_shapes)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g = phase_graph();
    const int64_t batches[2] = {2, 7};
    for (int k = 0; k < 2; k++) {
        int64_t b = batches[k];
        teeny_plan *p = phase_plan(g, b, 1, 1);
        TH_OK(ctx, teeny__compile_shapes(p));
        assert_shape(&p->shapes[PH_X].out, 2, b, 6, "x");
        ck_assert(!p->shapes[PH_X].out.is_i32 && p->shapes[PH_LABELS].out.is_i32);
        assert_shape(&p->shapes[PH_LABELS].out, 1, b, 0, "labels");
        assert_shape(&p->shapes[PH_FC1].out, 2, b, 4, "fc1");
        assert_shape(&p->shapes[PH_FC1].in[0], 2, b, 6, "fc1's input");
        assert_shape(&p->shapes[PH_A].out, 2, b, 4, "a");
        assert_shape(&p->shapes[PH_FC2].out, 2, b, 4, "fc2");
        assert_shape(&p->shapes[PH_S].out, 2, b, 4, "s");
        ck_assert_int_eq(teeny__shape_numel(&p->shapes[PH_LOSS].out), 1);
        /* the graph's own batch-of-1 shapes are untouched */
        ck_assert_int_eq(g->nodes[PH_S].shapes.out.shape[0], 1);
        teeny__plan_free(p);
    }
    /* a view resolves against its input for each batch */
    teeny_node flat;
    int64_t shape[2] = {-1, 2};
    TH_OK(ctx, teeny_graph_reshape(g, "pairs", PH_S, 2, shape, &flat));
    teeny_plan *p = phase_plan(g, 5, 0, 1);
    TH_OK(ctx, teeny__compile_shapes(p));
    assert_shape(&p->shapes[flat].out, 2, 10, 2, "pairs");
    teeny__plan_free(p);
    /* training on a non-scalar "loss" (the view) */
    p = phase_plan(g, 5, 1, 1);
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny__compile_shapes(p));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "pairs"));
    teeny__plan_free(p);
    teeny_graph_destroy(g);
}
END_TEST

static teeny__contrib_kind contrib_kind(const teeny__backward *bw, int node, int slot)
{
    return bw->contrib[node * TEENY__OP_MAX_SLOTS + slot].kind;
}

/* Phase 2: a value that fans out gets its gradient defined by its latest
 * consumer and one accumulation temporary for the other; the add's inputs
 * share its gradient (ALIAS: fc2's accumulation into a comes at fc2's own
 * step, after fc2 read its gradient); inputs take no gradient; an
 * inference plan derives nothing; a node using the same value twice
 * accumulates the second slot. */
START_TEST(test_graph_phase_backward)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g = phase_graph();
    teeny__backward bw;
    teeny_plan *p = phase_plan(g, 3, 1, 1);
    TH_OK(ctx, teeny__compile_shapes(p));
    TH_OK(ctx, teeny__compile_backward(p, &bw));
    const int want_reaches[PH_NODES] = {0, 0, 1, 1, 1, 1, 1};
    for (int i = 0; i < PH_NODES; i++)
        ck_assert_msg(bw.reaches[i] == want_reaches[i], "node %d: reaches %d", i, bw.reaches[i]);
    ck_assert_int_eq(bw.n_temps, 1);
    /* s, the latest consumer of a, defines a's gradient (its own buffer); fc2's contribution accumulates */
    ck_assert_int_eq(contrib_kind(&bw, PH_S, 0), TEENY__CONTRIB_ALIAS);
    ck_assert_int_eq(bw.grad_share[PH_A], PH_S);
    ck_assert_int_eq(contrib_kind(&bw, PH_FC2, 0), TEENY__CONTRIB_TEMP);
    ck_assert_int_eq(bw.contrib[PH_FC2 * TEENY__OP_MAX_SLOTS].temp, 0);
    ck_assert_int_eq(bw.grad_def[PH_A], teeny__bwd_step(g, PH_S));
    ck_assert_int_eq(contrib_kind(&bw, PH_S, 1), TEENY__CONTRIB_ALIAS);
    ck_assert_int_eq(bw.grad_share[PH_FC2], PH_S);
    ck_assert_int_eq(bw.grad_def[PH_FC2], teeny__bwd_step(g, PH_S));
    for (int i = 0; i < PH_NODES; i++)
        ck_assert_int_eq(bw.grad_share[i], i == PH_A || i == PH_FC2 ? PH_S : -1);
    ck_assert_int_eq(contrib_kind(&bw, PH_A, 0), TEENY__CONTRIB_GRAD);
    ck_assert_int_eq(contrib_kind(&bw, PH_LOSS, 0), TEENY__CONTRIB_GRAD);
    ck_assert_int_eq(bw.grad_def[PH_LOSS], teeny__bwd_step(g, PH_LOSS));
    ck_assert_int_eq(contrib_kind(&bw, PH_LOSS, 1), TEENY__CONTRIB_NONE); /* labels */
    ck_assert_int_eq(contrib_kind(&bw, PH_FC1, 0), TEENY__CONTRIB_NONE);  /* x */
    ck_assert_int_eq(bw.grad_def[PH_X], -1);
    /* every parameter has its gradient tensor now */
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        teeny_tensor *grad = NULL;
        TH_OK(ctx, teeny_graph_param(g, i, NULL, NULL, &grad));
        ck_assert_ptr_nonnull(grad);
    }
    teeny__backward_free(&bw);
    teeny__plan_free(p);

    p = phase_plan(g, 3, 0, 1);
    TH_OK(ctx, teeny__compile_shapes(p));
    TH_OK(ctx, teeny__compile_backward(p, &bw));
    ck_assert_int_eq(bw.n_temps, 0);
    for (int i = 0; i < PH_NODES; i++) {
        ck_assert_int_eq(bw.reaches[i], 0);
        for (int j = 0; j < TEENY__OP_MAX_SLOTS; j++)
            ck_assert_int_eq(contrib_kind(&bw, i, j), TEENY__CONTRIB_NONE);
    }
    teeny__backward_free(&bw);
    teeny__plan_free(p);

    /* d = a + a before the loss: the second slot accumulates as well */
    teeny_node d, l2;
    TH_OK(ctx, teeny_graph_add(g, "d", PH_A, PH_A, &d));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss2", d, PH_LABELS, &l2));
    p = phase_plan(g, 3, 1, 1);
    TH_OK(ctx, teeny__compile_shapes(p));
    TH_OK(ctx, teeny__compile_backward(p, &bw));
    ck_assert_int_eq(contrib_kind(&bw, d, 0), TEENY__CONTRIB_ALIAS);
    ck_assert_int_eq(contrib_kind(&bw, d, 1), TEENY__CONTRIB_TEMP);
    ck_assert_int_eq(bw.reaches[PH_S], 0); /* off the path to loss2 */
    ck_assert_int_eq(bw.n_temps, 1);
    teeny__backward_free(&bw);
    teeny__plan_free(p);
    teeny_graph_destroy(g);
}
END_TEST

static size_t aligned(size_t numel)
{
    return (numel + 63) / 64 * 64;
}

/* Placement's guarantees over a set of buffers: aligned offsets, no two
 * buffers live at the same step overlapping, the peak is the highest end
 * and at most the no-reuse total. Returns the no-reuse total. */
static size_t check_placement(const teeny__pbuf *b, int n, size_t peak, const char *what)
{
    size_t total = 0, top = 0;
    for (int i = 0; i < n; i++) {
        total += aligned(b[i].numel);
        if (b[i].offset + aligned(b[i].numel) > top)
            top = b[i].offset + aligned(b[i].numel);
        ck_assert_msg(b[i].offset % 64 == 0 && b[i].def <= b[i].last, "%s: buffer %d offset %zu [%d, %d]", what, i,
                      b[i].offset, b[i].def, b[i].last);
        for (int j = 0; j < i; j++) {
            int live = !(b[j].last < b[i].def || b[i].last < b[j].def);
            int overlap = b[i].offset < b[j].offset + b[j].numel && b[j].offset < b[i].offset + b[i].numel;
            ck_assert_msg(!(live && overlap), "%s: buffers %d [%d, %d] at %zu+%zu and %d [%d, %d] at %zu+%zu overlap",
                          what, i, b[i].def, b[i].last, b[i].offset, b[i].numel, j, b[j].def, b[j].last, b[j].offset,
                          b[j].numel);
        }
    }
    ck_assert_msg(peak == top && peak <= total, "%s: peak %zu, highest end %zu, no-reuse total %zu", what, peak, top,
                  total);
    return total;
}

/* Phase 3: liveness of a real training plan (temporaries live one step,
 * gradients from their defining step to their own backward) and placement
 * on it and on seeded random lifetimes: no two simultaneously live buffers
 * overlap, and the peak never exceeds the no-reuse total, which placement
 * without reuse reaches exactly. */
START_TEST(test_graph_phase_memory_plan)
{
    teeny_ctx *ctx = th_ctx();
    net m = {0};
    build_psa_net(&m, 5);
    teeny_graph *g = m.g;
    teeny__backward bw;
    teeny__memplan mp;
    teeny_plan *p = phase_plan(g, 6, 1, 1);
    TH_OK(ctx, teeny__compile_shapes(p));
    TH_OK(ctx, teeny__compile_backward(p, &bw));
    TH_OK(ctx, teeny__compile_liveness(p, &bw, &mp));
    ck_assert_int_gt(bw.n_temps, 0); /* x and r1 fan out */
    for (int k = 0; k < bw.n_temps; k++) {
        const teeny__pbuf *t = &mp.bufs[mp.temp_buf[k]];
        ck_assert(t->def == t->last && t->def >= g->n_nodes);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        ck_assert_int_eq(mp.grad_buf[i] >= 0, bw.reaches[i] && bw.grad_def[i] >= 0);
        /* a shared buffer: the sharer's, live through this gradient's life too */
        int s = bw.grad_share[i];
        ck_assert(s < 0 || (s > i && mp.grad_buf[i] == mp.grad_buf[s]));
        if (mp.grad_buf[i] >= 0)
            ck_assert(s >= 0 ? mp.bufs[mp.grad_buf[i]].def <= bw.grad_def[i] &&
                                   mp.bufs[mp.grad_buf[i]].last >= teeny__bwd_step(g, i)
                             : mp.bufs[mp.grad_buf[i]].def == bw.grad_def[i] &&
                                   mp.bufs[mp.grad_buf[i]].last >= teeny__bwd_step(g, i));
        ck_assert_int_eq(mp.value_buf[i] >= 0, g->nodes[i].kind == TEENY__NODE_OP);
    }
    size_t peak = teeny__plan_place(mp.bufs, mp.n, 1);
    size_t total = check_placement(mp.bufs, mp.n, peak, "psa net");
    ck_assert_msg(peak < total, "reuse saved nothing: %zu of %zu", peak, total);
    ck_assert_uint_eq(teeny__plan_place(mp.bufs, mp.n, 0), total);
    check_placement(mp.bufs, mp.n, total, "psa net without reuse");
    teeny__memplan_free(&mp);
    /* the whole phase: its figures and the arena agree with placement */
    TH_OK(ctx, teeny__compile_memory(p, &bw, &mp));
    ck_assert_uint_eq(p->peak_elems, peak);
    ck_assert_uint_eq(p->no_reuse_elems, total);
    ck_assert_int_eq(teeny_tensor_numel(p->arena), (int64_t)peak);
    ck_assert_int_eq(p->n_temps, bw.n_temps);
    for (int k = 0; k < p->n_temps; k++)
        ck_assert_ptr_nonnull(p->temps[k]);
    teeny__memplan_free(&mp);
    teeny__backward_free(&bw);
    teeny__plan_free(p);
    teeny_graph_destroy(g);

    th_rng r = th_rng_make(_i + 17);
    teeny__pbuf bufs[40];
    for (int round = 0; round < 50; round++) {
        int n = th_int(&r, 1, 40);
        char what[64];
        snprintf(what, sizeof what, "random round %d (seed %d)", round, _i + 17);
        for (int i = 0; i < n; i++) {
            int def = th_int(&r, 0, 30);
            bufs[i] = (teeny__pbuf){(size_t)th_int(&r, 1, 700), def, def + th_int(&r, 0, 12), 0};
        }
        size_t pk = teeny__plan_place(bufs, n, 1);
        check_placement(bufs, n, pk, what);
    }
}
END_TEST

/* Phase 4: recording lays the passes out as adjacent ranges; a training
 * plan records the inference plan's forward launches, a backward with the
 * loss seed fill and one add per accumulation temporary on top of the
 * ops' own backward launches (and a zero fill per parameter the loss does
 * not reach), and one zero fill per parameter. */
START_TEST(test_graph_phase_record)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g = phase_graph();
    int fwd[2], bwd[2];
    for (int training = 0; training < 2; training++) {
        teeny__backward bw;
        teeny__memplan mp;
        teeny_plan *p = phase_plan(g, 4, training, 1);
        TH_OK(ctx, teeny__compile_shapes(p));
        TH_OK(ctx, teeny__compile_backward(p, &bw));
        TH_OK(ctx, teeny__compile_memory(p, &bw, &mp));
        TH_OK(ctx, teeny__compile_record(p, &bw));
        ck_assert_int_eq(p->fwd_from, 0);
        ck_assert(p->fwd_to == p->bwd_from && p->bwd_to == p->zero_from && p->zero_to >= p->zero_from);
        fwd[training] = p->fwd_to - p->fwd_from;
        bwd[training] = p->bwd_to - p->bwd_from;
        ck_assert_int_eq(p->zero_to - p->zero_from, training ? teeny_graph_param_count(g) : 0);
        teeny__memplan_free(&mp);
        teeny__backward_free(&bw);
        teeny__plan_free(p);
    }
    /* forward: fc1 and fc2 one GEMM each (bias fused), a and s one
     * elementwise launch each, the loss its per-row and mean passes */
    ck_assert_int_eq(fwd[0], 1 + 1 + 1 + 1 + 2);
    ck_assert_int_eq(fwd[1], fwd[0]);
    ck_assert_int_eq(bwd[0], 0);
    /* backward, in order: the loss seed fill; the loss (1, labels take no
     * gradient); s (nothing: both inputs' gradients are its own buffer);
     * fc2 (dx and dw GEMMs, the bias's two-pass column sum: 4); the
     * accumulation add of fc2's contribution into a's gradient (1); a (1);
     * fc1 (dw and db only, x takes no gradient: 3) */
    ck_assert_int_eq(bwd[1], 1 + 1 + 0 + 4 + 1 + 1 + 3);
    /* the same figures through the public compile */
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *p = NULL;
    int f, b;
    pp.batch = 4;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &p));
    TH_OK(ctx, teeny_plan_launches(p, &f, &b));
    ck_assert_int_eq(f, fwd[1]);
    ck_assert_int_eq(b, bwd[1]);
    teeny_plan_destroy(p);
    /* a dead branch (a linear off a that reaches no loss): its forward is
     * recorded (one GEMM), and the backward opens with one zero fill per
     * parameter of it, so it overwrites every parameter gradient */
    teeny_node dead;
    TH_OK(ctx, teeny_graph_linear(g, "dead", PH_A, 2, 1, &dead));
    pp.loss = PH_LOSS;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &p));
    TH_OK(ctx, teeny_plan_launches(p, &f, &b));
    ck_assert_int_eq(f, fwd[1] + 1);
    ck_assert_int_eq(b, bwd[1] + 2);
    teeny_plan_destroy(p);
    teeny_graph_destroy(g);
}
END_TEST

/* ---- gradients shared through adds and views (ALIAS) ----
 * x -> fc1 -> silu a; b = fc2(a); c = fc3(a); s = a + b; t = s + c;
 * v = reshape(t); d = v + v; loss = cross-entropy(fc4(d)). In backward
 * order: d's first slot shares d's gradient (its second accumulates), the
 * view v and both of t's inputs share theirs, so do s's a (fc3's and fc2's
 * accumulations into a come at their own steps) but not s's b: fc3's
 * accumulation into a, at fc3's step, falls while b's gradient is still to
 * be read (fc2's step comes later), so b keeps a copy. The twin routes
 * every add and view input through an identity activation, whose backward
 * copies (not a PASS op), so every value's gradient has a buffer of its
 * own: the same sums in the same order, so the same bits in every
 * parameter gradient, with more launches. */
typedef struct {
    teeny_graph *g;
    teeny_node x, labels, loss, s, t, v, d;
    teeny_plan *p;
} alias_net;

static teeny_node alias_in(alias_net *m, int twin, teeny_node v)
{
    teeny_node out = v;
    if (twin)
        TH_OK(th_ctx(), teeny_graph_activation(m->g, NULL, v, TEENY_ACT_NONE, &out));
    return out;
}

static void build_alias_net(alias_net *m, int twin)
{
    teeny_ctx *ctx = th_ctx();
    teeny_node f1, a, b, c, f4;
    int64_t xs[2] = {-1, 6}, vs[2] = {-1, 5};
    TH_OK(ctx, teeny_graph_create(ctx, 7, &m->g));
    TH_OK(ctx, teeny_graph_input(m->g, "x", 2, xs, &m->x));
    TH_OK(ctx, teeny_graph_labels(m->g, "labels", &m->labels));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc1", m->x, 5, 1, &f1));
    TH_OK(ctx, teeny_graph_activation(m->g, "a", f1, TEENY_ACT_SILU, &a));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc2", a, 5, 1, &b));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc3", a, 5, 1, &c));
    TH_OK(ctx, teeny_graph_add(m->g, "s", alias_in(m, twin, a), alias_in(m, twin, b), &m->s));
    TH_OK(ctx, teeny_graph_add(m->g, "t", alias_in(m, twin, m->s), alias_in(m, twin, c), &m->t));
    TH_OK(ctx, teeny_graph_reshape(m->g, "v", alias_in(m, twin, m->t), 2, vs, &m->v));
    TH_OK(ctx, teeny_graph_add(m->g, "d", alias_in(m, twin, m->v), alias_in(m, twin, m->v), &m->d));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc4", m->d, 3, 1, &f4));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(m->g, "loss", f4, m->labels, &m->loss));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = 7;
    pp.loss = m->loss;
    TH_OK(ctx, teeny_graph_compile(m->g, &pp, &m->p));
}

START_TEST(test_graph_grad_alias)
{
    teeny_ctx *ctx = th_ctx();
    alias_net m[2];
    float *grads[2], *theta = NULL;
    int launches[2], fwd;
    size_t n = 0;
    for (int twin = 0; twin < 2; twin++) {
        alias_net *k = &m[twin];
        build_alias_net(k, twin);
        if (!twin)
            theta = read_params(k->g, &n, 0);
        else
            write_params(k->g, theta); /* the same parameters */
        net fd = {k->g, k->x, k->labels, k->loss, {6}, 1, 3};
        feed(k->p, &fd, 7, 99);
        TH_OK(ctx, teeny_plan_forward(k->p));
        TH_OK(ctx, teeny_plan_backward(k->p));
        grads[twin] = read_params(k->g, &n, 1);
        TH_OK(ctx, teeny_plan_launches(k->p, &fwd, &launches[twin]));
    }
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(!memcmp(&grads[0][i], &grads[1][i], sizeof(float)),
                      "parameter gradient element %zu: %.9g shared, %.9g copied", i, (double)grads[0][i],
                      (double)grads[1][i]);
    /* the plan's routing: d's twin slots, the view, t, s's a shared; s's b copied */
    teeny__backward bw;
    teeny_plan *p = phase_plan(m[0].g, 7, 1, 1);
    TH_OK(ctx, teeny__compile_shapes(p));
    TH_OK(ctx, teeny__compile_backward(p, &bw));
    ck_assert_int_eq(contrib_kind(&bw, m[0].d, 0), TEENY__CONTRIB_ALIAS);
    ck_assert_int_eq(contrib_kind(&bw, m[0].d, 1), TEENY__CONTRIB_TEMP);
    ck_assert_int_eq(contrib_kind(&bw, m[0].v, 0), TEENY__CONTRIB_ALIAS);
    ck_assert_int_eq(contrib_kind(&bw, m[0].t, 0), TEENY__CONTRIB_ALIAS);
    ck_assert_int_eq(contrib_kind(&bw, m[0].t, 1), TEENY__CONTRIB_ALIAS);
    ck_assert_int_eq(contrib_kind(&bw, m[0].s, 0), TEENY__CONTRIB_ALIAS);
    ck_assert_int_eq(contrib_kind(&bw, m[0].s, 1), TEENY__CONTRIB_GRAD);
    teeny__backward_free(&bw);
    teeny__plan_free(p);
    /* what differs: the twin's 7 identities' copies and the accumulation of
     * d's second identity into v's gradient (8; its adds and view share
     * the identities' gradients); the shared net's copy into b's gradient,
     * d's into its temporary and its accumulation (3) */
    ck_assert_msg(launches[0] + 5 == launches[1], "backward launches: %d shared, %d copied", launches[0],
                  launches[1]);
    for (int k = 0; k < 2; k++) {
        free(grads[k]);
        teeny_plan_destroy(m[k].p);
        teeny_graph_destroy(m[k].g);
    }
    free(theta);
}
END_TEST

/* ---- tied (shared) parameters ----
 * fc1 -> silu -> fc2 -> silu -> head -> loss; fc3 -> silu -> head_b ->
 * loss_b on the same input; head_c -> loss_c. With tie, fc2's and fc3's
 * weight and bias are fc1's (teeny_graph_tie_param): loss uses the shared
 * parameters twice, loss_b once (not through their owner fc1), loss_c not
 * at all. The untied twin (tie 0, fc1's values copied into fc2 and fc3)
 * is the reference: same forward bits, and the tied gradient is the sum of
 * the copies' gradients. */
enum { TIED_LOSSES = 3 };
typedef struct {
    teeny_graph *g;
    teeny_node x, labels, fc[3], loss[TIED_LOSSES];
    teeny_plan *plan[TIED_LOSSES];
} tied_net;

static const char *const tied_names[2] = {"weight", "bias"};

static void tied_param(teeny_graph *g, const char *name, teeny_tensor **value, teeny_tensor **grad)
{
    const char *pname;
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        TH_OK(th_ctx(), teeny_graph_param(g, i, &pname, value, grad));
        if (!strcmp(pname, name))
            return;
    }
    ck_abort_msg("no parameter %s", name);
}

static float *tied_read(teeny_graph *g, const char *name, int grad, size_t *n)
{
    teeny_tensor *v, *d;
    tied_param(g, name, &v, &d);
    ck_assert_ptr_nonnull(grad ? d : v);
    *n = (size_t)teeny_tensor_numel(v);
    return th_read(grad ? d : v);
}

static void build_tied_net(tied_net *m, uint64_t seed, int tie)
{
    teeny_ctx *ctx = th_ctx();
    teeny_node a, h;
    int64_t xs[2] = {-1, 6};
    memset(m, 0, sizeof *m);
    TH_OK(ctx, teeny_graph_create(ctx, seed, &m->g));
    TH_OK(ctx, teeny_graph_input(m->g, "x", 2, xs, &m->x));
    TH_OK(ctx, teeny_graph_labels(m->g, "labels", &m->labels));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc1", m->x, 6, 1, &m->fc[0]));
    TH_OK(ctx, teeny_graph_activation(m->g, "a1", m->fc[0], TEENY_ACT_SILU, &a));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc2", a, 6, 1, &m->fc[1]));
    TH_OK(ctx, teeny_graph_activation(m->g, "a2", m->fc[1], TEENY_ACT_SILU, &a));
    TH_OK(ctx, teeny_graph_linear(m->g, "head", a, 3, 1, &h));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(m->g, "loss", h, m->labels, &m->loss[0]));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc3", m->x, 6, 1, &m->fc[2]));
    TH_OK(ctx, teeny_graph_activation(m->g, "a3", m->fc[2], TEENY_ACT_SILU, &a));
    TH_OK(ctx, teeny_graph_linear(m->g, "head_b", a, 3, 1, &h));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(m->g, "loss_b", h, m->labels, &m->loss[1]));
    TH_OK(ctx, teeny_graph_linear(m->g, "head_c", m->x, 3, 1, &h));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(m->g, "loss_c", h, m->labels, &m->loss[2]));
    for (int k = 0; k < 2; k++) {
        char name[32], to[32];
        snprintf(to, sizeof to, "fc1.%s", tied_names[k]);
        teeny_tensor *src, *dst;
        for (int c = 2; c <= 3; c++) {
            snprintf(name, sizeof name, "fc%d.%s", c, tied_names[k]);
            if (tie) {
                TH_OK(ctx, teeny_graph_tie_param(m->g, name, to));
                continue;
            }
            tied_param(m->g, to, &src, NULL);
            tied_param(m->g, name, &dst, NULL);
            float *v = th_read(src);
            TH_OK(ctx, teeny_tensor_write(dst, v, (size_t)teeny_tensor_numel(src)));
            free(v);
        }
    }
}

static void tied_compile(tied_net *m, int64_t batch)
{
    for (int k = 0; k < TIED_LOSSES; k++) {
        teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
        pp.batch = batch;
        pp.loss = m->loss[k];
        TH_OK(th_ctx(), teeny_graph_compile(m->g, &pp, &m->plan[k]));
        teeny_tensor *tx, *tl;
        TH_OK(th_ctx(), teeny_plan_tensor(m->plan[k], m->x, &tx));
        TH_OK(th_ctx(), teeny_plan_tensor(m->plan[k], m->labels, &tl));
        float xv[6 * 8];
        int32_t lv[8];
        th_rng r = th_rng_make(500);
        ck_assert(batch <= 8);
        th_fill_normal(&r, xv, (size_t)batch * 6, 0, 1);
        for (int64_t i = 0; i < batch; i++)
            lv[i] = th_int(&r, 0, 2);
        TH_OK(th_ctx(), teeny_tensor_write(tx, xv, (size_t)batch * 6));
        TH_OK(th_ctx(), teeny_tensor_write_i32(tl, lv, (size_t)batch));
    }
}

static void tied_free(tied_net *m)
{
    for (int k = 0; k < TIED_LOSSES; k++)
        teeny_plan_destroy(m->plan[k]);
    teeny_graph_destroy(m->g);
}

/* Forward and backward of plan k on both nets, every tied gradient poisoned
 * first; the tied gradient must equal the untied copies' gradients summed
 * over the uses that reach loss k (use[c]: fc<c+1> reaches it), bit for
 * bit, with zeros when none does. */
static void tied_check_grads(tied_net *t, tied_net *u, int k, const int use[3])
{
    float lt, lu;
    for (int w = 0; w < 2; w++) {
        teeny_tensor *d;
        char name[32];
        snprintf(name, sizeof name, "fc1.%s", tied_names[w]);
        tied_param(t->g, name, NULL, &d);
        th_poison(d);
    }
    TH_OK(th_ctx(), teeny_plan_forward(t->plan[k]));
    TH_OK(th_ctx(), teeny_plan_backward(t->plan[k]));
    TH_OK(th_ctx(), teeny_plan_read_loss(t->plan[k], &lt));
    TH_OK(th_ctx(), teeny_plan_forward(u->plan[k]));
    TH_OK(th_ctx(), teeny_plan_backward(u->plan[k]));
    TH_OK(th_ctx(), teeny_plan_read_loss(u->plan[k], &lu));
    ck_assert_msg(lt == lu, "loss %d: tied %.9g, untied %.9g", k, lt, lu);
    for (int w = 0; w < 2; w++) {
        char name[32];
        size_t n, m;
        snprintf(name, sizeof name, "fc1.%s", tied_names[w]);
        float *gt = tied_read(t->g, name, 1, &n);
        float *want = th_malloc(n * sizeof *want);
        for (size_t i = 0; i < n; i++)
            want[i] = 0.0f;
        /* the tied gradient's order: the latest use first (fc3, fc2, fc1), each added to the sum */
        for (int c = 2; c >= 0; c--) {
            if (!use[c])
                continue;
            snprintf(name, sizeof name, "fc%d.%s", c + 1, tied_names[w]);
            float *gu = tied_read(u->g, name, 1, &m);
            ck_assert_uint_eq(m, n);
            for (size_t i = 0; i < n; i++)
                want[i] += gu[i];
            free(gu);
        }
        ck_assert_int_lt(th_first_nonfinite(gt, n), 0);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(gt[i] == want[i], "loss %d, fc1.%s[%zu]: tied gradient %.9g, sum of the copies' %.9g", k,
                          tied_names[w], i, gt[i], want[i]);
        free(gt);
        free(want);
    }
}

/* One parameter, the gradient of every use summed, deterministically;
 * one optimizer step moves it once, and fc2 reads the moved tensor. */
START_TEST(test_graph_tied_params)
{
    teeny_ctx *ctx = th_ctx();
    tied_net t, u;
    build_tied_net(&t, 41, 1);
    build_tied_net(&u, 41, 0);
    ck_assert_int_eq(teeny_graph_param_count(u.g), 12);
    ck_assert_int_eq(teeny_graph_param_count(t.g), 8); /* fc2's and fc3's weight and bias are fc1's */
    for (int i = 0; i < teeny_graph_param_count(t.g); i++) {
        const char *name;
        TH_OK(ctx, teeny_graph_param(t.g, i, &name, NULL, NULL));
        ck_assert_msg(strncmp(name, "fc2.", 4) && strncmp(name, "fc3.", 4), "parameter %d is %s", i, name);
    }
    tied_compile(&t, 4);
    tied_compile(&u, 4);
    const int uses[TIED_LOSSES][3] = {{1, 1, 0}, {0, 0, 1}, {0, 0, 0}};
    for (int k = 0; k < TIED_LOSSES; k++)
        tied_check_grads(&t, &u, k, uses[k]);
    /* deterministic: the same step again gives the same bits */
    size_t n, n2;
    tied_check_grads(&t, &u, 0, uses[0]);
    float *g1 = tied_read(t.g, "fc1.weight", 1, &n);
    tied_check_grads(&t, &u, 0, uses[0]);
    float *g2 = tied_read(t.g, "fc1.weight", 1, &n2);
    ck_assert_int_eq(memcmp(g1, g2, n * sizeof *g1), 0);

    /* one SGD step over the tied graph's parameters moves the shared weight once: w - lr g */
    int np = teeny_graph_param_count(t.g);
    teeny_tensor **params = th_malloc((size_t)np * sizeof *params), **grads = th_malloc((size_t)np * sizeof *grads);
    for (int i = 0; i < np; i++)
        TH_OK(ctx, teeny_graph_param(t.g, i, NULL, &params[i], &grads[i]));
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    teeny_optimizer *opt;
    op.lr = 0.5f;
    TH_OK(ctx, teeny_optimizer_create(ctx, &op, np, params, (const teeny_tensor *const *)grads, &opt));
    float *w0 = tied_read(t.g, "fc1.weight", 0, &n);
    TH_OK(ctx, teeny_optimizer_step(opt, op.lr, -1.0f));
    float *w1 = tied_read(t.g, "fc1.weight", 0, &n);
    for (size_t i = 0; i < n; i++) {
        double want = (double)w0[i] - 0.5 * (double)g2[i];
        ck_assert_msg(fabs(w1[i] - want) <= 1e-6 * (1 + fabs(want)), "fc1.weight[%zu]: %.9g after a step, want %.9g",
                      i, w1[i], want);
    }
    /* the untied twin with every copy set to the moved values computes the same loss */
    for (int i = 0; i < np; i++) {
        const char *name;
        teeny_tensor *dst;
        TH_OK(ctx, teeny_graph_param(t.g, i, &name, NULL, NULL));
        char copy[64];
        snprintf(copy, sizeof copy, "%s", name);
        float *v = th_read(params[i]);
        for (int c = 1; c <= 3; c++) {
            char other[64];
            snprintf(other, sizeof other, "fc%d.%s", c, copy + 4);
            tied_param(u.g, !strncmp(copy, "fc1.", 4) ? other : copy, &dst, NULL);
            TH_OK(ctx, teeny_tensor_write(dst, v, (size_t)teeny_tensor_numel(dst)));
        }
        free(v);
    }
    float lt, lu;
    TH_OK(ctx, teeny_plan_forward(t.plan[0]));
    TH_OK(ctx, teeny_plan_read_loss(t.plan[0], &lt));
    TH_OK(ctx, teeny_plan_forward(u.plan[0]));
    TH_OK(ctx, teeny_plan_read_loss(u.plan[0], &lu));
    ck_assert_msg(lt == lu, "after the step: tied loss %.9g, untied %.9g", lt, lu);
    teeny_optimizer_destroy(opt);
    free(params);
    free(grads);
    free(g1);
    free(g2);
    free(w0);
    free(w1);
    tied_free(&t);
    tied_free(&u);
}
END_TEST

/* Finite differences through the shared parameters (the gradcheck moves
 * the one tensor every use reads). */
START_TEST(test_graph_tied_gradcheck)
{
    tied_net t;
    net m = {0};
    build_tied_net(&t, 42, 1);
    m.g = t.g;
    m.x = t.x;
    m.labels = t.labels;
    m.loss = t.loss[0];
    m.x_shape[0] = 6;
    m.x_ndim = 2;
    m.classes = 3;
    gradcheck(&m, "tied net");
    tied_free(&t);
}
END_TEST

/* A checkpoint holds the shared parameter once, under the owner's name,
 * with one optimizer state; it loads back into a tied graph and is refused
 * (nothing changed) by the untied one, which misses fc2's tensors. */
START_TEST(test_graph_tied_checkpoint)
{
    teeny_ctx *ctx = th_ctx();
    tied_net t, t2, u;
    build_tied_net(&t, 43, 1);
    build_tied_net(&t2, 44, 1);
    build_tied_net(&u, 45, 0);
    tied_compile(&t, 4);
    tied_compile(&t2, 4);
    tied_compile(&u, 4);
    teeny_optimizer *opt = adamw_for(t.g), *opt2 = adamw_for(t2.g), *optu = adamw_for(u.g);
    ck_assert_int_eq(teeny_optimizer_state_count(opt), 2 * 8);
    for (int step = 0; step < 2; step++) {
        TH_OK(ctx, teeny_plan_forward(t.plan[0]));
        TH_OK(ctx, teeny_plan_backward(t.plan[0]));
        TH_OK(ctx, teeny_optimizer_step(opt, 1e-2f, -1.0f));
    }
    char path[256];
    snprintf(path, sizeof path, "/tmp/teenycl-tied-%ld.safetensors", (long)getpid());
    TH_OK(ctx, teeny_graph_save(t.g, opt, path, 0, NULL, NULL));
    teeny_st_file *f;
    int is_i64, ndim;
    int64_t shape[8];
    TH_OK(NULL, teeny_st_open(path, &f));
    const char *present[] = {"fc1.weight", "fc1.bias", "optimizer.fc1.weight.exp_avg", "head.weight"};
    const char *absent[] = {"fc2.weight", "fc3.bias", "optimizer.fc2.weight.exp_avg", "optimizer.fc3.bias.exp_avg_sq"};
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(teeny_st_info(f, present[i], &is_i64, &ndim, shape) == TEENY_OK, "%s missing", present[i]);
        ck_assert_msg(teeny_st_info(f, absent[i], &is_i64, &ndim, shape) != TEENY_OK, "%s saved", absent[i]);
    }
    teeny_st_close(f);
    size_t n, nu;
    float *before_u = read_params(u.g, &nu, 0);
    TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_graph_load(u.g, optu, path));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "fc2.weight"));
    float *after_u = read_params(u.g, &nu, 0);
    ck_assert_int_eq(memcmp(before_u, after_u, nu * sizeof *before_u), 0);
    TH_OK(ctx, teeny_graph_load(t2.g, opt2, path));
    float *pa = read_params(t.g, &n, 0), *pb = read_params(t2.g, &nu, 0);
    ck_assert_uint_eq(n, nu);
    ck_assert_int_eq(memcmp(pa, pb, n * sizeof *pa), 0);
    for (int i = 0; i < teeny_optimizer_state_count(opt); i++) {
        teeny_tensor *sa, *sb;
        TH_OK(ctx, teeny_optimizer_state(opt, i, NULL, &sa));
        TH_OK(ctx, teeny_optimizer_state(opt2, i, NULL, &sb));
        float *va = th_read(sa), *vb = th_read(sb);
        ck_assert_int_eq(memcmp(va, vb, (size_t)teeny_tensor_numel(sa) * sizeof *va), 0);
        free(va);
        free(vb);
    }
    float la, lb;
    TH_OK(ctx, teeny_plan_forward(t.plan[0]));
    TH_OK(ctx, teeny_plan_read_loss(t.plan[0], &la));
    TH_OK(ctx, teeny_plan_forward(t2.plan[0]));
    TH_OK(ctx, teeny_plan_read_loss(t2.plan[0], &lb));
    ck_assert_msg(la == lb, "loaded tied graph: loss %.9g, saved one %.9g", lb, la);
    unlink(path);
    free(before_u);
    free(after_u);
    free(pa);
    free(pb);
    teeny_optimizer_destroy(opt);
    teeny_optimizer_destroy(opt2);
    teeny_optimizer_destroy(optu);
    tied_free(&t);
    tied_free(&t2);
    tied_free(&u);
}
END_TEST

/* Bad ties: exact statuses, and nothing changes. */
START_TEST(test_graph_tied_errors)
{
    teeny_ctx *ctx = th_ctx();
    tied_net t;
    build_tied_net(&t, 46, 0);
    teeny_graph *g = t.g;
    int n = teeny_graph_param_count(g);
    size_t total, total2;
    float *before = read_params(g, &total, 0);
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_graph_tie_param(NULL, "fc2.weight", "fc1.weight"));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_tie_param(g, NULL, "fc1.weight"));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_tie_param(g, "fc2.weight", NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_tie_param(g, "fc9.weight", "fc1.weight"));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "fc9.weight"));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_tie_param(g, "fc2.weight", "fc1.weigh"));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_tie_param(g, "fc1.weight", "fc1.weight"));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_graph_tie_param(g, "fc2.bias", "fc1.weight"));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_graph_tie_param(g, "head.weight", "head_b.bias"));
    ck_assert_int_eq(teeny_graph_param_count(g), n);
    /* after a tie: the tied name is gone, an owner cannot be tied, the internal calls agree */
    TH_OK(ctx, teeny_graph_tie_param(g, "fc2.weight", "fc1.weight"));
    ck_assert_int_eq(teeny_graph_param_count(g), n - 1);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_tie_param(g, "fc2.weight", "fc3.weight"));
    TH_STATUS(ctx, TEENY_ERR_STATE, teeny_graph_tie_param(g, "fc1.weight", "fc3.weight"));
    TH_STATUS(ctx, TEENY_ERR_STATE, teeny__graph_param_tie(g, t.fc[1], 0, t.fc[2], 0));
    TH_STATUS(ctx, TEENY_ERR_STATE, teeny__graph_slot_alias(g, t.fc[1], 0, 0, "renamed"));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny__graph_param_tie(g, t.fc[1], 2, t.fc[0], 0));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny__graph_param_tie(g, t.x, 0, t.fc[0], 0));
    /* tying to a tied slot shares its owner's parameter */
    TH_OK(ctx, teeny__graph_param_tie(g, t.fc[2], 0, t.fc[1], 0));
    ck_assert_int_eq(teeny_graph_param_count(g), n - 2);
    teeny_tensor *w1, *w3 = NULL;
    tied_param(g, "fc1.weight", &w1, NULL);
    char buf[128];
    ck_assert_str_eq(teeny__graph_slot_name(g, t.fc[2], 0, 0, buf, sizeof buf), "fc1.weight");
    ck_assert_int_eq(teeny__graph_param_root(g, t.fc[2], 0).node, t.fc[0]);
    /* freezing through a tied slot freezes the shared parameter */
    TH_OK(ctx, teeny__graph_param_freeze(g, t.fc[1], 0, 1));
    tied_compile(&t, 2);
    tied_param(g, "fc1.weight", NULL, &w3);
    ck_assert_ptr_null(w3);
    /* a plan exists: no more ties */
    TH_STATUS(ctx, TEENY_ERR_STATE, teeny_graph_tie_param(g, "fc2.bias", "fc1.bias"));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "before compiling"));
    ck_assert_int_eq(teeny_graph_param_count(g), n - 2);
    float *after = read_params(g, &total2, 0);
    ck_assert_uint_eq(total2, total - 2 * 36);
    tied_free(&t);
    free(before);
    free(after);
}
END_TEST

/* Phase 2 on the tied net: the latest use of the shared weight defines its
 * gradient, the other goes through a temporary numbered after the values';
 * a tied slot gets no gradient tensor of its own. */
START_TEST(test_graph_tied_phase_backward)
{
    teeny_ctx *ctx = th_ctx();
    tied_net t;
    teeny__backward bw;
    teeny_plan *p;
    build_tied_net(&t, 47, 1);
    TH_OK(ctx, teeny__plan_alloc(t.g, 2, 1, t.loss[0], 1, &p));
    TH_OK(ctx, teeny__compile_shapes(p));
    TH_OK(ctx, teeny__compile_backward(p, &bw));
    for (int w = 0; w < 2; w++) {
        teeny__contrib c1 = bw.pcontrib[t.fc[0] * TEENY__OP_MAX_SLOTS + w];
        teeny__contrib c2 = bw.pcontrib[t.fc[1] * TEENY__OP_MAX_SLOTS + w];
        teeny__contrib c3 = bw.pcontrib[t.fc[2] * TEENY__OP_MAX_SLOTS + w];
        ck_assert_int_eq(c2.kind, TEENY__CONTRIB_GRAD);
        ck_assert_int_eq(c1.kind, TEENY__CONTRIB_TEMP);
        ck_assert_int_eq(c1.temp, bw.n_temps - 2 + w); /* after the values' temporaries, in slot order */
        ck_assert_int_eq(c3.kind, TEENY__CONTRIB_NONE);  /* fc3 does not reach this loss */
        ck_assert(bw.pwritten[t.fc[0] * TEENY__OP_MAX_SLOTS + w]);
        ck_assert_ptr_null(t.g->nodes[t.fc[1]].param_grad[w]);
        ck_assert_ptr_nonnull(t.g->nodes[t.fc[0]].param_grad[w]);
    }
    teeny__backward_free(&bw);
    teeny__plan_free(p);
    tied_free(&t);
}
END_TEST

/* conv2d_act (first, then SiLU) -> global avgpool -> linear ->
 * cross-entropy, or the same with separate activation nodes (fused 0): the
 * same parameters, in the same order, from the same seed. first_ex: the
 * first activation with parameters (teeny_graph_conv2d_act_ex), else first. */
static void build_conv_act_net_ex(net *m, uint64_t seed, int fused, teeny_act first, const teeny_act_params *first_ex)
{
    teeny_ctx *ctx = th_ctx();
    teeny_conv2d_params p3 = TEENY_CONV2D_PARAMS_INIT;
    teeny_node a, b, c;
    p3.pad[0] = p3.pad[1] = 1;
    m->x_ndim = 4;
    m->classes = 3;
    int64_t xs[4] = {-1, 2, 5, 5};
    TH_OK(ctx, teeny_graph_create(ctx, seed, &m->g));
    TH_OK(ctx, teeny_graph_input(m->g, "x", 4, xs, &m->x));
    TH_OK(ctx, teeny_graph_labels(m->g, "labels", &m->labels));
    const teeny_act acts[2] = {first, TEENY_ACT_SILU};
    a = m->x;
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "conv%d", i + 1);
        const teeny_act_params *ex = i == 0 ? first_ex : NULL;
        if (fused && ex) {
            TH_OK(ctx, teeny_graph_conv2d_act_ex(m->g, name, a, 4, 3, 3, &p3, 1, ex, &b));
        } else if (fused) {
            TH_OK(ctx, teeny_graph_conv2d_act(m->g, name, a, 4, 3, 3, &p3, 1, acts[i], &b));
        } else {
            TH_OK(ctx, teeny_graph_conv2d(m->g, name, a, 4, 3, 3, &p3, 1, &c));
            if (ex)
                TH_OK(ctx, teeny_graph_activation_ex(m->g, NULL, c, ex, &b));
            else
                TH_OK(ctx, teeny_graph_activation(m->g, NULL, c, acts[i], &b));
        }
        a = b;
    }
    TH_OK(ctx, teeny_graph_global_avgpool(m->g, "gap", a, &b));
    TH_OK(ctx, teeny_graph_linear(m->g, "fc", b, m->classes, 1, &c));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(m->g, "loss", c, m->labels, &m->loss));
}

static void build_conv_act_net(net *m, uint64_t seed, int fused, teeny_act first)
{
    build_conv_act_net_ex(m, seed, fused, first, NULL);
}

/* Every parameter gradient of the fused net f against the two-node net
 * s (after both backwards), to 1e-5 of s's largest, which is not 0. */
static void expect_grads_close(const net *f, const net *s, const char *what)
{
    size_t nf, ns;
    float *gf = read_params(f->g, &nf, 1), *gs = read_params(s->g, &ns, 1), big = 0;
    ck_assert_uint_eq(nf, ns);
    for (size_t i = 0; i < ns; i++)
        big = fmaxf(big, fabsf(gs[i]));
    ck_assert_msg(big > 0, "%s: no gradient", what);
    for (size_t i = 0; i < ns; i++)
        ck_assert_msg(fabsf(gf[i] - gs[i]) <= 1e-5f * big, "%s: gradient %zu: %.9g fused, %.9g as two nodes", what, i,
                      gf[i], gs[i]);
    free(gf);
    free(gs);
}

/* teeny_graph_conv2d_act: matches the two nodes to rounding (the loss, and
 * in training every gradient), in inference with one launch fewer for each
 * activation and in training with the same launches; its gradients by
 * finite differences (SiLU only: ReLU's kink moves finite differences by
 * more than the tolerance, the two nodes' too); act outside NONE, RELU,
 * SILU refused. */
START_TEST(test_graph_conv_act)
{
    teeny_ctx *ctx = th_ctx();
    net f, s;
    build_conv_act_net(&f, 77, 1, TEENY_ACT_RELU);
    build_conv_act_net(&s, 77, 0, TEENY_ACT_RELU);
    for (int training = 0; training < 2; training++) {
        teeny_plan *pf = compile(&f, 3, training, 1), *ps = compile(&s, 3, training, 1);
        int ff, fb, sf, sb;
        TH_OK(ctx, teeny_plan_launches(pf, &ff, &fb));
        TH_OK(ctx, teeny_plan_launches(ps, &sf, &sb));
        ck_assert_int_eq(ff, training ? sf : sf - 2);
        ck_assert_int_eq(fb, sb);
        feed(pf, &f, 3, 5);
        feed(ps, &s, 3, 5);
        float lf = loss_of(pf), ls = loss_of(ps);
        ck_assert_msg(fabsf(lf - ls) <= 1e-5f * fabsf(ls), "training %d: loss %.9g fused, %.9g as two nodes", training,
                      lf, ls);
        if (training) {
            TH_OK(ctx, teeny_plan_backward(pf));
            TH_OK(ctx, teeny_plan_backward(ps));
            expect_grads_close(&f, &s, "conv2d_act");
        }
        teeny_plan_destroy(pf);
        teeny_plan_destroy(ps);
    }
    teeny_graph_destroy(f.g);
    build_conv_act_net(&f, 78, 1, TEENY_ACT_SILU);
    gradcheck(&f, "conv2d_act");
    teeny_node y = 0;
    ck_assert_int_eq(teeny_graph_conv2d_act(f.g, "bad", f.x, 4, 3, 3, NULL, 1, TEENY_ACT_TANH, &y), TEENY_ERR_ARG);
    ck_assert_int_eq(y, -1);
    ck_assert_int_eq(teeny_graph_conv2d_act(NULL, "bad", 0, 4, 3, 3, NULL, 1, TEENY_ACT_RELU, &y), TEENY_ERR_ARG);
    teeny_graph_destroy(f.g);
    teeny_graph_destroy(s.g);
}
END_TEST

/* teeny_graph_conv2d_act_ex: HardSwish and Clip to [0, 6] in the
 * convolution's store (one launch fewer in inference) where the tuning
 * has the CPU GEMM ("cpu"), a pass after it elsewhere ("generic": the
 * GPUs' epilogue keeps ReLU and SiLU only), Clip to other bounds and
 * LeakyReLU with its slope as a pass after it (the same launches); both
 * profiles on every device that can take them; each matches the convolution and teeny_graph_activation_ex's
 * node to rounding, its loss in inference and every gradient in training.
 * The inputs scaled by 8 put the first convolution's outputs (std ~4.6)
 * across both of Clip's bounds and HardSwish's kinks at -3 and 3. NULL act
 * and an activation past teeny_act are refused. */
static void feed_scaled(teeny_plan *p, const net *m, int64_t batch, uint64_t seed, float scale)
{
    teeny_tensor *tx;
    feed(p, m, batch, seed);
    TH_OK(th_ctx(), teeny_plan_tensor(p, m->x, &tx));
    size_t n = (size_t)teeny_tensor_numel(tx);
    float *x = th_malloc(n * sizeof *x);
    TH_OK(th_ctx(), teeny_tensor_read(tx, x, n));
    for (size_t i = 0; i < n; i++)
        x[i] *= scale;
    TH_OK(th_ctx(), teeny_tensor_write(tx, x, n));
    free(x);
}

START_TEST(test_graph_conv_act_ex)
{
    teeny_ctx *ctx = th_ctx();
    teeny_act_params acts[4] = {teeny_act_defaults(TEENY_ACT_HARDSWISH), teeny_act_defaults(TEENY_ACT_CLIP),
                                teeny_act_defaults(TEENY_ACT_CLIP), teeny_act_defaults(TEENY_ACT_LEAKY_RELU)};
    const int in_store[4] = {1, 1, 0, 0};
    acts[1].alpha = 0.0f;
    acts[1].beta = 6.0f;
    acts[2].alpha = -0.25f;
    acts[2].beta = 0.5f;
    acts[3].alpha = 0.3f;
    static const char *const profiles[2] = {"cpu", "generic"};
    for (int c = 0; c < 2 * 4; c++) {
        const int pi = c / 4, a = c % 4;
        net f, s;
        if (a == 0 && !th_profile(profiles[pi])) { /* a device whose limits the profile passes: in the log */
            c += 3;
            continue;
        }
        ck_assert_int_eq(ctx->tune.conv.cpu_rows > 0, pi == 0);
        build_conv_act_net_ex(&f, 91, 1, TEENY_ACT_NONE, &acts[a]);
        build_conv_act_net_ex(&s, 91, 0, TEENY_ACT_NONE, &acts[a]);
        for (int training = 0; training < 2; training++) {
            teeny_plan *pf = compile(&f, 3, training, 1), *ps = compile(&s, 3, training, 1);
            int ff, fb, sf, sb;
            TH_OK(ctx, teeny_plan_launches(pf, &ff, &fb));
            TH_OK(ctx, teeny_plan_launches(ps, &sf, &sb));
            /* in inference the second convolution's SiLU is in its store; in training the same launches */
            ck_assert_msg(ff == (training ? sf : sf - 1 - (pi == 0 && in_store[a])), "%s: act %d training %d: %d "
                          "launches fused, %d as two nodes", profiles[pi], a, training, ff, sf);
            ck_assert_int_eq(fb, sb);
            feed_scaled(pf, &f, 3, 5, 8.0f);
            feed_scaled(ps, &s, 3, 5, 8.0f);
            float lf = loss_of(pf), ls = loss_of(ps);
            ck_assert_msg(fabsf(lf - ls) <= 1e-6f * fabsf(ls), "act %d training %d: loss %.9g fused, %.9g as two nodes",
                          a, training, lf, ls);
            if (training) {
                TH_OK(ctx, teeny_plan_backward(pf));
                TH_OK(ctx, teeny_plan_backward(ps));
                char what[48];
                snprintf(what, sizeof what, "%s, act %d", profiles[pi], a);
                expect_grads_close(&f, &s, what);
            }
            teeny_plan_destroy(pf);
            teeny_plan_destroy(ps);
        }
        teeny_graph_destroy(f.g);
        teeny_graph_destroy(s.g);
    }
    th_profile(NULL);
    net f;
    teeny_node y = 0;
    teeny_act_params bad = teeny_act_defaults(TEENY_ACT_RELU);
    bad.act = (teeny_act)TEENY__ACT_COUNT;
    build_conv_act_net(&f, 92, 1, TEENY_ACT_RELU);
    ck_assert_int_eq(teeny_graph_conv2d_act_ex(f.g, "bad", f.x, 4, 3, 3, NULL, 1, NULL, &y), TEENY_ERR_ARG);
    ck_assert_int_eq(y, -1);
    y = 0;
    ck_assert_int_eq(teeny_graph_conv2d_act_ex(f.g, "bad", f.x, 4, 3, 3, NULL, 1, &bad, &y), TEENY_ERR_ARG);
    ck_assert_int_eq(y, -1);
    teeny_graph_destroy(f.g);
}
END_TEST

/* teeny_plan_options.frozen_params: the same bits as the plan as written,
 * fewer launches a forward where convolutions pack their weights (CPUs),
 * teeny_plan_refresh after a weight changes, and the statuses. */
static teeny_plan *compile_frozen(const net *m, int64_t batch)
{
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan_options po = TEENY_PLAN_OPTIONS_INIT;
    teeny_plan *p = NULL;
    pp.batch = batch;
    pp.training = 0;
    pp.loss = m->loss;
    po.frozen_params = 1;
    TH_OK(th_ctx(), teeny_graph_compile_ex(m->g, &pp, &po, &p));
    return p;
}

/* One round of test_graph_frozen_params at the current hooks: a frozen
 * plan against the plan as written, over two weights of conv1 (the
 * frozen one refreshed); saved: the launches a forward it should save. */
static void frozen_round(net *m, int saved)
{
    teeny_ctx *ctx = th_ctx();
    teeny_plan *plain = compile(m, 2, 0, 1), *frozen = compile_frozen(m, 2);
    int fp, ff, bp, bf;
    TH_OK(ctx, teeny_plan_launches(plain, &fp, &bp));
    TH_OK(ctx, teeny_plan_launches(frozen, &ff, &bf));
    ck_assert_int_eq(bp, 0);
    ck_assert_int_eq(bf, 0);
    ck_assert_int_eq(ff, fp - saved);
    for (int round = 0; round < 2; round++) {
        feed(plain, m, 2, 7 + (uint64_t)round);
        feed(frozen, m, 2, 7 + (uint64_t)round);
        float lp = loss_of(plain), lf = loss_of(frozen);
        ck_assert_msg(memcmp(&lp, &lf, sizeof lp) == 0, "round %d: frozen loss %.9g, as written %.9g", round, lf, lp);
        /* a new conv1 weight: the plan as written reads it, the frozen one after a refresh */
        teeny_tensor *w = NULL;
        const char *name = NULL;
        for (int i = 0; i < teeny_graph_param_count(m->g) && !w; i++) {
            TH_OK(ctx, teeny_graph_param(m->g, i, &name, &w, NULL));
            if (strcmp(name, "conv1.weight"))
                w = NULL;
        }
        ck_assert_ptr_nonnull(w);
        size_t n = (size_t)teeny_tensor_numel(w);
        float *v = th_malloc(n * sizeof *v);
        th_rng r = th_rng_make(100 + (uint64_t)round);
        th_fill_normal(&r, v, n, 0, 0.5);
        TH_OK(ctx, teeny_tensor_write(w, v, n));
        free(v);
        TH_OK(ctx, teeny_plan_refresh(frozen));
    }
    TH_OK(ctx, teeny_plan_refresh(plain)); /* nothing to derive: OK */
    teeny_plan_destroy(plain);
    teeny_plan_destroy(frozen);
}

START_TEST(test_graph_frozen_params)
{
    teeny_ctx *ctx = th_ctx();
    net m;
    build_conv_net(&m, 41);
    /* by the profile: on CPUs both convolutions pack their weights at compile */
    int cpu = ctx->tune.profile->conv.cpu_rows > 0;
    th_hook(TEENY__HOOK_CONV_WINO, -1);
    frozen_round(&m, cpu ? 2 : 0);
    /* conv1 by Winograd: its weight transform too (conv2 is 1x1) */
    th_hook(TEENY__HOOK_CONV_WINO, 1);
    frozen_round(&m, cpu ? 3 : 1);
    ck_assert_int_gt(th_hook_value(TEENY__HOOK_CONV_WINO_TAKEN), 0);
    th_hook(TEENY__HOOK_CONV_WINO, 0);
    int fp;
    {
        teeny_plan *plain = compile(&m, 2, 0, 1);
        TH_OK(ctx, teeny_plan_launches(plain, &fp, NULL));
        teeny_plan_destroy(plain);
    }
    ck_assert_int_eq(teeny_plan_refresh(NULL), TEENY_ERR_ARG);

    /* statuses: nothing compiled, *out NULL */
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan_options po = TEENY_PLAN_OPTIONS_INIT;
    teeny_plan *p = (teeny_plan *)&po;
    pp.loss = m.loss;
    po.frozen_params = 1; /* with training 1 */
    ck_assert_int_eq(teeny_graph_compile_ex(m.g, &pp, &po, &p), TEENY_ERR_ARG);
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "inference"));
    pp.training = 0;
    po.frozen_params = 2;
    p = (teeny_plan *)&po;
    ck_assert_int_eq(teeny_graph_compile_ex(m.g, &pp, &po, &p), TEENY_ERR_ARG);
    ck_assert_ptr_null(p);
    po.frozen_params = 1;
    po.struct_size = sizeof(size_t);
    ck_assert_int_eq(teeny_graph_compile_ex(m.g, &pp, &po, &p), TEENY_ERR_ARG);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(teeny_graph_compile_ex(NULL, &pp, NULL, &p), TEENY_ERR_ARG);
    ck_assert_int_eq(teeny_graph_compile_ex(m.g, NULL, NULL, &p), TEENY_ERR_ARG);
    ck_assert_int_eq(teeny_graph_compile_ex(m.g, &pp, NULL, NULL), TEENY_ERR_ARG);
    TH_OK(ctx, teeny_graph_compile_ex(m.g, &pp, NULL, &p)); /* NULL options: teeny_graph_compile's plan */
    int fn;
    TH_OK(ctx, teeny_plan_launches(p, &fn, NULL));
    ck_assert_int_eq(fn, fp);
    teeny_plan_destroy(p);
    teeny_graph_destroy(m.g);
}
END_TEST

Suite *suite_graph(void)
{
    Suite *s = suite_create("graph");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_test(fwd, test_graph_batchnorm_modes);
    tcase_add_test(fwd, test_graph_memory_plan);
    tcase_add_test(fwd, test_graph_no_setup_after_compile);
    tcase_add_test(bwd, test_graph_gradients);
    tcase_add_test(bwd, test_graph_gradcheck_sensitivity);
    tcase_add_test(bwd, test_graph_shared_heads);
    if (!th_small()) {
        tcase_add_test(bwd, test_graph_determinism);
        tcase_add_test(bwd, test_graph_trains_separable);
    }
    tcase_add_test(err, test_graph_errors);
    tcase_add_test(err, test_graph_null_arguments);
    tcase_add_test(err, test_graph_node_info);
    tcase_add_test(err, test_graph_error_routing);
    tcase_add_test(bwd, test_graph_concat_chains);
    tcase_add_test(err, test_graph_checkpoints);
    tcase_add_test(err, test_graph_checkpoint_counters);
    tcase_add_test(err, test_graph_checkpoint_optimizer_keys);
    tcase_add_test(fwd, test_graph_example_memory);
    tcase_add_test(fwd, test_graph_phase_shapes);
    tcase_add_test(bwd, test_graph_phase_backward);
    tcase_add_loop_test(fwd, test_graph_phase_memory_plan, 0, 2);
    tcase_add_test(fwd, test_graph_phase_record);
    tcase_add_test(bwd, test_graph_grad_alias);
    tcase_add_test(bwd, test_graph_tied_params);
    tcase_add_test(bwd, test_graph_tied_gradcheck);
    tcase_add_test(err, test_graph_tied_checkpoint);
    tcase_add_test(err, test_graph_tied_errors);
    tcase_add_test(bwd, test_graph_tied_phase_backward);
    tcase_add_test(fwd, test_graph_frozen_params);
    tcase_add_test(bwd, test_graph_conv_act);
    tcase_add_test(bwd, test_graph_conv_act_ex);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
