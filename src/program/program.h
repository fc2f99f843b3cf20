/*
 * program.h -- the program layer's private interface (src/program/):
 * kernel builds, their limits and the embedded sources (build.c), the
 * on-disk binary cache (cache.c), kernel arguments and launches
 * (launch.c), the probes that run a kernel to learn the device (probe.c),
 * the graph launch recorder (record.c) and the queue end with the
 * profiler (profile.c), and the state they keep on the context
 * (ctx->prog).
 */
#ifndef TEENY_PROGRAM_H
#define TEENY_PROGRAM_H

#include "../core/core.h"

typedef struct teeny__program teeny__program;
typedef struct teeny__recorder teeny__recorder;

/* The program layer's state on the context (ctx->prog). */
typedef struct {
    teeny__program *programs; /* in-memory program cache (build.c) */
    int build_warnings;       /* successful builds whose log warned (build.c; the tests want 0) */
    int loop_probed;          /* loop_limit is known (probe.c) */
    int64_t loop_limit;       /* trips a work-item's loops may run in all; 0: no limit (probe.c) */
    int tf32_probed;          /* tf32_mma is known (probe.c) */
    int tf32_mma;             /* the tf32 mma.sync probe built, ran and was exact (probe.c) */
    teeny__recorder *rec;     /* set while a graph records its launches (record.c) */
    int profiling;            /* teeny_profile_begin .. end (profile.c) */
    cl_event *prof_events;
    const char **prof_names;  /* kernel name of each event */
    char **prof_nodes;        /* the graph node each replayed launch belongs to (a copy), else NULL */
    int64_t *prof_items;      /* work-items of each launch (TEENY_PROFILE=2 lists them) */
    int prof_count, prof_cap; /* prof_count < prof_cap: the arrays grow */
    int prof_lost;            /* events dropped when growing failed; teeny_profile_end reports them */
    int64_t items_enqueued;   /* work-items of every kernel enqueued (profile.c; tests see how work was split) */
    int64_t kernels_enqueued; /* kernels enqueued (profile.c; tests count a pass's launches) */
} teeny__program_state;

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
/* Enqueue over items work-items in 1-D, in work-groups of the context's
 * size clamped to what k allows (teeny__local_clamp). */
teeny_status teeny__launch_1d(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, size_t items);
/* The work-group size for a barrier-free CPU variant over items work-items:
 * a CPU runs one work-group per compute unit at a time, so the largest
 * power of two up to 64 that leaves every compute unit 4 groups (at least 1). */
size_t teeny__cpu_local(const teeny_ctx *ctx, size_t items);
/* The CPU window kernels' private band (cl/common.cl's teeny_band_fill:
 * dwconv_fwd_cpu_band, pool_max_forward_cpu): an item's output rows read
 * (R - 1)*sh + (kh - 1)*dh + 1 input rows of (OW - 1)*sw + (kw - 1)*dw + 1
 * columns, TEENY_BAND_FLOATS floats at most, and loops over them in 4-row
 * blocks of 8-column chunks. */
#define TEENY__BAND_FLOATS 2048 /* as cl/common.cl's TEENY_BAND_FLOATS and TEENY_BAND_SLACK */
#define TEENY__BAND_SLACK 16
typedef struct {
    int64_t OH, OW, kh, kw, sh, sw, ph, pw, dh, dw; /* the output, the window, strides, pads before, dilations */
} teeny__band_geom;
/* (probe.c) The most output rows a band item may take: its band within
 * TEENY__BAND_FLOATS and its loop trips (the band's fill, and per 4-row
 * block its chunks, taps and tails) within the device's loop budget; 0
 * where the band does not apply (a column stride past 2, a negative pad,
 * one row's band too wide). */
teeny_status teeny__band_rows_max(teeny_ctx *ctx, const teeny__band_geom *b, int64_t *rows_max);
/* Output rows an item of a CPU variant over planes planes of rows rows:
 * whole planes unless that leaves fewer than 16 items a compute unit, at
 * most rows_max (>= 1). */
int teeny__cpu_rows_per(const teeny_ctx *ctx, int64_t rows, int64_t planes, int64_t rows_max);
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
/* The budget as far as it is known, without probing: INT64_MAX until the
 * probe has run (a plan's choices, after a teeny__loop_check). */
int64_t teeny__loop_budget_known(const teeny_ctx *ctx);
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
/* Replays the launches in [from, to) but the setup ones. */
teeny_status teeny__recorder_replay(teeny_ctx *ctx, const teeny__recorder *rec, int from, int to);
/* Setup launches (record.c's header): on 1 records the launches that
 * follow as setup, 0 as replayed; no effect when not recording. */
void teeny__record_setup(teeny_ctx *ctx, int on);
/* Enqueues every setup launch, in recording order. */
teeny_status teeny__recorder_replay_setup(teeny_ctx *ctx, const teeny__recorder *rec);
/* The launches in [from, to) a replay enqueues (setup ones not counted). */
int teeny__recorder_launches(const teeny__recorder *rec, int from, int to);
/* What launch.c and build.c hand the active recorder (ctx->prog.rec). */
teeny_status teeny__record_launch(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, int dims,
                                  const size_t *g, const size_t *local);
teeny_status teeny__record_fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value);
/* While recording: the graph node the launches recorded next belong to (the profile names it); a
 * no-op otherwise. */
teeny_status teeny__record_node(teeny_ctx *ctx, const char *node);
teeny_status teeny__recorder_add_kernel(teeny_ctx *ctx, teeny__recorder *rec, cl_kernel k,
                                        const teeny__klimits *lim);
/* The limits a recorded kernel was created with; 0 when not one of rec's. */
int teeny__recorder_limits(const teeny__recorder *rec, cl_kernel k, teeny__klimits *out);
/* A fresh workspace buffer the recorder owns (teeny__scratch while recording). */
teeny_status teeny__recorder_scratch(teeny_ctx *ctx, size_t bytes, cl_mem *out);

/* ---- the queue end (profile.c) ----
 * Enqueue one kernel over an already rounded grid; while profiling, its
 * event, name and graph node (NULL: an eager launch) are kept. Every
 * kernel launch, eager or replayed. */
teeny_status teeny__enqueue_kernel(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, const char *node,
                                   cl_uint dims, const size_t *g, const size_t *local);
/* clEnqueueFillBuffer of n floats from element offset off (not profiled). */
teeny_status teeny__enqueue_fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value);

#endif
