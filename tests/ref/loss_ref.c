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

/* The weight of a row (cl/loss.cl's ce_weight). */
static double row_weight(const ref_ce_opts *o, int32_t lab, int K)
{
    if (o->has_ii && lab == o->ii)
        return 0;
    if (lab < 0 || lab >= K)
        return NAN;
    return o->weights ? o->weights[lab] : 1;
}

double ref_softmax_ce_ex_forward(const double *logits, const int32_t *labels, const ref_ce_opts *o, int N, int K,
                                 double *probs, double *rows)
{
    double total = 0, wsum = 0;
    for (int n = 0; n < N; n++) {
        const double *row = logits + (size_t)n * K;
        double m = -INFINITY, s = 0, w = row_weight(o, labels[n], K), l;
        for (int k = 0; k < K; k++)
            m = row[k] > m ? row[k] : m;
        for (int k = 0; k < K; k++)
            s += exp(row[k] - m);
        if (probs)
            for (int k = 0; k < K; k++)
                probs[(size_t)n * K + k] = exp(row[k] - m) / s;
        l = w == 0 ? 0 : isnan(w) ? NAN : w * (m + log(s) - row[labels[n]]);
        if (rows)
            rows[n] = l;
        total += l;
        wsum += labels[n] >= 0 && labels[n] < K ? w : 0; /* as cl/loss.cl: a bad label's NaN stays in its row */
    }
    return o->reduction == 0 ? total / wsum : total; /* NONE: rows hold it; the sum returned */
}

void ref_softmax_ce_ex_backward(const double *probs, const int32_t *labels, const ref_ce_opts *o,
                                const double *dloss, int N, int K, double *dlogits)
{
    double wsum = 0;
    for (int n = 0; n < N; n++)
        wsum += labels[n] >= 0 && labels[n] < K ? row_weight(o, labels[n], K) : 0;
    for (int n = 0; n < N; n++) {
        double w = row_weight(o, labels[n], K);
        double g = dloss[o->reduction == 2 ? n : 0] * w / (o->reduction == 0 ? wsum : 1);
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)n * K + k;
            dlogits[i] = w == 0 ? 0 : isnan(w) ? NAN : (probs[i] - (k == labels[n])) * g;
        }
    }
}
