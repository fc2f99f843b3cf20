/* linear_ref.c -- float64 reference of the fully connected layer. */
#include <math.h>
#include <stddef.h>

#include "linear_ref.h"

void ref_linear_forward(const double *x, const double *w, const double *b, int N, int in, int out, double *y)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < in; i++)
                s += x[(size_t)n * in + i] * w[(size_t)o * in + i];
            y[(size_t)n * out + o] = s;
        }
}

void ref_linear_backward(const double *x, const double *w, const double *dy, int N, int in, int out, double *dx,
                         double *dw, double *db)
{
    if (dx)
        for (int n = 0; n < N; n++)
            for (int i = 0; i < in; i++) {
                double s = 0;
                for (int o = 0; o < out; o++)
                    s += dy[(size_t)n * out + o] * w[(size_t)o * in + i];
                dx[(size_t)n * in + i] = s;
            }
    if (dw)
        for (int o = 0; o < out; o++)
            for (int i = 0; i < in; i++) {
                double s = 0;
                for (int n = 0; n < N; n++)
                    s += dy[(size_t)n * out + o] * x[(size_t)n * in + i];
                dw[(size_t)o * in + i] = s;
            }
    if (db)
        for (int o = 0; o < out; o++) {
            double s = 0;
            for (int n = 0; n < N; n++)
                s += dy[(size_t)n * out + o];
            db[o] = s;
        }
}

void ref_linear_mags(const double *x, const double *w, const double *dy, int N, int in, int out, double *mag_y,
                     double *mag_dx, double *mag_dw, double *mag_db)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < out && mag_y; o++) {
            double s = 0;
            for (int i = 0; i < in; i++) {
                double t = x[(size_t)n * in + i] * w[(size_t)o * in + i];
                s += t * t;
            }
            mag_y[(size_t)n * out + o] = sqrt(s);
        }
    for (int n = 0; n < N && mag_dx; n++)
        for (int i = 0; i < in; i++) {
            double s = 0;
            for (int o = 0; o < out; o++) {
                double t = dy[(size_t)n * out + o] * w[(size_t)o * in + i];
                s += t * t;
            }
            mag_dx[(size_t)n * in + i] = sqrt(s);
        }
    for (int o = 0; o < out && mag_dw; o++)
        for (int i = 0; i < in; i++) {
            double s = 0;
            for (int n = 0; n < N; n++) {
                double t = dy[(size_t)n * out + o] * x[(size_t)n * in + i];
                s += t * t;
            }
            mag_dw[(size_t)o * in + i] = sqrt(s);
        }
    for (int o = 0; o < out && mag_db; o++) {
        double s = 0;
        for (int n = 0; n < N; n++)
            s += dy[(size_t)n * out + o] * dy[(size_t)n * out + o];
        mag_db[o] = sqrt(s);
    }
}
