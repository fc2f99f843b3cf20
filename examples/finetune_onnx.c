/*
 * finetune_onnx -- fine-tune an imported ONNX model with teenycl.
 *
 * Loads MODEL.onnx at batch B (include/teenycl_onnx.h), freezes the
 * parameters whose ONNX initializer names start with --freeze-prefix,
 * appends a softmax cross-entropy against int32 labels to the model's
 * first output (flattened to [B, K] when it has more dimensions), compiles
 * the graph for training (batch norm with batch statistics, a gradient for
 * every trainable initializer) and runs N AdamW steps on a synthetic task
 * that the model can learn: each sample's class k is drawn from the seeded
 * generator and its input is a fixed per-class, per-channel offset (also
 * seeded) plus uniform noise of variance 1, so the label follows from the
 * input. A pool of four batches is cycled. The loss is printed every few
 * steps and at the end:
 *   step 1/20 loss 1.7012
 *   ...
 *   first_loss 1.7012 final_loss 0.4120
 * Exit status 0 when the final loss is below the first, 1 when it is not
 * or something fails, 2 for a bad command line. --out saves the fine-tuned
 * parameters, batch-norm statistics and AdamW state (safetensors, under
 * the ONNX initializer names) with teeny_graph_save.
 *
 * Usage: finetune_onnx MODEL.onnx [--input NAME] [--steps N] [--batch B]
 *            [--lr X] [--seed S] [--freeze-prefix P] [--device SPEC] [--out FILE]
 *
 * Example (the committed test model: conv, batch norm, pools, Gemm; input
 * "x" [B, 3, 8, 8], output "logits" [B, 5]):
 *   build/finetune_onnx tests/onnx/convnet.onnx --steps 20 --freeze-prefix conv1.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "teenycl.h"
#include "teenycl_onnx.h"

#define POOL 4              /* synthetic batches, cycled */
#define MAX_STEPS 1000000

typedef struct {
    const char *model, *input, *freeze, *device, *out;
    uint64_t seed;
    int64_t steps, batch;
    double lr;
} options;

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_sym(uint64_t *s)
{
    return (float)((double)(rng_next(s) >> 11) * 0x1.0p-52 - 1.0);
}

/* The whole of s as a decimal number in [lo, hi] into *out, or a message
 * and 0: digits only (no sign, space or fraction), no overflow, in range. */
static int parse_number(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
    if (!end || *end) {
        fprintf(stderr, "error: %s \"%s\": not a whole number >= 0 (digits only)\n", opt, s);
        return 0;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "error: %s %s: out of range (%" PRIu64 " to %" PRIu64 ")\n", opt, s, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

/* The whole of s as a finite decimal real in (0, 1] (no leading space or
 * sign, nothing after it), or a message and 0. */
static int parse_lr(const char *opt, const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = (*s >= '0' && *s <= '9') || *s == '.' ? strtod(s, &end) : 0;
    if (!end || *end || errno == ERANGE || !isfinite(v) || v <= 0 || v > 1) {
        fprintf(stderr, "error: %s \"%s\": not a number in (0, 1]\n", opt, s);
        return 0;
    }
    *out = v;
    return 1;
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){NULL, NULL, NULL, NULL, NULL, 1, 20, 8, 1e-2};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n = 0;
        int ok = 1;
        if (a[0] != '-' && !o->model) {
            o->model = a;
            continue;
        }
        if (!v)
            goto usage;
        if (!strcmp(a, "--input")) {
            o->input = v;
        } else if (!strcmp(a, "--steps")) {
            if ((ok = parse_number(a, v, 1, MAX_STEPS, &n)))
                o->steps = (int64_t)n;
        } else if (!strcmp(a, "--batch")) {
            if ((ok = parse_number(a, v, 2, 65536, &n)))
                o->batch = (int64_t)n;
        } else if (!strcmp(a, "--lr")) {
            ok = parse_lr(a, v, &o->lr);
        } else if (!strcmp(a, "--seed")) {
            ok = parse_number(a, v, 0, UINT64_MAX, &o->seed);
        } else if (!strcmp(a, "--freeze-prefix")) {
            o->freeze = v;
        } else if (!strcmp(a, "--device")) {
            o->device = v;
        } else if (!strcmp(a, "--out")) {
            o->out = v;
        } else {
            goto usage;
        }
        if (!ok)
            return 2;
        i++;
    }
    if (o->model)
        return 0;
usage:
    fprintf(stderr,
            "usage: %s MODEL.onnx [--input NAME] [--steps N] [--batch B] [--lr X] [--seed S]\n"
            "          [--freeze-prefix P] [--device SPEC] [--out FILE]\n"
            "  --steps 1..%d (20), --batch 2..65536 (8), --lr in (0, 1] (0.01), --seed 0..2^64-1 (1)\n",
            argv[0], MAX_STEPS);
    return 2;
}

/* --out before anything is trained: not a directory, and a file can be
 * made in its directory (a missing or read-only directory fails now, not
 * after the last step). 1 when usable. */
static int out_file_usable(const char *path)
{
    struct stat sb;
    char dir[1024], probe[1200];
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
    snprintf(probe, sizeof probe, "%s/.finetune_onnx.%ld.probe", dir, (long)getpid());
    FILE *f = fopen(probe, "wx");
    if (!f) {
        fprintf(stderr, "error: --out %s: cannot write there: %s\n", path, strerror(errno));
        return 0;
    }
    fclose(f);
    remove(probe);
    return 1;
}

/* The synthetic task: POOL batches of B samples of `sample` floats whose
 * `channels` channels (dimension 1) each hold `plane` values. Class k of
 * K shifts channel c by offset[k][c] in [-1, 1); the noise is uniform with
 * variance 1. */
static void make_data(uint64_t seed, int64_t batch, int64_t channels, int64_t plane, int64_t classes, float *x,
                      int32_t *y)
{
    uint64_t s = seed;
    float *offset = malloc((size_t)(classes * channels) * sizeof *offset);
    if (!offset)
        return;
    for (int64_t i = 0; i < classes * channels; i++)
        offset[i] = rng_sym(&s);
    for (int64_t n = 0; n < POOL * batch; n++) {
        int32_t k = (int32_t)(rng_next(&s) % (uint64_t)classes);
        y[n] = k;
        for (int64_t c = 0; c < channels; c++)
            for (int64_t p = 0; p < plane; p++)
                x[(n * channels + c) * plane + p] = offset[k * channels + c] + 1.7320508f * rng_sym(&s);
    }
    free(offset);
}

#define TRY(call)                                                                                 \
    do {                                                                                          \
        teeny_status st_ = (call);                                                                \
        if (st_ != TEENY_OK) {                                                                    \
            fprintf(stderr, "error: %s: %s\n  (%s)\n", teeny_status_name(st_), teeny_last_error(ctx), #call); \
            goto finish;                                                                          \
        }                                                                                         \
    } while (0)

/* The model's input to feed (by name, or the only one) into *node and its
 * shape at the import batch; 0 with a message when there is none. */
static int pick_input(const teeny_onnx_model *m, const char *want, teeny_node *node, int *ndim, int64_t shape[5])
{
    int n = teeny_onnx_input_count(m);
    for (int i = 0; i < n; i++) {
        const char *name;
        teeny_onnx_dtype dt;
        if (teeny_onnx_input(m, i, &name, node, &dt) != TEENY_OK)
            break;
        if (want ? strcmp(name, want) : n != 1)
            continue;
        if (dt != TEENY_ONNX_FLOAT) {
            fprintf(stderr, "error: input %s is not float32\n", name);
            return 0;
        }
        return teeny_graph_node_info(teeny_onnx_graph(m), *node, NULL, ndim, shape) == TEENY_OK && *ndim >= 2;
    }
    if (want)
        fprintf(stderr, "error: the model has no input named \"%s\" that needs a value\n", want);
    else
        fprintf(stderr, "error: the model has %d inputs that need values; this example feeds exactly one\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    if (o.out && !out_file_usable(o.out))
        return 1;

    int exit_code = 1;
    teeny_ctx *ctx = NULL;
    teeny_onnx_model *m = NULL;
    teeny_plan *plan = NULL;
    teeny_optimizer *opt = NULL;
    teeny_tensor **params = NULL, **grads = NULL;
    float *x = NULL;
    int32_t *y = NULL;
    TRY(teeny_ctx_create(o.device, &ctx));

    teeny_onnx_params op = TEENY_ONNX_PARAMS_INIT;
    op.batch = o.batch;
    TRY(teeny_onnx_load(ctx, o.model, &op, &m));
    teeny_graph *g = teeny_onnx_graph(m);

    teeny_node in, out, logits, labels, loss;
    int in_ndim, out_ndim;
    int64_t in_shape[5], out_shape[TEENY_ONNX_MAX_DIMS];
    if (!pick_input(m, o.input, &in, &in_ndim, in_shape))
        goto finish;
    if (teeny_onnx_output_count(m) < 1) {
        fprintf(stderr, "error: the model has no outputs\n");
        goto finish;
    }
    TRY(teeny_onnx_output(m, 0, NULL, &out, &out_ndim, out_shape));
    int64_t classes = 1;
    for (int d = 1; d < out_ndim; d++)
        classes *= out_shape[d];
    if (out < 0 || out_ndim < 2 || out_shape[0] != o.batch || classes < 2) {
        fprintf(stderr, "error: the model's first output is not [B, K, ...] with K >= 2 at batch %" PRId64 "\n",
                o.batch);
        goto finish;
    }
    logits = out;
    if (out_ndim > 2)
        TRY(teeny_graph_flatten(g, "finetune.flatten", out, &logits));
    TRY(teeny_graph_labels(g, "finetune.labels", &labels));
    TRY(teeny_graph_softmax_cross_entropy(g, "finetune.loss", logits, labels, &loss));

    /* freeze by prefix (names are valid until the next teeny_graph_param) */
    int n_params = teeny_graph_param_count(g), frozen = 0;
    for (int i = 0; o.freeze && i < n_params; i++) {
        const char *name;
        char copy[512];
        TRY(teeny_graph_param(g, i, &name, NULL, NULL));
        if (strncmp(name, o.freeze, strlen(o.freeze)) || snprintf(copy, sizeof copy, "%s", name) >= (int)sizeof copy)
            continue;
        TRY(teeny_onnx_set_trainable(m, copy, 0));
        frozen++;
    }

    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = teeny_onnx_batch(m);
    pp.training = 1;
    pp.loss = loss;
    TRY(teeny_graph_compile(g, &pp, &plan));

    params = calloc((size_t)n_params + 1, sizeof *params);
    grads = calloc((size_t)n_params + 1, sizeof *grads);
    if (!params || !grads) {
        fprintf(stderr, "error: out of memory\n");
        goto finish;
    }
    int n_train = 0;
    for (int i = 0; i < n_params; i++) {
        TRY(teeny_graph_param(g, i, NULL, &params[n_train], &grads[n_train]));
        n_train += grads[n_train] != NULL; /* frozen: no gradient */
    }
    printf("model %s: %d parameters, %d frozen (prefix \"%s\"), %" PRId64 " classes, batch %" PRId64 ", device %s\n",
           o.model, n_params, frozen, o.freeze ? o.freeze : "", classes, o.batch, teeny_ctx_device_name(ctx));
    if (n_train == 0) {
        fprintf(stderr, "error: every parameter is frozen; nothing to fine-tune\n");
        goto finish;
    }
    teeny_optim_params opp = TEENY_OPTIM_PARAMS_INIT;
    opp.kind = TEENY_OPTIM_ADAMW;
    opp.lr = (float)o.lr;
    opp.weight_decay = 1e-4f;
    TRY(teeny_optimizer_create(ctx, &opp, n_train, params, (const teeny_tensor *const *)grads, &opt));

    int64_t sample = 1;
    for (int d = 1; d < in_ndim; d++)
        sample *= in_shape[d];
    x = malloc((size_t)(POOL * o.batch * sample) * sizeof *x);
    y = malloc((size_t)(POOL * o.batch) * sizeof *y);
    if (!x || !y) {
        fprintf(stderr, "error: out of memory\n");
        goto finish;
    }
    make_data(o.seed, o.batch, in_shape[1], sample / in_shape[1], classes, x, y);

    teeny_tensor *tx, *ty;
    TRY(teeny_plan_tensor(plan, in, &tx));
    TRY(teeny_plan_tensor(plan, labels, &ty));
    int64_t every = o.steps > 10 ? o.steps / 10 : 1;
    float first = 0, last = 0;
    for (int64_t s = 0; s < o.steps; s++) {
        int64_t b = s % POOL;
        TRY(teeny_tensor_write(tx, x + b * o.batch * sample, (size_t)(o.batch * sample)));
        TRY(teeny_tensor_write_i32(ty, y + b * o.batch, (size_t)o.batch));
        TRY(teeny_plan_forward(plan));
        TRY(teeny_plan_backward(plan));
        TRY(teeny_optimizer_step(opt, opp.lr, -1.0f));
        TRY(teeny_plan_read_loss(plan, &last)); /* host sync: the model is small */
        if (s == 0)
            first = last;
        if (!isfinite(last)) {
            fprintf(stderr, "error: step %" PRId64 ": the loss is %g\n", s + 1, last);
            goto finish;
        }
        if (s == 0 || (s + 1) % every == 0 || s + 1 == o.steps)
            printf("step %" PRId64 "/%" PRId64 " loss %.4f\n", s + 1, o.steps, last);
    }
    printf("first_loss %.4f final_loss %.4f\n", first, last);
    if (o.out) {
        const char *keys[] = {"model", "steps"};
        char steps[32];
        snprintf(steps, sizeof steps, "%" PRId64, o.steps);
        const char *vals[] = {o.model, steps};
        TRY(teeny_graph_save(g, opt, o.out, 2, keys, vals));
        printf("saved %s\n", o.out);
    }
    exit_code = last < first ? 0 : 1;
    if (exit_code)
        fprintf(stderr, "error: the final loss is not below the first\n");
finish:
    teeny_optimizer_destroy(opt);
    teeny_plan_destroy(plan);
    teeny_onnx_destroy(m);
    free(params);
    free(grads);
    free(x);
    free(y);
    teeny_ctx_destroy(ctx);
    return exit_code;
}
