/* strided_ref.c -- float64 references of broadcasting binary ops and reductions. */
#include <math.h>
#include <string.h>

#include "strided_ref.h"

int64_t ref_numel(const ref_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->d[i];
    return n;
}

int ref_broadcast(const ref_shape *a, const ref_shape *b, ref_shape *y)
{
    y->ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < y->ndim; i++) {
        int ja = i - (y->ndim - a->ndim), jb = i - (y->ndim - b->ndim);
        int64_t x = ja < 0 ? 1 : a->d[ja], z = jb < 0 ? 1 : b->d[jb];
        if (x != z && x != 1 && z != 1)
            return 0;
        y->d[i] = x == 1 ? z : x;
    }
    return 1;
}

int64_t ref_bcast_index(const ref_shape *y, const ref_shape *x, int64_t k)
{
    int64_t at = 0, mul = 1;
    for (int i = y->ndim - 1; i >= 0; i--) {
        int64_t c = k % y->d[i];
        k /= y->d[i];
        int j = i - (y->ndim - x->ndim);
        if (j >= 0) {
            at += (x->d[j] == 1 ? 0 : c) * mul;
            mul *= x->d[j];
        }
    }
    return at;
}

double ref_binary_op(int op, double a, double b)
{
    switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    default: return pow(a, b);
    }
}

void ref_binary(int op, const double *a, const ref_shape *as, const double *b, const ref_shape *bs, double *y,
                const ref_shape *ys)
{
    for (int64_t k = 0; k < ref_numel(ys); k++)
        y[k] = ref_binary_op(op, a[ref_bcast_index(ys, as, k)], b[ref_bcast_index(ys, bs, k)]);
}

void ref_binary_backward(int op, const double *a, const ref_shape *as, const double *b, const ref_shape *bs,
                         const double *dy, const ref_shape *ys, double *da, double *db)
{
    if (da)
        memset(da, 0, (size_t)ref_numel(as) * sizeof *da);
    if (db)
        memset(db, 0, (size_t)ref_numel(bs) * sizeof *db);
    for (int64_t k = 0; k < ref_numel(ys); k++) {
        int64_t i = ref_bcast_index(ys, as, k), j = ref_bcast_index(ys, bs, k);
        double x = a[i], z = b[j], ga, gb;
        switch (op) {
        case 0: ga = 1, gb = 1; break;
        case 1: ga = 1, gb = -1; break;
        case 2: ga = z, gb = x; break;
        case 3: ga = 1 / z, gb = -x / (z * z); break;
        default:
            ga = z == 0 ? 0 : z * pow(x, z - 1);
            gb = x == 0 && z >= 0 ? 0 : pow(x, z) * log(x);
        }
        if (da)
            da[i] += dy[k] * ga;
        if (db)
            db[j] += dy[k] * gb;
    }
}

void ref_reduce(const double *x, const ref_shape *xs, unsigned mask, int mean, double *y)
{
    ref_shape ks = {0};
    int64_t count = 1;
    for (int d = 0; d < xs->ndim; d++) {
        if (mask & (1u << d))
            count *= xs->d[d];
        else
            ks.d[ks.ndim++] = xs->d[d];
    }
    memset(y, 0, (size_t)ref_numel(&ks) * sizeof *y);
    for (int64_t k = 0; k < ref_numel(xs); k++) {
        int64_t rem = k, o = 0, mul = 1;
        for (int d = xs->ndim - 1; d >= 0; d--) {
            int64_t c = rem % xs->d[d];
            rem /= xs->d[d];
            if (!(mask & (1u << d))) {
                o += c * mul;
                mul *= xs->d[d];
            }
        }
        y[o] += x[k];
    }
    for (int64_t o = 0; mean && o < ref_numel(&ks); o++)
        y[o] /= (double)count;
}
