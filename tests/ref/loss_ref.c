/* loss_ref.c -- float64 reference of softmax cross-entropy and row argmax. */
#include <math.h>
#include <stddef.h>

#include "loss_ref.h"

double ref_softmax_ce_forward(const double *logits, const int32_t *labels, int N, int K, double *probs)
{
    double total = 0;
    for (int n = 0; n < N; n++) {
        const double *row = logits + (size_t)n * K;
        double m = -INFINITY, s = 0;
        for (int k = 0; k < K; k++)
            m = row[k] > m ? row[k] : m;
        for (int k = 0; k < K; k++)
            s += exp(row[k] - m);
        if (probs)
            for (int k = 0; k < K; k++)
                probs[(size_t)n * K + k] = exp(row[k] - m) / s;
        total += labels[n] >= 0 && labels[n] < K ? m + log(s) - row[labels[n]] : NAN;
    }
    return total / N;
}

void ref_softmax_ce_backward(const double *probs, const int32_t *labels, double dloss, int N, int K,
                             double *dlogits)
{
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)n * K + k;
            dlogits[i] = labels[n] >= 0 && labels[n] < K ? (probs[i] - (k == labels[n])) * dloss / N : NAN;
        }
}

void ref_argmax_rows(const float *x, int N, int K, int32_t *out)
{
    for (int n = 0; n < N; n++) {
        const float *row = x + (size_t)n * K;
        int arg = 0;
        for (int k = 1; k < K && !isnan(row[arg]); k++)
            if (row[k] > row[arg] || isnan(row[k]))
                arg = k;
        out[n] = arg;
    }
}
