/*
 * test_matmul.c -- the batched, broadcasting matmul (src/ops/linear/matmul.c's
 * op on the linear layer's GEMM kernel) against the float64
 * reference: seeded sweeps over batch ranks 0..3, broadcast patterns and
 * sizes that divide no tile (views at odd offsets), every subset of
 * gradients, the reference by central differences, determinism, the k
 * loop split where loops are limited, a graph
 * with a constant operand, and the error paths.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clwrap.h"
#include "harness.h"
#include "ops/ops.h"
#include "ref/matmul_ref.h"

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

START_TEST(test_matmul_sweep)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 7000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    int nb = _i % 4, view = _i % 3 == 1 ? 3 : 0, want_a = _i % 4 != 1, want_b = _i % 4 != 2;
    int M = th_int(&r, 1, _i % 5 == 4 ? 90 : 20), K = th_int(&r, 1, _i % 7 == 6 ? 300 : 20), N = th_int(&r, 1, 40);
    ref_shape as = {0}, bs = {0}, ys;
    int64_t yb[3];
    for (int d = 0; d < nb; d++)
        yb[d] = th_int(&r, 1, 3);
    /* each operand drops some leading batch dimensions and sets others to 1 */
    int da_drop = th_int(&r, 0, nb), db_drop = th_int(&r, 0, nb);
    for (int d = da_drop; d < nb; d++)
        as.d[as.ndim++] = th_int(&r, 0, 2) ? yb[d] : 1;
    for (int d = db_drop; d < nb; d++)
        bs.d[bs.ndim++] = th_int(&r, 0, 2) ? yb[d] : 1;
    as.d[as.ndim++] = M;
    as.d[as.ndim++] = K;
    bs.d[bs.ndim++] = K;
    bs.d[bs.ndim++] = N;
    ck_assert(ref_matmul_shape(&as, &bs, &ys));
    int64_t na = ref_numel(&as), nbb = ref_numel(&bs), ny = ref_numel(&ys);
    float *a = th_malloc((size_t)na * 4), *b = th_malloc((size_t)nbb * 4), *dy = th_malloc((size_t)ny * 4);
    th_fill_uniform(&r, a, (size_t)na, -1, 1);
    th_fill_uniform(&r, b, (size_t)nbb, -1, 1);
    th_fill_uniform(&r, dy, (size_t)ny, -1, 1);
    double *ad = th_dbl(a, (size_t)na), *bd = th_dbl(b, (size_t)nbb), *dyd = th_dbl(dy, (size_t)ny),
           *y = th_malloc((size_t)ny * 8), *rda = th_malloc((size_t)na * 8), *rdb = th_malloc((size_t)nbb * 8);
    ref_matmul(ad, &as, bd, &bs, y);
    ref_matmul_backward(ad, &as, bd, &bs, dyd, rda, rdb);
    th_dev ta = th_dev_make(ctx, 0, as.ndim, as.d, view, a), tb = th_dev_make(ctx, 0, bs.ndim, bs.d, 0, b),
           ty = th_dev_make(ctx, 0, ys.ndim, ys.d, view ? view + 1 : 0, NULL),
           tdy = th_dev_make(ctx, 0, ys.ndim, ys.d, view, dy), tda = th_dev_make(ctx, 0, as.ndim, as.d, view, NULL),
           tdb = th_dev_make(ctx, 0, bs.ndim, bs.d, view ? view + 2 : 0, NULL);
    char repro[160];
    snprintf(repro, sizeof repro, "a rank %d b rank %d y rank %d M %d K %d N %d seed %llu", as.ndim, bs.ndim, ys.ndim,
             M, K, N, (unsigned long long)seed);
    TH_OK(ctx, teeny_matmul(ctx, ta.t, tb.t, ty.t));
    double tol = 1e-6 + 1e-7 * sqrt((double)K);
    expect(&ty, y, tol, "y", repro);
    TH_OK(ctx, teeny_matmul_backward(ctx, ta.t, tb.t, tdy.t, want_a ? tda.t : NULL, want_b ? tdb.t : NULL));
    double btol = 1e-6 + 1e-7 * sqrt((double)(M > N ? M : N) * (double)(ny / (M * (int64_t)N)));
    if (want_a)
        expect(&tda, rda, btol, "da", repro);
    if (want_b)
        expect(&tdb, rdb, btol, "db", repro);
    if (!want_a || !want_b) {
        float *o = th_read((!want_a ? &tda : &tdb)->t);
        ck_assert_msg(isnan(o[0]), "unwanted gradient written; %s", repro);
        free(o);
    }
    float *first = th_read(ty.t);
    TH_OK(ctx, teeny_matmul(ctx, ta.t, tb.t, ty.t));
    float *again = th_read(ty.t);
    ck_assert_msg(!memcmp(first, again, (size_t)ny * 4), "y differs between runs; %s", repro);
    free(first);
    free(again);
    float *fs[] = {a, b, dy};
    double *ds[] = {ad, bd, dyd, y, rda, rdb};
    for (int k = 0; k < 3; k++)
        free(fs[k]);
    for (int k = 0; k < 6; k++)
        free(ds[k]);
    th_dev *tt[] = {&ta, &tb, &ty, &tdy, &tda, &tdb};
    for (int k = 0; k < 6; k++)
        th_dev_free(tt[k]);
}
END_TEST

/* Where a device limits a work-item's loop trips (forced here with
 * th_loop_limit), lin_gemm_batched runs its k loop in launches that carry
 * the sums: more launches, the bits of one launch (y and both gradients). */
START_TEST(test_matmul_split_loops)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(7400);
    int64_t as[4] = {2, 3, 5, 300}, bs[3] = {3, 300, 7}, ys[4] = {2, 3, 5, 7};
    int64_t na = 2 * 3 * 5 * 300, nb = 3 * 300 * 7, ny = 2 * 3 * 5 * 7;
    float *a = th_malloc((size_t)na * 4), *b = th_malloc((size_t)nb * 4), *dy = th_malloc((size_t)ny * 4);
    th_fill_uniform(&r, a, (size_t)na, -1, 1);
    th_fill_uniform(&r, b, (size_t)nb, -1, 1);
    th_fill_uniform(&r, dy, (size_t)ny, -1, 1);
    th_dev ta = th_dev_make(ctx, 0, 4, as, 0, a), tb = th_dev_make(ctx, 0, 3, bs, 0, b),
           tdy = th_dev_make(ctx, 0, 4, ys, 0, dy), ty = th_dev_make(ctx, 0, 4, ys, 0, NULL),
           tda = th_dev_make(ctx, 0, 4, as, 0, NULL), tdb = th_dev_make(ctx, 0, 3, bs, 0, NULL);
    float *one[3] = {NULL, NULL, NULL};
    long n[2];
    for (int run = 0; run < 2; run++) {
        th_loop_limit(run ? 3000 : 0);
        teeny__calls_reset();
        TH_OK(ctx, teeny_matmul(ctx, ta.t, tb.t, ty.t));
        TH_OK(ctx, teeny_matmul_backward(ctx, ta.t, tb.t, tdy.t, tda.t, tdb.t));
        TH_OK(ctx, teeny_ctx_finish(ctx));
        n[run] = teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel);
        th_dev *outs[3] = {&ty, &tda, &tdb};
        for (int i = 0; i < 3; i++) {
            float *got = th_read(outs[i]->t);
            if (run == 0) {
                one[i] = got;
                continue;
            }
            ck_assert_msg(!memcmp(got, one[i], (size_t)outs[i]->n * 4), "output %d differs from one launch's", i);
            free(got);
            free(one[i]);
        }
    }
    th_loop_limit(-1);
    ck_assert_msg(n[1] > n[0], "%ld kernels launched, %ld without the limit: nothing split", n[1], n[0]);
    free(a);
    free(b);
    free(dy);
    th_dev *tt[] = {&ta, &tb, &ty, &tdy, &tda, &tdb};
    for (int k = 0; k < 6; k++)
        th_dev_free(tt[k]);
}
END_TEST

START_TEST(test_matmul_reference)
{
    th_rng r = th_rng_make(51);
    ref_shape as = {3, {2, 2, 3}}, bs = {2, {3, 2}};
    double a[12], b[6], dy[8], y[8], da[12], db[6];
    for (int i = 0; i < 12; i++)
        a[i] = th_normal(&r);
    for (int i = 0; i < 6; i++)
        b[i] = th_normal(&r);
    for (int i = 0; i < 8; i++)
        dy[i] = th_normal(&r);
    ref_matmul_backward(a, &as, b, &bs, dy, da, db);
    double *vars[2] = {a, b}, *grads[2] = {da, db};
    int counts[2] = {12, 6};
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < counts[v]; i++) {
            double keep = vars[v][i], h = 1e-6, l[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                vars[v][i] = keep + (sgn ? -h : h);
                ref_matmul(a, &as, b, &bs, y);
                l[sgn] = 0;
                for (int k = 0; k < 8; k++)
                    l[sgn] += y[k] * dy[k];
            }
            vars[v][i] = keep;
            ck_assert_msg(fabs((l[0] - l[1]) / (2 * h) - grads[v][i]) <= 1e-7, "var %d elem %d", v, i);
        }
}
END_TEST

/* x [B, 6] viewed [2B, 3] -> linear(3) viewed [B, 2, 3] @ constant c
 * [3, 2] -> sum: d loss / d weight on the host. */
START_TEST(test_matmul_graph)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, rows, lin, v, c, mm, loss, bad;
    int64_t xs[2] = {-1, 6}, rs[2] = {-1, 3}, vs[3] = {-1, 2, 3}, cs[2] = {3, 2};
    float xv[12] = {1, 2, -1, 0.5f, 3, -2, 0, 1, 1, 4, 0.1f, 0.2f}, cv[6] = {1, -2, 0.5f, 3, -1, 2};
    TH_OK(ctx, teeny_graph_create(ctx, 3, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 2, xs, &x));
    TH_OK(ctx, teeny_graph_reshape(g, "rows", x, 2, rs, &rows));
    TH_OK(ctx, teeny_graph_linear(g, "fc", rows, 3, 0, &lin));
    TH_OK(ctx, teeny_graph_reshape(g, "v", lin, 3, vs, &v));
    TH_OK(ctx, teeny_graph_constant(g, "c", 2, cs, cv, &c));
    TH_OK(ctx, teeny_graph_matmul(g, "mm", v, c, &mm));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_graph_matmul(g, "bad", c, c, &bad));
    teeny_reduce_params rp = {7, 0, 0};
    TH_OK(ctx, teeny_graph_reduce(g, "sum", mm, &rp, &loss));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = 2;
    pp.loss = loss;
    teeny_plan *plan;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &plan));
    teeny_tensor *tin, *w, *dw;
    TH_OK(ctx, teeny_plan_tensor(plan, x, &tin));
    TH_OK(ctx, teeny_tensor_write(tin, xv, 12));
    TH_OK(ctx, teeny_plan_forward(plan));
    TH_OK(ctx, teeny_plan_backward(plan));
    TH_OK(ctx, teeny_graph_param(g, 0, NULL, &w, &dw));
    float gw[9];
    TH_OK(ctx, teeny_tensor_read(dw, gw, 9));
    /* loss = sum_rows lin[r] . rowsum(c): d/d w[o][i] = rowsum(c)[o] * sum_r x[r][i] */
    for (int o = 0; o < 3; o++)
        for (int i = 0; i < 3; i++) {
            double xsum = 0, want;
            for (int rr = 0; rr < 4; rr++)
                xsum += xv[rr * 3 + i];
            want = (cv[o * 2] + cv[o * 2 + 1]) * xsum;
            ck_assert_msg(fabs(gw[o * 3 + i] - want) <= 1e-5, "dw[%d][%d] %g, want %g", o, i, (double)gw[o * 3 + i],
                          want);
        }
    teeny_plan_destroy(plan);
    teeny_graph_destroy(g);
}
END_TEST

START_TEST(test_matmul_errors)
{
    teeny_ctx *ctx = th_ctx();
    int64_t s23[2] = {2, 3}, s34[2] = {3, 4}, s24[2] = {2, 4}, s3[1] = {3}, s234[3] = {2, 3, 4}, s334[3] = {3, 3, 4};
    teeny_tensor *a = th_tensor(ctx, 2, s23), *b = th_tensor(ctx, 2, s34), *y = th_tensor(ctx, 2, s24),
                 *v = th_tensor(ctx, 1, s3), *b3 = th_tensor(ctx, 3, s234), *b33 = th_tensor(ctx, 3, s334);
    TH_OK(ctx, teeny_tensor_fill(a, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(b, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(y, 7.0f));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_matmul(ctx, a, a, y));    /* K 3 vs 2 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_matmul(ctx, a, v, y));    /* rank 1 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_matmul(ctx, a, b3, y));   /* y is [2, 2, 4] */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_matmul(ctx, b3, b33, y)); /* batches 2 and 3 */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_matmul(ctx, a, NULL, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_matmul(ctx, a, b, NULL));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_matmul_backward(ctx, a, b, a, a, NULL)); /* dy [2, 3] */
    th_expect_all(y, 7.0f);
    TH_OK(ctx, teeny_matmul(ctx, a, b, y));
    th_expect_all(y, 3.0f);
    teeny_tensor *ts[] = {a, b, y, v, b3, b33};
    for (int i = 0; i < 6; i++)
        teeny_tensor_destroy(ts[i]);
}
END_TEST

Suite *suite_matmul(void)
{
    Suite *s = suite_create("matmul");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_matmul_sweep, 0, n_sweep());
    tcase_add_test(bwd, test_matmul_reference);
    tcase_add_test(bwd, test_matmul_split_loops);
    tcase_add_test(bwd, test_matmul_graph);
    tcase_add_test(err, test_matmul_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
