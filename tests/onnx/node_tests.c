/*
 * node_tests.c -- ONNX's own backend test cases (Debian's libonnx-testdata:
 * data/{node,pytorch-converted,pytorch-operator,simple}/<case>/model.onnx
 * with test_data_set_N/input_K.pb and output_K.pb TensorProtos) through
 * the importer and teeny-run's run path (tools/onnx_run.c), on the
 * default device, compared with ONNX's tolerance: |got - want| <= 1e-7 +
 * 1e-3 |want| (NaN matches NaN). A case whose import fails with
 * TEENY_ERR_UNSUPPORTED is listed as unsupported with the reason, never
 * counted as passed; any other failure, and any value out of tolerance, is
 * a failure. Prints a table per op (the case's distinct ops, Constant
 * aside) and exits 1 on any failure.
 *
 * Usage: onnx-node-tests [--also DIR]... DATA_DIR [SUBSTRING]
 *   SUBSTRING: only cases whose path has it. --also DIR: another data
 *   directory whose node/ cases are run too (make check-onnx: the
 *   Attention cases of the onnx==1.22.0 wheel, which install-deps.sh
 *   unpacks); one that holds no case is an error (exit 1), never a
 *   silently shorter table.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx/onnx_internal.h"
#include "../../tools/onnx_run.h"

#define MAX_IO 32

typedef struct {
    char op[96];
    int passed, failed, unsupported;
    char reason[200];
} op_row;

static op_row rows[512];
static int n_rows;
static char failures[64][400];
static int n_failures;

static op_row *row_for(const char *op)
{
    for (int i = 0; i < n_rows; i++)
        if (!strcmp(rows[i].op, op))
            return &rows[i];
    if (n_rows == (int)(sizeof rows / sizeof *rows))
        return &rows[n_rows - 1];
    snprintf(rows[n_rows].op, sizeof rows[n_rows].op, "%s", op);
    return &rows[n_rows++];
}

static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    *size = buf ? (size_t)n : 0;
    fclose(f);
    return buf;
}

/* A .pb TensorProto as a host constant (and its name). */
static teeny_status load_pb(teeny_ctx *ctx, const char *path, ox_const *c, char *name, size_t cap)
{
    size_t size;
    unsigned char *data = slurp(path, &size);
    ProtobufCMessage *msg = NULL;
    if (!data)
        return TEENY_ERR_IO;
    teeny_status st = teeny__ox_unpack(ctx, &onnx__tensor_proto__descriptor, data, size, &msg);
    if (st == TEENY_OK) {
        const Onnx__TensorProto *t = (const Onnx__TensorProto *)msg;
        snprintf(name, cap, "%s", t->name ? t->name : "");
        st = teeny__ox_tensor_load(ctx, t, NULL, path, c);
    }
    teeny__ox_free_unpacked(msg);
    free(data);
    return st;
}

/* The model's distinct op types (Constant aside) and graph input names. */
static int describe(teeny_ctx *ctx, const char *path, char *ops, size_t cap, char inputs[MAX_IO][256], int *n_in)
{
    size_t size;
    unsigned char *data = slurp(path, &size);
    ProtobufCMessage *msg = NULL;
    const char *seen[64];
    int n_seen = 0;
    *n_in = 0;
    ops[0] = 0;
    if (!data || teeny__ox_unpack(ctx, &onnx__model_proto__descriptor, data, size, &msg) != TEENY_OK) {
        free(data);
        return 0;
    }
    const Onnx__GraphProto *g = ((const Onnx__ModelProto *)msg)->graph;
    for (size_t i = 0; g && i < g->n_node; i++) {
        const char *op = g->node[i]->op_type ? g->node[i]->op_type : "?";
        int dup = !strcmp(op, "Constant") && g->n_node > 1;
        for (int k = 0; k < n_seen && !dup; k++)
            dup = !strcmp(seen[k], op);
        if (!dup && n_seen < 64)
            seen[n_seen++] = op;
    }
    for (int k = 0; k < n_seen && k < 3; k++)
        snprintf(ops + strlen(ops), cap - strlen(ops), "%s%s", k ? "+" : "", seen[k]);
    if (n_seen > 3)
        snprintf(ops, cap, "(function-expanded, %d ops)", n_seen);
    for (size_t i = 0; g && i < g->n_input && *n_in < MAX_IO; i++) {
        int init = 0;
        for (size_t k = 0; k < g->n_initializer && !init; k++)
            init = !strcmp(g->initializer[k]->name ? g->initializer[k]->name : "", g->input[i]->name);
        if (!init)
            snprintf(inputs[(*n_in)++], 256, "%s", g->input[i]->name ? g->input[i]->name : "");
    }
    teeny__ox_free_unpacked(msg);
    free(data);
    return 1;
}

/* Compare one output; a message on mismatch. */
static int compare(const ox_const *want, const onnx_run_result *r, int i, char *msg, size_t cap)
{
    if (r->ndim[i] != want->shape.ndim || memcmp(r->shape[i], want->shape.d, sizeof(int64_t) * (size_t)r->ndim[i])) {
        snprintf(msg, cap, "output %d: shape differs (rank %d vs %d)", i, r->ndim[i], want->shape.ndim);
        return 0;
    }
    for (int64_t k = 0; k < want->numel; k++) {
        double w = teeny__ox_get_f(want, k), g = r->data[i][k];
        if ((isnan(w) && isnan(g)) || (w == g) || fabs(g - w) <= 1e-7 + 1e-3 * fabs(w))
            continue;
        snprintf(msg, cap, "output %d element %lld: got %.9g, want %.9g", i, (long long)k, g, w);
        return 0;
    }
    return 1;
}

/* One data set of a case: 1 passed, 0 failed, -1 unsupported (msg: why). */
static int run_set(teeny_ctx *ctx, const char *model, const char *set, char inputs[MAX_IO][256], int n_model_in,
                   char *msg, size_t cap)
{
    ox_const in_c[MAX_IO], out_c[MAX_IO];
    char names[MAX_IO][256], path[4096], name[256];
    onnx_run_input in[MAX_IO];
    int n_in = 0, n_out = 0, verdict = 1;
    teeny_status st = TEENY_OK;
    for (; n_in < MAX_IO; n_in++) {
        snprintf(path, sizeof path, "%.4000s/input_%d.pb", set, n_in);
        if ((st = load_pb(ctx, path, &in_c[n_in], names[n_in], sizeof names[n_in])) != TEENY_OK)
            break;
        if (!names[n_in][0] && n_in < n_model_in)
            snprintf(names[n_in], sizeof names[n_in], "%s", inputs[n_in]);
        const ox_const *c = &in_c[n_in];
        in[n_in] = (onnx_run_input){names[n_in], c->type == OX_F32 ? TEENY_ONNX_FLOAT : TEENY_ONNX_INT64,
                                    c->shape.ndim, {0}, c->data, c->onnx_type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL,
                                    c->onnx_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16};
        memcpy(in[n_in].shape, c->shape.d, sizeof c->shape.d);
    }
    if (st != TEENY_ERR_IO) {
        snprintf(msg, cap, "input %d: %s", n_in, teeny_last_error(ctx));
        verdict = -1;
    }
    for (; verdict == 1 && n_out < MAX_IO; n_out++) {
        snprintf(path, sizeof path, "%.4000s/output_%d.pb", set, n_out);
        if ((st = load_pb(ctx, path, &out_c[n_out], name, sizeof name)) != TEENY_OK)
            break;
    }
    if (verdict == 1 && st != TEENY_ERR_IO) {
        snprintf(msg, cap, "expected output %d: %s", n_out, teeny_last_error(ctx));
        verdict = -1;
    }
    onnx_run_result r;
    double ms;
    if (verdict == 1) {
        st = onnx_run(ctx, model, 0, n_in, in, 1, &r, &ms);
        if (st != TEENY_OK) {
            snprintf(msg, cap, "%s", onnx_run_error(ctx));
            verdict = st == TEENY_ERR_UNSUPPORTED ? -1 : 0;
        } else {
            if (r.n != n_out) {
                snprintf(msg, cap, "%d outputs, want %d", r.n, n_out);
                verdict = 0;
            }
            for (int i = 0; verdict == 1 && i < n_out; i++)
                verdict = compare(&out_c[i], &r, i, msg, cap);
            onnx_run_result_free(&r);
        }
    }
    for (int i = 0; i < n_in; i++)
        teeny__ox_const_free(&in_c[i]);
    for (int i = 0; i < n_out; i++)
        teeny__ox_const_free(&out_c[i]);
    return verdict;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_case(teeny_ctx *ctx, const char *dir, const char *name)
{
    char model[4096], ops[128], inputs[MAX_IO][256], msg[300] = "", set[4096];
    int n_in, verdict = -1, sets = 0;
    snprintf(model, sizeof model, "%.2000s/%.1000s/model.onnx", dir, name);
    if (!describe(ctx, model, ops, sizeof ops, inputs, &n_in))
        return; /* no model (real/: data.json only) */
    for (int k = 0; k < 16; k++) {
        struct stat sb;
        snprintf(set, sizeof set, "%.2000s/%.1000s/test_data_set_%d", dir, name, k);
        if (stat(set, &sb) != 0)
            break;
        sets++;
        verdict = run_set(ctx, model, set, inputs, n_in, msg, sizeof msg);
        if (verdict != 1)
            break;
    }
    if (!sets)
        return;
    op_row *row = row_for(ops);
    if (verdict == 1) {
        row->passed++;
    } else if (verdict == 0) {
        row->failed++;
        if (n_failures < 64)
            snprintf(failures[n_failures++], sizeof failures[0], "%.60s/%.60s: %.250s", dir, name, msg);
    } else {
        row->unsupported++;
        if (!row->reason[0]) {
            const char *why = strstr(msg, "): ");
            snprintf(row->reason, sizeof row->reason, "%s", why ? why + 3 : msg);
        }
    }
}

/* The cases of dir/<subdirs>, sorted, whose "<subdir>/<case>" has filter. */
static int run_dir(teeny_ctx *ctx, const char *data, const char *const *subdirs, size_t n_subdirs, const char *filter)
{
    int cases = 0;
    for (size_t d = 0; d < n_subdirs; d++) {
        char dir[4096];
        char *names[4096];
        int n = 0;
        snprintf(dir, sizeof dir, "%s/%s", data, subdirs[d]);
        DIR *dp = opendir(dir);
        for (struct dirent *e; dp && (e = readdir(dp)) && n < 4096;)
            if (e->d_name[0] != '.')
                names[n++] = strdup(e->d_name);
        if (dp)
            closedir(dp);
        qsort(names, (size_t)n, sizeof *names, name_cmp);
        for (int i = 0; i < n; i++) {
            char full[4200];
            snprintf(full, sizeof full, "%s/%s", subdirs[d], names[i]);
            if (!filter || strstr(full, filter))
                run_case(ctx, dir, names[i]);
            free(names[i]);
            cases++;
        }
    }
    return cases;
}

int main(int argc, char **argv)
{
    static const char *subdirs[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    const char *also[8];
    int n_also = 0, a = 1;
    teeny_ctx *ctx;
    for (; a + 1 < argc && !strcmp(argv[a], "--also") && n_also < 8; a += 2)
        also[n_also++] = argv[a + 1];
    if (a >= argc || !strcmp(argv[a], "--also")) {
        fprintf(stderr, "usage: %s [--also DIR]... DATA_DIR [SUBSTRING]\n", argv[0]);
        return 2;
    }
    const char *filter = a + 1 < argc ? argv[a + 1] : NULL;
    if (teeny_ctx_create(NULL, &ctx) != TEENY_OK) {
        fprintf(stderr, "%s\n", teeny_last_error(NULL));
        return 1;
    }
    printf("ONNX backend tests from %s on %s\n", argv[a], teeny_ctx_device_name(ctx));
    run_dir(ctx, argv[a], subdirs, sizeof subdirs / sizeof *subdirs, filter);
    int missing = 0;
    for (int i = 0; i < n_also; i++) {
        int n = run_dir(ctx, also[i], subdirs, 1, filter);
        printf("and %d node cases from %s\n", n, also[i]);
        if (!n) {
            fprintf(stderr, "onnx-node-tests: ERROR: %s/node holds no test case (tools/install-deps.sh onnx fetches "
                    "them)\n", also[i]);
            missing = 1;
        }
    }
    int passed = 0, failed = 0, unsupported = 0;
    printf("\n%-40s %6s %6s %11s  %s\n", "op", "passed", "failed", "unsupported", "reason (first case)");
    for (int i = 0; i < n_rows; i++) {
        const op_row *r = &rows[i];
        passed += r->passed;
        failed += r->failed;
        unsupported += r->unsupported;
        if (r->passed || r->failed)
            printf("%-40s %6d %6d %11d  %.110s\n", r->op, r->passed, r->failed, r->unsupported, r->reason);
    }
    printf("\nunsupported only:\n");
    for (int i = 0; i < n_rows; i++)
        if (!rows[i].passed && !rows[i].failed)
            printf("%-40s %6d %6d %11d  %.110s\n", rows[i].op, 0, 0, rows[i].unsupported, rows[i].reason);
    for (int i = 0; i < n_failures; i++)
        printf("FAILED %s\n", failures[i]);
    printf("\ncheck-onnx: %d passed, %d failed, %d skipped\n", passed, failed, unsupported);
    teeny_ctx_destroy(ctx);
    return failed || missing ? 1 : 0;
}
