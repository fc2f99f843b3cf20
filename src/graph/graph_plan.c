/*
 * graph_plan.c -- liveness and memory planning, phase 3 of a compile.
 * Every value, saved tensor, gradient and accumulation temporary of a plan
 * is a buffer with a definition step and a last-use step in the plan's
 * schedule (forward of node i at step i, backward at 2n-1-i); buffers
 * whose lifetimes do not overlap share memory in one arena (first fit,
 * 256-byte aligned), and each tensor is then a view of the arena at its
 * buffer's offset. Parameters, their gradients, running statistics and
 * input tensors live outside the arena (constants in the graph). Also teeny__node_run, a node's
 * pass on its planned tensors laid out in its op's slots (the forward
 * and backward recordings use it). Depends only on graph.c's helpers and the
 * derivation in graph_internal.h, never on the other phases.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

#define ALIGN_ELEMS 64 /* 256 bytes */

static teeny_status no_memory(teeny_ctx *ctx)
{
    return teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_graph_compile: out of host memory");
}

static int buf_add(teeny__memplan *l, size_t numel, int def, int last)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        teeny__pbuf *p = teeny__malloc((size_t)cap * sizeof *p);
        if (!p) {
            l->failed = 1;
            return -1;
        }
        if (l->n)
            memcpy(p, l->bufs, (size_t)l->n * sizeof *p);
        teeny__free(l->bufs);
        l->bufs = p;
        l->cap = cap;
    }
    l->bufs[l->n] = (teeny__pbuf){numel, def, last, 0};
    return l->n++;
}

void teeny__memplan_free(teeny__memplan *mp)
{
    TEENY__FREE_ALL(mp->bufs, mp->value_buf, mp->saved_buf, mp->grad_buf, mp->temp_buf);
    memset(mp, 0, sizeof *mp);
}

/* Values and saved tensors: defined at their node's forward step, last
 * used by their consumers' forward and backward steps, their own backward,
 * or the end of the schedule for outputs and the loss. */
static teeny_status plan_values(const teeny_plan *p, const int *reaches, teeny__memplan *mp)
{
    const teeny_graph *g = p->g;
    int n = g->n_nodes, T = 2 * n;
    teeny_node loss = p->loss;
    for (int i = 0; i < n; i++) {
        const teeny__gnode *nd = &g->nodes[i];
        if (nd->kind != TEENY__NODE_OP)
            continue;
        mp->value_buf[i] = buf_add(mp, (size_t)teeny__shape_numel(&p->shapes[i].out), i, i);
        if (p->training || !p->shapes[i].saved_needs_training)
            for (int j = 0; j < p->shapes[i].n_saved; j++)
                mp->saved_buf[i * TEENY__OP_MAX_SLOTS + j] =
                    buf_add(mp, (size_t)teeny__shape_numel(&p->shapes[i].saved[j]), i,
                            p->training && reaches[i] ? teeny__bwd_step(g, i) : i);
        if (mp->value_buf[i] < 0)
            return no_memory(g->ctx);
    }
    /* last uses: consumers' forward and backward steps, own backward, outputs */
    for (int i = 0; i < n; i++) {
        const teeny__gnode *nd = &g->nodes[i];
        int own = teeny__graph_root(g, i);
        if (mp->value_buf[own] < 0)
            continue; /* inputs are not planned */
        int last = i;
        if (p->training && reaches[i])
            last = teeny__bwd_step(g, i);
        if (nd->is_output || i == loss)
            last = T;
        if (mp->bufs[mp->value_buf[own]].last < last)
            mp->bufs[mp->value_buf[own]].last = last;
        for (int j = 0; j < nd->n_in; j++) {
            int r = teeny__graph_root(g, nd->in[j]);
            if (mp->value_buf[r] < 0)
                continue;
            int use = p->training && reaches[i] ? teeny__bwd_step(g, i) : i;
            if (mp->bufs[mp->value_buf[r]].last < use)
                mp->bufs[mp->value_buf[r]].last = use;
        }
    }
    return TEENY_OK;
}

/* Phase 3a, liveness.
 * Takes: a plan with shapes (phase 1) and its derivation bw (phase 2); mp
 * is overwritten (free it with teeny__memplan_free, also after a failure).
 * Guarantees: on TEENY_OK mp->bufs holds one buffer, with def <= last, per
 * op node's value (value_buf; -1 for inputs and views, which are not
 * planned), per saved tensor the plan keeps (saved_buf), per accumulation
 * temporary (temp_buf[k] for bw's temp k: live only during its consumer's
 * backward step) and per defined gradient (grad_buf: from grad_def to its
 * node's own backward step) that shares no other's (grad_share: then its
 * grad_buf is the sharer's, live to its own backward step as well).
 * Buffers are added in that order (values and saved tensors by node,
 * value temporaries in backward order, gradients by node, then tied
 * parameters' temporaries in backward order), which placement's
 * tie-breaking depends on. Offsets are not set. */
teeny_status teeny__compile_liveness(const teeny_plan *p, const teeny__backward *bw, teeny__memplan *mp)
{
    const teeny_graph *g = p->g;
    int n = g->n_nodes;
    teeny_status st;
    memset(mp, 0, sizeof *mp);
    mp->value_buf = teeny__calloc((size_t)n, sizeof *mp->value_buf);
    mp->saved_buf = teeny__calloc((size_t)n * TEENY__OP_MAX_SLOTS, sizeof *mp->saved_buf);
    mp->grad_buf = teeny__calloc((size_t)n, sizeof *mp->grad_buf);
    mp->temp_buf = teeny__calloc((size_t)bw->n_temps + 1, sizeof *mp->temp_buf);
    if (!mp->value_buf || !mp->saved_buf || !mp->grad_buf || !mp->temp_buf)
        return no_memory(g->ctx);
    for (int i = 0; i < n; i++) {
        mp->value_buf[i] = mp->grad_buf[i] = -1;
        for (int j = 0; j < TEENY__OP_MAX_SLOTS; j++)
            mp->saved_buf[i * TEENY__OP_MAX_SLOTS + j] = -1;
    }
    for (int k = 0; k < bw->n_temps; k++)
        mp->temp_buf[k] = -1;
    if ((st = plan_values(p, bw->reaches, mp)) != TEENY_OK)
        return st;
    if (p->training) {
        /* a temporary lives only in the backward step that writes and adds it */
        for (int i = n - 1; i >= 0; i--)
            for (int j = 0; j < g->nodes[i].n_in; j++) {
                teeny__contrib c = bw->contrib[i * TEENY__OP_MAX_SLOTS + j];
                if (c.kind == TEENY__CONTRIB_TEMP)
                    mp->temp_buf[c.temp] = buf_add(mp, (size_t)teeny__shape_numel(&p->shapes[g->nodes[i].in[j]].out),
                                                   teeny__bwd_step(g, i), teeny__bwd_step(g, i));
            }
        /* gradients: defined by the first (latest-node) contribution, dead after own backward; one that
         * shares a later node's buffer (grad_share) keeps that buffer live to its own backward */
        for (int i = 0; i < n; i++)
            if (bw->reaches[i] && bw->grad_def[i] >= 0 && bw->grad_share[i] < 0)
                mp->grad_buf[i] = buf_add(mp, (size_t)teeny__shape_numel(&p->shapes[i].out), bw->grad_def[i],
                                          teeny__bwd_step(g, i));
        for (int i = n - 1; i >= 0; i--)
            if (bw->grad_share[i] >= 0 && (mp->grad_buf[i] = mp->grad_buf[bw->grad_share[i]]) >= 0 &&
                mp->bufs[mp->grad_buf[i]].last < teeny__bwd_step(g, i))
                mp->bufs[mp->grad_buf[i]].last = teeny__bwd_step(g, i);
        /* a tied parameter's later uses: live in their node's backward step (added last, so untied plans keep
         * their placement) */
        for (int i = n - 1; i >= 0; i--)
            for (int j = 0; j < p->shapes[i].n_param; j++) {
                teeny__contrib c = bw->pcontrib[i * TEENY__OP_MAX_SLOTS + j];
                if (c.kind == TEENY__CONTRIB_TEMP)
                    mp->temp_buf[c.temp] = buf_add(mp, (size_t)teeny__shape_numel(&p->shapes[i].param[j]),
                                                   teeny__bwd_step(g, i), teeny__bwd_step(g, i));
            }
    }
    return mp->failed ? no_memory(g->ctx) : TEENY_OK;
}

/* Phase 3b, placement.
 * Takes: n buffers with numel, def and last set.
 * Guarantees: every buffer's offset is a multiple of 64 elements (256
 * bytes); with reuse, no two buffers whose [def, last] intervals overlap
 * overlap in memory, and each takes the lowest offset that allows that
 * (buffers placed by definition step, larger first within a step); without
 * reuse, buffers are laid end to end. Returns the peak (end of the highest
 * buffer), never more than the sum of the aligned sizes, or (size_t)-1 when
 * host memory runs out. */
typedef struct {
    int def, idx;
    size_t numel;
} place_key;

/* By definition step, larger first within a step, then by index: the
 * order a stable sort on the first two gives. */
static int place_cmp(const void *pa, const void *pb)
{
    const place_key *a = pa, *b = pb;
    if (a->def != b->def)
        return a->def < b->def ? -1 : 1;
    if (a->numel != b->numel)
        return a->numel > b->numel ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static size_t aligned(size_t numel)
{
    return (numel + ALIGN_ELEMS - 1) / ALIGN_ELEMS * ALIGN_ELEMS;
}

/* The lowest offset for x that collides with no live buffer of active[]
 * (placed before x, in placement order); first drops from active[] every
 * buffer that ends before x starts, which no later buffer (defined no
 * earlier) can meet either, so placing n buffers costs O(n * live), not
 * O(n^2), with the offsets a scan over every placed buffer gives. */
static size_t lowest_free(teeny__pbuf *b, int *active, int *n_active, const teeny__pbuf *x)
{
    size_t off = 0, size = aligned(x->numel);
    int kept = 0;
    for (int a = 0; a < *n_active; a++)
        if (b[active[a]].last >= x->def)
            active[kept++] = active[a];
    *n_active = kept;
    for (;;) {
        int moved = 0;
        for (int a = 0; a < kept; a++) {
            const teeny__pbuf *y = &b[active[a]];
            int live = !(y->last < x->def || x->last < y->def);
            if (live && off < y->offset + aligned(y->numel) && y->offset < off + size) {
                off = y->offset + aligned(y->numel);
                moved = 1;
            }
        }
        if (!moved)
            return off;
    }
}

size_t teeny__plan_place(teeny__pbuf *b, int n, int reuse)
{
    size_t peak = 0, next = 0;
    int n_active = 0;
    place_key *order = teeny__malloc((size_t)(n ? n : 1) * sizeof *order);
    int *active = teeny__malloc((size_t)(n ? n : 1) * sizeof *active);
    if (!order || !active) {
        teeny__free(order);
        teeny__free(active);
        return (size_t)-1;
    }
    for (int i = 0; i < n; i++)
        order[i] = (place_key){b[i].def, i, b[i].numel};
    qsort(order, (size_t)n, sizeof *order, place_cmp);
    for (int oi = 0; oi < n; oi++) {
        teeny__pbuf *x = &b[order[oi].idx];
        size_t size = aligned(x->numel);
        if (!reuse) {
            x->offset = next;
            next += size;
            peak = next;
            continue;
        }
        x->offset = lowest_free(b, active, &n_active, x);
        active[n_active++] = order[oi].idx;
        if (x->offset + size > peak)
            peak = x->offset + size;
    }
    teeny__free(order);
    teeny__free(active);
    return peak;
}

/* A view of the arena for a planned buffer. */
static teeny_status arena_view(teeny_plan *p, const teeny__pbuf *b, const teeny__shape *s, teeny_tensor **out)
{
    return teeny_tensor_view(p->arena, (int64_t)b->offset, s->ndim, s->shape, out);
}

/* Every planned tensor of p as a view of the arena; inputs get their own
 * tensors and views share their input's storage. */
static teeny_status bind_tensors(teeny_plan *p, const teeny__backward *bw, const teeny__memplan *mp)
{
    teeny_graph *g = p->g;
    teeny_ctx *ctx = p->ctx;
    int n = g->n_nodes;
    teeny_status st = TEENY_OK;
    for (int i = 0; i < n && st == TEENY_OK; i++) {
        const teeny__gnode *nd = &g->nodes[i];
        const teeny__shape *s = &p->shapes[i].out;
        if (nd->kind == TEENY__NODE_INPUT)
            st = s->is_i32 ? teeny_tensor_create_i32(ctx, s->ndim, s->shape, &p->value[i])
                           : teeny_tensor_create(ctx, s->ndim, s->shape, &p->value[i]);
        else if (nd->kind == TEENY__NODE_VIEW)
            st = teeny_tensor_view(p->value[nd->in[0]], 0, s->ndim, s->shape, &p->value[i]);
        else if (nd->kind == TEENY__NODE_CONST)
            st = teeny_tensor_view(nd->constant, 0, s->ndim, s->shape, &p->value[i]);
        else if ((st = arena_view(p, &mp->bufs[mp->value_buf[i]], s, &p->value[i])) == TEENY_OK && s->is_i32)
            p->value[i]->dtype = TEENY__I32; /* an int32 value (indices) in the arena's 4-byte slots */
        for (int j = 0; j < TEENY__OP_MAX_SLOTS && st == TEENY_OK; j++) {
            int b = mp->saved_buf[i * TEENY__OP_MAX_SLOTS + j];
            if (b >= 0) {
                const teeny__shape *ss = &p->shapes[i].saved[j];
                /* int32 saved tensors (argmax) share the arena's 4-byte slots */
                st = arena_view(p, &mp->bufs[b], ss, &p->saved[i][j]);
                if (st == TEENY_OK && ss->is_i32)
                    p->saved[i][j]->dtype = TEENY__I32;
            }
        }
        if (st == TEENY_OK && mp->grad_buf[i] >= 0)
            st = arena_view(p, &mp->bufs[mp->grad_buf[i]], s, &p->grad[i]);
    }
    if (st != TEENY_OK)
        return st;
    /* accumulation temporaries, indexed as bw's contributions name them */
    p->temps = teeny__calloc((size_t)bw->n_temps + 1, sizeof *p->temps);
    if (!p->temps)
        return no_memory(ctx);
    p->n_temps = bw->n_temps;
    for (int i = 0; i < n && st == TEENY_OK; i++)
        for (int j = 0; j < g->nodes[i].n_in && st == TEENY_OK; j++) {
            teeny__contrib c = bw->contrib[i * TEENY__OP_MAX_SLOTS + j];
            if (c.kind == TEENY__CONTRIB_TEMP)
                st = arena_view(p, &mp->bufs[mp->temp_buf[c.temp]], &p->shapes[g->nodes[i].in[j]].out,
                                &p->temps[c.temp]);
        }
    for (int i = 0; i < n && st == TEENY_OK; i++)
        for (int j = 0; j < p->shapes[i].n_param && st == TEENY_OK; j++) {
            teeny__contrib c = bw->pcontrib[i * TEENY__OP_MAX_SLOTS + j];
            if (c.kind == TEENY__CONTRIB_TEMP)
                st = arena_view(p, &mp->bufs[mp->temp_buf[c.temp]], &p->shapes[i].param[j], &p->temps[c.temp]);
        }
    return st;
}

/* Phase 3, liveness and memory planning.
 * Takes: a plan with shapes (phase 1) and derivation bw (phase 2); mp is
 * overwritten (free with teeny__memplan_free).
 * Guarantees: on TEENY_OK mp is the placed plan (3a, 3b); p->no_reuse_elems
 * is the sum of the aligned buffer sizes and p->peak_elems the placed peak
 * (equal without reuse, never larger with it); p->arena holds exactly
 * peak_elems (at least 1); and every value, saved tensor, gradient and
 * temporary of p exists (bind_tensors). */
teeny_status teeny__compile_memory(teeny_plan *p, const teeny__backward *bw, teeny__memplan *mp)
{
    teeny_status st = teeny__compile_liveness(p, bw, mp);
    if (st != TEENY_OK)
        return st;
    for (int i = 0; i < mp->n; i++)
        p->no_reuse_elems += (mp->bufs[i].numel + ALIGN_ELEMS - 1) / ALIGN_ELEMS * ALIGN_ELEMS;
    p->peak_elems = teeny__plan_place(mp->bufs, mp->n, p->reuse);
    if (p->peak_elems == (size_t)-1)
        return no_memory(p->ctx);
    int64_t arena = (int64_t)(p->peak_elems ? p->peak_elems : 1);
    if ((st = teeny_tensor_create(p->ctx, 1, &arena, &p->arena)) != TEENY_OK)
        return st;
    return bind_tensors(p, bw, mp);
}

/* Node i's tensors in its op's slots (ops.h): the forward's, or the
 * backward's with targets[j] receiving input j's gradient (NULL: not
 * wanted) and ptargets[j] parameter slot j's. */
static void node_args(const teeny_plan *p, int i, int backward, teeny_tensor *const *targets,
                      teeny_tensor *const *ptargets, teeny__op_args *a)
{
    const teeny__gnode *nd = &p->g->nodes[i];
    const teeny__node_shapes *s = &p->shapes[i];
    teeny__op_slots sl = teeny__op_slots_of(nd->op);
    memset(a, 0, sizeof *a);
    for (int j = 0; j < nd->n_in; j++)
        a->in[j] = p->value[nd->in[j]];
    for (int j = 0; j < s->n_param; j++)
        a->in[teeny__slot_param(sl) + j] = nd->param[j];
    for (int j = 0; j < s->n_state; j++)
        a->in[teeny__slot_state(sl) + j] = nd->state[j];
    a->attrs = s->attrs;
    if (!backward) {
        a->out[TEENY__OUT_VALUE] = p->value[i];
        for (int j = 0; j < s->n_saved; j++)
            a->out[1 + j] = p->saved[i][j];
        for (int j = 0; j < s->n_state; j++)
            a->out[teeny__slot_out_state(sl) + j] = nd->state[j];
        a->training = p->training;
        a->frozen = p->frozen;
        return;
    }
    a->in[teeny__slot_value(sl)] = p->value[i];
    for (int j = 0; j < s->n_saved; j++)
        a->in[teeny__slot_saved(sl) + j] = p->saved[i][j];
    a->in[teeny__slot_dvalue(sl)] = p->grad[i];
    for (int j = 0; j < nd->n_in; j++)
        a->out[j] = targets[j];
    for (int j = 0; j < s->n_param; j++)
        a->out[teeny__slot_param(sl) + j] = ptargets[j];
    a->training = 1;
}

teeny_status teeny__node_label(teeny_plan *p, int i, int backward)
{
    char label[TEENY__NAME_CAP + 16];
    snprintf(label, sizeof label, "%s%s", p->g->nodes[i].name, backward ? " (backward)" : "");
    return teeny__record_node(p->ctx, label);
}

teeny_status teeny__node_run(teeny_plan *p, int i, int backward, teeny_tensor *const *targets,
                             teeny_tensor *const *ptargets)
{
    const teeny__gnode *nd = &p->g->nodes[i];
    teeny__op_args a;
    node_args(p, i, backward, targets, ptargets, &a);
    teeny_status st = teeny__op_run(p->ctx, nd->op, backward, &a);
    if (st != TEENY_OK)
        st = teeny__error(p->ctx, st, "compile: %snode %s (%s): %s", backward ? "backward of " : "", nd->name,
                          teeny__ops[nd->op].name, teeny_last_error(p->ctx));
    return st;
}
