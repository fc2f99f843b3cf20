/*
 * graph.c -- building the DAG: nodes in topological order (inputs, views,
 * constants and the generic op node every op family's builder goes
 * through), their shapes for the build batch (1, or an importer's) checked
 * as each node is added, parameters and
 * running statistics created and initialized (seeded, so a graph is
 * reproducible), node introspection and the training counters (the
 * parameter and state slots, their names and ties, are graph_params.c's).
 * It also holds the small helpers the other graph files share (shape text
 * and size, view shapes, node checks).
 * Compiling a graph into a plan is graph_compile.c (phases), graph_plan.c
 * (liveness and memory) and autograd.c; running a plan is graph_run.c.
 * Nothing here depends on those files.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

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

teeny_status teeny__graph_check(const teeny_graph *g, const char *fn)
{
    if (!g)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: graph is NULL", fn);
    teeny__clear_error(g->ctx);
    return TEENY_OK;
}

teeny_status teeny__graph_check_out(const teeny_graph *g, const char *fn, teeny_node *out)
{
    teeny_status st = teeny__graph_check(g, fn);
    if (st != TEENY_OK)
        return st;
    if (!out)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "%s: out is NULL", fn);
    *out = -1;
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
    g->build_batch = 1;
    *out = g;
    return TEENY_OK;
}

void teeny_graph_destroy(teeny_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < TEENY__OP_MAX_SLOTS; j++) {
            if (!g->nodes[i].tied[j]) /* a tied slot borrows its owner's */
                teeny_tensor_destroy(g->nodes[i].param[j]);
            teeny_tensor_destroy(g->nodes[i].param_grad[j]);
            teeny_tensor_destroy(g->nodes[i].state[j]);
            teeny__free(g->nodes[i].alias[0][j]);
            teeny__free(g->nodes[i].alias[1][j]);
        }
    for (int i = 0; i < g->n_nodes; i++)
        teeny_tensor_destroy(g->nodes[i].constant);
    teeny__graph_names_free(g);
    teeny__free(g->nodes);
    teeny__free(g);
}

const char *teeny__shape_text(const teeny__shape *s, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < s->ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)s->shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]%s", s->is_i32 ? " int32" : "");
    return buf;
}

int64_t teeny__shape_numel(const teeny__shape *s)
{
    return teeny__dims_product(s->shape, s->ndim);
}

/* One shape of a node: every size >= 1, at most 2^31 - 1 elements. */
static teeny_status check_one_shape(teeny_ctx *ctx, const char *node, const char *what, const char *slot,
                                    const teeny__shape *s, int64_t batch)
{
    char b[96];
    int64_t n = teeny__shape_numel(s);
    for (int i = 0; i < s->ndim; i++)
        if (s->shape[i] < 1)
            return teeny__error(ctx, TEENY_ERR_SHAPE, "node %s: %s%s %s has an empty dimension (batch %lld)", node,
                                what, slot, teeny__shape_text(s, b, sizeof b), (long long)batch);
    if (n < 0 || n > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE,
                            "node %s: %s%s %s has more than 2^31 - 1 elements at batch %lld (kernels index with "
                            "int32)", node, what, slot, teeny__shape_text(s, b, sizeof b), (long long)batch);
    return TEENY_OK;
}

teeny_status teeny__check_node_shapes(teeny_ctx *ctx, const char *node, const teeny__node_shapes *s, int64_t batch,
                                      int with_saved)
{
    teeny_status st = check_one_shape(ctx, node, "value", "", &s->out, batch);
    for (int j = 0; j < s->n_saved && with_saved && st == TEENY_OK; j++)
        st = check_one_shape(ctx, node, "saved tensor", "", &s->saved[j], batch);
    for (int j = 0; j < s->n_param && st == TEENY_OK; j++)
        st = check_one_shape(ctx, node, "parameter ", s->param_name[j], &s->param[j], batch);
    for (int j = 0; j < s->n_state && st == TEENY_OK; j++)
        st = check_one_shape(ctx, node, "state ", s->state_name[j], &s->state[j], batch);
    return st;
}

teeny_status teeny__graph_push(teeny_graph *g, const char *name, const char *prefix, teeny__gnode **node, int *idx)
{
    char buf[TEENY__NAME_CAP];
    if (name && *name) {
        if (strlen(name) >= TEENY__NAME_CAP - 24)
            return teeny__error(g->ctx, TEENY_ERR_ARG, "node name \"%.40s...\" is too long", name);
        teeny__strlcpy(buf, name, sizeof buf);
    } else {
        snprintf(buf, sizeof buf, "%s%d", prefix, g->n_nodes);
    }
    if (teeny__graph_find(g, buf) >= 0)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "a node named \"%s\" already exists", buf);
    teeny_status st = teeny__graph_names_reserve(g);
    if (st != TEENY_OK)
        return st;
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

teeny_status teeny__graph_check_node(const teeny_graph *g, teeny_node n, const char *what)
{
    if (n < 0 || n >= g->n_nodes)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "%s: node %d does not exist (the graph has %d)", what, (int)n,
                            g->n_nodes);
    return TEENY_OK;
}

static teeny_status add_input(teeny_graph *g, const char *name, int ndim, const int64_t *shape, int is_i32,
                              int fixed, teeny_node *out)
{
    teeny__gnode *n;
    int idx;
    teeny_status st;
    if (!out)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_input: out is NULL");
    *out = -1;
    if (ndim < 1 || ndim > TEENY_MAX_DIMS || !shape)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_input: rank %d outside 1..5 or shape NULL", ndim);
    if (shape[0] != -1 && !fixed)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_input: shape[0] must be -1 (the batch), got %lld",
                            (long long)shape[0]);
    for (int i = fixed ? 0 : 1; i < ndim; i++)
        if (shape[i] < 1)
            return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_input: dimension %d is %lld", i,
                                (long long)shape[i]);
    int64_t per_sample = teeny__dims_product(shape + !fixed, ndim - !fixed);
    if (per_sample < 0 || per_sample > INT32_MAX) {
        char b[96];
        return teeny__error(g->ctx, TEENY_ERR_RANGE,
                            "teeny_graph_input: %s has more than 2^31 - 1 elements per sample (kernels index with "
                            "int32)", teeny__dims_str(shape, ndim, b, sizeof b));
    }
    if ((st = teeny__graph_push(g, name, "input", &n, &idx)) != TEENY_OK)
        return st;
    n->kind = TEENY__NODE_INPUT;
    n->shapes.out.ndim = ndim;
    n->shapes.out.is_i32 = is_i32;
    memcpy(n->shapes.out.shape, shape, (size_t)ndim * sizeof *shape);
    if (!fixed)
        n->shapes.out.shape[0] = g->build_batch;
    n->fixed = fixed;
    teeny__graph_commit(g);
    *out = idx;
    return TEENY_OK;
}

teeny_status teeny_graph_input(teeny_graph *g, const char *name, int ndim, const int64_t *shape, teeny_node *out)
{
    teeny_status st = teeny__graph_check(g, "teeny_graph_input");
    return st != TEENY_OK ? st : add_input(g, name, ndim, shape, 0, 0, out);
}

teeny_status teeny__graph_input_as(teeny_graph *g, const char *name, int ndim, const int64_t *shape, int is_i32,
                                   int fixed, teeny_node *out)
{
    teeny_status st = teeny__graph_check(g, is_i32 ? "teeny_graph_labels" : "teeny_graph_input");
    return st != TEENY_OK ? st : add_input(g, name, ndim, shape, is_i32, fixed, out);
}

teeny_status teeny__graph_set_build_batch(teeny_graph *g, int64_t batch)
{
    teeny_status st = teeny__graph_check(g, "teeny__graph_set_build_batch");
    if (st != TEENY_OK)
        return st;
    if (g->n_nodes)
        return teeny__error(g->ctx, TEENY_ERR_STATE, "teeny__graph_set_build_batch: the graph has nodes");
    if (batch < 1 || batch > INT32_MAX)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny__graph_set_build_batch: batch %lld", (long long)batch);
    g->build_batch = batch;
    return TEENY_OK;
}


teeny_status teeny_graph_labels(teeny_graph *g, const char *name, teeny_node *out)
{
    int64_t shape[1] = {-1};
    teeny_status st = teeny__graph_check(g, "teeny_graph_labels");
    return st != TEENY_OK ? st : add_input(g, name, 1, shape, 1, 0, out);
}

/* Resolve a view's shape against its input's element count: each size is
 * >= 1 or, in one place, -1 (else TEENY_ERR_ARG); the product, formed with
 * overflow checks, must be numel (or divide it, with a -1), else
 * TEENY_ERR_SHAPE. */
teeny_status teeny__view_shape(teeny_ctx *ctx, const char *name, int ndim, const int64_t *want, int64_t numel,
                               teeny__shape *out)
{
    char b[96];
    int infer_at = -1;
    int64_t known = 1;
    memset(out, 0, sizeof *out); /* sizes past ndim are 0, never stack garbage */
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        if (want[i] == -1 && infer_at < 0)
            infer_at = i;
        else if (want[i] < 1)
            return teeny__error(ctx, TEENY_ERR_ARG, "reshape %s: dimension %d is %lld (sizes are >= 1, or -1 once)",
                                name, i, (long long)want[i]);
    }
    for (int i = 0; i < ndim; i++) {
        if (i == infer_at)
            continue;
        known = teeny__mul_sizes(known, want[i]);
        if (known < 0 || known > numel)
            return teeny__error(ctx, TEENY_ERR_SHAPE, "reshape %s: %lld elements cannot take the shape %s", name,
                                (long long)numel, teeny__dims_str(want, ndim, b, sizeof b));
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
    teeny_status st = teeny__graph_check_out(g, "teeny_graph_reshape", out);
    if (st != TEENY_OK || (st = teeny__graph_check_node(g, x, "teeny_graph_reshape")) != TEENY_OK)
        return st;
    if (ndim < 1 || ndim > TEENY_MAX_DIMS || !shape)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_reshape: rank %d outside 1..5 or shape NULL", ndim);
    if (g->nodes[x].shapes.out.is_i32)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_reshape: %s is int32", g->nodes[x].name);
    st = teeny__view_shape(g->ctx, name ? name : "", ndim, shape, teeny__shape_numel(&g->nodes[x].shapes.out), &s);
    if (st != TEENY_OK)
        return st;
    if ((st = teeny__graph_push(g, name, "reshape", &n, &idx)) != TEENY_OK)
        return st;
    n->kind = TEENY__NODE_VIEW;
    n->n_in = 1;
    n->in[0] = x;
    n->view_ndim = ndim;
    memcpy(n->view_shape, shape, (size_t)ndim * sizeof *shape);
    n->shapes.out = s;
    teeny__graph_commit(g);
    *out = idx;
    return TEENY_OK;
}

teeny_status teeny_graph_flatten(teeny_graph *g, const char *name, teeny_node x, teeny_node *out)
{
    int64_t shape[2] = {-1, 0};
    teeny_status st = teeny__graph_check(g, "teeny_graph_flatten");
    if (st != TEENY_OK)
        return st;
    if ((st = teeny__graph_check_node(g, x, "teeny_graph_flatten")) != TEENY_OK)
        return st;
    const teeny__shape *s = &g->nodes[x].shapes.out; /* checked when added: sizes >= 1 */
    shape[1] = teeny__shape_numel(s) / s->shape[0];
    return teeny_graph_reshape(g, name, x, 2, shape, out);
}

teeny_status teeny_graph_mark_output(teeny_graph *g, teeny_node n)
{
    teeny_status st = teeny__graph_check(g, "teeny_graph_mark_output");
    if (st == TEENY_OK && (st = teeny__graph_check_node(g, n, "teeny_graph_mark_output")) == TEENY_OK)
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
    teeny_status st = teeny__graph_check(g, desc->name);
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
        if ((st = teeny__graph_check_node(g, in[i], desc->name)) != TEENY_OK)
            return st;
        s.in[i] = g->nodes[in[i]].shapes.out;
    }
    if (attrs) /* NULL: an op without attributes */
        s.attrs = *attrs;
    teeny__op_slots sl = teeny__op_slots_of(op);
    if (n_in > sl.in)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "graph %s: %d inputs; it takes at most %d", desc->name, n_in, sl.in);
    if ((st = desc->infer(g->ctx, &s)) == TEENY_OK &&
        (s.n_param > sl.param || s.n_state > sl.state || s.n_saved > sl.saved))
        st = teeny__error(g->ctx, TEENY_ERR_STATE, "op %s: infer gave %d params, %d states, %d saved; its SLOTS hold "
                          "%d, %d, %d", desc->name, s.n_param, s.n_state, s.n_saved, sl.param, sl.state, sl.saved);
    if (st != TEENY_OK ||
        (st = teeny__check_node_shapes(g->ctx, name ? name : desc->name, &s, g->build_batch, 1)) != TEENY_OK) {
        /* name both nodes and shapes */
        char msg[512], a[96], b[96];
        teeny__strlcpy(msg, teeny_last_error(g->ctx), sizeof msg);
        return teeny__error(g->ctx, st, "adding %s \"%s\": %s (inputs: %s %s%s%s %s)", desc->name,
                            name ? name : "", msg, g->nodes[in[0]].name, teeny__shape_text(&s.in[0], a, sizeof a),
                            n_in > 1 ? ", " : "", n_in > 1 ? g->nodes[in[1]].name : "",
                            n_in > 1 ? teeny__shape_text(&s.in[1], b, sizeof b) : "");
    }
    if ((st = teeny__graph_push(g, name, desc->name, &n, &idx)) != TEENY_OK)
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
    teeny__graph_commit(g);
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
    teeny_status st = teeny__graph_check(g, "teeny_graph_node_info");
    if (st != TEENY_OK || (st = teeny__graph_check_node(g, n, "teeny_graph_node_info")) != TEENY_OK)
        return st;
    if (name)
        *name = g->nodes[n].name;
    if (ndim)
        *ndim = g->nodes[n].shapes.out.ndim;
    if (shape) { /* ndim sizes, then zeros: nothing past ndim is left uninitialized or stale */
        const teeny__shape *s = &g->nodes[n].shapes.out;
        for (int i = 0; i < TEENY_MAX_DIMS; i++)
            shape[i] = i < s->ndim ? s->shape[i] : 0;
    }
    return TEENY_OK;
}

int64_t teeny_graph_train_steps(const teeny_graph *g)
{
    return g ? g->train_steps : 0;
}

teeny_status teeny_graph_set_train_steps(teeny_graph *g, int64_t steps)
{
    teeny_status st = teeny__graph_check(g, "teeny_graph_set_train_steps");
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

/* The node whose storage a value lives in (views share their input's). */
int teeny__graph_root(const teeny_graph *g, int i)
{
    while (g->nodes[i].kind == TEENY__NODE_VIEW)
        i = g->nodes[i].in[0];
    return i;
}
