/*
 * batchnorm_api.c -- batch normalization's shape inference (the op table's
 * infer slot), the eager functions and teeny_batchnorm_fold. The kernels'
 * host side (plans, launches) is batchnorm.c; the semantics are in its
 * banner.
 */
#include <stdio.h>

#include "../ops.h"

static teeny_status check_eps(teeny_ctx *ctx, float eps)
{
    if (!(eps >= 0.0f) || eps > 1e30f)
        return teeny__error(ctx, TEENY_ERR_ARG, "eps %g must be finite and >= 0", (double)eps);
    return TEENY_OK;
}

/* x [N, C] or [B, C, H, W] -> y of x's shape; params weight (ones), bias
 * (zeros), states running_mean (zeros), running_var (ones), saved
 * save_mean, save_rstd (training only): all [C]. */
teeny_status teeny__batchnorm_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    const teeny__batchnorm_attrs *at = &s->attrs.batchnorm;
    char b[96];
    teeny_status st;
    if (s->n_in != 1 || (x->ndim != 2 && x->ndim != 4) || x->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x has shape %s%s; expected fp32 [N, C] or [B, C, H, W]",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b), x->is_i32 ? " int32" : "");
    if ((st = check_eps(ctx, at->eps)) != TEENY_OK)
        return st;
    if (!(at->momentum >= 0.0f && at->momentum <= 1.0f))
        return teeny__error(ctx, TEENY_ERR_ARG, "momentum %g is outside [0, 1]", (double)at->momentum);
    if (at->act != TEENY_ACT_NONE && at->act != TEENY_ACT_RELU && at->act != TEENY_ACT_SILU)
        return teeny__error(ctx, TEENY_ERR_ARG,
                            "act %d: batch norm fuses TEENY_ACT_NONE, TEENY_ACT_RELU or TEENY_ACT_SILU only "
                            "(add a teeny_graph_activation node for the others)",
                            at->act);
    teeny__shape c = {.ndim = 1, .shape = {x->shape[1]}};
    s->out = *x;
    s->n_param = 2;
    s->param[0] = s->param[1] = c;
    s->param_name[0] = "weight";
    s->param_name[1] = "bias";
    s->param_init[0] = TEENY__INIT_ONES;
    s->param_init[1] = TEENY__INIT_ZEROS;
    s->n_state = 2;
    s->state[0] = s->state[1] = c;
    s->state_name[0] = "running_mean";
    s->state_name[1] = "running_var";
    s->state_init[0] = TEENY__INIT_ZEROS;
    s->state_init[1] = TEENY__INIT_ONES;
    s->n_saved = 2;
    s->saved[0] = s->saved[1] = c;
    s->saved_needs_training = 1;
    s->counts_batches = 1;
    return TEENY_OK;
}

/* The eager functions take every per-channel vector in any shape of C
 * elements, and y (dy, dx) in any shape of x's element count. */
#define VEC TEENY__EA_NUMEL

teeny_status teeny_batchnorm_forward_train(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *weight,
                                           const teeny_tensor *bias, teeny_tensor *running_mean,
                                           teeny_tensor *running_var, float momentum, float eps, teeny_tensor *y,
                                           teeny_tensor *save_mean, teeny_tensor *save_rstd)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_batchnorm_forward_train", BATCHNORM, batchnorm, forward),
                      .attrs.batchnorm = {momentum, eps}, .training = 1};
    const teeny__earg args[] = {{"x", x, TEENY__BATCHNORM_X, 0},
                                {"weight", weight, TEENY__BATCHNORM_WEIGHT, VEC},
                                {"bias", bias, TEENY__BATCHNORM_BIAS, VEC},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT | VEC},
                                {"save_mean", save_mean, TEENY__BATCHNORM_OUT_SAVE_MEAN, TEENY__EA_OUT | VEC},
                                {"save_rstd", save_rstd, TEENY__BATCHNORM_OUT_SAVE_RSTD, TEENY__EA_OUT | VEC},
                                {"running_mean", running_mean, TEENY__BATCHNORM_RUNNING_MEAN, TEENY__EA_UPDATED | VEC},
                                {"running_var", running_var, TEENY__BATCHNORM_RUNNING_VAR, TEENY__EA_UPDATED | VEC}};
    teeny__op_args a;
    EAGER_BEGIN("teeny_batchnorm_forward_train");
    teeny_status st = teeny__eager_check(ctx, &e, args, 8, &a);
    if (st != TEENY_OK)
        return st;
    if (x->numel / x->shape[1] < 2) /* the unbiased variance divides by n - 1 */
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "%s: training needs more than one value per channel (x has %lld per channel)", e.fn,
                            (long long)(x->numel / x->shape[1]));
    return teeny__op_exec(ctx, e.pass, &a);
}

teeny_status teeny_batchnorm_forward_infer(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *weight,
                                           const teeny_tensor *bias, const teeny_tensor *running_mean,
                                           const teeny_tensor *running_var, float eps, teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_batchnorm_forward_infer", BATCHNORM, batchnorm, forward),
                      .attrs.batchnorm = {0.0f, eps}};
    const teeny__earg args[] = {{"x", x, TEENY__BATCHNORM_X, 0},
                                {"weight", weight, TEENY__BATCHNORM_WEIGHT, VEC},
                                {"bias", bias, TEENY__BATCHNORM_BIAS, VEC},
                                {"running_mean", running_mean, TEENY__BATCHNORM_RUNNING_MEAN, VEC},
                                {"running_var", running_var, TEENY__BATCHNORM_RUNNING_VAR, VEC},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT | VEC}};
    EAGER_BEGIN("teeny_batchnorm_forward_infer");
    return teeny__eager_run(ctx, &e, args, 6);
}

/* The statistics go in the slots the mode reads: the saved ones in
 * training, the running ones when frozen. */
static teeny_status backward(teeny_ctx *ctx, const char *fn, int training, const teeny_tensor *x,
                             const teeny_tensor *dy, const teeny_tensor *weight, const teeny_tensor *mean,
                             const char *mean_name, const teeny_tensor *r, const char *r_name, float eps,
                             teeny_tensor *dx, teeny_tensor *dweight, teeny_tensor *dbias)
{
    teeny__eager e = {TEENY__EAGER_OF(fn, BATCHNORM, batchnorm, backward), .attrs.batchnorm = {0.0f, eps},
                      .training = training};
    const teeny__earg args[] = {
        {"x", x, TEENY__BATCHNORM_X, 0},
        {"dy", dy, TEENY__BATCHNORM_DY, VEC},
        {"weight", weight, TEENY__BATCHNORM_WEIGHT, VEC},
        {mean_name, mean, training ? TEENY__BATCHNORM_SAVE_MEAN : TEENY__BATCHNORM_RUNNING_MEAN, VEC},
        {r_name, r, training ? TEENY__BATCHNORM_SAVE_RSTD : TEENY__BATCHNORM_RUNNING_VAR, VEC},
        {"dx", dx, TEENY__BATCHNORM_X, TEENY__EA_OUT | TEENY__EA_OPTIONAL | VEC},
        {"dweight", dweight, TEENY__BATCHNORM_WEIGHT, TEENY__EA_OUT | VEC},
        {"dbias", dbias, TEENY__BATCHNORM_BIAS, TEENY__EA_OUT | VEC}};
    return teeny__eager_run(ctx, &e, args, 8);
}

teeny_status teeny_batchnorm_backward_train(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *dy,
                                            const teeny_tensor *weight, const teeny_tensor *save_mean,
                                            const teeny_tensor *save_rstd, teeny_tensor *dx, teeny_tensor *dweight,
                                            teeny_tensor *dbias)
{
    EAGER_BEGIN("teeny_batchnorm_backward_train");
    return backward(ctx, "teeny_batchnorm_backward_train", 1, x, dy, weight, save_mean, "save_mean", save_rstd,
                    "save_rstd", 0.0f, dx, dweight, dbias);
}

teeny_status teeny_batchnorm_backward_frozen(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *dy,
                                             const teeny_tensor *weight, const teeny_tensor *running_mean,
                                             const teeny_tensor *running_var, float eps, teeny_tensor *dx,
                                             teeny_tensor *dweight, teeny_tensor *dbias)
{
    EAGER_BEGIN("teeny_batchnorm_backward_frozen");
    return backward(ctx, "teeny_batchnorm_backward_frozen", 0, x, dy, weight, running_mean, "running_mean",
                    running_var, "running_var", eps, dx, dweight, dbias);
}

/* Not an op of the table (no graph node, no gradient): a direct launch
 * over C channels, C from weight. */
teeny_status teeny_batchnorm_fold(teeny_ctx *ctx, const teeny_tensor *weight, const teeny_tensor *bias,
                                  const teeny_tensor *running_mean, const teeny_tensor *running_var, float eps,
                                  teeny_tensor *scale, teeny_tensor *shift)
{
    static const char fn[] = "teeny_batchnorm_fold";
    teeny_status st;
    char opt[32];
    cl_kernel k;
    EAGER_BEGIN("teeny_batchnorm_fold");
    if ((st = teeny__check_tensor(ctx, weight, "weight")) != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    int64_t C = weight->numel;
    const teeny_tensor *vecs[] = {bias, running_mean, running_var, scale, shift};
    const char *vec_names[] = {"bias", "running_mean", "running_var", "scale", "shift"};
    for (int i = 0; i < 5; i++)
        if ((st = teeny__check_vector(ctx, vecs[i], vec_names[i], C)) != TEENY_OK)
            return teeny__error(ctx, st, "%s: %s (weight has %lld elements)", fn, teeny_last_error(ctx),
                                (long long)C);
    if ((st = check_eps(ctx, eps)) != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    const teeny_tensor *all[] = {weight, bias, running_mean, running_var, scale, shift};
    const char *all_names[] = {"weight", "bias", "running_mean", "running_var", "scale", "shift"};
    if ((st = teeny__check_disjoint(ctx, fn, all, all_names, 4, 6)) != TEENY_OK)
        return st;
    int c = (int)C, w_off = teeny__off(weight), b_off = teeny__off(bias), m_off = teeny__off(running_mean),
        v_off = teeny__off(running_var), sc_off = teeny__off(scale), sh_off = teeny__off(shift);
    size_t g = (size_t)C, l = 1;
    snprintf(opt, sizeof opt, "-DBN_WG=%d", ctx->work_group_size);
    st = teeny__kernel_get(ctx, "batchnorm", opt, "bn_fold", &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, "bn_fold", sizeof(cl_mem), &weight->buf, sizeof(int), &w_off, sizeof(cl_mem),
                             &bias->buf, sizeof(int), &b_off, sizeof(cl_mem), &running_mean->buf, sizeof(int), &m_off,
                             sizeof(cl_mem), &running_var->buf, sizeof(int), &v_off, sizeof(float), &eps, sizeof(int),
                             &c, sizeof(cl_mem), &scale->buf, sizeof(int), &sc_off, sizeof(cl_mem), &shift->buf,
                             sizeof(int), &sh_off, (size_t)0);
    if (st == TEENY_OK)
        st = teeny__launch(ctx, k, "bn_fold", 1, &g, &l);
    return st;
}
