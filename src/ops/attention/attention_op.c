/*
 * attention_op.c -- the attention op: its op-table entry (a contiguous
 * [BH, N, C] tensor per matrix, run by attention.c's flash kernels), its
 * shapes (the one validator of the graph and the eager API) and the eager
 * API. Layouts and limits are described in attention.c.
 *
 * Op-table entry (slots TEENY__ATTENTION_*, ops.h): inputs q, k, v and
 * an optional mask; no params; value o; saved lse; attrs.attention
 * (teeny_attention_params).
 *   forward:  in  = [q, k, v, mask]      out = [o, lse]   (lse may be NULL)
 *   backward: in  = [q, k, v, mask, o, lse, d_o]
 *             out = [dq, dk, dv]; any may be NULL (not computed); a mask
 *             gradient asked for (a graph whose mask depends on a
 *             parameter) is TEENY_ERR_UNSUPPORTED
 */
#include <math.h>
#include <string.h>

#include "../ops.h"

/* ---- op-table entry ---- */

/* A contiguous [BH, N, C] tensor as a strided matrix. */
static teeny__attn_mat mat_of(const teeny_tensor *t)
{
    teeny__attn_mat m = {0};
    if (!t)
        return m;
    m.buf = t->buf;
    m.off = teeny__off(t);
    m.sb = (int)(t->shape[1] * t->shape[2]);
    m.sh = 0;
    m.sn = (int)t->shape[2];
    m.sd = 1;
    return m;
}

/* The mask's heads H: teeny_attention_params.heads, 0 meaning BH. */
static int64_t mask_heads(const teeny__attention_attrs *at, int64_t bh)
{
    return at->heads > 0 ? at->heads : bh;
}

/* The mask (checked by infer) right-aligned against [B, H, Nq, Nk]: its
 * element strides, 0 along a dim of size 1 (broadcast). */
static teeny__attn_mat mask_mat_of(const teeny_tensor *m)
{
    teeny__attn_mat r = {0};
    int64_t dims[4] = {1, 1, 1, 1}, st[4], acc = 1;
    if (!m)
        return r;
    for (int i = 0; i < m->ndim; i++)
        dims[4 - m->ndim + i] = m->shape[i];
    for (int i = 3; i >= 0; i--) {
        st[i] = dims[i] == 1 ? 0 : acc;
        acc *= dims[i];
    }
    r.buf = m->buf;
    r.off = teeny__off(m);
    r.sb = (int)st[0];
    r.sh = (int)st[1];
    r.sn = (int)st[2];
    r.sd = (int)st[3];
    return r;
}

static void problem_of(const teeny__op_args *a, teeny__attn_problem *p)
{
    const teeny_tensor *q = a->in[TEENY__ATTENTION_Q], *k = a->in[TEENY__ATTENTION_K], *v = a->in[TEENY__ATTENTION_V];
    const teeny__attention_attrs *at = &a->attrs.attention;
    p->bh = (int)q->shape[0];
    p->heads = 1;
    p->n_q = (int)q->shape[1];
    p->n_k = (int)k->shape[1];
    p->d = (int)q->shape[2];
    p->dv = (int)v->shape[2];
    p->scale = at->default_scale && at->scale == 0.0f ? (float)(1.0 / sqrt((double)p->d)) : at->scale;
    p->q = mat_of(q);
    p->k = mat_of(k);
    p->v = mat_of(v);
    p->mask = mask_mat_of(a->in[TEENY__ATTENTION_MASK]);
    p->mask_heads = (int)mask_heads(at, q->shape[0]);
    p->causal = at->causal;
    p->causal_off = at->causal_offset;
    p->softcap = at->softcap;
}

teeny_status teeny__attention_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny__attn_problem p = {0};
    const teeny_tensor *lse = a->out[TEENY__ATTENTION_OUT_LSE];
    problem_of(a, &p);
    p.o = mat_of(a->out[TEENY__OUT_VALUE]);
    p.lse = lse ? lse->buf : NULL;
    p.lse_off = lse ? teeny__off(lse) : 0;
    return teeny__attn_forward_run(ctx, &p);
}

teeny_status teeny__attention_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny__attn_problem p = {0};
    if (a->out[TEENY__ATTENTION_MASK])
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED,
                            "attention: the mask gets no gradient, and this one depends on a parameter; "
                            "detach it (build it from inputs or constants)");
    problem_of(a, &p);
    p.o = mat_of(a->in[TEENY__ATTENTION_O]);
    p.lse = a->in[TEENY__ATTENTION_LSE]->buf;
    p.lse_off = teeny__off(a->in[TEENY__ATTENTION_LSE]);
    p.d_o = mat_of(a->in[TEENY__ATTENTION_DO]);
    p.dq = mat_of(a->out[TEENY__ATTENTION_Q]);
    p.dk = mat_of(a->out[TEENY__ATTENTION_K]);
    p.dv_out = mat_of(a->out[TEENY__ATTENTION_V]);
    return teeny__attn_backward_run(ctx, &p);
}

/* ---- shapes and the eager API ---- */

/* The masks' attributes and the mask's shape (the header's rules), for
 * q's BH and the sequences Nq, Nk. */
static teeny_status infer_masks(teeny_ctx *ctx, const teeny__node_shapes *s, int64_t bh, int64_t n_q, int64_t n_k)
{
    const teeny__attention_attrs *at = &s->attrs.attention;
    char b[96], w[96];
    if (at->causal != 0 && at->causal != 1)
        return teeny__error(ctx, TEENY_ERR_ARG, "causal %d; expected 0 or 1", at->causal);
    if (!at->causal && at->causal_offset != 0)
        return teeny__error(ctx, TEENY_ERR_ARG, "causal_offset %d without causal; expected 0", at->causal_offset);
    if (at->causal_offset < -n_q || at->causal_offset > n_k)
        return teeny__error(ctx, TEENY_ERR_ARG, "causal_offset %d outside [-Nq, Nk] = [%lld, %lld]", at->causal_offset,
                            -(long long)n_q, (long long)n_k);
    if (!isfinite(at->softcap) || at->softcap < 0)
        return teeny__error(ctx, TEENY_ERR_ARG, "softcap %g; expected 0 (off) or a finite positive value",
                            (double)at->softcap);
    if (at->heads < 0 || (at->heads > 0 && bh % at->heads))
        return teeny__error(ctx, TEENY_ERR_SHAPE, "heads %d does not divide BH = %lld", at->heads, (long long)bh);
    if (n_q + n_k > INT32_MAX - 2048) /* the causal frontier row + Nk */
        return teeny__error(ctx, TEENY_ERR_RANGE, "sequence lengths %lld + %lld beyond int32 indexing",
                            (long long)n_q, (long long)n_k);
    if (s->n_in < 4)
        return TEENY_OK;
    const teeny__shape *m = &s->in[TEENY__ATTENTION_MASK];
    const int64_t heads = mask_heads(at, bh), full[4] = {bh / heads, heads, n_q, n_k};
    int ok = m->ndim >= 2 && m->ndim <= 4 && !m->is_i32;
    for (int i = 0; ok && i < m->ndim; i++) {
        int64_t want = full[4 - m->ndim + i];
        ok = m->shape[i] == 1 || m->shape[i] == want;
    }
    if (!ok)
        return teeny__error(ctx, TEENY_ERR_SHAPE,
                            "mask has shape %s; expected fp32 with 2 to 4 dims, right-aligned against [B, H, Nq, Nk] "
                            "= %s, each 1 or full (heads %lld)",
                            teeny__dims_str(m->shape, m->ndim, b, sizeof b), teeny__dims_str(full, 4, w, sizeof w),
                            (long long)heads);
    return TEENY_OK;
}

/* q [BH, Nq, D], k [BH, Nk, D], v [BH, Nk, Dv], mask (optional) -> o [BH,
 * Nq, Dv], saved lse [BH, Nq] (training only). */
teeny_status teeny__attention_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    static const char *const names[3] = {"q", "k", "v"}, *const layouts[3] = {"[BH, Nq, D]", "[BH, Nk, D]",
                                                                              "[BH, Nk, Dv]"};
    const teeny__shape *q = &s->in[0], *k = &s->in[1], *v = &s->in[2];
    char b[96], w[96];
    for (int i = 0; i < 3; i++)
        if (i >= s->n_in || s->in[i].ndim != 3 || s->in[i].is_i32)
            return teeny__error(ctx, TEENY_ERR_SHAPE, "%s has shape %s; expected fp32 %s", names[i],
                                i < s->n_in ? teeny__dims_str(s->in[i].shape, s->in[i].ndim, b, sizeof b) : "(none)",
                                layouts[i]);
    const int64_t ks[3] = {q->shape[0], k->shape[1], q->shape[2]}, vs[3] = {q->shape[0], k->shape[1], v->shape[2]};
    if (memcmp(k->shape, ks, sizeof ks))
        return teeny__error(ctx, TEENY_ERR_SHAPE, "k has shape %s; expected %s (BH and D of q)",
                            teeny__dims_str(k->shape, 3, b, sizeof b), teeny__dims_str(ks, 3, w, sizeof w));
    if (memcmp(v->shape, vs, sizeof vs))
        return teeny__error(ctx, TEENY_ERR_SHAPE, "v has shape %s; expected %s (BH of q, Nk of k)",
                            teeny__dims_str(v->shape, 3, b, sizeof b), teeny__dims_str(vs, 3, w, sizeof w));
    if (q->shape[2] > TEENY__ATTN_MAX_D || v->shape[2] > TEENY__ATTN_MAX_DV)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED,
                            "head dims D = %lld, Dv = %lld; supported up to D = %d, Dv = %d", (long long)q->shape[2],
                            (long long)v->shape[2], TEENY__ATTN_MAX_D, TEENY__ATTN_MAX_DV);
    /* tile loops step past the last row: keep that in int32 */
    if (q->shape[1] > INT32_MAX - 1024 || k->shape[1] > INT32_MAX - 1024)
        return teeny__error(ctx, TEENY_ERR_RANGE, "sequence lengths %lld, %lld beyond int32 indexing",
                            (long long)q->shape[1], (long long)k->shape[1]);
    if (!isfinite(s->attrs.attention.scale))
        return teeny__error(ctx, TEENY_ERR_ARG, "scale %g is not finite", (double)s->attrs.attention.scale);
    teeny_status st = infer_masks(ctx, s, q->shape[0], q->shape[1], k->shape[1]);
    if (st != TEENY_OK)
        return st;
    s->out = (teeny__shape){.ndim = 3, .shape = {q->shape[0], q->shape[1], v->shape[2]}};
    s->n_saved = 1;
    s->saved[0] = (teeny__shape){.ndim = 2, .shape = {q->shape[0], q->shape[1]}};
    s->saved_needs_training = 1;
    return TEENY_OK;
}

/* The four eager calls through these two: the plain ones are the _ex
 * ones without a mask, with attributes of the scale alone. */
static teeny_status attn_forward(teeny_ctx *ctx, const char *fn, teeny__attention_attrs attrs, const teeny_tensor *q,
                                 const teeny_tensor *k, const teeny_tensor *v, const teeny_tensor *mask,
                                 teeny_tensor *o, teeny_tensor *lse)
{
    teeny__eager e = {TEENY__EAGER_OF(fn, ATTENTION, attention, forward), .attrs.attention = attrs};
    const teeny__earg args[] = {{"q", q, TEENY__ATTENTION_Q, 0},
                                {"k", k, TEENY__ATTENTION_K, 0},
                                {"v", v, TEENY__ATTENTION_V, 0},
                                {"mask", mask, TEENY__ATTENTION_MASK, TEENY__EA_OPTIONAL},
                                {"o", o, TEENY__OUT_VALUE, TEENY__EA_OUT},
                                {"lse", lse, TEENY__ATTENTION_OUT_LSE, TEENY__EA_OUT | TEENY__EA_OPTIONAL}};
    return teeny__eager_run(ctx, &e, args, 6);
}

static teeny_status attn_backward(teeny_ctx *ctx, const char *fn, teeny__attention_attrs attrs, const teeny_tensor *q,
                                  const teeny_tensor *k, const teeny_tensor *v, const teeny_tensor *mask,
                                  const teeny_tensor *o, const teeny_tensor *lse, const teeny_tensor *d_o,
                                  teeny_tensor *dq, teeny_tensor *dk, teeny_tensor *dv)
{
    teeny__eager e = {TEENY__EAGER_OF(fn, ATTENTION, attention, backward), .attrs.attention = attrs};
    const teeny__earg args[] = {{"q", q, TEENY__ATTENTION_Q, 0},
                                {"k", k, TEENY__ATTENTION_K, 0},
                                {"v", v, TEENY__ATTENTION_V, 0},
                                {"mask", mask, TEENY__ATTENTION_MASK, TEENY__EA_OPTIONAL},
                                {"o", o, TEENY__ATTENTION_O, 0},
                                {"lse", lse, TEENY__ATTENTION_LSE, 0},
                                {"d_o", d_o, TEENY__ATTENTION_DO, 0},
                                {"dq", dq, TEENY__ATTENTION_Q, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"dk", dk, TEENY__ATTENTION_K, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"dv", dv, TEENY__ATTENTION_V, TEENY__EA_OUT | TEENY__EA_OPTIONAL}};
    return teeny__eager_run(ctx, &e, args, 10);
}

teeny_status teeny_attention_forward(teeny_ctx *ctx, const teeny_tensor *q, const teeny_tensor *k,
                                     const teeny_tensor *v, float scale, teeny_tensor *o, teeny_tensor *lse)
{
    EAGER_BEGIN("teeny_attention_forward");
    const teeny__attention_attrs attrs = {.scale = scale};
    return attn_forward(ctx, "teeny_attention_forward", attrs, q, k, v, NULL, o, lse);
}

teeny_status teeny_attention_backward(teeny_ctx *ctx, const teeny_tensor *q, const teeny_tensor *k,
                                      const teeny_tensor *v, const teeny_tensor *o, const teeny_tensor *lse,
                                      const teeny_tensor *d_o, float scale, teeny_tensor *dq, teeny_tensor *dk,
                                      teeny_tensor *dv)
{
    EAGER_BEGIN("teeny_attention_backward");
    const teeny__attention_attrs attrs = {.scale = scale};
    return attn_backward(ctx, "teeny_attention_backward", attrs, q, k, v, NULL, o, lse, d_o, dq, dk, dv);
}

/* The op's attributes of p (the _ex functions). */
static teeny__attention_attrs attrs_of(const teeny_attention_params *p)
{
    return (teeny__attention_attrs){p->scale, p->causal, p->causal_offset, p->heads, p->softcap, 1};
}

teeny_status teeny_attention_forward_ex(teeny_ctx *ctx, const teeny_tensor *q, const teeny_tensor *k,
                                        const teeny_tensor *v, const teeny_tensor *mask,
                                        const teeny_attention_params *p, teeny_tensor *o, teeny_tensor *lse)
{
    EAGER_BEGIN("teeny_attention_forward_ex");
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_attention_forward_ex: p is NULL");
    return attn_forward(ctx, "teeny_attention_forward_ex", attrs_of(p), q, k, v, mask, o, lse);
}

teeny_status teeny_attention_backward_ex(teeny_ctx *ctx, const teeny_tensor *q, const teeny_tensor *k,
                                         const teeny_tensor *v, const teeny_tensor *mask,
                                         const teeny_attention_params *p, const teeny_tensor *o,
                                         const teeny_tensor *lse, const teeny_tensor *d_o, teeny_tensor *dq,
                                         teeny_tensor *dk, teeny_tensor *dv)
{
    EAGER_BEGIN("teeny_attention_backward_ex");
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_attention_backward_ex: p is NULL");
    return attn_backward(ctx, "teeny_attention_backward_ex", attrs_of(p), q, k, v, mask, o, lse, d_o, dq, dk, dv);
}
