/*
 * norm.c -- softmax / log-softmax along any axis and layer normalization
 * over the trailing axes from `axis` on (ONNX's LayerNormalization,
 * PyTorch's LayerNorm), with gradients. Kernels: cl/norm.cl, one
 * work-item per line (row), loops in order; a line longer than the
 * device's loop budget allows is TEENY_ERR_UNSUPPORTED before anything
 * runs.
 *
 * Op-table entries (slots TEENY__SOFTMAX_*, TEENY__LAYERNORM_*: ops.h):
 *   softmax:   attrs.softmax = {axis, log, masked_zero}; forward in = [x],
 *              out = [y]; backward in = [x, y, dy], out = [dx] (from y:
 *              masked_zero's zero lines give dx = 0 by the same formula)
 *   layernorm: attrs.layernorm = {axis, eps, has_bias}; params weight
 *              (ones) and, with has_bias, bias (zeros), both x's shape from
 *              axis on; saved mean, rstd (x's shape before axis, [1] when
 *              axis is 0; training only); forward in = [x, weight, bias],
 *              out = [y, mean, rstd] (mean/rstd may be NULL); backward in
 *              = [x, weight, bias, y, mean, rstd, dy], out = [dx, dweight,
 *              dbias] (dweight/dbias: column sums through the strided sum)
 */
#include "../ops.h"

static int64_t prod(const int64_t *v, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= v[i];
    return p;
}

/* A line of n elements looped over `passes` times fits the loop budget. */
static teeny_status fits(teeny_ctx *ctx, const char *what, int64_t n, int passes)
{
    int64_t budget;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    if (st == TEENY_OK && (n + 1) * passes > budget)
        st = teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "%s of %lld elements: %s ends a kernel's loops after %lld", what,
                          (long long)n, ctx->info.device_name, (long long)ctx->prog.loop_limit);
    return st;
}

/* ---- softmax ---- */

static teeny_status sm_run(teeny_ctx *ctx, int backward, const teeny__softmax_attrs *at, const teeny_tensor *a,
                           const teeny_tensor *b, teeny_tensor *out)
{
    const char *name = backward ? "sm_backward" : "sm_forward";
    int L = (int)out->shape[at->axis], inner = (int)prod(out->shape, at->axis + 1, out->ndim);
    int lines = (int)(out->numel / L), a_off = teeny__off(a), o_off = teeny__off(out), log_out = at->log;
    int masked_zero = at->masked_zero;
    cl_kernel k;
    teeny_status st = fits(ctx, "a softmax line", L, backward ? 2 : 3);
    if (st == TEENY_OK)
        st = teeny__kernel_get(ctx, "norm", "", name, &k);
    if (st == TEENY_OK && !backward)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &a->buf, sizeof(int), &a_off, sizeof(cl_mem), &out->buf,
                             sizeof(int), &o_off, sizeof(int), &L, sizeof(int), &inner, sizeof(int), &lines,
                             sizeof(int), &log_out, sizeof(int), &masked_zero, (size_t)0);
    else if (st == TEENY_OK) {
        int b_off = teeny__off(b);
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &a->buf, sizeof(int), &a_off, sizeof(cl_mem), &b->buf,
                             sizeof(int), &b_off, sizeof(cl_mem), &out->buf, sizeof(int), &o_off, sizeof(int), &L,
                             sizeof(int), &inner, sizeof(int), &lines, sizeof(int), &log_out, (size_t)0);
    }
    return st == TEENY_OK ? teeny__launch_1d(ctx, k, name, (size_t)lines) : st;
}

teeny_status teeny__softmax_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    return sm_run(ctx, 0, &a->attrs.softmax, a->in[TEENY__SOFTMAX_X], NULL, a->out[TEENY__OUT_VALUE]);
}

teeny_status teeny__softmax_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny_tensor *dx = a->out[TEENY__SOFTMAX_X];
    if (!dx)
        return TEENY_OK;
    return sm_run(ctx, 1, &a->attrs.softmax, a->in[TEENY__SOFTMAX_Y], a->in[TEENY__SOFTMAX_DY], dx);
}

teeny_status teeny__softmax_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    char b[96];
    if (s->n_in != 1 || x->is_i32 || x->ndim < 1)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x has shape %s; expected fp32 of rank 1..5",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b));
    if (s->attrs.softmax.axis < 0 || s->attrs.softmax.axis >= x->ndim || (s->attrs.softmax.log & ~1))
        return teeny__error(ctx, TEENY_ERR_ARG, "axis %d is not one of x's %d, or log %d not 0 or 1",
                            s->attrs.softmax.axis, x->ndim, s->attrs.softmax.log);
    if ((s->attrs.softmax.masked_zero & ~1) || (s->attrs.softmax.masked_zero && s->attrs.softmax.log))
        return teeny__error(ctx, TEENY_ERR_ARG, "masked_zero %d is not 0 or 1, or comes with log softmax",
                            s->attrs.softmax.masked_zero);
    s->out = *x;
    s->n_param = s->n_state = s->n_saved = 0;
    return TEENY_OK;
}

/* ---- layer norm ---- */

teeny_status teeny__layernorm_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    static const char name[] = "ln_forward";
    const teeny_tensor *x = a->in[TEENY__LAYERNORM_X], *w = a->in[TEENY__LAYERNORM_WEIGHT],
                       *b = a->in[TEENY__LAYERNORM_BIAS];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE], *mean = a->out[TEENY__LAYERNORM_OUT_MEAN],
                 *rstd = a->out[TEENY__LAYERNORM_OUT_RSTD];
    int N = (int)w->numel, M = (int)(x->numel / N), has_b = b != NULL, has_saved = mean && rstd;
    int x_off = teeny__off(x), w_off = teeny__off(w), b_off = has_b ? teeny__off(b) : 0, y_off = teeny__off(y);
    int m_off = has_saved ? teeny__off(mean) : 0, r_off = has_saved ? teeny__off(rstd) : 0;
    cl_mem b_buf = has_b ? b->buf : w->buf, m_buf = has_saved ? mean->buf : y->buf, r_buf = has_saved ? rstd->buf : y->buf;
    float eps = a->attrs.layernorm.eps;
    cl_kernel k;
    teeny_status st = fits(ctx, "a layer-norm row", N, 3);
    if (st == TEENY_OK)
        st = teeny__kernel_get(ctx, "norm", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(cl_mem), &w->buf,
                             sizeof(int), &w_off, sizeof(cl_mem), &b_buf, sizeof(int), &b_off, sizeof(int), &has_b,
                             sizeof(cl_mem), &y->buf, sizeof(int), &y_off, sizeof(cl_mem), &m_buf, sizeof(int), &m_off,
                             sizeof(cl_mem), &r_buf, sizeof(int), &r_off, sizeof(int), &has_saved, sizeof(int), &M,
                             sizeof(int), &N, sizeof(float), &eps, (size_t)0);
    return st == TEENY_OK ? teeny__launch_1d(ctx, k, name, (size_t)M) : st;
}

/* dx per row; dweight = column sums of dy xhat, dbias of dy (strided.c). */
teeny_status teeny__layernorm_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__LAYERNORM_X], *w = a->in[TEENY__LAYERNORM_WEIGHT],
                       *mean = a->in[TEENY__LAYERNORM_MEAN], *rstd = a->in[TEENY__LAYERNORM_RSTD],
                       *dy = a->in[TEENY__LAYERNORM_DY];
    teeny_tensor *dx = a->out[TEENY__LAYERNORM_X], *dw = a->out[TEENY__LAYERNORM_WEIGHT],
                 *db = a->out[TEENY__LAYERNORM_BIAS];
    int N = (int)w->numel, M = (int)(x->numel / N), total = (int)x->numel;
    int x_off = teeny__off(x), w_off = teeny__off(w), m_off = teeny__off(mean), r_off = teeny__off(rstd),
        dy_off = teeny__off(dy);
    int64_t dims[2] = {M, N}, strides[2] = {N, 1};
    cl_kernel k;
    teeny_status st = fits(ctx, "a layer-norm row", N, 2);
    if (st == TEENY_OK && dx && (st = teeny__kernel_get(ctx, "norm", "", "ln_backward_dx", &k)) == TEENY_OK) {
        int dx_off = teeny__off(dx);
        st = teeny__set_args(ctx, k, "ln_backward_dx", sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(cl_mem),
                             &w->buf, sizeof(int), &w_off, sizeof(cl_mem), &dy->buf, sizeof(int), &dy_off,
                             sizeof(cl_mem), &mean->buf, sizeof(int), &m_off, sizeof(cl_mem), &rstd->buf, sizeof(int),
                             &r_off, sizeof(cl_mem), &dx->buf, sizeof(int), &dx_off, sizeof(int), &M, sizeof(int), &N,
                             (size_t)0);
        if (st == TEENY_OK)
            st = teeny__launch_1d(ctx, k, "ln_backward_dx", (size_t)M);
    }
    if (st == TEENY_OK && dw) {
        cl_mem t;
        if ((st = teeny__scratch(ctx, (size_t)total * sizeof(float), &t)) == TEENY_OK &&
            (st = teeny__kernel_get(ctx, "norm", "", "ln_dy_xhat", &k)) == TEENY_OK)
            st = teeny__set_args(ctx, k, "ln_dy_xhat", sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(cl_mem),
                                 &dy->buf, sizeof(int), &dy_off, sizeof(cl_mem), &mean->buf, sizeof(int), &m_off,
                                 sizeof(cl_mem), &rstd->buf, sizeof(int), &r_off, sizeof(cl_mem), &t, sizeof(int), &N,
                                 sizeof(int), &total, (size_t)0);
        if (st == TEENY_OK)
            st = teeny__launch_1d(ctx, k, "ln_dy_xhat", (size_t)total);
        if (st == TEENY_OK)
            st = teeny__st_reduce(ctx, t, 0, 2, dims, strides, 1u, 1.0f, dw->buf, teeny__off(dw));
    }
    if (st == TEENY_OK && db)
        st = teeny__st_reduce(ctx, dy->buf, dy_off, 2, dims, strides, 1u, 1.0f, db->buf, teeny__off(db));
    return st;
}

/* x fp32 of rank 1..5, axis in [0, rank); params of x's shape from axis
 * on; saved mean/rstd of x's shape before it ([1] for axis 0). */
teeny_status teeny__layernorm_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    const teeny__layernorm_attrs *at = &s->attrs.layernorm;
    char b[96];
    if (s->n_in != 1 || x->is_i32 || x->ndim < 1)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x has shape %s; expected fp32 of rank 1..5",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b));
    if (at->axis < 0 || at->axis >= x->ndim || !(at->eps >= 0.0f) || (at->has_bias & ~1))
        return teeny__error(ctx, TEENY_ERR_ARG, "axis %d is not one of x's %d, eps %g is negative or NaN, or has_bias "
                            "%d not 0 or 1", at->axis, x->ndim, (double)at->eps, at->has_bias);
    s->out = *x;
    s->n_param = at->has_bias ? 2 : 1;
    s->param[0] = (teeny__shape){.ndim = x->ndim - at->axis};
    for (int d = at->axis; d < x->ndim; d++)
        s->param[0].shape[d - at->axis] = x->shape[d];
    s->param[1] = s->param[0];
    s->param_name[0] = "weight";
    s->param_name[1] = "bias";
    s->param_init[0] = TEENY__INIT_ONES;
    s->param_init[1] = TEENY__INIT_ZEROS;
    s->n_state = 0;
    s->n_saved = 2;
    s->saved[0] = (teeny__shape){.ndim = at->axis ? at->axis : 1, .shape = {1}};
    for (int d = 0; d < at->axis; d++)
        s->saved[0].shape[d] = x->shape[d];
    s->saved[1] = s->saved[0];
    s->saved_needs_training = 1;
    return TEENY_OK;
}

/* ---- the eager API ---- */

teeny_status teeny_softmax(teeny_ctx *ctx, int axis, int log, const teeny_tensor *x, teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_softmax", SOFTMAX, softmax, forward), .attrs.softmax = {axis, log, 0}};
    const teeny__earg args[] = {{"x", x, TEENY__SOFTMAX_X, 0},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT | TEENY__EA_INPLACE}};
    EAGER_BEGIN("teeny_softmax");
    return teeny__eager_run(ctx, &e, args, 2);
}

teeny_status teeny_softmax_ex(teeny_ctx *ctx, const teeny_softmax_params *p, const teeny_tensor *x, teeny_tensor *y)
{
    int rank = x ? teeny_tensor_ndim(x) : 0;
    teeny__eager e = {TEENY__EAGER_OF("teeny_softmax_ex", SOFTMAX, softmax, forward)};
    const teeny__earg args[] = {{"x", x, TEENY__SOFTMAX_X, 0},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT | TEENY__EA_INPLACE}};
    EAGER_BEGIN("teeny_softmax_ex");
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_softmax_ex: p is NULL");
    e.attrs.softmax = (teeny__softmax_attrs){p->axis < 0 && p->axis >= -rank ? p->axis + rank : p->axis, p->log,
                                             p->masked_zero};
    return teeny__eager_run(ctx, &e, args, 2);
}

teeny_status teeny_softmax_backward(teeny_ctx *ctx, int axis, int log, const teeny_tensor *y, const teeny_tensor *dy,
                                    teeny_tensor *dx)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_softmax_backward", SOFTMAX, softmax, backward),
                      .attrs.softmax = {axis, log, 0}};
    const teeny__earg args[] = {{"y", y, TEENY__SOFTMAX_Y, 0},
                                {"dy", dy, TEENY__SOFTMAX_DY, 0},
                                {"dx", dx, TEENY__SOFTMAX_X, TEENY__EA_OUT | TEENY__EA_INPLACE}};
    EAGER_BEGIN("teeny_softmax_backward");
    return teeny__eager_run(ctx, &e, args, 3);
}

teeny_status teeny_layernorm_forward(teeny_ctx *ctx, int axis, float eps, const teeny_tensor *x,
                                     const teeny_tensor *weight, const teeny_tensor *bias, teeny_tensor *y,
                                     teeny_tensor *mean, teeny_tensor *rstd)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_layernorm_forward", LAYERNORM, layernorm, forward),
                      .attrs.layernorm = {axis, eps, bias != NULL}};
    const teeny__earg args[] = {{"x", x, TEENY__LAYERNORM_X, 0},
                                {"weight", weight, TEENY__LAYERNORM_WEIGHT, 0},
                                {"bias", bias, TEENY__LAYERNORM_BIAS, TEENY__EA_OPTIONAL},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT},
                                {"mean", mean, TEENY__LAYERNORM_OUT_MEAN, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"rstd", rstd, TEENY__LAYERNORM_OUT_RSTD, TEENY__EA_OUT | TEENY__EA_OPTIONAL}};
    EAGER_BEGIN("teeny_layernorm_forward");
    if (!mean != !rstd)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_layernorm_forward: mean and rstd are both given or both NULL");
    return teeny__eager_run(ctx, &e, args, 6);
}

teeny_status teeny_layernorm_backward(teeny_ctx *ctx, int axis, const teeny_tensor *x, const teeny_tensor *weight,
                                      const teeny_tensor *mean, const teeny_tensor *rstd, const teeny_tensor *dy,
                                      teeny_tensor *dx, teeny_tensor *dweight, teeny_tensor *dbias)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_layernorm_backward", LAYERNORM, layernorm, backward),
                      .attrs.layernorm = {axis, 0.0f, dbias != NULL}, .training = 1};
    const teeny__earg args[] = {{"x", x, TEENY__LAYERNORM_X, 0},
                                {"weight", weight, TEENY__LAYERNORM_WEIGHT, 0},
                                {"mean", mean, TEENY__LAYERNORM_MEAN, 0},
                                {"rstd", rstd, TEENY__LAYERNORM_RSTD, 0},
                                {"dy", dy, TEENY__LAYERNORM_DY, 0},
                                {"dx", dx, TEENY__LAYERNORM_X, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"dweight", dweight, TEENY__LAYERNORM_WEIGHT, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"dbias", dbias, TEENY__LAYERNORM_BIAS, TEENY__EA_OUT | TEENY__EA_OPTIONAL}};
    EAGER_BEGIN("teeny_layernorm_backward");
    return teeny__eager_run(ctx, &e, args, 8);
}
