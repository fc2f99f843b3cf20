/* matmul_ref.c -- float64 batched matmul with broadcasting. */
#include <string.h>

#include "matmul_ref.h"

static ref_shape batch(const ref_shape *s)
{
    ref_shape b = {s->ndim - 2, {0}};
    for (int d = 0; d < b.ndim; d++)
        b.d[d] = s->d[d];
    return b;
}

int ref_matmul_shape(const ref_shape *a, const ref_shape *b, ref_shape *y)
{
    ref_shape ab = batch(a), bb = batch(b);
    if (a->d[a->ndim - 1] != b->d[b->ndim - 2] || !ref_broadcast(&ab, &bb, y))
        return 0;
    y->d[y->ndim++] = a->d[a->ndim - 2];
    y->d[y->ndim++] = b->d[b->ndim - 1];
    return 1;
}

void ref_matmul(const double *a, const ref_shape *as, const double *b, const ref_shape *bs, double *y)
{
    ref_shape ys, ab = batch(as), bb = batch(bs);
    ref_matmul_shape(as, bs, &ys);
    ref_shape yb = batch(&ys);
    int64_t M = as->d[as->ndim - 2], K = as->d[as->ndim - 1], N = bs->d[bs->ndim - 1];
    for (int64_t z = 0; z < ref_numel(&yb); z++) {
        const double *am = a + ref_bcast_index(&yb, &ab, z) * M * K, *bm = b + ref_bcast_index(&yb, &bb, z) * K * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += am[m * K + k] * bm[k * N + n];
                y[(z * M + m) * N + n] = s;
            }
    }
}

void ref_matmul_backward(const double *a, const ref_shape *as, const double *b, const ref_shape *bs, const double *dy,
                         double *da, double *db)
{
    ref_shape ys, ab = batch(as), bb = batch(bs);
    ref_matmul_shape(as, bs, &ys);
    ref_shape yb = batch(&ys);
    int64_t M = as->d[as->ndim - 2], K = as->d[as->ndim - 1], N = bs->d[bs->ndim - 1];
    if (da)
        memset(da, 0, (size_t)ref_numel(as) * sizeof *da);
    if (db)
        memset(db, 0, (size_t)ref_numel(bs) * sizeof *db);
    for (int64_t z = 0; z < ref_numel(&yb); z++) {
        int64_t ia = ref_bcast_index(&yb, &ab, z), ib = ref_bcast_index(&yb, &bb, z);
        const double *g = dy + z * M * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++)
                for (int64_t k = 0; k < K; k++) {
                    if (da)
                        da[ia * M * K + m * K + k] += g[m * N + n] * b[ib * K * N + k * N + n];
                    if (db)
                        db[ib * K * N + k * N + n] += a[ia * M * K + m * K + k] * g[m * N + n];
                }
    }
}
