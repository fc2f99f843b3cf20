/* elementwise_ref.h -- float64 reference activations and products. */
#ifndef TEENY_REF_ELEMENTWISE_H
#define TEENY_REF_ELEMENTWISE_H
#include <stddef.h>
double ref_act(int act, double x);      /* 0 none, 1 relu, 2 silu */
double ref_act_grad(int act, double x);
/* y = a * b; da = dy * b, db = dy * a (either may be NULL). */
void ref_mul(const double *a, const double *b, size_t n, double *y);
void ref_mul_backward(const double *a, const double *b, const double *dy, size_t n, double *da, double *db);
#endif
