/*
 * pool.c -- 2-D max and average pooling (PyTorch semantics: floor output
 * size, -inf padding for max, count_include_pad for average, pad at most
 * half the kernel) and global average pooling, with their gradients.
 * Layout NCHW: x [B, C, H, W], y [B, C, OH, OW]; global pooling gives
 * y [B, C].
 *
 * Kernels: cl/pool.cl. Window ops use one work-item per output (forward)
 * or per input element (backward, a gather over the covering windows: no
 * atomics). Global pooling uses one work-group per plane, or in the CPU
 * variant (ctx->tune.variant) one work-item per plane. Where a device
 * limits a work-item's loop trips (teeny__loop_budget), window loops run
 * in launches over bands of rows and a plane's sum in chunks (launch_bands,
 * gap_cpu).
 * Tunable: GAP_WG, the global-pooling work-group size (ctx->work_group_size).
 *
 * Op-table entries (slots TEENY__MAXPOOL2D_* and so on, ops.h); attrs.pool2d (kernel, stride,
 * pad) for the window ops:
 *   maxpool2d:      forward in = [x], out = [y, argmax] (saved argmax: int32,
 *                   shape of y, training only; NULL: not written);
 *                   backward in = [x, y, argmax, dy], out = [dx]
 *   avgpool2d:      forward in = [x], out = [y];
 *                   backward in = [x, y, dy], out = [dx]
 *   global_avgpool: forward in = [x], out = [y [B, C]];
 *                   backward in = [x, y, dy], out = [dx]
 * Backward passes take their shapes from dx and dy (x may be NULL).
 */
#include <stdio.h>

#include "ops.h"

typedef struct {
    int H, W, OH, OW, kh, kw, sh, sw, ph, pw, total;
    float area; /* kh * kw, the average's divisor: from a 64-bit product (the int one overflows past 2^31) */
} pool_geom;

static pool_geom geom_make(const teeny__pool2d_attrs *v, const teeny_tensor *x, const teeny_tensor *y, int per_input)
{
    pool_geom g = {(int)x->shape[2], (int)x->shape[3], (int)y->shape[2], (int)y->shape[3], v->kernel[0], v->kernel[1],
                   v->stride[0], v->stride[1], v->pad[0], v->pad[1], 0, 0.0f};
    g.total = (int)(per_input ? x->numel : y->numel);
    g.area = (float)((int64_t)v->kernel[0] * v->kernel[1]);
    return g;
}

static teeny_status launch_1d(teeny_ctx *ctx, cl_kernel k, const char *name, int total)
{
    size_t global = (size_t)total, local = teeny__local_clamp(ctx, k, name, (size_t)ctx->work_group_size);
    return teeny__launch(ctx, k, name, 1, &global, &local);
}

#define KI(i) TEENY__KARG_INT(i)
#define KM(m) TEENY__KARG_MEM(m)
/* Arguments 2..12 of every window kernel (after its first buffer). */
#define GEOM_ARGS(g)                                                                                                \
    KI((g).H), KI((g).W), KI((g).OH), KI((g).OW), KI((g).kh), KI((g).kw), KI((g).sh), KI((g).sw), KI((g).ph),        \
        KI((g).pw), KI((g).total)

/* ---- row bands (cl/pool.cl) ----
 * A window kernel's item loops over `rows` rows of at most `cols`
 * positions each: the forward over its window clipped to the input (rows
 * <= min(kh, H), cols <= min(kw, W)), a gradient over the windows that
 * cover its element (per axis at most ceil(k / s), and at most the
 * output's extent). Counting every loop as not unrolled, with one more
 * trip per entry, that is rows * (cols + 2) + 1 trips. Where the device
 * limits a work-item's trips (teeny__loop_split) the rows go to launches
 * of nr rows each, the output carrying the running result from one to the
 * next: same visits in the same order, the same bits as one launch. */
#define POOL_SEG_FIRST 1 /* as cl/pool.cl */
#define POOL_SEG_LAST 2

static int64_t covering(int64_t k, int64_t s, int64_t extent)
{
    int64_t n = (k + s - 1) / s;
    return n < extent ? n : extent;
}

/* name over g->total items, a holding its arguments but the band's three
 * (a has room for n + 3). */
static teeny_status launch_bands(teeny_ctx *ctx, const char *name, teeny__karg *a, int n, const pool_geom *g,
                                 int64_t rows, int64_t cols)
{
    int64_t per;
    int r0 = 0, nr, seg;
    teeny_status st = teeny__loop_split(ctx, name, rows, 1, cols + 2, &per);
    nr = (int)per;
    a[n] = KI(r0);
    a[n + 1] = KI(nr);
    a[n + 2] = KI(seg);
    for (int64_t r = 0; r < rows && st == TEENY_OK; r += per) {
        cl_kernel k;
        r0 = (int)r;
        seg = (r == 0 ? POOL_SEG_FIRST : 0) | (r + per >= rows ? POOL_SEG_LAST : 0);
        st = teeny__kernel_get(ctx, "pool", "", name, &k);
        if (st == TEENY_OK)
            st = teeny__set_arg_list(ctx, k, name, a, n + 3);
        if (st == TEENY_OK)
            st = launch_1d(ctx, k, name, g->total);
    }
    return st;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

teeny_status teeny__maxpool2d_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__MAXPOOL2D_X];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE], *am = a->out[TEENY__MAXPOOL2D_OUT_ARGMAX];
    pool_geom g = geom_make(&a->attrs.pool2d, x, y, 0);
    int x_off = teeny__off(x), y_off = teeny__off(y), am_off = am ? teeny__off(am) : 0, want = am != NULL;
    cl_mem am_buf = am ? am->buf : y->buf; /* stand-in, never read or written */
    teeny__karg k[] = {KM(x->buf), KI(x_off), GEOM_ARGS(g), KM(y->buf), KI(y_off), KM(am_buf), KI(am_off), KI(want),
                       {0, NULL}, {0, NULL}, {0, NULL}};
    return launch_bands(ctx, "pool_max_forward", k, (int)(sizeof k / sizeof k[0]) - 3, &g, min64(g.kh, g.H),
                        min64(g.kw, g.W));
}

teeny_status teeny__maxpool2d_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *am = a->in[TEENY__MAXPOOL2D_ARGMAX], *dy = a->in[TEENY__MAXPOOL2D_DY];
    teeny_tensor *dx = a->out[TEENY__MAXPOOL2D_X];
    if (!dx)
        return TEENY_OK;
    pool_geom g = geom_make(&a->attrs.pool2d, dx, dy, 1);
    int am_off = teeny__off(am), dy_off = teeny__off(dy), dx_off = teeny__off(dx);
    teeny__karg k[] = {KM(am->buf), KI(am_off), KM(dy->buf), KI(dy_off), GEOM_ARGS(g), KM(dx->buf), KI(dx_off),
                       {0, NULL}, {0, NULL}, {0, NULL}};
    return launch_bands(ctx, "pool_max_backward", k, (int)(sizeof k / sizeof k[0]) - 3, &g,
                        covering(g.kh, g.sh, g.OH), covering(g.kw, g.sw, g.OW));
}

teeny_status teeny__avgpool2d_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__AVGPOOL2D_X];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    pool_geom g = geom_make(&a->attrs.pool2d, x, y, 0);
    int x_off = teeny__off(x), y_off = teeny__off(y);
    teeny__karg k[] = {KM(x->buf), KI(x_off), GEOM_ARGS(g), TEENY__KARG(g.area), KM(y->buf), KI(y_off),
                       {0, NULL}, {0, NULL}, {0, NULL}};
    return launch_bands(ctx, "pool_avg_forward", k, (int)(sizeof k / sizeof k[0]) - 3, &g, min64(g.kh, g.H),
                        min64(g.kw, g.W));
}

teeny_status teeny__avgpool2d_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dy = a->in[TEENY__AVGPOOL2D_DY];
    teeny_tensor *dx = a->out[TEENY__AVGPOOL2D_X];
    if (!dx)
        return TEENY_OK;
    pool_geom g = geom_make(&a->attrs.pool2d, dx, dy, 1);
    int dy_off = teeny__off(dy), dx_off = teeny__off(dx);
    teeny__karg k[] = {KM(dy->buf), KI(dy_off), GEOM_ARGS(g), TEENY__KARG(g.area), KM(dx->buf), KI(dx_off),
                       {0, NULL}, {0, NULL}, {0, NULL}};
    return launch_bands(ctx, "pool_avg_backward", k, (int)(sizeof k / sizeof k[0]) - 3, &g,
                        covering(g.kh, g.sh, g.OH), covering(g.kw, g.sw, g.OW));
}

/* The CPU variant of global pooling: grid (P, B*C), item (p, bc) summing
 * chunk elements of its plane, chunk + 1 loop trips. Where the device
 * limits a work-item's trips and a plane passes them, each plane is cut
 * into P chunks (teeny__loop_split) whose sums pool_gap_parts_cpu adds up
 * in order (P + 1 trips); elsewhere P = 1 and the item writes the mean. */
static teeny_status gap_cpu(teeny_ctx *ctx, const teeny_tensor *x, teeny_tensor *y, int S, int planes)
{
    static const char name[] = "pool_gap_forward_cpu", parts_name[] = "pool_gap_parts_cpu";
    int x_off = teeny__off(x), y_off = teeny__off(y), chunk, P;
    int64_t per;
    cl_mem part = y->buf; /* stand-in, never written where P == 1 */
    teeny_status st = teeny__loop_split(ctx, name, S, 1, 1, &per);
    if (st != TEENY_OK)
        return st;
    chunk = (int)per;
    P = (int)(((int64_t)S + chunk - 1) / chunk);
    if (P > 1 && ((st = teeny__loop_check(ctx, parts_name, (int64_t)P + 1)) != TEENY_OK ||
                  (st = teeny__scratch(ctx, (size_t)planes * (size_t)P * sizeof(float), &part)) != TEENY_OK))
        return st;
    teeny__karg a[] = {KM(x->buf), KI(x_off), KI(S), KI(planes), KM(y->buf), KI(y_off), KI(chunk), KI(P), KM(part)};
    cl_kernel k;
    st = teeny__kernel_get(ctx, "pool", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_arg_list(ctx, k, name, a, (int)(sizeof a / sizeof a[0]));
    if (st == TEENY_OK) {
        size_t global[2] = {(size_t)P, (size_t)planes};
        size_t local[2] = {1, teeny__local_clamp(ctx, k, name, (size_t)ctx->work_group_size)};
        st = teeny__launch(ctx, k, name, 2, global, local);
    }
    if (st != TEENY_OK || P == 1)
        return st;
    teeny__karg b[] = {KM(part), KI(P), KI(S), KI(planes), KM(y->buf), KI(y_off)};
    st = teeny__kernel_get(ctx, "pool", "", parts_name, &k);
    if (st == TEENY_OK)
        st = teeny__set_arg_list(ctx, k, parts_name, b, (int)(sizeof b / sizeof b[0]));
    return st == TEENY_OK ? launch_1d(ctx, k, parts_name, planes) : st;
}

/* The portable global pooling: a work-group of wg items per plane, each
 * summing every wg-th element (S / wg + 1 trips), then a tree (log2(wg)
 * levels of at most 3 trips, + 1). Where that passes a device's loop
 * budget, the CPU variant's split takes the plane instead. */
teeny_status teeny__global_avgpool_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    static const char name[] = "pool_gap_forward";
    const teeny_tensor *x = a->in[TEENY__GLOBAL_AVGPOOL_X];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int S = (int)(x->shape[2] * x->shape[3]), x_off = teeny__off(x), y_off = teeny__off(y);
    int planes = (int)(x->shape[0] * x->shape[1]);
    char opt[32];
    cl_kernel k;
    int wg, levels = 0;
    int64_t budget;
    if (ctx->tune.variant == TEENY_VARIANT_CPU)
        return gap_cpu(ctx, x, y, S, planes);
    /* GAP_WG: the device's work-group size, or the largest power of two
     * below it the kernel takes (its reduction halves spans) */
    teeny_status st = teeny__fit_halving(ctx, "pool", "-DGAP_WG=%d", (const char *const[]){name}, 1,
                                         ctx->work_group_size, TEENY__WG_FLOOR, &wg, opt, sizeof opt);
    if (st == TEENY_OK)
        st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK)
        return st;
    while ((1 << levels) < wg)
        levels++;
    if (((int64_t)S + wg - 1) / wg + 1 + 3 * (int64_t)levels + 1 > budget)
        return gap_cpu(ctx, x, y, S, planes);
    st = teeny__kernel_get(ctx, "pool", opt, name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(int), &S,
                             sizeof(cl_mem), &y->buf, sizeof(int), &y_off, (size_t)0);
    if (st == TEENY_OK) {
        size_t local = (size_t)wg, global = local * (size_t)planes;
        st = teeny__launch(ctx, k, name, 1, &global, &local);
    }
    return st;
}

teeny_status teeny__global_avgpool_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    static const char name[] = "pool_gap_backward";
    const teeny_tensor *dy = a->in[TEENY__GLOBAL_AVGPOOL_DY];
    teeny_tensor *dx = a->out[TEENY__GLOBAL_AVGPOOL_X];
    if (!dx)
        return TEENY_OK;
    int S = (int)(dx->shape[2] * dx->shape[3]), total = (int)dx->numel, dy_off = teeny__off(dy),
        dx_off = teeny__off(dx);
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "pool", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &dy->buf, sizeof(int), &dy_off, sizeof(int), &S,
                             sizeof(int), &total, sizeof(cl_mem), &dx->buf, sizeof(int), &dx_off, (size_t)0);
    if (st == TEENY_OK)
        st = launch_1d(ctx, k, name, total);
    return st;
}

/* ---- shapes and the eager API ---- */

/* The window parameters. */
static teeny_status check_params(teeny_ctx *ctx, const teeny__pool2d_attrs *v)
{
    static const char *const axis[2] = {"H", "W"};
    for (int i = 0; i < 2; i++) {
        int k = v->kernel[i], s = v->stride[i], p = v->pad[i];
        if (k < 1 || s < 1 || p < 0)
            return teeny__error(ctx, TEENY_ERR_ARG,
                                "kernel %d, stride %d, pad %d along %s; need kernel >= 1, "
                                "stride >= 1, pad >= 0",
                                k, s, p, axis[i]);
        if (p > k / 2)
            return teeny__error(ctx, TEENY_ERR_ARG,
                                "pad %d along %s exceeds half the kernel (%d), as PyTorch "
                                "rejects",
                                p, axis[i], k);
    }
    return TEENY_OK;
}

/* y shape from x shape and parameters. Beyond the parameters: x and y fit
 * int32 indexing, and so does each padded extent H + 2*pad (the kernels'
 * window bounds stay below it); kernel[0] * kernel[1] may pass 2^31.
 * ctx may be NULL (the thread's error). */
static teeny_status out_shape(teeny_ctx *ctx, const teeny__pool2d_attrs *v, const int64_t *xs, int64_t *ys)
{
    char b[96];
    teeny_status st = check_params(ctx, v);
    if (st != TEENY_OK)
        return st;
    for (int i = 0; i < 4; i++)
        if (xs[i] < 1)
            return teeny__error(ctx, TEENY_ERR_SHAPE, "x %s has an empty dimension",
                                teeny__dims_str(xs, 4, b, sizeof b));
    int64_t x_numel = teeny__dims_product(xs, 4);
    if (x_numel < 0 || x_numel > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "x %s passes int32 indexing", teeny__dims_str(xs, 4, b, sizeof b));
    ys[0] = xs[0];
    ys[1] = xs[1];
    for (int i = 0; i < 2; i++) {
        int64_t span = xs[2 + i] + 2 * (int64_t)v->pad[i];
        if (span > INT32_MAX)
            return teeny__error(ctx, TEENY_ERR_RANGE, "%s + 2*pad = %lld + 2*%d passes int32 indexing", i ? "W" : "H",
                                (long long)xs[2 + i], v->pad[i]);
        if (span < v->kernel[i])
            return teeny__error(ctx, TEENY_ERR_SHAPE, "kernel %d is larger than the padded input %lld along %s",
                                v->kernel[i], (long long)span, i ? "W" : "H");
        ys[2 + i] = (span - v->kernel[i]) / v->stride[i] + 1;
    }
    int64_t y_numel = teeny__dims_product(ys, 4);
    if (y_numel < 0 || y_numel > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "output %s passes int32 indexing",
                            teeny__dims_str(ys, 4, b, sizeof b));
    return TEENY_OK;
}

teeny_status teeny_pool2d_output_shape(const teeny_pool2d_params *p, const int64_t x_shape[4], int64_t y_shape[4])
{
    static const char fn[] = "teeny_pool2d_output_shape";
    teeny__pool2d_attrs v;
    int64_t ys[4];
    if (!p || !x_shape || !y_shape)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: %s is NULL", fn, !p ? "p" : !x_shape ? "x_shape" : "y_shape");
    v = teeny__pool2d_attrs_of(p);
    teeny_status st = out_shape(NULL, &v, x_shape, ys);
    if (st != TEENY_OK)
        return teeny__error(NULL, st, "%s: %s", fn, teeny_last_error(NULL));
    for (int i = 0; i < 4; i++)
        y_shape[i] = ys[i];
    return st;
}

/* x: one fp32 [B, C, H, W]. */
static teeny_status check_x(teeny_ctx *ctx, const teeny__node_shapes *s)
{
    char b[96];
    const teeny__shape *x = &s->in[0];
    if (s->n_in != 1 || x->ndim != 4 || x->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x has shape %s%s; expected fp32 [B, C, H, W]",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b), x->is_i32 ? " int32" : "");
    return TEENY_OK;
}

/* x [B, C, H, W] -> y [B, C, OH, OW]; maxpool2d saves its argmax (int32,
 * the shape of y) in training. */
static teeny_status infer_window(teeny_ctx *ctx, teeny__node_shapes *s)
{
    teeny_status st = check_x(ctx, s);
    if (st != TEENY_OK)
        return st;
    s->out = (teeny__shape){.ndim = 4};
    s->n_param = s->n_state = s->n_saved = 0;
    return out_shape(ctx, &s->attrs.pool2d, s->in[0].shape, s->out.shape);
}

teeny_status teeny__maxpool2d_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    teeny_status st = infer_window(ctx, s);
    if (st != TEENY_OK)
        return st;
    s->n_saved = 1;
    s->saved[0] = s->out;
    s->saved[0].is_i32 = 1;
    s->saved_needs_training = 1;
    return TEENY_OK;
}

teeny_status teeny__avgpool2d_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    return infer_window(ctx, s);
}

/* x [B, C, H, W] -> y [B, C]. */
teeny_status teeny__global_avgpool_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    teeny_status st = check_x(ctx, s);
    if (st != TEENY_OK)
        return st;
    s->out = (teeny__shape){.ndim = 2, .shape = {s->in[0].shape[0], s->in[0].shape[1]}};
    s->n_param = s->n_state = s->n_saved = 0;
    return TEENY_OK;
}

/* The window ops' eager calls: p is required. */
static teeny_status run_window(teeny_ctx *ctx, teeny__eager *e, const teeny_pool2d_params *p, const teeny__earg *args,
                               int n)
{
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: p is NULL", e->fn);
    e->attrs.pool2d = teeny__pool2d_attrs_of(p);
    return teeny__eager_run(ctx, e, args, n);
}

teeny_status teeny_maxpool2d_forward(teeny_ctx *ctx, const teeny_pool2d_params *p, const teeny_tensor *x,
                                     teeny_tensor *y, teeny_tensor *argmax)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_maxpool2d_forward", MAXPOOL2D, maxpool2d, forward),
                      .training = argmax != NULL};
    const teeny__earg args[] = {
        {"x", x, TEENY__MAXPOOL2D_X, 0},
        {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT},
        {"argmax", argmax, TEENY__MAXPOOL2D_OUT_ARGMAX, TEENY__EA_OUT | TEENY__EA_OPTIONAL | TEENY__EA_I32}};
    EAGER_BEGIN("teeny_maxpool2d_forward");
    return run_window(ctx, &e, p, args, 3);
}

teeny_status teeny_maxpool2d_backward(teeny_ctx *ctx, const teeny_pool2d_params *p, const teeny_tensor *x,
                                      const teeny_tensor *argmax, const teeny_tensor *dy, teeny_tensor *dx)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_maxpool2d_backward", MAXPOOL2D, maxpool2d, backward), .training = 1};
    const teeny__earg args[] = {{"x", x, TEENY__MAXPOOL2D_X, 0},
                                {"argmax", argmax, TEENY__MAXPOOL2D_ARGMAX, TEENY__EA_I32},
                                {"dy", dy, TEENY__MAXPOOL2D_DY, 0},
                                {"dx", dx, TEENY__MAXPOOL2D_X, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_maxpool2d_backward");
    return run_window(ctx, &e, p, args, 4);
}

teeny_status teeny_avgpool2d_forward(teeny_ctx *ctx, const teeny_pool2d_params *p, const teeny_tensor *x,
                                     teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_avgpool2d_forward", AVGPOOL2D, avgpool2d, forward)};
    const teeny__earg args[] = {{"x", x, TEENY__AVGPOOL2D_X, 0}, {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_avgpool2d_forward");
    return run_window(ctx, &e, p, args, 2);
}

teeny_status teeny_avgpool2d_backward(teeny_ctx *ctx, const teeny_pool2d_params *p, const teeny_tensor *x,
                                      const teeny_tensor *dy, teeny_tensor *dx)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_avgpool2d_backward", AVGPOOL2D, avgpool2d, backward)};
    const teeny__earg args[] = {{"x", x, TEENY__AVGPOOL2D_X, 0},
                                {"dy", dy, TEENY__AVGPOOL2D_DY, 0},
                                {"dx", dx, TEENY__AVGPOOL2D_X, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_avgpool2d_backward");
    return run_window(ctx, &e, p, args, 3);
}

/* y (and dy) may be [B, C] or [B, C, 1, 1]. */
teeny_status teeny_global_avgpool_forward(teeny_ctx *ctx, const teeny_tensor *x, teeny_tensor *y)
{
    static const teeny__eager e = {
        TEENY__EAGER_OF("teeny_global_avgpool_forward", GLOBAL_AVGPOOL, global_avgpool, forward)};
    const teeny__earg args[] = {{"x", x, TEENY__GLOBAL_AVGPOOL_X, 0},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT | TEENY__EA_HW1}};
    EAGER_BEGIN("teeny_global_avgpool_forward");
    return teeny__eager_run(ctx, &e, args, 2);
}

teeny_status teeny_global_avgpool_backward(teeny_ctx *ctx, const teeny_tensor *dy, teeny_tensor *dx)
{
    static const teeny__eager e = {
        TEENY__EAGER_OF("teeny_global_avgpool_backward", GLOBAL_AVGPOOL, global_avgpool, backward)};
    const teeny__earg args[] = {{"dy", dy, TEENY__GLOBAL_AVGPOOL_DY, TEENY__EA_HW1},
                                {"dx", dx, TEENY__GLOBAL_AVGPOOL_X, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_global_avgpool_backward");
    return teeny__eager_run(ctx, &e, args, 2);
}
