/* loss_ref.h -- float64 reference of softmax cross-entropy: logits
 * [N, K], labels [N] (a label outside [0, K) gives NaN), mean loss. */
#ifndef TEENY_REF_LOSS_H
#define TEENY_REF_LOSS_H
#include <stdint.h>
/* Returns the mean loss; probs [N, K] receives the softmax (may be NULL). */
double ref_softmax_ce_forward(const double *logits, const int32_t *labels, int N, int K, double *probs);
/* dlogits = (probs - onehot) * dloss / N. */
void ref_softmax_ce_backward(const double *probs, const int32_t *labels, double dloss, int N, int K,
                             double *dlogits);
/* First maximum of each row; NaN counts as the largest. */
void ref_argmax_rows(const float *x, int N, int K, int32_t *out);
#endif
