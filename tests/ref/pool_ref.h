/* pool_ref.h -- float64 reference of 2-D max/average pooling (PyTorch
 * semantics: -inf padding for max, count_include_pad for average, and
 * ONNX's options: asymmetric pads, dilation, ceil_mode,
 * count_include_pad=0, pads past half the kernel) and global average and
 * max pooling over NCHW data. */
#ifndef TEENY_REF_POOL_H
#define TEENY_REF_POOL_H
#include <stdint.h>
typedef struct {
    int B, C, H, W, kh, kw, sh, sw, ph, pw, OH, OW;
    /* options, 0 by default: the padding after is ph + peh (pw + pew);
     * dilation dh, dw (0 counts as 1); ceil_mode; exclude_pad (average:
     * divide by the taps inside x) */
    int peh, pew, dh, dw, ceil_mode, exclude_pad;
} ref_pool;
/* Fill OH, OW from the rest. */
void ref_pool_geom(ref_pool *p);
/* argmax (may be NULL): index h*W + w within the plane (-1 for a window
 * without a tap inside x, whose max is -inf); a NaN wins. */
void ref_maxpool_forward(const ref_pool *p, const double *x, double *y, int32_t *argmax);
void ref_maxpool_backward(const ref_pool *p, const int32_t *argmax, const double *dy, double *dx);
void ref_avgpool_forward(const ref_pool *p, const double *x, double *y);
void ref_avgpool_backward(const ref_pool *p, const double *dy, double *dx);
void ref_gap_forward(int B, int C, int S, const double *x, double *y);
void ref_gap_backward(int B, int C, int S, const double *dy, double *dx);
/* Global max over each plane of S elements: argmax the first maximum (a NaN wins). */
void ref_gmp_forward(int B, int C, int S, const double *x, double *y, int32_t *argmax);
void ref_gmp_backward(int B, int C, int S, const int32_t *argmax, const double *dy, double *dx);
#endif
