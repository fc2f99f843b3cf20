/*
 * finetune_onnx -- fine-tune an imported ONNX conv net on Fashion-MNIST
 * with teenycl and report its test accuracy before and after.
 *
 * Loads MODEL.onnx at batch B (include/teenycl_onnx.h), freezes the
 * parameters whose ONNX initializer names start with --freeze-prefix,
 * appends a softmax cross-entropy against int32 labels to the model's
 * first output (flattened to [B, K] when it has more dimensions), compiles
 * the graph for training (batch norm with batch statistics, a gradient for
 * every trainable initializer) and for inference at the same batch, and
 * runs N AdamW steps.
 *
 * Data: Fashion-MNIST from --data (Debian's dataset-fashion-mnist by
 * default). The model's input must be an image [B, C, H, W]: each 28x28
 * image is normalized (mean 0.2860, std 0.3530, as train_fashion_mnist),
 * resized to H x W by area averaging -- PyTorch's adaptive_avg_pool2d: an
 * output pixel is the mean of the input pixels its cell covers, so it
 * shrinks by averaging and enlarges by repeating pixels; 28x28 is kept as
 * it is -- and repeated over the C channels. A model with K < 10 outputs
 * trains and is tested on the classes 0..K-1 only. Training images are
 * drawn in a seeded shuffled order (reshuffled each epoch); the test
 * accuracy (top-1, over the test set or its first --test-limit images of
 * those classes) is measured with the inference plan before the first
 * step and after the last:
 *   data: Fashion-MNIST ...
 *   test_accuracy_before 0.2010 (5000 images)
 *   step 1/20 loss 1.7012
 *   ...
 *   first_loss 1.7012 final_loss 0.9120
 *   test_accuracy_after 0.5530 (5000 images)
 * With --synthetic, or when the default data directory does not exist, it
 * trains instead on a seeded synthetic task the model can learn (each
 * sample's class drawn from the generator, its input a fixed per-class,
 * per-channel offset plus uniform noise of variance 1; a pool of four
 * batches cycled) and reports the loss only.
 *
 * Exit status 0 when the final loss is below the first, 1 when it is not
 * or something fails (a --data directory given but missing, an input that
 * is not an image, a --freeze-prefix no parameter's name starts with: the
 * message lists the names), 2 for a bad command line. Errors say what was
 * being done and the library's message; a model exported for a fixed
 * batch other than --batch (a batch of 1: torch.onnx.export without
 * dynamic_axes) gets a hint on how to export it. --out saves the fine-tuned
 * parameters, batch-norm statistics and AdamW state (safetensors, under
 * the ONNX initializer names) with teeny_graph_save.
 *
 * Usage: finetune_onnx MODEL.onnx [--input NAME] [--steps N | --epochs E]
 *            [--batch B] [--lr X] [--seed S] [--freeze-prefix P] [--device SPEC]
 *            [--out FILE] [--data DIR | --synthetic] [--train-limit N] [--test-limit N]
 *
 * Example (the committed test model: conv, batch norm, pools, Gemm; input
 * "x" [B, 3, 8, 8], output "logits" [B, 5]):
 *   build/finetune_onnx tests/onnx/convnet.onnx --steps 20 --freeze-prefix conv1.
 *
 * Reading order: main(), at the end, runs the steps above it: load_model,
 * add_loss, make_training, load_data, accuracy_before, train,
 * finish_training. The command line is finetune_options.h's.
 */
#include "fashion_net.h"
#include "finetune_options.h"
#include "options.h"
#include "teenycl_onnx.h"

#define POOL 4 /* synthetic batches, cycled */

/* ---- the data ---- */

/* Where a batch's samples come from: Fashion-MNIST images of the classes
 * below `classes` (their indices in a split), or the synthetic pool. */
typedef struct {
    fn_split train, test;
    int64_t *train_idx, *test_idx, n_train, n_test;
    int64_t channels, height, width, sample;   /* the model's input per sample */
    float *pool_x;                             /* synthetic: POOL batches */
    int32_t *pool_y;
} data_set;

/* The synthetic task: POOL batches of B samples whose channels each hold
 * `plane` values. Class k of K shifts channel c by offset[k][c] in
 * [-1, 1); the noise is uniform with variance 1. */
static int make_synthetic(uint64_t seed, int64_t batch, int64_t classes, data_set *d)
{
    uint64_t s = seed;
    int64_t plane = d->sample / d->channels;
    float *offset = malloc((size_t)(classes * d->channels) * sizeof *offset);
    d->pool_x = malloc((size_t)(POOL * batch * d->sample) * sizeof *d->pool_x);
    d->pool_y = malloc((size_t)(POOL * batch) * sizeof *d->pool_y);
    if (!offset || !d->pool_x || !d->pool_y) {
        free(offset);
        fprintf(stderr, "error: out of memory\n");
        return 0;
    }
    for (int64_t i = 0; i < classes * d->channels; i++)
        offset[i] = (float)((double)(ex_rng_next(&s) >> 11) * 0x1.0p-52 - 1.0);
    for (int64_t n = 0; n < POOL * batch; n++) {
        int32_t k = (int32_t)(ex_rng_next(&s) % (uint64_t)classes);
        d->pool_y[n] = k;
        for (int64_t c = 0; c < d->channels; c++)
            for (int64_t p = 0; p < plane; p++)
                d->pool_x[(n * d->channels + c) * plane + p] =
                    offset[k * d->channels + c] + 1.7320508f * (float)((double)(ex_rng_next(&s) >> 11) * 0x1.0p-52 - 1.0);
    }
    free(offset);
    return 1;
}

/* The indices of split s's images of classes below `classes`, at most
 * limit (0: all) of them, in order. */
static int64_t *pick_classes(const fn_split *s, int64_t classes, int64_t limit, int64_t *n)
{
    int64_t *idx = malloc((size_t)(s->n ? s->n : 1) * sizeof *idx);
    *n = 0;
    if (!idx)
        return NULL;
    for (int64_t i = 0; i < s->n && (!limit || *n < limit); i++)
        if (teeny_idx_data(s->labels)[i] < classes)
            idx[(*n)++] = i;
    return idx;
}

/* Image i of s as the model's input: normalized, resized 28x28 -> H x W by
 * area averaging (adaptive_avg_pool2d's cells: rows [floor(r*28/H),
 * ceil((r+1)*28/H)), columns alike), repeated over the channels. */
static void model_image(const data_set *d, const fn_split *s, int64_t i, float *dst)
{
    float img[784];
    fn_image(s, i, 0, img);
    for (int64_t r = 0; r < d->height; r++) {
        int64_t r0 = r * 28 / d->height, r1 = ((r + 1) * 28 + d->height - 1) / d->height;
        for (int64_t c = 0; c < d->width; c++) {
            int64_t c0 = c * 28 / d->width, c1 = ((c + 1) * 28 + d->width - 1) / d->width;
            double sum = 0;
            for (int64_t y = r0; y < r1; y++)
                for (int64_t x = c0; x < c1; x++)
                    sum += img[y * 28 + x];
            float v = (float)(sum / (double)((r1 - r0) * (c1 - c0)));
            for (int64_t ch = 0; ch < d->channels; ch++)
                dst[(ch * d->height + r) * d->width + c] = v;
        }
    }
}

/* Loads Fashion-MNIST for a model of `classes` outputs and input
 * [B, C, H, W], or says why not: 1 loaded, 0 failed (message printed). */
static int load_fashion(const options *o, int in_ndim, int64_t classes, data_set *d)
{
    if (in_ndim != 4) {
        fprintf(stderr, "error: Fashion-MNIST needs an image input [B, C, H, W]; this one has %d dimensions "
                        "(--synthetic trains on synthetic data instead)\n", in_ndim);
        return 0;
    }
    if (fn_load_split(o->data, "train", &d->train) || fn_load_split(o->data, "t10k", &d->test))
        return 0;
    int64_t used = classes < FN_CLASSES ? classes : FN_CLASSES;
    d->train_idx = pick_classes(&d->train, used, o->train_limit, &d->n_train);
    d->test_idx = pick_classes(&d->test, used, o->test_limit, &d->n_test);
    if (!d->train_idx || !d->test_idx) {
        fprintf(stderr, "error: out of memory\n");
        return 0;
    }
    if (d->n_train < o->batch) {
        fprintf(stderr, "error: %" PRId64 " training images make no batch of %" PRId64 "\n", d->n_train, o->batch);
        return 0;
    }
    printf("data: Fashion-MNIST (%s): classes 0..%" PRId64 "%s, %" PRId64 " training and %" PRId64
           " test images; 28x28 %s %" PRId64 "x%" PRId64 "%s, repeated over %" PRId64 " channel(s)\n",
           o->data, used - 1, classes < FN_CLASSES ? " (the model's outputs)" : "", d->n_train, d->n_test,
           d->height == 28 && d->width == 28 ? "kept as" : "resized to", d->height, d->width,
           d->height == 28 && d->width == 28 ? "" : " by area averaging", d->channels);
    return 1;
}

static void free_data(data_set *d)
{
    fn_free_split(&d->train);
    fn_free_split(&d->test);
    free(d->train_idx);
    free(d->test_idx);
    free(d->pool_x);
    free(d->pool_y);
}

/* ---- running the model ---- */

/* The model and what fine-tuning it holds (NULL until made). */
typedef struct {
    teeny_ctx *ctx;
    teeny_onnx_model *m;
    teeny_plan *train, *eval;
    teeny_node in, labels, logits, loss;
    int in_ndim;
    int64_t in_shape[5];
    int64_t batch, classes;
    teeny_optimizer *opt;
    teeny_tensor **params, **grads; /* the trainable ones */
    float lr;
    int fashion;                    /* Fashion-MNIST, not the synthetic task */
    float *x, *logit_buf;
    int32_t *y;
    int64_t *order;                 /* the training images' shuffled order */
} runner;

/* A failed call: what the program was doing, then the library's message. */
#define TRY(what, call)                                                                                \
    do {                                                                                               \
        teeny_status st_ = (call);                                                                     \
        if (st_ != TEENY_OK) {                                                                         \
            fprintf(stderr, "error: %s: %s (%s)\n", what, teeny_last_error(ctx), teeny_status_name(st_)); \
            return 0;                                                                                  \
        }                                                                                              \
    } while (0)

/* Top-1 accuracy over the selected test images through the inference
 * plan; a last partial batch is padded (its padding not counted). */
static teeny_status evaluate(runner *r, const data_set *d, double *accuracy)
{
    teeny_status st = TEENY_OK;
    teeny_tensor *tx, *ty;
    int64_t correct = 0;
    if ((st = teeny_plan_tensor(r->eval, r->in, &tx)) != TEENY_OK ||
        (st = teeny_plan_tensor(r->eval, r->labels, &ty)) != TEENY_OK)
        return st;
    for (int64_t start = 0; start < d->n_test && st == TEENY_OK; start += r->batch) {
        int64_t b = d->n_test - start < r->batch ? d->n_test - start : r->batch;
        memset(r->x, 0, (size_t)(r->batch * d->sample) * sizeof *r->x);
        memset(r->y, 0, (size_t)r->batch * sizeof *r->y);
        for (int64_t i = 0; i < b; i++) {
            model_image(d, &d->test, d->test_idx[start + i], r->x + i * d->sample);
            r->y[i] = teeny_idx_data(d->test.labels)[d->test_idx[start + i]];
        }
        if ((st = teeny_tensor_write(tx, r->x, (size_t)(r->batch * d->sample))) != TEENY_OK ||
            (st = teeny_tensor_write_i32(ty, r->y, (size_t)r->batch)) != TEENY_OK ||
            (st = teeny_plan_forward(r->eval)) != TEENY_OK ||
            (st = teeny_plan_read(r->eval, r->logits, r->logit_buf, (size_t)(r->batch * r->classes))) != TEENY_OK)
            break;
        for (int64_t i = 0; i < b; i++) {
            const float *l = r->logit_buf + i * r->classes;
            int64_t best = 0;
            for (int64_t k = 1; k < r->classes; k++)
                best = l[k] > l[best] ? k : best;
            correct += best == r->y[i];
        }
    }
    *accuracy = d->n_test ? (double)correct / (double)d->n_test : 0;
    return st;
}

/* Training batch s into r->x, r->y: the shuffled training images (a fresh
 * permutation at the start of each pass over them), or the synthetic
 * pool's batch s mod POOL. */
static void training_batch(runner *r, const data_set *d, int64_t s, int64_t *order, uint64_t *rng)
{
    if (!d->train_idx) {
        int64_t b = s % POOL;
        memcpy(r->x, d->pool_x + b * r->batch * d->sample, (size_t)(r->batch * d->sample) * sizeof *r->x);
        memcpy(r->y, d->pool_y + b * r->batch, (size_t)r->batch * sizeof *r->y);
        return;
    }
    int64_t per_pass = d->n_train / r->batch, at = s % per_pass;
    if (at == 0) {
        for (int64_t i = 0; i < d->n_train; i++)
            order[i] = d->train_idx[i];
        for (int64_t i = d->n_train - 1; i > 0; i--) { /* Fisher-Yates */
            int64_t j = (int64_t)(ex_rng_next(rng) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    }
    for (int64_t i = 0; i < r->batch; i++) {
        int64_t idx = order[at * r->batch + i];
        model_image(d, &d->train, idx, r->x + i * d->sample);
        r->y[i] = teeny_idx_data(d->train.labels)[idx];
    }
}

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

/* The first dimension the model's first declared input fixes (not
 * symbolic), or 0 (teeny_onnx_inspect_io's report). */
static void fixed_batch(const teeny_onnx_io_report *r, void *user)
{
    int64_t *first = user;
    if (!r->is_output && r->index == 0 && r->ndim > 0 && r->dims[0] > 0)
        *first = r->dims[0];
}

/* Import the model at --batch; when it fails because the export fixed
 * another batch, say how to export it so it can be fine-tuned. */
static teeny_status load_model(teeny_ctx *ctx, const options *o, teeny_onnx_model **m)
{
    teeny_onnx_params op = TEENY_ONNX_PARAMS_INIT;
    int64_t first = 0;
    op.batch = o->batch;
    teeny_status st = teeny_onnx_load(ctx, o->model, &op, m);
    if (st == TEENY_OK)
        return st;
    fprintf(stderr, "error: cannot import %s at batch %" PRId64 ": %s (%s)\n", o->model, o->batch,
            teeny_last_error(ctx), teeny_status_name(st));
    if (st == TEENY_ERR_SHAPE && teeny_onnx_inspect_io(ctx, o->model, fixed_batch, &first) == TEENY_OK && first &&
        first != o->batch) {
        if (first == 1)
            fprintf(stderr, "hint: the model was exported for a batch of 1, and training needs batches of 2 or more.\n"
                            "      Export it with a dynamic batch: torch.onnx.export(model, x, \"model.onnx\",\n"
                            "      input_names=[\"x\"], dynamic_axes={\"x\": {0: \"batch\"}}) (or dynamo=True with\n"
                            "      dynamic_shapes), then fine-tune it with any --batch.\n");
        else
            fprintf(stderr, "hint: the model was exported for a batch of %" PRId64 ": run with --batch %" PRId64
                            ", or export it with a dynamic batch (torch.onnx.export's dynamic_axes).\n", first, first);
    }
    return st;
}

/* Freeze the parameters whose names start with prefix; *frozen counts
 * them. A prefix that matches nothing is an error (a typo would
 * otherwise train everything), listing the parameters' names. */
static teeny_status freeze_prefix(teeny_ctx *ctx, teeny_onnx_model *m, const char *prefix, int *frozen)
{
    teeny_graph *g = teeny_onnx_graph(m);
    int n = teeny_graph_param_count(g);
    teeny_status st = TEENY_OK;
    *frozen = 0;
    for (int i = 0; prefix && i < n && st == TEENY_OK; i++) {
        const char *name;
        char copy[512];
        if ((st = teeny_graph_param(g, i, &name, NULL, NULL)) != TEENY_OK)
            break;
        if (strncmp(name, prefix, strlen(prefix)) || snprintf(copy, sizeof copy, "%s", name) >= (int)sizeof copy)
            continue;
        if ((st = teeny_onnx_set_trainable(m, copy, 0)) == TEENY_OK) /* names last until the next call */
            ++*frozen;
    }
    if (st != TEENY_OK) {
        fprintf(stderr, "error: freezing the parameters: %s (%s)\n", teeny_last_error(ctx), teeny_status_name(st));
        return st;
    }
    if (prefix && !*frozen) {
        fprintf(stderr, "error: --freeze-prefix \"%s\": no parameter's name starts with it; the model's %d "
                        "parameters:", prefix, n);
        for (int i = 0; i < n; i++) {
            const char *name;
            if (teeny_graph_param(g, i, &name, NULL, NULL) == TEENY_OK)
                fprintf(stderr, "%s %s", i ? "," : "", name);
        }
        fprintf(stderr, "\n");
        return TEENY_ERR_ARG;
    }
    return TEENY_OK;
}

/* The steps below return 1 when done, or 0 after saying what failed. */

/* The loss on the model: its input (--input), its first output as logits
 * [B, K] (flattened when it has more dimensions), int32 labels and a
 * softmax cross-entropy. */
static int add_loss(const options *o, runner *r)
{
    teeny_ctx *ctx = r->ctx;
    teeny_graph *g = teeny_onnx_graph(r->m);
    teeny_node out;
    int out_ndim;
    int64_t out_shape[TEENY_ONNX_MAX_DIMS];
    if (!pick_input(r->m, o->input, &r->in, &r->in_ndim, r->in_shape))
        return 0;
    if (teeny_onnx_output_count(r->m) < 1) {
        fprintf(stderr, "error: the model has no outputs\n");
        return 0;
    }
    TRY("reading the model's first output", teeny_onnx_output(r->m, 0, NULL, &out, &out_ndim, out_shape));
    r->classes = 1;
    for (int k = 1; k < out_ndim; k++)
        r->classes *= out_shape[k];
    if (out < 0 || out_ndim < 2 || out_shape[0] != o->batch || r->classes < 2) {
        fprintf(stderr, "error: the model's first output is not [B, K, ...] with K >= 2 at batch %" PRId64 "\n",
                o->batch);
        return 0;
    }
    r->logits = out;
    if (out_ndim > 2)
        TRY("flattening the output to [B, K]", teeny_graph_flatten(g, "finetune.flatten", out, &r->logits));
    TRY("adding the loss", teeny_graph_mark_output(g, r->logits));
    TRY("adding the loss", teeny_graph_labels(g, "finetune.labels", &r->labels));
    TRY("adding the loss", teeny_graph_softmax_cross_entropy(g, "finetune.loss", r->logits, r->labels, &r->loss));
    return 1;
}

/* --freeze-prefix, then the training plan (batch norm with batch
 * statistics, a gradient for every trainable initializer) and AdamW over
 * the parameters that have a gradient. */
static int make_training(const options *o, runner *r)
{
    teeny_ctx *ctx = r->ctx;
    teeny_graph *g = teeny_onnx_graph(r->m);
    int n_params = teeny_graph_param_count(g), frozen = 0;
    if (freeze_prefix(ctx, r->m, o->freeze, &frozen) != TEENY_OK)
        return 0;
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = teeny_onnx_batch(r->m);
    pp.training = 1;
    pp.loss = r->loss;
    TRY("compiling the training plan", teeny_graph_compile(g, &pp, &r->train));

    r->params = calloc((size_t)n_params + 1, sizeof *r->params);
    r->grads = calloc((size_t)n_params + 1, sizeof *r->grads);
    if (!r->params || !r->grads) {
        fprintf(stderr, "error: out of memory\n");
        return 0;
    }
    int n_train = 0;
    for (int i = 0; i < n_params; i++) {
        TRY("listing the parameters", teeny_graph_param(g, i, NULL, &r->params[n_train], &r->grads[n_train]));
        n_train += r->grads[n_train] != NULL; /* frozen: no gradient */
    }
    printf("model %s: %d parameters, %d frozen (prefix \"%s\"), %" PRId64 " classes, batch %" PRId64 ", device %s\n",
           o->model, n_params, frozen, o->freeze ? o->freeze : "", r->classes, o->batch, teeny_ctx_device_name(ctx));
    if (n_train == 0) {
        fprintf(stderr, "error: every parameter is frozen; nothing to fine-tune\n");
        return 0;
    }
    teeny_optim_params opp = TEENY_OPTIM_PARAMS_INIT;
    opp.kind = TEENY_OPTIM_ADAMW;
    opp.lr = (float)o->lr;
    opp.weight_decay = 1e-4f;
    r->lr = opp.lr;
    TRY("creating the optimizer",
        teeny_optimizer_create(ctx, &opp, n_train, r->params, (const teeny_tensor *const *)r->grads, &r->opt));
    return 1;
}

/* The samples (Fashion-MNIST shaped to the model's input, or the
 * synthetic task) and the host buffers of a batch. */
static int load_data(const options *o, runner *r, data_set *d)
{
    d->sample = 1;
    for (int k = 1; k < r->in_ndim; k++)
        d->sample *= r->in_shape[k];
    d->channels = r->in_shape[1];
    d->height = r->in_ndim == 4 ? r->in_shape[2] : 1;
    d->width = r->in_ndim == 4 ? r->in_shape[3] : 1;
    r->fashion = finetune_want_fashion(o);
    if (r->fashion ? !load_fashion(o, r->in_ndim, r->classes, d) : !make_synthetic(o->seed, o->batch, r->classes, d))
        return 0;
    r->x = malloc((size_t)(o->batch * d->sample) * sizeof *r->x);
    r->y = malloc((size_t)o->batch * sizeof *r->y);
    r->logit_buf = malloc((size_t)(o->batch * r->classes) * sizeof *r->logit_buf);
    r->order = malloc((size_t)(d->n_train + 1) * sizeof *r->order);
    if (!r->x || !r->y || !r->logit_buf || !r->order) {
        fprintf(stderr, "error: out of memory\n");
        return 0;
    }
    return 1;
}

/* Fashion-MNIST: the inference plan at the same batch, and the test
 * accuracy before any step. */
static int accuracy_before(runner *r, const data_set *d)
{
    teeny_ctx *ctx = r->ctx;
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    double acc = 0;
    pp.batch = teeny_onnx_batch(r->m);
    pp.training = 0;
    pp.loss = r->logits;
    TRY("compiling the inference plan", teeny_graph_compile(teeny_onnx_graph(r->m), &pp, &r->eval));
    TRY("evaluating", evaluate(r, d, &acc));
    printf("test_accuracy_before %.4f (%" PRId64 " images)\n", acc, d->n_test);
    return 1;
}

/* steps AdamW steps, printing the loss about ten times; *first and *last
 * the first and the last step's loss. */
static int train(const options *o, runner *r, const data_set *d, int64_t steps, float *first, float *last)
{
    teeny_ctx *ctx = r->ctx;
    teeny_tensor *tx, *ty;
    TRY("finding the input", teeny_plan_tensor(r->train, r->in, &tx));
    TRY("finding the labels", teeny_plan_tensor(r->train, r->labels, &ty));
    int64_t every = steps > 10 ? steps / 10 : 1;
    uint64_t rng = o->seed;
    double t0 = fn_now();
    for (int64_t s = 0; s < steps; s++) {
        training_batch(r, d, s, r->order, &rng);
        TRY("writing a batch", teeny_tensor_write(tx, r->x, (size_t)(o->batch * d->sample)));
        TRY("writing a batch", teeny_tensor_write_i32(ty, r->y, (size_t)o->batch));
        TRY("the forward pass", teeny_plan_forward(r->train));
        TRY("the backward pass", teeny_plan_backward(r->train));
        TRY("the optimizer step", teeny_optimizer_step(r->opt, r->lr, -1.0f));
        TRY("reading the loss", teeny_plan_read_loss(r->train, last)); /* host sync: the model is small */
        if (s == 0)
            *first = *last;
        if (!isfinite(*last)) {
            fprintf(stderr, "error: step %" PRId64 ": the loss is %g\n", s + 1, *last);
            return 0;
        }
        if (s == 0 || (s + 1) % every == 0 || s + 1 == steps)
            printf("step %" PRId64 "/%" PRId64 " loss %.4f\n", s + 1, steps, *last);
    }
    printf("first_loss %.4f final_loss %.4f (%" PRId64 " steps of %" PRId64 ", %.1f s)\n", *first, *last, steps,
           o->batch, fn_now() - t0);
    return 1;
}

/* After the steps: the test accuracy (Fashion-MNIST) and --out's checkpoint. */
static int finish_training(const options *o, runner *r, const data_set *d, int64_t steps)
{
    teeny_ctx *ctx = r->ctx;
    if (r->fashion) {
        double acc = 0;
        TRY("evaluating", evaluate(r, d, &acc));
        printf("test_accuracy_after %.4f (%" PRId64 " images)\n", acc, d->n_test);
    }
    if (o->out) {
        const char *keys[] = {"model", "steps"};
        char steps_text[32];
        snprintf(steps_text, sizeof steps_text, "%" PRId64, steps);
        const char *vals[] = {o->model, steps_text};
        TRY("saving the checkpoint", teeny_graph_save(teeny_onnx_graph(r->m), r->opt, o->out, 2, keys, vals));
        printf("saved %s\n", o->out);
    }
    return 1;
}

int main(int argc, char **argv)
{
    options o;
    int rc = finetune_parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines in order with stderr's when both go to one file */
    if (o.out && !finetune_out_file_usable(o.out))
        return 1;

    int exit_code = 1;
    runner r = {0};
    data_set d = {0};
    if (teeny_ctx_create(o.device, &r.ctx) != TEENY_OK) {
        fprintf(stderr, "error: no device: %s\n", teeny_last_error(NULL));
        return 1;
    }
    fn_ctx_for_errors = r.ctx;
    r.batch = o.batch;
    if (load_model(r.ctx, &o, &r.m) == TEENY_OK && add_loss(&o, &r) && make_training(&o, &r) &&
        load_data(&o, &r, &d)) {
        int64_t per_epoch = r.fashion ? d.n_train / o.batch : POOL;
        int64_t steps = o.epochs ? o.epochs * per_epoch : o.steps;
        float first = 0, last = 0;
        if ((!r.fashion || accuracy_before(&r, &d)) && train(&o, &r, &d, steps, &first, &last) &&
            finish_training(&o, &r, &d, steps)) {
            exit_code = last < first ? 0 : 1;
            if (exit_code)
                fprintf(stderr, "error: the final loss is not below the first\n");
        }
    }
    teeny_optimizer_destroy(r.opt);
    teeny_plan_destroy(r.train);
    teeny_plan_destroy(r.eval);
    teeny_onnx_destroy(r.m);
    free(r.params);
    free(r.grads);
    free(r.order);
    free(r.x);
    free(r.y);
    free(r.logit_buf);
    free_data(&d);
    teeny_ctx_destroy(r.ctx);
    return exit_code;
}
