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


static void print_header(const bench_opts *o, const teeny_device_info *info, const bench_peaks *pk)
{
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    const char *type = info->is_gpu ? "gpu" : info->is_cpu ? "cpu" : "other";
    if (o->format == BENCH_JSON) {
        printf("{\"type\": \"header\", \"tool\": \"teeny-bench\", \"version\": ");
        bench_json_str(teeny_version_string());
        printf(", \"time_utc\": \"%s\", \"device\": ", when);
        bench_json_str(info->device_name);
        printf(", \"platform\": ");
        bench_json_str(info->platform_name);
        printf(", \"device_version\": ");
        bench_json_str(info->device_version);
        printf(", \"driver_version\": ");
        bench_json_str(info->driver_version);
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
