/* resize_ref.h -- float64 reference of teeny_resize2d (ONNX Resize over
 * the last two dimensions of [B, C, H, W]): per axis each output reads at
 * most two inputs, at the coordinate ONNX's formula gives in double (a
 * scale of 0 enters as in / out, multiplied before the division), rounded
 * or mixed as the mode says; the backward is the adjoint (a scatter in
 * output order). */
#ifndef TEENY_REF_RESIZE_H
#define TEENY_REF_RESIZE_H
#include <stdint.h>

typedef struct {
    int B, C, H, W, OH, OW;
    int mode, coord, rounding; /* teeny_resize_mode, teeny_resize_coord, teeny_resize_rounding */
    float scale_h, scale_w;    /* 0: OH / H (OW / W) */
} ref_resize;

/* The inputs (idx, up to 2) and weights output o of one axis reads; the count. */
int ref_resize_taps(const ref_resize *p, int axis, int o, int idx[2], double w[2]);
void ref_resize_forward(const ref_resize *p, const double *x, double *y);
/* dx (zeroed first) = the adjoint of the forward at dy. */
void ref_resize_backward(const ref_resize *p, const double *dy, double *dx);
#endif
