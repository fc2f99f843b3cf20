/*
 * autograd.c -- the backward pass of a training plan, recorded in reverse
 * topological order. Each node's backward overwrites the gradients it
 * produces; where a value fans out, the first contribution (from the
 * latest consumer) is written straight into the value's gradient and every
 * later one goes to a temporary that is then added in (fixed order, so
 * results are deterministic). Views pass their gradient through a copy.
 * Where each contribution goes (an input's gradient, an accumulation
 * temporary, the node's own gradient buffer, nowhere) was decided by the
 * backward derivation in graph_compile.c (teeny__contrib,
 * graph_internal.h): where a view's or an add's input shares the node's
 * gradient buffer (ALIAS) nothing is written for it, so such a view copies
 * nothing and such an add launches nothing. The pass opens with a zero
 * fill of every parameter gradient this plan's loss does not reach, so a
 * backward overwrites every parameter gradient (the header's contract)
 * even where several plans share the parameters. A tied
 * parameter's gradient is summed over its uses the same way: the first
 * use in backward order writes it, later ones go through temporaries.
 */
#include <string.h>

#include "graph_internal.h"

static teeny_status add_into(teeny_ctx *ctx, teeny_tensor *acc, teeny_tensor *t)
{
    teeny__op_args a;
    memset(&a, 0, sizeof a);
    a.in[TEENY__ADD_A] = acc;
    a.in[TEENY__ADD_B] = t;
    a.out[TEENY__OUT_VALUE] = acc;
    return teeny__op_run(ctx, TEENY__OP_ADD, 0, &a);
}

static teeny_status copy_into(teeny_ctx *ctx, const teeny_tensor *src, teeny_tensor *dst)
{
    teeny__op_args a;
    memset(&a, 0, sizeof a);
    a.in[TEENY__ACTIVATION_X] = src;
    a.out[TEENY__OUT_VALUE] = dst;
    a.attrs.activation.act = TEENY_ACT_NONE;
    return teeny__op_run(ctx, TEENY__OP_ACTIVATION, 0, &a);
}

/* Whether node i's backward runs in plan p: it lies on a path from a
 * parameter to the loss and something downstream produced its gradient. */
static int backward_runs(const teeny_plan *p, const teeny__backward *bw, int i)
{
    return bw->reaches[i] && p->g->nodes[i].kind != TEENY__NODE_INPUT && p->g->nodes[i].kind != TEENY__NODE_CONST &&
           p->grad[i];
}

/* Zero the gradient of every parameter no use of which has its backward
 * run (a head that feeds another plan's loss, a dead branch): a backward
 * overwrites every parameter gradient, so one another plan left behind
 * must not reach the next optimizer step. */
static teeny_status zero_unreached(teeny_plan *p, const teeny__backward *bw)
{
    teeny_graph *g = p->g;
    teeny_status st = TEENY_OK;
    for (int i = 0; i < g->n_nodes && st == TEENY_OK; i++)
        for (int j = 0; g->nodes[i].kind == TEENY__NODE_OP && j < p->shapes[i].n_param && st == TEENY_OK; j++) {
            teeny_tensor *t = g->nodes[i].param_grad[j];
            if (teeny__graph_slot_owned(g, i, 0, j) && !bw->pwritten[i * TEENY__OP_MAX_SLOTS + j])
                st = teeny__fill(p->ctx, t->buf, t->offset, (size_t)t->numel, 0.0f);
        }
    return st;
}

/* Where node i's backward writes each parameter slot's gradient: the
 * parameter's own gradient (the first use in backward order) or, for a
 * later use of a tied parameter, a temporary added into it afterwards. */
static void param_targets(const teeny_plan *p, const teeny__backward *bw, int i, teeny_tensor **ptarget)
{
    for (int j = 0; j < p->shapes[i].n_param; j++) {
        teeny__contrib c = bw->pcontrib[i * TEENY__OP_MAX_SLOTS + j];
        teeny__slot_ref r = teeny__graph_param_root(p->g, i, j);
        ptarget[j] = c.kind == TEENY__CONTRIB_TEMP ? p->temps[c.temp] : p->g->nodes[r.node].param_grad[r.slot];
    }
}

/* Add the gradients node i's backward left in temporaries (tied
 * parameters' later uses) into their parameters', in slot order. */
static teeny_status add_param_temps(teeny_plan *p, const teeny__backward *bw, int i)
{
    teeny_status st = TEENY_OK;
    for (int j = 0; j < p->shapes[i].n_param && st == TEENY_OK; j++) {
        teeny__contrib c = bw->pcontrib[i * TEENY__OP_MAX_SLOTS + j];
        teeny__slot_ref r = teeny__graph_param_root(p->g, i, j);
        if (c.kind == TEENY__CONTRIB_TEMP)
            st = add_into(p->ctx, p->g->nodes[r.node].param_grad[r.slot], p->temps[c.temp]);
    }
    return st;
}

teeny_status teeny__autograd_plan(teeny_plan *p, const teeny__backward *bw)
{
    teeny_graph *g = p->g;
    teeny_ctx *ctx = p->ctx;
    teeny_status st = zero_unreached(p, bw);
    for (int i = g->n_nodes - 1; i >= 0 && st == TEENY_OK; i--) {
        const teeny__gnode *nd = &g->nodes[i];
        teeny_tensor *target[TEENY__OP_MAX_SLOTS] = {0}, *ptarget[TEENY__OP_MAX_SLOTS] = {0};
        int via_temp[TEENY__OP_MAX_SLOTS] = {0};
        if (!backward_runs(p, bw, i))
            continue;
        if ((st = teeny__node_label(p, i, 1)) != TEENY_OK)
            break;
        if (i == p->loss) { /* d loss / d loss = 1 */
            teeny_tensor *d = p->grad[i];
            if ((st = teeny__fill(ctx, d->buf, d->offset, (size_t)d->numel, 1.0f)) != TEENY_OK)
                break;
        }
        for (int j = 0; j < nd->n_in; j++) {
            teeny__contrib c = bw->contrib[i * TEENY__OP_MAX_SLOTS + j];
            if (c.kind == TEENY__CONTRIB_NONE || c.kind == TEENY__CONTRIB_ALIAS)
                continue; /* ALIAS: the input's gradient is this node's, already in place */
            via_temp[j] = c.kind == TEENY__CONTRIB_TEMP;
            target[j] = via_temp[j] ? p->temps[c.temp] : p->grad[nd->in[j]];
        }
        if (nd->kind == TEENY__NODE_VIEW) {
            if (target[0])
                st = copy_into(ctx, p->grad[i], target[0]);
        } else {
            param_targets(p, bw, i, ptarget);
            if ((st = teeny__node_run(p, i, 1, target, ptarget)) == TEENY_OK)
                st = add_param_temps(p, bw, i);
        }
        for (int j = 0; j < nd->n_in && st == TEENY_OK; j++)
            if (via_temp[j])
                st = add_into(ctx, p->grad[nd->in[j]], target[j]);
    }
    return st;
}
