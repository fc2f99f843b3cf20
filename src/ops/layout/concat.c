/*
 * concat.c -- concatenation along dimension 1 (channels), its inverse
 * split, and the channel slice the graph expresses split with. Tensors are
 * [B, C, ...] of rank 2..5 (NC, NCHW, ...), seen as [B, C, S] with S the
 * product of the trailing dimensions; every dimension but 1 must agree.
 *
 * Kernels: cl/concat.cl, one work-item per element written.
 *
 * Op-table entries (slots TEENY__CONCAT_*, TEENY__SLICE_CHANNELS_*: ops.h):
 *   concat:         attrs.concat: n_inputs (1..4 per graph node, must
 *                   equal n_in; teeny_graph_concat chains nodes for more),
 *                   first_channel, the first channel of y written (0 in
 *                   graphs; the eager API concatenates more than 4 inputs
 *                   in groups with it).
 *                   forward in = [x0 .. x3] (NULL past n), out = [y];
 *                   backward in = [x0 .. x3, y, dy], out = [dx0 .. dx3]
 *                   (dxi = its channels of dy)
 *   slice_channels: attrs.slice = {first_channel c0, count}: y =
 *                   channels [c0, c0 + count) of x.
 *                   forward in = [x], out = [y];
 *                   backward in = [x, y, dy], out = [dx] (dy in the slice,
 *                   zeros elsewhere: overwritten, never accumulated)
 */
#include <stdio.h>
#include <string.h>

#include "../ops.h"

#define KM(m) TEENY__KARG_MEM(m)
#define KI(i) TEENY__KARG_INT(i)

/* cat_copy_cpu's floats an item: 4096, fewer where the device's loop
 * budget (teeny__loop_budget) ends an item's loop sooner (its loops take
 * chunk / 16 + 16 trips). */
static teeny_status cpu_chunk(teeny_ctx *ctx, int *chunk)
{
    int64_t budget, c = 4096;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    while (st == TEENY_OK && c > 16 && c / 16 + 18 > budget)
        c /= 2;
    *chunk = (int)c;
    return st;
}

/* Copy channels [src_c0, + count) of src to [dst_c0, + count) of dst:
 * cat_copy_cpu on the CPU variant (unless the test hook CAT_COPY_CPU is
 * -1), else cat_copy. */
static teeny_status copy_channels(teeny_ctx *ctx, const teeny_tensor *src, int src_c0, teeny_tensor *dst,
                                  int dst_c0, int count)
{
    int B = (int)src->shape[0], src_C = (int)src->shape[1], dst_C = (int)dst->shape[1];
    int S = (int)(src->numel / ((int64_t)B * src_C)), total = B * count * S;
    int src_off = teeny__off(src), dst_off = teeny__off(dst), chunk = 0;
    teeny_status st = TEENY_OK;
    if (total == 0)
        return TEENY_OK;
    if (ctx->tune.variant == TEENY_VARIANT_CPU && ctx->hooks.cat_copy_cpu >= 0 &&
        (st = cpu_chunk(ctx, &chunk)) == TEENY_OK) {
        size_t q = (size_t)((count * S + chunk - 1) / chunk);
        size_t global[2] = {q, (size_t)B}, local[2] = {teeny__cpu_local(ctx, q * (size_t)B), 1};
        while (local[0] > q && local[0] > 1)
            local[0] /= 2;
        teeny__karg a[] = {KM(src->buf), KI(src_off), KI(src_C), KI(src_c0), KM(dst->buf), KI(dst_off),
                    KI(dst_C),    KI(dst_c0),  KI(count), KI(S),      KI(chunk)};
        return teeny__run_kernel(ctx, "concat", "", "cat_copy_cpu", a, (int)(sizeof a / sizeof a[0]), 2, global,
                                 local);
    }
    if (st != TEENY_OK)
        return st;
    teeny__karg a[] = {KM(src->buf), KI(src_off), KI(src_C), KI(src_c0), KM(dst->buf), KI(dst_off),
                KI(dst_C),    KI(dst_c0),  KI(count), KI(S),      KI(total)};
    cl_kernel k;
    if ((st = teeny__kernel_get(ctx, "concat", "", "cat_copy", &k)) == TEENY_OK &&
        (st = teeny__set_arg_list(ctx, k, "cat_copy", a, (int)(sizeof a / sizeof a[0]))) == TEENY_OK)
        st = teeny__launch_1d(ctx, k, "cat_copy", (size_t)total);
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
    if (st == TEENY_OK)
        st = teeny__launch_1d(ctx, k, name, (size_t)total);
    return st;
}

/* ---- shapes and the eager API ---- */

/* The concatenation rule, part by part: part i of a concatenation (named
 * what[i]) is fp32 of ref's rank (>= 2) and equal to ref (named ref_name)
 * in every dimension but 1; its channels are added to sum's. */
static teeny_status cat_part(teeny_ctx *ctx, const char *what, int i, const teeny__shape *part, const char *ref_name,
                             const teeny__shape *ref, teeny__shape *sum)
{
    char sp[96], sr[96];
    int ok = !part->is_i32 && part->ndim >= 2 && part->ndim == ref->ndim;
    for (int d = 0; ok && d < part->ndim; d++)
        ok = d == 1 || part->shape[d] == ref->shape[d];
    if (!ok)
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "%s[%d] has shape %s%s; expected fp32 [B, C, ...] equal to %s %s in every dimension but 1",
                            what, i, teeny__dims_str(part->shape, part->ndim, sp, sizeof sp),
                            part->is_i32 ? " int32" : "", ref_name,
                            teeny__dims_str(ref->shape, ref->ndim, sr, sizeof sr));
    sum->shape[1] += part->shape[1];
    return TEENY_OK;
}

/* x[0..n) -> y, their channels concatenated (n = n_inputs, 1..4). */
teeny_status teeny__concat_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    int n = s->n_in;
    const teeny__concat_attrs *at = &s->attrs.concat;
    teeny_status st = TEENY_OK;
    if (n < 1 || n > TEENY__OP_MAX_SLOTS || at->n_inputs != n || at->first_channel != 0)
        return teeny__error(ctx, TEENY_ERR_ARG,
                            "%d inputs with n_inputs %d, first_channel %d; need 1..%d inputs, n_inputs = their number, "
                            "first_channel 0",
                            n, at->n_inputs, at->first_channel, TEENY__OP_MAX_SLOTS);
    s->out = s->in[0];
    s->out.shape[1] = 0;
    for (int i = 0; i < n && st == TEENY_OK; i++)
        st = cat_part(ctx, "x", i, &s->in[i], "x[0]", &s->in[0], &s->out);
    if (st != TEENY_OK)
        return st;
    int64_t numel = teeny__dims_product(s->out.shape, s->out.ndim);
    if (numel < 0 || numel > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "the output of %lld elements passes int32 indexing",
                            (long long)numel);
    s->n_param = s->n_state = s->n_saved = 0;
    return TEENY_OK;
}

/* x [B, C, ...] -> y = channels [first_channel, + count) of x. */
teeny_status teeny__slice_channels_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    int c0 = s->attrs.slice.first_channel, count = s->attrs.slice.count;
    char b[96];
    if (s->n_in != 1 || x->ndim < 2 || x->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x has shape %s%s; expected fp32 [B, C, ...]",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b), x->is_i32 ? " int32" : "");
    if (c0 < 0 || count < 1 || c0 + (int64_t)count > x->shape[1])
        return teeny__error(ctx, TEENY_ERR_ARG, "channels [%d, %lld) are not inside [0, %lld)", c0,
                            (long long)c0 + count, (long long)x->shape[1]);
    s->out = *x;
    s->out.shape[1] = count;
    s->n_param = s->n_state = s->n_saved = 0;
    return TEENY_OK;
}

/* n tensors named what[i] (fp32, of ctx) of a concatenation with whole: the
 * rule of cat_part against whole, their channels summing to whole's, none
 * overlapping whole (or, when written, another part). */
static teeny_status check_parts(teeny_ctx *ctx, const char *fn, int n, const teeny_tensor *const *parts,
                                const char *what, const teeny_tensor *whole, const char *whole_name, int written)
{
    char name[32], sw[96];
    teeny_status st;
    if (n < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: n = %d; need at least one tensor", fn, n);
    if (!parts)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s is NULL", fn, what);
    const teeny__earg w = {whole_name, whole, 0, 0};
    if ((st = teeny__eager_tensors(ctx, fn, &w, 1)) != TEENY_OK)
        return st;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s[%d]", what, i);
        const teeny__earg p = {name, parts[i], 0, 0};
        if ((st = teeny__eager_tensors(ctx, fn, &p, 1)) != TEENY_OK)
            return st;
    }
    teeny__shape ref = teeny__shape_of(whole), sum = ref;
    if (ref.ndim < 2)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %s has shape %s; expected [B, C, ...]", fn, whole_name,
                            teeny__shape_str(whole, sw, sizeof sw));
    sum.shape[1] = 0;
    for (int i = 0; i < n; i++) {
        teeny__shape part = teeny__shape_of(parts[i]);
        if ((st = cat_part(ctx, what, i, &part, whole_name, &ref, &sum)) != TEENY_OK)
            return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
        if (teeny__overlap(parts[i], whole) && written)
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s[%d] overlaps %s in memory", fn, what, i, whole_name);
        if (teeny__overlap(parts[i], whole))
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s overlaps %s[%d] in memory", fn, whole_name, what, i);
        for (int j = 0; written && j < i; j++)
            if (teeny__overlap(parts[i], parts[j]))
                return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s[%d] overlaps %s[%d] in memory", fn, what, i, what, j);
    }
    if (whole->ndim != sum.ndim || memcmp(whole->shape, sum.shape, sizeof(int64_t) * (size_t)sum.ndim))
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %s has shape %s; the parts give %s", fn, whole_name,
                            teeny__shape_str(whole, sw, sizeof sw),
                            teeny__dims_str(sum.shape, sum.ndim, name, sizeof name));
    return TEENY_OK;
}

/* Groups of at most four inputs, as the graph would give: one concat of
 * the op table each, writing from channel first_channel on. */
teeny_status teeny_concat_channels(teeny_ctx *ctx, int n, const teeny_tensor *const *xs, teeny_tensor *y)
{
    static const char fn[] = "teeny_concat_channels";
    teeny_status st;
    EAGER_BEGIN("teeny_concat_channels");
    if ((st = check_parts(ctx, fn, n, xs, "xs", y, "y", 0)) != TEENY_OK)
        return st;
    int c = 0;
    for (int i = 0; i < n && st == TEENY_OK; i += TEENY__OP_MAX_SLOTS) {
        int m = n - i < TEENY__OP_MAX_SLOTS ? n - i : TEENY__OP_MAX_SLOTS;
        teeny__op_args args = {.out = {[TEENY__OUT_VALUE] = y}, .attrs.concat = {m, c}};
        for (int j = 0; j < m; j++) {
            args.in[TEENY__CONCAT_X0 + j] = xs[i + j];
            c += (int)xs[i + j]->shape[1];
        }
        st = teeny__op_exec(ctx, teeny__concat_forward, &args);
    }
    return st;
}

/* One slice_channels per part, each checked by the op's infer; every part
 * is checked before the first runs. */
teeny_status teeny_split_channels(teeny_ctx *ctx, const teeny_tensor *x, int n, teeny_tensor *const *ys)
{
    static const char fn[] = "teeny_split_channels";
    teeny_status st;
    EAGER_BEGIN("teeny_split_channels");
    if ((st = check_parts(ctx, fn, n, (const teeny_tensor *const *)ys, "ys", x, "x", 1)) != TEENY_OK)
        return st;
    for (int run = 0; run < 2; run++) {
        int c = 0;
        for (int i = 0; i < n && st == TEENY_OK; i++) {
            teeny__eager e = {TEENY__EAGER_OF(fn, SLICE_CHANNELS, slice_channels, forward),
                              .attrs.slice = {c, (int)ys[i]->shape[1]}};
            const teeny__earg args[] = {{"x", x, TEENY__SLICE_CHANNELS_X, 0},
                                        {"ys[i]", ys[i], TEENY__OUT_VALUE, TEENY__EA_OUT}};
            teeny__op_args a;
            st = run ? teeny__eager_run(ctx, &e, args, 2) : teeny__eager_check(ctx, &e, args, 2, &a);
            c += (int)ys[i]->shape[1];
        }
    }
    return st;
}
