/* norm_ref.c -- float64 softmax and layer-norm references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "norm_ref.h"

void ref_softmax(const double *x, int64_t outer, int64_t L, int64_t inner, int log_out, double *y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *xl = x + o * L * inner + i;
            double *yl = y + o * L * inner + i, m = -INFINITY, s = 0;
            for (int64_t l = 0; l < L; l++)
                m = fmax(m, xl[l * inner]);
            for (int64_t l = 0; l < L; l++)
                s += exp(xl[l * inner] - m);
            for (int64_t l = 0; l < L; l++)
                yl[l * inner] = log_out ? xl[l * inner] - m - log(s) : exp(xl[l * inner] - m) / s;
        }
}

void ref_softmax_backward(const double *y, const double *dy, int64_t outer, int64_t L, int64_t inner, int log_out,
                          double *dx)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * L * inner + i;
            double s = 0;
            for (int64_t l = 0; l < L; l++)
                s += log_out ? dy[base + l * inner] : dy[base + l * inner] * y[base + l * inner];
            for (int64_t l = 0; l < L; l++) {
                int64_t k = base + l * inner;
                dx[k] = log_out ? dy[k] - exp(y[k]) * s : y[k] * (dy[k] - s);
            }
        }
}

static void stats(const double *x, int64_t N, double eps, double *mu, double *rs)
{
    double s = 0, v = 0;
    for (int64_t i = 0; i < N; i++)
        s += x[i];
    *mu = s / (double)N;
    for (int64_t i = 0; i < N; i++)
        v += (x[i] - *mu) * (x[i] - *mu);
    *rs = 1 / sqrt(v / (double)N + eps);
}

void ref_layernorm(const double *x, int64_t M, int64_t N, const double *w, const double *b, double eps, double *y,
                   double *mean, double *rstd)
{
    for (int64_t r = 0; r < M; r++) {
        double mu, rs;
        stats(x + r * N, N, eps, &mu, &rs);
        for (int64_t i = 0; i < N; i++)
            y[r * N + i] = (x[r * N + i] - mu) * rs * w[i] + (b ? b[i] : 0);
        if (mean)
            mean[r] = mu;
        if (rstd)
            rstd[r] = rs;
    }
}

void ref_layernorm_backward(const double *x, int64_t M, int64_t N, const double *w, const double *dy, double eps,
                            double *dx, double *dw, double *db)
{
    if (dw)
        memset(dw, 0, (size_t)N * sizeof *dw);
    if (db)
        memset(db, 0, (size_t)N * sizeof *db);
    for (int64_t r = 0; r < M; r++) {
        const double *xr = x + r * N, *gr = dy + r * N;
        double mu, rs, sg = 0, sgx = 0;
        stats(xr, N, eps, &mu, &rs);
        for (int64_t i = 0; i < N; i++) {
            double xh = (xr[i] - mu) * rs;
            sg += gr[i] * w[i];
            sgx += gr[i] * w[i] * xh;
            if (dw)
                dw[i] += gr[i] * xh;
            if (db)
                db[i] += gr[i];
        }
        for (int64_t i = 0; dx && i < N; i++)
            dx[r * N + i] = rs * (gr[i] * w[i] - sg / (double)N - (xr[i] - mu) * rs * sgx / (double)N);
    }
}
