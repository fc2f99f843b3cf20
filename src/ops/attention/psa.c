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
 * Op-table entries (slots TEENY__PSA_*, ops.h; attrs.psa = {heads, key_dim}
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
#include <string.h>

#include "../ops.h"

#define PSA_MAX_KD TEENY__ATTN_MAX_D /* key_dim is the flash kernels' D; Dv = 2 key_dim */

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
    const teeny_tensor *lse = a->out[TEENY__PSA_ATTENTION_OUT_LSE];
    psa_problem(a->in[TEENY__PSA_ATTENTION_QKV], heads, kd, &p);
    p.o = psa_out_mat(a->out[TEENY__OUT_VALUE], heads, kd);
    p.lse = lse ? lse->buf : NULL;
    p.lse_off = lse ? teeny__off(lse) : 0;
    return teeny__attn_forward_run(ctx, &p);
}

teeny_status teeny__psa_attention_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny__attn_problem p = {0}, g = {0};
    int heads = a->attrs.psa.heads, kd = a->attrs.psa.key_dim;
    const teeny_tensor *dqkv = a->out[TEENY__PSA_ATTENTION_QKV], *lse = a->in[TEENY__PSA_ATTENTION_LSE];
    if (!dqkv)
        return TEENY_OK;
    psa_problem(a->in[TEENY__PSA_ATTENTION_QKV], heads, kd, &p);
    psa_problem(dqkv, heads, kd, &g); /* d_qkv has qkv's layout */
    p.o = psa_out_mat(a->in[TEENY__PSA_ATTENTION_O], heads, kd);
    p.lse = lse->buf;
    p.lse_off = teeny__off(lse);
    p.d_o = psa_out_mat(a->in[TEENY__PSA_ATTENTION_DO], heads, kd);
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
    const teeny_tensor *qkv = a->in[TEENY__PSA_PACK_QKV_QKV];
    teeny_tensor *packed = a->out[TEENY__OUT_VALUE];
    return psa_launch(ctx, "psa_pack", NULL, qkv->buf, teeny__off(qkv), NULL, 0, packed->buf, teeny__off(packed), NULL, 0,
                      a->attrs.psa.heads, tokens(qkv), a->attrs.psa.key_dim, (int)packed->numel);
}

teeny_status teeny__psa_pack_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dp = a->in[TEENY__PSA_PACK_QKV_DPACKED];
    teeny_tensor *dqkv = a->out[TEENY__PSA_PACK_QKV_QKV];
    if (!dqkv)
        return TEENY_OK;
    return psa_launch(ctx, "psa_pack_backward", NULL, dp->buf, teeny__off(dp), NULL, 0, dqkv->buf, teeny__off(dqkv), NULL,
                      0, a->attrs.psa.heads, tokens(dqkv), a->attrs.psa.key_dim, (int)dqkv->numel);
}

teeny_status teeny__psa_extract_v_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *qkv = a->in[TEENY__PSA_EXTRACT_V_QKV];
    teeny_tensor *v = a->out[TEENY__OUT_VALUE];
    return psa_launch(ctx, "psa_extract_v", "psa_extract_v_cpu", qkv->buf, teeny__off(qkv), NULL, 0, v->buf, teeny__off(v), NULL, 0,
                      a->attrs.psa.heads, tokens(qkv), a->attrs.psa.key_dim, (int)v->numel);
}

teeny_status teeny__psa_extract_v_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dv = a->in[TEENY__PSA_EXTRACT_V_DV];
    teeny_tensor *dqkv = a->out[TEENY__PSA_EXTRACT_V_QKV];
    if (!dqkv)
        return TEENY_OK;
    return psa_launch(ctx, "psa_extract_v_backward", "psa_extract_v_backward_cpu", dv->buf, teeny__off(dv), NULL, 0, dqkv->buf, teeny__off(dqkv),
                      NULL, 0, a->attrs.psa.heads, tokens(dqkv), a->attrs.psa.key_dim, (int)dqkv->numel);
}

teeny_status teeny__psa_merge_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *lo = a->in[TEENY__PSA_MERGE_ATTN_LO], *hi = a->in[TEENY__PSA_MERGE_ATTN_HI];
    teeny_tensor *out = a->out[TEENY__OUT_VALUE];
    return psa_launch(ctx, "psa_merge", NULL, lo->buf, teeny__off(lo), hi->buf, teeny__off(hi), out->buf, teeny__off(out),
                      NULL, 0, a->attrs.psa_merge.heads, (int)lo->shape[1], (int)lo->shape[2], (int)out->numel);
}

teeny_status teeny__psa_merge_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dout = a->in[TEENY__PSA_MERGE_ATTN_DOUT];
    teeny_tensor *dlo = a->out[TEENY__PSA_MERGE_ATTN_LO], *dhi = a->out[TEENY__PSA_MERGE_ATTN_HI];
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

/* ---- shapes and the eager API ---- */

/* qkv [B, heads*4*key_dim, H, W]. */
static teeny_status infer_qkv(teeny_ctx *ctx, const teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    int64_t heads = s->attrs.psa.heads, kd = s->attrs.psa.key_dim;
    char b[96];
    if (heads < 1 || kd < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "heads %lld and key_dim %lld must be >= 1", (long long)heads,
                            (long long)kd);
    int64_t channels = teeny__mul_sizes(teeny__mul_sizes(heads, 4), kd);
    if (channels < 0 || channels > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "heads*4*key_dim = %lld*4*%lld is beyond int32 indexing",
                            (long long)heads, (long long)kd);
    if (s->n_in != 1 || x->ndim != 4 || x->is_i32 || x->shape[1] != channels)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "qkv has shape %s%s; expected fp32 [B, heads*4*key_dim = %lld, H, W]",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b), x->is_i32 ? " int32" : "",
                            (long long)channels);
    return TEENY_OK;
}

/* qkv -> o [B, heads*2*key_dim, H, W], saved lse [B*heads, H*W]. */
teeny_status teeny__psa_attention_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    teeny_status st = infer_qkv(ctx, s);
    if (st != TEENY_OK)
        return st;
    if (s->attrs.psa.key_dim > PSA_MAX_KD)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "key_dim %d; fused PSA attention supports up to %d",
                            s->attrs.psa.key_dim, PSA_MAX_KD);
    s->out = (teeny__shape){.ndim = 4, .shape = {x->shape[0], x->shape[1] / 2, x->shape[2], x->shape[3]}};
    s->n_saved = 1;
    s->saved[0] = (teeny__shape){.ndim = 2, .shape = {x->shape[0] * s->attrs.psa.heads, x->shape[2] * x->shape[3]}};
    s->saved_needs_training = 1;
    return TEENY_OK;
}

/* qkv -> packed [4, B*heads, H*W, key_dim]. */
teeny_status teeny__psa_pack_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    teeny_status st = infer_qkv(ctx, s);
    if (st == TEENY_OK)
        s->out = (teeny__shape){
            .ndim = 4, .shape = {4, x->shape[0] * s->attrs.psa.heads, x->shape[2] * x->shape[3], s->attrs.psa.key_dim}};
    return st;
}

/* qkv -> v [B, heads*2*key_dim, H, W]. */
teeny_status teeny__psa_extract_v_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    teeny_status st = infer_qkv(ctx, s);
    if (st == TEENY_OK)
        s->out = (teeny__shape){.ndim = 4, .shape = {x->shape[0], x->shape[1] / 2, x->shape[2], x->shape[3]}};
    return st;
}

/* o_lo, o_hi [B*heads, H*W, key_dim] -> out [B, heads*2*key_dim, H, W]. */
teeny_status teeny__psa_merge_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *lo = &s->in[0], *hi = &s->in[1];
    int64_t heads = s->attrs.psa_merge.heads, H = s->attrs.psa_merge.height, W = s->attrs.psa_merge.width;
    char b[96], c[96];
    if (heads < 1 || H < 1 || W < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "heads %lld, H %lld and W %lld must be >= 1", (long long)heads,
                            (long long)H, (long long)W);
    if (s->n_in != 2 || lo->ndim != 3 || lo->is_i32)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "o_lo has shape %s; expected fp32 [B*heads, H*W, key_dim]",
                            teeny__dims_str(lo->shape, lo->ndim, b, sizeof b));
    if (hi->ndim != 3 || hi->is_i32 || memcmp(hi->shape, lo->shape, sizeof(int64_t) * 3))
        return teeny__error(ctx, TEENY_ERR_SHAPE, "o_hi has shape %s; expected o_lo's %s",
                            teeny__dims_str(hi->shape, hi->ndim, b, sizeof b),
                            teeny__dims_str(lo->shape, 3, c, sizeof c));
    if (heads * 2 * lo->shape[2] > INT32_MAX)
        return teeny__error(ctx, TEENY_ERR_RANGE, "heads*2*key_dim = %lld*2*%lld is beyond int32 indexing",
                            (long long)heads, (long long)lo->shape[2]);
    if (lo->shape[0] % heads)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "B*heads = %lld is not a multiple of heads = %lld",
                            (long long)lo->shape[0], (long long)heads);
    if (lo->shape[1] != H * W)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "o_lo has %lld tokens; H*W = %lld*%lld", (long long)lo->shape[1],
                            (long long)H, (long long)W);
    s->out = (teeny__shape){.ndim = 4, .shape = {lo->shape[0] / heads, heads * 2 * lo->shape[2], H, W}};
    return TEENY_OK;
}

teeny_status teeny_psa_attention_forward(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim,
                                         teeny_tensor *o, teeny_tensor *lse)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_psa_attention_forward", PSA_ATTENTION, psa_attention, forward),
                      .attrs.psa = {heads, key_dim}};
    const teeny__earg args[] = {{"qkv", qkv, TEENY__PSA_ATTENTION_QKV, 0},
                                {"o", o, TEENY__OUT_VALUE, TEENY__EA_OUT},
                                {"lse", lse, TEENY__PSA_ATTENTION_OUT_LSE, TEENY__EA_OUT | TEENY__EA_OPTIONAL}};
    EAGER_BEGIN("teeny_psa_attention_forward");
    return teeny__eager_run(ctx, &e, args, 3);
}

teeny_status teeny_psa_attention_backward(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim,
                                          const teeny_tensor *o, const teeny_tensor *lse, const teeny_tensor *d_o,
                                          teeny_tensor *d_qkv)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_psa_attention_backward", PSA_ATTENTION, psa_attention, backward),
                      .attrs.psa = {heads, key_dim}};
    const teeny__earg args[] = {{"qkv", qkv, TEENY__PSA_ATTENTION_QKV, 0},
                                {"o", o, TEENY__PSA_ATTENTION_O, 0},
                                {"lse", lse, TEENY__PSA_ATTENTION_LSE, 0},
                                {"d_o", d_o, TEENY__PSA_ATTENTION_DO, 0},
                                {"d_qkv", d_qkv, TEENY__PSA_ATTENTION_QKV, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_psa_attention_backward");
    return teeny__eager_run(ctx, &e, args, 5);
}

teeny_status teeny_psa_pack_qkv(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim,
                                teeny_tensor *packed)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_psa_pack_qkv", PSA_PACK_QKV, psa_pack, forward),
                      .attrs.psa = {heads, key_dim}};
    const teeny__earg args[] = {{"qkv", qkv, TEENY__PSA_PACK_QKV_QKV, 0},
                                {"packed", packed, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_psa_pack_qkv");
    return teeny__eager_run(ctx, &e, args, 2);
}

/* d_qkv stands in for qkv's shape. */
teeny_status teeny_psa_pack_qkv_backward(teeny_ctx *ctx, const teeny_tensor *d_packed, int heads, int key_dim,
                                         teeny_tensor *d_qkv)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_psa_pack_qkv_backward", PSA_PACK_QKV, psa_pack, backward),
                      .attrs.psa = {heads, key_dim}};
    const teeny__earg args[] = {{"d_packed", d_packed, TEENY__PSA_PACK_QKV_DPACKED, 0},
                                {"d_qkv", d_qkv, TEENY__PSA_PACK_QKV_QKV, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_psa_pack_qkv_backward");
    return teeny__eager_run(ctx, &e, args, 2);
}

teeny_status teeny_psa_extract_v(teeny_ctx *ctx, const teeny_tensor *qkv, int heads, int key_dim, teeny_tensor *v)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_psa_extract_v", PSA_EXTRACT_V, psa_extract_v, forward),
                      .attrs.psa = {heads, key_dim}};
    const teeny__earg args[] = {{"qkv", qkv, TEENY__PSA_EXTRACT_V_QKV, 0}, {"v", v, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_psa_extract_v");
    return teeny__eager_run(ctx, &e, args, 2);
}

teeny_status teeny_psa_extract_v_backward(teeny_ctx *ctx, const teeny_tensor *d_v, int heads, int key_dim,
                                          teeny_tensor *d_qkv)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_psa_extract_v_backward", PSA_EXTRACT_V, psa_extract_v, backward),
                      .attrs.psa = {heads, key_dim}};
    const teeny__earg args[] = {{"d_v", d_v, TEENY__PSA_EXTRACT_V_DV, 0},
                                {"d_qkv", d_qkv, TEENY__PSA_EXTRACT_V_QKV, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_psa_extract_v_backward");
    return teeny__eager_run(ctx, &e, args, 2);
}

/* H and W come from out [B, heads*2*key_dim, H, W]. */
teeny_status teeny_psa_merge_attn(teeny_ctx *ctx, const teeny_tensor *o_lo, const teeny_tensor *o_hi, int heads,
                                  teeny_tensor *out)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_psa_merge_attn", PSA_MERGE_ATTN, psa_merge, forward)};
    const teeny__earg args[] = {{"o_lo", o_lo, TEENY__PSA_MERGE_ATTN_LO, 0},
                                {"o_hi", o_hi, TEENY__PSA_MERGE_ATTN_HI, 0},
                                {"out", out, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    teeny_status st;
    EAGER_BEGIN("teeny_psa_merge_attn");
    if ((st = teeny__eager_tensors(ctx, e.fn, args, 3)) != TEENY_OK ||
        (st = teeny__eager_rank(ctx, e.fn, out, "out", 4, "[B, heads*2*key_dim, H, W]")) != TEENY_OK)
        return st;
    e.attrs.psa_merge = (teeny__psa_merge_attrs){heads, (int)out->shape[2], (int)out->shape[3]};
    return teeny__eager_run(ctx, &e, args, 3);
}

/* The inputs' shapes, [B*heads, H*W, key_dim], come from d_out. */
teeny_status teeny_psa_merge_attn_backward(teeny_ctx *ctx, const teeny_tensor *d_out, int heads, teeny_tensor *d_lo,
                                           teeny_tensor *d_hi)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_psa_merge_attn_backward", PSA_MERGE_ATTN, psa_merge, backward)};
    const teeny__earg args[] = {{"d_out", d_out, TEENY__PSA_MERGE_ATTN_DOUT, 0},
                                {"d_lo", d_lo, TEENY__PSA_MERGE_ATTN_LO, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"d_hi", d_hi, TEENY__PSA_MERGE_ATTN_HI, TEENY__EA_OUT | TEENY__EA_OPTIONAL}};
    char s[96];
    teeny_status st;
    EAGER_BEGIN("teeny_psa_merge_attn_backward");
    if ((st = teeny__eager_tensors(ctx, e.fn, args, 3)) != TEENY_OK)
        return st;
    if (!d_lo && !d_hi)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: d_lo and d_hi are both NULL", e.fn);
    if (heads < 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: heads %d must be >= 1", e.fn, heads);
    if (d_out->ndim != 4 || d_out->shape[1] % (2 * (int64_t)heads))
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "%s: d_out has shape %s; expected [B, heads*2*key_dim, H, W] with "
                            "heads = %d",
                            e.fn, teeny__shape_str(d_out, s, sizeof s), heads);
    const teeny__shape half = {
        .ndim = 3,
        .shape = {d_out->shape[0] * heads, d_out->shape[2] * d_out->shape[3], d_out->shape[1] / (2 * heads)}};
    const teeny__shape in[2] = {half, half};
    e.in_shapes = in;
    e.attrs.psa_merge = (teeny__psa_merge_attrs){heads, (int)d_out->shape[2], (int)d_out->shape[3]};
    return teeny__eager_run(ctx, &e, args, 3);
}
