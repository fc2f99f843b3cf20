/* pool_ref.c -- float64 reference pooling; gradients scatter over windows
 * (the device gathers, so the two are independent). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "pool_ref.h"

void ref_pool_geom(ref_pool *p)
{
    p->OH = (p->H + 2 * p->ph - p->kh) / p->sh + 1;
    p->OW = (p->W + 2 * p->pw - p->kw) / p->sw + 1;
}

void ref_maxpool_forward(const ref_pool *p, const double *x, double *y, int32_t *argmax)
{
    for (int bc = 0; bc < p->B * p->C; bc++)
        for (int oh = 0; oh < p->OH; oh++)
            for (int ow = 0; ow < p->OW; ow++) {
                double best = -INFINITY;
                int arg = -1;
                for (int i = 0; i < p->kh; i++)
                    for (int j = 0; j < p->kw; j++) {
                        int h = oh * p->sh - p->ph + i, w = ow * p->sw - p->pw + j;
                        if (h < 0 || h >= p->H || w < 0 || w >= p->W)
                            continue;
                        double v = x[((size_t)bc * p->H + h) * p->W + w];
                        if (arg < 0 || v > best || isnan(v)) {
                            best = v;
                            arg = h * p->W + w;
                        }
                    }
                size_t o = ((size_t)bc * p->OH + oh) * p->OW + ow;
                y[o] = best;
                if (argmax)
                    argmax[o] = arg;
            }
}

void ref_maxpool_backward(const ref_pool *p, const int32_t *argmax, const double *dy, double *dx)
{
    size_t plane = (size_t)p->H * p->W, oplane = (size_t)p->OH * p->OW;
    memset(dx, 0, (size_t)p->B * p->C * plane * sizeof *dx);
    for (int bc = 0; bc < p->B * p->C; bc++)
        for (size_t o = 0; o < oplane; o++)
            dx[bc * plane + (size_t)argmax[bc * oplane + o]] += dy[bc * oplane + o];
}

void ref_avgpool_forward(const ref_pool *p, const double *x, double *y)
{
    for (int bc = 0; bc < p->B * p->C; bc++)
        for (int oh = 0; oh < p->OH; oh++)
            for (int ow = 0; ow < p->OW; ow++) {
                double s = 0;
                for (int i = 0; i < p->kh; i++)
                    for (int j = 0; j < p->kw; j++) {
                        int h = oh * p->sh - p->ph + i, w = ow * p->sw - p->pw + j;
                        if (h >= 0 && h < p->H && w >= 0 && w < p->W)
                            s += x[((size_t)bc * p->H + h) * p->W + w];
                    }
                y[((size_t)bc * p->OH + oh) * p->OW + ow] = s / (p->kh * p->kw);
            }
}

void ref_avgpool_backward(const ref_pool *p, const double *dy, double *dx)
{
    memset(dx, 0, (size_t)p->B * p->C * p->H * p->W * sizeof *dx);
    for (int bc = 0; bc < p->B * p->C; bc++)
        for (int oh = 0; oh < p->OH; oh++)
            for (int ow = 0; ow < p->OW; ow++) {
                double g = dy[((size_t)bc * p->OH + oh) * p->OW + ow] / (p->kh * p->kw);
                for (int i = 0; i < p->kh; i++)
                    for (int j = 0; j < p->kw; j++) {
                        int h = oh * p->sh - p->ph + i, w = ow * p->sw - p->pw + j;
                        if (h >= 0 && h < p->H && w >= 0 && w < p->W)
                            dx[((size_t)bc * p->H + h) * p->W + w] += g;
                    }
            }
}

void ref_gap_forward(int B, int C, int S, const double *x, double *y)
{
    for (int bc = 0; bc < B * C; bc++) {
        double s = 0;
        for (int e = 0; e < S; e++)
            s += x[(size_t)bc * S + e];
        y[bc] = s / S;
    }
}

void ref_gap_backward(int B, int C, int S, const double *dy, double *dx)
{
    for (int bc = 0; bc < B * C; bc++)
        for (int e = 0; e < S; e++)
            dx[(size_t)bc * S + e] = dy[bc] / S;
}
