/*
 * test_concat.c -- channel concatenation, split and the slice op against
 * the float64 reference: seeded sweeps over counts (more than one op's
 * worth of inputs), ranks 2..5 and views at odd offsets; the op-table
 * entries (infer, the concat backward and slice backward tensor orders),
 * determinism, finite differences of the reference and every error path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/ops.h"
#include "ref/concat_ref.h"

#define TOL 1e-5
#define MAX_PARTS 7

/* Copies must be exact; nrms is reported for context. */
static void expect_equal(const th_dev *d, const double *ref, const char *what, const char *repro)
{
    float *out = th_read(d->t);
    long bad = th_first_nonfinite(out, (size_t)d->n);
    ck_assert_msg(bad < 0, "%s: element %ld not written (%g); %s", what, bad, bad >= 0 ? (double)out[bad] : 0.0,
                  repro);
    double e = th_nrms(out, ref, (size_t)d->n);
    ck_assert_msg(e <= TOL, "%s: nrms %.3g; %s", what, e, repro);
    for (int64_t i = 0; i < d->n; i++)
        ck_assert_msg(out[i] == (float)ref[i], "%s: element %lld is %g, want %g; %s", what, (long long)i,
                      (double)out[i], ref[i], repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

static int n_sweep(void)
{
    return th_small() ? 6 : th_full() ? 400 : 100;
}

/* Case i: n parts [B, C_i, rest...] of rank 2..5. */
typedef struct {
    int n, ndim, B, S, C[MAX_PARTS], Csum;
    int64_t rest[3];
} cat_case;

static cat_case sweep_case(th_rng *r, int i)
{
    cat_case c = {0};
    c.n = i % 6 == 0 ? th_int(r, 5, MAX_PARTS) : th_int(r, 1, 4);
    c.ndim = 2 + i % 4;
    c.B = th_int(r, 1, 3);
    c.S = 1;
    for (int d = 0; d < c.ndim - 2; d++) {
        c.rest[d] = th_int(r, 1, c.ndim == 3 ? 40 : 9);
        c.S *= (int)c.rest[d];
    }
    for (int k = 0; k < c.n; k++) {
        c.C[k] = th_int(r, 1, 6);
        c.Csum += c.C[k];
    }
    return c;
}

static void case_shape(const cat_case *c, int channels, int64_t *shape)
{
    shape[0] = c->B;
    shape[1] = channels;
    for (int d = 0; d < c->ndim - 2; d++)
        shape[2 + d] = c->rest[d];
}

static void case_str(const cat_case *c, int view, uint64_t seed, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "%d parts rank %d B %d S %d C", c->n, c->ndim, c->B, c->S);
    for (int k = 0; k < c->n && len < cap; k++)
        len += (size_t)snprintf(buf + len, cap - len, " %d", c->C[k]);
    if (len < cap)
        snprintf(buf + len, cap - len, "%s seed %llu", view ? " (views)" : "", (unsigned long long)seed);
}

/* Concat n parts, compare with the reference, then split y back into
 * fresh tensors and compare with the parts. */
START_TEST(test_concat_forward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 9000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    cat_case c = sweep_case(&r, _i);
    int view = _i % 3 == 0 ? 1 + 2 * (_i % 4) : 0;
    char repro[200];
    case_str(&c, view, seed, repro, sizeof repro);
    int64_t shape[5];
    th_dev xs[MAX_PARTS], back[MAX_PARTS];
    const teeny_tensor *xt[MAX_PARTS];
    teeny_tensor *bt[MAX_PARTS];
    double *xd[MAX_PARTS];
    for (int k = 0; k < c.n; k++) {
        size_t n = (size_t)c.B * c.C[k] * c.S;
        float *x = th_malloc(n * 4);
        th_fill_normal(&r, x, n, 0, 1);
        xd[k] = th_malloc(n * 8);
        th_to_double(x, xd[k], n);
        case_shape(&c, c.C[k], shape);
        xs[k] = th_dev_make(ctx, 0, c.ndim, shape, view ? view + k : 0, x);
        back[k] = th_dev_make(ctx, 0, c.ndim, shape, view ? view + 2 * k + 1 : 0, NULL);
        xt[k] = xs[k].t;
        bt[k] = back[k].t;
        free(x);
    }
    case_shape(&c, c.Csum, shape);
    th_dev y = th_dev_make(ctx, 0, c.ndim, shape, view, NULL);
    double *ref = th_malloc((size_t)c.B * c.Csum * c.S * 8);
    ref_concat(c.n, (const double *const *)xd, c.C, c.B, c.S, ref);
    /* the device's channel copies, then (the CPU variant) cat_copy's
     * rather than cat_copy_cpu's (the test hook CAT_COPY_CPU -1) */
    for (int run = 0; run < 1 + (ctx->tune.variant == TEENY_VARIANT_CPU); run++) {
        th_hook(TEENY__HOOK_CAT_COPY_CPU, run ? -1 : 0);
        th_poison(y.t);
        TH_OK(ctx, teeny_concat_channels(ctx, c.n, xt, y.t));
        expect_equal(&y, ref, run ? "y (cat_copy)" : "y", repro);
        for (int k = 0; k < c.n; k++)
            th_poison(bt[k]);
        TH_OK(ctx, teeny_split_channels(ctx, y.t, c.n, bt));
        for (int k = 0; k < c.n; k++)
            expect_equal(&back[k], xd[k], run ? "split part (cat_copy)" : "split part", repro);
    }
    th_hook(TEENY__HOOK_CAT_COPY_CPU, 0);
    for (int k = 0; k < c.n; k++) {
        free(xd[k]);
        th_dev_free(&xs[k]);
        th_dev_free(&back[k]);
    }
    free(ref);
    th_dev_free(&y);
}
END_TEST

/* The graph's ops through the table: slice forward/backward (zeros
 * outside the slice) and concat backward with some gradients not wanted. */
START_TEST(test_concat_backward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 9500 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    cat_case c = sweep_case(&r, _i);
    if (c.n > TEENY__OP_MAX_SLOTS)
        c.n = TEENY__OP_MAX_SLOTS;
    c.Csum = 0;
    for (int k = 0; k < c.n; k++)
        c.Csum += c.C[k];
    int view = _i % 3 == 1 ? 1 + 2 * (_i % 4) : 0;
    char repro[200];
    case_str(&c, view, seed, repro, sizeof repro);
    int64_t shape[5];
    size_t ny = (size_t)c.B * c.Csum * c.S;
    float *x = th_malloc(ny * 4), *dy = th_malloc(ny * 4);
    th_fill_normal(&r, x, ny, 0, 1);
    th_fill_normal(&r, dy, ny, 0, 1);
    double *xd = th_malloc(ny * 8), *dyd = th_malloc(ny * 8), *ref = th_malloc(ny * 8);
    th_to_double(x, xd, ny);
    th_to_double(dy, dyd, ny);
    case_shape(&c, c.Csum, shape);
    th_dev tx = th_dev_make(ctx, 0, c.ndim, shape, view, x), tdy = th_dev_make(ctx, 0, c.ndim, shape, view ? view + 1 : 0, dy);

    /* slice [c0, c0 + count) */
    int c0 = th_int(&r, 0, c.Csum - 1), count = th_int(&r, 1, c.Csum - c0);
    case_shape(&c, count, shape);
    th_dev ts = th_dev_make(ctx, 0, c.ndim, shape, view ? view + 2 : 0, NULL),
           tsd = th_dev_make(ctx, 0, c.ndim, shape, view ? view + 3 : 0, NULL);
    TH_OK(ctx, teeny_tensor_write(tsd.t, dy, (size_t)tsd.n));
    case_shape(&c, c.Csum, shape);
    th_dev tdx = th_dev_make(ctx, 0, c.ndim, shape, view ? view + 4 : 0, NULL);
    teeny__op_args fa = {.in = {tx.t}, .out = {ts.t}, .attrs.slice = {c0, count}, .training = 1};
    TH_OK(ctx, teeny__op_run(ctx, TEENY__OP_SLICE_CHANNELS, 0, &fa));
    ref_slice(xd, c.B, c.Csum, c.S, c0, count, ref);
    expect_equal(&ts, ref, "slice", repro);
    teeny__op_args ba = {.in = {[TEENY__SLICE_CHANNELS_X] = tx.t, [TEENY__SLICE_CHANNELS_Y] = ts.t,
                                [TEENY__SLICE_CHANNELS_DY] = tsd.t},
                         .out = {[TEENY__SLICE_CHANNELS_X] = tdx.t},
                         .attrs.slice = {c0, count},
                         .training = 1};
    TH_OK(ctx, teeny__op_run(ctx, TEENY__OP_SLICE_CHANNELS, 1, &ba));
    ref_slice_backward(dyd, c.B, c.Csum, c.S, c0, count, ref);
    expect_equal(&tdx, ref, "slice dx", repro);

    /* concat backward: in = [x0..x(n-1), y, dy] by slot (ops.h), out = [dx0..dx(n-1)] */
    th_dev parts[TEENY__OP_MAX_SLOTS], grads[TEENY__OP_MAX_SLOTS];
    teeny__op_args cb = {.attrs.concat = {c.n, 0}, .training = 1};
    int first = 0;
    for (int k = 0; k < c.n; k++) {
        case_shape(&c, c.C[k], shape);
        parts[k] = th_dev_make(ctx, 0, c.ndim, shape, 0, NULL);
        grads[k] = th_dev_make(ctx, 0, c.ndim, shape, view ? view + k : 0, NULL);
        cb.in[TEENY__CONCAT_X0 + k] = parts[k].t;
        cb.out[TEENY__CONCAT_X0 + k] = (k + _i) % 3 == 2 ? NULL : grads[k].t; /* some not wanted */
    }
    cb.in[TEENY__CONCAT_Y] = tx.t;
    cb.in[TEENY__CONCAT_DY] = tdy.t;
    TH_OK(ctx, teeny__op_run(ctx, TEENY__OP_CONCAT, 1, &cb));
    for (int k = 0; k < c.n; k++) {
        if (cb.out[k]) {
            ref_slice(dyd, c.B, c.Csum, c.S, first, c.C[k], ref);
            expect_equal(&grads[k], ref, "concat dx", repro);
        } else {
            float *o = th_read(grads[k].t);
            for (int64_t i = 0; i < grads[k].n; i++)
                ck_assert_msg(isnan(o[i]), "unwanted gradient %d written; %s", k, repro);
            free(o);
        }
        first += c.C[k];
        th_dev_free(&parts[k]);
        th_dev_free(&grads[k]);
    }
    free(x);
    free(dy);
    free(xd);
    free(dyd);
    free(ref);
    th_dev_free(&tx);
    th_dev_free(&tdy);
    th_dev_free(&ts);
    th_dev_free(&tsd);
    th_dev_free(&tdx);
}
END_TEST

START_TEST(test_concat_determinism)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(41);
    int64_t s1[4] = {2, 3, 5, 7}, s2[4] = {2, 4, 5, 7}, sy[4] = {2, 7, 5, 7};
    float a[210], b[280];
    th_fill_normal(&r, a, 210, 0, 1);
    th_fill_normal(&r, b, 280, 0, 1);
    th_dev ta = th_dev_make(ctx, 0, 4, s1, 0, a), tb = th_dev_make(ctx, 0, 4, s2, 0, b);
    const teeny_tensor *xs[2] = {ta.t, tb.t};
    float *out[2];
    for (int run = 0; run < 2; run++) {
        th_dev y = th_dev_make(ctx, 0, 4, sy, 0, NULL);
        TH_OK(ctx, teeny_concat_channels(ctx, 2, xs, y.t));
        out[run] = th_read(y.t);
        th_dev_free(&y);
    }
    ck_assert(!memcmp(out[0], out[1], 490 * 4));
    free(out[0]);
    free(out[1]);
    th_dev_free(&ta);
    th_dev_free(&tb);
}
END_TEST

/* slice_backward is the adjoint of slice, and ref_concat's adjoint is the
 * slices: central differences of sum(op(x) * dy). */
START_TEST(test_concat_finite_diff)
{
    th_rng r = th_rng_make(4);
    enum { B = 2, C = 5, S = 3, N = B * C * S };
    int c0 = 1, count = 3;
    double x[N], dy[B * 3 * S], dx[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = th_normal(&r);
    for (int i = 0; i < B * count * S; i++)
        dy[i] = th_normal(&r);
    ref_slice_backward(dy, B, C, S, c0, count, dx);
    for (int i = 0; i < N; i++) {
        double keep = x[i], h = 1e-4, l[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            x[i] = keep + (sgn ? -h : h);
            ref_slice(x, B, C, S, c0, count, y);
            l[sgn] = 0;
            for (int j = 0; j < B * count * S; j++)
                l[sgn] += y[j] * dy[j];
        }
        x[i] = keep;
        ck_assert_msg(fabs((l[0] - l[1]) / (2 * h) - dx[i]) <= 1e-8, "slice elem %d", i);
    }
    /* concat of two parts: the gradient of part k is slice k of dy */
    int Cs[2] = {2, 3};
    double p0[B * 2 * S], p1[B * 3 * S], gy[N], g0[B * 2 * S];
    for (int i = 0; i < B * 2 * S; i++)
        p0[i] = th_normal(&r);
    for (int i = 0; i < B * 3 * S; i++)
        p1[i] = th_normal(&r);
    for (int i = 0; i < N; i++)
        gy[i] = th_normal(&r);
    ref_slice(gy, B, C, S, 0, 2, g0);
    const double *parts[2] = {p0, p1};
    for (int i = 0; i < B * 2 * S; i++) {
        double keep = p0[i], h = 1e-4, l[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            p0[i] = keep + (sgn ? -h : h);
            ref_concat(2, parts, Cs, B, S, y);
            l[sgn] = 0;
            for (int j = 0; j < N; j++)
                l[sgn] += y[j] * gy[j];
        }
        p0[i] = keep;
        ck_assert_msg(fabs((l[0] - l[1]) / (2 * h) - g0[i]) <= 1e-8, "concat elem %d", i);
    }
}
END_TEST

START_TEST(test_concat_op_table)
{
    teeny_ctx *ctx = th_ctx();
    const teeny__op *cat = &teeny__ops[TEENY__OP_CONCAT], *sl = &teeny__ops[TEENY__OP_SLICE_CHANNELS];
    ck_assert_str_eq(cat->name, "concat");
    ck_assert_str_eq(sl->name, "slice_channels");
    ck_assert(cat->infer && cat->forward && cat->backward && sl->infer && sl->forward && sl->backward);
    teeny__node_shapes s = {.n_in = 3,
                            .in = {{.ndim = 4, .shape = {8, 3, 5, 5}},
                                   {.ndim = 4, .shape = {8, 1, 5, 5}},
                                   {.ndim = 4, .shape = {8, 6, 5, 5}}},
                            .attrs.concat = {3, 0}};
    TH_OK(ctx, cat->infer(ctx, &s));
    ck_assert(s.out.ndim == 4 && s.out.shape[0] == 8 && s.out.shape[1] == 10 && s.out.shape[2] == 5 &&
              s.out.shape[3] == 5 && s.n_param == 0 && s.n_saved == 0);
    s.attrs.concat.n_inputs = 2;
    TH_STATUS(ctx, TEENY_ERR_ARG, cat->infer(ctx, &s)); /* n_inputs != n_in */
    s.attrs.concat.n_inputs = 3;
    s.in[1].shape[2] = 4;
    TH_STATUS(ctx, TEENY_ERR_SHAPE, cat->infer(ctx, &s));
    teeny__node_shapes big = {.n_in = 2,
                              .in = {{.ndim = 2, .shape = {1 << 16, 1 << 15}}, {.ndim = 2, .shape = {1 << 16, 1 << 15}}},
                              .attrs.concat = {2, 0}};
    TH_STATUS(ctx, TEENY_ERR_RANGE, cat->infer(ctx, &big));
    teeny__node_shapes t = {.n_in = 1, .in = {{.ndim = 2, .shape = {8, 10}}}, .attrs.slice = {3, 4}};
    TH_OK(ctx, sl->infer(ctx, &t));
    ck_assert(t.out.ndim == 2 && t.out.shape[0] == 8 && t.out.shape[1] == 4);
    t.attrs.slice.count = 8;
    TH_STATUS(ctx, TEENY_ERR_ARG, sl->infer(ctx, &t));
    t.attrs.slice.first_channel = -1;
    t.attrs.slice.count = 2;
    TH_STATUS(ctx, TEENY_ERR_ARG, sl->infer(ctx, &t));
    teeny__node_shapes r1 = {.n_in = 1, .in = {{.ndim = 1, .shape = {8}}}, .attrs.slice = {0, 1}};
    TH_STATUS(ctx, TEENY_ERR_SHAPE, sl->infer(ctx, &r1));
}
END_TEST

START_TEST(test_concat_errors)
{
    teeny_ctx *ctx = th_ctx();
    int64_t sa[4] = {2, 3, 4, 4}, sb[4] = {2, 2, 4, 4}, sy[4] = {2, 5, 4, 4}, sbad[4] = {2, 2, 4, 5},
            s3[3] = {2, 2, 16}, one[1] = {5}, big[1] = {400};
    teeny_tensor *a = th_tensor(ctx, 4, sa), *b = th_tensor(ctx, 4, sb), *y = th_tensor(ctx, 4, sy),
                 *bad = th_tensor(ctx, 4, sbad), *r3 = th_tensor(ctx, 3, s3), *r1 = th_tensor(ctx, 1, one),
                 *base = th_tensor(ctx, 1, big), *ai = NULL, *av = NULL, *yv = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 4, sa, &ai));
    teeny_tensor *filled[] = {a, b, y, bad, base};
    for (size_t i = 0; i < sizeof filled / sizeof filled[0]; i++)
        TH_OK(ctx, teeny_tensor_fill(filled[i], 7.0f));
    TH_OK(ctx, teeny_tensor_view(base, 0, 4, sa, &av));
    TH_OK(ctx, teeny_tensor_view(base, 90, 4, sy, &yv)); /* overlaps av (0..95) */
    const teeny_tensor *ok[2] = {a, b}, *with_null[2] = {a, NULL}, *shape_bad[2] = {a, bad}, *rank_bad[2] = {a, r3},
                       *i32[2] = {ai, b}, *sum_bad[2] = {a, a}, *overlap[2] = {av, b};
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_concat_channels(NULL, 2, ok, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_concat_channels(ctx, 0, ok, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_concat_channels(ctx, -1, ok, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_concat_channels(ctx, 2, NULL, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_concat_channels(ctx, 2, ok, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_concat_channels(ctx, 2, with_null, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_concat_channels(ctx, 2, i32, y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_concat_channels(ctx, 2, shape_bad, y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_concat_channels(ctx, 2, rank_bad, y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_concat_channels(ctx, 2, sum_bad, y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_concat_channels(ctx, 1, ok, r1));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_concat_channels(ctx, 2, overlap, yv));
    th_expect_all(y, 7.0f);
    th_expect_all(base, 7.0f);

    teeny_tensor *outs[2] = {a, b}, *outs_null[2] = {a, NULL}, *outs_same[2] = {a, a}, *outs_bad[2] = {a, bad},
                 *outs_overlap[2] = {av, b};
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_split_channels(NULL, y, 2, outs));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_split_channels(ctx, y, 0, outs));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_split_channels(ctx, y, 2, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_split_channels(ctx, NULL, 2, outs));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_split_channels(ctx, y, 2, outs_null));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_split_channels(ctx, y, 2, outs_bad));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_split_channels(ctx, y, 2, outs_same)); /* overlapping outputs */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_split_channels(ctx, yv, 2, outs_overlap));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_split_channels(ctx, y, 1, outs));
    th_expect_all(a, 7.0f);
    th_expect_all(b, 7.0f);
    th_expect_all(base, 7.0f);

    teeny_tensor *all[] = {a, b, y, bad, r3, r1, base, ai, av, yv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        teeny_tensor_destroy(all[i]);
}
END_TEST

Suite *suite_concat(void)
{
    Suite *s = suite_create("concat");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_concat_forward, 0, n_sweep());
    tcase_add_test(fwd, test_concat_determinism);
    tcase_add_test(fwd, test_concat_op_table);
    tcase_add_loop_test(bwd, test_concat_backward, 0, n_sweep());
    tcase_add_test(bwd, test_concat_finite_diff);
    tcase_add_test(err, test_concat_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
