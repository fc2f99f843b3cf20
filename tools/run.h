/*
 * run.h -- what teeny-run's files share: the parsed command line, the
 * timing statistics, the profile, and the report the text and JSON
 * printers read. teeny-run.c (the command line and the run) calls
 * run_files.c (the output files and the --input .npy files),
 * run_profile.c (statistics, the profiler's per-kernel table) and
 * run_report.c (text and JSON); those call only the library and
 * onnx_run.c, never each other or teeny-run.c.
 */
#ifndef TEENY_RUN_H
#define TEENY_RUN_H

#include "onnx_info.h"
#include "onnx_run.h"

#define MAX_INPUTS 64
#define FILE_CAP 224

typedef struct {
    const char *model, *out_dir, *spec;
    char *names[MAX_INPUTS], *files[MAX_INPUTS];
    int n_in, batch, seed, warmup, repeat, profile, no_optimize, json, info;
} options;

/* ---- run_files.c ---- */

/* mkdir -p dir, then check that a file can be written there: 1, or a
 * message and 0. */
int run_make_dir(const char *dir);
/* Every output's file name (teeny-run.c's banner says how a name is made
 * safe) into files[i], each path checked: not a directory or anything
 * else that is not a regular file. 1, or a message and 0. */
int run_plan_files(const teeny_onnx_model *m, const char *dir, char (*files)[FILE_CAP]);
/* Each output as dir/files[i] (an empty output is skipped and its name
 * cleared). */
teeny_status run_write_outputs(teeny_ctx *ctx, const onnx_run_result *r, const char *dir, char (*files)[FILE_CAP]);
/* Load path (.npy) as a run input named name (host copy; freed by the caller). */
teeny_status run_load_input(teeny_ctx *ctx, const char *name, const char *path, onnx_run_input *in);

/* ---- run_profile.c ---- */

typedef struct {
    double min, median, mean, p90, p99, max;
} run_stats;

/* One kernel's or one graph node's launches in the profile. */
typedef struct {
    char name[192];
    long launches;
    double ms, idle_ms;
} kernel_row;

typedef struct {
    kernel_row *rows;
    int n, cap;
} profile_table;

typedef struct {
    profile_table kernels, nodes; /* each slowest first */
    int broken;
    long launches;
    double kernel_ms, idle_ms, span_ms;
} profile_data;

/* Sort the n times t and return min, median, mean, p90, p99 (nearest
 * rank) and max. */
run_stats run_stats_of(double *t, int n);
/* runs forward passes back to back under the profiler into *p (rows
 * slowest first; the caller frees p->rows). */
teeny_status run_profile(onnx_session *s, int runs, profile_data *p);

/* ---- run_report.c ---- */

typedef struct {
    const options *o;
    const char *device;
    onnx_session *s;
    const onnx_io_rows *declared;  /* --info */
    char (*files)[FILE_CAP];       /* per output; "" when not written */
    double *warm, *times;
    run_stats stats;
    int launches;                  /* per forward pass */
    profile_data prof;
    int ran, written;
} report;

/* The report as text or as one JSON object on standard output. */
void run_print_text(const report *r);
void run_print_json(const report *r);

#endif
