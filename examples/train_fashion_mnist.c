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
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fashion_net.h"
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

static int parse(int argc, char **argv, options *o)
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

/* mkdir -p; -1 with errno set on failure. */
static int mkdir_p(const char *path)
{
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

/* --out before anything is trained: make the directory (and its parents)
 * and prove a file can be made there, so that a regular file of that
 * name, a parent that is a file or a read-only directory fails now, not
 * at the first checkpoint after a whole epoch. 1 when usable. */
static int out_dir_usable(const char *dir)
{
    struct stat sb;
    if (mkdir_p(dir) || stat(dir, &sb)) {
        fprintf(stderr, "error: --out %s: cannot create the directory: %s\n", dir, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "error: --out %s: exists and is not a directory\n", dir);
        return 0;
    }
    return ex_dir_takes_files("--out", dir, dir, "train_fashion_mnist");
}

/* The training loss and test accuracy per epoch as an SVG line chart. */
static void write_svg(const char *path, int n, const double *loss, const double *acc, int total_epochs)
{
    FILE *f = fopen(path, "w");
    const double W = 720, H = 400, L = 70, R = 70, T = 40, B = 50;
    double lmax = 0, amin = 1, amax = 0;
    if (!f)
        return;
    for (int i = 0; i < n; i++) {
        lmax = loss[i] > lmax ? loss[i] : lmax;
        amin = acc[i] < amin ? acc[i] : amin;
        amax = acc[i] > amax ? acc[i] : amax;
    }
    lmax = lmax > 0 ? lmax * 1.1 : 1;
    amin = floor(amin * 20) / 20;
    amax = amin + 0.05 > amax ? amin + 0.05 : ceil(amax * 20) / 20;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">teenycl Fashion-MNIST training</text>\n",
            W / 2);
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#888\"/>\n", L, T,
            W - L - R, H - T - B);
    for (int k = 0; k <= 4; k++) {
        double y = T + (H - T - B) * k / 4.0;
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", L, W - R, y, y);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#c0392b\">%.3f</text>\n", L - 6, y + 4,
                lmax * (1 - k / 4.0));
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" fill=\"#2471a3\">%.3f</text>\n", W - R + 6, y + 4,
                amax - (amax - amin) * k / 4.0);
    }
    int span = total_epochs > 1 ? total_epochs - 1 : 1;
    for (int e = 0; e < total_epochs; e += total_epochs > 15 ? total_epochs / 10 : 1)
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d</text>\n",
                L + (W - L - R) * e / span, H - B + 18, e + 1);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">epoch</text>\n", (L + W - R) / 2, H - 12);
    for (int s = 0; s < 2; s++) {
        const double *v = s ? acc : loss;
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", s ? "#2471a3" : "#c0392b");
        for (int i = 0; i < n; i++) {
            double x = L + (W - L - R) * i / span;
            double y = s ? T + (H - T - B) * (amax - v[i]) / (amax - amin) : T + (H - T - B) * (1 - v[i] / lmax);
            fprintf(f, "%.1f,%.1f ", x, y);
        }
        fprintf(f, "\"/>\n");
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#c0392b\">train loss</text>\n", L + 10, T + 16);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\" fill=\"#2471a3\">test accuracy</text>\n", W - R - 10,
            T + 16);
    fprintf(f, "</svg>\n");
    fclose(f);
}

static void progress(int epoch, int epochs, int64_t done, int64_t total, double loss, double ips, double elapsed)
{
    int width = 28, filled = (int)(width * done / (total ? total : 1));
    double eta = done ? elapsed * (double)(total - done) / (double)done : 0;
    fprintf(stderr, "\repoch %d/%d [", epoch, epochs);
    for (int i = 0; i < width; i++)
        fputc(i < filled ? '#' : '.', stderr);
    fprintf(stderr, "] %" PRId64 "/%" PRId64 " loss %.4f %6.0f img/s %4.0fs ETA %4.0fs ", done, total, loss, ips,
            elapsed, eta);
    fflush(stderr);
}

/* History and generator state travel in checkpoint metadata as text. */
static void history_text(char *buf, size_t cap, int n, const double *loss, const double *acc)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len + 40 < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%.17g:%.17g", i ? "," : "", loss[i], acc[i]);
}

static int history_parse(const char *s, double *loss, double *acc, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        loss[n] = strtod(s, &end);
        if (*end != ':')
            return -1;
        acc[n] = strtod(end + 1, &end);
        n++;
        if (*end == ',')
            end++;
        s = end;
    }
    return n;
}

#ifdef TEENY_WITH_MPI
/* A failed collective: the dist's own message (every rank returns one
 * instead of waiting; see teenycl_dist.h). */
#define DIST_TRY(call)                                                                            \
    do {                                                                                          \
        teeny_status d_st_ = (call);                                                              \
        if (d_st_ != TEENY_OK) {                                                                  \
            fprintf(stderr, "error: rank %d: %s: %s\n  (%s)\n", rank, teeny_status_name(d_st_),   \
                    teeny_dist_last_error(dist), #call);                                          \
            return d_st_;                                                                         \
        }                                                                                         \
    } while (0)
#endif

#ifdef TEENY_WITH_MPI
/* The options every rank must be started with (the data order, the
 * shards, the schedule and the checkpoints follow from them), compared
 * one by one across ranks: ranks started with, say, different --seed
 * would train out of step without a word. Every rank gets the same
 * answer, so all stop at the same option. --device, --out and --data may
 * differ (each rank its device; rank 0 writes; the data is compared after
 * loading). */
static teeny_status dist_check_options(teeny_dist *dist, const options *o)
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

int main(int argc, char **argv)
{
    options o;
    int exit_code = 0;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines in order with stderr's when both go to one file */
    if (!o.dist && !o.eval && !out_dir_usable(o.out))
        return 1;
    /* one process is rank 0 of 1 with one shard per batch */
    int rank = 0, ranks = 1, lead = 1;
    int64_t local_shards = 1, shard_batch = o.batch;
    teeny_status ctx_st;
    teeny_ctx *ctx = NULL;
#ifdef TEENY_WITH_MPI
    teeny_dist *dist = NULL;
    teeny_dist_grads *dg = NULL;
    if (o.dist) {
        MPI_Init(&argc, &argv);
        if (teeny_dist_create(MPI_COMM_WORLD, NULL, &dist) != TEENY_OK) {
            fprintf(stderr, "error: %s\n", teeny_dist_last_error(NULL));
            return 1;
        }
        rank = teeny_dist_rank(dist);
        ranks = teeny_dist_size(dist);
        lead = rank == 0;
        if (dist_check_options(dist, &o) != TEENY_OK) {
            fprintf(stderr, "error: rank %d: the ranks were started with different options: %s\n", rank,
                    teeny_dist_last_error(dist));
            teeny_dist_destroy(dist);
            MPI_Finalize();
            return 2;
        }
        /* rank 0 writes the checkpoints: every rank stops if it cannot */
        double out_bad = lead && !o.eval && !out_dir_usable(o.out), any_bad = 1;
        if (teeny_dist_sum_f64(dist, &out_bad, &any_bad, 1) != TEENY_OK || any_bad > 0) {
            if (!lead)
                fprintf(stderr, "error: rank %d: stopping: rank 0 cannot use --out %s%s%s\n", rank, o.out,
                        *teeny_dist_last_error(dist) ? ": " : "", teeny_dist_last_error(dist));
            teeny_dist_destroy(dist);
            MPI_Finalize();
            return 1;
        }
        int64_t shards = o.shards ? o.shards : ranks;
        if (shards % ranks || o.batch % shards) {
            if (lead)
                fprintf(stderr, "error: --shards %" PRId64 " must be a multiple of the %d ranks and divide --batch %" PRId64
                        "\n", shards, ranks, o.batch);
            teeny_dist_destroy(dist);
            MPI_Finalize();
            return 2;
        }
        local_shards = shards / ranks;
        shard_batch = o.batch / shards;
        ctx_st = teeny_dist_ctx_create(dist, o.device, &ctx);
    } else
#endif
        ctx_st = teeny_ctx_create(o.device, &ctx);
    if (ctx_st != TEENY_OK) {
        fprintf(stderr, "error: rank %d: %s\n", rank, teeny_last_error(NULL));
        return 1;
    }
    fn_ctx_for_errors = ctx;
    teeny_device_info info = TEENY_DEVICE_INFO_INIT;
    teeny_ctx_device_info(ctx, &info);
    if (o.dist)
        printf("rank %d of %d: %s, %" PRId64 " shard(s) of %" PRId64 " per batch of %" PRId64 "\n", rank, ranks,
               info.device_name, local_shards, shard_batch, o.batch);
    if (!o.epochs_given && info.is_cpu && !o.eval && !o.resume) {
        o.epochs = CPU_DEFAULT_EPOCHS;
        if (lead)
            printf("note: %s is a CPU; training %d epoch(s) by default so this finishes in minutes "
               "(--epochs 15 or `make run EPOCHS=15` runs the full recipe)\n",
               info.device_name, o.epochs);
    }

    fn_split train = {0}, test = {0};
    if (fn_load_split(o.data, "train", &train) || fn_load_split(o.data, "t10k", &test))
        return 1;
    if (o.train_limit && o.train_limit < train.n)
        train.n = o.train_limit;
    if (o.test_limit && o.test_limit < test.n)
        test.n = o.test_limit;
    int64_t steps_per_epoch = train.n / o.batch;
    if (steps_per_epoch < 1) {
        fprintf(stderr, "error: %" PRId64 " training images make no batch of %" PRId64 "\n", train.n, o.batch);
        return 1;
    }

    fn_net net = {0};
    if (fn_build(ctx, o.seed, &net) != TEENY_OK)
        return 1;
    if (lead)
        printf("teenycl %s on %s: %" PRId64 " parameters, %" PRId64 " training images (%" PRId64
           " steps of %" PRId64 " per epoch), %" PRId64 " test images\n",
           teeny_version_string(), info.device_name, fn_param_count(&net), train.n, steps_per_epoch, o.batch, test.n);

    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *plan = NULL, *eval_full = NULL, *eval_tail = NULL;
    pp.batch = shard_batch;
    pp.training = 1;
    pp.loss = net.loss;
    double t_compile = fn_now();
    FN_TRY(teeny_graph_compile(net.g, &pp, &plan));
    pp.training = 0;
    pp.batch = o.batch;
    FN_TRY(teeny_graph_compile(net.g, &pp, &eval_full));
    if (test.n % o.batch) {
        pp.batch = test.n % o.batch;
        FN_TRY(teeny_graph_compile(net.g, &pp, &eval_tail));
    }
    size_t peak, no_reuse, alloc;
    FN_TRY(teeny_plan_memory(plan, &peak, &no_reuse, &alloc));
    if (lead)
        printf("compiled in %.1f s; training plan memory %.1f MiB planned peak (%.1f MiB without reuse, %.0f%%)\n",
           fn_now() - t_compile, peak / 1048576.0, no_reuse / 1048576.0, 100.0 * peak / (double)no_reuse);

    int n_params = teeny_graph_param_count(net.g);
    teeny_tensor **params = malloc((size_t)n_params * sizeof *params), **grads = malloc((size_t)n_params * sizeof *grads);
    for (int i = 0; i < n_params; i++)
        FN_TRY(teeny_graph_param(net.g, i, NULL, &params[i], &grads[i]));
    teeny_lr_schedule sched = TEENY_LR_SCHEDULE_INIT; /* OneCycleLR defaults: pct 0.3, div 25, final 1e4 */
    sched.kind = TEENY_LR_ONE_CYCLE;
    sched.max_lr = 4e-3;
    sched.base_momentum = 0.85;
    sched.max_momentum = 0.95;
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    op.kind = TEENY_OPTIM_ADAMW;
    op.lr = (float)(sched.max_lr / sched.div_factor);
    op.beta1 = 0.95f;
    op.beta2 = 0.999f;
    op.eps = 1e-8f;
    op.weight_decay = 5e-4f;
    teeny_optimizer *opt = NULL;
    FN_TRY(teeny_optimizer_create(ctx, &op, n_params, params, (const teeny_tensor *const *)grads, &opt));
#ifdef TEENY_WITH_MPI
    if (dist)
        DIST_TRY(teeny_dist_grads_create(dist, ctx, n_params, grads, (int)local_shards, &dg));
#endif

    double hist_loss[MAX_EPOCHS], hist_acc[MAX_EPOCHS];
    int first_epoch = 0;
    uint64_t rng = o.seed * 0x2545f4914f6cdd1dULL + 0x9e3779b97f4a7c15ULL;
    if (o.resume || o.eval) {
        const char *ck = o.resume ? o.resume : o.eval;
        char meta[65536];
        FN_TRY(teeny_graph_load(net.g, o.eval ? NULL : opt, ck));
        if (o.resume) {
            FN_TRY(teeny_checkpoint_metadata(ck, "epoch", meta, sizeof meta));
            first_epoch = atoi(meta);
            FN_TRY(teeny_checkpoint_metadata(ck, "rng", meta, sizeof meta));
            rng = strtoull(meta, NULL, 16);
            FN_TRY(teeny_checkpoint_metadata(ck, "total_epochs", meta, sizeof meta));
            if (!o.epochs_given)
                o.epochs = atoi(meta);
            FN_TRY(teeny_checkpoint_metadata(ck, "history", meta, sizeof meta));
            if (history_parse(meta, hist_loss, hist_acc, MAX_EPOCHS) != first_epoch) {
                fprintf(stderr, "error: %s: history does not match epoch %d\n", ck, first_epoch);
                return 1;
            }
            if (lead)
                printf("resumed from %s after epoch %d of %d\n", ck, first_epoch, o.epochs);
        }
    }
    sched.total_steps = (int64_t)o.epochs * steps_per_epoch;

    int64_t *order = NULL;
    float *x = NULL;
    int32_t *y = NULL;
#ifdef TEENY_WITH_MPI
    if (dist && dist_check_state(dist, &train, &test, o.epochs, first_epoch, rng) != TEENY_OK) {
        fprintf(stderr, "error: rank %d: the ranks' runs differ: %s\n", rank, teeny_dist_last_error(dist));
        exit_code = 1;
        goto finish;
    }
#endif
    if (o.eval && !lead)
        goto finish; /* rank 0 evaluates */
    if (o.eval) {
        fn_eval_result r;
        FN_TRY(fn_evaluate(&net, eval_full, eval_tail, o.batch, &test, &r));
        printf("test_acc %.4f images_per_s %.0f\n", r.accuracy, r.images_per_s);
        fn_print_confusion(&r, stdout);
        goto finish;
    }

    order = malloc((size_t)train.n * sizeof *order);
    x = malloc((size_t)o.batch * 784 * sizeof *x);
    y = malloc((size_t)o.batch * sizeof *y);
    if (!order || !x || !y || !params || !grads)
        return 1;
    teeny_tensor *tx, *ty;
    FN_TRY(teeny_plan_tensor(plan, net.x, &tx));
    FN_TRY(teeny_plan_tensor(plan, net.labels, &ty));
    int tty = isatty(2); /* the \r progress bar only on a terminal: in a file it is one long line */
    const char *profile_var = getenv("TEENY_PROFILE");
    int profile_env = profile_var && *profile_var && strcmp(profile_var, "0");
    fn_eval_result last = {0};
    for (int epoch = first_epoch; epoch < o.epochs; epoch++) {
        double t0 = fn_now(), last_bar = 0, loss_sum = 0, shown_loss = 0;
        int64_t losses = 0, pending = 0;
        for (int64_t i = 0; i < train.n; i++)
            order[i] = i;
        for (int64_t i = train.n - 1; i > 0; i--) { /* Fisher-Yates */
            int64_t j = (int64_t)(ex_rng_next(&rng) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int64_t s = 0; s < steps_per_epoch; s++) {
            /* every rank draws the whole batch's flips (the same generator
             * stream for any rank count) and keeps its own shards: batch
             * positions [rank * mine, (rank + 1) * mine) */
            const int64_t mine = local_shards * shard_batch;
            for (int64_t b = 0; b < o.batch; b++) {
                int64_t idx = order[s * o.batch + b], lb = b - rank * mine;
                int flip = (int)(ex_rng_next(&rng) & 1);
                if (lb >= 0 && lb < mine) {
                    fn_image(&train, idx, flip, x + lb * 784);
                    y[lb] = teeny_idx_data(train.labels)[idx];
                }
            }
            double lr, beta1;
            FN_TRY(teeny_lr_at(&sched, teeny_optimizer_steps(opt), &lr, &beta1));
            /* TEENY_PROFILE=1: profile one step (the second: the first may
             * still build kernels); teeny_profile_end logs each kernel */
            int profile = profile_env && epoch == first_epoch && s == (steps_per_epoch > 1 ? 1 : 0);
            if (profile)
                FN_TRY(teeny_profile_begin(ctx));
            for (int64_t k = 0; k < local_shards; k++) {
                FN_TRY(teeny_tensor_write(tx, x + k * shard_batch * 784, (size_t)shard_batch * 784));
                FN_TRY(teeny_tensor_write_i32(ty, y + k * shard_batch, (size_t)shard_batch));
                FN_TRY(teeny_plan_forward(plan));
                FN_TRY(teeny_plan_backward(plan));
#ifdef TEENY_WITH_MPI
                if (dg)
                    DIST_TRY(teeny_dist_grads_add(dg));
#endif
                if (pending) { /* the previous shard's loss: the device is past it */
                    float l;
                    FN_TRY(teeny_plan_loss_wait(plan, &l));
                    loss_sum += l;
                    losses++;
                    shown_loss = loss_sum / (double)losses;
                }
                FN_TRY(teeny_plan_loss_start(plan));
                pending = 1;
            }
#ifdef TEENY_WITH_MPI
            if (dg) /* the mean gradient over every shard of the job */
                DIST_TRY(teeny_dist_grads_allreduce(dg, TEENY_OK));
#endif
            FN_TRY(teeny_optimizer_step(opt, (float)lr, (float)beta1));
            if (profile) {
                double step_ms;
                int launches;
                FN_TRY(teeny_profile_end(ctx, &step_ms, &launches));
                fprintf(stderr, "profile: training step %" PRId64 " (%" PRId64 " images on this device): %d launches, "
                        "%.3f ms of device time from the first kernel's start to the last one's end\n", s + 1,
                        local_shards * shard_batch, launches, step_ms);
            }
            /* nothing until there is a real loss and the rate covers a
             * meaningful interval (the first step's rate is noise) */
            double now = fn_now();
            int meaningful = losses > 0 && (now - t0 >= 0.5 || s + 1 >= 5);
            if (tty && lead && meaningful && now - last_bar > 0.2 && s + 1 < steps_per_epoch) {
                progress(epoch + 1, o.epochs, s + 1, steps_per_epoch, shown_loss,
                         (double)((s + 1) * o.batch) / (now - t0), now - t0);
                last_bar = now;
            }
        }
        if (pending) {
            float l;
            FN_TRY(teeny_plan_loss_wait(plan, &l));
            loss_sum += l;
            losses++;
        }
        FN_TRY(teeny_ctx_finish(ctx));
        double train_s = fn_now() - t0, epoch_loss = loss_sum / (double)losses;
#ifdef TEENY_WITH_MPI
        if (dist) { /* the job's mean over every shard */
            double mine[2] = {loss_sum, (double)losses}, all[2];
            DIST_TRY(teeny_dist_sum_f64(dist, mine, all, 2));
            epoch_loss = all[0] / all[1];
        }
#endif
        if (!lead)
            continue; /* rank 0 reports, evaluates and saves */
        if (tty && losses > 0) /* the epoch's final bar: every loss is in */
            progress(epoch + 1, o.epochs, steps_per_epoch, steps_per_epoch, loss_sum / (double)losses,
                     (double)(steps_per_epoch * o.batch) / train_s, train_s);
        if (tty)
            fprintf(stderr, "\n");
        FN_TRY(fn_evaluate(&net, eval_full, eval_tail, o.batch, &test, &last));
        double epoch_s = fn_now() - t0;
        hist_loss[epoch] = epoch_loss;
        hist_acc[epoch] = last.accuracy;
        printf("epoch %d/%d train_loss %.4f test_acc %.4f epoch_s %.1f images_per_s %.0f\n", epoch + 1, o.epochs,
               hist_loss[epoch], last.accuracy, epoch_s, (double)(steps_per_epoch * o.batch) / train_s);
        fflush(stdout);

        /* checkpoint: everything --resume needs to continue bit-identically */
        char path[1200], e[32], r[32], tot[32], seed[32], batch[32], hist[65536];
        snprintf(path, sizeof path, "%s/epoch_%03d.safetensors", o.out, epoch + 1);
        snprintf(e, sizeof e, "%d", epoch + 1);
        snprintf(r, sizeof r, "%016" PRIx64, rng);
        snprintf(tot, sizeof tot, "%d", o.epochs);
        snprintf(seed, sizeof seed, "%" PRIu64, o.seed);
        snprintf(batch, sizeof batch, "%" PRId64, o.batch);
        history_text(hist, sizeof hist, epoch + 1, hist_loss, hist_acc);
        const char *keys[] = {"epoch", "rng", "total_epochs", "seed", "batch", "history"};
        const char *vals[] = {e, r, tot, seed, batch, hist};
        FN_TRY(teeny_graph_save(net.g, opt, path, 6, keys, vals));
        snprintf(path, sizeof path, "%s/training.svg", o.out);
        write_svg(path, epoch + 1, hist_loss, hist_acc, o.epochs);
    }
    if (lead && first_epoch >= o.epochs)
        FN_TRY(fn_evaluate(&net, eval_full, eval_tail, o.batch, &test, &last));
    if (lead) {
        printf("final test_acc %.4f (%" PRId64 " test images); checkpoints and training.svg in %s\n", last.accuracy,
               test.n, o.out);
        fn_print_confusion(&last, stdout);
    }
finish:
#ifdef TEENY_WITH_MPI
    teeny_dist_grads_destroy(dg);
#endif

    teeny_optimizer_destroy(opt);
    teeny_plan_destroy(plan);
    teeny_plan_destroy(eval_full);
    teeny_plan_destroy(eval_tail);
    teeny_graph_destroy(net.g);
    fn_free_split(&train);
    fn_free_split(&test);
    free(order);
    free(x);
    free(y);
    free(params);
    free(grads);
    teeny_ctx_destroy(ctx);
#ifdef TEENY_WITH_MPI
    if (dist) {
        teeny_dist_destroy(dist);
        MPI_Finalize();
    }
#endif
    return exit_code;
}
