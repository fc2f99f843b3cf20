/*
 * clwrap.h -- the one thin layer every OpenCL call and host allocation of
 * the library goes through.
 *
 * Each call is counted per thread by kind (create, build, set-arg, enqueue,
 * blocking, query, release), which lets tests assert what a step does, and a
 * test can make the k-th call fail (the way SQLite's test harness fails the
 * k-th malloc) to prove that every failure path returns a status, leaks
 * nothing and leaves the context usable. Releases are counted but never
 * failed: cleanup must always succeed.
 *
 * Use:  TEENY_CL_TRY(clFinish, ctx->queue);           needs ctx, st, cleanup:
 *       mem = TEENY_CLO(clCreateBuffer, &err, c, flags, size, NULL);
 *       err = TEENY_CL(clSetKernelArg, k, 0, sizeof m, &m);
 */
#ifndef TEENY_CLWRAP_H
#define TEENY_CLWRAP_H

#include <stddef.h>
#include "teenycl.h"

/* Kinds of call, what tests count. */
typedef enum {
    TEENY__KIND_QUERY,
    TEENY__KIND_CREATE,
    TEENY__KIND_BUILD,
    TEENY__KIND_SETARG,
    TEENY__KIND_ENQUEUE,   /* enqueues that do not wait */
    TEENY__KIND_BLOCKING,  /* calls where the host waits for the device */
    TEENY__KIND_RELEASE,
    TEENY__KIND_ALLOC,     /* host allocations */
    TEENY__KIND_COUNT
} teeny__call_kind;

/* Every wrapped call: name, kind. */
#define TEENY__CALLS(XX)                                    \
    XX(clGetPlatformIDs, QUERY)                             \
    XX(clGetPlatformInfo, QUERY)                            \
    XX(clGetDeviceIDs, QUERY)                               \
    XX(clGetDeviceInfo, QUERY)                              \
    XX(clGetContextInfo, QUERY)                             \
    XX(clGetCommandQueueInfo, QUERY)                        \
    XX(clGetMemObjectInfo, QUERY)                           \
    XX(clGetProgramInfo, QUERY)                             \
    XX(clGetProgramBuildInfo, QUERY)                        \
    XX(clGetEventProfilingInfo, QUERY)                      \
    XX(clGetEventInfo, QUERY)                               \
    XX(clGetKernelWorkGroupInfo, QUERY)                     \
    XX(clCreateContext, CREATE)                             \
    XX(clCreateCommandQueue, CREATE)                        \
    XX(clCreateBuffer, CREATE)                              \
    XX(clCreateProgramWithSource, CREATE)                   \
    XX(clCreateProgramWithBinary, CREATE)                   \
    XX(clCreateKernel, CREATE)                              \
    XX(clRetainContext, CREATE)                             \
    XX(clRetainCommandQueue, CREATE)                        \
    XX(clRetainDevice, CREATE)                              \
    XX(clRetainMemObject, CREATE)                           \
    XX(clBuildProgram, BUILD)                               \
    XX(clSetKernelArg, SETARG)                              \
    XX(clEnqueueNDRangeKernel, ENQUEUE)                     \
    XX(clEnqueueWriteBuffer, ENQUEUE)                       \
    XX(clEnqueueCopyBuffer, ENQUEUE)                        \
    XX(clEnqueueFillBuffer, ENQUEUE)                        \
    XX(clEnqueueReadBufferAsync, ENQUEUE)                   \
    XX(clFlush, ENQUEUE)                                    \
    XX(clEnqueueReadBuffer, BLOCKING)                       \
    XX(clFinish, BLOCKING)                                  \
    XX(clWaitForEvents, BLOCKING)                           \
    XX(clReleaseContext, RELEASE)                           \
    XX(clReleaseCommandQueue, RELEASE)                      \
    XX(clReleaseDevice, RELEASE)                            \
    XX(clReleaseMemObject, RELEASE)                         \
    XX(clReleaseProgram, RELEASE)                           \
    XX(clReleaseKernel, RELEASE)                            \
    XX(clReleaseEvent, RELEASE)                             \
    XX(malloc, ALLOC)

typedef enum {
#define TEENY__CALL_ID(name, kind) TEENY__ID_##name,
    TEENY__CALLS(TEENY__CALL_ID)
#undef TEENY__CALL_ID
    TEENY__ID_COUNT
} teeny__call_id;

/* The error a failed (injected) OpenCL call returns. */
#define TEENY__FAULT_ERR CL_OUT_OF_RESOURCES

/* Count one call; nonzero when fault injection fails this one. */
int teeny__hook(teeny__call_id id);

/* A non-blocking read counts as an enqueue, not a blocking call (a
 * function, not a macro, so its name survives macro expansion). */
static inline cl_int clEnqueueReadBufferAsync(cl_command_queue q, cl_mem buf, cl_bool blocking, size_t offset,
                                              size_t size, void *ptr, cl_uint n_wait, const cl_event *wait,
                                              cl_event *event)
{
    return clEnqueueReadBuffer(q, buf, blocking, offset, size, ptr, n_wait, wait, event);
}

/* cl_int-returning call. */
#define TEENY_CL(fn, ...) (teeny__hook(TEENY__ID_##fn) ? TEENY__FAULT_ERR : fn(__VA_ARGS__))
/* Object-returning call whose last argument is cl_int *errcode_ret. */
#define TEENY_CLO(fn, errp, ...) \
    (teeny__hook(TEENY__ID_##fn) ? (*(errp) = TEENY__FAULT_ERR, (void *)0) : (void *)fn(__VA_ARGS__, errp))
/* Releases: counted, never failed. */
#define TEENY_CL_RELEASE(fn, obj) \
    do { if (obj) { (void)teeny__hook_release(TEENY__ID_##fn); (void)fn(obj); } } while (0)
void teeny__hook_release(teeny__call_id id);

/* Call fn; on failure record "fn failed: CL_NAME" in ctx, set st and jump
 * to cleanup. Needs teeny_ctx *ctx, teeny_status st and a cleanup: label. */
#define TEENY_CL_TRY(fn, ...)                                               \
    do {                                                                    \
        cl_int teeny__e = TEENY_CL(fn, __VA_ARGS__);                        \
        if (teeny__e != CL_SUCCESS) {                                       \
            st = teeny__cl_error(ctx, teeny__e, #fn);                       \
            goto cleanup;                                                   \
        }                                                                   \
    } while (0)

/* The same for an expression that already went through TEENY_CL and
 * returns a cl_int; name says which call it was. */
#define TEENY_CL_CHECK(expr, name)                                          \
    do {                                                                    \
        cl_int teeny__e = (expr);                                           \
        if (teeny__e != CL_SUCCESS) {                                       \
            st = teeny__cl_error(ctx, teeny__e, name);                      \
            goto cleanup;                                                   \
        }                                                                   \
    } while (0)

/* Host allocation through the hook (NULL under an injected fault). */
void *teeny__malloc(size_t n);
void *teeny__calloc(size_t n, size_t size);
void teeny__free(void *p);
/* teeny__free on each of the n pointers in ps, in order. */
void teeny__free_each(int n, void *const *ps);
/* teeny__free on each argument, in order: TEENY__FREE_ALL(a, b, c). */
#define TEENY__FREE_ALL(...) \
    teeny__free_each((int)(sizeof((void *[]){__VA_ARGS__}) / sizeof(void *)), (void *[]){__VA_ARGS__})
/* A copy of the string s through teeny__malloc (NULL when that fails). */
char *teeny__strdup(const char *s);

/* ---- test controls (internal; tests link the static library) ---- */
/* Fail the k-th hooked call from now on (1-based, one-shot); 0 turns off. */
void teeny__fault_arm(long k);
/* Whether the armed fault has fired since it was armed. */
int teeny__fault_fired(void);
/* Zero this thread's counters. */
void teeny__calls_reset(void);
/* Calls of one kind on this thread since the last reset. */
long teeny__calls_kind(teeny__call_kind kind);
/* Calls of one function on this thread since the last reset. */
long teeny__calls_id(teeny__call_id id);
/* All hooked (failable) calls since the last reset. */
long teeny__calls_total(void);

/* "CL_OUT_OF_RESOURCES" etc. */
const char *teeny__cl_error_name(cl_int err);

#endif
