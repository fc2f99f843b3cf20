/*
 * attention_op.c -- the attention op: its op-table entry (a contiguous
 * [BH, N, C] tensor per matrix, run by attention.c's flash kernels), its
 * shapes (the one validator of the graph and the eager API) and the eager
 * API. Layouts and limits are described in attention.c.
 *
 * Op-table entry (slots TEENY__ATTENTION_*, ops.h): inputs q, k, v; no
 * params; value o; saved lse; attrs.attention.scale.
 *   forward:  in  = [q, k, v]            out = [o, lse]   (lse may be NULL)
 *   backward: in  = [q, k, v, o, lse, d_o]
 *             out = [dq, dk, dv]; any may be NULL (not computed)
 */
#include <math.h>
#include <string.h>

#include "ops.h"

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

static void problem_of(const teeny_tensor *q, const teeny_tensor *k, const teeny_tensor *v, float scale,
                       teeny__attn_problem *p)
{
    p->bh = (int)q->shape[0];
    p->heads = 1;
    p->n_q = (int)q->shape[1];
    p->n_k = (int)k->shape[1];
    p->d = (int)q->shape[2];
    p->dv = (int)v->shape[2];
    p->scale = scale;
    p->q = mat_of(q);
    p->k = mat_of(k);
    p->v = mat_of(v);
}

teeny_status teeny__attention_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny__attn_problem p = {0};
    const teeny_tensor *lse = a->out[TEENY__ATTENTION_OUT_LSE];
    problem_of(a->in[TEENY__ATTENTION_Q], a->in[TEENY__ATTENTION_K], a->in[TEENY__ATTENTION_V],
               a->attrs.attention.scale, &p);
    p.o = mat_of(a->out[TEENY__OUT_VALUE]);
    p.lse = lse ? lse->buf : NULL;
    p.lse_off = lse ? teeny__off(lse) : 0;
    return teeny__attn_forward_run(ctx, &p);
}

teeny_status teeny__attention_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny__attn_problem p = {0};
    problem_of(a->in[TEENY__ATTENTION_Q], a->in[TEENY__ATTENTION_K], a->in[TEENY__ATTENTION_V],
               a->attrs.attention.scale, &p);
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

/* q [BH, Nq, D], k [BH, Nk, D], v [BH, Nk, Dv] -> o [BH, Nq, Dv], saved lse
 * [BH, Nq] (training only). */
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
    s->out = (teeny__shape){.ndim = 3, .shape = {q->shape[0], q->shape[1], v->shape[2]}};
    s->n_saved = 1;
    s->saved[0] = (teeny__shape){.ndim = 2, .shape = {q->shape[0], q->shape[1]}};
    s->saved_needs_training = 1;
    return TEENY_OK;
}

teeny_status teeny_attention_forward(teeny_ctx *ctx, const teeny_tensor *q, const teeny_tensor *k,
                                     const teeny_tensor *v, float scale, teeny_tensor *o, teeny_tensor *lse)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_attention_forward", ATTENTION, attention, forward),
                      .attrs.attention = {scale}};
    const teeny__earg args[] = {{"q", q, TEENY__ATTENTION_Q, 0},
                                {"k", k, TEENY__ATTENTION_K, 0},
                                {"v", v, TEENY__ATTENTION_V, 0},
                                {"o", o, TEENY__OUT_VALUE, TEENY__EA_OUT},
                                {"lse", lse, TEENY__ATTENTION_OUT_LSE, TEENY__EA_OUT | TEENY__EA_OPTIONAL}};
    EAGER_BEGIN("teeny_attention_forward");
    return teeny__eager_run(ctx, &e, args, 5);
}

teeny_status teeny_attention_backward(teeny_ctx *ctx, const teeny_tensor *q, const teeny_tensor *k,
                                      const teeny_tensor *v, const teeny_tensor *o, const teeny_tensor *lse,
                                      const teeny_tensor *d_o, float scale, teeny_tensor *dq, teeny_tensor *dk,
                                      teeny_tensor *dv)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_attention_backward", ATTENTION, attention, backward),
                      .attrs.attention = {scale}};
    const teeny__earg args[] = {{"q", q, TEENY__ATTENTION_Q, 0},
                                {"k", k, TEENY__ATTENTION_K, 0},
                                {"v", v, TEENY__ATTENTION_V, 0},
                                {"o", o, TEENY__ATTENTION_O, 0},
                                {"lse", lse, TEENY__ATTENTION_LSE, 0},
                                {"d_o", d_o, TEENY__ATTENTION_DO, 0},
                                {"dq", dq, TEENY__ATTENTION_Q, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"dk", dk, TEENY__ATTENTION_K, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"dv", dv, TEENY__ATTENTION_V, TEENY__EA_OUT | TEENY__EA_OPTIONAL}};
    EAGER_BEGIN("teeny_attention_backward");
    return teeny__eager_run(ctx, &e, args, 9);
}
