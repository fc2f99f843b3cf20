/* concat_ref.c -- float64 reference of channel concatenation and slicing. */
#include <stddef.h>

#include "concat_ref.h"

void ref_concat(int n, const double *const *xs, const int *C, int B, int S, double *y)
{
    int Cy = 0;
    for (int i = 0; i < n; i++)
        Cy += C[i];
    for (int b = 0; b < B; b++) {
        int c_base = 0;
        for (int i = 0; i < n; i++) {
            for (int c = 0; c < C[i]; c++)
                for (int s = 0; s < S; s++)
                    y[((size_t)b * Cy + c_base + c) * S + s] = xs[i][((size_t)b * C[i] + c) * S + s];
            c_base += C[i];
        }
    }
}

void ref_slice(const double *x, int B, int C, int S, int c0, int count, double *y)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < count; c++)
            for (int s = 0; s < S; s++)
                y[((size_t)b * count + c) * S + s] = x[((size_t)b * C + c0 + c) * S + s];
}

void ref_slice_backward(const double *dy, int B, int C, int S, int c0, int count, double *dx)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int s = 0; s < S; s++)
                dx[((size_t)b * C + c) * S + s] =
                    c >= c0 && c < c0 + count ? dy[((size_t)b * count + c - c0) * S + s] : 0.0;
}
