/*
 * bench_conv2d.c -- grouped 2-D convolution forward and backward (dx + dw)
 * on ResNet, depthwise, grouped, stem and Fashion-MNIST layer shapes,
 * counting the flops of the direct algorithm, 2*B*Cout*OH*OW*(Cin/G)*KH*KW
 * per forward and twice that per backward, and the compulsory bytes: x, w
 * read and y written forward; x, w, dy read and dx, dw written backward.
 * The backward computes dx and dw (no bias). bench/compare_torch.py times
 * the same cases in PyTorch from their JSON shape.
 */
#include <inttypes.h>
#include <stdio.h>

#include "bench.h"

typedef struct {
    teeny_conv2d_params p;
    teeny_tensor *x, *w, *y, *dy, *dx, *dw;
} conv_args;

static teeny_status fwd(teeny_ctx *ctx, void *v)
{
    conv_args *a = v;
    return teeny_conv2d_forward(ctx, &a->p, a->x, a->w, NULL, a->y);
}

static teeny_status bwd(teeny_ctx *ctx, void *v)
{
    conv_args *a = v;
    return teeny_conv2d_backward(ctx, &a->p, a->x, a->w, a->dy, a->dx, a->dw, NULL);
}

int bench_conv2d(teeny_ctx *ctx, const bench_opts *o)
{
    static const struct {
        const char *name;
        int64_t x[4];
        int cout, k, stride, pad, groups;
    } cases[] = {
        {"conv_resnet_3x3_64to64_56_b32", {32, 64, 56, 56}, 64, 3, 1, 1, 1},
        {"conv_resnet_3x3_128to128_28_b32", {32, 128, 28, 28}, 128, 3, 1, 1, 1},
        {"conv_resnet_3x3_256to256_14_b32", {32, 256, 14, 14}, 256, 3, 1, 1, 1},
        {"conv_resnet_3x3_512to512_7_b32", {32, 512, 7, 7}, 512, 3, 1, 1, 1},
        {"conv_resnet_1x1_256to64_56_b32", {32, 256, 56, 56}, 64, 1, 1, 0, 1},
        {"conv_resnet_3x3s2_128to256_56_b32", {32, 128, 56, 56}, 256, 3, 2, 1, 1},
        {"conv_depthwise_3x3_256_56_b32", {32, 256, 56, 56}, 256, 3, 1, 1, 256},
        {"conv_grouped4_3x3_128_28_b32", {32, 128, 28, 28}, 128, 3, 1, 1, 4},
        {"conv_stem_7x7s2_3to64_224_b32", {32, 3, 224, 224}, 64, 7, 2, 3, 1},
        {"conv_fashion_3x3_1to32_28_b128", {128, 1, 28, 28}, 32, 3, 1, 1, 1},
        {"conv_fashion_3x3s2_32to64_28_b128", {128, 32, 28, 28}, 64, 3, 2, 1, 1},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!bench_wanted(o, cases[i].name))
            continue;
        conv_args a = {TEENY_CONV2D_PARAMS_INIT, NULL, NULL, NULL, NULL, NULL, NULL};
        a.p.stride[0] = a.p.stride[1] = cases[i].stride;
        a.p.pad[0] = a.p.pad[1] = cases[i].pad;
        a.p.groups = cases[i].groups;
        int64_t ws[4] = {cases[i].cout, cases[i].x[1] / cases[i].groups, cases[i].k, cases[i].k}, ys[4];
        if (teeny_conv2d_output_shape(&a.p, cases[i].x, ws, ys) != TEENY_OK) {
            fprintf(stderr, "bench %s: %s\n", cases[i].name, teeny_last_error(NULL));
            failed = 1;
            continue;
        }
        a.x = bench_tensor(ctx, 4, cases[i].x, 1);
        a.w = bench_tensor(ctx, 4, ws, 2);
        a.y = bench_tensor(ctx, 4, ys, 3);
        a.dy = bench_tensor(ctx, 4, ys, 4);
        a.dx = bench_tensor(ctx, 4, cases[i].x, 5);
        a.dw = bench_tensor(ctx, 4, ws, 6);
        double flops = 2.0 * (double)ys[0] * ys[1] * ys[2] * ys[3] * ws[1] * ws[2] * ws[3];
        double nx = (double)cases[i].x[0] * cases[i].x[1] * cases[i].x[2] * cases[i].x[3];
        double nw = (double)ws[0] * ws[1] * ws[2] * ws[3], ny = (double)ys[0] * ys[1] * ys[2] * ys[3];
        char shape[256];
        snprintf(shape, sizeof shape,
                 "{\"op\": \"conv2d\", \"x\": [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "], "
                 "\"w\": [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "], \"stride\": %d, \"pad\": %d, "
                 "\"groups\": %d}",
                 cases[i].x[0], cases[i].x[1], cases[i].x[2], cases[i].x[3], ws[0], ws[1], ws[2], ws[3],
                 cases[i].stride, cases[i].pad, cases[i].groups);
        bench_case fc = {"conv2d", cases[i].name, "fwd", shape, flops, 4 * (nx + nw + ny)};
        bench_case bc = {"conv2d", cases[i].name, "bwd", shape, 2 * flops, 4 * (2 * nx + 2 * nw + ny)};
        if (!a.x || !a.w || !a.y || !a.dy || !a.dx || !a.dw) {
            bench_report_error(o, &fc, "allocation failed");
            failed = 1;
        } else {
            failed |= bench_run(ctx, o, &fc, fwd, &a);
            failed |= bench_run(ctx, o, &bc, bwd, &a);
        }
        teeny_tensor *all[] = {a.x, a.w, a.y, a.dy, a.dx, a.dw};
        for (int j = 0; j < 6; j++)
            teeny_tensor_destroy(all[j]);
    }
    return failed;
}
