/*
 * onnx_craft.c -- crafted ONNX models (onnx_craft.h): protobuf-c messages
 * kept in growable arrays until oc_pack packs them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx.pb-c.h"
#include "onnx_craft.h"

struct oc_model {
    int64_t opset;
    Onnx__ValueInfoProto **inputs, **outputs;
    Onnx__TensorProto **inits;
    Onnx__NodeProto **nodes;
    size_t n_inputs, n_outputs, n_inits, n_nodes;
    size_t cap_inputs, cap_outputs, cap_inits, cap_nodes;
    struct oc_model **subs;        /* graph attributes' models, owned */
    size_t n_subs, cap_subs;
};

static void oc_fail(const char *why)
{
    fprintf(stderr, "onnx_craft: %s\n", why);
    abort(); /* test code: a model it cannot make is a broken test */
}

static void *oc_alloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        oc_fail("out of memory");
    return p;
}

static char *oc_strdup(const char *s)
{
    char *p = oc_alloc(strlen(s) + 1);
    memcpy(p, s, strlen(s) + 1);
    return p;
}

/* Appends item to *arr (n items, cap slots). */
static void oc_push(void ***arr, size_t *n, size_t *cap, void *item)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *arr = realloc(*arr, *cap * sizeof **arr);
        if (!*arr)
            oc_fail("out of memory");
    }
    (*arr)[(*n)++] = item;
}

/* "a,,b" -> {"a", "", "b"}; *n the count (0 for ""). */
static char **oc_split(const char *list, size_t *n)
{
    size_t count = *list ? 1 : 0;
    for (const char *c = list; *c; c++)
        count += *c == ',';
    char **out = oc_alloc(count * sizeof *out);
    const char *start = list;
    for (size_t i = 0; i < count; i++) {
        const char *end = strchr(start, ',');
        size_t len = end ? (size_t)(end - start) : strlen(start);
        out[i] = oc_alloc(len + 1);
        memcpy(out[i], start, len);
        start = end ? end + 1 : start + len;
    }
    *n = count;
    return out;
}

oc_model *oc_new(int64_t opset)
{
    oc_model *m = oc_alloc(sizeof *m);
    m->opset = opset;
    return m;
}

static Onnx__TensorProto *oc_tensor(const char *name, int type, int ndim, const int64_t *dims, const void *data)
{
    Onnx__TensorProto *t = oc_alloc(sizeof *t);
    onnx__tensor_proto__init(t);
    size_t numel = 1;
    t->name = oc_strdup(name);
    t->n_dims = (size_t)ndim;
    t->dims = oc_alloc((size_t)ndim * sizeof *t->dims);
    for (int i = 0; i < ndim; i++) {
        t->dims[i] = dims[i];
        numel *= dims[i] > 0 ? (size_t)dims[i] : 0;
    }
    size_t es = type == OC_BOOL ? 1 : type == OC_FLOAT16 ? 2 : type == OC_FLOAT || type == OC_INT32 ? 4 : 8;
    t->has_data_type = 1;
    t->data_type = type;
    t->has_raw_data = 1;
    t->raw_data.len = numel * es;
    t->raw_data.data = oc_alloc(numel * es);
    if (numel)
        memcpy(t->raw_data.data, data, numel * es);
    return t;
}

static void oc_tensor_free(Onnx__TensorProto *t)
{
    if (!t)
        return;
    free(t->name);
    free(t->dims);
    free(t->raw_data.data);
    free(t->int32_data);
    free(t);
}

void oc_input(oc_model *m, const char *name, int elem_type, int ndim, const int64_t *dims)
{
    Onnx__ValueInfoProto *vi = oc_alloc(sizeof *vi);
    Onnx__TypeProto *tp = oc_alloc(sizeof *tp);
    Onnx__TypeProto__Tensor *tt = oc_alloc(sizeof *tt);
    Onnx__TensorShapeProto *sp = oc_alloc(sizeof *sp);
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sp);
    sp->n_dim = (size_t)ndim;
    sp->dim = oc_alloc((size_t)ndim * sizeof *sp->dim);
    for (int i = 0; i < ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d = oc_alloc(sizeof *d);
        onnx__tensor_shape_proto__dimension__init(d);
        if (dims[i] < 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = oc_strdup("N");
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        sp->dim[i] = d;
    }
    tt->has_elem_type = 1;
    tt->elem_type = elem_type;
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = oc_strdup(name);
    vi->type = tp;
    oc_push((void ***)&m->inputs, &m->n_inputs, &m->cap_inputs, vi);
}

void oc_output(oc_model *m, const char *name)
{
    Onnx__ValueInfoProto *vi = oc_alloc(sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = oc_strdup(name);
    oc_push((void ***)&m->outputs, &m->n_outputs, &m->cap_outputs, vi);
}

void oc_init_f32(oc_model *m, const char *name, int ndim, const int64_t *dims, const float *data)
{
    oc_push((void ***)&m->inits, &m->n_inits, &m->cap_inits, oc_tensor(name, OC_FLOAT, ndim, dims, data));
}

void oc_init_i64(oc_model *m, const char *name, int ndim, const int64_t *dims, const int64_t *data)
{
    oc_push((void ***)&m->inits, &m->n_inits, &m->cap_inits, oc_tensor(name, OC_INT64, ndim, dims, data));
}

void oc_init_bool(oc_model *m, const char *name, int ndim, const int64_t *dims, const uint8_t *data)
{
    oc_push((void ***)&m->inits, &m->n_inits, &m->cap_inits, oc_tensor(name, OC_BOOL, ndim, dims, data));
}

void oc_init_f16(oc_model *m, const char *name, int ndim, const int64_t *dims, const uint16_t *bits,
                 int in_int32_data)
{
    uint8_t le[64 * 2];
    size_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= dims[i] > 0 ? (size_t)dims[i] : 0;
    for (size_t i = 0; i < numel && i < 64; i++) { /* little-endian whatever the host */
        le[2 * i] = (uint8_t)(bits[i] & 0xff);
        le[2 * i + 1] = (uint8_t)(bits[i] >> 8);
    }
    Onnx__TensorProto *t = oc_tensor(name, OC_FLOAT16, ndim, dims, le);
    if (in_int32_data) {
        free(t->raw_data.data);
        t->raw_data.data = NULL;
        t->raw_data.len = 0;
        t->has_raw_data = 0;
        t->n_int32_data = numel;
        t->int32_data = oc_alloc(numel * sizeof *t->int32_data + 1);
        for (size_t i = 0; i < numel; i++)
            t->int32_data[i] = bits[i];
    }
    oc_push((void ***)&m->inits, &m->n_inits, &m->cap_inits, t);
}

void oc_node(oc_model *m, const char *op, const char *inputs, const char *outputs)
{
    Onnx__NodeProto *n = oc_alloc(sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = oc_strdup(op);
    n->input = oc_split(inputs, &n->n_input);
    n->output = oc_split(outputs, &n->n_output);
    n->name = oc_strdup(n->n_output ? n->output[0] : op);
    oc_push((void ***)&m->nodes, &m->n_nodes, &m->cap_nodes, n);
}

/* A new attribute on the node added last. */
static Onnx__AttributeProto *oc_attr(oc_model *m, const char *name, Onnx__AttributeProto__AttributeType type)
{
    if (!m->n_nodes)
        oc_fail("an attribute before any node");
    Onnx__NodeProto *n = m->nodes[m->n_nodes - 1];
    Onnx__AttributeProto *a = oc_alloc(sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = oc_strdup(name);
    a->has_type = 1;
    a->type = type;
    size_t cap = n->n_attribute;
    oc_push((void ***)&n->attribute, &n->n_attribute, &cap, a);
    return a;
}

void oc_attr_int(oc_model *m, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = oc_attr(m, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void oc_attr_float(oc_model *m, const char *name, float v)
{
    Onnx__AttributeProto *a = oc_attr(m, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

void oc_attr_ints(oc_model *m, const char *name, int n, const int64_t *v)
{
    Onnx__AttributeProto *a = oc_attr(m, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)n;
    a->ints = oc_alloc((size_t)n * sizeof *a->ints);
    memcpy(a->ints, v, (size_t)n * sizeof *a->ints);
}

void oc_attr_string(oc_model *m, const char *name, const char *v)
{
    Onnx__AttributeProto *a = oc_attr(m, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)oc_strdup(v);
}

void oc_attr_tensor_i64(oc_model *m, const char *name, int ndim, const int64_t *dims, const int64_t *data)
{
    Onnx__AttributeProto *a = oc_attr(m, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = oc_tensor("", OC_INT64, ndim, dims, data);
}

/* sub's messages as a GraphProto (its arrays borrowed from sub). */
static Onnx__GraphProto *oc_graph(oc_model *sub)
{
    Onnx__GraphProto *g = oc_alloc(sizeof *g);
    onnx__graph_proto__init(g);
    g->name = "branch";
    g->n_node = sub->n_nodes;
    g->node = sub->nodes;
    g->n_initializer = sub->n_inits;
    g->initializer = sub->inits;
    g->n_input = sub->n_inputs;
    g->input = sub->inputs;
    g->n_output = sub->n_outputs;
    g->output = sub->outputs;
    return g;
}

void oc_attr_graph(oc_model *m, const char *name, oc_model *sub)
{
    Onnx__AttributeProto *a = oc_attr(m, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    a->g = oc_graph(sub);
    oc_push((void ***)&m->subs, &m->n_subs, &m->cap_subs, sub);
}

unsigned char *oc_pack(const oc_model *m, size_t *size)
{
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    graph.name = "crafted";
    graph.n_node = m->n_nodes;
    graph.node = m->nodes;
    graph.n_initializer = m->n_inits;
    graph.initializer = m->inits;
    graph.n_input = m->n_inputs;
    graph.input = m->inputs;
    graph.n_output = m->n_outputs;
    graph.output = m->outputs;
    opset.domain = "";
    opset.has_version = 1;
    opset.version = m->opset;
    model.has_ir_version = 1;
    model.ir_version = 8;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.graph = &graph;
    *size = onnx__model_proto__get_packed_size(&model);
    unsigned char *buf = oc_alloc(*size);
    onnx__model_proto__pack(&model, buf);
    return buf;
}

static void oc_value_info_free(Onnx__ValueInfoProto *vi)
{
    if (vi->type) {
        Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
        if (tt && tt->shape) {
            for (size_t i = 0; i < tt->shape->n_dim; i++) {
                if (tt->shape->dim[i]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
                    free(tt->shape->dim[i]->dim_param);
                free(tt->shape->dim[i]);
            }
            free(tt->shape->dim);
            free(tt->shape);
        }
        free(tt);
        free(vi->type);
    }
    free(vi->name);
    free(vi);
}

static void oc_names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

void oc_free(oc_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_inputs; i++)
        oc_value_info_free(m->inputs[i]);
    for (size_t i = 0; i < m->n_outputs; i++)
        oc_value_info_free(m->outputs[i]);
    for (size_t i = 0; i < m->n_inits; i++)
        oc_tensor_free(m->inits[i]);
    for (size_t i = 0; i < m->n_nodes; i++) {
        Onnx__NodeProto *n = m->nodes[i];
        for (size_t j = 0; j < n->n_attribute; j++) {
            Onnx__AttributeProto *a = n->attribute[j];
            free(a->name);
            free(a->ints);
            free(a->s.data);
            oc_tensor_free(a->t);
            free(a->g); /* its arrays are a sub-model's, freed below */
            free(a);
        }
        free(n->attribute);
        oc_names_free(n->input, n->n_input);
        oc_names_free(n->output, n->n_output);
        free(n->op_type);
        free(n->name);
        free(n);
    }
    for (size_t i = 0; i < m->n_subs; i++)
        oc_free(m->subs[i]);
    free(m->subs);
    free(m->inputs);
    free(m->outputs);
    free(m->inits);
    free(m->nodes);
    free(m);
}
