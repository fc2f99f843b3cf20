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
/* With teeny_ce_params' options: weights [K] or NULL, ignore_index when
 * has_ii, reduction 0 mean (sum of the rows' losses / sum of their
 * weights), 1 sum, 2 none. A row's weight: 0 when ignored, NaN for another
 * label outside [0, K), else weights[label] (1 without). */
typedef struct {
    const double *weights;
    int has_ii, ii, reduction;
} ref_ce_opts;
/* Returns the mean or the sum (none: the sum; rows [N] receive each row's
 * weighted loss; probs and rows may be NULL). */
double ref_softmax_ce_ex_forward(const double *logits, const int32_t *labels, const ref_ce_opts *o, int N, int K,
                                 double *probs, double *rows);
/* dlogits = (probs - onehot) * w * dloss[n or 0] / (wsum for mean); 0 on
 * ignored rows. */
void ref_softmax_ce_ex_backward(const double *probs, const int32_t *labels, const ref_ce_opts *o,
                                const double *dloss, int N, int K, double *dlogits);
/* First maximum of each row; NaN counts as the largest. */
void ref_argmax_rows(const float *x, int N, int K, int32_t *out);
#endif
