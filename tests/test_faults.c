/*
 * test_faults.c -- fault injection: fail every OpenCL call and host
 * allocation, one at a time, that these make: a batch-norm training step
 * (forward + backward, warm kernel cache); context creation and kernel
 * builds; and, on a graph with conv, PSA attention, batch norm and an
 * AdamW optimizer, graph compile, a full training step (forward, backward,
 * optimizer step, loss read), checkpoint save and checkpoint load. Each
 * failure must come back as a status (never OK when a call failed), leak
 * nothing (make check-asan), and leave the context, graph and tensors
 * usable: the same operation then succeeds and gives the same bits as a
 * clean run. Shapes are tiny so the whole suite stays well under a minute
 * on PoCL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "core/clwrap.h"

enum { B = 3, C = 5, H = 6, W = 7, N = B * C * H * W };

typedef struct {
    teeny_tensor *x, *dy, *y, *dx, *w, *b, *rm, *rv, *m, *r, *dw, *db;
} step_tensors;

static void step_make(teeny_ctx *ctx, step_tensors *t)
{
    th_rng rng = th_rng_make(17);
    float x[N], dy[N], v[C];
    int64_t xs[4] = {B, C, H, W}, cs[1] = {C};
    th_fill_normal(&rng, x, N, 1, 2);
    th_fill_normal(&rng, dy, N, 0, 1);
    th_fill_uniform(&rng, v, C, 0.5, 1.5);
    t->x = th_tensor_from(ctx, 4, xs, x);
    t->dy = th_tensor_from(ctx, 4, xs, dy);
    t->y = th_tensor(ctx, 4, xs);
    t->dx = th_tensor(ctx, 4, xs);
    teeny_tensor **vs[] = {&t->w, &t->b, &t->rm, &t->rv, &t->m, &t->r, &t->dw, &t->db};
    for (int i = 0; i < 8; i++)
        *vs[i] = th_tensor_from(ctx, 1, cs, v);
}

static void step_reset_state(teeny_ctx *ctx, step_tensors *t)
{
    float v[C];
    for (int i = 0; i < C; i++)
        v[i] = 1.0f;
    TH_OK(ctx, teeny_tensor_write(t->rm, v, C));
    TH_OK(ctx, teeny_tensor_write(t->rv, v, C));
}

static teeny_status step(teeny_ctx *ctx, step_tensors *t)
{
    teeny_status st = teeny_batchnorm_forward_train(ctx, t->x, t->w, t->b, t->rm, t->rv, 0.1f, 1e-5f, t->y, t->m, t->r);
    if (st == TEENY_OK)
        st = teeny_batchnorm_backward_train(ctx, t->x, t->dy, t->w, t->m, t->r, t->dx, t->dw, t->db);
    return st;
}

static void step_free(step_tensors *t)
{
    teeny_tensor **all = (teeny_tensor **)t;
    for (size_t i = 0; i < sizeof *t / sizeof(teeny_tensor *); i++)
        teeny_tensor_destroy(all[i]);
}

START_TEST(test_faults_batchnorm_step)
{
    teeny_ctx *ctx = NULL;
    step_tensors t;
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    step_make(ctx, &t);
    step_reset_state(ctx, &t);
    TH_OK(ctx, step(ctx, &t)); /* warm the kernel cache and workspace */
    float *y_ref = th_read(t.y), *dx_ref = th_read(t.dx);

    step_reset_state(ctx, &t);
    TH_OK(ctx, teeny_ctx_finish(ctx));
    teeny__calls_reset();
    TH_OK(ctx, step(ctx, &t));
    long total = teeny__calls_total();
    ck_assert_int_gt(total, 4);

    for (long k = 1; k <= total; k++) {
        step_reset_state(ctx, &t);
        TH_OK(ctx, teeny_ctx_finish(ctx));
        teeny__fault_arm(k);
        teeny_status st = step(ctx, &t);
        int fired = teeny__fault_fired();
        teeny__fault_arm(0);
        ck_assert_msg(fired, "call %ld of %ld was not reached", k, total);
        ck_assert_msg(st != TEENY_OK, "call %ld failed but the step reported success", k);
        ck_assert_msg(st == TEENY_ERR_OPENCL || st == TEENY_ERR_NOMEM, "call %ld: %s", k, teeny_status_name(st));
        const char *msg = teeny_last_error(ctx);
        ck_assert_msg(strstr(msg, "failed") != NULL && (strstr(msg, "cl") != NULL || strstr(msg, "memory") != NULL),
                      "call %ld: message does not name the call: %s", k, msg);
        /* still usable: the same step now succeeds, bit-identically */
        step_reset_state(ctx, &t);
        TH_OK(ctx, step(ctx, &t));
        float *y = th_read(t.y), *dx = th_read(t.dx);
        ck_assert_msg(!memcmp(y, y_ref, sizeof(float) * N) && !memcmp(dx, dx_ref, sizeof(float) * N),
                      "results differ after fault at call %ld", k);
        free(y);
        free(dx);
    }
    free(y_ref);
    free(dx_ref);
    step_free(&t);
    teeny_ctx_destroy(ctx);
}
END_TEST

/* Faults while creating a context and tensors and building kernels from a
 * cold in-memory cache: every failure is a status, nothing leaks, and a
 * fault the library absorbs (a disk-cache read or write is only an
 * optimization) still gives the right results. */
static teeny_status setup_and_step(float *y_out)
{
    teeny_ctx *ctx = NULL;
    teeny_status st = teeny_ctx_create(NULL, &ctx);
    if (st != TEENY_OK) {
        ck_assert(ctx == NULL);
        return st;
    }
    th_rng rng = th_rng_make(17);
    float x[N], v[C];
    th_fill_normal(&rng, x, N, 1, 2);
    for (int i = 0; i < C; i++)
        v[i] = 1.0f;
    int64_t xs[4] = {B, C, H, W}, cs[1] = {C};
    teeny_tensor *ts[12] = {0};
    for (int i = 0; i < 12 && st == TEENY_OK; i++)
        st = i < 4 ? teeny_tensor_create(ctx, 4, xs, &ts[i]) : teeny_tensor_create(ctx, 1, cs, &ts[i]);
    step_tensors *t = (step_tensors *)ts;
    if (st == TEENY_OK)
        st = teeny_tensor_write(t->x, x, N);
    if (st == TEENY_OK)
        st = teeny_tensor_write(t->dy, x, N);
    for (int i = 4; i < 12 && st == TEENY_OK; i++)
        st = teeny_tensor_write(ts[i], v, C);
    if (st == TEENY_OK)
        st = step(ctx, t);
    if (st == TEENY_OK)
        st = teeny_tensor_read(t->y, y_out, N);
    for (int i = 0; i < 12; i++)
        teeny_tensor_destroy(ts[i]);
    teeny_ctx_destroy(ctx);
    return st;
}

START_TEST(test_faults_setup)
{
    static float y_ref[N], y[N];
    teeny__calls_reset();
    TH_OK(NULL, setup_and_step(y_ref));
    long total = teeny__calls_total();
    for (long k = 1; k <= total; k += th_small() ? 7 : 1) {
        teeny__fault_arm(k);
        teeny_status st = setup_and_step(y);
        int fired = teeny__fault_fired();
        teeny__fault_arm(0);
        ck_assert_msg(fired, "call %ld of %ld was not reached", k, total);
        if (st == TEENY_OK)
            ck_assert_msg(!memcmp(y, y_ref, sizeof y), "fault at call %ld absorbed but results differ", k);
    }
}
END_TEST

/* Program builds from source (a cold disk cache in a fresh directory each
 * time): a fault in creating, building or querying a program, or in
 * writing the disk cache, is a status or is absorbed with the right
 * results, never a crash or a leak. A build costs ~0.5 s on PoCL, so
 * without TEENY_TEST_FULL every k-th call is failed, about a dozen in all,
 * always including the build itself (found by counting). */
static teeny_status cold_setup_and_step(long k, float *y)
{
    char dir[256], cmd[300];
    snprintf(dir, sizeof dir, "/tmp/teenycl-faults-cache-%ld-%ld", (long)getpid(), k);
    const char *pocl = getenv("POCL_KERNEL_CACHE");
    char keep[16] = "";
    if (pocl)
        snprintf(keep, sizeof keep, "%s", pocl);
    setenv("TEENY_CACHE_DIR", dir, 1);
    setenv("POCL_KERNEL_CACHE", "0", 1); /* on PoCL the disk cache is written only with PoCL's own off */
    teeny__fault_arm(k);
    teeny_status st = setup_and_step(y);
    unsetenv("TEENY_CACHE_DIR");
    if (pocl)
        setenv("POCL_KERNEL_CACHE", keep, 1);
    else
        unsetenv("POCL_KERNEL_CACHE");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    return st;
}

/* One faulted cold run: its status, and whether results match. */
static void cold_check(long k, long total, const float *y_ref, float *y, long *builds_seen)
{
    teeny__calls_reset();
    teeny_status st = cold_setup_and_step(k, y);
    int fired = teeny__fault_fired();
    teeny__fault_arm(0);
    if (builds_seen)
        *builds_seen = teeny__calls_id(TEENY__ID_clBuildProgram);
    ck_assert_msg(fired, "call %ld of %ld was not reached", k, total);
    if (st == TEENY_OK)
        ck_assert_msg(!memcmp(y, y_ref, N * sizeof(float)), "fault at call %ld absorbed but results differ", k);
}

START_TEST(test_faults_cold_build)
{
    static float y_ref[N], y[N];
    const char *saved = getenv("TEENY_CACHE_DIR");
    char keep[512] = "";
    if (saved)
        snprintf(keep, sizeof keep, "%s", saved);
    teeny__calls_reset();
    TH_OK(NULL, cold_setup_and_step(0, y_ref));
    long total = teeny__calls_total();
    ck_assert_int_ge(teeny__calls_id(TEENY__ID_clBuildProgram), 1);
    /* the first clBuildProgram's index: a run faulted at k counts the calls
     * up to k exactly as the clean run did, so the first k whose run saw a
     * build is the build (binary search, each probe itself a checked run) */
    long lo = 1, hi = total;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2, seen;
        cold_check(mid, total, y_ref, y, &seen);
        if (seen > 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    long build_at = lo, stride = th_full() ? 1 : total / 10 + 1;
    cold_check(build_at, total, y_ref, y, NULL);
    for (long k = 1; k <= total; k += stride)
        cold_check(k, total, y_ref, y, NULL);
    if (keep[0])
        setenv("TEENY_CACHE_DIR", keep, 1);
}
END_TEST

/* ---- graphs ---- */

typedef struct {
    teeny_graph *g;
    teeny_node x, labels, loss;
    teeny_optimizer *opt;
    float *theta0;  /* initial parameters, host */
    size_t n_theta;
} fgraph;

enum { GB = 2, GC = 4, GH = 3, GW = 3 };

/* conv 3x3 -> batch norm -> silu -> qkv conv 1x1 -> PSA attention ->
 * residual add -> global avgpool -> linear -> cross-entropy */
static void fgraph_make(teeny_ctx *ctx, fgraph *f)
{
    teeny_conv2d_params p3 = TEENY_CONV2D_PARAMS_INIT, p1 = TEENY_CONV2D_PARAMS_INIT;
    teeny_node a, b, c, qkv, att, r, gap, fc;
    int64_t xs[4] = {-1, 2, GH, GW};
    p3.pad[0] = p3.pad[1] = 1;
    memset(f, 0, sizeof *f);
    TH_OK(ctx, teeny_graph_create(ctx, 5, &f->g));
    TH_OK(ctx, teeny_graph_input(f->g, "x", 4, xs, &f->x));
    TH_OK(ctx, teeny_graph_labels(f->g, "labels", &f->labels));
    TH_OK(ctx, teeny_graph_conv2d(f->g, "conv", f->x, GC, 3, 3, &p3, 0, &a));
    TH_OK(ctx, teeny_graph_batchnorm(f->g, "bn", a, 0.1f, 1e-5f, &b));
    TH_OK(ctx, teeny_graph_activation(f->g, "act", b, TEENY_ACT_SILU, &c));
    TH_OK(ctx, teeny_graph_conv2d(f->g, "qkv", c, 2 * GC, 1, 1, &p1, 1, &qkv)); /* heads 1, key_dim GC/2 */
    TH_OK(ctx, teeny_graph_psa_attention(f->g, "psa", qkv, 1, GC / 2, &att));
    TH_OK(ctx, teeny_graph_add(f->g, "res", c, att, &r));
    TH_OK(ctx, teeny_graph_global_avgpool(f->g, "gap", r, &gap));
    TH_OK(ctx, teeny_graph_linear(f->g, "fc", gap, 3, 1, &fc));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(f->g, "loss", fc, f->labels, &f->loss));
}

static teeny_status fgraph_compile(fgraph *f, teeny_plan **p)
{
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = GB;
    pp.training = 1;
    pp.loss = f->loss;
    return teeny_graph_compile(f->g, &pp, p);
}

static void fgraph_optimizer(teeny_ctx *ctx, fgraph *f)
{
    int n = teeny_graph_param_count(f->g);
    teeny_tensor *params[16], *grads[16];
    ck_assert_int_le(n, 16);
    for (int i = 0; i < n; i++)
        TH_OK(ctx, teeny_graph_param(f->g, i, NULL, &params[i], &grads[i]));
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    op.kind = TEENY_OPTIM_ADAMW;
    op.lr = 1e-2f;
    op.weight_decay = 1e-2f;
    op.max_grad_norm = 5.0f;
    TH_OK(ctx, teeny_optimizer_create(ctx, &op, n, params, (const teeny_tensor *const *)grads, &f->opt));
}

/* All parameters, states and optimizer states in one host vector. */
static float *fgraph_read_all(teeny_ctx *ctx, fgraph *f, size_t *total)
{
    int np = teeny_graph_param_count(f->g), ns = teeny_graph_state_count(f->g);
    int no = f->opt ? teeny_optimizer_state_count(f->opt) : 0;
    teeny_tensor *t;
    size_t n = 0, at = 0;
    for (int pass = 0; pass < 2; pass++) {
        float *out = pass ? th_malloc(n * sizeof *out) : NULL;
        for (int i = 0; i < np + ns + no; i++) {
            if (i < np)
                TH_OK(ctx, teeny_graph_param(f->g, i, NULL, &t, NULL));
            else if (i < np + ns)
                TH_OK(ctx, teeny_graph_state(f->g, i - np, NULL, &t));
            else
                TH_OK(ctx, teeny_optimizer_state(f->opt, i - np - ns, NULL, &t));
            size_t k = (size_t)teeny_tensor_numel(t);
            if (pass)
                TH_OK(ctx, teeny_tensor_read(t, out + at, k));
            at += pass ? k : 0;
            n += pass ? 0 : k;
        }
        if (pass) {
            *total = n;
            return out;
        }
    }
    return NULL;
}

/* Back to the initial parameters, running statistics, zero optimizer
 * state and step counts: every attempt starts from the same point. */
static void fgraph_reset(teeny_ctx *ctx, fgraph *f)
{
    int np = teeny_graph_param_count(f->g), ns = teeny_graph_state_count(f->g);
    teeny_tensor *t;
    size_t at = 0;
    for (int i = 0; i < np; i++) {
        TH_OK(ctx, teeny_graph_param(f->g, i, NULL, &t, NULL));
        TH_OK(ctx, teeny_tensor_write(t, f->theta0 + at, (size_t)teeny_tensor_numel(t)));
        at += (size_t)teeny_tensor_numel(t);
    }
    for (int i = 0; i < ns; i++) {
        const char *name;
        TH_OK(ctx, teeny_graph_state(f->g, i, &name, &t));
        TH_OK(ctx, teeny_tensor_fill(t, strstr(name, "running_var") ? 1.0f : 0.0f));
    }
    for (int i = 0; f->opt && i < teeny_optimizer_state_count(f->opt); i++) {
        TH_OK(ctx, teeny_optimizer_state(f->opt, i, NULL, &t));
        TH_OK(ctx, teeny_tensor_fill(t, 0.0f));
    }
    if (f->opt)
        TH_OK(ctx, teeny_optimizer_set_steps(f->opt, 0));
    TH_OK(ctx, teeny_graph_set_train_steps(f->g, 0));
    TH_OK(ctx, teeny_ctx_finish(ctx));
}

static void fgraph_feed(teeny_ctx *ctx, teeny_plan *p, fgraph *f)
{
    teeny_tensor *tx, *tl;
    float x[GB * 2 * GH * GW];
    int32_t l[GB] = {0, 2};
    th_rng r = th_rng_make(41);
    th_fill_normal(&r, x, sizeof x / sizeof x[0], 0, 1);
    TH_OK(ctx, teeny_plan_tensor(p, f->x, &tx));
    TH_OK(ctx, teeny_plan_tensor(p, f->labels, &tl));
    TH_OK(ctx, teeny_tensor_write(tx, x, sizeof x / sizeof x[0]));
    TH_OK(ctx, teeny_tensor_write_i32(tl, l, GB));
}

static teeny_status fgraph_step(fgraph *f, teeny_plan *p, float *loss)
{
    teeny_status st = teeny_plan_forward(p);
    if (st == TEENY_OK)
        st = teeny_plan_backward(p);
    if (st == TEENY_OK)
        st = teeny_optimizer_step(f->opt, 1e-2f, -1.0f);
    if (st == TEENY_OK)
        st = teeny_plan_read_loss(p, loss);
    return st;
}

static void fgraph_free(fgraph *f)
{
    teeny_optimizer_destroy(f->opt);
    teeny_graph_destroy(f->g);
    free(f->theta0);
}

/* A failed call must fail the operation, with a message. */
static void expect_failed(teeny_ctx *ctx, long k, long total, teeny_status st, int fired, const char *what)
{
    ck_assert_msg(fired, "%s: call %ld of %ld was not reached", what, k, total);
    ck_assert_msg(st != TEENY_OK, "%s: call %ld of %ld failed but the operation reported success", what, k, total);
    ck_assert_msg(st == TEENY_ERR_OPENCL || st == TEENY_ERR_NOMEM, "%s: call %ld: %s", what, k, teeny_status_name(st));
    ck_assert_msg(teeny_last_error(ctx)[0], "%s: call %ld: no message", what, k);
}

/* Compile and a full training step (forward, backward, AdamW step, loss
 * read) under every single fault. */
START_TEST(test_faults_graph_compile_and_step)
{
    teeny_ctx *ctx = th_ctx();
    fgraph f;
    teeny_plan *p = NULL;
    float loss_ref, loss;
    size_t n, n2;
    fgraph_make(ctx, &f);
    TH_OK(ctx, fgraph_compile(&f, &p)); /* warms kernels, creates the gradients */
    fgraph_optimizer(ctx, &f);
    size_t dummy;
    float *all0 = fgraph_read_all(ctx, &f, &dummy);
    f.theta0 = all0; /* parameters come first */
    fgraph_feed(ctx, p, &f);
    fgraph_reset(ctx, &f);
    TH_OK(ctx, fgraph_step(&f, p, &loss_ref));
    float *ref = fgraph_read_all(ctx, &f, &n);

    /* compile */
    teeny_plan_destroy(p);
    p = NULL;
    TH_OK(ctx, teeny_ctx_finish(ctx));
    teeny__calls_reset();
    TH_OK(ctx, fgraph_compile(&f, &p));
    long total = teeny__calls_total();
    teeny_plan_destroy(p);
    p = NULL;
    ck_assert_int_gt(total, 10);
    for (long k = 1; k <= total; k++) {
        teeny__fault_arm(k);
        teeny_status st = fgraph_compile(&f, &p);
        int fired = teeny__fault_fired();
        teeny__fault_arm(0);
        expect_failed(ctx, k, total, st, fired, "compile");
        ck_assert_ptr_null(p);
    }
    /* after all that, a compile and a step give the clean run's bits */
    TH_OK(ctx, fgraph_compile(&f, &p));
    fgraph_feed(ctx, p, &f);
    fgraph_reset(ctx, &f);
    TH_OK(ctx, fgraph_step(&f, p, &loss));
    float *got = fgraph_read_all(ctx, &f, &n2);
    ck_assert_msg(loss == loss_ref && n2 == n && !memcmp(got, ref, n * sizeof(float)),
                  "a step after the compile faults differs from the clean run");
    free(got);

    /* the training step */
    fgraph_reset(ctx, &f);
    teeny__calls_reset();
    TH_OK(ctx, fgraph_step(&f, p, &loss));
    total = teeny__calls_total();
    ck_assert_int_gt(total, 10);
    for (long k = 1; k <= total; k++) {
        fgraph_reset(ctx, &f);
        teeny__fault_arm(k);
        teeny_status st = fgraph_step(&f, p, &loss);
        int fired = teeny__fault_fired();
        teeny__fault_arm(0);
        expect_failed(ctx, k, total, st, fired, "training step");
        fgraph_reset(ctx, &f);
        TH_OK(ctx, fgraph_step(&f, p, &loss));
        got = fgraph_read_all(ctx, &f, &n2);
        ck_assert_msg(loss == loss_ref && !memcmp(got, ref, n * sizeof(float)),
                      "training step: results differ after a fault at call %ld of %ld", k, total);
        free(got);
    }
    free(ref);
    teeny_plan_destroy(p);
    fgraph_free(&f);
}
END_TEST

/* Checkpoint save and load under every single fault: a failed save leaves
 * the previous file intact (atomic replace), a failed load reports it,
 * and the next save / load gives the same bits. */
START_TEST(test_faults_checkpoint)
{
    teeny_ctx *ctx = th_ctx();
    fgraph f;
    teeny_plan *p = NULL;
    float loss;
    size_t n, n2;
    char path[256], old[300];
    snprintf(path, sizeof path, "/tmp/teenycl-faults-%ld.safetensors", (long)getpid());
    snprintf(old, sizeof old, "%s.old", path);
    fgraph_make(ctx, &f);
    TH_OK(ctx, fgraph_compile(&f, &p));
    fgraph_optimizer(ctx, &f);
    size_t dummy;
    f.theta0 = fgraph_read_all(ctx, &f, &dummy);
    fgraph_feed(ctx, p, &f);
    fgraph_reset(ctx, &f);
    TH_OK(ctx, fgraph_step(&f, p, &loss));
    float *trained = fgraph_read_all(ctx, &f, &n);
    /* a different file already at path: a failed save must leave it */
    TH_OK(ctx, teeny_graph_save(f.g, NULL, path, 0, NULL, NULL));
    TH_OK(ctx, teeny_graph_save(f.g, f.opt, old, 0, NULL, NULL));

    teeny__calls_reset();
    TH_OK(ctx, teeny_graph_save(f.g, f.opt, path, 0, NULL, NULL));
    long total = teeny__calls_total();
    ck_assert_int_gt(total, 3);
    for (long k = 1; k <= total; k++) {
        TH_OK(ctx, teeny_graph_save(f.g, NULL, path, 0, NULL, NULL)); /* the "previous" file */
        teeny__fault_arm(k);
        teeny_status st = teeny_graph_save(f.g, f.opt, path, 0, NULL, NULL);
        int fired = teeny__fault_fired();
        teeny__fault_arm(0);
        expect_failed(ctx, k, total, st, fired, "save");
        /* the previous file is intact: it loads without an optimizer */
        TH_OK(ctx, teeny_graph_load(f.g, NULL, path));
    }
    TH_OK(ctx, teeny_graph_save(f.g, f.opt, path, 0, NULL, NULL));

    /* load: start from the initial state each time */
    fgraph_reset(ctx, &f);
    teeny__calls_reset();
    TH_OK(ctx, teeny_graph_load(f.g, f.opt, path));
    total = teeny__calls_total();
    ck_assert_int_gt(total, 3);
    for (long k = 1; k <= total; k++) {
        fgraph_reset(ctx, &f);
        teeny__fault_arm(k);
        teeny_status st = teeny_graph_load(f.g, f.opt, path);
        int fired = teeny__fault_fired();
        teeny__fault_arm(0);
        expect_failed(ctx, k, total, st, fired, "load");
        TH_OK(ctx, teeny_graph_load(f.g, f.opt, path));
        float *got = fgraph_read_all(ctx, &f, &n2);
        ck_assert_msg(n2 == n && !memcmp(got, trained, n * sizeof(float)),
                      "load: tensors differ after a fault at call %ld of %ld", k, total);
        free(got);
        ck_assert_int_eq(teeny_optimizer_steps(f.opt), 1);
    }
    free(trained);
    remove(path);
    remove(old);
    teeny_plan_destroy(p);
    fgraph_free(&f);
}
END_TEST

Suite *suite_faults(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_faults_batchnorm_step);
    tcase_add_test(tc, test_faults_setup);
    tcase_add_test(tc, test_faults_cold_build);
    tcase_add_test(tc, test_faults_graph_compile_and_step);
    tcase_add_test(tc, test_faults_checkpoint);
    suite_add_tcase(s, tc);
    return s;
}
