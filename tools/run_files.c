/*
 * run_files.c -- teeny-run's files: the output directory (created with its
 * parents and probed for writing before the model is compiled), each
 * output's safe file name (teeny-run.c's banner: bytes other than
 * A-Z a-z 0-9 . _ - made '_', collisions resolved without case) and its
 * .npy, and the --input .npy files read into host copies.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

/* mkdir -p dir: 1, or a message and 0. */
int run_make_dir(const char *dir)
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
int run_plan_files(const teeny_onnx_model *m, const char *dir, char (*files)[FILE_CAP])
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

teeny_status run_write_outputs(teeny_ctx *ctx, const onnx_run_result *r, const char *dir,
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
teeny_status run_load_input(teeny_ctx *ctx, const char *name, const char *path, onnx_run_input *in)
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
