/*
 * test_strided.c -- the broadcasting binary ops and reductions
 * (src/ops/elementwise/strided.c) against the float64 reference: seeded
 * sweeps over ranks 1..5 and broadcast patterns (views at odd offsets),
 * gradients through the reference checked by central differences, determinism,
 * the loop-budget split of long sums, a graph with a constant operand,
 * and every error path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/ops.h"
#include "ref/strided_ref.h"

static int n_sweep(void)
{
    return th_small() ? 6 : th_full() ? 300 : 60;
}

/* y of rank 1..5, sizes 1..6 (one long axis now and then); a and b drop
 * leading axes and set some sizes to 1. */
static void bcast_case(th_rng *r, int i, ref_shape *ys, ref_shape *as, ref_shape *bs)
{
    ys->ndim = 1 + i % 5;
    for (int d = 0; d < ys->ndim; d++)
        ys->d[d] = th_int(r, 1, 6);
    if (i % 7 == 3)
        ys->d[ys->ndim - 1] = th_int(r, 200, 3000);
    ref_shape *ops[2] = {as, bs};
    for (int k = 0; k < 2; k++) {
        int drop = th_int(r, 0, ys->ndim - 1);
        ops[k]->ndim = ys->ndim - drop;
        for (int d = 0; d < ops[k]->ndim; d++)
            ops[k]->d[d] = th_int(r, 0, 2) == 0 ? 1 : ys->d[d + drop];
    }
    /* one operand carries y's full shape half the time */
    if (i % 2)
        *as = *ys;
}

static th_dev dev_of(teeny_ctx *ctx, const ref_shape *s, int view, const float *data)
{
    return th_dev_make(ctx, 0, s->ndim, s->d, view, data);
}

static float *rand_data(th_rng *r, const ref_shape *s, double lo, double hi)
{
    float *v = th_malloc((size_t)ref_numel(s) * sizeof *v);
    th_fill_uniform(r, v, (size_t)ref_numel(s), lo, hi);
    return v;
}

static void expect_close(const th_dev *d, const double *ref, double tol, const char *what, const char *repro)
{
    float *out = th_read(d->t);
    long bad = th_first_nonfinite(out, (size_t)d->n);
    ck_assert_msg(bad < 0, "%s: element %ld not written; %s", what, bad, repro);
    double e = th_nrms(out, ref, (size_t)d->n);
    ck_assert_msg(e <= tol, "%s: nrms %.3g; %s", what, e, repro);
    free(out);
    th_dev_check_guard(d, what, repro);
}

static double *dbl(const float *x, const ref_shape *s)
{
    return th_dbl(x, (size_t)ref_numel(s));
}

START_TEST(test_binary_forward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 1000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    ref_shape ys, as, bs, chk;
    bcast_case(&r, _i, &ys, &as, &bs);
    ck_assert(ref_broadcast(&as, &bs, &chk) && chk.ndim <= ys.ndim);
    ys = chk;
    int op = _i % 5, view = _i % 3 ? 0 : 3;
    float *a = rand_data(&r, &as, op == 4 ? 0.2 : -3, 3), *b = rand_data(&r, &bs, op == 4 ? -2 : -3, op == 4 ? 2 : 3);
    if (op == 3)
        for (int64_t k = 0; k < ref_numel(&bs); k++)
            b[k] = b[k] < 0 ? b[k] - 0.5f : b[k] + 0.5f; /* away from 0 */
    double *ad = dbl(a, &as), *bd = dbl(b, &bs), *ref = th_malloc((size_t)ref_numel(&ys) * 8);
    ref_binary(op, ad, &as, bd, &bs, ref, &ys);
    th_dev ta = dev_of(ctx, &as, view, a), tb = dev_of(ctx, &bs, view ? view + 2 : 0, b),
           ty = dev_of(ctx, &ys, view ? view + 1 : 0, NULL);
    char repro[160];
    snprintf(repro, sizeof repro, "op %d a rank %d b rank %d y rank %d (%lld elements) seed %llu", op, as.ndim,
             bs.ndim, ys.ndim, (long long)ref_numel(&ys), (unsigned long long)seed);
    TH_OK(ctx, teeny_binary(ctx, (teeny_binary_op)op, ta.t, tb.t, ty.t));
    expect_close(&ty, ref, 1e-6, "y", repro);
    /* in place: y is a when a has y's shape */
    if (as.ndim == ys.ndim && ref_numel(&as) == ref_numel(&ys)) {
        TH_OK(ctx, teeny_binary(ctx, (teeny_binary_op)op, ta.t, tb.t, ta.t));
        expect_close(&ta, ref, 1e-6, "y = a", repro);
    }
    free(a);
    free(b);
    free(ad);
    free(bd);
    free(ref);
    th_dev_free(&ta);
    th_dev_free(&tb);
    th_dev_free(&ty);
}
END_TEST

/* ---- the strided copy a row an item (st_copy_rows) ---- */

typedef struct {
    int ndim;
    int64_t n[3], xs[3], lo[3], hi[3];
    int x_off, x_len, map_axis, map_len, map_dim;
    float pad, scale;
} rows_case;

/* The strided copy's definition over c (y contiguous), in floats as the
 * kernels compute it: y = scale * x where every coordinate is inside its
 * window (or its map entry inside [0, map_dim)), else pad. */
static void rows_ref(const rows_case *c, const float *x, const int *map, float *y)
{
    int64_t total = 1;
    for (int d = 0; d < c->ndim; d++)
        total *= c->n[d];
    for (int64_t i = 0; i < total; i++) {
        int64_t rem = i, src = c->x_off;
        int inside = 1;
        for (int d = c->ndim - 1; d >= 0; d--) {
            int64_t k = rem % c->n[d];
            rem /= c->n[d];
            if (d == c->map_axis) {
                int m = map[k];
                inside = inside && m >= 0 && m < c->map_dim;
                src += (int64_t)m * c->xs[d];
            } else {
                inside = inside && k >= c->lo[d] && k < c->hi[d];
                src += (k - c->lo[d]) * c->xs[d];
            }
        }
        y[i] = inside ? c->scale * x[src] : c->pad;
    }
}

/* st_copy_rows (the cpu profile's strided copy where the innermost run
 * has 16 elements or more) against the definition and bit for bit
 * against st_copy (the test hook STRIDED_ROWS -1): pads on both sides of
 * the run, a reversed run, a transpose (strided run), a map along the run
 * with entries outside the source, a map along an outer axis, padded
 * rows, a broadcast run (stride 0), runs of 5000 in chunks of 4096 and,
 * where a device limits loop trips (1000), in more chunks; a run of 15
 * (a transpose) stays st_copy's. */
START_TEST(test_copy_rows)
{
    static const rows_case cases[] = {
        {2, {3, 40}, {28, 1}, {0, 5}, {3, 33}, 0, 84, -1, 0, 0, -7.0f, 2.0f},
        {2, {4, 25}, {25, -1}, {0, 0}, {4, 25}, 24, 100, -1, 0, 0, 0.0f, 1.0f},
        {3, {5, 3, 17}, {17, 85, 1}, {0, 0, 0}, {5, 3, 17}, 0, 255, -1, 0, 0, 0.0f, 1.0f},
        {2, {2, 20}, {24, 1}, {0, 0}, {2, 20}, 0, 48, 1, 20, 24, 5.0f, 1.0f},
        {2, {6, 18}, {18, 1}, {0, 0}, {6, 18}, 0, 72, 0, 6, 4, -1.0f, 1.0f},
        {2, {4, 32}, {32, 1}, {1, 0}, {3, 32}, 0, 64, -1, 0, 0, 3.0f, 1.0f},
        {2, {3, 20}, {1, 0}, {0, 0}, {3, 20}, 0, 3, -1, 0, 0, 0.0f, 1.0f},
        {2, {2, 5000}, {5000, 1}, {0, 0}, {2, 5000}, 0, 10000, -1, 0, 0, 0.0f, 1.0f},
        {2, {3, 15}, {1, 3}, {0, 0}, {3, 15}, 0, 45, -1, 0, 0, 0.0f, 1.0f},
    };
    teeny_ctx *ctx = th_ctx();
    if (!th_profile("cpu"))
        th_skip("%s cannot take the cpu profile", teeny_ctx_device_name(ctx));
    for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
        const rows_case *c = &cases[ci];
        th_rng r = th_rng_make(1600 + (uint64_t)ci);
        int64_t total = 1, xl = c->x_len, ml = c->map_len > 0 ? c->map_len : 1;
        for (int d = 0; d < c->ndim; d++)
            total *= c->n[d];
        float *x = th_malloc((size_t)xl * 4), *want = th_malloc((size_t)total * 4), *got[3];
        int map[20] = {0};
        th_fill_normal(&r, x, (size_t)xl, 0, 1);
        for (int k = 0; k < c->map_len; k++) /* every fourth entry outside [0, map_dim) */
            map[k] = k % 4 == 3 ? (k % 8 == 3 ? -1 : c->map_dim + k) : th_int(&r, 0, c->map_dim - 1);
        rows_ref(c, x, map, want);
        th_dev tx = th_dev_make(ctx, 0, 1, &xl, 3, x), tm = th_dev_make(ctx, 1, 1, &ml, 0, map),
               ty = th_dev_make(ctx, 0, 1, &total, 5, NULL);
        teeny__st_copy_args a = teeny__st_copy_init(c->ndim, c->n);
        int64_t ys = 1;
        for (int d = c->ndim - 1; d >= 0; d--) {
            a.xs[d] = c->xs[d];
            a.lo[d] = c->lo[d];
            a.hi[d] = c->hi[d];
            a.ys[d] = ys;
            ys *= c->n[d];
        }
        a.x = tx.t->buf;
        a.x_off = (int)tx.off + c->x_off;
        a.y = ty.t->buf;
        a.y_off = (int)ty.off;
        a.pad = c->pad;
        a.scale = c->scale;
        if (c->map_axis >= 0) {
            a.map = tm.t->buf;
            a.map_off = (int)tm.off;
            a.map_axis = c->map_axis;
            a.map_dim = c->map_dim;
        }
        char repro[64];
        snprintf(repro, sizeof repro, "case %d seed %d", ci, 1600 + ci);
        for (int run = 0; run < 3; run++) { /* rows; rows under a loop limit; an element an item */
            th_hook(TEENY__HOOK_STRIDED_ROWS, run == 2 ? -1 : 0);
            th_loop_limit(run == 1 ? 1000 : 0);
            th_poison(ty.t);
            TH_OK(ctx, teeny_profile_begin(ctx));
            TH_OK(ctx, teeny__st_copy(ctx, &a));
            TH_OK(ctx, teeny_ctx_finish(ctx));
            int rows_ran = 0;
            for (int i = 0; i < ctx->prog.prof_count; i++)
                rows_ran = rows_ran || !strcmp(ctx->prog.prof_names[i], "st_copy_rows");
            TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
            int want_rows = run < 2 && c->n[c->ndim - 1] >= 16;
            ck_assert_msg(rows_ran == want_rows, "run %d: st_copy_rows %s; %s", run, rows_ran ? "ran" : "did not run",
                          repro);
            got[run] = th_read(ty.t);
            ck_assert_msg(!memcmp(got[run], want, (size_t)total * 4), "run %d: differs from the definition; %s", run,
                          repro);
            th_dev_check_guard(&ty, "y", repro);
        }
        th_loop_limit(-1);
        th_hook(TEENY__HOOK_STRIDED_ROWS, 0);
        for (int run = 0; run < 3; run++)
            free(got[run]);
        free(x);
        free(want);
        th_dev_free(&tx);
        th_dev_free(&tm);
        th_dev_free(&ty);
    }
    th_profile(NULL);
}
END_TEST

/* The CPU variant's forward, a row of the innermost dimension an item
 * where it has at least 4 elements and each operand steps by 1 or 0
 * along it (st_binary_rows: 16 elements a step, then the rest singly):
 * against the reference and bit for bit one element an item's (the test
 * hook BINARY_ROWS -1), with another grid there; ops add, sub, mul, div;
 * both operands contiguous, either broadcast along the innermost or an
 * outer dimension (a squeeze-and-excitation's [N, C, 1, 1] scale), views;
 * rows of 64, 37 and 49 (steps and a tail), 12, 8 and 4 (a tail only);
 * under a loop limit, rows in chunks with the same bits. */
START_TEST(test_binary_rows)
{
    teeny_ctx *ctx = th_ctx();
    static const ref_shape shapes[][3] = {/* y, a, b */
                                          {{3, {3, 5, 64}}, {3, {3, 5, 64}}, {3, {3, 5, 64}}},
                                          {{3, {3, 5, 8}}, {3, {3, 5, 1}}, {1, {8}}},
                                          {{2, {2, 12}}, {2, {2, 12}}, {2, {2, 1}}},
                                          {{4, {2, 3, 7, 4}}, {4, {1, 3, 1, 4}}, {4, {2, 3, 7, 1}}},
                                          {{4, {2, 3, 7, 7}}, {4, {2, 3, 7, 7}}, {4, {2, 3, 1, 1}}},
                                          {{3, {2, 3, 37}}, {3, {2, 1, 37}}, {3, {2, 3, 37}}}};
    for (int ci = 0; ci < 6; ci++)
        for (int op = 0; op < 4; op++) {
            uint64_t seed = 1500 + (uint64_t)(ci * 4 + op);
            th_rng r = th_rng_make(seed);
            const ref_shape *ys = &shapes[ci][0], *as = &shapes[ci][1], *bs = &shapes[ci][2];
            float *a = rand_data(&r, as, -3, 3), *b = rand_data(&r, bs, 0.5, 3), *got[3];
            double *ad = dbl(a, as), *bd = dbl(b, bs), *ref = th_malloc((size_t)ref_numel(ys) * 8);
            ref_binary(op, ad, as, bd, bs, ref, ys);
            th_dev ta = dev_of(ctx, as, ci, a), tb = dev_of(ctx, bs, ci ? ci + 2 : 0, b), ty = dev_of(ctx, ys, 1, NULL);
            char repro[96];
            snprintf(repro, sizeof repro, "case %d op %d seed %llu", ci, op, (unsigned long long)seed);
            int64_t items[3];
            for (int run = 0; run < 3; run++) {
                th_hook(TEENY__HOOK_BINARY_ROWS, run == 1 ? -1 : 0);
                th_loop_limit(run == 2 ? 24 : 0); /* budget 12: chunks of 8 */
                th_poison(ty.t);
                TH_OK(ctx, teeny_ctx_finish(ctx));
                int64_t before = ctx->prog.items_enqueued;
                TH_OK(ctx, teeny_binary(ctx, (teeny_binary_op)op, ta.t, tb.t, ty.t));
                TH_OK(ctx, teeny_ctx_finish(ctx));
                items[run] = ctx->prog.items_enqueued - before;
                expect_close(&ty, ref, 1e-6, "y", repro);
                got[run] = th_read(ty.t);
            }
            th_hook(TEENY__HOOK_BINARY_ROWS, 0);
            th_loop_limit(-1);
            ck_assert_msg(!memcmp(got[0], got[1], (size_t)ref_numel(ys) * 4), "a row an item differs from one "
                          "element; %s", repro);
            ck_assert_msg(!memcmp(got[2], got[1], (size_t)ref_numel(ys) * 4), "rows in chunks differ; %s", repro);
            if (ctx->tune.variant == TEENY_VARIANT_CPU && ci == 0) /* 15 rows against 960 items */
                ck_assert_msg(items[0] < items[1], "%lld items, %lld one an item: no grid of rows; %s",
                              (long long)items[0], (long long)items[1], repro);
            for (int run = 0; run < 3; run++)
                free(got[run]);
            free(a);
            free(b);
            free(ad);
            free(bd);
            free(ref);
            th_dev_free(&ta);
            th_dev_free(&tb);
            th_dev_free(&ty);
        }
}
END_TEST

START_TEST(test_binary_backward)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 2000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    ref_shape ys, as, bs;
    bcast_case(&r, _i, &ys, &as, &bs);
    ck_assert(ref_broadcast(&as, &bs, &ys));
    int op = _i % 5, view = _i % 3 ? 0 : 5, want_a = _i % 4 != 1, want_b = _i % 4 != 2;
    float *a = rand_data(&r, &as, op == 4 ? 0.3 : -3, 3), *b = rand_data(&r, &bs, op == 4 ? -2 : 0.5, op == 4 ? 2 : 3),
          *dy = rand_data(&r, &ys, -1, 1);
    double *ad = dbl(a, &as), *bd = dbl(b, &bs), *dyd = dbl(dy, &ys), *rda = th_malloc((size_t)ref_numel(&as) * 8),
           *rdb = th_malloc((size_t)ref_numel(&bs) * 8);
    ref_binary_backward(op, ad, &as, bd, &bs, dyd, &ys, rda, rdb);
    th_dev ta = dev_of(ctx, &as, 0, a), tb = dev_of(ctx, &bs, 0, b), tdy = dev_of(ctx, &ys, view, dy),
           tda = dev_of(ctx, &as, view ? view + 1 : 0, NULL), tdb = dev_of(ctx, &bs, view ? view + 2 : 0, NULL);
    char repro[160];
    snprintf(repro, sizeof repro, "op %d a rank %d b rank %d y %lld elements seed %llu", op, as.ndim, bs.ndim,
             (long long)ref_numel(&ys), (unsigned long long)seed);
    TH_OK(ctx, teeny_binary_backward(ctx, (teeny_binary_op)op, ta.t, tb.t, tdy.t, want_a ? tda.t : NULL,
                                     want_b ? tdb.t : NULL));
    if (want_a)
        expect_close(&tda, rda, 1e-5, "da", repro);
    if (want_b)
        expect_close(&tdb, rdb, 1e-5, "db", repro);
    if (!want_a || !want_b) { /* the unwanted one untouched */
        float *o = th_read((!want_a ? &tda : &tdb)->t);
        ck_assert_msg(isnan(o[0]), "unwanted gradient written; %s", repro);
        free(o);
    }
    /* same inputs, same bits */
    if (want_a) {
        float *first = th_read(tda.t);
        TH_OK(ctx, teeny_binary_backward(ctx, (teeny_binary_op)op, ta.t, tb.t, tdy.t, tda.t, NULL));
        float *again = th_read(tda.t);
        ck_assert_msg(!memcmp(first, again, (size_t)tda.n * 4), "da differs between runs; %s", repro);
        free(first);
        free(again);
    }
    free(a);
    free(b);
    free(dy);
    free(ad);
    free(bd);
    free(dyd);
    free(rda);
    free(rdb);
    th_dev *ds[] = {&ta, &tb, &tdy, &tda, &tdb};
    for (int k = 0; k < 5; k++)
        th_dev_free(ds[k]);
}
END_TEST

/* The reference gradients against central differences of sum(y * dy). */
START_TEST(test_binary_reference)
{
    th_rng r = th_rng_make(31);
    ref_shape as = {2, {3, 1}}, bs = {1, {4}}, ys;
    ck_assert(ref_broadcast(&as, &bs, &ys));
    double a[3], b[4], dy[12], y[12], da[3], db[4];
    for (int op = 0; op < 5; op++) {
        for (int i = 0; i < 3; i++)
            a[i] = th_uniform(&r, 0.5, 2);
        for (int i = 0; i < 4; i++)
            b[i] = th_uniform(&r, 0.5, 2);
        for (int i = 0; i < 12; i++)
            dy[i] = th_normal(&r);
        ref_binary_backward(op, a, &as, b, &bs, dy, &ys, da, db);
        double *vars[2] = {a, b}, *grads[2] = {da, db};
        int counts[2] = {3, 4};
        for (int v = 0; v < 2; v++)
            for (int i = 0; i < counts[v]; i++) {
                double keep = vars[v][i], h = 1e-6, l[2];
                for (int sgn = 0; sgn < 2; sgn++) {
                    vars[v][i] = keep + (sgn ? -h : h);
                    ref_binary(op, a, &as, b, &bs, y, &ys);
                    l[sgn] = 0;
                    for (int k = 0; k < 12; k++)
                        l[sgn] += y[k] * dy[k];
                }
                vars[v][i] = keep;
                ck_assert_msg(fabs((l[0] - l[1]) / (2 * h) - grads[v][i]) <= 1e-6 * (1 + fabs(grads[v][i])),
                              "op %d var %d elem %d", op, v, i);
            }
    }
}
END_TEST

START_TEST(test_reduce_sweep)
{
    teeny_ctx *ctx = th_ctx();
    uint64_t seed = 3000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    ref_shape xs = {1 + _i % 5, {0}}, ys = {0};
    for (int d = 0; d < xs.ndim; d++)
        xs.d[d] = th_int(&r, 1, 7);
    if (_i % 6 == 5) /* a long axis: sums in parts */
        xs.d[th_int(&r, 0, xs.ndim - 1)] = th_int(&r, 100, 3000);
    unsigned mask = (unsigned)th_int(&r, 1, (1 << xs.ndim) - 1);
    teeny_reduce_params p = {mask, _i % 2, _i % 3 == 0};
    for (int d = 0; d < xs.ndim; d++)
        if (!(mask & (1u << d)) || p.keepdims)
            ys.d[ys.ndim++] = mask & (1u << d) ? 1 : xs.d[d];
    if (!ys.ndim)
        ys = (ref_shape){1, {1}};
    float *x = rand_data(&r, &xs, -2, 2), *dy = rand_data(&r, &ys, -1, 1);
    double *xd = dbl(x, &xs), *dyd = dbl(dy, &ys), *ref = th_malloc((size_t)ref_numel(&ys) * 8),
           *rdx = th_malloc((size_t)ref_numel(&xs) * 8);
    ref_reduce(xd, &xs, mask, p.mean, ref);
    double count = (double)ref_numel(&xs) / (double)ref_numel(&ys);
    for (int64_t k = 0; k < ref_numel(&xs); k++) { /* dx = dy at the reduced position (/ count) */
        int64_t rem = k, o = 0, mul = 1;
        for (int d = xs.ndim - 1; d >= 0; d--) {
            int64_t c = rem % xs.d[d];
            rem /= xs.d[d];
            if (!(mask & (1u << d))) {
                o += c * mul;
                mul *= xs.d[d];
            }
        }
        rdx[k] = dyd[o] / (p.mean ? count : 1.0);
    }
    th_dev tx = dev_of(ctx, &xs, _i % 2 ? 3 : 0, x), ty = dev_of(ctx, &ys, _i % 2 ? 2 : 0, NULL),
           tdy = dev_of(ctx, &ys, 0, dy), tdx = dev_of(ctx, &xs, _i % 2 ? 1 : 0, NULL);
    char repro[128];
    snprintf(repro, sizeof repro, "rank %d axes 0x%x keepdims %d mean %d seed %llu", xs.ndim, mask, p.keepdims, p.mean,
             (unsigned long long)seed);
    TH_OK(ctx, teeny_reduce(ctx, &p, tx.t, ty.t));
    /* a long sum is measured against the sum of magnitudes (harness.h) */
    double *absx = th_malloc((size_t)ref_numel(&xs) * 8), *mag = th_malloc((size_t)ref_numel(&ys) * 8);
    for (int64_t k = 0; k < ref_numel(&xs); k++)
        absx[k] = fabs(xd[k]);
    ref_reduce(absx, &xs, mask, p.mean, mag);
    float *got = th_read(ty.t);
    ck_assert_msg(th_first_nonfinite(got, (size_t)ty.n) < 0, "y: unwritten; %s", repro);
    ck_assert_msg(th_nrms_mag(got, ref, mag, (size_t)ty.n) <= 1e-6, "y: nrms_mag %.3g; %s",
                  th_nrms_mag(got, ref, mag, (size_t)ty.n), repro);
    th_dev_check_guard(&ty, "y", repro);
    free(got);
    free(absx);
    free(mag);
    TH_OK(ctx, teeny_reduce_backward(ctx, &p, tdy.t, tdx.t));
    expect_close(&tdx, rdx, 1e-7, "dx", repro);
    free(x);
    free(dy);
    free(xd);
    free(dyd);
    free(ref);
    free(rdx);
    th_dev_free(&tx);
    th_dev_free(&ty);
    th_dev_free(&tdy);
    th_dev_free(&tdx);
}
END_TEST

/* A device that ends loops early: long sums split into parts (the same
 * answer), and a sum past 64 parts refused before anything is written. */
START_TEST(test_reduce_loop_limit)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(77);
    int64_t n = 20000, one = 1;
    float *x = th_malloc((size_t)n * 4);
    th_fill_uniform(&r, x, (size_t)n, -1, 1);
    double want = 0;
    for (int64_t i = 0; i < n; i++)
        want += x[i];
    teeny_tensor *tx = th_tensor_from(ctx, 1, &n, x), *ty = th_tensor(ctx, 1, &one);
    teeny_reduce_params p = {1, 1, 0};
    long long before = th_loop_limit(1000); /* budget 500: 40 parts */
    th_poison(ty);
    TH_OK(ctx, teeny_reduce(ctx, &p, tx, ty));
    float got;
    TH_OK(ctx, teeny_tensor_read(ty, &got, 1));
    ck_assert_msg(fabs(got - want) <= 1e-4 * (1 + fabs(want)), "split sum %g, want %g", (double)got, want);
    th_loop_limit(400); /* budget 200: 100 parts needed */
    TH_OK(ctx, teeny_tensor_fill(ty, 5.0f));
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_reduce(ctx, &p, tx, ty));
    th_expect_all(ty, 5.0f);
    th_loop_limit(before ? before : -1);
    free(x);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(ty);
}
END_TEST

/* input x [B, 4] -> linear(3) -> + constant [3] -> mean over all: the
 * forward against the host, d loss / d weight = mean of x per column. */
START_TEST(test_strided_graph_constant)
{
    teeny_ctx *ctx = th_ctx();
    teeny_graph *g;
    teeny_node x, lin, c, sum, loss;
    int64_t xs[2] = {-1, 4}, cs[1] = {3};
    float cv[3] = {0.5f, -1.0f, 2.0f}, xv[8] = {1, 2, 3, 4, -1, 0.5f, 2, -3};
    TH_OK(ctx, teeny_graph_create(ctx, 5, &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 2, xs, &x));
    TH_OK(ctx, teeny_graph_linear(g, "fc", x, 3, 1, &lin));
    TH_OK(ctx, teeny_graph_constant(g, "c", 1, cs, cv, &c));
    TH_OK(ctx, teeny_graph_binary(g, "add", TEENY_BINARY_ADD, lin, c, &sum));
    teeny_reduce_params rp = {3, 0, 1};
    TH_OK(ctx, teeny_graph_reduce(g, "mean", sum, &rp, &loss));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_graph_binary(g, "bad", TEENY_BINARY_MUL, x, c, &sum));
    teeny_node bad = 7;
    int64_t s6[6] = {1, 1, 1, 1, 1, 1}, s0[1] = {0};
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_constant(g, "k", 1, cs, NULL, &bad));
    ck_assert_int_eq(bad, -1);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_constant(g, "k", 0, cs, cv, &bad));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_constant(g, "k", 6, s6, cv, &bad));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_constant(g, "k", 1, s0, cv, &bad));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_constant(g, "c", 1, cs, cv, &bad)); /* the name is taken */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_activation_ex(g, "act", x, NULL, &bad));
    teeny_act_params ap = {TEENY_ACT_ERF, 0, 0};
    ap.act = (teeny_act)40;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_graph_activation_ex(g, "act", x, &ap, &bad));
    ck_assert_int_eq(teeny_graph_param_count(g), 2); /* the constant is no parameter */
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = 2;
    pp.loss = loss;
    teeny_plan *plan;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &plan));
    teeny_tensor *tin, *w, *bias, *dw;
    TH_OK(ctx, teeny_plan_tensor(plan, x, &tin));
    TH_OK(ctx, teeny_tensor_write(tin, xv, 8));
    TH_OK(ctx, teeny_graph_param(g, 0, NULL, &w, &dw));
    TH_OK(ctx, teeny_graph_param(g, 1, NULL, &bias, NULL));
    TH_OK(ctx, teeny_plan_forward(plan));
    TH_OK(ctx, teeny_plan_backward(plan));
    float loss_v, wv[12], bv[3], g_w[12];
    TH_OK(ctx, teeny_plan_read_loss(plan, &loss_v));
    float back[3];
    TH_OK(ctx, teeny_plan_read(plan, c, back, 3)); /* a constant is readable: its value */
    ck_assert(!memcmp(back, cv, sizeof back));
    TH_OK(ctx, teeny_graph_param(g, 0, NULL, &w, &dw));
    TH_OK(ctx, teeny_tensor_read(w, wv, 12));
    TH_OK(ctx, teeny_tensor_read(bias, bv, 3));
    TH_OK(ctx, teeny_tensor_read(dw, g_w, 12));
    double want = 0;
    for (int b = 0; b < 2; b++)
        for (int o = 0; o < 3; o++) {
            double v = bv[o] + cv[o];
            for (int i = 0; i < 4; i++)
                v += (double)wv[o * 4 + i] * xv[b * 4 + i];
            want += v / 6;
        }
    ck_assert_msg(fabs(loss_v - want) <= 1e-5, "loss %g, want %g", (double)loss_v, want);
    for (int o = 0; o < 3; o++)
        for (int i = 0; i < 4; i++)
            ck_assert_msg(fabs(g_w[o * 4 + i] - (xv[i] + xv[4 + i]) / 6.0) <= 1e-6, "dw[%d][%d] %g", o, i,
                          (double)g_w[o * 4 + i]);
    teeny_plan_destroy(plan);
    teeny_graph_destroy(g);
}
END_TEST

START_TEST(test_strided_errors)
{
    teeny_ctx *ctx = th_ctx();
    int64_t s34[2] = {3, 4}, s5[1] = {5}, s4[1] = {4}, s3[1] = {3}, s12[1] = {12};
    teeny_tensor *a = th_tensor(ctx, 2, s34), *b5 = th_tensor(ctx, 1, s5), *b4 = th_tensor(ctx, 1, s4),
                 *y = th_tensor(ctx, 2, s34), *y3 = th_tensor(ctx, 1, s3), *big = th_tensor(ctx, 1, s12), *v = NULL;
    TH_OK(ctx, teeny_tensor_fill(a, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(b4, 2.0f));
    TH_OK(ctx, teeny_tensor_fill(y, 7.0f));
    TH_OK(ctx, teeny_tensor_fill(y3, 7.0f));
    TH_OK(ctx, teeny_tensor_view(a, 1, 1, s4, &v));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_binary(ctx, TEENY_BINARY_ADD, a, b5, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_binary(ctx, (teeny_binary_op)5, a, b4, y));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_binary(ctx, (teeny_binary_op)-1, a, b4, y));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_binary(ctx, TEENY_BINARY_ADD, a, b4, big));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_binary(ctx, TEENY_BINARY_ADD, a, NULL, y));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_binary(NULL, TEENY_BINARY_ADD, a, b4, y));
    int64_t s16[1] = {16};
    teeny_tensor *b16 = th_tensor(ctx, 1, s16), *a2 = NULL, *y2 = NULL;
    TH_OK(ctx, teeny_tensor_view(b16, 0, 2, s34, &a2));
    TH_OK(ctx, teeny_tensor_view(b16, 2, 2, s34, &y2));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_binary(ctx, TEENY_BINARY_ADD, a2, b4, y2)); /* y overlaps a partly */
    teeny_tensor_destroy(a2);
    teeny_tensor_destroy(y2);
    teeny_tensor_destroy(b16);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_binary(ctx, TEENY_BINARY_ADD, a, v, a));  /* y = a, b a part of a */
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_binary_backward(ctx, TEENY_BINARY_MUL, a, b4, y, y, y3));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_binary_backward(ctx, TEENY_BINARY_MUL, a, b4, NULL, y, NULL));
    teeny_reduce_params p = {0, 1, 0};
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_reduce(ctx, &p, a, y3));
    p.axes = 4; /* axis 2 of a rank-2 tensor */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_reduce(ctx, &p, a, y3));
    p.axes = 2;
    p.keepdims = 2;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_reduce(ctx, &p, a, y3));
    p.keepdims = 0;
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_reduce(ctx, &p, a, b4)); /* [3] expected */
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_reduce(ctx, NULL, a, y3));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_reduce_backward(ctx, &p, b4, y));
    th_expect_all(y, 7.0f);
    th_expect_all(y3, 7.0f);
    TH_OK(ctx, teeny_reduce(ctx, &p, a, y3)); /* sum over axis 1 of ones */
    th_expect_all(y3, 4.0f);
    teeny_tensor_destroy(v);
    teeny_tensor *ts[] = {a, b5, b4, y, y3, big};
    for (int i = 0; i < 6; i++)
        teeny_tensor_destroy(ts[i]);
}
END_TEST

Suite *suite_strided(void)
{
    Suite *s = suite_create("strided");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_binary_forward, 0, n_sweep());
    tcase_add_test(fwd, test_binary_rows);
    tcase_add_test(fwd, test_copy_rows);
    tcase_add_loop_test(fwd, test_reduce_sweep, 0, n_sweep());
    tcase_add_test(fwd, test_reduce_loop_limit);
    tcase_add_loop_test(bwd, test_binary_backward, 0, n_sweep());
    tcase_add_test(bwd, test_binary_reference);
    tcase_add_test(bwd, test_strided_graph_constant);
    tcase_add_test(err, test_strided_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
