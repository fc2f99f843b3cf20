/*
 * graph.c -- graph building (nodes, shape inference, parameters), compile
 * (shapes for a batch size, memory planning by liveness, recording every
 * pass as a replayable list of launches) and running plans.
 *
 * The schedule of a training plan has 2n steps for n nodes: forward of node
 * i at step i, backward of node i at step 2n-1-i. Every value, saved tensor,
 * gradient and accumulation temporary is a buffer with a definition step
 * and a last-use step; buffers whose lifetimes do not overlap share memory
 * in one arena (first fit, 256-byte aligned). Parameters, their gradients,
 * running statistics and input tensors live outside the arena.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

#define ALIGN_ELEMS 64 /* 256 bytes */

/* ---- building ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

teeny_ctx *teeny__graph_ctx(const teeny_graph *g)
{
    return g ? g->ctx : NULL;
}

static teeny_status check_graph(const teeny_graph *g, const char *fn)
{
    if (!g)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: graph is NULL", fn);
    teeny__clear_error(g->ctx);
    return TEENY_OK;
}

teeny_status teeny_graph_create(teeny_ctx *ctx, uint64_t seed, teeny_graph **out)
{
    if (!out)
        return teeny__error(teeny__ctx_check(ctx) ? ctx : NULL, TEENY_ERR_ARG, "teeny_graph_create: out is NULL");
    *out = NULL;
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_graph_create: ctx is NULL or destroyed");
    teeny__clear_error(ctx);
    teeny_graph *g = teeny__calloc(1, sizeof *g);
    if (!g)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_graph_create: out of host memory");
    g->ctx = ctx;
    g->rng = seed;
    *out = g;
    return TEENY_OK;
}

void teeny_graph_destroy(teeny_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < TEENY__OP_MAX_SLOTS; j++) {
            teeny_tensor_destroy(g->nodes[i].param[j]);
            teeny_tensor_destroy(g->nodes[i].param_grad[j]);
            teeny_tensor_destroy(g->nodes[i].state[j]);
        }
    teeny__free(g->nodes);
    teeny__free(g);
}

static const char *shape_text(const teeny__shape *s, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < s->ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)s->shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]%s", s->is_i32 ? " int32" : "");
    return buf;
}

static int64_t shape_numel(const teeny__shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->shape[i];
    return n;
}

/* Append a node with a unique name; *idx receives its index. */
static teeny_status push_node(teeny_graph *g, const char *name, const char *prefix, teeny__gnode **node, int *idx)
{
    char buf[TEENY__NAME_CAP];
    if (name && *name) {
        if (strlen(name) >= TEENY__NAME_CAP - 24)
            return teeny__error(g->ctx, TEENY_ERR_ARG, "node name \"%.40s...\" is too long", name);
        teeny__strlcpy(buf, name, sizeof buf);
    } else {
        snprintf(buf, sizeof buf, "%s%d", prefix, g->n_nodes);
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, buf))
            return teeny__error(g->ctx, TEENY_ERR_ARG, "a node named \"%s\" already exists", buf);
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 32;
        teeny__gnode *p = teeny__calloc((size_t)cap, sizeof *p);
        if (!p)
            return teeny__error(g->ctx, TEENY_ERR_NOMEM, "out of host memory adding node %s", buf);
        if (g->n_nodes)
            memcpy(p, g->nodes, (size_t)g->n_nodes * sizeof *p);
        teeny__free(g->nodes);
        g->nodes = p;
        g->cap_nodes = cap;
    }
    teeny__gnode *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    teeny__strlcpy(n->name, buf, sizeof n->name);
    *node = n;
    *idx = g->n_nodes;
    return TEENY_OK;
}

static teeny_status check_node(const teeny_graph *g, teeny_node n, const char *what)
{
    if (n < 0 || n >= g->n_nodes)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "%s: node %d does not exist (the graph has %d)", what, (int)n,
                            g->n_nodes);
    return TEENY_OK;
}

static teeny_status add_input(teeny_graph *g, const char *name, int ndim, const int64_t *shape, int is_i32,
                              teeny_node *out)
{
    teeny__gnode *n;
    int idx;
    teeny_status st;
    if (!out)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_input: out is NULL");
    *out = -1;
    if (ndim < 1 || ndim > TEENY_MAX_DIMS || !shape)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_input: rank %d outside 1..5 or shape NULL", ndim);
    if (shape[0] != -1)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_input: shape[0] must be -1 (the batch), got %lld",
                            (long long)shape[0]);
    for (int i = 1; i < ndim; i++)
        if (shape[i] < 1 || shape[i] > INT32_MAX)
            return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_input: dimension %d is %lld", i,
                                (long long)shape[i]);
    if ((st = push_node(g, name, "input", &n, &idx)) != TEENY_OK)
        return st;
    n->kind = TEENY__NODE_INPUT;
    n->shapes.out.ndim = ndim;
    n->shapes.out.is_i32 = is_i32;
    memcpy(n->shapes.out.shape, shape, (size_t)ndim * sizeof *shape);
    n->shapes.out.shape[0] = 1;
    g->n_nodes++;
    *out = idx;
    return TEENY_OK;
}

teeny_status teeny_graph_input(teeny_graph *g, const char *name, int ndim, const int64_t *shape, teeny_node *out)
{
    teeny_status st = check_graph(g, "teeny_graph_input");
    return st != TEENY_OK ? st : add_input(g, name, ndim, shape, 0, out);
}

teeny_status teeny_graph_labels(teeny_graph *g, const char *name, teeny_node *out)
{
    int64_t shape[1] = {-1};
    teeny_status st = check_graph(g, "teeny_graph_labels");
    return st != TEENY_OK ? st : add_input(g, name, 1, shape, 1, out);
}

/* Resolve a view's shape against its input's element count. */
static teeny_status view_shape(teeny_ctx *ctx, const char *name, int ndim, const int64_t *want, int64_t numel,
                               teeny__shape *out)
{
    int infer_at = -1;
    int64_t known = 1;
    out->ndim = ndim;
    out->is_i32 = 0;
    for (int i = 0; i < ndim; i++) {
        if (want[i] == -1 && infer_at < 0) {
            infer_at = i;
            continue;
        }
        if (want[i] < 1)
            return teeny__error(ctx, TEENY_ERR_ARG, "reshape %s: dimension %d is %lld", name, i, (long long)want[i]);
        known *= want[i];
        out->shape[i] = want[i];
    }
    if (infer_at >= 0) {
        if (numel % known)
            return teeny__error(ctx, TEENY_ERR_SHAPE, "reshape %s: %lld elements do not divide into %lld", name,
                                (long long)numel, (long long)known);
        out->shape[infer_at] = numel / known;
    } else if (known != numel) {
        return teeny__error(ctx, TEENY_ERR_SHAPE, "reshape %s: %lld elements cannot take a shape of %lld", name,
                            (long long)numel, (long long)known);
    }
    return TEENY_OK;
}

teeny_status teeny_graph_reshape(teeny_graph *g, const char *name, teeny_node x, int ndim, const int64_t *shape,
                                 teeny_node *out)
{
    teeny__gnode *n;
    int idx;
    teeny__shape s;
    teeny_status st = check_graph(g, "teeny_graph_reshape");
    if (st != TEENY_OK)
        return st;
    if (!out)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_reshape: out is NULL");
    *out = -1;
    if ((st = check_node(g, x, "teeny_graph_reshape")) != TEENY_OK)
        return st;
    if (ndim < 1 || ndim > TEENY_MAX_DIMS || !shape)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_reshape: rank %d outside 1..5 or shape NULL", ndim);
    if (g->nodes[x].shapes.out.is_i32)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_reshape: %s is int32", g->nodes[x].name);
    if ((st = view_shape(g->ctx, name ? name : "", ndim, shape, shape_numel(&g->nodes[x].shapes.out), &s)) != TEENY_OK)
        return st;
    if ((st = push_node(g, name, "reshape", &n, &idx)) != TEENY_OK)
        return st;
    n->kind = TEENY__NODE_VIEW;
    n->n_in = 1;
    n->in[0] = x;
    n->view_ndim = ndim;
    memcpy(n->view_shape, shape, (size_t)ndim * sizeof *shape);
    n->shapes.out = s;
    g->n_nodes++;
    *out = idx;
    return TEENY_OK;
}

teeny_status teeny_graph_flatten(teeny_graph *g, const char *name, teeny_node x, teeny_node *out)
{
    int64_t shape[2] = {-1, 0};
    teeny_status st = check_graph(g, "teeny_graph_flatten");
    if (st != TEENY_OK)
        return st;
    if ((st = check_node(g, x, "teeny_graph_flatten")) != TEENY_OK)
        return st;
    const teeny__shape *s = &g->nodes[x].shapes.out;
    shape[1] = shape_numel(s) / s->shape[0];
    return teeny_graph_reshape(g, name, x, 2, shape, out);
}

teeny_status teeny_graph_mark_output(teeny_graph *g, teeny_node n)
{
    teeny_status st = check_graph(g, "teeny_graph_mark_output");
    if (st == TEENY_OK && (st = check_node(g, n, "teeny_graph_mark_output")) == TEENY_OK)
        g->nodes[n].is_output = 1;
    return st;
}

static teeny_status init_tensor(teeny_graph *g, const teeny__shape *s, teeny__init how, int64_t fan_in,
                                teeny_tensor **out)
{
    teeny_status st = teeny_tensor_create(g->ctx, s->ndim, s->shape, out);
    if (st != TEENY_OK)
        return st;
    if (how != TEENY__INIT_FAN_IN)
        return teeny_tensor_fill(*out, how == TEENY__INIT_ONES ? 1.0f : 0.0f);
    size_t n = (size_t)(*out)->numel;
    float *host = teeny__malloc(n * sizeof *host);
    if (!host)
        return teeny__error(g->ctx, TEENY_ERR_NOMEM, "out of host memory initializing parameters");
    double bound = 1.0 / sqrt((double)(fan_in > 0 ? fan_in : 1));
    for (size_t i = 0; i < n; i++) {
        double u = (double)(splitmix(&g->rng) >> 11) / 9007199254740992.0; /* [0, 1) */
        host[i] = (float)((2.0 * u - 1.0) * bound);
    }
    st = teeny_tensor_write(*out, host, n);
    teeny__free(host);
    return st;
}

teeny_status teeny__graph_node(teeny_graph *g, teeny__op_id op, const char *name, int n_in, const teeny_node *in,
                               const teeny__op_attrs *attrs, teeny_node *out)
{
    const teeny__op *desc = &teeny__ops[op];
    teeny__node_shapes s;
    teeny__gnode *n;
    int idx;
    teeny_status st = check_graph(g, desc->name);
    if (st != TEENY_OK)
        return st;
    if (!out)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "graph %s: out is NULL", desc->name);
    *out = -1;
    if (!desc->infer)
        return teeny__error(g->ctx, TEENY_ERR_UNSUPPORTED, "op %s cannot be used in a graph", desc->name);
    if (n_in < 1 || n_in > TEENY__OP_MAX_SLOTS)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "graph %s: %d inputs", desc->name, n_in);
    if (!in)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "graph %s: inputs array is NULL", desc->name);
    memset(&s, 0, sizeof s);
    s.n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        if ((st = check_node(g, in[i], desc->name)) != TEENY_OK)
            return st;
        s.in[i] = g->nodes[in[i]].shapes.out;
    }
    if (attrs) /* NULL: an op without attributes */
        s.attrs = *attrs;
    if ((st = desc->infer(g->ctx, &s)) != TEENY_OK) {
        /* name both nodes and shapes */
        char msg[512], a[96], b[96];
        teeny__strlcpy(msg, teeny_last_error(g->ctx), sizeof msg);
        return teeny__error(g->ctx, st, "adding %s \"%s\": %s (inputs: %s %s%s%s %s)", desc->name,
                            name ? name : "", msg, g->nodes[in[0]].name, shape_text(&s.in[0], a, sizeof a),
                            n_in > 1 ? ", " : "", n_in > 1 ? g->nodes[in[1]].name : "",
                            n_in > 1 ? shape_text(&s.in[1], b, sizeof b) : "");
    }
    if ((st = push_node(g, name, desc->name, &n, &idx)) != TEENY_OK)
        return st;
    n->kind = TEENY__NODE_OP;
    n->op = op;
    n->n_in = n_in;
    memcpy(n->in, in, (size_t)n_in * sizeof *in);
    n->shapes = s;
    for (int i = 0; i < s.n_param && st == TEENY_OK; i++)
        st = init_tensor(g, &s.param[i], s.param_init[i], s.fan_in, &n->param[i]);
    for (int i = 0; i < s.n_state && st == TEENY_OK; i++)
        st = init_tensor(g, &s.state[i], s.state_init[i], 0, &n->state[i]);
    if (st != TEENY_OK) {
        for (int i = 0; i < TEENY__OP_MAX_SLOTS; i++) {
            teeny_tensor_destroy(n->param[i]);
            teeny_tensor_destroy(n->state[i]);
        }
        return st;
    }
    g->n_nodes++;
    *out = idx;
    return TEENY_OK;
}

/* ---- introspection ---- */

int teeny_graph_node_count(const teeny_graph *g)
{
    return g ? g->n_nodes : 0;
}

teeny_status teeny_graph_node_info(const teeny_graph *g, teeny_node n, const char **name, int *ndim,
                                   int64_t shape[5])
{
    teeny_status st = check_graph(g, "teeny_graph_node_info");
    if (st != TEENY_OK || (st = check_node(g, n, "teeny_graph_node_info")) != TEENY_OK)
        return st;
    if (name)
        *name = g->nodes[n].name;
    if (ndim)
        *ndim = g->nodes[n].shapes.out.ndim;
    if (shape)
        memcpy(shape, g->nodes[n].shapes.out.shape, sizeof(int64_t) * TEENY_MAX_DIMS);
    return TEENY_OK;
}

/* The i-th (param or state) slot in creation order. */
static int find_slot(const teeny_graph *g, int want_state, int i, int *node, int *slot)
{
    for (int k = 0; k < g->n_nodes; k++) {
        int n = want_state ? g->nodes[k].shapes.n_state : g->nodes[k].shapes.n_param;
        if (g->nodes[k].kind != TEENY__NODE_OP)
            continue;
        if (i < n) {
            *node = k;
            *slot = i;
            return 1;
        }
        i -= n;
    }
    return 0;
}

static int count_slots(const teeny_graph *g, int want_state)
{
    int total = 0;
    for (int k = 0; g && k < g->n_nodes; k++)
        if (g->nodes[k].kind == TEENY__NODE_OP)
            total += want_state ? g->nodes[k].shapes.n_state : g->nodes[k].shapes.n_param;
    return total;
}

int teeny_graph_param_count(const teeny_graph *g)
{
    return count_slots(g, 0);
}

int teeny_graph_state_count(const teeny_graph *g)
{
    return count_slots(g, 1);
}

/* "<node>.<suffix>" in a per-node-slot static-free buffer inside the node. */
static const char *slot_name(const teeny_graph *g, int node, const char *suffix)
{
    static _Thread_local char buf[TEENY__NAME_CAP + 32];
    snprintf(buf, sizeof buf, "%s.%s", g->nodes[node].name, suffix);
    return buf;
}

teeny_status teeny_graph_param(const teeny_graph *g, int i, const char **name, teeny_tensor **value,
                               teeny_tensor **grad)
{
    int node, slot;
    teeny_status st = check_graph(g, "teeny_graph_param");
    if (st != TEENY_OK)
        return st;
    if (i < 0 || !find_slot(g, 0, i, &node, &slot))
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_param: index %d outside 0..%d", i,
                            teeny_graph_param_count(g) - 1);
    if (name)
        *name = slot_name(g, node, g->nodes[node].shapes.param_name[slot]);
    if (value)
        *value = g->nodes[node].param[slot];
    if (grad)
        *grad = g->nodes[node].param_grad[slot];
    return TEENY_OK;
}

teeny_status teeny_graph_state(const teeny_graph *g, int i, const char **name, teeny_tensor **value)
{
    int node, slot;
    teeny_status st = check_graph(g, "teeny_graph_state");
    if (st != TEENY_OK)
        return st;
    if (i < 0 || !find_slot(g, 1, i, &node, &slot))
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_state: index %d outside 0..%d", i,
                            teeny_graph_state_count(g) - 1);
    if (name)
        *name = slot_name(g, node, g->nodes[node].shapes.state_name[slot]);
    if (value)
        *value = g->nodes[node].state[slot];
    return TEENY_OK;
}

int64_t teeny_graph_train_steps(const teeny_graph *g)
{
    return g ? g->train_steps : 0;
}

teeny_status teeny_graph_set_train_steps(teeny_graph *g, int64_t steps)
{
    teeny_status st = check_graph(g, "teeny_graph_set_train_steps");
    if (st != TEENY_OK)
        return st;
    if (steps < 0)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_set_train_steps: steps %lld must be >= 0",
                            (long long)steps);
    g->train_steps = steps;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].kind == TEENY__NODE_OP && g->nodes[i].shapes.counts_batches)
            g->nodes[i].batches_tracked = steps;
    return TEENY_OK;
}

/* ---- compile ---- */

/* Shapes of every node for this plan's batch. */
static teeny_status resolve_shapes(teeny_plan *p)
{
    teeny_graph *g = p->g;
    for (int i = 0; i < g->n_nodes; i++) {
        teeny__gnode *n = &g->nodes[i];
        teeny__node_shapes *s = &p->shapes[i];
        *s = n->shapes;
        if (n->kind == TEENY__NODE_INPUT) {
            s->out.shape[0] = p->batch;
            if (shape_numel(&s->out) > INT32_MAX)
                return teeny__error(g->ctx, TEENY_ERR_RANGE, "input %s: batch %lld exceeds int32 indexing", n->name,
                                    (long long)p->batch);
            continue;
        }
        for (int j = 0; j < n->n_in; j++)
            s->in[j] = p->shapes[n->in[j]].out;
        if (n->kind == TEENY__NODE_VIEW) {
            teeny_status st = view_shape(g->ctx, n->name, n->view_ndim, n->view_shape, shape_numel(&s->in[0]), &s->out);
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
        if (shape_numel(&s->out) > INT32_MAX)
            return teeny__error(g->ctx, TEENY_ERR_RANGE, "node %s: output beyond int32 indexing at batch %lld",
                                n->name, (long long)p->batch);
    }
    return TEENY_OK;
}

/* First-fit placement of buffers by lifetime; returns the peak. */
static size_t place(teeny__pbuf *b, int n, int reuse)
{
    size_t peak = 0, next = 0;
    int *order = teeny__malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!order)
        return (size_t)-1;
    for (int i = 0; i < n; i++)
        order[i] = i;
    /* by definition step, larger first within a step (insertion sort: n is small) */
    for (int i = 1; i < n; i++) {
        int k = order[i], j = i - 1;
        while (j >= 0 && (b[order[j]].def > b[k].def || (b[order[j]].def == b[k].def && b[order[j]].numel < b[k].numel))) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = k;
    }
    for (int oi = 0; oi < n; oi++) {
        teeny__pbuf *x = &b[order[oi]];
        size_t size = (x->numel + ALIGN_ELEMS - 1) / ALIGN_ELEMS * ALIGN_ELEMS;
        if (!reuse) {
            x->offset = next;
            next += size;
            peak = next;
            continue;
        }
        /* lowest offset that does not collide with a live placed buffer */
        size_t off = 0;
        for (;;) {
            int moved = 0;
            for (int oj = 0; oj < oi; oj++) {
                teeny__pbuf *y = &b[order[oj]];
                size_t ysize = (y->numel + ALIGN_ELEMS - 1) / ALIGN_ELEMS * ALIGN_ELEMS;
                int live = !(y->last < x->def || x->last < y->def);
                if (live && off < y->offset + ysize && y->offset < off + size) {
                    off = y->offset + ysize;
                    moved = 1;
                }
            }
            if (!moved)
                break;
        }
        x->offset = off;
        if (off + size > peak)
            peak = off + size;
    }
    teeny__free(order);
    return peak;
}

static void plan_free(teeny_plan *p)
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
    teeny__free(p->temps);
    teeny__free(p->shapes);
    teeny__free(p->value);
    teeny__free(p->saved);
    teeny__free(p->grad);
    teeny__free(p);
}

void teeny_plan_destroy(teeny_plan *p)
{
    if (!p)
        return;
    p->g->n_plans--;
    plan_free(p);
}

/* The node whose storage a value lives in (views share their input's). */
static int root_of(const teeny_graph *g, int i)
{
    while (g->nodes[i].kind == TEENY__NODE_VIEW)
        i = g->nodes[i].in[0];
    return i;
}

/* Planning state shared by compile and autograd (buffer ids per tensor). */
typedef struct {
    teeny__pbuf *bufs;
    int n, cap;
    int failed;                           /* an allocation failed: checked once after planning */
} buflist;

static int buf_add(buflist *l, size_t numel, int def, int last)
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

/* A view of the arena for a planned buffer. */
static teeny_status arena_view(teeny_plan *p, const teeny__pbuf *b, const teeny__shape *s, teeny_tensor **out)
{
    return teeny_tensor_view(p->arena, (int64_t)b->offset, s->ndim, s->shape, out);
}

teeny_status teeny_graph_compile(teeny_graph *g, const teeny_plan_params *params, teeny_plan **out)
{
    teeny_plan *p = NULL;
    teeny_ctx *ctx;
    teeny_status st = check_graph(g, "teeny_graph_compile");
    int *needs = NULL, *reaches = NULL, *value_buf = NULL, *saved_buf = NULL, *grad_buf = NULL;
    int *grad_def = NULL, *temp_buf = NULL;
    buflist bl = {0};
    if (st != TEENY_OK)
        return st;
    ctx = g->ctx;
    if (!out || !params)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_graph_compile: %s is NULL", !out ? "out" : "params");
    *out = NULL;
    if (params->batch < 1 || params->batch > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_graph_compile: batch %lld", (long long)params->batch);
    if (g->n_nodes == 0)
        return teeny__error(ctx, TEENY_ERR_STATE, "teeny_graph_compile: the graph is empty");
    int n = g->n_nodes, T = 2 * n;
    teeny_node loss = params->loss < 0 ? n - 1 : params->loss;
    if (loss >= n)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_graph_compile: loss node %d does not exist", (int)loss);

    p = teeny__calloc(1, sizeof *p);
    if (!p)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_graph_compile: out of host memory");
    p->g = g;
    p->ctx = ctx;
    p->batch = params->batch;
    p->training = params->training != 0;
    p->loss = loss;
    p->reuse = params->reuse_memory != 0;
    p->shapes = teeny__calloc((size_t)n, sizeof *p->shapes);
    p->value = teeny__calloc((size_t)n, sizeof *p->value);
    p->saved = teeny__calloc((size_t)n, sizeof *p->saved);
    p->grad = teeny__calloc((size_t)n, sizeof *p->grad);
    needs = teeny__calloc((size_t)n, sizeof *needs);
    reaches = teeny__calloc((size_t)n, sizeof *reaches);
    value_buf = teeny__calloc((size_t)n, sizeof *value_buf);
    saved_buf = teeny__calloc((size_t)n * TEENY__OP_MAX_SLOTS, sizeof *saved_buf);
    grad_buf = teeny__calloc((size_t)n, sizeof *grad_buf);
    grad_def = teeny__calloc((size_t)n, sizeof *grad_def);
    temp_buf = teeny__calloc((size_t)n * TEENY__OP_MAX_SLOTS, sizeof *temp_buf);
    if (!p->shapes || !p->value || !p->saved || !p->grad || !needs || !reaches || !value_buf ||
        !saved_buf || !grad_buf || !grad_def || !temp_buf) {
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_graph_compile: out of host memory");
        goto fail;
    }
    if ((st = resolve_shapes(p)) != TEENY_OK)
        goto fail;
    if (p->training && (p->shapes[loss].out.ndim < 1 || shape_numel(&p->shapes[loss].out) != 1 ||
                        p->shapes[loss].out.is_i32)) {
        char b[96];
        st = teeny__error(ctx, TEENY_ERR_SHAPE, "teeny_graph_compile: loss node %s has shape %s; training needs a scalar",
                          g->nodes[loss].name, shape_text(&p->shapes[loss].out, b, sizeof b));
        goto fail;
    }

    /* which nodes take part in backward */
    for (int i = 0; i < n; i++) {
        const teeny__gnode *nd = &g->nodes[i];
        needs[i] = nd->kind == TEENY__NODE_OP && p->shapes[i].n_param > 0;
        for (int j = 0; j < nd->n_in; j++)
            needs[i] |= needs[nd->in[j]];
    }
    if (p->training) {
        reaches[loss] = 1;
        for (int i = n - 1; i >= 0; i--)
            if (reaches[i])
                for (int j = 0; j < g->nodes[i].n_in; j++)
                    reaches[g->nodes[i].in[j]] = 1;
        for (int i = 0; i < n; i++)
            reaches[i] &= needs[i];
        /* parameter gradients (graph-owned, shared by plans) */
        for (int i = 0; i < n && st == TEENY_OK; i++)
            for (int j = 0; j < p->shapes[i].n_param && st == TEENY_OK; j++)
                if (!g->nodes[i].param_grad[j])
                    st = teeny_tensor_create(ctx, p->shapes[i].param[j].ndim, p->shapes[i].param[j].shape,
                                             &g->nodes[i].param_grad[j]);
        if (st != TEENY_OK)
            goto fail;
    }

    /* values and saved tensors: lifetimes */
    for (int i = 0; i < n; i++) {
        value_buf[i] = -1;
        for (int j = 0; j < TEENY__OP_MAX_SLOTS; j++)
            saved_buf[i * TEENY__OP_MAX_SLOTS + j] = temp_buf[i * TEENY__OP_MAX_SLOTS + j] = -1;
        grad_buf[i] = -1;
    }
    for (int i = 0; i < n; i++) {
        const teeny__gnode *nd = &g->nodes[i];
        if (nd->kind != TEENY__NODE_OP)
            continue;
        value_buf[i] = buf_add(&bl, (size_t)shape_numel(&p->shapes[i].out), i, i);
        if (p->training || !p->shapes[i].saved_needs_training)
            for (int j = 0; j < p->shapes[i].n_saved; j++)
                saved_buf[i * TEENY__OP_MAX_SLOTS + j] =
                    buf_add(&bl, (size_t)shape_numel(&p->shapes[i].saved[j]), i,
                            p->training && reaches[i] ? teeny__bwd_step(g, i) : i);
        if (value_buf[i] < 0) {
            st = teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_graph_compile: out of host memory");
            goto fail;
        }
    }
    /* last uses: consumers' forward and backward steps, own backward, outputs */
    for (int i = 0; i < n; i++) {
        const teeny__gnode *nd = &g->nodes[i];
        int own = root_of(g, i);
        if (value_buf[own] < 0)
            continue; /* inputs are not planned */
        int last = i;
        if (p->training && reaches[i])
            last = teeny__bwd_step(g, i);
        if (nd->is_output || i == loss)
            last = T;
        if (bl.bufs[value_buf[own]].last < last)
            bl.bufs[value_buf[own]].last = last;
        for (int j = 0; j < nd->n_in; j++) {
            int r = root_of(g, nd->in[j]);
            if (value_buf[r] < 0)
                continue;
            int use = p->training && reaches[i] ? teeny__bwd_step(g, i) : i;
            if (bl.bufs[value_buf[r]].last < use)
                bl.bufs[value_buf[r]].last = use;
        }
    }
    /* gradients: defined by the first (latest-node) contribution, dead after own backward */
    if (p->training) {
        for (int i = 0; i < n; i++)
            grad_def[i] = -1;
        grad_def[loss] = teeny__bwd_step(g, loss);
        for (int i = n - 1; i >= 0; i--) {
            if (!reaches[i])
                continue;
            for (int j = 0; j < g->nodes[i].n_in; j++) {
                int u = g->nodes[i].in[j];
                if (!reaches[u])
                    continue;
                int dup = 0;
                for (int k = 0; k < j; k++)
                    dup |= g->nodes[i].in[k] == u;
                if (grad_def[u] < 0 && !dup) {
                    grad_def[u] = teeny__bwd_step(g, i);
                } else {
                    temp_buf[i * TEENY__OP_MAX_SLOTS + j] = buf_add(&bl, (size_t)shape_numel(&p->shapes[u].out),
                                                                    teeny__bwd_step(g, i), teeny__bwd_step(g, i));
                }
            }
        }
        for (int i = 0; i < n; i++)
            if (reaches[i] && grad_def[i] >= 0)
                grad_buf[i] = buf_add(&bl, (size_t)shape_numel(&p->shapes[i].out), grad_def[i],
                                      teeny__bwd_step(g, i));
    }
    /* one temporary per (node, input) contribution that does not define the
     * gradient it adds to: sized from the planned contributions themselves,
     * so any fan-in (a concat of many inputs, repeated inputs) fits */
    if (bl.failed) {
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_graph_compile: out of host memory");
        goto fail;
    }
    {
        int n_temp_bufs = 0;
        for (int i = 0; i < n * TEENY__OP_MAX_SLOTS; i++)
            n_temp_bufs += temp_buf[i] >= 0;
        p->temps = teeny__calloc((size_t)n_temp_bufs + 1, sizeof *p->temps);
        if (!p->temps) {
            st = teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_graph_compile: out of host memory");
            goto fail;
        }
    }
    for (int i = 0; i < bl.n; i++)
        p->no_reuse_elems += (bl.bufs[i].numel + ALIGN_ELEMS - 1) / ALIGN_ELEMS * ALIGN_ELEMS;
    p->peak_elems = place(bl.bufs, bl.n, p->reuse);
    if (p->peak_elems == (size_t)-1) {
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_graph_compile: out of host memory");
        goto fail;
    }
    {
        int64_t arena = (int64_t)(p->peak_elems ? p->peak_elems : 1);
        if ((st = teeny_tensor_create(ctx, 1, &arena, &p->arena)) != TEENY_OK)
            goto fail;
    }

    /* tensors */
    for (int i = 0; i < n && st == TEENY_OK; i++) {
        const teeny__gnode *nd = &g->nodes[i];
        const teeny__shape *s = &p->shapes[i].out;
        if (nd->kind == TEENY__NODE_INPUT)
            st = s->is_i32 ? teeny_tensor_create_i32(ctx, s->ndim, s->shape, &p->value[i])
                           : teeny_tensor_create(ctx, s->ndim, s->shape, &p->value[i]);
        else if (nd->kind == TEENY__NODE_VIEW)
            st = teeny_tensor_view(p->value[nd->in[0]], 0, s->ndim, s->shape, &p->value[i]);
        else
            st = arena_view(p, &bl.bufs[value_buf[i]], s, &p->value[i]);
        for (int j = 0; j < TEENY__OP_MAX_SLOTS && st == TEENY_OK; j++) {
            int b = saved_buf[i * TEENY__OP_MAX_SLOTS + j];
            if (b >= 0) {
                const teeny__shape *ss = &p->shapes[i].saved[j];
                /* int32 saved tensors (argmax) share the arena's 4-byte slots */
                st = arena_view(p, &bl.bufs[b], ss, &p->saved[i][j]);
                if (st == TEENY_OK && ss->is_i32)
                    p->saved[i][j]->dtype = TEENY__I32;
            }
        }
        if (st == TEENY_OK && grad_buf[i] >= 0)
            st = arena_view(p, &bl.bufs[grad_buf[i]], s, &p->grad[i]);
    }
    if (st != TEENY_OK)
        goto fail;

    /* record the passes */
    if ((st = teeny__recorder_create(ctx, &p->rec)) != TEENY_OK)
        goto fail;
    teeny__record_begin(ctx, p->rec);
    p->fwd_from = teeny__recorder_count(p->rec);
    for (int i = 0; i < n && st == TEENY_OK; i++) {
        const teeny__gnode *nd = &g->nodes[i];
        if (nd->kind != TEENY__NODE_OP)
            continue;
        teeny__op_args a;
        int k = 0, o = 0;
        memset(&a, 0, sizeof a);
        for (int j = 0; j < nd->n_in; j++)
            a.in[k++] = p->value[nd->in[j]];
        for (int j = 0; j < p->shapes[i].n_param; j++)
            a.in[k++] = nd->param[j];
        for (int j = 0; j < p->shapes[i].n_state; j++)
            a.in[k++] = nd->state[j];
        a.out[o++] = p->value[i];
        for (int j = 0; j < p->shapes[i].n_saved; j++)
            a.out[o++] = p->saved[i][j];
        for (int j = 0; j < p->shapes[i].n_state; j++)
            a.out[o++] = nd->state[j];
        a.attrs = p->shapes[i].attrs;
        a.training = p->training;
        st = teeny__op_run(ctx, nd->op, 0, &a);
        if (st != TEENY_OK) {
            char msg[512];
            teeny__strlcpy(msg, teeny_last_error(ctx), sizeof msg);
            st = teeny__error(ctx, st, "compile: node %s (%s): %s", nd->name, teeny__ops[nd->op].name, msg);
        }
    }
    p->fwd_to = p->bwd_from = teeny__recorder_count(p->rec);
    if (st == TEENY_OK && p->training) {
        /* temporaries for gradient accumulation */
        for (int i = 0; i < n && st == TEENY_OK; i++)
            for (int j = 0; j < g->nodes[i].n_in && st == TEENY_OK; j++) {
                int b = temp_buf[i * TEENY__OP_MAX_SLOTS + j];
                if (b >= 0) {
                    teeny_tensor *t = NULL;
                    st = arena_view(p, &bl.bufs[b], &p->shapes[g->nodes[i].in[j]].out, &t);
                    temp_buf[i * TEENY__OP_MAX_SLOTS + j] = -2 - p->n_temps; /* -2-k: temps[k] */
                    p->temps[p->n_temps++] = t;
                }
            }
        if (st == TEENY_OK)
            st = teeny__autograd_plan(p, temp_buf, reaches);
    }
    p->bwd_to = p->zero_from = teeny__recorder_count(p->rec);
    for (int i = 0; i < n && st == TEENY_OK && p->training; i++)
        for (int j = 0; j < p->shapes[i].n_param && st == TEENY_OK; j++) {
            teeny_tensor *t = g->nodes[i].param_grad[j];
            st = teeny__fill(ctx, t->buf, t->offset, (size_t)t->numel, 0.0f);
        }
    p->zero_to = teeny__recorder_count(p->rec);
    teeny__record_end(ctx);
    if (st != TEENY_OK)
        goto fail;

    g->n_plans++;
    *out = p;
    st = TEENY_OK;
    goto done;
fail:
    teeny__record_end(ctx);
    plan_free(p);
done:
    teeny__free(bl.bufs);
    teeny__free(needs);
    teeny__free(reaches);
    teeny__free(value_buf);
    teeny__free(saved_buf);
    teeny__free(grad_buf);
    teeny__free(grad_def);
    teeny__free(temp_buf);
    return st;
}

/* ---- running ---- */

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
    if (st != TEENY_OK || (st = check_node(p->g, n, "teeny_plan_tensor")) != TEENY_OK)
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

teeny_status teeny_plan_backward(teeny_plan *p)
{
    teeny_status st = check_plan(p, "teeny_plan_backward");
    if (st != TEENY_OK)
        return st;
    if (!p->training)
        return teeny__error(p->ctx, TEENY_ERR_STATE, "teeny_plan_backward: the plan was compiled for inference");
    return teeny__recorder_replay(p->ctx, p->rec, p->bwd_from, p->bwd_to);
}

teeny_status teeny_plan_zero_grad(teeny_plan *p)
{
    teeny_status st = check_plan(p, "teeny_plan_zero_grad");
    if (st != TEENY_OK)
        return st;
    if (!p->training)
        return teeny__error(p->ctx, TEENY_ERR_STATE, "teeny_plan_zero_grad: the plan was compiled for inference");
    return teeny__recorder_replay(p->ctx, p->rec, p->zero_from, p->zero_to);
}

teeny_status teeny_plan_read(teeny_plan *p, teeny_node n, float *dst, size_t count)
{
    teeny_status st = check_plan(p, "teeny_plan_read");
    if (st != TEENY_OK || (st = check_node(p->g, n, "teeny_plan_read")) != TEENY_OK)
        return st;
    const teeny__gnode *nd = &p->g->nodes[n];
    if (nd->kind == TEENY__NODE_OP && !nd->is_output && n != p->loss)
        return teeny__error(p->ctx, TEENY_ERR_STATE,
                            "teeny_plan_read: %s is not marked as an output (teeny_graph_mark_output before compile); "
                            "its memory is reused", nd->name);
    if (!p->forwarded && p->g->nodes[root_of(p->g, n)].kind != TEENY__NODE_INPUT)
        return teeny__error(p->ctx, TEENY_ERR_STATE, "teeny_plan_read: no forward has run; %s has no value yet",
                            nd->name);
    p->host_syncs++;
    return teeny_tensor_read(p->value[n], dst, count);
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
        *forward = p->fwd_to - p->fwd_from;
    if (backward)
        *backward = p->bwd_to - p->bwd_from;
    return TEENY_OK;
}
