/*
 * attention_ref.c -- float64 reference for attention (see attention_ref.h):
 * the whole score matrix of one bh at a time (softcap, mask and causal
 * frontier applied to it as defined), softmax by its row maximum,
 * gradients from the definition dS = P * (dP - rowsum(P * dP)) times the
 * softcap's derivative.
 */
#include <math.h>
#include <stdlib.h>

#include "attention_ref.h"

static double *alloc(size_t n)
{
    double *p = malloc((n ? n : 1) * sizeof *p);
    if (!p)
        abort(); /* test reference only */
    return p;
}

/* p[i][j] = softmax_j(s_ij) of matrix bh, s the scores of
 * ref_attention_forward_ex; lse[i] when asked. A row whose every score is
 * -inf gets p = 0 and lse = -inf. dcap (may be NULL): d s_ij / d(scale
 * q_i . k_j) before the mask, 1 without softcap. */
static void probs(const double *q, const double *k, int bh, int Nq, int Nk, int D, double scale,
                  const ref_attn_mask *mk, double *p, double *lse, double *dcap)
{
    for (int i = 0; i < Nq; i++) {
        double *row = p + (size_t)i * Nk, mx = -INFINITY, sum = 0;
        for (int j = 0; j < Nk; j++) {
            double s = 0, dc = 1;
            for (int d = 0; d < D; d++)
                s += q[(size_t)i * D + d] * k[(size_t)j * D + d];
            s *= scale;
            if (mk && mk->softcap > 0) {
                double t = tanh(s / mk->softcap);
                s = mk->softcap * t;
                dc = 1 - t * t;
            }
            if (mk && mk->mask)
                s += mk->mask[(size_t)(bh / mk->heads) * mk->sb + (size_t)(bh % mk->heads) * mk->sh +
                              (size_t)i * mk->sq + (size_t)j * mk->sk];
            if (mk && mk->causal && j > i + mk->causal_offset)
                s = -INFINITY;
            row[j] = s;
            if (dcap)
                dcap[(size_t)i * Nk + j] = dc;
            if (row[j] > mx)
                mx = row[j];
        }
        for (int j = 0; j < Nk; j++) {
            row[j] = mx == -INFINITY ? 0 : exp(row[j] - mx);
            sum += row[j];
        }
        for (int j = 0; j < Nk; j++)
            row[j] = sum > 0 ? row[j] / sum : 0;
        if (lse)
            lse[i] = mx + log(sum);
    }
}

void ref_attention_forward_ex(const double *q, const double *k, const double *v, int BH, int Nq, int Nk, int D,
                              int Dv, double scale, const ref_attn_mask *mk, double *o, double *lse)
{
    double *p = alloc((size_t)Nq * Nk);
    for (int bh = 0; bh < BH; bh++) {
        const double *qb = q + (size_t)bh * Nq * D, *kb = k + (size_t)bh * Nk * D, *vb = v + (size_t)bh * Nk * Dv;
        double *ob = o + (size_t)bh * Nq * Dv;
        probs(qb, kb, bh, Nq, Nk, D, scale, mk, p, lse ? lse + (size_t)bh * Nq : NULL, NULL);
        for (int i = 0; i < Nq; i++)
            for (int c = 0; c < Dv; c++) {
                double acc = 0;
                for (int j = 0; j < Nk; j++)
                    acc += p[(size_t)i * Nk + j] * vb[(size_t)j * Dv + c];
                ob[(size_t)i * Dv + c] = acc;
            }
    }
    free(p);
}

void ref_attention_forward(const double *q, const double *k, const double *v, int BH, int Nq, int Nk, int D, int Dv,
                           double scale, double *o, double *lse)
{
    ref_attention_forward_ex(q, k, v, BH, Nq, Nk, D, Dv, scale, NULL, o, lse);
}

void ref_attention_backward_ex(const double *q, const double *k, const double *v, const double *d_o, int BH, int Nq,
                               int Nk, int D, int Dv, double scale, const ref_attn_mask *mk, double *dq, double *dk,
                               double *dv, double *mag_dq, double *mag_dk, double *mag_dv)
{
    size_t nn = (size_t)Nq * Nk;
    double *p = alloc(nn), *dp = alloc(nn), *dpm = alloc(nn), *ds = alloc(nn), *dsm = alloc(nn), *dc = alloc(nn);
    for (int bh = 0; bh < BH; bh++) {
        const double *qb = q + (size_t)bh * Nq * D, *kb = k + (size_t)bh * Nk * D, *vb = v + (size_t)bh * Nk * Dv;
        const double *gb = d_o + (size_t)bh * Nq * Dv;
        size_t oq = (size_t)bh * Nq * D, ok = (size_t)bh * Nk * D, ov = (size_t)bh * Nk * Dv;
        probs(qb, kb, bh, Nq, Nk, D, scale, mk, p, NULL, dc);
        for (int i = 0; i < Nq; i++) {
            double di = 0, dim = 0;
            for (int j = 0; j < Nk; j++) {
                double s = 0, sm = 0;
                for (int c = 0; c < Dv; c++) {
                    s += gb[(size_t)i * Dv + c] * vb[(size_t)j * Dv + c];
                    sm += fabs(gb[(size_t)i * Dv + c] * vb[(size_t)j * Dv + c]);
                }
                dp[(size_t)i * Nk + j] = s;
                dpm[(size_t)i * Nk + j] = sm;
                di += p[(size_t)i * Nk + j] * s;
                dim += p[(size_t)i * Nk + j] * sm;
            }
            for (int j = 0; j < Nk; j++) {
                size_t e = (size_t)i * Nk + j;
                ds[e] = p[e] * (dp[e] - di) * dc[e];
                dsm[e] = p[e] * (dpm[e] + dim) * dc[e];
            }
        }
        for (int j = 0; j < Nk; j++)
            for (int c = 0; c < Dv; c++) {
                double acc = 0, m = 0;
                for (int i = 0; i < Nq; i++) {
                    acc += p[(size_t)i * Nk + j] * gb[(size_t)i * Dv + c];
                    m += p[(size_t)i * Nk + j] * fabs(gb[(size_t)i * Dv + c]);
                }
                dv[ov + (size_t)j * Dv + c] = acc;
                if (mag_dv)
                    mag_dv[ov + (size_t)j * Dv + c] = m;
            }
        for (int i = 0; i < Nq; i++)
            for (int d = 0; d < D; d++) {
                double acc = 0, m = 0;
                for (int j = 0; j < Nk; j++) {
                    acc += ds[(size_t)i * Nk + j] * kb[(size_t)j * D + d];
                    m += dsm[(size_t)i * Nk + j] * fabs(kb[(size_t)j * D + d]);
                }
                dq[oq + (size_t)i * D + d] = acc * scale;
                if (mag_dq)
                    mag_dq[oq + (size_t)i * D + d] = m * fabs(scale);
            }
        for (int j = 0; j < Nk; j++)
            for (int d = 0; d < D; d++) {
                double acc = 0, m = 0;
                for (int i = 0; i < Nq; i++) {
                    acc += ds[(size_t)i * Nk + j] * qb[(size_t)i * D + d];
                    m += dsm[(size_t)i * Nk + j] * fabs(qb[(size_t)i * D + d]);
                }
                dk[ok + (size_t)j * D + d] = acc * scale;
                if (mag_dk)
                    mag_dk[ok + (size_t)j * D + d] = m * fabs(scale);
            }
    }
    free(p);
    free(dp);
    free(dpm);
    free(ds);
    free(dsm);
    free(dc);
}

void ref_attention_backward(const double *q, const double *k, const double *v, const double *d_o, int BH, int Nq,
                            int Nk, int D, int Dv, double scale, double *dq, double *dk, double *dv, double *mag_dq,
                            double *mag_dk, double *mag_dv)
{
    ref_attention_backward_ex(q, k, v, d_o, BH, Nq, Nk, D, Dv, scale, NULL, dq, dk, dv, mag_dq, mag_dk, mag_dv);
}

/* ---- PSA ---- */

/* Channel of head h's section sec (0 Q, 1 K, 2 V_lo, 3 V_hi), index j. */
#define QKV(b, h, sec, j, n) (((size_t)(b) * heads * 4 * kd + (size_t)(h) * 4 * kd + (size_t)(sec) * kd + (j)) * N + (n))
#define OUT(b, h, c, n) (((size_t)(b) * heads * 2 * kd + (size_t)(h) * 2 * kd + (c)) * N + (n))

void ref_psa_pack(const double *qkv, int B, int heads, int kd, int N, double *packed)
{
    int BH = B * heads;
    for (int sec = 0; sec < 4; sec++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < heads; h++)
                for (int n = 0; n < N; n++)
                    for (int j = 0; j < kd; j++)
                        packed[(((size_t)sec * BH + b * heads + h) * N + n) * kd + j] = qkv[QKV(b, h, sec, j, n)];
}

void ref_psa_extract_v(const double *qkv, int B, int heads, int kd, int N, double *v)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++)
            for (int c = 0; c < 2 * kd; c++)
                for (int n = 0; n < N; n++)
                    v[OUT(b, h, c, n)] = qkv[QKV(b, h, 2, c, n)];
}

void ref_psa_merge(const double *lo, const double *hi, int B, int heads, int kd, int N, double *out)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++)
            for (int n = 0; n < N; n++)
                for (int j = 0; j < kd; j++) {
                    size_t src = (((size_t)b * heads + h) * N + n) * kd + j;
                    out[OUT(b, h, j, n)] = lo[src];
                    out[OUT(b, h, kd + j, n)] = hi[src];
                }
}

/* Gather head (b, h) into token-major q, k [N][kd], v [N][2kd]. */
static void psa_gather(const double *qkv, int b, int h, int heads, int kd, int N, double *q, double *k, double *v)
{
    for (int n = 0; n < N; n++) {
        for (int j = 0; j < kd; j++) {
            q[(size_t)n * kd + j] = qkv[QKV(b, h, 0, j, n)];
            k[(size_t)n * kd + j] = qkv[QKV(b, h, 1, j, n)];
        }
        for (int c = 0; c < 2 * kd; c++)
            v[(size_t)n * 2 * kd + c] = qkv[QKV(b, h, 2, c, n)];
    }
}

void ref_psa_attention_forward(const double *qkv, int B, int heads, int kd, int N, double *o, double *lse)
{
    double *q = alloc((size_t)N * kd), *k = alloc((size_t)N * kd), *v = alloc((size_t)N * 2 * kd);
    double *ob = alloc((size_t)N * 2 * kd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            psa_gather(qkv, b, h, heads, kd, N, q, k, v);
            ref_attention_forward(q, k, v, 1, N, N, kd, 2 * kd, 1.0 / sqrt((double)kd), ob,
                                  lse ? lse + ((size_t)b * heads + h) * N : NULL);
            for (int n = 0; n < N; n++)
                for (int c = 0; c < 2 * kd; c++)
                    o[OUT(b, h, c, n)] = ob[(size_t)n * 2 * kd + c];
        }
    free(q);
    free(k);
    free(v);
    free(ob);
}

void ref_psa_attention_backward(const double *qkv, const double *d_o, int B, int heads, int kd, int N,
                                double *d_qkv, double *mag_d_qkv)
{
    size_t nk = (size_t)N * kd, nv = (size_t)N * 2 * kd;
    double *q = alloc(nk), *k = alloc(nk), *v = alloc(nv), *g = alloc(nv);
    double *dq = alloc(nk), *dk = alloc(nk), *dv = alloc(nv), *mq = alloc(nk), *mk = alloc(nk), *mv = alloc(nv);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            psa_gather(qkv, b, h, heads, kd, N, q, k, v);
            for (int n = 0; n < N; n++)
                for (int c = 0; c < 2 * kd; c++)
                    g[(size_t)n * 2 * kd + c] = d_o[OUT(b, h, c, n)];
            ref_attention_backward(q, k, v, g, 1, N, N, kd, 2 * kd, 1.0 / sqrt((double)kd), dq, dk, dv, mq, mk, mv);
            for (int n = 0; n < N; n++) {
                for (int j = 0; j < kd; j++) {
                    d_qkv[QKV(b, h, 0, j, n)] = dq[(size_t)n * kd + j];
                    d_qkv[QKV(b, h, 1, j, n)] = dk[(size_t)n * kd + j];
                    if (mag_d_qkv) {
                        mag_d_qkv[QKV(b, h, 0, j, n)] = mq[(size_t)n * kd + j];
                        mag_d_qkv[QKV(b, h, 1, j, n)] = mk[(size_t)n * kd + j];
                    }
                }
                for (int c = 0; c < 2 * kd; c++) {
                    d_qkv[QKV(b, h, 2, c, n)] = dv[(size_t)n * 2 * kd + c];
                    if (mag_d_qkv)
                        mag_d_qkv[QKV(b, h, 2, c, n)] = mv[(size_t)n * 2 * kd + c];
                }
            }
        }
    double *all[] = {q, k, v, g, dq, dk, dv, mq, mk, mv};
    for (int i = 0; i < 10; i++)
        free(all[i]);
}
