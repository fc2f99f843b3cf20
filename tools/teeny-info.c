/*
 * teeny-info -- list OpenCL platforms and devices with the capabilities
 * teenycl uses, mark the default device, and run a quick self-test (build
 * and run one kernel, check its result) on a chosen device.
 *
 * With --check it qualifies a device instead: every kernel family
 * (cl/<family>.cl) is built cold and runs one small case against a host
 * reference written here (tools cannot link tests/ref), each family in its
 * own child process with a time limit, so that a driver whose compiler
 * aborts or hangs on one family still gets the others checked and the
 * report names the family and the phase (building or running). The table
 * gives per family the cold build time (the op calls, which compile the
 * family's programs, with the queue held back so that nothing runs yet),
 * the first run's time (which on PoCL and Mesa includes the code generation
 * those drivers defer to the first launch), the largest error against the
 * reference, and pass/FAIL; the failures follow, one line each.
 *
 * Usage: teeny-info [--device SPEC] [--no-self-test]
 *        teeny-info --check [SPEC] [--timeout SECONDS] [--only FAMILY,...]
 *        teeny-info --onnx MODEL.onnx [--device SPEC]   (the declared inputs and
 *            outputs, then each node: supported, or why not)
 * --help and --version, and the command-line errors, as every teenycl
 * program has them (tools/cli.h). A malformed --timeout (not a whole
 * decimal number in 1..86400, tools/args.h) or a name in --only that is
 * not a family exits with status 2, the usage errors' status, before
 * anything runs.
 *
 * Test hooks of --check (for tests/test_tools.sh; they make a healthy
 * driver look broken): TEENY_CHECK_CRASH=FAMILY raises SIGABRT in that
 * family's child when it starts building; TEENY_CHECK_HANG=FAMILY makes it
 * sleep there until the timeout kills it.
 */
/* fork, pipes, poll, clock_gettime, setenv: POSIX (check-install builds
 * this file with plain -std=c11, without the Makefile's -D) */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "onnx_info.h"
#include "teenycl.h"
#include "teenycl_onnx.h"

static int self_test(const char *spec)
{
    enum { N = 1000 };
    static float a[N], b[N], y[N];
    teeny_ctx *ctx = NULL;
    teeny_tensor *ta = NULL, *tb = NULL, *ty = NULL;
    int64_t shape[1] = {N};
    int bad = 0;
    teeny_status st = teeny_ctx_create(spec, &ctx);
    if (st != TEENY_OK) {
        fprintf(stderr, "self-test: %s: %s\n", teeny_status_name(st), teeny_last_error(NULL));
        return 1;
    }
    for (int i = 0; i < N; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = (float)(N - i);
    }
    if ((st = teeny_tensor_create(ctx, 1, shape, &ta)) == TEENY_OK &&
        (st = teeny_tensor_create(ctx, 1, shape, &tb)) == TEENY_OK &&
        (st = teeny_tensor_create(ctx, 1, shape, &ty)) == TEENY_OK &&
        (st = teeny_tensor_write(ta, a, N)) == TEENY_OK && (st = teeny_tensor_write(tb, b, N)) == TEENY_OK &&
        (st = teeny_tensor_fill(ty, NAN)) == TEENY_OK && (st = teeny_add(ctx, ta, tb, ty)) == TEENY_OK &&
        (st = teeny_tensor_read(ty, y, N)) == TEENY_OK) {
        for (int i = 0; i < N; i++)
            bad += y[i] != a[i] + b[i];
    }
    if (st != TEENY_OK)
        fprintf(stderr, "self-test on %s: %s: %s\n", teeny_ctx_device_name(ctx), teeny_status_name(st),
                teeny_last_error(ctx));
    else
        printf("self-test on %s: built and ran ew_add on %d elements: %s\n", teeny_ctx_device_name(ctx), N,
               bad ? "WRONG RESULTS" : "ok");
    teeny_tensor_destroy(ta);
    teeny_tensor_destroy(tb);
    teeny_tensor_destroy(ty);
    teeny_ctx_destroy(ctx);
    return st != TEENY_OK || bad;
}

/* ======================================================================
 * --check: one child process per kernel family
 * ==================================================================== */

/* Errors are max |y - ref| / max(1, max |ref|) per output: absolute for
 * values of order 1 (all the cases below), relative beyond. fp32 sums of
 * at most a few dozen terms stay far below this. */
#define CHECK_TOLERANCE 1e-4

#define MAX_TENSORS 32
#define MAX_OUTPUTS 8

/* One case's tensors and the outputs it wants compared. */
typedef struct {
    teeny_ctx *ctx;
    teeny_status st;     /* first failure; later calls are skipped */
    const char *failed;  /* the call that failed */
    teeny_tensor *tensors[MAX_TENSORS];
    int n_tensors;
    struct {
        teeny_tensor *t;
        const double *ref;
        const char *name;
    } outs[MAX_OUTPUTS];
    int n_outs;
    uint32_t seed;
} check_run;

/* Run expr unless an earlier call of the case failed; remember the first failure. */
#define CALL(r, expr)                                   \
    do {                                                \
        if ((r)->st == TEENY_OK) {                      \
            teeny_status st_ = (expr);                  \
            if (st_ != TEENY_OK) {                      \
                (r)->st = st_;                          \
                (r)->failed = #expr;                    \
            }                                           \
        }                                               \
    } while (0)

/* Deterministic inputs in [-1, 1) (an LCG: the same on every host). */
static float uniform(check_run *r)
{
    r->seed = r->seed * 1664525u + 1013904223u;
    return (float)(r->seed >> 8) / (float)(1u << 23) - 1.0f;
}

static void fill_uniform(check_run *r, float *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = uniform(r);
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* A tensor holding data, or NaN everywhere (an output: an element the
 * device never writes then shows up as an error). NULL after a failure. */
static teeny_tensor *tensor(check_run *r, int ndim, const int64_t *shape, const float *data)
{
    teeny_tensor *t = NULL;
    if (r->n_tensors == MAX_TENSORS && r->st == TEENY_OK) {
        r->st = TEENY_ERR_STATE;
        r->failed = "too many tensors in one case (teeny-info bug)";
    }
    CALL(r, teeny_tensor_create(r->ctx, ndim, shape, &t));
    if (r->st != TEENY_OK)
        return NULL;
    r->tensors[r->n_tensors++] = t;
    if (data)
        CALL(r, teeny_tensor_write(t, data, (size_t)numel_of(ndim, shape)));
    else
        CALL(r, teeny_tensor_fill(t, NAN));
    return t;
}

static teeny_tensor *tensor_i32(check_run *r, int ndim, const int64_t *shape, const int32_t *data)
{
    teeny_tensor *t = NULL;
    CALL(r, teeny_tensor_create_i32(r->ctx, ndim, shape, &t));
    if (r->st != TEENY_OK)
        return NULL;
    r->tensors[r->n_tensors++] = t;
    CALL(r, teeny_tensor_write_i32(t, data, (size_t)numel_of(ndim, shape)));
    return t;
}

/* Compare t with ref (numel values) once the case has run. */
static void expect(check_run *r, const char *name, teeny_tensor *t, const double *ref)
{
    if (r->st != TEENY_OK || r->n_outs == MAX_OUTPUTS)
        return;
    r->outs[r->n_outs].t = t;
    r->outs[r->n_outs].ref = ref;
    r->outs[r->n_outs].name = name;
    r->n_outs++;
}

/* ---- the cases: inputs, the calls, a float64 host reference ---- */

static void case_common(check_run *r)
{
    /* common.cl's activation helpers, through the element-wise kernels */
    enum { N = 2 * 3 * 5 * 5 };
    static float x[N], dy[N];
    static double relu[N], silu[N], dsilu[N];
    int64_t shape[4] = {2, 3, 5, 5};
    fill_uniform(r, x, N);
    fill_uniform(r, dy, N);
    for (int i = 0; i < N; i++) {
        double v = 4.0 * x[i], s = 1.0 / (1.0 + exp(-v));
        x[i] = (float)v;
        relu[i] = v > 0 ? v : 0;
        silu[i] = v * s;
        dsilu[i] = dy[i] * s * (1.0 + v * (1.0 - s));
    }
    teeny_tensor *tx = tensor(r, 4, shape, x), *tdy = tensor(r, 4, shape, dy);
    teeny_tensor *tr = tensor(r, 4, shape, NULL), *ts = tensor(r, 4, shape, NULL), *td = tensor(r, 4, shape, NULL);
    CALL(r, teeny_activation_forward(r->ctx, TEENY_ACT_RELU, tx, tr));
    CALL(r, teeny_activation_forward(r->ctx, TEENY_ACT_SILU, tx, ts));
    CALL(r, teeny_activation_backward(r->ctx, TEENY_ACT_SILU, tx, tdy, td));
    expect(r, "relu", tr, relu);
    expect(r, "silu", ts, silu);
    expect(r, "silu backward", td, dsilu);
}

static void case_elementwise(check_run *r)
{
    enum { N = 2 * 3 * 5 * 5 };
    static float a[N], b[N];
    static double sum[N], prod[N];
    int64_t shape[4] = {2, 3, 5, 5};
    fill_uniform(r, a, N);
    fill_uniform(r, b, N);
    for (int i = 0; i < N; i++) {
        sum[i] = (double)a[i] + b[i];
        prod[i] = (double)a[i] * b[i];
    }
    teeny_tensor *ta = tensor(r, 4, shape, a), *tb = tensor(r, 4, shape, b);
    teeny_tensor *ts = tensor(r, 4, shape, NULL), *tp = tensor(r, 4, shape, NULL);
    CALL(r, teeny_add(r->ctx, ta, tb, ts));
    CALL(r, teeny_mul(r->ctx, ta, tb, tp));
    expect(r, "add", ts, sum);
    expect(r, "mul", tp, prod);
}

static void case_batchnorm(check_run *r)
{
    /* training forward on [2, 3, 4, 4]: batch statistics over B, H, W */
    enum { B = 2, C = 3, HW = 16, N = B * C * HW };
    static float x[N], w[C], bias[C], rm[C], rv[C];
    static double y[N], mean[C], rstd[C], new_rm[C], new_rv[C];
    const float momentum = 0.1f, eps = 1e-5f;
    int64_t xs[4] = {B, C, 4, 4}, cs[1] = {C};
    fill_uniform(r, x, N);
    fill_uniform(r, w, C);
    fill_uniform(r, bias, C);
    fill_uniform(r, rm, C);
    for (int c = 0; c < C; c++)
        rv[c] = 1.0f + 0.5f * uniform(r);
    for (int c = 0; c < C; c++) {
        double s = 0, ss = 0;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < HW; i++)
                s += x[(b * C + c) * HW + i];
        mean[c] = s / (B * HW);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < HW; i++) {
                double d = x[(b * C + c) * HW + i] - mean[c];
                ss += d * d;
            }
        rstd[c] = 1.0 / sqrt(ss / (B * HW) + eps);
        new_rm[c] = (1 - momentum) * (double)rm[c] + momentum * mean[c];
        new_rv[c] = (1 - momentum) * (double)rv[c] + momentum * ss / (B * HW - 1);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < HW; i++) {
                int e = (b * C + c) * HW + i;
                y[e] = (x[e] - mean[c]) * rstd[c] * w[c] + bias[c];
            }
    }
    teeny_tensor *tx = tensor(r, 4, xs, x), *tw = tensor(r, 1, cs, w), *tb = tensor(r, 1, cs, bias);
    teeny_tensor *trm = tensor(r, 1, cs, rm), *trv = tensor(r, 1, cs, rv), *ty = tensor(r, 4, xs, NULL);
    teeny_tensor *tmean = tensor(r, 1, cs, NULL), *trstd = tensor(r, 1, cs, NULL);
    CALL(r, teeny_batchnorm_forward_train(r->ctx, tx, tw, tb, trm, trv, momentum, eps, ty, tmean, trstd));
    expect(r, "y", ty, y);
    expect(r, "save_mean", tmean, mean);
    expect(r, "save_rstd", trstd, rstd);
    expect(r, "running_mean", trm, new_rm);
    expect(r, "running_var", trv, new_rv);
}

static void case_conv2d(check_run *r)
{
    /* x [2, 3, 5, 5], w [4, 3, 3, 3], bias, padding 1: y [2, 4, 5, 5] */
    enum { B = 2, CI = 3, CO = 4, H = 5, W = 5, K = 3, PAD = 1 };
    static float x[B * CI * H * W], w[CO * CI * K * K], bias[CO];
    static double y[B * CO * H * W];
    int64_t xs[4] = {B, CI, H, W}, ws[4] = {CO, CI, K, K}, bs[1] = {CO}, ys[4] = {B, CO, H, W};
    teeny_conv2d_params p = TEENY_CONV2D_PARAMS_INIT;
    p.pad[0] = p.pad[1] = PAD;
    fill_uniform(r, x, B * CI * H * W);
    fill_uniform(r, w, CO * CI * K * K);
    fill_uniform(r, bias, CO);
    for (int b = 0; b < B; b++)
        for (int co = 0; co < CO; co++)
            for (int oh = 0; oh < H; oh++)
                for (int ow = 0; ow < W; ow++) {
                    double s = bias[co];
                    for (int ci = 0; ci < CI; ci++)
                        for (int kh = 0; kh < K; kh++)
                            for (int kw = 0; kw < K; kw++) {
                                int ih = oh - PAD + kh, iw = ow - PAD + kw;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                    s += (double)x[((b * CI + ci) * H + ih) * W + iw] *
                                         w[((co * CI + ci) * K + kh) * K + kw];
                            }
                    y[((b * CO + co) * H + oh) * W + ow] = s;
                }
    teeny_tensor *tx = tensor(r, 4, xs, x), *tw = tensor(r, 4, ws, w), *tb = tensor(r, 1, bs, bias);
    teeny_tensor *ty = tensor(r, 4, ys, NULL);
    CALL(r, teeny_conv2d_forward(r->ctx, &p, tx, tw, tb, ty));
    expect(r, "y", ty, y);
}

static void case_attention(check_run *r)
{
    /* q, k, v [1, 8, 16]: o = softmax(q k^T / 4) v, lse per row */
    enum { NQ = 8, NK = 8, D = 16 };
    static float q[NQ * D], k[NK * D], v[NK * D];
    static double o[NQ * D], lse[NQ];
    const float scale = 0.25f;
    int64_t s3[3] = {1, NQ, D}, s2[2] = {1, NQ};
    fill_uniform(r, q, NQ * D);
    fill_uniform(r, k, NK * D);
    fill_uniform(r, v, NK * D);
    for (int i = 0; i < NQ; i++) {
        double logit[NK], mx = -INFINITY, sum = 0;
        for (int j = 0; j < NK; j++) {
            logit[j] = 0;
            for (int d = 0; d < D; d++)
                logit[j] += (double)q[i * D + d] * k[j * D + d];
            logit[j] *= scale;
            mx = logit[j] > mx ? logit[j] : mx;
        }
        for (int j = 0; j < NK; j++)
            sum += exp(logit[j] - mx);
        lse[i] = mx + log(sum);
        for (int d = 0; d < D; d++) {
            double acc = 0;
            for (int j = 0; j < NK; j++)
                acc += exp(logit[j] - lse[i]) * v[j * D + d];
            o[i * D + d] = acc;
        }
    }
    teeny_tensor *tq = tensor(r, 3, s3, q), *tk = tensor(r, 3, s3, k), *tv = tensor(r, 3, s3, v);
    teeny_tensor *to = tensor(r, 3, s3, NULL), *tl = tensor(r, 2, s2, NULL);
    CALL(r, teeny_attention_forward(r->ctx, tq, tk, tv, scale, to, tl));
    expect(r, "o", to, o);
    expect(r, "lse", tl, lse);
}

static void case_psa(check_run *r)
{
    /* psa.cl's rearrangements: qkv [1, heads*4*kd, 2, 3] -> packed
     * [4, heads, N, kd], and o_lo, o_hi [heads, N, kd] -> out [1, heads*2*kd, 2, 3] */
    enum { HEADS = 2, KD = 2, N = 6, C = HEADS * 4 * KD, CV = HEADS * 2 * KD };
    static float qkv[C * N], lo[HEADS * N * KD], hi[HEADS * N * KD];
    static double packed[4 * HEADS * N * KD], merged[CV * N];
    int64_t qs[4] = {1, C, 2, 3}, ps[4] = {4, HEADS, N, KD}, hs[3] = {HEADS, N, KD}, ms[4] = {1, CV, 2, 3};
    fill_uniform(r, qkv, C * N);
    fill_uniform(r, lo, HEADS * N * KD);
    fill_uniform(r, hi, HEADS * N * KD);
    for (int sec = 0; sec < 4; sec++)
        for (int h = 0; h < HEADS; h++)
            for (int n = 0; n < N; n++)
                for (int j = 0; j < KD; j++)
                    packed[((sec * HEADS + h) * N + n) * KD + j] = qkv[(h * 4 * KD + sec * KD + j) * N + n];
    for (int h = 0; h < HEADS; h++)
        for (int j = 0; j < 2 * KD; j++)
            for (int n = 0; n < N; n++)
                merged[(h * 2 * KD + j) * N + n] =
                    j < KD ? lo[(h * N + n) * KD + j] : hi[(h * N + n) * KD + j - KD];
    teeny_tensor *tq = tensor(r, 4, qs, qkv), *tp = tensor(r, 4, ps, NULL);
    teeny_tensor *tlo = tensor(r, 3, hs, lo), *thi = tensor(r, 3, hs, hi), *tm = tensor(r, 4, ms, NULL);
    CALL(r, teeny_psa_pack_qkv(r->ctx, tq, HEADS, KD, tp));
    CALL(r, teeny_psa_merge_attn(r->ctx, tlo, thi, HEADS, tm));
    expect(r, "packed", tp, packed);
    expect(r, "merged", tm, merged);
}

static void case_pool(check_run *r)
{
    /* x [2, 3, 4, 4]: max pool 2x2 stride 2, average pool 3x3 stride 1 pad 1 */
    enum { P = 6, H = 4, W = 4, OH = 2, OW = 2 };
    static float x[P * H * W];
    static double mx[P * OH * OW], avg[P * H * W];
    int64_t xs[4] = {2, 3, H, W}, ms[4] = {2, 3, OH, OW};
    teeny_pool2d_params pm = TEENY_POOL2D_PARAMS_INIT, pa = TEENY_POOL2D_PARAMS_INIT;
    pa.kernel[0] = pa.kernel[1] = 3;
    pa.stride[0] = pa.stride[1] = 1;
    pa.pad[0] = pa.pad[1] = 1;
    fill_uniform(r, x, P * H * W);
    for (int p = 0; p < P; p++) {
        const float *xp = x + p * H * W;
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                double m = -INFINITY;
                for (int i = 0; i < 2; i++)
                    for (int j = 0; j < 2; j++)
                        m = xp[(2 * oh + i) * W + 2 * ow + j] > m ? xp[(2 * oh + i) * W + 2 * ow + j] : m;
                mx[(p * OH + oh) * OW + ow] = m;
            }
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++) {
                double s = 0;
                for (int i = h - 1; i <= h + 1; i++)
                    for (int j = w - 1; j <= w + 1; j++)
                        if (i >= 0 && i < H && j >= 0 && j < W)
                            s += xp[i * W + j];
                avg[(p * H + h) * W + w] = s / 9; /* count_include_pad */
            }
    }
    teeny_tensor *tx = tensor(r, 4, xs, x), *tm = tensor(r, 4, ms, NULL), *ta = tensor(r, 4, xs, NULL);
    CALL(r, teeny_maxpool2d_forward(r->ctx, &pm, tx, tm, NULL));
    CALL(r, teeny_avgpool2d_forward(r->ctx, &pa, tx, ta));
    expect(r, "max", tm, mx);
    expect(r, "avg", ta, avg);
}

static void case_linear(check_run *r)
{
    /* x [3, 5], w [4, 5], bias [4]: y = x w^T + bias */
    enum { N = 3, IN = 5, OUT = 4 };
    static float x[N * IN], w[OUT * IN], bias[OUT];
    static double y[N * OUT];
    int64_t xs[2] = {N, IN}, ws[2] = {OUT, IN}, bs[1] = {OUT}, ys[2] = {N, OUT};
    fill_uniform(r, x, N * IN);
    fill_uniform(r, w, OUT * IN);
    fill_uniform(r, bias, OUT);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OUT; o++) {
            double s = bias[o];
            for (int i = 0; i < IN; i++)
                s += (double)x[n * IN + i] * w[o * IN + i];
            y[n * OUT + o] = s;
        }
    teeny_tensor *tx = tensor(r, 2, xs, x), *tw = tensor(r, 2, ws, w), *tb = tensor(r, 1, bs, bias);
    teeny_tensor *ty = tensor(r, 2, ys, NULL);
    CALL(r, teeny_linear_forward(r->ctx, tx, tw, tb, ty));
    expect(r, "y", ty, y);
}

static void case_loss(check_run *r)
{
    /* logits [4, 5], labels [4]: mean softmax cross-entropy and the softmax */
    enum { N = 4, K = 5 };
    static float logits[N * K];
    static const int32_t labels[N] = {0, 3, 4, 1};
    static double loss[1], probs[N * K];
    int64_t ls[2] = {N, K}, ns[1] = {N}, one[1] = {1};
    fill_uniform(r, logits, N * K);
    loss[0] = 0;
    for (int n = 0; n < N; n++) {
        double mx = -INFINITY, sum = 0;
        for (int k = 0; k < K; k++)
            mx = logits[n * K + k] > mx ? logits[n * K + k] : mx;
        for (int k = 0; k < K; k++)
            sum += exp(logits[n * K + k] - mx);
        for (int k = 0; k < K; k++)
            probs[n * K + k] = exp(logits[n * K + k] - mx) / sum;
        loss[0] += (mx + log(sum) - logits[n * K + labels[n]]) / N;
    }
    teeny_tensor *tl = tensor(r, 2, ls, logits), *ty = tensor_i32(r, 1, ns, labels);
    teeny_tensor *tloss = tensor(r, 1, one, NULL), *tp = tensor(r, 2, ls, NULL);
    CALL(r, teeny_softmax_cross_entropy_forward(r->ctx, tl, ty, tloss, tp));
    expect(r, "loss", tloss, loss);
    expect(r, "probs", tp, probs);
}

static void case_concat(check_run *r)
{
    /* [2, 2, 3, 3] and [2, 3, 3, 3] along channels: [2, 5, 3, 3] */
    enum { B = 2, C1 = 2, C2 = 3, HW = 9 };
    static float a[B * C1 * HW], b[B * C2 * HW];
    static double y[B * (C1 + C2) * HW];
    int64_t as[4] = {B, C1, 3, 3}, bs[4] = {B, C2, 3, 3}, ys[4] = {B, C1 + C2, 3, 3};
    fill_uniform(r, a, B * C1 * HW);
    fill_uniform(r, b, B * C2 * HW);
    for (int n = 0; n < B; n++)
        for (int c = 0; c < C1 + C2; c++)
            for (int i = 0; i < HW; i++)
                y[(n * (C1 + C2) + c) * HW + i] = c < C1 ? a[(n * C1 + c) * HW + i] : b[(n * C2 + c - C1) * HW + i];
    teeny_tensor *ta = tensor(r, 4, as, a), *tb = tensor(r, 4, bs, b), *ty = tensor(r, 4, ys, NULL);
    const teeny_tensor *xs[2] = {ta, tb};
    CALL(r, teeny_concat_channels(r->ctx, 2, xs, ty));
    expect(r, "y", ty, y);
}

static void case_optim(check_run *r)
{
    /* two AdamW steps (PyTorch's torch.optim.AdamW) on 10 parameters */
    enum { N = 10 };
    static float p[N], g[N];
    static double ref[N];
    const double lr = 0.01, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    int64_t s[1] = {N};
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    teeny_optimizer *opt = NULL;
    op.kind = TEENY_OPTIM_ADAMW;
    op.lr = (float)lr;
    op.weight_decay = (float)wd;
    fill_uniform(r, p, N);
    fill_uniform(r, g, N);
    for (int i = 0; i < N; i++) {
        double x = p[i], m = 0, v = 0;
        for (int t = 1; t <= 2; t++) {
            x *= 1 - lr * wd;
            m = b1 * m + (1 - b1) * g[i];
            v = b2 * v + (1 - b2) * (double)g[i] * g[i];
            x -= lr / (1 - pow(b1, t)) * m / (sqrt(v) / sqrt(1 - pow(b2, t)) + eps);
        }
        ref[i] = x;
    }
    teeny_tensor *tp = tensor(r, 1, s, p), *tg = tensor(r, 1, s, g);
    const teeny_tensor *grads[1] = {tg};
    CALL(r, teeny_optimizer_create(r->ctx, &op, 1, &tp, grads, &opt));
    CALL(r, teeny_optimizer_step(opt, (float)lr, -1.0f));
    CALL(r, teeny_optimizer_step(opt, (float)lr, -1.0f));
    expect(r, "param", tp, ref);
    /* The optimizer waits for its pending writes when destroyed: that must
     * happen after the gate opens, so it is left to the process exit. */
}

typedef struct {
    const char *family; /* cl/<family>.cl */
    const char *what;   /* what the case runs */
    void (*run)(check_run *r);
} check_case;

static const check_case CASES[] = {
    {"common", "relu, silu, silu backward on 2x3x5x5", case_common},
    {"elementwise", "add, mul on 2x3x5x5", case_elementwise},
    {"batchnorm", "training forward on 2x3x4x4", case_batchnorm},
    {"conv2d", "3x3 pad 1 on 2x3x5x5 -> 4 channels", case_conv2d},
    {"attention", "forward on 1x8x16", case_attention},
    {"psa", "pack qkv, merge on 2 heads, kd 2, 2x3", case_psa},
    {"pool", "max 2x2, avg 3x3 pad 1 on 2x3x4x4", case_pool},
    {"linear", "3x5 -> 4 with bias", case_linear},
    {"loss", "softmax cross-entropy on 4x5", case_loss},
    {"concat", "2 + 3 channels of 2x?x3x3", case_concat},
    {"optim", "two AdamW steps on 10 values", case_optim},
};
enum { N_CASES = sizeof CASES / sizeof CASES[0] };

/* ---- child side ---- */

/* One line to the parent; writes of at most PIPE_BUF bytes are atomic. */
static void report(int fd, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n')
            line[i] = ' ';
    line[n++] = '\n';
    for (int off = 0; off < n;) {
        ssize_t w = write(fd, line + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (int)w;
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Send the lines of an error message that name errors (a build log's
 * "error:" lines), at most a few, or else its first line. */
static void report_summary(int fd, const char *msg)
{
    int sent = 0;
    for (const char *line = msg; *line && sent < 4;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len && (strstr(line, "error") && (size_t)(strstr(line, "error") - line) < len)) {
            report(fd, "log %.*s", (int)(len > 200 ? 200 : len), line);
            sent++;
        }
        line += len + (end != NULL);
    }
    if (!sent) {
        size_t len = strcspn(msg, "\n");
        report(fd, "log %.*s", (int)(len > 200 ? 200 : len), msg);
    }
}

static int env_is(const char *name, const char *family)
{
    const char *v = getenv(name);
    return v && !strcmp(v, family);
}

/* The whole life of one family's child: make a context (the first OpenCL
 * call of this process), build and enqueue the case behind a closed gate,
 * open it, compare. Never returns. */
static void check_child(int fd, const char *spec, const check_case *c)
{
    check_run r;
    cl_event gate = NULL;
    double build_ms;

    /* Cold builds: the timing is the compiler's, and a cached binary from an
     * earlier run would hide a compiler that crashes. Drivers keep caches of
     * their own too (PoCL's kernel cache, NVIDIA's compute cache, Mesa's
     * shader cache); each variable is ignored by the others. */
    setenv("TEENY_NO_CACHE", "1", 1);
    setenv("POCL_KERNEL_CACHE", "0", 1);
    setenv("CUDA_CACHE_DISABLE", "1", 1);
    setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
    memset(&r, 0, sizeof r);
    r.seed = 12345u;
    report(fd, "phase context");
    teeny_status st = teeny_ctx_create(spec, &r.ctx);
    if (st != TEENY_OK) {
        report(fd, "error %s", teeny_status_name(st));
        report(fd, "log %.200s", teeny_last_error(NULL));
        _exit(0);
    }
    report(fd, "device %s", teeny_ctx_device_name(r.ctx));

    /* The gate: a marker that waits for a user event holds back everything
     * enqueued after it on the in-order queue, so "building" is the
     * compiler alone (builds happen inside the op calls) and the kernels
     * first run after "running" is reported. Oclgrind is left ungated: the
     * library makes blocking writes there (buffer shadows), which would
     * wait for the gate forever. */
    if (!strstr(teeny_ctx_device_name(r.ctx), "Oclgrind")) {
        cl_command_queue q = teeny_ctx_cl_queue(r.ctx);
        cl_context clctx = NULL;
        cl_int err = clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof clctx, &clctx, NULL);
        if (err == CL_SUCCESS)
            gate = clCreateUserEvent(clctx, &err);
        if (err == CL_SUCCESS)
            err = clEnqueueMarkerWithWaitList(q, 1, &gate, NULL);
        if (err != CL_SUCCESS) {
            report(fd, "error OpenCL");
            report(fd, "log cannot hold the queue with a user event (OpenCL error %d)", (int)err);
            _exit(0);
        }
    }

    report(fd, "phase building");
    if (env_is("TEENY_CHECK_CRASH", c->family)) {
        /* the default action: the driver's LLVM installs a SIGABRT handler
         * of its own, which would survive a plain raise */
        signal(SIGABRT, SIG_DFL);
        raise(SIGABRT);
    }
    if (env_is("TEENY_CHECK_HANG", c->family))
        for (;;)
            pause();
    build_ms = now_ms();
    c->run(&r);
    build_ms = now_ms() - build_ms;
    report(fd, "build_ms %.1f", build_ms);

    report(fd, "phase running");
    double run_ms = now_ms();
    if (gate)
        clSetUserEventStatus(gate, CL_COMPLETE);
    if (r.st != TEENY_OK) {
        report(fd, "error %s", teeny_status_name(r.st));
        report(fd, "call %s", r.failed);
        report_summary(fd, teeny_last_error(r.ctx));
        _exit(0);
    }
    double worst = -1;
    const char *worst_name = "";
    for (int o = 0; o < r.n_outs; o++) {
        int64_t n = teeny_tensor_numel(r.outs[o].t);
        float *y = malloc((size_t)n * sizeof *y);
        double scale = 1, err = 0;
        if (!y) {
            report(fd, "error TEENY_ERR_NOMEM");
            _exit(0);
        }
        st = teeny_tensor_read(r.outs[o].t, y, (size_t)n);
        if (st != TEENY_OK) {
            report(fd, "error %s", teeny_status_name(st));
            report(fd, "call teeny_tensor_read of %s", r.outs[o].name);
            report_summary(fd, teeny_last_error(r.ctx));
            _exit(0);
        }
        for (int64_t i = 0; i < n; i++)
            scale = fabs(r.outs[o].ref[i]) > scale ? fabs(r.outs[o].ref[i]) : scale;
        for (int64_t i = 0; i < n; i++) {
            double d = fabs(y[i] - r.outs[o].ref[i]) / scale;
            if (!(d <= err)) /* NaN (an element never written) counts as infinite */
                err = isnan(d) ? INFINITY : d;
        }
        if (err > worst) {
            worst = err;
            worst_name = r.outs[o].name;
        }
        free(y);
    }
    report(fd, "run_ms %.1f", now_ms() - run_ms);
    report(fd, "result %.3g %s", worst, worst_name);
    /* No cleanup: the process ends here, and _exit skips the driver's
     * atexit handlers, which some drivers run badly in a forked child. */
    _exit(0);
}

/* ---- parent side: no OpenCL here, only fork, pipes and waiting ---- */

typedef struct {
    char phase[32];
    char device[160];
    char error[64];
    char call[200];
    char log[4][210];
    int n_log;
    double build_ms, run_ms, max_err;
    char worst[32];
    int have_build, have_run, have_result;
} child_report;

/* Copy src into dst[cap], cut short where it does not fit (a field of a report). */
static void copy_field(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void parse_line(child_report *cr, const char *line)
{
    if (!strncmp(line, "phase ", 6))
        copy_field(cr->phase, sizeof cr->phase, line + 6);
    else if (!strncmp(line, "device ", 7))
        copy_field(cr->device, sizeof cr->device, line + 7);
    else if (!strncmp(line, "error ", 6))
        copy_field(cr->error, sizeof cr->error, line + 6);
    else if (!strncmp(line, "call ", 5))
        copy_field(cr->call, sizeof cr->call, line + 5);
    else if (!strncmp(line, "log ", 4) && cr->n_log < 4)
        copy_field(cr->log[cr->n_log++], sizeof cr->log[0], line + 4);
    else if (!strncmp(line, "build_ms ", 9))
        cr->have_build = sscanf(line + 9, "%lf", &cr->build_ms) == 1;
    else if (!strncmp(line, "run_ms ", 7))
        cr->have_run = sscanf(line + 7, "%lf", &cr->run_ms) == 1;
    else if (!strncmp(line, "result ", 7)) {
        cr->have_result = sscanf(line + 7, "%lf %31s", &cr->max_err, cr->worst) >= 1;
    }
}

static const char *signal_name(int sig, char *buf, size_t cap)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGABRT, "SIGABRT"}, {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGILL, "SIGILL"},
                 {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGTRAP, "SIGTRAP"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    snprintf(buf, cap, "signal %d", sig);
    return buf;
}

/* Run one family's child; fill cr and a one-line verdict (empty: passed). */
static void check_family(const char *spec, const check_case *c, int timeout_s, child_report *cr, char *verdict,
                         size_t cap)
{
    static const char DASH[] = "\xe2\x80\x94"; /* an em dash, UTF-8 */
    int fds[2], status = 0, hung = 0, reaped = 0;
    char buf[8192];
    size_t used = 0;
    memset(cr, 0, sizeof *cr);
    snprintf(cr->phase, sizeof cr->phase, "starting");
    verdict[0] = '\0';
    if (pipe(fds) != 0) {
        snprintf(verdict, cap, "%s: cannot make a pipe: %s", c->family, strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(verdict, cap, "%s: cannot fork: %s", c->family, strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        check_child(fds[1], spec, c);
    }
    close(fds[1]);

    double deadline = now_ms() + timeout_s * 1e3;
    for (;;) {
        double left = deadline - now_ms();
        if (left <= 0 && !reaped) {
            hung = 1;
            break;
        }
        struct pollfd pfd = {fds[0], POLLIN, 0};
        int n = poll(&pfd, 1, reaped ? 0 : left > 1e3 ? 1000 : (int)left + 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            /* The child may be gone while a helper process it started
             * still holds the pipe open: then read what is left and stop. */
            if (reaped)
                break;
            reaped = waitpid(pid, &status, WNOHANG) == pid;
            continue;
        }
        ssize_t got = read(fds[0], buf + used, sizeof buf - 1 - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break; /* EOF: the child exited (or crashed) */
        used += (size_t)got;
        buf[used] = '\0';
        char *nl;
        while ((nl = strchr(buf, '\n')) != NULL) {
            *nl = '\0';
            parse_line(cr, buf);
            used -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, used + 1);
        }
        if (used == sizeof buf - 1)
            used = 0; /* an overlong line: dropped */
    }
    close(fds[0]);
    if (hung)
        kill(pid, SIGKILL);
    while (!reaped && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;

    int building = !strcmp(cr->phase, "building");
    char sigbuf[32];
    if (hung) {
        if (building)
            snprintf(verdict, cap,
                     "%s: the OpenCL compiler hung (no result after %d s) while building %s.cl %s killed; "
                     "this driver cannot run teenycl's %s; report it",
                     c->family, timeout_s, c->family, DASH, c->family);
        else
            snprintf(verdict, cap, "%s: hung (no result after %d s) while %s %s killed; report it", c->family,
                     timeout_s, !strcmp(cr->phase, "running") ? "running its kernels" : cr->phase, DASH);
    } else if (WIFSIGNALED(status)) {
        const char *sig = signal_name(WTERMSIG(status), sigbuf, sizeof sigbuf);
        if (building)
            snprintf(verdict, cap,
                     "%s: the OpenCL compiler crashed (%s) while building %s.cl %s this driver cannot run "
                     "teenycl's %s; report it",
                     c->family, sig, c->family, DASH, c->family);
        else if (!strcmp(cr->phase, "running"))
            snprintf(verdict, cap,
                     "%s: the driver crashed (%s) while running %s's kernels %s this driver cannot run "
                     "teenycl's %s; report it",
                     c->family, sig, c->family, DASH, c->family);
        else
            snprintf(verdict, cap, "%s: the driver crashed (%s) while %s", c->family, sig,
                     !strcmp(cr->phase, "context") ? "creating a context" : cr->phase);
    } else if (cr->error[0]) {
        if (!strcmp(cr->error, "TEENY_ERR_BUILD"))
            snprintf(verdict, cap, "%s: %s.cl does not build on this device (TEENY_ERR_BUILD); build log:", c->family,
                     c->family);
        else if (!strcmp(cr->phase, "context"))
            snprintf(verdict, cap, "%s: cannot create a context (%s):", c->family, cr->error);
        else
            snprintf(verdict, cap, "%s: %s while %s%s%s:", c->family, cr->error, cr->phase, cr->call[0] ? " in " : "",
                     cr->call);
    } else if (!cr->have_result) {
        snprintf(verdict, cap, "%s: the child exited (status %d) without a result while %s", c->family,
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, cr->phase);
    } else if (!(cr->max_err <= CHECK_TOLERANCE)) {
        snprintf(verdict, cap, "%s: wrong results: max error %.3g in %s (tolerance %.0e)", c->family, cr->max_err,
                 cr->worst, CHECK_TOLERANCE);
    }
}

static int in_list(const char *list, const char *family)
{
    size_t len = strlen(family);
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && !strncmp(p, family, len))
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* Every name in the comma-separated list (--only, and the test hooks'
 * variables) is a family of CASES: 1, or 0 after saying which is not and
 * listing the families. An empty list or name is not one either. */
static int families_known(const char *what, const char *list)
{
    for (const char *p = list;;) {
        size_t n = strcspn(p, ",");
        int known = 0;
        for (int i = 0; i < N_CASES && n; i++)
            known |= strlen(CASES[i].family) == n && !strncmp(p, CASES[i].family, n);
        if (!known) {
            fprintf(stderr, "teeny-info: %s: \"%.*s\" is not a kernel family; the families are", what, (int)n, p);
            for (int i = 0; i < N_CASES; i++)
                fprintf(stderr, "%s %s", i ? "," : "", CASES[i].family);
            fprintf(stderr, "\n");
            return 0;
        }
        if (!p[n])
            return 1;
        p += n + 1;
    }
}

static int check_device(const char *spec, int timeout_s, const char *only)
{
    child_report reports[N_CASES];
    char verdicts[N_CASES][600];
    int ran[N_CASES] = {0}, failures = 0, no_context = 0;
    const char *device = NULL;

    printf("teenycl %s: checking every kernel family on %s (cold builds, %d s limit each)\n",
           teeny_version_string(), spec && *spec ? spec : "the default device", timeout_s);
    for (int i = 0; i < N_CASES; i++) {
        if (only && !in_list(only, CASES[i].family))
            continue;
        check_family(spec, &CASES[i], timeout_s, &reports[i], verdicts[i], sizeof verdicts[i]);
        ran[i] = 1;
        if (!device && reports[i].device[0])
            device = reports[i].device;
        if (!reports[i].device[0] && !strcmp(reports[i].phase, "context")) {
            no_context = 1; /* every other child would fail the same way */
            break;
        }
    }
    printf("device: %s\n\n", device ? device : "(no child got as far as a context)");
    printf("%-12s %9s %7s %10s  %-6s %s\n", "family", "build ms", "run ms", "max error", "result", "case");
    for (int i = 0; i < N_CASES; i++) {
        char ms[32] = "-", run[32] = "-", err[32] = "-";
        if (!ran[i])
            continue;
        if (reports[i].have_build)
            snprintf(ms, sizeof ms, "%.0f", reports[i].build_ms);
        if (reports[i].have_run)
            snprintf(run, sizeof run, "%.0f", reports[i].run_ms);
        if (reports[i].have_result)
            snprintf(err, sizeof err, "%.1e", reports[i].max_err);
        printf("%-12s %9s %7s %10s  %-6s %s\n", CASES[i].family, ms, run, err, verdicts[i][0] ? "FAIL" : "pass",
               CASES[i].what);
        failures += verdicts[i][0] != '\0';
    }
    if (failures) {
        printf("\n");
        for (int i = 0; i < N_CASES; i++) {
            if (!ran[i] || !verdicts[i][0])
                continue;
            printf("%s\n", verdicts[i]);
            for (int l = 0; l < reports[i].n_log; l++)
                printf("    %s\n", reports[i].log[l]);
        }
        if (no_context)
            printf("(the other families were not run: there is no context to run them in)\n");
        printf("\n%d of the families above failed on this device.\n", failures);
    } else {
        printf("\nevery family built and matched the host reference.\n");
    }
    return failures ? 1 : 0;
}

/* ---- --onnx: which nodes of a model the importer takes, and why not ---- */

static void onnx_node_line(const teeny_onnx_node_report *r, void *user_data)
{
    int *counts = user_data;
    counts[r->status == TEENY_OK]++;
    printf("%5d  %-24s %-32.32s %s%s%s\n", r->index, r->op_type, r->name[0] ? r->name : "-",
           r->status == TEENY_OK ? "supported" : "UNSUPPORTED", r->status == TEENY_OK ? "" : ": ", r->message);
}

static int onnx_report(const char *path, const char *spec)
{
    teeny_ctx *ctx = NULL;
    int counts[2] = {0, 0};
    teeny_status st = teeny_ctx_create(spec, &ctx);
    if (st != TEENY_OK) {
        fprintf(stderr, "%s: %s\n", teeny_status_name(st), teeny_last_error(NULL));
        return 1;
    }
    onnx_io_rows rows;
    if ((st = onnx_io_read(ctx, path, &rows)) != TEENY_OK) {
        fprintf(stderr, "teeny-info: %s: %s\n", teeny_status_name(st), teeny_last_error(ctx));
        free(rows.rows);
        teeny_ctx_destroy(ctx);
        return 1;
    }
    onnx_io_print(&rows, "", stdout);
    free(rows.rows);
    printf("\n%5s  %-24s %-32s %s\n", "node", "op", "name", "import");
    st = teeny_onnx_inspect(ctx, path, NULL, onnx_node_line, counts);
    if (st != TEENY_OK && counts[0] + counts[1] == 0)
        fprintf(stderr, "%s: %s\n", teeny_status_name(st), teeny_last_error(ctx));
    else
        printf("%d of %d nodes supported\n", counts[1], counts[0] + counts[1]);
    teeny_ctx_destroy(ctx);
    return st == TEENY_OK ? 0 : 1;
}

enum { O_DEVICE, O_NO_SELF_TEST, O_CHECK, O_TIMEOUT, O_ONLY, O_ONNX, O_COUNT };

static const cli_opt OPTS[] = {
    [O_DEVICE] = {"--device", "SPEC", "the device to self-test (and for --onnx): cpu, gpu, pocl, nvidia, P:D,\n"
                                      "a part of its name (default: TEENY_DEVICE, else the first GPU, else CPU)"},
    [O_NO_SELF_TEST] = {"--no-self-test", NULL, "list the devices only"},
    [O_CHECK] = {"--check", NULL, "build every kernel family cold on the device (SPEC when one follows)\n"
                                  "and check one case of each against a host reference, each in a child\n"
                                  "process; exit status 1 if any fails"},
    [O_TIMEOUT] = {"--timeout", "SECONDS", "--check: seconds per family, 1..86400 (default 120)"},
    [O_ONLY] = {"--only", "FAMILY,...", "--check: only these families, of: common elementwise batchnorm conv2d\n"
                                        "attention psa pool linear loss concat optim"},
    [O_ONNX] = {"--onnx", "MODEL.onnx", "list the model's declared inputs and outputs (symbolic dimensions by\n"
                                        "name), then each node: supported by the importer, or why not;\n"
                                        "exit status 1 if any is not"},
    [O_COUNT] = {NULL, NULL, NULL},
};

static const cli_spec SPEC = {
    "teeny-info",
    "[--device SPEC] [--no-self-test]\n"
    "--check [SPEC] [--timeout SECONDS] [--only FAMILY,...]\n"
    "--onnx MODEL.onnx [--device SPEC]",
    "List the OpenCL platforms and devices with the capabilities teenycl uses, mark the\n"
    "default device and self-test it (build and run one kernel); or qualify a device\n"
    "(--check); or say what of an ONNX model the importer takes (--onnx).",
    OPTS,
    "Test hooks of --check: TEENY_CHECK_CRASH=FAMILY (SIGABRT while building),\n"
    "TEENY_CHECK_HANG=FAMILY (hangs while building).\n"
    "Exit status: 0 ok; 1 a failure (self-test, a family, a node); 2 a bad command line.",
};

int main(int argc, char **argv)
{
    const char *spec = NULL, *only = NULL, *onnx = NULL;
    int run_self_test = 1, count = 0, check = 0, timeout_s = 120;
    for (int i = 1; i < argc; i++) {
        const char *v;
        char what[300];
        switch (cli_next(&SPEC, argc, argv, &i, &v)) {
        case CLI_EXIT_OK:
            return 0;
        case CLI_EXIT_USAGE:
            return 2;
        case O_DEVICE:
            spec = v;
            break;
        case O_NO_SELF_TEST:
            run_self_test = 0;
            break;
        case O_CHECK:
            check = 1;
            if (i + 1 < argc && argv[i + 1][0] != '-')
                spec = argv[++i];
            break;
        case O_TIMEOUT:
            if (!args_int("teeny-info", "--timeout", v, 1, 86400, &timeout_s))
                return 2;
            break;
        case O_ONLY:
            only = v;
            if (!families_known("--only", only))
                return 2;
            break;
        case O_ONNX:
            onnx = v;
            break;
        default:
            snprintf(what, sizeof what, "unexpected argument \"%.200s\"", v);
            return cli_fail(&SPEC, what);
        }
    }
    if (check) {
        static const char *const hooks[] = {"TEENY_CHECK_CRASH", "TEENY_CHECK_HANG"};
        for (int h = 0; h < 2; h++)
            if (getenv(hooks[h]) && !families_known(hooks[h], getenv(hooks[h])))
                return 2;
        return check_device(spec, timeout_s, only);
    }
    if (onnx)
        return onnx_report(onnx, spec);
    printf("teenycl %s\n", teeny_version_string());
    teeny_status st = teeny_devices_list(NULL, 0, &count);
    if (st != TEENY_OK) {
        fprintf(stderr, "%s: %s\n", teeny_status_name(st), teeny_last_error(NULL));
        return 1;
    }
    teeny_device_info *devs = calloc((size_t)count + 1, sizeof *devs);
    if (!devs)
        return 1;
    devs[0].struct_size = sizeof *devs; /* the stride of the array */
    teeny_devices_list(devs, count, &count);
    if (count == 0)
        printf("no OpenCL devices found (install an ICD, e.g. pocl-opencl-icd)\n");
    for (int i = 0; i < count; i++) {
        const teeny_device_info *d = &devs[i];
        printf("%s %d:%d  %s\n", d->is_default ? "*" : " ", d->platform_index, d->device_index, d->device_name);
        printf("      platform %s; vendor %s; %s\n", d->platform_name, d->vendor,
               d->is_gpu ? "GPU" : d->is_cpu ? "CPU" : "other");
        printf("      %s; %s; driver %s\n", d->device_version, d->opencl_c_version, d->driver_version);
        printf("      %u compute units; max work-group %zu; local mem %llu KiB; global mem %llu MiB; "
               "max alloc %llu MiB\n",
               d->compute_units, d->max_work_group_size, (unsigned long long)(d->local_mem_bytes >> 10),
               (unsigned long long)(d->global_mem_bytes >> 20), (unsigned long long)(d->max_alloc_bytes >> 20));
        printf("      fp64 %s; subgroups %s; NVIDIA inline PTX %s\n", d->has_fp64 ? "yes" : "no",
               d->has_subgroups ? "yes" : "no", d->has_nvidia_ptx ? "yes" : "no");
    }
    printf("(* marks the default device; TEENY_DEVICE or --device SPEC chooses another)\n");
    free(devs);
    return run_self_test && count ? self_test(spec) : 0;
}
