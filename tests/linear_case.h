/*
 * linear_case.h -- one linear-layer problem for the linear suite's files
 * (test_linear_tf32.c, test_linear_small.c): x [N, in], w [out, in], bias
 * [out] and dy [N, out] drawn from one seed, on the device (views at
 * distinct odd offsets in guarded buffers when view != 0), and the
 * outputs y, dx, dw, db, unwritten.
 */
#ifndef TEENY_TESTS_LINEAR_CASE_H
#define TEENY_TESTS_LINEAR_CASE_H

#include <stdlib.h>

#include "harness.h"

typedef struct {
    int N, in, out, bias, view;
    th_dev x, w, b, dy, y, dx, dw, db;
    float *hx, *hw, *hb, *hdy;
} lin_case;

/* The inputs drawn in the order x, w, bias, dy (seed), and every tensor
 * made on the device; N, in, out, bias and view set by the caller. */
static inline void lin_case_make(teeny_ctx *ctx, lin_case *c, uint64_t seed)
{
    th_rng r = th_rng_make(seed);
    size_t nx = (size_t)c->N * c->in, nw = (size_t)c->out * c->in, ny = (size_t)c->N * c->out;
    int64_t xs[2] = {c->N, c->in}, ws[2] = {c->out, c->in}, ys[2] = {c->N, c->out}, bs[1] = {c->out};
    int v = c->view;
    c->hx = th_malloc(nx * 4);
    c->hw = th_malloc(nw * 4);
    c->hb = th_malloc((size_t)c->out * 4);
    c->hdy = th_malloc(ny * 4);
    th_fill_normal(&r, c->hx, nx, th_uniform(&r, -1, 1), 1);
    th_fill_uniform(&r, c->hw, nw, -1, 1);
    th_fill_uniform(&r, c->hb, (size_t)c->out, -1, 1);
    th_fill_normal(&r, c->hdy, ny, 0, 1);
    c->x = th_dev_make(ctx, 0, 2, xs, v, c->hx);
    c->w = th_dev_make(ctx, 0, 2, ws, v ? v + 2 : 0, c->hw);
    c->b = th_dev_make(ctx, 0, 1, bs, v, c->hb);
    c->dy = th_dev_make(ctx, 0, 2, ys, v ? v + 1 : 0, c->hdy);
    c->y = th_dev_make(ctx, 0, 2, ys, v ? v + 4 : 0, NULL);
    c->dx = th_dev_make(ctx, 0, 2, xs, v ? v + 3 : 0, NULL);
    c->dw = th_dev_make(ctx, 0, 2, ws, v ? v + 5 : 0, NULL);
    c->db = th_dev_make(ctx, 0, 1, bs, v, NULL);
}

/* Output i: y, dx, dw, db for 0..3. */
static inline th_dev *lin_case_out(lin_case *c, int i)
{
    th_dev *o[4] = {&c->y, &c->dx, &c->dw, &c->db};
    return o[i];
}

static inline void lin_case_free(lin_case *c)
{
    th_dev *d[] = {&c->x, &c->w, &c->b, &c->dy, &c->y, &c->dx, &c->dw, &c->db};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        th_dev_free(d[i]);
    free(c->hx);
    free(c->hw);
    free(c->hb);
    free(c->hdy);
}

#endif
