/*
 * bench_train.c -- one training step of the example's network
 * (examples/fashion_net.h: three Conv-BN-SiLU layers, a C2PSA block,
 * global average pooling, a linear layer, softmax cross-entropy) at batch
 * 128 on fixed random images: forward, backward and one AdamW step over
 * every parameter, as examples/train_fashion_mnist.c runs them, with the
 * data uploaded once before the timing (the step alone; the example
 * overlaps the next batch's upload and the loss read with the device).
 *
 * Timed by the host's monotonic clock, the queue drained before and after
 * (the time includes the first launch's submission and the wait's return),
 * with no profiling events: on the H200 an event per launch raised the
 * host's cost of a launch from 6 to 13.6 us (2026-12-02), which a step of
 * 80 launches, many shorter than that, would pay in idle device time that
 * a user's loop does not. Two cases: train_fashion_b128 (pass "step"), one
 * step from an idle device, so its first launches wait for the host to
 * enqueue them; train_fashion_b128_loop (pass "loop"), LOOP_STEPS steps
 * back to back as a training loop runs them, the time per step. Their
 * JSON shapes name the network and batch and give the launches per step
 * (one profiled step counts them; TEENY_PROFILE=1 logs it kernel by
 * kernel) and host_ms, the host's enqueue time per step; the step's adds
 * launch_us, the interval of 256 back-to-back one-element adds by the same
 * clock. bench/compare_torch.py times examples/fashion_net.py's twin in
 * PyTorch. No bytes or flops are counted: the rows are times, not rates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

enum { LOOP_STEPS = 20 };

/* A case's JSON shape: the loop case (steps > 1) adds its steps; once
 * measured (launches > 0), the launch figures. */
static void train_shape(char *buf, size_t n, int64_t batch, int steps, int launches, double launch_us,
                        double host_ms)
{
    char more[160] = "";
    if (launches > 0)
        snprintf(more, sizeof more, ", \"launches\": %d, \"launch_us\": %.2f, \"host_ms\": %.4f", launches,
                 launch_us, host_ms);
    if (steps > 1)
        snprintf(buf, n, "{\"op\": \"train_step\", \"net\": \"fashion\", \"batch\": %lld, \"steps\": %d%s}",
                 (long long)batch, steps, more);
    else
        snprintf(buf, n, "{\"op\": \"train_step\", \"net\": \"fashion\", \"batch\": %lld%s}", (long long)batch, more);
}

/* `steps` steps back to back, o->reps times after o->warmup steps: the
 * median time per step and, of the same runs, the median host enqueue time
 * per step. Nonzero on failure. */
static int time_steps(teeny_ctx *ctx, const bench_opts *o, train_args *a, int steps, double *ms, double *host_ms)
{
    double *t = malloc((size_t)o->reps * 2 * sizeof *t);
    teeny_status st = t ? TEENY_OK : TEENY_ERR_NOMEM;
    for (int i = 0; i < o->warmup && st == TEENY_OK; i++)
        st = step(ctx, a);
    for (int r = 0; r < o->reps && st == TEENY_OK; r++) {
        double t0, t1;
        if ((st = teeny_ctx_finish(ctx)) != TEENY_OK)
            break;
        t0 = bench_wall_ms();
        for (int i = 0; i < steps && st == TEENY_OK; i++)
            st = step(ctx, a);
        t1 = bench_wall_ms();
        if (st == TEENY_OK)
            st = teeny_ctx_finish(ctx);
        t[r] = (bench_wall_ms() - t0) / steps;
        t[o->reps + r] = (t1 - t0) / steps;
    }
    if (st == TEENY_OK) {
        bench_sort(t, o->reps);
        bench_sort(t + o->reps, o->reps);
        *ms = t[o->reps / 2];
        *host_ms = t[o->reps + o->reps / 2];
    }
    free(t);
    return st != TEENY_OK;
}

/* The mean interval of back-to-back launches of a trivial kernel (eager
 * one-element adds), in us, by the host's clock. */
static teeny_status launch_interval(teeny_ctx *ctx, double *us)
{
    enum { N = 256 };
    int64_t one = 1;
    teeny_tensor *a = NULL;
    double t0 = 0;
    teeny_status st = teeny_tensor_create(ctx, 1, &one, &a);
    *us = 0;
    if (st == TEENY_OK && (st = teeny_tensor_fill(a, 1.0f)) == TEENY_OK && (st = teeny_add(ctx, a, a, a)) == TEENY_OK &&
        (st = teeny_ctx_finish(ctx)) == TEENY_OK) {
        t0 = bench_wall_ms();
        for (int i = 0; i < N && st == TEENY_OK; i++)
            st = teeny_add(ctx, a, a, a);
        if (st == TEENY_OK && (st = teeny_ctx_finish(ctx)) == TEENY_OK)
            *us = 1e3 * (bench_wall_ms() - t0) / N;
    }
    teeny_tensor_destroy(a);
    return st;
}

int bench_train(teeny_ctx *ctx, const bench_opts *o)
{
    const int64_t batch = 128;
    char shape[300], loop_shape[300];
    bench_case c = {"train", "train_fashion_b128", "step", shape, 0, 0};
    bench_case loop = {"train", "train_fashion_b128_loop", "loop", loop_shape, 0, 0};
    fn_net net = {0};
    train_args a = {0};
    double ms = 0, launch_us = 0, host_ms = 0;
    int launches = 0, failed = 0, want_step = bench_wanted(o, c.name), want_loop = bench_wanted(o, loop.name);
    if (!want_step && !want_loop)
        return 0;
    train_shape(shape, sizeof shape, batch, 1, 0, 0, 0);
    train_shape(loop_shape, sizeof loop_shape, batch, LOOP_STEPS, 0, 0, 0);
    if (o->list_only)
        return (want_step && bench_run(ctx, o, &c, step, &a)) | (want_loop && bench_run(ctx, o, &loop, step, &a));
    teeny_status st = launch_interval(ctx, &launch_us);
    if (st == TEENY_OK)
        st = setup(ctx, batch, &net, &a);
    /* one profiled step for the launch count (after a warm-up step) */
    if (st == TEENY_OK && (st = step(ctx, &a)) == TEENY_OK && (st = teeny_profile_begin(ctx)) == TEENY_OK) {
        st = step(ctx, &a);
        teeny_status st2 = teeny_profile_end(ctx, NULL, &launches);
        st = st == TEENY_OK ? st2 : st;
    }
    const struct {
        bench_case *c;
        char *shape;
        int steps, want;
    } runs[2] = {{&c, shape, 1, want_step}, {&loop, loop_shape, LOOP_STEPS, want_loop}};
    if (st == TEENY_OK && o->format == BENCH_TEXT)
        printf("train: %d launches per step; eager back-to-back launches %.2f us apart, so %.3f ms of a step is "
               "launches alone\n", launches, launch_us, launches * launch_us * 1e-3);
    for (int i = 0; i < 2; i++) {
        if (!runs[i].want)
            continue;
        if (st != TEENY_OK || time_steps(ctx, o, &a, runs[i].steps, &ms, &host_ms)) {
            bench_report_error(o, runs[i].c, teeny_last_error(ctx));
            failed = 1;
            continue;
        }
        train_shape(runs[i].shape, sizeof shape, batch, runs[i].steps, launches, launch_us, host_ms);
        if (o->format == BENCH_TEXT)
            printf("train: %d step%s back to back, %.4f ms a step by the host's clock, the host enqueuing for "
                   "%.4f ms of it\n", runs[i].steps, runs[i].steps == 1 ? "" : "s", ms, host_ms);
        bench_report(o, runs[i].c, ms, -1.0); /* timed by the host's clock already */
    }
    teeny_optimizer_destroy(a.opt);
    teeny_plan_destroy(a.plan);
    teeny_graph_destroy(net.g);
    return failed;
}
