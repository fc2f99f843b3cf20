/*
 * import.c -- an ONNX model into a teeny_graph: parse (wire.c), check the
 * default-domain opset (OX_MIN_OPSET..OX_MAX_OPSET), load the
 * initializers as constants and declare the graph inputs (every name
 * hashed: no step scans the model per node), fix the batch, import the
 * nodes in order, each through its op type's one handler in the op
 * registry (ops.def, also public: teeny_onnx_op_info), then mark the
 * graph outputs. On any failure the graph is destroyed; teeny_onnx_inspect
 * runs the same path but goes on past failing nodes, reporting each.
 * Also the model object's accessors (inputs, outputs, parameters) and
 * the registry's public view (teeny_onnx_op_count, teeny_onnx_op_info).
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_internal.h"

#define S(x) ((x) ? (x) : "")

static const teeny_onnx_params default_params = TEENY_ONNX_PARAMS_INIT;

static void values_free(ox_import *im)
{
    for (int i = 0; i < im->n_vals; i++)
        teeny__ox_const_free(&im->vals[i].c);
    TEENY__FREE_ALL(im->vals, im->hash, im->defer, im->chain, im->fused_act, im->absorbed_by);
}

void teeny_onnx_destroy(teeny_onnx_model *m)
{
    if (!m)
        return;
    teeny_graph_destroy(m->g);
    for (int i = 0; i < m->n_inputs; i++)
        teeny__free(m->inputs[i].name);
    for (int i = 0; i < m->n_outputs; i++) {
        teeny__free(m->outputs[i].name);
        teeny__free(m->outputs[i].data);
    }
    for (int i = 0; i < m->n_params; i++)
        teeny__free(m->params[i].name);
    teeny__free(m->inputs);
    teeny__free(m->outputs);
    teeny__free(m->params);
    teeny__free(m);
}

static teeny_status check_opset(ox_import *im, const Onnx__ModelProto *mp)
{
    im->opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = S(mp->opset_import[i]->domain);
        if (!*d || !strcmp(d, "ai.onnx"))
            im->opset = mp->opset_import[i]->has_version ? mp->opset_import[i]->version : -1;
    }
    if (im->opset < OX_MIN_OPSET || im->opset > OX_MAX_OPSET)
        return teeny__error(im->ctx, TEENY_ERR_UNSUPPORTED, "default-domain opset %lld (supported: %d..%d)",
                            (long long)im->opset, OX_MIN_OPSET, OX_MAX_OPSET);
    return TEENY_OK;
}

static const teeny_onnx_feed *find_feed(const ox_import *im, const char *name)
{
    for (int i = 0; i < im->p->n_feeds; i++)
        if (im->p->feeds[i].name && !strcmp(im->p->feeds[i].name, name))
            return &im->p->feeds[i];
    return NULL;
}

/* Whether name is an initializer's (the values are declared). */
static int is_initializer(const ox_import *im, const char *name)
{
    int k = teeny__ox_find(im, name);
    return k >= 0 && im->vals[k].is_initializer;
}

/* The batch: the caller's, else the first graph input's first dimension. */
static teeny_status pick_batch(ox_import *im)
{
    const Onnx__GraphProto *g = im->graph;
    im->batch = im->p->batch;
    for (size_t i = 0; i < g->n_input && im->batch <= 0; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        const teeny_onnx_feed *f = find_feed(im, S(vi->name));
        const Onnx__TypeProto *tp = vi->type;
        if (is_initializer(im, S(vi->name)))
            continue;
        im->batch = 1;
        if (f && f->ndim > 0 && f->shape)
            im->batch = f->shape[0] > 0 ? f->shape[0] : 1;
        else if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
                 tp->tensor_type->shape && tp->tensor_type->shape->n_dim > 0 &&
                 tp->tensor_type->shape->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                 tp->tensor_type->shape->dim[0]->dim_value > 0)
            im->batch = tp->tensor_type->shape->dim[0]->dim_value;
    }
    if (im->batch <= 0)
        im->batch = 1;
    if (im->batch > INT32_MAX)
        return teeny__error(im->ctx, TEENY_ERR_RANGE, "batch %lld", (long long)im->batch);
    return TEENY_OK;
}

static teeny_status declare_values(ox_import *im)
{
    const Onnx__GraphProto *g = im->graph;
    teeny_status st = TEENY_OK;
    int idx;
    if (g->n_sparse_initializer)
        return teeny__error(im->ctx, TEENY_ERR_UNSUPPORTED, "sparse initializers are not supported");
    for (size_t i = 0; i < g->n_initializer && st == TEENY_OK; i++) {
        char what[128];
        snprintf(what, sizeof what, "initializer \"%.80s\"", S(g->initializer[i]->name));
        if ((st = teeny__ox_define(im, g->initializer[i]->name, OX_CONST, &idx)) == TEENY_OK &&
            (st = teeny__ox_tensor_load(im->ctx, g->initializer[i], im->dir, what, &im->vals[idx].c)) == TEENY_OK) {
            im->vals[idx].is_initializer = 1;
            teeny__ox_const_held(im, &im->vals[idx].c);
        }
    }
    for (size_t i = 0; i < g->n_input && st == TEENY_OK; i++) {
        const char *name = S(g->input[i]->name);
        if (is_initializer(im, name))
            continue;
        if ((st = teeny__ox_define(im, name, OX_INPUT, &idx)) == TEENY_OK) {
            im->vals[idx].vi = g->input[i];
            im->vals[idx].feed = find_feed(im, name);
        }
    }
    for (int i = 0; i < im->p->n_feeds && st == TEENY_OK; i++)
        if (!im->p->feeds[i].name || (idx = teeny__ox_find(im, im->p->feeds[i].name)) < 0 || im->vals[idx].kind != OX_INPUT)
            st = teeny__error(im->ctx, TEENY_ERR_ARG, "feed %d (\"%.80s\") names no graph input", i,
                              S(im->p->feeds[i].name));
    return st;
}

/* ---- the op registry ---- */

typedef struct {
    const char *op_type;
    ox_handler fn;
    int since, until; /* default-domain opsets */
} ox_op;

static const ox_op ox_ops[] = {
#define XX(type, fn, since, until) {type, teeny__ox_op_##fn, since, until},
#include "ops.def"
#undef XX
};

/* ggml's op-table check: a line added to or removed from ops.def fails
 * here until OX_OP_COUNT (and README.md's table) follow. */
_Static_assert(sizeof ox_ops / sizeof *ox_ops == OX_OP_COUNT, "ops.def: update OX_OP_COUNT (onnx_internal.h)");
#define XX(type, fn, since, until)                                                                      \
    _Static_assert(OX_MIN_OPSET <= (since) && (since) <= (until) && (until) <= OX_MAX_OPSET,            \
                   "ops.def: " type ": opsets outside OX_MIN_OPSET..OX_MAX_OPSET");
#include "ops.def"
#undef XX

/* One scan of ops.def's few dozen names per node: less than the node's own import costs. */
static const ox_op *find_op(const char *op_type)
{
    for (size_t i = 0; i < sizeof ox_ops / sizeof *ox_ops; i++)
        if (!strcmp(ox_ops[i].op_type, op_type))
            return &ox_ops[i];
    return NULL;
}

int teeny_onnx_op_count(void)
{
    return OX_OP_COUNT;
}

teeny_status teeny_onnx_op_info(int i, const char **op_type, int *since_opset, int *until_opset)
{
    if (i < 0 || i >= OX_OP_COUNT)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_onnx_op_info: index %d outside 0..%d", i, OX_OP_COUNT - 1);
    if (op_type)
        *op_type = ox_ops[i].op_type;
    if (since_opset)
        *since_opset = ox_ops[i].since;
    if (until_opset)
        *until_opset = ox_ops[i].until;
    return TEENY_OK;
}

static teeny_status import_node(ox_import *im)
{
    const Onnx__NodeProto *n = im->node;
    const char *dom = S(n->domain);
    if (*dom && strcmp(dom, "ai.onnx"))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "domain \"%.60s\" is not supported", dom);
    if (n->n_output < 1) /* every op imported has an output; the handlers read output[0] */
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "the node has no outputs");
    const ox_op *op = find_op(S(n->op_type));
    if (!op)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "op %.60s is not supported", S(n->op_type));
    if (im->opset < op->since || im->opset > op->until)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "op %.60s at opset %lld (supported: %d..%d)", op->op_type,
                              (long long)im->opset, op->since, op->until);
    return op->fn(im);
}

/* inspect: an input from a failed node makes this node fail too. */
static int depends_on_dead(ox_import *im)
{
    for (size_t i = 0; i < im->node->n_input; i++) {
        int k = teeny__ox_find(im, im->node->input[i]);
        if (k >= 0 && im->vals[k].kind == OX_DEAD)
            return 1;
    }
    return 0;
}

static void mark_dead(ox_import *im)
{
    for (size_t i = 0; i < im->node->n_output; i++) {
        int k;
        if (*S(im->node->output[i]) && teeny__ox_find(im, im->node->output[i]) < 0 &&
            teeny__ox_define(im, im->node->output[i], OX_DEAD, &k) != TEENY_OK)
            return;
    }
}

static teeny_status import_nodes(ox_import *im, teeny_onnx_report_fn fn, void *user)
{
    teeny_status first = teeny__ox_fuse_scan(im); /* attention chains, batch norm + activation (attn_fuse.c) */
    if (first != TEENY_OK)
        return first;
    for (size_t i = 0; i < im->graph->n_node; i++) {
        teeny_status st;
        im->node = im->graph->node[i];
        im->node_index = (int)i;
        if (fn && depends_on_dead(im))
            st = teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "an input comes from a node that was not imported");
        else if (teeny__ox_fuse_deferred(im, (int)i))
            st = TEENY_OK; /* imported at its chain's last node */
        else if (teeny__ox_fuse_final(im, (int)i))
            st = teeny__ox_fuse_node(im, import_node);
        else if (teeny__ox_act_absorbed(im, (int)i))
            st = teeny__ox_act_absorb(im); /* its batch norm or Conv applied the activation */
        else
            st = import_node(im);
        if (fn) {
            teeny_onnx_node_report r = {(int)i, S(im->node->name), S(im->node->op_type), st,
                                        st == TEENY_OK ? "" : teeny_last_error(im->ctx)};
            fn(&r, user);
            if (st != TEENY_OK)
                mark_dead(im);
        }
        if (st != TEENY_OK && first == TEENY_OK)
            first = st;
        if (st != TEENY_OK && (!fn || st == TEENY_ERR_NOMEM))
            break;
    }
    im->node = NULL;
    return first;
}

static teeny_status add_output(ox_import *im, const Onnx__ValueInfoProto *vi)
{
    const char *name = S(vi->name);
    const Onnx__TypeProto *tp = vi->type;
    teeny_onnx_model *m = im->m;
    ox_output *o = &m->outputs[m->n_outputs];
    int idx = teeny__ox_find(im, name);
    teeny_status st;
    if (idx < 0)
        return teeny__error(im->ctx, TEENY_ERR_FORMAT, "graph output \"%.80s\" is not produced by any node", name);
    ox_value *v = &im->vals[idx];
    if (v->kind == OX_INPUT || v->kind == OX_SIGMOID) {
        Onnx__NodeProto fake = ONNX__NODE_PROTO__INIT;
        char *in[1] = {(char *)name};
        fake.n_input = 1;
        fake.input = in;
        fake.op_type = "Output";
        im->node = &fake;
        st = teeny__ox_in_runtime(im, 0, "output", &idx);
        im->node = NULL;
        if (st != TEENY_OK)
            return st;
    }
    if (v->kind != OX_CONST && v->kind != OX_RUNTIME)
        return teeny__error(im->ctx, TEENY_ERR_UNSUPPORTED, "graph output \"%.80s\" comes from a node that was not "
                            "imported", name);
    if (!(o->name = teeny__malloc(strlen(name) + 1)))
        return teeny__error(im->ctx, TEENY_ERR_NOMEM, "out of host memory");
    memcpy(o->name, name, strlen(name) + 1);
    m->n_outputs++;
    o->node = -1;
    o->declared = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
                  tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
    if (v->kind == OX_RUNTIME) {
        o->node = v->node;
        o->shape = v->shape; /* a loss: ndim 0; rank 6..8: the node holds it at a lower rank (transpose.c) */
        return teeny_graph_mark_output(im->g, v->node);
    }
    o->shape = v->c.shape;
    if (v->c.numel && !(o->data = teeny__malloc((size_t)v->c.numel * sizeof *o->data)))
        return teeny__error(im->ctx, TEENY_ERR_NOMEM, "out of host memory");
    for (int64_t i = 0; i < v->c.numel; i++)
        o->data[i] = (float)teeny__ox_get_f(&v->c, i);
    return TEENY_OK;
}

static teeny_status import_model(ox_import *im, const uint8_t *data, size_t size, teeny_onnx_report_fn fn,
                                 void *user)
{
    ProtobufCMessage *msg = NULL;
    teeny_status st = teeny__ox_unpack(im->ctx, &onnx__model_proto__descriptor, data, size, &msg);
    const Onnx__ModelProto *mp = (const Onnx__ModelProto *)msg;
    if (st == TEENY_OK && !mp->graph)
        st = teeny__error(im->ctx, TEENY_ERR_FORMAT, "the model has no graph");
    if (st == TEENY_OK) {
        im->graph = mp->graph;
        if (mp->graph->n_output > (size_t)INT32_MAX / sizeof(ox_output))
            st = teeny__error(im->ctx, TEENY_ERR_RANGE, "too many graph outputs");
    }
    if (st == TEENY_OK && (st = check_opset(im, mp)) == TEENY_OK && (st = declare_values(im)) == TEENY_OK &&
        (st = pick_batch(im)) == TEENY_OK && (st = teeny_graph_create(im->ctx, 0, &im->g)) == TEENY_OK) {
        im->m->g = im->g;
        st = teeny__graph_set_build_batch(im->g, im->batch);
        im->m->batch = im->batch;
        if (st == TEENY_OK)
            st = import_nodes(im, fn, user);
    }
    if (st == TEENY_OK && im->graph->n_output &&
        !(im->m->outputs = teeny__calloc(im->graph->n_output, sizeof *im->m->outputs)))
        st = teeny__error(im->ctx, TEENY_ERR_NOMEM, "out of host memory");
    for (size_t i = 0; st == TEENY_OK && i < im->graph->n_output; i++)
        st = add_output(im, im->graph->output[i]);
    values_free(im);
    teeny__ox_free_unpacked(msg);
    return st;
}

static teeny_status load(teeny_ctx *ctx, const void *data, size_t size, const char *dir, const teeny_onnx_params *p,
                         ox_budget budget, teeny_onnx_report_fn fn, void *user, teeny_onnx_model **out)
{
    ox_import im;
    teeny_status st;
    if (!p)
        p = &default_params;
    if (p->n_feeds < 0 || (p->n_feeds && !p->feeds) || p->batch < 0)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_onnx_params: n_feeds %d with feeds %s, batch %lld",
                            p->n_feeds, p->feeds ? "set" : "NULL", (long long)p->batch);
    memset(&im, 0, sizeof im);
    im.ctx = ctx;
    im.p = p;
    im.dir = dir;
    im.budget = budget;
    im.import_node = import_node;
    if (!(im.m = teeny__calloc(1, sizeof *im.m)))
        return teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_onnx_load: out of host memory");
    im.m->ctx = ctx;
    st = import_model(&im, data, size, fn, user);
    if (st != TEENY_OK || fn) {
        teeny_onnx_destroy(im.m);
        return st;
    }
    *out = im.m;
    return TEENY_OK;
}

static const ox_budget default_budget = {TEENY_ONNX_FOLD_VALUE_BYTES, TEENY_ONNX_FOLD_TOTAL_BYTES};

teeny_status teeny__ox_load(teeny_ctx *ctx, const void *data, size_t size, const char *dir, const teeny_onnx_params *p,
                     teeny_onnx_report_fn fn, void *user, teeny_onnx_model **out)
{
    return load(ctx, data, size, dir, p, default_budget, fn, user, out);
}

teeny_status teeny__ox_load_budget(teeny_ctx *ctx, const void *data, size_t size, const teeny_onnx_params *p,
                                   ox_budget budget, teeny_onnx_model **out)
{
    *out = NULL;
    teeny__clear_error(ctx);
    teeny_status st = load(ctx, data, size, p ? p->base_dir : NULL, p, budget, NULL, NULL, out);
    return st == TEENY_OK ? st : teeny__error(ctx, st, "ONNX model: %s", teeny_last_error(ctx));
}

teeny_status teeny_onnx_load_memory(teeny_ctx *ctx, const void *data, size_t size, const teeny_onnx_params *p,
                                    teeny_onnx_model **out)
{
    if (!out)
        return teeny__error(teeny__ctx_check(ctx) ? ctx : NULL, TEENY_ERR_ARG, "teeny_onnx_load_memory: out is NULL");
    *out = NULL;
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_onnx_load_memory: ctx is NULL or destroyed");
    teeny__clear_error(ctx);
    if (!data && size)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_onnx_load_memory: data is NULL");
    teeny_status st = teeny__ox_load(ctx, data, size, p ? p->base_dir : NULL, p, NULL, NULL, out);
    return st == TEENY_OK ? st : teeny__error(ctx, st, "ONNX model: %s", teeny_last_error(ctx));
}
