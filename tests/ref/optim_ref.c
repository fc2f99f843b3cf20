/* optim_ref.c -- float64 reference optimizers (see optim_ref.h). */
#include <math.h>

#include "optim_ref.h"

double ref_clip_grad_norm(int count, double *const *grads, const size_t *n, double max_norm)
{
    double sum = 0, scale;
    for (int i = 0; i < count; i++)
        for (size_t j = 0; j < n[i]; j++)
            sum += grads[i][j] * grads[i][j];
    scale = max_norm / (sqrt(sum) + 1e-6);
    if (scale > 1.0)
        scale = 1.0;
    for (int i = 0; i < count; i++)
        for (size_t j = 0; j < n[i]; j++)
            grads[i][j] *= scale;
    return scale;
}

void ref_optim_step(const ref_optim_hyper *h, double *p, const double *g, double *state0, double *state1,
                    size_t n, double lr, double beta1, int64_t t)
{
    double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(h->beta2, (double)t);
    for (size_t i = 0; i < n; i++) {
        double d = g[i];
        if (h->kind == 0) {
            if (h->weight_decay != 0)
                d += h->weight_decay * p[i];
            if (h->momentum != 0) {
                state0[i] = t == 1 ? d : h->momentum * state0[i] + (1 - h->dampening) * d;
                d = h->nesterov ? d + h->momentum * state0[i] : state0[i];
            }
            p[i] -= lr * d;
            continue;
        }
        if (h->kind == 2)
            p[i] *= 1 - lr * h->weight_decay;
        else if (h->weight_decay != 0)
            d += h->weight_decay * p[i];
        state0[i] = beta1 * state0[i] + (1 - beta1) * d;
        state1[i] = h->beta2 * state1[i] + (1 - h->beta2) * d * d;
        p[i] -= lr / bc1 * state0[i] / (sqrt(state1[i]) / sqrt(bc2) + h->eps);
    }
}
