/*
 * graph_names.c -- finding a node or a parameter slot by name without a
 * scan. The graph keeps two indexes (open addressing, FNV-1a of the name,
 * at most half full): its node names, and the aliases its slots were
 * given (an importer's ONNX names). A slot without an alias is named
 * "<node>.<suffix>" and is found through its node's name. So adding a
 * node, giving a slot a name that must be unique, or importing a model of
 * n nodes costs O(n) in all, not O(n^2). Entries are node indexes (node
 * names) or packed slot positions (aliases); the name itself lives in the
 * node, so the index follows it when the node array moves. Which slots
 * have a name (and a tensor) of their own, teeny__graph_slot_owned, is
 * here too, below graph.c and graph_params.c.
 */
#include <string.h>

#include "graph_internal.h"

typedef const char *(*name_of_fn)(const teeny_graph *g, int value);

static const char *node_name_of(const teeny_graph *g, int value)
{
    return g->nodes[value].name;
}

/* An alias entry: (node * 2 + is_state) * TEENY__OP_MAX_SLOTS + slot. */
static int alias_value(int node, int is_state, int slot)
{
    return (node * 2 + (is_state != 0)) * TEENY__OP_MAX_SLOTS + slot;
}

static const char *alias_of(const teeny_graph *g, int value)
{
    int slot = value % TEENY__OP_MAX_SLOTS, is_state = value / TEENY__OP_MAX_SLOTS % 2;
    return g->nodes[value / TEENY__OP_MAX_SLOTS / 2].alias[is_state][slot];
}

static size_t home(const char *key, int cap)
{
    return (size_t)teeny__fnv1a64(TEENY__FNV_BASIS, key, strlen(key)) & (size_t)(cap - 1);
}

static int index_find(const teeny__name_index *ix, const teeny_graph *g, name_of_fn name_of, const char *key)
{
    if (!ix->cap || !key)
        return -1;
    for (size_t h = home(key, ix->cap);; h = (h + 1) & (size_t)(ix->cap - 1)) {
        int e = ix->at[h];
        if (!e)
            return -1;
        if (e > 0 && !strcmp(name_of(g, e - 1), key))
            return e - 1;
    }
}

/* Place value (its key not in the index; room reserved). */
static void index_put(teeny__name_index *ix, const teeny_graph *g, name_of_fn name_of, int value)
{
    size_t h = home(name_of(g, value), ix->cap);
    while (ix->at[h] > 0)
        h = (h + 1) & (size_t)(ix->cap - 1);
    ix->used += !ix->at[h];
    ix->at[h] = value + 1;
    ix->live++;
}

/* Room for one more entry: rebuilt (removed entries dropped) once it would
 * be more than half full. 0 when out of host memory. */
static int index_reserve(teeny__name_index *ix, const teeny_graph *g, name_of_fn name_of)
{
    if ((ix->used + 1) * 2 <= ix->cap)
        return 1;
    int cap = 64;
    while (cap < INT32_MAX / 8 && cap < (ix->live + 1) * 4)
        cap *= 2;
    if ((ix->live + 1) * 2 > cap)
        return 0;
    teeny__name_index fresh = {teeny__calloc((size_t)cap, sizeof(int)), cap, 0, 0};
    if (!fresh.at)
        return 0;
    for (int i = 0; i < ix->cap; i++)
        if (ix->at[i] > 0)
            index_put(&fresh, g, name_of, ix->at[i] - 1);
    teeny__free(ix->at);
    *ix = fresh;
    return 1;
}

/* Remove value, whose key is still readable. */
static void index_remove(teeny__name_index *ix, const teeny_graph *g, name_of_fn name_of, int value)
{
    if (!ix->cap)
        return;
    for (size_t h = home(name_of(g, value), ix->cap); ix->at[h]; h = (h + 1) & (size_t)(ix->cap - 1))
        if (ix->at[h] == value + 1) {
            ix->at[h] = -1;
            ix->live--;
            return;
        }
}

int teeny__graph_slot_owned(const teeny_graph *g, int node, int is_state, int slot)
{
    const teeny__gnode *nd = &g->nodes[node];
    return nd->kind == TEENY__NODE_OP && slot >= 0 && slot < (is_state ? nd->shapes.n_state : nd->shapes.n_param) &&
           (is_state || !nd->tied[slot]);
}

void teeny__graph_names_free(teeny_graph *g)
{
    teeny__free(g->node_names.at);
    teeny__free(g->slot_aliases.at);
}

int teeny__graph_find(const teeny_graph *g, const char *name)
{
    return g ? index_find(&g->node_names, g, node_name_of, name) : -1;
}

teeny_status teeny__graph_names_reserve(teeny_graph *g)
{
    if (g->n_nodes >= INT32_MAX / (2 * TEENY__OP_MAX_SLOTS) || !index_reserve(&g->node_names, g, node_name_of))
        return teeny__error(g->ctx, TEENY_ERR_NOMEM, "out of host memory for node %d's name", g->n_nodes);
    return TEENY_OK;
}

void teeny__graph_commit(teeny_graph *g)
{
    index_put(&g->node_names, g, node_name_of, g->n_nodes);
    g->n_nodes++;
}

teeny_status teeny__graph_alias_set(teeny_graph *g, int node, int is_state, int slot, char *alias)
{
    char **at = &g->nodes[node].alias[is_state != 0][slot];
    int value = alias_value(node, is_state, slot);
    if (alias && !index_reserve(&g->slot_aliases, g, alias_of)) {
        teeny__free(alias);
        return teeny__error(g->ctx, TEENY_ERR_NOMEM, "out of host memory naming a slot of node %s",
                            g->nodes[node].name);
    }
    if (*at)
        index_remove(&g->slot_aliases, g, alias_of, value);
    teeny__free(*at);
    *at = alias;
    if (alias)
        index_put(&g->slot_aliases, g, alias_of, value);
    return TEENY_OK;
}

/* Whether (node, is_state, slot) is a better answer than *best (none:
 * node -1): the first in node order, parameters before states. */
static int better(const teeny__slot_pos *best, int node, int is_state, int slot)
{
    if (best->node < 0 || node != best->node)
        return best->node < 0 || node < best->node;
    return is_state != best->is_state ? !is_state : slot < best->slot;
}

static int wanted(const teeny__slot_pos *skip, int want_state, int node, int is_state, int slot)
{
    return (want_state < 0 || want_state == is_state) &&
           !(skip && skip->node == node && skip->is_state == is_state && skip->slot == slot);
}

/* The slots of node k that go by "<k's name>.<suffix>" (no alias). */
static void by_suffix(const teeny_graph *g, int k, const char *suffix, const teeny__slot_pos *skip, int want_state,
                      teeny__slot_pos *best)
{
    const teeny__gnode *nd = &g->nodes[k];
    for (int s = 0; s < 2; s++)
        for (int j = 0; nd->kind == TEENY__NODE_OP && j < (s ? nd->shapes.n_state : nd->shapes.n_param); j++) {
            const char *own = s ? nd->shapes.state_name[j] : nd->shapes.param_name[j];
            if (!nd->alias[s][j] && own && !strcmp(own, suffix) && teeny__graph_slot_owned(g, k, s, j) &&
                wanted(skip, want_state, k, s, j) && better(best, k, s, j))
                *best = (teeny__slot_pos){k, s, j};
        }
}

int teeny__graph_find_slot(const teeny_graph *g, const char *name, const teeny__slot_pos *skip, int want_state,
                           teeny__slot_pos *out)
{
    teeny__slot_pos best = {-1, 0, 0};
    char prefix[TEENY__NAME_CAP];
    int v = index_find(&g->slot_aliases, g, alias_of, name);
    if (v >= 0) {
        int node = v / TEENY__OP_MAX_SLOTS / 2, s = v / TEENY__OP_MAX_SLOTS % 2, slot = v % TEENY__OP_MAX_SLOTS;
        if (teeny__graph_slot_owned(g, node, s, slot) && wanted(skip, want_state, node, s, slot))
            best = (teeny__slot_pos){node, s, slot};
    }
    for (size_t i = 0; name && name[i] && i < sizeof prefix; i++) { /* node names are shorter than TEENY__NAME_CAP */
        if (name[i] != '.')
            continue;
        memcpy(prefix, name, i);
        prefix[i] = '\0';
        int k = teeny__graph_find(g, prefix);
        if (k >= 0)
            by_suffix(g, k, name + i + 1, skip, want_state, &best);
    }
    if (best.node >= 0 && out)
        *out = best;
    return best.node >= 0;
}
