/*
 * attn_import.c -- ONNX Attention (opsets 23 and 24) and the core that it
 * and the fused MatMul-Softmax-MatMul pattern (attn_fuse.c) share,
 * teeny__ox_attention: softmax(softcap(scale q k^T) + causal + mask) v.
 *
 * The core takes q [L..., S, D], k [Lk..., T, D], v [Lk..., T, Dv] (one
 * rank, Lk broadcasting to L: grouped-query attention is q viewed as
 * [B, Hkv, r, S, D] against k [B, Hkv, 1, T, D]) and maps to the fused
 * kernel (teeny_graph_attention) where that computes the node; otherwise
 * it decomposes into graph ops (transpose, batched matmul, broadcasting
 * mul/add, tanh, softmax on the last axis). use_fused is the one place
 * that decides; masked, causal and soft-capped nodes take
 * teeny_graph_attention_ex where their shapes allow.
 *
 * Attention's semantics follow onnx 1.22's reference (op_attention.py):
 * 3-D inputs [B, S, H*D] are split into heads by q_num_heads/kv_num_heads;
 * past_key/past_value are concatenated before K/V along the sequence
 * (present_key/present_value); is_causal masks key j for query i when
 * j > i + past length (upper-left alignment without a past); a mask whose
 * last dimension is short of the total length is padded with -inf
 * (false); a bool mask is 0 where true and -inf where false; softcap
 * (> 0) applies c tanh(x / c) before the mask is added, so -inf stays
 * -inf. A row with every key masked (-inf, or false) gives 0 on every
 * path, as onnx 1.23's reference does (1.22's softmax gave NaN): the
 * fused kernel's rule, and the decomposition's through the softmax's
 * masked_zero (teeny_graph_softmax_ex; qk_matmul_output mode 3 holds
 * those zeros too). Large finite mask values (-1e30, -FLT_MAX) do not
 * mask a row: one whose every key has the same such value gives the
 * average of v, as the softmax defines. qk_matmul_output_mode (the
 * schema's words): 0 the scaled scores, 1 those after softcap, 2 after
 * softcap and the masks, 3 the softmax (the 1.22 reference gives mode 0
 * soft-capped too; no node test has mode 0 with softcap, and the schema
 * is followed).
 * nonpad_kv_seqlen (opset 24) masks keys past each batch entry's length;
 * it must be a constant (an initializer or a feed). Bool and integer
 * masks must be constants too (a fed graph input is one: check-onnx's
 * inputs are); a float mask may be a run-time input.
 */
#include <math.h>
#include <string.h>

#include "onnx_internal.h"

#define S(x) ((x) ? (x) : "")

static teeny_status scalar_const(ox_import *im, const char *suffix, float value, teeny_node *out)
{
    char buf[TEENY__NAME_CAP];
    int64_t one = 1;
    teeny_status st = teeny_graph_constant(im->g, teeny__ox_name(im, suffix, buf, sizeof buf), 1, &one, &value, out);
    return st == TEENY_OK ? st : teeny__ox_graph_fail(im, st);
}

static teeny_status binary(ox_import *im, const char *suffix, teeny_binary_op op, teeny_node a, teeny_node b,
                           teeny_node *out)
{
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny_graph_binary(im->g, teeny__ox_name(im, suffix, buf, sizeof buf), op, a, b, out);
    return st == TEENY_OK ? st : teeny__ox_graph_fail(im, st);
}

/* x with its last two axes swapped (or perm, when given). */
static teeny_status transpose(ox_import *im, const char *suffix, teeny_node x, int ndim, const int *perm,
                              teeny_node *out)
{
    int p[TEENY_MAX_DIMS];
    char buf[TEENY__NAME_CAP];
    for (int d = 0; d < ndim; d++)
        p[d] = perm ? perm[d] : d == ndim - 2 ? ndim - 1 : d == ndim - 1 ? ndim - 2 : d;
    teeny_status st = teeny_graph_transpose(im->g, teeny__ox_name(im, suffix, buf, sizeof buf), x, p, out);
    return st == TEENY_OK ? st : teeny__ox_graph_fail(im, st);
}

/* ---- the core ---- */

/* Whether the fused kernel takes this node's masks (teeny_graph_attention_ex):
 * q [B, H, S, D] or [X, S, D] with k and v of the same leading dimensions,
 * a nonzero scale (0 means 1/sqrt(D) there), a causal offset in [-S, T],
 * and a mask of rank 2 to 4 whose every dimension is 1 or q's (S, T last). */
static int masks_fit(const ox_attn *a)
{
    int n = a->qs.ndim;
    int64_t s = a->qs.d[n - 2], t = a->ks.d[n - 2];
    if (n > 4 || a->scale == 0.0f || (a->causal && (a->causal_offset < -s || a->causal_offset > t)))
        return 0;
    for (int d = 0; d < n - 2; d++)
        if (a->ks.d[d] != a->qs.d[d] || a->vs.d[d] != a->qs.d[d])
            return 0;
    if (a->mask < 0)
        return 1;
    if (a->ms.ndim < 2 || a->ms.ndim > n)
        return 0;
    for (int d = 0; d < a->ms.ndim; d++) {
        int64_t m = a->ms.d[a->ms.ndim - 1 - d], full = d == 0 ? t : a->qs.d[n - 1 - d];
        if (m != 1 && m != full)
            return 0;
    }
    return 1;
}

/* The fused kernel computes a node without the scores wanted, for head
 * sizes it takes: with masks, causal masking or softcap where masks_fit
 * says so (a row with every key masked then gives 0, as onnx 1.23's
 * reference does; the decomposition too where a->masked_zero); without them
 * where q's and k's leading dimensions agree but for k's broadcast last
 * one (folded into the queries). */
static int use_fused(const ox_attn *a, int *fold)
{
    int n = a->qs.ndim;
    *fold = 0;
    if (a->want_scores || n < 3 || a->qs.d[n - 1] > 128 || a->vs.d[n - 1] > 256)
        return 0;
    if (a->mask >= 0 || a->causal || a->softcap > 0)
        return masks_fit(a);
    for (int d = 0; d < n - 2; d++) {
        if (a->ks.d[d] == a->qs.d[d] && a->vs.d[d] == a->qs.d[d])
            continue;
        if (d != n - 3 || d == 0 || a->ks.d[d] != 1 || a->vs.d[d] != 1)
            return 0;
        *fold = 1;
    }
    return 1;
}

/* teeny_graph_attention on q [X, r S, D], k [X, T, D], v [X, T, Dv]. */
static teeny_status fused(ox_import *im, const ox_attn *a, int fold, ox_attn_out *o)
{
    int n = a->qs.ndim;
    int64_t x = 1;
    for (int d = 0; d < n - 2 - fold; d++)
        x *= a->qs.d[d];
    int64_t r = fold ? a->qs.d[n - 3] : 1, t = a->ks.d[n - 2];
    ox_shape q3 = {3, {x, r * a->qs.d[n - 2], a->qs.d[n - 1]}}, k3 = {3, {x, t, a->ks.d[n - 1]}},
             v3 = {3, {x, t, a->vs.d[n - 1]}}, y3 = {3, {x, q3.d[1], v3.d[2]}};
    teeny_node q, k, v, y;
    char buf[TEENY__NAME_CAP];
    teeny_status st;
    if ((st = teeny__ox_view_node(im, a->q, &a->qs, &q3, &q)) != TEENY_OK ||
        (st = teeny__ox_view_node(im, a->k, &a->ks, &k3, &k)) != TEENY_OK ||
        (st = teeny__ox_view_node(im, a->v, &a->vs, &v3, &v)) != TEENY_OK)
        return st;
    if (a->mask >= 0 || a->causal || a->softcap > 0) {
        teeny_attention_params p = TEENY_ATTENTION_PARAMS_INIT;
        p.scale = a->scale;
        p.causal = a->causal;
        p.causal_offset = a->causal ? (int)a->causal_offset : 0;
        p.heads = n == 4 ? (int)a->qs.d[1] : 0;
        p.softcap = a->softcap;
        st = teeny_graph_attention_ex(im->g, teeny__ox_name(im, "attention", buf, sizeof buf), q, k, v, a->mask, &p,
                                      &y);
    } else {
        st = teeny_graph_attention(im->g, teeny__ox_name(im, "attention", buf, sizeof buf), q, k, v, a->scale, &y);
    }
    if (st != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    o->ys = a->qs;
    o->ys.d[n - 1] = a->vs.d[n - 1];
    return teeny__ox_view_node(im, y, &y3, &o->ys, &o->y);
}

/* The causal mask [S, T]: -inf where key j > query i + offset. */
static teeny_status causal_mask(ox_import *im, int64_t sq, int64_t t, int64_t offset, teeny_node *out)
{
    int64_t shape[2] = {sq, t};
    float *m = teeny__malloc((size_t)(sq * t) * sizeof *m);
    char buf[TEENY__NAME_CAP];
    if (!m)
        return teeny__ox_fail(im, TEENY_ERR_NOMEM, "out of host memory");
    for (int64_t i = 0; i < sq; i++)
        for (int64_t j = 0; j < t; j++)
            m[i * t + j] = j > i + offset ? -INFINITY : 0.0f;
    teeny_status st = teeny_graph_constant(im->g, teeny__ox_name(im, "causal", buf, sizeof buf), 2, shape, m, out);
    teeny__free(m);
    return st == TEENY_OK ? st : teeny__ox_graph_fail(im, st);
}

/* The decomposition: scores, soft cap, masks, softmax, weighted sum. */
static teeny_status decomposed(ox_import *im, const ox_attn *a, ox_attn_out *o)
{
    int n = a->qs.ndim;
    teeny_node kt, s, c, p, y;
    char buf[TEENY__NAME_CAP];
    teeny_status st;
    if ((st = transpose(im, "key_t", a->k, n, NULL, &kt)) != TEENY_OK)
        return st;
    if ((st = teeny_graph_matmul(im->g, teeny__ox_name(im, "scores", buf, sizeof buf), a->q, kt, &s)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    if ((st = scalar_const(im, "scale", a->scale, &c)) != TEENY_OK ||
        (st = binary(im, "scaled", TEENY_BINARY_MUL, s, c, &s)) != TEENY_OK)
        return st;
    o->raw = s;
    if (a->softcap > 0) {
        if ((st = scalar_const(im, "inv_softcap", 1.0f / a->softcap, &c)) != TEENY_OK ||
            (st = binary(im, "softcap_in", TEENY_BINARY_MUL, s, c, &s)) != TEENY_OK)
            return st;
        if ((st = teeny_graph_activation(im->g, teeny__ox_name(im, "softcap_tanh", buf, sizeof buf), s, TEENY_ACT_TANH,
                                         &s)) != TEENY_OK)
            return teeny__ox_graph_fail(im, st);
        if ((st = scalar_const(im, "softcap", a->softcap, &c)) != TEENY_OK ||
            (st = binary(im, "capped", TEENY_BINARY_MUL, s, c, &s)) != TEENY_OK)
            return st;
    }
    o->capped = s;
    if (a->causal && ((st = causal_mask(im, a->qs.d[n - 2], a->ks.d[n - 2], a->causal_offset, &c)) != TEENY_OK ||
                      (st = binary(im, "causal_add", TEENY_BINARY_ADD, s, c, &s)) != TEENY_OK))
        return st;
    if (a->mask >= 0 && (st = binary(im, "mask_add", TEENY_BINARY_ADD, s, a->mask, &s)) != TEENY_OK)
        return st;
    o->biased = s;
    teeny_softmax_params sp = TEENY_SOFTMAX_PARAMS_INIT;
    sp.masked_zero = a->masked_zero;
    if ((st = teeny_graph_softmax_ex(im->g, teeny__ox_name(im, "probs", buf, sizeof buf), s, &sp, &p)) != TEENY_OK ||
        (st = teeny_graph_matmul(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), p, a->v, &y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    o->probs = p;
    o->y = y;
    if ((st = teeny__ox_node_shape(im, s, &o->ss)) != TEENY_OK)
        return st;
    return teeny__ox_node_shape(im, y, &o->ys);
}

teeny_status teeny__ox_attention(ox_import *im, const ox_attn *a, ox_attn_out *o)
{
    int n = a->qs.ndim, fold;
    memset(o, 0, sizeof *o);
    o->raw = o->capped = o->biased = o->probs = -1;
    if (n < 2 || a->ks.ndim != n || a->vs.ndim != n || a->ks.d[n - 1] != a->qs.d[n - 1] ||
        a->vs.d[n - 2] != a->ks.d[n - 2])
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "query, key and value shapes do not make an attention");
    if (!isfinite(a->scale))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "a scale of %g", (double)a->scale);
    return use_fused(a, &fold) ? fused(im, a, fold, o) : decomposed(im, a, o);
}

/* ---- ONNX Attention ---- */

typedef struct {
    int64_t b, hq, hkv, sq, t, past, d, dv;
    int in3d;
} attn_dims;

/* Input i (Q, K or V) as [B, H, S, D]: 4-D as it is, 3-D [B, S, H*D]
 * viewed and transposed with heads from the attribute. */
static teeny_status heads_input(ox_import *im, int i, const char *what, int64_t heads, teeny_node *n, ox_shape *s,
                                int *rank)
{
    static const int perm[4] = {0, 2, 1, 3};
    teeny_status st = teeny__ox_operand(im, i, what, n, s);
    *rank = s->ndim;
    if (st != TEENY_OK || s->ndim == 4)
        return st;
    if (s->ndim != 3)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "input %s has rank %d (3 or 4)", what, s->ndim);
    if (heads < 1 || s->d[2] % heads)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "input %s [.., %lld] with %lld heads (q_num_heads and kv_num_heads "
                              "must divide the hidden sizes)", what, (long long)s->d[2], (long long)heads);
    ox_shape v = {4, {s->d[0], s->d[1], heads, s->d[2] / heads}};
    if ((st = teeny__ox_view_node(im, *n, s, &v, n)) != TEENY_OK || (st = transpose(im, what, *n, 4, perm, n)) != TEENY_OK)
        return st;
    *s = (ox_shape){4, {v.d[0], v.d[2], v.d[1], v.d[3]}};
    return TEENY_OK;
}

/* past (input i) concatenated before x along the sequence: present. */
static teeny_status with_past(ox_import *im, int i, const char *what, teeny_node *x, ox_shape *s, int64_t *past)
{
    teeny_node p, xs[2];
    ox_shape ps;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_operand(im, i, what, &p, &ps);
    if (st != TEENY_OK)
        return st;
    if (ps.ndim != 4 || ps.d[0] != s->d[0] || ps.d[1] != s->d[1] || ps.d[3] != s->d[3])
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "%s is not [B, kv heads, P, head size] of its K/V", what);
    xs[0] = p;
    xs[1] = *x;
    if ((st = teeny_graph_concat_axis(im->g, teeny__ox_name(im, what, buf, sizeof buf), 2, 2, xs, x)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    *past = ps.d[2];
    s->d[2] += ps.d[2];
    return TEENY_OK;
}

/* A graph input's declared element type (0: none; then its feed's). */
static int graph_input_type(const ox_value *v)
{
    const Onnx__TypeProto *tp = v->vi ? v->vi->type : NULL;
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type && tp->tensor_type->has_elem_type)
        return tp->tensor_type->elem_type;
    return v->feed ? (int)v->feed->dtype : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
}

/* A constant mask as an additive fp32 graph constant, its last dimension
 * padded to t (-inf; bool: 0 where true, -inf where false). A bool graph
 * input's feed comes as int64 (teeny_onnx_feed has no bool): the declared
 * type decides. */
static teeny_status host_mask(ox_import *im, const ox_const *c, int declared, int64_t t, teeny_node *n, ox_shape *s)
{
    int is_bool = c->onnx_type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL || declared == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    int64_t m = c->shape.ndim ? c->shape.d[c->shape.ndim - 1] : 1, rows = m ? c->numel / m : 0;
    char buf[TEENY__NAME_CAP];
    if (c->type != OX_F32 && !is_bool)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attn_mask of type %s (supported: float, bool)",
                              teeny__ox_type_name(c->onnx_type));
    *s = c->shape.ndim ? c->shape : (ox_shape){1, {1}};
    s->d[s->ndim - 1] = t;
    if (m > t || c->numel < 1 || teeny__ox_numel(s) < 0)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "attn_mask's last dimension %lld for %lld keys", (long long)m,
                              (long long)t);
    float *data = teeny__malloc((size_t)(rows * t) * sizeof *data);
    if (!data)
        return teeny__ox_fail(im, TEENY_ERR_NOMEM, "out of host memory");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < t; j++) {
            double v = j < m ? teeny__ox_get_f(c, r * m + j) : is_bool ? 0 : -INFINITY;
            data[r * t + j] = is_bool ? (v != 0 ? 0.0f : -INFINITY) : (float)v;
        }
    teeny_status st = teeny_graph_constant(im->g, teeny__ox_name(im, "mask", buf, sizeof buf), s->ndim, s->d, data, n);
    teeny__free(data);
    return st == TEENY_OK ? st : teeny__ox_graph_fail(im, st);
}

/* attn_mask (input 3) as an additive node broadcastable to [B, Hq, S, t];
 * -1 when absent. */
static teeny_status attn_mask(ox_import *im, int64_t t, teeny_node *n, ox_shape *s)
{
    int idx;
    const ox_const *c;
    teeny_status st = teeny__ox_in(im, 3, &idx);
    *n = -1;
    if (st != TEENY_OK || idx < 0)
        return st;
    const ox_value *v = &im->vals[idx];
    int declared = v->kind == OX_INPUT ? graph_input_type(v) : 0;
    if (v->kind == OX_CONST || (v->kind == OX_INPUT && !teeny__ox_is_float(declared))) {
        if ((st = teeny__ox_in_const(im, 3, "attn_mask", 0, &c)) != TEENY_OK)
            return st;
        st = host_mask(im, c, declared, t, n, s);
    } else if ((st = teeny__ox_operand(im, 3, "attn_mask", n, s)) == TEENY_OK && s->ndim >= 1 &&
               s->d[s->ndim - 1] < t) {
        int64_t lo[TEENY_MAX_DIMS] = {0}, hi[TEENY_MAX_DIMS] = {0};
        char buf[TEENY__NAME_CAP];
        hi[s->ndim - 1] = t - s->d[s->ndim - 1];
        if ((st = teeny_graph_pad(im->g, teeny__ox_name(im, "mask_pad", buf, sizeof buf), *n, lo, hi, -INFINITY, n)) !=
            TEENY_OK)
            return teeny__ox_graph_fail(im, st);
        s->d[s->ndim - 1] = t;
    }
    if (st == TEENY_OK && (s->ndim < 1 || s->ndim > 4 || s->d[s->ndim - 1] != t))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "attn_mask of rank %d and %lld keys for %lld", s->ndim,
                              (long long)(s->ndim >= 1 ? s->d[s->ndim - 1] : 0), (long long)t);
    return st;
}

/* nonpad_kv_seqlen (input 6, a constant [B]): -inf for keys j >= its
 * length, [B, 1, 1, t], added to *mask (made when -1). */
static teeny_status nonpad_mask(ox_import *im, const attn_dims *dm, teeny_node *mask, ox_shape *ms)
{
    int idx;
    const ox_const *c;
    teeny_node n;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny__ox_in(im, 6, &idx);
    if (st != TEENY_OK || idx < 0)
        return st;
    if ((st = teeny__ox_in_const(im, 6, "nonpad_kv_seqlen", 0, &c)) != TEENY_OK)
        return st;
    if (c->type != OX_I64 || c->numel != dm->b)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "nonpad_kv_seqlen must be %lld integers", (long long)dm->b);
    ox_shape s = {4, {dm->b, 1, 1, dm->t}};
    float *data = teeny__malloc((size_t)(dm->b * dm->t) * sizeof *data);
    if (!data)
        return teeny__ox_fail(im, TEENY_ERR_NOMEM, "out of host memory");
    for (int64_t b = 0; b < dm->b; b++)
        for (int64_t j = 0; j < dm->t; j++)
            data[b * dm->t + j] = j < teeny__ox_get_i(c, b) ? 0.0f : -INFINITY;
    st = teeny_graph_constant(im->g, teeny__ox_name(im, "nonpad", buf, sizeof buf), 4, s.d, data, &n);
    teeny__free(data);
    if (st != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    if (*mask < 0) {
        *mask = n;
        *ms = s;
        return TEENY_OK;
    }
    ox_shape o;
    if (!teeny__ox_broadcast(ms, &s, &o))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "attn_mask does not broadcast with nonpad_kv_seqlen's mask");
    *ms = o;
    return binary(im, "mask_nonpad", TEENY_BINARY_ADD, *mask, n, mask);
}

/* A mask of rank <= 4 for 5-D grouped queries [B, Hkv, r, S, T]: its head
 * dimension (third from the end) split into (Hkv, r), or (1, 1). */
static teeny_status mask_grouped(ox_import *im, const attn_dims *dm, teeny_node *mask, ox_shape *ms)
{
    int m = ms->ndim, h = m - 3;
    if (*mask < 0 || m < 3)
        return TEENY_OK;
    if (ms->d[h] != 1 && ms->d[h] != dm->hq)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "attn_mask's head dimension %lld for %lld heads", (long long)ms->d[h],
                              (long long)dm->hq);
    teeny_status st = teeny__ox_rank_ok(im, "attn_mask split by groups", (int64_t)m + 1);
    if (st != TEENY_OK)
        return st;
    ox_shape g = {m + 1, {0}};
    for (int d = 0, k = 0; d < m; d++) {
        if (d == h) {
            g.d[k++] = ms->d[h] == 1 ? 1 : dm->hkv;
            g.d[k++] = ms->d[h] == 1 ? 1 : dm->hq / dm->hkv;
        } else {
            g.d[k++] = ms->d[d];
        }
    }
    st = teeny__ox_view_node(im, *mask, ms, &g, mask);
    *ms = g;
    return st;
}

typedef struct {
    int64_t mode, precision;
    int want_qk;
} attn_opts;

static teeny_status attn_attrs(ox_import *im, ox_attn *a, attn_dims *dm, attn_opts *op)
{
    static const char *const attrs[] = {"is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode",
                                        "scale", "softcap", "softmax_precision", NULL};
    int64_t causal;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "is_causal", 0, &causal)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "q_num_heads", 0, &dm->hq)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "kv_num_heads", 0, &dm->hkv)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "qk_matmul_output_mode", 0, &op->mode)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "softmax_precision", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &op->precision)) != TEENY_OK ||
        (st = teeny__ox_attr_float(im, "scale", NAN, &a->scale)) != TEENY_OK ||
        (st = teeny__ox_attr_float(im, "softcap", 0.0f, &a->softcap)) != TEENY_OK ||
        (st = teeny__ox_outputs_at_most(im, 4)) != TEENY_OK)
        return st;
    if (causal != 0 && causal != 1)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute is_causal=%lld (0 or 1)", (long long)causal);
    if (op->mode < 0 || op->mode > 3)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute qk_matmul_output_mode=%lld (supported: 0..3)",
                              (long long)op->mode);
    if (!teeny__ox_is_float((int)op->precision)) /* float16 too: computed in fp32, more precise than asked */
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED,
                              "attribute softmax_precision=%lld (supported: 1, float; 10, float16)",
                              (long long)op->precision);
    if (teeny__ox_n_in(im) > 6 && im->opset < 24)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "nonpad_kv_seqlen before opset 24");
    a->causal = (int)causal;
    op->want_qk = im->node->n_output > 3 && *S(im->node->output[3]);
    return TEENY_OK;
}

/* Q, K, V (with the past) as 4-D [B, H, S, D]; dims from their shapes. */
static teeny_status attn_inputs(ox_import *im, ox_attn *a, attn_dims *dm)
{
    int pk, pv, rq, rk, rv;
    teeny_status st;
    if ((st = teeny__ox_in(im, 4, &pk)) != TEENY_OK || (st = teeny__ox_in(im, 5, &pv)) != TEENY_OK ||
        (st = heads_input(im, 0, "Q", dm->hq, &a->q, &a->qs, &rq)) != TEENY_OK ||
        (st = heads_input(im, 1, "K", dm->hkv, &a->k, &a->ks, &rk)) != TEENY_OK ||
        (st = heads_input(im, 2, "V", dm->hkv, &a->v, &a->vs, &rv)) != TEENY_OK)
        return st;
    if (rk != rq || rv != rq)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "Q, K and V differ in rank (%d, %d, %d)", rq, rk, rv);
    dm->in3d = rq == 3;
    if ((pk < 0) != (pv < 0))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "past_key and past_value come together");
    if (pk >= 0 && ((st = with_past(im, 4, "past_key", &a->k, &a->ks, &dm->past)) != TEENY_OK ||
                    (st = with_past(im, 5, "past_value", &a->v, &a->vs, &dm->past)) != TEENY_OK))
        return st;
    dm->b = a->qs.d[0];
    dm->hq = a->qs.d[1];
    dm->hkv = a->ks.d[1];
    dm->sq = a->qs.d[2];
    dm->t = a->ks.d[2];
    dm->d = a->qs.d[3];
    dm->dv = a->vs.d[3];
    if (a->ks.d[0] != dm->b || a->vs.d[0] != dm->b || a->vs.d[1] != dm->hkv || a->vs.d[2] != dm->t ||
        a->ks.d[3] != dm->d)
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "Q, K and V disagree in batch, heads, key length or head size");
    if (dm->hq % dm->hkv)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "%lld query heads for %lld key/value heads (supported: a "
                              "multiple)", (long long)dm->hq, (long long)dm->hkv);
    return TEENY_OK;
}

/* Outputs: Y, present_key, present_value, qk_matmul_output. */
static teeny_status attn_outputs(ox_import *im, const ox_attn *a, const attn_dims *dm, const attn_opts *op,
                                 const ox_attn_out *o)
{
    static const int perm[4] = {0, 2, 1, 3};
    ox_shape ys = {4, {dm->b, dm->hq, dm->sq, dm->dv}};
    teeny_node y;
    teeny_status st = teeny__ox_view_node(im, o->y, &o->ys, &ys, &y);
    if (st == TEENY_OK && dm->in3d) {
        ox_shape t = {4, {dm->b, dm->sq, dm->hq, dm->dv}}, f = {3, {dm->b, dm->sq, dm->hq * dm->dv}};
        if ((st = transpose(im, "heads", y, 4, perm, &y)) == TEENY_OK)
            st = teeny__ox_view_node(im, y, &t, &f, &y);
        ys = f;
    }
    if (st != TEENY_OK || (st = teeny__ox_out_runtime(im, 0, y, &ys)) != TEENY_OK ||
        (st = teeny__ox_out_runtime(im, 1, a->k, &a->ks)) != TEENY_OK ||
        (st = teeny__ox_out_runtime(im, 2, a->v, &a->vs)) != TEENY_OK || !op->want_qk)
        return st;
    teeny_node qk = op->mode == 3 ? o->probs : op->mode == 2 ? o->biased : op->mode == 1 ? o->capped : o->raw;
    ox_shape qs = {4, {dm->b, dm->hq, dm->sq, dm->t}};
    if ((st = teeny__ox_view_node(im, qk, &o->ss, &qs, &qk)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 3, qk, &qs);
}

teeny_status teeny__ox_op_attention(ox_import *im)
{
    ox_attn a = {.mask = -1};
    attn_dims dm = {0};
    attn_opts op;
    ox_attn_out o;
    teeny_status st = attn_attrs(im, &a, &dm, &op);
    if (st != TEENY_OK || (st = attn_inputs(im, &a, &dm)) != TEENY_OK ||
        (st = attn_mask(im, dm.t, &a.mask, &a.ms)) != TEENY_OK || (st = nonpad_mask(im, &dm, &a.mask, &a.ms)) != TEENY_OK)
        return st;
    if (isnan(a.scale))
        a.scale = (float)(1.0 / sqrt((double)dm.d));
    a.causal_offset = dm.past;
    a.want_scores = op.want_qk;
    a.masked_zero = 1;
    ox_attn core = a;
    int64_t r = dm.hq / dm.hkv;
    if (r > 1) { /* grouped queries: q [B, Hkv, r, S, D] against k, v [B, Hkv, 1, T, D] */
        core.qs = (ox_shape){5, {dm.b, dm.hkv, r, dm.sq, dm.d}};
        core.ks = (ox_shape){5, {dm.b, dm.hkv, 1, dm.t, dm.d}};
        core.vs = (ox_shape){5, {dm.b, dm.hkv, 1, dm.t, dm.dv}};
        if ((st = teeny__ox_view_node(im, a.q, &a.qs, &core.qs, &core.q)) != TEENY_OK ||
            (st = teeny__ox_view_node(im, a.k, &a.ks, &core.ks, &core.k)) != TEENY_OK ||
            (st = teeny__ox_view_node(im, a.v, &a.vs, &core.vs, &core.v)) != TEENY_OK ||
            (st = mask_grouped(im, &dm, &core.mask, &core.ms)) != TEENY_OK)
            return st;
    }
    if ((st = teeny__ox_attention(im, &core, &o)) != TEENY_OK)
        return st;
    return attn_outputs(im, &a, &dm, &op, &o);
}
