/*
 * run_profile.c -- teeny-run's numbers: the timed runs' statistics (min,
 * median, mean, p90 and p99 by nearest rank, max) and --profile's table:
 * K forward passes back to back between teeny_profile_begin and
 * teeny_profile_end_each, whose launches are summed per kernel and per
 * graph node. (It once set TEENY_PROFILE=2 and parsed the log lines:
 * setenv raced with PoCL's threads reading the environment, a crash in
 * about 1 run in 25.)
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

/* Add one launch to name's row of t; 0 when out of memory. */
static int table_add(profile_table *t, const char *name, double ms, double gap)
{
    int k = 0;
    while (k < t->n && strcmp(t->rows[k].name, name))
        k++;
    if (k == t->n) {
        if (t->n == t->cap) {
            int cap = t->cap ? 2 * t->cap : 32;
            kernel_row *grown = realloc(t->rows, (size_t)cap * sizeof *grown);
            if (!grown)
                return 0;
            t->rows = grown;
            t->cap = cap;
        }
        memset(&t->rows[t->n], 0, sizeof *t->rows);
        snprintf(t->rows[t->n++].name, sizeof t->rows->name, "%s", name);
    }
    t->rows[k].launches++;
    t->rows[k].ms += ms;
    t->rows[k].idle_ms += gap;
    return 1;
}

/* Each launch of the profile, summed per kernel and per graph node. */
static void profile_add(const teeny_profile_launch *l, void *user)
{
    profile_data *p = user;
    const char *node = l->node ? l->node : "(outside the graph)";
    if (!table_add(&p->kernels, l->kernel, l->ms, l->gap_ms) || !table_add(&p->nodes, node, l->ms, l->gap_ms))
        p->broken = 1;
    p->launches++;
    p->kernel_ms += l->ms;
    p->idle_ms += l->gap_ms;
}

static int cmp_kernel(const void *a, const void *b)
{
    const kernel_row *x = a, *y = b;
    return (x->ms < y->ms) - (x->ms > y->ms);
}

/* runs forward passes back to back under the profiler into *p. */
teeny_status run_profile(onnx_session *s, int runs, profile_data *p)
{
    teeny_status st = TEENY_OK;
    memset(p, 0, sizeof *p);
    if (!s->plan)
        return TEENY_OK;
    if ((st = teeny_profile_begin(s->ctx)) != TEENY_OK)
        return st;
    for (int r = 0; r < runs && st == TEENY_OK; r++)
        st = teeny_plan_forward(s->plan);
    teeny_status end = teeny_profile_end_each(s->ctx, &p->span_ms, NULL, profile_add, p);
    if (st == TEENY_OK && (st = end) == TEENY_OK && p->broken)
        st = TEENY_ERR_NOMEM;
    qsort(p->kernels.rows, (size_t)p->kernels.n, sizeof *p->kernels.rows, cmp_kernel);
    qsort(p->nodes.rows, (size_t)p->nodes.n, sizeof *p->nodes.rows, cmp_kernel);
    return st;
}
