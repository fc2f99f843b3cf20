/*
 * teeny-run -- run an ONNX model on an OpenCL device, as onnxruntime's
 * perf_test and trtexec do: time it, profile it, write its outputs.
 *
 * Usage: teeny-run MODEL.onnx [--input NAME=FILE.npy ...] [--output-dir DIR]
 *                  [--device SPEC] [--batch N] [--seed N] [--warmup N] [--repeat K]
 *                  [--profile] [--json]
 *        teeny-run --info MODEL.onnx [--batch N] [--device SPEC] [--json]
 *
 * Inputs: a .npy file ('<f4', or '<i4' for class labels and integer
 * operands) per --input, at most one per name, each naming one of the
 * model's declared inputs (else the error lists them); every input the
 * plan needs and no file gives is filled with seeded random values
 * (--seed, default 1; float inputs uniform in [-1, 1), int32 class labels
 * 0 or 1: see onnx_random_value in onnx_run.h). Integer operands the
 * importer takes as constants (shapes, axes) need a file.
 *
 * Timing: --warmup N runs first, reported apart (default 1: the first run
 * pays for the kernels' first launch), then --repeat K timed ones
 * (default 1); each run is the forward pass waited for on the host's
 * clock. It reports min, median, mean, p90 and p99 (nearest rank), max,
 * the throughput (batch x 1000 / mean ms: inferences a second), the
 * import and compile times and the device. --profile then runs K more
 * passes back to back under the library's profiler (teeny_profile_begin
 * and _end with TEENY_PROFILE=2, whose per-launch lines it reads through
 * teeny_log_set) and prints per kernel: launches, device time, share, and
 * the device's idle time before its launches (the host's gaps), slowest
 * first. The profiler names kernels, not graph nodes.
 *
 * Outputs: with --output-dir DIR (created with its parents once the model
 * has been imported), each graph
 * output is written as DIR/<file>.npy (fp32, C order; a scalar as [1]),
 * the file name being the output's name with every byte other than
 * A-Z a-z 0-9 . _ - made '_' and a leading '.' made '_' ("/l2/probs:0" ->
 * "_l2_probs_0.npy"); a name that an earlier output already took (compared
 * without case) gets "_<output index>". The names, the directory and its
 * writability are checked before the model is compiled. Without
 * --output-dir nothing is written.
 *
 * --info prints the model's declared inputs and outputs (symbolic
 * dimensions by name), then what the plan takes and gives at the batch,
 * and runs nothing. --json prints one JSON object instead of the text.
 *
 * Exit status: 0 on success, 1 when the model cannot be imported, compiled
 * or run or an output cannot be written (the library's message on
 * stderr), 2 for a bad command line (named on stderr).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "onnx_info.h"
#include "onnx_run.h"

#define MAX_INPUTS 64
#define FILE_CAP 224

enum { O_INPUT, O_OUTPUT_DIR, O_DEVICE, O_BATCH, O_SEED, O_WARMUP, O_REPEAT, O_PROFILE, O_JSON, O_INFO, O_COUNT };

static const cli_opt OPTS[] = {
    [O_INPUT] = {"--input", "NAME=FILE.npy", "the value of input NAME ('<f4' or '<i4' .npy); once per name.\n"
                                             "Inputs not given get seeded random values (see --seed)"},
    [O_OUTPUT_DIR] = {"--output-dir", "DIR", "write each output as DIR/<name>.npy (DIR created with its parents;\n"
                                             "names made safe as file names). Without it nothing is written"},
    [O_DEVICE] = {"--device", "SPEC", "the OpenCL device: cpu, gpu, pocl, nvidia, P:D, a part of its name\n"
                                      "(default: TEENY_DEVICE, else the first GPU, else the first CPU)"},
    [O_BATCH] = {"--batch", "N", "the batch the model is imported and run at, 1..2147483647\n"
                                 "(default: the first input's first dimension; 1 where it is symbolic)"},
    [O_SEED] = {"--seed", "N", "the random inputs' seed, 0..2147483647 (default 1): float inputs uniform\n"
                               "in [-1, 1), int32 class labels 0 or 1, the same values on every device"},
    [O_WARMUP] = {"--warmup", "N", "runs before the timed ones, 0..1000000 (default 1)"},
    [O_REPEAT] = {"--repeat", "K", "timed runs, 1..1000000 (default 1): min, median, mean, p90, p99,\n"
                                   "max, throughput"},
    [O_PROFILE] = {"--profile", NULL, "then K runs back to back under the profiler: per kernel launches,\n"
                                      "device time and the device's idle time before them, slowest first"},
    [O_JSON] = {"--json", NULL, "one JSON object on standard output instead of the text"},
    [O_INFO] = {"--info", NULL, "list the declared inputs and outputs and what the plan takes and\n"
                                "gives at the batch; run nothing"},
    [O_COUNT] = {NULL, NULL, NULL},
};

static const cli_spec SPEC = {
    "teeny-run",
    "MODEL.onnx [--input NAME=FILE.npy ...] [--output-dir DIR] [--device SPEC] [--batch N]\n"
    "          [--seed N] [--warmup N] [--repeat K] [--profile] [--json]\n"
    "--info MODEL.onnx [--batch N] [--device SPEC] [--json]",
    "Run an ONNX model on an OpenCL device: time it (import, compile, each forward pass),\n"
    "profile it, and write its outputs.",
    OPTS,
    "Exit status: 0 ok; 1 the model cannot be imported, compiled or run, or an output\n"
    "cannot be written; 2 a bad command line.",
};

typedef struct {
    const char *model, *out_dir, *spec;
    char *names[MAX_INPUTS], *files[MAX_INPUTS];
    int n_in, batch, seed, warmup, repeat, profile, json, info;
} options;

static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->warmup = 1;
    o->repeat = 1;
    for (int i = 1; i < argc; i++) {
        const char *v;
        char what[600];
        int k = cli_next(&SPEC, argc, argv, &i, &v);
        if (k == CLI_EXIT_OK || k == CLI_EXIT_USAGE)
            return k == CLI_EXIT_OK ? 0 : 2;
        if (k == CLI_ARG && o->model) {
            snprintf(what, sizeof what, "a second model \"%.200s\" (the model is \"%.200s\"; one per run)", v, o->model);
            return cli_fail(&SPEC, what);
        }
        if (k == CLI_ARG) {
            o->model = v;
        } else if (k == O_INPUT) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1]) {
                snprintf(what, sizeof what, "--input \"%.200s\": give NAME=FILE.npy", v);
                return cli_fail(&SPEC, what);
            }
            int len = (int)(eq - v);
            for (int j = 0; j < o->n_in; j++)
                if ((int)strlen(o->names[j]) == len && !strncmp(o->names[j], v, (size_t)len)) {
                    snprintf(what, sizeof what, "--input %.*s given twice (%s=%s and %.200s)", len, v, o->names[j],
                             o->files[j], v);
                    return cli_fail(&SPEC, what);
                }
            if (o->n_in == MAX_INPUTS)
                return cli_fail(&SPEC, "more than 64 --input");
            o->names[o->n_in] = strndup(v, (size_t)len);
            o->files[o->n_in++] = (char *)eq + 1;
        } else if (k == O_OUTPUT_DIR) {
            o->out_dir = v;
        } else if (k == O_DEVICE) {
            o->spec = v;
        } else if (k == O_BATCH || k == O_SEED || k == O_WARMUP || k == O_REPEAT) {
            int lo = k == O_BATCH ? 1 : k == O_REPEAT ? 1 : 0, hi = k == O_BATCH || k == O_SEED ? 2147483647 : 1000000;
            int *dst = k == O_BATCH ? &o->batch : k == O_SEED ? &o->seed : k == O_WARMUP ? &o->warmup : &o->repeat;
            if (!args_int(SPEC.prog, OPTS[k].name, v, lo, hi, dst))
                return 2;
        } else {
            *(k == O_PROFILE ? &o->profile : k == O_JSON ? &o->json : &o->info) = 1;
        }
    }
    if (!o->model)
        return cli_fail(&SPEC, "no model given");
    return -1;
}

/* ---- output files ---- */

/* mkdir -p dir: 1, or a message and 0. */
static int make_dir(const char *dir)
{
    char path[4096];
    struct stat sb;
    if (!*dir || snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        fprintf(stderr, "teeny-run: --output-dir \"%s\": %s\n", dir, *dir ? "path too long" : "empty");
        return 0;
    }
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p)
            continue;
        char c = *p;
        *p = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "teeny-run: --output-dir %s: cannot create %s: %s\n", dir, path, strerror(errno));
            return 0;
        }
        *p = c;
        if (!c)
            break;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "teeny-run: --output-dir %s: not a directory\n", dir);
        return 0;
    }
    snprintf(path, sizeof path, "%s/.teeny-run.%ld.probe", dir, (long)getpid());
    FILE *f = fopen(path, "wx");
    if (!f) {
        fprintf(stderr, "teeny-run: --output-dir %s: cannot write there: %s\n", dir, strerror(errno));
        return 0;
    }
    fclose(f);
    remove(path);
    return 1;
}

/* Output i's file name (see the banner) into files[i], unique among files[0..i). */
static void safe_file_name(const char *name, int i, char (*files)[FILE_CAP])
{
    char base[FILE_CAP - 24];
    size_t n = 0;
    for (const char *p = name; *p && n < sizeof base - 1; p++, n++) {
        char c = *p;
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                 (c == '.' && n > 0);
        base[n] = ok ? c : '_';
    }
    base[n] = 0;
    if (!n)
        snprintf(base, sizeof base, "output");
    snprintf(files[i], FILE_CAP, "%s.npy", base);
    for (int tries = 0;; tries++) {
        int taken = 0;
        for (int j = 0; j < i && !taken; j++)
            taken = !strcasecmp(files[j], files[i]);
        if (!taken)
            return;
        snprintf(files[i], FILE_CAP, tries ? "%s_%d_%d.npy" : "%s_%d.npy", base, i, tries);
    }
}

/* Every output's file name, and each path checked: not a directory or
 * anything else that is not a regular file. 1, or a message and 0. */
static int plan_files(const teeny_onnx_model *m, const char *dir, char (*files)[FILE_CAP])
{
    for (int i = 0; i < teeny_onnx_output_count(m); i++) {
        const char *name;
        char path[4400];
        struct stat sb;
        teeny_onnx_output(m, i, &name, NULL, NULL, NULL);
        safe_file_name(name, i, files);
        snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", files[i]);
        if (dir && lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
            fprintf(stderr, "teeny-run: output %s would be written to %s, which exists and is not a file\n", name, path);
            return 0;
        }
    }
    return 1;
}

static teeny_status write_outputs(teeny_ctx *ctx, const onnx_run_result *r, const char *dir,
                                  char (*files)[FILE_CAP])
{
    teeny_status st = TEENY_OK;
    for (int i = 0; i < r->n && st == TEENY_OK; i++) {
        char path[4400];
        int64_t one = 1, *shape = r->ndim[i] ? r->shape[i] : &one, n = 1;
        teeny_tensor *t = NULL;
        for (int k = 0; k < r->ndim[i]; k++)
            n *= r->shape[i][k];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (n == 0) {
            fprintf(stderr, "teeny-run: output %s is empty; not written\n", r->names[i]);
            files[i][0] = 0;
            continue;
        }
        if ((st = teeny_tensor_create(ctx, r->ndim[i] ? r->ndim[i] : 1, shape, &t)) == TEENY_OK &&
            (st = teeny_tensor_write(t, r->data[i], (size_t)n)) == TEENY_OK)
            st = teeny_npy_save(t, path);
        if (st != TEENY_OK)
            fprintf(stderr, "teeny-run: writing %s: %s: %s\n", path, teeny_status_name(st), teeny_last_error(ctx));
        teeny_tensor_destroy(t);
    }
    return st;
}

/* ---- inputs ---- */

/* Load FILE.npy as a run input named name (host copy; freed by the caller). */
static teeny_status load_input(teeny_ctx *ctx, const char *name, const char *path, onnx_run_input *in)
{
    teeny_tensor *t = NULL;
    teeny_status st = teeny_npy_load(ctx, path, &t);
    if (st != TEENY_OK)
        return st;
    int64_t n = teeny_tensor_numel(t);
    void *data = malloc((size_t)n * 4 + 1);
    in->name = name;
    in->ndim = teeny_tensor_ndim(t);
    for (int i = 0; i < in->ndim; i++)
        in->shape[i] = teeny_tensor_dim(t, i);
    in->dtype = TEENY_ONNX_FLOAT;
    if (!data)
        st = TEENY_ERR_NOMEM;
    else if (teeny_tensor_read(t, data, (size_t)n) != TEENY_OK) {
        in->dtype = TEENY_ONNX_INT32; /* an '<i4' file */
        st = teeny_tensor_read_i32(t, data, (size_t)n);
    }
    in->data = data;
    teeny_tensor_destroy(t);
    return st;
}

/* ---- statistics and the profile ---- */

typedef struct {
    double min, median, mean, p90, p99, max;
} run_stats;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* p-th percentile by nearest rank of n sorted values */
static double rank(const double *t, int n, double p)
{
    int k = (int)ceil(p / 100.0 * n);
    return t[k < 1 ? 0 : k > n ? n - 1 : k - 1];
}

static run_stats stats_of(double *t, int n)
{
    run_stats s;
    double sum = 0;
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    for (int i = 0; i < n; i++)
        sum += t[i];
    s.min = t[0];
    s.max = t[n - 1];
    s.median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    s.mean = sum / n;
    s.p90 = rank(t, n, 90);
    s.p99 = rank(t, n, 99);
    return s;
}

typedef struct {
    char name[96];
    long launches;
    double ms, idle_ms;
} kernel_row;

typedef struct {
    kernel_row *rows;
    int n, cap, broken;
    long launches;
    double kernel_ms, idle_ms, span_ms;
} profile_data;

/* The library's log sink while the profile ends: TEENY_PROFILE=2's
 * per-launch lines ("profile: launch I NAME N items MS ms gap GAP ms")
 * summed per kernel; other warnings and errors still reach stderr. */
static void profile_sink(teeny_log_level level, const char *msg, void *user)
{
    profile_data *p = user;
    char name[96];
    int index;
    long long items;
    double ms, gap;
    if (sscanf(msg, "profile: launch %d %95s %lld items %lf ms gap %lf ms", &index, name, &items, &ms, &gap) != 5) {
        if (level >= TEENY_LOG_WARN && strncmp(msg, "profile: ", 9))
            fprintf(stderr, "teenycl %s: %s\n", level == TEENY_LOG_WARN ? "warn" : "error", msg);
        return;
    }
    int k = 0;
    while (k < p->n && strcmp(p->rows[k].name, name))
        k++;
    if (k == p->n) {
        if (p->n == p->cap) {
            int cap = p->cap ? 2 * p->cap : 32;
            kernel_row *grown = realloc(p->rows, (size_t)cap * sizeof *grown);
            if (!grown) {
                p->broken = 1;
                return;
            }
            p->rows = grown;
            p->cap = cap;
        }
        memset(&p->rows[p->n], 0, sizeof *p->rows);
        snprintf(p->rows[p->n++].name, sizeof p->rows->name, "%s", name);
    }
    p->rows[k].launches++;
    p->rows[k].ms += ms;
    p->rows[k].idle_ms += gap;
    p->launches++;
    p->kernel_ms += ms;
    p->idle_ms += gap;
}

static int cmp_kernel(const void *a, const void *b)
{
    const kernel_row *x = a, *y = b;
    return (x->ms < y->ms) - (x->ms > y->ms);
}

/* runs forward passes back to back under the profiler into *p. */
static teeny_status profile_runs(onnx_session *s, int runs, profile_data *p)
{
    const char *was = getenv("TEENY_PROFILE");
    char saved[16] = "";
    teeny_status st = TEENY_OK;
    memset(p, 0, sizeof *p);
    if (!s->plan)
        return TEENY_OK;
    if (was)
        snprintf(saved, sizeof saved, "%s", was);
    if ((st = teeny_profile_begin(s->ctx)) != TEENY_OK)
        return st;
    for (int r = 0; r < runs && st == TEENY_OK; r++)
        st = teeny_plan_forward(s->plan);
    setenv("TEENY_PROFILE", "2", 1);
    teeny_log_set(profile_sink, p);
    teeny_status end = teeny_profile_end(s->ctx, &p->span_ms, NULL);
    teeny_log_set(NULL, NULL);
    if (was)
        setenv("TEENY_PROFILE", saved, 1);
    else
        unsetenv("TEENY_PROFILE");
    if (st == TEENY_OK && (st = end) == TEENY_OK && p->broken)
        st = TEENY_ERR_NOMEM;
    qsort(p->rows, (size_t)p->n, sizeof *p->rows, cmp_kernel);
    return st;
}

/* ---- the report ---- */

typedef struct {
    const options *o;
    const char *device;
    onnx_session *s;
    const onnx_io_rows *declared;  /* --info */
    char (*files)[FILE_CAP];       /* per output; "" when not written */
    double *warm, *times;
    run_stats stats;
    int launches;                  /* per forward pass */
    profile_data prof;
    int ran, written;
} report;

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
    *ndim = 0;
    *file = NULL;
    teeny_onnx_input(r->s->model, i, name, &node, &dt);
    teeny_graph_node_info(teeny_onnx_graph(r->s->model), node, NULL, ndim, shape);
    *dtype = dt == TEENY_ONNX_FLOAT ? "float" : "int32";
    for (int k = 0; k < r->o->n_in; k++)
        if (!strcmp(r->o->names[k], *name))
            *file = r->o->files[k];
}

static void print_text(const report *r)
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
        printf(r->declared ? "  %-7s %-*s  %-6s %s" : "%-11s %-*s  %-6s %s", "output", width, name, "float",
               shape_text);
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
    printf("%-32s %13s %10s %10s %7s %14s\n", "kernel (slowest first)", "launches/pass", "ms/pass", "ms/launch", "share",
           "idle ms/pass");
    for (int k = 0; k < p->n; k++) {
        const kernel_row *row = &p->rows[k];
        printf("%-32s %13.1f %10.4f %10.4f %6.1f%% %14.4f\n", row->name, (double)row->launches / o->repeat,
               row->ms / o->repeat, row->ms / (double)row->launches, p->kernel_ms > 0 ? 100 * row->ms / p->kernel_ms : 0,
               row->idle_ms / o->repeat);
    }
    printf("(idle: the device's idle time just before the kernel's launches, waiting for the host)\n");
}

static void print_json(const report *r)
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
        printf(", \"shape\": ");
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
               "\"launches\": %ld, \"kernels\": [", o->repeat, p->span_ms, p->kernel_ms, p->span_ms - p->kernel_ms,
               p->launches);
        for (int k = 0; k < p->n; k++) {
            printf("%s{\"name\": ", k ? ", " : "");
            json_str(p->rows[k].name);
            printf(", \"launches\": %ld, \"ms\": %.6f, \"idle_before_ms\": %.6f}", p->rows[k].launches, p->rows[k].ms,
                   p->rows[k].idle_ms);
        }
        printf("]}");
    }
    printf("}\n");
}

/* ---- the run ---- */

static int fail(teeny_ctx *ctx, teeny_status st, const char *what)
{
    fprintf(stderr, "teeny-run: %s%s%s: %s\n", what, *what ? ": " : "", teeny_status_name(st), onnx_run_error(ctx));
    return 1;
}

/* Every --input names a declared graph input: 1, or a message and 0. */
static int inputs_known(const options *o, const onnx_io_rows *rows)
{
    for (int i = 0; i < o->n_in; i++) {
        int found = 0;
        for (int k = 0; k < rows->n && !found; k++)
            found = !rows->rows[k].is_output && !strcmp(rows->rows[k].name, o->names[i]);
        if (found)
            continue;
        fprintf(stderr, "teeny-run: --input %s: %s has no input of that name; its inputs:", o->names[i], o->model);
        for (int k = 0, n = 0; k < rows->n; k++)
            if (!rows->rows[k].is_output)
                fprintf(stderr, "%s %s", n++ ? "," : "", rows->rows[k].name);
        fprintf(stderr, "\n");
        return 0;
    }
    return 1;
}

/* --info: the declared inputs and outputs, then what the plan takes and gives. */
static int show_info(teeny_ctx *ctx, const options *o, int n_in, const onnx_run_input *in, report *r)
{
    teeny_status st = onnx_session_import(ctx, o->model, o->batch, n_in, in, r->s);
    if (st != TEENY_OK) {
        printf("model       %s\ndeclared in the model:\n", o->model);
        onnx_io_print(r->declared, "  ", stdout);
        return fail(ctx, st, "cannot import it");
    }
    r->files = calloc((size_t)teeny_onnx_output_count(r->s->model) + 1, sizeof *r->files);
    if (!r->files || !plan_files(r->s->model, NULL, r->files))
        return 1;
    if (o->json)
        print_json(r);
    else
        print_text(r);
    return 0;
}

/* Warm-up, timed runs, the profile. */
static teeny_status run_passes(report *r)
{
    const options *o = r->o;
    teeny_status st = TEENY_OK;
    double ms;
    r->warm = calloc((size_t)o->warmup + 1, sizeof *r->warm);
    r->times = calloc((size_t)o->repeat, sizeof *r->times);
    if (!r->warm || !r->times)
        return TEENY_ERR_NOMEM;
    for (int i = 0; i < o->warmup && st == TEENY_OK; i++)
        st = onnx_session_forward(r->s, &r->warm[i]);
    for (int i = 0; i < o->repeat && st == TEENY_OK; i++) {
        st = onnx_session_forward(r->s, &ms);
        r->times[i] = ms;
    }
    if (st != TEENY_OK)
        return st;
    r->stats = stats_of(r->times, o->repeat);
    if (r->s->plan)
        teeny_plan_launches(r->s->plan, &r->launches, NULL);
    if (o->profile)
        st = profile_runs(r->s, o->repeat, &r->prof);
    return st;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    setvbuf(stdout, NULL, _IOLBF, 0);

    teeny_ctx *ctx = NULL;
    teeny_status st = teeny_ctx_create(o.spec, &ctx);
    if (st != TEENY_OK) {
        fprintf(stderr, "teeny-run: %s: %s\n", teeny_status_name(st), teeny_last_error(NULL));
        return 1;
    }
    onnx_run_input in[MAX_INPUTS];
    onnx_session s;
    onnx_run_result out;
    onnx_io_rows declared;
    report r;
    memset(in, 0, sizeof in);
    memset(&s, 0, sizeof s);
    memset(&out, 0, sizeof out);
    memset(&r, 0, sizeof r);
    r.o = &o;
    r.s = &s;
    r.device = teeny_ctx_device_name(ctx);
    rc = 0;
    if ((st = onnx_io_read(ctx, o.model, &declared)) != TEENY_OK)
        rc = fail(ctx, st, "");
    else if (!inputs_known(&o, &declared))
        rc = 1;
    r.declared = o.info ? &declared : NULL;
    for (int i = 0; i < o.n_in && !rc; i++)
        if ((st = load_input(ctx, o.names[i], o.files[i], &in[i])) != TEENY_OK) {
            fprintf(stderr, "teeny-run: --input %s=%s: %s: %s\n", o.names[i], o.files[i], teeny_status_name(st),
                    teeny_last_error(ctx));
            rc = 1;
        }
    if (!rc && o.info) {
        rc = show_info(ctx, &o, o.n_in, in, &r);
    } else if (!rc) {
        if ((st = onnx_session_import(ctx, o.model, o.batch, o.n_in, in, &s)) != TEENY_OK)
            rc = fail(ctx, st, "");
        else if ((o.out_dir && !make_dir(o.out_dir)) ||
                 !(r.files = calloc((size_t)teeny_onnx_output_count(s.model) + 1, sizeof *r.files)) ||
                 !plan_files(s.model, o.out_dir, r.files))
            rc = 1;
        else if ((st = onnx_session_compile(&s)) != TEENY_OK)
            rc = fail(ctx, st, "compiling");
        else if ((st = onnx_session_inputs(&s, o.n_in, in, 1, (uint64_t)o.seed)) != TEENY_OK)
            rc = fail(ctx, st, "writing the inputs");
        else if ((st = run_passes(&r)) != TEENY_OK)
            rc = fail(ctx, st, "running");
        else if ((st = onnx_session_outputs(&s, &out)) != TEENY_OK)
            rc = fail(ctx, st, "reading the outputs");
        else if (o.out_dir && write_outputs(ctx, &out, o.out_dir, r.files) != TEENY_OK)
            rc = 1;
        if (!rc) {
            r.ran = 1;
            r.written = o.out_dir != NULL;
            if (o.json)
                print_json(&r);
            else
                print_text(&r);
        }
    }
    onnx_run_result_free(&out);
    onnx_session_close(&s);
    for (int i = 0; i < o.n_in; i++) {
        free((void *)in[i].data);
        free(o.names[i]);
    }
    free(declared.rows);
    free(r.files);
    free(r.warm);
    free(r.times);
    free(r.prof.rows);
    teeny_ctx_destroy(ctx);
    return rc;
}
