/*
 * finetune_options.h -- finetune_onnx's command line: the options, their
 * table (--help, --version and the command-line errors are tools/cli.h's),
 * their parsing, the --out file proven writable before anything is
 * trained, and which data they choose (Fashion-MNIST or the synthetic task). Header-only, as fashion_net.h, so the example stays one
 * program.
 */
#ifndef TEENY_FINETUNE_OPTIONS_H
#define TEENY_FINETUNE_OPTIONS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "options.h"

#define MAX_STEPS 1000000
#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

typedef struct {
    const char *model, *input, *freeze, *device, *out, *data;
    uint64_t seed;
    int64_t steps, epochs, batch, train_limit, test_limit;
    double lr;
    int synthetic, data_given, steps_given;
} options;

enum { O_INPUT, O_STEPS, O_EPOCHS, O_BATCH, O_LR, O_SEED, O_FREEZE, O_DEVICE, O_OUT, O_DATA, O_SYNTHETIC,
       O_TRAIN_LIMIT, O_TEST_LIMIT, O_COUNT };

static const cli_opt OPTS[] = {
    [O_INPUT] = {"--input", "NAME", "the model's input to feed (default: its only one)"},
    [O_STEPS] = {"--steps", "N", "AdamW steps, 1..1000000 (20)"},
    [O_EPOCHS] = {"--epochs", "E", "passes over the training images instead, 1..1000"},
    [O_BATCH] = {"--batch", "B", "the batch, 2..65536 (8); the model must take it (a dynamic batch)"},
    [O_LR] = {"--lr", "X", "the learning rate, in (0, 1] (0.01)"},
    [O_SEED] = {"--seed", "S", "the seed of the data order and the synthetic task, 0..2^64-1 (1)"},
    [O_FREEZE] = {"--freeze-prefix", "P", "freeze the parameters whose ONNX initializer names start with P"},
    [O_DEVICE] = {"--device", "SPEC", "the OpenCL device: cpu, gpu, pocl, nvidia, P:D, a part of its name\n"
                                      "(default: TEENY_DEVICE, else the first GPU, else the first CPU)"},
    [O_OUT] = {"--out", "FILE", "save the fine-tuned parameters and AdamW state (safetensors)"},
    [O_DATA] = {"--data", "DIR", "the Fashion-MNIST files (" DEFAULT_DATA ")"},
    [O_SYNTHETIC] = {"--synthetic", NULL, "train on a seeded synthetic task instead (the loss only)"},
    [O_TRAIN_LIMIT] = {"--train-limit", "N", "use the first N training images (default all)"},
    [O_TEST_LIMIT] = {"--test-limit", "N", "use the first N test images (default all)"},
    [O_COUNT] = {NULL, NULL, NULL},
};

static const cli_spec SPEC = {
    "finetune_onnx",
    "MODEL.onnx [--input NAME] [--steps N | --epochs E] [--batch B] [--lr X] [--seed S]\n"
    " [--freeze-prefix P] [--device SPEC] [--out FILE] [--data DIR | --synthetic]\n"
    " [--train-limit N] [--test-limit N]",
    "Fine-tune an imported ONNX classifier (image input [B, C, H, W], output [B, K]) on\n"
    "Fashion-MNIST classes 0..K-1 with AdamW, and report its test accuracy before and after.\n"
    "Export the model with a dynamic batch (torch.onnx.export(..., dynamic_axes=...)).",
    OPTS,
    "Exit status: 0 the final loss is below the first; 1 it is not, or a failure;\n"
    "2 a bad command line.",
};

static inline int finetune_parse(int argc, char **argv, options *o)
{
    *o = (options){.data = DEFAULT_DATA, .seed = 1, .steps = 20, .batch = 8, .lr = 1e-2};
    for (int i = 1; i < argc; i++) {
        const char *v;
        char what[600];
        uint64_t n = 0;
        int ok = 1, k = cli_next(&SPEC, argc, argv, &i, &v);
        if (k == CLI_EXIT_OK)
            return -1;
        if (k == CLI_EXIT_USAGE)
            return 2;
        if (k == CLI_ARG && o->model) {
            snprintf(what, sizeof what, "a second model \"%.200s\" (the model is \"%.200s\")", v, o->model);
            return cli_fail(&SPEC, what);
        }
        if (k == CLI_ARG) {
            o->model = v;
        } else if (k == O_SYNTHETIC) {
            o->synthetic = 1;
        } else if (k == O_INPUT) {
            o->input = v;
        } else if (k == O_STEPS) {
            if ((ok = ex_parse_number(OPTS[k].name, v, 1, MAX_STEPS, &n)))
                o->steps = (int64_t)n;
            o->steps_given = 1;
        } else if (k == O_EPOCHS) {
            if ((ok = ex_parse_number(OPTS[k].name, v, 1, 1000, &n)))
                o->epochs = (int64_t)n;
        } else if (k == O_BATCH) {
            if ((ok = ex_parse_number(OPTS[k].name, v, 2, 65536, &n)))
                o->batch = (int64_t)n;
        } else if (k == O_LR) {
            ok = ex_parse_real(OPTS[k].name, v, 0, 1, &o->lr);
        } else if (k == O_SEED) {
            ok = ex_parse_number(OPTS[k].name, v, 0, UINT64_MAX, &o->seed);
        } else if (k == O_FREEZE) {
            o->freeze = v;
        } else if (k == O_DEVICE) {
            o->device = v;
        } else if (k == O_OUT) {
            o->out = v;
        } else if (k == O_DATA) {
            o->data = v;
            o->data_given = 1;
        } else if (k == O_TRAIN_LIMIT || k == O_TEST_LIMIT) {
            if ((ok = ex_parse_number(OPTS[k].name, v, 1, INT64_MAX, &n)))
                *(k == O_TRAIN_LIMIT ? &o->train_limit : &o->test_limit) = (int64_t)n;
        }
        if (!ok)
            return 2;
    }
    if (!o->model)
        return cli_fail(&SPEC, "no model given");
    if (o->steps_given && o->epochs) {
        fprintf(stderr, "error: --steps and --epochs: give one\n");
        return 2;
    }
    if (o->synthetic && o->data_given) {
        fprintf(stderr, "error: --data and --synthetic: give one\n");
        return 2;
    }
    return 0;
}

/* --out before anything is trained: not a directory, and a file can be
 * made in its directory. 1 when usable. */
static inline int finetune_out_file_usable(const char *path)
{
    struct stat sb;
    char dir[1024];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
        fprintf(stderr, "error: --out %s: path too long\n", path);
        return 0;
    }
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (!stat(path, &sb) && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "error: --out %s: is a directory\n", path);
        return 0;
    }
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "error: --out %s: %s is not a directory\n", path, dir);
        return 0;
    }
    return ex_dir_takes_files("--out", path, dir, "finetune_onnx");
}

/* Whether to train on Fashion-MNIST: 1 yes, 0 synthetic (said why). */
static inline int finetune_want_fashion(const options *o)
{
    struct stat sb;
    if (o->synthetic) {
        printf("data: synthetic (--synthetic): per-class channel offsets plus noise\n");
        return 0;
    }
    if (!o->data_given && stat(o->data, &sb)) {
        printf("data: synthetic (no Fashion-MNIST at %s: install dataset-fashion-mnist or pass --data DIR): "
               "per-class channel offsets plus noise\n", o->data);
        return 0;
    }
    return 1;
}

#endif
