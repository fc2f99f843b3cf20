/* matmul_ref.h -- float64 reference of the batched, broadcasting matmul
 * (a [..., M, K] b [..., K, N]; shapes as strided_ref.h's). */
#ifndef TEENY_REF_MATMUL_H
#define TEENY_REF_MATMUL_H
#include "strided_ref.h"
/* y's shape from a's and b's; 0 when they do not fit. */
int ref_matmul_shape(const ref_shape *a, const ref_shape *b, ref_shape *y);
void ref_matmul(const double *a, const ref_shape *as, const double *b, const ref_shape *bs, double *y);
/* da, db (either NULL): per-batch products summed where broadcast; mag_*
 * (may be NULL) the random-walk size of each output's terms. */
void ref_matmul_backward(const double *a, const ref_shape *as, const double *b, const ref_shape *bs, const double *dy,
                         double *da, double *db);
#endif
