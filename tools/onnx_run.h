/*
 * onnx_run.h -- the one run path of an imported ONNX model that
 * build/teeny-run, the ONNX node tests (make check-onnx) and the onnx
 * check suite share: import with every given input as a feed, compile an
 * inference plan at the model's batch, write the run-time inputs (the
 * given values, or seeded random ones), run the forward pass (each run
 * timed to the device's finish), read every graph output as fp32. A
 * float16 input or output is computed in fp32: its random values are
 * rounded to half (what a '<f2' file could hold), and its output values
 * are rounded to half (round to nearest even, what its '<f2' file holds
 * and ONNX Runtime's float16 output would be).
 *
 * onnx_run does it all in one call; teeny-run takes the steps one by one
 * (onnx_session_*) to time import and compile, check the output file
 * names before anything runs, and warm up, repeat and profile.
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
    int is_bool;               /* int32 0/1 values from a bool file (messages say "bool") */
    int is_half;               /* float values (exact) from a float16 file (messages say "float16") */
} onnx_run_input;

typedef struct {
    int n;
    char **names;              /* per output */
    int *ndim;
    int64_t (*shape)[TEENY_ONNX_MAX_DIMS];
    float **data;              /* a float16 output's rounded to half */
    int *declared;             /* per output: the element type the model declares (10: float16), 0: none */
} onnx_run_result;

/* Run the model at path (batch 0: the model's). On success *out holds
 * every output (free with onnx_run_result_free) and *median_ms the median
 * forward time over repeat >= 1 runs (each waits for the device). On
 * failure the status, with the message in teeny_last_error(ctx). Every
 * input the plan needs must be given. */
teeny_status onnx_run(teeny_ctx *ctx, const char *path, int64_t batch, int n_in, const onnx_run_input *in,
                      int repeat, onnx_run_result *out, double *median_ms);
void onnx_run_result_free(onnx_run_result *r);
/* The message of the last failure (the library's, or the runner's own for
 * inputs that are missing or do not fit). */
const char *onnx_run_error(teeny_ctx *ctx);

/* A run input's element type as messages name it: "float", "float16",
 * "int32", "int64" or "bool". */
const char *onnx_run_input_type(const onnx_run_input *f);
/* "float [2, 3]" into buf (cap bytes; returned): an element type and a
 * shape ("[]" for rank 0). */
const char *onnx_run_type_shape(char *buf, size_t cap, const char *type, int ndim, const int64_t *shape);

/* ---- the same, step by step ---- */

typedef struct {
    teeny_ctx *ctx;
    teeny_onnx_model *model;
    teeny_plan *plan;          /* NULL when the import folded every output (nothing runs) */
    double import_ms, compile_ms;
    int frozen_params;         /* compile with teeny_plan_options.frozen_params (import sets 1) */
} onnx_session;

/* Import (timed: s->import_ms). The given inputs are the import's feeds. */
teeny_status onnx_session_import(teeny_ctx *ctx, const char *path, int64_t batch, int n_in, const onnx_run_input *in,
                                 onnx_session *s);
/* Compile an inference plan at the model's batch (timed: s->compile_ms). */
teeny_status onnx_session_compile(onnx_session *s);
/* Write every input the plan needs: its value from in (by name), else,
 * with random set, seeded random values (onnx_random_value), else an
 * error naming the input. */
teeny_status onnx_session_inputs(onnx_session *s, int n_in, const onnx_run_input *in, int random, uint64_t seed);
/* One forward pass, waited for; *ms the host's clock around it. */
teeny_status onnx_session_forward(onnx_session *s, double *ms);
/* Every output as fp32 (free with onnx_run_result_free). */
teeny_status onnx_session_outputs(onnx_session *s, onnx_run_result *out);
/* Frees the plan and the model (not the context); s may be zeroed. */
void onnx_session_close(onnx_session *s);

/* Value k of plan input `input` (its index among teeny_onnx_input's)
 * under seed: float inputs uniform in [-1, 1) (multiples of 2^-23), int32
 * inputs (class labels) 0 or 1, each with probability 1/2. Counter-based
 * (splitmix64's mix of a per-input stream start, from seed and input, plus
 * k + 1 steps), so a value depends on the seed, the input's place and k
 * only, never on the order of the calls. */
float onnx_random_value(uint64_t seed, int input, int64_t k, teeny_onnx_dtype dtype);

#endif
