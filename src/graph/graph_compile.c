/*
 * graph_compile.c -- teeny_graph_compile as four named phases run in order
 * on a fresh plan: shape inference for the plan's batch, backward
 * derivation (which nodes take part, where each gradient contribution
 * goes, how many accumulation temporaries that takes), liveness and memory
 * planning (graph_plan.c), and recording every pass as a replayable list
 * of launches (the backward pass itself is recorded by autograd.c). Each
 * phase states what it takes and what it guarantees, and is declared in
 * graph_internal.h so tests/test_graph.c can run it alone. The schedule of
 * a training plan has 2n steps for n nodes: forward of node i at step i,
 * backward of node i at step 2n-1-i (teeny__bwd_step).
 */
#include <stddef.h>
#include <string.h>

#include "graph_internal.h"

static teeny_status no_memory(teeny_ctx *ctx)
{
    return teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_graph_compile: out of host memory");
}

/* Takes: a graph with at least one node and checked plan parameters.
 * Guarantees: on TEENY_OK *out is a plan whose per-node arrays (shapes,
 * value, saved, grad) are allocated and zeroed, and nothing else; the
 * graph is not touched. */
teeny_status teeny__plan_alloc(teeny_graph *g, int64_t batch, int training, teeny_node loss, int reuse,
                               teeny_plan **out)
{
    int n = g->n_nodes;
    teeny_plan *p = teeny__calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return no_memory(g->ctx);
    p->g = g;
    p->ctx = g->ctx;
    p->batch = batch;
    p->training = training != 0;
    p->loss = loss;
    p->reuse = reuse != 0;
    p->shapes = teeny__calloc((size_t)n, sizeof *p->shapes);
    p->value = teeny__calloc((size_t)n, sizeof *p->value);
    p->saved = teeny__calloc((size_t)n, sizeof *p->saved);
    p->grad = teeny__calloc((size_t)n, sizeof *p->grad);
    if (!p->shapes || !p->value || !p->saved || !p->grad) {
        teeny__plan_free(p);
        return no_memory(g->ctx);
    }
    *out = p;
    return TEENY_OK;
}

void teeny__plan_free(teeny_plan *p)
{
    teeny_graph *g = p->g;
    int n = g->n_nodes;
    if (p->rec)
        teeny__recorder_free(p->rec);
    for (int i = 0; p->value && i < n; i++)
        teeny_tensor_destroy(p->value[i]);
    for (int i = 0; p->saved && i < n; i++)
        for (int j = 0; j < TEENY__OP_MAX_SLOTS; j++)
            teeny_tensor_destroy(p->saved[i][j]);
    for (int i = 0; p->grad && i < n; i++)
        teeny_tensor_destroy(p->grad[i]);
    for (int i = 0; i < p->n_temps; i++)
        teeny_tensor_destroy(p->temps[i]);
    teeny_tensor_destroy(p->arena);
    if (p->loss_event)
        TEENY_CL_RELEASE(clReleaseEvent, p->loss_event);
    TEENY__FREE_ALL(p->temps, p->shapes, p->value, p->saved, p->grad, p);
}

void teeny_plan_destroy(teeny_plan *p)
{
    if (!p)
        return;
    p->g->n_plans--;
    teeny__plan_free(p);
}

/* Phase 1, shape inference.
 * Takes: a plan from teeny__plan_alloc (its batch and loss node set).
 * Guarantees: on TEENY_OK p->shapes[i] holds node i's shapes for the
 * plan's batch (inputs get the batch as dimension 0, views and ops are
 * re-inferred from their inputs in node order), every value and every
 * saved tensor the plan keeps has sizes >= 1 and fits int32 indexing,
 * and a training plan's loss is a float scalar. Only p->shapes is
 * written. */
teeny_status teeny__compile_shapes(teeny_plan *p)
{
    teeny_graph *g = p->g;
    for (int i = 0; i < g->n_nodes; i++) {
        teeny__gnode *n = &g->nodes[i];
        teeny__node_shapes *s = &p->shapes[i];
        *s = n->shapes;
        if (n->kind == TEENY__NODE_CONST)
            continue;
        if (n->kind == TEENY__NODE_INPUT) {
            int64_t numel;
            if (!n->fixed)
                s->out.shape[0] = p->batch;
            numel = teeny__shape_numel(&s->out);
            if (numel < 0 || numel > INT32_MAX)
                return teeny__error(g->ctx, TEENY_ERR_RANGE, "input %s: batch %lld exceeds int32 indexing", n->name,
                                    (long long)p->batch);
            continue;
        }
        for (int j = 0; j < n->n_in; j++)
            s->in[j] = p->shapes[n->in[j]].out;
        if (n->kind == TEENY__NODE_VIEW) {
            teeny_status st = teeny__view_shape(g->ctx, n->name, n->view_ndim, n->view_shape,
                                                teeny__shape_numel(&s->in[0]), &s->out);
            if (st != TEENY_OK)
                return st;
            continue;
        }
        teeny_status st = teeny__ops[n->op].infer(g->ctx, s);
        if (st != TEENY_OK) {
            char msg[512];
            teeny__strlcpy(msg, teeny_last_error(g->ctx), sizeof msg);
            return teeny__error(g->ctx, st, "compile for batch %lld: node %s: %s", (long long)p->batch, n->name, msg);
        }
        if ((st = teeny__check_node_shapes(g->ctx, n->name, s, p->batch, p->training || !s->saved_needs_training)) !=
            TEENY_OK)
            return st;
    }
    const teeny__shape *ls = &p->shapes[p->loss].out;
    if (p->training && (ls->ndim < 1 || teeny__shape_numel(ls) != 1 || ls->is_i32)) {
        char b[96];
        return teeny__error(g->ctx, TEENY_ERR_SHAPE,
                            "teeny_graph_compile: loss node %s has shape %s; training needs a scalar (to run the "
                            "graph for inference, set pp.training = 0: TEENY_PLAN_PARAMS_INIT means training)",
                            g->nodes[p->loss].name, teeny__shape_text(ls, b, sizeof b));
    }
    return TEENY_OK;
}

void teeny__backward_free(teeny__backward *bw)
{
    TEENY__FREE_ALL(bw->reaches, bw->grad_def, bw->grad_share, bw->contrib, bw->pcontrib, bw->pwritten);
    memset(bw, 0, sizeof *bw);
}

/* Where each contribution goes: the first one to reach an input's gradient
 * in backward order (reverse node order) defines it; the others go
 * through temporaries numbered in that same order. */
static void route_contributions(const teeny_plan *p, teeny__backward *bw)
{
    const teeny_graph *g = p->g;
    int n = g->n_nodes;
    int *reaches = bw->reaches, *grad_def = bw->grad_def;
    grad_def[p->loss] = teeny__bwd_step(g, p->loss);
    for (int i = n - 1; i >= 0; i--) {
        if (!reaches[i])
            continue;
        for (int j = 0; j < g->nodes[i].n_in; j++) {
            int u = g->nodes[i].in[j];
            teeny__contrib *c = &bw->contrib[i * TEENY__OP_MAX_SLOTS + j];
            if (!reaches[u])
                continue;
            int dup = 0;
            for (int k = 0; k < j; k++)
                dup |= g->nodes[i].in[k] == u;
            if (grad_def[u] < 0 && !dup) {
                grad_def[u] = teeny__bwd_step(g, i);
                c->kind = TEENY__CONTRIB_GRAD;
            } else {
                c->kind = TEENY__CONTRIB_TEMP;
                c->temp = bw->n_temps++;
            }
        }
    }
}

/* A view's or PASS op's (ops.def) gradient is its inputs' own: where it is
 * an input's first contribution (GRAD), the input's gradient can share the
 * node's gradient buffer (ALIAS) instead of receiving a copy. Gradients
 * sharing one buffer form a class: a root (written by a GRAD) and aliases
 * under it, each live from its birth (the root: grad_def; an alias: its
 * pass-through node's backward step, where its value is that node's) to
 * its own node's backward step. After its birth a gradient is written only
 * by the accumulations of its TEMP contributions, each added after its
 * node's backward ran, at that node's step w; such a write into X
 * clobbers Y of X's class if birth(Y) <= w < last(Y) (at w == last(Y) the
 * writer is Y's own node, which has read Y already). An input joins the
 * class only where that holds both ways with every member; else it keeps
 * its GRAD (a copy). ws[ws_at[u] .. ws_at[u + 1]) are u's TEMP steps. */
static int written_within(const int *ws_at, const int *ws, int u, int from, int to)
{
    for (int k = ws_at[u]; k < ws_at[u + 1]; k++)
        if (ws[k] >= from && ws[k] < to)
            return 1;
    return 0;
}

static int may_share(const teeny_plan *p, const teeny__backward *bw, const int *birth, const int *ws_at,
                     const int *ws, int u, int i)
{
    const teeny_graph *g = p->g;
    int root = i, last_u = teeny__bwd_step(g, u), born = teeny__bwd_step(g, i);
    while (bw->grad_share[root] >= 0)
        root = bw->grad_share[root];
    for (int y = 0; y < g->n_nodes; y++) {
        int r = y;
        while (bw->grad_share[r] >= 0)
            r = bw->grad_share[r];
        if (r != root || bw->grad_def[y] < 0)
            continue;
        if (written_within(ws_at, ws, u, birth[y], teeny__bwd_step(g, y)) ||
            written_within(ws_at, ws, y, born, last_u))
            return 0;
    }
    return 1;
}

static teeny_status route_aliases(const teeny_plan *p, teeny__backward *bw)
{
    const teeny_graph *g = p->g;
    int n = g->n_nodes;
    int *birth = teeny__calloc((size_t)n, sizeof *birth), *ws_at = teeny__calloc((size_t)n + 2, sizeof *ws_at);
    int *ws = teeny__calloc((size_t)bw->n_temps + 1, sizeof *ws);
    if (!birth || !ws_at || !ws) {
        teeny__free(birth);
        teeny__free(ws_at);
        teeny__free(ws);
        return no_memory(g->ctx);
    }
    /* the TEMP steps by input: counted at ws_at[u + 2], summed so that u's
     * start is at ws_at[u + 1], filled so that it moves to ws_at[u] */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < g->nodes[i].n_in; j++)
                if (bw->contrib[i * TEENY__OP_MAX_SLOTS + j].kind == TEENY__CONTRIB_TEMP) {
                    int u = g->nodes[i].in[j];
                    if (pass == 0)
                        ws_at[u + 2]++;
                    else
                        ws[ws_at[u + 1]++] = teeny__bwd_step(g, i);
                }
        for (int u = 0; pass == 0 && u < n; u++)
            ws_at[u + 2] += ws_at[u + 1];
    }
    for (int u = 0; u < n; u++)
        birth[u] = bw->grad_def[u];
    for (int i = n - 1; i >= 0; i--) {
        const teeny__gnode *nd = &g->nodes[i];
        if (!bw->reaches[i] || bw->grad_def[i] < 0 ||
            !(nd->kind == TEENY__NODE_VIEW || (nd->kind == TEENY__NODE_OP && teeny__ops[nd->op].grad_passes)))
            continue;
        for (int j = 0; j < nd->n_in; j++) {
            teeny__contrib *c = &bw->contrib[i * TEENY__OP_MAX_SLOTS + j];
            int u = nd->in[j];
            if (c->kind != TEENY__CONTRIB_GRAD ||
                teeny__shape_numel(&p->shapes[u].out) != teeny__shape_numel(&p->shapes[i].out) ||
                !may_share(p, bw, birth, ws_at, ws, u, i))
                continue;
            c->kind = TEENY__CONTRIB_ALIAS;
            bw->grad_share[u] = i;
            birth[u] = teeny__bwd_step(g, i);
        }
    }
    teeny__free(birth);
    teeny__free(ws_at);
    teeny__free(ws);
    return TEENY_OK;
}

/* Where each parameter gradient goes: a reaching node's backward writes
 * the gradient of each of its parameter slots; the first in reverse node
 * order (slot order within a node) to reach a parameter defines its
 * gradient, every later use of a tied parameter goes through a temporary
 * numbered after the values' ones. */
static void route_params(const teeny_plan *p, teeny__backward *bw)
{
    const teeny_graph *g = p->g;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        if (!bw->reaches[i] || g->nodes[i].kind != TEENY__NODE_OP)
            continue;
        for (int j = 0; j < p->shapes[i].n_param; j++) {
            teeny__slot_ref r = teeny__graph_param_root(g, i, j);
            teeny__contrib *c = &bw->pcontrib[i * TEENY__OP_MAX_SLOTS + j];
            if (!bw->pwritten[r.node * TEENY__OP_MAX_SLOTS + r.slot]) {
                bw->pwritten[r.node * TEENY__OP_MAX_SLOTS + r.slot] = 1;
                c->kind = TEENY__CONTRIB_GRAD;
            } else {
                c->kind = TEENY__CONTRIB_TEMP;
                c->temp = bw->n_temps++;
            }
        }
    }
}

/* Phase 2, backward derivation.
 * Takes: a plan whose shapes are inferred (phase 1); bw is overwritten.
 * Guarantees: on TEENY_OK bw's arrays are allocated (free them with
 * teeny__backward_free, also after a failure). For an inference plan
 * nothing reaches, no gradient is defined and every contribution is NONE.
 * For a training plan reaches[i] is set exactly for nodes that have a
 * parameter at or upstream of them and lie upstream of the loss;
 * grad_def[u] is the backward step of u's latest consumer on that path
 * (the loss: its own backward step); every contribution of a reaching
 * node to a reaching input is GRAD for exactly one (node, slot) per input
 * and TEMP, with temp numbered in reverse node order, for every other;
 * every parameter slot of a reaching node has a pcontrib: GRAD for exactly
 * one use of each parameter (pwritten at its owner slot), TEMP for every
 * other use of a tied one, numbered after the values' temporaries up to
 * n_temps - 1; and every owned parameter slot has its graph-owned gradient
 * tensor (a tied slot has none: its uses write the owner's). */
teeny_status teeny__compile_backward(teeny_plan *p, teeny__backward *bw)
{
    teeny_graph *g = p->g;
    teeny_ctx *ctx = g->ctx;
    int n = g->n_nodes;
    teeny_status st = TEENY_OK;
    int *needs = teeny__calloc((size_t)n, sizeof *needs);
    memset(bw, 0, sizeof *bw);
    bw->reaches = teeny__calloc((size_t)n, sizeof *bw->reaches);
    bw->grad_def = teeny__calloc((size_t)n, sizeof *bw->grad_def);
    bw->grad_share = teeny__calloc((size_t)n, sizeof *bw->grad_share);
    bw->contrib = teeny__calloc((size_t)n * TEENY__OP_MAX_SLOTS, sizeof *bw->contrib);
    bw->pcontrib = teeny__calloc((size_t)n * TEENY__OP_MAX_SLOTS, sizeof *bw->pcontrib);
    bw->pwritten = teeny__calloc((size_t)n * TEENY__OP_MAX_SLOTS, sizeof *bw->pwritten);
    if (!needs || !bw->reaches || !bw->grad_def || !bw->grad_share || !bw->contrib || !bw->pcontrib ||
        !bw->pwritten) {
        teeny__free(needs);
        return no_memory(ctx);
    }
    int *reaches = bw->reaches;
    for (int i = 0; i < n; i++) {
        bw->grad_def[i] = bw->grad_share[i] = -1;
        for (int j = 0; j < TEENY__OP_MAX_SLOTS; j++)
            bw->contrib[i * TEENY__OP_MAX_SLOTS + j] = bw->pcontrib[i * TEENY__OP_MAX_SLOTS + j] =
                (teeny__contrib){TEENY__CONTRIB_NONE, -1};
    }
    /* which nodes take part in backward */
    for (int i = 0; i < n; i++) {
        const teeny__gnode *nd = &g->nodes[i];
        for (int j = 0; nd->kind == TEENY__NODE_OP && j < p->shapes[i].n_param; j++) {
            teeny__slot_ref r = teeny__graph_param_root(g, i, j);
            needs[i] |= !g->nodes[r.node].frozen[r.slot]; /* a frozen parameter asks for no gradient */
        }
        for (int j = 0; j < nd->n_in; j++)
            needs[i] |= needs[nd->in[j]];
    }
    if (p->training) {
        reaches[p->loss] = 1;
        for (int i = n - 1; i >= 0; i--)
            if (reaches[i])
                for (int j = 0; j < g->nodes[i].n_in; j++)
                    reaches[g->nodes[i].in[j]] = 1;
        for (int i = 0; i < n; i++)
            reaches[i] &= needs[i];
        /* parameter gradients (graph-owned, shared by plans) */
        for (int i = 0; i < n && st == TEENY_OK; i++)
            for (int j = 0; j < p->shapes[i].n_param && st == TEENY_OK; j++)
                if (teeny__graph_slot_owned(g, i, 0, j) && !g->nodes[i].param_grad[j])
                    st = teeny_tensor_create(ctx, p->shapes[i].param[j].ndim, p->shapes[i].param[j].shape,
                                             &g->nodes[i].param_grad[j]);
        if (st == TEENY_OK) {
            route_contributions(p, bw);
            st = route_aliases(p, bw);
            route_params(p, bw);
        }
    }
    teeny__free(needs);
    return st;
}

/* Each op node's forward, in node order, into the recorder. */
static teeny_status record_forward(teeny_plan *p)
{
    teeny_status st = TEENY_OK;
    for (int i = 0; i < p->g->n_nodes && st == TEENY_OK; i++)
        if (p->g->nodes[i].kind == TEENY__NODE_OP && (st = teeny__node_label(p, i, 0)) == TEENY_OK)
            st = teeny__node_run(p, i, 0, NULL, NULL);
    return st;
}

/* Phase 4, recording.
 * Takes: a plan whose tensors are bound (phase 3: every value, saved
 * tensor, gradient and temporary exists) and the derivation bw (phase 2).
 * Guarantees: on TEENY_OK p->rec holds, in order, the forward pass
 * [fwd_from, fwd_to) (each op node's forward, node order), the backward
 * pass [bwd_from, bwd_to) (empty for inference; autograd.c: a zero fill of
 * each parameter gradient the loss does not reach, then the nodes'
 * backward launches, so it writes every parameter gradient) and the
 * parameter-gradient zeroing [zero_from, zero_to) (one fill per parameter
 * of a training plan; a tied slot is no parameter of its own); ranges are adjacent. Recording is off on return,
 * whatever the status. */
teeny_status teeny__compile_record(teeny_plan *p, const teeny__backward *bw)
{
    teeny_graph *g = p->g;
    teeny_ctx *ctx = p->ctx;
    int n = g->n_nodes;
    teeny_status st;
    if ((st = teeny__recorder_create(ctx, &p->rec)) != TEENY_OK)
        return st;
    teeny__record_begin(ctx, p->rec);
    p->fwd_from = teeny__recorder_count(p->rec);
    st = record_forward(p);
    p->fwd_to = p->bwd_from = teeny__recorder_count(p->rec);
    if (st == TEENY_OK && p->training)
        st = teeny__autograd_plan(p, bw);
    p->bwd_to = p->zero_from = teeny__recorder_count(p->rec);
    for (int i = 0; i < n && st == TEENY_OK && p->training; i++)
        for (int j = 0; j < p->shapes[i].n_param && st == TEENY_OK; j++) {
            teeny_tensor *t = g->nodes[i].param_grad[j];
            if (teeny__graph_slot_owned(g, i, 0, j))
                st = teeny__fill(ctx, t->buf, t->offset, (size_t)t->numel, 0.0f);
        }
    p->zero_to = teeny__recorder_count(p->rec);
    teeny__record_end(ctx);
    return st;
}

/* teeny_graph_compile and _ex: params checked here, frozen (0 or 1) by
 * the caller. A frozen plan enqueues its setup launches once compiled. */
static teeny_status compile(teeny_graph *g, const teeny_plan_params *params, int frozen, const char *fn,
                            teeny_plan **out)
{
    teeny_plan *p = NULL;
    teeny_ctx *ctx = g->ctx;
    teeny__backward bw = {0};
    teeny__memplan mp = {0};
    teeny_status st;
    if (!out || !params)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s is NULL", fn, !out ? "out" : "params");
    *out = NULL;
    if (params->batch < 1 || params->batch > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: batch %lld", fn, (long long)params->batch);
    if (frozen && params->training)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: frozen parameters are for inference plans (training is 1)", fn);
    if (g->n_nodes == 0)
        return teeny__error(ctx, TEENY_ERR_STATE, "%s: the graph is empty", fn);
    int n = g->n_nodes;
    teeny_node loss = params->loss < 0 ? n - 1 : params->loss;
    if (loss >= n)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: loss node %d does not exist", fn, (int)loss);

    if ((st = teeny__plan_alloc(g, params->batch, params->training, loss, params->reuse_memory, &p)) != TEENY_OK)
        return st;
    p->frozen = frozen;
    if ((st = teeny__compile_shapes(p)) == TEENY_OK && (st = teeny__compile_backward(p, &bw)) == TEENY_OK &&
        (st = teeny__compile_memory(p, &bw, &mp)) == TEENY_OK && (st = teeny__compile_record(p, &bw)) == TEENY_OK &&
        (st = teeny__recorder_replay_setup(ctx, p->rec)) == TEENY_OK) {
        g->n_plans++;
        *out = p;
    } else {
        teeny__plan_free(p);
    }
    teeny__memplan_free(&mp);
    teeny__backward_free(&bw);
    return st;
}

teeny_status teeny_graph_compile(teeny_graph *g, const teeny_plan_params *params, teeny_plan **out)
{
    teeny_status st = teeny__graph_check(g, "teeny_graph_compile");
    return st != TEENY_OK ? st : compile(g, params, 0, "teeny_graph_compile", out);
}

/* The smallest struct_size teeny_graph_compile_ex takes: 0.2's layout. */
#define PLAN_OPTIONS_MIN (offsetof(teeny_plan_options, frozen_params) + sizeof(int))

teeny_status teeny_graph_compile_ex(teeny_graph *g, const teeny_plan_params *params, const teeny_plan_options *opts,
                                    teeny_plan **out)
{
    static const char fn[] = "teeny_graph_compile_ex";
    teeny_status st = teeny__graph_check(g, fn);
    if (st != TEENY_OK)
        return st;
    if (out)
        *out = NULL;
    if (opts && opts->struct_size < PLAN_OPTIONS_MIN)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "%s: opts->struct_size %zu is below %zu, the smallest layout", fn,
                            opts->struct_size, (size_t)PLAN_OPTIONS_MIN);
    int frozen = opts ? opts->frozen_params : 0;
    if (frozen != 0 && frozen != 1)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "%s: frozen_params %d is not 0 or 1", fn, frozen);
    return compile(g, params, frozen, fn, out);
}
