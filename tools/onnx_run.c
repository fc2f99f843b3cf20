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

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

float onnx_random_value(uint64_t seed, int input, int64_t k, teeny_onnx_dtype dtype)
{
    uint64_t start = mix64(seed ^ ((uint64_t)(input + 1) * 0xd1b54a32d192ed03ULL));
    uint64_t z = mix64(start + (uint64_t)(k + 1) * 0x9e3779b97f4a7c15ULL);
    if (dtype != TEENY_ONNX_FLOAT)
        return (float)(z >> 63);
    return (float)((int64_t)(z >> 40) - (1 << 23)) * 0x1p-23f;
}

const char *onnx_run_type_shape(char *buf, size_t cap, const char *type, int ndim, const int64_t *shape)
{
    size_t at = (size_t)snprintf(buf, cap, "%s [", type);
    for (int i = 0; i < ndim && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
    return buf;
}

const char *onnx_run_input_type(const onnx_run_input *f)
{
    return f->is_bool ? "bool" : f->is_half ? "float16" : f->dtype == TEENY_ONNX_FLOAT ? "float"
                               : f->dtype == TEENY_ONNX_INT64 ? "int64" : "int32";
}

/* Write input i's value (from the run inputs by name, or random) into the
 * plan. A given value must have the plan tensor's element count and a type
 * it takes: float for a float input (else TEENY_ERR_ARG), int32, int64 or
 * bool for an int32 one, an int64 value outside int32 TEENY_ERR_RANGE;
 * each message names the input, what the plan takes and what was given. */
static teeny_status write_input(teeny_ctx *ctx, teeny_onnx_model *m, teeny_plan *plan, int i, int n_in,
                                const onnx_run_input *in, int random, uint64_t seed)
{
    const char *name;
    teeny_node node;
    teeny_onnx_dtype dtype;
    teeny_tensor *t;
    char want[160], given[160];
    int64_t shape[TEENY_ONNX_MAX_DIMS];
    int declared = 0;
    teeny_status st = teeny_onnx_input(m, i, &name, &node, &dtype);
    if (st != TEENY_OK || (st = teeny_onnx_input_declared(m, i, &declared)) != TEENY_OK ||
        (st = teeny_plan_tensor(plan, node, &t)) != TEENY_OK)
        return st;
    const onnx_run_input *f = NULL;
    for (int k = 0; k < n_in && !f; k++)
        if (!strcmp(in[k].name, name))
            f = &in[k];
    int64_t n = teeny_tensor_numel(t);
    int ndim = teeny_tensor_ndim(t);
    for (int d = 0; d < ndim && d < TEENY_ONNX_MAX_DIMS; d++)
        shape[d] = teeny_tensor_dim(t, d);
    onnx_run_type_shape(want, sizeof want, dtype == TEENY_ONNX_FLOAT ? "float" : "int32", ndim, shape);
    if (f)
        onnx_run_type_shape(given, sizeof given, onnx_run_input_type(f), f->ndim, f->shape);
    if (!f && !random) {
        snprintf(run_error, sizeof run_error, "input %s (%s): no value given", name, want);
        return TEENY_ERR_ARG;
    }
    if (f && (dtype == TEENY_ONNX_FLOAT) != (f->dtype == TEENY_ONNX_FLOAT)) {
        snprintf(run_error, sizeof run_error, "input %s: the plan takes %s%s; given %s", name, want,
                 dtype == TEENY_ONNX_FLOAT ? "" : " (int32, int64 or bool values)", given);
        return TEENY_ERR_ARG;
    }
    if (f && numel_of(f->ndim, f->shape) != n) {
        snprintf(run_error, sizeof run_error, "input %s: the plan takes %s (%lld values); given %s (%lld)", name, want,
                 (long long)n, given, (long long)numel_of(f->ndim, f->shape));
        return TEENY_ERR_SHAPE;
    }
    if (!f) {
        void *v = malloc((size_t)n * 4 + 1);
        if (!v)
            return TEENY_ERR_NOMEM;
        for (int64_t k = 0; k < n; k++) {
            float x = onnx_random_value(seed, i, k, dtype);
            if (dtype == TEENY_ONNX_FLOAT) /* a float16 input's: a value its file could hold */
                ((float *)v)[k] = declared == TEENY_ONNX_FLOAT16 ? teeny_round_half(x) : x;
            else
                ((int32_t *)v)[k] = (int32_t)x;
        }
        st = dtype == TEENY_ONNX_FLOAT ? teeny_tensor_write(t, v, (size_t)n) : teeny_tensor_write_i32(t, v, (size_t)n);
        teeny_ctx_finish(ctx);
        free(v);
        return st;
    }
    if (dtype == TEENY_ONNX_FLOAT)
        return teeny_tensor_write(t, f->data, (size_t)n);
    int32_t *v = malloc((size_t)n * sizeof *v + 1);
    if (!v)
        return TEENY_ERR_NOMEM;
    for (int64_t k = 0; k < n; k++) {
        int64_t x = f->dtype == TEENY_ONNX_INT64 ? ((const int64_t *)f->data)[k] : ((const int32_t *)f->data)[k];
        if (x < INT32_MIN || x > INT32_MAX) {
            snprintf(run_error, sizeof run_error, "input %s: element %lld is %lld, outside int32 (the plan takes %s)",
                     name, (long long)k, (long long)x, want);
            free(v);
            return TEENY_ERR_RANGE;
        }
        v[k] = (int32_t)x;
    }
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
    out->declared = calloc((size_t)n + 1, sizeof *out->declared);
    if (!out->names || !out->ndim || !out->shape || !out->data || !out->declared)
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
        if ((st = teeny_onnx_output_read(m, plan, i, out->data[i], (size_t)count)) != TEENY_OK ||
            (st = teeny_onnx_output_declared(m, i, &out->declared[i])) != TEENY_OK)
            return st;
        for (int64_t k = 0; out->declared[i] == TEENY_ONNX_FLOAT16 && k < count; k++)
            out->data[i][k] = teeny_round_half(out->data[i][k]);
    }
    return TEENY_OK;
}

teeny_status onnx_session_import(teeny_ctx *ctx, const char *path, int64_t batch, int n_in, const onnx_run_input *in,
                                 onnx_session *s)
{
    teeny_onnx_feed *feeds = calloc((size_t)n_in + 1, sizeof *feeds);
    teeny_onnx_params op = TEENY_ONNX_PARAMS_INIT;
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->frozen_params = 1;
    run_error[0] = 0;
    if (!feeds)
        return TEENY_ERR_NOMEM;
    for (int i = 0; i < n_in; i++)
        feeds[i] = (teeny_onnx_feed){in[i].name, in[i].dtype, in[i].ndim, in[i].shape, in[i].data};
    op.batch = batch;
    op.n_feeds = n_in;
    op.feeds = feeds;
    double t0 = now_ms();
    teeny_status st = teeny_onnx_load(ctx, path, &op, &s->model);
    s->import_ms = now_ms() - t0;
    free(feeds);
    return st;
}

teeny_status onnx_session_compile(onnx_session *s)
{
    teeny_status st = TEENY_OK;
    double t0 = now_ms();
    run_error[0] = 0;
    if (teeny_graph_node_count(teeny_onnx_graph(s->model)) > 0) {
        teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
        teeny_plan_options po = TEENY_PLAN_OPTIONS_INIT;
        pp.batch = teeny_onnx_batch(s->model);
        pp.training = 0;
        po.frozen_params = s->frozen_params;
        st = teeny_graph_compile_ex(teeny_onnx_graph(s->model), &pp, &po, &s->plan);
    }
    s->compile_ms = now_ms() - t0;
    return st;
}

teeny_status onnx_session_inputs(onnx_session *s, int n_in, const onnx_run_input *in, int random, uint64_t seed)
{
    teeny_status st = TEENY_OK;
    run_error[0] = 0;
    for (int i = 0; s->plan && st == TEENY_OK && i < teeny_onnx_input_count(s->model); i++)
        st = write_input(s->ctx, s->model, s->plan, i, n_in, in, random, seed);
    return st;
}

teeny_status onnx_session_forward(onnx_session *s, double *ms)
{
    teeny_status st = TEENY_OK;
    double t0 = now_ms();
    run_error[0] = 0;
    if (s->plan && (st = teeny_plan_forward(s->plan)) == TEENY_OK)
        st = teeny_ctx_finish(s->ctx);
    *ms = now_ms() - t0;
    return st;
}

teeny_status onnx_session_outputs(onnx_session *s, onnx_run_result *out)
{
    memset(out, 0, sizeof *out);
    run_error[0] = 0;
    teeny_status st = read_outputs(s->model, s->plan, out);
    if (st != TEENY_OK)
        onnx_run_result_free(out);
    return st;
}

void onnx_session_close(onnx_session *s)
{
    teeny_plan_destroy(s->plan);
    teeny_onnx_destroy(s->model);
    s->plan = NULL;
    s->model = NULL;
}

teeny_status onnx_run(teeny_ctx *ctx, const char *path, int64_t batch, int n_in, const onnx_run_input *in,
                      int repeat, onnx_run_result *out, double *median_ms)
{
    onnx_session s;
    int runs = repeat > 0 ? repeat : 1;
    double *times = calloc((size_t)runs, sizeof *times);
    teeny_status st = times ? onnx_session_import(ctx, path, batch, n_in, in, &s) : TEENY_ERR_NOMEM;
    memset(out, 0, sizeof *out);
    *median_ms = 0.0;
    if (st == TEENY_OK && (st = onnx_session_compile(&s)) == TEENY_OK)
        st = onnx_session_inputs(&s, n_in, in, 0, 0);
    for (int r = 0; st == TEENY_OK && r < runs; r++)
        st = onnx_session_forward(&s, &times[r]);
    if (st == TEENY_OK) {
        qsort(times, (size_t)runs, sizeof *times, cmp_double);
        *median_ms = times[runs / 2];
        st = onnx_session_outputs(&s, out);
    }
    if (times)
        onnx_session_close(&s);
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
    free(r->declared);
    memset(r, 0, sizeof *r);
}
