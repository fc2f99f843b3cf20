/*
 * resize.c -- resize over the last two dimensions of x [B, C, H, W]
 * (ONNX Resize / Upsample, PyTorch's interpolate): nearest with ONNX's
 * rounding modes and bilinear, under the coordinate modes half_pixel,
 * pytorch_half_pixel, asymmetric, align_corners and tf_half_pixel_for_nn;
 * its shape rule, forward, backward and eager calls. Kernels:
 * cl/resize.cl, one work-item per output (forward) or per dx element
 * (backward), no local memory, no barrier.
 *
 * Per axis the coordinate is a fraction of 64-bit integers (resize_map):
 * output o reads input floor((a*o + b) / d), the nearest mode's rounding
 * folded into a, b, d; bilinear clamps the numerator to [0, (in - 1)*d]
 * and takes its remainder over d as the weight of the next input. A
 * float scale is the fraction its value is, so ties round exactly.
 *
 * The backward gathers: a dx element finds, in closed form from the same
 * map, the output rows and columns that read it (ranges, as the map is
 * monotonic) and sums dy over them, rows then columns in order. Where that
 * passes a device's loop budget (teeny__loop_budget) the rows go in bands
 * over several launches, dx carrying the running sum (the bits of one
 * launch); a single row's columns past it are TEENY_ERR_UNSUPPORTED.
 */
#include <math.h>

#include "../ops.h"

#define KI(i) TEENY__KARG_INT(i)
#define KM(m) TEENY__KARG_MEM(m)

/* index(o) = floor((a*o + b) / d), d > 0, a >= 0 */
typedef struct {
    cl_long a, b, d;
} resize_map;

#define RESIZE_MAX_DEN_LOG2 28
#define RESIZE_MAX_NUM 2305843009213693952.0 /* 2^61: every numerator the kernels form stays below */

/* A scale s > 0 as p / q (q a power of two: a float is m * 2^e), or
 * out / in for s = 0. */
static teeny_status scale_fraction(teeny_ctx *ctx, float s, int64_t in, int64_t out, int64_t *p, int64_t *q)
{
    int e;
    if (s == 0.0f) {
        *p = out;
        *q = in;
        return TEENY_OK;
    }
    int64_t m = (int64_t)ldexpf(frexpf(s, &e), 24); /* s = m * 2^(e - 24), exactly */
    e -= 24;
    while (e < 0 && !(m & 1)) {
        m >>= 1;
        e++;
    }
    if (e > 16 || e < -RESIZE_MAX_DEN_LOG2)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "scale %g is the fraction %lld * 2^%d: past the 2^%d the "
                            "exact coordinates allow", (double)s, (long long)m, e, e > 0 ? 40 : -RESIZE_MAX_DEN_LOG2);
    *p = e >= 0 ? m << e : m;
    *q = e >= 0 ? 1 : (int64_t)1 << -e;
    return TEENY_OK;
}

/* The map of one axis (0: H, 1: W) of input size in. */
static teeny_status axis_map(teeny_ctx *ctx, const teeny__resize2d_attrs *at, int axis, int64_t in, resize_map *m)
{
    int64_t out = at->size[axis], p = 1, q = 1;
    teeny_status st = scale_fraction(ctx, at->scale[axis], in, out, &p, &q);
    if (st != TEENY_OK)
        return st;
    resize_map c = {0, 0, 1};                 /* the coordinate (a*o + b) / d, before rounding */
    int longer = in * p > q;                  /* the resized length in * p / q passes 1 */
    switch ((teeny_resize_coord)at->coord) {
    case TEENY_RESIZE_PYTORCH_HALF_PIXEL:
        if (!longer)
            break;
        /* fall through */
    case TEENY_RESIZE_HALF_PIXEL:             /* ((2o + 1) q - p) / 2p */
        c = (resize_map){2 * q, q - p, 2 * p};
        break;
    case TEENY_RESIZE_ASYMMETRIC:
        c = (resize_map){q, 0, p};
        break;
    case TEENY_RESIZE_ALIGN_CORNERS:          /* o (in - 1) / (in p / q - 1) */
        if (longer)
            c = (resize_map){(in - 1) * q, 0, in * p - q};
        break;
    case TEENY_RESIZE_TF_HALF_PIXEL_FOR_NN:   /* (2o + 1) q / 2p */
        c = (resize_map){2 * q, q, 2 * p};
        break;
    }
    *m = c;
    if (at->mode == TEENY_RESIZE_NEAREST) {
        switch ((teeny_resize_rounding)at->rounding) {
        case TEENY_RESIZE_FLOOR:
            break;
        case TEENY_RESIZE_CEIL:               /* ceil(n / d) = floor((n + d - 1) / d) */
            m->b = c.b + c.d - 1;
            break;
        case TEENY_RESIZE_ROUND_PREFER_CEIL:  /* floor(n / d + 1/2) */
            *m = (resize_map){2 * c.a, 2 * c.b + c.d, 2 * c.d};
            break;
        case TEENY_RESIZE_ROUND_PREFER_FLOOR: /* ceil(n / d - 1/2) */
            *m = (resize_map){2 * c.a, 2 * c.b + c.d - 1, 2 * c.d};
            break;
        }
    }
    if ((double)m->a * (double)(out + 1) + fabs((double)m->b) + (double)m->d * (double)(in + 2) > RESIZE_MAX_NUM)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "the %s axis's coordinates (%lld to %lld, scale %g) pass "
                            "2^61 as exact fractions", axis ? "W" : "H", (long long)in, (long long)out,
                            (double)at->scale[axis]);
    return TEENY_OK;
}

static int64_t floor_div(int64_t n, int64_t d)
{
    int64_t q = n / d;
    return (n % d != 0 && n < 0) ? q - 1 : q;
}

/* The outputs [*lo, *hi] whose (clamped) index is in [t0, t1] (the
 * kernel's rs_range, on the host for the loop plan). */
static void out_range(const resize_map *m, int64_t t0, int64_t t1, int64_t in, int64_t out, int64_t *lo, int64_t *hi)
{
    int64_t c = floor_div(m->b, m->d);
    if (t0 <= 0)
        *lo = 0;
    else if (m->a == 0)
        *lo = c >= t0 ? 0 : out;
    else
        *lo = -floor_div(m->b - t0 * m->d, m->a);
    if (t1 >= in - 1)
        *hi = out - 1;
    else if (m->a == 0)
        *hi = c <= t1 ? out - 1 : -1;
    else
        *hi = floor_div((t1 + 1) * m->d - m->b - 1, m->a);
    *lo = *lo < 0 ? 0 : *lo > out ? out : *lo;
    *hi = *hi < -1 ? -1 : *hi > out - 1 ? out - 1 : *hi;
}

/* The most outputs along an axis that read one input index. */
static int64_t max_span(const resize_map *m, int linear, int64_t in, int64_t out)
{
    int64_t most = 0, lo, hi;
    for (int64_t t = 0; t < in; t++) {
        out_range(m, t - linear, t, in, out, &lo, &hi);
        most = hi - lo + 1 > most ? hi - lo + 1 : most;
    }
    return most;
}

/* x fp32 [B, C, H, W] -> y [B, C, size[0], size[1]]; the attributes and
 * both axes' maps checked. */
teeny_status teeny__resize2d_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__resize2d_attrs *at = &s->attrs.resize2d;
    const teeny__shape *x = &s->in[0];
    char b[96];
    resize_map m;
    if (s->n_in != 1 || x->ndim != 4 || x->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x has shape %s%s; expected fp32 [B, C, H, W]",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b), x->is_i32 ? " int32" : "");
    if ((unsigned)at->mode > TEENY_RESIZE_LINEAR || (unsigned)at->coord > TEENY_RESIZE_TF_HALF_PIXEL_FOR_NN ||
        (unsigned)at->rounding > TEENY_RESIZE_CEIL)
        return teeny__error(ctx, TEENY_ERR_ARG, "mode %d, coord %d or rounding %d is outside its enum", at->mode,
                            at->coord, at->rounding);
    for (int i = 0; i < 2; i++)
        if (at->size[i] < 1 || !(at->scale[i] >= 0.0f) || isinf(at->scale[i]))
            return teeny__error(ctx, TEENY_ERR_ARG, "size[%d] = %d or scale[%d] = %g: a size >= 1 and a scale >= 0, "
                                "finite, are needed", i, at->size[i], i, (double)at->scale[i]);
    s->out = (teeny__shape){.ndim = 4, .shape = {x->shape[0], x->shape[1], at->size[0], at->size[1]}};
    s->n_param = s->n_state = s->n_saved = 0;
    int64_t numel = teeny__dims_product(s->out.shape, 4);
    if (numel < 0 || numel > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "y %s passes 2^31 - 1 elements",
                            teeny__dims_str(s->out.shape, 4, b, sizeof b));
    for (int i = 0; i < 2; i++) {
        teeny_status st = axis_map(ctx, at, i, x->shape[2 + i], &m);
        if (st != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}

/* The kernels' shared arguments after the buffers: sizes, mode, maps. */
typedef struct {
    int H, W, OH, OW, total, linear;
    resize_map my, mx;
} resize_geom;

static teeny_status geom_of(teeny_ctx *ctx, const teeny__resize2d_attrs *at, const teeny_tensor *x_like, int total,
                            resize_geom *g)
{
    g->H = (int)x_like->shape[2];
    g->W = (int)x_like->shape[3];
    g->OH = at->size[0];
    g->OW = at->size[1];
    g->total = total;
    g->linear = at->mode == TEENY_RESIZE_LINEAR;
    teeny_status st = axis_map(ctx, at, 0, g->H, &g->my);
    return st == TEENY_OK ? axis_map(ctx, at, 1, g->W, &g->mx) : st;
}

static teeny_status launch(teeny_ctx *ctx, const char *name, const teeny__karg *a, int n, int total)
{
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "resize", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_arg_list(ctx, k, name, a, n);
    if (st == TEENY_OK)
        st = teeny__launch_1d(ctx, k, name, (size_t)total);
    return st;
}

teeny_status teeny__resize2d_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    static const char name[] = "resize_forward";
    const teeny_tensor *x = a->in[TEENY__RESIZE2D_X];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    resize_geom g;
    int x_off = teeny__off(x), y_off = teeny__off(y);
    teeny_status st = geom_of(ctx, &a->attrs.resize2d, x, (int)y->numel, &g);
    if (st != TEENY_OK)
        return st;
    teeny__karg k[] = {KM(x->buf), KI(x_off), KM(y->buf), KI(y_off), KI(g.H), KI(g.W), KI(g.OH), KI(g.OW),
                       KI(g.total), KI(g.linear), TEENY__KARG(g.my.a), TEENY__KARG(g.my.b), TEENY__KARG(g.my.d),
                       TEENY__KARG(g.mx.a), TEENY__KARG(g.mx.b), TEENY__KARG(g.mx.d)};
    return launch(ctx, name, k, (int)(sizeof k / sizeof k[0]), g.total);
}

/* One launch per band of rows: a dx element's work-item runs rows * (its
 * columns + 1) + 1 trips, the band's rows chosen by teeny__loop_split. */
teeny_status teeny__resize2d_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    static const char name[] = "resize_backward";
    const teeny_tensor *dy = a->in[TEENY__RESIZE2D_DY];
    teeny_tensor *dx = a->out[TEENY__RESIZE2D_X];
    resize_geom g;
    int64_t rows;
    if (!dx)
        return TEENY_OK;
    int dy_off = teeny__off(dy), dx_off = teeny__off(dx);
    teeny_status st = geom_of(ctx, &a->attrs.resize2d, dx, (int)dx->numel, &g);
    if (st != TEENY_OK)
        return st;
    int64_t span_y = max_span(&g.my, g.linear, g.H, g.OH), span_x = max_span(&g.mx, g.linear, g.W, g.OW);
    if ((st = teeny__loop_split(ctx, name, span_y, 1, span_x + 1, &rows)) != TEENY_OK)
        return st;
    int band_rows = (int)rows;
    for (int first = 0; st == TEENY_OK && first < span_y; first += band_rows) {
        int accumulate = first > 0;
        teeny__karg k[] = {KM(dy->buf), KI(dy_off), KM(dx->buf), KI(dx_off), KI(g.H), KI(g.W), KI(g.OH), KI(g.OW),
                           KI(g.total), KI(g.linear), TEENY__KARG(g.my.a), TEENY__KARG(g.my.b), TEENY__KARG(g.my.d),
                           TEENY__KARG(g.mx.a), TEENY__KARG(g.mx.b), TEENY__KARG(g.mx.d), KI(first),
                           KI(band_rows), KI(accumulate)};
        st = launch(ctx, name, k, (int)(sizeof k / sizeof k[0]), g.total);
    }
    return st;
}

static teeny_status run(teeny_ctx *ctx, teeny__eager *e, const teeny_resize2d_params *p, const teeny__earg *args)
{
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: p is NULL", e->fn);
    e->attrs.resize2d = (teeny__resize2d_attrs){(int)p->mode, (int)p->coord, (int)p->rounding,
                                                {p->size[0], p->size[1]}, {p->scale[0], p->scale[1]}};
    return teeny__eager_run(ctx, e, args, 2);
}

teeny_status teeny_resize2d_forward(teeny_ctx *ctx, const teeny_resize2d_params *p, const teeny_tensor *x,
                                    teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_resize2d_forward", RESIZE2D, resize2d, forward)};
    const teeny__earg args[] = {{"x", x, TEENY__RESIZE2D_X, 0}, {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_resize2d_forward");
    return run(ctx, &e, p, args);
}

teeny_status teeny_resize2d_backward(teeny_ctx *ctx, const teeny_resize2d_params *p, const teeny_tensor *dy,
                                     teeny_tensor *dx)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_resize2d_backward", RESIZE2D, resize2d, backward)};
    const teeny__earg args[] = {{"dy", dy, TEENY__RESIZE2D_DY, 0}, {"dx", dx, TEENY__RESIZE2D_X, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_resize2d_backward");
    return run(ctx, &e, p, args);
}
