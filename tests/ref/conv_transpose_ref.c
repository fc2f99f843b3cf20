/*
 * conv_transpose_ref.c -- the transposed convolution's float64 reference
 * (conv_transpose_ref.h): every tap of the scatter visited once, forward
 * and backward alike.
 */
#include "conv_transpose_ref.h"

#include <math.h>
#include <string.h>

int ref_convt_oh(const ref_convt *c)
{
    return (c->H - 1) * c->sh - 2 * c->ph - c->peh + c->dh * (c->KH - 1) + 1 + c->oph;
}
int ref_convt_ow(const ref_convt *c)
{
    return (c->W - 1) * c->sw - 2 * c->pw - c->pew + c->dw * (c->KW - 1) + 1 + c->opw;
}
size_t ref_convt_x_numel(const ref_convt *c) { return (size_t)c->B * c->Cin * c->H * c->W; }
size_t ref_convt_w_numel(const ref_convt *c) { return (size_t)c->Cin * (c->Cout / c->G) * c->KH * c->KW; }
size_t ref_convt_y_numel(const ref_convt *c) { return (size_t)c->B * c->Cout * ref_convt_oh(c) * ref_convt_ow(c); }

/* One tap: calls f(xi, wi, yi) for every (x, w, y) triple the scatter
 * links, with y's index inside the output (taps outside it skipped). */
#define FOR_TAPS(c, BODY)                                                                                   \
    do {                                                                                                    \
        int OH_ = ref_convt_oh(c), OW_ = ref_convt_ow(c), cig_ = (c)->Cin / (c)->G, cog_ = (c)->Cout / (c)->G; \
        for (int b = 0; b < (c)->B; b++)                                                                    \
            for (int ci = 0; ci < (c)->Cin; ci++)                                                           \
                for (int co = 0; co < cog_; co++)                                                           \
                    for (int ih = 0; ih < (c)->H; ih++)                                                     \
                        for (int iw = 0; iw < (c)->W; iw++)                                                 \
                            for (int kh = 0; kh < (c)->KH; kh++)                                            \
                                for (int kw = 0; kw < (c)->KW; kw++) {                                      \
                                    int oh = ih * (c)->sh - (c)->ph + kh * (c)->dh;                         \
                                    int ow = iw * (c)->sw - (c)->pw + kw * (c)->dw;                         \
                                    if (oh < 0 || oh >= OH_ || ow < 0 || ow >= OW_)                         \
                                        continue;                                                           \
                                    size_t xi = (((size_t)b * (c)->Cin + ci) * (c)->H + ih) * (c)->W + iw;  \
                                    size_t wi = (((size_t)ci * cog_ + co) * (c)->KH + kh) * (c)->KW + kw;   \
                                    int yc = ci / cig_ * cog_ + co;                                         \
                                    size_t yi = (((size_t)b * (c)->Cout + yc) * OH_ + oh) * OW_ + ow;       \
                                    BODY;                                                                   \
                                }                                                                           \
    } while (0)

void ref_convt_forward(const ref_convt *c, const double *x, const double *w, const double *bias, double *y)
{
    size_t ny = ref_convt_y_numel(c), plane = (size_t)ref_convt_oh(c) * ref_convt_ow(c);
    for (size_t i = 0; i < ny; i++)
        y[i] = bias ? bias[i / plane % (size_t)c->Cout] : 0.0;
    FOR_TAPS(c, y[yi] += x[xi] * w[wi]);
}

void ref_convt_backward(const ref_convt *c, const double *x, const double *w, const double *dy, double *dx,
                        double *dw, double *db, double *mag_dw, double *mag_db)
{
    size_t nx = ref_convt_x_numel(c), nw = ref_convt_w_numel(c), ny = ref_convt_y_numel(c),
           plane = (size_t)ref_convt_oh(c) * ref_convt_ow(c);
    if (dx)
        memset(dx, 0, nx * sizeof *dx);
    if (dw)
        memset(dw, 0, nw * sizeof *dw);
    if (mag_dw)
        memset(mag_dw, 0, nw * sizeof *mag_dw);
    FOR_TAPS(c, {
        if (dx)
            dx[xi] += dy[yi] * w[wi];
        if (dw)
            dw[wi] += dy[yi] * x[xi];
        if (mag_dw)
            mag_dw[wi] += dy[yi] * x[xi] * dy[yi] * x[xi];
    });
    if (mag_dw)
        for (size_t i = 0; i < nw; i++)
            mag_dw[i] = sqrt(mag_dw[i]);
    for (int k = 0; k < c->Cout; k++) {
        double s = 0, m = 0;
        for (int b = 0; b < c->B; b++)
            for (size_t i = 0; i < plane; i++) {
                double v = dy[((size_t)b * c->Cout + k) * plane + i];
                s += v;
                m += v * v;
            }
        if (db)
            db[k] = s;
        if (mag_db)
            mag_db[k] = sqrt(m);
    }
    (void)ny;
}
