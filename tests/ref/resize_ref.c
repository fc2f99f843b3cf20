/* resize_ref.c -- see resize_ref.h. */
#include "resize_ref.h"

#include <math.h>
#include <string.h>

#include "teenycl.h"

/* ONNX's coordinate of output o on an axis of sizes in -> out; the
 * resized length is in * s (out where s is 0), as ONNX's reference has it. */
static double coordinate(int mode, double o, double in, double out, double s)
{
    double length = s > 0 ? in * s : out;
    switch (mode) {
    case TEENY_RESIZE_PYTORCH_HALF_PIXEL:
        if (length <= 1)
            return 0;
        /* fall through */
    case TEENY_RESIZE_HALF_PIXEL:
        return (s > 0 ? (o + 0.5) / s : (o + 0.5) * in / out) - 0.5;
    case TEENY_RESIZE_ASYMMETRIC:
        return s > 0 ? o / s : o * in / out;
    case TEENY_RESIZE_ALIGN_CORNERS:
        return length <= 1 ? 0 : o * (in - 1) / (length - 1);
    default: /* TEENY_RESIZE_TF_HALF_PIXEL_FOR_NN */
        return s > 0 ? (o + 0.5) / s : (o + 0.5) * in / out;
    }
}

static double round_mode(int rounding, double c)
{
    double f = floor(c);
    int tie = c - f == 0.5;
    switch (rounding) {
    case TEENY_RESIZE_ROUND_PREFER_FLOOR:
        return tie ? f : floor(c + 0.5);
    case TEENY_RESIZE_ROUND_PREFER_CEIL:
        return tie ? f + 1 : floor(c + 0.5);
    case TEENY_RESIZE_FLOOR:
        return f;
    default:
        return ceil(c);
    }
}

int ref_resize_taps(const ref_resize *p, int axis, int o, int idx[2], double w[2])
{
    int in = axis ? p->W : p->H, out = axis ? p->OW : p->OH;
    double s = axis ? p->scale_w : p->scale_h;
    double c = coordinate(p->coord, o, in, out, s);
    if (p->mode == TEENY_RESIZE_NEAREST) {
        double r = round_mode(p->rounding, c);
        idx[0] = r < 0 ? 0 : r > in - 1 ? in - 1 : (int)r;
        w[0] = 1;
        return 1;
    }
    c = c < 0 ? 0 : c > in - 1 ? in - 1 : c;
    idx[0] = (int)floor(c);
    idx[1] = idx[0] + 1 < in ? idx[0] + 1 : in - 1;
    w[1] = c - idx[0];
    w[0] = 1 - w[1];
    return 2;
}

/* forward (dir 0): y += w x; backward (dir 1): dx += w dy. */
static void sweep(const ref_resize *p, const double *a, double *b, int dir)
{
    for (int64_t pl = 0; pl < (int64_t)p->B * p->C; pl++)
        for (int oy = 0; oy < p->OH; oy++)
            for (int ox = 0; ox < p->OW; ox++) {
                int iy[2], ix[2];
                double wy[2], wx[2];
                int ny = ref_resize_taps(p, 0, oy, iy, wy), nx = ref_resize_taps(p, 1, ox, ix, wx);
                int64_t o = (pl * p->OH + oy) * p->OW + ox;
                for (int j = 0; j < ny; j++)
                    for (int k = 0; k < nx; k++) {
                        int64_t i = (pl * p->H + iy[j]) * p->W + ix[k];
                        if (dir)
                            b[i] += wy[j] * wx[k] * a[o];
                        else
                            b[o] += wy[j] * wx[k] * a[i];
                    }
            }
}

void ref_resize_forward(const ref_resize *p, const double *x, double *y)
{
    memset(y, 0, sizeof *y * (size_t)p->B * p->C * p->OH * p->OW);
    sweep(p, x, y, 0);
}

void ref_resize_backward(const ref_resize *p, const double *dy, double *dx)
{
    memset(dx, 0, sizeof *dx * (size_t)p->B * p->C * p->H * p->W);
    sweep(p, dy, dx, 1);
}
