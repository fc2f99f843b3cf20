/*
 * internal.h -- what the library's sources share and applications never
 * see, one private header per layer, and the context that holds each
 * layer's state:
 *   core/core.h        errors, logging, devices, simulator, helpers, env
 *   tune/tune.h        device profiles (ctx->tune, ctx->caps)
 *   io/io.h            regular-file reads and crash-safe writes
 *   program/program.h  builds, cache, launches, probes, recorder, profiler
 *                      (ctx->prog)
 *   tensor/tensor.h    tensors, the workspace pool (ctx->ws), argument checks
 * The op table (ops/ops.h) and the graph (graph/graph_internal.h) include
 * this. Names are teeny__ (internal).
 */
#ifndef TEENY_INTERNAL_H
#define TEENY_INTERNAL_H

#include "core/core.h"
#include "io/io.h"
#include "program/program.h"
#include "tensor/tensor.h"
#include "tune/tune.h"

/* The context: core's fields (device.c, status.c, simulator.c) and one
 * struct per layer above, each defined by its layer's header. */
struct teeny_ctx {
    int refs;         /* 1 for the handle + 1 per live tensor */
    int handle_alive; /* teeny_ctx_destroy not yet called */
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    teeny_device_info info;
    int tf32;                 /* teeny_ctx_set_tf32 */
    teeny__device_caps caps;  /* what the device profiles are matched on (device.c) */
    int kernel_stores;        /* simulator workaround: fill and upload with kernels (set in simulator.c) */
    int known_compiler;       /* the compiler takes TEENY_HINTS (device.c) */
    int impl_caches_kernels;  /* the implementation keeps compiled kernels itself: no disk copy (device.c) */
    teeny__test_hooks hooks;  /* the test hooks (core/test_hooks.h): set by the tests only */
    teeny__release_fn release_hooks[TEENY__RELEASE_HOOKS]; /* run at destruction, newest first */
    int n_release_hooks;
    char err[TEENY_ERR_CAP];
    /* the layers above core */
    teeny__tune tune;          /* the device profile and the kernel variant (tune/tune.h) */
    int work_group_size;       /* default 1-D work-group size: the profile's within the device's maximum (tune.c) */
    teeny__program_state prog; /* program/program.h */
    teeny__workspace ws;       /* tensor/tensor.h */
};

#endif
