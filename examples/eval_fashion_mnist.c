/*
 * eval_fashion_mnist -- load a checkpoint written by train_fashion_mnist and
 * report test accuracy, per-class accuracy (the confusion matrix) and
 * inference throughput on the chosen device.
 *
 * Usage: eval_fashion_mnist CHECKPOINT [--device SPEC] [--data DIR] [--batch B]
 */
#include "fashion_net.h"

int main(int argc, char **argv)
{
    const char *ckpt = NULL, *device = NULL, *data = "/usr/share/datasets/fashion-mnist";
    int64_t batch = 256;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc)
            data = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = strtoll(argv[++i], NULL, 10);
        else if (argv[i][0] != '-' && !ckpt)
            ckpt = argv[i];
        else
            ckpt = NULL, i = argc;
    }
    if (!ckpt || batch < 1) {
        fprintf(stderr, "usage: %s CHECKPOINT [--device SPEC] [--data DIR] [--batch B]\n", argv[0]);
        return 2;
    }
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
