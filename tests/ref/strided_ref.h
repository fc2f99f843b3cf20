/* strided_ref.h -- float64 references of group A's broadcasting binary
 * ops and reductions over shapes of rank 1..8 (row-major). */
#ifndef TEENY_REF_STRIDED_H
#define TEENY_REF_STRIDED_H
#include <stdint.h>
typedef struct {
    int ndim;
    int64_t d[8];
} ref_shape;
int64_t ref_numel(const ref_shape *s);
/* NumPy broadcast of a and b; 0 when they do not broadcast. */
int ref_broadcast(const ref_shape *a, const ref_shape *b, ref_shape *y);
/* The element of x (broadcast to y) at y's flat index k. */
int64_t ref_bcast_index(const ref_shape *y, const ref_shape *x, int64_t k);
/* op: 0 add, 1 sub, 2 mul, 3 div, 4 pow. */
double ref_binary_op(int op, double a, double b);
void ref_binary(int op, const double *a, const ref_shape *as, const double *b, const ref_shape *bs, double *y,
                const ref_shape *ys);
/* da, db (either NULL) summed over the broadcast positions, in y order. */
void ref_binary_backward(int op, const double *a, const ref_shape *as, const double *b, const ref_shape *bs,
                         const double *dy, const ref_shape *ys, double *da, double *db);
/* y (kept dimensions, in order) = sum (mean) of x over the axes in mask. */
void ref_reduce(const double *x, const ref_shape *xs, unsigned mask, int mean, double *y);
#endif
