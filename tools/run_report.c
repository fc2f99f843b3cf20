/*
 * run_report.c -- teeny-run's report, as text or as one JSON object: the
 * model, the device, the plan's inputs (their shapes at the batch and
 * where each value comes from) and outputs (the files written), the
 * timings and their statistics, and --profile's per-kernel table.
 */
#include <stdio.h>
#include <string.h>

#include "run.h"

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void json_shape(int ndim, const int64_t *shape)
{
    putchar('[');
    for (int d = 0; d < ndim; d++)
        printf("%s%lld", d ? ", " : "", (long long)shape[d]);
    putchar(']');
}

static void text_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

/* Plan input i: name, dtype name, shape at the batch, and where its value comes from. */
static void input_info(const report *r, int i, const char **name, const char **dtype, int *ndim, int64_t shape[5],
                       const char **file)
{
    teeny_node node;
    teeny_onnx_dtype dt;
    int declared = 0;
    *ndim = 0;
    *file = NULL;
    teeny_onnx_input(r->s->model, i, name, &node, &dt);
    teeny_onnx_input_declared(r->s->model, i, &declared);
    teeny_graph_node_info(teeny_onnx_graph(r->s->model), node, NULL, ndim, shape);
    /* a float16 input takes '<f2' files (its plan tensor is fp32) */
    *dtype = dt != TEENY_ONNX_FLOAT ? "int32" : declared == TEENY_ONNX_FLOAT16 ? "float16" : "float";
    for (int k = 0; k < r->o->n_in; k++)
        if (!strcmp(r->o->names[k], *name))
            *file = r->o->files[k];
}

/* Output i's file type: float16 where the model declares it, else float. */
static const char *output_dtype(const teeny_onnx_model *m, int i)
{
    int declared = 0;
    teeny_onnx_output_declared(m, i, &declared);
    return declared == TEENY_ONNX_FLOAT16 ? "float16" : "float";
}

/* the slowest nodes --profile prints (--json: all) */
#define NODES_SHOWN 30

/* One table of --profile: its first `shown` rows, per forward pass. */
static void print_table(const profile_table *t, const char *title, int shown, int repeat, double kernel_ms)
{
    printf("%-40s %13s %10s %10s %7s %14s\n", title, "launches/pass", "ms/pass", "ms/launch", "share", "idle ms/pass");
    for (int k = 0; k < t->n && k < shown; k++) {
        const kernel_row *row = &t->rows[k];
        printf("%-40s %13.1f %10.4f %10.4f %6.1f%% %14.4f\n", row->name, (double)row->launches / repeat,
               row->ms / repeat, row->ms / (double)row->launches, kernel_ms > 0 ? 100 * row->ms / kernel_ms : 0,
               row->idle_ms / repeat);
    }
}

void run_print_text(const report *r)
{
    const options *o = r->o;
    teeny_onnx_model *m = r->s->model;
    char shape_text[256];
    int width = 4;
    for (int i = 0; i < teeny_onnx_input_count(m); i++) {
        const char *name;
        teeny_onnx_input(m, i, &name, NULL, NULL);
        width = (int)strlen(name) > width ? (int)strlen(name) : width;
    }
    for (int i = 0; i < teeny_onnx_output_count(m); i++) {
        const char *name;
        teeny_onnx_output(m, i, &name, NULL, NULL, NULL);
        width = (int)strlen(name) > width ? (int)strlen(name) : width;
    }
    printf("model       %s\n", o->model);
    if (r->declared) {
        printf("declared in the model:\n");
        onnx_io_print(r->declared, "  ", stdout);
        printf("run at batch %lld:\n", (long long)teeny_onnx_batch(m));
    } else {
        printf("device      %s\n", r->device);
        printf("batch       %lld\n", (long long)teeny_onnx_batch(m));
        printf("import      %.3f ms\n", r->s->import_ms);
        printf("compile     %.3f ms\n", r->s->compile_ms);
    }
    for (int i = 0; i < teeny_onnx_input_count(m); i++) {
        const char *name, *dtype, *file;
        int ndim;
        int64_t shape[5];
        input_info(r, i, &name, &dtype, &ndim, shape, &file);
        text_shape(shape_text, sizeof shape_text, ndim, shape);
        printf(r->declared ? "  %-7s %-*s  %-6s %s  " : "%-11s %-*s  %-6s %s  ", "input", width, name, dtype,
               shape_text);
        if (file)
            printf("from %s\n", file);
        else if (r->declared)
            printf("random unless --input %s=FILE.npy\n", name);
        else
            printf("random (seed %d)\n", o->seed);
    }
    for (int i = 0; i < teeny_onnx_output_count(m); i++) {
        const char *name;
        int ndim;
        int64_t shape[TEENY_ONNX_MAX_DIMS];
        teeny_onnx_output(m, i, &name, NULL, &ndim, shape);
        text_shape(shape_text, sizeof shape_text, ndim, shape);
        printf(r->declared ? "  %-7s %-*s  %-6s %s" : "%-11s %-*s  %-6s %s", "output", width, name,
               output_dtype(m, i), shape_text);
        if (r->written)
            printf(r->files[i][0] ? "  -> %s/%s\n" : "  (empty: not written)\n", o->out_dir, r->files[i]);
        else
            printf(r->declared ? "  file %s\n" : "\n", r->files[i]);
    }
    if (!r->ran)
        return;
    if (o->warmup == 1)
        printf("warm-up     1 run: %.3f ms\n", r->warm[0]);
    else if (o->warmup)
        printf("warm-up     %d runs: first %.3f ms, last %.3f ms\n", o->warmup, r->warm[0], r->warm[o->warmup - 1]);
    printf("forward     %d run%s: min %.3f  median %.3f  mean %.3f  p90 %.3f  p99 %.3f  max %.3f ms\n", o->repeat,
           o->repeat == 1 ? "" : "s", r->stats.min, r->stats.median, r->stats.mean, r->stats.p90, r->stats.p99,
           r->stats.max);
    printf("throughput  %.1f inferences/s at batch %lld (from the mean)\n",
           r->stats.mean > 0 ? 1000.0 * (double)teeny_onnx_batch(m) / r->stats.mean : 0.0,
           (long long)teeny_onnx_batch(m));
    printf("launches    %d kernel launch%s a forward pass\n", r->launches, r->launches == 1 ? "" : "es");
    if (!o->profile)
        return;
    const profile_data *p = &r->prof;
    printf("\nprofile: %d forward pass%s back to back; per pass %.4f ms of device time from the first\n"
           "kernel's start to the last one's end: kernels %.4f ms, idle between them %.4f ms\n",
           o->repeat, o->repeat == 1 ? "" : "es", p->span_ms / o->repeat, p->kernel_ms / o->repeat,
           (p->span_ms - p->kernel_ms) / o->repeat);
    print_table(&p->kernels, "kernel (slowest first)", p->kernels.n, o->repeat, p->kernel_ms);
    printf("\n");
    print_table(&p->nodes, "graph node (slowest first)", NODES_SHOWN, o->repeat, p->kernel_ms);
    if (p->nodes.n > NODES_SHOWN)
        printf("(and %d more nodes: --json lists every one)\n", p->nodes.n - NODES_SHOWN);
    printf("(idle: the device's idle time just before the launches, waiting for the host)\n");
}

/* --json's rows of one table: [{"name": ..., "launches": ..., "ms": ..., "idle_before_ms": ...}, ...] */
static void json_table(const profile_table *t)
{
    printf("[");
    for (int k = 0; k < t->n; k++) {
        printf("%s{\"name\": ", k ? ", " : "");
        json_str(t->rows[k].name);
        printf(", \"launches\": %ld, \"ms\": %.6f, \"idle_before_ms\": %.6f}", t->rows[k].launches, t->rows[k].ms,
               t->rows[k].idle_ms);
    }
    printf("]");
}

void run_print_json(const report *r)
{
    const options *o = r->o;
    teeny_onnx_model *m = r->s->model;
    printf("{\"model\": ");
    json_str(o->model);
    printf(", \"device\": ");
    json_str(r->device);
    printf(", \"batch\": %lld", (long long)teeny_onnx_batch(m));
    if (r->declared) {
        printf(", \"declared\": [");
        for (int i = 0; i < r->declared->n; i++) {
            const onnx_io_row *row = &r->declared->rows[i];
            printf("%s{\"kind\": \"%s\", \"name\": ", i ? ", " : "", row->is_output ? "output" : "input");
            json_str(row->name);
            printf(", \"type\": ");
            json_str(row->type);
            printf(", \"shape\": ");
            json_str(row->shape);
            printf("}");
        }
        printf("]");
    } else {
        printf(", \"import_ms\": %.6f, \"compile_ms\": %.6f", r->s->import_ms, r->s->compile_ms);
    }
    printf(", \"inputs\": [");
    for (int i = 0; i < teeny_onnx_input_count(m); i++) {
        const char *name, *dtype, *file;
        int ndim;
        int64_t shape[5];
        input_info(r, i, &name, &dtype, &ndim, shape, &file);
        printf("%s{\"name\": ", i ? ", " : "");
        json_str(name);
        printf(", \"dtype\": \"%s\", \"shape\": ", dtype);
        json_shape(ndim, shape);
        printf(", \"file\": ");
        if (file)
            json_str(file);
        else
            printf("null");
        printf("}");
    }
    printf("], \"seed\": %d, \"outputs\": [", o->seed);
    for (int i = 0; i < teeny_onnx_output_count(m); i++) {
        const char *name;
        int ndim;
        int64_t shape[TEENY_ONNX_MAX_DIMS];
        teeny_onnx_output(m, i, &name, NULL, &ndim, shape);
        printf("%s{\"name\": ", i ? ", " : "");
        json_str(name);
        printf(", \"dtype\": \"%s\", \"shape\": ", output_dtype(m, i));
        json_shape(ndim, shape);
        printf(", \"file\": ");
        json_str(r->files[i]);
        printf(", \"written\": %s}", r->written && r->files[i][0] ? "true" : "false");
    }
    printf("]");
    if (r->ran) {
        const run_stats *st = &r->stats;
        printf(", \"warmup\": %d, \"warmup_ms\": [", o->warmup);
        for (int i = 0; i < o->warmup; i++)
            printf("%s%.6f", i ? ", " : "", r->warm[i]);
        printf("], \"repeat\": %d, \"min_ms\": %.6f, \"median_ms\": %.6f, \"mean_ms\": %.6f, \"p90_ms\": %.6f, "
               "\"p99_ms\": %.6f, \"max_ms\": %.6f, \"throughput_per_s\": %.3f, \"launches_per_pass\": %d",
               o->repeat, st->min, st->median, st->mean, st->p90, st->p99, st->max,
               st->mean > 0 ? 1000.0 * (double)teeny_onnx_batch(m) / st->mean : 0.0, r->launches);
    }
    if (r->ran && o->profile) {
        const profile_data *p = &r->prof;
        printf(", \"profile\": {\"passes\": %d, \"span_ms\": %.6f, \"kernel_ms\": %.6f, \"idle_ms\": %.6f, "
               "\"launches\": %ld, \"kernels\": ", o->repeat, p->span_ms, p->kernel_ms, p->span_ms - p->kernel_ms,
               p->launches);
        json_table(&p->kernels);
        printf(", \"nodes\": ");
        json_table(&p->nodes);
        printf("}");
    }
    printf("}\n");
}
