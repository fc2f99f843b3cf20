/*
 * checkpoint.c -- a graph's parameters, running statistics, batch-norm
 * num_batches_tracked and (optionally) optimizer state in one safetensors
 * file, under PyTorch state_dict names ("conv1.bn.running_var"), so the
 * same network defined in PyTorch loads it with load_state_dict(strict=True).
 * Optimizer state goes under "optimizer." with the step count as
 * "optimizer.step". Each batch norm's num_batches_tracked is its own
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
    if ((st = teeny_st_writer_create(&w)) != TEENY_OK)
        return teeny__error(g->ctx, st, "teeny_graph_save: %s", teeny_last_error(NULL));
    int64_t opt_steps = opt ? teeny_optimizer_steps(opt) : 0;
    for (int i = 0; i < g->n_nodes && st == TEENY_OK; i++) {
        const teeny__gnode *nd = &g->nodes[i];
        if (nd->kind != TEENY__NODE_OP)
            continue;
        for (int j = 0; j < nd->shapes.n_param && st == TEENY_OK; j++) {
            st = teeny_st_add_tensor(w, teeny__graph_slot_name(g, i, 0, j, name, sizeof name), nd->param[j]);
        }
        for (int j = 0; j < nd->shapes.n_state && st == TEENY_OK; j++) {
            st = teeny_st_add_tensor(w, teeny__graph_slot_name(g, i, 1, j, name, sizeof name), nd->state[j]);
        }
        if (st == TEENY_OK && nd->shapes.counts_batches) {
            bn_count_name(g, i, name, sizeof name);
            st = teeny_st_add_i64(w, name, 0, NULL, &nd->batches_tracked);
        }
    }
    for (int i = 0; opt && i < teeny_optimizer_state_count(opt) && st == TEENY_OK; i++) {
        const char *sn;
        teeny_tensor *t;
        if ((st = teeny_optimizer_state(opt, i, &sn, &t)) == TEENY_OK) {
            snprintf(name, sizeof name, "optimizer.%s", sn);
            st = teeny_st_add_tensor(w, name, t);
        }
    }
    if (opt && st == TEENY_OK)
        st = teeny_st_add_i64(w, "optimizer.step", 0, NULL, &opt_steps);
    for (int i = 0; i < n_meta && st == TEENY_OK; i++)
        st = teeny_st_add_metadata(w, keys[i], values[i]);
    if (st == TEENY_OK)
        st = teeny_st_write(w, path);
    if (st != TEENY_OK) {
        char msg[1024];
        teeny__strlcpy(msg, teeny_last_error(NULL)[0] ? teeny_last_error(NULL) : teeny_last_error(g->ctx), sizeof msg);
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
            const char *sn;
            teeny_tensor *t;
            if ((st = teeny_optimizer_state(opt, i, &sn, &t)) != TEENY_OK)
                break;
            snprintf(name, sizeof name, "optimizer.%s", sn);
            st = pass ? teeny_st_read_f32(f, name, t) : expect(g, f, path, name, 0, t);
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
