/*
 * test_batchnorm.c -- batch normalization against the float64 reference:
 * seeded shape sweeps over both layouts and every variant, large
 * reductions, numerical stability, determinism, finite differences, folding,
 * and every error path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "ops/ops.h"
#include "ref/batchnorm_ref.h"

#define TOL 1e-5

typedef struct {
    int nchw;        /* 0: x is [N, C] */
    int B, C, H, W;  /* N = B for [N, C]; H = W = 1 then */
    int view;        /* x, dy live at an offset inside a larger tensor: 3 (odd), or 4 where view is 2 */
} bn_shape;

static int bn_S(const bn_shape *s) { return s->H * s->W; }
static size_t bn_numel(const bn_shape *s) { return (size_t)s->B * s->C * bn_S(s); }

static void shape_str(const bn_shape *s, uint64_t seed, char *buf, size_t cap)
{
    if (s->nchw)
        snprintf(buf, cap, "x [%d, %d, %d, %d]%s seed %llu", s->B, s->C, s->H, s->W, s->view ? " (view)" : "",
                 (unsigned long long)seed);
    else
        snprintf(buf, cap, "x [%d, %d]%s seed %llu", s->B, s->C, s->view ? " (view)" : "", (unsigned long long)seed);
}

/* Shape i of the sweep: even i [N, C], odd i [B, C, H, W]; sizes include
 * 1x1 spatial, C = 1, odd sizes and sizes that divide no work-group. */
static bn_shape sweep_shape(th_rng *r, int i)
{
    static const int hw[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 28, 31, 32, 33, 56};
    bn_shape s = {0};
    s.nchw = i & 1;
    s.view = i % 3 == 0;
    if (s.nchw) {
        s.B = th_int(r, 1, 6);
        s.C = th_int(r, 0, 4) == 0 ? 1 : th_int(r, 1, 24);
        s.H = hw[th_int(r, 0, 14)];
        s.W = hw[th_int(r, 0, 14)];
    } else {
        s.B = th_int(r, 0, 5) == 0 ? th_int(r, 2, 4) : th_int(r, 2, 700);
        s.C = th_int(r, 0, 4) == 0 ? 1 : th_int(r, 1, 70);
        s.H = s.W = 1;
    }
    if (s.B * bn_S(&s) < 2)
        s.B = 2; /* training needs two values per channel */
    return s;
}

/* Host data of one case, in float (what the device sees) and double. */
typedef struct {
    bn_shape sh;
    size_t n;
    int C, S;
    float *x, *dy, *w, *b, *rm, *rv;
} bn_case;

static void case_make(bn_case *k, const bn_shape *sh, th_rng *r)
{
    k->sh = *sh;
    k->n = bn_numel(sh);
    k->C = sh->C;
    k->S = bn_S(sh);
    k->x = th_malloc(k->n * sizeof(float));
    k->dy = th_malloc(k->n * sizeof(float));
    k->w = th_malloc((size_t)k->C * sizeof(float));
    k->b = th_malloc((size_t)k->C * sizeof(float));
    k->rm = th_malloc((size_t)k->C * sizeof(float));
    k->rv = th_malloc((size_t)k->C * sizeof(float));
    double mean = th_uniform(r, -3, 3), std = th_uniform(r, 0.1, 4);
    th_fill_normal(r, k->x, k->n, mean, std);
    th_fill_normal(r, k->dy, k->n, 0, 1);
    th_fill_uniform(r, k->w, (size_t)k->C, 0.5, 2);
    th_fill_uniform(r, k->b, (size_t)k->C, -1, 1);
    th_fill_uniform(r, k->rm, (size_t)k->C, -1, 1);
    th_fill_uniform(r, k->rv, (size_t)k->C, 0.5, 3);
}

static void case_free(bn_case *k)
{
    free(k->x);
    free(k->dy);
    free(k->w);
    free(k->b);
    free(k->rm);
    free(k->rv);
}

/* Device tensor of the case's x shape; a view at odd offset when asked. */
typedef struct {
    teeny_tensor *base, *t;
} dev_x;

static dev_x dev_x_make(teeny_ctx *ctx, const bn_shape *sh, const float *data)
{
    dev_x d = {0};
    int64_t shape4[4] = {sh->B, sh->C, sh->H, sh->W}, shape2[2] = {sh->B, sh->C};
    int ndim = sh->nchw ? 4 : 2;
    const int64_t *shape = sh->nchw ? shape4 : shape2;
    if (sh->view) {
        int64_t big = (int64_t)bn_numel(sh) + 8;
        d.base = th_tensor(ctx, 1, &big);
        th_poison(d.base);
        TH_OK(ctx, teeny_tensor_view(d.base, sh->view == 2 ? 4 : 3, ndim, shape, &d.t));
    } else {
        d.t = th_tensor(ctx, ndim, shape);
    }
    if (data)
        TH_OK(ctx, teeny_tensor_write(d.t, data, bn_numel(sh)));
    return d;
}

static void dev_x_free(dev_x *d)
{
    teeny_tensor_destroy(d->t);
    teeny_tensor_destroy(d->base);
}

static teeny_tensor *vec(teeny_ctx *ctx, int C, const float *data)
{
    int64_t s = C;
    return data ? th_tensor_from(ctx, 1, &s, data) : th_tensor(ctx, 1, &s);
}

/* Compare device output with the reference; message carries the reproducer. */
static void expect_close_mag(const teeny_tensor *t, const double *ref, const double *mag, size_t n, double tol,
                             const char *what, const char *repro)
{
    float *out = th_read(t);
    long bad = th_first_nonfinite(out, n);
    ck_assert_msg(bad < 0, "%s: element %ld not written or not finite (%g); %s", what, bad,
                  bad >= 0 ? (double)out[bad] : 0.0, repro);
    double e = mag ? th_nrms_mag(out, ref, mag, n) : th_nrms(out, ref, n);
    ck_assert_msg(e <= tol, "%s: nrms %.3g > %.1g; %s", what, e, tol, repro);
    free(out);
}

static void expect_close(const teeny_tensor *t, const double *ref, size_t n, double tol, const char *what,
                         const char *repro)
{
    expect_close_mag(t, ref, NULL, n, tol, what, repro);
}

/* Training and inference forward of one case against the reference. */
static void check_forward(const bn_case *k, const char *repro)
{
    teeny_ctx *ctx = th_ctx();
    size_t n = k->n, C = (size_t)k->C;
    double *x = th_dbl(k->x, n), *w = th_dbl(k->w, C), *b = th_dbl(k->b, C);
    double *rm = th_dbl(k->rm, C), *rv = th_dbl(k->rv, C), *y = th_malloc(n * sizeof *y);
    double *mean = th_malloc(C * sizeof *mean), *rstd = th_malloc(C * sizeof *rstd);
    double *var0 = th_dbl(k->rv, C), *mean0 = th_dbl(k->rm, C);
    dev_x dx_ = dev_x_make(ctx, &k->sh, k->x), dy_ = dev_x_make(ctx, &k->sh, NULL);
    teeny_tensor *tw = vec(ctx, k->C, k->w), *tb = vec(ctx, k->C, k->b), *trm = vec(ctx, k->C, k->rm),
                 *trv = vec(ctx, k->C, k->rv), *tm = vec(ctx, k->C, NULL), *tr = vec(ctx, k->C, NULL);
    float momentum = 0.1f, eps = 1e-5f;

    /* training */
    th_poison(dy_.t);
    th_poison(tm);
    th_poison(tr);
    TH_OK(ctx, teeny_batchnorm_forward_train(ctx, dx_.t, tw, tb, trm, trv, momentum, eps, dy_.t, tm, tr));
    ref_bn_forward_train(x, k->sh.B, k->C, k->S, w, b, (double)momentum, (double)eps, y, mean, rstd, rm, rv);
    double *mag_mean = th_malloc(C * sizeof(double)), *mag_rm = th_malloc(C * sizeof(double));
    for (size_t c = 0; c < C; c++) {
        mag_mean[c] = fabs(mean[c]) + 1 / rstd[c];
        mag_rm[c] = (1 - momentum) * fabs(mean0[c]) + momentum * mag_mean[c];
    }
    expect_close(dy_.t, y, n, TOL, "train y", repro);
    expect_close_mag(tm, mean, mag_mean, C, TOL, "save_mean", repro);
    expect_close(tr, rstd, C, TOL, "save_rstd", repro);
    expect_close_mag(trm, rm, mag_rm, C, TOL, "running_mean", repro);
    free(mag_mean);
    free(mag_rm);
    expect_close(trv, rv, C, TOL, "running_var", repro);

    /* inference with the original running statistics */
    TH_OK(ctx, teeny_tensor_write(trm, k->rm, C));
    TH_OK(ctx, teeny_tensor_write(trv, k->rv, C));
    th_poison(dy_.t);
    TH_OK(ctx, teeny_batchnorm_forward_infer(ctx, dx_.t, tw, tb, trm, trv, eps, dy_.t));
    ref_bn_normalize(x, k->sh.B, k->C, k->S, mean0, var0, (double)eps, w, b, y);
    expect_close(dy_.t, y, n, TOL, "infer y", repro);

    dev_x_free(&dx_);
    dev_x_free(&dy_);
    teeny_tensor *ts[] = {tw, tb, trm, trv, tm, tr};
    for (int i = 0; i < 6; i++)
        teeny_tensor_destroy(ts[i]);
    double *hs[] = {x, w, b, rm, rv, y, mean, rstd, var0, mean0};
    for (int i = 0; i < 10; i++)
        free(hs[i]);
}

/* Training and frozen backward of one case against the reference. */
static void check_backward(const bn_case *k, const char *repro)
{
    teeny_ctx *ctx = th_ctx();
    size_t n = k->n, C = (size_t)k->C;
    double *x = th_dbl(k->x, n), *dy = th_dbl(k->dy, n), *w = th_dbl(k->w, C), *rm = th_dbl(k->rm, C), *rv = th_dbl(k->rv, C);
    double *mean = th_malloc(C * sizeof *mean), *var = th_malloc(C * sizeof *var);
    double *dx = th_malloc(n * sizeof *dx), *dw = th_malloc(C * sizeof *dw), *db = th_malloc(C * sizeof *db);
    float *meanf = th_malloc(C * sizeof *meanf), *rstdf = th_malloc(C * sizeof *rstdf);
    float eps = 1e-5f;

    /* the saved statistics as the device would hold them (float) */
    ref_bn_stats(x, k->sh.B, k->C, k->S, mean, var);
    for (size_t c = 0; c < C; c++) {
        meanf[c] = (float)mean[c];
        rstdf[c] = (float)(1.0 / sqrt(var[c] + eps));
    }
    double *meand = th_dbl(meanf, C), *rstdd = th_dbl(rstdf, C);

    dev_x tx = dev_x_make(ctx, &k->sh, k->x), tdy = dev_x_make(ctx, &k->sh, k->dy), tdx = dev_x_make(ctx, &k->sh, NULL);
    teeny_tensor *tw = vec(ctx, k->C, k->w), *tm = vec(ctx, k->C, meanf), *tr = vec(ctx, k->C, rstdf),
                 *trm = vec(ctx, k->C, k->rm), *trv = vec(ctx, k->C, k->rv), *tdw = vec(ctx, k->C, NULL),
                 *tdb = vec(ctx, k->C, NULL);

    th_poison(tdx.t);
    th_poison(tdw);
    th_poison(tdb);
    TH_OK(ctx, teeny_batchnorm_backward_train(ctx, tx.t, tdy.t, tw, tm, tr, tdx.t, tdw, tdb));
    ref_bn_backward_train(x, dy, k->sh.B, k->C, k->S, w, meand, rstdd, dx, dw, db);
    double *mag_db = th_malloc(C * sizeof(double)), *mag_dw = th_malloc(C * sizeof(double)),
           *mag_dx = th_malloc(n * sizeof(double));
    ref_bn_grad_mags(x, dy, k->sh.B, k->C, k->S, w, meand, rstdd, mag_db, mag_dw, mag_dx);
    expect_close_mag(tdx.t, dx, mag_dx, n, TOL, "train dx", repro);
    expect_close_mag(tdw, dw, mag_dw, C, TOL, "train dweight", repro);
    expect_close_mag(tdb, db, mag_db, C, TOL, "train dbias", repro);

    th_poison(tdx.t);
    th_poison(tdw);
    th_poison(tdb);
    TH_OK(ctx, teeny_batchnorm_backward_frozen(ctx, tx.t, tdy.t, tw, trm, trv, eps, tdx.t, tdw, tdb));
    ref_bn_backward_frozen(x, dy, k->sh.B, k->C, k->S, w, rm, rv, (double)eps, dx, dw, db);
    for (size_t c = 0; c < C; c++)
        rstdd[c] = 1 / sqrt(rv[c] + eps);
    ref_bn_grad_mags(x, dy, k->sh.B, k->C, k->S, w, rm, rstdd, mag_db, mag_dw, NULL);
    expect_close(tdx.t, dx, n, TOL, "frozen dx", repro);
    expect_close_mag(tdw, dw, mag_dw, C, TOL, "frozen dweight", repro);
    expect_close_mag(tdb, db, mag_db, C, TOL, "frozen dbias", repro);
    free(mag_db);
    free(mag_dw);
    free(mag_dx);

    dev_x_free(&tx);
    dev_x_free(&tdy);
    dev_x_free(&tdx);
    teeny_tensor *ts[] = {tw, tm, tr, trm, trv, tdw, tdb};
    for (int i = 0; i < 7; i++)
        teeny_tensor_destroy(ts[i]);
    void *hs[] = {x, dy, w, rm, rv, mean, var, dx, dw, db, meanf, rstdf, meand, rstdd};
    for (int i = 0; i < 14; i++)
        free(hs[i]);
}

static int sweep_count(void)
{
    return th_small() ? 6 : th_full() ? 2000 : 400;
}

static bn_shape small_shape(int i)
{
    static const bn_shape s[] = {{0, 3, 2, 1, 1, 0}, {1, 2, 3, 4, 5, 1}, {1, 2, 1, 1, 1, 0},
                                 {0, 5, 3, 1, 1, 1}, {1, 1, 2, 8, 8, 0}, {1, 3, 1, 2, 3, 0}};
    return s[i % 6];
}

START_TEST(test_batchnorm_forward_sweep)
{
    uint64_t seed = 1000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    bn_shape sh = th_small() ? small_shape(_i) : sweep_shape(&r, _i);
    char repro[160];
    bn_case k;
    shape_str(&sh, seed, repro, sizeof repro);
    if (_i % 2) /* the CPU variants on every device, on every other case */
        strncat(repro, " (CPU variant)", sizeof repro - strlen(repro) - 1);
    case_make(&k, &sh, &r);
    th_cpu_kernels(_i % 2);
    check_forward(&k, repro);
    if (_i % 2 == 0) { /* portable: the two-launch path too, where one launch was taken */
        strncat(repro, " (two launches)", sizeof repro - strlen(repro) - 1);
        th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, 1);
        check_forward(&k, repro);
        th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, 0);
    }
    th_cpu_kernels(-1);
    case_free(&k);
}
END_TEST

START_TEST(test_batchnorm_backward_sweep)
{
    uint64_t seed = 5000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    bn_shape sh = th_small() ? small_shape(_i) : sweep_shape(&r, _i);
    char repro[160];
    bn_case k;
    shape_str(&sh, seed, repro, sizeof repro);
    if (_i % 2) /* the CPU variants on every device, on every other case */
        strncat(repro, " (CPU variant)", sizeof repro - strlen(repro) - 1);
    case_make(&k, &sh, &r);
    th_cpu_kernels(_i % 2);
    check_backward(&k, repro);
    if (_i % 2 == 0) { /* portable: the two-launch path too, where one launch was taken */
        strncat(repro, " (two launches)", sizeof repro - strlen(repro) - 1);
        th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, 1);
        check_backward(&k, repro);
        th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, 0);
    }
    th_cpu_kernels(-1);
    case_free(&k);
}
END_TEST

/* y (training forward) and dx (training backward) of x, dy in k's layout,
 * written into a tensor at element offset out_off (0: a tensor of its own;
 * else a view of a NaN-filled larger one); caller frees both. */
static void outputs_at(const bn_case *k, int out_off, float **y, float **dx)
{
    teeny_ctx *ctx = th_ctx();
    const bn_shape *sh = &k->sh;
    int64_t shape[4] = {sh->B, sh->C, sh->H, sh->W}, big = (int64_t)k->n + out_off;
    dev_x tx = dev_x_make(ctx, sh, k->x), tdy = dev_x_make(ctx, sh, k->dy);
    teeny_tensor *base = th_tensor(ctx, 1, &big), *out = NULL;
    teeny_tensor *tw = vec(ctx, k->C, k->w), *tb = vec(ctx, k->C, k->b), *trm = vec(ctx, k->C, k->rm),
                 *trv = vec(ctx, k->C, k->rv), *tm = vec(ctx, k->C, NULL), *tr = vec(ctx, k->C, NULL),
                 *tdw = vec(ctx, k->C, NULL), *tdb = vec(ctx, k->C, NULL);
    th_poison(base);
    TH_OK(ctx, teeny_tensor_view(base, out_off, 4, shape, &out));
    TH_OK(ctx, teeny_batchnorm_forward_train(ctx, tx.t, tw, tb, trm, trv, 0.1f, 1e-5f, out, tm, tr));
    *y = th_read(out);
    th_poison(base);
    TH_OK(ctx, teeny_batchnorm_backward_train(ctx, tx.t, tdy.t, tw, tm, tr, out, tdw, tdb));
    *dx = th_read(out);
    dev_x_free(&tx);
    dev_x_free(&tdy);
    teeny_tensor *ts[] = {out, base, tw, tb, trm, trv, tm, tr, tdw, tdb};
    for (int i = 0; i < 10; i++)
        teeny_tensor_destroy(ts[i]);
}

/* The portable spatial kernels' walks, four units a trip (bn_walk4), over
 * long runs: posing as a device of one compute unit, the plan takes few
 * partials and consumer work-groups per channel, so items run several
 * trips, the last one part-filled (units not a multiple of 4 * BN_WG; H*W
 * not a multiple of 4: units of one float); x and dy at offset 0 or 4
 * (float4 accesses) or 3 (vload4). Then y and dx at another alignment than
 * x (offsets 0, 3, 4) hold the same bits, and the same bits twice. */
START_TEST(test_batchnorm_spatial_trips)
{
    static const int hw[] = {4, 5, 7, 8, 17, 28, 31, 32, 33, 56};
    uint64_t seed = 7000 + (uint64_t)_i;
    th_rng r = th_rng_make(seed);
    bn_shape sh = {1, 1, 1, 1, 1, _i % 3};
    char repro[200];
    bn_case k;
    sh.B = th_int(&r, 1, 8);
    sh.C = th_int(&r, 1, 5);
    sh.H = hw[th_int(&r, 0, 9)];
    sh.W = hw[th_int(&r, 0, 9)];
    if (sh.B * bn_S(&sh) < 16)
        sh.B = 4;
    shape_str(&sh, seed, repro, sizeof repro);
    snprintf(repro + strlen(repro), sizeof repro - strlen(repro), " offset %d, portable, one compute unit",
             sh.view ? (sh.view == 2 ? 4 : 3) : 0);
    case_make(&k, &sh, &r);
    th_compute_units(1);
    th_cpu_kernels(0);
    th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, 1); /* the partials and the _spatial consumers */
    check_forward(&k, repro);
    check_backward(&k, repro);
    float *y[3], *dx[3];
    static const int offs[3] = {0, 3, 4};
    for (int i = 0; i < 3; i++)
        outputs_at(&k, offs[i], &y[i], &dx[i]);
    float *y2, *dx2;
    outputs_at(&k, offs[_i % 3], &y2, &dx2);
    for (int i = 1; i < 3; i++) {
        ck_assert_msg(!memcmp(y[i], y[0], k.n * sizeof(float)), "%s: y at offset %d differs from offset 0", repro,
                      offs[i]);
        ck_assert_msg(!memcmp(dx[i], dx[0], k.n * sizeof(float)), "%s: dx at offset %d differs from offset 0",
                      repro, offs[i]);
    }
    ck_assert_msg(!memcmp(y2, y[_i % 3], k.n * sizeof(float)) && !memcmp(dx2, dx[_i % 3], k.n * sizeof(float)),
                  "%s: y or dx differs between two runs", repro);
    for (int i = 0; i < 3; i++) {
        free(y[i]);
        free(dx[i]);
    }
    free(y2);
    free(dx2);
    th_hook(TEENY__HOOK_BATCHNORM_TWO_LAUNCH, 0);
    th_cpu_kernels(-1);
    th_compute_units(0);
    case_free(&k);
}
END_TEST

/* Reductions over more than 10^6 values per channel, both layouts. */
START_TEST(test_batchnorm_large)
{
    static const bn_shape shapes[] = {{1, 4, 3, 512, 520, 0}, {0, 1100000, 3, 1, 1, 1}, {1, 1, 2, 1031, 1033, 1}};
    for (int i = 0; i < 3; i++) {
        th_rng r = th_rng_make(77 + (uint64_t)i);
        char repro[160];
        bn_case k;
        shape_str(&shapes[i], 77 + (uint64_t)i, repro, sizeof repro);
        case_make(&k, &shapes[i], &r);
        for (int cpu = 0; cpu < 2; cpu++) { /* the portable and the CPU variants */
            th_cpu_kernels(cpu);
            check_forward(&k, repro);
            check_backward(&k, repro);
        }
        th_cpu_kernels(-1);
        case_free(&k);
    }
}
END_TEST

/* Where a device limits a work-item's loop trips (Mesa's llvmpipe;
 * forced here with th_loop_limit, on a device posing with one compute
 * unit so that the default plan takes few partials): the reductions take
 * more partials (fewer, where the consumer's merge over them is the
 * loop too long), every output still meets the reference, and the work-items
 * launched show the changed split. A limit that no split fits is
 * TEENY_ERR_UNSUPPORTED with every output and running statistic as it
 * was. */
START_TEST(test_batchnorm_split_loops)
{
    teeny_ctx *ctx = th_ctx();
    static const struct {
        bn_shape sh;
        int cpu;
        long limit, too_small;
        int more; /* 1: more work-items than unlimited (more partials), -1: fewer */
    } cases[] = {
        {{1, 3, 4, 20, 20, 0}, 1, 200, 120, 1},  /* bn_stats_cpu: 75 blocks of 16 floats per channel, 2 trips each */
        {{1, 3, 4, 20, 20, 1}, 0, 56, 52, 1},    /* bn_stats_spatial: 2 rounds of 256 units + a 27-trip tree */
        {{0, 3000, 40, 1, 1, 0}, 0, 200, 4, 1},  /* bn_stats_rows: runs of 120 rows */
        {{0, 700, 5, 1, 1, 0}, 0, 60, 4, -1},    /* rows: bn_parts partials (GPU rows 32, CPU rows 64), too many
                                                   * to merge in budget 30; 29 runs of 25 rows fit */
    };
    th_compute_units(1);
    for (int ci = 0; ci < 4; ci++) {
        th_rng r = th_rng_make(900 + (uint64_t)ci);
        char repro[200];
        bn_case k;
        int64_t items[2];
        shape_str(&cases[ci].sh, 900 + (uint64_t)ci, repro, sizeof repro);
        case_make(&k, &cases[ci].sh, &r);
        th_cpu_kernels(cases[ci].cpu);
        for (int li = 0; li < 2; li++) {
            char what[240];
            snprintf(what, sizeof what, "%s, loop limit %ld", repro, li ? cases[ci].limit : 0L);
            th_loop_limit(li ? cases[ci].limit : 0);
            ctx->prog.items_enqueued = 0;
            check_forward(&k, what);
            check_backward(&k, what);
            items[li] = ctx->prog.items_enqueued;
        }
        ck_assert_msg(cases[ci].more > 0 ? items[1] > items[0] : items[1] < items[0],
                      "%s: %lld work-items limited, %lld unlimited: the split did not change", repro,
                      (long long)items[1], (long long)items[0]);
        /* no split fits: rejected before anything is enqueued */
        th_loop_limit(cases[ci].too_small);
        dev_x tx = dev_x_make(ctx, &k.sh, k.x), ty = dev_x_make(ctx, &k.sh, NULL);
        teeny_tensor *tw = vec(ctx, k.C, k.w), *tb = vec(ctx, k.C, k.b), *trm = vec(ctx, k.C, k.rm),
                     *trv = vec(ctx, k.C, k.rv), *tm = vec(ctx, k.C, NULL), *tr = vec(ctx, k.C, NULL);
        th_poison(ty.t);
        th_poison(tm);
        th_poison(tr);
        TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED,
                  teeny_batchnorm_forward_train(ctx, tx.t, tw, tb, trm, trv, 0.1f, 1e-5f, ty.t, tm, tr));
        TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_batchnorm_backward_train(ctx, tx.t, tx.t, tw, trm, trv, ty.t,
                                                                             tm, tr));
        th_expect_all(ty.t, NAN);
        th_expect_all(tm, NAN);
        th_expect_all(tr, NAN);
        float *rm = th_read(trm), *rv = th_read(trv);
        ck_assert_msg(!memcmp(rm, k.rm, (size_t)k.C * 4) && !memcmp(rv, k.rv, (size_t)k.C * 4),
                      "%s: running statistics changed by a rejected call", repro);
        free(rm);
        free(rv);
        dev_x_free(&tx);
        dev_x_free(&ty);
        teeny_tensor *ts[] = {tw, tb, trm, trv, tm, tr};
        for (int i = 0; i < 6; i++)
            teeny_tensor_destroy(ts[i]);
        th_cpu_kernels(-1);
        case_free(&k);
    }
    th_loop_limit(-1);
    th_compute_units(0);
}
END_TEST

/* Mean 1e4, std 1: y stays accurate and the variance is never negative
 * or NaN; a constant channel gives rstd = 1/sqrt(eps) and y = bias. The
 * split into partials follows the device's compute units, so the loop also
 * poses as an H200 (132) and a wider device (1024): many partials per
 * channel, merged in order, are where a mean held near 1e4 lost its digits
 * (nrms 3e-3 on the H200). Loop 0: the spatial layout; 1: the rows layout
 * ([B, C, 1, 1], up to one partial per row). */
START_TEST(test_batchnorm_stability)
{
    teeny_ctx *ctx = th_ctx();
    const unsigned cus[3] = {0, 132, 1024}; /* 0: the device's own */
    const int B = _i ? 20000 : 8, C = 3, H = _i ? 1 : 37, W = _i ? 1 : 29, S = H * W;
    size_t n = (size_t)B * C * S;
    th_rng r = th_rng_make(4242);
    float *x = th_malloc(n * sizeof *x);
    th_fill_normal(&r, x, n, 1e4, 1.0);
    for (int b = 0; b < B; b++) /* channel 2 constant */
        for (int s = 0; s < S; s++)
            x[((size_t)b * C + 2) * S + s] = 12345.0f;
    float w[3] = {1, 1, 1}, bias[3] = {0.5f, -0.5f, 0.25f}, zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    int64_t xs[4] = {B, C, H, W};
    teeny_tensor *tx = th_tensor_from(ctx, 4, xs, x), *ty = th_tensor(ctx, 4, xs);
    teeny_tensor *tw = vec(ctx, C, w), *tb = vec(ctx, C, bias), *trm = vec(ctx, C, zero), *trv = vec(ctx, C, one),
                 *tm = vec(ctx, C, NULL), *tr = vec(ctx, C, NULL);
    double *xd = th_dbl(x, n), *yd = th_malloc(n * sizeof *yd), mean[3], var[3];
    double wd[3] = {1, 1, 1}, bd[3] = {0.5, -0.5, 0.25};
    ref_bn_stats(xd, B, C, S, mean, var);
    ref_bn_normalize(xd, B, C, S, mean, var, 1e-5, wd, bd, yd);
    for (int run = 0; run < 6; run++) { /* the portable and the CPU variants, at each unit count */
        int cpu = run % 2;
        th_cpu_kernels(cpu);
        th_compute_units(cus[run / 2]);
        th_poison(ty);
        th_poison(tr);
        TH_OK(ctx, teeny_batchnorm_forward_train(ctx, tx, tw, tb, trm, trv, 0.1f, 1e-5f, ty, tm, tr));
        float *y = th_read(ty), *rstd = th_read(tr), *rv = th_read(trv);
        for (int c = 0; c < C; c++) {
            ck_assert_msg(isfinite(rstd[c]) && rstd[c] > 0, "rstd[%d] = %g", c, (double)rstd[c]);
            ck_assert_msg(isfinite(rv[c]) && rv[c] >= 0, "running_var[%d] = %g", c, (double)rv[c]);
        }
        ck_assert_msg(fabs(rstd[2] - 1 / sqrt(1e-5)) < 1e-2, "constant channel rstd %g", (double)rstd[2]);
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++)
                ck_assert(y[((size_t)b * C + 2) * S + s] == 0.25f);
        /* the two normal channels */
        double e = th_nrms(y, yd, (size_t)2 * S); /* b = 0, channels 0-1 */
        /* The float mean alone is off by up to half an ulp of 1e4 (4.9e-4,
         * nrms <= 4.4e-4 with these biases; measured 2.9e-4) */
        ck_assert_msg(e <= 5e-4, "nrms %g at mean 1e4 (B %d, S %d, cpu variant %d, %u units)", e, B, S, cpu,
                      cus[run / 2]);
        e = th_nrms(y, yd, n);
        ck_assert_msg(e <= 5e-4, "nrms %g at mean 1e4 (all; B %d, S %d, cpu variant %d, %u units)", e, B, S, cpu,
                      cus[run / 2]);
        free(y);
        free(rstd);
        free(rv);
    }
    th_cpu_kernels(-1);
    th_compute_units(0);
    free(x);
    free(xd);
    free(yd);
    teeny_tensor *ts[] = {tx, ty, tw, tb, trm, trv, tm, tr};
    for (int i = 0; i < 8; i++)
        teeny_tensor_destroy(ts[i]);
}
END_TEST

/* Same inputs twice give bit-identical outputs and gradients. */
START_TEST(test_batchnorm_determinism)
{
    teeny_ctx *ctx = th_ctx();
    static const bn_shape shapes[] = {{1, 16, 5, 64, 63, 0}, {0, 20000, 7, 1, 1, 0}};
    for (int i = 0; i < 2; i++) {
        const bn_shape *sh = &shapes[i];
        th_rng r = th_rng_make(99);
        bn_case k;
        float *out[2][5];
        case_make(&k, sh, &r);
        dev_x tx = dev_x_make(ctx, sh, k.x), tdy = dev_x_make(ctx, sh, k.dy), ty = dev_x_make(ctx, sh, NULL),
              tdx = dev_x_make(ctx, sh, NULL);
        for (int run = 0; run < 2; run++) {
            teeny_tensor *tw = vec(ctx, k.C, k.w), *tb = vec(ctx, k.C, k.b), *trm = vec(ctx, k.C, k.rm),
                         *trv = vec(ctx, k.C, k.rv), *tm = vec(ctx, k.C, NULL), *tr = vec(ctx, k.C, NULL),
                         *tdw = vec(ctx, k.C, NULL), *tdb = vec(ctx, k.C, NULL);
            TH_OK(ctx, teeny_batchnorm_forward_train(ctx, tx.t, tw, tb, trm, trv, 0.1f, 1e-5f, ty.t, tm, tr));
            TH_OK(ctx, teeny_batchnorm_backward_train(ctx, tx.t, tdy.t, tw, tm, tr, tdx.t, tdw, tdb));
            out[run][0] = th_read(ty.t);
            out[run][1] = th_read(tdx.t);
            out[run][2] = th_read(tdw);
            out[run][3] = th_read(tdb);
            out[run][4] = th_read(trv);
            teeny_tensor *ts[] = {tw, tb, trm, trv, tm, tr, tdw, tdb};
            for (int j = 0; j < 8; j++)
                teeny_tensor_destroy(ts[j]);
        }
        size_t sizes[5] = {k.n, k.n, (size_t)k.C, (size_t)k.C, (size_t)k.C};
        for (int j = 0; j < 5; j++) {
            ck_assert_msg(!memcmp(out[0][j], out[1][j], sizes[j] * sizeof(float)), "output %d differs between runs", j);
            free(out[0][j]);
            free(out[1][j]);
        }
        dev_x_free(&tx);
        dev_x_free(&tdy);
        dev_x_free(&ty);
        dev_x_free(&tdx);
        case_free(&k);
    }
}
END_TEST

/* The reference backward against central differences of the reference
 * forward, loss L = sum(g * y), for both batch and frozen statistics. */
static double loss_train(const double *x, int B, int C, int S, const double *w, const double *b, const double *g)
{
    size_t n = (size_t)B * C * S;
    double *y = th_malloc(n * sizeof *y), mean[8], rstd[8], rm[8] = {0}, rv[8] = {0}, L = 0;
    ref_bn_forward_train(x, B, C, S, w, b, 0.1, 1e-5, y, mean, rstd, rm, rv);
    for (size_t i = 0; i < n; i++)
        L += g[i] * y[i];
    free(y);
    return L;
}

static double loss_frozen(const double *x, int B, int C, int S, const double *w, const double *b,
                          const double *rm, const double *rv, const double *g)
{
    size_t n = (size_t)B * C * S;
    double *y = th_malloc(n * sizeof *y), L = 0;
    ref_bn_normalize(x, B, C, S, rm, rv, 1e-5, w, b, y);
    for (size_t i = 0; i < n; i++)
        L += g[i] * y[i];
    free(y);
    return L;
}

START_TEST(test_batchnorm_finite_differences)
{
    enum { B = 3, C = 2, S = 5, N = B * C * S };
    th_rng r = th_rng_make(31337);
    double x[N], g[N], w[C], b[C], rm[C], rv[C], dx[N], dw[C], db[C], mean[C], rstd[C], y[N];
    double rm0[C] = {0}, rv0[C] = {0};
    const double h = 1e-6;
    for (int i = 0; i < N; i++) {
        x[i] = th_normal(&r) * 2 + 1;
        g[i] = th_normal(&r);
    }
    for (int c = 0; c < C; c++) {
        w[c] = th_uniform(&r, 0.5, 2);
        b[c] = th_uniform(&r, -1, 1);
        rm[c] = th_uniform(&r, -1, 1);
        rv[c] = th_uniform(&r, 0.5, 2);
    }
    for (int mode = 0; mode < 2; mode++) {
        if (mode == 0) {
            ref_bn_forward_train(x, B, C, S, w, b, 0.1, 1e-5, y, mean, rstd, rm0, rv0);
            ref_bn_backward_train(x, g, B, C, S, w, mean, rstd, dx, dw, db);
        } else {
            ref_bn_backward_frozen(x, g, B, C, S, w, rm, rv, 1e-5, dx, dw, db);
        }
        double *params[3] = {x, w, b}, *grads[3] = {dx, dw, db};
        int counts[3] = {N, C, C};
        for (int p = 0; p < 3; p++)
            for (int i = 0; i < counts[p]; i++) {
                double keep = params[p][i], lp, lm;
                params[p][i] = keep + h;
                lp = mode ? loss_frozen(x, B, C, S, w, b, rm, rv, g) : loss_train(x, B, C, S, w, b, g);
                params[p][i] = keep - h;
                lm = mode ? loss_frozen(x, B, C, S, w, b, rm, rv, g) : loss_train(x, B, C, S, w, b, g);
                params[p][i] = keep;
                double fd = (lp - lm) / (2 * h);
                ck_assert_msg(fabs(fd - grads[p][i]) <= 1e-6 * (1 + fabs(fd)),
                              "%s param %d[%d]: analytic %.9g, finite difference %.9g", mode ? "frozen" : "train", p, i,
                              grads[p][i], fd);
            }
    }
}
END_TEST

START_TEST(test_batchnorm_fold)
{
    teeny_ctx *ctx = th_ctx();
    enum { C = 37 };
    th_rng r = th_rng_make(5);
    float w[C], b[C], rm[C], rv[C];
    double scale[C], shift[C];
    th_fill_uniform(&r, w, C, -2, 2);
    th_fill_uniform(&r, b, C, -1, 1);
    th_fill_uniform(&r, rm, C, -3, 3);
    th_fill_uniform(&r, rv, C, 0.01, 4);
    for (int c = 0; c < C; c++) {
        scale[c] = w[c] / sqrt((double)rv[c] + 1e-3);
        shift[c] = b[c] - rm[c] * scale[c];
    }
    teeny_tensor *tw = vec(ctx, C, w), *tb = vec(ctx, C, b), *trm = vec(ctx, C, rm), *trv = vec(ctx, C, rv),
                 *tsc = vec(ctx, C, NULL), *tsh = vec(ctx, C, NULL);
    th_poison(tsc);
    th_poison(tsh);
    TH_OK(ctx, teeny_batchnorm_fold(ctx, tw, tb, trm, trv, 1e-3f, tsc, tsh));
    expect_close(tsc, scale, C, TOL, "scale", "fold C 37");
    expect_close(tsh, shift, C, TOL, "shift", "fold C 37");
    teeny_tensor *ts[] = {tw, tb, trm, trv, tsc, tsh};
    for (int i = 0; i < 6; i++)
        teeny_tensor_destroy(ts[i]);
}
END_TEST

/* ---- errors: exact status, nothing modified ---- */

typedef struct {
    teeny_tensor *t;
    float *before;
} snap;

static void snap_take(snap *s, teeny_tensor *t)
{
    s->t = t;
    s->before = th_read(t);
}

static void snap_check(snap *s, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        float *now = th_read(s[i].t);
        ck_assert_msg(!memcmp(now, s[i].before, (size_t)teeny_tensor_numel(s[i].t) * sizeof(float)),
                      "%s modified tensor %d", what, i);
        free(now);
    }
}

START_TEST(test_batchnorm_errors)
{
    teeny_ctx *ctx = th_ctx(), *other = NULL;
    enum { B = 2, C = 3, H = 4, W = 5, N = B * C * H * W };
    th_rng r = th_rng_make(8);
    float x[N], v[C];
    th_fill_normal(&r, x, N, 0, 1);
    th_fill_uniform(&r, v, C, 0.5, 1.5);
    int64_t xs[4] = {B, C, H, W}, x3[3] = {B, C, H * W}, one[4] = {1, C, 1, 1}, nc1[2] = {1, C}, c4 = C + 1;
    teeny_tensor *tx = th_tensor_from(ctx, 4, xs, x), *ty = th_tensor_from(ctx, 4, xs, x);
    teeny_tensor *tx3 = th_tensor(ctx, 3, x3), *t1 = th_tensor(ctx, 4, one), *tn1 = th_tensor(ctx, 2, nc1);
    teeny_tensor *tw = vec(ctx, C, v), *tb = vec(ctx, C, v), *trm = vec(ctx, C, v), *trv = vec(ctx, C, v),
                 *tm = vec(ctx, C, v), *tr = vec(ctx, C, v), *tdw = vec(ctx, C, v), *tdb = vec(ctx, C, v);
    teeny_tensor *tw4 = th_tensor(ctx, 1, &c4), *ti = NULL, *tforeign = NULL;
    int64_t cs = C;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, &cs, &ti));
    TH_OK(NULL, teeny_ctx_create(NULL, &other));
    TH_OK(other, teeny_tensor_create(other, 1, &cs, &tforeign));
    th_poison(t1);
    th_poison(tn1);
    snap s[10];
    teeny_tensor *watched[10] = {tx, ty, tw, tb, trm, trv, tm, tr, tdw, tdb};
    for (int i = 0; i < 10; i++)
        snap_take(&s[i], watched[i]);

#define FWD(...) teeny_batchnorm_forward_train(__VA_ARGS__)
    TH_STATUS(NULL, TEENY_ERR_ARG, FWD(NULL, tx, tw, tb, trm, trv, 0.1f, 1e-5f, ty, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, NULL, tw, tb, trm, trv, 0.1f, 1e-5f, ty, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, NULL, tb, trm, trv, 0.1f, 1e-5f, ty, tm, tr));
    ck_assert_msg(strstr(teeny_last_error(ctx), "weight") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, tw, NULL, trm, trv, 0.1f, 1e-5f, ty, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, tw, tb, NULL, trv, 0.1f, 1e-5f, ty, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, tw, tb, trm, trv, 0.1f, 1e-5f, NULL, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, tw, tb, trm, trv, 0.1f, 1e-5f, ty, tm, NULL));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, tx3, tw, tb, trm, trv, 0.1f, 1e-5f, ty, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, tx, tw4, tb, trm, trv, 0.1f, 1e-5f, ty, tm, tr));
    ck_assert_msg(strstr(teeny_last_error(ctx), "weight") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, tx, tw, tw4, trm, trv, 0.1f, 1e-5f, ty, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, tx, tw, tb, trm, tw4, 0.1f, 1e-5f, ty, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, tx, tw, tb, trm, trv, 0.1f, 1e-5f, ty, tw4, tr));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, tx, tw, tb, trm, trv, 0.1f, 1e-5f, t1, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, t1, tw, tb, trm, trv, 0.1f, 1e-5f, tn1, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, FWD(ctx, tn1, tw, tb, trm, trv, 0.1f, 1e-5f, t1, tm, tr));
    ck_assert_msg(strstr(teeny_last_error(ctx), "more than one value") != NULL, "message: %s", teeny_last_error(ctx));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, tw, tb, trm, trv, 0.1f, -1.0f, ty, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, tw, tb, trm, trv, 0.1f, NAN, ty, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, tw, tb, trm, trv, 1.5f, 1e-5f, ty, tm, tr));
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, tw, tb, trm, trv, 0.1f, 1e-5f, tx, tm, tr));   /* y aliases x */
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, tw, tb, trm, trv, 0.1f, 1e-5f, ty, tm, tm));   /* two outputs */
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, tw, tb, trm, trv, 0.1f, 1e-5f, ty, tw, tr));   /* output = input */
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, ti, tb, trm, trv, 0.1f, 1e-5f, ty, tm, tr));   /* int32 */
    TH_STATUS(ctx, TEENY_ERR_ARG, FWD(ctx, tx, tforeign, tb, trm, trv, 0.1f, 1e-5f, ty, tm, tr));
#undef FWD
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_batchnorm_forward_infer(ctx, tx3, tw, tb, trm, trv, 1e-5f, ty));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_batchnorm_forward_infer(ctx, tx, tw, tb, tw4, trv, 1e-5f, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_batchnorm_forward_infer(ctx, tx, tw, tb, trm, NULL, 1e-5f, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_batchnorm_forward_infer(ctx, tx, tw, tb, trm, trv, -1e-5f, ty));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_batchnorm_forward_infer(ctx, tx, tw, tb, trm, trv, 1e-5f, tx));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_batchnorm_backward_train(ctx, tx, tx, tw, tm, tw4, ty, tdw, tdb));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_batchnorm_backward_train(ctx, tx, t1, tw, tm, tr, ty, tdw, tdb));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_batchnorm_backward_train(ctx, tx, tx, tw, tm, tr, ty, NULL, tdb));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_batchnorm_backward_train(ctx, tx, tx, tw, tm, tr, ty, tdw, tdw));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_batchnorm_backward_train(ctx, tx, tx, tw, tm, tr, tx, tdw, tdb));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_batchnorm_backward_frozen(ctx, tx, tx, tw, trm, trv, 1e-5f, ty, tw4, tdb));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_batchnorm_backward_frozen(ctx, tx, tx, tw, trm, trv, NAN, ty, tdw, tdb));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_batchnorm_fold(ctx, tw, tb, trm, trv, 1e-5f, tm, tw4));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_batchnorm_fold(ctx, tw, tb, trm, trv, 1e-5f, tm, tm));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_batchnorm_fold(ctx, tw, tb, trm, NULL, 1e-5f, tm, tr));
    snap_check(s, 10, "a rejected batch-norm call");
    for (int i = 0; i < 10; i++)
        free(s[i].before);
    teeny_tensor *ts[] = {tx, ty, tx3, t1, tn1, tw, tb, trm, trv, tm, tr, tdw, tdb, tw4, ti, tforeign};
    for (int i = 0; i < 16; i++)
        teeny_tensor_destroy(ts[i]);
    teeny_ctx_destroy(other);
}
END_TEST

Suite *suite_batchnorm(void)
{
    Suite *s = suite_create("batchnorm");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_batchnorm_forward_sweep, 0, sweep_count());
    tcase_add_loop_test(bwd, test_batchnorm_backward_sweep, 0, sweep_count());
    if (!th_small()) {
        tcase_add_test(fwd, test_batchnorm_large);
        tcase_add_loop_test(fwd, test_batchnorm_stability, 0, 2);
        tcase_add_test(fwd, test_batchnorm_determinism);
    }
    tcase_add_test(fwd, test_batchnorm_fold);
    tcase_add_test(fwd, test_batchnorm_split_loops);
    tcase_add_loop_test(fwd, test_batchnorm_spatial_trips, 0, th_small() ? 3 : 24);
    tcase_add_test(bwd, test_batchnorm_finite_differences);
    tcase_add_test(err, test_batchnorm_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
