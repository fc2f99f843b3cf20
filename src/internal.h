/*
 * internal.h -- what the library's sources share and applications never see:
 * the context and tensor structs, error reporting, logging, the kernel-build
 * layer and argument-checking helpers. Names are teeny__ (internal).
 */
#ifndef TEENY_INTERNAL_H
#define TEENY_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "teenycl.h"
#include "core/clwrap.h"
#include "tune/tune.h"

#define TEENY_MAX_DIMS 5
#define TEENY_ERR_CAP 65536 /* room for a full build log */

#if defined(__GNUC__)
#define TEENY__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TEENY__PRINTF(a, b)
#endif

/* Internal invariants only; never for user input or device limits. It logs
 * and returns the status from the enclosing function instead of aborting. */
#define TEENY_ASSERT(ctx, cond)                                                 \
    do {                                                                        \
        if (!(cond))                                                            \
            return teeny__error((ctx), TEENY_ERR_STATE,                         \
                                "internal invariant failed: %s (%s:%d)", #cond, \
                                __FILE__, __LINE__);                            \
    } while (0)

#define TEENY__WS_SLOTS 8 /* workspace buffers one op may hold at once */

typedef struct teeny__program teeny__program;
typedef struct teeny__recorder teeny__recorder;

/* Frees what a layer above device.c hangs on the context (build.c's
 * programs, profile.c's events); see teeny__ctx_on_release. */
typedef void (*teeny__release_fn)(teeny_ctx *ctx);
#define TEENY__RELEASE_HOOKS 4

typedef enum { TEENY__F32, TEENY__I32 } teeny__dtype;

struct teeny_ctx {
    int refs;          /* 1 for the handle + 1 per live tensor */
    int handle_alive;  /* teeny_ctx_destroy not yet called */
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    teeny_device_info info;
    int tf32;
    teeny__device_caps caps;  /* what the device profiles are matched on (device.c) */
    teeny__tune tune;         /* the device profile and the kernel variant (tune.c) */
    int work_group_size;      /* default 1-D work-group size: the profile's within the device's maximum (tune.c) */
    int kernel_stores;        /* simulator workaround: fill and upload with kernels (set in simulator.c) */
    int known_compiler;       /* the compiler takes TEENY_HINTS (device.c) */
    int build_warnings;       /* successful builds whose log warned (build.c; the tests want 0) */
    int loop_probed;          /* loop_limit is known (probe.c) */
    int64_t loop_limit;       /* trips a work-item's loops may run in all; 0: no limit (probe.c) */
    int tf32_probed;          /* tf32_mma is known (probe.c) */
    int tf32_mma;             /* the tf32 mma.sync probe built, ran and was exact (probe.c) */
    teeny__program *programs; /* in-memory program cache (build.c) */
    teeny__release_fn release_hooks[TEENY__RELEASE_HOOKS]; /* run at destruction, newest first */
    int n_release_hooks;
    struct {
        cl_mem buf;
        size_t bytes;
        int busy;             /* taken by the op running now */
    } ws[TEENY__WS_SLOTS];    /* eager workspace pool (tensor.c) */
    int op_depth;             /* teeny__op_run nesting; workspace is returned at 0 */
    teeny__recorder *rec;     /* set while a graph records its launches */
    int profiling;            /* teeny_profile_begin .. end */
    cl_event *prof_events;
    const char **prof_names;  /* kernel name of each event */
    int prof_count, prof_cap; /* prof_count < prof_cap: the arrays grow (profile.c) */
    int prof_lost;            /* events dropped when growing failed; teeny_profile_end reports them */
    int64_t items_enqueued;   /* work-items of every kernel enqueued (profile.c; tests see how work was split) */
    char err[TEENY_ERR_CAP];
};

struct teeny_tensor {
    teeny_ctx *ctx;
    teeny_tensor *base; /* a view keeps its base alive */
    int refs;           /* 1 for the handle + 1 per view or other holder (teeny__tensor_hold) */
    int handle_alive;
    cl_mem buf;
    size_t offset;      /* in elements, from the start of buf */
    teeny__dtype dtype;
    int ndim;
    int64_t shape[TEENY_MAX_DIMS];
    int64_t numel;
};

/* ---- errors and logging (status.c) ---- */
teeny_status teeny__error(const teeny_ctx *ctx, teeny_status st, const char *fmt, ...) TEENY__PRINTF(3, 4);
teeny_status teeny__cl_error(const teeny_ctx *ctx, cl_int err, const char *call);
void teeny__clear_error(const teeny_ctx *ctx);
void teeny__log(teeny_log_level level, const char *fmt, ...) TEENY__PRINTF(2, 3);
/* Append to ctx's last error (the build log after the message). */
void teeny__error_append(const teeny_ctx *ctx, const char *text);

/* ---- device (device.c) ---- */
teeny_status teeny__device_query(teeny_ctx *ctx, cl_platform_id p, cl_device_id d, teeny_device_info *info);
/* Whether the device (its platform_name, vendor, device_name, type and
 * indices) matches a device spec (teeny_ctx_create's list, README "Choosing
 * a device"); a malformed "P:D" matches nothing. */
int teeny__device_matches(const teeny_device_info *info, const char *spec);
/* Register fn to run when the context is freed (after the last tensor),
 * before its queue and cl_context are released; registering the same fn
 * again is a no-op. This is how device.c frees what the layers above it
 * own without calling up into them. */
teeny_status teeny__ctx_on_release(teeny_ctx *ctx, teeny__release_fn fn);

/* ---- simulator workarounds (simulator.c) ----
 * Set ctx->kernel_stores on the oclgrind simulator (see simulator.c). */
void teeny__sim_detect(teeny_ctx *ctx);
/* On ctx->kernel_stores devices only: overwrite a new buffer of bytes with
 * NaN in one whole-buffer store (host sync). Callers test the flag. */
teeny_status teeny__sim_buffer_born(teeny_ctx *ctx, cl_mem buf, size_t bytes);

/* Layers, each calling only those below it (tools/check-layers.sh):
 *   launch.c -> build.c -> cache.c
 *   launch.c, build.c -> record.c -> profile.c
 *   record.c, tensor.c -> simulator.c;  everything -> device.c, status.c */

/* ---- kernel build (build.c) ----
 * family names an embedded cl/<family>.cl; options are -D flags that shape
 * the code. Programs and kernels are cached per context; the kernel is
 * borrowed (the context owns it). */
teeny_status teeny__kernel_get(teeny_ctx *ctx, const char *family, const char *options,
                               const char *kernel_name, cl_kernel *out);
/* A fresh kernel object the caller releases (graphs own one per node). */
teeny_status teeny__kernel_create(teeny_ctx *ctx, const char *family, const char *options,
                                  const char *kernel_name, cl_kernel *out);

/* ---- kernel limits (build.c) ----
 * What the compiler allows for one built kernel, queried once when the
 * kernel object is created (local bytes: its static __local arrays). Ops
 * ask these instead of mirroring the kernels' formulas from device limits. */
typedef struct {
    size_t max_items;     /* CL_KERNEL_WORK_GROUP_SIZE */
    size_t multiple;      /* CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE */
    uint64_t local_bytes; /* CL_KERNEL_LOCAL_MEM_SIZE */
} teeny__klimits;
teeny_status teeny__kernel_limits(teeny_ctx *ctx, cl_kernel k, const char *name, teeny__klimits *out);
/* teeny__kernel_get when a work-group of items work-items with dyn_local
 * bytes of __local arguments fits the built kernel; else
 * TEENY_ERR_UNSUPPORTED naming both. out NULL: only check (never records). */
teeny_status teeny__kernel_fit(teeny_ctx *ctx, const char *family, const char *options, const char *name,
                               size_t items, size_t dyn_local_bytes, cl_kernel *out);
/* One kernel a configuration launches, and the work-group it needs. */
typedef struct {
    const char *name;
    size_t items, dyn_local;
} teeny__kernel_need;
/* Check every kernel of one configuration (options) before anything is
 * enqueued; the first misfit's TEENY_ERR_UNSUPPORTED. */
teeny_status teeny__kernels_fit(teeny_ctx *ctx, const char *family, const char *options,
                                const teeny__kernel_need *need, int n);
/* The common fallback: options fmt % wg (one %d) for wg, wg/2, ... down to
 * floor, every kernel in names launched with wg items; the first that fits
 * goes to *wg_out and opt (the message cleared), else the last misfit. */
teeny_status teeny__fit_halving(teeny_ctx *ctx, const char *family, const char *fmt, const char *const *names,
                                int n, int wg, int floor, int *wg_out, char *opt, size_t cap);
/* A 1-D local size for a kernel that works with any: want, or the kernel's
 * maximum rounded down to its preferred multiple when want exceeds it. */
/* The smallest work-group a reduction kernel is built for: below it a
 * device is too constrained to be worth a variant (TEENY_ERR_UNSUPPORTED). */
#define TEENY__WG_FLOOR 16
size_t teeny__local_clamp(teeny_ctx *ctx, cl_kernel k, const char *name, size_t want);
/* The embedded sources, generated at build time from cl/ *.cl
 * (build/gen/kernels.c): one NUL-terminated byte array per family. */
typedef struct {
    const char *name;
    const unsigned char *data;
    size_t len;
} teeny__embedded_source;
extern const teeny__embedded_source teeny__sources[];
extern const int teeny__n_sources;
/* The embedded source of one family ("common" included), or NULL. */
const char *teeny__kernel_source(const char *family, size_t *len);

/* ---- disk cache (cache.c) ----
 * Where binaries are cached; "" when the disk cache is off. */
void teeny__cache_dir(char *out, size_t cap);
/* The full key of a build (malloc'd into *key, caller frees) and its entry
 * path under dir; 0 when out of host memory (nothing recorded). */
int teeny__cache_key(const teeny_ctx *ctx, const char *dir, const char *src, const char *full_options, char **key,
                     char *path, size_t path_cap);
/* The entry at path for key: its binary and kernel names (caller frees
 * both), or 0 when absent or unusable (logged; the caller rebuilds). */
int teeny__cache_load(const char *path, const char *key, unsigned char **bin, size_t *len, char **names);
/* Whether a program built from an entry holds the right kernels: have (its
 * kernel names, ";"-separated) are the names stored in the entry, in any
 * order, and each is declared in src, the family's source. */
int teeny__cache_names_ok(const char *have, const char *stored, const char *src);
/* Write an entry atomically; failures are logged and cost a rebuild later. */
void teeny__cache_store(const char *dir, const char *path, const char *key, const char *names,
                        const unsigned char *bin, size_t len);

/* ---- launches (launch.c) ----
 * One kernel argument: size bytes at ptr (ptr NULL: a __local buffer of
 * size bytes). The typed constructors check the argument's C type. */
typedef struct {
    size_t size;
    const void *ptr;
} teeny__karg;
static inline const cl_mem *teeny__karg_mem_ptr(const cl_mem *m) { return m; }
static inline const int *teeny__karg_int_ptr(const int *i) { return i; }
#define TEENY__KARG(x) ((teeny__karg){sizeof(x), &(x)}) /* any lvalue, its own size */
#define TEENY__KARG_MEM(m) ((teeny__karg){sizeof(cl_mem), teeny__karg_mem_ptr(&(m))})
#define TEENY__KARG_INT(i) ((teeny__karg){sizeof(int), teeny__karg_int_ptr(&(i))})
#define TEENY__KARG_LOCAL(bytes) ((teeny__karg){(bytes), NULL})
/* Set arguments 0..n-1 of k from a; the first failure names its index. */
teeny_status teeny__set_arg_list(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, const teeny__karg *a, int n);
/* The same from a list of (size, pointer) pairs ending with 0 (older call
 * sites; new code builds a teeny__karg array). */
teeny_status teeny__set_args(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, ...);
/* Enqueue over a 1-3 D grid; global sizes are rounded up to the local size. */
teeny_status teeny__launch(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, int dims,
                           const size_t *global, const size_t *local);
/* The work-group size for a barrier-free CPU variant over items work-items:
 * a CPU runs one work-group per compute unit at a time, so the largest
 * power of two up to 64 that leaves every compute unit 4 groups (at least 1). */
size_t teeny__cpu_local(const teeny_ctx *ctx, size_t items);
/* teeny__kernel_get + teeny__set_arg_list + teeny__launch. */
teeny_status teeny__run_kernel(teeny_ctx *ctx, const char *family, const char *options, const char *kernel_name,
                               const teeny__karg *a, int n, int dims, const size_t *global, const size_t *local);

/* ---- probes (probe.c) ----
 * The loop trips one work-item of a kernel may run in all on this device
 * (half the limit it showed, a margin for the ops' estimates), INT64_MAX
 * where loops are not limited. Probed by running a kernel on first use (a
 * host sync; not recorded). Ops whose per-item trips grow with the
 * problem split their launches to stay under it. */
teeny_status teeny__loop_budget(teeny_ctx *ctx, int64_t *budget);
/* TEENY_OK where one work-item of kernel name may run trips loop trips
 * (every loop counted as not unrolled, one more trip per loop entry);
 * else TEENY_ERR_UNSUPPORTED, naming the kernel and the device's limit. */
teeny_status teeny__loop_check(teeny_ctx *ctx, const char *name, int64_t trips);
/* How many of a loop's n units one piece of work (a launch, a partial)
 * of kernel name may take so that an item's trips, fixed + per_unit *
 * units, stay within the budget: all n where they fit (always on a device
 * without a limit), else as many as fit, evened out over the pieces
 * (n <= 0: 1). TEENY_ERR_UNSUPPORTED (teeny__loop_check's message) where
 * not even one unit fits. */
teeny_status teeny__loop_split(teeny_ctx *ctx, const char *name, int64_t n, int64_t fixed, int64_t per_unit,
                               int64_t *per_piece);
/* Whether the device runs tf32 tensor-core mma (NVIDIA inline PTX): a
 * probe kernel built, ran and gave the exact product. Probed on first use
 * where the compiler may take inline PTX (info.has_nvidia_ptx); 0
 * elsewhere. The families use it only when teeny_ctx_set_tf32 asked. */
teeny_status teeny__tf32_capable(teeny_ctx *ctx, int *capable);

/* Fill n floats of buf from element offset off with value (recordable). */
teeny_status teeny__fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value);
/* Simulator workaround (ctx->kernel_stores, simulator.c): copy n 32-bit
 * words from the start of src to dst at element offset off with ew_copy. */
teeny_status teeny__sim_upload(teeny_ctx *ctx, cl_mem src, cl_mem dst, size_t off, size_t n);

/* ---- recording (record.c) ----
 * Between record_begin and record_end, teeny__kernel_get hands out fresh
 * kernel objects owned by the recorder, teeny__launch and teeny__fill append
 * to the recorder instead of enqueueing, and teeny__scratch returns a fresh
 * buffer owned by the recorder. Replaying enqueues exactly the recorded
 * launches: no object creation, no argument setting. */
teeny_status teeny__recorder_create(teeny_ctx *ctx, teeny__recorder **out);
void teeny__recorder_free(teeny__recorder *rec);
void teeny__record_begin(teeny_ctx *ctx, teeny__recorder *rec);
void teeny__record_end(teeny_ctx *ctx);
int teeny__recorder_count(const teeny__recorder *rec);       /* launches recorded so far */
size_t teeny__recorder_scratch_bytes(const teeny__recorder *rec);
teeny_status teeny__recorder_replay(teeny_ctx *ctx, const teeny__recorder *rec, int from, int to);
/* What launch.c and build.c hand the active recorder (ctx->rec). */
teeny_status teeny__record_launch(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, int dims,
                                  const size_t *g, const size_t *local);
teeny_status teeny__record_fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value);
teeny_status teeny__recorder_add_kernel(teeny_ctx *ctx, teeny__recorder *rec, cl_kernel k,
                                        const teeny__klimits *lim);
/* The limits a recorded kernel was created with; 0 when not one of rec's. */
int teeny__recorder_limits(const teeny__recorder *rec, cl_kernel k, teeny__klimits *out);
/* A fresh workspace buffer the recorder owns (teeny__scratch while recording). */
teeny_status teeny__recorder_scratch(teeny_ctx *ctx, size_t bytes, cl_mem *out);

/* ---- the queue end (profile.c) ----
 * Enqueue one kernel over an already rounded grid; while profiling, its
 * event and name are kept. Every kernel launch, eager or replayed. */
teeny_status teeny__enqueue_kernel(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, cl_uint dims,
                                   const size_t *g, const size_t *local);
/* The same on queue q, a queue of ctx's context (the probes' own). */
teeny_status teeny__enqueue_kernel_on(teeny_ctx *ctx, cl_command_queue q, cl_kernel k, const char *kernel_name,
                                      cl_uint dims, const size_t *g, const size_t *local);
/* clEnqueueFillBuffer of n floats from element offset off (not profiled). */
teeny_status teeny__enqueue_fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value);

/* ---- workspace (tensor.c) ----
 * A device buffer of at least bytes that the calling op owns until its
 * last launch is enqueued: every buffer taken during one op is distinct
 * (a later, larger request never frees an earlier one), and all of them
 * go back to the context's pool when teeny__op_run returns (the queue is
 * in order, so the next op's kernels run after this op's). While a graph
 * records, each request is a fresh buffer the plan owns. */
teeny_status teeny__scratch(teeny_ctx *ctx, size_t bytes, cl_mem *out);
/* Return one buffer early, once the launches that use it are enqueued
 * (a helper that an op calls many times; a no-op for recorded buffers). */
void teeny__scratch_give(teeny_ctx *ctx, cl_mem buf);
/* Return every buffer taken since the outermost op began (teeny__op_run). */
void teeny__scratch_release_all(teeny_ctx *ctx);

/* ---- checking helpers (tensor.c) ----
 * They record a message naming the argument and return a status. */
teeny_status teeny__check_tensor(teeny_ctx *ctx, const teeny_tensor *t, const char *name);
/* The same for int32 arguments (labels, argmax). */
teeny_status teeny__check_tensor_i32(teeny_ctx *ctx, const teeny_tensor *t, const char *name);
teeny_status teeny__check_same_numel(teeny_ctx *ctx, const teeny_tensor *a, const char *an,
                                     const teeny_tensor *b, const char *bn);
teeny_status teeny__check_vector(teeny_ctx *ctx, const teeny_tensor *t, const char *name, int64_t len);
/* "[2, 3, 4]" into buf. */
const char *teeny__shape_str(const teeny_tensor *t, char *buf, size_t cap);
/* Whether two tensors share any element of the same buffer. */
int teeny__overlap(const teeny_tensor *a, const teeny_tensor *b);
/* t[0..n_in) are a call's inputs, t[n_in..n) its outputs (in-place state
 * counts as an output; NULL entries are skipped): every output must be
 * disjoint from every other tensor. fn and names go into the message. */
teeny_status teeny__check_disjoint(teeny_ctx *ctx, const char *fn, const teeny_tensor *const *t,
                                   const char *const *names, int n_in, int n);
/* Reject an output that overlaps an input; exact_ok allows out == in. */
teeny_status teeny__check_alias(teeny_ctx *ctx, const teeny_tensor *out, const char *out_name,
                                const teeny_tensor *in, const char *in_name, int exact_ok);
int teeny__ctx_check(const teeny_ctx *ctx);
/* Keep t's struct and storage alive past teeny_tensor_destroy (which then
 * only clears handle_alive) until the matching drop: how a holder such as
 * the safetensors writer tells a destroyed tensor without reading freed
 * memory. */
void teeny__tensor_hold(teeny_tensor *t);
void teeny__tensor_drop(teeny_tensor *t);

/* int32 element offset of a tensor, for kernels. */
static inline int teeny__off(const teeny_tensor *t) { return (int)t->offset; }

/* ---- files (io/safetensors.c) ----
 * Write n_parts buffers to path crash-safely: a temp file in path's
 * directory named after the writer's host and pid, fsynced, renamed over
 * path, the directory fsynced; temp files of the same target left by a dead
 * writer are removed first. Errors name fn and path and go to ctx (NULL:
 * the thread's error). */
teeny_status teeny__write_file_atomic(const teeny_ctx *ctx, const char *fn, const char *path,
                                      const void *const *parts, const size_t *lens, int n_parts);
/* The same, recording nothing: the reason goes to msg (the kernel cache). */
teeny_status teeny__write_file_atomic_msg(const char *path, const void *const *parts, const size_t *lens,
                                          int n_parts, char *msg, size_t cap);
/* Open path read-only if it is a regular file, without blocking on a FIFO;
 * the descriptor, or -1 with the reason in *why (static text) and errno
 * set (EISDIR for a directory, EINVAL for another non-regular file). */
int teeny__open_regular(const char *path, const char **why);
/* Read the whole regular file at path (opened as above) into *buf, NUL-
 * terminated (caller frees with teeny__free), its size in *len. TEENY_OK,
 * or TEENY_ERR_IO (errno kept from a failed open: ENOENT for a missing
 * file), TEENY_ERR_RANGE or TEENY_ERR_NOMEM with the reason in msg;
 * records nothing. */
teeny_status teeny__read_file(const char *path, unsigned char **buf, size_t *len, char *msg, size_t cap);

/* ---- small helpers (util.c) ---- */
void teeny__strlcpy(char *dst, const char *src, size_t cap);
/* Whether needle occurs in hay, ignoring ASCII case ("" always does). */
int teeny__contains_nocase(const char *hay, const char *needle);
/* FNV-1a 64 of len bytes continuing from h (start: TEENY__FNV_BASIS). The
 * kernel cache keys on two of them with different seeds (128 bits). */
#define TEENY__FNV_BASIS 0xcbf29ce484222325ULL
uint64_t teeny__fnv1a64(uint64_t h, const void *data, size_t len);
/* Make room in *arr (of elem-byte items, *cap of them, n used) for one more
 * by doubling (16 first); 0 when out of memory (*arr unchanged). */
int teeny__grow(void **arr, int *cap, int n, size_t elem);
/* a * b for sizes a, b >= 0; -1 when either is negative or the product
 * passes INT64_MAX (so a caller's "> limit" check must also test < 0). */
int64_t teeny__mul_sizes(int64_t a, int64_t b);
/* The product of n sizes by teeny__mul_sizes: -1 for a negative size or
 * an overflow; 1 for n = 0. */
int64_t teeny__dims_product(const int64_t *dims, int n);
/* "[2, 3, 4]" into buf (truncated to cap); returns buf. */
const char *teeny__dims_str(const int64_t *shape, int ndim, char *buf, size_t cap);
/* Whether n bytes of text are well-formed UTF-8 (no overlong forms,
 * surrogates or code points past U+10FFFF); if not, the first bad byte's
 * offset goes to *bad (may be NULL). */
int teeny__utf8_valid(const void *text, size_t n, size_t *bad);
/* The one strict number parser, for every number read from the
 * environment or a spec: len bytes of text must be a whole decimal integer
 * in [lo, hi] -- digits, with one leading '-' only where lo < 0; no '+',
 * blank, base prefix, exponent or trailing text; no wrap-around. 1 with
 * *out set, else 0 with *why ("is empty", "is not a decimal integer", "is
 * out of range"; static text) and *out untouched. */
int teeny__parse_int(const char *text, size_t len, long long lo, long long hi, long long *out, const char **why);
/* The environment variable name parsed as above: def when unset; when set
 * to anything else (empty included) TEENY_ERR_ARG, recorded in ctx (NULL:
 * the thread's error) with the name, value and range, and *out = def. */
teeny_status teeny__env_int(const teeny_ctx *ctx, const char *name, long long lo, long long hi, long long def,
                            long long *out);
/* Every word- or path-valued variable the library reads (util.c's table),
 * checked at context creation: TEENY_ERR_ARG (the thread's error) for an
 * empty value, a word not listed or an over-long path. */
teeny_status teeny__env_check(void);

#endif
