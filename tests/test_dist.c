/*
 * test_dist.c -- the MPI test program (include/teenycl_dist.h), run under
 * mpirun by tests/test_dist.sh with 1, 2 and 3 ranks on the default device.
 * Not a check suite: MPI owns the process, and the default test binary
 * stays MPI-free. Each mode prints "rank R: MODE: ok ..." lines or
 * "rank R: MODE: FAIL ..." and exits non-zero on a failure.
 *
 *   grads        local_shards 1: the all-reduced gradient of R shards of a
 *                global batch of 12 equals this process's own full-batch
 *                gradient (a plan for batch 12) within 1e-6 normalized RMS;
 *                every rank holds the same bits; with R > 1 the shard's own
 *                gradient differs from the full one (the exchange did work).
 *                Net without batch norm (per-shard statistics would differ).
 *   train FILE   20 AdamW steps over 6 global shards of 2 samples (conv ->
 *                batch norm -> ReLU -> linear -> cross-entropy), fresh data
 *                each step; every rank's weights have the same bits, are
 *                finite and moved; rank 0 writes them to FILE. The script
 *                compares FILE across 1, 2 and 3 ranks with cmp.
 *   fault        the last rank's third step fails (injected: no shard
 *                added, an error status passed): every rank's all-reduce
 *                returns TEENY_ERR_STATE with the gradients unchanged, and
 *                the next step succeeds everywhere.
 *   stall SECS   the last rank arrives SECS seconds late with a 2 s
 *                deadline: every other rank returns TEENY_ERR_IO between 2 s
 *                and SECS s, and every rank returns an error.
 *   crash        the last rank exits (without MPI_Finalize) in the middle
 *                of step 1 while the others wait in the all-reduce: the
 *                script checks that mpirun ends the job, non-zero, in time.
 *   syncbn       SyncBatchNorm: ranks hold 6, {2, 4} or {1, 2, 3} of a batch
 *                of 6 [6, 3, 5, 5]; y, dx (this rank's rows), save_mean,
 *                save_rstd, the running statistics, and dweight / dbias
 *                summed over ranks equal single-process batch norm on the
 *                whole batch within 1e-6 normalized RMS; then the last rank
 *                passes a NULL x: it returns TEENY_ERR_ARG, every other rank
 *                TEENY_ERR_STATE, running statistics unchanged everywhere.
 *   errors       argument checks: NULLs, a rank passing a different
 *                local_shards or its grads in another order
 *                (TEENY_ERR_SHAPE on every rank), an add past
 *                local_shards (TEENY_ERR_STATE), {local_rank} substitution,
 *                teeny_dist_broadcast (the root's values everywhere; a rank
 *                with another tensor count fails every rank), and the
 *                exchange on plain tensors with known values (1, 70, 2
 *                floats, 2 local shards: buckets smaller than the rank
 *                count) against the host's fixed-order mean, bit for bit.
 *   mismatch     2+ ranks, the last one out of step: sum_f64 against
 *                broadcast, SyncBatchNorm forward against backward, an
 *                all-reduce against batch norm: every rank returns
 *                TEENY_ERR_IO ("out of step") at once, no abort, and the
 *                broken dist refuses the next call; all-reduces of
 *                exchangers of different layouts: TEENY_ERR_SHAPE
 *                everywhere, the dist still usable; teeny_dist_check_same
 *                of equal, other and shorter bytes, and NULL.
 *   faults       one rank: every OpenCL call and host allocation that the
 *                dist operations make (grads create/add/all-reduce,
 *                sum_f64, broadcast, SyncBatchNorm forward and backward;
 *                the library's calls beneath them too) fails once, in
 *                turn: each failure is a status with a message, and the
 *                operations then succeed with the clean run's bits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "teenycl_dist.h"
#include "core/clwrap.h" /* the fault injector: faults mode */

#define GLOBAL_BATCH 12
#define C_IN 3
#define HW 6
#define C_MID 4
#define CLASSES 5
#define SHARDS 6 /* train: global shards, divisible by 1, 2 and 3 */

static int rank_ = -1, fails_;

#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        if (!(cond)) {                                                               \
            printf("rank %d: %s: FAIL line %d: ", rank_, mode_, __LINE__);           \
            printf(__VA_ARGS__);                                                     \
            printf("\n");                                                            \
            fflush(stdout);                                                          \
            fails_++;                                                                \
        }                                                                            \
    } while (0)

#define TRY(call)                                                                               \
    do {                                                                                        \
        teeny_status st_ = (call);                                                              \
        if (st_ != TEENY_OK) {                                                                  \
            printf("rank %d: %s: FAIL line %d: %s: %s | %s | %s\n", rank_, mode_, __LINE__,     \
                   teeny_status_name(st_), #call, teeny_last_error(ctx), teeny_dist_last_error(d)); \
            fflush(stdout);                                                                     \
            fails_++;                                                                           \
            goto done;                                                                          \
        }                                                                                       \
    } while (0)

static const char *mode_ = "?";

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

/* The global batch of a step, the same on every rank. */
static void make_batch(uint64_t seed, int step, float *x, int32_t *y)
{
    uint64_t s = seed * 1000003u + (uint64_t)step;
    for (int i = 0; i < GLOBAL_BATCH * C_IN * HW * HW; i++)
        x[i] = (float)(2.0 * uniform(&s) - 1.0);
    for (int i = 0; i < GLOBAL_BATCH; i++)
        y[i] = (int32_t)(rng_next(&s) % CLASSES);
}

typedef struct {
    teeny_graph *g;
    teeny_node x, y, loss;
} net;

static teeny_status build(teeny_ctx *ctx, int bn, net *n)
{
    int64_t xs[4] = {-1, C_IN, HW, HW};
    teeny_conv2d_params cp = TEENY_CONV2D_PARAMS_INIT;
    teeny_node h, f, logits;
    teeny_status st;
    cp.pad[0] = cp.pad[1] = 1;
    if ((st = teeny_graph_create(ctx, 7, &n->g)) != TEENY_OK || (st = teeny_graph_input(n->g, "x", 4, xs, &n->x)) ||
        (st = teeny_graph_labels(n->g, "y", &n->y)) ||
        (st = teeny_graph_conv2d(n->g, "conv", n->x, C_MID, 3, 3, &cp, 1, &h)))
        return st;
    if (bn && (st = teeny_graph_batchnorm(n->g, "bn", h, 0.1f, 1e-5f, &h)))
        return st;
    if ((st = teeny_graph_activation(n->g, "act", h, TEENY_ACT_RELU, &h)) ||
        (st = teeny_graph_flatten(n->g, "flat", h, &f)) || (st = teeny_graph_linear(n->g, "fc", f, CLASSES, 1, &logits)) ||
        (st = teeny_graph_softmax_cross_entropy(n->g, "loss", logits, n->y, &n->loss)))
        return st;
    return TEENY_OK;
}

static teeny_status compile(net *n, int64_t batch, teeny_plan **plan)
{
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = batch;
    pp.training = 1;
    pp.loss = n->loss;
    return teeny_graph_compile(n->g, &pp, plan);
}

/* Write samples [first, first + count) of the global batch and run forward + backward. */
static teeny_status run_shard(teeny_plan *plan, const net *n, const float *x, const int32_t *y, int first, int count)
{
    teeny_tensor *tx, *ty;
    teeny_status st;
    const size_t per = C_IN * HW * HW;
    if ((st = teeny_plan_tensor(plan, n->x, &tx)) || (st = teeny_plan_tensor(plan, n->y, &ty)) ||
        (st = teeny_tensor_write(tx, x + (size_t)first * per, (size_t)count * per)) ||
        (st = teeny_tensor_write_i32(ty, y + first, (size_t)count)) || (st = teeny_plan_forward(plan)))
        return st;
    return teeny_plan_backward(plan);
}

/* All of the graph's gradients (or values) into one host array. */
static teeny_status read_all(const net *n, int grads, float *out, size_t *total)
{
    size_t at = 0;
    for (int i = 0; i < teeny_graph_param_count(n->g); i++) {
        teeny_tensor *v, *gr;
        teeny_status st = teeny_graph_param(n->g, i, NULL, &v, &gr);
        if (st)
            return st;
        teeny_tensor *t = grads ? gr : v;
        size_t m = (size_t)teeny_tensor_numel(t);
        if (out && (st = teeny_tensor_read(t, out + at, m)))
            return st;
        at += m;
    }
    *total = at;
    return TEENY_OK;
}

static teeny_status grad_tensors(const net *n, teeny_tensor ***grads, teeny_tensor ***params, int *count)
{
    int np = teeny_graph_param_count(n->g);
    *grads = malloc((size_t)np * sizeof **grads);
    *params = malloc((size_t)np * sizeof **params);
    if (!*grads || !*params)
        return TEENY_ERR_NOMEM;
    for (int i = 0; i < np; i++) {
        teeny_status st = teeny_graph_param(n->g, i, NULL, &(*params)[i], &(*grads)[i]);
        if (st)
            return st;
    }
    *count = np;
    return TEENY_OK;
}

static uint64_t hash_floats(const float *v, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = (const unsigned char *)v;
    for (size_t i = 0; i < n * sizeof(float); i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* Every rank holds the same hash? */
static int same_everywhere(teeny_dist *d, uint64_t h)
{
    double mine[2] = {(double)(h >> 32), (double)(h & 0xffffffffu)}, sum[2];
    int size = teeny_dist_size(d);
    if (teeny_dist_sum_f64(d, mine, sum, 2) != TEENY_OK)
        return 0;
    return sum[0] == mine[0] * size && sum[1] == mine[1] * size;
}

static double nrms(const float *out, const float *ref, size_t n)
{
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)out[i] - ref[i]) * ((double)out[i] - ref[i]);
        r += (double)ref[i] * ref[i];
    }
    double floor_ = 1e-6 * sqrt((double)n);
    return sqrt(e) / (sqrt(r) > floor_ ? sqrt(r) : floor_);
}

static int mode_grads(teeny_dist *d, teeny_ctx *ctx)
{
    net n = {0};
    teeny_plan *full = NULL, *shard = NULL;
    teeny_dist_grads *dg = NULL;
    teeny_tensor **grads = NULL, **params = NULL;
    int np = 0, R = teeny_dist_size(d), r = teeny_dist_rank(d);
    float x[GLOBAL_BATCH * C_IN * HW * HW], *ref = NULL, *got = NULL, *own = NULL;
    int32_t y[GLOBAL_BATCH];
    size_t total = 0;
    if (GLOBAL_BATCH % R) {
        CHECK(0, "%d ranks do not divide the global batch %d", R, GLOBAL_BATCH);
        return 1;
    }
    int b = GLOBAL_BATCH / R;
    make_batch(11, 0, x, y);
    TRY(build(ctx, 0, &n));
    TRY(compile(&n, GLOBAL_BATCH, &full));
    TRY(compile(&n, b, &shard));
    TRY(grad_tensors(&n, &grads, &params, &np));
    TRY(read_all(&n, 1, NULL, &total));
    ref = malloc(total * sizeof *ref);
    got = malloc(total * sizeof *got);
    own = malloc(total * sizeof *own);
    CHECK(ref && got && own, "out of memory");
    if (!ref || !got || !own)
        goto done;
    TRY(teeny_dist_grads_create(d, ctx, np, grads, 1, &dg));
    CHECK(teeny_dist_grads_numel(dg) == (int64_t)total, "numel %lld, expected %zu",
          (long long)teeny_dist_grads_numel(dg), total);
    /* the single-process gradient of the concatenated batch */
    TRY(run_shard(full, &n, x, y, 0, GLOBAL_BATCH));
    TRY(read_all(&n, 1, ref, &total));
    /* this rank's shard, then the exchange */
    TRY(run_shard(shard, &n, x, y, r * b, b));
    TRY(read_all(&n, 1, own, &total));
    TRY(teeny_dist_grads_add(dg));
    TRY(teeny_dist_grads_allreduce(dg, TEENY_OK));
    TRY(read_all(&n, 1, got, &total));
    double e = nrms(got, ref, total), e_own = nrms(own, ref, total);
    int finite = 1;
    for (size_t i = 0; i < total; i++)
        finite &= isfinite(got[i]) != 0;
    CHECK(finite, "non-finite averaged gradient");
    CHECK(e <= 1e-6, "averaged gradient vs full-batch gradient: nrms %.3g > 1e-6", e);
    if (R > 1)
        CHECK(e_own > 1e-3, "the shard's own gradient is already the full one (nrms %.3g): the test shows nothing",
              e_own);
    CHECK(same_everywhere(d, hash_floats(got, total)), "ranks hold different averaged gradients");
    if (!fails_)
        printf("rank %d: grads: ok %d ranks, %zu gradient floats in %d bucket(s), nrms %.3g vs full batch "
               "(own shard %.3g) on %s\n", r, R, total, teeny_dist_grads_buckets(dg), e, e_own,
               teeny_ctx_device_name(ctx));
done:
    teeny_dist_grads_destroy(dg);
    free(grads);
    free(params);
    free(ref);
    free(got);
    free(own);
    teeny_plan_destroy(full);
    teeny_plan_destroy(shard);
    teeny_graph_destroy(n.g);
    return fails_ != 0;
}

/* steps of AdamW over SHARDS shards; fault_step >= 0: the last rank fails that step */
static int mode_train(teeny_dist *d, teeny_ctx *ctx, const char *path, int steps, int fault_step, double stall_s)
{
    net n = {0};
    teeny_plan *plan = NULL;
    teeny_dist_grads *dg = NULL;
    teeny_optimizer *opt = NULL;
    teeny_tensor **grads = NULL, **params = NULL;
    int np = 0, R = teeny_dist_size(d), r = teeny_dist_rank(d);
    float x[GLOBAL_BATCH * C_IN * HW * HW], *w0 = NULL, *w = NULL, *before = NULL, *after = NULL;
    int32_t y[GLOBAL_BATCH];
    size_t total = 0;
    if (SHARDS % R) {
        CHECK(0, "%d ranks do not divide %d shards", R, SHARDS);
        return 1;
    }
    const int L = SHARDS / R, b = GLOBAL_BATCH / SHARDS;
    teeny_optim_params op = TEENY_OPTIM_PARAMS_INIT;
    op.kind = TEENY_OPTIM_ADAMW;
    op.lr = 1e-2f;
    op.weight_decay = 1e-2f;
    TRY(build(ctx, 1, &n));
    TRY(compile(&n, b, &plan));
    TRY(grad_tensors(&n, &grads, &params, &np));
    TRY(teeny_optimizer_create(ctx, &op, np, params, (const teeny_tensor *const *)grads, &opt));
    TRY(teeny_dist_grads_create(d, ctx, np, grads, L, &dg));
    TRY(read_all(&n, 0, NULL, &total));
    w0 = malloc(total * sizeof *w0);
    w = malloc(total * sizeof *w);
    before = malloc(total * sizeof *before);
    after = malloc(total * sizeof *after);
    CHECK(w0 && w && before && after, "out of memory");
    if (!w0 || !w || !before || !after)
        goto done;
    TRY(read_all(&n, 0, w0, &total));
    for (int step = 0; step < steps; step++) {
        teeny_status local = TEENY_OK;
        make_batch(23, step, x, y);
        int injected = step == fault_step && r == R - 1;
        for (int k = 0; k < L && !injected; k++) {
            TRY(run_shard(plan, &n, x, y, (r * L + k) * b, b));
            TRY(teeny_dist_grads_add(dg));
        }
        if (injected)
            local = TEENY_ERR_OPENCL; /* as if this rank's device had failed */
        if (step == fault_step)
            TRY(read_all(&n, 1, before, &total));
        if (stall_s < 0 && step == 1 && r == R - 1) {
            printf("rank %d: crash: exiting in the middle of step 1\n", r);
            fflush(stdout);
            _exit(3); /* a rank that dies: mpirun must end the others */
        }
        if (stall_s > 0 && step == 1 && r == R - 1) {
            struct timespec ts = {(time_t)stall_s, 0};
            nanosleep(&ts, NULL);
        }
        double t0 = MPI_Wtime();
        teeny_status st = teeny_dist_grads_allreduce(dg, local);
        double waited = MPI_Wtime() - t0;
        char first_err[1024];
        snprintf(first_err, sizeof first_err, "%s", teeny_dist_last_error(d));
        if (stall_s > 0 && step == 1) {
            if (r != R - 1) {
                CHECK(st == TEENY_ERR_IO, "stall: expected TEENY_ERR_IO, got %s (%s)", teeny_status_name(st),
                      teeny_dist_last_error(d));
                CHECK(waited >= 1.9 && waited < stall_s, "stall: returned after %.2f s, expected 2 .. %.0f s", waited,
                      stall_s);
            } else {
                CHECK(st != TEENY_OK, "stall: the late rank's all-reduce succeeded");
            }
            /* a broken dist refuses at once */
            teeny_status again = teeny_dist_grads_allreduce(dg, TEENY_OK);
            CHECK(st == TEENY_OK || again == TEENY_ERR_STATE, "stall: after the failure: %s", teeny_status_name(again));
            if (!fails_)
                printf("rank %d: stall: ok %s after %.2f s: %s\n", r, teeny_status_name(st), waited, first_err);
            goto done;
        }
        if (step == fault_step) {
            CHECK(st == TEENY_ERR_STATE, "fault: expected TEENY_ERR_STATE, got %s (%s)", teeny_status_name(st),
                  teeny_dist_last_error(d));
            CHECK(strstr(teeny_dist_last_error(d), "failed this step") != NULL, "fault: message: %s",
                  teeny_dist_last_error(d));
            TRY(read_all(&n, 1, after, &total));
            CHECK(!memcmp(before, after, total * sizeof *after), "fault: gradients changed by a failed all-reduce");
            if (!fails_)
                printf("rank %d: fault: step %d refused as expected: %s: %s\n", r, step, teeny_status_name(st), teeny_dist_last_error(d));
            continue; /* no optimizer step; the next step must work again */
        }
        TRY(st);
        TRY(teeny_optimizer_step(opt, op.lr, -1.0f));
    }
    TRY(read_all(&n, 0, w, &total));
    int finite = 1;
    for (size_t i = 0; i < total; i++)
        finite &= isfinite(w[i]) != 0;
    CHECK(finite, "non-finite weights");
    CHECK(nrms(w, w0, total) > 1e-3, "weights did not move (nrms %.3g)", nrms(w, w0, total));
    uint64_t h = hash_floats(w, total);
    CHECK(same_everywhere(d, h), "ranks hold different weights");
    if (path && r == 0) {
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(w, sizeof *w, total, f) == total, "cannot write %s", path);
        if (f)
            fclose(f);
    }
    if (!fails_)
        printf("rank %d: %s: ok %d ranks x %d shards of %d, %d steps, weights hash %016llx\n", r, mode_, R, L, b, steps,
               (unsigned long long)h);
done:
    teeny_dist_grads_destroy(dg);
    teeny_optimizer_destroy(opt);
    free(grads);
    free(params);
    free(w0);
    free(w);
    free(before);
    free(after);
    teeny_plan_destroy(plan);
    teeny_graph_destroy(n.g);
    return fails_ != 0;
}

#define BN_B 6
#define BN_C 3
#define BN_HW 25

static teeny_status vec(teeny_ctx *ctx, const float *v, teeny_tensor **t)
{
    int64_t c = BN_C;
    teeny_status st = teeny_tensor_create(ctx, 1, &c, t);
    return st ? st : teeny_tensor_write(*t, v, BN_C);
}

static int mode_syncbn(teeny_dist *d, teeny_ctx *ctx)
{
    static const int split[3][3] = {{6}, {2, 4}, {1, 2, 3}};
    int R = teeny_dist_size(d), r = teeny_dist_rank(d);
    if (R > 3) {
        CHECK(0, "syncbn runs on 1 to 3 ranks");
        return 1;
    }
    int first = 0, mine = split[R - 1][r];
    for (int k = 0; k < r; k++)
        first += split[R - 1][k];
    const size_t per = BN_C * BN_HW, total = BN_B * per;
    float x[BN_B * BN_C * BN_HW], dy[BN_B * BN_C * BN_HW], w[BN_C], b[BN_C], rm0[BN_C], rv0[BN_C];
    float ref_y[BN_B * BN_C * BN_HW], ref_dx[BN_B * BN_C * BN_HW], got[BN_B * BN_C * BN_HW];
    float ref_vec[6][BN_C], got_vec[6][BN_C];
    uint64_t s = 99;
    for (size_t i = 0; i < total; i++) {
        int c = (int)(i / BN_HW % BN_C);
        x[i] = (float)(0.5 * c + (1.0 + c) * (2.0 * uniform(&s) - 1.0));
        dy[i] = (float)(2.0 * uniform(&s) - 1.0);
    }
    for (int c = 0; c < BN_C; c++) {
        w[c] = (float)(0.5 + uniform(&s));
        b[c] = (float)(uniform(&s) - 0.5);
        rm0[c] = (float)(0.1 * c);
        rv0[c] = (float)(1.0 + 0.2 * c);
    }
    teeny_tensor *t[16] = {0}; /* x, dy, w, b, rm, rv, y, mean, rstd, dx, dw, db, then the local ones */
    teeny_tensor *lx = NULL, *ldy = NULL, *ly = NULL, *ldx = NULL;
    int64_t full_shape[4] = {BN_B, BN_C, 5, 5}, local_shape[4] = {mine, BN_C, 5, 5};
    /* the single-process reference on the whole batch */
    TRY(teeny_tensor_create(ctx, 4, full_shape, &t[0]));
    TRY(teeny_tensor_create(ctx, 4, full_shape, &t[1]));
    TRY(teeny_tensor_write(t[0], x, total));
    TRY(teeny_tensor_write(t[1], dy, total));
    TRY(vec(ctx, w, &t[2]));
    TRY(vec(ctx, b, &t[3]));
    TRY(vec(ctx, rm0, &t[4]));
    TRY(vec(ctx, rv0, &t[5]));
    TRY(teeny_tensor_create(ctx, 4, full_shape, &t[6]));
    TRY(teeny_tensor_create(ctx, 4, full_shape, &t[9]));
    for (int k = 7; k < 12; k++)
        if (k != 9)
            TRY(vec(ctx, rm0, &t[k]));
    TRY(teeny_batchnorm_forward_train(ctx, t[0], t[2], t[3], t[4], t[5], 0.1f, 1e-5f, t[6], t[7], t[8]));
    TRY(teeny_batchnorm_backward_train(ctx, t[0], t[1], t[2], t[7], t[8], t[9], t[10], t[11]));
    TRY(teeny_tensor_read(t[6], ref_y, total));
    TRY(teeny_tensor_read(t[9], ref_dx, total));
    {
        const int idx[6] = {7, 8, 4, 5, 10, 11}; /* mean, rstd, running mean, running var, dweight, dbias */
        for (int k = 0; k < 6; k++)
            TRY(teeny_tensor_read(t[idx[k]], ref_vec[k], BN_C));
    }
    /* this rank's rows through SyncBatchNorm, fresh running statistics */
    TRY(teeny_tensor_create(ctx, 4, local_shape, &lx));
    TRY(teeny_tensor_create(ctx, 4, local_shape, &ldy));
    TRY(teeny_tensor_create(ctx, 4, local_shape, &ly));
    TRY(teeny_tensor_create(ctx, 4, local_shape, &ldx));
    TRY(teeny_tensor_write(lx, x + (size_t)first * per, (size_t)mine * per));
    TRY(teeny_tensor_write(ldy, dy + (size_t)first * per, (size_t)mine * per));
    TRY(teeny_tensor_fill(ly, NAN));
    TRY(teeny_tensor_fill(ldx, NAN));
    TRY(teeny_tensor_write(t[4], rm0, BN_C));
    TRY(teeny_tensor_write(t[5], rv0, BN_C));
    for (int k = 7; k < 12; k++)
        if (k != 9)
            TRY(teeny_tensor_fill(t[k], NAN));
    TRY(teeny_dist_batchnorm_forward_train(d, ctx, lx, t[2], t[3], t[4], t[5], 0.1f, 1e-5f, ly, t[7], t[8]));
    TRY(teeny_dist_batchnorm_backward_train(d, ctx, lx, ldy, t[2], t[7], t[8], 1e-5f, ldx, t[10], t[11]));
    double worst = 0;
    TRY(teeny_tensor_read(ly, got, (size_t)mine * per));
    double e = nrms(got, ref_y + (size_t)first * per, (size_t)mine * per);
    CHECK(e <= 1e-6, "y: nrms %.3g", e);
    worst = e > worst ? e : worst;
    TRY(teeny_tensor_read(ldx, got, (size_t)mine * per));
    e = nrms(got, ref_dx + (size_t)first * per, (size_t)mine * per);
    CHECK(e <= 1e-6, "dx: nrms %.3g", e);
    worst = e > worst ? e : worst;
    {
        const int idx[6] = {7, 8, 4, 5, 10, 11};
        const char *names[6] = {"save_mean", "save_rstd", "running_mean", "running_var", "sum of dweight",
                                "sum of dbias"};
        for (int k = 0; k < 6; k++) {
            TRY(teeny_tensor_read(t[idx[k]], got_vec[k], BN_C));
            if (k >= 4) { /* this rank's sums: add them up over the ranks */
                double in[BN_C], out[BN_C];
                for (int c = 0; c < BN_C; c++)
                    in[c] = got_vec[k][c];
                TRY(teeny_dist_sum_f64(d, in, out, BN_C));
                for (int c = 0; c < BN_C; c++)
                    got_vec[k][c] = (float)out[c];
            }
            e = nrms(got_vec[k], ref_vec[k], BN_C);
            CHECK(e <= 1e-6, "%s: nrms %.3g", names[k], e);
            worst = e > worst ? e : worst;
        }
    }
    if (R > 1) { /* the rank's own statistics would be far off: the exchange did work */
        float own_mean[BN_C];
        double m[BN_C] = {0};
        for (int i = 0; i < mine * BN_C * BN_HW; i++)
            m[i / BN_HW % BN_C] += x[(size_t)first * per + (size_t)i];
        for (int c = 0; c < BN_C; c++)
            own_mean[c] = (float)(m[c] / (mine * BN_HW));
        CHECK(nrms(own_mean, ref_vec[0], BN_C) > 1e-3, "this rank's own mean equals the global one: shows nothing");
    }
    /* a failing rank: everyone returns an error, running statistics unchanged */
    {
        float before[2][BN_C], after[2][BN_C];
        TRY(teeny_tensor_read(t[4], before[0], BN_C));
        TRY(teeny_tensor_read(t[5], before[1], BN_C));
        teeny_status st = teeny_dist_batchnorm_forward_train(d, ctx, r == R - 1 ? NULL : lx, t[2], t[3], t[4], t[5],
                                                             0.1f, 1e-5f, ly, t[7], t[8]);
        teeny_status want = r == R - 1 ? TEENY_ERR_ARG : TEENY_ERR_STATE;
        CHECK(st == want, "injected failure: %s, expected %s (%s)", teeny_status_name(st), teeny_status_name(want),
              teeny_dist_last_error(d));
        TRY(teeny_tensor_read(t[4], after[0], BN_C));
        TRY(teeny_tensor_read(t[5], after[1], BN_C));
        CHECK(!memcmp(before, after, sizeof before), "running statistics changed by a failed call");
    }
    if (!fails_)
        printf("rank %d: syncbn: ok %d of %d rows, worst nrms %.3g vs single-process batch norm\n", r, mine, BN_B,
               worst);
done:
    for (int k = 0; k < 16; k++)
        teeny_tensor_destroy(t[k]);
    teeny_tensor_destroy(lx);
    teeny_tensor_destroy(ldy);
    teeny_tensor_destroy(ly);
    teeny_tensor_destroy(ldx);
    return fails_ != 0;
}

static int mode_errors(teeny_dist *d, teeny_ctx *ctx)
{
    net n = {0};
    teeny_plan *plan = NULL;
    teeny_dist_grads *dg = NULL;
    teeny_tensor **grads = NULL, **params = NULL;
    int np = 0, r = teeny_dist_rank(d), R = teeny_dist_size(d);
    char buf[64];
    TRY(build(ctx, 0, &n));
    TRY(compile(&n, 2, &plan));
    TRY(grad_tensors(&n, &grads, &params, &np));
    /* local argument checks */
    CHECK(teeny_dist_create(MPI_COMM_NULL, NULL, &(teeny_dist *){NULL}) == TEENY_ERR_ARG, "MPI_COMM_NULL accepted");
    CHECK(teeny_dist_create(MPI_COMM_WORLD, NULL, NULL) == TEENY_ERR_ARG, "NULL out accepted");
    teeny_dist_params bad = TEENY_DIST_PARAMS_INIT;
    bad.timeout_s = -1;
    CHECK(teeny_dist_create(MPI_COMM_WORLD, &bad, &(teeny_dist *){NULL}) == TEENY_ERR_ARG, "negative timeout accepted");
    CHECK(teeny_dist_grads_add(NULL) == TEENY_ERR_ARG, "NULL dg accepted");
    CHECK(teeny_dist_sum_f64(d, NULL, NULL, 1) == TEENY_ERR_ARG, "NULL sum arrays accepted");
    {
        double in[2] = {1.0 + r, 2.0 * r}, out[2];
        teeny_status st = teeny_dist_sum_f64(d, in, out, 2);
        CHECK(st == TEENY_OK && out[0] == R + R * (R - 1) / 2.0 && out[1] == R * (R - 1.0), "sum_f64: %s %g %g",
              teeny_status_name(st), out[0], out[1]);
        st = teeny_dist_sum_f64(d, in, out, r == R - 1 && R > 1 ? 1 : 2); /* one rank sums fewer values */
        CHECK(st == (R > 1 ? TEENY_ERR_SHAPE : TEENY_OK), "sum_f64 of different counts: %s", teeny_status_name(st));
        st = teeny_dist_sum_f64(d, in, out, r == 0 ? 0 : 2); /* one rank passes n = 0 */
        CHECK(st == TEENY_ERR_ARG, "sum_f64 with n = 0 on rank 0: %s", teeny_status_name(st));
    }
    CHECK(teeny_dist_rank(NULL) == -1 && teeny_dist_size(NULL) == -1, "NULL dist queries");
    CHECK(teeny_dist_device_spec(d, "{local_rank}:x{rank}", buf, sizeof buf) == TEENY_OK, "spec: %s",
          teeny_dist_last_error(d));
    char want[64];
    snprintf(want, sizeof want, "%d:x%d", teeny_dist_local_rank(d), r);
    CHECK(!strcmp(buf, want), "spec \"%s\", expected \"%s\"", buf, want);
    CHECK(teeny_dist_device_spec(d, "{local_rank}{local_rank}{local_rank}", buf, 3) == TEENY_ERR_RANGE,
          "a spec past cap accepted");
    /* collective checks: one rank disagrees, every rank fails */
    if (R > 1) {
        teeny_status st = teeny_dist_grads_create(d, ctx, np, grads, r == R - 1 ? 2 : 1, &dg);
        CHECK(st == TEENY_ERR_SHAPE && !dg, "different local_shards: %s", teeny_status_name(st));
        st = teeny_dist_grads_create(d, ctx, r == 0 ? 0 : np, grads, 1, &dg);
        CHECK(st == TEENY_ERR_ARG && !dg, "n = 0 on rank 0: %s", teeny_status_name(st));
        /* the same total in another order: the bucket layouts would differ */
        teeny_tensor *rev[16];
        for (int i = 0; i < np && np <= 16; i++)
            rev[i] = grads[r == R - 1 ? np - 1 - i : i];
        st = teeny_dist_grads_create(d, ctx, np, rev, 1, &dg);
        CHECK(st == TEENY_ERR_SHAPE && !dg, "grads in another order on one rank: %s", teeny_status_name(st));
    }
    /* broadcast: every rank ends with the root's (the last rank's) values */
    {
        int64_t shape[2][1] = {{3}, {5}};
        teeny_tensor *bt[2] = {NULL, NULL};
        float v[8], want_v[8], got_v[8];
        for (int i = 0; i < 8; i++) {
            v[i] = (float)(100 * r + i);
            want_v[i] = (float)(100 * (R - 1) + i);
        }
        TRY(teeny_tensor_create(ctx, 1, shape[0], &bt[0]));
        TRY(teeny_tensor_create(ctx, 1, shape[1], &bt[1]));
        TRY(teeny_tensor_write(bt[0], v, 3));
        TRY(teeny_tensor_write(bt[1], v + 3, 5));
        teeny_status st = teeny_dist_broadcast(d, ctx, R - 1, 2, bt);
        CHECK(st == TEENY_OK, "broadcast: %s (%s)", teeny_status_name(st), teeny_dist_last_error(d));
        if (st == TEENY_OK) {
            TRY(teeny_tensor_read(bt[0], got_v, 3));
            TRY(teeny_tensor_read(bt[1], got_v + 3, 5));
            CHECK(!memcmp(got_v, want_v, sizeof(float) * 8), "broadcast: rank %d does not hold the root's values", r);
        }
        /* one rank with one tensor fewer: every rank fails */
        st = teeny_dist_broadcast(d, ctx, 0, r == R - 1 && R > 1 ? 1 : 2, bt);
        CHECK(R == 1 ? st == TEENY_OK : st == TEENY_ERR_SHAPE, "broadcast of different counts: %s",
              teeny_status_name(st));
        CHECK(teeny_dist_broadcast(d, ctx, R, 2, bt) == TEENY_ERR_ARG, "broadcast from a root that is no rank");
        teeny_tensor_destroy(bt[0]);
        teeny_tensor_destroy(bt[1]);
    }
    /* plain tensors of 1, 70 and 2 floats (buckets of 2, 70 and 1 floats at
     * 64 floats per bucket: chunks of 0 floats on 3 ranks), 2 local shards
     * with known values: the mean is the host's double sum in global shard
     * order, bit for bit */
    {
        int64_t sizes[3] = {1, 70, 2};
        teeny_tensor *gt[3] = {NULL, NULL, NULL};
        teeny_dist_grads *small = NULL;
        float v[70], got_v[70];
        int ok_all = 1;
        for (int i = 0; i < 3; i++)
            TRY(teeny_tensor_create(ctx, 1, &sizes[i], &gt[i]));
        TRY(teeny_dist_grads_create(d, ctx, 3, gt, 2, &small));
        CHECK(teeny_dist_grads_buckets(small) == 3 && teeny_dist_grads_numel(small) == 73, "buckets %d, numel %lld",
              teeny_dist_grads_buckets(small), (long long)teeny_dist_grads_numel(small));
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < 3; i++) {
                for (int j = 0; j < sizes[i]; j++)
                    v[j] = (float)(0.1 * (2 * r + k + 1) * (i + 1) + 0.37 * j);
                TRY(teeny_tensor_write(gt[i], v, (size_t)sizes[i]));
            }
            TRY(teeny_dist_grads_add(small));
        }
        TRY(teeny_dist_grads_allreduce(small, TEENY_OK));
        for (int i = 0; i < 3; i++) {
            TRY(teeny_tensor_read(gt[i], got_v, (size_t)sizes[i]));
            for (int j = 0; j < sizes[i]; j++) {
                double sum = 0;
                for (int g = 0; g < 2 * R; g++) /* global shard g = rank g / 2, local shard g % 2 */
                    sum += (double)(float)(0.1 * (g + 1) * (i + 1) + 0.37 * j);
                ok_all &= got_v[j] == (float)(sum * (1.0 / (2.0 * R)));
            }
        }
        CHECK(ok_all, "the mean of known values differs from the host's fixed-order mean");
        teeny_dist_grads_destroy(small);
        for (int i = 0; i < 3; i++)
            teeny_tensor_destroy(gt[i]);
    }
    TRY(teeny_dist_grads_create(d, ctx, np, grads, 1, &dg));
    TRY(teeny_dist_grads_add(dg));
    CHECK(teeny_dist_grads_add(dg) == TEENY_ERR_STATE, "an add past local_shards accepted");
    TRY(teeny_dist_grads_allreduce(dg, TEENY_OK));
    /* an all-reduce with no shard added fails on every rank, and the
     * count starts over */
    teeny_status st = teeny_dist_grads_allreduce(dg, TEENY_OK);
    CHECK(st == TEENY_ERR_STATE, "an all-reduce without shards: %s", teeny_status_name(st));
    if (!fails_)
        printf("rank %d: errors: ok\n", r);
done:
    teeny_dist_grads_destroy(dg);
    free(grads);
    free(params);
    teeny_plan_destroy(plan);
    teeny_graph_destroy(n.g);
    return fails_ != 0;
}

/* ---- faults: every OpenCL call and host allocation of the dist layer ---- */

typedef struct {
    teeny_tensor *g[3];                 /* gradients of 1, 70 and 2 floats */
    teeny_tensor *b[2];                 /* broadcast targets of 3 and 5 floats */
    teeny_tensor *x, *dy, *w, *bias, *rm, *rv, *y, *mean, *rstd, *dx, *dw, *db; /* syncbn, [4, 3, 5, 5] */
    double sum[2];
} fault_state;

#define FT_B 4
#define FT_N (FT_B * BN_C * BN_HW)

static const int64_t ft_sizes[3] = {1, 70, 2};

/* Known values into every input and running statistic (the operations
 * overwrite the gradients and the broadcast targets). */
static teeny_status fault_reset(teeny_ctx *ctx, fault_state *f)
{
    float v[FT_N], dy[FT_N];
    teeny_status st = TEENY_OK;
    for (int i = 0; i < 3 && st == TEENY_OK; i++) {
        for (int j = 0; j < ft_sizes[i]; j++)
            v[j] = (float)(0.25 * (i + 1) + 0.37 * j);
        st = teeny_tensor_write(f->g[i], v, (size_t)ft_sizes[i]);
    }
    for (int i = 0; i < 8; i++)
        v[i] = (float)(3.5 - i);
    if (st == TEENY_OK && (st = teeny_tensor_write(f->b[0], v, 3)) == TEENY_OK)
        st = teeny_tensor_write(f->b[1], v + 3, 5);
    uint64_t s = 5;
    for (int i = 0; i < FT_N; i++)
        v[i] = (float)(2.0 * uniform(&s) - 1.0);
    for (int i = 0; i < FT_N; i++)
        dy[i] = (float)(2.0 * uniform(&s) - 1.0);
    teeny_tensor *vecs[4] = {f->w, f->bias, f->rm, f->rv};
    const float init[4] = {1.25f, -0.5f, 0.0f, 1.0f};
    for (int k = 0; k < 4 && st == TEENY_OK; k++)
        st = teeny_tensor_fill(vecs[k], init[k]);
    if (st == TEENY_OK && (st = teeny_tensor_write(f->x, v, FT_N)) == TEENY_OK)
        st = teeny_tensor_write(f->dy, dy, FT_N);
    return st == TEENY_OK ? teeny_ctx_finish(ctx) : st;
}

/* Every dist operation once, stopping at the first failure; *dg is left
 * for the caller to destroy (outside the counted region). */
static teeny_status fault_ops(teeny_dist *d, teeny_ctx *ctx, fault_state *f, teeny_dist_grads **dg)
{
    double in[2] = {1.5, -2.25};
    teeny_status st = teeny_dist_grads_create(d, ctx, 3, f->g, 2, dg);
    if (st == TEENY_OK && (st = teeny_dist_grads_add(*dg)) == TEENY_OK && (st = teeny_dist_grads_add(*dg)) == TEENY_OK)
        st = teeny_dist_grads_allreduce(*dg, TEENY_OK);
    if (st == TEENY_OK)
        st = teeny_dist_sum_f64(d, in, f->sum, 2);
    if (st == TEENY_OK)
        st = teeny_dist_broadcast(d, ctx, 0, 2, f->b);
    if (st == TEENY_OK)
        st = teeny_dist_batchnorm_forward_train(d, ctx, f->x, f->w, f->bias, f->rm, f->rv, 0.1f, 1e-5f, f->y, f->mean,
                                                f->rstd);
    if (st == TEENY_OK)
        st = teeny_dist_batchnorm_backward_train(d, ctx, f->x, f->dy, f->w, f->mean, f->rstd, 1e-5f, f->dx, f->dw,
                                                 f->db);
    return st;
}

/* Every output of fault_ops, concatenated; its length in *n. */
static teeny_status fault_outputs(const fault_state *f, float *out, size_t *n)
{
    const teeny_tensor *ts[] = {f->g[0], f->g[1], f->g[2], f->b[0], f->b[1], f->rm, f->rv, f->y, f->mean, f->rstd,
                                f->dx, f->dw, f->db};
    size_t at = 0;
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) {
        size_t m = (size_t)teeny_tensor_numel(ts[i]);
        teeny_status st = teeny_tensor_read(ts[i], out + at, m);
        if (st != TEENY_OK)
            return st;
        at += m;
    }
    memcpy(out + at, (float[2]){(float)f->sum[0], (float)f->sum[1]}, 2 * sizeof(float));
    *n = at + 2;
    return TEENY_OK;
}

/* Run on one rank: fail every hooked call (OpenCL and host allocation,
 * the dist's and the library's beneath it) of fault_ops once, in turn.
 * Each failure must come back as a status naming it, and the same
 * operations then succeed on the same context with the same bits as a
 * clean run. A fault the exchange cannot survive (a failed wait for a
 * bucket's read while the other ranks wait for it) breaks the dist, as
 * documented: then a new dist is made, and that is counted. */
static int mode_faults(teeny_dist **dp, const teeny_dist_params *params, teeny_ctx *ctx)
{
    teeny_dist *d = *dp;
    teeny_dist_grads *dg = NULL;
    fault_state f = {0};
    int64_t xs[4] = {FT_B, BN_C, 5, 5}, c1 = BN_C, bs[2] = {3, 5};
    static float ref[2 * FT_N + 200], got[2 * FT_N + 200];
    size_t n_ref = 0, n_got = 0;
    int broken = 0;
    if (teeny_dist_size(d) != 1) {
        CHECK(0, "faults runs on one rank");
        return 1;
    }
    for (int i = 0; i < 3; i++)
        TRY(teeny_tensor_create(ctx, 1, &ft_sizes[i], &f.g[i]));
    for (int i = 0; i < 2; i++)
        TRY(teeny_tensor_create(ctx, 1, &bs[i], &f.b[i]));
    teeny_tensor **big[] = {&f.x, &f.dy, &f.y, &f.dx}, **vecs[] = {&f.w, &f.bias, &f.rm, &f.rv, &f.mean, &f.rstd,
                                                                   &f.dw, &f.db};
    for (int i = 0; i < 4; i++)
        TRY(teeny_tensor_create(ctx, 4, xs, big[i]));
    for (int i = 0; i < 8; i++)
        TRY(teeny_tensor_create(ctx, 1, &c1, vecs[i]));
    /* a clean run builds the kernels; the second one is the reference and
     * counts the calls */
    TRY(fault_reset(ctx, &f));
    TRY(fault_ops(d, ctx, &f, &dg));
    /* the dist's own calls go through the counter: an add is one copy per
     * gradient */
    teeny__calls_reset();
    TRY(teeny_dist_grads_add(dg));
    CHECK(teeny__calls_id(TEENY__ID_clEnqueueCopyBuffer) == 3 && teeny__calls_total() == 3,
          "teeny_dist_grads_add of 3 gradients: %ld copies counted, %ld calls",
          teeny__calls_id(TEENY__ID_clEnqueueCopyBuffer), teeny__calls_total());
    teeny_dist_grads_destroy(dg);
    dg = NULL;
    TRY(fault_reset(ctx, &f));
    teeny__calls_reset();
    TRY(fault_ops(d, ctx, &f, &dg));
    long total = teeny__calls_total();
    teeny_dist_grads_destroy(dg);
    dg = NULL;
    TRY(fault_outputs(&f, ref, &n_ref));
    CHECK(total > 20, "only %ld hooked calls: the dist's calls are not counted", total);
    for (long k = 1; k <= total && !fails_; k++) {
        TRY(fault_reset(ctx, &f));
        teeny__fault_arm(k);
        teeny_status st = fault_ops(d, ctx, &f, &dg);
        int fired = teeny__fault_fired();
        teeny__fault_arm(0);
        teeny_dist_grads_destroy(dg);
        dg = NULL;
        const char *msg = teeny_dist_last_error(d);
        CHECK(fired, "call %ld of %ld was not reached", k, total);
        CHECK(st == TEENY_ERR_OPENCL || st == TEENY_ERR_NOMEM || st == TEENY_ERR_STATE,
              "call %ld failed: %s, expected TEENY_ERR_OPENCL, _NOMEM or _STATE (%s)", k, teeny_status_name(st), msg);
        CHECK(strstr(msg, "failed") || strstr(msg, "memory"), "call %ld: the message does not say: %s", k, msg);
        if (strstr(msg, "the dist is broken")) {
            broken++;
            teeny_dist_destroy(d);
            *dp = d = NULL;
            TRY(teeny_dist_create(MPI_COMM_WORLD, params, dp));
            d = *dp;
        }
        /* still usable: the same operations succeed, with the same bits */
        TRY(fault_reset(ctx, &f));
        TRY(fault_ops(d, ctx, &f, &dg));
        teeny_dist_grads_destroy(dg);
        dg = NULL;
        TRY(fault_outputs(&f, got, &n_got));
        CHECK(n_got == n_ref && !memcmp(got, ref, n_ref * sizeof *ref), "results differ after the fault at call %ld", k);
    }
    /* the wait for each of the 3 buckets' reads (64 floats per bucket:
     * the 2-, 70- and 1-float buckets), and nothing else */
    CHECK(broken == 3, "%d faults broke the dist, expected 3 (one per bucket's read)", broken);
    if (!fails_)
        printf("rank 0: faults: ok %ld calls failed in turn, each reported and recovered from (%d broke the dist, "
               "as documented)\n", total, broken);
done:
    teeny__fault_arm(0);
    teeny_dist_grads_destroy(dg);
    teeny_tensor *all[] = {f.g[0], f.g[1], f.g[2], f.b[0], f.b[1], f.x, f.dy, f.w, f.bias, f.rm, f.rv, f.y,
                           f.mean, f.rstd, f.dx, f.dw, f.db};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        teeny_tensor_destroy(all[i]);
    return fails_ != 0;
}

/* ---- mismatch: ranks out of step, or passing unlike arguments ---- */

/* Every rank got want (and, when text is not NULL, a message holding it)
 * within limit_s seconds of t0. */
static void expect_status(teeny_dist *d, const char *what, teeny_status st, teeny_status want, const char *text,
                          double t0, double limit_s)
{
    double took = MPI_Wtime() - t0;
    CHECK(st == want, "%s: %s, expected %s (%s)", what, teeny_status_name(st), teeny_status_name(want),
          teeny_dist_last_error(d));
    CHECK(!text || strstr(teeny_dist_last_error(d), text), "%s: the message does not say \"%s\": %s", what, text,
          teeny_dist_last_error(d));
    CHECK(took < limit_s, "%s: returned after %.1f s, the deadline is %.1f s", what, took, limit_s);
}

/* A dist broken by ranks out of step refuses at once; then a new one. */
static teeny_status renew(teeny_dist **dp, const teeny_dist_params *params)
{
    double in = 1, out;
    teeny_dist *d = *dp;
    CHECK(teeny_dist_sum_f64(d, &in, &out, 1) == TEENY_ERR_STATE, "a broken dist accepted a collective");
    teeny_dist_destroy(d);
    *dp = NULL;
    return teeny_dist_create(MPI_COMM_WORLD, params, dp);
}

/* On 2 or more ranks the last rank calls another collective than the
 * others (or passes another exchanger, or other bytes): every rank must
 * return an error status at once -- never abort the job through an MPI
 * error handler, never pair the exchanges up silently, never wait for the
 * deadline. */
static int mode_mismatch(teeny_dist **dp, const teeny_dist_params *params, teeny_ctx *ctx)
{
    teeny_dist *d = *dp;
    int R = teeny_dist_size(d), r = teeny_dist_rank(d), last = r == R - 1;
    double limit = params->timeout_s / 2, in[2] = {1, 2}, out[2], t0;
    int64_t sizes[5] = {1, 70, 2, 3, 5}, xs[4] = {2, BN_C, 5, 5}, c1 = BN_C;
    teeny_tensor *g[5] = {0}, *bx = NULL, *by = NULL, *v[4] = {0};
    teeny_dist_grads *dg1 = NULL, *dg2 = NULL;
    teeny_status st;
    if (R < 2) {
        CHECK(0, "mismatch runs on 2 or more ranks");
        return 1;
    }
    for (int i = 0; i < 5; i++) {
        TRY(teeny_tensor_create(ctx, 1, &sizes[i], &g[i]));
        TRY(teeny_tensor_fill(g[i], 0.5f + (float)i));
    }
    TRY(teeny_tensor_create(ctx, 4, xs, &bx));
    TRY(teeny_tensor_create(ctx, 4, xs, &by));
    TRY(teeny_tensor_fill(bx, 0.25f));
    for (int i = 0; i < 4; i++) {
        TRY(teeny_tensor_create(ctx, 1, &c1, &v[i]));
        TRY(teeny_tensor_fill(v[i], 1.0f));
    }
    /* 1. sum_f64 against broadcast (exchanges of different sizes) */
    t0 = MPI_Wtime();
    st = last ? teeny_dist_broadcast(d, ctx, 0, 2, g) : teeny_dist_sum_f64(d, in, out, 2);
    expect_status(d, "sum_f64 against broadcast", st, TEENY_ERR_IO, "out of step", t0, limit);
    TRY(renew(dp, params));
    d = *dp;
    /* 2. SyncBatchNorm forward against backward (exchanges of the same sizes) */
    t0 = MPI_Wtime();
    st = last ? teeny_dist_batchnorm_backward_train(d, ctx, bx, bx, v[0], v[1], v[2], 1e-5f, by, v[3], v[1])
              : teeny_dist_batchnorm_forward_train(d, ctx, bx, v[0], v[1], v[2], v[3], 0.1f, 1e-5f, by, v[1], v[2]);
    expect_status(d, "batch norm forward against backward", st, TEENY_ERR_IO, "out of step", t0, limit);
    TRY(renew(dp, params));
    d = *dp;
    /* 3. a gradient all-reduce against SyncBatchNorm */
    TRY(teeny_dist_grads_create(d, ctx, 3, g, 1, &dg1));
    TRY(teeny_dist_grads_add(dg1));
    t0 = MPI_Wtime();
    st = last ? teeny_dist_grads_allreduce(dg1, TEENY_OK)
              : teeny_dist_batchnorm_forward_train(d, ctx, bx, v[0], v[1], v[2], v[3], 0.1f, 1e-5f, by, v[1], v[2]);
    expect_status(d, "all-reduce against batch norm", st, TEENY_ERR_IO, "out of step", t0, limit);
    teeny_dist_grads_destroy(dg1);
    dg1 = NULL;
    TRY(renew(dp, params));
    d = *dp;
    /* 4. all-reduces of two exchangers of different layouts: the ranks are
     * in step, so every rank refuses and the dist stays usable */
    TRY(teeny_dist_grads_create(d, ctx, 3, g, 1, &dg1));
    TRY(teeny_dist_grads_create(d, ctx, 2, g + 3, 1, &dg2));
    TRY(teeny_dist_grads_add(dg1));
    TRY(teeny_dist_grads_add(dg2));
    t0 = MPI_Wtime();
    st = teeny_dist_grads_allreduce(last ? dg2 : dg1, TEENY_OK);
    expect_status(d, "all-reduce of unlike exchangers", st, TEENY_ERR_SHAPE, "different layouts", t0, limit);
    TRY(teeny_dist_sum_f64(d, in, out, 2));
    CHECK(out[0] == R && out[1] == 2.0 * R, "sum after a refused all-reduce: %g %g", out[0], out[1]);
    /* 5. teeny_dist_check_same: equal bytes pass, other bytes or another
     * length fail every rank, naming the rank */
    {
        char opts[32] = "--seed 1 --batch 64";
        char want[64];
        snprintf(want, sizeof want, "differs between rank 0 and rank %d", R - 1);
        TRY(teeny_dist_check_same(d, opts, sizeof opts, "the options"));
        if (last)
            opts[7] = '2';
        t0 = MPI_Wtime();
        st = teeny_dist_check_same(d, opts, sizeof opts, "the options");
        expect_status(d, "check_same of other bytes", st, TEENY_ERR_SHAPE, want, t0, limit);
        st = teeny_dist_check_same(d, opts, last ? 8 : sizeof opts, "the options");
        expect_status(d, "check_same of another length", st, TEENY_ERR_SHAPE, want, t0, limit);
        st = teeny_dist_check_same(d, r == 0 ? NULL : opts, 4, NULL);
        expect_status(d, "check_same of NULL on rank 0", st, TEENY_ERR_ARG, "rank 0 passed NULL", t0, limit);
    }
    if (!fails_)
        printf("rank %d: mismatch: ok: every rank returned its error at once\n", r);
done:
    teeny_dist_grads_destroy(dg1);
    teeny_dist_grads_destroy(dg2);
    for (int i = 0; i < 5; i++)
        teeny_tensor_destroy(g[i]);
    for (int i = 0; i < 4; i++)
        teeny_tensor_destroy(v[i]);
    teeny_tensor_destroy(bx);
    teeny_tensor_destroy(by);
    return fails_ != 0;
}

int main(int argc, char **argv)
{
    teeny_dist *d = NULL;
    teeny_ctx *ctx = NULL;
    int rc = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    mode_ = argc > 1 ? argv[1] : "?";
    teeny_dist_params dp = TEENY_DIST_PARAMS_INIT;
    dp.timeout_s = !strcmp(mode_, "stall") ? 2.0 : !strcmp(mode_, "mismatch") ? 30.0 : 120.0;
    dp.bucket_bytes = 256; /* several buckets even for this small net */
    if (teeny_dist_create(MPI_COMM_WORLD, &dp, &d) != TEENY_OK) {
        printf("rank %d: %s: FAIL teeny_dist_create: %s\n", rank_, mode_, teeny_dist_last_error(NULL));
        goto out;
    }
    if (teeny_dist_ctx_create(d, NULL, &ctx) != TEENY_OK) {
        printf("rank %d: %s: FAIL teeny_dist_ctx_create: %s\n", rank_, mode_, teeny_last_error(NULL));
        goto out;
    }
    if (!strcmp(mode_, "grads"))
        rc = mode_grads(d, ctx);
    else if (!strcmp(mode_, "train"))
        rc = mode_train(d, ctx, argc > 2 ? argv[2] : NULL, 20, -1, 0);
    else if (!strcmp(mode_, "fault"))
        rc = mode_train(d, ctx, NULL, 4, 2, 0);
    else if (!strcmp(mode_, "stall"))
        rc = mode_train(d, ctx, NULL, 3, -1, argc > 2 ? atof(argv[2]) : 6.0);
    else if (!strcmp(mode_, "crash"))
        rc = mode_train(d, ctx, NULL, 3, -1, -1.0);
    else if (!strcmp(mode_, "syncbn"))
        rc = mode_syncbn(d, ctx);
    else if (!strcmp(mode_, "errors"))
        rc = mode_errors(d, ctx);
    else if (!strcmp(mode_, "faults"))
        rc = mode_faults(&d, &dp, ctx);
    else if (!strcmp(mode_, "mismatch"))
        rc = mode_mismatch(&d, &dp, ctx);
    else
        printf("usage: test_dist grads | train FILE | fault | stall SECS | crash | syncbn | errors | faults | mismatch\n");
out:
    fflush(stdout);
    teeny_ctx_destroy(ctx);
    teeny_dist_destroy(d);
    MPI_Finalize();
    return rc;
}
