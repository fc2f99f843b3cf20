/*
 * test_loss_ex.c -- softmax cross-entropy with teeny_ce_params (class
 * weights, ignore_index, reductions mean / sum / none) against the float64
 * reference: seeded sweeps (views at odd offsets, NaN-poisoned outputs),
 * the defaults' bits against the plain calls, every row ignored, labels out
 * of range, finite differences of the reference, determinism, split loops,
 * a training graph's gradients and every error path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clwrap.h"
#include "harness.h"
#include "ops/ops.h"
#include "ref/loss_ref.h"

#define TOL 1e-5

static void expect_close(const th_dev *d, const double *ref, size_t n, const char *what, const char *repro)
{
    float *out = th_read(d->t);
    long bad = th_first_nonfinite(out, n);
    ck_assert_msg(bad < 0, "%s: element %ld not written (%g); %s", what, bad, bad >= 0 ? (double)out[bad] : 0.0,
                  repro);
    double e = th_nrms(out, ref, n);
    ck_assert_msg(e <= TOL, "%s: nrms %.3g > %.1g; %s", what, e, TOL, repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

/* A case: shapes, options and data (labels: some equal to ignore_index,
 * at least one not). */
typedef struct {
    int N, K, view, has_w;
    teeny_ce_params p;
    float *x, *w;
    int32_t *lab;
    double *xd, *wd;
    ref_ce_opts o;
} ex_case;

static ex_case case_make(th_rng *r, int i)
{
    ex_case c = {0};
    c.N = i % 8 == 0 ? th_int(r, 100, 400) : th_int(r, 1, 40);
    c.K = i % 7 == 0 ? th_int(r, 257, 900) : th_int(r, 1, 50);
    c.view = i % 3 == 0 ? 1 + 2 * (i % 4) : 0;
    c.has_w = i % 2 == 0;
    c.p.reduction = (teeny_reduction)(i % 3);
    c.p.use_ignore_index = (i / 2) % 2;
    c.p.ignore_index = i % 4 == 1 ? -100 : th_int(r, 0, c.K - 1); /* outside [0, K) or a class */
    size_t n = (size_t)c.N * c.K;
    c.x = th_malloc(n * 4);
    c.w = th_malloc((size_t)c.K * 4);
    c.lab = th_malloc((size_t)c.N * 4);
    th_fill_normal(r, c.x, n, 0, th_uniform(r, 0.5, 3));
    th_fill_uniform(r, c.w, (size_t)c.K, 0.1, 3);
    for (int k = 0; k < c.N; k++)
        c.lab[k] = c.p.use_ignore_index && th_int(r, 0, 3) == 0 ? c.p.ignore_index : th_int(r, 0, c.K - 1);
    if (c.p.use_ignore_index && c.lab[0] == c.p.ignore_index) /* one row counts (no 0/0) */
        c.lab[0] = (c.p.ignore_index + 1) % c.K < 0 ? 0 : (c.p.ignore_index + 1) % c.K;
    if (c.p.use_ignore_index && c.lab[0] == c.p.ignore_index)
        c.p.use_ignore_index = 0; /* K == 1 with ignore_index 0 */
    c.xd = th_dbl(c.x, n);
    c.wd = th_dbl(c.w, (size_t)c.K);
    c.o = (ref_ce_opts){c.has_w ? c.wd : NULL, c.p.use_ignore_index, c.p.ignore_index, (int)c.p.reduction};
    return c;
}

static void case_free(ex_case *c)
{
    free(c->x);
    free(c->w);
    free(c->lab);
    free(c->xd);
    free(c->wd);
}

static int n_sweep(void)
{
    return th_small() ? 12 : th_full() ? 360 : 96;
}

/* Forward (loss, probs) and backward against the reference. */
START_TEST(test_loss_ex_sweep)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 7000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    ex_case c = case_make(&r, _i);
    char repro[200];
    snprintf(repro, sizeof repro, "logits [%d, %d]%s reduction %d ignore %d:%d%s seed %llu", c.N, c.K,
             c.has_w ? " weights" : "", (int)c.p.reduction, c.p.use_ignore_index, c.p.ignore_index,
             c.view ? " (views)" : "", (unsigned long long)seed);
    int none = c.p.reduction == TEENY_REDUCTION_NONE, nl = none ? c.N : 1;
    size_t n = (size_t)c.N * c.K;
    int64_t xs[2] = {c.N, c.K}, ls[1] = {c.N}, ks[1] = {c.K}, os[1] = {nl};
    float *dl = th_malloc((size_t)nl * 4);
    th_fill_uniform(&r, dl, (size_t)nl, 0.25, 2);
    double *probs = th_malloc(n * 8), *rows = th_malloc((size_t)c.N * 8), *dld = th_dbl(dl, (size_t)nl),
           *dx = th_malloc(n * 8);
    double loss = ref_softmax_ce_ex_forward(c.xd, c.lab, &c.o, c.N, c.K, probs, rows);
    ref_softmax_ce_ex_backward(probs, c.lab, &c.o, dld, c.N, c.K, dx);
    int v = c.view;
    th_dev tx = th_dev_make(ctx, 0, 2, xs, v, c.x), tl = th_dev_make(ctx, 1, 1, ls, v ? v + 1 : 0, c.lab),
           tw = th_dev_make(ctx, 0, 1, ks, v ? v + 2 : 0, c.w), tloss = th_dev_make(ctx, 0, 1, os, v ? v + 3 : 0, NULL),
           tp = th_dev_make(ctx, 0, 2, xs, v ? v + 4 : 0, NULL), tdl = th_dev_make(ctx, 0, 1, os, v ? v + 5 : 0, dl),
           tdx = th_dev_make(ctx, 0, 2, xs, v ? v + 6 : 0, NULL);
    const teeny_tensor *w = c.has_w ? tw.t : NULL;
    TH_OK(ctx, teeny_softmax_cross_entropy_ex_forward(ctx, tx.t, tl.t, w, &c.p, tloss.t, tp.t));
    expect_close(&tloss, none ? rows : &loss, (size_t)nl, "loss", repro);
    expect_close(&tp, probs, n, "probs", repro);
    TH_OK(ctx, teeny_softmax_cross_entropy_ex_backward(ctx, tp.t, tl.t, w, &c.p, tdl.t, tdx.t));
    expect_close(&tdx, dx, n, "dlogits", repro);
    /* ignored rows: exactly 0 */
    float *got = th_read(tdx.t), *gl = th_read(tloss.t);
    for (int k = 0; k < c.N; k++)
        if (c.p.use_ignore_index && c.lab[k] == c.p.ignore_index) {
            for (int j = 0; j < c.K; j++)
                ck_assert_msg(got[(size_t)k * c.K + j] == 0.0f, "ignored row %d: dlogits %g; %s", k,
                              (double)got[(size_t)k * c.K + j], repro);
            ck_assert_msg(!none || gl[k] == 0.0f, "ignored row %d: loss %g; %s", k, (double)gl[k], repro);
        }
    free(got);
    free(gl);
    /* without probs (the workspace holds them): the same loss bits */
    float *first = th_read(tloss.t), *again;
    th_poison(tloss.t);
    TH_OK(ctx, teeny_softmax_cross_entropy_ex_forward(ctx, tx.t, tl.t, w, &c.p, tloss.t, NULL));
    again = th_read(tloss.t);
    ck_assert_msg(!memcmp(first, again, (size_t)nl * 4), "loss without probs differs; %s", repro);
    free(first);
    free(again);
    th_dev *ds[] = {&tx, &tl, &tw, &tloss, &tp, &tdl, &tdx};
    for (int k = 0; k < 7; k++)
        th_dev_free(ds[k]);
    free(dl);
    free(probs);
    free(rows);
    free(dld);
    free(dx);
    case_free(&c);
}
END_TEST

/* A zeroed teeny_ce_params (and p NULL) is the plain call, bit for bit;
 * so are weights of ones and an ignore_index no label holds (the sum of
 * the weights is exactly N). */
START_TEST(test_loss_ex_defaults)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(71);
    enum { N = 37, K = 300 };
    float *x = th_malloc(N * K * 4), ones[K], dl = 0.7f;
    int32_t lab[N];
    th_fill_normal(&r, x, N * K, 0, 2);
    for (int k = 0; k < K; k++)
        ones[k] = 1.0f;
    for (int n = 0; n < N; n++)
        lab[n] = th_int(&r, 0, K - 1);
    int64_t xs[2] = {N, K}, ls[1] = {N}, ks[1] = {K}, one[1] = {1};
    th_dev tx = th_dev_make(ctx, 0, 2, xs, 0, x), tl = th_dev_make(ctx, 1, 1, ls, 0, lab),
           tw = th_dev_make(ctx, 0, 1, ks, 0, ones), tdl = th_dev_make(ctx, 0, 1, one, 0, &dl),
           tloss = th_dev_make(ctx, 0, 1, one, 0, NULL), tp = th_dev_make(ctx, 0, 2, xs, 0, NULL),
           tdx = th_dev_make(ctx, 0, 2, xs, 0, NULL);
    TH_OK(ctx, teeny_softmax_cross_entropy_forward(ctx, tx.t, tl.t, tloss.t, tp.t));
    TH_OK(ctx, teeny_softmax_cross_entropy_backward(ctx, tp.t, tl.t, tdl.t, tdx.t));
    float *want[2] = {th_read(tloss.t), th_read(tdx.t)};
    teeny_ce_params zero = {0}, ii = {TEENY_REDUCTION_MEAN, 1, -5};
    const teeny_ce_params *ps[3] = {NULL, &zero, &ii};
    for (int k = 0; k < 6; k++) {
        th_poison(tloss.t);
        th_poison(tdx.t);
        const teeny_tensor *w = k >= 3 ? tw.t : NULL;
        TH_OK(ctx, teeny_softmax_cross_entropy_ex_forward(ctx, tx.t, tl.t, w, ps[k % 3], tloss.t, tp.t));
        TH_OK(ctx, teeny_softmax_cross_entropy_ex_backward(ctx, tp.t, tl.t, w, ps[k % 3], tdl.t, tdx.t));
        float *got[2] = {th_read(tloss.t), th_read(tdx.t)};
        ck_assert_msg(!memcmp(got[0], want[0], 4) && !memcmp(got[1], want[1], (size_t)N * K * 4),
                      "case %d: not the plain call's bits (loss %.9g vs %.9g)", k, (double)got[0][0],
                      (double)want[0][0]);
        free(got[0]);
        free(got[1]);
    }
    free(want[0]);
    free(want[1]);
    free(x);
    th_dev *ds[] = {&tx, &tl, &tw, &tdl, &tloss, &tp, &tdx};
    for (int k = 0; k < 7; k++)
        th_dev_free(ds[k]);
}
END_TEST

/* Every row ignored: MEAN is 0/0 = NaN (PyTorch, ONNX's reference and
 * onnxruntime alike), SUM 0, NONE zeros; dlogits 0 everywhere. A label
 * outside [0, K) that is not ignore_index: NaN loss and NaN in its row
 * only; ignore_index -100 on a row: nothing read out of bounds. */
START_TEST(test_loss_ex_ignored_and_bad)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(72);
    enum { N = 5, K = 7 };
    float x[N * K], w[K], dl[N] = {1, 1, 1, 1, 1};
    th_fill_normal(&r, x, N * K, 0, 1);
    th_fill_uniform(&r, w, K, 0.5, 2);
    int64_t xs[2] = {N, K}, ls[1] = {N}, ks[1] = {K};
    for (int red = 0; red < 3; red++)
        for (int bad = 0; bad < 2; bad++) {
            int32_t lab[N] = {-100, -100, -100, -100, -100};
            if (bad)
                lab[0] = 1, lab[2] = K, lab[4] = 3;
            teeny_ce_params p = {(teeny_reduction)red, 1, -100};
            int64_t os[1] = {red == 2 ? N : 1};
            th_dev tx = th_dev_make(ctx, 0, 2, xs, 0, x), tl = th_dev_make(ctx, 1, 1, ls, 0, lab),
                   tw = th_dev_make(ctx, 0, 1, ks, 0, w), tloss = th_dev_make(ctx, 0, 1, os, 1, NULL),
                   tp = th_dev_make(ctx, 0, 2, xs, 0, NULL), tdl = th_dev_make(ctx, 0, 1, os, 0, dl),
                   tdx = th_dev_make(ctx, 0, 2, xs, 2, NULL);
            TH_OK(ctx, teeny_softmax_cross_entropy_ex_forward(ctx, tx.t, tl.t, tw.t, &p, tloss.t, tp.t));
            TH_OK(ctx, teeny_softmax_cross_entropy_ex_backward(ctx, tp.t, tl.t, tw.t, &p, tdl.t, tdx.t));
            float *l = th_read(tloss.t), *g = th_read(tdx.t);
            for (int n = 0; n < (red == 2 ? N : 1); n++) {
                int want_nan = bad ? (red < 2 || n == 2) : red == 0;
                ck_assert_msg(want_nan ? isnan(l[n]) : (bad && red == 2 ? isfinite(l[n]) : l[n] == 0.0f),
                              "reduction %d bad %d: loss[%d] = %g", red, bad, n, (double)l[n]);
            }
            for (int i = 0; i < N * K; i++) {
                int row = i / K;
                int want_nan = bad && row == 2, ignored = lab[row] == -100;
                ck_assert_msg(want_nan ? isnan(g[i]) : ignored ? g[i] == 0.0f : isfinite(g[i]),
                              "reduction %d bad %d: dlogits[%d] = %g", red, bad, i, (double)g[i]);
            }
            th_dev_check_guard(&tloss, "loss", "test_loss_ex_ignored_and_bad");
            th_dev_check_guard(&tdx, "dlogits", "test_loss_ex_ignored_and_bad");
            free(l);
            free(g);
            th_dev *ds[] = {&tx, &tl, &tw, &tloss, &tp, &tdl, &tdx};
            for (int k = 0; k < 7; k++)
                th_dev_free(ds[k]);
        }
}
END_TEST

/* The reference's backward against central differences of its forward,
 * per reduction, with weights and an ignored row. */
START_TEST(test_loss_ex_finite_diff)
{
    th_rng r = th_rng_make(73);
    enum { N = 4, K = 5 };
    double x[N * K], p[N * K], g[N * K], w[K], dl[N], rows[N], rp[N], rm[N];
    int32_t lab[N] = {2, 0, 4, 1};
    for (int i = 0; i < N * K; i++)
        x[i] = 2 * th_normal(&r);
    for (int k = 0; k < K; k++)
        w[k] = th_uniform(&r, 0.2, 2);
    for (int n = 0; n < N; n++)
        dl[n] = th_uniform(&r, 0.5, 1.5);
    for (int red = 0; red < 3; red++)
        for (int has_w = 0; has_w < 2; has_w++) {
            ref_ce_opts o = {has_w ? w : NULL, 1, 0, red}; /* row 1 ignored */
            ref_softmax_ce_ex_forward(x, lab, &o, N, K, p, rows);
            ref_softmax_ce_ex_backward(p, lab, &o, dl, N, K, g);
            for (int i = 0; i < N * K; i++) {
                double keep = x[i], h = 1e-5, fd = 0;
                x[i] = keep + h;
                double lp = ref_softmax_ce_ex_forward(x, lab, &o, N, K, NULL, rp);
                x[i] = keep - h;
                double lm = ref_softmax_ce_ex_forward(x, lab, &o, N, K, NULL, rm);
                x[i] = keep;
                if (red == 2)
                    for (int n = 0; n < N; n++)
                        fd += dl[n] * (rp[n] - rm[n]) / (2 * h);
                else
                    fd = dl[0] * (lp - lm) / (2 * h);
                ck_assert_msg(fabs(fd - g[i]) <= 1e-7, "reduction %d weights %d elem %d: fd %g ref %g", red, has_w,
                              i, fd, g[i]);
                if (i / K == 1)
                    ck_assert(g[i] == 0);
            }
        }
}
END_TEST

/* Same inputs, same bits; and under a loop limit (th_loop_limit: ce_mean
 * over 6000 rows in launches carrying both sums) the bits of one launch,
 * for the forward's MEAN and the backward's sum of the weights. */
START_TEST(test_loss_ex_determinism)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(74);
    enum { N = 6000, K = 7 };
    float *x = th_malloc(N * K * 4), w[K], dl = 1.25f;
    int32_t *lab = th_malloc(N * 4);
    th_fill_normal(&r, x, N * K, 0, 2);
    th_fill_uniform(&r, w, K, 0.1, 3);
    for (int n = 0; n < N; n++)
        lab[n] = th_int(&r, 0, 3) == 0 ? 2 : th_int(&r, 0, K - 1);
    teeny_ce_params p = {TEENY_REDUCTION_MEAN, 1, 2};
    int64_t xs[2] = {N, K}, ls[1] = {N}, ks[1] = {K}, one[1] = {1};
    th_dev tx = th_dev_make(ctx, 0, 2, xs, 0, x), tl = th_dev_make(ctx, 1, 1, ls, 0, lab),
           tw = th_dev_make(ctx, 0, 1, ks, 0, w), tdl = th_dev_make(ctx, 0, 1, one, 0, &dl),
           tloss = th_dev_make(ctx, 0, 1, one, 0, NULL), tp = th_dev_make(ctx, 0, 2, xs, 0, NULL),
           tdx = th_dev_make(ctx, 0, 2, xs, 0, NULL);
    float *out[3][2];
    int limits[3] = {0, 0, 60};
    for (int run = 0; run < 3; run++) {
        th_loop_limit(limits[run]);
        th_poison(tloss.t);
        th_poison(tdx.t);
        teeny__calls_reset();
        TH_OK(ctx, teeny_softmax_cross_entropy_ex_forward(ctx, tx.t, tl.t, tw.t, &p, tloss.t, tp.t));
        TH_OK(ctx, teeny_softmax_cross_entropy_ex_backward(ctx, tp.t, tl.t, tw.t, &p, tdl.t, tdx.t));
        TH_OK(ctx, teeny_ctx_finish(ctx));
        /* forward rows + mean, then the weights' sum + backward: one more
         * launch each for the split */
        ck_assert_int_eq(teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel), run == 2 ? 6 : 4);
        out[run][0] = th_read(tloss.t);
        out[run][1] = th_read(tdx.t);
    }
    th_loop_limit(-1);
    double *xd = th_dbl(x, N * K), *wd = th_dbl(w, K), *pr = th_malloc(N * K * 8), *gr = th_malloc(N * K * 8), dd = dl;
    ref_ce_opts o = {wd, 1, 2, 0};
    double want = ref_softmax_ce_ex_forward(xd, lab, &o, N, K, pr, NULL);
    ref_softmax_ce_ex_backward(pr, lab, &o, &dd, N, K, gr);
    ck_assert_msg(fabs(out[0][0][0] - want) <= TOL * fabs(want), "loss %.8g, want %.8g", (double)out[0][0][0], want);
    ck_assert(th_nrms(out[0][1], gr, N * K) <= TOL);
    for (int run = 1; run < 3; run++)
        ck_assert_msg(!memcmp(out[0][0], out[run][0], 4) && !memcmp(out[0][1], out[run][1], (size_t)N * K * 4),
                      "run %d differs from the first", run);
    for (int run = 0; run < 3; run++)
        free(out[run][0]), free(out[run][1]);
    free(x);
    free(lab);
    free(xd);
    free(wd);
    free(pr);
    free(gr);
    th_dev *ds[] = {&tx, &tl, &tw, &tdl, &tloss, &tp, &tdx};
    for (int k = 0; k < 7; k++)
        th_dev_free(ds[k]);
}
END_TEST

/* Scores of rank 3..5, [N, K, d1, ...] with labels [N, d1, ...]: against
 * the reference on the rows moved to [N * D, K] (a transpose here), for
 * every reduction, with weights and ignore_index -1; views at odd offsets. */
START_TEST(test_loss_ex_nd)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 7600 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    int rank = 3 + _i % 3, N = th_int(&r, 1, 4), K = th_int(&r, 1, 9), D = 1;
    int64_t xs[5] = {N, K}, ls[4] = {N}, ks[1] = {K};
    for (int i = 2; i < rank; i++)
        D *= (int)(xs[i] = ls[i - 1] = th_int(&r, 1, 5));
    int rows = N * D, none = _i % 3 == 2, nl = none ? rows : 1, v = _i % 2 ? 3 : 0;
    size_t n = (size_t)rows * K;
    teeny_ce_params p = {(teeny_reduction)(_i % 3), 1, -1};
    float *x = th_malloc(n * 4), *w = th_malloc((size_t)K * 4), *dl = th_malloc((size_t)nl * 4);
    int32_t *lab = th_malloc((size_t)rows * 4), *lab_t = th_malloc((size_t)rows * 4);
    th_fill_normal(&r, x, n, 0, 2);
    th_fill_uniform(&r, w, (size_t)K, 0.2, 2);
    th_fill_uniform(&r, dl, (size_t)nl, 0.5, 1.5);
    for (int i = 0; i < rows; i++)
        lab[i] = i > 0 && th_int(&r, 0, 3) == 0 ? -1 : th_int(&r, 0, K - 1);
    /* the reference's rows: row (b, d) <- x[b, :, d] */
    double *xt = th_malloc(n * 8), *pt = th_malloc(n * 8), *gt = th_malloc(n * 8), *pr = th_malloc(n * 8),
           *gr = th_malloc(n * 8), *rl = th_malloc((size_t)rows * 8), *wd = th_dbl(w, (size_t)K),
           *dld = th_dbl(dl, (size_t)nl), loss;
    for (int b = 0; b < N; b++)
        for (int k = 0; k < K; k++)
            for (int d = 0; d < D; d++)
                xt[((size_t)b * D + d) * K + k] = x[((size_t)b * K + k) * D + d];
    ref_ce_opts o = {wd, 1, -1, (int)p.reduction};
    loss = ref_softmax_ce_ex_forward(xt, lab, &o, rows, K, pt, rl);
    ref_softmax_ce_ex_backward(pt, lab, &o, dld, rows, K, gt);
    for (int b = 0; b < N; b++)
        for (int k = 0; k < K; k++)
            for (int d = 0; d < D; d++) {
                pr[((size_t)b * K + k) * D + d] = pt[((size_t)b * D + d) * K + k];
                gr[((size_t)b * K + k) * D + d] = gt[((size_t)b * D + d) * K + k];
            }
    char repro[160];
    snprintf(repro, sizeof repro, "logits rank %d [%d, %d, ...] D %d reduction %d%s seed %llu", rank, N, K, D,
             (int)p.reduction, v ? " (views)" : "", (unsigned long long)seed);
    int64_t os[4] = {none ? N : 1};
    for (int i = 1; none && i < rank - 1; i++)
        os[i] = ls[i];
    th_dev tx = th_dev_make(ctx, 0, rank, xs, v, x), tl = th_dev_make(ctx, 1, rank - 1, ls, v ? v + 1 : 0, lab),
           tw = th_dev_make(ctx, 0, 1, ks, 0, w), tloss = th_dev_make(ctx, 0, none ? rank - 1 : 1, os, v ? v + 2 : 0, NULL),
           tp = th_dev_make(ctx, 0, rank, xs, v ? v + 3 : 0, NULL),
           tdl = th_dev_make(ctx, 0, none ? rank - 1 : 1, os, 0, dl), tdx = th_dev_make(ctx, 0, rank, xs, v ? v + 4 : 0, NULL);
    TH_OK(ctx, teeny_softmax_cross_entropy_ex_forward(ctx, tx.t, tl.t, tw.t, &p, tloss.t, tp.t));
    expect_close(&tloss, none ? rl : &loss, (size_t)nl, "loss", repro);
    expect_close(&tp, pr, n, "probs", repro);
    TH_OK(ctx, teeny_softmax_cross_entropy_ex_backward(ctx, tp.t, tl.t, tw.t, &p, tdl.t, tdx.t));
    expect_close(&tdx, gr, n, "dlogits", repro);
    /* labels of the wrong shape: [N * D] */
    int64_t flat[1] = {rows};
    teeny_tensor *lf = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, flat, &lf));
    TH_STATUS(ctx, TEENY_ERR_SHAPE,
              teeny_softmax_cross_entropy_ex_forward(ctx, tx.t, lf, tw.t, &p, tloss.t, tp.t));
    teeny_tensor_destroy(lf);
    th_dev *ds[] = {&tx, &tl, &tw, &tloss, &tp, &tdl, &tdx};
    for (int k = 0; k < 7; k++)
        th_dev_free(ds[k]);
    void *hs[] = {x, w, dl, lab, lab_t, xt, pt, gt, pr, gr, rl, wd, dld};
    for (size_t k = 0; k < sizeof hs / sizeof *hs; k++)
        free(hs[k]);
}
END_TEST

/* x -> linear (weight, bias) -> cross-entropy with constant class weights,
 * ignore_index and SUM, then MEAN: the loss and both parameter gradients
 * against the reference chained by hand; the builder's refusals add no
 * node. */
START_TEST(test_loss_ex_graph)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(75);
    enum { B = 6, IN = 5, K = 4 };
    float x[B * IN], W[K * IN], bias[K], cw[K];
    int32_t lab[B] = {0, 3, 1, 3, 2, 1}; /* class 3 ignored */
    th_fill_normal(&r, x, B * IN, 0, 1);
    th_fill_normal(&r, W, K * IN, 0, 0.5);
    th_fill_normal(&r, bias, K, 0, 0.5);
    th_fill_uniform(&r, cw, K, 0.2, 2);
    for (int red = 0; red < 2; red++) {
        teeny_ce_params p = {red ? TEENY_REDUCTION_MEAN : TEENY_REDUCTION_SUM, 1, 3};
        int64_t xs[2] = {-1, IN}, ks[1] = {K};
        teeny_graph *g;
        teeny_node in, labels, wc, fc, L, bad = 7;
        TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
        TH_OK(ctx, teeny_graph_input(g, "x", 2, xs, &in));
        TH_OK(ctx, teeny_graph_labels(g, "labels", &labels));
        TH_OK(ctx, teeny_graph_constant(g, "cw", 1, ks, cw, &wc));
        TH_OK(ctx, teeny_graph_linear(g, "fc", in, K, 1, &fc));
        teeny_ce_params q = p;
        q.reduction = (teeny_reduction)3;
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_softmax_cross_entropy_ex(g, "bad", fc, labels, wc, &q, &bad));
        ck_assert(bad == -1);
        bad = 7;
        TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_graph_softmax_cross_entropy_ex(g, "bad", fc, labels, in, &p, &bad));
        ck_assert(bad == -1);
        ck_assert_int_eq(teeny_graph_node_count(g), 4);
        TH_OK(ctx, teeny_graph_softmax_cross_entropy_ex(g, "loss", fc, labels, wc, &p, &L));
        teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
        pp.batch = B;
        pp.loss = L;
        teeny_plan *plan;
        TH_OK(ctx, teeny_graph_compile(g, &pp, &plan));
        teeny_tensor *val[2], *grad[2], *tin, *tl;
        for (int i = 0; i < 2; i++) {
            const char *name;
            TH_OK(ctx, teeny_graph_param(g, i, &name, &val[i], &grad[i]));
            TH_OK(ctx, teeny_tensor_write(val[i], i ? bias : W, i ? K : K * IN));
        }
        TH_OK(ctx, teeny_plan_tensor(plan, in, &tin));
        TH_OK(ctx, teeny_plan_tensor(plan, labels, &tl));
        TH_OK(ctx, teeny_tensor_write(tin, x, B * IN));
        TH_OK(ctx, teeny_tensor_write_i32(tl, lab, B));
        TH_OK(ctx, teeny_plan_forward(plan));
        TH_OK(ctx, teeny_plan_backward(plan));
        float lossv;
        TH_OK(ctx, teeny_plan_read_loss(plan, &lossv));
        /* the reference */
        double logits[B * K], pr[B * K], dlog[B * K], dW[K * IN] = {0}, db[K] = {0}, cwd[K], one = 1;
        for (int k = 0; k < K; k++)
            cwd[k] = cw[k];
        for (int b = 0; b < B; b++)
            for (int k = 0; k < K; k++) {
                double s = bias[k];
                for (int i = 0; i < IN; i++)
                    s += (double)x[b * IN + i] * W[k * IN + i];
                logits[b * K + k] = s;
            }
        ref_ce_opts o = {cwd, 1, 3, red ? 0 : 1};
        double want = ref_softmax_ce_ex_forward(logits, lab, &o, B, K, pr, NULL);
        ref_softmax_ce_ex_backward(pr, lab, &o, &one, B, K, dlog);
        for (int b = 0; b < B; b++)
            for (int k = 0; k < K; k++) {
                db[k] += dlog[b * K + k];
                for (int i = 0; i < IN; i++)
                    dW[k * IN + i] += dlog[b * K + k] * x[b * IN + i];
            }
        ck_assert_msg(fabs(lossv - want) <= TOL * fabs(want), "reduction %d: loss %.8g, want %.8g", red,
                      (double)lossv, want);
        const double *ref[2] = {dW, db};
        for (int i = 0; i < 2; i++) {
            float *got = th_read(grad[i]);
            size_t n = i ? K : K * IN;
            double e = th_nrms(got, ref[i], n);
            ck_assert_msg(th_first_nonfinite(got, n) < 0 && e <= TOL, "reduction %d: gradient %d nrms %.3g", red, i,
                          e);
            free(got);
        }
        teeny_plan_destroy(plan);
        teeny_graph_destroy(g);
    }
    /* weights that parameters reach get no gradient: refused at compile */
    {
        teeny_graph *g;
        teeny_node in, labels, fc, wk, L;
        int64_t xs[2] = {-1, IN};
        teeny_reduce_params rp = {1u, 0, 1}; /* the mean over the batch: [K] */
        TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
        TH_OK(ctx, teeny_graph_input(g, "x", 2, xs, &in));
        TH_OK(ctx, teeny_graph_labels(g, "labels", &labels));
        TH_OK(ctx, teeny_graph_linear(g, "fc", in, K, 1, &fc));
        TH_OK(ctx, teeny_graph_reduce(g, "wk", fc, &rp, &wk));
        TH_OK(ctx, teeny_graph_softmax_cross_entropy_ex(g, "loss", fc, labels, wk, NULL, &L));
        teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
        pp.batch = B;
        pp.loss = L;
        teeny_plan *plan = NULL;
        TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_graph_compile(g, &pp, &plan));
        ck_assert(plan == NULL);
        ck_assert_msg(strstr(teeny_last_error(ctx), "class weights") != NULL, "message: %s", teeny_last_error(ctx));
        teeny_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_loss_ex_errors)
{
    teeny_ctx *ctx = th_ctx();
    int64_t xs[2] = {4, 3}, ls[1] = {4}, ks[1] = {3}, k4[1] = {4}, k13[2] = {1, 3}, one[1] = {1};
    teeny_tensor *x = th_tensor(ctx, 2, xs), *w = th_tensor(ctx, 1, ks), *w4 = th_tensor(ctx, 1, k4),
                 *w13 = th_tensor(ctx, 2, k13), *loss = th_tensor(ctx, 1, one), *loss4 = th_tensor(ctx, 1, ls),
                 *p = th_tensor(ctx, 2, xs), *dx = th_tensor(ctx, 2, xs), *dl = th_tensor(ctx, 1, one),
                 *dl4 = th_tensor(ctx, 1, ls), *lab = NULL, *wi = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, ls, &lab));
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, ks, &wi));
    int32_t lv[4] = {0, 1, 2, 0};
    TH_OK(ctx, teeny_tensor_write_i32(lab, lv, 4));
    teeny_tensor *filled[] = {x, w, w4, w13, loss, loss4, p, dx, dl, dl4};
    for (size_t i = 0; i < sizeof filled / sizeof filled[0]; i++)
        TH_OK(ctx, teeny_tensor_fill(filled[i], 7.0f));
    teeny_ce_params none = {TEENY_REDUCTION_NONE, 0, 0}, bad = {(teeny_reduction)3, 0, 0},
                    neg = {(teeny_reduction)-1, 0, 0};
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_ex_forward(ctx, x, lab, w4, NULL, loss, p));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_ex_forward(ctx, x, lab, w13, NULL, loss, p));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_ex_forward(ctx, x, lab, wi, NULL, loss, p));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_ex_forward(ctx, x, lab, w, &bad, loss, p));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_ex_forward(ctx, x, lab, w, &neg, loss, p));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_ex_forward(ctx, x, lab, w, &none, loss, p));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_ex_forward(ctx, x, lab, w, NULL, loss4, p));
    teeny_tensor *base = th_tensor(ctx, 1, k4), *wv = NULL, *lossv = NULL;
    TH_OK(ctx, teeny_tensor_fill(base, 7.0f));
    TH_OK(ctx, teeny_tensor_view(base, 0, 1, ks, &wv));
    TH_OK(ctx, teeny_tensor_view(base, 2, 1, one, &lossv)); /* loss overlaps the weights */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_ex_forward(ctx, x, lab, wv, NULL, lossv, p));
    th_expect_all(base, 7.0f);
    teeny_tensor_destroy(lossv);
    teeny_tensor_destroy(wv);
    teeny_tensor_destroy(base);
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_softmax_cross_entropy_ex_forward(NULL, x, lab, w, NULL, loss, p));
    th_expect_all(loss, 7.0f);
    th_expect_all(loss4, 7.0f);
    th_expect_all(p, 7.0f);
    th_expect_all(w, 7.0f);
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_ex_backward(ctx, p, lab, w4, NULL, dl, dx));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_ex_backward(ctx, p, lab, wi, NULL, dl, dx));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_ex_backward(ctx, p, lab, w, &bad, dl, dx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_ex_backward(ctx, p, lab, w, &none, dl, dx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_ex_backward(ctx, p, lab, w, NULL, dl4, dx));
    th_expect_all(dx, 7.0f);
    th_expect_all(w, 7.0f);
    teeny_tensor *all[] = {x, w, w4, w13, loss, loss4, p, dx, dl, dl4, lab, wi};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        teeny_tensor_destroy(all[i]);
}
END_TEST

Suite *suite_loss_ex(void)
{
    Suite *s = suite_create("loss_ex");
    TCase *t = tcase_create("loss_ex");
    tcase_add_loop_test(t, test_loss_ex_sweep, 0, n_sweep());
    tcase_add_loop_test(t, test_loss_ex_nd, 0, th_small() ? 6 : 30);
    tcase_add_test(t, test_loss_ex_defaults);
    tcase_add_test(t, test_loss_ex_ignored_and_bad);
    tcase_add_test(t, test_loss_ex_finite_diff);
    tcase_add_test(t, test_loss_ex_determinism);
    tcase_add_test(t, test_loss_ex_graph);
    tcase_add_test(t, test_loss_ex_errors);
    suite_add_tcase(s, t);
    return s;
}
