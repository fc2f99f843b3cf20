/* pool_ref.c -- float64 reference pooling; gradients scatter over windows
 * (the device gathers, so the two are independent). Window bounds are
 * int64 and clipped to the plane before looping, so windows of any size
 * (kh * kw past 2^31 over a small padded input) cost only the positions
 * they cover; the average divides by kh * kw in double. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "pool_ref.h"

void ref_pool_geom(ref_pool *p)
{
    p->OH = (int)(((int64_t)p->H + 2 * (int64_t)p->ph - p->kh) / p->sh + 1);
    p->OW = (int)(((int64_t)p->W + 2 * (int64_t)p->pw - p->kw) / p->sw + 1);
}

/* The rows [*hs, *he) and columns [*ws, *we) of window (oh, ow) inside the plane. */
static void window(const ref_pool *p, int oh, int ow, int64_t *hs, int64_t *he, int64_t *ws, int64_t *we)
{
    int64_t h0 = (int64_t)oh * p->sh - p->ph, w0 = (int64_t)ow * p->sw - p->pw;
    *hs = h0 < 0 ? 0 : h0;
    *he = h0 + p->kh < p->H ? h0 + p->kh : p->H;
    *ws = w0 < 0 ? 0 : w0;
    *we = w0 + p->kw < p->W ? w0 + p->kw : p->W;
}

void ref_maxpool_forward(const ref_pool *p, const double *x, double *y, int32_t *argmax)
{
    for (int bc = 0; bc < p->B * p->C; bc++)
        for (int oh = 0; oh < p->OH; oh++)
            for (int ow = 0; ow < p->OW; ow++) {
                double best = -INFINITY;
                int arg = -1;
                int64_t hs, he, ws, we;
                window(p, oh, ow, &hs, &he, &ws, &we);
                for (int64_t h = hs; h < he; h++)
                    for (int64_t w = ws; w < we; w++) {
                        double v = x[((size_t)bc * p->H + (size_t)h) * p->W + (size_t)w];
                        if (arg < 0 || v > best || isnan(v)) {
                            best = v;
                            arg = (int)(h * p->W + w);
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
    double area = (double)p->kh * (double)p->kw;
    for (int bc = 0; bc < p->B * p->C; bc++)
        for (int oh = 0; oh < p->OH; oh++)
            for (int ow = 0; ow < p->OW; ow++) {
                double s = 0;
                int64_t hs, he, ws, we;
                window(p, oh, ow, &hs, &he, &ws, &we);
                for (int64_t h = hs; h < he; h++)
                    for (int64_t w = ws; w < we; w++)
                        s += x[((size_t)bc * p->H + (size_t)h) * p->W + (size_t)w];
                y[((size_t)bc * p->OH + oh) * p->OW + ow] = s / area;
            }
}

void ref_avgpool_backward(const ref_pool *p, const double *dy, double *dx)
{
    double area = (double)p->kh * (double)p->kw;
    memset(dx, 0, (size_t)p->B * p->C * p->H * p->W * sizeof *dx);
    for (int bc = 0; bc < p->B * p->C; bc++)
        for (int oh = 0; oh < p->OH; oh++)
            for (int ow = 0; ow < p->OW; ow++) {
                double g = dy[((size_t)bc * p->OH + oh) * p->OW + ow] / area;
                int64_t hs, he, ws, we;
                window(p, oh, ow, &hs, &he, &ws, &we);
                for (int64_t h = hs; h < he; h++)
                    for (int64_t w = ws; w < we; w++)
                        dx[((size_t)bc * p->H + (size_t)h) * p->W + (size_t)w] += g;
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
