/*
 * fuzz_lib.h -- what the fuzz targets (tests/fuzz/fuzz_<format>.c, built
 * with libFuzzer by `make fuzz`), the seed-corpus maker and the `fuzz`
 * check suite share: seed files for each loader, and one call per loader
 * that feeds it a byte string through a temp file.
 */
#ifndef TEENY_FUZZ_LIB_H
#define TEENY_FUZZ_LIB_H

#include <stddef.h>

#include "teenycl.h"

typedef enum { FUZZ_SAFETENSORS, FUZZ_NPY, FUZZ_IDX, FUZZ_CHECKPOINT, FUZZ_N_FORMATS } fuzz_format;

/* "safetensors", "npy", "idx", "checkpoint". */
const char *fuzz_format_name(fuzz_format f);

/* Write the seeds of format f as files "<dir>/<name>" (dir exists). ctx
 * makes the device tensors the writers read. Returns how many, or -1 with
 * a message on stderr. */
int fuzz_make_seeds(teeny_ctx *ctx, fuzz_format f, const char *dir);

/* Write data to a temp file of this process and load it with format f's
 * public loader(s), walking whatever loads (every tensor read, labels
 * checked). ctx is needed for npy and checkpoint. Returns the status; on
 * an error, *msg points at the loader's message (never NULL). */
teeny_status fuzz_load(teeny_ctx *ctx, fuzz_format f, const unsigned char *data, size_t size, const char **msg);

/* Remove this process's temp file. */
void fuzz_cleanup(void);

#endif
