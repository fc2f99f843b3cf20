/*
 * test_norm.c -- softmax / log-softmax along any axis and layer norm over
 * trailing axes (src/ops/norm/norm.c) against float64 references: seeded
 * sweeps of ranks 1..5 (views at odd offsets), the references' gradients
 * by central differences, a training graph through both, the loop-budget
 * refusal, determinism and the error paths; softmax's masked_zero option
 * (wholly -inf lines give 0).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/ops.h"
#include "ref/norm_ref.h"

static int n_sweep(void)
{
    return th_small() ? 6 : th_full() ? 300 : 60;
}

static void expect(const th_dev *d, const double *ref, double tol, const char *what, const char *repro)
{
    float *out = th_read(d->t);
    ck_assert_msg(th_first_nonfinite(out, (size_t)d->n) < 0, "%s: not written; %s", what, repro);
    double e = th_nrms(out, ref, (size_t)d->n);
    ck_assert_msg(e <= tol, "%s: nrms %.3g; %s", what, e, repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

static int64_t prod(const int64_t *v, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= v[i];
    return p;
}

START_TEST(test_softmax_sweep)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 5000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    int ndim = 1 + _i % 5, axis = th_int(&r, 0, ndim - 1), log_out = _i % 2, view = _i % 3 ? 0 : 3;
    int64_t shape[5];
    for (int d = 0; d < ndim; d++)
        shape[d] = th_int(&r, 1, ndim > 3 ? 5 : 9);
    if (_i % 7 == 6)
        shape[axis] = th_int(&r, 200, 2000);
    int64_t n = prod(shape, 0, ndim), L = shape[axis], inner = prod(shape, axis + 1, ndim), outer = n / L / inner;
    float *x = th_malloc((size_t)n * 4), *dy = th_malloc((size_t)n * 4);
    th_fill_uniform(&r, x, (size_t)n, -8, 8);
    th_fill_uniform(&r, dy, (size_t)n, -1, 1);
    double *xd = th_dbl(x, (size_t)n), *dyd = th_dbl(dy, (size_t)n), *y = th_malloc((size_t)n * 8),
           *dx = th_malloc((size_t)n * 8);
    ref_softmax(xd, outer, L, inner, log_out, y);
    th_dev tx = th_dev_make(ctx, 0, ndim, shape, view, x), ty = th_dev_make(ctx, 0, ndim, shape, view + 1, NULL),
           tdy = th_dev_make(ctx, 0, ndim, shape, 0, dy), tdx = th_dev_make(ctx, 0, ndim, shape, view, NULL);
    char repro[128];
    snprintf(repro, sizeof repro, "rank %d axis %d L %lld log %d seed %llu", ndim, axis, (long long)L, log_out,
             (unsigned long long)seed);
    TH_OK(ctx, teeny_softmax(ctx, axis, log_out, tx.t, ty.t));
    double tol = 1e-6 + 2e-7 * sqrt((double)L); /* a sum of L fp32 terms */
    expect(&ty, y, tol, "y", repro);
    /* the backward from the device's y, against the reference from the same y */
    float *yf = th_read(ty.t);
    double *yd = th_dbl(yf, (size_t)n);
    ref_softmax_backward(yd, dyd, outer, L, inner, log_out, dx);
    TH_OK(ctx, teeny_softmax_backward(ctx, axis, log_out, ty.t, tdy.t, tdx.t));
    double *mag = th_malloc((size_t)n * 8);
    for (int64_t k = 0; k < n; k++) /* dx is a difference: its terms' size */
        mag[k] = fabs(dx[k]) + (log_out ? fabs(dyd[k]) : fabs(yd[k] * dyd[k])) + 1e-3;
    float *g = th_read(tdx.t);
    ck_assert_msg(th_first_nonfinite(g, (size_t)n) < 0, "dx not written; %s", repro);
    ck_assert_msg(th_nrms_mag(g, dx, mag, (size_t)n) <= 2e-6, "dx: nrms_mag %.3g; %s", th_nrms_mag(g, dx, mag, (size_t)n),
                  repro);
    th_dev_check_guard(&tdx, "dx", repro);
    /* in place: y = x */
    TH_OK(ctx, teeny_softmax(ctx, axis, log_out, tx.t, tx.t));
    expect(&tx, y, tol, "y = x", repro);
    free(g);
    free(mag);
    free(yf);
    free(yd);
    free(x);
    free(dy);
    free(xd);
    free(dyd);
    free(y);
    free(dx);
    th_dev_free(&tx);
    th_dev_free(&ty);
    th_dev_free(&tdy);
    th_dev_free(&tdx);
}
END_TEST

START_TEST(test_layernorm_sweep)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 6000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    int ndim = 1 + _i % 5, axis = th_int(&r, 0, ndim - 1), has_b = _i % 3 != 1, view = _i % 4 == 1 ? 5 : 0;
    int64_t shape[5], ms[5];
    for (int d = 0; d < ndim; d++)
        shape[d] = th_int(&r, 1, ndim > 3 ? 5 : 9);
    if (_i % 7 == 6)
        shape[ndim - 1] = th_int(&r, 300, 3000);
    int64_t n = prod(shape, 0, ndim), N = prod(shape, axis, ndim), M = n / N;
    int mnd = axis ? axis : 1;
    for (int d = 0; d < mnd; d++)
        ms[d] = axis ? shape[d] : 1;
    float eps = _i % 2 ? 1e-5f : 0.1f;
    float *x = th_malloc((size_t)n * 4), *dy = th_malloc((size_t)n * 4), *w = th_malloc((size_t)N * 4),
          *b = th_malloc((size_t)N * 4);
    th_fill_uniform(&r, x, (size_t)n, -3, 5);
    th_fill_uniform(&r, dy, (size_t)n, -1, 1);
    th_fill_uniform(&r, w, (size_t)N, 0.5, 2);
    th_fill_uniform(&r, b, (size_t)N, -1, 1);
    double *xd = th_dbl(x, (size_t)n), *dyd = th_dbl(dy, (size_t)n), *wd = th_dbl(w, (size_t)N),
           *bd = th_dbl(b, (size_t)N), *y = th_malloc((size_t)n * 8), *mean = th_malloc((size_t)M * 8),
           *rstd = th_malloc((size_t)M * 8), *dx = th_malloc((size_t)n * 8), *dw = th_malloc((size_t)N * 8),
           *db = th_malloc((size_t)N * 8);
    ref_layernorm(xd, M, N, wd, has_b ? bd : NULL, eps, y, mean, rstd);
    ref_layernorm_backward(xd, M, N, wd, dyd, eps, dx, dw, db);
    th_dev tx = th_dev_make(ctx, 0, ndim, shape, view, x), tw = th_dev_make(ctx, 0, ndim - axis, shape + axis, 0, w),
           tb = th_dev_make(ctx, 0, ndim - axis, shape + axis, view, b),
           ty = th_dev_make(ctx, 0, ndim, shape, view ? view + 1 : 0, NULL), tm = th_dev_make(ctx, 0, mnd, ms, view, NULL),
           tr = th_dev_make(ctx, 0, mnd, ms, 0, NULL), tdy = th_dev_make(ctx, 0, ndim, shape, 0, dy),
           tdx = th_dev_make(ctx, 0, ndim, shape, view, NULL),
           tdw = th_dev_make(ctx, 0, ndim - axis, shape + axis, 0, NULL),
           tdb = th_dev_make(ctx, 0, ndim - axis, shape + axis, view, NULL);
    char repro[128];
    snprintf(repro, sizeof repro, "rank %d axis %d M %lld N %lld bias %d eps %g seed %llu", ndim, axis, (long long)M,
             (long long)N, has_b, (double)eps, (unsigned long long)seed);
    TH_OK(ctx, teeny_layernorm_forward(ctx, axis, eps, tx.t, tw.t, has_b ? tb.t : NULL, ty.t, tm.t, tr.t));
    double tol = 1e-6 + 2e-7 * sqrt((double)N); /* sums of N fp32 terms */
    expect(&ty, y, 10 * tol, "y", repro);
    expect(&tm, mean, tol, "mean", repro);
    expect(&tr, rstd, 10 * tol, "rstd", repro);
    TH_OK(ctx, teeny_layernorm_backward(ctx, axis, tx.t, tw.t, tm.t, tr.t, tdy.t, tdx.t, tdw.t, has_b ? tdb.t : NULL));
    /* dx = rstd (g - mean(g) - xhat mean(g xhat)) cancels (to 0 for rows of
     * 1 or 2): measured against the size of its terms */
    double *mag = th_malloc((size_t)n * 8);
    for (int64_t rr = 0; rr < M; rr++) {
        double ag = 0, agx = 0;
        for (int64_t i = 0; i < N; i++) {
            double gi = fabs(dyd[rr * N + i] * wd[i]);
            ag += gi / (double)N;
            agx += gi * fabs(xd[rr * N + i] - mean[rr]) * rstd[rr] / (double)N;
        }
        for (int64_t i = 0; i < N; i++)
            mag[rr * N + i] = rstd[rr] * (fabs(dyd[rr * N + i] * wd[i]) + ag +
                                          fabs(xd[rr * N + i] - mean[rr]) * rstd[rr] * agx);
    }
    float *gx = th_read(tdx.t);
    ck_assert_msg(th_first_nonfinite(gx, (size_t)n) < 0, "dx not written; %s", repro);
    ck_assert_msg(th_nrms_mag(gx, dx, mag, (size_t)n) <= 10 * tol, "dx: nrms_mag %.3g; %s",
                  th_nrms_mag(gx, dx, mag, (size_t)n), repro);
    th_dev_check_guard(&tdx, "dx", repro);
    free(gx);
    free(mag);
    expect(&tdw, dw, 10 * tol, "dw", repro);
    if (has_b)
        expect(&tdb, db, 10 * tol, "db", repro);
    /* same inputs, same bits */
    float *first = th_read(tdw.t);
    TH_OK(ctx, teeny_layernorm_backward(ctx, axis, tx.t, tw.t, tm.t, tr.t, tdy.t, NULL, tdw.t, NULL));
    float *again = th_read(tdw.t);
    ck_assert_msg(!memcmp(first, again, (size_t)N * 4), "dw differs between runs; %s", repro);
    free(first);
    free(again);
    float *fs[] = {x, dy, w, b};
    double *ds[] = {xd, dyd, wd, bd, y, mean, rstd, dx, dw, db};
    for (int k = 0; k < 4; k++)
        free(fs[k]);
    for (int k = 0; k < 10; k++)
        free(ds[k]);
    th_dev *tt[] = {&tx, &tw, &tb, &ty, &tm, &tr, &tdy, &tdx, &tdw, &tdb};
    for (int k = 0; k < 10; k++)
        th_dev_free(tt[k]);
}
END_TEST

/* The references' gradients against central differences of sum(y dy). */
START_TEST(test_norm_reference)
{
    th_rng r = th_rng_make(41);
    double x[24], dy[24], y[24], w[6], b[6], dx[24], dw[6], db[6], g[24];
    for (int i = 0; i < 24; i++) {
        x[i] = th_uniform(&r, -2, 2);
        dy[i] = th_normal(&r);
    }
    for (int i = 0; i < 6; i++) {
        w[i] = th_uniform(&r, 0.5, 2);
        b[i] = th_normal(&r);
    }
    for (int log_out = 0; log_out < 2; log_out++) { /* [2, 3, 4], axis 1 */
        ref_softmax(x, 2, 3, 4, log_out, y);
        ref_softmax_backward(y, dy, 2, 3, 4, log_out, g);
        for (int i = 0; i < 24; i++) {
            double keep = x[i], h = 1e-6, l[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                x[i] = keep + (sgn ? -h : h);
                ref_softmax(x, 2, 3, 4, log_out, y);
                l[sgn] = 0;
                for (int k = 0; k < 24; k++)
                    l[sgn] += y[k] * dy[k];
            }
            x[i] = keep;
            ck_assert_msg(fabs((l[0] - l[1]) / (2 * h) - g[i]) <= 1e-6, "softmax log %d elem %d", log_out, i);
        }
    }
    ref_layernorm_backward(x, 4, 6, w, dy, 0.01, dx, dw, db);
    double *vars[3] = {x, w, b}, *grads[3] = {dx, dw, db};
    int counts[3] = {24, 6, 6};
    for (int v = 0; v < 3; v++)
        for (int i = 0; i < counts[v]; i++) {
            double keep = vars[v][i], h = 1e-6, l[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                vars[v][i] = keep + (sgn ? -h : h);
                ref_layernorm(x, 4, 6, w, b, 0.01, y, NULL, NULL);
                l[sgn] = 0;
                for (int k = 0; k < 24; k++)
                    l[sgn] += y[k] * dy[k];
            }
            vars[v][i] = keep;
            ck_assert_msg(fabs((l[0] - l[1]) / (2 * h) - grads[v][i]) <= 1e-6 * (1 + fabs(grads[v][i])),
                          "layernorm var %d elem %d", v, i);
        }
}
END_TEST

/* x [B, 5] -> layer norm (weight, bias) -> log softmax -> * c -> sum: the
 * parameter gradients against the references chained on the host. */
START_TEST(test_norm_graph)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, ln, sm, c, prodn, loss;
    int64_t xs[2] = {-1, 5}, cs[1] = {5};
    float xv[15] = {1, 2, -1, 0.5f, 3, -2, 0, 1, 1, 4, 0.1f, 0.2f, 0.3f, 0.4f, -0.5f}, cv[5] = {1, -2, 0.5f, 3, -1};
    TH_OK(ctx, teeny_graph_create(ctx, 3, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 2, xs, &x));
    TH_OK(ctx, teeny_graph_layernorm(g, "ln", x, -1, 1e-5f, 1, &ln));
    TH_OK(ctx, teeny_graph_softmax(g, "sm", ln, -1, 1, &sm));
    TH_OK(ctx, teeny_graph_constant(g, "c", 1, cs, cv, &c));
    TH_OK(ctx, teeny_graph_binary(g, "mul", TEENY_BINARY_MUL, sm, c, &prodn));
    teeny_reduce_params rp = {3, 0, 0};
    TH_OK(ctx, teeny_graph_reduce(g, "sum", prodn, &rp, &loss));
    teeny_node bad;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_softmax(g, "bad", x, 2, 0, &bad));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_layernorm(g, "bad", x, -3, 1e-5f, 0, &bad));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = 3;
    pp.loss = loss;
    teeny_plan *plan;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &plan));
    teeny_tensor *tin, *w, *dw, *bias, *dbias;
    TH_OK(ctx, teeny_plan_tensor(plan, x, &tin));
    TH_OK(ctx, teeny_tensor_write(tin, xv, 15));
    TH_OK(ctx, teeny_graph_param(g, 0, NULL, &w, &dw));
    TH_OK(ctx, teeny_graph_param(g, 1, NULL, &bias, &dbias));
    float wv[5] = {1.5f, 0.5f, 1, 2, 0.75f}, bv[5] = {0.1f, -0.2f, 0.3f, 0, 1};
    TH_OK(ctx, teeny_tensor_write(w, wv, 5));
    TH_OK(ctx, teeny_tensor_write(bias, bv, 5));
    TH_OK(ctx, teeny_plan_forward(plan));
    TH_OK(ctx, teeny_plan_backward(plan));
    float gw[5], gb[5];
    TH_OK(ctx, teeny_tensor_read(dw, gw, 5));
    TH_OK(ctx, teeny_tensor_read(dbias, gb, 5));
    double xd[15], wd[5], bd[5], lnv[15], smv[15], dsm[15], dln[15], rdw[5], rdb[5];
    for (int i = 0; i < 15; i++) {
        xd[i] = xv[i];
        dsm[i] = cv[i % 5];
    }
    for (int i = 0; i < 5; i++)
        wd[i] = wv[i], bd[i] = bv[i];
    ref_layernorm(xd, 3, 5, wd, bd, 1e-5, lnv, NULL, NULL);
    ref_softmax(lnv, 3, 5, 1, 1, smv);
    ref_softmax_backward(smv, dsm, 3, 5, 1, 1, dln);
    ref_layernorm_backward(xd, 3, 5, wd, dln, 1e-5, NULL, rdw, rdb);
    for (int i = 0; i < 5; i++) {
        ck_assert_msg(fabs(gw[i] - rdw[i]) <= 1e-5 * (1 + fabs(rdw[i])), "dweight[%d] %g, want %g", i, (double)gw[i],
                      rdw[i]);
        ck_assert_msg(fabs(gb[i] - rdb[i]) <= 1e-5 * (1 + fabs(rdb[i])), "dbias[%d] %g, want %g", i, (double)gb[i],
                      rdb[i]);
    }
    teeny_plan_destroy(plan);
    teeny_graph_destroy(g);
}
END_TEST

/* teeny_softmax_ex's masked_zero (ONNX Attention's decomposition): x [3,
 * 4, 5] along axis -2 (lines of 4, inner 5) with lines wholly -inf, lines
 * with some -inf, lines of -1e30: the wholly -inf lines are 0 (the plain
 * softmax's NaN there), every other line the plain softmax's bits, and
 * teeny_softmax_backward from that y gives those lines dx = 0; the graph
 * builder gives the eager bits; masked_zero with log, masked_zero 2 and
 * p NULL are TEENY_ERR_ARG. */
START_TEST(test_softmax_masked_zero)
{
    enum { OUTER = 3, L = 4, INNER = 5, N = OUTER * L * INNER };
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(5151);
    int64_t shape[3] = {OUTER, L, INNER};
    float x[N], dy[N], plain[N], zeroed[N], dx[N];
    int dead[OUTER * INNER];
    th_fill_uniform(&r, x, N, -4, 4);
    th_fill_uniform(&r, dy, N, -1, 1);
    for (int o = 0; o < OUTER; o++)
        for (int i = 0; i < INNER; i++) {
            int kind = (o * INNER + i) % 4; /* 0 drawn, 1 wholly -inf, 2 some -inf, 3 -1e30 */
            dead[o * INNER + i] = kind == 1;
            for (int l = 0; l < L; l++) {
                float *e = &x[(o * L + l) * INNER + i];
                *e = kind == 1 || (kind == 2 && l % 2) ? -INFINITY : kind == 3 ? -1e30f : *e;
            }
        }
    teeny_tensor *tx = th_tensor_from(ctx, 3, shape, x), *ty = th_tensor(ctx, 3, shape),
                 *tdy = th_tensor_from(ctx, 3, shape, dy), *tdx = th_tensor(ctx, 3, shape);
    teeny_softmax_params p = TEENY_SOFTMAX_PARAMS_INIT;
    p.axis = -2;
    p.masked_zero = 1;
    th_poison(ty);
    TH_OK(ctx, teeny_softmax(ctx, 1, 0, tx, ty));
    TH_OK(ctx, teeny_tensor_read(ty, plain, N));
    th_poison(ty);
    TH_OK(ctx, teeny_softmax_ex(ctx, &p, tx, ty));
    TH_OK(ctx, teeny_tensor_read(ty, zeroed, N));
    th_poison(tdx);
    TH_OK(ctx, teeny_softmax_backward(ctx, 1, 0, ty, tdy, tdx));
    TH_OK(ctx, teeny_tensor_read(tdx, dx, N));
    for (int e = 0; e < N; e++) {
        int line = (e / (L * INNER)) * INNER + e % INNER;
        ck_assert_msg(isfinite(dx[e]), "dx[%d] = %g", e, (double)dx[e]);
        if (dead[line]) {
            ck_assert_msg(isnan(plain[e]), "plain softmax of a wholly -inf line: %g, want NaN", (double)plain[e]);
            ck_assert_msg(zeroed[e] == 0.0f && dx[e] == 0.0f, "masked_zero: y %g dx %g, want 0", (double)zeroed[e],
                          (double)dx[e]);
        } else {
            ck_assert_msg(!memcmp(&plain[e], &zeroed[e], sizeof(float)), "y[%d] %.9g, plain %.9g", e,
                          (double)zeroed[e], (double)plain[e]);
        }
    }
    /* the graph builder */
    teeny_graph *g;
    teeny_node in, sm, bad = 0;
    int64_t gs[3] = {-1, L, INNER};
    float gy[N];
    TH_OK(ctx, teeny_graph_create(ctx, OUTER, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 3, gs, &in));
    TH_OK(ctx, teeny_graph_softmax_ex(g, "sm", in, &p, &sm));
    TH_OK(ctx, teeny_graph_mark_output(g, sm));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_softmax_ex(g, "bad", in, NULL, &bad));
    ck_assert_int_eq(bad, -1);
    teeny_softmax_params bp = p;
    bp.log = 1;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_softmax_ex(g, "bad", in, &bp, &bad));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = OUTER;
    pp.training = 0;
    teeny_plan *plan;
    teeny_tensor *tin;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &plan));
    TH_OK(ctx, teeny_plan_tensor(plan, in, &tin));
    TH_OK(ctx, teeny_tensor_write(tin, x, N));
    TH_OK(ctx, teeny_plan_forward(plan));
    TH_OK(ctx, teeny_plan_read(plan, sm, gy, N));
    ck_assert_msg(!memcmp(gy, zeroed, sizeof gy), "teeny_graph_softmax_ex differs from teeny_softmax_ex");
    teeny_plan_destroy(plan);
    teeny_graph_destroy(g);
    /* errors: nothing written */
    TH_OK(ctx, teeny_tensor_fill(ty, 7.0f));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_ex(ctx, &bp, tx, ty));
    bp = p;
    bp.masked_zero = 2;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_ex(ctx, &bp, tx, ty));
    bp = p;
    bp.axis = -4;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_ex(ctx, &bp, tx, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax_ex(ctx, NULL, tx, ty));
    th_expect_all(ty, 7.0f);
    teeny_tensor *ts[] = {tx, ty, tdy, tdx};
    for (int i = 0; i < 4; i++)
        teeny_tensor_destroy(ts[i]);
}
END_TEST

START_TEST(test_norm_errors_and_limit)
{
    teeny_ctx *ctx = th_ctx();
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s2[1] = {2}, s4[1] = {4}, long_s[1] = {3000};
    teeny_tensor *x = th_tensor(ctx, 2, s23), *y = th_tensor(ctx, 2, s23), *w3 = th_tensor(ctx, 1, s3),
                 *w4 = th_tensor(ctx, 1, s4), *m2 = th_tensor(ctx, 1, s2), *r2 = th_tensor(ctx, 1, s2),
                 *lx = th_tensor(ctx, 1, long_s), *ly = th_tensor(ctx, 1, long_s);
    TH_OK(ctx, teeny_tensor_fill(x, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(w3, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(y, 7.0f));
    TH_OK(ctx, teeny_tensor_fill(lx, 0.5f));
    TH_OK(ctx, teeny_tensor_fill(ly, 7.0f));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax(ctx, 2, 0, x, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax(ctx, -1, 0, x, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_softmax(ctx, 1, 2, x, y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_softmax(ctx, 1, 0, x, w3));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_layernorm_forward(ctx, 1, 1e-5f, x, w4, NULL, y, NULL, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_layernorm_forward(ctx, 1, -1.0f, x, w3, NULL, y, NULL, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_layernorm_forward(ctx, 2, 1e-5f, x, w3, NULL, y, NULL, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_layernorm_forward(ctx, 1, 1e-5f, x, w3, NULL, y, m2, NULL));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_layernorm_forward(ctx, 1, 1e-5f, x, w3, NULL, y, m2, w3));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_layernorm_forward(ctx, 1, 1e-5f, x, w3, NULL, NULL, NULL, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_layernorm_forward(ctx, 1, 1e-5f, x, w3, NULL, x, NULL, NULL)); /* y = x */
    th_expect_all(y, 7.0f);
    TH_OK(ctx, teeny_layernorm_forward(ctx, 1, 1e-5f, x, w3, NULL, y, m2, r2)); /* constant rows: 0 */
    th_expect_all(y, 0.0f);
    /* a device that ends loops early: a 3000-long line is refused, nothing written */
    long long before = th_loop_limit(4000);
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_softmax(ctx, 0, 0, lx, ly));
    th_expect_all(ly, 7.0f);
    th_loop_limit(40000);
    TH_OK(ctx, teeny_softmax(ctx, 0, 0, lx, ly));
    th_expect_all(ly, 1.0f / 3000.0f);
    th_loop_limit(before ? before : -1);
    teeny_tensor *ts[] = {x, y, w3, w4, m2, r2, lx, ly};
    for (int i = 0; i < 8; i++)
        teeny_tensor_destroy(ts[i]);
}
END_TEST

Suite *suite_norm(void)
{
    Suite *s = suite_create("norm");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_softmax_sweep, 0, n_sweep());
    tcase_add_loop_test(fwd, test_layernorm_sweep, 0, n_sweep());
    tcase_add_test(bwd, test_norm_reference);
    tcase_add_test(bwd, test_norm_graph);
    tcase_add_test(bwd, test_softmax_masked_zero);
    tcase_add_test(err, test_norm_errors_and_limit);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
