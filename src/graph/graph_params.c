/*
 * graph_params.c -- a graph's parameter and state slots as the rest of the
 * library sees them: their enumeration in creation order (teeny_graph_param
 * and teeny_graph_state, what optimizers and checkpoints list), full names
 * and an importer's aliases, freezing, and ties. A tied parameter slot
 * shares another slot's parameter (teeny_graph_tie_param; an ONNX
 * initializer that feeds several nodes): it has no tensor, gradient, name
 * or index of its own -- its node reads the owner's tensor, and the
 * backward derivation (graph_compile.c) sums the gradients of every use
 * into the owner's, in a fixed order. An owner is never itself tied, so a
 * tie is one step (teeny__graph_param_root). Names are looked up through
 * graph_names.c's indexes, never by a scan of the nodes.
 */
#include <stdio.h>
#include <string.h>

#include "graph_internal.h"

teeny__slot_ref teeny__graph_param_root(const teeny_graph *g, int node, int slot)
{
    return g->nodes[node].tied[slot] ? g->nodes[node].tie[slot] : (teeny__slot_ref){node, slot};
}

/* The i-th (param or state) slot in creation order; tied slots are not
 * parameters of their own. */
static int find_slot(const teeny_graph *g, int want_state, int i, int *node, int *slot)
{
    for (int k = 0; k < g->n_nodes; k++) {
        const teeny__gnode *nd = &g->nodes[k];
        int n = want_state ? nd->shapes.n_state : nd->shapes.n_param;
        for (int j = 0; nd->kind == TEENY__NODE_OP && j < n; j++)
            if (teeny__graph_slot_owned(g, k, want_state, j) && i-- == 0) {
                *node = k;
                *slot = j;
                return 1;
            }
    }
    return 0;
}

static int count_slots(const teeny_graph *g, int want_state)
{
    int total = 0;
    for (int k = 0; g && k < g->n_nodes; k++) {
        const teeny__gnode *nd = &g->nodes[k];
        for (int j = 0; nd->kind == TEENY__NODE_OP && j < (want_state ? nd->shapes.n_state : nd->shapes.n_param); j++)
            total += teeny__graph_slot_owned(g, k, want_state, j);
    }
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

const char *teeny__graph_slot_name(const teeny_graph *g, int node, int is_state, int slot, char *buf, size_t cap)
{
    if (!is_state && g->nodes[node].tied[slot]) { /* a tied slot goes by its owner's name */
        teeny__slot_ref r = g->nodes[node].tie[slot];
        node = r.node;
        slot = r.slot;
    }
    const teeny__gnode *nd = &g->nodes[node];
    if (nd->alias[is_state != 0][slot])
        return nd->alias[is_state != 0][slot];
    snprintf(buf, cap, "%s.%s", nd->name, is_state ? nd->shapes.state_name[slot] : nd->shapes.param_name[slot]);
    return buf;
}

/* The name in a thread-local buffer (valid until the next call). */
static const char *slot_name(const teeny_graph *g, int node, int is_state, int slot)
{
    static _Thread_local char buf[TEENY__NAME_CAP + 32];
    return teeny__graph_slot_name(g, node, is_state, slot, buf, sizeof buf);
}

teeny_status teeny__graph_slot_alias(teeny_graph *g, teeny_node n, int is_state, int slot, const char *name)
{
    char buf[TEENY__NAME_CAP + 32];
    teeny_status st = teeny__graph_check(g, "teeny__graph_slot_alias");
    if (st != TEENY_OK || (st = teeny__graph_check_node(g, n, "teeny__graph_slot_alias")) != TEENY_OK)
        return st;
    teeny__gnode *nd = &g->nodes[n];
    int count = is_state ? nd->shapes.n_state : nd->shapes.n_param;
    if (nd->kind != TEENY__NODE_OP || slot < 0 || slot >= count || !name || !*name || strlen(name) > 1023)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny__graph_slot_alias: node %s has no %s slot %d, or the name is "
                            "empty or over 1023 characters", nd->name, is_state ? "state" : "parameter", slot);
    if (!is_state && nd->tied[slot])
        return teeny__error(g->ctx, TEENY_ERR_STATE, "teeny__graph_slot_alias: parameter slot %d of node %s shares "
                            "%s", slot, nd->name, teeny__graph_slot_name(g, n, 0, slot, buf, sizeof buf));
    teeny__slot_pos self = {n, is_state != 0, slot};
    if (teeny__graph_find_slot(g, name, &self, -1, NULL))
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny__graph_slot_alias: the name %s is taken", name);
    char *copy = teeny__malloc(strlen(name) + 1);
    if (!copy)
        return teeny__error(g->ctx, TEENY_ERR_NOMEM, "teeny__graph_slot_alias: out of host memory");
    memcpy(copy, name, strlen(name) + 1);
    return teeny__graph_alias_set(g, n, is_state != 0, slot, copy);
}

teeny_tensor *teeny__graph_slot_tensor(const teeny_graph *g, teeny_node n, int is_state, int slot)
{
    if (!g || n < 0 || n >= g->n_nodes || g->nodes[n].kind != TEENY__NODE_OP || slot < 0 ||
        slot >= (is_state ? g->nodes[n].shapes.n_state : g->nodes[n].shapes.n_param))
        return NULL;
    return is_state ? g->nodes[n].state[slot] : g->nodes[n].param[slot];
}

teeny_status teeny__graph_param_freeze(teeny_graph *g, teeny_node n, int slot, int frozen)
{
    teeny_status st = teeny__graph_check(g, "teeny__graph_param_freeze");
    if (st != TEENY_OK || (st = teeny__graph_check_node(g, n, "teeny__graph_param_freeze")) != TEENY_OK)
        return st;
    if (g->nodes[n].kind != TEENY__NODE_OP || slot < 0 || slot >= g->nodes[n].shapes.n_param)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny__graph_param_freeze: node %s has no parameter slot %d",
                            g->nodes[n].name, slot);
    teeny__slot_ref r = teeny__graph_param_root(g, n, slot); /* a tied slot freezes what it shares */
    g->nodes[r.node].frozen[r.slot] = frozen != 0;
    return TEENY_OK;
}

/* fn's i-th (param or state) slot, checked, its name into *name when asked. */
static teeny_status indexed_slot(const teeny_graph *g, const char *fn, int want_state, int i, const char **name,
                                 int *node, int *slot)
{
    teeny_status st = teeny__graph_check(g, fn);
    if (st != TEENY_OK)
        return st;
    if (i < 0 || !find_slot(g, want_state, i, node, slot))
        return teeny__error(g->ctx, TEENY_ERR_ARG, "%s: index %d outside 0..%d", fn, i,
                            count_slots(g, want_state) - 1);
    if (name)
        *name = slot_name(g, *node, want_state, *slot);
    return TEENY_OK;
}

teeny_status teeny_graph_param(const teeny_graph *g, int i, const char **name, teeny_tensor **value,
                               teeny_tensor **grad)
{
    int node, slot;
    teeny_status st = indexed_slot(g, "teeny_graph_param", 0, i, name, &node, &slot);
    if (st != TEENY_OK)
        return st;
    if (value)
        *value = g->nodes[node].param[slot];
    if (grad)
        *grad = g->nodes[node].frozen[slot] ? NULL : g->nodes[node].param_grad[slot];
    return TEENY_OK;
}

teeny_status teeny_graph_state(const teeny_graph *g, int i, const char **name, teeny_tensor **value)
{
    int node, slot;
    teeny_status st = indexed_slot(g, "teeny_graph_state", 1, i, name, &node, &slot);
    if (st != TEENY_OK)
        return st;
    if (value)
        *value = g->nodes[node].state[slot];
    return TEENY_OK;
}


/* ---- ties ---- */

static int same_shape(const teeny__shape *a, const teeny__shape *b)
{
    int same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++)
        same = a->shape[i] == b->shape[i];
    return same;
}

teeny_status teeny__graph_param_tie(teeny_graph *g, teeny_node n, int slot, teeny_node owner, int owner_slot)
{
    char a[TEENY__NAME_CAP + 32], b[TEENY__NAME_CAP + 32], sa[96], sb[96];
    teeny_status st = teeny__graph_check(g, "teeny_graph_tie_param");
    if (st != TEENY_OK || (st = teeny__graph_check_node(g, n, "teeny_graph_tie_param")) != TEENY_OK ||
        (st = teeny__graph_check_node(g, owner, "teeny_graph_tie_param")) != TEENY_OK)
        return st;
    if (g->nodes[n].kind != TEENY__NODE_OP || slot < 0 || slot >= g->nodes[n].shapes.n_param ||
        g->nodes[owner].kind != TEENY__NODE_OP || owner_slot < 0 || owner_slot >= g->nodes[owner].shapes.n_param)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_tie_param: node %s has no parameter slot %d, or node "
                            "%s none %d", g->nodes[n].name, slot, g->nodes[owner].name, owner_slot);
    teeny__gnode *nd = &g->nodes[n];
    teeny__slot_ref r = teeny__graph_param_root(g, owner, owner_slot);
    teeny__gnode *od = &g->nodes[r.node];
    teeny__graph_slot_name(g, n, 0, slot, a, sizeof a);
    teeny__graph_slot_name(g, r.node, 0, r.slot, b, sizeof b);
    if (r.node == n && r.slot == slot)
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_tie_param: %s cannot share itself", a);
    if (g->n_plans) /* their recordings hold the tensors */
        return teeny__error(g->ctx, TEENY_ERR_STATE, "teeny_graph_tie_param: %s: the graph has %d compiled plans; tie "
                            "parameters before compiling", a, g->n_plans);
    if (nd->tied[slot] || nd->shared[slot])
        return teeny__error(g->ctx, TEENY_ERR_STATE, "teeny_graph_tie_param: %s %s", a,
                            nd->tied[slot] ? "already shares another parameter" : "is shared by other slots");
    if (!same_shape(&nd->shapes.param[slot], &od->shapes.param[r.slot]))
        return teeny__error(g->ctx, TEENY_ERR_SHAPE, "teeny_graph_tie_param: %s is %s, %s is %s", a,
                            teeny__shape_text(&nd->shapes.param[slot], sa, sizeof sa), b,
                            teeny__shape_text(&od->shapes.param[r.slot], sb, sizeof sb));
    teeny_tensor_destroy(nd->param[slot]);
    teeny_tensor_destroy(nd->param_grad[slot]);
    teeny__graph_alias_set(g, n, 0, slot, NULL); /* dropping an alias allocates nothing */
    nd->param_grad[slot] = NULL;
    nd->param[slot] = od->param[r.slot];
    nd->frozen[slot] = 0; /* the owner's flag rules */
    nd->tie[slot] = r;
    nd->tied[slot] = 1;
    od->shared[r.slot] = 1;
    return TEENY_OK;
}

/* The parameter slot whose full name is name (tied slots have none). */
static int find_named(const teeny_graph *g, const char *name, int *node, int *slot)
{
    teeny__slot_pos at;
    if (!name || !teeny__graph_find_slot(g, name, NULL, 0, &at))
        return 0;
    *node = at.node;
    *slot = at.slot;
    return 1;
}

teeny_status teeny_graph_tie_param(teeny_graph *g, const char *name, const char *to)
{
    int n, slot, owner, owner_slot;
    teeny_status st = teeny__graph_check(g, "teeny_graph_tie_param");
    if (st != TEENY_OK)
        return st;
    if (!find_named(g, name, &n, &slot) || !find_named(g, to, &owner, &owner_slot))
        return teeny__error(g->ctx, TEENY_ERR_ARG, "teeny_graph_tie_param: no parameter is named \"%.80s\"",
                            !name || !find_named(g, name, &n, &slot) ? (name ? name : "(NULL)")
                                                                     : (to ? to : "(NULL)"));
    return teeny__graph_param_tie(g, n, slot, owner, owner_slot);
}
