/*
 * conv_data.h -- one convolution problem's host data for the conv2d test
 * suites (test_conv2d.c, test_conv2d_wino.c): x, w, bias and dy drawn from
 * a seeded generator, in float and float64.
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

static inline void data_make(conv_data *d, const ref_conv *c, th_rng *r)
{
    d->nx = ref_conv_x_numel(c);
    d->nw = ref_conv_w_numel(c);
    d->ny = ref_conv_y_numel(c);
    d->x = th_malloc(d->nx * sizeof(float));
    d->w = th_malloc(d->nw * sizeof(float));
    d->b = th_malloc((size_t)c->Cout * sizeof(float));
    d->dy = th_malloc(d->ny * sizeof(float));
    th_fill_normal(r, d->x, d->nx, th_uniform(r, -0.5, 0.5), 1.0);
    th_fill_normal(r, d->w, d->nw, 0, 1.0 / sqrt((double)(c->Cin / c->G) * c->KH * c->KW));
    th_fill_uniform(r, d->b, (size_t)c->Cout, -1, 1);
    th_fill_normal(r, d->dy, d->ny, 0, 1);
    d->xd = th_dbl(d->x, d->nx);
    d->wd = th_dbl(d->w, d->nw);
    d->bd = th_dbl(d->b, (size_t)c->Cout);
    d->dyd = th_dbl(d->dy, d->ny);
}

static inline void data_free(conv_data *d)
{
    void *p[] = {d->x, d->w, d->b, d->dy, d->xd, d->wd, d->bd, d->dyd};
    for (int i = 0; i < 8; i++)
        free(p[i]);
}

#endif
