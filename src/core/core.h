/*
 * core.h -- the core layer's private interface (src/core/): error reporting
 * and logging (status.c), devices and the context's lifetime (device.c),
 * the simulator workarounds (simulator.c), the small helpers every layer
 * uses (util.c) and the strict environment readers (env.c). The context
 * struct itself is internal.h's: it holds each layer's state in that
 * layer's struct. clwrap.h (every OpenCL call and host allocation) is
 * core's too, and so is test_hooks.h (the test hooks on the context).
 * Names are teeny__ (internal).
 */
#ifndef TEENY_CORE_H
#define TEENY_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "teenycl.h"
#include "clwrap.h"
#include "test_hooks.h"

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

/* Frees what a layer above device.c hangs on the context (build.c's
 * programs, profile.c's events); see teeny__ctx_on_release. */
typedef void (*teeny__release_fn)(teeny_ctx *ctx);
#define TEENY__RELEASE_HOOKS 4

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

/* ---- small helpers (util.c) ---- */
void teeny__strlcpy(char *dst, const char *src, size_t cap);
/* Whether needle occurs in hay, ignoring ASCII case ("" always does). */
int teeny__contains_nocase(const char *hay, const char *needle);
/* FNV-1a 64 of len bytes continuing from h (start: TEENY__FNV_BASIS). The
 * kernel cache keys on two of them with different seeds (128 bits). */
#define TEENY__FNV_BASIS 0xcbf29ce484222325ULL
uint64_t teeny__fnv1a64(uint64_t h, const void *data, size_t len);
/* half.c: one IEEE half <-> fp32 (exact; round to nearest even, overflow to inf, NaN kept). */
float teeny__half_to_f32(uint16_t h);
uint16_t teeny__f32_to_half(float x);
/* Make room in *arr (of elem-byte items, *cap of them, n used) for one more
 * by doubling (16 first); 0 when out of memory (*arr unchanged). */
int teeny__grow(void **arr, int *cap, int n, size_t elem);
/* a * b for sizes a, b >= 0; -1 when either is negative or the product
 * passes INT64_MAX (so a caller's "> limit" check must also test < 0). */
int64_t teeny__mul_sizes(int64_t a, int64_t b);
/* a + b into *out; 0 (and *out untouched) when the sum leaves int64. */
int teeny__add_i64(int64_t a, int64_t b, int64_t *out);
/* ONNX's and NumPy's slice of an axis of dim >= 0 elements by (start, end,
 * step != 0), any int64 values (negative ones count from the end, then
 * each is clamped): the first index *first and the count *len, computed
 * without overflow (a step of INT64_MAX or INT64_MIN selects one element
 * where the range is not empty). */
void teeny__slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *len);
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
/* ---- the environment (env.c) ----
 * The environment variable name parsed as above: def when unset; when set
 * to anything else (empty included) TEENY_ERR_ARG, recorded in ctx (NULL:
 * the thread's error) with the name, value and range, and *out = def. */
teeny_status teeny__env_int(const teeny_ctx *ctx, const char *name, long long lo, long long hi, long long def,
                            long long *out);
/* Every word- or path-valued variable the library reads (env.c's table),
 * checked at context creation: TEENY_ERR_ARG (the thread's error) for an
 * empty value, a word not listed or an over-long path. */
teeny_status teeny__env_check(void);

#endif
