/*
 * test_layout.c -- the layout ops (src/ops/layout/layout.c): transpose,
 * slice (ONNX clamping, negative steps), pad (negative pads crop), expand,
 * gather and concatenation/split along any axis, forward and backward
 * against float64 source-map references (tests/ref/layout_ref.c) over
 * seeded sweeps of ranks 1..5 with views at odd offsets; the references'
 * adjoint identity, determinism, the graph builders in a training plan,
 * and the error paths.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/ops.h"
#include "ref/layout_ref.h"

static int n_sweep(void)
{
    return th_small() ? 12 : th_full() ? 600 : 120;
}

static ref_shape rand_shape(th_rng *r, int ndim, int hi)
{
    ref_shape s = {ndim, {0}};
    for (int d = 0; d < ndim; d++)
        s.d[d] = th_int(r, 1, hi);
    return s;
}

static th_dev dev(teeny_ctx *ctx, const ref_shape *s, int view, const float *data)
{
    return th_dev_make(ctx, 0, s->ndim, s->d, view, data);
}

static void expect(const th_dev *d, const double *ref, int exact, const char *what, const char *repro)
{
    float *out = th_read(d->t);
    for (int64_t k = 0; k < d->n; k++) {
        if (exact)
            ck_assert_msg(out[k] == (float)ref[k] || (isnan(out[k]) && isnan(ref[k])),
                          "%s: element %lld is %g, want %g; %s", what, (long long)k, (double)out[k], ref[k], repro);
        else
            ck_assert_msg(!isnan(out[k]), "%s: element %lld not written; %s", what, (long long)k, repro);
    }
    if (!exact)
        ck_assert_msg(th_nrms(out, ref, (size_t)d->n) <= 1e-6, "%s: nrms %g; %s", what,
                      th_nrms(out, ref, (size_t)d->n), repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

/* One op of case i on a random x: the map, the device pass each way. */
START_TEST(test_layout_sweep)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 4000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    int op = _i % 6, ndim = 1 + (_i / 6) % 5, view = _i % 4 == 1 ? 3 : 0;
    ref_shape xs = rand_shape(&r, ndim, ndim > 3 ? 4 : 7), ys, is = {0};
    int64_t *src = th_malloc((1 << 17) * sizeof *src);
    int perm[5], axis = th_int(&r, 0, ndim - 1);
    teeny_slice_params sp = TEENY_SLICE_PARAMS_INIT;
    int64_t lo[5] = {0}, hi[5] = {0};
    int32_t idx[3 * 3]; /* the indices: rank 1 or 2, sizes up to 3 (rand_shape) */
    float pad = (float)th_uniform(&r, -2, 2);
    char repro[200];
    snprintf(repro, sizeof repro, "op %d rank %d x [%lld, ...] axis %d seed %llu", op, ndim, (long long)xs.d[0], axis,
             (unsigned long long)seed);
    switch (op) {
    case 0: /* a random permutation */
        for (int d = 0; d < ndim; d++)
            perm[d] = d;
        for (int d = ndim - 1; d > 0; d--) {
            int j = th_int(&r, 0, d), t = perm[d];
            perm[d] = perm[j];
            perm[j] = t;
        }
        ref_transpose_map(&xs, perm, &ys, src);
        break;
    case 1:
        for (int d = 0; d < ndim; d++) {
            int64_t n = xs.d[d];
            sp.step[d] = th_int(&r, 0, 3) == 0 ? -th_int(&r, 1, 2) : th_int(&r, 1, 2);
            sp.start[d] = sp.step[d] > 0 ? th_int(&r, -(int)n, (int)n - 1) : th_int(&r, 0, (int)n + 2);
            sp.end[d] = sp.step[d] > 0 ? (th_int(&r, 0, 2) ? INT64_MAX : sp.start[d] + th_int(&r, 1, 4))
                                       : (th_int(&r, 0, 2) ? INT64_MIN : -(int64_t)n - 3);
            if (sp.start[d] < 0 && sp.step[d] > 0 && sp.end[d] != INT64_MAX)
                sp.end[d] = INT64_MAX; /* keep something selected */
        }
        ref_slice_map(&xs, sp.start, sp.end, sp.step, &ys, src);
        break;
    case 2:
        for (int d = 0; d < ndim; d++) {
            lo[d] = th_int(&r, xs.d[d] > 1 ? -1 : 0, 2);
            hi[d] = th_int(&r, 1 - xs.d[d] - lo[d] > -1 ? (int)(1 - xs.d[d] - lo[d]) : -1, 2);
        }
        ref_pad_map(&xs, lo, hi, &ys, src);
        break;
    case 3: /* x gets 1s where y has a size; y may have more axes */
        ys = rand_shape(&r, ndim + (ndim < 5 ? th_int(&r, 0, 1) : 0), 4);
        for (int d = 0; d < ndim; d++)
            xs.d[d] = th_int(&r, 0, 1) ? 1 : ys.d[d + ys.ndim - ndim];
        ref_expand_map(&xs, &ys, src);
        break;
    case 4:
        is = rand_shape(&r, ndim < 5 ? th_int(&r, 1, 2) : 1, 3);
        for (int64_t q = 0; q < ref_numel(&is); q++)
            idx[q] = th_int(&r, 0, (int)xs.d[axis] - 1); /* repeats: backward sums */
        ref_gather_map(&xs, axis, &is, idx, &ys, src);
        break;
    default:
        break;
    }
    if (op == 5) { /* concatenation of 1..6 parts along the axis, and split */
        int n = th_int(&r, 1, 6);
        ref_shape parts[6];
        th_dev tp[6], tdp[6];
        const teeny_tensor *pin[6];
        teeny_tensor *pout[6];
        float *pd[6];
        for (int p = 0; p < n; p++) {
            parts[p] = xs;
            parts[p].d[axis] = th_int(&r, 1, 4);
        }
        ref_concat_map(n, parts, axis, 0, &ys, src);
        double *y = th_malloc((size_t)ref_numel(&ys) * 8), *part = th_malloc((size_t)ref_numel(&ys) * 8);
        for (int64_t k = 0; k < ref_numel(&ys); k++)
            y[k] = NAN;
        for (int p = 0; p < n; p++) {
            pd[p] = th_malloc((size_t)ref_numel(&parts[p]) * 4);
            th_fill_uniform(&r, pd[p], (size_t)ref_numel(&parts[p]), -3, 3);
            tp[p] = dev(ctx, &parts[p], p % 2 ? view : 0, pd[p]);
            tdp[p] = dev(ctx, &parts[p], p % 2 ? 0 : view, NULL);
            pin[p] = tp[p].t;
            pout[p] = tdp[p].t;
            ref_concat_map(n, parts, axis, p, &ys, src);
            for (int64_t k = 0; k < ref_numel(&ys); k++)
                if (src[k] >= 0)
                    y[k] = pd[p][src[k]];
        }
        th_dev ty = dev(ctx, &ys, view, NULL);
        TH_OK(ctx, teeny_concat(ctx, axis, n, pin, ty.t));
        expect(&ty, y, 1, "concat", repro);
        TH_OK(ctx, teeny_split(ctx, axis, ty.t, n, pout)); /* the backward: each part back */
        for (int p = 0; p < n; p++) {
            for (int64_t k = 0; k < ref_numel(&parts[p]); k++)
                part[k] = pd[p][k];
            expect(&tdp[p], part, 1, "split", repro);
            th_dev_free(&tp[p]);
            th_dev_free(&tdp[p]);
            free(pd[p]);
        }
        th_dev_free(&ty);
        free(y);
        free(part);
        free(src);
        return;
    }
    int64_t nx = ref_numel(&xs), ny = ref_numel(&ys);
    ck_assert(ny <= (1 << 17));
    float *x = th_malloc((size_t)nx * 4), *dy = th_malloc((size_t)ny * 4);
    th_fill_uniform(&r, x, (size_t)nx, -3, 3);
    th_fill_uniform(&r, dy, (size_t)ny, -1, 1);
    double *xd = th_dbl(x, (size_t)nx), *dyd = th_dbl(dy, (size_t)ny), *y = th_malloc((size_t)ny * 8),
           *dx = th_malloc((size_t)nx * 8);
    ref_map_forward(xd, src, ny, pad, y);
    ref_map_backward(dyd, src, ny, nx, dx);
    th_dev tx = dev(ctx, &xs, view, x), ty = dev(ctx, &ys, view ? view + 2 : 0, NULL), tdy = dev(ctx, &ys, 0, dy),
           tdx = dev(ctx, &xs, view ? 1 : 0, NULL), ti = {0};
    switch (op) {
    case 0:
        TH_OK(ctx, teeny_transpose(ctx, perm, tx.t, ty.t));
        TH_OK(ctx, teeny_transpose_backward(ctx, perm, tdy.t, tdx.t));
        break;
    case 1:
        TH_OK(ctx, teeny_slice(ctx, &sp, tx.t, ty.t));
        TH_OK(ctx, teeny_slice_backward(ctx, &sp, tdy.t, tdx.t));
        break;
    case 2:
        TH_OK(ctx, teeny_pad(ctx, lo, hi, pad, tx.t, ty.t));
        TH_OK(ctx, teeny_pad_backward(ctx, lo, hi, tdy.t, tdx.t));
        break;
    case 3:
        TH_OK(ctx, teeny_expand(ctx, tx.t, ty.t));
        TH_OK(ctx, teeny_expand_backward(ctx, tdy.t, tdx.t));
        break;
    default:
        ti = th_dev_make(ctx, 1, is.ndim, is.d, view, idx);
        TH_OK(ctx, teeny_gather(ctx, axis, tx.t, ti.t, ty.t));
        TH_OK(ctx, teeny_gather_backward(ctx, axis, ti.t, tdy.t, tdx.t));
    }
    expect(&ty, y, 1, "y", repro);
    expect(&tdx, dx, op < 3, "dx", repro);
    /* the reference's adjoint: <y(x), dy> = <x, dx> (pads excluded) */
    double lhs = 0, rhs = 0;
    for (int64_t k = 0; k < ny; k++)
        lhs += src[k] < 0 ? 0 : y[k] * dyd[k];
    for (int64_t k = 0; k < nx; k++)
        rhs += xd[k] * dx[k];
    ck_assert_msg(fabs(lhs - rhs) <= 1e-9 * (1 + fabs(lhs)), "adjoint %g vs %g; %s", lhs, rhs, repro);
    free(x);
    free(dy);
    free(xd);
    free(dyd);
    free(y);
    free(dx);
    free(src);
    th_dev_free(&tx);
    th_dev_free(&ty);
    th_dev_free(&tdy);
    th_dev_free(&tdx);
    if (ti.t)
        th_dev_free(&ti);
}
END_TEST

/* x [B, 4] -> linear(6) -> view [B, 2, 3] -> transpose (0, 2, 1) -> pad
 * axis 2 by (1, 0) -> concat with itself on axis 1 -> gather axis 2 ->
 * sum: the loss and d loss / d weight against the host, through maps. */
START_TEST(test_layout_graph)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, lin, v, t, p, c, ga, loss;
    int64_t xs[2] = {-1, 4}, vs[3] = {-1, 2, 3}, lo[3] = {0, 0, 1}, hi[3] = {0, 0, 0}, is[1] = {4};
    int perm[3] = {0, 2, 1};
    int32_t idx[4] = {2, 0, 2, 1};
    float xv[8] = {1, -2, 0.5f, 3, 2, 1, -1, 0.25f};
    TH_OK(ctx, teeny_graph_create(ctx, 9, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 2, xs, &x));
    TH_OK(ctx, teeny_graph_linear(g, "fc", x, 6, 0, &lin));
    TH_OK(ctx, teeny_graph_reshape(g, "v", lin, 3, vs, &v));
    TH_OK(ctx, teeny_graph_transpose(g, "t", v, perm, &t));
    TH_OK(ctx, teeny_graph_pad(g, "p", t, lo, hi, 0.5f, &p));
    teeny_node both[2] = {p, p};
    TH_OK(ctx, teeny_graph_concat_axis(g, "c", 2, 2, both, &c));
    TH_OK(ctx, teeny_graph_gather(g, "ga", c, 2, 1, is, idx, &ga));
    teeny_reduce_params rp = {7, 0, 0};
    TH_OK(ctx, teeny_graph_reduce(g, "sum", ga, &rp, &loss));
    int64_t shape[5];
    int nd;
    TH_OK(ctx, teeny_graph_node_info(g, ga, NULL, &nd, shape));
    ck_assert(nd == 3 && shape[0] == 1 && shape[1] == 3 && shape[2] == 4);
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = 2;
    pp.loss = loss;
    teeny_plan *plan;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &plan));
    teeny_tensor *tin, *w, *dw;
    TH_OK(ctx, teeny_plan_tensor(plan, x, &tin));
    TH_OK(ctx, teeny_tensor_write(tin, xv, 8));
    TH_OK(ctx, teeny_plan_forward(plan));
    TH_OK(ctx, teeny_plan_backward(plan));
    TH_OK(ctx, teeny_graph_param(g, 0, NULL, &w, &dw));
    float wv[24], gw[24], lossv;
    TH_OK(ctx, teeny_tensor_read(w, wv, 24));
    TH_OK(ctx, teeny_tensor_read(dw, gw, 24));
    TH_OK(ctx, teeny_plan_read_loss(plan, &lossv));
    /* host: how often each element of lin [2, 6] reaches the sum, and the pads */
    ref_shape s_v = {3, {2, 2, 3}}, s_t, s_p, s_c, s_g, s_i = {1, {4}};
    int64_t m_t[12], m_p[18], m_c[36], m_c2[36], m_g[24];
    ref_transpose_map(&s_v, perm, &s_t, m_t);
    ref_pad_map(&s_t, lo, hi, &s_p, m_p);
    ref_shape halves[2] = {s_p, s_p};
    ref_concat_map(2, halves, 2, 0, &s_c, m_c);
    ref_concat_map(2, halves, 2, 1, &s_c, m_c2);
    ref_gather_map(&s_c, 2, &s_i, idx, &s_g, m_g);
    double count[12] = {0}, pads = 0, want = 0;
    for (int64_t k = 0; k < ref_numel(&s_g); k++) {
        int64_t at = m_g[k], from = m_c[at] >= 0 ? m_c[at] : m_c2[at];
        if (m_p[from] < 0)
            pads += 0.5;
        else
            count[m_t[m_p[from]]] += 1;
    }
    double lin_v[12];
    for (int b = 0; b < 2; b++)
        for (int o = 0; o < 6; o++) {
            lin_v[b * 6 + o] = 0;
            for (int i = 0; i < 4; i++)
                lin_v[b * 6 + o] += (double)wv[o * 4 + i] * xv[b * 4 + i];
            want += count[b * 6 + o] * lin_v[b * 6 + o];
        }
    want += pads;
    ck_assert_msg(fabs(lossv - want) <= 1e-5 * (1 + fabs(want)), "loss %g, want %g", (double)lossv, want);
    for (int o = 0; o < 6; o++)
        for (int i = 0; i < 4; i++) {
            double gref = count[o] * xv[i] + count[6 + o] * xv[4 + i];
            ck_assert_msg(fabs(gw[o * 4 + i] - gref) <= 1e-5, "dw[%d][%d] %g, want %g", o, i, (double)gw[o * 4 + i],
                          gref);
        }
    teeny_plan_destroy(plan);
    teeny_graph_destroy(g);
}
END_TEST

START_TEST(test_layout_errors)
{
    teeny_ctx *ctx = th_ctx();
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s22[2] = {2, 2}, s6[1] = {6}, s4[1] = {4};
    teeny_tensor *x = th_tensor(ctx, 2, s23), *y32 = th_tensor(ctx, 2, s32), *y22 = th_tensor(ctx, 2, s22),
                 *y6 = th_tensor(ctx, 1, s6), *i4 = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, s4, &i4));
    TH_OK(ctx, teeny_tensor_fill(x, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(y32, 7.0f));
    TH_OK(ctx, teeny_tensor_fill(y22, 7.0f));
    int bad_perm[2] = {0, 0}, perm[2] = {1, 0};
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_transpose(ctx, bad_perm, x, y32));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_transpose(ctx, NULL, x, y32));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_transpose(ctx, perm, x, y22));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_transpose(ctx, perm, y22, y22)); /* y overlaps x */
    teeny_slice_params sp = TEENY_SLICE_PARAMS_INIT;
    sp.step[1] = 0;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_slice(ctx, &sp, x, y22));
    sp.step[1] = 1;
    sp.start[1] = 3; /* nothing */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_slice(ctx, &sp, x, y22));
    sp.start[1] = 1;
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_slice(ctx, &sp, x, y32)); /* [2, 2] expected */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_slice(ctx, NULL, x, y22));
    int64_t lo[2] = {0, -3}, hi[2] = {0, 0};
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_pad(ctx, lo, hi, 0.0f, x, y22)); /* crops everything */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_pad(ctx, NULL, hi, 0.0f, x, y22));
    lo[1] = 0;
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_pad(ctx, lo, hi, 0.0f, x, y22));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_expand(ctx, x, y22)); /* 3 does not broadcast to 2 */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_gather(ctx, 2, x, i4, y22));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_gather(ctx, 0, x, x, y22)); /* indices must be int32 */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_gather(ctx, 1, x, i4, y22)); /* [2, 4] expected */
    const teeny_tensor *parts[2] = {x, y22};
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_concat(ctx, 0, 2, parts, y6)); /* ranks differ */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_concat(ctx, 2, 2, parts, y32));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_concat(ctx, 0, 0, parts, y32));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_concat(ctx, 1, 2, parts, y32)); /* sizes sum to 5, not 2 */
    teeny_tensor *outs[2] = {y22, y22};
    int64_t s24[2] = {2, 4};
    teeny_tensor *y24 = th_tensor(ctx, 2, s24);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_split(ctx, 1, y24, 2, outs)); /* the parts overlap */
    th_expect_all(y32, 7.0f);
    th_expect_all(y22, 7.0f);
    teeny_tensor *ts[] = {x, y32, y22, y6, i4, y24};
    for (int i = 0; i < 6; i++)
        teeny_tensor_destroy(ts[i]);
}
END_TEST

Suite *suite_layout(void)
{
    Suite *s = suite_create("layout");
    TCase *fwd = tcase_create("forward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_layout_sweep, 0, n_sweep());
    tcase_add_test(fwd, test_layout_graph);
    tcase_add_test(err, test_layout_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, err);
    return s;
}
