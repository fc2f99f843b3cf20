/*
 * batchnorm_ref.c -- float64 reference for batch normalization, written
 * from the definition (two-pass mean/variance), element (b, c, s) at
 * (b*C + c)*S + s.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "batchnorm_ref.h"

#define AT(b, c, s) (((size_t)(b) * C + (c)) * S + (s))

void ref_bn_stats(const double *x, int B, int C, int S, double *mean, double *var)
{
    double n = (double)B * S;
    for (int c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++)
                m += x[AT(b, c, s)];
        m /= n;
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++) {
                double d = x[AT(b, c, s)] - m;
                v += d * d;
            }
        mean[c] = m;
        var[c] = v / n;
    }
}

void ref_bn_normalize(const double *x, int B, int C, int S, const double *mean, const double *var, double eps,
                      const double *w, const double *b, double *y)
{
    for (int bb = 0; bb < B; bb++)
        for (int c = 0; c < C; c++) {
            double r = 1.0 / sqrt(var[c] + eps);
            for (int s = 0; s < S; s++)
                y[AT(bb, c, s)] = (x[AT(bb, c, s)] - mean[c]) * r * w[c] + b[c];
        }
}

void ref_bn_forward_train(const double *x, int B, int C, int S, const double *w, const double *b, double momentum,
                          double eps, double *y, double *save_mean, double *save_rstd, double *run_mean,
                          double *run_var)
{
    double n = (double)B * S;
    double var[C > 0 ? C : 1];
    ref_bn_stats(x, B, C, S, save_mean, var);
    ref_bn_normalize(x, B, C, S, save_mean, var, eps, w, b, y);
    for (int c = 0; c < C; c++) {
        save_rstd[c] = 1.0 / sqrt(var[c] + eps);
        run_mean[c] = (1 - momentum) * run_mean[c] + momentum * save_mean[c];
        run_var[c] = (1 - momentum) * run_var[c] + momentum * var[c] * n / (n - 1);
    }
}

void ref_bn_backward_train(const double *x, const double *dy, int B, int C, int S, const double *w,
                           const double *save_mean, const double *save_rstd, double *dx, double *dw, double *db)
{
    double n = (double)B * S;
    for (int c = 0; c < C; c++) {
        double sdy = 0, sdyxh = 0, r = save_rstd[c], m = save_mean[c];
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++) {
                sdy += dy[AT(b, c, s)];
                sdyxh += dy[AT(b, c, s)] * (x[AT(b, c, s)] - m) * r;
            }
        db[c] = sdy;
        dw[c] = sdyxh;
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++) {
                double xh = (x[AT(b, c, s)] - m) * r;
                dx[AT(b, c, s)] = w[c] * r * (dy[AT(b, c, s)] - sdy / n - xh * sdyxh / n);
            }
    }
}

void ref_bn_backward_frozen(const double *x, const double *dy, int B, int C, int S, const double *w,
                            const double *run_mean, const double *run_var, double eps, double *dx, double *dw,
                            double *db)
{
    for (int c = 0; c < C; c++) {
        double r = 1.0 / sqrt(run_var[c] + eps), sdy = 0, sdyxh = 0;
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++) {
                sdy += dy[AT(b, c, s)];
                sdyxh += dy[AT(b, c, s)] * (x[AT(b, c, s)] - run_mean[c]) * r;
                dx[AT(b, c, s)] = w[c] * r * dy[AT(b, c, s)];
            }
        db[c] = sdy;
        dw[c] = sdyxh;
    }
}

/* Term sizes of the per-channel gradient sums and of the training dx
 * (see harness.h): dbias = sum dy, dweight = sum dy*xhat,
 * dx = w*r*(dy - mean(dy) - xhat*mean(dy*xhat)). */
void ref_bn_grad_mags(const double *x, const double *dy, int B, int C, int S, const double *w, const double *mean,
                      const double *rstd, double *mag_db, double *mag_dw, double *mag_dx)
{
    for (int c = 0; c < C; c++) {
        double s_dy = 0, s_dyx = 0, n = (double)B * S;
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++) {
                size_t e = ((size_t)b * C + c) * S + s;
                double xh = (x[e] - mean[c]) * rstd[c];
                s_dy += dy[e] * dy[e];
                s_dyx += dy[e] * xh * dy[e] * xh;
            }
        mag_db[c] = sqrt(s_dy);
        mag_dw[c] = sqrt(s_dyx);
        if (!mag_dx)
            continue;
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++) {
                size_t e = ((size_t)b * C + c) * S + s;
                double xh = (x[e] - mean[c]) * rstd[c];
                mag_dx[e] = fabs(w[c] * rstd[c]) * (fabs(dy[e]) + sqrt(s_dy / n) + fabs(xh) * sqrt(s_dyx / n));
            }
    }
}

/* ---- with a fused activation (TEENY_ACT_NONE 0, RELU 1, SILU 2) ---- */

static double act_f(int act, double v)
{
    return act == 1 ? (v > 0 ? v : 0) : act == 2 ? v / (1 + exp(-v)) : v;
}

static double act_d(int act, double v)
{
    double s = 1 / (1 + exp(-v));
    return act == 1 ? (v > 0 ? 1 : 0) : act == 2 ? s * (1 + v * (1 - s)) : 1;
}

void ref_bn_act_apply(const double *x, int B, int C, int S, const double *mean, const double *rstd, const double *w,
                      const double *b, int act, double *y)
{
    for (int bi = 0; bi < B; bi++)
        for (int c = 0; c < C; c++)
            for (int s = 0; s < S; s++)
                y[AT(bi, c, s)] = act_f(act, (x[AT(bi, c, s)] - mean[c]) * rstd[c] * w[c] + b[c]);
}

void ref_bn_act_forward_train(const double *x, int B, int C, int S, const double *w, const double *b, double momentum,
                              double eps, int act, double *y, double *save_mean, double *save_rstd, double *run_mean,
                              double *run_var)
{
    ref_bn_forward_train(x, B, C, S, w, b, momentum, eps, y, save_mean, save_rstd, run_mean, run_var);
    ref_bn_act_apply(x, B, C, S, save_mean, save_rstd, w, b, act, y);
}

void ref_bn_act_backward(const double *x, const double *dy, int B, int C, int S, const double *w, const double *b,
                         const double *mean, const double *rstd, int act, int training, double *dx, double *dw,
                         double *db)
{
    size_t n = (size_t)B * C * S;
    double *g = malloc(n * sizeof *g);
    if (!g)
        return;
    for (int bi = 0; bi < B; bi++)
        for (int c = 0; c < C; c++)
            for (int s = 0; s < S; s++) {
                double pre = (x[AT(bi, c, s)] - mean[c]) * rstd[c] * w[c] + b[c];
                g[AT(bi, c, s)] = dy[AT(bi, c, s)] * act_d(act, pre);
            }
    if (training) {
        ref_bn_backward_train(x, g, B, C, S, w, mean, rstd, dx, dw, db);
    } else {
        for (int c = 0; c < C; c++) {
            double sdy = 0, sdyxh = 0, r = rstd[c];
            for (int bi = 0; bi < B; bi++)
                for (int s = 0; s < S; s++) {
                    sdy += g[AT(bi, c, s)];
                    sdyxh += g[AT(bi, c, s)] * (x[AT(bi, c, s)] - mean[c]) * r;
                    dx[AT(bi, c, s)] = w[c] * r * g[AT(bi, c, s)];
                }
            db[c] = sdy;
            dw[c] = sdyxh;
        }
    }
    free(g);
}
