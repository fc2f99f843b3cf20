/* elementwise_ref.h -- float64 reference activations and products. */
#ifndef TEENY_REF_ELEMENTWISE_H
#define TEENY_REF_ELEMENTWISE_H
#include <stddef.h>
double ref_act(int act, double x);      /* teeny_act values, default parameters */
double ref_act_grad(int act, double x);
/* With parameters alpha, beta (teeny_act_params). */
double ref_act_p(int act, double x, double alpha, double beta);
double ref_act_grad_p(int act, double x, double alpha, double beta);
/* x rounded to the nearest IEEE half (ties to even; overflow to inf), as
 * a double: act 13, TEENY_ACT_ROUND_HALF (its gradient: 1). */
double ref_round_half(double x);
/* The default alpha, beta of act (as teeny_act_defaults). */
void ref_act_defaults(int act, double *alpha, double *beta);
/* y = a * b; da = dy * b, db = dy * a (either may be NULL). */
void ref_mul(const double *a, const double *b, size_t n, double *y);
void ref_mul_backward(const double *a, const double *b, const double *dy, size_t n, double *da, double *db);
#endif
