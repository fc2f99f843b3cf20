/* pool_ref.c -- float64 reference pooling; gradients scatter over windows
 * (the device gathers, so the two are independent). A window's taps
 * along an axis (tap i at start + i*d) that lie in a range are solved for
 * in double, so a window of any size costs only its taps inside the
 * plane; the average divides by the taps it counts (inside the padded
 * input, or inside x with exclude_pad). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "pool_ref.h"

static int64_t dil(int d)
{
    return d ? d : 1;
}

static int extent(int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t d, int64_t s, int ceil_mode)
{
    int64_t span = in + pb + pe - ((k - 1) * d + 1);
    int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (out - 1) * s >= in + pb)
        out--;
    return (int)out;
}

void ref_pool_geom(ref_pool *p)
{
    p->OH = extent(p->H, p->ph, p->ph + p->peh, p->kh, dil(p->dh), p->sh, p->ceil_mode);
    p->OW = extent(p->W, p->pw, p->pw + p->pew, p->kw, dil(p->dw), p->sw, p->ceil_mode);
}

/* The taps i in [0, k) of window o along one axis with lo <= o*s - pad +
 * i*d < hi, as the range [*first, *last] (empty when first > last),
 * solved in double (exact at these magnitudes). */
static void tap_range(int64_t o, int64_t s, int64_t pad, int64_t k, int64_t d, int64_t lo, int64_t hi,
                      int64_t *first, int64_t *last)
{
    double start = (double)o * (double)s - (double)pad;
    double f = ceil(((double)lo - start) / (double)d), l = floor(((double)hi - 1 - start) / (double)d);
    *first = f < 0 ? 0 : (int64_t)f;
    *last = l > (double)(k - 1) ? k - 1 : (int64_t)l;
}

/* Window o's taps along one axis: in[] gets the positions inside [0, n)
 * (at most cap), *counted how many taps lie inside [lo, hi). Returns how
 * many are in in[]. */
static int taps(int64_t o, int64_t s, int64_t pad, int64_t k, int64_t d, int64_t n, int64_t lo, int64_t hi,
                int64_t *in, int cap, int64_t *counted)
{
    int64_t first, last;
    int m = 0;
    tap_range(o, s, pad, k, d, lo, hi, &first, &last);
    *counted = last >= first ? last - first + 1 : 0;
    tap_range(o, s, pad, k, d, 0, n, &first, &last);
    for (int64_t i = first; i <= last && m < cap; i++)
        in[m++] = o * s - pad + i * d;
    return m;
}

#define CAP 4096 /* taps inside a plane of at most CAP rows or columns */

typedef struct {
    int64_t rows[CAP], cols[CAP];
    int nr, nc;
    double count; /* the average's divisor */
} window;

static void window_of(const ref_pool *p, int oh, int ow, window *w)
{
    int64_t ch, cw, lo_h = p->exclude_pad ? 0 : -p->ph, hi_h = p->exclude_pad ? p->H : p->H + p->ph + p->peh,
                    lo_w = p->exclude_pad ? 0 : -p->pw, hi_w = p->exclude_pad ? p->W : p->W + p->pw + p->pew;
    w->nr = taps(oh, p->sh, p->ph, p->kh, dil(p->dh), p->H, lo_h, hi_h, w->rows, CAP, &ch);
    w->nc = taps(ow, p->sw, p->pw, p->kw, dil(p->dw), p->W, lo_w, hi_w, w->cols, CAP, &cw);
    w->count = (double)ch * (double)cw;
}

void ref_maxpool_forward(const ref_pool *p, const double *x, double *y, int32_t *argmax)
{
    static window w;
    for (int bc = 0; bc < p->B * p->C; bc++)
        for (int oh = 0; oh < p->OH; oh++)
            for (int ow = 0; ow < p->OW; ow++) {
                double best = -INFINITY;
                int arg = -1;
                window_of(p, oh, ow, &w);
                for (int a = 0; a < w.nr; a++)
                    for (int b = 0; b < w.nc; b++) {
                        double v = x[((size_t)bc * p->H + (size_t)w.rows[a]) * p->W + (size_t)w.cols[b]];
                        if (arg < 0 || v > best || isnan(v)) {
                            best = v;
                            arg = (int)(w.rows[a] * p->W + w.cols[b]);
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
            if (argmax[bc * oplane + o] >= 0)
                dx[bc * plane + (size_t)argmax[bc * oplane + o]] += dy[bc * oplane + o];
}

void ref_avgpool_forward(const ref_pool *p, const double *x, double *y)
{
    static window w;
    for (int bc = 0; bc < p->B * p->C; bc++)
        for (int oh = 0; oh < p->OH; oh++)
            for (int ow = 0; ow < p->OW; ow++) {
                double s = 0;
                window_of(p, oh, ow, &w);
                for (int a = 0; a < w.nr; a++)
                    for (int b = 0; b < w.nc; b++)
                        s += x[((size_t)bc * p->H + (size_t)w.rows[a]) * p->W + (size_t)w.cols[b]];
                y[((size_t)bc * p->OH + oh) * p->OW + ow] = s / w.count;
            }
}

void ref_avgpool_backward(const ref_pool *p, const double *dy, double *dx)
{
    static window w;
    memset(dx, 0, (size_t)p->B * p->C * p->H * p->W * sizeof *dx);
    for (int bc = 0; bc < p->B * p->C; bc++)
        for (int oh = 0; oh < p->OH; oh++)
            for (int ow = 0; ow < p->OW; ow++) {
                window_of(p, oh, ow, &w);
                double g = dy[((size_t)bc * p->OH + oh) * p->OW + ow] / w.count;
                for (int a = 0; a < w.nr; a++)
                    for (int b = 0; b < w.nc; b++)
                        dx[((size_t)bc * p->H + (size_t)w.rows[a]) * p->W + (size_t)w.cols[b]] += g;
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

void ref_gmp_forward(int B, int C, int S, const double *x, double *y, int32_t *argmax)
{
    for (int bc = 0; bc < B * C; bc++) {
        double best = x[(size_t)bc * S];
        int arg = 0;
        for (int e = 1; e < S; e++) {
            double v = x[(size_t)bc * S + e];
            if (v > best || isnan(v)) {
                best = v;
                arg = e;
            }
        }
        y[bc] = best;
        if (argmax)
            argmax[bc] = arg;
    }
}

void ref_gmp_backward(int B, int C, int S, const int32_t *argmax, const double *dy, double *dx)
{
    memset(dx, 0, (size_t)B * C * S * sizeof *dx);
    for (int bc = 0; bc < B * C; bc++)
        dx[(size_t)bc * S + argmax[bc]] = dy[bc];
}
