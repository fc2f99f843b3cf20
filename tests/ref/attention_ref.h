/*
 * attention_ref.h -- float64 CPU reference for attention and PSA attention,
 * written from the definitions with the full softmax matrix (no tiling, no
 * online softmax): q [BH, Nq, D], k [BH, Nk, D], v [BH, Nk, Dv],
 * o [BH, Nq, Dv], lse [BH, Nq]; PSA qkv [B, heads*4*kd, H, W] NCHW.
 */
#ifndef TEENY_REF_ATTENTION_H
#define TEENY_REF_ATTENTION_H

/* o = softmax(scale q k^T) v, lse = log sum exp(scale q k^T); lse may be NULL. */
void ref_attention_forward(const double *q, const double *k, const double *v, int BH, int Nq, int Nk, int D, int Dv,
                           double scale, double *o, double *lse);
/* Masks (teeny_attention_params): scores s = scale q_i.k_j, then
 * softcap * tanh(s / softcap) when softcap > 0, then + the mask element
 * (bh / heads)*sb + (bh % heads)*sh + i*sq + j*sk when mask is not NULL,
 * then -inf where causal and j > i + causal_offset. A row whose every
 * score is -inf gives o = 0 and lse = -inf, and no gradient. */
typedef struct {
    const double *mask;
    long sb, sh, sq, sk;
    int heads;
    int causal, causal_offset;
    double softcap;
} ref_attn_mask;
void ref_attention_forward_ex(const double *q, const double *k, const double *v, int BH, int Nq, int Nk, int D,
                              int Dv, double scale, const ref_attn_mask *mk, double *o, double *lse);
void ref_attention_backward_ex(const double *q, const double *k, const double *v, const double *d_o, int BH, int Nq,
                               int Nk, int D, int Dv, double scale, const ref_attn_mask *mk, double *dq, double *dk,
                               double *dv, double *mag_dq, double *mag_dk, double *mag_dv);
/* dq, dk, dv of L = sum(d_o * o). mag_* (may be NULL) receive the same sums
 * with every term's absolute value, the size cancellation is measured
 * against (tests/harness.h). */
void ref_attention_backward(const double *q, const double *k, const double *v, const double *d_o, int BH, int Nq,
                            int Nk, int D, int Dv, double scale, double *dq, double *dk, double *dv, double *mag_dq,
                            double *mag_dk, double *mag_dv);

/* PSA: the reference's rearrangements, element by element. */
void ref_psa_pack(const double *qkv, int B, int heads, int kd, int N, double *packed);
void ref_psa_extract_v(const double *qkv, int B, int heads, int kd, int N, double *v);
void ref_psa_merge(const double *lo, const double *hi, int B, int heads, int kd, int N, double *out);
/* o [B, heads*2kd, N] = V softmax(Q^T K kd^-1/2)^T per head, lse [B*heads, N]. */
void ref_psa_attention_forward(const double *qkv, int B, int heads, int kd, int N, double *o, double *lse);
/* d_qkv of L = sum(d_o * o); mag_d_qkv as in ref_attention_backward (may be NULL). */
void ref_psa_attention_backward(const double *qkv, const double *d_o, int B, int heads, int kd, int N,
                                double *d_qkv, double *mag_d_qkv);

#endif
