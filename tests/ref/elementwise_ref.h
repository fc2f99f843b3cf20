/* elementwise_ref.h -- float64 reference activations. */
#ifndef TEENY_REF_ELEMENTWISE_H
#define TEENY_REF_ELEMENTWISE_H
double ref_act(int act, double x);      /* 0 none, 1 relu, 2 silu */
double ref_act_grad(int act, double x);
#endif
