/*
 * test_linear.c -- the fully connected layer against the float64
 * reference: seeded shape sweeps (sizes that divide no tile, views at odd
 * offsets, with and without bias, every subset of gradients), determinism,
 * finite differences of the reference, the op-table entry (infer and the
 * bias-less tensor order) and every error path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clwrap.h"
#include "harness.h"
#include "internal.h"
#include "ops/ops.h"
#include "ref/linear_ref.h"

#define TOL 1e-5

static void expect_close(const th_dev *d, const double *ref, const double *mag, double tol, const char *what,
                         const char *repro)
{
    float *out = th_read(d->t);
    long bad = th_first_nonfinite(out, (size_t)d->n);
    ck_assert_msg(bad < 0, "%s: element %ld not written (%g); %s", what, bad, bad >= 0 ? (double)out[bad] : 0.0,
                  repro);
    double e = mag ? th_nrms_mag(out, ref, mag, (size_t)d->n) : th_nrms(out, ref, (size_t)d->n);
    ck_assert_msg(e <= tol, "%s: nrms %.3g > %.1g; %s", what, e, tol, repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

typedef struct {
    int N, in, out, bias, view;
} lin_shape;

/* Shape i of the sweep: mostly small odd sizes, every tenth larger than
 * any tile, some 1-sized. */
static lin_shape sweep_shape(th_rng *r, int i)
{
    lin_shape s;
    int big = i % 10 == 0;
    s.N = th_int(r, 1, big ? 150 : 40);
    s.in = th_int(r, 1, big ? 200 : 50);
    s.out = th_int(r, 1, big ? 140 : 40);
    if (i % 7 == 1)
        s.N = 1;
    if (i % 11 == 2)
        s.in = 1;
    s.bias = i % 4 != 3;
    s.view = i % 3 == 0 ? 1 + 2 * (i % 4) : 0;
    return s;
}

static int n_sweep(void)
{
    return th_small() ? 6 : th_full() ? 400 : 100;
}

START_TEST(test_linear_forward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 1000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    lin_shape s = sweep_shape(&r, _i);
    char repro[160];
    snprintf(repro, sizeof repro, "x [%d, %d] w [%d, %d]%s%s seed %llu", s.N, s.in, s.out, s.in,
             s.bias ? " bias" : "", s.view ? " (views)" : "", (unsigned long long)seed);
    size_t nx = (size_t)s.N * s.in, nw = (size_t)s.out * s.in, ny = (size_t)s.N * s.out;
    float *x = th_malloc(nx * 4), *w = th_malloc(nw * 4), *b = th_malloc((size_t)s.out * 4);
    th_fill_normal(&r, x, nx, th_uniform(&r, -2, 2), 1);
    th_fill_uniform(&r, w, nw, -1, 1);
    th_fill_uniform(&r, b, (size_t)s.out, -1, 1);
    int64_t xs[2] = {s.N, s.in}, ws[2] = {s.out, s.in}, ys[2] = {s.N, s.out}, bs[1] = {s.out};
    th_dev tx = th_dev_make(ctx, 0, 2, xs, s.view, x), tw = th_dev_make(ctx, 0, 2, ws, s.view ? s.view + 2 : 0, w),
           tb = th_dev_make(ctx, 0, 1, bs, s.view, b), ty = th_dev_make(ctx, 0, 2, ys, s.view ? s.view + 4 : 0, NULL);
    TH_OK(ctx, teeny_linear_forward(ctx, tx.t, tw.t, s.bias ? tb.t : NULL, ty.t));
    double *dx_ = th_dbl(x, nx), *dw_ = th_dbl(w, nw), *db_ = th_dbl(b, (size_t)s.out);
    double *ref = th_malloc(ny * 8), *mag = th_malloc(ny * 8);
    ref_linear_forward(dx_, dw_, s.bias ? db_ : NULL, s.N, s.in, s.out, ref);
    ref_linear_mags(dx_, dw_, NULL, s.N, s.in, s.out, mag, NULL, NULL, NULL);
    if (s.bias)
        for (size_t i = 0; i < ny; i++)
            mag[i] += fabs(db_[i % (size_t)s.out]);
    expect_close(&ty, ref, mag, TOL, "y", repro);
    free(x);
    free(w);
    free(b);
    free(dx_);
    free(dw_);
    free(db_);
    free(ref);
    free(mag);
    th_dev_free(&tx);
    th_dev_free(&tw);
    th_dev_free(&tb);
    th_dev_free(&ty);
}
END_TEST

START_TEST(test_linear_backward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 2000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    lin_shape s = sweep_shape(&r, _i);
    /* which gradients: all, or (every fifth case) one of them left out */
    int want_dx = _i % 5 != 4 || _i % 3 != 0, want_dw = _i % 5 != 4 || _i % 3 != 1,
        want_db = _i % 5 != 4 || _i % 3 != 2;
    char repro[160];
    snprintf(repro, sizeof repro, "x [%d, %d] w [%d, %d] grads %d%d%d%s seed %llu", s.N, s.in, s.out, s.in, want_dx,
             want_dw, want_db, s.view ? " (views)" : "", (unsigned long long)seed);
    size_t nx = (size_t)s.N * s.in, nw = (size_t)s.out * s.in, ny = (size_t)s.N * s.out;
    float *x = th_malloc(nx * 4), *w = th_malloc(nw * 4), *dy = th_malloc(ny * 4);
    th_fill_normal(&r, x, nx, 0, 1);
    th_fill_uniform(&r, w, nw, -1, 1);
    th_fill_normal(&r, dy, ny, 0, 1);
    int64_t xs[2] = {s.N, s.in}, ws[2] = {s.out, s.in}, ys[2] = {s.N, s.out}, bs[1] = {s.out};
    th_dev tx = th_dev_make(ctx, 0, 2, xs, s.view, x), tw = th_dev_make(ctx, 0, 2, ws, 0, w),
           tdy = th_dev_make(ctx, 0, 2, ys, s.view ? s.view + 1 : 0, dy), tdx = th_dev_make(ctx, 0, 2, xs, s.view, NULL),
           tdw = th_dev_make(ctx, 0, 2, ws, s.view ? s.view + 2 : 0, NULL), tdb = th_dev_make(ctx, 0, 1, bs, s.view, NULL);
    TH_OK(ctx, teeny_linear_backward(ctx, tx.t, tw.t, tdy.t, want_dx ? tdx.t : NULL, want_dw ? tdw.t : NULL,
                                     want_db ? tdb.t : NULL));
    double *x_ = th_dbl(x, nx), *w_ = th_dbl(w, nw), *dy_ = th_dbl(dy, ny);
    double *rdx = th_malloc(nx * 8), *rdw = th_malloc(nw * 8), *rdb = th_malloc((size_t)s.out * 8);
    double *mdx = th_malloc(nx * 8), *mdw = th_malloc(nw * 8), *mdb = th_malloc((size_t)s.out * 8);
    ref_linear_backward(x_, w_, dy_, s.N, s.in, s.out, rdx, rdw, rdb);
    ref_linear_mags(x_, w_, dy_, s.N, s.in, s.out, NULL, mdx, mdw, mdb);
    if (want_dx)
        expect_close(&tdx, rdx, mdx, TOL, "dx", repro);
    if (want_dw)
        expect_close(&tdw, rdw, mdw, TOL, "dw", repro);
    if (want_db)
        expect_close(&tdb, rdb, mdb, TOL, "db", repro);
    /* an output not asked for is left alone */
    th_dev *skipped[3] = {want_dx ? NULL : &tdx, want_dw ? NULL : &tdw, want_db ? NULL : &tdb};
    for (int k = 0; k < 3; k++)
        if (skipped[k]) {
            float *o = th_read(skipped[k]->t);
            for (int64_t i = 0; i < skipped[k]->n; i++)
                ck_assert_msg(isnan(o[i]), "gradient %d written though not asked for; %s", k, repro);
            free(o);
        }
    free(x);
    free(w);
    free(dy);
    free(x_);
    free(w_);
    free(dy_);
    free(rdx);
    free(rdw);
    free(rdb);
    free(mdx);
    free(mdw);
    free(mdb);
    th_dev_free(&tx);
    th_dev_free(&tw);
    th_dev_free(&tdy);
    th_dev_free(&tdx);
    th_dev_free(&tdw);
    th_dev_free(&tdb);
}
END_TEST

/* Same inputs twice: bit-identical outputs and gradients. */
START_TEST(test_linear_determinism)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(77);
    int N = 131, in = 67, out = 45;
    int64_t xs[2] = {N, in}, ws[2] = {out, in}, ys[2] = {N, out}, bs[1] = {out};
    float *x = th_malloc((size_t)N * in * 4), *w = th_malloc((size_t)out * in * 4), *b = th_malloc((size_t)out * 4),
          *dy = th_malloc((size_t)N * out * 4);
    th_fill_normal(&r, x, (size_t)N * in, 0, 1);
    th_fill_normal(&r, w, (size_t)out * in, 0, 1);
    th_fill_normal(&r, b, (size_t)out, 0, 1);
    th_fill_normal(&r, dy, (size_t)N * out, 0, 1);
    teeny_tensor *tx = th_tensor_from(ctx, 2, xs, x), *tw = th_tensor_from(ctx, 2, ws, w),
                 *tb = th_tensor_from(ctx, 1, bs, b), *tdy = th_tensor_from(ctx, 2, ys, dy);
    teeny_tensor *outs[2][4];
    for (int run = 0; run < 2; run++) {
        outs[run][0] = th_tensor(ctx, 2, ys);
        outs[run][1] = th_tensor(ctx, 2, xs);
        outs[run][2] = th_tensor(ctx, 2, ws);
        outs[run][3] = th_tensor(ctx, 1, bs);
        TH_OK(ctx, teeny_linear_forward(ctx, tx, tw, tb, outs[run][0]));
        TH_OK(ctx, teeny_linear_backward(ctx, tx, tw, tdy, outs[run][1], outs[run][2], outs[run][3]));
    }
    for (int k = 0; k < 4; k++) {
        float *a = th_read(outs[0][k]), *c = th_read(outs[1][k]);
        ck_assert_msg(!memcmp(a, c, (size_t)teeny_tensor_numel(outs[0][k]) * 4), "output %d differs between runs", k);
        free(a);
        free(c);
        teeny_tensor_destroy(outs[0][k]);
        teeny_tensor_destroy(outs[1][k]);
    }
    free(x);
    free(w);
    free(b);
    free(dy);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(tw);
    teeny_tensor_destroy(tb);
    teeny_tensor_destroy(tdy);
}
END_TEST

/* The reference gradients against central differences of
 * L = sum(y * dy) on a tiny problem. */
START_TEST(test_linear_finite_diff)
{
    th_rng r = th_rng_make(5);
    enum { N = 3, IN = 4, OUT = 2 };
    double x[N * IN], w[OUT * IN], b[OUT], dy[N * OUT], y[N * OUT], dx[N * IN], dw[OUT * IN], db[OUT];
    for (int i = 0; i < N * IN; i++)
        x[i] = th_normal(&r);
    for (int i = 0; i < OUT * IN; i++)
        w[i] = th_normal(&r);
    for (int i = 0; i < OUT; i++)
        b[i] = th_normal(&r);
    for (int i = 0; i < N * OUT; i++)
        dy[i] = th_normal(&r);
    ref_linear_backward(x, w, dy, N, IN, OUT, dx, dw, db);
    double *vars[3] = {x, w, b}, *grads[3] = {dx, dw, db};
    int counts[3] = {N * IN, OUT * IN, OUT};
    for (int v = 0; v < 3; v++)
        for (int i = 0; i < counts[v]; i++) {
            double keep = vars[v][i], h = 1e-5, lp = 0, lm = 0;
            vars[v][i] = keep + h;
            ref_linear_forward(x, w, b, N, IN, OUT, y);
            for (int j = 0; j < N * OUT; j++)
                lp += y[j] * dy[j];
            vars[v][i] = keep - h;
            ref_linear_forward(x, w, b, N, IN, OUT, y);
            for (int j = 0; j < N * OUT; j++)
                lm += y[j] * dy[j];
            vars[v][i] = keep;
            double fd = (lp - lm) / (2 * h);
            ck_assert_msg(fabs(fd - grads[v][i]) <= 1e-6 * (1 + fabs(fd)), "var %d elem %d: fd %g ref %g", v, i, fd,
                          grads[v][i]);
        }
}
END_TEST

/* The op-table entry: infer's shapes and parameters, and the bias-less
 * tensor order (dy at in[3], no dbias slot) run through the table. */
START_TEST(test_linear_op_table)
{
    teeny_ctx *ctx = th_ctx();
    const teeny__op *op = &teeny__ops[TEENY__OP_LINEAR];
    ck_assert_str_eq(op->name, "linear");
    ck_assert(op->infer && op->forward && op->backward);
    teeny__node_shapes s = {.n_in = 1, .in = {{.ndim = 2, .shape = {5, 7}}}, .attrs.linear = {3, 1}};
    TH_OK(ctx, op->infer(ctx, &s));
    ck_assert_int_eq(s.out.ndim, 2);
    ck_assert(s.out.shape[0] == 5 && s.out.shape[1] == 3 && !s.out.is_i32);
    ck_assert_int_eq(s.n_param, 2);
    ck_assert(s.param[0].ndim == 2 && s.param[0].shape[0] == 3 && s.param[0].shape[1] == 7);
    ck_assert(s.param[1].ndim == 1 && s.param[1].shape[0] == 3);
    ck_assert_str_eq(s.param_name[0], "weight");
    ck_assert_str_eq(s.param_name[1], "bias");
    ck_assert(s.param_init[0] == TEENY__INIT_FAN_IN && s.param_init[1] == TEENY__INIT_FAN_IN);
    ck_assert(s.fan_in == 7 && s.n_state == 0 && s.n_saved == 0);
    teeny__node_shapes nb = {.n_in = 1, .in = {{.ndim = 2, .shape = {5, 7}}}, .attrs.linear = {3, 0}};
    TH_OK(ctx, op->infer(ctx, &nb));
    ck_assert_int_eq(nb.n_param, 1);
    teeny__node_shapes bad = {.n_in = 1, .in = {{.ndim = 4, .shape = {5, 7, 1, 1}}}, .attrs.linear = {3, 1}};
    TH_STATUS(ctx, TEENY_ERR_SHAPE, op->infer(ctx, &bad));
    teeny__node_shapes bad_out = {.n_in = 1, .in = {{.ndim = 2, .shape = {5, 7}}}, .attrs.linear = {0, 1}};
    TH_STATUS(ctx, TEENY_ERR_ARG, op->infer(ctx, &bad_out));
    teeny__node_shapes huge = {.n_in = 1, .in = {{.ndim = 2, .shape = {1 << 20, 7}}}, .attrs.linear = {1 << 12, 1}};
    TH_STATUS(ctx, TEENY_ERR_RANGE, op->infer(ctx, &huge));

    /* bias-less layer through the table */
    th_rng r = th_rng_make(9);
    int N = 6, in = 5, out = 3;
    int64_t xs[2] = {N, in}, ws[2] = {out, in}, ys[2] = {N, out};
    float x[30], w[15], dy[18];
    th_fill_normal(&r, x, 30, 0, 1);
    th_fill_normal(&r, w, 15, 0, 1);
    th_fill_normal(&r, dy, 18, 0, 1);
    teeny_tensor *tx = th_tensor_from(ctx, 2, xs, x), *tw = th_tensor_from(ctx, 2, ws, w),
                 *tdy = th_tensor_from(ctx, 2, ys, dy), *ty = th_tensor(ctx, 2, ys), *tdx = th_tensor(ctx, 2, xs),
                 *tdw = th_tensor(ctx, 2, ws);
    th_poison(ty);
    th_poison(tdx);
    th_poison(tdw);
    teeny__op_args fa = {.in = {tx, tw}, .out = {ty}, .attrs.linear = {out, 0}, .training = 1};
    TH_OK(ctx, teeny__op_run(ctx, TEENY__OP_LINEAR, 0, &fa));
    teeny__op_args ba = {.in = {[TEENY__LINEAR_X] = tx, [TEENY__LINEAR_WEIGHT] = tw, [TEENY__LINEAR_Y] = ty,
                                [TEENY__LINEAR_DY] = tdy},
                         .out = {[TEENY__LINEAR_X] = tdx, [TEENY__LINEAR_WEIGHT] = tdw},
                         .attrs.linear = {out, 0},
                         .training = 1};
    TH_OK(ctx, teeny__op_run(ctx, TEENY__OP_LINEAR, 1, &ba));
    double xd[30], wd[15], dyd[18], ry[18], rdx[30], rdw[15];
    th_to_double(x, xd, 30);
    th_to_double(w, wd, 15);
    th_to_double(dy, dyd, 18);
    ref_linear_forward(xd, wd, NULL, N, in, out, ry);
    ref_linear_backward(xd, wd, dyd, N, in, out, rdx, rdw, NULL);
    float *gy = th_read(ty), *gdx = th_read(tdx), *gdw = th_read(tdw);
    ck_assert(th_first_nonfinite(gy, 18) < 0 && th_first_nonfinite(gdx, 30) < 0 && th_first_nonfinite(gdw, 15) < 0);
    ck_assert(th_nrms(gy, ry, 18) <= TOL && th_nrms(gdx, rdx, 30) <= TOL && th_nrms(gdw, rdw, 15) <= TOL);
    free(gy);
    free(gdx);
    free(gdw);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(tw);
    teeny_tensor_destroy(tdy);
    teeny_tensor_destroy(ty);
    teeny_tensor_destroy(tdx);
    teeny_tensor_destroy(tdw);
}
END_TEST

/* Where a device limits a work-item's loop trips (Mesa's llvmpipe; forced
 * here with th_loop_limit): lin_gemm's k loop (588 trips per tile of 16
 * on this plan, 76 around it; limit 4000: 3 tiles a launch) runs in
 * launches over k segments, y, dx and dw carrying the sums (the bits of
 * one launch); the bias gradient's column sums take more runs of rows
 * (against the reference); a limit below one tile is
 * TEENY_ERR_UNSUPPORTED with the outputs untouched. lin_gemm forced (the
 * small route's and the CPU GEMM's segments: test_linear_small.c). */
START_TEST(test_linear_split_loops)
{
    teeny_ctx *ctx = th_ctx();
    th_hook(TEENY__HOOK_LINEAR_SMALL, -1);
    th_hook(TEENY__HOOK_LINEAR_CPU_GEMM, -1);
    /* A: forward K = in = 300 (19 tiles: 7 launches); B: dw's K = N = 300 */
    static const lin_shape cases[2] = {{5, 300, 7, 1, 0}, {300, 6, 5, 1, 3}};
    static const long launches[2][2] = {{1 + 2 + 2, 7 + 2 + 2}, {1 + 2 + 2, 1 + 1 + 7 + 2}}; /* y; dx, dw, db */
    for (int ci = 0; ci < 2; ci++) {
        const lin_shape *sh = &cases[ci];
        th_rng r = th_rng_make(3100 + (uint64_t)ci);
        size_t nx = (size_t)sh->N * sh->in, nw = (size_t)sh->out * sh->in, ny = (size_t)sh->N * sh->out;
        float *x = th_malloc(nx * 4), *w = th_malloc(nw * 4), *b = th_malloc((size_t)sh->out * 4),
              *dy = th_malloc(ny * 4), *one[4];
        th_fill_normal(&r, x, nx, 0, 1);
        th_fill_uniform(&r, w, nw, -1, 1);
        th_fill_uniform(&r, b, (size_t)sh->out, -1, 1);
        th_fill_normal(&r, dy, ny, 0, 1);
        int64_t xs[2] = {sh->N, sh->in}, ws[2] = {sh->out, sh->in}, ys[2] = {sh->N, sh->out}, bs[1] = {sh->out};
        th_dev tx = th_dev_make(ctx, 0, 2, xs, sh->view, x), tw = th_dev_make(ctx, 0, 2, ws, 0, w),
               tb = th_dev_make(ctx, 0, 1, bs, 0, b), tdy = th_dev_make(ctx, 0, 2, ys, 0, dy);
        th_dev out[4] = {th_dev_make(ctx, 0, 2, ys, sh->view, NULL), th_dev_make(ctx, 0, 2, xs, 1, NULL),
                         th_dev_make(ctx, 0, 2, ws, 2, NULL), th_dev_make(ctx, 0, 1, bs, 0, NULL)};
        for (int li = 0; li < 3; li++) {
            long limit = li == 0 ? 0 : li == 1 ? 4000 : 1000; /* 1000: budget 500 < 664, one tile */
            teeny_status want = li == 2 ? TEENY_ERR_UNSUPPORTED : TEENY_OK;
            th_loop_limit(limit);
            for (int j = 0; j < 4; j++)
                th_poison(out[j].t);
            teeny__calls_reset();
            TH_STATUS(ctx, want, teeny_linear_forward(ctx, tx.t, tw.t, tb.t, out[0].t));
            TH_STATUS(ctx, want, teeny_linear_backward(ctx, tx.t, tw.t, tdy.t, out[1].t, out[2].t, out[3].t));
            TH_OK(ctx, teeny_ctx_finish(ctx));
            long n = teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel);
            if (li == 2) {
                ck_assert_int_eq(n, 0);
                for (int j = 0; j < 4; j++)
                    th_expect_all(out[j].t, NAN);
                continue;
            }
            ck_assert_msg(n == launches[ci][li], "case %d, limit %ld: %ld launches, want %ld", ci, limit, n,
                          launches[ci][li]);
            for (int j = 0; j < 4; j++) {
                float *got = th_read(out[j].t);
                if (li == 0)
                    one[j] = got;
                else {
                    ck_assert_msg(!memcmp(got, one[j], (size_t)out[j].n * 4),
                                  "case %d, limit %ld: output %d differs from one launch's", ci, limit, j);
                    free(got);
                }
                th_dev_check_guard(&out[j], "linear output", "test_linear_split_loops");
            }
        }
        /* and one launch's answer is the reference's */
        double *xd = th_dbl(x, nx), *wd = th_dbl(w, nw), *bd = th_dbl(b, (size_t)sh->out), *dyd = th_dbl(dy, ny);
        double *ref = th_malloc(nx * 8 + nw * 8 + ny * 8), *mag = th_malloc(ny * 8);
        ref_linear_forward(xd, wd, bd, sh->N, sh->in, sh->out, ref);
        ref_linear_mags(xd, wd, NULL, sh->N, sh->in, sh->out, mag, NULL, NULL, NULL);
        for (size_t i = 0; i < ny; i++)
            mag[i] += fabs(bd[i % (size_t)sh->out]);
        ck_assert_msg(th_nrms_mag(one[0], ref, mag, ny) <= TOL, "case %d: y", ci);
        ref_linear_backward(xd, wd, dyd, sh->N, sh->in, sh->out, NULL, ref, NULL);
        ck_assert_msg(th_nrms(one[2], ref, nw) <= TOL, "case %d: dw", ci);
        for (int j = 0; j < 4; j++)
            free(one[j]);
        void *hs[] = {x, w, b, dy, xd, wd, bd, dyd, ref, mag};
        for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
            free(hs[i]);
        th_dev *ds[] = {&tx, &tw, &tb, &tdy, &out[0], &out[1], &out[2], &out[3]};
        for (int i = 0; i < 8; i++)
            th_dev_free(ds[i]);
    }
    /* the bias gradient over N = 50000 rows, 2 columns: 64 runs of 782 rows
     * unlimited; at limit 1340 (budget 670) 75 runs of 667 */
    int N = 50000, cols = 2;
    th_rng r = th_rng_make(3200);
    float *dy = th_malloc((size_t)N * cols * 4);
    th_fill_normal(&r, dy, (size_t)N * cols, 0.5, 1);
    int64_t ys[2] = {N, cols}, xs[2] = {N, 3}, ws[2] = {cols, 3}, bs[1] = {cols};
    th_dev tdy = th_dev_make(ctx, 0, 2, ys, 0, dy), tx = th_dev_make(ctx, 0, 2, xs, 0, NULL),
           tw = th_dev_make(ctx, 0, 2, ws, 0, NULL), tdb = th_dev_make(ctx, 0, 1, bs, 1, NULL);
    double *dyd = th_dbl(dy, (size_t)N * cols), ref[2], mag[2] = {0, 0};
    ref_linear_backward(NULL, NULL, dyd, N, 3, cols, NULL, NULL, ref);
    for (int i = 0; i < N * cols; i++)
        mag[i % cols] += fabs(dyd[i]);
    int64_t items[2];
    for (int li = 0; li < 2; li++) {
        th_loop_limit(li ? 1340 : 0);
        th_poison(tdb.t);
        ctx->prog.items_enqueued = 0;
        TH_OK(ctx, teeny_linear_backward(ctx, tx.t, tw.t, tdy.t, NULL, NULL, tdb.t));
        TH_OK(ctx, teeny_ctx_finish(ctx));
        items[li] = ctx->prog.items_enqueued;
        expect_close(&tdb, ref, mag, TOL, li ? "db, limit 1340" : "db", "test_linear_split_loops");
    }
    ck_assert_msg(items[1] > items[0], "db: %lld work-items limited, %lld unlimited: the runs did not change",
                  (long long)items[1], (long long)items[0]);
    th_loop_limit(-1);
    free(dy);
    free(dyd);
    th_dev_free(&tdy);
    th_dev_free(&tx);
    th_dev_free(&tw);
    th_dev_free(&tdb);
}
END_TEST

START_TEST(test_linear_errors)
{
    teeny_ctx *ctx = th_ctx();
    int64_t xs[2] = {4, 3}, ws[2] = {2, 3}, ys[2] = {4, 2}, bs[1] = {2}, b3[1] = {3}, w32[2] = {3, 2},
            x3d[3] = {4, 3, 1}, big[1] = {64};
    teeny_tensor *x = th_tensor(ctx, 2, xs), *w = th_tensor(ctx, 2, ws), *y = th_tensor(ctx, 2, ys),
                 *b = th_tensor(ctx, 1, bs), *bad_b = th_tensor(ctx, 1, b3), *wt = th_tensor(ctx, 2, w32),
                 *x3 = th_tensor(ctx, 3, x3d), *dx = th_tensor(ctx, 2, xs), *dw = th_tensor(ctx, 2, ws),
                 *db = th_tensor(ctx, 1, bs), *base = th_tensor(ctx, 1, big), *xi = NULL, *xv = NULL, *yv = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 2, xs, &xi));
    TH_OK(ctx, teeny_tensor_fill(x, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(w, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(b, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(y, 7.0f));
    TH_OK(ctx, teeny_tensor_fill(dx, 7.0f));
    TH_OK(ctx, teeny_tensor_fill(dw, 7.0f));
    TH_OK(ctx, teeny_tensor_fill(db, 7.0f));
    TH_OK(ctx, teeny_tensor_fill(base, 7.0f));
    TH_OK(ctx, teeny_tensor_view(base, 0, 2, xs, &xv));
    TH_OK(ctx, teeny_tensor_view(base, 10, 2, ys, &yv)); /* overlaps xv's elements 10..11 */

    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_linear_forward(NULL, x, w, b, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_linear_forward(ctx, NULL, w, b, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_linear_forward(ctx, x, NULL, b, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_linear_forward(ctx, x, w, b, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_linear_forward(ctx, xi, w, b, y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_linear_forward(ctx, x3, w, b, y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_linear_forward(ctx, x, wt, b, y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_linear_forward(ctx, x, w, bad_b, y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_linear_forward(ctx, x, w, b, dx));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_linear_forward(ctx, xv, w, b, yv));
    th_expect_all(y, 7.0f);
    th_expect_all(base, 7.0f);

    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_linear_backward(NULL, x, w, y, dx, dw, db));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_linear_backward(ctx, x, w, NULL, dx, dw, db));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_linear_backward(ctx, x, w, dx, dx, dw, db));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_linear_backward(ctx, x, w, y, dw, dw, db));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_linear_backward(ctx, x, w, y, dx, dx, db));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_linear_backward(ctx, x, w, y, dx, dw, bad_b));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_linear_backward(ctx, x, w, y, x, dw, db));   /* dx is x */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_linear_backward(ctx, x, w, yv, xv, dw, db)); /* dx overlaps dy */
    th_expect_all(dx, 7.0f);
    th_expect_all(dw, 7.0f);
    th_expect_all(db, 7.0f);
    th_expect_all(base, 7.0f);

    teeny_tensor *all[] = {x, w, y, b, bad_b, wt, x3, dx, dw, db, xv, yv, base, xi};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        teeny_tensor_destroy(all[i]);
}
END_TEST

TCase *tcase_linear_small(void); /* test_linear_small.c */

Suite *suite_linear(void)
{
    Suite *s = suite_create("linear");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_linear_forward, 0, n_sweep());
    tcase_add_test(fwd, test_linear_determinism);
    tcase_add_test(fwd, test_linear_op_table);
    tcase_add_loop_test(bwd, test_linear_backward, 0, n_sweep());
    tcase_add_test(bwd, test_linear_finite_diff);
    tcase_add_test(bwd, test_linear_split_loops);
    tcase_add_test(err, test_linear_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    suite_add_tcase(s, tcase_linear_small());
    return s;
}
