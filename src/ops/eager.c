/*
 * eager.c -- the eager API's one validation path. A public eager function
 * names its tensors by the op's slots (ops.h) and teeny__eager_run checks
 * them, hands their shapes to the op's infer -- the same validator the
 * graph runs when a node is added and compiled -- checks every other
 * tensor against the shape infer gives its slot and every written tensor
 * against overlap, and only then runs the pass. The families call it with
 * their own infer and passes, so nothing here names an op.
 */
#include <string.h>

#include "ops.h"

teeny__shape teeny__shape_of(const teeny_tensor *t)
{
    teeny__shape s = {.ndim = t->ndim, .is_i32 = t->dtype == TEENY__I32};
    memcpy(s.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    return s;
}

static const char *shape_str(const teeny__shape *s, char *buf, size_t cap)
{
    return teeny__dims_str(s->shape, s->ndim, buf, cap);
}

teeny_status teeny__eager_tensors(teeny_ctx *ctx, const char *fn, const teeny__earg *args, int n)
{
    for (int i = 0; i < n; i++) {
        const teeny__earg *e = &args[i];
        if (!e->t && (e->flags & TEENY__EA_OPTIONAL))
            continue;
        teeny_status st = e->flags & TEENY__EA_I32 ? teeny__check_tensor_i32(ctx, e->t, e->name)
                                                   : teeny__check_tensor(ctx, e->t, e->name);
        if (st != TEENY_OK)
            return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    }
    return TEENY_OK;
}

teeny_status teeny__eager_rank(teeny_ctx *ctx, const char *fn, const teeny_tensor *t, const char *name, int ndim,
                               const char *layout)
{
    char s[96];
    if (t->ndim != ndim)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %s has shape %s; expected %s", fn, name,
                            teeny__shape_str(t, s, sizeof s), layout);
    return TEENY_OK;
}

/* The argument at slot (in `in`, or `out` when out), or NULL. */
static const teeny__earg *find(const teeny__earg *args, int n, int slot, int out)
{
    for (int i = 0; i < n; i++)
        if (args[i].t && args[i].slot == slot && !(args[i].flags & TEENY__EA_OUT) == !out)
            return &args[i];
    return NULL;
}

/* The inputs' shapes for infer: e->in_shapes when given, else each
 * input's own or (backward) its gradient's; the inputs run up to the first
 * slot nothing gives (a concat of fewer than four). */
static void infer_inputs(const teeny__eager *e, const teeny__earg *args, int n, teeny__node_shapes *s)
{
    teeny__op_slots sl = teeny__op_slots_of(e->op);
    s->n_in = 0;
    for (int i = 0; i < sl.in; i++) {
        const teeny__earg *g = e->in_shapes ? NULL : find(args, n, i, 0);
        if (!g && !e->in_shapes && e->backward)
            g = find(args, n, i, 1);
        if (g) {
            s->in[i] = teeny__shape_of(g->t);
            if (g->flags & TEENY__EA_NUMEL)
                s->in[i] = (teeny__shape){.ndim = 1, .shape = {g->t->numel}, .is_i32 = s->in[i].is_i32};
        } else if (e->in_shapes) {
            s->in[i] = e->in_shapes[i];
        } else {
            break;
        }
        s->n_in = i + 1;
    }
}

/* The shape infer gave the tensor at an argument's slot (ops.h, "slots"). */
static const teeny__shape *slot_shape(const teeny__eager *e, const teeny__node_shapes *s, const teeny__earg *g)
{
    teeny__op_slots sl = teeny__op_slots_of(e->op);
    int k = g->slot;
    if ((g->flags & TEENY__EA_OUT) && !e->backward) { /* [value | saved | states] */
        if (k == TEENY__OUT_VALUE)
            return &s->out;
        return k < teeny__slot_out_state(sl) ? &s->saved[k - 1] : &s->state[k - teeny__slot_out_state(sl)];
    }
    if (k < teeny__slot_param(sl))
        return &s->in[k];
    if (k < teeny__slot_state(sl))
        return &s->param[k - teeny__slot_param(sl)];
    if (k < teeny__slot_value(sl))
        return &s->state[k - teeny__slot_state(sl)];
    if (k == teeny__slot_value(sl) || k == teeny__slot_dvalue(sl))
        return &s->out;
    return &s->saved[k - teeny__slot_saved(sl)];
}

static int same_shape(const teeny_tensor *t, const teeny__shape *want, unsigned flags)
{
    int ndim = t->ndim;
    if (flags & TEENY__EA_NUMEL)
        return teeny__dims_product(want->shape, want->ndim) == t->numel;
    if ((flags & TEENY__EA_HW1) && ndim == want->ndim + 2 && t->shape[ndim - 1] == 1 && t->shape[ndim - 2] == 1)
        ndim -= 2;
    return ndim == want->ndim && !memcmp(t->shape, want->shape, sizeof(int64_t) * (size_t)ndim);
}

/* Step 3: every tensor infer did not take has the shape of its slot. */
static teeny_status check_shapes(teeny_ctx *ctx, const teeny__eager *e, const teeny__node_shapes *s,
                                 const teeny__earg *args, int n)
{
    for (int i = 0; i < n; i++) {
        const teeny__earg *g = &args[i];
        if (!g->t)
            continue;
        const teeny__shape *want = slot_shape(e, s, g);
        char have[96], w[96];
        if (want->ndim < 1) /* infer describes every slot an eager call fills */
            return teeny__error(ctx, TEENY_ERR_STATE, "%s: the op's infer gave %s's slot %d no shape", e->fn, g->name,
                                g->slot);
        if (same_shape(g->t, want, g->flags))
            continue;
        shape_str(want, w, sizeof w);
        if (g->flags & TEENY__EA_NUMEL)
            return teeny__error(ctx, TEENY_ERR_SHAPE,
                                "%s: %s has shape %s; expected %s or another shape of %lld elements", e->fn, g->name,
                                teeny__shape_str(g->t, have, sizeof have), w,
                                (long long)teeny__dims_product(want->shape, want->ndim));
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %s has shape %s; expected %s%s", e->fn, g->name,
                            teeny__shape_str(g->t, have, sizeof have), w,
                            g->flags & TEENY__EA_HW1 ? " (or that followed by 1, 1)" : "");
    }
    return TEENY_OK;
}

/* Step 4: a written tensor overlaps no other, except an in-place one that
 * is exactly a tensor it reads. */
static teeny_status check_overlap(teeny_ctx *ctx, const char *fn, const teeny__earg *args, int n)
{
    for (int i = 0; i < n; i++) {
        const teeny__earg *o = &args[i];
        if (!(o->flags & (TEENY__EA_OUT | TEENY__EA_UPDATED)))
            continue;
        for (int j = 0; j < n; j++) {
            const teeny__earg *t = &args[j];
            if (j == i || !teeny__overlap(o->t, t->t))
                continue;
            int read_only = !(t->flags & (TEENY__EA_OUT | TEENY__EA_UPDATED));
            if ((o->flags & TEENY__EA_INPLACE) && read_only && o->t->offset == t->t->offset &&
                o->t->numel == t->t->numel)
                continue;
            return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s overlaps %s in memory%s", fn, o->name, t->name,
                                (o->flags & TEENY__EA_INPLACE) && read_only ? " (only exact aliasing is allowed)" : "");
        }
    }
    return TEENY_OK;
}

static void append_arg(teeny_ctx *ctx, const char *lead, const teeny__earg *g)
{
    char s[96];
    teeny__error_append(ctx, lead);
    teeny__error_append(ctx, g->name);
    teeny__error_append(ctx, " ");
    teeny__error_append(ctx, teeny__shape_str(g->t, s, sizeof s));
}

/* Infer's message after the function's name, naming again the tensors
 * infer saw as inputs under other names (a gradient standing in for its
 * input) or, for a shape mismatch, flattened (TEENY__EA_NUMEL). */
static teeny_status infer_failed(teeny_ctx *ctx, const teeny__eager *e, const teeny__earg *args, int n, teeny_status st)
{
    int flat = 0, stand_in = 0;
    teeny__error(ctx, st, "%s: %s", e->fn, teeny_last_error(ctx));
    for (int i = 0; e->backward && !e->in_shapes && i < n; i++)
        if (args[i].t && (args[i].flags & TEENY__EA_OUT) && args[i].slot < teeny__op_slots_of(e->op).in &&
            !find(args, n, args[i].slot, 0))
            append_arg(ctx, stand_in++ ? ", " : " (the inputs' shapes from ", &args[i]);
    if (stand_in)
        teeny__error_append(ctx, ")");
    for (int i = 0; st == TEENY_ERR_SHAPE && i < n; i++)
        if (args[i].t && (args[i].flags & TEENY__EA_NUMEL) && !(args[i].flags & TEENY__EA_OUT) &&
            args[i].slot < teeny__op_slots_of(e->op).in)
            append_arg(ctx, flat++ ? ", " : " (given: ", &args[i]);
    if (flat)
        teeny__error_append(ctx, "; only element counts must agree)");
    return st;
}

teeny_status teeny__eager_check(teeny_ctx *ctx, const teeny__eager *e, const teeny__earg *args, int n,
                                teeny__op_args *a)
{
    teeny__node_shapes s;
    teeny_status st = teeny__eager_tensors(ctx, e->fn, args, n);
    if (st != TEENY_OK)
        return st;
    memset(&s, 0, sizeof s);
    s.attrs = e->attrs;
    infer_inputs(e, args, n, &s);
    if ((st = e->infer(ctx, &s)) != TEENY_OK)
        return infer_failed(ctx, e, args, n, st);
    if ((st = check_shapes(ctx, e, &s, args, n)) != TEENY_OK || (st = check_overlap(ctx, e->fn, args, n)) != TEENY_OK)
        return st;
    teeny__op_slots sl = teeny__op_slots_of(e->op);
    memset(a, 0, sizeof *a);
    a->attrs = e->attrs;
    a->training = e->training;
    for (int i = 0; i < n; i++) {
        const teeny__earg *g = &args[i];
        if (g->flags & TEENY__EA_OUT)
            a->out[g->slot] = (teeny_tensor *)g->t;
        else
            a->in[g->slot] = g->t;
        if (g->flags & TEENY__EA_UPDATED)
            a->out[teeny__slot_out_state(sl) + g->slot - teeny__slot_state(sl)] = (teeny_tensor *)g->t;
    }
    return TEENY_OK;
}

teeny_status teeny__eager_run(teeny_ctx *ctx, const teeny__eager *e, const teeny__earg *args, int n)
{
    teeny__op_args a;
    teeny_status st = teeny__eager_check(ctx, e, args, n, &a);
    return st == TEENY_OK ? teeny__op_exec(ctx, e->pass, &a) : st;
}
