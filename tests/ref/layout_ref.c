/* layout_ref.c -- float64 references of the layout ops as source maps. */
#include <string.h>

#include "layout_ref.h"

/* coordinates of flat index k in s */
static void coords(const ref_shape *s, int64_t k, int64_t *c)
{
    for (int d = s->ndim - 1; d >= 0; d--) {
        c[d] = k % s->d[d];
        k /= s->d[d];
    }
}

static int64_t flat(const ref_shape *s, const int64_t *c)
{
    int64_t k = 0;
    for (int d = 0; d < s->ndim; d++)
        k = k * s->d[d] + c[d];
    return k;
}

void ref_transpose_map(const ref_shape *x, const int *perm, ref_shape *y, int64_t *src)
{
    int64_t c[8], xc[8];
    y->ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++)
        y->d[d] = x->d[perm[d]];
    for (int64_t k = 0; k < ref_numel(y); k++) {
        coords(y, k, c);
        for (int d = 0; d < x->ndim; d++)
            xc[perm[d]] = c[d];
        src[k] = flat(x, xc);
    }
}

void ref_slice_map(const ref_shape *x, const int64_t *start, const int64_t *end, const int64_t *step, ref_shape *y,
                   int64_t *src)
{
    int64_t first[8], c[8];
    *y = *x;
    for (int d = 0; d < x->ndim; d++) { /* the ONNX operator text, literally */
        int64_t n = x->d[d], s = start[d] < 0 ? start[d] + n : start[d], e = end[d] < 0 ? end[d] + n : end[d], len = 0;
        if (step[d] > 0) {
            s = s < 0 ? 0 : s > n ? n : s;
            e = e < 0 ? 0 : e > n ? n : e;
            for (int64_t i = s; i < e; i += step[d])
                len++;
        } else {
            s = s < 0 ? -1 : s > n - 1 ? n - 1 : s;
            e = e < -1 ? -1 : e > n - 1 ? n - 1 : e;
            for (int64_t i = s; i > e; i += step[d])
                len++;
        }
        first[d] = s;
        y->d[d] = len;
    }
    for (int64_t k = 0; k < ref_numel(y); k++) {
        coords(y, k, c);
        for (int d = 0; d < x->ndim; d++)
            c[d] = first[d] + c[d] * step[d];
        src[k] = flat(x, c);
    }
}

void ref_pad_map(const ref_shape *x, const int64_t *lo, const int64_t *hi, ref_shape *y, int64_t *src)
{
    int64_t c[8];
    *y = *x;
    for (int d = 0; d < x->ndim; d++)
        y->d[d] += lo[d] + hi[d];
    for (int64_t k = 0; k < ref_numel(y); k++) {
        int inside = 1;
        coords(y, k, c);
        for (int d = 0; d < x->ndim; d++) {
            c[d] -= lo[d];
            inside &= c[d] >= 0 && c[d] < x->d[d];
        }
        src[k] = inside ? flat(x, c) : -1;
    }
}

void ref_expand_map(const ref_shape *x, const ref_shape *y, int64_t *src)
{
    for (int64_t k = 0; k < ref_numel(y); k++)
        src[k] = ref_bcast_index(y, x, k);
}

void ref_gather_map(const ref_shape *x, int axis, const ref_shape *ind, const int32_t *idx, ref_shape *y, int64_t *src)
{
    int64_t c[8], xc[8];
    y->ndim = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d == axis)
            for (int j = 0; j < ind->ndim; j++)
                y->d[y->ndim++] = ind->d[j];
        else
            y->d[y->ndim++] = x->d[d];
    for (int64_t k = 0; k < ref_numel(y); k++) {
        coords(y, k, c);
        int64_t q = 0;
        for (int j = 0; j < ind->ndim; j++)
            q = q * ind->d[j] + c[axis + j];
        for (int d = 0; d < x->ndim; d++)
            xc[d] = d < axis ? c[d] : d == axis ? idx[q] : c[d + ind->ndim - 1];
        src[k] = idx[q] >= 0 && idx[q] < x->d[axis] ? flat(x, xc) : -1;
    }
}

void ref_concat_map(int n, const ref_shape *parts, int axis, int p, ref_shape *y, int64_t *src)
{
    int64_t c[8], at = 0;
    *y = parts[0];
    y->d[axis] = 0;
    for (int i = 0; i < n; i++) {
        if (i == p)
            at = y->d[axis];
        y->d[axis] += parts[i].d[axis];
    }
    for (int64_t k = 0; k < ref_numel(y); k++) {
        coords(y, k, c);
        c[axis] -= at;
        src[k] = c[axis] >= 0 && c[axis] < parts[p].d[axis] ? flat(&parts[p], c) : -1;
    }
}

void ref_map_forward(const double *x, const int64_t *src, int64_t ny, double pad, double *y)
{
    for (int64_t k = 0; k < ny; k++)
        y[k] = src[k] < 0 ? pad : x[src[k]];
}

void ref_map_backward(const double *dy, const int64_t *src, int64_t ny, int64_t nx, double *dx)
{
    memset(dx, 0, (size_t)nx * sizeof *dx);
    for (int64_t k = 0; k < ny; k++)
        if (src[k] >= 0)
            dx[src[k]] += dy[k];
}
