/*
 * builders_layout.c -- the graph builders of constants and the layout
 * ops (teeny_graph_<op>, the public API): transpose, N-d slice, pad,
 * expand, concatenation along any axis, gather (its indices a constant
 * of its own). Like builders.c: attributes, then teeny__graph_node.
 */
#include <stdio.h>
#include <string.h>

#include "graph_internal.h"

/* ---- constants ---- */

static teeny_status add_constant(teeny_graph *g, const char *name, int ndim, const int64_t *shape, const void *data,
                                 int is_i32, teeny_node *out);

teeny_status teeny_graph_constant(teeny_graph *g, const char *name, int ndim, const int64_t *shape,
                                  const float *data, teeny_node *out)
{
    return add_constant(g, name, ndim, shape, data, 0, out);
}

static teeny_status add_constant(teeny_graph *g, const char *name, int ndim, const int64_t *shape, const void *data,
                                 int is_i32, teeny_node *out)
{
    teeny__gnode *n;
    teeny_tensor *t = NULL;
    int idx;
    teeny_status st = teeny__graph_check_out(g, "teeny_graph_constant", out);
    if (st != TEENY_OK)
        return st;
    if (ndim < 1 || ndim > TEENY_MAX_DIMS || !shape || !data)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_constant: rank %d outside 1..5, or shape or data NULL",
                            ndim);
    if ((st = (is_i32 ? teeny_tensor_create_i32 : teeny_tensor_create)(g->ctx, ndim, shape, &t)) != TEENY_OK)
        return teeny__error(g->ctx, st, "teeny_graph_constant: %s", teeny_last_error(g->ctx));
    if ((st = is_i32 ? teeny_tensor_write_i32(t, data, (size_t)t->numel) : teeny_tensor_write(t, data, (size_t)t->numel)) !=
            TEENY_OK ||
        (st = teeny__graph_push(g, name, "const", &n, &idx)) != TEENY_OK) {
        teeny_tensor_destroy(t);
        return st;
    }
    n->kind = TEENY__NODE_CONST;
    n->constant = t;
    n->shapes.out.ndim = ndim;
    n->shapes.out.is_i32 = is_i32;
    memcpy(n->shapes.out.shape, shape, (size_t)ndim * sizeof *shape);
    teeny__graph_commit(g);
    *out = idx;
    return TEENY_OK;
}

/* ---- layout ---- */

/* x's rank (x checked), for the builders that copy per-axis arrays. */
static teeny_status rank_of(teeny_graph *g, const char *fn, teeny_node x, const void *arr, int *ndim, teeny_node *out)
{
    teeny_status st = teeny__graph_check_out(g, fn, out);
    if (st != TEENY_OK || (st = teeny__graph_check_node(g, x, fn)) != TEENY_OK)
        return st;
    if (!arr)
        return teeny__graph_null_arg(g, fn, "an array argument", out);
    *ndim = g->nodes[x].shapes.out.ndim;
    return TEENY_OK;
}

teeny_status teeny_graph_transpose(teeny_graph *g, const char *name, teeny_node x, const int *perm, teeny_node *out)
{
    int ndim;
    teeny__op_attrs at = {0};
    teeny_status st = rank_of(g, "teeny_graph_transpose", x, perm, &ndim, out);
    if (st != TEENY_OK)
        return st;
    memcpy(at.transpose.perm, perm, sizeof(int) * (size_t)ndim);
    return teeny__graph_node(g, TEENY__OP_TRANSPOSE, name, 1, &x, &at, out);
}

teeny_status teeny_graph_slice(teeny_graph *g, const char *name, teeny_node x, const teeny_slice_params *p,
                               teeny_node *out)
{
    if (!p)
        return teeny__graph_null_arg(g, "teeny_graph_slice", "p", out);
    teeny__op_attrs at;
    memcpy(at.slicend.start, p->start, sizeof p->start);
    memcpy(at.slicend.end, p->end, sizeof p->end);
    memcpy(at.slicend.step, p->step, sizeof p->step);
    return teeny__graph_node(g, TEENY__OP_SLICE, name, 1, &x, &at, out);
}

teeny_status teeny_graph_pad(teeny_graph *g, const char *name, teeny_node x, const int64_t *lo, const int64_t *hi,
                             float value, teeny_node *out)
{
    int ndim;
    teeny__op_attrs at = {0};
    teeny_status st = rank_of(g, "teeny_graph_pad", x, lo && hi ? lo : NULL, &ndim, out);
    if (st != TEENY_OK)
        return st;
    memcpy(at.pad.lo, lo, sizeof(int64_t) * (size_t)ndim);
    memcpy(at.pad.hi, hi, sizeof(int64_t) * (size_t)ndim);
    at.pad.value = value;
    return teeny__graph_node(g, TEENY__OP_PAD, name, 1, &x, &at, out);
}

teeny_status teeny_graph_expand(teeny_graph *g, const char *name, teeny_node x, int ndim, const int64_t *shape,
                                teeny_node *out)
{
    teeny__op_attrs at = {0};
    if (!shape || ndim < 1 || ndim > TEENY_MAX_DIMS) {
        if (out)
            *out = -1;
        return teeny__error(teeny__graph_ctx(g), TEENY_ERR_ARG, "teeny_graph_expand: rank %d outside 1..5 or shape NULL",
                            ndim);
    }
    at.expand.ndim = ndim;
    memcpy(at.expand.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return teeny__graph_node(g, TEENY__OP_EXPAND, name, 1, &x, &at, out);
}

/* Chains of at most four inputs, as teeny_graph_concat. */
teeny_status teeny_graph_concat_axis(teeny_graph *g, const char *name, int axis, int n, const teeny_node *xs,
                                     teeny_node *out)
{
    if (!xs || n < 1 || !out) {
        if (out)
            *out = -1;
        return teeny__error(teeny__graph_ctx(g), TEENY_ERR_ARG, "teeny_graph_concat_axis: %d inputs, xs %s, out %s", n,
                            xs ? "set" : "NULL", out ? "set" : "NULL");
    }
    return teeny__graph_concat_chain(g, name, TEENY__OP_CONCAT_AXIS, axis, n, xs, out);
}

teeny_status teeny_graph_gather(teeny_graph *g, const char *name, teeny_node x, int axis, int ndim,
                                const int64_t *shape, const int32_t *indices, teeny_node *out)
{
    char iname[TEENY__NAME_CAP + 16];
    teeny_node in[2] = {x, -1};
    if (!indices)
        return teeny__graph_null_arg(g, "teeny_graph_gather", "indices", out);
    snprintf(iname, sizeof iname, "%.80s.indices", name && *name ? name : "gather");
    teeny_status st = add_constant(g, name && *name ? iname : NULL, ndim, shape, indices, 1, &in[1]);
    if (st != TEENY_OK) {
        if (out)
            *out = -1;
        return st;
    }
    teeny__op_attrs at = {.gather = {axis}};
    return teeny__graph_node(g, TEENY__OP_GATHER, name, 2, in, &at, out);
}
