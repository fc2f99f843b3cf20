/* layout_ref.h -- float64 references of group A's layout ops as source
 * maps: y[k] = x[src[k]] (src[k] < 0: the pad value), so the forward is a
 * gather through the map and the backward its adjoint, dx[src[k]] += dy[k]
 * in ascending k. Shapes as strided_ref.h's. */
#ifndef TEENY_REF_LAYOUT_H
#define TEENY_REF_LAYOUT_H
#include "strided_ref.h"
/* Each fills y's shape and src (room for y's elements). */
void ref_transpose_map(const ref_shape *x, const int *perm, ref_shape *y, int64_t *src);
/* ONNX Slice semantics per axis (start, end, step; clamped). */
void ref_slice_map(const ref_shape *x, const int64_t *start, const int64_t *end, const int64_t *step, ref_shape *y,
                   int64_t *src);
void ref_pad_map(const ref_shape *x, const int64_t *lo, const int64_t *hi, ref_shape *y, int64_t *src);
void ref_expand_map(const ref_shape *x, const ref_shape *y, int64_t *src);
void ref_gather_map(const ref_shape *x, int axis, const ref_shape *ind, const int32_t *idx, ref_shape *y, int64_t *src);
/* Part p of a concatenation along axis: the whole's elements that come
 * from part p, as indices into the part (others -1). */
void ref_concat_map(int n, const ref_shape *parts, int axis, int p, ref_shape *y, int64_t *src);
/* y[k] = src[k] < 0 ? pad : x[src[k]]; dx = the adjoint (dx zeroed first). */
void ref_map_forward(const double *x, const int64_t *src, int64_t ny, double pad, double *y);
void ref_map_backward(const double *dy, const int64_t *src, int64_t ny, int64_t nx, double *dx);
#endif
