/*
 * simulator.c -- workarounds for the oclgrind simulator, kept out of the
 * production paths behind one capability flag, ctx->kernel_stores, which
 * is set here and only here (teeny__sim_detect, at context creation).
 *
 * oclgrind 21.10's --uninitialized plugin replaces a buffer's whole shadow
 * with one the size of each host-side store (write, copy, fill) and marks
 * only a store at offset 0 correctly, so a store into a view, and any
 * fill, leave the buffer wrongly "uninitialized" (or wrongly clean).
 * Kernel stores are tracked per byte, so on the simulator the library
 * fills and uploads with kernels. Where the flag is read:
 *   tensor.c   teeny_tensor_write / _fill: teeny__sim_upload / teeny__fill
 *              instead of clEnqueueCopyBuffer / clEnqueueFillBuffer;
 *   launch.c   teeny__fill launches ew_fill (the "simulator path" section);
 *   tensor.c, record.c  a new buffer gets teeny__sim_buffer_born (below).
 * Tests may set the flag on a real device to cover the kernel path
 * (test_conformance.c). A leaf: this file calls nothing above status.c.
 */
#include <string.h>

#include "internal.h"

void teeny__sim_detect(teeny_ctx *ctx)
{
    ctx->kernel_stores = strstr(ctx->info.device_name, "Oclgrind") != NULL;
}

/* oclgrind 21.10 keeps a released buffer's shadow for the next buffer that
 * gets its slot (the --uninitialized plugin has no deallocation hook), so a
 * new buffer would inherit a stale shadow: "initialized" where the old one
 * was written, and untracked past the old one's size, where kernel stores
 * are dropped and later loads reported. One whole-buffer host store gives
 * the shadow the right size; NaN (an out-of-range index as int32) keeps a
 * read of never-written memory visible in the results, as the tests'
 * poisoned outputs do. Blocking: only the simulator takes this path. */
teeny_status teeny__sim_buffer_born(teeny_ctx *ctx, cl_mem buf, size_t bytes)
{
    teeny_status st = TEENY_OK;
    cl_uint *nan_words = teeny__malloc(bytes);
    if (!nan_words)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory initializing a %zu-byte buffer", bytes);
    for (size_t i = 0; i < bytes / 4; i++)
        nan_words[i] = 0x7fc00000u;
    TEENY_CL_TRY(clEnqueueWriteBuffer, ctx->queue, buf, CL_TRUE, 0, bytes, nan_words, 0, NULL, NULL);
cleanup:
    teeny__free(nan_words);
    return st;
}
