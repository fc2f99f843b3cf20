/*
 * teeny-run -- run an ONNX model on an OpenCL device, as onnxruntime's
 * perf_test and trtexec do: time it, profile it, write its outputs.
 *
 * Usage: teeny-run MODEL.onnx [--input NAME=FILE.npy ...] [--output-dir DIR]
 *                  [--device SPEC] [--batch N] [--seed N] [--warmup N] [--repeat K]
 *                  [--profile] [--no-optimize] [--json]
 *        teeny-run --info MODEL.onnx [--batch N] [--device SPEC] [--json]
 *
 * Inputs: a .npy file per --input, at most one per name, each naming one
 * of the model's declared inputs (else the error lists them) in a type
 * and shape it takes (input_fits: '<f4' for float, '<f2' for float16
 * (computed in fp32: its values are exact there); '<i8', '<i4' or '|b1'
 * for int64 and int32; '|b1' for bool; a 0-d file, or a [1] one, for a
 * rank-0 input; else the error names the input's declared type and shape
 * and the file's). int64 values stay int64 for the importer's constant
 * operands; one that an int32 plan input cannot hold is refused, never
 * wrapped (onnx_run.c). Every input the
 * plan needs and no file gives is filled with seeded random values
 * (--seed, default 1; float inputs uniform in [-1, 1) (float16 ones
 * rounded to half), int32 class labels
 * 0 or 1: see onnx_random_value in onnx_run.h). Integer operands the
 * importer takes as constants (shapes, axes) need a file.
 *
 * Timing: --warmup N runs first, reported apart (default 1: the first run
 * pays for the kernels' first launch), then --repeat K timed ones
 * (default 1); each run is the forward pass waited for on the host's
 * clock. It reports min, median, mean, p90 and p99 (nearest rank), max,
 * the throughput (batch x 1000 / mean ms: inferences a second), the
 * import and compile times and the device. --profile then runs K more
 * passes back to back under the library's profiler (teeny_profile_begin
 * and _end with TEENY_PROFILE=2, whose per-launch lines it reads through
 * teeny_log_set) and prints per kernel: launches, device time, share, and
 * the device's idle time before its launches (the host's gaps), slowest
 * first. The profiler names kernels, not graph nodes.
 *
 * The plan is compiled with frozen parameters (teeny_plan_options): the
 * model's weights are constants, so what is derived from them (packed
 * convolution weights on CPUs) is computed once at compile, not at every
 * forward; the outputs are the same bits. --no-optimize compiles the plan
 * as written, the reference for that.
 *
 * Outputs: with --output-dir DIR (created with its parents once the model
 * has been imported), each graph
 * output is written as DIR/<file>.npy (C order; a scalar as [1]) in the
 * type the model declares: '<f4' (fp32), or '<f2' for a float16 output
 * (the fp32 result rounded to nearest even, as ONNX Runtime's float16
 * output holds it),
 * the file name being the output's name with every byte other than
 * A-Z a-z 0-9 . _ - made '_' and a leading '.' made '_' ("/l2/probs:0" ->
 * "_l2_probs_0.npy"); a name that an earlier output already took (compared
 * without case) gets "_<output index>". The names, the directory and its
 * writability are checked before the model is compiled. Without
 * --output-dir nothing is written.
 *
 * --info prints the model's declared inputs and outputs (symbolic
 * dimensions by name), then what the plan takes and gives at the batch,
 * and runs nothing. --json prints one JSON object instead of the text.
 *
 * Exit status: 0 on success, 1 when the model cannot be imported, compiled
 * or run or an output cannot be written (the library's message on
 * stderr), 2 for a bad command line (named on stderr).
 *
 * Files: this one holds the command line and the run; the output and
 * input files are run_files.c, the statistics and the profile
 * run_profile.c, the text and JSON report run_report.c (run.h), the
 * session (import, compile, inputs, forward) onnx_run.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "run.h"

enum { O_INPUT, O_OUTPUT_DIR, O_DEVICE, O_BATCH, O_SEED, O_WARMUP, O_REPEAT, O_PROFILE, O_NO_OPTIMIZE, O_JSON, O_INFO,
       O_COUNT };

static const cli_opt OPTS[] = {
    [O_INPUT] = {"--input", "NAME=FILE.npy", "the value of input NAME, once per name, in the type the model declares:\n"
                                             "'<f4' for float; '<f2' for float16; '<i8', '<i4' or '|b1' for\n"
                                             "int64/int32; '|b1' for bool; a 0-d (or [1]) file for a rank-0\n"
                                             "input. Inputs not given get seeded random values (see --seed)"},
    [O_OUTPUT_DIR] = {"--output-dir", "DIR", "write each output as DIR/<name>.npy (DIR created with its parents;\n"
                                             "names made safe as file names), '<f2' for a float16 output, else\n"
                                             "'<f4'. Without it nothing is written"},
    [O_DEVICE] = {"--device", "SPEC", "the OpenCL device: cpu, gpu, pocl, nvidia, P:D, a part of its name\n"
                                      "(default: TEENY_DEVICE, else the first GPU, else the first CPU)"},
    [O_BATCH] = {"--batch", "N", "the batch the model is imported and run at, 1..2147483647\n"
                                 "(default: the first input's first dimension; 1 where it is symbolic)"},
    [O_SEED] = {"--seed", "N", "the random inputs' seed, 0..2147483647 (default 1): float inputs uniform\n"
                               "in [-1, 1), int32 class labels 0 or 1, the same values on every device"},
    [O_WARMUP] = {"--warmup", "N", "runs before the timed ones, 0..1000000 (default 1)"},
    [O_REPEAT] = {"--repeat", "K", "timed runs, 1..1000000 (default 1): min, median, mean, p90, p99,\n"
                                   "max, throughput"},
    [O_PROFILE] = {"--profile", NULL, "then K runs back to back under the profiler: per kernel launches,\n"
                                      "device time and the device's idle time before them, slowest first"},
    [O_NO_OPTIMIZE] = {"--no-optimize", NULL, "compile the plan as written: parameters read at every forward,\n"
                                              "nothing derived from them at compile (the reference for the default)"},
    [O_JSON] = {"--json", NULL, "one JSON object on standard output instead of the text"},
    [O_INFO] = {"--info", NULL, "list the declared inputs and outputs and what the plan takes and\n"
                                "gives at the batch; run nothing"},
    [O_COUNT] = {NULL, NULL, NULL},
};

static const cli_spec SPEC = {
    "teeny-run",
    "MODEL.onnx [--input NAME=FILE.npy ...] [--output-dir DIR] [--device SPEC] [--batch N]\n"
    "          [--seed N] [--warmup N] [--repeat K] [--profile] [--no-optimize] [--json]\n"
    "--info MODEL.onnx [--batch N] [--device SPEC] [--json]",
    "Run an ONNX model on an OpenCL device: time it (import, compile, each forward pass),\n"
    "profile it, and write its outputs.",
    OPTS,
    "Exit status: 0 ok; 1 the model cannot be imported, compiled or run, or an output\n"
    "cannot be written; 2 a bad command line.",
};

static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->warmup = 1;
    o->repeat = 1;
    for (int i = 1; i < argc; i++) {
        const char *v;
        char what[600];
        int k = cli_next(&SPEC, argc, argv, &i, &v);
        if (k == CLI_EXIT_OK || k == CLI_EXIT_USAGE)
            return k == CLI_EXIT_OK ? 0 : 2;
        if (k == CLI_ARG && o->model) {
            snprintf(what, sizeof what, "a second model \"%.200s\" (the model is \"%.200s\"; one per run)", v, o->model);
            return cli_fail(&SPEC, what);
        }
        if (k == CLI_ARG) {
            o->model = v;
        } else if (k == O_INPUT) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1]) {
                snprintf(what, sizeof what, "--input \"%.200s\": give NAME=FILE.npy", v);
                return cli_fail(&SPEC, what);
            }
            int len = (int)(eq - v);
            for (int j = 0; j < o->n_in; j++)
                if ((int)strlen(o->names[j]) == len && !strncmp(o->names[j], v, (size_t)len)) {
                    snprintf(what, sizeof what, "--input %.*s given twice (%s=%s and %.200s)", len, v, o->names[j],
                             o->files[j], v);
                    return cli_fail(&SPEC, what);
                }
            if (o->n_in == MAX_INPUTS)
                return cli_fail(&SPEC, "more than 64 --input");
            o->names[o->n_in] = strndup(v, (size_t)len);
            o->files[o->n_in++] = (char *)eq + 1;
        } else if (k == O_OUTPUT_DIR) {
            o->out_dir = v;
        } else if (k == O_DEVICE) {
            o->spec = v;
        } else if (k == O_BATCH || k == O_SEED || k == O_WARMUP || k == O_REPEAT) {
            int lo = k == O_BATCH ? 1 : k == O_REPEAT ? 1 : 0, hi = k == O_BATCH || k == O_SEED ? 2147483647 : 1000000;
            int *dst = k == O_BATCH ? &o->batch : k == O_SEED ? &o->seed : k == O_WARMUP ? &o->warmup : &o->repeat;
            if (!args_int(SPEC.prog, OPTS[k].name, v, lo, hi, dst))
                return 2;
        } else {
            *(k == O_PROFILE ? &o->profile : k == O_NO_OPTIMIZE ? &o->no_optimize : k == O_JSON ? &o->json : &o->info) = 1;
        }
    }
    if (!o->model)
        return cli_fail(&SPEC, "no model given");
    return -1;
}

/* ---- the run ---- */

static int fail(teeny_ctx *ctx, teeny_status st, const char *what)
{
    fprintf(stderr, "teeny-run: %s%s%s: %s\n", what, *what ? ": " : "", teeny_status_name(st), onnx_run_error(ctx));
    return 1;
}

/* Every --input names a declared graph input: 1, or a message and 0. */
static int inputs_known(const options *o, const onnx_io_rows *rows)
{
    for (int i = 0; i < o->n_in; i++) {
        int found = 0;
        for (int k = 0; k < rows->n && !found; k++)
            found = !rows->rows[k].is_output && !strcmp(rows->rows[k].name, o->names[i]);
        if (found)
            continue;
        fprintf(stderr, "teeny-run: --input %s: %s has no input of that name; its inputs:", o->names[i], o->model);
        for (int k = 0, n = 0; k < rows->n; k++)
            if (!rows->rows[k].is_output)
                fprintf(stderr, "%s %s", n++ ? "," : "", rows->rows[k].name);
        fprintf(stderr, "\n");
        return 0;
    }
    return 1;
}

/* The file given for input NAME against what the model declares for NAME
 * (row): an element type it takes (float for float, float16 for float16;
 * int32, int64 or bool
 * for int32 and int64; bool for bool; any where the model declares none
 * or another type, left to the importer) and, where the model declares a
 * shape, the rank and every fixed dimension. A [1] file for a rank-0
 * input is taken as the scalar. 1, or a message naming both and 0. */
static int input_fits(const char *name, const char *file, const onnx_io_row *row, onnx_run_input *in)
{
    enum { FLOAT = 1, INT32 = 6, INT64 = 7, BOOL = 9, FLOAT16 = 10 };
    const char *type = onnx_run_input_type(in), *takes = NULL;
    int e = row->elem_type;
    teeny_status st = TEENY_ERR_ARG;
    if (e == FLOAT && (in->dtype != TEENY_ONNX_FLOAT || in->is_half))
        takes = "float";
    else if (e == FLOAT16 && !in->is_half)
        takes = "float16";
    else if ((e == INT32 || e == INT64) && in->dtype == TEENY_ONNX_FLOAT)
        takes = "int32, int64 or bool";
    else if (e == BOOL && !in->is_bool)
        takes = "bool";
    if (!takes && row->ndim == 0 && in->ndim == 1 && in->shape[0] == 1)
        in->ndim = 0; /* the scalar, as teeny-run writes one */
    if (!takes && row->ndim >= 0) {
        int fits = row->ndim == in->ndim;
        for (int d = 0; fits && d < row->ndim && d < TEENY_ONNX_MAX_DIMS; d++)
            fits = row->dims[d] < 0 || row->dims[d] == in->shape[d];
        if (fits)
            return 1;
        st = TEENY_ERR_SHAPE;
    } else if (!takes) {
        return 1;
    }
    char given[160];
    onnx_run_type_shape(given, sizeof given, type, in->ndim, in->shape);
    fprintf(stderr, "teeny-run: --input %s=%s: %s: input %s is %s %s%s%s%s; the file holds %s\n", name, file,
            teeny_status_name(st), name, row->type, row->shape, takes ? " (give " : "", takes ? takes : "",
            takes ? " values)" : "", given);
    return 0;
}

/* --info: the declared inputs and outputs, then what the plan takes and gives. */
static int show_info(teeny_ctx *ctx, const options *o, int n_in, const onnx_run_input *in, report *r)
{
    teeny_status st = onnx_session_import(ctx, o->model, o->batch, n_in, in, r->s);
    if (st != TEENY_OK) {
        printf("model       %s\ndeclared in the model:\n", o->model);
        onnx_io_print(r->declared, "  ", stdout);
        return fail(ctx, st, "cannot import it");
    }
    r->files = calloc((size_t)teeny_onnx_output_count(r->s->model) + 1, sizeof *r->files);
    if (!r->files || !run_plan_files(r->s->model, NULL, r->files))
        return 1;
    if (o->json)
        run_print_json(r);
    else
        run_print_text(r);
    return 0;
}

/* Warm-up, timed runs, the profile. */
static teeny_status run_passes(report *r)
{
    const options *o = r->o;
    teeny_status st = TEENY_OK;
    double ms;
    r->warm = calloc((size_t)o->warmup + 1, sizeof *r->warm);
    r->times = calloc((size_t)o->repeat, sizeof *r->times);
    if (!r->warm || !r->times)
        return TEENY_ERR_NOMEM;
    for (int i = 0; i < o->warmup && st == TEENY_OK; i++)
        st = onnx_session_forward(r->s, &r->warm[i]);
    for (int i = 0; i < o->repeat && st == TEENY_OK; i++) {
        st = onnx_session_forward(r->s, &ms);
        r->times[i] = ms;
    }
    if (st != TEENY_OK)
        return st;
    r->stats = run_stats_of(r->times, o->repeat);
    if (r->s->plan)
        teeny_plan_launches(r->s->plan, &r->launches, NULL);
    if (o->profile)
        st = run_profile(r->s, o->repeat, &r->prof);
    return st;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    setvbuf(stdout, NULL, _IOLBF, 0);

    teeny_ctx *ctx = NULL;
    teeny_status st = teeny_ctx_create(o.spec, &ctx);
    if (st != TEENY_OK) {
        fprintf(stderr, "teeny-run: %s: %s\n", teeny_status_name(st), teeny_last_error(NULL));
        return 1;
    }
    onnx_run_input in[MAX_INPUTS];
    onnx_session s;
    onnx_run_result out;
    onnx_io_rows declared;
    report r;
    memset(in, 0, sizeof in);
    memset(&s, 0, sizeof s);
    memset(&out, 0, sizeof out);
    memset(&r, 0, sizeof r);
    r.o = &o;
    r.s = &s;
    r.device = teeny_ctx_device_name(ctx);
    rc = 0;
    if ((st = onnx_io_read(ctx, o.model, &declared)) != TEENY_OK)
        rc = fail(ctx, st, "");
    else if (!inputs_known(&o, &declared))
        rc = 1;
    r.declared = o.info ? &declared : NULL;
    for (int i = 0; i < o.n_in && !rc; i++) {
        if ((st = run_load_input(ctx, o.names[i], o.files[i], &in[i])) != TEENY_OK) {
            fprintf(stderr, "teeny-run: --input %s=%s: %s: %s\n", o.names[i], o.files[i], teeny_status_name(st),
                    teeny_last_error(ctx));
            rc = 1;
        }
        for (int k = 0; k < declared.n && !rc; k++)
            if (!declared.rows[k].is_output && !strcmp(declared.rows[k].name, o.names[i]) &&
                !input_fits(o.names[i], o.files[i], &declared.rows[k], &in[i]))
                rc = 1;
    }
    if (!rc && o.info) {
        rc = show_info(ctx, &o, o.n_in, in, &r);
    } else if (!rc) {
        if ((st = onnx_session_import(ctx, o.model, o.batch, o.n_in, in, &s)) != TEENY_OK)
            rc = fail(ctx, st, "");
        else if ((o.out_dir && !run_make_dir(o.out_dir)) ||
                 !(r.files = calloc((size_t)teeny_onnx_output_count(s.model) + 1, sizeof *r.files)) ||
                 !run_plan_files(s.model, o.out_dir, r.files))
            rc = 1;
        else if ((s.frozen_params = !o.no_optimize, st = onnx_session_compile(&s)) != TEENY_OK)
            rc = fail(ctx, st, "compiling");
        else if ((st = onnx_session_inputs(&s, o.n_in, in, 1, (uint64_t)o.seed)) != TEENY_OK)
            rc = fail(ctx, st, "writing the inputs");
        else if ((st = run_passes(&r)) != TEENY_OK)
            rc = fail(ctx, st, "running");
        else if ((st = onnx_session_outputs(&s, &out)) != TEENY_OK)
            rc = fail(ctx, st, "reading the outputs");
        else if (o.out_dir && run_write_outputs(ctx, &out, o.out_dir, r.files) != TEENY_OK)
            rc = 1;
        if (!rc) {
            r.ran = 1;
            r.written = o.out_dir != NULL;
            if (o.json)
                run_print_json(&r);
            else
                run_print_text(&r);
        }
    }
    onnx_run_result_free(&out);
    onnx_session_close(&s);
    for (int i = 0; i < o.n_in; i++) {
        free((void *)in[i].data);
        free(o.names[i]);
    }
    free(declared.rows);
    free(r.files);
    free(r.warm);
    free(r.times);
    free(r.prof.kernels.rows);
    free(r.prof.nodes.rows);
    teeny_ctx_destroy(ctx);
    return rc;
}
