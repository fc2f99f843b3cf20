/*
 * onnx_run.h -- the one run path of an imported ONNX model that
 * build/teeny-run, the ONNX node tests (make check-onnx) and the onnx
 * check suite share: import with every given input as a feed, compile an
 * inference plan at the model's batch, write the run-time inputs, run the
 * forward pass (repeat times, timed), read every graph output as fp32.
 */
#ifndef TEENY_ONNX_RUN_H
#define TEENY_ONNX_RUN_H

#include "teenycl_onnx.h"

typedef struct {
    const char *name;
    teeny_onnx_dtype dtype;
    int ndim;
    int64_t shape[TEENY_ONNX_MAX_DIMS];
    const void *data;          /* float, int32_t or int64_t values per dtype */
} onnx_run_input;

typedef struct {
    int n;
    char **names;              /* per output */
    int *ndim;
    int64_t (*shape)[TEENY_ONNX_MAX_DIMS];
    float **data;
} onnx_run_result;

/* Run the model at path (batch 0: the model's). On success *out holds
 * every output (free with onnx_run_result_free) and *median_ms the median
 * forward time over repeat >= 1 runs (each waits for the device). On
 * failure the status, with the message in teeny_last_error(ctx). */
teeny_status onnx_run(teeny_ctx *ctx, const char *path, int64_t batch, int n_in, const onnx_run_input *in,
                      int repeat, onnx_run_result *out, double *median_ms);
void onnx_run_result_free(onnx_run_result *r);
/* The message of onnx_run's last failure (the library's, or the runner's
 * own for inputs that are missing or do not fit). */
const char *onnx_run_error(teeny_ctx *ctx);

#endif
