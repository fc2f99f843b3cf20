/*
 * fuzz_onnx.c -- libFuzzer target for the ONNX importer: each input is a
 * model file, loaded from memory (external data from tests/onnx/, so
 * mutated locations exercise the directory checks) and, when it loads,
 * destroyed. Seeds: the small models of tests/onnx/ (make fuzz copies
 * them). An error must come with a message; a crash, a sanitizer report,
 * a hang or a leak is the bug being looked for.
 */
#include <stdint.h>
#include <stdlib.h>

#include "teenycl_onnx.h"

static teeny_ctx *fuzz_ctx;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void cleanup(void)
{
    teeny_ctx_destroy(fuzz_ctx);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (teeny_ctx_create(NULL, &fuzz_ctx) != TEENY_OK)
        abort(); /* no device: nothing to fuzz */
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    teeny_onnx_model *m = NULL;
    p.base_dir = "tests/onnx";
    teeny_status st = teeny_onnx_load_memory(fuzz_ctx, data, size, &p, &m);
    if (st != TEENY_OK && !teeny_last_error(fuzz_ctx)[0])
        abort(); /* an error without a message */
    if ((st == TEENY_OK) != (m != NULL))
        abort();
    teeny_onnx_destroy(m);
    return 0;
}
