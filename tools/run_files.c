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
        int64_t n = 1;
        int half = r->declared[i] == TEENY_ONNX_FLOAT16;
        teeny_npy_info info = {half ? TEENY_NPY_F16 : TEENY_NPY_F32, r->ndim[i] ? r->ndim[i] : 1, {1}, 0, 0};
        for (int k = 0; k < r->ndim[i]; k++)
            n *= info.shape[k] = r->shape[i][k];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (n == 0) {
            fprintf(stderr, "teeny-run: output %s is empty; not written\n", r->names[i]);
            files[i][0] = 0;
            continue;
        }
        uint16_t *bits = half ? malloc((size_t)n * sizeof *bits) : NULL;
        if (half && !bits)
            st = TEENY_ERR_NOMEM;
        else if (half) /* the values were rounded to half already (onnx_run.c): exact */
            teeny_float_to_half(r->data[i], bits, (size_t)n);
        if (st == TEENY_OK)
            st = teeny_npy_write(ctx, path, &info, half ? (const void *)bits : (const void *)r->data[i]);
        if (st != TEENY_OK)
            fprintf(stderr, "teeny-run: writing %s: %s: %s\n", path, teeny_status_name(st),
                    st == TEENY_ERR_NOMEM ? "out of host memory" : teeny_last_error(ctx));
        free(bits);
    }
    return st;
}

/* ---- inputs ---- */

/* Load FILE.npy as a run input named name (host copy; freed by the
 * caller), at the file's own rank (a 0-d array is rank 0): '<f4' as
 * float, '<f2' as float (converted exactly; is_half set), '<i4' as int32, '<i8' as int64 (kept whole: the importer takes
 * int64 operands as they are, and onnx_run.c refuses a value outside
 * int32 for an int32 plan input), '|b1' as int32 0 or 1. Nothing is
 * left allocated on failure. */
teeny_status run_load_input(teeny_ctx *ctx, const char *name, const char *path, onnx_run_input *in)
{
    teeny_npy_info info, again;
    void *data = NULL;
    teeny_status st = teeny_npy_read(ctx, path, &info, NULL, 0);
    if (st != TEENY_OK)
        return st;
    int widen = info.dtype == TEENY_NPY_BOOL || info.dtype == TEENY_NPY_F16; /* read raw, then 4 bytes a value */
    data = malloc((widen ? (size_t)info.numel * 4 : info.bytes) + 1);
    unsigned char *raw = widen ? malloc(info.bytes + 1) : data;
    if (!data || !raw)
        st = TEENY_ERR_NOMEM;
    else if ((st = teeny_npy_read(ctx, path, &again, raw, info.bytes)) == TEENY_OK &&
             (again.dtype != info.dtype || again.bytes != info.bytes))
        st = TEENY_ERR_IO; /* the file changed between the two reads */
    else if (st == TEENY_OK && info.dtype == TEENY_NPY_BOOL)
        for (int64_t k = 0; k < info.numel; k++)
            ((int32_t *)data)[k] = raw[k];
    else if (st == TEENY_OK && info.dtype == TEENY_NPY_F16)
        teeny_half_to_float((const uint16_t *)(const void *)raw, data, (size_t)info.numel);
    if (raw != data)
        free(raw);
    if (st != TEENY_OK) {
        free(data);
        return st;
    }
    in->name = name;
    in->ndim = info.ndim;
    for (int i = 0; i < info.ndim; i++)
        in->shape[i] = info.shape[i];
    in->dtype = info.dtype == TEENY_NPY_F32 || info.dtype == TEENY_NPY_F16 ? TEENY_ONNX_FLOAT
              : info.dtype == TEENY_NPY_I64 ? TEENY_ONNX_INT64 : TEENY_ONNX_INT32;
    in->is_bool = info.dtype == TEENY_NPY_BOOL;
    in->is_half = info.dtype == TEENY_NPY_F16;
    in->data = data;
    return TEENY_OK;
}
