/* linear_ref.h -- float64 reference of the fully connected layer
 * (PyTorch layout: x [N, in], w [out, in], b [out], y [N, out]). */
#ifndef TEENY_REF_LINEAR_H
#define TEENY_REF_LINEAR_H
/* y = x w^T + b; b may be NULL. */
void ref_linear_forward(const double *x, const double *w, const double *b, int N, int in, int out, double *y);
/* dx = dy w, dw = dy^T x, db = column sums of dy; any output may be NULL. */
void ref_linear_backward(const double *x, const double *w, const double *dy, int N, int in, int out, double *dx,
                         double *dw, double *db);
/* mag_* (any may be NULL) receive sqrt(sum of squared terms) of each output
 * of forward and backward, the scale of its cancellation error (see
 * harness.h). */
void ref_linear_mags(const double *x, const double *w, const double *dy, int N, int in, int out, double *mag_y,
                     double *mag_dx, double *mag_dw, double *mag_db);
#endif
