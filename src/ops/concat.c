/*
 * concat.c -- concatenation along dimension 1 (channels), its inverse
 * split, and the channel slice the graph expresses split with. Tensors are
 * [B, C, ...] of rank 2..5 (NC, NCHW, ...), seen as [B, C, S] with S the
 * product of the trailing dimensions; every dimension but 1 must agree.
 *
 * Kernels: cl/concat.cl, one work-item per element written.
 *
 * Op-table entries (the convention of ops.h):
 *   concat:         attrs.concat: n_inputs (1..4 per graph node, must
 *                   equal n_in; teeny_graph_concat chains nodes for more),
 *                   first_channel, the first channel of y written (0 in
 *                   graphs; the eager API concatenates more than 4 inputs
 *                   in groups with it).
 *                   forward in = [x0 .. x(n-1)], out = [y];
 *                   backward in = [x0 .. x(n-1), y, dy], out = [dx0 .. dx(n-1)]
 *                   (dxi = its channels of dy)
 *   slice_channels: attrs.slice = {first_channel c0, count}: y =
 *                   channels [c0, c0 + count) of x.
 *                   forward in = [x], out = [y];
 *                   backward in = [x, y, dy], out = [dx] (dy in the slice,
 *                   zeros elsewhere: overwritten, never accumulated)
 */
#include <stdio.h>

#include "ops.h"

/* Copy channels [src_c0, + count) of src to [dst_c0, + count) of dst. */
static teeny_status copy_channels(teeny_ctx *ctx, const teeny_tensor *src, int src_c0, teeny_tensor *dst,
                                  int dst_c0, int count)
{
    static const char name[] = "cat_copy";
    int B = (int)src->shape[0], src_C = (int)src->shape[1], dst_C = (int)dst->shape[1];
    int S = (int)(src->numel / ((int64_t)B * src_C)), total = B * count * S;
    int src_off = teeny__off(src), dst_off = teeny__off(dst);
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "concat", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &src->buf, sizeof(int), &src_off, sizeof(int), &src_C,
                             sizeof(int), &src_c0, sizeof(cl_mem), &dst->buf, sizeof(int), &dst_off, sizeof(int),
                             &dst_C, sizeof(int), &dst_c0, sizeof(int), &count, sizeof(int), &S, sizeof(int), &total,
                             (size_t)0);
    if (st == TEENY_OK) {
        size_t global = (size_t)total, local = teeny__local_clamp(ctx, k, name, (size_t)ctx->work_group_size);
        st = teeny__launch(ctx, k, name, 1, &global, &local);
    }
    return st;
}

teeny_status teeny__concat_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    int n = a->attrs.concat.n_inputs, c = a->attrs.concat.first_channel;
    teeny_status st = TEENY_OK;
    for (int i = 0; i < n && st == TEENY_OK; i++) {
        const teeny_tensor *x = a->in[TEENY__CONCAT_X0 + i];
        st = copy_channels(ctx, x, 0, a->out[TEENY__OUT_VALUE], c, (int)x->shape[1]);
        c += (int)x->shape[1];
    }
    return st;
}

teeny_status teeny__concat_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    int n = a->attrs.concat.n_inputs, c = a->attrs.concat.first_channel;
    const teeny_tensor *dy = a->in[TEENY__CONCAT_DY];
    teeny_status st = TEENY_OK;
    for (int i = 0; i < n && st == TEENY_OK; i++) {
        const teeny_tensor *x = a->in[TEENY__CONCAT_X0 + i], *shape = x ? x : a->out[TEENY__CONCAT_X0 + i];
        TEENY_ASSERT(ctx, shape != NULL);
        int C = (int)shape->shape[1];
        if (a->out[TEENY__CONCAT_X0 + i])
            st = copy_channels(ctx, dy, c, a->out[TEENY__CONCAT_X0 + i], 0, C);
        c += C;
    }
    return st;
}

teeny_status teeny__slice_channels_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    return copy_channels(ctx, a->in[TEENY__SLICE_CHANNELS_X], a->attrs.slice.first_channel, a->out[TEENY__OUT_VALUE], 0,
                         a->attrs.slice.count);
}

teeny_status teeny__slice_channels_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    static const char name[] = "cat_slice_backward";
    const teeny_tensor *dy = a->in[TEENY__SLICE_CHANNELS_DY];
    teeny_tensor *dx = a->out[TEENY__SLICE_CHANNELS_X];
    if (!dx)
        return TEENY_OK;
    int B = (int)dx->shape[0], C = (int)dx->shape[1], S = (int)(dx->numel / ((int64_t)B * C)), total = (int)dx->numel;
    int c0 = a->attrs.slice.first_channel, count = a->attrs.slice.count;
    int dy_off = teeny__off(dy), dx_off = teeny__off(dx);
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "concat", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &dy->buf, sizeof(int), &dy_off, sizeof(cl_mem), &dx->buf,
                             sizeof(int), &dx_off, sizeof(int), &C, sizeof(int), &c0, sizeof(int), &count,
                             sizeof(int), &S, sizeof(int), &total, (size_t)0);
    if (st == TEENY_OK) {
        size_t global = (size_t)total, local = teeny__local_clamp(ctx, k, name, (size_t)ctx->work_group_size);
        st = teeny__launch(ctx, k, name, 1, &global, &local);
    }
    return st;
}

/* ---- validation and the eager API ---- */

/* part must match whole in every dimension but 1 (whole checked already). */
static teeny_status check_part(teeny_ctx *ctx, const char *fn, const teeny_tensor *part, const char *what, int i,
                               const teeny_tensor *whole, const char *whole_name)
{
    char sp[96], sw[96];
    teeny_status st = teeny__check_tensor(ctx, part, what);
    if (st != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s[%d]: %s", fn, what, i, teeny_last_error(ctx));
    int ok = part->ndim == whole->ndim;
    for (int d = 0; ok && d < whole->ndim; d++)
        ok = d == 1 || part->shape[d] == whole->shape[d];
    if (!ok)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %s[%d] has shape %s; every dimension but 1 must equal %s's %s",
                            fn, what, i, teeny__shape_str(part, sp, sizeof sp), whole_name,
                            teeny__shape_str(whole, sw, sizeof sw));
    return TEENY_OK;
}

static teeny_status check_whole(teeny_ctx *ctx, const char *fn, const teeny_tensor *t, const char *name, int n,
                                const void *list, const char *list_name)
{
    char s[96];
    teeny_status st;
    if (n < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: n = %d; need at least one tensor", fn, n);
    if (!list)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s is NULL", fn, list_name);
    if ((st = teeny__check_tensor(ctx, t, name)) != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    if (t->ndim < 2)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %s has shape %s; expected [B, C, ...]", fn, name,
                            teeny__shape_str(t, s, sizeof s));
    return TEENY_OK;
}

static teeny_status check_sum(teeny_ctx *ctx, const char *fn, int64_t sum, const teeny_tensor *whole,
                              const char *whole_name)
{
    if (sum != whole->shape[1])
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: the parts have %lld channels in all; %s has %lld", fn,
                            (long long)sum, whole_name, (long long)whole->shape[1]);
    return TEENY_OK;
}

teeny_status teeny_concat_channels(teeny_ctx *ctx, int n, const teeny_tensor *const *xs, teeny_tensor *y)
{
    static const char fn[] = "teeny_concat_channels";
    int64_t sum = 0;
    teeny_status st;
    EAGER_BEGIN("teeny_concat_channels");
    if ((st = check_whole(ctx, fn, y, "y", n, xs, "xs")) != TEENY_OK)
        return st;
    for (int i = 0; i < n; i++) {
        if ((st = check_part(ctx, fn, xs[i], "xs", i, y, "y")) != TEENY_OK)
            return st;
        if (teeny__overlap(y, xs[i]))
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: y overlaps xs[%d] in memory", fn, i);
        sum += xs[i]->shape[1];
    }
    if ((st = check_sum(ctx, fn, sum, y, "y")) != TEENY_OK)
        return st;
    /* groups of at most TEENY__OP_MAX_SLOTS inputs, as the graph would give */
    int c = 0;
    for (int i = 0; i < n && st == TEENY_OK; i += TEENY__OP_MAX_SLOTS) {
        int m = n - i < TEENY__OP_MAX_SLOTS ? n - i : TEENY__OP_MAX_SLOTS;
        teeny__op_args args = {.out = {y}, .attrs.concat = {m, c}};
        for (int j = 0; j < m; j++) {
            args.in[j] = xs[i + j];
            c += (int)xs[i + j]->shape[1];
        }
        st = teeny__op_run(ctx, TEENY__OP_CONCAT, 0, &args);
    }
    return st;
}

teeny_status teeny_split_channels(teeny_ctx *ctx, const teeny_tensor *x, int n, teeny_tensor *const *ys)
{
    static const char fn[] = "teeny_split_channels";
    int64_t sum = 0;
    teeny_status st;
    EAGER_BEGIN("teeny_split_channels");
    if ((st = check_whole(ctx, fn, x, "x", n, ys, "ys")) != TEENY_OK)
        return st;
    for (int i = 0; i < n; i++) {
        if ((st = check_part(ctx, fn, ys[i], "ys", i, x, "x")) != TEENY_OK)
            return st;
        if (teeny__overlap(ys[i], x))
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: ys[%d] overlaps x in memory", fn, i);
        for (int j = 0; j < i; j++)
            if (teeny__overlap(ys[i], ys[j]))
                return teeny__error(ctx, TEENY_ERR_ARG, "%s: ys[%d] overlaps ys[%d] in memory", fn, i, j);
        sum += ys[i]->shape[1];
    }
    if ((st = check_sum(ctx, fn, sum, x, "x")) != TEENY_OK)
        return st;
    int c = 0;
    for (int i = 0; i < n && st == TEENY_OK; i++) {
        teeny__op_args args = {.in = {x}, .out = {ys[i]}, .attrs.slice = {c, (int)ys[i]->shape[1]}};
        st = teeny__op_run(ctx, TEENY__OP_SLICE_CHANNELS, 0, &args);
        c += (int)ys[i]->shape[1];
    }
    return st;
}

/* ---- graph shapes ---- */

teeny_status teeny__concat_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    int n = s->n_in;
    const teeny__concat_attrs *at = &s->attrs.concat;
    if (n < 1 || n > TEENY__OP_MAX_SLOTS || at->n_inputs != n || at->first_channel != 0)
        return teeny__error(ctx, TEENY_ERR_ARG,
                            "concat: %d inputs with n_inputs %d, first_channel %d; need 1..%d inputs, n_inputs = "
                            "their number, first_channel 0", n, at->n_inputs, at->first_channel, TEENY__OP_MAX_SLOTS);
    const teeny__shape *x0 = &s->in[0];
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        const teeny__shape *x = &s->in[i];
        int ok = !x->is_i32 && x->ndim >= 2 && x->ndim == x0->ndim;
        for (int d = 0; ok && d < x->ndim; d++)
            ok = d == 1 || x->shape[d] == x0->shape[d];
        if (!ok)
            return teeny__error(ctx, TEENY_ERR_SHAPE,
                                "concat: input %d (rank %d) must be fp32 and match input 0 (rank %d) in every "
                                "dimension but 1", i, x->ndim, x0->ndim);
        sum += x->shape[1];
    }
    s->out = *x0;
    s->out.shape[1] = sum;
    int64_t numel = 1;
    for (int d = 0; d < s->out.ndim; d++)
        numel *= s->out.shape[d];
    if (numel > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "concat: output of %lld elements passes int32 indexing",
                            (long long)numel);
    s->n_param = s->n_state = s->n_saved = 0;
    return TEENY_OK;
}

teeny_status teeny__slice_channels_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    int c0 = s->attrs.slice.first_channel, count = s->attrs.slice.count;
    if (s->n_in != 1 || x->ndim < 2 || x->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "slice_channels: input must be fp32 [B, C, ...] (rank %d given)",
                            x->ndim);
    if (c0 < 0 || count < 1 || c0 + (int64_t)count > x->shape[1])
        return teeny__error(ctx, TEENY_ERR_ARG, "slice_channels: channels [%d, %lld) are not inside [0, %lld)", c0,
                            (long long)c0 + count, (long long)x->shape[1]);
    s->out = *x;
    s->out.shape[1] = count;
    s->n_param = s->n_state = s->n_saved = 0;
    return TEENY_OK;
}

/* ---- graph builders ---- */

/* More than TEENY__OP_MAX_SLOTS inputs become a chain of concat nodes (the
 * first takes 4 inputs, each later one the previous result plus up to 3
 * more) named "<name>.part<k>", the last one carrying name itself; the
 * gradient of a chain is the same channel copy as one wide concat. */
teeny_status teeny_graph_concat(teeny_graph *g, const char *name, int n, const teeny_node *xs, teeny_node *out)
{
    teeny_ctx *ctx = teeny__graph_ctx(g);
    if (!g || !out || !xs || n < 1) {
        if (out)
            *out = -1;
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_graph_concat: %s", !g ? "graph is NULL" : !out ? "out is NULL"
                                                                         : !xs ? "inputs array is NULL"
                                                                               : "needs at least one input");
    }
    if (n <= TEENY__OP_MAX_SLOTS) {
        teeny__op_attrs at = {.concat = {n, 0}};
        return teeny__graph_node(g, TEENY__OP_CONCAT, name, n, xs, &at, out);
    }
    /* a chain; intermediate nodes are named after the final one (or left to
     * the graph's automatic names when name is NULL) */
    teeny_node part[TEENY__OP_MAX_SLOTS], acc = -1;
    int done = 0, k = 0;
    teeny_status st = TEENY_OK;
    *out = -1;
    while (done < n && st == TEENY_OK) {
        int m = 0;
        char pname[128], *pn = NULL;
        if (acc >= 0)
            part[m++] = acc;
        while (m < TEENY__OP_MAX_SLOTS && done < n)
            part[m++] = xs[done++];
        if (done < n && name && *name) {
            snprintf(pname, sizeof pname, "%s.part%d", name, k++);
            pn = pname;
        }
        teeny__op_attrs at = {.concat = {m, 0}};
        st = teeny__graph_node(g, TEENY__OP_CONCAT, done < n ? pn : name, m, part, &at, &acc);
    }
    if (st == TEENY_OK)
        *out = acc;
    return st;
}

teeny_status teeny_graph_slice_channels(teeny_graph *g, const char *name, teeny_node x, int start, int count,
                                        teeny_node *out)
{
    teeny__op_attrs at = {.slice = {start, count}};
    return teeny__graph_node(g, TEENY__OP_SLICE_CHANNELS, name, 1, &x, &at, out);
}
