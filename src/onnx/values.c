/*
 * values.c -- the importer's bookkeeping: the table of ONNX values (name
 * -> constant, graph node or unused graph input, hashed), the node's
 * inputs and outputs as the op handlers see them, graph node names
 * (unique, short), views, and errors that name the node and its op.
 * Attributes are attrs.c; binding a weight to a parameter or state slot
 * is params.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "onnx_internal.h"

#define S(x) ((x) ? (x) : "")

teeny_status teeny__ox_fail(ox_import *im, teeny_status st, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!im->node)
        return teeny__error(im->ctx, st, "%s", msg);
    if (im->node->name && *im->node->name)
        return teeny__error(im->ctx, st, "node \"%.80s\" (%.40s): %s", im->node->name, S(im->node->op_type), msg);
    return teeny__error(im->ctx, st, "node #%d (%.40s): %s", im->node_index, S(im->node->op_type), msg);
}

teeny_status teeny__ox_graph_fail(ox_import *im, teeny_status st)
{
    return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
}

/* ---- the value table ---- */

static uint64_t name_hash(const char *s)
{
    return teeny__fnv1a64(TEENY__FNV_BASIS, s, strlen(s));
}

int teeny__ox_find(const ox_import *im, const char *name)
{
    if (!im->hash_cap || !name)
        return -1;
    for (size_t h = (size_t)name_hash(name) & (size_t)(im->hash_cap - 1);; h = (h + 1) & (size_t)(im->hash_cap - 1)) {
        int k = im->hash[h];
        if (!k)
            return -1;
        if (!strcmp(im->vals[k - 1].name, name))
            return k - 1;
    }
}

static int rehash(ox_import *im, int cap)
{
    int *h = teeny__calloc((size_t)cap, sizeof *h);
    if (!h)
        return 0;
    teeny__free(im->hash);
    im->hash = h;
    im->hash_cap = cap;
    for (int i = 0; i < im->n_vals; i++) {
        size_t k = (size_t)name_hash(im->vals[i].name) & (size_t)(cap - 1);
        while (h[k])
            k = (k + 1) & (size_t)(cap - 1);
        h[k] = i + 1;
    }
    return 1;
}

teeny_status teeny__ox_define(ox_import *im, const char *name, int kind, int *idx)
{
    if (!name || !*name)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "a value without a name");
    if (teeny__ox_find(im, name) >= 0)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "value \"%.80s\" is defined twice", name);
    if (!teeny__grow((void **)&im->vals, &im->cap_vals, im->n_vals, sizeof *im->vals) ||
        ((im->n_vals + 1) * 2 > im->hash_cap && !rehash(im, im->hash_cap ? im->hash_cap * 2 : 64)))
        return teeny__ox_fail(im, TEENY_ERR_NOMEM, "out of host memory");
    ox_value *v = &im->vals[im->n_vals];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->kind = kind;
    v->node = -1;
    v->sigmoid_of = -1;
    size_t h = (size_t)name_hash(name) & (size_t)(im->hash_cap - 1);
    while (im->hash[h])
        h = (h + 1) & (size_t)(im->hash_cap - 1);
    im->hash[h] = im->n_vals + 1;
    *idx = im->n_vals++;
    return TEENY_OK;
}

int teeny__ox_n_in(const ox_import *im)
{
    int n = (int)im->node->n_input;
    while (n > 0 && !*S(im->node->input[n - 1]))
        n--;
    return n;
}

teeny_status teeny__ox_in(ox_import *im, int i, int *idx)
{
    *idx = -1;
    if (i >= teeny__ox_n_in(im) || !*S(im->node->input[i]))
        return TEENY_OK;
    if ((*idx = teeny__ox_find(im, im->node->input[i])) < 0)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "input \"%.80s\" is not produced by an earlier node, an initializer or "
                       "a graph input", im->node->input[i]);
    return TEENY_OK;
}

teeny_status teeny__ox_in_present(ox_import *im, int i, const char *what, int *idx)
{
    teeny_status st = teeny__ox_in(im, i, idx);
    if (st == TEENY_OK && *idx < 0)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "input %d (%s) is missing", i, what);
    return st;
}

/* A graph input's declared element type (0: not declared). */
static int declared_type(const ox_value *v)
{
    return teeny__ox_declared_type(v);
}

int teeny__ox_declared_type(const ox_value *v)
{
    const Onnx__TypeProto *tp = v->vi ? v->vi->type : NULL;
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
        tp->tensor_type->has_elem_type)
        return tp->tensor_type->elem_type;
    return 0;
}

/* " (input: float [?, 3]; feed: int64 [2, 4])": what graph input v
 * declares ("?" a symbolic dimension) and what its feed gives, for the
 * messages about a feed that does not fit. */
static const char *input_and_feed(const ox_value *v, char *buf, size_t cap)
{
    const Onnx__TypeProto *tp = v->vi ? v->vi->type : NULL;
    const Onnx__TensorShapeProto *sp =
        tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type ? tp->tensor_type->shape : NULL;
    int elem = declared_type(v);
    size_t at = (size_t)snprintf(buf, cap, " (input: %s ", elem ? teeny__ox_type_name(elem) : "of undeclared type");
    if (!sp && at < cap)
        at += (size_t)snprintf(buf + at, cap - at, "%sundeclared shape", elem ? "of " : "and ");
    for (size_t i = 0; sp && i <= sp->n_dim && at < cap; i++) {
        const char *sep = i ? ", " : "[";
        if (i == sp->n_dim)
            at += (size_t)snprintf(buf + at, cap - at, "%s]", i ? "" : "[");
        else if (sp->dim[i]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            at += (size_t)snprintf(buf + at, cap - at, "%s%lld", sep, (long long)sp->dim[i]->dim_value);
        else
            at += (size_t)snprintf(buf + at, cap - at, "%s?", sep);
    }
    if (v->feed && at < cap) {
        at += (size_t)snprintf(buf + at, cap - at, "; feed: %s [", teeny__ox_type_name((int)v->feed->dtype));
        for (int i = 0; i < v->feed->ndim && at < cap; i++)
            at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "", (long long)v->feed->shape[i]);
        if (at < cap)
            at += (size_t)snprintf(buf + at, cap - at, "]");
    }
    if (at < cap)
        snprintf(buf + at, cap - at, ")");
    return buf;
}

teeny_status teeny__ox_in_const(ox_import *im, int i, const char *what, int weight, const ox_const **c)
{
    int idx;
    teeny_status st = teeny__ox_in_present(im, i, what, &idx);
    *c = NULL;
    if (st != TEENY_OK)
        return st;
    ox_value *v = &im->vals[idx];
    int elem = v->kind == OX_INPUT ? declared_type(v) : 0;
    if (v->kind == OX_INPUT && elem && !teeny__ox_type_supported(elem))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "graph input \"%.80s\" is %s", v->name, teeny__ox_type_name(elem));
    /* a feed binds weights and integer operands; float data stays a run-time value */
    int float_in = elem ? teeny__ox_is_float(elem) : v->feed && teeny__ox_is_float((int)v->feed->dtype);
    if (v->kind == OX_INPUT && !v->c.data && v->feed && (weight || !float_in)) {
        char both[200];
        if (elem && teeny__ox_is_float(elem) != teeny__ox_is_float((int)v->feed->dtype))
            return teeny__ox_fail(im, TEENY_ERR_ARG, "the feed of graph input \"%.80s\" is %s, the input %s%s", v->name,
                           teeny__ox_type_name((int)v->feed->dtype), teeny__ox_type_name(elem),
                           input_and_feed(v, both, sizeof both));
        if ((st = teeny__ox_feed_load(im->ctx, v->feed, &v->c)) != TEENY_OK)
            return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
        teeny__ox_const_held(im, &v->c);
        v->kind = OX_CONST;
    }
    if (v->kind == OX_CONST) {
        *c = &v->c;
        return TEENY_OK;
    }
    if (v->kind == OX_INPUT && (weight || !float_in))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "input %d (%s) is graph input \"%.80s\", which must be a constant "
                       "here: make it an initializer or give it a value at import (a feed)", i, what, v->name);
    return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "input %d (%s) \"%.80s\" is computed at run time; only a constant is "
                   "supported here", i, what, v->name);
}

/* Shapes of constants: an int64 1-D constant as a list of values. */
teeny_status teeny__ox_const_ints(ox_import *im, const ox_const *c, const char *what, int max, int64_t *out, int *n)
{
    if (c->type != OX_I64 || c->shape.ndim > 1 || c->numel > max)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "%s must be a 1-D integer tensor of at most %d values", what, max);
    for (int64_t i = 0; i < c->numel; i++)
        out[i] = ((const int64_t *)c->data)[i];
    *n = (int)c->numel;
    return TEENY_OK;
}

teeny_status teeny__ox_const_shape(ox_import *im, const ox_const *c, const char *what, int64_t *out, int *n)
{
    teeny_status st;
    if (c->type == OX_I64 && c->shape.ndim <= 1 && (st = teeny__ox_rank_ok(im, "the result", c->numel)) != TEENY_OK)
        return st;
    return teeny__ox_const_ints(im, c, what, OX_MAX_DIMS, out, n);
}

teeny_status teeny__ox_rank_ok(ox_import *im, const char *what, int64_t rank)
{
    if (rank <= OX_MAX_DIMS)
        return TEENY_OK;
    return teeny__ox_fail(im, TEENY_ERR_SHAPE, "%s would have rank %lld (at most %d)", what, (long long)rank,
                          OX_MAX_DIMS);
}

static int name_taken(const ox_import *im, const char *name)
{
    return teeny__graph_find(im->g, name) >= 0;
}

/* stem when no node has that name, else stem_k: k found by doubling, then
 * bisecting between a taken and a free suffix, in O(log k) lookups (a
 * scan from k = 1 made n nodes of one name cost O(n^2)). Where stem_1,
 * stem_2, ... were taken in order, as this file takes them, that is the
 * first free k. */
static const char *unique_name(const ox_import *im, const char *stem, char *buf, size_t cap)
{
    long lo = 0, hi = 1; /* stem_lo taken (stem itself as 0), stem_hi unknown, then free */
    snprintf(buf, cap, "%s", stem);
    if (!name_taken(im, buf))
        return buf;
    for (;; lo = hi, hi *= 2) {
        snprintf(buf, cap, "%s_%ld", stem, hi);
        if (!name_taken(im, buf) || hi > INT32_MAX)
            break;
    }
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        snprintf(buf, cap, "%s_%ld", stem, mid);
        *(name_taken(im, buf) ? &lo : &hi) = mid;
    }
    snprintf(buf, cap, "%s_%ld", stem, hi);
    return buf;
}

/* The graph input behind value idx: an input node of its declared shape
 * (merged with its feed's), the batch as dimension 0. */
/* A graph input of rank 6..8 is a wide value (transpose.c): its node is
 * [d0, .., d3, d4 * ... * d(n-1)]. */
static teeny_status merge_trailing(ox_import *im, const ox_value *v, int *ndim, int64_t *d)
{
    int onnx_ndim = *ndim;
    for (; *ndim > TEENY_MAX_DIMS; (*ndim)--) {
        if (d[*ndim - 2] > INT32_MAX / d[*ndim - 1])
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "graph input \"%.80s\": its last %d dimensions hold past "
                                  "%d elements", v->name, onnx_ndim - TEENY_MAX_DIMS + 1, INT32_MAX);
        d[*ndim - 2] *= d[*ndim - 1];
    }
    return TEENY_OK;
}

/* A graph input's feed against its declared rank and dimensions (ndim
 * -1: none declared; d[i] < 0 symbolic), then its shape and, where none
 * is declared, its type in their place. */
static teeny_status take_feed(ox_import *im, const ox_value *v, int has_shape, int *ndim, int64_t *d, int *elem)
{
    char both[200];
    if (*ndim >= 0 && v->feed->ndim != *ndim)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "graph input \"%.80s\" has rank %d, its feed %d%s", v->name, *ndim,
                              v->feed->ndim, input_and_feed(v, both, sizeof both));
    for (int i = 0; i < v->feed->ndim; i++)
        if (has_shape && d[i] >= 0 && d[i] != v->feed->shape[i])
            return teeny__ox_fail(im, TEENY_ERR_SHAPE, "graph input \"%.80s\": dimension %d is %lld, its feed's %lld%s",
                                  v->name, i, (long long)d[i], (long long)v->feed->shape[i],
                                  input_and_feed(v, both, sizeof both));
    *ndim = v->feed->ndim;
    for (int i = 0; i < *ndim; i++)
        d[i] = v->feed->shape[i];
    if (!*elem)
        *elem = (int)v->feed->dtype;
    return TEENY_OK;
}

static teeny_status make_input(ox_import *im, int idx, int labels)
{
    ox_value *v = &im->vals[idx];
    teeny_status st;
    const Onnx__TypeProto *tp = v->vi ? v->vi->type : NULL;
    const Onnx__TensorShapeProto *sp = NULL;
    int elem = 0, ndim = -1;
    int64_t d[OX_MAX_DIMS];
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type) {
        elem = tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
        sp = tp->tensor_type->shape;
    } else if (tp && tp->value_case != ONNX__TYPE_PROTO__VALUE__NOT_SET) {
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "graph input \"%.80s\" is not a tensor", v->name);
    }
    if (sp) {
        if (sp->n_dim > OX_MAX_DIMS)
            return teeny__ox_fail(im, TEENY_ERR_SHAPE, "graph input \"%.80s\" has rank %zu (at most %d)", v->name,
                                  sp->n_dim, OX_MAX_DIMS);
        ndim = (int)sp->n_dim;
        for (int i = 0; i < ndim; i++)
            d[i] = sp->dim[i]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                       ? sp->dim[i]->dim_value : -1;
    }
    char both[200];
    if (v->feed && (st = take_feed(im, v, sp != NULL, &ndim, d, &elem)) != TEENY_OK)
        return st;
    if (ndim < 0)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "graph input \"%.80s\" has no shape (give a feed)", v->name);
    int want_f32 = !labels;
    if (want_f32 ? !teeny__ox_is_float(elem)
                 : elem != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && elem != ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "graph input \"%.80s\" is %s; a run-time input here must be %s%s",
                       v->name, teeny__ox_type_name(elem), labels ? "int64 or int32 class labels" : "float or float16",
                       input_and_feed(v, both, sizeof both));
    if (v->feed && teeny__ox_is_float(elem) != teeny__ox_is_float((int)v->feed->dtype))
        return teeny__ox_fail(im, TEENY_ERR_ARG, "the feed of graph input \"%.80s\" is %s, the input %s%s", v->name,
                              teeny__ox_type_name((int)v->feed->dtype), teeny__ox_type_name(elem),
                              input_and_feed(v, both, sizeof both));
    if (ndim < 0 || ndim > (labels ? TEENY_MAX_DIMS : OX_MAX_DIMS) || (labels && ndim < 1))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "graph input \"%.80s\" has rank %d (a run-time input has rank "
                       "%s)", v->name, ndim, labels ? "1..5" : "0..8");
    int scalar = ndim == 0; /* a [1] input of fixed shape */
    if (scalar) {
        ndim = 1;
        d[0] = 1;
    }
    /* the caller's batch, or another input's: inputs share one; with the
     * batch picked from the first input, one of another first dimension is
     * an input of fixed shape */
    int fixed = scalar || (d[0] >= 0 && d[0] != im->batch);
    if (fixed && !scalar && (im->p->batch > 0 || labels))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "graph input \"%.80s\": its first dimension is %lld, the batch %lld%s",
                       v->name, (long long)d[0], (long long)im->batch, input_and_feed(v, both, sizeof both));
    int64_t first = d[0];
    d[0] = fixed ? first : -1;
    for (int i = fixed ? 0 : 1; i < ndim; i++)
        if (d[i] < 1 || d[i] > INT32_MAX)
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "graph input \"%.80s\": dimension %d is %s (give a feed)",
                           v->name, i, d[i] < 0 ? "symbolic" : "out of range");
    int onnx_ndim = ndim;
    int64_t onnx_d[OX_MAX_DIMS];
    memcpy(onnx_d, d, sizeof onnx_d);
    if ((st = merge_trailing(im, v, &ndim, d)) != TEENY_OK)
        return st;
    char buf[TEENY__NAME_CAP];
    teeny_node n;
    unique_name(im, strlen(v->name) < 48 ? v->name : "input", buf, sizeof buf);
    st = labels || fixed ? teeny__graph_input_as(im->g, buf, ndim, d, labels, fixed, &n)
                         : teeny_graph_input(im->g, buf, ndim, d, &n);
    if (st != TEENY_OK)
        return teeny__ox_fail(im, st, "graph input \"%.80s\": %s", v->name, teeny_last_error(im->ctx));
    teeny_onnx_model *m = im->m;
    if (!teeny__grow((void **)&m->inputs, &m->cap_inputs, m->n_inputs, sizeof *m->inputs) ||
        !(m->inputs[m->n_inputs].name = teeny__strdup(v->name)))
        return teeny__ox_fail(im, TEENY_ERR_NOMEM, "out of host memory");
    m->inputs[m->n_inputs].node = n;
    m->inputs[m->n_inputs].declared = declared_type(v);
    m->inputs[m->n_inputs++].dtype = labels ? TEENY_ONNX_INT32 : TEENY_ONNX_FLOAT;
    v->kind = OX_RUNTIME;
    v->node = n;
    v->is_i32 = labels;
    v->shape.ndim = scalar ? 0 : onnx_ndim;
    v->shape.d[0] = fixed ? first : im->batch;
    for (int i = 1; i < onnx_ndim; i++)
        v->shape.d[i] = onnx_d[i];
    return TEENY_OK;
}

/* A deferred Sigmoid value (OX_SIGMOID: Mul(x, Sigmoid(x)) would make it
 * SiLU) taken any other way: a sigmoid node after all. */
static teeny_status sigmoid_node(ox_import *im, int idx)
{
    ox_value *v = &im->vals[idx];
    const ox_value *x = &im->vals[v->sigmoid_of];
    teeny_node y;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny_graph_activation(im->g, teeny__ox_name_prefer(im, v->name, buf, sizeof buf), x->node,
                                             TEENY_ACT_SIGMOID, &y);
    if (st != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    v->shape = x->shape;
    v->kind = OX_RUNTIME;
    v->node = y;
    return TEENY_OK;
}

static teeny_status in_runtime(ox_import *im, int i, const char *what, int labels, int *idx)
{
    teeny_status st = teeny__ox_in_present(im, i, what, idx);
    if (st != TEENY_OK)
        return st;
    ox_value *v = &im->vals[*idx];
    if (v->kind == OX_INPUT)
        return make_input(im, *idx, labels);
    if (v->kind == OX_SIGMOID && (st = sigmoid_node(im, *idx)) != TEENY_OK)
        return st;
    if (v->kind == OX_CONST)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "input %d (%s) \"%.80s\" is a constant; only a value computed at "
                       "run time is supported here", i, what, v->name);
    if (teeny__ox_is_wide(v))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "input %d (%s) \"%.80s\" has rank %d: values of rank %d..%d "
                              "are supported through Reshape and Transpose only", i, what, v->name, v->shape.ndim,
                              TEENY_MAX_DIMS + 1, OX_MAX_DIMS);
    if (v->is_loss || v->is_i32 != labels)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "input %d (%s) \"%.80s\" is %s", i, what, v->name,
                       v->is_loss ? "a loss" : labels ? "not class labels" : "an integer tensor");
    return TEENY_OK;
}

teeny_status teeny__ox_in_runtime(ox_import *im, int i, const char *what, int *idx)
{
    return in_runtime(im, i, what, 0, idx);
}

teeny_status teeny__ox_in_labels(ox_import *im, int i, const char *what, int *idx)
{
    return in_runtime(im, i, what, 1, idx);
}

static teeny_status out_value(ox_import *im, int i, int kind, int *idx)
{
    *idx = -1;
    if (i >= (int)im->node->n_output || !*S(im->node->output[i]))
        return TEENY_OK; /* an unused optional output */
    return teeny__ox_define(im, im->node->output[i], kind, idx);
}

teeny_status teeny__ox_out_const(ox_import *im, int i, ox_const *c)
{
    int idx;
    teeny_status st = out_value(im, i, OX_CONST, &idx);
    if (st != TEENY_OK || idx < 0) {
        teeny__ox_const_free(c);
        return st;
    }
    im->vals[idx].c = *c;
    memset(c, 0, sizeof *c);
    return TEENY_OK;
}

int teeny__ox_is_wide(const ox_value *v)
{
    return v->kind == OX_RUNTIME && v->shape.ndim > TEENY_MAX_DIMS;
}

teeny_status teeny__ox_node_shape(ox_import *im, teeny_node n, ox_shape *s)
{
    int64_t shape[TEENY_MAX_DIMS];
    teeny_status st = teeny_graph_node_info(im->g, n, NULL, &s->ndim, shape);
    if (st != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    for (int k = 0; k < s->ndim; k++) /* the graph is built at the import batch */
        s->d[k] = shape[k];
    return TEENY_OK;
}

teeny_status teeny__ox_out_runtime(ox_import *im, int i, teeny_node node, const ox_shape *shape)
{
    ox_shape g, s_copy = *shape, *s = &s_copy; /* shape may be a value's, which defining the output moves */
    int idx;
    teeny_status st = teeny__ox_node_shape(im, node, &g);
    if (st != TEENY_OK)
        return st;
    int scalar = s->ndim == 0 && g.ndim == 1 && g.d[0] == 1; /* an ONNX scalar is a [1] node */
    int wide = s->ndim > TEENY_MAX_DIMS && teeny__ox_numel(s) == teeny__ox_numel(&g); /* transpose.c */
    if (!scalar && !wide && (g.ndim != s->ndim || memcmp(g.d, s->d, sizeof(int64_t) * (size_t)s->ndim)))
        return teeny__ox_fail(im, TEENY_ERR_STATE, "internal: the graph's shape of the result disagrees with ONNX's");
    if ((st = out_value(im, i, OX_RUNTIME, &idx)) != TEENY_OK || idx < 0)
        return st;
    im->vals[idx].node = node;
    im->vals[idx].shape = *s;
    return TEENY_OK;
}

teeny_status teeny__ox_outputs_at_most(ox_import *im, int allowed)
{
    for (int i = allowed; i < (int)im->node->n_output; i++)
        if (*S(im->node->output[i]))
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "output %d (\"%.80s\") is not supported", i,
                           im->node->output[i]);
    return TEENY_OK;
}

/* ---- names and views ---- */

const char *teeny__ox_name(ox_import *im, const char *suffix, char *buf, size_t cap)
{
    char base[64], stem[TEENY__NAME_CAP];
    const char *nm = S(im->node->name);
    if (*nm && strlen(nm) < 40)
        snprintf(base, sizeof base, "%s", nm);
    else
        snprintf(base, sizeof base, "%.30s_%d", S(im->node->op_type), im->node_index);
    snprintf(stem, sizeof stem, "%s%s%s", base, suffix ? "." : "", suffix ? suffix : "");
    unique_name(im, stem, buf, cap);
    im->n_names++;
    return buf;
}

const char *teeny__ox_name_prefer(ox_import *im, const char *want, char *buf, size_t cap)
{
    if (!*want || strlen(want) >= 48 || name_taken(im, want))
        return teeny__ox_name(im, NULL, buf, cap);
    snprintf(buf, cap, "%s", want);
    im->n_names++;
    return buf;
}

teeny_status teeny__ox_view_node(ox_import *im, teeny_node n, const ox_shape *from, const ox_shape *s, teeny_node *out)
{
    int64_t want[TEENY_MAX_DIMS];
    char buf[TEENY__NAME_CAP];
    *out = n;
    if (from->ndim == s->ndim && !memcmp(from->d, s->d, sizeof(int64_t) * (size_t)s->ndim))
        return TEENY_OK;
    if (teeny__ox_numel(s) != teeny__ox_numel(from))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "a view of %lld elements as %lld", (long long)teeny__ox_numel(from),
                       (long long)teeny__ox_numel(s));
    if (s->ndim == 0 && teeny__ox_numel(from) == 1) /* an ONNX scalar is a [1] node */
        return from->ndim == 1 ? TEENY_OK : teeny__ox_view_node(im, n, from, &(ox_shape){1, {1}}, out);
    if (s->ndim > TEENY_MAX_DIMS) /* a wide value (transpose.c): n holds its elements, contiguous */
        return TEENY_OK;
    if (s->ndim < 1)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "a run-time result of rank %d", s->ndim);
    /* dimension 0 follows the batch where it can (then other batches
     * compile too); elsewhere the view holds at the import batch only */
    for (int k = 0; k < s->ndim; k++)
        want[k] = s->d[k];
    if (s->d[0] % im->batch == 0 && (from->ndim < 1 || from->d[0] % im->batch == 0))
        want[0] = -1;
    teeny_status st = teeny_graph_reshape(im->g, teeny__ox_name(im, "view", buf, sizeof buf), n, s->ndim, want, out);
    return st == TEENY_OK ? TEENY_OK : teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
}

teeny_status teeny__ox_view(ox_import *im, int idx, const ox_shape *s, teeny_node *out)
{
    return teeny__ox_view_node(im, im->vals[idx].node, &im->vals[idx].shape, s, out);
}
