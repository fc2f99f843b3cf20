/* elementwise_ref.c -- float64 reference activations, products and derivatives. */
#include <math.h>

#include "elementwise_ref.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

void ref_act_defaults(int act, double *alpha, double *beta)
{
    *alpha = act == 5 ? 0.2 : act == 10 ? -INFINITY : 0.01;
    *beta = act == 5 ? 0.5 : INFINITY;
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static double softplus(double x)
{
    return x > 30 ? x : log1p(exp(x));
}

/* teeny_act: 0 none, 1 relu, 2 silu, 3 sigmoid, 4 tanh, 5 hardsigmoid,
 * 6 hardswish, 7 leaky relu, 8 gelu, 9 gelu (tanh), 10 clip, 11 mish, 12 erf,
 * 13 round to half */
double ref_act_p(int act, double x, double alpha, double beta)
{
    const double k = sqrt(2 / M_PI);
    switch (act) {
    case 1: return x > 0 ? x : 0;
    case 2: return x / (1 + exp(-x));
    case 3: return 1 / (1 + exp(-x));
    case 4: return tanh(x);
    case 5: return clampd(alpha * x + beta, 0, 1);
    case 6: return x * clampd(x / 6 + 0.5, 0, 1);
    case 7: return x >= 0 ? x : alpha * x;
    case 8: return 0.5 * x * (1 + erf(x / sqrt(2)));
    case 9: return 0.5 * x * (1 + tanh(k * (x + 0.044715 * x * x * x)));
    case 10: return fmin(fmax(x, alpha), beta);
    case 11: return x * tanh(softplus(x));
    case 12: return erf(x);
    case 13: return ref_round_half(x);
    default: return x;
    }
}

double ref_act_grad_p(int act, double x, double alpha, double beta)
{
    const double k = sqrt(2 / M_PI);
    double s = 1 / (1 + exp(-x)), t, u;
    switch (act) {
    case 1: return x > 0 ? 1 : 0;
    case 2: return s * (1 + x * (1 - s));
    case 3: return s * (1 - s);
    case 4: t = tanh(x); return 1 - t * t;
    case 5: u = alpha * x + beta; return u > 0 && u < 1 ? alpha : 0;
    case 6: return x < -3 ? 0 : x > 3 ? 1 : x / 3 + 0.5;
    case 7: return x > 0 ? 1 : alpha;
    case 8: return 0.5 * (1 + erf(x / sqrt(2))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
    case 9:
        t = tanh(k * (x + 0.044715 * x * x * x));
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
    case 10: return x >= alpha && x <= beta ? 1 : 0;
    case 11: t = tanh(softplus(x)); return t + x * (1 - t * t) * s;
    case 12: return 2 / sqrt(M_PI) * exp(-x * x);
    default: return 1;
    }
}

/* x to the nearest IEEE half, ties to even, in float64 arithmetic: the
 * half's quantum at x's binade is 2^(e - 10), e = max(floor(log2 |x|),
 * -14) (subnormal halves share 2^-24); |x| scaled by its inverse is exact
 * in a double, nearbyint rounds it to even under the default mode; from
 * 65520 (the tie above 65504, to even) on, inf. */
double ref_round_half(double x)
{
    int e2;
    if (isnan(x) || isinf(x))
        return x;
    if (fabs(x) >= 65520.0)
        return copysign(INFINITY, x);
    frexp(fabs(x), &e2); /* |x| = f 2^e2, f in [0.5, 1) */
    int e = e2 - 1 < -14 ? -14 : e2 - 1;
    return copysign(ldexp(nearbyint(ldexp(fabs(x), 10 - e)), e - 10), x);
}

double ref_act(int act, double x)
{
    double a, b;
    ref_act_defaults(act, &a, &b);
    return ref_act_p(act, x, a, b);
}

double ref_act_grad(int act, double x)
{
    double a, b;
    ref_act_defaults(act, &a, &b);
    return ref_act_grad_p(act, x, a, b);
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
