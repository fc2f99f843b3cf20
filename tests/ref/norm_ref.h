/* norm_ref.h -- float64 references of softmax / log-softmax along an axis
 * (x as [outer, L, inner]) and layer normalization of rows [M, N]. */
#ifndef TEENY_REF_NORM_H
#define TEENY_REF_NORM_H
#include <stdint.h>
void ref_softmax(const double *x, int64_t outer, int64_t L, int64_t inner, int log_out, double *y);
/* dx from y (the forward's) and dy. */
void ref_softmax_backward(const double *y, const double *dy, int64_t outer, int64_t L, int64_t inner, int log_out,
                          double *dx);
/* y = (x - mean) rstd w + b (b may be NULL); mean, rstd [M] (may be NULL). */
void ref_layernorm(const double *x, int64_t M, int64_t N, const double *w, const double *b, double eps, double *y,
                   double *mean, double *rstd);
/* dx, dw, db (any may be NULL), recomputing the statistics. */
void ref_layernorm_backward(const double *x, int64_t M, int64_t N, const double *w, const double *dy, double eps,
                            double *dx, double *dw, double *db);
#endif
