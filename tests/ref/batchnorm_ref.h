/*
 * batchnorm_ref.h -- float64 CPU reference for batch normalization over
 * [B, C, S] data (S = H*W, or 1 for [N, C]); PyTorch semantics.
 */
#ifndef TEENY_REF_BATCHNORM_H
#define TEENY_REF_BATCHNORM_H

/* Batch statistics: mean[c], biased var[c]. */
void ref_bn_stats(const double *x, int B, int C, int S, double *mean, double *var);
/* y = (x - mean) / sqrt(var + eps) * w + b with the given statistics. */
void ref_bn_normalize(const double *x, int B, int C, int S, const double *mean, const double *var, double eps,
                      const double *w, const double *b, double *y);
/* Training forward: y, save_mean, save_rstd, and running stats updated in place. */
void ref_bn_forward_train(const double *x, int B, int C, int S, const double *w, const double *b, double momentum,
                          double eps, double *y, double *save_mean, double *save_rstd, double *run_mean,
                          double *run_var);
/* Training backward (batch statistics). */
void ref_bn_backward_train(const double *x, const double *dy, int B, int C, int S, const double *w,
                           const double *save_mean, const double *save_rstd, double *dx, double *dw, double *db);
/* Frozen-statistics backward. */
void ref_bn_backward_frozen(const double *x, const double *dy, int B, int C, int S, const double *w,
                            const double *run_mean, const double *run_var, double eps, double *dx, double *dw,
                            double *db);

/* Term sizes of the training backward's outputs, for th_nrms_mag (harness.h);
 * mag_dx may be NULL. */
void ref_bn_grad_mags(const double *x, const double *dy, int B, int C, int S, const double *w, const double *mean,
                      const double *rstd, double *mag_db, double *mag_dw, double *mag_dx);

/* With a fused activation act (TEENY_ACT_NONE 0, RELU 1, SILU 2):
 * y = act((x - mean) * rstd * w + b); the training forward (statistics and
 * running stats as ref_bn_forward_train); the backward through the batch
 * statistics (training 1) or frozen ones (mean, rstd given; training 0). */
void ref_bn_act_apply(const double *x, int B, int C, int S, const double *mean, const double *rstd, const double *w,
                      const double *b, int act, double *y);
void ref_bn_act_forward_train(const double *x, int B, int C, int S, const double *w, const double *b, double momentum,
                              double eps, int act, double *y, double *save_mean, double *save_rstd, double *run_mean,
                              double *run_var);
void ref_bn_act_backward(const double *x, const double *dy, int B, int C, int S, const double *w, const double *b,
                         const double *mean, const double *rstd, int act, int training, double *dx, double *dw,
                         double *db);

#endif
