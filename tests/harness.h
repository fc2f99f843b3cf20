/*
 * harness.h -- what every test file shares: the shared test context, a
 * seeded generator, the one error measure, NaN poisoning and tensor
 * helpers. Tests link the static library, so they may also use the
 * internal call-counting and fault layer (src/core/clwrap.h).
 *
 * Error measure (used everywhere): normalized RMS
 *     nrms(out, ref) = ||out - ref||_2 / max(||ref||_2, 1e-6 * sqrt(n))
 * i.e. relative L2 error, falling back to absolute RMS error (against a
 * floor of 1e-6) when the reference itself is essentially zero.
 * Outputs that arise by cancellation (a sum of signed terms, a difference
 * of nearly equal values) are measured against the size of their terms:
 *     nrms_mag(out, ref, mag) = ||out - ref||_2 / max(||ref||_2, ||mag||_2)
 * where mag[i] >= |ref[i]| is what ref[i] would be with every term's
 * absolute value (or the random-walk size sqrt(sum term^2) of a long sum).
 */
#ifndef TEENY_TEST_HARNESS_H
#define TEENY_TEST_HARNESS_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "teenycl.h"
#include "core/test_hooks.h"

/* The process-wide test context (TEENY_DEVICE or the default device). */
teeny_ctx *th_ctx(void);
/* Every test case the suites create (tcase_create is this) puts the shared
 * context's test hooks back after each test, also after one that failed:
 * without forking (CK_FORK=no, the device runs) a loop limit, kernel
 * variant, compute-unit count, forced profile, tf32 switch or test hook
 * left by a failed test would change every later test. */
TCase *th_tcase_create(const char *name);
#define tcase_create(name) th_tcase_create(name)
/* Set one of th_ctx()'s test hooks (src/core/test_hooks.def: TEENY__HOOK_*),
 * or read one (the Winograd count, TEENY__HOOK_CONV_WINO_TAKEN); the
 * fixture above turns them all off after each test. */
void th_hook(teeny__test_hook_id id, int64_t value);
int64_t th_hook_value(teeny__test_hook_id id);
/* Whether the long sweeps (make test-full) or the small subset
 * (sanitizers, oclgrind) were asked for. */
int th_full(void);
int th_small(void);
/* Make th_ctx() take the CPU kernel variants (1) or the portable ones (0)
 * on any device, or its profile's choice again (-1), through the tune
 * layer's hook (teeny__tune_force_variant); returns whether it took the
 * CPU variants before. Suites run both variants wherever a family has two. */
int th_cpu_kernels(int on);
/* Make th_ctx() plan as if its device had n compute units (n > 0), or its
 * own count again (0); returns the previous count. Work splits that follow
 * the unit count (batch-norm partials, GEMM tiles) then take the shapes a
 * larger device takes. */
unsigned th_compute_units(unsigned n);
/* Make th_ctx() act as if its device ended a work-item's loops after n
 * trips in all (n > 0; Mesa's llvmpipe: 65535), or had no limit (n = 0);
 * n < 0 forgets, so the next op that asks runs the probe kernel again.
 * Returns the limit in force before (0: none or not probed yet). */
long long th_loop_limit(long long n);
/* Make th_ctx() run as if it had taken the device profile called name
 * (src/tune/profiles.def), variant included, or its own again (NULL).
 * 0 (and a warning naming the misfit) when the device cannot hold the
 * row's work-groups or local memory: the caller then runs its own. */
int th_profile(const char *name);

/* splitmix64 generator: same seed, same stream on every machine. */
typedef struct { uint64_t s; } th_rng;
th_rng th_rng_make(uint64_t seed);
uint64_t th_next(th_rng *r);
int th_int(th_rng *r, int lo, int hi);            /* uniform in [lo, hi] */
double th_uniform(th_rng *r, double lo, double hi);
double th_normal(th_rng *r);
void th_fill_uniform(th_rng *r, float *x, size_t n, double lo, double hi);
void th_fill_normal(th_rng *r, float *x, size_t n, double mean, double std);

double th_nrms(const float *out, const double *ref, size_t n);
double th_nrms_mag(const float *out, const double *ref, const double *mag, size_t n);
double th_nrms_f(const float *out, const float *ref, size_t n);
/* Index of the first non-finite element, or -1 (catches unwritten NaN). */
long th_first_nonfinite(const float *x, size_t n);
void th_to_double(const float *x, double *y, size_t n);
/* A float64 copy of x (caller frees). */
double *th_dbl(const float *x, size_t n);

/* Tensor helpers that fail the test on error. */
teeny_tensor *th_tensor(teeny_ctx *ctx, int ndim, const int64_t *shape);
teeny_tensor *th_tensor_from(teeny_ctx *ctx, int ndim, const int64_t *shape, const float *data);
void th_poison(teeny_tensor *t);          /* fill with NaN */
float *th_read(const teeny_tensor *t);    /* caller frees */
void *th_malloc(size_t n);

/* One training step of graph g (loss node loss_node; x its first node,
 * the labels its second-to-last) at batch B: compile; each parameter
 * written from vals[i] where set, else read into vals[i]; x and the
 * labels written; one forward and backward. Out: the loss, each
 * parameter's gradient (grads[i], caller frees) and its element count
 * (sizes may be NULL), the plan's launches each way (launches may be
 * NULL); the parameter count returned. g stays the caller's. */
int th_plan_step(teeny_graph *g, teeny_node loss_node, const float *x, size_t nx, const int32_t *lab, int B,
                 float **vals, float *loss, float **grads, size_t *sizes, int launches[2]);
/* Every parameter element's gradient from th_plan_step (the same
 * arguments) against the central difference of the loss at +-1e-2,
 * within 1e-3 + 2e-2 |fd|; what names the case in a failure. Returns the
 * loss at the parameters' own values. */
float th_check_fd_grads(teeny_graph *g, teeny_node loss_node, const float *x, size_t nx, const int32_t *lab, int B,
                        const char *what);

/* An fp32 or int32 device tensor, optionally a view at an odd offset
 * (view_off > 0) inside a poisoned base (NaN, or -7 for int32) whose guard
 * region th_dev_check_guard proves untouched. data may be NULL. */
typedef struct {
    teeny_tensor *base, *t;
    int64_t off, n;
    int i32;
} th_dev;
th_dev th_dev_make(teeny_ctx *ctx, int i32, int ndim, const int64_t *shape, int view_off, const void *data);
void th_dev_check_guard(const th_dev *d, const char *what, const char *repro);
void th_dev_free(th_dev *d);
/* Every element of t still equals v, or is NaN for v NaN (after a call
 * that must be rejected). */
void th_expect_all(const teeny_tensor *t, float v);

/* Assert a status, printing the context's message on mismatch. */
#define TH_OK(ctx, call)                                                                               \
    do {                                                                                               \
        teeny_status th_st_ = (call);                                                                  \
        ck_assert_msg(th_st_ == TEENY_OK, "%s -> %s: %s", #call, teeny_status_name(th_st_),            \
                      teeny_last_error(ctx));                                                          \
    } while (0)
#define TH_STATUS(ctx, want, call)                                                                     \
    do {                                                                                               \
        teeny_status th_st_ = (call);                                                                  \
        ck_assert_msg(th_st_ == (want), "%s -> %s, want %s (%s)", #call, teeny_status_name(th_st_),    \
                      teeny_status_name(want), teeny_last_error(ctx));                                 \
    } while (0)

/* tf32 on th_ctx()'s context for a tf32 test (after checking it is off
 * when not asked for): 1, or 0 with tf32 back off where the device does
 * not run it. TH_SKIP_NO_TF32 skips the test then, with the reason. */
int th_tf32_on(teeny_ctx *ctx);
#define TH_SKIP_NO_TF32(ctx)                                                                        \
    do {                                                                                            \
        if (!th_tf32_on(ctx))                                                                       \
            th_skip("no tf32 tensor cores on %s (the probe kernel did not build or run exactly)",   \
                    teeny_ctx_device_name(ctx));                                                    \
    } while (0)

/* A test that cannot run here (data not installed, device lacks a
 * feature) calls th_skip(reason) from its test body: the skip is recorded
 * with its reason, the test returns, and main() lists every reason and
 * counts it as skipped, never as passed. Formats like printf. */
void th_skip_record(const char *test, const char *fmt, ...);
#define th_skip(...)                               \
    do {                                           \
        th_skip_record(__func__, __VA_ARGS__);     \
        return;                                    \
    } while (0)

/* Suites: one per op family / layer (tests/suites.def). */
#define XX(name) Suite *suite_##name(void);
#include "suites.def"
#undef XX

#endif
