/* concat_ref.h -- float64 reference of channel concatenation and slicing
 * over [B, C, S] data (S = the product of the trailing dimensions). */
#ifndef TEENY_REF_CONCAT_H
#define TEENY_REF_CONCAT_H
/* y [B, sum C_i, S] from xs[i] [B, C_i, S]. */
void ref_concat(int n, const double *const *xs, const int *C, int B, int S, double *y);
/* y [B, count, S] = channels [c0, c0 + count) of x [B, C, S]. */
void ref_slice(const double *x, int B, int C, int S, int c0, int count, double *y);
/* dx [B, C, S]: dy in channels [c0, c0 + count), zero elsewhere. */
void ref_slice_backward(const double *dy, int B, int C, int S, int c0, int count, double *dx);
#endif
