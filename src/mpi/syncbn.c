/*
 * syncbn.c -- batch norm over the global batch (SyncBatchNorm,
 * include/teenycl_dist.h): every rank's x together, statistics combined in
 * rank order in double.
 *
 * Built from the eager batch-norm kernels, so that the statistics are the
 * kernels' own: a local training forward (into scratch running statistics)
 * gives each rank's per-channel mean and rstd, from which var = 1/rstd^2 -
 * eps in double; the ranks' (count, mean, var) rows are gathered and
 * combined in rank order (Chan's parallel formula, in double); the output
 * is the inference kernel run with the global mean and variance. The
 * backward is the frozen-statistics kernel (dx = dy * w * rstd, and the
 * local sums dbias = sum dy, dweight = sum dy * xhat), the two sums
 * gathered and added in rank order, and the correction
 * -w * rstd * (sum dy + xhat * sum dy xhat) / N, again a per-channel affine
 * map of x run by the inference kernel, added to dx.
 */
#include <math.h>
#include <stdlib.h>

#include "mpi/mpi_internal.h"

/* Allgather of one row of len doubles per rank; row[0] is the rank's ok
 * flag (1 or 0). *all_ok: every rank's flag was 1. */
static teeny_status gather_rows(teeny_dist *d, const double *row, int len, double *all, int *all_ok, const char *fn)
{
    teeny_status st = teeny__dist_allgather(d, row, all, len, MPI_DOUBLE, fn);
    *all_ok = st == TEENY_OK;
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (all[(size_t)r * (size_t)len] != 1.0) {
            *all_ok = 0;
            if (r != d->rank || row[0] == 1.0)
                teeny__dist_fail(d, TEENY_ERR_STATE,
                     "%s: rank %d failed its local part; running statistics and parameters are unchanged, "
                     "this call's other outputs unspecified", fn, r);
            break;
        }
    return st;
}

/* Shape facts both directions need: C and this rank's count per channel. */
static int bn_shape(const teeny_tensor *x, int64_t *C, int64_t *n)
{
    int nd = x ? teeny_tensor_ndim(x) : 0;
    if (nd != 2 && nd != 4)
        return 0;
    *C = teeny_tensor_dim(x, 1);
    *n = teeny_tensor_numel(x) / *C;
    return *C > 0 && *n > 0;
}

static teeny_status make_vec(teeny_ctx *ctx, int64_t C, const float *v, teeny_tensor **out)
{
    teeny_status st = teeny_tensor_create(ctx, 1, &C, out);
    if (st == TEENY_OK && v && (st = teeny_tensor_write(*out, v, (size_t)C)) != TEENY_OK) {
        teeny_tensor_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* The header exchange (op, ok, C, n) per rank: all must be ok (this
 * rank's local part: local) with one C. counts (size entries, may be
 * NULL) receives each rank's n. Where this rank failed its local part,
 * its own status and message stand for TEENY_ERR_STATE. */
static teeny_status bn_header(teeny_dist *d, int op, teeny_status local, int64_t C, int64_t n, double *counts,
                              int64_t *n_total, const char *fn)
{
    int ok = local == TEENY_OK;
    int64_t h[TEENY__DIST_HDR] = {op, ok, C, n};
    teeny_status st = teeny__dist_agree(d, h, fn);
    const int64_t *all = d->agree;
    *n_total = 0;
    for (int r = 0; st == TEENY_OK && r < d->size; r++)
        if (!all[TEENY__DIST_HDR * r + 1]) {
            if (r != d->rank || ok)
                teeny__dist_fail(d, TEENY_ERR_STATE,
                                 "%s: rank %d failed its local part; running statistics and parameters are unchanged, "
                                 "this call's other outputs unspecified", fn, r);
            return ok ? TEENY_ERR_STATE : local;
        }
    for (int r = 0; st == TEENY_OK && r < d->size; r++) {
        const int64_t *o = all + TEENY__DIST_HDR * r;
        if (o[2] != C)
            st = teeny__dist_fail(d, TEENY_ERR_SHAPE, "%s: rank %d has %lld channels, rank %d %lld", fn, d->rank,
                                  (long long)C, r, (long long)o[2]);
        *n_total += o[3];
        if (counts)
            counts[r] = (double)o[3];
    }
    return st == TEENY_ERR_STATE && !ok ? local : st;
}

/* A pass's host memory: n_vec vectors of C floats (*h), this rank's row of
 * 1 + 2C doubles to gather and room for every rank's (*all). */
static teeny_status bn_host(teeny_dist *d, int64_t C, int n_vec, float **h, double **row, double **all, const char *fn)
{
    *h = teeny__malloc((size_t)C * (size_t)n_vec * sizeof **h);
    *row = teeny__malloc((1 + 2 * (size_t)C) * sizeof **row);
    *all = teeny__malloc((1 + 2 * (size_t)C) * (size_t)d->size * sizeof **all);
    if (!*h || !*row || !*all)
        return teeny__dist_fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    return TEENY_OK;
}

teeny_status teeny_dist_batchnorm_forward_train(teeny_dist *d, teeny_ctx *ctx, const teeny_tensor *x,
                                                const teeny_tensor *weight, const teeny_tensor *bias,
                                                teeny_tensor *running_mean, teeny_tensor *running_var, float momentum,
                                                float eps, teeny_tensor *y, teeny_tensor *save_mean,
                                                teeny_tensor *save_rstd)
{
    const char *fn = "teeny_dist_batchnorm_forward_train";
    teeny_status st = teeny__dist_usable(d, fn), local = TEENY_OK;
    teeny_tensor *scratch_rm = NULL, *scratch_rv = NULL, *gvar_t = NULL;
    float *hm = NULL, *hr = NULL, *rm = NULL, *rv = NULL;
    double *row = NULL, *all = NULL, *counts = NULL;
    int64_t C = 0, n = 0, N = 0;
    if (st != TEENY_OK)
        return st;
    /* the local part: any failure here is carried to every rank */
    if (!ctx || !bn_shape(x, &C, &n) || !running_mean || !running_var || !save_mean || !save_rstd)
        local = teeny__dist_fail(d, TEENY_ERR_ARG, "%s: rank %d: NULL ctx or tensor, or x not [N, C] / [B, C, H, W]",
                                 fn, d->rank);
    if (local == TEENY_OK && (local = bn_host(d, C, 4, &hm, &row, &all, fn)) == TEENY_OK)
        hr = hm + C, rm = hm + 2 * C, rv = hm + 3 * C;
    if (local == TEENY_OK &&
        ((local = make_vec(ctx, C, NULL, &scratch_rm)) != TEENY_OK ||
         (local = make_vec(ctx, C, NULL, &scratch_rv)) != TEENY_OK ||
         (local = teeny_tensor_fill(scratch_rm, 0.0f)) != TEENY_OK ||
         (local = teeny_tensor_fill(scratch_rv, 1.0f)) != TEENY_OK ||
         (local = teeny_batchnorm_forward_train(ctx, x, weight, bias, scratch_rm, scratch_rv, momentum, eps, y,
                                                save_mean, save_rstd)) != TEENY_OK ||
         (local = teeny_tensor_read(save_mean, hm, (size_t)C)) != TEENY_OK ||
         (local = teeny_tensor_read(save_rstd, hr, (size_t)C)) != TEENY_OK ||
         (local = teeny_tensor_read(running_mean, rm, (size_t)C)) != TEENY_OK ||
         (local = teeny_tensor_read(running_var, rv, (size_t)C)) != TEENY_OK))
        teeny__dist_fail(d, local, "%s: rank %d: the local statistics: %s", fn, d->rank, teeny_last_error(ctx));
    counts = teeny__malloc((size_t)d->size * sizeof *counts);
    if (!counts && local == TEENY_OK)
        local = teeny__dist_fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    if ((st = bn_header(d, TEENY__DIST_OP_BN_FORWARD, local, C, n, counts, &N, fn)) != TEENY_OK)
        goto cleanup;
    row[0] = 1.0;
    for (int64_t c = 0; c < C; c++) {
        row[1 + c] = hm[c];
        row[1 + C + c] = 1.0 / ((double)hr[c] * hr[c]) - (double)eps; /* the kernel's biased variance */
    }
    int all_ok;
    if ((st = gather_rows(d, row, (int)(1 + 2 * C), all, &all_ok, fn)) != TEENY_OK)
        goto cleanup;
    for (int64_t c = 0; c < C; c++) {
        double mean = 0, m2 = 0;
        size_t stride = 1 + 2 * (size_t)C;
        for (int r = 0; r < d->size; r++)
            mean += counts[r] * all[(size_t)r * stride + 1 + (size_t)c];
        mean /= (double)N;
        for (int r = 0; r < d->size; r++) {
            double dm = all[(size_t)r * stride + 1 + (size_t)c] - mean;
            m2 += counts[r] * (all[(size_t)r * stride + 1 + (size_t)C + (size_t)c] + dm * dm);
        }
        double var = m2 / (double)N;
        hm[c] = (float)mean;
        hr[c] = (float)(1.0 / sqrt(var + (double)eps));
        row[1 + C + c] = var; /* keep the double for the running update */
        rm[c] = (float)((1.0 - momentum) * rm[c] + momentum * mean);
        rv[c] = (float)((1.0 - momentum) * rv[c] + momentum * (N > 1 ? var * (double)N / (double)(N - 1) : var));
    }
    /* the global mean and variance through the inference kernel */
    float *gv = teeny__malloc((size_t)C * sizeof *gv);
    if (!gv) {
        st = teeny__dist_fail(d, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
        goto cleanup;
    }
    for (int64_t c = 0; c < C; c++)
        gv[c] = (float)row[1 + C + c];
    if ((st = make_vec(ctx, C, gv, &gvar_t)) != TEENY_OK || (st = teeny_tensor_write(save_mean, hm, (size_t)C)) ||
        (st = teeny_batchnorm_forward_infer(ctx, x, weight, bias, save_mean, gvar_t, eps, y)) ||
        (st = teeny_tensor_write(save_rstd, hr, (size_t)C)) || (st = teeny_tensor_write(running_mean, rm, (size_t)C)) ||
        (st = teeny_tensor_write(running_var, rv, (size_t)C)) || (st = teeny_ctx_finish(ctx)))
        teeny__dist_fail(d, st, "%s: rank %d: %s", fn, d->rank, teeny_last_error(ctx));
    teeny__free(gv);
cleanup:
    teeny_tensor_destroy(scratch_rm);
    teeny_tensor_destroy(scratch_rv);
    teeny_tensor_destroy(gvar_t);
    teeny__free(hm);
    teeny__free(row);
    teeny__free(all);
    teeny__free(counts);
    return st;
}

teeny_status teeny_dist_batchnorm_backward_train(teeny_dist *d, teeny_ctx *ctx, const teeny_tensor *x,
                                                 const teeny_tensor *dy, const teeny_tensor *weight,
                                                 const teeny_tensor *save_mean, const teeny_tensor *save_rstd,
                                                 float eps, teeny_tensor *dx, teeny_tensor *dweight,
                                                 teeny_tensor *dbias)
{
    const char *fn = "teeny_dist_batchnorm_backward_train";
    teeny_status st = teeny__dist_usable(d, fn), local = TEENY_OK;
    teeny_tensor *var_t = NULL, *a_t = NULL, *b_t = NULL, *corr = NULL;
    float *h = NULL;
    double *row = NULL, *all = NULL;
    int64_t C = 0, n = 0, N = 0;
    if (st != TEENY_OK)
        return st;
    if (!ctx || !bn_shape(x, &C, &n) || !weight || !save_mean || !save_rstd || !dx || !dweight || !dbias)
        local = teeny__dist_fail(d, TEENY_ERR_ARG, "%s: rank %d: NULL ctx or tensor, or x not [N, C] / [B, C, H, W]",
                                 fn, d->rank);
    if (local == TEENY_OK)
        local = bn_host(d, C, 6, &h, &row, &all, fn);
    float *rstd = NULL, *w = NULL, *var = NULL, *sdw = NULL, *sdb = NULL, *coef = NULL;
    if (h)
        rstd = h, w = h + C, var = h + 2 * C, sdw = h + 3 * C, sdb = h + 4 * C, coef = h + 5 * C;
    if (local == TEENY_OK && ((local = teeny_tensor_read(save_rstd, rstd, (size_t)C)) != TEENY_OK ||
                              (local = teeny_tensor_read(weight, w, (size_t)C)) != TEENY_OK))
        teeny__dist_fail(d, local, "%s: rank %d: %s", fn, d->rank, teeny_last_error(ctx));
    if (local == TEENY_OK) {
        for (int64_t c = 0; c < C; c++)
            var[c] = (float)(1.0 / ((double)rstd[c] * rstd[c]) - (double)eps);
        int64_t shape[4];
        for (int i = 0; i < teeny_tensor_ndim(x); i++)
            shape[i] = teeny_tensor_dim(x, i);
        /* dx = dy * w * rstd; dweight, dbias: this rank's sums */
        if ((local = make_vec(ctx, C, var, &var_t)) != TEENY_OK ||
            (local = teeny_batchnorm_backward_frozen(ctx, x, dy, weight, save_mean, var_t, eps, dx, dweight, dbias)) !=
                TEENY_OK ||
            (local = teeny_tensor_read(dweight, sdw, (size_t)C)) != TEENY_OK ||
            (local = teeny_tensor_read(dbias, sdb, (size_t)C)) != TEENY_OK ||
            (local = teeny_tensor_create(ctx, teeny_tensor_ndim(x), shape, &corr)) != TEENY_OK)
            teeny__dist_fail(d, local, "%s: rank %d: the local sums: %s", fn, d->rank, teeny_last_error(ctx));
    }
    if ((st = bn_header(d, TEENY__DIST_OP_BN_BACKWARD, local, C, n, NULL, &N, fn)) != TEENY_OK)
        goto cleanup;
    row[0] = 1.0;
    for (int64_t c = 0; c < C; c++) {
        row[1 + c] = sdb[c];
        row[1 + C + c] = sdw[c];
    }
    int all_ok;
    if ((st = gather_rows(d, row, (int)(1 + 2 * C), all, &all_ok, fn)) != TEENY_OK)
        goto cleanup;
    /* correction = -w * rstd / N * (sum dy + xhat * sum dy xhat): the
     * inference kernel computes xhat * a + b with a, b per channel */
    for (int64_t c = 0; c < C; c++) {
        double s_dy = 0, s_dyx = 0, k;
        size_t stride = 1 + 2 * (size_t)C;
        for (int r = 0; r < d->size; r++) {
            s_dy += all[(size_t)r * stride + 1 + (size_t)c];
            s_dyx += all[(size_t)r * stride + 1 + (size_t)C + (size_t)c];
        }
        k = -(double)w[c] * (double)rstd[c] / (double)N;
        coef[c] = (float)(k * s_dyx);
        sdb[c] = (float)(k * s_dy); /* reused as the correction's bias */
    }
    if ((st = make_vec(ctx, C, coef, &a_t)) != TEENY_OK || (st = make_vec(ctx, C, sdb, &b_t)) != TEENY_OK ||
        (st = teeny_batchnorm_forward_infer(ctx, x, a_t, b_t, save_mean, var_t, eps, corr)) != TEENY_OK ||
        (st = teeny_add(ctx, dx, corr, dx)) != TEENY_OK || (st = teeny_ctx_finish(ctx)) != TEENY_OK)
        teeny__dist_fail(d, st, "%s: rank %d: %s", fn, d->rank, teeny_last_error(ctx));
cleanup:
    teeny_tensor_destroy(var_t);
    teeny_tensor_destroy(a_t);
    teeny_tensor_destroy(b_t);
    teeny_tensor_destroy(corr);
    teeny__free(h);
    teeny__free(row);
    teeny__free(all);
    return st;
}
