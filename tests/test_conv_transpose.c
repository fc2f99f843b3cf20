/*
 * test_conv_transpose.c -- 2-D transposed convolution against its float64
 * reference (tests/ref/conv_transpose_ref.c, written from the scatter's
 * definition, so it checks the reduction to conv2d's passes): seeded sweeps
 * over strides, pads (the padding after drawn apart), dilations, groups,
 * output_padding (below the stride, or only below the dilation), bias or
 * none and views at offsets, forward and backward;
 * the reference against central finite differences; determinism; the
 * conv2d passes under a loop limit; a training graph's gradients; shape
 * inference; and every error path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clwrap.h"
#include "harness.h"
#include "conv_data.h"
#include "ref/conv_transpose_ref.h"

#define TOL 1e-5

typedef struct {
    ref_convt c;
    int bias, view, skip; /* skip: backward bit 0 no dx, bit 1 no dw, bit 2 no dbias */
} convt_case;

static teeny_conv_transpose2d_params params_of(const ref_convt *c)
{
    teeny_conv_transpose2d_params p = {{c->sh, c->sw}, {c->ph, c->pw}, {c->dh, c->dw}, c->G,
                                       {c->peh, c->pew}, {c->oph, c->opw}};
    return p;
}

static void repro_str(const convt_case *k, uint64_t seed, char *buf, size_t cap)
{
    const ref_convt *c = &k->c;
    snprintf(buf, cap,
             "x [%d, %d, %d, %d] w [%d, %d, %d, %d] stride (%d, %d) pad (%d, %d) pad_end_extra (%d, %d) dilation "
             "(%d, %d) output_padding (%d, %d) groups %d%s%s skip %d seed %llu",
             c->B, c->Cin, c->H, c->W, c->Cin, c->Cout / c->G, c->KH, c->KW, c->sh, c->sw, c->ph, c->pw, c->peh,
             c->pew, c->dh, c->dw, c->oph, c->opw, c->G, k->bias ? " bias" : "", k->view ? " (views)" : "", k->skip,
             (unsigned long long)seed);
}

/* One axis: stride, dilation, kernel, pads, output_padding, input size. */
static void draw_axis(th_rng *r, int *s, int *d, int *k, int *p, int *pe, int *op, int *in)
{
    *s = th_int(r, 1, 3);
    *d = th_int(r, 1, 3);
    *k = th_int(r, 1, 4);
    *in = th_int(r, 1, 7);
    *p = th_int(r, 0, 2);
    *pe = th_int(r, -*p, 2);
    int opmax = (*s > *d ? *s : *d) - 1; /* output_padding < stride or < dilation: both kinds drawn */
    *op = th_int(r, 0, opmax);
}

static convt_case sweep_case(th_rng *r, int i)
{
    convt_case k;
    for (;;) {
        ref_convt *c = &k.c;
        memset(&k, 0, sizeof k);
        c->G = th_int(r, 1, 3);
        c->B = th_int(r, 1, 3);
        c->Cin = c->G * th_int(r, 1, 4);
        c->Cout = c->G * th_int(r, 1, 4);
        draw_axis(r, &c->sh, &c->dh, &c->KH, &c->ph, &c->peh, &c->oph, &c->H);
        draw_axis(r, &c->sw, &c->dw, &c->KW, &c->pw, &c->pew, &c->opw, &c->W);
        if (ref_convt_oh(c) >= 1 && ref_convt_ow(c) >= 1)
            break;
    }
    k.bias = th_int(r, 0, 1);
    k.view = i % 3 == 1;
    k.skip = i % 4 == 3 ? th_int(r, 1, 6) : 0;
    return k;
}

/* The transposed convolution's w fan-in is Cout / G * KH * KW. */
static void convt_data_make(conv_data *d, const ref_convt *c, th_rng *r)
{
    data_draw(d, ref_convt_x_numel(c), ref_convt_w_numel(c), ref_convt_y_numel(c), (size_t)c->Cout,
              (double)(c->Cout / c->G) * c->KH * c->KW, r);
}

static void shapes_of(const ref_convt *c, int64_t *xs, int64_t *ws, int64_t *ys)
{
    int64_t x[4] = {c->B, c->Cin, c->H, c->W}, w[4] = {c->Cin, c->Cout / c->G, c->KH, c->KW},
            y[4] = {c->B, c->Cout, ref_convt_oh(c), ref_convt_ow(c)};
    memcpy(xs, x, sizeof x);
    memcpy(ws, w, sizeof w);
    memcpy(ys, y, sizeof y);
}

/* Every element written and finite, within TOL (nrms, or nrms_mag with mag),
 * nothing outside a view touched. */
static void expect_close(const th_dev *d, const double *ref, const double *mag, const char *what, const char *repro)
{
    float *out = th_read(d->t);
    size_t n = (size_t)d->n;
    long bad = th_first_nonfinite(out, n);
    ck_assert_msg(bad < 0, "%s: element %ld not written or not finite (%g); %s", what, bad,
                  bad >= 0 ? (double)out[bad] : 0.0, repro);
    double e = mag ? th_nrms_mag(out, ref, mag, n) : th_nrms(out, ref, n);
    ck_assert_msg(e <= TOL, "%s: nrms %.3g > %.1g; %s", what, e, TOL, repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

static void check_forward(const convt_case *k, const conv_data *d, const char *repro)
{
    teeny_ctx *ctx = th_ctx();
    const ref_convt *c = &k->c;
    int64_t xs[4], ws[4], ys[4], cs = c->Cout;
    teeny_conv_transpose2d_params p = params_of(c);
    shapes_of(c, xs, ws, ys);
    int v = k->view;
    th_dev tx = th_dev_make(ctx, 0, 4, xs, v, d->x), tw = th_dev_make(ctx, 0, 4, ws, v * 3, d->w),
           tb = th_dev_make(ctx, 0, 1, &cs, v * 5, d->b), ty = th_dev_make(ctx, 0, 4, ys, v * 7, NULL);
    double *y = th_malloc(d->ny * sizeof *y);
    TH_OK(ctx, teeny_conv_transpose2d_forward(ctx, &p, tx.t, tw.t, k->bias ? tb.t : NULL, ty.t));
    ref_convt_forward(c, d->xd, d->wd, k->bias ? d->bd : NULL, y);
    expect_close(&ty, y, NULL, "y", repro);
    free(y);
    th_dev *ts[] = {&tx, &tw, &tb, &ty};
    for (int i = 0; i < 4; i++)
        th_dev_free(ts[i]);
}

static void check_backward(const convt_case *k, const conv_data *d, const char *repro)
{
    teeny_ctx *ctx = th_ctx();
    const ref_convt *c = &k->c;
    int64_t xs[4], ws[4], ys[4], cs = c->Cout;
    teeny_conv_transpose2d_params p = params_of(c);
    shapes_of(c, xs, ws, ys);
    int v = k->view;
    th_dev tx = th_dev_make(ctx, 0, 4, xs, v, d->x), tw = th_dev_make(ctx, 0, 4, ws, v * 3, d->w),
           tdy = th_dev_make(ctx, 0, 4, ys, v * 5, d->dy), tdx = th_dev_make(ctx, 0, 4, xs, v * 7, NULL),
           tdw = th_dev_make(ctx, 0, 4, ws, v * 9, NULL), tdb = th_dev_make(ctx, 0, 1, &cs, v * 11, NULL);
    double *dx = th_malloc(d->nx * sizeof *dx), *dw = th_malloc(d->nw * sizeof *dw),
           *db = th_malloc((size_t)c->Cout * sizeof *db), *mdw = th_malloc(d->nw * sizeof *mdw),
           *mdb = th_malloc((size_t)c->Cout * sizeof *mdb);
    TH_OK(ctx, teeny_conv_transpose2d_backward(ctx, &p, tx.t, tw.t, tdy.t, k->skip & 1 ? NULL : tdx.t,
                                               k->skip & 2 ? NULL : tdw.t, k->skip & 4 ? NULL : tdb.t));
    ref_convt_backward(c, d->xd, d->wd, d->dyd, dx, dw, db, mdw, mdb);
    if (!(k->skip & 1))
        expect_close(&tdx, dx, NULL, "dx", repro);
    if (!(k->skip & 2))
        expect_close(&tdw, dw, mdw, "dw", repro);
    if (!(k->skip & 4))
        expect_close(&tdb, db, mdb, "dbias", repro);
    th_dev *outs[3] = {&tdx, &tdw, &tdb};
    for (int i = 0; i < 3; i++)
        if (k->skip & (1 << i))
            th_expect_all(outs[i]->t, NAN); /* not asked for: untouched */
    void *h[] = {dx, dw, db, mdw, mdb};
    for (int i = 0; i < 5; i++)
        free(h[i]);
    th_dev *ts[] = {&tx, &tw, &tdy, &tdx, &tdw, &tdb};
    for (int i = 0; i < 6; i++)
        th_dev_free(ts[i]);
}

static void run_case(const convt_case *k, uint64_t seed)
{
    th_rng r = th_rng_make(seed);
    char repro[400];
    conv_data d;
    repro_str(k, seed, repro, sizeof repro);
    convt_data_make(&d, &k->c, &r);
    check_forward(k, &d, repro);
    check_backward(k, &d, repro);
    data_free(&d);
}

static int sweep_count(void) { return th_small() ? 12 : th_full() ? 3000 : 300; }

START_TEST(test_conv_transpose_sweep)
{
    uint64_t seed = 71000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    convt_case k = sweep_case(&r, _i);
    th_cpu_kernels(_i / 2 % 2); /* conv2d's passes in both variants */
    run_case(&k, seed);
    th_cpu_kernels(-1);
}
END_TEST

/* Larger shapes: several of conv2d's tiles, a depthwise transposed
 * convolution (groups = Cin), a 1x1 kernel with stride 1 (conv2d's plain
 * GEMM path), the ONNX test's kernels. */
static const convt_case large_cases[] = {
    {{2, 16, 13, 11, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 1, 1, 0}, 1, 0, 0},
    {{3, 12, 17, 9, 12, 5, 3, 2, 1, 2, 1, 1, 2, 12, 1, 0, 1, 0}, 1, 1, 0},
    {{2, 32, 9, 10, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0}, 0, 0, 0},
    {{1, 8, 20, 20, 6, 4, 4, 2, 2, 1, 1, 1, 1, 2, -1, 1, 0, 1}, 1, 1, 0},
    /* output_padding 1 >= stride 1 (< dilation 2) past a padding after of 0: rows no tap reaches */
    {{2, 3, 7, 6, 4, 3, 2, 1, 1, 0, 0, 2, 3, 1, 0, 0, 1, 2}, 1, 0, 0},
};

START_TEST(test_conv_transpose_large)
{
    th_cpu_kernels(_i % 2);
    run_case(&large_cases[_i / 2], 72000 + (uint64_t)_i);
    th_cpu_kernels(-1);
}
END_TEST

/* The conv2d passes split their loops under a device loop limit
 * (conv2d/gemm.c; forced with th_loop_limit on a 2-unit plan, as
 * test_conv2d_split_loops does): more kernels run, the results still match
 * the reference, every output written; a limit below one unit of a GEMM is
 * TEENY_ERR_UNSUPPORTED with the outputs untouched. */
static long limited_run(const convt_case *k, const conv_data *d, teeny_status want, const char *repro)
{
    teeny_ctx *ctx = th_ctx();
    const ref_convt *c = &k->c;
    int64_t xs[4], ws[4], ys[4], cs = c->Cout;
    teeny_conv_transpose2d_params p = params_of(c);
    shapes_of(c, xs, ws, ys);
    th_dev tx = th_dev_make(ctx, 0, 4, xs, 0, d->x), tw = th_dev_make(ctx, 0, 4, ws, 0, d->w),
           tb = th_dev_make(ctx, 0, 1, &cs, 0, d->b), tdy = th_dev_make(ctx, 0, 4, ys, 0, d->dy);
    th_dev o[4] = {th_dev_make(ctx, 0, 4, ys, 3, NULL), th_dev_make(ctx, 0, 4, xs, 5, NULL),
                   th_dev_make(ctx, 0, 4, ws, 7, NULL), th_dev_make(ctx, 0, 1, &cs, 9, NULL)};
    teeny__calls_reset();
    TH_STATUS(ctx, want, teeny_conv_transpose2d_forward(ctx, &p, tx.t, tw.t, tb.t, o[0].t));
    TH_STATUS(ctx, want, teeny_conv_transpose2d_backward(ctx, &p, tx.t, tw.t, tdy.t, o[1].t, o[2].t, o[3].t));
    TH_OK(ctx, teeny_ctx_finish(ctx));
    long launches = teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel);
    if (want == TEENY_OK) {
        size_t n[4] = {d->ny, d->nx, d->nw, (size_t)c->Cout};
        double *ref[4], *mag[4] = {NULL, NULL, NULL, NULL};
        for (int i = 0; i < 4; i++)
            ref[i] = th_malloc(n[i] * sizeof(double));
        mag[2] = th_malloc(n[2] * sizeof(double));
        mag[3] = th_malloc(n[3] * sizeof(double));
        ref_convt_forward(c, d->xd, d->wd, d->bd, ref[0]);
        ref_convt_backward(c, d->xd, d->wd, d->dyd, ref[1], ref[2], ref[3], mag[2], mag[3]);
        static const char *const what[4] = {"y", "dx", "dw", "dbias"};
        for (int i = 0; i < 4; i++) {
            expect_close(&o[i], ref[i], mag[i], what[i], repro);
            free(ref[i]);
            free(mag[i]);
        }
    } else {
        for (int i = 0; i < 4; i++) {
            th_expect_all(o[i].t, NAN);
            th_dev_check_guard(&o[i], "rejected output", repro);
        }
    }
    th_dev *ts[] = {&tx, &tw, &tb, &tdy, &o[0], &o[1], &o[2], &o[3]};
    for (int i = 0; i < 8; i++)
        th_dev_free(ts[i]);
    return launches;
}

START_TEST(test_conv_transpose_loop_limit)
{
    static const convt_case k = {{2, 24, 6, 6, 20, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0, 1, 1}, 1, 0, 0};
    th_rng r = th_rng_make(73000 + (uint64_t)_i);
    conv_data d;
    char repro[400];
    repro_str(&k, 73000 + (uint64_t)_i, repro, sizeof repro);
    strcat(repro, _i ? " (CPU variants)" : " (portable kernels)");
    convt_data_make(&d, &k.c, &r);
    th_cpu_kernels(_i);
    th_compute_units(2);
    th_loop_limit(0);
    long n0 = limited_run(&k, &d, TEENY_OK, repro);
    th_loop_limit(2000);
    long n1 = limited_run(&k, &d, TEENY_OK, repro);
    ck_assert_msg(n1 > n0, "%ld kernels launched, %ld without the limit: nothing split; %s", n1, n0, repro);
    th_loop_limit(200); /* below one unit of every GEMM */
    limited_run(&k, &d, TEENY_ERR_UNSUPPORTED, repro);
    th_loop_limit(-1);
    th_compute_units(0);
    th_cpu_kernels(-1);
    data_free(&d);
}
END_TEST

/* Same inputs, same bits: two runs of forward and backward. */
START_TEST(test_conv_transpose_determinism)
{
    teeny_ctx *ctx = th_ctx();
    const convt_case *k = &large_cases[0];
    const ref_convt *c = &k->c;
    th_rng r = th_rng_make(74000);
    conv_data d;
    convt_data_make(&d, c, &r);
    int64_t xs[4], ws[4], ys[4], cs = c->Cout;
    teeny_conv_transpose2d_params p = params_of(c);
    shapes_of(c, xs, ws, ys);
    teeny_tensor *tx = th_tensor_from(ctx, 4, xs, d.x), *tw = th_tensor_from(ctx, 4, ws, d.w),
                 *tb = th_tensor_from(ctx, 1, &cs, d.b), *tdy = th_tensor_from(ctx, 4, ys, d.dy);
    teeny_tensor *o[2][4];
    for (int run = 0; run < 2; run++) {
        o[run][0] = th_tensor(ctx, 4, ys);
        o[run][1] = th_tensor(ctx, 4, xs);
        o[run][2] = th_tensor(ctx, 4, ws);
        o[run][3] = th_tensor(ctx, 1, &cs);
        for (int j = 0; j < 4; j++)
            th_poison(o[run][j]);
        TH_OK(ctx, teeny_conv_transpose2d_forward(ctx, &p, tx, tw, tb, o[run][0]));
        TH_OK(ctx, teeny_conv_transpose2d_backward(ctx, &p, tx, tw, tdy, o[run][1], o[run][2], o[run][3]));
    }
    for (int j = 0; j < 4; j++) {
        float *a = th_read(o[0][j]), *b = th_read(o[1][j]);
        size_t n = (size_t)teeny_tensor_numel(o[0][j]);
        ck_assert_msg(th_first_nonfinite(a, n) < 0, "output %d not written", j);
        ck_assert_msg(!memcmp(a, b, n * sizeof *a), "output %d differs between two runs", j);
        free(a);
        free(b);
        teeny_tensor_destroy(o[0][j]);
        teeny_tensor_destroy(o[1][j]);
    }
    teeny_tensor *ts[] = {tx, tw, tb, tdy};
    for (int i = 0; i < 4; i++)
        teeny_tensor_destroy(ts[i]);
    data_free(&d);
}
END_TEST

/* ---- the reference against central finite differences ---- */

static double loss(const ref_convt *c, const double *x, const double *w, const double *b, const double *g, size_t ny)
{
    double *y = th_malloc(ny * sizeof *y), L = 0;
    ref_convt_forward(c, x, w, b, y);
    for (size_t i = 0; i < ny; i++)
        L += g[i] * y[i];
    free(y);
    return L;
}

START_TEST(test_conv_transpose_finite_differences)
{
    static const ref_convt shapes[] = {
        {2, 4, 3, 4, 4, 3, 2, 2, 1, 1, 0, 1, 2, 2, 1, 0, 1, 0},
        {1, 3, 4, 3, 6, 2, 3, 1, 2, 0, 1, 2, 1, 3, 0, 2, 1, 1},
    };
    for (int s = 0; s < 2; s++) {
        const ref_convt *c = &shapes[s];
        th_rng r = th_rng_make(75 + (uint64_t)s);
        size_t nx = ref_convt_x_numel(c), nw = ref_convt_w_numel(c), ny = ref_convt_y_numel(c), nb = (size_t)c->Cout;
        double *x = th_malloc(nx * sizeof *x), *w = th_malloc(nw * sizeof *w), *b = th_malloc(nb * sizeof *b),
               *g = th_malloc(ny * sizeof *g), *dx = th_malloc(nx * sizeof *dx), *dw = th_malloc(nw * sizeof *dw),
               *db = th_malloc(nb * sizeof *db);
        double *all[4] = {x, w, b, g};
        size_t n4[4] = {nx, nw, nb, ny};
        for (int q = 0; q < 4; q++)
            for (size_t i = 0; i < n4[q]; i++)
                all[q][i] = th_normal(&r);
        ref_convt_backward(c, x, w, g, dx, dw, db, NULL, NULL);
        double *params[3] = {x, w, b}, *grads[3] = {dx, dw, db};
        const double h = 1e-5;
        for (int q = 0; q < 3; q++)
            for (size_t i = 0; i < n4[q]; i++) {
                double keep = params[q][i], lp, lm;
                params[q][i] = keep + h;
                lp = loss(c, x, w, b, g, ny);
                params[q][i] = keep - h;
                lm = loss(c, x, w, b, g, ny);
                params[q][i] = keep;
                double fd = (lp - lm) / (2 * h);
                ck_assert_msg(fabs(fd - grads[q][i]) <= 1e-6 * (1 + fabs(fd)),
                              "shape %d param %d[%zu]: analytic %.9g, finite difference %.9g", s, q, i, grads[q][i], fd);
            }
        void *hs[] = {x, w, b, g, dx, dw, db};
        for (int i = 0; i < 7; i++)
            free(hs[i]);
    }
}
END_TEST

/* ---- a graph: built, compiled for training, gradients against the reference ---- */

/* x -> up1 (bias) -> up2 (groups 2, no bias) -> * g -> sum: the loss and
 * both layers' parameter gradients (up1's through up2's input gradient)
 * against the reference chained by hand. */
START_TEST(test_conv_transpose_graph)
{
    teeny_ctx *ctx = th_ctx();
    const ref_convt c1 = {2, 4, 5, 4, 6, 3, 3, 2, 1, 1, 1, 1, 2, 2, 1, 0, 1, 0};
    const ref_convt c2 = {2, 6, ref_convt_oh(&c1), ref_convt_ow(&c1), 4, 2, 3, 1, 2, 0, 1, 2, 1, 2, 1, 0, 1, 1};
    th_rng r = th_rng_make(76);
    conv_data d1, d2;
    convt_data_make(&d1, &c1, &r);
    convt_data_make(&d2, &c2, &r);
    teeny_conv_transpose2d_params p1 = params_of(&c1), p2 = params_of(&c2);
    int64_t xs[4] = {-1, c1.Cin, c1.H, c1.W}, gs[4] = {-1, c2.Cout, ref_convt_oh(&c2), ref_convt_ow(&c2)};
    teeny_graph *g;
    teeny_node in, gin, y1, y2, m, L;
    teeny_reduce_params rp = {0xF, 0, 0};
    TH_OK(ctx, teeny_graph_create(ctx, 1, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 4, xs, &in));
    TH_OK(ctx, teeny_graph_input(g, "g", 4, gs, &gin));
    TH_OK(ctx, teeny_graph_conv_transpose2d(g, "up1", in, c1.Cout, c1.KH, c1.KW, &p1, 1, &y1));
    TH_OK(ctx, teeny_graph_conv_transpose2d(g, "up2", y1, c2.Cout, c2.KH, c2.KW, &p2, 0, &y2));
    TH_OK(ctx, teeny_graph_mul(g, "m", y2, gin, &m));
    TH_OK(ctx, teeny_graph_reduce(g, "loss", m, &rp, &L));
    /* builder errors: exact status, no node */
    teeny_node bad = 7;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_conv_transpose2d(g, "bad", in, 0, 3, 3, &p1, 1, &bad));
    ck_assert(bad == -1);
    teeny_conv_transpose2d_params q = p1;
    q.groups = 4; /* does not divide out_channels 6 */
    bad = 7;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_conv_transpose2d(g, "bad", in, c1.Cout, 3, 3, &q, 1, &bad));
    ck_assert(bad == -1);
    q = p1, q.output_padding[0] = 2; /* >= stride 2 and dilation 1 */
    bad = 7;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_conv_transpose2d(g, "bad", in, c1.Cout, 3, 3, &q, 1, &bad));
    ck_assert(bad == -1);
    ck_assert_int_eq(teeny_graph_node_count(g), 6); /* x, g, up1, up2, m, loss: nothing added */
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = c1.B;
    pp.loss = L;
    teeny_plan *plan;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &plan));
    ck_assert_int_eq(teeny_graph_param_count(g), 3);
    static const char *const names[3] = {"up1.weight", "up1.bias", "up2.weight"};
    teeny_tensor *val[3], *grad[3], *tin, *tg;
    const float *init[3] = {d1.w, d1.b, d2.w};
    size_t count[3] = {d1.nw, (size_t)c1.Cout, d2.nw};
    for (int i = 0; i < 3; i++) {
        const char *name;
        TH_OK(ctx, teeny_graph_param(g, i, &name, &val[i], &grad[i]));
        ck_assert_str_eq(name, names[i]);
        TH_OK(ctx, teeny_tensor_write(val[i], init[i], count[i]));
    }
    TH_OK(ctx, teeny_plan_tensor(plan, in, &tin));
    TH_OK(ctx, teeny_plan_tensor(plan, gin, &tg));
    TH_OK(ctx, teeny_tensor_write(tin, d1.x, d1.nx));
    TH_OK(ctx, teeny_tensor_write(tg, d2.dy, d2.ny));
    TH_OK(ctx, teeny_plan_forward(plan));
    TH_OK(ctx, teeny_plan_backward(plan));
    float lossv;
    TH_OK(ctx, teeny_plan_read_loss(plan, &lossv));
    /* the reference, chained */
    double *y1r = th_malloc(d1.ny * sizeof(double)), *y2r = th_malloc(d2.ny * sizeof(double)),
           *dy1 = th_malloc(d1.ny * sizeof(double)), *ref[3], *mag[3], Lr = 0, Lm = 0;
    for (int i = 0; i < 3; i++) {
        ref[i] = th_malloc(count[i] * sizeof(double));
        mag[i] = th_malloc(count[i] * sizeof(double));
    }
    ref_convt_forward(&c1, d1.xd, d1.wd, d1.bd, y1r);
    ref_convt_forward(&c2, y1r, d2.wd, NULL, y2r);
    for (size_t i = 0; i < d2.ny; i++)
        Lr += y2r[i] * d2.dyd[i], Lm += fabs(y2r[i] * d2.dyd[i]);
    ck_assert_msg(fabs(lossv - Lr) <= 1e-5 * Lm, "loss %.9g, reference %.9g", (double)lossv, Lr);
    ref_convt_backward(&c2, y1r, d2.wd, d2.dyd, dy1, ref[2], NULL, mag[2], NULL);
    ref_convt_backward(&c1, d1.xd, d1.wd, dy1, NULL, ref[0], ref[1], mag[0], mag[1]);
    for (int i = 0; i < 3; i++) {
        float *got = th_read(grad[i]);
        double e = th_nrms_mag(got, ref[i], mag[i], count[i]);
        ck_assert_msg(th_first_nonfinite(got, count[i]) < 0 && e <= TOL, "%s gradient: nrms %.3g", names[i], e);
        free(got);
        free(ref[i]);
        free(mag[i]);
    }
    free(y1r);
    free(y2r);
    free(dy1);
    teeny_plan_destroy(plan);
    teeny_graph_destroy(g);
    data_free(&d1);
    data_free(&d2);
}
END_TEST

/* ---- shapes ---- */

START_TEST(test_conv_transpose_output_shape)
{
    static const struct {
        teeny_conv_transpose2d_params p;
        int64_t x[4], w[4], y[4];
    } cases[] = {
        /* (5-1)*2 - 1 - 1 + 3 + 0 = 9; (4-1)*1 - 0 - 0 + 2*(2-1) + 1 = 6 */
        {{{2, 1}, {1, 0}, {1, 2}, 1, {0, 0}, {0, 0}}, {2, 3, 5, 4}, {3, 4, 3, 2}, {2, 4, 9, 6}},
        /* groups 2: Cout = 2 * 3; output_padding 1 on H; pad after 1 + 2 on W */
        {{{3, 2}, {0, 1}, {1, 1}, 2, {0, 2}, {1, 0}}, {1, 4, 3, 3}, {4, 3, 2, 2}, {1, 6, 9, 2}},
        /* output_padding 1 < dilation 2 with stride 1 */
        {{{1, 1}, {0, 0}, {2, 1}, 1, {0, 0}, {1, 0}}, {1, 1, 3, 3}, {1, 1, 2, 2}, {1, 1, 6, 4}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t y[4] = {0};
        TH_OK(NULL, teeny_conv_transpose2d_output_shape(&cases[i].p, cases[i].x, cases[i].w, y));
        ck_assert_msg(!memcmp(y, cases[i].y, sizeof y), "case %zu: [%lld, %lld, %lld, %lld]", i, (long long)y[0],
                      (long long)y[1], (long long)y[2], (long long)y[3]);
    }
    teeny_conv_transpose2d_params p = TEENY_CONV_TRANSPOSE2D_PARAMS_INIT, q;
    int64_t x[4] = {1, 4, 5, 5}, w[4] = {4, 2, 3, 3}, y[4] = {-7, -7, -7, -7}, keep[4];
    memcpy(keep, y, sizeof keep);
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv_transpose2d_output_shape(NULL, x, w, y));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv_transpose2d_output_shape(&p, NULL, w, y));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv_transpose2d_output_shape(&p, x, w, NULL));
    q = p, q.stride[0] = 0;
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv_transpose2d_output_shape(&q, x, w, y));
    q = p, q.output_padding[1] = 1; /* not below stride 1 nor dilation 1 */
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv_transpose2d_output_shape(&q, x, w, y));
    ck_assert_msg(strstr(teeny_last_error(NULL), "output_padding") != NULL, "%s", teeny_last_error(NULL));
    q = p, q.pad_end_extra[0] = -1; /* pad 0 + (-1) */
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv_transpose2d_output_shape(&q, x, w, y));
    q = p, q.groups = 3; /* does not divide Cin 4 */
    TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_conv_transpose2d_output_shape(&q, x, w, y));
    q = p, q.pad[1] = 4; /* (5-1) - 8 + 2 + 1 < 1 */
    TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_conv_transpose2d_output_shape(&q, x, w, y));
    int64_t w5[4] = {5, 2, 3, 3};
    TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_conv_transpose2d_output_shape(&p, x, w5, y));
    q = p, q.stride[0] = 1 << 30; /* rows past int32 */
    TH_STATUS(NULL, TEENY_ERR_RANGE, teeny_conv_transpose2d_output_shape(&q, x, w, y));
    int64_t xbig[4] = {1 << 16, 4, 200, 200};
    TH_STATUS(NULL, TEENY_ERR_RANGE, teeny_conv_transpose2d_output_shape(&p, xbig, w, y));
    ck_assert_msg(!memcmp(keep, y, sizeof keep), "y_shape written on failure");
}
END_TEST

/* ---- errors: exact status, nothing modified ---- */

START_TEST(test_conv_transpose_errors)
{
    teeny_ctx *ctx = th_ctx();
    enum { B = 2, Ci = 4, H = 4, W = 3, Co = 6, G = 2, K = 3 };
    const ref_convt c = {B, Ci, H, W, Co, K, K, 2, 1, 1, 0, 1, 1, G, 0, 0, 1, 0};
    th_rng r = th_rng_make(77);
    int64_t xs[4], ws[4], ys[4], cs = Co, c7 = Co + 1;
    shapes_of(&c, xs, ws, ys);
    int64_t ys_bad[4] = {ys[0], ys[1], ys[2] - 1, ys[3]}, ws_g[4] = {Ci, Co, K, K}, x3[3] = {B, Ci, H * W};
    size_t nx = ref_convt_x_numel(&c), nw = ref_convt_w_numel(&c), ny = ref_convt_y_numel(&c);
    float *x = th_malloc(nx * 4), *w = th_malloc(nw * 4), *v = th_malloc(Co * 4), *y = th_malloc(ny * 4);
    th_fill_normal(&r, x, nx, 0, 1);
    th_fill_normal(&r, w, nw, 0, 1);
    th_fill_normal(&r, v, Co, 0, 1);
    th_fill_normal(&r, y, ny, 0, 1);
    teeny_tensor *tx = th_tensor_from(ctx, 4, xs, x), *tw = th_tensor_from(ctx, 4, ws, w),
                 *tb = th_tensor_from(ctx, 1, &cs, v), *ty = th_tensor_from(ctx, 4, ys, y),
                 *tdy = th_tensor_from(ctx, 4, ys, y), *tdx = th_tensor_from(ctx, 4, xs, x),
                 *tdw = th_tensor_from(ctx, 4, ws, w), *tdb = th_tensor_from(ctx, 1, &cs, v);
    teeny_tensor *tybad = th_tensor(ctx, 4, ys_bad), *tb7 = th_tensor(ctx, 1, &c7), *twg = th_tensor(ctx, 4, ws_g),
                 *tx3 = th_tensor(ctx, 3, x3), *ti = NULL, *ty_on_x = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 4, xs, &ti));
    int64_t big = (int64_t)(nx + ny) + 8; /* x and a y-shaped view overlapping it */
    teeny_tensor *tbig = th_tensor(ctx, 1, &big), *tx_in_big = NULL;
    TH_OK(ctx, teeny_tensor_view(tbig, 0, 4, xs, &tx_in_big));
    TH_OK(ctx, teeny_tensor_view(tbig, 4, 4, ys, &ty_on_x));
    teeny_tensor *watched[8] = {tx, tw, tb, ty, tdy, tdx, tdw, tdb};
    float *before[8];
    for (int i = 0; i < 8; i++)
        before[i] = th_read(watched[i]);
    teeny_conv_transpose2d_params p = params_of(&c), q;
#define FWD(P, X, Wt, Bi, Y) teeny_conv_transpose2d_forward(ctx, P, X, Wt, Bi, Y)
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv_transpose2d_forward(NULL, &p, tx, tw, tb, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(NULL, tx, tw, tb, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&p, NULL, tw, tb, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&p, tx, NULL, tb, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&p, tx, tw, tb, NULL));
    q = p, q.stride[1] = 0;
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&q, tx, tw, tb, ty));
    q = p, q.dilation[0] = -1;
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&q, tx, tw, tb, ty));
    q = p, q.pad[0] = -1;
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&q, tx, tw, tb, ty));
    q = p, q.output_padding[0] = 2; /* >= stride 2 and dilation 1 */
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&q, tx, tw, tb, ty));
    q = p, q.output_padding[1] = -1;
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&q, tx, tw, tb, ty));
    q = p, q.groups = 0;
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&q, tx, tw, tb, ty));
    q = p, q.groups = 3; /* divides neither Cin 4 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&q, tx, tw, tb, ty));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&p, tx, twg, tb, ty));   /* weight [Ci, Co]: y would have 12 channels */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&p, tx3, tw, tb, ty));   /* x rank 3 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&p, tx, tw, tb, tybad)); /* y shape */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(&p, tx, tw, tb7, ty));   /* bias numel */
    q = p, q.stride[0] = 1 << 30;                                /* rows past int32 */
    TH_STATUS(ctx, TEENY_ERR_RANGE, FWD(&q, tx, tw, tb, ty));
    q = p, q.groups = 1 << 30; /* Cout = 3 * 2^30 */
    TH_STATUS(ctx, TEENY_ERR_RANGE, FWD(&q, tx, tw, tb, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&p, ti, tw, tb, ty));      /* int32 x */
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(&p, tx_in_big, tw, tb, ty_on_x)); /* y overlaps x */
    ck_assert_msg(strstr(teeny_last_error(ctx), "overlaps") != NULL, "message: %s", teeny_last_error(ctx));
#define BWD(P, Dy, Dx, Dw, Db) teeny_conv_transpose2d_backward(ctx, P, tx, tw, Dy, Dx, Dw, Db)
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_conv_transpose2d_backward(NULL, &p, tx, tw, tdy, tdx, tdw, tdb));
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(NULL, tdy, tdx, tdw, tdb));
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(&p, NULL, tdx, tdw, tdb));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(&p, tybad, tdx, tdw, tdb)); /* dy shape */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(&p, tdy, tdy, tdw, tdb));   /* dx shaped like y */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(&p, tdy, tdx, twg, tdb));   /* dw shape */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, BWD(&p, tdy, tdx, tdw, tb7));   /* dbias numel */
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(&p, tdy, tx, tdw, tdb));      /* dx is x */
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(&p, tdy, tdx, tw, tdb));      /* dw is w */
    q = p, q.output_padding[0] = 5;
    TH_STATUS(ctx, TEENY_ERR_ARG, BWD(&q, tdy, tdx, tdw, tdb));
    q = p, q.pad[1] = 1 << 30, q.stride[1] = 1 << 30;
    TH_STATUS(ctx, TEENY_ERR_RANGE, BWD(&q, tdy, tdx, tdw, tdb));
#undef FWD
#undef BWD
    TH_OK(ctx, teeny_ctx_finish(ctx));
    for (int i = 0; i < 8; i++) {
        float *now = th_read(watched[i]);
        ck_assert_msg(!memcmp(now, before[i], (size_t)teeny_tensor_numel(watched[i]) * sizeof(float)),
                      "a rejected call modified tensor %d", i);
        free(now);
        free(before[i]);
    }
    TH_OK(ctx, teeny_conv_transpose2d_forward(ctx, &p, tx, tw, tb, ty)); /* corrected: accepted */
    TH_OK(ctx, teeny_conv_transpose2d_backward(ctx, &p, tx, tw, tdy, tdx, tdw, tdb));
    TH_OK(ctx, teeny_ctx_finish(ctx));
    teeny_tensor *ts[] = {tx, tw, tb, ty, tdy, tdx, tdw, tdb, tybad, tb7, twg, tx3, ti, ty_on_x, tx_in_big, tbig};
    for (int i = 0; i < 16; i++)
        teeny_tensor_destroy(ts[i]);
    void *h[] = {x, w, v, y};
    for (int i = 0; i < 4; i++)
        free(h[i]);
}
END_TEST

Suite *suite_conv_transpose(void)
{
    Suite *s = suite_create("conv_transpose");
    TCase *t = tcase_create("conv_transpose");
    tcase_add_loop_test(t, test_conv_transpose_sweep, 0, sweep_count());
    tcase_add_loop_test(t, test_conv_transpose_large, 0, 2 * (int)(sizeof large_cases / sizeof large_cases[0]));
    tcase_add_loop_test(t, test_conv_transpose_loop_limit, 0, 2);
    tcase_add_test(t, test_conv_transpose_determinism);
    tcase_add_test(t, test_conv_transpose_finite_differences);
    tcase_add_test(t, test_conv_transpose_graph);
    tcase_add_test(t, test_conv_transpose_output_shape);
    tcase_add_test(t, test_conv_transpose_errors);
    suite_add_tcase(s, t);
    return s;
}
