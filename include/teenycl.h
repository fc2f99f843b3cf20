/*
 * teenycl.h -- the whole public API of teenycl, a portable OpenCL compute
 * backend for small neural networks (batch normalization, grouped 2-D
 * convolution, attention) written in C11.
 *
 * Overview
 * --------
 * A teeny_ctx owns (or borrows) one OpenCL context, device and in-order
 * command queue. Tensors are fp32 (or int32 where stated) row-major arrays
 * in device buffers; a view is a contiguous sub-range of another tensor.
 * Op functions validate their arguments, enqueue kernels and return without
 * waiting, except the ones marked "host sync". Kernels are OpenCL C 1.2,
 * embedded in the library, built on first use for the device at hand and
 * cached in memory and on disk.
 *
 * Every function returns a teeny_status (0 is TEENY_OK); the details of a
 * failure (argument, shapes, OpenCL call and error name, build log) are read
 * with teeny_last_error(ctx). Bad input is rejected before anything is
 * enqueued and leaves every tensor unchanged.
 *
 * Example: one batch-norm training step on the default device.
 *
 *     teeny_ctx *ctx;
 *     if (teeny_ctx_create(NULL, &ctx) != TEENY_OK) {
 *         fprintf(stderr, "%s\n", teeny_last_error(NULL));
 *         return 1;
 *     }
 *     int64_t xs[4] = {8, 16, 32, 32}, cs[1] = {16};
 *     teeny_tensor *x, *y, *w, *b, *rm, *rv, *mean, *rstd;
 *     teeny_tensor_create(ctx, 4, xs, &x);      // likewise y (shape xs),
 *     teeny_tensor_create(ctx, 1, cs, &w);      // b, rm, rv, mean, rstd ([C])
 *     ...
 *     teeny_tensor_write(x, host_x, 8 * 16 * 32 * 32);
 *     teeny_tensor_fill(w, 1.0f); teeny_tensor_fill(b, 0.0f);
 *     teeny_tensor_fill(rm, 0.0f); teeny_tensor_fill(rv, 1.0f);
 *     teeny_status st = teeny_batchnorm_forward_train(ctx, x, w, b, rm, rv,
 *         0.1f, 1e-5f, y, mean, rstd);
 *     if (st != TEENY_OK)
 *         fprintf(stderr, "%s: %s\n", teeny_status_name(st), teeny_last_error(ctx));
 *     teeny_tensor_read(y, host_y, 8 * 16 * 32 * 32);   // waits for the queue
 *     ...
 *     teeny_tensor_destroy(x);  // ... every tensor, then
 *     teeny_ctx_destroy(ctx);
 *
 * Threads: a context, its tensors and graphs are used by one thread at a
 * time; different contexts may be used from different threads at once.
 */
#ifndef TEENYCL_H
#define TEENYCL_H

#include <stddef.h>
#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#ifdef __APPLE__
#include <OpenCL/cl.h>
#else
#include <CL/cl.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(TEENY_BUILDING_SHARED)
#define TEENY_API __declspec(dllexport)
#elif defined(__GNUC__)
#define TEENY_API __attribute__((visibility("default")))
#else
#define TEENY_API
#endif

/* The same MAJOR means the same ABI. */
#define TEENY_VERSION_MAJOR 0
#define TEENY_VERSION_MINOR 1
#define TEENY_VERSION_PATCH 0
#define TEENY_VERSION_HEX \
    (TEENY_VERSION_MAJOR * 10000 + TEENY_VERSION_MINOR * 100 + TEENY_VERSION_PATCH)

/* MAJOR*10000 + MINOR*100 + PATCH of the library actually linked. */
TEENY_API unsigned teeny_version(void);
/* "MAJOR.MINOR.PATCH"; static storage. */
TEENY_API const char *teeny_version_string(void);

/* ---- status codes ------------------------------------------------------- */

#define TEENY_STATUS_MAP(XX)                                                    \
    XX(OK,            0,  "success")                                           \
    XX(ERR_ARG,       1,  "invalid argument (NULL, zero or negative value)")   \
    XX(ERR_SHAPE,     2,  "tensor shapes or ranks do not match")               \
    XX(ERR_RANGE,     3,  "size beyond int32 indexing or device limits")       \
    XX(ERR_NO_DEVICE, 4,  "no matching OpenCL device")                         \
    XX(ERR_OPENCL,    5,  "an OpenCL call failed")                             \
    XX(ERR_BUILD,     6,  "kernel build failed")                               \
    XX(ERR_NOMEM,     7,  "host memory allocation failed")                     \
    XX(ERR_UNSUPPORTED, 8, "not supported on this device or configuration")   \
    XX(ERR_IO,        9,  "file input/output failed")                          \
    XX(ERR_FORMAT,    10, "malformed, truncated or corrupt data")              \
    XX(ERR_STATE,     11, "object is not in a state that allows this call")

typedef enum {
#define TEENY__STATUS_ENUM(name, value, text) TEENY_##name = value,
    TEENY_STATUS_MAP(TEENY__STATUS_ENUM)
#undef TEENY__STATUS_ENUM
    TEENY_STATUS_COUNT
} teeny_status;

/* "TEENY_ERR_SHAPE" etc.; static storage; "TEENY_UNKNOWN" for other values. */
TEENY_API const char *teeny_status_name(teeny_status st);
/* A short English description of the code; static storage. */
TEENY_API const char *teeny_status_str(teeny_status st);

/* ---- logging ------------------------------------------------------------ */

typedef enum { TEENY_LOG_DEBUG, TEENY_LOG_INFO, TEENY_LOG_WARN, TEENY_LOG_ERROR, TEENY_LOG_NONE } teeny_log_level;
typedef void (*teeny_log_fn)(teeny_log_level level, const char *msg, void *user_data);
/* Replace the process-wide log sink. NULL restores the default sink, which
 * writes to stderr the messages at or above TEENY_LOG=debug|info|warn|error
 * (default warn). */
TEENY_API void teeny_log_set(teeny_log_fn fn, void *user_data);

/* ---- context ------------------------------------------------------------ */

typedef struct teeny_ctx teeny_ctx;
typedef struct teeny_tensor teeny_tensor;

/* Create a context on the device that device_spec names:
 *   NULL or ""      TEENY_DEVICE, else the first GPU, else the first CPU
 *   "cpu", "gpu"    the first device of that type
 *   "pocl", "nvidia", "amd", "intel"   the first device of that platform/vendor
 *   "P:D"           platform P, device D (indices as teeny-info lists them)
 *   other text      the first device whose name contains it (any case)
 * An unknown spec fails with TEENY_ERR_NO_DEVICE; teeny_last_error(NULL)
 * then lists the devices that exist. Caller frees with teeny_ctx_destroy. */
TEENY_API teeny_status teeny_ctx_create(const char *device_spec, teeny_ctx **out);
/* Use an application's own OpenCL objects. q must be an in-order queue on
 * device d of context c. All three are retained and released, never
 * destroyed. Caller frees with teeny_ctx_destroy. */
TEENY_API teeny_status teeny_ctx_create_from_cl(cl_context c, cl_device_id d, cl_command_queue q, teeny_ctx **out);
/* NULL is a no-op. Tensors still alive keep the context's OpenCL objects
 * alive until the last of them is destroyed. */
TEENY_API void teeny_ctx_destroy(teeny_ctx *ctx);
/* The detailed message of the last failed call on ctx ("" if none);
 * NULL ctx: the calling thread's last context-less error. Borrowed; valid
 * until the next call on ctx (or, for NULL, on this thread). */
TEENY_API const char *teeny_last_error(const teeny_ctx *ctx);
/* Host sync: waits for all work enqueued on ctx. */
TEENY_API teeny_status teeny_ctx_finish(teeny_ctx *ctx);
/* Opt in (1) or out (0) of tensor-core math that rounds fp32 inputs to
 * tf32, where the device has it (like PyTorch's allow_tf32). Off by default.
 * Accepted on every device; a device without it keeps full fp32. */
TEENY_API teeny_status teeny_ctx_set_tf32(teeny_ctx *ctx, int enable);
/* The context's command queue; borrowed. */
TEENY_API cl_command_queue teeny_ctx_cl_queue(const teeny_ctx *ctx);
/* Profiling. Between begin and end every kernel the context launches
 * records an OpenCL profiling event; end (a host sync) waits for them and
 * reports the device time from the first kernel's start to the last
 * kernel's end in milliseconds, and how many kernels ran. Needs a queue
 * with CL_QUEUE_PROFILING_ENABLE (teeny_ctx_create makes one); otherwise
 * end returns TEENY_ERR_UNSUPPORTED. Either out pointer may be NULL. */
TEENY_API teeny_status teeny_profile_begin(teeny_ctx *ctx);
TEENY_API teeny_status teeny_profile_end(teeny_ctx *ctx, double *device_ms, int *kernels);
/* The device's name; borrowed, lives as long as ctx. */
TEENY_API const char *teeny_ctx_device_name(const teeny_ctx *ctx);

/* ---- device listing ----------------------------------------------------- */

typedef struct {
    int platform_index, device_index;
    char platform_name[128], device_name[128], vendor[128];
    char device_version[64], driver_version[64], opencl_c_version[64];
    int is_gpu, is_cpu;
    unsigned compute_units;
    size_t max_work_group_size;
    uint64_t local_mem_bytes, global_mem_bytes, max_alloc_bytes;
    int has_fp64, has_subgroups, has_nvidia_ptx;
    int is_default;          /* what teeny_ctx_create(NULL, ...) picks */
} teeny_device_info;

/* Fill up to max entries of out (out may be NULL when max is 0) and store
 * the number of devices present in *count. */
TEENY_API teeny_status teeny_devices_list(teeny_device_info *out, int max, int *count);
/* The device a context runs on. */
TEENY_API teeny_status teeny_ctx_device_info(const teeny_ctx *ctx, teeny_device_info *out);

/* ---- tensors ------------------------------------------------------------ */

/* Rank 1..5; every size >= 1; numel and byte size within int32 indexing and
 * the device's max allocation. Contents are uninitialized. Caller frees
 * with teeny_tensor_destroy. */
TEENY_API teeny_status teeny_tensor_create(teeny_ctx *ctx, int ndim, const int64_t *shape, teeny_tensor **out);
TEENY_API teeny_status teeny_tensor_create_i32(teeny_ctx *ctx, int ndim, const int64_t *shape, teeny_tensor **out);
/* fp32 tensor over an application's buffer at offset_bytes (a multiple of 4);
 * buf is retained and released, never destroyed. */
TEENY_API teeny_status teeny_tensor_wrap_cl(teeny_ctx *ctx, cl_mem buf, size_t offset_bytes, int ndim, const int64_t *shape, teeny_tensor **out);
/* A contiguous sub-range of base starting at element offset, with its own
 * shape; shares base's storage and keeps it alive. Caller frees with
 * teeny_tensor_destroy. */
TEENY_API teeny_status teeny_tensor_view(teeny_tensor *base, int64_t offset, int ndim, const int64_t *shape, teeny_tensor **out);
/* NULL is a no-op. */
TEENY_API void teeny_tensor_destroy(teeny_tensor *t);
/* count must equal numel. src is copied before return; the write is ordered
 * after work already enqueued and does not wait for it. */
TEENY_API teeny_status teeny_tensor_write(teeny_tensor *t, const float *src, size_t count);
/* Host sync: waits for queued work, then copies numel values into dst. */
TEENY_API teeny_status teeny_tensor_read(const teeny_tensor *t, float *dst, size_t count);
TEENY_API teeny_status teeny_tensor_write_i32(teeny_tensor *t, const int32_t *src, size_t count);
TEENY_API teeny_status teeny_tensor_read_i32(const teeny_tensor *t, int32_t *dst, size_t count);
/* Enqueue a fill of every element with value (fp32 tensors). */
TEENY_API teeny_status teeny_tensor_fill(teeny_tensor *t, float value);
TEENY_API int teeny_tensor_ndim(const teeny_tensor *t);
/* -1 for an axis out of range or NULL t. */
TEENY_API int64_t teeny_tensor_dim(const teeny_tensor *t, int axis);
TEENY_API int64_t teeny_tensor_numel(const teeny_tensor *t);
/* The buffer (borrowed) and the byte offset where the tensor starts. */
TEENY_API teeny_status teeny_tensor_cl(const teeny_tensor *t, cl_mem *buf, size_t *offset_bytes);

/* ---- element-wise helpers ----------------------------------------------- */

typedef enum { TEENY_ACT_NONE, TEENY_ACT_RELU, TEENY_ACT_SILU } teeny_act;
/* y = a + b, all the same numel; y may alias a or b. */
TEENY_API teeny_status teeny_add(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, teeny_tensor *y);
/* y = act(x); y may alias x. */
TEENY_API teeny_status teeny_activation_forward(teeny_ctx *ctx, teeny_act act, const teeny_tensor *x, teeny_tensor *y);
/* dx = dy * act'(x); dx may alias dy. */
TEENY_API teeny_status teeny_activation_backward(teeny_ctx *ctx, teeny_act act, const teeny_tensor *x, const teeny_tensor *dy, teeny_tensor *dx);

/* ---- batch normalization -------------------------------------------------
 * x is [N, C] (1-d) or [B, C, H, W] (2-d); every per-channel tensor is [C].
 * Statistics are over N (1-d) or B*H*W (2-d). The batch is normalized with
 * its biased variance; running_var is updated with the unbiased one, as in
 * PyTorch: running = (1 - momentum) * running + momentum * batch.
 * save_mean / save_rstd receive the batch mean and 1/sqrt(var + eps) for the
 * backward pass. weight and bias may not be NULL. y may not alias x.
 * Reductions are deterministic (no atomics): the same inputs give
 * bit-identical results on the same device. */
TEENY_API teeny_status teeny_batchnorm_forward_train(teeny_ctx *ctx, const teeny_tensor *x,
    const teeny_tensor *weight, const teeny_tensor *bias,
    teeny_tensor *running_mean, teeny_tensor *running_var, float momentum, float eps,
    teeny_tensor *y, teeny_tensor *save_mean, teeny_tensor *save_rstd);
/* y = (x - running_mean) / sqrt(running_var + eps) * weight + bias. */
TEENY_API teeny_status teeny_batchnorm_forward_infer(teeny_ctx *ctx, const teeny_tensor *x,
    const teeny_tensor *weight, const teeny_tensor *bias,
    const teeny_tensor *running_mean, const teeny_tensor *running_var, float eps, teeny_tensor *y);
/* Gradients of forward_train; overwrites dx, dweight, dbias. */
TEENY_API teeny_status teeny_batchnorm_backward_train(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *dy,
    const teeny_tensor *weight, const teeny_tensor *save_mean, const teeny_tensor *save_rstd,
    teeny_tensor *dx, teeny_tensor *dweight, teeny_tensor *dbias);
/* Gradients of forward_infer (statistics frozen): dx = weight * rstd * dy,
 * dweight = sum(dy * (x - running_mean) * rstd), dbias = sum(dy). */
TEENY_API teeny_status teeny_batchnorm_backward_frozen(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *dy,
    const teeny_tensor *weight, const teeny_tensor *running_mean, const teeny_tensor *running_var, float eps,
    teeny_tensor *dx, teeny_tensor *dweight, teeny_tensor *dbias);
/* Fold frozen batch-norm into per-channel scale/shift [C]:
 * scale = weight / sqrt(running_var + eps), shift = bias - running_mean * scale. */
TEENY_API teeny_status teeny_batchnorm_fold(teeny_ctx *ctx, const teeny_tensor *weight, const teeny_tensor *bias,
    const teeny_tensor *running_mean, const teeny_tensor *running_var, float eps, teeny_tensor *scale, teeny_tensor *shift);

#ifdef __cplusplus
}
#endif
#endif /* TEENYCL_H */
