/*
 * test_resize.c -- resize over H, W (src/ops/layout/resize.c): seeded
 * sweeps over both modes, every coordinate and rounding mode, up- and down-sampling,
 * sizes alone or with a float scale (integer, non-integer, independent of
 * the sizes), views at odd offsets; forward and backward against the
 * float64 reference (tests/ref/resize_ref.c; nearest bit-exact), the
 * reference's backward against central differences of its forward,
 * NaN-poisoned outputs, determinism, the loop-split backward (same bits)
 * and its refusal, the graph builder in a training plan, and the error
 * paths with exact statuses and nothing written.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "ref/resize_ref.h"

static int n_sweep(void)
{
    return th_small() ? 20 : th_full() ? 800 : 160;
}

static teeny_resize2d_params params_of(const ref_resize *g)
{
    teeny_resize2d_params p = {(teeny_resize_mode)g->mode, (teeny_resize_coord)g->coord,
                               (teeny_resize_rounding)g->rounding, {g->OH, g->OW}, {g->scale_h, g->scale_w}};
    return p;
}

/* One axis of a random case: sizes alone (scale 0), an ONNX scale with
 * out = floor(in * scale), or a scale independent of the sizes. */
static void rand_axis(th_rng *r, int kind, int *in, int *out, float *scale)
{
    static const float scales[] = {0.5f, 0.75f, 1.5f, 2.0f, 2.5f, 3.0f, 1.0f / 3.0f, 0.6f, 1.7f, 4.0f, 0.25f};
    *in = th_int(r, 1, 9);
    if (kind == 0) {
        *scale = 0.0f;
        *out = th_int(r, 1, 17);
    } else if (kind == 1) {
        *scale = scales[th_int(r, 0, (int)(sizeof scales / sizeof *scales) - 1)];
        *out = (int)floor(*in * (double)*scale);
        *out = *out < 1 ? 1 : *out;
    } else {
        *scale = (float)th_uniform(r, 0.3, 3.5);
        *out = th_int(r, 1, 17);
    }
}

static ref_resize rand_case(th_rng *r, int i)
{
    ref_resize g = {.B = th_int(r, 1, 3), .C = th_int(r, 1, 3), .mode = i % 2, .coord = (i / 2) % 5,
                    .rounding = (i / 10) % 4};
    int kind = th_int(r, 0, 2);
    rand_axis(r, kind, &g.H, &g.OH, &g.scale_h);
    rand_axis(r, kind, &g.W, &g.OW, &g.scale_w);
    return g;
}

static void repro_of(const ref_resize *g, uint64_t seed, char *buf, size_t cap)
{
    snprintf(buf, cap, "resize [%d,%d,%d,%d] -> [%d,%d] mode %d coord %d rounding %d scale (%.9g, %.9g); seed %llu",
             g->B, g->C, g->H, g->W, g->OH, g->OW, g->mode, g->coord, g->rounding, (double)g->scale_h,
             (double)g->scale_w, (unsigned long long)seed);
}

/* d against ref: every element written; bit-exact (exact) or nrms within
 * 1e-6 of the magnitude mag (NULL: ref's). */
static void expect(const th_dev *d, const double *ref, const double *mag, int exact, const char *what,
                   const char *repro)
{
    float *out = th_read(d->t);
    long bad = th_first_nonfinite(out, (size_t)d->n);
    ck_assert_msg(bad < 0, "%s: element %ld not finite (%g); %s", what, bad, bad < 0 ? 0.0 : (double)out[bad], repro);
    for (int64_t k = 0; exact && k < d->n; k++)
        ck_assert_msg(out[k] == (float)ref[k], "%s: element %lld is %.9g, want %.9g; %s", what, (long long)k,
                      (double)out[k], ref[k], repro);
    double e = mag ? th_nrms_mag(out, ref, mag, (size_t)d->n) : th_nrms(out, ref, (size_t)d->n);
    ck_assert_msg(e <= 1e-6, "%s: nrms %g; %s", what, e, repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

static void expect_same_bits(const th_dev *d, const float *first, const char *what, const char *repro)
{
    float *again = th_read(d->t);
    ck_assert_msg(!memcmp(again, first, (size_t)d->n * 4), "%s: a second run gave other bits; %s", what, repro);
    free(again);
}

START_TEST(test_resize_sweep)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 7100 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    ref_resize g = rand_case(&r, _i);
    teeny_resize2d_params p = params_of(&g);
    char repro[256];
    repro_of(&g, seed, repro, sizeof repro);
    int64_t xs[4] = {g.B, g.C, g.H, g.W}, ys[4] = {g.B, g.C, g.OH, g.OW};
    size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.C * g.OH * g.OW;
    float *x = th_malloc(nx * 4), *dy = th_malloc(ny * 4);
    th_fill_normal(&r, x, nx, 0, 1);
    th_fill_normal(&r, dy, ny, 0, 1);
    int view = _i % 3 == 1 ? 3 : 0;
    th_dev tx = th_dev_make(ctx, 0, 4, xs, view, x), ty = th_dev_make(ctx, 0, 4, ys, view ? 1 : 0, NULL),
           tdy = th_dev_make(ctx, 0, 4, ys, view ? 2 : 0, dy), tdx = th_dev_make(ctx, 0, 4, xs, view ? 5 : 0, NULL);
    double *xd = th_dbl(x, nx), *dyd = th_dbl(dy, ny), *ady = th_malloc(ny * 8), *y = th_malloc(ny * 8),
           *dx = th_malloc(nx * 8), *mag = th_malloc(nx * 8);
    for (size_t i = 0; i < ny; i++)
        ady[i] = fabs(dyd[i]);
    ref_resize_forward(&g, xd, y);
    ref_resize_backward(&g, dyd, dx);
    ref_resize_backward(&g, ady, mag);

    TH_OK(ctx, teeny_resize2d_forward(ctx, &p, tx.t, ty.t));
    expect(&ty, y, NULL, g.mode == TEENY_RESIZE_NEAREST, "forward", repro);
    TH_OK(ctx, teeny_resize2d_backward(ctx, &p, tdy.t, tdx.t));
    expect(&tdx, dx, mag, 0, "backward", repro);

    float *y1 = th_read(ty.t), *dx1 = th_read(tdx.t);
    th_poison(ty.t);
    th_poison(tdx.t);
    TH_OK(ctx, teeny_resize2d_forward(ctx, &p, tx.t, ty.t));
    TH_OK(ctx, teeny_resize2d_backward(ctx, &p, tdy.t, tdx.t));
    expect_same_bits(&ty, y1, "forward", repro);
    expect_same_bits(&tdx, dx1, "backward", repro);

    th_dev *ds[] = {&tx, &ty, &tdy, &tdx};
    for (int i = 0; i < 4; i++)
        th_dev_free(ds[i]);
    void *hs[] = {x, dy, xd, dyd, ady, y, dx, mag, y1, dx1};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
}
END_TEST

/* Coordinates landing exactly on halves (ties) and on whole numbers, where
 * a float computation could round either way: every rounding mode against
 * the reference, bit-exact, with scales 2, 4, 1/2, 2/3 (sizes) and 0.75. */
START_TEST(test_resize_ties)
{
    teeny_ctx *ctx = th_ctx();
    static const struct {
        int H, OH;
        float s;
    } axes[] = {{3, 6, 2.0f}, {2, 8, 4.0f}, {8, 4, 0.5f}, {3, 2, 0.0f}, {4, 3, 0.75f}, {6, 4, 0.0f}, {5, 10, 0.0f}};
    for (size_t a = 0; a < sizeof axes / sizeof *axes; a++)
        for (int coord = 0; coord <= TEENY_RESIZE_TF_HALF_PIXEL_FOR_NN; coord++)
            for (int rnd = 0; rnd <= TEENY_RESIZE_CEIL; rnd++) {
                ref_resize g = {1, 2, axes[a].H, 3, axes[a].OH, 5, TEENY_RESIZE_NEAREST, coord, rnd, axes[a].s, 0};
                teeny_resize2d_params p = params_of(&g);
                char repro[256];
                repro_of(&g, 0, repro, sizeof repro);
                int64_t xs[4] = {1, 2, g.H, 3}, ys[4] = {1, 2, g.OH, 5};
                size_t nx = (size_t)2 * g.H * 3, ny = (size_t)2 * g.OH * 5;
                float x[64];
                double xd[64], y[128];
                for (size_t i = 0; i < nx; i++)
                    xd[i] = x[i] = (float)i + 1;
                th_dev tx = th_dev_make(ctx, 0, 4, xs, 0, x), ty = th_dev_make(ctx, 0, 4, ys, 0, NULL);
                ref_resize_forward(&g, xd, y);
                TH_OK(ctx, teeny_resize2d_forward(ctx, &p, tx.t, ty.t));
                expect(&ty, y, NULL, 1, "ties", repro);
                (void)ny;
                th_dev_free(&tx);
                th_dev_free(&ty);
            }
}
END_TEST

/* The reference's backward against central differences of its forward:
 * L(x) = sum(dy * resize(x)) is linear in x, so (L(x + h) - L(x - h)) / 2h
 * matches dx to rounding. */
START_TEST(test_resize_fd)
{
    th_rng r = th_rng_make(7300 + (uint64_t)_i);
    ref_resize g = rand_case(&r, _i);
    size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.C * g.OH * g.OW;
    double *x = th_malloc(nx * 8), *dy = th_malloc(ny * 8), *y = th_malloc(ny * 8), *dx = th_malloc(nx * 8);
    char repro[256];
    repro_of(&g, 7300 + (uint64_t)_i, repro, sizeof repro);
    for (size_t i = 0; i < nx; i++)
        x[i] = th_normal(&r);
    for (size_t i = 0; i < ny; i++)
        dy[i] = th_normal(&r);
    ref_resize_backward(&g, dy, dx);
    const double h = 1e-3;
    for (size_t i = 0; i < nx; i++) {
        double keep = x[i], l[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            x[i] = keep + (sgn ? -h : h);
            ref_resize_forward(&g, x, y);
            l[sgn] = 0;
            for (size_t k = 0; k < ny; k++)
                l[sgn] += dy[k] * y[k];
        }
        x[i] = keep;
        double fd = (l[0] - l[1]) / (2 * h);
        ck_assert_msg(fabs(fd - dx[i]) <= 1e-7 * (1 + fabs(dx[i])), "element %zu: dx %.12g, central difference "
                      "%.12g; %s", i, dx[i], fd, repro);
    }
    free(x);
    free(dy);
    free(y);
    free(dx);
}
END_TEST

/* The most outputs along an axis that read one input (the reference's taps). */
static long span(const ref_resize *g, int axis)
{
    int in = axis ? g->W : g->H, out = axis ? g->OW : g->OH;
    long most = 0;
    for (int t = 0; t < in; t++) {
        long n = 0;
        for (int o = 0; o < out; o++) {
            int idx[2];
            double w[2];
            int k = ref_resize_taps(g, axis, o, idx, w);
            n += idx[0] == t || (k > 1 && idx[1] == t);
        }
        most = n > most ? n : most;
    }
    return most;
}

/* Where a device limits a work-item's loop trips (forced with
 * th_loop_limit): x [1, 2, 4, 5] -> [29, 37] bilinear, up to 18 rows of
 * 18 columns per dx element; under limit 80 (budget 40: 2 rows a launch,
 * 9 launches) the backward runs in bands of rows with one
 * launch's bits; under limit 30 not one row fits: TEENY_ERR_UNSUPPORTED,
 * dx untouched. */
START_TEST(test_resize_split_loops)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(7400);
    ref_resize g = {1, 2, 4, 5, 29, 37, TEENY_RESIZE_LINEAR, TEENY_RESIZE_HALF_PIXEL, 0, 0, 0};
    teeny_resize2d_params p = params_of(&g);
    int64_t xs[4] = {1, 2, 4, 5}, ys[4] = {1, 2, 29, 37};
    float dy[2 * 29 * 37];
    double dyd[2 * 29 * 37], dx[40], mag[40];
    th_fill_normal(&r, dy, 2 * 29 * 37, 0, 1);
    th_to_double(dy, dyd, 2 * 29 * 37);
    ref_resize_backward(&g, dyd, dx);
    for (int i = 0; i < 2 * 29 * 37; i++)
        dyd[i] = fabs(dyd[i]);
    ref_resize_backward(&g, dyd, mag);
    th_dev tdy = th_dev_make(ctx, 0, 4, ys, 0, dy), tdx = th_dev_make(ctx, 0, 4, xs, 3, NULL);
    th_loop_limit(0);
    TH_OK(ctx, teeny_resize2d_backward(ctx, &p, tdy.t, tdx.t));
    float *one = th_read(tdx.t);
    th_loop_limit(80);
    th_poison(tdx.t);
    teeny__calls_reset();
    TH_OK(ctx, teeny_resize2d_backward(ctx, &p, tdy.t, tdx.t));
    long rows = (40 - 1) / (span(&g, 1) + 1), launches = (span(&g, 0) + rows - 1) / rows;
    ck_assert_msg(rows >= 1 && launches >= 3, "the case no longer splits: %ld rows a launch", rows);
    ck_assert_int_eq(teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel), launches);
    expect_same_bits(&tdx, one, "split backward", "test_resize_split_loops");
    expect(&tdx, dx, mag, 0, "split backward", "test_resize_split_loops");
    th_loop_limit(30);
    th_poison(tdx.t);
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_resize2d_backward(ctx, &p, tdy.t, tdx.t));
    th_expect_all(tdx.t, NAN);
    th_dev_check_guard(&tdx, "refused backward", "test_resize_split_loops");
    th_loop_limit(-1);
    free(one);
    th_dev_free(&tdy);
    th_dev_free(&tdx);
}
END_TEST

/* A graph x [B, 24] -> linear (24 -> 24, no bias) -> view [B, 2, 3, 4] ->
 * resize (bilinear, to 7 x 5) -> sum: the loss and the weight's gradient
 * (the resize backward of ones, outer x, summed over the batch) against
 * the reference; the builder's refusals. */
START_TEST(test_resize_graph)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *gr;
    teeny_node x, lin, v, y, loss, bad = 0;
    teeny_resize2d_params p = TEENY_RESIZE2D_PARAMS_INIT;
    p.mode = TEENY_RESIZE_LINEAR;
    p.coord = TEENY_RESIZE_ALIGN_CORNERS;
    p.size[0] = 7;
    p.size[1] = 5;
    int64_t xs[2] = {-1, 24}, vs[4] = {-1, 2, 3, 4};
    float xv[48];
    th_rng r = th_rng_make(7500);
    th_fill_normal(&r, xv, 48, 0, 1);
    TH_OK(ctx, teeny_graph_create(ctx, 11, &gr));
    TH_OK(ctx, teeny_graph_input(gr, "x", 2, xs, &x));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_graph_resize2d(gr, "bad", x, &p, &bad)); /* rank 2 */
    ck_assert_int_eq(bad, -1);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_resize2d(gr, "null", x, NULL, &bad));
    TH_OK(ctx, teeny_graph_linear(gr, "fc", x, 24, 0, &lin));
    TH_OK(ctx, teeny_graph_reshape(gr, "v", lin, 4, vs, &v));
    TH_OK(ctx, teeny_graph_resize2d(gr, "up", v, &p, &y));
    teeny_reduce_params rp = {15u, 0, 0};
    TH_OK(ctx, teeny_graph_reduce(gr, "sum", y, &rp, &loss));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = 2;
    pp.loss = loss;
    teeny_plan *plan;
    TH_OK(ctx, teeny_graph_compile(gr, &pp, &plan));
    teeny_tensor *tin, *w, *dw;
    TH_OK(ctx, teeny_plan_tensor(plan, x, &tin));
    TH_OK(ctx, teeny_tensor_write(tin, xv, 48));
    TH_OK(ctx, teeny_plan_forward(plan));
    TH_OK(ctx, teeny_plan_backward(plan));
    TH_OK(ctx, teeny_graph_param(gr, 0, NULL, &w, &dw));
    float wv[576], gw[576], lossv;
    TH_OK(ctx, teeny_tensor_read(w, wv, 576));
    TH_OK(ctx, teeny_tensor_read(dw, gw, 576));
    TH_OK(ctx, teeny_plan_read_loss(plan, &lossv));
    ref_resize g = {1, 2, 3, 4, 7, 5, TEENY_RESIZE_LINEAR, TEENY_RESIZE_ALIGN_CORNERS, 0, 0, 0};
    double ones[70], dlin[24], linv[24], yv[70], want_loss = 0, want_dw[576], mag[576];
    for (int i = 0; i < 70; i++)
        ones[i] = 1;
    ref_resize_backward(&g, ones, dlin);
    for (int b = 0; b < 2; b++) {
        for (int o = 0; o < 24; o++) {
            linv[o] = 0;
            for (int i = 0; i < 24; i++)
                linv[o] += (double)wv[o * 24 + i] * xv[b * 24 + i];
        }
        ref_resize_forward(&g, linv, yv);
        for (int k = 0; k < 70; k++)
            want_loss += yv[k];
    }
    for (int o = 0; o < 24; o++)
        for (int i = 0; i < 24; i++) {
            want_dw[o * 24 + i] = dlin[o] * ((double)xv[i] + xv[24 + i]);
            mag[o * 24 + i] = dlin[o] * (fabs((double)xv[i]) + fabs((double)xv[24 + i]));
        }
    ck_assert_msg(fabs(lossv - want_loss) <= 1e-5 * (1 + fabs(want_loss)), "loss %g, want %g", (double)lossv, want_loss);
    ck_assert_msg(th_nrms_mag(gw, want_dw, mag, 576) <= 1e-6, "dweight nrms %g", th_nrms_mag(gw, want_dw, mag, 576));
    teeny_plan_destroy(plan);
    teeny_graph_destroy(gr);
}
END_TEST

/* Every refusal exact, before anything is written. */
START_TEST(test_resize_errors)
{
    teeny_ctx *ctx = th_ctx();
    int64_t xs[4] = {1, 2, 3, 4}, ys[4] = {1, 2, 6, 8}, x3[3] = {2, 3, 4}, yb[4] = {1, 2, 6, 7};
    teeny_resize2d_params p = TEENY_RESIZE2D_PARAMS_INIT, q;
    p.size[0] = 6;
    p.size[1] = 8;
    float x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    teeny_tensor *tx = th_tensor_from(ctx, 4, xs, x), *ty = th_tensor(ctx, 4, ys), *t3 = th_tensor(ctx, 3, x3),
                 *tyb = th_tensor(ctx, 4, yb), *tdx = th_tensor(ctx, 4, xs);
    th_poison(ty);
    th_poison(tdx);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_resize2d_forward(ctx, NULL, tx, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_resize2d_backward(ctx, NULL, ty, tdx));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_resize2d_forward(NULL, &p, tx, ty));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_resize2d_forward(ctx, &p, t3, ty));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_resize2d_forward(ctx, &p, tx, tyb));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_resize2d_backward(ctx, &p, tyb, tdx));
    teeny_tensor *base = th_tensor(ctx, 1, (int64_t[]){200}), *xv, *yv;
    TH_OK(ctx, teeny_tensor_view(base, 0, 4, xs, &xv));
    TH_OK(ctx, teeny_tensor_view(base, 10, 4, ys, &yv));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_resize2d_forward(ctx, &p, xv, yv)); /* y overlaps x */
    teeny_tensor_destroy(yv);
    teeny_tensor_destroy(xv);
    teeny_tensor_destroy(base);
    struct {
        int field, value;
        float scale;
        teeny_status want;
    } bad[] = {{0, 2, 0, TEENY_ERR_ARG},  {0, -1, 0, TEENY_ERR_ARG}, {1, 5, 0, TEENY_ERR_ARG},
               {2, 4, 0, TEENY_ERR_ARG},  {3, 0, 0, TEENY_ERR_ARG},  {4, 0, 0, TEENY_ERR_ARG},
               {5, 0, -2.0f, TEENY_ERR_ARG}, {5, 0, NAN, TEENY_ERR_ARG}, {5, 0, INFINITY, TEENY_ERR_ARG},
               {5, 0, 0.01f, TEENY_ERR_UNSUPPORTED}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        q = p;
        if (bad[i].field == 0)
            q.mode = (teeny_resize_mode)bad[i].value;
        else if (bad[i].field == 1)
            q.coord = (teeny_resize_coord)bad[i].value;
        else if (bad[i].field == 2)
            q.rounding = (teeny_resize_rounding)bad[i].value;
        else if (bad[i].field < 5)
            q.size[bad[i].field - 3] = bad[i].value;
        else
            q.scale[1] = bad[i].scale;
        TH_STATUS(ctx, bad[i].want, teeny_resize2d_forward(ctx, &q, tx, ty));
        TH_STATUS(ctx, bad[i].want, teeny_resize2d_backward(ctx, &q, ty, tdx));
    }
    th_expect_all(ty, NAN);
    th_expect_all(tdx, NAN);
    teeny_tensor *ts[] = {tx, ty, t3, tyb, tdx};
    for (int i = 0; i < 5; i++)
        teeny_tensor_destroy(ts[i]);
}
END_TEST

Suite *suite_resize(void)
{
    Suite *s = suite_create("resize");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_resize_sweep, 0, n_sweep());
    tcase_add_test(fwd, test_resize_ties);
    tcase_add_loop_test(bwd, test_resize_fd, 0, th_small() ? 10 : 40);
    tcase_add_test(bwd, test_resize_split_loops);
    tcase_add_test(err, test_resize_graph);
    tcase_add_test(err, test_resize_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
