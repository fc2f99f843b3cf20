/*
 * test_onnx_lowered.c -- the ONNX ops the importer lowers onto graph ops
 * (src/onnx/repeat.c: Tile, CumSum; src/onnx/einsum.c: Einsum), on
 * crafted models (tests/onnx_craft.h). forward: seeded shape sweeps of
 * run-time values and of folded constants against float64 references
 * written here (Tile exact; CumSum and Einsum by normalized error), every
 * output poisoned with NaN first; backward: each op between a trainable
 * 1x1 Conv and a loss, the Conv's gradients against finite differences;
 * errors: exact statuses, the message naming the node and, for Einsum,
 * the equation. tests/test_onnx.c checks the tile, cumsum and einsum
 * models of tests/onnx/ against onnxruntime.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "onnx_craft.h"
#include "teenycl_onnx.h"

#define MAXN 4096

/* Import m (freed) at batch B, run it on inputs xs (n_in of them, the
 * model's run-time inputs in order) and read output 0 into y (poisoned
 * first; at most cap values): its count, or -1 with the status in *st. */
static int64_t run(oc_model *m, int64_t batch, int n_in, float *const *xs, float *y, size_t cap, int64_t *dims,
                   int *ndim, teeny_status *st)
{
    size_t size;
    unsigned char *bytes = oc_pack(m, &size);
    oc_free(m);
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    p.batch = batch;
    teeny_onnx_model *model = NULL;
    teeny_plan *plan = NULL;
    teeny_node out_node = -1;
    int64_t n = -1;
    *st = teeny_onnx_load_memory(th_ctx(), bytes, size, &p, &model);
    free(bytes);
    if (*st == TEENY_OK)
        *st = teeny_onnx_output(model, 0, NULL, &out_node, ndim, dims);
    if (*st == TEENY_OK && teeny_onnx_input_count(model) > 0) {
        teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
        pp.batch = teeny_onnx_batch(model);
        pp.training = 0;
        *st = teeny_graph_compile(teeny_onnx_graph(model), &pp, &plan);
        for (int i = 0; *st == TEENY_OK && i < n_in; i++) {
            teeny_node in;
            teeny_tensor *t;
            if ((*st = teeny_onnx_input(model, i, NULL, &in, NULL)) == TEENY_OK &&
                (*st = teeny_plan_tensor(plan, in, &t)) == TEENY_OK)
                *st = teeny_tensor_write(t, xs[i], (size_t)teeny_tensor_numel(t));
        }
        if (*st == TEENY_OK)
            *st = teeny_plan_forward(plan);
    }
    if (*st == TEENY_OK) {
        n = 1;
        for (int d = 0; d < *ndim; d++)
            n *= dims[d];
        ck_assert_int_le(n, (int64_t)cap);
        for (int64_t i = 0; i < n; i++)
            y[i] = NAN;
        if ((*st = teeny_onnx_output_read(model, plan, 0, y, (size_t)n)) != TEENY_OK)
            n = -1;
    }
    teeny_plan_destroy(plan);
    teeny_onnx_destroy(model);
    return n;
}

static void dims_str(char *buf, size_t cap, int ndim, const int64_t *d)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, i ? ",%lld" : "%lld", (long long)d[i]);
}

/* ---- Tile ---- */

/* Tile of a random [B, ...] (rank 1..4, batch in 1..3) by repeats 1..3 on
 * every axis, the batch's included: a run-time input (_i even) or an
 * initializer (folded), against the copy rule y[k] = x[k mod dims]. */
START_TEST(test_onnx_tile_sweep)
{
    th_rng r = th_rng_make(4240 + (uint64_t)_i);
    int rank = th_int(&r, 1, 4), folded = _i % 2;
    int64_t dims[4], reps[4], odims[8], got_dims[8];
    int64_t nx = 1, ny = 1;
    for (int d = 0; d < rank; d++) {
        dims[d] = th_int(&r, 1, 3);
        reps[d] = th_int(&r, 1, 3);
        odims[d] = dims[d] * reps[d];
        nx *= dims[d];
        ny *= odims[d];
    }
    static float x[MAXN], y[MAXN];
    th_fill_normal(&r, x, (size_t)nx, 0.0, 1.0);
    oc_model *m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, rank, dims);
    oc_init_i64(m, "reps", 1, (int64_t[]){rank}, reps);
    if (folded) {
        oc_init_f32(m, "c", rank, dims, x);
        oc_node(m, "Tile", "c,reps", "y");
        oc_node(m, "Relu", "x", "keep"); /* a run-time node keeps the graph from being empty */
    } else
        oc_node(m, "Tile", "x,reps", "y");
    oc_output(m, "y");
    teeny_status st;
    int got_rank;
    float *xs[1] = {x};
    int64_t n = run(m, dims[0], 1, xs, y, MAXN, got_dims, &got_rank, &st);
    char ds[64], rs[64];
    dims_str(ds, sizeof ds, rank, dims);
    dims_str(rs, sizeof rs, rank, reps);
    ck_assert_msg(st == TEENY_OK, "Tile of [%s] by [%s]%s (seed %d): %s: %s", ds, rs, folded ? " folded" : "", 4240 + _i,
                  teeny_status_name(st), teeny_last_error(th_ctx()));
    ck_assert_int_eq(n, ny);
    ck_assert_int_eq(got_rank, rank);
    for (int d = 0; d < rank; d++)
        ck_assert_int_eq(got_dims[d], odims[d]);
    for (int64_t k = 0; k < ny; k++) {
        int64_t rest = k, src = 0, stride = 1;
        for (int d = rank - 1; d >= 0; d--) {
            src += rest % odims[d] % dims[d] * stride;
            stride *= dims[d];
            rest /= odims[d];
        }
        ck_assert_msg(y[k] == x[src], "Tile of [%s] by [%s]%s (seed %d): y[%lld] = %g, want x[%lld] = %g", ds, rs,
                      folded ? " folded" : "", 4240 + _i, (long long)k, (double)y[k], (long long)src, (double)x[src]);
    }
}
END_TEST

/* ---- CumSum ---- */

/* CumSum of a random [B, ...] (rank 1..4) along a random axis (given as
 * axis - rank half the time, the batch's too), exclusive and reverse
 * drawn: run-time or folded, against a
 * float64 scan; the error bound is relative to the sum of |x| scanned. */
START_TEST(test_onnx_cumsum_sweep)
{
    th_rng r = th_rng_make(4250 + (uint64_t)_i);
    int rank = th_int(&r, 1, 4), folded = _i % 2;
    int64_t dims[4], got_dims[8], nx = 1;
    for (int d = 0; d < rank; d++)
        nx *= dims[d] = th_int(&r, 1, d ? 7 : 3);
    int ax = th_int(&r, 0, rank - 1);
    int exclusive = th_int(&r, 0, 1), reverse = th_int(&r, 0, 1);
    int64_t axis_given = th_int(&r, 0, 1) ? ax - rank : ax;
    static float x[MAXN], y[MAXN];
    static double want[MAXN], mag[MAXN];
    th_fill_normal(&r, x, (size_t)nx, 0.5, 1.0);
    oc_model *m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, rank, dims);
    oc_init_i64(m, "axis", 0, NULL, &axis_given);
    if (folded) {
        oc_init_f32(m, "c", rank, dims, x);
        oc_node(m, "CumSum", "c,axis", "y");
    } else
        oc_node(m, "CumSum", "x,axis", "y");
    oc_attr_int(m, "exclusive", exclusive);
    oc_attr_int(m, "reverse", reverse);
    if (folded)
        oc_node(m, "Relu", "x", "keep");
    oc_output(m, "y");
    int64_t len = dims[ax], inner = 1;
    for (int d = ax + 1; d < rank; d++)
        inner *= dims[d];
    for (int64_t row = 0; row < nx / len; row++) {
        int64_t base = row / inner * len * inner + row % inner;
        double acc = 0.0, acc_mag = 0.0;
        for (int64_t t = 0; t < len; t++) {
            int64_t at = base + (reverse ? len - 1 - t : t) * inner;
            if (!exclusive)
                acc += x[at], acc_mag += fabs(x[at]);
            want[at] = acc;
            mag[at] = acc_mag;
            if (exclusive)
                acc += x[at], acc_mag += fabs(x[at]);
        }
    }
    teeny_status st;
    int got_rank;
    float *xs[1] = {x};
    int64_t n = run(m, dims[0], 1, xs, y, MAXN, got_dims, &got_rank, &st);
    char ds[64];
    dims_str(ds, sizeof ds, rank, dims);
    ck_assert_msg(st == TEENY_OK, "CumSum of [%s] axis %lld exclusive %d reverse %d%s (seed %d): %s: %s", ds,
                  (long long)axis_given, exclusive, reverse, folded ? " folded" : "", 4250 + _i, teeny_status_name(st),
                  teeny_last_error(th_ctx()));
    ck_assert_int_eq(n, nx);
    ck_assert_int_eq(got_rank, rank);
    for (int64_t k = 0; k < nx; k++)
        ck_assert_msg(isfinite(y[k]) && fabs(y[k] - want[k]) <= 1e-6 * (1.0 + mag[k]),
                      "CumSum of [%s] axis %lld exclusive %d reverse %d%s (seed %d): y[%lld] = %.9g, want %.9g", ds,
                      (long long)axis_given, exclusive, reverse, folded ? " folded" : "", 4250 + _i, (long long)k,
                      (double)y[k], want[k]);
}
END_TEST

/* ---- Einsum ---- */

typedef struct {
    const char *eq, *a, *b, *out; /* b NULL: one operand */
    int b_const;                  /* b an initializer */
} einsum_case;

static const einsum_case EINSUM_CASES[] = {
    {"bhid,bhjd->bhij", "bhid", "bhjd", "bhij", 0},
    {"bhij,bhjd->bhid", "bhij", "bhjd", "bhid", 0},
    {"bij,bjk->bik", "bij", "bjk", "bik", 0},
    {"bnc,cd->bnd", "bnc", "cd", "bnd", 1},
    {"ij,jk->ik", "ij", "jk", "ik", 1},
    {"bij->bji", "bij", NULL, "bji", 0},
    {"ij->i", "ij", NULL, "i", 0},
    {"bij,jk", "bij", "jk", "bik", 1}, /* implicit output */
    {"bi,bj->bij", "bi", "bj", "bij", 0}, /* outer product: K = 1 */
    {"bij,bkj->bik", "bij", "bkj", "bik", 0},
    {"bij,bj->b", "bij", "bj", "b", 0}, /* i summed before the product */
    {"bhqd, bhkd -> bhqk", "bhqd", "bhkd", "bhqk", 0}, /* spaces */
    {"ij->ji", "ij", NULL, "ji", 0},                     /* the batch axis moved */
    {"i,i", "i", "i", "", 0},                            /* an inner product: a scalar */
    {"ij,ik->jk", "ij", "ik", "jk", 0},                  /* contracted over the batch */
};
#define N_EINSUM (int)(sizeof EINSUM_CASES / sizeof *EINSUM_CASES)

/* The dims of a term for label sizes size['a'..'z']. */
static int term_dims(const char *t, const int *size, int64_t *dims, int64_t *n)
{
    int k = 0;
    *n = 1;
    for (; t[k]; k++)
        *n *= dims[k] = size[t[k] - 'a'];
    return k;
}

/* Element of term t (dims dims) at the labels' values v. */
static int64_t term_index(const char *t, const int64_t *dims, const int *v)
{
    int64_t at = 0;
    for (int k = 0; t[k]; k++)
        at = at * dims[k] + v[t[k] - 'a'];
    return at;
}

/* Every case, label sizes drawn from seed 4260 + _i, the first label
 * (the batch) 1..3, the rest 1..5, against a float64 sum over every
 * assignment of the labels. */
START_TEST(test_onnx_einsum_sweep)
{
    th_rng r = th_rng_make(4260 + (uint64_t)_i);
    static float a[MAXN], b[MAXN], y[MAXN];
    static double want[MAXN];
    for (int c = 0; c < N_EINSUM; c++) {
        const einsum_case *e = &EINSUM_CASES[c];
        int size[26], used[26] = {0}, labels[26], n_labels = 0;
        for (int l = 0; l < 26; l++)
            size[l] = th_int(&r, 1, 5);
        size[e->a[0] - 'a'] = th_int(&r, 1, 3);
        for (const char *t = e->a; *t; t++)
            used[*t - 'a'] = 1;
        for (const char *t = e->b ? e->b : ""; *t; t++)
            used[*t - 'a'] = 1;
        for (int l = 0; l < 26; l++)
            if (used[l])
                labels[n_labels++] = l;
        int64_t ad[8], bd[8], od[8], got_dims[8], na, nb = 0, no;
        int ar = term_dims(e->a, size, ad, &na), br = e->b ? term_dims(e->b, size, bd, &nb) : 0;
        int orank = term_dims(e->out, size, od, &no);
        th_fill_normal(&r, a, (size_t)na, 0.0, 1.0);
        th_fill_normal(&r, b, (size_t)nb, 0.0, 1.0);
        for (int64_t k = 0; k < no; k++)
            want[k] = 0.0;
        int v[26] = {0};
        for (;;) { /* every assignment of the labels */
            double p = a[term_index(e->a, ad, v)] * (e->b ? (double)b[term_index(e->b, bd, v)] : 1.0);
            want[term_index(e->out, od, v)] += p;
            int l = 0;
            while (l < n_labels && ++v[labels[l]] == size[labels[l]])
                v[labels[l++]] = 0;
            if (l == n_labels)
                break;
        }
        oc_model *m = oc_new(17);
        oc_input(m, "a", OC_FLOAT, ar, ad);
        if (e->b && !e->b_const)
            oc_input(m, "b", OC_FLOAT, br, bd);
        else if (e->b)
            oc_init_f32(m, "b", br, bd, b);
        oc_node(m, "Einsum", e->b ? "a,b" : "a", "y");
        oc_attr_string(m, "equation", e->eq);
        oc_output(m, "y");
        teeny_status st;
        int got_rank;
        float *xs[2] = {a, b};
        int64_t n = run(m, ad[0], e->b && !e->b_const ? 2 : 1, xs, y, MAXN, got_dims, &got_rank, &st);
        char as[64], bs[64];
        dims_str(as, sizeof as, ar, ad);
        dims_str(bs, sizeof bs, br, bd);
        ck_assert_msg(st == TEENY_OK, "Einsum \"%s\" of [%s], [%s] (seed %d): %s: %s", e->eq, as, bs, 4260 + _i,
                      teeny_status_name(st), teeny_last_error(th_ctx()));
        ck_assert_int_eq(n, no);
        ck_assert_int_eq(got_rank, orank);
        for (int d = 0; d < orank; d++)
            ck_assert_int_eq(got_dims[d], od[d]);
        ck_assert_msg(th_first_nonfinite(y, (size_t)no) < 0, "Einsum \"%s\": an unwritten output", e->eq);
        double err = th_nrms(y, want, (size_t)no);
        ck_assert_msg(err < 1e-6, "Einsum \"%s\" of [%s], [%s] (seed %d): nrms %.3g", e->eq, as, bs, 4260 + _i, err);
    }
}
END_TEST

/* ---- gradients ---- */

/* x [B, C, L] -> 1x1 Conv (trainable w, b) -> h -> the op -> flattened
 * scores -> cross entropy: the Conv's gradients, which flow back through
 * the lowered op, against central finite differences. _i: 0 Tile
 * (repeats [1, 2, 3]), 1 CumSum (axis 2), 2 CumSum (axis 1, exclusive,
 * reverse), 3 Einsum "bcl,bdl->bcd" of h with itself (a fan-out), 4
 * Einsum "bcl,ld->bdc" with a constant. */
START_TEST(test_onnx_lowered_grad)
{
    static const char *const what[] = {"Tile", "CumSum axis 2", "CumSum axis 1 exclusive reverse",
                                       "Einsum bcl,bdl->bcd", "Einsum bcl,ld->bdc"};
    teeny_ctx *ctx = th_ctx();
    enum { B = 2, C = 3, L = 4 };
    th_rng rng = th_rng_make(4270 + (uint64_t)_i);
    float wv[C * C], bv[C], xs[B * C * L], pv[L * 2];
    th_fill_normal(&rng, wv, C * C, 0.0, 0.5);
    th_fill_normal(&rng, bv, C, 0.0, 0.5);
    th_fill_normal(&rng, xs, B * C * L, 0.3, 1.0);
    th_fill_normal(&rng, pv, L * 2, 0.0, 0.5);
    oc_model *om = oc_new(17);
    oc_input(om, "x", OC_FLOAT, 3, (int64_t[]){-1, C, L});
    oc_init_f32(om, "w", 3, (int64_t[]){C, C, 1}, wv);
    oc_init_f32(om, "b", 1, (int64_t[]){C}, bv);
    oc_node(om, "Conv", "x,w,b", "h");
    oc_attr_ints(om, "kernel_shape", 1, (int64_t[]){1});
    switch (_i) {
    case 0:
        oc_init_i64(om, "reps", 1, (int64_t[]){3}, (int64_t[]){1, 2, 3});
        oc_node(om, "Tile", "h,reps", "y");
        break;
    case 1:
    case 2:
        oc_init_i64(om, "axis", 0, NULL, (int64_t[]){_i == 1 ? 2 : 1});
        oc_node(om, "CumSum", "h,axis", "y");
        oc_attr_int(om, "exclusive", _i == 2);
        oc_attr_int(om, "reverse", _i == 2);
        break;
    case 3:
        oc_node(om, "Einsum", "h,h", "y");
        oc_attr_string(om, "equation", "bcl,bdl->bcd");
        break;
    default:
        oc_init_f32(om, "p", 2, (int64_t[]){L, 2}, pv);
        oc_node(om, "Einsum", "h,p", "y");
        oc_attr_string(om, "equation", "bcl,ld->bdc");
    }
    oc_output(om, "y");
    size_t size;
    unsigned char *bytes = oc_pack(om, &size);
    oc_free(om);
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    p.batch = B;
    teeny_onnx_model *m;
    TH_OK(ctx, teeny_onnx_load_memory(ctx, bytes, size, &p, &m));
    free(bytes);
    teeny_graph *g = teeny_onnx_graph(m);
    teeny_node y, flat, labels, loss;
    TH_OK(ctx, teeny_onnx_output(m, 0, NULL, &y, NULL, NULL));
    TH_OK(ctx, teeny_graph_flatten(g, "flat", y, &flat));
    TH_OK(ctx, teeny_graph_labels(g, "labels", &labels));
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, "loss", flat, labels, &loss));
    const int32_t lab[B] = {1, 5};
    int np = teeny_graph_param_count(g);
    ck_assert_int_eq(np, 2); /* the Conv's w and b; p is a constant */
    char repro[96];
    snprintf(repro, sizeof repro, "%s, seed %d", what[_i], 4270 + _i);
    th_check_fd_grads(g, loss, xs, B * C * L, lab, B, repro);
    teeny_onnx_destroy(m);
}
END_TEST

/* ---- errors ---- */

/* Import m (freed): the status, the model destroyed. */
static teeny_status load(oc_model *m)
{
    size_t size;
    unsigned char *bytes = oc_pack(m, &size);
    oc_free(m);
    teeny_onnx_model *model = NULL;
    teeny_status st = teeny_onnx_load_memory(th_ctx(), bytes, size, NULL, &model);
    free(bytes);
    ck_assert_msg(st == TEENY_OK ? model != NULL : model == NULL, "*out not NULL after a failure");
    teeny_onnx_destroy(model);
    return st;
}

static void expect(const char *what, oc_model *m, teeny_status want, const char *word1, const char *word2)
{
    teeny_status st = load(m);
    const char *msg = teeny_last_error(th_ctx());
    ck_assert_msg(st == want, "%s: %s, want %s (%s)", what, teeny_status_name(st), teeny_status_name(want), msg);
    ck_assert_msg(strstr(msg, word1) && (!word2 || strstr(msg, word2)), "%s: the message \"%s\" lacks \"%s\"%s%s", what,
                  msg, word1, word2 ? " or " : "", word2 ? word2 : "");
}

/* x [2, 3, 4] into op (inputs "x" and, when extra is set, its initializer
 * "k" of int64 values) with output "bad". */
static oc_model *one_op(const char *op, const char *inputs, int nk, const int64_t *k)
{
    oc_model *m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 3, (int64_t[]){2, 3, 4});
    oc_input(m, "z", OC_FLOAT, 2, (int64_t[]){2, 5});
    if (nk >= 0)
        oc_init_i64(m, "k", nk == 0 ? 0 : 1, (int64_t[]){nk}, k);
    oc_node(m, op, inputs, "bad");
    oc_output(m, "bad");
    return m;
}

static oc_model *einsum(const char *inputs, const char *eq)
{
    oc_model *m = one_op("Einsum", inputs, -1, NULL);
    if (eq)
        oc_attr_string(m, "equation", eq);
    return m;
}

START_TEST(test_onnx_lowered_errors)
{
    /* Tile */
    expect("Tile repeats of rank 2's length", one_op("Tile", "x,k", 2, (int64_t[]){1, 2}), TEENY_ERR_FORMAT, "bad",
           "2 values for input rank 3");
    expect("Tile negative repeats", one_op("Tile", "x,k", 3, (int64_t[]){1, -1, 2}), TEENY_ERR_FORMAT, "bad",
           "negative");
    expect("Tile repeats past 64", one_op("Tile", "x,k", 3, (int64_t[]){1, 65, 1}), TEENY_ERR_UNSUPPORTED, "bad",
           "at most 64");
    expect("Tile to an empty run-time result", one_op("Tile", "x,k", 3, (int64_t[]){1, 0, 1}), TEENY_ERR_UNSUPPORTED,
           "bad", "empty");
    expect("Tile repeats from a run-time value", one_op("Tile", "x,z", -1, NULL), TEENY_ERR_UNSUPPORTED, "bad",
           "repeats");
    expect("Tile without repeats", one_op("Tile", "x", -1, NULL), TEENY_ERR_FORMAT, "bad", "repeats");
    /* CumSum */
    oc_model *m = one_op("CumSum", "x,k", 0, (int64_t[]){2});
    oc_attr_int(m, "exclusive", 2);
    expect("CumSum exclusive=2", m, TEENY_ERR_FORMAT, "bad", "exclusive=2");
    m = one_op("CumSum", "x,k", 0, (int64_t[]){1});
    oc_attr_int(m, "reversed", 1);
    expect("CumSum unknown attribute", m, TEENY_ERR_UNSUPPORTED, "bad", "reversed");
    expect("CumSum axis 3 of rank 3", one_op("CumSum", "x,k", 0, (int64_t[]){3}), TEENY_ERR_FORMAT, "bad", "axis");
    expect("CumSum axis -4 of rank 3", one_op("CumSum", "x,k", 0, (int64_t[]){-4}), TEENY_ERR_FORMAT, "bad", "axis");
    expect("CumSum two axes", one_op("CumSum", "x,k", 2, (int64_t[]){1, 2}), TEENY_ERR_FORMAT, "bad", "one integer");
    m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 2, (int64_t[]){1, 2049});
    oc_init_i64(m, "k", 0, NULL, (int64_t[]){1});
    oc_node(m, "CumSum", "x,k", "bad");
    oc_output(m, "bad");
    expect("CumSum of 2049 run-time values", m, TEENY_ERR_UNSUPPORTED, "bad", "at most 2048");
    expect("CumSum axis from a run-time value", one_op("CumSum", "x,z", -1, NULL), TEENY_ERR_UNSUPPORTED, "bad",
           "axis");
    /* Einsum */
    expect("Einsum without equation", einsum("x", NULL), TEENY_ERR_FORMAT, "bad", "equation");
    expect("Einsum ellipsis", einsum("x", "...ij->...ji"), TEENY_ERR_UNSUPPORTED, "bad", "...ij->...ji");
    expect("Einsum diagonal", einsum("x", "bii->bi"), TEENY_ERR_UNSUPPORTED, "bii->bi", "diagonal");
    expect("Einsum three operands", einsum("x,x,x", "bij,bjk,bkl->bil"), TEENY_ERR_UNSUPPORTED, "bad",
           "more than two");
    expect("Einsum rank", einsum("x", "ij->ji"), TEENY_ERR_SHAPE, "bad", "rank 3");
    expect("Einsum sizes differ", einsum("x,z", "bij,bj->bi"), TEENY_ERR_SHAPE, "bad", "label j");
    expect("Einsum operand count", einsum("x", "bij,bjk->bik"), TEENY_ERR_FORMAT, "bad", "2 operands");
    expect("Einsum bad character", einsum("x", "bi1->b"), TEENY_ERR_FORMAT, "bad", "'1'");
    expect("Einsum output label in no input", einsum("x", "bij->bq"), TEENY_ERR_FORMAT, "bad", "label q");
    expect("Einsum output label twice", einsum("x", "bij->bii"), TEENY_ERR_UNSUPPORTED, "bad", "label i twice");
}
END_TEST

Suite *suite_onnx_lowered(void)
{
    Suite *s = suite_create("onnx_lowered");
    TCase *fwd = tcase_create("forward"), *bwd = tcase_create("backward"), *err = tcase_create("errors");
    tcase_add_loop_test(fwd, test_onnx_tile_sweep, 0, 12);
    tcase_add_loop_test(fwd, test_onnx_cumsum_sweep, 0, 16);
    tcase_add_loop_test(fwd, test_onnx_einsum_sweep, 0, 3);
    tcase_add_loop_test(bwd, test_onnx_lowered_grad, 0, 5);
    tcase_add_test(err, test_onnx_lowered_errors);
    suite_add_tcase(s, fwd);
    suite_add_tcase(s, bwd);
    suite_add_tcase(s, err);
    return s;
}
