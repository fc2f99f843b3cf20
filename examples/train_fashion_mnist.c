/*
 * train_fashion_mnist -- train a small conv net with a C2PSA attention
 * block on Fashion-MNIST with teenycl, on whatever device there is.
 *
 * Recipe (PyTorch's defaults where not stated, so the two compare):
 * batch 128 (last partial training batch dropped), AdamW (beta2 0.999, eps
 * 1e-8, weight decay 5e-4 on every parameter) with OneCycleLR (max lr
 * 4e-3, pct_start 0.3, div_factor 25, final_div_factor 1e4, cosine, beta1
 * cycled 0.95 -> 0.85 -> 0.95), batch-norm eps 1e-5 / momentum 0.1,
 * softmax cross-entropy, inputs normalized with mean 0.2860 / std 0.3530,
 * random horizontal flips, shuffled batches from a seeded generator.
 *
 * Per epoch: a progress bar on stderr when it is a terminal, one summary
 * line on stdout (line-buffered, so a log of both stays in order)
 *   epoch 3/15 train_loss 0.3012 test_acc 0.8871 epoch_s 41.2 images_per_s 1456
 * a checkpoint (safetensors; --resume continues bit-identically) and an SVG
 * plot of training loss and test accuracy, both in --out. With
 * TEENY_PROFILE=1, the second training step is profiled kernel by kernel
 * (launches, device time; on stderr).
 *
 * Usage: train_fashion_mnist [--epochs N] [--device SPEC] [--seed S] [--batch B]
 *            [--out DIR] [--data DIR] [--resume CHECKPOINT] [--eval CHECKPOINT]
 *            [--train-limit N] [--test-limit N] [--dist [--shards S]]
 *
 * Several devices (built with `make WITH_MPI=1`, include/teenycl_dist.h):
 *   mpirun -np N build/train_fashion_mnist --dist [--shards S]
 * trains data-parallel, one rank per device (--device / TEENY_DEVICE may
 * hold "{local_rank}"). The global batch B is cut into S equal shards (S
 * defaults to N; N must divide S and S must divide B); each rank runs its
 * S/N shards through a plan for B/S samples, the gradients are averaged
 * over all S shards in shard order, and every rank takes the same step. For
 * a fixed S the weights are bit-identical for any N dividing S (on devices
 * configured alike: same device, driver and reported limits). Every rank draws the same data order and flips from the
 * seed and takes its own shards of each batch. Rank 0 prints the progress
 * (its own shards' loss), the epoch line (the job's mean loss and images/s
 * of the whole job), evaluates and writes the checkpoints; --resume works
 * with any N (each batch norm's running statistics are rank 0's). The
 * ranks compare their options (--seed, --batch, --shards, --epochs, the
 * limits, --resume, --eval) at start-up and their training data and run
 * state after loading (teeny_dist_check_same): ranks started differently
 * all stop with an error naming what differs, instead of training out of
 * step.
 *
 * Reading order: main(), at the end, runs the steps above it top-down
 * (the device, the data, the network and its plans, the optimizer, the
 * epochs: train_epoch -> train_step, then end_epoch). The network and the
 * data set are fashion_net.h's, the command line train_options.h's, the
 * progress bar, the chart and the --out directory train_report.h's.
 */
#include <inttypes.h>
#include <unistd.h>

#include "fashion_net.h"
#include "options.h"
#include "train_options.h"
#include "train_report.h"
#ifdef TEENY_WITH_MPI
#include "teenycl_dist.h"
#endif

#ifdef TEENY_WITH_MPI
/* A failed collective of run r: the dist's own message (every rank
 * returns one instead of waiting; see teenycl_dist.h). */
#define DIST_TRY(r, call)                                                                         \
    do {                                                                                          \
        teeny_status d_st_ = (call);                                                              \
        if (d_st_ != TEENY_OK) {                                                                  \
            fprintf(stderr, "error: rank %d: %s: %s\n  (%s)\n", (r)->rank,                     \
                    teeny_status_name(d_st_), teeny_dist_last_error((r)->dist), #call);           \
            return d_st_;                                                                         \
        }                                                                                         \
    } while (0)

/* What the ranks derived from the options and their own files: the same
 * training images and labels, epochs (a CPU rank defaults to fewer), and
 * a resumed run's epoch and generator state. */
static teeny_status dist_check_state(teeny_dist *dist, const fn_split *train, const fn_split *test, int epochs,
                                     int first_epoch, uint64_t rng)
{
    uint64_t state[5] = {(uint64_t)train->n, (uint64_t)test->n, (uint64_t)epochs, (uint64_t)first_epoch, rng};
    teeny_status st = teeny_dist_check_same(dist, state, sizeof state,
                                            "the run (images, epochs, resumed epoch and generator)");
    if (st == TEENY_OK)
        st = teeny_dist_check_same(dist, teeny_idx_data(train->labels), (size_t)train->n, "the training labels");
    if (st == TEENY_OK)
        st = teeny_dist_check_same(dist, teeny_idx_data(train->images), (size_t)train->n * 784,
                                   "the training images");
    return st;
}
#endif

/* Everything one run holds, from the device to the optimizer. One process
 * is rank 0 of 1 with one shard per batch; under --dist each rank holds
 * local_shards shards of shard_batch samples of every global batch. */
typedef struct {
    int rank, ranks, lead; /* lead: rank 0, which reports, evaluates and saves */
    int64_t local_shards, shard_batch;
    teeny_ctx *ctx;
    teeny_device_info info;
    fn_split train, test;
    int64_t steps_per_epoch;
    fn_net net;
    teeny_plan *plan;                 /* training, at shard_batch */
    teeny_plan *eval_full, *eval_tail; /* evaluation, at --batch and at the test set's remainder */
    teeny_tensor *tx, *ty;            /* the training plan's images and labels */
    int n_params;
    teeny_tensor **params, **grads;
    teeny_lr_schedule sched;
    teeny_optimizer *opt;
    double hist_loss[MAX_EPOCHS], hist_acc[MAX_EPOCHS];
    int first_epoch;
    uint64_t rng; /* the data order and the flips */
    int64_t *order;
    float *x;
    int32_t *y;
    int tty, profile_env;
    fn_eval_result last;
#ifdef TEENY_WITH_MPI
    teeny_dist *dist;
    teeny_dist_grads *dg;
#endif
} run;

/* One epoch's clock and running loss: a shard's loss is read while the
 * next shard runs, so the host never waits for the device in between. */
typedef struct {
    double t0, last_bar, loss_sum, shown_loss, loss, train_s;
    int64_t losses;
    int pending;
} epoch_state;

/* The steps below return 0, or the status main exits with. */

#ifdef TEENY_WITH_MPI
/* --dist: join the job, check that every rank was started alike and that
 * rank 0 can write --out, and cut the batch into shards. */
static int join_ranks(int *argc, char ***argv, const options *o, run *r)
{
    MPI_Init(argc, argv);
    if (teeny_dist_create(MPI_COMM_WORLD, NULL, &r->dist) != TEENY_OK) {
        fprintf(stderr, "error: %s\n", teeny_dist_last_error(NULL));
        return 1;
    }
    r->rank = teeny_dist_rank(r->dist);
    r->ranks = teeny_dist_size(r->dist);
    r->lead = r->rank == 0;
    if (train_check_options(r->dist, o) != TEENY_OK) {
        fprintf(stderr, "error: rank %d: the ranks were started with different options: %s\n", r->rank,
                teeny_dist_last_error(r->dist));
        teeny_dist_destroy(r->dist);
        MPI_Finalize();
        return 2;
    }
    /* rank 0 writes the checkpoints: every rank stops if it cannot */
    double out_bad = r->lead && !o->eval && !train_out_dir_usable(o->out), any_bad = 1;
    if (teeny_dist_sum_f64(r->dist, &out_bad, &any_bad, 1) != TEENY_OK || any_bad > 0) {
        if (!r->lead)
            fprintf(stderr, "error: rank %d: stopping: rank 0 cannot use --out %s%s%s\n", r->rank, o->out,
                    *teeny_dist_last_error(r->dist) ? ": " : "", teeny_dist_last_error(r->dist));
        teeny_dist_destroy(r->dist);
        MPI_Finalize();
        return 1;
    }
    int64_t shards = o->shards ? o->shards : r->ranks;
    if (shards % r->ranks || o->batch % shards) {
        if (r->lead)
            fprintf(stderr, "error: --shards %" PRId64 " must be a multiple of the %d ranks and divide --batch %" PRId64
                    "\n", shards, r->ranks, o->batch);
        teeny_dist_destroy(r->dist);
        MPI_Finalize();
        return 2;
    }
    r->local_shards = shards / r->ranks;
    r->shard_batch = o->batch / shards;
    return 0;
}
#endif

/* The device: a context (under --dist this rank's, through the dist),
 * and on a CPU fewer epochs by default. */
static int open_device(options *o, run *r)
{
    teeny_device_info info = TEENY_DEVICE_INFO_INIT;
    teeny_status st;
#ifdef TEENY_WITH_MPI
    if (r->dist)
        st = teeny_dist_ctx_create(r->dist, o->device, &r->ctx);
    else
#endif
        st = teeny_ctx_create(o->device, &r->ctx);
    if (st != TEENY_OK) {
        fprintf(stderr, "error: rank %d: %s\n", r->rank, teeny_last_error(NULL));
        return 1;
    }
    fn_ctx_for_errors = r->ctx;
    teeny_ctx_device_info(r->ctx, &info);
    r->info = info;
    if (o->dist)
        printf("rank %d of %d: %s, %" PRId64 " shard(s) of %" PRId64 " per batch of %" PRId64 "\n", r->rank,
               r->ranks, info.device_name, r->local_shards, r->shard_batch, o->batch);
    if (!o->epochs_given && info.is_cpu && !o->eval && !o->resume) {
        o->epochs = CPU_DEFAULT_EPOCHS;
        if (r->lead)
            printf("note: %s is a CPU; training %d epoch(s) by default so this finishes in minutes "
               "(--epochs 15 or `make run EPOCHS=15` runs the full recipe)\n",
               info.device_name, o->epochs);
    }
    return 0;
}

/* Fashion-MNIST's training and test images (--train-limit and
 * --test-limit keep the first ones). */
static int load_data(const options *o, run *r)
{
    if (fn_load_split(o->data, "train", &r->train) || fn_load_split(o->data, "t10k", &r->test))
        return 1;
    if (o->train_limit && o->train_limit < r->train.n)
        r->train.n = o->train_limit;
    if (o->test_limit && o->test_limit < r->test.n)
        r->test.n = o->test_limit;
    r->steps_per_epoch = r->train.n / o->batch;
    if (r->steps_per_epoch < 1) {
        fprintf(stderr, "error: %" PRId64 " training images make no batch of %" PRId64 "\n", r->train.n, o->batch);
        return 1;
    }
    return 0;
}

/* The network (fashion_net.h) and its plans: compiling fixes the batch,
 * infers every shape, derives the backward pass and plans the memory. */
static int build_net(const options *o, run *r)
{
    if (fn_build(r->ctx, o->seed, &r->net) != TEENY_OK)
        return 1;
    if (r->lead)
        printf("teenycl %s on %s: %" PRId64 " parameters, %" PRId64 " training images (%" PRId64
           " steps of %" PRId64 " per epoch), %" PRId64 " test images\n",
           teeny_version_string(), r->info.device_name, fn_param_count(&r->net), r->train.n, r->steps_per_epoch,
           o->batch, r->test.n);

    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = r->shard_batch;
    pp.training = 1;
    pp.loss = r->net.loss;
    double t_compile = fn_now();
    FN_TRY(teeny_graph_compile(r->net.g, &pp, &r->plan));
    pp.training = 0;
    pp.batch = o->batch;
    FN_TRY(teeny_graph_compile(r->net.g, &pp, &r->eval_full));
    if (r->test.n % o->batch) {
        pp.batch = r->test.n % o->batch;
        FN_TRY(teeny_graph_compile(r->net.g, &pp, &r->eval_tail));
    }
    size_t peak, no_reuse, alloc;
    FN_TRY(teeny_plan_memory(r->plan, &peak, &no_reuse, &alloc));
    if (r->lead)
        printf("compiled in %.1f s; training plan memory %.1f MiB planned peak (%.1f MiB without reuse, %.0f%%)\n",
           fn_now() - t_compile, peak / 1048576.0, no_reuse / 1048576.0, 100.0 * peak / (double)no_reuse);
    return 0;
}

/* AdamW over every parameter, its learning rate and beta1 from OneCycleLR
 * (the recipe in the banner); under --dist the gradient exchange. */
static int make_optimizer(run *r)
{
    r->n_params = teeny_graph_param_count(r->net.g);
    r->params = malloc((size_t)r->n_params * sizeof *r->params);
    r->grads = malloc((size_t)r->n_params * sizeof *r->grads);
    if (!r->params || !r->grads)
        return 1;
    for (int i = 0; i < r->n_params; i++)
        FN_TRY(teeny_graph_param(r->net.g, i, NULL, &r->params[i], &r->grads[i]));
    r->sched = (teeny_lr_schedule)TEENY_LR_SCHEDULE_INIT; /* OneCycleLR defaults: pct 0.3, div 25, final 1e4 */
    r->sched.kind = TEENY_LR_ONE_CYCLE;
    r->sched.max_lr = 4e-3;
    r->sched.base_momentum = 0.85;
    r->sched.max_momentum = 0.95;
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    op.kind = TEENY_OPTIM_ADAMW;
    op.lr = (float)(r->sched.max_lr / r->sched.div_factor);
    op.beta1 = 0.95f;
    op.beta2 = 0.999f;
    op.eps = 1e-8f;
    op.weight_decay = 5e-4f;
    FN_TRY(teeny_optimizer_create(r->ctx, &op, r->n_params, r->params, (const teeny_tensor *const *)r->grads,
                                  &r->opt));
#ifdef TEENY_WITH_MPI
    if (r->dist)
        DIST_TRY(r, teeny_dist_grads_create(r->dist, r->ctx, r->n_params, r->grads, (int)r->local_shards, &r->dg));
#endif
    return 0;
}

/* --eval: the checkpoint's weights. --resume: the weights, the optimizer's
 * state, and from the metadata the epoch, the generator and the history,
 * so that the run goes on bit for bit. */
static int restore(options *o, run *r)
{
    const char *ck = o->resume ? o->resume : o->eval;
    char meta[65536];
    if (!ck)
        return 0;
    FN_TRY(teeny_graph_load(r->net.g, o->eval ? NULL : r->opt, ck));
    if (!o->resume)
        return 0;
    FN_TRY(teeny_checkpoint_metadata(ck, "epoch", meta, sizeof meta));
    r->first_epoch = atoi(meta);
    FN_TRY(teeny_checkpoint_metadata(ck, "rng", meta, sizeof meta));
    r->rng = strtoull(meta, NULL, 16);
    FN_TRY(teeny_checkpoint_metadata(ck, "total_epochs", meta, sizeof meta));
    if (!o->epochs_given)
        o->epochs = atoi(meta);
    FN_TRY(teeny_checkpoint_metadata(ck, "history", meta, sizeof meta));
    if (train_history_parse(meta, r->hist_loss, r->hist_acc, MAX_EPOCHS) != r->first_epoch) {
        fprintf(stderr, "error: %s: history does not match epoch %d\n", ck, r->first_epoch);
        return 1;
    }
    if (r->lead)
        printf("resumed from %s after epoch %d of %d\n", ck, r->first_epoch, o->epochs);
    return 0;
}

/* --eval: the test set's accuracy and confusion matrix; nothing trained. */
static int evaluate_checkpoint(const options *o, run *r)
{
    fn_eval_result res;
    FN_TRY(fn_evaluate(&r->net, r->eval_full, r->eval_tail, o->batch, &r->test, &res));
    printf("test_acc %.4f images_per_s %.0f\n", res.accuracy, res.images_per_s);
    fn_print_confusion(&res, stdout);
    return 0;
}

/* The host buffers of a batch and the training plan's input tensors. */
static int prepare_training(const options *o, run *r)
{
    r->order = malloc((size_t)r->train.n * sizeof *r->order);
    r->x = malloc((size_t)o->batch * 784 * sizeof *r->x);
    r->y = malloc((size_t)o->batch * sizeof *r->y);
    if (!r->order || !r->x || !r->y)
        return 1;
    FN_TRY(teeny_plan_tensor(r->plan, r->net.x, &r->tx));
    FN_TRY(teeny_plan_tensor(r->plan, r->net.labels, &r->ty));
    r->tty = isatty(2); /* the \r progress bar only on a terminal: in a file it is one long line */
    const char *profile_var = getenv("TEENY_PROFILE");
    r->profile_env = profile_var && *profile_var && strcmp(profile_var, "0");
    return 0;
}

/* The epoch's data order: a Fisher-Yates shuffle from the run's generator. */
static void shuffle(run *r)
{
    for (int64_t i = 0; i < r->train.n; i++)
        r->order[i] = i;
    for (int64_t i = r->train.n - 1; i > 0; i--) {
        int64_t j = (int64_t)(ex_rng_next(&r->rng) % (uint64_t)(i + 1)), t = r->order[i];
        r->order[i] = r->order[j];
        r->order[j] = t;
    }
}

/* Step s's images (flipped at random) and labels into r->x and r->y. Every
 * rank draws the whole batch's flips (the same generator stream for any
 * rank count) and keeps its own shards: batch positions
 * [rank * mine, (rank + 1) * mine). */
static void load_batch(const options *o, run *r, int64_t s)
{
    const int64_t mine = r->local_shards * r->shard_batch;
    for (int64_t b = 0; b < o->batch; b++) {
        int64_t idx = r->order[s * o->batch + b], lb = b - r->rank * mine;
        int flip = (int)(ex_rng_next(&r->rng) & 1);
        if (lb >= 0 && lb < mine) {
            fn_image(&r->train, idx, flip, r->x + lb * 784);
            r->y[lb] = teeny_idx_data(r->train.labels)[idx];
        }
    }
}

/* Read the previous shard's loss into the epoch's sum: the device is past it. */
static int take_loss(run *r, epoch_state *e)
{
    float l;
    FN_TRY(teeny_plan_loss_wait(r->plan, &l));
    e->loss_sum += l;
    e->losses++;
    e->shown_loss = e->loss_sum / (double)e->losses;
    return 0;
}

/* One training step: for each of this rank's shards forward and backward
 * (replays of the recorded plan; no host wait), the gradients averaged
 * over the job's shards, one optimizer step. With TEENY_PROFILE=1 the
 * epoch's second step is profiled (the first may still build kernels). */
static int train_step(const options *o, run *r, int epoch, int64_t s, epoch_state *e)
{
    double lr, beta1;
    int rc;
    load_batch(o, r, s);
    FN_TRY(teeny_lr_at(&r->sched, teeny_optimizer_steps(r->opt), &lr, &beta1));
    int profile = r->profile_env && epoch == r->first_epoch && s == (r->steps_per_epoch > 1 ? 1 : 0);
    if (profile)
        FN_TRY(teeny_profile_begin(r->ctx));
    for (int64_t k = 0; k < r->local_shards; k++) {
        FN_TRY(teeny_tensor_write(r->tx, r->x + k * r->shard_batch * 784, (size_t)r->shard_batch * 784));
        FN_TRY(teeny_tensor_write_i32(r->ty, r->y + k * r->shard_batch, (size_t)r->shard_batch));
        FN_TRY(teeny_plan_forward(r->plan));
        FN_TRY(teeny_plan_backward(r->plan));
#ifdef TEENY_WITH_MPI
        if (r->dg)
            DIST_TRY(r, teeny_dist_grads_add(r->dg));
#endif
        if (e->pending && (rc = take_loss(r, e)) != 0)
            return rc;
        FN_TRY(teeny_plan_loss_start(r->plan));
        e->pending = 1;
    }
#ifdef TEENY_WITH_MPI
    if (r->dg) /* the mean gradient over every shard of the job */
        DIST_TRY(r, teeny_dist_grads_allreduce(r->dg, TEENY_OK));
#endif
    FN_TRY(teeny_optimizer_step(r->opt, (float)lr, (float)beta1));
    if (profile) {
        double step_ms;
        int launches;
        FN_TRY(teeny_profile_end(r->ctx, &step_ms, &launches));
        fprintf(stderr, "profile: training step %" PRId64 " (%" PRId64 " images on this device): %d launches, "
                "%.3f ms of device time from the first kernel's start to the last one's end\n", s + 1,
                r->local_shards * r->shard_batch, launches, step_ms);
    }
    /* nothing until there is a real loss and the rate covers a meaningful
     * interval (the first step's rate is noise) */
    double now = fn_now();
    int meaningful = e->losses > 0 && (now - e->t0 >= 0.5 || s + 1 >= 5);
    if (r->tty && r->lead && meaningful && now - e->last_bar > 0.2 && s + 1 < r->steps_per_epoch) {
        train_progress(epoch + 1, o->epochs, s + 1, r->steps_per_epoch, e->shown_loss,
                       (double)((s + 1) * o->batch) / (now - e->t0), now - e->t0);
        e->last_bar = now;
    }
    return 0;
}

/* One epoch over the shuffled training set: e->loss is the job's mean
 * loss, e->train_s its time. */
static int train_epoch(const options *o, run *r, int epoch, epoch_state *e)
{
    int rc;
    memset(e, 0, sizeof *e);
    e->t0 = fn_now();
    shuffle(r);
    for (int64_t s = 0; s < r->steps_per_epoch; s++)
        if ((rc = train_step(o, r, epoch, s, e)) != 0)
            return rc;
    if (e->pending && (rc = take_loss(r, e)) != 0)
        return rc;
    FN_TRY(teeny_ctx_finish(r->ctx));
    e->train_s = fn_now() - e->t0;
    e->loss = e->loss_sum / (double)e->losses;
#ifdef TEENY_WITH_MPI
    if (r->dist) { /* the job's mean over every shard */
        double mine[2] = {e->loss_sum, (double)e->losses}, all[2];
        DIST_TRY(r, teeny_dist_sum_f64(r->dist, mine, all, 2));
        e->loss = all[0] / all[1];
    }
#endif
    if (r->lead && r->tty && e->losses > 0) /* the epoch's final bar: every loss is in */
        train_progress(epoch + 1, o->epochs, r->steps_per_epoch, r->steps_per_epoch, e->loss_sum / (double)e->losses,
                       (double)(r->steps_per_epoch * o->batch) / e->train_s, e->train_s);
    if (r->lead && r->tty)
        fprintf(stderr, "\n");
    return 0;
}

/* The checkpoint after epoch (everything --resume needs to continue
 * bit-identically) and the chart so far, both in --out. */
static int save_checkpoint(const options *o, run *r, int epoch)
{
    char path[1200], e[32], rng[32], tot[32], seed[32], batch[32], hist[65536];
    snprintf(path, sizeof path, "%s/epoch_%03d.safetensors", o->out, epoch + 1);
    snprintf(e, sizeof e, "%d", epoch + 1);
    snprintf(rng, sizeof rng, "%016" PRIx64, r->rng);
    snprintf(tot, sizeof tot, "%d", o->epochs);
    snprintf(seed, sizeof seed, "%" PRIu64, o->seed);
    snprintf(batch, sizeof batch, "%" PRId64, o->batch);
    train_history_text(hist, sizeof hist, epoch + 1, r->hist_loss, r->hist_acc);
    const char *keys[] = {"epoch", "rng", "total_epochs", "seed", "batch", "history"};
    const char *vals[] = {e, rng, tot, seed, batch, hist};
    FN_TRY(teeny_graph_save(r->net.g, r->opt, path, 6, keys, vals));
    snprintf(path, sizeof path, "%s/training.svg", o->out);
    train_write_svg(path, epoch + 1, r->hist_loss, r->hist_acc, o->epochs);
    return 0;
}

/* Rank 0 after each epoch: the test accuracy, the epoch's line, the checkpoint. */
static int end_epoch(const options *o, run *r, int epoch, const epoch_state *e)
{
    FN_TRY(fn_evaluate(&r->net, r->eval_full, r->eval_tail, o->batch, &r->test, &r->last));
    double epoch_s = fn_now() - e->t0;
    r->hist_loss[epoch] = e->loss;
    r->hist_acc[epoch] = r->last.accuracy;
    printf("epoch %d/%d train_loss %.4f test_acc %.4f epoch_s %.1f images_per_s %.0f\n", epoch + 1, o->epochs,
           r->hist_loss[epoch], r->last.accuracy, epoch_s, (double)(r->steps_per_epoch * o->batch) / e->train_s);
    fflush(stdout);
    return save_checkpoint(o, r, epoch);
}

/* Rank 0 at the end: the final accuracy and confusion matrix (a resumed
 * run that had nothing left to train is evaluated now). */
static int report_final(const options *o, run *r)
{
    if (r->first_epoch >= o->epochs)
        FN_TRY(fn_evaluate(&r->net, r->eval_full, r->eval_tail, o->batch, &r->test, &r->last));
    printf("final test_acc %.4f (%" PRId64 " test images); checkpoints and training.svg in %s\n", r->last.accuracy,
           r->test.n, o->out);
    fn_print_confusion(&r->last, stdout);
    return 0;
}

/* Free everything the run holds (NULL members are skipped) and leave the job. */
static int finish(run *r, int exit_code)
{
#ifdef TEENY_WITH_MPI
    teeny_dist_grads_destroy(r->dg);
#endif
    teeny_optimizer_destroy(r->opt);
    teeny_plan_destroy(r->plan);
    teeny_plan_destroy(r->eval_full);
    teeny_plan_destroy(r->eval_tail);
    teeny_graph_destroy(r->net.g);
    fn_free_split(&r->train);
    fn_free_split(&r->test);
    free(r->order);
    free(r->x);
    free(r->y);
    free(r->params);
    free(r->grads);
    teeny_ctx_destroy(r->ctx);
#ifdef TEENY_WITH_MPI
    if (r->dist) {
        teeny_dist_destroy(r->dist);
        MPI_Finalize();
    }
#endif
    return exit_code;
}

/* The program, step by step; a failing step has printed why, and the
 * program exits with its status. */
int main(int argc, char **argv)
{
    static run r; /* the history arrays make it large */
    options o;
    int rc = train_parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines in order with stderr's when both go to one file */
    if (!o.dist && !o.eval && !train_out_dir_usable(o.out))
        return 1;
    r.ranks = r.lead = 1;
    r.local_shards = 1;
    r.shard_batch = o.batch;
    r.rng = o.seed * 0x2545f4914f6cdd1dULL + 0x9e3779b97f4a7c15ULL;
#ifdef TEENY_WITH_MPI
    if (o.dist && (rc = join_ranks(&argc, &argv, &o, &r)) != 0)
        return rc;
#endif
    if ((rc = open_device(&o, &r)) || (rc = load_data(&o, &r)) || (rc = build_net(&o, &r)) ||
        (rc = make_optimizer(&r)) || (rc = restore(&o, &r)))
        return rc;
    r.sched.total_steps = (int64_t)o.epochs * r.steps_per_epoch;
#ifdef TEENY_WITH_MPI
    if (r.dist && dist_check_state(r.dist, &r.train, &r.test, o.epochs, r.first_epoch, r.rng) != TEENY_OK) {
        fprintf(stderr, "error: rank %d: the ranks' runs differ: %s\n", r.rank, teeny_dist_last_error(r.dist));
        return finish(&r, 1);
    }
#endif
    if (o.eval) { /* rank 0 evaluates */
        if (r.lead && (rc = evaluate_checkpoint(&o, &r)) != 0)
            return rc;
        return finish(&r, 0);
    }

    if ((rc = prepare_training(&o, &r)) != 0)
        return rc;
    for (int epoch = r.first_epoch; epoch < o.epochs; epoch++) {
        epoch_state e;
        if ((rc = train_epoch(&o, &r, epoch, &e)) != 0)
            return rc;
        if (r.lead && (rc = end_epoch(&o, &r, epoch, &e)) != 0) /* rank 0 reports, evaluates and saves */
            return rc;
    }
    if (r.lead && (rc = report_final(&o, &r)) != 0)
        return rc;
    return finish(&r, 0);
}
