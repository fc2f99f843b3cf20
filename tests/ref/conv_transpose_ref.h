/*
 * conv_transpose_ref.h -- float64 CPU reference for grouped 2-D transposed
 * convolution (PyTorch's F.conv_transpose2d, ONNX's ConvTranspose), written
 * from the definition as a scatter, not through the convolution's reference:
 * x [B, Cin, H, W], w [Cin, Cout/G, KH, KW], bias [Cout], y [B, Cout, OH, OW],
 *   y[b, g*Cog + co, i*s - p + k*d] += x[b, g*Cig + ci, i] * w[g*Cig + ci, co, k]
 * per axis, with OH = (H - 1)*sh - ph - (ph + peh) + dh*(KH - 1) + 1 + oph.
 */
#ifndef TEENY_REF_CONV_TRANSPOSE_H
#define TEENY_REF_CONV_TRANSPOSE_H

#include <stddef.h>

typedef struct {
    int B, Cin, H, W, Cout, KH, KW;
    int sh, sw, ph, pw, dh, dw, G; /* stride, pad before, dilation per axis; groups */
    int peh, pew;                  /* the padding after is ph + peh (pw + pew) */
    int oph, opw;                  /* output_padding */
} ref_convt;

int ref_convt_oh(const ref_convt *c);
int ref_convt_ow(const ref_convt *c);
size_t ref_convt_x_numel(const ref_convt *c);
size_t ref_convt_w_numel(const ref_convt *c);
size_t ref_convt_y_numel(const ref_convt *c);

/* y = conv_transpose(x, w) + bias (bias may be NULL). */
void ref_convt_forward(const ref_convt *c, const double *x, const double *w, const double *bias, double *y);
/* Gradients of sum(dy * y); any output may be NULL. mag_dw, mag_db (may be
 * NULL) receive the random-walk size sqrt(sum term^2) of each sum. */
void ref_convt_backward(const ref_convt *c, const double *x, const double *w, const double *dy, double *dx,
                        double *dw, double *db, double *mag_dw, double *mag_db);

#endif
