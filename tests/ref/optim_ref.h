/*
 * optim_ref.h -- float64 reference optimizers with PyTorch's semantics
 * (torch.optim.SGD / Adam / AdamW, torch.nn.utils.clip_grad_norm_).
 */
#ifndef TEENY_REF_OPTIM_H
#define TEENY_REF_OPTIM_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int kind; /* 0 SGD, 1 Adam, 2 AdamW (teeny_optim_kind) */
    double momentum, dampening, weight_decay;
    int nesterov;
    double beta2, eps;
} ref_optim_hyper;

/* Scale grads[i][0..n[i]) in place by min(max_norm / (total + 1e-6), 1),
 * total = sqrt(sum of all squares); returns the scale. */
double ref_clip_grad_norm(int count, double *const *grads, const size_t *n, double max_norm);

/* One step of one parameter tensor, t = the step's number (1 first).
 * SGD uses state0 as the momentum buffer; Adam/AdamW state0 = exp_avg,
 * state1 = exp_avg_sq. beta1 is this step's. */
void ref_optim_step(const ref_optim_hyper *h, double *p, const double *g, double *state0, double *state1,
                    size_t n, double lr, double beta1, int64_t t);

#endif
