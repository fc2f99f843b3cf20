/*
 * teeny-bench -- benchmarks on one device. Every case is timed with OpenCL
 * profiling events (device time from the first kernel's start to the last
 * kernel's end): warm-up runs first, then the median of many runs. Before
 * the cases, the device's copy bandwidth and FMA rate are measured with
 * kernels of our own (bench_peak.c); each case's rates are also given as
 * a share of those two ceilings (bench.h says what is counted).
 *
 * Usage: teeny-bench [--device SPEC] [--filter TEXT[,TEXT...]] [--reps N] [--warmup N] [--csv | --json]
 *                    [--list] [--tf32] [--loop]
 *
 * --tf32 runs every case with teeny_ctx_set_tf32(ctx, 1): tf32 tensor
 * cores where the device has them (the header says whether it does).
 *
 * --loop also times every case as reps runs back to back by the host's
 * clock, without profiling events (whose host cost, 13.6 us a launch on
 * NVIDIA's driver against 6 without, opens gaps between a multi-launch
 * case's short kernels): "loop_ms" in JSON, a loop_ms CSV column, "loop"
 * in text. The training step's cases are timed by the host's clock anyway.
 *
 * --filter runs the cases whose name contains any of the texts; --list
 * prints the cases (with --json: their shapes) without measuring anything.
 * --reps takes 1..1000000 and --warmup 0..1000000, whole decimal numbers
 * (tools/args.h); anything else exits with status 2 before the device is
 * touched. --help, --version and the command-line errors: tools/cli.h.
 *
 * --json writes JSON lines: first a header object ("type": "header": the
 * device, its compute units, the measured ceilings, reps and warm-up),
 * then one object per case and pass ("type": "case": family, name, shape,
 * direction, median_ms, gbps, gflops, pct_copy_bw, pct_fma, bytes, flops,
 * and loop_ms with --loop; or "error" when it failed).
 * bench/compare_torch.py reads it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "bench.h"
#include "cli.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_sort(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
}

double bench_wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int bench_time(teeny_ctx *ctx, const bench_opts *o, bench_fn fn, void *arg, double *ms, double *loop_ms)
{
    double *t = malloc((size_t)o->reps * sizeof *t);
    teeny_status st = TEENY_OK;
    *loop_ms = -1.0;
    if (!t)
        return 1;
    for (int i = 0; i < o->warmup && st == TEENY_OK; i++)
        st = fn(ctx, arg);
    if (st == TEENY_OK)
        st = teeny_ctx_finish(ctx);
    for (int i = 0; i < o->reps && st == TEENY_OK; i++) {
        st = teeny_profile_begin(ctx);
        if (st == TEENY_OK)
            st = fn(ctx, arg);
        teeny_status st2 = teeny_profile_end(ctx, &t[i], NULL);
        if (st == TEENY_OK)
            st = st2;
    }
    if (o->loop && st == TEENY_OK && (st = teeny_ctx_finish(ctx)) == TEENY_OK) {
        double t0 = bench_wall_ms();
        for (int i = 0; i < o->reps && st == TEENY_OK; i++)
            st = fn(ctx, arg);
        if (st == TEENY_OK && (st = teeny_ctx_finish(ctx)) == TEENY_OK)
            *loop_ms = (bench_wall_ms() - t0) / o->reps;
    }
    if (st != TEENY_OK) {
        fprintf(stderr, "bench: %s: %s\n", teeny_status_name(st), teeny_last_error(ctx));
        free(t);
        return 1;
    }
    bench_sort(t, o->reps);
    *ms = t[o->reps / 2];
    free(t);
    return 0;
}

/* s as a JSON string body (quotes and control characters escaped). */
static void json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static void json_case_head(const bench_case *c)
{
    printf("{\"type\": \"case\", \"family\": ");
    json_str(c->family);
    printf(", \"name\": ");
    json_str(c->name);
    printf(", \"direction\": ");
    json_str(c->pass);
    printf(", \"shape\": %s", c->shape ? c->shape : "{}");
}

/* A share of a measured ceiling: its text in buf (7 characters, or "" for
 * CSV and "null" for JSON when it is over 100%). A case cannot beat the
 * ceiling it is measured against: a share above 100% means the ceiling
 * probe under-measured (or, for bytes, the data stayed in a cache), a
 * measurement error, so it is flagged rather than printed as a figure. */
static int share_text(char *buf, size_t cap, double pct, bench_format format)
{
    int over = pct > 100.0;
    if (!over)
        snprintf(buf, cap, format == BENCH_TEXT ? "%6.1f%%" : format == BENCH_CSV ? "%.2f" : "%.4g", pct);
    else
        snprintf(buf, cap, "%s", format == BENCH_TEXT ? " >100%*" : format == BENCH_CSV ? "" : "null");
    return over;
}

void bench_report(const bench_opts *o, const bench_case *c, double ms, double loop_ms)
{
    static int noted;
    double gflops = c->flops > 0 ? c->flops / ms * 1e-6 : 0.0, gbps = c->bytes > 0 ? c->bytes / ms * 1e-6 : 0.0;
    double pct_bw = o->copy_gbps > 0 ? 100.0 * gbps / o->copy_gbps : 0.0;
    double pct_fma = o->fma_gflops > 0 ? 100.0 * gflops / o->fma_gflops : 0.0;
    char bw[16], fma[16];
    int over = share_text(bw, sizeof bw, pct_bw, o->format) | share_text(fma, sizeof fma, pct_fma, o->format);
    char loop[32] = "";
    if (loop_ms >= 0)
        snprintf(loop, sizeof loop, o->format == BENCH_CSV ? "%.5f" : o->format == BENCH_JSON ? ", \"loop_ms\": %.6g"
                                                                                            : " loop %10.4f ms",
                 loop_ms);
    if (o->format == BENCH_CSV) {
        printf("%s,%s,%s,%.5f,%.3f,%.3f,%s,%s,%s\n", c->family, c->name, c->pass, ms, gflops, gbps, bw, fma, loop);
    } else if (o->format == BENCH_JSON) {
        json_case_head(c);
        printf(", \"median_ms\": %.6g, \"gbps\": %.6g, \"gflops\": %.6g, \"pct_copy_bw\": %s, \"pct_fma\": %s"
               ", \"bytes\": %.0f, \"flops\": %.0f",
               ms, gbps, gflops, bw, fma, c->bytes, c->flops);
        if (over) /* the raw shares, under names no reader takes for a figure */
            printf(", \"over_ceiling\": {\"pct_copy_bw\": %.4g, \"pct_fma\": %.4g}", pct_bw, pct_fma);
        printf("%s}\n", loop);
    } else {
        printf("%-10s %-34s %-8s %10.4f ms %10.1f GFLOP/s %8.1f GB/s %s copy %s fma%s\n", c->family, c->name,
               c->pass, ms, gflops, gbps, bw, fma, loop);
    }
    if (over && !noted) {
        noted = 1;
        fprintf(o->format == BENCH_TEXT ? stdout : stderr,
                "%s above 100%% of a measured ceiling: a measurement error, not a figure (the ceiling probe "
                "under-measured; for bytes, the data may have stayed in a cache)\n",
                o->format == BENCH_TEXT ? "*" : "teeny-bench: note: a share");
    }
    fflush(stdout);
}

void bench_report_error(const bench_opts *o, const bench_case *c, const char *why)
{
    if (o->format == BENCH_JSON) {
        json_case_head(c);
        printf(", \"error\": ");
        json_str(why);
        printf("}\n");
    } else if (o->format == BENCH_CSV) {
        printf("%s,%s,%s,,,,,,\n", c->family, c->name, c->pass);
    } else {
        printf("%-10s %-34s %-8s FAILED: %s\n", c->family, c->name, c->pass, why);
    }
    fflush(stdout);
}

int bench_run(teeny_ctx *ctx, const bench_opts *o, const bench_case *c, bench_fn fn, void *arg)
{
    double ms, loop_ms;
    if (o->list_only) {
        if (o->format == BENCH_JSON) {
            json_case_head(c);
            printf(", \"bytes\": %.0f, \"flops\": %.0f}\n", c->bytes, c->flops);
        } else {
            printf("%-10s %-34s %s\n", c->family, c->name, c->pass);
        }
        fflush(stdout);
        return 0;
    }
    if (bench_time(ctx, o, fn, arg, &ms, &loop_ms)) {
        bench_report_error(o, c, teeny_last_error(ctx));
        return 1;
    }
    bench_report(o, c, ms, loop_ms);
    return 0;
}

/* The filter is one or more comma-separated substrings; any may match. */
int bench_wanted(const bench_opts *o, const char *name)
{
    if (!o->filter)
        return 1;
    for (const char *f = o->filter; *f;) {
        size_t len = strcspn(f, ",");
        for (const char *p = name; len && strlen(p) >= len; p++)
            if (!strncmp(p, f, len))
                return 1;
        f += len + (f[len] == ',');
    }
    return 0;
}

teeny_tensor *bench_tensor(teeny_ctx *ctx, int ndim, const int64_t *shape, unsigned seed)
{
    teeny_tensor *t = NULL;
    if (teeny_tensor_create(ctx, ndim, shape, &t) != TEENY_OK)
        return NULL;
    size_t n = (size_t)teeny_tensor_numel(t);
    float *x = malloc(n * sizeof *x);
    if (!x) {
        teeny_tensor_destroy(t);
        return NULL;
    }
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 8388608.0f - 1.0f;
    }
    teeny_status st = teeny_tensor_write(t, x, n);
    free(x);
    if (st != TEENY_OK) {
        teeny_tensor_destroy(t);
        return NULL;
    }
    return t;
}

static void print_header(const bench_opts *o, const teeny_device_info *info, const bench_peaks *pk)
{
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    const char *type = info->is_gpu ? "gpu" : info->is_cpu ? "cpu" : "other";
    if (o->format == BENCH_JSON) {
        printf("{\"type\": \"header\", \"tool\": \"teeny-bench\", \"version\": ");
        json_str(teeny_version_string());
        printf(", \"time_utc\": \"%s\", \"device\": ", when);
        json_str(info->device_name);
        printf(", \"platform\": ");
        json_str(info->platform_name);
        printf(", \"device_version\": ");
        json_str(info->device_version);
        printf(", \"driver_version\": ");
        json_str(info->driver_version);
        printf(", \"device_type\": \"%s\", \"compute_units\": %u, \"copy_gbps\": %.6g, \"copy_kernel_gbps\": %.6g"
               ", \"copy_enqueue_gbps\": %.6g, \"copy_bytes\": %zu, \"fma_gflops\": %.6g, \"fma_vector\": %d"
               ", \"fma_global\": %zu, \"fma_local\": %zu, \"reps\": %d, \"warmup\": %d, \"fma_chains\": %d"
               ", \"fma_op\": \"%s\", \"fma_variants\": %d, \"tf32\": %s, \"loop\": %s}\n",
               type, info->compute_units, pk->copy_gbps, pk->copy_kernel_gbps, pk->copy_enqueue_gbps, pk->copy_bytes,
               pk->fma_gflops, pk->fma_vec, pk->fma_global, pk->fma_local, o->reps, o->warmup, pk->fma_chains,
               pk->fma_op ? pk->fma_op : "", pk->fma_variants, o->tf32 ? "true" : "false", o->loop ? "true" : "false");
    } else if (o->format == BENCH_CSV) {
        fprintf(stderr, "teeny-bench %s on %s (%s, %s), %u compute units, %s; copy %.1f GB/s, fma %.1f GFLOP/s\n",
                teeny_version_string(), info->device_name, info->platform_name, info->driver_version,
                info->compute_units, when, pk->copy_gbps, pk->fma_gflops);
        printf("family,case,pass,ms,gflops,gbps,pct_copy_bw,pct_fma,loop_ms\n");
    } else {
        printf("teeny-bench %s on %s (%s %s, driver %s, %s), %u compute units, %s\n", teeny_version_string(),
               info->device_name, type, info->platform_name, info->driver_version, info->device_version,
               info->compute_units, when);
        if (o->list_only) {
            printf("--list: cases only, nothing measured\n");
            fflush(stdout);
            return;
        }
        printf("copy bandwidth %.1f GB/s (bytes read + written; copy kernel %.1f, clEnqueueCopyBuffer %.1f; %zu MiB)\n",
               pk->copy_gbps, pk->copy_kernel_gbps, pk->copy_enqueue_gbps, pk->copy_bytes >> 20);
        printf("FMA rate %.1f GFLOP/s (best of %d kernels, %d runs each: %d %s chains of float%d per work-item, "
               "%zu work-items in groups of %zu)\n",
               pk->fma_gflops, pk->fma_variants, pk->fma_runs, pk->fma_chains, pk->fma_op, pk->fma_vec,
               pk->fma_global, pk->fma_local);
        printf("median of %d after %d warm-up runs, device time from profiling events; bytes: compulsory traffic%s%s\n",
               o->reps, o->warmup, o->tf32 ? "; tf32 tensor cores (teeny_ctx_set_tf32)" : "",
               o->loop ? "; loop: the same number of runs back to back by the host's clock, no events" : "");
    }
    fflush(stdout);
}

enum { O_DEVICE, O_FILTER, O_REPS, O_WARMUP, O_CSV, O_JSON, O_LIST, O_TF32, O_LOOP, O_COUNT };

static const cli_opt OPTS[] = {
    [O_DEVICE] = {"--device", "SPEC", "the OpenCL device: cpu, gpu, pocl, nvidia, P:D, a part of its name\n"
                                      "(default: TEENY_DEVICE, else the first GPU, else the first CPU)"},
    [O_FILTER] = {"--filter", "TEXT[,TEXT...]", "only the cases whose name contains one of the texts"},
    [O_REPS] = {"--reps", "N", "timed runs a case, 1..1000000 (default 30); the median is reported"},
    [O_WARMUP] = {"--warmup", "N", "runs before the timed ones, 0..1000000 (default 5)"},
    [O_CSV] = {"--csv", NULL, "one CSV row a case and pass"},
    [O_JSON] = {"--json", NULL, "JSON lines: a header object, then one object a case and pass"},
    [O_LIST] = {"--list", NULL, "list the cases (with --json: their shapes); measure nothing"},
    [O_TF32] = {"--tf32", NULL, "every case with tf32 tensor cores where the device has them"},
    [O_LOOP] = {"--loop", NULL, "also time each case as N runs back to back by the host's clock"},
    [O_COUNT] = {NULL, NULL, NULL},
};

static const cli_spec SPEC = {
    "teeny-bench",
    "[--device SPEC] [--filter TEXT[,TEXT...]] [--reps N] [--warmup N] [--csv | --json] [--list]\n"
    "          [--tf32] [--loop]",
    "Benchmark teenycl's kernel families and a training step on one device: device time\n"
    "from OpenCL profiling events (the median of --reps runs after --warmup runs), each\n"
    "case's bandwidth and FLOP rate also as a share of the device's copy bandwidth and FMA\n"
    "rate, measured first with kernels of its own.",
    OPTS,
    "Exit status: 0 ok; 1 a case or the device failed; 2 a bad command line.",
};

int main(int argc, char **argv)
{
    bench_opts o = {NULL, 5, 30, BENCH_TEXT, 0, 0, 0, 0, 0};
    const char *spec = NULL;
    int tf32 = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        char what[300];
        switch (cli_next(&SPEC, argc, argv, &i, &v)) {
        case CLI_EXIT_OK:
            return 0;
        case CLI_EXIT_USAGE:
            return 2;
        case O_DEVICE:
            spec = v;
            break;
        case O_FILTER:
            o.filter = v;
            break;
        case O_REPS:
            if (!args_int("teeny-bench", "--reps", v, 1, 1000000, &o.reps))
                return 2;
            break;
        case O_WARMUP:
            if (!args_int("teeny-bench", "--warmup", v, 0, 1000000, &o.warmup))
                return 2;
            break;
        case O_CSV:
            o.format = BENCH_CSV;
            break;
        case O_JSON:
            o.format = BENCH_JSON;
            break;
        case O_LIST:
            o.list_only = 1;
            break;
        case O_TF32:
            tf32 = 1;
            break;
        case O_LOOP:
            o.loop = 1;
            break;
        default:
            snprintf(what, sizeof what, "unexpected argument \"%.200s\"", v);
            return cli_fail(&SPEC, what);
        }
    }
    teeny_ctx *ctx = NULL;
    if (teeny_ctx_create(spec, &ctx) != TEENY_OK) {
        fprintf(stderr, "%s\n", teeny_last_error(NULL));
        return 1;
    }
    if (tf32 && (teeny_ctx_set_tf32(ctx, 1) != TEENY_OK || teeny_ctx_tf32_active(ctx, &o.tf32) != TEENY_OK)) {
        fprintf(stderr, "teeny-bench: %s\n", teeny_last_error(ctx));
        teeny_ctx_destroy(ctx);
        return 1;
    }
    if (tf32 && !o.tf32)
        fprintf(stderr, "teeny-bench: --tf32: %s has no tf32 tensor cores; the cases run in fp32\n",
                teeny_ctx_device_name(ctx));
    teeny_device_info info = TEENY_DEVICE_INFO_INIT;
    bench_peaks peaks;
    if (teeny_ctx_device_info(ctx, &info) != TEENY_OK) {
        fprintf(stderr, "teeny-bench: %s\n", teeny_last_error(ctx));
        teeny_ctx_destroy(ctx);
        return 1;
    }
    if (o.list_only) {
        memset(&peaks, 0, sizeof peaks);
    } else if (bench_measure_peaks(ctx, &o, &peaks)) {
        teeny_ctx_destroy(ctx);
        return 1;
    } else {
        o.copy_gbps = peaks.copy_gbps;
        o.fma_gflops = peaks.fma_gflops;
    }
    print_header(&o, &info, &peaks);
    int failed = 0;
#define XX(f) failed |= bench_##f(ctx, &o);
    BENCH_FAMILIES(XX)
#undef XX
    teeny_ctx_destroy(ctx);
    return failed;
}
