/*
 * harness.c -- shared test context, generator, error measure and helpers
 * (see harness.h), and the test runner's main().
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "internal.h"
#include "ops/ops.h"

static teeny_ctx *shared_ctx;

static void shared_ctx_free(void)
{
    teeny_ctx_destroy(shared_ctx);
    shared_ctx = NULL;
}

teeny_ctx *th_ctx(void)
{
    if (!shared_ctx) {
        teeny_status st = teeny_ctx_create(NULL, &shared_ctx);
        ck_assert_msg(st == TEENY_OK, "cannot create the test context: %s", teeny_last_error(NULL));
    }
    return shared_ctx;
}

int th_cpu_kernels(int on)
{
    teeny_ctx *ctx = th_ctx();
    int was = ctx->tune.variant == TEENY_VARIANT_CPU;
    teeny__tune_force_variant(ctx, on < 0 ? -1 : on ? TEENY_VARIANT_CPU : TEENY_VARIANT_PORTABLE);
    return was;
}

unsigned th_compute_units(unsigned n)
{
    static cl_uint own = 0; /* the device's count (src/core/device.c) */
    teeny_ctx *ctx = th_ctx();
    unsigned was = ctx->info.compute_units;
    if (own == 0)
        own = ctx->info.compute_units;
    ctx->info.compute_units = n > 0 ? n : own;
    return was;
}

static int loop_limit_set; /* th_loop_limit(n >= 0) since the last probe */

long long th_loop_limit(long long n)
{
    teeny_ctx *ctx = th_ctx();
    long long was = ctx->prog.loop_probed ? (long long)ctx->prog.loop_limit : 0;
    ctx->prog.loop_probed = n >= 0;
    ctx->prog.loop_limit = n > 0 ? n : 0;
    loop_limit_set = n >= 0;
    return was;
}

int th_profile(const char *name)
{
    teeny_ctx *ctx = th_ctx();
    int i = name ? teeny__tune_find(name) : -1;
    ck_assert_msg(!name || i >= 0, "no device profile \"%s\" (src/tune/profiles.def)", name);
    teeny_status st = teeny__tune_force(ctx, i);
    ck_assert_msg(st == TEENY_OK || st == TEENY_ERR_UNSUPPORTED, "forcing profile %s: %s", name,
                  teeny_last_error(ctx));
    if (st != TEENY_OK)
        teeny__log(TEENY_LOG_WARN, "%s", teeny_last_error(ctx));
    return st == TEENY_OK;
}

/* The hooks back to the device's own state (a no-op before the shared
 * context exists; the loop limit is probed again only where a test set
 * it). */
static void hooks_reset(void)
{
    if (!shared_ctx)
        return;
    if (loop_limit_set)
        th_loop_limit(-1);
    th_compute_units(0);
    teeny__tune_force(shared_ctx, -1); /* the matched (or TEENY_TUNING) row, its variant */
    teeny_ctx_set_tf32(shared_ctx, 0);
    teeny__test_hooks_off(shared_ctx);
}

void th_hook(teeny__test_hook_id id, int64_t value)
{
    teeny__test_hook_set(th_ctx(), id, value);
}

int64_t th_hook_value(teeny__test_hook_id id)
{
    return teeny__test_hook(th_ctx(), id);
}

int th_tf32_on(teeny_ctx *ctx)
{
    int active = -1;
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    TH_OK(ctx, teeny_ctx_tf32_active(ctx, &active));
    ck_assert_int_eq(active, 0); /* not asked for */
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    TH_OK(ctx, teeny_ctx_tf32_active(ctx, &active));
    if (!active)
        TH_OK(ctx, teeny_ctx_set_tf32(ctx, 0));
    return active;
}

#undef tcase_create
TCase *th_tcase_create(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, NULL, hooks_reset);
    return tc;
}

static int env_flag(const char *name)
{
    const char *s = getenv(name);
    return s && *s && strcmp(s, "0");
}

int th_full(void) { return env_flag("TEENY_TEST_FULL"); }
int th_small(void) { return env_flag("TEENY_TEST_SMALL"); }

th_rng th_rng_make(uint64_t seed)
{
    th_rng r = {seed * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL};
    return r;
}

uint64_t th_next(th_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int th_int(th_rng *r, int lo, int hi)
{
    return lo + (int)(th_next(r) % (uint64_t)(hi - lo + 1));
}

double th_uniform(th_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(th_next(r) >> 11) / 9007199254740992.0);
}

double th_normal(th_rng *r)
{
    double u1 = th_uniform(r, 1e-12, 1.0), u2 = th_uniform(r, 0.0, 1.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void th_fill_uniform(th_rng *r, float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)th_uniform(r, lo, hi);
}

void th_fill_normal(th_rng *r, float *x, size_t n, double mean, double std)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(mean + std * th_normal(r));
}

double th_nrms(const float *out, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    den = sqrt(den);
    if (den < 1e-6 * sqrt((double)n))
        den = 1e-6 * sqrt((double)n);
    return sqrt(num) / den;
}

double th_nrms_mag(const float *out, const double *ref, const double *mag, size_t n)
{
    double num = 0, den = 0, dm = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
        dm += mag[i] * mag[i];
    }
    den = sqrt(den > dm ? den : dm);
    if (den < 1e-6 * sqrt((double)n))
        den = 1e-6 * sqrt((double)n);
    return sqrt(num) / den;
}

double th_nrms_f(const float *out, const float *ref, size_t n)
{
    double *r = th_malloc(n * sizeof *r);
    th_to_double(ref, r, n);
    double e = th_nrms(out, r, n);
    free(r);
    return e;
}

long th_first_nonfinite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return (long)i;
    return -1;
}

void th_to_double(const float *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
}

void th_expect_all(const teeny_tensor *t, float v)
{
    float *o = th_read(t);
    for (int64_t i = 0; i < teeny_tensor_numel(t); i++)
        ck_assert_msg(o[i] == v || (isnan(v) && isnan(o[i])), "a rejected call changed element %lld", (long long)i);
    free(o);
}

double *th_dbl(const float *x, size_t n)
{
    double *y = th_malloc(n * sizeof *y);
    th_to_double(x, y, n);
    return y;
}

void *th_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    ck_assert_msg(p != NULL, "test out of memory (%zu bytes)", n);
    return p;
}

teeny_tensor *th_tensor(teeny_ctx *ctx, int ndim, const int64_t *shape)
{
    teeny_tensor *t = NULL;
    TH_OK(ctx, teeny_tensor_create(ctx, ndim, shape, &t));
    return t;
}

teeny_tensor *th_tensor_from(teeny_ctx *ctx, int ndim, const int64_t *shape, const float *data)
{
    teeny_tensor *t = th_tensor(ctx, ndim, shape);
    TH_OK(ctx, teeny_tensor_write(t, data, (size_t)teeny_tensor_numel(t)));
    return t;
}

void th_poison(teeny_tensor *t)
{
    ck_assert(teeny_tensor_fill(t, NAN) == TEENY_OK);
}

float *th_read(const teeny_tensor *t)
{
    size_t n = (size_t)teeny_tensor_numel(t);
    float *x = th_malloc(n * sizeof *x);
    teeny_status st = teeny_tensor_read(t, x, n);
    ck_assert_msg(st == TEENY_OK, "teeny_tensor_read: %s", teeny_status_name(st));
    return x;
}

int th_plan_step(teeny_graph *g, teeny_node loss_node, const float *x, size_t nx, const int32_t *lab, int B,
                 float **vals, float *loss, float **grads, size_t *sizes, int launches[2])
{
    teeny_ctx *ctx = th_ctx();
    teeny_plan *p;
    teeny_tensor *t;
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = B;
    pp.loss = loss_node;
    TH_OK(ctx, teeny_graph_compile(g, &pp, &p));
    if (launches)
        TH_OK(ctx, teeny_plan_launches(p, &launches[0], &launches[1]));
    int np = teeny_graph_param_count(g);
    for (int i = 0; i < np; i++) {
        teeny_tensor *pt, *gt;
        TH_OK(ctx, teeny_graph_param(g, i, NULL, &pt, &gt));
        if (vals[i])
            TH_OK(ctx, teeny_tensor_write(pt, vals[i], (size_t)teeny_tensor_numel(pt)));
        else
            vals[i] = th_read(pt);
    }
    TH_OK(ctx, teeny_plan_tensor(p, 0, &t)); /* x, the first node */
    TH_OK(ctx, teeny_tensor_write(t, x, nx));
    TH_OK(ctx, teeny_plan_tensor(p, teeny_graph_node_count(g) - 2, &t)); /* the labels */
    TH_OK(ctx, teeny_tensor_write_i32(t, lab, (size_t)B));
    TH_OK(ctx, teeny_plan_forward(p));
    TH_OK(ctx, teeny_plan_backward(p));
    TH_OK(ctx, teeny_plan_read_loss(p, loss));
    for (int i = 0; i < np; i++) {
        teeny_tensor *pt, *gt;
        TH_OK(ctx, teeny_graph_param(g, i, NULL, &pt, &gt));
        grads[i] = th_read(gt);
        if (sizes)
            sizes[i] = (size_t)teeny_tensor_numel(gt);
    }
    teeny_plan_destroy(p);
    return np;
}

float th_check_fd_grads(teeny_graph *g, teeny_node loss_node, const float *x, size_t nx, const int32_t *lab, int B,
                        const char *what)
{
    int np = teeny_graph_param_count(g);
    float **vals = calloc((size_t)np + 1, sizeof *vals), **grads = th_malloc(((size_t)np + 1) * sizeof *grads);
    float **unused = th_malloc(((size_t)np + 1) * sizeof *unused), loss0, lp, lm;
    size_t *sizes = th_malloc(((size_t)np + 1) * sizeof *sizes);
    ck_assert(vals != NULL);
    th_plan_step(g, loss_node, x, nx, lab, B, vals, &loss0, grads, sizes, NULL);
    for (int i = 0; i < np; i++) {
        const char *name;
        TH_OK(th_ctx(), teeny_graph_param(g, i, &name, NULL, NULL));
        for (size_t k = 0; k < sizes[i]; k++) {
            const float h = 1e-2f, v = vals[i][k];
            vals[i][k] = v + h;
            th_plan_step(g, loss_node, x, nx, lab, B, vals, &lp, unused, NULL, NULL);
            for (int j = 0; j < np; j++)
                free(unused[j]);
            vals[i][k] = v - h;
            th_plan_step(g, loss_node, x, nx, lab, B, vals, &lm, unused, NULL, NULL);
            for (int j = 0; j < np; j++)
                free(unused[j]);
            vals[i][k] = v;
            double fd = ((double)lp - (double)lm) / (2.0 * h);
            ck_assert_msg(isfinite(grads[i][k]) && fabs(grads[i][k] - fd) <= 1e-3 + 2e-2 * fabs(fd),
                          "%s gradient[%zu]: %.6g, finite differences %.6g (%s)", name, k, (double)grads[i][k], fd,
                          what);
        }
    }
    for (int i = 0; i < np; i++) {
        free(vals[i]);
        free(grads[i]);
    }
    free(vals);
    free(grads);
    free(unused);
    free(sizes);
    return loss0;
}

static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ' ' || p[-1] == ',') && (p[n] == '\0' || p[n] == ' ' || p[n] == ','))
            return 1;
    return 0;
}

/* ---- device tensors with guard regions ---- */

th_dev th_dev_make(teeny_ctx *ctx, int i32, int ndim, const int64_t *shape, int view_off, const void *data)
{
    th_dev d = {0};
    d.i32 = i32;
    d.n = 1;
    for (int i = 0; i < ndim; i++)
        d.n *= shape[i];
    int64_t big = d.n + (view_off ? view_off + 5 : 0);
    teeny_tensor *b = NULL;
    if (i32) {
        TH_OK(ctx, teeny_tensor_create_i32(ctx, view_off ? 1 : ndim, view_off ? &big : shape, &b));
        int32_t *fill = th_malloc((size_t)big * 4);
        for (int64_t i = 0; i < big; i++)
            fill[i] = -7;
        TH_OK(ctx, teeny_tensor_write_i32(b, fill, (size_t)big));
        free(fill);
    } else {
        b = th_tensor(ctx, view_off ? 1 : ndim, view_off ? &big : shape);
        th_poison(b);
    }
    if (view_off) {
        d.base = b;
        d.off = view_off;
        TH_OK(ctx, teeny_tensor_view(b, view_off, ndim, shape, &d.t));
    } else {
        d.t = b;
    }
    if (data && i32)
        TH_OK(ctx, teeny_tensor_write_i32(d.t, data, (size_t)d.n));
    else if (data)
        TH_OK(ctx, teeny_tensor_write(d.t, data, (size_t)d.n));
    return d;
}

void th_dev_check_guard(const th_dev *d, const char *what, const char *repro)
{
    if (!d->base)
        return;
    int64_t n = teeny_tensor_numel(d->base);
    if (d->i32) {
        int32_t *all = th_malloc((size_t)n * 4);
        TH_OK(NULL, teeny_tensor_read_i32(d->base, all, (size_t)n));
        for (int64_t i = 0; i < n; i++)
            if (i < d->off || i >= d->off + d->n)
                ck_assert_msg(all[i] == -7, "%s: wrote outside its view at %lld; %s", what, (long long)i, repro);
        free(all);
        return;
    }
    float *all = th_read(d->base);
    for (int64_t i = 0; i < n; i++)
        if (i < d->off || i >= d->off + d->n)
            ck_assert_msg(isnan(all[i]), "%s: wrote outside its view at %lld; %s", what, (long long)i, repro);
    free(all);
}

void th_dev_free(th_dev *d)
{
    teeny_tensor_destroy(d->t);
    teeny_tensor_destroy(d->base);
    d->t = d->base = NULL;
}


/* ---- skips ---- */

/* Each reason is a line of an unlinked temporary file: a test that check
 * forks (CK_FORK unset) records its skip in the child, which the parent
 * reads back at the end (kept in the child's memory, it was lost and the
 * test counted as passed). Without the file, in memory (CK_FORK=no). */
#define MAX_SKIPS 256
static char *skip_reasons[MAX_SKIPS];
static int n_skips;
static FILE *skip_file;

void th_skip_record(const char *test, const char *fmt, ...)
{
    char reason[512];
    size_t name_len = strlen(test);
    if (name_len > 3 && !strcmp(test + name_len - 3, "_fn")) /* check's START_TEST names the function <test>_fn */
        name_len -= 3;
    size_t len = (size_t)snprintf(reason, sizeof reason, "%.*s: ", (int)name_len, test);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason + len, sizeof reason - len, fmt, ap);
    va_end(ap);
    fprintf(stderr, "skipped %s\n", reason);
    for (char *c = reason; *c; c++)
        if (*c == '\n')
            *c = ' ';
    if (skip_file) {
        fprintf(skip_file, "%s\n", reason);
        fflush(skip_file);
        return;
    }
    if (n_skips < MAX_SKIPS) {
        skip_reasons[n_skips] = malloc(strlen(reason) + 1);
        if (skip_reasons[n_skips])
            strcpy(skip_reasons[n_skips], reason);
    }
    n_skips++; /* counted even past the list's end */
}

/* TEENY_TEST_SUITES="a b": run only the named suites;
 * TEENY_TEST_SKIP="c d": run all but these. */
static int suite_wanted(const char *name)
{
    const char *only = getenv("TEENY_TEST_SUITES"), *skip = getenv("TEENY_TEST_SKIP");
    if (skip && *skip && in_list(skip, name))
        return 0;
    return !only || !*only || in_list(only, name);
}

/* Wall-clock seconds (the suites' lines). */
static double wall_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The skips recorded so far (each is a line of skip_file, or an entry of
 * skip_reasons when no temporary file could be made). */
static int skips_so_far(void)
{
    if (!skip_file)
        return n_skips;
    int n = 0, c;
    long at = ftell(skip_file);
    rewind(skip_file);
    while ((c = fgetc(skip_file)) != EOF)
        n += c == '\n';
    fseek(skip_file, at, SEEK_SET);
    return n;
}

typedef struct {
    const char *name;
    int passed, failed, skipped;
    double seconds;
} suite_line;

/* Each wanted suite in its own runner, in suites.def's order, so every
 * suite ends with a line of its counts and time (a long run shows its
 * progress); then the table, the skips' reasons and the total. */
int main(void)
{
    static const struct {
        const char *name;
        Suite *(*make)(void);
    } suites[] = {
#define XX(name) {#name, suite_##name},
#include "suites.def"
#undef XX
    };
    enum { N_SUITES = sizeof suites / sizeof suites[0] };
    suite_line lines[N_SUITES];
    int n_lines = 0, passed = 0, failed = 0, skipped = 0;
    double start = wall_seconds();
    skip_file = tmpfile();
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 0; i < N_SUITES; i++) {
        if (!suite_wanted(suites[i].name))
            continue;
        double t0 = wall_seconds();
        int skips0 = skips_so_far();
        SRunner *sr = srunner_create(suites[i].make());
        srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose: a line per test as it ends */
        suite_line *l = &lines[n_lines++];
        l->name = suites[i].name;
        l->failed = srunner_ntests_failed(sr);
        /* a skipped test returns early and check counts it as passed: take
         * it out of the passes (th_skip returns, so it cannot also fail) */
        l->skipped = skips_so_far() - skips0;
        l->passed = srunner_ntests_run(sr) - l->failed - l->skipped;
        l->seconds = wall_seconds() - t0;
        srunner_free(sr);
        printf("suite %-16s %5d passed, %d failed, %d skipped  %7.1f s (%.0f s in all)\n", l->name, l->passed,
               l->failed, l->skipped, l->seconds, wall_seconds() - start);
        passed += l->passed;
        failed += l->failed;
        skipped += l->skipped;
    }
    printf("\n%-22s %7s %7s %7s %9s\n", "suite", "passed", "failed", "skipped", "seconds");
    for (int i = 0; i < n_lines; i++)
        printf("%-22s %7d %7d %7d %9.1f\n", lines[i].name, lines[i].passed, lines[i].failed, lines[i].skipped,
               lines[i].seconds);
    printf("%-22s %7d %7d %7d %9.1f\n\n", "all", passed, failed, skipped, wall_seconds() - start);
    if (skip_file) {
        char line[600];
        rewind(skip_file);
        while (fgets(line, sizeof line, skip_file))
            printf("skipped: %s", line);
    }
    for (int i = 0; i < n_skips && i < MAX_SKIPS && !skip_file; i++) {
        printf("skipped: %s\n", skip_reasons[i] ? skip_reasons[i] : "(reason lost: out of memory)");
        free(skip_reasons[i]);
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (skip_file)
        fclose(skip_file);
    /* Released from main, not atexit: some runtimes (oclgrind) tear down
     * thread-local state before atexit handlers run. */
    shared_ctx_free();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
