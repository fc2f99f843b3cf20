/*
 * scatter.c -- ONNX ScatterND (opset 11; 16: reduction none, add, mul;
 * 18: max, min) with indices known at import. indices [..., k] pick
 * slices of data [d0, ..., d(r-1)] of size d(k) * ... * d(r-1); updates
 * are [indices.shape[:-1], d(k), ...]. Updates apply in index order, so a
 * repeated index with reduction none keeps its last update (ONNX leaves
 * that case undefined; onnxruntime does the same).
 *
 * All constant (Swin builds its shifted-window mask so): folded. Data or
 * updates computed at run time: reduction none is one Gather (constant
 * int32 indices) from Concat(data, updates), both flattened, each output
 * element reading its data element or its last update; add and mul are,
 * per layer of repeated indices, a Gather from Concat(updates, 0 or 1)
 * added to or multiplied into data. max and min at run time are refused.
 */
#include <math.h>
#include <string.h>

#include "onnx_internal.h"

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

typedef struct {
    int red;
    const ox_const *ind;
    ox_shape ds, us;
    int k;                         /* indices' last dimension */
    int64_t slice, n_updates;      /* elements per update; updates */
} scatter;

/* The attribute, the indices and the shapes' agreement. */
static teeny_status scatter_setup(ox_import *im, const ox_shape *ds, const ox_shape *us, scatter *sc)
{
    static const char *const attrs[] = {"reduction", NULL}, *const no_attrs[] = {NULL};
    char red[8];
    teeny_status st = teeny__ox_attrs_allowed(im, im->opset >= 16 ? attrs : no_attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_string(im, "reduction", "none", red, sizeof red)) != TEENY_OK ||
        (st = teeny__ox_in_const(im, 1, "indices", 0, &sc->ind)) != TEENY_OK)
        return st;
    sc->red = !strcmp(red, "none") ? RED_NONE : !strcmp(red, "add") ? RED_ADD : !strcmp(red, "mul") ? RED_MUL
              : im->opset >= 18 && !strcmp(red, "max") ? RED_MAX : im->opset >= 18 && !strcmp(red, "min") ? RED_MIN : -1;
    if (sc->red < 0)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute reduction \"%s\"", red);
    const ox_shape *is = &sc->ind->shape;
    sc->ds = *ds;
    sc->us = *us;
    sc->k = is->ndim ? (int)is->d[is->ndim - 1] : -1;
    if (sc->ind->type != OX_I64)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "indices must be an integer tensor");
    if (is->ndim < 1 || sc->k < 1 || sc->k > ds->ndim || us->ndim != is->ndim - 1 + ds->ndim - sc->k)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "indices of rank %d, last dimension %d, and updates of rank %d do "
                              "not fit data of rank %d", is->ndim, sc->k, us->ndim, ds->ndim);
    for (int d = 0; d < us->ndim; d++) {
        int64_t want = d < is->ndim - 1 ? is->d[d] : ds->d[d - (is->ndim - 1) + sc->k];
        if (us->d[d] != want)
            return teeny__ox_fail(im, TEENY_ERR_SHAPE, "updates dimension %d is %lld, not %lld", d,
                                  (long long)us->d[d], (long long)want);
    }
    sc->slice = 1;
    for (int d = sc->k; d < ds->ndim; d++)
        sc->slice *= ds->d[d];
    sc->n_updates = sc->ind->numel / sc->k;
    return TEENY_OK;
}

/* The first element update u writes, as a flat index into data. */
static teeny_status target(ox_import *im, const scatter *sc, int64_t u, int64_t *at)
{
    *at = 0;
    for (int d = 0; d < sc->k; d++) {
        int64_t i = ((const int64_t *)sc->ind->data)[u * sc->k + d], n = sc->ds.d[d];
        if (i < -n || i >= n)
            return teeny__ox_fail(im, TEENY_ERR_RANGE, "index %lld out of range for dimension %d of size %lld",
                                  (long long)i, d, (long long)n);
        *at = *at * n + (i < 0 ? i + n : i);
    }
    *at *= sc->slice;
    return TEENY_OK;
}

static teeny_status scatter_fold(ox_import *im, const ox_const *data, const ox_const *upd, const scatter *sc)
{
    ox_const c;
    if (upd->type != data->type)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "updates must be of data's type");
    teeny_status st = teeny__ox_const_alloc(im, data->type, data->onnx_type, &sc->ds, &c);
    if (st != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    if (c.numel)
        memcpy(c.data, data->data, (size_t)c.numel * teeny__ox_esize(c.type));
    for (int64_t u = 0, at; u < sc->n_updates; u++) {
        if ((st = target(im, sc, u, &at)) != TEENY_OK) {
            teeny__ox_const_free(&c);
            return st;
        }
        for (int64_t e = 0; e < sc->slice; e++) {
            int64_t from = u * sc->slice + e;
            int r = sc->red;
            if (c.type == OX_F32) {
                float *y = (float *)c.data + at + e, v = ((const float *)upd->data)[from];
                *y = r == RED_NONE ? v : r == RED_ADD ? *y + v : r == RED_MUL ? *y * v : r == RED_MAX ? fmaxf(*y, v)
                                                                                                      : fminf(*y, v);
            } else { /* integers wrap like two's complement */
                int64_t *y = (int64_t *)c.data + at + e, v = ((const int64_t *)upd->data)[from];
                *y = r == RED_NONE ? v : r == RED_ADD ? (int64_t)((uint64_t)*y + (uint64_t)v)
                     : r == RED_MUL ? (int64_t)((uint64_t)*y * (uint64_t)v) : r == RED_MAX ? (*y > v ? *y : v)
                                                                                            : (*y < v ? *y : v);
            }
        }
    }
    return teeny__ox_out_const(im, 0, &c);
}

/* y = Gather(Concat(a, b) flattened, idx) in data's shape. */
static teeny_status gather_of(ox_import *im, teeny_node a, const ox_shape *as, teeny_node b, const ox_shape *bs,
                              const scatter *sc, const int32_t *idx, teeny_node *y)
{
    ox_shape af = {1, {teeny__ox_numel(as)}}, bf = {1, {teeny__ox_numel(bs)}};
    teeny_node xs[2];
    char buf[TEENY__NAME_CAP];
    teeny_status st;
    if ((st = teeny__ox_view_node(im, a, as, &af, &xs[0])) != TEENY_OK ||
        (st = teeny__ox_view_node(im, b, bs, &bf, &xs[1])) != TEENY_OK)
        return st;
    if ((st = teeny_graph_concat_axis(im->g, teeny__ox_name(im, "cat", buf, sizeof buf), 0, 2, xs, y)) != TEENY_OK ||
        (st = teeny_graph_gather(im->g, teeny__ox_name(im, "gather", buf, sizeof buf), *y, 0, sc->ds.ndim, sc->ds.d, idx,
                                 y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    return TEENY_OK;
}

static teeny_status scatter_runtime(ox_import *im, const scatter *sc)
{
    teeny_node x, u, y;
    ox_shape xs, us;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_operand(im, 0, "data", &x, &xs);
    if (st != TEENY_OK || (st = teeny__ox_operand(im, 2, "updates", &u, &us)) != TEENY_OK)
        return st;
    if (sc->red == RED_MAX || sc->red == RED_MIN)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "reduction max or min with data or updates computed at run "
                              "time (supported: none, add, mul; max and min when all inputs are constants)");
    int64_t n = teeny__ox_numel(&sc->ds), n_up = teeny__ox_numel(&sc->us);
    if (n < 1 || n + n_up + 1 > INT32_MAX)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "data of %lld elements and %lld updates", (long long)n,
                              (long long)n_up);
    int32_t *idx = teeny__malloc((size_t)n * sizeof *idx), *seen = teeny__calloc((size_t)n, sizeof *seen);
    if (!idx || !seen) {
        teeny__free(idx);
        teeny__free(seen);
        return teeny__ox_fail(im, TEENY_ERR_NOMEM, "out of host memory");
    }
    int layers = 0;
    y = x;
    for (int layer = 0; st == TEENY_OK && (layer == 0 || layer < layers); layer++) {
        /* reduction none: data element j, or N + its last update; add and
         * mul: the layer-th update of j, or the identity element after them */
        for (int64_t j = 0; j < n; j++) {
            idx[j] = (int32_t)(sc->red == RED_NONE ? j : n_up);
            seen[j] = 0;
        }
        for (int64_t v = 0, at; v < sc->n_updates && st == TEENY_OK; v++) {
            if ((st = target(im, sc, v, &at)) != TEENY_OK)
                break;
            for (int64_t e = 0; e < sc->slice; e++) {
                int32_t from = (int32_t)(v * sc->slice + e);
                if (sc->red == RED_NONE)
                    idx[at + e] = (int32_t)n + from;
                else if (seen[at + e]++ == layer)
                    idx[at + e] = from;
                if (seen[at + e] > layers)
                    layers = seen[at + e];
            }
        }
        if (st != TEENY_OK)
            break;
        if (sc->red == RED_NONE) {
            st = gather_of(im, x, &xs, u, &us, sc, idx, &y);
            break;
        }
        if (layers == 0) /* no updates: data as it is */
            break;
        teeny_node ident, g;
        float one = sc->red == RED_MUL ? 1.0f : 0.0f;
        if ((st = teeny_graph_constant(im->g, teeny__ox_name(im, "identity", buf, sizeof buf), 1, (int64_t[]){1}, &one,
                                       &ident)) != TEENY_OK) {
            st = teeny__ox_graph_fail(im, st);
            break;
        }
        if ((st = gather_of(im, u, &us, ident, &(ox_shape){1, {1}}, sc, idx, &g)) != TEENY_OK)
            break;
        if ((st = teeny_graph_binary(im->g, teeny__ox_name(im, NULL, buf, sizeof buf),
                                     sc->red == RED_ADD ? TEENY_BINARY_ADD : TEENY_BINARY_MUL, y, g, &y)) != TEENY_OK)
            st = teeny__ox_graph_fail(im, st);
    }
    teeny__free(idx);
    teeny__free(seen);
    return st != TEENY_OK ? st : teeny__ox_out_runtime(im, 0, y, &sc->ds);
}

teeny_status teeny__ox_op_scatter_nd(ox_import *im)
{
    int di, ui;
    scatter sc;
    teeny_status st = teeny__ox_outputs_at_most(im, 1);
    if (st != TEENY_OK || (st = teeny__ox_in_present(im, 0, "data", &di)) != TEENY_OK ||
        (st = teeny__ox_in_present(im, 2, "updates", &ui)) != TEENY_OK)
        return st;
    const ox_value *dv = &im->vals[di], *uv = &im->vals[ui];
    if (dv->kind == OX_CONST && uv->kind == OX_CONST) {
        if ((st = scatter_setup(im, &dv->c.shape, &uv->c.shape, &sc)) != TEENY_OK)
            return st;
        return scatter_fold(im, &dv->c, &uv->c, &sc);
    }
    ox_shape ds, us;
    teeny_node n;
    /* the shapes first: a graph input becomes its input node here */
    if ((st = teeny__ox_operand(im, 0, "data", &n, &ds)) != TEENY_OK ||
        (st = teeny__ox_operand(im, 2, "updates", &n, &us)) != TEENY_OK || (st = scatter_setup(im, &ds, &us, &sc)) != TEENY_OK)
        return st;
    return scatter_runtime(im, &sc);
}
