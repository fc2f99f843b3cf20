/*
 * bench_util.c -- what every part of teeny-bench calls: the timing loop
 * (profiling events, warm-up, the median; bench_time), the result rows in
 * text, CSV or JSON lines (bench_report), the case filter and the seeded
 * input tensors. It sits below the families (bench_<family>.c), the
 * ceilings (bench_peak.c) and the program (teeny-bench.c), and calls none
 * of them: bench.h documents each function.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

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

/* s as a JSON string body (quotes and control characters escaped; bench.h). */
void bench_json_str(const char *s)
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
    bench_json_str(c->family);
    printf(", \"name\": ");
    bench_json_str(c->name);
    printf(", \"direction\": ");
    bench_json_str(c->pass);
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
        bench_json_str(why);
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
