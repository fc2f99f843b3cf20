/*
 * model.c -- the public face of the importer: loading from a file (read
 * whole, its directory the home of external data), inspecting a model node
 * by node, and the model's accessors (inputs, outputs and their values,
 * the batch, freezing parameters by their ONNX names).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_internal.h"

/* The whole file into a buffer the caller frees with teeny__free. */
static teeny_status read_file(teeny_ctx *ctx, const char *path, uint8_t **data, size_t *size)
{
    const char *why = "";
    struct stat sb;
    int fd = teeny__open_regular(path, &why);
    *data = NULL;
    if (fd < 0)
        return teeny__error(ctx, TEENY_ERR_IO, "cannot open %s: %s", path, why);
    if (fstat(fd, &sb) != 0 || sb.st_size < 0 || (uint64_t)sb.st_size > (uint64_t)SIZE_MAX / 2) {
        close(fd);
        return teeny__error(ctx, TEENY_ERR_IO, "cannot size %s", path);
    }
    *size = (size_t)sb.st_size;
    if (!(*data = teeny__malloc(*size ? *size : 1))) {
        close(fd);
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory reading %s (%zu bytes)", path, *size);
    }
    size_t got = 0;
    while (got < *size) {
        ssize_t r = read(fd, *data + got, *size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got != *size) {
        teeny__free(*data);
        *data = NULL;
        return teeny__error(ctx, TEENY_ERR_IO, "reading %s failed after %zu of %zu bytes", path, got, *size);
    }
    return TEENY_OK;
}

static teeny_status load_path(teeny_ctx *ctx, const char *fn_name, const char *path, const teeny_onnx_params *p,
                              teeny_onnx_report_fn fn, void *user, teeny_onnx_model **out)
{
    uint8_t *data;
    size_t size = 0;
    char dir[4096];
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: ctx is NULL or destroyed", fn_name);
    teeny__clear_error(ctx);
    if (!path)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: path is NULL", fn_name);
    const char *slash = strrchr(path, '/');
    if ((size_t)snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".") >= sizeof dir)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: path too long", fn_name);
    if (slash == path)
        snprintf(dir, sizeof dir, "/");
    teeny_status st = read_file(ctx, path, &data, &size);
    if (st == TEENY_OK) {
        st = teeny__ox_load(ctx, data, size, dir, p, fn, user, out);
        teeny__free(data);
    }
    return st == TEENY_OK ? st : teeny__error(ctx, st, "ONNX model %s: %s", path, teeny_last_error(ctx));
}

teeny_status teeny_onnx_load(teeny_ctx *ctx, const char *path, const teeny_onnx_params *p, teeny_onnx_model **out)
{
    if (!out)
        return teeny__error(teeny__ctx_check(ctx) ? ctx : NULL, TEENY_ERR_ARG, "teeny_onnx_load: out is NULL");
    *out = NULL;
    return load_path(ctx, "teeny_onnx_load", path, p, NULL, NULL, out);
}

teeny_status teeny_onnx_inspect(teeny_ctx *ctx, const char *path, const teeny_onnx_params *p,
                                teeny_onnx_report_fn fn, void *user_data)
{
    teeny_onnx_model *m = NULL;
    if (!fn)
        return teeny__error(teeny__ctx_check(ctx) ? ctx : NULL, TEENY_ERR_ARG, "teeny_onnx_inspect: fn is NULL");
    return load_path(ctx, "teeny_onnx_inspect", path, p, fn, user_data, &m);
}

teeny_graph *teeny_onnx_graph(const teeny_onnx_model *m)
{
    return m ? m->g : NULL;
}

int64_t teeny_onnx_batch(const teeny_onnx_model *m)
{
    return m ? m->batch : 0;
}

int teeny_onnx_input_count(const teeny_onnx_model *m)
{
    return m ? m->n_inputs : 0;
}

static teeny_status check_index(const teeny_onnx_model *m, int i, int n, const char *fn)
{
    if (!m)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: model is NULL", fn);
    teeny__clear_error(m->ctx);
    if (i < 0 || i >= n)
        return teeny__error(m->ctx, TEENY_ERR_ARG, "%s: index %d outside 0..%d", fn, i, n - 1);
    return TEENY_OK;
}

teeny_status teeny_onnx_input(const teeny_onnx_model *m, int i, const char **name, teeny_node *node,
                              teeny_onnx_dtype *dtype)
{
    teeny_status st = check_index(m, i, m ? m->n_inputs : 0, "teeny_onnx_input");
    if (st != TEENY_OK)
        return st;
    if (name)
        *name = m->inputs[i].name;
    if (node)
        *node = m->inputs[i].node;
    if (dtype)
        *dtype = m->inputs[i].dtype;
    return TEENY_OK;
}

teeny_status teeny_onnx_input_declared(const teeny_onnx_model *m, int i, int *elem_type)
{
    teeny_status st = check_index(m, i, m ? m->n_inputs : 0, "teeny_onnx_input_declared");
    if (st == TEENY_OK && elem_type)
        *elem_type = m->inputs[i].declared;
    return st;
}

teeny_status teeny_onnx_output_declared(const teeny_onnx_model *m, int i, int *elem_type)
{
    teeny_status st = check_index(m, i, m ? m->n_outputs : 0, "teeny_onnx_output_declared");
    if (st == TEENY_OK && elem_type)
        *elem_type = m->outputs[i].declared;
    return st;
}

int teeny_onnx_output_count(const teeny_onnx_model *m)
{
    return m ? m->n_outputs : 0;
}

teeny_status teeny_onnx_output(const teeny_onnx_model *m, int i, const char **name, teeny_node *node, int *ndim,
                               int64_t *shape)
{
    teeny_status st = check_index(m, i, m ? m->n_outputs : 0, "teeny_onnx_output");
    if (st != TEENY_OK)
        return st;
    const ox_output *o = &m->outputs[i];
    if (name)
        *name = o->name;
    if (node)
        *node = o->node;
    if (ndim)
        *ndim = o->shape.ndim;
    if (shape)
        memcpy(shape, o->shape.d, sizeof(int64_t) * (size_t)o->shape.ndim);
    return TEENY_OK;
}

teeny_status teeny_onnx_output_read(const teeny_onnx_model *m, teeny_plan *plan, int i, float *dst, size_t count)
{
    teeny_status st = check_index(m, i, m ? m->n_outputs : 0, "teeny_onnx_output_read");
    if (st != TEENY_OK)
        return st;
    const ox_output *o = &m->outputs[i];
    int64_t n = teeny__ox_numel(&o->shape);
    if (!dst || count != (size_t)n)
        return teeny__error(m->ctx, TEENY_ERR_ARG, "teeny_onnx_output_read: output %s has %lld elements; count %zu%s",
                            o->name, (long long)n, count, dst ? "" : ", dst NULL");
    if (o->node < 0) {
        if (n)
            memcpy(dst, o->data, (size_t)n * sizeof *dst);
        return TEENY_OK;
    }
    if (!plan)
        return teeny__error(m->ctx, TEENY_ERR_ARG, "teeny_onnx_output_read: output %s needs a plan", o->name);
    return teeny_plan_read(plan, o->node, dst, count);
}

teeny_status teeny_onnx_set_trainable(teeny_onnx_model *m, const char *name, int trainable)
{
    if (!m || !name)
        return teeny__error(m ? m->ctx : NULL, TEENY_ERR_ARG, "teeny_onnx_set_trainable: %s is NULL",
                            m ? "name" : "model");
    teeny__clear_error(m->ctx);
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name))
            return teeny__graph_param_freeze(m->g, m->params[i].node, m->params[i].slot, !trainable);
    return teeny__error(m->ctx, TEENY_ERR_ARG, "teeny_onnx_set_trainable: no parameter is named \"%.80s\"", name);
}

/* ---- teeny_onnx_inspect_io: the declared graph inputs and outputs ---- */

/* One ValueInfoProto to fn: its element type and declared shape. */
static teeny_status report_io(teeny_ctx *ctx, const Onnx__ValueInfoProto *vi, int is_output, int index,
                              teeny_onnx_io_fn fn, void *user)
{
    const Onnx__TypeProto *tp = vi->type;
    int tensor = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type;
    const Onnx__TensorShapeProto *sp = tensor ? tp->tensor_type->shape : NULL;
    size_t n = sp ? sp->n_dim : 0;
    if (n > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "%s \"%.80s\" has %zu dimensions", is_output ? "output" : "input",
                            vi->name ? vi->name : "", n);
    int64_t *dims = teeny__malloc((n ? n : 1) * sizeof *dims);
    const char **names = teeny__malloc((n ? n : 1) * sizeof *names);
    if (!dims || !names) {
        teeny__free(dims);
        teeny__free(names);
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory listing %zu dimensions", n);
    }
    for (size_t i = 0; i < n; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
        int fixed = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0;
        dims[i] = fixed ? d->dim_value : -1;
        names[i] = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param ? d->dim_param : "";
    }
    int elem = tensor && tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
    const char *type_name = tensor || !tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET
                                ? teeny__ox_type_name(elem) : "not a tensor";
    teeny_onnx_io_report r = {is_output, index, vi->name ? vi->name : "", elem, type_name, sp ? (int)n : -1,
                              dims, names};
    fn(&r, user);
    teeny__free(dims);
    teeny__free(names);
    return TEENY_OK;
}

teeny_status teeny_onnx_inspect_io(teeny_ctx *ctx, const char *path, teeny_onnx_io_fn fn, void *user_data)
{
    uint8_t *data = NULL;
    size_t size = 0;
    ProtobufCMessage *msg = NULL;
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_onnx_inspect_io: ctx is NULL or destroyed");
    teeny__clear_error(ctx);
    if (!path || !fn)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_onnx_inspect_io: %s is NULL", path ? "fn" : "path");
    teeny_status st = read_file(ctx, path, &data, &size);
    if (st == TEENY_OK)
        st = teeny__ox_unpack(ctx, &onnx__model_proto__descriptor, data, size, &msg);
    const Onnx__GraphProto *g = st == TEENY_OK ? ((const Onnx__ModelProto *)msg)->graph : NULL;
    if (st == TEENY_OK && !g)
        st = teeny__error(ctx, TEENY_ERR_FORMAT, "the model has no graph");
    for (size_t i = 0, k = 0; st == TEENY_OK && i < g->n_input; i++) {
        int init = 0;
        for (size_t j = 0; j < g->n_initializer && !init; j++)
            init = g->input[i]->name && g->initializer[j]->name && !strcmp(g->input[i]->name, g->initializer[j]->name);
        if (!init)
            st = report_io(ctx, g->input[i], 0, (int)k++, fn, user_data);
    }
    for (size_t i = 0; st == TEENY_OK && i < g->n_output; i++)
        st = report_io(ctx, g->output[i], 1, (int)i, fn, user_data);
    teeny__ox_free_unpacked(msg);
    teeny__free(data);
    return st == TEENY_OK ? st : teeny__error(ctx, st, "ONNX model %s: %s", path, teeny_last_error(ctx));
}
