/*
 * clwrap.c -- per-thread call counters and the k-th-call fault injector
 * behind every OpenCL call and host allocation (see clwrap.h).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const teeny__call_kind teeny__kind_of[TEENY__ID_COUNT] = {
#define TEENY__CALL_KIND(name, kind) TEENY__KIND_##kind,
    TEENY__CALLS(TEENY__CALL_KIND)
#undef TEENY__CALL_KIND
};

static _Thread_local long calls_by_id[TEENY__ID_COUNT];
static _Thread_local long calls_hooked; /* failable calls since reset */
static _Thread_local long fault_countdown; /* 0: off */
static _Thread_local int fault_fired;

int teeny__hook(teeny__call_id id)
{
    calls_by_id[id]++;
    calls_hooked++;
    if (fault_countdown > 0 && --fault_countdown == 0) {
        fault_fired = 1;
        return 1;
    }
    return 0;
}

void teeny__hook_release(teeny__call_id id)
{
    calls_by_id[id]++;
}

void *teeny__malloc(size_t n)
{
    if (teeny__hook(TEENY__ID_malloc))
        return NULL;
    return malloc(n ? n : 1);
}

char *teeny__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = teeny__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void *teeny__calloc(size_t n, size_t size)
{
    if (teeny__hook(TEENY__ID_malloc))
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void teeny__free(void *p)
{
    free(p);
}

void teeny__free_each(int n, void *const *ps)
{
    for (int i = 0; i < n; i++)
        teeny__free(ps[i]);
}

void teeny__fault_arm(long k)
{
    fault_countdown = k > 0 ? k : 0;
    fault_fired = 0;
}

int teeny__fault_fired(void)
{
    return fault_fired;
}

void teeny__calls_reset(void)
{
    for (int i = 0; i < TEENY__ID_COUNT; i++)
        calls_by_id[i] = 0;
    calls_hooked = 0;
}

long teeny__calls_kind(teeny__call_kind kind)
{
    long n = 0;
    for (int i = 0; i < TEENY__ID_COUNT; i++)
        if (teeny__kind_of[i] == kind)
            n += calls_by_id[i];
    return n;
}

long teeny__calls_id(teeny__call_id id)
{
    return calls_by_id[id];
}

long teeny__calls_total(void)
{
    return calls_hooked;
}

const char *teeny__cl_error_name(cl_int err)
{
    switch (err) {
#define TEENY__CLE(name) case name: return #name;
    TEENY__CLE(CL_SUCCESS)
    TEENY__CLE(CL_DEVICE_NOT_FOUND)
    TEENY__CLE(CL_DEVICE_NOT_AVAILABLE)
    TEENY__CLE(CL_COMPILER_NOT_AVAILABLE)
    TEENY__CLE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    TEENY__CLE(CL_OUT_OF_RESOURCES)
    TEENY__CLE(CL_OUT_OF_HOST_MEMORY)
    TEENY__CLE(CL_PROFILING_INFO_NOT_AVAILABLE)
    TEENY__CLE(CL_MEM_COPY_OVERLAP)
    TEENY__CLE(CL_BUILD_PROGRAM_FAILURE)
    TEENY__CLE(CL_MAP_FAILURE)
    TEENY__CLE(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    TEENY__CLE(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    TEENY__CLE(CL_COMPILE_PROGRAM_FAILURE)
    TEENY__CLE(CL_LINK_PROGRAM_FAILURE)
    TEENY__CLE(CL_INVALID_VALUE)
    TEENY__CLE(CL_INVALID_DEVICE_TYPE)
    TEENY__CLE(CL_INVALID_PLATFORM)
    TEENY__CLE(CL_INVALID_DEVICE)
    TEENY__CLE(CL_INVALID_CONTEXT)
    TEENY__CLE(CL_INVALID_QUEUE_PROPERTIES)
    TEENY__CLE(CL_INVALID_COMMAND_QUEUE)
    TEENY__CLE(CL_INVALID_HOST_PTR)
    TEENY__CLE(CL_INVALID_MEM_OBJECT)
    TEENY__CLE(CL_INVALID_BINARY)
    TEENY__CLE(CL_INVALID_BUILD_OPTIONS)
    TEENY__CLE(CL_INVALID_PROGRAM)
    TEENY__CLE(CL_INVALID_PROGRAM_EXECUTABLE)
    TEENY__CLE(CL_INVALID_KERNEL_NAME)
    TEENY__CLE(CL_INVALID_KERNEL_DEFINITION)
    TEENY__CLE(CL_INVALID_KERNEL)
    TEENY__CLE(CL_INVALID_ARG_INDEX)
    TEENY__CLE(CL_INVALID_ARG_VALUE)
    TEENY__CLE(CL_INVALID_ARG_SIZE)
    TEENY__CLE(CL_INVALID_KERNEL_ARGS)
    TEENY__CLE(CL_INVALID_WORK_DIMENSION)
    TEENY__CLE(CL_INVALID_WORK_GROUP_SIZE)
    TEENY__CLE(CL_INVALID_WORK_ITEM_SIZE)
    TEENY__CLE(CL_INVALID_GLOBAL_OFFSET)
    TEENY__CLE(CL_INVALID_EVENT_WAIT_LIST)
    TEENY__CLE(CL_INVALID_EVENT)
    TEENY__CLE(CL_INVALID_OPERATION)
    TEENY__CLE(CL_INVALID_BUFFER_SIZE)
    TEENY__CLE(CL_INVALID_GLOBAL_WORK_SIZE)
    TEENY__CLE(CL_INVALID_PROPERTY)
#undef TEENY__CLE
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "CL_UNKNOWN_ERROR";
    }
}
