/*
 * make_corpus.c -- writes the seed corpora of the fuzz targets:
 * <dir>/<format>/ for each loader (see fuzz_lib.c for what the seeds are)
 * and <dir>/onnx/ for the importer (onnx_seeds.c: one crafted model per
 * op; make fuzz adds tests/onnx/'s models). Seeds are made by the
 * library's own writers on the default device and by protobuf-c, so no
 * binary file is kept in the tree. Usage: make-fuzz-corpus DIR
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_lib.h"
#include "onnx_seeds.h"

int main(int argc, char **argv)
{
    teeny_ctx *ctx = NULL;
    char dir[1024];
    int total = 0;
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    if (teeny_ctx_create(NULL, &ctx) != TEENY_OK) {
        fprintf(stderr, "make-fuzz-corpus: %s\n", teeny_last_error(NULL));
        return 1;
    }
    if (mkdir(argv[1], 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "make-fuzz-corpus: cannot create %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    for (int f = 0; f < FUZZ_N_FORMATS; f++) {
        int n;
        snprintf(dir, sizeof dir, "%s/%s", argv[1], fuzz_format_name((fuzz_format)f));
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "make-fuzz-corpus: cannot create %s: %s\n", dir, strerror(errno));
            return 1;
        }
        if ((n = fuzz_make_seeds(ctx, (fuzz_format)f, dir)) < 0)
            return 1;
        total += n;
    }
    snprintf(dir, sizeof dir, "%s/onnx", argv[1]);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "make-fuzz-corpus: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int n = onnx_make_seeds(dir);
    if (n < 0)
        return 1;
    total += n;
    teeny_ctx_destroy(ctx);
    printf("make-fuzz-corpus: %d seed files under %s\n", total, argv[1]);
    return 0;
}
