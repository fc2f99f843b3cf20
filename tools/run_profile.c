/*
 * run_profile.c -- teeny-run's numbers: the timed runs' statistics (min,
 * median, mean, p90 and p99 by nearest rank, max) and --profile's table:
 * K forward passes back to back between teeny_profile_begin and _end with
 * TEENY_PROFILE=2, whose per-launch log lines ("profile: launch I NAME N
 * items MS ms gap GAP ms") a log sink sums per kernel.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* p-th percentile by nearest rank of n sorted values */
static double rank(const double *t, int n, double p)
{
    int k = (int)ceil(p / 100.0 * n);
    return t[k < 1 ? 0 : k > n ? n - 1 : k - 1];
}

run_stats run_stats_of(double *t, int n)
{
    run_stats s;
    double sum = 0;
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    for (int i = 0; i < n; i++)
        sum += t[i];
    s.min = t[0];
    s.max = t[n - 1];
    s.median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    s.mean = sum / n;
    s.p90 = rank(t, n, 90);
    s.p99 = rank(t, n, 99);
    return s;
}

/* The library's log sink while the profile ends: TEENY_PROFILE=2's
 * per-launch lines ("profile: launch I NAME N items MS ms gap GAP ms")
 * summed per kernel; other warnings and errors still reach stderr. */
static void profile_sink(teeny_log_level level, const char *msg, void *user)
{
    profile_data *p = user;
    char name[96];
    int index;
    long long items;
    double ms, gap;
    if (sscanf(msg, "profile: launch %d %95s %lld items %lf ms gap %lf ms", &index, name, &items, &ms, &gap) != 5) {
        if (level >= TEENY_LOG_WARN && strncmp(msg, "profile: ", 9))
            fprintf(stderr, "teenycl %s: %s\n", level == TEENY_LOG_WARN ? "warn" : "error", msg);
        return;
    }
    int k = 0;
    while (k < p->n && strcmp(p->rows[k].name, name))
        k++;
    if (k == p->n) {
        if (p->n == p->cap) {
            int cap = p->cap ? 2 * p->cap : 32;
            kernel_row *grown = realloc(p->rows, (size_t)cap * sizeof *grown);
            if (!grown) {
                p->broken = 1;
                return;
            }
            p->rows = grown;
            p->cap = cap;
        }
        memset(&p->rows[p->n], 0, sizeof *p->rows);
        snprintf(p->rows[p->n++].name, sizeof p->rows->name, "%s", name);
    }
    p->rows[k].launches++;
    p->rows[k].ms += ms;
    p->rows[k].idle_ms += gap;
    p->launches++;
    p->kernel_ms += ms;
    p->idle_ms += gap;
}

static int cmp_kernel(const void *a, const void *b)
{
    const kernel_row *x = a, *y = b;
    return (x->ms < y->ms) - (x->ms > y->ms);
}

/* runs forward passes back to back under the profiler into *p. */
teeny_status run_profile(onnx_session *s, int runs, profile_data *p)
{
    const char *was = getenv("TEENY_PROFILE");
    char saved[16] = "";
    teeny_status st = TEENY_OK;
    memset(p, 0, sizeof *p);
    if (!s->plan)
        return TEENY_OK;
    if (was)
        snprintf(saved, sizeof saved, "%s", was);
    if ((st = teeny_profile_begin(s->ctx)) != TEENY_OK)
        return st;
    for (int r = 0; r < runs && st == TEENY_OK; r++)
        st = teeny_plan_forward(s->plan);
    setenv("TEENY_PROFILE", "2", 1);
    teeny_log_set(profile_sink, p);
    teeny_status end = teeny_profile_end(s->ctx, &p->span_ms, NULL);
    teeny_log_set(NULL, NULL);
    if (was)
        setenv("TEENY_PROFILE", saved, 1);
    else
        unsetenv("TEENY_PROFILE");
    if (st == TEENY_OK && (st = end) == TEENY_OK && p->broken)
        st = TEENY_ERR_NOMEM;
    qsort(p->rows, (size_t)p->n, sizeof *p->rows, cmp_kernel);
    return st;
}
