/*
 * pool.c -- 2-D max and average pooling and global max pooling, with
 * their gradients, and every pooling op's shapes. Semantics: PyTorch's by
 * default (floor output size, -inf padding for max, count_include_pad for
 * average, pad at most half the kernel); ONNX's options on request
 * (teeny__pool2d_attrs: pads before and after apart and of any size,
 * dilation, ceil_mode, count_include_pad=0; the flat Indices output).
 * Layout NCHW: x [B, C, H, W], y [B, C, OH, OW]; global pooling gives
 * y [B, C]. Global average pooling's passes are in pool_global.c.
 *
 * Kernels: cl/pool.cl. Window ops use one work-item per output (forward)
 * or per input element (backward, a gather over the covering windows: no
 * atomics); global max pooling is the window max with one window per
 * plane. Where a device limits a work-item's loop trips
 * (teeny__loop_budget), window loops run in launches over bands of rows
 * (launch_bands).
 *
 * Op-table entries (slots TEENY__MAXPOOL2D_* and so on, ops.h); attrs.pool2d for the window ops:
 *   maxpool2d:         forward in = [x], out = [y, argmax] (saved argmax:
 *                      int32, shape of y, training only; NULL: not written);
 *                      backward in = [x, y, argmax, dy], out = [dx]
 *   maxpool2d_indices: forward in = [x], out = [indices (int32, shape of y)];
 *                      no backward
 *   avgpool2d:         forward in = [x], out = [y];
 *                      backward in = [x, y, dy], out = [dx]
 *   global_maxpool:    forward in = [x], out = [y [B, C], argmax [B, C]];
 *                      backward in = [x, y, argmax, dy], out = [dx]
 *   global_avgpool:    (pool_global.c) forward in = [x], out = [y [B, C]];
 *                      backward in = [x, y, dy], out = [dx]
 * Backward passes take their shapes from dx and dy (x may be NULL).
 */
#include <stdio.h>

#include "../ops.h"

typedef struct {
    int H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, total;
    float area;               /* average: the constant divisor kh * kw (from a 64-bit product: the int one
                                 overflows past 2^31), or 0 where windows count their own taps */
    int lo_h, hi_h, lo_w, hi_w; /* average: the rows and columns a window's divisor counts */
} pool_geom;

static int dil(int d)
{
    return d ? d : 1;
}

/* The extents the window ops check and plan with, per axis: the padded
 * input in + pad + pad_end and the dilated kernel (k - 1)*d + 1, in 64
 * bits (the checks keep both within int32). */
static int64_t pad_end(const teeny__pool2d_attrs *v, int i)
{
    return (int64_t)v->pad[i] + v->pad_end_extra[i];
}

static int64_t kernel_span(const teeny__pool2d_attrs *v, int i)
{
    return ((int64_t)v->kernel[i] - 1) * dil(v->dilation[i]) + 1;
}

static pool_geom geom_make(const teeny__pool2d_attrs *v, const teeny_tensor *x, const teeny_tensor *y, int per_input)
{
    pool_geom g = {(int)x->shape[2], (int)x->shape[3], (int)y->shape[2], (int)y->shape[3], v->kernel[0], v->kernel[1],
                   v->stride[0], v->stride[1], v->pad[0], v->pad[1], dil(v->dilation[0]), dil(v->dilation[1]), 0,
                   0.0f, 0, 0, 0, 0};
    int constant = 1, lo[2], hi[2];
    g.total = (int)(per_input ? x->numel : y->numel);
    /* an average counts the taps in the padded input, or in x alone; where
     * every window lies inside those bounds the divisor is kh * kw */
    for (int i = 0; i < 2; i++) {
        int64_t in = x->shape[2 + i], out = y->shape[2 + i];
        lo[i] = v->exclude_pad ? 0 : -v->pad[i];
        hi[i] = (int)(v->exclude_pad ? in : in + pad_end(v, i));
        constant &= -v->pad[i] >= lo[i] && (out - 1) * v->stride[i] - v->pad[i] + kernel_span(v, i) <= hi[i];
    }
    g.lo_h = lo[0], g.hi_h = hi[0], g.lo_w = lo[1], g.hi_w = hi[1];
    g.area = constant ? (float)((int64_t)v->kernel[0] * v->kernel[1]) : 0.0f;
    return g;
}

#define KI(i) TEENY__KARG_INT(i)
#define KM(m) TEENY__KARG_MEM(m)
/* Arguments 2..14 of every window kernel (after its first buffer), and
 * the average's divisor (POOL_AVG). */
#define GEOM_ARGS(g)                                                                                                \
    KI((g).H), KI((g).W), KI((g).OH), KI((g).OW), KI((g).kh), KI((g).kw), KI((g).sh), KI((g).sw), KI((g).ph),        \
        KI((g).pw), KI((g).dh), KI((g).dw), KI((g).total)
#define AVG_ARGS(g) TEENY__KARG((g).area), KI((g).lo_h), KI((g).hi_h), KI((g).lo_w), KI((g).hi_w)

/* ---- row bands (cl/pool.cl) ----
 * A window kernel's item loops over `rows` rows of at most `cols`
 * positions each: the forward over its window's taps inside the input
 * (rows <= min(kh, H), cols <= min(kw, W)), a gradient over the windows
 * whose span covers its element (per axis at most ceil(span / s), and at
 * most the output's extent). Counting every loop as not unrolled, with one
 * more trip per entry, that is rows * (cols + 2) + 1 trips. Where the
 * device limits a work-item's trips (teeny__loop_split) the rows go to
 * launches of nr rows each, the output carrying the running result from
 * one to the next: same visits in the same order, the same bits as one
 * launch. */
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
            st = teeny__launch_1d(ctx, k, name, (size_t)g->total);
    }
    return st;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

#define POOL_INDEX_PLANE 0 /* as cl/pool.cl: pool_max_forward's index_mode */
#define POOL_INDEX_FLAT 1

/* The maximum alone through pool_max_forward_cpu (cl/pool.cl), where
 * the tuning is the CPU variant, the test hook POOL_MAX_CPU is not -1 and
 * the band applies (teeny__band_rows_max); *done 0 (TEENY_OK) elsewhere. */
static teeny_status max_band(teeny_ctx *ctx, const pool_geom *g, const teeny_tensor *x, cl_mem y_buf, int y_off,
                             int *done)
{
    teeny__band_geom b = {g->OH, g->OW, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw};
    int64_t fit = 0, planes = g->total / ((int64_t)g->OH * g->OW);
    teeny_status st;
    *done = 0;
    if (ctx->tune.variant != TEENY_VARIANT_CPU || ctx->hooks.pool_max_cpu < 0)
        return TEENY_OK;
    if ((st = teeny__band_rows_max(ctx, &b, &fit)) != TEENY_OK || fit < 1)
        return st;
    int rows_per = teeny__cpu_rows_per(ctx, g->OH, planes, fit), x_off = teeny__off(x);
    size_t blocks = (size_t)((g->OH + rows_per - 1) / rows_per), l1 = teeny__cpu_local(ctx, blocks * (size_t)planes);
    size_t global[2] = {blocks, ((size_t)planes + l1 - 1) / l1 * l1}, local[2] = {1, l1};
    teeny__karg k[] = {KM(x->buf), KI(x_off), GEOM_ARGS(*g), KM(y_buf), KI(y_off), KI(rows_per)};
    *done = 1;
    return teeny__run_kernel(ctx, "pool", "", "pool_max_forward_cpu", k, (int)(sizeof k / sizeof k[0]), 2, global,
                             local);
}

/* The max forward over x into y's buffer (y_buf at y_off: a tensor, or
 * scratch for the indices op), its index (index_mode) into am when given. */
static teeny_status max_forward(teeny_ctx *ctx, const teeny__pool2d_attrs *v, const teeny_tensor *x,
                                const teeny_tensor *y, cl_mem y_buf, int y_off, const teeny_tensor *am, int index_mode)
{
    pool_geom g = geom_make(v, x, y, 0);
    int done = 0;
    teeny_status st = am ? TEENY_OK : max_band(ctx, &g, x, y_buf, y_off, &done);
    if (st != TEENY_OK || done)
        return st;
    int x_off = teeny__off(x), am_off = am ? teeny__off(am) : 0, want = am != NULL;
    cl_mem am_buf = am ? am->buf : y_buf; /* stand-in, never read or written */
    teeny__karg k[] = {KM(x->buf),  KI(x_off),  GEOM_ARGS(g), KM(y_buf),  KI(y_off),  KM(am_buf), KI(am_off),
                       KI(want),    KI(index_mode), {0, NULL}, {0, NULL}, {0, NULL}};
    return launch_bands(ctx, "pool_max_forward", k, (int)(sizeof k / sizeof k[0]) - 3, &g, min64(g.kh, g.H),
                        min64(g.kw, g.W));
}

/* dx from dy and the plane argmax of the windows of attrs v. */
static teeny_status max_backward(teeny_ctx *ctx, const teeny__pool2d_attrs *v, const teeny_tensor *am,
                                 const teeny_tensor *dy, teeny_tensor *dx)
{
    pool_geom g = geom_make(v, dx, dy, 1);
    int am_off = teeny__off(am), dy_off = teeny__off(dy), dx_off = teeny__off(dx);
    teeny__karg k[] = {KM(am->buf), KI(am_off), KM(dy->buf), KI(dy_off), GEOM_ARGS(g), KM(dx->buf), KI(dx_off),
                       {0, NULL}, {0, NULL}, {0, NULL}};
    return launch_bands(ctx, "pool_max_backward", k, (int)(sizeof k / sizeof k[0]) - 3, &g,
                        covering(kernel_span(v, 0), g.sh, g.OH), covering(kernel_span(v, 1), g.sw, g.OW));
}

teeny_status teeny__maxpool2d_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    return max_forward(ctx, &a->attrs.pool2d, a->in[TEENY__MAXPOOL2D_X], y, y->buf, teeny__off(y),
                       a->out[TEENY__MAXPOOL2D_OUT_ARGMAX], POOL_INDEX_PLANE);
}

teeny_status teeny__maxpool2d_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny_tensor *dx = a->out[TEENY__MAXPOOL2D_X];
    return dx ? max_backward(ctx, &a->attrs.pool2d, a->in[TEENY__MAXPOOL2D_ARGMAX], a->in[TEENY__MAXPOOL2D_DY], dx)
              : TEENY_OK;
}

/* ONNX's MaxPool Indices: the flat index of each maximum over all of x
 * (row-major, or with each plane column-major: storage_order 1), the
 * maxima themselves going to scratch. */
teeny_status teeny__maxpool2d_indices_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__MAXPOOL2D_INDICES_X];
    teeny_tensor *idx = a->out[TEENY__OUT_VALUE];
    cl_mem scratch;
    teeny_status st = teeny__scratch(ctx, (size_t)idx->numel * sizeof(float), &scratch);
    return st == TEENY_OK ? max_forward(ctx, &a->attrs.pool2d, x, idx, scratch, 0, idx,
                                        POOL_INDEX_FLAT + (a->attrs.pool2d.storage_order != 0))
                          : st;
}

teeny_status teeny__avgpool2d_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__AVGPOOL2D_X];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    pool_geom g = geom_make(&a->attrs.pool2d, x, y, 0);
    int x_off = teeny__off(x), y_off = teeny__off(y);
    teeny__karg k[] = {KM(x->buf), KI(x_off), GEOM_ARGS(g), AVG_ARGS(g), KM(y->buf), KI(y_off),
                       {0, NULL}, {0, NULL}, {0, NULL}};
    return launch_bands(ctx, "pool_avg_forward", k, (int)(sizeof k / sizeof k[0]) - 3, &g, min64(g.kh, g.H),
                        min64(g.kw, g.W));
}

teeny_status teeny__avgpool2d_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny__pool2d_attrs *v = &a->attrs.pool2d;
    const teeny_tensor *dy = a->in[TEENY__AVGPOOL2D_DY];
    teeny_tensor *dx = a->out[TEENY__AVGPOOL2D_X];
    if (!dx)
        return TEENY_OK;
    pool_geom g = geom_make(v, dx, dy, 1);
    int dy_off = teeny__off(dy), dx_off = teeny__off(dx);
    teeny__karg k[] = {KM(dy->buf), KI(dy_off), GEOM_ARGS(g), AVG_ARGS(g), KM(dx->buf), KI(dx_off),
                       {0, NULL}, {0, NULL}, {0, NULL}};
    return launch_bands(ctx, "pool_avg_backward", k, (int)(sizeof k / sizeof k[0]) - 3, &g,
                        covering(kernel_span(v, 0), g.sh, g.OH), covering(kernel_span(v, 1), g.sw, g.OW));
}

/* Global max pooling is the window max with one window per plane. */
static teeny__pool2d_attrs whole_plane(const teeny_tensor *x)
{
    teeny__pool2d_attrs v = {{(int)x->shape[2], (int)x->shape[3]}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 0, 0, 0, 0};
    return v;
}

/* y [B, C] or [B, C, 1, 1] viewed by the window kernels as [B, C, 1, 1]. */
static teeny_tensor as_plane_out(const teeny_tensor *y)
{
    teeny_tensor t = *y;
    t.ndim = 4;
    t.shape[2] = t.shape[3] = 1;
    return t;
}

teeny_status teeny__global_maxpool_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__GLOBAL_MAXPOOL_X];
    teeny_tensor y = as_plane_out(a->out[TEENY__OUT_VALUE]);
    const teeny_tensor *am = a->out[TEENY__GLOBAL_MAXPOOL_OUT_ARGMAX];
    teeny__pool2d_attrs v = whole_plane(x);
    teeny_tensor am4;
    if (am)
        am4 = as_plane_out(am);
    return max_forward(ctx, &v, x, &y, y.buf, teeny__off(&y), am ? &am4 : NULL, POOL_INDEX_PLANE);
}

teeny_status teeny__global_maxpool_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny_tensor *dx = a->out[TEENY__GLOBAL_MAXPOOL_X];
    if (!dx)
        return TEENY_OK;
    teeny_tensor dy = as_plane_out(a->in[TEENY__GLOBAL_MAXPOOL_DY]), am = as_plane_out(a->in[TEENY__GLOBAL_MAXPOOL_ARGMAX]);
    teeny__pool2d_attrs v = whole_plane(dx);
    return max_backward(ctx, &v, &am, &dy, dx);
}

/* ---- shapes and the eager API ---- */

/* The window parameters. */
static teeny_status check_params(teeny_ctx *ctx, const teeny__pool2d_attrs *v)
{
    static const char *const axis[2] = {"H", "W"};
    for (int i = 0; i < 2; i++) {
        int k = v->kernel[i], s = v->stride[i], p = v->pad[i], d = v->dilation[i];
        int64_t pe = pad_end(v, i), half = kernel_span(v, i) / 2;
        if (k < 1 || s < 1 || p < 0 || pe < 0 || d < 0)
            return teeny__error(ctx, TEENY_ERR_ARG,
                                "kernel %d, stride %d, pad %d, pad_end_extra %d, dilation %d along %s; need "
                                "kernel >= 1, stride >= 1, pad >= 0, pad + pad_end_extra >= 0, dilation >= 0",
                                k, s, p, v->pad_end_extra[i], d, axis[i]);
        if (!v->large_pads && (p > half || pe > half))
            return teeny__error(ctx, TEENY_ERR_ARG,
                                "pad %lld along %s exceeds half the kernel (%lld), as PyTorch rejects "
                                "(large_pads allows it)",
                                (long long)(p > half ? p : pe), axis[i], (long long)kernel_span(v, i));
    }
    if ((unsigned)v->ceil_mode > 1 || (unsigned)v->exclude_pad > 1 || (unsigned)v->large_pads > 1 ||
        (unsigned)v->storage_order > 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "ceil_mode %d, exclude_pad %d, large_pads %d, storage_order %d: each "
                            "0 or 1", v->ceil_mode, v->exclude_pad, v->large_pads, v->storage_order);
    return TEENY_OK;
}

/* Output extent along axis i of an input of extent in: floor or (ceil_mode)
 * ceiling of (in + pads - kernel span) / stride, plus one, less the last
 * window where ceil_mode would start it past the input and the padding
 * before it (PyTorch's rule, and ONNX's). in + pads and the kernel span
 * are checked to fit int32 first. */
static teeny_status out_extent(teeny_ctx *ctx, const teeny__pool2d_attrs *v, int i, int64_t in, int64_t *out)
{
    const char *ax = i ? "W" : "H";
    int64_t span = in + v->pad[i] + pad_end(v, i), ke = kernel_span(v, i), s = v->stride[i];
    if (span > INT32_MAX || ke > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "%s + pads = %lld + %d + %lld (kernel span %lld) passes int32 "
                            "indexing", ax, (long long)in, v->pad[i], (long long)pad_end(v, i), (long long)ke);
    if (span < ke)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "kernel %d (span %lld) is larger than the padded input %lld along %s",
                            v->kernel[i], (long long)ke, (long long)span, ax);
    *out = (span - ke + (v->ceil_mode ? s - 1 : 0)) / s + 1;
    if (v->ceil_mode && (*out - 1) * s >= in + v->pad[i])
        (*out)--;
    return TEENY_OK;
}

/* y shape from x shape and parameters. Beyond the parameters: x and y fit
 * int32 indexing, and so does each padded extent H + pads (the kernels'
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
    for (int i = 0; i < 2; i++)
        if ((st = out_extent(ctx, v, i, xs[2 + i], &ys[2 + i])) != TEENY_OK)
            return st;
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

/* The max pools save their argmax (int32, the shape of y) in training. */
static teeny_status save_argmax(teeny_status st, teeny__node_shapes *s)
{
    if (st != TEENY_OK)
        return st;
    s->n_saved = 1;
    s->saved[0] = s->out;
    s->saved[0].is_i32 = 1;
    s->saved_needs_training = 1;
    return TEENY_OK;
}

teeny_status teeny__maxpool2d_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    return save_argmax(infer_window(ctx, s), s);
}

teeny_status teeny__avgpool2d_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    return infer_window(ctx, s);
}

/* x [B, C, H, W] -> int32 indices of y's shape. */
teeny_status teeny__maxpool2d_indices_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    teeny_status st = infer_window(ctx, s);
    s->out.is_i32 = 1;
    return st;
}

/* x [B, C, H, W] -> y [B, C], saving its argmax (int32 [B, C]) in training. */
teeny_status teeny__global_maxpool_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    return save_argmax(teeny__global_avgpool_infer(ctx, s), s);
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


teeny_status teeny_maxpool2d_indices(teeny_ctx *ctx, const teeny_pool2d_params *p, const teeny_tensor *x,
                                     int column_major, teeny_tensor *indices)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_maxpool2d_indices", MAXPOOL2D_INDICES, maxpool2d_indices, forward)};
    const teeny__earg args[] = {{"x", x, TEENY__MAXPOOL2D_INDICES_X, 0},
                                {"indices", indices, TEENY__OUT_VALUE, TEENY__EA_OUT | TEENY__EA_I32}};
    EAGER_BEGIN("teeny_maxpool2d_indices");
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: p is NULL", e.fn);
    e.attrs.pool2d = teeny__pool2d_attrs_of(p);
    e.attrs.pool2d.storage_order = column_major;
    return teeny__eager_run(ctx, &e, args, 2);
}

/* y (and dy) [B, C] or [B, C, 1, 1]; argmax int32 [B, C] or [B, C, 1, 1]. */
teeny_status teeny_global_maxpool_forward(teeny_ctx *ctx, const teeny_tensor *x, teeny_tensor *y, teeny_tensor *argmax)
{
    const teeny__eager e = {TEENY__EAGER_OF("teeny_global_maxpool_forward", GLOBAL_MAXPOOL, global_maxpool, forward),
                            .training = argmax != NULL};
    const teeny__earg args[] = {
        {"x", x, TEENY__GLOBAL_MAXPOOL_X, 0},
        {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT | TEENY__EA_HW1},
        {"argmax", argmax, TEENY__GLOBAL_MAXPOOL_OUT_ARGMAX,
         TEENY__EA_OUT | TEENY__EA_OPTIONAL | TEENY__EA_I32 | TEENY__EA_HW1}};
    EAGER_BEGIN("teeny_global_maxpool_forward");
    return teeny__eager_run(ctx, &e, args, 3);
}

teeny_status teeny_global_maxpool_backward(teeny_ctx *ctx, const teeny_tensor *argmax, const teeny_tensor *dy,
                                           teeny_tensor *dx)
{
    const teeny__eager e = {
        TEENY__EAGER_OF("teeny_global_maxpool_backward", GLOBAL_MAXPOOL, global_maxpool, backward), .training = 1};
    const teeny__earg args[] = {{"argmax", argmax, TEENY__GLOBAL_MAXPOOL_ARGMAX, TEENY__EA_I32 | TEENY__EA_HW1},
                                {"dy", dy, TEENY__GLOBAL_MAXPOOL_DY, TEENY__EA_HW1},
                                {"dx", dx, TEENY__GLOBAL_MAXPOOL_X, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_global_maxpool_backward");
    return teeny__eager_run(ctx, &e, args, 3);
}
