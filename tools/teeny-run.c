/*
 * teeny-run -- run an ONNX model once (or --repeat K times, printing the
 * median forward time) on an OpenCL device and write every graph output as
 * DIR/<output name>.npy (fp32, C order; a scalar as [1]).
 *
 * Usage: teeny-run MODEL.onnx --input NAME=FILE.npy [--input ...]
 *                  --output-dir DIR [--device SPEC] [--batch N] [--repeat K]
 *
 * Inputs are .npy files of '<f4' or '<i4' values (class labels, or integer
 * operands the model takes as constants). The exit status is 0 on success,
 * 1 when the model cannot be imported or run (the importer's message on
 * stderr), 2 for bad arguments.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx_run.h"

#define MAX_INPUTS 64

static int usage(const char *argv0, const char *why)
{
    if (why)
        fprintf(stderr, "%s: %s\n", argv0, why);
    fprintf(stderr, "usage: %s MODEL.onnx --input NAME=FILE.npy [--input ...] --output-dir DIR\n"
                    "       [--device SPEC] [--batch N] [--repeat K]\n", argv0);
    return 2;
}

/* A whole decimal number in [lo, hi]; 0 on anything else. */
static int parse_count(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

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

static teeny_status write_outputs(teeny_ctx *ctx, const onnx_run_result *r, const char *dir)
{
    teeny_status st = TEENY_OK;
    for (int i = 0; i < r->n && st == TEENY_OK; i++) {
        char path[4096];
        int64_t one = 1, *shape = r->ndim[i] ? r->shape[i] : &one;
        teeny_tensor *t = NULL;
        if (strchr(r->names[i], '/') || !strcmp(r->names[i], "..") || !strcmp(r->names[i], ".")) {
            fprintf(stderr, "teeny-run: output name \"%s\" is not a file name\n", r->names[i]);
            return TEENY_ERR_ARG;
        }
        snprintf(path, sizeof path, "%s/%s.npy", dir, r->names[i]);
        int64_t n = 1;
        for (int k = 0; k < r->ndim[i]; k++)
            n *= r->shape[i][k];
        if (n == 0) {
            fprintf(stderr, "teeny-run: output %s is empty; not written\n", r->names[i]);
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

int main(int argc, char **argv)
{
    const char *model = NULL, *out_dir = NULL, *spec = NULL;
    char *names[MAX_INPUTS], *files[MAX_INPUTS];
    long long batch = 0, repeat = 1;
    int n_in = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--input") && v) {
            char *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1])
                return usage(argv[0], "--input wants NAME=FILE.npy");
            if (n_in == MAX_INPUTS)
                return usage(argv[0], "too many --input");
            names[n_in] = argv[++i];
            *strchr(names[n_in], '=') = 0;
            files[n_in++] = eq + 1;
        } else if (!strcmp(a, "--output-dir") && v) {
            out_dir = argv[++i];
        } else if (!strcmp(a, "--device") && v) {
            spec = argv[++i];
        } else if (!strcmp(a, "--batch") && v) {
            if (!parse_count(argv[++i], 1, 2147483647LL, &batch))
                return usage(argv[0], "--batch wants a whole number >= 1");
        } else if (!strcmp(a, "--repeat") && v) {
            if (!parse_count(argv[++i], 1, 1000000, &repeat))
                return usage(argv[0], "--repeat wants a whole number 1..1000000");
        } else if (a[0] != '-' && !model) {
            model = a;
        } else {
            return usage(argv[0], NULL);
        }
    }
    if (!model || !out_dir)
        return usage(argv[0], !model ? "no model given" : "--output-dir is required");
    struct stat sb;
    if (stat(out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return usage(argv[0], "--output-dir must be an existing directory");

    teeny_ctx *ctx = NULL;
    teeny_status st = teeny_ctx_create(spec, &ctx);
    if (st != TEENY_OK) {
        fprintf(stderr, "teeny-run: %s: %s\n", teeny_status_name(st), teeny_last_error(NULL));
        return 1;
    }
    onnx_run_input in[MAX_INPUTS];
    memset(in, 0, sizeof in);
    for (int i = 0; i < n_in && st == TEENY_OK; i++)
        if ((st = load_input(ctx, names[i], files[i], &in[i])) != TEENY_OK)
            fprintf(stderr, "teeny-run: --input %s=%s: %s: %s\n", names[i], files[i], teeny_status_name(st),
                    teeny_last_error(ctx));
    onnx_run_result r;
    double ms = 0.0;
    if (st == TEENY_OK) {
        st = onnx_run(ctx, model, batch, n_in, in, (int)repeat, &r, &ms);
        if (st != TEENY_OK)
            fprintf(stderr, "teeny-run: %s: %s\n", teeny_status_name(st), onnx_run_error(ctx));
    }
    if (st == TEENY_OK) {
        if (repeat > 1)
            printf("median forward time over %lld runs: %.3f ms\n", repeat, ms);
        st = write_outputs(ctx, &r, out_dir);
        if (st == TEENY_OK)
            printf("wrote %d output%s to %s\n", r.n, r.n == 1 ? "" : "s", out_dir);
        onnx_run_result_free(&r);
    }
    for (int i = 0; i < n_in; i++)
        free((void *)in[i].data);
    teeny_ctx_destroy(ctx);
    return st == TEENY_OK ? 0 : 1;
}
