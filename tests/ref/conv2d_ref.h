/*
 * conv2d_ref.h -- float64 CPU reference for grouped 2-D convolution,
 * PyTorch F.conv2d semantics: x [B, Cin, H, W], w [Cout, Cin/G, KH, KW],
 * bias [Cout], y [B, Cout, OH, OW], zero padding, per-axis stride, padding
 * and dilation.
 */
#ifndef TEENY_REF_CONV2D_H
#define TEENY_REF_CONV2D_H

#include <stddef.h>

typedef struct {
    int B, Cin, H, W, Cout, KH, KW;
    int sh, sw, ph, pw, dh, dw, G; /* stride, pad, dilation per axis; groups */
    int peh, pew;                  /* the padding after the input is ph + peh (pw + pew); 0: symmetric */
} ref_conv;

/* Output size of one axis, symmetric padding. */
int ref_conv_out(int in, int k, int stride, int pad, int dil);
/* OH and OW of c (its padding after included). */
int ref_conv_oh(const ref_conv *c);
int ref_conv_ow(const ref_conv *c);
size_t ref_conv_x_numel(const ref_conv *c);
size_t ref_conv_w_numel(const ref_conv *c);
size_t ref_conv_y_numel(const ref_conv *c);

/* y = conv(x, w) + bias (bias may be NULL). mag (may be NULL) receives the
 * random-walk size sqrt(sum of squared terms) of each output. */
void ref_conv2d_forward(const ref_conv *c, const double *x, const double *w, const double *bias, double *y,
                        double *mag);
/* Gradients of sum(dy * y): any output may be NULL. mag_* (may be NULL)
 * receive the random-walk size of each gradient's sum. */
void ref_conv2d_backward(const ref_conv *c, const double *x, const double *w, const double *dy, double *dx,
                         double *dw, double *db, double *mag_dx, double *mag_dw, double *mag_db);

#endif
