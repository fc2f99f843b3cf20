/*
 * eval_fashion_mnist -- load a checkpoint written by train_fashion_mnist and
 * report test accuracy, per-class accuracy (the confusion matrix) and
 * inference throughput on the chosen device.
 *
 * Usage: eval_fashion_mnist CHECKPOINT [--device SPEC] [--data DIR] [--batch B]
 */
#include "fashion_net.h"
#include "options.h"

enum { O_DEVICE, O_DATA, O_BATCH, O_COUNT };

static const cli_opt OPTS[] = {
    [O_DEVICE] = {"--device", "SPEC", "the OpenCL device: cpu, gpu, pocl, nvidia, P:D, a part of its name\n"
                                      "(default: TEENY_DEVICE, else the first GPU, else the first CPU)"},
    [O_DATA] = {"--data", "DIR", "the Fashion-MNIST files (/usr/share/datasets/fashion-mnist)"},
    [O_BATCH] = {"--batch", "B", "the inference batch, 1..65536 (256)"},
    [O_COUNT] = {NULL, NULL, NULL},
};

static const cli_spec SPEC = {
    "eval_fashion_mnist",
    "CHECKPOINT [--device SPEC] [--data DIR] [--batch B]",
    "Evaluate a checkpoint train_fashion_mnist wrote: test accuracy, the confusion matrix\n"
    "and inference throughput on the device.",
    OPTS,
    "Exit status: 0 ok; 1 a failure; 2 a bad command line.",
};

int main(int argc, char **argv)
{
    const char *ckpt = NULL, *device = NULL, *data = "/usr/share/datasets/fashion-mnist";
    int64_t batch = 256;
    for (int i = 1; i < argc; i++) {
        const char *v;
        char what[600];
        uint64_t n;
        int k = cli_next(&SPEC, argc, argv, &i, &v);
        if (k == CLI_EXIT_OK || k == CLI_EXIT_USAGE)
            return k == CLI_EXIT_OK ? 0 : 2;
        if (k == CLI_ARG && ckpt) {
            snprintf(what, sizeof what, "a second checkpoint \"%.200s\" (the checkpoint is \"%.200s\")", v, ckpt);
            return cli_fail(&SPEC, what);
        }
        if (k == CLI_ARG)
            ckpt = v;
        else if (k == O_DEVICE)
            device = v;
        else if (k == O_DATA)
            data = v;
        else if (!ex_parse_number("--batch", v, 1, 65536, &n))
            return 2;
        else
            batch = (int64_t)n;
    }
    if (!ckpt)
        return cli_fail(&SPEC, "no checkpoint given");
    setvbuf(stdout, NULL, _IOLBF, 0);
    teeny_ctx *ctx = NULL;
    if (teeny_ctx_create(device, &ctx) != TEENY_OK) {
        fprintf(stderr, "error: %s\n", teeny_last_error(NULL));
        return 1;
    }
    fn_ctx_for_errors = ctx;
    fn_split test = {0};
    if (fn_load_split(data, "t10k", &test))
        return 1;
    fn_net net = {0};
    if (fn_build(ctx, 0, &net) != TEENY_OK)
        return 1;
    FN_TRY(teeny_graph_load(net.g, NULL, ckpt));
    printf("network: %lld parameters\n", (long long)fn_param_count(&net));
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_plan *full = NULL, *tail = NULL;
    pp.batch = batch;
    pp.training = 0;
    FN_TRY(teeny_graph_compile(net.g, &pp, &full));
    if (test.n % batch) {
        pp.batch = test.n % batch;
        FN_TRY(teeny_graph_compile(net.g, &pp, &tail));
    }
    fn_eval_result warm, r;
    FN_TRY(fn_evaluate(&net, full, tail, batch, &test, &warm)); /* first run builds nothing, but warms caches */
    FN_TRY(fn_evaluate(&net, full, tail, batch, &test, &r));
    printf("%s on %s: test_acc %.4f on %lld images, %.0f images/s (batch %lld, host data preparation included)\n",
           ckpt, teeny_ctx_device_name(ctx), r.accuracy, (long long)test.n, r.images_per_s, (long long)batch);
    fn_print_confusion(&r, stdout);
    teeny_plan_destroy(full);
    teeny_plan_destroy(tail);
    teeny_graph_destroy(net.g);
    fn_free_split(&test);
    teeny_ctx_destroy(ctx);
    return 0;
}
