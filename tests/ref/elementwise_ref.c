/* elementwise_ref.c -- float64 reference activations and derivatives. */
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
