/*
 * graph_run.c -- running a compiled plan: forward, backward and
 * zero-grad are replays of the launch lists recorded at compile (no
 * object is created and no argument set here); the plan's tensors for
 * feeding inputs; the host syncs (reading an output or the loss, or an
 * asynchronous loss read), which are the only places the host waits; and
 * the figures a plan reports (memory, launches, host syncs). The training
 * counters (train steps, each batch norm's batches tracked) advance with
 * each training forward. Uses only the plan and graph.c's helpers.
 */
#include <string.h>

#include "graph_internal.h"

static teeny_status check_plan(const teeny_plan *p, const char *fn)
{
    if (!p)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: plan is NULL", fn);
    teeny__clear_error(p->ctx);
    return TEENY_OK;
}

teeny_status teeny_plan_tensor(teeny_plan *p, teeny_node n, teeny_tensor **t)
{
    teeny_status st = check_plan(p, "teeny_plan_tensor");
    if (st != TEENY_OK || (st = teeny__graph_check_node(p->g, n, "teeny_plan_tensor")) != TEENY_OK)
        return st;
    if (!t)
        return teeny__error(p->ctx, TEENY_ERR_ARG, "teeny_plan_tensor: t is NULL");
    *t = p->value[n];
    return TEENY_OK;
}

teeny_status teeny_plan_forward(teeny_plan *p)
{
    teeny_graph *g;
    teeny_status st = check_plan(p, "teeny_plan_forward");
    if (st != TEENY_OK)
        return st;
    g = p->g;
    /* a training forward counts one batch in every counter; one at its
     * maximum (a checkpoint may carry any int64) cannot count another */
    if (p->training) {
        int at_max = -1;
        for (int i = 0; i < g->n_nodes && at_max == -1; i++)
            if (g->nodes[i].shapes.counts_batches && g->nodes[i].batches_tracked == INT64_MAX)
                at_max = i;
        if (at_max == -1 && g->train_steps == INT64_MAX)
            at_max = -2;
        if (at_max != -1)
            return teeny__error(p->ctx, TEENY_ERR_RANGE, "teeny_plan_forward: %s%s is at its maximum %lld",
                                at_max >= 0 ? g->nodes[at_max].name : "the graph's train step count",
                                at_max >= 0 ? ".num_batches_tracked" : "", (long long)INT64_MAX);
    }
    st = teeny__recorder_replay(p->ctx, p->rec, p->fwd_from, p->fwd_to);
    if (st == TEENY_OK)
        p->forwarded = 1;
    if (st == TEENY_OK && p->training) {
        g->train_steps++;
        for (int i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].shapes.counts_batches)
                g->nodes[i].batches_tracked++;
    }
    return st;
}

/* Replay the backward steps, or with zero the zero_grad steps, of a plan
   compiled for training. */
static teeny_status replay_training(teeny_plan *p, const char *fn, int zero)
{
    teeny_status st = check_plan(p, fn);
    if (st != TEENY_OK)
        return st;
    if (!p->training)
        return teeny__error(p->ctx, TEENY_ERR_STATE, "%s: the plan was compiled for inference", fn);
    return zero ? teeny__recorder_replay(p->ctx, p->rec, p->zero_from, p->zero_to)
                : teeny__recorder_replay(p->ctx, p->rec, p->bwd_from, p->bwd_to);
}

teeny_status teeny_plan_backward(teeny_plan *p)
{
    return replay_training(p, "teeny_plan_backward", 0);
}

teeny_status teeny_plan_zero_grad(teeny_plan *p)
{
    return replay_training(p, "teeny_plan_zero_grad", 1);
}

teeny_status teeny_plan_read(teeny_plan *p, teeny_node n, float *dst, size_t count)
{
    teeny_status st = check_plan(p, "teeny_plan_read");
    if (st != TEENY_OK || (st = teeny__graph_check_node(p->g, n, "teeny_plan_read")) != TEENY_OK)
        return st;
    const teeny__gnode *nd = &p->g->nodes[n];
    if (nd->kind == TEENY__NODE_OP && !nd->is_output && n != p->loss)
        return teeny__error(p->ctx, TEENY_ERR_STATE,
                            "teeny_plan_read: %s is not marked as an output (teeny_graph_mark_output before compile); "
                            "its memory is reused", nd->name);
    if (!p->forwarded && p->g->nodes[teeny__graph_root(p->g, n)].kind == TEENY__NODE_OP)
        return teeny__error(p->ctx, TEENY_ERR_STATE, "teeny_plan_read: no forward has run; %s has no value yet",
                            nd->name);
    p->host_syncs++;
    if (p->value[n]->dtype != TEENY__I32)
        return teeny_tensor_read(p->value[n], dst, count);
    /* an int32 value (labels, indices): its bits into dst, each converted in place */
    teeny_status st2 = teeny_tensor_read_i32(p->value[n], (int32_t *)(void *)dst, count);
    for (size_t i = 0; st2 == TEENY_OK && i < count; i++) {
        int32_t v;
        memcpy(&v, &dst[i], sizeof v);
        dst[i] = (float)v;
    }
    return st2;
}

teeny_status teeny_plan_read_loss(teeny_plan *p, float *loss)
{
    teeny_status st = check_plan(p, "teeny_plan_read_loss");
    if (st != TEENY_OK)
        return st;
    if (!loss)
        return teeny__error(p->ctx, TEENY_ERR_ARG, "teeny_plan_read_loss: loss is NULL");
    if (p->value[p->loss]->numel != 1)
        return teeny__error(p->ctx, TEENY_ERR_STATE, "teeny_plan_read_loss: node %s is not a scalar",
                            p->g->nodes[p->loss].name);
    if (!p->forwarded)
        return teeny__error(p->ctx, TEENY_ERR_STATE, "teeny_plan_read_loss: no forward has run; there is no loss yet");
    p->host_syncs++;
    return teeny_tensor_read(p->value[p->loss], loss, 1);
}

teeny_status teeny_plan_loss_start(teeny_plan *p)
{
    teeny_ctx *ctx;
    teeny_status st = check_plan(p, "teeny_plan_loss_start");
    if (st != TEENY_OK)
        return st;
    ctx = p->ctx;
    if (p->loss_event)
        return teeny__error(ctx, TEENY_ERR_STATE, "teeny_plan_loss_start: the previous read was not waited for");
    if (!p->forwarded)
        return teeny__error(ctx, TEENY_ERR_STATE, "teeny_plan_loss_start: no forward has run; there is no loss yet");
    const teeny_tensor *t = p->value[p->loss];
    TEENY_CL_TRY(clEnqueueReadBufferAsync, ctx->queue, t->buf, CL_FALSE, t->offset * 4, 4, &p->loss_host, 0, NULL,
                 &p->loss_event);
cleanup:
    return st;
}

teeny_status teeny_plan_loss_wait(teeny_plan *p, float *loss)
{
    teeny_ctx *ctx;
    teeny_status st = check_plan(p, "teeny_plan_loss_wait");
    if (st != TEENY_OK)
        return st;
    ctx = p->ctx;
    if (!loss)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_plan_loss_wait: loss is NULL");
    if (!p->loss_event)
        return teeny__error(ctx, TEENY_ERR_STATE, "teeny_plan_loss_wait without teeny_plan_loss_start");
    p->host_syncs++;
    TEENY_CL_TRY(clWaitForEvents, 1, &p->loss_event);
    *loss = p->loss_host;
cleanup:
    TEENY_CL_RELEASE(clReleaseEvent, p->loss_event);
    p->loss_event = NULL;
    return st;
}

int64_t teeny_plan_host_syncs(const teeny_plan *p)
{
    return p ? p->host_syncs : 0;
}

teeny_status teeny_plan_memory(const teeny_plan *p, size_t *planned_peak, size_t *no_reuse_total, size_t *allocated)
{
    teeny_status st = check_plan(p, "teeny_plan_memory");
    if (st != TEENY_OK)
        return st;
    size_t ws = teeny__recorder_scratch_bytes(p->rec);
    if (planned_peak)
        *planned_peak = p->peak_elems * 4 + ws;
    if (no_reuse_total)
        *no_reuse_total = p->no_reuse_elems * 4 + ws;
    if (allocated)
        *allocated = (size_t)p->arena->numel * 4 + ws;
    return TEENY_OK;
}

teeny_status teeny_plan_launches(const teeny_plan *p, int *forward, int *backward)
{
    teeny_status st = check_plan(p, "teeny_plan_launches");
    if (st != TEENY_OK)
        return st;
    if (forward)
        *forward = teeny__recorder_launches(p->rec, p->fwd_from, p->fwd_to);
    if (backward)
        *backward = teeny__recorder_launches(p->rec, p->bwd_from, p->bwd_to);
    return TEENY_OK;
}

teeny_status teeny_plan_refresh(teeny_plan *p)
{
    teeny_status st = check_plan(p, "teeny_plan_refresh");
    return st != TEENY_OK ? st : teeny__recorder_replay_setup(p->ctx, p->rec);
}
