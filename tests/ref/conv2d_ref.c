/*
 * conv2d_ref.c -- float64 reference for grouped 2-D convolution, written
 * straight from the definition: every output sums over the input channels
 * of its group and the kernel taps whose (dilated, strided, padded) input
 * position lies inside x. The backward pass uses the same loops with the
 * products sent to dx, dw and db.
 */
#include <math.h>
#include <string.h>

#include "conv2d_ref.h"

int ref_conv_out(int in, int k, int stride, int pad, int dil)
{
    return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

int ref_conv_oh(const ref_conv *c)
{
    return (c->H + 2 * c->ph + c->peh - c->dh * (c->KH - 1) - 1) / c->sh + 1;
}

int ref_conv_ow(const ref_conv *c)
{
    return (c->W + 2 * c->pw + c->pew - c->dw * (c->KW - 1) - 1) / c->sw + 1;
}

size_t ref_conv_x_numel(const ref_conv *c)
{
    return (size_t)c->B * c->Cin * c->H * c->W;
}

size_t ref_conv_w_numel(const ref_conv *c)
{
    return (size_t)c->Cout * (c->Cin / c->G) * c->KH * c->KW;
}

size_t ref_conv_y_numel(const ref_conv *c)
{
    return (size_t)c->B * c->Cout * ref_conv_oh(c) * ref_conv_ow(c);
}

/* Visit every (output, input, weight) triple that contributes a term. */
#define CONV_LOOPS(...)                                                                                   \
    do {                                                                                                  \
        int OH = ref_conv_oh(c);                                                                          \
        int OW = ref_conv_ow(c);                                                                          \
        int cig = c->Cin / c->G, cog = c->Cout / c->G;                                                    \
        for (int b = 0; b < c->B; b++)                                                                    \
            for (int co = 0; co < c->Cout; co++)                                                          \
                for (int oh = 0; oh < OH; oh++)                                                           \
                    for (int ow = 0; ow < OW; ow++) {                                                     \
                        size_t yi = (((size_t)b * c->Cout + co) * OH + oh) * OW + ow;                     \
                        for (int ci = 0; ci < cig; ci++)                                                  \
                            for (int kh = 0; kh < c->KH; kh++) {                                          \
                                int ih = oh * c->sh - c->ph + kh * c->dh;                                 \
                                if (ih < 0 || ih >= c->H)                                                 \
                                    continue;                                                             \
                                for (int kw = 0; kw < c->KW; kw++) {                                      \
                                    int iw = ow * c->sw - c->pw + kw * c->dw;                             \
                                    if (iw < 0 || iw >= c->W)                                             \
                                        continue;                                                         \
                                    size_t xi = (((size_t)b * c->Cin + (co / cog) * cig + ci) * c->H + ih) * \
                                                    c->W + iw;                                            \
                                    size_t wi = (((size_t)co * cig + ci) * c->KH + kh) * c->KW + kw;      \
                                    __VA_ARGS__                                                           \
                                }                                                                         \
                            }                                                                             \
                    }                                                                                     \
    } while (0)

void ref_conv2d_forward(const ref_conv *c, const double *x, const double *w, const double *bias, double *y,
                        double *mag)
{
    size_t ny = ref_conv_y_numel(c);
    int OHW = (int)(ny / ((size_t)c->B * c->Cout));
    for (size_t i = 0; i < ny; i++) {
        int co = (int)(i / OHW % c->Cout);
        y[i] = bias ? bias[co] : 0.0;
        if (mag)
            mag[i] = bias ? bias[co] * bias[co] : 0.0;
    }
    CONV_LOOPS({
        double t = x[xi] * w[wi];
        y[yi] += t;
        if (mag)
            mag[yi] += t * t;
    });
    if (mag)
        for (size_t i = 0; i < ny; i++)
            mag[i] = sqrt(mag[i]);
}

void ref_conv2d_backward(const ref_conv *c, const double *x, const double *w, const double *dy, double *dx,
                         double *dw, double *db, double *mag_dx, double *mag_dw, double *mag_db)
{
    size_t nx = ref_conv_x_numel(c), nw = ref_conv_w_numel(c), ny = ref_conv_y_numel(c);
    int OHW = (int)(ny / ((size_t)c->B * c->Cout));
    double *outs[6] = {dx, dw, db, mag_dx, mag_dw, mag_db};
    size_t sizes[6] = {nx, nw, (size_t)c->Cout, nx, nw, (size_t)c->Cout};
    for (int i = 0; i < 6; i++)
        if (outs[i])
            memset(outs[i], 0, sizes[i] * sizeof(double));
    CONV_LOOPS({
        double tx = dy[yi] * w[wi], tw = dy[yi] * x[xi];
        if (dx)
            dx[xi] += tx;
        if (mag_dx)
            mag_dx[xi] += tx * tx;
        if (dw)
            dw[wi] += tw;
        if (mag_dw)
            mag_dw[wi] += tw * tw;
    });
    for (size_t i = 0; i < ny; i++) {
        int co = (int)(i / OHW % c->Cout);
        if (db)
            db[co] += dy[i];
        if (mag_db)
            mag_db[co] += dy[i] * dy[i];
    }
    for (int i = 3; i < 6; i++)
        if (outs[i])
            for (size_t j = 0; j < sizes[i]; j++)
                outs[i][j] = sqrt(outs[i][j]);
}
