/*
 * test_optim.c -- optimizers against the float64 reference (tests/ref/
 * optim_ref.c): every kind and option over 20 steps with a changing lr and
 * beta1 and gradients whose size changes so that clipping switches on and
 * off; state names and checkpoint restore; determinism; what a warm step
 * calls (no create, build, set-arg or blocking call); fault injection;
 * and every error path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "core/clwrap.h"
#include "internal.h"
#include "ops/ops.h"
#include "ref/optim_ref.h"

#define TOL 1e-5
#define N_STEPS 20
#define N_PARAMS 5

typedef struct {
    const char *name;
    teeny_optim_kind kind;
    float lr, momentum, dampening, weight_decay;
    int nesterov;
    float beta1, beta2, eps, max_grad_norm;
} optim_case;

static const optim_case cases[] = {
    {"sgd", TEENY_OPTIM_SGD, 0.1f, 0, 0, 0, 0, 0, 0, 0, 0},
    {"sgd momentum", TEENY_OPTIM_SGD, 0.05f, 0.9f, 0, 0, 0, 0, 0, 0, 0},
    {"sgd nesterov", TEENY_OPTIM_SGD, 0.05f, 0.9f, 0, 0, 1, 0, 0, 0, 0},
    {"sgd weight decay", TEENY_OPTIM_SGD, 0.1f, 0, 0, 0.05f, 0, 0, 0, 0, 0},
    {"sgd momentum dampening decay", TEENY_OPTIM_SGD, 0.05f, 0.8f, 0.3f, 0.01f, 0, 0, 0, 0, 0},
    {"sgd momentum clip", TEENY_OPTIM_SGD, 0.05f, 0.9f, 0, 0, 0, 0, 0, 0, 10.0f},
    {"adam", TEENY_OPTIM_ADAM, 0.01f, 0, 0, 0, 0, 0.9f, 0.999f, 1e-8f, 0},
    {"adam l2", TEENY_OPTIM_ADAM, 0.01f, 0, 0, 0.05f, 0, 0.9f, 0.99f, 1e-6f, 0},
    {"adamw", TEENY_OPTIM_ADAMW, 0.01f, 0, 0, 0.05f, 0, 0.9f, 0.999f, 1e-8f, 0},
    {"adamw clip", TEENY_OPTIM_ADAMW, 0.01f, 0, 0, 0.01f, 0, 0.9f, 0.999f, 1e-8f, 10.0f},
    {"adam clip never active", TEENY_OPTIM_ADAM, 0.01f, 0, 0, 0, 0, 0.9f, 0.999f, 1e-8f, 1e6f},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static teeny_optim_params case_params(const optim_case *c)
{
    teeny_optim_params p = TEENY_OPTIM_PARAMS_INIT;
    p.kind = c->kind;
    p.lr = c->lr;
    p.momentum = c->momentum;
    p.dampening = c->dampening;
    p.weight_decay = c->weight_decay;
    p.nesterov = c->nesterov;
    if (c->kind != TEENY_OPTIM_SGD) {
        p.beta1 = c->beta1;
        p.beta2 = c->beta2;
        p.eps = c->eps;
    }
    p.max_grad_norm = c->max_grad_norm;
    return p;
}

/* Step k's schedule (k = 1..): a cosine lr and a cycling beta1 (OneCycleLR
 * style); gradients are small every third step so clipping turns off. */
static float sched_lr(const optim_case *c, int k)
{
    return (float)(c->lr * (0.55 + 0.45 * cos(3.141592653589793 * k / N_STEPS)));
}

static float sched_beta1(const optim_case *c, int k)
{
    return c->kind == TEENY_OPTIM_SGD ? -1.0f : (float)(0.85 + 0.1 * sin(0.7 * k));
}

static double grad_std(int k)
{
    return k % 3 == 0 ? 0.01 : 1.0;
}

/* The parameter set: several shapes, the last param and grad views at odd
 * offsets inside larger tensors. */
typedef struct {
    teeny_tensor *base_p, *base_g;
    teeny_tensor *p[N_PARAMS], *g[N_PARAMS];
    size_t n[N_PARAMS];
} param_set;

static const int64_t shapes[N_PARAMS][4] = {{1}, {37}, {10, 100}, {4099}, {2, 3, 5, 7}};
static const int ndims[N_PARAMS] = {1, 1, 2, 1, 4};

static void set_make(teeny_ctx *ctx, param_set *s, th_rng *r)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < N_PARAMS; i++) {
        int64_t n = 1;
        for (int d = 0; d < ndims[i]; d++)
            n *= shapes[i][d];
        s->n[i] = (size_t)n;
        if (i == N_PARAMS - 1) {
            int64_t big = n + 9;
            s->base_p = th_tensor(ctx, 1, &big);
            s->base_g = th_tensor(ctx, 1, &big);
            th_poison(s->base_p);
            th_poison(s->base_g);
            TH_OK(ctx, teeny_tensor_view(s->base_p, 5, ndims[i], shapes[i], &s->p[i]));
            TH_OK(ctx, teeny_tensor_view(s->base_g, 3, ndims[i], shapes[i], &s->g[i]));
        } else {
            s->p[i] = th_tensor(ctx, ndims[i], shapes[i]);
            s->g[i] = th_tensor(ctx, ndims[i], shapes[i]);
        }
        float *x = th_malloc(s->n[i] * sizeof *x);
        th_fill_normal(r, x, s->n[i], 0, 1);
        TH_OK(ctx, teeny_tensor_write(s->p[i], x, s->n[i]));
        th_fill_normal(r, x, s->n[i], 0, 0.1); /* tests that never set grads still step on data */
        TH_OK(ctx, teeny_tensor_write(s->g[i], x, s->n[i]));
        free(x);
    }
}

static void set_free(param_set *s)
{
    for (int i = 0; i < N_PARAMS; i++) {
        teeny_tensor_destroy(s->p[i]);
        teeny_tensor_destroy(s->g[i]);
    }
    teeny_tensor_destroy(s->base_p);
    teeny_tensor_destroy(s->base_g);
}

static teeny_optimizer *set_optimizer(teeny_ctx *ctx, param_set *s, const teeny_optim_params *p)
{
    teeny_optimizer *opt = NULL;
    TH_OK(ctx, teeny_optimizer_create(ctx, p, N_PARAMS, s->p, (const teeny_tensor *const *)s->g, &opt));
    ck_assert_ptr_nonnull(opt);
    return opt;
}

/* Random grads for step k into the set; the float values into g[i]. */
static void set_grads(teeny_ctx *ctx, param_set *s, th_rng *r, int k, float **g)
{
    for (int i = 0; i < N_PARAMS; i++) {
        th_fill_normal(r, g[i], s->n[i], 0, grad_std(k));
        TH_OK(ctx, teeny_tensor_write(s->g[i], g[i], s->n[i]));
    }
}

static void check_close(const char *what, const optim_case *c, int i, const float *out, const double *ref, size_t n)
{
    long bad = th_first_nonfinite(out, n);
    double e = th_nrms(out, ref, n);
    ck_assert_msg(bad < 0, "optim %s: %s[%d] element %ld not finite", c->name, what, i, bad);
    ck_assert_msg(e <= TOL, "optim %s: %s[%d] nrms %.3g > %.1g (reproduce: case \"%s\", %d steps)", c->name, what, i,
                  e, TOL, c->name, N_STEPS);
}

START_TEST(test_optim_vs_reference)
{
    const optim_case *c = &cases[_i];
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(1000 + (uint64_t)_i);
    param_set s;
    teeny_optim_params p = case_params(c);
    ref_optim_hyper h = {(int)c->kind, c->momentum, c->dampening, c->weight_decay, c->nesterov, c->beta2, c->eps};
    float *g[N_PARAMS];
    double *rp[N_PARAMS], *rg[N_PARAMS], *rs0[N_PARAMS], *rs1[N_PARAMS];
    int n_clipped = 0, n_unclipped = 0;

    set_make(ctx, &s, &r);
    teeny_optimizer *opt = set_optimizer(ctx, &s, &p);
    for (int i = 0; i < N_PARAMS; i++) {
        float *x = th_read(s.p[i]);
        g[i] = th_malloc(s.n[i] * sizeof(float));
        rp[i] = th_malloc(s.n[i] * sizeof(double));
        rg[i] = th_malloc(s.n[i] * sizeof(double));
        rs0[i] = calloc(s.n[i], sizeof(double));
        rs1[i] = calloc(s.n[i], sizeof(double));
        ck_assert(rs0[i] && rs1[i]);
        th_to_double(x, rp[i], s.n[i]);
        free(x);
    }
    for (int k = 1; k <= N_STEPS; k++) {
        float lr = sched_lr(c, k), beta1 = sched_beta1(c, k);
        set_grads(ctx, &s, &r, k, g);
        TH_OK(ctx, teeny_optimizer_step(opt, lr, beta1));
        for (int i = 0; i < N_PARAMS; i++)
            th_to_double(g[i], rg[i], s.n[i]);
        if (c->max_grad_norm > 0) {
            double scale = ref_clip_grad_norm(N_PARAMS, rg, s.n, c->max_grad_norm);
            scale < 1 ? n_clipped++ : n_unclipped++;
        }
        for (int i = 0; i < N_PARAMS; i++)
            ref_optim_step(&h, rp[i], rg[i], rs0[i], rs1[i], s.n[i], lr,
                           beta1 < 0 ? (double)p.beta1 : (double)beta1, k);
    }
    ck_assert_int_eq(teeny_optimizer_steps(opt), N_STEPS);
    if (c->max_grad_norm > 0 && c->max_grad_norm < 1e3f)
        ck_assert_msg(n_clipped > 0 && n_unclipped > 0, "case %s: clipping never switched (%d on, %d off)", c->name,
                      n_clipped, n_unclipped);
    if (c->max_grad_norm >= 1e3f)
        ck_assert_int_eq(n_clipped, 0);

    int per = c->kind == TEENY_OPTIM_SGD ? (c->momentum != 0 ? 1 : 0) : 2;
    ck_assert_int_eq(teeny_optimizer_state_count(opt), per * N_PARAMS);
    for (int i = 0; i < N_PARAMS; i++) {
        float *x = th_read(s.p[i]), *gx = th_read(s.g[i]);
        check_close("param", c, i, x, rp[i], s.n[i]);
        check_close("grad (after clipping)", c, i, gx, rg[i], s.n[i]);
        for (int k = 0; k < per; k++) {
            const char *name;
            teeny_tensor *st;
            char want[32];
            TH_OK(ctx, teeny_optimizer_state(opt, i * per + k, &name, &st));
            snprintf(want, sizeof want, "%s.%d", per == 1 ? "momentum_buffer" : k ? "exp_avg_sq" : "exp_avg", i);
            ck_assert_str_eq(name, want);
            ck_assert_int_eq(teeny_tensor_numel(st), (int64_t)s.n[i]);
            ck_assert_int_eq(teeny_tensor_ndim(st), ndims[i]);
            float *sx = th_read(st);
            check_close(name, c, i, sx, k ? rs1[i] : rs0[i], s.n[i]);
            free(sx);
        }
        free(x);
        free(gx);
        free(g[i]);
        free(rp[i]);
        free(rg[i]);
        free(rs0[i]);
        free(rs1[i]);
    }
    /* the padding around the views was never written */
    float *bp = th_read(s.base_p);
    ck_assert(isnan(bp[0]) && isnan(bp[4]) && isnan(bp[5 + s.n[N_PARAMS - 1]]));
    free(bp);
    teeny_optimizer_destroy(opt);
    set_free(&s);
}
END_TEST

/* Run steps 1..k of a case on a set with grads from seed; read params. */
static void run_steps(teeny_ctx *ctx, teeny_optimizer *opt, param_set *s, uint64_t seed, int from, int to,
                      const optim_case *c)
{
    th_rng r = th_rng_make(seed);
    float *g[N_PARAMS];
    for (int i = 0; i < N_PARAMS; i++)
        g[i] = th_malloc(s->n[i] * sizeof(float));
    for (int k = 1; k <= to; k++) {
        for (int i = 0; i < N_PARAMS; i++)
            th_fill_normal(&r, g[i], s->n[i], 0, grad_std(k));
        if (k < from)
            continue;
        for (int i = 0; i < N_PARAMS; i++)
            TH_OK(ctx, teeny_tensor_write(s->g[i], g[i], s->n[i]));
        TH_OK(ctx, teeny_optimizer_step(opt, sched_lr(c, k), sched_beta1(c, k)));
    }
    for (int i = 0; i < N_PARAMS; i++)
        free(g[i]);
}

static int sets_equal(param_set *a, param_set *b)
{
    int eq = 1;
    for (int i = 0; i < N_PARAMS; i++) {
        float *x = th_read(a->p[i]), *y = th_read(b->p[i]);
        eq &= !memcmp(x, y, a->n[i] * sizeof(float));
        free(x);
        free(y);
    }
    return eq;
}

START_TEST(test_optim_determinism)
{
    teeny_ctx *ctx = th_ctx();
    const optim_case *c = &cases[9]; /* adamw clip: the reduction matters */
    teeny_optim_params p = case_params(c);
    th_rng ra = th_rng_make(5), rb = th_rng_make(5);
    param_set a, b;
    set_make(ctx, &a, &ra);
    set_make(ctx, &b, &rb);
    teeny_optimizer *oa = set_optimizer(ctx, &a, &p), *ob = set_optimizer(ctx, &b, &p);
    run_steps(ctx, oa, &a, 77, 1, 8, c);
    run_steps(ctx, ob, &b, 77, 1, 8, c);
    ck_assert_msg(sets_equal(&a, &b), "two identical runs differ");
    teeny_optimizer_destroy(oa);
    teeny_optimizer_destroy(ob);
    set_free(&a);
    set_free(&b);
}
END_TEST

/* Checkpoint: copy params and state of a run after k steps into a fresh
 * optimizer, set its step count, continue both: bit-identical. */
START_TEST(test_optim_checkpoint_restore)
{
    static const int which[] = {4, 9};
    const optim_case *c = &cases[which[_i]];
    teeny_ctx *ctx = th_ctx();
    teeny_optim_params p = case_params(c);
    th_rng ra = th_rng_make(8), rb = th_rng_make(9);
    param_set a, b;
    set_make(ctx, &a, &ra);
    set_make(ctx, &b, &rb);
    teeny_optimizer *oa = set_optimizer(ctx, &a, &p), *ob = set_optimizer(ctx, &b, &p);
    run_steps(ctx, oa, &a, 21, 1, 6, c);
    for (int i = 0; i < N_PARAMS; i++) {
        float *x = th_read(a.p[i]);
        TH_OK(ctx, teeny_tensor_write(b.p[i], x, a.n[i]));
        free(x);
    }
    ck_assert_int_eq(teeny_optimizer_state_count(oa), teeny_optimizer_state_count(ob));
    for (int i = 0; i < teeny_optimizer_state_count(oa); i++) {
        const char *na, *nb;
        teeny_tensor *ta, *tb;
        TH_OK(ctx, teeny_optimizer_state(oa, i, &na, &ta));
        TH_OK(ctx, teeny_optimizer_state(ob, i, &nb, &tb));
        ck_assert_str_eq(na, nb);
        float *x = th_read(ta);
        TH_OK(ctx, teeny_tensor_write(tb, x, (size_t)teeny_tensor_numel(ta)));
        free(x);
    }
    TH_OK(ctx, teeny_optimizer_set_steps(ob, teeny_optimizer_steps(oa)));
    ck_assert_int_eq(teeny_optimizer_steps(ob), 6);
    run_steps(ctx, oa, &a, 21, 7, 12, c);
    run_steps(ctx, ob, &b, 21, 7, 12, c);
    ck_assert_msg(sets_equal(&a, &b), "case %s: restored run differs from the original", c->name);
    teeny_optimizer_destroy(oa);
    teeny_optimizer_destroy(ob);
    set_free(&a);
    set_free(&b);
}
END_TEST

/* A warm step only enqueues: no create, build, set-arg, blocking call or
 * host allocation; one scalar write plus one launch per kernel: per
 * parameter for SGD, per teeny__optim_adam_slots parameters for Adam. */
START_TEST(test_optim_step_calls)
{
    static const int which[] = {1, 9};
    const optim_case *c = &cases[which[_i]];
    teeny_ctx *ctx = th_ctx();
    teeny_optim_params p = case_params(c);
    th_rng r = th_rng_make(3);
    param_set s;
    set_make(ctx, &s, &r);
    teeny_optimizer *opt = set_optimizer(ctx, &s, &p);
    for (int k = 0; k < 12; k++) /* every ring slot used once */
        TH_OK(ctx, teeny_optimizer_step(opt, 1e-3f, -1.0f));
    TH_OK(ctx, teeny_ctx_finish(ctx));
    for (int k = 0; k < 3; k++) {
        teeny__calls_reset();
        TH_OK(ctx, teeny_optimizer_step(opt, 1e-3f, 0.8f));
        int slots = teeny__optim_adam_slots(ctx);
        long updates = c->kind == TEENY_OPTIM_SGD ? N_PARAMS : (N_PARAMS + slots - 1) / slots;
        long launches = updates + (c->max_grad_norm > 0 ? N_PARAMS + 1 : 0);
        ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_CREATE), 0);
        ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_BUILD), 0);
        ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_SETARG), 0);
        ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_BLOCKING), 0);
        ck_assert_int_eq(teeny__calls_kind(TEENY__KIND_ALLOC), 0);
        ck_assert_int_eq(teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel), launches);
        ck_assert_int_eq(teeny__calls_id(TEENY__ID_clEnqueueWriteBuffer), 1);
        ck_assert_int_le(teeny__calls_id(TEENY__ID_clGetEventInfo), 1);
    }
    /* a host far ahead of the device still gets correct ordering */
    for (int k = 0; k < 40; k++)
        TH_OK(ctx, teeny_optimizer_step(opt, 1e-3f, -1.0f));
    ck_assert_int_eq(teeny_optimizer_steps(opt), 12 + 3 + 40);
    TH_OK(ctx, teeny_ctx_finish(ctx));
    teeny_optimizer_destroy(opt);
    set_free(&s);
}
END_TEST

/* Fail every hooked call of create + step in turn: each failure is a
 * status, leaks nothing (ASan) and the next clean run works. */
START_TEST(test_optim_faults)
{
    teeny_ctx *ctx = th_ctx();
    const optim_case *c = &cases[9];
    teeny_optim_params p = case_params(c);
    th_rng r = th_rng_make(4);
    param_set s;
    set_make(ctx, &s, &r);
    teeny_optimizer_destroy(set_optimizer(ctx, &s, &p)); /* warm the program cache */
    TH_OK(ctx, teeny_ctx_finish(ctx));
    int fired = 0;
    for (long k = 1; k < 400; k++) {
        teeny_optimizer *opt = NULL;
        teeny__fault_arm(k);
        teeny_status st = teeny_optimizer_create(ctx, &p, N_PARAMS, s.p, (const teeny_tensor *const *)s.g, &opt);
        if (st == TEENY_OK)
            st = teeny_optimizer_step(opt, 1e-3f, -1.0f);
        if (st == TEENY_OK)
            st = teeny_optimizer_step(opt, 1e-3f, -1.0f);
        int f = teeny__fault_fired();
        teeny__fault_arm(0);
        teeny_optimizer_destroy(opt);
        if (!f) {
            ck_assert_msg(st == TEENY_OK, "no fault at k = %ld yet %s", k, teeny_status_name(st));
            break;
        }
        fired++;
        if (st == TEENY_OK)
            continue; /* the injected call was one whose failure is tolerated (a release) */
        ck_assert_msg(st == TEENY_ERR_OPENCL || st == TEENY_ERR_NOMEM, "k = %ld: %s (%s)", k, teeny_status_name(st),
                      teeny_last_error(ctx));
        ck_assert_msg(strlen(teeny_last_error(ctx)) > 0, "k = %ld: no message", k);
    }
    ck_assert_int_gt(fired, 10);
    TH_OK(ctx, teeny_ctx_finish(ctx));
    set_free(&s);
}
END_TEST

/* Where a device limits a work-item's loop trips (Mesa's llvmpipe; forced
 * here with th_loop_limit): clipping's sum of squares over a 40000-element
 * grad (157 rounds of 256; unlimited 20 partials of 8 rounds, each item
 * also running a 25-trip tree) takes more partials (limit 64: 6 rounds an
 * item, 27 partials); the clipped grad and the step meet the reference. A
 * limit without room for one round is TEENY_ERR_UNSUPPORTED at creation. */
/* Adam's batched launches: one optimizer over 19 parameters of sizes
 * around the work-group size, run as the "generic" profile (8 slots at
 * most) with the argument space forced to hold 1, 2, 3 and 8 slots, and as
 * the "cpu" profile (1 slot), against one single-parameter optimizer per
 * parameter (one slot each): the same bits in every parameter and both
 * states after three steps, and ceil(19 / slots) update launches a step. */
START_TEST(test_optim_adam_batches)
{
    enum { N = 19 };
    static const int64_t sizes[N] = {1, 2, 37, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000, 4099, 3, 1, 511, 512, 513};
    static const size_t param_bytes[] = {1, 40 + 2 * 56, 40 + 3 * 56 + 55, 1024, 1024};
    static const char *const rows[] = {"generic", "generic", "generic", "generic", "cpu"};
    static const int want_slots[] = {1, 2, 3, 8, 1};
    /* adamw; adam with clipping that never scales (the clip path, scale 1) */
    static const optim_case *kinds[] = {&cases[8], &cases[10]};
    const int si = _i % 5, ki = _i / 5;
    const optim_case *c = kinds[ki];
    teeny_ctx *ctx = th_ctx();
    size_t saved = ctx->caps.param_bytes;
    teeny_optim_params p = case_params(c);
    teeny_tensor *pa[N], *ga[N], *pb[N], *gb[N];
    teeny_optimizer *all = NULL, *one[N];
    th_rng r = th_rng_make(41);
    TH_OK(ctx, teeny__tune_force(ctx, teeny__tune_find(rows[si])));
    ctx->caps.param_bytes = param_bytes[si];
    ck_assert_int_eq(teeny__optim_adam_slots(ctx), want_slots[si]);
    for (int i = 0; i < N; i++) {
        float *x = th_malloc((size_t)sizes[i] * sizeof *x);
        pa[i] = th_tensor(ctx, 1, &sizes[i]), ga[i] = th_tensor(ctx, 1, &sizes[i]);
        pb[i] = th_tensor(ctx, 1, &sizes[i]), gb[i] = th_tensor(ctx, 1, &sizes[i]);
        th_fill_normal(&r, x, (size_t)sizes[i], 0, 1);
        TH_OK(ctx, teeny_tensor_write(pa[i], x, (size_t)sizes[i]));
        TH_OK(ctx, teeny_tensor_write(pb[i], x, (size_t)sizes[i]));
        th_fill_normal(&r, x, (size_t)sizes[i], 0, 0.5);
        TH_OK(ctx, teeny_tensor_write(ga[i], x, (size_t)sizes[i]));
        TH_OK(ctx, teeny_tensor_write(gb[i], x, (size_t)sizes[i]));
        free(x);
        TH_OK(ctx, teeny_optimizer_create(ctx, &p, 1, &pb[i], (const teeny_tensor *const *)&gb[i], &one[i]));
    }
    TH_OK(ctx, teeny_optimizer_create(ctx, &p, N, pa, (const teeny_tensor *const *)ga, &all));
    ctx->caps.param_bytes = saved;
    TH_OK(ctx, teeny__tune_force(ctx, -1));
    for (int k = 0; k < 3; k++) {
        teeny__calls_reset();
        TH_OK(ctx, teeny_optimizer_step(all, 1e-2f, -1.0f));
        long updates = (N + want_slots[si] - 1) / want_slots[si];
        ck_assert_int_eq(teeny__calls_id(TEENY__ID_clEnqueueNDRangeKernel),
                         updates + (c->max_grad_norm > 0 ? N + 1 : 0));
        for (int i = 0; i < N; i++)
            TH_OK(ctx, teeny_optimizer_step(one[i], 1e-2f, -1.0f));
    }
    for (int i = 0; i < N; i++) {
        teeny_tensor *ta[3] = {pa[i], NULL, NULL}, *tb[3] = {pb[i], NULL, NULL};
        TH_OK(ctx, teeny_optimizer_state(all, 2 * i, NULL, &ta[1]));
        TH_OK(ctx, teeny_optimizer_state(all, 2 * i + 1, NULL, &ta[2]));
        TH_OK(ctx, teeny_optimizer_state(one[i], 0, NULL, &tb[1]));
        TH_OK(ctx, teeny_optimizer_state(one[i], 1, NULL, &tb[2]));
        for (int t = 0; t < 3; t++) {
            float *a = th_read(ta[t]), *b = th_read(tb[t]);
            ck_assert_int_lt(th_first_nonfinite(a, (size_t)sizes[i]), 0);
            ck_assert_msg(!memcmp(a, b, (size_t)sizes[i] * sizeof *a),
                          "%s, %d slots: parameter %d (%lld elements), tensor %d differs from its own optimizer's",
                          c->name, want_slots[si], i, (long long)sizes[i], t);
            free(a);
            free(b);
        }
        teeny_optimizer_destroy(one[i]);
        teeny_tensor_destroy(pa[i]), teeny_tensor_destroy(ga[i]);
        teeny_tensor_destroy(pb[i]), teeny_tensor_destroy(gb[i]);
    }
    teeny_optimizer_destroy(all);
}
END_TEST

START_TEST(test_optim_split_loops)
{
    teeny_ctx *ctx = th_ctx();
    const size_t n = 40000;
    int64_t shape[1] = {(int64_t)n};
    th_rng r = th_rng_make(4711);
    float *p0 = th_malloc(n * 4), *g0 = th_malloc(n * 4);
    th_fill_normal(&r, p0, n, 0, 1);
    th_fill_normal(&r, g0, n, 0, 1);
    teeny_optim_params p = TEENY_OPTIM_PARAMS_INIT;
    p.lr = 0.1f;
    p.max_grad_norm = 2.0f; /* the grad's norm is about 200: clipped */
    ref_optim_hyper h = {0, 0, 0, 0, 0, 0, 0};
    double *rp = th_dbl(p0, n), *rg = th_dbl(g0, n);
    ck_assert(ref_clip_grad_norm(1, &rg, &n, 2.0) < 0.1);
    ref_optim_step(&h, rp, rg, NULL, NULL, n, 0.1, 0, 1);
    int64_t items[2];
    for (int li = 0; li < 2; li++) {
        teeny_tensor *tp = th_tensor_from(ctx, 1, shape, p0), *tg = th_tensor_from(ctx, 1, shape, g0);
        teeny_optimizer *opt = NULL;
        th_loop_limit(li ? 64 : 0);
        TH_OK(ctx, teeny_optimizer_create(ctx, &p, 1, &tp, (const teeny_tensor *const *)&tg, &opt));
        ctx->prog.items_enqueued = 0;
        TH_OK(ctx, teeny_optimizer_step(opt, 0.1f, -1.0f));
        TH_OK(ctx, teeny_ctx_finish(ctx));
        items[li] = ctx->prog.items_enqueued;
        float *x = th_read(tp), *gx = th_read(tg);
        ck_assert_msg(th_first_nonfinite(x, n) < 0 && th_nrms(x, rp, n) <= TOL, "limit %d: param nrms %g",
                      li ? 64 : 0, th_nrms(x, rp, n));
        ck_assert_msg(th_nrms(gx, rg, n) <= TOL, "limit %d: clipped grad nrms %g", li ? 64 : 0, th_nrms(gx, rg, n));
        free(x);
        free(gx);
        teeny_optimizer_destroy(opt);
        teeny_tensor_destroy(tp);
        teeny_tensor_destroy(tg);
    }
    ck_assert_msg(items[1] > items[0], "%lld work-items limited, %lld unlimited: the partials did not change",
                  (long long)items[1], (long long)items[0]);
    /* budget 14 < 15, what one round and the reduction tree of the smallest
     * work-group (TEENY__WG_FLOOR = 16: 13 trips) take, so refused whatever
     * OPT_WG the device gets (50 passed where it got 64: llvmpipe) */
    th_loop_limit(28);
    teeny_tensor *tp = th_tensor_from(ctx, 1, shape, p0), *tg = th_tensor_from(ctx, 1, shape, g0);
    teeny_optimizer *opt = (teeny_optimizer *)&p; /* must come back NULL */
    TH_STATUS(ctx, TEENY_ERR_UNSUPPORTED, teeny_optimizer_create(ctx, &p, 1, &tp, (const teeny_tensor *const *)&tg,
                                                                 &opt));
    ck_assert_ptr_null(opt);
    th_loop_limit(-1);
    teeny_tensor_destroy(tp);
    teeny_tensor_destroy(tg);
    free(p0);
    free(g0);
    free(rp);
    free(rg);
}
END_TEST

START_TEST(test_optim_errors)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(6);
    param_set s;
    teeny_optim_params p = TEENY_OPTIM_PARAMS_INIT, q;
    teeny_optimizer *opt = (teeny_optimizer *)&p;
    const teeny_tensor *const *G;
    set_make(ctx, &s, &r);
    G = (const teeny_tensor *const *)s.g;

    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_optimizer_create(NULL, &p, N_PARAMS, s.p, G, &opt));
    ck_assert_ptr_null(opt);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, NULL, N_PARAMS, s.p, G, &opt));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &p, N_PARAMS, NULL, G, &opt));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &p, N_PARAMS, s.p, NULL, &opt));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &p, N_PARAMS, s.p, G, NULL));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &p, 0, s.p, G, &opt));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &p, -3, s.p, G, &opt));
    ck_assert_ptr_null(opt);

    /* NULL entries, numel mismatch, int32 */
    {
        teeny_tensor *ps[2] = {s.p[0], NULL};
        const teeny_tensor *gs[2] = {s.g[0], s.g[1]};
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &p, 2, ps, gs, &opt));
        ps[1] = s.p[2];
        TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_optimizer_create(ctx, &p, 2, ps, gs, &opt));
        ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "grads[1]"));
        int64_t one = 1;
        teeny_tensor *i32 = NULL;
        TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, &one, &i32));
        gs[1] = s.g[1];
        ps[1] = s.p[1];
        gs[0] = i32;
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &p, 2, ps, gs, &opt));
        teeny_tensor_destroy(i32);
    }
    /* grads aliasing params (exactly or partly), duplicated params/grads */
    {
        teeny_tensor *ps[2] = {s.p[1], s.p[3]}, *view = NULL;
        const teeny_tensor *gs[2] = {s.g[1], s.p[3]};
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &p, 2, ps, gs, &opt));
        ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "overlaps"));
        int64_t n37 = 37;
        TH_OK(ctx, teeny_tensor_view(s.p[3], 100, 1, &n37, &view));
        gs[1] = s.g[3];
        gs[0] = view;
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &p, 2, ps, gs, &opt));
        gs[0] = s.g[1];
        ps[1] = s.p[1];
        ck_assert_int_eq(teeny_tensor_numel(ps[1]), 37);
        gs[1] = s.g[1];
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &p, 2, ps, gs, &opt));
        teeny_tensor_destroy(view);
    }
    /* hyperparameters */
    {
        const struct { float *field; float value; } bad[] = {
            {&q.lr, -1e-3f}, {&q.lr, NAN}, {&q.weight_decay, -0.1f}, {&q.momentum, -0.5f},
            {&q.max_grad_norm, -1.0f}, {&q.max_grad_norm, INFINITY},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            q = p;
            *bad[i].field = bad[i].value;
            TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &q, N_PARAMS, s.p, G, &opt));
        }
        q = p;
        q.nesterov = 1; /* without momentum */
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &q, N_PARAMS, s.p, G, &opt));
        q.momentum = 0.9f;
        q.dampening = 0.1f; /* with dampening */
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &q, N_PARAMS, s.p, G, &opt));
        q = p;
        q.kind = TEENY_OPTIM_ADAM;
        q.beta2 = 1.0f;
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &q, N_PARAMS, s.p, G, &opt));
        q.beta2 = 0.999f;
        q.beta1 = -0.1f;
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &q, N_PARAMS, s.p, G, &opt));
        q.beta1 = 0.9f;
        q.eps = -1e-8f;
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &q, N_PARAMS, s.p, G, &opt));
        q = p;
        q.kind = (teeny_optim_kind)7;
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_create(ctx, &q, N_PARAMS, s.p, G, &opt));
        ck_assert_ptr_null(opt);
    }
    /* step, state and steps errors leave the parameters unchanged */
    {
        q = p;
        q.kind = TEENY_OPTIM_ADAM;
        TH_OK(ctx, teeny_optimizer_create(ctx, &q, N_PARAMS, s.p, G, &opt));
        float *before = th_read(s.p[3]);
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_step(opt, -1e-3f, -1.0f));
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_step(opt, NAN, -1.0f));
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_step(opt, 1e-3f, 1.0f));
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_optimizer_step(NULL, 1e-3f, -1.0f));
        float *after = th_read(s.p[3]);
        ck_assert(!memcmp(before, after, s.n[3] * sizeof(float)));
        ck_assert_int_eq(teeny_optimizer_steps(opt), 0);
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_set_steps(opt, -1));
        /* the step counter at its maximum (a checkpoint may carry any int64):
         * the next step is refused (no signed overflow under UBSan) and
         * changes nothing; one below the maximum still steps */
        free(after);
        TH_OK(ctx, teeny_optimizer_set_steps(opt, INT64_MAX));
        TH_STATUS(ctx, TEENY_ERR_RANGE, teeny_optimizer_step(opt, 1e-3f, -1.0f));
        ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "maximum"));
        ck_assert(teeny_optimizer_steps(opt) == INT64_MAX);
        after = th_read(s.p[3]);
        ck_assert(!memcmp(before, after, s.n[3] * sizeof(float)));
        free(after);
        TH_OK(ctx, teeny_optimizer_set_steps(opt, INT64_MAX - 1));
        TH_OK(ctx, teeny_optimizer_step(opt, 0.0f, -1.0f));
        ck_assert(teeny_optimizer_steps(opt) == INT64_MAX);
        TH_OK(ctx, teeny_optimizer_set_steps(opt, 0));
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_state(opt, -1, NULL, NULL));
        TH_STATUS(ctx, TEENY_ERR_ARG, teeny_optimizer_state(opt, 2 * N_PARAMS, NULL, NULL));
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_optimizer_state(NULL, 0, NULL, NULL));
        ck_assert_int_eq(teeny_optimizer_steps(NULL), -1);
        ck_assert_int_eq(teeny_optimizer_state_count(NULL), 0);
        free(before);
        teeny_optimizer_destroy(opt);
        teeny_optimizer_destroy(NULL);
    }
    set_free(&s);
}
END_TEST

/* Learning-rate schedules at the points their definitions pin down. */
START_TEST(test_optim_schedules)
{
    teeny_lr_schedule s = TEENY_LR_SCHEDULE_INIT;
    double lr, b1, prev = -1;
    s.max_lr = 0.1;
    TH_OK(NULL, teeny_lr_at(&s, 12345, &lr, &b1));
    ck_assert(lr == 0.1 && b1 == -1);

    s.kind = TEENY_LR_STEP;
    s.step_size = 10;
    s.gamma = 0.5;
    TH_OK(NULL, teeny_lr_at(&s, 9, &lr, NULL));
    ck_assert(fabs(lr - 0.1) < 1e-15);
    TH_OK(NULL, teeny_lr_at(&s, 25, &lr, NULL));
    ck_assert(fabs(lr - 0.025) < 1e-15);

    s.kind = TEENY_LR_COSINE;
    s.total_steps = 100;
    s.min_lr = 0.01;
    TH_OK(NULL, teeny_lr_at(&s, 0, &lr, NULL));
    ck_assert(fabs(lr - 0.1) < 1e-15);
    TH_OK(NULL, teeny_lr_at(&s, 50, &lr, NULL));
    ck_assert(fabs(lr - 0.055) < 1e-12);
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_lr_at(&s, 100, &lr, NULL));

    /* OneCycleLR(max_lr 4e-3, total 1000, pct 0.3, div 25, final 1e4) */
    s.kind = TEENY_LR_ONE_CYCLE;
    s.max_lr = 4e-3;
    s.total_steps = 1000;
    TH_OK(NULL, teeny_lr_at(&s, 0, &lr, &b1));
    ck_assert(fabs(lr - 4e-3 / 25) < 1e-15 && fabs(b1 - 0.95) < 1e-15);
    TH_OK(NULL, teeny_lr_at(&s, 299, &lr, &b1)); /* end of phase 1: pct_start * total - 1 */
    ck_assert(fabs(lr - 4e-3) < 1e-15 && fabs(b1 - 0.85) < 1e-15);
    TH_OK(NULL, teeny_lr_at(&s, 999, &lr, &b1));
    ck_assert(fabs(lr - 4e-3 / 25 / 1e4) < 1e-18 && fabs(b1 - 0.95) < 1e-15);
    /* halfway through phase 1 (pct 0.5) lr and beta1 are the means of their
     * ends: total 2010 puts the end of phase 1 at step 602 */
    s.total_steps = 2010;
    TH_OK(NULL, teeny_lr_at(&s, 301, &lr, &b1));
    ck_assert(fabs(lr - (4e-3 / 25 + 4e-3) / 2) < 1e-15 && fabs(b1 - 0.9) < 1e-12);
    for (int64_t k = 0; k < 2010; k++) { /* rises, then falls; beta1 mirrors it */
        double l, m;
        TH_OK(NULL, teeny_lr_at(&s, k, &l, &m));
        if (k > 0 && k <= 602)
            ck_assert(l > prev);
        if (k > 603)
            ck_assert(l < prev);
        ck_assert(m >= 0.85 - 1e-12 && m <= 0.95 + 1e-12);
        prev = l;
    }
    s.cycle_momentum = 0;
    TH_OK(NULL, teeny_lr_at(&s, 5, &lr, &b1));
    ck_assert(b1 == -1);
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_lr_at(&s, -1, &lr, NULL));
    s.pct_start = 1.5;
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_lr_at(&s, 5, &lr, NULL));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_lr_at(NULL, 5, &lr, NULL));
}
END_TEST

/* OneCycleLR for tiny totals, which PyTorch accepts (the example with
 * --train-limit 256 runs 2 steps). Values from PyTorch's get_lr
 * (three_phase=False, cos) evaluated by hand in float64 for max_lr 4e-3,
 * pct_start 0.3, div 25, final_div 1e4, momentum 0.85..0.95: phase 1 ends
 * at 0.3 * total - 1, which is negative for totals 1..3, so every step
 * there is in phase 2 starting from that negative end, e.g. total 2, step
 * 0: pct = 0.4 / 1.4, lr = 1.6e-8 + (4e-3 - 1.6e-8) (cos(2 pi / 7) + 1) / 2. */
START_TEST(test_optim_one_cycle_small)
{
    static const struct { int64_t total, step; double lr, beta1; } want[] = {
        {1, 0, 1.6000000000000001e-08, 0.94999999999999996},
        {2, 0, 0.0032469826157990518, 0.86882550990706331},
        {2, 1, 1.6000000000000001e-08, 0.94999999999999996},
        {3, 0, 0.0039776617418036467, 0.85055845868874358},
        {3, 1, 0.0018505484106679001, 0.90373650467932121},
        {3, 2, 1.6000000000000001e-08, 0.94999999999999996},
        {4, 0, 0.00015999999999999999, 0.94999999999999996},
        {4, 1, 0.0032469826157990518, 0.86882550990706331},
        {4, 2, 0.0011322439928347968, 0.9216941869558779},
        {4, 3, 1.6000000000000001e-08, 0.94999999999999996},
        {5, 0, 0.00015999999999999999, 0.94999999999999996},
        {5, 1, 0.0038019385280538944, 0.85495155660487898},
        {5, 2, 0.0024450480877451566, 0.88887395330218422},
        {5, 3, 0.00075303338420094792, 0.93117449009293662},
        {5, 4, 1.6000000000000001e-08, 0.94999999999999996},
    };
    teeny_lr_schedule s = TEENY_LR_SCHEDULE_INIT;
    double lr, b1;
    s.kind = TEENY_LR_ONE_CYCLE;
    s.max_lr = 4e-3;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        s.total_steps = want[i].total;
        TH_OK(NULL, teeny_lr_at(&s, want[i].step, &lr, &b1));
        ck_assert_msg(fabs(lr - want[i].lr) <= 1e-15 * want[i].lr + 1e-20 && fabs(b1 - want[i].beta1) < 1e-14,
                      "total %lld step %lld: lr %.17g beta1 %.17g, PyTorch %.17g %.17g", (long long)want[i].total,
                      (long long)want[i].step, lr, b1, want[i].lr, want[i].beta1);
    }
    s.total_steps = 2;
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_lr_at(&s, 2, &lr, &b1));
    /* pct_start * total == 1: phase 1 has zero length and step 0 is its end
     * (PyTorch divides 0 by 0 there): the end values, max_lr and base_momentum */
    s.total_steps = 10;
    s.pct_start = 0.1;
    TH_OK(NULL, teeny_lr_at(&s, 0, &lr, &b1));
    ck_assert(lr == 4e-3 && fabs(b1 - 0.85) < 1e-15);
    /* non-finite fields are refused with a message in the context-less slot */
    const double bad[] = {INFINITY, NAN, -1.0};
    for (int k = 0; k < 3; k++) {
        teeny_lr_schedule t = TEENY_LR_SCHEDULE_INIT;
        t.max_lr = bad[k];
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_lr_at(&t, 0, &lr, &b1));
        ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), "teeny_lr_at"));
        t.max_lr = 1e-3;
        t.kind = TEENY_LR_ONE_CYCLE;
        t.total_steps = 10;
        t.div_factor = bad[k];
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_lr_at(&t, 0, &lr, &b1));
        t.div_factor = 25;
        t.pct_start = k == 2 ? 1.5 : bad[k];
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_lr_at(&t, 0, &lr, &b1));
        t.kind = TEENY_LR_STEP;
        t.gamma = bad[k];
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_lr_at(&t, 0, &lr, &b1));
        t.kind = TEENY_LR_COSINE;
        t.min_lr = k == 2 ? NAN : bad[k];
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_lr_at(&t, 0, &lr, &b1));
    }
    /* a success clears the context-less message */
    TH_OK(NULL, teeny_lr_at(&s, 0, &lr, &b1));
    ck_assert_str_eq(teeny_last_error(NULL), "");
}
END_TEST

Suite *suite_optim(void)
{
    Suite *s = suite_create("optim");
    TCase *step = tcase_create("step"), *err = tcase_create("errors");
    tcase_add_loop_test(step, test_optim_vs_reference, 0, N_CASES);
    tcase_add_test(step, test_optim_determinism);
    tcase_add_loop_test(step, test_optim_checkpoint_restore, 0, 2);
    tcase_add_loop_test(step, test_optim_step_calls, 0, 2);
    tcase_add_test(step, test_optim_schedules);
    tcase_add_test(step, test_optim_one_cycle_small);
    tcase_add_test(step, test_optim_split_loops);
    tcase_add_loop_test(step, test_optim_adam_batches, 0, 10);
    tcase_add_test(err, test_optim_errors);
    tcase_add_test(err, test_optim_faults);
    suite_add_tcase(s, step);
    suite_add_tcase(s, err);
    return s;
}
