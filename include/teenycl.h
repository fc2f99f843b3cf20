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

/* The same MAJOR means the same ABI. What keeps that true:
 *  - structs the library fills into caller memory (teeny_device_info) start
 *    with size_t struct_size, set by the caller; the library writes only the
 *    fields that fit, so fields can be appended;
 *  - parameter structs (teeny_*_params, teeny_lr_schedule) are read-only to
 *    the library and frozen within a major version: start them from their
 *    _INIT macro. A minor version that needs more options adds a new struct
 *    with a struct_size first field and a new function taking it;
 *  - every handle is freed with <handle>_destroy (NULL is a no-op); older
 *    names (teeny_st_close, teeny_idx_free) stay as deprecated aliases;
 *  - functions that can fail return a teeny_status. The others are the
 *    destroys and accessors that cannot fail except on a NULL handle, where
 *    they return the documented value (-1, 0 or NULL).
 * Nothing applications code against is removed within a major version. */
#define TEENY_VERSION_MAJOR 0
#define TEENY_VERSION_MINOR 2
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
 * (default warn). A custom sink gets every level. Threads: safe to call
 * from any thread at any time (C11 atomics); each message goes to one
 * consistent (fn, user_data) pair, but a message being logged on another
 * thread during the call may still reach the previous sink, so keep the
 * previous user_data valid until such calls have returned. fn may run on
 * any thread that calls the library, concurrently with itself; it may log
 * or call teeny_log_set. */
TEENY_API void teeny_log_set(teeny_log_fn fn, void *user_data);

/* ---- context ------------------------------------------------------------ */

typedef struct teeny_ctx teeny_ctx;
typedef struct teeny_tensor teeny_tensor;

/* Create a context on the device that device_spec names:
 *   NULL or ""      TEENY_DEVICE, else the first GPU, else the first CPU
 *   "cpu", "gpu"    the first device of that type
 *   "pocl", "nvidia", "amd", "intel"   the first device of that platform/vendor
 *   "rusticl", "clover", "mesa" (either), "apple", "arm" or "mali",
 *   "qualcomm" or "adreno"   the first device of that implementation (its
 *                   platform name, vendor or GPU name as the driver reports it)
 *   "P:D"           platform P, device D (decimal indices as teeny-info lists them)
 *   other text      the first device whose name contains it (any case)
 * A spec that no device matches fails with TEENY_ERR_NO_DEVICE;
 * teeny_last_error(NULL) then lists the devices that exist. A malformed
 * "P:D" (an index that is not a decimal number in int range, a sign, a
 * blank: "4294967296:0", "-1:0", "0:0 ") and an empty TEENY_DEVICE fail
 * with TEENY_ERR_ARG. Both create functions first check the environment
 * variables the library reads (TUNING.md, "Environment"), the tuning ones
 * (TEENY_TUNING, TEENY_ATTN_*) included: an empty value, one outside a
 * variable's documented values or a TEENY_TUNING that names no device
 * profile fails with TEENY_ERR_ARG naming it (teeny_last_error(NULL)).
 * Caller frees with teeny_ctx_destroy. */
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
/* *active = 1 when calls on ctx now use tf32: teeny_ctx_set_tf32 asked for
 * it and the device runs tf32 tensor-core instructions, which a small
 * kernel checks on first use (built, run and compared exactly: a host sync
 * the first time; never a device-name match). Where it is 1 (NVIDIA GPUs
 * with inline PTX mma.sync), these round their operands to tf32 and
 * accumulate in fp32: convolutions (forward, input and weight gradients;
 * the input gradient of a convolution with at most 4 input channels per
 * group, such as a 3-channel stem, stays exact fp32: its direct kernel
 * is faster than the GEMM);
 * the linear layer (forward, dx, dw; not the bias gradient, a plain sum)
 * and MatMul (teeny_matmul and its backward; graph matmuls; ONNX Gemm and
 * MatMul, which run on these two); attention with padded head dims up to
 * 64 (teeny_attention_* and PSA, forward and backward: Q K^T, P V and
 * their gradients; the softmax stays fp32, its exponentials by the
 * hardware's approximation, ex2.approx; wider heads keep fp32).
 * Normalized RMS error about 1e-4..1e-3 against float64, deterministic
 * like every other path. Plans compiled before a change keep what they
 * recorded. */
TEENY_API teeny_status teeny_ctx_tf32_active(teeny_ctx *ctx, int *active);
/* The context's command queue; borrowed. */
TEENY_API cl_command_queue teeny_ctx_cl_queue(const teeny_ctx *ctx);
/* Profiling. Between begin and end every kernel the context launches
 * records an OpenCL profiling event; end (a host sync) waits for them and
 * reports the device time from the first kernel's start to the last
 * kernel's end in milliseconds, and how many kernels ran. Needs a queue
 * with CL_QUEUE_PROFILING_ENABLE (teeny_ctx_create makes one); otherwise
 * end returns TEENY_ERR_UNSUPPORTED. Either out pointer may be NULL.
 * The count is exact: the event list grows with the launches (there is no
 * cap). If host memory runs out while it grows, the launches still run,
 * and end returns TEENY_ERR_NOMEM (teeny_last_error says how many launches
 * are missing) and leaves *device_ms and *kernels unwritten rather than
 * report a short profile. A new begin starts from zero. With the
 * environment variable TEENY_PROFILE=1, end also logs (at warn level, see
 * teeny_log_set) every kernel's launches and device time, slowest first,
 * and the totals; with TEENY_PROFILE=2, first each launch in the order
 * enqueued, with its kernel name, work-items, device time and the idle
 * gap since the previous launch ended, and for a plan's launches the
 * graph node they belong to (" node NAME", "NAME (backward)" in a
 * backward pass; teeny-run --profile sums them per node). An event per launch costs the host
 * time (on an H200, 6 -> 13.6 us a launch, 2026-12-02): a sequence of
 * launches shorter than that leaves the device waiting for the host while
 * profiled, where it would not otherwise. */
TEENY_API teeny_status teeny_profile_begin(teeny_ctx *ctx);
TEENY_API teeny_status teeny_profile_end(teeny_ctx *ctx, double *device_ms, int *kernels);
/* One launch of a profile, as teeny_profile_end_each hands it over. The
 * strings are borrowed for the duration of the call only. */
typedef struct {
    int index;           /* 0, 1, ... in the order enqueued */
    const char *kernel;  /* the kernel's name */
    const char *node;    /* the graph node ("NAME (backward)" in a backward pass); NULL outside a plan */
    long long items;     /* work-items (the global size's product) */
    double ms;           /* device time, start to end */
    double gap_ms;       /* idle device time since the previous launch ended (0 for the first) */
} teeny_profile_launch;
typedef void (*teeny_profile_fn)(const teeny_profile_launch *launch, void *user_data);
/* teeny_profile_end, which also calls each(launch, user_data) for every
 * launch of the profile in the order enqueued, on the calling thread,
 * before it returns. each may be NULL (then it is teeny_profile_end).
 * When it fails, each saw none or only some of the launches: use them only
 * after TEENY_OK. The way for a program to read the launches: not the
 * TEENY_PROFILE=2 log lines, because setting the variable while the
 * library runs races with the OpenCL driver's threads, which read the
 * environment (setenv is not thread-safe; teeny-run crashed so in PoCL). */
TEENY_API teeny_status teeny_profile_end_each(teeny_ctx *ctx, double *device_ms, int *kernels, teeny_profile_fn each,
                                              void *user_data);
/* The device's name; borrowed, lives as long as ctx. */
TEENY_API const char *teeny_ctx_device_name(const teeny_ctx *ctx);

/* ---- device listing -----------------------------------------------------
 * teeny_device_info is filled by the library into memory the caller owns,
 * so it can grow within a major version: the caller sets struct_size (with
 * TEENY_DEVICE_INFO_INIT, or sizeof) and the library writes only the fields
 * that fit in struct_size bytes and zeroes any bytes past the fields it
 * knows. New fields are only ever appended. An application built against
 * an older header (smaller struct_size) gets the fields it knows; one built
 * against a newer header run on an older library reads 0 in the newer
 * fields. */

typedef struct {
    size_t struct_size;      /* set by the caller: sizeof(teeny_device_info) */
    int platform_index, device_index;
    char platform_name[128], device_name[128], vendor[128];
    char device_version[64], driver_version[64], opencl_c_version[64];
    int is_gpu, is_cpu;
    unsigned compute_units;
    size_t max_work_group_size;
    uint64_t local_mem_bytes, global_mem_bytes, max_alloc_bytes;
    int has_fp64, has_subgroups, has_nvidia_ptx;
    int is_default;          /* what teeny_ctx_create(NULL, ...) picks */
    /* fields added later go here, and into TEENY_DEVICE_INFO_INIT */
} teeny_device_info;
/* Every field spelled out: no missing-initializer warnings in C or C++. */
#define TEENY_DEVICE_INFO_INIT \
    { sizeof(teeny_device_info), 0, 0, "", "", "", "", "", "", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
/* The smallest struct_size accepted: the layout of 0.1, the first with the
 * field. */
#define TEENY_DEVICE_INFO_MIN_SIZE (offsetof(teeny_device_info, is_default) + sizeof(int))

/* Fill up to max entries of out (out may be NULL when max is 0) and store
 * the number of devices present in *count. The entries are struct_size
 * bytes apart, the value the caller set in out[0].struct_size; every entry
 * written gets that struct_size. TEENY_ERR_ARG, nothing written, when
 * max > 0 and out[0].struct_size is below TEENY_DEVICE_INFO_MIN_SIZE or
 * above 65536 (not set). */
TEENY_API teeny_status teeny_devices_list(teeny_device_info *out, int max, int *count);
/* The device a context runs on; out->struct_size as above. */
TEENY_API teeny_status teeny_ctx_device_info(const teeny_ctx *ctx, teeny_device_info *out);

/* ---- tensors ------------------------------------------------------------ */

/* Rank 1..5; every size >= 1 (else TEENY_ERR_ARG, whatever the other
 * sizes); numel and byte size within int32 indexing and the device's max
 * allocation (else TEENY_ERR_RANGE; the product is overflow-checked).
 * Contents are uninitialized. Caller frees with teeny_tensor_destroy. The
 * same shape rules hold for wrap_cl and view. */
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

/* Activations. Values are only ever appended. Those after SILU are ONNX's
 * (formulas as ONNX states them; alpha and beta from teeny_act_params):
 *   SIGMOID      1 / (1 + exp(-x))
 *   TANH         tanh(x)
 *   HARDSIGMOID  clamp(alpha x + beta, 0, 1)        (default alpha 0.2, beta 0.5)
 *   HARDSWISH    x clamp(x / 6 + 1/2, 0, 1)
 *   LEAKY_RELU   x >= 0 ? x : alpha x               (default alpha 0.01)
 *   GELU         x/2 (1 + erf(x / sqrt 2))
 *   GELU_TANH    x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (GELU's tanh approximation)
 *   CLIP         min(max(x, alpha), beta)           (default -inf, +inf; ReLU6 is alpha 0, beta 6)
 *   MISH         x tanh(log(1 + exp(x)))
 *   ERF          erf(x)
 *   ROUND_HALF   x rounded to the nearest IEEE half (binary16), ties to
 *                even, |x| >= 65520 to +-inf, NaN kept: the value an fp16
 *                tensor would hold, kept in fp32 (ONNX Cast to float16;
 *                teeny_round_half is the host's twin, bit for bit). Its
 *                gradient is the identity (straight-through, as PyTorch's
 *                autocast casts are)
 * Gradients are the formulas' derivatives, with PyTorch's choice at the
 * kinks: RELU 0 at 0, LEAKY_RELU alpha at 0, CLIP 1 on [alpha, beta],
 * HARDSIGMOID 0 where alpha x + beta is 0 or 1, HARDSWISH x/3 + 1/2 on
 * [-3, 3]. Functions that take a bare teeny_act (and the convolution's
 * fused epilogue) use the defaults. */
typedef enum {
    TEENY_ACT_NONE, TEENY_ACT_RELU, TEENY_ACT_SILU,
    TEENY_ACT_SIGMOID, TEENY_ACT_TANH, TEENY_ACT_HARDSIGMOID, TEENY_ACT_HARDSWISH, TEENY_ACT_LEAKY_RELU,
    TEENY_ACT_GELU, TEENY_ACT_GELU_TANH, TEENY_ACT_CLIP, TEENY_ACT_MISH, TEENY_ACT_ERF,
    TEENY_ACT_ROUND_HALF
} teeny_act;
/* An activation with its parameters (see teeny_act; ignored by the others). */
typedef struct {
    teeny_act act;
    float alpha, beta;
} teeny_act_params;
/* act with its default parameters. */
TEENY_API teeny_act_params teeny_act_defaults(teeny_act act);
/* y = a + b, all the same numel; y may alias a or b. */
TEENY_API teeny_status teeny_add(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, teeny_tensor *y);
/* y = act(x); y may alias x. */
TEENY_API teeny_status teeny_activation_forward(teeny_ctx *ctx, teeny_act act, const teeny_tensor *x, teeny_tensor *y);
/* dx = dy * act'(x); dx may alias dy. */
TEENY_API teeny_status teeny_activation_backward(teeny_ctx *ctx, teeny_act act, const teeny_tensor *x, const teeny_tensor *dy, teeny_tensor *dx);
/* The same with parameters (p borrowed for the call): TEENY_ERR_ARG for p
 * NULL, an unknown act, or a NaN alpha or beta. */
TEENY_API teeny_status teeny_activation_forward_ex(teeny_ctx *ctx, const teeny_act_params *p, const teeny_tensor *x, teeny_tensor *y);
TEENY_API teeny_status teeny_activation_backward_ex(teeny_ctx *ctx, const teeny_act_params *p, const teeny_tensor *x, const teeny_tensor *dy, teeny_tensor *dx);

/* ---- group A: broadcasting, reductions (ONNX phase 2) -------------------
 * Shapes follow NumPy: operands broadcast from the last dimension (sizes
 * equal, or 1, or missing in front). Every backward overwrites its
 * outputs; a gradient of a broadcast operand is summed over the
 * dimensions it was broadcast along, in a fixed order (no atomics): the
 * same inputs give the same bits. A sum longer than a device's loop limit
 * allows in 64 parts (Mesa's llvmpipe: 64 * 32767 elements) is
 * TEENY_ERR_UNSUPPORTED. */
typedef enum { TEENY_BINARY_ADD, TEENY_BINARY_SUB, TEENY_BINARY_MUL, TEENY_BINARY_DIV, TEENY_BINARY_POW } teeny_binary_op;
/* y = a op b, a and b fp32 (rank 1..5) broadcasting to y's shape
 * (TEENY_ERR_SHAPE otherwise); POW is pow(a, b) (NaN for a < 0 with a
 * fractional b). y may alias a or b exactly when it has that operand's
 * shape; any other overlap is TEENY_ERR_ARG. An unknown op is TEENY_ERR_ARG. */
TEENY_API teeny_status teeny_binary(teeny_ctx *ctx, teeny_binary_op op, const teeny_tensor *a, const teeny_tensor *b, teeny_tensor *y);
/* da (a's shape) and db (b's shape) from dy (y's shape); either may be NULL
 * (not computed). DIV: da = dy / b, db = -dy a / b^2. POW: da = dy b
 * a^(b-1) (0 where b = 0), db = dy a^b ln a (0 where a = 0 and b >= 0). */
TEENY_API teeny_status teeny_binary_backward(teeny_ctx *ctx, teeny_binary_op op, const teeny_tensor *a, const teeny_tensor *b,
    const teeny_tensor *dy, teeny_tensor *da, teeny_tensor *db);
/* Sum or mean over axes: bit d of axes reduces axis d of x (a non-empty
 * subset of x's axes, else TEENY_ERR_ARG); keepdims 1 keeps them as size
 * 1, 0 drops them ([1] when none is left). */
typedef struct {
    unsigned axes;
    int keepdims; /* 0 or 1 */
    int mean;     /* 0: sum, 1: mean */
} teeny_reduce_params;
#define TEENY_REDUCE_PARAMS_INIT { 0, 1, 0 }
TEENY_API teeny_status teeny_reduce(teeny_ctx *ctx, const teeny_reduce_params *p, const teeny_tensor *x, teeny_tensor *y);
/* dx (x's shape) = dy broadcast over the reduced axes (divided by their
 * element count for the mean). */
TEENY_API teeny_status teeny_reduce_backward(teeny_ctx *ctx, const teeny_reduce_params *p, const teeny_tensor *dy, teeny_tensor *dx);

/* ---- group A: batched matrix product (ONNX phase 2) ----------------------
 * y [..., M, N] = a [..., M, K] b [..., K, N]: ranks 2..5, the batch
 * dimensions (all but the last two) broadcasting NumPy's way; each output
 * sums its K products in order (the linear layer's GEMM kernel, batched).
 * y may not overlap a or b. */
TEENY_API teeny_status teeny_matmul(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, teeny_tensor *y);
/* da = dy b^T, db = a^T dy per batch, summed over the batch dimensions an
 * operand was broadcast along; either may be NULL (not computed). */
TEENY_API teeny_status teeny_matmul_backward(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, const teeny_tensor *dy,
    teeny_tensor *da, teeny_tensor *db);

/* ---- group A: softmax and layer norm (ONNX phase 2) ----------------------
 * One work-item per softmax line (layer-norm row), summed in order: a line
 * longer than a device's loop limit allows (Mesa's llvmpipe: about 10000
 * elements) is TEENY_ERR_UNSUPPORTED. */
/* y = softmax(x) along axis (0..rank-1), or log softmax (log 1), computed
 * as exp(x - max) / sum and x - max - log(sum); y may alias x. */
TEENY_API teeny_status teeny_softmax(teeny_ctx *ctx, int axis, int log, const teeny_tensor *x, teeny_tensor *y);
/* Softmax with options (teeny_softmax_ex, teeny_graph_softmax_ex; p
 * borrowed for the call). masked_zero 1: a line whose every element is
 * -inf gives 0, and so a zero gradient, where the plain softmax gives NaN
 * (exp(x - max) with max -inf); every other line is the plain softmax's,
 * bit for bit. It is attention's rule for a query row with every key
 * masked (teeny_attention_forward_ex, ONNX Attention), while an ONNX
 * Softmax node keeps the plain softmax. Not with log (TEENY_ERR_ARG). The
 * backward is teeny_softmax_backward's. Fields are only ever appended. */
typedef struct {
    int axis;        /* negative: counted from the end */
    int log;         /* 0 or 1 */
    int masked_zero; /* 0 or 1 */
} teeny_softmax_params;
#define TEENY_SOFTMAX_PARAMS_INIT { -1, 0, 0 }
TEENY_API teeny_status teeny_softmax_ex(teeny_ctx *ctx, const teeny_softmax_params *p, const teeny_tensor *x, teeny_tensor *y);
/* From the forward's y: dx = y (dy - sum(dy y)), or (log) dy - exp(y) sum(dy); dx may alias dy. */
TEENY_API teeny_status teeny_softmax_backward(teeny_ctx *ctx, int axis, int log, const teeny_tensor *y, const teeny_tensor *dy, teeny_tensor *dx);
/* Layer normalization over x's axes from axis on (0..rank-1; PyTorch's
 * normalized_shape is x's shape from there): y = (x - mean) rstd weight +
 * bias, rstd = 1 / sqrt(biased variance + eps) (eps >= 0); weight and bias
 * (NULL: none) have x's shape from axis on. mean and rstd (both or
 * neither) receive the statistics, x's shape before axis ([1] for axis 0). */
TEENY_API teeny_status teeny_layernorm_forward(teeny_ctx *ctx, int axis, float eps, const teeny_tensor *x,
    const teeny_tensor *weight, const teeny_tensor *bias, teeny_tensor *y, teeny_tensor *mean, teeny_tensor *rstd);
/* From the forward's mean and rstd: dx, dweight (sum over rows of dy xhat)
 * and dbias (sum of dy); any may be NULL (not computed). */
TEENY_API teeny_status teeny_layernorm_backward(teeny_ctx *ctx, int axis, const teeny_tensor *x, const teeny_tensor *weight,
    const teeny_tensor *mean, const teeny_tensor *rstd, const teeny_tensor *dy, teeny_tensor *dx, teeny_tensor *dweight,
    teeny_tensor *dbias);

/* ---- group A: layout (ONNX phase 2) --------------------------------------
 * Copies between tensors of rank 1..5 (the graph's reshapes stay views).
 * Every backward overwrites dx (zeros where nothing of y came from). A
 * shape that does not match is TEENY_ERR_SHAPE, a bad axis or parameter
 * TEENY_ERR_ARG, an output overlapping an input TEENY_ERR_ARG; nothing is
 * written then. */
/* y dimension d is x dimension perm[d] (perm: a permutation of x's axes, ndim entries). */
TEENY_API teeny_status teeny_transpose(teeny_ctx *ctx, const int *perm, const teeny_tensor *x, teeny_tensor *y);
/* dx = dy transposed back (perm as the forward's). */
TEENY_API teeny_status teeny_transpose_backward(teeny_ctx *ctx, const int *perm, const teeny_tensor *dy, teeny_tensor *dx);
/* ONNX Slice on every axis d (entries past x's rank ignored): start,
 * end (exclusive), step != 0; negative start/end count from the end and
 * out-of-range ones are clamped as ONNX clamps them, so INT64_MAX means
 * "to the end" (or, with a negative step, INT64_MIN "to the front"). A
 * slice that selects nothing on an axis is TEENY_ERR_SHAPE. */
typedef struct {
    int64_t start[5], end[5], step[5];
} teeny_slice_params;
#define TEENY_SLICE_PARAMS_INIT { {0, 0, 0, 0, 0}, {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX}, {1, 1, 1, 1, 1} }
TEENY_API teeny_status teeny_slice(teeny_ctx *ctx, const teeny_slice_params *p, const teeny_tensor *x, teeny_tensor *y);
/* dx (x's shape): dy at the selected elements, 0 elsewhere. */
TEENY_API teeny_status teeny_slice_backward(teeny_ctx *ctx, const teeny_slice_params *p, const teeny_tensor *dy, teeny_tensor *dx);
/* Constant padding: y dimension d = x's + lo[d] + hi[d] (x's rank
 * entries; negative values crop), value outside x. */
TEENY_API teeny_status teeny_pad(teeny_ctx *ctx, const int64_t *lo, const int64_t *hi, float value, const teeny_tensor *x, teeny_tensor *y);
/* dx = the elements of dy at x's positions. */
TEENY_API teeny_status teeny_pad_backward(teeny_ctx *ctx, const int64_t *lo, const int64_t *hi, const teeny_tensor *dy, teeny_tensor *dx);
/* y = x broadcast (NumPy) to y's shape, which must be the broadcast of x's
 * and itself. */
TEENY_API teeny_status teeny_expand(teeny_ctx *ctx, const teeny_tensor *x, teeny_tensor *y);
/* dx = dy summed over the dimensions x was broadcast along. */
TEENY_API teeny_status teeny_expand_backward(teeny_ctx *ctx, const teeny_tensor *dy, teeny_tensor *dx);
/* Concatenate n >= 1 tensors along axis (every other dimension equal to
 * y's), and the inverse: ys[i] its part of x (the ys may not overlap x or
 * each other). Each is the other's backward. */
TEENY_API teeny_status teeny_concat(teeny_ctx *ctx, int axis, int n, const teeny_tensor *const *xs, teeny_tensor *y);
TEENY_API teeny_status teeny_split(teeny_ctx *ctx, int axis, const teeny_tensor *x, int n, teeny_tensor *const *ys);
/* y = x's slices at int32 indices (any shape) along axis: y's shape is
 * x's with the axis replaced by the indices' shape (rank at most 5). An
 * index outside [0, x's size on the axis) gives NaN. */
TEENY_API teeny_status teeny_gather(teeny_ctx *ctx, int axis, const teeny_tensor *x, const teeny_tensor *indices, teeny_tensor *y);
/* dx (x's shape) = for each slice, the sum of dy over the indices that
 * read it, in index order (0 for slices nothing read). TEENY_ERR_UNSUPPORTED
 * past a device's loop limit in indices. */
TEENY_API teeny_status teeny_gather_backward(teeny_ctx *ctx, int axis, const teeny_tensor *indices, const teeny_tensor *dy, teeny_tensor *dx);

/* ---- resize (ONNX phase 3: Resize, Upsample; PyTorch's interpolate) ------
 * y [B, C, OH, OW] from x [B, C, H, W] over the last two dimensions, as
 * ONNX's Resize computes it. Per axis (in = H, out = OH; likewise W), the
 * output index o reads x at the coordinate c(o) the coordinate mode gives,
 * with s = scale (or out / in where scale is 0) and L = in * s, the
 * resized length (out where scale is 0; with a scale, as ONNX's reference
 * implementation and its node tests have it, which differs from PyTorch
 * and onnxruntime where in * s is not a whole number: pass scale 0 for
 * theirs):
 *   HALF_PIXEL            c = (o + 0.5) / s - 0.5
 *   PYTORCH_HALF_PIXEL    the same, but c = 0 where L <= 1
 *   ASYMMETRIC            c = o / s
 *   ALIGN_CORNERS         c = o * (in - 1) / (L - 1), 0 where L <= 1
 *   TF_HALF_PIXEL_FOR_NN  c = (o + 0.5) / s
 * NEAREST reads x at c rounded by the rounding mode (ROUND_PREFER_FLOOR:
 * to nearest, halves down; ROUND_PREFER_CEIL: halves up; FLOOR; CEIL),
 * clamped to [0, in - 1]. LINEAR (bilinear) clamps c to [0, in - 1] and
 * mixes x at floor(c) and floor(c) + 1 (clamped) with weights 1 - f and
 * f, f = c - floor(c), along H, then along W. The coordinates are exact:
 * a scale is the rational number its float value is (out / in where 0),
 * and the rounding is done in 64-bit integers, so a coordinate that lands
 * exactly on a half (or a whole) always rounds as the mode says. The
 * weights are float. Sizes and scales are independent: ONNX's scales give
 * out = floor(in * scale) (pass both), its sizes out alone (scale 0).
 * Statuses: TEENY_ERR_ARG for a NULL p, a mode outside its enum, a size
 * < 1 or a scale negative or not finite; TEENY_ERR_SHAPE for x not fp32
 * [B, C, H, W] or y (dx, dy) not of the shapes above; TEENY_ERR_RANGE past
 * 2^31 - 1 elements; TEENY_ERR_UNSUPPORTED for a scale whose fraction
 * needs a denominator past 2^28 (a float scale below 1/32 with many
 * mantissa bits, 0.01 say; 0.25 or 0.0625 are fine), a scale of 2^40 or
 * more, or coordinates whose fractions pass 2^61. */
typedef enum { TEENY_RESIZE_NEAREST, TEENY_RESIZE_LINEAR } teeny_resize_mode;
typedef enum {
    TEENY_RESIZE_HALF_PIXEL,
    TEENY_RESIZE_PYTORCH_HALF_PIXEL,
    TEENY_RESIZE_ASYMMETRIC,
    TEENY_RESIZE_ALIGN_CORNERS,
    TEENY_RESIZE_TF_HALF_PIXEL_FOR_NN
} teeny_resize_coord;
typedef enum {
    TEENY_RESIZE_ROUND_PREFER_FLOOR,
    TEENY_RESIZE_ROUND_PREFER_CEIL,
    TEENY_RESIZE_FLOOR,
    TEENY_RESIZE_CEIL
} teeny_resize_rounding;
typedef struct {
    teeny_resize_mode mode;
    teeny_resize_coord coord;
    teeny_resize_rounding rounding; /* NEAREST only (LINEAR ignores it) */
    int size[2];                    /* OH, OW >= 1 */
    float scale[2];                 /* per axis: > 0, or 0 for size / input size */
} teeny_resize2d_params;
/* ONNX's defaults: nearest, half_pixel, round_prefer_floor. */
#define TEENY_RESIZE2D_PARAMS_INIT { TEENY_RESIZE_NEAREST, TEENY_RESIZE_HALF_PIXEL, TEENY_RESIZE_ROUND_PREFER_FLOOR, {1, 1}, {0.0f, 0.0f} }
/* y [B, C, p->size[0], p->size[1]] = resize(x); y may not overlap x. p
 * borrowed for the call. */
TEENY_API teeny_status teeny_resize2d_forward(teeny_ctx *ctx, const teeny_resize2d_params *p, const teeny_tensor *x,
    teeny_tensor *y);
/* dx [B, C, H, W] (overwritten) = the sum, over the outputs that read each
 * element, of dy times the weight it was read with: a gather in a fixed
 * order (output rows, then columns, ascending), no atomics. Where a device
 * limits a work-item's loop trips the rows go in several launches (same
 * bits); TEENY_ERR_UNSUPPORTED where one output row's columns that read
 * an element pass the limit. dx may not overlap dy. */
TEENY_API teeny_status teeny_resize2d_backward(teeny_ctx *ctx, const teeny_resize2d_params *p, const teeny_tensor *dy,
    teeny_tensor *dx);

/* ---- batch normalization -------------------------------------------------
 * x is [N, C] (1-d) or [B, C, H, W] (2-d); every per-channel tensor is [C].
 * Statistics are over N (1-d) or B*H*W (2-d). The batch is normalized with
 * its biased variance; running_var is updated with the unbiased one, as in
 * PyTorch: running = (1 - momentum) * running + momentum * batch.
 * save_mean / save_rstd receive the batch mean and 1/sqrt(var + eps) for the
 * backward pass. weight and bias may not be NULL. y may not alias x.
 * Reductions are deterministic (no atomics): the same inputs give
 * bit-identical results on the same device. With the portable kernels
 * (GPUs), a training forward whose channels' B*H*W values fit one
 * work-group (8 float4s per work-item where H*W % 4 == 0, else 8 floats:
 * 8192 or 2048 values at 256 items) is one launch with an exact two-pass
 * mean and variance; otherwise partial sums, then a normalize launch.
 * The backward with dx is one launch or two by the same rule. */
TEENY_API teeny_status teeny_batchnorm_forward_train(teeny_ctx *ctx, const teeny_tensor *x,
    const teeny_tensor *weight, const teeny_tensor *bias,
    teeny_tensor *running_mean, teeny_tensor *running_var, float momentum, float eps,
    teeny_tensor *y, teeny_tensor *save_mean, teeny_tensor *save_rstd);
/* y = (x - running_mean) / sqrt(running_var + eps) * weight + bias. */
TEENY_API teeny_status teeny_batchnorm_forward_infer(teeny_ctx *ctx, const teeny_tensor *x,
    const teeny_tensor *weight, const teeny_tensor *bias,
    const teeny_tensor *running_mean, const teeny_tensor *running_var, float eps, teeny_tensor *y);
/* Gradients of forward_train; overwrites dx, dweight, dbias. dx may be
 * NULL (both backward functions): only dweight and dbias are computed. */
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

/* ---- convolution ---------------------------------------------------------
 * Grouped 2-D convolution with PyTorch's F.conv2d semantics (cross-
 * correlation, zero padding): x [B, Cin, H, W], weight
 * [Cout, Cin/groups, KH, KW], bias [Cout] (optional), y [B, Cout, OH, OW];
 * groups divides Cin and Cout (groups = Cin is depthwise; Cout a multiple
 * of Cin gives a channel multiplier). Per axis ([0] = H, [1] = W):
 *   OH = (H + 2*pad - dilation*(KH-1) - 1) / stride + 1,
 * and H + 2*pad must be >= dilation*(KH-1) + 1. All tensors are borrowed;
 * any may be a view. Bad parameter values (stride or dilation < 1, pad < 0,
 * groups < 1, sizes < 1, NULL) give TEENY_ERR_ARG; shapes that disagree
 * (channels not divisible by groups, weight/bias/y/dy/dx/dw shapes, an input
 * smaller than the dilated kernel) TEENY_ERR_SHAPE; sizes beyond int32
 * indexing TEENY_ERR_RANGE; an output overlapping any other tensor of the
 * call TEENY_ERR_ARG. Nothing is modified then. Reductions are
 * deterministic (no atomics): the same inputs give bit-identical results
 * on the same device. The algorithm is the library's choice per device
 * and problem: on NVIDIA GPUs (fp32, not tf32) a dense 3x3 stride-1
 * convolution with pads of at most 2, 16 channels or more each way and
 * 1024 or more 2x2 output tiles takes Winograd F(2x2, 3x3) for y and dx
 * (2.25x fewer multiply-adds; its rounding differs from the direct sum's
 * in the last bits, within the same tolerance) and up to 256 MiB of
 * workspace. */
typedef struct {
    int stride[2], pad[2], dilation[2], groups; /* [0] = H, [1] = W */
    /* Appended after 0.1 (0, as an initializer that stops early leaves
     * it, keeps the symmetric padding; rebuild code compiled against the
     * older header): the padding after the input is pad + pad_end_extra
     * (>= 0; ONNX's pads end - begin), so OH = (H + pad + pad_end -
     * dilation*(KH-1) - 1) / stride + 1. The padding after only changes
     * the output's size. */
    int pad_end_extra[2];
} teeny_conv2d_params;
#define TEENY_CONV2D_PARAMS_INIT { {1, 1}, {0, 0}, {1, 1}, 1, {0, 0} }
/* Shape inference only (no context; failures are read with
 * teeny_last_error(NULL)): fills y_shape from x_shape and w_shape. A size
 * < 1 is TEENY_ERR_ARG, a size past 2^31 - 1 or an output past 2^31 - 1
 * elements TEENY_ERR_RANGE. */
TEENY_API teeny_status teeny_conv2d_output_shape(const teeny_conv2d_params *p, const int64_t x_shape[4],
    const int64_t w_shape[4], int64_t y_shape[4]);
/* y = conv(x, weight) + bias; bias may be NULL. y may not overlap an input. */
TEENY_API teeny_status teeny_conv2d_forward(teeny_ctx *ctx, const teeny_conv2d_params *p,
    const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *bias, teeny_tensor *y);
/* Inference fusion in one launch (e.g. conv-BN-SiLU with scale/shift from
 * teeny_batchnorm_fold): y = act(conv(x, w) * scale[c] + shift[c] + bias[c]).
 * bias, scale and shift ([Cout] each) may be NULL: scale then counts as 1,
 * shift and bias as 0 (so a NULL shift means "bias, or 0"). act is any
 * teeny_act with its default parameters (teeny_act_defaults). */
TEENY_API teeny_status teeny_conv2d_forward_fused(teeny_ctx *ctx, const teeny_conv2d_params *p,
    const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *bias,
    const teeny_tensor *scale, const teeny_tensor *shift, teeny_act act, teeny_tensor *y);
/* Gradients of teeny_conv2d_forward given dy [B, Cout, OH, OW]: dx (shape of
 * x), dw (shape of w), dbias [Cout]. Any of the three may be NULL (not
 * computed); the others are overwritten, never accumulated. Outputs may not
 * overlap each other or an input. Uses the context's workspace. dx of a
 * convolution with at most 4 input channels per group (an image stem) is
 * computed directly rather than as an implicit GEMM where the device's
 * local memory and loop limits allow: the same result up to fp32 rounding
 * order, deterministic like every path. */
TEENY_API teeny_status teeny_conv2d_backward(teeny_ctx *ctx, const teeny_conv2d_params *p,
    const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *dy,
    teeny_tensor *dx, teeny_tensor *dw, teeny_tensor *dbias);

/* ---- transposed convolution ----------------------------------------------
 * PyTorch's F.conv_transpose2d and ONNX's ConvTranspose (the gradient of a
 * convolution with respect to its input): x [B, Cin, H, W], weight
 * [Cin, Cout/groups, KH, KW], bias [Cout] (optional), y [B, Cout, OH, OW]
 * with, per axis ([0] = H, [1] = W), the padding after pe = pad +
 * pad_end_extra,
 *   OH = (H - 1)*stride - pad - pe + dilation*(KH - 1) + 1 + output_padding.
 * stride and dilation >= 1, pad and pe >= 0, 0 <= output_padding < stride
 * or < dilation (TEENY_ERR_ARG; output_padding's rows past the last tap
 * hold the bias alone); groups divides Cin (TEENY_ERR_SHAPE with
 * the weight's shape); OH, OW >= 1 (TEENY_ERR_SHAPE); sizes past int32
 * indexing TEENY_ERR_RANGE. Built on the convolution's kernels (same
 * determinism and limits); outputs may not overlap inputs. */
typedef struct {
    int stride[2], pad[2], dilation[2], groups;
    int pad_end_extra[2];  /* the padding after is pad + pad_end_extra (ONNX's pads end - begin) */
    int output_padding[2]; /* extra rows and columns after the end (ONNX's output_padding) */
} teeny_conv_transpose2d_params;
#define TEENY_CONV_TRANSPOSE2D_PARAMS_INIT { {1, 1}, {0, 0}, {1, 1}, 1, {0, 0}, {0, 0} }
/* Shape inference only (no context; failures in teeny_last_error(NULL)). */
TEENY_API teeny_status teeny_conv_transpose2d_output_shape(const teeny_conv_transpose2d_params *p,
    const int64_t x_shape[4], const int64_t w_shape[4], int64_t y_shape[4]);
/* y = conv_transpose(x, weight) + bias; bias may be NULL. */
TEENY_API teeny_status teeny_conv_transpose2d_forward(teeny_ctx *ctx, const teeny_conv_transpose2d_params *p,
    const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *bias, teeny_tensor *y);
/* Gradients given dy [B, Cout, OH, OW]: dx (x's shape), dw (w's), dbias
 * [Cout]; any may be NULL (not computed), the others are overwritten.
 * Uses the context's workspace. */
TEENY_API teeny_status teeny_conv_transpose2d_backward(teeny_ctx *ctx, const teeny_conv_transpose2d_params *p,
    const teeny_tensor *x, const teeny_tensor *w, const teeny_tensor *dy,
    teeny_tensor *dx, teeny_tensor *dw, teeny_tensor *dbias);

/* ---- optimizers ----------------------------------------------------------
 * Optimizer steps as device kernels with PyTorch's semantics (torch.optim.SGD,
 * Adam, AdamW) plus optional gradient clipping by global norm
 * (torch.nn.utils.clip_grad_norm_ before the step). An optimizer borrows n
 * parameter tensors and their gradient tensors (fp32, same numel pairwise,
 * no overlaps); they must outlive it. Everything a step needs (kernel
 * objects, their arguments, state tensors, workspace) is made at creation:
 * a step only enqueues (a small non-blocking write of the step's scalars,
 * then one kernel per tensor), never builds, creates, sets arguments or
 * waits. The step counter t counts completed steps.
 *   SGD:   d = g + wd*p; with momentum: buf = d on the first step, else
 *          buf = momentum*buf + (1 - dampening)*d; d = nesterov ?
 *          d + momentum*buf : buf;  p -= lr*d.
 *   Adam:  g += wd*p (L2);  AdamW: p *= 1 - lr*wd (decoupled); then
 *          m += (1 - beta1)*(g - m); v = beta2*v + (1 - beta2)*g*g;
 *          p -= lr/(1 - beta1^t) * m / (sqrt(v)/sqrt(1 - beta2^t) + eps),
 *          with this step's beta1 in both places (as PyTorch does when a
 *          schedule such as OneCycleLR cycles beta1).
 *   Clipping (max_grad_norm > 0): total = sqrt(sum of every g^2), scale =
 *          min(max_grad_norm / (total + 1e-6), 1), g *= scale in place
 *          before the update; computed on the device in a fixed order (the
 *          same inputs give bit-identical results), no host sync. */
typedef enum { TEENY_OPTIM_SGD, TEENY_OPTIM_ADAM, TEENY_OPTIM_ADAMW } teeny_optim_kind;
typedef struct {
    teeny_optim_kind kind;
    float lr, momentum, dampening, weight_decay; /* lr >= 0; each step passes its own */
    int nesterov;                                /* needs momentum > 0 and dampening 0 */
    float beta1, beta2, eps;                     /* Adam / AdamW */
    float max_grad_norm;                         /* 0: no clipping */
} teeny_optim_params;
#define TEENY_OPTIM_PARAMS_INIT { TEENY_OPTIM_SGD, 1e-3f, 0.0f, 0.0f, 0.0f, 0, 0.9f, 0.999f, 1e-8f, 0.0f }
typedef struct teeny_optimizer teeny_optimizer;

/* Borrows params[0..n) and grads[0..n) (copies the arrays). Builds the
 * kernels, creates the state tensors (zeros) and sets every kernel argument.
 * TEENY_ERR_ARG for NULL, n <= 0, a negative or non-finite
 * hyperparameter, betas outside [0, 1), nesterov without momentum or with
 * dampening, int32 or foreign-context tensors, and tensors that overlap
 * (a grad with a param, or two params / two grads); TEENY_ERR_SHAPE when a
 * param and its grad differ in numel. Caller frees with
 * teeny_optimizer_destroy. */
TEENY_API teeny_status teeny_optimizer_create(teeny_ctx *ctx, const teeny_optim_params *p, int n,
    teeny_tensor *const *params, const teeny_tensor *const *grads, teeny_optimizer **out);
/* Waits for the optimizer's pending scalar writes, then frees it and its
 * state tensors. NULL is a no-op. */
TEENY_API void teeny_optimizer_destroy(teeny_optimizer *opt);
/* Enqueue one step with this step's lr (>= 0; pass p->lr for a constant
 * rate) and beta1 (< 0 keeps p->beta1; ignored by SGD). Schedules are
 * computed on the host per step. Does not wait for the device (it waits
 * only when the host runs more than a few steps ahead). Clipping, when on,
 * rewrites the grads. Adam and AdamW update up to 8 parameters per kernel
 * launch on GPUs (as many as the device's kernel-argument space holds; one
 * per launch on CPUs, where that is faster); every element gets the same
 * arithmetic either way. Not recordable into a graph (TEENY_ERR_STATE while
 * one records); TEENY_ERR_RANGE, with nothing enqueued, when the step
 * count is already INT64_MAX (there is no next step to count). */
TEENY_API teeny_status teeny_optimizer_step(teeny_optimizer *opt, float lr, float beta1);
/* Steps taken so far (t); -1 for NULL. */
TEENY_API int64_t teeny_optimizer_steps(const teeny_optimizer *opt);
/* Set t, e.g. after loading the state from a checkpoint; steps >= 0.
 * With t > 0, SGD treats its momentum buffers as already initialized. */
TEENY_API teeny_status teeny_optimizer_set_steps(teeny_optimizer *opt, int64_t steps);
/* Optimizer state: SGD with momentum has "momentum_buffer.<i>" per param
 * i, Adam/AdamW "exp_avg.<i>" and "exp_avg_sq.<i>" (in that order, param
 * by param); plain SGD has none. (teeny_graph_save keys each one by its
 * parameter's name instead of i.)
 * Each state tensor has its param's shape. The name and tensor are
 * borrowed and live as long as opt; read and write the tensor with the
 * tensor API. */
TEENY_API int teeny_optimizer_state_count(const teeny_optimizer *opt);
TEENY_API teeny_status teeny_optimizer_state(const teeny_optimizer *opt, int i, const char **name, teeny_tensor **t);

/* Learning-rate schedules, computed on the host per step (PyTorch's
 * formulas): pass the result to teeny_optimizer_step. step counts from 0.
 *   CONSTANT  lr = max_lr
 *   STEP      lr = max_lr * gamma^floor(step / step_size)       (StepLR)
 *   COSINE    lr = min_lr + (max_lr - min_lr) (1 + cos(pi step / total_steps)) / 2   (CosineAnnealingLR)
 *   ONE_CYCLE OneCycleLR (two phases, cosine annealing): from max_lr /
 *             div_factor up to max_lr over pct_start of total_steps, then
 *             down to max_lr / div_factor / final_div_factor; with
 *             cycle_momentum, beta1 moves inversely between max_momentum
 *             and base_momentum. Other kinds leave beta1 at -1 (keep the
 *             optimizer's). */
typedef enum { TEENY_LR_CONSTANT, TEENY_LR_STEP, TEENY_LR_COSINE, TEENY_LR_ONE_CYCLE } teeny_lr_kind;
typedef struct {
    teeny_lr_kind kind;
    double max_lr;
    int64_t total_steps;                  /* COSINE, ONE_CYCLE */
    int64_t step_size; double gamma;      /* STEP */
    double min_lr;                        /* COSINE */
    double pct_start, div_factor, final_div_factor;  /* ONE_CYCLE */
    int cycle_momentum; double base_momentum, max_momentum;
} teeny_lr_schedule;
#define TEENY_LR_SCHEDULE_INIT { TEENY_LR_CONSTANT, 1e-3, 1, 1, 0.1, 0.0, 0.3, 25.0, 1e4, 1, 0.85, 0.95 }
/* lr (and beta1, -1 when the schedule does not set it) at step; TEENY_ERR_ARG
 * for a schedule whose fields are out of range or not finite, or a step
 * outside [0, total_steps) where total_steps applies. ONE_CYCLE accepts
 * any total_steps >= 1 and pct_start in [0, 1] with PyTorch's phase
 * boundaries (tiny totals put every step in the second phase); where
 * PyTorch would divide 0 by 0 it gives the phase's end values. No context:
 * details in teeny_last_error(NULL). */
TEENY_API teeny_status teeny_lr_at(const teeny_lr_schedule *s, int64_t step, double *lr, double *beta1);

/* ---- files ---------------------------------------------------------------
 * NumPy .npy, safetensors and IDX (MNIST) files. Calls that have a
 * context (through ctx or a tensor) report details in teeny_last_error(ctx);
 * the others in teeny_last_error(NULL). Open failures give TEENY_ERR_IO;
 * malformed, truncated or corrupt contents TEENY_ERR_FORMAT. Multi-byte
 * values in files are little-endian (IDX: big-endian) on every host. */

/* .npy version 1.0, C order, '<f4' (fp32 tensors) or '<i4' (int32).
 * Host sync: reads the tensor (a view writes just its range), then writes
 * the file through a temp file renamed over path. */
TEENY_API teeny_status teeny_npy_save(const teeny_tensor *t, const char *path);
/* Load C-order data (versions 1.0 to 3.0) into a new tensor of the file's
 * shape (a 0-d array becomes [1]; rank 1..5, no zero sizes:
 * TEENY_ERR_UNSUPPORTED otherwise): '<f4' into an fp32 tensor; '<i4',
 * '<i8' and '|b1' (bool, 0 or 1) into an int32 tensor; '<f2' (half)
 * into an fp32 tensor, converted exactly. An int64 value
 * outside int32 is TEENY_ERR_RANGE, the message naming the element and
 * its value (never wrapped). Any other dtype, big-endian ones included,
 * is TEENY_ERR_FORMAT. Caller frees *out with teeny_tensor_destroy; *out
 * is NULL on failure. */
TEENY_API teeny_status teeny_npy_load(teeny_ctx *ctx, const char *path, teeny_tensor **out);

/* An .npy file's element type, as teeny_npy_read reports it. Values are
 * only ever appended. */
typedef enum {
    TEENY_NPY_F32 = 0,  /* '<f4': float */
    TEENY_NPY_I32 = 1,  /* '<i4': int32_t */
    TEENY_NPY_I64 = 2,  /* '<i8': int64_t */
    TEENY_NPY_BOOL = 3, /* '|b1': one byte a value, 0 or 1 (any other byte: TEENY_ERR_FORMAT) */
    TEENY_NPY_F16 = 4   /* '<f2': IEEE half, as uint16_t bit patterns (teeny_half_to_float converts) */
} teeny_npy_dtype;
#define TEENY_NPY_MAX_DIMS 5
typedef struct {
    teeny_npy_dtype dtype;
    int ndim;                          /* the file's own rank, 0..TEENY_NPY_MAX_DIMS: 0 for a 0-d array */
    int64_t shape[TEENY_NPY_MAX_DIMS]; /* ndim sizes >= 1 */
    int64_t numel;                     /* their product (1 for a 0-d array) */
    size_t bytes;                      /* numel x 4, 4, 8, 1 or 2 */
} teeny_npy_info;
/* Read the .npy file at path into host memory, values as the file holds
 * them (no conversion; host byte order). Fills *info; with dst non-NULL
 * also copies info->bytes of data there (dst_bytes smaller:
 * TEENY_ERR_ARG). dst NULL reads only the header (its sizes checked
 * against the file's): call once for the size, allocate, call again. The
 * same files and errors as teeny_npy_load, except that the rank is the
 * file's own. On failure *info and dst are left unwritten. */
TEENY_API teeny_status teeny_npy_read(teeny_ctx *ctx, const char *path, teeny_npy_info *info, void *dst,
                                      size_t dst_bytes);
/* Write host data as a version 1.0 .npy file at path (through a temp
 * file renamed over it): dtype and the shape from info (ndim 0..
 * TEENY_NPY_MAX_DIMS, sizes >= 1; numel and bytes are ignored), values at
 * data in host byte order as teeny_npy_read gives them (TEENY_NPY_F16:
 * uint16_t half bit patterns, e.g. from teeny_float_to_half). Borrows
 * info and data for the call. TEENY_ERR_ARG for NULLs, an unknown dtype,
 * a bad rank or size. */
TEENY_API teeny_status teeny_npy_write(teeny_ctx *ctx, const char *path, const teeny_npy_info *info,
                                       const void *data);

/* IEEE half (binary16) <-> fp32 on the host, n values (NULL pointers: no
 * op). Half to float is exact, subnormals, inf and NaN included; float
 * to half rounds to nearest, ties to even, overflows to +-inf from 65520
 * up, and keeps NaN a NaN (quiet, sign kept). teeny_round_half(x) is
 * float(half(x)), what TEENY_ACT_ROUND_HALF computes on the device. No
 * context; safe from any thread. */
TEENY_API void teeny_half_to_float(const uint16_t *src, float *dst, size_t n);
TEENY_API void teeny_float_to_half(const float *src, uint16_t *dst, size_t n);
TEENY_API float teeny_round_half(float x);

/* safetensors (the Hugging Face format): [u64 header length][JSON header,
 * space-padded to a multiple of 8][data], tensors packed in the order
 * added. The writer stores "teenycl_checksum" (FNV-1a 64 of the data
 * section, 16 hex digits) and "teenycl_header_checksum" (of the header
 * with that value's digits zeroed) in __metadata__; the reader verifies
 * them when present, so files from other tools (without them) still load.
 * Names are non-empty, unique and not "__metadata__". */
#define TEENY_ST_MAX_DIMS 8
typedef struct teeny_st_writer teeny_st_writer;
/* Caller frees with teeny_st_writer_destroy. */
TEENY_API teeny_status teeny_st_writer_create(teeny_st_writer **out);
TEENY_API void teeny_st_writer_destroy(teeny_st_writer *w);
/* Add an F32 tensor, read at teeny_st_write. The writer holds a reference
 * to t until teeny_st_writer_destroy: a t destroyed before the write makes
 * teeny_st_write fail with TEENY_ERR_ARG (no file written), and t's device
 * memory is released when the writer is destroyed. The writer then counts
 * as a user of t's context (one thread at a time). */
TEENY_API teeny_status teeny_st_add_tensor(teeny_st_writer *w, const char *name, const teeny_tensor *t);
/* Add an I64 tensor of ndim 0..TEENY_ST_MAX_DIMS (0: a scalar) from host
 * values (copied now), e.g. batch-norm's num_batches_tracked. */
TEENY_API teeny_status teeny_st_add_i64(teeny_st_writer *w, const char *name, int ndim, const int64_t *shape,
    const int64_t *values);
/* A string entry of __metadata__ (copied); keys starting "teenycl_" are reserved. */
TEENY_API teeny_status teeny_st_add_metadata(teeny_st_writer *w, const char *key, const char *value);
/* Host sync: read every tensor and write the file crash-safely (a temp file
 * in path's directory, flushed and fsynced, renamed over path, then the
 * directory fsynced): path holds the old file or the whole new one. */
TEENY_API teeny_status teeny_st_write(teeny_st_writer *w, const char *path);

typedef struct teeny_st_file teeny_st_file;
/* Read and validate the whole file into host memory: header JSON (UTF-8,
 * no NUL character in any string, no empty tensor name), dtypes
 * (F32, I64), shapes, data_offsets (inside the data section, contiguous,
 * non-overlapping, sizes matching), file size and checksums. Caller frees
 * with teeny_st_file_destroy; NULL is a no-op. */
TEENY_API teeny_status teeny_st_open(const char *path, teeny_st_file **out);
TEENY_API void teeny_st_file_destroy(teeny_st_file *f);
/* Deprecated: the older name of teeny_st_file_destroy, kept for the
 * applications that call it. */
TEENY_API void teeny_st_close(teeny_st_file *f);
/* Tensors in file order; the name is borrowed (NULL out of range). */
TEENY_API int teeny_st_count(const teeny_st_file *f);
TEENY_API const char *teeny_st_name(const teeny_st_file *f, int i);
/* A tensor's dtype (0: F32, 1: I64), rank and shape (TEENY_ST_MAX_DIMS
 * entries of room); any out pointer may be NULL. TEENY_ERR_FORMAT when
 * the file has no such tensor. */
TEENY_API teeny_status teeny_st_info(const teeny_st_file *f, const char *name, int *dtype_is_i64, int *ndim,
    int64_t *shape);
/* Copy an F32 tensor into dst, whose shape must equal the file's
 * (TEENY_ERR_SHAPE; a 0-d tensor matches a dst of one element);
 * TEENY_ERR_FORMAT for a missing name or another dtype. Errors go to
 * dst's context. Does not wait for the device. */
TEENY_API teeny_status teeny_st_read_f32(const teeny_st_file *f, const char *name, teeny_tensor *dst);
/* Copy an I64 tensor of count elements into host memory. */
TEENY_API teeny_status teeny_st_read_i64(const teeny_st_file *f, const char *name, int64_t *dst, size_t count);
/* A __metadata__ string (borrowed), or NULL. */
TEENY_API const char *teeny_st_metadata(const teeny_st_file *f, const char *key);

/* IDX (MNIST, Fashion-MNIST): magic 0x00 0x00 0x08 ndim, ndim (1..4)
 * big-endian u32 sizes (each >= 1), then exactly their product of u8
 * values. Plain or gzip-compressed. */
typedef struct teeny_idx teeny_idx;
/* TEENY_ERR_FORMAT for a bad magic, a type other than u8 (0x08), a rank
 * outside 1..4, a zero size, more than 2^31 - 1 values, truncated or
 * trailing data; TEENY_ERR_IO when the file cannot be opened. Caller frees
 * with teeny_idx_destroy. */
TEENY_API teeny_status teeny_idx_load(const char *path, teeny_idx **out);
/* NULL is a no-op. */
TEENY_API void teeny_idx_destroy(teeny_idx *idx);
/* Deprecated: the older name of teeny_idx_destroy, kept for the
 * applications that call it. */
TEENY_API void teeny_idx_free(teeny_idx *idx);
TEENY_API int teeny_idx_ndim(const teeny_idx *idx);
/* -1 for an axis out of range or NULL. */
TEENY_API int64_t teeny_idx_dim(const teeny_idx *idx, int axis);
/* The values, row-major; borrowed, lives as long as idx. */
TEENY_API const uint8_t *teeny_idx_data(const teeny_idx *idx);
/* Check a 1-d label file: every value < n_classes (1..256);
 * TEENY_ERR_FORMAT naming the first bad index, TEENY_ERR_SHAPE when not 1-d. */
TEENY_API teeny_status teeny_idx_check_labels(const teeny_idx *labels, int n_classes);

/* ---- graph building-block ops --------------------------------------------
 * Small op families the graph executor composes networks from; each is
 * also an op-table entry. Tensors are fp32 unless stated int32; every one
 * may be a view. Outputs may not overlap inputs (except where stated), and
 * every backward overwrites its outputs. Reductions are deterministic (no
 * atomics, fixed summation order): the same inputs give bit-identical
 * results on the same device. */

/* y = a * b element-wise, all the same numel; y may alias a or b exactly. */
TEENY_API teeny_status teeny_mul(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, teeny_tensor *y);
/* da = dy * b, db = dy * a; da or db may be NULL (not computed), each may
 * alias any input exactly, but not each other. */
TEENY_API teeny_status teeny_mul_backward(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b,
    const teeny_tensor *dy, teeny_tensor *da, teeny_tensor *db);

/* 2-D pooling over x [B, C, H, W] -> y [B, C, OH, OW]. [0] = H, [1] = W.
 * With the fields of 0.1 alone (kernel, stride, pad; the later ones 0),
 * PyTorch's semantics: OH = floor((H + 2*pad - kernel) / stride) + 1,
 * kernel and stride >= 1, 0 <= pad <= kernel / 2, H + 2*pad >= kernel.
 * The fields appended later (each 0 keeps the old meaning, which an
 * initializer that stops early leaves them; TEENY_POOL2D_PARAMS_INIT
 * spells them out) add what ONNX's MaxPool/AveragePool and PyTorch's
 * options express. Per axis, with d = dilation (0 counts as 1), the
 * window's taps are d apart, its span K = d*(kernel - 1) + 1, the
 * padding before the input pad and after it pe = pad + pad_end_extra
 * (ONNX's pads begin and end: pad_end_extra = end - begin):
 *   OH = floor((H + pad + pe - K) / stride) + 1, or with ceil_mode the
 *        ceiling, less one where that last window would start at or past
 *        H + pad (PyTorch's rule, and ONNX's);
 *   H + pad + pe >= K, pad >= 0, pe >= 0, dilation >= 0, flags 0 or 1;
 *   pad, pe <= K / 2 unless large_pads (ONNX allows any padding: a window
 *        entirely in the padding then gives -inf with argmax -1 for max
 *        pooling, 0 for an average with count_include_pad and NaN (0/0)
 *        for one without).
 * Average pooling divides each window by the taps it counts: those in the
 * padded input (count_include_pad, PyTorch's default; with ceil_mode a
 * window past the padding counts only its taps inside, as PyTorch) or,
 * with exclude_pad, those inside x. Max pooling ignores exclude_pad.
 * Fields appended after 0.1 change the struct's size: rebuild code that
 * was compiled against the older header. */
typedef struct {
    int kernel[2], stride[2], pad[2];
    int pad_end_extra[2]; /* the padding after the input is pad + pad_end_extra (>= 0) */
    int dilation[2];      /* taps dilation apart; 0 or 1: contiguous */
    int ceil_mode;        /* 1: ceiling output size (PyTorch ceil_mode, ONNX ceil_mode) */
    int exclude_pad;      /* average: 1 divides by the taps inside x (count_include_pad = 0) */
    int large_pads;       /* 1: either padding may pass half the kernel span (ONNX) */
} teeny_pool2d_params;
#define TEENY_POOL2D_PARAMS_INIT { {2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, 0, 0, 0 }
/* y_shape from x_shape: TEENY_ERR_ARG for bad parameters, TEENY_ERR_SHAPE
 * for a size < 1 or a kernel span larger than the padded input,
 * TEENY_ERR_RANGE when x or y has more than 2^31 - 1 elements or
 * H + pad + pe (W + ...) or the kernel span passes 2^31 - 1; every pooling
 * call and graph builder checks the same. The window itself may hold more
 * than 2^31 positions (a large kernel over a small padded input). */
TEENY_API teeny_status teeny_pool2d_output_shape(const teeny_pool2d_params *p, const int64_t x_shape[4], int64_t y_shape[4]);
/* Max pooling; padding counts as -inf, a NaN in a window wins (as PyTorch).
 * argmax (int32, shape of y) receives each maximum's index h * W + w within
 * its [H, W] plane (the first one on ties); it may be NULL when no
 * backward follows. */
TEENY_API teeny_status teeny_maxpool2d_forward(teeny_ctx *ctx, const teeny_pool2d_params *p,
    const teeny_tensor *x, teeny_tensor *y, teeny_tensor *argmax);
/* dx[i] = sum of dy over the windows whose argmax is i (a gather: no
 * atomics). x supplies the shape only. */
TEENY_API teeny_status teeny_maxpool2d_backward(teeny_ctx *ctx, const teeny_pool2d_params *p,
    const teeny_tensor *x, const teeny_tensor *argmax, const teeny_tensor *dy, teeny_tensor *dx);
/* ONNX MaxPool's Indices: indices (int32, shape of y) = the index of each
 * window's maximum in all of x flattened, ((b*C + c)*H + h)*W + w, or
 * with column_major (ONNX storage_order 1) (b*C + c)*H*W + w*H + h; -1
 * for a window entirely in the padding. Same windows and ties as
 * teeny_maxpool2d_forward; no gradient. */
TEENY_API teeny_status teeny_maxpool2d_indices(teeny_ctx *ctx, const teeny_pool2d_params *p,
    const teeny_tensor *x, int column_major, teeny_tensor *indices);
/* Average pooling. With the fields of 0.1 (count_include_pad, PyTorch's
 * default) every window divides by kernel[0] * kernel[1] (formed in
 * 64-bit integers, then rounded to float once, so windows past 2^31
 * positions are exact too); with the later fields each window divides by
 * the taps it counts (above). */
TEENY_API teeny_status teeny_avgpool2d_forward(teeny_ctx *ctx, const teeny_pool2d_params *p,
    const teeny_tensor *x, teeny_tensor *y);
TEENY_API teeny_status teeny_avgpool2d_backward(teeny_ctx *ctx, const teeny_pool2d_params *p,
    const teeny_tensor *x, const teeny_tensor *dy, teeny_tensor *dx);
/* y [B, C] (or [B, C, 1, 1]) = mean of x [B, C, H, W] over H, W. */
TEENY_API teeny_status teeny_global_avgpool_forward(teeny_ctx *ctx, const teeny_tensor *x, teeny_tensor *y);
/* dx[b, c, h, w] = dy[b, c] / (H * W). */
TEENY_API teeny_status teeny_global_avgpool_backward(teeny_ctx *ctx, const teeny_tensor *dy, teeny_tensor *dx);
/* y [B, C] (or [B, C, 1, 1]) = max of x [B, C, H, W] over H, W (a NaN
 * wins); argmax (int32 [B, C] or [B, C, 1, 1], or NULL when no backward
 * follows) receives h * W + w of the first maximum. */
TEENY_API teeny_status teeny_global_maxpool_forward(teeny_ctx *ctx, const teeny_tensor *x, teeny_tensor *y,
    teeny_tensor *argmax);
/* dx[b, c, h, w] = dy[b, c] where h * W + w is the plane's argmax, else 0. */
TEENY_API teeny_status teeny_global_maxpool_backward(teeny_ctx *ctx, const teeny_tensor *argmax,
    const teeny_tensor *dy, teeny_tensor *dx);

/* Fully connected layer, PyTorch layout: x [N, in], w [out, in], bias [out]
 * or NULL, y [N, out] = x * w^T + bias. */
TEENY_API teeny_status teeny_linear_forward(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *w,
    const teeny_tensor *bias, teeny_tensor *y);
/* dx [N, in] = dy * w, dw [out, in] = dy^T * x, db [out] = column sums of
 * dy; any of dx, dw, db may be NULL (not computed). */
TEENY_API teeny_status teeny_linear_backward(teeny_ctx *ctx, const teeny_tensor *x, const teeny_tensor *w,
    const teeny_tensor *dy, teeny_tensor *dx, teeny_tensor *dw, teeny_tensor *db);

/* Softmax cross-entropy: logits [N, K], labels int32 [N] with values in
 * [0, K), loss [1] = mean over the batch of -log softmax(logits)[label]
 * (max-subtracted log-sum-exp). probs [N, K] receives softmax(logits) for
 * the backward pass; it may be NULL when none follows. Labels are not
 * checked on the host (that would need a host sync): a label outside
 * [0, K) is never used as an index; it makes loss (and its row of dlogits)
 * NaN, so it is visible. Logits [N, K, d1, ...] with labels [N, d1, ...]
 * are taken too (teeny_softmax_cross_entropy_ex_forward with p NULL). */
TEENY_API teeny_status teeny_softmax_cross_entropy_forward(teeny_ctx *ctx, const teeny_tensor *logits,
    const teeny_tensor *labels, teeny_tensor *loss, teeny_tensor *probs);
/* dlogits [N, K] = (probs - onehot(labels)) * dloss[0] / N; dloss is a [1]
 * device tensor (1 for the plain mean loss). */
TEENY_API teeny_status teeny_softmax_cross_entropy_backward(teeny_ctx *ctx, const teeny_tensor *probs,
    const teeny_tensor *labels, const teeny_tensor *dloss, teeny_tensor *dlogits);
/* Softmax cross-entropy with ONNX's and PyTorch's options
 * (SoftmaxCrossEntropyLoss, F.cross_entropy). A zeroed teeny_ce_params (or
 * p NULL) is the plain mean loss above, bit for bit.
 *   logits [N, K] with labels [N], or [N, K, d1, ...] (rank up to 5) with
 *     labels [N, d1, ...]: each (n, d1, ...) is a row over the K classes
 *     (axis 1), as both libraries take it; probs has the logits' shape.
 *   weights: NULL, or fp32 [K] class weights: row n's loss is
 *     w[label_n] * (-log softmax(logits_n)[label_n]) (w = 1 without).
 *   use_ignore_index: rows whose label equals ignore_index (any value,
 *     also one outside [0, K)) have loss 0, weight 0 and a zero row of
 *     dlogits. Any other label outside [0, K) makes its row's loss, its
 *     row of dlogits and so a sum or mean NaN, as above.
 *   reduction: TEENY_REDUCTION_MEAN: loss [1] = sum of the rows' losses /
 *     sum of w[label] over the rows not ignored (the weighted mean of both
 *     libraries); when every row is ignored that is 0/0 = NaN, as PyTorch,
 *     ONNX's reference and onnxruntime give (dlogits is then 0, every row
 *     being ignored). TEENY_REDUCTION_SUM: loss [1] = the sum.
 *     TEENY_REDUCTION_NONE: loss of the labels' shape = each row's loss.
 *     Any other value: TEENY_ERR_ARG.
 * Statuses: weights not fp32 [K]: TEENY_ERR_SHAPE; loss (dloss) must hold
 * 1 element (the labels' count for NONE): TEENY_ERR_SHAPE; labels not of
 * the shape above: TEENY_ERR_SHAPE; the rest as the plain calls.
 * Sums run in a fixed order (the same bits run to run). */
typedef enum { TEENY_REDUCTION_MEAN = 0, TEENY_REDUCTION_SUM = 1, TEENY_REDUCTION_NONE = 2 } teeny_reduction;
typedef struct {
    teeny_reduction reduction;
    int use_ignore_index;
    int ignore_index;
} teeny_ce_params;
TEENY_API teeny_status teeny_softmax_cross_entropy_ex_forward(teeny_ctx *ctx, const teeny_tensor *logits,
    const teeny_tensor *labels, const teeny_tensor *weights, const teeny_ce_params *p, teeny_tensor *loss,
    teeny_tensor *probs);
/* dlogits [N, K] = (probs - onehot(labels)) * w[label] * g, g = dloss[0] /
 * (sum of weights) for MEAN, dloss[0] for SUM, dloss[row] for NONE (dloss
 * of the labels' count); ignored rows 0. weights and p as in the forward
 * call; dlogits (and probs) of the logits' shape. */
TEENY_API teeny_status teeny_softmax_cross_entropy_ex_backward(teeny_ctx *ctx, const teeny_tensor *probs,
    const teeny_tensor *labels, const teeny_tensor *weights, const teeny_ce_params *p, const teeny_tensor *dloss,
    teeny_tensor *dlogits);
/* out int32 [N] = index of the largest value of each row of x [N, K] (the
 * first one on ties; a NaN counts as largest). For accuracy counts. */
TEENY_API teeny_status teeny_argmax_rows(teeny_ctx *ctx, const teeny_tensor *x, teeny_tensor *out);

/* Concatenate n >= 1 tensors along dimension 1 (channels): xs[i] is
 * [B, C_i, ...] (rank 2..5, every dimension but 1 equal to y's), y is
 * [B, sum C_i, ...]. The backward pass is teeny_split_channels. */
TEENY_API teeny_status teeny_concat_channels(teeny_ctx *ctx, int n, const teeny_tensor *const *xs, teeny_tensor *y);
/* The inverse: ys[i] receives channels [sum_{j<i} C_j, + C_i) of x; the
 * ys may not overlap x or each other. The backward pass is
 * teeny_concat_channels. */
TEENY_API teeny_status teeny_split_channels(teeny_ctx *ctx, const teeny_tensor *x, int n, teeny_tensor *const *ys);

/* ---- graphs ----------------------------------------------------------
 * A graph is a DAG of nodes built through teeny_graph_* calls; shapes are
 * inferred (and mismatches reported, naming both nodes) when a node is
 * added. Parameters (PyTorch's default initialization from the graph's
 * seeded generator) and persistent state such as running statistics belong
 * to the graph and carry dotted names ("conv1.weight", "bn1.running_var")
 * that checkpoints use. Compiling for a batch size and a mode gives a plan:
 * every kernel built up front, the backward pass derived (gradients summed
 * where a value fans out), device memory planned by liveness, and each pass
 * recorded as a list of launches whose arguments are set once. Running a
 * pass replays its list; nothing blocks unless the host asks for data.
 * Several plans (e.g. a training batch and a smaller evaluation batch) share
 * the graph's parameters. A graph and its plans are used by one thread at a
 * time; the graph must outlive its plans. */
typedef struct teeny_graph teeny_graph;
typedef struct teeny_plan teeny_plan;
typedef int32_t teeny_node; /* a node's index in its graph; -1: none */

/* seed drives parameter initialization. Caller frees with teeny_graph_destroy. */
TEENY_API teeny_status teeny_graph_create(teeny_ctx *ctx, uint64_t seed, teeny_graph **out);
/* NULL is a no-op. Destroy the graph's plans first. */
TEENY_API void teeny_graph_destroy(teeny_graph *g);
/* An fp32 input of rank 1..5; shape[0] is the batch dimension and must be
 * -1 (resolved at compile). name may be NULL ("input<index>"). Every other
 * size >= 1 (TEENY_ERR_ARG); one sample of more than 2^31 - 1 elements is
 * TEENY_ERR_RANGE. */
TEENY_API teeny_status teeny_graph_input(teeny_graph *g, const char *name, int ndim, const int64_t *shape, teeny_node *out);
/* An int32 input [batch] (class labels). */
TEENY_API teeny_status teeny_graph_labels(teeny_graph *g, const char *name, teeny_node *out);
/* A view of x with a new shape (-1 in one dimension: inferred); no copy.
 * TEENY_ERR_ARG for a size < 1 other than that one -1; TEENY_ERR_SHAPE
 * when the sizes' product (overflow-checked) is not x's element count or,
 * with a -1, does not divide it. */
TEENY_API teeny_status teeny_graph_reshape(teeny_graph *g, const char *name, teeny_node x, int ndim, const int64_t *shape, teeny_node *out);
/* [B, ...] -> [B, rest] as a view. */
TEENY_API teeny_status teeny_graph_flatten(teeny_graph *g, const char *name, teeny_node x, teeny_node *out);
/* Keep a node's value readable after forward (the loss always is). */
TEENY_API teeny_status teeny_graph_mark_output(teeny_graph *g, teeny_node n);
/* A constant: an fp32 value of rank 1..5 fixed when the graph is built
 * (data: the product of shape values, copied now; borrowed for the call).
 * Its shape is its own: no dimension is the batch. It is not a parameter
 * (no gradient, not in checkpoints, not trained); ops take it as any
 * other input, e.g. the operand of teeny_graph_binary. Its plan tensor
 * (teeny_plan_tensor) is a view of the graph's copy. TEENY_ERR_ARG for
 * a rank outside 1..5 or NULL shape or data, and as teeny_tensor_create
 * for the sizes. */
TEENY_API teeny_status teeny_graph_constant(teeny_graph *g, const char *name, int ndim, const int64_t *shape, const float *data, teeny_node *out);
/* Layers. name (may be NULL: "<op><index>") prefixes the node's parameter
 * names; out receives the new node (-1 on failure). Shapes follow the
 * matching eager functions; mismatches fail here, naming the nodes. A
 * node whose value, parameters or state would have more than 2^31 - 1
 * elements for a batch of 1 is TEENY_ERR_RANGE here; for a plan's batch,
 * at teeny_graph_compile (before anything is allocated). */
/* Batch normalization over [N, C] or [B, C, H, W]: params "weight", "bias";
 * state "running_mean", "running_var" (+ "num_batches_tracked" in
 * checkpoints). Training plans use batch statistics, inference plans the
 * running ones. */
TEENY_API teeny_status teeny_graph_batchnorm(teeny_graph *g, const char *name, teeny_node x, float momentum, float eps, teeny_node *out);
/* Batch normalization followed by act, as one node: y = act(bn(x)), the
 * same parameters, state and names as teeny_graph_batchnorm (so the same
 * checkpoints). act: TEENY_ACT_NONE (the plain op), TEENY_ACT_RELU or
 * TEENY_ACT_SILU; any other is TEENY_ERR_ARG. The activation runs in the
 * normalizing kernel's store, and the backward rebuilds the
 * pre-activation from x and the statistics, so training takes no extra
 * launches and no extra buffer over the plain op (an activation node
 * after it costs one launch each way). Matches batchnorm then
 * teeny_graph_activation to rounding. */
TEENY_API teeny_status teeny_graph_batchnorm_act(teeny_graph *g, const char *name, teeny_node x, float momentum, float eps, teeny_act act, teeny_node *out);
TEENY_API teeny_status teeny_graph_activation(teeny_graph *g, const char *name, teeny_node x, teeny_act act, teeny_node *out);
/* Group A (ONNX phase 2) graph ops; shapes, statuses and gradients as the
 * eager functions state them. binary: a and b may be any nodes whose
 * shapes broadcast (a teeny_graph_constant as an operand). reduce: p
 * borrowed for the call; reducing axis 0 (the batch) is allowed. */
TEENY_API teeny_status teeny_graph_binary(teeny_graph *g, const char *name, teeny_binary_op op, teeny_node a, teeny_node b, teeny_node *out);
TEENY_API teeny_status teeny_graph_reduce(teeny_graph *g, const char *name, teeny_node x, const teeny_reduce_params *p, teeny_node *out);
/* Batched matmul of two nodes (either may be a teeny_graph_constant). */
TEENY_API teeny_status teeny_graph_matmul(teeny_graph *g, const char *name, teeny_node a, teeny_node b, teeny_node *out);
/* Softmax along axis (negative: from the end), log 1 for log softmax. */
TEENY_API teeny_status teeny_graph_softmax(teeny_graph *g, const char *name, teeny_node x, int axis, int log, teeny_node *out);
/* The same with teeny_softmax_params (masked_zero: fully masked lines give 0). */
TEENY_API teeny_status teeny_graph_softmax_ex(teeny_graph *g, const char *name, teeny_node x, const teeny_softmax_params *p, teeny_node *out);
/* Layer norm over x's axes from axis on (negative: from the end; axis 0
 * normalizes across the batch): params "weight" (ones) and, with bias,
 * "bias" (zeros), x's shape from axis on. */
TEENY_API teeny_status teeny_graph_layernorm(teeny_graph *g, const char *name, teeny_node x, int axis, float eps, int bias, teeny_node *out);
/* Layout ops, as the eager functions (arrays borrowed for the call; perm,
 * lo, hi with x's rank entries). gather takes its indices from the host
 * (copied: an int32 constant node "<name>.indices" of ndim/shape). */
TEENY_API teeny_status teeny_graph_transpose(teeny_graph *g, const char *name, teeny_node x, const int *perm, teeny_node *out);
TEENY_API teeny_status teeny_graph_slice(teeny_graph *g, const char *name, teeny_node x, const teeny_slice_params *p, teeny_node *out);
TEENY_API teeny_status teeny_graph_pad(teeny_graph *g, const char *name, teeny_node x, const int64_t *lo, const int64_t *hi, float value, teeny_node *out);
TEENY_API teeny_status teeny_graph_expand(teeny_graph *g, const char *name, teeny_node x, int ndim, const int64_t *shape, teeny_node *out);
/* More than 4 inputs become a chain of nodes ("<name>.part<k>"), as teeny_graph_concat. */
TEENY_API teeny_status teeny_graph_concat_axis(teeny_graph *g, const char *name, int axis, int n, const teeny_node *xs, teeny_node *out);
TEENY_API teeny_status teeny_graph_gather(teeny_graph *g, const char *name, teeny_node x, int axis, int ndim, const int64_t *shape, const int32_t *indices, teeny_node *out);
/* An activation with parameters (teeny_act_params; p borrowed for the call). */
TEENY_API teeny_status teeny_graph_activation_ex(teeny_graph *g, const char *name, teeny_node x, const teeny_act_params *p, teeny_node *out);
TEENY_API teeny_status teeny_graph_add(teeny_graph *g, const char *name, teeny_node a, teeny_node b, teeny_node *out);
TEENY_API teeny_status teeny_graph_mul(teeny_graph *g, const char *name, teeny_node a, teeny_node b, teeny_node *out);
/* Conv2d: params "weight" [out_channels, C/groups, kernel_h, kernel_w] and,
 * with bias, "bias"; p NULL means TEENY_CONV2D_PARAMS_INIT. */
TEENY_API teeny_status teeny_graph_conv2d(teeny_graph *g, const char *name, teeny_node x, int out_channels, int kernel_h, int kernel_w, const teeny_conv2d_params *p, int bias, teeny_node *out);
/* A convolution followed by act, as one node: y = act(conv(x) + bias),
 * the same parameters and names as teeny_graph_conv2d (so the same
 * checkpoints). act: TEENY_ACT_NONE (the plain op), TEENY_ACT_RELU or
 * TEENY_ACT_SILU; any other is TEENY_ERR_ARG. Inference plans apply the
 * activation in the convolution's store (one launch fewer than a separate
 * activation node); training plans keep the pre-activation for the
 * backward, as the two nodes would, and take the same launches. Matches
 * teeny_graph_conv2d then teeny_graph_activation to rounding. */
TEENY_API teeny_status teeny_graph_conv2d_act(teeny_graph *g, const char *name, teeny_node x, int out_channels, int kernel_h, int kernel_w, const teeny_conv2d_params *p, int bias, teeny_act act, teeny_node *out);
/* The same with any activation and its parameters (act borrowed for the
 * call; NULL is TEENY_ERR_ARG, an activation outside teeny_act too, when
 * the node is added or the plan compiled, as teeny_graph_activation_ex's).
 * Inference plans apply ReLU and SiLU in the convolution's store, and on
 * CPUs (tunings with the CPU GEMM) also HardSwish and Clip to [0, 6]
 * (ReLU6); any other activation runs in place after the convolution, in
 * the node's second launch (on GPUs the two more cost the convolution
 * 5-11% wherever they were compiled in). Matches
 * teeny_graph_conv2d then teeny_graph_activation_ex to the bit in
 * inference (the same formulas), to rounding in training. */
TEENY_API teeny_status teeny_graph_conv2d_act_ex(teeny_graph *g, const char *name, teeny_node x, int out_channels, int kernel_h, int kernel_w, const teeny_conv2d_params *p, int bias, const teeny_act_params *act, teeny_node *out);
/* Transposed convolution: params "weight" [C, out_channels/groups,
 * kernel_h, kernel_w] (C: x's channels) and, with bias, "bias"; p NULL
 * means TEENY_CONV_TRANSPOSE2D_PARAMS_INIT. out_channels, kernel_h,
 * kernel_w outside 1..2^24, groups not dividing out_channels, or p's values
 * outside teeny_conv_transpose2d_forward's rules: TEENY_ERR_ARG (shape
 * errors as there), *out -1. */
TEENY_API teeny_status teeny_graph_conv_transpose2d(teeny_graph *g, const char *name, teeny_node x, int out_channels,
    int kernel_h, int kernel_w, const teeny_conv_transpose2d_params *p, int bias, teeny_node *out);
/* Pooling (p NULL: TEENY_POOL2D_PARAMS_INIT); global average pool gives [B, C]. */
TEENY_API teeny_status teeny_graph_maxpool2d(teeny_graph *g, const char *name, teeny_node x, const teeny_pool2d_params *p, teeny_node *out);
TEENY_API teeny_status teeny_graph_avgpool2d(teeny_graph *g, const char *name, teeny_node x, const teeny_pool2d_params *p, teeny_node *out);
TEENY_API teeny_status teeny_graph_global_avgpool(teeny_graph *g, const char *name, teeny_node x, teeny_node *out);
/* Global max pooling: [B, C] (training saves its argmax). */
TEENY_API teeny_status teeny_graph_global_maxpool(teeny_graph *g, const char *name, teeny_node x, teeny_node *out);
/* ONNX MaxPool's Indices (teeny_maxpool2d_indices): an int32 value of the
 * pooled shape; no gradient flows through it. */
TEENY_API teeny_status teeny_graph_maxpool2d_indices(teeny_graph *g, const char *name, teeny_node x,
    const teeny_pool2d_params *p, int column_major, teeny_node *out);
/* Resize over H, W (teeny_resize2d_forward; p borrowed for the call): x
 * [B, C, H, W] -> [B, C, p->size[0], p->size[1]]; no parameters. */
TEENY_API teeny_status teeny_graph_resize2d(teeny_graph *g, const char *name, teeny_node x, const teeny_resize2d_params *p,
    teeny_node *out);
/* Linear on [B, in]: params "weight" [out_features, in], with bias "bias". */
TEENY_API teeny_status teeny_graph_linear(teeny_graph *g, const char *name, teeny_node x, int out_features, int bias, teeny_node *out);
/* Mean softmax cross-entropy of logits [B, K] against int32 labels [B]: a [1] value. */
TEENY_API teeny_status teeny_graph_softmax_cross_entropy(teeny_graph *g, const char *name, teeny_node logits, teeny_node labels, teeny_node *out);
/* The same with teeny_softmax_cross_entropy_ex_forward's options: weights
 * a node of fp32 [K] (a teeny_graph_constant or input: it gets no gradient,
 * and a training plan whose parameters reach it fails to compile with
 * TEENY_ERR_UNSUPPORTED, as PyTorch refuses the derivative for the weight)
 * or -1 for none; p NULL: the defaults. The
 * value is [1], or the labels' shape ([B]) for TEENY_REDUCTION_NONE.
 * (teeny_graph_labels makes [B] labels, for logits [B, K]; the ONNX
 * importer also makes [B, d1, ...] labels for scores [B, K, d1, ...].)
 * Statuses as teeny_softmax_cross_entropy_ex_forward's (a bad reduction
 * TEENY_ERR_ARG, weights not fp32 [K] TEENY_ERR_SHAPE), *out -1 and no
 * node added. */
TEENY_API teeny_status teeny_graph_softmax_cross_entropy_ex(teeny_graph *g, const char *name, teeny_node logits,
    teeny_node labels, teeny_node weights, const teeny_ce_params *p, teeny_node *out);
/* Channel concatenation of n >= 1 inputs (more than 4 become a chain of
 * concat nodes, the inner ones named "<name>.part<k>"), and a channel slice [start, start + count) (split). */
TEENY_API teeny_status teeny_graph_concat(teeny_graph *g, const char *name, int n, const teeny_node *xs, teeny_node *out);
TEENY_API teeny_status teeny_graph_slice_channels(teeny_graph *g, const char *name, teeny_node x, int start, int count, teeny_node *out);
/* Attention on q [BH, Nq, D], k [BH, Nk, D], v [BH, Nk, Dv]. */
TEENY_API teeny_status teeny_graph_attention(teeny_graph *g, const char *name, teeny_node q, teeny_node k, teeny_node v, float scale, teeny_node *out);
typedef struct teeny_attention_params teeny_attention_params; /* defined under "attention" below */
/* Attention with masks (teeny_attention_forward_ex): mask is a node or -1
 * (none); p NULL means TEENY_ATTENTION_PARAMS_INIT. Statuses as
 * teeny_attention_forward_ex's, *out -1 and no node added. A training plan
 * in which the mask would need a gradient (it depends on a parameter) fails
 * to compile with TEENY_ERR_UNSUPPORTED. */
TEENY_API teeny_status teeny_graph_attention_ex(teeny_graph *g, const char *name, teeny_node q, teeny_node k,
    teeny_node v, teeny_node mask, const teeny_attention_params *p, teeny_node *out);
/* PSA attention straight on NCHW qkv (the fused kernels), and the
 * reference's rearrangement ops. */
TEENY_API teeny_status teeny_graph_psa_attention(teeny_graph *g, const char *name, teeny_node qkv, int heads, int key_dim, teeny_node *out);
TEENY_API teeny_status teeny_graph_psa_pack_qkv(teeny_graph *g, const char *name, teeny_node qkv, int heads, int key_dim, teeny_node *out);
TEENY_API teeny_status teeny_graph_psa_extract_v(teeny_graph *g, const char *name, teeny_node qkv, int heads, int key_dim, teeny_node *out);
TEENY_API teeny_status teeny_graph_psa_merge_attn(teeny_graph *g, const char *name, teeny_node o_lo, teeny_node o_hi, int heads, int height, int width, teeny_node *out);

/* Introspection. */
TEENY_API int teeny_graph_node_count(const teeny_graph *g);
/* The node's dotted name (borrowed) and its value's rank and shape for a
 * batch of 1 (a graph an ONNX import made: for the model's batch,
 * teeny_onnx_batch): shape[0..ndim) are the sizes and shape[ndim..5) are set to 0.
 * Any of name, ndim, shape may be NULL (not wanted); on failure nothing is
 * written. */
TEENY_API teeny_status teeny_graph_node_info(const teeny_graph *g, teeny_node n, const char **name, int *ndim, int64_t shape[5]);
/* Learned parameters, in creation order; grad is NULL until a training plan
 * exists. Tensors are borrowed (they live as long as g); the name is valid
 * until the next teeny_graph_param / teeny_graph_state call on this thread. */
TEENY_API int teeny_graph_param_count(const teeny_graph *g);
TEENY_API teeny_status teeny_graph_param(const teeny_graph *g, int i, const char **name, teeny_tensor **value, teeny_tensor **grad);
/* Persistent non-learned state (running statistics); borrowed as above. */
TEENY_API int teeny_graph_state_count(const teeny_graph *g);
TEENY_API teeny_status teeny_graph_state(const teeny_graph *g, int i, const char **name, teeny_tensor **value);
/* Tie (share) parameters: the parameter named name (as teeny_graph_param
 * names it, e.g. "fc2.weight") becomes the parameter named to, for weight
 * tying (a language model's embedding and output projection, an ONNX
 * initializer that feeds several nodes). Afterwards both nodes read one
 * tensor (to's; name's own tensor and gradient are destroyed, so pointers
 * to them from teeny_graph_param are invalid, and its values are lost);
 * training plans give it one gradient, the sum of every use's in a fixed
 * order (deterministic), so an optimizer and a checkpoint see one
 * parameter: name no longer appears in teeny_graph_param (the count drops
 * by one and later indices shift down) and checkpoints hold it once, under
 * to's name. Whether it is trained is to's (an importer's freeze).
 * TEENY_ERR_ARG: g, name or to NULL, no parameter of either name (a
 * parameter already tied has none), or name equal to to;
 * TEENY_ERR_SHAPE: shapes differ; TEENY_ERR_STATE: a plan of g exists
 * (tie before compiling), or name is already shared by other parameters.
 * On failure nothing changes. */
TEENY_API teeny_status teeny_graph_tie_param(teeny_graph *g, const char *name, const char *to);
/* Training forwards run so far. Every batch-norm node also keeps its own
 * num_batches_tracked (as PyTorch does), saved and loaded per node; each
 * training forward adds one to all of them. set_train_steps sets the
 * graph's count and every batch norm's to steps (>= 0, else TEENY_ERR_ARG;
 * it returned void before; callers now get the status). A training forward
 * with a counter at INT64_MAX is refused with TEENY_ERR_RANGE. */
TEENY_API int64_t teeny_graph_train_steps(const teeny_graph *g);
TEENY_API teeny_status teeny_graph_set_train_steps(teeny_graph *g, int64_t steps);

typedef struct {
    int64_t batch;      /* resolves every -1 batch dimension */
    int training;       /* 1: forward with batch statistics + backward; 0: inference */
    teeny_node loss;    /* training: the scalar to differentiate (-1: the last node) */
    int reuse_memory;   /* 1: share device memory between values whose lifetimes do not overlap */
} teeny_plan_params;
#define TEENY_PLAN_PARAMS_INIT { 1, 1, -1, 1 }

/* Compile g for one batch size and mode. Caller frees with teeny_plan_destroy.
 * batch outside 1..2^31 - 1 is TEENY_ERR_ARG; a value or kept tensor of
 * more than 2^31 - 1 elements at that batch TEENY_ERR_RANGE. */
TEENY_API teeny_status teeny_graph_compile(teeny_graph *g, const teeny_plan_params *p, teeny_plan **out);
/* Options of teeny_graph_compile_ex (0.2): start from
 * TEENY_PLAN_OPTIONS_INIT, which sets struct_size; a field past the
 * caller's struct_size counts as 0, so the struct can grow. */
typedef struct {
    size_t struct_size; /* sizeof(teeny_plan_options) */
    /* 1 (inference plans only): the graph's parameters and state are
     * constants while the plan lives, so compiling may derive data from
     * them once instead of at every forward: CPU convolutions pack their
     * weights at compile (one launch a convolution fewer each forward,
     * the same bits). After changing a parameter or state tensor (an
     * optimizer step, a checkpoint load, a write), call teeny_plan_refresh
     * before the plan's next forward; until then it computes with the old
     * values in part. 0: every forward reads them as they are. */
    int frozen_params;
} teeny_plan_options;
#define TEENY_PLAN_OPTIONS_INIT { sizeof(teeny_plan_options), 0 }

/* teeny_graph_compile with options (opts NULL: all 0, as teeny_graph_compile).
 * TEENY_ERR_ARG also for opts->struct_size below the 0.2 layout's,
 * frozen_params not 0 or 1, or frozen_params 1 with p->training 1. */
TEENY_API teeny_status teeny_graph_compile_ex(teeny_graph *g, const teeny_plan_params *p, const teeny_plan_options *opts, teeny_plan **out);
/* A plan compiled with frozen_params: derive its data from the parameters
 * and state again (enqueued, in order before any later replay). Any other
 * plan: nothing to do, TEENY_OK. TEENY_ERR_ARG for a NULL plan. */
TEENY_API teeny_status teeny_plan_refresh(teeny_plan *p);
TEENY_API void teeny_plan_destroy(teeny_plan *p);
/* The tensor holding node n's value in this plan (borrowed): write inputs
 * and labels into it before forward; read marked outputs after. */
TEENY_API teeny_status teeny_plan_tensor(teeny_plan *p, teeny_node n, teeny_tensor **t);
/* Replays; they enqueue and return. */
TEENY_API teeny_status teeny_plan_forward(teeny_plan *p);
/* backward overwrites the gradient of every parameter the graph had when
 * the plan was compiled: with the gradient of this plan's loss, or with
 * zeros for a parameter that does not reach that loss (another head's, a
 * dead branch's), so when several plans share the parameters an optimizer
 * step never re-applies a gradient another plan left. zero_grad zeroes
 * the same gradients. */
TEENY_API teeny_status teeny_plan_backward(teeny_plan *p);
TEENY_API teeny_status teeny_plan_zero_grad(teeny_plan *p);
/* Host syncs: read node n's value (count == numel; an int32 value, such as
 * labels or teeny_graph_maxpool2d_indices', converted to float), or the
 * scalar loss. TEENY_ERR_STATE before the plan's first forward (there is
 * no value yet; inputs excepted), and so for loss_start. */
TEENY_API teeny_status teeny_plan_read(teeny_plan *p, teeny_node n, float *dst, size_t count);
TEENY_API teeny_status teeny_plan_read_loss(teeny_plan *p, float *loss);
/* Non-blocking loss read: start enqueues the copy, wait blocks for it. */
TEENY_API teeny_status teeny_plan_loss_start(teeny_plan *p);
TEENY_API teeny_status teeny_plan_loss_wait(teeny_plan *p, float *loss);
/* Host syncs made through this plan so far. */
TEENY_API int64_t teeny_plan_host_syncs(const teeny_plan *p);
/* Device memory of the plan: planned peak of its value/gradient/workspace
 * arena, the total without reuse, and the bytes actually allocated for it
 * (parameters, gradients of parameters and inputs not included). */
TEENY_API teeny_status teeny_plan_memory(const teeny_plan *p, size_t *planned_peak, size_t *no_reuse_total, size_t *allocated);
/* Launches recorded for forward and backward. */
TEENY_API teeny_status teeny_plan_launches(const teeny_plan *p, int *forward, int *backward);

/* Checkpoints (safetensors): every parameter and state tensor under its
 * dotted name, "<bn>.num_batches_tracked" (I64) per batch norm, and with
 * opt the optimizer state under "optimizer.<parameter name>.<state>"
 * ("optimizer.fc.weight.exp_avg", "optimizer.conv1.weight.momentum_buffer")
 * plus "optimizer.step"; n_meta string pairs go to __metadata__. opt's
 * parameters must be parameters of g (teeny_graph_param's tensors; all of
 * them or a subset, in any order), else TEENY_ERR_ARG and no file is
 * written. The file is written crash-safely (temp file, fsync, rename,
 * fsync of the directory) with a checksum that loading verifies. Host
 * sync. Earlier versions keyed the optimizer state by the
 * optimizer's position ("optimizer.exp_avg.<i>"), which pairs the wrong
 * moments with equal-shaped parameters listed in another order. */
TEENY_API teeny_status teeny_graph_save(teeny_graph *g, const teeny_optimizer *opt, const char *path, int n_meta,
    const char *const *keys, const char *const *values);
/* Load a checkpoint saved by teeny_graph_save (or a matching PyTorch
 * state_dict saved with safetensors); with opt also its state, each state
 * tensor from its parameter's name (so the optimizer may list them in
 * another order than the one saved). Every value is checked before any is
 * written (every tensor present with its dtype and shape;
 * num_batches_tracked and optimizer.step >= 0): TEENY_ERR_ARG (opt over a
 * tensor that is not one of g's parameters) / TEENY_ERR_FORMAT /
 * TEENY_ERR_SHAPE / TEENY_ERR_IO / TEENY_ERR_RANGE (a negative count)
 * leave everything unchanged. A file of an earlier version, with
 * positional optimizer keys, is TEENY_ERR_FORMAT with opt (the message
 * says why) and loads with opt NULL. Each batch norm gets its own
 * num_batches_tracked; the graph's train step count becomes the largest. */
TEENY_API teeny_status teeny_graph_load(teeny_graph *g, teeny_optimizer *opt, const char *path);
/* Copy a checkpoint's metadata string into value (cap bytes). */
TEENY_API teeny_status teeny_checkpoint_metadata(const char *path, const char *key, char *value, size_t cap);

/* ---- attention ------------------------------------------------------------
 * o = softmax(scale * q k^T) v per matrix bh, computed flash-attention style
 * (the Nq x Nk matrix is never stored):
 *   q [BH, Nq, D], k [BH, Nk, D], v [BH, Nk, Dv], o [BH, Nq, Dv],
 *   lse [BH, Nq] = log sum_j exp(scale * q_i . k_j), saved for the backward.
 * D <= 128 and Dv <= 256; larger head dims return TEENY_ERR_UNSUPPORTED.
 * Any Nq, Nk >= 1. Shapes that disagree return TEENY_ERR_SHAPE, a scale that
 * is not finite TEENY_ERR_ARG, an output overlapping any other argument
 * TEENY_ERR_ARG. Deterministic (no atomics): the same inputs give
 * bit-identical results on the same device. The arithmetic is the
 * library's choice per device: with tf32 off, NVIDIA GPUs whose tensor
 * cores pass the tf32 probe (teeny_ctx_tf32_active's) compute head dims up
 * to 64 as 3xTF32, each operand split into two tf32 parts and three
 * products summed in fp32, as PyTorch's fp32 SDPA does there: its error
 * is fp32's (normalized RMS within 2x of the FMA kernels', ~1e-7), its
 * bits are not the FMA kernels'; TEENY_ATTN_TF32_X3=0 keeps the FMA
 * kernels. The first such call runs the probe (a host sync). */
/* lse may be NULL when no backward follows. */
TEENY_API teeny_status teeny_attention_forward(teeny_ctx *ctx, const teeny_tensor *q, const teeny_tensor *k,
    const teeny_tensor *v, float scale, teeny_tensor *o, teeny_tensor *lse);
/* Gradients from o, lse of the forward and d_o = dL/do; overwrites dq, dk,
 * dv (shaped like q, k, v); any of them may be NULL: not computed. Uses
 * 2*BH*Nq floats of context workspace (2 more per row on a device whose
 * loop limit splits the key walk below). Where |lse_i| >= 256, lse_i
 * cannot hold log sum exp(s - max) to fp32's precision (all of it is lost
 * for a row whose every key is masked by -1e30): the backward walks that
 * row's keys again for its maximum and sum, one work-item per row in the
 * launch that computes rowsum(dO * O), instead of trusting lse; other rows
 * take exp(s - lse) as it is. */
TEENY_API teeny_status teeny_attention_backward(teeny_ctx *ctx, const teeny_tensor *q, const teeny_tensor *k,
    const teeny_tensor *v, const teeny_tensor *o, const teeny_tensor *lse, const teeny_tensor *d_o,
    float scale, teeny_tensor *dq, teeny_tensor *dk, teeny_tensor *dv);

/* Attention with masks. Per matrix bh = b*H + h (H = heads, B = BH / H),
 * the scores of query i and key j are
 *   s = scale * q_i . k_j
 *   s = softcap * tanh(s / softcap)                 (softcap > 0 only)
 *   s = s + mask[b, h, i, j]                        (mask given)
 *   s = -inf where causal and j > i + causal_offset
 * then o_i = sum_j softmax_j(s) v_j and lse_i = log sum_j exp(s), as ONNX
 * Attention (opset 23) orders them: softcap before the mask, so -inf mask
 * entries stay -inf.
 * - causal_offset 0 aligns the causal mask top-left (PyTorch's is_causal);
 *   Nk - Nq aligns it bottom-right (queries at the end of a KV cache).
 *   Key tiles wholly past a block's last visible key are not computed.
 * - mask: fp32 [Nq, Nk], [Hm, Nq, Nk] or [Bm, Hm, Nq, Nk], right-aligned
 *   against [B, H, Nq, Nk]; every dim is 1 (broadcast) or the full size
 *   (a key-padding mask is [B, 1, 1, Nk]). Entries are finite or -inf
 *   (+inf or NaN give NaN rows). The mask gets no gradient.
 * - A query row with every key masked (all s = -inf) gives o_i = 0,
 *   lse_i = -inf and zero gradients from that row (ONNX 1.23's reference
 *   semantics; PyTorch's math SDPA gives NaN there).
 * - A large finite mask value (-1e30, or -FLT_MAX as Hugging Face pads)
 *   masks nothing: a row with the same such value on every key has every
 *   score equal in fp32, o_i is the average of v and its gradients are the
 *   uniform softmax's, as in float64.
 * Errors, before anything is enqueued: p NULL, causal not 0 or 1, a
 * nonzero causal_offset without causal, causal_offset outside [-Nq, Nk],
 * a negative or non-finite softcap, a non-finite scale: TEENY_ERR_ARG;
 * heads < 0 or not dividing BH, a mask of another rank or a mask dim
 * neither 1 nor full: TEENY_ERR_SHAPE; otherwise as
 * teeny_attention_forward / _backward. */
struct teeny_attention_params {
    float scale;       /* 0: 1 / sqrt(D) (ONNX's and PyTorch's default) */
    int causal;        /* 1: key j is visible to query i iff j <= i + causal_offset */
    int causal_offset; /* in [-Nq, Nk]; must be 0 without causal */
    int heads;         /* H of the mask's [B, H, Nq, Nk]; 0: H = BH (B = 1), so a 3-D mask is per matrix */
    float softcap;     /* > 0: cap the scores with softcap * tanh(s / softcap); 0: off */
};
#define TEENY_ATTENTION_PARAMS_INIT { 0.0f, 0, 0, 0, 0.0f }
/* o and lse as teeny_attention_forward (lse may be NULL); mask may be NULL.
 * p is borrowed for the call. The plain functions are this with no mask and
 * p = {scale} (a scale of 0 there means 0). */
TEENY_API teeny_status teeny_attention_forward_ex(teeny_ctx *ctx, const teeny_tensor *q, const teeny_tensor *k,
    const teeny_tensor *v, const teeny_tensor *mask, const teeny_attention_params *p, teeny_tensor *o,
    teeny_tensor *lse);
/* Gradients as teeny_attention_backward, with the same mask and p as the
 * forward that gave o and lse; the mask gets none. */
TEENY_API teeny_status teeny_attention_backward_ex(teeny_ctx *ctx, const teeny_tensor *q, const teeny_tensor *k,
    const teeny_tensor *v, const teeny_tensor *mask, const teeny_attention_params *p, const teeny_tensor *o,
    const teeny_tensor *lse, const teeny_tensor *d_o, teeny_tensor *dq, teeny_tensor *dk, teeny_tensor *dv);

/* PSA attention (YOLO C2PSA). qkv [B, heads*4*kd, H, W] NCHW, N = H*W; head
 * h's channels [h*4kd, +kd) are Q, the next kd K, the next 2kd V (V_lo,
 * V_hi). o [B, heads*2*kd, H, W] = V softmax(Q^T K kd^-1/2)^T per head,
 * lse [B*heads, H*W]. The fused functions read qkv and write o (d_qkv) in
 * place through strides: one kernel forward, three backward, no copies.
 * Errors: heads or key_dim < 1 TEENY_ERR_ARG; heads*4*key_dim beyond int32
 * TEENY_ERR_RANGE; key_dim > 128 (fused functions) TEENY_ERR_UNSUPPORTED;
 * channel counts, B*heads or H*W that disagree TEENY_ERR_SHAPE; an output
 * overlapping an input TEENY_ERR_ARG. */
/* lse may be NULL when no backward follows. */
TEENY_API teeny_status teeny_psa_attention_forward(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim,
    teeny_tensor *o, teeny_tensor *lse);
/* Overwrites all of d_qkv (Q, K and V channels). */
TEENY_API teeny_status teeny_psa_attention_backward(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim,
    const teeny_tensor *o, const teeny_tensor *lse, const teeny_tensor *d_o, teeny_tensor *d_qkv);
/* The reference's rearrangement ops. packed is [4, B*heads, H*W, kd] with
 * sections Q, K, V_lo, V_hi; attention on (Q, K, V_lo) and (Q, K, V_hi)
 * followed by merge gives what teeny_psa_attention_forward gives. Every
 * backward overwrites its outputs; where the pipeline's gradients meet (dQ,
 * dK of the two halves; extract_v next to pack) sum them with teeny_add. */
TEENY_API teeny_status teeny_psa_pack_qkv(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim, teeny_tensor *packed);
/* Overwrites every channel of d_qkv. */
TEENY_API teeny_status teeny_psa_pack_qkv_backward(teeny_ctx *ctx, const teeny_tensor *d_packed, int heads, int key_dim, teeny_tensor *d_qkv);
/* v [B, heads*2*kd, H, W]: the V channels of qkv. */
TEENY_API teeny_status teeny_psa_extract_v(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim, teeny_tensor *v);
/* Overwrites d_qkv: d_v in the V channels, zeros in the Q and K channels. */
TEENY_API teeny_status teeny_psa_extract_v_backward(teeny_ctx *ctx, const teeny_tensor *d_v, int heads, int key_dim, teeny_tensor *d_qkv);
/* o_lo, o_hi [B*heads, H*W, kd] -> out [B, heads*2*kd, H, W] (o_lo the first
 * kd channels of each head, o_hi the next kd); B, H, W from out. */
TEENY_API teeny_status teeny_psa_merge_attn(teeny_ctx *ctx, const teeny_tensor *o_lo, const teeny_tensor *o_hi, int heads, teeny_tensor *out);
/* Overwrites d_lo and d_hi [B*heads, H*W, kd]; either (not both) may be NULL. */
TEENY_API teeny_status teeny_psa_merge_attn_backward(teeny_ctx *ctx, const teeny_tensor *d_out, int heads, teeny_tensor *d_lo, teeny_tensor *d_hi);

#ifdef __cplusplus
}
#endif
#endif /* TEENYCL_H */
