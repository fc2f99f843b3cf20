/*
 * train_options.h -- train_fashion_mnist's command line: the options, their
 * table (--help, --version and the command-line errors are tools/cli.h's)
 * and their parsing, and under --dist the check that every rank was
 * started with the same ones. Header-only, as fashion_net.h, so the
 * example stays one program.
 */
#ifndef TEENY_TRAIN_OPTIONS_H
#define TEENY_TRAIN_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include "options.h"
#ifdef TEENY_WITH_MPI
#include "teenycl_dist.h"
#endif

#define CPU_DEFAULT_EPOCHS 1
#define DEFAULT_EPOCHS 15
#define MAX_EPOCHS 1000

typedef struct {
    int epochs, epochs_given;
    const char *device, *out, *data, *resume, *eval;
    uint64_t seed;
    int64_t batch, train_limit, test_limit;
    int dist;
    int64_t shards;     /* --dist: global shards per batch; 0: one per rank */
} options;

enum { O_EPOCHS, O_DEVICE, O_SEED, O_BATCH, O_OUT, O_DATA, O_RESUME, O_EVAL, O_TRAIN_LIMIT, O_TEST_LIMIT, O_DIST,
       O_SHARDS, O_COUNT };

static const cli_opt OPTS[] = {
    [O_EPOCHS] = {"--epochs", "N", "epochs, 1..1000 (default 15 on a GPU, 1 on a CPU)"},
    [O_DEVICE] = {"--device", "SPEC", "the OpenCL device: cpu, gpu, pocl, nvidia, P:D, a part of its name\n"
                                      "(default: TEENY_DEVICE, else the first GPU, else the first CPU)"},
    [O_SEED] = {"--seed", "S", "the seed of the weights, the data order and the flips, 0..2^64-1 (1)"},
    [O_BATCH] = {"--batch", "B", "the batch, 2..65536 (128)"},
    [O_OUT] = {"--out", "DIR", "where the checkpoints and the plot go (runs/fashion; created)"},
    [O_DATA] = {"--data", "DIR", "the Fashion-MNIST files (/usr/share/datasets/fashion-mnist)"},
    [O_RESUME] = {"--resume", "CHECKPOINT", "continue a run from its checkpoint, bit for bit"},
    [O_EVAL] = {"--eval", "CHECKPOINT", "evaluate a checkpoint on the test set; train nothing"},
    [O_TRAIN_LIMIT] = {"--train-limit", "N", "use the first N training images (0: all)"},
    [O_TEST_LIMIT] = {"--test-limit", "N", "use the first N test images (0: all)"},
    [O_DIST] = {"--dist", NULL, "data-parallel under mpirun, one rank per device (a build with\n"
                                "make WITH_MPI=1)"},
    [O_SHARDS] = {"--shards", "S", "--dist: the global batch's shards, 1..65536 (default: the ranks)"},
    [O_COUNT] = {NULL, NULL, NULL},
};

static const cli_spec SPEC = {
    "train_fashion_mnist",
    "[--epochs N] [--device SPEC] [--seed S] [--batch B] [--out DIR] [--data DIR]\n"
    " [--resume CHECKPOINT] [--eval CHECKPOINT] [--train-limit N] [--test-limit N]\n"
    " [--dist [--shards S]]",
    "Train a small conv net with a C2PSA attention block on Fashion-MNIST: a progress bar on\n"
    "a terminal's stderr, one line per epoch on stdout, a checkpoint and an SVG plot in --out.",
    OPTS,
    "Exit status: 0 ok; 1 a failure; 2 a bad command line.",
};

static inline int train_parse(int argc, char **argv, options *o)
{
    *o = (options){DEFAULT_EPOCHS, 0, NULL, "runs/fashion", "/usr/share/datasets/fashion-mnist", NULL, NULL, 1, 128, 0, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *v;
        char what[300];
        uint64_t n = 0;
        int ok = 1, k = cli_next(&SPEC, argc, argv, &i, &v);
        if (k == CLI_EXIT_OK)
            return -1;
        if (k == CLI_EXIT_USAGE)
            return 2;
        if (k == CLI_ARG) {
            snprintf(what, sizeof what, "unexpected argument \"%.200s\"", v);
            return cli_fail(&SPEC, what);
        }
        if (k == O_DIST) {
#ifdef TEENY_WITH_MPI
            o->dist = 1;
            continue;
#else
            fprintf(stderr, "error: --dist needs a build with MPI (make WITH_MPI=1)\n");
            return 2;
#endif
        }
        if (k == O_EPOCHS) {
            if ((ok = ex_parse_number(OPTS[k].name, v, 1, MAX_EPOCHS, &n)))
                o->epochs = (int)n;
            o->epochs_given = 1;
        } else if (k == O_DEVICE) {
            o->device = v;
        } else if (k == O_SEED) {
            ok = ex_parse_number(OPTS[k].name, v, 0, UINT64_MAX, &o->seed);
        } else if (k == O_BATCH) {
            if ((ok = ex_parse_number(OPTS[k].name, v, 2, 65536, &n)))
                o->batch = (int64_t)n;
        } else if (k == O_OUT) {
            o->out = v;
        } else if (k == O_DATA) {
            o->data = v;
        } else if (k == O_RESUME) {
            o->resume = v;
        } else if (k == O_EVAL) {
            o->eval = v;
        } else if (k == O_TRAIN_LIMIT || k == O_TEST_LIMIT) {
            if ((ok = ex_parse_number(OPTS[k].name, v, 0, INT64_MAX, &n)))
                *(k == O_TRAIN_LIMIT ? &o->train_limit : &o->test_limit) = (int64_t)n;
        } else if (k == O_SHARDS) {
            if ((ok = ex_parse_number(OPTS[k].name, v, 1, 65536, &n)))
                o->shards = (int64_t)n;
        }
        if (!ok)
            return 2;
    }
    if (o->shards && !o->dist) {
        fprintf(stderr, "error: --shards needs --dist\n");
        return 2;
    }
    return 0;
}

#ifdef TEENY_WITH_MPI
/* The options every rank must be started with (the data order, the
 * shards, the schedule and the checkpoints follow from them), compared
 * one by one across ranks: ranks started with, say, different --seed
 * would train out of step without a word. Every rank gets the same
 * answer, so all stop at the same option. --device, --out and --data may
 * differ (each rank its device; rank 0 writes; the data is compared after
 * loading). */
static inline teeny_status train_check_options(teeny_dist *dist, const options *o)
{
    const struct {
        const char *name;
        uint64_t value;
    } opts[] = {{"--seed", o->seed},
                {"--batch", (uint64_t)o->batch},
                {"--shards", (uint64_t)o->shards},
                {"--epochs", o->epochs_given ? (uint64_t)o->epochs : 0},
                {"--train-limit", (uint64_t)o->train_limit},
                {"--test-limit", (uint64_t)o->test_limit},
                {"--resume (given or not)", o->resume != NULL},
                {"--eval (given or not)", o->eval != NULL}};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        teeny_status st = teeny_dist_check_same(dist, &opts[i].value, sizeof opts[i].value, opts[i].name);
        if (st != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}
#endif

#endif
