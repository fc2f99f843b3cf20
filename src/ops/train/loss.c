/*
 * loss.c -- softmax cross-entropy with its gradient (teeny_ce_params: class
 * weights, ignore_index, reduction mean / sum / none; zeroed: the plain
 * mean), and per-row argmax for accuracy counts. logits [N, K] row-major
 * fp32 (or [N, K, d1, ...]: rows of stride D = d1 * ..., ce_dims), labels
 * int32 [N] ([N, d1, ...]), weights [K] (optional), loss [1] (the labels'
 * shape for none), probs of the logits' shape.
 *
 * Kernels: cl/loss.cl. One work-group per row computes the row's
 * softmax and loss; one more work-group takes the mean in a fixed order
 * (per-row losses live in the context's workspace; for none they are the
 * output). The backward of a weighted mean runs ce_mean once more for the
 * sum of the weights. Where a device limits
 * a work-item's loop trips, the mean's loop over rows and argmax's scan of
 * a row run in launches over segments (forward_budget, teeny_argmax_rows). Labels are never
 * checked on the host (a host sync); a bad label (not ignore_index) makes
 * the loss NaN.
 * Tunable: CE_WG, the reduction work-group size (ctx->work_group_size).
 *
 * Op-table entry (slots TEENY__SOFTMAX_CE_*, ops.h; attrs softmax_ce):
 * inputs logits [N, K], labels (int32 [N]; no gradient) and optional
 * weights [K] (a gradient asked of them is zero); value loss [1] ([N]);
 * saved probs [N, K] (training only; without it the probabilities go to
 * the workspace).
 *   forward:  in  = [logits, labels, weights]          out = [loss, probs]
 *   backward: in  = [logits, labels, weights, loss, probs, dloss]
 *             out = [dlogits, dlabels (ignored), dweights (zeros)]
 */
#include <stdio.h>
#include <string.h>

#include "../ops.h"

#define CE_SEG_FIRST 1 /* as cl/loss.cl */
#define CE_SEG_LAST 2
#define CE_WSUM 3 /* ce_mean's mode: the sum of the weights alone */

static int log2_of(int wg)
{
    int l = 0;
    while ((1 << l) < wg)
        l++;
    return l;
}

/* The loop budget (teeny__loop_budget) of the forward, every loop counted
 * as not unrolled with one more trip per entry. ce_forward_rows: three
 * strided passes over a row (K/wg + 1 each) and two trees (log2(wg) + 1):
 * a row too long for that is TEENY_ERR_UNSUPPORTED (on Mesa's llvmpipe,
 * whose compiler gives kernels with barriers 32-item work-groups, rows of
 * more than about 349000 classes). ce_mean: N/wg rounds + 1 and a
 * tree; where that passes the budget, launches over segments of *per
 * rounds (*per < rounds), the items' sums carried in workspace. */
static teeny_status forward_budget(teeny_ctx *ctx, int N, int K, int wg, int64_t *per, int64_t *rounds)
{
    int64_t row = 3 * (((int64_t)K + wg - 1) / wg + 1) + 2 * ((int64_t)log2_of(wg) + 1);
    teeny_status st = teeny__loop_check(ctx, "ce_forward_rows", row);
    *rounds = ((int64_t)N + wg - 1) / wg;
    return st == TEENY_OK ? teeny__loop_split(ctx, "ce_mean", *rounds, log2_of(wg) + 2, 1, per) : st;
}

/* Scores [N, K, d1, ...] as cl/loss.cl's rows: *rows = N * D, *K, *D the
 * product of the dimensions past the classes (1 for [N, K]). */
static void ce_dims(const teeny_tensor *x, int *rows, int *K, int *D)
{
    int64_t d = 1;
    for (int i = 2; i < x->ndim; i++)
        d *= x->shape[i];
    *rows = (int)(x->shape[0] * d);
    *K = (int)x->shape[1];
    *D = (int)d;
}

/* The weights' and ignore_index's kernel arguments (cl/loss.cl, ce_weight). */
typedef struct {
    cl_mem w;
    int w_off, has_w, has_ii, ii;
} ce_wargs;

static ce_wargs wargs_of(const teeny_tensor *weights, const teeny_tensor *stand_in, const teeny__softmax_ce_attrs *at)
{
    return (ce_wargs){weights ? weights->buf : stand_in->buf, weights ? teeny__off(weights) : 0, weights != NULL,
                      at->has_ignore, at->ignore_index};
}

/* ce_mean's launches over rows (segments of per rounds where the device
 * limits loop trips): out[o_off] = the reduction `mode` (cl/loss.cl). */
static teeny_status ce_reduce(teeny_ctx *ctx, const char *opt, int wg, int64_t per, int64_t rounds, cl_mem rl,
                              int rl_off, const teeny_tensor *labels, int K, const ce_wargs *w, int mode, int N,
                              cl_mem out, int o_off, cl_mem carry)
{
    teeny_status st = TEENY_OK;
    int lab_off = teeny__off(labels);
    cl_kernel k;
    for (int64_t r = 0; (r == 0 || r < rounds) && st == TEENY_OK; r += per) {
        int i_begin = (int)(r * wg), i_end = r + per >= rounds ? N : (int)((r + per) * wg);
        int seg = (r == 0 ? CE_SEG_FIRST : 0) | (r + per >= rounds ? CE_SEG_LAST : 0);
        st = teeny__kernel_get(ctx, "loss", opt, "ce_mean", &k);
        if (st == TEENY_OK)
            st = teeny__set_args(ctx, k, "ce_mean", sizeof(cl_mem), &rl, sizeof(int), &rl_off, sizeof(cl_mem),
                                 &labels->buf, sizeof(int), &lab_off, sizeof(int), &K, sizeof(cl_mem), &w->w,
                                 sizeof(int), &w->w_off, sizeof(int), &w->has_w, sizeof(int), &w->has_ii,
                                 sizeof(int), &w->ii, sizeof(int), &mode, sizeof(int), &N, sizeof(cl_mem), &out,
                                 sizeof(int), &o_off, sizeof(int), &i_begin, sizeof(int), &i_end, sizeof(int), &seg,
                                 sizeof(cl_mem), &carry, (size_t)0);
        if (st == TEENY_OK) {
            size_t global = (size_t)wg, local = (size_t)wg;
            st = teeny__launch(ctx, k, "ce_mean", 1, &global, &local);
        }
    }
    return st;
}

/* CE_WG (the device's work-group size, or the largest power of two below
 * it both reductions take: they halve spans), its build options, the
 * budget's split of ce_mean and its carry (2 * wg floats; scratch, a
 * stand-in, when one launch does). */
static teeny_status ce_setup(teeny_ctx *ctx, int N, int K, int *wg, char *opt, size_t cap, int64_t *per,
                             int64_t *rounds, cl_mem stand_in, cl_mem *carry)
{
    static const char *const names[] = {"ce_forward_rows", "ce_mean"};
    teeny_status st = teeny__fit_halving(ctx, "loss", "-DCE_WG=%d", names, 2, ctx->work_group_size, TEENY__WG_FLOOR,
                                         wg, opt, cap);
    if (st == TEENY_OK)
        st = forward_budget(ctx, N, K, *wg, per, rounds);
    *carry = stand_in;
    if (st == TEENY_OK && *per < *rounds)
        st = teeny__scratch(ctx, (size_t)*wg * 2 * sizeof(float), carry);
    return st;
}

teeny_status teeny__softmax_ce_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *logits = a->in[TEENY__SOFTMAX_CE_LOGITS], *labels = a->in[TEENY__SOFTMAX_CE_LABELS];
    teeny_tensor *loss = a->out[TEENY__OUT_VALUE], *probs = a->out[TEENY__SOFTMAX_CE_OUT_PROBS];
    const teeny__softmax_ce_attrs *at = &a->attrs.softmax_ce;
    ce_wargs w = wargs_of(a->in[TEENY__SOFTMAX_CE_WEIGHTS], logits, at);
    int N, K, D, wg, none = at->reduction == TEENY_REDUCTION_NONE;
    int l_off = teeny__off(logits), lab_off = teeny__off(labels), loss_off = teeny__off(loss);
    ce_dims(logits, &N, &K, &D);
    /* workspace: per-row losses (none: loss itself), then the
     * probabilities when probs is NULL */
    size_t ws = (none ? 0 : (size_t)N) + (probs ? 0 : (size_t)N * (size_t)K);
    int rl_off = none ? loss_off : 0, p_off = probs ? teeny__off(probs) : (none ? 0 : N);
    char opt[32];
    cl_mem scratch = NULL, probs_buf, carry = NULL, rl;
    cl_kernel k;
    int64_t per, rounds;
    teeny_status st = teeny__scratch(ctx, (ws ? ws : 1) * sizeof(float), &scratch);
    if (st == TEENY_OK)
        st = ce_setup(ctx, N, K, &wg, opt, sizeof opt, &per, &rounds, scratch, &carry);
    if (st != TEENY_OK)
        return st;
    probs_buf = probs ? probs->buf : scratch;
    rl = none ? loss->buf : scratch;
    st = teeny__kernel_get(ctx, "loss", opt, "ce_forward_rows", &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, "ce_forward_rows", sizeof(cl_mem), &logits->buf, sizeof(int), &l_off,
                             sizeof(cl_mem), &labels->buf, sizeof(int), &lab_off, sizeof(int), &K, sizeof(int), &D,
                             sizeof(cl_mem), &w.w, sizeof(int), &w.w_off, sizeof(int), &w.has_w, sizeof(int), &w.has_ii, sizeof(int),
                             &w.ii, sizeof(cl_mem), &probs_buf, sizeof(int), &p_off, sizeof(cl_mem), &rl, sizeof(int),
                             &rl_off, (size_t)0);
    if (st == TEENY_OK) {
        size_t global = (size_t)wg * (size_t)N, local = (size_t)wg;
        st = teeny__launch(ctx, k, "ce_forward_rows", 1, &global, &local);
    }
    if (st == TEENY_OK && !none)
        st = ce_reduce(ctx, opt, wg, per, rounds, scratch, 0, labels, K, &w, at->reduction, N, loss->buf, loss_off,
                       carry);
    return st;
}

teeny_status teeny__softmax_ce_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *labels = a->in[TEENY__SOFTMAX_CE_LABELS], *probs = a->in[TEENY__SOFTMAX_CE_PROBS],
                       *dloss = a->in[TEENY__SOFTMAX_CE_DLOSS];
    teeny_tensor *dlogits = a->out[TEENY__SOFTMAX_CE_LOGITS], *dw = a->out[TEENY__SOFTMAX_CE_WEIGHTS];
    const teeny__softmax_ce_attrs *at = &a->attrs.softmax_ce;
    ce_wargs w = wargs_of(a->in[TEENY__SOFTMAX_CE_WEIGHTS], probs, at);
    int N, K, D, wg;
    int p_off = teeny__off(probs), lab_off = teeny__off(labels), dl_off = teeny__off(dloss),
        d_off = dlogits ? teeny__off(dlogits) : 0, dl_step = at->reduction == TEENY_REDUCTION_NONE;
    /* MEAN divides by the sum of the weights: N without weights and
     * ignore_index, else ce_mean's CE_WSUM into workspace */
    int has_denom = at->reduction == TEENY_REDUCTION_MEAN && (w.has_w || w.has_ii), den_off = 0;
    float den;
    cl_mem denom = probs->buf, carry;
    char opt[32];
    int64_t per, rounds;
    cl_kernel k;
    teeny_status st = TEENY_OK;
    if (dw) /* asked where parameters reach the weights: refused when the graph records its backward */
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "softmax_cross_entropy: no gradient with respect to the class "
                            "weights (as PyTorch); give them as a constant or an input");
    ce_dims(probs, &N, &K, &D);
    den = at->reduction == TEENY_REDUCTION_MEAN ? (float)N : 1.0f;
    if (!dlogits || st != TEENY_OK)
        return st;
    if (has_denom && (st = teeny__scratch(ctx, sizeof(float), &denom)) == TEENY_OK &&
        (st = ce_setup(ctx, N, K, &wg, opt, sizeof opt, &per, &rounds, denom, &carry)) == TEENY_OK)
        st = ce_reduce(ctx, opt, wg, per, rounds, denom, 0, labels, K, &w, CE_WSUM, N, denom, 0, carry);
    if (st == TEENY_OK)
        st = teeny__kernel_get(ctx, "loss", "", "ce_backward", &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, "ce_backward", sizeof(cl_mem), &probs->buf, sizeof(int), &p_off, sizeof(cl_mem),
                             &labels->buf, sizeof(int), &lab_off, sizeof(cl_mem), &w.w, sizeof(int), &w.w_off,
                             sizeof(int), &w.has_w, sizeof(int), &w.has_ii, sizeof(int), &w.ii, sizeof(cl_mem),
                             &dloss->buf, sizeof(int), &dl_off, sizeof(int), &dl_step, sizeof(cl_mem), &denom,
                             sizeof(int), &den_off, sizeof(int), &has_denom, sizeof(float), &den, sizeof(int), &N,
                             sizeof(int), &K, sizeof(int), &D, sizeof(cl_mem), &dlogits->buf, sizeof(int), &d_off, (size_t)0);
    return st == TEENY_OK ? teeny__launch_1d(ctx, k, "ce_backward", (size_t)N * (size_t)K) : st;
}

/* ---- shapes and the eager API ---- */

/* logits [N, K, d1, ...] fp32 (rank 2..5), labels int32 [N, d1, ...],
 * weights fp32 [K] (optional) -> loss [1] (the labels' shape for
 * TEENY_REDUCTION_NONE), saved probs of the logits' shape. */
teeny_status teeny__softmax_ce_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0], *lab = &s->in[1], *w = &s->in[2];
    const teeny__softmax_ce_attrs *at = &s->attrs.softmax_ce;
    char b[96], e[96];
    if (s->n_in < 2 || x->ndim < 2 || x->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "logits have shape %s%s; expected fp32 [N, K] or [N, K, d1, ...]",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b), x->is_i32 ? " int32" : "");
    int64_t want[TEENY_MAX_DIMS] = {x->shape[0]};
    for (int i = 2; i < x->ndim; i++)
        want[i - 1] = x->shape[i];
    if (!lab->is_i32 || lab->ndim != x->ndim - 1 || memcmp(lab->shape, want, sizeof(int64_t) * (size_t)lab->ndim))
        return teeny__error(ctx, TEENY_ERR_SHAPE, "labels have shape %s%s; expected int32 %s",
                            teeny__dims_str(lab->shape, lab->ndim, b, sizeof b), lab->is_i32 ? "" : " fp32",
                            teeny__dims_str(want, x->ndim - 1, e, sizeof e));
    if (s->n_in == 3 && (w->is_i32 || w->ndim != 1 || w->shape[0] != x->shape[1]))
        return teeny__error(ctx, TEENY_ERR_SHAPE, "weights have shape %s%s; expected fp32 [%lld]",
                            teeny__dims_str(w->shape, w->ndim, b, sizeof b), w->is_i32 ? " int32" : "",
                            (long long)x->shape[1]);
    if (at->reduction < TEENY_REDUCTION_MEAN || at->reduction > TEENY_REDUCTION_NONE)
        return teeny__error(ctx, TEENY_ERR_ARG, "reduction %d; expected TEENY_REDUCTION_MEAN, _SUM or _NONE",
                            at->reduction);
    if (teeny__dims_product(x->shape, x->ndim) > INT32_MAX || teeny__dims_product(x->shape, x->ndim) < 0)
        return teeny__error(ctx, TEENY_ERR_RANGE, "logits %s pass int32 indexing",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b));
    s->out = at->reduction == TEENY_REDUCTION_NONE ? *lab : (teeny__shape){.ndim = 1, .shape = {1}};
    s->out.is_i32 = 0;
    s->n_param = s->n_state = 0;
    s->n_saved = 1;
    s->saved[0] = *x;
    s->saved_needs_training = 1;
    return TEENY_OK;
}

/* loss and dloss: any shape of one element (of the labels' count for NONE). */
teeny_status teeny_softmax_cross_entropy_ex_forward(teeny_ctx *ctx, const teeny_tensor *logits,
                                                    const teeny_tensor *labels, const teeny_tensor *weights,
                                                    const teeny_ce_params *p, teeny_tensor *loss, teeny_tensor *probs)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_softmax_cross_entropy_forward", SOFTMAX_CE, softmax_ce, forward),
                      .attrs.softmax_ce = teeny__softmax_ce_attrs_of(p), .training = probs != NULL};
    const teeny__earg args[] = {{"logits", logits, TEENY__SOFTMAX_CE_LOGITS, 0},
                                {"labels", labels, TEENY__SOFTMAX_CE_LABELS, TEENY__EA_I32},
                                {"weights", weights, TEENY__SOFTMAX_CE_WEIGHTS, TEENY__EA_OPTIONAL},
                                {"loss", loss, TEENY__OUT_VALUE, TEENY__EA_OUT | TEENY__EA_NUMEL},
                                {"probs", probs, TEENY__SOFTMAX_CE_OUT_PROBS, TEENY__EA_OUT | TEENY__EA_OPTIONAL}};
    EAGER_BEGIN("teeny_softmax_cross_entropy_forward");
    return teeny__eager_run(ctx, &e, args, 5);
}

teeny_status teeny_softmax_cross_entropy_forward(teeny_ctx *ctx, const teeny_tensor *logits,
                                                 const teeny_tensor *labels, teeny_tensor *loss, teeny_tensor *probs)
{
    return teeny_softmax_cross_entropy_ex_forward(ctx, logits, labels, NULL, NULL, loss, probs);
}

/* dlogits stands in for the logits' shape. */
teeny_status teeny_softmax_cross_entropy_ex_backward(teeny_ctx *ctx, const teeny_tensor *probs,
                                                     const teeny_tensor *labels, const teeny_tensor *weights,
                                                     const teeny_ce_params *p, const teeny_tensor *dloss,
                                                     teeny_tensor *dlogits)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_softmax_cross_entropy_backward", SOFTMAX_CE, softmax_ce, backward),
                      .attrs.softmax_ce = teeny__softmax_ce_attrs_of(p), .training = 1};
    const teeny__earg args[] = {{"probs", probs, TEENY__SOFTMAX_CE_PROBS, 0},
                                {"labels", labels, TEENY__SOFTMAX_CE_LABELS, TEENY__EA_I32},
                                {"weights", weights, TEENY__SOFTMAX_CE_WEIGHTS, TEENY__EA_OPTIONAL},
                                {"dloss", dloss, TEENY__SOFTMAX_CE_DLOSS, TEENY__EA_NUMEL},
                                {"dlogits", dlogits, TEENY__SOFTMAX_CE_LOGITS, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_softmax_cross_entropy_backward");
    return teeny__eager_run(ctx, &e, args, 5);
}

teeny_status teeny_softmax_cross_entropy_backward(teeny_ctx *ctx, const teeny_tensor *probs,
                                                  const teeny_tensor *labels, const teeny_tensor *dloss,
                                                  teeny_tensor *dlogits)
{
    return teeny_softmax_cross_entropy_ex_backward(ctx, probs, labels, NULL, NULL, dloss, dlogits);
}

/* Not an op of the table (no graph node, no gradient): a direct launch. */
teeny_status teeny_argmax_rows(teeny_ctx *ctx, const teeny_tensor *x, teeny_tensor *out)
{
    static const char fn[] = "teeny_argmax_rows";
    const teeny__earg args[] = {{"x", x, 0, 0}, {"out", out, 0, TEENY__EA_I32}};
    char s[96];
    teeny_status st;
    EAGER_BEGIN("teeny_argmax_rows");
    if ((st = teeny__eager_tensors(ctx, fn, args, 2)) != TEENY_OK ||
        (st = teeny__eager_rank(ctx, fn, x, "x", 2, "[N, K]")) != TEENY_OK)
        return st;
    if (out->ndim != 1 || out->shape[0] != x->shape[0])
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: out has shape %s; expected [%lld]", fn,
                            teeny__shape_str(out, s, sizeof s), (long long)x->shape[0]);
    if (teeny__overlap(out, x))
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: out overlaps x in memory", fn);
    int64_t N = x->shape[0], K = x->shape[1], per;
    int n = (int)N, k_ = (int)K, x_off = teeny__off(x), o_off = teeny__off(out), k_begin, k_end, seg;
    cl_kernel k;
    cl_mem best = x->buf; /* a stand-in, unused, in one launch */
    /* an item scans its row, K + 1 trips; where the device limits them,
     * launches over column segments carry the best value in workspace */
    if ((st = teeny__loop_split(ctx, "ce_argmax_rows", K, 1, 1, &per)) != TEENY_OK ||
        (per < K && (st = teeny__scratch(ctx, (size_t)n * sizeof(float), &best)) != TEENY_OK))
        return st;
    for (int64_t c = 0; c < K && st == TEENY_OK; c += per) {
        k_begin = (int)c;
        k_end = (int)(c + per < K ? c + per : K);
        seg = (c == 0 ? CE_SEG_FIRST : 0) | (c + per >= K ? CE_SEG_LAST : 0);
        st = teeny__kernel_get(ctx, "loss", "", "ce_argmax_rows", &k);
        if (st == TEENY_OK)
            st = teeny__set_args(ctx, k, "ce_argmax_rows", sizeof(cl_mem), &x->buf, sizeof(int), &x_off, sizeof(int),
                                 &n, sizeof(int), &k_, sizeof(cl_mem), &out->buf, sizeof(int), &o_off, sizeof(int),
                                 &k_begin, sizeof(int), &k_end, sizeof(int), &seg, sizeof(cl_mem), &best, (size_t)0);
        if (st == TEENY_OK)
            st = teeny__launch_1d(ctx, k, "ce_argmax_rows", (size_t)n);
    }
    if (per < K)
        teeny__scratch_give(ctx, best);
    return st;
}
