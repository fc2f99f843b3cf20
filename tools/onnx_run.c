/*
 * onnx_run.c -- see onnx_run.h. Public API only (teenycl.h,
 * teenycl_onnx.h): it is what an application does to run a model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "onnx_run.h"

static char run_error[512];

const char *onnx_run_error(teeny_ctx *ctx)
{
    return run_error[0] ? run_error : teeny_last_error(ctx);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* Write input i's value (from the run inputs by name) into the plan. */
static teeny_status write_input(teeny_ctx *ctx, teeny_onnx_model *m, teeny_plan *plan, int i, int n_in,
                                const onnx_run_input *in)
{
    const char *name;
    teeny_node node;
    teeny_onnx_dtype dtype;
    teeny_tensor *t;
    teeny_status st = teeny_onnx_input(m, i, &name, &node, &dtype);
    if (st != TEENY_OK || (st = teeny_plan_tensor(plan, node, &t)) != TEENY_OK)
        return st;
    const onnx_run_input *f = NULL;
    for (int k = 0; k < n_in && !f; k++)
        if (!strcmp(in[k].name, name))
            f = &in[k];
    int64_t n = teeny_tensor_numel(t);
    if (!f || numel_of(f->ndim, f->shape) != n || (dtype == TEENY_ONNX_FLOAT) != (f->dtype == TEENY_ONNX_FLOAT)) {
        snprintf(run_error, sizeof run_error, "input %s: %s", name,
                 !f ? "no value given" : dtype == TEENY_ONNX_FLOAT && f->dtype != TEENY_ONNX_FLOAT
                     ? "the model wants float values" : "wrong element count or type");
        return f ? TEENY_ERR_SHAPE : TEENY_ERR_ARG;
    }
    if (dtype == TEENY_ONNX_FLOAT)
        return teeny_tensor_write(t, f->data, (size_t)n);
    int32_t *v = malloc((size_t)n * sizeof *v + 1);
    if (!v)
        return TEENY_ERR_NOMEM;
    for (int64_t k = 0; k < n; k++)
        v[k] = f->dtype == TEENY_ONNX_INT64 ? (int32_t)((const int64_t *)f->data)[k]
             : f->dtype == TEENY_ONNX_INT32 ? ((const int32_t *)f->data)[k] : (int32_t)((const float *)f->data)[k];
    st = teeny_tensor_write_i32(t, v, (size_t)n);
    teeny_ctx_finish(ctx);
    free(v);
    return st;
}

static teeny_status read_outputs(teeny_onnx_model *m, teeny_plan *plan, onnx_run_result *out)
{
    int n = teeny_onnx_output_count(m);
    out->n = n;
    out->names = calloc((size_t)n + 1, sizeof *out->names);
    out->ndim = calloc((size_t)n + 1, sizeof *out->ndim);
    out->shape = calloc((size_t)n + 1, sizeof *out->shape);
    out->data = calloc((size_t)n + 1, sizeof *out->data);
    if (!out->names || !out->ndim || !out->shape || !out->data)
        return TEENY_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        const char *name;
        teeny_status st = teeny_onnx_output(m, i, &name, NULL, &out->ndim[i], out->shape[i]);
        if (st != TEENY_OK)
            return st;
        int64_t count = numel_of(out->ndim[i], out->shape[i]);
        if (!(out->names[i] = malloc(strlen(name) + 1)) || !(out->data[i] = malloc((size_t)count * sizeof(float) + 1)))
            return TEENY_ERR_NOMEM;
        memcpy(out->names[i], name, strlen(name) + 1);
        if ((st = teeny_onnx_output_read(m, plan, i, out->data[i], (size_t)count)) != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}

teeny_status onnx_run(teeny_ctx *ctx, const char *path, int64_t batch, int n_in, const onnx_run_input *in,
                      int repeat, onnx_run_result *out, double *median_ms)
{
    teeny_onnx_feed *feeds = calloc((size_t)n_in + 1, sizeof *feeds);
    teeny_onnx_params op = TEENY_ONNX_PARAMS_INIT;
    teeny_onnx_model *m = NULL;
    teeny_plan *plan = NULL;
    double *times = calloc((size_t)(repeat > 0 ? repeat : 1), sizeof *times);
    teeny_status st = feeds && times ? TEENY_OK : TEENY_ERR_NOMEM;
    memset(out, 0, sizeof *out);
    *median_ms = 0.0;
    run_error[0] = 0;
    for (int i = 0; i < n_in && feeds; i++)
        feeds[i] = (teeny_onnx_feed){in[i].name, in[i].dtype, in[i].ndim, in[i].shape, in[i].data};
    op.batch = batch;
    op.n_feeds = n_in;
    op.feeds = feeds;
    if (st == TEENY_OK)
        st = teeny_onnx_load(ctx, path, &op, &m);
    if (st == TEENY_OK && teeny_graph_node_count(teeny_onnx_graph(m)) > 0) {
        teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
        pp.batch = teeny_onnx_batch(m);
        pp.training = 0;
        st = teeny_graph_compile(teeny_onnx_graph(m), &pp, &plan);
        for (int i = 0; st == TEENY_OK && i < teeny_onnx_input_count(m); i++)
            st = write_input(ctx, m, plan, i, n_in, in);
        for (int r = 0; st == TEENY_OK && r < (repeat > 0 ? repeat : 1); r++) {
            double t0 = now_ms();
            if ((st = teeny_plan_forward(plan)) == TEENY_OK)
                st = teeny_ctx_finish(ctx);
            times[r] = now_ms() - t0;
        }
        qsort(times, (size_t)(repeat > 0 ? repeat : 1), sizeof *times, cmp_double);
        *median_ms = times[(repeat > 0 ? repeat : 1) / 2];
    }
    if (st == TEENY_OK)
        st = read_outputs(m, plan, out);
    if (st != TEENY_OK)
        onnx_run_result_free(out);
    teeny_plan_destroy(plan);
    teeny_onnx_destroy(m);
    free(feeds);
    free(times);
    return st;
}

void onnx_run_result_free(onnx_run_result *r)
{
    for (int i = 0; i < r->n; i++) {
        if (r->names)
            free(r->names[i]);
        if (r->data)
            free(r->data[i]);
    }
    free(r->names);
    free(r->ndim);
    free(r->shape);
    free(r->data);
    memset(r, 0, sizeof *r);
}
