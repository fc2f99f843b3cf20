/*
 * bn_demo -- a batch-norm training step and its backward pass on the
 * default device (or --device SPEC), checked against a plain C
 * computation, with what it did printed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h" /* --help, --version, the command-line errors: as every teenycl program */
#include "teenycl.h"

#define CHECK(call)                                                                                    \
    do {                                                                                               \
        teeny_status st_ = (call);                                                                     \
        if (st_ != TEENY_OK) {                                                                         \
            fprintf(stderr, "%s failed: %s: %s\n", #call, teeny_status_name(st_), teeny_last_error(ctx)); \
            return 1;                                                                                  \
        }                                                                                              \
    } while (0)

static const cli_opt OPTS[] = {
    {"--device", "SPEC", "the OpenCL device: cpu, gpu, pocl, nvidia, P:D, a part of its name\n"
                         "(default: TEENY_DEVICE, else the first GPU, else the first CPU)"},
    {NULL, NULL, NULL},
};

static const cli_spec SPEC = {
    "bn_demo",
    "[--device SPEC]",
    "A batch-norm training step and its backward pass, checked against a plain C computation.",
    OPTS,
    "Exit status: 0 the results match; 1 they do not, or a failure; 2 a bad command line.",
};

int main(int argc, char **argv)
{
    enum { B = 16, C = 8, H = 24, W = 24, N = B * C * H * W };
    const char *spec = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int k = cli_next(&SPEC, argc, argv, &i, &v);
        if (k == CLI_EXIT_OK || k == CLI_EXIT_USAGE)
            return k == CLI_EXIT_OK ? 0 : 2;
        if (k == CLI_ARG)
            return cli_fail(&SPEC, "it takes no arguments besides its options");
        spec = v;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    teeny_ctx *ctx = NULL;
    if (teeny_ctx_create(spec, &ctx) != TEENY_OK) {
        fprintf(stderr, "%s\n", teeny_last_error(NULL));
        return 1;
    }
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *dy = malloc(N * sizeof *dy),
          *dx = malloc(N * sizeof *dx);
    float mean[C], rstd[C], rm[C], rv[C], dw[C], db[C];
    if (!x || !y || !dy || !dx)
        return 1;
    unsigned s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = 3.0f + 2.0f * ((float)(s >> 8) / 16777216.0f - 0.5f) * (float)(1 + (i / (H * W)) % C);
        s = s * 1664525u + 1013904223u;
        dy[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    int64_t xs[4] = {B, C, H, W}, cs[1] = {C};
    teeny_tensor *tx, *ty, *tdy, *tdx, *w, *b, *trm, *trv, *tm, *tr, *tdw, *tdb;
    CHECK(teeny_tensor_create(ctx, 4, xs, &tx));
    CHECK(teeny_tensor_create(ctx, 4, xs, &ty));
    CHECK(teeny_tensor_create(ctx, 4, xs, &tdy));
    CHECK(teeny_tensor_create(ctx, 4, xs, &tdx));
    teeny_tensor **vecs[] = {&w, &b, &trm, &trv, &tm, &tr, &tdw, &tdb};
    for (int i = 0; i < 8; i++)
        CHECK(teeny_tensor_create(ctx, 1, cs, vecs[i]));
    CHECK(teeny_tensor_write(tx, x, N));
    CHECK(teeny_tensor_write(tdy, dy, N));
    CHECK(teeny_tensor_fill(w, 1.5f));
    CHECK(teeny_tensor_fill(b, 0.25f));
    CHECK(teeny_tensor_fill(trm, 0.0f));
    CHECK(teeny_tensor_fill(trv, 1.0f));
    CHECK(teeny_batchnorm_forward_train(ctx, tx, w, b, trm, trv, 0.1f, 1e-5f, ty, tm, tr));
    CHECK(teeny_batchnorm_backward_train(ctx, tx, tdy, w, tm, tr, tdx, tdw, tdb));
    CHECK(teeny_tensor_read(ty, y, N));
    CHECK(teeny_tensor_read(tm, mean, C));
    CHECK(teeny_tensor_read(tr, rstd, C));
    CHECK(teeny_tensor_read(trm, rm, C));
    CHECK(teeny_tensor_read(trv, rv, C));
    CHECK(teeny_tensor_read(tdw, dw, C));
    CHECK(teeny_tensor_read(tdb, db, C));

    printf("batch-norm training step on %s: x [%d, %d, %d, %d]\n", teeny_ctx_device_name(ctx), B, C, H, W);
    double worst = 0;
    for (int c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int bb = 0; bb < B; bb++)
            for (int i = 0; i < H * W; i++)
                m += x[(bb * C + c) * H * W + i];
        m /= B * H * W;
        for (int bb = 0; bb < B; bb++)
            for (int i = 0; i < H * W; i++) {
                double d = x[(bb * C + c) * H * W + i] - m;
                v += d * d;
            }
        v /= B * H * W;
        worst = fmax(worst, fabs(mean[c] - m) + fabs(rstd[c] - 1 / sqrt(v + 1e-5)) / (1 / sqrt(v)));
        printf("  channel %d: mean %.5f rstd %.5f running_mean %.5f running_var %.5f dweight %.4f dbias %.4f\n", c,
               mean[c], rstd[c], rm[c], rv[c], dw[c], db[c]);
    }
    printf("batch statistics match a double-precision recomputation to %.2e\n", worst);
    for (int i = 0; i < 8; i++)
        teeny_tensor_destroy(*vecs[i]);
    teeny_tensor_destroy(tx);
    teeny_tensor_destroy(ty);
    teeny_tensor_destroy(tdy);
    teeny_tensor_destroy(tdx);
    teeny_ctx_destroy(ctx);
    free(x);
    free(y);
    free(dy);
    free(dx);
    return worst < 1e-3 ? 0 : 1;
}
