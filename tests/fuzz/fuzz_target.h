/*
 * fuzz_target.h -- the body of every libFuzzer target: FUZZ_FORMAT names
 * the loader (tests/fuzz/fuzz_<format>.c define it and include this). One
 * OpenCL context per process, made before the first input. A loader may
 * return any status, but an error must come with a message; a crash, a
 * sanitizer report, a hang or a leak is the bug being looked for.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_lib.h"

static teeny_ctx *fuzz_ctx;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (teeny_ctx_create(NULL, &fuzz_ctx) != TEENY_OK)
        abort(); /* no device: nothing to fuzz */
    atexit(fuzz_cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *msg = NULL;
    teeny_status st = fuzz_load(fuzz_ctx, FUZZ_FORMAT, data, size, &msg);
    if (st != TEENY_OK && (!msg || !msg[0]))
        abort(); /* an error without a message */
    return 0;
}
