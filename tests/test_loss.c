/*
 * test_loss.c -- softmax cross-entropy and row argmax against the float64
 * reference: seeded sweeps (rows longer than a work-group, large logit
 * offsets, views at odd offsets), out-of-range labels, determinism,
 * finite differences of the reference, the op-table entry and every error
 * path.
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

static void expect_close(const th_dev *d, const double *ref, double tol, const char *what, const char *repro)
{
    float *out = th_read(d->t);
    long bad = th_first_nonfinite(out, (size_t)d->n);
    ck_assert_msg(bad < 0, "%s: element %ld not written (%g); %s", what, bad, bad >= 0 ? (double)out[bad] : 0.0,
                  repro);
    double e = th_nrms(out, ref, (size_t)d->n);
    ck_assert_msg(e <= tol, "%s: nrms %.3g > %.1g; %s", what, e, tol, repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

typedef struct {
    int N, K, view, with_probs;
    double offset;
} ce_shape;

/* Shape i: rows from 1 to a few hundred, classes from 1 to past any
 * work-group size, logits shifted far from zero (stability). */
static ce_shape sweep_shape(th_rng *r, int i)
{
    ce_shape s;
    s.N = i % 9 == 0 ? th_int(r, 100, 400) : th_int(r, 1, 40);
    s.K = i % 7 == 0 ? th_int(r, 257, 1100) : th_int(r, 1, 60);
    s.view = i % 3 == 0 ? 1 + 2 * (i % 4) : 0;
    s.with_probs = i % 5 != 4;
    s.offset = i % 4 == 1 ? th_uniform(r, -80, 80) : 0;
    return s;
}

static int n_sweep(void)
{
    return th_small() ? 6 : th_full() ? 400 : 100;
}

typedef struct {
    float *logits;
    int32_t *labels;
    double *logits_d, *probs, loss;
} ce_data;

static ce_data data_make(th_rng *r, const ce_shape *s)
{
    ce_data d;
    size_t n = (size_t)s->N * s->K;
    d.logits = th_malloc(n * 4);
    d.labels = th_malloc((size_t)s->N * 4);
    d.logits_d = th_malloc(n * 8);
    d.probs = th_malloc(n * 8);
    th_fill_normal(r, d.logits, n, s->offset, th_uniform(r, 0.5, 4));
    for (int i = 0; i < s->N; i++)
        d.labels[i] = th_int(r, 0, s->K - 1);
    th_to_double(d.logits, d.logits_d, n);
    d.loss = ref_softmax_ce_forward(d.logits_d, d.labels, s->N, s->K, d.probs);
    return d;
}

static void data_free(ce_data *d)
{
    free(d->logits);
    free(d->labels);
    free(d->logits_d);
    free(d->probs);
}

START_TEST(test_loss_forward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 3000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    ce_shape s = sweep_shape(&r, _i);
    char repro[160];
    snprintf(repro, sizeof repro, "logits [%d, %d] offset %.1f%s%s seed %llu", s.N, s.K, s.offset,
             s.with_probs ? "" : " no probs", s.view ? " (views)" : "", (unsigned long long)seed);
    ce_data d = data_make(&r, &s);
    int64_t xs[2] = {s.N, s.K}, ls[1] = {s.N}, one[1] = {1};
    th_dev tx = th_dev_make(ctx, 0, 2, xs, s.view, d.logits), tl = th_dev_make(ctx, 1, 1, ls, s.view ? s.view + 1 : 0, d.labels),
           tloss = th_dev_make(ctx, 0, 1, one, s.view ? s.view + 2 : 0, NULL),
           tp = th_dev_make(ctx, 0, 2, xs, s.view ? s.view + 3 : 0, NULL);
    TH_OK(ctx, teeny_softmax_cross_entropy_forward(ctx, tx.t, tl.t, tloss.t, s.with_probs ? tp.t : NULL));
    expect_close(&tloss, &d.loss, TOL, "loss", repro);
    if (s.with_probs)
        expect_close(&tp, d.probs, TOL, "probs", repro);
    data_free(&d);
    th_dev_free(&tx);
    th_dev_free(&tl);
    th_dev_free(&tloss);
    th_dev_free(&tp);
}
END_TEST

START_TEST(test_loss_backward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 4000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    ce_shape s = sweep_shape(&r, _i);
    char repro[160];
    snprintf(repro, sizeof repro, "logits [%d, %d] offset %.1f%s seed %llu", s.N, s.K, s.offset,
             s.view ? " (views)" : "", (unsigned long long)seed);
    ce_data d = data_make(&r, &s);
    size_t n = (size_t)s.N * s.K;
    float dloss = (float)th_uniform(&r, 0.25, 2);
    int64_t xs[2] = {s.N, s.K}, ls[1] = {s.N}, one[1] = {1};
    th_dev tx = th_dev_make(ctx, 0, 2, xs, s.view, d.logits), tl = th_dev_make(ctx, 1, 1, ls, s.view ? s.view + 1 : 0, d.labels),
           tloss = th_dev_make(ctx, 0, 1, one, 0, NULL), tp = th_dev_make(ctx, 0, 2, xs, s.view ? s.view + 3 : 0, NULL),
           tdl = th_dev_make(ctx, 0, 1, one, s.view ? s.view + 2 : 0, &dloss),
           tdx = th_dev_make(ctx, 0, 2, xs, s.view ? s.view + 4 : 0, NULL);
    TH_OK(ctx, teeny_softmax_cross_entropy_forward(ctx, tx.t, tl.t, tloss.t, tp.t));
    TH_OK(ctx, teeny_softmax_cross_entropy_backward(ctx, tp.t, tl.t, tdl.t, tdx.t));
    double *ref = th_malloc(n * 8);
    ref_softmax_ce_backward(d.probs, d.labels, dloss, s.N, s.K, ref);
    expect_close(&tdx, ref, TOL, "dlogits", repro);
    free(ref);
    data_free(&d);
    th_dev_free(&tx);
    th_dev_free(&tl);
    th_dev_free(&tloss);
    th_dev_free(&tp);
    th_dev_free(&tdl);
    th_dev_free(&tdx);
}
END_TEST

/* Each row's loss on its own (row views of one logits tensor), so an error
 * in one row is not diluted by the batch mean. */
START_TEST(test_loss_rows)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(12);
    ce_shape s = {9, 300, 0, 1, 95.0}; /* exp(95) overflows fp32: needs the max shift */
    ce_data d = data_make(&r, &s);
    int64_t xs[2] = {s.N, s.K}, ls[1] = {s.N}, one[1] = {1}, row[2] = {1, s.K};
    teeny_tensor *tx = th_tensor_from(ctx, 2, xs, d.logits), *tl = NULL, *tloss = th_tensor(ctx, 1, one);
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, ls, &tl));
    TH_OK(ctx, teeny_tensor_write_i32(tl, d.labels, (size_t)s.N));
    for (int n = 0; n < s.N; n++) {
        teeny_tensor *xv = NULL, *lv = NULL;
        TH_OK(ctx, teeny_tensor_view(tx, (int64_t)n * s.K, 2, row, &xv));
        TH_OK(ctx, teeny_tensor_view(tl, n, 1, one, &lv));
        th_poison(tloss);
        TH_OK(ctx, teeny_softmax_cross_entropy_forward(ctx, xv, lv, tloss, NULL));
        double want = ref_softmax_ce_forward(d.logits_d + (size_t)n * s.K, d.labels + n, 1, s.K, NULL);
        float got;
        TH_OK(ctx, teeny_tensor_read(tloss, &got, 1));
        ck_assert_msg(fabs(got - want) <= TOL * fabs(want), "row %d: loss %.8g, want %.8g", n, (double)got, want);
        teeny_tensor_destroy(xv);
        teeny_tensor_destroy(lv);
    }
    data_free(&d);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(tl);
    teeny_tensor_destroy(tloss);
}
END_TEST

/* A label outside [0, K) reads nothing out of bounds and shows up as NaN:
 * in the loss and in its own row of dlogits only. */
START_TEST(test_loss_bad_label)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(11);
    int N = 5, K = 7;
    int64_t xs[2] = {N, K}, ls[1] = {N}, one[1] = {1};
    float x[35], dl = 1.0f;
    th_fill_normal(&r, x, 35, 0, 1);
    for (int bad = 0; bad < 3; bad++) {
        int32_t labels[5] = {1, 0, 6, 3, 2};
        labels[2] = bad == 0 ? K : bad == 1 ? -1 : INT32_MAX;
        th_dev tx = th_dev_make(ctx, 0, 2, xs, 0, x), tl = th_dev_make(ctx, 1, 1, ls, 0, labels),
               tloss = th_dev_make(ctx, 0, 1, one, 0, NULL), tp = th_dev_make(ctx, 0, 2, xs, 0, NULL),
               tdl = th_dev_make(ctx, 0, 1, one, 0, &dl), tdx = th_dev_make(ctx, 0, 2, xs, 0, NULL);
        TH_OK(ctx, teeny_softmax_cross_entropy_forward(ctx, tx.t, tl.t, tloss.t, tp.t));
        TH_OK(ctx, teeny_softmax_cross_entropy_backward(ctx, tp.t, tl.t, tdl.t, tdx.t));
        float loss, *p = th_read(tp.t), *g = th_read(tdx.t);
        TH_OK(ctx, teeny_tensor_read(tloss.t, &loss, 1));
        ck_assert_msg(isnan(loss), "label %d: loss %g, want NaN", labels[2], (double)loss);
        ck_assert(th_first_nonfinite(p, 35) < 0);
        for (int i = 0; i < 35; i++)
            ck_assert_msg(i / K == 2 ? isnan(g[i]) : isfinite(g[i]), "label %d: dlogits[%d] = %g", labels[2], i,
                          (double)g[i]);
        free(p);
        free(g);
        th_dev_free(&tx);
        th_dev_free(&tl);
        th_dev_free(&tloss);
        th_dev_free(&tp);
        th_dev_free(&tdl);
        th_dev_free(&tdx);
    }
}
END_TEST

START_TEST(test_loss_argmax)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 5000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    int N = th_int(&r, 1, 300), K = _i % 3 == 0 ? th_int(&r, 200, 700) : th_int(&r, 1, 20);
    int view = _i % 2 ? 3 : 0;
    size_t n = (size_t)N * K;
    float *x = th_malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)th_int(&r, -4, 4); /* many ties */
    if (N > 2)
        x[(size_t)K + (size_t)th_int(&r, 0, K - 1)] = NAN;
    int64_t xs[2] = {N, K}, os[1] = {N};
    th_dev tx = th_dev_make(ctx, 0, 2, xs, view, x), to = th_dev_make(ctx, 1, 1, os, view ? view + 2 : 0, NULL);
    TH_OK(ctx, teeny_argmax_rows(ctx, tx.t, to.t));
    int32_t *got = th_malloc((size_t)N * 4), *want = th_malloc((size_t)N * 4);
    TH_OK(ctx, teeny_tensor_read_i32(to.t, got, (size_t)N));
    ref_argmax_rows(x, N, K, want);
    for (int i = 0; i < N; i++)
        ck_assert_msg(got[i] == want[i], "row %d: %d, want %d; [%d, %d] seed %llu", i, got[i], want[i], N, K,
                      (unsigned long long)seed);
    th_dev_check_guard(&to, "argmax", "argmax rows");
    free(x);
    free(got);
    free(want);
    th_dev_free(&tx);
    th_dev_free(&to);
}
END_TEST

START_TEST(test_loss_determinism)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(21);
    ce_shape s = {333, 517, 0, 1, 3.0};
    ce_data d = data_make(&r, &s);
    float dl = 1.0f;
    int64_t xs[2] = {s.N, s.K}, ls[1] = {s.N}, one[1] = {1};
    th_dev tx = th_dev_make(ctx, 0, 2, xs, 0, d.logits), tl = th_dev_make(ctx, 1, 1, ls, 0, d.labels),
           tdl = th_dev_make(ctx, 0, 1, one, 0, &dl);
    float *out[2][3];
    for (int run = 0; run < 2; run++) {
        th_dev tloss = th_dev_make(ctx, 0, 1, one, 0, NULL), tp = th_dev_make(ctx, 0, 2, xs, 0, NULL),
               tdx = th_dev_make(ctx, 0, 2, xs, 0, NULL);
        TH_OK(ctx, teeny_softmax_cross_entropy_forward(ctx, tx.t, tl.t, tloss.t, tp.t));
        TH_OK(ctx, teeny_softmax_cross_entropy_backward(ctx, tp.t, tl.t, tdl.t, tdx.t));
        out[run][0] = th_read(tloss.t);
        out[run][1] = th_read(tp.t);
        out[run][2] = th_read(tdx.t);
        th_dev_free(&tloss);
        th_dev_free(&tp);
        th_dev_free(&tdx);
    }
    size_t sizes[3] = {4, (size_t)s.N * s.K * 4, (size_t)s.N * s.K * 4};
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(!memcmp(out[0][k], out[1][k], sizes[k]), "output %d differs between runs", k);
        free(out[0][k]);
        free(out[1][k]);
    }
    data_free(&d);
    th_dev_free(&tx);
    th_dev_free(&tl);
    th_dev_free(&tdl);
}
END_TEST

/* Reference gradient against central differences of dloss * loss. */
START_TEST(test_loss_finite_diff)
{
    th_rng r = th_rng_make(3);
    enum { N = 3, K = 4 };
    double x[N * K], p[N * K], g[N * K], dloss = 0.8;
    int32_t labels[N] = {2, 0, 3};
    for (int i = 0; i < N * K; i++)
        x[i] = 2 * th_normal(&r);
    ref_softmax_ce_forward(x, labels, N, K, p);
    ref_softmax_ce_backward(p, labels, dloss, N, K, g);
    for (int i = 0; i < N * K; i++) {
        double keep = x[i], h = 1e-5;
        x[i] = keep + h;
        double lp = ref_softmax_ce_forward(x, labels, N, K, NULL);
        x[i] = keep - h;
        double lm = ref_softmax_ce_forward(x, labels, N, K, NULL);
        x[i] = keep;
        double fd = dloss * (lp - lm) / (2 * h);
        ck_assert_msg(fabs(fd - g[i]) <= 1e-7, "elem %d: fd %g ref %g", i, fd, g[i]);
    }
}
END_TEST

START_TEST(test_loss_op_table)
{
    teeny_ctx *ctx = th_ctx();
    const teeny__op *op = &teeny__ops[TEENY__OP_SOFTMAX_CE];
    ck_assert_str_eq(op->name, "softmax_ce");
    ck_assert(op->infer && op->forward && op->backward);
    teeny__node_shapes s = {.n_in = 2,
                            .in = {{.ndim = 2, .shape = {8, 10}}, {.ndim = 1, .shape = {8}, .is_i32 = 1}}};
    TH_OK(ctx, op->infer(ctx, &s));
    ck_assert(s.out.ndim == 1 && s.out.shape[0] == 1 && !s.out.is_i32);
    ck_assert(s.n_param == 0 && s.n_state == 0 && s.n_saved == 1 && s.saved_needs_training == 1);
    ck_assert(s.saved[0].ndim == 2 && s.saved[0].shape[0] == 8 && s.saved[0].shape[1] == 10 && !s.saved[0].is_i32);
    teeny__node_shapes f = {.n_in = 2, .in = {{.ndim = 2, .shape = {8, 10}}, {.ndim = 1, .shape = {8}}}};
    TH_STATUS(ctx, TEENY_ERR_SHAPE, op->infer(ctx, &f)); /* fp32 labels */
    teeny__node_shapes m = {.n_in = 2,
                            .in = {{.ndim = 2, .shape = {8, 10}}, {.ndim = 1, .shape = {7}, .is_i32 = 1}}};
    TH_STATUS(ctx, TEENY_ERR_SHAPE, op->infer(ctx, &m));
    teeny__node_shapes big = {.n_in = 2, .in = {{.ndim = 2, .shape = {1 << 20, 1 << 12}},
                                                {.ndim = 1, .shape = {1 << 20}, .is_i32 = 1}}};
    TH_STATUS(ctx, TEENY_ERR_RANGE, op->infer(ctx, &big));
}
END_TEST

/* Where a device limits a work-item's loop trips (Mesa's llvmpipe; forced
 * here with th_loop_limit): ce_mean's loop over 6000 rows (24 rounds of
 * 256, + a 10-trip tree; limit 60: 12 rounds a launch) and argmax's scan
 * of a 1000-column row (limit 300: 143 columns a launch, across a NaN and
 * ties) run in launches that carry the running results: the bits of one
 * launch, which meet the reference. A row too long for the softmax's
 * passes (3 * (10000/256 + 1) + 18 = 141 trips) or a limit without room
 * for one column is TEENY_ERR_UNSUPPORTED, the outputs untouched. */
START_TEST(test_loss_split_loops)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(61);
    ce_shape sh = {6000, 7, 0, 1, 0.0};
    ce_data d = data_make(&r, &sh);
    int64_t xs[2] = {sh.N, sh.K}, ls[1] = {sh.N}, one[1] = {1};
    th_dev tx = th_dev_make(ctx, 0, 2, xs, 0, d.logits), tl = th_dev_make(ctx, 1, 1, ls, 0, d.labels),
           tloss = th_dev_make(ctx, 0, 1, one, 1, NULL), tp = th_dev_make(ctx, 0, 2, xs, 0, NULL);
    float *first[2] = {NULL, NULL};
    for (int li = 0; li < 2; li++) {
        th_loop_limit(li ? 60 : 0);
        th_poison(tloss.t);
        th_poison(tp.t);
        teeny__calls_reset();
        TH_OK(ctx, teeny_softmax_cross_entropy_forward(ctx, tx.t, tl.t, tloss.t, tp.t));
        TH_OK(ctx, teeny_ctx_finish(ctx));
        ck_assert_int_eq(teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel), li ? 3 : 2);
        float *got[2] = {th_read(tloss.t), th_read(tp.t)};
        if (!li) {
            ck_assert_msg(fabs(got[0][0] - d.loss) <= TOL * fabs(d.loss), "loss %.8g, want %.8g", (double)got[0][0],
                          d.loss);
            expect_close(&tp, d.probs, TOL, "probs", "test_loss_split_loops");
            first[0] = got[0];
            first[1] = got[1];
            continue;
        }
        ck_assert_msg(!memcmp(got[0], first[0], 4) && !memcmp(got[1], first[1], (size_t)tp.n * 4),
                      "loss or probs differ from one launch's");
        th_dev_check_guard(&tloss, "loss", "test_loss_split_loops");
        free(got[0]);
        free(got[1]);
    }
    free(first[0]);
    free(first[1]);

    /* argmax over [6, 1000]: ties everywhere, a NaN in row 2 */
    int N = 6, K = 1000;
    float *x = th_malloc((size_t)N * K * 4);
    for (int i = 0; i < N * K; i++)
        x[i] = (float)th_int(&r, -4, 4);
    x[2 * K + 500] = NAN;
    int64_t as[2] = {N, K}, os[1] = {N};
    th_dev ta = th_dev_make(ctx, 0, 2, as, 0, x), to = th_dev_make(ctx, 1, 1, os, 2, NULL);
    int32_t want[6], got[6];
    ref_argmax_rows(x, N, K, want);
    for (int li = 0; li < 2; li++) {
        th_loop_limit(li ? 300 : 0);
        teeny__calls_reset();
        TH_OK(ctx, teeny_argmax_rows(ctx, ta.t, to.t));
        TH_OK(ctx, teeny_ctx_finish(ctx));
        ck_assert_int_eq(teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel), li ? 7 : 1);
        TH_OK(ctx, teeny_tensor_read_i32(to.t, got, (size_t)N));
        for (int i = 0; i < N; i++)
            ck_assert_msg(got[i] == want[i], "limit %d: row %d: %d, want %d", li ? 300 : 0, i, got[i], want[i]);
        th_dev_check_guard(&to, "argmax", "test_loss_split_loops");
    }

    /* rejected before anything is written */
    int64_t ws[2] = {2, 10000}, ws_l[1] = {2};
    float *wx = th_malloc(20000 * 4);
    th_fill_normal(&r, wx, 20000, 0, 1);
    int32_t wl[2] = {3, 9999};
    th_dev twx = th_dev_make(ctx, 0, 2, ws, 0, wx), twl = th_dev_make(ctx, 1, 1, ws_l, 0, wl),
           twp = th_dev_make(ctx, 0, 2, ws, 0, NULL);
    th_loop_limit(200);
    th_poison(tloss.t);
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_softmax_cross_entropy_forward(ctx, twx.t, twl.t, tloss.t, twp.t));
    th_expect_all(tloss.t, NAN);
    th_expect_all(twp.t, NAN);
    th_loop_limit(2);
    int32_t sentinel[6] = {-3, -3, -3, -3, -3, -3};
    TH_OK(ctx, teeny_tensor_write_i32(to.t, sentinel, 6));
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_argmax_rows(ctx, ta.t, to.t));
    TH_OK(ctx, teeny_tensor_read_i32(to.t, got, 6));
    ck_assert(!memcmp(got, sentinel, sizeof got));
    th_loop_limit(-1);
    free(x);
    free(wx);
    data_free(&d);
    th_dev *ds[] = {&tx, &tl, &tloss, &tp, &ta, &to, &twx, &twl, &twp};
    for (int i = 0; i < 9; i++)
        th_dev_free(ds[i]);
}
END_TEST

START_TEST(test_loss_errors)
{
    teeny_ctx *ctx = th_ctx();
    int64_t xs[2] = {4, 3}, x3[3] = {4, 3, 1}, ls[1] = {4}, l5[1] = {5}, two[1] = {2}, one[1] = {1}, ps[2] = {4, 2},
            big[1] = {40};
    teeny_tensor *x = th_tensor(ctx, 2, xs), *xr3 = th_tensor(ctx, 3, x3), *loss = th_tensor(ctx, 1, one),
                 *loss2 = th_tensor(ctx, 1, two), *p = th_tensor(ctx, 2, xs), *pbad = th_tensor(ctx, 2, ps),
                 *dx = th_tensor(ctx, 2, xs), *dl = th_tensor(ctx, 1, one), *lab_f = th_tensor(ctx, 1, ls),
                 *base = th_tensor(ctx, 1, big), *lab = NULL, *lab5 = NULL, *xv = NULL, *pv = NULL, *am = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, ls, &lab));
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, l5, &lab5));
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, ls, &am));
    int32_t lv[4] = {0, 1, 2, 0};
    TH_OK(ctx, teeny_tensor_write_i32(lab, lv, 4));
    TH_OK(ctx, teeny_tensor_write_i32(am, lv, 4));
    teeny_tensor *filled[] = {x, loss, p, dx, dl, base};
    for (size_t i = 0; i < sizeof filled / sizeof filled[0]; i++)
        TH_OK(ctx, teeny_tensor_fill(filled[i], 7.0f));
    TH_OK(ctx, teeny_tensor_view(base, 0, 2, xs, &xv));
    TH_OK(ctx, teeny_tensor_view(base, 6, 2, xs, &pv)); /* overlaps xv */

    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_softmax_cross_entropy_forward(NULL, x, lab, loss, p));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_forward(ctx, NULL, lab, loss, p));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_forward(ctx, x, NULL, loss, p));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_forward(ctx, x, lab, NULL, p));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_forward(ctx, x, lab_f, loss, p));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_forward(ctx, xr3, lab, loss, p));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_forward(ctx, x, lab5, loss, p));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_forward(ctx, x, lab, loss2, p));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_forward(ctx, x, lab, loss, pbad));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_forward(ctx, xv, lab, loss, pv));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_forward(ctx, x, lab, loss, x));
    th_expect_all(loss, 7.0f);
    th_expect_all(p, 7.0f);
    th_expect_all(base, 7.0f);

    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_softmax_cross_entropy_backward(NULL, p, lab, dl, dx));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_backward(ctx, p, lab, NULL, dx));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_backward(ctx, p, lab, dl, NULL));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_backward(ctx, p, lab5, dl, dx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_backward(ctx, p, lab, loss2, dx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax_cross_entropy_backward(ctx, p, lab, dl, pbad));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_backward(ctx, p, lab, dl, p));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_cross_entropy_backward(ctx, xv, lab, dl, pv));
    th_expect_all(dx, 7.0f);
    th_expect_all(base, 7.0f);

    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_argmax_rows(NULL, x, am));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_argmax_rows(ctx, x, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_argmax_rows(ctx, x, dx));      /* fp32 out */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_argmax_rows(ctx, x, lab5));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_argmax_rows(ctx, xr3, am));
    int32_t got[4];
    TH_OK(ctx, teeny_tensor_read_i32(am, got, 4));
    ck_assert(!memcmp(got, lv, sizeof got));

    teeny_tensor *all[] = {x, xr3, loss, loss2, p, pbad, dx, dl, lab_f, base, lab, lab5, xv, pv, am};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        teeny_tensor_destroy(all[i]);
}
END_TEST

Suite *suite_loss(void)
{
    Suite *s = suite_create("loss");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_loss_forward, 0, n_sweep());
    tcase_add_loop_test(fwd, test_loss_argmax, 0, th_small() ? 3 : 30);
    tcase_add_test(fwd, test_loss_bad_label);
    tcase_add_test(fwd, test_loss_rows);
    tcase_add_test(fwd, test_loss_determinism);
    tcase_add_test(fwd, test_loss_op_table);
    tcase_add_test(fwd, test_loss_split_loops);
    tcase_add_loop_test(bwd, test_loss_backward, 0, n_sweep());
    tcase_add_test(bwd, test_loss_finite_diff);
    tcase_add_test(err, test_loss_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
