/* elementwise_ref.c -- float64 reference activations, products and derivatives. */
#include <math.h>

#include "elementwise_ref.h"

double ref_act(int act, double x)
{
    if (act == 1)
        return x > 0 ? x : 0;
    if (act == 2)
        return x / (1 + exp(-x));
    return x;
}

double ref_act_grad(int act, double x)
{
    if (act == 1)
        return x > 0 ? 1 : 0;
    if (act == 2) {
        double s = 1 / (1 + exp(-x));
        return s * (1 + x * (1 - s));
    }
    return 1;
}

void ref_mul(const double *a, const double *b, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] * b[i];
}

void ref_mul_backward(const double *a, const double *b, const double *dy, size_t n, double *da, double *db)
{
    for (size_t i = 0; i < n; i++) {
        if (da)
            da[i] = dy[i] * b[i];
        if (db)
            db[i] = dy[i] * a[i];
    }
}
