/*
 * run_onnx.c -- the README's "Embed it in C": load an ONNX model, run it
 * once on the default device and print its first output. The model's first
 * input gets the value 0.5 everywhere; a real program writes its own data.
 *
 *     build/run_onnx tests/onnx/convnet.onnx
 */
#include <stdio.h>
#include <stdlib.h>

#include "teenycl.h"
#include "teenycl_onnx.h"

int main(int argc, char **argv)
{
    teeny_ctx *ctx = NULL;
    teeny_onnx_model *model = NULL;
    teeny_plan *plan = NULL;
    teeny_tensor *in;
    teeny_node node;
    int64_t shape[TEENY_ONNX_MAX_DIMS], n = 1;
    int ndim, rc = 1;
    float *out = NULL;
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.onnx\n", argv[0]);
        return 2;
    }
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.training = 0; /* inference: no loss, no gradients */
    if (teeny_ctx_create(NULL, &ctx) != TEENY_OK || teeny_onnx_load(ctx, argv[1], NULL, &model) != TEENY_OK ||
        (pp.batch = teeny_onnx_batch(model), teeny_graph_compile(teeny_onnx_graph(model), &pp, &plan)) != TEENY_OK ||
        teeny_onnx_input(model, 0, NULL, &node, NULL) != TEENY_OK || teeny_plan_tensor(plan, node, &in) != TEENY_OK ||
        teeny_tensor_fill(in, 0.5f) != TEENY_OK || teeny_plan_forward(plan) != TEENY_OK ||
        teeny_onnx_output(model, 0, NULL, NULL, &ndim, shape) != TEENY_OK)
        goto done;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    if (!(out = malloc((size_t)n * sizeof *out)) || teeny_onnx_output_read(model, plan, 0, out, (size_t)n) != TEENY_OK)
        goto done;
    for (int64_t i = 0; i < n && i < 10; i++)
        printf("%g%s", out[i], i + 1 < n && i < 9 ? " " : n > 10 ? " ...\n" : "\n");
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "run_onnx: %s\n", ctx ? teeny_last_error(ctx) : teeny_last_error(NULL));
    free(out);
    teeny_plan_destroy(plan);
    teeny_onnx_destroy(model);
    teeny_ctx_destroy(ctx);
    return rc;
}
