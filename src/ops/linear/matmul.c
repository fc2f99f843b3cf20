/*
 * matmul.c -- MatMul, batched and broadcasting (teeny_matmul, graph
 * matmuls, ONNX MatMul of two run-time values): y [..., M, N] =
 * a [..., M, K] b [..., K, N], the batch dimensions (up to three)
 * broadcasting NumPy's way; one lin_gemm_batched launch per product
 * (cl/linear.cl; the plan is the layer's, linear.c). The gradient of an
 * operand broadcast along batch dimensions is its per-batch product
 * summed over them (teeny__st_reduce).
 */
#include "linear_internal.h"

/* A batched strided GEMM: C = A B per batch z, each operand at its offset
 * plus its batch strides (4 components, the last three used). */
typedef struct {
    int M, N, K;
    cl_mem a, b, c;
    int a_off, a_sm, a_sk, b_off, b_sk, b_sn, c_off, c_sm;
    cl_int4 a_sb, b_sb, c_sb, bn;
} bgemm_args;

static teeny_status bgemm(teeny_ctx *ctx, const bgemm_args *g)
{
    static const char name[] = "lin_gemm_batched";
    gemm_plan pl;
    cl_kernel k;
    int k_begin = 0, k_end = 0, seg = 0;
    int64_t per = 1, tiles = 1;
    teeny_status st = teeny__lin_plan_fit(ctx, &pl);
    if (st == TEENY_OK) {
        tiles = ((int64_t)g->K + pl.tk - 1) / pl.tk;
        st = teeny__loop_split(ctx, name, tiles, teeny__lin_tile_fixed(&pl), teeny__lin_tile_trips(&pl), &per);
    }
    size_t tm = (size_t)pl.ly * pl.rm, tn = (size_t)pl.lx * pl.rn;
    size_t global[3] = {((size_t)g->N + tn - 1) / tn * pl.lx, ((size_t)g->M + tm - 1) / tm * pl.ly,
                        (size_t)g->bn.s[1] * (size_t)g->bn.s[2] * (size_t)g->bn.s[3]};
    size_t local[3] = {(size_t)pl.lx, (size_t)pl.ly, 1};
    /* as gemm: launches over segments of k where loops are limited */
    for (int64_t t = 0; (t == 0 || t < tiles) && st == TEENY_OK; t += per) {
        k_begin = (int)(t * pl.tk);
        k_end = t + per >= tiles ? g->K : (int)((t + per) * pl.tk);
        seg = (t == 0 ? LIN_SEG_FIRST : 0) | (t + per >= tiles ? LIN_SEG_LAST : 0);
        st = teeny__kernel_get(ctx, "linear", pl.opt, name, &k);
        if (st == TEENY_OK)
            st = teeny__set_args(ctx, k, name, sizeof(int), &g->M, sizeof(int), &g->N, sizeof(int), &g->K,
                                 sizeof(cl_mem), &g->a, sizeof(int), &g->a_off, sizeof(int), &g->a_sm, sizeof(int),
                                 &g->a_sk, sizeof(cl_int4), &g->a_sb, sizeof(cl_mem), &g->b, sizeof(int), &g->b_off,
                                 sizeof(int), &g->b_sk, sizeof(int), &g->b_sn, sizeof(cl_int4), &g->b_sb,
                                 sizeof(cl_mem), &g->c, sizeof(int), &g->c_off, sizeof(int), &g->c_sm,
                                 sizeof(cl_int4), &g->c_sb, sizeof(cl_int4), &g->bn, sizeof(int), &k_begin,
                                 sizeof(int), &k_end, sizeof(int), &seg, (size_t)0);
        if (st == TEENY_OK)
            st = teeny__launch(ctx, k, name, 3, global, local);
    }
    return st;
}

/* y's batch dimensions (all but its last two), right-aligned in 3. */
typedef struct {
    int nb;                       /* y's batch rank, 0..3 */
    int64_t dims[3];              /* sizes, ones in front */
} mm_batch;

static mm_batch batch_of(const teeny__shape *y)
{
    mm_batch b = {y->ndim - 2, {1, 1, 1}};
    for (int d = 0; d < b.nb; d++)
        b.dims[3 - b.nb + d] = y->shape[d];
    return b;
}

/* The batch strides of operand x (matrices of mat elements each) in y's
 * batch, 0 where it is broadcast. */
static cl_int4 batch_strides(const teeny__shape *x, const mm_batch *yb, int64_t mat)
{
    cl_int4 s = {{0, 0, 0, 0}};
    int xb = x->ndim - 2;
    int64_t stride = mat;
    for (int d = xb - 1; d >= 0; d--) {
        int slot = 3 - xb + d; /* right-aligned */
        s.s[1 + slot] = x->shape[d] == 1 && yb->dims[slot] != 1 ? 0 : (cl_int)stride;
        stride *= x->shape[d];
    }
    return s;
}

static cl_int4 batch_dims(const mm_batch *b)
{
    cl_int4 v = {{1, (cl_int)b->dims[0], (cl_int)b->dims[1], (cl_int)b->dims[2]}};
    return v;
}

teeny_status teeny__matmul_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__MATMUL_A], *w = a->in[TEENY__MATMUL_B];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    teeny__shape xs = teeny__shape_of(x), ws = teeny__shape_of(w), ys = teeny__shape_of(y);
    int M = (int)xs.shape[xs.ndim - 2], K = (int)xs.shape[xs.ndim - 1], N = (int)ws.shape[ws.ndim - 1];
    mm_batch yb = batch_of(&ys);
    bgemm_args g = {M, N, K, x->buf, w->buf, y->buf, teeny__off(x), K, 1, teeny__off(w), N, 1, teeny__off(y), N,
                    batch_strides(&xs, &yb, (int64_t)M * K), batch_strides(&ws, &yb, (int64_t)K * N),
                    batch_strides(&ys, &yb, (int64_t)M * N), batch_dims(&yb)};
    return bgemm(ctx, &g);
}

/* Operand o's gradient g (o's shape): the per-batch products of y's batch
 * (written by fill(g_buf, off) with c's strides), summed over the batch
 * dimensions o was broadcast along. */
static teeny_status mm_grad(teeny_ctx *ctx, bgemm_args *g, const teeny__shape *os, const teeny__shape *ys,
                            teeny_tensor *out)
{
    mm_batch yb = batch_of(ys);
    int64_t mat = (int64_t)g->M * g->N, full[5], strides[5];
    int nd = yb.nb + 2;
    unsigned mask = 0;
    for (int d = 0; d < yb.nb; d++) {
        int j = d - (yb.nb - (os->ndim - 2));
        if (j < 0 || (os->shape[j] == 1 && ys->shape[d] != 1))
            mask |= 1u << d;
    }
    if (!mask) { /* o's batch is y's: write straight into it */
        g->c = out->buf;
        g->c_off = teeny__off(out);
        g->c_sb = batch_strides(ys, &yb, mat);
        return bgemm(ctx, g);
    }
    cl_mem t;
    int64_t count = mat;
    for (int d = 0; d < yb.nb; d++)
        count *= ys->shape[d];
    teeny_status st = teeny__scratch(ctx, (size_t)count * sizeof(float), &t);
    if (st != TEENY_OK)
        return st;
    g->c = t;
    g->c_off = 0;
    g->c_sb = batch_strides(ys, &yb, mat);
    if ((st = bgemm(ctx, g)) != TEENY_OK)
        return st;
    for (int d = 0; d < yb.nb; d++)
        full[d] = ys->shape[d];
    full[yb.nb] = g->M;
    full[yb.nb + 1] = g->N;
    teeny__st_contiguous(full, nd, strides);
    return teeny__st_reduce(ctx, t, 0, nd, full, strides, mask, 1.0f, out->buf, teeny__off(out));
}

/* da = dy b^T, db = a^T dy, per batch, summed where broadcast. */
teeny_status teeny__matmul_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__MATMUL_A], *w = a->in[TEENY__MATMUL_B], *dy = a->in[TEENY__MATMUL_DY];
    teeny_tensor *dx = a->out[TEENY__MATMUL_A], *dw = a->out[TEENY__MATMUL_B];
    teeny__shape xs = teeny__shape_of(x), ws = teeny__shape_of(w), ys = teeny__shape_of(dy);
    int M = (int)xs.shape[xs.ndim - 2], K = (int)xs.shape[xs.ndim - 1], N = (int)ws.shape[ws.ndim - 1];
    mm_batch yb = batch_of(&ys);
    teeny_status st = TEENY_OK;
    if (dx) { /* [M, K] = dy [M, N] w^T: w read as (n, k) at k*N + n */
        bgemm_args g = {M, K, N, dy->buf, w->buf, NULL, teeny__off(dy), N, 1, teeny__off(w), 1, N, 0, K,
                        batch_strides(&ys, &yb, (int64_t)M * N), batch_strides(&ws, &yb, (int64_t)K * N),
                        {{0, 0, 0, 0}}, batch_dims(&yb)};
        st = mm_grad(ctx, &g, &xs, &ys, dx);
    }
    if (st == TEENY_OK && dw) { /* [K, N] = x^T [K, M] dy [M, N] */
        bgemm_args g = {K, N, M, x->buf, dy->buf, NULL, teeny__off(x), 1, K, teeny__off(dy), N, 1, 0, N,
                        batch_strides(&xs, &yb, (int64_t)M * K), batch_strides(&ys, &yb, (int64_t)M * N),
                        {{0, 0, 0, 0}}, batch_dims(&yb)};
        st = mm_grad(ctx, &g, &ws, &ys, dw);
    }
    return st;
}

/* a [..., M, K], b [..., K, N] (ranks 2..5, batch dimensions broadcasting)
 * -> y [batch..., M, N]. */
teeny_status teeny__matmul_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0], *w = &s->in[1];
    char sa[96], sb[96];
    int ok = s->n_in == 2 && !x->is_i32 && !w->is_i32 && x->ndim >= 2 && w->ndim >= 2 &&
             x->shape[x->ndim - 1] == w->shape[w->ndim - 2];
    int nb = (x->ndim > w->ndim ? x->ndim : w->ndim) - 2;
    s->out = (teeny__shape){.ndim = nb + 2};
    for (int d = 0; ok && d < nb; d++) {
        int jx = d - (nb - (x->ndim - 2)), jw = d - (nb - (w->ndim - 2));
        int64_t p = jx < 0 ? 1 : x->shape[jx], q = jw < 0 ? 1 : w->shape[jw];
        ok = p == q || p == 1 || q == 1;
        s->out.shape[d] = p == 1 ? q : p;
    }
    if (!ok)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "a %s and b %s: expected fp32 [..., M, K] and [..., K, N] whose batch "
                            "dimensions broadcast", teeny__dims_str(x->shape, x->ndim, sa, sizeof sa),
                            teeny__dims_str(w->shape, w->ndim, sb, sizeof sb));
    s->out.shape[nb] = x->shape[x->ndim - 2];
    s->out.shape[nb + 1] = w->shape[w->ndim - 1];
    s->n_param = s->n_state = s->n_saved = 0;
    return TEENY_OK;
}

teeny_status teeny_matmul(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_matmul", MATMUL, matmul, forward)};
    const teeny__earg args[] = {
        {"a", a, TEENY__MATMUL_A, 0}, {"b", b, TEENY__MATMUL_B, 0}, {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_matmul");
    return teeny__eager_run(ctx, &e, args, 3);
}

teeny_status teeny_matmul_backward(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, const teeny_tensor *dy,
                                   teeny_tensor *da, teeny_tensor *db)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_matmul_backward", MATMUL, matmul, backward)};
    const teeny__earg args[] = {{"a", a, TEENY__MATMUL_A, 0},
                                {"b", b, TEENY__MATMUL_B, 0},
                                {"dy", dy, TEENY__MATMUL_DY, 0},
                                {"da", da, TEENY__MATMUL_A, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"db", db, TEENY__MATMUL_B, TEENY__EA_OUT | TEENY__EA_OPTIONAL}};
    EAGER_BEGIN("teeny_matmul_backward");
    return teeny__eager_run(ctx, &e, args, 5);
}
