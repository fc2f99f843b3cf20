/*
 * builders_a.c -- the graph builders of group A's ops (ONNX phase 2):
 * broadcasting binary ops, reductions, layout ops, softmax, layer norm,
 * batched matmul. Each turns its arguments into the op's attributes and
 * adds a node through teeny__graph_node, as builders.c does.
 */
#include <string.h>

#include "graph_internal.h"

/* ---- constants ---- */

teeny_status teeny_graph_constant(teeny_graph *g, const char *name, int ndim, const int64_t *shape,
                                  const float *data, teeny_node *out)
{
    teeny__gnode *n;
    teeny_tensor *t = NULL;
    int idx;
    teeny_status st = teeny__graph_check(g, "teeny_graph_constant");
    if (st != TEENY_OK)
        return st;
    if (!out)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_constant: out is NULL");
    *out = -1;
    if (ndim < 1 || ndim > TEENY_MAX_DIMS || !shape || !data)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_constant: rank %d outside 1..5, or shape or data NULL",
                            ndim);
    if ((st = teeny_tensor_create(g->ctx, ndim, shape, &t)) != TEENY_OK)
        return teeny__error(g->ctx, st, "teeny_graph_constant: %s", teeny_last_error(g->ctx));
    if ((st = teeny_tensor_write(t, data, (size_t)t->numel)) != TEENY_OK ||
        (st = teeny__graph_push(g, name, "const", &n, &idx)) != TEENY_OK) {
        teeny_tensor_destroy(t);
        return st;
    }
    n->kind = TEENY__NODE_CONST;
    n->constant = t;
    n->shapes.out.ndim = ndim;
    memcpy(n->shapes.out.shape, shape, (size_t)ndim * sizeof *shape);
    g->n_nodes++;
    *out = idx;
    return TEENY_OK;
}


static teeny_status null_arg(teeny_graph *g, const char *fn, const char *what, teeny_node *out)
{
    if (out)
        *out = -1;
    return teeny__error(teeny__graph_ctx(g), TEENY_ERR_ARG, "%s: %s is NULL", fn, what);
}

teeny_status teeny_graph_binary(teeny_graph *g, const char *name, teeny_binary_op op, teeny_node a, teeny_node b,
                                teeny_node *out)
{
    teeny_node in[2] = {a, b};
    teeny__op_attrs at = {.binary = {op}};
    return teeny__graph_node(g, TEENY__OP_BINARY, name, 2, in, &at, out);
}

teeny_status teeny_graph_reduce(teeny_graph *g, const char *name, teeny_node x, const teeny_reduce_params *p,
                                teeny_node *out)
{
    if (!p)
        return null_arg(g, "teeny_graph_reduce", "p", out);
    teeny__op_attrs at = {.reduce = {p->axes, p->keepdims, p->mean}};
    return teeny__graph_node(g, TEENY__OP_REDUCE, name, 1, &x, &at, out);
}
