/*
 * info_cases.c -- the cases of teeny-info --check: per kernel family
 * (cl/<family>.cl) one small run of its ops on seeded inputs, the outputs
 * it wants compared, and their float64 host reference, written here
 * because tools cannot link tests/ref. info_check.c runs each in a child
 * process; a case only enqueues (the runner holds the queue back while
 * the case builds, then compares).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "info_check.h"

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

const check_case info_cases[] = {
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
_Static_assert(sizeof info_cases / sizeof info_cases[0] == INFO_N_CASES, "INFO_N_CASES counts info_cases");
