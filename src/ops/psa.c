/*
 * psa.c -- PSA attention (YOLO C2PSA) and the reference's rearrangement
 * ops around it, forward and backward.
 *
 * qkv is [B, heads*4*kd, H, W] NCHW, N = H*W tokens; head h's channels
 * [h*4kd, +kd) are Q, the next kd K, the next 2kd V. The attention output
 * o = V softmax(Q^T K kd^-1/2)^T is [B, heads*2*kd, H, W] NCHW, and lse is
 * [B*heads, N].
 *
 * The fused path (teeny_psa_attention_*) runs the flash kernels of
 * cl/attention.cl straight on qkv through strides (Q element (b, h, n, j)
 * at b*C*N + (h*4kd + j)*N + n) with Dv = 2kd, writing o and d_qkv in
 * place: one launch forward, three backward (Di, dK/dV, dQ), no copies.
 * The reference's pipeline -- pack_qkv, attention on V_lo and V_hi, merge --
 * exists too (cl/psa.cl), with backwards that overwrite their outputs;
 * where its gradients meet (Q and K of the two halves, extract_v next to
 * pack) the caller sums them with teeny_add.
 *
 * Op-table entries (the convention of ops.h; attrs.psa = {heads, key_dim}
 * unless noted):
 *   psa_attention:  forward in = [qkv], out = [o, lse] (lse may be NULL);
 *                   backward in = [qkv, o, lse, d_o], out = [d_qkv]
 *   psa_pack_qkv:   forward in = [qkv], out = [packed];
 *                   backward in = [qkv, packed, d_packed], out = [d_qkv]
 *   psa_extract_v:  forward in = [qkv], out = [v];
 *                   backward in = [qkv, v, d_v], out = [d_qkv]
 *   psa_merge_attn: attrs.psa_merge = {heads, H, W}; forward in = [o_lo, o_hi],
 *                   out = [out]; backward in = [o_lo, o_hi, out, d_out],
 *                   out = [d_lo, d_hi]
 * Validation: heads or key_dim < 1 -> TEENY_ERR_ARG; heads*4*key_dim past
 * int32 -> TEENY_ERR_RANGE; key_dim > 128 (fused attention only) ->
 * TEENY_ERR_UNSUPPORTED; channels that are not heads*4*key_dim (or
 * heads*2*key_dim), B*heads or H*W that disagree -> TEENY_ERR_SHAPE.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "ops.h"

#define PSA_MAX_KD 128

/* ---- fused attention ---- */

static void psa_problem(const teeny_tensor *qkv, int heads, int kd, teeny__attn_problem *p)
{
    int B = (int)qkv->shape[0], N = (int)(qkv->shape[2] * qkv->shape[3]), C = heads * 4 * kd;
    int off = teeny__off(qkv);
    (void)B;
    p->bh = B * heads;
    p->heads = heads;
    p->n_q = p->n_k = N;
    p->d = kd;
    p->dv = 2 * kd;
    p->scale = (float)(1.0 / sqrt((double)kd));
    p->q = (teeny__attn_mat){qkv->buf, off, C * N, 4 * kd * N, 1, N};
    p->k = p->q;
    p->k.off += kd * N;
    p->v = p->q;
    p->v.off += 2 * kd * N;
}

/* o-shaped [B, heads*2kd, H, W] tensor as the strided [B*heads, N, 2kd] matrix. */
static teeny__attn_mat psa_out_mat(const teeny_tensor *o, int heads, int kd)
{
    int N = (int)(o->shape[2] * o->shape[3]);
    return (teeny__attn_mat){o->buf, teeny__off(o), heads * 2 * kd * N, 2 * kd * N, 1, N};
}

teeny_status teeny__psa_attention_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny__attn_problem p = {0};
    int heads = a->attrs.psa.heads, kd = a->attrs.psa.key_dim;
    psa_problem(a->in[0], heads, kd, &p);
    p.o = psa_out_mat(a->out[0], heads, kd);
    p.lse = a->out[1] ? a->out[1]->buf : NULL;
    p.lse_off = a->out[1] ? teeny__off(a->out[1]) : 0;
    return teeny__attn_forward_run(ctx, &p);
}

teeny_status teeny__psa_attention_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny__attn_problem p = {0}, g = {0};
    int heads = a->attrs.psa.heads, kd = a->attrs.psa.key_dim;
    if (!a->out[0])
        return TEENY_OK;
    psa_problem(a->in[0], heads, kd, &p);
    psa_problem(a->out[0], heads, kd, &g); /* d_qkv has qkv's layout */
    p.o = psa_out_mat(a->in[1], heads, kd);
    p.lse = a->in[2]->buf;
    p.lse_off = teeny__off(a->in[2]);
    p.d_o = psa_out_mat(a->in[3], heads, kd);
    p.dq = g.q;
    p.dk = g.k;
    p.dv_out = g.v;
    return teeny__attn_backward_run(ctx, &p);
}

/* ---- rearrangements ---- */

/* 1-D over the destination; or, for the V extractions (cpu_name set, see
 * cl/psa.cl), a 2-D grid (token, row of n tokens), and on a CPU
 * (TEENY_VARIANT_CPU) their CPU variant cpu_name, one item per row: a
 * loop of n + 1 trips, so where a device limits a work-item's loop trips
 * below that (teeny__loop_budget) the 2-D grid, which has no loop. */
static teeny_status psa_launch(teeny_ctx *ctx, const char *name, const char *cpu_name, cl_mem src, int src_off,
                               cl_mem src2, int src2_off, cl_mem dst, int dst_off, cl_mem dst2, int dst2_off,
                               int heads, int n, int kd, int total)
{
    cl_kernel k;
    int64_t budget;
    int rows = cpu_name != NULL, cpu = rows && ctx->tune.variant == TEENY_VARIANT_CPU;
    size_t local[2] = {0, 1}, global[2] = {rows ? (size_t)n : (size_t)total, rows ? (size_t)(total / n) : 1};
    teeny_status st;
    if (cpu && (st = teeny__loop_budget(ctx, &budget)) != TEENY_OK)
        return st;
    if (cpu && (int64_t)n + 1 > budget)
        cpu = 0;
    if (cpu) {
        name = cpu_name;
        rows = 0;
        global[0] = (size_t)(total / n);
        global[1] = 1;
    }
    st = teeny__kernel_get(ctx, "psa", "", name, &k);
    if (st != TEENY_OK)
        return st;
    /* rows: 64 x 4 items, several rows per work-group (a CPU pays per group) */
    local[0] = teeny__local_clamp(ctx, k, name,
                                  cpu ? teeny__cpu_local(ctx, global[0]) : (size_t)(rows ? 64 : ctx->work_group_size));
    if (rows)
        local[1] = teeny__local_clamp(ctx, k, name, 4 * local[0]) / local[0];
    if (src2)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &src, sizeof(int), &src_off, sizeof(cl_mem), &src2,
                             sizeof(int), &src2_off, sizeof(cl_mem), &dst, sizeof(int), &dst_off, sizeof(int), &heads,
                             sizeof(int), &n, sizeof(int), &kd, sizeof(int), &total, (size_t)0);
    else if (dst2)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &src, sizeof(int), &src_off, sizeof(cl_mem), &dst,
                             sizeof(int), &dst_off, sizeof(cl_mem), &dst2, sizeof(int), &dst2_off, sizeof(int),
                             &heads, sizeof(int), &n, sizeof(int), &kd, sizeof(int), &total, (size_t)0);
    else
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &src, sizeof(int), &src_off, sizeof(cl_mem), &dst,
                             sizeof(int), &dst_off, sizeof(int), &heads, sizeof(int), &n, sizeof(int), &kd,
                             sizeof(int), &total, (size_t)0);
    if (st == TEENY_OK)
        st = teeny__launch(ctx, k, name, rows ? 2 : 1, global, local);
    return st;
}

static int tokens(const teeny_tensor *nchw)
{
    return (int)(nchw->shape[2] * nchw->shape[3]);
}

teeny_status teeny__psa_pack_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *qkv = a->in[0];
    teeny_tensor *packed = a->out[0];
    return psa_launch(ctx, "psa_pack", NULL, qkv->buf, teeny__off(qkv), NULL, 0, packed->buf, teeny__off(packed), NULL, 0,
                      a->attrs.psa.heads, tokens(qkv), a->attrs.psa.key_dim, (int)packed->numel);
}

teeny_status teeny__psa_pack_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dp = a->in[2];
    teeny_tensor *dqkv = a->out[0];
    if (!dqkv)
        return TEENY_OK;
    return psa_launch(ctx, "psa_pack_backward", NULL, dp->buf, teeny__off(dp), NULL, 0, dqkv->buf, teeny__off(dqkv), NULL,
                      0, a->attrs.psa.heads, tokens(dqkv), a->attrs.psa.key_dim, (int)dqkv->numel);
}

teeny_status teeny__psa_extract_v_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *qkv = a->in[0];
    teeny_tensor *v = a->out[0];
    return psa_launch(ctx, "psa_extract_v", "psa_extract_v_cpu", qkv->buf, teeny__off(qkv), NULL, 0, v->buf, teeny__off(v), NULL, 0,
                      a->attrs.psa.heads, tokens(qkv), a->attrs.psa.key_dim, (int)v->numel);
}

teeny_status teeny__psa_extract_v_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dv = a->in[2];
    teeny_tensor *dqkv = a->out[0];
    if (!dqkv)
        return TEENY_OK;
    return psa_launch(ctx, "psa_extract_v_backward", "psa_extract_v_backward_cpu", dv->buf, teeny__off(dv), NULL, 0, dqkv->buf, teeny__off(dqkv),
                      NULL, 0, a->attrs.psa.heads, tokens(dqkv), a->attrs.psa.key_dim, (int)dqkv->numel);
}

teeny_status teeny__psa_merge_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *lo = a->in[0], *hi = a->in[1];
    teeny_tensor *out = a->out[0];
    return psa_launch(ctx, "psa_merge", NULL, lo->buf, teeny__off(lo), hi->buf, teeny__off(hi), out->buf, teeny__off(out),
                      NULL, 0, a->attrs.psa_merge.heads, (int)lo->shape[1], (int)lo->shape[2], (int)out->numel);
}

teeny_status teeny__psa_merge_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dout = a->in[3];
    teeny_tensor *dlo = a->out[0], *dhi = a->out[1];
    if (!dlo && !dhi)
        return TEENY_OK;
    /* the kernel writes both halves; a missing one goes to a scratch copy */
    int heads = a->attrs.psa_merge.heads, n = tokens(dout), kd = (int)(dout->shape[1] / (2 * heads));
    int total = (int)(dout->numel / 2), lo_off = dlo ? teeny__off(dlo) : 0, hi_off = dhi ? teeny__off(dhi) : 0;
    cl_mem lo = dlo ? dlo->buf : NULL, hi = dhi ? dhi->buf : NULL, tmp;
    if (!lo || !hi) {
        teeny_status st = teeny__scratch(ctx, (size_t)total * sizeof(float), &tmp);
        if (st != TEENY_OK)
            return st;
        if (!lo)
            lo = tmp;
        else
            hi = tmp;
    }
    return psa_launch(ctx, "psa_merge_backward", NULL, dout->buf, teeny__off(dout), NULL, 0, lo, lo_off, hi, hi_off, heads,
                      n, kd, total);
}

/* ---- graph shapes ---- */

static teeny_status infer_qkv(teeny_ctx *ctx, const char *op, const teeny__node_shapes *s, int64_t *B, int64_t *kd)
{
    const teeny__shape *x = &s->in[0];
    int64_t heads = s->attrs.psa.heads;
    *kd = s->attrs.psa.key_dim;
    if (heads < 1 || *kd < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: heads %lld and key_dim %lld must be >= 1", op, (long long)heads,
                            (long long)*kd);
    int64_t channels = teeny__mul_sizes(teeny__mul_sizes(heads, 4), *kd);
    if (channels < 0 || channels > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "%s: heads*4*key_dim beyond int32", op);
    if (s->n_in != 1 || x->ndim != 4 || x->shape[1] != heads * 4 * *kd)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: qkv must be [B, heads*4*key_dim = %lld, H, W]", op,
                            (long long)(heads * 4 * *kd));
    *B = x->shape[0];
    return TEENY_OK;
}

teeny_status teeny__psa_attention_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    int64_t B, kd;
    teeny_status st = infer_qkv(ctx, "psa_attention", s, &B, &kd);
    if (st != TEENY_OK)
        return st;
    if (kd > PSA_MAX_KD)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "psa_attention: key_dim %lld above the maximum %d",
                            (long long)kd, PSA_MAX_KD);
    const teeny__shape *x = &s->in[0];
    s->out = (teeny__shape){.ndim = 4, .shape = {B, x->shape[1] / 2, x->shape[2], x->shape[3]}};
    s->n_saved = 1;
    s->saved[0] = (teeny__shape){.ndim = 2, .shape = {B * s->attrs.psa.heads, x->shape[2] * x->shape[3]}};
    s->saved_needs_training = 1;
    return TEENY_OK;
}

teeny_status teeny__psa_pack_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    int64_t B, kd;
    teeny_status st = infer_qkv(ctx, "psa_pack_qkv", s, &B, &kd);
    if (st == TEENY_OK)
        s->out = (teeny__shape){.ndim = 4,
                                .shape = {4, B * s->attrs.psa.heads, s->in[0].shape[2] * s->in[0].shape[3], kd}};
    return st;
}

teeny_status teeny__psa_extract_v_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    int64_t B, kd;
    teeny_status st = infer_qkv(ctx, "psa_extract_v", s, &B, &kd);
    if (st == TEENY_OK)
        s->out = (teeny__shape){.ndim = 4, .shape = {B, s->in[0].shape[1] / 2, s->in[0].shape[2], s->in[0].shape[3]}};
    return st;
}

teeny_status teeny__psa_merge_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *lo = &s->in[0], *hi = &s->in[1];
    int64_t heads = s->attrs.psa_merge.heads, H = s->attrs.psa_merge.height, W = s->attrs.psa_merge.width;
    if (heads < 1 || H < 1 || W < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "psa_merge_attn: heads, H, W must be >= 1");
    if (s->n_in != 2 || lo->ndim != 3 || hi->ndim != 3 || lo->shape[0] != hi->shape[0] ||
        lo->shape[1] != hi->shape[1] || lo->shape[2] != hi->shape[2] || lo->shape[0] % heads ||
        lo->shape[1] != H * W)
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "psa_merge_attn: o_lo, o_hi must both be [B*heads, H*W, key_dim] with heads %lld, "
                            "H*W %lld",
                            (long long)heads, (long long)(H * W));
    if (heads * 2 * lo->shape[2] > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "psa_merge_attn: heads*2*key_dim beyond int32");
    s->out = (teeny__shape){.ndim = 4, .shape = {lo->shape[0] / heads, heads * 2 * lo->shape[2], H, W}};
    return TEENY_OK;
}

/* ---- validation and the eager API ---- */

/* t must be fp32 of ctx with exactly shape want[0..ndim). */
static teeny_status check_shape(teeny_ctx *ctx, const char *fn, const teeny_tensor *t, const char *name, int ndim,
                                const int64_t *want, const char *what)
{
    char s[96], w[128];
    int ok;
    teeny_status st = teeny__check_tensor(ctx, t, name);
    if (st != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == want[i];
    if (ok)
        return TEENY_OK;
    return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %s has shape %s; expected %s (%s)", fn, name,
                        teeny__shape_str(t, s, sizeof s), teeny__dims_str(want, ndim, w, sizeof w), what);
}

static teeny_status check_heads(teeny_ctx *ctx, const char *fn, int heads, int kd, int per_head)
{
    if (heads < 1 || kd < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: heads %d and key_dim %d must be >= 1", fn, heads, kd);
    int64_t channels = teeny__mul_sizes(teeny__mul_sizes(heads, per_head), kd);
    if (channels < 0 || channels > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "%s: heads*%d*key_dim = %d*%d*%d is beyond int32 indexing", fn,
                            per_head, heads, per_head, kd);
    return TEENY_OK;
}

/* An NCHW tensor [B, heads*per_head*kd, H, W]; B, H, W from it. */
static teeny_status check_nchw(teeny_ctx *ctx, const char *fn, const teeny_tensor *t, const char *name, int heads,
                               int kd, int per_head)
{
    char s[96];
    teeny_status st = teeny__check_tensor(ctx, t, name);
    if (st != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    if (t->ndim != 4 || t->shape[1] != (int64_t)heads * per_head * kd)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: %s has shape %s; expected [B, heads*%d*key_dim = %lld, H, W]",
                            fn, name, teeny__shape_str(t, s, sizeof s), per_head, (long long)heads * per_head * kd);
    return TEENY_OK;
}

static teeny_status check_kd(teeny_ctx *ctx, const char *fn, int kd)
{
    if (kd > PSA_MAX_KD)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "%s: key_dim %d; fused PSA attention supports up to %d", fn,
                            kd, PSA_MAX_KD);
    return TEENY_OK;
}

teeny_status teeny_psa_attention_forward(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim,
                                         teeny_tensor *o, teeny_tensor *lse)
{
    static const char fn[] = "teeny_psa_attention_forward";
    teeny_status st;
    EAGER_BEGIN("teeny_psa_attention_forward");
    if ((st = check_heads(ctx, fn, heads, key_dim, 4)) != TEENY_OK || (st = check_kd(ctx, fn, key_dim)) != TEENY_OK ||
        (st = check_nchw(ctx, fn, qkv, "qkv", heads, key_dim, 4)) != TEENY_OK)
        return st;
    int64_t os[4] = {qkv->shape[0], (int64_t)heads * 2 * key_dim, qkv->shape[2], qkv->shape[3]};
    int64_t ls[2] = {qkv->shape[0] * heads, qkv->shape[2] * qkv->shape[3]};
    if ((st = check_shape(ctx, fn, o, "o", 4, os, "B, H, W of qkv")) != TEENY_OK ||
        (lse && (st = check_shape(ctx, fn, lse, "lse", 2, ls, "[B*heads, H*W]")) != TEENY_OK))
        return st;
    const teeny_tensor *all[] = {qkv, o, lse};
    const char *names[] = {"qkv", "o", "lse"};
    if ((st = teeny__check_disjoint(ctx, fn, all, names, 1, 3)) != TEENY_OK)
        return st;
    teeny__op_args args = {.in = {qkv}, .out = {o, lse}, .attrs.psa = {heads, key_dim}};
    return teeny__op_run(ctx, TEENY__OP_PSA_ATTENTION, 0, &args);
}

teeny_status teeny_psa_attention_backward(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim,
                                          const teeny_tensor *o, const teeny_tensor *lse, const teeny_tensor *d_o,
                                          teeny_tensor *d_qkv)
{
    static const char fn[] = "teeny_psa_attention_backward";
    teeny_status st;
    EAGER_BEGIN("teeny_psa_attention_backward");
    if ((st = check_heads(ctx, fn, heads, key_dim, 4)) != TEENY_OK || (st = check_kd(ctx, fn, key_dim)) != TEENY_OK ||
        (st = check_nchw(ctx, fn, qkv, "qkv", heads, key_dim, 4)) != TEENY_OK)
        return st;
    int64_t os[4] = {qkv->shape[0], (int64_t)heads * 2 * key_dim, qkv->shape[2], qkv->shape[3]};
    int64_t ls[2] = {qkv->shape[0] * heads, qkv->shape[2] * qkv->shape[3]};
    if ((st = check_shape(ctx, fn, o, "o", 4, os, "B, H, W of qkv")) != TEENY_OK ||
        (st = check_shape(ctx, fn, d_o, "d_o", 4, os, "B, H, W of qkv")) != TEENY_OK ||
        (st = check_shape(ctx, fn, lse, "lse", 2, ls, "[B*heads, H*W]")) != TEENY_OK ||
        (st = check_shape(ctx, fn, d_qkv, "d_qkv", 4, qkv->shape, "the shape of qkv")) != TEENY_OK)
        return st;
    const teeny_tensor *all[] = {qkv, o, lse, d_o, d_qkv};
    const char *names[] = {"qkv", "o", "lse", "d_o", "d_qkv"};
    if ((st = teeny__check_disjoint(ctx, fn, all, names, 4, 5)) != TEENY_OK)
        return st;
    teeny__op_args args = {.in = {qkv, o, lse, d_o}, .out = {d_qkv}, .attrs.psa = {heads, key_dim}};
    return teeny__op_run(ctx, TEENY__OP_PSA_ATTENTION, 1, &args);
}

teeny_status teeny_psa_pack_qkv(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim,
                                teeny_tensor *packed)
{
    static const char fn[] = "teeny_psa_pack_qkv";
    teeny_status st;
    EAGER_BEGIN("teeny_psa_pack_qkv");
    if ((st = check_heads(ctx, fn, heads, key_dim, 4)) != TEENY_OK ||
        (st = check_nchw(ctx, fn, qkv, "qkv", heads, key_dim, 4)) != TEENY_OK)
        return st;
    int64_t ps[4] = {4, qkv->shape[0] * heads, qkv->shape[2] * qkv->shape[3], key_dim};
    if ((st = check_shape(ctx, fn, packed, "packed", 4, ps, "[4, B*heads, H*W, key_dim]")) != TEENY_OK)
        return st;
    if (teeny__overlap(packed, qkv))
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: packed overlaps qkv in memory", fn);
    teeny__op_args args = {.in = {qkv}, .out = {packed}, .attrs.psa = {heads, key_dim}};
    return teeny__op_run(ctx, TEENY__OP_PSA_PACK_QKV, 0, &args);
}

teeny_status teeny_psa_pack_qkv_backward(teeny_ctx *ctx, const teeny_tensor *d_packed, int heads, int key_dim,
                                         teeny_tensor *d_qkv)
{
    static const char fn[] = "teeny_psa_pack_qkv_backward";
    teeny_status st;
    EAGER_BEGIN("teeny_psa_pack_qkv_backward");
    if ((st = check_heads(ctx, fn, heads, key_dim, 4)) != TEENY_OK ||
        (st = check_nchw(ctx, fn, d_qkv, "d_qkv", heads, key_dim, 4)) != TEENY_OK)
        return st;
    int64_t ps[4] = {4, d_qkv->shape[0] * heads, d_qkv->shape[2] * d_qkv->shape[3], key_dim};
    if ((st = check_shape(ctx, fn, d_packed, "d_packed", 4, ps, "[4, B*heads, H*W, key_dim] of d_qkv")) != TEENY_OK)
        return st;
    if (teeny__overlap(d_qkv, d_packed))
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: d_qkv overlaps d_packed in memory", fn);
    teeny__op_args args = {.in = {NULL, NULL, d_packed}, .out = {d_qkv}, .attrs.psa = {heads, key_dim}};
    return teeny__op_run(ctx, TEENY__OP_PSA_PACK_QKV, 1, &args);
}

teeny_status teeny_psa_extract_v(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim, teeny_tensor *v)
{
    static const char fn[] = "teeny_psa_extract_v";
    teeny_status st;
    EAGER_BEGIN("teeny_psa_extract_v");
    if ((st = check_heads(ctx, fn, heads, key_dim, 4)) != TEENY_OK ||
        (st = check_nchw(ctx, fn, qkv, "qkv", heads, key_dim, 4)) != TEENY_OK)
        return st;
    int64_t vs[4] = {qkv->shape[0], (int64_t)heads * 2 * key_dim, qkv->shape[2], qkv->shape[3]};
    if ((st = check_shape(ctx, fn, v, "v", 4, vs, "B, H, W of qkv")) != TEENY_OK)
        return st;
    if (teeny__overlap(v, qkv))
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: v overlaps qkv in memory", fn);
    teeny__op_args args = {.in = {qkv}, .out = {v}, .attrs.psa = {heads, key_dim}};
    return teeny__op_run(ctx, TEENY__OP_PSA_EXTRACT_V, 0, &args);
}

teeny_status teeny_psa_extract_v_backward(teeny_ctx *ctx, const teeny_tensor *d_v, int heads, int key_dim,
                                          teeny_tensor *d_qkv)
{
    static const char fn[] = "teeny_psa_extract_v_backward";
    teeny_status st;
    EAGER_BEGIN("teeny_psa_extract_v_backward");
    if ((st = check_heads(ctx, fn, heads, key_dim, 4)) != TEENY_OK ||
        (st = check_nchw(ctx, fn, d_qkv, "d_qkv", heads, key_dim, 4)) != TEENY_OK)
        return st;
    int64_t vs[4] = {d_qkv->shape[0], (int64_t)heads * 2 * key_dim, d_qkv->shape[2], d_qkv->shape[3]};
    if ((st = check_shape(ctx, fn, d_v, "d_v", 4, vs, "B, H, W of d_qkv")) != TEENY_OK)
        return st;
    if (teeny__overlap(d_qkv, d_v))
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: d_qkv overlaps d_v in memory", fn);
    teeny__op_args args = {.in = {NULL, NULL, d_v}, .out = {d_qkv}, .attrs.psa = {heads, key_dim}};
    return teeny__op_run(ctx, TEENY__OP_PSA_EXTRACT_V, 1, &args);
}

teeny_status teeny_psa_merge_attn(teeny_ctx *ctx, const teeny_tensor *o_lo, const teeny_tensor *o_hi, int heads,
                                  teeny_tensor *out)
{
    static const char fn[] = "teeny_psa_merge_attn";
    char s[96];
    teeny_status st;
    EAGER_BEGIN("teeny_psa_merge_attn");
    if ((st = teeny__check_tensor(ctx, o_lo, "o_lo")) != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    if (o_lo->ndim != 3)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: o_lo has shape %s; expected [B*heads, H*W, key_dim]", fn,
                            teeny__shape_str(o_lo, s, sizeof s));
    if ((st = check_shape(ctx, fn, o_hi, "o_hi", 3, o_lo->shape, "the shape of o_lo")) != TEENY_OK ||
        (st = check_heads(ctx, fn, heads, (int)o_lo->shape[2], 2)) != TEENY_OK)
        return st;
    if (o_lo->shape[0] % heads)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: B*heads = %lld is not a multiple of heads = %d", fn,
                            (long long)o_lo->shape[0], heads);
    if ((st = check_nchw(ctx, fn, out, "out", heads, (int)o_lo->shape[2], 2)) != TEENY_OK)
        return st;
    if (out->shape[0] * heads != o_lo->shape[0] || out->shape[2] * out->shape[3] != o_lo->shape[1])
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: out has shape %s; expected B*heads = %lld, H*W = %lld", fn,
                            teeny__shape_str(out, s, sizeof s), (long long)o_lo->shape[0], (long long)o_lo->shape[1]);
    const teeny_tensor *all[] = {o_lo, o_hi, out};
    const char *names[] = {"o_lo", "o_hi", "out"};
    if ((st = teeny__check_disjoint(ctx, fn, all, names, 2, 3)) != TEENY_OK)
        return st;
    teeny__op_args args = {.in = {o_lo, o_hi}, .out = {out},
                           .attrs.psa_merge = {heads, (int)out->shape[2], (int)out->shape[3]}};
    return teeny__op_run(ctx, TEENY__OP_PSA_MERGE_ATTN, 0, &args);
}

teeny_status teeny_psa_merge_attn_backward(teeny_ctx *ctx, const teeny_tensor *d_out, int heads, teeny_tensor *d_lo,
                                           teeny_tensor *d_hi)
{
    static const char fn[] = "teeny_psa_merge_attn_backward";
    char s[96];
    teeny_status st;
    EAGER_BEGIN("teeny_psa_merge_attn_backward");
    if ((st = teeny__check_tensor(ctx, d_out, "d_out")) != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    if (heads < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: heads %d must be >= 1", fn, heads);
    if (d_out->ndim != 4 || d_out->shape[1] % (2 * (int64_t)heads))
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "%s: d_out has shape %s; expected [B, heads*2*key_dim, H, W] with heads = %d", fn,
                            teeny__shape_str(d_out, s, sizeof s), heads);
    int64_t ls[3] = {d_out->shape[0] * heads, d_out->shape[2] * d_out->shape[3], d_out->shape[1] / (2 * heads)};
    if (!d_lo && !d_hi)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: d_lo and d_hi are both NULL", fn);
    if ((d_lo && (st = check_shape(ctx, fn, d_lo, "d_lo", 3, ls, "[B*heads, H*W, key_dim] of d_out")) != TEENY_OK) ||
        (d_hi && (st = check_shape(ctx, fn, d_hi, "d_hi", 3, ls, "[B*heads, H*W, key_dim] of d_out")) != TEENY_OK))
        return st;
    const teeny_tensor *all[] = {d_out, d_lo, d_hi};
    const char *names[] = {"d_out", "d_lo", "d_hi"};
    if ((st = teeny__check_disjoint(ctx, fn, all, names, 1, 3)) != TEENY_OK)
        return st;
    teeny__op_args args = {.in = {NULL, NULL, NULL, d_out},
                           .out = {d_lo, d_hi},
                           .attrs.psa_merge = {heads, (int)d_out->shape[2], (int)d_out->shape[3]}};
    return teeny__op_run(ctx, TEENY__OP_PSA_MERGE_ATTN, 1, &args);
}

/* ---- graph builders ---- */

teeny_status teeny_graph_psa_attention(teeny_graph *g, const char *name, teeny_node qkv, int heads, int key_dim,
                                       teeny_node *out)
{
    teeny__op_attrs at = {.psa = {heads, key_dim}};
    return teeny__graph_node(g, TEENY__OP_PSA_ATTENTION, name, 1, &qkv, &at, out);
}

teeny_status teeny_graph_psa_pack_qkv(teeny_graph *g, const char *name, teeny_node qkv, int heads, int key_dim,
                                      teeny_node *out)
{
    teeny__op_attrs at = {.psa = {heads, key_dim}};
    return teeny__graph_node(g, TEENY__OP_PSA_PACK_QKV, name, 1, &qkv, &at, out);
}

teeny_status teeny_graph_psa_extract_v(teeny_graph *g, const char *name, teeny_node qkv, int heads, int key_dim,
                                       teeny_node *out)
{
    teeny__op_attrs at = {.psa = {heads, key_dim}};
    return teeny__graph_node(g, TEENY__OP_PSA_EXTRACT_V, name, 1, &qkv, &at, out);
}

teeny_status teeny_graph_psa_merge_attn(teeny_graph *g, const char *name, teeny_node o_lo, teeny_node o_hi,
                                        int heads, int height, int width, teeny_node *out)
{
    teeny__op_attrs at = {.psa_merge = {heads, height, width}};
    teeny_node in[2] = {o_lo, o_hi};
    return teeny__graph_node(g, TEENY__OP_PSA_MERGE_ATTN, name, 2, in, &at, out);
}
