/*
 * conv_data.h -- one convolution problem's host data for the conv test
 * suites (test_conv2d.c, test_conv2d_wino.c, test_conv_transpose.c): x, w,
 * bias and dy drawn from a seeded generator, in float and float64.
 */
#ifndef TEENY_TESTS_CONV_DATA_H
#define TEENY_TESTS_CONV_DATA_H

#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "ref/conv2d_ref.h"

typedef struct {
    float *x, *w, *b, *dy;
    double *xd, *wd, *bd, *dyd;
    size_t nx, nw, ny;
} conv_data;

/* nx, nw and ny floats of x, w and dy and cout biases, drawn in that order
 * (w with standard deviation 1 / sqrt(fan_in)), with their float64 copies;
 * test_conv_transpose.c draws its problems through this too. */
static inline void data_draw(conv_data *d, size_t nx, size_t nw, size_t ny, size_t cout, double fan_in, th_rng *r)
{
    d->nx = nx;
    d->nw = nw;
    d->ny = ny;
    d->x = th_malloc(d->nx * sizeof(float));
    d->w = th_malloc(d->nw * sizeof(float));
    d->b = th_malloc(cout * sizeof(float));
    d->dy = th_malloc(d->ny * sizeof(float));
    th_fill_normal(r, d->x, d->nx, th_uniform(r, -0.5, 0.5), 1.0);
    th_fill_normal(r, d->w, d->nw, 0, 1.0 / sqrt(fan_in));
    th_fill_uniform(r, d->b, cout, -1, 1);
    th_fill_normal(r, d->dy, d->ny, 0, 1);
    d->xd = th_dbl(d->x, d->nx);
    d->wd = th_dbl(d->w, d->nw);
    d->bd = th_dbl(d->b, cout);
    d->dyd = th_dbl(d->dy, d->ny);
}

static inline void data_make(conv_data *d, const ref_conv *c, th_rng *r)
{
    data_draw(d, ref_conv_x_numel(c), ref_conv_w_numel(c), ref_conv_y_numel(c), (size_t)c->Cout,
              (double)(c->Cin / c->G) * c->KH * c->KW, r);
}

static inline void data_free(conv_data *d)
{
    void *p[] = {d->x, d->w, d->b, d->dy, d->xd, d->wd, d->bd, d->dyd};
    for (int i = 0; i < 8; i++)
        free(p[i]);
}

#endif
