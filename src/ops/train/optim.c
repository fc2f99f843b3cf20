/*
 * optim.c -- optimizers as device kernels: torch.optim.SGD (momentum,
 * dampening, nesterov, weight decay), Adam (L2 weight decay) and AdamW
 * (decoupled weight decay), with optional clipping of the gradients by
 * their global norm (torch.nn.utils.clip_grad_norm_) computed on the device.
 *
 * A step must not build, create, set arguments or wait (the graph executor
 * replays steps back to back), so teeny_optimizer_create makes everything
 * up front: one kernel object per launch (teeny__kernel_create, released
 * at destroy) with every argument set, the state tensors, a clipping
 * workspace `red` ([0] = scale, then the per-work-group partials of every
 * grad in a fixed layout) and a small device buffer `scal` for the values
 * that change per step (lr, beta1, bias corrections, first-step flag).
 * A step computes those on the host in double, stores them in one slot of
 * a ring the optimizer owns and enqueues a non-blocking write from it;
 * before a slot is reused its previous write must have completed
 * (clGetEventInfo, and clWaitForEvents only while it is still pending).
 *
 * Kernels: cl/optim.cl. Tunable: OPT_WG (reduction work-group size) from
 * ctx->work_group_size; partials per grad tensor at most OPT_MAX_GROUPS
 * (more where a device limits a work-item's loop trips: sumsq_budget).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../ops.h"

#define OPT_RING 8        /* host scalar slots in flight */
#define OPT_NSCAL 8       /* floats per slot; the OPT_* slots of optim.cl */
#define OPT_MAX_GROUPS 64 /* clipping partials per grad tensor */
#define OPT_NAME_CAP 40

enum { S_LR, S_BETA1, S_ONE_MINUS_BETA1, S_STEP_SIZE, S_BC2_SQRT, S_DECAY, S_FIRST };

typedef struct {
    cl_kernel sumsq;             /* clipping only */
    size_t sumsq_global;
    const teeny_tensor *param;   /* borrowed: whose state this is (checkpoints key it by the param's name) */
} opt_launch;

struct teeny_optimizer {
    teeny_ctx *ctx;
    teeny_optim_params p;
    int n;
    opt_launch *launch;
    int n_update;                /* update launches: one per parameter (SGD), per OPT_SLOTS parameters (Adam) */
    cl_kernel *update;
    size_t *update_global;
    int slots;                   /* OPT_SLOTS: parameters per Adam launch */
    cl_kernel clip_scale;
    teeny_tensor *scal, *red;    /* tensors, so the context outlives us */
    int n_state;
    teeny_tensor **state;
    char (*state_names)[OPT_NAME_CAP];
    int wg;
    int64_t rounds_max;          /* clipping: strided rounds one optim_sumsq item may take (sumsq_budget) */
    int64_t steps;
    float ring[OPT_RING][OPT_NSCAL];
    cl_event ring_event[OPT_RING];
};

static const char *kind_name(teeny_optim_kind k)
{
    return k == TEENY_OPTIM_SGD ? "SGD" : k == TEENY_OPTIM_ADAM ? "Adam" : "AdamW";
}

static int bad_nonneg(float v)
{
    return !(v >= 0.0f) || isinf(v);
}

static teeny_status check_params(teeny_ctx *ctx, const teeny_optim_params *p)
{
    const char *fn = "teeny_optimizer_create";
    if (p->kind != TEENY_OPTIM_SGD && p->kind != TEENY_OPTIM_ADAM && p->kind != TEENY_OPTIM_ADAMW)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: unknown optimizer kind %d", fn, (int)p->kind);
    if (bad_nonneg(p->lr))
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: lr %g must be finite and >= 0", fn, (double)p->lr);
    if (bad_nonneg(p->weight_decay))
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: weight_decay %g must be finite and >= 0", fn,
                            (double)p->weight_decay);
    if (bad_nonneg(p->max_grad_norm))
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: max_grad_norm %g must be finite and >= 0 (0: no clipping)", fn,
                            (double)p->max_grad_norm);
    if (p->kind == TEENY_OPTIM_SGD) {
        if (bad_nonneg(p->momentum) || !isfinite(p->dampening))
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: SGD momentum %g must be >= 0 and dampening %g finite", fn,
                                (double)p->momentum, (double)p->dampening);
        if (p->nesterov && (p->momentum <= 0.0f || p->dampening != 0.0f))
            return teeny__error(ctx, TEENY_ERR_ARG,
                                "%s: nesterov momentum needs momentum > 0 and dampening 0 (got %g, %g)", fn,
                                (double)p->momentum, (double)p->dampening);
    } else {
        if (!(p->beta1 >= 0.0f && p->beta1 < 1.0f) || !(p->beta2 >= 0.0f && p->beta2 < 1.0f))
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s betas (%g, %g) must lie in [0, 1)", fn,
                                kind_name(p->kind), (double)p->beta1, (double)p->beta2);
        if (bad_nonneg(p->eps))
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: eps %g must be finite and >= 0", fn, (double)p->eps);
    }
    return TEENY_OK;
}

static teeny_status check_tensors(teeny_ctx *ctx, int n, teeny_tensor *const *params,
                                  const teeny_tensor *const *grads)
{
    char an[32], bn[32];
    teeny_status st;
    for (int i = 0; i < n; i++) {
        snprintf(an, sizeof an, "params[%d]", i);
        snprintf(bn, sizeof bn, "grads[%d]", i);
        if ((st = teeny__check_tensor(ctx, params[i], an)) != TEENY_OK ||
            (st = teeny__check_tensor(ctx, grads[i], bn)) != TEENY_OK ||
            (st = teeny__check_same_numel(ctx, params[i], an, grads[i], bn)) != TEENY_OK)
            return st;
    }
    /* Pairwise overlaps: a grad with any param, two params, two grads
     * (clipping rewrites grads, so a shared grad would be scaled twice). */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (teeny__overlap(grads[i], params[j]))
                return teeny__error(ctx, TEENY_ERR_ARG, "teeny_optimizer_create: grads[%d] overlaps params[%d]", i, j);
            if (j > i && teeny__overlap(params[i], params[j]))
                return teeny__error(ctx, TEENY_ERR_ARG, "teeny_optimizer_create: params[%d] overlaps params[%d]", i,
                                    j);
            if (j > i && teeny__overlap(grads[i], grads[j]))
                return teeny__error(ctx, TEENY_ERR_ARG, "teeny_optimizer_create: grads[%d] overlaps grads[%d]", i, j);
        }
    return TEENY_OK;
}

/* Clipping partials of one grad tensor: a work-group per 8 rounds of its
 * elements, at most OPT_MAX_GROUPS; more where a device's loop budget
 * allows an item fewer rounds (sumsq_budget). */
static int sumsq_groups(const teeny_optimizer *o, int64_t numel)
{
    int64_t g = (numel + (int64_t)o->wg * 8 - 1) / ((int64_t)o->wg * 8);
    int64_t rounds = (numel + o->wg - 1) / o->wg, g_min = (rounds + o->rounds_max - 1) / o->rounds_max;
    g = g < 1 ? 1 : g > OPT_MAX_GROUPS ? OPT_MAX_GROUPS : g;
    return (int)(g < g_min ? g_min : g);
}

/* The loop budget of clipping (teeny__loop_budget), every loop counted as
 * not unrolled with one more trip per entry: an optim_sumsq item takes
 * rounds + 1 trips of its strided loop and a tree of log2(OPT_WG) levels
 * of at most 3 trips, + 1; optim_clip_scale parts/OPT_WG + 1 and the same
 * tree. Sets o->rounds_max; TEENY_ERR_UNSUPPORTED where not one round
 * fits. */
static int64_t tree_trips(int wg)
{
    int64_t tree = 1;
    for (int w = wg; w > 1; w /= 2)
        tree += 3;
    return tree;
}

static teeny_status sumsq_budget(teeny_optimizer *o)
{
    int64_t budget, tree = tree_trips(o->wg);
    teeny_status st = teeny__loop_budget(o->ctx, &budget);
    o->rounds_max = INT64_MAX / 2;
    if (st == TEENY_OK && budget != INT64_MAX) {
        st = teeny__loop_check(o->ctx, "optim_sumsq", tree + 2);
        o->rounds_max = budget - tree - 1;
    }
    return st;
}

/* What state k of each parameter is, with per state tensors per parameter. */
static const char *state_kind(int per, int k)
{
    return per == 1 ? "momentum_buffer" : k == 0 ? "exp_avg" : "exp_avg_sq";
}

static teeny_status make_state(teeny_optimizer *o, teeny_tensor *const *params)
{
    teeny_ctx *ctx = o->ctx;
    int per = o->p.kind == TEENY_OPTIM_SGD ? (o->p.momentum != 0.0f ? 1 : 0) : 2;
    teeny_status st;
    if (!per)
        return TEENY_OK;
    o->state = teeny__calloc((size_t)o->n * per, sizeof *o->state);
    o->state_names = teeny__calloc((size_t)o->n * per, sizeof *o->state_names);
    if (!o->state || !o->state_names)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_optimizer_create: out of host memory for the state");
    for (int i = 0; i < o->n; i++)
        for (int k = 0; k < per; k++) {
            int s = i * per + k;
            snprintf(o->state_names[s], OPT_NAME_CAP, "%s.%d", state_kind(per, k), i);
            if ((st = teeny_tensor_create(ctx, params[i]->ndim, params[i]->shape, &o->state[s])) != TEENY_OK)
                return st;
            o->n_state = s + 1;
            if ((st = teeny_tensor_fill(o->state[s], 0.0f)) != TEENY_OK)
                return st;
        }
    return TEENY_OK;
}

/* One optim_adam_multi launch over params[first .. first + count): slot k
 * owns global indices [b, b + n) of the launch, b a multiple of OPT_WG;
 * the unused slots repeat slot 0's buffers with n = 0 and b = INT_MAX. */
static teeny_status make_adam_launch(teeny_optimizer *o, const char *opt, teeny_tensor *const *params,
                                     const teeny_tensor *const *grads, int first, int count, int u)
{
    enum { PER = 10, COMMON = 8 };
    teeny_ctx *ctx = o->ctx;
    const teeny_optim_params *p = &o->p;
    teeny__karg a[8 * PER + COMMON];
    int ints[8][6], clip = p->max_grad_norm > 0.0f, decoupled = p->kind == TEENY_OPTIM_ADAMW, na = 0;
    float one_minus_beta2 = (float)(1.0 - (double)p->beta2);
    size_t b = 0, wg = (size_t)o->wg;
    teeny_status st = teeny__kernel_create(ctx, "optim", opt, "optim_adam_multi", &o->update[u]);
    for (int k = 0; k < o->slots; k++) {
        int i = first + (k < count ? k : 0);
        const teeny_tensor *pt = params[i], *gt = grads[i], *m = o->state[2 * i], *v = o->state[2 * i + 1];
        int *x = ints[k];
        x[0] = teeny__off(pt), x[1] = teeny__off(gt), x[2] = teeny__off(m), x[3] = teeny__off(v);
        x[4] = k < count ? (int)pt->numel : 0;
        x[5] = k < count ? (int)b : INT_MAX;
        b += k < count ? ((size_t)x[4] + wg - 1) / wg * wg : 0;
        a[na++] = TEENY__KARG_MEM(pt->buf), a[na++] = TEENY__KARG_INT(x[0]);
        a[na++] = TEENY__KARG_MEM(gt->buf), a[na++] = TEENY__KARG_INT(x[1]);
        a[na++] = TEENY__KARG_MEM(m->buf), a[na++] = TEENY__KARG_INT(x[2]);
        a[na++] = TEENY__KARG_MEM(v->buf), a[na++] = TEENY__KARG_INT(x[3]);
        a[na++] = TEENY__KARG_INT(x[4]), a[na++] = TEENY__KARG_INT(x[5]);
    }
    a[na++] = TEENY__KARG(p->beta2), a[na++] = TEENY__KARG(one_minus_beta2), a[na++] = TEENY__KARG(p->eps);
    a[na++] = TEENY__KARG(p->weight_decay), a[na++] = TEENY__KARG_INT(decoupled), a[na++] = TEENY__KARG_INT(clip);
    a[na++] = TEENY__KARG_MEM(o->scal->buf), a[na++] = TEENY__KARG_MEM(o->red->buf);
    o->update_global[u] = b;
    return st == TEENY_OK ? teeny__set_arg_list(ctx, o->update[u], "optim_adam_multi", a, na) : st;
}

/* Adam: consecutive parameters, OPT_SLOTS to a launch, while the launch's
 * global size stays within int (the kernel's index type). */
static teeny_status make_adam_launches(teeny_optimizer *o, const char *opt, teeny_tensor *const *params,
                                       const teeny_tensor *const *grads)
{
    size_t wg = (size_t)o->wg;
    teeny_status st = TEENY_OK;
    for (int first = 0; first < o->n && st == TEENY_OK;) {
        int count = 0;
        size_t span = 0;
        while (first + count < o->n && count < o->slots) {
            size_t need = ((size_t)params[first + count]->numel + wg - 1) / wg * wg;
            if (count > 0 && span + need > (size_t)INT_MAX)
                break;
            span += need;
            count++;
        }
        st = make_adam_launch(o, opt, params, grads, first, count, o->n_update++);
        first += count;
    }
    return st;
}

/* Create every kernel object and set its arguments for good. */
static teeny_status make_launches(teeny_optimizer *o, teeny_tensor *const *params, const teeny_tensor *const *grads)
{
    teeny_ctx *ctx = o->ctx;
    const teeny_optim_params *p = &o->p;
    int clip = p->max_grad_norm > 0.0f;
    char opt[48];
    teeny_status st = TEENY_OK;
    int part = 0;
    snprintf(opt, sizeof opt, "-DOPT_SLOTS=%d -DOPT_WG=%d", o->slots, o->wg);
    for (int i = 0; i < o->n; i++) {
        opt_launch *l = &o->launch[i];
        const teeny_tensor *pt = params[i], *gt = grads[i];
        int p_off = teeny__off(pt), g_off = teeny__off(gt), n = (int)pt->numel;
        size_t wg = (size_t)o->wg;
        l->param = pt;
        if (clip) {
            int groups = sumsq_groups(o, pt->numel), part_off = 1 + part;
            l->sumsq_global = (size_t)groups * wg;
            part += groups;
            if ((st = teeny__kernel_create(ctx, "optim", opt, "optim_sumsq", &l->sumsq)) != TEENY_OK ||
                (st = teeny__set_args(ctx, l->sumsq, "optim_sumsq", sizeof(cl_mem), &gt->buf, sizeof(int), &g_off,
                                      sizeof(int), &n, sizeof(cl_mem), &o->red->buf, sizeof(int), &part_off,
                                      (size_t)0)) != TEENY_OK)
                return st;
        }
        if (p->kind == TEENY_OPTIM_SGD) {
            const teeny_tensor *buf = o->n_state ? o->state[i] : pt; /* unused without momentum */
            int b_off = teeny__off(buf), nesterov = p->nesterov != 0, u = o->n_update++;
            o->update_global[u] = ((size_t)n + wg - 1) / wg * wg;
            st = teeny__kernel_create(ctx, "optim", opt, "optim_sgd", &o->update[u]);
            if (st == TEENY_OK)
                st = teeny__set_args(ctx, o->update[u], "optim_sgd", sizeof(cl_mem), &pt->buf, sizeof(int), &p_off,
                                     sizeof(cl_mem), &gt->buf, sizeof(int), &g_off, sizeof(cl_mem), &buf->buf,
                                     sizeof(int), &b_off, sizeof(int), &n, sizeof(float), &p->momentum,
                                     sizeof(float), &p->dampening, sizeof(float), &p->weight_decay, sizeof(int),
                                     &nesterov, sizeof(int), &clip, sizeof(cl_mem), &o->scal->buf, sizeof(cl_mem),
                                     &o->red->buf, (size_t)0);
            if (st != TEENY_OK)
                return st;
        }
    }
    if (p->kind != TEENY_OPTIM_SGD && (st = make_adam_launches(o, opt, params, grads)) != TEENY_OK)
        return st;
    if (clip) {
        st = teeny__kernel_create(ctx, "optim", opt, "optim_clip_scale", &o->clip_scale);
        if (st == TEENY_OK)
            st = teeny__set_args(ctx, o->clip_scale, "optim_clip_scale", sizeof(cl_mem), &o->red->buf, sizeof(int),
                                 &part, sizeof(float), &p->max_grad_norm, (size_t)0);
    }
    return st;
}

/* Parameters per Adam launch: the profile's optim_slots (src/tune), or
 * fewer: as many of optim_adam_multi's slots (each four buffers, counted
 * as 8-byte pointers, and six ints) as the device's kernel-argument space
 * (CL_DEVICE_MAX_PARAMETER_SIZE, at least 256 bytes on any device) holds
 * beside the eight common arguments; 1 to 8. */
int teeny__optim_adam_slots(const teeny_ctx *ctx)
{
    size_t per = 4 * 8 + 6 * 4, common = 2 * 8 + 6 * 4, have = ctx->caps.param_bytes;
    size_t k = have > common ? (have - common) / per : 1, cap = (size_t)ctx->tune.profile->optim_slots;
    k = k < cap ? k : cap;
    return k < 1 ? 1 : k > 8 ? 8 : (int)k;
}

teeny_status teeny_optimizer_create(teeny_ctx *ctx, const teeny_optim_params *p, int n,
                                    teeny_tensor *const *params, const teeny_tensor *const *grads,
                                    teeny_optimizer **out)
{
    teeny_optimizer *o = NULL;
    teeny_status st;
    int64_t parts = 0;
    if (out)
        *out = NULL;
    if (!ctx)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_optimizer_create: ctx is NULL");
    teeny__clear_error(ctx);
    if (!p || !params || !grads || !out)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_optimizer_create: %s is NULL",
                            !p ? "p" : !params ? "params" : !grads ? "grads" : "out");
    if (n <= 0)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_optimizer_create: n = %d; needs at least one parameter", n);
    if ((st = check_params(ctx, p)) != TEENY_OK || (st = check_tensors(ctx, n, params, grads)) != TEENY_OK)
        return st;

    o = teeny__calloc(1, sizeof *o);
    if (!o)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_optimizer_create: out of host memory");
    o->ctx = ctx;
    o->p = *p;
    o->n = n;
    {
        /* OPT_WG: the device's work-group size, or the largest power of two
         * below it that every kernel of this optimizer takes (the
         * reductions halve spans) */
        const char *names[3];
        char opt[48], fmt[40];
        int n_names = 0;
        o->slots = teeny__optim_adam_slots(ctx);
        snprintf(fmt, sizeof fmt, "-DOPT_SLOTS=%d -DOPT_WG=%%d", o->slots);
        names[n_names++] = p->kind == TEENY_OPTIM_SGD ? "optim_sgd" : "optim_adam_multi";
        if (p->max_grad_norm > 0.0f) {
            names[n_names++] = "optim_sumsq";
            names[n_names++] = "optim_clip_scale";
        }
        if ((st = teeny__fit_halving(ctx, "optim", fmt, names, n_names, ctx->work_group_size,
                                     TEENY__WG_FLOOR, &o->wg, opt, sizeof opt)) != TEENY_OK)
            goto fail;
    }
    o->launch = teeny__calloc((size_t)n, sizeof *o->launch);
    o->update = teeny__calloc((size_t)n, sizeof *o->update);
    o->update_global = teeny__calloc((size_t)n, sizeof *o->update_global);
    if (!o->launch || !o->update || !o->update_global) {
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_optimizer_create: out of host memory");
        goto fail;
    }
    if (p->max_grad_norm > 0.0f) {
        if ((st = sumsq_budget(o)) != TEENY_OK)
            goto fail;
        for (int i = 0; i < n; i++)
            parts += sumsq_groups(o, params[i]->numel);
        if ((st = teeny__loop_check(ctx, "optim_clip_scale", (parts + o->wg - 1) / o->wg + 1 + tree_trips(o->wg))) !=
            TEENY_OK)
            goto fail;
    }
    {
        int64_t scal_shape[1] = {OPT_NSCAL}, red_shape[1] = {1 + parts};
        if ((st = teeny_tensor_create(ctx, 1, scal_shape, &o->scal)) != TEENY_OK ||
            (st = teeny_tensor_create(ctx, 1, red_shape, &o->red)) != TEENY_OK ||
            (st = teeny_tensor_fill(o->red, 1.0f)) != TEENY_OK || (st = make_state(o, params)) != TEENY_OK ||
            (st = make_launches(o, params, grads)) != TEENY_OK)
            goto fail;
    }
    *out = o;
    return TEENY_OK;
fail:
    teeny_optimizer_destroy(o);
    return st;
}

void teeny_optimizer_destroy(teeny_optimizer *o)
{
    if (!o)
        return;
    /* The ring's host memory must outlive its pending writes. A failed wait
     * (only an injected fault, which fires once) is retried. */
    for (int s = 0; s < OPT_RING; s++)
        if (o->ring_event[s]) {
            if (TEENY_CL(clWaitForEvents, 1, &o->ring_event[s]) == TEENY__FAULT_ERR)
                (void)TEENY_CL(clWaitForEvents, 1, &o->ring_event[s]);
            TEENY_CL_RELEASE(clReleaseEvent, o->ring_event[s]);
        }
    if (o->launch)
        for (int i = 0; i < o->n; i++)
            TEENY_CL_RELEASE(clReleaseKernel, o->launch[i].sumsq);
    for (int i = 0; i < o->n_update; i++)
        TEENY_CL_RELEASE(clReleaseKernel, o->update[i]);
    TEENY_CL_RELEASE(clReleaseKernel, o->clip_scale);
    for (int s = 0; s < o->n_state; s++)
        teeny_tensor_destroy(o->state[s]);
    TEENY__FREE_ALL(o->state, o->state_names, o->launch, o->update, o->update_global);
    teeny_tensor_destroy(o->scal);
    teeny_tensor_destroy(o->red); /* last: may release the context */
    teeny__free(o);
}

/* Make ring slot s free for reuse: its previous write must be done. */
static teeny_status slot_acquire(teeny_optimizer *o, int s)
{
    teeny_ctx *ctx = o->ctx;
    teeny_status st = TEENY_OK;
    cl_int status;
    if (!o->ring_event[s])
        return TEENY_OK;
    TEENY_CL_TRY(clGetEventInfo, o->ring_event[s], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    if (status > CL_COMPLETE) /* queued, submitted or running: the host ran ahead */
        TEENY_CL_TRY(clWaitForEvents, 1, &o->ring_event[s]);
    else if (status < 0)
        st = teeny__error(ctx, TEENY_ERR_OPENCL, "teeny_optimizer_step: an earlier scalar write failed: %s (%d)",
                          teeny__cl_error_name(status), (int)status);
    TEENY_CL_RELEASE(clReleaseEvent, o->ring_event[s]);
    o->ring_event[s] = NULL;
cleanup:
    return st;
}

teeny_status teeny_optimizer_step(teeny_optimizer *o, float lr, float beta1)
{
    teeny_ctx *ctx;
    teeny_status st = TEENY_OK;
    const teeny_optim_params *p;
    int64_t t;
    int s;
    float *slot;
    size_t wg;
    if (!o)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_optimizer_step: optimizer is NULL");
    ctx = o->ctx;
    p = &o->p;
    teeny__clear_error(ctx);
    if (bad_nonneg(lr))
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_optimizer_step: lr %g must be finite and >= 0", (double)lr);
    if (beta1 < 0.0f)
        beta1 = p->beta1;
    if (!(beta1 < 1.0f))
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_optimizer_step: beta1 %g must lie in [0, 1)", (double)beta1);
    if (ctx->prog.rec)
        return teeny__error(ctx, TEENY_ERR_STATE,
                            "teeny_optimizer_step: cannot be recorded into a graph; call it at run time");
    /* the step count is an int64 (a checkpoint may carry any value): at
     * its maximum there is no next step to count, so refuse rather than
     * wrap (signed overflow) */
    if (o->steps == INT64_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "teeny_optimizer_step: the step counter is at its maximum %lld",
                            (long long)o->steps);
    t = o->steps + 1;
    s = (int)(t % OPT_RING);
    if ((st = slot_acquire(o, s)) != TEENY_OK)
        return st;
    slot = o->ring[s];
    memset(slot, 0, sizeof o->ring[s]);
    slot[S_LR] = lr;
    slot[S_BETA1] = beta1;
    slot[S_ONE_MINUS_BETA1] = (float)(1.0 - (double)beta1);
    slot[S_STEP_SIZE] = (float)((double)lr / (1.0 - pow((double)beta1, (double)t)));
    slot[S_BC2_SQRT] = (float)sqrt(1.0 - pow((double)p->beta2, (double)t));
    slot[S_DECAY] = (float)(1.0 - (double)lr * (double)p->weight_decay);
    slot[S_FIRST] = o->steps == 0 ? 1.0f : 0.0f;
    TEENY_CL_TRY(clEnqueueWriteBuffer, ctx->queue, o->scal->buf, CL_FALSE, o->scal->offset * 4, sizeof o->ring[s],
                 slot, 0, NULL, &o->ring_event[s]);
    wg = (size_t)o->wg;
    if (o->clip_scale) {
        for (int i = 0; i < o->n; i++)
            if ((st = teeny__launch(ctx, o->launch[i].sumsq, "optim_sumsq", 1, &o->launch[i].sumsq_global, &wg)) !=
                TEENY_OK)
                return st;
        if ((st = teeny__launch(ctx, o->clip_scale, "optim_clip_scale", 1, &wg, &wg)) != TEENY_OK)
            return st;
    }
    for (int i = 0; i < o->n_update; i++) {
        const char *name = p->kind == TEENY_OPTIM_SGD ? "optim_sgd" : "optim_adam_multi";
        if ((st = teeny__launch(ctx, o->update[i], name, 1, &o->update_global[i], &wg)) != TEENY_OK)
            return st;
    }
    o->steps = t;
cleanup:
    return st;
}

int64_t teeny_optimizer_steps(const teeny_optimizer *o)
{
    return o ? o->steps : -1;
}

teeny_status teeny_optimizer_set_steps(teeny_optimizer *o, int64_t steps)
{
    if (!o)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_optimizer_set_steps: optimizer is NULL");
    teeny__clear_error(o->ctx);
    if (steps < 0)
        return teeny__error(o->ctx, TEENY_ERR_ARG, "teeny_optimizer_set_steps: steps %lld must be >= 0",
                            (long long)steps);
    o->steps = steps;
    return TEENY_OK;
}

int teeny_optimizer_state_count(const teeny_optimizer *o)
{
    return o ? o->n_state : 0;
}

teeny_status teeny_optimizer_state(const teeny_optimizer *o, int i, const char **name, teeny_tensor **t)
{
    if (!o)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_optimizer_state: optimizer is NULL");
    teeny__clear_error(o->ctx);
    if (i < 0 || i >= o->n_state)
        return teeny__error(o->ctx, TEENY_ERR_ARG, "teeny_optimizer_state: index %d outside [0, %d)", i, o->n_state);
    if (name)
        *name = o->state_names[i];
    if (t)
        *t = o->state[i];
    return TEENY_OK;
}

teeny_status teeny__optimizer_state_param(const teeny_optimizer *o, int i, const teeny_tensor **param,
                                          int *param_index, const char **kind)
{
    if (!o || i < 0 || i >= o->n_state)
        return teeny__error(o ? o->ctx : NULL, TEENY_ERR_ARG, "optimizer state %d does not exist", i);
    int per = o->n_state / o->n;
    *param_index = i / per;
    *param = o->launch[i / per].param;
    *kind = state_kind(per, i % per);
    return TEENY_OK;
}
