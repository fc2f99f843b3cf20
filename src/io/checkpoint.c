/*
 * checkpoint.c -- a graph's parameters, running statistics, batch-norm
 * num_batches_tracked and (optionally) optimizer state in one safetensors
 * file, under PyTorch state_dict names ("conv1.bn.running_var"), so the
 * same network defined in PyTorch loads it with load_state_dict(strict=True).
 * Optimizer state goes under "optimizer.<parameter name>.<state>"
 * ("optimizer.fc.weight.exp_avg") with the step count as "optimizer.step":
 * keyed by name, a load pairs each moment with its own parameter whatever
 * order the optimizer lists them in. Earlier versions keyed it by the
 * optimizer's position ("optimizer.exp_avg.<i>"), which pairs the wrong
 * moments with equal-shaped parameters listed in another order; such a
 * file loads without an optimizer and is refused, with the reason, with
 * one. Each batch norm's num_batches_tracked is its own
 * counter (PyTorch keeps one per module), saved and loaded per node.
 * Loading validates every value (tensors' presence, dtype and shape; the
 * counters' range) before writing any, so a bad file leaves the graph and
 * the optimizer unchanged.
 */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"

#define NAME_CAP (TEENY__NAME_CAP + 48)

static teeny_status bn_count_name(const teeny_graph *g, int node, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s.num_batches_tracked", g->nodes[node].name);
    return TEENY_OK;
}

/* The checkpoint name of optimizer state i, "optimizer.<param>.<state>",
 * and its tensor: its parameter must be one of g's (by identity), else
 * TEENY_ERR_ARG -- a state keyed by another graph's parameter would load
 * into whatever this graph's parameter of that name is. */
static teeny_status opt_state_name(const teeny_graph *g, const teeny_optimizer *opt, int i, const char *fn,
                                   char *name, size_t cap, teeny_tensor **t)
{
    const teeny_tensor *param;
    const char *kind;
    int index;
    teeny_status st = teeny__optimizer_state_param(opt, i, &param, &index, &kind);
    if (st == TEENY_OK)
        st = teeny_optimizer_state(opt, i, NULL, t);
    if (st != TEENY_OK)
        return teeny__error(g->ctx, st, "%s: %s", fn, teeny_last_error(g->ctx));
    for (int k = 0; k < g->n_nodes; k++)
        for (int j = 0; g->nodes[k].kind == TEENY__NODE_OP && j < g->nodes[k].shapes.n_param; j++)
            if (teeny__graph_slot_owned(g, k, 0, j) && g->nodes[k].param[j] == param) {
                snprintf(name, cap, "optimizer.%s.%s.%s", g->nodes[k].name, g->nodes[k].shapes.param_name[j], kind);
                return TEENY_OK;
            }
    char b[96];
    return teeny__error(g->ctx, TEENY_ERR_ARG,
                        "%s: the optimizer's parameter %d (%s) is not a parameter of this graph (build the "
                        "optimizer over teeny_graph_param's tensors of the graph saved or loaded)",
                        fn, index, teeny__shape_str(param, b, sizeof b));
}

/* Every parameter of opt is one of g's (its state has a name), checked
 * before anything is read or written. */
static teeny_status check_opt_params(const teeny_graph *g, const teeny_optimizer *opt, const char *fn)
{
    char name[NAME_CAP];
    teeny_tensor *t;
    teeny_status st = TEENY_OK;
    for (int i = 0; opt && i < teeny_optimizer_state_count(opt) && st == TEENY_OK; i++)
        st = opt_state_name(g, opt, i, fn, name, sizeof name, &t);
    return st;
}

teeny_status teeny_graph_save(teeny_graph *g, const teeny_optimizer *opt, const char *path, int n_meta,
                              const char *const *keys, const char *const *values)
{
    teeny_st_writer *w = NULL;
    teeny_status st;
    char name[NAME_CAP];
    if (!g || !path || n_meta < 0 || (n_meta && (!keys || !values)))
        return teeny__error(g ? g->ctx : NULL, TEENY_ERR_ARG, "teeny_graph_save: %s",
                            !g ? "graph is NULL" : !path ? "path is NULL" : "bad metadata arrays");
    teeny__clear_error(g->ctx);
    if ((st = check_opt_params(g, opt, "teeny_graph_save")) != TEENY_OK)
        return st;
    if ((st = teeny_st_writer_create(&w)) != TEENY_OK)
        return teeny__error(g->ctx, st, "teeny_graph_save: %s", teeny_last_error(NULL));
    int64_t opt_steps = opt ? teeny_optimizer_steps(opt) : 0;
    for (int i = 0; i < g->n_nodes && st == TEENY_OK; i++) {
        const teeny__gnode *nd = &g->nodes[i];
        if (nd->kind != TEENY__NODE_OP)
            continue;
        for (int j = 0; j < nd->shapes.n_param && st == TEENY_OK; j++)
            if (teeny__graph_slot_owned(g, i, 0, j)) /* a tied slot is saved once, under its owner's name */
                st = teeny_st_add_tensor(w, teeny__graph_slot_name(g, i, 0, j, name, sizeof name), nd->param[j]);
        for (int j = 0; j < nd->shapes.n_state && st == TEENY_OK; j++) {
            st = teeny_st_add_tensor(w, teeny__graph_slot_name(g, i, 1, j, name, sizeof name), nd->state[j]);
        }
        if (st == TEENY_OK && nd->shapes.counts_batches) {
            bn_count_name(g, i, name, sizeof name);
            st = teeny_st_add_i64(w, name, 0, NULL, &nd->batches_tracked);
        }
    }
    for (int i = 0; opt && i < teeny_optimizer_state_count(opt) && st == TEENY_OK; i++) {
        teeny_tensor *t;
        if ((st = opt_state_name(g, opt, i, "teeny_graph_save", name, sizeof name, &t)) == TEENY_OK)
            st = teeny_st_add_tensor(w, name, t);
    }
    if (opt && st == TEENY_OK)
        st = teeny_st_add_i64(w, "optimizer.step", 0, NULL, &opt_steps);
    for (int i = 0; i < n_meta && st == TEENY_OK; i++)
        st = teeny_st_add_metadata(w, keys[i], values[i]);
    if (st == TEENY_OK)
        st = teeny_st_write(w, path);
    if (st != TEENY_OK) {
        char msg[1024];
        const char *why = teeny_last_error(g->ctx)[0] ? teeny_last_error(g->ctx) : teeny_last_error(NULL);
        teeny__strlcpy(msg, why, sizeof msg);
        st = teeny__error(g->ctx, st, "teeny_graph_save %s: %s", path, msg);
    }
    teeny_st_writer_destroy(w);
    return st;
}

/* Check that the file holds name as dtype with exactly the tensor's shape. */
static teeny_status expect(teeny_graph *g, const teeny_st_file *f, const char *path, const char *name, int want_i64,
                           const teeny_tensor *t)
{
    int is_i64, ndim;
    int64_t shape[TEENY_ST_MAX_DIMS];
    if (teeny_st_info(f, name, &is_i64, &ndim, shape) != TEENY_OK)
        return teeny__error(g->ctx, TEENY_ERR_FORMAT, "checkpoint %s: tensor %s is missing", path, name);
    if (is_i64 != want_i64)
        return teeny__error(g->ctx, TEENY_ERR_FORMAT, "checkpoint %s: tensor %s is %s, expected %s", path, name,
                            is_i64 ? "I64" : "F32", want_i64 ? "I64" : "F32");
    if (!t) /* an I64 scalar: 0-d or one element */
        return ndim == 0 || (ndim == 1 && shape[0] == 1)
                   ? TEENY_OK
                   : teeny__error(g->ctx, TEENY_ERR_SHAPE, "checkpoint %s: %s is not a scalar", path, name);
    int same = ndim == t->ndim;
    for (int i = 0; same && i < ndim; i++)
        same = shape[i] == t->shape[i];
    if (!same) {
        char want[96];
        return teeny__error(g->ctx, TEENY_ERR_SHAPE, "checkpoint %s: tensor %s has rank %d shape [%lld, ...]; the graph has %s",
                            path, name, ndim, ndim ? (long long)shape[0] : 0LL, teeny__shape_str(t, want, sizeof want));
    }
    return TEENY_OK;
}

/* expect() for optimizer state i under its name; a file that keys the
 * state by position ("optimizer.exp_avg.<i>", from an earlier version) is
 * refused with the reason: position cannot tell equal-shaped parameters
 * apart. */
static teeny_status expect_opt_state(teeny_graph *g, const teeny_st_file *f, const char *path,
                                     const teeny_optimizer *opt, int i, const char *name, const teeny_tensor *t)
{
    const char *old;
    char old_name[NAME_CAP];
    int is_i64, ndim;
    int64_t shape[TEENY_ST_MAX_DIMS];
    if (teeny_st_info(f, name, &is_i64, &ndim, shape) != TEENY_OK &&
        teeny_optimizer_state(opt, i, &old, NULL) == TEENY_OK) {
        snprintf(old_name, sizeof old_name, "optimizer.%s", old);
        if (teeny_st_info(f, old_name, &is_i64, &ndim, shape) == TEENY_OK)
            return teeny__error(g->ctx, TEENY_ERR_FORMAT,
                                "checkpoint %s keys the optimizer state by position (%s, an earlier version's "
                                "layout), which cannot pair moments with equal-shaped parameters safely; this "
                                "version reads %s. Load it without the optimizer (opt NULL) to restore the "
                                "parameters", path, old_name, name);
    }
    return expect(g, f, path, name, 0, t);
}

/* Read an I64 counter that must be >= 0 (validation pass). */
static teeny_status read_count(teeny_graph *g, const teeny_st_file *f, const char *path, const char *name,
                               int64_t *v)
{
    teeny_status st = expect(g, f, path, name, 1, NULL);
    if (st == TEENY_OK && (st = teeny_st_read_i64(f, name, v, 1)) != TEENY_OK)
        return teeny__error(g->ctx, st, "checkpoint %s: %s: %s", path, name, teeny_last_error(NULL));
    if (st == TEENY_OK && *v < 0)
        return teeny__error(g->ctx, TEENY_ERR_RANGE, "checkpoint %s: %s is %lld; a count must be >= 0", path, name,
                            (long long)*v);
    return st;
}

teeny_status teeny_graph_load(teeny_graph *g, teeny_optimizer *opt, const char *path)
{
    teeny_st_file *f = NULL;
    teeny_status st;
    char name[NAME_CAP];
    int64_t opt_steps = 0, *counts = NULL;
    if (!g || !path)
        return teeny__error(g ? g->ctx : NULL, TEENY_ERR_ARG, "teeny_graph_load: %s is NULL", !g ? "graph" : "path");
    teeny__clear_error(g->ctx);
    if ((st = check_opt_params(g, opt, "teeny_graph_load")) != TEENY_OK)
        return st;
    if ((st = teeny_st_open(path, &f)) != TEENY_OK)
        return teeny__error(g->ctx, st, "teeny_graph_load: %s", teeny_last_error(NULL));
    counts = teeny__calloc((size_t)g->n_nodes + 1, sizeof *counts);
    if (!counts) {
        teeny_st_close(f);
        return teeny__error(g->ctx, TEENY_ERR_NOMEM, "teeny_graph_load: out of host memory");
    }
    /* pass 0 validates every value (tensors' presence, dtype and shape; the
     * counters are read here and range-checked); pass 1 writes the tensors */
    for (int pass = 0; pass < 2 && st == TEENY_OK; pass++) {
        for (int i = 0; i < g->n_nodes && st == TEENY_OK; i++) {
            const teeny__gnode *nd = &g->nodes[i];
            if (nd->kind != TEENY__NODE_OP)
                continue;
            for (int j = 0; j < nd->shapes.n_param && st == TEENY_OK; j++) {
                if (!teeny__graph_slot_owned(g, i, 0, j))
                    continue; /* read once, through its owner */
                const char *full = teeny__graph_slot_name(g, i, 0, j, name, sizeof name);
                st = pass ? teeny_st_read_f32(f, full, nd->param[j]) : expect(g, f, path, full, 0, nd->param[j]);
            }
            for (int j = 0; j < nd->shapes.n_state && st == TEENY_OK; j++) {
                const char *full = teeny__graph_slot_name(g, i, 1, j, name, sizeof name);
                st = pass ? teeny_st_read_f32(f, full, nd->state[j]) : expect(g, f, path, full, 0, nd->state[j]);
            }
            if (st == TEENY_OK && nd->shapes.counts_batches && !pass) {
                bn_count_name(g, i, name, sizeof name);
                st = read_count(g, f, path, name, &counts[i]);
            }
        }
        for (int i = 0; opt && i < teeny_optimizer_state_count(opt) && st == TEENY_OK; i++) {
            teeny_tensor *t;
            if ((st = opt_state_name(g, opt, i, "teeny_graph_load", name, sizeof name, &t)) != TEENY_OK)
                break;
            st = pass ? teeny_st_read_f32(f, name, t) : expect_opt_state(g, f, path, opt, i, name, t);
        }
        if (opt && st == TEENY_OK && !pass)
            st = read_count(g, f, path, "optimizer.step", &opt_steps);
    }
    if (st == TEENY_OK) {
        /* validated above, so these cannot fail */
        int64_t most = -1;
        for (int i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].kind == TEENY__NODE_OP && g->nodes[i].shapes.counts_batches) {
                g->nodes[i].batches_tracked = counts[i];
                most = counts[i] > most ? counts[i] : most;
            }
        if (most >= 0)
            g->train_steps = most;
        if (opt)
            st = teeny_optimizer_set_steps(opt, opt_steps);
    }
    teeny__free(counts);
    teeny_st_close(f);
    return st;
}

teeny_status teeny_checkpoint_metadata(const char *path, const char *key, char *value, size_t cap)
{
    teeny_st_file *f = NULL;
    teeny_status st;
    if (!path || !key || !value || !cap)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_checkpoint_metadata: NULL argument or zero capacity");
    if ((st = teeny_st_open(path, &f)) != TEENY_OK)
        return st;
    const char *v = teeny_st_metadata(f, key);
    if (!v)
        st = teeny__error(NULL, TEENY_ERR_FORMAT, "checkpoint %s has no metadata %s", path, key);
    else if (strlen(v) >= cap)
        st = teeny__error(NULL, TEENY_ERR_RANGE, "checkpoint %s: metadata %s is longer than %zu", path, key, cap - 1);
    else
        teeny__strlcpy(value, v, cap);
    teeny_st_close(f);
    return st;
}
