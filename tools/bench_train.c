/*
 * bench_train.c -- one training step of the example's network
 * (examples/fashion_net.h: three Conv-BN-SiLU layers, a C2PSA block,
 * global average pooling, a linear layer, softmax cross-entropy) at batch
 * 128 on fixed random images: forward, backward and one AdamW step over
 * every parameter, as examples/train_fashion_mnist.c runs them, with the
 * data uploaded once before the timing (the step alone; the example
 * overlaps the next batch's upload and the loss read with the device).
 * The time is device time from the first kernel's start to the last one's
 * end, so it includes the gaps between launches. The JSON shape names the
 * network and batch and gives the launches per step and the device's
 * launch interval (launch_us: the span of 256 back-to-back one-element
 * adds over 256), whose product is the step's floor from launches alone;
 * bench/compare_torch.py times examples/fashion_net.py's twin in PyTorch.
 * No bytes or flops are counted: the row is a time, not a rate.
 * TEENY_PROFILE=1 logs the profiled step kernel by kernel.
 */
#include <stdio.h>

#include "bench.h"
#include "../examples/fashion_net.h"

typedef struct {
    teeny_plan *plan;
    teeny_optimizer *opt;
} train_args;

static teeny_status step(teeny_ctx *ctx, void *p)
{
    train_args *a = p;
    teeny_status st;
    (void)ctx;
    if ((st = teeny_plan_forward(a->plan)) != TEENY_OK || (st = teeny_plan_backward(a->plan)) != TEENY_OK)
        return st;
    return teeny_optimizer_step(a->opt, 1e-3f, 0.95f);
}

/* Build, compile and fill the network; the optimizer over every parameter. */
static teeny_status setup(teeny_ctx *ctx, int64_t batch, fn_net *net, train_args *a)
{
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    teeny_tensor *tx, *ty, **params = NULL, **grads = NULL;
    teeny_status st = fn_build(ctx, 1, net);
    int n = st == TEENY_OK ? teeny_graph_param_count(net->g) : 0;
    pp.batch = batch;
    pp.training = 1;
    pp.loss = net->loss;
    if (st == TEENY_OK)
        st = teeny_graph_compile(net->g, &pp, &a->plan);
    if (st == TEENY_OK)
        st = teeny_plan_tensor(a->plan, net->x, &tx);
    if (st == TEENY_OK)
        st = teeny_plan_tensor(a->plan, net->labels, &ty);
    if (st == TEENY_OK) {
        float *x = malloc((size_t)batch * 784 * sizeof *x);
        int32_t *y = malloc((size_t)batch * sizeof *y);
        uint32_t s = 12345u;
        st = x && y ? TEENY_OK : TEENY_ERR_NOMEM;
        for (int64_t i = 0; st == TEENY_OK && i < batch * 784; i++) {
            s = s * 1664525u + 1013904223u;
            x[i] = (float)(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
        }
        for (int64_t i = 0; st == TEENY_OK && i < batch; i++)
            y[i] = (int32_t)(i % FN_CLASSES);
        if (st == TEENY_OK && (st = teeny_tensor_write(tx, x, (size_t)batch * 784)) == TEENY_OK)
            st = teeny_tensor_write_i32(ty, y, (size_t)batch);
        free(x);
        free(y);
    }
    params = malloc((size_t)(n > 0 ? n : 1) * sizeof *params);
    grads = malloc((size_t)(n > 0 ? n : 1) * sizeof *grads);
    if (st == TEENY_OK && (!params || !grads))
        st = TEENY_ERR_NOMEM;
    for (int i = 0; st == TEENY_OK && i < n; i++)
        st = teeny_graph_param(net->g, i, NULL, &params[i], &grads[i]);
    op.kind = TEENY_OPTIM_ADAMW; /* the example's recipe */
    op.lr = 1e-3f;
    op.beta1 = 0.95f;
    op.beta2 = 0.999f;
    op.eps = 1e-8f;
    op.weight_decay = 5e-4f;
    if (st == TEENY_OK)
        st = teeny_optimizer_create(ctx, &op, n, params, (const teeny_tensor *const *)grads, &a->opt);
    free(params);
    free(grads);
    return st;
}

/* The mean interval of back-to-back launches of a trivial kernel, in us. */
static teeny_status launch_interval(teeny_ctx *ctx, double *us)
{
    enum { N = 256 };
    int64_t one = 1;
    teeny_tensor *a = NULL;
    double ms = 0;
    int launches = 0;
    teeny_status st = teeny_tensor_create(ctx, 1, &one, &a);
    if (st == TEENY_OK && (st = teeny_tensor_fill(a, 1.0f)) == TEENY_OK && (st = teeny_add(ctx, a, a, a)) == TEENY_OK &&
        (st = teeny_ctx_finish(ctx)) == TEENY_OK && (st = teeny_profile_begin(ctx)) == TEENY_OK) {
        for (int i = 0; i < N && st == TEENY_OK; i++)
            st = teeny_add(ctx, a, a, a);
        teeny_status st2 = teeny_profile_end(ctx, &ms, &launches);
        st = st == TEENY_OK ? st2 : st;
    }
    teeny_tensor_destroy(a);
    *us = launches > 0 ? 1e3 * ms / launches : 0;
    return st;
}

int bench_train(teeny_ctx *ctx, const bench_opts *o)
{
    const int64_t batch = 128;
    char shape[200];
    bench_case c = {"train", "train_fashion_b128", "step", shape, 0, 0};
    fn_net net = {0};
    train_args a = {0};
    double ms = 0, span, launch_us = 0;
    int launches = 0, failed = 0;
    if (!bench_wanted(o, c.name))
        return 0;
    snprintf(shape, sizeof shape, "{\"op\": \"train_step\", \"net\": \"fashion\", \"batch\": %lld}", (long long)batch);
    if (o->list_only)
        return bench_run(ctx, o, &c, step, &a);
    teeny_status st = launch_interval(ctx, &launch_us);
    if (st == TEENY_OK)
        st = setup(ctx, batch, &net, &a);
    /* one profiled step for the launch count (after a warm-up step) */
    if (st == TEENY_OK && (st = step(ctx, &a)) == TEENY_OK && (st = teeny_profile_begin(ctx)) == TEENY_OK) {
        st = step(ctx, &a);
        teeny_status st2 = teeny_profile_end(ctx, &span, &launches);
        st = st == TEENY_OK ? st2 : st;
    }
    if (st != TEENY_OK) {
        bench_report_error(o, &c, teeny_last_error(ctx));
        failed = 1;
    } else if (bench_time(ctx, o, step, &a, &ms)) {
        bench_report_error(o, &c, teeny_last_error(ctx));
        failed = 1;
    } else {
        snprintf(shape, sizeof shape,
                 "{\"op\": \"train_step\", \"net\": \"fashion\", \"batch\": %lld, \"launches\": %d, "
                 "\"launch_us\": %.2f}",
                 (long long)batch, launches, launch_us);
        if (o->format == BENCH_TEXT)
            printf("train: %d launches per step; back-to-back launches %.2f us apart, so %.3f ms of the step is "
                   "launches alone\n", launches, launch_us, launches * launch_us * 1e-3);
        bench_report(o, &c, ms);
    }
    teeny_optimizer_destroy(a.opt);
    teeny_plan_destroy(a.plan);
    teeny_graph_destroy(net.g);
    return failed;
}
